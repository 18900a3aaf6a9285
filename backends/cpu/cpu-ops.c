/*
 * cpu-ops.c — the non-matmul ops of docs/ops.md for the fast CPU backend: the same formulas
 * as `ref`, parallelized over rows (attention over row × head pairs) with OpenMP. Every op
 * reads a row before writing it, so dst may alias src where the contract allows it.
 */
#include <math.h>
#include <string.h>

#include "cpu-impl.h"
#include "hx-impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int hx_cpu_threads_for(int64_t work, int n_threads)
{
    return work < 16384 ? 1 : n_threads;
}

int hx__cpu_op_embed(const struct hx_op *op, const struct hx_split *s, int n_threads)
{
    const struct hx_weight *w = op->weight;
    const int64_t n = op->dst.n_rows, d = w->n_cols;
    const size_t rb = hx_dtype_row_bytes(w->type, d);
    for (int64_t r = 0; r < n; r++)
        if (s->tokens[r] < 0 || s->tokens[r] >= w->n_rows) return HX_E_INVAL;
    int bad = 0;
#pragma omp parallel for schedule(static) num_threads(hx_cpu_threads_for(n * d, n_threads)) reduction(| : bad)
    for (int64_t r = 0; r < n; r++) {
        const char *src = (const char *)w->data + (size_t)s->tokens[r] * rb;
        bad |= hx_dequantize_row(w->type, src, hx_tensor_row(&op->dst, r), d) != HX_OK;
    }
    return bad ? HX_E_INTERNAL : HX_OK;
}

void hx__cpu_op_rms_norm(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, d = op->src[0].n_cols;
    const int64_t g = op->desc.p.norm.group > 0 ? op->desc.p.norm.group : d;
    const float eps = op->desc.p.norm.eps;
    const float *gain = op->weight->data;
    const bool v512 = hx__cpu_isa() == HX_CPU_ISA_AVX512;
#pragma omp parallel for schedule(static) num_threads(hx_cpu_threads_for(n * d, n_threads))
    for (int64_t r = 0; r < n; r++) {
        const float *x = hx_tensor_row(&op->src[0], r);
        float *y = hx_tensor_row(&op->dst, r);
        for (int64_t c0 = 0; c0 < d; c0 += g) {
            double ss = 0.0;
            if (v512) ss = hx__cpu_sumsq_avx512(x + c0, g);
            else
                for (int64_t c = 0; c < g; c++) ss += (double)x[c0 + c] * (double)x[c0 + c];
            const float mean = (float)(ss / (double)g);
            const float sc = 1.0f / sqrtf(mean + eps);
            for (int64_t c = 0; c < g; c++) y[c0 + c] = x[c0 + c] * sc * gain[c];
        }
    }
}

void hx__cpu_op_rope(const struct hx_op *op, const struct hx_split *s, int n_threads)
{
    const int64_t n = op->src[0].n_rows;
    const int n_head = op->desc.p.rope.n_head, hd = op->desc.p.rope.head_dim;
    const int n_rot = op->desc.p.rope.n_rot;
    const float theta_scale = powf(op->desc.p.rope.base, -2.0f / (float)n_rot);
    const float fs = op->desc.p.rope.freq_scale;
    const bool neox = op->desc.p.rope.mode == HX_ROPE_NEOX;
    const float *ff = op->aux ? op->aux->data : NULL;
#pragma omp parallel for schedule(static) num_threads(hx_cpu_threads_for(n * n_head * hd, n_threads))
    for (int64_t r = 0; r < n; r++) {
        const float *x = hx_tensor_row(&op->src[0], r);
        float *y = hx_tensor_row(&op->dst, r);
        if (x != y) memcpy(y, x, (size_t)n_head * hd * sizeof(float));
        /* the angles depend on the position only: once per row, not per head */
        float cs[512], sn[512];
        float theta_base = (float)s->pos[r];
        for (int i = 0; i < n_rot / 2; i++) {
            float theta = theta_base;
            if (ff) theta /= ff[i];
            theta *= fs;
            cs[i] = cosf(theta);
            sn[i] = sinf(theta);
            theta_base *= theta_scale;
        }
        for (int h = 0; h < n_head; h++) {
            float *v = y + (size_t)h * hd;
            for (int i = 0; i < n_rot / 2; i++) {
                const int i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
                const float a = v[i0], b = v[i1];
                v[i0] = a * cs[i] - b * sn[i];
                v[i1] = a * sn[i] + b * cs[i];
            }
        }
    }
}

