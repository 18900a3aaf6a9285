/*
 * test-load.c — weights load where they run (docs/policies.md "Weights load where they run").
 * The loader never copies a fused QKV or gate|up weight into host memory: where its parts lie
 * end to end in the file (the shared models) the fused weight is a view of the mapping; where
 * they do not (the same model rewritten here with a 1 KiB alignment, so padding separates the
 * parts) it is described as its parts, and each device reads them into its own memory. Then:
 * no host copy exists under single:ref, single:vulkan, single:npu-sim, fit and tensor-split on
 * them (hx_weight_host_bytes() == 0; the cpu repacks from a transient copy where it repacks,
 * and keeps one host matrix where it does not, HX_CPU_REPACK=0, freed with the model); the
 * logits equal the unpadded model's bit for bit under every policy, tensor-split slices that
 * cross part boundaries included; the accounted weight bytes equal the allocated ones; and the
 * load-progress callback reports every device's weight bytes up to its accounted total.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "hx.h"
#include "model.h"
#include "sched-impl.h"

#define HX_T_MODEL "qwen3/qwen3-micro-q8_0.gguf"

static const struct hx_gguf *hx_t_src;

static int hx_t_fill(void *ud, uint64_t i, void *dst, size_t nbytes)
{
    (void)ud;
    memcpy(dst, hx_t_src->tensors[i].data, nbytes);
    return HX_OK;
}

/* src rewritten to dst with tensor data aligned to `align` bytes (same keys, same tensors). */
static int hx_t_realign(const char *src, const char *dst, uint32_t align)
{
    struct hx_gguf *g;
    struct hx_gguf_writer *w;
    int st = hx__gguf_open(src, false, &g);
    if (st) return st;
    if ((st = hx__gguf_writer_new(&w))) {
        hx__gguf_close(g);
        return st;
    }
    for (uint64_t i = 0; i < g->n_kv && !st; i++)
        if (strcmp(g->kv[i].key, "general.alignment")) st = hx__gguf_copy_kv(w, g, i);
    if (!st) st = hx__gguf_set_alignment(w, align);
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        st = hx__gguf_add_tensor(w, t->name, t->ggml_type, t->n_dims, t->ne, NULL);
    }
    hx_t_src = g;
    if (!st) st = hx__gguf_write(w, dst, hx_t_fill, NULL, NULL);
    hx__gguf_writer_free(w);
    hx__gguf_close(g);
    return st;
}

static char hx_t_dir[512], hx_t_padded[600];

/* The shared model rewritten once per run with its q|k|v and gate|up parts apart. */
static const char *hx_t_padded_model(void)
{
    if (hx_t_padded[0]) return hx_t_padded;
    if (!hx_test_mkdtemp(hx_t_dir, sizeof hx_t_dir, "load")) return NULL;
    snprintf(hx_t_padded, sizeof hx_t_padded, "%s/padded.gguf", hx_t_dir);
    if (hx_t_realign(hx_test_data(HX_T_MODEL), hx_t_padded, 1024) != HX_OK) {
        fprintf(stderr, "  realign: %s\n", hx_last_error());
        hx_t_padded[0] = '\0';
        return NULL;
    }
    return hx_t_padded;
}

static bool hx_t_have(const char *dev)
{
    char pol[64];
    snprintf(pol, sizeof pol, "single:%s", dev);
    return hx_policy_validate(pol, NULL, NULL) == HX_OK;
}

struct hx_t_prog {
    char dev[8][64];
    uint64_t done[8], total[8];
    int n, calls;
    bool backwards;
};

static void hx_t_progress(void *ud, const char *dev, uint64_t done, uint64_t total)
{
    struct hx_t_prog *p = ud;
    p->calls++;
    int i = 0;
    while (i < p->n && strcmp(p->dev[i], dev)) i++;
    if (i == p->n) {
        if (p->n == 8) return;
        snprintf(p->dev[p->n++], sizeof p->dev[0], "%s", dev);
    } else if (done < p->done[i]) {
        p->backwards = true;
    }
    p->done[i] = done, p->total[i] = total;
}

