/*
 * log.c — process-wide logging: one callback, one threshold (HX_LOG_LEVEL env at first use).
 * Library code never prints; the default callback writes one line to stderr.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hx-impl.h"

static const char *const hx__level_names[] = {"error", "warn", "info", "debug"};
_Static_assert(HX_ARRAY_LEN(hx__level_names) == HX_LOG_LEVEL_COUNT, "level names");

static void hx__log_default(enum hx_log_level level, const char *msg, void *user_data)
{
    (void)user_data;
    fprintf(stderr, "hx %s: %s\n", hx__level_names[level], msg);
}

static hx_log_cb hx__log_cb = hx__log_default;
static void *hx__log_ud;
static atomic_int hx__log_level = -1;

void hx_log_set(hx_log_cb cb, void *user_data)
{
    hx__log_cb = cb ? cb : hx__log_default;
    hx__log_ud = cb ? user_data : NULL;
}

void hx_log_set_level(enum hx_log_level level)
{
    atomic_store(&hx__log_level, (int)level);
}

enum hx_log_level hx_log_get_level(void)
{
    int lv = atomic_load(&hx__log_level);
    if (lv >= 0) return (enum hx_log_level)lv;
    lv = HX_LOG_LEVEL_WARN;
    const char *env = getenv("HX_LOG_LEVEL");
    for (int i = 0; env && i < HX_LOG_LEVEL_COUNT; i++)
        if (strcasecmp(env, hx__level_names[i]) == 0) lv = i;
    atomic_store(&hx__log_level, lv);
    return (enum hx_log_level)lv;
}

void hx_log(enum hx_log_level level, const char *fmt, ...)
{
    if ((int)level > (int)hx_log_get_level() || (int)level < 0) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hx__log_cb(level, msg, hx__log_ud);
}

void hx__assert_fail(const char *expr, const char *file, int line, const char *func)
{
    fprintf(stderr, "hx: assertion failed: %s (%s:%d, %s)\n", expr, file, line, func);
    abort();
}
