/*
 * test-vulkan-matmul.h — test-vulkan's prefill-GEMM tests (gemm_pick, gemm_variants), the
 * Qwen3 matmul shapes (matmul_qwen3_shapes) and I2_S against TQ2_0 on the same ternary
 * weights (tern_i2_s_equals_tq2_0), kept out of test-vulkan.c for its size. Not a header of
 * its own: test-vulkan.c includes it once, and it uses that file's helpers (hx_t_matmul,
 * hx_t_tern_twins, hx_t_open_variants, ...).
 */
/* ---- the prefill GEMM variant (vulkan-pick.h) ------------------------------------------------ */

/* Every branch of the GEMM choice, on synthetic devices through the backend's own functions
 * (get_extension "hx.vk.pick"). */
TEST(gemm_pick)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *dev = hx_t_vk_open(NULL, NULL);
    ASSERT_TRUE(dev != NULL);
    const struct hx_vk_pick_api *api = hx__dev_extension(dev, "hx.vk.pick");
    ASSERT_TRUE(api != NULL);
    const struct hx_vk_caps full = {.coopmat_nv = true,
                                    .coopmat_nv_16 = true,
                                    .fp16 = true,
                                    .memory_model = true,
                                    .subgroup_size = 32,
                                    .max_wg_invocations = 1024,
                                    .max_shared_bytes = 49152};
    char w[192];
    /* everything there: auto and coopmat take it, tiled does not; a bad knob is refused */
    ASSERT_EQ(api->gemm_choose(&full, "auto", w, sizeof w), HX_VK_GEMM_COOPMAT_NV);
    ASSERT_TRUE(!w[0]);
    ASSERT_EQ(api->gemm_choose(&full, "coopmat", w, sizeof w), HX_VK_GEMM_COOPMAT_NV);
    ASSERT_EQ(api->gemm_choose(&full, "tiled", w, sizeof w), HX_VK_GEMM_TILED);
    ASSERT_TRUE(!w[0]);
    ASSERT_EQ(api->gemm_choose(&full, "bogus", w, sizeof w), -1);
    /* no extension: auto stays quiet, a forced coopmat says why */
    struct hx_vk_caps c = full;
    c.coopmat_nv = c.coopmat_nv_16 = false;
    ASSERT_EQ(api->gemm_choose(&c, "auto", w, sizeof w), HX_VK_GEMM_TILED);
    ASSERT_TRUE(!w[0]);
    ASSERT_EQ(api->gemm_choose(&c, "coopmat", w, sizeof w), HX_VK_GEMM_TILED);
    ASSERT_TRUE(strstr(w, "lacks VK_NV_cooperative_matrix") != NULL);
    /* each missing piece, under auto (the extension is there, so it says why) and forced */
    static const struct {
        int field;
        const char *reason;
    } miss[] = {{0, "16x16x16"},     {1, "shaderFloat16"},          {2, "vulkanMemoryModel"},
                {3, "subgroup size"}, {4, "maxComputeSharedMemory"}, {5, "subgroup size"}};
    for (size_t i = 0; i < sizeof miss / sizeof miss[0]; i++) {
        c = full;
        switch (miss[i].field) {
        case 0: c.coopmat_nv_16 = false; break;
        case 1: c.fp16 = false; break;
        case 2: c.memory_model = false; break;
        case 3: c.subgroup_size = 8; break;
        case 4: c.max_shared_bytes = 16384; break;
        default: c.max_wg_invocations = 64; break;
        }
        for (int k = 0; k < 2; k++) {
            ASSERT_EQ(api->gemm_choose(&c, k ? "coopmat" : "auto", w, sizeof w), HX_VK_GEMM_TILED);
            if (!strstr(w, miss[i].reason)) HX_FAIL_AT("case %zu: reason '%s'", i, w);
        }
    }
    /* per matmul: lane layout for every m, GEMV to 4 rows, tiled from 5 to 15 rows and for F32
     * weights, coopmat from 16 rows; the tiled variant never takes coopmat */
    ASSERT_EQ(api->mm_kernel(true, HX_VK_GEMM_COOPMAT_NV, false, 512), HX_VK_MM_LANE);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_COOPMAT_NV, false, 4), HX_VK_MM_MMV);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_COOPMAT_NV, false, 5), HX_VK_MM_TILED);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_COOPMAT_NV, false, 15), HX_VK_MM_TILED);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_COOPMAT_NV, false, 16), HX_VK_MM_COOPMAT_NV);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_COOPMAT_NV, true, 512), HX_VK_MM_TILED);
    ASSERT_EQ(api->mm_kernel(false, HX_VK_GEMM_TILED, false, 512), HX_VK_MM_TILED);
    hx__device_close(dev);
}

