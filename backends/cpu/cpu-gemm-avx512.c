/*
 * cpu-gemm-avx512.c — AVX-512 VNNI kernels: the panel dot product with vpdpbusd (unsigned
 * weight codes × signed activation codes, 64 per instruction), register-blocked 4 weight rows
 * × 2 activation rows so each loaded vector is reused; F16 via vcvtph2ps, BF16 by shifting.
 * Tails (k not a multiple of 64) use masked loads.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu-impl.h"
#include "cpu-unpack.h"

static inline float hx_cpu_hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

/* Σ over 16-groups mc·ds for one (row, act) pair. */
static inline __m512 hx_cpu_corr512(const float *mc, const float *ds, int64_t ng, __m512 acc)
{
    int64_t g = 0;
    for (; g + 16 <= ng; g += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(mc + g), _mm512_loadu_ps(ds + g), acc);
    if (g < ng) {
        __mmask16 m = (__mmask16)((1u << (ng - g)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, mc + g), _mm512_maskz_loadu_ps(m, ds + g), acc);
    }
    return acc;
}

#define HX_MR 2
/* One block of up to 4 panel rows × HX_MR activation rows; mr and nr are constants after
 * inlining, so unused accumulators vanish. */
static inline __attribute__((always_inline)) void
hx_cpu_block_avx512(const struct hx_cpu_panel *p, const int nr, const struct hx_cpu_act *a,
                    int64_t r0, const int mr, float *out, int64_t out_stride)
{
    const int64_t k = p->k, kl = k / 4, kg = k / 16;
    const __m512i zero = _mm512_setzero_si512();
    const int64_t c = 0;
    {
        __m512 acc[4][HX_MR];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < HX_MR; j++) acc[i][j] = _mm512_setzero_ps();
        const int8_t *q[HX_MR];
        const float *dl[HX_MR];
        for (int j = 0; j < HX_MR; j++) {
            int64_t rr = r0 + (j < mr ? j : 0);
            q[j] = a->q + rr * k;
            dl[j] = a->dl + rr * kl;
        }
        for (int64_t e = 0; e < k; e += 64) {
            __mmask64 mb = k - e >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (k - e)) - 1);
            __mmask16 ml = k - e >= 64 ? (__mmask16)0xFFFF : (__mmask16)((1u << ((k - e) / 4)) - 1);
            __m512i xq[HX_MR];
            __m512 xd[HX_MR];
            for (int j = 0; j < mr; j++) {
                xq[j] = _mm512_maskz_loadu_epi8(mb, q[j] + e);
                xd[j] = _mm512_maskz_loadu_ps(ml, dl[j] + e / 4);
            }
            for (int i = 0; i < nr; i++) {
                __m512i w = _mm512_maskz_loadu_epi8(mb, p->codes + (size_t)i * k + e);
                __m512 ws = _mm512_maskz_loadu_ps(ml, p->wsl + (size_t)i * kl + e / 4);
                for (int j = 0; j < mr; j++) {
                    __m512i d = _mm512_dpbusd_epi32(zero, w, xq[j]);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(ws, xd[j]), acc[i][j]);
                }
            }
        }
        for (int j = 0; j < mr; j++) {
            const float *ds = a->ds + (r0 + j) * kg;
            for (int i = 0; i < nr; i++) {
                __m512 t = hx_cpu_corr512(p->mc + (size_t)i * kg, ds, kg, acc[i][j]);
                out[(c + j) * out_stride + i] = hx_cpu_hsum512(t);
            }
        }
    }
}

static void hx_cpu_panel_dot_avx512(const struct hx_cpu_panel *p, int nr, const struct hx_cpu_act *a,
                                    int64_t r0, int64_t nc, float *out, int64_t out_stride)
{
    for (int64_t c = 0; c < nc; c += HX_MR) {
        float *o = out + c * out_stride;
        const int mr = nc - c >= HX_MR ? HX_MR : 1;
        if (mr == HX_MR && nr == 4) hx_cpu_block_avx512(p, 4, a, r0 + c, HX_MR, o, out_stride);
        else if (nr == 4) hx_cpu_block_avx512(p, 4, a, r0 + c, 1, o, out_stride);
        else for (int i = 0; i < nr; i++) {
            struct hx_cpu_panel q = {p->k, p->codes + (size_t)i * p->k, p->wsl + (size_t)i * (p->k / 4),
                                     p->mc + (size_t)i * (p->k / 16)};
            for (int j = 0; j < mr; j++)
                hx_cpu_block_avx512(&q, 1, a, r0 + c + j, 1, o + j * out_stride + i, out_stride);
        }
    }
}


