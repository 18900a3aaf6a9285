/*
 * chat.c — built-in chat templates, formats.md §5.6, and their tool-call formats
 * (hx_chat_apply_tools; docs/server.md "Tool calls").
 *
 * qwen3 (alias chatml): "<|im_start|>{role}\n{content}<|im_end|>\n" per message; assistant
 *   turns have their <think>…</think> block handled as the official Qwen3 template does
 *   (kept, normalised, only for assistant turns after the last user query; stripped before);
 *   generation prompt "<|im_start|>assistant\n", plus "<think>\n\n</think>\n\n" when thinking
 *   is disabled. Tools, as the official Qwen3 template writes them: a system turn of the system
 *   message's content + "\n\n" (if any), "# Tools\n\nYou may call one or more functions to
 *   assist with the user query.\n\nYou are provided with function signatures within
 *   <tools></tools> XML tags:\n<tools>", "\n" + tojson(tool) for each, "\n</tools>\n\nFor each
 *   function call, return a json object with function name and arguments within
 *   <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\":
 *   <args-json-object>}\n</tool_call><|im_end|>\n". An assistant's calls follow its content
 *   (a "\n" before each but a first one after empty content) as "<tool_call>\n{\"name\":
 *   \"NAME\", \"arguments\": ARGS}\n</tool_call>"; tool results are "\n<tool_response>\n
 *   {content}\n</tool_response>", consecutive ones in one "<|im_start|>user…<|im_end|>\n" turn.
 * llama3: "<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>"; prompt
 *   "<|start_header_id|>assistant<|end_header_id|>\n\n". BOS comes from the tokenizer. Tools,
 *   as Llama 3.1's official template writes them (JSON tool calling, tools_in_user_message, the
 *   template's default date "26 Jul 2024"): see hx_render_llama3.
 * llama2: Meta's format "[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>"
 *   with "<s>[INST] " opening each later turn (the first BOS comes from the tokenizer).
 * bitnet: "{Role}: {trimmed content}<|eot_id|>" per message; prompt "Assistant: ". llama2 and
 *   bitnet have no tool format.
 *
 * JSON in the templates (tools, call arguments) is written as transformers' tojson writes it
 * (hx_json_dump); call arguments are rendered from their parsed value, as servers pass the
 * templates OpenAI's argument strings parsed (a template printing the string as it came would
 * quote it in Llama 3's case).
 */
#include <stdint.h>
#include <string.h>

#include "chat.h"
#include "hx-impl.h"

static const char *const hx_chat_names[] = {"qwen3", "chatml", "llama3", "llama2", "bitnet", NULL};

const char *const *hx__chat_names(void) { return hx_chat_names; }

const char *hx__chat_detect(const char *t)
{
    if (!t) return NULL;
    if (strstr(t, "<|im_start|>")) return "qwen3";
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "[INST]")) return "llama2";
    if (strstr(t, "<|eot_id|>") && (strstr(t, "Assistant:") || strstr(t, "Assistant: ")))
        return "bitnet";
    return NULL;
}

static bool hx_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void hx_trim(const char **s, size_t *n)
{
    while (*n > 0 && hx_ws(**s)) (*s)++, (*n)--;
    while (*n > 0 && hx_ws((*s)[*n - 1])) (*n)--;
}

static void hx_strip_nl(const char **s, size_t *n)
{
    while (*n > 0 && **s == '\n') (*s)++, (*n)--;
    while (*n > 0 && (*s)[*n - 1] == '\n') (*n)--;
}

static void hx_sb_str(struct hx_strbuf *sb, const char *s) { hx__sb_append(sb, s, strlen(s)); }

static const char *hx_memmem_str(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle));
}

/* ---- JSON text as the templates' `tojson` writes it -------------------------------------------
 *
 * The official templates run under transformers' Jinja environment, whose tojson filter is
 * Python's json.dumps(x, ensure_ascii=False, indent=indent): ", " and ": " between items
 * without an indent; with one, "," ends each line and nested items are indented by that many
 * spaces more; "{}" and "[]" when empty; strings with only '"', '\\' and the control characters
 * escaped (\n \r \t \b \f, others \u00XX), everything else as UTF-8. Numbers are copied as
 * written (Python would print a float as its shortest repr). Input that is not JSON is refused.
 */

#define HX_JSON_MAX_DEPTH 128

struct hx_jw {
    const char *p, *end;
    struct hx_strbuf *sb; /* NULL: check only */
    int indent;
};

static void hx_jw_ws(struct hx_jw *w)
{
    while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
        w->p++;
}

