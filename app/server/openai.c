/*
 * openai.c — the OpenAI JSON shapes: request validation for /v1/chat/completions and
 * /v1/completions, whole responses, streamed chunks and the error object, on jansson.
 *
 * Validation answers every problem with a message naming the field (OpenAI's `param`); a
 * field that is present as JSON null counts as absent. Generated text is sanitized to valid
 * UTF-8 before it becomes a JSON string, so a response is always valid JSON.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server.h"

#define HX_SRV_FAIL(p, ...)                                                                  \
    do {                                                                                     \
        *param = (p);                                                                        \
        snprintf(msg, msg_cap, __VA_ARGS__);                                                 \
        goto fail;                                                                           \
    } while (0)

/* Field lookup: NULL for absent or null. */
static json_t *hx_srv_field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return (v && json_is_null(v)) ? NULL : v;
}

/* number in [lo, hi]; 1 = set, 0 = absent, -1 = bad */
static int hx_srv_num(json_t *o, const char *key, double lo, double hi, double *out)
{
    json_t *v = hx_srv_field(o, key);
    if (!v) return 0;
    if (!json_is_number(v)) return -1;
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return -1;
    *out = d;
    return 1;
}

static int hx_srv_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = hx_srv_field(o, key);
    if (!v) return 0;
    if (json_is_real(v)) { /* 16.0 is fine, 16.5 is not */
        double d = json_real_value(v);
        if (d != floor(d) || d < (double)lo || d > (double)hi) return -1;
        *out = (int64_t)d;
        return 1;
    }
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) return -1;
    *out = i;
    return 1;
}

static int hx_srv_bool(json_t *o, const char *key, bool *out)
{
    json_t *v = hx_srv_field(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return -1;
    *out = json_is_true(v);
    return 1;
}

/* Message content: a string, or an array of {"type":"text","text":...} parts. */
static char *hx_srv_content(json_t *c, bool *bad)
{
    *bad = false;
    if (!c || json_is_null(c)) return strdup("");
    if (json_is_string(c)) return strndup(json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) {
        *bad = true;
        return NULL;
    }
    struct hx_srv_buf b = {0};
    hx__srv_buf_append(&b, "", 0);
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            *bad = true;
            hx__srv_buf_free(&b);
            return NULL;
        }
        hx__srv_buf_append(&b, json_string_value(text), json_string_length(text));
    }
    if (b.failed) {
        hx__srv_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* The roles a message may have, in the order the error message and docs/server.md list them
 * ("developer" is OpenAI's newer name for "system" and is rendered as one). */
static const char *const hx_srv_roles[] = {"system", "developer", "user", "assistant", "tool"};
#define HX_SRV_N_ROLES (sizeof hx_srv_roles / sizeof hx_srv_roles[0])

static bool hx_srv_role_ok(const char *r)
{
    for (size_t i = 0; i < HX_SRV_N_ROLES; i++)
        if (!strcmp(r, hx_srv_roles[i])) return true;
    return false;
}

/* "system, developer, user, assistant or tool" */
static const char *hx_srv_role_list(void)
{
    static char list[128];
    if (list[0]) return list;
    size_t n = 0;
    for (size_t i = 0; i < HX_SRV_N_ROLES; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                              i == 0                    ? ""
                              : i + 1 == HX_SRV_N_ROLES ? " or "
                                                        : ", ",
                              hx_srv_roles[i]);
    return list;
}

static bool hx_srv_parse_messages(json_t *root, struct hx_srv_gen_req *out, const char **param,
                                  char *msg, size_t msg_cap)
{
    json_t *m = json_object_get(root, "messages");
    if (!m || json_is_null(m)) HX_SRV_FAIL("messages", "'messages' is required");
    if (!json_is_array(m)) HX_SRV_FAIL("messages", "'messages' must be an array");
    size_t n = json_array_size(m);
    if (n == 0) HX_SRV_FAIL("messages", "'messages' must not be empty");
    out->msgs = calloc(n, sizeof *out->msgs);
    if (!out->msgs) HX_SRV_FAIL(NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(m, i);
        json_t *role = json_is_object(e) ? json_object_get(e, "role") : NULL;
        if (!json_is_object(e)) HX_SRV_FAIL("messages", "messages[%zu] must be an object", i);
        if (!json_is_string(role) || !hx_srv_role_ok(json_string_value(role)))
            HX_SRV_FAIL("messages", "messages[%zu].role must be %s", i, hx_srv_role_list());
        bool bad;
        char *content = hx_srv_content(json_object_get(e, "content"), &bad);
        if (bad) HX_SRV_FAIL("messages", "messages[%zu].content must be a string or text parts", i);
        if (!content) HX_SRV_FAIL(NULL, "out of memory");
        const char *r = json_string_value(role);
        out->msgs[i].role = strdup(!strcmp(r, "developer") ? "system" : r);
        out->msgs[i].content = content;
        out->n_msgs = i + 1;
        if (!out->msgs[i].role) HX_SRV_FAIL(NULL, "out of memory");
    }
    return true;
fail:
    return false;
}

static bool hx_srv_parse_prompt(json_t *root, struct hx_srv_gen_req *out, const char **param,
                                char *msg, size_t msg_cap)
{
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) HX_SRV_FAIL("prompt", "'prompt' is required");
    if (json_is_array(p)) {
        if (json_array_size(p) != 1 || !json_is_string(json_array_get(p, 0)))
            HX_SRV_FAIL("prompt", "'prompt' must be a string or an array of one string");
        p = json_array_get(p, 0);
    }
    if (!json_is_string(p)) HX_SRV_FAIL("prompt", "'prompt' must be a string");
    out->prompt = strndup(json_string_value(p), json_string_length(p));
    if (!out->prompt) HX_SRV_FAIL(NULL, "out of memory");
    return true;
fail:
    return false;
}

static bool hx_srv_parse_stop(json_t *root, struct hx_srv_gen_req *out, const char **param,
                              char *msg, size_t msg_cap)
{
    json_t *s = hx_srv_field(root, "stop");
    if (!s) return true;
    size_t n = json_is_array(s) ? json_array_size(s) : 1;
    if (!json_is_array(s) && !json_is_string(s))
        HX_SRV_FAIL("stop", "'stop' must be a string or an array of strings");
    if (n > HX_SRV_MAX_STOPS) HX_SRV_FAIL("stop", "at most %d stop strings", HX_SRV_MAX_STOPS);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(s) ? json_array_get(s, i) : s;
        if (!json_is_string(e)) HX_SRV_FAIL("stop", "'stop' must be a string or an array of strings");
        if (json_string_length(e) == 0) continue;
        if (json_string_length(e) > 1024) HX_SRV_FAIL("stop", "stop strings are limited to 1024 bytes");
        out->stops[out->n_stops] = strndup(json_string_value(e), json_string_length(e));
        if (!out->stops[out->n_stops++]) HX_SRV_FAIL(NULL, "out of memory");
    }
    return true;
fail:
    return false;
}

