/*
 * ref.c — the reference backend: the executable definition of docs/ops.md. Plain scalar C,
 * one thread, dequantize a weight row to f32 and accumulate dot products in double. It is
 * never optimized: every other backend is checked against it. Its scratch (one dequantized
 * weight row, one head's attention scores) grows to the largest op run and is reported by
 * scratch_bytes for the plan's memory.
 */
#include <math.h>
#include <string.h>

#include "host-buffer.h"
#include "hx-impl.h"

struct hx_ref_dev {
    float *row;       /* one dequantized weight row */
    int64_t row_cap;
    float *scores;    /* attention scores for one head */
    int64_t scores_cap;
};

static int hx_ref_grow(float **p, int64_t *cap, int64_t n)
{
    if (n <= *cap) return HX_OK;
    float *q = hx_realloc(*p, (size_t)n * sizeof *q);
    if (!q) return HX_E_NOMEM;
    *p = q, *cap = n;
    return HX_OK;
}

static int hx_ref_probe(struct hx_backend_probe *out)
{
    out->score = 1; /* never the default */
    out->n_devices = 1;
    return HX_OK;
}

static int hx_ref_device_info(int idx, struct hx_device_info *out)
{
    (void)idx; /* 0, the only one */
    hx__host_device_info("ref", "reference: scalar C, dequantize then compute (the oracle)", out);
    return HX_OK;
}

static int hx_ref_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    (void)dev, (void)cfg;
    return HX_OK;
}

static void hx_ref_fini(struct hx_device *dev)
{
    struct hx_ref_dev *c = dev->ctx;
    hx_free(c->row);
    hx_free(c->scores);
}

static bool hx_ref_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    (void)dev;
    return (unsigned)op->kind < HX_OP_KIND_COUNT && (unsigned)op->wtype < HX_DTYPE_COUNT;
}

static const float *hx_ref_wrow(struct hx_ref_dev *c, const struct hx_weight *w, int64_t j, int *st)
{
    *st = hx_ref_grow(&c->row, &c->row_cap, w->n_cols);
    if (*st) return NULL;
    *st = hx_weight_dequantize_row(w, j, c->row); /* tensor scale (I2_S) included */
    return *st ? NULL : c->row;
}

static int hx_ref_embed(struct hx_device *dev, const struct hx_op *op, const struct hx_split *sp)
{
    for (int64_t r = 0; r < op->dst.n_rows; r++) {
        int32_t t = sp->tokens[r];
        if (t < 0 || t >= op->weight->n_rows)
            return hx_device_set_error(dev, HX_E_INVAL, "embed: token %d out of range", t);
        int st;
        const float *row = hx_ref_wrow(dev->ctx, op->weight, t, &st);
        if (!row) return st;
        memcpy(hx_tensor_row(&op->dst, r), row, (size_t)op->dst.n_cols * sizeof(float));
    }
    return HX_OK;
}

static int hx_ref_rms_norm(const struct hx_op *op)
{
    int64_t g = op->desc.p.norm.group > 0 ? op->desc.p.norm.group : op->src[0].n_cols;
    const float *gain = op->weight ? op->weight->data : NULL;
    for (int64_t r = 0; r < op->src[0].n_rows; r++) {
        const float *x = hx_tensor_row(&op->src[0], r);
        float *y = hx_tensor_row(&op->dst, r);
        for (int64_t c0 = 0; c0 < op->src[0].n_cols; c0 += g) {
            double sum = 0;
            for (int64_t c = 0; c < g; c++) sum += (double)x[c0 + c] * x[c0 + c];
            float scale = 1.0f / sqrtf((float)(sum / (double)g) + op->desc.p.norm.eps);
            for (int64_t c = 0; c < g; c++) y[c0 + c] = x[c0 + c] * scale * (gain ? gain[c] : 1.0f);
        }
    }
    return HX_OK;
}

