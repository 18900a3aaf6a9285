/*
 * npu-gemm.c — the NPU host path of a MATMUL: y = dequant(int8(x) · int8(W)ᵀ).
 *
 * Each row x of the activations becomes two int8 rows of A (docs/npu-backend.md §2): hi =
 * round(x / s_hi), s_hi = amax / 127, and the residual lo = round((x − s_hi·hi) / s_lo), s_lo =
 * amax(x − s_hi·hi) / 127 ≈ s_hi / 254 — about 15 bits of activation in the kernel's int8
 * contract. Per output j of W the int8 row and s_w[j] are prepared at load (npu-mem.c). The
 * kernel computes exact int32 sums over K; y[r][j] = (acc_hi · s_hi + acc_lo · s_lo) · s_w[j] in
 * f32. The scales factor out of the K-sums, so dequantization adds only f32 rounding; the error
 * is the int8 rounding of the residual and of the weight (docs/npu-backend.md §4 derives it).
 *
 * Tiling: a kernel computes (M, K) x (K, N). An op of n rows, K inputs, N outputs runs as
 * M-tiles of M / 2 activation rows (2 A rows each; padded rows zero), N-tiles (the last one
 * padded, its extra outputs ignored) and K-tiles (zero K padding; partial int32 sums added on
 * the host, exact because |acc| <= K * 127 * 128 < 2^31 for K <= 131071). Call order: op,
 * M-tile, N-tile, K-tile.
 *
 * Pipeline (one call in flight at a time): while call i runs, the host prepares call i+1
 * (quantize, copy and sync its A into the kernel's other A buffer, unless it is already
 * there); when i completes, i+1 is launched at once and only then is i's C synced back and
 * dequantized, so the device never waits for the host's read-back. run() returns with the
 * split's last call still in flight; synchronize() finishes it (read back while the CPU does
 * other work). A next op that reads what the current op writes is not prepared early.
 *
 * Timing (hx.timing): host_us = time in run/synchronize minus time blocked in wait;
 * device_us = what the glue reports (modelled on the simulator, flagged as such).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "npu-impl.h"

/* ---- quantization ---------------------------------------------------------------------------- */

/* max |x| over the bit patterns: for non-negative floats the integer order is the numeric
 * order, NaN and ±inf sort above every finite value, and an integer max reduction
 * vectorizes where a float one (without -ffast-math) does not. */
static float hx_npu_amax(const float *x, int64_t k, bool *finite)
{
    int32_t mb = 0;
    for (int64_t i = 0; i < k; i++) {
        int32_t u;
        memcpy(&u, &x[i], sizeof u);
        u &= 0x7FFFFFFF;
        mb = u > mb ? u : mb;
    }
    *finite = mb < 0x7F800000;
    float a;
    memcpy(&a, &mb, sizeof a);
    return a;
}

float hx__npu_quantize_row(const float *x, int64_t k, int8_t *q, int64_t k_pad, int8_t pad_byte)
{
    bool finite;
    float amax = hx_npu_amax(x, k, &finite);
    bool bad = !finite;
    if (k_pad > k) memset(q + k, pad_byte, (size_t)(k_pad - k));
    if (bad || amax == 0.0f) {
        if (k > 0) memset(q, 0, (size_t)k);
        return bad ? NAN : 0.0f;
    }
    /* (v + 1.5·2^23) - 1.5·2^23 rounds |v| < 2^22 to nearest even, and vectorizes */
    const float inv = 127.0f / amax, magic = 12582912.0f;
    for (int64_t i = 0; i < k; i++) {
        float v = (x[i] * inv + magic) - magic;
        q[i] = (int8_t)(int32_t)v;
    }
    return amax / 127.0f;
}

