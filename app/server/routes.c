/*
 * routes.c — what each endpoint answers, and the loop side of generation.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
 * GET /metrics, GET /props, GET /slots. Order of checks for the generation routes: method
 * (405), API key (401), model loaded (503), body parse and validation (400), model name
 * (404), capacity (503 + Retry-After), then the job goes to the worker. Worker events are
 * matched to their connection through the job's owner pointer, which is cleared when the
 * connection closes (the job is cancelled and its terminal event just frees it). Loop thread
 * only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server.h"

struct hx_srv_config hx__srv_cfg;

static uint64_t hx_srv_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Response ids: PREFIX + 16 hex digits + 8 hex digits. The first part is a bijective mix of a
 * 64-bit key drawn from getrandom() once per process plus a per-process counter (its low 32
 * bits are the second part), so ids never repeat within a process and two processes' ids
 * collide only if their keys do (2^-64). Without getrandom the key comes from the clock, the
 * pid and an address. (A fixed start made the first id of every fresh server the same.) */
static void hx_srv_make_id(struct hx_srv_conn *c, const char *prefix)
{
    static uint64_t key;
    static uint64_t counter;
    static bool have_key;
    if (!have_key) {
        if (getrandom(&key, sizeof key, 0) != (ssize_t)sizeof key) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            key = hx_srv_mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
                  hx_srv_mix((uint64_t)getpid() ^ (uint64_t)(uintptr_t)&key);
        }
        have_key = true;
    }
    counter++;
    uint64_t x = hx_srv_mix(key + counter * 0x9E3779B97F4A7C15ull);
    snprintf(c->id, sizeof c->id, "%s%016llx%08lx", prefix, (unsigned long long)x,
             (unsigned long)(counter & 0xFFFFFFFFu));
}

static void hx_srv_json(struct hx_srv_conn *c, int status, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) {
        hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
        return;
    }
    hx__srv_respond(c, status, "application/json", s, strlen(s), NULL);
    free(s);
}

static bool hx_srv_authorized(struct hx_srv_conn *c)
{
    const char *key = hx__srv_cfg.api_key;
    if (!key) return true;
    const char *a = c->rp.req.authorization;
    if (!a || strncmp(a, "Bearer ", 7)) return false;
    a += 7;
    size_t n = strlen(key), m = strlen(a);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? a[i] : 0);
    return diff == 0;
}

static void hx_srv_health(struct hx_srv_conn *c)
{
    if (hx__srv_cfg.loading)
        hx_srv_json(c, 503, json_pack("{ss}", "status", "loading"));
    else
        hx_srv_json(c, 200, json_pack("{ss}", "status", "ok"));
}

static void hx_srv_models(struct hx_srv_conn *c)
{
    json_t *m = json_pack("{sssssIss}", "id", hx__srv_worker_model_id(), "object", "model",
                          "created", (json_int_t)time(NULL), "owned_by", "hx");
    json_object_set_new(m, "meta", json_pack("{sI}", "n_ctx", (json_int_t)hx__srv_worker_n_ctx()));
    hx_srv_json(c, 200, json_pack("{sss[o]}", "object", "list", "data", m));
}

static void hx_srv_metrics(struct hx_srv_conn *c)
{
    int64_t queued = 0, active = 0;
    hx__srv_worker_counts(&queued, &active);
    char *dev = hx__srv_worker_device_lines();
    char *text =
        hx__srv_metrics_render(queued, active, hx__srv_cfg.in_flight, hx__srv_cfg.loading, dev);
    free(dev);
    if (!text) {
        hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
        return;
    }
    hx__srv_respond(c, 200, "text/plain; version=0.0.4", text, strlen(text), NULL);
    free(text);
}

/* True (after answering 503) while the model loads. */
static bool hx_srv_loading(struct hx_srv_conn *c)
{
    if (!hx__srv_cfg.loading) return false;
    hx__srv_respond_error(c, 503, "the model is loading", NULL, "model_loading",
                          "Retry-After: 1\r\n");
    return true;
}

