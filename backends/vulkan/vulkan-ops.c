/*
 * vulkan-ops.c — supports(), run(), synchronize() and the activation ops of the Vulkan
 * backend: RMS_NORM, ROPE, ATTN (KV store + attention), SWIGLU, RELU2_GLU, ADD.
 *
 * run() records the whole split into the device's one command buffer — a dispatch (or a few,
 * when a tensor has to be bound in row chunks) per op, a compute→compute barrier after each
 * op — submits it once and returns; synchronize() waits for the fence. The split's tokens,
 * positions and sequence ids are copied into a host-visible metadata buffer first (binding 3
 * of the shaders that need them). Weights the scheduler did not prepare are uploaded before
 * recording starts. A VkResult error fails the split with hx_device_set_error; DEVICE_LOST
 * marks the device so every later call fails fast (the scheduler falls back).
 */
#include <math.h>
#include <string.h>

#include "vulkan-impl.h"

struct hx_vk_norm_push {
    uint32_t g, a_off, a_stride, d_off, d_stride, gain_off;
    float eps;
};
struct hx_vk_rope_push {
    uint32_t head_dim, n_rot, a_off, a_stride, d_off, d_stride, pos_off, ff_off, has_ff;
    float theta_scale, freq_scale;
};
struct hx_vk_kv_push {
    uint32_t kv_dim, c_stride, n_ctx, k_off, k_stride, v_off, v_stride, kc_off, vc_off, pos_off,
        seq_off;
};
struct hx_vk_attn_push {
    uint32_t n_head, n_head_kv, head_dim, n_ctx, c_stride;
    uint32_t q_off, q_stride, d_off, d_stride, kc_off, vc_off, pos_off, seq_off, n_rows;
    float scale;
};
struct hx_vk_elt_push {
    uint32_t n_cols, a_off, a_stride, b_off, b_stride, d_off, d_stride;
};
_Static_assert(sizeof(struct hx_vk_norm_push) <= HX_VK_PUSH_BYTES, "push constants too large");
_Static_assert(sizeof(struct hx_vk_rope_push) <= HX_VK_PUSH_BYTES, "push constants too large");
_Static_assert(sizeof(struct hx_vk_kv_push) <= HX_VK_PUSH_BYTES, "push constants too large");
_Static_assert(sizeof(struct hx_vk_attn_push) <= HX_VK_PUSH_BYTES, "push constants too large");
_Static_assert(sizeof(struct hx_vk_elt_push) <= HX_VK_PUSH_BYTES, "push constants too large");

#define HX_VK_MAX_HEAD_DIM 256 /* attn.comp: 4 dims per thread × 64 threads, shared q */

bool hx__vk_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!d || !d->dev || d->lost) return false;
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    if (op->n_rows <= 0 || op->n_rows > INT32_MAX) return false;
    if (op->n_in <= 0 || (size_t)op->n_in * 4 > lim || (size_t)op->n_out * 4 > lim) return false;
    switch (op->kind) {
    case HX_OP_EMBED:
    case HX_OP_MATMUL: {
        if (!hx__vk_type_ok(op->wtype)) return false;
        int64_t k = op->kind == HX_OP_MATMUL ? op->n_in : op->n_out;
        size_t rb = hx_dtype_row_bytes(op->wtype, k);
        return rb && rb <= lim;
    }
    case HX_OP_RMS_NORM:
        return op->p.norm.group > 0 && op->n_in % op->p.norm.group == 0 &&
               op->n_in / op->p.norm.group <= 65535;
    case HX_OP_ROPE:
        return op->p.rope.n_head > 0 && op->p.rope.n_head <= 65535 && op->p.rope.head_dim > 0 &&
               op->p.rope.n_rot > 0 && op->p.rope.n_rot % 2 == 0 &&
               op->p.rope.n_rot <= op->p.rope.head_dim;
    case HX_OP_ATTN: {
        const __typeof__(op->p.attn) *a = &op->p.attn;
        if (a->n_head <= 0 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv) return false;
        if (a->head_dim <= 0 || a->head_dim > HX_VK_MAX_HEAD_DIM || a->n_ctx <= 0 || a->n_seq <= 0)
            return false;
        size_t cache =
            (size_t)a->n_seq * (size_t)a->n_ctx * (size_t)a->n_head_kv * (size_t)a->head_dim * 4;
        return cache <= lim &&
               (uint64_t)a->n_head * (uint64_t)op->n_rows <= UINT64_C(65535) * 65535;
    }
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD: return true;
    default: return false;
    }
}

