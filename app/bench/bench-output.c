/*
 * bench-output.c — the rows of `engine bench -m` on stdout: a markdown table for people (a
 * header with the bandwidth probe, one line per row, footnotes), or records for scripts (json,
 * csv) with the same fields in the same order; and what the plot and the footer keep of each
 * row. Progress goes to stderr elsewhere, so stdout carries only this.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-model.h"
#include "hx-internal.h"

/* A record's fields, shared by json and csv so both carry the same data. */
enum hx_bm_kind { HX_BM_STR, HX_BM_NUM, HX_BM_NULL, HX_BM_LIST };

struct hx_bm_field {
    const char *key;
    enum hx_bm_kind kind;
    char val[1600];   /* HX_BM_LIST: numbers separated by single spaces */
};

#define HX_BM_N_FIELDS 48   /* capacity; hx_bm_fields fills 44 */

static double hx_bm_implied_gbs(const struct hx_bm_row *r)
{
    return r->n_gen ? (double)r->model->w.bytes_per_token * r->median_ts / 1e9 : 0.0;
}

/* The share of read bandwidth divides by the host's probe: it means something only when every
 * device the row ran on reads host memory (the CPU, an iGPU or NPU with unified memory), not
 * for a discrete GPU with its own memory. devices: "cpu", "cpu,vulkan:0", ... */
static bool hx_bm_host_memory(const char *devices)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", devices);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        int idx = 0;
        if (colon) *colon = '\0', idx = colon[1] >= '0' && colon[1] <= '9' ? atoi(colon + 1) : 0;
        const struct hx_backend_entry *e = hx__backend_find(t);
        struct hx_device_info info;
        if (!e || hx__backend_device_info(e, idx, &info) != HX_OK || !info.unified_memory)
            return false;
    }
    return true;
}

/* The share of the host probe for a tg row, or < 0 when there is none to give. */
static double hx_bm_bw_share(const struct hx_bm_row *r, double gbs)
{
    if (!r->n_gen || !(r->bw->median_gbs > 0) || !hx_bm_host_memory(r->devices)) return -1.0;
    return gbs / r->bw->median_gbs;
}

/* A tg row whose weights fit in the last-level cache: its share is not a DRAM roofline. */
static bool hx_bm_fits_cache(const struct hx_bm_row *r)
{
    return r->n_gen && r->bw->llc_bytes && r->model->w.bytes_per_token <= r->bw->llc_bytes;
}

static void hx_bm_set(struct hx_bm_field *f, int *n, const char *key, enum hx_bm_kind kind,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void hx_bm_set(struct hx_bm_field *f, int *n, const char *key, enum hx_bm_kind kind,
                      const char *fmt, ...)
{
    if (*n >= HX_BM_N_FIELDS) return;
    struct hx_bm_field *x = &f[(*n)++];
    va_list ap;
    va_start(ap, fmt);
    x->key = key, x->kind = kind;
    vsnprintf(x->val, sizeof x->val, fmt, ap);
    va_end(ap);
}

static void hx_bm_samples(char *out, size_t cap, const double *v, int n, bool as_ts, int64_t tokens)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < n && off < cap; i++) {
        double x = as_ts ? (double)tokens * 1e9 / v[i] : v[i];
        off += (size_t)snprintf(out + off, cap - off, as_ts ? "%s%.3f" : "%s%.0f", i ? " " : "", x);
    }
}

/* The test's name as llama-bench prints it: "pp512", "tg128", "tg128 @ d4096". */
const char *hx_bm_test_name(const struct hx_bm_row *r, char *out, size_t cap)
{
    int k = snprintf(out, cap, "%s%lld", r->n_prompt ? "pp" : "tg",
                     (long long)(r->n_prompt ? r->n_prompt : r->n_gen));
    if (r->n_depth && k > 0 && (size_t)k < cap)
        snprintf(out + k, cap - (size_t)k, " @ d%lld", (long long)r->n_depth);
    return out;
}

