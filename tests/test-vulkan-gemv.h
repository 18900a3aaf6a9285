/*
 * test-vulkan-gemv.h — test-vulkan's decode-GEMV tests (gemv_pick, gemv_variants, gemv_sg_red)
 * and the attention kernel's choice (attn_pick), kept out
 * of test-vulkan.c for its size. Not a header of its own: test-vulkan.c includes it once, and
 * it uses that file's helpers (hx_t_matmul, hx_t_run, hx_t_vk_open_gemm, ...).
 */
/* ---- the decode GEMV variant (vulkan-pick.h) ------------------------------------------------ */

/* The GEMV plan on synthetic devices through the backend's own functions: invocations per row
 * by unit size and subgroup size, workgroup limits, the fallback to mmv, and split K. */
TEST(gemv_pick)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *dev = hx_t_vk_open(NULL, NULL);
    ASSERT_TRUE(dev != NULL);
    const struct hx_vk_pick_api *api = hx__dev_extension(dev, "hx.vk.pick");
    ASSERT_TRUE(api && api->gemv_plan && api->gemv_mode);
    ASSERT_EQ(api->gemv_mode("auto"), HX_VK_GEMV_AUTO);
    ASSERT_EQ(api->gemv_mode("mmv"), HX_VK_GEMV_MMV);
    ASSERT_EQ(api->gemv_mode("wide"), HX_VK_GEMV_WIDE);
    ASSERT_EQ(api->gemv_mode("split"), HX_VK_GEMV_SPLIT);
    ASSERT_EQ(api->gemv_mode("bogus"), -1);
    struct hx_vk_gemv_plan g, g2;
    /* Q8_0 (32-element units) at the LM head: a subgroup of 32 (or 64) per row, no split */
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 1024, 151936, true, &g);
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.lpr == 32 && g.nr == 4 && g.ks == 1);
    api->gemv_plan(HX_VK_GEMV_AUTO, 64, 1024, 32, 1024, 151936, true, &g);
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.lpr == 64 && g.nr == 2 && g.ks == 1);
    api->gemv_plan(HX_VK_GEMV_AUTO, 8, 1024, 32, 1024, 151936, true, &g); /* lavapipe */
    ASSERT_TRUE(g.lpr == 32 && g.nr == 4);
    api->gemv_plan(HX_VK_GEMV_AUTO, 64, 64, 32, 1024, 4096, true, &g); /* 64-invocation cap */
    ASSERT_TRUE(g.lpr == 64 && g.nr == 1);
    /* 256-element blocks: 4 invocations per row, 32 rows a workgroup; 128 and 64: 8 and 16 */
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 256, 1024, 151936, true, &g);
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.lpr == 4 && g.nr == 32 && g.ks == 1);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 128, 1024, 4096, true, &g);
    ASSERT_TRUE(g.lpr == 8 && g.nr == 16);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 64, 1024, 4096, true, &g);
    ASSERT_TRUE(g.lpr == 16 && g.nr == 8);
    /* the older kernel: asked for, or K not whole units (I2_S, walked in 256s, at 3 × 128) */
    api->gemv_plan(HX_VK_GEMV_MMV, 32, 1024, 32, 1024, 4096, true, &g);
    ASSERT_EQ(g.kernel, HX_VK_GEMV_MMV);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 256, 384, 4096, true, &g);
    ASSERT_EQ(g.kernel, HX_VK_GEMV_MMV);
    /* K tails: any whole number of 32-element units takes the wide kernel */
    static const int64_t tails[] = {32, 288, 800, 1056, 4128};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, tails[i], 4096, true, &g);
        ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.ks == 1 && g.ku == tails[i] / 32);
    }
    /* ... and just above the split boundary (33 units over 32 invocations): 2 splits of 32 */
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 1056, 1024, true, &g);
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.ks == 2 && g.ku == 32);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 1024, 1024, true, &g); /* at it: no split */
    ASSERT_EQ(g.ks, 1u);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 128, 384, 1024, true, &g); /* Q1_0: 3 blocks */
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.lpr == 8 && g.ks == 1);
    /* split K on few rows: 3072 -> 1024 Q8_0 (96 units, 32 per row: 3 splits of 32) */
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 3072, 1024, true, &g);
    ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.ks == 3 && g.ku == 32);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 2048, 1024, true, &g);
    ASSERT_TRUE(g.ks == 2 && g.ku == 32);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 1024, 1024, true, &g); /* one unit a lane */
    ASSERT_EQ(g.ks, 1u);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 8192, 1024, true, &g); /* at most 4 */
    ASSERT_TRUE(g.ks == 4 && g.ku == 64);
    api->gemv_plan(HX_VK_GEMV_AUTO, 32, 1024, 32, 3072, 4096, true, &g); /* many rows */
    ASSERT_EQ(g.ks, 1u);
    api->gemv_plan(HX_VK_GEMV_SPLIT, 32, 1024, 32, 3072, 4096, true, &g); /* forced */
    ASSERT_TRUE(g.ks == 3 && g.ku == 32);
    api->gemv_plan(HX_VK_GEMV_WIDE, 32, 1024, 32, 3072, 1024, true, &g); /* wide: never */
    ASSERT_EQ(g.ks, 1u);
    api->gemv_plan(HX_VK_GEMV_SPLIT, 32, 1024, 32, 3072, 1024, false, &g); /* chunked weight */
    ASSERT_EQ(g.ks, 1u);
    /* TQ2_0 3072 -> 1024: 12 units, 4 a row: 3 splits of 4; I2_S (also 256) the same plan */
    api->gemv_plan(HX_VK_GEMV_AUTO, 64, 1024, 256, 3072, 1024, true, &g);
    ASSERT_TRUE(g.lpr == 4 && g.ks == 3 && g.ku == 4);
    api->gemv_plan(HX_VK_GEMV_AUTO, 64, 1024, 256, 3072, 1024, true, &g2);
    ASSERT_TRUE(!memcmp(&g, &g2, sizeof g));
    /* the splits cover the units exactly once (K of 256 + 768 i, and 32-element tails) */
    for (int64_t k = 256; k <= 16384; k += 768)
        for (uint32_t ue = 32; ue <= 256; ue *= 2) {
            api->gemv_plan(HX_VK_GEMV_SPLIT, 32, 1024, ue, k, 64, true, &g);
            int64_t units = k / ue;
            ASSERT_TRUE(g.ks >= 1 && g.ks <= HX_VK_GEMV_KS_MAX && (g.ks == 1 || g.ku % g.lpr == 0));
            ASSERT_TRUE((int64_t)g.ks * g.ku >= units && (int64_t)(g.ks - 1) * g.ku < units);
        }
    for (int64_t k = 32; k <= 4128; k += 160) {
        api->gemv_plan(HX_VK_GEMV_SPLIT, 32, 1024, 32, k, 64, true, &g);
        ASSERT_TRUE(g.kernel == HX_VK_GEMV_WIDE && g.ks >= 1 && g.ks <= HX_VK_GEMV_KS_MAX);
        ASSERT_TRUE((int64_t)g.ks * g.ku >= k / 32 && (int64_t)(g.ks - 1) * g.ku < k / 32);
    }
    /* the required subgroup size on synthetic devices: NVIDIA (32 only), RADV (32 .. 64: the
     * 64 layout gets 64, the 32 one 32), Intel (8 .. 32), lavapipe (8 only), no control, a
     * workgroup of more subgroups than the device allows, a size the layout cannot take */
    ASSERT_TRUE(api->gemv_sg_required && api->gemv_red);
    struct hx_vk_sgctl nv = {true, 32, 32, 32}, radv = {true, 32, 64, 16},
                       intel = {true, 8, 32, 64}, lvp = {true, 8, 8, 32}, none = {false, 0, 0, 0};
    ASSERT_EQ(api->gemv_sg_required(&nv, 32, 128), 32u);
    ASSERT_EQ(api->gemv_sg_required(&radv, 64, 128), 64u);
    ASSERT_EQ(api->gemv_sg_required(&radv, 32, 128), 32u);
    ASSERT_EQ(api->gemv_sg_required(&intel, 32, 128), 32u);
    ASSERT_EQ(api->gemv_sg_required(&intel, 16, 128), 16u);
    ASSERT_EQ(api->gemv_sg_required(&lvp, 8, 128), 8u);
    ASSERT_EQ(api->gemv_sg_required(&lvp, 64, 128), 8u);
    ASSERT_EQ(api->gemv_sg_required(&none, 32, 128), 0u);
    ASSERT_EQ(api->gemv_sg_required(&lvp, 8, 512), 0u); /* 64 subgroups > 32 */
    ASSERT_EQ(api->gemv_sg_required(&nv, 16, 128), 0u); /* LPR 32 ok, but 32 > the layout's 16 */
    ASSERT_EQ(api->gemv_sg_required(&radv, 64, 32), 32u); /* a 32-invocation workgroup */
    /* the reduction of rows sharing a subgroup */
    char rwhy[96];
    ASSERT_EQ(api->gemv_red("auto", true, rwhy, sizeof rwhy), HX_VK_GEMV_RED_SHUFFLE);
    ASSERT_EQ(api->gemv_red("auto", false, rwhy, sizeof rwhy), HX_VK_GEMV_RED_SHARED);
    ASSERT_TRUE(rwhy[0] == 0);
    ASSERT_EQ(api->gemv_red("shared", true, rwhy, sizeof rwhy), HX_VK_GEMV_RED_SHARED);
    ASSERT_EQ(api->gemv_red("shuffle", false, rwhy, sizeof rwhy), HX_VK_GEMV_RED_SHARED);
    ASSERT_TRUE(strstr(rwhy, "lacks subgroup shuffles") != NULL);
    ASSERT_EQ(api->gemv_red("bogus", true, rwhy, sizeof rwhy), -1);
    hx__device_close(dev);
    /* a bad knob fails init with a message */
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    setenv("HX_VK_GEMV", "bogus", 1);
    int st = hx__device_open("vulkan", &cfg, &dev);
    unsetenv("HX_VK_GEMV");
    ASSERT_TRUE(st != HX_OK && strstr(hx_last_error(), "HX_VK_GEMV") != NULL);
    static const char *const bad_sg[] = {"48", "32x", "0"};
    for (int i = 0; i < 3; i++) {
        setenv("HX_VK_GEMV_SG", bad_sg[i], 1);
        st = hx__device_open("vulkan", &cfg, &dev);
        unsetenv("HX_VK_GEMV_SG");
        ASSERT_TRUE(st != HX_OK && strstr(hx_last_error(), "HX_VK_GEMV_SG") != NULL);
    }
    setenv("HX_VK_GEMV_RED", "tree", 1);
    st = hx__device_open("vulkan", &cfg, &dev);
    unsetenv("HX_VK_GEMV_RED");
    ASSERT_TRUE(st != HX_OK && strstr(hx_last_error(), "HX_VK_GEMV_RED") != NULL);
}

