/*
 * cmd-run.c — `engine run -m M -p TEXT [-n N] [--backend B] [--policy P] [sampling...]`:
 * prefill the prompt (BOS when the vocabulary asks), then sample and stream each piece to
 * stdout as it is produced (UTF-8 safe); timings on stderr. --ids prints the generated ids.
 * --grammar FILE constrains sampling (core/grammar.c): generation ends when the grammar's
 * sentence is whole and nothing may follow, and -n is the budget it closes within.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "cli.h"

static void hx_run_usage(void)
{
    printf("usage: engine run -m MODEL -p TEXT | -f FILE [-n N] [--backend B] [--policy P]\n"
           "       [--fallback L] [-t THREADS] [-c N_CTX] [--batch N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
           "       [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F] [--seed S] [--ids]\n"
           "       [--grammar FILE]   (GBNF, docs/grammar.md: only text the grammar allows)\n"
           "       [--mem DEV=SIZE,...] [--progress]   (memory caps; loading progress on stderr\n"
           "       even when it is not a terminal: docs/policies.md \"Memory\")\n"
           "-f FILE reads the prompt from a file, '-f -' from stdin (a prompt of any length).\n");
}

int hx_cmd_run(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return hx_run_usage(), 0;
    struct hx_cli o;
    int rc = hx_cli_parse("run", argc, argv, &o);
    if (rc) return rc;
    if (!o.prompt) {
        hx_app_error("run", "no prompt given (-p TEXT or -f FILE)");
        return 2;
    }
    struct hx_model *m;
    struct hx_context *c;
    if ((rc = hx_cli_open("run", &o, &m, &c))) return hx_cli_deinit(&o), rc;
    if (hx_vocab_n_eog(m) == 0)
        fprintf(stderr, "engine run: note: the vocabulary has no end-of-generation token; "
                        "generation stops after -n %lld tokens\n", (long long)o.n_predict);
    hx_token *ids = NULL, *out = NULL;
    struct hx_sampler *s = NULL;
    struct hx_detok *dt = NULL;
    struct hx_grammar *gr = NULL;
    int64_t n = 0, n_out = 0;
    out = hx_malloc((size_t)o.n_predict * sizeof *out);
    rc = 1;
    if (!out) goto done;
    if (hx_app_tokenize(m, o.prompt, strlen(o.prompt), true, &ids, &n) != HX_OK) {
        hx_app_error("run", "tokenize: %s", hx_last_error());
        goto done;
    }
    if (n == 0) {
        hx_app_error("run", "the prompt is empty after tokenization and the vocabulary adds no BOS");
        goto done;
    }
    int64_t n_ctx = hx_context_n_ctx(c);
    if (n > n_ctx) {
        hx_app_error("run", "the prompt is %lld tokens, longer than the context of %lld (-c N "
                            "raises it, up to what memory allows)", (long long)n, (long long)n_ctx);
        goto done;
    }
    /* The last sampled token is never fed back, so a full context still yields one more. */
    if (n + o.n_predict - 1 > n_ctx) {
        fprintf(stderr, "engine run: note: prompt %lld tokens + -n %lld exceeds the context of "
                        "%lld; generating at most %lld tokens\n", (long long)n,
                (long long)o.n_predict, (long long)n_ctx, (long long)(n_ctx - n + 1));
        o.n_predict = n_ctx - n + 1;
    }
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(m, &mi);
    if (hx_sampler_new(&o.sp, mi.n_vocab, &s) != HX_OK || hx_detok_new(m, false, &dt) != HX_OK) {
        hx_app_error("run", "%s", hx_last_error());
        goto done;
    }
    if (o.grammar) {
        size_t glen;
        char *text = hx_app_read_file(o.grammar, &glen);
        if (!text) {
            hx_app_error("run", "cannot read the grammar %s: %s", o.grammar, strerror(errno));
            goto done;
        }
        int grc = hx_grammar_new(m, text, glen, &gr);
        free(text);
        if (grc != HX_OK) {
            hx_app_error("run", "%s: %s", o.grammar, hx_last_error());
            goto done;
        }
    }
    for (int64_t i = 0; i < n; i++) hx_sampler_accept(s, ids[i]);
    double t0 = hx_app_now_us() * 1e-6, t1, t2;
    const float *logits = NULL;
    double t_grammar = 0; /* seconds in constrained sampling and matching */
    if (hx_app_prefill(c, ids, n, 0, 0, NULL, NULL, &logits) != HX_OK) {
        hx_app_error("run", "prefill: %s", hx_last_error());
        goto done;
    }
    t1 = hx_app_now_us() * 1e-6;
    /* Devices per phase: a phase-split policy prefills on one device and decodes on another. */
    char dev_pre[256] = "", dev_dec[256] = "";
    hx_app_devices_add(n > 1 ? dev_pre : dev_dec, sizeof dev_pre, hx_context_devices(c));
    for (n_out = 0; n_out < o.n_predict; n_out++) {
        if (hx_app_logits_check(logits, mi.n_vocab) != HX_OK) {
            hx_app_error("run", "%s: %s", n_out ? "decode" : "prefill", hx_last_error());
            goto done;
        }
        double g0 = gr ? hx_app_now_us() * 1e-6 : 0;
        hx_token t = gr ? hx_sampler_sample_grammar(s, gr, logits, o.n_predict - n_out)
                        : hx_sampler_sample(s, logits);
        if (gr && t != HX_TOKEN_NULL) hx_grammar_accept(gr, t);
        if (gr) t_grammar += hx_app_now_us() * 1e-6 - g0;
        if (t == HX_TOKEN_NULL || hx_vocab_is_eog(m, t)) break;
        out[n_out] = t;
        hx_sampler_accept(s, t);
        if (!o.ids) {
            const char *piece;
            size_t len;
            if (hx_detok_push(dt, t, &piece, &len) == HX_OK && len) fwrite(piece, 1, len, stdout), fflush(stdout);
            if (ferror(stdout)) { /* no one can read the rest: stop generating it */
                hx_app_error("run", "cannot write the output to stdout: %s", strerror(errno));
                goto done;
            }
        }
        if (n_out + 1 == o.n_predict || (gr && hx_grammar_done(gr))) {
            n_out++;
            break;
        }
        int32_t pos = (int32_t)(n + n_out), sq = 0;
        int8_t lg = 1;
        struct hx_batch b = {.n_rows = 1, .token = &t, .pos = &pos, .seq = &sq, .logits = &lg};
        if (hx_decode(c, &b) != HX_OK) {
            hx_app_error("run", "decode: %s", hx_last_error());
            goto done;
        }
        hx_app_devices_add(dev_dec, sizeof dev_dec, hx_context_devices(c));
        if (!(logits = hx_get_logits(c, -1))) {
            hx_app_error("run", "decode: %s", hx_last_error());
            goto done;
        }
    }
    t2 = hx_app_now_us() * 1e-6;
    if (o.ids) {
        for (int64_t i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
    } else {
        const char *piece;
        size_t len;
        if (hx_detok_flush(dt, &piece, &len) == HX_OK && len) fwrite(piece, 1, len, stdout);
    }
    printf("\n");
    /* the text ends before the figures on stderr, also through one pipe */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        hx_app_error("run", "cannot write the output to stdout: %s", strerror(errno));
        goto done;
    }
    char devs[600];
    if (!dev_dec[0] || !dev_pre[0] || !strcmp(dev_pre, dev_dec))
        snprintf(devs, sizeof devs, "%s", dev_pre[0] ? dev_pre : dev_dec);
    else
        snprintf(devs, sizeof devs, "%s (prefill), %s (decode)", dev_pre, dev_dec);
    fprintf(stderr, "prompt: %lld tokens in %.3f s (%.2f tokens/s); generation: %lld tokens in %.3f s (%.2f tokens/s); devices %s; policy %s\n",
            (long long)n, t1 - t0, n / (t1 - t0), (long long)n_out, t2 - t1,
            n_out > 1 ? (n_out - 1) / (t2 - t1) : 0.0, devs, hx_context_policy(c));
    if (gr)
        fprintf(stderr, "grammar: %.1f ms choosing and matching %lld tokens (%.2f ms/token, %.1f%% of the generation time)\n",
                t_grammar * 1e3, (long long)n_out, n_out ? t_grammar * 1e3 / (double)n_out : 0.0,
                t2 > t1 ? 100.0 * t_grammar / (t2 - t1) : 0.0);
    rc = 0;
done:
    hx_grammar_free(gr);
    hx_detok_free(dt);
    hx_sampler_free(s);
    hx_free(ids);
    hx_free(out);
    hx_context_free(c);
    hx_model_free(m);
    hx_cli_deinit(&o);
    return rc;
}