/* HX_VK_GEMM forced both ways on this device (GPU layout): coopmat where the device has it,
 * else the tiled GEMM with the reason logged and kept ("hx.vk.gemm"); results against ref
 * at m = 16 and 33: the tiled GEMM within 1e-9, the coopmat one within 1e-6 (both operands
 * rounded to f16, relative error ≤ 2^-11 each: expected ~2e-7; not yet measured on a GPU).
 * A bad value fails init. */
TEST(gemm_variants)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    static const struct hx_t_variant vars[] = {{"gpu/coopmat", "gpu", "off", "coopmat", 1e-6},
                                               {"gpu/tiled", "gpu", "off", "tiled", 0},
                                               {"gpu/cm-emu", "gpu", "off", "coopmat-emu", 1e-6}};
    struct hx_device *devs[3];
    for (int v = 0; v < 3; v++) {
        devs[v] = hx_t_vk_open_gemm(vars[v].matmul, vars[v].int8, vars[v].gemm);
        ASSERT_TRUE(devs[v] != NULL);
    }
    const struct hx_vk_gemm_state *g = hx__dev_extension(devs[0], "hx.vk.gemm");
    const struct hx_vk_gemm_state *gt = hx__dev_extension(devs[1], "hx.vk.gemm");
    ASSERT_TRUE(g != NULL && gt != NULL);
    bool has = strstr(devs[0]->info.description, "coopmat NV 16x16x16") != NULL;
    fprintf(stderr, "  HX_VK_GEMM=coopmat: %s%s%s\n",
            g->variant == HX_VK_GEMM_COOPMAT_NV ? "cooperative-matrix GEMM" : "tiled GEMM",
            g->why[0] ? "; " : "", g->why);
    /* forced: the variant, or the tiled GEMM with the reason; never without the extension */
    if (g->variant == HX_VK_GEMM_COOPMAT_NV) {
        ASSERT_TRUE(has);
        ASSERT_TRUE(!g->why[0]);
    } else {
        ASSERT_EQ(g->variant, HX_VK_GEMM_TILED);
        ASSERT_TRUE(strstr(g->why, "cooperative-matrix GEMM not used") != NULL);
    }
    ASSERT_EQ(gt->variant, HX_VK_GEMM_TILED);
    ASSERT_TRUE(!gt->why[0]);
    /* the emulation runs wherever the device has f16 arithmetic (lavapipe does) */
    const struct hx_vk_gemm_state *ge = hx__dev_extension(devs[2], "hx.vk.gemm");
    ASSERT_TRUE(ge != NULL);
    if (strstr(devs[2]->info.description, "fp16 yes"))
        ASSERT_EQ(ge->variant, HX_VK_GEMM_COOPMAT_EMU);
    /* the f16 bound applies only where a coopmat shader really runs (F32 never takes it);
     * m = 16 and 64 run it, m = 15 takes the tiled GEMM even there */
    struct hx_t_variant v3[3] = {vars[0], vars[1], vars[2]};
    if (g->variant != HX_VK_GEMM_COOPMAT_NV) v3[0].tol = 0;
    if (ge->variant != HX_VK_GEMM_COOPMAT_EMU) v3[2].tol = 0;
    static const int64_t shapes[][3] = {{16, 512, 65}, {71, 256, 130}, {15, 256, 33},
                                        {20, 172, 19}};
    bool ok = true;
    for (int t = 0; t < HX_DTYPE_COUNT; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            bool f16 = t != HX_DTYPE_F32 && shapes[s][0] >= 16;
            struct hx_t_variant v[3] = {v3[0], v3[1], v3[2]};
            if (!f16) v[0].tol = v[2].tol = 0;
            if (devs[0]->info.weight_types & (1u << t))
                ok &= hx_t_matmul(devs, v, 3, (enum hx_dtype)t, shapes[s][0], shapes[s][1],
                                  shapes[s][2]);
        }
    /* a pipeline that failed to build for a type says so in the state and is no error */
    if (g->why[0] && g->variant == HX_VK_GEMM_COOPMAT_NV)
        fprintf(stderr, "  coopmat pipeline fallback: %s\n", g->why);
    const bool emu = ge->variant == HX_VK_GEMM_COOPMAT_EMU; /* ge goes with its device */
    for (int v = 0; v < 3; v++) hx__device_close(devs[v]);
    ASSERT_TRUE(ok);
    /* a driver that offers the variant but fails its pipeline (HX_VK_FAIL_PIPELINE, on the
     * emulation's Q4_K shader): that type takes the tiled GEMM, with the reason kept, and
     * is still right; the other types keep the variant */
    if (emu) {
        setenv("HX_VK_FAIL_PIPELINE", "gemmcme_q4_k", 1);
        struct hx_device *fd = hx_t_vk_open_gemm("gpu", "off", "coopmat-emu");
        unsetenv("HX_VK_FAIL_PIPELINE");
        ASSERT_TRUE(fd != NULL);
        const struct hx_vk_gemm_state *gf = hx__dev_extension(fd, "hx.vk.gemm");
        struct hx_t_variant vt = {"cm-emu/fail", "gpu", "off", "coopmat-emu", 0};
        ASSERT_TRUE(hx_t_matmul(&fd, &vt, 1, HX_DTYPE_Q4_K, 16, 512, 65));
        fprintf(stderr, "  pipeline failure: %s\n", gf->why);
        ASSERT_TRUE(strstr(gf->why, "Q4_K") && strstr(gf->why, "gemmcme_q4_k") &&
                    strstr(gf->why, "VK_ERROR_INITIALIZATION_FAILED"));
        ASSERT_EQ(gf->variant, HX_VK_GEMM_COOPMAT_EMU);
        vt.tol = 1e-6;
        ASSERT_TRUE(hx_t_matmul(&fd, &vt, 1, HX_DTYPE_Q8_0, 16, 512, 65));
        hx__device_close(fd);
    }
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    struct hx_device *bad = NULL;
    setenv("HX_VK_GEMM", "bogus", 1);
    int st = hx__device_open("vulkan", &cfg, &bad);
    unsetenv("HX_VK_GEMM");
    ASSERT_TRUE(st != HX_OK);
    ASSERT_TRUE(strstr(hx_last_error(), "HX_VK_GEMM") != NULL);
}

