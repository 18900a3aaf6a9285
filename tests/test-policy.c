/*
 * test-policy.c — the dispatch policies that go beyond one device per op: tensor-split (each
 * GEMM's output columns computed on several devices at once and joined) equals one device;
 * its bytes between devices are accounted exactly; a device that errors, hangs, answers late
 * or fails at random is recovered on the fallback chain with the reference output and a
 * logged message; verify finds an injected corruption at the op where it happened; auto
 * measures, explains and caches. Devices: cpu and ref (every build has both), so the split
 * code runs everywhere; a Vulkan device joins where one is present.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hx.h"
#include "scheduler.h"

static const int32_t hx_seq_ids[16] = {1,   403, 407, 261, 378, 432, 383, 286,
                                       261, 376, 298, 315, 421, 395, 317, 426};

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

/* ---- log capture ---------------------------------------------------------------------------- */

static char hx_t_log[16384];

static void hx_t_log_cb(enum hx_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level > HX_LOG_LEVEL_WARN) return;
    size_t n = strlen(hx_t_log);
    snprintf(hx_t_log + n, sizeof hx_t_log - n, "%s\n", msg);
}

static void hx_t_log_start(void)
{
    hx_t_log[0] = '\0';
    hx_log_set(hx_t_log_cb, NULL);
}

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Feed `prefill` rows, then one token per call up to n_tokens; out[p * n_vocab ...] gets every
 * position's logits. Returns the first failing status. */
static int hx_t_feed(struct hx_context *c, const int32_t *ids, int prefill, int n_tokens,
                     int64_t n_vocab, float *out)
{
    for (int p = 0; p < n_tokens;) {
        int n = p == 0 ? prefill : 1;
        int32_t pos[64], seq[64] = {0};
        int8_t lg[64];
        for (int i = 0; i < n; i++) pos[i] = p + i, lg[i] = 1;
        struct hx_batch b = {.n_rows = n, .token = ids + p, .pos = pos, .seq = seq, .logits = lg};
        int st = hx_decode(c, &b);
        if (st) return st;
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)(p + i) * n_vocab, hx_get_logits(c, i), (size_t)n_vocab * 4);
        p += n;
    }
    return HX_OK;
}

static double hx_t_max_diff(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

static int hx_t_open(struct hx_model *m, const char *policy, const char *fallback,
                     struct hx_context **c)
{
    struct hx_context_params cp = {.struct_size = sizeof cp,
                                   .policy = policy,
                                   .fallback = fallback,
                                   .n_threads = 2,
                                   .n_ctx = 64,
                                   .n_batch = 16};
    return hx_context_new(m, &cp, c);
}

static const struct hx_sched_stats *hx_t_stats(struct hx_context *c)
{
    return hx__sched_stats(hx__context_sched(c));
}

/* ---- tensor-split ------------------------------------------------------------------------------ */

/* stories260K (F32): every split of the GEMMs gives the reference logits, like one device. */
TEST(tensor_split_equals_single)
{
    static const char *const pols[] = {"tensor-split:cpu=0.5,ref=0.5",
                                       "tensor-split:ref=0.25,cpu=0.75", "tensor-split:cpu,ref",
                                       "tensor-split:ref=0.9,cpu=0.1"};
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    float *single = malloc(16 * 512 * 4), *got = malloc(16 * 512 * 4);
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "single:cpu", NULL, &c));
    ASSERT_OK(hx_t_feed(c, hx_seq_ids, 8, 16, 512, single));
    hx_context_free(c);
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        ASSERT_OK(hx_t_open(m, pols[k], NULL, &c));
        ASSERT_OK(hx_t_feed(c, hx_seq_ids, 8, 16, 512, got));
        double vs_single = hx_t_max_diff(got, single, 16 * 512),
               vs_ref = hx_t_max_diff(got, want, 16 * 512);
        const struct hx_sched_stats *st = hx_t_stats(c);
        fprintf(
            stderr,
            "  %-32s devices %-8s vs single %.2g, vs llama2.c %.2g, %lld groups, %zu bytes moved\n",
            pols[k], hx_context_devices(c), vs_single, vs_ref, (long long)st->n_parallel,
            st->bytes_moved);
        if (vs_single > 1e-4 || vs_ref > 1e-4)
            HX_FAIL_AT("%s: logits differ (%g, %g)", pols[k], vs_single, vs_ref);
        if (st->n_parallel < 6)
            HX_FAIL_AT("%s: only %lld parallel groups per token", pols[k],
                       (long long)st->n_parallel);
        if (!strstr(hx_context_devices(c), "ref"))
            HX_FAIL_AT("%s: ref not used (%s)", pols[k], hx_context_devices(c));
        hx_context_free(c);
    }
    free(single);
    free(got);
    free(want);
    hx_model_free(m);
}

