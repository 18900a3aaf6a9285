/*
 * test-hip-mma.cpp — the HIP prefill GEMM's kernels (backends/hip/hip-mma.h, hip-kernels.h)
 * and the emulator's matrix fragment ops, built from the kernel headers with the host C++
 * compiler (HX_HIP_EMU) and run on hip-emu.cpp, whatever GPU compilers the machine has.
 *
 *   fragments  each fragment op (NVIDIA mma m16n8k16 f16, m16n8k32 s8, AMD RDNA3 WMMA f16 and
 *              iu8, RDNA4 WMMA f16 and iu8) fed known matrices through the layouts written out
 *              here from the PTX ISA tables and AMD's WMMA layouts (docs/hip.md), D checked
 *              exactly; the same with two registers (or two lanes' registers) swapped must come
 *              out wrong; RDNA3 WMMA lanes 16-31 that do not repeat lanes 0-15 must fault the
 *              launch. This pins the emulator's layouts.
 *   gemm       hx_hip_gemm_tc on every path (mma f16, mma int8, wmma f16) and hx_hip_gemm_wmma
 *              on its own (RDNA3 wmma int8, RDNA4 wmma f16 and int8), and the SIMT
 *              hx_hip_gemm for every weight type it takes, at m not a multiple of 16, N = 1, 65,
 *              130 and K of one, three and five blocks (odd K for F16), against (a) a double
 *              reference that rounds as the path does (f16 operands, or Q8_0-style int8
 *              activations per 32-block): within 4·K·u·Σ|terms|, f32 accumulation only; and (b)
 *              the exact double reference: within 7σ of the path's rounding error, σ² = Σ_k
 *              w_k²·δ_k² + x_k²·φ_k² with δ, φ the activation / weight rounding's variance
 *              (f16: (ulp)²/12 of each operand; int8: d²/12, d = block amax / 127), plus the
 *              f32 floor (m > 128: every 8th row and the last checked).
 *   qwen       (Release only) Qwen3-0.6B's 1024 -> 3072 (Q8_0, mma int8) and 3072 -> 1024
 *              (TQ2_0, mma int8; F16, wmma) at m = 512.
 *
 * Usage: test-hip-mma [fragments|gemm|qwen|float]... (float: the float-weight gemm cases
 * alone); exit 1 on a failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip-kernels.h"
#include "hip-mma.h"

static int g_fail;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            g_fail = 1;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (uint32_t)(g_seed >> 16);
}
static float frand(void) /* [-1, 1) */
{
    return (float)(rnd() % 65536) / 32768.0f - 1.0f;
}

template <typename X> static X *dev_copy(const X *h, size_t n)
{
    void *p = NULL;
    if (hipMalloc(&p, n * sizeof(X)) != hipSuccess) abort();
    if (h) hipMemcpyAsync(p, h, n * sizeof(X), hipMemcpyHostToDevice, NULL);
    return (X *)p;
}

/* ---- fragments ------------------------------------------------------------------------------ */

/* AMD WMMA beyond RDNA3's f16 (kinds HX_EMU_WMMA_I8, _WMMA12_F16, _WMMA12_I8), lane l of one
 * warp: A, B, C (16 x 16, row-major) into the registers by the layouts of docs/hip.md, written
 * here from AMD's RDNA3 / RDNA4 ISA guides (h = l / 16, r = l % 16): RDNA3 int8 A byte e = A[r][e],
 * B byte e = B[e][r], D v at row 2v + h; RDNA4 element e = A[r][8h + e] / B[8h + e][r], D v at
 * row 8h + v. bad 1: lanes 1 and 17 (RDNA3 int8: A transposed, as the f16 case) exchange their A
 * registers; bad 2 (RDNA3 int8): lane 16's A differs from lane 0's. */
static __device__ void amd_frag(int kind, int bad, int l, const float *A, const float *B,
                                const float *C, float *D)
{
    const bool rdna4 = kind != HX_EMU_WMMA_I8;
    /* whose A this lane loads */
    const int la = bad == 1 && rdna4 && (l == 1 || l == 17) ? l ^ 16 : l;
    const int h = l / 16, r = l % 16, ha = la / 16;
    float d[8];
    for (int v = 0; v < 8; v++) d[v] = C[(rdna4 ? 8 * h + v : 2 * v + h) * 16 + r];
    if (kind == HX_EMU_WMMA12_F16) {
        uint16_t a[8], b[8];
        for (int e = 0; e < 8; e++)
            a[e] = hx_hip_f2h(A[r * 16 + 8 * ha + e]), b[e] = hx_hip_f2h(B[(8 * h + e) * 16 + r]);
        hx_hip_wmma12_f16(d, a, b);
    } else {
        uint32_t a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
        int di[8];
        for (int v = 0; v < 8; v++) di[v] = (int)d[v];
        const int ne = rdna4 ? 8 : 16;
        for (int e = 0; e < ne; e++) {
            const int k = rdna4 ? 8 * ha + e : e, kb = rdna4 ? 8 * h + e : e;
            const float av = !rdna4 && bad == 1 ? A[k * 16 + r] : A[r * 16 + k];
            a[e / 4] |= (uint32_t)(uint8_t)(int8_t)av << 8 * (e % 4);
            b[e / 4] |= (uint32_t)(uint8_t)(int8_t)B[kb * 16 + r] << 8 * (e % 4);
        }
        if (bad == 2 && l >= 16) a[0] ^= 1;
        if (kind == HX_EMU_WMMA_I8)
            hx_hip_wmma_i8(di, a, b);
        else
            hx_hip_wmma12_i8(di, a, b);
        for (int v = 0; v < 8; v++) d[v] = (float)di[v];
    }
    for (int v = 0; v < 8; v++) D[(rdna4 ? 8 * h + v : 2 * v + h) * 16 + r] = d[v];
}

