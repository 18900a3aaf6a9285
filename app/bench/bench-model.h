/*
 * bench-model.h — what the files of the model benchmark (`engine bench -m`) share; private to
 * app/bench/. cmd-bench-model.c runs the command: every model × backend × policy × threads, in
 * order. bench-options.c parses and checks the options; bench-measure.c loads a model and times
 * one test into a row; bench-check.c checks each policy against the reference before it is
 * timed; bench-output.c prints the rows (md, json, csv); bench-plot.c draws them (--plot).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app.h"
#include "bench-util.h"
#include "hx.h"

#define HX_BM_MAX_LIST 16
#define HX_BM_MAX_REPS 100
#define HX_BM_BATCH 512   /* rows per hx_decode call of a prefill */

enum hx_bm_fmt { HX_BM_MD, HX_BM_JSON, HX_BM_CSV };

struct hx_bm_opts {
    const char *models[HX_BM_MAX_LIST];
    char backends[HX_BM_MAX_LIST][64];
    char policies[2 * HX_BM_MAX_LIST][256];
    bool policy_optional[2 * HX_BM_MAX_LIST];   /* from --policy all: skip, don't fail, if absent */
    int64_t n_prompt[HX_BM_MAX_LIST], n_gen[HX_BM_MAX_LIST], threads[HX_BM_MAX_LIST];
    int64_t n_depth[HX_BM_MAX_LIST]; /* -d: tokens already in the cache when a test starts */
    int n_models, n_backends, n_policies, n_n_prompt, n_n_gen, n_threads, n_n_depth;
    int64_t reps, bw_mib;
    float bw_gbs;             /* > 0: use this bandwidth instead of probing */
    const char *fallback;     /* --fallback chain, NULL = none */
    const char *mem;          /* --mem caps, NULL = none */
    uint64_t seed;
    bool mmap;
    bool no_verify;           /* --no-verify: no check against the reference before timing */
    bool progress;            /* --progress: loading progress even when stderr is no tty */
    const char *plot_path;    /* --plot FILE.svg, NULL = none */
    struct hx_app_outfile plot; /* opened before any model loads, so a bad path fails early */
    enum hx_bm_fmt fmt;
};

/* What the GGUF tensor table says about the weights. */
struct hx_bm_weights {
    size_t bytes_per_token;   /* bytes of weights one generated token reads */
    char type[16];            /* the type holding most elements of the layer matrices */
};

/* A model being benchmarked: loaded once for all its rows. */
struct hx_bm_model {
    const char *path;
    char label[128];          /* file name without directory and ".gguf" */
    struct hx_model *m;
    struct hx_model_info info;
    struct hx_bm_weights w;
    hx_token *ids;            /* random token ids, enough for the longest test */
};

/* Before a combo is timed, its policy runs a few tokens under verify@ref:POLICY, which re-runs
 * every op on the reference with the same inputs and compares; then the context that will be
 * timed runs the same tokens, and its logits must match the verified run's. */
#define HX_BM_VERIFY_PP 8   /* prefill rows of the check (fewer if the largest -p is smaller) */
#define HX_BM_VERIFY_TG 2   /* decode steps of the check (fewer if the largest -n is smaller) */
/* Bound on the NMSE between two runs' logits: engine diff's default --logits-nmse. */
#define HX_BM_LOGITS_NMSE 1e-3
#define HX_BM_VERIFY_REF "ref" /* the device every check compares with */

enum hx_bm_vstate { HX_BM_V_OFF, HX_BM_V_SKIPPED, HX_BM_V_YES, HX_BM_V_FAIL };
static const char *const hx_bm_vstate_name[] = {"off", "skipped", "yes", "FAIL"};

/* One bar of --plot, and what the markdown footer says about a row's check. */
struct hx_bm_bar {
    char group[200];          /* "model test" */
    char series[224];         /* "backend · policy · tN" */
    double median_ts, stddev_ts;
    enum hx_bm_vstate verified;
    char note[320];
};

/* What has been printed so far (for json separators, the markdown footnotes and the plot). */
struct hx_bm_out {
    int n_rows;
    bool any_cached;   /* a tg row whose weights fit in the last-level cache */
    bool any_failed;   /* a row failed its check */
    struct hx_bm_bar *bars;
    int n_bars, cap_bars;
};

/* The check of one phase of a combo: prefill for its pp rows, decode for its tg rows. */
struct hx_bm_verdict {
    enum hx_bm_vstate state;
    bool self;              /* the policy is verify itself: its own checks of the timed runs */
    int64_t checks, failed; /* op outputs compared with the reference, and how many were over */
    double logits_nmse;     /* timed context's logits vs the verified run's; < 0: not compared */
    char note[320];
};

/* Per-run counters of the scheduler, summed over the batches of the timed runs. */
struct hx_bm_tally {
    int64_t batches, splits, fallback_ops;
    double bytes_moved;
};

