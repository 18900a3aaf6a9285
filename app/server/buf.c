/*
 * buf.c — the server's growable byte buffer and clock. A buffer whose allocation failed keeps
 * what it had, sets `failed` and ignores further appends, so callers check once at the end.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

static bool hx_srv_buf_reserve(struct hx_srv_buf *b, size_t extra)
{
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void hx__srv_buf_append(struct hx_srv_buf *b, const void *p, size_t n)
{
    if (!hx_srv_buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void hx__srv_buf_puts(struct hx_srv_buf *b, const char *s) { hx__srv_buf_append(b, s, strlen(s)); }

void hx__srv_buf_printf(struct hx_srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !hx_srv_buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void hx__srv_buf_consume(struct hx_srv_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        if (b->data) b->data[0] = '\0';
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void hx__srv_buf_free(struct hx_srv_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

double hx__srv_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
