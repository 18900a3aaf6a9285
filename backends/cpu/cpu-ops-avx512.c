/*
 * cpu-ops-avx512.c — AVX-512 inner loops of the non-matmul ops that matter at prefill: causal
 * attention for one (row, head) with an online softmax (one pass over the keys, blocks of 16),
 * SiLU-GLU, and RMS norm's sum of squares. exp is a degree-6 polynomial of 2^f after range
 * reduction (relative error ~2e-7 over the softmax's range), vectorized where libm's is not.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu-impl.h"

static inline __m512 hx_exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(1.5403530393381608e-4f);               /* ln2^6 / 6! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f)); /* ln2^5 / 5! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f)); /* ln2^4 / 4! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f)); /* ln2^3 / 3! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f)); /* ln2^2 / 2! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f)); /* ln2 */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

void hx__cpu_attn_row_avx512(const float *q, const float *k0, size_t k_stride, const float *v0,
                             size_t v_stride, int64_t len, int hd, float scale, float *out)
{
    const int nv = hd / 16;
    __m512 qv[16], o[16];
    for (int v = 0; v < nv; v++) {
        qv[v] = _mm512_mul_ps(_mm512_loadu_ps(q + 16 * v), _mm512_set1_ps(scale));
        o[v] = _mm512_setzero_ps();
    }
    float m = -INFINITY, l = 0.0f;
    float s[16] __attribute__((aligned(64)));
    for (int64_t t0 = 0; t0 < len; t0 += 16) {
        const int nt = (int)(len - t0 < 16 ? len - t0 : 16);
        for (int j = 0; j < nt; j++) {
            const float *kk = k0 + (size_t)(t0 + j) * k_stride;
            __m512 a0 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kk)), a1 = _mm512_setzero_ps();
            for (int v = 1; v < nv; v++) {
                if (v & 1) a1 = _mm512_fmadd_ps(qv[v], _mm512_loadu_ps(kk + 16 * v), a1);
                else a0 = _mm512_fmadd_ps(qv[v], _mm512_loadu_ps(kk + 16 * v), a0);
            }
            s[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        }
        const __mmask16 mk = (__mmask16)((1u << nt) - 1);
        const __m512 sv = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), mk, s);
        const float mnew = fmaxf(m, _mm512_reduce_max_ps(sv));
        const float corr = m == -INFINITY ? 0.0f : expf(m - mnew);
        const __m512 p = _mm512_maskz_mov_ps(mk, hx_exp512(_mm512_sub_ps(sv, _mm512_set1_ps(mnew))));
        l = l * corr + _mm512_reduce_add_ps(p);
        _mm512_store_ps(s, p);
        const __m512 vc = _mm512_set1_ps(corr);
        for (int v = 0; v < nv; v++) o[v] = _mm512_mul_ps(o[v], vc);
        for (int j = 0; j < nt; j++) {
            const float *vv = v0 + (size_t)(t0 + j) * v_stride;
            const __m512 pj = _mm512_set1_ps(s[j]);
            for (int v = 0; v < nv; v++) o[v] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vv + 16 * v), o[v]);
        }
        m = mnew;
    }
    const __m512 il = _mm512_set1_ps(l > 0.0f ? 1.0f / l : 0.0f);
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(o[v], il));
}

void hx__cpu_silu_glu_avx512(const float *g, const float *u, float *y, int64_t f)
{
    int64_t c = 0;
    for (; c + 16 <= f; c += 16) {
        const __m512 gv = _mm512_loadu_ps(g + c);
        const __m512 e = hx_exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        const __m512 sg = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(y + c, _mm512_mul_ps(sg, _mm512_loadu_ps(u + c)));
    }
    for (; c < f; c++) y[c] = g[c] / (1.0f + expf(-g[c])) * u[c];
}

