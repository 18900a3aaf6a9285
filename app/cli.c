/* cli.c — parsing of the options shared by the model-running subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "cli.h"

static bool hx_cli_value(const char *cmd, int argc, char **argv, int *i, const char **out)
{
    if (*i + 1 >= argc) {
        hx_app_error(cmd, "option %s needs a value", argv[*i]);
        return false;
    }
    *out = argv[++*i];
    return true;
}

/* Parse v as a whole number in [lo, hi]; else say so, with the range, and return false: "-n 0",
 * "-n 99999999999999999999" and "-n abc" all say what -n takes. */
static bool hx_cli_i64(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
                       int64_t *out)
{
    if (hx_app_parse_i64(v, lo, hi, out)) return true;
    hx_app_error(cmd, "invalid value '%s' for %s (a whole number from %lld to %lld)", v, opt,
                 (long long)lo, (long long)hi);
    return false;
}

static bool hx_cli_f32(const char *cmd, const char *opt, const char *v, float lo, float hi,
                       float *out)
{
    if (hx_app_parse_f32(v, lo, hi, out)) return true;
    hx_app_error(cmd, "invalid value '%s' for %s (a number from %g to %g)", v, opt, (double)lo,
                 (double)hi);
    return false;
}

void hx_cli_deinit(struct hx_cli *o)
{
    free(o->prompt_text);
    o->prompt_text = NULL;
}

/* -f FILE: a prompt of any length (one argument holds at most 128 KiB on Linux), from a file
 * or stdin. The text is a C string from here on, so a NUL byte in it is refused by offset. */
static int hx_cli_read_prompt(const char *cmd, struct hx_cli *o)
{
    if (o->prompt) {
        hx_app_error(cmd, "give either -p TEXT or -f FILE, not both");
        return 2;
    }
    size_t len;
    o->prompt_text = hx_app_read_file(o->prompt_file, &len);
    if (!o->prompt_text) {
        hx_app_error(cmd, "cannot read the prompt from '%s': %s", o->prompt_file, strerror(errno));
        return 1;
    }
    const char *nul = memchr(o->prompt_text, '\0', len);
    if (nul) {
        hx_app_error(cmd, "the prompt '%s' has a NUL byte at offset %zu: not text", o->prompt_file,
                     (size_t)(nul - o->prompt_text));
        hx_cli_deinit(o);
        return 2;
    }
    o->prompt = o->prompt_text;
    return 0;
}

int hx_cli_parse(const char *cmd, int argc, char **argv, struct hx_cli *o)
{
    memset(o, 0, sizeof *o);
    hx_sampler_params_init(&o->sp);
    o->sp.temperature = 0.8f;
    o->n_predict = 128;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t n;
        float f;
#define VAL() if (!hx_cli_value(cmd, argc, argv, &i, &v)) return 2
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "--backend") || !strcmp(a, "-b")) { VAL(); o->backend = v; }
        else if (!strcmp(a, "--policy")) { VAL(); o->policy = v; }
        else if (!strcmp(a, "--fallback")) { VAL(); o->fallback = v; }
        else if (!strcmp(a, "--mem")) { VAL(); o->mem = v; }
        else if (!strcmp(a, "--grammar") && !strcmp(cmd, "run")) { VAL(); o->grammar = v; }
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) &&
                 (!strcmp(cmd, "run") || !strcmp(cmd, "diff"))) { VAL(); o->prompt_file = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); o->chat_template = v; }
        else if (!strcmp(a, "--npu-kernels")) { VAL(); o->npu_kernels = v; }
        else if (!strcmp(a, "--ids")) o->ids = true;
        else if (!strcmp(a, "--progress")) o->progress = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 1, 1 << 24, &n)) return 2;
            o->n_predict = n;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 1, 1 << 24, &n)) return 2;
            o->n_ctx = n;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-ub")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 1, 65536, &n)) return 2;
            o->n_batch = n;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 1, HX_MAX_THREADS, &n)) return 2;
            o->n_threads = (int)n;
        } else if (!strcmp(a, "--temp")) {
            VAL();
            if (!hx_cli_f32(cmd, a, v, 0, 100, &f)) return 2;
            o->sp.temperature = f;
        } else if (!strcmp(a, "--top-k")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 0, 1 << 30, &n)) return 2;
            o->sp.top_k = (int32_t)n;
        } else if (!strcmp(a, "--top-p") || !strcmp(a, "--min-p")) {
            VAL();
            if (!hx_cli_f32(cmd, a, v, 0, 1, &f)) return 2;
            if (a[2] == 't') o->sp.top_p = f;
            else o->sp.min_p = f;
        } else if (!strcmp(a, "--repeat-penalty")) {
            VAL();
            if (!hx_cli_f32(cmd, a, v, 0.01f, 100, &f)) return 2;
            o->sp.repeat_penalty = f;
        } else if (!strcmp(a, "--presence-penalty") || !strcmp(a, "--frequency-penalty")) {
            VAL();
            if (!hx_cli_f32(cmd, a, v, -100, 100, &f)) return 2;
            if (a[2] == 'p') o->sp.presence_penalty = f;
            else o->sp.frequency_penalty = f;
        } else if (!strcmp(a, "--seed")) {
            VAL();
            if (!hx_cli_i64(cmd, a, v, 0, INT64_MAX, &n)) return 2;
            o->sp.seed = (uint64_t)n;
        } else {
            hx_app_error(cmd, "unknown option '%s' (see engine %s --help)", a, cmd);
            return 2;
        }
#undef VAL
    }
    if (!o->model) {
        hx_app_error(cmd, "no model given (-m MODEL.gguf)");
        return 2;
    }
    return o->prompt_file ? hx_cli_read_prompt(cmd, o) : 0;
}

int hx_cli_open(const char *cmd, const struct hx_cli *o, struct hx_model **m, struct hx_context **c)
{
    *m = NULL, *c = NULL;
    if (hx_policy_validate(o->policy, o->backend, o->fallback) != HX_OK ||
        hx_mem_validate(o->mem) != HX_OK) {
        hx_app_error(cmd, "%s", hx_last_error());
        return 2;
    }
    struct stat sb;
    if (stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        hx_app_error(cmd, "'%s' is a directory, not a model file", o->model);
        return 1;
    }
    if (hx_model_load(o->model, NULL, m) != HX_OK) {
        hx_app_error(cmd, "cannot load model: %s", hx_last_error());
        return 1;
    }
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = o->backend, .policy = o->policy,
                                   .fallback = o->fallback, .n_threads = o->n_threads, .n_ctx = o->n_ctx,
                                   .n_batch = o->n_batch, .mem = o->mem,
                                   .npu_kernels = o->npu_kernels};
    struct hx_app_load load; /* progress while the devices get their weights */
    hx_app_load_init(&load, cmd, o->progress);
    hx_app_load_params(&load, &cp);
    if (hx_context_new(*m, &cp, c) != HX_OK) {
        hx_app_error(cmd, "cannot set up devices: %s", hx_last_error());
        hx_model_free(*m);
        *m = NULL;
        return 1;
    }
    return 0;
}
