/*
 * cmd-bench-kernels.c — `engine bench --kernels`: time one MATMUL op per call through a
 * backend's vtable (weight_prepare once, then run a one-op split + synchronize) for every
 * weight type × shape × batch m. Weights are random floats quantized with hx_quantize_row (a
 * pool of distinct rows tiled over the matrix) and copied into enough distinct matrices that
 * the working set exceeds the last-level cache; calls rotate through them, as a model's layers
 * would. Reports mean ± stddev µs per call, weight GB/s, GFLOP/s (2·m·n·k), and for m = 1 the
 * share of the measured read bandwidth printed at the top. For a device with memory of its own
 * (a discrete GPU), also its device-to-device copy bandwidth, the roofline of its GEMVs
 * (tests/gpu/run.sh reports each GEMV's device-time bandwidth as a share of it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench-util.h"
#include "hx-backend.h"
#include "hx-internal.h"

#define HX_BK_MAX 32
/* Working set per case, spread over copies of the weight: twice the last-level cache, and at
 * least 256 MiB. On the Zen 4 VM reads fell to DRAM speed by 128 MiB whatever CPUID said of
 * the L3; on a Xeon VM reporting a 480 MiB L3, a 256 MiB set still read at 35-36 GB/s against
 * 31-33 GB/s for 1 GiB and more, so a fixed 256 MiB measured the cache there. */
#define HX_BK_LLC_TIMES 2
#define HX_BK_MAX_COPIES 8192
#define HX_BK_MAX_CMP 6

struct hx_bk_opts {
    const char *backend, *fmt;
    enum hx_dtype types[HX_DTYPE_COUNT];
    int n_types;
    int64_t shapes[HX_BK_MAX][2];  /* K, N */
    int n_shapes;
    int64_t ms[HX_BK_MAX];
    int n_ms;
    int threads, reps;
    const char *bad_opt, *bad_val; /* the option (and value) a parse error is about */
    double bw_gbs;  /* --bw-gbs: skip the probe */
    size_t set_bytes; /* --working-set MIB: weight copies per case (default 2x the LLC) */
    int64_t d2d_mib;  /* --d2d-mib: device copy size; -1 = default, 0 = not measured */
    /* --compare VAR=V1,V2,..: the weights prepared and each call run under each value of an
     * HX_* environment variable, call by call in turn (HX_BK_MAX_CMP values at most) */
    char cmp_var[64], cmp_vals[HX_BK_MAX_CMP][32];
    int n_cmp;
};

static void hx_bk_usage(void)
{
    fprintf(stderr,
            "usage: engine bench --kernels [--backend B] [--types LIST] [--shapes qwen3|KxN,...]\n"
            "                    [-m 1,512] [-t THREADS] [-r REPS] [-o md|json|csv] [--bw-gbs X]\n"
            "                    [--working-set MIB]  (default: 2x the last-level cache, at least 256;\n"
            "                    1 = in cache)\n"
            "  --types: weight type names (default all); -m: rows per call, 1..65536 (default 1,512);\n"
            "  -t: 1..1024 threads (default 2); -r: 5..100000 timed samples per case (default 5);\n"
            "  --bw-gbs: skip the bandwidth probe and use X GB/s; --working-set: 1..65536 MiB\n"
            "  --d2d-mib N: device-to-device copy bandwidth measured with N MiB buffers, 0 = not\n"
            "      (default: 1024 on a device with its own memory, 16 on an emulated one)\n"
            "  --compare HX_VAR=V1,V2,..: run each case under each value of an HX_* environment\n"
            "      variable (e.g. HX_CPU_PREFETCH=0,8,16), call by call in turn, with a plain read\n"
            "      of the same bytes between them; prints each value's µs and its ratio to the read\n");
}

