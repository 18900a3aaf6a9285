/*
 * cpu-matmul.c — MATMUL on the host: quantize the activation rows once (quantized weights),
 * then split the output columns over the threads (pool.h) in tiles of 4 weight rows. Each tile
 * is unpacked into a panel once and multiplied with every activation row by the selected ISA's
 * panel kernel; m = 1 with a fused kernel for the type streams the GGUF rows directly.
 * Float weights are converted to f32 per tile and reused the same way.
 * The scratch these use (one buffer the device keeps, grown to its largest call: quantized
 * activations, each thread's panel or activation slice) is sized by hx__cpu_matmul_scratch
 * alone, for a run and for a plan's memory (cpu.c's scratch_bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu-impl.h"
#include "cpu-x16.h"
#include "hx-impl.h"
#include "pool.h"

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

struct hx_float_job {
    const struct hx_op *op;
    const struct hx_cpu_kernels *kr;
    char *base;
    size_t rb, per;
};

static void hx_float_tile(void *arg, int64_t t, int tid)
{
    const struct hx_float_job *j = arg;
    const struct hx_op *op = j->op;
    const struct hx_weight *w = op->weight;
    const int64_t k = w->n_cols, n = w->n_rows, m = op->src[0].n_rows;
    float *panel = (float *)(((uintptr_t)(j->base + j->per * (size_t)tid) + 63) & ~(uintptr_t)63);
    const int64_t j0 = t * HX_CPU_NR;
    const int nr = (int)HX_MIN((int64_t)HX_CPU_NR, n - j0);
    const float *rows[HX_CPU_NR];
    for (int i = 0; i < nr; i++) {
        const char *src = (const char *)w->data + (size_t)(j0 + i) * j->rb;
        if (w->type == HX_DTYPE_F32) {
            rows[i] = (const float *)src;
        } else {
            j->kr->to_f32(w->type, src, panel + (size_t)i * k, k);
            rows[i] = panel + (size_t)i * k;
        }
    }
    for (int64_t r = 0; r < m; r++) {
        const float *x = hx_tensor_row(&op->src[0], r);
        float *y = hx_tensor_row(&op->dst, r) + j0;
        for (int i = 0; i < nr; i++) y[i] = j->kr->dot_f32(rows[i], x, k) * w->scale;
    }
}

/* Float weights, m = 1 (decode): tiles of HX_CPU_NR rows handed out in chunks as the x16
 * GEMVs are (a contiguous share per thread, one sequential stream, stolen from at the end);
 * the kernel reads the rows in place, converting in registers (no f32 copy of the tile). */
struct hx_fgemv_job {
    const struct hx_op *op;
    const struct hx_cpu_kernels *kr;
    const void *rows;
    size_t rb, pf;
};

static void hx_fgemv_chunk(void *arg, int64_t t0, int64_t t1, int tid, bool first)
{
    const struct hx_fgemv_job *j = arg;
    const struct hx_weight *w = j->op->weight;
    const int64_t n = w->n_rows, j0 = t0 * HX_CPU_NR, j1 = HX_MIN(n, t1 * HX_CPU_NR);
    const char *rows = (const char *)j->rows + (size_t)j0 * j->rb;
    (void)tid;
    if (first && j->pf) { /* the stream's first bytes, before the kernel's prefetch reaches */
        const size_t len = HX_MIN(j->pf, (size_t)(j1 - j0) * j->rb);
        for (size_t o = 0; o < len; o += 64)
            __builtin_prefetch(rows + o, 0, 1); /* prefetcht2: into L2 */
    }
    j->kr->gemv_float(w->type, rows, j->rb, hx_tensor_row(&j->op->src[0], 0), w->n_cols, j1 - j0,
                      hx_tensor_row(&j->op->dst, 0) + j0, w->scale, j->pf);
}

