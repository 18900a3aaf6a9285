/*
 * hip-loader.c — the engine's `hip` backend (hx__backend_hip_ops): finds a HIP device module
 * at run time, dlopens it, checks its ABI, and forwards every vtable entry to it. Plain C
 * with no GPU headers, so the engine builds, starts and runs where neither ROCm nor CUDA is
 * installed; `engine devices` then says why HIP is unavailable.
 *
 * Where modules are looked for (first module with a usable device wins):
 *   HX_HIP_MODULE=path      only that file (also the way to load hx-hip-emu.so);
 *   otherwise hx-hip-amd.so, then hx-hip-nv.so, in the engine binary's folder, then in the
 *   build folder this engine was configured in (HX_HIP_MODULE_DIR; tests live one below).
 * Each candidate that exists but cannot be used adds "file: reason" to the backend's why[]:
 * the vendor runtime is missing (dlopen names the library), the driver is missing, there is
 * no GPU, a driver call failed, or the GPU has no code in the module. Probing happens once;
 * a module once loaded stays loaded (GPU runtimes do not support being unloaded).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hip-module.h"
#include "hx-impl.h"

#ifndef HX_HIP_MODULE_DIR
#define HX_HIP_MODULE_DIR ""
#endif

#define HX_HIP_ERR 512

struct hx_hip_ldev {
    void *mdev;
};

static struct {
    const struct hx_hip_module_ops *m;
    char path[PATH_MAX];
    int n_dev;
    int status;
    char why[256];
} hx_hip_g;

static void hx_hip_log_line(int level, const char *msg)
{
    if (level >= HX_LOG_LEVEL_ERROR && level < HX_LOG_LEVEL_COUNT)
        hx_log((enum hx_log_level)level, "%s", msg);
}

static const struct hx_hip_host hx_hip_host_fns = {
    .struct_size = sizeof(struct hx_hip_host),
    .malloc_fn = hx_malloc,
    .free_fn = hx_free,
    .log_fn = hx_hip_log_line,
};

static struct hx_hip_ldev *hx_hip_ld(struct hx_device *dev)
{
    return dev->ctx;
}

static void hx_hip_why_add(const char *path, const char *reason)
{
    size_t wl = strlen(hx_hip_g.why);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (wl < sizeof hx_hip_g.why - 1)
        snprintf(hx_hip_g.why + wl, sizeof hx_hip_g.why - wl, "%s%s: %s", wl ? "; " : "", base,
                 reason);
}

/* dlopen's message, turned into what is missing. */
static void hx_hip_dlerror_reason(const char *msg, char *out, size_t len)
{
    if (!msg) msg = "unknown dlopen error";
    const char *lib = strstr(msg, "libamdhip64");
    if (lib && strstr(msg, "cannot open")) {
        snprintf(out, len, "ROCm HIP runtime not installed (%.*s not found)",
                 (int)strcspn(lib, ": "), lib);
        return;
    }
    if (strstr(msg, "cannot open shared object")) {
        const char *colon = strstr(msg, ": ");
        snprintf(out, len, "a library it needs is missing (%.*s)", (int)(colon ? colon - msg : 120),
                 msg);
        return;
    }
    snprintf(out, len, "cannot load: %s", msg);
}

static bool hx_hip_layout_ok(const struct hx_hip_layout *l, char *out, size_t len)
{
    const struct hx_hip_layout want = HX_HIP_LAYOUT_INIT;
    if (memcmp(l, &want, sizeof want) == 0) return true;
    snprintf(out, len,
             "built from other headers (backend ABI %u, op %u bytes; engine %u, %u): rebuild it",
             l->backend_abi, l->op_bytes, want.backend_abi, want.op_bytes);
    return false;
}

