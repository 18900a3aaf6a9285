/*
 * vulkan-mem.c — buffers and weights of the Vulkan backend.
 *
 * Unified-memory devices (integrated GPUs, lavapipe): every buffer is DEVICE_LOCAL |
 * HOST_VISIBLE | HOST_COHERENT, persistently mapped; writes, reads and weight uploads are a
 * memcpy into the mapping (no staging, no second copy), and hx_buffer.host points at it.
 * Discrete GPUs: buffers are device-local, reached through a host-visible staging buffer and
 * vkCmdCopyBuffer; hx_buffer.host is NULL. Buffer transfers first wait for the split in
 * flight (buffer_write/read are blocking per the vtable contract).
 *
 * Weights are uploaded once at weight_prepare as their GGUF bytes (no float copy; a fused
 * weight of parts part by part, each from the mapping to its row offset), followed
 * by HX_VK_WEIGHT_SLACK bytes a shader may over-read; a weight
 * the scheduler did not prepare (a norm gain, rope_freqs) is prepared on first use and kept
 * in the device's lazy list until fini. Allocation failures name the bytes needed and what
 * the heap has.
 */
#include <stdio.h>
#include <string.h>

#include "vulkan-impl.h"

struct hx_vk_lazy {
    struct hx_vk_lazy *next;
    const struct hx_weight *w;
    struct hx_vk_weight *h;
};

static size_t hx_vk_heap_size(struct hx_vk_dev *d, uint32_t type)
{
    VkPhysicalDeviceMemoryProperties mp;
    hx__vk_fn.vkGetPhysicalDeviceMemoryProperties(d->phys->pd, &mp);
    return (size_t)mp.memoryHeaps[mp.memoryTypes[type].heapIndex].size;
}

int hx__vk_buf_create(struct hx_device *dev, size_t nbytes, bool host, struct hx_vk_buf *out,
                      const char *what)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    memset(out, 0, sizeof *out);
    if (d->lost) return hx_device_set_error(dev, HX_E_DEVICE, "device lost earlier");
    d->gen++; /* kept recordings bind buffers by handle: a new one may reuse a freed handle */
    size_t alloc = (HX_MAX(nbytes, 16) + 255) & ~(size_t)255;
    if (d->phys->max_alloc && alloc > d->phys->max_alloc)
        return hx_device_set_error(dev, HX_E_NOMEM,
                                   "%s: %zu bytes needed, the device allows %zu per allocation",
                                   what, alloc, (size_t)d->phys->max_alloc);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = alloc,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 (d->phys->max_texels ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = hx__vk_fn.vkCreateBuffer(d->dev, &bci, NULL, &out->buf);
    if (r != VK_SUCCESS) {
        out->buf = VK_NULL_HANDLE;
        return hx__vk_fail(dev, r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    hx__vk_fn.vkGetBufferMemoryRequirements(d->dev, out->buf, &req);
    uint32_t type = host ? d->mt_host : d->mt_device;
    if (!(req.memoryTypeBits & (1u << type))) {
        hx__vk_buf_destroy(d, out);
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "%s: memory type %u not allowed", what,
                                   type);
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    r = hx__vk_fn.vkAllocateMemory(d->dev, &mai, NULL, &out->mem);
    if (r != VK_SUCCESS) {
        out->mem = VK_NULL_HANDLE;
        hx__vk_buf_destroy(d, out);
        return hx_device_set_error(dev, HX_E_NOMEM,
                                   "%s: vkAllocateMemory of %zu bytes failed: %s (VkResult %d); "
                                   "the heap has %zu bytes",
                                   what, (size_t)req.size, hx__vk_result_name(r), (int)r,
                                   hx_vk_heap_size(d, type));
    }
    if ((r = hx__vk_fn.vkBindBufferMemory(d->dev, out->buf, out->mem, 0)) != VK_SUCCESS) {
        hx__vk_buf_destroy(d, out);
        return hx__vk_fail(dev, r, "vkBindBufferMemory");
    }
    if (host || d->uma) {
        if ((r = hx__vk_fn.vkMapMemory(d->dev, out->mem, 0, VK_WHOLE_SIZE, 0, &out->map)) !=
            VK_SUCCESS) {
            hx__vk_buf_destroy(d, out);
            return hx__vk_fail(dev, r, "vkMapMemory");
        }
    }
    out->nbytes = nbytes;
    return HX_OK;
}

void hx__vk_buf_destroy(struct hx_vk_dev *d, struct hx_vk_buf *b)
{
    if (b->buf) d->gen++, hx__vk_fn.vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) hx__vk_fn.vkFreeMemory(d->dev, b->mem, NULL); /* unmaps implicitly */
    memset(b, 0, sizeof *b);
}

int hx__vk_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf)
{
    struct hx_vk_buf *b = hx__calloc(1, sizeof *b);
    if (!b) return HX_E_NOMEM;
    int st = hx__vk_buf_create(dev, nbytes, false, b, "buffer_alloc");
    if (st != HX_OK) {
        hx__free(b);
        return st;
    }
    buf->ctx = b;
    buf->host = b->map; /* host-visible + coherent: valid once synchronize has returned */
    buf->nbytes = nbytes;
    return HX_OK;
}

