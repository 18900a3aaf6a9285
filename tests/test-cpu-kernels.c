/*
 * test-cpu-kernels.c — the `cpu` backend's kernels against straightforward formulas: every
 * matmul weight type on every ISA path this CPU has (forced with HX_CPU_ISA) vs an f64
 * dequantize-then-dot reference on odd shapes, with a tolerance derived from the int8
 * activation rounding (|x - x̂| ≤ blockmax/254 per element); and the other ops vs direct
 * formulas, with strided rows and in-place outputs.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hx-backend.h"
#include "registry.h"

/* backends/cpu/cpu-impl.h: is the AMX Q8_0 path on (built, CPU, OS, HX_CPU_AMX)? Is the Q1_0
 * lookup decode (VBMI, HX_CPU_VBMI)? */
bool hx__cpu_amx(void);
bool hx__cpu_vbmi(void);

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float rndf(void) { return (float)(rnd32() >> 8) / 16777216.0f * 2.0f - 1.0f; }

static void put_h(uint8_t *p, float v)
{
    uint16_t h = hx_fp32_to_fp16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* When set, fill_weight writes ternary rows: random -1/0/+1 times one scale, TSCALE, through
 * the type's quantizer (the same n·k random draws whatever the type). */
static int w_ternary;
#define TSCALE 0.01171875f

/* Random valid blocks: random code bytes, scales set to modest fp16 values. */
static void fill_weight(enum hx_dtype t, uint8_t *w, int64_t n, int64_t k)
{
    size_t rb = hx_dtype_row_bytes(t, k), bb = hx_dtype_block_bytes(t);
    if (w_ternary) {
        float *row = malloc(sizeof(float) * (size_t)k);
        for (int64_t j = 0; j < n; j++) {
            for (int64_t e = 0; e < k; e++)
                row[e] = e % 64 == 0 ? TSCALE : TSCALE * (float)((int)(rnd32() % 3) - 1);
            hx_quantize_row(t, row, w + (size_t)j * rb, k);
        }
        free(row);
        return;
    }
    for (size_t i = 0; i < rb * (size_t)n; i++) w[i] = (uint8_t)rnd32();
    if (t == HX_DTYPE_F32) {
        for (int64_t i = 0; i < n * k; i++) ((float *)w)[i] = rndf();
        return;
    }
    if (t == HX_DTYPE_F16 || t == HX_DTYPE_BF16) {
        for (int64_t i = 0; i < n * k; i++)
            ((uint16_t *)w)[i] = t == HX_DTYPE_F16 ? hx_fp32_to_fp16(rndf()) : hx_fp32_to_bf16(rndf());
        return;
    }
    for (uint8_t *b = w; b < w + rb * (size_t)n; b += bb) {
        float d = 0.01f + 0.02f * rndf();
        switch (t) {
        case HX_DTYPE_Q8_0: case HX_DTYPE_Q4_0: case HX_DTYPE_Q1_0: case HX_DTYPE_Q2_0: put_h(b, d); break;
        case HX_DTYPE_Q4_K: case HX_DTYPE_Q5_K: put_h(b, d); put_h(b + 2, 0.5f * d); break;
        case HX_DTYPE_Q6_K: put_h(b + 208, d); break;
        case HX_DTYPE_TQ2_0: put_h(b + 64, d); break;
        case HX_DTYPE_TQ1_0: put_h(b + 52, d); break;
        default: break;
        }
    }
}

static int act_qb(enum hx_dtype t, int64_t k)
{
    if (t == HX_DTYPE_Q2_0) return 64;
    if (t == HX_DTYPE_I2_S) return k % 256 ? 128 : 256;
    return t == HX_DTYPE_Q1_0 ? 128 : (t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0) ? 256 : 32;
}

/* TSCALE is also the tensor scale given to I2_S weights (random bytes carry none). */

/* The registry refers to backend tables weakly; a strong reference links cpu.c in. */
extern const struct hx_backend_ops hx__backend_cpu_ops;

static struct hx_device *open_cpu(int threads)
{
    if (strcmp(hx__backend_cpu_ops.name, "cpu") != 0) return NULL;
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = threads};
    struct hx_device *dev = NULL;
    if (hx__device_open("cpu", &cfg, &dev) != HX_OK) fprintf(stderr, "  open cpu: %s\n", hx_last_error());
    return dev;
}

/* When set, check_matmul copies its m × n output here (for comparing two paths bit for bit). */
static float *capture;
/* Activations of check_matmul: 0 random in [-1, 1) (every 7th × 4), 1 all 1.5 (every int8
 * code 127), 2 ±2 with random signs (codes ±127: sums of four at the ends of their range). */
static int x_mode;

