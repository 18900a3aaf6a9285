/*
 * test-model.c — end-to-end numerics on real data no one here wrote: stories260K.gguf (a
 * trained Llama model) fed llama2.c's reference token sequence must reproduce the reference
 * logits (logits_once_upon_n64.f32) within 1e-4 max abs error and the reference greedy ids,
 * on `ref` and `cpu`, both token by token and with a batched prefill.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hx.h"

static const int32_t hx_seq_ids[65] = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338,
    401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328,
    432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335,
    312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};

static float *hx_t_ref_logits(void)
{
    FILE *f = fopen(hx_test_data("stories260K/logits_once_upon_n64.f32"), "rb");
    if (!f) return NULL;
    float *l = malloc(64 * 512 * sizeof *l);
    size_t n = fread(l, sizeof *l, 64 * 512, f);
    fclose(f);
    if (n != 64 * 512) {
        free(l);
        return NULL;
    }
    return l;
}

static int hx_argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* prefill: number of rows fed in the first call (then one token per call). */
static void hx_t_stories(const char *backend, int prefill)
{
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found under HX_DATA");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = backend, .n_threads = 2, .n_ctx = 128};
    struct hx_context *c;
    ASSERT_OK(hx_context_new(m, &cp, &c));
    double max_err = 0;
    int mismatches = 0;
    for (int p = 0; p < 64;) {
        int n = p == 0 ? prefill : 1;
        int32_t pos[64], seq[64];
        int8_t lg[64];
        for (int i = 0; i < n; i++) pos[i] = p + i, seq[i] = 0, lg[i] = 1;
        struct hx_batch b = {.n_rows = n, .token = hx_seq_ids + p, .pos = pos, .seq = seq, .logits = lg};
        ASSERT_OK(hx_decode(c, &b));
        for (int i = 0; i < n; i++) {
            const float *got = hx_get_logits(c, i);
            ASSERT_TRUE(got != NULL);
            for (int v = 0; v < 512; v++) {
                double e = fabs((double)got[v] - want[(p + i) * 512 + v]);
                if (e > max_err) max_err = e;
            }
            if (p + i >= 4 && hx_argmax(got, 512) != hx_seq_ids[p + i + 1]) mismatches++;
        }
        p += n;
    }
    fprintf(stderr, "  %s prefill %d: max abs logit error %.3g, greedy mismatches %d\n", backend, prefill,
            max_err, mismatches);
    ASSERT_TRUE(max_err <= 1e-4);
    ASSERT_EQ(mismatches, 0);
    hx_context_free(c);
    hx_model_free(m);
    free(want);
}

TEST(stories260k_ref_token_by_token) { hx_t_stories("ref", 1); }
TEST(stories260k_ref_prefill) { hx_t_stories("ref", 5); }
TEST(stories260k_cpu_token_by_token) { hx_t_stories("cpu", 1); }
TEST(stories260k_cpu_prefill) { hx_t_stories("cpu", 5); }

TEST(bad_batches_are_rejected)
{
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = "ref", .n_ctx = 8};
    struct hx_context *c;
    ASSERT_OK(hx_context_new(m, &cp, &c));
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, pos[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, seq[9] = {0};
    int32_t bad_tok = 100000, bad_pos = 3, bad_seq = 1;
    struct hx_batch b = {.n_rows = 1, .token = &bad_tok, .pos = pos, .seq = seq};
    ASSERT_EQ(hx_decode(c, &b), HX_E_INVAL);
    b = (struct hx_batch){.n_rows = 1, .token = tok, .pos = &bad_pos, .seq = seq};
    ASSERT_EQ(hx_decode(c, &b), HX_E_INVAL);
    b = (struct hx_batch){.n_rows = 1, .token = tok, .pos = pos, .seq = &bad_seq};
    ASSERT_EQ(hx_decode(c, &b), HX_E_INVAL);
    b = (struct hx_batch){.n_rows = 9, .token = tok, .pos = pos, .seq = seq};
    ASSERT_EQ(hx_decode(c, &b), HX_E_RANGE);
    ASSERT_EQ(hx_kv_len(c, 0), 0);
    b.n_rows = 8;
    ASSERT_OK(hx_decode(c, &b));
    ASSERT_EQ(hx_kv_len(c, 0), 8);
    ASSERT_OK(hx_kv_truncate(c, 0, 2));
    ASSERT_EQ(hx_kv_len(c, 0), 2);
    hx_context_free(c);
    hx_model_free(m);
}

