/* cli.h — the options shared by run, chat, plan, bench and diff: model, devices, policy,
 * context, sampling. hx_cli_parse consumes what it knows and reports the rest. */
#pragma once

#include "hx.h"

struct hx_cli {
    const char *model, *prompt, *backend, *policy, *fallback, *chat_template, *npu_kernels;
    const char *grammar; /* --grammar FILE (run): GBNF, docs/grammar.md */
    const char *prompt_file; /* -f FILE (run, diff): the prompt's text, "-" for stdin */
    char *prompt_text;   /* what -f read (o->prompt points at it); hx_cli_deinit frees it */
    const char *mem;     /* --mem DEV=SIZE[,DEV=SIZE]: memory caps (docs/policies.md) */
    int64_t n_predict, n_ctx, n_batch;
    int n_threads;
    bool ids, verbose;
    bool progress;       /* --progress: weights' loading progress even when stderr is no tty */
    struct hx_sampler_params sp;
};

/* Parse argv[1..]; returns 0 ok, 2 usage error, 1 when -f's file cannot be read (message
 * printed). Unknown flags are errors. hx_cli_deinit frees what it read, whatever it returned. */
int hx_cli_parse(const char *cmd, int argc, char **argv, struct hx_cli *o);
void hx_cli_deinit(struct hx_cli *o);
/* Validate the policy and load the model and a context; 0 ok, 1 failure (message printed). */
int hx_cli_open(const char *cmd, const struct hx_cli *o, struct hx_model **m, struct hx_context **c);
