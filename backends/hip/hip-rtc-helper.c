/*
 * hip-rtc-helper.c — hx-hip-rtc, the process hx-hip-amd.so runs hipRTC in (hip-rtc.h), built
 * next to the module. A program of its own, not library code: it is the one file under
 * backends/ that prints, because its output is read by the module or a person.
 *
 *   hx-hip-rtc compile MODULE TARGET OUT   compile the module's embedded kernel source for
 *                                          TARGET into OUT and OUT.map (what the module runs
 *                                          when its cache misses; a crash of hipRTC ends only
 *                                          this process);
 *   hx-hip-rtc get MODULE TARGET           what a device open does: the cached code object for
 *                                          TARGET, or compiled now through `compile`; prints
 *                                          path=FILE and note=HOW (tests, warming a cache).
 *
 * Exit status 0 on success; 1 with "hx-hip-rtc: REASON" as the last line of stderr; 2 for
 * bad usage.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip-module.h"

static const struct hx_hip_host hx_rtc_host = {sizeof(struct hx_hip_host), malloc, free, NULL};

int main(int argc, char **argv)
{
    const bool compile = argc == 5 && !strcmp(argv[1], "compile");
    const bool get = argc == 4 && !strcmp(argv[1], "get");
    if (!compile && !get) {
        fprintf(stderr, "usage: hx-hip-rtc compile MODULE TARGET OUT\n"
                        "       hx-hip-rtc get MODULE TARGET\n");
        return 2;
    }
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "hx-hip-rtc: cannot load %s: %s\n", argv[2], dlerror());
        return 1;
    }
    hx_hip_module_get_ops_fn fn = (hx_hip_module_get_ops_fn)dlsym(h, HX_HIP_MODULE_SYMBOL);
    const struct hx_hip_module_ops *m = fn ? fn(HX_HIP_MODULE_ABI, &hx_rtc_host) : NULL;
    if (!m || m->struct_size < sizeof *m || !m->rtc_get || !m->rtc_compile) {
        fprintf(stderr, "hx-hip-rtc: %s is not an hx HIP module with hipRTC (ABI %d)\n", argv[2],
                HX_HIP_MODULE_ABI);
        return 1;
    }
    char err[1024] = "";
    if (compile) {
        if (m->rtc_compile(argv[3], argv[4], err, sizeof err) != HX_OK) {
            fprintf(stderr, "hx-hip-rtc: %s\n", err);
            return 1;
        }
        return 0;
    }
    char path[PATH_MAX], note[128];
    if (m->rtc_get(argv[3], path, sizeof path, note, sizeof note, err, sizeof err) != HX_OK) {
        fprintf(stderr, "hx-hip-rtc: %s\n", err);
        return 1;
    }
    printf("path=%s\nnote=%s\n", path, note);
    return 0;
}
