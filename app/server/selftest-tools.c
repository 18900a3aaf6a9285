/*
 * selftest-tools.c — `engine serve --self-test` cases for tool calls (tools.c): the output
 * parser in both formats (calls, text around them, malformed calls left as content), the
 * same result for the text split at every byte boundary and fed a byte at a time, the
 * response and stream shapes, the grammar of a required call, and the request checks. With a
 * model (`--self-test -m MODEL`), the grammars of a named and a required call built for its
 * vocabulary in both formats: they take exactly the calls the parser turns into tool_calls of
 * valid arguments, and refuse the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server.h"

static int hx_tt_failures;

#define HX_TT_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "self-test FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            hx_tt_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/* What the parser reported: content concatenated, calls as "name(args)" joined by ";". */
struct hx_tt_out {
    struct hx_srv_buf content, calls;
    int n_calls;
};

static void hx_tt_cb(void *user, const char *content, size_t len, const char *name,
                     const char *args, size_t args_len)
{
    struct hx_tt_out *o = user;
    if (!name) {
        HX_TT_CHECK(len > 0); /* no empty content pieces */
        hx__srv_buf_append(&o->content, content, len);
        return;
    }
    hx__srv_buf_printf(&o->calls, "%s%s(", o->n_calls++ ? ";" : "", name);
    hx__srv_buf_append(&o->calls, args, args_len);
    hx__srv_buf_puts(&o->calls, ")");
}

/* Parse text fed in pieces: step 0 = two pieces split at `at`, else pieces of `step` bytes. */
static void hx_tt_parse(enum hx_srv_tool_fmt fmt, const char *text, size_t at, size_t step,
                        struct hx_tt_out *o)
{
    static char *const names[] = {"get_weather", "add"};
    memset(o, 0, sizeof *o);
    hx__srv_buf_append(&o->content, "", 0);
    hx__srv_buf_append(&o->calls, "", 0);
    struct hx_srv_tparse *p = hx__srv_tparse_new(fmt, names, 2);
    size_t n = strlen(text);
    if (step == 0) {
        hx__srv_tparse_push(p, text, at, hx_tt_cb, o);
        hx__srv_tparse_push(p, text + at, n - at, hx_tt_cb, o);
    } else {
        for (size_t i = 0; i < n; i += step)
            hx__srv_tparse_push(p, text + i, n - i < step ? n - i : step, hx_tt_cb, o);
    }
    hx__srv_tparse_end(p, hx_tt_cb, o);
    hx__srv_tparse_free(p);
}

static void hx_tt_free(struct hx_tt_out *o)
{
    hx__srv_buf_free(&o->content);
    hx__srv_buf_free(&o->calls);
}

static void hx_tt_case(enum hx_srv_tool_fmt fmt, const char *text, const char *content,
                       const char *calls)
{
    struct hx_tt_out whole;
    size_t n = strlen(text);
    hx_tt_parse(fmt, text, n, 0, &whole);
    bool ok = !strcmp(whole.content.data, content) && !strcmp(whole.calls.data, calls);
    if (!ok)
        fprintf(stderr, "self-test: tools parse of [%s]: content [%s] calls [%s]\n", text,
                whole.content.data, whole.calls.data);
    HX_TT_CHECK(ok);
    for (size_t at = 0; at <= n; at++) { /* every split in two, then a byte at a time */
        struct hx_tt_out o;
        hx_tt_parse(fmt, text, at, 0, &o);
        bool same =
            !strcmp(o.content.data, whole.content.data) && !strcmp(o.calls.data, whole.calls.data);
        if (!same)
            fprintf(stderr, "self-test: tools parse of [%s] split at %zu differs\n", text, at);
        HX_TT_CHECK(same);
        hx_tt_free(&o);
    }
    struct hx_tt_out o;
    hx_tt_parse(fmt, text, 0, 1, &o);
    HX_TT_CHECK(!strcmp(o.content.data, whole.content.data) &&
                !strcmp(o.calls.data, whole.calls.data));
    hx_tt_free(&o);
    hx_tt_free(&whole);
}

