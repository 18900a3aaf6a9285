/*
 * hip-kernels.h — device code of the HIP module (included once, by hip-module.hip): weight
 * decoding per GGUF type (formats.md §3, blocks read as stored), int8 activation quantization,
 * GEMVs with dp4a integer dots (Q8_0, Q4_0, Q4_K, Q6_K, TQ2_0, TQ1_0, Q1_0) or f32 dots
 * (F32/F16/BF16, 16-byte loads), a tiled shared-memory GEMM for prefill, and the other ops of
 * docs/ops.md. Kernels are written for 32-lane groups (warpSize 32 on NVIDIA and RDNA).
 * Activations: K % 32 == 0 for every quantized type, so an act block of 32 int8 (scale d, sum
 * of codes s) never straddles a weight block.
 */
#pragma once

#include <stdint.h>

#include "hip-compat.h"
#include "hx-backend.h"

#define HX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HX_MAX(a, b) ((a) > (b) ? (a) : (b))

#define HX_HIP_GEMV_WARPS 8
#define HX_HIP_ATTN_WARPS 4
#define HX_HIP_HD_MAX 256
#define HX_HIP_ONES 0x01010101

static __device__ __forceinline__ float hx_hip_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, u;
    if (e == 0) {
        float f = (float)m * 5.9604644775390625e-8f;   /* m * 2^-24, exact */
        return sign ? -f : f;
    }
    u = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
    return __uint_as_float(u);
}
static __device__ __forceinline__ float hx_hip_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
static __device__ __forceinline__ uint16_t hx_hip_ld16(const uint8_t *p) { return *(const uint16_t *)p; }
/* 32-bit load from a 2-byte aligned address (GGUF blocks of 18, 34, 54, 66, 210 bytes). */
static __device__ __forceinline__ int hx_hip_ld32(const uint8_t *p)
{
    const uint16_t *q = (const uint16_t *)p;
    return (int)((uint32_t)q[0] | ((uint32_t)q[1] << 16));
}
static __device__ __forceinline__ float hx_hip_warp_sum(float v)
{
    for (int m = 16; m > 0; m >>= 1) v += hx_hip_shfl_xor(v, m);
    return v;
}
static __device__ __forceinline__ float hx_hip_warp_max(float v)
{
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, hx_hip_shfl_xor(v, m));
    return v;
}

/* Block geometry per type: elements and bytes. Values follow enum hx_dtype. */
template <int T> struct hx_hip_blk;
template <> struct hx_hip_blk<HX_DTYPE_F32> { enum { E = 1, B = 4 }; };
template <> struct hx_hip_blk<HX_DTYPE_F16> { enum { E = 1, B = 2 }; };
template <> struct hx_hip_blk<HX_DTYPE_BF16> { enum { E = 1, B = 2 }; };
template <> struct hx_hip_blk<HX_DTYPE_Q8_0> { enum { E = 32, B = 34, P = 4 }; };
template <> struct hx_hip_blk<HX_DTYPE_Q4_0> { enum { E = 32, B = 18, P = 2 }; };
template <> struct hx_hip_blk<HX_DTYPE_Q4_K> { enum { E = 256, B = 144, P = 8 }; };
template <> struct hx_hip_blk<HX_DTYPE_Q6_K> { enum { E = 256, B = 210, P = 8 }; };
template <> struct hx_hip_blk<HX_DTYPE_TQ1_0> { enum { E = 256, B = 54, P = 8 }; };
template <> struct hx_hip_blk<HX_DTYPE_TQ2_0> { enum { E = 256, B = 66, P = 8 }; };
template <> struct hx_hip_blk<HX_DTYPE_Q1_0> { enum { E = 128, B = 18, P = 4 }; };

