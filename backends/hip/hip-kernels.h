/*
 * hip-kernels.h — the matmul kernels of the HIP module (included once, by hip-module.hip):
 *
 *   hx_hip_quantize_q8  f32 activations → int8 codes per 32 elements, with (scale, sum of codes)
 *   hx_hip_vdot         one part of a weight block against the int8 activations: the integer
 *                       dot products (dp4a / sdot4) of the weight's codes, read from its GGUF
 *                       block as stored, for every quantized type, including native TQ2_0,
 *                       TQ1_0, Q1_0, Q2_0 and I2_S (whose tensor scale is the kernels' `ts`);
 *                       the decode GEMVs built on it are in hip-gemv.h
 *   hx_hip_gemm         prefill: 64 x 64 output tiles, weight tiles decoded 8 elements at a
 *                       time into shared memory as f32
 *
 * Offsets of the codes (Q4_0: -8, TQ: -1, Q1_0: 2b-1, Q4_K: the min term) are applied once
 * per 32-element activation block with the block's code sum, by the part that covers the
 * block's first elements, instead of one extra dot product per part. Kernels are written for
 * 32-lane groups (warpSize is 32 on NVIDIA and RDNA; on wave64 hardware a group is half a
 * wave and the width-32 shuffles stay inside it).
 */
#pragma once

#include "hip-decode.h"

#define HX_HIP_GEMV_WARPS 8
#define HX_HIP_GEMV_MAX_ROWS 8 /* activation rows per GEMV launch (template NC) */
#define HX_HIP_ONES 0x01010101

/* Sum / max over the 32 lanes of a group, every lane getting the result (xor butterfly).
 * The emulator runs the same butterfly as one collective (hip-emu.h). */
static __device__ __forceinline__ float hx_hip_warp_sum(float v)
{
#if defined(HX_HIP_EMU)
    return hx_emu_warp_butterfly(v, 0);
#else
    for (int m = 16; m > 0; m >>= 1) v += hx_hip_shfl_xor(v, m);
    return v;
#endif
}
static __device__ __forceinline__ float hx_hip_warp_max(float v)
{
#if defined(HX_HIP_EMU)
    return hx_emu_warp_butterfly(v, 1);
#else
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, hx_hip_shfl_xor(v, m));
    return v;
#endif
}

/* ---- int8 activations -------------------------------------------------------------------- */

/* One 32-lane group per 32-element block of one row: Q8_0's rounding (d = amax / 127, codes
 * roundf(x / d)), so results match the CPU backend's integer path. aq is (n, K) int8, ad is
 * (n, K / 32) of (d, sum of codes). Rows loop over gridDim.y. */
__global__ void __launch_bounds__(256) hx_hip_quantize_q8(const float *src, int64_t src_stride,
                                                          int64_t K, int n, int8_t *aq, float2 *ad)
{
    const int lane = threadIdx.x % 32;
    const int64_t blk = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (blk * 32 >= K) return;
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        const float x = src[r * src_stride + blk * 32 + lane];
        const float amax = hx_hip_warp_max(fabsf(x));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const int q = (int)roundf(x * id);
        const float s = hx_hip_warp_sum((float)q);
        aq[r * K + blk * 32 + lane] = (int8_t)q;
        if (lane == 0) ad[r * (K / 32) + blk] = make_float2(d, s);
    }
}

struct hx_hip_act {
    const int8_t *q; /* row c at q + c * K */
    const float2 *d; /* row c at d + c * (K / 32) */
    int64_t K;
    int n;
};

/* Activation row c of a (rows past a.n read the last one: hx_hip_vdot computes every row of
 * its template NC without a branch, so the loads of one part are the same for all weight rows
 * a GEMV computes together and the compiler merges them; those rows' sums are not written). */
