/*
 * tools.c — tool calls in /v1/chat/completions (docs/server.md "Tool calls").
 *
 * Owns: the request's `tools`, `tool_choice` and `parallel_tool_calls`, and the messages'
 * assistant `tool_calls` and tool `tool_call_id` (validated, kept as struct hx_srv_tools);
 * the chat's rendering with them (hx_chat_apply_tools, in the model's tool format); the
 * grammar that makes the output exactly one call for tool_choice "required" or a named
 * function (each function's parameters compiled by hx__srv_schema_gbnf); and the parser that
 * turns the model's output into OpenAI's `tool_calls`, whole or streamed, with the same
 * result for any split of the text (the streamed deltas of a call come once it is complete
 * and known to parse).
 *
 * Formats: qwen3/chatml: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks
 * anywhere in the answer; llama3: the whole answer one JSON object {"name": ...,
 * "parameters": {...}} ("arguments" taken too). What does not parse as a call of a declared
 * function stays content.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <jansson.h>

#include "server.h"

#define HX_SRV_MIN_SZ(a, b) ((a) < (b) ? (a) : (b))
#define HX_SRV_FAIL(p, ...)                                                                        \
    do {                                                                                           \
        *param = (p);                                                                              \
        snprintf(msg, msg_cap, __VA_ARGS__);                                                       \
        goto fail;                                                                                 \
    } while (0)

enum hx_srv_tool_choice { HX_SRV_TC_AUTO, HX_SRV_TC_NONE, HX_SRV_TC_REQUIRED, HX_SRV_TC_NAMED };

struct hx_srv_tools {
    int n_fns;
    char **names;  /* the functions, in order */
    char **params; /* each one's parameters schema as JSON text, NULL when not given */
    char *json;    /* the tools array to render; NULL: none are (no tools, or choice "none") */
    enum hx_srv_tool_choice choice;
    int named; /* HX_SRV_TC_NAMED: index into names */
    /* the messages with their tool parts; role and content borrowed from the request */
    struct hx_chat_message *msgs;
    struct hx_chat_tool_call *calls; /* all assistant calls, owned strings */
    size_t n_calls;
    bool tool_msgs; /* some message has role "tool" */
    /* loop side */
    enum hx_srv_tool_fmt fmt;
    struct hx_srv_tparse *parse; /* NULL: the output is not parsed */
    int n_out;                   /* calls reported so far */
    /* a constrained call ("required" or named) streamed as it is generated: the grammar fixes
     * everything but the name and the arguments' text */
    struct hx_srv_buf cbuf; /* the output so far */
    size_t c_args_at;       /* where the arguments start (0: the head is not complete yet) */
    size_t c_sent;          /* bytes of cbuf streamed as arguments */
};

static const char *const hx_srv_choice_names[] = {"auto", "none", "required"};

/* OpenAI's rule for function names */
static bool hx_srv_fn_name_ok(json_t *n)
{
    if (!json_is_string(n)) return false;
    size_t len = json_string_length(n);
    const char *s = json_string_value(n);
    if (len < 1 || len > 64) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

void hx__srv_tools_free(struct hx_srv_tools *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_fns; i++) {
        free(t->names[i]);
        free(t->params[i]);
    }
    free(t->names);
    free(t->params);
    free(t->json);
    free(t->msgs);
    for (size_t i = 0; i < t->n_calls; i++) {
        free((char *)t->calls[i].name);
        free((char *)t->calls[i].arguments);
    }
    free(t->calls);
    hx__srv_tparse_free(t->parse);
    hx__srv_buf_free(&t->cbuf);
    free(t);
}

/* The schema compiler's verdict on a function's parameters (or on their absence). */
static bool hx_srv_fn_rules(const char *params, int i, struct hx_srv_buf *out, char *err,
                            size_t err_cap)
{
    /* no parameters: a function of none, {} (OpenAI: "an empty parameter list") */
    const char *src =
        params ? params : "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";
    char prefix[16];
    snprintf(prefix, sizeof prefix, "f%d-", i);
    return hx__srv_schema_gbnf(src, strlen(src), prefix, out, err, err_cap);
}

