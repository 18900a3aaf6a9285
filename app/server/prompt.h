/*
 * prompt.h — the request's prompt as the worker prepares it (prompt.c): chat template,
 * tokenization, context checks. Shared by worker.c and tests/fuzz/fuzz-request.c.
 */
#pragma once

#include "server.h"

struct hx_srv_prompt_env {
    const struct hx_model *model;
    const char *chat_template; /* NULL: detect from the model */
    int64_t n_ctx;             /* KV positions per sequence */
    size_t max_piece_bytes;    /* longest token text of the vocabulary (at least 16) */
};

/* Render (chat) and tokenize r's prompt, then check that it is not empty and that it and
 * r->max_tokens fit env->n_ctx. Returns 0 with *ids (malloc'ed) and *n_ids; otherwise the
 * HTTP status (400, 500) with *code (an OpenAI error code or NULL) and msg, and *ids NULL. */
int hx__srv_prompt_prepare(const struct hx_srv_prompt_env *env, const struct hx_srv_gen_req *r,
                           hx_token **ids, int64_t *n_ids, const char **code, char *msg,
                           size_t msg_cap);
