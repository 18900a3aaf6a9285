/*
 * cmd-devices.c — `engine devices`: every backend compiled in, every device it finds, and for
 * each one that is unavailable, why; for each NPU device, the kernel manifest it uses, its
 * kernels, and which of the model's GEMMs (or Qwen3-0.6B's) each covers and how.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "hx-internal.h"

static void hx_devices_print_one(const struct hx_backend_entry *e, int i)
{
    struct hx_device_info info;
    if (hx__backend_device_info(e, i, &info) != HX_OK) {
        printf("    [%d] (cannot describe)\n", i);
        return;
    }
    printf("    [%d] %-5s %s — %s\n", i, hx_device_kind_name(info.kind), info.name, info.description);
    /* 0 means the backend cannot tell (hx-backend.h): say so rather than print "0.0 GiB" */
    char total[32] = "total unknown", avail[32] = "free unknown";
    if (info.memory_total_bytes)
        snprintf(total, sizeof total, "%.1f GiB total", info.memory_total_bytes / 1073741824.0);
    if (info.memory_free_bytes) snprintf(avail, sizeof avail, "%.1f GiB free", info.memory_free_bytes / 1073741824.0);
    printf("        memory %s, %s%s; weight types:", total, avail, info.unified_memory ? ", unified" : "");
    for (int t = 0; t < HX_DTYPE_COUNT; t++)
        if (info.weight_types & (1u << t)) printf(" %s", hx_dtype_name((enum hx_dtype)t));
    printf("%s\n", info.simulated ? "  [simulated: timings are not hardware performance]" : "");
}

struct hx_devices_gemm {
    enum hx_op_class cls;
    int64_t k, n;
    enum hx_dtype t;
};

/* Distinct weight GEMMs of the model (layer 0 and the output), or Qwen3-0.6B's. */
static int hx_devices_model_gemms(const char *path, struct hx_devices_gemm *g, int cap, char *name,
                                  size_t nn)
{
    if (!path) {
        struct hx_app_gemm q[HX_APP_SHAPE_GEMMS];
        int n_q = hx_app_shape_gemms(hx_app_shape_find("qwen3-0.6b"), q);
        snprintf(name, nn, "Qwen3-0.6B (pass -m MODEL for a model's own)");
        for (int i = 0; i < n_q && i < cap; i++)
            g[i] = (struct hx_devices_gemm){q[i].cls, q[i].k, q[i].n, HX_DTYPE_Q8_0};
        return n_q < cap ? n_q : cap;
    }
    struct hx_model *m = NULL;
    if (hx_model_load(path, NULL, &m) != HX_OK) {
        snprintf(name, nn, "%s: %s", path, hx_last_error());
        return -1;
    }
    snprintf(name, nn, "%s", path);
    struct hx_graph gr = {0};
    int n = 0;
    if (hx__graph_build(&gr, m, 1, 0, 16, 1) == HX_OK)
        for (int64_t i = 0; i < gr.n_nodes && n < cap; i++) {
            const struct hx_op_desc *d = &gr.nodes[i].desc;
            if (d->kind != HX_OP_MATMUL || d->layer > 0) continue;
            bool dup = false;
            for (int j = 0; j < n; j++)
                dup |= g[j].cls == d->cls && g[j].k == d->n_in && g[j].n == d->n_out && g[j].t == d->wtype;
            if (!dup) g[n++] = (struct hx_devices_gemm){d->cls, d->n_in, d->n_out, d->wtype};
        }
    hx__graph_free(&gr);
    hx_model_free(m);
    return n;
}