void hx__npu_quantize_row2(const float *x, int64_t k, int8_t *hi, int8_t *lo, int64_t k_pad,
                           int8_t pad_byte, float *s_hi, float *s_lo, float *res)
{
    *s_hi = hx__npu_quantize_row(x, k, hi, k_pad, pad_byte);
    if (!(*s_hi > 0.0f)) { /* all zero (0) or not finite (NaN): no residual */
        memset(lo, 0, (size_t)k);
        if (k_pad > k) memset(lo + k, pad_byte, (size_t)(k_pad - k));
        *s_lo = *s_hi;
        return;
    }
    /* x − s_hi·hi, |residual| <= s_hi / 2: the product rounds by <= 2^-24·127·s_hi, nothing
     * against lo's step s_lo ≈ s_hi / 254 (no fmaf: a library call where FMA is not built in,
     * 10x the whole quantization) */
    const float s = *s_hi;
    for (int64_t i = 0; i < k; i++) res[i] = x[i] - s * (float)hi[i];
    *s_lo = hx__npu_quantize_row(res, k, lo, k_pad, pad_byte);
}

float hx__npu_weight_row_to_i8(const float *w, int64_t k, int8_t *q, bool *exact)
{
    float amax = 0.0f, amin = INFINITY;
    for (int64_t i = 0; i < k; i++) {
        float a = fabsf(w[i]);
        amax = a > amax ? a : amax;
        if (a > 0.0f && a < amin) amin = a;
    }
    *exact = true;
    if (amax == 0.0f) {
        memset(q, 0, (size_t)k);
        return 0.0f;
    }
    if (amax <= FLT_MAX && amax / amin <= 127.5f) {
        int64_t i = 0;
        for (; i < k; i++) {
            double r = rint((double)w[i] / (double)amin);
            if (fabs(r) > 127.0 || r * (double)amin != (double)w[i]) break;
            q[i] = (int8_t)r;
        }
        if (i == k) return amin;
    }
    *exact = false;
    return hx__npu_quantize_row(w, k, q, k, 0);
}

/* ---- geometry --------------------------------------------------------------------------------- */

struct hx_npu_geo {
    const struct hx_op *op;
    struct hx_npu_weight *w;
    struct hx_npu_kinst *ki;
    const struct hx_npu_kernel_desc *kd;
    int64_t n_mt;
    int64_t mrows; /* activation rows per M-tile: M / HX_NPU_A_ROWS */
};

static void hx_npu_geo(struct hx_npu_dev *d, const struct hx_op *ops, int64_t i, struct hx_npu_geo *g)
{
    g->op = &ops[i];
    g->w = ops[i].weight_handle;
    g->ki = &d->ki[g->w->ki];
    g->kd = &g->ki->kn->d;
    g->mrows = g->kd->M / HX_NPU_A_ROWS;
    g->n_mt = (ops[i].desc.n_rows + g->mrows - 1) / g->mrows;
}

/* A rows of M-tile mt: HX_NPU_A_ROWS per activation row. */
static int64_t hx_npu_tile_rows(const struct hx_npu_geo *g, int64_t mt)
{
    return HX_NPU_A_ROWS * HX_MIN(g->mrows, g->op->desc.n_rows - mt * g->mrows);
}

static bool hx_npu_first(const struct hx_op *ops, int64_t n_ops, struct hx_npu_call *c)
{
    *c = (struct hx_npu_call){.op = -1};
    while (++c->op < n_ops)
        if (ops[c->op].desc.n_rows > 0) return true;
    return false;
}

static bool hx_npu_advance(struct hx_npu_dev *d, const struct hx_op *ops, int64_t n_ops,
                           struct hx_npu_call *c)
{
    struct hx_npu_geo g;
    hx_npu_geo(d, ops, c->op, &g);
    if (++c->kt < g.w->n_kt) return true;
    c->kt = 0;
    if (++c->nt < g.w->n_nt) return true;
    c->nt = 0;
    if (++c->mt < g.n_mt) return true;
    c->mt = 0;
    while (++c->op < n_ops)
        if (ops[c->op].desc.n_rows > 0) return true;
    return false;
}

