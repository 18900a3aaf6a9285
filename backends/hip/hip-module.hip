/*
 * hip-module.hip — the device module: runtime calls (one stream and one completion event per
 * device), buffers, weight upload, and run(), which enqueues a split's kernels asynchronously.
 * Built by hipcc as libhx-hip-amd.so and by nvcc (-x cu, hip-compat.h) as libhx-hip-cuda.so.
 * Every runtime failure is returned as HX_E_DEVICE / HX_E_NOMEM with the native error name.
 */
#include <stdio.h>
#include <string.h>

#include "hip-kernels.h"
#include "hip-module.h"

static struct hx_hip_host hx_hip_h;

struct hx_hip_dev {
    int idx;
    hipStream_t stream;
    hipEvent_t done;
    void *scratch;          /* row metadata + int8 activations */
    size_t scratch_bytes;
};
struct hx_hip_weight {
    void *d;
    enum hx_dtype type;
    int64_t n_rows, n_cols;
    size_t row_bytes;
    float scale;
};

static int hx_hip_fail(hipError_t e, const char *what, char *err, size_t len)
{
    snprintf(err, len, "%s: %s (%s)", what, hipGetErrorName(e), hipGetErrorString(e));
    return e == hipErrorOutOfMemory ? HX_E_NOMEM : HX_E_DEVICE;
}
#define HX_HIP_CHECK(call)                                                                   \
    do {                                                                                     \
        hipError_t hx_e_ = (call);                                                           \
        if (hx_e_ != hipSuccess) return hx_hip_fail(hx_e_, #call, err, len);                 \
    } while (0)

static int hx_hip_device_count(int *n, char *err, size_t len)
{
    *n = 0;
    hipError_t e = hipGetDeviceCount(n);
    if (e == hipErrorNoDevice || (e == hipSuccess && *n == 0)) {
        *n = 0;
        snprintf(err, len, "no device");
        return HX_OK;
    }
    if (e != hipSuccess) {
        *n = 0;
        return hx_hip_fail(e, "hipGetDeviceCount", err, len);
    }
    return HX_OK;
}

static int hx_hip_device_info(int idx, struct hx_device_info *out, char *err, size_t len)
{
    hipDeviceProp_t p;
    HX_HIP_CHECK(hipGetDeviceProperties(&p, idx));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    snprintf(out->description, sizeof out->description, "%s, cc %d.%d, %d CUs, %.0f GiB",
             HX_HIP_RUNTIME, p.major, p.minor, p.multiProcessorCount,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    out->kind = p.integrated ? HX_DEVICE_IGPU : HX_DEVICE_GPU;
    out->memory_total_bytes = p.totalGlobalMem;
    out->alignment_bytes = 256;
    out->unified_memory = p.integrated != 0;
    out->weight_types = (1u << HX_DTYPE_COUNT) - 1;
    return HX_OK;
}

static int hx_hip_init(int idx, void **mdev, char *err, size_t len)
{
    *mdev = NULL;
    struct hx_hip_dev *d = (struct hx_hip_dev *)hx_hip_h.malloc_fn(sizeof *d);
    if (!d) return HX_E_NOMEM;
    memset(d, 0, sizeof *d);
    d->idx = idx;
    hipError_t e = hipSetDevice(idx);
    if (e == hipSuccess) e = hipStreamCreateWithFlags(&d->stream, hipStreamNonBlocking);
    if (e == hipSuccess) e = hipEventCreateWithFlags(&d->done, hipEventDisableTiming);
    if (e != hipSuccess) {
        int st = hx_hip_fail(e, "init", err, len);
        if (d->stream) hipStreamDestroy(d->stream);
        hx_hip_h.free_fn(d);
        return st;
    }
    *mdev = d;
    return HX_OK;
}

static void hx_hip_fini(void *mdev)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    if (!d) return;
    hipSetDevice(d->idx);
    hipStreamSynchronize(d->stream);
    if (d->scratch) hipFree(d->scratch);
    hipEventDestroy(d->done);
    hipStreamDestroy(d->stream);
    hx_hip_h.free_fn(d);
}

static int hx_hip_buffer_alloc(void *mdev, size_t nbytes, void **dptr, char *err, size_t len)
{
    hipSetDevice(((struct hx_hip_dev *)mdev)->idx);
    HX_HIP_CHECK(hipMalloc(dptr, nbytes ? nbytes : 1));
    return HX_OK;
}
static void hx_hip_buffer_free(void *mdev, void *dptr)
{
    if (dptr) hipFree(dptr);
}
static int hx_hip_buffer_write(void *mdev, void *dptr, size_t off, const void *src, size_t n,
                               char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_CHECK(hipMemcpyAsync((char *)dptr + off, src, n, hipMemcpyHostToDevice, d->stream));
    HX_HIP_CHECK(hipStreamSynchronize(d->stream));
    return HX_OK;
}
static int hx_hip_buffer_read(void *mdev, const void *dptr, size_t off, void *dst, size_t n,
                              char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_CHECK(hipMemcpyAsync(dst, (const char *)dptr + off, n, hipMemcpyDeviceToHost, d->stream));
    HX_HIP_CHECK(hipStreamSynchronize(d->stream));
    return HX_OK;
}
static int hx_hip_copy(void *mdev, void *dst, const void *src, size_t n, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_CHECK(hipMemcpyAsync(dst, src, n, hipMemcpyDeviceToDevice, d->stream));
    return HX_OK;
}

static int hx_hip_weight_prepare(void *mdev, const struct hx_weight *w, void **handle, char *err,
                                 size_t len)
{
    struct hx_hip_weight *h = (struct hx_hip_weight *)hx_hip_h.malloc_fn(sizeof *h);
    if (!h) return HX_E_NOMEM;
    memset(h, 0, sizeof *h);
    h->type = w->type, h->n_rows = w->n_rows, h->n_cols = w->n_cols, h->scale = w->scale;
    h->row_bytes = w->n_rows ? w->nbytes / (size_t)w->n_rows : 0;
    int st = hx_hip_buffer_alloc(mdev, w->nbytes, &h->d, err, len);
    if (st == HX_OK) st = hx_hip_buffer_write(mdev, h->d, 0, w->data, w->nbytes, err, len);
    if (st != HX_OK) {
        if (h->d) hipFree(h->d);
        hx_hip_h.free_fn(h);
        return st;
    }
    *handle = h;
    return HX_OK;
}
static void hx_hip_weight_release(void *mdev, void *handle)
{
    struct hx_hip_weight *h = (struct hx_hip_weight *)handle;
    if (!h) return;
    hipFree(h->d);
    hx_hip_h.free_fn(h);
}

static bool hx_hip_supports(const struct hx_op_desc *op)
{
    switch (op->kind) {
    case HX_OP_MATMUL:
    case HX_OP_EMBED:
        return op->wtype < HX_DTYPE_COUNT;
    case HX_OP_RMS_NORM:
        return op->p.norm.group > 0 && op->n_in % op->p.norm.group == 0;
    case HX_OP_ROPE:
        return op->p.rope.n_rot % 2 == 0 && op->p.rope.n_rot <= op->p.rope.head_dim;
    case HX_OP_ATTN:
        return op->p.attn.head_dim <= HX_HIP_HD_MAX && op->p.attn.n_head_kv > 0 &&
               op->p.attn.n_head % op->p.attn.n_head_kv == 0;
    default:
        return op->kind < HX_OP_KIND_COUNT;
    }
}

/* ---- run ------------------------------------------------------------------------------- */

#define HX_HIP_PTR(t) ((float *)((char *)(t).buf->ctx + (t).offset_bytes))
#define HX_HIP_STRIDE(t) ((int64_t)((t).row_stride_bytes / sizeof(float)))
#define HX_HIP_DISPATCH(type, F)                                                              \
    switch (type) {                                                                           \
    case HX_DTYPE_F32: F(HX_DTYPE_F32); break;                                                \
    case HX_DTYPE_F16: F(HX_DTYPE_F16); break;                                                \
    case HX_DTYPE_BF16: F(HX_DTYPE_BF16); break;                                              \
    case HX_DTYPE_Q8_0: F(HX_DTYPE_Q8_0); break;                                              \
    case HX_DTYPE_Q4_0: F(HX_DTYPE_Q4_0); break;                                              \
    case HX_DTYPE_Q4_K: F(HX_DTYPE_Q4_K); break;                                              \
    case HX_DTYPE_Q6_K: F(HX_DTYPE_Q6_K); break;                                              \
    case HX_DTYPE_TQ1_0: F(HX_DTYPE_TQ1_0); break;                                            \
    case HX_DTYPE_TQ2_0: F(HX_DTYPE_TQ2_0); break;                                            \
    case HX_DTYPE_Q1_0: F(HX_DTYPE_Q1_0); break;                                              \
    default: break;                                                                           \
    }

static bool hx_hip_is_float(enum hx_dtype t)
{
    return t == HX_DTYPE_F32 || t == HX_DTYPE_F16 || t == HX_DTYPE_BF16;
}

template <int T>
static void hx_hip_launch_gemv_q(hipStream_t s, const hx_hip_weight *w, hx_hip_act a, float *y,
                                 int64_t ys)
{
    dim3 g((unsigned)((w->n_rows + HX_HIP_GEMV_WARPS - 1) / HX_HIP_GEMV_WARPS)), b(32 * HX_HIP_GEMV_WARPS);
    const uint8_t *W = (const uint8_t *)w->d;
    int64_t rb = (int64_t)w->row_bytes, N = w->n_rows;
    if (a.n <= 1) hx_hip_gemv_q<T, 1><<<g, b, 0, s>>>(W, rb, N, a, y, ys, w->scale);
    else if (a.n <= 2) hx_hip_gemv_q<T, 2><<<g, b, 0, s>>>(W, rb, N, a, y, ys, w->scale);
    else if (a.n <= 4) hx_hip_gemv_q<T, 4><<<g, b, 0, s>>>(W, rb, N, a, y, ys, w->scale);
    else hx_hip_gemv_q<T, 8><<<g, b, 0, s>>>(W, rb, N, a, y, ys, w->scale);
}
template <int T, bool V>
static void hx_hip_launch_gemv_f(hipStream_t s, const hx_hip_weight *w, const float *x, int64_t xs,
                                 int n, float *y, int64_t ys)
{
    dim3 g((unsigned)((w->n_rows + HX_HIP_GEMV_WARPS - 1) / HX_HIP_GEMV_WARPS)), b(32 * HX_HIP_GEMV_WARPS);
    const uint8_t *W = (const uint8_t *)w->d;
    int64_t rb = (int64_t)w->row_bytes, N = w->n_rows, K = w->n_cols;
    if (n <= 1) hx_hip_gemv_f<T, 1, V><<<g, b, 0, s>>>(W, rb, N, K, x, xs, n, y, ys, w->scale);
    else if (n <= 2) hx_hip_gemv_f<T, 2, V><<<g, b, 0, s>>>(W, rb, N, K, x, xs, n, y, ys, w->scale);
    else if (n <= 4) hx_hip_gemv_f<T, 4, V><<<g, b, 0, s>>>(W, rb, N, K, x, xs, n, y, ys, w->scale);
    else hx_hip_gemv_f<T, 8, V><<<g, b, 0, s>>>(W, rb, N, K, x, xs, n, y, ys, w->scale);
}

#define HX_HIP_GEMV_MAX_ROWS 8

static size_t hx_hip_scratch_need(const struct hx_split *sp)
{
    size_t need = 3 * (size_t)sp->n_rows * sizeof(int32_t) + 256, q8 = 0;
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        if (op->desc.kind != HX_OP_MATMUL || hx_hip_is_float(op->weight->type)) continue;
        size_t n = (size_t)HX_MIN(op->src[0].n_rows, HX_HIP_GEMV_MAX_ROWS), K = (size_t)op->weight->n_cols;
        q8 = HX_MAX(q8, n * K + n * (K / 32) * sizeof(float2) + 256);
    }
    return need + q8;
}

