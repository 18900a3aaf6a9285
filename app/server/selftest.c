/*
 * selftest.c — unit tests of the server's pure parts, run by `engine serve --self-test`
 * (tests/test-server.sh): request parsing and limits, pipelining, JSON validation, response
 * shapes, SSE framing, stop-string hold-back. No sockets, no model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server.h"

static int hx_srv_failures;

#define HX_SRV_CHECK(cond)                                                                   \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "self-test FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            hx_srv_failures++;                                                               \
        }                                                                                    \
    } while (0)

/* Feed s in pieces of `step` bytes; returns bytes consumed before completion or error. */
static size_t hx_srv_feed_steps(struct hx_srv_reqp *rp, const char *s, size_t n, size_t step)
{
    size_t off = 0;
    while (off < n && !rp->complete && !rp->error_status) {
        size_t k = n - off < step ? n - off : step;
        size_t used = hx__srv_reqp_feed(rp, s + off, k);
        off += used;
        if (used < k) break;
    }
    return off;
}

static void hx_srv_test_parser(void)
{
    static const char two[] = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                              "Authorization: Bearer k\r\n\r\nhello"
                              "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
    for (size_t step = 1; step <= sizeof two; step = step * 3 + 1) {
        struct hx_srv_reqp rp;
        hx__srv_reqp_init(&rp);
        size_t used = hx_srv_feed_steps(&rp, two, sizeof two - 1, step);
        HX_SRV_CHECK(rp.complete && !rp.error_status);
        HX_SRV_CHECK(rp.req.method == HTTP_POST && !strcmp(rp.req.path, "/v1/completions"));
        HX_SRV_CHECK(rp.req.body_len == 5 && !memcmp(rp.req.body, "hello", 5));
        HX_SRV_CHECK(rp.req.authorization && !strcmp(rp.req.authorization, "Bearer k"));
        HX_SRV_CHECK(rp.req.keep_alive);
        hx__srv_reqp_reset(&rp);
        size_t used2 = hx_srv_feed_steps(&rp, two + used, sizeof two - 1 - used, step);
        HX_SRV_CHECK(rp.complete && rp.req.method == HTTP_GET && !strcmp(rp.req.path, "/health"));
        HX_SRV_CHECK(used + used2 == sizeof two - 1);
        hx__srv_reqp_deinit(&rp);
    }
    struct {
        const char *text;
        int status;
    } bad[] = {
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411},
        {"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413},
        {"GARBAGE\r\n\r\n", 400},
        {"GET / HTTP/9.9\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET /\x01 HTTP/1.1\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hx_srv_reqp rp;
        hx__srv_reqp_init(&rp);
        hx__srv_reqp_feed(&rp, bad[i].text, strlen(bad[i].text));
        if (rp.error_status != bad[i].status)
            fprintf(stderr, "self-test: case %zu got %d\n", i, rp.error_status);
        HX_SRV_CHECK(rp.error_status == bad[i].status);
        hx__srv_reqp_deinit(&rp);
    }
    /* a head over 16 KiB */
    struct hx_srv_buf big = {0};
    hx__srv_buf_puts(&big, "GET / HTTP/1.1\r\nX-Big: ");
    for (int i = 0; i < 20000; i++) hx__srv_buf_append(&big, "a", 1);
    hx__srv_buf_puts(&big, "\r\n\r\n");
    struct hx_srv_reqp rp;
    hx__srv_reqp_init(&rp);
    hx__srv_reqp_feed(&rp, big.data, big.len);
    HX_SRV_CHECK(rp.error_status == 431);
    hx__srv_reqp_deinit(&rp);
    hx__srv_buf_free(&big);
    /* HTTP/1.0 defaults to close */
    hx__srv_reqp_init(&rp);
    const char *h10 = "GET /health HTTP/1.0\r\n\r\n";
    hx__srv_reqp_feed(&rp, h10, strlen(h10));
    HX_SRV_CHECK(rp.complete && !rp.req.keep_alive);
    hx__srv_reqp_deinit(&rp);
}

static bool hx_srv_try(enum hx_srv_kind kind, const char *body, const char *want_param)
{
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[256];
    bool ok = hx__srv_gen_req_parse(kind, body, strlen(body), &r, &param, msg, sizeof msg);
    if (ok) hx__srv_gen_req_free(&r);
    else if (want_param && (!param || strcmp(param, want_param))) {
        fprintf(stderr, "self-test: %s: param %s (%s)\n", body, param ? param : "NULL", msg);
        return true; /* report as unexpected */
    }
    return ok;
}

/* The error for an unknown role names exactly the roles that are accepted: each word it lists
 * parses, and the roles it leaves out (or a near miss) do not. */
static void hx_srv_test_roles(void)
{
    struct hx_srv_gen_req r;
    const char *param = NULL;
    char msg[256], body[320];
    const char *bad = "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}";
    HX_SRV_CHECK(
        !hx__srv_gen_req_parse(HX_SRV_CHAT, bad, strlen(bad), &r, &param, msg, sizeof msg));
    const char *list = strstr(msg, "must be ");
    HX_SRV_CHECK(list != NULL);
    if (!list) return;
    int n_listed = 0;
    char words[256];
    snprintf(words, sizeof words, "%s", list + 8);
    for (char *save = NULL, *w = strtok_r(words, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
        if (!strcmp(w, "or")) continue;
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"%s\",\"content\":\"hi\"}]}", w);
        if (!strcmp(w, "tool")) /* a tool result answers an earlier call (tools.c) */
            snprintf(body, sizeof body,
                     "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
                     "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                     "\"arguments\":\"{}\"}}]},{\"role\":\"%s\",\"tool_call_id\":\"c\","
                     "\"content\":\"hi\"}]}", w);
        if (!hx_srv_try(HX_SRV_CHAT, body, NULL)) {
            fprintf(stderr, "self-test FAIL: role '%s' is listed in \"%s\" but refused\n", w, msg);
            hx_srv_failures++;
        }
        n_listed++;
    }
    HX_SRV_CHECK(n_listed == 5); /* system developer user assistant tool (docs/server.md) */
    static const char *const not_roles[] = {"function", "System", "users", "", "ipython"};
    for (size_t i = 0; i < sizeof not_roles / sizeof not_roles[0]; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"%s\",\"content\":\"hi\"}]}",
                 not_roles[i]);
        HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, body, "messages"));
    }
}