static __device__ __forceinline__ void hx_hip_q4k_scale(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
/* Trit n of a TQ1_0 byte: multiply by 3^n modulo 256, then the top base-3 digit. */
static __device__ __forceinline__ int hx_hip_trit(uint32_t byte, int n)
{
    const uint32_t pow3[5] = {1, 3, 9, 27, 81};
    uint32_t q = (byte * pow3[n]) & 0xFFu;
    return (int)((q * 3u) >> 8);
}
/* Four trits (position n) of the four bytes of w, as four bytes. */
static __device__ __forceinline__ int hx_hip_trit4(int w, int n)
{
    uint32_t u = (uint32_t)w, r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)hx_hip_trit((u >> 8 * i) & 0xFFu, n) << 8 * i;
    return (int)r;
}

/* Element k of a weight row (row = first byte of the row). */
template <int T> static __device__ __forceinline__ float hx_hip_dq1(const uint8_t *row, int64_t k)
{
    typedef hx_hip_blk<T> G;
    const uint8_t *b = row + (k / G::E) * G::B;
    const int e = (int)(k % G::E);
    if (T == HX_DTYPE_F32) return ((const float *)row)[k];
    if (T == HX_DTYPE_F16) return hx_hip_h2f(((const uint16_t *)row)[k]);
    if (T == HX_DTYPE_BF16) return hx_hip_bf2f(((const uint16_t *)row)[k]);
    if (T == HX_DTYPE_Q8_0) return hx_hip_h2f(hx_hip_ld16(b)) * (float)(int8_t)b[2 + e];
    if (T == HX_DTYPE_Q4_0) {
        int q = e < 16 ? (b[2 + e] & 0x0F) : (b[2 + e - 16] >> 4);
        return hx_hip_h2f(hx_hip_ld16(b)) * (float)(q - 8);
    }
    if (T == HX_DTYPE_Q4_K) {
        int c = e / 64, l = e % 64, sc, m;
        int q = l < 32 ? (b[16 + 32 * c + l] & 0x0F) : (b[16 + 32 * c + l - 32] >> 4);
        hx_hip_q4k_scale(b + 4, e / 32, &sc, &m);
        return hx_hip_h2f(hx_hip_ld16(b)) * (float)sc * (float)q -
               hx_hip_h2f(hx_hip_ld16(b + 2)) * (float)m;
    }
    if (T == HX_DTYPE_Q6_K) {
        int h = e / 128, r = e % 128, k4 = r / 32, l = r % 32;
        int ql = b[64 * h + l + ((k4 & 1) ? 32 : 0)];
        int lo = k4 >= 2 ? (ql >> 4) : (ql & 0x0F);
        int hi = (b[128 + 32 * h + l] >> (2 * k4)) & 3;
        return hx_hip_h2f(hx_hip_ld16(b + 208)) * (float)(int8_t)b[192 + e / 16] *
               (float)((lo | (hi << 4)) - 32);
    }
    if (T == HX_DTYPE_TQ2_0) {
        int c = e / 128, n = (e % 128) / 32, m = e % 32;
        return (float)(((b[32 * c + m] >> (2 * n)) & 3) - 1) * hx_hip_h2f(hx_hip_ld16(b + 64));
    }
    if (T == HX_DTYPE_TQ1_0) {
        int t;
        if (e < 160) t = hx_hip_trit(b[e % 32], e / 32);
        else if (e < 240) t = hx_hip_trit(b[32 + (e - 160) % 16], (e - 160) / 16);
        else t = hx_hip_trit(b[48 + (e - 240) % 4], (e - 240) / 4);
        return (float)(t - 1) * hx_hip_h2f(hx_hip_ld16(b + 52));
    }
    if (T == HX_DTYPE_Q1_0) {
        float d = hx_hip_h2f(hx_hip_ld16(b));
        return ((b[2 + e / 8] >> (e % 8)) & 1) ? d : -d;
    }
    return 0.0f;
}

/* ---- int8 activations: per 32 elements, codes plus (d, sum of codes) ------------------- */

