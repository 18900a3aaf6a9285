/*
 * cpu-x16-avx512.c — AVX-512 VNNI kernels over x16 tiles (cpu-x16.h): the activation
 * quantizer and one tile kernel per weight type, instantiated for 1..8 activation rows.
 *
 * Per group of G elements and per activation row, the integer accumulator starts at −K·Σx
 * (from the quantizer), takes one vpdpbusd per chunk of 4 elements (16 rows × 4 products),
 * and is then converted and scaled into the float accumulator: acc += f32(dot)·(ws·dx)
 * (Q6_K: into a superblock accumulator, f32(dot)·(sc·dx), times d/4 once per superblock).
 * The weight vector of a chunk is decoded once and reused for every activation row of the
 * call; a single row (decode) splits the chain over 4 accumulators for the long ternary and
 * binary groups so vpdpbusd latency does not bind. Q2_0 is TQ2_0's 2-bit decode on groups of
 * 64 with d first; I2_S is TQ2_0's exactly, with the tensor scale for every group's d.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu-impl.h"
#include "cpu-x16.h"
#include "hx-impl.h"

#define HX_X16_RMAX 8
#define HX_X16_MB 64 /* activation rows per pass over a thread's tiles (kept in L2) */

static inline int32_t hx_x16_ld32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __m512 hx_x16_h16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

void hx__x16_quantize_rows_avx512(struct hx_cpu_xact *a, enum hx_dtype t, const float *src,
                                  size_t src_stride_floats, int64_t r0, int64_t r1)
{
    const int64_t k = a->k, qb = a->qb, g = a->g, nb = k / qb, ng = k / g;
    const int bias = hx__x16_bias(t);
    const bool want_fs = t == HX_DTYPE_Q4_K || t == HX_DTYPE_Q5_K;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = src + (size_t)r * src_stride_floats;
        int8_t *q = a->q + r * k;
        float *d = a->d + r * nb;
        int32_t *ks = a->ks + r * ng;
        float *fs = a->fs + r * ng;
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + b * qb;
            __m512 mx = _mm512_setzero_ps();
            for (int64_t i = 0; i < qb; i += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(xb + i)));
            const float amax = _mm512_reduce_max_ps(mx);
            const float dd = amax / 127.0f, id = dd > 0.0f ? 1.0f / dd : 0.0f;
            d[b] = dd;
            const __m512 vid = _mm512_set1_ps(id);
            for (int64_t gi = 0; gi < qb; gi += g) {
                __m512i s = _mm512_setzero_si512();
                for (int64_t i = gi; i < gi + g; i += 16) {
                    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i), vid));
                    v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
                    _mm_storeu_si128((__m128i *)(q + b * qb + i), _mm512_cvtepi32_epi8(v));
                    s = _mm512_add_epi32(s, v);
                }
                const int32_t sum = _mm512_reduce_add_epi32(s);
                const int64_t gg = (b * qb + gi) / g;
                ks[gg] = -bias * sum;
                if (want_fs) fs[gg] = -dd * (float)sum;
            }
        }
    }
}

/* Q6_K, group j of superblock sb (at base) of one tile, for R activation rows, into sacc. A
 * group (16 elements of the 16 rows, 4 chunks) is three vectors holding 4u of chunks 0, 1, 2
 * in bits 2..7 and chunk 3's code in their bits 0..1 (cpu-x16.h): chunks 0-2 are one vpand
 * each, chunk 3 (4u again) three shifts, two vpternlogd bit selects and a vpand. The int8
 * scales times the activation scale of 32 are applied per group in float. */
