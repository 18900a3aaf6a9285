/*
 * npu.c — the two NPU backends' ops tables, probing and device description:
 *
 *   npu      an AMD XDNA NPU through XRT. The XRT glue (npu-xrt.cpp) is a separate module,
 *            libhx-npu-xrt.so, built only against XRT >= 2.15 and loaded at run time, so an
 *            engine without XRT (or built without it) starts and `engine devices` says what is
 *            missing: the module, XRT's libraries, /dev/accel/accel0, or its permissions.
 *   npu-sim  the same host path against the kernel-contract simulator (npu-sim.c), always
 *            present; its built-in kernels cover the Qwen3-0.6B GEMMs and, by tiling, any
 *            shape. Its timings are never NPU performance (info.simulated).
 *
 * Both share npu-mem.c and npu-gemm.c; only the glue differs. Probing (once: the core calls
 * probe once) is side-effect free apart from loading the XRT module, and only where
 * /dev/accel/accel0 exists.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npu-impl.h"

#ifndef HX_NPU_XRT_NOTE
#define HX_NPU_XRT_NOTE "no XRT >= 2.15 headers were found when this engine was configured"
#endif
#define HX_NPU_ACCEL_NODE "/dev/accel/accel0"

static struct {
    int status;
    char why[512];
    char module[512];
    char pci[96];
    int gen;
    const struct hx_npu_glue_ops *glue;
} hx_npu_xrt;

/* ---- shared entries ------------------------------------------------------------------------- */

static const char *const hx_npu_stage_names[HX_NPU_ST_COUNT + 1] = {
    "quantize", "copy", "sync A", "launch", "sync C", "dequantize", NULL};

/* "hx.npu.sim": what the NPU benchmark may set on the simulator (hx-backend.h). */
static const struct hx_npu_sim_ext hx_npu_sim_ext = {
    .configure = hx__npu_sim_configure,
    .write_kernels = hx__npu_write_synthetic_kernels,
};

static void *hx_npu_get_extension(struct hx_device *dev, const char *name)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    if (!strcmp(name, "hx.timing")) return &d->timing;
    if (!strcmp(name, "hx.npu.sim") && d->glue == &hx__npu_sim_glue) return (void *)&hx_npu_sim_ext;
    if (!strcmp(name, "hx.npu.debug")) return &d->dbg;
    if (!strcmp(name, "hx.npu.stages")) return d->stage_us;
    if (!strcmp(name, "hx.npu.stage_names")) return (void *)hx_npu_stage_names;
    long long K, N;
    char tail;
    if (sscanf(name, "hx.npu.cover:%lld:%lld%c", &K, &N, &tail) == 2) {
        struct hx_npu_choice ch;
        if (!hx__npu_pick_kernel(&d->man, d->ki_ok, K, N, &ch)) {
            snprintf(d->cover, sizeof d->cover, "not covered");
        } else {
            const struct hx_npu_kernel *k = &d->man.k[ch.kernel];
            snprintf(d->cover, sizeof d->cover, "%s: %lld call%s per %lld rows (%lld K-tile%s x %lld "
                     "N-tile%s), K padded %lld -> %lld, N padded %lld -> %lld", k->name,
                     (long long)(ch.n_kt * ch.n_nt), ch.n_kt * ch.n_nt == 1 ? "" : "s",
                     (long long)(k->d.M / HX_NPU_A_ROWS), (long long)ch.n_kt, ch.n_kt == 1 ? "" : "s",
                     (long long)ch.n_nt, ch.n_nt == 1 ? "" : "s", K, (long long)(ch.n_kt * k->d.K),
                     N, (long long)(ch.n_nt * k->d.N));
        }
        return d->cover;
    }
    return NULL;
}

static void hx_npu_describe(struct hx_device *dev, char *out, size_t len)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    hx__sb_printf(&sb, "glue %s, manifest %s: %d kernels, NPU%d%s%s", d->glue ? d->glue->name : "?",
                  d->man.source, d->man.n_kernels, d->man.dev_gen - 2,
                  d->man.description[0] ? " — " : "", d->man.description);
    for (int i = 0; i < d->man.n_kernels; i++) {
        const struct hx_npu_kernel *k = &d->man.k[i];
        const char *slash = strrchr(k->xclbin, '/');
        hx__sb_printf(&sb, "\n  kernel %-14s M %-4lld K %-5lld N %-6lld tile %lldx%lldx%lld, %d cols, "
                      "%s->%s, B %s, C %s%s%s", k->name, (long long)k->d.M, (long long)k->d.K,
                      (long long)k->d.N, (long long)k->d.m, (long long)k->d.k, (long long)k->d.n,
                      k->d.cols, k->dtype_in, k->dtype_out, k->d.b_col_maj ? "col-major" : "row-major",
                      k->d.c_col_maj ? "col-major" : "row-major", k->xclbin[0] ? ", " : "",
                      k->xclbin[0] ? (slash ? slash + 1 : k->xclbin) : "");
    }
    snprintf(out, len, "%s", sb.data ? sb.data : "");
    hx__sb_free(&sb);
}

