/*
 * cmd-devices.c — `engine devices`: every backend compiled in, every device it finds, and for
 * each one that is unavailable, why.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "registry.h"

static void hx_devices_print_one(const struct hx_backend_entry *e, int i)
{
    struct hx_device_info info = {.struct_size = sizeof info};
    if (e->ops->device_info(i, &info) != HX_OK) {
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

void hx_app_npu_report(const char *kernels_dir, const char *model);   /* app/bench/cmd-bench-npu.c */

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
        else {
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
        int nd = 0;
        char why[256] = "";
        int st = e->ops->device_count(&nd, why, sizeof why);
        printf("  %-8s available (score %d), %d device%s%s%s\n", e->ops->name, e->score, nd, nd == 1 ? "" : "s",
               (st != HX_OK || nd == 0) ? ": " : "", (st != HX_OK || nd == 0) ? (why[0] ? why : hx_strerror(st)) : "");
        for (int i = 0; i < nd; i++) hx_devices_print_one(e, i);
    }
    hx_app_npu_report(npu_kernels, model);
    const struct hx_backend_entry *def = hx_backend_find(NULL);
    printf("default backend: %s\n", def ? def->ops->name : "(none)");
    return 0;
}
