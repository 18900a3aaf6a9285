/*
 * cpu-gemm-avx2.c — AVX2 kernels: the panel dot product with vpmaddubsw (unsigned codes ×
 * signed activations into int16 pairs, exact while codes ≤ 127, i.e. every type but Q8_0's
 * offset codes, which are widened to int16 instead) and vpmaddwd; f32 with FMA, F16 via F16C.
 * k is a multiple of 32 for every quantized type, so no tail handling is needed.
 */
#include <immintrin.h>

#include "cpu-impl.h"
#include "cpu-unpack.h"

static inline float hx_cpu_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i hx_cpu_dot8(__m256i u, __m256i q, bool wide)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (!wide) return _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ones);
    /* codes up to 255: widen to int16; lanes of 4 bytes keep their order per 128-bit half */
    __m256i ulo = _mm256_unpacklo_epi8(u, _mm256_setzero_si256());
    __m256i uhi = _mm256_unpackhi_epi8(u, _mm256_setzero_si256());
    __m256i qlo = _mm256_srai_epi16(_mm256_unpacklo_epi8(q, q), 8);
    __m256i qhi = _mm256_srai_epi16(_mm256_unpackhi_epi8(q, q), 8);
    __m256i plo = _mm256_madd_epi16(ulo, qlo), phi = _mm256_madd_epi16(uhi, qhi);
    /* plo holds pair sums of bytes 0-7 (per half), phi of 8-15: add adjacent pairs */
    __m256i s = _mm256_hadd_epi32(plo, phi);
    return s;
}

static void hx_cpu_panel_dot_avx2(const struct hx_cpu_panel *p, int nr, const struct hx_cpu_act *a,
                                  int64_t r0, int64_t nc, float *out, int64_t out_stride)
{
    const int64_t k = p->k, kl = k / 4, kg = k / 16;
    bool wide = false;
    for (int i = 0; i < nr && !wide; i++)
        for (int64_t e = 0; e < k && !wide; e++) wide = p->codes[(size_t)i * k + e] > 127;
    for (int64_t c = 0; c < nc; c++) {
        const int8_t *q = a->q + (r0 + c) * k;
        const float *dl = a->dl + (r0 + c) * kl, *ds = a->ds + (r0 + c) * kg;
        for (int i = 0; i < nr; i++) {
            const uint8_t *u = p->codes + (size_t)i * k;
            const float *wsl = p->wsl + (size_t)i * kl, *mc = p->mc + (size_t)i * kg;
            __m256 acc = _mm256_setzero_ps();
            for (int64_t e = 0; e < k; e += 32) {
                __m256i d = hx_cpu_dot8(_mm256_loadu_si256((const __m256i *)(u + e)),
                                        _mm256_loadu_si256((const __m256i *)(q + e)), wide);
                __m256 s = _mm256_mul_ps(_mm256_loadu_ps(wsl + e / 4), _mm256_loadu_ps(dl + e / 4));
                if (wide) {
                    /* hadd order: lanes (0,1,4,5 | 2,3,6,7) per half → scales of the same lanes */
                    s = _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
                }
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, acc);
            }
            float r = hx_cpu_hsum256(acc);
            for (int64_t g = 0; g < kg; g++) r += mc[g] * ds[g];
            out[c * out_stride + i] = r;
        }
    }
}

static void hx_cpu_to_f32_avx2(enum hx_dtype t, const void *row, float *dst, int64_t k)
{
    const uint16_t *h = row;
    int64_t i = 0;
    if (t == HX_DTYPE_F16) {
        for (; i + 8 <= k; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
        for (; i < k; i++) dst[i] = hx_fp16_to_fp32(h[i]);
    } else if (t == HX_DTYPE_BF16) {
        for (; i < k; i++) dst[i] = hx_bf16_to_fp32(h[i]);
    } else {
        for (; i < k; i++) dst[i] = ((const float *)row)[i];
    }
}

static float hx_cpu_dot_f32_avx2(const float *w, const float *x, int64_t k)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hx_cpu_hsum256(_mm256_add_ps(a0, a1));
    for (; i < k; i++) s += w[i] * x[i];
    return s;
}

static void hx_cpu_unpack_avx2(enum hx_dtype t, const void *row, int64_t k, float ts,
                               struct hx_cpu_panel *p, int i)
{
    hx__cpu_unpack_row_impl(t, row, k, ts, p, i);
}

const struct hx_cpu_kernels hx__cpu_kernels_avx2 = {
    .unpack_row = hx_cpu_unpack_avx2,
    .panel_dot = hx_cpu_panel_dot_avx2,
    .gemv_fused = NULL,
    .to_f32 = hx_cpu_to_f32_avx2,
    .dot_f32 = hx_cpu_dot_f32_avx2,
};