void hx__cpu_op_attn(const struct hx_op *op, const struct hx_split *s, int n_threads,
                     float *scratch, size_t per_thread)
{
    const int64_t n = op->src[0].n_rows, n_ctx = op->desc.p.attn.n_ctx;
    const int n_head = op->desc.p.attn.n_head, n_kv = op->desc.p.attn.n_head_kv;
    const int hd = op->desc.p.attn.head_dim, grp = n_head / n_kv;
    const float scale = op->desc.p.attn.scale;
    const size_t kv_bytes = (size_t)n_kv * hd * sizeof(float);
    for (int64_t r = 0; r < n; r++) {
        const int64_t row = (int64_t)s->seq[r] * n_ctx + s->pos[r];
        memcpy(hx_tensor_row(&op->k_cache, row), hx_tensor_row(&op->src[1], r), kv_bytes);
        memcpy(hx_tensor_row(&op->v_cache, row), hx_tensor_row(&op->src[2], r), kv_bytes);
    }
    const int64_t pairs = n * n_head;
    const bool v512 = hx__cpu_isa() == HX_CPU_ISA_AVX512 && hd % 16 == 0 && hd <= 256;
    const size_t ks = op->k_cache.row_stride_bytes / sizeof(float), vs = op->v_cache.row_stride_bytes / sizeof(float);
    int64_t work = 0, max_pos = 0;
    bool one_seq = true;
    for (int64_t r = 0; r < n; r++) {
        work += (int64_t)(s->pos[r] + 1) * n_head * hd;
        max_pos = s->pos[r] > max_pos ? s->pos[r] : max_pos;
        one_seq &= s->seq[r] == s->seq[0];
    }
    /* Prefill of one sequence: keys transposed once per KV head (d-major within blocks of 32
     * keys, each block contiguous), so the scores of 32 or 64 keys come out of plain FMAs over
     * sequential loads; decode keeps the row-wise kernel (transposing the whole cache for one
     * query would cost more than it saves). Padding keys are zero. */
    const int64_t lp = (max_pos + 1 + 31) / 32 * 32; /* the flash kernel reads 32 keys a block */
    /* V is copied head-major too: in the cache a head's rows are a whole KV row apart (4 KiB
     * for Qwen3), so the 32 rows of a block fell into one L1 set and were fetched again for
     * every pair of queries. */
    float *kt = NULL, *vh = NULL;
    const size_t head_floats = (size_t)hd * (size_t)lp;
    if (v512 && one_seq && n >= 16 && lp <= n_ctx + hd) {
        kt = hx_malloc(2 * sizeof(float) * (size_t)n_kv * head_floats);
        vh = kt ? kt + (size_t)n_kv * head_floats : NULL;
    }
    if (kt) {
        const int64_t base = (int64_t)s->seq[0] * n_ctx;
#pragma omp parallel for schedule(static) num_threads(n_threads)
        for (int64_t b = 0; b < lp / 32; b++)
            for (int64_t j = 0; j < 32; j++) {
                const int64_t t = b * 32 + j;
                const float *kr = t <= max_pos ? hx_tensor_row(&op->k_cache, base + t) : NULL;
                const float *vr = t <= max_pos ? hx_tensor_row(&op->v_cache, base + t) : NULL;
                for (int kvh = 0; kvh < n_kv; kvh++) {
                    float *dst = kt + (size_t)kvh * head_floats + (size_t)(b * hd) * 32 + j;
                    for (int d = 0; d < hd; d++) dst[d * 32] = kr ? kr[kvh * hd + d] : 0.0f;
                    float *vd = vh + (size_t)kvh * head_floats + (size_t)t * hd;
                    if (vr)
                        memcpy(vd, vr + (size_t)kvh * hd, sizeof(float) * (size_t)hd);
                    else
                        memset(vd, 0, sizeof(float) * (size_t)hd);
                }
            }
    }
    if (kt && grp <= 8) {
        /* queries in groups sharing a KV head: the grp heads of rb consecutive rows */
        const int rb = 8 / grp;
        const int64_t n_rb = (n + rb - 1) / rb, jobs = n_rb * n_kv;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
        for (int64_t j = 0; j < jobs; j++) {
            /* jobs of one KV head are consecutive, so both threads work on the same head's
             * K and V (256 KiB each at 512 keys) while they are in cache */
            const int64_t b = j % n_rb;
            const int kvh = (int)(j / n_rb);
            const float *qs[8];
            float *outs[8];
            int64_t lens[8];
            int nq = 0;
            for (int64_t r = b * rb; r < n && r < (b + 1) * rb; r++)
                for (int g = 0; g < grp; g++, nq++) {
                    const int h = kvh * grp + g;
                    qs[nq] = hx_tensor_row(&op->src[0], r) + (size_t)h * hd;
                    outs[nq] = hx_tensor_row(&op->dst, r) + (size_t)h * hd;
                    lens[nq] = (int64_t)s->pos[r] + 1;
                }
            hx__cpu_attn_flash_avx512(qs, nq, lens, kt + (size_t)kvh * head_floats,
                                      vh + (size_t)kvh * head_floats, (size_t)hd, hd, scale, outs);
        }
        hx_free(kt);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(hx_cpu_threads_for(work, n_threads))
    for (int64_t ph = 0; ph < pairs; ph++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *sc = scratch + per_thread * (size_t)tid, *o = sc + n_ctx;
        const int64_t r = ph / n_head;
        const int h = (int)(ph % n_head), kvh = h / grp;
        const int64_t base = (int64_t)s->seq[r] * n_ctx, len = (int64_t)s->pos[r] + 1;
        const float *q = hx_tensor_row(&op->src[0], r) + (size_t)h * hd;
        if (kt) {
            hx__cpu_attn_kt_avx512(q, kt + (size_t)kvh * head_floats,
                                   vh + (size_t)kvh * head_floats, (size_t)hd, len,
                                   hd, scale, sc, hx_tensor_row(&op->dst, r) + (size_t)h * hd);
            continue;
        }
        if (v512) {
            hx__cpu_attn_row_avx512(q, hx_tensor_row(&op->k_cache, base) + (size_t)kvh * hd, ks,
                                    hx_tensor_row(&op->v_cache, base) + (size_t)kvh * hd, vs, len,
                                    hd, scale, hx_tensor_row(&op->dst, r) + (size_t)h * hd);
            continue;
        }
        float mx = -INFINITY;
        for (int64_t t = 0; t < len; t++) {
            const float *kk = hx_tensor_row(&op->k_cache, base + t) + (size_t)kvh * hd;
            float dot = 0.0f;
            for (int i = 0; i < hd; i++) dot += q[i] * kk[i];
            sc[t] = scale * dot;
            mx = fmaxf(mx, sc[t]);
        }
        float sum = 0.0f;
        for (int64_t t = 0; t < len; t++) {
            sc[t] = expf(sc[t] - mx);
            sum += sc[t];
        }
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int64_t t = 0; t < len; t++) {
            const float *vv = hx_tensor_row(&op->v_cache, base + t) + (size_t)kvh * hd;
            const float p = sc[t] / sum;
            for (int i = 0; i < hd; i++) o[i] += p * vv[i];
        }
        memcpy(hx_tensor_row(&op->dst, r) + (size_t)h * hd, o, (size_t)hd * sizeof(float));
    }
    hx_free(kt);
}