/* Load one candidate; true if it has a usable device. Adds the reason otherwise. */
static bool hx_hip_try(const char *path)
{
    char reason[HX_HIP_ERR] = "";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        hx_hip_dlerror_reason(dlerror(), reason, sizeof reason);
        hx_hip_why_add(path, reason);
        return false;
    }
    hx_hip_module_get_ops_fn get = (hx_hip_module_get_ops_fn)dlsym(h, HX_HIP_MODULE_SYMBOL);
    const struct hx_hip_module_ops *m = get ? get(HX_HIP_MODULE_ABI, &hx_hip_host_fns) : NULL;
    if (!get)
        snprintf(reason, sizeof reason, "not an hx HIP module (no %s)", HX_HIP_MODULE_SYMBOL);
    else if (!m || m->abi_version != HX_HIP_MODULE_ABI || m->struct_size < sizeof *m)
        snprintf(reason, sizeof reason, "module ABI differs from the engine's (%u): rebuild it",
                 HX_HIP_MODULE_ABI);
    if (reason[0] || !hx_hip_layout_ok(&m->layout, reason, sizeof reason)) {
        hx_hip_why_add(path, reason);
        return false; /* left loaded: unloading a GPU runtime is not safe */
    }
    int n = 0;
    int st = m->device_count(&n, reason, sizeof reason);
    if (st != HX_OK || n <= 0) {
        if (st != HX_OK && !reason[0]) snprintf(reason, sizeof reason, "%s", hx_strerror(st));
        hx_hip_why_add(path, reason[0] ? reason : "no usable device");
        HX_LOG_INFO("hip: %s: %s", path, reason);
        return false;
    }
    hx_hip_g.m = m;
    hx_hip_g.n_dev = n;
    snprintf(hx_hip_g.path, sizeof hx_hip_g.path, "%s", path);
    HX_LOG_INFO("hip: %s (%s, code for %s): %d device%s", path, m->runtime, m->targets, n,
                n == 1 ? "" : "s");
    return true;
}

static bool hx_hip_exe_dir(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n <= 0) return false;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) return false;
    *slash = '\0';
    return true;
}

static const char *const hx_hip_names[] = {"hx-hip-amd.so", "hx-hip-nv.so"};

/* Try both module names in dir; *found counts the files that exist. */
static bool hx_hip_try_dir(const char *dir, int *found)
{
    for (size_t i = 0; i < HX_ARRAY_LEN(hx_hip_names); i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, hx_hip_names[i]) >= (int)sizeof path)
            continue;
        if (access(path, F_OK) != 0) continue;
        (*found)++;
        if (hx_hip_try(path)) return true;
    }
    return false;
}

static void hx_hip_global_init(void)
{
    hx_hip_g.status = HX_E_UNAVAILABLE;
    const char *env = getenv("HX_HIP_MODULE");
    if (env && *env) {
        if (access(env, F_OK) != 0) {
            snprintf(hx_hip_g.why, sizeof hx_hip_g.why, "HX_HIP_MODULE=%.200s: no such file", env);
            return;
        }
        if (hx_hip_try(env)) hx_hip_g.status = HX_OK;
        return;
    }
    char exe[PATH_MAX];
    int found = 0;
    bool have_exe = hx_hip_exe_dir(exe, sizeof exe);
    if (have_exe && hx_hip_try_dir(exe, &found)) {
        hx_hip_g.status = HX_OK;
        return;
    }
    if (HX_HIP_MODULE_DIR[0] && (!have_exe || strcmp(exe, HX_HIP_MODULE_DIR) != 0) &&
        hx_hip_try_dir(HX_HIP_MODULE_DIR, &found)) {
        hx_hip_g.status = HX_OK;
        return;
    }
    if (!found) {
        const bool other =
            HX_HIP_MODULE_DIR[0] && (!have_exe || strcmp(exe, HX_HIP_MODULE_DIR) != 0);
        snprintf(hx_hip_g.why, sizeof hx_hip_g.why,
                 "no HIP module (hx-hip-amd.so, hx-hip-nv.so) next to the engine in %.80s%s%.80s; "
                 "set HX_HIP_MODULE",
                 have_exe ? exe : "?", other ? " or in " : "", other ? HX_HIP_MODULE_DIR : "");
    }
}

static int hx_hip_probe(struct hx_backend_probe *out)
{
    hx_hip_global_init();
    /* Native kernels beat Vulkan (50) on the same GPU; the emulator is never the default. */
    out->score = hx_hip_g.m && hx_hip_g.m->simulated ? 2 : 60;
    out->n_devices = hx_hip_g.n_dev;
    snprintf(out->why, sizeof out->why, "%s", hx_hip_g.why);
    return hx_hip_g.status;
}

static int hx_hip_device_info(int idx, struct hx_device_info *out)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->device_info(idx, out, err, sizeof err);
    if (st != HX_OK) HX_LOG_WARN("hip: device %d: %s", idx, err);
    return st;
}

static int hx_hip_fail(struct hx_device *dev, int st, const char *err)
{
    return hx_device_set_error(dev, st, "%s", err[0] ? err : hx_strerror(st));
}

static int hx_hip_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    (void)cfg;
    if (!hx_hip_g.m) return hx_device_set_error(dev, HX_E_UNAVAILABLE, "%s", hx_hip_g.why);
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->init(dev->index, &hx_hip_ld(dev)->mdev, err, sizeof err);
    if (st != HX_OK) return hx_hip_fail(dev, st, err);
    HX_LOG_INFO("[%s] hip device '%s' via %s", dev->id, dev->info.name, hx_hip_g.path);
    return HX_OK;
}