static bool hx_srv_parse_tool_list(json_t *tools, struct hx_srv_tools *t, const char **param,
                                   char *msg, size_t msg_cap)
{
    if (!json_is_array(tools)) HX_SRV_FAIL("tools", "'tools' must be an array");
    size_t n = json_array_size(tools);
    if (n > 128) HX_SRV_FAIL("tools", "at most 128 tools");
    t->names = calloc(n ? n : 1, sizeof *t->names);
    t->params = calloc(n ? n : 1, sizeof *t->params);
    if (!t->names || !t->params) HX_SRV_FAIL(NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(tools, i);
        json_t *type = json_is_object(e) ? json_object_get(e, "type") : NULL;
        json_t *fn = json_is_object(e) ? json_object_get(e, "function") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") ||
            !json_is_object(fn))
            HX_SRV_FAIL("tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {...}}",
                        i);
        json_t *name = json_object_get(fn, "name");
        if (!hx_srv_fn_name_ok(name))
            HX_SRV_FAIL("tools",
                        "tools[%zu].function.name must be 1 to 64 of a-z, A-Z, 0-9, _ "
                        "and -",
                        i);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(t->names[k], json_string_value(name)))
                HX_SRV_FAIL("tools", "tools[%zu]: the function name '%s' is used twice", i,
                            json_string_value(name));
        json_t *desc = json_object_get(fn, "description");
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            HX_SRV_FAIL("tools", "tools[%zu].function.description must be a string", i);
        json_t *strict = json_object_get(fn, "strict");
        if (strict && !json_is_null(strict) && !json_is_boolean(strict))
            HX_SRV_FAIL("tools", "tools[%zu].function.strict must be a boolean", i);
        t->names[i] = strdup(json_string_value(name));
        t->n_fns = (int)i + 1;
        if (!t->names[i]) HX_SRV_FAIL(NULL, "out of memory");
        json_t *p = json_object_get(fn, "parameters");
        if (p && !json_is_null(p)) {
            json_t *pt = json_is_object(p) ? json_object_get(p, "type") : NULL;
            if (!json_is_object(p) ||
                (pt && (!json_is_string(pt) || strcmp(json_string_value(pt), "object"))))
                HX_SRV_FAIL("tools",
                            "tools[%zu].function.parameters must be a JSON Schema "
                            "object of type \"object\"",
                            i);
            t->params[i] = json_dumps(p, JSON_COMPACT);
            if (!t->params[i]) HX_SRV_FAIL(NULL, "out of memory");
        }
        struct hx_srv_buf g = {0};
        char err[384];
        bool ok = hx_srv_fn_rules(t->params[i], (int)i, &g, err, sizeof err);
        bool oom = g.failed;
        hx__srv_buf_free(&g);
        if (ok && oom) HX_SRV_FAIL(NULL, "out of memory");
        if (!ok) HX_SRV_FAIL("tools", "tools[%zu].function.parameters: %s", i, err);
    }
    return true;
fail:
    return false;
}