/* VAR=V1,V2,..: an HX_* variable and 2..HX_BK_MAX_CMP values of up to 31 characters. */
static bool hx_bk_parse_compare(const char *s, struct hx_bk_opts *o)
{
    const char *eq = strchr(s, '=');
    if (!eq || strncmp(s, "HX_", 3) || (size_t)(eq - s) >= sizeof o->cmp_var) return false;
    for (const char *c = s; c < eq; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
    memcpy(o->cmp_var, s, (size_t)(eq - s));
    o->cmp_var[eq - s] = '\0';
    o->n_cmp = hx_app_list_str(eq + 1, o->cmp_vals[0], sizeof o->cmp_vals[0], HX_BK_MAX_CMP);
    return o->n_cmp >= 2;
}

static bool hx_bk_type(void *user, const char *item, int i)
{
    enum hx_dtype *types = user;
    return hx_dtype_from_name(item, &types[i]) == HX_OK;
}

static int hx_bk_parse(int argc, char **argv, struct hx_bk_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->fmt = "md";
    o->threads = 2;
    o->reps = 5;
    o->set_bytes = hx_app_bytes_past_llc(HX_BK_LLC_TIMES);
    o->d2d_mib = -1;
    for (int t = 0; t < HX_DTYPE_COUNT; t++) o->types[o->n_types++] = (enum hx_dtype)t;
    o->n_shapes = hx_app_shape_list("qwen3", 1, 1, o->shapes, HX_BK_MAX);
    o->ms[0] = 1, o->ms[1] = 512, o->n_ms = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "--kernels")) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        o->bad_opt = a, o->bad_val = v;
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "-o")) o->fmt = v;
        else if (!strcmp(a, "--shapes")) {
            o->n_shapes = hx_app_shape_list(v, 1 << 20, 1 << 22, o->shapes, HX_BK_MAX);
            if (o->n_shapes < 0) return -1;
        }
        else if (!strcmp(a, "-m")) {
            if ((o->n_ms = hx_app_list_i64(v, 1, 65536, o->ms, HX_BK_MAX)) < 0) return -1;
        }
        else if (!strcmp(a, "--bw-gbs")) {
            char *end = NULL;
            o->bw_gbs = strtod(v, &end);
            if (!end || *end || !(o->bw_gbs > 0 && o->bw_gbs < 1e5)) return -1;
        }
        else if (!strcmp(a, "--d2d-mib")) { if (!hx_app_parse_i64(v, 0, 16384, &o->d2d_mib)) return -1; }
        else if (!strcmp(a, "--working-set")) { if (!hx_app_parse_i64(v, 1, 65536, &x)) return -1; o->set_bytes = (size_t)x << 20; }
        else if (!strcmp(a, "-t")) { if (!hx_app_parse_i64(v, 1, HX_MAX_THREADS, &x)) return -1; o->threads = (int)x; }
        else if (!strcmp(a, "-r")) { if (!hx_app_parse_i64(v, 5, 100000, &x)) return -1; o->reps = (int)x; }
        else if (!strcmp(a, "--compare")) { if (!hx_bk_parse_compare(v, o)) return -1; }
        else if (!strcmp(a, "--types")) {
            if ((o->n_types = hx_app_list(v, HX_DTYPE_COUNT, hx_bk_type, o->types)) < 0) return -1;
        } else {
            o->bad_val = NULL; /* not an option of this command */
            return -1;
        }
    }
    o->bad_opt = "-o", o->bad_val = o->fmt;
    if (strcmp(o->fmt, "md") && strcmp(o->fmt, "json") && strcmp(o->fmt, "csv")) return -1;
    o->bad_opt = o->bad_val = NULL;
    return 0;
}

/* The data of every case, from one seed: the same on every run. */
static uint64_t hx_bk_rng = 0x9E3779B97F4A7C15ull;

struct hx_bk_result {
    double med_us, mean_us, sd_us, gbs, gflops, host_us, dev_us;
    double bw_gbs, bw_pct;   /* the read bandwidth the share is of, and the share */
    double read_us, read_pct; /* a plain read of the weight's bytes (hx_app_bw_burst), the
                                 GEMV's speed as a share of it; 0 when not measured */
    size_t wbytes;
    bool have_timing, modelled;
};

/* A case's weights: `copies` distinct matrices of the same random weight, and the one-op split
 * that runs a matmul on them (its activations random, its output a device buffer). */
struct hx_bk_work {
    size_t wbytes;
    int copies;
    struct hx_weight *w;
    void **data;
    struct hx_buffer *src, *dst;
    int32_t *meta;
    struct hx_op op;
    struct hx_split sp;
};