static bool hx_srv_parse_sampling(json_t *root, struct hx_srv_gen_req *out, const char **param,
                                  char *msg, size_t msg_cap)
{
    struct hx_sampler_params *sp = &out->sp;
    double d;
    int64_t i;
    bool penalties = false;
    int r = hx_srv_num(root, "temperature", 0, 100, &d);
    if (r < 0) HX_SRV_FAIL("temperature", "'temperature' must be a number in [0, 100]");
    if (r > 0) sp->temperature = (float)d;
    r = hx_srv_num(root, "top_p", 0, 1, &d);
    if (r < 0) HX_SRV_FAIL("top_p", "'top_p' must be a number in [0, 1]");
    if (r > 0) sp->top_p = d <= 0 ? 1e-6f : (float)d;
    r = hx_srv_int(root, "top_k", 0, INT32_MAX, &i);
    if (r < 0) HX_SRV_FAIL("top_k", "'top_k' must be a non-negative integer");
    if (r > 0) sp->top_k = (int32_t)i;
    r = hx_srv_num(root, "min_p", 0, 1, &d);
    if (r < 0) HX_SRV_FAIL("min_p", "'min_p' must be a number in [0, 1]");
    if (r > 0) sp->min_p = (float)d;
    r = hx_srv_num(root, "presence_penalty", -2, 2, &d);
    if (r < 0) HX_SRV_FAIL("presence_penalty", "'presence_penalty' must be a number in [-2, 2]");
    if (r > 0) sp->presence_penalty = (float)d, penalties = penalties || d != 0;
    r = hx_srv_num(root, "frequency_penalty", -2, 2, &d);
    if (r < 0) HX_SRV_FAIL("frequency_penalty", "'frequency_penalty' must be a number in [-2, 2]");
    if (r > 0) sp->frequency_penalty = (float)d, penalties = penalties || d != 0;
    r = hx_srv_num(root, "repeat_penalty", 1e-3, 100, &d);
    if (r < 0) HX_SRV_FAIL("repeat_penalty", "'repeat_penalty' must be a positive number");
    if (r > 0) sp->repeat_penalty = (float)d, penalties = penalties || d != 1;
    if (penalties) sp->penalty_last_n = 64;
    json_t *seed = hx_srv_field(root, "seed");
    if (seed) {
        if (!json_is_integer(seed)) HX_SRV_FAIL("seed", "'seed' must be an integer");
        sp->seed = (uint64_t)json_integer_value(seed);
        out->seed_set = true;
    }
    return true;
fail:
    return false;
}