/* One warp: A, B, C (row-major floats, exact small integers) into the registers of `kind` by
 * the documented layout, the op, D out by the same layout. bad: swap A registers 1 and 2
 * (MMA) or lane 16's A row (WMMA: rows 16-31 of the replicated half; 2 = break the copy). */
__global__ void frag_kernel(int kind, int bad, const float *A, const float *B, const float *C,
                            float *D)
{
    const int l = threadIdx.x, g = l / 4, t = l % 4;
    if (kind == HX_EMU_MMA_F16) { /* A 16x16, B 16x8 (k, n), C/D 16x8 */
        uint32_t a[4], b[2];
        float d[4];
        for (int i = 0; i < 4; i++) {
            const int r = g + 8 * (i & 1), c = 2 * t + 8 * (i >> 1);
            a[i] = hx_hip_f2h(A[r * 16 + c]) | (uint32_t)hx_hip_f2h(A[r * 16 + c + 1]) << 16;
        }
        for (int i = 0; i < 2; i++) {
            const int k = 2 * t + 8 * i;
            b[i] = hx_hip_f2h(B[k * 8 + g]) | (uint32_t)hx_hip_f2h(B[(k + 1) * 8 + g]) << 16;
        }
        for (int i = 0; i < 4; i++) d[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
        if (bad) {
            const uint32_t x = a[1];
            a[1] = a[2], a[2] = x;
        }
        hx_hip_mma_f16(d, a, b);
        for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
    } else if (kind == HX_EMU_MMA_S8) { /* A 16x32, B 32x8 */
        uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
        int d[4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                const int r = g + 8 * (i & 1), c = 4 * t + 16 * (i >> 1) + j;
                a[i] |= (uint32_t)(uint8_t)(int8_t)A[r * 32 + c] << 8 * j;
            }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                b[i] |= (uint32_t)(uint8_t)(int8_t)B[(4 * t + 16 * i + j) * 8 + g] << 8 * j;
        for (int i = 0; i < 4; i++) d[i] = (int)C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
        if (bad) {
            const uint32_t x = a[1];
            a[1] = a[2], a[2] = x;
        }
        hx_hip_mma_s8(d, a, b);
        for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = (float)d[i];
    } else if (kind == HX_EMU_WMMA_I8 || kind == HX_EMU_WMMA12_F16 || kind == HX_EMU_WMMA12_I8) {
        amd_frag(kind, bad, l, A, B, C, D);
    } else { /* WMMA: A, B, C/D 16x16 */
        uint16_t a[16], b[16];
        float d[8];
        for (int e = 0; e < 16; e++) {
            a[e] = hx_hip_f2h(bad == 1 ? A[e * 16 + l % 16] : A[(l % 16) * 16 + e]);
            b[e] = hx_hip_f2h(B[e * 16 + l % 16]);
        }
        if (bad == 2 && l >= 16) a[0] ^= 1;
        for (int v = 0; v < 8; v++) d[v] = C[(2 * v + l / 16) * 16 + l % 16];
        hx_hip_wmma_f16(d, a, b);
        for (int v = 0; v < 8; v++) D[(2 * v + l / 16) * 16 + l % 16] = d[v];
    }
}

/* Runs a fragment test kernel on A, B, C (M x K, K x N, M x N, row-major; na, nb, nc floats
 * copied to the device) and compares its D with the double reference C + A.B: returns the
 * launch status, *exact whether D equals the reference. */
typedef void (*frag_fn)(int, int, const float *, const float *, const float *, float *);
static hipError_t frag_launch(frag_fn kernel, int kind, int bad, const float *A, size_t na,
                              const float *B, size_t nb, const float *C, size_t nc, int M, int N,
                              int K, bool *exact)
{
    float R[16 * 16], D[16 * 16];
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            double s = C[r * N + c];
            for (int k = 0; k < K; k++) s += (double)A[r * K + k] * B[k * N + c];
            R[r * N + c] = (float)s;
        }
    float *dA = dev_copy(A, na), *dB = dev_copy(B, nb), *dC = dev_copy(C, nc),
          *dD = dev_copy<float>(NULL, nc);
    hipError_t e = hx_hip_launch(kernel, dim3(1), dim3(32), NULL, kind, bad, (const float *)dA,
                                 (const float *)dB, (const float *)dC, dD);
    hipMemcpyAsync(D, dD, nc * sizeof(float), hipMemcpyDeviceToHost, NULL);
    *exact = e == hipSuccess && !memcmp(D, R, (size_t)(M * N) * sizeof(float));
    hipFree(dA), hipFree(dB), hipFree(dC), hipFree(dD);
    return e;
}

