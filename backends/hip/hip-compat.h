/*
 * hip-compat.h — lets the sources of backends/hip build three ways from one text:
 *
 *   hipcc (AMD, ROCm)   the HIP runtime as is;
 *   nvcc  (NVIDIA)      the .hip file compiled as CUDA (-x cu); the runtime names the module
 *                       uses are mapped to CUDA's here, as HIP's own NVIDIA platform does;
 *   host C++ (HX_HIP_EMU) hip-emu.h supplies the runtime and runs kernels on the CPU.
 *
 * Only names the module uses are mapped. Device helpers that differ per vendor get hx_hip_
 * wrappers (integer dot product, warp shuffle), so kernels never test the platform. Kernels
 * are launched through hx_hip_launch (hipLaunchKernel / cudaLaunchKernel), which returns the
 * launch error directly, instead of <<<>>>, which only the GPU compilers parse.
 */
#pragma once

#include <stdint.h>

#if defined(HX_HIP_EMU)
#include "hip-emu.h"
#define HX_HIP_RUNTIME "emu"

#elif defined(__CUDACC__) && !defined(__HIP__)
#include <cuda_runtime.h>
#define HX_HIP_RUNTIME "cuda"
#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorNoBinaryForGpu cudaErrorNoKernelImageForDevice
#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceProp_t cudaDeviceProp
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDriverGetVersion cudaDriverGetVersion
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc(p, n, f) cudaHostAlloc((p), (n), (f))
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostFree cudaFreeHost
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStream_t cudaStream_t
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEvent_t cudaEvent_t
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipLaunchKernel cudaLaunchKernel
#define hipGraph_t cudaGraph_t
#define hipGraphExec_t cudaGraphExec_t
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy

/* Signed 8-bit 4-way dot product with 32-bit accumulate (sm_61+). */
static __device__ __forceinline__ int hx_hip_dp4a(int a, int b, int c)
{
    return __dp4a(a, b, c);
}
static __device__ __forceinline__ float hx_hip_shfl_xor(float v, int m)
{
    return __shfl_xor_sync(0xffffffffu, v, m, 32);
}

#else
#include <hip/hip_runtime.h>
#define HX_HIP_RUNTIME "rocm"

/* Signed 8-bit 4-way dot product with 32-bit accumulate: v_dot4_i32_i8 where the ISA has it
 * (dot1-insts: gfx906/908/90a, gfx1011/1012, RDNA2), v_dot4_i32_iu8 with both operands
 * signed on RDNA3 and RDNA4 (dot8-insts), a scalar fallback elsewhere. */
static __device__ __forceinline__ int hx_hip_dp4a(int a, int b, int c)
{
#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) ||                        \
    defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__) ||                        \
    defined(__gfx1152__) || defined(__gfx1200__) || defined(__gfx1201__)
    return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx1011__) || \
    defined(__gfx1012__) || defined(__gfx1030__) || defined(__gfx1031__) ||                        \
    defined(__gfx1032__) || defined(__gfx1033__) || defined(__gfx1034__) ||                        \
    defined(__gfx1035__) || defined(__gfx1036__)
    return __builtin_amdgcn_sdot4(a, b, c, false);
#else
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(uint32_t)(a >> 8 * i) * (int)(int8_t)(uint32_t)(b >> 8 * i);
    return c;
#endif
}
/* Width 32 everywhere: on wave64 hardware this reduces within each half, which the kernels
 * (written for 32-lane groups) expect. */
static __device__ __forceinline__ float hx_hip_shfl_xor(float v, int m)
{
    return __shfl_xor(v, m, 32);
}
#endif

#define HX_HIP_WARP 32

