/*
 * bench-pool.c — per-call times of the cpu backend's quantized matmuls, as minimum, 10th
 * percentile and median over many calls, for comparing how the work is split over threads
 * (core/pool.c, backends/cpu/cpu-matmul.c) on a machine that other users keep busy: their load
 * only ever adds time to a call, so the low percentiles of thousands of calls say what a call
 * costs when nothing else runs, where a median says what the load was.
 *
 *   bench-pool [-t THREADS] [-m ROWS] [-n CALLS] [--mib WORKING_SET] [TYPE:KxN ...]
 *
 * Defaults: -t 2, -m 1, 2000 calls (200 for m > 2), 512 MiB of weights (copies of each case's
 * weight, prepared by the backend, called in rotation so each call reads its weight from memory
 * as a decode step does), cases q8_0 and tq2_0 on the Qwen3-0.6B shapes 1024x2048, 1024x1024,
 * 2048x1024, 1024x3072, 3072x1024. It uses only the device API that tests use (registry.h), so
 * the same file builds against an older tree (before core/internal/) for an A/B (add -ljansson
 * -lvulkan where that tree was built with the NPU manifest reader and Vulkan):
 *   cc -O2 -I OLD/include -I OLD/core bench/bench-pool.c OLD/build/libhxcore.a -lpthread -lm -ldl
 * On a shared machine the OS may also place both threads on one core for a whole run (the
 * caller then does the work alone, at one thread's speed); pinning each thread to its own core
 * (taskset -p -c N TID, once the pool's threads exist) measures the split itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hx-backend.h"
#include "hx.h"
#if __has_include("hx-internal.h")
#include "hx-internal.h" /* this tree: the core's one internal header (core/internal/) */
#define CPU_OPS_NAME "cpu"
#else
#include "registry.h" /* an older tree, built as above: its registry referred to backends weakly, */
extern const struct hx_backend_ops hx_backend_cpu_ops; /* so a strong reference links cpu.c in */
#define CPU_OPS_NAME hx_backend_cpu_ops.name
#endif

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 88172645463325252ull;
static float rndf(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static int run_case(enum hx_dtype t, int64_t k, int64_t n, int64_t m, int threads, int calls,
                    size_t ws_bytes)
{
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = threads};
    struct hx_device *dev = NULL;
    if (strcmp(CPU_OPS_NAME, "cpu") || hx__device_open("cpu", &cfg, &dev) != HX_OK) {
        fprintf(stderr, "bench-pool: cannot open the cpu device: %s\n", hx_last_error());
        return 1;
    }
    const size_t rb = hx_dtype_row_bytes(t, k), wb = rb * (size_t)n;
    int copies = (int)(ws_bytes / wb);
    if (copies < 1) copies = 1;
    uint8_t *w0 = malloc(wb);
    float *row = malloc(sizeof(float) * (size_t)k), *x = malloc(sizeof(float) * (size_t)(m * k));
    struct hx_weight *w = calloc((size_t)copies, sizeof *w);
    void **handles = calloc((size_t)copies, sizeof *handles);
    uint8_t **data = calloc((size_t)copies, sizeof *data);
    double *us = malloc(sizeof(double) * (size_t)calls);
    if (!w0 || !row || !x || !w || !handles || !data || !us) {
        fprintf(stderr, "bench-pool: out of memory\n");
        return 1;
    }
    for (int64_t j = 0; j < n; j++) {
        for (int64_t e = 0; e < k; e++) row[e] = rndf();
        hx_quantize_row(t, row, w0 + (size_t)j * rb, k);
    }
    for (int64_t i = 0; i < m * k; i++) x[i] = rndf();
    int st = HX_OK;
    for (int c = 0; c < copies && st == HX_OK; c++) {
        if (!(data[c] = malloc(wb))) {
            copies = c;
            break;
        }
        memcpy(data[c], w0, wb);
        w[c] = (struct hx_weight){.name = "w", .type = t, .n_rows = n, .n_cols = k,
                                  .data = data[c], .nbytes = wb, .scale = 1.0f};
        st = hx__dev_weight_prepare(dev, &w[c], &handles[c]);
    }
    struct hx_buffer *src = NULL, *dst = NULL;
    if (st == HX_OK) st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * k), &src);
    if (st == HX_OK) st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * n), &dst);
    if (st == HX_OK) st = hx__dev_buffer_write(src, 0, x, sizeof(float) * (size_t)(m * k));
    struct hx_op op = {0};
    op.desc = (struct hx_op_desc){.kind = HX_OP_MATMUL, .n_rows = m, .n_in = k, .n_out = n, .wtype = t};
    op.src[0] = (struct hx_tensor_ref){src, 0, m, k, sizeof(float) * (size_t)k};
    op.dst = (struct hx_tensor_ref){dst, 0, m, n, sizeof(float) * (size_t)n};
    int32_t meta[1] = {0};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = m,
                          .tokens = meta, .pos = meta, .seq = meta};
    for (int i = -copies; i < calls && st == HX_OK; i++) { /* one untimed rotation first */
        const int c = (i + copies) % copies;
        op.weight = &w[c];
        op.weight_handle = handles[c];
        const double t0 = now_us();
        st = hx__dev_run(dev, &sp);
        if (i >= 0) us[i] = now_us() - t0;
    }
    if (st == HX_OK) {
        qsort(us, (size_t)calls, sizeof *us, cmp_double);
        const double p10 = us[calls / 10], p50 = us[calls / 2];
        printf("| %s | %lldx%lld | %lld | %d | %.1f | %.1f | %.1f | %.1f | %d |\n", hx_dtype_name(t),
               (long long)k, (long long)n, (long long)m, threads, us[0], p10, p50,
               (double)wb / p10 / 1e3, copies);
        fflush(stdout);
    } else {
        fprintf(stderr, "bench-pool: %s %lldx%lld: %s\n", hx_dtype_name(t), (long long)k,
                (long long)n, hx_last_error());
    }
    for (int c = 0; c < copies; c++) {
        if (handles[c]) hx__dev_weight_release(dev, handles[c]);
        free(data[c]);
    }
    if (src) hx__dev_buffer_free(src);
    if (dst) hx__dev_buffer_free(dst);
    hx__device_close(dev);
    free(w0), free(row), free(x), free(w), free(handles), free(data), free(us);
    return st != HX_OK;
}

