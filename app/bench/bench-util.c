/*
 * bench-util.c — read-bandwidth probe and sample statistics for the benchmarks, and the
 * --shapes list and random weights of the kernel and NPU benchmarks.
 *
 * The probe is the roofline every memory-bound figure is compared with, so it has to read as
 * fast as the machine can: the buffer is at least 8× the last-level cache (so no pass is served
 * from cache), each pool thread first-touches and then streams only its own slice, the inner
 * loop issues full-width loads into eight independent accumulators (AVX-512 or AVX2 chosen at
 * run time; the file itself is built for the baseline ISA), and the time of a pass runs from a
 * barrier before the first load to a barrier after the last thread finishes. One untimed pass
 * warms TLBs and prefetchers; the median of the timed passes is the figure to use, the best is
 * reported beside it.
 *
 * Which software prefetch reads fastest depends on the CPU, so the loop comes in three forms
 * and the buffer's first passes pick the fastest (hx_app_bw_pick): none; two lines per 512
 * bytes into L1, 2 KiB ahead; two lines per 512 bytes into L2, 8 KiB ahead. On the Zen 5 VM of
 * 2026-12-04 the plain loop read 23-30 GB/s in phases where the L1 prefetch read 36-79; on the
 * Zen 4 VM of 2026-12-06 the L1 prefetch read 47-48 GB/s where the plain loop read 57-61 and
 * the L2 prefetch 60-66 (a standalone copy of the loop, 2 threads, 256 MiB, same minutes).
 */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "bench-util.h"
#include "hx-internal.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HX_APP_X86 1
#endif

/* Elements of one block: 512 bytes, eight 64-byte cache lines. Slices are whole blocks. */
#define HX_APP_BLOCK 64
#define HX_APP_MAX_THREADS 256

double hx_app_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* ---- cache and memory sizes ---------------------------------------------------------------- */

/* "491520K", "32M", "1024" (bytes) as in sysfs cache/index<N>/size. */
static size_t hx_app_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10;
    else if (*end == 'M' || *end == 'm') v <<= 20;
    else if (*end == 'G' || *end == 'g') v <<= 30;
    return (size_t)v;
}