/* ---- matrix fragments (hip-mma.h) ----------------------------------------------------------
 * One warp-wide matrix multiply-accumulate each, D = A.B + C in place of C, every lane passing
 * the registers the hardware layout assigns it (docs/hip.md "Prefill GEMM" lists the layouts
 * and their sources; hip-emu.cpp reconstructs the matrices from the same layouts):
 *   hx_hip_mma_f16   NVIDIA mma.sync m16n8k16 row.col, f16 A (4 x 2 halves) and B (2 x 2),
 *                    f32 C/D (4): sm_80+
 *   hx_hip_mma_s8    NVIDIA mma.sync m16n8k32 row.col, s8 A (4 x 4 bytes) and B (2 x 4), s32
 *                    C/D (4): sm_80+
 *   hx_hip_wmma_f16  AMD RDNA3 v_wmma_f32_16x16x16_f16, wave32: A and B 16 halves per lane,
 *                    f32 C/D (8): gfx11 with the builtin (ROCm 5.5+ clang)
 * HX_HIP_HAVE_MMA / HX_HIP_HAVE_WMMA say whether this compilation has the instruction; where
 * it does not, the wrapper traps (hx_hip_gemm_caps tells the host which paths the code it runs
 * has, so it never launches those). hx_hip_f2h: f32 to f16 bits, round to nearest even. */
#if defined(HX_HIP_EMU)
#define HX_HIP_HAVE_MMA 1
#define HX_HIP_HAVE_WMMA 1
#define HX_HIP_HAVE_WMMA_I8 1 /* the AMD WMMA block below */
#define HX_HIP_HAVE_WMMA12 1
#elif defined(__CUDACC__) && !defined(__HIP__)
#include <cuda_fp16.h>
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HX_HIP_HAVE_MMA 1
#endif
static __device__ __forceinline__ uint16_t hx_hip_f2h(float x)
{
    return __half_as_ushort(__float2half_rn(x));
}
static __device__ __forceinline__ void hx_hip_mma_f16(float *d, const uint32_t *a,
                                                      const uint32_t *b)
{
#if defined(HX_HIP_HAVE_MMA)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
    __trap();
#endif
}
static __device__ __forceinline__ void hx_hip_mma_s8(int *d, const uint32_t *a, const uint32_t *b)
{
#if defined(HX_HIP_HAVE_MMA)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
    __trap();
#endif
}
static __device__ __forceinline__ void hx_hip_wmma_f16(float *d, const uint16_t *a,
                                                       const uint16_t *b)
{
    (void)d, (void)a, (void)b;
    __trap();
}
/* AMD-only fragment ops (the AMD WMMA block below): never launched on NVIDIA */
static __device__ __forceinline__ void hx_hip_wmma_i8(int *d, const uint32_t *a, const uint32_t *b)
{
    (void)d, (void)a, (void)b;
    __trap();
}
static __device__ __forceinline__ void hx_hip_wmma12_f16(float *d, const uint16_t *a,
                                                         const uint16_t *b)
{
    (void)d, (void)a, (void)b;
    __trap();
}
static __device__ __forceinline__ void hx_hip_wmma12_i8(int *d, const uint32_t *a,
                                                        const uint32_t *b)
{
    (void)d, (void)a, (void)b;
    __trap();
}
#else
#if (defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) ||                       \
     defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__) ||                       \
     defined(__gfx1152__)) &&                                                                      \
    defined(__has_builtin)
