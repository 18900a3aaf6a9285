/*
 * cmd-chat.c — `engine chat -m M`: interactive multi-turn chat. Each turn renders the whole
 * conversation with the chat template, reuses the KV cache for the prefix already processed
 * (only the new tokens are prefilled), and streams the answer. Ctrl-C stops the current answer
 * (not the program); EOF (Ctrl-D) ends the session.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "cli.h"

/* Tokens kept free for the answer when old turns must be dropped to fit the context. */
#define HX_CHAT_MIN_ANSWER 64

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
    const hx_token *feeding; /* the whole prompt hx_chat_feed is feeding, from feed_from */
    int64_t feed_from;
    const float *logits;   /* of the last fed row */
    int64_t n_vocab;
};

/* After each prefill batch: the ids it fed are in the cache now. */
static void hx_chat_fed(void *user, int64_t n_fed)
{
    struct hx_chat_state *st = user;
    int64_t upto = st->feed_from + n_fed;
    memcpy(st->cached + st->n_cached, st->feeding + st->n_cached,
           (size_t)(upto - st->n_cached) * sizeof *st->cached);
    st->n_cached = upto;
}

/* Feed ids[from..n) at positions from.. (the cache already holds ids[0..from)). */
static int hx_chat_feed(struct hx_chat_state *st, const hx_token *ids, int64_t from, int64_t n)
{
    hx_kv_truncate(st->c, 0, (int32_t)from);
    st->n_cached = from, st->feeding = ids, st->feed_from = from;
    return hx_app_prefill(st->c, ids + from, n - from, (int32_t)from, 0, hx_chat_fed, st,
                          &st->logits);
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
    const float *l = st->logits;
    for (int64_t i = 0; l && i < st->o->n_predict && !hx_chat_interrupted; i++) {
        if ((rc = hx_app_logits_check(l, st->n_vocab)) != HX_OK) break;
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
        if (st->n_cached + 1 >= hx_context_n_ctx(st->c)) {
            fprintf(stderr, "\n[the context (%lld tokens) is full: answer cut here]",
                    (long long)hx_context_n_ctx(st->c));
            break;
        }
        int32_t pos = (int32_t)st->n_cached, seq = 0;
        int8_t one = 1;
        struct hx_batch b = {.n_rows = 1, .token = &t, .pos = &pos, .seq = &seq, .logits = &one};
        if ((rc = hx_decode(st->c, &b)) != HX_OK) break;
        st->cached[st->n_cached++] = t;
        if (!(l = hx_get_logits(st->c, -1))) rc = HX_E_INTERNAL;
    }
    printf("\n");
    hx_detok_free(dt);
    *answer = text;
    return rc == HX_E_CANCELED ? HX_OK : rc;
}

/* The conversation: messages [first, n) are what the model sees; older ones were dropped to
 * fit the context. Contents are owned (hx_free). */
struct hx_chat_history {
    struct hx_chat_msg *msgs;
    size_t n, cap, first;
};

/* Append a message taking ownership of content; false (content freed) when out of memory. */
static bool hx_chat_push(struct hx_chat_history *h, const char *role, char *content)
{
    if (content && h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct hx_chat_msg *m = hx_realloc(h->msgs, cap * sizeof *m);
        if (m) h->msgs = m, h->cap = cap;
    }
    if (!content || h->n == h->cap) return hx_free(content), false;
    h->msgs[h->n++] = (struct hx_chat_msg){role, content};
    return true;
}

static void hx_chat_pop(struct hx_chat_history *h)
{
    hx_free((char *)h->msgs[--h->n].content);
    if (h->first > h->n) h->first = h->n;
}

static void hx_chat_history_free(struct hx_chat_history *h)
{
    while (h->n) hx_chat_pop(h);
    hx_free(h->msgs);
}