static bool hx_srv_parse_choice(json_t *root, struct hx_srv_tools *t, const char **param, char *msg,
                                size_t msg_cap)
{
    json_t *c = json_object_get(root, "tool_choice");
    t->choice = t->n_fns > 0 ? HX_SRV_TC_AUTO : HX_SRV_TC_NONE; /* OpenAI's defaults */
    if (!c || json_is_null(c)) return true;
    if (json_is_string(c)) {
        size_t k = 0;
        while (k < 3 && strcmp(json_string_value(c), hx_srv_choice_names[k])) k++;
        if (k == 3)
            HX_SRV_FAIL("tool_choice",
                        "'tool_choice' must be \"auto\", \"none\", \"required\" "
                        "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        t->choice = (enum hx_srv_tool_choice)k;
    } else {
        json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") ||
            !json_is_string(name))
            HX_SRV_FAIL("tool_choice",
                        "'tool_choice' must be \"auto\", \"none\", \"required\" "
                        "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        int k = 0;
        while (k < t->n_fns && strcmp(t->names[k], json_string_value(name))) k++;
        if (k == t->n_fns)
            HX_SRV_FAIL("tool_choice",
                        "tool_choice names the function '%.100s', which is not in "
                        "'tools'",
                        json_string_value(name));
        t->choice = HX_SRV_TC_NAMED;
        t->named = k;
    }
    if (t->choice == HX_SRV_TC_REQUIRED && t->n_fns == 0)
        HX_SRV_FAIL("tool_choice", "tool_choice \"required\" needs 'tools'");
    return true;
fail:
    return false;
}

/* The messages' tool parts. ids: the assistant calls' ids so far (borrowed from root). */
static bool hx_srv_parse_msg_tools(json_t *root, struct hx_srv_gen_req *out, struct hx_srv_tools *t,
                                   const char **param, char *msg, size_t msg_cap)
{
    json_t *m = json_object_get(root, "messages");
    size_t n = out->n_msgs, total = 0;
    const char **ids = NULL;
    t->msgs = calloc(n, sizeof *t->msgs);
    if (!t->msgs) HX_SRV_FAIL(NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *tc = json_object_get(json_array_get(m, i), "tool_calls");
        if (json_is_array(tc)) total += json_array_size(tc);
    }
    t->calls = calloc(total ? total : 1, sizeof *t->calls);
    ids = calloc(total ? total : 1, sizeof *ids);
    if (!t->calls || !ids) HX_SRV_FAIL(NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(m, i);
        const char *role = out->msgs[i].role;
        t->msgs[i].role = role;
        t->msgs[i].content = out->msgs[i].content;
        json_t *tc = json_object_get(e, "tool_calls");
        if (tc && !json_is_null(tc)) {
            if (strcmp(role, "assistant"))
                HX_SRV_FAIL("messages", "messages[%zu]: only assistant messages have tool_calls",
                            i);
            if (!json_is_array(tc))
                HX_SRV_FAIL("messages", "messages[%zu].tool_calls must be an array", i);
            t->msgs[i].tool_calls = t->calls + t->n_calls;
            size_t k;
            json_t *c;
            json_array_foreach(tc, k, c)
            {
                json_t *id = json_is_object(c) ? json_object_get(c, "id") : NULL;
                json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
                json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
                json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
                json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
                if (!json_is_string(id) || json_string_length(id) == 0 ||
                    (type &&
                     (!json_is_string(type) || strcmp(json_string_value(type), "function"))) ||
                    !hx_srv_fn_name_ok(name) || !json_is_string(args))
                    HX_SRV_FAIL("messages",
                                "messages[%zu].tool_calls[%zu] must be {\"id\": ..., "
                                "\"type\": \"function\", \"function\": {\"name\": ..., "
                                "\"arguments\": \"<a JSON object>\"}}",
                                i, k);
                json_error_t jerr;
                json_t *a = json_loadb(json_string_value(args), json_string_length(args),
                                       JSON_REJECT_DUPLICATES, &jerr);
                bool obj = json_is_object(a);
                json_decref(a);
                if (!obj)
                    HX_SRV_FAIL("messages",
                                "messages[%zu].tool_calls[%zu].function.arguments "
                                "must be a string holding a JSON object",
                                i, k);
                struct hx_chat_tool_call *call = &t->calls[t->n_calls];
                call->name = strdup(json_string_value(name));
                call->arguments = strdup(json_string_value(args));
                ids[t->n_calls++] = json_string_value(id);
                t->msgs[i].n_tool_calls++;
                if (!call->name || !call->arguments) HX_SRV_FAIL(NULL, "out of memory");
            }
        }
        if (!strcmp(role, "tool")) {
            t->tool_msgs = true;
            json_t *id = json_object_get(e, "tool_call_id");
            if (!json_is_string(id))
                HX_SRV_FAIL("messages", "messages[%zu]: a tool message needs 'tool_call_id'", i);
            size_t k = 0;
            while (k < t->n_calls && strcmp(ids[k], json_string_value(id))) k++;
            if (k == t->n_calls)
                HX_SRV_FAIL("messages",
                            "messages[%zu].tool_call_id '%.100s' matches no earlier "
                            "assistant tool call",
                            i, json_string_value(id));
        }
    }
    free(ids);
    return true;
fail:
    free(ids);
    return false;
}

bool hx__srv_tools_parse(json_t *root, struct hx_srv_gen_req *out, const char **param, char *msg,
                         size_t msg_cap)
{
    out->tools = NULL;
    json_t *tools = json_object_get(root, "tools");
    if (tools && json_is_null(tools)) tools = NULL;
    struct hx_srv_tools *t = calloc(1, sizeof *t);
    if (!t) HX_SRV_FAIL(NULL, "out of memory");
    if (tools && !hx_srv_parse_tool_list(tools, t, param, msg, msg_cap)) goto fail;
    if (!hx_srv_parse_choice(root, t, param, msg, msg_cap)) goto fail;
    json_t *par = json_object_get(root, "parallel_tool_calls");
    if (par && !json_is_null(par) && !json_is_boolean(par))
        HX_SRV_FAIL("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (!hx_srv_parse_msg_tools(root, out, t, param, msg, msg_cap)) goto fail;
    if (t->n_fns > 0 && t->choice != HX_SRV_TC_NONE) {
        /* 15 digits: 0.1 stays 0.1 as Python writes it (17 would give 0.10000000000000001) */
        t->json = json_dumps(tools, JSON_COMPACT | JSON_REAL_PRECISION(15));
        if (!t->json) HX_SRV_FAIL(NULL, "out of memory");
    }
    if (t->n_fns == 0 && t->n_calls == 0 && !t->tool_msgs) { /* nothing about tools here */
        hx__srv_tools_free(t);
        return true;
    }
    out->tools = t;
    return true;
fail:
    hx__srv_tools_free(t);
    return false;
}

/* ---- the template's format, the grammar --------------------------------------------------- */

static enum hx_srv_tool_fmt hx_srv_fmt_of(const char *tmpl)
{
    if (!tmpl) return HX_SRV_TOOLFMT_NONE;
    if (!strcmp(tmpl, "qwen3") || !strcmp(tmpl, "chatml")) return HX_SRV_TOOLFMT_QWEN3;
    if (!strcmp(tmpl, "llama3")) return HX_SRV_TOOLFMT_LLAMA3;
    return HX_SRV_TOOLFMT_NONE;
}

/* One call of function i, or of any of them ("required"), in the model's format, whose
 * arguments are what the function's parameters schema validates. */
static bool hx_srv_tools_grammar(struct hx_srv_tools *t, char **out, char *err, size_t err_cap)
{
    bool qwen = t->fmt == HX_SRV_TOOLFMT_QWEN3;
    const char *key = qwen ? "arguments" : "parameters";
    struct hx_srv_buf g = {0};
    hx__srv_buf_printf(&g, "root ::= \"%s{\\\"name\\\": \\\"\" (", qwen ? "<tool_call>\\n" : "");
    int lo = t->choice == HX_SRV_TC_NAMED ? t->named : 0;
    int hi = t->choice == HX_SRV_TC_NAMED ? t->named + 1 : t->n_fns;
    for (int i = lo; i < hi; i++)
        hx__srv_buf_printf(&g, "%s\"%s\\\", \\\"%s\\\": \" f%d-root", i > lo ? " | " : " ",
                           t->names[i], key, i);
    hx__srv_buf_printf(&g, " ) \"}%s\"\n", qwen ? "\\n</tool_call>" : "");
    for (int i = lo; i < hi; i++)
        if (!hx_srv_fn_rules(t->params[i], i, &g, err, err_cap)) {
            hx__srv_buf_free(&g);
            return false;
        }
    if (g.failed) {
        hx__srv_buf_free(&g);
        snprintf(err, err_cap, "out of memory");
        return false;
    }
    *out = g.data;
    return true;
}

bool hx__srv_tools_prepare(struct hx_srv_gen_req *r, const char *tmpl, const char **param,
                           char *msg, size_t msg_cap)
{
    struct hx_srv_tools *t = r->tools;
    if (!t) return true;
    t->fmt = hx_srv_fmt_of(tmpl);
    if (t->fmt == HX_SRV_TOOLFMT_NONE && (t->json || t->n_calls || t->tool_msgs))
        HX_SRV_FAIL(t->json ? "tools" : "messages",
                    "the chat template '%s' has no tool-call format; tools work with the qwen3 "
                    "(chatml) and llama3 templates",
                    tmpl ? tmpl : "?");
    if (t->fmt == HX_SRV_TOOLFMT_LLAMA3) {
        for (size_t i = 0; i < r->n_msgs; i++)
            if (t->msgs[i].n_tool_calls > 1)
                HX_SRV_FAIL("messages",
                            "messages[%zu] has %zu tool calls; the llama3 format "
                            "takes one per message",
                            i, t->msgs[i].n_tool_calls);
        if (t->json && !strcmp(r->msgs[0].role, "system") && r->n_msgs == 1)
            HX_SRV_FAIL("messages", "the llama3 format puts the tools in the first message "
                                    "after the system one; there is none");
    }
    if (t->choice == HX_SRV_TC_REQUIRED || t->choice == HX_SRV_TC_NAMED) {
        if (r->grammar)
            HX_SRV_FAIL("tool_choice", "response_format and a required tool call cannot both "
                                       "constrain the answer");
        char err[384];
        if (!hx_srv_tools_grammar(t, &r->grammar, err, sizeof err)) HX_SRV_FAIL("tools", "%s", err);
    }
    if (t->json) {
        t->parse = hx__srv_tparse_new(t->fmt, t->names, t->n_fns);
        if (!t->parse) HX_SRV_FAIL(NULL, "out of memory");
    }
    return true;
fail:
    return false;
}

int hx__srv_tools_render(const struct hx_srv_gen_req *r, const struct hx_model *model,
                         const char *tmpl, bool enable_thinking, char **out)
{
    return hx_chat_apply_tools(model, tmpl, r->tools->msgs, r->n_msgs, r->tools->json, true,
                               enable_thinking, out);
}

bool hx__srv_tools_parsing(const struct hx_srv_tools *t)
{
    return t && t->parse;
}

bool hx__srv_tools_constrained(const struct hx_srv_tools *t)
{
    return t && (t->choice == HX_SRV_TC_REQUIRED || t->choice == HX_SRV_TC_NAMED);
}

/* ---- the output parser ----------------------------------------------------------------------- */

static const char hx_srv_open[] = "<tool_call>", hx_srv_close[] = "</tool_call>";

enum { HX_TP_TEXT, HX_TP_CALL, HX_TP_LSTART, HX_TP_LJSON };

struct hx_srv_tparse {
    enum hx_srv_tool_fmt fmt;
    char *const *names;
    int n_names;
    int state;
    struct hx_srv_buf buf; /* text not decided yet */
    struct hx_srv_buf ws;  /* qwen3: the whitespace before an open call (content if it fails) */
    bool after_call;       /* qwen3: whitespace after a call is dropped */
    /* llama3: the JSON object's scan state */
    int depth;
    bool in_str, esc, closed;
    size_t scanned;
};

struct hx_srv_tparse *hx__srv_tparse_new(enum hx_srv_tool_fmt fmt, char *const *names, int n)
{
    struct hx_srv_tparse *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->fmt = fmt;
    p->names = names;
    p->n_names = n;
    p->state = fmt == HX_SRV_TOOLFMT_LLAMA3 ? HX_TP_LSTART : HX_TP_TEXT;
    return p;
}

void hx__srv_tparse_free(struct hx_srv_tparse *p)
{
    if (!p) return;
    hx__srv_buf_free(&p->buf);
    hx__srv_buf_free(&p->ws);
    free(p);
}

static bool hx_srv_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* End of the JSON value at s (valid JSON: jansson judged it). */
static const char *hx_srv_skip_value(const char *s, const char *end)
{
    int depth = 0;
    bool in_str = false;
    for (const char *p = s; p < end; p++) {
        char c = *p;
        if (in_str) {
            if (c == '\\')
                p++;
            else if (c == '"') {
                in_str = false;
                if (depth == 0) return p + 1;
            }
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return p; /* after a number or a literal */
            if (--depth == 0) return p + 1;
        } else if (depth == 0 && (c == ',' || hx_srv_ws(c))) {
            return p;
        }
    }
    return end;
}

/* s[0..n) (surrounding whitespace allowed) as a call: a JSON object with "name", one of the
 * declared functions, and "arguments" (llama3: or "parameters"), an object. *args: the raw
 * text of the arguments as generated (malloc'ed). */
static bool hx_srv_call_of(const struct hx_srv_tparse *p, const char *s, size_t n,
                           const char **name_at, size_t *name_len, char **args)
{
    json_error_t jerr;
    json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &jerr);
    json_t *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
    json_t *a = json_is_object(o) ? json_object_get(o, "arguments") : NULL;
    const char *akey = "\"arguments\"";
    if (!a && p->fmt == HX_SRV_TOOLFMT_LLAMA3 && json_is_object(o)) {
        a = json_object_get(o, "parameters");
        akey = "\"parameters\"";
    }
    int k = 0;
    if (json_is_string(name))
        while (k < p->n_names && strcmp(p->names[k], json_string_value(name))) k++;
    if (!json_is_string(name) || k == p->n_names || !json_is_object(a)) {
        json_decref(o);
        return false;
    }
    *name_at = p->names[k];
    *name_len = strlen(p->names[k]);
    /* the arguments' own text: walk the top-level members */
    const char *q = s, *end = s + n, *raw = NULL, *raw_end = NULL;
    while (q < end && *q != '{') q++;
    q++;
    for (;;) {
        while (q < end && hx_srv_ws(*q)) q++;
        if (q >= end || *q != '"') break;
        const char *key = q, *key_end = hx_srv_skip_value(q, end);
        q = key_end;
        while (q < end && (hx_srv_ws(*q) || *q == ':')) q++;
        const char *v = q, *v_end = hx_srv_skip_value(q, end);
        if ((size_t)(key_end - key) == strlen(akey) && !memcmp(key, akey, strlen(akey))) {
            raw = v;
            raw_end = v_end;
        }
        q = v_end;
        while (q < end && hx_srv_ws(*q)) q++;
        if (q >= end || *q != ',') break;
        q++;
    }
    /* a key spelled with escapes: the value as jansson writes it */
    *args = raw ? strndup(raw, (size_t)(raw_end - raw)) : json_dumps(a, JSON_COMPACT);
    json_decref(o);
    return *args != NULL;
}

static void hx_srv_emit_text(hx_srv_tparse_cb cb, void *user, const char *s, size_t n)
{
    if (n) cb(user, s, n, NULL, NULL, 0);
}

/* qwen3: the whole block inner[0..n) (between the tags) is done. */
static void hx_srv_qwen_block(struct hx_srv_tparse *p, const char *inner, size_t n,
                              hx_srv_tparse_cb cb, void *user)
{
    const char *name;
    size_t name_len;
    char *args = NULL;
    if (hx_srv_call_of(p, inner, n, &name, &name_len, &args)) {
        cb(user, NULL, 0, name, args, strlen(args));
        free(args);
        p->after_call = true;
    } else {
        struct hx_srv_buf b = {0};
        hx__srv_buf_append(&b, p->ws.data ? p->ws.data : "", p->ws.len);
        hx__srv_buf_puts(&b, hx_srv_open);
        hx__srv_buf_append(&b, inner, n);
        hx__srv_buf_puts(&b, hx_srv_close);
        if (!b.failed) hx_srv_emit_text(cb, user, b.data, b.len);
        hx__srv_buf_free(&b);
    }
    p->ws.len = 0;
}

static void hx_srv_qwen_push(struct hx_srv_tparse *p, hx_srv_tparse_cb cb, void *user)
{
    for (;;) {
        struct hx_srv_buf *b = &p->buf;
        if (!b->len) return;
        if (p->state == HX_TP_CALL) {
            const char *c = memmem(b->data, b->len, hx_srv_close, sizeof hx_srv_close - 1);
            if (!c) return;
            size_t k = (size_t)(c - b->data);
            hx_srv_qwen_block(p, b->data, k, cb, user);
            hx__srv_buf_consume(b, k + sizeof hx_srv_close - 1);
            p->state = HX_TP_TEXT;
            continue;
        }
        if (p->after_call) { /* the whitespace after a call is no content */
            size_t k = 0;
            while (k < b->len && hx_srv_ws(b->data[k])) k++;
            hx__srv_buf_consume(b, k);
            if (!b->len) return;
            p->after_call = false;
        }
        const char *o = memmem(b->data, b->len, hx_srv_open, sizeof hx_srv_open - 1);
        if (o) {
            size_t k = (size_t)(o - b->data), e = k;
            while (e > 0 && hx_srv_ws(b->data[e - 1])) e--;
            hx_srv_emit_text(cb, user, b->data, e);
            p->ws.len = 0;
            hx__srv_buf_append(&p->ws, b->data + e, k - e);
            hx__srv_buf_consume(b, k + sizeof hx_srv_open - 1);
            p->state = HX_TP_CALL;
            continue;
        }
        /* keep what could still be the start of a call: a prefix of the tag at the end, and
         * the whitespace before it */
        size_t keep = 0;
        for (size_t m = sizeof hx_srv_open - 2; m > 0; m--)
            if (b->len >= m && !memcmp(b->data + b->len - m, hx_srv_open, m)) {
                keep = m;
                break;
            }
        size_t e = b->len - keep;
        while (e > 0 && hx_srv_ws(b->data[e - 1])) e--;
        hx_srv_emit_text(cb, user, b->data, e);
        hx__srv_buf_consume(b, e);
        return;
    }
}

/* llama3: scan the new bytes of the object; once it is closed and something else follows, it
 * is no call: everything so far is content. */
static void hx_srv_llama_push(struct hx_srv_tparse *p, hx_srv_tparse_cb cb, void *user)
{
    struct hx_srv_buf *b = &p->buf;
    if (p->state == HX_TP_LSTART) {
        size_t k = 0;
        while (k < b->len && hx_srv_ws(b->data[k])) k++;
        if (k == b->len) return;
        p->state = b->data[k] == '{' ? HX_TP_LJSON : HX_TP_TEXT;
        p->scanned = k;
    }
    if (p->state == HX_TP_LJSON) {
        for (; p->scanned < b->len; p->scanned++) {
            char c = b->data[p->scanned];
            if (p->closed) {
                if (!hx_srv_ws(c)) {
                    p->state = HX_TP_TEXT;
                    break;
                }
            } else if (p->in_str) {
                if (p->esc)
                    p->esc = false;
                else if (c == '\\')
                    p->esc = true;
                else if (c == '"')
                    p->in_str = false;
            } else if (c == '"') {
                p->in_str = true;
            } else if (c == '{' || c == '[') {
                p->depth++;
            } else if (c == '}' || c == ']') {
                if (--p->depth <= 0) p->closed = true;
            }
        }
    }
    if (p->state == HX_TP_TEXT) {
        hx_srv_emit_text(cb, user, b->data, b->len);
        b->len = 0;
    }
}

void hx__srv_tparse_push(struct hx_srv_tparse *p, const char *s, size_t n, hx_srv_tparse_cb cb,
                         void *user)
{
    if (!p || !n) return;
    if (p->state == HX_TP_TEXT && p->fmt == HX_SRV_TOOLFMT_LLAMA3) { /* content from here on */
        hx_srv_emit_text(cb, user, s, n);
        return;
    }
    hx__srv_buf_append(&p->buf, s, n);
    if (p->fmt == HX_SRV_TOOLFMT_LLAMA3)
        hx_srv_llama_push(p, cb, user);
    else
        hx_srv_qwen_push(p, cb, user);
}

void hx__srv_tparse_end(struct hx_srv_tparse *p, hx_srv_tparse_cb cb, void *user)
{
    if (!p) return;
    struct hx_srv_buf *b = &p->buf;
    const char *d = b->data ? b->data : "";
    if (p->fmt == HX_SRV_TOOLFMT_LLAMA3) {
        const char *name;
        size_t name_len;
        char *args = NULL;
        if (p->state == HX_TP_LJSON && hx_srv_call_of(p, d, b->len, &name, &name_len, &args)) {
            cb(user, NULL, 0, name, args, strlen(args));
            free(args);
        } else {
            hx_srv_emit_text(cb, user, d, b->len);
        }
    } else if (p->state == HX_TP_CALL) { /* a call never closed: content */
        hx__srv_buf_puts(&p->ws, hx_srv_open);
        hx__srv_buf_append(&p->ws, d, b->len);
        if (!p->ws.failed) hx_srv_emit_text(cb, user, p->ws.data, p->ws.len);
    } else if (!p->after_call) {
        hx_srv_emit_text(cb, user, d, b->len);
    }
    /* ready for another text */
    b->len = 0;
    p->ws.len = 0;
    p->after_call = p->in_str = p->esc = p->closed = false;
    p->depth = 0;
    p->scanned = 0;
    p->state = p->fmt == HX_SRV_TOOLFMT_LLAMA3 ? HX_TP_LSTART : HX_TP_TEXT;
}

/* ---- responses ------------------------------------------------------------------------------- */

/* "call_" + 24 hex digits from getrandom (the clock and a counter without it) */
static void hx_srv_call_id(char out[32])
{
    unsigned char r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        static uint64_t n;
        uint64_t x = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull + ++n * 0xBF58476D1CE4E5B9ull;
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(x >> (8 * (i % 8)) ^ i);
    }
    memcpy(out, "call_", 5);
    for (size_t i = 0; i < sizeof r; i++) snprintf(out + 5 + 2 * i, 3, "%02x", r[i]);
}