static void hx_tt_parser(void)
{
    const enum hx_srv_tool_fmt Q = HX_SRV_TOOLFMT_QWEN3, L = HX_SRV_TOOLFMT_LLAMA3;
#define CALL_W "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
    hx_tt_case(Q, "<tool_call>\n" CALL_W "\n</tool_call>", "",
               "get_weather({\"city\": \"Paris\"})");
    /* text before (its trailing whitespace is the separator), two calls, whitespace after;
     * the arguments exactly as generated, braces inside strings included */
    hx_tt_case(Q,
               "Let me check.\n<tool_call>\n" CALL_W
               "\n</tool_call>\n<tool_call>\n{\"name\":\"add\""
               ",\"arguments\":{\"a\":1,\"b\":[2,{\"c\":\"}\\\"]\"}]}}\n</tool_call>\n",
               "Let me check.",
               "get_weather({\"city\": \"Paris\"});add({\"a\":1,\"b\":[2,{\"c\":\"}\\\"]\"}]})");
    hx_tt_case(Q, "<think>\nhm\n</think>\n\n<tool_call>" CALL_W "</tool_call>\n\nDone. ",
               "<think>\nhm\n</think>Done. ", "get_weather({\"city\": \"Paris\"})");
    /* not calls: content, as generated */
    const char *bad[] = {
        "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", /* unknown */
        "<tool_call>{\"name\": \"add\", \"arguments\": [1]}</tool_call>",     /* not an object */
        "<tool_call>{\"name\": \"add\"}</tool_call>",                         /* no arguments */
        "<tool_call>{\"name\": \"add\", \"parameters\": {}}</tool_call>",     /* llama's key */
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}",         /* never closed */
        "x \n<tool_call>{bad json}</tool_call> y",
        "<tool_call>{\"name\": \"add\", \"arguments\": {}, \"name\": \"add\"}</tool_call>",
        "<tool_call>\"add\"</tool_call>",
        "plain < text <tool and <tool_call spaces  \n",
        "<tool_call",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) hx_tt_case(Q, bad[i], bad[i], "");
    /* a malformed call after a good one stays content */
    hx_tt_case(Q, "<tool_call>" CALL_W "</tool_call>\n<tool_call>oops</tool_call>",
               "<tool_call>oops</tool_call>", "get_weather({\"city\": \"Paris\"})");
    /* a key spelled with an escape: the arguments as jansson writes them */
    hx_tt_case(Q, "<tool_call>{\"name\": \"add\", \"argum\\u0065nts\": {\"a\": 1}}</tool_call>", "",
               "add({\"a\":1})");

    hx_tt_case(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
               "get_weather({\"city\": \"Paris\"})");
    hx_tt_case(L, " \n{\"name\":\"add\",\"arguments\":{}} \n", "", "add({})");
    hx_tt_case(L, "{\"parameters\": {\"s\": \"}{\\\"\", \"n\": -1.5e3}, \"name\": \"add\"}", "",
               "add({\"s\": \"}{\\\"\", \"n\": -1.5e3})");
    const char *lbad[] = {
        "{\"name\": \"add\", \"parameters\": {}} and more",
        "Hello {\"name\": \"add\", \"parameters\": {}}",
        "{\"answer\": 42}",
        "{\"name\": \"nope\", \"parameters\": {}}",
        "{\"name\": \"add\", \"parameters\": {}",
        "{\"name\": \"add\", \"parameters\": \"{}\"}",
        "[1, 2]",
        "  ",
        "",
    };
    for (size_t i = 0; i < sizeof lbad / sizeof lbad[0]; i++) hx_tt_case(L, lbad[i], lbad[i], "");
#undef CALL_W
}

/* A request through hx__srv_gen_req_parse: NULL when it is refused (*param, msg). */
static bool hx_tt_req(const char *body, struct hx_srv_gen_req *r, const char **param, char *msg,
                      size_t cap)
{
    return hx__srv_gen_req_parse(HX_SRV_CHAT, body, strlen(body), r, param, msg, cap);
}

#define TOOLS2                                                                                     \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"     \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":"           \
    "[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"add\"}}]"