static void hx_jw_put(struct hx_jw *w, const char *s, size_t n)
{
    if (w->sb) hx__sb_append(w->sb, s, n);
}

static void hx_jw_newline(struct hx_jw *w, int depth)
{
    if (!w->sb) return;
    hx__sb_append(w->sb, "\n", 1);
    for (int i = 0; i < depth * w->indent; i++) hx__sb_append(w->sb, " ", 1);
}

/* Append c (a code point) as UTF-8. */
static void hx_utf8_put(struct hx_strbuf *sb, uint32_t c)
{
    char b[4];
    size_t n;
    if (c < 0x80) b[0] = (char)c, n = 1;
    else if (c < 0x800) b[0] = (char)(0xC0 | (c >> 6)), b[1] = (char)(0x80 | (c & 0x3F)), n = 2;
    else if (c < 0x10000)
        b[0] = (char)(0xE0 | (c >> 12)), b[1] = (char)(0x80 | ((c >> 6) & 0x3F)),
        b[2] = (char)(0x80 | (c & 0x3F)), n = 3;
    else
        b[0] = (char)(0xF0 | (c >> 18)), b[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
        b[2] = (char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (char)(0x80 | (c & 0x3F)), n = 4;
    hx__sb_append(sb, b, n);
}

/* One decoded character of a string's content, written as json.dumps writes it. */
static void hx_json_put_char(struct hx_strbuf *sb, uint32_t c)
{
    switch (c) {
    case '"': hx__sb_append(sb, "\\\"", 2); return;
    case '\\': hx__sb_append(sb, "\\\\", 2); return;
    case '\n': hx__sb_append(sb, "\\n", 2); return;
    case '\r': hx__sb_append(sb, "\\r", 2); return;
    case '\t': hx__sb_append(sb, "\\t", 2); return;
    case '\b': hx__sb_append(sb, "\\b", 2); return;
    case '\f': hx__sb_append(sb, "\\f", 2); return;
    default: break;
    }
    if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF)) /* a lone surrogate has no UTF-8 form */
        hx__sb_printf(sb, "\\u%04x", (unsigned)c);
    else
        hx_utf8_put(sb, c);
}

static int hx_hex4(const char *p, const char *end, uint32_t *v)
{
    if (end - p < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

/* A string literal at w->p: decoded and written again as json.dumps writes it. */
static bool hx_jw_string(struct hx_jw *w)
{
    w->p++; /* the opening quote */
    hx_jw_put(w, "\"", 1);
    while (w->p < w->end) {
        unsigned char c = (unsigned char)*w->p;
        if (c == '"') {
            w->p++;
            hx_jw_put(w, "\"", 1);
            return true;
        }
        if (c < 0x20) return false;
        if (c != '\\') { /* raw UTF-8 bytes go through unchanged */
            hx_jw_put(w, w->p, 1);
            w->p++;
            continue;
        }
        if (w->end - w->p < 2) return false;
        char e = w->p[1];
        w->p += 2;
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (hx_hex4(w->p, w->end, &cp)) return false;
            w->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && w->end - w->p >= 6 && w->p[0] == '\\' &&
                w->p[1] == 'u') {
                uint32_t lo;
                if (!hx_hex4(w->p + 2, w->end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    w->p += 6;
                }
            }
            break;
        default: return false;
        }
        if (w->sb) hx_json_put_char(w->sb, cp);
    }
    return false;
}

static bool hx_jw_value(struct hx_jw *w, int depth);

/* An object or an array at w->p. */
static bool hx_jw_container(struct hx_jw *w, int depth)
{
    const char open = *w->p, close = open == '{' ? '}' : ']';
    w->p++;
    hx_jw_ws(w);
    if (w->p < w->end && *w->p == close) {
        w->p++;
        hx_jw_put(w, open == '{' ? "{}" : "[]", 2);
        return true;
    }
    hx_jw_put(w, &open, 1);
    for (bool first = true;; first = false) {
        if (!first) {
            hx_jw_put(w, ",", 1);
            if (!w->indent) hx_jw_put(w, " ", 1);
        }
        if (w->indent) hx_jw_newline(w, depth + 1);
        hx_jw_ws(w);
        if (open == '{') {
            if (w->p >= w->end || *w->p != '"' || !hx_jw_string(w)) return false;
            hx_jw_ws(w);
            if (w->p >= w->end || *w->p != ':') return false;
            w->p++;
            hx_jw_put(w, ": ", 2);
        }
        if (!hx_jw_value(w, depth + 1)) return false;
        hx_jw_ws(w);
        if (w->p >= w->end) return false;
        if (*w->p == ',') {
            w->p++;
            continue;
        }
        if (*w->p != close) return false;
        w->p++;
        if (w->indent) hx_jw_newline(w, depth);
        hx_jw_put(w, &close, 1);
        return true;
    }
}

static bool hx_jw_value(struct hx_jw *w, int depth)
{
    if (depth > HX_JSON_MAX_DEPTH) return false;
    hx_jw_ws(w);
    if (w->p >= w->end) return false;
    char c = *w->p;
    if (c == '{' || c == '[') return hx_jw_container(w, depth);
    if (c == '"') return hx_jw_string(w);
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lit[i]);
        if ((size_t)(w->end - w->p) >= n && !memcmp(w->p, lit[i], n)) {
            hx_jw_put(w, w->p, n);
            w->p += n;
            return true;
        }
    }
    /* a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *s = w->p, *p = s, *e = w->end;
    if (p < e && *p == '-') p++;
    if (p < e && *p == '0') p++;
    else if (p < e && *p >= '1' && *p <= '9') while (p < e && *p >= '0' && *p <= '9') p++;
    else return false;
    if (p < e && *p == '.') {
        const char *q = ++p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == q) return false;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        const char *q = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == q) return false;
    }
    hx_jw_put(w, s, (size_t)(p - s));
    w->p = p;
    return true;
}

/* Append the JSON text s as tojson(indent) writes it; false (nothing usable) if it is not one
 * JSON value. */
