/*
 * worker.c — the inference worker: one thread that loads the model, owns the one hx_context
 * (n_seq = --parallel KV slots) and runs continuous batching over it.
 *
 * Each step: take newly submitted jobs (tokenize, validate, then wait for a slot); drop
 * cancelled jobs and clear their slot at once; give free slots to waiting jobs in order;
 * prefill at most min(HX_SRV_PREFILL_CHUNK, n_batch) prompt rows (one hx_decode per sequence,
 * logits only for a prompt's last row); then decode every generating sequence together, one
 * row per sequence (seq id = slot), in one hx_decode (more only when --batch < --parallel).
 * Logits are read by the row index of the last hx_decode's batch. Each job has its own
 * sampler, detokenizer and stop matcher.
 *
 * Prompt cache (prompt-cache.c keeps the books): a slot keeps its KV when its job ends, the
 * tokens of every successful hx_decode are recorded for its slot, a waiting job takes the free
 * slot with the longest cached prefix of its prompt and the slot's KV is truncated to it, and
 * prefill starts there (at least the prompt's last token runs, for logits to sample from).
 *
 * Threads: the loop hands jobs over through `incoming` and sets job->cancel; the worker hands
 * results back as events through a locked list plus uv_async_send, and the loop drains the
 * whole list on every wakeup (sends coalesce). The worker never touches a libuv handle other
 * than uv_async_send, and never touches a job after queueing its terminal event (ERROR or
 * DONE): from then on the job belongs to the loop, which frees it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "app.h"
#include "prompt.h"
#include "server.h"

struct hx_srv_job {
    struct hx_srv_job *next; /* incoming or waiting list */
    struct hx_srv_gen_req req;
    void *owner;             /* loop side only */
    struct hx_srv_access *access; /* loop side only: the access line of a gone client */
    struct hx_srv_event *term; /* the terminal event, allocated at submit so it cannot fail */
    atomic_int cancel;
    /* worker side */
    hx_token *prompt;
    int64_t n_prompt, n_prefilled, n_gen, max_gen;
    int slot;
    hx_token last;
    int64_t n_cached;  /* prompt tokens reused from the slot's KV (prefill started there) */
    bool cache_lookup; /* got a slot with cache_prompt on */
    hx_token *ids; /* generated ids, kept only for return_token_ids */
    int64_t ids_cap;
    bool ids_failed;
    struct hx_sampler *smp;
    struct hx_grammar *grammar; /* req.grammar compiled for the model (response_format) */
    const char *err_param;      /* the `param` of the job's error event (static) or NULL */
    struct hx_detok *dt;
    struct hx_srv_stopper stop;
    double t_submit, t_first, t_prefill0, t_prefill1;
};

#define HX_SRV_MAX_DEV 8
/* What GET /slots shows of a slot (copied under mu at the start of every step). */
struct hx_srv_slot_view {
    bool busy;
    int64_t n_kv, n_prompt, n_cached, n_prefilled, n_gen;
};

static struct {
    uv_loop_t *loop;
    uv_async_t async;
    hx_srv_event_cb cb;
    void *cb_data;
    uv_thread_t thread;
    bool thread_started;
    uv_mutex_t mu;
    uv_cond_t cv;
    /* under mu */
    struct hx_srv_job *in_head, *in_tail;
    struct hx_srv_event *ev_head, *ev_tail;
    bool stop, poke;
    int64_t n_queued, n_active;
    struct hx_srv_slot_view *view; /* n_seq, allocated before LOADED */
    struct { char name[64]; double s; } dev[HX_SRV_MAX_DEV];
    int n_dev;
    /* worker only */
    struct hx_model *model;
    struct hx_context *ctx;
    int n_seq;
    int64_t n_ctx, n_vocab;
    int64_t n_batch; /* rows per hx_decode call at most (the context's n_batch) */
    int64_t chunk;   /* prompt rows per prefill step: min(HX_SRV_PREFILL_CHUNK, n_batch) */
    size_t max_piece_bytes; /* longest token text: no token covers more input bytes */
    struct hx_srv_job **slots;
    struct hx_srv_cache cache; /* the tokens each slot's KV holds */
    struct hx_srv_job *wait_head, *wait_tail;
    int rr; /* prefill round-robin start */
    uint64_t seed_state;
    /* set once before LOADED, read by the loop after it */
    struct hx_srv_worker_params p;
    char model_id[256], policy[128];
    char chat_error[512]; /* non-empty: no --chat-template and the model's own is unusable */
    struct hx_srv_event *load_ev; /* allocated by start */
    /* loop only */
    char devices[64];
} hx_srv_s;

/* ---- events (worker → loop) ------------------------------------------------------------------ */

static void hx_srv_emit(struct hx_srv_event *ev)
{
    uv_mutex_lock(&hx_srv_s.mu);
    if (hx_srv_s.ev_tail) hx_srv_s.ev_tail->next = ev;
    else hx_srv_s.ev_head = ev;
    hx_srv_s.ev_tail = ev;
    uv_mutex_unlock(&hx_srv_s.mu);
    uv_async_send(&hx_srv_s.async);
}