static bool hx_npu_overlaps(const struct hx_tensor_ref *a, const struct hx_tensor_ref *b)
{
    if (a->buf != b->buf || a->n_rows <= 0 || b->n_rows <= 0) return false;
    size_t a0 = a->offset_bytes, a1 = a0 + (size_t)(a->n_rows - 1) * a->row_stride_bytes + (size_t)a->n_cols * 4;
    size_t b0 = b->offset_bytes, b1 = b0 + (size_t)(b->n_rows - 1) * b->row_stride_bytes + (size_t)b->n_cols * 4;
    return a0 < b1 && b0 < a1;
}

/* ---- one call: prepare, launch, wait, finish ------------------------------------------------ */

static double hx_npu_lap(double *stage, double t0)
{
    double t = hx__time_us();
    *stage += t - t0;
    return t;
}

static int hx_npu_glue_fail(struct hx_device *dev, int st, const struct hx_npu_geo *g,
                            const char *what)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    if (st != HX_E_NOMEM && st != HX_E_TIMEOUT) st = HX_E_DEVICE;
    return hx_device_set_error(dev, st, "%s (kernel %s): %s: %s", g->op->weight->name,
                               g->ki->kn->name, what, d->glue->error(g->ki->h));
}

/* Quantize the activation rows of M-tile mt into its `rows` A rows at dst (stride bytes per
 * row, K padded to stride): rows 2i and 2i + 1 are row i's hi and lo, with scales sa[2i],
 * sa[2i + 1]. */
static void hx_npu_quantize_tile(struct hx_npu_dev *d, const struct hx_npu_geo *g, int64_t mt,
                                 int64_t rows, int8_t *dst, int64_t stride, float *sa)
{
    int8_t pad = d->dbg.poison_kpad ? 0x5A : 0;
    for (int64_t r = 0; r < rows / HX_NPU_A_ROWS; r++) {
        const float *x = hx_tensor_row(&g->op->src[0], mt * g->mrows + r);
        int8_t *hi = dst + 2 * r * stride;
        hx__npu_quantize_row2(x, g->w->K, hi, hi + stride, stride, pad, &sa[2 * r],
                              &sa[2 * r + 1], d->res);
    }
}

static bool hx_npu_tag_eq(const struct hx_npu_atag *a, const struct hx_npu_atag *b)
{
    return a->run && a->run == b->run && a->op == b->op && a->mt == b->mt && a->kt == b->kt;
}

/* Fill A buffer `s` with (op, mt, kt) of call c: quantized rows, zero (or garbage) M padding. */
static void hx_npu_fill_a(struct hx_npu_dev *d, const struct hx_npu_geo *g, uint64_t run,
                          const struct hx_npu_call *c, int s, int64_t rows)
{
    struct hx_npu_kinst *ki = g->ki;
    const int64_t Kk = g->kd->K;
    double t = hx__time_us();
    if (g->w->n_kt == 1) {
        hx_npu_quantize_tile(d, g, c->mt, rows, ki->a_map[s], Kk, ki->a_scale[s]);
        t = hx_npu_lap(&d->stage_us[HX_NPU_ST_QUANT], t);
    } else {
        struct hx_npu_atag want = {run, c->op, c->mt, 0}, have = d->qa_tag;
        have.kt = 0;
        int64_t stride = g->w->n_kt * Kk;
        if (!hx_npu_tag_eq(&have, &want)) {
            hx_npu_quantize_tile(d, g, c->mt, rows, d->qa, stride, d->sa);
            d->qa_tag = want;
        }
        t = hx_npu_lap(&d->stage_us[HX_NPU_ST_QUANT], t);
        for (int64_t r = 0; r < rows; r++)
            memcpy(ki->a_map[s] + r * Kk, d->qa + r * stride + c->kt * Kk, (size_t)Kk);
        memcpy(ki->a_scale[s], d->sa, (size_t)rows * sizeof(float));
        t = hx_npu_lap(&d->stage_us[HX_NPU_ST_COPY], t);
    }
    if (d->dbg.garbage_mpad) {
        uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)c->mt;
        for (int64_t i = rows * Kk; i < g->kd->M * Kk; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            ki->a_map[s][i] = (int8_t)seed;
        }
        ki->a_dirty[s] = g->kd->M;
    } else if (ki->a_dirty[s] > rows) {
        memset(ki->a_map[s] + rows * Kk, 0, (size_t)((ki->a_dirty[s] - rows) * Kk));
    }
    hx_npu_lap(&d->stage_us[HX_NPU_ST_QUANT], t);
}