/* Run one MATMUL (m × k) · (n × k)ᵀ with a strided dst; check against f64. */
static int check_matmul(enum hx_dtype t, int64_t m, int64_t k, int64_t n, int threads)
{
    struct hx_device *dev = open_cpu(threads);
    if (!dev) return -1;
    size_t rb = hx_dtype_row_bytes(t, k);
    uint8_t *wd = malloc(rb * (size_t)n);
    float *deq = malloc(sizeof(float) * (size_t)(n * k));
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    int bad = 0;
    fill_weight(t, wd, n, k);
    for (int64_t j = 0; j < n; j++) hx_dequantize_row_scaled(t, wd + (size_t)j * rb, deq + j * k, k, TSCALE);
    for (int64_t i = 0; i < m * k; i++)
        x[i] = x_mode == 1 ? 1.5f : x_mode == 2 ? (rnd32() & 1 ? 2.0f : -2.0f)
                                                : rndf() * (i % 7 == 0 ? 4.0f : 1.0f);
    const int64_t dst_stride = n + 3;
    struct hx_buffer *src = NULL, *dst = NULL;
    hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * k), &src);
    hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * dst_stride), &dst);
    hx__dev_buffer_write(src, 0, x, sizeof(float) * (size_t)(m * k));
    struct hx_weight w = {.name = "w", .type = t, .n_rows = n, .n_cols = k, .data = wd,
                          .nbytes = rb * (size_t)n, .scale = 0.75f, .tensor_scale = TSCALE};
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_MATMUL, .n_rows = m, .n_in = k, .n_out = n, .wtype = t};
    op.src[0] = (struct hx_tensor_ref){src, 0, m, k, sizeof(float) * (size_t)k};
    op.dst = (struct hx_tensor_ref){dst, 0, m, n, sizeof(float) * (size_t)dst_stride};
    op.weight = &w;
    hx__dev_weight_prepare(dev, &w, &op.weight_handle);
    int32_t meta[64] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = m,
                          .tokens = meta, .pos = meta, .seq = meta};
    if (hx__dev_run(dev, &sp) != HX_OK) bad = 1;
    const bool quant = hx_dtype_is_quantized(t);
    const int qb = act_qb(t, k);
    for (int64_t r = 0; r < m && capture; r++)
        memcpy(capture + r * n, hx_tensor_row(&op.dst, r), sizeof(float) * (size_t)n);
    for (int64_t r = 0; r < m && !bad; r++) {
        const float *xr = x + r * k;
        float *y = hx_tensor_row(&op.dst, r);
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0, qerr = 0;
            for (int64_t e = 0; e < k; e++) {
                ref += (double)xr[e] * deq[j * k + e];
                mag += fabs((double)xr[e] * deq[j * k + e]);
            }
            if (quant)
                for (int64_t b = 0; b < k; b += qb) {
                    double amax = 0, sw = 0;
                    for (int e = 0; e < qb; e++) {
                        amax = fmax(amax, fabs(xr[b + e]));
                        sw += fabs(deq[j * k + b + e]);
                    }
                    qerr += sw * amax / 254.0;
                }
            ref *= 0.75;
            double tol = 0.75 * (qerr * 1.01 + 2e-5 * mag) + 1e-6;
            if (!(fabs(y[j] - ref) <= tol)) {
                fprintf(stderr, "  %s m=%lld k=%lld n=%lld isa=%s: y[%lld][%lld] = %.6g, ref %.6g, tol %.3g\n",
                        hx_dtype_name(t), (long long)m, (long long)k, (long long)n,
                        getenv("HX_CPU_ISA"), (long long)r, (long long)j, y[j], ref, tol);
                bad = 1;
                break;
            }
        }
    }
    hx__dev_weight_release(dev, op.weight_handle);
    hx__dev_buffer_free(src);
    hx__dev_buffer_free(dst);
    hx__device_close(dev);
    free(wd), free(deq), free(x);
    return bad;
}

/* Select a kernel path through the environment (HX_CPU_ISA, HX_CPU_REPACK); false when this
 * CPU lacks the ISA (the path is not run). */
static bool use_path(const char *isa, const char *repack)
{
    if (!strcmp(isa, "avx512") ? !__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")
        : !strcmp(isa, "avx2") ? !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") : false)
        return false;
    setenv("HX_CPU_ISA", isa, 1);
    setenv("HX_CPU_REPACK", repack, 1);
    return true;
}

static void matmul_all_types(const char *isa)
{
    setenv("HX_CPU_ISA", isa, 1);
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        int64_t be = hx_dtype_block_elems((enum hx_dtype)t);
        int64_t k1 = be == 1 ? 37 : be * 3, k2 = be == 1 ? 200 : (be >= 128 ? be * 5 : be * 11);
        /* the last: K whole 256s, where I2_S has x16 tiles (its other cases keep GGUF rows) */
        const int64_t cases[][3] = {{1, k1, 7}, {3, k2, 13}, {1, k2, 33}, {9, k1, 5}, {2, 1024, 40}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int bad = check_matmul((enum hx_dtype)t, cases[c][0], cases[c][1], cases[c][2],
                                   c % 2 ? 2 : 1);
            if (bad) HX_FAIL_AT("matmul %s (%s) case %zu failed", hx_dtype_name((enum hx_dtype)t), isa, c);
        }
    }
    unsetenv("HX_CPU_ISA");
}

TEST(matmul_scalar) { matmul_all_types("scalar"); }

TEST(matmul_avx2)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) SKIP_NA("no AVX2");
    matmul_all_types("avx2");
}

