/*
 * server.h — declarations shared by the files of `engine serve` (app/server/).
 *
 * Threads: everything here runs on the libuv loop thread except the inference worker
 * (worker.c), which owns the hx_model/hx_context and talks to the loop only through
 * hx__srv_worker_* (a locked queue in each direction plus uv_async_send). The pure helpers
 * (request parser, JSON shapes, SSE framing, stop strings, metrics text) touch no libuv
 * handle and are unit-tested by `engine serve --self-test` and fuzzed by tests/fuzz/fuzz-http.c.
 *
 * Uses only include/hx.h of the engine.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#include "hx.h"

#define HX_SRV_MAX_BODY_BYTES ((size_t)4 << 20)    /* larger bodies: 413 */
#define HX_SRV_MAX_HEADER_BYTES ((size_t)16 << 10) /* larger request heads: 431 */
#define HX_SRV_MAX_STOPS 8
#define HX_SRV_PREFILL_CHUNK 256 /* prompt rows per prefill step */

/* ---- growable byte buffer (buf.c) --------------------------------------------------------- */

struct hx_srv_buf {
    char *data; /* NUL-terminated when non-NULL */
    size_t len, cap;
    bool failed; /* an allocation failed; contents truncated */
};
void hx__srv_buf_append(struct hx_srv_buf *b, const void *p, size_t n);
void hx__srv_buf_puts(struct hx_srv_buf *b, const char *s);
void hx__srv_buf_printf(struct hx_srv_buf *b, const char *fmt, ...) HX_PRINTF(2, 3);
void hx__srv_buf_consume(struct hx_srv_buf *b, size_t n); /* drop n bytes from the front */
void hx__srv_buf_free(struct hx_srv_buf *b);
double hx__srv_now_s(void); /* monotonic seconds */

/* ---- request parser (reqparse.c): HTTP/1.1 on http-parser, no I/O -------------------------- */

struct hx_srv_req {
    enum http_method method;
    char *url;           /* as sent, NUL-terminated */
    char *path;          /* url without query string */
    char *authorization; /* Authorization header value or NULL */
    bool expect_continue;
    bool keep_alive;
    bool http10; /* an HTTP/1.0 request: no chunked coding in the answer */
    char *body; /* NUL-terminated; body_len bytes */
    size_t body_len;
};

struct hx_srv_reqp {
    http_parser parser;
    struct hx_srv_req req;
    struct hx_srv_buf url, field, value, body;
    size_t head_bytes;
    bool in_value;     /* last header callback was a value */
    bool headers_done; /* head parsed (req.method etc. valid) */
    bool complete;     /* a whole request is in req; parser paused */
    int error_status;  /* != 0: reject with this HTTP status, then close */
    const char *error_msg;
};

void hx__srv_reqp_init(struct hx_srv_reqp *rp);
/* Feed bytes; returns how many were consumed. Stops after a complete request (rp->complete) or
 * an error (rp->error_status); the caller keeps the rest for the next request (pipelining). */
size_t hx__srv_reqp_feed(struct hx_srv_reqp *rp, const char *data, size_t n);
/* Forget the current request, ready for the next one on the same connection. */
void hx__srv_reqp_reset(struct hx_srv_reqp *rp);
void hx__srv_reqp_deinit(struct hx_srv_reqp *rp);
bool hx__srv_reqp_started(const struct hx_srv_reqp *rp); /* any byte of a request seen */

/* ---- OpenAI request/response shapes (openai.c) ------------------------------------------- */

enum hx_srv_kind { HX_SRV_CHAT, HX_SRV_COMPLETION };

struct hx_srv_tools; /* tools.c */