static int hx_npu_prepare(struct hx_device *dev, const struct hx_op *ops, uint64_t run,
                          struct hx_npu_call *c, const struct hx_npu_call *busy)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_geo g, bg;
    hx_npu_geo(d, ops, c->op, &g);
    struct hx_npu_kinst *ki = g.ki;
    bool same = false;
    if (busy) {
        hx_npu_geo(d, ops, busy->op, &bg);
        same = bg.ki == ki;
    }
    c->slot_c = same ? 1 - busy->slot_c : 0;
    struct hx_npu_atag tag = {run, c->op, c->mt, c->kt};
    for (int s = 0; s < 2; s++)
        if (hx_npu_tag_eq(&ki->a_tag[s], &tag)) return c->slot_a = s, HX_OK;
    int s = same ? 1 - busy->slot_a : 0;
    c->slot_a = s;
    if (busy) d->dbg.n_calls_overlapped++;
    int64_t rows = hx_npu_tile_rows(&g, c->mt), old_dirty = ki->a_dirty[s];
    ki->a_tag[s] = (struct hx_npu_atag){0};
    hx_npu_fill_a(d, &g, run, c, s, rows);
    int64_t sync_rows = HX_MAX(rows, old_dirty);
    if (d->dbg.garbage_mpad) sync_rows = g.kd->M;
    else ki->a_dirty[s] = rows;
    double t = hx__time_us();
    if (!d->dbg.skip_sync_a) {
        int st = d->glue->bo_sync(ki->h, ki->a_bo[s], HX_NPU_SYNC_TO_DEVICE,
                                  (size_t)(sync_rows * g.kd->K), 0);
        if (st) return hx_npu_glue_fail(dev, st, &g, "bo.sync(A, to device)");
    }
    hx_npu_lap(&d->stage_us[HX_NPU_ST_SYNC_A], t);
    ki->a_tag[s] = tag;
    ki->a_rows[s] = rows;
    return HX_OK;
}

static int hx_npu_launch(struct hx_device *dev, const struct hx_op *ops, const struct hx_npu_call *c)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_geo g;
    hx_npu_geo(d, ops, c->op, &g);
    void *const bos[3] = {g.ki->a_bo[c->slot_a], g.w->b_bo[c->nt * g.w->n_kt + c->kt],
                          g.ki->c_bo[c->slot_c]};
    double t = hx__time_us();
    int st = d->glue->run(g.ki->h, HX_NPU_OPCODE, g.ki->instr_bo, g.ki->ninstr, bos, 3);
    hx_npu_lap(&d->stage_us[HX_NPU_ST_LAUNCH], t);
    return st ? hx_npu_glue_fail(dev, st, &g, "run") : HX_OK;
}

static const char *hx_npu_state_name(int s)
{
    switch (s) {
    case HX_NPU_STATE_COMPLETED: return "COMPLETED";
    case HX_NPU_STATE_ERROR: return "ERROR";
    case HX_NPU_STATE_ABORT: return "ABORT";
    case HX_NPU_STATE_TIMEOUT: return "TIMEOUT";
    case HX_NPU_STATE_NORESPONSE: return "NORESPONSE";
    default: return "unknown";
    }
}

