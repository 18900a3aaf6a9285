/*
 * cmd-bench-model.c — `engine bench -m MODEL ...`: end-to-end prompt-processing (ppN) and
 * generation (tgN) throughput, in the shape of llama-bench's output.
 *
 * Every combination of model × --backend × --policy × -t is one context and yields one row
 * per test: ppN is one prefill of N random (seeded) token ids from an empty cache, tgN is N
 * single-token decodes from an empty cache with the logits of every step computed (so the
 * output head is read each step). With -d D ("pp512 @ d4096", as llama-bench names it) the
 * cache is first filled with D tokens, once and untimed, and every run starts there. Tokenization and sampling are excluded. Before timing, one
 * untimed warm-up run touches every weight, so a cold mmap is never measured. Each test is
 * repeated -r times; rows give median ± sample stddev and the best run.
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
 * fails is printed all the same, flagged, and the exit status is 1. --plot draws the rows as
 * an SVG bar chart, written here without any library.
 *
 * Models and contexts are driven through the public API (include/hx.h) only. The GGUF tensor
 * table (core-private gguf.h) is read separately for the per-token byte count, and
 * scheduler.h supplies just the policy names used to split a --policy list.
 *
 * stdout carries only the table (md) or the records (json, csv); progress goes to stderr.
 * Exit: 0 all rows measured and none failed its check, 1 a model or row failed or a row
 * failed its check (the other rows are still printed), 2 bad usage (caught before any model
 * is loaded, an unwritable --plot path included).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "bench-model.h"
#include "bench-util.h"
#include "gguf.h"
#include "hx.h"
#include "pool.h"
#include "registry.h"
#include "scheduler.h"

#define HX_BM_MAX_LIST 16
#define HX_BM_MAX_REPS 100

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
    uint64_t seed;
    bool mmap;
    bool no_verify;           /* --no-verify: no check against the reference before timing */
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

/* ---- verification of a row ------------------------------------------------------------------ */

/* Before a combo is timed, its policy runs a few tokens under verify@ref:POLICY, which re-runs
 * every op on the reference with the same inputs and compares; then the context that will be
 * timed runs the same tokens, and its logits must match the verified run's. */
#define HX_BM_VERIFY_PP 8   /* prefill rows of the check (fewer if the largest -p is smaller) */
#define HX_BM_VERIFY_TG 2   /* decode steps of the check (fewer if the largest -n is smaller) */
/* Bound on the NMSE between two runs' logits: engine diff's default --logits-nmse. */
#define HX_BM_LOGITS_NMSE 1e-3


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

static void hx_bm_usage(void)
{
    printf("usage: engine bench -m MODEL [-m MODEL2 ...] [options]   (end-to-end pp/tg tokens/s)\n"
           "       engine bench --kernels [options]   (GEMV/GEMM kernels; --kernels --help)\n"
           "options (lists are comma-separated; every combination is one row per test):\n"
           "  -m, --model FILE      model to benchmark (repeat for several)\n"
           "  -b, --backend LIST    devices for the policy, e.g. cpu,ref (default cpu)\n"
           "      --policy LIST     dispatch policies or presets (default single); a comma\n"
           "                        starts a new policy only before a policy name, preset or\n"
           "                        @file, so 'single,op-map:qkv=cpu,default=cpu' is two;\n"
           "                        repeatable;\n"
           "                        'all' = every policy and preset, skipping the ones this build\n"
           "                        or machine cannot run\n"
           "  -p, --n-prompt LIST   prompt lengths for ppN tests (default 512; 0 = none)\n"
           "  -n, --n-gen LIST      generated tokens for tgN tests (default 128; 0 = none)\n"
           "  -d, --n-depth LIST    run each test after this many tokens are in the KV cache\n"
           "                        (prefilled once, untimed), e.g. -d 0,4096,32768 (default 0)\n"
           "  -r, --repetitions N   timed runs per test (default 5)\n"
           "  -t, --threads LIST    CPU threads (default: all cores)\n"
           "  -o, --output FMT      md (default), json or csv\n"
           "      --mmap 0|1        1: map the weights and warm them (default); 0: read them in\n"
           "      --bw-mib N        bandwidth-probe buffer in MiB (default: 8x the LLC, 256 MiB\n"
           "                        to 1 GiB)\n"
           "      --bw-gbs X        skip the probe: take X GB/s as the read bandwidth\n"
           "      --fallback LIST   device fallback chain for failed splits (as engine run)\n"
           "      --seed S          seed of the random token ids (default 42)\n"
           "      --no-verify       skip the check of each policy against the ref device (by\n"
           "                        default %d prefill rows and %d decode steps run under\n"
           "                        verify@ref:POLICY before timing; a failed row exits 1)\n"
           "      --plot FILE.svg   also draw tokens/s per test, policy and device as an SVG\n"
           "                        bar chart\n",
           HX_BM_VERIFY_PP, HX_BM_VERIFY_TG);
}

/* ---- option parsing ------------------------------------------------------------------------ */

/* Does this comma-separated piece begin a new policy (rather than continue an op-map or a
 * device list)? Policy names, presets (all spelled with '_'), @files and "all" do. */
