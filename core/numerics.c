/*
 * numerics.c — the error model of numerics.h: per-op NMSE thresholds of the f32 ops and the
 * data-driven matmul bound, shared by test-backend-ops and `verify` (docs/testing.md).
 */
#include <math.h>

#include "numerics.h"

double hx__op_nmse_threshold(enum hx_op_kind kind)
{
    switch (kind) {
    case HX_OP_EMBED: return 0.0;      /* exact small-integer products, at most one rounding */
    case HX_OP_ADD: return 0.0;        /* one correctly rounded operation */
    case HX_OP_RELU2_GLU: return 1e-12; /* two multiplies, any order: <= 2u relative */
    case HX_OP_SWIGLU: return 1e-10;   /* exp/div to a few ulp (Vulkan: exp 3+2|x| ulp) */
    case HX_OP_RMS_NORM: return 1e-10; /* an f32 sum of squares of up to ~8k terms + rsqrt */
    case HX_OP_ROPE: return 1e-6;      /* sin/cos at Vulkan's minimum 2^-11 absolute precision */
    case HX_OP_ATTN: return 1e-8;      /* f32 dots, exp, and sums over up to 4k positions */
    case HX_OP_MATMUL:
    case HX_OP_KIND_COUNT: break;
    }
    return -1.0;
}

double hx__op_elem_limit(double nmse_threshold) { return 8.0 * sqrt(nmse_threshold); }

/* The NPU's weight conversion (docs/npu-backend.md §2): exact when every value is an integer
 * multiple q, |q| <= 127, of the row's smallest non-zero magnitude (false); else amax/127,
 * rounded to nearest, with *d = amax/127 and *inv = 127/amax as the device computes them. */
static bool hx__mm_int8_row_scale(const float *w, int64_t k, float *d, float *inv)
{
    float amax = 0.0f, amin = INFINITY;
    for (int64_t i = 0; i < k; i++) {
        float a = fabsf(w[i]);
        amax = a > amax ? a : amax;
        if (a > 0.0f && a < amin) amin = a;
    }
    if (amax == 0.0f) return false;
    if (amax / amin <= 127.5f) {
        int64_t i = 0;
        for (; i < k; i++) {
            double r = rint((double)w[i] / (double)amin);
            if (fabs(r) > 127.0 || r * (double)amin != (double)w[i]) break;
        }
        if (i == k) return false;
    }
    *d = amax / 127.0f, *inv = 127.0f / amax;
    return true;
}

/* ŵ − w of one element, as the device rounds (npu-gemm.c): w · (127/amax) in f32, to nearest
 * even */
static inline float hx__mm_int8_err(float w, float d, float inv)
{
    return (float)((double)(nearbyintf(w * inv) * d) - w);
}

bool hx__mm_int8_row_delta(const float *w, int64_t k, float *delta)
{
    float d, inv;
    if (!hx__mm_int8_row_scale(w, k, &d, &inv)) return false;
    for (int64_t i = 0; i < k; i++) delta[i] = hx__mm_int8_err(w[i], d, inv);
    return true;
}

/* Adds Σ (w − ŵ)² of that conversion per block to dw. */
static void hx__mm_int8_row_werr(const float *w, int64_t k, double *dw)
{
    float d, inv;
    if (!hx__mm_int8_row_scale(w, k, &d, &inv)) return;
    for (int64_t i = 0; i < k; i++) {
        const double e = hx__mm_int8_err(w[i], d, inv);
        dw[i / HX_NUM_BLOCK] += e * e;
    }
}

void hx__mm_weight_row(enum hx_numerics num, const float *w, int64_t k, double *e, double *dw)
{
    const int64_t nb = hx__mm_blocks(k);
    for (int64_t b = 0; b < nb; b++) e[b] = 0;
    for (int64_t i = 0; i < k; i++) e[i / HX_NUM_BLOCK] += (double)w[i] * w[i];
    if (!dw) return;
    for (int64_t b = 0; b < nb; b++) dw[b] = 0;
    if (num == HX_NUMERICS_INT8_ROW) hx__mm_int8_row_werr(w, k, dw);
}

