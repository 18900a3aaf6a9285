/*
 * hip-gemv.h — the decode GEMVs of the HIP module (n <= 8 activation rows per launch) and
 * their launch helpers (host side, left out of the hipRTC source):
 *
 *   hx_hip_gemv_q        quantized weights on int8 activations (hx_hip_quantize_q8): a
 *                        256-thread block takes 8·R weight rows (R = 1, 2 or 4 per type,
 *                        hx_hip_gemv_rpw) and a slice of K; its threads first copy the slice
 *                        of every row into shared memory with aligned 16-byte loads (each
 *                        thread 4 of them, independent, in flight together), then each
 *                        32-lane group computes its R rows from there at once: lanes over the
 *                        rows' parts (hx_hip_vdot), each part's activations loaded once for
 *                        the R rows, integer dot products (dp4a / sdot4), a shuffle reduction
 *                        per row
 *   hx_hip_gemv_f        F32 / F16 / BF16 weights on f32 activations: one 32-lane group per
 *                        row and slice of K, 16-byte loads, four of them issued before use
 *   hx_hip_gemv_combine  the sum of the slices' partial results (split K), times the scale
 *
 * GGUF blocks are 2-byte aligned at best (18, 34, 54, 66, 210 bytes), so the weights are not
 * read per lane in place: the shared-memory copy reads each row slice as the aligned 16-byte
 * chunks that cover it (the first may start up to 14 bytes before it), the same bytes per
 * weight as stored, and the lanes decode from shared memory at any 2-byte offset. A chunk
 * read is one that holds a byte of the slice, so it lies inside the 16-byte rounded weight
 * allocation (hx_hip_weight_prepare rounds it).
 *
 * Split K: when a row slice does not fit its shared-memory slot, or the grid would have too
 * few blocks for the GPU (against 4 blocks per multiprocessor), K is cut into
 * S slices of a multiple of 256 elements (gridDim.y); each block writes its slice's sums to
 * scratch, and hx_hip_gemv_combine adds them in slice order. The slices depend on K, N and
 * the GPU only, through the bytes per 256 elements and the rows per group, and I2_S is planned
 * with TQ2_0's (66 bytes, 4 rows), so the same ternary weights as I2_S and as TQ2_0 are cut
 * alike; within a slice a lane takes
 * the parts whose index (from the slice's start) is its lane number modulo 32, in order, and
 * the part numbering of the two types covers the same elements (hip-kernels.h), so their sums
 * run in the same order and give the same bits (test-qwen3 tern_i2_s_equals_tq2_0_hip).
 */
#pragma once

#include "hip-kernels.h"

#define HX_HIP_GEMV_STAGE 16384 /* bytes of shared memory per block of hx_hip_gemv_q */
#define HX_HIP_GEMV_THREADS (32 * HX_HIP_GEMV_WARPS)
#define HX_HIP_GEMV_BLOCKS_PER_SM 4 /* fewer blocks than this per multiprocessor: split K */
#define HX_HIP_ROWS_MAX 65535u  /* grid y/z limit: kernels loop rows over gridDim.y */

/* Weight rows per 32-lane group, computed together: a lane's activation loads for a part
 * serve all R rows (the compiler merges the R inlined hx_hip_vdot's identical loads; nothing
 * is stored in between). More for the types with few weight bytes per activation byte. */
static __host__ __device__ constexpr int hx_hip_gemv_rpw(int t)
{
    return t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_I2_S ||
                   t == HX_DTYPE_Q1_0 || t == HX_DTYPE_Q2_0
               ? 4
           : t == HX_DTYPE_Q4_0 || t == HX_DTYPE_Q4_K ? 2
                                                       : 1;
}

/* TQ1_0's hx_hip_vdot for R weight rows at once (b[q] + boff: row q's block), each row's sums
 * in the same order as there: its parts branch on p, so the R inlined single-row calls would
 * each load the activations again; here the rows loop inside the branches. */