static bool hx_bm_policy_start(const char *piece)
{
    size_t len = strcspn(piece, ","), head = strcspn(piece, ":,");
    bool underscore = memchr(piece, '_', len) != NULL;
    bool args = memchr(piece, '=', len) || memchr(piece, ':', len);
    if (piece[0] == '@' || (underscore && !args)) return true;
    if (head == 3 && !strncmp(piece, "all", 3)) return true;
    for (int k = 0; k < HX_POLICY_KIND_COUNT; k++) {
        const char *name = hx__policy_kind_name((enum hx_policy_kind)k);
        if (strlen(name) == head && !strncmp(piece, name, head)) return true;
    }
    return false;
}

static bool hx_bm_policy_push(struct hx_bm_opts *o, const char *text, size_t len, bool optional)
{
    if (o->n_policies >= 2 * HX_BM_MAX_LIST || len == 0 || len >= sizeof o->policies[0])
        return false;
    snprintf(o->policies[o->n_policies], sizeof o->policies[0], "%.*s", (int)len, text);
    o->policy_optional[o->n_policies++] = optional;
    return true;
}

/* Every policy kind that needs no arguments and every preset: what --policy all means. */
static const char *const hx_bm_all_policies[] = {
    "single", "gemm-offload", "cpu_only", "gpu_only", "npu_only", "layer_by_layer",
    "attention_on_npu", "ffn_on_npu", "qkv_on_npu", "prefill_npu_decode_gpu", "auto", "verify",
};

static bool hx_bm_policies(struct hx_bm_opts *o, const char *v)
{
    const char *start = v;
    for (const char *p = v;; p++) {
        if (*p && !(*p == ',' && hx_bm_policy_start(p + 1))) continue;
        size_t len = (size_t)(p - start);
        if (len == 3 && !strncmp(start, "all", 3)) {
            for (size_t i = 0; i < sizeof hx_bm_all_policies / sizeof *hx_bm_all_policies; i++) {
                const char *name = hx_bm_all_policies[i];
                if (!hx_bm_policy_push(o, name, strlen(name), true)) return false;
            }
        } else if (!hx_bm_policy_push(o, start, len, false)) {
            return false;
        }
        if (!*p) return true;
        start = p + 1;
    }
}

/* -b LIST: appended to the backends of earlier -b options. */
static bool hx_bm_backends(struct hx_bm_opts *o, const char *v)
{
    int n = hx_app_list_str(v, o->backends[o->n_backends], sizeof o->backends[0],
                            HX_BM_MAX_LIST - o->n_backends);
    if (n < 0) return false;
    o->n_backends += n;
    return true;
}

static void hx_bm_defaults(struct hx_bm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->seed = 42;
    o->mmap = true;
}

static void hx_bm_fill_defaults(struct hx_bm_opts *o)
{
    if (!o->n_backends) snprintf(o->backends[0], sizeof o->backends[0], "cpu"), o->n_backends = 1;
    if (!o->n_policies) hx_bm_policy_push(o, "single", 6, false);
    if (!o->n_n_prompt) o->n_prompt[0] = 512, o->n_n_prompt = 1;
    if (!o->n_n_gen) o->n_gen[0] = 128, o->n_n_gen = 1;
    if (!o->n_n_depth) o->n_depth[0] = 0, o->n_n_depth = 1;
    if (!o->n_threads) o->threads[0] = hx__pool_default_threads(), o->n_threads = 1;
}

static int hx_bm_bad(const char *opt, const char *v)
{
    hx_app_error("bench", "invalid value '%s' for %s (see engine bench --help)", v, opt);
    return 2;
}

static bool hx_bm_is(const char *a, const char *name, const char *alias)
{
    return !strcmp(a, name) || (alias && !strcmp(a, alias));
}

