/*
 * hx-impl.h — declarations shared inside core/ and the backends that ship with it.
 *
 * Heap: hx__malloc & co. route through the hooks of hx_set_allocator (core/alloc.c).
 * Errors: hx__set_error records the thread's detailed message (hx_last_error) and returns the
 * status, so a failing path reads `return hx__set_error(HX_E_FORMAT, "...", ...);`.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"
#include "hx.h"

#define hx__malloc(n) hx_malloc(n)
#define hx__calloc(c, n) hx_calloc((c), (n))
#define hx__realloc(p, n) hx_realloc((p), (n))
#define hx__free(p) hx_free(p)

/* Record the thread's last error message; returns status unchanged. */
int hx__set_error(int status, const char *fmt, ...) HX_PRINTF(2, 3);
int hx__set_errorv(int status, const char *fmt, va_list ap);
void hx__clear_error(void);

/* Programmer errors and internal invariants only; never for data from files or clients. */
void hx__assert_fail(const char *expr, const char *file, int line, const char *func);
#define HX_ASSERT(x)                                                                         \
    do {                                                                                     \
        if (!(x)) hx__assert_fail(#x, __FILE__, __LINE__, __func__);                         \
    } while (0)

#define HX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HX_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Checked size arithmetic: false on overflow. */
/* splitmix64: the next of a stream of 64-bit pseudo-random numbers from state *x (sampling,
 * verify's twins). */
static inline uint64_t hx__splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline bool hx__mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool hx__add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* Where writing the output `path` goes (core/outfile.c): *target (hx_free) is path, or the
 * regular file a symbolic link names; *exists and *mode (permission bits) describe it. A
 * directory, device, FIFO, socket or dangling link is HX_E_INVAL with a message. */
int hx__outfile_resolve(const char *path, char **target, bool *exists, unsigned *mode);

/* Weights of parts (core/weight.c): row r's bytes (NULL when out of range); rows [r0, r0 + n)
 * of w as a weight of their own (a view: of w's data, of one part, or of the parts it spans);
 * the host copy hx_weight_host made, freed by the owner of the struct. */
const void *hx__weight_row(const struct hx_weight *w, int64_t r);
void hx__weight_slice(const struct hx_weight *w, int64_t r0, int64_t n, struct hx_weight *out);
void hx__weight_host_free(struct hx_weight *w);

/* The parameters a sampler was made with (grammar.c reads them). */
const struct hx_sampler_params *hx__sampler_params(const struct hx_sampler *s);

/* Monotonic clock in microseconds. */
double hx__time_us(void);

/* Format into a growable string. */
struct hx_strbuf {
    char *data;
    size_t len, cap;
    bool failed;      /* an allocation failed; contents truncated */
};
void hx__sb_init(struct hx_strbuf *sb);
void hx__sb_free(struct hx_strbuf *sb);
void hx__sb_printf(struct hx_strbuf *sb, const char *fmt, ...) HX_PRINTF(2, 3);
void hx__sb_append(struct hx_strbuf *sb, const char *s, size_t n);
/* Take ownership of the string (release with hx_free); the strbuf is reset. */
char *hx__sb_take(struct hx_strbuf *sb);