/* Runs one fragment op; returns the launch status, *exact whether D == A.B + C. */
static hipError_t frag_run(int kind, int bad, bool *exact)
{
    const bool amd =
        kind == HX_EMU_WMMA_I8 || kind == HX_EMU_WMMA12_F16 || kind == HX_EMU_WMMA12_I8;
    const int M = 16, N = kind == HX_EMU_WMMA_F16 || amd ? 16 : 8,
              K = kind == HX_EMU_MMA_S8 ? 32 : 16;
    float A[16 * 32], B[32 * 16], C[16 * 16];
    /* s8: -127..127; f16: exact sums */
    const bool i8 = kind == HX_EMU_MMA_S8 || kind == HX_EMU_WMMA_I8 || kind == HX_EMU_WMMA12_I8;
    const int span = i8 ? 255 : 17;
    for (int i = 0; i < M * K; i++) A[i] = (float)((int)(rnd() % span) - span / 2);
    for (int i = 0; i < K * N; i++) B[i] = (float)((int)(rnd() % span) - span / 2);
    for (int i = 0; i < M * N; i++) C[i] = (float)((int)(rnd() % 101) - 50);
    return frag_launch(frag_kernel, kind, bad, A, 16 * 32, B, 32 * 16, C, 256, M, N, K, exact);
}

static void test_fragments(void)
{
    static const char *const names[] = {"mma m16n8k16 f16", "mma m16n8k32 s8", "wmma 16x16x16 f16"};
    for (int kind = 0; kind < 3; kind++) {
        bool exact = false;
        hipError_t e = frag_run(kind, 0, &exact);
        CHECK(e == hipSuccess && exact, "%s: D != A.B + C through the documented layout (%s)",
              names[kind], hipGetErrorString(e));
        e = frag_run(kind, 1, &exact);
        CHECK(e == hipSuccess && !exact, "%s: a misplaced A register still gave the right D",
              names[kind]);
        printf("ok   fragments %s\n", names[kind]);
    }
    bool exact = true;
    const hipError_t e = frag_run(HX_EMU_WMMA_F16, 2, &exact);
    CHECK(e == hipErrorLaunchFailure && strstr(hx_emu_last_message(), "lanes 16-31"),
          "wmma with lanes 16-31 not repeating 0-15: %s / %s", hipGetErrorName(e),
          hx_emu_last_message());
    printf("ok   fragments wmma half-wave replication fault: %s\n", hx_emu_last_message());
    /* AMD WMMA beyond RDNA3's f16 */
    static const struct {
        int kind;
        const char *name;
    } amd[] = {{HX_EMU_WMMA_I8, "wmma 16x16x16 iu8 (RDNA3)"},
               {HX_EMU_WMMA12_F16, "wmma 16x16x16 f16 (RDNA4)"},
               {HX_EMU_WMMA12_I8, "wmma 16x16x16 iu8 (RDNA4)"}};
    for (const auto &a : amd) {
        bool ok = false;
        hipError_t e2 = frag_run(a.kind, 0, &ok);
        CHECK(e2 == hipSuccess && ok, "%s: D != A.B + C through the documented layout (%s)", a.name,
              hipGetErrorString(e2));
        e2 = frag_run(a.kind, 1, &ok);
        CHECK(e2 == hipSuccess && !ok, "%s: misplaced A registers still gave the right D", a.name);
        printf("ok   fragments %s\n", a.name);
    }
    exact = true;
    const hipError_t e3 = frag_run(HX_EMU_WMMA_I8, 2, &exact);
    CHECK(e3 == hipErrorLaunchFailure && strstr(hx_emu_last_message(), "lanes 16-31"),
          "wmma iu8 with lanes 16-31 not repeating 0-15: %s / %s", hipGetErrorName(e3),
          hx_emu_last_message());
    printf("ok   fragments wmma iu8 half-wave replication fault: %s\n", hx_emu_last_message());
}

/* ---- gemm ----------------------------------------------------------------------------------- */

static uint16_t f2h_host(float x)
{
    return hx_emu_f2h(x);
}

/* A random weight of N rows of K values of type T: random code bytes, block scales set to
 * f16 values in [0.01, 0.1) (float types: every element in [-1, 1)). */
template <int T> static uint8_t *make_weight(int64_t N, int64_t K, int64_t *row_bytes)
{
    typedef hx_hip_blk<T> G;
    *row_bytes = K / G::E * G::B;
    const size_t n = (size_t)(N * *row_bytes);
    uint8_t *w = (uint8_t *)malloc(n);
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)rnd();
    auto put = [&](uint8_t *p, float v) {
        const uint16_t h = f2h_host(v);
        memcpy(p, &h, 2);
    };
    const int64_t nb = K / G::E;
    for (int64_t r = 0; r < N; r++) {
        uint8_t *row = w + r * *row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = row + b * G::B;
            const float s = 0.01f + 0.09f * (float)(rnd() % 1000) / 1000.0f;
            switch (T) {
            case HX_DTYPE_F32: {
                const float v = frand();
                memcpy(p, &v, 4);
                break;
            }
            case HX_DTYPE_BF16: {
                const float v = frand();
                uint32_t u;
                memcpy(&u, &v, 4);
                const uint16_t h = (uint16_t)(u >> 16);
                memcpy(p, &h, 2);
                break;
            }
            case HX_DTYPE_F16: put(p, frand()); break;
            case HX_DTYPE_Q4_K: put(p, s), put(p + 2, 0.5f * s); break;
            case HX_DTYPE_Q6_K: put(p + 208, 0.1f * s); break;
            case HX_DTYPE_TQ2_0: put(p + 64, s); break;
            case HX_DTYPE_TQ1_0: put(p + 52, s); break;
            case HX_DTYPE_I2_S: break;
            default: put(p, s); break; /* Q8_0, Q4_0, Q1_0, Q2_0: d first */
            }
        }
    }
    return w;
}

