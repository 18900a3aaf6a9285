/*
 * cmd-chat.c — `engine chat -m M`: interactive multi-turn chat. Each turn renders the whole
 * conversation with the chat template, reuses the KV cache for the prefix already processed
 * (only the new tokens are prefilled), and streams the answer. Ctrl-C stops the current answer
 * (not the program); EOF (Ctrl-D) ends the session.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "cli.h"

static volatile sig_atomic_t hx_chat_interrupted;
static struct hx_context *hx_chat_ctx;

static void hx_chat_on_sigint(int sig)
{
    (void)sig;
    hx_chat_interrupted = 1;
    if (hx_chat_ctx) hx_context_cancel(hx_chat_ctx);
}

struct hx_chat_state {
    struct hx_model *m;
    struct hx_context *c;
    struct hx_sampler *s;
    struct hx_cli *o;
    hx_token *cached;      /* tokens in the KV cache, in order */
    int64_t n_cached, cap;
    int64_t last_row;      /* batch row of the last logits */
};

/* Feed ids[from..n) at positions from.. (the cache already holds ids[0..from)). */
static int hx_chat_feed(struct hx_chat_state *st, const hx_token *ids, int64_t from, int64_t n)
{
    hx_kv_truncate(st->c, 0, (int32_t)from);
    st->n_cached = from;
    for (int64_t p = from; p < n; p += 256) {
        int64_t k = n - p < 256 ? n - p : 256;
        int32_t pos[256], seq[256] = {0};
        int8_t lg[256];
        for (int64_t i = 0; i < k; i++) pos[i] = (int32_t)(p + i), lg[i] = p + i == n - 1;
        struct hx_batch b = {.n_rows = k, .token = ids + p, .pos = pos, .seq = seq, .logits = lg};
        int rc = hx_decode(st->c, &b);
        if (rc) return rc;
        memcpy(st->cached + p, ids + p, (size_t)k * sizeof *ids);
        st->n_cached = p + k;
        st->last_row = k - 1;
    }
    return HX_OK;
}

/* Generate one answer from the logits of the last fed row; its text goes to *answer. */
static int hx_chat_answer(struct hx_chat_state *st, char **answer)
{
    struct hx_detok *dt;
    int rc = hx_detok_new(st->m, false, &dt);
    if (rc) return rc;
    size_t len = 0, cap = 256;
    char *text = hx_malloc(cap);
    text[0] = '\0';
    const float *l = hx_get_logits(st->c, st->last_row);
    for (int64_t i = 0; l && i < st->o->n_predict && !hx_chat_interrupted; i++) {
        hx_token t = hx_sampler_sample(st->s, l);
        if (hx_vocab_is_eog(st->m, t)) break;
        hx_sampler_accept(st->s, t);
        const char *piece;
        size_t pl;
        if (hx_detok_push(dt, t, &piece, &pl) == HX_OK && pl) {
            fwrite(piece, 1, pl, stdout);
            fflush(stdout);
            while (len + pl + 1 > cap) text = hx_realloc(text, cap *= 2);
            memcpy(text + len, piece, pl), len += pl, text[len] = '\0';
        }
        if (st->n_cached + 2 >= hx_context_n_ctx(st->c)) break;
        int32_t pos = (int32_t)st->n_cached, seq = 0;
        int8_t one = 1;
        struct hx_batch b = {.n_rows = 1, .token = &t, .pos = &pos, .seq = &seq, .logits = &one};
        if ((rc = hx_decode(st->c, &b)) != HX_OK) break;
        st->cached[st->n_cached++] = t;
        l = hx_get_logits(st->c, 0);
    }
    printf("\n");
    hx_detok_free(dt);
    *answer = text;
    return rc == HX_E_CANCELED ? HX_OK : rc;
}

