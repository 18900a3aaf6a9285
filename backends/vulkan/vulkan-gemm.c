/*
 * vulkan-gemm.c — weight ops of the Vulkan backend: MATMUL (decode GEMV and batched rows) and
 * EMBED, both reading the GGUF blocks in place from the uploaded weight (shaders/matmul.comp,
 * shaders/embed.comp, decoders in shaders/dequant.glsl).
 *
 * A storage-buffer binding is at most maxStorageBufferRange bytes (128 MiB on lavapipe; a
 * Qwen3 LM head is larger), so a weight is bound in chunks of whole rows and the activations
 * in chunks of whole rows; each chunk is one dispatch. Offsets are aligned down to the
 * device's binding alignment and the remainder is passed as a push constant.
 */
#include "vulkan-impl.h"

struct hx_vk_mm_push {
    uint32_t K, N, M;
    uint32_t a_off, a_stride, d_off, d_stride;
    uint32_t w_off, w_row_bytes;
    float scale;
};
_Static_assert(sizeof(struct hx_vk_mm_push) <= HX_VK_PUSH_BYTES, "push constants too large");

struct hx_vk_embed_push {
    uint32_t K, n_rows, row0, nw;
    uint32_t w_off, w_row_bytes, d_off, d_stride;
    uint32_t tok_off;
};
_Static_assert(sizeof(struct hx_vk_embed_push) <= HX_VK_PUSH_BYTES, "push constants too large");

#define HX_VK_MM_MR 4   /* activation rows per workgroup (matmul.comp MR) */
#define HX_VK_MM_NR 2   /* weight rows per workgroup (matmul.comp NR) */

static enum hx_shader_id hx_vk_mmv_shader(enum hx_dtype t)
{
    static const enum hx_shader_id ids[HX_DTYPE_COUNT] = {
        [HX_DTYPE_F32] = HX_SHADER_MMV_F32,     [HX_DTYPE_F16] = HX_SHADER_MMV_F16,
        [HX_DTYPE_BF16] = HX_SHADER_MMV_BF16,   [HX_DTYPE_Q8_0] = HX_SHADER_MMV_Q8_0,
        [HX_DTYPE_Q4_0] = HX_SHADER_MMV_Q4_0,   [HX_DTYPE_Q4_K] = HX_SHADER_MMV_Q4_K,
        [HX_DTYPE_Q6_K] = HX_SHADER_MMV_Q6_K,   [HX_DTYPE_TQ1_0] = HX_SHADER_MMV_TQ1_0,
        [HX_DTYPE_TQ2_0] = HX_SHADER_MMV_TQ2_0, [HX_DTYPE_Q1_0] = HX_SHADER_MMV_Q1_0,
    };
    return ids[t];
}

static enum hx_shader_id hx_vk_embed_shader(enum hx_dtype t)
{
    static const enum hx_shader_id ids[HX_DTYPE_COUNT] = {
        [HX_DTYPE_F32] = HX_SHADER_EMBED_F32,     [HX_DTYPE_F16] = HX_SHADER_EMBED_F16,
        [HX_DTYPE_BF16] = HX_SHADER_EMBED_BF16,   [HX_DTYPE_Q8_0] = HX_SHADER_EMBED_Q8_0,
        [HX_DTYPE_Q4_0] = HX_SHADER_EMBED_Q4_0,   [HX_DTYPE_Q4_K] = HX_SHADER_EMBED_Q4_K,
        [HX_DTYPE_Q6_K] = HX_SHADER_EMBED_Q6_K,   [HX_DTYPE_TQ1_0] = HX_SHADER_EMBED_TQ1_0,
        [HX_DTYPE_TQ2_0] = HX_SHADER_EMBED_TQ2_0, [HX_DTYPE_Q1_0] = HX_SHADER_EMBED_Q1_0,
    };
    return ids[t];
}

/* Rows of a tensor whose binding of `width` bytes per row fits in the range limit. */
static int64_t hx_vk_rows_fit(struct hx_vk_dev *d, size_t stride, size_t width)
{
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    if (width > lim) return 0;
    if (!stride) return INT64_MAX;
    return (int64_t)((lim - width) / stride) + 1;
}

static struct hx_vk_buf *hx_vk_tbuf(const struct hx_tensor_ref *t)
{
    return (struct hx_vk_buf *)t->buf->ctx;
}