/* llama-server's /props, the parts hx has: the model, its context, the slots, the template. */
static void hx_srv_props(struct hx_srv_conn *c)
{
    if (hx_srv_loading(c)) return;
    const char *tmpl = hx__srv_worker_chat_template();
    json_t *j = json_pack("{sssIsisiso}", "model", hx__srv_worker_model_id(), "n_ctx",
                          (json_int_t)hx__srv_worker_n_ctx(), "total_slots", hx__srv_cfg.n_parallel,
                          "cache_slots", hx__srv_worker_n_slots() - hx__srv_cfg.n_parallel,
                          "chat_template", tmpl ? json_string(tmpl) : json_null());
    json_object_set_new(j, "policy", json_string(hx__srv_worker_policy()));
    json_object_set_new(j, "default_generation_settings",
                        json_pack("{sIsb}", "n_ctx", (json_int_t)hx__srv_worker_n_ctx(),
                                  "cache_prompt", 1));
    hx_srv_json(c, 200, j);
}

static void hx_srv_slots(struct hx_srv_conn *c)
{
    if (hx_srv_loading(c)) return;
    char *s = hx__srv_worker_slots_json();
    if (!s) {
        hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
        return;
    }
    hx__srv_respond(c, 200, "application/json", s, strlen(s), NULL);
    free(s);
}

static void hx_srv_generate(struct hx_srv_conn *c, enum hx_srv_kind kind)
{
    if (hx_srv_loading(c)) return;
    struct hx_srv_gen_req req;
    const char *param = NULL;
    char msg[512];
    if (!hx__srv_gen_req_parse(kind, c->rp.req.body, c->rp.req.body_len, &req, &param, msg, sizeof msg)) {
        hx__srv_respond_error(c, 400, msg, param, NULL, NULL);
        return;
    }
    if (req.model && strcmp(req.model, hx__srv_worker_model_id())) {
        snprintf(msg, sizeof msg, "the model '%.200s' does not exist; this server has '%.200s'",
                 req.model, hx__srv_worker_model_id());
        hx__srv_gen_req_free(&req);
        hx__srv_respond_error(c, 404, msg, "model", "model_not_found", NULL);
        return;
    }
    /* no usable chat template: the server's configuration is at fault, not the request */
    if (kind == HX_SRV_CHAT && hx__srv_worker_chat_error()) {
        snprintf(msg, sizeof msg,
                 "this server cannot render chats for its model: %.300s; use /v1/completions, or "
                 "restart the server with --chat-template NAME",
                 hx__srv_worker_chat_error());
        hx__srv_gen_req_free(&req);
        hx__srv_respond_error(c, 501, msg, NULL, "chat_template_unavailable", NULL);
        return;
    }
    /* tools in the template's format: its checks, the grammar of a required call, the parser */
    if (!hx__srv_tools_prepare(&req, hx__srv_worker_chat_template(), &param, msg, sizeof msg)) {
        hx__srv_gen_req_free(&req);
        hx__srv_respond_error(c, 400, msg, param, NULL, NULL);
        return;
    }
    if (hx__srv_cfg.draining ||
        hx__srv_cfg.in_flight >= (int64_t)hx__srv_cfg.n_parallel + hx__srv_cfg.n_queue) {
        hx__srv_gen_req_free(&req);
        hx__srv_respond_error(c, 503, hx__srv_cfg.draining ? "the server is shutting down"
                                                           : "the server is busy; retry later",
                              NULL, "server_busy", "Retry-After: 1\r\n");
        return;
    }
    c->kind = kind;
    c->stream = req.stream;
    c->include_usage = req.include_usage;
    c->return_ids = req.return_token_ids;
    c->created = (int64_t)time(NULL);
    hx_srv_make_id(c, kind == HX_SRV_CHAT ? "chatcmpl-" : "cmpl-");
    c->job = hx__srv_worker_submit(&req, c);
    if (!c->job) {
        hx__srv_gen_req_free(&req);
        hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
        return;
    }
    hx__srv_cfg.in_flight++;
}