#if __has_builtin(__builtin_amdgcn_wmma_f32_16x16x16_f16_w32)
#define HX_HIP_HAVE_WMMA 1
#endif
#endif
static __device__ __forceinline__ uint16_t hx_hip_f2h(float x)
{
    const _Float16 h = (_Float16)x;
    return __builtin_bit_cast(uint16_t, h);
}
static __device__ __forceinline__ void hx_hip_mma_f16(float *d, const uint32_t *a,
                                                      const uint32_t *b)
{
    (void)d, (void)a, (void)b;
    __builtin_trap();
}
static __device__ __forceinline__ void hx_hip_mma_s8(int *d, const uint32_t *a, const uint32_t *b)
{
    (void)d, (void)a, (void)b;
    __builtin_trap();
}
static __device__ __forceinline__ void hx_hip_wmma_f16(float *d, const uint16_t *a,
                                                       const uint16_t *b)
{
#if defined(HX_HIP_HAVE_WMMA)
    typedef _Float16 v16h __attribute__((ext_vector_type(16)));
    typedef float v8f __attribute__((ext_vector_type(8)));
    v16h va, vb;
    v8f vc;
    for (int i = 0; i < 16; i++)
        va[i] = __builtin_bit_cast(_Float16, a[i]), vb[i] = __builtin_bit_cast(_Float16, b[i]);
    for (int i = 0; i < 8; i++) vc[i] = d[i];
    vc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(va, vb, vc);
    for (int i = 0; i < 8; i++) d[i] = vc[i];
#else
    (void)d, (void)a, (void)b;
    __builtin_trap();
#endif
}

/* ---- AMD WMMA: int8 on RDNA3, f16 and int8 on RDNA4 (docs/hip.md "Prefill GEMM") ----------
 *   hx_hip_wmma_i8     RDNA3 v_wmma_i32_16x16x16_iu8, wave32, both operands signed: A and B 16
 *                      bytes per lane (4 words, byte e = k e; lanes 16-31 repeat 0-15), s32 C/D
 *                      (8, as the f16 op's): gfx11 with the builtin
 *   hx_hip_wmma12_f16  RDNA4 v_wmma_f32_16x16x16_f16 (gfx12 encoding): A and B 8 halves per
 *                      lane (k = 8 (l / 16) + e, no repetition), f32 C/D (8: row 8 (l / 16) + v)
 *   hx_hip_wmma12_i8   RDNA4 v_wmma_i32_16x16x16_iu8, signed: A and B 8 bytes per lane (2 words,
 *                      k = 8 (l / 16) + e), s32 C/D as hx_hip_wmma12_f16's
 * HX_HIP_HAVE_WMMA_I8 / HX_HIP_HAVE_WMMA12 say whether this compilation has them (a gfx11 /
 * gfx12 target whose clang has the builtin); elsewhere they trap, and hx_hip_gemm_caps keeps the
 * host from launching them. */
#if (defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) ||                       \
     defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__) ||                       \
     defined(__gfx1152__)) &&                                                                      \
    defined(__has_builtin)
#if __has_builtin(__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32)
#define HX_HIP_HAVE_WMMA_I8 1
#endif
#endif
#if (defined(__gfx1200__) || defined(__gfx1201__)) && defined(__has_builtin)
#if __has_builtin(__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12) &&                             \
    __has_builtin(__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12)
