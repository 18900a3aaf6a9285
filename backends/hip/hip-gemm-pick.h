/*
 * hip-gemm-pick.h — which prefill GEMM a device runs (included once, by hip-module.hip, before
 * hx_hip_init, which calls hx_hip_gemm_pick): the paths the device's code object has, asked of
 * the code itself (hx_hip_gemm_caps), the device's architecture, and HX_HIP_GEMM. The kernels
 * are hip-mma.h's; hip-launch.h maps the device's choice to a kernel per weight type.
 */
#pragma once

enum { HX_HIP_GEMM_SIMT = 0, HX_HIP_GEMM_MMA = 1, HX_HIP_GEMM_MMA_F16 = 2, HX_HIP_GEMM_WMMA = 3 };
/* AMD WMMA beyond RDNA3's f16 (hip-mma.h hx_hip_gemm_wmma): gfx11 int8 + f16 (wmma8), gfx12
 * int8 + f16 (wmma12), gfx12 f16 for every type (wmma12-16). "wmma" stays gfx11 f16 for every
 * type. */
enum { HX_HIP_GEMM_WMMA_I8 = 4, HX_HIP_GEMM_WMMA12 = 5, HX_HIP_GEMM_WMMA12_F16 = 6 };
static const char *const hx_hip_gemm_names[] = {"simt",  "mma",    "mma16",    "wmma",
                                                "wmma8", "wmma12", "wmma12-16"};
#define HX_HIP_GEMM_N_NAMES ((int)(sizeof hx_hip_gemm_names / sizeof hx_hip_gemm_names[0]))

/* Names of the matrix paths (hip-mma.h numbers) for the log. */
static const char *hx_hip_tc_path_name(int p)
{
    switch (p) {
    case HX_HIP_TC_MMA_F16: return "mma f16";
    case HX_HIP_TC_MMA_S8: return "mma int8";
    case HX_HIP_TC_WMMA_F16: return "wmma f16 (gfx11)";
    case HX_HIP_TC_MMA_BF16: return "mma bf16";
    case HX_HIP_TC_MMA_TF32: return "mma tf32";
    case HX_HIP_TC_WMMA_I8: return "wmma int8 (gfx11)";
    case HX_HIP_TC_WMMA12_F16: return "wmma f16 (gfx12)";
    case HX_HIP_TC_WMMA12_I8: return "wmma int8 (gfx12)";
    default: return "?";
    }
}

/* The paths the code this device runs has (hip-mma.h bits) and whose fragment self-check passed
 * on this device, from hx_hip_gemm_caps: a code object built or hipRTC-compiled without the
 * instruction reports none, and a path whose check fails is logged and left out. 0 on any
 * failure. */
static int hx_hip_gemm_caps_of(struct hx_hip_dev *d)
{
#if defined(HX_HIP_AMD_RTC)
    hx_hip_rtc_cur = d->rtc;
#endif
    int *p = NULL, caps[2] = {0, 0};
    if (hipMalloc((void **)&p, sizeof caps) != hipSuccess) {
        HX_HIP_IGNORE(hipGetLastError());
        return 0;
    }
    if (hx_hip_launch(hx_hip_gemm_caps, dim3(1), dim3(32), d->stream, p) != hipSuccess ||
        hipMemcpyAsync(caps, p, sizeof caps, hipMemcpyDeviceToHost, d->stream) != hipSuccess ||
        hipStreamSynchronize(d->stream) != hipSuccess) {
        HX_HIP_IGNORE(hipGetLastError());
        caps[0] = caps[1] = 0;
    }
    HX_HIP_IGNORE(hipFree(p));
    for (int b = 1; b < 32; b++)
        if ((caps[1] & ~caps[0]) & (1 << b))
            hx_hip_log(HX_LOG_LEVEL_WARN,
                       "hip: device %d: the %s matrix path failed its self-check on this device "
                       "(its register layout is not the documented one); not used",
                       d->idx, hx_hip_tc_path_name(b));
    return caps[0];
}

/* The device's prefill GEMM (docs/hip.md "Prefill GEMM"): NVIDIA sm_80+ mma (int8 for the
 * types hx_hip_tc_int8 takes, f16 for the others, and for F32 / BF16 weights the float paths:
 * 3xTF32, split bf16), AMD gfx11 WMMA (int8 + f16 where the code has both, else f16), AMD gfx12
 * WMMA (int8 + f16), else the SIMT GEMM; only where the code has the instruction.
 * HX_HIP_GEMM=auto|mma|mma16|wmma|wmma8|wmma12|wmma12-16|simt overrides it where the code has
 * that path (mma16: f16 mma for every integer and f16-class type; wmma: gfx11 f16 WMMA for every
 * type; wmma8: gfx11 int8 + f16; wmma12: gfx12 int8 + f16; wmma12-16: gfx12 f16 for every
 * type); a "-fsimt" suffix on mma or mma16 keeps F32 and BF16 weights on the SIMT GEMM;
 * otherwise it is logged and ignored. On the emulator the architecture is HX_HIP_EMU_ARCH's. The
 * choice is logged (info) and is part of the device's description. */
