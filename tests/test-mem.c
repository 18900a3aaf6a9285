/*
 * test-mem.c — the scheduler's memory accounting (core/sched-fit.c) against what the devices
 * actually got: for every policy here (cpu and ref everywhere; Vulkan and npu-sim where
 * present), after a load and runs of both phases, the bytes each device holds per kind
 * (weights as prepared, KV caches, activation slots; counted by core/sched-mem.c as the
 * vtable hands them out; and the backends' own buffers, scratch: the CPU's matmul, attention
 * and per-thread buffers, ref's rows, Vulkan's and HIP's split scratch, the NPU's per-kernel
 * buffer objects, as each backend's scratch_bytes says they hold) equal what the plan
 * accounted before anything was loaded. auto's measuring runs (every op on every candidate,
 * prefill at a batch the plan may not have) are in the plan too. And fit
 * under a cap puts on the capped device exactly the layers that fit: its need is within the
 * cap, and one more layer would not be. The refusals' exit codes and messages are
 * tests/test-mem-cli.sh's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "harness.h"
#include "hx.h"
#include "model.h"
#include "registry.h"
#include "sched-impl.h"

static const char *const hx_t_kind[HX_SCHED_MEM_KINDS] = {"weights", "kv", "act", "staging",
                                                           "scratch"};

#define HX_T_CTX 64
#define HX_T_SEQ 2

static int hx_t_open_batch(struct hx_model *m, const char *policy, const char *mem, int n_batch,
                           struct hx_context **c)
{
    struct hx_context_params cp = {.struct_size = sizeof cp,
                                   .policy = policy,
                                   .mem = mem,
                                   .n_threads = 2,
                                   .n_ctx = HX_T_CTX,
                                   .n_seq = HX_T_SEQ,
                                   .n_batch = n_batch};
    return hx_context_new(m, &cp, c);
}

static int hx_t_open(struct hx_model *m, const char *policy, const char *mem, struct hx_context **c)
{
    return hx_t_open_batch(m, policy, mem, 16, c);
}

/* A prefill of a whole batch (16 rows: the largest split the plan has, so the backends' scratch
 * grows to what the plan accounts), 3 decode steps on sequence 0 and one on sequence 1, then
 * sequence 0 continued by whole batches to the context's end (the plan counts attention
 * scratch for positions up to there: the CPU's head-major K/V copy grows with them). */
static int hx_t_run(struct hx_context *c)
{
    int32_t tok[16], pos[16], seq[16] = {0};
    int8_t lg[16] = {0};
    for (int i = 0; i < 16; i++) pos[i] = i, tok[i] = 1 + 4 * i;
    lg[15] = 1;
    struct hx_batch b = {.n_rows = 16, .token = tok, .pos = pos, .seq = seq, .logits = lg};
    int st = hx_decode(c, &b);
    for (int t = 0; st == HX_OK && t < 4; t++) {
        int32_t p1 = t < 3 ? 16 + t : 0, s1 = t < 3 ? 0 : 1;
        int8_t l1 = 1;
        struct hx_batch d = {.n_rows = 1, .token = tok + t, .pos = &p1, .seq = &s1, .logits = &l1};
        st = hx_decode(c, &d);
    }
    /* positions 19 .. HX_T_CTX - 1: first the rows that make the rest whole batches of 16,
     * so the last batch ends at the context's end */
    for (int p0 = 19; st == HX_OK && p0 < HX_T_CTX;) {
        const int nb = (HX_T_CTX - p0) % 16 ? (HX_T_CTX - p0) % 16 : 16;
        for (int i = 0; i < 16; i++) pos[i] = p0 + i, lg[i] = i == nb - 1;
        b.n_rows = nb;
        st = hx_decode(c, &b);
        p0 += nb;
    }
    return st;
}

/* Set while the devices checked are discrete (HIP): their staging is the runtime's own. */
static bool hx_t_discrete;

/* Every device's need equals what it holds, kind by kind (staging is a backend's own buffer:
 * only a discrete device has any, and none is here; scratch is what the backend's own buffers
 * grew to, which the run's whole-batch prefill makes the plan's largest). Returns the devices
 * compared. */