#define USER "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void hx_tt_requests(void)
{
    struct {
        const char *body, *param, *what;
    } bad[] = {
        {"{" USER ",\"tools\":{}}", "tools", "must be an array"},
        {"{" USER ",\"tools\":[{\"type\":\"retrieval\"}]}", "tools", "type"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", "tools",
         "name"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools", "name"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
         "{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}",
         "tools", "twice"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
         "[]}}]}",
         "tools", "parameters"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
         "{\"type\":\"string\"}}}]}",
         "tools", "object"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
         "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":"
         "\"a+\"}}}}}]}",
         "tools", "pattern"},
        {"{" USER "," TOOLS2 ",\"tool_choice\":\"sometimes\"}", "tool_choice", "must be"},
        {"{" USER "," TOOLS2 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
         "\"nope\"}}}",
         "tool_choice", "nope"},
        {"{" USER "," TOOLS2 ",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice", "must be"},
        {"{" USER ",\"tool_choice\":\"required\"}", "tool_choice", "needs"},
        {"{" USER "," TOOLS2 ",\"parallel_tool_calls\":1}", "parallel_tool_calls", "boolean"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"tool\","
         "\"tool_call_id\":\"c1\",\"content\":\"x\"}]}",
         "messages", "matches no"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"tool\",\"content\":"
         "\"x\"}]}",
         "messages", "tool_call_id"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
         "messages", "JSON object"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
         "messages", "must be"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]}]}",
         "messages", "JSON object"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\",\"tool_calls\":[]}]}", "messages",
         "only assistant"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
         "messages", "must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hx_srv_gen_req r;
        const char *param = NULL;
        char msg[512] = "";
        bool ok = hx_tt_req(bad[i].body, &r, &param, msg, sizeof msg);
        bool right = !ok && param && !strcmp(param, bad[i].param) && strstr(msg, bad[i].what);
        if (!right)
            fprintf(stderr, "self-test: tools request %zu: ok=%d param=%s msg=%s\n", i, ok,
                    param ? param : "(null)", msg);
        HX_TT_CHECK(right);
        if (ok) hx__srv_gen_req_free(&r);
    }

    /* a conversation with a call and its result: accepted; no tools, so nothing to parse */
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[512] = "";
    const char *conv =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},{\"id\":\"c2\",\"type\":"
        "\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"ok\"}]}";
    HX_TT_CHECK(hx_tt_req(conv, &r, &param, msg, sizeof msg) && r.tools);
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg));
    HX_TT_CHECK(!hx__srv_tools_parsing(r.tools) && !r.grammar);
    HX_TT_CHECK(!hx__srv_tools_prepare(&r, "llama3", &param, msg, sizeof msg) &&
                !strcmp(param, "messages")); /* two calls in one message */
    HX_TT_CHECK(!hx__srv_tools_prepare(&r, "llama2", &param, msg, sizeof msg) &&
                !strcmp(param, "messages"));
    hx__srv_gen_req_free(&r);
    /* without any tool part: no tools state at all */
    HX_TT_CHECK(hx_tt_req("{" USER "}", &r, &param, msg, sizeof msg) && !r.tools);
    hx__srv_gen_req_free(&r);
    /* tools with tool_choice "none": nothing rendered, nothing parsed */
    HX_TT_CHECK(
        hx_tt_req("{" USER "," TOOLS2 ",\"tool_choice\":\"none\"}", &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "llama2", &param, msg, sizeof msg));
    HX_TT_CHECK(!hx__srv_tools_parsing(r.tools) && !r.grammar);
    hx__srv_gen_req_free(&r);
    /* tools: refused where the template has no tool format */
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 "}", &r, &param, msg, sizeof msg));
    HX_TT_CHECK(!hx__srv_tools_prepare(&r, "bitnet", &param, msg, sizeof msg) &&
                !strcmp(param, "tools"));
    hx__srv_gen_req_free(&r);
    /* the request rendered (no model: the template named): the tools as tojson writes them, a
     * float as Python writes it, and the history's call */
    const char *num = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
                      "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
                      "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":"
                      "0.1}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],"
                      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                      "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                      "\"number\",\"default\":0.1}}}}}]}";
    HX_TT_CHECK(hx_tt_req(num, &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg));
    char *text = NULL;
    HX_TT_CHECK(hx__srv_tools_render(&r, NULL, "qwen3", false, &text) == HX_OK && text);
    HX_TT_CHECK(text && strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                                     "\"f\", \"parameters\": {\"type\": \"object\", "
                                     "\"properties\": {\"a\": {\"type\": \"number\", "
                                     "\"default\": 0.1}}}}}\n</tools>"));
    HX_TT_CHECK(text && strstr(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", "
                                     "\"arguments\": {\"a\": 0.1}}\n</tool_call><|im_end|>\n"
                                     "<|im_start|>user\n<tool_response>\nok\n</tool_response>"));
    hx_free(text);
    hx__srv_gen_req_free(&r);
    /* llama3: tools need a message after the system one */
    HX_TT_CHECK(hx_tt_req("{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]," TOOLS2 "}", &r,
                          &param, msg, sizeof msg));
    HX_TT_CHECK(!hx__srv_tools_prepare(&r, "llama3", &param, msg, sizeof msg) &&
                !strcmp(param, "messages"));
    hx__srv_gen_req_free(&r);
}