template <int NC, int R>
static __device__ __forceinline__ void hx_hip_vdot_tq1(const uint8_t *const *b, int64_t boff,
                                                       int64_t blk, int p, const hx_hip_act &a,
                                                       float (*acc)[NC])
{
    const int64_t e0 = blk * 256, ab0 = e0 / 32;
    if (p == 7) return;
    const uint32_t p3[5] = {1, 3, 9, 27, 81};
    float dw[R];
    for (int q = 0; q < R; q++) dw[q] = hx_hip_ldh(b[q] + boff + 52);
    if (p < 6) {
        const int off = p < 4 ? 8 * p : 32 + 8 * (p - 4);
        int w0[R], w1[R];
        for (int q = 0; q < R; q++)
            w0[q] = hx_hip_ld32(b[q] + boff + off), w1[q] = hx_hip_ld32(b[q] + boff + off + 4);
        for (int c = 0; c < NC; c++) {
            float f[R];
            for (int q = 0; q < R; q++) f[q] = 0.0f;
            HX_HIP_UNROLL
            for (int n = 0; n < 5; n++) {
                const int e = p < 4 ? 32 * n + 8 * p : 160 + 16 * n + 8 * (p - 4);
                const int2 v = hx_hip_a8(a, c, e0 + e);
                const float d = hx_hip_ad(a, c, ab0 + e / 32).x;
                for (int q = 0; q < R; q++)
                    f[q] += d * (float)hx_hip_dot8(hx_hip_trit4(w0[q], p3[n]),
                                                   hx_hip_trit4(w1[q], p3[n]), v);
            }
            if (p == 0 || p == 4)
                for (int k = p == 0 ? 0 : 5; k < (p == 0 ? 5 : 8); k++) {
                    const float2 ds = hx_hip_ad(a, c, ab0 + k);
                    for (int q = 0; q < R; q++) f[q] -= ds.x * ds.y;
                }
            for (int q = 0; q < R; q++) acc[q][c] += dw[q] * f[q];
        }
    } else {
        int w[R];
        for (int q = 0; q < R; q++) w[q] = hx_hip_ld32(b[q] + boff + 48);
        for (int c = 0; c < NC; c++) {
            int s[R];
            for (int q = 0; q < R; q++) s[q] = 0;
            HX_HIP_UNROLL
            for (int n = 0; n < 4; n++) {
                const int v = *(const int *)(hx_hip_aq(a, c) + e0 + 240 + 4 * n);
                for (int q = 0; q < R; q++) s[q] = hx_hip_dp4a(hx_hip_trit4(w[q], p3[n]), v, s[q]);
            }
            const float d = hx_hip_ad(a, c, ab0 + 7).x;
            for (int q = 0; q < R; q++) acc[q][c] += dw[q] * d * (float)s[q];
        }
    }
}

/* The weight rows [blockIdx.x·8·R, +8·R) over elements [blockIdx.y·slice, +slice) of K, R =
 * hx_hip_gemv_rpw(T); group w takes rows 8·R·blockIdx.x + R·w + [0, R). S = gridDim.y
 * slices: S = 1 writes dst (times scale), else part[(s·n + c)·N + row]. */