static void hx_bk_work_free(struct hx_bk_work *b)
{
    for (int i = 0; b->data && i < b->copies; i++) free(b->data[i]);
    free(b->w), free(b->data), free(b->meta);
    hx__dev_buffer_free(b->src);
    hx__dev_buffer_free(b->dst);
    memset(b, 0, sizeof *b);
}

static int hx_bk_work_make(struct hx_device *dev, const struct hx_bk_opts *o, enum hx_dtype t,
                           int64_t k, int64_t n, int64_t m, struct hx_bk_work *b)
{
    memset(b, 0, sizeof *b);
    void *wdata = hx_app_random_weight(t, k, n, &hx_bk_rng, &b->wbytes);
    if (!wdata) return HX_E_NOMEM;
    int copies = (int)((o->set_bytes + b->wbytes - 1) / b->wbytes);
    copies = copies < 1 ? 1 : copies > HX_BK_MAX_COPIES ? HX_BK_MAX_COPIES : copies;
    b->w = calloc((size_t)copies, sizeof *b->w);
    b->data = calloc((size_t)copies, sizeof *b->data);
    b->meta = calloc((size_t)m * 3, sizeof(int32_t));
    float *x = malloc(sizeof(float) * (size_t)(m * k));
    int st = HX_OK;
    if (!b->w || !b->data || !b->meta || !x) {
        free(wdata);
        st = HX_E_NOMEM;
        goto done;
    }
    for (; b->copies < copies; b->copies++) {
        void *d = b->copies ? malloc(b->wbytes) : wdata;
        if (!d) { st = HX_E_NOMEM; goto done; }
        if (b->copies) memcpy(d, wdata, b->wbytes);
        b->data[b->copies] = d;
        b->w[b->copies] = (struct hx_weight){.name = "bench", .type = t, .n_rows = n, .n_cols = k,
                                             .data = d, .nbytes = b->wbytes, .scale = 1.0f,
                                             .tensor_scale = 1.0f};
    }
    for (int64_t i = 0; i < m * k; i++) x[i] = hx_app_rand(&hx_bk_rng);
    if ((st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * k), &b->src)) ||
        (st = hx__dev_buffer_alloc(dev, sizeof(float) * (size_t)(m * n), &b->dst)) ||
        (st = hx__dev_buffer_write(b->src, 0, x, sizeof(float) * (size_t)(m * k))))
        goto done;
    b->op.desc = (struct hx_op_desc){.kind = HX_OP_MATMUL, .cls = HX_CLASS_GATE_UP, .layer = 0,
                                     .n_rows = m, .n_in = k, .n_out = n, .wtype = t};
    b->op.src[0] = (struct hx_tensor_ref){b->src, 0, m, k, sizeof(float) * (size_t)k};
    b->op.dst = (struct hx_tensor_ref){b->dst, 0, m, n, sizeof(float) * (size_t)n};
    if (!hx__dev_supports(dev, &b->op.desc)) st = HX_E_UNSUPPORTED;
    b->sp = (struct hx_split){.struct_size = sizeof b->sp, .ops = &b->op, .n_ops = 1, .n_rows = m,
                              .tokens = b->meta, .pos = b->meta + m, .seq = b->meta + 2 * m};
done:
    free(x);
    if (st) hx_bk_work_free(b);
    return st;
}

/* Prepare every copy of the work's weight on dev into handles[0 .. copies). */
static int hx_bk_prepare(struct hx_device *dev, const struct hx_bk_work *b, void **handles)
{
    for (int i = 0; i < b->copies; i++) {
        int st = hx__dev_weight_prepare(dev, &b->w[i], &handles[i]);
        if (st) return st;
    }
    return HX_OK;
}

static void hx_bk_release(struct hx_device *dev, const struct hx_bk_work *b, void **handles)
{
    for (int i = 0; handles && i < b->copies; i++)
        if (handles[i]) hx__dev_weight_release(dev, handles[i]), handles[i] = NULL;
}

/* One call on copy c with its prepared handle. */
static int hx_bk_call(struct hx_device *dev, struct hx_bk_work *b, int c, void *handle)
{
    b->op.weight = &b->w[c], b->op.weight_handle = handle;
    int st = hx__dev_run(dev, &b->sp);
    return st ? st : hx__dev_synchronize(dev);
}