__global__ void hx_hip_quantize_q8(const float *src, int64_t stride, int64_t K, int n,
                                   int8_t *aq, float2 *ad)
{
    const int lane = threadIdx.x % 32;
    const int64_t blk = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int r = blockIdx.y;
    if (blk * 32 >= K || r >= n) return;
    float x = src[r * stride + blk * 32 + lane];
    float amax = hx_hip_warp_max(fabsf(x));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int q = (int)roundf(x * id);
    float s = hx_hip_warp_sum((float)q);
    aq[r * K + blk * 32 + lane] = (int8_t)q;
    if (lane == 0) ad[r * (K / 32) + blk] = make_float2(d, s);
}

/* ---- integer GEMV part dots: part p of weight block b against NC activation rows -------- */

struct hx_hip_act {
    const int8_t *q;   /* row c at q + c * K */
    const float2 *d;   /* row c at d + c * (K / 32) */
    int64_t K;
    int n;
};

template <int NC> static __device__ __forceinline__ int2 hx_hip_a8(const hx_hip_act &a, int c, int64_t el)
{
    return *(const int2 *)(a.q + c * a.K + el);
}
static __device__ __forceinline__ int hx_hip_dot8(int w0, int w1, int2 a)
{
    return hx_hip_dp4a(w0, a.x, hx_hip_dp4a(w1, a.y, 0));
}
static __device__ __forceinline__ int hx_hip_sum8(int2 a)
{
    return hx_hip_dp4a(HX_HIP_ONES, a.x, hx_hip_dp4a(HX_HIP_ONES, a.y, 0));
}

