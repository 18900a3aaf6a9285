/*
 * hx.h — the application API of hx, a heterogeneous dispatch engine for LLM inference.
 *
 * Used by the `engine` program, the HTTP server and embedders. Backend authors use
 * hx-backend.h instead; weight types and their quantization are in hx-dtype.h. Objects are
 * opaque; descriptors are plain data and start with `uint32_t struct_size` so they can grow
 * (set it to sizeof the struct you pass).
 *
 * Errors: every fallible function returns an int that is HX_OK (0) or a negative
 * `enum hx_status`; results come back through out-parameters, set to NULL/0 on failure.
 * hx_last_error() gives the thread's last detailed message.
 *
 * Threads: a model may be shared by threads read-only; a context is used by one thread at
 * a time. Logging and allocation hooks are process-wide and must be set before use.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define HX_API __declspec(dllexport)
#elif defined(__GNUC__)
#define HX_API __attribute__((visibility("default")))
#else
#define HX_API
#endif

#if defined(__GNUC__)
#define HX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HX_PRINTF(a, b)
#endif

#define HX_VERSION_MAJOR 0
#define HX_VERSION_MINOR 1
#define HX_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH"; static storage. */
HX_API const char *hx_version(void);

/* ---- status codes (one list; names and messages generated from it) ------------------------ */

#define HX_STATUS_MAP(XX)                                                                    \
    XX(OK, 0, "success")                                                                     \
    XX(E_NOMEM, -1, "out of memory")                                                         \
    XX(E_INVAL, -2, "invalid argument")                                                      \
    XX(E_UNSUPPORTED, -3, "operation not supported")                                         \
    XX(E_FORMAT, -4, "malformed or unsupported file format")                                 \
    XX(E_IO, -5, "input/output error")                                                       \
    XX(E_DEVICE, -6, "device error")                                                         \
    XX(E_TIMEOUT, -7, "timed out")                                                           \
    XX(E_CANCELED, -8, "canceled")                                                           \
    XX(E_NOTFOUND, -9, "not found")                                                          \
    XX(E_UNAVAILABLE, -10, "unavailable")                                                    \
    XX(E_RANGE, -11, "value out of range")                                                   \
    XX(E_OVERFLOW, -12, "arithmetic overflow")                                               \
    XX(E_BUSY, -13, "resource busy")                                                         \
    XX(E_INTERNAL, -14, "internal error")

enum hx_status {
#define HX__STATUS_ENUM(name, val, msg) HX_##name = (val),
    HX_STATUS_MAP(HX__STATUS_ENUM)
#undef HX__STATUS_ENUM
};

#define HX_STATUS_COUNT 15

/* Human-readable message for a status ("out of memory"); never NULL. */
HX_API const char *hx_strerror(int status);
/* Symbolic name for a status ("HX_E_NOMEM"); never NULL. */
HX_API const char *hx_status_name(int status);

/*
 * The calling thread's last detailed error message (e.g. "gguf: tensor 'blk.0.attn_q.weight'
 * data [1000, 5000) lies outside the file (4096 bytes)"). Empty string when none. Valid until
 * the next hx call on this thread.
 */
HX_API const char *hx_last_error(void);

/* ---- logging ------------------------------------------------------------------------------ */

enum hx_log_level {
    HX_LOG_LEVEL_ERROR,
    HX_LOG_LEVEL_WARN,
    HX_LOG_LEVEL_INFO,
    HX_LOG_LEVEL_DEBUG,
    HX_LOG_LEVEL_COUNT
};

typedef void (*hx_log_cb)(enum hx_log_level level, const char *msg, void *user_data);

/*
 * Route log messages (one line each, no trailing newline) to cb; NULL restores the default,
 * which writes to stderr. Messages above the threshold (env HX_LOG_LEVEL = error|warn|info|
 * debug, default warn) are dropped before formatting.
 */