/* NULL when out of memory: the caller drops that (non-terminal) event. */
static struct hx_srv_event *hx_srv_ev_new(enum hx_srv_ev_type type, struct hx_srv_job *job)
{
    struct hx_srv_event *ev = calloc(1, sizeof *ev);
    if (!ev) return NULL;
    ev->type = type;
    ev->job = job;
    return ev;
}

static struct hx_srv_event *hx_srv_ev_term(enum hx_srv_ev_type type, struct hx_srv_job *job)
{
    struct hx_srv_event *ev = job->term;
    job->term = NULL;
    ev->type = type;
    return ev;
}

static void hx_srv_emit_text(struct hx_srv_job *job, const char *text, size_t n)
{
    if (!n) return;
    struct hx_srv_event *ev = hx_srv_ev_new(HX_SRV_EV_TEXT, job);
    if (!ev) return;
    ev->text = malloc(n + 1);
    if (!ev->text) {
        free(ev);
        return;
    }
    memcpy(ev->text, text, n);
    ev->text[n] = '\0';
    ev->text_len = n;
    hx_srv_emit(ev);
}

static void hx_srv_async_cb(uv_async_t *h)
{
    uv_mutex_lock(&hx_srv_s.mu);
    struct hx_srv_event *ev = hx_srv_s.ev_head;
    hx_srv_s.ev_head = hx_srv_s.ev_tail = NULL;
    uv_mutex_unlock(&hx_srv_s.mu);
    while (ev) {
        struct hx_srv_event *next = ev->next;
        ev->next = NULL;
        if (ev->devices[0]) snprintf(hx_srv_s.devices, sizeof hx_srv_s.devices, "%s", ev->devices);
        hx_srv_s.cb(ev, hx_srv_s.cb_data);
        ev = next;
    }
}

/* ---- job lifecycle (worker) ------------------------------------------------------------------ */

static void hx_srv_job_release_engine(struct hx_srv_job *job)
{
    hx_sampler_free(job->smp);
    hx_detok_free(job->dt);
    hx_grammar_free(job->grammar);
    job->grammar = NULL;
    job->smp = NULL;
    job->dt = NULL;
    free(job->prompt);
    job->prompt = NULL;
    free(job->ids);
    job->ids = NULL;
    hx__srv_stopper_free(&job->stop);
    if (job->slot >= 0) { /* the KV stays, for the next job with the same prefix */
        const int64_t kv = hx_kv_len(hx_srv_s.ctx, job->slot);
        const int64_t keep =
            hx__srv_cache_release(&hx_srv_s.cache, job->slot, kv, job->req.cache_prompt);
        if (kv > keep) hx_kv_truncate(hx_srv_s.ctx, job->slot, (int32_t)keep);
        hx_srv_s.slots[job->slot] = NULL;
        job->slot = -1;
    }
}

static void hx_srv_job_error_code(struct hx_srv_job *job, int status, const char *code,
                                  const char *fmt, const char *detail)
{
    hx_srv_job_release_engine(job);
    struct hx_srv_event *ev = hx_srv_ev_term(HX_SRV_EV_ERROR, job);
    ev->prompt_tokens = job->n_prefilled;
    ev->completion_tokens = job->n_gen;
    ev->cached_tokens = job->n_cached;
    ev->cache_lookup = job->cache_lookup;
    ev->status = status;
    ev->code = code;
    ev->param = job->err_param;
    size_t n = strlen(fmt) + (detail ? strlen(detail) : 0) + 1;
    ev->text = malloc(n);
    if (ev->text) snprintf(ev->text, n, fmt, detail ? detail : "");
    snprintf(ev->devices, sizeof ev->devices, "%s", hx_context_devices(hx_srv_s.ctx));
    hx_srv_emit(ev);
}

static void hx_srv_job_error(struct hx_srv_job *job, int status, const char *fmt, const char *detail)
{
    hx_srv_job_error_code(job, status, NULL, fmt, detail);
}

static void hx_srv_job_done(struct hx_srv_job *job, const char *reason)
{
    double now = hx__srv_now_s();
    if (strcmp(reason, "cancelled") && !job->stop.matched) {
        struct hx_srv_buf out = {0};
        const char *piece = NULL;
        size_t n = 0;
        if (job->dt && hx_detok_flush(job->dt, &piece, &n) == HX_OK && n)
            hx__srv_stopper_push(&job->stop, piece, n, &out);
        hx__srv_stopper_finish(&job->stop, &out);
        hx_srv_emit_text(job, out.data, out.len);
        hx__srv_buf_free(&out);
    }
    struct hx_srv_event *ev = hx_srv_ev_term(HX_SRV_EV_DONE, job);
    ev->finish_reason = reason;
    ev->prompt_tokens = job->n_prefilled; /* == n_prompt unless cancelled while prefilling */
    ev->completion_tokens = job->n_gen;
    ev->cached_tokens = job->n_cached;
    ev->cache_lookup = job->cache_lookup;
    ev->ttft_s = job->t_first > 0 ? job->t_first - job->t_submit : -1;
    if (job->t_prefill1 > job->t_prefill0)
        ev->prompt_tps =
            (double)(job->n_prompt - job->n_cached) / (job->t_prefill1 - job->t_prefill0);
    if (job->n_gen > 1 && now > job->t_first)
        ev->gen_tps = (double)(job->n_gen - 1) / (now - job->t_first);
    snprintf(ev->devices, sizeof ev->devices, "%s", hx_context_devices(hx_srv_s.ctx));
    if (job->req.return_token_ids && strcmp(reason, "cancelled")) {
        ev->ids = job->ids; /* n_ids -1 after an allocation failure: the loop answers 500 */
        ev->n_ids = job->ids_failed ? -1 : job->n_gen;
        job->ids = NULL;
    }
    hx_srv_job_release_engine(job);
    hx_srv_emit(ev);
}