static inline __attribute__((always_inline)) void
hx_x16_q6k_group(const uint8_t *base, int64_t sb, int j, const int R, const int8_t *const *xr,
                 const float *const *dr, const int32_t *const *kr, __m512 *sacc, const char *pfb)
{
    const __m512i mfc = _mm512_set1_epi8((char)0xFC), m0f = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F);
    if (pfb) {
        /* 53 lines a superblock: three beside each group's loads, the last five with the first
         * five groups (hx_x16_tile explains the distance) */
        _mm_prefetch(pfb + 192 * j, _MM_HINT_T2);
        _mm_prefetch(pfb + 192 * j + 64, _MM_HINT_T2);
        _mm_prefetch(pfb + 192 * j + 128, _MM_HINT_T2);
        if (j < 5) _mm_prefetch(pfb + 3072 + 64 * j, _MM_HINT_T2);
    }
    const uint8_t *q = base + 288 + 192 * j;
    const __m512i A = _mm512_loadu_si512(q), B = _mm512_loadu_si512(q + 64), C = _mm512_loadu_si512(q + 128);
    /* 4·u3 = p0 << 2 | p1 << 4 | p2 << 6 from the low bits of B, C, A; 0xE4: c ? a : b */
    const __m512i y = _mm512_ternarylogic_epi32(_mm512_slli_epi16(B, 2), _mm512_slli_epi16(C, 4), m0f, 0xE4);
    const __m512i w3 = _mm512_and_si512(_mm512_ternarylogic_epi32(y, _mm512_slli_epi16(A, 6), m3f, 0xE4), mfc);
    const __m512i w0 = _mm512_and_si512(A, mfc), w1 = _mm512_and_si512(B, mfc), w2 = _mm512_and_si512(C, mfc);
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(base + 32 + 16 * j))));
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        const int8_t *x = xr[r] + sb * 256 + 16 * j;
        __m512i s = _mm512_set1_epi32(kr[r][sb * 16 + j]);
        s = _mm512_dpbusd_epi32(s, w0, _mm512_set1_epi32(hx_x16_ld32(x)));
        s = _mm512_dpbusd_epi32(s, w1, _mm512_set1_epi32(hx_x16_ld32(x + 4)));
        s = _mm512_dpbusd_epi32(s, w2, _mm512_set1_epi32(hx_x16_ld32(x + 8)));
        s = _mm512_dpbusd_epi32(s, w3, _mm512_set1_epi32(hx_x16_ld32(x + 12)));
        const __m512 sx = _mm512_mul_ps(sc, _mm512_set1_ps(dr[r][sb * 8 + j / 2]));
        sacc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sx, sacc[r]);
    }
}

/* Q6_K, one tile × R activation rows: per superblock, its groups' sums in float (two
 * accumulators in turn for one or two rows), then times d once. */
static inline __attribute__((always_inline)) void
hx_x16_tile_q6k(const uint8_t *tile, const struct hx_cpu_xact *a, int64_t r0, const int R,
                float *out, int64_t os, __mmask16 om, float scale, const int PFD)
{
    const int64_t k = a->k, nsb = k / 256;
    const int8_t *xr[HX_X16_RMAX];
    const float *dr[HX_X16_RMAX];
    const int32_t *kr[HX_X16_RMAX];
    __m512 acc[HX_X16_RMAX];
    for (int r = 0; r < R; r++) {
        xr[r] = a->q + (r0 + r) * k;
        dr[r] = a->d + (r0 + r) * (k / 32);
        kr[r] = a->ks + (r0 + r) * (k / 16);
        acc[r] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *base = tile + sb * 3360;
        const char *pfb = PFD > 0 && R <= 2 ? (const char *)base + PFD : NULL;
        __m512 s0[HX_X16_RMAX], s1[HX_X16_RMAX];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) s0[r] = s1[r] = _mm512_setzero_ps();
        for (int j = 0; j < 16; j += 2) {
            hx_x16_q6k_group(base, sb, j, R, xr, dr, kr, s0, pfb);
            hx_x16_q6k_group(base, sb, j + 1, R, xr, dr, kr, R <= 2 ? s1 : s0, pfb);
        }
        /* codes ×4: the 1/4 goes with d (exact) */
        const __m512 d = _mm512_mul_ps(hx_x16_h16(base), _mm512_set1_ps(0.25f));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(R <= 2 ? _mm512_add_ps(s0[r], s1[r]) : s0[r], d, acc[r]);
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(out + r * os, om, _mm512_mul_ps(acc[r], vs));
}

