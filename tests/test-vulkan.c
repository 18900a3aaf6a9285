/*
 * test-vulkan.c — the Vulkan backend on whatever Vulkan device is here (lavapipe in CI, a
 * GPU elsewhere), through the registry and the hx__dev_* wrappers like the core uses it:
 *
 *   devices      enumeration (kind, features), pick by index and by name, bad picks fail
 *   matmul_*     every weight type × kernel variant × shape against `ref`: the variants are
 *                the lane-layout GEMV (CPU-type devices), the subgroup GEMV + tiled GEMM
 *                (GPUs), each with f32 activations, int8 activations in 32-bit arithmetic,
 *                and int8 through the integer dot product instruction where the device has
 *                it (HX_VK_MATMUL / HX_VK_INT8 select them); shapes m = 1, 7, 64 with K and
 *                N off the tiles, and Qwen3-0.6B's at m = 1 including the 1024 → 151936 LM
 *                head (larger than one 128 MiB binding on lavapipe, so bound in row chunks)
 *   gemm_*       the prefill-GEMM choice on synthetic devices, each GEMM variant forced;
 *                matmul_qwen3_shapes, tern_i2_s_equals_tq2_0 (test-vulkan-matmul.h)
 *   gemv_*       the decode-GEMV plan on synthetic devices, and each GEMV variant forced
 *                (wide-load, split K, mmv; required subgroup size, shuffle or shared
 *                reduction, K tails; test-vulkan-gemv.h)
 *   ops_*        RMS norm (rows, per head), RoPE (both conventions, partial rotation, freq
 *                factors), attention (prefill, two sequences, decode over a long cache),
 *                SwiGLU, squared-ReLU GLU, add in place, embedding lookup for every type
 *   stories_*    stories260K greedy ids and logits equal llama2.c's reference on vulkan
 *   qwen3_*      the Qwen3 test models: greedy ids equal the `cpu` backend's up to the first
 *                near-tie (see qwen3 below), logits close
 *   errors_*     out-of-memory at weight upload names the bytes; a bad knob fails init with
 *                a message; no loader → unavailable with the reason (engine subprocess)
 *                (stories_*, qwen3_*, errors_*: test-vulkan-models.h)
 *
 * NMSE thresholds (err = Σ(got − want)² / Σ want²):
 *   1e-9  f32 activations: the weights decode exactly and only the summation order differs
 *         (measured ~1e-14); also norm, rope, eltwise, embed (bit-exact or ~1e-15)
 *   1e-8  int8 activations, against ref fed the same int8-rounded activations (rounded here
 *         as the kernels round them: per block amax / 127, to nearest even): the integer
 *         sums are exact, so only the f32 scaling and summation order differ (measured
 *         ~1e-14); this checks the int8 path exactly instead of within its rounding noise
 *         (test-backend-ops' 5e-4 against plain ref covers that).
 *   1e-7  attention (exp and the online softmax reorder the sums; measured ~1e-14)
 * Skipped, with the reason printed: no Vulkan device; a variant the device cannot run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "hx.h"
#include "registry.h"
#include "../backends/vulkan/vulkan-pick.h"

#define GUARD 64

static uint64_t hx_t_seed = 0x243F6A8885A308D3ull;
static float hx_t_rand(void)
{
    hx_t_seed = hx_t_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(hx_t_seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *hx_t_act(int64_t n)
{
    float *a = malloc((size_t)n * sizeof *a);
    for (int64_t i = 0; i < n; i++) a[i] = hx_t_rand();
    return a;
}

/* Why vulkan cannot be opened here, or NULL. */
static const char *hx_t_vk_missing(void)
{
    static char why[300];
    const struct hx_backend_entry *e = hx__backend_find("vulkan");
    if (!e) return "the Vulkan backend is not compiled in";
    if (e->probe_status != HX_OK) {
        snprintf(why, sizeof why, "vulkan unavailable: %s", e->why);
        return why;
    }
    return NULL;
}

/* Open the default vulkan device with kernel knobs (NULL = auto). */
static struct hx_device *hx_t_vk_open_gemm(const char *matmul, const char *int8,
                                           const char *gemm)
{
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    setenv("HX_VK_MATMUL", matmul ? matmul : "auto", 1);
    setenv("HX_VK_INT8", int8 ? int8 : "auto", 1);
    setenv("HX_VK_GEMM", gemm ? gemm : "auto", 1);
    struct hx_device *dev = NULL;
    if (hx__device_open("vulkan", &cfg, &dev) != HX_OK) dev = NULL;
    unsetenv("HX_VK_MATMUL");
    unsetenv("HX_VK_INT8");
    unsetenv("HX_VK_GEMM");
    return dev;
}

static struct hx_device *hx_t_vk_open(const char *matmul, const char *int8)
{
    return hx_t_vk_open_gemm(matmul, int8, NULL);
}

static struct hx_device *hx_t_ref(void)
{
    static struct hx_device *ref;
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    if (!ref && hx__device_open("ref", &cfg, &ref) != HX_OK) ref = NULL;
    return ref;
}

