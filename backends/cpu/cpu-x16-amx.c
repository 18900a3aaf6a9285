/*
 * cpu-x16-amx.c — Q8_0 prefill GEMM on AMX tiles, over the same x16 weight tiles the VNNI
 * kernels read (cpu-x16.h).
 *
 * A Q8_0 group of an x16 tile is 8 vectors of 64 bytes, byte 4·r + b of vector c being the
 * code of output row r, element 4·c + b: exactly an AMX B tile of 8 rows × 64 bytes in the
 * VNNI layout, so the weights need no second copy. The codes are u = q + 128; flipping their
 * top bit gives q back, so each group's 512 bytes are xor-ed into a small buffer (once for 64
 * activation rows) and one TDPBSSD per group and block of 16 rows gives the 16 × 16 exact
 * integer dots Σx·q — no −128·Σx correction to add per row, which is a quarter of the vector
 * work that bounds this kernel. AVX-512 then converts and scales them into float
 * accumulators, acc += f32(dot)·(ws·dx), as the VNNI kernel does, so both paths give the same
 * bits. Scales differ per group of 32, which is why a tile product covers 32 elements, not
 * AMX's full 64.
 *
 * Four 16-row blocks share each B tile load (64 activation rows per pass over a thread's
 * weight tiles, as the VNNI path), the integer tiles of one group are scaled while the next
 * group's products run, and rows past the last full block of 16 are left to the VNNI kernel.
 * AMX state needs the kernel's permission (arch_prctl, cpu-features.c) and a tile
 * configuration per thread, loaded on every call (the pool threads are long-lived, but a
 * call must not assume what ran on them before).
 */
#include <immintrin.h>
#include <string.h>

#include "cpu-x16.h"
#include "hx-impl.h"

#define HX_AMX_MB 4 /* 16-row blocks per pass */
#ifndef HX_AMX_PF
#define HX_AMX_PF 2176 /* bytes of weight prefetch distance: 4 groups */
#endif

struct hx_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* tmm0: B (8 × 64 bytes), tmm1..3: A (16 × 32 bytes), tmm4..7: C (16 × 16 int32) */
static void hx_amx_config(void)
{
    struct hx_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = 8, c.colsb[0] = 64;
    for (int i = 1; i <= 3; i++) c.rows[i] = 16, c.colsb[i] = 32;
    for (int i = 4; i <= 7; i++) c.rows[i] = 16, c.colsb[i] = 64;
    _tile_loadconfig(&c);
}

/* C tile i of group g for block b: zero, A tile from the activations, product with B. */
#define HX_AMX_DOT(ci, ai, rowp, k)                                                                 \
    do {                                                                                            \
        _tile_zero(ci);                                                                             \
        _tile_loadd(ai, (rowp), (k));                                                               \
        _tile_dpbssd(ci, ai, 0);                                                                    \
    } while (0)

/* acc[16 rows][16] += f32(C)·(ws·d) for one group of one block */
static inline void hx_amx_scale(const int32_t *c, __m512 ws, const float *d, int64_t nb, float *acc)
{
    for (int r = 0; r < 16; r++) {
        const __m512i s = _mm512_load_si512(c + 16 * r);
        const __m512 sx = _mm512_mul_ps(ws, _mm512_set1_ps(d[r * nb]));
        _mm512_store_ps(acc + 16 * r, _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sx, _mm512_load_ps(acc + 16 * r)));
    }
}

void hx__x16_gemm_amx_q8_0(const struct hx_cpu_x16 *x, const struct hx_cpu_xact *a, int64_t r0,
                           int64_t r1, int64_t t0, int64_t t1, float *dst, int64_t dst_stride,
                           float scale)
{
    const int64_t k = a->k, ng = k / 32, nb = k / a->qb;
    int32_t cbuf[2][HX_AMX_MB][256] __attribute__((aligned(64)));
    float acc[HX_AMX_MB][256] __attribute__((aligned(64)));
    uint8_t sbuf[2][512] __attribute__((aligned(64)));
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    hx_amx_config();
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t rb = r0; rb + 16 <= r1; rb += 16 * HX_AMX_MB) {
        int nmb = (int)((r1 - rb) / 16);
        nmb = nmb > HX_AMX_MB ? HX_AMX_MB : nmb;
        const int8_t *q = a->q + rb * k;
        for (int64_t t = t0; t < t1; t++) {
            const uint8_t *tile = x->data + x->tile_bytes * (size_t)t;
            memset(acc, 0, sizeof acc);
            for (int64_t g = 0; g <= ng; g++) {
                int32_t(*cb)[256] = cbuf[g & 1];
                if (g < ng) { /* products of group g ... */
                    const uint8_t *p = tile + g * 544;
                    /* the next groups' weights (and, at the end, the next tile's: tiles are
                     * consecutive): tile loads are not covered by the hardware prefetchers
                     * as well as vector loads */
                    for (int o = 0; o < 576; o += 64) _mm_prefetch((const char *)p + HX_AMX_PF + o, _MM_HINT_T0);
                    uint8_t *sg = sbuf[g & 1];
                    for (int v = 0; v < 8; v++)
                        _mm512_store_si512(sg + 64 * v, _mm512_xor_si512(_mm512_loadu_si512(p + 64 * v), x80));
                    _tile_loadd(0, sg, 64);
                    const int8_t *ag = q + g * 32;
                    HX_AMX_DOT(4, 1, ag, k);
                    _tile_stored(4, cb[0], 64);
                    if (nmb > 1) {
                        HX_AMX_DOT(5, 2, ag + 16 * k, k);
                        _tile_stored(5, cb[1], 64);
                    }
                    if (nmb > 2) {
                        HX_AMX_DOT(6, 3, ag + 32 * k, k);
                        _tile_stored(6, cb[2], 64);
                    }
                    if (nmb > 3) {
                        HX_AMX_DOT(7, 1, ag + 48 * k, k);
                        _tile_stored(7, cb[3], 64);
                    }
                }
                if (g > 0) { /* ... while group g − 1 is scaled */
                    const int64_t gp = g - 1;
                    const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + gp * 544 + 512)));
                    int32_t(*cp)[256] = cbuf[gp & 1];
                    for (int b = 0; b < nmb; b++) {
                        const int64_t row = rb + 16 * b;
                        hx_amx_scale(cp[b], ws, a->d + row * nb + (gp * 32) / a->qb, nb, acc[b]);
                    }
                }
            }
            const int64_t cols = HX_MIN((int64_t)HX_X16_ROWS, x->n - t * HX_X16_ROWS);
            const __mmask16 om = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
            for (int b = 0; b < nmb; b++)
                for (int r = 0; r < 16; r++)
                    _mm512_mask_storeu_ps(dst + (rb + 16 * b + r) * dst_stride + t * HX_X16_ROWS, om,
                                          _mm512_mul_ps(_mm512_load_ps(acc[b] + 16 * r), vs));
        }
    }
    _tile_release();
}