void hx__vk_buffer_free(struct hx_device *dev, struct hx_buffer *buf)
{
    struct hx_vk_buf *b = buf->ctx;
    if (!b) return;
    hx__vk_wait(dev);
    hx__vk_idle_if_lost(dev);
    hx__vk_buf_destroy(hx_vk_ctx(dev), b);
    hx__free(b);
    buf->ctx = NULL;
    buf->host = NULL;
}

static int hx_vk_staging(struct hx_device *dev, size_t nbytes)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (d->staging.buf && d->staging.nbytes >= nbytes) return HX_OK;
    hx__vk_buf_destroy(d, &d->staging);
    return hx__vk_buf_create(dev, nbytes, true, &d->staging, "staging buffer");
}

/* One blocking buffer copy on the queue (discrete devices). */
static int hx_vk_copy_now(struct hx_device *dev, VkBuffer dst, size_t dst_off, VkBuffer src,
                          size_t src_off, size_t nbytes)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    int st = hx__vk_begin(dev);
    if (st) return st;
    VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = nbytes};
    hx__vk_fn.vkCmdCopyBuffer(d->rec->cb, src, dst, 1, &c);
    if ((st = hx__vk_submit(dev))) return st;
    return hx__vk_wait(dev);
}

#define HX_VK_STAGE_CHUNK ((size_t)64 << 20)

static int hx_vk_upload(struct hx_device *dev, struct hx_vk_buf *b, size_t off, const void *src,
                        size_t nbytes)
{
    int st = hx__vk_wait(dev);
    if (st) return st;
    if (b->map) {
        memcpy((char *)b->map + off, src, nbytes);
        return HX_OK;
    }
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    for (size_t done = 0; done < nbytes;) {
        size_t n = HX_MIN(nbytes - done, HX_VK_STAGE_CHUNK);
        if ((st = hx_vk_staging(dev, n))) return st;
        memcpy(d->staging.map, (const char *)src + done, n);
        if ((st = hx_vk_copy_now(dev, b->buf, off + done, d->staging.buf, 0, n))) return st;
        done += n;
    }
    return HX_OK;
}

static int hx_vk_download(struct hx_device *dev, struct hx_vk_buf *b, size_t off, void *dst,
                          size_t nbytes)
{
    int st = hx__vk_wait(dev);
    if (st) return st;
    if (b->map) {
        memcpy(dst, (const char *)b->map + off, nbytes);
        return HX_OK;
    }
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    for (size_t done = 0; done < nbytes;) {
        size_t n = HX_MIN(nbytes - done, HX_VK_STAGE_CHUNK);
        if ((st = hx_vk_staging(dev, n))) return st;
        if ((st = hx_vk_copy_now(dev, d->staging.buf, 0, b->buf, off + done, n))) return st;
        memcpy((char *)dst + done, d->staging.map, n);
        done += n;
    }
    return HX_OK;
}

int hx__vk_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                        const void *src, size_t nbytes)
{
    return hx_vk_upload(dev, buf->ctx, offset, src, nbytes);
}

int hx__vk_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                       size_t nbytes)
{
    return hx_vk_download(dev, buf->ctx, offset, dst, nbytes);
}

int hx__vk_copy(struct hx_device *dev, struct hx_buffer *dst, size_t dst_off, struct hx_buffer *src,
                size_t src_off, size_t nbytes)
{
    struct hx_vk_buf *s = src->ctx, *t = dst->ctx;
    int st = hx__vk_wait(dev);
    if (st) return st;
    if (s->map && t->map) {
        memmove((char *)t->map + dst_off, (const char *)s->map + src_off, nbytes);
        return HX_OK;
    }
    return hx_vk_copy_now(dev, t->buf, dst_off, s->buf, src_off, nbytes);
}

int hx__vk_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle)
{
    *handle = NULL;
    size_t row_bytes = hx_dtype_row_bytes(w->type, w->n_cols);
    if (!row_bytes || (size_t)w->n_rows * row_bytes > w->nbytes)
        return hx_device_set_error(dev, HX_E_INVAL,
                                   "weight %s: %lld x %lld %s does not fit %zu bytes",
                                   w->name ? w->name : "?", (long long)w->n_rows,
                                   (long long)w->n_cols, hx_dtype_name(w->type), w->nbytes);
    struct hx_vk_weight *h = hx__calloc(1, sizeof *h);
    if (!h) return HX_E_NOMEM;
    h->w = w;
    h->row_bytes = row_bytes;
    size_t n = (size_t)w->n_rows * row_bytes;
    char what[160];
    snprintf(what, sizeof what, "weight %s", w->name ? w->name : "?");
    /* the slack past the rows is what a shader's block view may over-read (never used) */
    int st = hx__vk_buf_create(dev, n + HX_VK_WEIGHT_SLACK, false, &h->b, what);
    /* each contiguous piece (all of data, or each part of a fused weight) at its offset:
     * from the model's mapping straight into the buffer (or its staging) */
    for (size_t off = 0, k; st == HX_OK && off < n; off += k) {
        const void *src;
        st = hx_weight_span(w, off, &src, &k);
        if (st == HX_OK) st = hx_vk_upload(dev, &h->b, off, src, k);
    }
    if (st == HX_OK && h->b.map) memset((char *)h->b.map + n, 0, HX_VK_WEIGHT_SLACK);
    if (st != HX_OK) {
        hx__vk_buf_destroy(hx_vk_ctx(dev), &h->b);
        hx__free(h);
        return st;
    }
    *handle = h;
    return HX_OK;
}