void hx__mm_act_row(enum hx_numerics num, enum hx_dtype wtype, const float *x, int64_t k,
                    double *s, double *xm)
{
    const int64_t nb = hx__mm_blocks(k);
    float rmax = 0;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * HX_NUM_BLOCK;
        const int64_t len = HX_MIN(k - b * HX_NUM_BLOCK, (int64_t)HX_NUM_BLOCK);
        double sq = 0, err = 0;
        float amax = 0;
        for (int64_t i = 0; i < len; i++) {
            sq += (double)xb[i] * xb[i], amax = fmaxf(amax, fabsf(xb[i]));
            float rd = wtype == HX_DTYPE_F16    ? hx_fp16_to_fp32(hx_fp32_to_fp16(xb[i]))
                       : wtype == HX_DTYPE_BF16 ? hx_bf16_to_fp32(hx_fp32_to_bf16(xb[i]))
                                                : xb[i];
            err += ((double)xb[i] - rd) * ((double)xb[i] - rd);
        }
        const double d = (double)amax / 127.0;
        xm[b] = sq / (double)len;
        s[b] = wtype == HX_DTYPE_F32                             ? 0
               : wtype == HX_DTYPE_F16 || wtype == HX_DTYPE_BF16 ? err / (double)len
                                                                 : d * d / 12.0;
        rmax = fmaxf(rmax, amax);
    }
    if (num != HX_NUMERICS_INT8_ROW) return;
    /* the residual of the row's int8 rounding (|r| <= s_hi / 2, s_hi = amax / 127), rounded
     * to int8 with its own scale s_lo = amax(r) / 127 <= s_hi / 254: the error is lo's */
    const double d = (double)rmax / (127.0 * 254.0);
    for (int64_t b = 0; b < nb; b++) s[b] = d * d / 12.0;
}

void hx__mm_output(int64_t nb, const double *s, const double *xm, const double *e,
                   const double *dw, double scale2, double *var, double *typ)
{
    double v = 0, t = 0;
    for (int64_t b = 0; b < nb; b++) {
        t += xm[b] * e[b];
        v += s[b] * e[b] + (dw ? xm[b] * dw[b] : 0);
    }
    *var = v * scale2, *typ = t * scale2;
}

/* Wilson-Hilferty: the z = 5 upper quantile of a chi-square with n degrees of freedom, over
 * n — how far a sum of n squared Gaussian errors may exceed its expectation (p = 3e-7). */
static double hx__chi2_over_n(double n)
{
    const double a = 2.0 / (9.0 * n);
    return pow(1.0 - a + 5.0 * sqrt(a), 3.0);
}

/* f32 accumulation of K products: NMSE ≈ K·u²/6 (random-walk model of sequential summation),
 * allowed with a margin of 64. */
static double hx__f32_floor(int64_t k) { return 64.0 * (double)k * HX_NUM_U * HX_NUM_U / 6.0; }

/* For i.i.d. weights G's diagonal is ≈ K·σ² and its off-diagonal ≈ √K·σ², so ‖G‖²_F ≈
 * N·K²σ⁴ + N²·K·σ⁴ and a row's errors have ≈ N·K/(N + K) degrees of freedom. */
double hx__mm_dof_iid(int64_t m, int64_t n, int64_t k)
{
    return (double)m * (double)n * (double)k / (double)(n + k);
}

double hx__mm_allowed(double sum_var, double sum_typ, double dof, int64_t k)
{
    return 2.0 * hx__chi2_over_n(dof > 1.0 ? dof : 1.0) * sum_var + hx__f32_floor(k) * sum_typ;
}

double hx__mm_elem_limit(double var, double typ, int64_t k)
{
    return 7.0 * sqrt(2.0 * var + hx__f32_floor(k) * typ);
}

double hx__mm_f32_floor(int64_t k) { return hx__f32_floor(k); }

/* Paulson's normal approximation of F(d1, d2) (the Wilson–Hilferty cube roots of both
 * chi-squares): z = ((1 − a2)·y − (1 − a1)) / √(a1 + a2·y²), y = F^(1/3), a = 2/(9d); solved
 * for y at z = 5 (the larger root of a quadratic). No root: the tail never gets that far. */
double hx__ratio_bound(double d1, double d2)
{
    if (!(d1 > 0) || !(d2 > 0)) return INFINITY;
    const double a1 = 2.0 / (9.0 * d1), a2 = 2.0 / (9.0 * d2), z2 = 25.0;
    const double A = (1 - a2) * (1 - a2) - z2 * a2, B = -2.0 * (1 - a1) * (1 - a2),
                 C = (1 - a1) * (1 - a1) - z2 * a1, disc = B * B - 4 * A * C;
    if (A <= 0 || disc < 0) return INFINITY;
    const double y = (-B + sqrt(disc)) / (2 * A);
    return y * y * y;
}
