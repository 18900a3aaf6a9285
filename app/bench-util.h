/*
 * bench-util.h — helpers shared by the benchmarks: a memory read-bandwidth probe and small
 * statistics over samples.
 */
#pragma once

#include <stddef.h>

/* Best-of-several read bandwidth in GB/s (1e9 bytes/s) of n_threads threads summing a
 * working_set_bytes buffer (make it exceed the last-level cache). 0 on allocation failure. */
double hx_app_read_bandwidth_gbs(int n_threads, size_t working_set_bytes);

double hx_app_mean(const double *v, size_t n);
double hx_app_stddev(const double *v, size_t n);   /* sample standard deviation */
double hx_app_median(const double *v, size_t n);   /* v is not modified */
double hx_app_now_us(void);                        /* monotonic clock */
