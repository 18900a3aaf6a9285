/*
 * backend-ops-data.c — what test-backend-ops feeds the ops: reproducible random activations
 * (splitmix64), random valid weights of every type with their matmul error-model statistics
 * (core/numerics.h), and the buffers of a case: tensors as guarded column slices of poisoned
 * buffer images (backend-ops.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-ops.h"

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
        case HX_DTYPE_Q5_K:
            hx_t_put_f16(blk, hx_t_scale(s) / 16.0f);
            hx_t_put_f16(blk + 2, hx_t_scale(s) / 16.0f);
            break;
        case HX_DTYPE_Q6_K: hx_t_put_f16(blk + 208, hx_t_scale(s) / 32.0f); break;
        case HX_DTYPE_I2_S: break; /* codes only: the scale is the tensor's (tensor_scale) */
        default: hx_t_put_f16(blk, hx_t_scale(s)); break; /* Q8_0, Q4_0, Q1_0, Q2_0: d first */
        }
    }
}

static uint64_t hx_t_weight_ids;

bool hx_t_have_npu; /* a device under test is HX_NUMERICS_INT8_ROW */

static void hx_t_weight_stats(struct hx_t_weight *tw)
{
    const int64_t k = tw->w.n_cols, n = tw->w.n_rows, nb = hx__mm_blocks(k);
    float *row = hx_t_xmalloc((size_t)k * sizeof *row);
    tw->nb = nb;
    tw->e = hx_t_xmalloc((size_t)(n * nb) * sizeof *tw->e);
    if (hx_t_have_npu) tw->dw = hx_t_xmalloc((size_t)(n * nb) * sizeof *tw->dw);
    for (int64_t j = 0; j < n; j++) {
        hx_weight_dequantize_row(&tw->w, j, row); /* I2_S's tensor scale included */
        hx__mm_weight_row(HX_NUMERICS_INT8_ROW, row, k, tw->e + j * nb,
                          tw->dw ? tw->dw + j * nb : NULL);
    }
    free(row);
}

void hx_t_weight_plan(struct hx_t_weight *tw, enum hx_dtype t, int64_t n, int64_t k, float scale,
                      uint64_t seed)
{
    memset(tw, 0, sizeof *tw);
    tw->w = (struct hx_weight){.name = "w",
                               .type = t,
                               .n_rows = n,
                               .n_cols = k,
                               .nbytes = hx_dtype_row_bytes(t, k) * (size_t)n,
                               .scale = scale};
    /* I2_S: random codes (every one, the +2 of code 3 too) times a random tensor scale */
    uint64_t ss = seed ^ 0x5bd1e995u;
    tw->w.tensor_scale = hx_dtype_tail_bytes(t) ? hx_t_scale(&ss) : 1.0f;
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

/* Release every device's handle of the weight, then its data. */
void hx_t_weight_free(struct hx_t_weight *tw)
{
    if (tw->id) hx_t_release_weight(tw->id);
    free(tw->data), free(tw->e), free(tw->dw);
    memset(tw, 0, sizeof *tw);
}

/* ---- the buffers of a case ------------------------------------------------------------------- */

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
void hx_t_slices(struct hx_t_case *c, int64_t rows, int n, const int64_t *widths, int64_t pad,
                 struct hx_t_tensor *out)
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

void hx_t_put_rand(struct hx_t_case *c, const struct hx_t_tensor *t, float amp, uint64_t seed)
{
    float *v = hx_t_act(t->rows, t->cols, amp, seed);
    hx_t_put(c, t, v);
    free(v);
}