struct hx_srv_route_def {
    const char *path, *method;
    bool auth;
    void (*get)(struct hx_srv_conn *c);
    int kind; /* POST generation routes: enum hx_srv_kind */
};

static const struct hx_srv_route_def hx_srv_routes[] = {
    {"/health", "GET", false, hx_srv_health, -1},
    {"/metrics", "GET", false, hx_srv_metrics, -1},
    {"/v1/models", "GET", true, hx_srv_models, -1},
    {"/props", "GET", true, hx_srv_props, -1},
    {"/slots", "GET", true, hx_srv_slots, -1},
    {"/v1/chat/completions", "POST", true, NULL, HX_SRV_CHAT},
    {"/v1/completions", "POST", true, NULL, HX_SRV_COMPLETION},
};

void hx__srv_route(struct hx_srv_conn *c)
{
    const char *path = c->rp.req.path ? c->rp.req.path : "";
    const struct hx_srv_route_def *r = NULL;
    for (size_t i = 0; i < sizeof hx_srv_routes / sizeof hx_srv_routes[0]; i++)
        if (!strcmp(path, hx_srv_routes[i].path)) r = &hx_srv_routes[i];
    if (!r) {
        hx__srv_respond_error(c, 404, "no such route", NULL, "not_found", NULL);
        return;
    }
    snprintf(c->route, sizeof c->route, "%s", r->path);
    if (strcmp(c->method, r->method)) {
        char allow[40];
        snprintf(allow, sizeof allow, "Allow: %s\r\n", r->method);
        hx__srv_respond_error(c, 405, "method not allowed", NULL, "method_not_allowed", allow);
        return;
    }
    if (r->auth && !hx_srv_authorized(c)) {
        hx__srv_respond_error(c, 401, "invalid or missing API key (Authorization: Bearer KEY)", NULL,
                              "invalid_api_key", "WWW-Authenticate: Bearer\r\n");
        return;
    }
    if (r->get) r->get(c);
    else hx_srv_generate(c, (enum hx_srv_kind)r->kind);
}

/* ---- worker events ------------------------------------------------------------------------------ */

static void hx_srv_result_of(struct hx_srv_conn *c, const struct hx_srv_event *ev,
                             struct hx_srv_result *r)
{
    memset(r, 0, sizeof *r);
    r->id = c->id;
    r->model = hx__srv_worker_model_id();
    r->devices = hx__srv_worker_devices();
    r->policy = hx__srv_worker_policy();
    r->created = c->created;
    r->finish_reason = ev && ev->finish_reason ? ev->finish_reason : "stop";
    r->prompt_tokens = c->prompt_tokens;
    r->completion_tokens = c->completion_tokens;
    r->cached_tokens = c->cached_tokens;
    if (ev) {
        r->prompt_tps = ev->prompt_tps;
        r->gen_tps = ev->gen_tps;
        r->with_ids = c->return_ids && ev->type == HX_SRV_EV_DONE;
        r->ids = ev->ids;
        r->n_ids = ev->n_ids;
    }
}

static void hx_srv_sse_json(struct hx_srv_conn *c, char *json)
{
    if (!json) return;
    struct hx_srv_buf b = {0};
    hx__srv_sse_event(&b, json, strlen(json));
    free(json);
    if (!b.failed) hx__srv_stream_send(c, b.data, b.len);
    hx__srv_buf_free(&b);
}

static void hx_srv_send_chunk(struct hx_srv_conn *c, const char *text)
{
    struct hx_srv_buf b = {0};
    hx__srv_http_chunk(&b, text, strlen(text));
    if (!b.failed) hx__srv_stream_send(c, b.data, b.len);
    hx__srv_buf_free(&b);
}

