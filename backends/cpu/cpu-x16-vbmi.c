/*
 * cpu-x16-vbmi.c — Q1_0 decode (one activation row) by table lookup, AVX-512 VBMI.
 *
 * A Q1_0 vector v of an x16 tile holds, in byte 4·r + b, the sign bits of row r for the
 * elements 32v + 4i + b, i = 0..7 (bit i). The bit-mask kernel (cpu-x16-avx512.c) spends a
 * vpand and a vpdpbusd per bit: 16 512-bit ops per 64 weight bytes, which on a CPU that splits
 * 512-bit ops in two halves (Zen 4) is ~9 cycles per 64 bytes and slower than DRAM. Here each
 * nibble of a weight byte indexes a table instead: for half h (bits 4h..4h+3), byte position
 * b and nibble n, the signed sum
 *
 *     E(h, b, n) = Σ_{j<4} (bit j of n ? +1 : −1) · q[32v + 16h + 4j + b]
 *
 * of the quantized activations is looked up with vpermb (index b·16 + n, 64 entries). E lies
 * in [−508, 508]: the tables hold E + 512 split into a low byte (TL) and a high byte (TH, 0..3),
 * and vpdpbusd with ones sums each row's 4 bytes into its int32 lane. A group's dot is
 * ΣTL + 256·ΣTH − 32·512, the same integer the bit-mask kernel computes (2·Σ_{bit}q − Σq), then
 * scaled by the same float operations in the same order, so both paths give the same bits.
 * Per 64 weight bytes: a shift, two vpternlogd, four vpermb and four vpdpbusd.
 *
 * The four tables of a vector (256 bytes) are loaded once for a block of 4 or 8 tiles
 * (x->lut_tiles), which are walked vector-major: their accumulators stay in registers and the
 * tables are read from L1 once per block, not once per tile. A block's tiles are not adjacent
 * but L = (thread's tiles) / (tiles per block) apart, and block b + 1 takes the tiles after
 * block b's: the walk reads 4 or 8 long sequential streams side by side. While group g runs,
 * group g + x->lut_ahead of the block (past the last, the first groups of the next block,
 * strided or the one left over) is prefetched into L2 in the order it will be read. Tiles per
 * block and groups ahead are chosen per CPU when the weight is repacked (hx__cpu_q1_lut: 8 and
 * 7 on AMD, 8 and 3 elsewhere).
 * Blocks of adjacent tiles, as the walk took them before, read 4 or 8 streams of one tile
 * each (2304 bytes for K = 1024), and on the Xeon VM (2 threads, time over a plain read of the
 * same tiles, call by call in rotating order, 20 rotations) the long streams took 1024→4096
 * from x1.13 to x0.95, 1024→6144 x1.08 → x0.92, 2048→1024 x1.08 → x1.01, 3072→1024
 * x1.02 → x0.91 and 4096→4096 x0.97 → x0.95.
 *
 * Tables are built per call by each thread from its quantized row (K·8 bytes: 8 KiB for
 * K = 1024): per 32 activations one vpshufb (4×4 byte transpose), and per (h, b) one
 * broadcast and one vpdpbusd of the q + 128 bytes with the ±1 sign pattern of each nibble,
 * started from 512 − 128·Σ signs, which leaves E + 512 in each int32 lane. The build takes
 * ~0.45 µs per 1024 activations. The walk's first block builds each group's tables just
 * before it reads them, so the build's work is done while that block's lines arrive, after
 * one burst of prefetches for the block's groups before its distance (its first group is
 * prefetched before the row is quantized). Built before the walk instead, with the walk's
 * next groups prefetched one per 64 activations meanwhile, on the Xeon VM (2 threads, time
 * over a plain read of the same tiles, call by call in rotating order, two rounds of 30,
 * with the blocks of adjacent tiles the walk took then): 2048→1024 x1.13-1.17 against
 * x1.08, 3072→1024 x1.07-1.09 against x1.00-1.03; K = 1024 within 1% either way.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu-impl.h"
#include "cpu-x16.h"
#include "hx-impl.h"

#define HX_Q1L_TB 8         /* tiles per block, at most */
#define HX_Q1L_GBYTES 288   /* bytes of a Q1_0 group in a tile: h[16] d, vec[4] */

size_t hx__x16_q1_lut_bytes(int64_t k)
{
    return (size_t)(k / 32) * 256 + 64;
}

