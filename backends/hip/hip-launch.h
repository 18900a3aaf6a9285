/*
 * hip-launch.h — the HIP module's run path, part one (included once, by hip-module.hip, after
 * the device, buffer and weight code it uses): the checks a split passes before anything is
 * enqueued (every tensor inside its buffer and float-aligned, weights prepared, ids and
 * positions in range), and each op's launches — matmul (the GEMVs of hip-gemv.h or the GEMM,
 * a fused weight part by part), RoPE, the KV store and attention (split over the context for
 * decode), norms, element-wise ops. hip-module.hip keeps the scratch, the enqueue loop and
 * run(); hip-graph.h the captured decode graphs.
 */
#pragma once


/* ---- run: checks --------------------------------------------------------------------------- */

#define HX_HIP_PTR(t) ((float *)((char *)(t).buf->ctx + (t).offset_bytes))
#define HX_HIP_STRIDE(t) ((int64_t)((t).row_stride_bytes / sizeof(float)))

/* The tensor lies inside its buffer, float-aligned, with at least `rows` rows. */
static bool hx_hip_ref_ok(const struct hx_tensor_ref *t, int64_t rows)
{
    if (!t->buf || !t->buf->ctx || t->n_rows < rows || t->n_cols < 0) return false;
    if (t->offset_bytes % 4 || t->row_stride_bytes % 4) return false;
    if (t->n_rows == 0 || t->n_cols == 0) return true;
    if ((size_t)t->n_cols * 4 > t->row_stride_bytes && t->n_rows > 1) return false;
    const size_t last =
        t->offset_bytes + (size_t)(t->n_rows - 1) * t->row_stride_bytes + (size_t)t->n_cols * 4;
    return last <= t->buf->nbytes;
}

static const char *const hx_hip_op_names[HX_OP_KIND_COUNT] = {
    "EMBED", "RMS_NORM", "MATMUL", "ROPE", "ATTN", "SWIGLU", "RELU2_GLU", "ADD"};