HX_API void hx_log_set(hx_log_cb cb, void *user_data);
HX_API void hx_log_set_level(enum hx_log_level level);
HX_API enum hx_log_level hx_log_get_level(void);
HX_API void hx_log(enum hx_log_level level, const char *fmt, ...) HX_PRINTF(2, 3);

#define HX_LOG_ERROR(...) hx_log(HX_LOG_LEVEL_ERROR, __VA_ARGS__)
#define HX_LOG_WARN(...) hx_log(HX_LOG_LEVEL_WARN, __VA_ARGS__)
#define HX_LOG_INFO(...) hx_log(HX_LOG_LEVEL_INFO, __VA_ARGS__)
#define HX_LOG_DEBUG(...)                                                                    \
    do {                                                                                     \
        if (hx_log_get_level() >= HX_LOG_LEVEL_DEBUG) hx_log(HX_LOG_LEVEL_DEBUG, __VA_ARGS__); \
    } while (0)

/* ---- memory ------------------------------------------------------------------------------- */

/*
 * All heap traffic of the library goes through these. hx_set_allocator replaces them
 * process-wide (all four or none; call before any other hx function). Memory returned to the
 * caller by an hx function is released with hx_free().
 */
typedef void *(*hx_malloc_fn)(size_t nbytes);
typedef void *(*hx_calloc_fn)(size_t count, size_t nbytes);
typedef void *(*hx_realloc_fn)(void *ptr, size_t nbytes);
typedef void (*hx_free_fn)(void *ptr);
HX_API int hx_set_allocator(hx_malloc_fn m, hx_calloc_fn c, hx_realloc_fn r, hx_free_fn f);
HX_API void *hx_malloc(size_t nbytes);
HX_API void *hx_calloc(size_t count, size_t nbytes);
HX_API void *hx_realloc(void *ptr, size_t nbytes);
HX_API void hx_free(void *ptr);
/* Duplicate a NUL-terminated string (NULL in, NULL out); release with hx_free. */
HX_API char *hx_strdup(const char *s);

/* ---- tokens ------------------------------------------------------------------------------- */

typedef int32_t hx_token;
#define HX_TOKEN_NULL (-1)

/* ---- models ------------------------------------------------------------------------------ */

struct hx_model;   /* weights (mmapped), hparams, tokenizer, chat template; read-only once loaded */
struct hx_context; /* devices, plan, KV cache slots, logits: one thread at a time */

struct hx_model_params {
    uint32_t struct_size;
    bool vocab_only;      /* load tokenizer/metadata only (vocab GGUFs with zero tensors) */
    bool no_mmap;         /* read weights into memory instead of mapping the file */
};

/*
 * Load a GGUF model. Errors: HX_E_IO (cannot open/read), HX_E_FORMAT (malformed file, unknown
 * architecture, missing tensor or key, shape mismatch; hx_last_error() names what and where),
 * HX_E_NOMEM. Blocks. *out is NULL on failure.
 */
HX_API int hx_model_load(const char *path, const struct hx_model_params *params,
                         struct hx_model **out);
HX_API void hx_model_free(struct hx_model *model);

/* Plain-data description of a loaded model; strings borrowed, valid for the model's life. */
struct hx_model_info {
    uint32_t struct_size;
    const char *arch;          /* "qwen3", "llama", "bitnet" */
    const char *name;          /* general.name or the file's base name */
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    int64_t n_params;          /* elements in all weight tensors */
    size_t weight_bytes;       /* bytes of all weight tensors as stored */
    const char *weight_types;  /* e.g. "Q8_0 x169, F32 x57" */
};
HX_API int hx_model_get_info(const struct hx_model *model, struct hx_model_info *out);

/* ---- tokenizer and chat templates ---------------------------------------------------------- */

/*
 * Tokenize text (len bytes, need not be NUL-terminated). add_special: BOS/EOS as the vocabulary
 * asks; parse_special: match control-token text (user-defined tokens always match). Writes at
 * most cap ids; *n_out receives the full count (call again with a bigger buffer if > cap).
 */
