/*
 * test-backend-ops.c — every op of docs/ops.md on every registered backend device, compared
 * with `ref` (the oracle), through the registry and the hx__dev_* wrappers only.
 *
 * Matrix: EMBED, RMS_NORM (whole rows and per-head QK norm), MATMUL, ROPE (both conventions,
 * partial rotary, rope_freqs), causal GQA ATTN over a KV cache (prefill, decode, chunked,
 * several sequences, fused QKV), SWIGLU, RELU2_GLU, ADD (in place) × every weight type ×
 * m = 1, 7, 64, 512, K and N off the kernels' tiles, Qwen3-0.6B's GEMM shapes, contiguous,
 * strided (column slices of a fused output) and in-place layouts. `--full` adds the whole
 * cross product (Qwen3 shapes at m = 64 and 512, long contexts); it is slow on `ref`.
 *
 * Checks per (case, device): the status; NMSE against ref under a per-op threshold derived in
 * docs/testing.md (matmul: from the error of the coarsest activation rounding a backend may use
 * for the weight type, computed from the case's own activations); the worst element of each
 * row against 8·sqrt(threshold) of that row's RMS (a single wrong column among 151936 moves the
 * NMSE by 1e-5 only); NaN/Inf; every byte of every buffer outside the output (guards before and
 * after it, the gaps of strided rows, all inputs, stale KV rows) unchanged; the KV cache
 * bit-identical to ref's. Everything not written is poisoned with a NaN pattern, so reading a
 * word outside a tensor shows up as a NaN in the result. Cases supports() refuses are SKIPs.
 *
 * The `cpu` backend is also run with each other ISA path it has (HX_CPU_ISA) and, on AVX-512,
 * without its repacked weights (HX_CPU_REPACK=0) and with the other decode stream count
 * (HX_CPU_STREAMS, 1 or 2): those are separate rows of the summary.
 *
 * Usage: test-backend-ops [--full] [--backend NAME[,..]] [--op NAME[,..]] [--type T[,..]]
 *                         [--m N[,..]] [--threads N] [--list] [-q] [-v]
 * The last line is "N passed, N failed, N skipped"; the exit status is 1 if anything failed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "numerics.h"
#include "registry.h"

#define HX_T_GUARD 256u         /* poisoned bytes before and after every tensor */
#define HX_T_POISON 0xFFC0DEADu /* a quiet NaN: reading it poisons the result */
#define HX_T_MAX_BUFS 8
#define HX_T_MAX_DUTS 16
#define HX_T_VARIANT_MACS 134217728.0 /* 2^27: larger matmuls skip variants without --full */

/* ---- options and filters ------------------------------------------------------------------ */

static struct {
    bool full, list, quiet, verbose;
    const char *backend, *op, *type, *m;
    int threads;
} hx_t_opt = {.threads = 2};

/* Is `name` in the comma-separated list (case-insensitive)? NULL list = everything. */
static bool hx_t_in_list(const char *list, const char *name)
{
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* ---- random data ---------------------------------------------------------------------------- */

static uint64_t hx_t_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float hx_t_unif(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(hx_t_next(s) >> 40) / 8388608.0 - 1.0);
}

static float hx_t_logu(uint64_t *s, float lo, float hi) /* log-uniform in [lo, hi] */
{
    double u = (double)(hx_t_next(s) >> 11) / 9007199254740992.0;
    return (float)exp(log(lo) + u * (log(hi) - log(lo)));
}

static void *hx_t_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test-backend-ops: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* Uniform values scaled per row, so a kernel that mixes up rows or scales fails loudly. */
static float *hx_t_act(int64_t rows, int64_t cols, float amp, uint64_t seed)
{
    float *a = hx_t_xmalloc((size_t)(rows * cols) * sizeof *a);
    for (int64_t r = 0; r < rows; r++) {
        float f = amp * hx_t_logu(&seed, 0.25f, 4.0f);
        for (int64_t i = 0; i < cols; i++) a[r * cols + i] = f * hx_t_unif(&seed);
    }
    return a;
}

/* Matmul activations: magnitude varies per row, per 256 and per 32 elements, so using the
 * scale of the wrong row or block is an O(1) error, not a rounding-sized one. */
static float *hx_t_act_mm(int64_t rows, int64_t k, uint64_t seed)
{
    float *a = hx_t_xmalloc((size_t)(rows * k) * sizeof *a);
    for (int64_t r = 0; r < rows; r++) {
        float fr = hx_t_logu(&seed, 0.25f, 4.0f), f256 = 1, f32 = 1;
        for (int64_t i = 0; i < k; i++) {
            if (i % 256 == 0) f256 = hx_t_logu(&seed, 0.125f, 8.0f);
            if (i % 32 == 0) f32 = hx_t_logu(&seed, 0.7f, 1.4f);
            a[r * k + i] = fr * f256 * f32 * hx_t_unif(&seed);
        }
    }
    return a;
}

/* ---- weights -------------------------------------------------------------------------------- */

