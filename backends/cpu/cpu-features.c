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

bool hx__cpu_isa_supported(enum hx_cpu_isa isa)
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

enum hx_cpu_isa hx__cpu_isa_best(void)
{
    if (hx__cpu_isa_supported(HX_CPU_ISA_AVX512)) return HX_CPU_ISA_AVX512;
    if (hx__cpu_isa_supported(HX_CPU_ISA_AVX2)) return HX_CPU_ISA_AVX2;
    return HX_CPU_ISA_SCALAR;
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