/* One tile × R activation rows. T and R are constants after inlining. ts: I2_S's tensor scale,
 * its every group's weight scale. */
static inline __attribute__((always_inline)) void
hx_x16_tile(const enum hx_dtype T, const uint8_t *tile, size_t x_tile_bytes,
            const struct hx_cpu_xact *a, int64_t r0, const int R, float *out, int64_t os,
            __mmask16 om, float scale, float ts, const int PFD)
{
    const int64_t k = a->k;
    if (T == HX_DTYPE_Q6_K) {
        hx_x16_tile_q6k(tile, a, r0, R, out, os, om, scale, PFD);
        return;
    }
    const bool T2 = T == HX_DTYPE_TQ2_0 || T == HX_DTYPE_I2_S; /* the same codes, 256 per group */
    const int G = T == HX_DTYPE_Q1_0                 ? 128
                  : T == HX_DTYPE_Q2_0               ? 64
                  : (T == HX_DTYPE_TQ1_0 || T2)      ? 256
                                                     : 32;
    const int QB = G; /* the act block: Q6_K, whose is 32 for a group of 16, is above */
    /* Integer accumulators per activation row: 8 independent vpdpbusd chains for one row of
     * the long groups (latency ~5 cycles, 2 issued per cycle). TQ2_0, Q1_0 and the Q4 types
     * pack several chunks in one byte (4 fields of 2 bits, 8 of 1 bit, 2 nibbles); for R <= 2
     * each field is masked in place, u·2^shift, still a u8 operand: one vpand per chunk
     * instead of a shift and a vpand. Field f's accumulator then holds 2^(FS·f) times its dot
     * product exactly and is shifted back once per group ("field mode"). */
    const bool Q4 = T == HX_DTYPE_Q4_0 || T == HX_DTYPE_Q4_K;
    const bool C2 = T2 || T == HX_DTYPE_Q2_0; /* 2-bit codes, 4 fields per byte */
    const int NF = C2 ? 4 : T == HX_DTYPE_Q1_0 ? 8 : Q4 ? 2 : 0;
    const int FS = C2 ? 2 : Q4 ? 4 : 1;
    const bool TF = NF > 0 && R <= 2;
    /* TQ1_0 for R <= 2: trit j of a byte is d_j = floor(3·m_j / 256), where m_0 is the byte
     * and m_{j+1} = 3·m_j mod 256, so d_j = (3·m_j − m_{j+1}) / 256 exactly. Rather than
     * extract each trit (two compares, two mask ops), the states themselves (u8) go into
     * vpdpbusd against the chunk's activations: chains "a" take m_j, chains "b" take m_{j+1},
     * and the group's dot product is (3·a − b) >> 8 — two vpdpbusd and two adds per chunk
     * instead of seven ops. For more rows the extracted trits are shared and cheaper. */
    const bool TD = T == HX_DTYPE_TQ1_0 && R <= 2;
    const int A = TD ? (R == 1 ? 8 : 4)
                : TF ? (NF == 4 && R == 1 ? 8 : NF) : (R == 1 && G >= 128) ? 8
                : (R == 1 && T == HX_DTYPE_Q5_K) ? 2 : 1; /* Q4 R=1: 2 */
    const int64_t ng = k / G, nb = k / QB;
    const int8_t *xr[HX_X16_RMAX];
    const float *dr[HX_X16_RMAX], *fr[HX_X16_RMAX];
    const int32_t *kr[HX_X16_RMAX];
    __m512 acc[HX_X16_RMAX];
    for (int r = 0; r < R; r++) {
        xr[r] = a->q + (r0 + r) * k;
        dr[r] = a->d + (r0 + r) * nb;
        kr[r] = a->ks + (r0 + r) * ng;
        fr[r] = a->fs + (r0 + r) * ng;
        acc[r] = _mm512_setzero_ps();
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i c86 = _mm512_set1_epi8((char)86), c171 = _mm512_set1_epi8((char)171);

    const int64_t gbytes = (int64_t)(x_tile_bytes / (size_t)ng);
    for (int64_t g = 0; g < ng; g++) {
        /* Decode streams the weights once: fetch well ahead of the hardware prefetcher, into
         * L2 only (T0 prefetches held L1 fill buffers for a whole DRAM latency, 10-25% slower
         * on the low-bit types), one line beside each vector load: the group's prefetches
         * issued in one burst stalled the loads behind them (TQ2_0 -17%, Q1_0 -7% measured).
         * PFD bytes ahead: 0 where the hardware prefetcher does better alone, 8 KiB where that
         * was faster (hx__cpu_decode_prefetch). */
        const bool PFON = PFD > 0 && R <= 2;
        const char *pfb = (const char *)tile + g * gbytes + PFD;
        const int64_t npf = (gbytes + 63) / 64;
#define HX_PFV(i)                                                                                   \
    do {                                                                                            \
        if (PFON && (i) < npf) _mm_prefetch(pfb + 64 * (i), _MM_HINT_T2);                           \
    } while (0)
        __m512i di[8][HX_X16_RMAX];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            /* Q1_0 takes its start value after doubling (w = 2u - 1) */
            di[0][r] = T == HX_DTYPE_Q1_0 || TD ? _mm512_setzero_si512() : _mm512_set1_epi32(kr[r][g]);
            _Pragma("GCC unroll 16") for (int s = 1; s < A; s++) di[s][r] = _mm512_setzero_si512();
        }
        const int8_t *xg[HX_X16_RMAX];
        for (int r = 0; r < R; r++) xg[r] = xr[r] + g * G;
#define HX_DOTA(c, ai, w)                                                                           \
    do {                                                                                            \
        const __m512i w_ = (w);                                                                     \
        _Pragma("GCC unroll 8") for (int r_ = 0; r_ < R; r_++)                                     \
            di[(ai) % A][r_] = _mm512_dpbusd_epi32(di[(ai) % A][r_], w_,                            \
                                                   _mm512_set1_epi32(hx_x16_ld32(xg[r_] + 4 * (c)))); \
    } while (0)
#define HX_DOT(c, w) HX_DOTA(c, c, w)
        __m512 ws, mv = _mm512_setzero_ps();
        int nv = 4; /* vector loads of the group: each carries one prefetch */
        if (T == HX_DTYPE_Q8_0) {
            const uint8_t *p = tile + g * 544;
            ws = hx_x16_h16(p + 512);
            _Pragma("GCC unroll 32") for (int c = 0; c < 8; c++) {
                HX_PFV(c);
                HX_DOT(c, _mm512_loadu_si512(p + 64 * c));
            }
            nv = 8;
        } else if (T == HX_DTYPE_Q4_0 || T == HX_DTYPE_Q4_K || T == HX_DTYPE_Q5_K) {
            const uint8_t *p;
            const bool Q5 = T == HX_DTYPE_Q5_K;
            if (T == HX_DTYPE_Q4_0) {
                p = tile + g * 288;
                ws = hx_x16_h16(p + 256);
            } else {
                const uint8_t *base = tile + (g >> 3) * (Q5 ? 2880 : 2368);
                const int j = (int)(g & 7);
                __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(base + 64 + 16 * j))));
                __m512 mm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(base + 192 + 16 * j))));
                ws = _mm512_mul_ps(hx_x16_h16(base), sc);
                mv = _mm512_mul_ps(hx_x16_h16(base + 32), mm);
                p = base + 320 + (Q5 ? 320 : 256) * j;
            }
            /* Q5_K: bit c of each byte of hb is chunk c's fifth bit, worth 16 (no field mode:
             * 16·u would not fit a byte) */
            const __m512i hb = Q5 ? _mm512_loadu_si512(p + 256) : _mm512_setzero_si512();
            const __m512i c16 = _mm512_set1_epi8(16);
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 4; v++) {
                HX_PFV(v);
                const __m512i raw = _mm512_loadu_si512(p + 64 * v);
                if (Q5) {
                    const __mmask64 h0 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8((char)(1 << v)));
                    const __mmask64 h1 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8((char)(1 << (v + 4))));
                    HX_DOTA(v, 0, _mm512_or_si512(_mm512_and_si512(raw, m4), _mm512_maskz_mov_epi8(h0, c16)));
                    HX_DOTA(v + 4, 1, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4),
                                                      _mm512_maskz_mov_epi8(h1, c16)));
                    continue;
                }
                HX_DOTA(v, 0, _mm512_and_si512(raw, m4));
                if (TF) HX_DOTA(v + 4, 1, _mm512_andnot_si512(m4, raw)); /* 16·u */
                else HX_DOT(v + 4, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
            }
            nv = 4;
        } else if (T == HX_DTYPE_Q2_0) {
            const uint8_t *p = tile + g * 288;
            ws = hx_x16_h16(p);
            if (TF) {
                _Pragma("GCC unroll 32")
                for (int v = 0; v < 4; v++) {
                    HX_PFV(v);
                    const __m512i raw = _mm512_loadu_si512(p + 32 + 64 * v);
                    _Pragma("GCC unroll 4")
                    for (int f = 0; f < 4; f++)
                        HX_DOTA(v + 4 * f, f + 4 * (v & 1), _mm512_and_si512(raw, _mm512_set1_epi8((char)(3 << (2 * f)))));
                }
            } else
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 4; v++) {
                HX_PFV(v);
                const __m512i raw = _mm512_loadu_si512(p + 32 + 64 * v);
                HX_DOTA(v, 0, _mm512_and_si512(raw, m2));
                HX_DOTA(v + 4, 1, _mm512_and_si512(_mm512_srli_epi16(raw, 2), m2));
                HX_DOTA(v + 8, 2, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m2));
                HX_DOTA(v + 12, 3, _mm512_and_si512(_mm512_srli_epi16(raw, 6), m2));
            }
        } else if (T2) {
            /* TQ2_0: 16 code vectors, then the rows' d; I2_S: the same vectors, the tensor
             * scale as every row's d (the same float operations: TQ2_0's bits when d = ts) */
            const uint8_t *p = tile + g * (T == HX_DTYPE_I2_S ? 1024 : 1056);
            ws = T == HX_DTYPE_I2_S ? _mm512_set1_ps(ts) : hx_x16_h16(p + 1024);
            if (TF) {
                _Pragma("GCC unroll 32")
                for (int v = 0; v < 16; v++) {
                    HX_PFV(v);
                    const __m512i raw = _mm512_loadu_si512(p + 64 * v);
                    _Pragma("GCC unroll 4")
                    for (int f = 0; f < 4; f++)
                        HX_DOTA(v + 16 * f, f + 4 * (v & 1), _mm512_and_si512(raw, _mm512_set1_epi8((char)(3 << (2 * f)))));
                }
            } else
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 16; v++) {
                HX_PFV(v);
                const __m512i raw = _mm512_loadu_si512(p + 64 * v);
                HX_DOTA(v, 0, _mm512_and_si512(raw, m2));
                HX_DOTA(v + 16, 1, _mm512_and_si512(_mm512_srli_epi16(raw, 2), m2));
                HX_DOTA(v + 32, 2, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m2));
                HX_DOTA(v + 48, 3, _mm512_and_si512(_mm512_srli_epi16(raw, 6), m2));
            }
            nv = 16;
        } else if (T == HX_DTYPE_TQ1_0) {
            const uint8_t *p = tile + g * 864;
            ws = hx_x16_h16(p + 832);
            if (TD)
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 13; v++) {
                HX_PFV(v);
                __m512i m = _mm512_loadu_si512(p + 64 * v);
                const int nd = v < 12 ? 5 : 4;
                _Pragma("GCC unroll 32")
                for (int jd = 0; jd < nd; jd++) {
                    const int c = 5 * v + jd, ch = 2 * (c % (A / 2));
                    HX_DOTA(c, ch, m);
                    m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
                    HX_DOTA(c, ch + 1, m);
                }
            }
            else
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 13; v++) {
                HX_PFV(v);
                __m512i m = _mm512_loadu_si512(p + 64 * v);
                const int nd = v < 12 ? 5 : 4;
                _Pragma("GCC unroll 32")
                for (int jd = 0; jd < nd; jd++) {
                    __m512i u = _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(m, c86), one);
                    u = _mm512_mask_add_epi8(u, _mm512_cmpge_epu8_mask(m, c171), u, one);
                    HX_DOT(5 * v + jd, u);
                    m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
                }
            }
            nv = 13;
        } else { /* Q1_0 */
            const uint8_t *p = tile + g * 288;
            ws = hx_x16_h16(p);
            _Pragma("GCC unroll 32")
            for (int v = 0; v < 4; v++) {
                HX_PFV(v);
                const __m512i raw = _mm512_loadu_si512(p + 32 + 64 * v);
                _Pragma("GCC unroll 8")
                for (int i = 0; i < 8; i++) {
                    if (TF) HX_DOTA(8 * v + i, i, _mm512_and_si512(raw, _mm512_set1_epi8((char)(1 << i))));
                    else HX_DOT(8 * v + i, _mm512_and_si512(_mm512_srli_epi16(raw, i), one));
                }
            }
        }
