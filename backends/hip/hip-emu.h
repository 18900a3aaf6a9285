/*
 * hip-emu.h — a host emulation of the small part of HIP that backends/hip uses, so the same
 * kernels and module code build with the host C++ compiler (HX_HIP_EMU) into hx-hip-emu.so
 * and run on the CPU: test-backend-ops and the engine check every kernel's arithmetic, index
 * math, shared-memory tiling and reductions on machines without a GPU.
 *
 * Execution model (hip-emu.cpp): a launch runs on the calling thread, one thread block at a
 * time; every GPU thread of the block is a fiber with its own stack. __syncthreads() and warp
 * shuffles are barriers: a fiber waits there until every live thread of its block (or warp)
 * has arrived. A block whose threads wait at different barriers, a shuffle that reads an
 * exited lane, or a block of more than 1024 threads fails the launch with
 * hipErrorLaunchFailure and a message from hx_emu_last_message(), as a GPU would fault.
 * `__shared__` variables are function statics: blocks never run concurrently, and launches
 * are serialized by a process-wide lock. Device memory is host memory.
 *
 * Graphs: between hipStreamBeginCapture and hipStreamEndCapture a stream runs nothing; each
 * launch is recorded with a copy of its argument bytes (and each copy or memset with its
 * pointers), and hipGraphLaunch replays the list in order, as a GPU runs a captured graph.
 *
 * Faults for tests, read once: HX_HIP_EMU_DEVICES=N devices (default 1; 0 = "no device"),
 * HX_HIP_EMU_FAIL_MALLOC=N and HX_HIP_EMU_FAIL_LAUNCH=N make every hipMalloc / launch after
 * the first N fail (out of memory / launch failure; a graph whose kernels would cross N fails
 * to launch as a whole, before running any); HX_HIP_EMU_FAIL_GRAPH=capture|instantiate|launch
 * (1 = instantiate) makes every hipStreamBeginCapture / hipGraphInstantiate / hipGraphLaunch
 * fail (hipErrorNotSupported). HX_HIP_EMU_MMA_FAULT=K (an HX_EMU_* fragment kind) flips a bit
 * of lane 0's first D register of every op of that kind, as a GPU whose layout differs from
 * the documented one would (the caps kernel's self-check must then drop that path).
 *
 * The device's architecture, read once: HX_HIP_EMU_ARCH=sm_XY reports compute capability X.Y,
 * =gfxNNNN that gcnArchName (unset: "emu", capability 0.0). The module picks its prefill GEMM
 * from it as from a GPU's (hip-mma.h), so each matrix-unit path runs here.
 */
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) int2 {
    int x, y;
};
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
static inline float2 make_float2(float x, float y)
{
    return float2{x, y};
}

/* ---- device side ------------------------------------------------------------------------ */

struct hx_emu_thread {
    uint3 tid, bid;
};
extern hx_emu_thread *hx_emu_self; /* guarded by the launch lock */
extern uint3 hx_emu_bdim, hx_emu_gdim;
#define threadIdx (hx_emu_self->tid)
#define blockIdx (hx_emu_self->bid)
#define blockDim (hx_emu_bdim)
#define gridDim (hx_emu_gdim)

void hx_emu_syncthreads(void);
float hx_emu_shfl_xor(float v, int mask, int width);
/* A whole-warp xor-butterfly reduction (op 0: sum, 1: max) in one barrier instead of five
 * shuffles; the same operations in the same order as the shuffle loop, so bit-identical. */
float hx_emu_warp_butterfly(float v, int op);
#define __syncthreads() hx_emu_syncthreads()

static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline int hx_hip_dp4a(int a, int b, int c)
{
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(uint32_t)(a >> 8 * i) * (int)(int8_t)(uint32_t)(b >> 8 * i);
    return c;
}
static inline float hx_hip_shfl_xor(float v, int m)
{
    return hx_emu_shfl_xor(v, m, 32);
}

/* Matrix fragment ops (hip-compat.h), each a warp collective: every lane offers the registers
 * the hardware layout gives it, the op rebuilds A, B and C from them by that layout (NVIDIA's
 * PTX ISA fragment tables, AMD's RDNA3 WMMA layout; docs/hip.md), computes D = A.B + C and
 * hands each lane its D registers by the same layout. A kernel that puts an element in the
 * wrong lane or register gets a wrong D here as on the GPU. A lane that has exited, a partial
 * warp, or (WMMA) lanes 16-31 whose A or B differ from lanes 0-15's faults the launch. */