static void hx_tt_grammar(void)
{
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[512] = "";
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 ",\"tool_choice\":{\"type\":\"function\","
                          "\"function\":{\"name\":\"get_weather\"}}}",
                          &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg));
    static const char root[] =
        "root ::= \"<tool_call>\\n{\\\"name\\\": \\\"\" ( \"get_weather\\\", "
        "\\\"arguments\\\": \" f0-root ) \"}\\n</tool_call>\"\n";
    HX_TT_CHECK(r.grammar && !strncmp(r.grammar, root, sizeof root - 1));
    HX_TT_CHECK(r.grammar && strstr(r.grammar, "f0-root ::=") && !strstr(r.grammar, "f1-"));
    HX_TT_CHECK(hx__srv_tools_parsing(r.tools));
    hx__srv_gen_req_free(&r);
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 ",\"tool_choice\":\"required\"}", &r, &param, msg,
                          sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "llama3", &param, msg, sizeof msg));
    HX_TT_CHECK(r.grammar && strstr(r.grammar, "root ::= \"{\\\"name\\\": \\\"\" ( \"get_weather"
                                               "\\\", \\\"parameters\\\": \" f0-root | \"add\\\", "
                                               "\\\"parameters\\\": \" f1-root ) \"}\"\n"));
    HX_TT_CHECK(r.grammar && strstr(r.grammar, "f1-root ::="));
    hx__srv_gen_req_free(&r);
}

/* A response and a stream for one generated text, through the loop-side functions. */
static void hx_tt_shapes(void)
{
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[512] = "";
    const char *text = "Sure.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>";
    struct hx_srv_result res = {.id = "chatcmpl-x", .model = "m", .finish_reason = "stop"};
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 "}", &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg) && !r.grammar);
    char *body = hx__srv_tools_response(r.tools, &res, text, strlen(text));
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *m = json_object_get(ch, "message");
    json_t *c = json_array_get(json_object_get(m, "tool_calls"), 0);
    json_t *id = json_object_get(c, "id");
    HX_TT_CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls"));
    HX_TT_CHECK(!strcmp(json_string_value(json_object_get(m, "content")), "Sure."));
    HX_TT_CHECK(json_is_string(id) && json_string_length(id) == 29 &&
                !strncmp(json_string_value(id), "call_", 5) &&
                strspn(json_string_value(id) + 5, "0123456789abcdef") == 24);
    HX_TT_CHECK(!strcmp(json_string_value(json_object_get(c, "type")), "function"));
    json_t *fn = json_object_get(c, "function");
    HX_TT_CHECK(!strcmp(json_string_value(json_object_get(fn, "name")), "add") &&
                !strcmp(json_string_value(json_object_get(fn, "arguments")), "{}"));
    json_decref(j);
    free(body);
    hx__srv_gen_req_free(&r);

    /* the stream: content, the call's head with empty arguments, its arguments */
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 "}", &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg));
    struct hx_srv_buf sse = {0};
    for (size_t i = 0; text[i]; i++) hx__srv_tools_stream(r.tools, &res, text + i, 1, false, &sse);
    hx__srv_tools_stream(r.tools, &res, NULL, 0, true, &sse);
    HX_TT_CHECK(!strcmp(hx__srv_tools_finish_reason(r.tools, "stop"), "tool_calls"));
    const char *want[] = {"\"delta\":{\"content\":\"S\"}",
                          "\"delta\":{\"tool_calls\":[{\"index\":0,"
                          "\"id\":\"call_",
                          "\"type\":\"function\",\"function\":{\"name\":\"add\","
                          "\"arguments\":\"\"}}]}",
                          "\"delta\":{\"tool_calls\":[{\"index\":0,"
                          "\"function\":{\"arguments\":\"{}\"}}]}"};
    const char *at = sse.data ? sse.data : "";
    for (size_t i = 0; i < 4; i++) {
        const char *f = strstr(at, want[i]);
        if (!f) fprintf(stderr, "self-test: tools stream lacks %s in %s\n", want[i], sse.data);
        HX_TT_CHECK(f != NULL);
        if (f) at = f;
    }
    HX_TT_CHECK(!strstr(sse.data ? sse.data : "", "tool_call>")); /* no markup leaks */
    hx__srv_buf_free(&sse);
    hx__srv_gen_req_free(&r);
    /* no call: the plain response, finish_reason unchanged */
    HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 "}", &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, "qwen3", &param, msg, sizeof msg));
    body = hx__srv_tools_response(r.tools, &res, "just text", 9);
    HX_TT_CHECK(body && strstr(body, "\"content\":\"just text\"") && !strstr(body, "tool_calls"));
    free(body);
    hx__srv_gen_req_free(&r);
}