TEST(matmul_avx512)
{
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw"))
        SKIP_NA("no AVX-512 VNNI");
    matmul_all_types("avx512");
}

TEST(i2_s_equals_tq2_0)
{
    /* The same ternary weights with one scale, written as TQ2_0 (d = the scale in every block)
     * and as I2_S (the tensor scale), must give the same bits on every path: the x16 tiles
     * (decode, two-row decode, prefill), the GGUF rows (panels; TQ2_0's m = 1 fused GEMV is
     * its own, so m >= 2 there), AVX2 and scalar panels. */
    static const struct { const char *isa, *repack; int64_t m0; } paths[] = {
        {"avx512", "1", 1}, {"avx512", "0", 2}, {"avx2", "1", 1}, {"scalar", "1", 1}};
    static const int64_t shapes[][2] = {{512, 40}, {1024, 33}, {2560, 70}};
    static const int64_t ms[] = {1, 2, 7, 64};
    int ran = 0;
    w_ternary = 1;
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
        const char *isa = paths[pi].isa;
        if (!use_path(isa, paths[pi].repack)) continue;
        ran++;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                const int64_t k = shapes[si][0], n = shapes[si][1], m = ms[mi];
                if (m < paths[pi].m0 || (m == 64 && strcmp(isa, "avx512"))) continue;
                float *y[2];
                const uint64_t seed = rng;
                for (int v = 0; v < 2; v++) {
                    rng = seed; /* the same weights and activations */
                    y[v] = capture = malloc(sizeof(float) * (size_t)(m * n));
                    if (check_matmul(v ? HX_DTYPE_I2_S : HX_DTYPE_TQ2_0, m, k, n, 2))
                        HX_FAIL_AT("%s repack %s %s m=%lld k=%lld: against f64", isa, paths[pi].repack,
                                   v ? "I2_S" : "TQ2_0", (long long)m, (long long)k);
                }
                capture = NULL;
                size_t diff = 0;
                for (int64_t i = 0; i < m * n; i++) diff += memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
                free(y[0]), free(y[1]);
                if (diff)
                    HX_FAIL_AT("%s repack %s m=%lld k=%lld n=%lld: %zu of %lld outputs differ between "
                               "I2_S and TQ2_0", isa, paths[pi].repack, (long long)m, (long long)k,
                               (long long)n, diff, (long long)(m * n));
            }
    }
    w_ternary = 0;
    unsetenv("HX_CPU_REPACK");
    unsetenv("HX_CPU_ISA");
    if (!ran) SKIP("no path");
}

TEST(float_gemv_equals_convert_dot)
{
    /* Float weights at m = 1 go through the fused GEMV (rows converted in registers, four at a
     * time); at m >= 2 each tile is converted to f32 and dotted row by row. Both must give the
     * same bits for the same row: run m = 1 and m = 2 on the same weights and first activation
     * row (K with and without a tail of 32, n with and without a tail of 4, 1 and 2 threads). */
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw"))
        SKIP_NA("no AVX-512 VNNI");
    static const enum hx_dtype types[] = {HX_DTYPE_F32, HX_DTYPE_F16, HX_DTYPE_BF16};
    static const int64_t shapes[][2] = {{37, 7}, {200, 33}, {2560, 70}, {1000, 9}, {64, 4},
                                        {2560, 262}}; /* the last: >= 1 MiB, copied (cpu.c) */
    setenv("HX_CPU_ISA", "avx512", 1);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int64_t k = shapes[si][0], n = shapes[si][1];
            const int threads = si % 2 ? 2 : 1;
            float *y[2];
            const uint64_t seed = rng;
            for (int v = 0; v < 2; v++) {
                rng = seed; /* the same weights, the same first activation row */
                y[v] = capture = malloc(sizeof(float) * (size_t)((1 + v) * n));
                if (check_matmul(types[ti], 1 + v, k, n, threads))
                    HX_FAIL_AT("%s m=%d k=%lld n=%lld: against f64", hx_dtype_name(types[ti]),
                               1 + v, (long long)k, (long long)n);
            }
            capture = NULL;
            size_t diff = 0;
            for (int64_t i = 0; i < n; i++) diff += memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
            free(y[0]), free(y[1]);
            if (diff)
                HX_FAIL_AT("%s k=%lld n=%lld: %zu of %lld outputs of m = 1 differ from row 0 of "
                           "m = 2", hx_dtype_name(types[ti]), (long long)k, (long long)n, diff,
                           (long long)n);
        }
    unsetenv("HX_CPU_ISA");
}