struct hx_srv_gen_req {
    enum hx_srv_kind kind;
    char *model;                /* NULL when absent */
    struct hx_chat_msg *msgs;   /* chat: role/content strdup'ed */
    size_t n_msgs;
    char *prompt;               /* completion */
    int64_t max_tokens;         /* -1: up to the context */
    struct hx_sampler_params sp;
    bool seed_set;
    char *stops[HX_SRV_MAX_STOPS];
    int n_stops;
    bool stream, include_usage;
    bool enable_thinking;
    bool return_token_ids; /* extension: the generated ids in choices[0].token_ids */
    bool cache_prompt;     /* default true: reuse a slot's cached prefix (worker.c) */
    char *grammar;         /* GBNF (docs/grammar.md) sampling is constrained by; NULL: none */
    struct hx_srv_tools *tools; /* chat: tools, the messages' tool parts (tools.c); or NULL */
};

/* Parse and validate a JSON body. On failure returns false with *status (400/...), *param
 * (field name or NULL) and msg filled. */
bool hx__srv_gen_req_parse(enum hx_srv_kind kind, const char *body, size_t len,
                           struct hx_srv_gen_req *out, const char **param, char *msg,
                           size_t msg_cap);
void hx__srv_gen_req_free(struct hx_srv_gen_req *r);

/* ---- JSON Schema → grammar (json-schema.c) ------------------------------------------------- */

/*
 * Append to *out GBNF rules (docs/grammar.md) that match exactly the JSON texts that the JSON
 * Schema `schema` (len bytes of JSON; NULL: any JSON value) validates. The rule for the value is
 * named <prefix>root and every rule written starts with prefix, so several schemas can share one
 * grammar. On a schema feature not supported or an invalid schema: false, with err naming the
 * keyword and where it is ("'pattern' is not supported (at /properties/name)").
 */
bool hx__srv_schema_gbnf(const char *schema, size_t len, const char *prefix,
                         struct hx_srv_buf *out, char *err, size_t err_cap);

/* {"error":{"message","type","param","code"}} as a malloc'ed string. */
char *hx__srv_error_json(int status, const char *msg, const char *param, const char *code);
const char *hx__srv_status_text(int status);

struct hx_srv_result {
    const char *id, *model, *devices, *policy, *finish_reason;
    int64_t created, prompt_tokens, completion_tokens;
    int64_t cached_tokens; /* usage.prompt_tokens_details.cached_tokens */
    double prompt_tps, gen_tps;
    bool with_ids;       /* write choices[0].token_ids = ids[0..n_ids) */
    const hx_token *ids;
    int64_t n_ids;
};
/* Whole (non-streamed) response body; malloc'ed. */
char *hx__srv_response_json(enum hx_srv_kind kind, const struct hx_srv_result *r,
                            const char *text, size_t text_len);
/* One streamed chunk's JSON: text (may be NULL), role chunk, finish chunk, usage chunk. */
enum hx_srv_chunk { HX_SRV_CHUNK_ROLE, HX_SRV_CHUNK_TEXT, HX_SRV_CHUNK_FINISH, HX_SRV_CHUNK_USAGE };
char *hx__srv_chunk_json(enum hx_srv_kind kind, enum hx_srv_chunk what,
                         const struct hx_srv_result *r, const char *text, size_t text_len);
/* Tool calls (tools.c), loop side. A streamed chat's text (end: the generation is over) as SSE
 * events of content and tool_calls deltas appended to sse; the finish_reason to report
 * ("tool_calls" once a call was made); the whole response of a non-streamed chat. */
void hx__srv_tools_stream(struct hx_srv_tools *t, const struct hx_srv_result *r, const char *text,
                          size_t len, bool end, struct hx_srv_buf *sse);
const char *hx__srv_tools_finish_reason(const struct hx_srv_tools *t, const char *reason);
char *hx__srv_tools_response(struct hx_srv_tools *t, const struct hx_srv_result *r,
                             const char *text, size_t len);

/* ---- tool calls (tools.c) ------------------------------------------------------------------ */

struct json_t;
enum hx_srv_tool_fmt { HX_SRV_TOOLFMT_NONE, HX_SRV_TOOLFMT_QWEN3, HX_SRV_TOOLFMT_LLAMA3 };