/* Under the sanitizers (lavapipe several times slower) gemv_variants runs the headline types
 * only. */
#if defined(__SANITIZE_ADDRESS__)
#define HX_T_GEMV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_T_GEMV_SANITIZED 1
#endif
#endif
#ifndef HX_T_GEMV_SANITIZED
#define HX_T_GEMV_SANITIZED 0
#endif

static struct hx_device *hx_t_vk_open_gemv(const char *int8, const char *gemv, const char *sg)
{
    setenv("HX_VK_GEMV", gemv, 1);
    if (sg) setenv("HX_VK_GEMV_SG", sg, 1);
    struct hx_device *dev = hx_t_vk_open_gemm("gpu", int8, "tiled");
    unsetenv("HX_VK_GEMV");
    unsetenv("HX_VK_GEMV_SG");
    return dev;
}

/* Each GEMV variant forced on this device (HX_VK_MATMUL=gpu; on lavapipe, subgroups of 8):
 * the older mmv, the wide kernel, the wide kernel with split K laid out for subgroups of the
 * device's size and of 64 (HX_VK_GEMV_SG), against ref (every type at m = 1; Q8_0, TQ2_0
 * and F16 also at m = 3); the dispatch counters ("hx.vk.gemv")
 * show which kernel ran; and I2_S == TQ2_0 bit for bit under split K. (matmul_variants runs
 * the auto choice, the wide kernel where K is whole 256s, for every type.) */