static int hx_cpu_matmul_float(const struct hx_op *op, const struct hx_cpu_kernels *kr, int nt,
                               bool fgemv, void *mem)
{
    const struct hx_weight *w = op->weight;
    const int64_t k = w->n_cols, n = w->n_rows;
    const struct hx_cpu_x16 *x16 = op->weight_handle;
    const bool h = x16 && x16->magic == HX_X16_MAGIC;
    if (fgemv) {
        struct hx_fgemv_job f = {.op = op, .kr = kr, .rb = hx_dtype_row_bytes(w->type, k)};
        f.pf = (size_t)(h ? x16->prefetch : hx__cpu_decode_prefetch(w->type));
        f.rows = h && x16->rows ? x16->rows : w->data;
        int64_t grain = (int64_t)((h ? x16->chunk_decode : (size_t)64 << 10) / (HX_CPU_NR * f.rb));
        if (grain < 1) grain = 1;
        hx__pool_chunks((n + HX_CPU_NR - 1) / HX_CPU_NR, grain, nt, hx_fgemv_chunk, &f);
        return HX_OK;
    }
    struct hx_float_job j = {.op = op, .kr = kr, .rb = hx_dtype_row_bytes(w->type, k),
                             .per = (size_t)HX_CPU_NR * k * 4 + 64};
    j.base = mem; /* hx__cpu_matmul_scratch bytes */
    hx__pool_for((n + HX_CPU_NR - 1) / HX_CPU_NR, nt, 0, hx_float_tile, &j);
    return HX_OK;
}

/* x16 tiles (cpu-x16.h): quantize the activation rows, then the tiles are handed out in chunks
 * (hx__pool_chunks): each thread starts on a contiguous share of the tiles (one sequential
 * stream per thread for decode) and takes it a chunk at a time from the front; a thread that
 * runs out steals the back half of what another has left, so a thread the OS has descheduled
 * does not hold up the call. Every tile's 16 outputs come from that tile alone, so the split
 * does not change a bit of the result.
 * Decode (m <= HX_CPU_OWN_ROWS) quantizes its rows in every thread, before its first chunk,
 * into the thread's own buffer, instead of splitting them and meeting at a barrier: an OpenMP
 * barrier cost 1.4-1.8 µs per call on the 2-core VM (rdtsc around it), the redundant
 * quantization of one row ~0.1 µs, and the short decode GEMVs last 10-60 µs. */
#define HX_CPU_OWN_ROWS 2
struct hx_x16_job {
    const struct hx_op *op;
    const struct hx_cpu_x16 *x;
    char *base;
    size_t ab;
    int64_t m;
    bool own, amx, lut;
};

/* Prefill: the rows are quantized into one shared buffer, a chunk of rows at a time. */
static void hx_x16_quantize_chunk(void *arg, int64_t r0, int64_t r1, int tid, bool first)
{
    const struct hx_x16_job *j = arg;
    (void)tid, (void)first;
    struct hx_cpu_xact act;
    hx__xact_init(&act, j->base, j->m, j->x->k, j->x->type);
    hx__x16_quantize_rows_avx512(&act, j->x->type, hx_tensor_row(&j->op->src[0], 0),
                                 j->op->src[0].row_stride_bytes / sizeof(float), r0, r1);
}

#define HX_X16_ACT_HDR 128 /* bytes ahead of a decode thread's activation data: its struct */
_Static_assert(sizeof(struct hx_cpu_xact) <= HX_X16_ACT_HDR, "struct hx_cpu_xact fits its header");

/* Q1_0 decode of one row by table lookup where the CPU has VBMI (cpu-x16-vbmi.c) */
static bool hx_x16_lut(enum hx_dtype t, int64_t m)
{
    return t == HX_DTYPE_Q1_0 && m == 1 && hx__cpu_vbmi();
}

/* Bytes of one x16 activation buffer: the quantized rows (and the Q1_0 tables); a decode
 * thread's own slice adds its alignment and its struct. */
static size_t hx_x16_slice_bytes(enum hx_dtype t, int64_t m, int64_t k)
{
    size_t ab = hx__xact_bytes(m, k, t) + (hx_x16_lut(t, m) ? hx__x16_q1_lut_bytes(k) + 64 : 0);
    return m <= HX_CPU_OWN_ROWS ? ab + 64 + HX_X16_ACT_HDR : ab;
}