/* ---- fused m = 1 GEMV: read the GGUF blocks directly, unpack in registers ---------------- */

static inline float hx_cpu_h2f_avx512(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* Per activation block: Σ of its 16-group ds entries (= scale × Σ codes). */
static void hx_cpu_block_sums(const struct hx_cpu_act *a, float *bs)
{
    const int64_t g = a->qb / 16;
    for (int64_t b = 0; b < a->k / a->qb; b++) {
        float s = 0.0f;
        for (int64_t i = 0; i < g; i++) s += a->ds[b * g + i];
        bs[b] = s;
    }
}

static float hx_cpu_row_q8_0(const uint8_t *blk, const struct hx_cpu_act *a, int64_t k)
{
    __m512 acc = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    int64_t e = 0;
    for (; e + 64 <= k; e += 64, blk += 68) {
        __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2))),
                                       _mm256_loadu_si256((const __m256i *)(blk + 36)), 1);
        __m512i x = _mm512_loadu_si512(a->q + e);
        __m512i xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), zero, x);
        __m512i dot = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), xs);
        __m512 dw = _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(hx_cpu_h2f_avx512(blk)),
                                         _mm512_set1_ps(hx_cpu_h2f_avx512(blk + 34)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_loadu_ps(a->dl + e / 4)), acc);
    }
    if (e < k) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        __m256i x = _mm256_loadu_si256((const __m256i *)(a->q + e));
        __m256i xs = _mm256_mask_sub_epi8(x, _mm256_movepi8_mask(w), _mm256_setzero_si256(), x);
        __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), xs);
        __m256 sc = _mm256_mul_ps(_mm256_set1_ps(hx_cpu_h2f_avx512(blk)), _mm256_loadu_ps(a->dl + e / 4));
        acc = _mm512_add_ps(acc, _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), sc)));
        acc = _mm512_maskz_mov_ps((__mmask16)0xFFFF, acc);
    }
    return hx_cpu_hsum512(acc);
}

static float hx_cpu_row_tq2_0(const uint8_t *blk, const struct hx_cpu_act *a, int64_t k, const float *bs)
{
    __m512 acc = _mm512_setzero_ps();
    const __m512i three = _mm512_set1_epi8(3);
    float corr = 0.0f;
    for (int64_t b = 0; b < k / 256; b++, blk += 66) {
        const int8_t *q = a->q + b * 256;
        __m512i x = _mm512_loadu_si512(blk);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(x, three), _mm512_loadu_si512(q));
        dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(x, 2), three), _mm512_loadu_si512(q + 64));
        dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(x, 4), three), _mm512_loadu_si512(q + 128));
        dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(x, 6), three), _mm512_loadu_si512(q + 192));
        const float d = hx_cpu_h2f_avx512(blk + 64);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(d * a->dl[b * 64]), acc);
        corr += d * bs[b];
    }
    return hx_cpu_hsum512(acc) - corr;
}

static float hx_cpu_row_q1_0(const uint8_t *blk, const struct hx_cpu_act *a, int64_t k, const float *bs)
{
    __m512 acc = _mm512_setzero_ps();
    const __m512i one = _mm512_set1_epi8(1);
    float corr = 0.0f;
    for (int64_t b = 0; b < k / 128; b++, blk += 18) {
        const int8_t *q = a->q + b * 128;
        uint64_t m0, m1;
        memcpy(&m0, blk + 2, 8);
        memcpy(&m1, blk + 10, 8);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_maskz_mov_epi8(m0, one), _mm512_loadu_si512(q));
        dot = _mm512_dpbusd_epi32(dot, _mm512_maskz_mov_epi8(m1, one), _mm512_loadu_si512(q + 64));
        const float d = hx_cpu_h2f_avx512(blk);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(2.0f * d * a->dl[b * 32]), acc);
        corr += d * bs[b];
    }
    return hx_cpu_hsum512(acc) - corr;
}

