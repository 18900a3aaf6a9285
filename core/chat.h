/*
 * chat.h — built-in chat templates (core-private), formats.md §5.6. The renderers work on
 * plain strings so they can be tested without a model; hx_chat_apply wraps them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hx.h"

/* NULL-terminated list of names ("qwen3", "chatml", "llama3", "llama2", "bitnet"). */
const char *const *hx__chat_names(void);
/* Name of the built-in template a Jinja source matches, or NULL. */
const char *hx__chat_detect(const char *tmpl_src);
/*
 * Render msgs with template `name` (NULL: detect from tmpl_src). HX_E_NOTFOUND (message lists
 * the known names) for an unknown name or an undetectable/missing template; HX_E_INVAL for a
 * message with a NULL role/content or an unknown role. *out: NUL-terminated, hx_free.
 */
int hx__chat_apply(const char *tmpl_src, const char *name, const struct hx_chat_msg *msgs,
                   size_t n_msgs, bool add_generation_prompt, bool enable_thinking, char **out);
/* hx_chat_apply_tools without the model: tmpl_src as above. */
int hx__chat_apply_tools(const char *tmpl_src, const char *name,
                         const struct hx_chat_message *msgs, size_t n_msgs,
                         const char *tools_json, bool add_generation_prompt, bool enable_thinking,
                         char **out);
