/*
 * bench-options.c — the options of `engine bench -m`: usage, parsing (lists, the --policy list
 * whose commas may belong to a policy), defaults, and the checks made before any model is
 * loaded (every backend and policy parses, every model is a file).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench-model.h"
#include "hx-internal.h"

void hx_bm_usage(void)
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
           "      --mem DEV=SIZE,.. memory caps per device, e.g. vulkan=2G,cpu=8G (as engine run;\n"
           "                        a policy whose plan does not fit is an error)\n"
           "      --seed S          seed of the random token ids (default 42)\n"
           "      --progress        weights' loading progress per device on stderr even when it\n"
           "                        is not a terminal (a terminal always gets it)\n"
           "      --no-verify       skip the check of each policy against the ref device (by\n"
           "                        default %d prefill rows and %d decode steps run under\n"
           "                        verify@ref:POLICY before timing; a failed row exits 1)\n"
           "      --plot FILE.svg   also draw tokens/s per test, policy and device as an SVG\n"
           "                        bar chart\n",
           HX_BM_VERIFY_PP, HX_BM_VERIFY_TG);
}

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
                 IS("--fallback", NULL) || IS("--mem", NULL) || IS("--plot", NULL);
    if (IS("--no-verify", NULL)) {
        o->no_verify = true;
        return 0;
    }
    if (IS("--progress", NULL)) {
        o->progress = true;
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
        if ((o->n_threads = hx_app_list_i64(v, 1, HX_MAX_THREADS, o->threads, HX_BM_MAX_LIST)) < 0)
            return hx_bm_bad(a, v);
    } else if (IS("-r", "--repetitions")) {
        if (!hx_app_parse_i64(v, 1, HX_BM_MAX_REPS, &o->reps)) return hx_bm_bad(a, v);
    } else if (IS("--bw-mib", NULL)) {
        if (!hx_app_parse_i64(v, 1, 1 << 20, &o->bw_mib)) return hx_bm_bad(a, v);
    } else if (IS("--bw-gbs", NULL)) {
        if (!hx_app_parse_f32(v, 0.001f, 1e6f, &o->bw_gbs)) return hx_bm_bad(a, v);
    } else if (IS("--fallback", NULL)) {
        o->fallback = v;
    } else if (IS("--mem", NULL)) {
        o->mem = v;
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
    if (hx_mem_validate(o->mem) != HX_OK) {
        hx_app_error("bench", "%s", hx_last_error());
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
            hx_app_progress_note("bench", "skipping policy %s: %s", o->policies[p],
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

int64_t hx_bm_max(const int64_t *v, int n)
{
    int64_t m = 0;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Cache positions the longest test needs: the deepest -d plus the longest -p or -n. */
int64_t hx_bm_ctx_need(const struct hx_bm_opts *o)
{
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    return hx_bm_max(o->n_depth, o->n_n_depth) + (max_p > max_n ? max_p : max_n);
}

int hx_bm_options(int argc, char **argv, struct hx_bm_opts *o)
{
    int rc = hx_bm_parse(argc, argv, o);
    if (!rc) rc = hx_bm_check_policies(o);
    if (!rc) rc = hx_bm_check_models(o);
    if (!rc && o->plot_path && hx_app_outfile_open("bench", o->plot_path, &o->plot)) {
        hx_app_progress_note("bench", "(--plot %s)", o->plot_path);
        rc = 2;
    }
    return rc;
}