#undef HX_DOT
        for (int i = nv; i < npf; i++) HX_PFV(i); /* the lines beyond the group's vector loads */
#undef HX_PFV
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            __m512i s = di[0][r];
            if (TD) {
                __m512i sb = di[1][r];
                _Pragma("GCC unroll 16") for (int ss = 2; ss < A; ss += 2) {
                    s = _mm512_add_epi32(s, di[ss][r]);
                    sb = _mm512_add_epi32(sb, di[ss + 1][r]);
                }
                s = _mm512_srai_epi32(_mm512_sub_epi32(_mm512_add_epi32(s, _mm512_add_epi32(s, s)), sb), 8);
                s = _mm512_add_epi32(s, _mm512_set1_epi32(kr[r][g]));
            } else
            _Pragma("GCC unroll 16") for (int ss = 1; ss < A; ss++)
                s = _mm512_add_epi32(s, TF ? _mm512_srai_epi32(di[ss][r], FS * (ss % NF)) : di[ss][r]);
            if (T == HX_DTYPE_Q1_0) s = _mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(kr[r][g]));
            const __m512 sx = _mm512_mul_ps(ws, _mm512_set1_ps(dr[r][(g * G) / QB]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sx, acc[r]);
            if (T == HX_DTYPE_Q4_K || T == HX_DTYPE_Q5_K)
                acc[r] = _mm512_fmadd_ps(mv, _mm512_set1_ps(fr[r][g]), acc[r]);
        }
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(out + r * os, om, _mm512_mul_ps(acc[r], vs));
}