static bool hx_srv_parse_options(json_t *root, struct hx_srv_gen_req *out, const char **param,
                                 char *msg, size_t msg_cap)
{
    int64_t i;
    json_t *model = hx_srv_field(root, "model");
    if (model && !json_is_string(model)) HX_SRV_FAIL("model", "'model' must be a string");
    if (model && !(out->model = strdup(json_string_value(model)))) HX_SRV_FAIL(NULL, "out of memory");
    int r = hx_srv_int(root, "max_completion_tokens", 1, INT32_MAX, &i);
    if (r == 0) r = hx_srv_int(root, "max_tokens", 1, INT32_MAX, &i);
    if (r < 0) HX_SRV_FAIL("max_tokens", "'max_tokens' must be a positive integer");
    if (r > 0) out->max_tokens = i;
    r = hx_srv_int(root, "n", 1, INT32_MAX, &i);
    if (r < 0 || (r > 0 && i != 1)) HX_SRV_FAIL("n", "only n = 1 is supported");
    if (hx_srv_bool(root, "stream", &out->stream) < 0) HX_SRV_FAIL("stream", "'stream' must be a boolean");
    json_t *so = hx_srv_field(root, "stream_options");
    if (so && !json_is_object(so)) HX_SRV_FAIL("stream_options", "'stream_options' must be an object");
    if (so && hx_srv_bool(so, "include_usage", &out->include_usage) < 0)
        HX_SRV_FAIL("stream_options", "'stream_options.include_usage' must be a boolean");
    json_t *kw = hx_srv_field(root, "chat_template_kwargs");
    if (kw && !json_is_object(kw)) HX_SRV_FAIL("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (kw && hx_srv_bool(kw, "enable_thinking", &out->enable_thinking) < 0)
        HX_SRV_FAIL("chat_template_kwargs", "'enable_thinking' must be a boolean");
    if (hx_srv_bool(root, "enable_thinking", &out->enable_thinking) < 0)
        HX_SRV_FAIL("enable_thinking", "'enable_thinking' must be a boolean");
    if (hx_srv_bool(root, "return_token_ids", &out->return_token_ids) < 0)
        HX_SRV_FAIL("return_token_ids", "'return_token_ids' must be a boolean");
    if (hx_srv_bool(root, "cache_prompt", &out->cache_prompt) < 0)
        HX_SRV_FAIL("cache_prompt", "'cache_prompt' must be a boolean");
    bool lp = false;
    if (hx_srv_bool(root, "logprobs", &lp) < 0 || lp) HX_SRV_FAIL("logprobs", "logprobs are not supported");
    return true;
fail:
    return false;
}

/* response_format → req->grammar: {"type":"text"}, {"type":"json_object"} (any JSON object;
 * a "schema" next to it, as llama-server takes, is honoured), {"type":"json_schema",
 * "json_schema":{"name","schema","strict","description"}}. Every problem names the field. */
static bool hx_srv_parse_response_format(json_t *root, struct hx_srv_gen_req *out,
                                         const char **param, char *msg, size_t msg_cap)
{
    json_t *rf = hx_srv_field(root, "response_format");
    if (!rf) return true;
    const char *P = "response_format";
    if (!json_is_object(rf)) HX_SRV_FAIL(P, "'response_format' must be an object");
    json_t *type = json_object_get(rf, "type");
    const char *t = json_is_string(type) ? json_string_value(type) : "";
    json_t *schema = NULL; /* borrowed from root */
    const char *fixed = "{\"type\":\"object\"}", *where = "response_format.schema";
    if (!strcmp(t, "text")) return true;
    if (!strcmp(t, "json_object")) {
        schema = hx_srv_field(rf, "schema");
    } else if (!strcmp(t, "json_schema")) {
        json_t *js = hx_srv_field(rf, "json_schema");
        if (!json_is_object(js))
            HX_SRV_FAIL(P, "response_format.json_schema must be an object with the schema");
        json_t *name = hx_srv_field(js, "name"), *strict = hx_srv_field(js, "strict");
        json_t *desc = hx_srv_field(js, "description");
        if (name && !json_is_string(name))
            HX_SRV_FAIL(P, "response_format.json_schema.name must be a string");
        if (strict && !json_is_boolean(strict))
            HX_SRV_FAIL(P, "response_format.json_schema.strict must be a boolean");
        if (desc && !json_is_string(desc))
            HX_SRV_FAIL(P, "response_format.json_schema.description must be a string");
        schema = hx_srv_field(js, "schema");
        fixed = "true"; /* no schema: any JSON value */
        where = "response_format.json_schema.schema";
    } else {
        HX_SRV_FAIL(P, "response_format.type must be 'text', 'json_object' or 'json_schema'");
    }
    /* the compiler reads text: the schema as sent, or the fixed one */
    char *text = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (schema && !text) HX_SRV_FAIL(NULL, "out of memory");
    const char *src = text ? text : fixed;
    struct hx_srv_buf g = {0};
    char err[384];
    bool ok = hx__srv_schema_gbnf(src, strlen(src), "", &g, err, sizeof err);
    free(text);
    if (ok && g.failed) {
        hx__srv_buf_free(&g);
        HX_SRV_FAIL(NULL, "out of memory");
    }
    if (!ok) {
        hx__srv_buf_free(&g);
        HX_SRV_FAIL(P, "%s: %s", where, err);
    }
    out->grammar = g.data;
    return true;
fail:
    return false;
}

bool hx__srv_gen_req_parse(enum hx_srv_kind kind, const char *body, size_t len,
                           struct hx_srv_gen_req *out, const char **param, char *msg,
                           size_t msg_cap)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->enable_thinking = true;
    out->cache_prompt = true;
    out->sp.struct_size = sizeof out->sp;
    hx_sampler_params_init(&out->sp);
    *param = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) HX_SRV_FAIL(NULL, "malformed JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    if (!json_is_object(root)) HX_SRV_FAIL(NULL, "the request body must be a JSON object");
    bool ok = hx_srv_parse_options(root, out, param, msg, msg_cap) &&
              hx_srv_parse_sampling(root, out, param, msg, msg_cap) &&
              hx_srv_parse_stop(root, out, param, msg, msg_cap) &&
              hx_srv_parse_response_format(root, out, param, msg, msg_cap) &&
              (kind == HX_SRV_CHAT ? hx_srv_parse_messages(root, out, param, msg, msg_cap) &&
                                         hx__srv_tools_parse(root, out, param, msg, msg_cap)
                                   : hx_srv_parse_prompt(root, out, param, msg, msg_cap));
    json_decref(root);
    if (!ok) hx__srv_gen_req_free(out);
    return ok;
fail:
    json_decref(root);
    hx__srv_gen_req_free(out);
    return false;
}