static int hx_bk_case(struct hx_device *dev, const struct hx_bk_opts *o, enum hx_dtype t,
                      int64_t k, int64_t n, int64_t m, struct hx_bk_result *res)
{
    struct hx_bk_work b;
    int st = hx_bk_work_make(dev, o, t, k, n, m, &b);
    if (st) return st;
    void **handles = calloc((size_t)b.copies, sizeof *handles);
    double *samples = malloc(sizeof(double) * (size_t)o->reps);
    if (!handles || !samples) { st = HX_E_NOMEM; goto done; }
    if ((st = hx_bk_prepare(dev, &b, handles))) goto done;
    struct hx_timing_stats *ts = hx__dev_extension(dev, "hx.timing");
    /* calls per sample: a full rotation through the copies for small calls */
    int per = (m == 1) ? b.copies : 1;
    int cur = 0;
    for (int wu = 0; wu < per + 1; wu++, cur = (cur + 1) % b.copies)
        if ((st = hx_bk_call(dev, &b, cur, handles[cur]))) goto done;
    struct hx_timing_stats t0 = ts ? *ts : (struct hx_timing_stats){0};
    for (int r = 0; r < o->reps; r++) {
        double a = hx_app_now_us();
        for (int c = 0; c < per; c++, cur = (cur + 1) % b.copies)
            if ((st = hx_bk_call(dev, &b, cur, handles[cur]))) goto done;
        samples[r] = (hx_app_now_us() - a) / per;
    }
    res->mean_us = hx_app_mean(samples, (size_t)o->reps);
    res->med_us = hx_app_median(samples, (size_t)o->reps);
    res->sd_us = hx_app_stddev(samples, (size_t)o->reps);
    /* rates from the median: robust to the other tenants of a shared machine */
    res->wbytes = b.wbytes;
    res->gbs = (double)b.wbytes / (res->med_us * 1e-6) / 1e9;
    res->gflops = 2.0 * (double)m * (double)n * (double)k / (res->med_us * 1e-6) / 1e9;
    if ((res->have_timing = ts != NULL)) {
        double calls = (double)o->reps * per;
        res->host_us = (ts->host_us - t0.host_us) / calls;
        res->dev_us = (ts->device_us - t0.device_us) / calls;
        res->modelled = ts->device_modelled;
    }
done:
    hx_bk_release(dev, &b, handles);
    free(handles), free(samples);
    hx_bk_work_free(&b);
    return st;
}

/* --compare: a case under each value of o->cmp_var. Each value's weights are prepared with the
 * variable set to it (a backend may read it then) and each of its calls runs with it set (or
 * then). Per sample, one rotation through the copies, and per copy one call of each value and
 * one plain read of as many bytes (m = 1, with pb), in turn, the value that runs first after
 * the read moving on by one each copy and sample: every value meets the same minutes of a
 * shared machine. us[v] receives each value's median µs per call; ratio[v] the median over
 * samples of its time over the plain read's in the same sample (0 without a read). */