/* Dword n: byte j is the sign (+1 / -1) of bit j of nibble n. */
#define HX_Q1L_SG(n, j) ((uint32_t)((n) >> (j) & 1 ? 0x01u : 0xFFu) << (8 * (j)))
#define HX_Q1L_SW(n) (HX_Q1L_SG(n, 0) | HX_Q1L_SG(n, 1) | HX_Q1L_SG(n, 2) | HX_Q1L_SG(n, 3))
static const uint32_t hx_q1l_signs[16] = {
    HX_Q1L_SW(0), HX_Q1L_SW(1), HX_Q1L_SW(2),  HX_Q1L_SW(3),  HX_Q1L_SW(4),  HX_Q1L_SW(5),
    HX_Q1L_SW(6), HX_Q1L_SW(7), HX_Q1L_SW(8),  HX_Q1L_SW(9),  HX_Q1L_SW(10), HX_Q1L_SW(11),
    HX_Q1L_SW(12), HX_Q1L_SW(13), HX_Q1L_SW(14), HX_Q1L_SW(15)};
/* 512 - 128·Σ_j sign_j(n) = 1024 - 256·popcount(n): Σ sign·(q + 128) started from it is E + 512. */
#define HX_Q1L_ST(n) (1024 - 256 * __builtin_popcount(n))
static const int32_t hx_q1l_start[16] = {
    HX_Q1L_ST(0), HX_Q1L_ST(1), HX_Q1L_ST(2),  HX_Q1L_ST(3),  HX_Q1L_ST(4),  HX_Q1L_ST(5),
    HX_Q1L_ST(6), HX_Q1L_ST(7), HX_Q1L_ST(8),  HX_Q1L_ST(9),  HX_Q1L_ST(10), HX_Q1L_ST(11),
    HX_Q1L_ST(12), HX_Q1L_ST(13), HX_Q1L_ST(14), HX_Q1L_ST(15)};
/* From two int32 vectors (lanes n of b, b + 1): bytes 0 of all 32 lanes, then bytes 1. */
#define HX_Q1L_P4(i, o) 4 * (i) + (o), 4 * (i) + 4 + (o), 4 * (i) + 8 + (o), 4 * (i) + 12 + (o)
#define HX_Q1L_P32(o) HX_Q1L_P4(0, o), HX_Q1L_P4(4, o), HX_Q1L_P4(8, o), HX_Q1L_P4(12, o), \
    HX_Q1L_P4(16, o), HX_Q1L_P4(20, o), HX_Q1L_P4(24, o), HX_Q1L_P4(28, o)
static const uint8_t hx_q1l_pick[64] = {HX_Q1L_P32(0), HX_Q1L_P32(1)};

/* Prefetch into L2 group g of the tiles t + i·ts, i < nt (the five lines of its 288 bytes). */
static inline void hx_q1l_prefetch_group(const struct hx_cpu_x16 *x, int64_t t, int nt, int64_t ts,
                                         int64_t g)
{
    for (int i = 0; i < nt; i++) {
        const char *p = (const char *)x->data + x->tile_bytes * (size_t)(t + i * ts) +
                        (size_t)g * HX_Q1L_GBYTES;
        for (int l = 0; l < 5; l++) _mm_prefetch(p + 64 * l, _MM_HINT_T2);
    }
}

/* The tables of vectors v0 and v0 + 1 (v0 even) of a quantized row q into lut. */
static inline void hx_q1l_build_pair(uint8_t *lut, const int8_t *q, int64_t v0)
{
    const __m512i signs = _mm512_loadu_si512(hx_q1l_signs), start = _mm512_loadu_si512(hx_q1l_start);
    /* per 16-byte lane (32v + 16h .. +15, element 4j + b at byte 4j + b): to byte 4b + j */
    const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i pick = _mm512_loadu_si512(hx_q1l_pick);
    int32_t dw[16] __attribute__((aligned(64)));
    const __m512i raw = _mm512_loadu_si512(q + 32 * v0);
    /* dword 4L + b: the four codes of (v0 + L/2, h = L%2, b) as q + 128 */
    _mm512_store_si512(dw, _mm512_xor_si512(_mm512_shuffle_epi8(raw, tr), _mm512_set1_epi8((char)0x80)));
    for (int L = 0; L < 4; L++) {
        __m512i e[4];
        for (int b = 0; b < 4; b++)
            e[b] = _mm512_dpbusd_epi32(start, _mm512_set1_epi32(dw[4 * L + b]), signs);
        const __m512i lo = _mm512_permutex2var_epi8(e[0], pick, e[1]); /* TL b0 b1 | TH b0 b1 */
        const __m512i hi = _mm512_permutex2var_epi8(e[2], pick, e[3]); /* TL b2 b3 | TH b2 b3 */
        uint8_t *t = lut + (size_t)(v0 + L / 2) * 256 + (size_t)(L % 2) * 128;
        _mm512_storeu_si512(t, _mm512_shuffle_i64x2(lo, hi, 0x44));      /* TL */
        _mm512_storeu_si512(t + 64, _mm512_shuffle_i64x2(lo, hi, 0xEE)); /* TH */
    }
}