/* Qwen3-0.6B's matmul shapes at m = 1 on the device's own choice of kernels (and the GPU
 * layout's for the headline decode types); the LM head for the quantized types (the float
 * ones would take minutes on lavapipe: 311-622 MB per call). */
TEST(matmul_qwen3_shapes)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    static const int64_t shapes[][2] = {
        {1024, 4096}, {2048, 1024}, {1024, 6144}, {3072, 1024}, {1024, 151936}};
    static const struct hx_t_variant vars[] = {{"auto", "auto", "auto", NULL, 0},
                                               {"gpu/auto", "gpu", "auto", NULL, 0}};
    struct hx_device *devs[2] = {hx_t_vk_open(NULL, NULL), hx_t_vk_open("gpu", NULL)};
    ASSERT_TRUE(devs[0] != NULL);
    bool ok = true;
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        enum hx_dtype ty = (enum hx_dtype)t;
        if (!(devs[0]->info.weight_types & (1u << t))) continue;
        bool headline = ty == HX_DTYPE_Q8_0 || ty == HX_DTYPE_TQ2_0 || ty == HX_DTYPE_Q1_0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (shapes[s][1] > 100000 && !hx_dtype_is_quantized(ty)) continue;
            ok &= hx_t_matmul(devs, vars, headline && shapes[s][1] < 100000 ? 2 : 1, ty, 1,
                              shapes[s][0], shapes[s][1]);
        }
    }
    hx__device_close(devs[0]);
    hx__device_close(devs[1]);
    ASSERT_TRUE(ok);
}