static void hx_srv_on_accepted(struct hx_srv_conn *c, struct hx_srv_event *ev)
{
    c->prompt_tokens = ev->prompt_tokens;
    if (!c->stream) return;
    hx__srv_stream_begin(c);
    if (c->kind == HX_SRV_CHAT) {
        struct hx_srv_result r;
        hx_srv_result_of(c, NULL, &r);
        hx_srv_sse_json(c, hx__srv_chunk_json(c->kind, HX_SRV_CHUNK_ROLE, &r, NULL, 0));
    }
}

static void hx_srv_on_text(struct hx_srv_conn *c, struct hx_srv_event *ev)
{
    if (c->t_first == 0) c->t_first = hx__srv_now_s();
    if (!c->stream) {
        hx__srv_buf_append(&c->text, ev->text, ev->text_len);
        return;
    }
    struct hx_srv_result r;
    hx_srv_result_of(c, NULL, &r);
    struct hx_srv_tools *t = hx__srv_job_req(ev->job)->tools;
    if (hx__srv_tools_parsing(t)) { /* content and tool_calls deltas */
        struct hx_srv_buf b = {0};
        hx__srv_tools_stream(t, &r, ev->text, ev->text_len, false, &b);
        if (b.len && !b.failed) hx__srv_stream_send(c, b.data, b.len);
        hx__srv_buf_free(&b);
        return;
    }
    hx_srv_sse_json(c, hx__srv_chunk_json(c->kind, HX_SRV_CHUNK_TEXT, &r, ev->text, ev->text_len));
}

/* A stream that cannot finish: an error event in OpenAI's shape (`data: {"error":{...}}`,
 * which OpenAI's clients raise as an error), no finish chunk and no [DONE], so that the client
 * can tell it from a complete answer; the access line gets this status and "truncated". */
static void hx_srv_stream_fail(struct hx_srv_conn *c, int status, const char *msg,
                               const char *code)
{
    hx_srv_sse_json(c, hx__srv_error_json(status, msg, NULL, code));
    c->status = status;
    c->truncated = true;
    hx__srv_stream_end(c);
}

static void hx_srv_on_error(struct hx_srv_conn *c, struct hx_srv_event *ev)
{
    const char *msg = ev->text ? ev->text : "generation failed";
    c->job = NULL;
    if (!c->headers_sent) {
        hx__srv_respond_error(c, ev->status, msg, ev->param, ev->code, NULL);
        return;
    }
    hx_srv_stream_fail(c, ev->status, msg, ev->code);
}

static void hx_srv_on_done(struct hx_srv_conn *c, struct hx_srv_event *ev)
{
    c->job = NULL;
    c->completion_tokens = ev->completion_tokens;
    if (!strcmp(ev->finish_reason, "cancelled")) { /* shutdown grace period ran out */
        if (c->headers_sent)
            hx_srv_stream_fail(c, 503,
                               "the server shut down before the generation finished; the text "
                               "so far is incomplete",
                               "server_shutdown");
        else
            hx__srv_respond_error(c, 503,
                                  "the server shut down before the generation finished; retry "
                                  "later",
                                  NULL, "server_shutdown", NULL);
        return;
    }
    struct hx_srv_result r;
    hx_srv_result_of(c, ev, &r);
    if (r.with_ids && r.n_ids < 0) { /* the ids could not be kept */
        if (!c->headers_sent) {
            hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
            return;
        }
        hx_srv_stream_fail(c, 500, "out of memory", NULL);
        return;
    }
    struct hx_srv_tools *t = hx__srv_job_req(ev->job)->tools;
    if (!c->stream) {
        char *body = hx__srv_tools_parsing(t)
                         ? hx__srv_tools_response(t, &r, c->text.data, c->text.len)
                         : hx__srv_response_json(c->kind, &r, c->text.data, c->text.len);
        if (!body) hx__srv_respond_error(c, 500, "out of memory", NULL, NULL, NULL);
        else hx__srv_respond(c, 200, "application/json", body, strlen(body), NULL);
        free(body);
        return;
    }
    hx__srv_stream_begin(c); /* no-op unless ACCEPTED was lost */
    if (hx__srv_tools_parsing(t)) { /* what the parser still held, then the calls' reason */
        struct hx_srv_buf b = {0};
        hx__srv_tools_stream(t, &r, NULL, 0, true, &b);
        if (b.len && !b.failed) hx__srv_stream_send(c, b.data, b.len);
        hx__srv_buf_free(&b);
        r.finish_reason = hx__srv_tools_finish_reason(t, r.finish_reason);
    }
    hx_srv_sse_json(c, hx__srv_chunk_json(c->kind, HX_SRV_CHUNK_FINISH, &r, NULL, 0));
    if (c->include_usage) hx_srv_sse_json(c, hx__srv_chunk_json(c->kind, HX_SRV_CHUNK_USAGE, &r, NULL, 0));
    hx_srv_send_chunk(c, "data: [DONE]\n\n");
    hx__srv_stream_end(c);
}