static int hx_t_compare(struct hx_context *c, const char *what)
{
    struct hx_sched_mem mem[8];
    int n = hx__sched_mem(hx__context_sched(c), mem, 8), used = 0;
    for (int d = 0; d < n; d++) {
        size_t need = 0;
        for (int k = 0; k < HX_SCHED_MEM_KINDS; k++) need += mem[d].need[k];
        used += need > 0;
        fprintf(stderr,
                "  %-40s %-8s need %8zu %8zu %8zu %zu %zu, allocated %8zu %8zu %8zu %zu\n", what,
                mem[d].id, mem[d].need[0], mem[d].need[1], mem[d].need[2], mem[d].need[3],
                mem[d].need[4], mem[d].alloc[0], mem[d].alloc[1], mem[d].alloc[2],
                mem[d].alloc[4]);
        for (int k = 0; k < HX_SCHED_MEM_KINDS; k++)
            if (k != 3 && mem[d].need[k] != mem[d].alloc[k])
                HX_FAIL_AT("%s: %s %s: plan says %zu bytes, the device holds %zu", what, mem[d].id,
                           hx_t_kind[k], mem[d].need[k], mem[d].alloc[k]);
        if (mem[d].need[3] && !hx_t_discrete)
            HX_FAIL_AT("%s: %s: staging %zu on a unified-memory device", what, mem[d].id,
                       mem[d].need[3]);
    }
    return used;
}

static bool hx_t_have(const char *dev)
{
    char pol[64];
    snprintf(pol, sizeof pol, "single:%s", dev);
    return hx_policy_validate(pol, NULL, NULL) == HX_OK;
}

/* The need of device id under the context's plan (0 if it has none). */
static size_t hx_t_need(struct hx_context *c, const char *id, size_t *weights)
{
    struct hx_sched_mem mem[8];
    int n = hx__sched_mem(hx__context_sched(c), mem, 8);
    for (int d = 0; d < n; d++)
        if (!strcmp(mem[d].id, id)) {
            if (weights) *weights = mem[d].need[0];
            return mem[d].need[0] + mem[d].need[1] + mem[d].need[2] + mem[d].need[3] +
                   mem[d].need[4];
        }
    return 0;
}

static const char *const hx_t_models[] = {"stories260K/stories260K.gguf",
                                          "qwen3/qwen3-micro-q8_0.gguf"};

/* Open, run and compare one policy; a device that cannot be opened here is a skip. */
static void hx_t_check(struct hx_model *m, const char *model, const char *pol, const char *mem,
                       int *n_checked)
{
    struct hx_context *c;
    char what[160];
    snprintf(what, sizeof what, "%s %s%s%s", strrchr(model, '/') + 1, pol, mem ? " --mem " : "",
             mem ? mem : "");
    if (hx_t_open(m, pol, mem, &c) != HX_OK) {
        HX_FAIL_AT("%s: %s", what, hx_last_error());
        return;
    }
    int st = hx_t_run(c);
    if (st)
        HX_FAIL_AT("%s: run: %s", what, hx_last_error());
    else if (hx_t_compare(c, what) == 0)
        HX_FAIL_AT("%s: no device holds anything", what);
    (*n_checked)++;
    hx_context_free(c);
}