static bool hx_json_dump(struct hx_strbuf *sb, const char *s, int indent)
{
    struct hx_jw w = {s, s + strlen(s), sb, indent};
    if (!hx_jw_value(&w, 0)) return false;
    hx_jw_ws(&w);
    return w.p == w.end;
}

/* A string as tojson writes it (the Llama template's tool results). */
static void hx_json_quote(struct hx_strbuf *sb, const char *s)
{
    hx__sb_append(sb, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == '"' || c == '\\') hx_json_put_char(sb, c);
        else hx__sb_append(sb, p, 1);
    }
    hx__sb_append(sb, "\"", 1);
}

/* The elements of the JSON array text `tools` (NULL: none): *n elements, each written by
 * tojson(indent) followed by `after`, appended to sb. */
static bool hx_json_each(struct hx_strbuf *sb, const char *tools, int indent, const char *before,
                         const char *after, size_t *n)
{
    *n = 0;
    if (!tools) return true;
    struct hx_jw w = {tools, tools + strlen(tools), sb, indent};
    hx_jw_ws(&w);
    if (w.p >= w.end || *w.p != '[') return false;
    w.p++;
    hx_jw_ws(&w);
    if (w.p < w.end && *w.p == ']') {
        w.p++;
    } else {
        for (;;) {
            if (sb) hx__sb_append(sb, before, strlen(before));
            if (!hx_jw_value(&w, 0)) return false;
            if (sb) hx__sb_append(sb, after, strlen(after));
            ++*n;
            hx_jw_ws(&w);
            if (w.p < w.end && *w.p == ',') {
                w.p++;
                continue;
            }
            if (w.p >= w.end || *w.p != ']') return false;
            w.p++;
            break;
        }
    }
    hx_jw_ws(&w);
    return w.p == w.end;
}

static int hx_bad_json(const char *what, size_t i)
{
    return hx__set_error(HX_E_INVAL, "chat: %s %zu is not valid JSON", what, i);
}

/* ---- qwen3 ----------------------------------------------------------------------------------- */

static const char *hx_memmem_last(const char *s, size_t n, const char *needle)
{
    const char *last = NULL;
    size_t k = strlen(needle);
    for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), needle, k)); p++) last = p;
    return last;
}

/* Qwen3's official template (formats.md §5.6): with tools, the system turn carries the
 * "# Tools" block (the system message's content first); assistant tool calls follow the
 * content as <tool_call> blocks; consecutive tool results share one user turn of
 * <tool_response> blocks. */