static void hx_srv_test_json(void)
{
    struct hx_srv_gen_req r;
    const char *param;
    char msg[256];
    const char *good = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},"
                       "{\"type\":\"text\",\"text\":\"there\"}]}],\"max_tokens\":7,"
                       "\"temperature\":0,\"stop\":[\"a\",\"bc\"],\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"seed\":42,"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    HX_SRV_CHECK(hx__srv_gen_req_parse(HX_SRV_CHAT, good, strlen(good), &r, &param, msg, sizeof msg));
    HX_SRV_CHECK(r.n_msgs == 2 && !strcmp(r.msgs[1].content, "hi there"));
    HX_SRV_CHECK(r.max_tokens == 7 && r.sp.temperature == 0 && r.n_stops == 2 && r.stream);
    HX_SRV_CHECK(r.include_usage && r.seed_set && r.sp.seed == 42 && !r.enable_thinking);
    HX_SRV_CHECK(r.model && !strcmp(r.model, "m"));
    HX_SRV_CHECK(r.cache_prompt); /* the prompt cache is on unless a request says otherwise */
    hx__srv_gen_req_free(&r);
    const char *nocache = "{\"prompt\":\"x\",\"cache_prompt\":false}";
    HX_SRV_CHECK(hx__srv_gen_req_parse(HX_SRV_COMPLETION, nocache, strlen(nocache), &r, &param, msg,
                                       sizeof msg) && !r.cache_prompt);
    hx__srv_gen_req_free(&r);
    HX_SRV_CHECK(hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\"}", NULL));
    HX_SRV_CHECK(hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":[\"x\"],\"stop\":\"y\",\"n\":1}", NULL));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":[\"x\",\"y\"]}", "prompt"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":5}", "prompt"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{}", "prompt"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"n\":2}", "n"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"temperature\":-1}", "temperature"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":\"9\"}", "max_tokens"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"stream\":1}", "stream"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"stop\":[1]}", "stop"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"\xff\"}", NULL));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\"", NULL));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "[1]", NULL));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"a\\u0000b\"}", NULL));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, "{\"messages\":[]}", "messages"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, "{\"messages\":[{\"role\":\"x\",\"content\":\"\"}]}", "messages"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":3}]}", "messages"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, "{\"messages\":\"hi\"}", "messages"));
    hx_srv_test_roles();
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_CHAT, "{\"model\":3,\"messages\":[]}", "model"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"return_token_ids\":1}",
                             "return_token_ids"));
    HX_SRV_CHECK(!hx_srv_try(HX_SRV_COMPLETION, "{\"prompt\":\"x\",\"cache_prompt\":\"no\"}",
                             "cache_prompt"));

    /* responses are valid JSON, even for invalid UTF-8 text */
    struct hx_srv_result res = {.id = "chatcmpl-1", .model = "m", .devices = "cpu", .policy = "single",
                                .finish_reason = "length", .created = 1, .prompt_tokens = 3,
                                .completion_tokens = 2, .cached_tokens = 1};
    char *s = hx__srv_response_json(HX_SRV_CHAT, &res, "a\xffz", 3);
    json_error_t e;
    json_t *j = s ? json_loads(s, 0, &e) : NULL;
    HX_SRV_CHECK(j != NULL);
    json_t *content = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "content");
    HX_SRV_CHECK(json_is_string(content) && !strcmp(json_string_value(content), "a\xEF\xBF\xBDz"));
    HX_SRV_CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")) == 5);
    json_t *details = json_object_get(json_object_get(j, "usage"), "prompt_tokens_details");
    HX_SRV_CHECK(json_integer_value(json_object_get(details, "cached_tokens")) == 1);
    HX_SRV_CHECK(json_is_object(json_object_get(j, "hx")));
    json_decref(j);
    free(s);
    /* token_ids only when asked for, on the finish chunk of a stream */
    static const hx_token ids[] = {5, 7};
    res.with_ids = true;
    res.ids = ids;
    res.n_ids = 2;
    s = hx__srv_chunk_json(HX_SRV_COMPLETION, HX_SRV_CHUNK_FINISH, &res, NULL, 0);
    j = s ? json_loads(s, 0, &e) : NULL;
    json_t *tids = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "token_ids");
    HX_SRV_CHECK(json_array_size(tids) == 2 && json_integer_value(json_array_get(tids, 1)) == 7);
    json_decref(j);
    free(s);
    s = hx__srv_chunk_json(HX_SRV_COMPLETION, HX_SRV_CHUNK_TEXT, &res, "t", 1);
    HX_SRV_CHECK(s && !strstr(s, "token_ids"));
    free(s);
    res.with_ids = false;
    s = hx__srv_chunk_json(HX_SRV_CHAT, HX_SRV_CHUNK_USAGE, &res, NULL, 0);
    j = s ? json_loads(s, 0, &e) : NULL;
    HX_SRV_CHECK(j && json_array_size(json_object_get(j, "choices")) == 0);
    json_decref(j);
    free(s);
    s = hx__srv_error_json(400, "bad \"x\"", "prompt", NULL);
    j = s ? json_loads(s, 0, &e) : NULL;
    HX_SRV_CHECK(j && !strcmp(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "prompt"));
    json_decref(j);
    free(s);
}

