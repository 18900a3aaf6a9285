/*
 * hip-enum.h — the HIP module's device enumeration (included once, by hip-module.hip): which
 * devices the runtime finds and whether the module holds code they can run (or, for AMD
 * targets the build's compiler cannot reach, hipRTC can make it), the reason when none is
 * usable, and each device's description for the engine (hx_device_info).
 */
#pragma once

/* ---- enumeration ---------------------------------------------------------------------------- */

/* Does the module carry code this device can run? */
static bool hx_hip_has_code(const hipDeviceProp_t *p, char *arch, size_t arch_len)
{
#if defined(HX_HIP_EMU)
    (void)p;
    snprintf(arch, arch_len, "emu");
    return true;
#elif defined(__CUDACC__) && !defined(__HIP__)
    /* sm_XY runs on X.Y' with Y' >= Y; compute_XY (PTX) is JIT-compiled for any cc >= XY. */
    const int cc = p->major * 10 + p->minor;
    snprintf(arch, arch_len, "sm_%d", cc);
    char list[128];
    snprintf(list, sizeof list, "%s", HX_HIP_TARGETS);
    for (char *save = NULL, *t = strtok_r(list, ",;", &save); t; t = strtok_r(NULL, ",;", &save)) {
        int v = 0;
        if (sscanf(t, "sm_%d", &v) == 1 && v / 10 == p->major && v % 10 <= p->minor) return true;
        if (sscanf(t, "compute_%d", &v) == 1 && v <= cc) return true;
    }
    return false;
#else
    /* "gfx1030:sramecc-:xnack-" → "gfx1030"; code objects are per target. */
    size_t n = strcspn(p->gcnArchName, ":");
    snprintf(arch, arch_len, "%.*s", (int)n, p->gcnArchName);
    char list[256];
    snprintf(list, sizeof list, "%s", HX_HIP_TARGETS);
    for (char *save = NULL, *t = strtok_r(list, ",;", &save); t; t = strtok_r(NULL, ",;", &save))
        if (!strcmp(t, arch)) return true;
    return false;
#endif
}

struct hx_hip_enum {
    int status;
    int n;                           /* usable devices */
    int ordinal[HX_HIP_MAX_DEVICES]; /* usable index → runtime ordinal */
    char code[HX_HIP_MAX_DEVICES][200]; /* where its kernels come from */
#if defined(HX_HIP_AMD_RTC)
    char rtc_path[HX_HIP_MAX_DEVICES][PATH_MAX]; /* hipRTC code object; "": prebuilt */
#endif
    char why[320];
};

/* Why there is no runtime to ask, before asking it (so the runtime never logs). */
static bool hx_hip_precheck(char *why, size_t len)
{
#if defined(HX_HIP_EMU)
    (void)why, (void)len;
    return true;
#elif defined(__CUDACC__) && !defined(__HIP__)
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, len, "NVIDIA driver not installed (libcuda.so.1 not found)");
        return false;
    }
    return true; /* the CUDA runtime uses it; never unloaded */
#else
    if (access("/dev/kfd", F_OK) != 0) {
        snprintf(why, len, "no /dev/kfd: the amdgpu kernel driver is not loaded (no AMD GPU)");
        return false;
    }
    if (access("/dev/kfd", R_OK | W_OK) != 0) {
        snprintf(why, len, "no permission on /dev/kfd (add the user to the 'render' group)");
        return false;
    }
    return true;
#endif
}

static void hx_hip_enumerate(struct hx_hip_enum *en)
{
    memset(en, 0, sizeof *en);
    if (!hx_hip_precheck(en->why, sizeof en->why)) return;
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e == hipErrorNoDevice || (e == hipSuccess && n <= 0)) {
        snprintf(en->why, sizeof en->why, "the %s runtime finds no GPU (%s)", HX_HIP_RUNTIME,
                 e == hipSuccess ? "0 devices" : hipGetErrorName(e));
        HX_HIP_IGNORE(hipGetLastError());
        return;
    }
    if (e != hipSuccess) {
        en->status = HX_E_DEVICE;
        snprintf(en->why, sizeof en->why, "driver error: hipGetDeviceCount: %s (%s)",
                 hipGetErrorName(e), hipGetErrorString(e));
        HX_HIP_IGNORE(hipGetLastError());
        return;
    }
    size_t wl = 0;
    for (int i = 0; i < n && en->n < HX_HIP_MAX_DEVICES; i++) {
        hipDeviceProp_t p;
        char arch[64];
        if ((e = hipGetDeviceProperties(&p, i)) != hipSuccess) {
            wl += (size_t)snprintf(en->why + wl, sizeof en->why - HX_MIN(wl, sizeof en->why),
                                   "%sdevice %d: hipGetDeviceProperties: %s", wl ? "; " : "", i,
                                   hipGetErrorName(e));
            continue;
        }
        const bool prebuilt = hx_hip_has_code(&p, arch, sizeof arch);
#if defined(HX_HIP_AMD_RTC)
        const int mode = hx_hip_rtc_mode();
        if (mode == 2 || (mode == 1 && !prebuilt)) {
            char path[PATH_MAX], note[64], rerr[256];
            if (hx_hip_rtc_get(arch, path, sizeof path, note, sizeof note, rerr, sizeof rerr) !=
                HX_OK) {
                wl += (size_t)snprintf(en->why + wl, sizeof en->why - HX_MIN(wl, sizeof en->why),
                                       "%s'%s' (%s): %s; %s", wl ? "; " : "", p.name, arch,
                                       prebuilt ? "HX_HIP_RTC=force" : "no prebuilt code", rerr);
                continue;
            }
            snprintf(en->rtc_path[en->n], sizeof en->rtc_path[en->n], "%s", path);
            snprintf(en->code[en->n], sizeof en->code[en->n], "hipRTC code object for %s (%s, %s)",
                     arch, note, path);
            en->ordinal[en->n++] = i;
            continue;
        }
#endif
        if (!prebuilt) {
            wl += (size_t)snprintf(en->why + wl, sizeof en->why - HX_MIN(wl, sizeof en->why),
                                   "%s'%s' (%s) has no code in this module (built for %s%s)",
                                   wl ? "; " : "", p.name, arch, HX_HIP_TARGETS,
#if defined(HX_HIP_AMD_RTC)
                                   "; hipRTC off: HX_HIP_RTC=0"
#else
                                   ""
#endif
            );
            continue;
        }
#if defined(HX_HIP_EMU)
        snprintf(en->code[en->n], sizeof en->code[en->n], "module code %s", HX_HIP_TARGETS);
#else
        snprintf(en->code[en->n], sizeof en->code[en->n],
                 "prebuilt code object for %s (module code %s)", arch, HX_HIP_TARGETS);
#endif
        en->ordinal[en->n++] = i;
    }
}

