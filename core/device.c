/*
 * device.c — hx__dev_* wrappers: the only way the core calls into a backend. They check
 * arguments, apply the documented defaults of optional entries, and consult the fault
 * injector (core/fault.c) so tests can make any device fail, hang, run late or return a
 * corrupted result at any call.
 *
 * A corrupted run perturbs the first output row of the split's last op once the result
 * exists: right after run() on a synchronous device, at the next synchronize() on an
 * asynchronous one (the pending corruption is kept per device in a small table).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "registry.h"

static void hx__sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0) {}
}

static int hx__dev_fault(struct hx_device *dev, const char *entry, bool *corrupt)
{
    int ms = 0;
    int kind = hx__fault_check(dev, entry, &ms);
    if (corrupt) *corrupt = kind == HX_FAULT_CORRUPT;
    if (kind == HX_FAULT_HANG || kind == HX_FAULT_SLOW) hx__sleep_ms(ms);
    if (kind == HX_FAULT_HANG)
        return hx_device_set_error(dev, HX_E_TIMEOUT, "%s: injected hang (no answer in %d ms)",
                                   entry, ms);
    if (kind == HX_FAULT_ERROR)
        return hx_device_set_error(dev, HX_E_DEVICE, "%s: injected device error", entry);
    return HX_OK;
}

/* ---- injected corruption ------------------------------------------------------------------ */

#define HX__MAX_PENDING 8
static struct {
    struct hx_device *dev;
    struct hx_tensor_ref t;
} hx__pending[HX__MAX_PENDING];
static pthread_mutex_t hx__pending_mu = PTHREAD_MUTEX_INITIALIZER;

/* Perturb row 0 of t: v -> v + 1 + |v|, far outside any op's tolerance. */
static int hx__corrupt_now(struct hx_device *dev, const struct hx_tensor_ref *t)
{
    if (!t->buf || t->n_cols <= 0) return HX_OK;
    size_t nb = (size_t)t->n_cols * sizeof(float);
    float *row = hx__malloc(nb);
    if (!row) return HX_E_NOMEM;
    int st = dev->ops->buffer_read(dev, t->buf, t->offset_bytes, row, nb);
    for (int64_t i = 0; st == HX_OK && i < t->n_cols; i++)
        row[i] += 1.0f + (row[i] < 0 ? -row[i] : row[i]);
    if (st == HX_OK) st = dev->ops->buffer_write(dev, t->buf, t->offset_bytes, row, nb);
    hx__free(row);
    HX_LOG_INFO("fault: [%s] corrupted the output of a split (injected)", dev->id);
    return st;
}

static void hx__corrupt_later(struct hx_device *dev, const struct hx_tensor_ref *t)
{
    pthread_mutex_lock(&hx__pending_mu);
    for (int i = 0; i < HX__MAX_PENDING; i++)
        if (!hx__pending[i].dev || hx__pending[i].dev == dev) {
            hx__pending[i].dev = dev;
            hx__pending[i].t = *t;
            break;
        }
    pthread_mutex_unlock(&hx__pending_mu);
}

static bool hx__corrupt_take(struct hx_device *dev, struct hx_tensor_ref *t)
{
    bool found = false;
    pthread_mutex_lock(&hx__pending_mu);
    for (int i = 0; i < HX__MAX_PENDING && !found; i++)
        if (hx__pending[i].dev == dev) {
            *t = hx__pending[i].t;
            hx__pending[i].dev = NULL;
            found = true;
        }
    pthread_mutex_unlock(&hx__pending_mu);
    return found;
}

/* ---- wrappers ----------------------------------------------------------------------------- */

int hx__dev_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer **out)
{
    *out = NULL;
    int st = hx__dev_fault(dev, "buffer_alloc", NULL);
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
    int st = hx__dev_fault(buf->dev, "buffer_write", NULL);
    return st ? st : buf->dev->ops->buffer_write(buf->dev, buf, off, src, nbytes);
}