static const char *path_name(int P)
{
    switch (P) {
    case HX_HIP_TC_SIMT: return "simt";
    case HX_HIP_TC_MMA_F16: return "mma-f16";
    case HX_HIP_TC_MMA_S8: return "mma-s8";
    case HX_HIP_TC_WMMA_F16: return "wmma-f16";
    case HX_HIP_TC_WMMA_I8: return "wmma-i8";
    case HX_HIP_TC_WMMA12_F16: return "wmma12-f16";
    case HX_HIP_TC_WMMA12_I8: return "wmma12-i8";
    default: return "?";
    }
}

struct gemm_result {
    double worst_rounded, worst_exact; /* largest |err| / allowed of each comparison */
};

/* Runs the GEMM of weight type T on kernel path P (HX_HIP_TC_*; SIMT = hx_hip_gemm) at (m, N,
 * K) and compares as the file's comment says. */
template <int T> static void gemm_case(int P, int64_t m, int64_t N, int64_t K)
{
    int64_t rb = 0;
    uint8_t *w = make_weight<T>(N, K, &rb);
    const float ts = 0.05f, scale = 0.75f;
    float *x = (float *)malloc((size_t)(m * K) * sizeof(float));
    for (int64_t i = 0; i < m * K; i++) x[i] = frand() * (rnd() % 61 == 0 ? 20.0f : 1.0f);
    const bool i8 = hx_hip_tc_int8_path(P);
    uint8_t *dW = dev_copy(w, (size_t)(N * rb));
    float *dx = dev_copy(x, (size_t)(m * K)), *dy = dev_copy<float>(NULL, (size_t)(m * N));
    int8_t *daq = dev_copy<int8_t>(NULL, (size_t)(m * K));
    float2 *dad = dev_copy<float2>(NULL, (size_t)(m * (K / 32) + 1));
    hipError_t e = hipSuccess;
    if (i8)
        e = hx_hip_launch(hx_hip_quantize_q8, dim3((unsigned)((K / 32 + 7) / 8), (unsigned)m),
                          dim3(256), NULL, (const float *)dx, K, K, (int)m, daq, dad);
    const dim3 g((unsigned)((N + HX_HIP_BN - 1) / HX_HIP_BN),
                 (unsigned)((m + HX_HIP_BM - 1) / HX_HIP_BM));
    const int kvec = K % 8 == 0;
    if (e == hipSuccess) {
        if constexpr (T != HX_DTYPE_F32 && T != HX_DTYPE_BF16) {
            if (P == HX_HIP_TC_MMA_F16)
                e = hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_MMA_F16>, g, dim3(256), NULL, dW, rb,
                                  N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
            if (P == HX_HIP_TC_WMMA_F16)
                e = hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_WMMA_F16>, g, dim3(256), NULL, dW,
                                  rb, N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
            if constexpr (hx_hip_tc_int8(T))
                if (P == HX_HIP_TC_MMA_S8)
                    e = hx_hip_launch(hx_hip_gemm_tc<T, HX_HIP_TC_MMA_S8>, g, dim3(256), NULL, dW,
                                      rb, N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
            /* AMD WMMA beyond RDNA3's f16 */
            if (P == HX_HIP_TC_WMMA12_F16)
                e = hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA12_F16>, g, dim3(256), NULL,
                                  dW, rb, N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
            if constexpr (hx_hip_tc_int8(T)) {
                if (P == HX_HIP_TC_WMMA_I8)
                    e = hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA_I8>, g, dim3(256), NULL,
                                      dW, rb, N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
                if (P == HX_HIP_TC_WMMA12_I8)
                    e = hx_hip_launch(hx_hip_gemm_wmma<T, HX_HIP_TC_WMMA12_I8>, g, dim3(256), NULL,
                                      dW, rb, N, K, dx, K, daq, dad, m, dy, N, scale, kvec, ts);
            }
        }
        if (P == HX_HIP_TC_SIMT)
            e = hx_hip_launch(hx_hip_gemm<T>, g, dim3(256), NULL, dW, rb, N, K, dx, K, m, dy, N,
                              scale, kvec, ts);
    }
    float *y = (float *)malloc((size_t)(m * N) * sizeof(float));
    hipMemcpyAsync(y, dy, (size_t)(m * N) * sizeof(float), hipMemcpyDeviceToHost, NULL);
    const char *const pn = path_name(P);
    CHECK(e == hipSuccess, "%s T=%d m=%lld N=%lld K=%lld: launch %s (%s)", pn, T, (long long)m,
          (long long)N, (long long)K, hipGetErrorName(e), hx_emu_last_message());
    /* the activations as the path sees them, and their rounding variance per element */
    float *xr = (float *)malloc((size_t)(m * K) * sizeof(float));
    double *xv = (double *)malloc((size_t)(m * K) * sizeof(double));
    for (int64_t r = 0; r < m; r++)
        for (int64_t b = 0; b < K; b += 32) {
            const int64_t n = HX_MIN((int64_t)32, K - b);
            const float *xb = x + r * K + b;
            float amax = 0.0f;
            for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(xb[i]));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int i = 0; i < n; i++) {
                const int64_t at = r * K + b + i;
                if (i8) {
                    xr[at] = d * roundf(xb[i] * id);
                    xv[at] = (double)d * d / 12.0;
                } else if (P == HX_HIP_TC_SIMT) {
                    xr[at] = xb[i], xv[at] = 0.0;
                } else {
                    xr[at] = hx_hip_h2f(f2h_host(xb[i]));
                    const double ulp = ldexp(1.0, ilogb(fmax(fabs(xb[i]), 6.2e-5)) - 10);
                    xv[at] = ulp * ulp / 12.0;
                }
            }
        }
    double worst_r = 0.0, worst_x = 0.0;
    int64_t wr = 0, wc = 0;
    float *wrow = (float *)malloc((size_t)K * sizeof(float)),
          *wround = (float *)malloc((size_t)K * sizeof(float));
    double *wv = (double *)malloc((size_t)K * sizeof(double));
    for (int64_t j = 0; j < N && !g_fail; j++) {
        for (int64_t k = 0; k < K; k++) {
            wrow[k] = hx_hip_dq1<T>(w + j * rb, k, ts);
            const bool f16w =
                P == HX_HIP_TC_MMA_F16 || P == HX_HIP_TC_WMMA_F16 || P == HX_HIP_TC_WMMA12_F16;
            wround[k] = f16w ? hx_hip_h2f(f2h_host(wrow[k])) : wrow[k];
            const double ulp = ldexp(1.0, ilogb(fmax(fabs(wrow[k]), 6.2e-5)) - 10);
            wv[k] = f16w ? ulp * ulp / 12.0 : 0.0;
        }
        /* large batches: every 8th row and the last (the host reference costs m N K) */
        const int64_t step = m > 128 ? 8 : 1;
        for (int64_t r = 0; r < m; r++) {
            if (r % step && r != m - 1) continue;
            double sr = 0, sx = 0, sabs = 0, var = 0;
            for (int64_t k = 0; k < K; k++) {
                const double a = x[r * K + k], b = wrow[k];
                sr += (double)xr[r * K + k] * wround[k];
                sx += a * b;
                sabs += fabs(a * b);
                var += b * b * xv[r * K + k] + a * a * wv[k];
            }
            const double got = (double)y[r * N + j] / scale;
            const double u = 5.9604644775390625e-8;
            const double lim_r = 4.0 * (double)K * u * sabs + 1e-30;
            const double lim_x = 7.0 * sqrt(var) + lim_r;
            const double er = fabs(got - sr) / lim_r, ex = fabs(got - sx) / lim_x;
            if (!(er <= worst_r) || !(ex <= worst_x)) wr = r, wc = j;
            worst_r = isnan(er) ? INFINITY : fmax(worst_r, er);
            worst_x = isnan(ex) ? INFINITY : fmax(worst_x, ex);
        }
    }
    CHECK(worst_r <= 1.0 && worst_x <= 1.0,
          "%s type %d m=%lld N=%lld K=%lld: worst error / allowed %.3g (rounded ref), %.3g "
          "(exact ref) at row %lld col %lld",
          pn, T, (long long)m, (long long)N, (long long)K, worst_r, worst_x, (long long)wr,
          (long long)wc);
    if (!g_fail)
        printf("ok   gemm %-8s type %2d m=%3lld N=%4lld K=%4lld  err/allowed %.2g (rounded ref) "
               "%.2g (exact ref)\n",
               pn, T, (long long)m, (long long)N, (long long)K, worst_r, worst_x);
    free(w), free(x), free(y), free(xr), free(xv), free(wrow), free(wround), free(wv);
    hipFree(dW), hipFree(dx), hipFree(dy), hipFree(daq), hipFree(dad);
}