/* The bytes each device holds after runs of both phases are the bytes its plan accounted. */
TEST(accounting_equals_allocations)
{
    static const char *const host[] = {"single:cpu",
                                       "single:ref",
                                       "gemm-offload:ref",
                                       "layer-split:cpu=0.5,ref=0.5",
                                       "layer-split:alternate:ref,cpu",
                                       "tensor-split:cpu=0.5,ref=0.5",
                                       "phase-split:cpu,ref",
                                       "op-map:attn=ref,down=ref,default=cpu",
                                       "fit:ref",
                                       "auto:cpu,ref"};
    static const char *const vk[] = {"single:vulkan", "tensor-split:vulkan=0.5,cpu=0.5",
                                     "layer-split:vulkan=0.5,cpu=0.5", "fit:vulkan"};
    static const char *const npu[] = {"single:npu-sim", "gemm-offload:npu-sim", "fit:npu-sim"};
    bool have_vk = hx_t_have("vulkan"), have_npu = hx_t_have("npu-sim");
    int checked = 0;
    setenv("HX_PROFILE_DIR", "off", 1); /* auto measures; no cache file from a test */
    for (size_t k = 0; k < sizeof hx_t_models / sizeof *hx_t_models; k++) {
        struct hx_model *m;
        if (hx_model_load(hx_test_data(hx_t_models[k]), NULL, &m) != HX_OK)
            SKIP("%s not found (%s)", hx_t_models[k], hx_last_error());
        for (size_t i = 0; i < sizeof host / sizeof *host; i++)
            hx_t_check(m, hx_t_models[k], host[i], NULL, &checked);
        for (size_t i = 0; have_vk && i < sizeof vk / sizeof *vk; i++)
            hx_t_check(m, hx_t_models[k], vk[i], NULL, &checked);
        for (size_t i = 0; have_npu && i < sizeof npu / sizeof *npu; i++)
            hx_t_check(m, hx_t_models[k], npu[i], NULL, &checked);
        hx_model_free(m);
    }
    fprintf(stderr, "  %d plans checked (vulkan %s, npu-sim %s)\n", checked,
            have_vk ? "yes" : "absent", have_npu ? "yes" : "absent");
    if (!have_vk && getenv("CI") && !strcmp(getenv("CI"), "true"))
        HX_FAIL_AT("CI=true but no Vulkan backend (lavapipe) in this build");
}

/* auto measures every op on every candidate, the prefill at min(n_batch, 128, n_ctx) rows but
 * at least 2: more rows than a batch of 1 plans for, and ops on devices its plan may not use.
 * What that grows the backends' buffers to is in the plan; after the measuring and runs of the
 * batch, each device holds exactly that. */
TEST(accounting_auto_measuring)
{
    static const char *const pols[] = {"auto:cpu,ref", "auto:ref,cpu", "auto:cpu,npu-sim"};
    int checked = 0;
    setenv("HX_PROFILE_DIR", "off", 1); /* measure every time; no cache file from a test */
    for (size_t k = 0; k < sizeof hx_t_models / sizeof *hx_t_models; k++) {
        struct hx_model *m;
        if (hx_model_load(hx_test_data(hx_t_models[k]), NULL, &m) != HX_OK)
            SKIP("%s not found (%s)", hx_t_models[k], hx_last_error());
        for (size_t i = 0; i < sizeof pols / sizeof *pols; i++) {
            if (strstr(pols[i], "npu-sim") && !hx_t_have("npu-sim")) continue;
            static const int batch[] = {1, 4};
            for (int b = 0; b < 2; b++) {
                struct hx_context *c;
                char what[160];
                snprintf(what, sizeof what, "%s %s -b %d", strrchr(hx_t_models[k], '/') + 1,
                         pols[i], batch[b]);
                if (hx_t_open_batch(m, pols[i], NULL, batch[b], &c) != HX_OK) {
                    HX_FAIL_AT("%s: %s", what, hx_last_error());
                    continue;
                }
                /* batches of batch[b] rows, then decode steps on both sequences */
                int st = HX_OK;
                for (int32_t p0 = 0; st == HX_OK && p0 < 8; p0 += batch[b]) {
                    int32_t tok[4], pos[4], seq[4] = {0};
                    int8_t lg[4] = {0};
                    for (int r = 0; r < batch[b]; r++) tok[r] = 1 + p0 + r, pos[r] = p0 + r;
                    lg[batch[b] - 1] = 1;
                    struct hx_batch bt = {
                        .n_rows = batch[b], .token = tok, .pos = pos, .seq = seq, .logits = lg};
                    st = hx_decode(c, &bt);
                }
                int32_t t1 = 3, p1 = 0, s1 = 1;
                int8_t l1 = 1;
                struct hx_batch d = {
                    .n_rows = 1, .token = &t1, .pos = &p1, .seq = &s1, .logits = &l1};
                if (st == HX_OK) st = hx_decode(c, &d);
                if (st)
                    HX_FAIL_AT("%s: run: %s", what, hx_last_error());
                else if (hx_t_compare(c, what) == 0)
                    HX_FAIL_AT("%s: no device holds anything", what);
                checked++;
                hx_context_free(c);
            }
        }
        hx_model_free(m);
    }
    fprintf(stderr, "  %d auto plans checked\n", checked);
}