/* One option at argv[*i] (its value, if any, at argv[*i + 1]). 0 ok, 2 usage error. */
static int hx_bm_option(struct hx_bm_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    bool has_val = *i + 1 < argc;
    const char *v = has_val ? argv[*i + 1] : NULL;
    int64_t x;
#define IS(s1, s2) hx_bm_is(a, s1, s2)
    bool known = IS("-m", "--model") || IS("-b", "--backend") || IS("--policy", NULL) ||
                 IS("-p", "--n-prompt") || IS("-n", "--n-gen") || IS("-d", "--n-depth") || IS("-r", "--repetitions") ||
                 IS("-t", "--threads") || IS("-o", "--output") || IS("--mmap", NULL) ||
                 IS("--bw-mib", NULL) || IS("--bw-gbs", NULL) || IS("--seed", NULL) ||
                 IS("--fallback", NULL) || IS("--plot", NULL);
    if (IS("--no-verify", NULL)) {
        o->no_verify = true;
        return 0;
    }
    if (!known) {
        hx_app_error("bench", "unknown option '%s' (see engine bench --help)", a);
        return 2;
    }
    if (!has_val) {
        hx_app_error("bench", "option %s needs a value", a);
        return 2;
    }
    ++*i;
    if (IS("-m", "--model")) {
        if (o->n_models >= HX_BM_MAX_LIST) return hx_bm_bad(a, v);
        o->models[o->n_models++] = v;
    } else if (IS("-b", "--backend")) {
        if (!hx_bm_backends(o, v)) return hx_bm_bad(a, v);
    } else if (IS("--policy", NULL)) {
        if (!hx_bm_policies(o, v)) return hx_bm_bad(a, v);
    } else if (IS("-p", "--n-prompt")) {
        if ((o->n_n_prompt = hx_app_list_i64(v, 0, 1 << 20, o->n_prompt, HX_BM_MAX_LIST)) < 0)
            return hx_bm_bad(a, v);
    } else if (IS("-d", "--n-depth")) {
        if ((o->n_n_depth = hx_app_list_i64(v, 0, 1 << 24, o->n_depth, HX_BM_MAX_LIST)) < 0)
            return hx_bm_bad(a, v);
    } else if (IS("-n", "--n-gen")) {
        if ((o->n_n_gen = hx_app_list_i64(v, 0, 1 << 20, o->n_gen, HX_BM_MAX_LIST)) < 0)
            return hx_bm_bad(a, v);
    } else if (IS("-t", "--threads")) {
        if ((o->n_threads = hx_app_list_i64(v, 1, 1024, o->threads, HX_BM_MAX_LIST)) < 0)
            return hx_bm_bad(a, v);
    } else if (IS("-r", "--repetitions")) {
        if (!hx_app_parse_i64(v, 1, HX_BM_MAX_REPS, &o->reps)) return hx_bm_bad(a, v);
    } else if (IS("--bw-mib", NULL)) {
        if (!hx_app_parse_i64(v, 1, 1 << 20, &o->bw_mib)) return hx_bm_bad(a, v);
    } else if (IS("--bw-gbs", NULL)) {
        if (!hx_app_parse_f32(v, 0.001f, 1e6f, &o->bw_gbs)) return hx_bm_bad(a, v);
    } else if (IS("--fallback", NULL)) {
        o->fallback = v;
    } else if (IS("--plot", NULL)) {
        if (!*v) return hx_bm_bad(a, v);
        o->plot_path = v;
    } else if (IS("--seed", NULL)) {
        if (!hx_app_parse_i64(v, 0, INT64_MAX, &x)) return hx_bm_bad(a, v);
        o->seed = (uint64_t)x;
    } else if (IS("--mmap", NULL)) {
        if (!hx_app_parse_i64(v, 0, 1, &x)) return hx_bm_bad(a, v);
        o->mmap = x == 1;
    } else {
        if (!strcmp(v, "md")) o->fmt = HX_BM_MD;
        else if (!strcmp(v, "json")) o->fmt = HX_BM_JSON;
        else if (!strcmp(v, "csv")) o->fmt = HX_BM_CSV;
        else return hx_bm_bad(a, v);
    }
#undef IS
    return 0;
}

static int hx_bm_parse(int argc, char **argv, struct hx_bm_opts *o)
{
    hx_bm_defaults(o);
    for (int i = 1; i < argc; i++) {
        int rc = hx_bm_option(o, argc, argv, &i);
        if (rc) return rc;
    }
    if (!o->n_models) {
        hx_app_error("bench", "no model given (-m MODEL.gguf; --kernels for the kernel benchmark)");
        return 2;
    }
    hx_bm_fill_defaults(o);
    bool any = false;
    for (int i = 0; i < o->n_n_prompt; i++) any |= o->n_prompt[i] > 0;
    for (int i = 0; i < o->n_n_gen; i++) any |= o->n_gen[i] > 0;
    if (!any) {
        hx_app_error("bench", "nothing to measure: every -p and -n is 0");
        return 2;
    }
    return 0;
}

/* Every backend and policy must parse, before any model is loaded. A policy from --policy all
 * is kept if it parses with at least one backend (the others skip it when its rows come). */
static int hx_bm_check_policies(struct hx_bm_opts *o)
{
    if (o->fallback && hx_policy_validate(NULL, NULL, o->fallback) != HX_OK) {
        hx_app_error("bench", "--fallback %s: %s", o->fallback, hx_last_error());
        return 2;
    }
    for (int b = 0; b < o->n_backends; b++)
        if (hx_policy_validate(NULL, o->backends[b], o->fallback) != HX_OK) {
            hx_app_error("bench", "--backend %s: %s", o->backends[b], hx_last_error());
            return 2;
        }
    int kept = 0;
    for (int p = 0; p < o->n_policies; p++) {
        int n_ok = 0;
        for (int b = 0; b < o->n_backends; b++) {
            if (hx_policy_validate(o->policies[p], o->backends[b], o->fallback) == HX_OK) {
                n_ok++;
            } else if (!o->policy_optional[p]) {
                hx_app_error("bench", "--policy %s: %s", o->policies[p], hx_last_error());
                return 2;
            }
        }
        if (!n_ok) {
            fprintf(stderr, "engine bench: skipping policy %s: %s\n", o->policies[p],
                    hx_last_error());
            continue;
        }
        memmove(o->policies[kept], o->policies[p], sizeof o->policies[0]);
        o->policy_optional[kept++] = o->policy_optional[p];
    }
    o->n_policies = kept;
    if (!kept) {
        hx_app_error("bench", "no policy left to run");
        return 2;
    }
    return 0;
}