/* The C API refuses a caller's mistakes with HX_E_INVAL and a message naming them: negative
 * sizes are not the default (0 is), NULL out-parameters, bad truncations, sampler parameters. */
TEST(api_argument_checks)
{
    ASSERT_EQ(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, NULL), HX_E_INVAL);
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context *c = (struct hx_context *)1;
    ASSERT_EQ(hx_context_new(m, NULL, NULL), HX_E_INVAL);
    const struct hx_context_params bad[] = {
        {.struct_size = sizeof bad[0], .backend = "ref", .n_ctx = -5},
        {.struct_size = sizeof bad[0], .backend = "ref", .n_seq = -1},
        {.struct_size = sizeof bad[0], .backend = "ref", .n_batch = -1},
        {.struct_size = sizeof bad[0], .backend = "ref", .n_threads = -3},
        {.struct_size = sizeof bad[0], .backend = "ref", .n_threads = HX_MAX_THREADS + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(hx_context_new(m, &bad[i], &c), HX_E_INVAL);
        ASSERT_TRUE(c == NULL);
        ASSERT_TRUE(strstr(hx_last_error(), "out of range") != NULL);
    }
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = "ref", .n_ctx = 8,
                                   .n_seq = 2, .n_threads = HX_MAX_THREADS};
    ASSERT_OK(hx_context_new(m, &cp, &c));
    ASSERT_EQ(hx_kv_truncate(c, 0, -1), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "hx_kv_truncate") != NULL);
    ASSERT_EQ(hx_kv_truncate(c, 2, 0), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "sequence 2") != NULL);
    struct hx_run_stats rs = {.struct_size = 2};
    ASSERT_EQ(hx_context_stats(c, &rs), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "struct_size") != NULL);
    ASSERT_EQ(hx_context_plan_text(c, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_context_plan_text(NULL, NULL), HX_E_INVAL);
    hx_context_free(c);
    struct hx_sampler_params sp;
    hx_sampler_params_init(&sp);
    struct hx_sampler *s = (struct hx_sampler *)1;
    ASSERT_EQ(hx_sampler_new(&sp, 512, NULL), HX_E_INVAL);
    sp.min_p = 2;
    ASSERT_EQ(hx_sampler_new(&sp, 512, &s), HX_E_INVAL);
    ASSERT_TRUE(s == NULL);
    ASSERT_TRUE(strstr(hx_last_error(), "min_p") != NULL);
    hx_model_free(m);
}

TEST(missing_and_corrupt_models)
{
    struct hx_model *m = (struct hx_model *)1;
    ASSERT_EQ(hx_model_load("/nonexistent/model.gguf", NULL, &m), HX_E_IO);
    ASSERT_TRUE(m == NULL);
    ASSERT_TRUE(hx_model_load(hx_test_data("vocab"), NULL, &m) != HX_OK);
    struct hx_model_params mp = {.struct_size = sizeof mp};
    ASSERT_OK(hx_model_load(hx_test_data("vocab/ggml-vocab-qwen2.gguf"), &(struct hx_model_params){.struct_size = sizeof mp, .vocab_only = true}, &m));
    struct hx_context *c;
    ASSERT_TRUE(hx_context_new(m, NULL, &c) != HX_OK);
    hx_model_free(m);
    ASSERT_TRUE(hx_model_load(hx_test_data("vocab/ggml-vocab-qwen2.gguf"), &mp, &m) == HX_E_FORMAT);
}