static void hx_devices_npu_dev(const char *spec, const char *kernels_dir,
                               const struct hx_devices_gemm *g, int n_g, const char *gname)
{
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 1, .kernels_dir = kernels_dir};
    struct hx_device *dev = NULL;
    if (hx__device_open(spec, &cfg, &dev) != HX_OK) {
        printf("        kernels: unusable — %s\n", hx_last_error());
        return;
    }
    char *desc = malloc(8192);
    if (desc && hx__dev_describe(dev, desc, 8192)) {
        printf("        ");
        for (const char *p = desc; *p; p++) printf(*p == '\n' ? "\n        " : "%c", *p);
        printf("\n");
    }
    free(desc);
    printf("        GEMMs of %s:\n", gname);
    for (int i = 0; i < n_g; i++) {
        struct hx_op_desc d = {.kind = HX_OP_MATMUL, .cls = g[i].cls, .n_rows = 1, .n_in = g[i].k,
                               .n_out = g[i].n, .wtype = g[i].t};
        char q[64];
        snprintf(q, sizeof q, "hx.npu.cover:%lld:%lld", (long long)g[i].k, (long long)g[i].n);
        const char *cv = hx__dev_extension(dev, q);
        printf("          %-8s %-5s %6lld -> %-6lld %s\n", hx_op_class_name(g[i].cls),
               hx_dtype_name(g[i].t), (long long)g[i].k, (long long)g[i].n,
               hx__dev_supports(dev, &d) ? (cv ? cv : "supported") : "not covered (runs elsewhere)");
    }
    hx__device_close(dev);
}

/* 0, or 1 when -m's model cannot be loaded (said on stderr: the devices are listed all the
 * same, but the coverage asked for is not there, so the exit status is not 0). */
static int hx_devices_npu_report(const char *kernels_dir, const char *model)
{
    struct hx_devices_gemm g[64];
    char gname[600];
    int n_g = hx_devices_model_gemms(model, g, 64, gname, sizeof gname);
    if (n_g < 0) {
        hx_app_error("devices", "NPU kernel coverage: cannot load %s", gname);
        return 1;
    }
    for (int b = 0; b < hx__registry_count(); b++) {
        const struct hx_backend_entry *e = hx__registry_get(b);
        struct hx_device_info info;
        if (hx__backend_device_info(e, 0, &info) != HX_OK || info.kind != HX_DEVICE_NPU)
            continue;
        const char *env = getenv("HX_NPU_KERNELS");
        const char *dir = kernels_dir ? kernels_dir : env && *env ? env : NULL;
        printf("  %s kernels%s%s:\n", e->ops->name, dir ? " from " : " (none given: --npu-kernels DIR or HX_NPU_KERNELS)",
               dir ? dir : "");
        hx_devices_npu_dev(e->ops->name, kernels_dir, g, n_g, gname);
    }
    return 0;
}

int hx_cmd_devices(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: engine devices [--npu-kernels DIR] [-m MODEL]\n  list backends compiled in, their devices, and why any is unavailable;\n"
               "  for NPU devices the kernel manifest, its kernels and the GEMMs (of MODEL) they cover\n");
        return 0;
    }
    const char *npu_kernels = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--npu-kernels")) npu_kernels = argv[++i];
        else if (i + 1 < argc && (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model"))) model = argv[++i];
        else if (!strcmp(argv[i], "--npu-kernels") || !strcmp(argv[i], "-m") ||
                 !strcmp(argv[i], "--model")) {
            hx_app_error("devices", "option %s needs a value", argv[i]);
            return 2;
        } else {
            hx_app_error("devices", "unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    FILE *mf = model ? fopen(model, "rb") : NULL;
    if (model && !mf) {
        hx_app_error("devices", "cannot read the model '%s': %s", model, strerror(errno));
        return 1;
    }
    if (mf) fclose(mf);
    int n = hx__registry_count();
    printf("hx %s: %d backends compiled in\n", hx_version(), n);
    for (int b = 0; b < n; b++) {
        const struct hx_backend_entry *e = hx__registry_get(b);
        if (e->probe_status != HX_OK) {
            printf("  %-8s unavailable: %s\n", e->ops->name, e->why[0] ? e->why : hx_strerror(e->probe_status));
            continue;
        }
        const int nd = e->n_devices;
        printf("  %-8s available (score %d), %d device%s%s%s\n", e->ops->name, e->score, nd,
               nd == 1 ? "" : "s", nd == 0 ? ": " : "",
               nd == 0 ? (e->why[0] ? e->why : "its probe found none") : "");
        for (int i = 0; i < nd; i++) hx_devices_print_one(e, i);
    }
    int rc = hx_devices_npu_report(npu_kernels, model);
    const struct hx_backend_entry *def = hx__backend_find(NULL);
    printf("default backend: %s\n", def ? def->ops->name : "(none)");
    return rc;
}