static int hx_hip_check_op(const struct hx_split *sp, const struct hx_op *op, char *err, size_t len)
{
    const int64_t n = op->dst.n_rows;
    if (!hx_hip_ref_ok(&op->dst, n) || n > sp->n_rows)
        return hx_hip_inval(err, len, "destination (%lld rows) outside its buffer or batch (%lld)",
                            (long long)n, (long long)sp->n_rows);
    const struct hx_hip_weight *w = (const struct hx_hip_weight *)op->weight_handle;
    switch (op->desc.kind) {
    case HX_OP_MATMUL:
        if (!w) return hx_hip_inval(err, len, "matmul weight not prepared on this device");
        if (!hx_hip_ref_ok(&op->src[0], n) || op->src[0].n_cols < w->n_cols ||
            op->dst.n_cols < w->n_rows)
            return hx_hip_inval(err, len,
                                "matmul operands do not match the weight (K %lld, N %lld)",
                                (long long)w->n_cols, (long long)w->n_rows);
        return HX_OK;
    case HX_OP_EMBED:
        if (!w || !sp->tokens)
            return hx_hip_inval(err, len, "embed without a prepared table or tokens");
        if (op->dst.n_cols < w->n_cols)
            return hx_hip_inval(err, len, "embed destination has %lld columns, the table %lld",
                                (long long)op->dst.n_cols, (long long)w->n_cols);
        for (int64_t r = 0; r < n; r++)
            if (sp->tokens[r] < 0 || sp->tokens[r] >= w->n_rows)
                return hx_hip_inval(err, len, "embed: token %lld out of range (vocabulary %lld)",
                                    (long long)sp->tokens[r], (long long)w->n_rows);
        return HX_OK;
    case HX_OP_RMS_NORM: {
        const int64_t g = op->desc.p.norm.group > 0 ? op->desc.p.norm.group : op->src[0].n_cols;
        if (!hx_hip_ref_ok(&op->src[0], n) || g <= 0 || op->src[0].n_cols % g ||
            op->dst.n_cols < op->src[0].n_cols)
            return hx_hip_inval(err, len, "rms norm of %lld columns in groups of %lld",
                                (long long)op->src[0].n_cols, (long long)g);
        if (op->weight && (!w || w->type != HX_DTYPE_F32 || w->n_rows * w->n_cols < g))
            return hx_hip_inval(err, len,
                                "rms norm gain not prepared or shorter than the group (%lld)",
                                (long long)g);
        return HX_OK;
    }
    case HX_OP_ROPE: {
        const int64_t width = (int64_t)op->desc.p.rope.n_head * op->desc.p.rope.head_dim;
        if (!hx_hip_ref_ok(&op->src[0], n) || op->src[0].n_cols < width ||
            op->dst.n_cols < op->src[0].n_cols || !sp->pos)
            return hx_hip_inval(err, len, "rope over %lld columns of %lld", (long long)width,
                                (long long)op->src[0].n_cols);
        const struct hx_hip_weight *f = (const struct hx_hip_weight *)op->aux_handle;
        if (op->aux &&
            (!f || f->type != HX_DTYPE_F32 || f->n_rows * f->n_cols < op->desc.p.rope.n_rot / 2))
            return hx_hip_inval(
                err, len, "rope frequency factors not prepared or shorter than n_rot / 2 (%lld)",
                (long long)(op->desc.p.rope.n_rot / 2));
        return HX_OK;
    }
    case HX_OP_ATTN: {
        const struct hx_op_desc *de = &op->desc;
        const int64_t wq = (int64_t)de->p.attn.n_head * de->p.attn.head_dim,
                      wkv = (int64_t)de->p.attn.n_head_kv * de->p.attn.head_dim;
        const int64_t rows = de->p.attn.n_ctx * de->p.attn.n_seq;
        if (!hx_hip_ref_ok(&op->src[0], n) || !hx_hip_ref_ok(&op->src[1], n) ||
            !hx_hip_ref_ok(&op->src[2], n) || op->src[0].n_cols < wq || op->src[1].n_cols < wkv ||
            op->src[2].n_cols < wkv || op->dst.n_cols < wq)
            return hx_hip_inval(err, len, "attention operands narrower than %lld / %lld columns",
                                (long long)wq, (long long)wkv);
        if (!hx_hip_ref_ok(&op->k_cache, rows) || !hx_hip_ref_ok(&op->v_cache, rows) ||
            op->k_cache.n_cols < wkv || op->v_cache.n_cols < wkv)
            return hx_hip_inval(err, len, "KV cache smaller than %lld rows of %lld",
                                (long long)rows, (long long)wkv);
        if (!sp->pos || !sp->seq) return hx_hip_inval(err, len, "attention without positions");
        for (int64_t r = 0; r < n; r++) {
            if (sp->pos[r] < 0 || sp->pos[r] >= de->p.attn.n_ctx)
                return hx_hip_inval(err, len, "attention: position %lld outside the context (%lld)",
                                    (long long)sp->pos[r], (long long)de->p.attn.n_ctx);
            if (sp->seq[r] < 0 || sp->seq[r] >= de->p.attn.n_seq)
                return hx_hip_inval(err, len, "attention: sequence %lld outside the cache (%lld)",
                                    (long long)sp->seq[r], (long long)de->p.attn.n_seq);
        }
        return HX_OK;
    }
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD:
        if (!hx_hip_ref_ok(&op->src[0], n) || !hx_hip_ref_ok(&op->src[1], n) ||
            op->src[0].n_cols < op->dst.n_cols || op->src[1].n_cols < op->dst.n_cols)
            return hx_hip_inval(err, len, "element-wise operands narrower than %lld columns",
                                (long long)op->dst.n_cols);
        return HX_OK;
    default: return hx_hip_inval(err, len, "unknown op kind %lld", (long long)op->desc.kind);
    }
}