/* After the messages: `tools`, `tool_choice`, `parallel_tool_calls` and the messages'
 * `tool_calls` / `tool_call_id`, validated (the failure conventions of hx__srv_gen_req_parse).
 * Sets out->tools, or leaves it NULL when the request has none of these. */
bool hx__srv_tools_parse(struct json_t *root, struct hx_srv_gen_req *out, const char **param,
                         char *msg, size_t msg_cap);
void hx__srv_tools_free(struct hx_srv_tools *t);
/* Loop side, with the chat template's name: check the request against the template's tool
 * format, set r->grammar for tool_choice "required" or a named function, start the output
 * parser. False: a 400 with *param and msg. No-op without r->tools. */
bool hx__srv_tools_prepare(struct hx_srv_gen_req *r, const char *tmpl, const char **param,
                           char *msg, size_t msg_cap);
/* The chat with its tool parts (hx_chat_apply_tools); hx_chat_apply's statuses. */
int hx__srv_tools_render(const struct hx_srv_gen_req *r, const struct hx_model *model,
                         const char *tmpl, bool enable_thinking, char **out);
/* Whether the request's grammar is that of a required call (tool_choice required or named). */
bool hx__srv_tools_constrained(const struct hx_srv_tools *t);
/* Loop side: whether the output is parsed into tool calls (the parser is running). */
bool hx__srv_tools_parsing(const struct hx_srv_tools *t);

/* The output parser (pure). It reports content text and whole calls, in order, through cb
 * (content: name NULL; a call: content NULL, args the arguments' JSON text as generated). */
struct hx_srv_tparse;
typedef void (*hx_srv_tparse_cb)(void *user, const char *content, size_t len, const char *name,
                                 const char *args, size_t args_len);
/* names: the functions a call may name (borrowed). NULL when out of memory. */
struct hx_srv_tparse *hx__srv_tparse_new(enum hx_srv_tool_fmt fmt, char *const *names, int n);
void hx__srv_tparse_push(struct hx_srv_tparse *p, const char *s, size_t n, hx_srv_tparse_cb cb,
                         void *user);
/* The text is over: report what was held back; the parser is then ready for a new text. */
void hx__srv_tparse_end(struct hx_srv_tparse *p, hx_srv_tparse_cb cb, void *user);
void hx__srv_tparse_free(struct hx_srv_tparse *p);

/* ---- SSE framing and stop strings (sse.c) -------------------------------------------------- */

/* Append "data: <json>\n\n" as one HTTP chunk ("<hex>\r\n...\r\n") to b. */
void hx__srv_sse_event(struct hx_srv_buf *b, const char *payload, size_t len);
void hx__srv_http_chunk(struct hx_srv_buf *b, const char *data, size_t len);

struct hx_srv_stopper {
    char **stops; /* borrowed */
    int n_stops;
    struct hx_srv_buf held; /* generated text not yet released */
    bool matched;
};
/* Push newly generated text; appends the text now safe to release to out. Once a stop string
 * is matched, sets matched and releases only the text before it. */
void hx__srv_stopper_push(struct hx_srv_stopper *s, const char *p, size_t n,
                          struct hx_srv_buf *out);
/* End of generation: release everything still held. */
void hx__srv_stopper_finish(struct hx_srv_stopper *s, struct hx_srv_buf *out);
void hx__srv_stopper_free(struct hx_srv_stopper *s);

/* ---- metrics (metrics.c), loop thread only -------------------------------------------------- */

void hx__srv_metrics_request(const char *route, int status);
void hx__srv_metrics_tokens(int64_t prompt, int64_t completion, double prompt_tps,
                            double gen_tps);