typedef void (*hx_x16_fn)(const uint8_t *tile, size_t tb, const struct hx_cpu_xact *a, int64_t r0,
                          float *out, int64_t os, __mmask16 om, float scale, float ts);

#define HX_X16_DEF(T, R, P)                                                                         \
    static void hx_x16_##T##_##R##_##P(const uint8_t *tile, size_t tb, const struct hx_cpu_xact *a, \
                                       int64_t r0, float *out, int64_t os, __mmask16 om,            \
                                       float scale, float ts)                                       \
    {                                                                                               \
        hx_x16_tile(HX_DTYPE_##T, tile, tb, a, r0, R, out, os, om, scale, ts, 1024 * P);            \
    }
/* Per type: [no prefetch, 8 KiB, 16 KiB ahead][rows - 1]; only 1 and 2 rows prefetch. */
#define HX_X16_DEF_ALL(T)                                                                           \
    HX_X16_DEF(T, 1, 16) HX_X16_DEF(T, 2, 16) HX_X16_DEF(T, 3, 0) HX_X16_DEF(T, 4, 0)               \
    HX_X16_DEF(T, 5, 0) HX_X16_DEF(T, 6, 0) HX_X16_DEF(T, 7, 0) HX_X16_DEF(T, 8, 0)                 \
    HX_X16_DEF(T, 1, 0) HX_X16_DEF(T, 2, 0) HX_X16_DEF(T, 1, 8) HX_X16_DEF(T, 2, 8)                 \
    static const hx_x16_fn hx_x16_tab_##T[3][HX_X16_RMAX] = {                                       \
        {hx_x16_##T##_1_0, hx_x16_##T##_2_0, hx_x16_##T##_3_0, hx_x16_##T##_4_0,                    \
         hx_x16_##T##_5_0, hx_x16_##T##_6_0, hx_x16_##T##_7_0, hx_x16_##T##_8_0},                   \
        {hx_x16_##T##_1_8, hx_x16_##T##_2_8, hx_x16_##T##_3_0, hx_x16_##T##_4_0,                    \
         hx_x16_##T##_5_0, hx_x16_##T##_6_0, hx_x16_##T##_7_0, hx_x16_##T##_8_0},                   \
        {hx_x16_##T##_1_16, hx_x16_##T##_2_16, hx_x16_##T##_3_0, hx_x16_##T##_4_0,                  \
         hx_x16_##T##_5_0, hx_x16_##T##_6_0, hx_x16_##T##_7_0, hx_x16_##T##_8_0}};

HX_X16_DEF_ALL(Q8_0)
HX_X16_DEF_ALL(Q4_0)
HX_X16_DEF_ALL(Q4_K)
HX_X16_DEF_ALL(Q6_K)
HX_X16_DEF_ALL(TQ2_0)
HX_X16_DEF_ALL(TQ1_0)
HX_X16_DEF_ALL(Q1_0)
HX_X16_DEF_ALL(Q2_0)
HX_X16_DEF_ALL(I2_S)
HX_X16_DEF_ALL(Q5_K)

/* The kernels of type t that prefetch pf bytes ahead (0, 8192 or 16384). */
static const hx_x16_fn *hx_x16_table(enum hx_dtype t, int pf)
{
    const int i = pf <= 0 ? 0 : pf <= 8192 ? 1 : 2;
    switch (t) {
    case HX_DTYPE_Q8_0: return hx_x16_tab_Q8_0[i];
    case HX_DTYPE_Q4_0: return hx_x16_tab_Q4_0[i];
    case HX_DTYPE_Q4_K: return hx_x16_tab_Q4_K[i];
    case HX_DTYPE_Q5_K: return hx_x16_tab_Q5_K[i];
    case HX_DTYPE_Q6_K: return hx_x16_tab_Q6_K[i];
    case HX_DTYPE_TQ2_0: return hx_x16_tab_TQ2_0[i];
    case HX_DTYPE_TQ1_0: return hx_x16_tab_TQ1_0[i];
    case HX_DTYPE_Q1_0: return hx_x16_tab_Q1_0[i];
    case HX_DTYPE_Q2_0: return hx_x16_tab_Q2_0[i];
    case HX_DTYPE_I2_S: return hx_x16_tab_I2_S[i];
    default: return NULL;
    }
}

/* The first x->prefetch bytes of each decode stream are before any in-kernel prefetch reaches
 * them: fetch them up front, while the thread is still quantizing its activations. */
void hx__x16_prefetch_head(const struct hx_cpu_x16 *x, int64_t t0, int64_t t1)
{
    const int ns = x->streams > 0 ? x->streams : 1;
    const int64_t nt = t1 - t0, per = (nt + ns - 1) / ns;
    if (nt <= 0 || x->prefetch <= 0) return;
    for (int sidx = 0; sidx < ns; sidx++) {
        const int64_t ts = t0 + sidx * per;
        if (ts >= t1) break;
        const char *p = (const char *)x->data + x->tile_bytes * (size_t)ts;
        const size_t len = HX_MIN((size_t)x->prefetch, x->tile_bytes * (size_t)HX_MIN(per, t1 - ts));
        for (size_t o = 0; o < len; o += 64) _mm_prefetch(p + o, _MM_HINT_T2);
    }
}

void hx__x16_gemm_avx512(const struct hx_cpu_x16 *x, const struct hx_cpu_xact *a, int64_t r0,
                         int64_t r1, int64_t t0, int64_t t1, float *dst, int64_t dst_stride,
                         float scale)
{
    const hx_x16_fn *tab = hx_x16_table(x->type, x->prefetch);
    if (!tab) return;
    if (a->lut && r1 - r0 == 1) { /* Q1_0, one row, by table lookup (cpu-x16-vbmi.c) */
        const int8_t *bq = a->lut_built ? NULL : a->q + r0 * a->k; /* NULL: tables built */
        hx__x16_q1_gemv_vbmi(x, a->lut, bq, a->d + r0 * (a->k / a->qb), t0, t1,
                             dst + r0 * dst_stride, scale);
        return;
    }
    const int ns = r1 - r0 <= 2 && x->streams > 1 ? x->streams : 1;
    if (ns > 1) {
        /* decode: the thread's tiles as ns interleaved sequential streams (HX_CPU_STREAMS).
         * On an earlier Xeon VM, before the kernels prefetched into L2, one stream left the
         * low-bit types at ~1/(1/compute + 1/memory) and a second front for the hardware
         * prefetcher gained 15-30%; with the prefetch one stream is faster on the Xeon and
         * Zen 5 VMs (hx__cpu_decode_streams). */
        const int64_t nt = t1 - t0, per = (nt + ns - 1) / ns;
        for (int64_t i = 0; i < per; i++)
            for (int sidx = 0; sidx < ns; sidx++) {
                const int64_t t = t0 + sidx * per + i;
                if (t >= t1) break;
                const uint8_t *tile = x->data + x->tile_bytes * (size_t)t;
                const int64_t cols = HX_MIN((int64_t)HX_X16_ROWS, x->n - t * HX_X16_ROWS);
                const __mmask16 om = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
                tab[r1 - r0 - 1](tile, x->tile_bytes, a, r0, dst + r0 * dst_stride + t * HX_X16_ROWS, dst_stride, om, scale, hx__x16_tile_tscale(x, t));
            }
        return;
    }
    for (int64_t rb = r0; rb < r1; rb += HX_X16_MB) {
        const int64_t re = HX_MIN(r1, rb + HX_X16_MB);
        for (int64_t t = t0; t < t1; t++) {
            const uint8_t *tile = x->data + x->tile_bytes * (size_t)t;
            const int64_t cols = HX_MIN((int64_t)HX_X16_ROWS, x->n - t * HX_X16_ROWS);
            const __mmask16 om = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
            for (int64_t r = rb; r < re; r += HX_X16_RMAX) {
                const int R = (int)HX_MIN((int64_t)HX_X16_RMAX, re - r);
                tab[R - 1](tile, x->tile_bytes, a, r, dst + r * dst_stride + t * HX_X16_ROWS, dst_stride, om, scale, hx__x16_tile_tscale(x, t));
            }
        }
    }
}