TEST(policy_validation)
{
    ASSERT_OK(hx_policy_validate("single", "cpu", NULL));
    ASSERT_OK(hx_policy_validate("gemm-offload:ref", "cpu", NULL));
    ASSERT_OK(hx_policy_validate("op-map:qkv=ref,down=ref,default=cpu", NULL, NULL));
    ASSERT_OK(hx_policy_validate("layer-split:cpu=0.25,ref=0.75", NULL, "cpu"));
    ASSERT_EQ(hx_policy_validate("warp-drive", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("op-map:qkv", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("op-map:bogus=cpu", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("layer-split:cpu=0.5,ref=0.6", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("layer-split:cpu,cpu", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("layer-split:", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("single:nosuchdev", NULL, NULL), HX_E_INVAL);
    ASSERT_EQ(hx_policy_validate("single", NULL, "cpu,cpu"), HX_E_INVAL);
}

/* Placement policies that split the graph between cpu and ref must give the same logits as
 * one device: the coherence protocol moves every slot and KV cache it needs. */
TEST(split_policies_agree)
{
    static const char *const pols[] = {"gemm-offload:ref", "op-map:attn=ref,o=ref,default=cpu",
                                       "layer-split:ref=0.4,cpu=0.6", "layer-split:alternate:cpu,ref",
                                       "phase-split:ref,cpu"};
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        struct hx_context_params cp = {.struct_size = sizeof cp, .policy = pols[k], .n_threads = 2, .n_ctx = 64};
        struct hx_context *c;
        ASSERT_OK(hx_context_new(m, &cp, &c));
        int32_t pos[8], seq[8] = {0};
        int8_t lg[8] = {0, 0, 0, 0, 0, 0, 0, 1};
        for (int i = 0; i < 8; i++) pos[i] = i;
        struct hx_batch b = {.n_rows = 8, .token = hx_seq_ids, .pos = pos, .seq = seq, .logits = lg};
        ASSERT_OK(hx_decode(c, &b));
        double err = 0;
        const float *got = hx_get_logits(c, 7);
        for (int v = 0; v < 512; v++) err = fmax(err, fabs(got[v] - want[7 * 512 + v]));
        for (int p = 8; p < 12; p++) {
            int32_t pp = p, sq = 0;
            int8_t l1 = 1;
            struct hx_batch d = {.n_rows = 1, .token = hx_seq_ids + p, .pos = &pp, .seq = &sq, .logits = &l1};
            ASSERT_OK(hx_decode(c, &d));
            got = hx_get_logits(c, 0);
            for (int v = 0; v < 512; v++) err = fmax(err, fabs(got[v] - want[p * 512 + v]));
        }
        fprintf(stderr, "  %-36s devices %-8s max err %.3g\n", pols[k], hx_context_devices(c), err);
        if (err > 1e-4) HX_FAIL_AT("%s: logits error %g", pols[k], err);
        hx_context_free(c);
    }
    hx_model_free(m);
    free(want);
}

int hx__fault_set(const char *spec);

/* A device that fails mid-run (at its k-th split, in prefill or in decode) has its batch
 * re-run on the fallback chain: the logits still match the reference, nothing is lost. */
TEST(fault_injection_recovers)
{
    static const char *const pols[] = {"single:ref", "gemm-offload:ref", "layer-split:ref=0.6,cpu=0.4",
                                       "phase-split:ref,cpu", "op-map:attn=ref,default=cpu"};
    static const int after[] = {0, 3, 8}; /* each fires: every policy runs ref >= 12 times */
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++)
        for (size_t a = 0; a < sizeof after / sizeof after[0]; a++) {
            struct hx_context_params cp = {.struct_size = sizeof cp, .policy = pols[k], .fallback = "cpu",
                                           .n_threads = 2, .n_ctx = 64};
            struct hx_context *c;
            ASSERT_OK(hx_context_new(m, &cp, &c));
            char spec[96];
            snprintf(spec, sizeof spec, "dev=ref,entry=run,after=%d,count=1", after[a]);
            hx__fault_set(spec);
            int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0};
            int8_t lg[5] = {0, 0, 0, 0, 1};
            struct hx_batch b = {.n_rows = 5, .token = hx_seq_ids, .pos = pos, .seq = seq, .logits = lg};
            ASSERT_OK(hx_decode(c, &b));
            double err = 0;
            const float *got = hx_get_logits(c, 4);
            for (int v = 0; v < 512; v++) err = fmax(err, fabs(got[v] - want[4 * 512 + v]));
            for (int p = 5; p < 16; p++) {
                int32_t pp = p, sq = 0;
                int8_t one = 1;
                struct hx_batch d = {.n_rows = 1, .token = hx_seq_ids + p, .pos = &pp, .seq = &sq, .logits = &one};
                ASSERT_OK(hx_decode(c, &d));
                got = hx_get_logits(c, 0);
                for (int v = 0; v < 512; v++) err = fmax(err, fabs(got[v] - want[p * 512 + v]));
            }
            hx__fault_set("");
            /* The fault fired: ref is unhealthy, the last steps ran without it. */
            if (strstr(hx_context_devices(c), "ref"))
                HX_FAIL_AT("%s, after %d: ref still used (%s): fault did not fire", pols[k], after[a],
                           hx_context_devices(c));
            if (err > 1e-4) HX_FAIL_AT("%s, fail after %d splits: logits error %g", pols[k], after[a], err);
            hx_context_free(c);
        }
    hx_model_free(m);
    free(want);
}

/* Without a fallback chain the failure is reported, not hidden, and the cache is unchanged. */
TEST(fault_without_fallback_is_an_error)
{
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = "ref", .n_ctx = 16};
    struct hx_context *c;
    ASSERT_OK(hx_context_new(m, &cp, &c));
    hx__fault_set("dev=ref,entry=run,count=1");
    int32_t pos = 0, seq = 0;
    int8_t one = 1;
    struct hx_batch b = {.n_rows = 1, .token = hx_seq_ids, .pos = &pos, .seq = &seq, .logits = &one};
    ASSERT_EQ(hx_decode(c, &b), HX_E_DEVICE);
    ASSERT_EQ(hx_kv_len(c, 0), 0);
    hx__fault_set("");
    ASSERT_OK(hx_decode(c, &b));
    ASSERT_EQ(hx_kv_len(c, 0), 1);
    hx_context_free(c);
    hx_model_free(m);
}

/* The logits API says which rows it holds: rows are those of the last batch, -1 is its last
 * row, and a row it does not hold is NULL with a message, never a pointer into the wrong row
 * (a prompt fed in several batches once made `engine run` read row n - 1 of the whole prompt). */
TEST(logits_rows_of_the_last_batch_only)
{
    struct hx_model *m;
    if (hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m) != HX_OK)
        SKIP("stories260K not found under HX_DATA");
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = "cpu", .n_threads = 2,
                                   .n_ctx = 128, .n_batch = 16};
    struct hx_context *c;
    ASSERT_OK(hx_context_new(m, &cp, &c));
    ASSERT_EQ(hx_context_n_batch(c), 16);
    int64_t first = -5, n = -5;
    hx_logits_rows(c, &first, &n);
    ASSERT_TRUE(first == 0 && n == 0);
    ASSERT_TRUE(hx_get_logits(c, 0) == NULL);   /* before any decode */
    ASSERT_TRUE(strstr(hx_last_error(), "no logits") != NULL);
    /* 40 rows fed as 16 + 16 + 8, the last row's logits requested */
    int32_t pos[16], seq[16] = {0};
    int8_t lg[16];
    for (int p = 0; p < 40; p += 16) {
        int k = 40 - p < 16 ? 40 - p : 16;
        for (int i = 0; i < k; i++) pos[i] = p + i, lg[i] = p + i == 39;
        struct hx_batch b = {.n_rows = k, .token = hx_seq_ids + p, .pos = pos, .seq = seq, .logits = lg};
        ASSERT_OK(hx_decode(c, &b));
        if (p == 0) {
            hx_logits_rows(c, &first, &n);
            ASSERT_TRUE(n == 0);   /* a batch that asked for none holds none */
            ASSERT_TRUE(hx_get_logits(c, -1) == NULL);
            ASSERT_TRUE(strstr(hx_last_error(), "requested no logits") != NULL);
        }
    }
    hx_logits_rows(c, &first, &n);
    ASSERT_TRUE(first == 7 && n == 1);
    const float *last = hx_get_logits(c, -1);
    ASSERT_TRUE(last != NULL && last == hx_get_logits(c, 7));
    ASSERT_TRUE(hx_get_logits(c, 39) == NULL);  /* a row of the prompt, not of this batch */
    ASSERT_TRUE(strstr(hx_last_error(), "rows 7..7") != NULL);
    ASSERT_TRUE(hx_get_logits(c, 6) == NULL && hx_get_logits(c, 8) == NULL);
    ASSERT_TRUE(hx_get_logits(c, -2) == NULL && hx_get_logits(c, -9) == NULL);
    /* the same logits as one 40-row batch would give (the cpu backend is exact across batch
     * splits only within its numerics: compare by argmax and closeness) */
    float *want = hx_t_ref_logits();
    if (want) {
        double e = 0;
        for (int v = 0; v < 512; v++) e = fmax(e, fabs((double)last[v] - want[39 * 512 + v]));
        ASSERT_TRUE(e < 1e-4);
        free(want);
    }
    /* a failed call leaves no logits behind */
    int32_t bad_pos = 5;
    int8_t one = 1;
    struct hx_batch b = {.n_rows = 1, .token = hx_seq_ids, .pos = &bad_pos, .seq = seq, .logits = &one};
    ASSERT_TRUE(hx_decode(c, &b) == HX_E_INVAL);
    ASSERT_TRUE(hx_get_logits(c, -1) == NULL);
    hx_context_free(c);
    hx_model_free(m);
}

TEST_MAIN()