/* A call as OpenAI writes it in a message or (without arguments, which stream after) a delta. */
static json_t *hx_srv_call_json(int index, const char *name, size_t name_len, const char *args,
                                size_t args_len, bool delta)
{
    char id[32];
    hx_srv_call_id(id);
    json_t *fn = json_object();
    json_object_set_new(fn, "name", json_stringn(name, name_len));
    json_object_set_new(fn, "arguments", delta ? json_string("") : json_stringn(args, args_len));
    json_t *c = json_object();
    if (delta) json_object_set_new(c, "index", json_integer(index));
    json_object_set_new(c, "id", json_string(id));
    json_object_set_new(c, "type", json_string("function"));
    json_object_set_new(c, "function", fn);
    return c;
}

struct hx_srv_tstream {
    struct hx_srv_tools *t;
    const struct hx_srv_result *r;
    struct hx_srv_buf *sse;
};

static void hx_srv_sse_json(struct hx_srv_buf *sse, json_t *root)
{
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (s) hx__srv_sse_event(sse, s, strlen(s));
    free(s);
}

/* A chunk whose delta is {"tool_calls": [call]}: a text chunk's shape with its delta replaced. */
static json_t *hx_srv_call_chunk(const struct hx_srv_result *r, json_t *call)
{
    char *base = hx__srv_chunk_json(HX_SRV_CHAT, HX_SRV_CHUNK_TEXT, r, "", 0);
    json_t *root = base ? json_loads(base, 0, NULL) : NULL;
    free(base);
    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    if (!choice) {
        json_decref(root);
        json_decref(call);
        return NULL;
    }
    json_object_set_new(choice, "delta", json_pack("{s[o]}", "tool_calls", call));
    return root;
}