template <int T, int NC>
static __device__ __forceinline__ void hx_hip_vdot(const uint8_t *b, int64_t blk, int p,
                                                   const hx_hip_act &a, float *acc)
{
    const int64_t e0 = blk * hx_hip_blk<T>::E;   /* first element of the block */
    const int64_t ab0 = e0 / 32;                  /* its first act block */
    if (T == HX_DTYPE_Q8_0) {
        float dw = hx_hip_h2f(hx_hip_ld16(b));
        int w0 = hx_hip_ld32(b + 2 + 8 * p), w1 = hx_hip_ld32(b + 6 + 8 * p);
        for (int c = 0; c < NC; c++)
            if (c < a.n)
                acc[c] += dw * a.d[c * (a.K / 32) + ab0].x *
                          (float)hx_hip_dot8(w0, w1, hx_hip_a8<NC>(a, c, e0 + 8 * p));
    } else if (T == HX_DTYPE_Q4_0) {
        float dw = hx_hip_h2f(hx_hip_ld16(b));
        int w0 = hx_hip_ld32(b + 2 + 8 * p), w1 = hx_hip_ld32(b + 6 + 8 * p);
        int l0 = w0 & 0x0F0F0F0F, l1 = w1 & 0x0F0F0F0F;
        int h0 = (w0 >> 4) & 0x0F0F0F0F, h1 = (w1 >> 4) & 0x0F0F0F0F;
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            int2 alo = hx_hip_a8<NC>(a, c, e0 + 8 * p), ahi = hx_hip_a8<NC>(a, c, e0 + 16 + 8 * p);
            int s = hx_hip_dot8(l0, l1, alo) + hx_hip_dot8(h0, h1, ahi);
            int sa = hx_hip_sum8(alo) + hx_hip_sum8(ahi);
            acc[c] += dw * a.d[c * (a.K / 32) + ab0].x * (float)(s - 8 * sa);
        }
    } else if (T == HX_DTYPE_Q1_0) {
        float dw = hx_hip_h2f(hx_hip_ld16(b));
        uint32_t w = (uint32_t)hx_hip_ld32(b + 2 + 4 * p);
        int e[8];
        for (int i = 0; i < 8; i++) e[i] = (int)((((w >> 4 * i) & 0xFu) * 0x00204081u) & 0x01010101u);
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            const int64_t el = e0 + 32 * p;
            int s = 0;
            for (int i = 0; i < 4; i++) {
                int2 v = hx_hip_a8<NC>(a, c, el + 8 * i);
                s += hx_hip_dot8(e[2 * i], e[2 * i + 1], v);
            }
            float2 ds = a.d[c * (a.K / 32) + ab0 + p];
            acc[c] += dw * ds.x * (2.0f * (float)s - ds.y);
        }
    } else if (T == HX_DTYPE_TQ2_0) {
        float dw = hx_hip_h2f(hx_hip_ld16(b + 64));
        const int cc = p / 4, q = p % 4;
        int w0 = hx_hip_ld32(b + 32 * cc + 8 * q), w1 = hx_hip_ld32(b + 32 * cc + 8 * q + 4);
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            float f = 0.0f;
            for (int n = 0; n < 4; n++) {
                int2 v = hx_hip_a8<NC>(a, c, e0 + 128 * cc + 32 * n + 8 * q);
                int s = hx_hip_dot8((w0 >> 2 * n) & 0x03030303, (w1 >> 2 * n) & 0x03030303, v) -
                        hx_hip_sum8(v);
                f += a.d[c * (a.K / 32) + ab0 + 4 * cc + n].x * (float)s;
            }
            acc[c] += dw * f;
        }
    } else if (T == HX_DTYPE_TQ1_0) {
        if (p == 7) return;
        float dw = hx_hip_h2f(hx_hip_ld16(b + 52));
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            float f = 0.0f;
            if (p < 6) {
                /* p < 4: qs[8p..8p+7], element 32n + 8p + i; p = 4, 5: qs[32 + m0 ..], element
                 * 160 + 16n + m0 + i with m0 = 8(p - 4). */
                const int off = p < 4 ? 8 * p : 32 + 8 * (p - 4);
                int w0 = hx_hip_ld32(b + off), w1 = hx_hip_ld32(b + off + 4);
                for (int n = 0; n < 5; n++) {
                    int e = p < 4 ? 32 * n + 8 * p : 160 + 16 * n + 8 * (p - 4);
                    int2 v = hx_hip_a8<NC>(a, c, e0 + e);
                    int s = hx_hip_dot8(hx_hip_trit4(w0, n), hx_hip_trit4(w1, n), v) - hx_hip_sum8(v);
                    f += a.d[c * (a.K / 32) + ab0 + e / 32].x * (float)s;
                }
            } else {
                int w = hx_hip_ld32(b + 48);   /* qh: element 240 + 4n + j */
                int s = 0;
                for (int n = 0; n < 4; n++) {
                    int v = *(const int *)(a.q + c * a.K + e0 + 240 + 4 * n);
                    s += hx_hip_dp4a(hx_hip_trit4(w, n), v, 0) - hx_hip_dp4a(HX_HIP_ONES, v, 0);
                }
                f = a.d[c * (a.K / 32) + ab0 + 7].x * (float)s;
            }
            acc[c] += dw * f;
        }
    } else if (T == HX_DTYPE_Q4_K) {
        const int cc = p / 2, h = p % 2, j = 2 * cc;
        float d = hx_hip_h2f(hx_hip_ld16(b)), dmin = hx_hip_h2f(hx_hip_ld16(b + 2));
        int4 w = *(const int4 *)(b + 16 + 32 * cc + 16 * h);   /* 16-byte aligned: 144 = 9 * 16 */
        int sc0, m0, sc1, m1;
        hx_hip_q4k_scale(b + 4, j, &sc0, &m0);
        hx_hip_q4k_scale(b + 4, j + 1, &sc1, &m1);
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            const int8_t *q0 = a.q + c * a.K + e0 + 32 * j + 16 * h;
            int4 alo = *(const int4 *)q0, ahi = *(const int4 *)(q0 + 32);
            int slo = hx_hip_dp4a(w.x & 0x0F0F0F0F, alo.x, hx_hip_dp4a(w.y & 0x0F0F0F0F, alo.y,
                      hx_hip_dp4a(w.z & 0x0F0F0F0F, alo.z, hx_hip_dp4a(w.w & 0x0F0F0F0F, alo.w, 0))));
            int shi = hx_hip_dp4a((w.x >> 4) & 0x0F0F0F0F, ahi.x, hx_hip_dp4a((w.y >> 4) & 0x0F0F0F0F, ahi.y,
                      hx_hip_dp4a((w.z >> 4) & 0x0F0F0F0F, ahi.z, hx_hip_dp4a((w.w >> 4) & 0x0F0F0F0F, ahi.w, 0))));
            int alo_s = hx_hip_dp4a(HX_HIP_ONES, alo.x, hx_hip_dp4a(HX_HIP_ONES, alo.y,
                        hx_hip_dp4a(HX_HIP_ONES, alo.z, hx_hip_dp4a(HX_HIP_ONES, alo.w, 0))));
            int ahi_s = hx_hip_dp4a(HX_HIP_ONES, ahi.x, hx_hip_dp4a(HX_HIP_ONES, ahi.y,
                        hx_hip_dp4a(HX_HIP_ONES, ahi.z, hx_hip_dp4a(HX_HIP_ONES, ahi.w, 0))));
            float dlo = a.d[c * (a.K / 32) + ab0 + j].x, dhi = a.d[c * (a.K / 32) + ab0 + j + 1].x;
            acc[c] += dlo * (d * (float)sc0 * (float)slo - dmin * (float)m0 * (float)alo_s) +
                      dhi * (d * (float)sc1 * (float)shi - dmin * (float)m1 * (float)ahi_s);
        }
    } else if (T == HX_DTYPE_Q6_K) {
        const int h = p / 4, l0 = 8 * (p % 4);
        float d = hx_hip_h2f(hx_hip_ld16(b + 208));
        int A0 = hx_hip_ld32(b + 64 * h + l0), A1 = hx_hip_ld32(b + 64 * h + l0 + 4);
        int B0 = hx_hip_ld32(b + 64 * h + l0 + 32), B1 = hx_hip_ld32(b + 64 * h + l0 + 36);
        int H0 = hx_hip_ld32(b + 128 + 32 * h + l0), H1 = hx_hip_ld32(b + 128 + 32 * h + l0 + 4);
        for (int c = 0; c < NC; c++) {
            if (c >= a.n) continue;
            float f = 0.0f;
            for (int k4 = 0; k4 < 4; k4++) {
                int s0 = (k4 & 1) ? B0 : A0, s1 = (k4 & 1) ? B1 : A1;
                if (k4 >= 2) s0 >>= 4, s1 >>= 4;
                int q0 = (s0 & 0x0F0F0F0F) | (((H0 >> 2 * k4) & 0x03030303) << 4);
                int q1 = (s1 & 0x0F0F0F0F) | (((H1 >> 2 * k4) & 0x03030303) << 4);
                int2 v = hx_hip_a8<NC>(a, c, e0 + 128 * h + 32 * k4 + l0);
                int s = hx_hip_dot8(q0, q1, v) - 32 * hx_hip_sum8(v);
                float sc = (float)(int8_t)b[192 + 8 * h + 2 * k4 + l0 / 16];
                f += a.d[c * (a.K / 32) + ab0 + 4 * h + k4].x * sc * (float)s;
            }
            acc[c] += d * f;
        }
    }
}

