/*
 * hip-decode.h — device-side decoding of GGUF weight blocks exactly as stored (formats.md §3):
 * fp16/bf16 conversion, block geometry per type, one element (hx_hip_dq1) or eight
 * consecutive elements (hx_hip_dq8) of a weight row, and the packed-trit helper of TQ1_0.
 * Blocks are 2-byte aligned at best (18, 34, 54, 66, 210 bytes), so multi-byte fields are
 * read with 16-bit loads unless a layout guarantees more (Q4_K: 144 = 9 x 16).
 */
#pragma once

#include <stdint.h>

#include "hip-compat.h"
#include "hx-backend.h"

#ifndef HX_MIN
#define HX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HX_MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

static __device__ __forceinline__ float hx_hip_h2f(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float f = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return sign ? -f : f;
    }
    const uint32_t u =
        e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
    return __uint_as_float(u);
}
static __device__ __forceinline__ float hx_hip_bf2f(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}
static __device__ __forceinline__ uint16_t hx_hip_ld16(const uint8_t *p)
{
    return *(const uint16_t *)p;
}
static __device__ __forceinline__ float hx_hip_ldh(const uint8_t *p)
{
    return hx_hip_h2f(hx_hip_ld16(p));
}
/* 32 bits from a 2-byte aligned address, little-endian. */
static __device__ __forceinline__ int hx_hip_ld32(const uint8_t *p)
{
    const uint16_t *q = (const uint16_t *)p;
    return (int)((uint32_t)q[0] | ((uint32_t)q[1] << 16));
}