static void hx_srv_stream_cb(void *user, const char *content, size_t len, const char *name,
                             const char *args, size_t args_len)
{
    struct hx_srv_tstream *s = user;
    if (!name) {
        char *j = hx__srv_chunk_json(HX_SRV_CHAT, HX_SRV_CHUNK_TEXT, s->r, content, len);
        if (j) hx__srv_sse_event(s->sse, j, strlen(j));
        free(j);
        return;
    }
    int index = s->t->n_out++;
    hx_srv_sse_json(s->sse, hx_srv_call_chunk(
                                s->r, hx_srv_call_json(index, name, strlen(name), NULL, 0, true)));
    json_t *fn = json_object();
    json_object_set_new(fn, "arguments", json_stringn(args, args_len));
    hx_srv_sse_json(s->sse,
                    hx_srv_call_chunk(s->r, json_pack("{sisO}", "index", index, "function", fn)));
    json_decref(fn);
}

/* An arguments delta of a constrained call. */
static void hx_srv_args_delta(struct hx_srv_tstream *s, const char *a, size_t n)
{
    if (!n) return;
    json_t *fn = json_object();
    json_object_set_new(fn, "arguments", json_stringn(a, n));
    hx_srv_sse_json(s->sse,
                    hx_srv_call_chunk(s->r, json_pack("{sisO}", "index", 0, "function", fn)));
    json_decref(fn);
}