static bool hx_cpu_gemv_fused_avx512(const struct hx_cpu_mm *mm, int64_t j0, int64_t j1, float *out)
{
    const enum hx_dtype t = mm->w->type;
    if (t != HX_DTYPE_Q8_0 && t != HX_DTYPE_TQ2_0 && t != HX_DTYPE_Q1_0) return false;
    const int64_t k = mm->k;
    float bs_small[512], *bs = bs_small;
    if (k / mm->act->qb > 512) return false;
    if (t != HX_DTYPE_Q8_0) hx_cpu_block_sums(mm->act, bs);
    const uint8_t *w = (const uint8_t *)mm->w->data;
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *row = w + (size_t)j * mm->w_row_bytes;
        _mm_prefetch((const char *)row + 4 * mm->w_row_bytes, _MM_HINT_T0);
        float r;
        if (t == HX_DTYPE_Q8_0) r = hx_cpu_row_q8_0(row, mm->act, k);
        else if (t == HX_DTYPE_TQ2_0) r = hx_cpu_row_tq2_0(row, mm->act, k, bs);
        else r = hx_cpu_row_q1_0(row, mm->act, k, bs);
        out[j - j0] = r;
    }
    return true;
}

static void hx_cpu_to_f32_avx512(enum hx_dtype t, const void *row, float *dst, int64_t k)
{
    const uint16_t *h = row;
    int64_t i = 0;
    if (t == HX_DTYPE_F16) {
        for (; i + 16 <= k; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
        for (; i < k; i++) dst[i] = _cvtsh_ss(h[i]);
    } else if (t == HX_DTYPE_BF16) {
        for (; i + 16 <= k; i += 16) {
            __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        }
        for (; i < k; i++) dst[i] = hx_bf16_to_fp32(h[i]);
    } else {
        for (; i < k; i++) dst[i] = ((const float *)row)[i];
    }
}

static float hx_cpu_dot_f32_avx512(const float *w, const float *x, int64_t k)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    }
    for (; i < k; i += 16) {
        __mmask16 m = k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a0);
    }
    return hx_cpu_hsum512(_mm512_add_ps(a0, a1));
}

/* Float weights, m = 1: 16 elements of row p from element i, as f32 (F16 by vcvtph2ps, BF16 by
 * a shift, both exact). t is a constant after inlining. */
static inline __m512 hx_cpu_ld16(enum hx_dtype t, const char *p, int64_t i)
{
    if (t == HX_DTYPE_F32) return _mm512_loadu_ps((const float *)(const void *)p + i);
    const uint16_t *q = (const uint16_t *)(const void *)p + i;
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)q);
    if (t == HX_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 hx_cpu_ld16_mask(enum hx_dtype t, const char *p, int64_t i, __mmask16 m)
{
    if (t == HX_DTYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)(const void *)p + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)p + i);
    if (t == HX_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Rows j0..j1 of a float weight times one activation row x: out[j - j0] = (Σ w·x)·scale, with
 * each row's sum taken exactly as hx_cpu_dot_f32_avx512 takes it over the converted row (two
 * accumulators, even and odd 16s; the tail into the first; one final reduction), so the
 * results are the bits the convert-then-dot path gave. Four rows at a time share each x load
 * and keep eight independent FMA chains; the rows are one contiguous stream, and each 64-byte
 * load of a row has beside it an L2 prefetch pf bytes ahead of it, so the four prefetch
 * streams together cover the bytes pf ahead of the four rows, each line once. */