/* Wait for call c; afterwards nothing is in flight, whatever the outcome. */
static int hx_npu_wait(struct hx_device *dev, const struct hx_op *ops, const struct hx_npu_call *c)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_geo g;
    hx_npu_geo(d, ops, c->op, &g);
    int state = 0;
    double t = hx__time_us();
    int st = d->glue->wait(g.ki->h, d->dbg.timeout_ms, &state);
    d->wait_us += hx__time_us() - t;
    d->timing.n_calls++;
    double us;
    bool modelled;
    if (d->glue->last_device_us && d->glue->last_device_us(g.ki->h, &us, &modelled) == HX_OK) {
        d->timing.device_us += us;
        d->timing.device_modelled |= modelled;
    }
    if (st) return hx_npu_glue_fail(dev, st, &g, "wait");
    if (state == HX_NPU_STATE_COMPLETED) return HX_OK;
    g.ki->a_tag[0].run = g.ki->a_tag[1].run = 0;
    if (state == HX_NPU_STATE_TIMEOUT) {
        d->glue->abort(g.ki->h);
        return hx_device_set_error(dev, HX_E_TIMEOUT, "%s (kernel %s): call timed out after %u ms "
                                   "and was aborted", g.op->weight->name, g.ki->kn->name,
                                   d->dbg.timeout_ms);
    }
    return hx_device_set_error(dev, HX_E_DEVICE, "%s (kernel %s): command state %s (%d): %s",
                               g.op->weight->name, g.ki->kn->name, hx_npu_state_name(state), state,
                               d->glue->error(g.ki->h));
}

static void hx_npu_dequant(const struct hx_npu_geo *g, const struct hx_npu_call *c, int64_t rows,
                           const int32_t *src, int64_t row_stride, int64_t col_stride,
                           const float *sa)
{
    int64_t n0 = c->nt * g->kd->N, nv = HX_MIN(g->kd->N, g->w->N - n0);
    const float *sw = g->w->s_w + n0;
    for (int64_t r = 0; r < rows / HX_NPU_A_ROWS; r++) {
        float *y = hx_tensor_row(&g->op->dst, c->mt * g->mrows + r) + n0;
        const int32_t *a = src + 2 * r * row_stride, *b = a + row_stride;
        const float s = sa[2 * r], t = sa[2 * r + 1];
        if (col_stride == 1)
            for (int64_t j = 0; j < nv; j++) y[j] = ((float)a[j] * s + (float)b[j] * t) * sw[j];
        else
            for (int64_t j = 0; j < nv; j++)
                y[j] = ((float)a[j * col_stride] * s + (float)b[j * col_stride] * t) * sw[j];
    }
}

/* Add (kt > 0) or copy C of a K-tile into the host accumulators (rows x nv, row-major). */
static void hx_npu_accumulate(struct hx_npu_dev *d, const struct hx_npu_geo *g,
                              const struct hx_npu_call *c, int64_t rows, const int32_t *C,
                              int64_t rs, int64_t cs)
{
    int64_t nv = HX_MIN(g->kd->N, g->w->N - c->nt * g->kd->N);
    for (int64_t r = 0; r < rows; r++) {
        uint32_t *acc = (uint32_t *)d->acc + r * nv;
        const int32_t *a = C + r * rs;
        if (c->kt == 0) for (int64_t j = 0; j < nv; j++) acc[j] = (uint32_t)a[j * cs];
        else for (int64_t j = 0; j < nv; j++) acc[j] += (uint32_t)a[j * cs];
    }
}