/* ---- run: launches ---------------------------------------------------------------------------- */

#define HX_HIP_DISPATCH(type, F)                                                                   \
    switch (type) {                                                                                \
    case HX_DTYPE_F32: F(HX_DTYPE_F32); break;                                                     \
    case HX_DTYPE_F16: F(HX_DTYPE_F16); break;                                                     \
    case HX_DTYPE_BF16: F(HX_DTYPE_BF16); break;                                                   \
    case HX_DTYPE_Q8_0: F(HX_DTYPE_Q8_0); break;                                                   \
    case HX_DTYPE_Q4_0: F(HX_DTYPE_Q4_0); break;                                                   \
    case HX_DTYPE_Q4_K: F(HX_DTYPE_Q4_K); break;                                                   \
    case HX_DTYPE_Q6_K: F(HX_DTYPE_Q6_K); break;                                                   \
    case HX_DTYPE_TQ1_0: F(HX_DTYPE_TQ1_0); break;                                                 \
    case HX_DTYPE_TQ2_0: F(HX_DTYPE_TQ2_0); break;                                                 \
    case HX_DTYPE_Q1_0: F(HX_DTYPE_Q1_0); break;                                                   \
    case HX_DTYPE_Q2_0: F(HX_DTYPE_Q2_0); break;                                                   \
    case HX_DTYPE_I2_S: F(HX_DTYPE_I2_S); break;                                                   \
    default: break;                                                                                \
    }

struct hx_hip_ctx {
    struct hx_hip_dev *d;
    const int32_t *tok, *pos, *seq; /* device copies of the split's row metadata */
    int8_t *aq;                     /* int8 activations */
    float2 *ad;
    int n_launch;
    int32_t pos_max; /* the split's largest position (host side), -1 without positions */
    /* chunks of the split decode attention: exactly those up to pos_max for direct launches,
     * a power of two at least that for a graph (hip-graph.h); 0: not split */
    int attn_chunks;
    float *part;     /* the GEMVs' split-K partial sums */
};

/* Chunks of the split decode attention for a batch of n rows up to position pos_max; 0: one
 * block per (head, row) covers the whole context instead (prefill, or a short context). */
static int hx_hip_attn_chunks(int64_t n, int32_t pos_max)
{
    if (n > HX_HIP_GEMV_MAX_ROWS || pos_max < HX_HIP_ATTN_CHUNK) return 0;
    return (int)(pos_max / HX_HIP_ATTN_CHUNK) + 1;
}

/* The chunks an attention op of the split launches: the split's count, at most what its
 * context holds; 0 for a batch too large for the split kernel. Chunks past a row's position
 * exit at once, so the grid does not depend on the positions. */
static int hx_hip_op_chunks(const struct hx_hip_ctx *c, const struct hx_op *op)
{
    if (op->desc.kind != HX_OP_ATTN || op->dst.n_rows > HX_HIP_GEMV_MAX_ROWS) return 0;
    const int64_t ctx = (op->desc.p.attn.n_ctx + HX_HIP_ATTN_CHUNK - 1) / HX_HIP_ATTN_CHUNK;
    return (int)HX_MIN((int64_t)c->attn_chunks, ctx);
}

/* Part i of a fused weight with a tensor scale per part, as a weight of its own. */
static hx_hip_weight hx_hip_part(const hx_hip_weight *w, int i)
{
    hx_hip_weight p = *w;
    p.d = (uint8_t *)w->d + (size_t)w->part_row[i] * w->row_bytes;
    p.n_rows = w->part_row[i + 1] - w->part_row[i];
    p.ts = w->part_ts[i];
    p.n_parts = 0;
    return p;
}

static hipError_t hx_hip_matmul_w(struct hx_hip_ctx *c, const struct hx_op *op,
                                  const hx_hip_weight *w, float *y, bool quantized);