template <int T> static void gemm_type(void)
{
    const int64_t E = hx_hip_blk<T>::E;
    /* K: one block, three and five (F16: odd K, K % 32 != 0 with and without K % 8) */
    const int64_t k1 = E == 1 ? 5 : E, k3 = E == 1 ? 67 : 3 * E, k5 = E == 1 ? 72 : 5 * E;
    static const int paths[] = {HX_HIP_TC_SIMT,    HX_HIP_TC_MMA_F16,    HX_HIP_TC_MMA_S8,
                                HX_HIP_TC_WMMA_F16, HX_HIP_TC_WMMA_I8,    HX_HIP_TC_WMMA12_F16,
                                HX_HIP_TC_WMMA12_I8};
    for (int P : paths) {
        if (P != HX_HIP_TC_SIMT && (T == HX_DTYPE_F32 || T == HX_DTYPE_BF16)) continue;
        if (hx_hip_tc_int8_path(P) && !hx_hip_tc_int8(T)) continue;
        gemm_case<T>(P, 37, 65, k3);
        gemm_case<T>(P, 33, 1, k1);
        gemm_case<T>(P, 70, 130, k5);
    }
}

static void test_gemm(void)
{
    gemm_type<HX_DTYPE_F32>();
    gemm_type<HX_DTYPE_F16>();
    gemm_type<HX_DTYPE_BF16>();
    gemm_type<HX_DTYPE_Q8_0>();
    gemm_type<HX_DTYPE_Q4_0>();
    gemm_type<HX_DTYPE_Q4_K>();
    gemm_type<HX_DTYPE_Q6_K>();
    gemm_type<HX_DTYPE_TQ1_0>();
    gemm_type<HX_DTYPE_TQ2_0>();
    gemm_type<HX_DTYPE_Q1_0>();
    gemm_type<HX_DTYPE_Q2_0>();
    gemm_type<HX_DTYPE_I2_S>();
}

