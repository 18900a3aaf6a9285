/*
 * cpu-ops.c — the non-matmul ops of docs/ops.md for the fast CPU backend: the same formulas
 * as `ref`, parallelized over rows (attention over row × head pairs) on the pool of pool.h.
 * Every op reads a row before writing it, so dst may alias src where the contract allows it.
 */
#include <math.h>
#include <string.h>

#include "cpu-impl.h"
#include "hx-impl.h"
#include "pool.h"

static int hx_cpu_threads_for(int64_t work, int n_threads)
{
    return work < 16384 ? 1 : n_threads;
}

struct hx_embed_job {
    const struct hx_op *op;
    const struct hx_split *s;
    _Atomic int bad;
};

static void hx_embed_row(void *arg, int64_t r, int tid)
{
    struct hx_embed_job *j = arg;
    const struct hx_weight *w = j->op->weight;
    (void)tid;
    if (hx_weight_dequantize_row(w, j->s->tokens[r], hx_tensor_row(&j->op->dst, r)) != HX_OK)
        atomic_store(&j->bad, 1);
}

int hx__cpu_op_embed(const struct hx_op *op, const struct hx_split *s, int n_threads)
{
    const struct hx_weight *w = op->weight;
    const int64_t n = op->dst.n_rows, d = w->n_cols;
    for (int64_t r = 0; r < n; r++)
        if (s->tokens[r] < 0 || s->tokens[r] >= w->n_rows) return HX_E_INVAL;
    struct hx_embed_job j = {.op = op, .s = s};
    atomic_init(&j.bad, 0);
    hx__pool_for(n, hx_cpu_threads_for(n * d, n_threads), 0, hx_embed_row, &j);
    return atomic_load(&j.bad) ? HX_E_INTERNAL : HX_OK;
}

/* A row-wise op and what is the same for all its rows, worked out once per op (the ISA check
 * reads the environment; RoPE's theta scale is a powf). */
struct hx_rows_job {
    const struct hx_op *op;
    const struct hx_split *s;
    float theta_scale;
    bool v512;
};

static struct hx_rows_job hx_rows_job(const struct hx_op *op, const struct hx_split *s)
{
    return (struct hx_rows_job){.op = op, .s = s, .v512 = hx__cpu_isa() == HX_CPU_ISA_AVX512};
}

static void hx_rms_norm_row(void *arg, int64_t r, int tid)
{
    const struct hx_rows_job *j = arg;
    const struct hx_op *op = j->op;
    (void)tid;
    const int64_t d = op->src[0].n_cols;
    const int64_t g = op->desc.p.norm.group > 0 ? op->desc.p.norm.group : d;
    const float eps = op->desc.p.norm.eps;
    const float *gain = op->weight->data;
    const float *x = hx_tensor_row(&op->src[0], r);
    float *y = hx_tensor_row(&op->dst, r);
    for (int64_t c0 = 0; c0 < d; c0 += g) {
        double ss = 0.0;
        if (j->v512) ss = hx__cpu_sumsq_avx512(x + c0, g);
        else
            for (int64_t c = 0; c < g; c++) ss += (double)x[c0 + c] * (double)x[c0 + c];
        const float mean = (float)(ss / (double)g);
        const float sc = 1.0f / sqrtf(mean + eps);
        for (int64_t c = 0; c < g; c++) y[c0 + c] = x[c0 + c] * sc * gain[c];
    }
}

void hx__cpu_op_rms_norm(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, d = op->src[0].n_cols;
    struct hx_rows_job j = hx_rows_job(op, NULL);
    hx__pool_for(n, hx_cpu_threads_for(n * d, n_threads), 0, hx_rms_norm_row, &j);
}

