/*
 * test-backend-ops.c — every op of docs/ops.md on every registered backend device, compared
 * with `ref` (the oracle), through the registry and the hx__dev_* wrappers only.
 *
 * Matrix: EMBED, RMS_NORM (whole rows and per-head QK norm), MATMUL, ROPE (both conventions,
 * partial rotary, rope_freqs), causal GQA ATTN over a KV cache (prefill, decode, chunked,
 * several sequences, fused QKV), SWIGLU, RELU2_GLU, ADD (in place) × every weight type ×
 * m = 1, 7, 64, 512, K and N off the kernels' tiles, Qwen3-0.6B's GEMM shapes, contiguous,
 * strided (column slices of a fused output) and in-place layouts. `--full` adds the whole
 * cross product (Qwen3 shapes at m = 64 and 512, long contexts); it is slow on `ref`.
 *
 * Checks per (case, device): the status; NMSE against ref under a per-op threshold derived in
 * docs/testing.md (matmul: from the error of the coarsest activation rounding a backend may use
 * for the weight type, computed from the case's own activations); the worst element of each
 * row against 8·sqrt(threshold) of that row's RMS (a single wrong column among 151936 moves the
 * NMSE by 1e-5 only); NaN/Inf; every byte of every buffer outside the output (guards before and
 * after it, the gaps of strided rows, all inputs, stale KV rows) unchanged; the KV cache
 * bit-identical to ref's. Everything not written is poisoned with a NaN pattern, so reading a
 * word outside a tensor shows up as a NaN in the result. Cases supports() refuses are SKIPs.
 *
 * The `cpu` backend is also run with each other ISA path it has (HX_CPU_ISA) and, on AVX-512,
 * without its repacked weights (HX_CPU_REPACK=0), with the other decode stream count
 * (HX_CPU_STREAMS, 1 or 2), with another decode software prefetch (HX_CPU_PREFETCH=16 where
 * this CPU uses less for some types, else 0, and another walk of the Q1_0 lookup decode,
 * HX_CPU_Q1_LUT=4:4; matmuls only) and, where the CPU has VBMI,
 * with the bit-mask Q1_0 decode instead of the lookup one (HX_CPU_VBMI=0, Q1_0 matmuls only):
 * those are separate rows of the summary.
 *
 * Files, sharing backend-ops.h: this one (options, filters, main), backend-ops-data.c (random
 * data, weights, case buffers), backend-ops-devices.c (the devices under test and the cpu
 * variants), backend-ops-run.c (running a case on ref and on each device),
 * backend-ops-check.c (the comparator and its self-check), backend-ops-cases.c (the cases).
 *
 * Usage: test-backend-ops [--full] [--backend NAME[,..]] [--op NAME[,..]] [--type T[,..]]
 *                         [--m N[,..]] [--threads N] [--list] [-q] [-v]
 * The last line is "N passed, N failed, N skipped"; the exit status is 1 if anything failed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend-ops.h"

/* ---- options and filters ------------------------------------------------------------------ */

struct hx_t_opts hx_t_opt = {.threads = 2};

/* Is `name` in the comma-separated list (case-insensitive)? NULL list = everything. */
bool hx_t_in_list(const char *list, const char *name)
{
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* Filters that do not need the data: returns false (and prints in --list mode) to skip. */
bool hx_t_want(const char *family, enum hx_op_kind kind, int wtype, int64_t m, bool full_only,
               const char *label)
{
    if (full_only && !hx_t_opt.full && !hx_t_opt.list) return false;
    if (hx_t_opt.op && !hx_t_in_list(hx_t_opt.op, family) &&
        !hx_t_in_list(hx_t_opt.op, hx_op_kind_name(kind)))
        return false;
    if (hx_t_opt.type &&
        (wtype < 0 || !hx_t_in_list(hx_t_opt.type, hx_dtype_name((enum hx_dtype)wtype))))
        return false;
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)m);
    if (hx_t_opt.m && !hx_t_in_list(hx_t_opt.m, ms)) return false;
    if (hx_t_opt.list) {
        printf("%-9s %-46s%s\n", family, label, full_only ? " [--full]" : "");
        return false;
    }
    return true;
}

static int hx_t_usage(const char *argv0)
{
    printf("usage: %s [--full] [--backend NAME[,..]] [--op NAME[,..]] [--type T[,..]]\n"
           "          [--m N[,..]] [--threads N] [--list] [-q] [-v]\n"
           "ops: embed rms_norm qk_norm matmul rope attn swiglu relu2_glu add\n",
           argv0);
    return 2;
}