double hx__cpu_sumsq_avx512(const float *x, int64_t n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1)));
        a0 = _mm512_fmadd_pd(lo, lo, a0);
        a1 = _mm512_fmadd_pd(hi, hi, a1);
    }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    for (; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

/* Prefill attention of one query row and head against keys stored transposed in blocks of 32
 * (key t, dim d at kt[(t / 32) * hd * 32 + d * 32 + t % 32], so a block's loads are one
 * contiguous 16 KiB run instead of hd lines a cache length apart): scores for 64 keys at a time with no horizontal sums (one broadcast
 * of q[d] feeds four accumulators), then one exp pass and P·V. sc: lp floats of scratch. */
void hx__cpu_attn_kt_avx512(const float *q, const float *kt, const float *v0,
                            size_t v_stride, int64_t len, int hd, float scale, float *sc,
                            float *out)
{
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t t0 = 0;
    for (; t0 + 64 <= len; t0 += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *k = kt + (size_t)(t0 / 32) * hd * 32, *k2 = k + (size_t)hd * 32;
        for (int d = 0; d < hd; d++, k += 32, k2 += 32) {
            const __m512 qd = _mm512_set1_ps(q[d]);
            a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k), a0);
            a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + 16), a1);
            a2 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k2), a2);
            a3 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k2 + 16), a3);
        }
        const __m512 vs = _mm512_set1_ps(scale);
        a0 = _mm512_mul_ps(a0, vs), a1 = _mm512_mul_ps(a1, vs), a2 = _mm512_mul_ps(a2, vs), a3 = _mm512_mul_ps(a3, vs);
        _mm512_storeu_ps(sc + t0, a0), _mm512_storeu_ps(sc + t0 + 16, a1);
        _mm512_storeu_ps(sc + t0 + 32, a2), _mm512_storeu_ps(sc + t0 + 48, a3);
        mx = _mm512_max_ps(mx, _mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
    }
    for (; t0 < len; t0 += 16) {
        __m512 a0 = _mm512_setzero_ps();
        const float *k = kt + (size_t)(t0 / 32) * hd * 32 + t0 % 32;
        for (int d = 0; d < hd; d++, k += 32) a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_loadu_ps(k), a0);
        const __mmask16 mk = len - t0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - t0)) - 1);
        a0 = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), mk, _mm512_mul_ps(a0, _mm512_set1_ps(scale)));
        _mm512_storeu_ps(sc + t0, a0);
        mx = _mm512_max_ps(mx, a0);
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t t = 0; t < len; t += 16) {
        const __mmask16 mk = len - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - t)) - 1);
        const __m512 p = _mm512_maskz_mov_ps(mk, hx_exp512(_mm512_sub_ps(_mm512_loadu_ps(sc + t), m)));
        _mm512_storeu_ps(sc + t, p);
        sum = _mm512_add_ps(sum, p);
    }
    const int nv = hd / 16;
    __m512 o[16];
    for (int v = 0; v < nv; v++) o[v] = _mm512_setzero_ps();
    for (int64_t t = 0; t < len; t++) {
        const float *vv = v0 + (size_t)t * v_stride;
        const __m512 pt = _mm512_set1_ps(sc[t]);
        for (int v = 0; v < nv; v++) o[v] = _mm512_fmadd_ps(pt, _mm512_loadu_ps(vv + 16 * v), o[v]);
    }
    const float l = _mm512_reduce_add_ps(sum);
    const __m512 il = _mm512_set1_ps(l > 0.0f ? 1.0f / l : 0.0f);
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(o[v], il));
}

/* Flash-style prefill attention for nq ≤ 8 queries sharing one KV head (the GQA heads of a
 * few rows): per block of 32 keys, the 8 × 32 scores come from FMAs over d with each K vector
 * loaded once for all queries; an online softmax per query rescales its output, and the block's
 * V rows (16 KiB, in L1) are read once per pair of queries. lens[i]: keys query i may see.
 *
 * The body is inlined with nq and nv = hd / 16 as constants for the common case (8 queries,
 * head_dim 128): with run-time bounds the compiler kept the accumulators on the stack and
 * guarded every FMA with a compare, which made the P·V loop half the prefill attention time. */
