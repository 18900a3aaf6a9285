/*
 * cpu-matmul.c — MATMUL on the host: quantize the activation rows once (quantized weights),
 * then split the output columns over the OpenMP threads in tiles of 4 weight rows. Each tile
 * is unpacked into a panel once and multiplied with every activation row by the selected ISA's
 * panel kernel; m = 1 with a fused kernel for the type streams the GGUF rows directly.
 * Float weights are converted to f32 per tile and reused the same way.
 */
#include <string.h>

#include "cpu-impl.h"
#include "cpu-x16.h"
#include "hx-impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define HX_CPU_NR 4

static int hx_cpu_scratch(void **mem, size_t *mem_bytes, size_t need)
{
    if (*mem_bytes >= need) return HX_OK;
    hx_free(*mem);
    *mem_bytes = 0;
    if (!(*mem = hx_malloc(need))) return HX_E_NOMEM;
    *mem_bytes = need;
    return HX_OK;
}

static void hx_cpu_scale_tile(float *out, int64_t stride, int64_t m, int nr, float scale)
{
    if (scale == 1.0f) return;
    for (int64_t c = 0; c < m; c++)
        for (int i = 0; i < nr; i++) out[c * stride + i] *= scale;
}

static int hx_cpu_matmul_float(const struct hx_op *op, const struct hx_cpu_kernels *kr, int nt,
                               void **mem, size_t *mem_bytes)
{
    const struct hx_weight *w = op->weight;
    const int64_t k = w->n_cols, n = w->n_rows, m = op->src[0].n_rows;
    const size_t rb = hx_dtype_row_bytes(w->type, k), per = (size_t)HX_CPU_NR * k * 4 + 64;
    int st = hx_cpu_scratch(mem, mem_bytes, per * (size_t)nt + 64);
    if (st) return st;
    char *base = *mem;
    const int64_t n_tiles = (n + HX_CPU_NR - 1) / HX_CPU_NR;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t t = 0; t < n_tiles; t++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *panel = (float *)(((uintptr_t)(base + per * (size_t)tid) + 63) & ~(uintptr_t)63);
        const int64_t j0 = t * HX_CPU_NR;
        const int nr = (int)HX_MIN((int64_t)HX_CPU_NR, n - j0);
        const float *rows[HX_CPU_NR];
        for (int i = 0; i < nr; i++) {
            const char *src = (const char *)w->data + (size_t)(j0 + i) * rb;
            if (w->type == HX_DTYPE_F32) {
                rows[i] = (const float *)src;
            } else {
                kr->to_f32(w->type, src, panel + (size_t)i * k, k);
                rows[i] = panel + (size_t)i * k;
            }
        }
        for (int64_t r = 0; r < m; r++) {
            const float *x = hx_tensor_row(&op->src[0], r);
            float *y = hx_tensor_row(&op->dst, r) + j0;
            for (int i = 0; i < nr; i++) y[i] = kr->dot_f32(rows[i], x, k) * w->scale;
        }
    }
    return HX_OK;
}

/* x16 tiles (cpu-x16.h): quantize the activation rows, then each thread takes a contiguous
 * run of tiles (one sequential stream per thread for decode) over every activation row.
 * Decode (m <= HX_CPU_OWN_ROWS) quantizes its rows in every thread, into the thread's own
 * buffer, instead of splitting them and meeting at a barrier: the barrier cost 1.4-1.8 µs
 * per call on this 2-core VM (rdtsc around it), the redundant quantization of one row
 * ~0.1 µs, and the short decode GEMVs last 20-60 µs. */
#define HX_CPU_OWN_ROWS 2
static int hx_cpu_matmul_x16(const struct hx_op *op, const struct hx_cpu_x16 *x, int nt,
                             void **mem, size_t *mem_bytes)
{
    const int64_t k = x->k, m = op->src[0].n_rows;
    if ((double)m * (double)x->n * (double)k < 65536.0) nt = 1;
    const bool own = m <= HX_CPU_OWN_ROWS;
    const size_t ab = hx__xact_bytes(m, k, x->type);
    int st = hx_cpu_scratch(mem, mem_bytes, ab * (own ? (size_t)nt : 1));
    if (st) return st;
    const float *src = hx_tensor_row(&op->src[0], 0);
    const size_t sstride = op->src[0].row_stride_bytes / sizeof(float);
    float *dst = hx_tensor_row(&op->dst, 0);
    const int64_t dstride = (int64_t)(op->dst.row_stride_bytes / sizeof(float));
    const float scale = op->weight->scale;
    /* AMX for the full blocks of 16 rows of a Q8_0 prefill */
    const int64_t m16 = m / 16 * 16;
    const bool amx = x->type == HX_DTYPE_Q8_0 && m16 > 0 && hx__cpu_amx();
    char *base = *mem;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0, nth = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nth = omp_get_num_threads();
#endif
        struct hx_cpu_xact act;
        if (own) {
            hx__xact_init(&act, base + ab * (size_t)tid, m, k, x->type);
            hx__x16_quantize_rows_avx512(&act, x->type, src, sstride, 0, m);
        } else {
            hx__xact_init(&act, base, m, k, x->type);
            hx__x16_quantize_rows_avx512(&act, x->type, src, sstride, m * tid / nth, m * (tid + 1) / nth);
#pragma omp barrier
        }
        int64_t t0 = x->n_tiles * tid / nth, t1 = x->n_tiles * (tid + 1) / nth;
        if (t0 < t1 && amx) {
            hx__x16_gemm_amx_q8_0(x, &act, 0, m16, t0, t1, dst, dstride, scale);
            if (m16 < m) hx__x16_gemm_avx512(x, &act, m16, m, t0, t1, dst, dstride, scale);
        } else if (t0 < t1) {
            hx__x16_gemm_avx512(x, &act, 0, m, t0, t1, dst, dstride, scale);
        }
    }
    return HX_OK;
}