static void hx_rope_row(void *arg, int64_t r, int tid)
{
    const struct hx_rows_job *j = arg;
    const struct hx_op *op = j->op;
    (void)tid;
    const int n_head = op->desc.p.rope.n_head, hd = op->desc.p.rope.head_dim;
    const int n_rot = op->desc.p.rope.n_rot;
    const float fs = op->desc.p.rope.freq_scale;
    const bool neox = op->desc.p.rope.mode == HX_ROPE_NEOX;
    const float *ff = op->aux ? op->aux->data : NULL;
    const float *x = hx_tensor_row(&op->src[0], r);
    float *y = hx_tensor_row(&op->dst, r);
    if (x != y) memcpy(y, x, (size_t)n_head * hd * sizeof(float));
    /* the angles depend on the position only: once per row, not per head */
    float cs[512], sn[512];
    float theta_base = (float)j->s->pos[r];
    for (int i = 0; i < n_rot / 2; i++) {
        float theta = theta_base;
        if (ff) theta /= ff[i];
        theta *= fs;
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta_base *= j->theta_scale;
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

void hx__cpu_op_rope(const struct hx_op *op, const struct hx_split *s, int n_threads)
{
    const int64_t n = op->src[0].n_rows;
    const int64_t work = n * op->desc.p.rope.n_head * op->desc.p.rope.head_dim;
    struct hx_rows_job j = hx_rows_job(op, s);
    j.theta_scale = powf(op->desc.p.rope.base, -2.0f / (float)op->desc.p.rope.n_rot);
    hx__pool_for(n, hx_cpu_threads_for(work, n_threads), 0, hx_rope_row, &j);
}

/* Attention's parameters and buffers, shared by the three loops below. */
struct hx_attn_job {
    const struct hx_op *op;
    const struct hx_split *s;
    int64_t n, n_ctx, max_pos, lp;
    int n_head, n_kv, hd, grp, rb;
    int64_t n_rb;
    float scale;
    bool v512;
    size_t ks, vs, head_floats, per_thread;
    float *kt, *vh, *scratch;
};

/* Block b of 32 keys: K transposed (d-major) and V copied head-major, padding zero. */
static void hx_attn_transpose(void *arg, int64_t b, int tid)
{
    const struct hx_attn_job *j = arg;
    const struct hx_op *op = j->op;
    const int hd = j->hd;
    const int64_t base = (int64_t)j->s->seq[0] * j->n_ctx;
    (void)tid;
    for (int64_t jj = 0; jj < 32; jj++) {
        const int64_t t = b * 32 + jj;
        const float *kr = t <= j->max_pos ? hx_tensor_row(&op->k_cache, base + t) : NULL;
        const float *vr = t <= j->max_pos ? hx_tensor_row(&op->v_cache, base + t) : NULL;
        for (int kvh = 0; kvh < j->n_kv; kvh++) {
            float *dst = j->kt + (size_t)kvh * j->head_floats + (size_t)(b * hd) * 32 + jj;
            for (int d = 0; d < hd; d++) dst[d * 32] = kr ? kr[kvh * hd + d] : 0.0f;
            float *vd = j->vh + (size_t)kvh * j->head_floats + (size_t)t * hd;
            if (vr)
                memcpy(vd, vr + (size_t)kvh * hd, sizeof(float) * (size_t)hd);
            else
                memset(vd, 0, sizeof(float) * (size_t)hd);
        }
    }
}

/* Job jb: the grp query heads of rb consecutive rows that share one KV head. Jobs of one KV
 * head are consecutive, so a thread's share of the jobs (core/pool.h) is whole heads, whose K
 * and V (256 KiB each at 512 keys) stay in its L2 while it works through them; a thread that
 * runs out steals the last jobs of another's share. */
static void hx_attn_flash(void *arg, int64_t jb, int tid)
{
    const struct hx_attn_job *j = arg;
    const struct hx_op *op = j->op;
    const int64_t b = jb % j->n_rb;
    const int kvh = (int)(jb / j->n_rb), hd = j->hd;
    const float *qs[8];
    float *outs[8];
    int64_t lens[8];
    int nq = 0;
    (void)tid;
    for (int64_t r = b * j->rb; r < j->n && r < (b + 1) * j->rb; r++)
        for (int g = 0; g < j->grp; g++, nq++) {
            const int h = kvh * j->grp + g;
            qs[nq] = hx_tensor_row(&op->src[0], r) + (size_t)h * hd;
            outs[nq] = hx_tensor_row(&op->dst, r) + (size_t)h * hd;
            lens[nq] = (int64_t)j->s->pos[r] + 1;
        }
    hx__cpu_attn_flash_avx512(qs, nq, lens, j->kt + (size_t)kvh * j->head_floats,
                              j->vh + (size_t)kvh * j->head_floats, (size_t)hd, hd, j->scale, outs);
}

/* One (row, head) pair. */
static void hx_attn_pair(void *arg, int64_t ph, int tid)
{
    const struct hx_attn_job *j = arg;
    const struct hx_op *op = j->op;
    const int hd = j->hd;
    const float scale = j->scale;
    float *sc = j->scratch + j->per_thread * (size_t)tid, *o = sc + j->n_ctx;
    const int64_t r = ph / j->n_head;
    const int h = (int)(ph % j->n_head), kvh = h / j->grp;
    const int64_t base = (int64_t)j->s->seq[r] * j->n_ctx, len = (int64_t)j->s->pos[r] + 1;
    const float *q = hx_tensor_row(&op->src[0], r) + (size_t)h * hd;
    if (j->kt) {
        hx__cpu_attn_kt_avx512(q, j->kt + (size_t)kvh * j->head_floats,
                               j->vh + (size_t)kvh * j->head_floats, (size_t)hd, len,
                               hd, scale, sc, hx_tensor_row(&op->dst, r) + (size_t)h * hd);
        return;
    }
    if (j->v512) {
        hx__cpu_attn_row_avx512(q, hx_tensor_row(&op->k_cache, base) + (size_t)kvh * hd, j->ks,
                                hx_tensor_row(&op->v_cache, base) + (size_t)kvh * hd, j->vs, len,
                                hd, scale, hx_tensor_row(&op->dst, r) + (size_t)h * hd);
        return;
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

size_t hx__cpu_attn_per_thread(const struct hx_op *op)
{
    return (size_t)op->desc.p.attn.n_ctx + (size_t)op->desc.p.attn.head_dim + 16;
}

/* The head-major copy is made for a prefill of one sequence of 16 rows or more with the
 * AVX-512 kernels; lp (the keys rounded up to 32) <= n_ctx + hd is checked per call, so a
 * context where even 32 keys fail it never makes one. */
static bool hx_attn_v512(const struct hx_op *op)
{
    const int64_t hd = op->desc.p.attn.head_dim;
    return hx__cpu_isa() == HX_CPU_ISA_AVX512 && hd % 16 == 0 && hd <= 256;
}

static size_t hx_attn_kt_cap(const struct hx_op *op)
{
    const size_t lp = ((size_t)op->desc.p.attn.n_ctx + 31) / 32 * 32;
    return 2 * sizeof(float) * (size_t)op->desc.p.attn.n_head_kv *
           (size_t)op->desc.p.attn.head_dim * lp;
}

size_t hx__cpu_attn_kt_bytes(const struct hx_op *op, int64_t n_rows)
{
    if (!hx_attn_v512(op) || n_rows < 16 ||
        32 > op->desc.p.attn.n_ctx + (int64_t)op->desc.p.attn.head_dim)
        return 0;
    return hx_attn_kt_cap(op);
}

void hx__cpu_op_attn(const struct hx_op *op, const struct hx_split *s, int n_threads,
                     float *scratch, size_t per_thread, size_t *kt_peak)
{
    struct hx_attn_job j = {
        .op = op, .s = s, .n = op->src[0].n_rows, .n_ctx = op->desc.p.attn.n_ctx,
        .n_head = op->desc.p.attn.n_head, .n_kv = op->desc.p.attn.n_head_kv,
        .hd = op->desc.p.attn.head_dim, .scale = op->desc.p.attn.scale,
        .scratch = scratch, .per_thread = per_thread,
    };
    const int64_t n = j.n;
    j.grp = j.n_head / j.n_kv;
    const size_t kv_bytes = (size_t)j.n_kv * j.hd * sizeof(float);
    for (int64_t r = 0; r < n; r++) {
        const int64_t row = (int64_t)s->seq[r] * j.n_ctx + s->pos[r];
        memcpy(hx_tensor_row(&op->k_cache, row), hx_tensor_row(&op->src[1], r), kv_bytes);
        memcpy(hx_tensor_row(&op->v_cache, row), hx_tensor_row(&op->src[2], r), kv_bytes);
    }
    j.v512 = hx_attn_v512(op);
    j.ks = op->k_cache.row_stride_bytes / sizeof(float), j.vs = op->v_cache.row_stride_bytes / sizeof(float);
    int64_t work = 0;
    bool one_seq = true;
    for (int64_t r = 0; r < n; r++) {
        work += (int64_t)(s->pos[r] + 1) * j.n_head * j.hd;
        j.max_pos = s->pos[r] > j.max_pos ? s->pos[r] : j.max_pos;
        one_seq &= s->seq[r] == s->seq[0];
    }
    /* Prefill of one sequence: keys transposed once per KV head (d-major within blocks of 32
     * keys, each block contiguous), so the scores of 32 or 64 keys come out of plain FMAs over
     * sequential loads; decode keeps the row-wise kernel (transposing the whole cache for one
     * query would cost more than it saves). Padding keys are zero. */
    j.lp = (j.max_pos + 1 + 31) / 32 * 32; /* the flash kernel reads 32 keys a block */
    /* V is copied head-major too: in the cache a head's rows are a whole KV row apart (4 KiB
     * for Qwen3), so the 32 rows of a block fell into one L1 set and were fetched again for
     * every pair of queries. */
    j.head_floats = (size_t)j.hd * (size_t)j.lp;
    /* Allocated for the positions of this call (at most the context's length rounded up to
     * 32: what the plan counts, hx__cpu_attn_kt_bytes); *kt_peak keeps the largest held. */
    const size_t need = 2 * sizeof(float) * (size_t)j.n_kv * j.head_floats;
    if (j.v512 && one_seq && n >= 16 && j.lp <= j.n_ctx + j.hd && need <= hx_attn_kt_cap(op)) {
        j.kt = hx_malloc(need);
        j.vh = j.kt ? j.kt + (size_t)j.n_kv * j.head_floats : NULL;
        if (j.kt && kt_peak) *kt_peak = HX_MAX(*kt_peak, need);
    }
    if (j.kt) hx__pool_for(j.lp / 32, n_threads, 0, hx_attn_transpose, &j);
    if (j.kt && j.grp <= 8) {
        /* queries in groups sharing a KV head: the grp heads of rb consecutive rows */
        j.rb = 8 / j.grp;
        j.n_rb = (n + j.rb - 1) / j.rb;
        hx__pool_for(j.n_rb * j.n_kv, n_threads, 1, hx_attn_flash, &j);
    } else {
        hx__pool_for(n * j.n_head, hx_cpu_threads_for(work, n_threads), 1, hx_attn_pair, &j);
    }
    hx_free(j.kt);
}

static void hx_glu_row(void *arg, int64_t r, int tid)
{
    const struct hx_rows_job *j = arg;
    const struct hx_op *op = j->op;
    (void)tid;
    const int64_t f = op->src[0].n_cols;
    const float *g = hx_tensor_row(&op->src[0], r), *u = hx_tensor_row(&op->src[1], r);
    float *y = hx_tensor_row(&op->dst, r);
    if (op->desc.kind == HX_OP_RELU2_GLU) {
        for (int64_t c = 0; c < f; c++) {
            const float a = g[c] > 0.0f ? g[c] : 0.0f;
            y[c] = a * a * u[c];
        }
    } else if (j->v512) {
        hx__cpu_silu_glu_avx512(g, u, y, f);
    } else {
        for (int64_t c = 0; c < f; c++) y[c] = g[c] / (1.0f + expf(-g[c])) * u[c];
    }
}

void hx__cpu_op_glu(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, f = op->src[0].n_cols;
    struct hx_rows_job j = hx_rows_job(op, NULL);
    hx__pool_for(n, hx_cpu_threads_for(n * f, n_threads), 0, hx_glu_row, &j);
}

static void hx_add_row(void *arg, int64_t r, int tid)
{
    const struct hx_op *op = arg;
    (void)tid;
    const float *a = hx_tensor_row(&op->src[0], r), *b = hx_tensor_row(&op->src[1], r);
    float *y = hx_tensor_row(&op->dst, r);
    for (int64_t c = 0; c < op->src[0].n_cols; c++) y[c] = a[c] + b[c];
}

void hx__cpu_op_add(const struct hx_op *op, int n_threads)
{
    const int64_t n = op->src[0].n_rows, d = op->src[0].n_cols;
    hx__pool_for(n, hx_cpu_threads_for(n * d, n_threads), 0, hx_add_row, (void *)op);
}
