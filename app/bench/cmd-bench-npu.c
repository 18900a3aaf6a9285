/*
 * cmd-bench-npu.c — `engine bench --kernels --backend npu-sim|npu` (routed here by
 * cmd-bench-kernels.c): host overhead per GEMM call — quantize, copy, sync, launch, read back,
 * dequantize — for the Qwen3-0.6B shapes at M = 1 and M = 128, from the backend's "hx.timing"
 * and "hx.npu.stages" counters, reported apart from device time. On npu-sim the device time is
 * the latency model's, labelled "modelled"; the wall time includes the simulator's CPU
 * emulation of the kernel and is not NPU performance. (The NPU part of `engine devices` is in
 * app/cmd-devices.c.) It reaches the NPU backend only through its devices' extensions
 * (hx__dev_extension): those counters, "hx.npu.cover:K:N", and "hx.npu.sim" for the
 * simulator's knobs and its synthetic kernels (--write-kernels).
 *
 * Benchmarks never assert; the ≤ 50 µs target for the M = 1 1024→4096 and 1024→6144 shapes
 * is printed as met or not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench-util.h"
#include "hx-internal.h"

#define HX_BN_MAX 32
#define HX_BN_STAGES 6

struct hx_bn_opts {
    const char *backend, *kernels, *fmt, *latency, *compute, *exec, *write_dir;
    enum hx_dtype type;
    int64_t shapes[HX_BN_MAX][2];
    int n_shapes;
    int64_t ms[HX_BN_MAX];
    int n_ms;
    int reps;
};

static void hx_bn_usage(void)
{
    fprintf(stderr,
            "usage: engine bench --kernels --backend npu-sim|npu [--npu-kernels DIR]\n"
            "       [--shapes qwen3|KxN,...] [-m 1,128] [-r REPS] [--types TYPE]\n"
            "       [--latency model|sleep|off] [--compute on|off] [--exec lazy|thread] [-o md|json]\n"
            "       [--write-kernels DIR]   (write the simulator's synthetic kernels and exit)\n"
            "host overhead per GEMM call, split into stages, apart from (modelled) device time\n");
}

static int hx_bn_parse(int argc, char **argv, struct hx_bn_opts *o)
{
    *o = (struct hx_bn_opts){.backend = "npu-sim", .fmt = "md", .latency = "model", .compute = "on", .exec = "lazy",
                             .type = HX_DTYPE_Q8_0, .reps = 20, .ms = {1, 128}, .n_ms = 2};
    o->n_shapes = hx_app_shape_list("qwen3", 1, 1, o->shapes, HX_BN_MAX);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "--kernels")) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "--npu-kernels")) o->kernels = v;
        else if (!strcmp(a, "-o")) o->fmt = v;
        else if (!strcmp(a, "--latency")) o->latency = v;
        else if (!strcmp(a, "--compute")) o->compute = v;
        else if (!strcmp(a, "--exec")) o->exec = v;
        else if (!strcmp(a, "--write-kernels")) o->write_dir = v;
        else if (!strcmp(a, "--shapes")) {
            o->n_shapes = hx_app_shape_list(v, 1 << 17, 1 << 20, o->shapes, HX_BN_MAX);
            if (o->n_shapes < 0) return -1;
        }
        else if (!strcmp(a, "-m")) {
            if ((o->n_ms = hx_app_list_i64(v, 1, 65536, o->ms, HX_BN_MAX)) < 0) return -1;
        }
        else if (!strcmp(a, "-r")) { if (!hx_app_parse_i64(v, 3, 100000, &x)) return -1; o->reps = (int)x; }
        else if (!strcmp(a, "--types")) { if (hx_dtype_from_name(v, &o->type) != HX_OK) return -1; }
        else if (!strcmp(a, "-t")) continue;   /* accepted for symmetry: the host path is one thread */
        else return -1;
    }
    if (strcmp(o->fmt, "md") && strcmp(o->fmt, "json")) return -1;
    return 0;
}

/* The data of every case, from one seed: the same on every run. */
static uint64_t hx_bn_rng = 0x243F6A8885A308D3ull;

struct hx_bn_result {
    double host_mean, host_sd, host_median, stage[HX_BN_STAGES], dev_us, wall_us;
    double calls;
    bool modelled;
    char kernel[64];
};