/* The largest data or unified cache sysfs lists for cpu0; 0 if none is listed. */
static size_t hx_app_llc_sysfs(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], type[32] = "", size[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(type, sizeof type, f)) type[0] = '\0';
        fclose(f);
        if (!strncmp(type, "Instruction", 11)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) continue;
        if (fgets(size, sizeof size, f)) {
            size_t v = hx_app_parse_size(size);
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

/* sysfs first: it is the kernel's view of the cache one CPU sees. glibc's sysconf decodes CPUID
 * itself and can be far off in a VM: on the Zen 4 VM of 2026-12-06 it gave 320 MiB of L3 where
 * sysfs and lscpu gave 32 MiB. */
size_t hx_app_llc_bytes(void)
{
    size_t llc = hx_app_llc_sysfs();
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (!llc && l3 > 0) llc = (size_t)l3;
#endif
    return llc;
}

/* MemAvailable from /proc/meminfo (free + reclaimable), else free pages; 0 if unknown. */
static size_t hx_app_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (size_t)kb << 10;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

size_t hx_app_bytes_past_llc(unsigned times)
{
    size_t want = times * hx_app_llc_bytes(), avail = hx_app_mem_available();
    if (want < ((size_t)256 << 20)) want = (size_t)256 << 20;
    if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
    if (avail && want > avail / 4) want = avail / 4;
    return want;
}

size_t hx_app_bw_default_bytes(void)
{
    return hx_app_bytes_past_llc(8);
}

/* ---- the read kernels: sum a slice of n_blocks blocks ------------------------------------ */

typedef uint64_t (*hx_app_sum_fn)(const uint64_t *p, size_t n_blocks);

static uint64_t hx_app_sum_scalar(const uint64_t *p, size_t n_blocks)
{
    uint64_t a[8] = {0};
    for (size_t i = 0; i < n_blocks * HX_APP_BLOCK; i += 8)
        for (int j = 0; j < 8; j++) a[j] += p[i + j];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/* Software prefetch of one 512-byte block's read loop: none, two lines into L1 2 KiB ahead, or
 * two lines into L2 8 KiB ahead (the hardware prefetchers fetch the lines between). */
enum { HX_APP_PF_NONE, HX_APP_PF_L1, HX_APP_PF_L2, HX_APP_PF_COUNT };

#ifdef HX_APP_X86
static const char *const hx_app_pf_names[HX_APP_PF_COUNT] = {
    "no software prefetch", "L1 prefetch 2 KiB ahead", "L2 prefetch 8 KiB ahead"};

#define HX_APP_PREFETCH(pf, p)                                                                      \
    do {                                                                                            \
        if ((pf) == HX_APP_PF_L1) {                                                                 \
            _mm_prefetch((const char *)(p) + 2048, _MM_HINT_T0);                                    \
            _mm_prefetch((const char *)(p) + 2048 + 256, _MM_HINT_T0);                              \
        } else if ((pf) == HX_APP_PF_L2) {                                                          \
            _mm_prefetch((const char *)(p) + 8192, _MM_HINT_T1);                                    \
            _mm_prefetch((const char *)(p) + 8192 + 256, _MM_HINT_T1);                              \
        }                                                                                           \
    } while (0)

/* One block = eight 64-byte loads, one per accumulator: eight independent dependency chains. */
static inline __attribute__((target("avx512f"), always_inline)) uint64_t
hx_app_sum_avx512(const uint64_t *p, size_t n_blocks, const int pf)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    for (size_t b = 0; b < n_blocks; b++, p += HX_APP_BLOCK) {
        HX_APP_PREFETCH(pf, p);
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + 0)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + 8)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + 16)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + 24)));
        a4 = _mm512_add_epi64(a4, _mm512_load_si512((const void *)(p + 32)));
        a5 = _mm512_add_epi64(a5, _mm512_load_si512((const void *)(p + 40)));
        a6 = _mm512_add_epi64(a6, _mm512_load_si512((const void *)(p + 48)));
        a7 = _mm512_add_epi64(a7, _mm512_load_si512((const void *)(p + 56)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    a4 = _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7));
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(a0, a4));
}

/* One block = sixteen 32-byte loads into eight accumulators (two each). */
static inline __attribute__((target("avx2"), always_inline)) uint64_t
hx_app_sum_avx2(const uint64_t *p, size_t n_blocks, const int pf)
{
    __m256i a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_si256();
    for (size_t b = 0; b < n_blocks; b++, p += HX_APP_BLOCK) {
        HX_APP_PREFETCH(pf, p);
        for (int j = 0; j < 16; j++)
            a[j & 7] = _mm256_add_epi64(a[j & 7], _mm256_load_si256((const __m256i *)(p + 4 * j)));
    }
    for (int j = 1; j < 8; j++) a[0] = _mm256_add_epi64(a[0], a[j]);
    uint64_t lane[4];
    _mm256_storeu_si256((__m256i *)lane, a[0]);
    return lane[0] + lane[1] + lane[2] + lane[3];
}

/* Each ISA's loop with each prefetch form as a plain function, for the probe to pick from. */
#define HX_APP_SUM_FORM(isa, tgt, pf)                                                               \
    __attribute__((target(tgt))) static uint64_t hx_app_sum_##isa##_##pf(const uint64_t *p,       \
                                                                          size_t n)                \
    {                                                                                               \
        return hx_app_sum_##isa(p, n, HX_APP_PF_##pf);                                              \
    }
HX_APP_SUM_FORM(avx512, "avx512f", NONE)
HX_APP_SUM_FORM(avx512, "avx512f", L1)
HX_APP_SUM_FORM(avx512, "avx512f", L2)
HX_APP_SUM_FORM(avx2, "avx2", NONE)
HX_APP_SUM_FORM(avx2, "avx2", L1)
HX_APP_SUM_FORM(avx2, "avx2", L2)
#endif