static struct hx_vk_buf *hx_vk_tb(const struct hx_tensor_ref *t)
{
    return (struct hx_vk_buf *)t->buf->ctx;
}

/* Binding of rows [r0, r0 + n) of t (width_elems columns); *off_elems gets the shader offset. */
static struct hx_vk_bind hx_vk_rows(struct hx_vk_dev *d, const struct hx_tensor_ref *t, int64_t r0,
                                    int64_t n, int64_t width_elems, uint32_t *off_elems)
{
    uint32_t rem;
    struct hx_vk_bind b =
        hx__vk_bind(d, hx_vk_tb(t)->buf, t->offset_bytes + (size_t)r0 * t->row_stride_bytes,
                    (size_t)(n - 1) * t->row_stride_bytes + (size_t)width_elems * 4, &rem);
    *off_elems = rem / 4;
    return b;
}

/* Rows per chunk so every tensor binding fits; at most 65535 (grid y). */
static int64_t hx_vk_chunk(struct hx_vk_dev *d, const struct hx_tensor_ref *const *ts, int nt,
                           int64_t width_elems, int64_t n_rows)
{
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    int64_t mc = HX_MIN(n_rows, 65535);
    for (int i = 0; i < nt; i++) {
        size_t s = ts[i]->row_stride_bytes, w = (size_t)width_elems * 4;
        if (w > lim) return 0;
        if (s) mc = HX_MIN(mc, (int64_t)((lim - w) / s) + 1);
    }
    return mc;
}

static int hx_vk_op_norm(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_weight *g;
    int st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &g);
    if (st) return st;
    const struct hx_tensor_ref *ts[2] = {&op->src[0], &op->dst};
    int64_t cols = op->src[0].n_cols, grp = op->desc.p.norm.group;
    int64_t mc = hx_vk_chunk(d, ts, 2, cols, n_rows);
    if (mc <= 0) return hx_device_set_error(dev, HX_E_UNSUPPORTED, "rms_norm: row too wide");
    for (int64_t r0 = 0; r0 < n_rows; r0 += mc) {
        int64_t n = HX_MIN(mc, n_rows - r0);
        struct hx_vk_norm_push p = {
            .g = (uint32_t)grp,
            .a_stride = (uint32_t)(op->src[0].row_stride_bytes / 4),
            .d_stride = (uint32_t)(op->dst.row_stride_bytes / 4),
            .eps = op->desc.p.norm.eps,
        };
        struct hx_vk_bind b[3];
        b[0] = hx_vk_rows(d, &op->src[0], r0, n, cols, &p.a_off);
        b[1] = hx__vk_bind(d, g->b.buf, 0, (size_t)grp * 4, &p.gain_off);
        b[2] = hx_vk_rows(d, &op->dst, r0, n, cols, &p.d_off);
        if ((st = hx__vk_dispatch(dev, HX_SHADER_RMS_NORM, b, 3, &p, sizeof p,
                                  (uint32_t)(cols / grp), (uint32_t)n, 1)))
            return st;
    }
    return HX_OK;
}

