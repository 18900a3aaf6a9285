/*
 * test-vulkan-models.h — test-vulkan's whole-model tests (stories_*, qwen3_*: greedy ids and
 * logits against references and the cpu backend) and its error tests (errors_*), kept out of
 * test-vulkan.c for its size. Not a header of its own: test-vulkan.c includes it once, and it
 * uses that file's helpers (hx_t_vk_missing, hx_t_vk_open_gemm, ...).
 */
/* ---- models --------------------------------------------------------------------------------- */

static const int32_t hx_t_story_ids[65] = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338,
    401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328,
    432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335,
    312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};

static int hx_t_argmax(const float *l, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return (int)b;
}

/* stories260K fed llama2.c's sequence: logits within 1e-4 of the reference, greedy ids equal
 * (the ids after the prompt are llama2.c's greedy continuation). */
static void hx_t_stories(const char *matmul, int prefill)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    FILE *f = fopen(hx_test_data("stories260K/logits_once_upon_n64.f32"), "rb");
    if (!f) SKIP("stories260K reference logits not found under HX_DATA");
    float *want = malloc(64 * 512 * sizeof *want);
    size_t got_n = fread(want, sizeof *want, 64 * 512, f);
    fclose(f);
    ASSERT_EQ(got_n, 64 * 512);
    if (matmul) setenv("HX_VK_MATMUL", matmul, 1);
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context_params cp = {
        .struct_size = sizeof cp, .backend = "vulkan", .n_threads = 2, .n_ctx = 128};
    struct hx_context *c;
    int st = hx_context_new(m, &cp, &c);
    unsetenv("HX_VK_MATMUL");
    ASSERT_OK(st);
    double max_err = 0;
    int mismatches = 0;
    for (int p = 0; p < 64;) {
        int n = p == 0 ? prefill : 1;
        int32_t pos[64], seq[64] = {0};
        int8_t lg[64];
        for (int i = 0; i < n; i++) pos[i] = p + i, lg[i] = 1;
        struct hx_batch b = {
            .n_rows = n, .token = hx_t_story_ids + p, .pos = pos, .seq = seq, .logits = lg};
        ASSERT_OK(hx_decode(c, &b));
        for (int i = 0; i < n; i++) {
            const float *l = hx_get_logits(c, i);
            ASSERT_TRUE(l != NULL);
            for (int v = 0; v < 512; v++)
                max_err = fmax(max_err, fabs((double)l[v] - want[(p + i) * 512 + v]));
            if (p + i >= 4 && hx_t_argmax(l, 512) != hx_t_story_ids[p + i + 1]) mismatches++;
        }
        p += n;
    }
    fprintf(stderr, "  vulkan (%s) prefill %d: max |logit - llama2.c| %.3g, greedy mismatches %d\n",
            matmul ? matmul : "auto", prefill, max_err, mismatches);
    ASSERT_STREQ(hx_context_devices(c), "vulkan"); /* nothing fell back to the CPU */
    ASSERT_TRUE(max_err <= 1e-4);
    ASSERT_EQ(mismatches, 0);
    hx_context_free(c);
    hx_model_free(m);
    free(want);
}

TEST(stories_token_by_token)
{
    hx_t_stories(NULL, 1);
}
TEST(stories_prefill)
{
    hx_t_stories(NULL, 5);
}
TEST(stories_prefill_gpu_kernels)
{
    hx_t_stories("gpu", 9);
}