enum { HX_EMU_MMA_F16 = 0, HX_EMU_MMA_S8 = 1, HX_EMU_WMMA_F16 = 2 };
/* in: 4 A words, 2 B words, 4 C words (MMA); 8 A words, 8 B words, 8 C words (WMMA, two
 * halves a word, lowest first). out: 4 or 8 D words. */
void hx_emu_mma(int kind, const uint32_t *in, uint32_t *out);
uint16_t hx_emu_f2h(float x);

static inline uint16_t hx_hip_f2h(float x)
{
    return hx_emu_f2h(x);
}
static inline void hx_hip_mma_f16(float *d, const uint32_t *a, const uint32_t *b)
{
    uint32_t in[10], out[4];
    memcpy(in, a, 16), memcpy(in + 4, b, 8), memcpy(in + 6, d, 16);
    hx_emu_mma(HX_EMU_MMA_F16, in, out);
    memcpy(d, out, 16);
}
static inline void hx_hip_mma_s8(int *d, const uint32_t *a, const uint32_t *b)
{
    uint32_t in[10], out[4];
    memcpy(in, a, 16), memcpy(in + 4, b, 8), memcpy(in + 6, d, 16);
    hx_emu_mma(HX_EMU_MMA_S8, in, out);
    memcpy(d, out, 16);
}
static inline void hx_hip_wmma_f16(float *d, const uint16_t *a, const uint16_t *b)
{
    uint32_t in[24], out[8];
    memcpy(in, a, 32), memcpy(in + 8, b, 32), memcpy(in + 16, d, 32);
    hx_emu_mma(HX_EMU_WMMA_F16, in, out);
    memcpy(d, out, 32);
}

/* Float-weight fragment ops (hip-compat.h's second fragment block; issue #30 item 4): NVIDIA
 * mma m16n8k16 bf16 and m16n8k8 tf32, each 4 A words, 2 B words, 4 C words in, 4 D words out.
 * Their kinds start at 8 so that other paths added beside them keep their own numbers. The
 * conversions round as the instructions do: bf16 to nearest even (cvt.rn.bf16x2.f32), tf32 to
 * nearest with ties away (cvt.rna.tf32.f32). */
enum { HX_EMU_MMA_BF16 = 8, HX_EMU_MMA_TF32 = 9 };
uint16_t hx_emu_f2bf(float x);
uint32_t hx_emu_tf32(float x);

static inline uint32_t hx_hip_f2bf2(float x0, float x1)
{
    return hx_emu_f2bf(x0) | (uint32_t)hx_emu_f2bf(x1) << 16;
}
static inline uint32_t hx_hip_tf32(float x)
{
    return hx_emu_tf32(x);
}
static inline void hx_hip_mma_bf16(float *d, const uint32_t *a, const uint32_t *b)
{
    uint32_t in[10], out[4];
    memcpy(in, a, 16), memcpy(in + 4, b, 8), memcpy(in + 6, d, 16);
    hx_emu_mma(HX_EMU_MMA_BF16, in, out);
    memcpy(d, out, 16);
}
static inline void hx_hip_mma_tf32(float *d, const uint32_t *a, const uint32_t *b)
{
    uint32_t in[10], out[4];
    memcpy(in, a, 16), memcpy(in + 4, b, 8), memcpy(in + 6, d, 16);
    hx_emu_mma(HX_EMU_MMA_TF32, in, out);
    memcpy(d, out, 16);
}

/* AMD WMMA beyond RDNA3's f16 (hip-compat.h's AMD WMMA block; layouts in hip-emu-mma.cpp):
 * RDNA3 int8 and RDNA4 f16 / int8. Kinds from 16 up, apart from the NVIDIA ones. in: A words, B
 * words, 8 C words: 4 + 4 (RDNA3 int8: 16 bytes; RDNA4 f16: 8 halves), 2 + 2 (RDNA4 int8: 8
 * bytes). RDNA3 int8 has RDNA3's half-wave repetition rule; RDNA4 has none. */