static void hx_t_put_f16(uint8_t *p, float v)
{
    uint16_t h = hx_fp32_to_fp16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* A block scale: either sign, magnitudes over a factor of 16, always a normal fp16. */
static float hx_t_scale(uint64_t *s)
{
    float d = hx_t_logu(s, 0.25f, 4.0f) / 64.0f;
    return (hx_t_next(s) & 1) ? -d : d;
}

/* A float weight value, kept away from fp16/bf16 subnormals so conversions are exact on
 * hardware that flushes them. */
static float hx_t_wval(uint64_t *s, float amp)
{
    float v = amp * hx_t_unif(s);
    return fabsf(v) < 1e-3f ? copysignf(1e-3f, v) : v;
}

/* Rows of random valid blocks. Quantized codes are random bytes (every code value occurs,
 * including ones the reference quantizers never emit, like Q8_0's -128), scales random per
 * block; ternary types go through the quantizer from ternary values, as real files do. */
static void hx_t_fill_row(enum hx_dtype t, uint8_t *row, int64_t k, uint64_t *s, float *tmp)
{
    const size_t rb = hx_dtype_row_bytes(t, k), bb = hx_dtype_block_bytes(t);
    const int64_t be = hx_dtype_block_elems(t);
    switch (t) {
    case HX_DTYPE_F32:
    case HX_DTYPE_F16:
    case HX_DTYPE_BF16: {
        float amp = 1;
        for (int64_t i = 0; i < k; i++) {
            if (i % 32 == 0) amp = hx_t_logu(s, 0.25f, 4.0f) / 8.0f;
            tmp[i] = hx_t_wval(s, amp);
        }
        hx_quantize_row(t, tmp, row, k);
        return;
    }
    case HX_DTYPE_TQ1_0:
    case HX_DTYPE_TQ2_0: {
        float amp = 1;
        for (int64_t i = 0; i < k; i++) {
            if (i % be == 0) amp = fabsf(hx_t_scale(s));
            uint64_t r = hx_t_next(s) % 3;
            tmp[i] = amp * (float)((int)r - 1);
        }
        tmp[0] = amp; /* every block's amax is its scale */
        hx_quantize_row(t, tmp, row, k);
        return;
    }
    default: break;
    }
    for (size_t i = 0; i < rb; i += 8) {
        uint64_t r = hx_t_next(s);
        memcpy(row + i, &r, rb - i < 8 ? rb - i : 8);
    }
    for (size_t b = 0; b < rb; b += bb) {
        uint8_t *blk = row + b;
        switch (t) {
        case HX_DTYPE_Q4_K: /* d, dmin at 0, 2 */
            hx_t_put_f16(blk, hx_t_scale(s) / 16.0f);
            hx_t_put_f16(blk + 2, hx_t_scale(s) / 16.0f);
            break;
        case HX_DTYPE_Q6_K: hx_t_put_f16(blk + 208, hx_t_scale(s) / 32.0f); break;
        default: hx_t_put_f16(blk, hx_t_scale(s)); break; /* Q8_0, Q4_0, Q1_0: d first */
        }
    }
}

static uint64_t hx_t_weight_ids;

/* A weight of a case group. Planned with its shape first; the data is generated on the first
 * case that runs, so filtered-out groups (a 151936-row LM head) cost nothing. */
struct hx_t_weight {
    struct hx_weight w;
    uint64_t id; /* identifies the weight for the per-device handle cache; 0 = not built */
    uint64_t seed;
    uint8_t *data;
    /* For the matmul error model (core/numerics.h), per weight row j and K-block b: e = Σ w²,
     * dw = Σ (w - ŵ)² of an HX_NUMERICS_INT8_ROW device's conversion (NULL without one). */
    int64_t nb;
    double *e, *dw;
};

static bool hx_t_have_npu; /* a device under test is HX_NUMERICS_INT8_ROW */

static void hx_t_weight_stats(struct hx_t_weight *tw)
{
    const int64_t k = tw->w.n_cols, n = tw->w.n_rows, nb = hx__mm_blocks(k);
    const size_t rb = hx_dtype_row_bytes(tw->w.type, k);
    float *row = hx_t_xmalloc((size_t)k * sizeof *row);
    tw->nb = nb;
    tw->e = hx_t_xmalloc((size_t)(n * nb) * sizeof *tw->e);
    if (hx_t_have_npu) tw->dw = hx_t_xmalloc((size_t)(n * nb) * sizeof *tw->dw);
    for (int64_t j = 0; j < n; j++) {
        hx_dequantize_row(tw->w.type, tw->data + (size_t)j * rb, row, k);
        hx__mm_weight_row(HX_NUMERICS_INT8_ROW, row, k, tw->e + j * nb,
                          tw->dw ? tw->dw + j * nb : NULL);
    }
    free(row);
}

static void hx_t_weight_plan(struct hx_t_weight *tw, enum hx_dtype t, int64_t n, int64_t k,
                             float scale, uint64_t seed)
{
    memset(tw, 0, sizeof *tw);
    tw->w = (struct hx_weight){.name = "w",
                               .type = t,
                               .n_rows = n,
                               .n_cols = k,
                               .nbytes = hx_dtype_row_bytes(t, k) * (size_t)n,
                               .scale = scale};
    tw->seed = seed;
}

static void hx_t_weight_build(struct hx_t_weight *tw)
{
    if (tw->id) return;
    const size_t rb = hx_dtype_row_bytes(tw->w.type, tw->w.n_cols);
    const int64_t k = tw->w.n_cols;
    tw->data = hx_t_xmalloc(rb * (size_t)tw->w.n_rows);
    float *tmp = hx_t_xmalloc((size_t)k * sizeof *tmp);
    uint64_t seed = tw->seed;
    for (int64_t j = 0; j < tw->w.n_rows; j++)
        hx_t_fill_row(tw->w.type, tw->data + (size_t)j * rb, k, &seed, tmp);
    free(tmp);
    tw->w.data = tw->data;
    tw->id = ++hx_t_weight_ids;
    hx_t_weight_stats(tw);
}

/* An F32 vector weight (norm gain, rope_freqs) of n values in [lo, hi]. */
static void hx_t_weight_vec(struct hx_t_weight *tw, const char *name, int64_t n, float lo, float hi,
                            uint64_t seed)
{
    float *v = hx_t_xmalloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = hx_t_logu(&seed, lo, hi);
    memset(tw, 0, sizeof *tw);
    tw->data = (uint8_t *)v;
    tw->w = (struct hx_weight){.name = name,
                               .type = HX_DTYPE_F32,
                               .n_rows = 1,
                               .n_cols = n,
                               .data = v,
                               .nbytes = (size_t)n * sizeof *v,
                               .scale = 1.0f};
    tw->id = ++hx_t_weight_ids;
}

static void hx_t_release_weight(uint64_t id);

/* Release every device's handle of the weight, then its data. */
static void hx_t_weight_free(struct hx_t_weight *tw)
{
    if (tw->id) hx_t_release_weight(tw->id);
    free(tw->data), free(tw->e), free(tw->dw);
    memset(tw, 0, sizeof *tw);
}

/* ---- devices under test --------------------------------------------------------------------- */

struct hx_t_dut {
    char label[96];
    struct hx_device *dev;
    const char *isa; /* HX_CPU_ISA for this variant, or NULL */
    bool norepack;   /* HX_CPU_REPACK=0 */
    const char *streams; /* HX_CPU_STREAMS for this variant, or NULL */
    bool variant;    /* an extra code path of a backend: big matmuls only with --full */
    uint64_t wid;    /* weight whose handle is cached */
    void *wh;
    int passed, failed, skipped;
    double seconds; /* wall time in this device's runs (weight prepare included) */
};

static struct hx_t_dut hx_t_ref;
static struct hx_t_dut hx_t_duts[HX_T_MAX_DUTS];
static int hx_t_n_duts;
static int hx_t_passed, hx_t_failed, hx_t_skipped;

/* The environment knobs of a `cpu` variant; every other device runs with them cleared. */
static void hx_t_dut_env(const struct hx_t_dut *d)
{
    if (d->isa)
        setenv("HX_CPU_ISA", d->isa, 1);
    else
        unsetenv("HX_CPU_ISA");
    if (d->norepack)
        setenv("HX_CPU_REPACK", "0", 1);
    else
        unsetenv("HX_CPU_REPACK");
    if (d->streams)
        setenv("HX_CPU_STREAMS", d->streams, 1);
    else
        unsetenv("HX_CPU_STREAMS");
}

static void hx_t_dut_release(struct hx_t_dut *d)
{
    if (d->wh) {
        hx_t_dut_env(d);
        hx__dev_weight_release(d->dev, d->wh);
    }
    d->wh = NULL, d->wid = 0;
}

/* Drop every device's cached handle of weight id (before the weight is freed). */
static void hx_t_release_weight(uint64_t id)
{
    if (hx_t_ref.wid == id) hx_t_dut_release(&hx_t_ref);
    for (int i = 0; i < hx_t_n_duts; i++)
        if (hx_t_duts[i].wid == id) hx_t_dut_release(&hx_t_duts[i]);
}

/* ---- cases ---------------------------------------------------------------------------------- */

/* A word image of one buffer as written to the device before the op. */
struct hx_t_buf {
    size_t nbytes;
    uint32_t *init;
};

/* (rows, cols) f32 at byte offset `off` of buffer `buf`, rows `stride` bytes apart. */
struct hx_t_tensor {
    int buf;
    size_t off;
    int64_t rows, cols;
    size_t stride;
};

struct hx_t_case {
    char label[160];
    const char *family; /* --op name: the kind, or "qk_norm" */
    struct hx_op_desc desc;
    struct hx_t_buf buf[HX_T_MAX_BUFS];
    int n_buf;
    struct hx_t_tensor src[3], dst, kc, vc;
    int n_src;
    bool has_cache;                /* ATTN: kc/vc buffers must match ref's exactly */
    const struct hx_t_weight *w;   /* cached per device by id */
    const struct hx_t_weight *aux; /* prepared per run */
    int32_t *tokens, *pos, *seq;
    double thr; /* NMSE threshold (not matmul) */
    /* MATMUL error model (core/numerics.h), per activation row r and K-block b: s = expected
     * squared rounding error of an element, xm = mean x²; s8: s on an HX_NUMERICS_INT8_ROW
     * device. */
    double *s, *xm, *s8;
};

static void hx_t_case_init(struct hx_t_case *c, enum hx_op_kind kind, int64_t m)
{
    memset(c, 0, sizeof *c);
    c->desc.kind = kind;
    c->desc.n_rows = m;
    c->desc.layer = 0;
    c->family = hx_op_kind_name(kind);
}

static void hx_t_case_free(struct hx_t_case *c)
{
    for (int i = 0; i < c->n_buf; i++) free(c->buf[i].init);
    free(c->tokens), free(c->pos), free(c->seq);
    free(c->s), free(c->xm), free(c->s8);
    memset(c, 0, sizeof *c);
}

static int hx_t_buf_new(struct hx_t_case *c, size_t nbytes)
{
    if (c->n_buf >= HX_T_MAX_BUFS) {
        fprintf(stderr, "test-backend-ops: too many buffers in %s\n", c->label);
        exit(2);
    }
    struct hx_t_buf *b = &c->buf[c->n_buf];
    b->nbytes = (nbytes + 3) & ~(size_t)3;
    b->init = hx_t_xmalloc(b->nbytes);
    for (size_t i = 0; i < b->nbytes / 4; i++) b->init[i] = HX_T_POISON;
    return c->n_buf++;
}

/* n column slices of one (rows, Σwidths + pad) buffer, like q|k|v in a fused QKV output. */
static void hx_t_slices(struct hx_t_case *c, int64_t rows, int n, const int64_t *widths,
                        int64_t pad, struct hx_t_tensor *out)
{
    int64_t total = pad;
    for (int i = 0; i < n; i++) total += widths[i];
    const size_t stride = (size_t)total * 4;
    int b = hx_t_buf_new(c, 2 * HX_T_GUARD + stride * (size_t)rows);
    size_t col = 0;
    for (int i = 0; i < n; i++) {
        out[i] = (struct hx_t_tensor){b, HX_T_GUARD + col * 4, rows, widths[i], stride};
        col += (size_t)widths[i];
    }
}

/* A contiguous (rows, cols) tensor alone in its buffer, with guards. */
static struct hx_t_tensor hx_t_alone(struct hx_t_case *c, int64_t rows, int64_t cols)
{
    struct hx_t_tensor t;
    hx_t_slices(c, rows, 1, &cols, 0, &t);
    return t;
}

/* One column slice at column `at` of a (rows, at + cols + after) buffer. */
static struct hx_t_tensor hx_t_slice(struct hx_t_case *c, int64_t rows, int64_t at, int64_t cols,
                                     int64_t after)
{
    int64_t w[2] = {at, cols};
    struct hx_t_tensor t[2];
    hx_t_slices(c, rows, 2, w, after, t);
    return t[1];
}

static float *hx_t_at(const struct hx_t_tensor *t, uint32_t *words, int64_t r)
{
    return (float *)((char *)words + t->off + (size_t)r * t->stride);
}

static void hx_t_put(struct hx_t_case *c, const struct hx_t_tensor *t, const float *vals)
{
    for (int64_t r = 0; r < t->rows; r++)
        memcpy(hx_t_at(t, c->buf[t->buf].init, r), vals + r * t->cols, (size_t)t->cols * 4);
}

static void hx_t_put_rand(struct hx_t_case *c, const struct hx_t_tensor *t, float amp,
                          uint64_t seed)
{
    float *v = hx_t_act(t->rows, t->cols, amp, seed);
    hx_t_put(c, t, v);
    free(v);
}

/* ---- running one case on one device --------------------------------------------------------- */

struct hx_t_out {
    int status;
    char err[600];
    uint32_t *buf[HX_T_MAX_BUFS]; /* every buffer read back after the op */
};

static void hx_t_out_free(struct hx_t_out *o)
{
    for (int i = 0; i < HX_T_MAX_BUFS; i++) free(o->buf[i]);
    memset(o, 0, sizeof *o);
}

static struct hx_tensor_ref hx_t_ref_of(struct hx_buffer **bufs, const struct hx_t_tensor *t)
{
    return (struct hx_tensor_ref){bufs[t->buf], t->off, t->rows, t->cols, t->stride};
}

static int hx_t_exec_op(struct hx_t_dut *d, const struct hx_t_case *c, struct hx_buffer **bufs,
                        void **aux_h)
{
    struct hx_op op = {.desc = c->desc};
    for (int i = 0; i < c->n_src; i++) op.src[i] = hx_t_ref_of(bufs, &c->src[i]);
    op.dst = hx_t_ref_of(bufs, &c->dst);
    if (c->has_cache) {
        op.k_cache = hx_t_ref_of(bufs, &c->kc);
        op.v_cache = hx_t_ref_of(bufs, &c->vc);
    }
    int st = HX_OK;
    if (c->w) {
        if (d->wid != c->w->id) {
            hx_t_dut_release(d);
            if ((st = hx__dev_weight_prepare(d->dev, &c->w->w, &d->wh)) != HX_OK) return st;
            d->wid = c->w->id;
        }
        op.weight = &c->w->w;
        op.weight_handle = d->wh;
    }
    if (c->aux) {
        if ((st = hx__dev_weight_prepare(d->dev, &c->aux->w, aux_h)) != HX_OK) return st;
        op.aux = &c->aux->w;
        op.aux_handle = *aux_h;
    }
    struct hx_split sp = {.struct_size = sizeof sp,
                          .ops = &op,
                          .n_ops = 1,
                          .n_rows = c->desc.n_rows,
                          .tokens = c->tokens,
                          .pos = c->pos,
                          .seq = c->seq};
    if ((st = hx__dev_run(d->dev, &sp)) != HX_OK) return st;
    return hx__dev_synchronize(d->dev);
}

static double hx_t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hx_t_exec(struct hx_t_dut *d, const struct hx_t_case *c, struct hx_t_out *o)
{
    const double t0 = hx_t_now();
    struct hx_buffer *bufs[HX_T_MAX_BUFS] = {0};
    void *aux_h = NULL;
    memset(o, 0, sizeof *o);
    hx_t_dut_env(d);
    d->dev->last_error[0] = '\0';
    int st = HX_OK;
    for (int i = 0; i < c->n_buf && st == HX_OK; i++) {
        st = hx__dev_buffer_alloc(d->dev, c->buf[i].nbytes, &bufs[i]);
        if (st == HX_OK) st = hx__dev_buffer_write(bufs[i], 0, c->buf[i].init, c->buf[i].nbytes);
    }
    if (st == HX_OK) st = hx_t_exec_op(d, c, bufs, &aux_h);
    for (int i = 0; i < c->n_buf && st == HX_OK; i++) {
        o->buf[i] = hx_t_xmalloc(c->buf[i].nbytes);
        st = hx__dev_buffer_read(bufs[i], 0, o->buf[i], c->buf[i].nbytes);
    }
    if (aux_h) hx__dev_weight_release(d->dev, aux_h);
    for (int i = 0; i < c->n_buf; i++) hx__dev_buffer_free(bufs[i]);
    o->status = st;
    d->seconds += hx_t_now() - t0;
    if (st != HX_OK)
        snprintf(o->err, sizeof o->err, "%s: %s", hx_status_name(st),
                 d->dev->last_error[0] ? d->dev->last_error : hx_last_error());
}

/* ---- comparison ------------------------------------------------------------------------------ */

struct hx_t_cmp {
    double nmse, thr, maxrel, maxrel_lim;
    int64_t worst_row, worst_col;
    bool ok;
    char why[700];
};

static void hx_t_why(struct hx_t_cmp *r, const char *fmt, ...) HX_PRINTF(2, 3);
static void hx_t_why(struct hx_t_cmp *r, const char *fmt, ...)
{
    r->ok = false;
    if (r->why[0]) return; /* keep the first reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
}

/* Is byte offset `at` of buffer b inside tensor t? */
static bool hx_t_inside(const struct hx_t_tensor *t, int b, size_t at)
{
    if (t->buf != b || at < t->off) return false;
    size_t rel = at - t->off, row = rel / t->stride, col = (rel % t->stride) / 4;
    return row < (size_t)t->rows && col < (size_t)t->cols;
}

/* Where a stray write landed, in words relative to the output. */
static void hx_t_where(const struct hx_t_case *c, int b, size_t at, char *out, size_t len)
{
    const struct hx_t_tensor *t = &c->dst;
    if (b != t->buf) {
        snprintf(out, len, "input buffer %d byte %zu", b, at);
    } else if (at < t->off) {
        snprintf(out, len, "guard %zu bytes before the output", t->off - at);
    } else {
        size_t rel = at - t->off, row = rel / t->stride;
        if (row >= (size_t)t->rows)
            snprintf(out, len, "guard %zu bytes after the output",
                     rel - (size_t)(t->rows - 1) * t->stride - (size_t)t->cols * 4);
        else
            snprintf(out, len, "row %zu, column %zu of a %lld-column output (stride gap)", row,
                     (rel % t->stride) / 4, (long long)t->cols);
    }
}

/* Bytes outside the output must be as written; cache buffers must equal ref's exactly. */
static void hx_t_check_untouched(const struct hx_t_case *c, const struct hx_t_out *got,
                                 const struct hx_t_out *want, struct hx_t_cmp *r)
{
    for (int b = 0; b < c->n_buf; b++) {
        const size_t nw = c->buf[b].nbytes / 4;
        const bool cache = c->has_cache && (b == c->kc.buf || b == c->vc.buf);
        for (size_t i = 0; i < nw; i++) {
            if (cache) {
                if (got->buf[b][i] == want->buf[b][i]) continue;
                const struct hx_t_tensor *t = b == c->kc.buf ? &c->kc : &c->vc;
                size_t at = i * 4 < t->off ? 0 : (i * 4 - t->off) / t->stride;
                hx_t_why(r, "%s cache row %zu differs from ref (word %zu)",
                         b == c->kc.buf ? "K" : "V", at, i);
                return;
            }
            if (hx_t_inside(&c->dst, b, i * 4) || got->buf[b][i] == c->buf[b].init[i]) continue;
            char where[160];
            hx_t_where(c, b, i * 4, where, sizeof where);
            hx_t_why(r, "wrote outside its output: %s (0x%08x)", where, got->buf[b][i]);
            return;
        }
    }
}

/* NMSE over the output, NaN/Inf, and each row's worst element against 8·sqrt(thr)·rms. */
static void hx_t_check_values(const struct hx_t_case *c, const struct hx_t_out *got,
                              const struct hx_t_out *want, struct hx_t_cmp *r)
{
    const struct hx_t_tensor *t = &c->dst;
    double num = 0, den = 0, worst = 0;
    int64_t bad_nan = -1, want_nan = -1;
    for (int64_t row = 0; row < t->rows; row++) {
        const float *g = hx_t_at(t, got->buf[t->buf], row), *w = hx_t_at(t, want->buf[t->buf], row);
        double rn = 0, rd = 0, rmax = 0;
        int64_t rcol = 0;
        for (int64_t j = 0; j < t->cols; j++) {
            if (!isfinite(g[j]) && bad_nan < 0) bad_nan = row * t->cols + j;
            if (!isfinite(w[j]) && want_nan < 0) want_nan = row * t->cols + j;
            double e = (double)g[j] - (double)w[j];
            rn += e * e, rd += (double)w[j] * w[j];
            if (fabs(e) > rmax || isnan(e)) rmax = fabs(e), rcol = j;
        }
        num += rn, den += rd;
        double rms = sqrt(rd / (double)t->cols);
        if (rms == 0) rms = 1e-30;
        double lim = hx__op_elem_limit(c->thr), rel = rmax / rms;
        double ratio = lim > 0 ? rel / lim : (rel > 0 ? INFINITY : 0);
        if (isnan(ratio)) ratio = INFINITY;
        if (row == 0 || ratio > worst) {
            worst = ratio, r->maxrel = rel, r->maxrel_lim = lim;
            r->worst_row = row, r->worst_col = rcol;
        }
    }
    r->nmse = den > 0 ? num / den : num;
    r->thr = c->thr;
    if (want_nan >= 0) hx_t_why(r, "ref produced NaN/Inf at element %lld", (long long)want_nan);
    if (bad_nan >= 0)
        hx_t_why(r, "NaN/Inf at row %lld col %lld", (long long)(bad_nan / t->cols),
                 (long long)(bad_nan % t->cols));
    if (!(r->nmse <= c->thr)) hx_t_why(r, "NMSE above threshold");
    if (!(worst <= 1.0))
        hx_t_why(r, "row %lld col %lld off by %.3g x rms (limit %.3g)", (long long)r->worst_row,
                 (long long)r->worst_col, r->maxrel, r->maxrel_lim);
}

/* MATMUL against the error model of the device's numerics (core/numerics.h): Σ e² within
 * hx__mm_allowed of Σ var and Σ typ; each |e| within hx__mm_elem_limit. */
static void hx_t_check_matmul(const struct hx_t_case *c, const struct hx_t_out *got,
                              const struct hx_t_out *want, bool int8_row, struct hx_t_cmp *r)
{
    const struct hx_t_tensor *t = &c->dst;
    const struct hx_t_weight *tw = c->w;
    const int64_t nb = tw->nb, n = t->cols, k = tw->w.n_cols;
    const double sc2 = (double)tw->w.scale * tw->w.scale;
    double se = 0, sy = 0, sv = 0, st = 0, worst = -1;
    int64_t bad_nan = -1, want_nan = -1;
    for (int64_t row = 0; row < t->rows; row++) {
        const float *g = hx_t_at(t, got->buf[t->buf], row), *w = hx_t_at(t, want->buf[t->buf], row);
        const double *s = (int8_row ? c->s8 : c->s) + row * nb, *xm = c->xm + row * nb;
        for (int64_t j = 0; j < n; j++) {
            const double *dw = int8_row && tw->dw ? tw->dw + j * nb : NULL;
            double var, typ;
            hx__mm_output(nb, s, xm, tw->e + j * nb, dw, sc2, &var, &typ);
            if (!isfinite(g[j]) && bad_nan < 0) bad_nan = row * n + j;
            if (!isfinite(w[j]) && want_nan < 0) want_nan = row * n + j;
            const double err = (double)g[j] - (double)w[j];
            se += err * err, sy += (double)w[j] * w[j], sv += var, st += typ;
            const double lim = hx__mm_elem_limit(var, typ, k), ratio = fabs(err) / lim;
            if (ratio > worst || isnan(err)) {
                worst = isnan(err) ? INFINITY : ratio;
                r->worst_row = row, r->worst_col = j;
                r->maxrel = fabs(err) / sqrt(typ), r->maxrel_lim = lim / sqrt(typ);
            }
        }
    }
    const double allowed = hx__mm_allowed(sv, st, hx__mm_dof_iid(t->rows, n, k), k);
    r->nmse = sy > 0 ? se / sy : se;
    r->thr = sy > 0 ? allowed / sy : allowed;
    if (want_nan >= 0) hx_t_why(r, "ref produced NaN/Inf at element %lld", (long long)want_nan);
    if (bad_nan >= 0)
        hx_t_why(r, "NaN/Inf at row %lld col %lld", (long long)(bad_nan / n),
                 (long long)(bad_nan % n));
    if (!(se <= allowed)) hx_t_why(r, "NMSE above threshold");
    if (!(worst <= 1.0))
        hx_t_why(r, "row %lld col %lld off by %.3g x its typical size (limit %.3g)",
                 (long long)r->worst_row, (long long)r->worst_col, r->maxrel, r->maxrel_lim);
}

static void hx_t_compare(const struct hx_t_case *c, const struct hx_t_out *got,
                         const struct hx_t_out *want, bool int8_row, struct hx_t_cmp *r)
{
    memset(r, 0, sizeof *r);
    r->ok = true;
    if (got->status != HX_OK) {
        hx_t_why(r, "%s", got->err);
        return;
    }
    hx_t_check_untouched(c, got, want, r);
    if (c->desc.kind == HX_OP_MATMUL)
        hx_t_check_matmul(c, got, want, int8_row, r);
    else
        hx_t_check_values(c, got, want, r);
}

/* ---- driver ---------------------------------------------------------------------------------- */

static void hx_t_line(const char *tag, const char *dev, const struct hx_t_case *c, const char *fmt,
                      ...) HX_PRINTF(4, 5);
static void hx_t_line(const char *tag, const char *dev, const struct hx_t_case *c, const char *fmt,
                      ...)
{
    char tail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    printf("%-4s %-22s %-9s %-44s %s\n", tag, dev, c->family, c->label, tail);
    fflush(stdout);
}

/* Filters that do not need the data: returns false (and prints in --list mode) to skip. */
static bool hx_t_want(const char *family, enum hx_op_kind kind, int wtype, int64_t m,
                      bool full_only, const char *label)
{
    if (full_only && !hx_t_opt.full && !hx_t_opt.list) return false;
    if (hx_t_opt.op && !hx_t_in_list(hx_t_opt.op, family) &&
        !hx_t_in_list(hx_t_opt.op, hx_op_kind_name(kind)))
        return false;
    if (hx_t_opt.type &&
        (wtype < 0 || !hx_t_in_list(hx_t_opt.type, hx_dtype_name((enum hx_dtype)wtype))))
        return false;
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)m);
    if (hx_t_opt.m && !hx_t_in_list(hx_t_opt.m, ms)) return false;
    if (hx_t_opt.list) {
        printf("%-9s %-46s%s\n", family, label, full_only ? " [--full]" : "");
        return false;
    }
    return true;
}