static int hx_bk_compare(struct hx_device *dev, const struct hx_bk_opts *o, enum hx_dtype t,
                         int64_t k, int64_t n, int64_t m, struct hx_app_bw_buf *pb,
                         double *us, double *ratio, double *read_us, size_t *wbytes)
{
    const char *old = getenv(o->cmp_var);
    char saved[256] = "";
    const bool had = old != NULL;
    if (had) snprintf(saved, sizeof saved, "%s", old);
    struct hx_bk_work b;
    int st = hx_bk_work_make(dev, o, t, k, n, m, &b);
    if (st) return st;
    *wbytes = b.wbytes;
    const int nv = o->n_cmp, R = o->reps;
    void **h = calloc((size_t)(nv * b.copies), sizeof *h);
    double *smp = calloc((size_t)((nv + 1) * R), sizeof *smp), *rt = calloc((size_t)R, sizeof *rt);
    if (!h || !smp || !rt) { st = HX_E_NOMEM; goto done; }
    for (int v = 0; v < nv; v++) {
        setenv(o->cmp_var, o->cmp_vals[v], 1);
        if ((st = hx_bk_prepare(dev, &b, h + v * b.copies))) goto done;
    }
    const bool rd = pb && m == 1;
    size_t cursor = 0;
    int cur = 0;
    for (int r = -1; r < R; r++) { /* one untimed rotation */
        double sum[HX_BK_MAX_CMP + 1] = {0};
        const int per = m == 1 ? b.copies : 1; /* calls per sample, as hx_bk_case */
        for (int i = 0; i < per; i++, cur = (cur + 1) % b.copies) {
            double one;
            if (rd && hx_app_bw_read_one(pb, b.wbytes, &cursor, &one) == 0) sum[nv] += one;
            /* the values in turn: the call right after the plain read ran 1-3% slower (the
             * same code listed twice, Xeon VM), which a fixed order put on the first value
             * every time; so each copy and sample starts one further */
            for (int vi = 0; vi < nv; vi++) {
                const int v = (int)((vi + r + 1 + i) % nv);
                setenv(o->cmp_var, o->cmp_vals[v], 1);
                const double a = hx_app_now_us(); /* its own prepared copies: from memory */
                if ((st = hx_bk_call(dev, &b, cur, h[v * b.copies + cur]))) goto done;
                sum[v] += hx_app_now_us() - a;
            }
        }
        for (int v = 0; r >= 0 && v <= nv; v++) smp[v * R + r] = sum[v] / per;
    }
    *read_us = rd ? hx_app_median(smp + nv * R, (size_t)R) : 0.0;
    for (int v = 0; v < nv; v++) {
        for (int r = 0; r < R; r++) rt[r] = rd && smp[nv * R + r] > 0 ? smp[v * R + r] / smp[nv * R + r] : 0.0;
        us[v] = hx_app_median(smp + v * R, (size_t)R);
        ratio[v] = hx_app_median(rt, (size_t)R);
    }
done:
    for (int v = 0; h && v < nv; v++) {
        setenv(o->cmp_var, o->cmp_vals[v], 1);
        hx_bk_release(dev, &b, h + v * b.copies);
    }
    if (had) setenv(o->cmp_var, saved, 1);
    else unsetenv(o->cmp_var);
    free(h), free(smp), free(rt);
    hx_bk_work_free(&b);
    return st;
}

/* Every case under each --compare value: md, json or csv rows of µs and ratios to a plain read. */
static int hx_bk_run_compare(struct hx_device *dev, const struct hx_bk_opts *o, struct hx_app_bw_buf *pb,
                             const char *desc)
{
    const bool md = !strcmp(o->fmt, "md"), js = !strcmp(o->fmt, "json");
    if (md) {
        printf("# kernel comparison: backend %s (%s)%s%s; %s = ", dev->id, dev->info.name,
               desc[0] ? ", " : "", desc, o->cmp_var);
        for (int v = 0; v < o->n_cmp; v++) printf("%s%s", v ? ", " : "", o->cmp_vals[v]);
        printf("\n\nPer sample, one rotation through the weight's copies; per copy, a plain read of as many "
               "bytes and one call under each value, in turn, the first after the read moving on by one from copy "
               "to copy. µs per call (median of %d samples) and, "
               "for m = 1, its time over the plain read's in the same sample (median).\n\n", o->reps);
        printf("| type | K×N | m | plain read µs |");
        for (int v = 0; v < o->n_cmp; v++) printf(" %s=%s µs (× read) |", o->cmp_var, o->cmp_vals[v]);
        printf("\n|---|---|---|---|");
        for (int v = 0; v < o->n_cmp; v++) printf("---|");
        printf("\n");
    } else if (js) {
        printf("{\"backend\":\"%s\",\"threads\":%d,\"compare\":\"%s\",\"results\":[", dev->id, o->threads,
               o->cmp_var);
    } else {
        printf("backend,type,k,n,m,threads,var,value,median_us,x_read,read_us\n");
    }
    int rc = 0, first = 1;
    for (int ti = 0; ti < o->n_types; ti++)
        for (int si = 0; si < o->n_shapes; si++)
            for (int mi = 0; mi < o->n_ms; mi++) {
                const enum hx_dtype t = o->types[ti];
                const int64_t k = o->shapes[si][0], n = o->shapes[si][1], m = o->ms[mi];
                if (k % hx_dtype_block_elems(t)) continue;
                double us[HX_BK_MAX_CMP], ratio[HX_BK_MAX_CMP], rd = 0.0;
                size_t wb = 0;
                const int st = hx_bk_compare(dev, o, t, k, n, m, pb, us, ratio, &rd, &wb);
                if (st == HX_E_UNSUPPORTED) continue;
                if (st) {
                    hx_app_error("bench", "%s %lldx%lld m=%lld: %s", hx_dtype_name(t), (long long)k,
                                 (long long)n, (long long)m, hx_last_error());
                    rc = 1;
                    continue;
                }
                if (md) {
                    char r[32] = "—";
                    if (rd > 0) snprintf(r, sizeof r, "%.1f", rd);
                    printf("| %s | %lld×%lld | %lld | %s |", hx_dtype_name(t), (long long)k, (long long)n,
                           (long long)m, r);
                    for (int v = 0; v < o->n_cmp; v++) {
                        if (rd > 0) printf(" %.1f (×%.3f) |", us[v], ratio[v]);
                        else printf(" %.1f |", us[v]);
                    }
                    printf("\n");
                } else if (js) {
                    printf("%s{\"type\":\"%s\",\"k\":%lld,\"n\":%lld,\"m\":%lld,\"bytes\":%zu,\"read_us\":%.2f,\"values\":[",
                           first ? "" : ",", hx_dtype_name(t), (long long)k, (long long)n, (long long)m, wb, rd);
                    for (int v = 0; v < o->n_cmp; v++)
                        printf("%s{\"value\":\"%s\",\"median_us\":%.2f,\"x_read\":%.4f}", v ? "," : "",
                               o->cmp_vals[v], us[v], ratio[v]);
                    printf("]}");
                } else {
                    for (int v = 0; v < o->n_cmp; v++)
                        printf("%s,%s,%lld,%lld,%lld,%d,%s,%s,%.2f,%.4f,%.2f\n", dev->id, hx_dtype_name(t),
                               (long long)k, (long long)n, (long long)m, o->threads, o->cmp_var,
                               o->cmp_vals[v], us[v], ratio[v], rd);
                }
                first = 0;
                fflush(stdout);
            }
    if (js) printf("]}\n");
    return rc;
}