/* Greedy generation of n steps from the prompt ids: ids, and each step's logits. */
static int hx_t_greedy(struct hx_model *m, const char *backend, const hx_token *prompt, int64_t np,
                       int steps, int *ids, float *logits, int64_t n_vocab)
{
    struct hx_context_params cp = {
        .struct_size = sizeof cp, .backend = backend, .n_threads = 2, .n_ctx = 128};
    struct hx_context *c;
    int st = hx_context_new(m, &cp, &c);
    if (st) return st;
    int32_t pos[64], seq[64] = {0};
    int8_t lg[64] = {0};
    for (int64_t i = 0; i < np; i++) pos[i] = (int32_t)i;
    lg[np - 1] = 1;
    struct hx_batch b = {.n_rows = np, .token = prompt, .pos = pos, .seq = seq, .logits = lg};
    st = hx_decode(c, &b);
    const float *l = st ? NULL : hx_get_logits(c, np - 1);
    for (int s = 0; s < steps && st == HX_OK; s++) {
        memcpy(logits + (size_t)s * (size_t)n_vocab, l, (size_t)n_vocab * sizeof *l);
        ids[s] = hx_t_argmax(l, n_vocab);
        int32_t p = (int32_t)(np + s), sq = 0;
        int8_t one = 1;
        hx_token t = ids[s];
        struct hx_batch d = {.n_rows = 1, .token = &t, .pos = &p, .seq = &sq, .logits = &one};
        if ((st = hx_decode(c, &d)) == HX_OK) l = hx_get_logits(c, 0);
    }
    if (st == HX_OK && strcmp(hx_context_devices(c), backend) != 0) {
        fprintf(stderr, "  %s ran on %s\n", backend, hx_context_devices(c));
        st = HX_E_DEVICE;
    }
    hx_context_free(c);
    return st;
}

/* A Qwen3 test model greedy on vulkan and on cpu (both quantize activations to int8 alike
 * for Q8_0/TQ2_0; F16 runs in f32 on both). Ids must agree up to the first step whose cpu
 * top-2 margin is below tol (random weights make near-ties; data/README.md); after the
 * first disagreement the sequences differ, so the logits are compared only until then. */
static void hx_t_qwen3(const char *name, double tol)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    char path[256];
    snprintf(path, sizeof path, "qwen3/%s.gguf", name);
    FILE *f = fopen(hx_test_data(path), "rb");
    if (!f) SKIP("%s not found under HX_DATA", path);
    fclose(f);
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data(path), NULL, &m));
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(m, &mi);
    const char *prompt = "The capital of France is";
    hx_token ids[64];
    int64_t np = 0;
    ASSERT_OK(hx_tokenize(m, prompt, strlen(prompt), true, true, ids, 64, &np));
    enum { STEPS = 24 };
    int a[STEPS], b[STEPS];
    float *la = malloc((size_t)STEPS * (size_t)mi.n_vocab * sizeof *la),
          *lb = malloc((size_t)STEPS * (size_t)mi.n_vocab * sizeof *lb);
    ASSERT_OK(hx_t_greedy(m, "cpu", ids, np, STEPS, a, la, mi.n_vocab));
    ASSERT_OK(hx_t_greedy(m, "vulkan", ids, np, STEPS, b, lb, mi.n_vocab));
    int same = 0;
    double max_err = 0;
    bool tie_stop = false;
    for (int s = 0; s < STEPS; s++) {
        const float *ref = la + (size_t)s * (size_t)mi.n_vocab,
                    *got = lb + (size_t)s * (size_t)mi.n_vocab;
        for (int64_t v = 0; v < mi.n_vocab; v++)
            max_err = fmax(max_err, fabs((double)got[v] - ref[v]));
        /* cpu's margin between its top two logits at this step */
        float top = -INFINITY, second = -INFINITY;
        for (int64_t v = 0; v < mi.n_vocab; v++) {
            if (ref[v] > top)
                second = top, top = ref[v];
            else if (ref[v] > second)
                second = ref[v];
        }
        if (a[s] != b[s]) {
            tie_stop = top - second < tol;
            if (!tie_stop)
                HX_FAIL_AT("%s step %d: vulkan %d, cpu %d, margin %.4g", name, s, b[s], a[s],
                           top - second);
            break;
        }
        same++;
    }
    fprintf(stderr, "  %-18s greedy ids equal for %d/%d steps%s; max |logit vulkan - cpu| %.3g\n",
            name, same, STEPS, tie_stop ? " (then a near-tie)" : "", max_err);
    ASSERT_TRUE(max_err <= tol);
    ASSERT_TRUE(same >= 8);
    free(la), free(lb);
    hx_model_free(m);
}