static int hx_t_parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--full"))
            hx_t_opt.full = true;
        else if (!strcmp(a, "--list"))
            hx_t_opt.list = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            hx_t_opt.quiet = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            hx_t_opt.verbose = true;
        else if (v && (!strcmp(a, "--backend") || !strcmp(a, "-b")))
            hx_t_opt.backend = v, i++;
        else if (v && !strcmp(a, "--op"))
            hx_t_opt.op = v, i++;
        else if (v && !strcmp(a, "--type"))
            hx_t_opt.type = v, i++;
        else if (v && !strcmp(a, "--m"))
            hx_t_opt.m = v, i++;
        else if (v && !strcmp(a, "--threads"))
            hx_t_opt.threads = (int)strtol(v, NULL, 10), i++;
        else
            return hx_t_usage(argv[0]);
    }
    if (hx_t_opt.threads < 1) hx_t_opt.threads = 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (hx_t_parse(argc, argv)) return 2;
    const double t0 = hx_t_now();
    if (hx_t_opt.list) {
        for (int t = 0; t < HX_DTYPE_COUNT; t++) hx_t_weight_ops((enum hx_dtype)t);
        hx_t_norm_ops(), hx_t_rope_ops(), hx_t_attn_ops(), hx_t_binary_ops(), hx_t_edge_ops();
        return 0;
    }
    if (hx_t_selfcheck()) {
        printf("0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    printf("self-check: the comparator catches a wrong column, guard and gap writes, NaN, KV\n");
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = hx_t_opt.threads};
    if (hx__device_open("ref", &cfg, &hx_t_ref.dev) != HX_OK) {
        printf("cannot open ref: %s\n0 passed, 1 failed, 0 skipped\n", hx_last_error());
        return 1;
    }
    snprintf(hx_t_ref.label, sizeof hx_t_ref.label, "ref");
    hx_t_open_devices(&cfg);
    for (int i = 0; i < hx_t_n_duts; i++)
        hx_t_have_npu |= hx_t_duts[i].dev->info.numerics == HX_NUMERICS_INT8_ROW;
    if (!hx_t_n_duts) { /* cpu always registers: only a --backend that matches nothing */
        printf("FAIL no device to test besides ref%s\n", hx_t_opt.backend ? " (--backend)" : "");
        hx_t_failed++;
    }
    for (int i = 0; i < hx_t_n_duts; i++) {
        char desc[HX_T_DESC_BYTES];
        hx_t_dut_env(&hx_t_duts[i]);
        hx_t_describe(hx_t_duts[i].dev, desc);
        desc[strcspn(desc, "\n")] = '\0';
        printf("device %-22s %s%s%s\n", hx_t_duts[i].label, hx_t_duts[i].dev->info.description,
               desc[0] ? "; " : "", desc);
    }
    for (int t = 0; hx_t_n_duts && t < HX_DTYPE_COUNT; t++) hx_t_weight_ops((enum hx_dtype)t);
    if (hx_t_n_duts) hx_t_norm_ops(), hx_t_rope_ops(), hx_t_attn_ops(), hx_t_binary_ops();
    if (hx_t_n_duts) hx_t_edge_ops();

    printf("\n%-38s %7s %7s %7s %9s\n", "device", "passed", "failed", "skipped", "run time");
    printf("%-38s %7s %7s %7s %8.1fs\n", "ref", "", "", "", hx_t_ref.seconds);
    for (int i = 0; i < hx_t_n_duts; i++) {
        struct hx_t_dut *d = &hx_t_duts[i];
        printf("%-38s %7d %7d %7d %8.1fs\n", d->label, d->passed, d->failed, d->skipped,
               d->seconds);
        hx_t_dut_release(d);
        hx__device_close(d->dev);
    }
    hx_t_dut_release(&hx_t_ref);
    hx__device_close(hx_t_ref.dev);
    unsetenv("HX_CPU_ISA"), unsetenv("HX_CPU_REPACK"), unsetenv("HX_CPU_VBMI"),
        unsetenv("HX_CPU_PREFETCH");
    printf("test-backend-ops: %d device(s)%s, %.1f s\n", hx_t_n_duts,
           hx_t_opt.full ? ", --full" : "", hx_t_now() - t0);
    if (hx_t_sanitized_left)
        printf(
            "sanitizer build: %d matmul(s) at m > 64 or over 2^27 MACs on simulated devices left to "
            "the Release run "
            "(--full runs them)\n",
            hx_t_sanitized_left);
    printf("%d passed, %d failed, %d skipped\n", hx_t_passed, hx_t_failed, hx_t_skipped);
    return hx_t_failed ? 1 : 0;
}
