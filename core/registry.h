/*
 * registry.h — the table of backends compiled in, probing, and device open/close, plus the
 * hx__dev_* wrappers through which the core calls every backend entry (argument checks,
 * defaults for optional entries, logging, fault injection).
 */
#pragma once

#include "hx-impl.h"

/* A backend compiled in, with what its one probe found (hx-backend.h: struct hx_backend_probe). */
struct hx_backend_entry {
    const struct hx_backend_ops *ops;
    int probe_status;        /* HX_OK or why not usable */
    int score;
    int n_devices;           /* 0 unless probe_status is HX_OK */
    char why[256];           /* reason when unavailable or without devices; notes otherwise */
};

/* Backends in registry order (HX_BACKENDS env may reorder or disable). Probed once. */
int hx__registry_count(void);
const struct hx_backend_entry *hx__registry_get(int i);
/* Case-insensitive lookup by backend name; NULL name = the highest-scoring usable backend. */
const struct hx_backend_entry *hx__backend_find(const char *name);
/* Describe device idx of a backend without opening it: HX_E_NOTFOUND unless the backend is
 * usable and 0 <= idx < n_devices. */
int hx__backend_device_info(const struct hx_backend_entry *e, int idx, struct hx_device_info *out);

/* Open a device by spec: "cpu", "ref", "vulkan" (its best device), "vulkan:1", "vulkan:NAME"
 * (substring of the device name), "npu-sim". HX_E_NOTFOUND / HX_E_UNAVAILABLE with a message
 * saying why. */
int hx__device_open(const char *spec, const struct hx_device_config *cfg, struct hx_device **out);
void hx__device_close(struct hx_device *dev);

/* Wrappers: the only way the core calls a backend. */
int hx__dev_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer **out);
void hx__dev_buffer_free(struct hx_buffer *buf);
int hx__dev_buffer_write(struct hx_buffer *buf, size_t off, const void *src, size_t nbytes);
int hx__dev_buffer_read(struct hx_buffer *buf, size_t off, void *dst, size_t nbytes);
int hx__dev_copy(struct hx_buffer *dst, size_t dst_off, struct hx_buffer *src, size_t src_off,
                 size_t nbytes);
int hx__dev_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle);
void hx__dev_weight_release(struct hx_device *dev, void *handle);
/* Bytes w takes on dev once prepared (handle NULL: predicted; else what handle holds). */
int hx__dev_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                         size_t *out);
/* The backend's own buffers for split sp (NULL: held now), zeros if it reports none. */
int hx__dev_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                          size_t out[HX_SCRATCH_BUFS]);
bool hx__dev_supports(struct hx_device *dev, const struct hx_op_desc *op);
int hx__dev_run(struct hx_device *dev, const struct hx_split *split);
int hx__dev_synchronize(struct hx_device *dev);
/* The backend's run() may return before its work is done (HX_BACKEND_ASYNC): results are there
 * only after hx__dev_synchronize. */
bool hx__dev_async(const struct hx_device *dev);
/* The backend predicts op times (estimate_cost); hx__dev_estimate_cost says "unknown" if not. */
bool hx__dev_has_cost_model(const struct hx_device *dev);
int hx__dev_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us);
/* A named extension of the device (hx-backend.h: get_extension), or NULL when the backend has
 * no extensions or not that one. Callers check for NULL: an extension is never guaranteed. */
void *hx__dev_extension(struct hx_device *dev, const char *name);
/* The backend's extra text for the device into out (NUL-terminated, at most len bytes; "" when
 * it has none). Returns whether the backend describes its devices at all. */
bool hx__dev_describe(struct hx_device *dev, char *out, size_t len);

/* Fault injection (HX_FAULT env or hx__fault_set): see core/fault.c. hx__fault_check says
 * what the named call on dev should do now (HX_FAULT_NONE: run normally); *delay_ms is how
 * long a hang or slow call blocks first. */
enum hx_fault_kind { HX_FAULT_NONE, HX_FAULT_ERROR, HX_FAULT_HANG, HX_FAULT_SLOW, HX_FAULT_CORRUPT };
int hx__fault_check(struct hx_device *dev, const char *entry, int *delay_ms);
int hx__fault_set(const char *spec);