static int hx_t_open(struct hx_model *m, const char *policy, const char *mem,
                     struct hx_t_prog *prog, struct hx_context **c)
{
    struct hx_context_params cp = {.struct_size = sizeof cp, .policy = policy, .mem = mem,
                                   .n_threads = 2, .n_ctx = 64, .n_seq = 1, .n_batch = 16,
                                   .load_progress = prog ? hx_t_progress : NULL,
                                   .load_progress_data = prog};
    return hx_context_new(m, &cp, c);
}

/* A prefill of 8 rows and 2 decode steps; the last step's logits into out (n_vocab floats). */
static int hx_t_run(struct hx_context *c, float *out, int64_t n_vocab)
{
    int32_t tok[8] = {1, 5, 9, 13, 17, 21, 25, 29}, pos[8], seq[8] = {0};
    int8_t lg[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    for (int i = 0; i < 8; i++) pos[i] = i;
    struct hx_batch b = {.n_rows = 8, .token = tok, .pos = pos, .seq = seq, .logits = lg};
    int st = hx_decode(c, &b);
    for (int t = 0; st == HX_OK && t < 2; t++) {
        int32_t p1 = 8 + t, s1 = 0;
        int8_t l1 = 1;
        struct hx_batch d = {.n_rows = 1, .token = tok + t, .pos = &p1, .seq = &s1, .logits = &l1};
        st = hx_decode(c, &d);
    }
    const float *l = st == HX_OK ? hx_get_logits(c, -1) : NULL;
    if (l) memcpy(out, l, (size_t)n_vocab * sizeof *out);
    return l ? HX_OK : (st ? st : HX_E_INVAL);
}

/* Accounted weight bytes equal allocated ones on every device. */
static void hx_t_accounted(struct hx_context *c, const char *what)
{
    struct hx_sched_mem mem[8];
    int n = hx__sched_mem(hx__context_sched(c), mem, 8);
    for (int d = 0; d < n; d++)
        if (mem[d].need[0] != mem[d].alloc[0])
            HX_FAIL_AT("%s: %s: plan says %zu weight bytes, the device holds %zu", what,
                       mem[d].id, mem[d].need[0], mem[d].alloc[0]);
}

/* The shared model's fused weights are views of its mapping: the parts lie end to end. */
TEST(fused_weights_are_views)
{
    struct hx_model *m;
    if (hx_model_load(hx_test_data(HX_T_MODEL), NULL, &m) != HX_OK)
        SKIP("%s not found (%s)", HX_T_MODEL, hx_last_error());
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const struct hx_layer *ly = &m->layers[il];
        ASSERT_TRUE(ly->fused_qkv && ly->fused_gu);
        ASSERT_TRUE(ly->wqkv.data == ly->wq.data && ly->wqkv.n_parts == 0);
        ASSERT_TRUE(ly->wgu.data == ly->wgate.data && ly->wgu.n_parts == 0);
        ASSERT_EQ(ly->wqkv.nbytes, ly->wq.nbytes + ly->wk.nbytes + ly->wv.nbytes);
    }
    ASSERT_EQ(hx_weight_host_bytes(), 0);
    hx_model_free(m);
}

/* Policy, and whether its devices may hold a host copy of a fused weight (the cpu's own). */
static const struct {
    const char *policy, *needs; /* needs: a device the policy cannot run without */
    bool host_copy_ok;
} hx_t_plans[] = {
    {"single:ref", "ref", false},
    {"single:cpu", "cpu", true},
    {"tensor-split:ref=0.3,cpu=0.7", "ref", true},
    {"single:vulkan", "vulkan", false},
    {"tensor-split:vulkan=0.3,ref=0.7", "vulkan", false},
    {"tensor-split:cpu=0.6,vulkan=0.4", "vulkan", true},
    {"layer-split:vulkan=0.5,cpu=0.5", "vulkan", true},
    {"fit:vulkan", "vulkan", true},
    {"single:npu-sim", "npu-sim", false},
    {"gemm-offload:npu-sim", "npu-sim", true},
};