/* One 32-lane group per weight row, HX_HIP_GEMV_WARPS rows per thread block; consecutive
 * lanes take consecutive block parts, so a group's loads cover contiguous bytes of the row. */
template <int T, int NC>
__global__ void __launch_bounds__(32 * HX_HIP_GEMV_WARPS)
hx_hip_gemv_q(const uint8_t *W, int64_t row_bytes, int64_t N, hx_hip_act a, float *dst,
              int64_t dst_stride, float scale)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * HX_HIP_GEMV_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    typedef hx_hip_blk<T> G;
    const uint8_t *wr = W + row * row_bytes;
    const int64_t tasks = (a.K / G::E) * G::P;
    float acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    for (int64_t i = lane; i < tasks; i += 32) {
        const int64_t blk = i / G::P;
        hx_hip_vdot<T, NC>(wr + blk * G::B, blk, (int)(i % G::P), a, acc);
    }
    for (int c = 0; c < NC; c++) {
        float s = hx_hip_warp_sum(acc[c]);
        if (lane == 0 && c < a.n) dst[c * dst_stride + row] = s * scale;
    }
}

/* F32 / F16 / BF16 GEMV on f32 activations; VEC: 8 elements per lane per step through one
 * 16-byte (F16/BF16) or two 16-byte (F32) loads, needs K % 8 == 0 and aligned rows. */
