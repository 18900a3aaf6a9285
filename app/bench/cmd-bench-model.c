/*
 * cmd-bench-model.c — `engine bench -m MODEL ...`: end-to-end prompt-processing (ppN) and
 * generation (tgN) throughput, in the shape of llama-bench's output.
 *
 * Every combination of model × --backend × --policy × -t is one context and yields one row
 * per test: ppN is one prefill of N random (seeded) token ids from an empty cache, tgN is N
 * single-token decodes from an empty cache with the logits of every step computed (so the
 * output head is read each step). With -d D ("pp512 @ d4096", as llama-bench names it) the
 * cache is first filled with D tokens, once and untimed, and every run starts there.
 * Tokenization and sampling are excluded. Before timing, one untimed warm-up run touches every
 * weight, so a cold mmap is never measured. Each test is repeated -r times; rows give median ±
 * sample stddev and the best run.
 *
 * Generation is memory-bound: each tg row also gives the bytes of weights read per token
 * (every tensor of the file, the output head included, but only one row of the token
 * embedding unless it doubles as the head), the bandwidth that implies at the median speed,
 * and its share of the median read bandwidth the probe in bench-util.c measured with the
 * same thread count. Each row also says how many cores other processes kept busy while it
 * ran, because this machine is shared and a busy neighbour can cost a 2-thread run 10×.
 * The scheduler's counters (hx_context_stats, read after every batch) give the device splits
 * per batch and the bytes moved between devices per token of the timed runs.
 *
 * No figure should come from a wrong result: before a context is timed, its policy runs a few
 * tokens under verify@ref:POLICY (every op re-run on the reference with the same inputs), and
 * then the context to be timed runs the same tokens and must give the same logits. A row that
 * fails is printed all the same, flagged, and the exit status is 1 (bench-check.c). --plot
 * draws the rows as an SVG bar chart, written without any library (bench-plot.c).
 *
 * Models and contexts are driven through the public API (include/hx.h) only. The GGUF tensor
 * table (core-private gguf.h) is read separately for the per-token byte count
 * (bench-measure.c), and scheduler.h supplies just the policy names used to split a --policy
 * list (bench-options.c). This file runs the command: the probe, then every model × backend ×
 * policy × threads in order; bench-model.h says which file holds the rest.
 *
 * stdout carries only the table (md) or the records (json, csv); progress goes to stderr.
 * Exit: 0 all rows measured and none failed its check, 1 a model or row failed or a row
 * failed its check (the other rows are still printed), 2 bad usage (caught before any model
 * is loaded, an unwritable --plot path included).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-model.h"

/* ---- one context: all tests of a model × backend × policy × threads ------------------------- */

void hx_bm_progress(const struct hx_bm_combo *cb, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hx_app_progress_note("bench", "%s %s/%s t=%lld: %s", cb->model->label, cb->backend,
                         cb->policy, (long long)cb->n_threads, msg);
}

static int hx_bm_combo_run(const struct hx_bm_combo *cb, struct hx_bm_out *out)
{
    const struct hx_bm_opts *o = cb->o;
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    if (cb->optional && hx_policy_validate(cb->policy, cb->backend, o->fallback) != HX_OK) {
        hx_app_progress_note("bench", "skipping policy %s on %s: %s", cb->policy, cb->backend,
                             hx_last_error());
        return 0;
    }
    struct hx_bm_check k;
    if (hx_bm_check_ref(cb, &k)) return 1;
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = cb->backend,
                                   .policy = cb->policy, .fallback = o->fallback, .mem = o->mem,
                                   .n_threads = (int)cb->n_threads,
                                   .n_ctx = hx_bm_ctx_need(o), .n_batch = HX_BM_BATCH};
    struct hx_context *c;
    struct hx_app_load load;
    hx_app_load_init(&load, "bench", o->progress);
    hx_app_load_params(&load, &cp);
    if (hx_context_new(cb->model->m, &cp, &c) != HX_OK) {
        hx_free(k.logits);
        if (cb->optional) {
            hx_app_progress_note("bench", "skipping policy %s on %s: %s", cb->policy,
                                 cb->backend, hx_last_error());
            return 0;
        }
        hx_app_error("bench", "%s on %s with policy %s: %s", cb->model->label, cb->backend,
                     cb->policy, hx_last_error());
        return 1;
    }
    int rc = hx_bm_check_timed(cb, c, &k);
    hx_bm_progress(cb, "warm-up");
    if (!rc && hx_bm_warmup(c, cb->model->ids, max_p, max_n) != HX_OK) {
        hx_app_error("bench", "%s %s/%s warm-up: %s", cb->model->label, cb->backend, cb->policy,
                     hx_last_error());
        rc = 1;
    }
    for (int d = 0; d < o->n_n_depth && !rc; d++) {
        for (int i = 0; i < o->n_n_prompt && !rc; i++)
            if (o->n_prompt[i]) rc = hx_bm_test(cb, c, o->n_depth[d], o->n_prompt[i], 0, &k, out);
        for (int i = 0; i < o->n_n_gen && !rc; i++)
            if (o->n_gen[i]) rc = hx_bm_test(cb, c, o->n_depth[d], 0, o->n_gen[i], &k, out);
    }
    hx_context_free(c);
    return rc;
}

