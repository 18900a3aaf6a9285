/*
 * cpu-features.c — run-time choice of the SIMD path. hx__cpu_isa() is the best path this CPU
 * supports, unless HX_CPU_ISA=scalar|avx2|avx512 asks for one it supports (tests force each).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu-impl.h"

#if defined(__x86_64__)
#include <cpuid.h>
/* F16C from CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports has no "f16c". */
static bool hx_cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static bool hx__cpu_isa_supported_uncached(enum hx_cpu_isa isa)
{
    switch (isa) {
    case HX_CPU_ISA_SCALAR: return true;
#if defined(__x86_64__)
    case HX_CPU_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               hx_cpu_has_f16c();
    case HX_CPU_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx512bf16") && hx_cpu_has_f16c() &&
               __builtin_cpu_supports("fma");
#endif
    default: return false;
    }
}

/* CPUID traps to the hypervisor in a VM (tens of µs), so the answer is computed once; the
 * race between threads computing it is benign (same value). */
static int hx__isa_best = -1;
static unsigned hx__isa_ok = 0;

static void hx_cpu_isa_init(void)
{
    if (__atomic_load_n(&hx__isa_best, __ATOMIC_ACQUIRE) >= 0) return;
    unsigned ok = 0;
    int best = HX_CPU_ISA_SCALAR;
    for (int i = 0; i < HX_CPU_ISA_COUNT; i++)
        if (hx__cpu_isa_supported_uncached((enum hx_cpu_isa)i)) ok |= 1u << i, best = i;
    __atomic_store_n(&hx__isa_ok, ok, __ATOMIC_RELAXED);
    __atomic_store_n(&hx__isa_best, best, __ATOMIC_RELEASE);
}

bool hx__cpu_isa_supported(enum hx_cpu_isa isa)
{
    hx_cpu_isa_init();
    return (unsigned)isa < HX_CPU_ISA_COUNT && (hx__isa_ok >> isa & 1u);
}

enum hx_cpu_isa hx__cpu_isa_best(void)
{
    hx_cpu_isa_init();
    return (enum hx_cpu_isa)hx__isa_best;
}

const char *hx__cpu_isa_name(enum hx_cpu_isa isa)
{
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return (unsigned)isa < HX_CPU_ISA_COUNT ? names[isa] : "?";
}

enum hx_cpu_isa hx__cpu_isa(void)
{
    const char *env = getenv("HX_CPU_ISA");
    if (env && *env) {
        for (int i = 0; i < HX_CPU_ISA_COUNT; i++)
            if (!strcmp(env, hx__cpu_isa_name((enum hx_cpu_isa)i)) &&
                hx__cpu_isa_supported((enum hx_cpu_isa)i))
                return (enum hx_cpu_isa)i;
    }
    return hx__cpu_isa_best();
}

const struct hx_cpu_kernels *hx__cpu_kernels(enum hx_cpu_isa isa)
{
    switch (isa) {
    case HX_CPU_ISA_AVX512: return &hx__cpu_kernels_avx512;
    case HX_CPU_ISA_AVX2: return &hx__cpu_kernels_avx2;
    default: return &hx__cpu_kernels_scalar;
    }
}