static void hx_npu_fini(struct hx_device *dev)
{
    hx__npu_dev_fini(dev);
}

/* ---- npu-sim ------------------------------------------------------------------------------ */

/* What both NPU backends' devices are: int8 GEMMs on host-visible memory. */
static void hx_npu_info(struct hx_device_info *out)
{
    out->kind = HX_DEVICE_NPU;
    out->alignment_bytes = 64;
    out->unified_memory = true;
    out->weight_types = (1u << HX_DTYPE_COUNT) - 1u;
    out->numerics = HX_NUMERICS_INT8_ROW;
}

static int hx_npu_sim_probe(struct hx_backend_probe *out)
{
    out->score = 1; /* never the default: it is a simulator */
    out->n_devices = 1;
    return HX_OK;
}

static int hx_npu_sim_device_info(int idx, struct hx_device_info *out)
{
    (void)idx; /* 0, the only one */
    hx_npu_info(out);
    out->simulated = true;
    snprintf(out->name, sizeof out->name, "npu-sim");
    snprintf(out->description, sizeof out->description,
             "kernel-contract simulator of an XDNA NPU: the XRT host path (int8 x int8 -> int32 "
             "GEMM) against CPU-emulated kernels; timings are not NPU performance");
    return HX_OK;
}

static int hx_npu_sim_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    return hx__npu_dev_init(dev, &hx__npu_sim_glue, cfg, true);
}

/* ---- npu (XRT) ------------------------------------------------------------------------------ */

static void hx_npu_read_sysfs(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static void hx_npu_pci_identify(void)
{
    char dev_id[32], rev[32];
    hx_npu_read_sysfs("/sys/class/accel/accel0/device/device", dev_id, sizeof dev_id);
    hx_npu_read_sysfs("/sys/class/accel/accel0/device/revision", rev, sizeof rev);
    const char *name = "AMD XDNA NPU";
    if (!strcmp(dev_id, "0x1502")) name = "AMD NPU1 (Phoenix/Hawk Point)", hx_npu_xrt.gen = 3;
    else if (!strcmp(dev_id, "0x17f0")) name = "AMD NPU2 (Strix/Strix Halo/Krackan)", hx_npu_xrt.gen = 4;
    snprintf(hx_npu_xrt.pci, sizeof hx_npu_xrt.pci, "%s%s%s%s%s", name, dev_id[0] ? ", PCI 1022:" : "",
             dev_id[0] ? dev_id + (strncmp(dev_id, "0x", 2) ? 0 : 2) : "", rev[0] ? " rev " : "", rev);
}

#ifdef HX_NPU_XRT_BUILT
static bool hx_npu_try_module(const char *path, char *errs, size_t n)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    size_t used = strlen(errs);
    if (!lib) {
        const char *e = dlerror();
        snprintf(errs + used, n - used, "%s%s", used ? "; " : "", e ? e : path);
        return false;
    }
    hx_npu_xrt_glue_get_fn get = NULL;
    *(void **)&get = dlsym(lib, HX_NPU_XRT_GLUE_SYMBOL);
    const struct hx_npu_glue_ops *g = get ? get(HX_NPU_GLUE_ABI) : NULL;
    if (!g) {
        snprintf(errs + used, n - used, "%s%s: %s", used ? "; " : "", path,
                 get ? "glue ABI mismatch (rebuild the module)" : "not an hx XRT glue module");
        dlclose(lib);
        return false;
    }
    hx_npu_xrt.glue = g;
    snprintf(hx_npu_xrt.module, sizeof hx_npu_xrt.module, "%s", path);
    return true;
}

static void hx_npu_load_module(void)
{
    char cands[3][512] = {"", "", ""}, errs[400] = "";
    const char *env = getenv("HX_NPU_XRT_GLUE");
    if (env && *env) snprintf(cands[0], sizeof cands[0], "%s", env);
    char exe[400];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(cands[1], sizeof cands[1], "%s/libhx-npu-xrt.so", exe);
    }
#ifdef HX_NPU_XRT_MODULE_PATH
    snprintf(cands[2], sizeof cands[2], "%s", HX_NPU_XRT_MODULE_PATH);
