/*
 * npu-glue.h — the tiny C vtable between the NPU host path (npu-gemm.c, npu-mem.c) and a
 * runtime that executes compiled GEMM kernels (npu.md §6): open, bo_alloc, bo_map, bo_sync,
 * run, wait, abort, close, plus error strings and per-call timing. Implemented twice:
 * npu-xrt.cpp (XRT C++ API, built only with XRT >= 2.15, loaded at run time as a module) and
 * npu-sim.c (the kernel-contract simulator, pure C, always built).
 *
 * One handle = one compiled kernel (xclbin + hw_context + kernel). Calls on one handle come
 * from one thread; at most one command is in flight per handle. Every entry returns an
 * hx_status; on failure the handle's error() string says what went wrong (the native code or
 * exception text included). Nothing here throws, aborts or prints.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* XRT buffer flags (xrt_mem.h values) and sync directions (XCL_BO_SYNC_*). */
#define HX_NPU_BO_CACHEABLE (1u << 24)
#define HX_NPU_BO_HOST_ONLY (1u << 29)
#define HX_NPU_SYNC_TO_DEVICE 0
#define HX_NPU_SYNC_FROM_DEVICE 1

/* ert_cmd_state values seen by the host (ert.h). */
enum hx_npu_cmd_state {
    HX_NPU_STATE_COMPLETED = 4,
    HX_NPU_STATE_ERROR = 5,
    HX_NPU_STATE_ABORT = 6,
    HX_NPU_STATE_TIMEOUT = 8,
    HX_NPU_STATE_NORESPONSE = 9,
};

/* Kernel argument layout of an mlir-aie GEMM (npu.md §1.2). */
#define HX_NPU_OPCODE 3u
#define HX_NPU_ARG_INSTR 1       /* group_id of the instruction BO */
#define HX_NPU_ARG_BO0 3         /* group_id of the first host BO (A); B = 4, C = 5 */
#define HX_NPU_MAX_HOST_BOS 5

/* Bumped when hx_npu_glue_ops changes; the XRT module is refused on a mismatch. */
#define HX_NPU_GLUE_ABI 1

/* What a runtime needs to know about the kernel it opens (from the manifest). */
struct hx_npu_kernel_desc {
    int64_t M, K, N;             /* problem size of one call */
    int64_t m, k, n;             /* per-core tile */
    int cols;                    /* AIE columns */
    int dev_gen;                 /* 3 = NPU1 (Phoenix/Hawk), 4 = NPU2 (Strix/Krackan/Halo) */
    int in_bytes, out_bytes;     /* 1 and 4 for i8 -> i32 */
    bool b_col_maj, c_col_maj;
    const char *xclbin_path;     /* NULL/"" for the simulator's built-in kernels */
};

struct hx_npu_glue_ops {
    const char *name;            /* "xrt", "sim" */
    /* Open device 0, load the xclbin, find the MLIR_AIE kernel, create the hw_context.
     * On failure *h is NULL and err[] says why. */
    int (*open)(const struct hx_npu_kernel_desc *kd, void **h, char *err, size_t err_len);
    /* flags: HX_NPU_BO_CACHEABLE (instructions, group 1) or HX_NPU_BO_HOST_ONLY (3 + i).
     * HX_E_NOMEM when the allocation fails (memlock limit on hardware). */
    int (*bo_alloc)(void *h, size_t nbytes, uint32_t flags, int group_id, void **bo);
    void (*bo_free)(void *h, void *bo);
    void *(*bo_map)(void *h, void *bo);
    /* Partial sync of [offset, offset + nbytes). */
    int (*bo_sync)(void *h, void *bo, int dir, size_t nbytes, size_t offset);
    /* Start one call: opcode (3), instruction BO, instruction word count, host BOs (A, B, C). */
    int (*run)(void *h, uint32_t opcode, void *instr_bo, uint32_t ninstr, void *const *bos,
               int n_bos);
    /* Wait for the started call; *state gets the ert_cmd_state. timeout_ms 0 = forever.
     * Returns HX_OK whenever a state was obtained (check *state). After TIMEOUT the caller
     * must call abort before the next run. */
    int (*wait)(void *h, uint32_t timeout_ms, int *state);
    int (*abort)(void *h);
    void (*close)(void *h);
    const char *(*error)(void *h);   /* last error of the handle; never NULL */
    /* Device time of the last completed call in µs; *modelled set when it comes from a
     * latency model rather than a measurement. HX_E_UNSUPPORTED when unknown. */
    int (*last_device_us)(void *h, double *us, bool *modelled);
};

extern const struct hx_npu_glue_ops hx__npu_sim_glue;

/* Exported by the XRT glue module (libhx-npu-xrt.so): its table if abi matches, else NULL. */
typedef const struct hx_npu_glue_ops *(*hx_npu_xrt_glue_get_fn)(uint32_t abi);
#define HX_NPU_XRT_GLUE_SYMBOL "hx_npu_xrt_glue_get"

#ifdef __cplusplus
}
#endif
