/*
 * tokenizer-api.c — the public tokenizer / detokenizer / chat-template functions of hx.h, thin
 * wrappers over the model's struct hx_vocab (vocab.h) and chat.c.
 */
#include <string.h>

#include "chat.h"
#include "model.h"
#include "vocab.h"

static const struct hx_vocab *hx_vocab_of(const struct hx_model *model)
{
    return model ? hx__model_vocab(model) : NULL;
}

int hx_tokenize(const struct hx_model *model, const char *text, size_t len, bool add_special,
                bool parse_special, hx_token *ids, int64_t cap, int64_t *n_out)
{
    const struct hx_vocab *v = hx_vocab_of(model);
    if (!n_out) return hx__set_error(HX_E_INVAL, "hx_tokenize: n_out is NULL");
    *n_out = 0;
    if (!v) return hx__set_error(HX_E_INVAL, "hx_tokenize: model has no tokenizer");
    return hx__vocab_tokenize(v, text, len, add_special, parse_special, ids, cap, n_out);
}

int hx_detok_new(const struct hx_model *model, bool special, struct hx_detok **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_detok_new: out is NULL");
    *out = NULL;
    const struct hx_vocab *v = hx_vocab_of(model);
    if (!v) return hx__set_error(HX_E_INVAL, "hx_detok_new: model has no tokenizer");
    return hx__detok_new(v, special, out);
}

void hx_detok_free(struct hx_detok *d) { hx__detok_free(d); }

int hx_detok_push(struct hx_detok *d, hx_token tok, const char **piece, size_t *len)
{
    if (!piece || !len) return hx__set_error(HX_E_INVAL, "hx_detok_push: NULL out-parameter");
    return hx__detok_push(d, tok, piece, len);
}

int hx_detok_flush(struct hx_detok *d, const char **piece, size_t *len)
{
    if (!piece || !len) return hx__set_error(HX_E_INVAL, "hx_detok_flush: NULL out-parameter");
    return hx__detok_flush(d, piece, len);
}

int hx_detokenize(const struct hx_model *model, const hx_token *ids, int64_t n, bool special,
                  char **out, size_t *len)
{
    if (!out || !len) return hx__set_error(HX_E_INVAL, "hx_detokenize: NULL out-parameter");
    *out = NULL;
    *len = 0;
    const struct hx_vocab *v = hx_vocab_of(model);
    if (!v) return hx__set_error(HX_E_INVAL, "hx_detokenize: model has no tokenizer");
    return hx__vocab_detokenize(v, ids, n, special, out, len);
}

int64_t hx_vocab_n_tokens(const struct hx_model *model) { return hx__vocab_n_tokens(hx_vocab_of(model)); }
hx_token hx_vocab_bos(const struct hx_model *model) { return hx__vocab_bos(hx_vocab_of(model)); }
hx_token hx_vocab_eos(const struct hx_model *model) { return hx__vocab_eos(hx_vocab_of(model)); }
bool hx_vocab_add_bos(const struct hx_model *model) { return hx__vocab_add_bos(hx_vocab_of(model)); }

bool hx_vocab_is_eog(const struct hx_model *model, hx_token tok)
{
    return hx__vocab_is_eog(hx_vocab_of(model), tok);
}

int64_t hx_vocab_n_eog(const struct hx_model *model)
{
    const struct hx_vocab *v = hx_vocab_of(model);
    return v ? v->n_eog : 0;
}

const char *hx_vocab_text(const struct hx_model *model, hx_token tok)
{
    return hx__vocab_text(hx_vocab_of(model), tok);
}

int hx_chat_apply(const struct hx_model *model, const char *name, const struct hx_chat_msg *msgs,
                  size_t n_msgs, bool add_generation_prompt, bool enable_thinking, char **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_chat_apply: out is NULL");
    *out = NULL;
    const struct hx_vocab *v = hx_vocab_of(model);
    return hx__chat_apply(v ? hx__vocab_chat_template(v) : NULL, name, msgs, n_msgs,
                          add_generation_prompt, enable_thinking, out);
}

int hx_chat_apply_tools(const struct hx_model *model, const char *name,
                        const struct hx_chat_message *msgs, size_t n_msgs, const char *tools_json,
                        bool add_generation_prompt, bool enable_thinking, char **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_chat_apply_tools: out is NULL");
    *out = NULL;
    const struct hx_vocab *v = hx_vocab_of(model);
    return hx__chat_apply_tools(v ? hx__vocab_chat_template(v) : NULL, name, msgs, n_msgs,
                                tools_json, add_generation_prompt, enable_thinking, out);
}

const char *const *hx_chat_template_names(void) { return hx__chat_names(); }

const char *hx_chat_template_detect(const struct hx_model *model)
{
    const struct hx_vocab *v = hx_vocab_of(model);
    return hx__chat_detect(v ? hx__vocab_chat_template(v) : NULL);
}