/* y (m × w->n_rows) = x (m × k) · wᵀ on the cpu backend, 2 threads. */
static int run_mm(const struct hx_weight *w, const float *x, int64_t m, float *y)
{
    struct hx_device *dev = open_cpu(2);
    if (!dev) return 1;
    const int64_t k = w->n_cols, n = w->n_rows;
    struct hx_buffer *src = NULL, *dst = NULL;
    hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * k), &src);
    hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * n), &dst);
    hx__dev_buffer_write(src, 0, x, sizeof(float) * (size_t)(m * k));
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_MATMUL, .n_rows = m, .n_in = k, .n_out = n,
                                  .wtype = w->type};
    op.src[0] = (struct hx_tensor_ref){src, 0, m, k, sizeof(float) * (size_t)k};
    op.dst = (struct hx_tensor_ref){dst, 0, m, n, sizeof(float) * (size_t)n};
    op.weight = w;
    hx__dev_weight_prepare(dev, w, &op.weight_handle);
    int32_t meta[64] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = m,
                          .tokens = meta, .pos = meta, .seq = meta};
    int bad = hx__dev_run(dev, &sp) != HX_OK;
    for (int64_t r = 0; r < m; r++)
        memcpy(y + r * n, hx_tensor_row(&op.dst, r), sizeof(float) * (size_t)n);
    hx__dev_weight_release(dev, op.weight_handle);
    hx__dev_buffer_free(src);
    hx__dev_buffer_free(dst);
    hx__device_close(dev);
    return bad;
}

TEST(i2_s_fused_parts)
{
    /* I2_S Q|K|V (or gate|up) with a different tensor scale each are fused into one matrix
     * that keeps a scale per part (hx_weight.n_tparts, model-load.c). Its outputs must be the
     * three matrices' own bits: on the x16 tiles, the panels (HX_CPU_REPACK=0), AVX2 and
     * scalar; decode, two rows and prefill. The loader fuses only parts of whole 16s; parts
     * that split a tile (24/40/8) go to the panels, so they are checked where the parts alone
     * take the panels too. */
    static const struct { const char *isa, *repack; } paths[] = {
        {"avx512", "1"}, {"avx512", "0"}, {"avx2", "1"}, {"scalar", "1"}};
    static const int64_t layouts[][3] = {{32, 16, 16}, {24, 40, 8}};
    static const float ts[3] = {TSCALE, 0.5f, 3.0f};
    static const int64_t ms[] = {1, 2, 7};
    const int64_t k = 512;
    const size_t rb = hx_dtype_row_bytes(HX_DTYPE_I2_S, k);
    int ran = 0;
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
        const char *isa = paths[pi].isa;
        if (!use_path(isa, paths[pi].repack)) continue;
        ran++;
        for (size_t li = 0; li < 2; li++) {
            const int64_t *rows = layouts[li], n = rows[0] + rows[1] + rows[2];
            if (li == 1 && !strcmp(isa, "avx512") && !strcmp(paths[pi].repack, "1")) continue;
            uint8_t *wd = malloc(rb * (size_t)n);
            fill_weight(HX_DTYPE_I2_S, wd, n, k);
            struct hx_weight f = {.name = "fused", .type = HX_DTYPE_I2_S, .n_rows = n, .n_cols = k,
                                  .data = wd, .nbytes = rb * (size_t)n, .scale = 0.75f,
                                  .tensor_scale = ts[0], .n_tparts = 3};
            struct hx_weight part[3];
            for (int i = 0; i < 3; i++) {
                f.tpart_row[i + 1] = f.tpart_row[i] + rows[i];
                f.tpart_tscale[i] = ts[i];
                part[i] = (struct hx_weight){.name = "part", .type = HX_DTYPE_I2_S, .n_rows = rows[i],
                                             .n_cols = k, .data = wd + rb * (size_t)f.tpart_row[i],
                                             .nbytes = rb * (size_t)rows[i], .scale = 0.75f,
                                             .tensor_scale = ts[i]};
            }
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                const int64_t m = ms[mi];
                float *x = malloc(sizeof(float) * (size_t)(m * k));
                float *yf = malloc(sizeof(float) * (size_t)(m * n));
                float *yp = malloc(sizeof(float) * (size_t)(m * rows[1] + m * rows[0] + m * rows[2]));
                for (int64_t i = 0; i < m * k; i++) x[i] = rndf();
                if (run_mm(&f, x, m, yf)) HX_FAIL_AT("%s: the fused run failed", isa);
                size_t diff = 0;
                for (int i = 0; i < 3; i++) {
                    if (run_mm(&part[i], x, m, yp)) HX_FAIL_AT("%s: part %d failed", isa, i);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t j = 0; j < rows[i]; j++)
                            diff += memcmp(&yp[r * rows[i] + j], &yf[r * n + f.tpart_row[i] + j], 4) != 0;
                }
                free(x), free(yf), free(yp);
                if (diff)
                    HX_FAIL_AT("%s repack %s parts %lld/%lld/%lld m=%lld: %zu outputs differ from the "
                               "parts' own", isa, paths[pi].repack, (long long)rows[0],
                               (long long)rows[1], (long long)rows[2], (long long)m, diff);
            }
            free(wd);
        }
    }
    unsetenv("HX_CPU_REPACK");
    unsetenv("HX_CPU_ISA");
    if (!ran) SKIP("no path");
}

TEST(matmul_large_gemm)
{
    /* enough rows and columns for the threaded tile loop */
    ASSERT_EQ(check_matmul(HX_DTYPE_Q8_0, 37, 512, 70, 2), 0);
    ASSERT_EQ(check_matmul(HX_DTYPE_TQ2_0, 20, 512, 41, 2), 0);
    ASSERT_EQ(check_matmul(HX_DTYPE_Q1_0, 1, 1024, 300, 2), 0);
}