/* ---- one op on one device ------------------------------------------------------------------ */

struct hx_t_case {
    struct hx_op_desc desc;
    const float *src[3];
    int64_t src_cols[3];
    int n_src;
    int64_t dst_cols;
    bool in_place; /* dst is src[0]'s buffer */
    const struct hx_weight *w, *aux;
    const int32_t *tokens, *pos, *seq;
    int64_t kv_rows, kv_cols;
    const float *kv_init; /* kv_rows × kv_cols for both caches, or NULL (zeros) */
};

static int hx_t_upload(struct hx_device *dev, size_t nbytes, const void *src, struct hx_buffer **b)
{
    int st = hx__dev_buffer_alloc(dev, nbytes + GUARD, b);
    if (st == HX_OK && src) st = hx__dev_buffer_write(*b, 0, src, nbytes);
    if (st == HX_OK) {
        uint8_t pat[GUARD];
        memset(pat, 0x5A, sizeof pat);
        st = hx__dev_buffer_write(*b, nbytes, pat, GUARD);
    }
    return st;
}

/* Run c on dev; out gets n_rows × dst_cols. *guard_ok: the bytes after dst are untouched. */
static int hx_t_run(struct hx_device *dev, const struct hx_t_case *c, float *out, bool *guard_ok)
{
    struct hx_buffer *src[3] = {0}, *dst = NULL, *kk = NULL, *vv = NULL;
    struct hx_op op = {.desc = c->desc, .weight = c->w, .aux = c->aux};
    int64_t n = c->desc.n_rows;
    int st = HX_OK;
    for (int i = 0; i < c->n_src && st == HX_OK; i++) {
        size_t nb = (size_t)n * (size_t)c->src_cols[i] * 4;
        st = hx_t_upload(dev, nb, c->src[i], &src[i]);
        op.src[i] =
            (struct hx_tensor_ref){src[i], 0, n, c->src_cols[i], (size_t)c->src_cols[i] * 4};
    }
    size_t dnb = (size_t)n * (size_t)c->dst_cols * 4;
    if (c->in_place)
        dst = src[0];
    else if (st == HX_OK)
        st = hx_t_upload(dev, dnb, NULL, &dst);
    op.dst = (struct hx_tensor_ref){dst, 0, n, c->dst_cols, (size_t)c->dst_cols * 4};
    if (c->kv_rows && st == HX_OK) {
        size_t kb = (size_t)c->kv_rows * (size_t)c->kv_cols * 4;
        st = hx_t_upload(dev, kb, c->kv_init, &kk);
        if (st == HX_OK) st = hx_t_upload(dev, kb, c->kv_init, &vv);
        op.k_cache = (struct hx_tensor_ref){kk, 0, c->kv_rows, c->kv_cols, (size_t)c->kv_cols * 4};
        op.v_cache = (struct hx_tensor_ref){vv, 0, c->kv_rows, c->kv_cols, (size_t)c->kv_cols * 4};
    }
    if (c->w && st == HX_OK) st = hx__dev_weight_prepare(dev, c->w, &op.weight_handle);
    if (c->aux && st == HX_OK) st = hx__dev_weight_prepare(dev, c->aux, &op.aux_handle);
    struct hx_split sp = {.struct_size = sizeof sp,
                          .ops = &op,
                          .n_ops = 1,
                          .n_rows = n,
                          .tokens = c->tokens,
                          .pos = c->pos,
                          .seq = c->seq};
    if (st == HX_OK) st = hx__dev_run(dev, &sp);
    if (st == HX_OK) st = hx__dev_synchronize(dev);
    if (st == HX_OK) st = hx__dev_buffer_read(dst, 0, out, dnb);
    uint8_t back[GUARD], pat[GUARD];
    memset(pat, 0x5A, sizeof pat);
    if (st == HX_OK) st = hx__dev_buffer_read(dst, dnb, back, GUARD);
    *guard_ok = st == HX_OK && (c->in_place || !memcmp(back, pat, GUARD));
    if (op.weight_handle) hx__dev_weight_release(dev, op.weight_handle);
    if (op.aux_handle) hx__dev_weight_release(dev, op.aux_handle);
    for (int i = 0; i < 3; i++) hx__dev_buffer_free(src[i]);
    if (!c->in_place) hx__dev_buffer_free(dst);
    hx__dev_buffer_free(kk);
    hx__dev_buffer_free(vv);
    return st;
}