static int hx_ref_matmul(struct hx_device *dev, const struct hx_op *op)
{
    const struct hx_weight *w = op->weight;
    for (int64_t j = 0; j < w->n_rows; j++) {
        int st;
        const float *row = hx_ref_wrow(dev->ctx, w, j, &st);
        if (!row) return st;
        for (int64_t r = 0; r < op->src[0].n_rows; r++) {
            const float *x = hx_tensor_row(&op->src[0], r);
            double acc = 0;
            for (int64_t k = 0; k < w->n_cols; k++) acc += (double)row[k] * x[k];
            hx_tensor_row(&op->dst, r)[j] = (float)acc * w->scale;
        }
    }
    return HX_OK;
}

static int hx_ref_rope(const struct hx_op *op, const struct hx_split *sp)
{
    const int32_t nh = op->desc.p.rope.n_head, hd = op->desc.p.rope.head_dim, nrot = op->desc.p.rope.n_rot;
    const float theta_scale = powf(op->desc.p.rope.base, -2.0f / (float)nrot);
    const float *ff = op->aux ? op->aux->data : NULL;
    for (int64_t r = 0; r < op->src[0].n_rows; r++) {
        const float *x = hx_tensor_row(&op->src[0], r);
        float *y = hx_tensor_row(&op->dst, r);
        if (y != x) memcpy(y, x, (size_t)op->src[0].n_cols * sizeof(float));
        for (int32_t h = 0; h < nh; h++) {
            float *v = y + (size_t)h * (size_t)hd;
            float theta = (float)sp->pos[r];
            for (int32_t i = 0; i < nrot / 2; i++) {
                float t = (ff ? theta / ff[i] : theta) * op->desc.p.rope.freq_scale;
                float cs = cosf(t), sn = sinf(t);
                int32_t ia = op->desc.p.rope.mode == HX_ROPE_NORM ? 2 * i : i;
                int32_t ib = op->desc.p.rope.mode == HX_ROPE_NORM ? 2 * i + 1 : i + nrot / 2;
                float a = v[ia], b = v[ib];
                v[ia] = a * cs - b * sn;
                v[ib] = a * sn + b * cs;
                theta *= theta_scale;
            }
        }
    }
    return HX_OK;
}

static int hx_ref_attn(struct hx_device *dev, const struct hx_op *op, const struct hx_split *sp)
{
    struct hx_ref_dev *c = dev->ctx;
    const int32_t nh = op->desc.p.attn.n_head, nkv = op->desc.p.attn.n_head_kv, hd = op->desc.p.attn.head_dim;
    const int64_t n_ctx = op->desc.p.attn.n_ctx;
    const size_t kv_bytes = (size_t)nkv * (size_t)hd * sizeof(float);
    for (int64_t r = 0; r < op->src[0].n_rows; r++) {
        int64_t cr = (int64_t)sp->seq[r] * n_ctx + sp->pos[r];
        memcpy(hx_tensor_row(&op->k_cache, cr), hx_tensor_row(&op->src[1], r), kv_bytes);
        memcpy(hx_tensor_row(&op->v_cache, cr), hx_tensor_row(&op->src[2], r), kv_bytes);
    }
    int st = hx_ref_grow(&c->scores, &c->scores_cap, n_ctx);
    if (st) return st;
    for (int64_t r = 0; r < op->src[0].n_rows; r++) {
        int64_t base = (int64_t)sp->seq[r] * n_ctx, n_t = sp->pos[r] + 1;
        for (int32_t h = 0; h < nh; h++) {
            int32_t kvh = h / (nh / nkv);
            const float *q = hx_tensor_row(&op->src[0], r) + (size_t)h * (size_t)hd;
            float mx = -INFINITY;
            for (int64_t t = 0; t < n_t; t++) {
                const float *k = hx_tensor_row(&op->k_cache, base + t) + (size_t)kvh * (size_t)hd;
                double d = 0;
                for (int32_t i = 0; i < hd; i++) d += (double)q[i] * k[i];
                c->scores[t] = (float)d * op->desc.p.attn.scale;
                if (c->scores[t] > mx) mx = c->scores[t];
            }
            double sum = 0;
            for (int64_t t = 0; t < n_t; t++) sum += (c->scores[t] = expf(c->scores[t] - mx));
            float *out = hx_tensor_row(&op->dst, r) + (size_t)h * (size_t)hd;
            for (int32_t i = 0; i < hd; i++) {
                double acc = 0;
                for (int64_t t = 0; t < n_t; t++)
                    acc += (double)c->scores[t] * hx_tensor_row(&op->v_cache, base + t)[(size_t)kvh * (size_t)hd + (size_t)i];
                out[i] = (float)(acc / sum);
            }
        }
    }
    return HX_OK;
}

