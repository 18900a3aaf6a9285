/*
 * sse.c — server-sent events inside HTTP/1.1 chunked transfer coding, and stop strings.
 *
 * Stop strings: generated text is released as soon as it cannot be the start of a stop string.
 * Invariant: the held text is the shortest suffix of everything generated that might still
 * grow into a stop string, so a stop string is always matched inside the held text, and
 * released text never contains any part of a matched stop string. Stop strings are valid
 * UTF-8, so a held suffix starts on a character boundary and released text stays whole.
 */
#include <string.h>

#include "server.h"

void hx__srv_http_chunk(struct hx_srv_buf *b, const char *data, size_t len)
{
    if (!len) return; /* a zero-size chunk would end the body */
    hx__srv_buf_printf(b, "%zx\r\n", len);
    hx__srv_buf_append(b, data, len);
    hx__srv_buf_append(b, "\r\n", 2);
}

void hx__srv_sse_event(struct hx_srv_buf *b, const char *payload, size_t len)
{
    hx__srv_buf_printf(b, "%zx\r\ndata: ", len + 8);
    hx__srv_buf_append(b, payload, len);
    hx__srv_buf_append(b, "\n\n\r\n", 4);
}

/* Earliest position of any stop string in h, or -1. */
static ptrdiff_t hx_srv_stop_find(const struct hx_srv_stopper *s, const char *h, size_t n)
{
    ptrdiff_t best = -1;
    for (int i = 0; i < s->n_stops; i++) {
        const char *p = memmem(h, n, s->stops[i], strlen(s->stops[i]));
        if (p && (best < 0 || p - h < best)) best = p - h;
    }
    return best;
}

/* Length of the longest suffix of h that is a proper prefix of some stop string. */
static size_t hx_srv_stop_partial(const struct hx_srv_stopper *s, const char *h, size_t n)
{
    size_t best = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t sl = strlen(s->stops[i]);
        for (size_t k = (sl - 1 < n ? sl - 1 : n); k > best; k--) {
            if (!memcmp(h + n - k, s->stops[i], k)) {
                best = k;
                break;
            }
        }
    }
    return best;
}

void hx__srv_stopper_push(struct hx_srv_stopper *s, const char *p, size_t n,
                          struct hx_srv_buf *out)
{
    if (s->matched) return;
    if (s->n_stops == 0) {
        hx__srv_buf_append(out, p, n);
        return;
    }
    hx__srv_buf_append(&s->held, p, n);
    const char *h = s->held.data ? s->held.data : "";
    ptrdiff_t at = hx_srv_stop_find(s, h, s->held.len);
    if (at >= 0) {
        hx__srv_buf_append(out, h, (size_t)at);
        s->matched = true;
        hx__srv_buf_consume(&s->held, s->held.len);
        return;
    }
    size_t keep = hx_srv_stop_partial(s, h, s->held.len);
    hx__srv_buf_append(out, h, s->held.len - keep);
    hx__srv_buf_consume(&s->held, s->held.len - keep);
}

void hx__srv_stopper_finish(struct hx_srv_stopper *s, struct hx_srv_buf *out)
{
    if (!s->matched && s->held.len) hx__srv_buf_append(out, s->held.data, s->held.len);
    hx__srv_buf_consume(&s->held, s->held.len);
}

void hx__srv_stopper_free(struct hx_srv_stopper *s) { hx__srv_buf_free(&s->held); }