/* ---- the command ----------------------------------------------------------------------------- */

/* One probe per distinct thread count, before any model occupies memory. */
static int hx_bm_probe_all(const struct hx_bm_opts *o, struct hx_app_bw *bw)
{
    for (int i = 0; i < o->n_threads; i++) {
        int same = -1;
        for (int j = 0; j < i; j++) same = o->threads[j] == o->threads[i] ? j : same;
        if (same >= 0) {
            bw[i] = bw[same];
            continue;
        }
        if (o->bw_gbs > 0) {
            bw[i] = (struct hx_app_bw){.median_gbs = o->bw_gbs, .best_gbs = o->bw_gbs,
                                       .kernel = "given", .n_threads = (int)o->threads[i],
                                       .other_cores = -1, .llc_bytes = hx_app_llc_bytes()};
            continue;
        }
        hx_app_progress_note("bench", "measuring read bandwidth with %lld thread%s",
                             (long long)o->threads[i], o->threads[i] == 1 ? "" : "s");
        if (hx_app_bw_probe((int)o->threads[i], (size_t)o->bw_mib << 20, 9, &bw[i]) != 0) {
            hx_app_error("bench", "cannot allocate the bandwidth probe's buffer (try --bw-mib)");
            return 1;
        }
    }
    return 0;
}

static int hx_bm_model_rows(const struct hx_bm_opts *o, const char *path,
                            const struct hx_app_bw *bw, struct hx_bm_out *out)
{
    struct hx_bm_model bm;
    hx_app_progress_note("bench", "loading %s", path);
    int64_t need = hx_bm_ctx_need(o);
    int rc = hx_bm_model_open(&bm, path, o, need);
    bool opened = rc == 0;
    if (opened && bm.info.n_ctx_train > 0 && need > bm.info.n_ctx_train)
        hx_app_progress_note("bench", "note: %s was trained on a context of %lld tokens; these "
                             "tests reach position %lld (-d + -p/-n), beyond it: the speed is "
                             "measured all the same, the model's output there means little",
                             bm.label, (long long)bm.info.n_ctx_train, (long long)need);
    for (int b = 0; b < o->n_backends && opened; b++)
        for (int p = 0; p < o->n_policies; p++)
            for (int t = 0; t < o->n_threads; t++) {
                struct hx_bm_combo cb = {.o = o, .model = &bm, .backend = o->backends[b],
                                         .policy = o->policies[p],
                                         .optional = o->policy_optional[p],
                                         .n_threads = o->threads[t], .bw = &bw[t]};
                rc |= hx_bm_combo_run(&cb, out);
            }
    hx_bm_model_close(&bm);
    return rc;
}

int hx_cmd_bench_model(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return hx_bm_usage(), 0;
    static struct hx_bm_opts o;
    int rc = hx_bm_options(argc, argv, &o);
    struct hx_app_bw bw[HX_BM_MAX_LIST];
    if (!rc) rc = hx_bm_probe_all(&o, bw);
    if (rc) {
        if (o.plot.f) hx_app_outfile_abort(&o.plot);
        return rc;
    }
    hx_bm_output_begin(&o, bw);
    struct hx_bm_out out = {0};
    for (int i = 0; i < o.n_models; i++) rc |= hx_bm_model_rows(&o, o.models[i], bw, &out);
    hx_bm_output_end(&o, &out);
    if (o.plot.f) {
        rc |= hx_bm_plot(o.plot.f, (long long)o.reps, &out);
        int prc = hx_app_outfile_commit("bench", &o.plot);
        if (!prc) hx_app_progress_note("bench", "plot written to %s", o.plot_path);
        rc |= prc;
    }
    free(out.bars);
    return rc || out.any_failed ? 1 : 0;
}