static void hx_hip_fini(struct hx_device *dev)
{
    struct hx_hip_ldev *l = hx_hip_ld(dev);
    if (hx_hip_g.m && l && l->mdev) hx_hip_g.m->fini(l->mdev);
    if (l) l->mdev = NULL;
}

static int hx_hip_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->buffer_alloc(hx_hip_ld(dev)->mdev, nbytes, &buf->ctx, err, sizeof err);
    if (st != HX_OK) return hx_hip_fail(dev, st, err);
    buf->host = NULL; /* device memory: reached only through read/write/copy */
    buf->nbytes = nbytes;
    return HX_OK;
}

static void hx_hip_buffer_free(struct hx_device *dev, struct hx_buffer *buf)
{
    if (buf->ctx) hx_hip_g.m->buffer_free(hx_hip_ld(dev)->mdev, buf->ctx);
    buf->ctx = NULL;
}

static int hx_hip_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                               const void *src, size_t nbytes)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->buffer_write(hx_hip_ld(dev)->mdev, buf->ctx, offset, src, nbytes, err,
                                      sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static int hx_hip_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                              void *dst, size_t nbytes)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->buffer_read(hx_hip_ld(dev)->mdev, buf->ctx, offset, dst, nbytes, err,
                                     sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static int hx_hip_copy(struct hx_device *dev, struct hx_buffer *dst, size_t dst_off,
                       struct hx_buffer *src, size_t src_off, size_t nbytes)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->copy(hx_hip_ld(dev)->mdev, (char *)dst->ctx + dst_off,
                              (const char *)src->ctx + src_off, nbytes, err, sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static int hx_hip_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->weight_prepare(hx_hip_ld(dev)->mdev, w, handle, err, sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static void hx_hip_weight_release(struct hx_device *dev, void *handle)
{
    if (handle) hx_hip_g.m->weight_release(hx_hip_ld(dev)->mdev, handle);
}

static bool hx_hip_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    (void)dev;
    return hx_hip_g.m && hx_hip_g.m->supports(op);
}

static int hx_hip_run(struct hx_device *dev, const struct hx_split *split)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->run(hx_hip_ld(dev)->mdev, split, err, sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static int hx_hip_synchronize(struct hx_device *dev)
{
    char err[HX_HIP_ERR] = "";
    int st = hx_hip_g.m->synchronize(hx_hip_ld(dev)->mdev, err, sizeof err);
    return st == HX_OK ? HX_OK : hx_hip_fail(dev, st, err);
}

static int hx_hip_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                                size_t out[HX_SCRATCH_BUFS])
{
    if (sp && !sp->n_ops) return HX_OK; /* the split scratch grows with the splits run */
    return hx_hip_g.m->scratch_bytes(hx_hip_ld(dev)->mdev, sp, out);
}

static void *hx_hip_get_extension(struct hx_device *dev, const char *name)
{
    if (!strcmp(name, "hx.timing")) return hx_hip_g.m->timing(hx_hip_ld(dev)->mdev);
    return NULL;
}

static void hx_hip_describe(struct hx_device *dev, char *out, size_t len)
{
    char text[256] = "";
    hx_hip_g.m->describe(hx_hip_ld(dev)->mdev, text, sizeof text);
    const char *base = strrchr(hx_hip_g.path, '/');
    snprintf(out, len, "%s [%s]", text, base ? base + 1 : hx_hip_g.path);
}

const struct hx_backend_ops hx__backend_hip_ops = {
    .abi_version = HX_BACKEND_ABI_VERSION,
    .struct_size = sizeof(struct hx_backend_ops),
    .name = "hip",
    .ctx_size = sizeof(struct hx_hip_ldev),
    .caps = HX_BACKEND_ASYNC,
    .probe = hx_hip_probe,
    .device_info = hx_hip_device_info,
    .init = hx_hip_init,
    .fini = hx_hip_fini,
    .buffer_alloc = hx_hip_buffer_alloc,
    .buffer_free = hx_hip_buffer_free,
    .buffer_write = hx_hip_buffer_write,
    .buffer_read = hx_hip_buffer_read,
    .weight_prepare = hx_hip_weight_prepare,
    .weight_release = hx_hip_weight_release,
    .supports = hx_hip_supports,
    .run = hx_hip_run,
    .synchronize = hx_hip_synchronize,
    .copy = hx_hip_copy,
    .get_extension = hx_hip_get_extension,
    .describe = hx_hip_describe,
    .scratch_bytes = hx_hip_scratch_bytes,
};
