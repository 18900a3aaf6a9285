/* app-util.c — small helpers shared by the subcommands: error printing, strict parsing, rows
 * of a tensor converted on the thread pool. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "hx-impl.h"
#include "pool.h"

void hx_app_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "engine %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool hx_app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool hx_app_parse_f32(const char *s, float lo, float hi, float *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}


/* ---- tensor rows on the pool ---------------------------------------------------------------- */

/* Below this many elements one thread converts the tensor: waking threads can cost a
 * scheduler time slice on a busy machine, more than the work. */
#define HX_APP_ROWS_PARALLEL_MIN (1 << 20)

struct hx_app_rows_job {
    hx_app_row_fn fn;
    void *ctx;
    int64_t n_rows, width;
    _Atomic int status;
};

static void hx_app_rows_task(void *arg, int tid, int nth)
{
    struct hx_app_rows_job *j = arg;
    int64_t r0, r1;
    hx__pool_range(j->n_rows, tid, nth, &r0, &r1);
    float *row = hx__malloc((size_t)(j->width > 0 ? j->width : 1) * sizeof *row);
    int my = row ? HX_OK : HX_E_NOMEM;
    for (int64_t r = r0; r < r1 && !my && !atomic_load_explicit(&j->status, memory_order_relaxed); r++)
        my = j->fn(j->ctx, r, row);
    hx__free(row);
    int ok = HX_OK;
    if (my) atomic_compare_exchange_strong(&j->status, &ok, my);
}

int hx_app_rows(int64_t n_rows, int64_t width, int n_threads, hx_app_row_fn fn, void *ctx)
{
    if (n_rows <= 0) return HX_OK;
    struct hx_app_rows_job j = {.fn = fn, .ctx = ctx, .n_rows = n_rows, .width = width};
    atomic_init(&j.status, HX_OK);
    if (width * n_rows < HX_APP_ROWS_PARALLEL_MIN || n_threads < 1) n_threads = 1;
    if (n_threads > n_rows) n_threads = (int)n_rows;
    hx__pool_run(n_threads, hx_app_rows_task, &j);
    return atomic_load(&j.status);
}