void hx__srv_metrics_ttft(double seconds);
void hx__srv_metrics_cancelled(void); /* a generation cancelled (client gone, shutdown) */
/* A job that looked its prompt up in the slots' KV: a hit when cached > 0 tokens reused. */
void hx__srv_metrics_cache(int64_t cached);
/* Prometheus text; devices_text: pre-rendered per-device lines from the worker. */
char *hx__srv_metrics_render(int64_t queue_depth, int64_t active_slots, int64_t in_flight,
                             bool loading, const char *device_lines);

/* ---- the inference worker (worker.c) -------------------------------------------------------- */

struct hx_srv_job;

/* ---- prompt-cache.c: the tokens each slot's KV holds (worker thread only) ------------------ */

struct hx_srv_cached {
    hx_token *toks; /* positions 0..n-1 of the slot's KV (room for n_ctx) */
    int64_t n;
    uint64_t used; /* the LRU clock when the slot was last taken or freed */
};
struct hx_srv_cache {
    struct hx_srv_cached *slot;
    int n_slots;
    uint64_t clock;
};
/* 0, or -1 when out of memory (c is then empty). */
int hx__srv_cache_init(struct hx_srv_cache *c, int n_slots, int64_t n_ctx);
void hx__srv_cache_free(struct hx_srv_cache *c);
/* The free slot (taken[s] NULL) for prompt[0..n), n >= 1, or -1 when none is free; *reuse: how
 * many of its leading tokens that slot's KV can keep (< n; 0 when !use, cache_prompt: false). */
int hx__srv_cache_pick(const struct hx_srv_cache *c, struct hx_srv_job *const *taken,
                       const hx_token *prompt, int64_t n, bool use, int64_t *reuse);
/* Slot s taken by a job, its KV truncated to keep positions. */
void hx__srv_cache_take(struct hx_srv_cache *c, int s, int64_t keep);
/* Slot s's KV now holds toks at positions pos..pos+n-1 (and nothing after them). */
void hx__srv_cache_record(struct hx_srv_cache *c, int s, int64_t pos, const hx_token *toks,
                          int64_t n);
/* Slot s freed with kv_len positions in its KV: the length to truncate the KV to (0 when !keep). */
int64_t hx__srv_cache_release(struct hx_srv_cache *c, int s, int64_t kv_len, bool keep);

enum hx_srv_ev_type {
    HX_SRV_EV_LOADED,   /* model and context ready (job NULL) */
    HX_SRV_EV_LOAD_FAILED,
    HX_SRV_EV_ACCEPTED, /* prompt tokenized and fits; generation will follow */
    HX_SRV_EV_TEXT,     /* text released for the client */
    HX_SRV_EV_ERROR,    /* terminal: status + message */
    HX_SRV_EV_DONE,     /* terminal: finish_reason, usage, timings */
};

struct hx_srv_event {
    struct hx_srv_event *next;
    enum hx_srv_ev_type type;
    struct hx_srv_job *job;
    char *text; /* TEXT: text; ERROR/LOAD_FAILED: message; LOADED: the plan's policy and
                   devices line; malloc'ed */
    size_t text_len;
    int status;                /* ERROR: HTTP status */
    const char *code;          /* ERROR: OpenAI error code or NULL (static) */
    const char *param;         /* ERROR: OpenAI param or NULL (static) */
    const char *finish_reason; /* DONE: "stop", "length", "cancelled" (static) */
    hx_token *ids;             /* DONE with return_token_ids: generated ids (malloc'ed) */
    int64_t n_ids;
    int64_t prompt_tokens;     /* ACCEPTED: the prompt's tokens; ERROR/DONE: those prefilled */
    int64_t completion_tokens; /* ERROR/DONE: tokens generated (cancelled ones included) */
    int64_t cached_tokens;     /* ERROR/DONE: prompt tokens taken from the slot's KV cache */
    bool cache_lookup;         /* ERROR/DONE: the job got a slot with cache_prompt on */
    double ttft_s, prompt_tps, gen_tps;
    char devices[64];
};

