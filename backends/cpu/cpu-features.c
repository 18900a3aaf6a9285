/*
 * cpu-features.c — run-time choice of the SIMD path. hx__cpu_isa() is the best path this CPU
 * supports, unless HX_CPU_ISA=scalar|avx2|avx512 asks for one it supports (tests force each).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

/* The CPU family if the vendor is AMD ("AuthenticAMD": ebx "Auth", edx "enti", ecx "cAMD"),
 * else 0: CPUID leaf 1 EAX, base family plus extended family when the base is 0xF (0x19 is
 * Zen 3/4, 0x1A Zen 5). CPUID traps in a VM and every repacked weight asks, so it is read once. */
static int hx__amd_family = -1;

static int hx_cpu_amd_family(void)
{
    int f = __atomic_load_n(&hx__amd_family, __ATOMIC_ACQUIRE);
    if (f >= 0) return f;
    f = 0;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u &&
        __get_cpuid(1, &a, &b, &c, &d)) {
        const unsigned base = (a >> 8) & 0xF, ext = (a >> 20) & 0xFF;
        f = (int)(base == 0xF ? base + ext : base);
    }
#endif
    __atomic_store_n(&hx__amd_family, f, __ATOMIC_RELEASE);
    return f;
}

/* Decode weight streams per thread (cpu-x16-avx512.c), asked when a weight is repacked. Same-run A/B, median of 3 rounds, Qwen3
 * layer shapes from DRAM: on a Xeon (AMX) VM, before the kernels prefetched into L2, two
 * interleaved streams beat one by 15-30% for the low-bit types; on the Zen 5 VM one stream
 * beat two on every type and shape, 2 threads (e.g. Q6_K 1024x6144 135.8 -> 103.6 us, TQ1_0
 * 2048x1024 16.7 -> 11.7, Q1_0 3072x1024 14.3 -> 11.8) and 1 thread (3-15%). On the Xeon VM of
 * 2026-12-06 (2 threads, `--compare HX_CPU_STREAMS=1,2`, three rounds of 20 rotations, the four
 * Qwen3 shapes) one stream was faster for Q8_0, Q4_K, Q6_K and TQ2_0 in all 48 cases, by 1-6%
 * of a plain read of the same tiles, and TQ1_0 within 3% either way. So one everywhere;
 * HX_CPU_STREAMS=1..4 overrides. */
int hx__cpu_decode_streams(void)
{
    const char *env = getenv("HX_CPU_STREAMS");
    if (env && env[0] >= '1' && env[0] <= '4' && !env[1]) return env[0] - '0';
    return 1;
}

/* Software prefetch distance of the decode tile kernels (cpu-x16-avx512.c), asked when a weight
 * is repacked. On the Xeon and Zen 5 VMs prefetching into L2 16 KiB ahead let the compute-heavy
 * low-bit kernels keep enough lines in flight (docs/cpu.md). On the Zen 4 VM (2026-12-06, a
 * harness timing each kernel against a plain read of the same tiles call by call, 60-80
 * rotations of 120-400 copies each, median ratios to the plain read):
 *  - for Q8_0, Q4_0, Q4_K and Q6_K the prefetch cost 7-14% when memory read ~33 GB/s and
 *    20-30% at 45-60 GB/s (Q8_0 2048x1024 x1.43 -> x1.19, Q4_K x1.35 -> x1.12, Q6_K x1.33 ->
 *    x1.15): they compute little per byte and the hardware prefetcher alone keeps up, while a
 *    prefetch per line adds requests that compete with it;
 *  - for TQ2_0 and TQ1_0 8 KiB ahead beat 4, 16 and 32 KiB and none on nearly every shape and
 *    phase (TQ2_0 3072x1024 x1.11 -> x1.06, TQ1_0 3072x1024 x1.32 -> x1.25).
 * HX_CPU_PREFETCH=0, 8 or 16 sets the distance in KiB for every type. */
int hx__cpu_decode_prefetch(enum hx_dtype t)
{
    const char *env = getenv("HX_CPU_PREFETCH");
    if (env && !strcmp(env, "0")) return 0;
    if (env && !strcmp(env, "8")) return 8192;
    if (env && !strcmp(env, "16")) return 16384;
    if (hx_cpu_amd_family() != 0x19) return 16384;
    /* Q5_K takes Q4_K's (not measured apart) */
    if (t == HX_DTYPE_Q8_0 || t == HX_DTYPE_Q4_0 || t == HX_DTYPE_Q4_K || t == HX_DTYPE_Q5_K ||
        t == HX_DTYPE_Q6_K)
        return 0;
    /* Q2_0 and I2_S are 2-bit codes decoded as TQ2_0's are: its distance, not measured apart */
    return t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_Q2_0 || t == HX_DTYPE_I2_S
               ? 8192
               : 16384;
}

/* The Q1_0 lookup decode's walk (cpu-x16-vbmi.c), asked when a weight is repacked: tiles per
 * block (4 or 8) and how many groups ahead of the one running it prefetches into L2 (0: none).
 * 8 tiles, 7 groups (about 16 KiB) is the form measured on AMD (Zen 4, with the blocks of
 * adjacent tiles the walk took before 2026-12-06; not measured there since). On the Xeon VM,
 * blocks of adjacent tiles made K = 1024 prefer 4:4 (x1.05-1.13 of a plain read of the same
 * tiles) and larger K 8:3; with the blocks' tiles L apart (long streams side by side) 4:3,
 * 4:4, 8:2 and 8:3 ran within 5% of each other on each of the four Qwen3 shapes, 8:4 up to 7%
 * behind (2 threads, `--compare HX_CPU_Q1_LUT=4:4,4:3,8:3,8:2,8:4`, 30 rotations, two rounds),
 * 8:3 among the best on each (three rounds): x0.93 (1024->4096), x0.99-1.00 (2048->1024),
 * x0.86-0.87 (1024->6144), x0.88-0.90 (3072->1024). 8:7 ran at x0.93-1.07 there. So 8:7 on
 * AMD (to be measured with the long streams), 8:3 elsewhere. HX_CPU_Q1_LUT=TILES:AHEAD (4 or
 * 8 : 0..16) sets it. */