/* The kernel path (hip-mma.h HX_HIP_TC_*) of the device's prefill GEMM for weight type t:
 * mma takes int8 where hx_hip_tc_int8 says, f16 elsewhere; F32 and BF16 take the float-weight
 * mma paths (3xTF32, split bf16) where the device has them (d->gemm_float), else SIMT. */
static int hx_hip_gemm_path(const struct hx_hip_dev *d, enum hx_dtype t)
{
    if (t == HX_DTYPE_F32 || t == HX_DTYPE_BF16) {
        if (!d->gemm_float) return HX_HIP_TC_SIMT;
        return t == HX_DTYPE_F32 ? HX_HIP_TC_MMA_TF32 : HX_HIP_TC_MMA_BF16;
    }
    switch (d->gemm) {
    case HX_HIP_GEMM_MMA: return hx_hip_tc_int8(t) ? HX_HIP_TC_MMA_S8 : HX_HIP_TC_MMA_F16;
    case HX_HIP_GEMM_MMA_F16: return HX_HIP_TC_MMA_F16;
    case HX_HIP_GEMM_WMMA: return HX_HIP_TC_WMMA_F16;
    /* AMD WMMA beyond RDNA3's f16 */
    case HX_HIP_GEMM_WMMA_I8:
        return hx_hip_tc_int8(t) ? (int)HX_HIP_TC_WMMA_I8 : HX_HIP_TC_WMMA_F16;
    case HX_HIP_GEMM_WMMA12: return hx_hip_tc_int8(t) ? HX_HIP_TC_WMMA12_I8 : HX_HIP_TC_WMMA12_F16;
    case HX_HIP_GEMM_WMMA12_F16: return HX_HIP_TC_WMMA12_F16;
    default: return HX_HIP_TC_SIMT;
    }
}
static bool hx_hip_gemm_int8(const struct hx_hip_dev *d, enum hx_dtype t)
{
    return hx_hip_tc_int8_path(hx_hip_gemm_path(d, t));
}

/* One prefill GEMM launch on kernel path `path` (only the paths type T has are instantiated). */
template <int T>
static hipError_t hx_hip_gemm_launch(int path, dim3 g, hipStream_t s, const uint8_t *W,
                                     int64_t row_bytes, int64_t N, int64_t K, const float *x,
                                     int64_t xs, const struct hx_hip_ctx *c, int64_t n, float *y,
                                     int64_t ys, float scale, int kvec, float ts)
{
    const int8_t *aq = c->aq;
    const float2 *ad = c->ad;
    if constexpr (T != HX_DTYPE_F32 && T != HX_DTYPE_BF16) {
        if (path == HX_HIP_TC_MMA_F16)
            return hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_MMA_F16>, g, dim3(256), s, W,
                                 row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
        if (path == HX_HIP_TC_WMMA_F16)
            return hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_WMMA_F16>, g, dim3(256), s, W,
                                 row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
        if constexpr (hx_hip_tc_int8(T))
            if (path == HX_HIP_TC_MMA_S8)
                return hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_MMA_S8>, g, dim3(256), s, W,
                                     row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
        /* AMD WMMA beyond RDNA3's f16 (hx_hip_gemm_wmma) */
        if (path == HX_HIP_TC_WMMA12_F16)
            return hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA12_F16>, g, dim3(256), s, W,
                                 row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
        if constexpr (hx_hip_tc_int8(T)) {
            if (path == HX_HIP_TC_WMMA_I8)
                return hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA_I8>, g, dim3(256), s, W,
                                     row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
            if (path == HX_HIP_TC_WMMA12_I8)
                return hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA12_I8>, g, dim3(256), s, W,
                                     row_bytes, N, K, x, xs, aq, ad, n, y, ys, scale, kvec, ts);
        }
    }
    if constexpr (T == HX_DTYPE_F32)
        if (path == HX_HIP_TC_MMA_TF32)
            return hx_hip_launch(hx_hip_gemm_tcf<T, HX_HIP_TC_MMA_TF32>, g, dim3(256), s, W,
                                 row_bytes, N, K, x, xs, n, y, ys, scale, kvec, ts);
    if constexpr (T == HX_DTYPE_BF16)
        if (path == HX_HIP_TC_MMA_BF16)
            return hx_hip_launch(hx_hip_gemm_tcf<T, HX_HIP_TC_MMA_BF16>, g, dim3(256), s, W,
                                 row_bytes, N, K, x, xs, n, y, ys, scale, kvec, ts);
    return hx_hip_launch(hx_hip_gemm<T>, g, dim3(256), s, W, row_bytes, N, K, x, xs, n, y, ys,
                         scale, kvec, ts);
}