/* With a Vulkan device (lavapipe in CI): cpu + vulkan, both directions, equal one device. */
TEST(tensor_split_vulkan)
{
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    if (hx_policy_validate("single:vulkan", NULL, NULL) != HX_OK) {
        free(want);
        SKIP("no Vulkan backend in this build");
    }
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    static const char *const pols[] = {"tensor-split:cpu=0.5,vulkan=0.5",
                                       "tensor-split:vulkan=0.7,cpu=0.3",
                                       "verify@ref:tensor-split:vulkan,cpu"};
    float *got = malloc(16 * 512 * 4);
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        struct hx_context *c;
        if (hx_t_open(m, pols[k], NULL, &c) != HX_OK) {
            free(got), free(want), hx_model_free(m);
            SKIP("no usable Vulkan device: %s", hx_last_error());
        }
        ASSERT_OK(hx_t_feed(c, hx_seq_ids, 8, 16, 512, got));
        double err = hx_t_max_diff(got, want, 16 * 512);
        fprintf(stderr, "  %-36s devices %-12s vs llama2.c %.2g\n", pols[k], hx_context_devices(c),
                err);
        if (err > 1e-4) HX_FAIL_AT("%s: logits error %g", pols[k], err);
        if (!strstr(hx_context_devices(c), "vulkan")) HX_FAIL_AT("%s: vulkan not used", pols[k]);
        const struct hx_verify_report *r;
        if (hx__sched_verify_report(hx__context_sched(c), &r) == HX_OK &&
            (r->n_failed || !r->n_checks))
            HX_FAIL_AT("%s: %lld of %lld checks failed", pols[k], (long long)r->n_failed,
                       (long long)r->n_checks);
        hx_context_free(c);
    }
    /* An asynchronous device failing mid-run (its error surfaces at synchronize) is recovered;
     * one corrupting its result (applied at synchronize) is caught by verify. */
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "tensor-split:cpu=0.5,vulkan=0.5", "cpu", &c));
    hx__fault_set("dev=vulkan,entry=run,after=30,count=1");
    int st = hx_t_feed(c, hx_seq_ids, 8, 16, 512, got);
    hx__fault_set("");
    ASSERT_OK(st);
    ASSERT_TRUE(hx_t_max_diff(got, want, 16 * 512) < 1e-4);
    ASSERT_EQ(hx_t_stats(c)->n_recoveries, 1);
    hx_context_free(c);
    ASSERT_OK(hx_t_open(m, "verify@ref:tensor-split:cpu,vulkan", NULL, &c));
    hx__fault_set("dev=vulkan,entry=run,mode=corrupt,after=9,count=1");
    st = hx_t_feed(c, hx_seq_ids, 8, 16, 512, got);
    hx__fault_set("");
    ASSERT_OK(st);
    const struct hx_verify_report *r;
    ASSERT_OK(hx__sched_verify_report(hx__context_sched(c), &r));
    ASSERT_EQ(r->n_failed, 1);
    ASSERT_STREQ(r->first.dev, "vulkan");
    hx_context_free(c);
    free(got);
    free(want);
    hx_model_free(m);
}

/* Quantized weights: the cpu part quantizes activations, the ref part does not, so the split
 * sits between the two devices: within both devices' distance of each other. */