/* Block geometry: E elements in B bytes; P = parts a GEMV lane takes per block. */
template <int T> struct hx_hip_blk;
template <> struct hx_hip_blk<HX_DTYPE_F32> {
    enum { E = 1, B = 4, P = 1 };
};
template <> struct hx_hip_blk<HX_DTYPE_F16> {
    enum { E = 1, B = 2, P = 1 };
};
template <> struct hx_hip_blk<HX_DTYPE_BF16> {
    enum { E = 1, B = 2, P = 1 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q8_0> {
    enum { E = 32, B = 34, P = 4 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q4_0> {
    enum { E = 32, B = 18, P = 2 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q4_K> {
    enum { E = 256, B = 144, P = 8 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q6_K> {
    enum { E = 256, B = 210, P = 8 };
};
template <> struct hx_hip_blk<HX_DTYPE_TQ1_0> {
    enum { E = 256, B = 54, P = 8 };
};
template <> struct hx_hip_blk<HX_DTYPE_TQ2_0> {
    enum { E = 256, B = 66, P = 8 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q1_0> {
    enum { E = 128, B = 18, P = 4 };
};
template <> struct hx_hip_blk<HX_DTYPE_Q2_0> {
    enum { E = 64, B = 18, P = 2 };
};
/* I2_S: a "block" is 128 elements of a row in 32 bytes of codes; the scale is per tensor */
template <> struct hx_hip_blk<HX_DTYPE_I2_S> {
    enum { E = 128, B = 32, P = 4 };
};

/* Q4_K: 6-bit scale and min of sub-block j (ggml's get_scale_min_k4). */
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

/* TQ1_0: trit n of a byte is the top base-3 digit of (byte * 3^n mod 256) / 256. */
static __device__ __forceinline__ int hx_hip_trit(uint32_t byte, uint32_t pow3)
{
    return (int)((((byte * pow3) & 0xFFu) * 3u) >> 8);
}
/* The same for the four bytes of w at once: bytes 0/2 and 1/3 in 16-bit lanes, where
 * byte * 3^n (<= 255 * 81) and q * 3 (<= 765) cannot carry into the next lane. */
static __device__ __forceinline__ int hx_hip_trit4(int w, uint32_t pow3)
{
    const uint32_t u = (uint32_t)w;
    uint32_t lo = ((u & 0x00FF00FFu) * pow3) & 0x00FF00FFu;
    uint32_t hi = (((u >> 8) & 0x00FF00FFu) * pow3) & 0x00FF00FFu;
    lo = ((lo * 3u) >> 8) & 0x00030003u;
    hi = ((hi * 3u) >> 8) & 0x00030003u;
    return (int)(lo | (hi << 8));
}

/* TQ1_0 trit code (0..2) of element e of block b. */
static __device__ __forceinline__ int hx_hip_tq1_code(const uint8_t *b, int e)
{
    const uint32_t p3[5] = {1, 3, 9, 27, 81};
    if (e < 160) return hx_hip_trit(b[e % 32], p3[e / 32]);
    if (e < 240) return hx_hip_trit(b[32 + (e - 160) % 16], p3[(e - 160) / 16]);
    return hx_hip_trit(b[48 + (e - 240) % 4], p3[(e - 240) / 4]);
}

/* Q2_0: the four 2-bit codes of byte `b`, lowest first, as four bytes. */
static __device__ __forceinline__ int hx_hip_crumbs4(uint32_t b)
{
    return (int)((b | (b << 6) | (b << 12) | (b << 18)) & 0x03030303u);
}

/* Element k of a weight row that starts at `row`; ts: the tensor scale (I2_S). */
template <int T>
static __device__ __forceinline__ float hx_hip_dq1(const uint8_t *row, int64_t k, float ts = 1.0f)
{
    typedef hx_hip_blk<T> G;
    const uint8_t *b = row + (k / G::E) * G::B;
    const int e = (int)(k % G::E);
    switch (T) {
    case HX_DTYPE_F32: return ((const float *)row)[k];
    case HX_DTYPE_F16: return hx_hip_h2f(((const uint16_t *)row)[k]);
    case HX_DTYPE_BF16: return hx_hip_bf2f(((const uint16_t *)row)[k]);
    case HX_DTYPE_Q8_0: return hx_hip_ldh(b) * (float)(int8_t)b[2 + e];
    case HX_DTYPE_Q4_0: {
        const int q = e < 16 ? (b[2 + e] & 0x0F) : (b[2 + e - 16] >> 4);
        return hx_hip_ldh(b) * (float)(q - 8);
    }
    case HX_DTYPE_Q4_K: {
        const int c = e / 64, l = e % 64;
        const int q = l < 32 ? (b[16 + 32 * c + l] & 0x0F) : (b[16 + 32 * c + l - 32] >> 4);
        int sc, m;
        hx_hip_q4k_scale(b + 4, e / 32, &sc, &m);
        return hx_hip_ldh(b) * (float)sc * (float)q - hx_hip_ldh(b + 2) * (float)m;
    }
    case HX_DTYPE_Q6_K: {
        const int h = e / 128, r = e % 128, k4 = r / 32, l = r % 32;
        const int ql = b[64 * h + l + ((k4 & 1) ? 32 : 0)];
        const int lo = k4 >= 2 ? (ql >> 4) : (ql & 0x0F);
        const int hi = (b[128 + 32 * h + l] >> (2 * k4)) & 3;
        return hx_hip_ldh(b + 208) * (float)(int8_t)b[192 + e / 16] *
               (float)((lo | (hi << 4)) - 32);
    }
    case HX_DTYPE_TQ2_0: {
        const int c = e / 128, n = (e % 128) / 32, m = e % 32;
        return (float)(((b[32 * c + m] >> (2 * n)) & 3) - 1) * hx_hip_ldh(b + 64);
    }
    case HX_DTYPE_TQ1_0: return (float)(hx_hip_tq1_code(b, e) - 1) * hx_hip_ldh(b + 52);
    case HX_DTYPE_Q1_0: {
        const float d = hx_hip_ldh(b);
        return ((b[2 + e / 8] >> (e % 8)) & 1) ? d : -d;
    }
    case HX_DTYPE_Q2_0: return (float)(((b[2 + e / 4] >> (2 * (e % 4))) & 3) - 1) * hx_hip_ldh(b);
    case HX_DTYPE_I2_S: return (float)(((b[e % 32] >> (6 - 2 * (e / 32))) & 3) - 1) * ts;
    default: return 0.0f;
    }
}

/* Elements k .. k+7 of a weight row (k % 8 == 0; for F32/F16/BF16 also k + 8 <= K). Every
 * block holds a multiple of 32 elements, so the eight share one block and one scale. */
template <int T>
static __device__ __forceinline__ void hx_hip_dq8(const uint8_t *row, int64_t k, float *o,
                                                  float ts = 1.0f)
{
    typedef hx_hip_blk<T> G;
    const uint8_t *b = row + (k / G::E) * G::B;
    const int e = (int)(k % G::E);
    switch (T) {
    case HX_DTYPE_F32:
        for (int i = 0; i < 8; i++) o[i] = ((const float *)row)[k + i];
        return;
    case HX_DTYPE_F16:
        for (int i = 0; i < 8; i++) o[i] = hx_hip_h2f(((const uint16_t *)row)[k + i]);
        return;
    case HX_DTYPE_BF16:
        for (int i = 0; i < 8; i++) o[i] = hx_hip_bf2f(((const uint16_t *)row)[k + i]);
        return;
    case HX_DTYPE_Q8_0: {
        const float d = hx_hip_ldh(b);
        for (int i = 0; i < 8; i++) o[i] = d * (float)(int8_t)b[2 + e + i];
        return;
    }
    case HX_DTYPE_Q4_0: {
        const float d = hx_hip_ldh(b);
        const uint8_t *q = b + 2 + (e & 15);
        for (int i = 0; i < 8; i++) o[i] = d * (float)((e < 16 ? (q[i] & 0x0F) : (q[i] >> 4)) - 8);
        return;
    }
    case HX_DTYPE_Q4_K: {
        const int c = e / 64, l = e % 64;
        int sc, m;
        hx_hip_q4k_scale(b + 4, e / 32, &sc, &m);
        const float d = hx_hip_ldh(b) * (float)sc, dm = hx_hip_ldh(b + 2) * (float)m;
        const uint8_t *q = b + 16 + 32 * c + (l & 31);
        for (int i = 0; i < 8; i++) o[i] = d * (float)(l < 32 ? (q[i] & 0x0F) : (q[i] >> 4)) - dm;
        return;
    }
    case HX_DTYPE_Q6_K: {
        const int h = e / 128, r = e % 128, k4 = r / 32, l = r % 32;
        const uint8_t *ql = b + 64 * h + l + ((k4 & 1) ? 32 : 0), *qh = b + 128 + 32 * h + l;
        const float d = hx_hip_ldh(b + 208) * (float)(int8_t)b[192 + e / 16];
        for (int i = 0; i < 8; i++) {
            const int lo = k4 >= 2 ? (ql[i] >> 4) : (ql[i] & 0x0F), hi = (qh[i] >> (2 * k4)) & 3;
            o[i] = d * (float)((lo | (hi << 4)) - 32);
        }
        return;
    }
    case HX_DTYPE_TQ2_0: {
        const int c = e / 128, n = (e % 128) / 32, m = e % 32;
        const float d = hx_hip_ldh(b + 64);
        for (int i = 0; i < 8; i++) o[i] = d * (float)(((b[32 * c + m + i] >> (2 * n)) & 3) - 1);
        return;
    }
    case HX_DTYPE_TQ1_0: {
        const float d = hx_hip_ldh(b + 52);
        for (int i = 0; i < 8; i++) o[i] = d * (float)(hx_hip_tq1_code(b, e + i) - 1);
        return;
    }
    case HX_DTYPE_Q1_0: {
        const float d = hx_hip_ldh(b);
        const int bits = b[2 + e / 8];
        for (int i = 0; i < 8; i++) o[i] = ((bits >> i) & 1) ? d : -d;
        return;
    }
    case HX_DTYPE_Q2_0: {
        const float d = hx_hip_ldh(b);
        for (int i = 0; i < 8; i++)
            o[i] = d * (float)(((b[2 + (e + i) / 4] >> (2 * ((e + i) % 4))) & 3) - 1);
        return;
    }
    case HX_DTYPE_I2_S: {
        const int g = e / 32, m = e % 32;
        for (int i = 0; i < 8; i++) o[i] = ts * (float)(((b[m + i] >> (6 - 2 * g)) & 3) - 1);
        return;
    }
    default:
        for (int i = 0; i < 8; i++) o[i] = 0.0f;
    }
}