template <int T, int NC, bool VEC>
__global__ void __launch_bounds__(32 * HX_HIP_GEMV_WARPS)
hx_hip_gemv_f(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
              int64_t src_stride, int n, float *dst, int64_t dst_stride, float scale)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * HX_HIP_GEMV_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    const uint8_t *wr = W + row * row_bytes;
    float acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    if (VEC) {
        for (int64_t k = 8 * lane; k < K; k += 256) {
            float w[8];
            if (T == HX_DTYPE_F32) {
                float4 u = *(const float4 *)(wr + 4 * k), v = *(const float4 *)(wr + 4 * k + 16);
                w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w, w[4] = v.x, w[5] = v.y, w[6] = v.z, w[7] = v.w;
            } else {
                uint4 u = *(const uint4 *)(wr + 2 * k);
                uint32_t x[4] = {u.x, u.y, u.z, u.w};
                for (int i = 0; i < 4; i++) {
                    uint16_t lo = (uint16_t)(x[i] & 0xFFFF), hi = (uint16_t)(x[i] >> 16);
                    w[2 * i] = T == HX_DTYPE_F16 ? hx_hip_h2f(lo) : hx_hip_bf2f(lo);
                    w[2 * i + 1] = T == HX_DTYPE_F16 ? hx_hip_h2f(hi) : hx_hip_bf2f(hi);
                }
            }
            for (int c = 0; c < NC; c++) {
                if (c >= n) continue;
                const float4 *s = (const float4 *)(src + c * src_stride + k);
                float4 s0 = s[0], s1 = s[1];
                acc[c] += w[0] * s0.x + w[1] * s0.y + w[2] * s0.z + w[3] * s0.w + w[4] * s1.x +
                          w[5] * s1.y + w[6] * s1.z + w[7] * s1.w;
            }
        }
    } else {
        for (int64_t k = lane; k < K; k += 32) {
            float w = hx_hip_dq1<T>(wr, k);
            for (int c = 0; c < NC; c++)
                if (c < n) acc[c] += w * src[c * src_stride + k];
        }
    }
    for (int c = 0; c < NC; c++) {
        float s = hx_hip_warp_sum(acc[c]);
        if (lane == 0 && c < n) dst[c * dst_stride + row] = s * scale;
    }
}

/* Prefill GEMM: 64 activation rows x 64 weight rows per block, K in steps of 32; weight tiles
 * are dequantized into shared memory as f32, 256 threads each computing 4 x 4 outputs. */