TEST(tensor_split_quantized_models)
{
    static const char *const models[] = {"qwen3/qwen3-tern-tq2_0.gguf",
                                         "qwen3/qwen3-micro-q8_0.gguf"};
    for (size_t k = 0; k < 2; k++) {
        struct hx_model *m;
        if (hx_model_load(hx_test_data(models[k]), NULL, &m) != HX_OK)
            SKIP("%s not found", models[k]);
        struct hx_model_info mi = {.struct_size = sizeof mi};
        hx_model_get_info(m, &mi);
        size_t n = (size_t)8 * (size_t)mi.n_vocab;
        float *a = malloc(n * 4), *b = malloc(n * 4), *t = malloc(n * 4);
        const char *pols[] = {"single:cpu", "single:ref", "tensor-split:cpu=0.5,ref=0.5"};
        float *outs[] = {a, b, t};
        for (int p = 0; p < 3; p++) {
            struct hx_context *c;
            ASSERT_OK(hx_t_open(m, pols[p], NULL, &c));
            ASSERT_OK(hx_t_feed(c, hx_seq_ids, 4, 8, mi.n_vocab, outs[p]));
            hx_context_free(c);
        }
        double cpu_ref = hx_t_max_diff(a, b, n), ts_cpu = hx_t_max_diff(t, a, n),
               ts_ref = hx_t_max_diff(t, b, n);
        fprintf(stderr, "  %-30s cpu-ref %.3g, split-cpu %.3g, split-ref %.3g\n", models[k],
                cpu_ref, ts_cpu, ts_ref);
        if (ts_cpu > 2 * cpu_ref + 1e-4 || ts_ref > 2 * cpu_ref + 1e-4)
            HX_FAIL_AT(
                "%s: tensor-split is farther from cpu (%g) or ref (%g) than they are apart (%g)",
                models[k], ts_cpu, ts_ref, cpu_ref);
        free(a), free(b), free(t);
        hx_model_free(m);
    }
}

/* Decode of stories260K split 50/50 between cpu and ref: per matmul the input goes to ref
 * and ref's columns come back. Shapes: qkv 64->128, o 64->64, gate|up 64->344, down 172->64,
 * LM head 64->512; boundaries at multiples of 16 rows (gate|up: 176 | 168). */
TEST(tensor_split_bytes_accounted)
{
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "tensor-split:cpu=0.5,ref=0.5", NULL, &c));
    float *out = malloc(4 * 512 * 4);
    ASSERT_OK(hx_t_feed(c, hx_seq_ids, 3, 4, 512, out));
    const struct hx_sched_stats *st = hx_t_stats(c);
    size_t layer = (64 + 64) * 4 + (64 + 32) * 4 + (64 + 168) * 4 + (172 + 32) * 4;
    size_t want = 5 * layer + (64 + 256) * 4;
    ASSERT_EQ(st->bytes_moved, want);
    ASSERT_EQ(st->n_parallel, 5 * 4 + 1);
    ASSERT_EQ(st->n_transfers, 2 * (5 * 4 + 1));
    char *plan;
    ASSERT_OK(hx_context_plan_text(c, &plan));
    ASSERT_TRUE(strstr(plan, "join gu cols [176,344) ref -> cpu  672 bytes") != NULL);
    ASSERT_TRUE(strstr(plan, "rule tensor-split:cpu=0.50,ref=0.50") != NULL);
    hx_free(plan);
    free(out);
    hx_context_free(c);
    hx_model_free(m);
}

/* ---- faults ------------------------------------------------------------------------------------ */

struct hx_t_fault {
    const char *policy, *fault;
};

/* Each fault fires once the context exists (prefill or decode), the failed device's work is
 * re-run on cpu, the logits are the reference's, the device is left unhealthy and the
 * recovery is logged. */