TEST(matmul_q8_0_amx)
{
    /* The AMX Q8_0 kernel takes the full blocks of 16 rows, the VNNI kernel the rest: both
     * must agree with f64, and with each other bit for bit (same integer dots, same float
     * operations in the same order). */
    setenv("HX_CPU_ISA", "avx512", 1);
    if (!hx__cpu_amx()) {
        unsetenv("HX_CPU_ISA");
        SKIP_NA("no AMX-INT8 (CPU, OS permission or compiler)");
    }
    static const int64_t cases[][3] = {{16, 64, 16}, {37, 512, 70}, {64, 1024, 48}, {80, 96, 33}, {130, 256, 20}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t m = cases[c][0], k = cases[c][1], n = cases[c][2];
        float *y[2];
        for (int amx = 0; amx < 2; amx++) {
            setenv("HX_CPU_AMX", amx ? "1" : "0", 1);
            y[amx] = capture = malloc(sizeof(float) * (size_t)(m * n));
            const uint64_t seed = rng;
            ASSERT_EQ(check_matmul(HX_DTYPE_Q8_0, m, k, n, 2), 0);
            rng = seed;   /* the same weights and inputs for the second path */
        }
        capture = NULL;
        size_t diff = 0;
        for (int64_t i = 0; i < m * n; i++) diff += memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
        free(y[0]), free(y[1]);
        if (diff) HX_FAIL_AT("q8_0 m=%lld k=%lld n=%lld: %zu outputs differ between AMX and VNNI",
                             (long long)m, (long long)k, (long long)n, diff);
    }
    unsetenv("HX_CPU_AMX");
    unsetenv("HX_CPU_ISA");
}

TEST(matmul_q1_0_lookup)
{
    /* The Q1_0 decode by table lookup (VBMI) takes blocks of 4 or 8 tiles lying L apart, then
     * the tiles left over as one block of adjacent tiles, building its tables in the first
     * block (the cases below have no strided block, one, or several, with 0 to 7 tiles left
     * over per thread; 1024x608 on 2 threads: 19 tiles each, 3 left over for 4 and 8 per
     * block): under each walk (HX_CPU_Q1_LUT; "" is this CPU's own, 8:3 or 8:7) it must agree
     * with f64, and with the bit-mask kernel bit for bit (the same integer dot per group, the
     * same float operations in the same order). */
    setenv("HX_CPU_ISA", "avx512", 1);
    unsetenv("HX_CPU_VBMI");
    unsetenv("HX_CPU_Q1_LUT");
    if (!hx__cpu_vbmi()) {
        unsetenv("HX_CPU_ISA");
        SKIP_NA("no AVX-512 VBMI");
    }
    static const int64_t cases[][4] = {
        /* k, n, threads, x_mode */
        {128, 16, 1, 0},   {128, 100, 1, 1},  {256, 130, 2, 2},  {1024, 128, 2, 0},
        {1024, 300, 2, 1}, {2048, 1024, 2, 0}, {3072, 1000, 2, 2}, {1024, 2096, 2, 0},
        {512, 4100, 1, 0}, {1024, 608, 2, 0},
    };
    static const char *const walks[] = {"", "4:4", "4:0", "8:1", "8:7"};
    enum { NW = sizeof walks / sizeof walks[0] };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t k = cases[c][0], n = cases[c][1];
        float *y[1 + NW];
        x_mode = (int)cases[c][3];
        for (int v = 0; v <= NW; v++) { /* 0: bit-mask, then the lookup under each walk */
            setenv("HX_CPU_VBMI", v ? "1" : "0", 1);
            if (v && walks[v - 1][0]) setenv("HX_CPU_Q1_LUT", walks[v - 1], 1);
            else unsetenv("HX_CPU_Q1_LUT");
            y[v] = capture = malloc(sizeof(float) * (size_t)n);
            const uint64_t seed = rng;
            /* no early return: capture and the environment are reset below either way */
            if (check_matmul(HX_DTYPE_Q1_0, 1, k, n, (int)cases[c][2]))
                HX_FAIL_AT("q1_0 k=%lld n=%lld %s%s: against f64", (long long)k, (long long)n,
                           v ? "lookup walk " : "bit-mask", v ? walks[v - 1] : "");
            rng = seed;
        }
        capture = NULL;
        x_mode = 0;
        for (int v = 1; v <= NW; v++) {
            size_t diff = 0;
            for (int64_t i = 0; i < n; i++) diff += memcmp(&y[0][i], &y[v][i], sizeof(float)) != 0;
            if (diff)
                HX_FAIL_AT("q1_0 k=%lld n=%lld walk '%s': %zu outputs differ between lookup and bit-mask",
                           (long long)k, (long long)n, walks[v - 1], diff);
        }
        for (int v = 0; v <= NW; v++) free(y[v]);
    }
    unsetenv("HX_CPU_Q1_LUT");
    unsetenv("HX_CPU_VBMI");
    unsetenv("HX_CPU_ISA");
}

