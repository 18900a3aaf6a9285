/*
 * bench-util.c — read-bandwidth probe and sample statistics for the benchmarks. The probe
 * touches the buffer first (so page faults are not timed), then times several passes of
 * every thread summing its contiguous share with 8 independent accumulators and keeps the
 * fastest pass, as a roofline for memory-bound kernels.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

double hx_app_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static volatile uint64_t hx_app_sink;

double hx_app_read_bandwidth_gbs(int n_threads, size_t working_set_bytes)
{
    size_t n = working_set_bytes / sizeof(uint64_t);
    n -= n % 64;
    if (n == 0 || n_threads < 1) return 0.0;
    uint64_t *buf = aligned_alloc(64, n * sizeof(uint64_t));
    if (!buf) return 0.0;
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 1e300;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = hx_app_now_us();
        uint64_t total = 0;
#pragma omp parallel num_threads(n_threads) reduction(+ : total)
        {
            int tid = 0, nt = 1;
#ifdef _OPENMP
            tid = omp_get_thread_num();
            nt = omp_get_num_threads();
#endif
            size_t blocks = n / 64, b0 = blocks * tid / nt, b1 = blocks * (tid + 1) / nt;
            uint64_t a[8] = {0};
            for (size_t i = b0 * 64; i < b1 * 64; i += 8)
                for (int j = 0; j < 8; j++) a[j] += buf[i + j];
            for (int j = 0; j < 8; j++) total += a[j];
        }
        double dt = hx_app_now_us() - t0;
        hx_app_sink = total;
        if (dt < best) best = dt;
    }
    free(buf);
    return (double)(n * sizeof(uint64_t)) / (best * 1e-6) / 1e9;
}

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