/* The walk of tiles t0 .. t1: blocks of x->lut_tiles (TB) tiles whose tiles lie L apart,
 * L = (t1 - t0) / TB; block b takes tiles t0 + b + i·L. Each of a block's TB tiles continues,
 * in memory, the tile its slot read in the block before, so the walk reads TB long sequential
 * streams side by side; then the rest, fewer than TB adjacent tiles, as one block. */
static int64_t hx_q1l_stride(const struct hx_cpu_x16 *x, int64_t t0, int64_t t1)
{
    return (t1 - t0) / x->lut_tiles;
}

void hx__x16_q1_prefetch_head(const struct hx_cpu_x16 *x, int64_t t0, int64_t t1)
{
    const int64_t L = hx_q1l_stride(x, t0, t1);
    if (L > 0) hx_q1l_prefetch_group(x, t0, x->lut_tiles, L, 0);
    else if (t1 > t0) hx_q1l_prefetch_group(x, t0, (int)(t1 - t0), 1, 0);
}

/* The block the walk takes next: n tiles (0: none) at t + i·ts. */
struct hx_q1l_next {
    int64_t t, ts;
    int n;
};

/* Tiles t0 + i·ts, i < TB, of one row (TB a constant after inlining). Group g + x->lut_ahead
 * is prefetched while group g runs, into the next block past the last; none when lut_ahead
 * is 0. */