static __device__ __forceinline__ const int8_t *hx_hip_aq(const hx_hip_act &a, int c)
{
    return a.q + HX_MIN(c, a.n - 1) * a.K;
}
static __device__ __forceinline__ int2 hx_hip_a8(const hx_hip_act &a, int c, int64_t el)
{
    return *(const int2 *)(hx_hip_aq(a, c) + el);
}
static __device__ __forceinline__ float2 hx_hip_ad(const hx_hip_act &a, int c, int64_t ab)
{
    return a.d[HX_MIN(c, a.n - 1) * (a.K / 32) + ab];
}
static __device__ __forceinline__ int hx_hip_dot8(int w0, int w1, int2 a)
{
    return hx_hip_dp4a(w0, a.x, hx_hip_dp4a(w1, a.y, 0));
}
static __device__ __forceinline__ int hx_hip_dot16(int4 w, int4 a)
{
    return hx_hip_dp4a(w.x, a.x,
                       hx_hip_dp4a(w.y, a.y, hx_hip_dp4a(w.z, a.z, hx_hip_dp4a(w.w, a.w, 0))));
}
static __device__ __forceinline__ int4 hx_hip_nib4(int4 w, int shift)
{
    int4 r;
    r.x = (w.x >> shift) & 0x0F0F0F0F, r.y = (w.y >> shift) & 0x0F0F0F0F;
    r.z = (w.z >> shift) & 0x0F0F0F0F, r.w = (w.w >> shift) & 0x0F0F0F0F;
    return r;
}

/* Part p of weight block `blk` (bytes at b, in global or shared memory: 2-byte aligned, Q4_K's
 * 16-byte aligned) against NC activation rows; adds to acc[c]. */