static int parse_type(const char *s, size_t len, enum hx_dtype *t)
{
    for (int i = 0; i < HX_DTYPE_COUNT; i++) {
        const char *name = hx_dtype_name((enum hx_dtype)i);
        if (strlen(name) == len && !strncasecmp(name, s, len)) {
            *t = (enum hx_dtype)i;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    int threads = 2, calls = 0;
    long long m = 1, mib = 512;
    const char *cases[64];
    int n_cases = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(a, "-m") && i + 1 < argc) m = atoll(argv[++i]);
        else if (!strcmp(a, "-n") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(a, "--mib") && i + 1 < argc) mib = atoll(argv[++i]);
        else if (a[0] != '-' && n_cases < 64) cases[n_cases++] = a;
        else {
            fprintf(stderr, "usage: bench-pool [-t THREADS] [-m ROWS] [-n CALLS] [--mib MIB] "
                            "[TYPE:KxN ...]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || m < 1 || m > 65536 || calls < 0 || mib < 1) {
        fprintf(stderr, "bench-pool: -t 1..256, -m 1..65536, -n >= 1, --mib >= 1\n");
        return 2;
    }
    if (!calls) calls = m > 2 ? 200 : 2000;
    static const char *const dflt[] = {"q8_0:1024x2048", "q8_0:1024x1024", "q8_0:2048x1024",
                                       "q8_0:1024x3072", "q8_0:3072x1024", "tq2_0:1024x2048",
                                       "tq2_0:1024x1024", "tq2_0:2048x1024", "tq2_0:1024x3072",
                                       "tq2_0:3072x1024"};
    if (!n_cases)
        for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++) cases[n_cases++] = dflt[i];
    printf("| type | KxN | m | threads | min µs | p10 µs | median µs | GB/s at p10 | copies |\n");
    printf("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    int bad = 0;
    for (int c = 0; c < n_cases; c++) {
        const char *colon = strchr(cases[c], ':');
        enum hx_dtype t;
        long long k = 0, n = 0;
        if (!colon || parse_type(cases[c], (size_t)(colon - cases[c]), &t) ||
            sscanf(colon + 1, "%lldx%lld", &k, &n) != 2 || k <= 0 || n <= 0 ||
            k % hx_dtype_block_elems(t)) {
            fprintf(stderr, "bench-pool: bad case %s (TYPE:KxN, K a multiple of the block)\n",
                    cases[c]);
            return 2;
        }
        bad |= run_case(t, k, n, m, threads, calls, (size_t)mib << 20);
    }
    return bad;
}