int hx_cmd_chat(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: engine chat -m MODEL [--chat-template NAME] [-n N] [-c N_CTX] [--backend B]\n"
               "       [--policy P] [--mem DEV=SIZE,...] [--progress] [sampling options as for\n"
               "       engine run]\n"
               "Type a message and press Enter; Ctrl-C stops an answer; Ctrl-D quits.\n");
        return 0;
    }
    struct hx_cli o;
    int rc = hx_cli_parse("chat", argc, argv, &o);
    if (rc) return rc;
    struct hx_chat_state st = {.o = &o};
    struct hx_chat_history h = {0};
    if ((rc = hx_cli_open("chat", &o, &st.m, &st.c))) return rc;
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(st.m, &mi);
    st.n_vocab = mi.n_vocab;
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
    hx_token *ids = hx_malloc((size_t)st.cap * sizeof *ids);
    if (!st.cached || !ids || hx_sampler_new(&o.sp, mi.n_vocab, &st.s) != HX_OK) {
        hx_app_error("chat", "out of memory");
        rc = 1;
        goto done;
    }
    struct sigaction sa = {.sa_handler = hx_chat_on_sigint};
    sigaction(SIGINT, &sa, NULL);
    hx_chat_ctx = st.c;
    char *line = NULL;
    size_t line_cap = 0;
    rc = 0;
    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        hx_chat_interrupted = 0;
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) {
            if (hx_chat_interrupted) { clearerr(stdin); printf("\n"); continue; }
            printf("\n");
            break;
        }
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        if (!hx_chat_push(&h, "user", hx_strdup(line))) { hx_app_error("chat", "out of memory"); rc = 1; break; }
        /* Render the conversation; while it does not fit (room for the prompt and at least a
         * short answer), drop the oldest turns. A message that alone does not fit is refused. */
        int64_t n = 0, room = HX_CHAT_MIN_ANSWER < st.cap / 4 ? HX_CHAT_MIN_ANSWER : st.cap / 4;
        size_t dropped = 0;
        int trc = HX_OK;
        for (;;) {
            char *prompt = NULL;
            trc = hx_chat_apply(st.m, o.chat_template, h.msgs + h.first, h.n - h.first, true, true, &prompt);
            if (trc == HX_OK)
                trc = hx_tokenize(st.m, prompt, strlen(prompt), hx_vocab_add_bos(st.m), true, ids, st.cap, &n);
            hx_free(prompt);
            if (trc != HX_OK || n + room <= hx_context_n_ctx(st.c) || h.first + 1 >= h.n) break;
            /* Drop the oldest message, and the answer that follows it. */
            h.first++, dropped++;
            if (h.first + 1 < h.n && !strcmp(h.msgs[h.first].role, "assistant")) h.first++, dropped++;
        }
        if (trc != HX_OK) { hx_app_error("chat", "%s", hx_last_error()); rc = 1; break; }
        if (n + room > hx_context_n_ctx(st.c)) {
            fprintf(stderr, "engine chat: this message is %lld tokens with the template; the context "
                            "holds %lld with room for an answer (-c N raises it); not sent\n",
                    (long long)n, (long long)hx_context_n_ctx(st.c));
            hx_chat_pop(&h);
            continue;
        }
        if (dropped)
            fprintf(stderr, "engine chat: note: the conversation outgrew the context (%lld tokens); "
                            "the oldest %zu message%s no longer seen by the model\n",
                    (long long)hx_context_n_ctx(st.c), dropped, dropped == 1 ? " is" : "s are");
        int64_t common = 0;
        while (common < st.n_cached && common < n - 1 && st.cached[common] == ids[common]) common++;
        int frc = hx_chat_feed(&st, ids, common, n);
        if (frc == HX_E_CANCELED) { printf("\n"); hx_chat_pop(&h); continue; }
        if (frc) { hx_app_error("chat", "%s", hx_last_error()); rc = 1; break; }
        char *answer = NULL;
        if (hx_chat_answer(&st, &answer) != HX_OK) { hx_app_error("chat", "%s", hx_last_error()); rc = 1; break; }
        if (!hx_chat_push(&h, "assistant", answer)) { hx_app_error("chat", "out of memory"); rc = 1; break; }
    }
    free(line);
done:
    hx_chat_history_free(&h);
    hx_free(ids);
    hx_sampler_free(st.s);
    hx_free(st.cached);
    hx_chat_ctx = NULL;
    hx_context_free(st.c);
    hx_model_free(st.m);
    return rc;
}