TEST(matmul_split_bit_identical)
{
    /* The pool hands the tiles out in chunks that idle threads steal (core/pool.h), so which
     * thread computes which tile changes from call to call. Every output must still be the
     * same bits as on one thread: one tile per chunk, odd chunk sizes, and more threads than
     * this machine has cores (so threads are descheduled and their shares stolen). Paths: the
     * x16 tiles (AVX-512), the GGUF rows with the fused AVX-512 GEMV (no repack), and the
     * AVX2 panels. */
    static const struct { const char *isa, *repack; } paths[] = {
        {"avx512", "1"}, {"avx512", "0"}, {"avx2", "1"}};
    static const enum hx_dtype types[] = {HX_DTYPE_Q8_0, HX_DTYPE_TQ2_0, HX_DTYPE_Q4_K,
                                          HX_DTYPE_Q6_K, HX_DTYPE_TQ1_0, HX_DTYPE_Q1_0};
    static const int64_t shapes[][3] = {{1, 1024, 1000}, {2, 512, 515}, {37, 512, 300}};
    static const struct { const char *chunk; int threads; } splits[] = {
        {"1:1", 2}, {"5:7", 2}, {"1:3", 4}, {"3:1", 3}, {"", 2}};
    enum { NS = sizeof splits / sizeof splits[0] };
    int ran = 0;
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
        const bool v512 = !strcmp(paths[pi].isa, "avx512");
        if (v512 ? !__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")
                 : !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
            continue;
        ran++;
        setenv("HX_CPU_ISA", paths[pi].isa, 1);
        setenv("HX_CPU_REPACK", paths[pi].repack, 1);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                const enum hx_dtype t = types[ti];
                const int64_t m = shapes[si][0], k = shapes[si][1], n = shapes[si][2];
                float *y[1 + NS];
                for (int v = 0; v <= NS; v++) { /* 0: one thread, then each split */
                    if (v && splits[v - 1].chunk[0]) setenv("HX_CPU_CHUNK_KIB", splits[v - 1].chunk, 1);
                    else unsetenv("HX_CPU_CHUNK_KIB");
                    y[v] = capture = malloc(sizeof(float) * (size_t)(m * n));
                    const uint64_t seed = rng;
                    if (check_matmul(t, m, k, n, v ? splits[v - 1].threads : 1))
                        HX_FAIL_AT("%s %s m=%lld split %d: against f64", paths[pi].isa,
                                   hx_dtype_name(t), (long long)m, v);
                    rng = seed; /* the same weights and inputs for every split */
                }
                capture = NULL;
                for (int v = 1; v <= NS; v++) {
                    size_t diff = 0;
                    for (int64_t i = 0; i < m * n; i++) diff += memcmp(&y[0][i], &y[v][i], sizeof(float)) != 0;
                    if (diff)
                        HX_FAIL_AT("%s repack %s %s m=%lld k=%lld n=%lld chunk '%s' on %d threads: "
                                   "%zu outputs differ from one thread", paths[pi].isa,
                                   paths[pi].repack, hx_dtype_name(t), (long long)m, (long long)k,
                                   (long long)n, splits[v - 1].chunk, splits[v - 1].threads, diff);
                }
                for (int v = 0; v <= NS; v++) free(y[v]);
            }
    }
    unsetenv("HX_CPU_CHUNK_KIB");
    unsetenv("HX_CPU_REPACK");
    unsetenv("HX_CPU_ISA");
    if (!ran) SKIP("no AVX2 or AVX-512 VNNI");
}

/* ---- other ops --------------------------------------------------------------------------- */

struct opbufs {
    struct hx_device *dev;
    struct hx_buffer *b;
};

static struct hx_tensor_ref mkref(struct hx_buffer *b, size_t off, int64_t rows, int64_t cols, int64_t stride)
{
    return (struct hx_tensor_ref){b, off, rows, cols, sizeof(float) * (size_t)stride};
}

TEST(rms_norm_group_strided)
{
    struct hx_device *dev = open_cpu(2);
    ASSERT_TRUE(dev != NULL);
    const int64_t n = 5, d = 256, g = 64, st = 300;
    struct hx_buffer *b;
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(2 * n * st), &b));
    float *x = b->host;
    for (int64_t i = 0; i < n * st; i++) x[i] = rndf() * 3;
    float gain[64];
    for (int i = 0; i < 64; i++) gain[i] = 0.5f + rndf();
    struct hx_weight gw = {.name = "g", .type = HX_DTYPE_F32, .n_rows = 1, .n_cols = g, .data = gain,
                           .nbytes = sizeof gain, .scale = 1};
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_RMS_NORM, .n_rows = n, .n_in = d, .n_out = d,
                                  .wtype = HX_DTYPE_F32};
    op.desc.p.norm.eps = 1e-6f, op.desc.p.norm.group = g;
    op.src[0] = mkref(b, 0, n, d, st);
    op.dst = mkref(b, sizeof(float) * (size_t)(n * st), n, d, st);
    op.weight = &gw;
    int32_t meta[8] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = n, .tokens = meta, .pos = meta, .seq = meta};
    ASSERT_OK(hx__dev_run(dev, &sp));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c0 = 0; c0 < d; c0 += g) {
            double ss = 0;
            for (int64_t c = 0; c < g; c++) ss += (double)x[r * st + c0 + c] * x[r * st + c0 + c];
            double s = 1.0 / sqrt(ss / g + 1e-6);
            for (int64_t c = 0; c < g; c++)
                ASSERT_NEAR(x[n * st + r * st + c0 + c], x[r * st + c0 + c] * s * gain[c], 1e-4);
        }
    hx__dev_buffer_free(b);
    hx__device_close(dev);
}