/* The arguments of every tool_calls delta in an SSE body, concatenated; *n_deltas counts them
 * (the head's empty arguments included). */
static char *hx_tt_stream_args(const char *sse, int *n_deltas, char *name, size_t name_cap)
{
    struct hx_srv_buf out = {0};
    hx__srv_buf_append(&out, "", 0);
    *n_deltas = 0;
    name[0] = '\0';
    for (const char *d = sse ? strstr(sse, "data: ") : NULL; d; d = strstr(d + 1, "data: ")) {
        const char *e = strstr(d, "\n\n");
        json_t *j = json_loadb(d + 6, e ? (size_t)(e - d - 6) : strlen(d + 6), 0, NULL);
        json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
        json_t *c = json_array_get(json_object_get(json_object_get(ch, "delta"), "tool_calls"), 0);
        json_t *fn = json_object_get(c, "function");
        if (json_is_string(json_object_get(fn, "name")))
            snprintf(name, name_cap, "%s", json_string_value(json_object_get(fn, "name")));
        if (json_is_string(json_object_get(fn, "arguments"))) {
            (*n_deltas)++;
            hx__srv_buf_append(&out, json_string_value(json_object_get(fn, "arguments")),
                               json_string_length(json_object_get(fn, "arguments")));
        }
        json_decref(j);
    }
    return out.data;
}

/* A constrained call ("required") streams its arguments as they come, in any split of the
 * text, holding back only what may be the call's tail; cut short, what was generated. */