/*
 * A constrained call: the grammar makes the output exactly HEAD NAME MID ARGS TAIL (qwen3:
 * `<tool_call>\n{"name": "`, `", "arguments": `, `}\n</tool_call>`; llama3: `{"name": "`,
 * `", "parameters": `, `}`), so the call's head is sent as soon as the name is known and the
 * arguments stream as they are generated, holding back only what may be the tail. Cut short
 * (finish_reason "length"), the arguments are what was generated.
 */
static void hx_srv_constrained_stream(struct hx_srv_tstream *s, const char *text, size_t len,
                                      bool end)
{
    struct hx_srv_tools *t = s->t;
    bool qwen = t->fmt == HX_SRV_TOOLFMT_QWEN3;
    const char *head = qwen ? "<tool_call>\n{\"name\": \"" : "{\"name\": \"";
    const char *tail = qwen ? "}\n</tool_call>" : "}";
    hx__srv_buf_append(&t->cbuf, text ? text : "", text ? len : 0);
    const char *b = t->cbuf.data ? t->cbuf.data : "";
    size_t n = t->cbuf.len, hl = strlen(head), tl = strlen(tail);
    if (!t->c_args_at && n > hl && !memcmp(b, head, hl)) {
        const char *q = memchr(b + hl, '"', n - hl); /* names have no quotes or escapes */
        char mid[32];
        snprintf(mid, sizeof mid, "\", \"%s\": ", qwen ? "arguments" : "parameters");
        size_t ml = strlen(mid);
        if (q && (size_t)(q - b) + ml <= n && !memcmp(q, mid, ml)) {
            hx_srv_sse_json(
                s->sse, hx_srv_call_chunk(s->r, hx_srv_call_json(0, b + hl, (size_t)(q - b) - hl,
                                                                 NULL, 0, true)));
            t->n_out = 1;
            t->c_args_at = t->c_sent = (size_t)(q - b) + ml;
        }
    }
    if (!t->c_args_at) {
        if (end && n) { /* not a call after all (cannot happen under the grammar): content */
            char *j = hx__srv_chunk_json(HX_SRV_CHAT, HX_SRV_CHUNK_TEXT, s->r, b, n);
            if (j) hx__srv_sse_event(s->sse, j, strlen(j));
            free(j);
        }
        return;
    }
    /* hold back the longest end of the text that may begin the tail */
    size_t keep = 0;
    for (size_t m = HX_SRV_MIN_SZ(tl, n - t->c_args_at); m > 0 && !keep; m--)
        if (!memcmp(b + n - m, tail, m)) keep = m;
    size_t upto = n - keep;
    if (end && keep != tl) upto = n; /* cut short: the tail never came */
    if (upto > t->c_sent) hx_srv_args_delta(s, b + t->c_sent, upto - t->c_sent);
    if (upto > t->c_sent) t->c_sent = upto;
}