/* The read loops this CPU can run (indexed by prefetch form); returns how many. */
static int hx_app_sum_pick(const char **name, hx_app_sum_fn *fns, const char **pf_names)
{
#ifdef HX_APP_X86
    __builtin_cpu_init();
    const bool a512 = __builtin_cpu_supports("avx512f"), a2 = __builtin_cpu_supports("avx2");
    if (a512 || a2) {
        static const hx_app_sum_fn f512[HX_APP_PF_COUNT] = {
            hx_app_sum_avx512_NONE, hx_app_sum_avx512_L1, hx_app_sum_avx512_L2};
        static const hx_app_sum_fn f2[HX_APP_PF_COUNT] = {hx_app_sum_avx2_NONE, hx_app_sum_avx2_L1,
                                                           hx_app_sum_avx2_L2};
        *name = a512 ? "avx512" : "avx2";
        for (int i = 0; i < HX_APP_PF_COUNT; i++)
            fns[i] = a512 ? f512[i] : f2[i], pf_names[i] = hx_app_pf_names[i];
        return HX_APP_PF_COUNT;
    }
#endif
    *name = "scalar";
    fns[0] = hx_app_sum_scalar, pf_names[0] = "no software prefetch";
    return 1;
}

/* ---- the probe ------------------------------------------------------------------------------ */

static volatile uint64_t hx_app_sink;

struct hx_app_bw_buf {
    uint64_t *buf;
    size_t n_blocks, nbytes;
    size_t llc_bytes;      /* read once at open: measure runs around every benchmark case */
    int n_threads;         /* threads asked for */
    hx_app_sum_fn sum;         /* the fastest of the forms below (hx_app_bw_pick) */
    const char *kernel, *prefetch;
    int n_forms;
    hx_app_sum_fn forms[HX_APP_PF_COUNT];
    const char *form_names[HX_APP_PF_COUNT];
};

/* Thread tid of nt reads blocks [*b0, *b1). The same split first-touches and reads, so each
 * thread's pages are local to it. */
static void hx_app_bw_slice(size_t n_blocks, int tid, int nt, size_t *b0, size_t *b1)
{
    *b0 = n_blocks * (size_t)tid / (size_t)nt;
    *b1 = n_blocks * (size_t)(tid + 1) / (size_t)nt;
}

/* First touch: each thread writes the blocks it will read. */
static void hx_app_bw_touch(void *arg, int tid, int nt)
{
    struct hx_app_bw_buf *b = arg;
    size_t b0, b1;
    hx_app_bw_slice(b->n_blocks, tid, nt, &b0, &b1);
    uint64_t *p = b->buf + b0 * HX_APP_BLOCK;
    for (size_t i = 0; i < (b1 - b0) * HX_APP_BLOCK; i++) p[i] = i ^ (uint64_t)tid;
}

/* One pass: each thread sums its blocks; sinks[tid] keeps the work from being optimized away. */
struct hx_app_bw_pass {
    struct hx_app_bw_buf *b;
    size_t first, count; /* the blocks this pass reads */
    uint64_t sinks[HX_APP_MAX_THREADS];
    _Atomic int used;
};

static void hx_app_bw_read(void *arg, int tid, int nt)
{
    struct hx_app_bw_pass *ps = arg;
    size_t b0, b1;
    hx_app_bw_slice(ps->count, tid, nt, &b0, &b1);
    ps->sinks[tid] += ps->b->sum(ps->b->buf + (ps->first + b0) * HX_APP_BLOCK, b1 - b0);
    if (tid == 0) atomic_store(&ps->used, nt);
}

/* Three rounds of one pass per read loop form, in turn (so a slow phase of a shared machine
 * does not fall on one form only); the form with the fastest median reads from then on. */