struct hx_srv_worker_params {
    const char *model_path, *backend, *policy, *fallback, *chat_template;
    const char *mem; /* --mem caps, NULL = none */
    bool progress;   /* --progress: loading progress on stderr even when it is no tty */
    int n_parallel, n_threads;
    int n_cache_slots;      /* KV sequences beyond n_parallel that only hold cached prompts */
    int64_t n_ctx, n_batch; /* 0: the engine's defaults */
};

/* Called on the loop thread for each event, in order; the callee takes ownership of ev. */
typedef void (*hx_srv_event_cb)(struct hx_srv_event *ev, void *user_data);

struct uv_loop_s;
int hx__srv_worker_start(struct uv_loop_s *loop, const struct hx_srv_worker_params *p,
                         hx_srv_event_cb cb, void *user_data);
/* Submit a parsed request (ownership of req moves to the job). Returns the job; terminal
 * events (ERROR or DONE) arrive exactly once, after which the loop frees it with
 * hx__srv_job_free. */
struct hx_srv_job *hx__srv_worker_submit(struct hx_srv_gen_req *req, void *owner);
void hx__srv_worker_cancel(struct hx_srv_job *job); /* loop thread; DONE("cancelled") follows */
void hx__srv_job_free(struct hx_srv_job *job);
void *hx__srv_job_owner(struct hx_srv_job *job);
void hx__srv_job_set_owner(struct hx_srv_job *job, void *owner);
const struct hx_srv_gen_req *hx__srv_job_req(const struct hx_srv_job *job);
void hx__srv_worker_stop(void); /* join the worker, free model and context */
void hx__srv_worker_counts(int64_t *queued, int64_t *active);
char *hx__srv_worker_device_lines(void); /* Prometheus lines, malloc'ed */
const char *hx__srv_worker_model_id(void);
const char *hx__srv_worker_policy(void);
/* Set once loaded: why the model's own chat template cannot be used (no --chat-template and
 * none detected), or NULL. Chat requests then answer 501. */
const char *hx__srv_worker_chat_error(void);
const char *hx__srv_worker_devices(void); /* last devices string (loop-side copy) */
void hx__srv_worker_note_devices(const char *devices);
int64_t hx__srv_worker_n_ctx(void);
int hx__srv_worker_n_slots(void);
/* The chat template's name (--chat-template, or the one the model's own was detected as), or
 * NULL when chat is unavailable. */
const char *hx__srv_worker_chat_template(void);
/* GET /slots: one JSON object per slot, a JSON array as a malloc'ed string (NULL: no memory).
 * A snapshot the worker refreshes at the start of every step. */
char *hx__srv_worker_slots_json(void);

/* One access-log line's facts (http.c prints it and counts it in hx_requests_total). A request
 * whose client went away while its generation ran is logged when the generation's terminal
 * event arrives, so that the line and /metrics count the same tokens. */
struct hx_srv_access {
    uint64_t req_id;
    char method[12], route[40];
    int status;
    bool truncated; /* a stream that ended without its finish chunk and [DONE] */
    int64_t prompt_tokens, completion_tokens;
    int64_t cached_tokens; /* of prompt_tokens, taken from the prompt cache */
    double t_start, t_first, t_end; /* t_first 0: no token yet; t_end 0: now */
};
void hx__srv_access_log(const struct hx_srv_access *a);
/* The job's deferred access line (loop side): set when its client is gone, freed with it. */
void hx__srv_job_set_access(struct hx_srv_job *job, struct hx_srv_access *a);
struct hx_srv_access *hx__srv_job_access(struct hx_srv_job *job);

/* ---- self-test (selftest.c) -------------------------------------------------------------- */
/* model_path (or NULL): a model to build the structured-output grammars for. */
int hx__srv_selftest(const char *model_path);
/* selftest-schema.c: the JSON-Schema compiler and response_format; counts into *failures. */
void hx__srv_selftest_schema(const char *model_path, int *failures);
/* selftest-tools.c: tool calls (with model_path: their grammars built for it); the failures. */
int hx__srv_selftest_tools(const char *model_path);