static int hx_bm_fields(const struct hx_bm_row *r, struct hx_bm_field *f)
{
    const struct hx_bm_model *m = r->model;
    const struct hx_app_bw *bw = r->bw;
    int64_t tokens = r->n_prompt ? r->n_prompt : r->n_gen;
    double gbs = hx_bm_implied_gbs(r);
    int n = 0;
    hx_bm_set(f, &n, "build_version", HX_BM_STR, "%s", hx_version());
    hx_bm_set(f, &n, "model_filename", HX_BM_STR, "%s", m->path);
    hx_bm_set(f, &n, "model", HX_BM_STR, "%s", m->label);
    hx_bm_set(f, &n, "model_name", HX_BM_STR, "%s", m->info.name ? m->info.name : "");
    hx_bm_set(f, &n, "model_arch", HX_BM_STR, "%s", m->info.arch ? m->info.arch : "");
    hx_bm_set(f, &n, "model_type", HX_BM_STR, "%s", m->w.type);
    hx_bm_set(f, &n, "model_size", HX_BM_NUM, "%zu", m->info.weight_bytes);
    hx_bm_set(f, &n, "model_n_params", HX_BM_NUM, "%lld", (long long)m->info.n_params);
    hx_bm_set(f, &n, "backend", HX_BM_STR, "%s", r->backend);
    hx_bm_set(f, &n, "policy", HX_BM_STR, "%s", r->policy);
    hx_bm_set(f, &n, "devices", HX_BM_STR, "%s", r->devices);
    hx_bm_set(f, &n, "n_threads", HX_BM_NUM, "%lld", (long long)r->n_threads);
    hx_bm_set(f, &n, "use_mmap", HX_BM_NUM, "%s", r->mmap ? "true" : "false");
    char tn[64];
    hx_bm_set(f, &n, "test", HX_BM_STR, "%s", hx_bm_test_name(r, tn, sizeof tn));
    hx_bm_set(f, &n, "n_prompt", HX_BM_NUM, "%lld", (long long)r->n_prompt);
    hx_bm_set(f, &n, "n_gen", HX_BM_NUM, "%lld", (long long)r->n_gen);
    hx_bm_set(f, &n, "n_depth", HX_BM_NUM, "%lld", (long long)r->n_depth);
    hx_bm_set(f, &n, "n_reps", HX_BM_NUM, "%d", r->n_reps);
    hx_bm_set(f, &n, "avg_ts", HX_BM_NUM, "%.3f", r->avg_ts);
    hx_bm_set(f, &n, "stddev_ts", HX_BM_NUM, "%.3f", r->stddev_ts);
    hx_bm_set(f, &n, "median_ts", HX_BM_NUM, "%.3f", r->median_ts);
    hx_bm_set(f, &n, "best_ts", HX_BM_NUM, "%.3f", r->best_ts);
    hx_bm_samples(f[n].val, sizeof f[n].val, r->samples_ns, r->n_reps, true, tokens);
    f[n].key = "samples_ts", f[n++].kind = HX_BM_LIST;
    hx_bm_samples(f[n].val, sizeof f[n].val, r->samples_ns, r->n_reps, false, tokens);
    f[n].key = "samples_ns", f[n++].kind = HX_BM_LIST;
    hx_bm_set(f, &n, "weight_bytes_per_token", HX_BM_NUM, "%zu", m->w.bytes_per_token);
    hx_bm_set(f, &n, "implied_gbs", r->n_gen ? HX_BM_NUM : HX_BM_NULL, "%.3f", gbs);
    const double share = hx_bm_bw_share(r, gbs);
    hx_bm_set(f, &n, "bw_share", share >= 0 ? HX_BM_NUM : HX_BM_NULL, "%.4f", share >= 0 ? share : 0.0);
    hx_bm_set(f, &n, "weights_fit_llc", HX_BM_NUM, "%s", hx_bm_fits_cache(r) ? "true" : "false");
    hx_bm_set(f, &n, "other_load_cores", r->other_cores >= 0 ? HX_BM_NUM : HX_BM_NULL, "%.2f",
              r->other_cores);
    hx_bm_set(f, &n, "batches", HX_BM_NUM, "%.6g", r->batches);
    hx_bm_set(f, &n, "splits_per_batch", HX_BM_NUM, "%.6g", r->splits_per_batch);
    hx_bm_set(f, &n, "splits_per_token", HX_BM_NUM, "%.6g", r->splits_per_token);
    hx_bm_set(f, &n, "bytes_moved_per_token", HX_BM_NUM, "%.6g", r->bytes_moved_per_token);
    hx_bm_set(f, &n, "fallback_ops_per_batch", HX_BM_NUM, "%.6g", r->fallback_ops_per_batch);
    const struct hx_bm_verdict *v = r->verdict;
    bool ran = v->state == HX_BM_V_YES || v->state == HX_BM_V_FAIL;
    hx_bm_set(f, &n, "verified", HX_BM_STR, "%s", hx_bm_vstate_name[v->state]);
    hx_bm_set(f, &n, "verify_checks", ran ? HX_BM_NUM : HX_BM_NULL, "%lld", (long long)v->checks);
    hx_bm_set(f, &n, "verify_failed", ran ? HX_BM_NUM : HX_BM_NULL, "%lld", (long long)v->failed);
    hx_bm_set(f, &n, "verify_logits_nmse", ran && v->logits_nmse >= 0 ? HX_BM_NUM : HX_BM_NULL,
              "%.6g", isfinite(v->logits_nmse) ? v->logits_nmse : 1e300);
    hx_bm_set(f, &n, "verify_note", HX_BM_STR, "%s", v->note);
    hx_bm_set(f, &n, "bw_median_gbs", HX_BM_NUM, "%.3f", bw->median_gbs);
    hx_bm_set(f, &n, "bw_best_gbs", HX_BM_NUM, "%.3f", bw->best_gbs);
    hx_bm_set(f, &n, "bw_working_set_bytes", HX_BM_NUM, "%zu", bw->working_set_bytes);
    hx_bm_set(f, &n, "bw_other_load_cores", bw->other_cores >= 0 ? HX_BM_NUM : HX_BM_NULL, "%.2f",
              bw->other_cores);
    hx_bm_set(f, &n, "bw_kernel", HX_BM_STR, "%s", bw->kernel ? bw->kernel : "");
    hx_bm_set(f, &n, "bw_passes", HX_BM_NUM, "%d", bw->n_passes);
    hx_bm_set(f, &n, "bw_prefetch", HX_BM_STR, "%s", bw->prefetch ? bw->prefetch : ""); /* last: csv */
    return n;
}