static void hx_app_bw_pick(struct hx_app_bw_buf *b)
{
    enum { ROUNDS = 3 };
    double gbs[HX_APP_PF_COUNT][ROUNDS];
    struct hx_app_bw_pass ps = {.b = b, .count = b->n_blocks};
    atomic_init(&ps.used, 1);
    int best = 0;
    for (int r = 0; r < ROUNDS && b->n_forms > 1; r++)
        for (int f = 0; f < b->n_forms; f++) {
            b->sum = b->forms[f];
            const double t0 = hx_app_now_us();
            hx__pool_run(b->n_threads, hx_app_bw_read, &ps);
            const double us = hx_app_now_us() - t0;
            gbs[f][r] = (double)b->nbytes / (us > 0 ? us : 1e-3) / 1e3;
        }
    for (int f = 1; f < b->n_forms; f++)
        if (hx_app_median(gbs[f], ROUNDS) > hx_app_median(gbs[best], ROUNDS)) best = f;
    for (int i = 0; i < atomic_load(&ps.used); i++) hx_app_sink += ps.sinks[i];
    b->sum = b->forms[best];
    b->prefetch = b->form_names[best];
}

struct hx_app_bw_buf *hx_app_bw_open(int n_threads, size_t working_set_bytes)
{
    struct hx_app_bw_buf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    size_t want = working_set_bytes ? working_set_bytes : hx_app_bw_default_bytes();
    b->n_blocks = want / (HX_APP_BLOCK * sizeof(uint64_t));
    b->nbytes = b->n_blocks * HX_APP_BLOCK * sizeof(uint64_t);
    b->n_threads = n_threads < 1 ? 1 : n_threads > HX_APP_MAX_THREADS ? HX_APP_MAX_THREADS : n_threads;
    void *m = b->nbytes ? mmap(NULL, b->nbytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (m == MAP_FAILED) {
        free(b);
        return NULL;
    }
    b->buf = m;
#ifdef MADV_HUGEPAGE
    madvise(m, b->nbytes, MADV_HUGEPAGE);   /* fewer TLB misses, as a tuned engine would get */
#endif
    b->n_forms = hx_app_sum_pick(&b->kernel, b->forms, b->form_names);
    b->llc_bytes = hx_app_llc_bytes();
    hx__pool_run(b->n_threads, hx_app_bw_touch, b);
    hx_app_bw_pick(b);
    return b;
}

void hx_app_bw_close(struct hx_app_bw_buf *b)
{
    if (!b) return;
    munmap(b->buf, b->nbytes);
    free(b);
}

/* One untimed pass, then n_passes timed ones, each a task of the pool (core/pool.h) like the
 * kernels it is compared with: a pass ends when the slowest thread is done. */
int hx_app_bw_measure(struct hx_app_bw_buf *b, int n_passes, struct hx_app_bw *out, double *pass_gbs)
{
    memset(out, 0, sizeof *out);
    if (n_passes < 1) n_passes = 1;
    double *us = malloc((size_t)n_passes * sizeof *us);
    if (!us) return -1;
    struct hx_app_bw_pass ps = {.b = b, .count = b->n_blocks};
    atomic_init(&ps.used, 1);
    struct hx_app_load_mark m0, m1;
    hx_app_load_mark(&m0);
    for (int pass = -1; pass < n_passes; pass++) {
        const double t0 = hx_app_now_us();
        hx__pool_run(b->n_threads, hx_app_bw_read, &ps);
        if (pass >= 0) us[pass] = hx_app_now_us() - t0;
    }
    const int used = atomic_load(&ps.used);
    for (int i = 0; i < used; i++) hx_app_sink += ps.sinks[i];
    hx_app_load_mark(&m1);
    for (int i = 0; i < n_passes; i++)   /* bytes / µs / 1e3 = GB/s */
        us[i] = (double)b->nbytes / (us[i] > 0 ? us[i] : 1e-3) / 1e3;
    if (pass_gbs) memcpy(pass_gbs, us, (size_t)n_passes * sizeof *us);
    out->n_threads = used;
    out->other_cores = hx_app_other_cores(&m0, &m1);
    out->kernel = b->kernel;
    out->prefetch = b->prefetch;
    out->median_gbs = hx_app_median(us, (size_t)n_passes);
    out->best_gbs = hx_app_max(us, (size_t)n_passes);
    out->working_set_bytes = b->nbytes;
    out->llc_bytes = b->llc_bytes;
    out->n_passes = n_passes;
    out->below_2x_llc = out->llc_bytes && b->nbytes < 2 * out->llc_bytes;
    free(us);
    return 0;
}

/* Blocks a read of `bytes` takes (at least one), or 0 when the buffer holds fewer: a read of
 * fewer bytes would not be the same read. */
static size_t hx_app_bw_blocks(const struct hx_app_bw_buf *b, size_t bytes)
{
    const size_t bb = HX_APP_BLOCK * sizeof(uint64_t);
    const size_t nb = bytes ? (bytes + bb - 1) / bb : 1;
    return nb <= b->n_blocks ? nb : 0;
}

int hx_app_bw_burst(struct hx_app_bw_buf *b, size_t bytes, int n_samples, double *median_us)
{
    const size_t nb = hx_app_bw_blocks(b, bytes);
    if (!nb) return -1;
    const size_t per = b->n_blocks / nb; /* reads per rotation through the buffer */
    if (n_samples < 1) n_samples = 1;
    double *us = malloc((size_t)n_samples * sizeof *us);
    if (!us) return -1;
    size_t cur = 0;
    for (int s = -1; s < n_samples; s++) { /* one untimed rotation */
        double sum = 0.0, one;
        for (size_t c = 0; c < per; c++) {
            hx_app_bw_read_one(b, bytes, &cur, &one);
            sum += one;
        }
        if (s >= 0) us[s] = sum / (double)per;
    }
    *median_us = hx_app_median(us, (size_t)n_samples);
    free(us);
    return 0;
}

int hx_app_bw_read_one(struct hx_app_bw_buf *b, size_t bytes, size_t *cursor, double *us)
{
    const size_t nb = hx_app_bw_blocks(b, bytes);
    if (!nb) return -1;
    const size_t per = b->n_blocks / nb;
    struct hx_app_bw_pass ps = {.b = b, .count = nb, .first = (*cursor % per) * nb};
    atomic_init(&ps.used, 1);
    const double t0 = hx_app_now_us();
    hx__pool_run(b->n_threads, hx_app_bw_read, &ps);
    *us = hx_app_now_us() - t0;
    for (int i = 0; i < atomic_load(&ps.used); i++) hx_app_sink += ps.sinks[i];
    *cursor = (*cursor + 1) % per;
    return 0;
}

int hx_app_bw_probe(int n_threads, size_t working_set_bytes, int n_passes, struct hx_app_bw *out)
{
    memset(out, 0, sizeof *out);
    struct hx_app_bw_buf *b = hx_app_bw_open(n_threads, working_set_bytes);
    if (!b) return -1;
    int rc = hx_app_bw_measure(b, n_passes < 7 ? 7 : n_passes, out, NULL);
    hx_app_bw_close(b);
    return rc;
}

double hx_app_read_bandwidth_gbs(int n_threads, size_t working_set_bytes)
{
    size_t floor_bytes = hx_app_bw_default_bytes();
    struct hx_app_bw bw;
    if (working_set_bytes < floor_bytes) working_set_bytes = floor_bytes;
    return hx_app_bw_probe(n_threads, working_set_bytes, 9, &bw) ? 0.0 : bw.median_gbs;
}

/* ---- load from other processes -------------------------------------------------------------- */

void hx_app_load_mark(struct hx_app_load_mark *m)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    int got = 0;
    if (f)
        got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]);
    if (f) fclose(f);
    long tick = sysconf(_SC_CLK_TCK);
    /* user nice system idle iowait irq softirq steal: all but idle and iowait are busy. */
    double busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
    m->busy_us = got == 8 && tick > 0 ? busy * 1e6 / (double)tick : -1.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m->self_us = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
    m->t_us = hx_app_now_us();
}

