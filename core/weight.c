/*
 * weight.c — a weight's rows wherever they lie: in one block (hx_weight.data), or, for a fused
 * weight whose parts are not end to end in the file, in its parts, each in place in the model's
 * mapping (include/hx-backend.h). Here: the contiguous spans a device copies or uploads from,
 * a copy of any byte range, row pointers, row slices (tensor-split), and the one host matrix of
 * a weight of parts that a device running from host memory asks for.
 *
 * Invariants: a weight of parts has n_parts in 1..HX_WEIGHT_MAX_PARTS, every part whole rows,
 * the parts' bytes adding up to n_rows * row bytes, and data either NULL or the host copy
 * hx_weight_host made — owned by whoever owns the hx_weight struct, freed by
 * hx__weight_host_free. hx__host_copy_bytes counts the copies alive in the process.
 */
#include <stdatomic.h>
#include <string.h>

#include "hx-impl.h"

static atomic_size_t hx__host_copy_bytes;

static size_t hx__rows_bytes(const struct hx_weight *w)
{
    return (size_t)w->n_rows * hx_dtype_row_bytes(w->type, w->n_cols);
}

int hx_weight_span(const struct hx_weight *w, size_t off, const void **src, size_t *n)
{
    *src = NULL, *n = 0;
    size_t total = w ? hx__rows_bytes(w) : 0;
    if (!w || off >= total)
        return hx__set_error(HX_E_INVAL, "weight %s: byte %zu of %zu", w && w->name ? w->name : "?",
                             off, total);
    if (w->data) {
        *src = (const char *)w->data + off, *n = total - off;
        return HX_OK;
    }
    const size_t left = total - off;
    for (int i = 0; i < w->n_parts; i++) {
        const struct hx_weight_part *p = &w->parts[i];
        if (off < p->nbytes) {
            *src = (const char *)p->data + off, *n = HX_MIN(p->nbytes - off, left);
            return HX_OK;
        }
        off -= p->nbytes;
    }
    return hx__set_error(HX_E_INVAL, "weight %s: its parts hold fewer bytes than its rows",
                         w->name ? w->name : "?");
}

int hx_weight_read(const struct hx_weight *w, size_t off, void *dst, size_t n)
{
    size_t total = w ? hx__rows_bytes(w) : 0;
    if (!w || off > total || n > total - off)
        return hx__set_error(HX_E_INVAL, "weight %s: bytes [%zu, +%zu) of %zu",
                             w && w->name ? w->name : "?", off, n, total);
    for (size_t done = 0; done < n;) {
        const void *src;
        size_t k;
        int st = hx_weight_span(w, off + done, &src, &k);
        if (st) return st;
        k = HX_MIN(k, n - done);
        memcpy((char *)dst + done, src, k);
        done += k;
    }
    return HX_OK;
}

const void *hx__weight_row(const struct hx_weight *w, int64_t r)
{
    const void *src;
    size_t n;
    size_t rb = hx_dtype_row_bytes(w->type, w->n_cols);
    /* parts are whole rows: a row never straddles two */
    return hx_weight_span(w, (size_t)r * rb, &src, &n) == HX_OK && n >= rb ? src : NULL;
}

int hx_weight_host(const struct hx_weight *w, const void **data)
{
    *data = NULL;
    if (!w) return hx__set_error(HX_E_INVAL, "no weight");
    const void *have = __atomic_load_n(&w->data, __ATOMIC_ACQUIRE);
    if (have || !w->n_parts) return *data = have, HX_OK;
    size_t total = hx__rows_bytes(w);
    void *copy = hx__malloc(total ? total : 1);
    if (!copy)
        return hx__set_error(HX_E_NOMEM, "weight %s: no memory for its %zu-byte host matrix",
                             w->name ? w->name : "?", total);
    int st = hx_weight_read(w, 0, copy, total);
    if (st) {
        hx__free(copy);
        return st;
    }
    /* The struct is its owner's (the model's, a slice's scheduler's); the copy is a cache of
     * what the parts hold, filled once: the first of two racing callers wins. */
    const void **slot = (const void **)&((struct hx_weight *)w)->data;
    const void *expect = NULL;
    if (__atomic_compare_exchange_n(slot, &expect, copy, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        atomic_fetch_add(&hx__host_copy_bytes, total);
        HX_LOG_DEBUG("weight %s: host matrix of its %d parts made (%zu bytes)",
                     w->name ? w->name : "?", w->n_parts, total);
        return *data = copy, HX_OK;
    }
    hx__free(copy);
    return *data = expect, HX_OK;
}

size_t hx_weight_host_bytes(void)
{
    return atomic_load(&hx__host_copy_bytes);
}

void hx__weight_host_free(struct hx_weight *w)
{
    if (!w || !w->n_parts || !w->data) return;
    atomic_fetch_sub(&hx__host_copy_bytes, hx__rows_bytes(w));
    hx__free((void *)w->data);
    w->data = NULL;
}

void hx__weight_slice(const struct hx_weight *w, int64_t r0, int64_t n, struct hx_weight *out)
{
    size_t rb = hx_dtype_row_bytes(w->type, w->n_cols);
    size_t b0 = (size_t)r0 * rb, b1 = (size_t)(r0 + n) * rb;
    *out = *w;
    out->n_rows = n;
    out->nbytes = b1 - b0;
    out->n_parts = 0;
    memset(out->parts, 0, sizeof out->parts);
    if (!w->n_parts) {
        out->data = (const char *)w->data + b0;
        return;
    }
    out->data = NULL; /* w's host copy, if any, is w's; the slice is described by its parts */
    size_t at = 0;
    for (int i = 0; i < w->n_parts; i++) {
        const struct hx_weight_part *p = &w->parts[i];
        size_t lo = HX_MAX(at, b0), hi = HX_MIN(at + p->nbytes, b1);
        if (lo < hi)
            out->parts[out->n_parts++] =
                (struct hx_weight_part){(const char *)p->data + (lo - at), hi - lo};
        at += p->nbytes;
    }
    if (out->n_parts == 1) { /* within one part: a plain view of it */
        out->data = out->parts[0].data;
        out->n_parts = 0;
        memset(out->parts, 0, sizeof out->parts);
    } else if (out->n_parts == 0) {
        out->data = w->parts[0].data; /* an empty slice: any valid pointer, no bytes */
    }
}