void hx__srv_gen_req_free(struct hx_srv_gen_req *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].role);
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->model);
    free(r->prompt);
    free(r->grammar);
    r->grammar = NULL;
    hx__srv_tools_free(r->tools);
    r->tools = NULL;
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    r->msgs = NULL;
    r->n_msgs = 0;
    r->model = r->prompt = NULL;
    r->n_stops = 0;
}

const char *hx__srv_status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static const char *hx_srv_error_type(int status)
{
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

/* Copy of s with invalid UTF-8 replaced by U+FFFD (jansson refuses invalid strings). */
static json_t *hx_srv_jstr(const char *s, size_t n)
{
    json_t *j = json_stringn(s ? s : "", s ? n : 0);
    if (j) return j;
    struct hx_srv_buf b = {0};
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = k && i + k <= n;
        for (size_t t = 1; ok && t < k; t++) ok = ((unsigned char)s[i + t] >> 6) == 2;
        if (ok && k > 1) { /* let jansson judge overlong forms and surrogates */
            json_t *t = json_stringn(s + i, k);
            ok = t != NULL;
            json_decref(t);
        }
        if (ok) {
            hx__srv_buf_append(&b, s + i, k);
            i += k;
        } else {
            hx__srv_buf_append(&b, "\xEF\xBF\xBD", 3);
            i += 1;
        }
    }
    j = json_stringn(b.data ? b.data : "", b.len);
    hx__srv_buf_free(&b);
    return j;
}