void hx__srv_tools_stream(struct hx_srv_tools *t, const struct hx_srv_result *r, const char *text,
                          size_t len, bool end, struct hx_srv_buf *sse)
{
    struct hx_srv_tstream s = {t, r, sse};
    if (t->choice == HX_SRV_TC_REQUIRED || t->choice == HX_SRV_TC_NAMED) {
        if (t->parse) hx_srv_constrained_stream(&s, text, len, end);
        return;
    }
    if (text && len) hx__srv_tparse_push(t->parse, text, len, hx_srv_stream_cb, &s);
    if (end) hx__srv_tparse_end(t->parse, hx_srv_stream_cb, &s);
}

const char *hx__srv_tools_finish_reason(const struct hx_srv_tools *t, const char *reason)
{
    return t && t->n_out > 0 ? "tool_calls" : reason;
}

struct hx_srv_twhole {
    struct hx_srv_tools *t;
    struct hx_srv_buf content;
    json_t *calls;
};

static void hx_srv_whole_cb(void *user, const char *content, size_t len, const char *name,
                            const char *args, size_t args_len)
{
    struct hx_srv_twhole *w = user;
    if (!name) {
        hx__srv_buf_append(&w->content, content, len);
        return;
    }
    w->t->n_out++;
    json_array_append_new(w->calls, hx_srv_call_json(0, name, strlen(name), args, args_len, false));
}