template <int T, int NC>
__global__ void __launch_bounds__(HX_HIP_GEMV_THREADS)
    hx_hip_gemv_q(const uint8_t *W, int64_t row_bytes, int64_t N, hx_hip_act a, float *dst,
                  int64_t dst_stride, float scale, float ts, int64_t slice, float *part)
{
    typedef hx_hip_blk<T> G;
    enum { R = hx_hip_gemv_rpw(T), RT = HX_HIP_GEMV_WARPS * R, SLOT = HX_HIP_GEMV_STAGE / RT };
    enum { CH = SLOT / 16, L = HX_HIP_GEMV_STAGE / 16 / HX_HIP_GEMV_THREADS };
    __shared__ uint4 stage[HX_HIP_GEMV_STAGE / 16];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row0 = (int64_t)blockIdx.x * RT;
    const int64_t e0 = (int64_t)blockIdx.y * slice, e1 = HX_MIN(a.K, e0 + slice);
    const int64_t kb0 = e0 / G::E, nb = (e1 - e0) / G::E, sbytes = nb * G::B;
    /* the slice of row r at stage + r·SLOT + (its address mod 16), as the 16-byte chunks
     * that hold its bytes (zeros past the last row): every thread issues its L loads before
     * it stores any */
    uint4 v[L];
    HX_HIP_UNROLL
    for (int i = 0; i < L; i++) {
        const int j = tid + HX_HIP_GEMV_THREADS * i, r = j / CH, ch = j % CH;
        const int64_t row = row0 + r;
        const uint8_t *s0 = W + HX_MIN(row, N - 1) * row_bytes + kb0 * G::B;
        const uint8_t *c0 = (const uint8_t *)((uintptr_t)s0 & ~(uintptr_t)15) + 16 * ch;
        v[i].x = v[i].y = v[i].z = v[i].w = 0u;
        if (row < N && c0 < s0 + sbytes) v[i] = *(const uint4 *)c0;
    }
    HX_HIP_UNROLL
    for (int i = 0; i < L; i++) stage[tid + HX_HIP_GEMV_THREADS * i] = v[i];
    __syncthreads();
    const int64_t rw = row0 + (int64_t)R * warp; /* this group's first row */
    if (rw >= N) return; /* the whole group leaves together; no barrier follows */
    const uint8_t *b[R];
    HX_HIP_UNROLL
    for (int q = 0; q < R; q++) /* rows past the last read zeros; their sums are dropped */
        b[q] = (const uint8_t *)stage + (R * warp + q) * SLOT +
               ((uintptr_t)(W + HX_MIN(rw + q, N - 1) * row_bytes + kb0 * G::B) & 15);
    /* More than LIM sums a lane (16; TQ2_0, whose parts hold four activation blocks: 8)
     * spilled registers on RDNA (test-hip-isa): the activation rows then go in NH groups,
     * each reading the staged weights again; every sum keeps its order, so the bits do not
     * change. */
    enum { LIM = T == HX_DTYPE_TQ2_0 ? 8 : 16, NH = R * NC > LIM ? R * NC / LIM : 1 };
    enum { NCH = NC / NH };
    static_assert(NC % NH == 0, "hx_hip_gemv_q: activation rows split in whole groups");
    const int64_t tasks = nb * G::P;
    for (int h = 0; h < NH; h++) {
        hx_hip_act ah = a;
        ah.q += (int64_t)h * NCH * a.K, ah.d += (int64_t)h * NCH * (a.K / 32);
        ah.n = a.n - h * NCH; /* may be < 1: nothing of this group is written */
        if (ah.n < 1) break;
        float acc[R][NCH];
        for (int q = 0; q < R; q++)
            for (int c = 0; c < NCH; c++) acc[q][c] = 0.0f;
        for (int64_t i = lane; i < tasks; i += 32) {
            const int64_t blk = i / G::P;
            const int p = (int)(i % G::P);
            if constexpr (T == HX_DTYPE_TQ1_0) {
                hx_hip_vdot_tq1<NCH, R>(b, blk * G::B, kb0 + blk, p, ah, acc);
            } else {
                HX_HIP_UNROLL
                for (int q = 0; q < R; q++)
                    hx_hip_vdot<T, NCH>(b[q] + blk * G::B, kb0 + blk, p, ah, acc[q], ts);
            }
        }
        for (int q = 0; q < R; q++) {
            if (rw + q >= N) break;
            for (int c = 0; c < NCH; c++) {
                const float s = hx_hip_warp_sum(acc[q][c]);
                const int ca = h * NCH + c;
                if (lane != 0 || ca >= a.n) continue;
                if (gridDim.y == 1) dst[ca * dst_stride + rw + q] = s * scale;
                else part[((int64_t)blockIdx.y * a.n + ca) * N + rw + q] = s;
            }
        }
    }
}