char *hx__srv_error_json(int status, const char *msg, const char *param, const char *code)
{
    json_t *e = json_object();
    json_object_set_new(e, "message", hx_srv_jstr(msg, strlen(msg)));
    json_object_set_new(e, "type", json_string(hx_srv_error_type(status)));
    json_object_set_new(e, "param", param ? json_string(param) : json_null());
    json_object_set_new(e, "code", code ? json_string(code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", e);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static json_t *hx_srv_usage(const struct hx_srv_result *r)
{
    return json_pack("{sIsIsIs{sI}}", "prompt_tokens", (json_int_t)r->prompt_tokens,
                     "completion_tokens", (json_int_t)r->completion_tokens, "total_tokens",
                     (json_int_t)(r->prompt_tokens + r->completion_tokens),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)r->cached_tokens);
}

static json_t *hx_srv_hx(const struct hx_srv_result *r)
{
    return json_pack("{sssssfsf}", "devices", r->devices ? r->devices : "", "policy",
                     r->policy ? r->policy : "", "prompt_tokens_per_s", r->prompt_tps,
                     "generation_tokens_per_s", r->gen_tps);
}

static void hx_srv_set_ids(json_t *choice, const struct hx_srv_result *r)
{
    if (!r->with_ids) return;
    json_t *a = json_array();
    for (int64_t i = 0; i < r->n_ids; i++) json_array_append_new(a, json_integer(r->ids[i]));
    json_object_set_new(choice, "token_ids", a);
}

static json_t *hx_srv_head(const struct hx_srv_result *r, const char *object)
{
    return json_pack("{sssssIss}", "id", r->id, "object", object, "created", (json_int_t)r->created,
                     "model", r->model ? r->model : "");
}

char *hx__srv_response_json(enum hx_srv_kind kind, const struct hx_srv_result *r,
                            const char *text, size_t text_len)
{
    bool chat = kind == HX_SRV_CHAT;
    json_t *root = hx_srv_head(r, chat ? "chat.completion" : "text_completion");
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", hx_srv_jstr(text, text_len));
        json_object_set_new(choice, "message", m);
    } else {
        json_object_set_new(choice, "text", hx_srv_jstr(text, text_len));
    }
    json_object_set_new(choice, "logprobs", json_null());
    json_object_set_new(choice, "finish_reason", json_string(r->finish_reason));
    hx_srv_set_ids(choice, r);
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    json_object_set_new(root, "usage", hx_srv_usage(r));
    json_object_set_new(root, "hx", hx_srv_hx(r));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

char *hx__srv_chunk_json(enum hx_srv_kind kind, enum hx_srv_chunk what,
                         const struct hx_srv_result *r, const char *text, size_t text_len)
{
    bool chat = kind == HX_SRV_CHAT;
    json_t *root = hx_srv_head(r, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choices = json_array();
    if (what != HX_SRV_CHUNK_USAGE) {
        json_t *c = json_object();
        json_object_set_new(c, "index", json_integer(0));
        if (chat) {
            json_t *delta = json_object();
            if (what == HX_SRV_CHUNK_ROLE) {
                json_object_set_new(delta, "role", json_string("assistant"));
                json_object_set_new(delta, "content", json_string(""));
            } else if (what == HX_SRV_CHUNK_TEXT) {
                json_object_set_new(delta, "content", hx_srv_jstr(text, text_len));
            }
            json_object_set_new(c, "delta", delta);
        } else {
            json_object_set_new(c, "text", hx_srv_jstr(what == HX_SRV_CHUNK_TEXT ? text : "",
                                                       what == HX_SRV_CHUNK_TEXT ? text_len : 0));
        }
        json_object_set_new(c, "logprobs", json_null());
        json_object_set_new(c, "finish_reason", what == HX_SRV_CHUNK_FINISH
                                                    ? json_string(r->finish_reason)
                                                    : json_null());
        if (what == HX_SRV_CHUNK_FINISH) hx_srv_set_ids(c, r);
        json_array_append_new(choices, c);
    }
    json_object_set_new(root, "choices", choices);
    if (what == HX_SRV_CHUNK_USAGE) json_object_set_new(root, "usage", hx_srv_usage(r));
    if (what == HX_SRV_CHUNK_FINISH || what == HX_SRV_CHUNK_USAGE)
        json_object_set_new(root, "hx", hx_srv_hx(r));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}