int hx__dev_buffer_read(struct hx_buffer *buf, size_t off, void *dst, size_t nbytes)
{
    if (off > buf->nbytes || nbytes > buf->nbytes - off) return HX_E_RANGE;
    if (!nbytes) return HX_OK;
    int st = hx__dev_fault(buf->dev, "buffer_read", NULL);
    return st ? st : buf->dev->ops->buffer_read(buf->dev, buf, off, dst, nbytes);
}

/* Default copy: both host-visible → memcpy; else bounce through host memory. */
int hx__dev_copy(struct hx_buffer *dst, size_t dst_off, struct hx_buffer *src, size_t src_off,
                 size_t nbytes)
{
    if (dst_off > dst->nbytes || nbytes > dst->nbytes - dst_off) return HX_E_RANGE;
    if (src_off > src->nbytes || nbytes > src->nbytes - src_off) return HX_E_RANGE;
    if (!nbytes) return HX_OK;
    int fst = hx__dev_fault(dst->dev, "copy", NULL); /* a device lost mid-transfer */
    if (fst) return fst;
    if (dst->dev == src->dev && dst->dev->ops->copy)
        return dst->dev->ops->copy(dst->dev, dst, dst_off, src, src_off, nbytes);
    if (src->host && dst->host && !hx__dev_async(src->dev) && !hx__dev_async(dst->dev)) {
        memmove((char *)dst->host + dst_off, (char *)src->host + src_off, nbytes);
        return HX_OK;
    }
    if (src->host && !hx__dev_async(src->dev))
        return hx__dev_buffer_write(dst, dst_off, (char *)src->host + src_off, nbytes);
    if (dst->host && !hx__dev_async(dst->dev))
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
    int st = hx__dev_fault(dev, "weight_prepare", NULL);
    return st ? st : dev->ops->weight_prepare(dev, w, handle);
}

int hx__dev_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                         size_t *out)
{
    *out = w ? w->nbytes : 0;
    if (!w || !dev->ops->weight_bytes) return HX_OK;
    return dev->ops->weight_bytes(dev, w, handle, out);
}

int hx__dev_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                          size_t out[HX_SCRATCH_BUFS])
{
    memset(out, 0, HX_SCRATCH_BUFS * sizeof *out);
    return dev->ops->scratch_bytes ? dev->ops->scratch_bytes(dev, sp, out) : HX_OK;
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
    bool corrupt = false;
    int st = hx__dev_fault(dev, "run", &corrupt);
    if (st == HX_OK) st = dev->ops->run(dev, split);
    if (st != HX_OK || !corrupt) return st;
    const struct hx_tensor_ref *t = &split->ops[split->n_ops - 1].dst;
    if (!hx__dev_async(dev)) return hx__corrupt_now(dev, t);
    hx__corrupt_later(dev, t);
    return HX_OK;
}

int hx__dev_synchronize(struct hx_device *dev)
{
    int st = hx__dev_async(dev) ? dev->ops->synchronize(dev) : HX_OK;
    struct hx_tensor_ref t;
    if (hx__corrupt_take(dev, &t) && st == HX_OK) st = hx__corrupt_now(dev, &t);
    return st;
}

bool hx__dev_async(const struct hx_device *dev)
{
    return dev->ops->caps & HX_BACKEND_ASYNC;
}

bool hx__dev_has_cost_model(const struct hx_device *dev)
{
    return dev->ops->estimate_cost != NULL;
}

int hx__dev_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us)
{
    if (!dev->ops->estimate_cost) return HX_E_UNSUPPORTED;
    return dev->ops->estimate_cost(dev, op, us);
}

void *hx__dev_extension(struct hx_device *dev, const char *name)
{
    return dev->ops->get_extension ? dev->ops->get_extension(dev, name) : NULL;
}

bool hx__dev_describe(struct hx_device *dev, char *out, size_t len)
{
    if (len) out[0] = '\0';
    if (!dev->ops->describe) return false;
    dev->ops->describe(dev, out, len);
    return true;
}