/* F32 / F16 / BF16 weights on f32 activations: one 32-lane group per row, elements
 * [blockIdx.y·slice, +slice) of K. VEC: 8 elements per lane and step through 16-byte loads,
 * 4 steps' loads issued before their arithmetic; needs K % 8 == 0 and 16-byte aligned weight
 * and activation rows (slice is a multiple of 256). Output as hx_hip_gemv_q. */
template <int T, int NC, bool VEC>
__global__ void __launch_bounds__(HX_HIP_GEMV_THREADS)
    hx_hip_gemv_f(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                  int64_t src_stride, int n, float *dst, int64_t dst_stride, float scale,
                  int64_t slice, float *part)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * HX_HIP_GEMV_WARPS + threadIdx.x / 32;
    if (row >= N) return; /* the whole group leaves together */
    const int64_t k0 = (int64_t)blockIdx.y * slice, k1 = HX_MIN(K, k0 + slice);
    const uint8_t *wr = W + row * row_bytes;
    float acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    if (VEC) {
        enum { U = 4, ES = (int)sizeof(float) / (T == HX_DTYPE_F32 ? 1 : 2) };
        for (int64_t k = k0 + 8 * lane; k < k1; k += 256 * U) {
            uint4 raw[U][ES / 2] = {}; /* F32: two 16-byte loads per 8 elements, else one */
            HX_HIP_UNROLL
            for (int u = 0; u < U; u++)
                if (k + 256 * u < k1)
                    for (int h = 0; h < ES / 2; h++)
                        raw[u][h] = *(const uint4 *)(wr + ES * (k + 256 * u) + 16 * h);
            HX_HIP_UNROLL
            for (int u = 0; u < U; u++) {
                const int64_t ku = k + 256 * u;
                if (ku >= k1) break;
                float w[8];
                for (int h = 0; h < ES / 2; h++) {
                    const uint32_t x[4] = {raw[u][h].x, raw[u][h].y, raw[u][h].z, raw[u][h].w};
                    for (int i = 0; i < 4; i++) {
                        if (T == HX_DTYPE_F32) {
                            w[4 * h + i] = __uint_as_float(x[i]);
                        } else {
                            const uint16_t lo = (uint16_t)(x[i] & 0xFFFFu),
                                           hi = (uint16_t)(x[i] >> 16);
                            w[2 * i] = T == HX_DTYPE_F16 ? hx_hip_h2f(lo) : hx_hip_bf2f(lo);
                            w[2 * i + 1] = T == HX_DTYPE_F16 ? hx_hip_h2f(hi) : hx_hip_bf2f(hi);
                        }
                    }
                }
                for (int c = 0; c < NC; c++) {
                    if (c >= n) continue;
                    const float4 *s = (const float4 *)(src + c * src_stride + ku);
                    const float4 s0 = s[0], s1 = s[1];
                    acc[c] += w[0] * s0.x + w[1] * s0.y + w[2] * s0.z + w[3] * s0.w +
                              w[4] * s1.x + w[5] * s1.y + w[6] * s1.z + w[7] * s1.w;
                }
            }
        }
    } else {
        for (int64_t k = k0 + lane; k < k1; k += 32) {
            const float w = hx_hip_dq1<T>(wr, k);
            for (int c = 0; c < NC; c++)
                if (c < n) acc[c] += w * src[c * src_stride + k];
        }
    }
    for (int c = 0; c < NC; c++) {
        const float s = hx_hip_warp_sum(acc[c]);
        if (lane != 0 || c >= n) continue;
        if (gridDim.y == 1) dst[c * dst_stride + row] = s * scale;
        else part[((int64_t)blockIdx.y * n + c) * N + row] = s;
    }
}