static int hx_vk_op_rope(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const __typeof__(op->desc.p.rope) *rp = &op->desc.p.rope;
    struct hx_vk_weight *ff = NULL;
    int st;
    if (op->aux && (st = hx__vk_weight_get(dev, op->aux, op->aux_handle, &ff))) return st;
    const struct hx_tensor_ref *ts[2] = {&op->src[0], &op->dst};
    int64_t cols = (int64_t)rp->n_head * rp->head_dim;
    int64_t mc = hx_vk_chunk(d, ts, 2, cols, n_rows);
    if (mc <= 0) return hx_device_set_error(dev, HX_E_UNSUPPORTED, "rope: row too wide");
    for (int64_t r0 = 0; r0 < n_rows; r0 += mc) {
        int64_t n = HX_MIN(mc, n_rows - r0);
        struct hx_vk_rope_push p = {
            .head_dim = (uint32_t)rp->head_dim,
            .n_rot = (uint32_t)rp->n_rot,
            .a_stride = (uint32_t)(op->src[0].row_stride_bytes / 4),
            .d_stride = (uint32_t)(op->dst.row_stride_bytes / 4),
            .pos_off = (uint32_t)(n_rows + r0),
            .has_ff = ff != NULL,
            .theta_scale = powf(rp->base, -2.0f / (float)rp->n_rot),
            .freq_scale = rp->freq_scale,
        };
        struct hx_vk_bind b[4];
        b[0] = hx_vk_rows(d, &op->src[0], r0, n, cols, &p.a_off);
        b[1] = ff ? hx__vk_bind(d, ff->b.buf, 0, ff->b.nbytes, &p.ff_off) : (struct hx_vk_bind){0};
        p.ff_off /= 4;
        b[2] = hx_vk_rows(d, &op->dst, r0, n, cols, &p.d_off);
        b[3] = hx__vk_bind(d, d->meta.buf, 0, d->meta.nbytes, NULL);
        enum hx_shader_id sid =
            rp->mode == HX_ROPE_NEOX ? HX_SHADER_ROPE_NEOX : HX_SHADER_ROPE_NORM;
        if ((st = hx__vk_dispatch(dev, sid, b, 4, &p, sizeof p, (uint32_t)rp->n_head, (uint32_t)n,
                                  1)))
            return st;
    }
    return HX_OK;
}