#define HX_HIP_BM 64
#define HX_HIP_BN 64
#define HX_HIP_BK 32
template <int T>
__global__ void __launch_bounds__(256)
hx_hip_gemm(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
            int64_t src_stride, int64_t n, float *dst, int64_t dst_stride, float scale)
{
    __shared__ float As[HX_HIP_BK][HX_HIP_BM + 1];
    __shared__ float Bs[HX_HIP_BK][HX_HIP_BN + 1];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int64_t r0 = (int64_t)blockIdx.y * HX_HIP_BM, j0 = (int64_t)blockIdx.x * HX_HIP_BN;
    float acc[4][4] = {{0.0f}};
    for (int64_t k0 = 0; k0 < K; k0 += HX_HIP_BK) {
        for (int i = t; i < HX_HIP_BM * HX_HIP_BK; i += 256) {
            int rr = i / HX_HIP_BK, kk = i % HX_HIP_BK;
            int64_t r = r0 + rr, k = k0 + kk;
            As[kk][rr] = (r < n && k < K) ? src[r * src_stride + k] : 0.0f;
            int64_t j = j0 + rr;
            Bs[kk][rr] = (j < N && k < K) ? hx_hip_dq1<T>(W + j * row_bytes, k) : 0.0f;
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
        int64_t r = r0 + ty + 16 * i;
        if (r >= n) continue;
        for (int jj = 0; jj < 4; jj++) {
            int64_t j = j0 + tx + 16 * jj;
            if (j < N) dst[r * dst_stride + j] = acc[i][jj] * scale;
        }
    }
}

/* ---- other ops ----------------------------------------------------------------------- */

template <int T>
__global__ void hx_hip_embed(const uint8_t *W, int64_t row_bytes, int64_t n_vocab, int64_t d,
                             const int32_t *tokens, float *dst, int64_t dst_stride)
{
    const int64_t r = blockIdx.y;
    const int32_t tok = tokens[r];
    if (tok < 0 || tok >= n_vocab) return;   /* the core validates tokens; never read outside */
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d; k += (int64_t)gridDim.x * blockDim.x)
        dst[r * dst_stride + k] = hx_hip_dq1<T>(W + tok * row_bytes, k);
}

/* One block per (row, group); sum of squares in double as docs/ops.md asks. */
__global__ void hx_hip_rms_norm(const float *src, int64_t src_stride, float *dst,
                                int64_t dst_stride, const float *gain, int64_t g, float eps)
{
    __shared__ double part[256];
    const int64_t r = blockIdx.y, c0 = (int64_t)blockIdx.x * g;
    const float *x = src + r * src_stride + c0;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < g; c += blockDim.x) s += (double)x[c] * (double)x[c];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int m = blockDim.x / 2; m > 0; m >>= 1) {
        if ((int)threadIdx.x < m) part[threadIdx.x] += part[threadIdx.x + m];
        __syncthreads();
    }
    const float scale = 1.0f / sqrtf((float)(part[0] / (double)g) + eps);
    float *y = dst + r * dst_stride + c0;
    for (int64_t c = threadIdx.x; c < g; c += blockDim.x) y[c] = x[c] * scale * gain[c];
}

/* One thread per (row, head); theta advanced incrementally like ggml. */
__global__ void hx_hip_rope(const float *src, int64_t src_stride, float *dst, int64_t dst_stride,
                            int64_t n_rows, int n_head, int head_dim, int n_rot, float base,
                            float freq_scale, int neox, const float *freqs, const int32_t *pos)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * n_head) return;
    const int64_t r = i / n_head;
    const int h = (int)(i % n_head);
    const float *x = src + r * src_stride + (int64_t)h * head_dim;
    float *y = dst + r * dst_stride + (int64_t)h * head_dim;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta_base = (float)pos[r];
    for (int k = 0; k < n_rot / 2; k++) {
        float theta = theta_base;
        if (freqs) theta /= freqs[k];
        theta *= freq_scale;
        const float cs = cosf(theta), sn = sinf(theta);
        const int ia = neox ? k : 2 * k, ib = neox ? k + n_rot / 2 : 2 * k + 1;
        const float a = x[ia], b = x[ib];
        y[ia] = a * cs - b * sn;
        y[ib] = a * sn + b * cs;
        theta_base *= theta_scale;
    }
    if (y != x)
        for (int k = n_rot; k < head_dim; k++) y[k] = x[k];
}

__global__ void hx_hip_kv_store(const float *k, int64_t k_stride, const float *v, int64_t v_stride,
                                float *kc, int64_t kc_stride, float *vc, int64_t vc_stride,
                                int64_t width, const int32_t *pos, const int32_t *seq, int64_t n_ctx)
{
    const int64_t r = blockIdx.y;
    const int64_t dr = (int64_t)seq[r] * n_ctx + pos[r];
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < width; c += (int64_t)gridDim.x * blockDim.x) {
        kc[dr * kc_stride + c] = k[r * k_stride + c];
        vc[dr * vc_stride + c] = v[r * v_stride + c];
    }
}