static inline void hx_cpu_gemv_float_t(enum hx_dtype t, const char *w, size_t rb, const float *x,
                                       int64_t k, int64_t n, float *out, float scale, size_t pf)
{
    const int es = t == HX_DTYPE_F32 ? 4 : 2; /* bytes per element */
    const int64_t k32 = k / 32 * 32;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const char *r0 = w + (size_t)j * rb, *r1 = r0 + rb, *r2 = r1 + rb, *r3 = r2 + rb;
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
        __m512 a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        int64_t i = 0;
        for (; i < k32; i += 32) {
            if (pf) {
                const size_t o = (size_t)i * (size_t)es + pf;
                _mm_prefetch(r0 + o, _MM_HINT_T2);
                _mm_prefetch(r1 + o, _MM_HINT_T2);
                _mm_prefetch(r2 + o, _MM_HINT_T2);
                _mm_prefetch(r3 + o, _MM_HINT_T2);
                if (es == 4) {
                    _mm_prefetch(r0 + o + 64, _MM_HINT_T2);
                    _mm_prefetch(r1 + o + 64, _MM_HINT_T2);
                    _mm_prefetch(r2 + o + 64, _MM_HINT_T2);
                    _mm_prefetch(r3 + o + 64, _MM_HINT_T2);
                }
            }
            const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
            a00 = _mm512_fmadd_ps(hx_cpu_ld16(t, r0, i), x0, a00);
            a01 = _mm512_fmadd_ps(hx_cpu_ld16(t, r0, i + 16), x1, a01);
            a10 = _mm512_fmadd_ps(hx_cpu_ld16(t, r1, i), x0, a10);
            a11 = _mm512_fmadd_ps(hx_cpu_ld16(t, r1, i + 16), x1, a11);
            a20 = _mm512_fmadd_ps(hx_cpu_ld16(t, r2, i), x0, a20);
            a21 = _mm512_fmadd_ps(hx_cpu_ld16(t, r2, i + 16), x1, a21);
            a30 = _mm512_fmadd_ps(hx_cpu_ld16(t, r3, i), x0, a30);
            a31 = _mm512_fmadd_ps(hx_cpu_ld16(t, r3, i + 16), x1, a31);
        }
        for (; i < k; i += 16) {
            const __mmask16 m = k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1);
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
            a00 = _mm512_fmadd_ps(hx_cpu_ld16_mask(t, r0, i, m), xv, a00);
            a10 = _mm512_fmadd_ps(hx_cpu_ld16_mask(t, r1, i, m), xv, a10);
            a20 = _mm512_fmadd_ps(hx_cpu_ld16_mask(t, r2, i, m), xv, a20);
            a30 = _mm512_fmadd_ps(hx_cpu_ld16_mask(t, r3, i, m), xv, a30);
        }
        out[j] = hx_cpu_hsum512(_mm512_add_ps(a00, a01)) * scale;
        out[j + 1] = hx_cpu_hsum512(_mm512_add_ps(a10, a11)) * scale;
        out[j + 2] = hx_cpu_hsum512(_mm512_add_ps(a20, a21)) * scale;
        out[j + 3] = hx_cpu_hsum512(_mm512_add_ps(a30, a31)) * scale;
    }
    for (; j < n; j++) {
        const char *r0 = w + (size_t)j * rb;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        int64_t i = 0;
        for (; i < k32; i += 32) {
            a0 = _mm512_fmadd_ps(hx_cpu_ld16(t, r0, i), _mm512_loadu_ps(x + i), a0);
            a1 = _mm512_fmadd_ps(hx_cpu_ld16(t, r0, i + 16), _mm512_loadu_ps(x + i + 16), a1);
        }
        for (; i < k; i += 16) {
            const __mmask16 m = k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1);
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
            a0 = _mm512_fmadd_ps(hx_cpu_ld16_mask(t, r0, i, m), xv, a0);
        }
        out[j] = hx_cpu_hsum512(_mm512_add_ps(a0, a1)) * scale;
    }
}

static void hx_cpu_gemv_float_avx512(enum hx_dtype t, const void *w, size_t rb, const float *x,
                                     int64_t k, int64_t n, float *out, float scale, size_t pf)
{
    if (t == HX_DTYPE_F16) hx_cpu_gemv_float_t(HX_DTYPE_F16, w, rb, x, k, n, out, scale, pf);
    else if (t == HX_DTYPE_BF16) hx_cpu_gemv_float_t(HX_DTYPE_BF16, w, rb, x, k, n, out, scale, pf);
    else hx_cpu_gemv_float_t(HX_DTYPE_F32, w, rb, x, k, n, out, scale, pf);
}

static void hx_cpu_unpack_avx512(enum hx_dtype t, const void *row, int64_t k, float ts,
                                 struct hx_cpu_panel *p, int i)
{
    hx__cpu_unpack_row_impl(t, row, k, ts, p, i);
}

const struct hx_cpu_kernels hx__cpu_kernels_avx512 = {
    .unpack_row = hx_cpu_unpack_avx512,
    .panel_dot = hx_cpu_panel_dot_avx512,
    .gemv_fused = hx_cpu_gemv_fused_avx512,
    .to_f32 = hx_cpu_to_f32_avx512,
    .dot_f32 = hx_cpu_dot_f32_avx512,
    .gemv_float = hx_cpu_gemv_float_avx512,
};