TEST(fault_falls_back_to_cpu)
{
    static const struct hx_t_fault cases[] = {
        {"tensor-split:cpu=0.5,ref=0.5",
         "dev=ref,entry=run,after=0,count=1"}, /* prefill, 1st part */
        {"tensor-split:cpu=0.5,ref=0.5", "dev=ref,entry=run,after=40,count=1"}, /* decode */
        {"tensor-split:ref=0.5,cpu=0.5", "dev=ref,entry=run,after=25,count=1,mode=hang,ms=5"},
        {"tensor-split:cpu=0.5,ref=0.5", "dev=ref,entry=run,prob=0.05,seed=7"}, /* random */
        {"tensor-split:cpu=0.5,ref=0.5", "dev=ref,entry=copy,after=3,count=1"}, /* a transfer */
        {"gemm-offload:ref", "dev=ref,entry=run,after=9,count=1,mode=hang,ms=1"},
        {"verify:single:ref", "dev=ref,entry=run,after=30,count=1"}, /* target or its reference */
    };
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    float *got = malloc(16 * 512 * 4);
    setenv("HX_PROFILE_DIR", "off", 1);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct hx_context *c;
        ASSERT_OK(hx_t_open(m, cases[k].policy, "cpu", &c));
        hx_t_log_start();
        hx__fault_set(cases[k].fault);
        int st = hx_t_feed(c, hx_seq_ids, 6, 16, 512, got);
        hx__fault_set("");
        hx_log_set(NULL, NULL);
        ASSERT_OK(st);
        double err = hx_t_max_diff(got, want, 16 * 512);
        bool logged = strstr(hx_t_log, "failed") &&
                      (strstr(hx_t_log, "re-running the batch") || strstr(hx_t_log, "verify:"));
        fprintf(stderr, "  %-30s %-48s err %.2g, devices %s, recoveries %lld\n", cases[k].policy,
                cases[k].fault, err, hx_context_devices(c), (long long)hx_t_stats(c)->n_recoveries);
        if (err > 1e-4)
            HX_FAIL_AT("%s / %s: logits error %g", cases[k].policy, cases[k].fault, err);
        if (!logged)
            HX_FAIL_AT("%s / %s: no recovery message logged:\n%s", cases[k].policy, cases[k].fault,
                       hx_t_log);
        bool verify_ref = strstr(hx_t_log, "verify: the reference") != NULL;
        if (!verify_ref && strstr(hx_context_devices(c), "ref"))
            HX_FAIL_AT("%s / %s: ref still used (%s)", cases[k].policy, cases[k].fault,
                       hx_context_devices(c));
        hx_context_free(c);
    }
    unsetenv("HX_PROFILE_DIR");
    free(got);
    free(want);
    hx_model_free(m);
}

/* A device that answers, but after the split deadline, is treated as hung. */
TEST(late_device_times_out)
{
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    setenv("HX_SPLIT_TIMEOUT_MS", "500", 1);
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "single:ref", "cpu", &c));
    unsetenv("HX_SPLIT_TIMEOUT_MS");
    hx_t_log_start();
    hx__fault_set("dev=ref,entry=run,after=2,count=1,mode=slow,ms=800");
    float *got = malloc(8 * 512 * 4);
    int st = hx_t_feed(c, hx_seq_ids, 4, 8, 512, got);
    hx__fault_set("");
    hx_log_set(NULL, NULL);
    ASSERT_OK(st);
    ASSERT_TRUE(strstr(hx_t_log, "deadline") != NULL);
    ASSERT_TRUE(hx_t_max_diff(got, want, 8 * 512) < 1e-4);
    ASSERT_EQ(hx_t_stats(c)->n_recoveries, 1);
    free(got);
    free(want);
    hx_context_free(c);
    hx_model_free(m);
}

/* Without a fallback chain a tensor-split part's failure is an error, and the cache is as
 * before the call. */
TEST(tensor_split_fault_without_fallback)
{
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "tensor-split:cpu,ref", NULL, &c));
    hx__fault_set("dev=ref,entry=run,after=4,count=1");
    float *got = malloc(4 * 512 * 4);
    ASSERT_EQ(hx_t_feed(c, hx_seq_ids, 4, 4, 512, got), HX_E_DEVICE);
    hx__fault_set("");
    ASSERT_EQ(hx_kv_len(c, 0), 0);
    free(got);
    hx_context_free(c);
    hx_model_free(m);
}