static int hx_vk_op_attn(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const __typeof__(op->desc.p.attn) *ap = &op->desc.p.attn;
    int64_t kv_dim = (int64_t)ap->n_head_kv * ap->head_dim,
            q_dim = (int64_t)ap->n_head * ap->head_dim;
    const struct hx_tensor_ref *kc = &op->k_cache, *vc = &op->v_cache;
    size_t c_stride = kc->row_stride_bytes ? kc->row_stride_bytes : (size_t)kv_dim * 4;
    size_t cache_bytes = (size_t)ap->n_seq * (size_t)ap->n_ctx * c_stride;
    uint32_t kc_off, vc_off;
    struct hx_vk_bind bkc =
        hx__vk_bind(d, hx_vk_tb(kc)->buf, kc->offset_bytes, cache_bytes, &kc_off);
    struct hx_vk_bind bvc =
        hx__vk_bind(d, hx_vk_tb(vc)->buf, vc->offset_bytes, cache_bytes, &vc_off);
    struct hx_vk_bind meta = hx__vk_bind(d, d->meta.buf, 0, d->meta.nbytes, NULL);
    const struct hx_tensor_ref *ts[4] = {&op->src[0], &op->src[1], &op->src[2], &op->dst};
    int64_t mc = hx_vk_chunk(d, ts, 4, q_dim, n_rows);
    if (mc <= 0) return hx_device_set_error(dev, HX_E_UNSUPPORTED, "attn: row too wide");
    int st;
    /* 1: store every row's k and v (all chunks), 2: barrier, 3: attention */
    for (int64_t r0 = 0; r0 < n_rows; r0 += mc) {
        int64_t n = HX_MIN(mc, n_rows - r0);
        struct hx_vk_kv_push p = {
            .kv_dim = (uint32_t)kv_dim,
            .c_stride = (uint32_t)(c_stride / 4),
            .n_ctx = (uint32_t)ap->n_ctx,
            .k_stride = (uint32_t)(op->src[1].row_stride_bytes / 4),
            .v_stride = (uint32_t)(op->src[2].row_stride_bytes / 4),
            .kc_off = kc_off / 4,
            .vc_off = vc_off / 4,
            .pos_off = (uint32_t)(n_rows + r0),
            .seq_off = (uint32_t)(2 * n_rows + r0),
        };
        struct hx_vk_bind b[5];
        b[0] = hx_vk_rows(d, &op->src[1], r0, n, kv_dim, &p.k_off);
        b[1] = hx_vk_rows(d, &op->src[2], r0, n, kv_dim, &p.v_off);
        b[2] = bkc;
        b[3] = meta;
        b[4] = bvc;
        uint32_t wg = hx__vk_wg(dev, HX_SHADER_KV_STORE);
        if ((st = hx__vk_dispatch(dev, HX_SHADER_KV_STORE, b, 5, &p, sizeof p,
                                  (uint32_t)((kv_dim + wg - 1) / wg), (uint32_t)n, 1)))
            return st;
    }
    hx__vk_barrier(d);
    /* attention: the flash-style tiles for a prefill batch (vulkan-pick.h), else per row */
    char why[96];
    const bool flash =
        hx__vk_attn_flash(&d->phys->caps, d->attn, n_rows, ap->head_dim, why, sizeof why);
    const enum hx_shader_id sid = flash ? HX_SHADER_ATTN_FLASH : HX_SHADER_ATTN;
    for (int64_t r0 = 0; r0 < n_rows; r0 += mc) {
        int64_t n = HX_MIN(mc, n_rows - r0);
        struct hx_vk_attn_push p = {
            .n_head = (uint32_t)ap->n_head,
            .n_head_kv = (uint32_t)ap->n_head_kv,
            .head_dim = (uint32_t)ap->head_dim,
            .n_ctx = (uint32_t)ap->n_ctx,
            .c_stride = (uint32_t)(c_stride / 4),
            .q_stride = (uint32_t)(op->src[0].row_stride_bytes / 4),
            .d_stride = (uint32_t)(op->dst.row_stride_bytes / 4),
            .kc_off = kc_off / 4,
            .vc_off = vc_off / 4,
            .pos_off = (uint32_t)(n_rows + r0),
            .seq_off = (uint32_t)(2 * n_rows + r0),
            .n_rows = (uint32_t)n,
            .scale = ap->scale,
        };
        struct hx_vk_bind b[5];
        b[0] = hx_vk_rows(d, &op->src[0], r0, n, q_dim, &p.q_off);
        b[1] = bkc;
        b[2] = hx_vk_rows(d, &op->dst, r0, n, q_dim, &p.d_off);
        b[3] = meta;
        b[4] = bvc;
        uint32_t gx, gz;
        const uint64_t units = flash ? (uint64_t)(n + HX_VK_FA_BR - 1) / HX_VK_FA_BR : (uint64_t)n;
        hx__vk_grid((uint64_t)ap->n_head * units, &gx, &gz);
        if ((st = hx__vk_dispatch(dev, sid, b, 5, &p, sizeof p, gx, 1, gz))) return st;
    }
    return HX_OK;
}

static int hx_vk_op_eltwise(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    enum hx_shader_id sid = op->desc.kind == HX_OP_SWIGLU      ? HX_SHADER_SWIGLU
                            : op->desc.kind == HX_OP_RELU2_GLU ? HX_SHADER_RELU2_GLU
                                                               : HX_SHADER_ADD;
    int64_t cols = op->dst.n_cols;
    const struct hx_tensor_ref *ts[3] = {&op->src[0], &op->src[1], &op->dst};
    int64_t mc = hx_vk_chunk(d, ts, 3, cols, n_rows);
    if (mc <= 0) return hx_device_set_error(dev, HX_E_UNSUPPORTED, "eltwise: row too wide");
    uint32_t wg = hx__vk_wg(dev, sid);
    for (int64_t r0 = 0; r0 < n_rows; r0 += mc) {
        int64_t n = HX_MIN(mc, n_rows - r0);
        struct hx_vk_elt_push p = {
            .n_cols = (uint32_t)cols,
            .a_stride = (uint32_t)(op->src[0].row_stride_bytes / 4),
            .b_stride = (uint32_t)(op->src[1].row_stride_bytes / 4),
            .d_stride = (uint32_t)(op->dst.row_stride_bytes / 4),
        };
        struct hx_vk_bind b[3];
        b[0] = hx_vk_rows(d, &op->src[0], r0, n, cols, &p.a_off);
        b[1] = hx_vk_rows(d, &op->src[1], r0, n, cols, &p.b_off);
        b[2] = hx_vk_rows(d, &op->dst, r0, n, cols, &p.d_off);
        int st = hx__vk_dispatch(dev, sid, b, 3, &p, sizeof p, (uint32_t)((cols + wg - 1) / wg),
                                 (uint32_t)n, 1);
        if (st) return st;
    }
    return HX_OK;
}