int hx__cpu_matmul(const struct hx_op *op, int n_threads, void **mem, size_t *mem_bytes)
{
    const struct hx_weight *w = op->weight;
    const struct hx_cpu_kernels *kr = hx__cpu_kernels(hx__cpu_isa());
    const int64_t k = w->n_cols, n = w->n_rows, m = op->src[0].n_rows;
    int nt = n_threads > 0 ? n_threads : 1;
    if ((double)m * (double)n * (double)k < 65536.0) nt = 1;
    if (m == 0 || n == 0) return HX_OK;
    const struct hx_cpu_x16 *x16 = op->weight_handle;
    if (x16 && x16->magic == HX_X16_MAGIC && x16->data && hx__cpu_isa() == HX_CPU_ISA_AVX512)
        return hx_cpu_matmul_x16(op, x16, n_threads > 0 ? n_threads : 1, mem, mem_bytes);
    if (!hx_dtype_is_quantized(w->type)) return hx_cpu_matmul_float(op, kr, nt, mem, mem_bytes);

    const size_t act_bytes = hx__cpu_act_bytes(m, k);
    const size_t per = hx__cpu_panel_bytes(HX_CPU_NR, k);
    int st = hx_cpu_scratch(mem, mem_bytes, act_bytes + per * (size_t)nt + 128);
    if (st) return st;
    char *base = *mem;
    struct hx_cpu_act act;
    hx__cpu_act_init(&act, base, m, k, hx__cpu_act_qb(w->type));
    const bool perm = hx__cpu_type_permuted(w->type);
    char *pbase = base + act_bytes;
    const size_t rb = hx_dtype_row_bytes(w->type, k);
    const int64_t ostride = (int64_t)(op->dst.row_stride_bytes / sizeof(float));
    struct hx_cpu_mm mm = {
        .w = w, .act = &act, .src = &op->src[0], .dst = &op->dst,
        .m = m, .n = n, .k = k, .w_row_bytes = rb, .scale = w->scale,
    };
    const bool fused = m == 1 && kr->gemv_fused != NULL;
    const int64_t n_tiles = (n + HX_CPU_NR - 1) / HX_CPU_NR;

#pragma omp parallel num_threads(nt)
    {
        int tid = 0, nth = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nth = omp_get_num_threads();
#endif
#pragma omp for schedule(static)
        for (int64_t r = 0; r < m; r++) hx__cpu_act_quantize_row(&act, r, hx_tensor_row(&op->src[0], r), perm);
        /* implicit barrier: every activation row is quantized */
        bool done = false;
        if (fused) {
            /* Contiguous chunks of whole tiles, one per thread: sequential streams. */
            int64_t t0 = n_tiles * tid / nth, t1 = n_tiles * (tid + 1) / nth;
            int64_t j0 = t0 * HX_CPU_NR, j1 = HX_MIN(n, t1 * HX_CPU_NR);
            float *y = hx_tensor_row(&op->dst, 0);
            done = j0 >= j1 || kr->gemv_fused(&mm, j0, j1, y + j0);
            if (done && w->scale != 1.0f)
                for (int64_t j = j0; j < j1; j++) y[j] *= w->scale;
        }
        if (!done) {
            struct hx_cpu_panel p;
            hx__cpu_panel_init(&p, pbase + per * (size_t)tid, HX_CPU_NR, k);
            int64_t t0 = n_tiles * tid / nth, t1 = n_tiles * (tid + 1) / nth;
            for (int64_t t = t0; t < t1; t++) {
                const int64_t j0 = t * HX_CPU_NR;
                const int nr = (int)HX_MIN((int64_t)HX_CPU_NR, n - j0);
                for (int i = 0; i < nr; i++)
                    kr->unpack_row(w->type, (const char *)w->data + (size_t)(j0 + i) * rb, k, &p, i);
                float *out = hx_tensor_row(&op->dst, 0) + j0;
                kr->panel_dot(&p, nr, &act, 0, m, out, ostride);
                hx_cpu_scale_tile(out, ostride, m, nr, w->scale);
            }
        }
    }
    return HX_OK;
}