/* tol: the largest |logit difference| allowed, and the margin under which a step counts as a
 * near-tie. Measured: F16 ~1e-5 (both f32); Q8_0/TQ2_0 ~1e-4..1e-3 (same int8 rounding, other
 * summation order, an occasional activation rounding the other way). */
TEST(qwen3_micro_q8_0)
{
    hx_t_qwen3("qwen3-micro-q8_0", 0.01);
}
TEST(qwen3_micro_f16)
{
    hx_t_qwen3("qwen3-micro-f16", 0.01);
}
TEST(qwen3_tern_tq2_0)
{
    hx_t_qwen3("qwen3-tern-tq2_0", 0.01);
}
TEST(qwen3_tern_f16)
{
    hx_t_qwen3("qwen3-tern-f16", 0.01);
}

/* ---- errors --------------------------------------------------------------------------------- */

TEST(errors_oom_and_knobs)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *dev = hx_t_vk_open(NULL, NULL);
    ASSERT_TRUE(dev != NULL);
    /* 1 TiB of weights: fails at allocation (before any byte is read) with the byte count */
    static const float dummy[256];
    struct hx_weight w = {.name = "huge",
                          .type = HX_DTYPE_F32,
                          .n_rows = (int64_t)1 << 30,
                          .n_cols = 256,
                          .data = dummy,
                          .nbytes = (size_t)1 << 40,
                          .scale = 1};
    void *h = NULL;
    int st = hx__dev_weight_prepare(dev, &w, &h);
    fprintf(stderr, "  1 TiB weight: %s (%s)\n", hx_status_name(st), dev->last_error);
    ASSERT_EQ(st, HX_E_NOMEM);
    ASSERT_TRUE(h == NULL);
    ASSERT_TRUE(strstr(dev->last_error, "10995116") &&
                strstr(dev->last_error, "bytes")); /* ≥ 2^40 */
    /* the device is still usable */
    struct hx_weight ok_w;
    void *data = hx_t_weight(HX_DTYPE_Q8_0, 8, 64, &ok_w);
    ASSERT_OK(hx__dev_weight_prepare(dev, &ok_w, &h));
    hx__dev_weight_release(dev, h);
    free(data);
    hx__device_close(dev);
    /* a bad knob fails init with a message, no crash */
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    setenv("HX_VK_INT8", "bogus", 1);
    st = hx__device_open("vulkan", &cfg, &dev);
    unsetenv("HX_VK_INT8");
    ASSERT_TRUE(st != HX_OK);
    ASSERT_TRUE(strstr(hx_last_error(), "HX_VK_INT8") != NULL);
}

/* Without a Vulkan loader the engine still runs and says why vulkan is unavailable; asking
 * for it is a clean error (a subprocess: the loader is looked for once per process). */
TEST(errors_no_loader)
{
    const char *engine = getenv("HX_ENGINE");
    if (!engine) SKIP("HX_ENGINE not set");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "HX_VK_LOADER=/nonexistent/libvulkan.so.1 '%s' devices 2>&1", engine);
    FILE *p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    int rc = pclose(p);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(strstr(buf, "/nonexistent/libvulkan.so.1 not found") != NULL);
    snprintf(
        cmd, sizeof cmd,
        "HX_VK_LOADER=/nonexistent/libvulkan.so.1 '%s' run -m '%s' -p hi -n 2 --backend vulkan 2>&1",
        engine, hx_test_data("stories260K/stories260K.gguf"));
    p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    rc = pclose(p);
    fprintf(stderr, "  engine run --backend vulkan without a loader: exit %d: %.200s\n", rc, buf);
    ASSERT_TRUE(rc != 0 && WIFEXITED(rc) && WEXITSTATUS(rc) < 128); /* an error, not a crash */
    ASSERT_TRUE(strstr(buf, "unavailable") != NULL);
}