static int hx_bm_check_models(const struct hx_bm_opts *o)
{
    for (int i = 0; i < o->n_models; i++) {
        struct stat sb;
        if (stat(o->models[i], &sb) != 0) {
            hx_app_error("bench", "cannot open model '%s': no such file", o->models[i]);
            return 1;
        }
        if (!S_ISREG(sb.st_mode)) {
            hx_app_error("bench", "'%s' is %s, not a model file", o->models[i],
                         S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
            return 1;
        }
    }
    return 0;
}

/* ---- the model's weights --------------------------------------------------------------------- */

/* Bytes one generated token reads: every tensor once, except that the token embedding costs one
 * row, unless there is no output.weight and the embedding is also the head (then all of it). */
static int hx_bm_weights_scan(const char *path, struct hx_bm_weights *w)
{
    struct hx_gguf *g;
    memset(w, 0, sizeof *w);
    if (hx__gguf_open(path, false, &g) != HX_OK) return 1;
    bool tied = !hx__gguf_find_tensor(g, "output.weight");
    int64_t elems[64] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        size_t row = t->nbytes / (size_t)(t->ne[1] > 0 ? t->ne[1] : 1);
        bool embd = !strcmp(t->name, "token_embd.weight");
        w->bytes_per_token += !embd ? t->nbytes : tied ? t->nbytes + row : row;
        if (!strncmp(t->name, "blk.", 4) && t->n_dims >= 2 && t->ggml_type < 64)
            elems[t->ggml_type] += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    int best = 0;
    for (int i = 1; i < 64; i++) best = elems[i] > elems[best] ? i : best;
    const char *name = hx__ggml_type_name((uint32_t)best);
    snprintf(w->type, sizeof w->type, "%s", elems[best] && name ? name : "?");
    hx__gguf_close(g);
    return 0;
}

static void hx_bm_label(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf")) len -= 5;
    snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), base);
}

/* Fixed-seed token ids in [0, n_vocab) (xorshift64*): valid, and the same every run. */
static void hx_bm_random_ids(hx_token *ids, int64_t n, int64_t n_vocab, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        ids[i] = (hx_token)((s * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)n_vocab);
    }
}

static int hx_bm_model_open(struct hx_bm_model *bm, const char *path, const struct hx_bm_opts *o,
                            int64_t n_ids)
{
    memset(bm, 0, sizeof *bm);
    bm->path = path;
    hx_bm_label(path, bm->label, sizeof bm->label);
    struct hx_model_params mp = {.struct_size = sizeof mp, .no_mmap = !o->mmap};
    if (hx_model_load(path, &mp, &bm->m) != HX_OK) {
        hx_app_error("bench", "cannot load model '%s': %s", path, hx_last_error());
        return 1;
    }
    bm->info.struct_size = sizeof bm->info;
    hx_model_get_info(bm->m, &bm->info);
    if (hx_bm_weights_scan(path, &bm->w) != 0) {
        hx_app_error("bench", "cannot read the tensor table of '%s': %s", path, hx_last_error());
        return 1;
    }
    bm->ids = hx_malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *bm->ids);
    if (!bm->ids) {
        hx_app_error("bench", "out of memory");
        return 1;
    }
    if (bm->info.n_vocab <= 0) {
        hx_app_error("bench", "'%s' has no vocabulary to draw token ids from", path);
        return 1;
    }
    hx_bm_random_ids(bm->ids, n_ids, bm->info.n_vocab, o->seed);
    return 0;
}

static void hx_bm_model_close(struct hx_bm_model *bm)
{
    hx_free(bm->ids);
    hx_model_free(bm->m);
    bm->ids = NULL, bm->m = NULL;
}

/* ---- running the tests ----------------------------------------------------------------------- */

#define HX_BM_BATCH 512

struct hx_bm_tally_ctx {
    struct hx_context *c;
    struct hx_bm_tally *t;
};

/* Add the last batch's scheduler counters to t (NULL: not counting). Inside the timed span, but
 * it is a copy of a few counters: nanoseconds against the microseconds of a decode. */
static void hx_bm_tally_add(struct hx_context *c, struct hx_bm_tally *t)
{
    struct hx_run_stats rs = {.struct_size = sizeof rs};
    if (!t || hx_context_stats(c, &rs) != HX_OK) return;
    t->batches++;
    t->splits += rs.n_splits;
    t->fallback_ops += rs.n_fallback_ops;
    t->bytes_moved += (double)rs.bytes_moved;
}

static void hx_bm_tally_batch(void *user, int64_t n_fed)
{
    (void)n_fed;
    struct hx_bm_tally_ctx *tc = user;
    hx_bm_tally_add(tc->c, tc->t);
}

/* Prefill ids[from..from + n) at positions from.. in batches of the context's n_batch; logits
 * of the last row only (in *logits when not NULL). */
static int hx_bm_prefill(struct hx_context *c, const hx_token *ids, int64_t from, int64_t n,
                         struct hx_bm_tally *t, const float **logits)
{
    struct hx_bm_tally_ctx tc = {c, t};
    return hx_app_prefill(c, ids + from, n, (int32_t)from, 0, t ? hx_bm_tally_batch : NULL, &tc,
                          logits);
}

/* Decode step i: token ids[i] at position i, with its logits (the head is computed). */
static int hx_bm_step(struct hx_context *c, const hx_token *ids, int64_t i)
{
    int32_t pos = (int32_t)i, seq = 0;
    int8_t lg = 1;
    struct hx_batch b = {.n_rows = 1, .token = ids + i, .pos = &pos, .seq = &seq, .logits = &lg};
    return hx_decode(c, &b);
}