TEST(gemv_variants)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    /* int8 variants: 1e-7, not 1e-8. An activation whose int8 rounding is a near-tie may
     * round differently here and in quant.comp (seen with K = 2048 for the older mmv kernel
     * too: TQ1_0 m = 3, NMSE 3.9e-8); a wrong kernel is off by far more. */
    static const struct hx_t_variant vars[] = {{"gemv=split/dot", "gpu", "dot", "tiled", 1e-7},
                                               {"gemv=split64/emul", "gpu", "emul", "tiled", 1e-7},
                                               {"gemv=split/f32", "gpu", "off", "tiled", 0},
                                               {"gemv=mmv/dot", "gpu", "dot", "tiled", 1e-7},
                                               {"gemv=wide/dot", "gpu", "dot", "tiled", 1e-7}};
    struct hx_device *devs[5] = {
        hx_t_vk_open_gemv("dot", "split", NULL), hx_t_vk_open_gemv("emul", "split", "64"),
        hx_t_vk_open_gemv("off", "split", NULL), hx_t_vk_open_gemv("dot", "mmv", NULL),
        hx_t_vk_open_gemv("dot", "wide", NULL)};
    for (int i = 0; i < 5; i++) ASSERT_TRUE(devs[i] != NULL);
    bool ok = true;
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        if (!(devs[0]->info.weight_types & (1u << t))) continue;
        enum hx_dtype ty = (enum hx_dtype)t;
        bool few = ty == HX_DTYPE_Q8_0 || ty == HX_DTYPE_TQ2_0 || ty == HX_DTYPE_F16;
        if (HX_T_GEMV_SANITIZED && !few) continue; /* the Release run has every type */
        ok &= hx_t_matmul(devs, vars, few ? 5 : 3, ty, 1, 2048, 40);
        /* several rows per pass (the MR = 4 pipeline): every type runs it in matmul_variants
         * (m = 2, 1024 -> 1); split K here for the headline types */
        if (few) ok &= hx_t_matmul(devs, vars, 2, ty, 3, 2048, 24);
    }
    uint64_t *c[5];
    for (int i = 0; i < 5; i++) {
        c[i] = hx__dev_extension(devs[i], "hx.vk.gemv");
        ASSERT_TRUE(c[i] != NULL);
        fprintf(stderr, "  %-18s GEMV dispatches: mmv %llu, wide %llu, wide split-K %llu\n",
                vars[i].name, (unsigned long long)c[i][0], (unsigned long long)c[i][1],
                (unsigned long long)c[i][2]);
    }
    for (int i = 0; i < 3; i++) ASSERT_TRUE(c[i][2] > 0 && c[i][0] == 0);
    ASSERT_TRUE(c[3][0] > 0 && c[3][1] == 0 && c[3][2] == 0);
    ASSERT_TRUE(c[4][1] > 0 && c[4][0] == 0 && c[4][2] == 0);
    /* I2_S and TQ2_0 walk the same 256-element units and splits: the same bits */
    const float s = 0.0625f;
    static const int64_t shapes[][3] = {{1, 2048, 40}, {2, 3072, 24}};
    for (size_t sh = 0; sh < 2; sh++) {
        int64_t m = shapes[sh][0], k = shapes[sh][1], n = shapes[sh][2];
        struct hx_weight wt, wi;
        ASSERT_OK(hx_t_tern_twins(n, k, s, &wt, &wi));
        float *x = hx_t_act(m * k);
        struct hx_t_case ct = hx_t_matmul_case(&wt, x, m);
        struct hx_t_case ci = ct;
        ci.desc.wtype = HX_DTYPE_I2_S;
        ci.w = &wi;
        size_t cnt = (size_t)(m * n);
        for (int v = 0; v < 3; v++) {
            float *gt = calloc(cnt, sizeof *gt), *gi = calloc(cnt, sizeof *gi);
            bool g1, g2;
            bool same = hx_t_run(devs[v], &ct, gt, &g1) == HX_OK &&
                        hx_t_run(devs[v], &ci, gi, &g2) == HX_OK && g1 && g2 &&
                        !memcmp(gt, gi, cnt * sizeof *gt);
            fprintf(stderr, "  %s %-18s m=%lld %lld->%lld: I2_S %s TQ2_0\n", same ? "ok  " : "FAIL",
                    vars[v].name, (long long)m, (long long)k, (long long)n, same ? "==" : "!=");
            ok &= same;
            free(gt), free(gi);
        }
        free(x), free((void *)wt.data), free((void *)wi.data);
    }
    for (int i = 0; i < 5; i++) hx__device_close(devs[i]);
    ASSERT_TRUE(ok);
}