/* A fused weight with a tensor scale per part runs part by part: each part's rows computed as
 * they were unfused, so the same bits (the activations quantized once). */
static hipError_t hx_hip_matmul(struct hx_hip_ctx *c, const struct hx_op *op)
{
    const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
    float *y = HX_HIP_PTR(op->dst);
    if (w->n_parts <= 0) return hx_hip_matmul_w(c, op, w, y, false);
    hipError_t e = hipSuccess;
    for (int i = 0; i < w->n_parts && e == hipSuccess; i++) {
        const hx_hip_weight p = hx_hip_part(w, i);
        e = hx_hip_matmul_w(c, op, &p, y + w->part_row[i], i > 0);
    }
    return e;
}

/* quantized: the activations are already in c->aq / c->ad (a later part of a fused weight) */
static hipError_t hx_hip_matmul_w(struct hx_hip_ctx *c, const struct hx_op *op,
                                  const hx_hip_weight *w, float *y, bool quantized)
{
    const float *x = HX_HIP_PTR(op->src[0]);
    const int64_t xs = HX_HIP_STRIDE(op->src[0]), ys = HX_HIP_STRIDE(op->dst), n = op->dst.n_rows,
                  K = w->n_cols;
    hipStream_t s = c->d->stream;
    hipError_t e = hipSuccess;
    if (n > HX_HIP_GEMV_ROWS_MAX) {
        const dim3 g((unsigned)((w->n_rows + HX_HIP_BN - 1) / HX_HIP_BN),
                     (unsigned)((n + HX_HIP_BM - 1) / HX_HIP_BM));
        const uint8_t *W = (const uint8_t *)w->d;
        const int kvec = K % 8 == 0;
        const int path = hx_hip_gemm_path(c->d, w->type);
        if (hx_hip_tc_int8_path(path) && !quantized) {
            const dim3 qg((unsigned)((K / 32 + 7) / 8), hx_hip_rows_grid(n));
            e = hx_hip_launch(hx_hip_quantize_q8, qg, dim3(256), s, x, xs, K, (int)n, c->aq, c->ad);
            c->n_launch++;
            if (e != hipSuccess) return e;
        }
#define HX_HIP_G(T)                                                                                \
    e = hx_hip_gemm_launch<T>(path, g, s, W, (int64_t)w->row_bytes, w->n_rows, K, x, xs, c, n, y,  \
                              ys, w->scale, kvec, w->ts)
        HX_HIP_DISPATCH(w->type, HX_HIP_G)
#undef HX_HIP_G
        c->n_launch++;
        return e;
    }
    const hx_hip_gemv_w gw = {(const uint8_t *)w->d, (int64_t)w->row_bytes, w->n_rows, K,
                              w->scale, w->ts};
    const int n_sm = c->d->n_sm;
    if (hx_hip_is_float(w->type)) {
        for (int64_t r0 = 0; r0 < n && e == hipSuccess; r0 += HX_HIP_GEMV_MAX_ROWS) {
            const int nr = (int)HX_MIN(n - r0, (int64_t)HX_HIP_GEMV_MAX_ROWS);
            const float *xr = x + r0 * xs;
            float *yr = y + r0 * ys;
#define HX_HIP_F(T) hx_hip_gemv_f_any<T>(s, gw, xr, xs, nr, yr, ys, c->part, n_sm, &c->n_launch)
            if (w->type == HX_DTYPE_F32) e = HX_HIP_F(HX_DTYPE_F32);
            else if (w->type == HX_DTYPE_F16) e = HX_HIP_F(HX_DTYPE_F16);
            else e = HX_HIP_F(HX_DTYPE_BF16);
#undef HX_HIP_F
        }
        return e;
    }
    /* Quantize all n rows once, then one GEMV per group of up to 8 rows. */
    const dim3 qg((unsigned)((K / 32 + 7) / 8), (unsigned)n);
    if (!quantized) {
        e = hx_hip_launch(hx_hip_quantize_q8, qg, dim3(256), s, x, xs, K, (int)n, c->aq, c->ad);
        c->n_launch++;
    }
    for (int64_t r0 = 0; r0 < n && e == hipSuccess; r0 += HX_HIP_GEMV_MAX_ROWS) {
        const hx_hip_act a = {c->aq + r0 * K, c->ad + r0 * (K / 32), K,
                              (int)HX_MIN(n - r0, (int64_t)HX_HIP_GEMV_MAX_ROWS)};
        float *yr = y + r0 * ys;
#define HX_HIP_Q(T) e = hx_hip_gemv_q_launch<T>(s, gw, a, yr, ys, c->part, n_sm, &c->n_launch)
        switch (w->type) {
        case HX_DTYPE_Q8_0: HX_HIP_Q(HX_DTYPE_Q8_0); break;
        case HX_DTYPE_Q4_0: HX_HIP_Q(HX_DTYPE_Q4_0); break;
        case HX_DTYPE_Q4_K: HX_HIP_Q(HX_DTYPE_Q4_K); break;
        case HX_DTYPE_Q6_K: HX_HIP_Q(HX_DTYPE_Q6_K); break;
        case HX_DTYPE_TQ1_0: HX_HIP_Q(HX_DTYPE_TQ1_0); break;
        case HX_DTYPE_TQ2_0: HX_HIP_Q(HX_DTYPE_TQ2_0); break;
        case HX_DTYPE_Q1_0: HX_HIP_Q(HX_DTYPE_Q1_0); break;
        case HX_DTYPE_Q2_0: HX_HIP_Q(HX_DTYPE_Q2_0); break;
        case HX_DTYPE_I2_S: HX_HIP_Q(HX_DTYPE_I2_S); break;
        default: break;
        }
#undef HX_HIP_Q
    }
    return e;
}