HX_API int hx_tokenize(const struct hx_model *model, const char *text, size_t len, bool add_special,
                       bool parse_special, hx_token *ids, int64_t cap, int64_t *n_out);

/*
 * Streaming detokenizer: feeds tokens and yields only complete UTF-8 text, so a character is
 * never split across pieces. special: render control tokens as their text.
 */
struct hx_detok;
HX_API int hx_detok_new(const struct hx_model *model, bool special, struct hx_detok **out);
HX_API void hx_detok_free(struct hx_detok *d);
/* Append token's bytes; *piece (borrowed, valid until next call) gets the complete UTF-8 text
 * now available (may be ""). */
HX_API int hx_detok_push(struct hx_detok *d, hx_token tok, const char **piece, size_t *len);
/* Flush any incomplete trailing bytes (as U+FFFD replacement characters). */
HX_API int hx_detok_flush(struct hx_detok *d, const char **piece, size_t *len);

/* Whole-sequence detokenization; *out released with hx_free. */
HX_API int hx_detokenize(const struct hx_model *model, const hx_token *ids, int64_t n, bool special,
                         char **out, size_t *len);

HX_API int64_t hx_vocab_n_tokens(const struct hx_model *model);
HX_API hx_token hx_vocab_bos(const struct hx_model *model); /* HX_TOKEN_NULL if none */
HX_API hx_token hx_vocab_eos(const struct hx_model *model); /* HX_TOKEN_NULL if none */
HX_API bool hx_vocab_is_eog(const struct hx_model *model, hx_token tok); /* end of generation */
/* How many end-of-generation tokens (EOS, EOT, EOM, ...) the vocabulary has; 0 = generation
 * can only stop at a length limit. */
HX_API int64_t hx_vocab_n_eog(const struct hx_model *model);
HX_API bool hx_vocab_add_bos(const struct hx_model *model);
/* Token text as stored (borrowed), NULL if out of range. */
HX_API const char *hx_vocab_text(const struct hx_model *model, hx_token tok);

struct hx_chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
};

/*
 * Render messages with a chat template. name: NULL = detect from tokenizer.chat_template;
 * else one of hx_chat_template_names(). An unknown name or an undetectable template is
 * HX_E_NOTFOUND with the known names in hx_last_error(). add_generation_prompt appends the
 * assistant header; enable_thinking=false pre-fills an empty <think></think> (Qwen3).
 * *out (NUL-terminated) released with hx_free.
 */
HX_API int hx_chat_apply(const struct hx_model *model, const char *name,
                         const struct hx_chat_msg *msgs, size_t n_msgs,
                         bool add_generation_prompt, bool enable_thinking, char **out);
/* A call an assistant message made (hx_chat_apply_tools). */
struct hx_chat_tool_call {
    const char *name;      /* the function's name */
    const char *arguments; /* its arguments: the text of a JSON object */
};

/* A chat message with OpenAI's tool-call parts (hx_chat_apply_tools). */
struct hx_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool" (a tool's result) */
    const char *content; /* "" when none */
    const struct hx_chat_tool_call *tool_calls; /* assistant: the calls it made (or NULL) */
    size_t n_tool_calls;
};

/*
 * hx_chat_apply with tools, in the format of the model's official template (qwen3/chatml:
 * Qwen3's; llama3: Llama 3.1's JSON tool calling; docs/server.md "Tool calls"). tools_json:
 * NULL (no tools) or the JSON text of an array of tools as OpenAI's API takes them
 * ([{"type":"function","function":{...}}]). Assistant tool calls and "tool" messages are
 * rendered as the template renders them; with no tools and no tool parts the text equals
 * hx_chat_apply's. HX_E_INVAL (message in hx_last_error()) for invalid JSON, tools or tool
 * calls with a template that has no tool format (llama2, bitnet), or what the official template
 * refuses (llama3: more than one call in a message, tools with no message after the system one).
 */