void hx__srv_route_event(struct hx_srv_event *ev)
{
    struct hx_srv_conn *c = ev->job ? hx__srv_job_owner(ev->job) : NULL;
    bool terminal = ev->type == HX_SRV_EV_ERROR || ev->type == HX_SRV_EV_DONE;
    if (terminal) { /* the work done counts, whatever became of it; speeds only when finished */
        bool cancelled = ev->type == HX_SRV_EV_DONE && !strcmp(ev->finish_reason, "cancelled");
        bool finished = ev->type == HX_SRV_EV_DONE && !cancelled;
        /* tokens run through the model: the cached prefix was not */
        hx__srv_metrics_tokens(ev->prompt_tokens - ev->cached_tokens, ev->completion_tokens,
                               finished ? ev->prompt_tps : 0, finished ? ev->gen_tps : 0);
        if (ev->cache_lookup) hx__srv_metrics_cache(ev->cached_tokens);
        if (cancelled) hx__srv_metrics_cancelled();
        else if (finished && ev->ttft_s >= 0) hx__srv_metrics_ttft(ev->ttft_s);
        /* the access line says what the metrics just counted */
        struct hx_srv_access *gone = hx__srv_job_access(ev->job);
        if (gone) {
            gone->prompt_tokens = ev->prompt_tokens;
            gone->cached_tokens = ev->cached_tokens;
            gone->completion_tokens = ev->completion_tokens;
            hx__srv_access_log(gone);
        } else if (c) {
            c->prompt_tokens = ev->prompt_tokens;
            c->completion_tokens = ev->completion_tokens;
            c->cached_tokens = ev->cached_tokens;
        }
    }
    if (c) {
        switch (ev->type) {
        case HX_SRV_EV_ACCEPTED: hx_srv_on_accepted(c, ev); break;
        case HX_SRV_EV_TEXT: hx_srv_on_text(c, ev); break;
        case HX_SRV_EV_ERROR: hx_srv_on_error(c, ev); break;
        case HX_SRV_EV_DONE: hx_srv_on_done(c, ev); break;
        default: break;
        }
    }
    if (terminal) {
        hx__srv_job_free(ev->job);
        hx__srv_cfg.in_flight--;
    }
    free(ev->text);
    free(ev->ids);
    free(ev);
}

void hx__srv_route_conn_closed(struct hx_srv_conn *c, const struct hx_srv_access *a)
{
    struct hx_srv_access *copy = a ? malloc(sizeof *copy) : NULL;
    if (copy) *copy = *a;
    else if (a) hx__srv_access_log(a); /* out of memory: log now, with the tokens known now */
    hx__srv_job_set_access(c->job, copy);
    hx__srv_job_set_owner(c->job, NULL);
    hx__srv_worker_cancel(c->job);
    c->job = NULL;
}

void hx__srv_route_keepalive(struct hx_srv_conn *c)
{
    if (hx__srv_now_s() - c->last_write_s < hx__srv_cfg.keepalive_s) return;
    hx_srv_send_chunk(c, ": keep-alive\n\n");
}