static inline __attribute__((always_inline)) void
hx_flash_body(const float *const *qs, const int nq, const int64_t *lens, const float *kt,
              const float *v0, size_t v_stride, const int nv, float scale,
              float *const *outs)
{
    float obuf[8 * 256] __attribute__((aligned(64)));
    float pbuf[8 * 32] __attribute__((aligned(64)));
    float mq[8], lq[8];
    int64_t maxlen = 0;
    const int hd = 16 * nv;
    for (int i = 0; i < nq; i++) {
        mq[i] = -INFINITY, lq[i] = 0.0f;
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        for (int v = 0; v < nv; v++) _mm512_store_ps(obuf + i * 256 + 16 * v, _mm512_setzero_ps());
    }
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t t0 = 0; t0 < maxlen; t0 += 32) {
        __m512 a[8][2];
        for (int i = 0; i < 8; i++) a[i][0] = a[i][1] = _mm512_setzero_ps();
        const float *k = kt + (size_t)(t0 / 32) * hd * 32;
        for (int d = 0; d < hd; d++, k += 32) {
            const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16);
            for (int i = 0; i < nq; i++) {
                const __m512 qd = _mm512_set1_ps(qs[i][d]);
                a[i][0] = _mm512_fmadd_ps(qd, k0, a[i][0]);
                a[i][1] = _mm512_fmadd_ps(qd, k1, a[i][1]);
            }
        }
        const int64_t nb = maxlen - t0 < 32 ? maxlen - t0 : 32;
        float corr[8];
        int64_t nt[8];
        for (int i = 0; i < nq; i++) {
            const int64_t n = lens[i] - t0;
            float *p = pbuf + 32 * i;
            corr[i] = 1.0f, nt[i] = n <= 0 ? 0 : n < nb ? n : nb;
            if (n <= 0) {   /* nothing to see in this block: p = 0 leaves the output as it is */
                _mm512_store_ps(p, _mm512_setzero_ps());
                _mm512_store_ps(p + 16, _mm512_setzero_ps());
                continue;
            }
            const __mmask16 m0 = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
            const __mmask16 m1 = n >= 32 ? (__mmask16)0xFFFF : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
            const __m512 s0 = _mm512_mask_mov_ps(ninf, m0, _mm512_mul_ps(a[i][0], vs));
            const __m512 s1 = _mm512_mask_mov_ps(ninf, m1, _mm512_mul_ps(a[i][1], vs));
            const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
            const float mnew = fmaxf(mq[i], bm);
            corr[i] = mq[i] == -INFINITY ? 0.0f : expf(mq[i] - mnew);
            const __m512 mv = _mm512_set1_ps(mnew);
            const __m512 p0 = _mm512_maskz_mov_ps(m0, hx_exp512(_mm512_sub_ps(s0, mv)));
            const __m512 p1 = _mm512_maskz_mov_ps(m1, hx_exp512(_mm512_sub_ps(s1, mv)));
            lq[i] = lq[i] * corr[i] + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
            mq[i] = mnew;
            _mm512_store_ps(p, p0);
            _mm512_store_ps(p + 16, p1);
        }
        /* O = corr·O + P·V, two queries per V load; p is 0 past each query's own keys */
        for (int i = 0; i < nq; i += 2) {
            const int j = i + 1 < nq ? i + 1 : i;
            float *oi = obuf + i * 256, *oj = obuf + j * 256;
            const float *pi = pbuf + 32 * i, *pj = pbuf + 32 * j;
            __m512 ov[2][16];
            const __m512 ci = _mm512_set1_ps(corr[i]), cj = _mm512_set1_ps(j != i ? corr[j] : 0.0f);
            for (int v = 0; v < nv; v++) {
                ov[0][v] = _mm512_mul_ps(_mm512_load_ps(oi + 16 * v), ci);
                ov[1][v] = _mm512_mul_ps(_mm512_load_ps(oj + 16 * v), cj);
            }
            const int64_t n = nt[i] > nt[j] ? nt[i] : nt[j];
            for (int64_t t = 0; t < n; t++) {
                const float *vv = v0 + (size_t)(t0 + t) * v_stride;
                const __m512 pti = _mm512_set1_ps(pi[t]), ptj = _mm512_set1_ps(pj[t]);
                for (int v = 0; v < nv; v++) {
                    const __m512 x = _mm512_loadu_ps(vv + 16 * v);
                    ov[0][v] = _mm512_fmadd_ps(pti, x, ov[0][v]);
                    ov[1][v] = _mm512_fmadd_ps(ptj, x, ov[1][v]);
                }
            }
            for (int v = 0; v < nv; v++) {
                _mm512_store_ps(oi + 16 * v, ov[0][v]);
                if (j != i) _mm512_store_ps(oj + 16 * v, ov[1][v]);
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        const __m512 il = _mm512_set1_ps(lq[i] > 0.0f ? 1.0f / lq[i] : 0.0f);
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(outs[i] + 16 * v, _mm512_mul_ps(_mm512_load_ps(obuf + i * 256 + 16 * v), il));
    }
}

void hx__cpu_attn_flash_avx512(const float *const *qs, int nq, const int64_t *lens,
                               const float *kt, const float *v0, size_t v_stride,
                               int hd, float scale, float *const *outs)
{
    if (nq == 8 && hd == 128)
        hx_flash_body(qs, 8, lens, kt, v0, v_stride, 8, scale, outs);
    else
        hx_flash_body(qs, nq, lens, kt, v0, v_stride, hd / 16, scale, outs);
}
