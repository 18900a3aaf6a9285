/*
 * bench-util.h — helpers shared by the benchmarks: a memory read-bandwidth probe, small
 * statistics over samples, and the --shapes list and random weights of the kernel and NPU
 * benchmarks.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"

/* What one run of the read-bandwidth probe measured. GB/s are 1e9 bytes per second. */
struct hx_app_bw {
    double median_gbs;          /* the figure to compare kernels against (roofline) */
    double best_gbs;            /* fastest pass */
    size_t working_set_bytes;   /* bytes read per pass */
    size_t llc_bytes;           /* last-level cache size found (0 = unknown) */
    int n_threads;              /* threads that actually read */
    int n_passes;               /* timed passes (after one untimed warm-up pass) */
    const char *kernel;         /* "avx512", "avx2" or "scalar"; static storage */
    const char *prefetch;       /* the read loop's software prefetch, picked as the fastest
                                   ("no software prefetch", "L1 prefetch 2 KiB ahead", ...) */
    int below_2x_llc;           /* 1 when the buffer is under 2× the LLC: a sequential read
                                   may then hit the cache */
    double other_cores;         /* cores other processes kept busy meanwhile (-1 unknown) */
};

/* Size of the largest data or unified CPU cache (sysfs, else sysconf); 0 if unknown. */
size_t hx_app_llc_bytes(void);

/* A working set past the caches: `times` × the last-level cache, at least 256 MiB and at most
 * 1 GiB (a VM may report its host's whole L3 of hundreds of MiB: 8× that cost 4 GB of memory,
 * while any sequential read of 2× the cache already misses it), and at most a quarter of
 * the memory available now. */
size_t hx_app_bytes_past_llc(unsigned times);
/* The probe's default working set: hx_app_bytes_past_llc(8). */
size_t hx_app_bw_default_bytes(void);

/*
 * Measure main-memory read bandwidth: n_threads pool threads each stream their own slice of
 * a working_set_bytes buffer (0 = hx_app_bw_default_bytes()) with wide loads into independent
 * accumulators (AVX-512 or AVX2 where the CPU has it, chosen at run time; the software
 * prefetch, none or into L1 or L2, the fastest of three passes each over the buffer), one untimed
 * warm-up pass, then n_passes timed passes (at least 7). Returns 0, or -1 when the buffer
 * cannot be allocated (*out zeroed). Blocks for about a second per GB of working set.
 */
int hx_app_bw_probe(int n_threads, size_t working_set_bytes, int n_passes, struct hx_app_bw *out);

/*
 * The same probe, with its buffer kept between measurements: open maps and first-touches it
 * (NULL when it cannot be allocated), measure runs one untimed and n_passes timed passes over
 * it (pass_gbs, when given, receives each pass's GB/s), close unmaps it. A benchmark on a
 * shared machine measures again next to each case, so a share compares figures taken in the
 * same seconds.
 */
struct hx_app_bw_buf;
struct hx_app_bw_buf *hx_app_bw_open(int n_threads, size_t working_set_bytes);
int hx_app_bw_measure(struct hx_app_bw_buf *b, int n_passes, struct hx_app_bw *out, double *pass_gbs);
void hx_app_bw_close(struct hx_app_bw_buf *b);
/* A plain read of `bytes` split over the probe's threads, as one pool task like a GEMV call,
 * each call on the next part of the buffer (so from memory, as a GEMV rotating through its
 * copies): the median over n_samples of the µs per call, each sample a full rotation. Short
 * reads do not reach the probe's long-stream rate (the start of each stream, the pool's start
 * and join); this is the floor a GEMV of that many bytes is held to. -1 when `bytes` is more
 * than the buffer holds. */
int hx_app_bw_burst(struct hx_app_bw_buf *b, size_t bytes, int n_samples, double *median_us);
/* One call of that read: `bytes` at part *cursor of the buffer (then the next part), its µs in
 * *us; for timing it call by call in turn with the calls it is compared with. -1 as above. */
int hx_app_bw_read_one(struct hx_app_bw_buf *b, size_t bytes, size_t *cursor, double *us);

/* Median read bandwidth in GB/s of n_threads threads over at least working_set_bytes (raised to
 * hx_app_bw_default_bytes() when smaller, so the buffer never fits in cache). 0 on allocation
 * failure. Kept for callers that need only the one figure. */
double hx_app_read_bandwidth_gbs(int n_threads, size_t working_set_bytes);

/*
 * How busy the machine is apart from this process: take a mark before and after a measurement;
 * hx_app_other_cores gives the average number of cores that other processes (and the
 * hypervisor, as steal time) kept busy in between, or -1 where /proc/stat is unavailable.
 * Granularity is the kernel tick (about 10 ms), so spans under 0.1 s also give -1.
 */
struct hx_app_load_mark {
    double t_us;
    double busy_us;   /* all CPUs: user, nice, system, irq, softirq, steal */
    double self_us;   /* this process: user + system */
};
void hx_app_load_mark(struct hx_app_load_mark *m);
double hx_app_other_cores(const struct hx_app_load_mark *a, const struct hx_app_load_mark *b);

double hx_app_mean(const double *v, size_t n);
double hx_app_stddev(const double *v, size_t n);   /* sample standard deviation */
double hx_app_median(const double *v, size_t n);   /* v is not modified */
double hx_app_min(const double *v, size_t n);
double hx_app_max(const double *v, size_t n);

/* Uniform in [-1, 1) from a xorshift64 state: the kernel benchmarks' weights and activations.
 * Each benchmark keeps its own state and seed, so its data are the same on every run. */
float hx_app_rand(uint64_t *state);
/* A weight of n rows of k elements of type t (malloc'd, *nbytes its size; NULL on failure):
 * min(n, 64) rows of hx_app_rand values quantized with hx_quantize_row, tiled over the n. */
void *hx_app_random_weight(enum hx_dtype t, int64_t k, int64_t n, uint64_t *rng, size_t *nbytes);

/* --shapes LIST: "KxN" items and "qwen3" (Qwen3-0.6B's weight GEMMs, app/shapes.c), K in
 * [1, k_max] and N in [1, n_max], into out[0 .. n) as {K, N}. A KxN past cap is bad input;
 * "qwen3" adds what fits. Returns n, or -1 on bad input. */
int hx_app_shape_list(const char *s, int64_t k_max, int64_t n_max, int64_t (*out)[2], int cap);

/* `engine bench -m MODEL ...` (app/bench/cmd-bench-model.c); app/bench/cmd-bench.c routes to it. */
int hx_cmd_bench_model(int argc, char **argv);
/* `engine bench --kernels --backend npu-sim|npu ...` (app/bench/cmd-bench-npu.c);
 * cmd-bench-kernels.c routes to it. */
int hx_cmd_bench_npu(int argc, char **argv);