static void rope_case(enum hx_rope_mode mode, bool freqs)
{
    struct hx_device *dev = open_cpu(2);
    ASSERT_TRUE(dev != NULL);
    const int nh = 3, hd = 16, nrot = 12;
    const int64_t n = 4, w = nh * hd;
    struct hx_buffer *b;
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(n * w), &b));
    float *x = b->host, orig[4 * 48];
    for (int64_t i = 0; i < n * w; i++) orig[i] = x[i] = rndf();
    float ff[6] = {1, 2, 3, 1.5f, 4, 8};
    struct hx_weight fw = {.name = "f", .type = HX_DTYPE_F32, .n_rows = 1, .n_cols = 6, .data = ff, .nbytes = sizeof ff, .scale = 1};
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_ROPE, .n_rows = n, .n_in = w, .n_out = w};
    op.desc.p.rope.n_head = nh, op.desc.p.rope.head_dim = hd, op.desc.p.rope.n_rot = nrot;
    op.desc.p.rope.base = 10000.0f, op.desc.p.rope.freq_scale = 0.5f, op.desc.p.rope.mode = mode;
    op.src[0] = mkref(b, 0, n, w, w);
    op.dst = op.src[0];  /* in place */
    op.aux = freqs ? &fw : NULL;
    int32_t pos[4] = {0, 3, 17, 250}, z[4] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = n, .tokens = z, .pos = pos, .seq = z};
    ASSERT_OK(hx__dev_run(dev, &sp));
    for (int64_t r = 0; r < n; r++)
        for (int h = 0; h < nh; h++) {
            const float *o = orig + r * w + h * hd, *y = x + r * w + h * hd;
            for (int i = 0; i < nrot / 2; i++) {
                double th = pos[r] * pow(10000.0, -2.0 * i / nrot) / (freqs ? ff[i] : 1) * 0.5;
                int i0 = mode == HX_ROPE_NEOX ? i : 2 * i, i1 = mode == HX_ROPE_NEOX ? i + nrot / 2 : 2 * i + 1;
                ASSERT_NEAR(y[i0], o[i0] * cos(th) - o[i1] * sin(th), 2e-3);
                ASSERT_NEAR(y[i1], o[i0] * sin(th) + o[i1] * cos(th), 2e-3);
            }
            for (int i = nrot; i < hd; i++) ASSERT_NEAR(y[i], o[i], 0);
        }
    hx__dev_buffer_free(b);
    hx__device_close(dev);
}

TEST(rope_neox_freqs) { rope_case(HX_ROPE_NEOX, true); }
TEST(rope_norm) { rope_case(HX_ROPE_NORM, false); }

TEST(attn_gqa_two_seqs)
{
    struct hx_device *dev = open_cpu(2);
    ASSERT_TRUE(dev != NULL);
    const int nh = 4, nkv = 2, hd = 8, nctx = 8, nseq = 2;
    const int64_t n = 3, wq = nh * hd, wk = nkv * hd;
    struct hx_buffer *bq, *bk, *bv, *kc, *vc, *bo;
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * n * wq, &bq));
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * n * wk, &bk));
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * n * wk, &bv));
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * nseq * nctx * wk, &kc));
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * nseq * nctx * wk, &vc));
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * n * wq, &bo));
    float *q = bq->host, *k = bk->host, *v = bv->host, *K = kc->host, *V = vc->host, *o = bo->host;
    for (int64_t i = 0; i < n * wq; i++) q[i] = rndf();
    for (int64_t i = 0; i < n * wk; i++) k[i] = rndf(), v[i] = rndf();
    for (int64_t i = 0; i < nseq * nctx * wk; i++) K[i] = rndf(), V[i] = rndf();  /* old positions */
    int32_t pos[3] = {2, 3, 0}, seq[3] = {1, 1, 0};
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_ATTN, .n_rows = n, .n_in = wq, .n_out = wq};
    op.desc.p.attn.n_head = nh, op.desc.p.attn.n_head_kv = nkv, op.desc.p.attn.head_dim = hd;
    op.desc.p.attn.scale = 0.35f, op.desc.p.attn.n_ctx = nctx, op.desc.p.attn.n_seq = nseq;
    op.src[0] = mkref(bq, 0, n, wq, wq), op.src[1] = mkref(bk, 0, n, wk, wk), op.src[2] = mkref(bv, 0, n, wk, wk);
    op.k_cache = mkref(kc, 0, nseq * nctx, wk, wk), op.v_cache = mkref(vc, 0, nseq * nctx, wk, wk);
    op.dst = mkref(bo, 0, n, wq, wq);
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = n, .tokens = pos, .pos = pos, .seq = seq};
    ASSERT_OK(hx__dev_run(dev, &sp));
    for (int64_t r = 0; r < n; r++) {
        for (int c = 0; c < wk; c++) ASSERT_NEAR(K[(seq[r] * nctx + pos[r]) * wk + c], k[r * wk + c], 0);
        for (int h = 0; h < nh; h++) {
            int kvh = h / (nh / nkv);
            double s[8], mx = -1e30, sum = 0;
            for (int t = 0; t <= pos[r]; t++) {
                double dd = 0;
                for (int i = 0; i < hd; i++) dd += q[r * wq + h * hd + i] * K[(seq[r] * nctx + t) * wk + kvh * hd + i];
                s[t] = 0.35 * dd, mx = fmax(mx, s[t]);
            }
            for (int t = 0; t <= pos[r]; t++) s[t] = exp(s[t] - mx), sum += s[t];
            for (int i = 0; i < hd; i++) {
                double acc = 0;
                for (int t = 0; t <= pos[r]; t++) acc += s[t] / sum * V[(seq[r] * nctx + t) * wk + kvh * hd + i];
                ASSERT_NEAR(o[r * wq + h * hd + i], acc, 1e-5);
            }
        }
    }
    hx__dev_buffer_free(bq), hx__dev_buffer_free(bk), hx__dev_buffer_free(bv);
    hx__dev_buffer_free(kc), hx__dev_buffer_free(vc), hx__dev_buffer_free(bo);
    hx__device_close(dev);
}