static void hx_hip_matmul(struct hx_hip_dev *d, const struct hx_op *op, int8_t *aq, float2 *ad)
{
    const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
    const float *x = HX_HIP_PTR(op->src[0]);
    float *y = HX_HIP_PTR(op->dst);
    const int64_t xs = HX_HIP_STRIDE(op->src[0]), ys = HX_HIP_STRIDE(op->dst), n = op->src[0].n_rows;
    const int64_t K = w->n_cols;
    hipStream_t s = d->stream;
    for (int64_t r0 = 0; n <= HX_HIP_GEMV_MAX_ROWS * 4 && r0 < n; r0 += HX_HIP_GEMV_MAX_ROWS) {
        const int nr = (int)HX_MIN(n - r0, HX_HIP_GEMV_MAX_ROWS);
        const float *xr = x + r0 * xs;
        float *yr = y + r0 * ys;
        if (hx_hip_is_float(w->type)) {
            bool vec = K % 8 == 0 && w->row_bytes % 16 == 0 && ((uintptr_t)xr % 16) == 0 && xs % 4 == 0;
#define HX_HIP_F(T) (vec ? hx_hip_launch_gemv_f<T, true>(s, w, xr, xs, nr, yr, ys) \
                         : hx_hip_launch_gemv_f<T, false>(s, w, xr, xs, nr, yr, ys))
            if (w->type == HX_DTYPE_F32) HX_HIP_F(HX_DTYPE_F32);
            else if (w->type == HX_DTYPE_F16) HX_HIP_F(HX_DTYPE_F16);
            else HX_HIP_F(HX_DTYPE_BF16);
#undef HX_HIP_F
            continue;
        }
        dim3 qg((unsigned)((K / 32 + 7) / 8), (unsigned)nr);
        hx_hip_quantize_q8<<<qg, 256, 0, s>>>(xr, xs, K, nr, aq, ad);
        hx_hip_act a = {aq, ad, K, nr};
#define HX_HIP_Q(T) hx_hip_launch_gemv_q<T>(s, w, a, yr, ys)
        switch (w->type) {
        case HX_DTYPE_Q8_0: HX_HIP_Q(HX_DTYPE_Q8_0); break;
        case HX_DTYPE_Q4_0: HX_HIP_Q(HX_DTYPE_Q4_0); break;
        case HX_DTYPE_Q4_K: HX_HIP_Q(HX_DTYPE_Q4_K); break;
        case HX_DTYPE_Q6_K: HX_HIP_Q(HX_DTYPE_Q6_K); break;
        case HX_DTYPE_TQ1_0: HX_HIP_Q(HX_DTYPE_TQ1_0); break;
        case HX_DTYPE_TQ2_0: HX_HIP_Q(HX_DTYPE_TQ2_0); break;
        case HX_DTYPE_Q1_0: HX_HIP_Q(HX_DTYPE_Q1_0); break;
        default: break;
        }
#undef HX_HIP_Q
    }
    if (n <= HX_HIP_GEMV_MAX_ROWS * 4) return;
    dim3 g((unsigned)((w->n_rows + HX_HIP_BN - 1) / HX_HIP_BN), (unsigned)((n + HX_HIP_BM - 1) / HX_HIP_BM));
    const uint8_t *W = (const uint8_t *)w->d;
