/*
 * cpu-unpack.h — weight row → panel unpacking (codes, lane scales, group corrections; see
 * cpu-impl.h), as a static inline so each ISA file compiles (and auto-vectorizes) its own copy.
 */
#pragma once

#include <string.h>

#include "cpu-impl.h"

/* fp16 → f32 without F16C: finite values exact (subnormals via the 2^112 rescale). */
static inline float hx_cpu_h2f(const uint8_t *p)
{
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    if ((h & 0x7C00) == 0x7C00) return hx_fp16_to_fp32(h);
    uint32_t u = (uint32_t)(h & 0x7FFF) << 13;
    float f;
    memcpy(&f, &u, 4);
    f *= 0x1p112f;
    return (h & 0x8000) ? -f : f;
}

/* Fill lanes [e0, e0+n) with scale s and 16-groups [e0, e0+n) with correction m. */
static inline void hx_cpu_fill(float *wsl, float *mc, int64_t e0, int64_t n, float s, float m)
{
    for (int64_t i = e0 >> 2; i < (e0 + n) >> 2; i++) wsl[i] = s;
    for (int64_t i = e0 >> 4; i < (e0 + n) >> 4; i++) mc[i] = m;
}

static inline void hx_cpu_q4k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* ts: the weight's tensor scale (I2_S: its lane scale, as TQ2_0's d is; ignored otherwise). */
static inline void hx__cpu_unpack_row_impl(enum hx_dtype t, const void *row, int64_t k, float ts,
                                           struct hx_cpu_panel *p, int i)
{
    const uint8_t *b = row;
    uint8_t *u = p->codes + (size_t)i * k;
    float *wsl = p->wsl + (size_t)i * (k / 4), *mc = p->mc + (size_t)i * (k / 16);
    switch (t) {
    case HX_DTYPE_Q8_0:
        for (int64_t e = 0; e < k; e += 32, b += 34) {
            float d = hx_cpu_h2f(b);
            for (int j = 0; j < 32; j++) u[e + j] = (uint8_t)(b[2 + j] ^ 0x80);
            hx_cpu_fill(wsl, mc, e, 32, d, -128.0f * d);
        }
        break;
    case HX_DTYPE_Q4_0:
        for (int64_t e = 0; e < k; e += 32, b += 18) {
            float d = hx_cpu_h2f(b);
            for (int j = 0; j < 16; j++) {
                u[e + j] = b[2 + j] & 0x0F;
                u[e + 16 + j] = b[2 + j] >> 4;
            }
            hx_cpu_fill(wsl, mc, e, 32, d, -8.0f * d);
        }
        break;
    case HX_DTYPE_Q4_K:
        for (int64_t e = 0; e < k; e += 256, b += 144) {
            float d = hx_cpu_h2f(b), dmin = hx_cpu_h2f(b + 2);
            const uint8_t *qs = b + 16;
            for (int c = 0; c < 4; c++) {
                for (int l = 0; l < 32; l++) {
                    u[e + 64 * c + l] = qs[32 * c + l] & 0x0F;
                    u[e + 64 * c + 32 + l] = qs[32 * c + l] >> 4;
                }
            }
            for (int j = 0; j < 8; j++) {
                int sc, m;
                hx_cpu_q4k_scale_min(b + 4, j, &sc, &m);
                hx_cpu_fill(wsl, mc, e + 32 * j, 32, d * (float)sc, -dmin * (float)m);
            }
        }
        break;
    case HX_DTYPE_Q5_K: /* Q4_K's codes with a fifth bit: u in 0..31 */
        for (int64_t e = 0; e < k; e += 256, b += 176) {
            float d = hx_cpu_h2f(b), dmin = hx_cpu_h2f(b + 2);
            const uint8_t *qh = b + 16, *qs = b + 48;
            for (int c = 0; c < 4; c++) {
                for (int l = 0; l < 32; l++) {
                    u[e + 64 * c + l] = (uint8_t)((qs[32 * c + l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4));
                    u[e + 64 * c + 32 + l] =
                        (uint8_t)((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
                }
            }
            for (int j = 0; j < 8; j++) {
                int sc, m;
                hx_cpu_q4k_scale_min(b + 4, j, &sc, &m);
                hx_cpu_fill(wsl, mc, e + 32 * j, 32, d * (float)sc, -dmin * (float)m);
            }
        }
        break;
    case HX_DTYPE_Q6_K:
        for (int64_t e = 0; e < k; e += 256, b += 210) {
            const uint8_t *ql = b, *qh = b + 128;
            const int8_t *sc = (const int8_t *)(b + 192);
            float d = hx_cpu_h2f(b + 208);
            for (int h = 0; h < 2; h++) {
                uint8_t *uu = u + e + 128 * h;
                const uint8_t *l4 = ql + 64 * h, *h2 = qh + 32 * h;
                for (int l = 0; l < 32; l++) {
                    uu[l] = (uint8_t)((l4[l] & 0xF) | ((h2[l] & 3) << 4));
                    uu[l + 32] = (uint8_t)((l4[l + 32] & 0xF) | (((h2[l] >> 2) & 3) << 4));
                    uu[l + 64] = (uint8_t)((l4[l] >> 4) | (((h2[l] >> 4) & 3) << 4));
                    uu[l + 96] = (uint8_t)((l4[l + 32] >> 4) | (((h2[l] >> 6) & 3) << 4));
                }
            }
            for (int g = 0; g < 16; g++) {
                float s = d * (float)sc[g];
                hx_cpu_fill(wsl, mc, e + 16 * g, 16, s, -32.0f * s);
            }
        }
        break;
    case HX_DTYPE_TQ2_0:
        for (int64_t e = 0; e < k; e += 256, b += 66) {
            float d = hx_cpu_h2f(b + 64);
            for (int c = 0; c < 2; c++)
                for (int n = 0; n < 4; n++)
                    for (int m = 0; m < 32; m++)
                        u[e + 64 * n + 32 * c + m] = (b[32 * c + m] >> (2 * n)) & 3;
            hx_cpu_fill(wsl, mc, e, 256, d, -d);
        }
        break;
    case HX_DTYPE_TQ1_0: {
        static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
        for (int64_t e = 0; e < k; e += 256, b += 54) {
            float d = hx_cpu_h2f(b + 52);
            uint8_t *uu = u + e;
            for (int n = 0; n < 5; n++) {
                for (int m = 0; m < 32; m++) {
                    uint8_t q = (uint8_t)(b[m] * pow3[n]);
                    uu[32 * n + m] = (uint8_t)(((uint16_t)q * 3) >> 8);
                }
                for (int m = 0; m < 16; m++) {
                    uint8_t q = (uint8_t)(b[32 + m] * pow3[n]);
                    uu[160 + 16 * n + m] = (uint8_t)(((uint16_t)q * 3) >> 8);
                }
            }
            for (int n = 0; n < 4; n++)
                for (int j = 0; j < 4; j++) {
                    uint8_t q = (uint8_t)(b[48 + j] * pow3[n]);
                    uu[240 + 4 * n + j] = (uint8_t)(((uint16_t)q * 3) >> 8);
                }
            hx_cpu_fill(wsl, mc, e, 256, d, -d);
        }
        break;
    }
    case HX_DTYPE_Q1_0:
        for (int64_t e = 0; e < k; e += 128, b += 18) {
            float d = hx_cpu_h2f(b);
            for (int j = 0; j < 16; j++) {
                /* spread the 8 bits of a byte over 8 bytes, LSB first */
                uint64_t x = ((uint64_t)b[2 + j] * 0x0101010101010101ull) & 0x8040201008040201ull;
                x = ((x + 0x7F7F7F7F7F7F7F7Full) & 0x8080808080808080ull) >> 7;
                memcpy(u + e + 8 * j, &x, 8);
            }
            hx_cpu_fill(wsl, mc, e, 128, 2.0f * d, -d);
        }
        break;
    case HX_DTYPE_Q2_0:
        for (int64_t e = 0; e < k; e += 64, b += 18) {
            float d = hx_cpu_h2f(b);
            for (int j = 0; j < 64; j++) u[e + j] = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
            hx_cpu_fill(wsl, mc, e, 64, d, -d);
        }
        break;
    case HX_DTYPE_I2_S: {
        /* Where K is whole 256s the codes go in TQ2_0's code order (hx__cpu_type_permuted), so
         * that the same ternary weights give TQ2_0's lane sums bit for bit; else natural order */
        const bool perm = hx__cpu_type_permuted(t, k);
        for (int64_t e = 0; e < k; e += 128, b += 32)
            for (int j = 0; j < 128; j++) {
                const int64_t x = e + j;
                const uint8_t c = (b[j % 32] >> (6 - 2 * (j / 32))) & 3;
                u[perm ? (x & ~(int64_t)255) + hx__cpu_perm_tq2((int)(x & 255)) : x] = c;
            }
        hx_cpu_fill(wsl, mc, 0, k, ts, -ts);
        break;
    }
    default:
        memset(u, 0, (size_t)k);
        hx_cpu_fill(wsl, mc, 0, k, 0.0f, 0.0f);
        break;
    }
}