/* A weight's buffer: its GGUF rows and HX_VK_WEIGHT_SLACK bytes (as weight_prepare makes it). */
int hx__vk_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                        size_t *out)
{
    (void)dev;
    const struct hx_vk_weight *h = handle;
    *out = h ? h->b.nbytes
             : (size_t)w->n_rows * hx_dtype_row_bytes(w->type, w->n_cols) + HX_VK_WEIGHT_SLACK;
    return HX_OK;
}

void hx__vk_weight_release(struct hx_device *dev, void *handle)
{
    struct hx_vk_weight *h = handle;
    if (!h) return;
    hx__vk_wait(dev);
    hx__vk_idle_if_lost(dev);
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    for (int64_t i = 0; i < h->n_views; i++)
        if (h->views[i]) hx__vk_fn.vkDestroyBufferView(d->dev, h->views[i], NULL);
    hx__free(h->views);
    hx__vk_buf_destroy(d, &h->b);
    hx__free(h);
}

int hx__vk_weight_get(struct hx_device *dev, const struct hx_weight *w, void *handle,
                      struct hx_vk_weight **out)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (handle) {
        *out = handle;
        return HX_OK;
    }
    for (struct hx_vk_lazy *l = d->lazy; l; l = l->next)
        if (l->w == w) {
            *out = l->h;
            return HX_OK;
        }
    /* Not prepared for this device: upload now (outside any recording), keep until fini. */
    struct hx_vk_lazy *l = hx__calloc(1, sizeof *l);
    if (!l) return HX_E_NOMEM;
    void *h;
    int st = hx__vk_weight_prepare(dev, w, &h);
    if (st) {
        hx__free(l);
        return st;
    }
    l->w = w;
    l->h = h;
    l->next = d->lazy;
    d->lazy = l;
    *out = h;
    return HX_OK;
}

void hx__vk_lazy_free(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    while (d->lazy) {
        struct hx_vk_lazy *l = d->lazy;
        d->lazy = l->next;
        hx__vk_weight_release(dev, l->h);
        hx__free(l);
    }
}

/* The bytes the scratch is allocated with when nbytes are needed: rounded up so a growing
 * batch does not reallocate every split, within the texel-view limit (less than nbytes: too
 * large). */
size_t hx__vk_scratch_size(struct hx_vk_dev *d, size_t nbytes)
{
    if (!nbytes) return 0;
    size_t n = HX_MAX(nbytes + nbytes / 2, (size_t)1 << 16);
    return HX_MIN((n + 15) & ~(size_t)15,
                  (size_t)HX_MIN(d->phys->max_texels, (VkDeviceSize)1 << 28) * 16u);
}

/* Grow the int8 activation scratch to nbytes (between splits: nothing in flight uses it). */
int hx__vk_scratch_reserve(struct hx_device *dev, size_t nbytes)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!nbytes || (d->scratch.buf && d->scratch.nbytes >= nbytes)) return HX_OK;
    int st = hx__vk_wait(dev);
    if (st) return st;
    if (d->scratch_view) hx__vk_fn.vkDestroyBufferView(d->dev, d->scratch_view, NULL);
    d->scratch_view = VK_NULL_HANDLE;
    hx__vk_buf_destroy(d, &d->scratch);
    size_t n = hx__vk_scratch_size(d, nbytes);
    if (n < nbytes)
        return hx_device_set_error(dev, HX_E_NOMEM, "int8 scratch: %zu bytes needed", nbytes);
    st = hx__vk_buf_create(dev, n, false, &d->scratch, "int8 activation scratch");
    if (st == HX_OK) st = hx__vk_view_create(dev, d->scratch.buf, 0, n, &d->scratch_view);
    return st;
}

int hx__vk_view_create(struct hx_device *dev, VkBuffer buf, size_t off, size_t nbytes,
                       VkBufferView *out)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    VkBufferViewCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = buf,
        .format = VK_FORMAT_R32G32B32A32_UINT,
        .offset = off,
        .range = nbytes & ~(size_t)15,
    };
    VkResult r = hx__vk_fn.vkCreateBufferView(d->dev, &ci, NULL, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return hx__vk_fail(dev, r, "vkCreateBufferView");
    }
    return HX_OK;
}