static void hx_hip_gemm_pick_float(struct hx_hip_dev *d, int caps);
static void hx_hip_gemm_pick(struct hx_hip_dev *d, const hipDeviceProp_t *p)
{
    const int caps = hx_hip_gemm_caps_of(d);
    /* mma: int8 and f16 (both checked), mma16: f16 */
    const bool mma = (caps & HX_HIP_TC_CAPS_MMA) == HX_HIP_TC_CAPS_MMA && HX_HIP_TC_CAPS_MMA,
               mma16 = (caps & (1 << HX_HIP_TC_MMA_F16)) != 0,
               wmma = (caps & HX_HIP_TC_CAPS_WMMA) != 0;
    const bool wmma8 = wmma && (caps & (1 << HX_HIP_TC_WMMA_I8)) != 0,
               wmma12 = (caps & (1 << HX_HIP_TC_WMMA12_F16)) != 0 &&
                        (caps & (1 << HX_HIP_TC_WMMA12_I8)) != 0;
    bool nv80 = false, gfx11 = false, gfx12 = false;
#if defined(__CUDACC__) && !defined(__HIP__)
    nv80 = p->major >= 8;
#else
    gfx11 = !strncmp(p->gcnArchName, "gfx11", 5);
    gfx12 = !strncmp(p->gcnArchName, "gfx12", 5);
#if defined(HX_HIP_EMU)
    nv80 = p->major >= 8;
#endif
#endif
    d->gemm = nv80 && mma       ? (int)HX_HIP_GEMM_MMA
              : nv80 && mma16   ? (int)HX_HIP_GEMM_MMA_F16
              : gfx11 && wmma8  ? (int)HX_HIP_GEMM_WMMA_I8
              : gfx11 && wmma   ? (int)HX_HIP_GEMM_WMMA
              : gfx12 && wmma12 ? (int)HX_HIP_GEMM_WMMA12
                                : (int)HX_HIP_GEMM_SIMT;
    const char *env = getenv("HX_HIP_GEMM");
    /* "mma-fsimt", "mma16-fsimt": the path without its float-weight part */
    char base[16] = "";
    const size_t el = env ? strlen(env) : 0;
    const bool fsimt = el > 6 && el - 6 < sizeof base && !strcmp(env + el - 6, "-fsimt");
    if (fsimt) memcpy(base, env, el - 6), base[el - 6] = 0;
    bool float_off = false;
    if (env && *env && strcmp(env, "auto")) {
        int want = -1;
        for (int i = 0; i < HX_HIP_GEMM_N_NAMES; i++)
            if (!strcmp(fsimt ? base : env, hx_hip_gemm_names[i]) &&
                (!fsimt || i == HX_HIP_GEMM_MMA || i == HX_HIP_GEMM_MMA_F16))
                want = i;
        const bool ok = want == HX_HIP_GEMM_SIMT ||
                        (want == HX_HIP_GEMM_MMA && mma) || (want == HX_HIP_GEMM_MMA_F16 && mma16) ||
                        (want == HX_HIP_GEMM_WMMA && wmma) ||
                        (want == HX_HIP_GEMM_WMMA_I8 && wmma8) ||
                        ((want == HX_HIP_GEMM_WMMA12 || want == HX_HIP_GEMM_WMMA12_F16) && wmma12);
        if (ok) d->gemm = want, float_off = fsimt;
        else
            hx_hip_log(HX_LOG_LEVEL_WARN,
                       "hip: HX_HIP_GEMM=%s ignored (auto|mma|mma16|wmma|wmma8|wmma12|wmma12-16|"
                       "simt, mma-fsimt, mma16-fsimt, and only a path this device's code has); "
                       "prefill GEMM %s",
                       env, hx_hip_gemm_names[d->gemm]);
    }
    hx_hip_gemm_pick_float(d, float_off ? 0 : caps);
    hx_hip_log(HX_LOG_LEVEL_INFO, "hip: device %d: prefill GEMM %s%s (code has:%s%s%s%s%s%s)",
               d->idx, hx_hip_gemm_names[d->gemm], d->gemm_float ? " + float mma" : "",
               mma ? " mma" : mma16 ? " mma16" : "", wmma ? " wmma" : "", wmma8 ? " wmma8" : "",
               wmma12 ? " wmma12" : "", caps & HX_HIP_TC_CAPS_MMAF ? " mma-float" : "",
               mma16 || wmma || wmma8 || wmma12 ? "" : " simt only");
}

/* Float weights (F32: 3xTF32, BF16: split bf16; hip-mma.h hx_hip_gemm_tcf) on the matrix units
 * wherever the device's GEMM is an NVIDIA mma one and its code has the float paths; caps 0:
 * never (HX_HIP_GEMM=...-fsimt). */
static void hx_hip_gemm_pick_float(struct hx_hip_dev *d, int caps)
{
    d->gemm_float = (d->gemm == HX_HIP_GEMM_MMA || d->gemm == HX_HIP_GEMM_MMA_F16) &&
                    (caps & HX_HIP_TC_CAPS_MMAF) == HX_HIP_TC_CAPS_MMAF;
}