/* The padded model: fused weights of parts, read by each device from the mapping, same logits. */
TEST(parts_load_where_they_run)
{
    const char *padded = hx_t_padded_model();
    if (!padded) SKIP("%s not found or not rewritable", HX_T_MODEL);
    struct hx_model *a, *b;
    ASSERT_OK(hx_model_load(hx_test_data(HX_T_MODEL), NULL, &a));
    ASSERT_OK(hx_model_load(padded, NULL, &b));
    for (int64_t il = 0; il < b->hp.n_layer; il++) {
        const struct hx_layer *ly = &b->layers[il];
        ASSERT_TRUE(ly->fused_qkv && ly->fused_gu);
        ASSERT_TRUE(ly->wqkv.data == NULL && ly->wqkv.n_parts == 3);
        ASSERT_TRUE(ly->wgu.data == NULL && ly->wgu.n_parts == 2);
        ASSERT_TRUE(ly->wqkv.parts[0].data == ly->wq.data && ly->wqkv.parts[2].data == ly->wv.data);
        ASSERT_TRUE(ly->wgu.parts[1].data == ly->wup.data);
    }
    const int64_t nv = a->hp.n_vocab;
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    ASSERT_TRUE(la && lb);
    setenv("HX_PROFILE_DIR", "off", 1);
    int checked = 0;
    for (size_t i = 0; i < sizeof hx_t_plans / sizeof *hx_t_plans; i++) {
        const char *pol = hx_t_plans[i].policy;
        if (!hx_t_have(hx_t_plans[i].needs)) {
            fprintf(stderr, "  %s: no %s here\n", pol, hx_t_plans[i].needs);
            continue;
        }
        const char *mem = !strncmp(pol, "fit:", 4) ? "vulkan=1M" : NULL;
        struct hx_context *ca, *cb;
        ASSERT_OK(hx_t_open(a, pol, mem, NULL, &ca));
        ASSERT_OK(hx_t_open(b, pol, mem, NULL, &cb));
        size_t copies = hx_weight_host_bytes();
        const struct hx_tsplit *ts = hx__context_sched(cb)->rule[HX_PHASE_DECODE].ts;
        int crossing = 0; /* slices of parts that span two or three of them */
        for (int64_t k = 0; ts && k < ts->n_w * ts->n_parts; k++) crossing += ts->w[k].n_parts > 1;
        if (ts && !crossing) HX_FAIL_AT("%s: no slice crosses a part boundary", pol);
        ASSERT_OK(hx_t_run(ca, la, nv));
        ASSERT_OK(hx_t_run(cb, lb, nv));
        hx_t_accounted(cb, pol);
        fprintf(stderr, "  %-36s host copies %zu bytes, %d slices across parts, logits %s\n", pol,
                copies, crossing, memcmp(la, lb, (size_t)nv * sizeof *la) ? "DIFFER" : "equal");
        if (!hx_t_plans[i].host_copy_ok && copies)
            HX_FAIL_AT("%s: %zu bytes of fused weights copied into host memory", pol, copies);
        if (memcmp(la, lb, (size_t)nv * sizeof *la))
            HX_FAIL_AT("%s: the padded model's logits differ from the unpadded one's", pol);
        hx_context_free(ca);
        hx_context_free(cb);
        checked++;
    }
    hx_model_free(b);
    ASSERT_EQ(hx_weight_host_bytes(), 0); /* the cpu's host matrices, if any, went with b */
    hx_model_free(a);
    free(la), free(lb);
    fprintf(stderr, "  %d plans compared\n", checked);
    if (!hx_t_have("vulkan") && hx_test_in_ci())
        HX_FAIL_AT("CI=true but no Vulkan backend (lavapipe) in this build");
}

/* Where the cpu reads a weight as it is (no repack), a weight of parts becomes one host
 * matrix, made once, counted, and freed with the model. */