template <int T, int NC>
static __device__ __forceinline__ void hx_hip_vdot(const uint8_t *b, int64_t blk, int p,
                                                   const hx_hip_act &a, float *acc, float ts)
{
    const int64_t e0 = blk * hx_hip_blk<T>::E; /* first element of the block */
    const int64_t ab0 = e0 / 32;               /* its first activation block */
    if constexpr (T == HX_DTYPE_Q8_0) {
        /* part p: codes 8p .. 8p+7 */
        const float dw = hx_hip_ldh(b);
        const int w0 = hx_hip_ld32(b + 2 + 8 * p), w1 = hx_hip_ld32(b + 6 + 8 * p);
        for (int c = 0; c < NC; c++)
            acc[c] += dw * hx_hip_ad(a, c, ab0).x *
                      (float)hx_hip_dot8(w0, w1, hx_hip_a8(a, c, e0 + 8 * p));
    } else if constexpr (T == HX_DTYPE_Q4_0) {
        /* part p: bytes 8p .. 8p+7, low nibbles = elements 8p.., high nibbles = 16 + 8p.. */
        const float dw = hx_hip_ldh(b);
        const int w0 = hx_hip_ld32(b + 2 + 8 * p), w1 = hx_hip_ld32(b + 6 + 8 * p);
        const int l0 = w0 & 0x0F0F0F0F, l1 = w1 & 0x0F0F0F0F;
        const int h0 = (w0 >> 4) & 0x0F0F0F0F, h1 = (w1 >> 4) & 0x0F0F0F0F;
        for (int c = 0; c < NC; c++) {
            const float2 ds = hx_hip_ad(a, c, ab0);
            const int s = hx_hip_dot8(l0, l1, hx_hip_a8(a, c, e0 + 8 * p)) +
                          hx_hip_dot8(h0, h1, hx_hip_a8(a, c, e0 + 16 + 8 * p));
            acc[c] += dw * ds.x * ((float)s - (p == 0 ? 8.0f * ds.y : 0.0f));
        }
    } else if constexpr (T == HX_DTYPE_Q1_0) {
        /* part p: bits of bytes 4p .. 4p+3 = elements 32p .. 32p+31 = activation block p;
         * weight = (2 bit - 1) d, so dot = 2 (bits . a) - sum(a) */
        const float dw = hx_hip_ldh(b);
        const uint32_t w = (uint32_t)hx_hip_ld32(b + 2 + 4 * p);
        int e[8];
        for (int i = 0; i < 8; i++)
            e[i] = (int)((((w >> 4 * i) & 0xFu) * 0x00204081u) & 0x01010101u);
        for (int c = 0; c < NC; c++) {
            const int64_t el = e0 + 32 * p;
            int s = 0;
            for (int i = 0; i < 4; i++)
                s += hx_hip_dot8(e[2 * i], e[2 * i + 1], hx_hip_a8(a, c, el + 8 * i));
            const float2 ds = hx_hip_ad(a, c, ab0 + p);
            acc[c] += dw * ds.x * (2.0f * (float)s - ds.y);
        }
    } else if constexpr (T == HX_DTYPE_TQ2_0) {
        /* part p: bytes 32cc + 8q .. +7 of group cc = p/4; crumb n is element
         * 128cc + 32n + 8q + i, activation block 4cc + n; code - 1 is the value */
        const float dw = hx_hip_ldh(b + 64);
        const int cc = p / 4, q = p % 4;
        const int w0 = hx_hip_ld32(b + 32 * cc + 8 * q), w1 = hx_hip_ld32(b + 32 * cc + 8 * q + 4);
        for (int c = 0; c < NC; c++) {
            float f = 0.0f;
            HX_HIP_UNROLL
            for (int n = 0; n < 4; n++) {
                const int s = hx_hip_dot8((w0 >> 2 * n) & 0x03030303, (w1 >> 2 * n) & 0x03030303,
                                          hx_hip_a8(a, c, e0 + 128 * cc + 32 * n + 8 * q));
                const float2 ds = hx_hip_ad(a, c, ab0 + 4 * cc + n);
                f += ds.x * ((float)s - (q == 0 ? ds.y : 0.0f));
            }
            acc[c] += dw * f;
        }
    } else if constexpr (T == HX_DTYPE_I2_S) {
        /* part p: bytes 8p .. 8p+7; bit pair 6 - 2n is element 32n + 8p + i, activation block
         * n. The task index of a part equals TQ2_0's for the same elements (a TQ2_0 block is
         * two I2_S blocks), and the sums run in TQ2_0's order, so the same ternary weights
         * with ts = d give TQ2_0's bits. */
        const int w0 = hx_hip_ld32(b + 8 * p), w1 = hx_hip_ld32(b + 8 * p + 4);
        for (int c = 0; c < NC; c++) {
            float f = 0.0f;
            HX_HIP_UNROLL
            for (int n = 0; n < 4; n++) {
                const int sh = 6 - 2 * n;
                const int s = hx_hip_dot8((w0 >> sh) & 0x03030303, (w1 >> sh) & 0x03030303,
                                          hx_hip_a8(a, c, e0 + 32 * n + 8 * p));
                const float2 ds = hx_hip_ad(a, c, ab0 + n);
                f += ds.x * ((float)s - (p == 0 ? ds.y : 0.0f));
            }
            acc[c] += ts * f;
        }
    } else if constexpr (T == HX_DTYPE_Q2_0) {
        /* part p: bytes 2 + 8p .. 9 + 8p = elements 32p .. 32p+31 = activation block p, four
         * codes per byte; value = (code - 1) d */
        const float dw = hx_hip_ldh(b);
        const uint32_t w0 = (uint32_t)hx_hip_ld32(b + 2 + 8 * p),
                       w1 = (uint32_t)hx_hip_ld32(b + 6 + 8 * p);
        int q[8];
        for (int i = 0; i < 4; i++) {
            q[i] = hx_hip_crumbs4((w0 >> 8 * i) & 0xFFu);
            q[4 + i] = hx_hip_crumbs4((w1 >> 8 * i) & 0xFFu);
        }
        for (int c = 0; c < NC; c++) {
            const int64_t el = e0 + 32 * p;
            int s = 0;
            for (int i = 0; i < 4; i++)
                s += hx_hip_dot8(q[2 * i], q[2 * i + 1], hx_hip_a8(a, c, el + 8 * i));
            const float2 ds = hx_hip_ad(a, c, ab0 + p);
            acc[c] += dw * ds.x * ((float)s - ds.y);
        }
    } else if constexpr (T == HX_DTYPE_TQ1_0) {
        /* parts 0-3: qs[8p ..], trit n = element 32n + 8p + i (activation block n);
         * parts 4-5: qs[32 + 8(p-4) ..], trit n = element 160 + 16n + 8(p-4) + i;
         * part 6: qh[0..3], trit n = element 240 + 4n + j; part 7 idle.
         * Parts 0 and 4 subtract the code sums of blocks 0-4 and 5-7. */
        if (p == 7) return;
        const float dw = hx_hip_ldh(b + 52);
        const uint32_t p3[5] = {1, 3, 9, 27, 81};
        if (p < 6) {
            const int off = p < 4 ? 8 * p : 32 + 8 * (p - 4);
            const int w0 = hx_hip_ld32(b + off), w1 = hx_hip_ld32(b + off + 4);
            for (int c = 0; c < NC; c++) {
                    float f = 0.0f;
                HX_HIP_UNROLL
                for (int n = 0; n < 5; n++) {
                    const int e = p < 4 ? 32 * n + 8 * p : 160 + 16 * n + 8 * (p - 4);
                    const int s = hx_hip_dot8(hx_hip_trit4(w0, p3[n]), hx_hip_trit4(w1, p3[n]),
                                              hx_hip_a8(a, c, e0 + e));
                    f += hx_hip_ad(a, c, ab0 + e / 32).x * (float)s;
                }
                if (p == 0)
                    for (int k = 0; k < 5; k++)
                        f -= hx_hip_ad(a, c, ab0 + k).x * hx_hip_ad(a, c, ab0 + k).y;
                if (p == 4)
                    for (int k = 5; k < 8; k++)
                        f -= hx_hip_ad(a, c, ab0 + k).x * hx_hip_ad(a, c, ab0 + k).y;
                acc[c] += dw * f;
            }
        } else {
            const int w = hx_hip_ld32(b + 48);
            for (int c = 0; c < NC; c++) {
                    int s = 0;
                HX_HIP_UNROLL
                for (int n = 0; n < 4; n++)
                    s = hx_hip_dp4a(hx_hip_trit4(w, p3[n]),
                                    *(const int *)(hx_hip_aq(a, c) + e0 + 240 + 4 * n), s);
                acc[c] += dw * hx_hip_ad(a, c, ab0 + 7).x * (float)s;
            }
        }
    } else if constexpr (T == HX_DTYPE_Q4_K) {
        /* part p: chunk cc = p/2, half h: 16 bytes at 16 + 32cc + 16h; low nibbles are
         * sub-block 2cc, high nibbles sub-block 2cc+1 (= activation blocks) */
        const int cc = p / 2, h = p % 2, j = 2 * cc;
        const float d = hx_hip_ldh(b), dmin = hx_hip_ldh(b + 2);
        const int4 w = *(const int4 *)(b + 16 + 32 * cc + 16 * h); /* 144 = 9 x 16: aligned */
        int sc0, m0, sc1, m1;
        hx_hip_q4k_scale(b + 4, j, &sc0, &m0);
        hx_hip_q4k_scale(b + 4, j + 1, &sc1, &m1);
        const int4 wl = hx_hip_nib4(w, 0), wh = hx_hip_nib4(w, 4);
        for (int c = 0; c < NC; c++) {
            const int8_t *q0 = hx_hip_aq(a, c) + e0 + 64 * cc + 16 * h;
            const int slo = hx_hip_dot16(wl, *(const int4 *)q0),
                      shi = hx_hip_dot16(wh, *(const int4 *)(q0 + 32));
            const float2 dlo = hx_hip_ad(a, c, ab0 + j), dhi = hx_hip_ad(a, c, ab0 + j + 1);
            float f = dlo.x * d * (float)sc0 * (float)slo + dhi.x * d * (float)sc1 * (float)shi;
            if (h == 0) f -= dmin * ((float)m0 * dlo.x * dlo.y + (float)m1 * dhi.x * dhi.y);
            acc[c] += f;
        }
    } else if constexpr (T == HX_DTYPE_Q6_K) {
        /* part p: half hh = p/4, l0 = 8(p%4); element 128hh + 32k4 + l0 + i for k4 = 0..3 */
        const int hh = p / 4, l0 = 8 * (p % 4);
        const float d = hx_hip_ldh(b + 208);
        const int A0 = hx_hip_ld32(b + 64 * hh + l0), A1 = hx_hip_ld32(b + 64 * hh + l0 + 4);
        const int B0 = hx_hip_ld32(b + 64 * hh + l0 + 32), B1 = hx_hip_ld32(b + 64 * hh + l0 + 36);
        const int H0 = hx_hip_ld32(b + 128 + 32 * hh + l0),
                  H1 = hx_hip_ld32(b + 128 + 32 * hh + l0 + 4);
        for (int c = 0; c < NC; c++) {
            float f = 0.0f;
            HX_HIP_UNROLL
            for (int k4 = 0; k4 < 4; k4++) {
                int s0 = (k4 & 1) ? B0 : A0, s1 = (k4 & 1) ? B1 : A1;
                if (k4 >= 2) s0 >>= 4, s1 >>= 4;
                const int q0 = (s0 & 0x0F0F0F0F) | (((H0 >> 2 * k4) & 0x03030303) << 4);
                const int q1 = (s1 & 0x0F0F0F0F) | (((H1 >> 2 * k4) & 0x03030303) << 4);
                const int2 v = hx_hip_a8(a, c, e0 + 128 * hh + 32 * k4 + l0);
                const int s =
                    hx_hip_dot8(q0, q1, v) - 32 * hx_hip_dot8(HX_HIP_ONES, HX_HIP_ONES, v);
                const float sc = (float)(int8_t)b[192 + 8 * hh + 2 * k4 + l0 / 16];
                f += hx_hip_ad(a, c, ab0 + 4 * hh + k4).x * sc * (float)s;
            }
            acc[c] += d * f;
        }
    }
}