/* n single-token decodes from position from. */
static int hx_bm_generate(struct hx_context *c, const hx_token *ids, int64_t from, int64_t n,
                          struct hx_bm_tally *t)
{
    for (int64_t i = from; i < from + n; i++) {
        int st = hx_bm_step(c, ids, i);
        if (st) return st;
        hx_bm_tally_add(c, t);
    }
    return HX_OK;
}

/* One timed run of a test from a cache of depth tokens (ids[0..depth) are in it already):
 * nanoseconds in *ns. */
static int hx_bm_run_once(struct hx_context *c, const hx_token *ids, int64_t depth,
                          int64_t n_prompt, int64_t n_gen, double *ns, struct hx_bm_tally *t)
{
    int st = hx_kv_truncate(c, 0, (int32_t)depth);
    if (st) return st;
    double t0 = hx_app_now_us();
    st = n_prompt ? hx_bm_prefill(c, ids, depth, n_prompt, t, NULL)
                  : hx_bm_generate(c, ids, depth, n_gen, t);
    *ns = (hx_app_now_us() - t0) * 1e3;
    return st;
}

/* The untimed warm-up: one prefill (if any pp test) and a few decodes (if any tg test) read
 * every weight the timed runs will read, through the same mapping. */
static int hx_bm_warmup(struct hx_context *c, const hx_token *ids, int64_t max_p, int64_t max_n)
{
    double ns;
    int st = HX_OK;
    if (max_p)
        st = hx_bm_run_once(c, ids, 0, max_p < HX_BM_BATCH ? max_p : HX_BM_BATCH, 0, &ns, NULL);
    if (!st && max_n) st = hx_bm_run_once(c, ids, 0, 0, max_n < 4 ? max_n : 4, &ns, NULL);
    return st;
}

