/*
 * cpu-act-quant.c — the two halves of the integer matmul form (see cpu-impl.h): activation
 * rows quantized to int8 blocks, and weight rows unpacked into panels of unsigned codes with
 * lane scales and group corrections. Plain C; the unpack runs once per panel and is reused
 * across every activation row, so it is not the hot loop of a GEMM.
 */
#include <math.h>
#include <string.h>

#include "cpu-impl.h"
#include "cpu-unpack.h"

#define HX_CPU_ALIGN(x) (((x) + 63) & ~(size_t)63)

int hx__cpu_act_qb(enum hx_dtype t, int64_t k)
{
    switch (t) {
    case HX_DTYPE_Q1_0: return 128;
    case HX_DTYPE_TQ1_0:
    case HX_DTYPE_TQ2_0: return 256;
    case HX_DTYPE_Q2_0: return 64;
    case HX_DTYPE_I2_S: return k % 256 ? 128 : 256;
    default: return 32;
    }
}

bool hx__cpu_type_permuted(enum hx_dtype t, int64_t k)
{
    return t == HX_DTYPE_TQ2_0 || (t == HX_DTYPE_I2_S && k % 256 == 0);
}

size_t hx__cpu_act_bytes(int64_t n_rows, int64_t k)
{
    size_t n = (size_t)n_rows, kk = (size_t)k;
    return HX_CPU_ALIGN(n * kk) + HX_CPU_ALIGN(n * kk) + HX_CPU_ALIGN(n * kk / 4) + 64;
}

void hx__cpu_act_init(struct hx_cpu_act *a, void *mem, int64_t n_rows, int64_t k, int qb)
{
    size_t n = (size_t)n_rows, kk = (size_t)k;
    char *p = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    a->n_rows = n_rows;
    a->k = k;
    a->qb = qb;
    a->q = (int8_t *)p;
    p += HX_CPU_ALIGN(n * kk);
    a->dl = (float *)p;
    p += HX_CPU_ALIGN(n * kk);
    a->ds = (float *)p;
}

void hx__cpu_act_quantize_row(struct hx_cpu_act *a, int64_t r, const float *src, bool permuted)
{
    const int64_t k = a->k, qb = a->qb;
    int8_t *q = a->q + r * k;
    float *dl = a->dl + r * (k / 4), *ds = a->ds + r * (k / 16);
    for (int64_t b = 0; b < k; b += qb) {
        const float *x = src + b;
        float amax = 0.0f;
        for (int64_t i = 0; i < qb; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        int8_t *qq = q + b;
        for (int64_t i = 0; i < qb; i++) {
            float v = nearbyintf(x[i] * id);
            v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
            qq[permuted ? hx__cpu_perm_tq2((int)i) : i] = (int8_t)v;
        }
        for (int64_t i = 0; i < qb / 4; i++) dl[(b >> 2) + i] = d;
        for (int64_t g = 0; g < qb; g += 16) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += qq[g + i];
            ds[(b + g) >> 4] = d * (float)s;
        }
    }
}

size_t hx__cpu_panel_bytes(int64_t n_rows, int64_t k)
{
    size_t n = (size_t)n_rows, kk = (size_t)k;
    return HX_CPU_ALIGN(n * kk) + HX_CPU_ALIGN(n * kk) + HX_CPU_ALIGN(n * kk / 4) + 64;
}

void hx__cpu_panel_init(struct hx_cpu_panel *p, void *mem, int64_t n_rows, int64_t k)
{
    size_t n = (size_t)n_rows, kk = (size_t)k;
    char *c = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    p->k = k;
    p->codes = (uint8_t *)c;
    c += HX_CPU_ALIGN(n * kk);
    p->wsl = (float *)c;
    c += HX_CPU_ALIGN(n * kk);
    p->mc = (float *)c;
}

void hx__cpu_unpack_row(enum hx_dtype t, const void *row, int64_t k, float ts,
                        struct hx_cpu_panel *p, int i)
{
    hx__cpu_unpack_row_impl(t, row, k, ts, p, i);
}