static int hx_render_qwen3(struct hx_strbuf *sb, const struct hx_chat_message *m, size_t n,
                           const char *tools, bool gen, bool thinking)
{
    bool sys0 = n > 0 && !strcmp(m[0].role, "system");
    size_t n_tools = 0;
    struct hx_strbuf tb;
    hx__sb_init(&tb);
    if (!hx_json_each(&tb, tools, 0, "\n", "", &n_tools)) {
        hx__sb_free(&tb);
        return hx__set_error(HX_E_INVAL, "chat: the tools are not a JSON array");
    }
    if (n_tools > 0) {
        hx_sb_str(sb, "<|im_start|>system\n");
        if (sys0) {
            hx_sb_str(sb, m[0].content);
            hx_sb_str(sb, "\n\n");
        }
        hx_sb_str(sb, "# Tools\n\nYou may call one or more functions to assist with the user "
                      "query.\n\nYou are provided with function signatures within <tools></tools> "
                      "XML tags:\n<tools>");
        hx__sb_append(sb, tb.data ? tb.data : "", tb.len);
        hx_sb_str(sb, "\n</tools>\n\nFor each function call, return a json object with function "
                      "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                      "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                      "</tool_call><|im_end|>\n");
    } else if (sys0) {
        hx_sb_str(sb, "<|im_start|>system\n");
        hx_sb_str(sb, m[0].content);
        hx_sb_str(sb, "<|im_end|>\n");
    }
    hx__sb_free(&tb);
    /* last_query_index: the last user message that is not a pure <tool_response> wrapper;
     * n - 1 when there is none (then no assistant turn keeps its reasoning) */
    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;) {
        if (strcmp(m[i].role, "user")) continue;
        const char *c = m[i].content;
        size_t cl = strlen(c);
        bool tool = cl >= 15 && !strncmp(c, "<tool_response>", 15) && cl >= 16 &&
                    !strcmp(c + cl - 16, "</tool_response>");
        if (!tool) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content, *role = m[i].role;
        size_t cl = strlen(c);
        if (!strcmp(role, "user") || (!strcmp(role, "system") && i > 0)) {
            hx__sb_printf(sb, "<|im_start|>%s\n", role);
            hx__sb_append(sb, c, cl);
            hx_sb_str(sb, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            /* content after the last </think>; reasoning between the last <think> before the
             * first </think> and it, newlines stripped */
            const char *reason = "", *content = c;
            size_t rl = 0, ctl = cl;
            const char *end = hx_memmem_str(c, cl, "</think>");
            if (end) {
                const char *open = hx_memmem_last(c, (size_t)(end - c), "<think>");
                reason = open ? open + 7 : c;
                rl = (size_t)(end - reason);
                hx_strip_nl(&reason, &rl);
                content = hx_memmem_last(c, cl, "</think>") + 8;
                ctl = cl - (size_t)(content - c);
                while (ctl > 0 && *content == '\n') content++, ctl--;
            }
            hx_sb_str(sb, "<|im_start|>assistant\n");
            if (i > last_query && (i + 1 == n || rl > 0)) {
                hx_sb_str(sb, "<think>\n");
                hx__sb_append(sb, reason, rl);
                hx_sb_str(sb, "\n</think>\n\n");
                const char *lc = content;
                size_t ll = ctl;
                while (ll > 0 && *lc == '\n') lc++, ll--;
                hx__sb_append(sb, lc, ll);
            } else {
                hx__sb_append(sb, content, ctl);
            }
            for (size_t k = 0; k < m[i].n_tool_calls; k++) {
                const struct hx_chat_tool_call *tc = &m[i].tool_calls[k];
                if (k > 0 || ctl > 0) hx_sb_str(sb, "\n");
                hx_sb_str(sb, "<tool_call>\n{\"name\": \"");
                hx_sb_str(sb, tc->name);
                hx_sb_str(sb, "\", \"arguments\": ");
                if (!hx_json_dump(sb, tc->arguments, 0))
                    return hx_bad_json("the arguments of message", i);
                hx_sb_str(sb, "}\n</tool_call>");
            }
            hx_sb_str(sb, "<|im_end|>\n");
        } else if (!strcmp(role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) hx_sb_str(sb, "<|im_start|>user");
            hx_sb_str(sb, "\n<tool_response>\n");
            hx__sb_append(sb, c, cl);
            hx_sb_str(sb, "\n</tool_response>");
            if (i + 1 == n || strcmp(m[i + 1].role, "tool")) hx_sb_str(sb, "<|im_end|>\n");
        }
    }
    if (gen) {
        hx_sb_str(sb, "<|im_start|>assistant\n");
        if (!thinking) hx_sb_str(sb, "<think>\n\n</think>\n\n");
    }
    return HX_OK;
}

/* ---- llama3 ---------------------------------------------------------------------------------- */