static const struct hx_hip_enum *hx_hip_devices(void)
{
    static struct hx_hip_enum en;
    static bool done = false; /* first called from the loader's probe, which runs once */
    if (!done) hx_hip_enumerate(&en), done = true;
    return &en;
}

static int hx_hip_device_count(int *n, char *err, size_t len)
{
    const struct hx_hip_enum *en = hx_hip_devices();
    *n = en->n;
    snprintf(err, len, "%s", en->why);
    return en->status;
}

static void hx_hip_version(char *out, size_t len)
{
    int drv = 0, rt = 0;
    HX_HIP_IGNORE(hipDriverGetVersion(&drv));
    HX_HIP_IGNORE(hipRuntimeGetVersion(&rt));
#if defined(__CUDACC__) && !defined(__HIP__)
    snprintf(out, len, "CUDA runtime %d.%d, driver %d.%d", rt / 1000, rt % 1000 / 10, drv / 1000,
             drv % 1000 / 10);
#elif defined(HX_HIP_EMU)
    (void)drv, (void)rt;
    snprintf(out, len, "host emulation");
#else
    snprintf(out, len, "HIP %d.%d.%d", rt / 10000000, rt / 100000 % 100, rt % 100000);
#endif
}

static int hx_hip_device_info(int idx, struct hx_device_info *out, char *err, size_t len)
{
    const struct hx_hip_enum *en = hx_hip_devices();
    if (idx < 0 || idx >= en->n) {
        snprintf(err, len, "no HIP device %d", idx);
        return HX_E_NOTFOUND;
    }
    hipDeviceProp_t p;
    HX_HIP_TRY(hipGetDeviceProperties(&p, en->ordinal[idx]), "hipGetDeviceProperties");
    char arch[64], ver[96];
    hx_hip_has_code(&p, arch, sizeof arch);
    hx_hip_version(ver, sizeof ver);
    uint32_t ss = out->struct_size ? out->struct_size : (uint32_t)sizeof *out;
    struct hx_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = ss;
    snprintf(info.name, sizeof info.name, "%.127s", p.name);
    snprintf(info.description, sizeof info.description, "%s, %s, %d CUs/SMs, %s", ver, arch,
             p.multiProcessorCount, en->code[idx]);
    info.kind = p.integrated ? HX_DEVICE_IGPU : HX_DEVICE_GPU;
    info.memory_total_bytes = p.totalGlobalMem;
    /* Free now (hipMemGetInfo on that device; an APU's is the share the GPU may use). The
     * current device is put back as it was. */
    int cur = 0;
    size_t mfree = 0, mtotal = 0;
    if (hipGetDevice(&cur) == hipSuccess && hipSetDevice(en->ordinal[idx]) == hipSuccess) {
        if (hipMemGetInfo(&mfree, &mtotal) == hipSuccess) info.memory_free_bytes = mfree;
        (void)hipSetDevice(cur);
    }
    (void)hipGetLastError();
    info.alignment_bytes = 256;
    info.unified_memory = p.integrated != 0;
    /* every type the kernels decode (hx_hip_type_ok): all but Q5_K (it stopped at Q1_0, so
     * engine devices left out Q2_0 and I2_S, which run here) */
    info.weight_types = ((1u << HX_DTYPE_COUNT) - 1u) & ~(1u << HX_DTYPE_Q5_K);
#if defined(HX_HIP_EMU)
    info.simulated = true;
#endif
    memcpy(out, &info, HX_MIN((size_t)ss, sizeof info));
    return HX_OK;
}