HX_API int hx_chat_apply_tools(const struct hx_model *model, const char *name,
                               const struct hx_chat_message *msgs, size_t n_msgs,
                               const char *tools_json, bool add_generation_prompt,
                               bool enable_thinking, char **out);
/* NULL-terminated list of built-in template names (static storage). */
HX_API const char *const *hx_chat_template_names(void);
/* Name of the built-in template the model's own tokenizer.chat_template is detected as (the
 * one hx_chat_apply uses with name NULL), or NULL when it has none that is recognized. */
HX_API const char *hx_chat_template_detect(const struct hx_model *model);

/* ---- contexts: devices, plan, KV cache, decode ------------------------------------------- */

#define HX_MAX_THREADS 1024 /* hx_context_params.n_threads; the CLI's -t takes the same */

struct hx_context_params {
    uint32_t struct_size;
    const char *backend;   /* device for the `single` policy: "cpu", "ref", "vulkan", "vulkan:1",
                              "npu", "npu-sim", "hip"; NULL = "cpu" */
    const char *policy;    /* preset, "name:args" or @file; NULL = "single" */
    const char *fallback;  /* "npu,vulkan,cpu" fallback chain; NULL = none (cpu for unsupported ops) */
    int n_threads;         /* CPU threads; 0 = all cores; at most HX_MAX_THREADS */
    int64_t n_ctx;         /* KV positions per sequence; 0 = min(n_ctx_train, 4096) */
    int n_seq;             /* KV cache slots (parallel sequences); 0 = 1 */
    int64_t n_batch;       /* max rows per decode call; 0 = 512 */
    const char *npu_kernels;  /* NPU kernel manifest directory; NULL = default */
    bool verbose_plan;
    /* Memory caps per device, "DEV=SIZE[,DEV=SIZE]" (e.g. "vulkan=2G,cpu=8G"); NULL = each
     * device's own report. A plan that does not fit is refused (docs/policies.md). */
    const char *mem;
    /* (optional) Told while hx_context_new prepares the weights for each device (uploads,
     * repacks, conversions; the part of loading that takes time): the device's id ("cpu",
     * "vulkan:0"), its weight bytes prepared so far and in all (as the device holds them, the
     * plan's accounting, docs/policies.md "Memory"), after each weight and a last time with
     * done == total when the device is ready. Called on the calling thread. */
    void (*load_progress)(void *user_data, const char *device, uint64_t done, uint64_t total);
    void *load_progress_data;
};

/* Check a policy / backend / fallback combination without loading anything: HX_E_INVAL with
 * a message naming the bad part (unknown policy or device, malformed op-map, ratios that do
 * not add up, a device named twice, an empty device list). */
HX_API int hx_policy_validate(const char *policy, const char *backend, const char *fallback);
/* Check a --mem list ("vulkan=2G,cpu=512M") without loading anything: HX_E_INVAL naming a
 * malformed size or an unknown device. */
HX_API int hx_mem_validate(const char *mem);

HX_API int hx_context_new(struct hx_model *model, const struct hx_context_params *params,
                          struct hx_context **out);
HX_API void hx_context_free(struct hx_context *ctx);

/*
 * A batch of rows: row i feeds token[i] at position pos[i] of sequence seq[i]. Rows of one
 * sequence must be in increasing position order and continue that sequence's cache (pos of
 * its first row == the number of positions already cached for it). logits[i] != 0 requests
 * the logits of row i. Arrays are borrowed for the duration of the call.
 */
/* The rows whose logits are requested must be a contiguous range ending at the last row
 * (e.g. the last row of a prefill, or every row of a multi-sequence decode step). */
struct hx_batch {
    int64_t n_rows;
    const hx_token *token;
    const int32_t *pos;
    const int32_t *seq;
    const int8_t *logits;
};