static void hx_tt_constrained_stream(void)
{
    static const struct {
        const char *tmpl, *text, *want_args;
        bool cut;
    } cases[] = {
        {"qwen3",
         "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": [2, \"}\"]}}\n</tool_call>",
         "{\"a\": 1, \"b\": [2, \"}\"]}", false},
        {"llama3", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
         "{\"city\": \"Paris\"}", false},
        {"qwen3", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 12", "{\"a\": 12", true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t tl = strlen(cases[k].text);
        for (size_t step = 1; step <= 7; step += 3) {
            struct hx_srv_gen_req r;
            const char *param = NULL;
            char msg[512] = "";
            HX_TT_CHECK(hx_tt_req("{" USER "," TOOLS2 ",\"tool_choice\":\"required\"}", &r, &param,
                                  msg, sizeof msg));
            HX_TT_CHECK(hx__srv_tools_prepare(&r, cases[k].tmpl, &param, msg, sizeof msg) &&
                        r.grammar);
            struct hx_srv_result res = {.id = "chatcmpl-x",
                                        .model = "m",
                                        .finish_reason = cases[k].cut ? "length" : "stop"};
            struct hx_srv_buf sse = {0};
            for (size_t i = 0; i < tl; i += step)
                hx__srv_tools_stream(r.tools, &res, cases[k].text + i,
                                     (step < tl - i ? step : tl - i), false, &sse);
            hx__srv_tools_stream(r.tools, &res, NULL, 0, true, &sse);
            int n_deltas;
            char name[64];
            char *args = hx_tt_stream_args(sse.data, &n_deltas, name, sizeof name);
            bool ok = args && !strcmp(args, cases[k].want_args) && name[0] &&
                      strstr(cases[k].text, name) && (step > 1 || n_deltas > 4) &&
                      !strstr(sse.data ? sse.data : "", "tool_call>") &&
                      !strcmp(hx__srv_tools_finish_reason(r.tools, "stop"), "tool_calls");
            if (!ok)
                fprintf(
                    stderr,
                    "self-test: constrained stream %zu (step %zu): args '%s' in %d deltas, name '%s'\n",
                    k, step, args ? args : "(null)", n_deltas, name);
            HX_TT_CHECK(ok);
            free(args);
            hx__srv_buf_free(&sse);
            hx__srv_gen_req_free(&r);
        }
    }
}

/* The grammar of tool_choice `choice` in template tmpl, built for the model; texts[i] is a
 * whole sentence of it exactly when ok[i], and then the parser makes it one call of want. */
static void hx_tt_grammar_texts(const struct hx_model *model, const char *tmpl, const char *choice,
                                const char *const *texts, const bool *ok, size_t n,
                                const char *want)
{
    char body[2048];
    snprintf(body, sizeof body, "{" USER "," TOOLS2 ",\"tool_choice\":%s}", choice);
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[512] = "";
    HX_TT_CHECK(hx_tt_req(body, &r, &param, msg, sizeof msg));
    HX_TT_CHECK(hx__srv_tools_prepare(&r, tmpl, &param, msg, sizeof msg) && r.grammar);
    struct hx_grammar *g = NULL;
    int st = r.grammar ? hx_grammar_new(model, r.grammar, strlen(r.grammar), &g) : HX_E_INVAL;
    if (st != HX_OK) fprintf(stderr, "self-test: tool grammar (%s): %s\n", tmpl, hx_last_error());
    HX_TT_CHECK(st == HX_OK);
    for (size_t i = 0; g && i < n; i++) {
        hx_grammar_reset(g);
        bool whole =
            hx_grammar_accept_text(g, texts[i], strlen(texts[i])) == HX_OK && hx_grammar_done(g);
        if (whole != ok[i])
            fprintf(stderr, "self-test: tool grammar (%s, %s) %s [%s]\n", tmpl, choice,
                    ok[i] ? "refuses" : "takes", texts[i]);
        HX_TT_CHECK(whole == ok[i]);
        if (!ok[i]) continue;
        struct hx_tt_out o;
        hx_tt_parse(!strcmp(tmpl, "llama3") ? HX_SRV_TOOLFMT_LLAMA3 : HX_SRV_TOOLFMT_QWEN3,
                    texts[i], strlen(texts[i]), 0, &o);
        HX_TT_CHECK(o.n_calls == 1 && o.content.len == 0 &&
                    !strncmp(o.calls.data, want, strlen(want)));
        hx_tt_free(&o);
    }
    hx_grammar_free(g);
    hx__srv_gen_req_free(&r);
}

static void hx_tt_model_grammars(const char *model_path)
{
    struct hx_model *model = NULL;
    struct hx_model_params mp = {.struct_size = sizeof mp, .vocab_only = true};
    if (hx_model_load(model_path, &mp, &model) != HX_OK) {
        fprintf(stderr, "self-test FAIL: cannot load %s: %s\n", model_path, hx_last_error());
        hx_tt_failures++;
        return;
    }
    const char *named = "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}";
    const char *q[] = {
        ("<tool_call>\n{\"name\": \"get_weather\", "
         "\"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"),
        ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": { \"city\": \"\\u00e9\" }}\n"
         "</tool_call>"),
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", /* required */
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 1}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"P\"}}\n</tool_call>x",
    };
    const bool q_ok[] = {true, true, false, false, false, false, false};
    hx_tt_grammar_texts(model, "qwen3", named, q, q_ok, 7, "get_weather(");
    const char *qr[] = {
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"x\": [true]}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"x\": 1}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
    };
    const bool qr_ok[] = {true, false, false, false};
    hx_tt_grammar_texts(model, "qwen3", "\"required\"", qr, qr_ok, 4, "add({}");
    const char *l[] = {
        "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Paris\"}}",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}",
        ("<tool_call>\n{\"name\": \"get_weather\", "
         "\"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"),
    };
    const bool l_ok[] = {true, false, false};
    hx_tt_grammar_texts(model, "llama3", named, l, l_ok, 3, "get_weather({\"city\":\"Paris\"})");
    hx_model_free(model);
}

int hx__srv_selftest_tools(const char *model_path)
{
    hx_tt_parser();
    hx_tt_requests();
    hx_tt_grammar();
    hx_tt_shapes();
    hx_tt_constrained_stream();
    if (model_path) hx_tt_model_grammars(model_path);
    return hx_tt_failures;
}