/* The same on HIP (test-hip-build.sh runs this with the emulator as HX_HIP_MODULE): its split
 * scratch (row metadata, int8 activations, split-K partial sums) as the plan accounts it. */
TEST(accounting_hip)
{
    const struct hx_backend_entry *e = hx__backend_find("hip");
    if (!e || e->probe_status != HX_OK)
        SKIP_NA("hip unavailable (test-hip-build.sh runs this on the emulator): %s",
                e ? e->why : "not compiled in");
    static const char *const pols[] = {"single:hip", "layer-split:hip=0.5,cpu=0.5",
                                       "tensor-split:hip=0.5,cpu=0.5"};
    int checked = 0;
    hx_t_discrete = true; /* staging: planned, and the HIP runtime's to do */
    for (size_t k = 0; k < sizeof hx_t_models / sizeof *hx_t_models; k++) {
        struct hx_model *m;
        if (hx_model_load(hx_test_data(hx_t_models[k]), NULL, &m) != HX_OK)
            SKIP("%s not found (%s)", hx_t_models[k], hx_last_error());
        for (size_t i = 0; i < sizeof pols / sizeof *pols; i++)
            hx_t_check(m, hx_t_models[k], pols[i], NULL, &checked);
        hx_model_free(m);
    }
    hx_t_discrete = false;
    fprintf(stderr, "  %d plans checked on hip\n", checked);
}

/* fit:DEV under a cap: DEV holds layers 0..N-1 with N the most that fit (its need within the
 * cap, one more layer over it), the rest on the CPU, and the logits are the one device's. */
static void hx_t_fit_cap(const char *dev, const char *model, double share)
{
    struct hx_model *m;
    if (hx_model_load(hx_test_data(model), NULL, &m) != HX_OK)
        SKIP("%s not found (%s)", model, hx_last_error());
    char pol[64], mem[64];
    snprintf(pol, sizeof pol, "single:%s", dev);
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, pol, NULL, &c));
    size_t whole = hx_t_need(c, dev, NULL), base = 0;
    /* what the device holds from its opening on, whatever it runs (the NPU's kernel buffers):
     * the cap is that and a share of the rest */
    struct hx_sched *s0 = hx__context_sched(c);
    for (int d = 0; d < s0->n_dev; d++)
        if (!strcmp(s0->dev[d].dev->id, dev)) {
            size_t b[HX_SCRATCH_BUFS];
            const struct hx_split none = {.struct_size = sizeof none};
            ASSERT_OK(hx__dev_scratch_bytes(s0->dev[d].dev, &none, b));
            for (int k = 0; k < HX_SCRATCH_BUFS; k++) base += b[k];
        }
    hx_context_free(c);
    size_t cap = base + (size_t)((double)(whole - base) * share);
    snprintf(pol, sizeof pol, "fit:%s", dev);
    snprintf(mem, sizeof mem, "%s=%zu", dev, cap);
    ASSERT_OK(hx_t_open(m, pol, mem, &c));
    const char *rule = hx__sched_rule_text(hx__context_sched(c), HX_PHASE_DECODE);
    char want[80];
    int last = -1;
    snprintf(want, sizeof want, "fit:%s=L0-", dev);
    if (!strncmp(rule, want, strlen(want))) last = atoi(rule + strlen(want));
    size_t need = hx_t_need(c, dev, NULL);
    int n_layer = (int)m->hp.n_layer;
    fprintf(stderr, "  %s %s --mem %s: %s; %s needs %zu of %zu\n", model, pol, mem, rule, dev, need,
            cap);
    if (last < 0 || last + 1 >= n_layer)
        HX_FAIL_AT("%s: expected a split with some layers on %s, got %s", pol, dev, rule);
    else if (need > cap)
        HX_FAIL_AT("%s: %s needs %zu, over the cap %zu", pol, dev, need, cap);
    else {
        /* the same rule with one more layer on dev, accounted as the plan is */
        struct hx_sched *s = hx__context_sched(c);
        struct hx_rule r = s->rule[HX_PHASE_DECODE];
        struct hx_graph g[HX_PHASE_COUNT];
        size_t more[HX_MAX_DEVICES][HX_MEM_KINDS], sum = 0;
        const struct hx_rule *rr[HX_PHASE_COUNT] = {&r, &r};
        r.layer_end[0]++;
        ASSERT_OK(hx__phase_graphs(s, g));
        ASSERT_OK(hx__mem_need(s, g, rr, more));
        for (int k = 0; k < HX_MEM_KINDS; k++) sum += more[r.dev[0]][k];
        hx__graph_free(&g[0]), hx__graph_free(&g[1]);
        fprintf(stderr, "  with layer %d too, %s would need %zu\n", last + 1, dev, sum);
        if (sum <= cap)
            HX_FAIL_AT("%s: layer %d would still fit %s (%zu of %zu)", pol, last + 1, dev, sum,
                       cap);
    }
    if (!strstr(rule, "cpu=L")) HX_FAIL_AT("%s: the rest is not on the cpu: %s", pol, rule);
    ASSERT_OK(hx_t_run(c));
    hx_t_compare(c, pol);
    hx_context_free(c);
    hx_model_free(m);
}