TEST(glu_and_add_in_place)
{
    struct hx_device *dev = open_cpu(2);
    ASSERT_TRUE(dev != NULL);
    const int64_t n = 3, f = 50;
    struct hx_buffer *b;
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(3 * n * f), &b));
    float *g = b->host, *u = g + n * f, *y = u + n * f, g0[150], u0[150];
    for (int64_t i = 0; i < n * f; i++) g0[i] = g[i] = rndf() * 4, u0[i] = u[i] = rndf();
    struct hx_op ops[3];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 3; i++) {
        ops[i].desc = (struct hx_op_desc){.n_rows = n, .n_in = f, .n_out = f};
        ops[i].src[0] = mkref(b, 0, n, f, f), ops[i].src[1] = mkref(b, sizeof(float) * n * f, n, f, f);
        ops[i].dst = mkref(b, sizeof(float) * 2 * n * f, n, f, f);
    }
    ops[0].desc.kind = HX_OP_SWIGLU;
    ops[1].desc.kind = HX_OP_RELU2_GLU;
    ops[1].dst = ops[1].src[1];       /* into up, in place */
    ops[2].desc.kind = HX_OP_ADD;
    ops[2].dst = ops[2].src[0];       /* gate += up', in place */
    int32_t z[4] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = ops, .n_ops = 3, .n_rows = n, .tokens = z, .pos = z, .seq = z};
    ASSERT_OK(hx__dev_run(dev, &sp));
    for (int64_t i = 0; i < n * f; i++) {
        float sw = g0[i] / (1 + expf(-g0[i])) * u0[i];
        float r2 = (g0[i] > 0 ? g0[i] * g0[i] : 0) * u0[i];
        ASSERT_NEAR(y[i], sw, 1e-5);
        ASSERT_NEAR(u[i], r2, 1e-5);
        ASSERT_NEAR(g[i], g0[i] + r2, 1e-5);
    }
    hx__dev_buffer_free(b);
    hx__device_close(dev);
}

TEST(embed_rows)
{
    struct hx_device *dev = open_cpu(1);
    ASSERT_TRUE(dev != NULL);
    const int64_t vocab = 10, d = 64;
    size_t rb = hx_dtype_row_bytes(HX_DTYPE_Q8_0, d);
    uint8_t wd[10 * 68];
    fill_weight(HX_DTYPE_Q8_0, wd, vocab, d);
    struct hx_weight w = {.name = "e", .type = HX_DTYPE_Q8_0, .n_rows = vocab, .n_cols = d, .data = wd, .nbytes = sizeof wd, .scale = 1};
    struct hx_buffer *b;
    ASSERT_OK(hx__dev_buffer_alloc(dev, sizeof(float) * 3 * d, &b));
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_EMBED, .n_rows = 3, .n_in = d, .n_out = d, .wtype = HX_DTYPE_Q8_0};
    op.dst = mkref(b, 0, 3, d, d);
    op.weight = &w;
    int32_t tok[3] = {7, 0, 9}, z[3] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = 3, .tokens = tok, .pos = z, .seq = z};
    ASSERT_OK(hx__dev_run(dev, &sp));
    float ref[64];
    for (int r = 0; r < 3; r++) {
        hx_dequantize_row(HX_DTYPE_Q8_0, wd + rb * tok[r], ref, d);
        for (int c = 0; c < d; c++) ASSERT_NEAR(((float *)b->host)[r * d + c], ref[c], 0);
    }
    tok[1] = 10;  /* out of range: refused with an error, not a crash */
    ASSERT_NE(hx__dev_run(dev, &sp), 0);
    hx__dev_buffer_free(b);
    hx__device_close(dev);
}

TEST_MAIN()
