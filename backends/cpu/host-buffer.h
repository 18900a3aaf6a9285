/*
 * host-buffer.h — buffers in host memory, shared by the `ref` and `cpu` backends (both run
 * on the host, so a buffer is an aligned heap block and buffer->host points at it). Weights
 * are used in place from the model's mapping: weight_prepare returns the hx_weight itself.
 */
#pragma once

#include "hx-backend.h"

int hx__host_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf);
void hx__host_buffer_free(struct hx_device *dev, struct hx_buffer *buf);
int hx__host_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                          const void *src, size_t nbytes);
int hx__host_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                         size_t nbytes);
int hx__host_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle);
/* Host memory in bytes: MemTotal and MemAvailable (/proc/meminfo; sysconf where absent). */
void hx__host_memory(size_t *total, size_t *avail);
/* Fill a device_info for a host CPU device (name, host memory, all weight types). */
void hx__host_device_info(const char *name, const char *description, struct hx_device_info *out);