static int hx_bn_case(struct hx_device *dev, const struct hx_bn_opts *o, int64_t k, int64_t n,
                      int64_t m, struct hx_bn_result *res)
{
    /* prefill shapes emulate ~128x more products on the simulator: fewer repetitions */
    const int reps = m == 1 ? o->reps : (o->reps / 4 > 3 ? o->reps / 4 : 3);
    struct hx_timing_stats *ts = hx__dev_extension(dev, "hx.timing");
    const double *stages = hx__dev_extension(dev, "hx.npu.stages");
    if (!ts || !stages) return HX_E_UNSUPPORTED;
    size_t wbytes = 0;
    void *wdata = hx_app_random_weight(o->type, k, n, &hx_bn_rng, &wbytes);
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    double *host = malloc(sizeof(double) * (size_t)reps * (1 + HX_BN_STAGES));
    struct hx_buffer *src = NULL, *dst = NULL;
    struct hx_weight w = {.name = "bench", .type = o->type, .n_rows = n, .n_cols = k, .data = wdata,
                          .nbytes = wbytes, .scale = 1.0f, .tensor_scale = 1.0f};
    struct hx_op op = {.desc = {.kind = HX_OP_MATMUL, .cls = HX_CLASS_GATE_UP, .n_rows = m, .n_in = k,
                                .n_out = n, .wtype = o->type},
                       .weight = &w};
    int st = wdata && x && host ? HX_OK : HX_E_NOMEM;
    for (int64_t i = 0; st == HX_OK && i < m * k; i++) x[i] = hx_app_rand(&hx_bn_rng);
    if (st == HX_OK && !hx__dev_supports(dev, &op.desc)) st = HX_E_UNSUPPORTED;
    if (st == HX_OK) st = hx__dev_weight_prepare(dev, &w, &op.weight_handle);
    if (st == HX_OK) st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * k), &src);
    if (st == HX_OK) st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * n), &dst);
    if (st == HX_OK) st = hx__dev_buffer_write(src, 0, x, sizeof(float) * (size_t)(m * k));
    op.src[0] = (struct hx_tensor_ref){src, 0, m, k, sizeof(float) * (size_t)k};
    op.dst = (struct hx_tensor_ref){dst, 0, m, n, sizeof(float) * (size_t)n};
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = m};
    for (int wu = 0; st == HX_OK && wu < 2; wu++)
        if ((st = hx__dev_run(dev, &sp)) == HX_OK) st = hx__dev_synchronize(dev);
    struct hx_timing_stats t0 = *ts;
    double wall = 0;
    /* host[0..reps) per-GEMM host time; host[reps * (1 + s) + r] stage s of repetition r */
    for (int r = 0; st == HX_OK && r < reps; r++) {
        double h = ts->host_us, a = hx__time_us(), sb[HX_BN_STAGES];
        memcpy(sb, stages, sizeof sb);
        if ((st = hx__dev_run(dev, &sp)) == HX_OK) st = hx__dev_synchronize(dev);
        wall += hx__time_us() - a;
        host[r] = ts->host_us - h;
        for (int s = 0; s < HX_BN_STAGES; s++) host[reps * (1 + s) + r] = stages[s] - sb[s];
    }
    if (st == HX_OK) {
        res->host_mean = hx_app_mean(host, (size_t)reps);
        res->host_sd = hx_app_stddev(host, (size_t)reps);
        res->host_median = hx_app_median(host, (size_t)reps);
        for (int s = 0; s < HX_BN_STAGES; s++)
            res->stage[s] = hx_app_median(host + reps * (1 + s), (size_t)reps);
        res->dev_us = (ts->device_us - t0.device_us) / reps;
        res->calls = (double)(ts->n_calls - t0.n_calls) / reps;
        res->modelled = ts->device_modelled;
        res->wall_us = wall / reps;
        char q[64];
        snprintf(q, sizeof q, "hx.npu.cover:%lld:%lld", (long long)k, (long long)n);
        const char *cv = hx__dev_extension(dev, q);
        snprintf(res->kernel, sizeof res->kernel, "%.*s", cv ? (int)strcspn(cv, ":") : 1, cv ? cv : "?");
    }
    if (op.weight_handle) hx__dev_weight_release(dev, op.weight_handle);
    hx__dev_buffer_free(src);
    hx__dev_buffer_free(dst);
    free(wdata), free(x), free(host);
    return st;
}

/* --write-kernels DIR: the simulator writes its synthetic kernels (through an npu-sim device,
 * the only way the engine program reaches the NPU backend: its extension "hx.npu.sim"). */
static int hx_bn_write_kernels(const char *dir)
{
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 1};
    struct hx_device *dev = NULL;
    if (hx__device_open("npu-sim", &cfg, &dev) != HX_OK) {
        hx_app_error("bench", "%s", hx_last_error());
        return 1;
    }
    const struct hx_npu_sim_ext *ext = hx__dev_extension(dev, "hx.npu.sim");
    char err[512] = "npu-sim has no simulator controls";
    int st = ext ? ext->write_kernels(dir, err, sizeof err) : HX_E_UNSUPPORTED;
    hx__device_close(dev);
    if (st != HX_OK) {
        hx_app_error("bench", "%s", err);
        return 1;
    }
    printf("wrote the simulator's synthetic kernels to %s\n", dir);
    return 0;
}