TEST(cpu_without_repack_gets_a_host_matrix)
{
    const char *padded = hx_t_padded_model();
    if (!padded) SKIP("%s not found or not rewritable", HX_T_MODEL);
    struct hx_model *a, *b;
    ASSERT_OK(hx_model_load(hx_test_data(HX_T_MODEL), NULL, &a));
    ASSERT_OK(hx_model_load(padded, NULL, &b));
    const int64_t nv = a->hp.n_vocab;
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    ASSERT_TRUE(la && lb);
    setenv("HX_CPU_REPACK", "0", 1);
    struct hx_context *ca, *cb;
    ASSERT_OK(hx_t_open(a, "single:cpu", NULL, NULL, &ca));
    ASSERT_OK(hx_t_open(b, "single:cpu", NULL, NULL, &cb));
    unsetenv("HX_CPU_REPACK");
    size_t want = 0;
    for (int64_t il = 0; il < b->hp.n_layer; il++)
        want += b->layers[il].wqkv.nbytes + b->layers[il].wgu.nbytes;
    ASSERT_EQ(hx_weight_host_bytes(), want);
    ASSERT_TRUE(b->layers[0].wqkv.data != NULL);
    ASSERT_OK(hx_t_run(ca, la, nv));
    ASSERT_OK(hx_t_run(cb, lb, nv));
    hx_t_accounted(cb, "single:cpu, HX_CPU_REPACK=0");
    ASSERT_TRUE(memcmp(la, lb, (size_t)nv * sizeof *la) == 0);
    hx_context_free(cb);
    ASSERT_EQ(hx_weight_host_bytes(), want); /* the model's, not the context's */
    hx_model_free(b);
    ASSERT_EQ(hx_weight_host_bytes(), 0);
    hx_context_free(ca);
    hx_model_free(a);
    free(la), free(lb);
}

/* The load-progress callback: every device that holds weights is reported, its bytes never go
 * back, and its last report is done == total == the weight bytes the plan accounts there. */
TEST(load_progress_reports_each_device)
{
    struct hx_model *m;
    if (hx_model_load(hx_test_data(HX_T_MODEL), NULL, &m) != HX_OK)
        SKIP("%s not found (%s)", HX_T_MODEL, hx_last_error());
    const char *pols[] = {"single:cpu", "tensor-split:ref=0.5,cpu=0.5", "fit:vulkan"};
    for (size_t i = 0; i < sizeof pols / sizeof *pols; i++) {
        if (!strncmp(pols[i], "fit:vulkan", 10) && !hx_t_have("vulkan")) continue;
        struct hx_t_prog p = {0};
        struct hx_context *c;
        ASSERT_OK(hx_t_open(m, pols[i], strstr(pols[i], "vulkan") ? "vulkan=1M" : NULL, &p, &c));
        struct hx_sched_mem mem[8];
        int n = hx__sched_mem(hx__context_sched(c), mem, 8), with = 0;
        for (int d = 0; d < n; d++) {
            if (!mem[d].need[0]) continue;
            with++;
            int k = 0;
            while (k < p.n && strcmp(p.dev[k], mem[d].id)) k++;
            fprintf(stderr, "  %-30s %-8s last report %llu / %llu, accounted %zu\n", pols[i],
                    mem[d].id, k < p.n ? (unsigned long long)p.done[k] : 0ull,
                    k < p.n ? (unsigned long long)p.total[k] : 0ull, mem[d].need[0]);
            if (k == p.n) HX_FAIL_AT("%s: no progress reported for %s", pols[i], mem[d].id);
            else if (p.done[k] != p.total[k] || p.total[k] != mem[d].need[0])
                HX_FAIL_AT("%s: %s ended at %llu / %llu, accounted %zu", pols[i], mem[d].id,
                           (unsigned long long)p.done[k], (unsigned long long)p.total[k],
                           mem[d].need[0]);
        }
        ASSERT_EQ(p.n, with);
        ASSERT_TRUE(!p.backwards && p.calls > p.n);
        hx_context_free(c);
    }
    hx_model_free(m);
}

static void hx_t_cleanup(void)
{
    if (hx_t_padded[0]) unlink(hx_t_padded);
    if (hx_t_dir[0]) rmdir(hx_t_dir);
}

int main(int argc, char **argv)
{
    atexit(hx_t_cleanup);
    return hx_test_main(argc, argv);
}