static int64_t hx_bm_max(const int64_t *v, int n)
{
    int64_t m = 0;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Cache positions the longest test needs: the deepest -d plus the longest -p or -n. */
static int64_t hx_bm_ctx_need(const struct hx_bm_opts *o)
{
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    return hx_bm_max(o->n_depth, o->n_n_depth) + (max_p > max_n ? max_p : max_n);
}

/* ---- output ---------------------------------------------------------------------------------- */

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
        const struct hx_backend_entry *e = hx_backend_find(t);
        struct hx_device_info info = {.struct_size = sizeof info};
        if (!e || e->ops->device_info(idx, &info) != HX_OK || !info.unified_memory) return false;
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
static const char *hx_bm_test_name(const struct hx_bm_row *r, char *out, size_t cap)
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
static void hx_bm_emit(const struct hx_bm_opts *o, const struct hx_bm_row *r, struct hx_bm_out *out)
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

/* ---- one context: all tests of a model × backend × policy × threads ------------------------- */

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

static const char *const hx_bm_phase_name[] = {"prefill", "decode"};

/* "prefill of 8 rows", "2 decode steps": what phase ph of the check ran. */
static const char *hx_bm_check_what(const struct hx_bm_check *k, int ph)
{
    static char s[48];
    snprintf(s, sizeof s, ph ? "%lld decode step%s" : "prefill of %lld row%s", (long long)k->n[ph],
             k->n[ph] == 1 ? "" : "s");
    return s;
}

static double hx_bm_nmse(const float *x, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return INFINITY;
        double e = (double)x[i] - ref[i];
        num += e * e, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Run phase ph of the check from an empty cache: n prefill rows or n decode steps. With
 * save, the logits go to out (row by row); else they are compared with out, and *nmse gets
 * the worst NMSE. */
static int hx_bm_check_tokens(struct hx_context *c, const struct hx_bm_model *m, int ph, int64_t n,
                              float *out, bool save, double *nmse)
{
    size_t nv = (size_t)m->info.n_vocab;
    int st = hx_kv_truncate(c, 0, 0);
    for (int64_t i = 0; st == HX_OK && i < (ph ? n : 1); i++) {
        const float *l = NULL;
        st = ph ? hx_bm_step(c, m->ids, i) : hx_bm_prefill(c, m->ids, 0, n, NULL, &l);
        if (st == HX_OK && ph && !(l = hx_get_logits(c, -1))) st = HX_E_INTERNAL;
        if (st) break;
        if (save) memcpy(out + i * nv, l, nv * sizeof *l);
        else *nmse = fmax(*nmse, hx_bm_nmse(l, out + i * nv, (int64_t)nv));
    }
    return st;
}

static bool hx_bm_is_verify(const char *policy)
{
    return !strncmp(policy, "verify", 6) && (!policy[6] || strchr(":@", policy[6]));
}

static void hx_bm_vnote(struct hx_bm_verdict *v, enum hx_bm_vstate state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void hx_bm_vnote(struct hx_bm_verdict *v, enum hx_bm_vstate state, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    v->state = state;
    vsnprintf(v->note, sizeof v->note, fmt, ap);
    va_end(ap);
}

/* What the check will run, and each phase's verdict before it has run. */
static int hx_bm_check_init(const struct hx_bm_combo *cb, struct hx_bm_check *k)
{
    const struct hx_bm_opts *o = cb->o;
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    memset(k, 0, sizeof *k);
    k->n[0] = max_p < HX_BM_VERIFY_PP ? max_p : HX_BM_VERIFY_PP;
    k->n[1] = max_n < HX_BM_VERIFY_TG ? max_n : HX_BM_VERIFY_TG;
    for (int ph = 0; ph < 2; ph++) {
        k->vd[ph].logits_nmse = -1;
        if (o->no_verify) hx_bm_vnote(&k->vd[ph], HX_BM_V_OFF, "--no-verify");
        else if (hx_bm_is_verify(cb->policy)) k->vd[ph].self = true;
        else if (cb->policy[0] == '@')
            hx_bm_vnote(&k->vd[ph], HX_BM_V_SKIPPED,
                        "an @FILE policy cannot be wrapped in verify@%s:...; give the policy "
                        "itself to have it checked", HX_BM_VERIFY_REF);
    }
    if (o->no_verify || k->vd[0].self || k->vd[0].state == HX_BM_V_SKIPPED) return 0;
    k->logits = hx_malloc((size_t)(1 + k->n[1]) * (size_t)cb->model->info.n_vocab * sizeof(float));
    if (!k->logits) return hx_app_error("bench", "out of memory"), 1;
    return 0;
}

/* Step 1: the policy under verify@ref, in a context of its own that is freed before the timed
 * one is made (so the weights are never prepared twice at once). Leaves each checked phase
 * YES or FAIL on the op checks, and the logits for step 2. */
static void hx_bm_check_ref(const struct hx_bm_combo *cb, struct hx_bm_check *k)
{
    char pol[320];
    snprintf(pol, sizeof pol, "verify@%s:%s", HX_BM_VERIFY_REF, cb->policy);
    int64_t n_max = k->n[0] > k->n[1] ? k->n[0] : k->n[1];
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = cb->backend,
                                   .policy = pol, .fallback = cb->o->fallback,
                                   .n_threads = (int)cb->n_threads, .n_ctx = n_max,
                                   .n_batch = k->n[0] > 1 ? k->n[0] : 1};
    struct hx_context *vc = NULL;
    if (hx_context_new(cb->model->m, &cp, &vc) != HX_OK) {
        for (int ph = 0; ph < 2; ph++)
            hx_bm_vnote(&k->vd[ph], HX_BM_V_SKIPPED, "cannot make a %s context: %s", pol,
                        hx_last_error());
        return;
    }
    fprintf(stderr, "engine bench: %s %s/%s t=%lld: verify (%lld prefill rows, %lld decode "
            "steps against %s)\n", cb->model->label, cb->backend, cb->policy,
            (long long)cb->n_threads, (long long)k->n[0], (long long)k->n[1], HX_BM_VERIFY_REF);
    size_t nv = (size_t)cb->model->info.n_vocab;
    for (int ph = 0; ph < 2; ph++) {
        struct hx_bm_verdict *v = &k->vd[ph];
        if (!k->n[ph]) continue;
        struct hx_run_stats s0 = {.struct_size = sizeof s0}, s1 = s0;
        hx_context_stats(vc, &s0);
        int st = hx_bm_check_tokens(vc, cb->model, ph, k->n[ph], k->logits + (ph ? nv : 0), true,
                                    NULL);
        hx_context_stats(vc, &s1);
        v->checks = s1.verify_checks - s0.verify_checks;
        v->failed = s1.verify_failed - s0.verify_failed;
        if (st)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "the %s check could not run: %s",
                        hx_bm_phase_name[ph], hx_last_error());
        else if (v->failed)   /* checks made before any failure of the reference count */
            hx_bm_vnote(v, HX_BM_V_FAIL, "%s: %lld of %lld op checks against %s over their "
                        "NMSE threshold (see the 'verify: first divergent op' log line)",
                        hx_bm_check_what(k, ph), (long long)v->failed, (long long)v->checks,
                        HX_BM_VERIFY_REF);
        else if (s1.verify_ref_failed)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "the reference %s failed, so checking stopped",
                        HX_BM_VERIFY_REF);
        else if (!v->checks)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "verify checked no op");
        else
            v->state = HX_BM_V_YES;
    }
    hx_context_free(vc);
}

/* Step 2: the context to be timed runs the same tokens (its first run), and its logits must
 * be the verified run's. A decode error here is the row's error. */
static int hx_bm_check_timed(const struct hx_bm_combo *cb, struct hx_context *c,
                             struct hx_bm_check *k)
{
    size_t nv = (size_t)cb->model->info.n_vocab;
    for (int ph = 0; ph < 2; ph++) {
        struct hx_bm_verdict *v = &k->vd[ph];
        if (!k->n[ph] || (v->state != HX_BM_V_YES && v->state != HX_BM_V_FAIL)) continue;
        double nmse = 0;
        int st = hx_bm_check_tokens(c, cb->model, ph, k->n[ph], k->logits + (ph ? nv : 0), false,
                                    &nmse);
        if (st) return st;
        v->logits_nmse = nmse;
        if (v->state == HX_BM_V_YES && !(nmse <= HX_BM_LOGITS_NMSE))
            hx_bm_vnote(v, HX_BM_V_FAIL, "%s: the timed context's logits differ from the "
                        "verified run's, NMSE %.3g > %.0e", hx_bm_check_what(k, ph), nmse,
                        HX_BM_LOGITS_NMSE);
        else if (v->state == HX_BM_V_YES)
            snprintf(v->note, sizeof v->note, "%s: %lld op checks against %s within their "
                     "thresholds; logits NMSE %.3g against the verified run",
                     hx_bm_check_what(k, ph), (long long)v->checks, HX_BM_VERIFY_REF, nmse);
    }
    return HX_OK;
}