static int hx_ref_elementwise(const struct hx_op *op)
{
    for (int64_t r = 0; r < op->dst.n_rows; r++) {
        const float *a = hx_tensor_row(&op->src[0], r), *b = hx_tensor_row(&op->src[1], r);
        float *y = hx_tensor_row(&op->dst, r);
        for (int64_t i = 0; i < op->dst.n_cols; i++) {
            float g = a[i], u = b[i];
            switch (op->desc.kind) {
            case HX_OP_SWIGLU: y[i] = g / (1.0f + expf(-g)) * u; break;
            case HX_OP_RELU2_GLU: y[i] = (g > 0 ? g * g : 0.0f) * u; break;
            default: y[i] = g + u; break;
            }
        }
    }
    return HX_OK;
}

static int hx_ref_run(struct hx_device *dev, const struct hx_split *sp)
{
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        int st;
        switch (op->desc.kind) {
        case HX_OP_EMBED: st = hx_ref_embed(dev, op, sp); break;
        case HX_OP_RMS_NORM: st = hx_ref_rms_norm(op); break;
        case HX_OP_MATMUL: st = hx_ref_matmul(dev, op); break;
        case HX_OP_ROPE: st = hx_ref_rope(op, sp); break;
        case HX_OP_ATTN: st = hx_ref_attn(dev, op, sp); break;
        case HX_OP_SWIGLU:
        case HX_OP_RELU2_GLU:
        case HX_OP_ADD: st = hx_ref_elementwise(op); break;
        default: st = hx_device_set_error(dev, HX_E_UNSUPPORTED, "unknown op %d", op->desc.kind);
        }
        if (st) return st;
    }
    return HX_OK;
}

/* [0] the dequantized weight row (the widest weight an embed with rows or a matmul read),
 * [1] the attention scores (n_ctx floats). */
static int hx_ref_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                                size_t out[HX_SCRATCH_BUFS])
{
    const struct hx_ref_dev *c = dev->ctx;
    if (!sp) {
        out[0] = (size_t)c->row_cap * sizeof(float);
        out[1] = (size_t)c->scores_cap * sizeof(float);
        return HX_OK;
    }
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        const struct hx_weight *w = op->weight;
        if (w && w->n_rows > 0 &&
            (op->desc.kind == HX_OP_MATMUL || (op->desc.kind == HX_OP_EMBED && op->dst.n_rows > 0)))
            out[0] = HX_MAX(out[0], (size_t)w->n_cols * sizeof(float));
        if (op->desc.kind == HX_OP_ATTN)
            out[1] = HX_MAX(out[1], (size_t)op->desc.p.attn.n_ctx * sizeof(float));
    }
    return HX_OK;
}

const struct hx_backend_ops hx__backend_ref_ops = {
    .abi_version = HX_BACKEND_ABI_VERSION,
    .struct_size = sizeof(struct hx_backend_ops),
    .name = "ref",
    .ctx_size = sizeof(struct hx_ref_dev),
    .probe = hx_ref_probe,
    .device_info = hx_ref_device_info,
    .init = hx_ref_init,
    .fini = hx_ref_fini,
    .buffer_alloc = hx__host_buffer_alloc,
    .buffer_free = hx__host_buffer_free,
    .buffer_write = hx__host_buffer_write,
    .buffer_read = hx__host_buffer_read,
    .weight_prepare = hx__host_weight_prepare,
    .supports = hx_ref_supports,
    .run = hx_ref_run,
    .scratch_bytes = hx_ref_scratch_bytes,
};