int hx_cmd_chat(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: engine chat -m MODEL [--chat-template NAME] [-n N] [-c N_CTX] [--backend B]\n"
               "       [--policy P] [sampling options as for engine run]\n"
               "Type a message and press Enter; Ctrl-C stops an answer; Ctrl-D quits.\n");
        return 0;
    }
    struct hx_cli o;
    int rc = hx_cli_parse("chat", argc, argv, &o);
    if (rc) return rc;
    struct hx_chat_state st = {.o = &o};
    if ((rc = hx_cli_open("chat", &o, &st.m, &st.c))) return rc;
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(st.m, &mi);
    if (hx_vocab_n_eog(st.m) == 0) {
        hx_app_error("chat", "the vocabulary has no end-of-turn or end-of-sequence token, so an "
                             "answer could never end; use `engine run -n N` with this model");
        hx_context_free(st.c);
        hx_model_free(st.m);
        return 1;
    }
    char *probe = NULL;
    struct hx_chat_msg hello = {"user", "hi"};
    if (hx_chat_apply(st.m, o.chat_template, &hello, 1, true, true, &probe) != HX_OK) {
        hx_app_error("chat", "%s", hx_last_error());
        hx_context_free(st.c);
        hx_model_free(st.m);
        return 1;
    }
    hx_free(probe);
    st.cap = hx_context_n_ctx(st.c) + 1;
    st.cached = hx_malloc((size_t)st.cap * sizeof *st.cached);
    hx_sampler_new(&o.sp, mi.n_vocab, &st.s);
    struct sigaction sa = {.sa_handler = hx_chat_on_sigint};
    sigaction(SIGINT, &sa, NULL);
    hx_chat_ctx = st.c;
    struct hx_chat_msg msgs[256];
    char *owned[256];
    int n_msgs = 0;
    char line[8192];
    rc = 0;
    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        hx_chat_interrupted = 0;
        if (!fgets(line, sizeof line, stdin)) {
            if (hx_chat_interrupted) { clearerr(stdin); printf("\n"); continue; }
            printf("\n");
            break;
        }
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        if (n_msgs + 2 > 256) { hx_app_error("chat", "conversation too long"); break; }
        owned[n_msgs] = hx_strdup(line);
        msgs[n_msgs] = (struct hx_chat_msg){"user", owned[n_msgs]};
        n_msgs++;
        char *prompt = NULL;
        int64_t n = 0;
        if (hx_chat_apply(st.m, o.chat_template, msgs, (size_t)n_msgs, true, true, &prompt) != HX_OK) break;
        hx_token *ids = hx_malloc((size_t)st.cap * sizeof *ids);
        if (hx_tokenize(st.m, prompt, strlen(prompt), hx_vocab_add_bos(st.m), true, ids, st.cap, &n) != HX_OK ||
            n + 1 >= hx_context_n_ctx(st.c)) {
            hx_app_error("chat", "the conversation no longer fits the context (%lld tokens)", (long long)n);
            hx_free(ids), hx_free(prompt);
            rc = 1;
            break;
        }
        int64_t common = 0;
        while (common < st.n_cached && common < n - 1 && st.cached[common] == ids[common]) common++;
        int frc = hx_chat_feed(&st, ids, common, n);
        hx_free(ids), hx_free(prompt);
        if (frc == HX_E_CANCELED) { printf("\n"); n_msgs--; continue; }
        if (frc) { hx_app_error("chat", "%s", hx_last_error()); rc = 1; break; }
        char *answer = NULL;
        if (hx_chat_answer(&st, &answer) != HX_OK) { hx_app_error("chat", "%s", hx_last_error()); rc = 1; break; }
        owned[n_msgs] = answer;
        msgs[n_msgs] = (struct hx_chat_msg){"assistant", answer};
        n_msgs++;
    }
    for (int i = 0; i < n_msgs; i++) hx_free(owned[i]);
    hx_sampler_free(st.s);
    hx_free(st.cached);
    hx_chat_ctx = NULL;
    hx_context_free(st.c);
    hx_model_free(st.m);
    return rc;
}