/* ---- connections (http.c) and routes (routes.c), loop thread only -------------------------- */

struct uv_stream_s;

struct hx_srv_conn {
    struct hx_srv_conn *prev, *next; /* all open connections */
    void *tcp, *timer;               /* uv_tcp_t / uv_timer_t (heap, freed when closed) */
    int handles_open;
    struct hx_srv_reqp rp;
    struct hx_srv_buf in; /* received bytes not yet parsed (pipelined requests) */
    bool busy;            /* a request is being answered */
    bool closing, lingering, reading, in_process, sent_continue, keep_alive;
    bool http10; /* the request being answered is HTTP/1.0 */
    int pending_writes;
    size_t pending_bytes; /* written to libuv, not yet on the wire (the peer not reading) */
    int timer_mode; /* 0 off, 1 idle, 2 request, 3 stream tick, 4 linger */
    /* the request being answered */
    uint64_t req_id;
    double t_start, t_first, last_write_s;
    char method[12], route[40];
    int status;
    bool truncated; /* the stream was cut short (see struct hx_srv_access) */
    int64_t prompt_tokens, completion_tokens, cached_tokens;
    /* generation */
    struct hx_srv_job *job;
    enum hx_srv_kind kind;
    bool stream, include_usage, return_ids, headers_sent;
    char id[48];
    int64_t created;
    struct hx_srv_buf text; /* non-streamed text so far */
};

struct hx_srv_http_opts {
    const char *host;
    int port;
    double request_timeout_s; /* head + body must arrive within this: 408 */
    double idle_timeout_s;    /* keep-alive connections with no request: closed */
    double keepalive_s;       /* SSE comment interval while no token flows */
};

typedef void (*hx_srv_request_cb)(struct hx_srv_conn *c);
typedef void (*hx_srv_conn_closed_cb)(struct hx_srv_conn *c);

int hx__srv_http_listen(struct uv_loop_s *loop, const struct hx_srv_http_opts *o,
                        hx_srv_request_cb on_request, hx_srv_conn_closed_cb on_closed,
                        int *bound_port);
void hx__srv_http_stop_listening(void);
void hx__srv_http_close_idle(void); /* connections not answering a request */
void hx__srv_http_close_all(void);
int64_t hx__srv_http_n_conns(void);
struct hx_srv_conn *hx__srv_http_first(void);

/* A whole response (Content-Length); extra_headers: "Name: value\r\n"... or NULL. Ends the
 * request: access log, metrics, then the next pipelined request or keep-alive wait. */
void hx__srv_respond(struct hx_srv_conn *c, int status, const char *content_type,
                     const char *body, size_t len, const char *extra_headers);
void hx__srv_respond_error(struct hx_srv_conn *c, int status, const char *msg,
                           const char *param, const char *code, const char *extra_headers);
/* A chunked text/event-stream response: head, framed bytes, end. */
void hx__srv_stream_begin(struct hx_srv_conn *c);
void hx__srv_stream_send(struct hx_srv_conn *c, const char *data, size_t len);
void hx__srv_stream_end(struct hx_srv_conn *c);

/* routes.c */
struct hx_srv_config {
    const char *api_key;
    int n_parallel, n_queue;
    bool loading, draining;
    int64_t in_flight; /* submitted jobs whose terminal event has not arrived */
    double keepalive_s; /* SSE comment after this long without a write */
};
extern struct hx_srv_config hx__srv_cfg;
void hx__srv_route(struct hx_srv_conn *c);
/* The connection closes while c->job runs: cancel it; `a` (or NULL) is the request's access
 * line, printed once the job's terminal event tells how many tokens it made. */
void hx__srv_route_conn_closed(struct hx_srv_conn *c, const struct hx_srv_access *a);
void hx__srv_route_event(struct hx_srv_event *ev);
void hx__srv_route_keepalive(struct hx_srv_conn *c); /* timer tick while streaming */