/*
 * Run the model over a batch. Errors: HX_E_INVAL (bad batch: positions, sequence ids, tokens
 * out of range, too many rows), HX_E_RANGE (beyond n_ctx), HX_E_DEVICE (all devices of the
 * fallback chain failed). On error the KV cache is as before the call. Blocks.
 */
HX_API int hx_decode(struct hx_context *ctx, const struct hx_batch *batch);

/*
 * Logits (n_vocab floats) of row `row` of the batch of the last successful hx_decode, counted
 * from the batch's first row; a negative row counts from its end (-1 = the last row). Rows are
 * those of that one batch, not of the whole sequence: after a prompt fed in several batches,
 * its last token's logits are row -1 (or n_rows - 1 of the last batch). Valid until the next
 * hx_decode. A row whose logits that batch did not request (see hx_logits_rows), or any row
 * after a failed call, is an error: NULL, with hx_last_error() naming the rows held.
 */
HX_API const float *hx_get_logits(struct hx_context *ctx, int64_t row);
/* Which rows of the last hx_decode's batch hold logits: [*first, *first + *n); *n = 0 (and
 * *first = 0) when none, e.g. before any decode or after a failed one. */
HX_API void hx_logits_rows(const struct hx_context *ctx, int64_t *first, int64_t *n);

/* Forget positions >= pos of sequence seq (pos 0 clears it). */
HX_API int hx_kv_truncate(struct hx_context *ctx, int32_t seq, int32_t pos);
/* Number of positions cached for seq. */
HX_API int32_t hx_kv_len(const struct hx_context *ctx, int32_t seq);
HX_API int64_t hx_context_n_ctx(const struct hx_context *ctx);
/* Most rows one hx_decode takes (hx_context_params.n_batch); feed longer prompts in pieces. */
HX_API int64_t hx_context_n_batch(const struct hx_context *ctx);
HX_API int hx_context_n_seq(const struct hx_context *ctx);

/* Interrupt a running hx_decode from another thread or a signal handler (async-signal-safe):
 * it returns HX_E_CANCELED at the next split boundary with the KV cache unchanged. */
HX_API void hx_context_cancel(struct hx_context *ctx);

/* Devices and policy that served the last decode, e.g. "cpu" or "npu-sim,cpu"; borrowed. */
HX_API const char *hx_context_devices(const struct hx_context *ctx);
HX_API const char *hx_context_policy(const struct hx_context *ctx);

/* Render the current plan (per phase: op → device and why, splits, bytes moved) as text;
 * *out released with hx_free. */
HX_API int hx_context_plan_text(struct hx_context *ctx, char **out);

/* What the scheduler did in the last hx_decode: one run of the model graph over that batch
 * (after a recovered device failure, the attempt that succeeded). Plain data. */
struct hx_run_stats {
    uint32_t struct_size;
    int64_t n_rows;         /* rows of that batch; 0 if the call failed or none was made */
    int64_t n_splits;       /* device launches: a run of consecutive ops on one device is one
                               split, and each part of a tensor-split matmul is one */
    int64_t n_transfers;    /* copies between devices */
    size_t bytes_moved;     /* bytes those copies moved (inputs of a split, tensor-split joins,
                               KV hand-overs); logits read back to the caller are not counted */
    int64_t n_fallback_ops; /* ops placed off their policy device (unsupported or unhealthy) */
    int64_t n_recoveries;   /* device failures recovered from, over the context's life */
    bool verify;            /* the policy is verify[@REF][:INNER]; the verify_* fields count
                               over the context's life, every hx_decode together */
    int64_t verify_checks;  /* op outputs compared with the reference */
    int64_t verify_failed;  /* of those, over their NMSE threshold or not finite */
    bool verify_ref_failed; /* the reference itself failed, so checking stopped */
};