static int hx_vk_record(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    switch (op->desc.kind) {
    case HX_OP_EMBED: return hx__vk_op_embed(dev, op, n_rows);
    case HX_OP_RMS_NORM: return hx_vk_op_norm(dev, op, n_rows);
    case HX_OP_MATMUL: return hx__vk_op_matmul(dev, op, n_rows);
    case HX_OP_ROPE: return hx_vk_op_rope(dev, op, n_rows);
    case HX_OP_ATTN: return hx_vk_op_attn(dev, op, n_rows);
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD: return hx_vk_op_eltwise(dev, op, n_rows);
    default:
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "op %s not supported",
                                   hx_op_kind_name(op->desc.kind));
    }
}

/* Bytes of the metadata buffer for a split of n_rows. */
static size_t hx_vk_meta_size(int64_t n_rows)
{
    return HX_MAX((size_t)n_rows * 12, (size_t)4096);
}

/* Copy tokens / pos / seq into the metadata buffer: [tokens n][pos n][seq n] int32. */
static int hx_vk_meta(struct hx_device *dev, const struct hx_split *s)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    size_t need = (size_t)s->n_rows * 12;
    if (!d->meta.buf || d->meta.nbytes < need) {
        hx__vk_buf_destroy(d, &d->meta);
        int st = hx__vk_buf_create(dev, hx_vk_meta_size(s->n_rows), true, &d->meta,
                                   "split metadata");
        if (st) return st;
    }
    int32_t *m = d->meta.map;
    size_t n = (size_t)s->n_rows;
    if (s->tokens)
        memcpy(m, s->tokens, n * 4);
    else
        memset(m, 0, n * 4);
    if (s->pos)
        memcpy(m + n, s->pos, n * 4);
    else
        memset(m + n, 0, n * 4);
    if (s->seq)
        memcpy(m + 2 * n, s->seq, n * 4);
    else
        memset(m + 2 * n, 0, n * 4);
    return HX_OK;
}

/* Rows an op of the split works on. */
static int64_t hx_vk_op_rows(const struct hx_op *op, const struct hx_split *split)
{
    return op->dst.n_rows > 0 ? HX_MIN(op->dst.n_rows, split->n_rows) : split->n_rows;
}

/* A kept recording of this split (same ops, rows and buffers), else NULL. */
static struct hx_vk_rec *hx_vk_replay_find(struct hx_vk_dev *d, const struct hx_split *split)
{
    for (int i = 0; i < HX_VK_REPLAY; i++) {
        struct hx_vk_rec *r = &d->replay[i];
        if (r->valid && r->gen == d->gen && r->n_rows == split->n_rows &&
            r->n_ops == split->n_ops &&
            !memcmp(r->ops, split->ops, (size_t)split->n_ops * sizeof *split->ops))
            return r;
    }
    return NULL;
}

/* The entry to record a decode split into (an unused one, else the least recently used) and
 * its copy of the split's ops; NULL when it should be recorded once (prefill, replay off). */
static struct hx_vk_rec *hx_vk_replay_slot(struct hx_vk_dev *d, const struct hx_split *split)
{
    if (!d->replay_on || split->n_rows > HX_VK_REPLAY_ROWS || split->n_ops <= 0) return NULL;
    struct hx_vk_rec *r = &d->replay[0];
    for (int i = 1; i < HX_VK_REPLAY && r->valid; i++)
        if (!d->replay[i].valid || d->replay[i].used < r->used) r = &d->replay[i];
    r->valid = false;
    if (r->cap_ops < split->n_ops) {
        struct hx_op *o = hx__realloc(r->ops, (size_t)split->n_ops * sizeof *o);
        if (!o) return NULL;
        r->ops = o, r->cap_ops = split->n_ops;
    }
    return r;
}

