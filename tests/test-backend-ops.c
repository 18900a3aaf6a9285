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
 * without its repacked weights (HX_CPU_REPACK=0), with the other decode stream count
 * (HX_CPU_STREAMS, 1 or 2), with another decode software prefetch (HX_CPU_PREFETCH=16 where
 * this CPU uses less for some types, else 0, and another walk of the Q1_0 lookup decode,
 * HX_CPU_Q1_LUT=4:4; matmuls only) and, where the CPU has VBMI,
 * with the bit-mask Q1_0 decode instead of the lookup one (HX_CPU_VBMI=0, Q1_0 matmuls only):
 * those are separate rows of the summary.
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

#include "backend-ops.h"

#define HX_T_MAX_DUTS 16
#define HX_T_VARIANT_MACS 134217728.0 /* 2^27: larger matmuls skip variants without --full */

/* ---- options and filters ------------------------------------------------------------------ */

struct hx_t_opts hx_t_opt = {.threads = 2};

/* Is `name` in the comma-separated list (case-insensitive)? NULL list = everything. */
bool hx_t_in_list(const char *list, const char *name)
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

uint64_t hx_t_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float hx_t_unif(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(hx_t_next(s) >> 40) / 8388608.0 - 1.0);
}

static float hx_t_logu(uint64_t *s, float lo, float hi) /* log-uniform in [lo, hi] */
{
    double u = (double)(hx_t_next(s) >> 11) / 9007199254740992.0;
    return (float)exp(log(lo) + u * (log(hi) - log(lo)));
}

void *hx_t_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test-backend-ops: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* Uniform values scaled per row, so a kernel that mixes up rows or scales fails loudly. */
float *hx_t_act(int64_t rows, int64_t cols, float amp, uint64_t seed)
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
float *hx_t_act_mm(int64_t rows, int64_t k, uint64_t seed)
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


bool hx_t_have_npu; /* a device under test is HX_NUMERICS_INT8_ROW */

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