static void hx_x16_gemm_chunk(void *arg, int64_t t0, int64_t t1, int tid, bool first)
{
    const struct hx_x16_job *j = arg;
    const struct hx_cpu_x16 *x = j->x;
    const struct hx_op *op = j->op;
    const int64_t m = j->m, m16 = m / 16 * 16;
    struct hx_cpu_xact shared, *act = &shared;
    if (j->own) {
        /* The thread's slice of the scratch: its struct hx_cpu_xact, then the data. With the
         * struct on this thread's stack, Q8_0 2048x1024 ran 3-6% slower from DRAM on the Zen 4
         * VM (x1.16-1.22 against x1.10-1.16 of a plain read of the same tiles, call-by-call
         * A/B, 9 runs of 40 rotations); Q8_0 1024x4096 and 3072x1024, Q4_K, Q6_K and TQ2_0 did
         * not move, nor did anything in cache. Why is not known (no counters on that VM). */
        char *slice = (char *)(((uintptr_t)(j->base + j->ab * (size_t)tid) + 63) & ~(uintptr_t)63);
        act = (struct hx_cpu_xact *)(void *)slice;
        if (first) {
            /* decode: the first lines of this chunk are fetched while the thread quantizes */
            if (j->lut) hx__x16_q1_prefetch_head(x, t0, t1);
            else hx__x16_prefetch_head(x, t0, t1);
            hx__xact_init(act, slice + HX_X16_ACT_HDR, m, x->k, x->type);
            hx__x16_quantize_rows_avx512(act, x->type, hx_tensor_row(&op->src[0], 0),
                                         op->src[0].row_stride_bytes / sizeof(float), 0, m);
            if (j->lut) { /* built by the first chunk's walk, read by the thread's later ones */
                const uintptr_t e =
                    (uintptr_t)(slice + HX_X16_ACT_HDR + hx__xact_bytes(m, x->k, x->type));
                act->lut = (uint8_t *)((e + 63) & ~(uintptr_t)63);
            }
        }
    } else {
        hx__xact_init(act, j->base, m, x->k, x->type);
    }
    float *dst = hx_tensor_row(&op->dst, 0);
    const int64_t dstride = (int64_t)(op->dst.row_stride_bytes / sizeof(float));
    const float scale = op->weight->scale;
    if (j->amx) {
        hx__x16_gemm_amx_q8_0(x, act, 0, m16, t0, t1, dst, dstride, scale);
        if (m16 < m) hx__x16_gemm_avx512(x, act, m16, m, t0, t1, dst, dstride, scale);
    } else {
        hx__x16_gemm_avx512(x, act, 0, m, t0, t1, dst, dstride, scale);
    }
    if (j->lut) act->lut_built = true;
}

static int hx_cpu_matmul_x16(const struct hx_op *op, const struct hx_cpu_x16 *x, int nt, void *mem)
{
    const int64_t k = x->k, m = op->src[0].n_rows;
    if ((double)m * (double)x->n * (double)k < 65536.0) nt = 1;
    struct hx_x16_job j = {.op = op, .x = x, .m = m, .own = m <= HX_CPU_OWN_ROWS};
    j.lut = hx_x16_lut(x->type, m);
    j.ab = hx_x16_slice_bytes(x->type, m, k);
    j.base = mem; /* hx__cpu_matmul_scratch bytes */
    /* AMX for the full blocks of 16 rows of a Q8_0 prefill */
    j.amx = x->type == HX_DTYPE_Q8_0 && m >= 16 && hx__cpu_amx();
    if (!j.own) hx__pool_chunks(m, 16, nt, hx_x16_quantize_chunk, &j);
    int64_t grain = (int64_t)((j.own ? x->chunk_decode : x->chunk_prefill) / x->tile_bytes);
    if (grain < 1) grain = 1;
    /* The Q1_0 lookup walk reads its tiles as 8 streams side by side, each a chunk's eighth
     * (cpu-x16-vbmi.c): 64 KiB chunks cut them to 3 tiles and cost 10-30% (bench-pool, threads
     * pinned, 1024x2048 p10 10.6 -> 13.8-14.3 µs), so it takes a thread's whole share. */
    if (j.lut && grain < (x->n_tiles + nt - 1) / nt) grain = (x->n_tiles + nt - 1) / nt;
    hx__pool_chunks(x->n_tiles, grain, nt, hx_x16_gemm_chunk, &j);
    return HX_OK;
}