static double hx_t_nmse(const float *got, const float *want, size_t n, bool *finite)
{
    double num = 0, den = 0;
    *finite = true;
    for (size_t i = 0; i < n; i++) {
        *finite &= isfinite(got[i]) != 0;
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

/* Compare dev against want (ref's output). Returns false on failure (already reported). */
static bool hx_t_check(struct hx_device *dev, const char *variant, const struct hx_t_case *c,
                       const float *want, double thr, const char *label)
{
    size_t cnt = (size_t)c->desc.n_rows * (size_t)c->dst_cols;
    if (!hx__dev_supports(dev, &c->desc)) {
        fprintf(stderr, "  FAIL %-10s %-9s %s: supports() refused\n", variant,
                hx_op_kind_name(c->desc.kind), label);
        return false;
    }
    float *got = calloc(cnt, sizeof *got);
    bool guard, finite;
    int st = hx_t_run(dev, c, got, &guard);
    double e = st == HX_OK ? hx_t_nmse(got, want, cnt, &finite) : INFINITY;
    bool ok = st == HX_OK && guard && finite && e <= thr;
    fprintf(stderr, "  %s %-10s %-9s %-30s nmse %-9.3g (max %.0e)%s%s%s\n", ok ? "ok  " : "FAIL",
            variant, hx_op_kind_name(c->desc.kind), label, e, thr, st ? " run failed: " : "",
            st ? hx_last_error() : "", st == HX_OK && !guard ? " GUARD OVERWRITTEN" : "");
    free(got);
    return ok;
}

/* ---- weights -------------------------------------------------------------------------------- */

/* n × k weight of type t: 64 random rows (ternary values for the TQ types) tiled. */
static void *hx_t_weight(enum hx_dtype t, int64_t n, int64_t k, struct hx_weight *w)
{
    size_t rb = hx_dtype_row_bytes(t, k);
    int64_t pool = n < 64 ? n : 64;
    uint8_t *data = malloc(rb * (size_t)n);
    float *row = malloc((size_t)k * sizeof *row);
    for (int64_t j = 0; j < pool; j++) {
        for (int64_t i = 0; i < k; i++) {
            float v = hx_t_rand();
            if (t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_I2_S)
                v = (float)(v > 0.33f) - (float)(v < -0.33f);
            row[i] = t == HX_DTYPE_I2_S ? v : v * 0.05f; /* I2_S: codes, the scale below */
        }
        hx_quantize_row(t, row, data + (size_t)j * rb, k);
    }
    for (int64_t j = pool; j < n; j++)
        memcpy(data + (size_t)j * rb, data + (size_t)(j % pool) * rb, rb);
    free(row);
    *w = (struct hx_weight){.name = "w",
                            .type = t,
                            .n_rows = n,
                            .n_cols = k,
                            .data = data,
                            .nbytes = rb * (size_t)n,
                            .scale = 1.0f,
                            .tensor_scale = 0.05f};
    return data;
}

/* ---- devices ------------------------------------------------------------------------------- */

TEST(devices)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    const struct hx_backend_entry *e = hx__backend_find("vulkan");
    const int n = e->n_devices;
    const char *reason = e->why;
    ASSERT_TRUE(n > 0);
    int first_gpu = -1;
    for (int i = 0; i < n; i++) {
        struct hx_device_info info;
        ASSERT_OK(hx__backend_device_info(e, i, &info));
        fprintf(stderr, "  [%d] %s (%s): %s\n", i, info.name, hx_device_kind_name(info.kind),
                info.description);
        ASSERT_TRUE(info.name[0] != '\0');
        ASSERT_TRUE(strstr(info.description, "int8") && strstr(info.description, "subgroup"));
        /* every weight type has its shaders */
        ASSERT_EQ(info.weight_types, (1u << HX_DTYPE_COUNT) - 1u);
        if (first_gpu < 0 && info.kind != HX_DEVICE_CPU) first_gpu = i;
    }
    if (reason[0]) fprintf(stderr, "  devices not used: %s\n", reason);
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    struct hx_device *d;
    /* default: the first non-CPU device, lavapipe only when it is the only one */
    ASSERT_OK(hx__device_open("vulkan", &cfg, &d));
    ASSERT_EQ(d->index, first_gpu >= 0 ? first_gpu : 0);
    char desc[512] = "";
    d->ops->describe(d, desc, sizeof desc);
    fprintf(stderr, "  default: %s — %s\n", d->info.name, desc);
    /* Q2_0 and I2_S: taken on whole blocks (64, 128), refused otherwise (1056 = 33·32) */
    for (int t = HX_DTYPE_Q2_0; t < HX_DTYPE_COUNT; t++) {
        struct hx_op_desc od = {.kind = HX_OP_MATMUL, .n_rows = 1, .n_in = 1024, .n_out = 64,
                                .wtype = (enum hx_dtype)t};
        ASSERT_TRUE(hx__dev_supports(d, &od));
        od.n_in = 1056;
        ASSERT_TRUE(!hx__dev_supports(d, &od));
        od = (struct hx_op_desc){.kind = HX_OP_EMBED, .n_rows = 1, .n_in = 64, .n_out = 1024,
                                 .wtype = (enum hx_dtype)t};
        ASSERT_TRUE(hx__dev_supports(d, &od));
    }
    hx__device_close(d);
    /* by index and by (case-insensitive) name substring */
    ASSERT_OK(hx__device_open("vulkan:0", &cfg, &d));
    char name[24];
    snprintf(name, sizeof name, "%.8s", d->info.name);
    for (char *p = name; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    hx__device_close(d);
    char spec[64];
    snprintf(spec, sizeof spec, "vulkan:%s", name);
    ASSERT_OK(hx__device_open(spec, &cfg, &d));
    ASSERT_EQ(d->index, 0);
    hx__device_close(d);
    snprintf(spec, sizeof spec, "vulkan:%d", n);
    ASSERT_EQ(hx__device_open(spec, &cfg, &d), HX_E_NOTFOUND);
    ASSERT_EQ(hx__device_open("vulkan:no-such-gpu", &cfg, &d), HX_E_NOTFOUND);
    ASSERT_TRUE(d == NULL);
}

/* ---- matmul --------------------------------------------------------------------------------- */

struct hx_t_variant {
    const char *name, *matmul, *int8;
    const char *gemm; /* HX_VK_GEMM (NULL: auto) */
    double tol;       /* NMSE bound; 0: 1e-9 (f32 activations) or 1e-8 (int8) */
};
/* The GPU layouts' m > 4 take the tiled GEMM here (the f32 bound is for f32 tiles); the
 * cooperative-matrix GEMM has its own test, gemm_variants. */
static const struct hx_t_variant hx_t_variants[] = {
    {"lane/f32", "lane", "off", NULL, 0},    {"lane/emul", "lane", "emul", NULL, 0},
    {"lane/dot", "lane", "dot", NULL, 0},    {"gpu/f32", "gpu", "off", "tiled", 0},
    {"gpu/emul", "gpu", "emul", "tiled", 0}, {"gpu/dot", "gpu", "dot", "tiled", 0},
};
#define HX_T_NV (sizeof hx_t_variants / sizeof hx_t_variants[0])

/* Does this variant feed the weight int8 activations? (The tiled GEMM, gpu layout with
 * m > 4, always takes f32; a CPU-type device's "auto" is the lane layout, a GPU's the gpu.) */
static bool hx_t_int8_used(struct hx_device *dev, enum hx_dtype t, const struct hx_t_variant *v,
                           int64_t m)
{
    bool lane = !strcmp(v->matmul, "lane") ||
                (!strcmp(v->matmul, "auto") && dev->info.kind == HX_DEVICE_CPU);
    return hx_dtype_is_quantized(t) && strcmp(v->int8, "off") && (lane || m <= 4);
}

/* x rounded as the int8 kernels (and the cpu backend) round it: blocks of 32 elements (128
 * for Q1_0, 256 for the ternary types, 64 for Q2_0, 256 or else 128 for I2_S) scaled by
 * amax / 127, to nearest even. */
static float *hx_t_int8_round(enum hx_dtype t, const float *x, int64_t m, int64_t k)
{
    int64_t g = t == HX_DTYPE_Q1_0 ? 128 : (t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0) ? 256 : 32;
    if (t == HX_DTYPE_Q2_0) g = 64;
    if (t == HX_DTYPE_I2_S) g = k % 256 ? 128 : 256;
    float *y = malloc((size_t)(m * k) * sizeof *y);
    for (int64_t b = 0; b < m * k; b += g) {
        float amax = 0;
        for (int64_t i = 0; i < g; i++) amax = fmaxf(amax, fabsf(x[b + i]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int64_t i = 0; i < g; i++)
            y[b + i] = fminf(fmaxf(nearbyintf(x[b + i] * id), -127), 127) * d;
    }
    return y;
}

/* A MATMUL case of m activation rows x through weight w (cols in, rows out). */
static struct hx_t_case hx_t_matmul_case(const struct hx_weight *w, const float *x, int64_t m)
{
    return (struct hx_t_case){.desc = {.kind = HX_OP_MATMUL,
                                       .cls = HX_CLASS_QKV,
                                       .n_rows = m,
                                       .n_in = w->n_cols,
                                       .n_out = w->n_rows,
                                       .wtype = w->type},
                              .src = {x},
                              .src_cols = {w->n_cols},
                              .n_src = 1,
                              .dst_cols = w->n_rows,
                              .w = w};
}

/* The same random ternary weights (n rows of k) as TQ2_0 with every block's d = s and as I2_S
 * with tensor scale s: wt and wi (their data allocated here; the caller frees it). */
static int hx_t_tern_twins(int64_t n, int64_t k, float s, struct hx_weight *wt,
                           struct hx_weight *wi)
{
    size_t rt = hx_dtype_row_bytes(HX_DTYPE_TQ2_0, k), ri = hx_dtype_row_bytes(HX_DTYPE_I2_S, k);
    uint8_t *dt = malloc(rt * (size_t)n), *di = malloc(ri * (size_t)n);
    float *row = malloc((size_t)k * sizeof *row), *trow = malloc((size_t)k * sizeof *trow);
    int st = HX_OK;
    for (int64_t j = 0; j < n && st == HX_OK; j++) {
        for (int64_t i = 0; i < k; i++) {
            float v = hx_t_rand();
            row[i] = (float)(v > 0.33f) - (float)(v < -0.33f);
            trow[i] = row[i] * s;
        }
        for (int64_t b = 0; b < k; b += 256) trow[b] = s, row[b] = 1; /* each block's d is s */
        st = hx_quantize_row(HX_DTYPE_TQ2_0, trow, dt + (size_t)j * rt, k);
        if (st == HX_OK) st = hx_quantize_row(HX_DTYPE_I2_S, row, di + (size_t)j * ri, k);
    }
    free(row), free(trow);
    *wt = (struct hx_weight){.name = "wt",
                             .type = HX_DTYPE_TQ2_0,
                             .n_rows = n,
                             .n_cols = k,
                             .data = dt,
                             .nbytes = rt * (size_t)n,
                             .scale = 1.0f};
    *wi = (struct hx_weight){.name = "wi",
                             .type = HX_DTYPE_I2_S,
                             .n_rows = n,
                             .n_cols = k,
                             .data = di,
                             .nbytes = ri * (size_t)n,
                             .scale = 1.0f,
                             .tensor_scale = s};
    return st;
}

/* One (type, m, K, N): ref once, then every variant in devs (NULL entries skipped). */
static bool hx_t_matmul(struct hx_device **devs, const struct hx_t_variant *vars, size_t nv,
                        enum hx_dtype t, int64_t m, int64_t k, int64_t n)
{
    if (!hx_dtype_row_bytes(t, k)) return true;
    struct hx_weight w;
    void *data = hx_t_weight(t, n, k, &w);
    float *x = hx_t_act(m * k), *want = calloc((size_t)(m * n), sizeof *want);
    struct hx_t_case c = hx_t_matmul_case(&w, x, m);
    /* ref on the f32 activations, and on the int8-rounded ones for the int8 variants */
    float *xq = hx_dtype_is_quantized(t) ? hx_t_int8_round(t, x, m, k) : NULL;
    float *want_q = xq ? calloc((size_t)(m * n), sizeof *want_q) : NULL;
    struct hx_t_case cq = c;
    cq.src[0] = xq;
    bool guard, ok = hx_t_run(hx_t_ref(), &c, want, &guard) == HX_OK &&
                     (!xq || hx_t_run(hx_t_ref(), &cq, want_q, &guard) == HX_OK);
    if (!ok) fprintf(stderr, "  FAIL ref matmul: %s\n", hx_last_error());
    char label[64];
    snprintf(label, sizeof label, "%s m=%lld %lld->%lld", hx_dtype_name(t), (long long)m,
             (long long)k, (long long)n);
    for (size_t v = 0; ok && v < nv; v++) {
        if (!devs[v]) continue;
        bool q8 = hx_t_int8_used(devs[v], t, &vars[v], m);
        double thr = vars[v].tol > 0 ? vars[v].tol : q8 ? 1e-8 : 1e-9;
        ok &= hx_t_check(devs[v], vars[v].name, &c, q8 ? want_q : want, thr, label);
    }
    free(x), free(xq), free(want), free(want_q), free(data);
    return ok;
}

static void hx_t_open_variants(struct hx_device **devs)
{
    for (size_t v = 0; v < HX_T_NV; v++) {
        devs[v] = hx_t_vk_open_gemm(hx_t_variants[v].matmul, hx_t_variants[v].int8,
                                    hx_t_variants[v].gemm);
        if (!devs[v])
            fprintf(stderr, "  variant %s unavailable: %s\n", hx_t_variants[v].name,
                    hx_last_error());
    }
}

static void hx_t_close_variants(struct hx_device **devs)
{
    for (size_t v = 0; v < HX_T_NV; v++) hx__device_close(devs[v]);
}

/* Every type × variant × small shapes (odd N, K off the tiles where the type allows). */
TEST(matmul_variants)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    static const int64_t shapes[][3] = {{1, 256, 33}, {7, 512, 65}, {64, 768, 96},
                                        {2, 1024, 1}, {5, 172, 19}, {64, 64, 130},
                                        {3, 384, 40}}; /* I2_S: K not whole 256s */
    struct hx_device *devs[HX_T_NV];
    hx_t_open_variants(devs);
    ASSERT_TRUE(devs[0] != NULL);
    bool ok = true;
    for (int t = 0; t < HX_DTYPE_COUNT; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (devs[0]->info.weight_types & (1u << t))
            ok &= hx_t_matmul(devs, hx_t_variants, HX_T_NV, (enum hx_dtype)t, shapes[s][0],
                              shapes[s][1], shapes[s][2]);
    hx_t_close_variants(devs);
    ASSERT_TRUE(ok);
}

#include "test-vulkan-matmul.h" /* gemm_pick, gemm_variants, matmul_qwen3_shapes, tern_i2_s_* */
#include "test-vulkan-gemv.h" /* gemv_pick, gemv_variants, gemv_sg_red, attn_pick */

/* ---- the other ops -------------------------------------------------------------------------- */

/* ref's output for c, then every device in devs against it. */
static bool hx_t_op(struct hx_device **devs, const char *const *names, int nd,
                    const struct hx_t_case *c, double thr, const char *label)
{
    size_t cnt = (size_t)c->desc.n_rows * (size_t)c->dst_cols;
    float *want = calloc(cnt, sizeof *want);
    bool guard, ok = hx_t_run(hx_t_ref(), c, want, &guard) == HX_OK;
    if (!ok) fprintf(stderr, "  FAIL ref %s: %s\n", label, hx_last_error());
    for (int i = 0; ok && i < nd; i++) ok &= hx_t_check(devs[i], names[i], c, want, thr, label);
    free(want);
    return ok;
}

TEST(ops_norm_rope_eltwise_embed)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *devs[2] = {hx_t_vk_open(NULL, NULL), hx_t_vk_open("gpu", NULL)};
    const char *names[2] = {"auto", "gpu"};
    ASSERT_TRUE(devs[0] && devs[1]);
    const int64_t n = 7, hd = 128, nh = 16;
    int32_t pos[7] = {0, 1, 2, 3, 17, 300, 4095}, tok[7] = {3, 1, 4, 1, 5, 9, 2};
    float *a = hx_t_act(n * 3072), *b = hx_t_act(n * 3072), gain[2048], ff[64];
    for (int i = 0; i < 2048; i++) gain[i] = 1.0f + 0.001f * (float)i;
    for (int i = 0; i < 64; i++) ff[i] = 1.0f + 0.1f * (float)i;
    bool ok = true;
    /* RMS norm over whole rows (1024, and 172: not a multiple of the workgroup) and per head */
    static const int64_t widths[][2] = {{1024, 1024}, {172, 172}, {2048, 128}, {512, 64}};
    for (size_t i = 0; i < 4; i++) {
        struct hx_weight g = {.name = "gain",
                              .type = HX_DTYPE_F32,
                              .n_rows = 1,
                              .n_cols = widths[i][1],
                              .data = gain,
                              .nbytes = (size_t)widths[i][1] * 4,
                              .scale = 1};
        struct hx_t_case c = {.desc = {.kind = HX_OP_RMS_NORM,
                                       .n_rows = n,
                                       .n_in = widths[i][0],
                                       .n_out = widths[i][0],
                                       .p.norm = {1e-6f, widths[i][1]}},
                              .src = {a},
                              .src_cols = {widths[i][0]},
                              .n_src = 1,
                              .dst_cols = widths[i][0],
                              .w = &g};
        char label[48];
        snprintf(label, sizeof label, "%lld cols, group %lld", (long long)widths[i][0],
                 (long long)widths[i][1]);
        ok &= hx_t_op(devs, names, 2, &c, 1e-9, label);
    }
    /* RoPE: both conventions, full and partial rotation, with freq factors, in place */
    struct hx_weight fw = {.name = "rope_freqs",
                           .type = HX_DTYPE_F32,
                           .n_rows = 1,
                           .n_cols = 32,
                           .data = ff,
                           .nbytes = sizeof ff / 2,
                           .scale = 1};
    for (int mode = 0; mode < 2; mode++)
        for (int v = 0; v < 3; v++) {
            int32_t n_rot = v == 1 ? 64 : (int32_t)hd;
            struct hx_t_case c = {
                .desc = {.kind = HX_OP_ROPE,
                         .n_rows = n,
                         .n_in = nh * hd,
                         .n_out = nh * hd,
                         .p.rope = {(int32_t)nh, (int32_t)hd, n_rot, 1e6f, v == 2 ? 0.5f : 1.0f,
                                    (enum hx_rope_mode)mode}},
                .src = {a},
                .src_cols = {nh * hd},
                .n_src = 1,
                .dst_cols = nh * hd,
                .pos = pos,
                .in_place = v == 0,
                .aux = v == 2 ? &fw : NULL};
            if (v == 2) c.desc.p.rope.n_rot = 64;
            char label[48];
            snprintf(label, sizeof label, "%s n_rot %d%s", mode ? "neox" : "norm",
                     c.desc.p.rope.n_rot,
                     v == 0   ? " in place"
                     : v == 2 ? " freq factors, scale .5"
                              : "");
            ok &= hx_t_op(devs, names, 2, &c, 1e-9, label);
        }
    /* SwiGLU, squared-ReLU GLU, add (in place, the residual) */
    static const enum hx_op_kind ew[] = {HX_OP_SWIGLU, HX_OP_RELU2_GLU, HX_OP_ADD, HX_OP_ADD};
    for (size_t i = 0; i < 4; i++) {
        struct hx_t_case c = {.desc = {.kind = ew[i], .n_rows = n, .n_in = 3072, .n_out = 3072},
                              .src = {a, b},
                              .src_cols = {3072, 3072},
                              .n_src = 2,
                              .dst_cols = 3072,
                              .in_place = i == 3};
        ok &= hx_t_op(devs, names, 2, &c, 1e-9, i == 3 ? "3072 cols in place" : "3072 cols");
    }
    /* embedding lookup for every type; a Q8_0 table wider than one binding (Qwen3's) */
    for (int t = 0; t <= HX_DTYPE_COUNT; t++) {
        bool big = t == HX_DTYPE_COUNT;
        enum hx_dtype ty = big ? HX_DTYPE_Q8_0 : (enum hx_dtype)t;
        if (!(devs[0]->info.weight_types & (1u << ty))) continue; /* no shaders (Q2_0, I2_S) */
        int64_t rows = big ? 151936 : 16, k = big ? 1024 : 512;
        int32_t btok[7] = {0, 151935, 70000, 123456, 5, 151935, 100000};
        struct hx_weight w;
        void *data = hx_t_weight(ty, rows, k, &w);
        struct hx_t_case c = {
            .desc = {.kind = HX_OP_EMBED, .n_rows = n, .n_in = rows, .n_out = k, .wtype = ty},
            .dst_cols = k,
            .w = &w,
            .tokens = big ? btok : tok};
        char label[48];
        snprintf(label, sizeof label, "%s%s", hx_dtype_name(ty),
                 big ? " 151936 x 1024 (chunked)" : "");
        ok &= hx_t_op(devs, names, big ? 1 : 2, &c, 1e-9, label);
        free(data);
    }
    free(a), free(b);
    hx__device_close(devs[0]);
    hx__device_close(devs[1]);
    ASSERT_TRUE(ok);
}

TEST(ops_attention)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    struct hx_device *dev = hx_t_vk_open(NULL, NULL);
    const char *names[1] = {"vulkan"};
    ASSERT_TRUE(dev != NULL);
    bool ok = true;
    struct {
        const char *label;
        int32_t nh, nkv, hd;
        int64_t n, ctx;
        int32_t n_seq;
        int32_t pos[8], seq[8];
    } cases[] = {
        {"prefill 7, gqa 16/8 hd 128", 16, 8, 128, 7, 64, 1, {0, 1, 2, 3, 4, 5, 6}, {0}},
        {"2 sequences interleaved", 4, 2, 64, 5, 32, 2, {0, 1, 0, 2, 1}, {0, 0, 1, 0, 1}},
        {"decode at 299 over the cache", 16, 8, 128, 1, 300, 1, {299}, {0}},
        {"decode, 2 seqs, hd 64 mha", 8, 8, 64, 2, 200, 2, {150, 70}, {1, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t qd = (int64_t)cases[i].nh * cases[i].hd, kvd = (int64_t)cases[i].nkv * cases[i].hd;
        int64_t n = cases[i].n, kv_rows = cases[i].ctx * cases[i].n_seq;
        float *q = hx_t_act(n * qd), *k = hx_t_act(n * kvd), *v = hx_t_act(n * kvd),
              *cache = hx_t_act(kv_rows * kvd);
        struct hx_t_case c = {
            .desc = {.kind = HX_OP_ATTN,
                     .n_rows = n,
                     .n_in = qd,
                     .n_out = qd,
                     .p.attn = {cases[i].nh, cases[i].nkv, cases[i].hd,
                                1.0f / sqrtf((float)cases[i].hd), cases[i].ctx, cases[i].n_seq}},
            .src = {q, k, v},
            .src_cols = {qd, kvd, kvd},
            .n_src = 3,
            .dst_cols = qd,
            .pos = cases[i].pos,
            .seq = cases[i].seq,
            .kv_rows = kv_rows,
            .kv_cols = kvd,
            .kv_init = cache};
        ok &= hx_t_op(&dev, names, 1, &c, 1e-7, cases[i].label);
        free(q), free(k), free(v), free(cache);
    }
    hx__device_close(dev);
    ASSERT_TRUE(ok);
}

/* A decode split (RMS norm, then attention over the cache) run step by step at positions
 * 40 .. 51 with new inputs each step, on Vulkan and on ref: the first step is recorded, the
 * others re-submit that recording (vulkan-ops.c), and every step's output equals ref's; a
 * buffer created in between makes the next step record again. With HX_VK_REPLAY=0 every step
 * records. */
static void hx_t_replay(bool on)
{
    const char *why = hx_t_vk_missing();
    if (why) SKIP("%s", why);
    if (!on) setenv("HX_VK_REPLAY", "0", 1);
    struct hx_device *devs[2] = {hx_t_vk_open(NULL, NULL), hx_t_ref()};
    unsetenv("HX_VK_REPLAY");
    ASSERT_TRUE(devs[0] != NULL && devs[1] != NULL);
    const uint64_t *cnt = hx__dev_extension(devs[0], "hx.vk.replay");
    ASSERT_TRUE(cnt != NULL);
    enum { NH = 8, NKV = 4, HD = 64, CTX = 64, STEPS = 12 };
    const int64_t qd = NH * HD, kvd = NKV * HD;
    float *gain = hx_t_act(qd);
    struct hx_weight gw = {.name = "gain", .type = HX_DTYPE_F32, .n_rows = 1, .n_cols = qd,
                           .data = gain, .nbytes = (size_t)qd * 4, .scale = 1.0f,
                           .tensor_scale = 1.0f};
    struct hx_buffer *b[2][7] = {{0}}; /* x, normed q, k, v, out, k cache, v cache */
    void *gh[2] = {0};
    struct hx_op ops[2][2];
    float *kc0 = hx_t_act(CTX * kvd);
    bool ok = true;
    for (int d = 0; d < 2; d++) {
        struct hx_device *dev = devs[d];
        ASSERT_OK(hx_t_upload(dev, (size_t)qd * 4, NULL, &b[d][0]));
        ASSERT_OK(hx_t_upload(dev, (size_t)qd * 4, NULL, &b[d][1]));
        ASSERT_OK(hx_t_upload(dev, (size_t)kvd * 4, NULL, &b[d][2]));
        ASSERT_OK(hx_t_upload(dev, (size_t)kvd * 4, NULL, &b[d][3]));
        ASSERT_OK(hx_t_upload(dev, (size_t)qd * 4, NULL, &b[d][4]));
        ASSERT_OK(hx_t_upload(dev, (size_t)CTX * kvd * 4, kc0, &b[d][5]));
        ASSERT_OK(hx_t_upload(dev, (size_t)CTX * kvd * 4, kc0, &b[d][6]));
        ASSERT_OK(hx__dev_weight_prepare(dev, &gw, &gh[d]));
#define HX_T_REF(i, cols) ((struct hx_tensor_ref){b[d][i], 0, 1, cols, (size_t)(cols) * 4})
        ops[d][0] = (struct hx_op){
            .desc = {.kind = HX_OP_RMS_NORM, .n_rows = 1, .n_in = qd, .n_out = qd,
                     .p.norm = {.eps = 1e-6f, .group = qd}},
            .src = {HX_T_REF(0, qd)}, .dst = HX_T_REF(1, qd), .weight = &gw, .weight_handle = gh[d]};
        ops[d][1] = (struct hx_op){
            .desc = {.kind = HX_OP_ATTN, .n_rows = 1, .n_in = qd, .n_out = qd,
                     .p.attn = {NH, NKV, HD, 0.125f, CTX, 1}},
            .src = {HX_T_REF(1, qd), HX_T_REF(2, kvd), HX_T_REF(3, kvd)}, .dst = HX_T_REF(4, qd),
            .k_cache = {b[d][5], 0, CTX, kvd, (size_t)kvd * 4},
            .v_cache = {b[d][6], 0, CTX, kvd, (size_t)kvd * 4}};
#undef HX_T_REF
    }
    uint64_t rec0 = cnt[0], rep0 = cnt[1];
    for (int step = 0; step < STEPS; step++) {
        float *x = hx_t_act(qd), *k = hx_t_act(kvd), *v = hx_t_act(kvd), out[2][NH * HD];
        int32_t pos = 40 + step, seq = 0;
        for (int d = 0; d < 2; d++) {
            ASSERT_OK(hx__dev_buffer_write(b[d][0], 0, x, (size_t)qd * 4));
            ASSERT_OK(hx__dev_buffer_write(b[d][2], 0, k, (size_t)kvd * 4));
            ASSERT_OK(hx__dev_buffer_write(b[d][3], 0, v, (size_t)kvd * 4));
            struct hx_split sp = {.struct_size = sizeof sp, .ops = ops[d], .n_ops = 2,
                                  .n_rows = 1, .pos = &pos, .seq = &seq};
            ASSERT_OK(hx__dev_run(devs[d], &sp));
            ASSERT_OK(hx__dev_synchronize(devs[d]));
            ASSERT_OK(hx__dev_buffer_read(b[d][4], 0, out[d], (size_t)qd * 4));
        }
        bool fin;
        double e = hx_t_nmse(out[0], out[1], (size_t)qd, &fin);
        if (!(fin && e <= 1e-7)) {
            fprintf(stderr, "  step %d (pos %d): nmse %.3g against ref\n", step, pos, e);
            ok = false;
        }
        if (step == 7) { /* a new buffer: the kept recording may name a reused handle */
            struct hx_buffer *t;
            ASSERT_OK(hx__dev_buffer_alloc(devs[0], 4096, &t));
            hx__dev_buffer_free(t);
        }
        free(x), free(k), free(v);
    }
    const uint64_t rec = cnt[0] - rec0, rep = cnt[1] - rep0;
    fprintf(stderr, "  replay %s: %d steps, %llu recorded, %llu re-submitted\n", on ? "on" : "off",
            STEPS, (unsigned long long)rec, (unsigned long long)rep);
    ASSERT_TRUE(ok);
    if (on) {
        ASSERT_EQ(rec, 2);          /* step 0, and step 8 after the new buffer */
        ASSERT_EQ(rep, STEPS - 2);
    } else {
        ASSERT_EQ(rec, STEPS);
        ASSERT_EQ(rep, 0);
    }
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 7; i++) hx__dev_buffer_free(b[d][i]);
        hx__dev_weight_release(devs[d], gh[d]);
    }
    hx__device_close(devs[0]); /* ref is the tests' shared instance */
    free(gain), free(kc0);
}

TEST(decode_replay)
{
    hx_t_replay(true);
}
TEST(decode_replay_off)
{
    hx_t_replay(false);
}

#include "test-vulkan-models.h" /* stories_*, qwen3_*, errors_* */

TEST_MAIN()