static hipError_t hx_hip_rope_op(struct hx_hip_ctx *c, const struct hx_op *op)
{
    const struct hx_op_desc *de = &op->desc;
    hipStream_t s = c->d->stream;
    const int64_t n = op->dst.n_rows;
    float *y = HX_HIP_PTR(op->dst);
    const int64_t ys = HX_HIP_STRIDE(op->dst);
    hipError_t e = hipSuccess;
    if (y != HX_HIP_PTR(op->src[0]) || ys != HX_HIP_STRIDE(op->src[0])) {
        const int64_t cols = op->src[0].n_cols;
        e = hx_hip_launch(
            hx_hip_copy_rows,
            dim3((unsigned)HX_MIN((cols + 255) / 256, (int64_t)1024), hx_hip_rows_grid(n)),
            dim3(256), s, (const float *)HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]), y, ys,
            n, cols);
        c->n_launch++;
    }
    const hx_hip_weight *f = (const hx_hip_weight *)op->aux_handle;
    const float theta_scale =
        powf(de->p.rope.base, -2.0f / (float)de->p.rope.n_rot); /* host powf, as ref.c */
    const int pairs = de->p.rope.n_rot / 2;
    if (e == hipSuccess)
        e = hx_hip_launch(hx_hip_rope, dim3((unsigned)((pairs + 127) / 128), hx_hip_rows_grid(n)),
                          dim3(128), s, y, ys, n, de->p.rope.n_head, de->p.rope.head_dim,
                          de->p.rope.n_rot, theta_scale, de->p.rope.freq_scale,
                          de->p.rope.mode == HX_ROPE_NEOX ? 1 : 0,
                          (const float *)(op->aux && f ? f->d : NULL), c->pos);
    c->n_launch++;
    return e;
}