static void hx_bn_print(const struct hx_bn_opts *o, bool first, int64_t k, int64_t n, int64_t m,
                        const struct hx_bn_result *r)
{
    if (!strcmp(o->fmt, "json")) {
        printf("%s{\"k\":%lld,\"n\":%lld,\"m\":%lld,\"kernel\":\"%s\",\"calls\":%.0f,\"host_us\":%.2f,"
               "\"host_sd_us\":%.2f,\"host_median_us\":%.2f,\"quantize_us\":%.2f,\"copy_us\":%.2f,\"sync_a_us\":%.2f,"
               "\"launch_us\":%.2f,\"sync_c_us\":%.2f,\"dequant_us\":%.2f,\"device_us\":%.2f,"
               "\"device_modelled\":%s,\"wall_us\":%.2f}",
               first ? "" : ",", (long long)k, (long long)n, (long long)m, r->kernel, r->calls,
               r->host_mean, r->host_sd, r->host_median, r->stage[0], r->stage[1], r->stage[2],
               r->stage[3], r->stage[4], r->stage[5], r->dev_us, r->modelled ? "true" : "false",
               r->wall_us);
        return;
    }
    printf("| %lld→%lld | %lld | %s × %.0f | %.1f | %.1f ± %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | "
           "%.1f%s | %.0f |\n", (long long)k, (long long)n, (long long)m, r->kernel, r->calls,
           r->host_median, r->host_mean, r->host_sd, r->stage[0], r->stage[1], r->stage[2], r->stage[3], r->stage[4],
           r->stage[5], r->dev_us, r->modelled ? " (modelled)" : "", r->wall_us);
}

int hx_cmd_bench_npu(int argc, char **argv)
{
    struct hx_bn_opts o;
    int pr = hx_bn_parse(argc, argv, &o);
    if (pr) {
        hx_bn_usage();
        return pr > 0 ? 0 : 2;
    }
    if (o.write_dir) return hx_bn_write_kernels(o.write_dir);
    bool sim = !strcmp(o.backend, "npu-sim");
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 1, .kernels_dir = o.kernels};
    struct hx_device *dev = NULL;
    if (hx__device_open(o.backend, &cfg, &dev) != HX_OK) {
        hx_app_error("bench", "%s", hx_last_error());
        return 1;
    }
    if (sim) {
        const struct hx_npu_sim_ext *ext = hx__dev_extension(dev, "hx.npu.sim");
        char spec[96];
        snprintf(spec, sizeof spec, "latency=%s;compute=%s;exec=%s", o.latency, o.compute, o.exec);
        int st = ext ? ext->configure(spec) : HX_E_UNSUPPORTED;
        if (st != HX_OK) {
            hx_app_error("bench", "%s",
                         ext ? hx_last_error() : "npu-sim has no simulator controls");
            hx__device_close(dev);
            return ext ? 2 : 1;
        }
    }
    bool md = !strcmp(o.fmt, "md");
    char desc[256];
    hx__dev_describe(dev, desc, sizeof desc);
    desc[strcspn(desc, "\n")] = '\0';
    if (md) {
        printf("# NPU host overhead: %s (%s), %s weights\n\n%s\n\n", dev->id, dev->info.name,
               hx_dtype_name(o.type), desc);
        printf("host = time on the calling thread per GEMM (one thread), excluding time blocked "
               "waiting for the device; stages: median µs per GEMM.\n");
        if (sim)
            printf("device = latency model (~55 µs + bytes / 40 GB/s + ops / 25 TOPS per call), "
                   "labelled modelled, NOT NPU performance; wall = simulator wall time, which "
                   "includes the CPU emulation of the kernel%s%s.\n",
                   strcmp(o.compute, "off") ? "" : " (compute=off: products skipped)",
                   strcmp(o.exec, "lazy") ? " on the simulator's device thread"
                                          : " (exec=lazy: run inside wait, so it never competes with the host work)");
        printf("\n| K→N | m | kernel × calls | host µs median | host µs mean ± sd | quantize | copy | "
               "sync A | launch | sync C | dequant | device µs | wall µs |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    } else {
        printf("{\"backend\":\"%s\",\"type\":\"%s\",\"simulated\":%s,\"results\":[", dev->id,
               hx_dtype_name(o.type), dev->info.simulated ? "true" : "false");
    }
    fflush(stdout);
    int rc = 0;
    bool first = true;
    double target[2] = {-1, -1};
    for (int si = 0; si < o.n_shapes; si++)
        for (int mi = 0; mi < o.n_ms; mi++) {
            int64_t k = o.shapes[si][0], n = o.shapes[si][1], m = o.ms[mi];
            if (k % hx_dtype_block_elems(o.type)) continue;
            struct hx_bn_result r = {0};
            int st = hx_bn_case(dev, &o, k, n, m, &r);
            if (st) {
                hx_app_error("bench", "%lldx%lld m=%lld: %s", (long long)k, (long long)n,
                             (long long)m, st == HX_E_UNSUPPORTED ? "not covered by the kernels" : hx_last_error());
                rc = st == HX_E_UNSUPPORTED ? rc : 1;
                continue;
            }
            hx_bn_print(&o, first, k, n, m, &r);
            first = false;
            if (m == 1 && k == 1024 && (n == 4096 || n == 6144)) target[n == 6144] = r.host_median;
            fflush(stdout);
        }
    if (md) {
        for (int i = 0; i < 2; i++)
            if (target[i] >= 0)
                printf("\ntarget: host overhead per M=1 GEMM 1024→%d ≤ 50 µs on one thread: median %.1f µs — %s",
                       i ? 6144 : 4096, target[i], target[i] <= 50 ? "met" : "NOT met");
        printf("\n");
    } else {
        printf("]}\n");
    }
    hx__device_close(dev);
    return rc;
}