double hx_app_other_cores(const struct hx_app_load_mark *a, const struct hx_app_load_mark *b)
{
    double dt = b->t_us - a->t_us;
    if (a->busy_us < 0 || b->busy_us < 0 || dt < 1e5) return -1.0;
    double other = (b->busy_us - a->busy_us) - (b->self_us - a->self_us);
    return other > 0 ? other / dt : 0.0;
}

/* ---- statistics ----------------------------------------------------------------------------- */

double hx_app_mean(const double *v, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : 0.0;
}

double hx_app_stddev(const double *v, size_t n)
{
    if (n < 2) return 0.0;
    double m = hx_app_mean(v, n), s = 0.0;
    for (size_t i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (double)(n - 1));
}

double hx_app_min(const double *v, size_t n)
{
    double m = n ? v[0] : 0.0;
    for (size_t i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

double hx_app_max(const double *v, size_t n)
{
    double m = n ? v[0] : 0.0;
    for (size_t i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static int hx_app_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hx_app_median(const double *v, size_t n)
{
    if (!n) return 0.0;
    double *t = malloc(n * sizeof *t);
    if (!t) return v[0];
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, hx_app_cmp_double);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* ---- random weights -------------------------------------------------------------------------- */

#define HX_APP_WEIGHT_POOL_ROWS 64

float hx_app_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    *state = x;
    return (float)((x >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

void *hx_app_random_weight(enum hx_dtype t, int64_t k, int64_t n, uint64_t *rng, size_t *nbytes)
{
    size_t rb = hx_dtype_row_bytes(t, k);
    int64_t pool = n < HX_APP_WEIGHT_POOL_ROWS ? n : HX_APP_WEIGHT_POOL_ROWS;
    char *w = malloc(rb * (size_t)n), *p = malloc(rb * (size_t)pool);
    float *f = malloc(sizeof(float) * (size_t)k);
    bool ok = w && p && f;
    for (int64_t r = 0; ok && r < pool; r++) {
        for (int64_t i = 0; i < k; i++) f[i] = hx_app_rand(rng);
        ok = hx_quantize_row(t, f, p + (size_t)r * rb, k) == HX_OK;
    }
    for (int64_t r = 0; ok && r < n; r++)
        memcpy(w + (size_t)r * rb, p + (size_t)(r % pool) * rb, rb);
    free(p), free(f);
    if (!ok) {
        free(w);
        return NULL;
    }
    *nbytes = rb * (size_t)n;
    return w;
}

/* ---- --shapes ------------------------------------------------------------------------------- */

struct hx_app_shape_ctx {
    int64_t k_max, n_max, (*out)[2];
    int n, cap;
};

static bool hx_app_shape_item(void *user, const char *item, int i)
{
    struct hx_app_shape_ctx *c = user;
    (void)i;
    if (!strcmp(item, "qwen3")) {
        struct hx_app_gemm g[HX_APP_SHAPE_GEMMS];
        int n_g = hx_app_shape_gemms(hx_app_shape_find("qwen3-0.6b"), g);
        for (int j = 0; j < n_g && c->n < c->cap; j++, c->n++)
            c->out[c->n][0] = g[j].k, c->out[c->n][1] = g[j].n;
        return true;
    }
    const char *x = strchr(item, 'x');
    char k[256];
    if (!x || c->n >= c->cap) return false;
    snprintf(k, sizeof k, "%.*s", (int)(x - item), item);
    if (!hx_app_parse_i64(k, 1, c->k_max, &c->out[c->n][0]) ||
        !hx_app_parse_i64(x + 1, 1, c->n_max, &c->out[c->n][1]))
        return false;
    c->n++;
    return true;
}

int hx_app_shape_list(const char *s, int64_t k_max, int64_t n_max, int64_t (*out)[2], int cap)
{
    struct hx_app_shape_ctx c = {.k_max = k_max, .n_max = n_max, .out = out, .cap = cap};
    return hx_app_list(s, INT_MAX, hx_app_shape_item, &c) < 0 || !c.n ? -1 : c.n;
}
