/*
 * device.c — hx__dev_* wrappers: the only way the core calls into a backend. They check
 * arguments, apply the documented defaults of optional entries, and consult the fault
 * injector (core/fault.c) so tests can make any device fail at any call.
 */
#include <string.h>

#include "registry.h"

static int hx__dev_fault(struct hx_device *dev, const char *entry)
{
    bool hang = false;
    if (!hx__fault_check(dev, entry, &hang)) return HX_OK;
    if (hang)
        return hx_device_set_error(dev, HX_E_TIMEOUT, "%s: injected hang (timed out)", entry);
    return hx_device_set_error(dev, HX_E_DEVICE, "%s: injected device error", entry);
}

int hx__dev_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer **out)
{
    *out = NULL;
    int st = hx__dev_fault(dev, "buffer_alloc");
    if (st) return st;
    struct hx_buffer *b = hx__calloc(1, sizeof *b);
    if (!b) return HX_E_NOMEM;
    b->dev = dev;
    b->nbytes = nbytes;
    if ((st = dev->ops->buffer_alloc(dev, nbytes, b)) != HX_OK) {
        hx__free(b);
        return st;
    }
    *out = b;
    return HX_OK;
}

void hx__dev_buffer_free(struct hx_buffer *buf)
{
    if (!buf) return;
    buf->dev->ops->buffer_free(buf->dev, buf);
    hx__free(buf);
}

int hx__dev_buffer_write(struct hx_buffer *buf, size_t off, const void *src, size_t nbytes)
{
    if (off > buf->nbytes || nbytes > buf->nbytes - off) return HX_E_RANGE;
    if (!nbytes) return HX_OK;
    int st = hx__dev_fault(buf->dev, "buffer_write");
    return st ? st : buf->dev->ops->buffer_write(buf->dev, buf, off, src, nbytes);
}

int hx__dev_buffer_read(struct hx_buffer *buf, size_t off, void *dst, size_t nbytes)
{
    if (off > buf->nbytes || nbytes > buf->nbytes - off) return HX_E_RANGE;
    if (!nbytes) return HX_OK;
    int st = hx__dev_fault(buf->dev, "buffer_read");
    return st ? st : buf->dev->ops->buffer_read(buf->dev, buf, off, dst, nbytes);
}

/* Default copy: both host-visible → memcpy; else bounce through host memory. */
int hx__dev_copy(struct hx_buffer *dst, size_t dst_off, struct hx_buffer *src, size_t src_off,
                 size_t nbytes)
{
    if (dst_off > dst->nbytes || nbytes > dst->nbytes - dst_off) return HX_E_RANGE;
    if (src_off > src->nbytes || nbytes > src->nbytes - src_off) return HX_E_RANGE;
    if (!nbytes) return HX_OK;
    if (dst->dev == src->dev && dst->dev->ops->copy)
        return dst->dev->ops->copy(dst->dev, dst, dst_off, src, src_off, nbytes);
    if (src->host && dst->host && src->dev->ops->synchronize == NULL && dst->dev->ops->synchronize == NULL) {
        memmove((char *)dst->host + dst_off, (char *)src->host + src_off, nbytes);
        return HX_OK;
    }
    if (src->host && src->dev->ops->synchronize == NULL)
        return hx__dev_buffer_write(dst, dst_off, (char *)src->host + src_off, nbytes);
    if (dst->host && dst->dev->ops->synchronize == NULL)
        return hx__dev_buffer_read(src, src_off, (char *)dst->host + dst_off, nbytes);
    void *tmp = hx__malloc(nbytes);
    if (!tmp) return HX_E_NOMEM;
    int st = hx__dev_buffer_read(src, src_off, tmp, nbytes);
    if (st == HX_OK) st = hx__dev_buffer_write(dst, dst_off, tmp, nbytes);
    hx__free(tmp);
    return st;
}

int hx__dev_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle)
{
    *handle = NULL;
    int st = hx__dev_fault(dev, "weight_prepare");
    return st ? st : dev->ops->weight_prepare(dev, w, handle);
}

void hx__dev_weight_release(struct hx_device *dev, void *handle)
{
    if (dev->ops->weight_release) dev->ops->weight_release(dev, handle);
}

bool hx__dev_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    return dev->ops->supports(dev, op);
}

int hx__dev_run(struct hx_device *dev, const struct hx_split *split)
{
    if (!split->n_ops) return HX_OK;
    int st = hx__dev_fault(dev, "run");
    return st ? st : dev->ops->run(dev, split);
}

int hx__dev_synchronize(struct hx_device *dev)
{
    return dev->ops->synchronize ? dev->ops->synchronize(dev) : HX_OK;
}

int hx__dev_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us)
{
    if (!dev->ops->estimate_cost) return HX_E_UNSUPPORTED;
    return dev->ops->estimate_cost(dev, op, us);
}