static void hx_t_run_case(struct hx_t_case *c)
{
    bool any = false, sup[HX_T_MAX_DUTS];
    for (int i = 0; i < hx_t_n_duts; i++) {
        hx_t_dut_env(&hx_t_duts[i]);
        sup[i] = hx__dev_supports(hx_t_duts[i].dev, &c->desc);
        any |= sup[i];
    }
    struct hx_t_out want;
    memset(&want, 0, sizeof want);
    if (any) {
        if (hx_t_opt.verbose) printf("RUN  %-20s %-9s %s\n", "ref", c->family, c->label);
        fflush(stdout);
        const double t_before = hx_t_ref.seconds;
        hx_t_exec(&hx_t_ref, c, &want);
        if (hx_t_opt.verbose) printf("     %.3f s\n", hx_t_ref.seconds - t_before);
    }
    const double macs = (double)c->desc.n_rows * (double)c->desc.n_in * (double)c->desc.n_out;
    const bool big = c->desc.kind == HX_OP_MATMUL && macs > HX_T_VARIANT_MACS;
    for (int i = 0; i < hx_t_n_duts; i++) {
        struct hx_t_dut *d = &hx_t_duts[i];
        if (d->variant && big && !hx_t_opt.full) continue; /* not run, not counted */
        if (!sup[i]) {
            d->skipped++, hx_t_skipped++;
            if (!hx_t_opt.quiet) hx_t_line("SKIP", d->label, c, "supports() refused");
            continue;
        }
        struct hx_t_cmp r;
        if (want.status != HX_OK) {
            memset(&r, 0, sizeof r);
            snprintf(r.why, sizeof r.why, "ref failed: %s", want.err);
        } else {
            if (hx_t_opt.verbose) printf("RUN  %-20s %-9s %s\n", d->label, c->family, c->label);
            fflush(stdout);
            struct hx_t_out got;
            const double t_before = d->seconds;
            hx_t_exec(d, c, &got);
            if (hx_t_opt.verbose) printf("     %.3f s\n", d->seconds - t_before);
            hx_t_compare(c, &got, &want, d->dev->info.numerics == HX_NUMERICS_INT8_ROW, &r);
            hx_t_out_free(&got);
        }
        if (r.ok)
            d->passed++, hx_t_passed++;
        else
            d->failed++, hx_t_failed++;
        if (!r.ok || !hx_t_opt.quiet)
            hx_t_line(r.ok ? "OK" : "FAIL", d->label, c,
                      "nmse %8.2e <= %8.2e  max %8.2e <= %8.2e%s%s", r.nmse, r.thr, r.maxrel,
                      r.maxrel_lim, r.ok ? "" : "  ", r.why);
    }
    hx_t_out_free(&want);
}