static hipError_t hx_hip_attn_op(struct hx_hip_ctx *c, const struct hx_op *op)
{
    const struct hx_op_desc *de = &op->desc;
    hipStream_t s = c->d->stream;
    const int64_t n = op->dst.n_rows, width = (int64_t)de->p.attn.n_head_kv * de->p.attn.head_dim;
    hipError_t e = hx_hip_launch(
        hx_hip_kv_store,
        dim3((unsigned)HX_MIN((width + 255) / 256, (int64_t)1024), hx_hip_rows_grid(n)), dim3(256),
        s, (const float *)HX_HIP_PTR(op->src[1]), HX_HIP_STRIDE(op->src[1]),
        (const float *)HX_HIP_PTR(op->src[2]), HX_HIP_STRIDE(op->src[2]), HX_HIP_PTR(op->k_cache),
        HX_HIP_STRIDE(op->k_cache), HX_HIP_PTR(op->v_cache), HX_HIP_STRIDE(op->v_cache), width, n,
        c->pos, c->seq, (int64_t)de->p.attn.n_ctx);
    c->n_launch += 2;
    if (e != hipSuccess) return e;
    const int mode = c->d->attn;
    if (hx_hip_attn_flash_ok(de->p.attn.head_dim) &&
        (mode == HX_HIP_ATTN_FLASH || (mode == HX_HIP_ATTN_AUTO && n >= HX_HIP_FA_MIN_ROWS))) {
        const int64_t tiles = (n + HX_HIP_FA_BR - 1) / HX_HIP_FA_BR;
        return hx_hip_launch(
            hx_hip_attn_flash, dim3((unsigned)de->p.attn.n_head, hx_hip_rows_grid(tiles)),
            dim3(HX_HIP_FA_THREADS), s, (const float *)HX_HIP_PTR(op->src[0]),
            HX_HIP_STRIDE(op->src[0]), (const float *)HX_HIP_PTR(op->k_cache),
            HX_HIP_STRIDE(op->k_cache), (const float *)HX_HIP_PTR(op->v_cache),
            HX_HIP_STRIDE(op->v_cache), HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst),
            de->p.attn.n_head, de->p.attn.n_head_kv, de->p.attn.head_dim, de->p.attn.scale,
            (int64_t)de->p.attn.n_ctx, n, c->pos, c->seq);
    }
    const int n_chunk = hx_hip_op_chunks(c, op);
    if (n_chunk) {
        /* the parts reuse the int8 activation scratch: the stream orders the two uses */
        float *part = (float *)c->aq;
        e = hx_hip_launch(hx_hip_attn_part,
                          dim3((unsigned)de->p.attn.n_head, (unsigned)n_chunk, (unsigned)n),
                          dim3(32 * HX_HIP_ATTN_WARPS), s, (const float *)HX_HIP_PTR(op->src[0]),
                          HX_HIP_STRIDE(op->src[0]), (const float *)HX_HIP_PTR(op->k_cache),
                          HX_HIP_STRIDE(op->k_cache), (const float *)HX_HIP_PTR(op->v_cache),
                          HX_HIP_STRIDE(op->v_cache), part, de->p.attn.n_head,
                          de->p.attn.n_head_kv, de->p.attn.head_dim, de->p.attn.scale,
                          (int64_t)de->p.attn.n_ctx, n_chunk, c->pos, c->seq);
        c->n_launch++;
        if (e != hipSuccess) return e;
        return hx_hip_launch(hx_hip_attn_combine, dim3((unsigned)de->p.attn.n_head, (unsigned)n),
                             dim3(128), s, (const float *)part, HX_HIP_PTR(op->dst),
                             HX_HIP_STRIDE(op->dst), de->p.attn.n_head, de->p.attn.head_dim,
                             n_chunk);
    }
    return hx_hip_launch(hx_hip_attn, dim3((unsigned)de->p.attn.n_head, hx_hip_rows_grid(n)),
                         dim3(32 * HX_HIP_ATTN_WARPS), s, (const float *)HX_HIP_PTR(op->src[0]),
                         HX_HIP_STRIDE(op->src[0]), (const float *)HX_HIP_PTR(op->k_cache),
                         HX_HIP_STRIDE(op->k_cache), (const float *)HX_HIP_PTR(op->v_cache),
                         HX_HIP_STRIDE(op->v_cache), HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst),
                         de->p.attn.n_head, de->p.attn.n_head_kv, de->p.attn.head_dim,
                         de->p.attn.scale, (int64_t)de->p.attn.n_ctx, n, c->pos, c->seq);
}