static void hx_srv_test_sse(void)
{
    struct hx_srv_buf b = {0};
    hx__srv_sse_event(&b, "{}", 2);
    HX_SRV_CHECK(b.data && !strcmp(b.data, "a\r\ndata: {}\n\n\r\n"));
    hx__srv_buf_free(&b);
    hx__srv_http_chunk(&b, "", 0);
    HX_SRV_CHECK(b.len == 0);
    hx__srv_buf_free(&b);

    char *stops[] = {"END", "xy"};
    const char *pieces[] = {"hello E", "N", "x", "Dz"};
    struct hx_srv_stopper st = {.stops = stops, .n_stops = 2};
    struct hx_srv_buf out = {0};
    hx__srv_stopper_push(&st, pieces[0], strlen(pieces[0]), &out);
    HX_SRV_CHECK(out.len == 6 && !memcmp(out.data, "hello ", 6)); /* "E" held back */
    hx__srv_stopper_push(&st, pieces[1], 1, &out);
    HX_SRV_CHECK(out.len == 6);
    hx__srv_stopper_push(&st, pieces[2], 1, &out); /* "ENx": no stop can start before x */
    HX_SRV_CHECK(out.len == 8 && !memcmp(out.data, "hello EN", 8));
    hx__srv_stopper_push(&st, pieces[3], 2, &out);
    HX_SRV_CHECK(!st.matched && out.len == 11);
    hx__srv_stopper_push(&st, "..EN", 4, &out);
    hx__srv_stopper_push(&st, "D!!", 3, &out);
    HX_SRV_CHECK(st.matched && out.len == 13 && !memcmp(out.data + 11, "..", 2));
    hx__srv_stopper_free(&st);
    hx__srv_buf_free(&out);
    struct hx_srv_stopper st2 = {.stops = stops, .n_stops = 2};
    hx__srv_stopper_push(&st2, "abcx", 4, &out);
    hx__srv_stopper_finish(&st2, &out);
    HX_SRV_CHECK(out.len == 4 && !memcmp(out.data, "abcx", 4));
    hx__srv_stopper_free(&st2);
    hx__srv_buf_free(&out);
}

int hx__srv_selftest(const char *model_path)
{
    hx_srv_test_parser();
    hx_srv_test_json();
    hx_srv_test_sse();
    hx__srv_selftest_schema(model_path, &hx_srv_failures);
    hx_srv_failures += hx__srv_selftest_tools(model_path);
    fprintf(stderr, "engine serve --self-test: %s (%d failure(s))\n",
            hx_srv_failures ? "FAILED" : "ok", hx_srv_failures);
    return hx_srv_failures;
}