/* dst[c][row] = (slice 0 + slice 1 + ... + slice S-1) · scale, one thread per (row, c). */
__global__ void __launch_bounds__(256)
    hx_hip_gemv_combine(const float *part, int S, int64_t N, int n, float *dst,
                        int64_t dst_stride, float scale)
{
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int c = blockIdx.y;
    if (row >= N) return;
    float s = 0.0f;
    for (int i = 0; i < S; i++) s += part[((int64_t)i * n + c) * N + row];
    dst[c * dst_stride + row] = s * scale;
}

/* ---- launches (host) --------------------------------------------------------------------- */
#if !defined(HX_HIP_RTC)

static unsigned hx_hip_rows_grid(int64_t n)
{
    return (unsigned)HX_MIN((int64_t)HX_HIP_ROWS_MAX, n);
}

/* A weight as the GEMVs see it. */
struct hx_hip_gemv_w {
    const uint8_t *W;
    int64_t row_bytes, N, K;
    float scale, ts;
};

/* How a GEMV is cut: S slices of `slice` elements (a multiple of 256). */
struct hx_hip_gemv_plan {
    int S;
    int64_t slice;
};

/* Bytes per 256 elements as the plan counts them (I2_S as TQ2_0: the same cuts). */
static int64_t hx_hip_gemv_unit_bytes(int t)
{
    switch (t) {
    case HX_DTYPE_F32: return 1024;
    case HX_DTYPE_F16:
    case HX_DTYPE_BF16: return 512;
    case HX_DTYPE_Q8_0: return 256 / 32 * 34;
    case HX_DTYPE_Q4_0: return 256 / 32 * 18;
    case HX_DTYPE_Q4_K: return 144;
    case HX_DTYPE_Q6_K: return 210;
    case HX_DTYPE_TQ1_0: return 54;
    case HX_DTYPE_TQ2_0:
    case HX_DTYPE_I2_S: return 66;
    case HX_DTYPE_Q1_0: return 2 * 18;
    case HX_DTYPE_Q2_0: return 4 * 18;
    default: return 1024;
    }
}

/* Quantized types: a slice must fit a row's shared-memory slot (less 32 bytes for the chunks'
 * misalignment); float types are not staged. Then K is cut further while the grid has fewer
 * than HX_HIP_GEMV_BLOCKS_PER_SM blocks per multiprocessor. */
static hx_hip_gemv_plan hx_hip_gemv_plan_of(int t, int64_t K, int64_t N, int n_sm)
{
    const bool staged = t != HX_DTYPE_F32 && t != HX_DTYPE_F16 && t != HX_DTYPE_BF16;
    const int64_t rt = (int64_t)HX_HIP_GEMV_WARPS * (staged ? hx_hip_gemv_rpw(t) : 1);
    const int64_t ub = hx_hip_gemv_unit_bytes(t), units = (K + 255) / 256;
    const int64_t target = (int64_t)HX_HIP_GEMV_BLOCKS_PER_SM * HX_MAX(n_sm, 1);
    const int64_t blocks = (N + rt - 1) / rt;
    const int64_t fit = (HX_HIP_GEMV_STAGE / rt - 32) / ub; /* 256-element units per slot */
    int64_t S = staged ? (units + fit - 1) / fit : 1;
    if (blocks * S < target) S = HX_MIN(units, (target + blocks - 1) / blocks);
    S = HX_MAX(S, (int64_t)1);
    const int64_t su = (units + S - 1) / S;
    hx_hip_gemv_plan p = {(int)((units + su - 1) / su), 256 * su};
    return p;
}

/* Floats of split-K scratch a GEMV of n activation rows needs (0: not split). */
static size_t hx_hip_gemv_part_floats(int t, int64_t K, int64_t N, int64_t n, int n_sm)
{
    const hx_hip_gemv_plan p = hx_hip_gemv_plan_of(t, K, N, n_sm);
    return p.S > 1 ? (size_t)p.S * (size_t)HX_MIN(n, (int64_t)HX_HIP_GEMV_MAX_ROWS) * (size_t)N
                   : 0;
}