static hipError_t hx_hip_op(struct hx_hip_ctx *c, const struct hx_op *op)
{
    hipStream_t s = c->d->stream;
    const int64_t n = op->dst.n_rows;
    if (n <= 0) return hipSuccess;
    const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
    hipError_t e = hipSuccess;
    switch (op->desc.kind) {
    case HX_OP_MATMUL: return hx_hip_matmul(c, op);
    case HX_OP_EMBED: {
        const dim3 g((unsigned)HX_MIN((w->n_cols + 2047) / 2048, (int64_t)1024),
                     hx_hip_rows_grid(n));
#define HX_HIP_E(T)                                                                                \
    e = hx_hip_launch(hx_hip_embed<T>, g, dim3(256), s, (const uint8_t *)w->d,                     \
                      (int64_t)w->row_bytes, w->n_cols, c->tok, n, HX_HIP_PTR(op->dst),            \
                      HX_HIP_STRIDE(op->dst), w->ts)
        HX_HIP_DISPATCH(w->type, HX_HIP_E)
#undef HX_HIP_E
        c->n_launch++;
        return e;
    }
    case HX_OP_RMS_NORM: {
        const int64_t cols = op->src[0].n_cols,
                      g = op->desc.p.norm.group > 0 ? op->desc.p.norm.group : cols;
        c->n_launch++;
        return hx_hip_launch(
            hx_hip_rms_norm, dim3((unsigned)HX_MIN(cols / g, (int64_t)65535), hx_hip_rows_grid(n)),
            dim3(256), s, (const float *)HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]),
            HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst),
            (const float *)(op->weight && w ? w->d : NULL), g, cols / g, n, op->desc.p.norm.eps);
    }
    case HX_OP_ROPE: return hx_hip_rope_op(c, op);
    case HX_OP_ATTN: return hx_hip_attn_op(c, op);
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD: {
        const int kind = op->desc.kind == HX_OP_ADD      ? HX_HIP_EW_ADD
                         : op->desc.kind == HX_OP_SWIGLU ? HX_HIP_EW_SWIGLU
                                                         : HX_HIP_EW_RELU2;
        const int64_t f = op->dst.n_cols;
        c->n_launch++;
        return hx_hip_launch(
            hx_hip_eltwise,
            dim3((unsigned)HX_MIN((f + 255) / 256, (int64_t)1024), hx_hip_rows_grid(n)), dim3(256),
            s, kind, (const float *)HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]),
            (const float *)HX_HIP_PTR(op->src[1]), HX_HIP_STRIDE(op->src[1]), HX_HIP_PTR(op->dst),
            HX_HIP_STRIDE(op->dst), n, f);
    }
    default: return hipSuccess; /* refused by hx_hip_check_op */
    }
}