/* Quantized weights without x16 tiles: GGUF rows unpacked into panels of HX_CPU_NR. */
struct hx_gen_job {
    const struct hx_cpu_kernels *kr;
    const struct hx_op *op;
    struct hx_cpu_act act;
    struct hx_cpu_mm mm;
    char *pbase;
    size_t per;
    bool perm;
};

static void hx_gen_quantize_row(void *arg, int64_t r, int tid)
{
    struct hx_gen_job *j = arg;
    (void)tid;
    hx__cpu_act_quantize_row(&j->act, r, hx_tensor_row(&j->op->src[0], r), j->perm);
}

/* Tiles t0..t1 (HX_CPU_NR rows each), a chunk of hx__pool_chunks: contiguous runs of whole
 * tiles, taken from the front of a thread's share (sequential streams), stolen at the end. */
static void hx_gen_chunk(void *arg, int64_t t0, int64_t t1, int tid, bool first)
{
    struct hx_gen_job *j = arg;
    const struct hx_op *op = j->op;
    const struct hx_weight *w = op->weight;
    const int64_t n = j->mm.n, m = j->mm.m, k = j->mm.k;
    const size_t rb = j->mm.w_row_bytes;
    (void)first;
    bool done = false;
    if (m == 1 && j->kr->gemv_fused) {
        const int64_t j0 = t0 * HX_CPU_NR, j1 = HX_MIN(n, t1 * HX_CPU_NR);
        float *y = hx_tensor_row(&op->dst, 0);
        done = j0 >= j1 || j->kr->gemv_fused(&j->mm, j0, j1, y + j0);
        if (done && w->scale != 1.0f)
            for (int64_t c = j0; c < j1; c++) y[c] *= w->scale;
    }
    if (done) return;
    struct hx_cpu_panel p;
    hx__cpu_panel_init(&p, j->pbase + j->per * (size_t)tid, HX_CPU_NR, k);
    const int64_t ostride = (int64_t)(op->dst.row_stride_bytes / sizeof(float));
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = t * HX_CPU_NR;
        const int nr = (int)HX_MIN((int64_t)HX_CPU_NR, n - j0);
        for (int i = 0; i < nr; i++)
            j->kr->unpack_row(w->type, (const char *)w->data + (size_t)(j0 + i) * rb, k,
                              hx_weight_row_tscale(w, j0 + i), &p, i);
        float *out = hx_tensor_row(&op->dst, 0) + j0;
        j->kr->panel_dot(&p, nr, &j->act, 0, m, out, ostride);
        hx_cpu_scale_tile(out, ostride, m, nr, w->scale);
    }
}

/* Which kernels run op: x16 tiles, the float GEMV (no scratch), or panels. repack < 0: from
 * its handle, as a run goes; a plan's op has none, and then repack (0, 1) says whether
 * weight_prepare will make tiles (and HX_CPU_FLOAT_GEMV is read as weight_prepare reads it). */
static void hx_cpu_mm_path(const struct hx_op *op, int repack, bool *x16p, bool *fgemv)
{
    const struct hx_cpu_x16 *x = op->weight_handle;
    const bool h = x && x->magic == HX_X16_MAGIC;
    const bool avx512 = hx__cpu_isa() == HX_CPU_ISA_AVX512;
    bool no_fgemv;
    if (repack < 0) {
        *x16p = h && x->data && avx512;
        no_fgemv = h && x->no_float_gemv;
    } else {
        const char *fg = getenv("HX_CPU_FLOAT_GEMV");
        *x16p = repack && avx512;
        no_fgemv = !repack && fg && !strcmp(fg, "0");
    }
    *fgemv = op->src[0].n_rows == 1 && hx__cpu_kernels(hx__cpu_isa())->gemv_float && !no_fgemv &&
             !hx_dtype_is_quantized(op->weight->type);
}