/* ---- thresholds (docs/testing.md, core/numerics.c) ----------------------------------------- */

/* The matmul activation model of the case, per row and K-block: s for float devices, s8 for
 * HX_NUMERICS_INT8_ROW ones (one int8 scale per row), xm = mean x². */
static void hx_t_mm_model(struct hx_t_case *c, const float *x, int64_t m, int64_t k)
{
    const int64_t nb = hx__mm_blocks(k);
    c->s = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->s);
    c->s8 = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->s8);
    c->xm = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->xm);
    for (int64_t r = 0; r < m; r++) {
        hx__mm_act_row(HX_NUMERICS_FLOAT, c->desc.wtype, x + r * k, k, c->s + r * nb,
                       c->xm + r * nb);
        hx__mm_act_row(HX_NUMERICS_INT8_ROW, c->desc.wtype, x + r * k, k, c->s8 + r * nb,
                       c->xm + r * nb);
    }
}

/* ---- matmul and embedding cases ------------------------------------------------------------- */

/* K not a multiple of the tiles (for block-256 types: 3 or 5 blocks; for Q1_0 odd multiples of
 * 128; for block-32 types odd multiples of 32; for float types odd K). */
static int64_t hx_t_k_small(enum hx_dtype t)
{
    switch (hx_dtype_block_elems(t)) {
    case 1: return 67;
    case 32: return 96;
    case 128: return 384;
    default: return 768;
    }
}

static int64_t hx_t_k_mid(enum hx_dtype t)
{
    switch (hx_dtype_block_elems(t)) {
    case 1: return 1029;
    case 32: return 1056;
    case 128: return 1152;
    default: return 1280;
    }
}