char *hx__srv_tools_response(struct hx_srv_tools *t, const struct hx_srv_result *r,
                             const char *text, size_t len)
{
    struct hx_srv_twhole w = {t, {0}, json_array()};
    hx__srv_buf_append(&w.content, "", 0);
    hx__srv_tparse_push(t->parse, text ? text : "", text ? len : 0, hx_srv_whole_cb, &w);
    hx__srv_tparse_end(t->parse, hx_srv_whole_cb, &w);
    struct hx_srv_result rr = *r;
    rr.finish_reason = hx__srv_tools_finish_reason(t, r->finish_reason);
    char *base = w.content.failed
                     ? NULL
                     : hx__srv_response_json(HX_SRV_CHAT, &rr, w.content.data, w.content.len);
    char *out = NULL;
    json_t *root = base ? json_loads(base, 0, NULL) : NULL;
    json_t *m = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "message");
    if (m && json_array_size(w.calls) > 0) {
        if (w.content.len == 0) json_object_set_new(m, "content", json_null());
        json_object_set(m, "tool_calls", w.calls);
        out = json_dumps(root, JSON_COMPACT);
    } else if (m) {
        out = base, base = NULL;
    }
    json_decref(root);
    json_decref(w.calls);
    free(base);
    hx__srv_buf_free(&w.content);
    return out;
}