void hx__cpu_op_glu(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, f = op->src[0].n_cols;
    const bool relu2 = op->desc.kind == HX_OP_RELU2_GLU;
    const bool v512 = hx__cpu_isa() == HX_CPU_ISA_AVX512;
#pragma omp parallel for schedule(static) num_threads(hx_cpu_threads_for(n * f, n_threads))
    for (int64_t r = 0; r < n; r++) {
        const float *g = hx_tensor_row(&op->src[0], r), *u = hx_tensor_row(&op->src[1], r);
        float *y = hx_tensor_row(&op->dst, r);
        if (relu2) {
            for (int64_t c = 0; c < f; c++) {
                const float a = g[c] > 0.0f ? g[c] : 0.0f;
                y[c] = a * a * u[c];
            }
        } else if (v512) {
            hx__cpu_silu_glu_avx512(g, u, y, f);
        } else {
            for (int64_t c = 0; c < f; c++) y[c] = g[c] / (1.0f + expf(-g[c])) * u[c];
        }
    }
}

void hx__cpu_op_add(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, d = op->src[0].n_cols;
#pragma omp parallel for schedule(static) num_threads(hx_cpu_threads_for(n * d, n_threads))
    for (int64_t r = 0; r < n; r++) {
        const float *a = hx_tensor_row(&op->src[0], r), *b = hx_tensor_row(&op->src[1], r);
        float *y = hx_tensor_row(&op->dst, r);
        for (int64_t c = 0; c < d; c++) y[c] = a[c] + b[c];
    }
}