enum { HX_EMU_WMMA_I8 = 16, HX_EMU_WMMA12_F16 = 17, HX_EMU_WMMA12_I8 = 18 };
static inline void hx_emu_wmma_amd(int kind, void *d, const void *a, const void *b, int ab_words)
{
    uint32_t in[24], out[8];
    memcpy(in, a, 4 * (size_t)ab_words), memcpy(in + ab_words, b, 4 * (size_t)ab_words);
    memcpy(in + 2 * ab_words, d, 32);
    hx_emu_mma(kind, in, out);
    memcpy(d, out, 32);
}
static inline void hx_hip_wmma_i8(int *d, const uint32_t *a, const uint32_t *b)
{
    hx_emu_wmma_amd(HX_EMU_WMMA_I8, d, a, b, 4);
}
static inline void hx_hip_wmma12_f16(float *d, const uint16_t *a, const uint16_t *b)
{
    hx_emu_wmma_amd(HX_EMU_WMMA12_F16, d, a, b, 4);
}
static inline void hx_hip_wmma12_i8(int *d, const uint32_t *a, const uint32_t *b)
{
    hx_emu_wmma_amd(HX_EMU_WMMA12_I8, d, a, b, 2);
}

/* ---- runtime ----------------------------------------------------------------------------- */

enum hipError_t {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorNoBinaryForGpu = 209,
    hipErrorInsufficientDriver = 35,
    hipErrorLaunchFailure = 719,
    hipErrorNotSupported = 801,
    hipErrorStreamCaptureUnsupported = 900,
    hipErrorStreamCaptureInvalidated = 901,
};
enum hipMemcpyKind {
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
};
struct hx_emu_stream;
struct hx_emu_event;
typedef hx_emu_stream *hipStream_t;
typedef hx_emu_event *hipEvent_t;
struct hx_emu_graph;
struct hx_emu_graph_exec;
typedef hx_emu_graph *hipGraph_t;
typedef hx_emu_graph_exec *hipGraphExec_t;
typedef void *hipGraphNode_t;
enum hipStreamCaptureMode {
    hipStreamCaptureModeGlobal = 0,
    hipStreamCaptureModeThreadLocal = 1,
    hipStreamCaptureModeRelaxed = 2,
};
#define hipStreamNonBlocking 1u
#define hipEventDefault 0u
#define hipEventDisableTiming 2u
#define hipHostMallocDefault 0u

struct hipDeviceProp_t {
    char name[256];
    char gcnArchName[256];
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
    int integrated;
    int warpSize;
};

hipError_t hipGetDeviceCount(int *n);
hipError_t hipSetDevice(int idx);
hipError_t hipGetDevice(int *idx);
hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int idx);
hipError_t hipDriverGetVersion(int *v);
hipError_t hipRuntimeGetVersion(int *v);
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes);
hipError_t hipMalloc(void **p, size_t n);
hipError_t hipFree(void *p);
hipError_t hipHostMalloc(void **p, size_t n, unsigned flags);
hipError_t hipHostFree(void *p);
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t s);
hipError_t hipMemsetAsync(void *dst, int v, size_t n, hipStream_t s);
hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned flags);
hipError_t hipStreamDestroy(hipStream_t s);
hipError_t hipStreamSynchronize(hipStream_t s);
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags);
hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned flags);
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s);
hipError_t hipEventSynchronize(hipEvent_t e);
hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b);
hipError_t hipEventDestroy(hipEvent_t e);
hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode mode);
hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *graph);
hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph, hipGraphNode_t *err_node,
                               char *log, size_t log_len);
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t s);
hipError_t hipGraphExecDestroy(hipGraphExec_t exec);
hipError_t hipGraphDestroy(hipGraph_t graph);
hipError_t hipGetLastError(void);
const char *hipGetErrorName(hipError_t e);
const char *hipGetErrorString(hipError_t e);

/* Run fn(ctx) as grid x block GPU threads; on a stream under capture, record it instead, with
 * a copy of the ctx_bytes bytes at ctx (the closure holding the kernel's arguments). */
hipError_t hx_emu_launch(dim3 grid, dim3 block, hipStream_t s, void (*fn)(void *), const void *ctx,
                         size_t ctx_bytes);
/* Why the last failed launch failed ("threads of block (3,0,0) wait at different barriers"). */
const char *hx_emu_last_message(void);