/* ---- verify ------------------------------------------------------------------------------------ */

/* A clean run passes every check; a corrupted op output is found at that op, only there (the
 * reference is fed the target's inputs, so errors do not propagate), and logged. */
TEST(verify_catches_corruption)
{
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    static const struct hx_t_fault cases[] = {
        {"verify:single:cpu", NULL},
        {"verify@cpu:tensor-split:cpu,ref", NULL},
        {"verify:single:cpu", "dev=cpu,entry=run,mode=corrupt,after=7,count=1"},
        {"verify:gemm-offload:cpu", "dev=cpu,entry=run,mode=corrupt,after=70,count=1"},
        {"verify@cpu:tensor-split:cpu,ref", "dev=ref,entry=run,mode=corrupt,after=12,count=1"},
    };
    float *got = malloc(8 * 512 * 4);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct hx_context *c;
        ASSERT_OK(hx_t_open(m, cases[k].policy, NULL, &c));
        hx_t_log_start();
        hx__fault_set(cases[k].fault);
        int st = hx_t_feed(c, hx_seq_ids, 5, 8, 512, got);
        hx__fault_set("");
        hx_log_set(NULL, NULL);
        ASSERT_OK(st);
        const struct hx_verify_report *r;
        ASSERT_OK(hx__sched_verify_report(hx__context_sched(c), &r));
        fprintf(stderr, "  %-34s %-48s %lld checks, %lld failed", cases[k].policy,
                cases[k].fault ? cases[k].fault : "-", (long long)r->n_checks,
                (long long)r->n_failed);
        if (r->has_first)
            fprintf(stderr, "; first: node %lld %s %s L%d on %s, nmse %.3g",
                    (long long)r->first.node, hx_op_kind_name(r->first.kind),
                    hx_op_class_name(r->first.cls), r->first.layer, r->first.dev, r->first.nmse);
        fprintf(stderr, "\n");
        ASSERT_TRUE(r->n_checks > 8 * 30);
        ASSERT_TRUE(!r->ref_failed);
        if (!cases[k].fault) {
            ASSERT_EQ(r->n_failed, 0);
            ASSERT_TRUE(!r->has_first);
        } else {
            ASSERT_EQ(r->n_failed, 1);
            ASSERT_TRUE(r->has_first);
            ASSERT_TRUE(strstr(hx_t_log, "verify: first divergent op") != NULL);
            if (k == 2) { /* the 8th split of the prefill: every op is its own split */
                ASSERT_EQ(r->first.node, 7);
                ASSERT_EQ(r->first_phase, HX_PHASE_PREFILL);
                ASSERT_EQ(r->first_run, 0);
            }
            if (k == 4) ASSERT_STREQ(r->first.dev, "ref");
        }
        hx_context_free(c);
    }
    free(got);
    hx_model_free(m);
}

/* ---- auto ---------------------------------------------------------------------------------------- */