#define HX_HIP_HAVE_WMMA12 1
#endif
#endif
static __device__ __forceinline__ void hx_hip_wmma_i8(int *d, const uint32_t *a, const uint32_t *b)
{
#if defined(HX_HIP_HAVE_WMMA_I8)
    typedef int v4i __attribute__((ext_vector_type(4)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    v4i va, vb;
    v8i vc;
    for (int i = 0; i < 4; i++) va[i] = (int)a[i], vb[i] = (int)b[i];
    for (int i = 0; i < 8; i++) vc[i] = d[i];
    vc = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, va, true, vb, vc, false);
    for (int i = 0; i < 8; i++) d[i] = vc[i];
#else
    (void)d, (void)a, (void)b;
    __builtin_trap();
#endif
}
static __device__ __forceinline__ void hx_hip_wmma12_f16(float *d, const uint16_t *a,
                                                         const uint16_t *b)
{
#if defined(HX_HIP_HAVE_WMMA12)
    typedef _Float16 v8h __attribute__((ext_vector_type(8)));
    typedef float v8f __attribute__((ext_vector_type(8)));
    v8h va, vb;
    v8f vc;
    for (int i = 0; i < 8; i++)
        va[i] = __builtin_bit_cast(_Float16, a[i]), vb[i] = __builtin_bit_cast(_Float16, b[i]);
    for (int i = 0; i < 8; i++) vc[i] = d[i];
    vc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(va, vb, vc);
    for (int i = 0; i < 8; i++) d[i] = vc[i];
#else
    (void)d, (void)a, (void)b;
    __builtin_trap();
#endif
}
static __device__ __forceinline__ void hx_hip_wmma12_i8(int *d, const uint32_t *a,
                                                        const uint32_t *b)
{
#if defined(HX_HIP_HAVE_WMMA12)
    typedef int v2i __attribute__((ext_vector_type(2)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    v2i va, vb;
    v8i vc;
    for (int i = 0; i < 2; i++) va[i] = (int)a[i], vb[i] = (int)b[i];
    for (int i = 0; i < 8; i++) vc[i] = d[i];
    vc = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, va, true, vb, vc, false);
    for (int i = 0; i < 8; i++) d[i] = vc[i];
#else
    (void)d, (void)a, (void)b;
    __builtin_trap();
#endif
}
#endif

/* ---- float-weight matrix fragments (hip-mma.h hx_hip_gemm_tcf; issue #30 item 4) --------------
 * Kept apart from the block above so the f16 / int8 / WMMA paths and these can change alone:
 *   hx_hip_mma_bf16  NVIDIA mma.sync m16n8k16 row.col, bf16 A (4 x 2) and B (2 x 2), f32 C/D (4):
 *                    the same register layout as hx_hip_mma_f16 (PTX ISA: one table for .f16 and
 *                    .bf16); sm_80+
 *   hx_hip_mma_tf32  NVIDIA mma.sync m16n8k8 row.col, tf32 A (4 words, one element each) and B
 *                    (2), f32 C/D (4): sm_80+
 *   hx_hip_f2bf2     two f32 to a bf16 pair (x0 in the low half), round to nearest even
 *                    (cvt.rn.bf16x2.f32 on sm_80+; the same rounding in integer arithmetic
 *                    elsewhere and in the emulator)
 *   hx_hip_tf32      f32 to tf32 bits (the f32 with its low 13 bits zero), round to nearest,
 *                    ties away from zero (cvt.rna.tf32.f32 on sm_80+, the same bit arithmetic
 *                    elsewhere); a finite input whose rounding carries past the largest finite
 *                    value becomes infinity, as the instruction's does: callers clamp.
 * Both mma wrappers trap where HX_HIP_HAVE_MMA is not defined (never launched there). */
#if !defined(HX_HIP_EMU)
#if defined(__CUDACC__) && !defined(__HIP__)
#define HX_HIP_FTRAP() __trap()
#else
#define HX_HIP_FTRAP() __builtin_trap()
#endif
static __device__ __forceinline__ uint32_t hx_hip_f2bf_bits(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* NaN: the canonical one */
    u += 0x7fffu + ((u >> 16) & 1u);                     /* to nearest, ties to even */
    return u >> 16;
}
static __device__ __forceinline__ uint32_t hx_hip_f2bf2(float x0, float x1)
{
#if defined(__CUDACC__) && !defined(__HIP__) && defined(HX_HIP_HAVE_MMA)
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(x1), "f"(x0)); /* a: high half */
    return d;
#else
    return hx_hip_f2bf_bits(x0) | hx_hip_f2bf_bits(x1) << 16;
#endif
}
static __device__ __forceinline__ uint32_t hx_hip_tf32(float x)
{
#if defined(__CUDACC__) && !defined(__HIP__) && defined(HX_HIP_HAVE_MMA)
    uint32_t d;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(d) : "f"(x));
    return d;
#else
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u; /* half an ulp of tf32: ties away */
    return u & 0xffffe000u;
#endif
}
static __device__ __forceinline__ void hx_hip_mma_bf16(float *d, const uint32_t *a,
                                                       const uint32_t *b)
{
#if defined(__CUDACC__) && !defined(__HIP__) && defined(HX_HIP_HAVE_MMA)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
    HX_HIP_FTRAP();
#endif
}
static __device__ __forceinline__ void hx_hip_mma_tf32(float *d, const uint32_t *a,
                                                       const uint32_t *b)
{
#if defined(__CUDACC__) && !defined(__HIP__) && defined(HX_HIP_HAVE_MMA)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
    HX_HIP_FTRAP();
#endif
}
#endif

