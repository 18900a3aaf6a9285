/*
 * status.c — names and messages for enum hx_status, generated from HX_STATUS_MAP, and the
 * thread-local "last error" detail string behind hx_last_error().
 */
#include <stdio.h>
#include <string.h>

#include "hx-impl.h"

#define HX__COUNT_ONE(name, val, msg) +1
_Static_assert(0 HX_STATUS_MAP(HX__COUNT_ONE) == HX_STATUS_COUNT, "HX_STATUS_COUNT is stale");
#undef HX__COUNT_ONE

const char *hx_strerror(int status)
{
    switch (status) {
#define HX__MSG(name, val, msg)                                                              \
    case (val): return (msg);
        HX_STATUS_MAP(HX__MSG)
#undef HX__MSG
    }
    return "unknown error";
}

const char *hx_status_name(int status)
{
    switch (status) {
#define HX__NAME(name, val, msg)                                                             \
    case (val): return "HX_" #name;
        HX_STATUS_MAP(HX__NAME)
#undef HX__NAME
    }
    return "HX_E_UNKNOWN";
}

static _Thread_local char hx__last_error[1024];

const char *hx_last_error(void)
{
    return hx__last_error;
}

void hx__clear_error(void)
{
    hx__last_error[0] = '\0';
}

int hx__set_errorv(int status, const char *fmt, va_list ap)
{
    vsnprintf(hx__last_error, sizeof hx__last_error, fmt, ap);
    return status;
}

int hx__set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hx__set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

const char *hx_version(void)
{
#define HX__STR2(x) #x
#define HX__STR(x) HX__STR2(x)
    return HX__STR(HX_VERSION_MAJOR) "." HX__STR(HX_VERSION_MINOR) "." HX__STR(HX_VERSION_PATCH);
}