void hx__cpu_q1_lut(int *tiles, int *ahead)
{
    const char *env = getenv("HX_CPU_Q1_LUT");
    if (env && (env[0] == '4' || env[0] == '8') && env[1] == ':') {
        char *end = NULL;
        const long a = strtol(env + 2, &end, 10);
        if (end != env + 2 && !*end && a >= 0 && a <= 16) {
            *tiles = env[0] - '0', *ahead = (int)a;
            return;
        }
    }
    *tiles = 8;
    *ahead = hx_cpu_amd_family() != 0 ? 7 : 3;
}

/* AMX-INT8 for the Q8_0 prefill GEMM (cpu-x16-amx.c): the CPU has AMX-TILE and AMX-INT8
 * (CPUID 7.0 EDX bits 24, 25), the OS saves tile state (XCR0 bits 17, 18) and grants this
 * process its use (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux ≥ 5.16). Asked once. */
static int hx__amx_ok = -1;

static bool hx_cpu_amx_uncached(void)
{
#if defined(HX_HAVE_AMX) && defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return false;
#endif
}

bool hx__cpu_amx_supported(void)
{
    int ok = __atomic_load_n(&hx__amx_ok, __ATOMIC_ACQUIRE);
    if (ok < 0) {
        ok = hx_cpu_amx_uncached();
        __atomic_store_n(&hx__amx_ok, ok, __ATOMIC_RELEASE);
    }
    return ok;
}

bool hx__cpu_amx(void)
{
    if (hx__cpu_isa() != HX_CPU_ISA_AVX512) return false;
    const char *env = getenv("HX_CPU_AMX");
    if (env && !strcmp(env, "0")) return false;
    return hx__cpu_amx_supported();
}

bool hx__cpu_vbmi_supported(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512vbmi");
#else
    return false;
#endif
}

bool hx__cpu_vbmi(void)
{
    if (hx__cpu_isa() != HX_CPU_ISA_AVX512 || !hx__cpu_vbmi_supported()) return false;
    const char *env = getenv("HX_CPU_VBMI");
    return !(env && !strcmp(env, "0"));
}

/* The CPU's name by one rule on every machine: what the operating system calls it (Linux's
 * /proc/cpuinfo "model name", or "Model" on Arm: what lscpu and every monitor show the user),
 * and only where the OS names none, the processor's own CPUID brand string. The two can
 * differ: a hypervisor may give the guest kernel one brand and CPUID another. */
void hx__cpu_name(char *out, size_t len)
{
    char name[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (colon && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5))) {
            snprintf(name, sizeof name, "%s", colon + 1);
            break;
        }
    }
    if (f) fclose(f);
#if defined(__x86_64__)
    unsigned r[12], a, b, c, d;
    if (!name[0] && __get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(name, r, 48);
        name[48] = '\0';
    }
#endif
    /* trim: the brand string is padded with spaces (leading on some Intel parts) and NULs */
    size_t n = strnlen(name, sizeof name - 1), i = 0;
    while (n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\n' || name[n - 1] == '\t')) n--;
    while (i < n && (name[i] == ' ' || name[i] == '\t')) i++;
    snprintf(out, len, "%.*s", (int)(n - i), n > i ? name + i : "");
    if (!out[0] && len) snprintf(out, len, "unknown CPU");
}

const struct hx_cpu_kernels *hx__cpu_kernels(enum hx_cpu_isa isa)
{
    switch (isa) {
    case HX_CPU_ISA_AVX512: return &hx__cpu_kernels_avx512;
    case HX_CPU_ISA_AVX2: return &hx__cpu_kernels_avx2;
    default: return &hx__cpu_kernels_scalar;
    }
}

/* Chunks of the x16 matmuls (cpu-matmul.c, docs/cpu.md "Threads"): a decode chunk is long
 * enough to stream (well past the kernels' 8-16 KiB prefetch distance), a prefill chunk's tiles
 * stay in L1/L2 while the activation rows pass over them, and both are short enough that the
 * threads' shares can be rebalanced when one of them is descheduled. With each thread pinned to
 * its own core (bench-pool, Xeon VM, 2026-12-06) 16, 64 and 256 KiB decode chunks and the base
 * commit's static halves ran within noise of each other (Q8_0, TQ2_0, Q4_K, Q6_K, TQ1_0); for
 * prefill (m = 512) the fastest calls were the same for 64 and 256 KiB and the base, and with
 * other users' load the 10th percentile favoured 64 (Q8_0 1024x3072 6.9 against 11.5-12.3 ms). */
void hx__cpu_chunk_bytes(size_t *decode, size_t *prefill)
{
    long d = 64, p = 64; /* KiB */
    const char *env = getenv("HX_CPU_CHUNK_KIB");
    if (env && *env) {
        char *end;
        const long a = strtol(env, &end, 10);
        if (end != env && a > 0 && a < (1L << 30)) d = a;
        if (*end == ':') {
            const char *b0 = end + 1;
            const long b = strtol(b0, &end, 10);
            if (end != b0 && b > 0 && b < (1L << 30)) p = b;
        }
    }
    *decode = (size_t)d << 10;
    *prefill = (size_t)p << 10;
}
