/*
 * host-buffer.c — host-memory buffers for the CPU backends. Allocations are 64-byte aligned
 * (one cache line, the widest vector) and zeroed, so a kernel may read whole vectors.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host-buffer.h"

#define HX__HOST_ALIGN 64

int hx__host_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf)
{
    (void)dev;
    size_t total = nbytes + HX__HOST_ALIGN + sizeof(void *);
    if (total < nbytes) return HX_E_NOMEM;
    char *raw = hx_calloc(1, total);
    if (!raw) return HX_E_NOMEM;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + HX__HOST_ALIGN - 1) & ~(uintptr_t)(HX__HOST_ALIGN - 1);
    ((void **)p)[-1] = raw;
    buf->ctx = raw;
    buf->host = (void *)p;
    buf->nbytes = nbytes;
    return HX_OK;
}

void hx__host_buffer_free(struct hx_device *dev, struct hx_buffer *buf)
{
    (void)dev;
    hx_free(buf->ctx);
    buf->ctx = buf->host = NULL;
}

int hx__host_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                          const void *src, size_t nbytes)
{
    (void)dev;
    memcpy((char *)buf->host + offset, src, nbytes);
    return HX_OK;
}

int hx__host_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                         size_t nbytes)
{
    (void)dev;
    memcpy(dst, (const char *)buf->host + offset, nbytes);
    return HX_OK;
}

int hx__host_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle)
{
    (void)dev;
    *handle = (void *)w;
    return HX_OK;
}

/* Host memory: MemTotal and MemAvailable of /proc/meminfo (what can be allocated without
 * swapping, page cache that can be dropped included); sysconf's pages where it is absent. */
void hx__host_memory(size_t *total, size_t *avail)
{
    *total = *avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long kib;
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) *total = (size_t)kib * 1024;
        else if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) *avail = (size_t)kib * 1024;
    }
    if (f) fclose(f);
    long pages = sysconf(_SC_PHYS_PAGES), free_pages = sysconf(_SC_AVPHYS_PAGES);
    long psz = sysconf(_SC_PAGESIZE);
    if (!*total && pages > 0 && psz > 0) *total = (size_t)pages * (size_t)psz;
    if (!*avail && free_pages > 0 && psz > 0) *avail = (size_t)free_pages * (size_t)psz;
}

void hx__host_device_info(const char *name, const char *description, struct hx_device_info *out)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->description, sizeof out->description, "%s", description);
    out->kind = HX_DEVICE_CPU;
    hx__host_memory(&out->memory_total_bytes, &out->memory_free_bytes);
    out->alignment_bytes = HX__HOST_ALIGN;
    out->unified_memory = true;
    out->weight_types = (1u << HX_DTYPE_COUNT) - 1;
}