/* Device-to-device copy bandwidth: two buffers of *bytes on dev, one untimed and 9 timed
 * copies through the backend's copy (hx__dev_copy returns when the copy is done), (read +
 * write bytes) / host time, median. A failed allocation halves the size, down to 16 MiB;
 * *bytes gets the size used. 0: not measured. */
static double hx_bk_d2d_gbs(struct hx_device *dev, size_t *bytes)
{
    for (size_t n = *bytes; n >= ((size_t)16 << 20); n /= 2) {
        struct hx_buffer *a = NULL, *b = NULL;
        if (hx__dev_buffer_alloc(dev, n, &a) || hx__dev_buffer_alloc(dev, n, &b)) {
            hx__dev_buffer_free(a);
            continue;
        }
        double us[9];
        int st = hx__dev_copy(b, 0, a, 0, n);
        for (int i = 0; i < 9 && st == HX_OK; i++) {
            const double t = hx_app_now_us();
            st = hx__dev_copy(i % 2 ? a : b, 0, i % 2 ? b : a, 0, n);
            us[i] = hx_app_now_us() - t;
        }
        hx__dev_buffer_free(a);
        hx__dev_buffer_free(b);
        if (st != HX_OK) return 0.0;
        *bytes = n;
        const double med = hx_app_median(us, 9);
        return med > 0 ? 2.0 * (double)n / (med * 1e-6) / 1e9 : 0.0;
    }
    return 0.0;
}