static void hx_t_matmul_case(struct hx_t_weight *tw, int64_t m, bool strided, bool full_only,
                             const char *extra)
{
    const enum hx_dtype t = tw->w.type;
    const int64_t k = tw->w.n_cols, n = tw->w.n_rows;
    char label[160];
    snprintf(label, sizeof label, "%-5s m=%lld K=%lld N=%lld%s", hx_dtype_name(t), (long long)m,
             (long long)k, (long long)n, extra);
    if (!hx_t_want("matmul", HX_OP_MATMUL, t, m, full_only, label)) return;
    hx_t_weight_build(tw);
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_MATMUL, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = n > 100000 ? HX_CLASS_LM_HEAD : HX_CLASS_QKV;
    c.desc.n_in = k, c.desc.n_out = n, c.desc.wtype = t;
    c.n_src = 1;
    if (strided) { /* input a slice of a wider buffer; output the middle slice of a fused one */
        c.src[0] = hx_t_slice(&c, m, 0, k, 37);
        int64_t w[3] = {13, n, 7};
        struct hx_t_tensor o[3];
        hx_t_slices(&c, m, 3, w, 0, o);
        c.dst = o[1];
    } else {
        c.src[0] = hx_t_alone(&c, m, k);
        c.dst = hx_t_alone(&c, m, n);
    }
    float *x = hx_t_act_mm(m, k, 1000 + (uint64_t)m * 7 + (uint64_t)k);
    hx_t_put(&c, &c.src[0], x);
    hx_t_mm_model(&c, x, m, k);
    free(x);
    c.w = tw;
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

/* Tokens: the last and first rows of the table, then random ones (repeats allowed). */
static int32_t *hx_t_tokens(int64_t m, int64_t n_vocab, uint64_t seed)
{
    int32_t *tok = hx_t_xmalloc((size_t)m * sizeof *tok);
    for (int64_t r = 0; r < m; r++) tok[r] = (int32_t)(hx_t_next(&seed) % (uint64_t)n_vocab);
    tok[0] = (int32_t)(n_vocab - 1);
    if (m > 1) tok[1] = 0;
    return tok;
}

static void hx_t_embed_case(struct hx_t_weight *tw, int64_t m, bool strided, bool full_only)
{
    const enum hx_dtype t = tw->w.type;
    char label[160];
    snprintf(label, sizeof label, "%-5s m=%lld vocab=%lld width=%lld%s", hx_dtype_name(t),
             (long long)m, (long long)tw->w.n_rows, (long long)tw->w.n_cols,
             strided ? " strided" : "");
    if (!hx_t_want("embed", HX_OP_EMBED, t, m, full_only, label)) return;
    hx_t_weight_build(tw);
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_EMBED, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = HX_CLASS_EMBED, c.desc.layer = -1;
    c.desc.n_in = tw->w.n_rows, c.desc.n_out = tw->w.n_cols, c.desc.wtype = t;
    c.dst = strided ? hx_t_slice(&c, m, 5, tw->w.n_cols, 3) : hx_t_alone(&c, m, tw->w.n_cols);
    c.tokens = hx_t_tokens(m, tw->w.n_rows, 77 + (uint64_t)m);
    c.thr = hx__op_nmse_threshold(HX_OP_EMBED);
    c.w = tw;
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

static bool hx_t_ops_wanted(const char *a, const char *b)
{
    return !hx_t_opt.op || hx_t_in_list(hx_t_opt.op, a) || (b && hx_t_in_list(hx_t_opt.op, b));
}

static const int64_t hx_t_ms[] = {1, 7, 64, 512};

/* Every matmul and embedding case of weight type t, grouped by weight. */
static void hx_t_weight_ops(enum hx_dtype t)
{
    if (hx_t_opt.type && !hx_t_in_list(hx_t_opt.type, hx_dtype_name(t))) return;
    const bool mm = hx_t_ops_wanted("matmul", NULL), em = hx_t_ops_wanted("embed", NULL);
    const int64_t be = hx_dtype_block_elems(t), ks = hx_t_k_small(t), km = hx_t_k_mid(t);
    struct hx_t_weight tw;
    if (mm) { /* one block per row (K = 3 for float types), one output */
        hx_t_weight_plan(&tw, t, 1, be == 1 ? 3 : be, 1.0f, 11);
        hx_t_matmul_case(&tw, 1, false, false, " one block");
        hx_t_matmul_case(&tw, 7, false, false, " one block");
        hx_t_weight_free(&tw);
        /* small K, N = 17: every m, and m = 2 (the two-row decode kernel) and 9 (8 + 1) */
        hx_t_weight_plan(&tw, t, 17, ks, 1.0f, 12);
        for (size_t i = 0; i < 4; i++) hx_t_matmul_case(&tw, hx_t_ms[i], false, false, "");
        hx_t_matmul_case(&tw, 2, false, false, "");
        hx_t_matmul_case(&tw, 9, false, false, "");
        hx_t_weight_free(&tw);
        /* strided input and output, and a BitNet-style weight scale */
        hx_t_weight_plan(&tw, t, 33, ks, 0.37f, 13);
        hx_t_matmul_case(&tw, 7, true, false, " strided scale=.37");
        hx_t_matmul_case(&tw, 64, true, false, " strided scale=.37");
        hx_t_weight_free(&tw);
        /* K off the 256 grid, N = 1009 = 16·63 + 1 */
        hx_t_weight_plan(&tw, t, 1009, km, 1.0f, 14);
        for (size_t i = 0; i < 4; i++)
            hx_t_matmul_case(&tw, hx_t_ms[i], false, hx_t_ms[i] == 512, "");
        hx_t_weight_free(&tw);
        hx_t_weight_plan(&tw, t, 33, km, 1.0f, 15);
        hx_t_matmul_case(&tw, 512, false, false, "");
        hx_t_weight_free(&tw);
    }
    if (em) {
        hx_t_weight_plan(&tw, t, 1009, ks, 1.0f, 16);
        for (size_t i = 0; i < 4; i++) hx_t_embed_case(&tw, hx_t_ms[i], false, false);
        hx_t_embed_case(&tw, 7, true, false);
        hx_t_weight_free(&tw);
    }
    /* Qwen3-0.6B: q|k|v-sized, O, gate|up, down at m = 1, 7 (O also 64; the rest --full) */
    static const int64_t qwen[][2] = {{1024, 4096}, {2048, 1024}, {1024, 6144}, {3072, 1024}};
    for (size_t s = 0; mm && s < 4; s++) {
        hx_t_weight_plan(&tw, t, qwen[s][1], qwen[s][0], 1.0f, 20 + s);
        for (size_t i = 0; i < 4; i++)
            hx_t_matmul_case(&tw, hx_t_ms[i], false, hx_t_ms[i] > (s == 1 ? 64 : 7), "");
        hx_t_weight_free(&tw);
    }
    /* The LM head, tied with the embedding table: 151936 rows. By default m = 1 and 7 for the
     * types Qwen3 files store it in (F16, Q8_0, Q6_K: bigger than a 128 MiB Vulkan binding
     * or just under); every type and m = 64, 512 with --full. */
    const bool lm = t == HX_DTYPE_F16 || t == HX_DTYPE_Q8_0 || t == HX_DTYPE_Q6_K;
    hx_t_weight_plan(&tw, t, 151936, 1024, 1.0f, 30);
    for (size_t i = 0; mm && i < 4; i++)
        hx_t_matmul_case(&tw, hx_t_ms[i], false, !lm || hx_t_ms[i] > 7, "");
    if (em) hx_t_embed_case(&tw, 7, false, !lm);
    hx_t_weight_free(&tw);
}

/* ---- norm cases ----------------------------------------------------------------------------- */

static void hx_t_norm_case(int64_t m, int64_t width, int64_t group, int layout, float eps,
                           bool full_only)
{
    const char *fam = group < width ? "qk_norm" : "rms_norm";
    char label[160];
    snprintf(label, sizeof label, "m=%lld width=%lld group=%lld eps=%g%s", (long long)m,
             (long long)width, (long long)group, (double)eps,
             layout == 1   ? " q of fused qkv"
             : layout == 2 ? " k of fused qkv"
                           : "");
    if (!hx_t_want(fam, HX_OP_RMS_NORM, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_RMS_NORM, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.family = fam;
    c.desc.cls = HX_CLASS_NORM;
    c.desc.n_in = c.desc.n_out = width;
    c.desc.p.norm.eps = eps, c.desc.p.norm.group = group;
    c.n_src = 1;
    if (layout) { /* Qwen3: q (2048) | k (1024) | v (1024); norm reads a slice */
        int64_t w[3] = {2048, 1024, 1024};
        struct hx_t_tensor s[3];
        hx_t_slices(&c, m, 3, w, 0, s);
        c.src[0] = s[layout - 1];
        c.src[0].cols = width;
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
    }
    hx_t_put_rand(&c, &c.src[0], 1.0f, 300 + (uint64_t)(m + width + group));
    c.dst = hx_t_alone(&c, m, width);
    struct hx_t_weight gain;
    hx_t_weight_vec(&gain, "gain", group, 0.5f, 2.0f, 301 + (uint64_t)group);
    c.w = &gain;
    c.thr = hx__op_nmse_threshold(HX_OP_RMS_NORM);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
    hx_t_weight_free(&gain);
}

static void hx_t_norm_ops(void)
{
    if (!hx_t_ops_wanted("rms_norm", "qk_norm")) return;
    for (size_t i = 0; i < 4; i++) {
        hx_t_norm_case(hx_t_ms[i], 1024, 1024, 0, 1e-6f, false);
        hx_t_norm_case(hx_t_ms[i], 1001, 1001, 0, 1e-5f, false);
        hx_t_norm_case(hx_t_ms[i], 2048, 128, 1, 1e-6f, false);
        hx_t_norm_case(hx_t_ms[i], 1024, 128, 2, 1e-6f, false);
    }
    hx_t_norm_case(7, 6912, 6912, 0, 1e-5f, false); /* BitNet ffn_sub_norm */
    hx_t_norm_case(7, 192, 64, 0, 1e-6f, false);    /* 3 heads of 64 */
    hx_t_norm_case(3, 4096, 4096, 0, 1e-5f, false);
}

/* ---- rope ------------------------------------------------------------------------------------ */

struct hx_t_rope {
    int32_t n_head, head_dim, n_rot;
    float base, freq_scale;
    bool freqs; /* llama3 rope_freqs factors */
    int layout; /* 0: in place, contiguous; 1: in place on the k slice of qkv; 2: to dst */
};

/* Positions: a prefill from 0, a later chunk, or scattered (a batch of sequences). */
static int32_t *hx_t_positions(int64_t m, int kind, uint64_t seed)
{
    int32_t *p = hx_t_xmalloc((size_t)m * sizeof *p);
    for (int64_t r = 0; r < m; r++)
        p[r] = kind == 0   ? (int32_t)r
               : kind == 1 ? (int32_t)(1000 + r)
                           : (int32_t)(hx_t_next(&seed) % 40960);
    if (kind == 2) p[0] = 40959;
    return p;
}

static void hx_t_rope_case(const struct hx_t_rope *rp, enum hx_rope_mode mode, int64_t m,
                           int pos_kind, bool full_only)
{
    static const char *const pk[] = {"pos 0..", "pos 1000..", "pos random<40960"};
    static const char *const lay[] = {"in place", "in place on qkv slice", "to dst"};
    char label[160];
    snprintf(label, sizeof label, "%s m=%lld h=%d hd=%d rot=%d %s%s %s",
             mode == HX_ROPE_NEOX ? "neox" : "norm", (long long)m, rp->n_head, rp->head_dim,
             rp->n_rot, pk[pos_kind], rp->freqs ? " freqs+scale" : "", lay[rp->layout]);
    if (!hx_t_want("rope", HX_OP_ROPE, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ROPE, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    const int64_t width = (int64_t)rp->n_head * rp->head_dim;
    c.desc.cls = HX_CLASS_ROPE;
    c.desc.n_in = c.desc.n_out = width;
    c.desc.p.rope.n_head = rp->n_head, c.desc.p.rope.head_dim = rp->head_dim;
    c.desc.p.rope.n_rot = rp->n_rot, c.desc.p.rope.base = rp->base;
    c.desc.p.rope.freq_scale = rp->freq_scale, c.desc.p.rope.mode = mode;
    c.n_src = 1;
    if (rp->layout == 1) {
        int64_t w[3] = {2 * width, width, width};
        struct hx_t_tensor s[3];
        hx_t_slices(&c, m, 3, w, 0, s);
        c.src[0] = s[1];
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
    }
    c.dst = rp->layout == 2 ? hx_t_alone(&c, m, width) : c.src[0];
    hx_t_put_rand(&c, &c.src[0], 1.0f, 400 + (uint64_t)(m + width));
    c.pos = hx_t_positions(m, pos_kind, 401);
    struct hx_t_weight ff = {0};
    if (rp->freqs) {
        hx_t_weight_vec(&ff, "rope_freqs", rp->n_rot / 2, 1.0f, 8.0f, 402);
        c.aux = &ff;
    }
    c.thr = hx__op_nmse_threshold(HX_OP_ROPE);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
    if (rp->freqs) hx_t_weight_free(&ff);
}

static void hx_t_rope_ops(void)
{
    if (!hx_t_ops_wanted("rope", NULL)) return;
    static const struct hx_t_rope qwen_q = {16, 128, 128, 1e6f, 1.0f, false, 0};
    static const struct hx_t_rope llama_k = {8, 64, 64, 1e4f, 1.0f, false, 1};
    static const struct hx_t_rope partial = {3, 64, 32, 1e4f, 1.0f, false, 2};
    static const struct hx_t_rope llama3 = {4, 128, 128, 5e5f, 0.25f, true, 2};
    for (int mode = 0; mode < 2; mode++) {
        enum hx_rope_mode md = mode ? HX_ROPE_NEOX : HX_ROPE_NORM;
        hx_t_rope_case(&qwen_q, md, 1, 2, false);
        hx_t_rope_case(&qwen_q, md, 7, 0, false);
        hx_t_rope_case(&qwen_q, md, 64, 1, false);
        hx_t_rope_case(&qwen_q, md, 512, 2, false);
        hx_t_rope_case(&llama_k, md, 7, 1, false);
        hx_t_rope_case(&partial, md, 7, 0, false);
        hx_t_rope_case(&llama3, md, 7, 2, false);
        hx_t_rope_case(&llama_k, md, 512, 0, true);
    }
}

/* ---- attention ------------------------------------------------------------------------------- */

struct hx_t_attn {
    int32_t n_head, n_kv, hd;
};

/* A batch: row r is token pos[r] of sequence seq[r]; hist[s] positions already in the cache. */
struct hx_t_batch {
    const char *name;
    int64_t m, n_ctx;
    int32_t n_seq;
    int32_t *pos, *seq;
    int64_t hist[4];
};

static void hx_t_batch_make(struct hx_t_batch *b, int kind, int64_t m)
{
    memset(b, 0, sizeof *b);
    b->n_seq = 1, b->m = m;
    b->pos = hx_t_xmalloc((size_t)m * sizeof *b->pos);
    b->seq = hx_t_xmalloc((size_t)m * sizeof *b->seq);
    int64_t start = 0;
    switch (kind) {
    case 0: b->name = "prefill", start = 0, b->n_ctx = m + 37; break;
    case 1: b->name = "chunk", start = 300, b->n_ctx = 320 + m; break;
    case 2: b->name = "decode", start = 1000, b->n_ctx = 1100; break;
    case 3: b->name = "decode", start = 4000, b->n_ctx = 4096; break;
    case 4: b->name = "first token", start = 0, b->n_ctx = 16; break;
    default: break;
    }
    for (int64_t r = 0; r < m; r++) b->pos[r] = (int32_t)(start + r), b->seq[r] = 0;
    b->hist[0] = start;
    if (kind == 5) { /* 3 sequences, interleaved rows: one starting, two decoding */
        static const int32_t s[] = {1, 0, 2, 0, 2, 1, 0, 2, 0, 2};
        static const int32_t p[] = {0, 17, 200, 18, 201, 1, 19, 202, 20, 203};
        b->name = "3 seqs", b->n_seq = 3, b->n_ctx = 256;
        for (int64_t r = 0; r < m && r < 10; r++) b->seq[r] = s[r], b->pos[r] = p[r];
        b->hist[0] = 17, b->hist[1] = 0, b->hist[2] = 200;
    }
}

static void hx_t_attn_case(const struct hx_t_attn *a, int kind, int64_t m, bool fused,
                           bool full_only)
{
    struct hx_t_batch b;
    hx_t_batch_make(&b, kind, m);
    char label[160];
    snprintf(label, sizeof label, "h=%d/%d hd=%d %s m=%lld pos=%d ctx=%lld%s", a->n_head, a->n_kv,
             a->hd, b.name, (long long)m, b.pos[0], (long long)b.n_ctx, fused ? " fused qkv" : "");
    if (!hx_t_want("attn", HX_OP_ATTN, -1, m, full_only, label)) {
        free(b.pos), free(b.seq);
        return;
    }
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ATTN, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    const int64_t nq = (int64_t)a->n_head * a->hd, nkv = (int64_t)a->n_kv * a->hd;
    c.desc.cls = HX_CLASS_ATTN;
    c.desc.n_in = c.desc.n_out = nq;
    c.desc.p.attn.n_head = a->n_head, c.desc.p.attn.n_head_kv = a->n_kv;
    c.desc.p.attn.head_dim = a->hd, c.desc.p.attn.scale = 1.0f / sqrtf((float)a->hd);
    c.desc.p.attn.n_ctx = b.n_ctx, c.desc.p.attn.n_seq = b.n_seq;
    c.n_src = 3;
    if (fused) {
        int64_t w[3] = {nq, nkv, nkv};
        hx_t_slices(&c, m, 3, w, 0, c.src);
    } else {
        c.src[0] = hx_t_alone(&c, m, nq);
        c.src[1] = hx_t_alone(&c, m, nkv);
        c.src[2] = hx_t_alone(&c, m, nkv);
    }
    hx_t_put_rand(&c, &c.src[0], 3.0f, 500 + (uint64_t)m);
    hx_t_put_rand(&c, &c.src[1], 1.0f, 501 + (uint64_t)m);
    hx_t_put_rand(&c, &c.src[2], 1.0f, 502 + (uint64_t)m);
    c.dst = hx_t_alone(&c, m, nq);
    /* The cache: rows of earlier positions hold data, every other row is stale (poison). */
    const int64_t rows = (int64_t)b.n_seq * b.n_ctx;
    c.kc = hx_t_alone(&c, rows, nkv);
    c.vc = hx_t_alone(&c, rows, nkv);
    c.has_cache = true;
    uint64_t seed = 503;
    for (int32_t s = 0; s < b.n_seq; s++) {
        for (int64_t p = 0; p < b.hist[s]; p++) {
            float *kr = hx_t_at(&c.kc, c.buf[c.kc.buf].init, s * b.n_ctx + p);
            float *vr = hx_t_at(&c.vc, c.buf[c.vc.buf].init, s * b.n_ctx + p);
            for (int64_t i = 0; i < nkv; i++) kr[i] = hx_t_unif(&seed), vr[i] = hx_t_unif(&seed);
        }
    }
    c.pos = b.pos, c.seq = b.seq;
    c.thr = hx__op_nmse_threshold(HX_OP_ATTN);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

static void hx_t_attn_ops(void)
{
    if (!hx_t_ops_wanted("attn", NULL)) return;
    static const struct hx_t_attn qwen = {16, 8, 128}, bitnet = {20, 5, 128}, mha = {4, 4, 64},
                                  odd = {6, 2, 80}, wide = {4, 1, 256}, mqa = {16, 1, 64};
    hx_t_attn_case(&qwen, 4, 1, false, false);
    hx_t_attn_case(&qwen, 0, 7, false, false);
    hx_t_attn_case(&qwen, 0, 16, false, false);  /* a last key block of 16: the flash kernel reads 32 */
    hx_t_attn_case(&qwen, 0, 64, false, false);
    hx_t_attn_case(&qwen, 0, 512, false, false);
    hx_t_attn_case(&qwen, 0, 37, false, false);  /* a last job of one row: 2 queries, not 8 */
    hx_t_attn_case(&bitnet, 0, 64, false, false);
    hx_t_attn_case(&mha, 0, 48, false, false);   /* flash kernel, head_dim 64: the generic body */
    hx_t_attn_case(&wide, 0, 40, false, false);
    hx_t_attn_case(&mqa, 0, 40, false, false);   /* 16 heads per KV head: the row-wise kt kernel */
    hx_t_attn_case(&qwen, 1, 7, true, false);
    hx_t_attn_case(&qwen, 2, 1, false, false);
    hx_t_attn_case(&qwen, 3, 1, true, false);
    hx_t_attn_case(&qwen, 5, 5, false, false);
    hx_t_attn_case(&qwen, 5, 10, true, false);
    hx_t_attn_case(&bitnet, 1, 7, false, false);
    hx_t_attn_case(&bitnet, 2, 1, false, false);
    hx_t_attn_case(&mha, 1, 7, false, false);
    hx_t_attn_case(&odd, 1, 7, false, false);
    hx_t_attn_case(&odd, 2, 1, false, false);
    hx_t_attn_case(&wide, 1, 7, false, false);
    hx_t_attn_case(&qwen, 1, 64, false, true);
    hx_t_attn_case(&bitnet, 0, 512, false, true);
    hx_t_attn_case(&qwen, 3, 1, false, true);
}

/* ---- element-wise ops ------------------------------------------------------------------------ */

/* layout 0: separate buffers; 1: gate|up slices of one fused buffer; 2: dst = src0 (in place);
 * 3: dst = src1. */
static void hx_t_binary_case(enum hx_op_kind kind, int64_t m, int64_t width, int layout,
                             bool full_only)
{
    static const char *const lay[] = {"", " fused gate|up", " in place (dst = a)",
                                      " in place (dst = b)"};
    char label[160];
    snprintf(label, sizeof label, "m=%lld width=%lld%s", (long long)m, (long long)width,
             lay[layout]);
    if (!hx_t_want(hx_op_kind_name(kind), kind, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, kind, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = kind == HX_OP_ADD ? HX_CLASS_ADD : HX_CLASS_ACT;
    c.desc.n_in = c.desc.n_out = width;
    c.n_src = 2;
    if (layout == 1) {
        int64_t w[2] = {width, width};
        hx_t_slices(&c, m, 2, w, 0, c.src);
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
        c.src[1] = hx_t_alone(&c, m, width);
    }
    /* gates over a wide range: SiLU's exp saturates both ways */
    float *g = hx_t_act(m, width, kind == HX_OP_ADD ? 1.0f : 6.0f, 600 + (uint64_t)m);
    uint64_t s = 601;
    for (int64_t i = 0; kind != HX_OP_ADD && i < m * width; i++)
        if (hx_t_next(&s) % 97 == 0) g[i] = 30.0f * hx_t_unif(&s) * 3.0f;
    hx_t_put(&c, &c.src[0], g);
    free(g);
    hx_t_put_rand(&c, &c.src[1], 1.0f, 602 + (uint64_t)m);
    c.dst = layout == 2 ? c.src[0] : layout == 3 ? c.src[1] : hx_t_alone(&c, m, width);
    c.thr = hx__op_nmse_threshold(kind);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

static void hx_t_binary_ops(void)
{
    static const enum hx_op_kind glu[] = {HX_OP_SWIGLU, HX_OP_RELU2_GLU};
    for (size_t k = 0; k < 2; k++) {
        if (!hx_t_ops_wanted(hx_op_kind_name(glu[k]), NULL)) continue;
        for (size_t i = 0; i < 4; i++) hx_t_binary_case(glu[k], hx_t_ms[i], 3072, 1, false);
        hx_t_binary_case(glu[k], 1, 1001, 0, false);
        hx_t_binary_case(glu[k], 7, 1001, 0, false);
        hx_t_binary_case(glu[k], 7, 6912, 1, false);
    }
    if (!hx_t_ops_wanted("add", NULL)) return;
    for (size_t i = 0; i < 4; i++) hx_t_binary_case(HX_OP_ADD, hx_t_ms[i], 1024, 2, false);
    hx_t_binary_case(HX_OP_ADD, 7, 1001, 0, false);
    hx_t_binary_case(HX_OP_ADD, 7, 1001, 3, false);
    hx_t_binary_case(HX_OP_ADD, 64, 2560, 2, false);
}

/* ---- edge cases that supports() accepts ------------------------------------------------------ */

static void hx_t_edge_ops(void)
{
    /* head_dim and n_rot beyond any model's, but within what supports() promises */
    static const struct hx_t_rope big = {1, 2048, 2048, 1e4f, 1.0f, false, 2};
    if (hx_t_ops_wanted("rope", NULL)) hx_t_rope_case(&big, HX_ROPE_NEOX, 2, 0, false);
}

/* ---- self-check of the comparator ------------------------------------------------------------ */

/* The checker must catch one wrong column in a long row, one stray word in a guard or a
 * stride gap, a NaN, and a changed KV row; a checker that cannot fail tests nothing. */
static int hx_t_selfcheck(void)
{
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ADD, 3);
    snprintf(c.label, sizeof c.label, "self-check");
    c.dst = hx_t_slice(&c, 3, 4, 151936, 2);
    c.kc = hx_t_alone(&c, 4, 8);
    c.vc = hx_t_alone(&c, 4, 8);
    c.has_cache = true;
    hx_t_put_rand(&c, &c.dst, 1.0f, 1);
    c.thr = 5e-5;
    struct hx_t_out want = {0}, got = {0};
    for (int i = 0; i < c.n_buf; i++) {
        want.buf[i] = hx_t_xmalloc(c.buf[i].nbytes);
        got.buf[i] = hx_t_xmalloc(c.buf[i].nbytes);
        memcpy(want.buf[i], c.buf[i].init, c.buf[i].nbytes);
    }
    int bad = 0;
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < c.n_buf; i++) memcpy(got.buf[i], want.buf[i], c.buf[i].nbytes);
        float *row = hx_t_at(&c.dst, got.buf[c.dst.buf], 2);
        switch (trial) {
        case 1: row[151935] += 1.0f; break;                     /* one column */
        case 2: got.buf[c.dst.buf][0] ^= 1; break;              /* guard before */
        case 3: row[151936] = 0.0f; break;                      /* stride gap */
        case 4: row[77] = NAN; break;                           /* NaN */
        case 5: got.buf[c.kc.buf][c.kc.off / 4 + 8] = 0; break; /* KV row 1 */
        default: break;
        }
        struct hx_t_cmp r;
        hx_t_compare(&c, &got, &want, false, &r);
        if (r.ok != (trial == 0)) {
            printf("FAIL self-check %d: the comparator %s (%s)\n", trial,
                   r.ok ? "missed an error" : "rejected a correct result", r.why);
            bad++;
        }
    }
    hx_t_out_free(&want);
    hx_t_out_free(&got);
    hx_t_case_free(&c);
    return bad;
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* --backend items name a backend ("cpu": its devices and variants), a device ("vulkan:1",
 * "cpu:0": with its variants) or one variant ("cpu:0[avx2]"). */
static bool hx_t_backend_wanted(const char *backend, const char *id, const char *label)
{
    return !hx_t_opt.backend || hx_t_in_list(hx_t_opt.backend, backend) ||
           hx_t_in_list(hx_t_opt.backend, id) || hx_t_in_list(hx_t_opt.backend, label);
}

/* Could any --backend item name something of this backend? */
static bool hx_t_backend_any(const char *backend)
{
    if (!hx_t_opt.backend) return true;
    const size_t n = strlen(backend);
    for (const char *p = hx_t_opt.backend; *p;) {
        if (!strncasecmp(p, backend, n) && strchr(",:[", p[n] ? p[n] : ',')) return true;
        const char *e = strchr(p, ',');
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* The ISA a cpu device actually runs with the current environment ("kernels: NAME ..."). */
static bool hx_t_cpu_runs(struct hx_device *dev, const char *isa)
{
    char desc[256] = "";
    if (dev->ops->describe) dev->ops->describe(dev, desc, sizeof desc);
    char want[64];
    snprintf(want, sizeof want, "kernels: %s ", isa);
    return strncmp(desc, want, strlen(want)) == 0;
}

/* The decode stream count a cpu device uses, from its description (0 if it does not say). */
static int hx_t_cpu_streams(struct hx_device *dev)
{
    char desc[256] = "";
    if (dev->ops->describe) dev->ops->describe(dev, desc, sizeof desc);
    const char *p = strstr(desc, "decode streams per thread: ");
    return p ? atoi(p + strlen("decode streams per thread: ")) : 0;
}

static void hx_t_add_dut(struct hx_device *dev, const char *label, const char *isa, bool norepack,
                         const char *streams)
{
    if (hx_t_n_duts >= HX_T_MAX_DUTS) return;
    struct hx_t_dut *d = &hx_t_duts[hx_t_n_duts++];
    memset(d, 0, sizeof *d);
    snprintf(d->label, sizeof d->label, "%s", label);
    d->dev = dev, d->isa = isa, d->norepack = norepack, d->streams = streams;
    d->variant = isa || norepack || streams;
}

/* The cpu backend's other code paths, each as its own device instance. */
static void hx_t_cpu_variants(const char *spec, const char *id, const struct hx_device_config *cfg)
{
    static const char *const isas[] = {"avx512", "avx2", "scalar"};
    struct hx_device *dev = NULL;
    if (hx__device_open(spec, cfg, &dev) != HX_OK) return;
    unsetenv("HX_CPU_ISA");
    unsetenv("HX_CPU_STREAMS");
    const char *best = NULL;
    for (size_t i = 0; i < 3 && !best; i++)
        if (hx_t_cpu_runs(dev, isas[i])) best = isas[i];
    /* the decode stream count the plain device does not use (the default depends on the CPU) */
    const char *other_streams = hx_t_cpu_streams(dev) == 1 ? "2" : "1";
    hx__device_close(dev);
    for (size_t i = 0; i < 5; i++) {
        const char *isa = i < 3 ? isas[i] : "avx512";
        char label[96];
        snprintf(label, sizeof label, "%s[%s%s%s]", id, isa, i == 3 ? ",norepack" : "",
                 i == 4 ? (other_streams[0] == '1' ? ",1 stream" : ",2 streams") : "");
        if (i < 3 && best && !strcmp(isa, best)) continue; /* that is the plain device */
        if (i >= 3 && !(best && !strcmp(best, "avx512"))) continue;
        if (!hx_t_backend_wanted("cpu", spec, label)) continue;
        if (hx__device_open(spec, cfg, &dev) != HX_OK) continue;
        setenv("HX_CPU_ISA", isa, 1);
        bool ok = hx_t_cpu_runs(dev, isa);
        unsetenv("HX_CPU_ISA");
        if (!ok) {
            printf("SKIP %-20s this CPU has no %s path\n", label, isa);
            hx_t_skipped++;
            hx__device_close(dev);
            continue;
        }
        hx_t_add_dut(dev, label, isa, i == 3, i == 4 ? other_streams : NULL);
    }
}

static void hx_t_open_devices(const struct hx_device_config *cfg)
{
    for (int b = 0; b < hx__registry_count(); b++) {
        const struct hx_backend_entry *e = hx__registry_get(b);
        const char *name = e->ops->name;
        if (!strcmp(name, "ref") || !hx_t_backend_any(name)) continue;
        if (e->probe_status != HX_OK) {
            printf("SKIP backend %s: %s\n", name, e->why);
            hx_t_skipped++;
            continue;
        }
        int nd = 0;
        char why[256] = "";
        if (e->ops->device_count(&nd, why, sizeof why) != HX_OK || nd == 0) {
            printf("SKIP backend %s: no devices%s%s\n", name, why[0] ? ": " : "", why);
            hx_t_skipped++;
            continue;
        }
        for (int i = 0; i < nd; i++) {
            char spec[80];
            snprintf(spec, sizeof spec, "%s:%d", name, i);
            struct hx_device *dev;
            if (hx__device_open(spec, cfg, &dev) != HX_OK) {
                printf("SKIP %s: %s\n", spec, hx_last_error());
                hx_t_skipped++;
                continue;
            }
            char id[64];
            snprintf(id, sizeof id, "%s", dev->id);
            if (hx_t_backend_wanted(name, spec, id))
                hx_t_add_dut(dev, id, NULL, false, NULL);
            else
                hx__device_close(dev);
            if (!strcmp(name, "cpu")) hx_t_cpu_variants(spec, id, cfg);
        }
    }
}

static int hx_t_usage(const char *argv0)
{
    printf("usage: %s [--full] [--backend NAME[,..]] [--op NAME[,..]] [--type T[,..]]\n"
           "          [--m N[,..]] [--threads N] [--list] [-q] [-v]\n"
           "ops: embed rms_norm qk_norm matmul rope attn swiglu relu2_glu add\n",
           argv0);
    return 2;
}

static int hx_t_parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--full"))
            hx_t_opt.full = true;
        else if (!strcmp(a, "--list"))
            hx_t_opt.list = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            hx_t_opt.quiet = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            hx_t_opt.verbose = true;
        else if (v && (!strcmp(a, "--backend") || !strcmp(a, "-b")))
            hx_t_opt.backend = v, i++;
        else if (v && !strcmp(a, "--op"))
            hx_t_opt.op = v, i++;
        else if (v && !strcmp(a, "--type"))
            hx_t_opt.type = v, i++;
        else if (v && !strcmp(a, "--m"))
            hx_t_opt.m = v, i++;
        else if (v && !strcmp(a, "--threads"))
            hx_t_opt.threads = (int)strtol(v, NULL, 10), i++;
        else
            return hx_t_usage(argv[0]);
    }
    if (hx_t_opt.threads < 1) hx_t_opt.threads = 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (hx_t_parse(argc, argv)) return 2;
    const double t0 = hx_t_now();
    if (hx_t_opt.list) {
        for (int t = 0; t < HX_DTYPE_COUNT; t++) hx_t_weight_ops((enum hx_dtype)t);
        hx_t_norm_ops(), hx_t_rope_ops(), hx_t_attn_ops(), hx_t_binary_ops(), hx_t_edge_ops();
        return 0;
    }
    if (hx_t_selfcheck()) {
        printf("0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    printf("self-check: the comparator catches a wrong column, guard and gap writes, NaN, KV\n");
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = hx_t_opt.threads};
    if (hx__device_open("ref", &cfg, &hx_t_ref.dev) != HX_OK) {
        printf("cannot open ref: %s\n0 passed, 1 failed, 0 skipped\n", hx_last_error());
        return 1;
    }
    snprintf(hx_t_ref.label, sizeof hx_t_ref.label, "ref");
    hx_t_open_devices(&cfg);
    for (int i = 0; i < hx_t_n_duts; i++)
        hx_t_have_npu |= hx_t_duts[i].dev->info.numerics == HX_NUMERICS_INT8_ROW;
    if (!hx_t_n_duts) { /* cpu always registers: only a --backend that matches nothing */
        printf("FAIL no device to test besides ref%s\n", hx_t_opt.backend ? " (--backend)" : "");
        hx_t_failed++;
    }
    for (int i = 0; i < hx_t_n_duts; i++) {
        char desc[256] = "";
        hx_t_dut_env(&hx_t_duts[i]);
        if (hx_t_duts[i].dev->ops->describe)
            hx_t_duts[i].dev->ops->describe(hx_t_duts[i].dev, desc, sizeof desc);
        desc[strcspn(desc, "\n")] = '\0';
        printf("device %-22s %s%s%s\n", hx_t_duts[i].label, hx_t_duts[i].dev->info.description,
               desc[0] ? "; " : "", desc);
    }
    for (int t = 0; hx_t_n_duts && t < HX_DTYPE_COUNT; t++) hx_t_weight_ops((enum hx_dtype)t);
    if (hx_t_n_duts) hx_t_norm_ops(), hx_t_rope_ops(), hx_t_attn_ops(), hx_t_binary_ops();
    if (hx_t_n_duts) hx_t_edge_ops();

    printf("\n%-24s %7s %7s %7s %9s\n", "device", "passed", "failed", "skipped", "run time");
    printf("%-24s %7s %7s %7s %8.1fs\n", "ref", "", "", "", hx_t_ref.seconds);
    for (int i = 0; i < hx_t_n_duts; i++) {
        struct hx_t_dut *d = &hx_t_duts[i];
        printf("%-24s %7d %7d %7d %8.1fs\n", d->label, d->passed, d->failed, d->skipped,
               d->seconds);
        hx_t_dut_release(d);
        hx__device_close(d->dev);
    }
    hx_t_dut_release(&hx_t_ref);
    hx__device_close(hx_t_ref.dev);
    unsetenv("HX_CPU_ISA"), unsetenv("HX_CPU_REPACK");
    printf("test-backend-ops: %d device(s)%s, %.1f s\n", hx_t_n_duts,
           hx_t_opt.full ? ", --full" : "", hx_t_now() - t0);
    printf("%d passed, %d failed, %d skipped\n", hx_t_passed, hx_t_failed, hx_t_skipped);
    return hx_t_failed ? 1 : 0;
}