static struct hx_device *hx_t_vk_open_gemv_red(const char *int8, const char *gemv, const char *sg,
                                               const char *red)
{
    setenv("HX_VK_GEMV_RED", red, 1);
    struct hx_device *dev = hx_t_vk_open_gemv(int8, gemv, sg);
    unsetenv("HX_VK_GEMV_RED");
    return dev;
}

/* One weight of type t, K × 24, m = 1 on devices devs[0 .. n): the same bits on all. */
static bool hx_t_same_bits(struct hx_device **devs, const char *const *names, int n,
                           enum hx_dtype t, int64_t k)
{
    const int64_t rows = 24;
    struct hx_weight w;
    void *data = hx_t_weight(t, rows, k, &w);
    float *x = hx_t_act(k), *o0 = calloc((size_t)rows, 4), *oi = calloc((size_t)rows, 4);
    struct hx_t_case c = hx_t_matmul_case(&w, x, 1);
    bool g, ok = hx_t_run(devs[0], &c, o0, &g) == HX_OK && g;
    for (int i = 1; ok && i < n; i++) {
        ok = hx_t_run(devs[i], &c, oi, &g) == HX_OK && g && !memcmp(o0, oi, (size_t)rows * 4);
        if (!ok)
            fprintf(stderr, "  FAIL %s m=1 %lld->%lld: %s != %s\n", hx_dtype_name(t),
                    (long long)k, (long long)rows, names[i], names[0]);
    }
    free(x), free(o0), free(oi), free(data);
    return ok;
}