/* ---- prefill GEMM --------------------------------------------------------------------------- */

#define HX_HIP_BM 64
#define HX_HIP_BN 64
#define HX_HIP_BK 32

/* Weights k .. k+7 of row j (rows row_bytes apart) as f32: hx_hip_dq8 where all eight are
 * inside K and K % 8 == 0 (kvec), else one at a time, zeros past N rows or K columns. */
template <int T>
static __device__ __forceinline__ void hx_hip_dq8_at(const uint8_t *W, int64_t row_bytes,
                                                     int64_t N, int64_t K, int64_t j, int64_t k,
                                                     int kvec, float ts, float *v)
{
    if (j < N && kvec && k + 8 <= K) {
        hx_hip_dq8<T>(W + j * row_bytes, k, v, ts);
    } else {
        for (int i = 0; i < 8; i++)
            v[i] = (j < N && k + i < K) ? hx_hip_dq1<T>(W + j * row_bytes, k + i, ts) : 0.0f;
    }
}

/* dst (n, N) = src (n, K) . W^T: each 256-thread block computes a 64 x 64 tile, 4 x 4 outputs
 * per thread; per K step of 32 each thread decodes 8 weights of one row (hx_hip_dq8) and
 * loads 8 activations into shared memory. `kvec`: K % 8 == 0, so whole groups of 8 exist. */