static hipError_t hx_hip_gemv_combine_launch(hipStream_t s, const hx_hip_gemv_plan &p,
                                             int64_t N, int n, const float *part, float *y,
                                             int64_t ys, float scale, int *n_launch)
{
    ++*n_launch;
    return hx_hip_launch(hx_hip_gemv_combine, dim3((unsigned)((N + 255) / 256), (unsigned)n),
                         dim3(256), s, part, p.S, N, n, y, ys, scale);
}

template <int T>
static hipError_t hx_hip_gemv_q_launch(hipStream_t s, const hx_hip_gemv_w &w, hx_hip_act a,
                                       float *y, int64_t ys, float *part, int n_sm,
                                       int *n_launch)
{
    const hx_hip_gemv_plan p = hx_hip_gemv_plan_of(T, w.K, w.N, n_sm);
    const int64_t rt = (int64_t)HX_HIP_GEMV_WARPS * hx_hip_gemv_rpw(T);
    const dim3 g((unsigned)((w.N + rt - 1) / rt), (unsigned)p.S), b(HX_HIP_GEMV_THREADS);
    hipError_t e;
#define HX_HIP_GQ(NC)                                                                              \
    hx_hip_launch(hx_hip_gemv_q<T, NC>, g, b, s, w.W, w.row_bytes, w.N, a, y, ys, w.scale, w.ts,   \
                  p.slice, part)
    if (a.n <= 1) e = HX_HIP_GQ(1);
    else if (a.n <= 2) e = HX_HIP_GQ(2);
    else if (a.n <= 4) e = HX_HIP_GQ(4);
    else e = HX_HIP_GQ(8);
#undef HX_HIP_GQ
    ++*n_launch;
    if (e != hipSuccess || p.S == 1) return e;
    return hx_hip_gemv_combine_launch(s, p, w.N, a.n, part, y, ys, w.scale, n_launch);
}

template <int T, bool V>
static hipError_t hx_hip_gemv_f_launch(hipStream_t s, const hx_hip_gemv_w &w, const float *x,
                                       int64_t xs, int n, float *y, int64_t ys, float *part,
                                       int n_sm, int *n_launch)
{
    const hx_hip_gemv_plan p = hx_hip_gemv_plan_of(T, w.K, w.N, n_sm);
    const dim3 g((unsigned)((w.N + HX_HIP_GEMV_WARPS - 1) / HX_HIP_GEMV_WARPS), (unsigned)p.S),
        b(HX_HIP_GEMV_THREADS);
    hipError_t e;
#define HX_HIP_GF(NC)                                                                              \
    hx_hip_launch(hx_hip_gemv_f<T, NC, V>, g, b, s, w.W, w.row_bytes, w.N, w.K, x, xs, n, y, ys,   \
                  w.scale, p.slice, part)
    if (n <= 1) e = HX_HIP_GF(1);
    else if (n <= 2) e = HX_HIP_GF(2);
    else if (n <= 4) e = HX_HIP_GF(4);
    else e = HX_HIP_GF(8);
#undef HX_HIP_GF
    ++*n_launch;
    if (e != hipSuccess || p.S == 1) return e;
    return hx_hip_gemv_combine_launch(s, p, w.N, n, part, y, ys, w.scale, n_launch);
}

template <int T>
static hipError_t hx_hip_gemv_f_any(hipStream_t s, const hx_hip_gemv_w &w, const float *x,
                                    int64_t xs, int n, float *y, int64_t ys, float *part,
                                    int n_sm, int *n_launch)
{
    const bool vec = w.K % 8 == 0 && w.row_bytes % 16 == 0 && (uintptr_t)w.W % 16 == 0 &&
                     (uintptr_t)x % 16 == 0 && xs % 4 == 0;
    return vec ? hx_hip_gemv_f_launch<T, true>(s, w, x, xs, n, y, ys, part, n_sm, n_launch)
               : hx_hip_gemv_f_launch<T, false>(s, w, x, xs, n, y, ys, part, n_sm, n_launch);
}

#endif /* !HX_HIP_RTC */
