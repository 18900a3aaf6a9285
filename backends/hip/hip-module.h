/*
 * hip-module.h — the ABI between hip-loader.c (compiled into the engine, plain C, no GPU
 * headers) and a HIP device module loaded at run time with dlopen:
 *
 *   hx-hip-amd.so  built by hipcc (ROCm) from hip-module.hip, linked to libamdhip64
 *   hx-hip-nv.so   built by nvcc from the same source (hip-compat.h maps hip* to cuda*),
 *                  CUDA runtime linked statically, so it needs only the driver (libcuda.so.1)
 *   hx-hip-emu.so  built by the host C++ compiler (HX_HIP_EMU): the same kernels run on the
 *                  CPU by hip-emu.cpp; loaded only when HX_HIP_MODULE names it (tests)
 *
 * The module exports one symbol, hx_hip_module_get_ops. The loader checks abi_version,
 * struct_size and the layout sizes of the shared structs before using the table, so a module
 * built from other headers is refused with a reason instead of misreading memory.
 *
 * Conventions: every entry that can fail returns an hx_status and writes a one-line message
 * to err[len] naming the runtime call and its native error ("hipMalloc: hipErrorOutOfMemory
 * (out of memory), 2147483648 bytes"). The module never calls into the engine except through
 * struct hx_hip_host; it never prints and never aborts. hx_buffer.ctx is the device pointer;
 * weight handles belong to the module. A module device (void *mdev) is used by one host
 * thread at a time, like an hx_device.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HX_HIP_MODULE_ABI 5
#define HX_HIP_MODULE_SYMBOL "hx_hip_module_get_ops"

/* What the engine lends the module. log_fn (ABI 4) logs one line at an enum hx_log_level:
 * the module's only way to say something that is not an error (a graph fallback, counters). */
struct hx_hip_host {
    uint32_t struct_size;
    void *(*malloc_fn)(size_t nbytes);
    void (*free_fn)(void *ptr);
    void (*log_fn)(int level, const char *msg);
};

/* Sizes of the structs both sides read; a mismatch means different headers. */
struct hx_hip_layout {
    uint32_t backend_abi;  /* HX_BACKEND_ABI_VERSION */
    uint32_t op_bytes;     /* sizeof(struct hx_op) */
    uint32_t split_bytes;  /* sizeof(struct hx_split) */
    uint32_t buffer_bytes; /* sizeof(struct hx_buffer) */
    uint32_t weight_bytes; /* sizeof(struct hx_weight) */
    uint32_t info_bytes;   /* sizeof(struct hx_device_info) */
};

#define HX_HIP_LAYOUT_INIT                                                                         \
    {                                                                                              \
        HX_BACKEND_ABI_VERSION, (uint32_t)sizeof(struct hx_op), (uint32_t)sizeof(struct hx_split), \
            (uint32_t)sizeof(struct hx_buffer), (uint32_t)sizeof(struct hx_weight),                \
            (uint32_t)sizeof(struct hx_device_info)                                                \
    }

struct hx_hip_module_ops {
    uint32_t abi_version; /* HX_HIP_MODULE_ABI */
    uint32_t struct_size; /* sizeof(struct hx_hip_module_ops) */
    struct hx_hip_layout layout;
    const char *runtime; /* "rocm", "cuda" or "emu" */
    const char *targets; /* GPU code in the module: "gfx1030;gfx1036", "sm_80;sm_90" */
    bool simulated;      /* hx-hip-emu: correct results, no hardware timings */

    /* Runtime version and usable device count. n = 0 with HX_OK and err[] saying why
     * ("no /dev/kfd: ...", "NVIDIA driver not installed: ..."); a driver error is returned
     * as HX_E_DEVICE with the native error. Cheap; may be called more than once. */
    int (*device_count)(int *n, char *err, size_t len);
    /* Describe device idx (no context is created). */
    int (*device_info)(int idx, struct hx_device_info *out, char *err, size_t len);

    int (*init)(int idx, void **mdev, char *err, size_t len);
    void (*fini)(void *mdev); /* waits for pending work; NULL-safe */

    int (*buffer_alloc)(void *mdev, size_t nbytes, void **dptr, char *err, size_t len);
    void (*buffer_free)(void *mdev, void *dptr); /* waits for pending work */
    /* Blocking, ordered after every split enqueued before. */
    int (*buffer_write)(void *mdev, void *dptr, size_t off, const void *src, size_t nbytes,
                        char *err, size_t len);
    int (*buffer_read)(void *mdev, const void *dptr, size_t off, void *dst, size_t nbytes,
                       char *err, size_t len);
    /* Device to device on the same device; blocking. */
    int (*copy)(void *mdev, void *dst, const void *src, size_t nbytes, char *err, size_t len);

    /* Upload the weight once (GGUF blocks as stored); *handle owns the device copy. */
    int (*weight_prepare)(void *mdev, const struct hx_weight *w, void **handle, char *err,
                          size_t len);
    void (*weight_release)(void *mdev, void *handle);

    /* Pure: can the kernels run this op as described? */
    bool (*supports)(const struct hx_op_desc *op);
    /* Enqueue every op of the split on the device's stream; returns before completion.
     * Bad descriptors (a tensor outside its buffer, a token or position out of range) are
     * refused with HX_E_INVAL before anything is enqueued. */
    int (*run)(void *mdev, const struct hx_split *split, char *err, size_t len);
    /* Wait for everything enqueued; returns the first asynchronous error. */
    int (*synchronize)(void *mdev, char *err, size_t len);
    /* Live counters for get_extension("hx.timing"); device_us from stream events. */
    struct hx_timing_stats *(*timing)(void *mdev);
    /* One line for `engine devices`/benchmarks: runtime, driver, arch, targets, memory. */
    void (*describe)(void *mdev, char *out, size_t len);

    /* hipRTC (hip-rtc.h; NULL in modules without it): the code object for an AMD target
     * ("gfx1100"), from the cache or compiled now by the helper process hx-hip-rtc; path gets
     * its file, note how it was obtained ("from cache", "compiled now in 3.2 s"); a failure
     * or crash of hipRTC is err. */
    int (*rtc_get)(const char *target, char *path, size_t path_len, char *note, size_t note_len,
                   char *err, size_t len);
    /* What hx-hip-rtc runs in its own process: compile for target into out (+ out.map). */
    int (*rtc_compile)(const char *target, const char *out, char *err, size_t len);

    /* (ABI 5) The split scratch for the scheduler's memory accounting: hx_backend_ops'
     * scratch_bytes (sp NULL: what it holds now; else what sp, a plan's split whose ops may have
     * no weight handles, needs). Pure. */
    int (*scratch_bytes)(void *mdev, const struct hx_split *sp, size_t out[HX_SCRATCH_BUFS]);
};

typedef const struct hx_hip_module_ops *(*hx_hip_module_get_ops_fn)(uint32_t abi,
                                                                    const struct hx_hip_host *h);

#ifdef __cplusplus
}
#endif
