/*
 * chat.c — built-in chat templates, formats.md §5.6.
 *
 * qwen3 (alias chatml): "<|im_start|>{role}\n{content}<|im_end|>\n" per message; assistant
 *   turns have their <think>…</think> block handled as the official Qwen3 template does
 *   (kept, normalised, only for assistant turns after the last user query; stripped before);
 *   generation prompt "<|im_start|>assistant\n", plus "<think>\n\n</think>\n\n" when thinking
 *   is disabled.
 * llama3: "<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>"; prompt
 *   "<|start_header_id|>assistant<|end_header_id|>\n\n". BOS comes from the tokenizer.
 * llama2: Meta's format "[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>"
 *   with "<s>[INST] " opening each later turn (the first BOS comes from the tokenizer).
 * bitnet: "{Role}: {trimmed content}<|eot_id|>" per message; prompt "Assistant: ".
 */
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

static void hx_render_qwen3(struct hx_strbuf *sb, const struct hx_chat_msg *m, size_t n, bool gen,
                            bool thinking)
{
    /* last_query_index: the last user message that is not a pure <tool_response> wrapper */
    size_t last_query = n;
    for (size_t i = n; i-- > 0;) {
        if (strcmp(m[i].role, "user")) continue;
        const char *c = m[i].content;
        size_t cl = strlen(c);
        bool tool = cl >= 31 && !strncmp(c, "<tool_response>", 15) && !strcmp(c + cl - 16, "</tool_response>");
        if (!tool) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        if (strcmp(m[i].role, "assistant")) {
            hx__sb_printf(sb, "<|im_start|>%s\n", m[i].role);
            hx__sb_append(sb, c, cl);
            hx_sb_str(sb, "<|im_end|>\n");
            continue;
        }
        const char *reason = "", *content = c;
        size_t rl = 0, ctl = cl;
        const char *end = hx_memmem_str(c, cl, "</think>");
        if (end) {
            const char *open = hx_memmem_str(c, (size_t)(end - c), "<think>");
            const char *rs = open ? open + 7 : c;
            reason = rs;
            rl = (size_t)(end - rs);
            hx_strip_nl(&reason, &rl);
            content = end + 8;
            ctl = cl - (size_t)(content - c);
            while (ctl > 0 && *content == '\n') content++, ctl--;
        }
        hx_sb_str(sb, "<|im_start|>assistant\n");
        bool after_query = last_query == n || i > last_query;
        if (after_query && (i + 1 == n || rl > 0)) {
            hx_sb_str(sb, "<think>\n");
            hx__sb_append(sb, reason, rl);
            hx_sb_str(sb, "\n</think>\n\n");
        }
        hx__sb_append(sb, content, ctl);
        hx_sb_str(sb, "<|im_end|>\n");
    }
    if (gen) {
        hx_sb_str(sb, "<|im_start|>assistant\n");
        if (!thinking) hx_sb_str(sb, "<think>\n\n</think>\n\n");
    }
}

static void hx_render_llama3(struct hx_strbuf *sb, const struct hx_chat_msg *m, size_t n, bool gen)
{
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        hx_trim(&c, &cl);
        hx__sb_printf(sb, "<|start_header_id|>%s<|end_header_id|>\n\n", m[i].role);
        hx__sb_append(sb, c, cl);
        hx_sb_str(sb, "<|eot_id|>");
    }
    if (gen) hx_sb_str(sb, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void hx_render_llama2(struct hx_strbuf *sb, const struct hx_chat_msg *m, size_t n)
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

static void hx_render_bitnet(struct hx_strbuf *sb, const struct hx_chat_msg *m, size_t n, bool gen)
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

int hx__chat_apply(const char *tmpl_src, const char *name, const struct hx_chat_msg *msgs,
                   size_t n_msgs, bool add_generation_prompt, bool enable_thinking, char **out)
{
    *out = NULL;
    if (n_msgs > 0 && !msgs) return hx__set_error(HX_E_INVAL, "chat: NULL messages");
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return hx__set_error(HX_E_INVAL, "chat: message %zu has a NULL role or content", i);
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") &&
            strcmp(msgs[i].role, "assistant") && strcmp(msgs[i].role, "tool"))
            return hx__set_error(HX_E_INVAL, "chat: message %zu has unknown role '%s'", i, msgs[i].role);
    }
    if (!name) {
        name = hx__chat_detect(tmpl_src);
        if (!name)
            return hx_chat_notfound(tmpl_src ? "cannot detect the format of the model's chat template"
                                             : "the model has no chat template", NULL);
    }
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    if (!strcmp(name, "qwen3") || !strcmp(name, "chatml"))
        hx_render_qwen3(&sb, msgs, n_msgs, add_generation_prompt, enable_thinking);
    else if (!strcmp(name, "llama3")) hx_render_llama3(&sb, msgs, n_msgs, add_generation_prompt);
    else if (!strcmp(name, "llama2")) hx_render_llama2(&sb, msgs, n_msgs);
    else if (!strcmp(name, "bitnet")) hx_render_bitnet(&sb, msgs, n_msgs, add_generation_prompt);
    else return hx_chat_notfound("unknown template", name);
    hx__sb_append(&sb, "", 0);
    if (sb.failed) {
        hx__sb_free(&sb);
        return HX_E_NOMEM;
    }
    *out = hx__sb_take(&sb);
    if (!*out) *out = hx_strdup("");
    return *out ? HX_OK : HX_E_NOMEM;
}