static uint64_t hx_srv_rand(void)
{
    uint64_t x = hx_srv_s.seed_state += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Render (chat), tokenize and check the prompt (prompt.c); false after emitting the error. */
static bool hx_srv_job_tokenize(struct hx_srv_job *job)
{
    const struct hx_srv_prompt_env env = {hx_srv_s.model, hx_srv_s.p.chat_template,
                                          hx_srv_s.n_ctx, hx_srv_s.max_piece_bytes};
    const char *code = NULL;
    char msg[512];
    int status = hx__srv_prompt_prepare(&env, &job->req, &job->prompt, &job->n_prompt, &code,
                                        msg, sizeof msg);
    if (status) {
        hx_srv_job_error_code(job, status, code, "%s", msg);
        return false;
    }
    return true;
}

/* Structured output: compile the request's grammar (json-schema.c wrote it) for the model;
 * false after the job's error. The compiler's grammars are valid, so what the engine refuses
 * is one too large for it (400, the request's fault), unless memory ran out (500). */
static bool hx_srv_job_grammar(struct hx_srv_job *job)
{
    const char *g = job->req.grammar;
    int st = hx_grammar_new(hx_srv_s.model, g, strlen(g), &job->grammar);
    if (st == HX_OK) return true;
    job->grammar = NULL;
    const bool tools = hx__srv_tools_constrained(job->req.tools); /* a required call's grammar */
    if (st == HX_E_NOMEM) {
        hx_srv_job_error(job, 500,
                         tools ? "cannot build the tool-call grammar: %s"
                               : "cannot build the response_format grammar: %s",
                         hx_last_error());
    } else {
        job->err_param = tools ? "tools" : "response_format";
        hx_srv_job_error(job, 400,
                         tools ? "tools: the parameters' grammar is too large for this server: %s"
                               : "response_format: the schema's grammar is too large for this "
                                 "server: %s",
                         hx_last_error());
    }
    return false;
}

static bool hx_srv_job_prepare(struct hx_srv_job *job)
{
    if (!hx_srv_job_tokenize(job)) return false;
    int64_t room = hx_srv_s.n_ctx - job->n_prompt;
    job->max_gen = job->req.max_tokens > 0 ? job->req.max_tokens : room;
    struct hx_sampler_params sp = job->req.sp;
    if (!job->req.seed_set) sp.seed = hx_srv_rand();
    if (hx_sampler_new(&sp, hx_srv_s.n_vocab, &job->smp) != HX_OK ||
        hx_detok_new(hx_srv_s.model, false, &job->dt) != HX_OK) {
        hx_srv_job_error(job, 500, "cannot set up sampling: %s", hx_last_error());
        return false;
    }
    if (job->req.grammar && !hx_srv_job_grammar(job)) return false;
    if (sp.penalty_last_n != 0)
        for (int64_t i = 0; i < job->n_prompt; i++) hx_sampler_accept(job->smp, job->prompt[i]);
    job->stop.stops = job->req.stops;
    job->stop.n_stops = job->req.n_stops;
    struct hx_srv_event *ev = hx_srv_ev_new(HX_SRV_EV_ACCEPTED, job);
    if (ev) {
        ev->prompt_tokens = job->n_prompt;
        hx_srv_emit(ev);
    }
    return true;
}

/* Remember a generated id; on allocation failure drop them all (DONE then reports n_ids -1). */
static void hx_srv_job_keep_id(struct hx_srv_job *job, hx_token tok)
{
    if (job->ids_failed) return;
    if (job->n_gen == job->ids_cap) {
        int64_t cap = job->ids_cap ? job->ids_cap * 2 : 64;
        hx_token *p = realloc(job->ids, (size_t)cap * sizeof *p);
        if (!p) {
            free(job->ids);
            job->ids = NULL;
            job->ids_failed = true;
            return;
        }
        job->ids = p;
        job->ids_cap = cap;
    }
    job->ids[job->n_gen] = tok;
}

/* Sample from row `row` of the last hx_decode batch (under the job's grammar if it has one);
 * false when the job ended instead: no logits for that row (a server bug: its error), or a
 * grammar that allows no token (finished). */
static bool hx_srv_sample(struct hx_srv_job *job, int64_t row, hx_token *tok)
{
    const float *logits = hx_get_logits(hx_srv_s.ctx, row);
    if (!logits) {
        char what[96];
        snprintf(what, sizeof what, "row %lld of the last batch: %s", (long long)row,
                 *hx_last_error() ? hx_last_error() : "not requested");
        hx_srv_job_error(job, 500, "no logits for %s", what);
        return false;
    }
    if (!job->grammar) {
        *tok = hx_sampler_sample(job->smp, logits);
        return true;
    }
    /* the budget is what the job may still generate: the grammar closes the value within it */
    *tok = hx_sampler_sample_grammar(job->smp, job->grammar, logits, job->max_gen - job->n_gen);
    if (*tok != HX_TOKEN_NULL) return true;
    /* nothing allowed: the value is whole (done), or it cannot be closed within max_tokens */
    hx_srv_job_done(job, hx_grammar_done(job->grammar) ? "stop" : "length");
    return false;
}

/* A sampled token: release its text; finish on EOG, a stop string or the length limit. */
static void hx_srv_job_token(struct hx_srv_job *job, hx_token tok)
{
    if (job->t_first == 0) job->t_first = hx__srv_now_s();
    if (hx_vocab_is_eog(hx_srv_s.model, tok)) {
        hx_srv_job_done(job, "stop");
        return;
    }
    if (job->grammar && hx_grammar_accept(job->grammar, tok) != HX_OK) {
        hx_srv_job_error(job, 500, "a sampled token breaks the response_format grammar: %s",
                         hx_last_error());
        return;
    }
    if (job->req.return_token_ids) hx_srv_job_keep_id(job, tok);
    job->n_gen++;
    hx_sampler_accept(job->smp, tok);
    const char *piece = NULL;
    size_t n = 0;
    if (hx_detok_push(job->dt, tok, &piece, &n) == HX_OK && n) {
        struct hx_srv_buf out = {0};
        hx__srv_stopper_push(&job->stop, piece, n, &out);
        hx_srv_emit_text(job, out.data, out.len);
        hx__srv_buf_free(&out);
    }
    if (job->stop.matched) hx_srv_job_done(job, "stop");
    else if (job->grammar && hx_grammar_done(job->grammar)) hx_srv_job_done(job, "stop");
    else if (job->n_gen >= job->max_gen) hx_srv_job_done(job, "length");
    else job->last = tok;
}

/* ---- one step (worker) -------------------------------------------------------------------------- */

static void hx_srv_note_busy(double seconds)
{
    const char *d = hx_context_devices(hx_srv_s.ctx);
    if (!d || !*d) d = "unknown";
    uv_mutex_lock(&hx_srv_s.mu);
    int i = 0;
    while (i < hx_srv_s.n_dev && strcmp(hx_srv_s.dev[i].name, d)) i++;
    if (i == hx_srv_s.n_dev && i < HX_SRV_MAX_DEV) {
        snprintf(hx_srv_s.dev[i].name, sizeof hx_srv_s.dev[i].name, "%s", d);
        hx_srv_s.n_dev++;
    }
    if (i < hx_srv_s.n_dev) hx_srv_s.dev[i].s += seconds;
    uv_mutex_unlock(&hx_srv_s.mu);
}

static int hx_srv_decode(const struct hx_batch *b)
{
    double t0 = hx__srv_now_s();
    int st = hx_decode(hx_srv_s.ctx, b);
    hx_srv_note_busy(hx__srv_now_s() - t0);
    return st;
}

static bool hx_srv_prefilling(const struct hx_srv_job *j) { return j && j->n_prefilled < j->n_prompt; }

static void hx_srv_prefill(struct hx_srv_job *job, int64_t rows)
{
    static hx_token tok[HX_SRV_PREFILL_CHUNK];
    static int32_t pos[HX_SRV_PREFILL_CHUNK], seq[HX_SRV_PREFILL_CHUNK];
    static int8_t want[HX_SRV_PREFILL_CHUNK];
    bool last = job->n_prefilled + rows == job->n_prompt;
    for (int64_t i = 0; i < rows; i++) {
        tok[i] = job->prompt[job->n_prefilled + i];
        pos[i] = (int32_t)(job->n_prefilled + i);
        seq[i] = job->slot;
        want[i] = last && i == rows - 1;
    }
    if (job->t_prefill0 == 0) job->t_prefill0 = hx__srv_now_s();
    struct hx_batch b = {.n_rows = rows, .token = tok, .pos = pos, .seq = seq, .logits = want};
    int st = hx_srv_decode(&b);
    if (st != HX_OK) {
        hx_srv_job_error(job, st == HX_E_RANGE ? 400 : 500, "prefill failed: %s", hx_last_error());
        return;
    }
    hx__srv_cache_record(&hx_srv_s.cache, job->slot, job->n_prefilled, tok, rows);
    job->n_prefilled += rows;
    if (!last) return;
    job->t_prefill1 = hx__srv_now_s();
    hx_token t;
    if (hx_srv_sample(job, rows - 1, &t)) hx_srv_job_token(job, t);
}

static void hx_srv_step_prefill(void)
{
    int64_t budget = hx_srv_s.chunk;
    for (int k = 0; k < hx_srv_s.n_seq && budget > 0; k++) {
        int s = (hx_srv_s.rr + k) % hx_srv_s.n_seq;
        struct hx_srv_job *j = hx_srv_s.slots[s];
        if (!hx_srv_prefilling(j)) continue;
        int64_t rows = j->n_prompt - j->n_prefilled;
        if (rows > budget) rows = budget;
        budget -= rows;
        hx_srv_prefill(j, rows);
    }
    hx_srv_s.rr = (hx_srv_s.rr + 1) % hx_srv_s.n_seq;
}

/* One row per generating sequence, in hx_decode calls of at most n_batch rows (--batch may
 * be below --parallel). */
static void hx_srv_step_decode(void)
{
    int n = 0;
    hx_token tok[hx_srv_s.n_seq];
    int32_t pos[hx_srv_s.n_seq], seq[hx_srv_s.n_seq];
    int8_t want[hx_srv_s.n_seq];
    struct hx_srv_job *rows[hx_srv_s.n_seq];
    for (int s = 0; s < hx_srv_s.n_seq; s++) {
        struct hx_srv_job *j = hx_srv_s.slots[s];
        /* a job that sampled its first token this step has t_prefill1 set and last valid */
        if (!j || hx_srv_prefilling(j) || j->t_first == 0) continue;
        tok[n] = j->last;
        pos[n] = (int32_t)(j->n_prompt + j->n_gen - 1);
        seq[n] = s;
        want[n] = 1;
        rows[n++] = j;
    }
    for (int i0 = 0; i0 < n; i0 += (int)hx_srv_s.n_batch) {
        int m = n - i0 < hx_srv_s.n_batch ? n - i0 : (int)hx_srv_s.n_batch;
        struct hx_batch b = {
            .n_rows = m, .token = tok + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        int st = hx_srv_decode(&b);
        for (int i = 0; st == HX_OK && i < m; i++) /* the slots' KV holds these now */
            hx__srv_cache_record(&hx_srv_s.cache, seq[i0 + i], pos[i0 + i], &tok[i0 + i], 1);
        for (int i = 0; i < m; i++) {
            struct hx_srv_job *j = rows[i0 + i];
            hx_token t;
            if (st != HX_OK) hx_srv_job_error(j, 500, "decode failed: %s", hx_last_error());
            else if (hx_srv_sample(j, i, &t)) hx_srv_job_token(j, t);
        }
    }
}

static void hx_srv_drop_cancelled(void)
{
    struct hx_srv_job **pp = &hx_srv_s.wait_head, *tail = NULL;
    while (*pp) {
        struct hx_srv_job *j = *pp;
        if (atomic_load(&j->cancel)) {
            *pp = j->next;
            hx_srv_job_done(j, "cancelled");
        } else {
            tail = j;
            pp = &j->next;
        }
    }
    hx_srv_s.wait_tail = tail;
    for (int s = 0; s < hx_srv_s.n_seq; s++)
        if (hx_srv_s.slots[s] && atomic_load(&hx_srv_s.slots[s]->cancel))
            hx_srv_job_done(hx_srv_s.slots[s], "cancelled");
}

/* Waiting jobs in order, each to the free slot with the longest cached prefix of its prompt
 * (ties and short prefixes: the least recently used); the slot keeps that prefix's KV. */
static int64_t hx_srv_count_active(void);

static void hx_srv_assign_slots(void)
{
    /* every sequence is a slot and may hold a cache; at most --parallel of them run */
    while (hx_srv_s.wait_head && hx_srv_count_active() < hx_srv_s.p.n_parallel) {
        struct hx_srv_job *j = hx_srv_s.wait_head;
        int64_t reuse;
        const int best = hx__srv_cache_pick(&hx_srv_s.cache, hx_srv_s.slots, j->prompt, j->n_prompt,
                                            j->req.cache_prompt, &reuse);
        if (best < 0) return;
        hx_srv_s.wait_head = j->next;
        if (!hx_srv_s.wait_head) hx_srv_s.wait_tail = NULL;
        j->next = NULL;
        if (hx_kv_truncate(hx_srv_s.ctx, best, (int32_t)reuse) != HX_OK ||
            hx_kv_len(hx_srv_s.ctx, best) != reuse)
            reuse = 0, hx_kv_truncate(hx_srv_s.ctx, best, 0);
        hx__srv_cache_take(&hx_srv_s.cache, best, reuse);
        j->slot = best;
        j->n_prefilled = j->n_cached = reuse;
        j->cache_lookup = j->req.cache_prompt;
        hx_srv_s.slots[best] = j;
    }
}

/* Under mu: what GET /slots will show until the next step. */
static void hx_srv_update_view(void)
{
    for (int s = 0; s < hx_srv_s.n_seq; s++) {
        const struct hx_srv_job *j = hx_srv_s.slots[s];
        struct hx_srv_slot_view *v = &hx_srv_s.view[s];
        v->busy = j != NULL;
        v->n_kv = hx_srv_s.cache.slot[s].n;
        v->n_prompt = j ? j->n_prompt : 0;
        v->n_cached = j ? j->n_cached : 0;
        v->n_prefilled = j ? j->n_prefilled : 0;
        v->n_gen = j ? j->n_gen : 0;
    }
}

static void hx_srv_take_incoming(struct hx_srv_job *j)
{
    while (j) {
        struct hx_srv_job *next = j->next;
        j->next = NULL;
        if (atomic_load(&j->cancel)) hx_srv_job_done(j, "cancelled");
        else if (hx_srv_job_prepare(j)) {
            if (hx_srv_s.wait_tail) hx_srv_s.wait_tail->next = j;
            else hx_srv_s.wait_head = j;
            hx_srv_s.wait_tail = j;
        }
        j = next;
    }
}

static int64_t hx_srv_count_active(void)
{
    int64_t n = 0;
    for (int s = 0; s < hx_srv_s.n_seq; s++) n += hx_srv_s.slots[s] != NULL;
    return n;
}

static int64_t hx_srv_count_waiting(void)
{
    int64_t n = 0;
    for (struct hx_srv_job *j = hx_srv_s.wait_head; j; j = j->next) n++;
    return n;
}

static void hx_srv_worker_loop(void)
{
    for (;;) {
        uv_mutex_lock(&hx_srv_s.mu);
        hx_srv_s.n_active = hx_srv_count_active();
        hx_srv_s.n_queued = hx_srv_count_waiting();
        hx_srv_update_view();
        while (!hx_srv_s.stop && !hx_srv_s.in_head && !hx_srv_s.poke && hx_srv_s.n_active == 0 &&
               hx_srv_s.n_queued == 0)
            uv_cond_wait(&hx_srv_s.cv, &hx_srv_s.mu);
        struct hx_srv_job *in = hx_srv_s.in_head;
        hx_srv_s.in_head = hx_srv_s.in_tail = NULL;
        hx_srv_s.poke = false;
        bool stop = hx_srv_s.stop;
        uv_mutex_unlock(&hx_srv_s.mu);
        if (stop) break;
        hx_srv_take_incoming(in);
        hx_srv_drop_cancelled();
        hx_srv_assign_slots();
        hx_srv_step_prefill();
        hx_srv_step_decode();
    }
}

static int hx_srv_load(void)
{
    struct hx_model_params mp = {.struct_size = sizeof mp};
    int st = hx_model_load(hx_srv_s.p.model_path, &mp, &hx_srv_s.model);
    if (st != HX_OK) return st;
    struct hx_context_params cp = {
        .struct_size = sizeof cp,
        .backend = hx_srv_s.p.backend,
        .policy = hx_srv_s.p.policy,
        .fallback = hx_srv_s.p.fallback,
        .mem = hx_srv_s.p.mem,
        .n_threads = hx_srv_s.p.n_threads,
        .n_ctx = hx_srv_s.p.n_ctx,
        .n_seq = hx_srv_s.p.n_parallel + hx_srv_s.p.n_cache_slots,
        .n_batch = hx_srv_s.p.n_batch,
    };
    struct hx_app_load load;
    hx_app_load_init(&load, "serve", hx_srv_s.p.progress);
    hx_app_load_params(&load, &cp);
    st = hx_context_new(hx_srv_s.model, &cp, &hx_srv_s.ctx);
    if (st != HX_OK) return st;
    hx_srv_s.n_seq = hx_context_n_seq(hx_srv_s.ctx);
    hx_srv_s.n_ctx = hx_context_n_ctx(hx_srv_s.ctx);
    hx_srv_s.n_vocab = hx_vocab_n_tokens(hx_srv_s.model);
    hx_srv_s.n_batch = hx_srv_s.p.n_batch > 0 ? hx_srv_s.p.n_batch : 512; /* the core's default */
    hx_srv_s.chunk =
        hx_srv_s.n_batch < HX_SRV_PREFILL_CHUNK ? hx_srv_s.n_batch : HX_SRV_PREFILL_CHUNK;
    if (!hx_srv_s.p.chat_template) { /* --chat-template was checked by name before listening */
        struct hx_chat_msg probe = {.role = "user", .content = "hi"};
        char *out = NULL;
        if (hx_chat_apply(hx_srv_s.model, NULL, &probe, 1, true, true, &out) != HX_OK)
            snprintf(hx_srv_s.chat_error, sizeof hx_srv_s.chat_error, "%s", hx_last_error());
        hx_free(out);
    }
    hx_srv_s.max_piece_bytes = 16;
    for (hx_token t = 0; t < (hx_token)hx_srv_s.n_vocab; t++) {
        const char *piece = hx_vocab_text(hx_srv_s.model, t);
        size_t n = piece ? strlen(piece) : 0;
        if (n > hx_srv_s.max_piece_bytes) hx_srv_s.max_piece_bytes = n;
    }
    { /* build the vocabulary's token trie for grammars now, not in the first such request */
        struct hx_grammar *warm = NULL;
        if (hx_grammar_new(hx_srv_s.model, "root ::= \"x\"", 12, &warm) == HX_OK) hx_grammar_free(warm);
    }
    if (hx_srv_s.n_seq < 1) return HX_E_NOMEM;
    hx_srv_s.slots = calloc((size_t)hx_srv_s.n_seq, sizeof *hx_srv_s.slots);
    struct hx_srv_slot_view *view = calloc((size_t)hx_srv_s.n_seq, sizeof *view);
    if (!hx_srv_s.slots || !view ||
        hx__srv_cache_init(&hx_srv_s.cache, hx_srv_s.n_seq, hx_srv_s.n_ctx) != 0) {
        free(view);
        return HX_E_NOMEM;
    }
    uv_mutex_lock(&hx_srv_s.mu);
    hx_srv_s.view = view;
    uv_mutex_unlock(&hx_srv_s.mu);
    const char *pol = hx_context_policy(hx_srv_s.ctx);
    snprintf(hx_srv_s.policy, sizeof hx_srv_s.policy, "%s", pol ? pol : "single");
    return HX_OK;
}

/* LOADED's text: the plan's first line ("policy P (kind); devices: D...; fallback: F..."), and
 * its devices as the x-hx-devices value until a decode says which ones served. */
static void hx_srv_describe_plan(struct hx_srv_event *ev)
{
    char *plan = NULL;
    if (hx_context_plan_text(hx_srv_s.ctx, &plan) != HX_OK || !plan) {
        ev->text = strdup(hx_srv_s.policy);
        return;
    }
    size_t n = strcspn(plan, "\n");
    ev->text = malloc(n + 1);
    if (ev->text) {
        memcpy(ev->text, plan, n);
        ev->text[n] = '\0';
    }
    const char *d = strstr(plan, "devices: ");
    if (d && d < plan + n) {
        d += 9;
        size_t k = strcspn(d, ";\n"), o = 0;
        for (size_t i = 0; i < k && o + 1 < sizeof ev->devices; i++)
            ev->devices[o++] = d[i] == ' ' ? ',' : d[i];
        ev->devices[o] = '\0';
    }
    hx_free(plan);
}

static void hx_srv_worker(void *arg)
{
    (void)arg;
    int st = hx_srv_load();
    struct hx_srv_event *ev = hx_srv_s.load_ev;
    ev->type = st == HX_OK ? HX_SRV_EV_LOADED : HX_SRV_EV_LOAD_FAILED;
    if (st != HX_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", hx_strerror(st), hx_last_error());
        ev->text = strdup(msg);
    } else {
        hx_srv_describe_plan(ev);
    }
    hx_srv_emit(ev);
    if (st == HX_OK) hx_srv_worker_loop();
}

/* ---- loop-side API ---------------------------------------------------------------------------- */

static void hx_srv_model_id_from_path(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    if (n >= sizeof hx_srv_s.model_id) n = sizeof hx_srv_s.model_id - 1;
    memcpy(hx_srv_s.model_id, base, n);
    hx_srv_s.model_id[n] = '\0';
}

int hx__srv_worker_start(uv_loop_t *loop, const struct hx_srv_worker_params *p,
                         hx_srv_event_cb cb, void *user_data)
{
    hx_srv_s.loop = loop;
    hx_srv_s.cb = cb;
    hx_srv_s.cb_data = user_data;
    hx_srv_s.p = *p;
    hx_srv_s.seed_state = (uint64_t)time(NULL) ^ ((uint64_t)uv_os_getpid() << 32);
    hx_srv_model_id_from_path(p->model_path);
    hx_srv_s.load_ev = calloc(1, sizeof *hx_srv_s.load_ev);
    if (!hx_srv_s.load_ev) return HX_E_NOMEM;
    if (uv_mutex_init(&hx_srv_s.mu) || uv_cond_init(&hx_srv_s.cv)) return HX_E_NOMEM;
    if (uv_async_init(loop, &hx_srv_s.async, hx_srv_async_cb)) return HX_E_NOMEM;
    if (uv_thread_create(&hx_srv_s.thread, hx_srv_worker, NULL)) {
        uv_close((uv_handle_t *)&hx_srv_s.async, NULL);
        return HX_E_NOMEM;
    }
    hx_srv_s.thread_started = true;
    return HX_OK;
}

struct hx_srv_job *hx__srv_worker_submit(struct hx_srv_gen_req *req, void *owner)
{
    struct hx_srv_job *job = calloc(1, sizeof *job);
    if (job) job->term = calloc(1, sizeof *job->term);
    if (!job || !job->term) {
        free(job);
        return NULL;
    }
    job->term->job = job;
    job->req = *req;
    memset(req, 0, sizeof *req);
    job->owner = owner;
    job->slot = -1;
    job->t_submit = hx__srv_now_s();
    atomic_init(&job->cancel, 0);
    uv_mutex_lock(&hx_srv_s.mu);
    if (hx_srv_s.in_tail) hx_srv_s.in_tail->next = job;
    else hx_srv_s.in_head = job;
    hx_srv_s.in_tail = job;
    uv_cond_signal(&hx_srv_s.cv);
    uv_mutex_unlock(&hx_srv_s.mu);
    return job;
}

void hx__srv_worker_cancel(struct hx_srv_job *job)
{
    atomic_store(&job->cancel, 1);
    uv_mutex_lock(&hx_srv_s.mu);
    hx_srv_s.poke = true;
    uv_cond_signal(&hx_srv_s.cv);
    uv_mutex_unlock(&hx_srv_s.mu);
}

void hx__srv_job_free(struct hx_srv_job *job)
{
    if (!job) return;
    free(job->term);
    free(job->access);
    hx__srv_gen_req_free(&job->req);
    free(job);
}

void *hx__srv_job_owner(struct hx_srv_job *job) { return job->owner; }
void hx__srv_job_set_owner(struct hx_srv_job *job, void *owner) { job->owner = owner; }
void hx__srv_job_set_access(struct hx_srv_job *job, struct hx_srv_access *a)
{
    free(job->access);
    job->access = a;
}
struct hx_srv_access *hx__srv_job_access(struct hx_srv_job *job) { return job->access; }
const struct hx_srv_gen_req *hx__srv_job_req(const struct hx_srv_job *job) { return &job->req; }

void hx__srv_worker_stop(void)
{
    if (hx_srv_s.thread_started) {
        uv_mutex_lock(&hx_srv_s.mu);
        hx_srv_s.stop = true;
        uv_cond_signal(&hx_srv_s.cv);
        uv_mutex_unlock(&hx_srv_s.mu);
        uv_thread_join(&hx_srv_s.thread);
        hx_srv_s.thread_started = false;
        uv_close((uv_handle_t *)&hx_srv_s.async, NULL);
    }
    /* Events the loop will never see (LOADED after a signal during loading): free them. */
    for (struct hx_srv_event *ev = hx_srv_s.ev_head, *next; ev; ev = next) {
        next = ev->next;
        free(ev->text);
        free(ev->ids);
        free(ev);
    }
    hx_srv_s.ev_head = hx_srv_s.ev_tail = NULL;
    hx_context_free(hx_srv_s.ctx);
    hx_model_free(hx_srv_s.model);
    free(hx_srv_s.slots);
    hx__srv_cache_free(&hx_srv_s.cache);
    free(hx_srv_s.view);
    hx_srv_s.view = NULL;
    hx_srv_s.ctx = NULL;
    hx_srv_s.model = NULL;
    hx_srv_s.slots = NULL;
}

void hx__srv_worker_counts(int64_t *queued, int64_t *active)
{
    uv_mutex_lock(&hx_srv_s.mu);
    int64_t in = 0;
    for (struct hx_srv_job *j = hx_srv_s.in_head; j; j = j->next) in++;
    *queued = hx_srv_s.n_queued + in;
    *active = hx_srv_s.n_active;
    uv_mutex_unlock(&hx_srv_s.mu);
}

char *hx__srv_worker_device_lines(void)
{
    struct hx_srv_buf b = {0};
    hx__srv_buf_append(&b, "", 0);
    uv_mutex_lock(&hx_srv_s.mu);
    for (int i = 0; i < hx_srv_s.n_dev; i++)
        hx__srv_buf_printf(&b, "hx_device_busy_seconds_total{devices=\"%s\"} %.6f\n",
                           hx_srv_s.dev[i].name, hx_srv_s.dev[i].s);
    uv_mutex_unlock(&hx_srv_s.mu);
    return b.data;
}

const char *hx__srv_worker_model_id(void) { return hx_srv_s.model_id; }
const char *hx__srv_worker_policy(void) { return hx_srv_s.policy; }
const char *hx__srv_worker_chat_error(void)
{
    return hx_srv_s.chat_error[0] ? hx_srv_s.chat_error : NULL;
}
const char *hx__srv_worker_devices(void) { return hx_srv_s.devices[0] ? hx_srv_s.devices : "cpu"; }
void hx__srv_worker_note_devices(const char *devices)
{
    snprintf(hx_srv_s.devices, sizeof hx_srv_s.devices, "%s", devices);
}
int64_t hx__srv_worker_n_ctx(void) { return hx_srv_s.n_ctx; }
int hx__srv_worker_n_slots(void) { return hx_srv_s.n_seq; }

const char *hx__srv_worker_chat_template(void)
{
    if (hx_srv_s.p.chat_template) return hx_srv_s.p.chat_template;
    if (hx_srv_s.chat_error[0] || !hx_srv_s.model) return NULL;
    return hx_chat_template_detect(hx_srv_s.model);
}

char *hx__srv_worker_slots_json(void)
{
    struct hx_srv_buf b = {0};
    hx__srv_buf_puts(&b, "[");
    uv_mutex_lock(&hx_srv_s.mu);
    for (int s = 0; hx_srv_s.view && s < hx_srv_s.n_seq; s++) {
        const struct hx_srv_slot_view *v = &hx_srv_s.view[s];
        hx__srv_buf_printf(&b,
                           "%s{\"id\":%d,\"state\":\"%s\",\"is_processing\":%s,\"n_ctx\":%lld,"
                           "\"cached_tokens\":%lld,\"n_prompt_tokens\":%lld,"
                           "\"n_prompt_tokens_cached\":%lld,\"n_prompt_tokens_processed\":%lld,"
                           "\"n_decoded\":%lld}",
                           s ? "," : "", s, v->busy ? "processing" : "idle",
                           v->busy ? "true" : "false", (long long)hx_srv_s.n_ctx,
                           (long long)v->n_kv, (long long)v->n_prompt, (long long)v->n_cached,
                           (long long)(v->n_prefilled - v->n_cached), (long long)v->n_gen);
    }
    uv_mutex_unlock(&hx_srv_s.mu);
    hx__srv_buf_puts(&b, "]");
    if (b.failed) {
        hx__srv_buf_free(&b);
        return NULL;
    }
    return b.data;
}
