/*
 * hip-module.h — the ABI between hip-loader.c (in hxcore, plain C, no GPU headers) and the
 * dlopened device module (libhx-hip-amd.so built by hipcc, libhx-hip-cuda.so by nvcc from the
 * same sources). The module exports one symbol, hx_hip_module_get_ops; the loader checks
 * abi_version and struct_size before using the table. Module entries never call back into the
 * engine except through struct hx_hip_host; errors come back as an hx_status plus a message
 * in err[] naming the runtime call and its native error ("hipMalloc: hipErrorOutOfMemory ...").
 * Buffers: hx_buffer.ctx is the device pointer. Weights: the handle is the module's own.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HX_HIP_MODULE_ABI 1
#define HX_HIP_MODULE_SYMBOL "hx_hip_module_get_ops"

struct hx_hip_host {
    uint32_t struct_size;
    void *(*malloc_fn)(size_t nbytes);
    void (*free_fn)(void *ptr);
};

struct hx_hip_module_ops {
    uint32_t abi_version;    /* HX_HIP_MODULE_ABI */
    uint32_t struct_size;
    const char *runtime;     /* "rocm" or "cuda" */
    int (*device_count)(int *n, char *err, size_t len);
    int (*device_info)(int idx, struct hx_device_info *out, char *err, size_t len);
    int (*init)(int idx, void **mdev, char *err, size_t len);
    void (*fini)(void *mdev);
    int (*buffer_alloc)(void *mdev, size_t nbytes, void **dptr, char *err, size_t len);
    void (*buffer_free)(void *mdev, void *dptr);
    int (*buffer_write)(void *mdev, void *dptr, size_t off, const void *src, size_t nbytes,
                        char *err, size_t len);
    int (*buffer_read)(void *mdev, const void *dptr, size_t off, void *dst, size_t nbytes,
                       char *err, size_t len);
    int (*copy)(void *mdev, void *dst, const void *src, size_t nbytes, char *err, size_t len);
    int (*weight_prepare)(void *mdev, const struct hx_weight *w, void **handle, char *err,
                          size_t len);
    void (*weight_release)(void *mdev, void *handle);
    bool (*supports)(const struct hx_op_desc *op);
    int (*run)(void *mdev, const struct hx_split *split, char *err, size_t len);
    int (*synchronize)(void *mdev, char *err, size_t len);
};

typedef const struct hx_hip_module_ops *(*hx_hip_module_get_ops_fn)(uint32_t abi,
                                                                    const struct hx_hip_host *h);

#ifdef __cplusplus
}
#endif