/* The same ternary weights as TQ2_0 (d = s in every block) and as I2_S (tensor scale s), s
 * exact in fp16: every variant must give the same bits for both, in matmuls at decode and
 * prefill sizes and in the embedding (docs/weights.md, "Why a per-element scale"). */
TEST(tern_i2_s_equals_tq2_0)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    static const int64_t shapes[][3] = {{1, 512, 40}, {2, 768, 33}, {7, 1024, 65}, {64, 256, 96}};
    const float s = 0.0625f;
    struct hx_device *devs[HX_T_NV];
    hx_t_open_variants(devs);
    ASSERT_TRUE(devs[0] != NULL);
    bool ok = true;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        int64_t m = shapes[sh][0], k = shapes[sh][1], n = shapes[sh][2];
        struct hx_weight wt, wi;
        ASSERT_OK(hx_t_tern_twins(n, k, s, &wt, &wi));
        float *x = hx_t_act(m * k);
        int32_t tok[7] = {0, 3, 1, 4, 1, 5, 9};
        for (int op = 0; op < 2; op++) {
            struct hx_t_case c = hx_t_matmul_case(&wt, x, m);
            if (op == 1)
                c = (struct hx_t_case){.desc = {.kind = HX_OP_EMBED, .n_rows = 7, .n_in = n,
                                                .n_out = k, .wtype = HX_DTYPE_TQ2_0},
                                       .dst_cols = k, .w = &wt, .tokens = tok};
            struct hx_t_case ci = c;
            ci.desc.wtype = HX_DTYPE_I2_S;
            ci.w = &wi;
            size_t cnt = (size_t)c.desc.n_rows * (size_t)c.dst_cols;
            for (size_t v = 0; v < HX_T_NV; v++) {
                if (!devs[v] || (op == 1 && sh > 0)) continue;
                float *gt = calloc(cnt, sizeof *gt), *gi = calloc(cnt, sizeof *gi);
                bool g1, g2;
                bool same = hx_t_run(devs[v], &c, gt, &g1) == HX_OK &&
                            hx_t_run(devs[v], &ci, gi, &g2) == HX_OK && g1 && g2 &&
                            !memcmp(gt, gi, cnt * sizeof *gt);
                double e = 0;
                for (size_t i = 0; i < cnt; i++) e = fmax(e, fabs((double)gt[i] - gi[i]));
                fprintf(stderr, "  %s %-10s %-6s m=%lld %lld->%lld: I2_S %s TQ2_0 (max diff %g)\n",
                        same ? "ok  " : "FAIL", hx_t_variants[v].name, op ? "embed" : "matmul",
                        (long long)c.desc.n_rows, (long long)c.desc.n_in,
                        (long long)c.desc.n_out, same ? "==" : "!=", e);
                ok &= same;
                free(gt), free(gi);
            }
        }
        free(x), free((void *)wt.data), free((void *)wi.data);
    }
    hx_t_close_variants(devs);
    ASSERT_TRUE(ok);
}