int hx__vk_op_matmul(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_weight *w;
    int st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &w);
    if (st) return st;
    const struct hx_tensor_ref *a = &op->src[0], *o = &op->dst;
    int64_t K = op->weight->n_cols, N = op->weight->n_rows;
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    int64_t nc = HX_MIN(N, (int64_t)(lim / w->row_bytes));
    int64_t mc = HX_MIN(hx_vk_rows_fit(d, a->row_stride_bytes, (size_t)K * 4),
                        hx_vk_rows_fit(d, o->row_stride_bytes, (size_t)nc * 4));
    mc = HX_MIN(mc, n_rows);
    if (nc <= 0 || mc <= 0)
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "matmul %lld x %lld: rows exceed a binding",
                                   (long long)N, (long long)K);
    enum hx_shader_id sid = hx_vk_mmv_shader(op->weight->type);
    for (int64_t m0 = 0; m0 < n_rows; m0 += mc) {
        int64_t mm = HX_MIN(mc, n_rows - m0);
        for (int64_t n0 = 0; n0 < N; n0 += nc) {
            int64_t nn = HX_MIN(nc, N - n0);
            struct hx_vk_mm_push p = {
                .K = (uint32_t)K, .N = (uint32_t)nn, .M = (uint32_t)mm,
                .a_stride = (uint32_t)(a->row_stride_bytes / 4),
                .d_stride = (uint32_t)(o->row_stride_bytes / 4),
                .w_row_bytes = (uint32_t)w->row_bytes,
                .scale = op->weight->scale,
            };
            struct hx_vk_bind b[3];
            b[0] = hx__vk_bind(d, hx_vk_tbuf(a)->buf, a->offset_bytes + (size_t)m0 * a->row_stride_bytes,
                               (size_t)(mm - 1) * a->row_stride_bytes + (size_t)K * 4, &p.a_off);
            b[1] = hx__vk_bind(d, w->b.buf, (size_t)n0 * w->row_bytes, (size_t)nn * w->row_bytes,
                               &p.w_off);
            b[2] = hx__vk_bind(d, hx_vk_tbuf(o)->buf,
                               o->offset_bytes + (size_t)m0 * o->row_stride_bytes + (size_t)n0 * 4,
                               (size_t)(mm - 1) * o->row_stride_bytes + (size_t)nn * 4, &p.d_off);
            p.a_off /= 4;
            p.d_off /= 4;
            uint64_t groups = (uint64_t)((nn + HX_VK_MM_NR - 1) / HX_VK_MM_NR) *
                              (uint64_t)((mm + HX_VK_MM_MR - 1) / HX_VK_MM_MR);
            uint32_t gx, gz;
            hx__vk_grid(groups, &gx, &gz);
            if ((st = hx__vk_dispatch(dev, sid, b, 3, &p, sizeof p, gx, 1, gz))) return st;
        }
    }
    return HX_OK;
}

int hx__vk_op_embed(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_weight *w;
    int st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &w);
    if (st) return st;
    const struct hx_tensor_ref *o = &op->dst;
    int64_t K = op->weight->n_cols, N = op->weight->n_rows;
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    int64_t nc = HX_MIN(N, (int64_t)(lim / w->row_bytes));
    int64_t mc = HX_MIN(HX_MIN(hx_vk_rows_fit(d, o->row_stride_bytes, (size_t)K * 4), n_rows), 65535);
    if (nc <= 0 || mc <= 0)
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "embed: a row exceeds a binding");
    enum hx_shader_id sid = hx_vk_embed_shader(op->weight->type);
    uint32_t wg = hx__vk_wg(dev, sid);
    struct hx_vk_bind meta = hx__vk_bind(d, d->meta.buf, 0, (size_t)n_rows * 4 * 3, NULL);
    for (int64_t m0 = 0; m0 < n_rows; m0 += mc) {
        int64_t mm = HX_MIN(mc, n_rows - m0);
        for (int64_t n0 = 0; n0 < N; n0 += nc) {
            int64_t nn = HX_MIN(nc, N - n0);
            struct hx_vk_embed_push p = {
                .K = (uint32_t)K, .n_rows = (uint32_t)mm, .row0 = (uint32_t)n0,
                .nw = (uint32_t)nn, .w_row_bytes = (uint32_t)w->row_bytes,
                .d_stride = (uint32_t)(o->row_stride_bytes / 4), .tok_off = (uint32_t)m0,
            };
            struct hx_vk_bind b[4];
            b[0] = (struct hx_vk_bind){0};
            b[1] = hx__vk_bind(d, w->b.buf, (size_t)n0 * w->row_bytes, (size_t)nn * w->row_bytes,
                               &p.w_off);
            b[2] = hx__vk_bind(d, hx_vk_tbuf(o)->buf, o->offset_bytes + (size_t)m0 * o->row_stride_bytes,
                               (size_t)(mm - 1) * o->row_stride_bytes + (size_t)K * 4, &p.d_off);
            p.d_off /= 4;
            b[3] = meta;
            uint32_t gx = (uint32_t)(((uint64_t)K + 4u * wg - 1) / (4u * wg));
            if ((st = hx__vk_dispatch(dev, sid, b, 4, &p, sizeof p, gx, (uint32_t)mm, 1))) return st;
        }
    }
    return HX_OK;
}