static int hx_npu_finish(struct hx_device *dev, const struct hx_op *ops, const struct hx_npu_call *c)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_geo g;
    hx_npu_geo(d, ops, c->op, &g);
    const struct hx_npu_kernel_desc *kd = g.kd;
    int64_t rows = hx_npu_tile_rows(&g, c->mt);
    double t = hx__time_us();
    if (!d->dbg.skip_sync_c) {
        size_t nb = (size_t)(kd->c_col_maj ? kd->M * kd->N : rows * kd->N) * 4;
        int st = d->glue->bo_sync(g.ki->h, g.ki->c_bo[c->slot_c], HX_NPU_SYNC_FROM_DEVICE, nb, 0);
        if (st) return hx_npu_glue_fail(dev, st, &g, "bo.sync(C, from device)");
    }
    t = hx_npu_lap(&d->stage_us[HX_NPU_ST_SYNC_C], t);
    const int32_t *C = g.ki->c_map[c->slot_c];
    int64_t rs = kd->c_col_maj ? 1 : kd->N, cs = kd->c_col_maj ? kd->M : 1;
    const float *sa = g.ki->a_scale[c->slot_a];
    if (g.w->n_kt == 1) {
        hx_npu_dequant(&g, c, rows, C, rs, cs, sa);
    } else {
        hx_npu_accumulate(d, &g, c, rows, C, rs, cs);
        if (c->kt == g.w->n_kt - 1)
            hx_npu_dequant(&g, c, rows, d->acc, HX_MIN(kd->N, g.w->N - c->nt * kd->N), 1, sa);
    }
    hx_npu_lap(&d->stage_us[HX_NPU_ST_DEQUANT], t);
    return HX_OK;
}

/* ---- run / synchronize --------------------------------------------------------------------- */

static int hx_npu_check_split(struct hx_device *dev, const struct hx_split *sp)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        const struct hx_npu_weight *w = op->weight_handle;
        if (op->desc.kind != HX_OP_MATMUL || !w || !op->weight)
            return hx_device_set_error(dev, HX_E_UNSUPPORTED, "op %lld (%s) is not a prepared matmul",
                                       (long long)i, hx_op_kind_name(op->desc.kind));
        if (op->desc.n_rows <= 0) continue;
        if (hx__npu_grow((void **)&d->res, &d->res_cap, (size_t)w->K, sizeof(float)))
            return hx_device_set_error(dev, HX_E_NOMEM, "no memory for the activation residual");
        if (op->desc.n_in != w->K || op->desc.n_out != w->N || !op->src[0].buf || !op->dst.buf ||
            !op->src[0].buf->host || !op->dst.buf->host || op->src[0].n_rows < op->desc.n_rows ||
            op->dst.n_rows < op->desc.n_rows)
            return hx_device_set_error(dev, HX_E_INVAL, "matmul %s: tensors do not match the "
                                       "prepared %lld x %lld weight", op->weight->name,
                                       (long long)w->N, (long long)w->K);
        if (w->n_kt > 1) {
            const struct hx_npu_kernel_desc *kd = &d->ki[w->ki].kn->d;
            if (hx__npu_grow((void **)&d->qa, &d->qa_cap, (size_t)(kd->M * w->n_kt * kd->K), 1) ||
                hx__npu_grow((void **)&d->sa, &d->sa_cap, (size_t)kd->M, sizeof(float)) ||
                hx__npu_grow((void **)&d->acc, &d->acc_cap, (size_t)(kd->M * kd->N), sizeof(int32_t)))
                return hx_device_set_error(dev, HX_E_NOMEM, "no memory for K-tiling scratch");
        }
    }
    return HX_OK;
}

/* Drain a call that is in flight after another failure (its result is discarded). */
static void hx_npu_drain(struct hx_device *dev, const struct hx_op *ops, const struct hx_npu_call *c)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    char keep[sizeof dev->last_error];
    memcpy(keep, dev->last_error, sizeof keep);
    struct hx_npu_geo g;
    hx_npu_geo(d, ops, c->op, &g);
    int state = 0;
    if (d->glue->wait(g.ki->h, d->dbg.timeout_ms, &state) != HX_OK || state == HX_NPU_STATE_TIMEOUT)
        d->glue->abort(g.ki->h);
    g.ki->a_tag[0].run = g.ki->a_tag[1].run = 0;
    memcpy(dev->last_error, keep, sizeof keep);
}