TEST(auto_measures_explains_and_caches)
{
    char dir[1024];
    ASSERT_TRUE(hx_test_mkdtemp(dir, sizeof dir, "test-policy") != NULL);
    setenv("HX_PROFILE_DIR", dir, 1);
    float *want = hx_t_ref_logits();
    if (!want) SKIP("stories260K reference logits not found");
    struct hx_model *m;
    ASSERT_OK(hx_model_load(hx_test_data("stories260K/stories260K.gguf"), NULL, &m));
    float *got = malloc(16 * 512 * 4);
    for (int pass = 0; pass < 2; pass++) {
        struct hx_context *c;
        ASSERT_OK(hx_t_open(m, "auto:cpu,ref", NULL, &c));
        char *plan;
        ASSERT_OK(hx_context_plan_text(c, &plan));
        ASSERT_TRUE(strstr(plan, "auto (prefill at 16 rows): chose ") != NULL);
        ASSERT_TRUE(strstr(plan, "auto (decode at 1 rows): chose ") != NULL);
        ASSERT_TRUE(strstr(plan, "rejected single:") != NULL);
        ASSERT_TRUE(strstr(plan, "predicted") != NULL);
        bool measured_now = strstr(plan, "(0 measured now") == NULL;
        if (pass == 0 && !measured_now) HX_FAIL_AT("first pass did not measure:\n%s", plan);
        if (pass == 1 && (measured_now || !strstr(plan, dir)))
            HX_FAIL_AT("second pass did not use the cache:\n%s", plan);
        hx_free(plan);
        ASSERT_OK(hx_t_feed(c, hx_seq_ids, 8, 16, 512, got));
        ASSERT_TRUE(hx_t_max_diff(got, want, 16 * 512) < 1e-4);
        ASSERT_TRUE(hx_t_stats(c)->predicted_us > 0);
        hx_context_free(c);
    }
    /* A candidate that fails while being measured is dropped, with a message. */
    setenv("HX_PROFILE_DIR", "off", 1);
    hx_t_log_start();
    hx__fault_set("dev=ref,entry=run,after=3,count=1");
    struct hx_context *c;
    int st = hx_t_open(m, "auto:cpu,ref", NULL, &c);
    hx__fault_set("");
    hx_log_set(NULL, NULL);
    ASSERT_OK(st);
    ASSERT_TRUE(strstr(hx_t_log, "dropping ref from auto's candidates") != NULL);
    ASSERT_OK(hx_t_feed(c, hx_seq_ids, 8, 16, 512, got));
    ASSERT_TRUE(hx_t_max_diff(got, want, 16 * 512) < 1e-4);
    ASSERT_STREQ(hx__sched_rule_text(hx__context_sched(c), HX_PHASE_DECODE), "single:cpu");
    hx_context_free(c);
    unsetenv("HX_PROFILE_DIR");
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
    free(got);
    free(want);
    hx_model_free(m);
}

/* ---- bad input ------------------------------------------------------------------------------------ */

TEST(policy_errors_name_the_bad_part)
{
    static const struct {
        const char *policy, *backend, *fallback, *needle;
    } bad[] = {
        {"tensor-split:cpu", NULL, NULL, "at least two devices"},
        {"tensor-split:cpu=0.5,ref=0.6", NULL, NULL, "add up to"},
        {"tensor-split:cpu,cpu", NULL, NULL, "named twice"},
        {"tensor-split:", NULL, NULL, "empty device list"},
        {"tensor-split:cpu=x,ref", NULL, NULL, "bad ratio"},
        {"auto:cpu=0.5", NULL, NULL, "without ratios"},
        {"auto:cpu,cpu", NULL, NULL, "named twice"},
        {"auto:warp", NULL, NULL, "unknown device 'warp'"},
        {"verify:verify", NULL, NULL, "cannot wrap"},
        {"verify@:cpu", NULL, NULL, "empty reference"},
        {"verify@nosuch", NULL, NULL, "unknown device 'nosuch'"},
        {"verify:", NULL, NULL, "empty inner"},
        {"verify:warp-drive", NULL, NULL, "unknown device 'warp-drive'"},
        {"verifyx", NULL, NULL, "unknown policy"},
        {"single", NULL, "", "empty device list"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int st = hx_policy_validate(bad[k].policy, bad[k].backend, bad[k].fallback);
        if (st != HX_E_INVAL || !strstr(hx_last_error(), bad[k].needle))
            HX_FAIL_AT("'%s': status %d, message '%s' (want '%s')", bad[k].policy, st,
                       hx_last_error(), bad[k].needle);
    }
    static const char *const good[] = {
        "tensor-split:cpu=0.7,ref=0.3", "verify",          "verify:cpu", "verify@cpu:single:ref",
        "verify:tensor-split:cpu,ref",  "verify:cpu_only", "auto",       "auto:cpu,ref",
        "verify:auto:cpu,ref"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
        if (hx_policy_validate(good[k], NULL, NULL) != HX_OK)
            HX_FAIL_AT("'%s' refused: %s", good[k], hx_last_error());
}

TEST_MAIN()