#endif
    for (int i = 0; i < 3; i++)
        if (cands[i][0] && access(cands[i], R_OK) == 0 && hx_npu_try_module(cands[i], errs, sizeof errs))
            return;
    if (!errs[0]) hx_npu_try_module("libhx-npu-xrt.so", errs, sizeof errs);
    if (!hx_npu_xrt.glue)
        snprintf(hx_npu_xrt.why, sizeof hx_npu_xrt.why, "XRT glue module not loadable: %s", errs);
}
#endif

static void hx_npu_xrt_discover(void)
{
    hx_npu_xrt.status = HX_E_UNAVAILABLE;
    bool node = access(HX_NPU_ACCEL_NODE, F_OK) == 0;
    if (node) hx_npu_pci_identify();
#ifdef HX_NPU_XRT_BUILT
    if (node) hx_npu_load_module();   /* XRT is loaded only where an NPU exists */
#else
    snprintf(hx_npu_xrt.why, sizeof hx_npu_xrt.why, "XRT glue not built (%s)", HX_NPU_XRT_NOTE);
#endif
    char more[300];
    snprintf(more, sizeof more, "%.299s", hx_npu_xrt.why);
    if (!node)
        snprintf(hx_npu_xrt.why, sizeof hx_npu_xrt.why, "no %s (no XDNA NPU or amdxdna not loaded)"
                 "%s%s", HX_NPU_ACCEL_NODE, more[0] ? "; " : "", more);
    else if (access(HX_NPU_ACCEL_NODE, R_OK | W_OK) != 0)
        snprintf(hx_npu_xrt.why, sizeof hx_npu_xrt.why, "%s not accessible (add the user to the "
                 "'render' group)%s%s", HX_NPU_ACCEL_NODE, more[0] ? "; " : "", more);
    else if (hx_npu_xrt.glue)
        hx_npu_xrt.status = HX_OK;
}

static int hx_npu_xrt_probe(struct hx_backend_probe *out)
{
    hx_npu_xrt_discover();
    out->score = 40;
    out->n_devices = hx_npu_xrt.status == HX_OK ? 1 : 0;
    snprintf(out->why, sizeof out->why, "%.*s", (int)sizeof out->why - 1, hx_npu_xrt.why);
    return hx_npu_xrt.status;
}

static int hx_npu_xrt_device_info(int idx, struct hx_device_info *out)
{
    (void)idx; /* 0, the only one */
    hx_npu_info(out);
    snprintf(out->name, sizeof out->name, "%s",
             hx_npu_xrt.pci[0] ? hx_npu_xrt.pci : "AMD XDNA NPU");
    snprintf(out->description, sizeof out->description, "XRT through %.180s, %s", hx_npu_xrt.module,
             HX_NPU_ACCEL_NODE);
    return HX_OK;
}

static int hx_npu_xrt_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    if (!hx_npu_xrt.glue) return hx_device_set_error(dev, HX_E_UNAVAILABLE, "%s", hx_npu_xrt.why);
    return hx__npu_dev_init(dev, hx_npu_xrt.glue, cfg, false);
}

/* ---- tables ------------------------------------------------------------------------------ */

#define HX_NPU_COMMON_OPS                                                                    \
    .abi_version = HX_BACKEND_ABI_VERSION, .struct_size = sizeof(struct hx_backend_ops),     \
    .ctx_size = sizeof(struct hx_npu_dev), .caps = HX_BACKEND_ASYNC, .fini = hx_npu_fini,    \
    .buffer_alloc = hx__npu_buffer_alloc, .buffer_free = hx__npu_buffer_free,                \
    .buffer_write = hx__npu_buffer_write, .buffer_read = hx__npu_buffer_read,                \
    .weight_prepare = hx__npu_weight_prepare, .weight_release = hx__npu_weight_release,      \
    .weight_bytes = hx__npu_weight_bytes, .scratch_bytes = hx__npu_scratch_bytes,           \
    .supports = hx__npu_supports, .run = hx__npu_run, .synchronize = hx__npu_synchronize,    \
    .estimate_cost = hx__npu_estimate_cost, .get_extension = hx_npu_get_extension,           \
    .describe = hx_npu_describe

const struct hx_backend_ops hx__backend_npu_sim_ops = {
    HX_NPU_COMMON_OPS,
    .name = "npu-sim",
    .probe = hx_npu_sim_probe,
    .device_info = hx_npu_sim_device_info,
    .init = hx_npu_sim_init,
};

const struct hx_backend_ops hx__backend_npu_ops = {
    HX_NPU_COMMON_OPS,
    .name = "npu",
    .probe = hx_npu_xrt_probe,
    .device_info = hx_npu_xrt_device_info,
    .init = hx_npu_xrt_init,
};