#define HX_HIP_G(T) hx_hip_gemm<T><<<g, 256, 0, s>>>(W, (int64_t)w->row_bytes, w->n_rows, K, x, xs, n, y, ys, w->scale)
    HX_HIP_DISPATCH(w->type, HX_HIP_G)
#undef HX_HIP_G
}

static void hx_hip_op(struct hx_hip_dev *d, const struct hx_split *sp, const struct hx_op *op,
                      const int32_t *tok, const int32_t *pos, const int32_t *seq, int8_t *aq,
                      float2 *ad)
{
    hipStream_t s = d->stream;
    const int64_t n = op->dst.n_rows;
    const unsigned ny = (unsigned)HX_MIN(n, 65535);
    switch (op->desc.kind) {
    case HX_OP_MATMUL:
        hx_hip_matmul(d, op, aq, ad);
        break;
    case HX_OP_EMBED: {
        const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
        dim3 g((unsigned)((w->n_cols + 255) / 256), (unsigned)n);
#define HX_HIP_E(T) hx_hip_embed<T><<<g, 256, 0, s>>>((const uint8_t *)w->d, (int64_t)w->row_bytes, w->n_rows, w->n_cols, tok, HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst))
        HX_HIP_DISPATCH(w->type, HX_HIP_E)
#undef HX_HIP_E
        break;
    }
    case HX_OP_RMS_NORM: {
        const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
        const int64_t g = op->desc.p.norm.group;
        dim3 grid((unsigned)(op->src[0].n_cols / g), (unsigned)n);
        hx_hip_rms_norm<<<grid, 256, 0, s>>>(HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]),
                                             HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst),
                                             (const float *)w->d, g, op->desc.p.norm.eps);
        break;
    }
    case HX_OP_ROPE: {
        const struct hx_op_desc *de = &op->desc;
        const hx_hip_weight *f = (const hx_hip_weight *)op->aux_handle;
        int64_t tot = n * de->p.rope.n_head;
        hx_hip_rope<<<(unsigned)((tot + 127) / 128), 128, 0, s>>>(
            HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]), HX_HIP_PTR(op->dst),
            HX_HIP_STRIDE(op->dst), n, de->p.rope.n_head, de->p.rope.head_dim, de->p.rope.n_rot,
            de->p.rope.base, de->p.rope.freq_scale, de->p.rope.mode == HX_ROPE_NEOX,
            (op->aux && f) ? (const float *)f->d : NULL, pos);
        break;
    }
    case HX_OP_ATTN: {
        const struct hx_op_desc *de = &op->desc;
        const int64_t width = (int64_t)de->p.attn.n_head_kv * de->p.attn.head_dim;
        dim3 g1((unsigned)((width + 255) / 256), (unsigned)n);
        hx_hip_kv_store<<<g1, 256, 0, s>>>(HX_HIP_PTR(op->src[1]), HX_HIP_STRIDE(op->src[1]),
                                           HX_HIP_PTR(op->src[2]), HX_HIP_STRIDE(op->src[2]),
                                           HX_HIP_PTR(op->k_cache), HX_HIP_STRIDE(op->k_cache),
                                           HX_HIP_PTR(op->v_cache), HX_HIP_STRIDE(op->v_cache),
                                           width, pos, seq, de->p.attn.n_ctx);
        dim3 g2((unsigned)de->p.attn.n_head, (unsigned)n);
        hx_hip_attn<<<g2, 32 * HX_HIP_ATTN_WARPS, 0, s>>>(
            HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]), HX_HIP_PTR(op->k_cache),
            HX_HIP_STRIDE(op->k_cache), HX_HIP_PTR(op->v_cache), HX_HIP_STRIDE(op->v_cache),
            HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst), de->p.attn.n_head, de->p.attn.n_head_kv,
            de->p.attn.head_dim, de->p.attn.scale, de->p.attn.n_ctx, pos, seq);
        break;
    }
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD: {
        int kind = op->desc.kind == HX_OP_ADD ? HX_HIP_EW_ADD
                   : op->desc.kind == HX_OP_SWIGLU ? HX_HIP_EW_SWIGLU : HX_HIP_EW_RELU2;
        const int64_t f = op->dst.n_cols;
        dim3 g((unsigned)HX_MIN((f + 255) / 256, 1024), ny);
        hx_hip_eltwise<<<g, 256, 0, s>>>(kind, HX_HIP_PTR(op->src[0]), HX_HIP_STRIDE(op->src[0]),
                                         HX_HIP_PTR(op->src[1]), HX_HIP_STRIDE(op->src[1]),
                                         HX_HIP_PTR(op->dst), HX_HIP_STRIDE(op->dst), n, f);
        break;
    }
    default:
        break;
    }
    (void)sp;
}