/* The int8 / split-K scratch a split's matmuls need: the largest of theirs. */
static size_t hx_vk_split_scratch(struct hx_device *dev, const struct hx_split *split)
{
    size_t scratch = 0;
    for (int64_t i = 0; i < split->n_ops; i++) {
        const struct hx_op *op = &split->ops[i];
        if (op->desc.kind == HX_OP_MATMUL)
            scratch = HX_MAX(scratch, hx__vk_matmul_scratch(dev, op, hx_vk_op_rows(op, split)));
    }
    return scratch;
}

int hx__vk_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                         size_t out[HX_SCRATCH_BUFS])
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!sp) {
        out[0] = d->scratch.buf ? d->scratch.nbytes : 0;
        out[1] = d->meta.buf ? d->meta.nbytes : 0;
        return HX_OK;
    }
    if (!sp->n_ops) return HX_OK; /* both grow with the splits run: none at the opening */
    out[0] = hx__vk_scratch_size(d, hx_vk_split_scratch(dev, sp));
    out[1] = hx_vk_meta_size(sp->n_rows);
    return HX_OK;
}

int hx__vk_run(struct hx_device *dev, const struct hx_split *split)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    double t0 = hx__time_us();
    if (d->lost) return hx_device_set_error(dev, HX_E_DEVICE, "device was lost earlier");
    int st = hx__vk_wait(dev);
    if (st) return st;
    /* weights not prepared for this device are uploaded before recording */
    struct hx_vk_weight *w;
    for (int64_t i = 0; i < split->n_ops; i++) {
        const struct hx_op *op = &split->ops[i];
        if (op->weight && (st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &w)))
            return st;
        if (op->aux && (st = hx__vk_weight_get(dev, op->aux, op->aux_handle, &w))) return st;
    }
    if ((st = hx__vk_scratch_reserve(dev, hx_vk_split_scratch(dev, split)))) return st;
    if ((st = hx_vk_meta(dev, split))) return st;
    struct hx_vk_rec *rec = hx_vk_replay_find(d, split);
    if (rec) {
        rec->used = ++d->tick;
        d->n_splits[1]++;
        st = hx__vk_resubmit(dev, rec);
        d->timing.host_us += hx__time_us() - t0;
        return st;
    }
    rec = hx_vk_replay_slot(d, split);
    if ((st = rec ? hx__vk_begin_rec(dev, rec) : hx__vk_begin(dev))) return st;
    for (int64_t i = 0; i < split->n_ops; i++) {
        const struct hx_op *op = &split->ops[i];
        if ((st = hx_vk_record(dev, op, hx_vk_op_rows(op, split)))) return st;
        hx__vk_barrier(d);
    }
    d->n_splits[0]++;
    st = hx__vk_submit(dev);
    if (!st && rec) {
        /* recording may have created buffers (views, lazy weights): keep the current gen */
        memcpy(rec->ops, split->ops, (size_t)split->n_ops * sizeof *split->ops);
        rec->n_ops = split->n_ops, rec->n_rows = split->n_rows;
        rec->gen = d->gen, rec->used = ++d->tick, rec->valid = true;
    }
    d->timing.host_us += hx__time_us() - t0;
    return st;
}

int hx__vk_synchronize(struct hx_device *dev)
{
    return hx__vk_wait(dev);
}

/* Rough roofline: bytes moved / bandwidth + a launch overhead; a CPU-type device (lavapipe)
 * is modelled at main-memory speed. */
int hx__vk_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    double gbps = d->phys->info.kind == HX_DEVICE_CPU ? 10.0 : d->uma ? 60.0 : 300.0;
    double gflops = d->phys->info.kind == HX_DEVICE_CPU ? 20.0 : 2000.0;
    double bytes = (double)op->n_rows * (double)(op->n_in + op->n_out) * 4.0, flops = 0;
    if (op->kind == HX_OP_MATMUL) {
        bytes += (double)hx_dtype_row_bytes(op->wtype, op->n_in) * (double)op->n_out;
        flops = 2.0 * (double)op->n_rows * (double)op->n_in * (double)op->n_out;
    }
    double t = bytes / (gbps * 1e3);
    if (flops / (gflops * 1e3) > t) t = flops / (gflops * 1e3);
    *us = t + 10.0;
    return HX_OK;
}
