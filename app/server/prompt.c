/*
 * prompt.c — what the worker does with a validated request before it waits for a KV slot:
 * render the chat messages with the template, tokenize the prompt with the model's vocabulary
 * and check the prompt and max_tokens against the context. No libuv and no worker state,
 * so tests/fuzz/fuzz-request.c drives exactly the code a hostile client reaches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"

#define HX_SRV_PFAIL(st, c, ...)                                                                   \
    do {                                                                                           \
        *code = (c);                                                                               \
        snprintf(msg, msg_cap, __VA_ARGS__);                                                       \
        status = (st);                                                                             \
        goto fail;                                                                                 \
    } while (0)

int hx__srv_prompt_prepare(const struct hx_srv_prompt_env *env, const struct hx_srv_gen_req *r,
                           hx_token **ids, int64_t *n_ids, const char **code, char *msg,
                           size_t msg_cap)
{
    int status = 0;
    char *rendered = NULL;
    const char *text = r->prompt ? r->prompt : "";
    hx_token *p = NULL;
    *ids = NULL;
    *n_ids = 0;
    *code = NULL;
    if (r->kind == HX_SRV_CHAT) {
        /* under a grammar the answer starts at once: no thinking (Qwen3's empty think block
         * is pre-filled), so the first token can be the JSON (or the tool call) */
        const bool think = r->enable_thinking && !r->grammar;
        int st = r->tools ? hx__srv_tools_render(r, env->model, env->chat_template, think, &rendered)
                          : hx_chat_apply(env->model, env->chat_template, r->msgs, r->n_msgs, true,
                                          think, &rendered);
        if (st == HX_E_INVAL && r->tools) /* what the tool format refuses (tools.c checks first) */
            HX_SRV_PFAIL(400, NULL, "cannot render the chat with its tools: %s", hx_last_error());
        /* the messages are validated already: the server's template is at fault */
        if (st == HX_E_NOTFOUND)
            HX_SRV_PFAIL(501, "chat_template_unavailable",
                         "this server cannot render chats for its model: %s", hx_last_error());
        if (st != HX_OK)
            HX_SRV_PFAIL(500, NULL, "cannot render the chat template: %s", hx_last_error());
        text = rendered;
    }
    size_t len = strlen(text);
    /* Each token covers at most max_piece_bytes of input, so a text this long cannot fit in
     * the context: refuse it without spending the worker's time (the other streams') on it. */
    if (len / 2 > (size_t)env->n_ctx * env->max_piece_bytes)
        HX_SRV_PFAIL(400, "context_length_exceeded",
                     "the prompt is too long: %zu bytes cannot fit in %lld tokens", len,
                     (long long)env->n_ctx);
    bool add_special = hx_vocab_add_bos(env->model);
    hx_token bos = hx_vocab_bos(env->model);
    const char *bos_text = bos != HX_TOKEN_NULL ? hx_vocab_text(env->model, bos) : NULL;
    if (add_special && bos_text && *bos_text && !strncmp(text, bos_text, strlen(bos_text)))
        add_special = false; /* the template wrote the BOS itself */
    int64_t cap = (int64_t)len + 8, n = 0;
    p = malloc((size_t)cap * sizeof *p);
    int st = p ? hx_tokenize(env->model, text, len, add_special, true, p, cap, &n) : HX_E_NOMEM;
    if (st == HX_OK && n > cap) {
        hx_token *q = realloc(p, (size_t)n * sizeof *q);
        st = q ? hx_tokenize(env->model, text, len, add_special, true, q, n, &n) : HX_E_NOMEM;
        if (q) p = q;
    }
    if (st != HX_OK)
        HX_SRV_PFAIL(st == HX_E_NOMEM ? 500 : 400, NULL, "cannot tokenize the prompt: %s",
                     hx_last_error());
    if (n == 0) HX_SRV_PFAIL(400, NULL, "the prompt is empty");
    if (n >= env->n_ctx)
        HX_SRV_PFAIL(400, "context_length_exceeded",
                     "the prompt is too long: %lld tokens; the context holds %lld per sequence, "
                     "the prompt and at least one generated token",
                     (long long)n, (long long)env->n_ctx);
    int64_t room = env->n_ctx - n;
    if (r->max_tokens > room) /* OpenAI's rule: prompt + max_tokens must fit */
        HX_SRV_PFAIL(400, "context_length_exceeded",
                     "the maximum context length is %lld tokens per sequence; you requested "
                     "%lld (%lld in the prompt, %lld to generate): reduce the prompt or "
                     "max_tokens",
                     (long long)env->n_ctx, (long long)(n + r->max_tokens), (long long)n,
                     (long long)r->max_tokens);
    hx_free(rendered);
    *ids = p;
    *n_ids = n;
    return 0;
fail:
    hx_free(rendered);
    free(p);
    return status;
}
