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
 * signed on RDNA3 (dot8-insts), a scalar fallback elsewhere. */
static __device__ __forceinline__ int hx_hip_dp4a(int a, int b, int c)
{
#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) ||                        \
    defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__)
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

#if defined(HX_HIP_EMU)
#define HX_HIP_UNROLL
#else
#define HX_HIP_UNROLL _Pragma("unroll")
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