TEST(fit_cap_ref)
{
    hx_t_fit_cap("ref", "stories260K/stories260K.gguf", 0.7);
    hx_t_fit_cap("ref", "stories260K/stories260K.gguf", 0.45);
    hx_t_fit_cap("ref", "qwen3/qwen3-micro-q8_0.gguf", 0.013);
}

TEST(fit_cap_vulkan)
{
    if (!hx_t_have("vulkan")) SKIP("no Vulkan backend in this build");
    hx_t_fit_cap("vulkan", "stories260K/stories260K.gguf", 0.6);
    hx_t_fit_cap("vulkan", "qwen3/qwen3-micro-q8_0.gguf", 0.02);
}

TEST(fit_cap_npu_sim)
{
    if (!hx_t_have("npu-sim")) SKIP("no npu-sim backend in this build");
    hx_t_fit_cap("npu-sim", "stories260K/stories260K.gguf", 0.6);
}

/* A cap given is the limit, and it names where it came from; bad --mem text is refused. */
TEST(limits_and_parsing)
{
    struct hx_model *m;
    if (hx_model_load(hx_test_data(hx_t_models[0]), NULL, &m) != HX_OK)
        SKIP("%s not found", hx_t_models[0]);
    struct hx_context *c;
    ASSERT_OK(hx_t_open(m, "single:cpu", "cpu=1.5G,ref=512M", &c));
    struct hx_sched_mem mem[8];
    int n = hx__sched_mem(hx__context_sched(c), mem, 8);
    ASSERT_TRUE(n >= 1);
    ASSERT_STREQ(mem[0].id, "cpu");
    ASSERT_EQ(mem[0].limit, (size_t)3 << 29);
    ASSERT_TRUE(strstr(mem[0].limit_from, "--mem cpu") != NULL);
    hx_context_free(c);
    ASSERT_OK(hx_t_open(m, "single:cpu", NULL, &c));
    n = hx__sched_mem(hx__context_sched(c), mem, 8);
    ASSERT_TRUE(mem[0].limit > 0); /* the host reports its memory */
    hx_context_free(c);
    static const char *const bad[] = {"cpu=", "cpu=0",   "cpu=-1G",       "cpu=1.5", "cpu=2Q",
                                      "=1G",  "nope=1G", "cpu=1G,cpu=2G", "cpu",     ","};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (hx_mem_validate(bad[i]) == HX_OK) HX_FAIL_AT("--mem '%s' accepted", bad[i]);
    static const char *const good[] = {"cpu=1048576", "cpu=512M,vulkan=2G", "ref=1.5GiB", "cpu=64k",
                                       "gpu=1T"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (hx_mem_validate(good[i]) != HX_OK)
            HX_FAIL_AT("--mem '%s' refused: %s", good[i], hx_last_error());
    /* a plan over its cap is refused before loading, naming the device and both numbers */
    ASSERT_TRUE(hx_t_open(m, "single:cpu", "cpu=1M", &c) == HX_E_NOMEM);
    ASSERT_TRUE(strstr(hx_last_error(), "cpu needs") != NULL);
    ASSERT_TRUE(strstr(hx_last_error(), "1048576 bytes, --mem cpu") != NULL);
    hx_model_free(m);
}

TEST_MAIN()
