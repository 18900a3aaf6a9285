/*
 * registry.c — the one table of backends compiled into this build, probed once, ordered by
 * HX_BACKENDS when set. The table is generated: each backend folder's CMakeLists.txt names its
 * ops table with hx_backend(), which lands in hx-backend-tables.h (build folder), so adding a
 * backend changes nothing here. `cpu` and `ref` are always present.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hx-backend-tables.h"
#include "registry.h"

#define HX__DECLARE(ops) extern const struct hx_backend_ops ops;
HX_BACKEND_TABLES(HX__DECLARE)
#undef HX__DECLARE

/* Strong references: they are what pulls each backend's objects out of libhxcore.a. */
#define HX__REFER(ops) &ops,
static const struct hx_backend_ops *const hx__builtin[] = {HX_BACKEND_TABLES(HX__REFER)};
#undef HX__REFER

#define HX__MAX_BACKENDS 16
static struct hx_backend_entry hx__entries[HX__MAX_BACKENDS];
static int hx__n_entries;
static pthread_once_t hx__once = PTHREAD_ONCE_INIT;

static bool hx__ops_valid(const struct hx_backend_ops *o, char *why, size_t n)
{
    if (o->abi_version != HX_BACKEND_ABI_VERSION) {
        snprintf(why, n, "ABI version %u, engine expects %u", o->abi_version, HX_BACKEND_ABI_VERSION);
        return false;
    }
    if (o->struct_size > sizeof(struct hx_backend_ops)) {
        snprintf(why, n, "ops table is newer than this engine (%u > %zu bytes)", o->struct_size,
                 sizeof(struct hx_backend_ops));
        return false;
    }
    if (!o->probe || !o->device_info || !o->init || !o->buffer_alloc || !o->buffer_free ||
        !o->buffer_write || !o->buffer_read || !o->weight_prepare || !o->supports || !o->run) {
        snprintf(why, n, "ops table lacks a required entry");
        return false;
    }
    if (!(o->caps & HX_BACKEND_ASYNC) != !o->synchronize) {
        snprintf(why, n,
                 o->synchronize ? "ops table has synchronize but not HX_BACKEND_ASYNC"
                                : "HX_BACKEND_ASYNC without synchronize");
        return false;
    }
    return true;
}

static void hx__add_entry(const struct hx_backend_ops *o)
{
    if (hx__n_entries >= HX__MAX_BACKENDS) return;
    struct hx_backend_entry *e = &hx__entries[hx__n_entries++];
    e->ops = o;
    if (!hx__ops_valid(o, e->why, sizeof e->why)) {
        e->probe_status = HX_E_UNSUPPORTED;
        HX_LOG_WARN("registry: backend '%s' rejected: %s", o->name, e->why);
        return;
    }
    struct hx_backend_probe p;
    memset(&p, 0, sizeof p);
    e->probe_status = o->probe(&p);
    e->score = p.score;
    e->n_devices = e->probe_status == HX_OK && p.n_devices > 0 ? p.n_devices : 0;
    _Static_assert(sizeof e->why == sizeof p.why, "probe why[] and entry why[] differ");
    memcpy(e->why, p.why, sizeof e->why);
    e->why[sizeof e->why - 1] = '\0';
}

static const struct hx_backend_ops *hx__builtin_find(const char *name, size_t len)
{
    for (size_t i = 0; i < HX_ARRAY_LEN(hx__builtin); i++)
        if (hx__builtin[i] && strlen(hx__builtin[i]->name) == len && strncasecmp(hx__builtin[i]->name, name, len) == 0)
            return hx__builtin[i];
    return NULL;
}

/* HX_BACKENDS=npu,vulkan,cpu: this order, others disabled (cpu is always kept). */
static void hx__registry_init(void)
{
    const char *env = getenv("HX_BACKENDS");
    if (env && *env) {
        for (const char *p = env; *p;) {
            size_t len = strcspn(p, ",");
            const struct hx_backend_ops *o = hx__builtin_find(p, len);
            if (o) {
                bool dup = false;
                for (int i = 0; i < hx__n_entries; i++) dup |= hx__entries[i].ops == o;
                if (!dup) hx__add_entry(o);
            } else if (len) {
                HX_LOG_WARN("registry: HX_BACKENDS names unknown backend '%.*s'", (int)len, p);
            }
            p += len + (p[len] == ',');
        }
        const struct hx_backend_ops *cpu = hx__builtin_find("cpu", 3);
        bool have_cpu = false;
        for (int i = 0; i < hx__n_entries; i++) have_cpu |= hx__entries[i].ops == cpu;
        if (!have_cpu && cpu) hx__add_entry(cpu);
        return;
    }
    for (size_t i = 0; i < HX_ARRAY_LEN(hx__builtin); i++)
        if (hx__builtin[i]) hx__add_entry(hx__builtin[i]);
}

int hx__registry_count(void)
{
    pthread_once(&hx__once, hx__registry_init);
    return hx__n_entries;
}