/* ---- float weights (issue #30 item 4): mma bf16 m16n8k16, mma tf32 m16n8k8 ----------------- */

static float u2f_host(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t f2u_host(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* One warp through the float fragment ops, with the layouts written out here from the PTX ISA
 * tables: bf16 m16n8k16 (A 16x16, B 16x8) and tf32 m16n8k8 (A 16x8, B 8x8); small integers,
 * so D is exact. bad: A registers 1 and 2 swapped. */
__global__ void frag_float_kernel(int kind, int bad, const float *A, const float *B,
                                  const float *C, float *D)
{
    const int l = threadIdx.x, g = l / 4, t = l % 4;
    uint32_t a[4], b[2];
    float d[4];
    if (kind == HX_EMU_MMA_BF16) {
        for (int i = 0; i < 4; i++) {
            const int r = g + 8 * (i & 1), c = 2 * t + 8 * (i >> 1);
            a[i] = hx_hip_f2bf2(A[r * 16 + c], A[r * 16 + c + 1]);
        }
        for (int i = 0; i < 2; i++) {
            const int k = 2 * t + 8 * i;
            b[i] = hx_hip_f2bf2(B[k * 8 + g], B[(k + 1) * 8 + g]);
        }
    } else {
        for (int i = 0; i < 4; i++) a[i] = hx_hip_tf32(A[(g + 8 * (i & 1)) * 8 + t + 4 * (i >> 1)]);
        for (int i = 0; i < 2; i++) b[i] = hx_hip_tf32(B[(t + 4 * i) * 8 + g]);
    }
    for (int i = 0; i < 4; i++) d[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    if (bad) {
        const uint32_t x = a[1];
        a[1] = a[2], a[2] = x;
    }
    if (kind == HX_EMU_MMA_BF16) hx_hip_mma_bf16(d, a, b);
    else hx_hip_mma_tf32(d, a, b);
    for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
}

static hipError_t frag_float_run(int kind, int bad, bool *exact)
{
    const int M = 16, N = 8, K = kind == HX_EMU_MMA_BF16 ? 16 : 8;
    float A[16 * 16], B[16 * 8], C[16 * 8];
    for (int i = 0; i < M * K; i++) A[i] = (float)((int)(rnd() % 255) - 127);
    for (int i = 0; i < K * N; i++) B[i] = (float)((int)(rnd() % 255) - 127);
    for (int i = 0; i < M * N; i++) C[i] = (float)((int)(rnd() % 101) - 50);
    return frag_launch(frag_float_kernel, kind, bad, A, 256, B, 128, C, 128, M, N, K, exact);
}

static void test_fragments_float(void)
{
    /* the conversions, at ties and edges: bf16 to nearest even, tf32 to nearest, ties away */
    static const uint32_t bf[][2] = {
        {0x3f808000u, 0x3f80u}, /* tie, even below */
        {0x3f818000u, 0x3f82u}, /* tie, odd below: up */
        {0x3f808001u, 0x3f81u}, {0x3f807fffu, 0x3f80u}, {0xbf818000u, 0xbf82u},
        {0x7f7f8000u, 0x7f80u}, /* rounds past the largest finite value: infinity */
        {0x00018000u, 0x0002u}, /* subnormal tie, odd below */
        {0x7f800000u, 0x7f80u}, {0xff800000u, 0xff80u}, {0x7fc00001u, 0x7fffu}};
    for (const auto &c : bf) {
        const uint32_t got = hx_hip_f2bf2(u2f_host(c[0]), 1.0f);
        CHECK((got & 0xffffu) == c[1] && got >> 16 == 0x3f80u, "bf16(%08x) = %04x, want %04x",
              c[0], got & 0xffffu, c[1]);
    }
    static const uint32_t tf[][2] = {
        {0x3f801000u, 0x3f802000u}, /* tie, even below: away (up) */
        {0x3f803000u, 0x3f804000u}, {0x3f800fffu, 0x3f800000u}, {0xbf801000u, 0xbf802000u},
        {0x7f7ff000u, 0x7f800000u}, {0x7f800000u, 0x7f800000u}};
    for (const auto &c : tf)
        CHECK(hx_hip_tf32(u2f_host(c[0])) == c[1], "tf32(%08x) = %08x, want %08x", c[0],
              hx_hip_tf32(u2f_host(c[0])), c[1]);
    static const char *const names[] = {"mma m16n8k16 bf16", "mma m16n8k8 tf32"};
    for (int j = 0; j < 2; j++) {
        const int kind = j ? HX_EMU_MMA_TF32 : HX_EMU_MMA_BF16;
        bool exact = false;
        hipError_t e = frag_float_run(kind, 0, &exact);
        CHECK(e == hipSuccess && exact, "%s: D != A.B + C through the documented layout (%s)",
              names[j], hipGetErrorString(e));
        e = frag_float_run(kind, 1, &exact);
        CHECK(e == hipSuccess && !exact, "%s: a misplaced A register still gave the right D",
              names[j]);
        printf("ok   fragments %s (and bf16 / tf32 rounding at ties)\n", names[j]);
    }
}

/* The split a path makes of one operand value (hip-mma.h hx_hip_split_bf16 / _tf32, clamp
 * included), in exact doubles. */
static void split_host(bool tf32, float x, double *hi, double *lo)
{
    if (tf32) {
        const float m = u2f_host(0x7f7fe000u), h = u2f_host(hx_emu_tf32(fminf(fmaxf(x, -m), m)));
        *hi = h, *lo = u2f_host(hx_emu_tf32(x - h));
    } else {
        const float m = u2f_host(0x7f7f0000u);
        const float h = u2f_host((uint32_t)hx_emu_f2bf(fminf(fmaxf(x, -m), m)) << 16);
        *hi = h, *lo = u2f_host((uint32_t)hx_emu_f2bf(x - h) << 16);
    }
}

/* hx_hip_gemm_tcf<T, P> at (m, N, K) against (a) a double reference of what the path computes
 * (activations as bf16 hi + lo; or 3xTF32's hi.hi + hi.lo + lo.hi): within 4·K·u·Σ|terms|,
 * f32 accumulation only; (b) the exact double reference within numerics.h's form of bound,
 * 7·√(2·var + floor·typ) (floor = 64·K·u²/6, typ = Σ_b mean(x²)·Σ w² over 256-blocks), with
 * var from the split's own residual: 3xTF32 none (the F32 weight's bound: its residual must
 * hide under f32 accumulation's), bf16 hi + lo its actual x − hi − lo (≤ 2^-16 |x|); (c) the
 * exact reference within numerics.h's bound of the weight type (BF16: one bf16 rounding of
 * each activation allowed). big: one activation of each row past bf16's / tf32's largest
 * finite value (the clamp). */
template <int T, int P> static void gemm_case_float(int64_t m, int64_t N, int64_t K, bool big)
{
    const bool tf = P == HX_HIP_TC_MMA_TF32;
    int64_t rb = 0;
    uint8_t *w = make_weight<T>(N, K, &rb);
    const float ts = 0.05f, scale = 0.75f;
    float *x = (float *)malloc((size_t)(m * K) * sizeof(float));
    for (int64_t i = 0; i < m * K; i++) x[i] = frand() * (rnd() % 61 == 0 ? 20.0f : 1.0f);
    if (big)
        for (int64_t r = 0; r < m; r++) {
            for (int64_t k = 0; k < K; k++) x[r * K + k] *= 1e-30f;
            x[r * K + (r * 7) % K] = (r % 2 ? -1.0f : 1.0f) * u2f_host(0x7f7fff00u);
        }
    uint8_t *dW = dev_copy(w, (size_t)(N * rb));
    float *dx = dev_copy(x, (size_t)(m * K)), *dy = dev_copy<float>(NULL, (size_t)(m * N));
    const dim3 g((unsigned)((N + HX_HIP_BN - 1) / HX_HIP_BN),
                 (unsigned)((m + HX_HIP_BM - 1) / HX_HIP_BM));
    const hipError_t e = hx_hip_launch(hx_hip_gemm_tcf<T, P>, g, dim3(256), NULL,
                                       (const uint8_t *)dW, rb, N, K, (const float *)dx, K, m, dy,
                                       N, scale, (int)(K % 8 == 0), ts);
    float *y = (float *)malloc((size_t)(m * N) * sizeof(float));
    hipMemcpyAsync(y, dy, (size_t)(m * N) * sizeof(float), hipMemcpyDeviceToHost, NULL);
    const char *pn = tf ? "mma-3xtf32" : "mma-bf16x2";
    CHECK(e == hipSuccess, "%s T=%d m=%lld N=%lld K=%lld: launch %s (%s)", pn, T, (long long)m,
          (long long)N, (long long)K, hipGetErrorName(e), hx_emu_last_message());
    double *xh = (double *)malloc((size_t)(m * K) * sizeof(double)),
           *xl = (double *)malloc((size_t)(m * K) * sizeof(double));
    for (int64_t i = 0; i < m * K; i++) split_host(tf, x[i], &xh[i], &xl[i]);
    double *wh = (double *)malloc((size_t)K * sizeof(double)),
           *wl = (double *)malloc((size_t)K * sizeof(double)),
           *wv = (double *)malloc((size_t)K * sizeof(double));
    double worst_r = 0.0, worst_x = 0.0, worst_n = 0.0;
    int64_t wr = 0, wc = 0;
    const double u = 5.9604644775390625e-8;
    for (int64_t j = 0; j < N && !g_fail; j++) {
        for (int64_t k = 0; k < K; k++) {
            wv[k] = hx_hip_dq1<T>(w + j * rb, k, ts);
            if (tf) split_host(true, (float)wv[k], &wh[k], &wl[k]);
            else wh[k] = wv[k], wl[k] = 0.0; /* bf16 weights: exact */
        }
        const int64_t step = m > 128 ? 8 : 1;
        for (int64_t r = 0; r < m; r++) {
            if (r % step && r != m - 1) continue;
            double sr = 0, sx = 0, sabs = 0, typ = 0, var = 0, vb16 = 0;
            double xm = 0, ew = 0, sp = 0, s16 = 0; /* per 256-block */
            for (int64_t k = 0; k < K; k++) {
                const int64_t at = r * K + k;
                const double a = x[at], b = wv[k];
                sr += tf ? xh[at] * wh[k] + xh[at] * wl[k] + xl[at] * wh[k]
                         : (xh[at] + xl[at]) * b;
                sx += a * b;
                sabs += fabs(a * b);
                xm += a * a, ew += b * b;
                if (!tf) {
                    const double e = a - xh[at] - xl[at];
                    double e1 = a - u2f_host((uint32_t)hx_emu_f2bf(x[at]) << 16);
                    if (!isfinite(e1)) e1 = e; /* past bf16's range: the clamped split */
                    sp += e * e, s16 += e1 * e1;
                }
                if ((k + 1) % 256 == 0 || k == K - 1) { /* numerics.h's 256-blocks */
                    const double nb = (double)(k % 256 + 1);
                    typ += xm / nb * ew, var += sp / nb * ew, vb16 += s16 / nb * ew;
                    xm = ew = sp = s16 = 0;
                }
            }
            const double got = (double)y[r * N + j] / scale;
            const double lim_r = 4.0 * (double)K * u * sabs + 1e-300;
            const double floor_typ = 64.0 * (double)K * u * u / 6.0 * typ;
            const double lim_x = 7.0 * sqrt(2.0 * var + floor_typ) + 1e-300;
            const double er = fabs(got - sr) / lim_r, ex = fabs(got - sx) / lim_x;
            if (!(er <= worst_r) || !(ex <= worst_x)) wr = r, wc = j;
            worst_r = isnan(er) ? INFINITY : fmax(worst_r, er);
            worst_x = isnan(ex) ? INFINITY : fmax(worst_x, ex);
            /* numerics.h's own bound for the type (BF16: one bf16 rounding of x allowed) */
            const double en = fabs(got - sx) / (7.0 * sqrt(2.0 * vb16 + floor_typ) + 1e-300);
            worst_n = isnan(en) ? INFINITY : fmax(worst_n, en);
        }
    }
    CHECK(worst_r <= 1.0 && worst_x <= 1.0 && worst_n <= 1.0,
          "%s type %d m=%lld N=%lld K=%lld%s: worst error / allowed %.3g (the path's reference), "
          "%.3g (exact, the split's own residual), %.3g (numerics.h's bound of the type) at row "
          "%lld col %lld",
          pn, T, (long long)m, (long long)N, (long long)K, big ? " big" : "", worst_r, worst_x,
          worst_n, (long long)wr, (long long)wc);
    if (!g_fail)
        printf("ok   gemm %-10s type %2d m=%3lld N=%4lld K=%4lld%s  err/allowed %.2g (path ref) "
               "%.2g (exact, own residual) %.2g (exact, numerics.h)\n",
               pn, T, (long long)m, (long long)N, (long long)K, big ? " big" : "    ", worst_r,
               worst_x, worst_n);
    free(w), free(x), free(y), free(xh), free(xl), free(wh), free(wl), free(wv);
    hipFree(dW), hipFree(dx), hipFree(dy);
}

static void test_gemm_float(void)
{
    /* odd m, N = 1 / 65 / 130, K one short step, odd, and not a multiple of 8 or 64 */
    gemm_case_float<HX_DTYPE_BF16, HX_HIP_TC_MMA_BF16>(37, 65, 67, false);
    gemm_case_float<HX_DTYPE_BF16, HX_HIP_TC_MMA_BF16>(33, 1, 5, false);
    gemm_case_float<HX_DTYPE_BF16, HX_HIP_TC_MMA_BF16>(70, 130, 200, false);
    gemm_case_float<HX_DTYPE_BF16, HX_HIP_TC_MMA_BF16>(17, 9, 67, true);
    gemm_case_float<HX_DTYPE_F32, HX_HIP_TC_MMA_TF32>(37, 65, 67, false);
    gemm_case_float<HX_DTYPE_F32, HX_HIP_TC_MMA_TF32>(33, 1, 5, false);
    gemm_case_float<HX_DTYPE_F32, HX_HIP_TC_MMA_TF32>(70, 130, 200, false);
    gemm_case_float<HX_DTYPE_F32, HX_HIP_TC_MMA_TF32>(17, 9, 67, true);
}

/* Qwen3-0.6B's gate/up-sized (1024 -> 3072) and down (3072 -> 1024) GEMMs at m = 512. */
static void test_qwen(void)
{
    /* three cases, not every type x path: each costs ~5 s of CI's tight budget */
    gemm_case<HX_DTYPE_Q8_0>(HX_HIP_TC_MMA_S8, 512, 3072, 1024);
    gemm_case<HX_DTYPE_TQ2_0>(HX_HIP_TC_MMA_S8, 512, 1024, 3072);
    gemm_case<HX_DTYPE_F16>(HX_HIP_TC_WMMA_F16, 512, 1024, 3072);
}

int main(int argc, char **argv)
{
    bool frag = argc < 2, gemm = argc < 2, qwen = argc < 2 && !HX_T_MMA_SANITIZED, fl = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "fragments")) frag = true;
        else if (!strcmp(argv[i], "gemm")) gemm = true;
        else if (!strcmp(argv[i], "qwen")) qwen = true;
        else if (!strcmp(argv[i], "float")) fl = true; /* the float-weight gemm cases only */
        else {
            fprintf(stderr, "usage: %s [fragments|gemm|qwen|float]...\n", argv[0]);
            return 2;
        }
    }
    if (frag) test_fragments(), test_fragments_float();
    if (gemm) test_gemm();
    if (gemm || fl) test_gemm_float();
    if (qwen) test_qwen();
    else if (argc < 2)
        printf("n/a  qwen shapes (m = 512): the Release run has them, not the sanitizer build\n");
    printf("%s\n", g_fail ? "FAILED" : "all passed");
    return g_fail;
}