/* The wide GEMV's pipeline-creation choices forced on this device (lavapipe: subgroups of 8,
 * size control 8 .. 8, shuffles): the subgroup size required (HX_VK_GEMV_SG=auto) or left
 * to the driver (off), rows sharing a subgroup reduced by shuffles or shared memory
 * (HX_VK_GEMV_RED), on K tails of every type (K = one unit, 9 and 33 units: for the 32-element
 * types 32, 288 and 1056, 33 units being just above the split boundary of 32 invocations per
 * row), against ref; the three int8-dot devices give the same bits (the shuffle butterfly adds
 * in the shared tree's order, and the subgroup size is the same). */
TEST(gemv_sg_red)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    static const struct hx_t_variant vars[] = {{"split/dot", "gpu", "dot", "tiled", 1e-7},
                                               {"split/dot/shared", "gpu", "dot", "tiled", 1e-7},
                                               {"split/dot/sg-off", "gpu", "dot", "tiled", 1e-7},
                                               {"split/f32", "gpu", "off", "tiled", 0},
                                               {"wide/emul", "gpu", "emul", "tiled", 1e-7}};
    struct hx_device *devs[5] = {hx_t_vk_open_gemv_red("dot", "split", NULL, "auto"),
                                 hx_t_vk_open_gemv_red("dot", "split", NULL, "shared"),
                                 hx_t_vk_open_gemv_red("dot", "split", "off", "auto"),
                                 hx_t_vk_open_gemv_red("off", "split", NULL, "auto"),
                                 hx_t_vk_open_gemv_red("emul", "wide", NULL, "auto")};
    for (int i = 0; i < 5; i++) ASSERT_TRUE(devs[i] != NULL);
    const struct hx_vk_gemv_state *gs[3];
    for (int i = 0; i < 3; i++) {
        gs[i] = hx__dev_extension(devs[i], "hx.vk.gemv_state");
        ASSERT_TRUE(gs[i] != NULL);
        fprintf(stderr, "  %-18s layout %u, required subgroup %u%s, reduction %s\n", vars[i].name,
                gs[i]->layout_sg, gs[i]->required_sg, gs[i]->full ? " (full)" : "",
                gs[i]->red == HX_VK_GEMV_RED_SHUFFLE ? "shuffle" : "shared");
    }
    const char *desc = devs[0]->info.description;
    bool ctl = strstr(desc, "(size control ") != NULL, shuf = strstr(desc, "shuffle yes") != NULL;
    ASSERT_TRUE(!ctl || gs[0]->required_sg > 0);
    ASSERT_EQ(gs[0]->red, shuf ? HX_VK_GEMV_RED_SHUFFLE : HX_VK_GEMV_RED_SHARED);
    ASSERT_EQ(gs[1]->red, HX_VK_GEMV_RED_SHARED);
    ASSERT_EQ(gs[2]->required_sg, 0u);
    if (getenv("CI") && !strcmp(getenv("CI"), "true") && strstr(desc, "llvmpipe"))
        ASSERT_TRUE(ctl && shuf && gs[0]->required_sg == 8); /* what CI's lavapipe offers */
    bool ok = true;
    static const char *const names[3] = {"split/dot", "split/dot/shared", "split/dot/sg-off"};
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        if (!(devs[0]->info.weight_types & (1u << t))) continue;
        enum hx_dtype ty = (enum hx_dtype)t;
        int64_t ue = ty == HX_DTYPE_I2_S ? 256 : HX_MAX(hx_dtype_block_elems(ty), 32);
        bool few = ty == HX_DTYPE_Q8_0 || ty == HX_DTYPE_TQ2_0 || ty == HX_DTYPE_F16;
        if (HX_T_GEMV_SANITIZED && !few) continue; /* the Release run has every type */
        static const int64_t units[] = {1, 9, 33};
        for (int u = 0; u < 3; u++) {
            ok &= hx_t_matmul(devs, vars, 5, ty, 1, ue * units[u], 24);
            ok &= hx_t_same_bits(devs, names, 3, ty, ue * units[u]);
        }
    }
    for (int i = 0; i < 5; i++) {
        uint64_t *c = hx__dev_extension(devs[i], "hx.vk.gemv");
        ASSERT_TRUE(c != NULL);
        fprintf(stderr, "  %-18s GEMV dispatches: mmv %llu, wide %llu, wide split-K %llu\n",
                vars[i].name, (unsigned long long)c[0], (unsigned long long)c[1],
                (unsigned long long)c[2]);
        ASSERT_TRUE(c[0] == 0 && c[1] + c[2] > 0); /* every K above takes the wide kernel */
        if (i < 4) ASSERT_TRUE(c[2] > 0);
    }
    for (int i = 0; i < 5; i++) hx__device_close(devs[i]);
    ASSERT_TRUE(ok);
}