const struct hx_backend_entry *hx__registry_get(int i)
{
    pthread_once(&hx__once, hx__registry_init);
    return (i >= 0 && i < hx__n_entries) ? &hx__entries[i] : NULL;
}

const struct hx_backend_entry *hx__backend_find(const char *name)
{
    int n = hx__registry_count();
    const struct hx_backend_entry *best = NULL;
    for (int i = 0; i < n; i++) {
        const struct hx_backend_entry *e = &hx__entries[i];
        if (name) {
            if (strcasecmp(e->ops->name, name) == 0) return e;
            continue;
        }
        if (e->probe_status == HX_OK && (!best || e->score > best->score)) best = e;
    }
    return best;
}

int hx__backend_device_info(const struct hx_backend_entry *e, int idx, struct hx_device_info *out)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (e->probe_status != HX_OK || idx < 0 || idx >= e->n_devices) return HX_E_NOTFOUND;
    return e->ops->device_info(idx, out);
}

/* Pick a device index from the part after ':' — a number or a name substring. */
static int hx__pick_device(const struct hx_backend_entry *e, const char *sel, int n, int *idx)
{
    if (!sel || !*sel) {
        /* Default: the first non-CPU-kind device, else device 0 (lavapipe only when alone). */
        *idx = 0;
        for (int i = 0; i < n; i++) {
            struct hx_device_info info;
            if (hx__backend_device_info(e, i, &info) == HX_OK && info.kind != HX_DEVICE_CPU) {
                *idx = i;
                break;
            }
        }
        return HX_OK;
    }
    char *end;
    long v = strtol(sel, &end, 10);
    if (*end == '\0') {
        if (v < 0 || v >= n)
            return hx__set_error(HX_E_NOTFOUND, "%s: device index %ld out of range (%d devices)",
                                 e->ops->name, v, n);
        *idx = (int)v;
        return HX_OK;
    }
    for (int i = 0; i < n; i++) {
        struct hx_device_info info;
        if (hx__backend_device_info(e, i, &info) == HX_OK && strcasestr(info.name, sel)) {
            *idx = i;
            return HX_OK;
        }
    }
    return hx__set_error(HX_E_NOTFOUND, "%s: no device matches '%s'", e->ops->name, sel);
}

int hx__device_open(const char *spec, const struct hx_device_config *cfg, struct hx_device **out)
{
    *out = NULL;
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= sizeof name) return hx__set_error(HX_E_INVAL, "bad device spec '%s'", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    const struct hx_backend_entry *e = hx__backend_find(name);
    if (!e) {
        struct hx_strbuf sb;
        hx__sb_init(&sb);
        for (int i = 0; i < hx__registry_count(); i++)
            hx__sb_printf(&sb, "%s%s", i ? ", " : "", hx__entries[i].ops->name);
        int st = hx__set_error(HX_E_NOTFOUND, "unknown backend '%s' (compiled in: %s)", name,
                               sb.data ? sb.data : "");
        hx__sb_free(&sb);
        return st;
    }
    if (e->probe_status != HX_OK)
        return hx__set_error(HX_E_UNAVAILABLE, "backend '%s' is unavailable: %s", name, e->why);
    int n = e->n_devices, st;
    if (n <= 0)
        return hx__set_error(HX_E_UNAVAILABLE, "backend '%s' has no usable device: %s", name,
                             e->why[0] ? e->why : "its probe found none");
    int idx;
    if ((st = hx__pick_device(e, colon ? colon + 1 : NULL, n, &idx)) != HX_OK) return st;

    struct hx_device *dev = hx__calloc(1, sizeof *dev);
    if (!dev) return HX_E_NOMEM;
    dev->ops = e->ops;
    dev->index = idx;
    dev->healthy = true;
    if (n > 1 || colon) snprintf(dev->id, sizeof dev->id, "%s:%d", e->ops->name, idx);
    else snprintf(dev->id, sizeof dev->id, "%s", e->ops->name);
    if ((st = hx__backend_device_info(e, idx, &dev->info)) != HX_OK) goto fail;
    if (e->ops->ctx_size && !(dev->ctx = hx__calloc(1, e->ops->ctx_size))) {
        st = HX_E_NOMEM;
        goto fail;
    }
    if ((st = e->ops->init(dev, cfg)) != HX_OK) {
        hx__set_error(st, "%s: init failed: %s", dev->id,
                      dev->last_error[0] ? dev->last_error : hx_strerror(st));
        goto fail;
    }
    *out = dev;
    return HX_OK;
fail:
    hx__free(dev->ctx);
    hx__free(dev);
    return st;
}

void hx__device_close(struct hx_device *dev)
{
    if (!dev) return;
    if (dev->ops->fini) dev->ops->fini(dev);
    hx__free(dev->ctx);
    hx__free(dev);
}

int hx_device_set_error(struct hx_device *dev, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dev->last_error, sizeof dev->last_error, fmt, ap);
    va_end(ap);
    HX_LOG_ERROR("[%s] %s", dev->id, dev->last_error);
    hx__set_error(status, "[%s] %s", dev->id, dev->last_error);
    return status;
}