void hx_t_weight_plan(struct hx_t_weight *tw, enum hx_dtype t, int64_t n, int64_t k,
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

void hx_t_weight_build(struct hx_t_weight *tw)
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
void hx_t_weight_vec(struct hx_t_weight *tw, const char *name, int64_t n, float lo, float hi,
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
void hx_t_weight_free(struct hx_t_weight *tw)
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
    bool novbmi;     /* HX_CPU_VBMI=0: runs the Q1_0 matmuls only (nothing else changes) */
    const char *prefetch; /* HX_CPU_PREFETCH for this variant (matmuls only), or NULL */
    const char *q1_lut;   /* HX_CPU_Q1_LUT for this variant, or NULL */
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

/* Set name to value, or clear it when value is NULL. */
static void hx_t_env(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The environment knobs of a `cpu` variant; every other device runs with them cleared. */
static void hx_t_dut_env(const struct hx_t_dut *d)
{
    hx_t_env("HX_CPU_ISA", d->isa);
    hx_t_env("HX_CPU_REPACK", d->norepack ? "0" : NULL);
    hx_t_env("HX_CPU_STREAMS", d->streams);
    hx_t_env("HX_CPU_VBMI", d->novbmi ? "0" : NULL);
    hx_t_env("HX_CPU_PREFETCH", d->prefetch);
    hx_t_env("HX_CPU_Q1_LUT", d->q1_lut);
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




void hx_t_case_init(struct hx_t_case *c, enum hx_op_kind kind, int64_t m)
{
    memset(c, 0, sizeof *c);
    c->desc.kind = kind;
    c->desc.n_rows = m;
    c->desc.layer = 0;
    c->family = hx_op_kind_name(kind);
}

void hx_t_case_free(struct hx_t_case *c)
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
void hx_t_slices(struct hx_t_case *c, int64_t rows, int n, const int64_t *widths,
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
struct hx_t_tensor hx_t_alone(struct hx_t_case *c, int64_t rows, int64_t cols)
{
    struct hx_t_tensor t;
    hx_t_slices(c, rows, 1, &cols, 0, &t);
    return t;
}

/* One column slice at column `at` of a (rows, at + cols + after) buffer. */
struct hx_t_tensor hx_t_slice(struct hx_t_case *c, int64_t rows, int64_t at, int64_t cols,
                              int64_t after)
{
    int64_t w[2] = {at, cols};
    struct hx_t_tensor t[2];
    hx_t_slices(c, rows, 2, w, after, t);
    return t[1];
}

float *hx_t_at(const struct hx_t_tensor *t, uint32_t *words, int64_t r)
{
    return (float *)((char *)words + t->off + (size_t)r * t->stride);
}

void hx_t_put(struct hx_t_case *c, const struct hx_t_tensor *t, const float *vals)
{
    for (int64_t r = 0; r < t->rows; r++)
        memcpy(hx_t_at(t, c->buf[t->buf].init, r), vals + r * t->cols, (size_t)t->cols * 4);
}

void hx_t_put_rand(struct hx_t_case *c, const struct hx_t_tensor *t, float amp,
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
bool hx_t_want(const char *family, enum hx_op_kind kind, int wtype, int64_t m,
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

void hx_t_run_case(struct hx_t_case *c)
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
        if (d->novbmi && !(c->desc.kind == HX_OP_MATMUL && c->desc.wtype == HX_DTYPE_Q1_0)) continue;
        if (d->prefetch && c->desc.kind != HX_OP_MATMUL) continue;
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

#define HX_T_DESC_BYTES 512

/* A device's description under the current environment ("" if it has none). */
static void hx_t_describe(struct hx_device *dev, char desc[HX_T_DESC_BYTES])
{
    desc[0] = '\0';
    if (dev->ops->describe) dev->ops->describe(dev, desc, HX_T_DESC_BYTES);
}

/* The ISA a cpu device actually runs with the current environment ("kernels: NAME ..."). */
static bool hx_t_cpu_runs(struct hx_device *dev, const char *isa)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    char want[64];
    snprintf(want, sizeof want, "kernels: %s ", isa);
    return strncmp(desc, want, strlen(want)) == 0;
}

/* The decode stream count a cpu device uses, from its description (0 if it does not say). */
static int hx_t_cpu_streams(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    const char *p = strstr(desc, "decode streams per thread: ");
    return p ? atoi(p + strlen("decode streams per thread: ")) : 0;
}

/* Whether a cpu device's decode kernels prefetch 16 KiB ahead for every type (its description). */
static bool hx_t_cpu_prefetch_16(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    return strstr(desc, "decode software prefetch: 16 KiB ahead") != NULL;
}

/* A Q1_0 lookup decode walk this cpu device does not use (its own has 8 tiles per block), or
 * NULL when it has no lookup decode (its description). */
static const char *hx_t_cpu_other_lut(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    if (!strstr(desc, "Q1_0 lookup decode (tiles:groups ahead): ")) return NULL;
    return "4:4";
}

static struct hx_t_dut *hx_t_add_dut(struct hx_device *dev, const char *label, const char *isa,
                                     bool norepack, const char *streams)
{
    if (hx_t_n_duts >= HX_T_MAX_DUTS) return NULL;
    struct hx_t_dut *d = &hx_t_duts[hx_t_n_duts++];
    memset(d, 0, sizeof *d);
    snprintf(d->label, sizeof d->label, "%s", label);
    d->dev = dev, d->isa = isa, d->norepack = norepack, d->streams = streams;
    d->variant = isa || norepack || streams;
    return d;
}

/* The cpu backend's other code paths, each as its own device instance. */
static void hx_t_cpu_variants(const char *spec, const char *id, const struct hx_device_config *cfg)
{
    static const char *const isas[] = {"avx512", "avx2", "scalar"};
    struct hx_device *dev = NULL;
    if (hx__device_open(spec, cfg, &dev) != HX_OK) return;
    unsetenv("HX_CPU_ISA");
    unsetenv("HX_CPU_STREAMS");
    unsetenv("HX_CPU_PREFETCH");
    unsetenv("HX_CPU_Q1_LUT");
    const char *best = NULL;
    for (size_t i = 0; i < 3 && !best; i++)
        if (hx_t_cpu_runs(dev, isas[i])) best = isas[i];
    /* the decode stream count the plain device does not use (by default it uses 1) */
    const char *other_streams = hx_t_cpu_streams(dev) == 1 ? "2" : "1";
    /* and another software prefetch: none for all, or 16 KiB for all */
    const char *other_prefetch = hx_t_cpu_prefetch_16(dev) ? "0" : "16";
    const char *other_lut = hx_t_cpu_other_lut(dev);
    hx__device_close(dev);
    for (size_t i = 0; i < 7; i++) {
        const char *isa = i < 3 ? isas[i] : "avx512";
        char label[96];
        snprintf(label, sizeof label, "%.40s[%s%s%s%s%s%s%s]", id, isa, i == 3 ? ",norepack" : "",
                 i == 4 ? (other_streams[0] == '1' ? ",1 stream" : ",2 streams") : "",
                 i == 5 ? ",no vbmi" : "",
                 i == 6 ? (other_prefetch[0] == '1' ? ",prefetch 16 KiB" : ",prefetch off") : "",
                 i == 6 && other_lut ? ",lut " : "", i == 6 && other_lut ? other_lut : "");
        if (i < 3 && best && !strcmp(isa, best)) continue; /* that is the plain device */
        if (i >= 3 && !(best && !strcmp(best, "avx512"))) continue;
        if (i == 5 && !__builtin_cpu_supports("avx512vbmi")) continue; /* no lookup path */
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
        struct hx_t_dut *d = hx_t_add_dut(dev, label, isa, i == 3, i == 4 ? other_streams : NULL);
        if (d && i == 5) d->novbmi = d->variant = true;
        else if (d && i == 6) d->prefetch = other_prefetch, d->q1_lut = other_lut, d->variant = true;
        else if (!d) hx__device_close(dev);
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
        const int nd = e->n_devices;
        const char *why = e->why;
        if (nd == 0) {
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
        char desc[HX_T_DESC_BYTES];
        hx_t_dut_env(&hx_t_duts[i]);
        hx_t_describe(hx_t_duts[i].dev, desc);
        desc[strcspn(desc, "\n")] = '\0';
        printf("device %-22s %s%s%s\n", hx_t_duts[i].label, hx_t_duts[i].dev->info.description,
               desc[0] ? "; " : "", desc);
    }
    for (int t = 0; hx_t_n_duts && t < HX_DTYPE_COUNT; t++) hx_t_weight_ops((enum hx_dtype)t);
    if (hx_t_n_duts) hx_t_norm_ops(), hx_t_rope_ops(), hx_t_attn_ops(), hx_t_binary_ops();
    if (hx_t_n_duts) hx_t_edge_ops();

    printf("\n%-38s %7s %7s %7s %9s\n", "device", "passed", "failed", "skipped", "run time");
    printf("%-38s %7s %7s %7s %8.1fs\n", "ref", "", "", "", hx_t_ref.seconds);
    for (int i = 0; i < hx_t_n_duts; i++) {
        struct hx_t_dut *d = &hx_t_duts[i];
        printf("%-38s %7d %7d %7d %8.1fs\n", d->label, d->passed, d->failed, d->skipped,
               d->seconds);
        hx_t_dut_release(d);
        hx__device_close(d->dev);
    }
    hx_t_dut_release(&hx_t_ref);
    hx__device_close(hx_t_ref.dev);
    unsetenv("HX_CPU_ISA"), unsetenv("HX_CPU_REPACK"), unsetenv("HX_CPU_VBMI"), unsetenv("HX_CPU_PREFETCH");
    printf("test-backend-ops: %d device(s)%s, %.1f s\n", hx_t_n_duts,
           hx_t_opt.full ? ", --full" : "", hx_t_now() - t0);
    printf("%d passed, %d failed, %d skipped\n", hx_t_passed, hx_t_failed, hx_t_skipped);
    return hx_t_failed ? 1 : 0;
}