static int hx_npu_pipeline(struct hx_device *dev, const struct hx_split *sp, uint64_t run)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    const struct hx_op *ops = sp->ops;
    struct hx_npu_call cur, nxt;
    if (!hx_npu_first(ops, sp->n_ops, &cur)) return HX_OK;
    int st = hx_npu_prepare(dev, ops, run, &cur, NULL);
    if (st == HX_OK) st = hx_npu_launch(dev, ops, &cur);
    if (st) return st;
    for (;;) {
        nxt = cur;
        if (!hx_npu_advance(d, ops, sp->n_ops, &nxt)) {
            d->pending = true, d->pend = cur, d->pend_ops = ops;
            return HX_OK;
        }
        bool drain = d->dbg.no_overlap ||
                     (nxt.op != cur.op && hx_npu_overlaps(&ops[nxt.op].src[0], &ops[cur.op].dst));
        if (!drain && (st = hx_npu_prepare(dev, ops, run, &nxt, &cur))) {
            hx_npu_drain(dev, ops, &cur);
            return st;
        }
        if ((st = hx_npu_wait(dev, ops, &cur))) return st;
        if (drain) {
            if ((st = hx_npu_finish(dev, ops, &cur)) || (st = hx_npu_prepare(dev, ops, run, &nxt, NULL)) ||
                (st = hx_npu_launch(dev, ops, &nxt)))
                return st;
        } else {
            if ((st = hx_npu_launch(dev, ops, &nxt))) return st;
            if ((st = hx_npu_finish(dev, ops, &cur))) {
                hx_npu_drain(dev, ops, &nxt);
                return st;
            }
        }
        cur = nxt;
    }
}

static void hx_npu_account(struct hx_npu_dev *d, double t_enter, double wait0)
{
    d->timing.host_us += (hx__time_us() - t_enter) - (d->wait_us - wait0);
}

int hx__npu_run(struct hx_device *dev, const struct hx_split *split)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    int st = d->pending ? hx__npu_synchronize(dev) : HX_OK;
    if (st) return st;
    double t = hx__time_us(), w0 = d->wait_us;
    st = hx_npu_check_split(dev, split);
    if (st == HX_OK) st = hx_npu_pipeline(dev, split, ++d->run_seq);
    hx_npu_account(d, t, w0);
    return st;
}

int hx__npu_synchronize(struct hx_device *dev)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    if (!d->pending) return HX_OK;
    double t = hx__time_us(), w0 = d->wait_us;
    d->pending = false;
    int st = hx_npu_wait(dev, d->pend_ops, &d->pend);
    if (st == HX_OK) st = hx_npu_finish(dev, d->pend_ops, &d->pend);
    hx_npu_account(d, t, w0);
    return st;
}

/* ---- questions ----------------------------------------------------------------------------- */

bool hx__npu_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    if (op->kind != HX_OP_MATMUL || (unsigned)op->wtype >= HX_DTYPE_COUNT) return false;
    if (op->n_in <= 0 || op->n_in % hx_dtype_block_elems(op->wtype)) return false;
    struct hx_npu_choice ch;
    return hx__npu_pick_kernel(&d->man, d->ki_ok, op->n_in, op->n_out, &ch);
}

int hx__npu_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_choice ch;
    if (!hx__npu_supports(dev, op) || !hx__npu_pick_kernel(&d->man, d->ki_ok, op->n_in, op->n_out, &ch))
        return HX_E_UNSUPPORTED;
    const int64_t mrows = d->man.k[ch.kernel].d.M / HX_NPU_A_ROWS;
    int64_t n_mt = (HX_MAX(op->n_rows, 1) + mrows - 1) / mrows;
    /* host work: ~1 ns per activation element quantized, ~1 ns per output dequantized */
    double host = 2.0 + 1e-3 * (double)(op->n_rows * op->n_in + op->n_rows * op->n_out);
    *us = (double)n_mt * ch.cost_us + host;
    return HX_OK;
}
