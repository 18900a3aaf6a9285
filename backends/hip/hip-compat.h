/*
 * hip-compat.h — lets the HIP sources of backends/hip build with hipcc (AMD) and with nvcc
 * (NVIDIA, the .hip files compiled as CUDA with -x cu). Only the runtime names the module uses
 * are mapped; device helpers (dp4a, warp shuffles) get hx_hip_ wrappers so kernels never test
 * the platform themselves.
 */
#pragma once

#if defined(__CUDACC__) && !defined(__HIP__)
#include <cuda_runtime.h>
#define HX_HIP_RUNTIME "cuda"
#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipDeviceProp_t cudaDeviceProp
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDriverGetVersion cudaDriverGetVersion
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
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
#define hipEvent_t cudaEvent_t
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventDestroy cudaEventDestroy

static __device__ __forceinline__ int hx_hip_dp4a(int a, int b, int c) { return __dp4a(a, b, c); }
static __device__ __forceinline__ float hx_hip_shfl_xor(float v, int m)
{
    return __shfl_xor_sync(0xffffffffu, v, m, 32);
}
#else
#include <hip/hip_runtime.h>
#define HX_HIP_RUNTIME "rocm"

/* Signed 8-bit 4-way dot product with 32-bit accumulate: v_dot4_i32_i8 on RDNA2 / CDNA,
 * v_dot4_i32_iu8 (both operands signed) on RDNA3, a scalar fallback elsewhere. */
static __device__ __forceinline__ int hx_hip_dp4a(int a, int b, int c)
{
#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__)
    return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx1011__) || defined(__gfx1012__) || defined(__gfx1030__) || defined(__gfx1031__) || \
    defined(__gfx1032__) || defined(__gfx1033__) || defined(__gfx1034__) || defined(__gfx1035__) || \
    defined(__gfx1036__)
    return __builtin_amdgcn_sdot4(a, b, c, false);
#else
    for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> 8 * i) * (int)(signed char)(b >> 8 * i);
    return c;
#endif
}
/* Width 32 everywhere: on wave64 hardware this reduces within each half, which the kernels
 * (written for 32-lane groups) expect. */
static __device__ __forceinline__ float hx_hip_shfl_xor(float v, int m) { return __shfl_xor(v, m, 32); }
#endif