/* HX_HIP_UNROLL: unroll fully. HX_HIP_UNROLL2: by two on AMD (fewer loads in flight, fewer
 * registers: the prefill GEMMs' fills spilled on RDNA), fully on NVIDIA (where ptxas kept them
 * without spilling, and by two it spilled a few bytes more) */
#if defined(HX_HIP_EMU)
#define HX_HIP_UNROLL
#define HX_HIP_UNROLL2
#elif defined(__CUDACC__) && !defined(__HIP__)
#define HX_HIP_UNROLL _Pragma("unroll")
#define HX_HIP_UNROLL2 _Pragma("unroll")
#else
#define HX_HIP_UNROLL _Pragma("unroll")
#define HX_HIP_UNROLL2 _Pragma("unroll 2")
#endif

/* ---- kernel launch ------------------------------------------------------------------------ */
/* Host code: not in the source hipRTC compiles (hip-rtc-embed.cmake defines HX_HIP_RTC). */
#if !defined(HX_HIP_RTC)

#if defined(HX_HIP_AMD_RTC)
/* The module's hipRTC code object, when it runs on one (hip-rtc.h): the kernel's function in
 * it, NULL to launch the prebuilt code through hipLaunchKernel. */
hipFunction_t hx_hip_rtc_function(const void *kernel);
#endif

/* A captured graph made executable. The instantiate call differs between the runtimes (CUDA 12
 * dropped the error-node/log form HIP keeps), so the module calls this one. */
static inline hipError_t hx_hip_graph_instantiate(hipGraphExec_t *exec, hipGraph_t graph)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    return cudaGraphInstantiateWithFlags(exec, graph, 0);
#else
    return hipGraphInstantiate(exec, graph, NULL, NULL, 0);
#endif
}

template <typename T> struct hx_hip_same {
    typedef T type;
};

/* Launch with the kernel's exact parameter types (arguments converted first), so the argument
 * array hipLaunchKernel reads holds objects of the right size. Returns the launch error. */
template <typename... P>
static inline hipError_t hx_hip_launch_exact(void (*k)(P...), dim3 g, dim3 b, hipStream_t s,
                                             typename hx_hip_same<P>::type... a)
{
#if defined(HX_HIP_EMU)
    /* By value: a stream under capture keeps a copy of these bytes (the argument values) and
     * runs them again at each replay. */
    auto body = [=]() { k(a...); };
    static_assert(std::is_trivially_copyable<decltype(body)>::value, "kernel arguments");
    return hx_emu_launch(
        g, b, s, [](void *f) { (*(decltype(body) *)f)(); }, &body, sizeof body);
#else
    void *args[sizeof...(P) + 1] = {((void *)&a)..., NULL};
#if defined(HX_HIP_AMD_RTC)
    if (hipFunction_t f = hx_hip_rtc_function((const void *)k))
        return hipModuleLaunchKernel(f, g.x, g.y, g.z, b.x, b.y, b.z, 0, s, args, NULL);
#endif
    return hipLaunchKernel((const void *)k, g, b, args, 0, s);
#endif
}

template <typename... P, typename... A>
static inline hipError_t hx_hip_launch(void (*k)(P...), dim3 g, dim3 b, hipStream_t s, A... a)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    return hx_hip_launch_exact<P...>(k, g, b, s, static_cast<P>(a)...);
}
#endif /* !HX_HIP_RTC */