static void hx_bm_json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void hx_bm_emit_json(const struct hx_bm_field *f, int n, bool first)
{
    printf("%s  {", first ? "" : ",\n");
    for (int i = 0; i < n; i++) {
        printf("%s\"%s\": ", i ? ", " : "", f[i].key);
        if (f[i].kind == HX_BM_STR) hx_bm_json_str(f[i].val);
        else if (f[i].kind == HX_BM_NULL) printf("null");
        else if (f[i].kind == HX_BM_NUM) printf("%s", f[i].val);
        else {
            putchar('[');
            for (const char *c = f[i].val; *c; c++) putchar(*c == ' ' ? ',' : *c);
            putchar(']');
        }
    }
    printf("}");
}

static void hx_bm_csv_cell(const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void hx_bm_emit_csv(const struct hx_bm_field *f, int n, bool header)
{
    for (int i = 0; i < n; i++) {
        if (i) putchar(',');
        hx_bm_csv_cell(header ? f[i].key : f[i].kind == HX_BM_NULL ? "" : f[i].val);
    }
    putchar('\n');
}

static void hx_bm_md_bw_line(const struct hx_app_bw *b)
{
    printf("read bandwidth, %d thread%s: median %.1f GB/s, best %.1f GB/s", b->n_threads,
           b->n_threads == 1 ? "" : "s", b->median_gbs, b->best_gbs);
    if (!strcmp(b->kernel, "given")) {
        printf(" (given with --bw-gbs, not measured)\n");
        return;
    }
    printf(" (%s loads, %s, %zu MiB buffer", b->kernel, b->prefetch ? b->prefetch : "?",
           b->working_set_bytes >> 20);
    if (b->llc_bytes)
        printf(" = %.1f× the %zu MiB last-level cache%s",
               (double)b->working_set_bytes / (double)b->llc_bytes, b->llc_bytes >> 20,
               b->below_2x_llc ? ", below 2×: may read from cache" : "");
    printf(", %d passes", b->n_passes);
    if (b->other_cores >= 0) printf("; other load %.2f cores", b->other_cores);
    printf(")\n");
}

static void hx_bm_md_header(const struct hx_bm_opts *o, const struct hx_app_bw *bw)
{
    printf("engine bench (hx %s): ppN = one prefill of N random token ids, tgN = N single-token "
           "decodes, both from an empty cache (\"@ dD\": from D tokens already cached); tokens/s as median ± sample stddev of %lld runs "
           "after an untimed warm-up; tokenization and sampling excluded; weights %s.\n\n",
           hx_version(), (long long)o->reps,
           o->mmap ? "mmapped and warmed by the warm-up run" : "read into memory (--mmap 0)");
    for (int i = 0; i < o->n_threads; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= o->threads[j] == o->threads[i];
        if (!seen) hx_bm_md_bw_line(&bw[i]);
    }
    printf("\n| model | type | size | params | backend | policy | devices | threads | test | t/s "
           "| best t/s | weights/token | GB/s | of BW | splits/batch | moved/token | load "
           "| verified |\n");
    printf("|---|---|--:|--:|---|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
}

/* Bytes for people: "0 B", "980 B", "14.1 KiB", "2.36 MiB". */
static void hx_bm_bytes(char *out, size_t cap, double b)
{
    if (b < 1024) snprintf(out, cap, "%.0f B", b);
    else if (b < 1048576) snprintf(out, cap, "%.1f KiB", b / 1024);
    else snprintf(out, cap, "%.2f MiB", b / 1048576);
}

static void hx_bm_emit_md(const struct hx_bm_row *r)
{
    const struct hx_bm_model *m = r->model;
    double gbs = hx_bm_implied_gbs(r);
    char wpt[32] = "—", g[32] = "—", share[32] = "—";
    if (r->n_gen) {
        snprintf(wpt, sizeof wpt, "%.2f MiB", (double)m->w.bytes_per_token / 1048576.0);
        snprintf(g, sizeof g, "%.2f", gbs);
        const double sh = hx_bm_bw_share(r, gbs);
        if (sh >= 0) snprintf(share, sizeof share, "%.0f%%%s", 100.0 * sh, hx_bm_fits_cache(r) ? "*" : "");
    }
    char load[16] = "?", moved[32];
    if (r->other_cores >= 0) snprintf(load, sizeof load, "%.2f", r->other_cores);
    hx_bm_bytes(moved, sizeof moved, r->bytes_moved_per_token);
    double params = (double)m->info.n_params;
    char tn[64];
    printf("| %s | %s | %.2f MiB | %.2f %s | %s | %s | %s | %lld | %s | %.2f ± %.2f | %.2f "
           "| %s | %s | %s | %.4g | %s | %s | %s |\n",
           m->label, m->w.type, (double)m->info.weight_bytes / 1048576.0,
           params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M", r->backend,
           r->policy, r->devices, (long long)r->n_threads, hx_bm_test_name(r, tn, sizeof tn),
           r->median_ts, r->stddev_ts,
           r->best_ts, wpt, g, share, r->splits_per_batch, moved, load,
           hx_bm_vstate_name[r->verdict->state]);
}

static void hx_bm_md_footer(const struct hx_bm_opts *o, const struct hx_bm_out *out)
{
    printf("\nsplits/batch: device launches per hx_decode call (a tg step, or a pp batch of up "
           "to %d rows); moved/token: bytes copied between devices per token. Both are means "
           "over the timed runs, from the scheduler's counters.\n", HX_BM_BATCH);
    printf("load: cores other processes (and the hypervisor's steal time) kept busy during the "
           "timed runs; anything well above 0 means the figures of that row are perturbed.\n");
    if (out->any_cached)
        printf("*: the weights read per token fit in the last-level cache, so they can come from "
               "cache and the share is no DRAM roofline.\n");
    if (o->no_verify)
        printf("verified: off (--no-verify).\n");
    else
        printf("verified: before timing, the policy ran %d prefill rows (pp rows) and %d decode "
               "steps (tg rows) under verify@%s:POLICY, every op compared with the reference on "
               "the same inputs (test-backend-ops' NMSE thresholds), and the timed context's "
               "logits on the same tokens were within NMSE %.0e of that run (engine diff's "
               "bound).\n", HX_BM_VERIFY_PP, HX_BM_VERIFY_TG, HX_BM_VERIFY_REF,
               HX_BM_LOGITS_NMSE);
    for (int i = 0; i < out->n_bars; i++) {
        const struct hx_bm_bar *b = &out->bars[i];
        if (b->verified == HX_BM_V_FAIL || b->verified == HX_BM_V_SKIPPED)
            printf("%s %s %s: %s\n", hx_bm_vstate_name[b->verified], b->group, b->series,
                   b->note);
    }
}

/* Keep what the plot and the footer need of a row. */
static void hx_bm_keep(const struct hx_bm_row *r, struct hx_bm_out *out)
{
    if (out->n_bars == out->cap_bars) {
        int cap = out->cap_bars ? 2 * out->cap_bars : 16;
        struct hx_bm_bar *nb = realloc(out->bars, (size_t)cap * sizeof *nb);
        if (!nb) return;   /* the table is printed already; only the plot loses the row */
        out->bars = nb, out->cap_bars = cap;
    }
    struct hx_bm_bar *b = &out->bars[out->n_bars++];
    char tn[64];
    snprintf(b->group, sizeof b->group, "%s %s", r->model->label,
             hx_bm_test_name(r, tn, sizeof tn));
    snprintf(b->series, sizeof b->series, "%s · %s · t%lld", r->backend, r->policy,
             (long long)r->n_threads);
    b->median_ts = r->median_ts, b->stddev_ts = r->stddev_ts;
    b->verified = r->verdict->state;
    snprintf(b->note, sizeof b->note, "%s", r->verdict->note);
}

/* Emit one row in the chosen format. */
void hx_bm_emit(const struct hx_bm_opts *o, const struct hx_bm_row *r, struct hx_bm_out *out)
{
    static struct hx_bm_field f[HX_BM_N_FIELDS];
    if (o->fmt == HX_BM_MD) {
        hx_bm_emit_md(r);
    } else {
        int n = hx_bm_fields(r, f);
        if (o->fmt == HX_BM_JSON) hx_bm_emit_json(f, n, out->n_rows == 0);
        else hx_bm_emit_csv(f, n, false);
    }
    out->n_rows++;
    out->any_cached |= hx_bm_fits_cache(r);
    out->any_failed |= r->verdict->state == HX_BM_V_FAIL;
    hx_bm_keep(r, out);
    fflush(stdout);
}

/* The csv header needs the field names before any row exists: take them from a blank row. */
static void hx_bm_csv_header(void)
{
    static struct hx_bm_field f[HX_BM_N_FIELDS];
    struct hx_bm_model m = {.path = ""};
    struct hx_app_bw bw = {0};
    double ns = 1;
    static const struct hx_bm_verdict none = {.state = HX_BM_V_OFF};
    struct hx_bm_row r = {.model = &m, .backend = "", .policy = "", .devices = "", .bw = &bw,
                          .n_gen = 1, .n_reps = 1, .samples_ns = &ns, .verdict = &none};
    hx_bm_emit_csv(f, hx_bm_fields(&r, f), true);
}

void hx_bm_output_begin(const struct hx_bm_opts *o, const struct hx_app_bw *bw)
{
    if (o->fmt == HX_BM_MD) hx_bm_md_header(o, bw);
    else if (o->fmt == HX_BM_JSON) printf("[\n");
    else hx_bm_csv_header();
}

void hx_bm_output_end(const struct hx_bm_opts *o, const struct hx_bm_out *out)
{
    if (o->fmt == HX_BM_JSON) printf("%s]\n", out->n_rows ? "\n" : "");
    if (o->fmt == HX_BM_MD) hx_bm_md_footer(o, out);
}