/* The verdict of a row: pp rows are prefill batches, except pp1, which is a one-row batch and
 * so runs the decode plan. */
static struct hx_bm_verdict *hx_bm_row_verdict(struct hx_bm_check *k, int64_t n_prompt)
{
    return &k->vd[!n_prompt || (n_prompt == 1 && k->n[1]) ? 1 : 0];
}

static void hx_bm_stats(struct hx_bm_row *r, const double *ns, int reps, int64_t tokens)
{
    double ts[HX_BM_MAX_REPS];
    for (int i = 0; i < reps; i++) ts[i] = (double)tokens * 1e9 / ns[i];
    r->n_reps = reps;
    r->samples_ns = ns;
    r->avg_ts = hx_app_mean(ts, (size_t)reps);
    r->stddev_ts = hx_app_stddev(ts, (size_t)reps);
    r->median_ts = hx_app_median(ts, (size_t)reps);
    r->best_ts = hx_app_max(ts, (size_t)reps);
}

static void hx_bm_moves(struct hx_bm_row *r, const struct hx_bm_tally *t, int reps, int64_t tokens)
{
    double b = t->batches > 0 ? (double)t->batches : 1, n = (double)reps * (double)tokens;
    r->batches = (double)t->batches / reps;
    r->splits_per_batch = (double)t->splits / b;
    r->splits_per_token = (double)t->splits / n;
    r->bytes_moved_per_token = t->bytes_moved / n;
    r->fallback_ops_per_batch = (double)t->fallback_ops / b;
}

/* A verify policy checks its own timed runs: the row's verdict is what they found. */
static void hx_bm_self_verdict(struct hx_bm_verdict *v, const struct hx_run_stats *s0,
                               const struct hx_run_stats *s1)
{
    v->checks = s1->verify_checks - s0->verify_checks;
    v->failed = s1->verify_failed - s0->verify_failed;
    v->logits_nmse = -1;
    if (!s1->verify)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy does not verify");
    else if (s1->verify_ref_failed && !v->failed)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy's reference failed, so checking stopped");
    else if (!v->checks)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy's verify checked no op");
    else
        hx_bm_vnote(v, v->failed ? HX_BM_V_FAIL : HX_BM_V_YES,
                    "the policy verifies itself: %lld of %lld op checks of the timed runs over "
                    "their NMSE threshold", (long long)v->failed, (long long)v->checks);
}

/* Time one test -r times and print its row. With a depth, the cache is first filled with that
 * many tokens (once, untimed) and each run starts from there. */
static int hx_bm_test(const struct hx_bm_combo *cb, struct hx_context *c, int64_t depth,
                      int64_t n_prompt, int64_t n_gen, struct hx_bm_check *k,
                      struct hx_bm_out *out)
{
    const struct hx_bm_opts *o = cb->o;
    double ns[HX_BM_MAX_REPS];
    int64_t tokens = n_prompt ? n_prompt : n_gen;
    struct hx_bm_row r = {.model = cb->model, .backend = cb->backend, .policy = cb->policy,
                          .bw = cb->bw, .n_threads = cb->n_threads, .n_prompt = n_prompt,
                          .n_gen = n_gen, .n_depth = depth, .mmap = o->mmap};
    char tn[64];
    hx_bm_test_name(&r, tn, sizeof tn);
    struct hx_bm_tally tally = {0};
    int st = HX_OK;
    if (depth) {
        fprintf(stderr, "engine bench: %s %s/%s t=%lld: %s: filling the cache to depth %lld\n",
                cb->model->label, cb->backend, cb->policy, (long long)cb->n_threads, tn,
                (long long)depth);
        if ((st = hx_kv_truncate(c, 0, 0)) == HX_OK)
            st = hx_bm_prefill(c, cb->model->ids, 0, depth, NULL, NULL);
    }
    struct hx_run_stats s0 = {.struct_size = sizeof s0}, s1 = s0;
    hx_context_stats(c, &s0);
    struct hx_app_load_mark m0, m1;
    hx_app_load_mark(&m0);
    for (int i = 0; i < o->reps && st == HX_OK; i++) {
        fprintf(stderr, "engine bench: %s %s/%s t=%lld: %s run %d/%lld\n", cb->model->label,
                cb->backend, cb->policy, (long long)cb->n_threads, tn, i + 1, (long long)o->reps);
        st = hx_bm_run_once(c, cb->model->ids, depth, n_prompt, n_gen, &ns[i], &tally);
    }
    if (st != HX_OK) {
        hx_app_error("bench", "%s %s/%s %s: %s", cb->model->label, cb->backend, cb->policy, tn,
                     hx_last_error());
        return 1;
    }
    hx_app_load_mark(&m1);
    hx_context_stats(c, &s1);
    struct hx_bm_verdict *v = hx_bm_row_verdict(k, n_prompt), self = *v;
    if (v->self) hx_bm_self_verdict(v = &self, &s0, &s1);
    r.devices = hx_context_devices(c);
    r.other_cores = hx_app_other_cores(&m0, &m1);
    r.verdict = v;
    hx_bm_stats(&r, ns, (int)o->reps, tokens);
    hx_bm_moves(&r, &tally, (int)o->reps, tokens);
    /* A row that failed its check is timed and printed all the same, flagged; out->any_failed
     * makes the exit status 1 at the end. */
    if (v->state == HX_BM_V_FAIL)
        hx_app_error("bench", "%s %s/%s %s failed verification: %s", cb->model->label,
                     cb->backend, cb->policy, tn, v->note);
    hx_bm_emit(o, &r, out);
    return 0;
}