/* One result line. */
struct hx_bm_row {
    const struct hx_bm_model *model;
    const char *backend, *policy, *devices;
    const struct hx_app_bw *bw;
    int64_t n_threads, n_prompt, n_gen, n_depth;
    bool mmap;
    int n_reps;
    const double *samples_ns;
    double avg_ts, stddev_ts, median_ts, best_ts;
    double other_cores;       /* other processes' load during the timed runs; -1 unknown */
    /* From the scheduler, means over the timed runs: hx_decode calls (batches) per run of the
     * test, device splits per batch and per token, bytes moved between devices per token. */
    double batches, splits_per_batch, splits_per_token, bytes_moved_per_token;
    double fallback_ops_per_batch;
    const struct hx_bm_verdict *verdict;
};

/* One context: all tests of a model × backend × policy × threads. */
struct hx_bm_combo {
    const struct hx_bm_opts *o;
    struct hx_bm_model *model;
    const char *backend, *policy;
    bool optional;
    int64_t n_threads;
    const struct hx_app_bw *bw;
};

/* A combo's check: [0] the prefill of its pp rows, [1] the decode of its tg rows. */
struct hx_bm_check {
    struct hx_bm_verdict vd[2];
    int64_t n[2];       /* prefill rows, decode steps; 0: that phase has no test */
    float *logits;      /* the verified run's logits: the prefill's last row, then each step's */
};

/* cmd-bench-model.c: a progress line on stderr about a combo, "engine bench: MODEL
 * BACKEND/POLICY t=N: ..." (app/progress.c). */
void hx_bm_progress(const struct hx_bm_combo *cb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* bench-options.c */
void hx_bm_usage(void);
/* Parse argv and check the options before any model is loaded: every backend and policy parses,
 * every model is a file, the --plot file can be written (opened in o->plot). 0 ok, 1 a model
 * file is missing, 2 bad usage; messages printed. */
int hx_bm_options(int argc, char **argv, struct hx_bm_opts *o);
/* The largest of v[0 .. n) (0 if none); the cache positions the longest test needs. */
int64_t hx_bm_max(const int64_t *v, int n);
int64_t hx_bm_ctx_need(const struct hx_bm_opts *o);

/* bench-measure.c: a model loaded for all its rows (1 on failure, message printed). */
int hx_bm_model_open(struct hx_bm_model *bm, const char *path, const struct hx_bm_opts *o,
                     int64_t n_ids);
void hx_bm_model_close(struct hx_bm_model *bm);
/* Prefill ids[from .. from + n) at positions from.. (scheduler counters into t, when given;
 * the last row's logits in *logits, when given); decode step i (ids[i] at position i, with
 * its logits); the untimed warm-up before a context's tests. */
int hx_bm_prefill(struct hx_context *c, const hx_token *ids, int64_t from, int64_t n,
                  struct hx_bm_tally *t, const float **logits);
int hx_bm_step(struct hx_context *c, const hx_token *ids, int64_t i);
int hx_bm_warmup(struct hx_context *c, const hx_token *ids, int64_t max_p, int64_t max_n);
/* Time one test -r times (from a cache of depth tokens) and print its row; 1 on failure. */
int hx_bm_test(const struct hx_bm_combo *cb, struct hx_context *c, int64_t depth,
               int64_t n_prompt, int64_t n_gen, struct hx_bm_check *k, struct hx_bm_out *out);

/* bench-check.c. Step 1, before the context to be timed exists: the policy runs the check's
 * tokens under verify@ref:POLICY in a context of its own, freed before the timed one is made.
 * Returns 1 when out of memory (message printed); the verdicts may say skipped, and why. */
int hx_bm_check_ref(const struct hx_bm_combo *cb, struct hx_bm_check *k);
/* Step 2: the context to be timed, c, runs the same tokens and its logits must match (or c
 * turns out to run a verify policy, its own check); says on stderr which phases go unverified;
 * frees what step 1 kept. 0, or 1 when c failed to run them (message printed). */
int hx_bm_check_timed(const struct hx_bm_combo *cb, struct hx_context *c, struct hx_bm_check *k);
/* The verdict of a row of n_prompt (0: a tg row), and of a verify policy's own timed runs. */
struct hx_bm_verdict *hx_bm_row_verdict(struct hx_bm_check *k, int64_t n_prompt);
void hx_bm_self_verdict(struct hx_bm_verdict *v, const struct hx_run_stats *s0,
                        const struct hx_run_stats *s1);

/* bench-output.c. The test's name as llama-bench prints it: "pp512", "tg128", "tg128 @ d4096". */
const char *hx_bm_test_name(const struct hx_bm_row *r, char *out, size_t cap);
/* Before the first row: the markdown header (with the bandwidth of each thread count), the
 * json array's opening or the csv header line; after the last: its closing or the footnotes. */
void hx_bm_output_begin(const struct hx_bm_opts *o, const struct hx_app_bw *bw);
void hx_bm_output_end(const struct hx_bm_opts *o, const struct hx_bm_out *out);
/* Print one row in the chosen format, and keep what the plot and the footer need of it. */
void hx_bm_emit(const struct hx_bm_opts *o, const struct hx_bm_row *r, struct hx_bm_out *out);

/* bench-plot.c: the chart of every row printed to f (left open: the caller commits the file):
 * one panel per group (model and test), one bar per series. Returns 0. */
int hx_bm_plot(FILE *f, long long reps, const struct hx_bm_out *out);
