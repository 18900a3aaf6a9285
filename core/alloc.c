/*
 * alloc.c — the allocation hooks every heap call in the library goes through
 * (hx_set_allocator), a strbuf helper, and the monotonic clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hx-impl.h"

static hx_malloc_fn hx__m = malloc;
static hx_calloc_fn hx__c = calloc;
static hx_realloc_fn hx__r = realloc;
static hx_free_fn hx__f = free;

int hx_set_allocator(hx_malloc_fn m, hx_calloc_fn c, hx_realloc_fn r, hx_free_fn f)
{
    if (!m && !c && !r && !f) {
        hx__m = malloc, hx__c = calloc, hx__r = realloc, hx__f = free;
        return HX_OK;
    }
    if (!m || !c || !r || !f) return HX_E_INVAL;
    hx__m = m, hx__c = c, hx__r = r, hx__f = f;
    return HX_OK;
}

void *hx_malloc(size_t nbytes) { return hx__m(nbytes ? nbytes : 1); }
void *hx_calloc(size_t count, size_t nbytes) { return hx__c(count ? count : 1, nbytes ? nbytes : 1); }
void *hx_realloc(void *ptr, size_t nbytes) { return hx__r(ptr, nbytes ? nbytes : 1); }
void hx_free(void *ptr)
{
    if (ptr) hx__f(ptr);
}

char *hx_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = hx_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

double hx__time_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void hx__sb_init(struct hx_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void hx__sb_free(struct hx_strbuf *sb)
{
    hx_free(sb->data);
    hx__sb_init(sb);
}

static bool hx__sb_reserve(struct hx_strbuf *sb, size_t extra)
{
    if (sb->failed) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    char *d = hx_realloc(sb->data, cap);
    if (!d) {
        sb->failed = true;
        return false;
    }
    sb->data = d, sb->cap = cap;
    return true;
}

void hx__sb_append(struct hx_strbuf *sb, const char *s, size_t n)
{
    if (!hx__sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void hx__sb_printf(struct hx_strbuf *sb, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0 && hx__sb_reserve(sb, (size_t)n)) {
        vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
        sb->len += (size_t)n;
    }
    va_end(ap2);
}

char *hx__sb_take(struct hx_strbuf *sb)
{
    char *d = sb->data;
    if (!d) d = hx_strdup("");
    hx__sb_init(sb);
    return d;
}