static inline __attribute__((always_inline)) void
hx_q1l_block(const int TB, const struct hx_cpu_x16 *x, uint8_t *lut, const int8_t *bq,
             const float *dx, int64_t t0, int64_t ts, struct hx_q1l_next nx, float *out,
             float scale)
{
    const int64_t ng = x->k / 128;
    const size_t step = x->tile_bytes * (size_t)ts; /* from one of the block's tiles to the next */
    const uint8_t *base = x->data + x->tile_bytes * (size_t)t0;
    const __m512i m4 = _mm512_set1_epi8(0x0F), bpos = _mm512_set1_epi32(0x30201000);
    const __m512i one = _mm512_set1_epi8(1), off = _mm512_set1_epi32(32 * 512);
    __m512 acc[HX_Q1L_TB];
    _Pragma("GCC unroll 8") for (int t = 0; t < TB; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        /* the group lut_ahead ahead: in this block, else in the next one (if it has tile t) */
        const int64_t gp = g + x->lut_ahead;
        const bool here = gp < ng;
        const char *pf = here ? (const char *)base + (size_t)gp * HX_Q1L_GBYTES
                              : (const char *)x->data + x->tile_bytes * (size_t)nx.t +
                                    (size_t)(gp - ng) * HX_Q1L_GBYTES;
        const size_t pstep = here ? step : x->tile_bytes * (size_t)nx.ts;
        const int npf = !x->lut_ahead ? 0 : here ? TB : (gp - ng < ng ? nx.n : 0);
        if (bq) { /* the first block builds each group's tables just before it reads them */
            if (g == 0) /* and, first, fetches the groups before its distance */
                for (int64_t gi = 1; gi < x->lut_ahead && gi < ng; gi++)
                    hx_q1l_prefetch_group(x, t0, TB, ts, gi);
            hx_q1l_build_pair(lut, bq, 4 * g);
            hx_q1l_build_pair(lut, bq, 4 * g + 2);
        }
        __m512i aL[HX_Q1L_TB], aH[HX_Q1L_TB];
        _Pragma("GCC unroll 8") for (int t = 0; t < TB; t++) aL[t] = aH[t] = _mm512_setzero_si512();
        const size_t go = (size_t)g * HX_Q1L_GBYTES;
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
            const uint8_t *tab = lut + (size_t)(4 * g + v) * 256;
            const __m512i TL0 = _mm512_load_si512(tab), TH0 = _mm512_load_si512(tab + 64);
            const __m512i TL1 = _mm512_load_si512(tab + 128), TH1 = _mm512_load_si512(tab + 192);
            _Pragma("GCC unroll 8") for (int t = 0; t < TB; t++) {
                if (t < npf) {
                    _mm_prefetch(pf + pstep * (size_t)t + 64 * v, _MM_HINT_T2);
                    if (v == 3) _mm_prefetch(pf + pstep * (size_t)t + 256, _MM_HINT_T2);
                }
                const __m512i raw = _mm512_loadu_si512(base + step * (size_t)t + go + 32 + 64 * v);
                const __m512i il = _mm512_ternarylogic_epi32(raw, m4, bpos, 0xEA); /* (a & b) | c */
                const __m512i ih = _mm512_ternarylogic_epi32(_mm512_srli_epi16(raw, 4), m4, bpos, 0xEA);
                aL[t] = _mm512_dpbusd_epi32(aL[t], _mm512_permutexvar_epi8(il, TL0), one);
                aH[t] = _mm512_dpbusd_epi32(aH[t], _mm512_permutexvar_epi8(il, TH0), one);
                aL[t] = _mm512_dpbusd_epi32(aL[t], _mm512_permutexvar_epi8(ih, TL1), one);
                aH[t] = _mm512_dpbusd_epi32(aH[t], _mm512_permutexvar_epi8(ih, TH1), one);
            }
        }
        const __m512 vdx = _mm512_set1_ps(dx[g]);
        _Pragma("GCC unroll 8") for (int t = 0; t < TB; t++) {
            const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(aL[t], _mm512_slli_epi32(aH[t], 8)), off);
            const uint8_t *h = base + step * (size_t)t + go; /* the group's 16 fp16 scales */
            const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, vdx), acc[t]);
        }
    }
    const __m512 vs = _mm512_set1_ps(scale);
    _Pragma("GCC unroll 8") for (int t = 0; t < TB; t++) {
        const int64_t tt = t0 + t * ts;
        const int64_t cols = HX_MIN((int64_t)HX_X16_ROWS, x->n - tt * HX_X16_ROWS);
        const __mmask16 om = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
        _mm512_mask_storeu_ps(out + tt * HX_X16_ROWS, om, _mm512_mul_ps(acc[t], vs));
    }
}

static void hx_q1l_block_n(int n, const struct hx_cpu_x16 *x, uint8_t *lut, const int8_t *bq,
                           const float *dx, int64_t t0, float *out, float scale)
{
    const struct hx_q1l_next none = {0, 1, 0};
    switch (n) {
#define HX_Q1L_CASE(N)                                                                          \
    case N: hx_q1l_block(N, x, lut, bq, dx, t0, 1, none, out, scale); break;
    HX_Q1L_CASE(1) HX_Q1L_CASE(2) HX_Q1L_CASE(3) HX_Q1L_CASE(4)
    HX_Q1L_CASE(5) HX_Q1L_CASE(6) HX_Q1L_CASE(7)
#undef HX_Q1L_CASE
    default: break;
    }
}

void hx__x16_q1_gemv_vbmi(const struct hx_cpu_x16 *x, uint8_t *lut, const int8_t *bq,
                          const float *dx, int64_t t0, int64_t t1, float *out, float scale)
{
    const int64_t L = hx_q1l_stride(x, t0, t1);
    const int64_t t = t0 + L * x->lut_tiles; /* the tiles left over, adjacent, go last */
    for (int64_t b = 0; b < L; b++, bq = NULL) {
        const struct hx_q1l_next nx = b + 1 < L ? (struct hx_q1l_next){t0 + b + 1, L, x->lut_tiles}
                                                : (struct hx_q1l_next){t, 1, (int)(t1 - t)};
        if (x->lut_tiles == 4) hx_q1l_block(4, x, lut, bq, dx, t0 + b, L, nx, out, scale);
        else hx_q1l_block(HX_Q1L_TB, x, lut, bq, dx, t0 + b, L, nx, out, scale);
    }
    if (t < t1) hx_q1l_block_n((int)(t1 - t), x, lut, bq, dx, t, out, scale);
}