static int hx_hip_run(void *mdev, const struct hx_split *sp, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_CHECK(hipSetDevice(d->idx));
    size_t need = hx_hip_scratch_need(sp);
    if (need > d->scratch_bytes) {
        HX_HIP_CHECK(hipStreamSynchronize(d->stream));
        if (d->scratch) hipFree(d->scratch);
        d->scratch = NULL, d->scratch_bytes = 0;
        HX_HIP_CHECK(hipMalloc(&d->scratch, need));
        d->scratch_bytes = need;
    }
    /* The split's host arrays stay valid until synchronize returns (hx-backend.h). */
    const size_t nb = (size_t)sp->n_rows * sizeof(int32_t);
    int32_t *tok = (int32_t *)d->scratch, *pos = tok + sp->n_rows, *seq = pos + sp->n_rows;
    if (sp->tokens) HX_HIP_CHECK(hipMemcpyAsync(tok, sp->tokens, nb, hipMemcpyHostToDevice, d->stream));
    if (sp->pos) HX_HIP_CHECK(hipMemcpyAsync(pos, sp->pos, nb, hipMemcpyHostToDevice, d->stream));
    if (sp->seq) HX_HIP_CHECK(hipMemcpyAsync(seq, sp->seq, nb, hipMemcpyHostToDevice, d->stream));
    int8_t *aq = (int8_t *)d->scratch + ((3 * nb + 255) & ~(size_t)255);
    float2 *ad = NULL;
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        if (op->desc.kind == HX_OP_MATMUL) {
            size_t nr = (size_t)HX_MIN(op->src[0].n_rows, HX_HIP_GEMV_MAX_ROWS);
            ad = (float2 *)(aq + ((nr * (size_t)op->weight->n_cols + 255) & ~(size_t)255));
        }
        hx_hip_op(d, sp, op, tok, pos, seq, aq, ad);
        HX_HIP_CHECK(hipGetLastError());
    }
    HX_HIP_CHECK(hipEventRecord(d->done, d->stream));
    return HX_OK;
}

static int hx_hip_synchronize(void *mdev, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_CHECK(hipStreamSynchronize(d->stream));
    return HX_OK;
}

static const struct hx_hip_module_ops hx_hip_module = {
    HX_HIP_MODULE_ABI, sizeof(struct hx_hip_module_ops), HX_HIP_RUNTIME,
    hx_hip_device_count, hx_hip_device_info, hx_hip_init, hx_hip_fini,
    hx_hip_buffer_alloc, hx_hip_buffer_free, hx_hip_buffer_write, hx_hip_buffer_read,
    hx_hip_copy, hx_hip_weight_prepare, hx_hip_weight_release, hx_hip_supports,
    hx_hip_run, hx_hip_synchronize,
};

extern "C" __attribute__((visibility("default"))) const struct hx_hip_module_ops *
hx_hip_module_get_ops(uint32_t abi, const struct hx_hip_host *host)
{
    if (abi != HX_HIP_MODULE_ABI || !host || !host->malloc_fn || !host->free_fn) return NULL;
    hx_hip_h = *host;
    return &hx_hip_module;
}