/* One block per (head, row): each 32-lane group runs an online softmax over its share of the
 * positions 0..pos[r] (lane owns dims lane + 32i), then the groups are merged. */
__global__ void __launch_bounds__(32 * HX_HIP_ATTN_WARPS)
hx_hip_attn(const float *q, int64_t q_stride, const float *kc, int64_t kc_stride, const float *vc,
            int64_t vc_stride, float *dst, int64_t dst_stride, int n_head, int n_head_kv, int hd,
            float scale, int64_t n_ctx, const int32_t *pos, const int32_t *seq)
{
    __shared__ float sm[HX_HIP_ATTN_WARPS], sl[HX_HIP_ATTN_WARPS];
    __shared__ float sacc[HX_HIP_ATTN_WARPS][HX_HIP_HD_MAX];
    const int h = blockIdx.x, lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int64_t r = blockIdx.y;
    const int kvh = h / (n_head / n_head_kv);
    const int64_t row0 = (int64_t)seq[r] * n_ctx;
    const int32_t p = pos[r];
    const float *qr = q + r * q_stride + (int64_t)h * hd;
    float qv[HX_HIP_HD_MAX / 32], acc[HX_HIP_HD_MAX / 32];
    for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
        int d = lane + 32 * i;
        qv[i] = d < hd ? qr[d] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int32_t t = w; t <= p; t += HX_HIP_ATTN_WARPS) {
        const float *kr = kc + (row0 + t) * kc_stride + (int64_t)kvh * hd;
        const float *vr = vc + (row0 + t) * vc_stride + (int64_t)kvh * hd;
        float s = 0.0f;
        for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
            int d = lane + 32 * i;
            if (d < hd) s += qv[i] * kr[d];
        }
        s = scale * hx_hip_warp_sum(s);
        const float mn = fmaxf(m, s), corr = expf(m - mn), e = expf(s - mn);
        l = l * corr + e;
        for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
            int d = lane + 32 * i;
            acc[i] = acc[i] * corr + (d < hd ? e * vr[d] : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) sm[w] = m, sl[w] = l;
    for (int i = 0; i < HX_HIP_HD_MAX / 32; i++)
        if (lane + 32 * i < hd) sacc[w][lane + 32 * i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < HX_HIP_ATTN_WARPS; i++) M = fmaxf(M, sm[i]);
    float L = 0.0f, f[HX_HIP_ATTN_WARPS];
    for (int i = 0; i < HX_HIP_ATTN_WARPS; i++) {
        f[i] = sl[i] > 0.0f ? expf(sm[i] - M) : 0.0f;   /* a group with no positions adds 0 */
        L += sl[i] * f[i];
    }
    float *o = dst + r * dst_stride + (int64_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float s = 0.0f;
        for (int i = 0; i < HX_HIP_ATTN_WARPS; i++) s += f[i] ? sacc[i][d] * f[i] : 0.0f;
        o[d] = s / L;
    }
}

enum { HX_HIP_EW_ADD, HX_HIP_EW_SWIGLU, HX_HIP_EW_RELU2 };
__global__ void hx_hip_eltwise(int kind, const float *a, int64_t a_stride, const float *b,
                               int64_t b_stride, float *y, int64_t y_stride, int64_t n, int64_t f)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < f; c += (int64_t)gridDim.x * blockDim.x) {
            float x = a[r * a_stride + c], u = b[r * b_stride + c], v;
            if (kind == HX_HIP_EW_ADD) v = x + u;
            else if (kind == HX_HIP_EW_SWIGLU) v = x / (1.0f + expf(-x)) * u;
            else v = fmaxf(x, 0.0f) * fmaxf(x, 0.0f) * u;
            y[r * y_stride + c] = v;
        }
}