size_t hx__cpu_matmul_scratch(const struct hx_op *op, int n_threads, int repack)
{
    const struct hx_weight *w = op->weight;
    const int64_t k = w->n_cols, n = w->n_rows, m = op->src[0].n_rows;
    if (m <= 0 || n == 0) return 0;
    bool x16p, fgemv;
    hx_cpu_mm_path(op, repack, &x16p, &fgemv);
    int nt = n_threads > 0 ? n_threads : 1;
    if ((double)m * (double)n * (double)k < 65536.0) nt = 1;
    if (x16p) return hx_x16_slice_bytes(w->type, m, k) * (m <= HX_CPU_OWN_ROWS ? (size_t)nt : 1);
    if (fgemv) return 0;
    if (!hx_dtype_is_quantized(w->type)) return ((size_t)HX_CPU_NR * k * 4 + 64) * (size_t)nt + 64;
    return hx__cpu_act_bytes(m, k) + hx__cpu_panel_bytes(HX_CPU_NR, k) * (size_t)nt + 128;
}

int hx__cpu_matmul(const struct hx_op *op, int n_threads, void **mem, size_t *mem_bytes)
{
    const struct hx_weight *w = op->weight;
    const struct hx_cpu_kernels *kr = hx__cpu_kernels(hx__cpu_isa());
    const int64_t k = w->n_cols, n = w->n_rows, m = op->src[0].n_rows;
    int nt = n_threads > 0 ? n_threads : 1;
    if ((double)m * (double)n * (double)k < 65536.0) nt = 1;
    if (m == 0 || n == 0) return HX_OK;
    /* one sizing of the scratch, for this run and for a plan's memory (cpu.c scratch_bytes) */
    int st = hx_cpu_scratch(mem, mem_bytes, hx__cpu_matmul_scratch(op, n_threads, -1));
    if (st) return st;
    bool x16p, fgemv;
    hx_cpu_mm_path(op, -1, &x16p, &fgemv);
    if (x16p) return hx_cpu_matmul_x16(op, op->weight_handle, n_threads > 0 ? n_threads : 1, *mem);
    if (!hx_dtype_is_quantized(w->type)) return hx_cpu_matmul_float(op, kr, nt, fgemv, *mem);

    const struct hx_cpu_x16 *x16 = op->weight_handle;
    struct hx_gen_job j = {.kr = kr, .op = op};
    const size_t act_bytes = hx__cpu_act_bytes(m, k);
    j.per = hx__cpu_panel_bytes(HX_CPU_NR, k);
    char *base = *mem;
    hx__cpu_act_init(&j.act, base, m, k, hx__cpu_act_qb(w->type, k));
    j.perm = hx__cpu_type_permuted(w->type, k);
    j.pbase = base + act_bytes;
    j.mm = (struct hx_cpu_mm){
        .w = w, .act = &j.act, .src = &op->src[0], .dst = &op->dst,
        .m = m, .n = n, .k = k, .w_row_bytes = hx_dtype_row_bytes(w->type, k), .scale = w->scale,
    };
    hx__pool_for(m, nt, 0, hx_gen_quantize_row, &j);
    /* chunks as for x16 (cpu-x16.h), from the plain handle weight_prepare made, if any */
    size_t chunk_decode = 64 << 10, chunk_prefill = 64 << 10;
    if (x16 && x16->magic == HX_X16_MAGIC)
        chunk_decode = x16->chunk_decode, chunk_prefill = x16->chunk_prefill;
    const size_t chunk = m <= 2 ? chunk_decode : chunk_prefill;
    int64_t grain = (int64_t)(chunk / (HX_CPU_NR * j.mm.w_row_bytes));
    if (grain < 1) grain = 1;
    hx__pool_chunks((n + HX_CPU_NR - 1) / HX_CPU_NR, grain, nt, hx_gen_chunk, &j);
    return HX_OK;
}