int hx_cmd_bench_kernels(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--backend") && !strncmp(argv[i + 1], "npu", 3))
            return hx_cmd_bench_npu(argc, argv);
    struct hx_bk_opts o;
    int pr = hx_bk_parse(argc, argv, &o);
    if (pr) {
        if (pr < 0 && o.bad_opt && o.bad_val)
            hx_app_error("bench", "bad value '%s' for %s (the usage below gives the values it takes)", o.bad_val,
                         o.bad_opt);
        else if (pr < 0 && o.bad_opt)
            hx_app_error("bench", "unknown option or missing value: '%s'", o.bad_opt);
        hx_bk_usage();
        return pr > 0 ? 0 : 2;
    }
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = o.threads};
    struct hx_device *dev = NULL;
    if (hx__device_open(o.backend, &cfg, &dev) != HX_OK) {
        hx_app_error("bench", "%s", hx_last_error());
        return 1;
    }
    /* The probe reads as much as each case's working set (--working-set), so a GEMV's share
     * compares like with like; --bw-gbs X skips it. */
    struct hx_app_bw probe = {0};
    double bw = o.bw_gbs;
    struct hx_app_bw_buf *pb = NULL;
    char desc[512];
    hx__dev_describe(dev, desc, sizeof desc);
    if (o.n_cmp) { /* the plain read between the calls; no probe figure */
        pb = hx_app_bw_open(o.threads, o.set_bytes);
        const int rc = hx_bk_run_compare(dev, &o, pb, desc);
        hx_app_bw_close(pb);
        hx__device_close(dev);
        return rc;
    }
    if (bw <= 0 && (pb = hx_app_bw_open(o.threads, o.set_bytes)) &&
        hx_app_bw_measure(pb, 9, &probe, NULL) == 0)
        bw = probe.median_gbs;
    /* a device with memory of its own: its copy bandwidth (the host probe above is not its) */
    size_t d2d_bytes = o.d2d_mib >= 0            ? (size_t)o.d2d_mib
                       : dev->info.unified_memory ? 0
                       : dev->info.simulated      ? 16
                                                  : 1024;
    d2d_bytes <<= 20;
    const double d2d = d2d_bytes ? hx_bk_d2d_gbs(dev, &d2d_bytes) : 0.0;
    bool md = !strcmp(o.fmt, "md"), js = !strcmp(o.fmt, "json");
    if (md) {
        printf("# kernel benchmark: backend %s (%s)%s%s\n\n", dev->id, dev->info.name,
               desc[0] ? ", " : "", desc);
        if (o.bw_gbs > 0)
            printf("read bandwidth: %.1f GB/s (given with --bw-gbs)\n\n", bw);
        else
            printf("read bandwidth probe: median %.1f GB/s, best %.1f GB/s (%d threads, %s loads, %s, "
                   "%zu MiB working set, %d passes; LLC reported %zu MiB)\n\n",
                   bw, probe.best_gbs, probe.n_threads, probe.kernel ? probe.kernel : "?",
                   probe.prefetch ? probe.prefetch : "?",
                   probe.working_set_bytes >> 20, probe.n_passes, probe.llc_bytes >> 20);
        if (d2d > 0)
            printf("device-to-device copy: %.1f GB/s (read + write bytes of a %zu MiB copy over its "
                   "host time, median of 9)%s\n\n",
                   d2d, d2d_bytes >> 20, dev->info.simulated ? "; an emulated device: not a GPU's" : "");
        if (pb)
            printf("Each GEMV's share is of the probe run again around it (3 passes just before, 3 "
                   "just after, median; its GB/s after the share): on a shared machine the read "
                   "bandwidth moves by tens of percent within a minute. \"plain read\" is the median µs "
                   "of reading the same bytes, from memory, as one task of the same threads, and the "
                   "GEMV's speed as a share of that: a read of a few hundred KiB does not reach the "
                   "probe's long-stream rate.\n\n");
        printf("| type | K×N | m | µs/call median (mean ± sd) | GB/s | GFLOP/s | %% of read BW | plain read µs (GEMV %%) | host µs | device µs |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
    } else if (js) {
        printf("{\"backend\":\"%s\",\"threads\":%d,\"read_bw_gbs\":%.2f,", dev->id, o.threads, bw);
        if (d2d > 0) printf("\"d2d_gbs\":%.2f,\"d2d_mib\":%zu,", d2d, d2d_bytes >> 20);
        printf("\"simulated\":%s,\"results\":[", dev->info.simulated ? "true" : "false");
    } else {
        printf("backend,type,k,n,m,threads,median_us,mean_us,sd_us,gbs,gflops,bw_pct,host_us,device_us,modelled,bw_gbs,read_us,read_pct\n");
    }
    fflush(stdout);
    int first = 1, rc = 0;
    for (int ti = 0; ti < o.n_types; ti++)
        for (int si = 0; si < o.n_shapes; si++)
            for (int mi = 0; mi < o.n_ms; mi++) {
                enum hx_dtype t = o.types[ti];
                int64_t k = o.shapes[si][0], n = o.shapes[si][1], m = o.ms[mi];
                if (k % hx_dtype_block_elems(t)) continue;
                struct hx_bk_result r = {0};
                double near[6], cbw = bw;
                struct hx_app_bw nb;
                bool around = pb && m == 1 && hx_app_bw_measure(pb, 3, &nb, near) == 0;
                int st = hx_bk_case(dev, &o, t, k, n, m, &r);
                if (around && hx_app_bw_measure(pb, 3, &nb, near + 3) == 0) cbw = hx_app_median(near, 6);
                r.bw_gbs = cbw;
                r.bw_pct = cbw > 0 ? 100.0 * r.gbs / cbw : 0.0;
                if (around && !st && hx_app_bw_burst(pb, r.wbytes, o.reps, &r.read_us) == 0 && r.med_us > 0)
                    r.read_pct = 100.0 * r.read_us / r.med_us;
                if (st == HX_E_UNSUPPORTED) continue;
                if (st) {
                    hx_app_error("bench", "%s %lldx%lld m=%lld: %s", hx_dtype_name(t),
                                 (long long)k, (long long)n, (long long)m, hx_last_error());
                    rc = 1;
                    continue;
                }
                char hu[32] = "—", du[32] = "—", pct[32] = "—";
                if (r.have_timing) {
                    snprintf(hu, sizeof hu, "%.1f", r.host_us);
                    snprintf(du, sizeof du, "%.1f%s", r.dev_us, r.modelled ? " (modelled)" : "");
                }
                if (m == 1 && pb) snprintf(pct, sizeof pct, "%.0f%% of %.1f", r.bw_pct, r.bw_gbs);
                else if (m == 1) snprintf(pct, sizeof pct, "%.0f%%", r.bw_pct);
                char rd[48] = "—";
                if (r.read_us > 0) snprintf(rd, sizeof rd, "%.1f (%.0f%%)", r.read_us, r.read_pct);
                if (md) {
                    printf("| %s | %lld×%lld | %lld | %.1f (%.1f ± %.1f) | %.1f | %.1f | %s | %s | %s | %s |\n",
                           hx_dtype_name(t), (long long)k, (long long)n, (long long)m, r.med_us,
                           r.mean_us, r.sd_us, r.gbs, r.gflops, pct, rd, hu, du);
                } else if (js) {
                    printf("%s{\"type\":\"%s\",\"k\":%lld,\"n\":%lld,\"m\":%lld,\"median_us\":%.2f,\"mean_us\":%.2f,"
                           "\"sd_us\":%.2f,\"gbs\":%.3f,\"gflops\":%.3f,\"bw_pct\":%.2f,\"bw_gbs\":%.3f",
                           first ? "" : ",", hx_dtype_name(t), (long long)k, (long long)n,
                           (long long)m, r.med_us, r.mean_us, r.sd_us, r.gbs, r.gflops, r.bw_pct, r.bw_gbs);
                    if (r.have_timing)
                        printf(",\"host_us\":%.2f,\"device_us\":%.2f,\"modelled\":%s", r.host_us,
                               r.dev_us, r.modelled ? "true" : "false");
                    if (r.read_us > 0) printf(",\"read_us\":%.2f,\"read_pct\":%.2f", r.read_us, r.read_pct);
                    printf("}");
                } else {
                    char ru[32] = "", rp[32] = "";
                    if (r.read_us > 0) snprintf(ru, sizeof ru, "%.2f", r.read_us), snprintf(rp, sizeof rp, "%.2f", r.read_pct);
                    printf("%s,%s,%lld,%lld,%lld,%d,%.2f,%.2f,%.2f,%.3f,%.3f,%.2f,%s,%s,%d,%.3f,%s,%s\n", dev->id,
                           hx_dtype_name(t), (long long)k, (long long)n, (long long)m, o.threads,
                           r.med_us, r.mean_us, r.sd_us, r.gbs, r.gflops, r.bw_pct,
                           r.have_timing ? hu : "", r.have_timing ? du : "", r.modelled, r.bw_gbs, ru, rp);
                }
                first = 0;
                fflush(stdout);
            }
    if (js) printf("]}\n");
    hx_app_bw_close(pb);
    hx__device_close(dev);
    return rc;
}