template <int T>
__global__ void __launch_bounds__(256)
    hx_hip_gemm(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                int64_t src_stride, int64_t n, float *dst, int64_t dst_stride, float scale,
                int kvec, float ts)
{
    __shared__ float As[HX_HIP_BK][HX_HIP_BM + 1];
    __shared__ float Bs[HX_HIP_BK][HX_HIP_BN + 1];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int lr = t / 4, lk = (t % 4) * 8; /* the row and 8 columns this thread loads */
    const int64_t r0 = (int64_t)blockIdx.y * HX_HIP_BM, j0 = (int64_t)blockIdx.x * HX_HIP_BN;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += HX_HIP_BK) {
        const int64_t k = k0 + lk, r = r0 + lr, j = j0 + lr;
        float v[8];
        hx_hip_dq8_at<T>(W, row_bytes, N, K, j, k, kvec, ts, v);
        for (int i = 0; i < 8; i++) {
            Bs[lk + i][lr] = v[i];
            As[lk + i][lr] = (r < n && k + i < K) ? src[r * src_stride + k + i] : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < HX_HIP_BK; kk++) {
            float av[4], bv[4];
            for (int i = 0; i < 4; i++) av[i] = As[kk][ty + 16 * i], bv[i] = Bs[kk][tx + 16 * i];
            for (int i = 0; i < 4; i++)
                for (int jj = 0; jj < 4; jj++) acc[i][jj] += av[i] * bv[jj];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        const int64_t r = r0 + ty + 16 * i;
        if (r >= n) continue;
        for (int jj = 0; jj < 4; jj++) {
            const int64_t j = j0 + tx + 16 * jj;
            if (j < N) dst[r * dst_stride + j] = acc[i][jj] * scale;
        }
    }
}