/* ---- the attention kernel (vulkan-pick.h) --------------------------------------------------- */

/* HX_VK_ATTN's choice on synthetic devices: auto takes attn_flash.comp from 16 rows and
 * head_dim 32, flash for every batch, rows never; head_dims it cannot lay out and devices below its workgroup size
 * or shared memory run attn.comp, the latter saying why. */
TEST(attn_pick)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *dev = hx_t_vk_open(NULL, NULL);
    ASSERT_TRUE(dev != NULL);
    const struct hx_vk_pick_api *api = hx__dev_extension(dev, "hx.vk.pick");
    ASSERT_TRUE(api && api->attn_mode && api->attn_flash);
    ASSERT_EQ(api->attn_mode("auto"), HX_VK_ATTN_AUTO);
    ASSERT_EQ(api->attn_mode("flash"), HX_VK_ATTN_FLASH);
    ASSERT_EQ(api->attn_mode("rows"), HX_VK_ATTN_ROWS);
    ASSERT_EQ(api->attn_mode("bogus"), -1);
    const struct hx_vk_caps lvp = {.subgroup_size = 8,
                                   .max_wg_invocations = 1024,
                                   .max_shared_bytes = 32768};
    char w[96];
    ASSERT_TRUE(!api->attn_flash(&lvp, HX_VK_ATTN_AUTO, 15, 128, w, sizeof w));
    ASSERT_TRUE(api->attn_flash(&lvp, HX_VK_ATTN_AUTO, 16, 128, w, sizeof w) && !w[0]);
    ASSERT_TRUE(api->attn_flash(&lvp, HX_VK_ATTN_AUTO, 512, 64, w, sizeof w));
    ASSERT_TRUE(api->attn_flash(&lvp, HX_VK_ATTN_FLASH, 1, 32, w, sizeof w));
    ASSERT_TRUE(!api->attn_flash(&lvp, HX_VK_ATTN_AUTO, 512, 16, w, sizeof w)); /* small heads */
    ASSERT_TRUE(api->attn_flash(&lvp, HX_VK_ATTN_FLASH, 512, 8, w, sizeof w));
    ASSERT_TRUE(!api->attn_flash(&lvp, HX_VK_ATTN_ROWS, 512, 128, w, sizeof w));
    static const int bad_hd[] = {80, 96, 256, 2, 0};
    for (size_t i = 0; i < sizeof bad_hd / sizeof bad_hd[0]; i++)
        ASSERT_TRUE(!api->attn_flash(&lvp, HX_VK_ATTN_FLASH, 64, bad_hd[i], w, sizeof w) && !w[0]);
    struct hx_vk_caps c = lvp;
    c.max_shared_bytes = 16384;
    ASSERT_TRUE(!api->attn_flash(&c, HX_VK_ATTN_FLASH, 64, 128, w, sizeof w));
    ASSERT_TRUE(strstr(w, "maxComputeSharedMemorySize") != NULL);
    c = lvp;
    c.max_wg_invocations = 64;
    ASSERT_TRUE(!api->attn_flash(&c, HX_VK_ATTN_AUTO, 64, 128, w, sizeof w));
    ASSERT_TRUE(strstr(w, "invocations") != NULL);
    hx__device_close(dev);
}
