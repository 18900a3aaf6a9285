/*
 * cpu-gemm-scalar.c — the portable kernels: the integer panel dot product of cpu-impl.h in
 * plain C (the fallback and the definition the SIMD paths must match), and f32 helpers.
 */
#include "cpu-impl.h"
#include "cpu-unpack.h"

static void hx_cpu_panel_dot_scalar(const struct hx_cpu_panel *p, int nr, const struct hx_cpu_act *a,
                                    int64_t r0, int64_t nc, float *out, int64_t out_stride)
{
    const int64_t k = p->k;
    for (int64_t c = 0; c < nc; c++) {
        const int8_t *q = a->q + (r0 + c) * k;
        const float *dl = a->dl + (r0 + c) * (k / 4), *ds = a->ds + (r0 + c) * (k / 16);
        for (int i = 0; i < nr; i++) {
            const uint8_t *u = p->codes + (size_t)i * k;
            const float *wsl = p->wsl + (size_t)i * (k / 4), *mc = p->mc + (size_t)i * (k / 16);
            float acc = 0.0f;
            for (int64_t l = 0; l < k / 4; l++) {
                int32_t s = u[4 * l] * q[4 * l] + u[4 * l + 1] * q[4 * l + 1] +
                            u[4 * l + 2] * q[4 * l + 2] + u[4 * l + 3] * q[4 * l + 3];
                acc += wsl[l] * dl[l] * (float)s;
            }
            for (int64_t g = 0; g < k / 16; g++) acc += mc[g] * ds[g];
            out[c * out_stride + i] = acc;
        }
    }
}

static void hx_cpu_to_f32_scalar(enum hx_dtype t, const void *row, float *dst, int64_t k)
{
    const uint16_t *h = row;
    if (t == HX_DTYPE_F16)
        for (int64_t i = 0; i < k; i++) dst[i] = hx_fp16_to_fp32(h[i]);
    else if (t == HX_DTYPE_BF16)
        for (int64_t i = 0; i < k; i++) dst[i] = hx_bf16_to_fp32(h[i]);
    else
        for (int64_t i = 0; i < k; i++) dst[i] = ((const float *)row)[i];
}

static float hx_cpu_dot_f32_scalar(const float *w, const float *x, int64_t k)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += w[i + j] * x[i + j];
    float s = 0.0f;
    for (; i < k; i++) s += w[i] * x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

static void hx_cpu_unpack_scalar(enum hx_dtype t, const void *row, int64_t k, float ts,
                                 struct hx_cpu_panel *p, int i)
{
    hx__cpu_unpack_row_impl(t, row, k, ts, p, i);
}

const struct hx_cpu_kernels hx__cpu_kernels_scalar = {
    .unpack_row = hx_cpu_unpack_scalar,
    .panel_dot = hx_cpu_panel_dot_scalar,
    .gemv_fused = NULL,
    .to_f32 = hx_cpu_to_f32_scalar,
    .dot_f32 = hx_cpu_dot_f32_scalar,
};
