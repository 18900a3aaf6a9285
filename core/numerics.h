/*
 * numerics.h — how far a device's result of one op may be from the reference's (`ref`:
 * dequantize exactly, accumulate in double) when both get the same inputs. This is the one
 * table of thresholds: tests/test-backend-ops checks every backend's ops against it and the
 * scheduler's `verify` (so `engine diff`) checks every op of a model run against it.
 * Derivations: docs/testing.md "Thresholds, and why" and docs/npu-backend.md §4.
 *
 * The f32 ops have one NMSE threshold per op kind (hx__op_nmse_threshold). A MATMUL's bound
 * is computed from its own data and follows what the executing device computes
 * (hx_device_info.numerics): each output's error e = Σ_k (w·δ_k + x·φ_k), δ the activation's
 * rounding error and φ the weight conversion's, has variance var = Σ_b (s_b·E_b + xm_b·D_b)
 * over K-blocks b of HX_NUM_BLOCK elements, with E_b = Σ w², D_b = Σ (w − ŵ)² per weight row,
 * xm_b = mean x² and s_b = the expected squared rounding error of one activation element:
 *
 *   HX_NUMERICS_FLOAT     s_b: F32 0; F16, BF16 the actual (x − f16/bf16(x))², block mean;
 *                         quantized types d²/12, d = amax/127 of the 256-block. D = 0.
 *   HX_NUMERICS_INT8_ROW  s_b = (amax_row/(127·254))²/12: a row is sent as int8 hi (scale
 *                         amax/127) plus its int8-rounded residual (scale <= amax/(127·254));
 *                         D the actual error of the per-row int8 weight conversion (0 for rows
 *                         that are integer multiples, |q| <= 127, of their smallest non-zero
 *                         magnitude).
 *
 * Over n outputs Σ e² may reach 2·q(n)·Σ var (q: the z = 5 chi-square quantile over n) plus
 * the f32 summation floor 64·K·u²/6 · Σ typ, typ = Σ_b xm_b·E_b the expected square of an
 * output; each |e| 7·√(2·var + floor·typ).
 */
#pragma once

#include "hx-impl.h"

#define HX_NUM_BLOCK 256                /* K-block of the matmul error model */
#define HX_NUM_U 5.9604644775390625e-8  /* f32 unit roundoff, 2^-24 */

/* NMSE threshold of an op that is f32 arithmetic only (every kind but MATMUL; 0 = bit-exact).
 * MATMUL returns -1: its bound is hx__mm_allowed of its data. */
double hx__op_nmse_threshold(enum hx_op_kind kind);
/* Each element of such an op may be off by this × the RMS of its output row. */
double hx__op_elem_limit(double nmse_threshold);

/* Blocks of a K-long row. */
static inline int64_t hx__mm_blocks(int64_t k) { return (k + HX_NUM_BLOCK - 1) / HX_NUM_BLOCK; }

/* One dequantized weight row of k values: e[b] = Σ w², and, when dw is not NULL, dw[b] =
 * Σ (w − ŵ)² of the conversion a device of `num` makes (0 for HX_NUMERICS_FLOAT). */
void hx__mm_weight_row(enum hx_numerics num, const float *w, int64_t k, double *e, double *dw);
/* One activation row of k values for a weight of type wtype: s[b] and xm[b] (see above). */
void hx__mm_act_row(enum hx_numerics num, enum hx_dtype wtype, const float *x, int64_t k,
                    double *s, double *xm);
/* One output's error variance and expected square from its activation row (s, xm) and weight
 * row (e, dw, dw may be NULL), times scale2 (the square of hx_weight.scale). */
void hx__mm_output(int64_t nb, const double *s, const double *xm, const double *e,
                   const double *dw, double scale2, double *var, double *typ);
/* Σ e² allowed over the outputs of K-long dot products with Σ var and Σ typ, the errors
 * having dof degrees of freedom. Not the number of outputs: every output of one activation
 * row takes its error from the same quantized activation vector, so the N errors of a row
 * have (tr G)²/‖G‖²_F degrees, G = W·Wᵀ. hx__mm_dof_iid is that for i.i.d. random weights
 * (test-backend-ops); trained weights share a few directions (measured: 2.2 on stories260K's
 * output head), so verify counts one per activation row. */
double hx__mm_dof_iid(int64_t m, int64_t n, int64_t k);
double hx__mm_allowed(double sum_var, double sum_typ, double dof, int64_t k);
/* |e| allowed for one output. */
double hx__mm_elem_limit(double var, double typ, int64_t k);
/* The f32 summation floor of a K-long dot product, as an NMSE (64·K·u²/6). */
double hx__mm_f32_floor(int64_t k);
/* The NPU's int8 conversion of one weight row (HX_NUMERICS_INT8_ROW): false if it is exact,
 * else delta[i] = ŵ_i − w_i for the k values. */
bool hx__mm_int8_row_delta(const float *w, int64_t k, float *delta);

/* ---- whole model (engine diff, docs/policies.md "The whole-model bound") --------------------- */

/* How far the ratio of two independent mean squared errors with d1 and d2 degrees of freedom
 * (an F(d1, d2) variable) may exceed 1: its z = 5 upper quantile by Paulson's approximation
 * (the Wilson–Hilferty cube roots of both chi-squares); INFINITY where that has no root (d2
 * below ≈ 6). 20.7 for F(16, 16), 6.4 for F(16, 48), 10.6 for F(10, 30). */
double hx__ratio_bound(double d1, double d2);