static int hx_bm_combo_run(const struct hx_bm_combo *cb, struct hx_bm_out *out)
{
    const struct hx_bm_opts *o = cb->o;
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    if (cb->optional && hx_policy_validate(cb->policy, cb->backend, o->fallback) != HX_OK) {
        fprintf(stderr, "engine bench: skipping policy %s on %s: %s\n", cb->policy, cb->backend,
                hx_last_error());
        return 0;
    }
    struct hx_bm_check k;
    if (hx_bm_check_init(cb, &k)) return 1;
    if (k.logits) hx_bm_check_ref(cb, &k);
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = cb->backend,
                                   .policy = cb->policy, .fallback = o->fallback,
                                   .n_threads = (int)cb->n_threads,
                                   .n_ctx = hx_bm_ctx_need(o), .n_batch = HX_BM_BATCH};
    struct hx_context *c;
    if (hx_context_new(cb->model->m, &cp, &c) != HX_OK) {
        hx_free(k.logits);
        if (cb->optional) {
            fprintf(stderr, "engine bench: skipping policy %s on %s: %s\n", cb->policy, cb->backend,
                    hx_last_error());
            return 0;
        }
        hx_app_error("bench", "%s on %s with policy %s: %s", cb->model->label, cb->backend,
                     cb->policy, hx_last_error());
        return 1;
    }
    /* An @FILE policy may hold a verify policy: the context knows. */
    struct hx_run_stats rs = {.struct_size = sizeof rs};
    if (!o->no_verify && cb->policy[0] == '@' && hx_context_stats(c, &rs) == HX_OK && rs.verify)
        k.vd[0].self = k.vd[1].self = true;
    int rc = 0;
    if (k.logits && hx_bm_check_timed(cb, c, &k) != HX_OK) {
        hx_app_error("bench", "%s %s/%s check run: %s", cb->model->label, cb->backend,
                     cb->policy, hx_last_error());
        rc = 1;
    }
    for (int ph = 0; ph < 2 && !rc; ph++)
        if (k.n[ph] && k.vd[ph].state == HX_BM_V_SKIPPED && !k.vd[ph].self)
            fprintf(stderr, "engine bench: %s %s/%s: %s not verified: %s\n", cb->model->label,
                    cb->backend, cb->policy, hx_bm_phase_name[ph], k.vd[ph].note);
    hx_free(k.logits);
    fprintf(stderr, "engine bench: %s %s/%s t=%lld: warm-up\n", cb->model->label, cb->backend,
            cb->policy, (long long)cb->n_threads);
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
        fprintf(stderr, "engine bench: measuring read bandwidth with %lld thread%s\n",
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
    fprintf(stderr, "engine bench: loading %s\n", path);
    int64_t need = hx_bm_ctx_need(o);
    int rc = hx_bm_model_open(&bm, path, o, need);
    bool opened = rc == 0;
    if (opened && bm.info.n_ctx_train > 0 && need > bm.info.n_ctx_train)
        fprintf(stderr, "engine bench: note: %s was trained on a context of %lld tokens; these "
                        "tests reach position %lld (-d + -p/-n), beyond it: the speed is "
                        "measured all the same, the model's output there means little\n",
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
    int rc = hx_bm_parse(argc, argv, &o);
    if (!rc) rc = hx_bm_check_policies(&o);
    if (!rc) rc = hx_bm_check_models(&o);
    if (!rc && o.plot_path && hx_app_outfile_open("bench", o.plot_path, &o.plot)) {
        fprintf(stderr, "engine bench: (--plot %s)\n", o.plot_path);
        rc = 2;
    }
    struct hx_app_bw bw[HX_BM_MAX_LIST];
    if (!rc) rc = hx_bm_probe_all(&o, bw);
    if (rc) {
        if (o.plot.f) hx_app_outfile_abort(&o.plot);
        return rc;
    }
    if (o.fmt == HX_BM_MD) hx_bm_md_header(&o, bw);
    else if (o.fmt == HX_BM_JSON) printf("[\n");
    else hx_bm_csv_header();
    struct hx_bm_out out = {0};
    for (int i = 0; i < o.n_models; i++) rc |= hx_bm_model_rows(&o, o.models[i], bw, &out);
    if (o.fmt == HX_BM_JSON) printf("%s]\n", out.n_rows ? "\n" : "");
    if (o.fmt == HX_BM_MD) hx_bm_md_footer(&o, &out);
    if (o.plot.f) {
        rc |= hx_bm_plot(o.plot.f, (long long)o.reps, &out);
        int prc = hx_app_outfile_commit("bench", &o.plot);
        if (!prc) fprintf(stderr, "engine bench: plot written to %s\n", o.plot_path);
        rc |= prc;
    }
    free(out.bars);
    return rc || out.any_failed ? 1 : 0;
}