/* llama.cpp's built-in Llama 3 format for plain messages; with tools, Llama 3.1's official
 * template (JSON tool calling, tools in the first user message as it defaults to): the system
 * turn "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
 * + the system message; the first message after it becomes a user turn with the instructions
 * and each tool as tojson(indent=4). An assistant tool call is {"name": ..., "parameters": ...};
 * a tool result is an ipython turn holding its content as a JSON string (tojson of a string). */
static int hx_render_llama3(struct hx_strbuf *sb, const struct hx_chat_message *m, size_t n,
                            const char *tools, bool gen)
{
    size_t i = 0, n_tools = 0;
    if (tools) {
        if (!hx_json_each(NULL, tools, 4, "", "", &n_tools))
            return hx__set_error(HX_E_INVAL, "chat: the tools are not a JSON array");
        const char *sys = "";
        size_t sl = 0;
        if (n > 0 && !strcmp(m[0].role, "system")) {
            sys = m[0].content;
            sl = strlen(sys);
            hx_trim(&sys, &sl);
            i = 1;
        }
        if (i == n)
            return hx__set_error(HX_E_INVAL, "chat: llama3 puts the tools in the first user "
                                             "message, and there is none after the system one");
        hx_sb_str(sb, "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
                      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
        hx__sb_append(sb, sys, sl);
        hx_sb_str(sb, "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                      "Given the following functions, please respond with a JSON for a function "
                      "call with its proper arguments that best answers the given prompt.\n\n"
                      "Respond in the format {\"name\": function name, \"parameters\": dictionary "
                      "of argument name and its value}.Do not use variables.\n\n");
        hx_json_each(sb, tools, 4, "", "\n\n", &n_tools);
        const char *c = m[i].content;
        size_t cl = strlen(c);
        hx_trim(&c, &cl);
        hx__sb_append(sb, c, cl);
        hx_sb_str(sb, "<|eot_id|>");
        i++;
    }
    for (; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        if (!strcmp(m[i].role, "tool")) {
            hx_sb_str(sb, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            hx_json_quote(sb, c);
            hx_sb_str(sb, "<|eot_id|>");
        } else if (m[i].n_tool_calls > 0) {
            if (m[i].n_tool_calls != 1)
                return hx__set_error(HX_E_INVAL,
                                     "chat: llama3 takes one tool call per message; message %zu "
                                     "has %zu", i, m[i].n_tool_calls);
            hx_sb_str(sb, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            hx_sb_str(sb, m[i].tool_calls[0].name);
            hx_sb_str(sb, "\", \"parameters\": ");
            if (!hx_json_dump(sb, m[i].tool_calls[0].arguments, 0))
                return hx_bad_json("the arguments of message", i);
            hx_sb_str(sb, "}<|eot_id|>");
        } else {
            hx_trim(&c, &cl);
            hx__sb_printf(sb, "<|start_header_id|>%s<|end_header_id|>\n\n", m[i].role);
            hx__sb_append(sb, c, cl);
            hx_sb_str(sb, "<|eot_id|>");
        }
    }
    if (gen) hx_sb_str(sb, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return HX_OK;
}

static void hx_render_llama2(struct hx_strbuf *sb, const struct hx_chat_message *m, size_t n)
{
    const char *sys = NULL;
    size_t sl = 0, i = 0;
    if (n > 0 && !strcmp(m[0].role, "system")) {
        sys = m[0].content;
        sl = strlen(sys);
        hx_trim(&sys, &sl);
        i = 1;
    }
    bool first = true;
    for (; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        hx_trim(&c, &cl);
        if (!strcmp(m[i].role, "assistant")) {
            hx_sb_str(sb, " ");
            hx__sb_append(sb, c, cl);
            hx_sb_str(sb, " </s>");
            continue;
        }
        hx_sb_str(sb, first ? "[INST] " : "<s>[INST] ");
        if (first && sys) {
            hx_sb_str(sb, "<<SYS>>\n");
            hx__sb_append(sb, sys, sl);
            hx_sb_str(sb, "\n<</SYS>>\n\n");
        }
        first = false;
        hx__sb_append(sb, c, cl);
        hx_sb_str(sb, " [/INST]");
    }
    if (first && sys) { /* a system message alone */
        hx_sb_str(sb, "[INST] <<SYS>>\n");
        hx__sb_append(sb, sys, sl);
        hx_sb_str(sb, "\n<</SYS>>\n\n [/INST]");
    }
}

static void hx_render_bitnet(struct hx_strbuf *sb, const struct hx_chat_message *m, size_t n,
                             bool gen)
{
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        hx_trim(&c, &cl);
        const char *r = m[i].role;
        hx__sb_printf(sb, "%c%s: ", (r[0] >= 'a' && r[0] <= 'z') ? r[0] - 32 : r[0], r + 1);
        hx__sb_append(sb, c, cl);
        hx_sb_str(sb, "<|eot_id|>");
    }
    if (gen) hx_sb_str(sb, "Assistant: ");
}

static int hx_chat_notfound(const char *what, const char *name)
{
    return hx__set_error(HX_E_NOTFOUND, "chat: %s%s%s; known templates: qwen3 (alias chatml), "
                         "llama3, llama2, bitnet", what, name ? " " : "", name ? name : "");
}

int hx__chat_apply_tools(const char *tmpl_src, const char *name,
                         const struct hx_chat_message *msgs, size_t n_msgs,
                         const char *tools_json, bool add_generation_prompt, bool enable_thinking,
                         char **out)
{
    *out = NULL;
    if (n_msgs > 0 && !msgs) return hx__set_error(HX_E_INVAL, "chat: NULL messages");
    bool calls = false;
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return hx__set_error(HX_E_INVAL, "chat: message %zu has a NULL role or content", i);
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") &&
            strcmp(msgs[i].role, "assistant") && strcmp(msgs[i].role, "tool"))
            return hx__set_error(HX_E_INVAL, "chat: message %zu has unknown role '%s'", i, msgs[i].role);
        if (msgs[i].n_tool_calls > 0 && (!msgs[i].tool_calls || strcmp(msgs[i].role, "assistant")))
            return hx__set_error(HX_E_INVAL, "chat: message %zu: only assistant messages have tool "
                                             "calls, and they need the array", i);
        for (size_t k = 0; k < msgs[i].n_tool_calls; k++)
            if (!msgs[i].tool_calls[k].name || !msgs[i].tool_calls[k].arguments)
                return hx__set_error(HX_E_INVAL, "chat: message %zu, tool call %zu has a NULL "
                                                 "name or arguments", i, k);
        calls = calls || msgs[i].n_tool_calls > 0;
    }
    if (!name) {
        name = hx__chat_detect(tmpl_src);
        if (!name)
            return hx_chat_notfound(tmpl_src ? "cannot detect the format of the model's chat template"
                                             : "the model has no chat template", NULL);
    }
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    int st = HX_OK;
    if (!strcmp(name, "qwen3") || !strcmp(name, "chatml")) {
        st = hx_render_qwen3(&sb, msgs, n_msgs, tools_json, add_generation_prompt, enable_thinking);
    } else if (!strcmp(name, "llama3")) {
        st = hx_render_llama3(&sb, msgs, n_msgs, tools_json, add_generation_prompt);
    } else if (!strcmp(name, "llama2") || !strcmp(name, "bitnet")) {
        if (tools_json || calls) {
            hx__sb_free(&sb);
            return hx__set_error(HX_E_INVAL, "chat: the %s template has no tool-call format "
                                             "(tools work with qwen3/chatml and llama3)", name);
        }
        if (!strcmp(name, "llama2")) hx_render_llama2(&sb, msgs, n_msgs);
        else hx_render_bitnet(&sb, msgs, n_msgs, add_generation_prompt);
    } else {
        return hx_chat_notfound("unknown template", name);
    }
    hx__sb_append(&sb, "", 0);
    if (st != HX_OK || sb.failed) {
        hx__sb_free(&sb);
        return st != HX_OK ? st : HX_E_NOMEM;
    }
    *out = hx__sb_take(&sb);
    if (!*out) *out = hx_strdup("");
    return *out ? HX_OK : HX_E_NOMEM;
}

int hx__chat_apply(const char *tmpl_src, const char *name, const struct hx_chat_msg *msgs,
                   size_t n_msgs, bool add_generation_prompt, bool enable_thinking, char **out)
{
    *out = NULL;
    if (n_msgs > 0 && !msgs) return hx__set_error(HX_E_INVAL, "chat: NULL messages");
    struct hx_chat_message *m = n_msgs ? hx_malloc(n_msgs * sizeof *m) : NULL;
    if (n_msgs && !m) return HX_E_NOMEM;
    for (size_t i = 0; i < n_msgs; i++)
        m[i] = (struct hx_chat_message){.role = msgs[i].role, .content = msgs[i].content};
    int st = hx__chat_apply_tools(tmpl_src, name, m, n_msgs, NULL, add_generation_prompt,
                                  enable_thinking, out);
    hx_free(m);
    return st;
}