/* Fill *out (set out->struct_size first; a smaller, older struct gets its prefix). Cheap: a
 * copy of counters the scheduler keeps anyway, so it may be called after every hx_decode.
 * HX_E_INVAL on NULL or a struct_size too small to hold struct_size itself. */
HX_API int hx_context_stats(const struct hx_context *ctx, struct hx_run_stats *out);

/* ---- sampling ------------------------------------------------------------------------------ */

struct hx_sampler_params {
    uint32_t struct_size;
    float temperature;        /* <= 0: greedy */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off */
    float presence_penalty;   /* 0: off */
    float frequency_penalty;  /* 0: off */
    int32_t penalty_last_n;   /* window for penalties; 0 = off, -1 = whole history */
    uint64_t seed;
};

struct hx_sampler;
/* Defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, penalties off, seed 0. */
HX_API void hx_sampler_params_init(struct hx_sampler_params *p);
HX_API int hx_sampler_new(const struct hx_sampler_params *p, int64_t n_vocab,
                          struct hx_sampler **out);
HX_API void hx_sampler_free(struct hx_sampler *s);
/* Pick a token from logits (n_vocab floats, not modified). Deterministic for a seed. */
HX_API hx_token hx_sampler_sample(struct hx_sampler *s, const float *logits);
/* Record a token in the penalty history (prompt tokens too, if wanted). */
HX_API void hx_sampler_accept(struct hx_sampler *s, hx_token tok);
HX_API void hx_sampler_reset(struct hx_sampler *s);

/* ---- constrained decoding (docs/grammar.md) ------------------------------------------------ */

/*
 * A grammar in GBNF (the notation llama.cpp uses; the subset is in docs/grammar.md), compiled
 * for one model's vocabulary: sampling under it only picks tokens whose bytes keep the text a
 * prefix of a sentence of the grammar. The start rule is `root`. Errors: HX_E_INVAL with
 * hx_last_error() naming the line and the problem (an undefined rule, left recursion, bad
 * syntax, a grammar too large). Text is matched as bytes; character classes and `.` match
 * whole UTF-8 characters.
 */
struct hx_grammar;
HX_API int hx_grammar_new(const struct hx_model *model, const char *gbnf, size_t len,
                          struct hx_grammar **out);
HX_API void hx_grammar_free(struct hx_grammar *g);
/* Back to the start (before any token). */
HX_API void hx_grammar_reset(struct hx_grammar *g);
/*
 * Like hx_sampler_sample, but only among the tokens the grammar allows now: those whose bytes
 * continue the text validly and after which the grammar can still be completed within the
 * budget (budget = tokens that may still be generated, this one included; <= 0: no limit).
 * End-of-generation tokens are allowed exactly when the text so far is a whole sentence;
 * tokens with no text (control tokens) never are otherwise. HX_TOKEN_NULL when nothing is
 * allowed (a grammar already done: see hx_grammar_done). Does not advance the grammar.
 */
HX_API hx_token hx_sampler_sample_grammar(struct hx_sampler *s, struct hx_grammar *g,
                                          const float *logits, int64_t budget);
/* Advance past tok. HX_E_INVAL (state unchanged) if the grammar does not allow it. An
 * end-of-generation token is accepted when the text is whole and changes nothing. */
HX_API int hx_grammar_accept(struct hx_grammar *g, hx_token tok);
/* Advance past text (len bytes), as if tokens spelling it had been accepted: for tests and to
 * force a prefix. HX_E_INVAL (state unchanged) if the grammar does not allow it. */
HX_API int hx_grammar_accept_text(struct hx_grammar *g, const char *text, size_t len);
/* The text so far is a whole sentence and nothing may follow it: stop generating. */
HX_API bool hx_grammar_done(const struct hx_grammar *g);
/* The text so far is a whole sentence (more may still follow, e.g. digits of a number). */
HX_API bool hx_grammar_can_end(const struct hx_grammar *g);

#ifdef __cplusplus
}
#endif
