/*
 * app.h — the `engine` subcommands. Each lives in app/cmd-<name>.c as
 * `int hx_cmd_<name>(int argc, char **argv)` where argv[0] is the subcommand name; it returns
 * the process exit status (0 ok, 1 runtime failure, 2 usage error). Only app/, tests/ and
 * bench/ write to stdout/stderr.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hx-backend.h"
#include "hx.h"

int hx_cmd_inspect(int argc, char **argv);
int hx_cmd_devices(int argc, char **argv);
int hx_cmd_run(int argc, char **argv);
int hx_cmd_chat(int argc, char **argv);
int hx_cmd_tokenize(int argc, char **argv);
int hx_cmd_plan(int argc, char **argv);
int hx_cmd_bench(int argc, char **argv);
int hx_cmd_bench_kernels(int argc, char **argv);   /* engine bench --kernels ... */
int hx_cmd_diff(int argc, char **argv);
int hx_cmd_serve(int argc, char **argv);
int hx_cmd_quantize(int argc, char **argv);
int hx_cmd_mkmodel(int argc, char **argv);

/* Print "engine <cmd>: <message>" to stderr (app/progress.c). */
void hx_app_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double hx_app_now_us(void); /* monotonic clock, microseconds (app/bench/bench-util.c) */
/* A whole file ("-": stdin) into a malloc'ed buffer with a NUL after its *n bytes; NULL on
 * failure, errno saying why (EISDIR for a directory). */
char *hx_app_read_file(const char *path, size_t *n);

/*
 * Feed ids[0..n) to sequence seq at positions pos0.. in batches of at most the context's
 * n_batch rows, requesting the logits of the last row only. after (may be NULL) is called
 * after each batch with the rows fed so far. On HX_OK, *logits (may be NULL) is the last row's
 * logits, valid until the next hx_decode; on failure the cache holds the batches that
 * succeeded (hx_kv_len tells how many positions) and hx_last_error() says why.
 */
/*
 * Tokenize text[0..len) into a new hx_malloc'ed array *ids of *n tokens (BOS/EOS as the
 * vocabulary asks when add_special; control-token text matched). Sized by the tokenizer's own
 * count, not by the text's length: one byte can be several tokens (invalid UTF-8 becomes U+FFFD,
 * three bytes, in a byte-level BPE vocabulary). Returns HX_OK, or an error with hx_last_error();
 * *ids is NULL then.
 */
int hx_app_tokenize(const struct hx_model *m, const char *text, size_t len, bool add_special,
                    hx_token **ids, int64_t *n);

/*
 * HX_OK when all n_vocab logits are finite; else HX_E_INTERNAL with hx_last_error() naming the
 * first that is not and the likely causes. A NaN in the weights (or a device computing wrongly)
 * makes every logit NaN, and a sampler then picks token 0 each step: garbage with exit 0.
 */
int hx_app_logits_check(const float *logits, int64_t n_vocab);

typedef void (*hx_app_fed_fn)(void *user, int64_t n_fed);
int hx_app_prefill(struct hx_context *c, const hx_token *ids, int64_t n, int32_t pos0, int32_t seq,
                   hx_app_fed_fn after, void *user, const float **logits);

/*
 * An output file the user named, written safely (the rule of core/outfile.c): opened as a
 * temporary next to the target, which is replaced only by hx_app_outfile_commit. A special
 * file or directory is refused at open; an existing file keeps its permissions; on abort or
 * any error the target is left as it was. Both print their own errors; open returns 2 (an
 * output named that cannot be written is a usage error, found before any work), commit 1.
 */
struct hx_app_outfile {
    FILE *f;
    char *target, *tmp;
    unsigned mode;
    bool exists;
};
int hx_app_outfile_open(const char *cmd, const char *path, struct hx_app_outfile *o);
int hx_app_outfile_commit(const char *cmd, struct hx_app_outfile *o);
void hx_app_outfile_abort(struct hx_app_outfile *o);

/* Add the comma-separated device ids of list to set (NUL-terminated, cap bytes), skipping
 * ids already there: the devices a command used over several hx_decode calls. */
void hx_app_devices_add(char *set, size_t cap, const char *list);

/* Parse helpers: strict (whole string, range-checked); false on bad input. */
bool hx_app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool hx_app_parse_f32(const char *s, float lo, float hi, float *out);

/*
 * Comma-separated option values ("-p 128,512", "--types q8_0,q4_0"), the one list parser of
 * the app. Strict: an empty list, an empty item ("8,,16", "8,"), an item of 256 characters or
 * more, or more than cap items is bad input. hx_app_list calls fn on each item in turn
 * (NUL-terminated) with its index and stops at the first that returns false. Each returns the
 * number of items, or -1 on bad input.
 */
typedef bool (*hx_app_item_fn)(void *user, const char *item, int i);
int hx_app_list(const char *s, int cap, hx_app_item_fn fn, void *user);
/* Whole numbers in [lo, hi] into out[0 .. n). */
int hx_app_list_i64(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap);
/* Strings shorter than width into rows of width bytes from out. */
int hx_app_list_str(const char *s, char *out, size_t width, int cap);

/* Rows [0, n_rows) of a tensor, each converted by fn (scratch: width floats of its thread),
 * on up to n_threads threads of the pool (one below 2^20 elements). Returns HX_OK or the
 * status of a failing row; after a failure the remaining rows may be left unconverted. */
typedef int (*hx_app_row_fn)(void *ctx, int64_t r, float *scratch);
int hx_app_rows(int64_t n_rows, int64_t width, int n_threads, hx_app_row_fn fn, void *ctx);

/*
 * Progress on stderr (app/progress.c), the one way every command says what it is doing.
 * hx_app_progress_note prints a status line "engine CMD: ..." (a stage begun, a note, a
 * summary). The counted bar ("tensor i/n, MB, elapsed", quantize and mkmodel) is redrawn in
 * place on a tty; when forced while stderr is not a tty, one line per tenth of the tensors.
 */
void hx_app_progress_note(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
struct hx_app_progress {
    const char *what;
    uint64_t total_bytes, done_bytes;
    double t0_us, last_us;
    bool enabled, tty;
};
void hx_app_progress_init(struct hx_app_progress *p, const char *what, bool force, uint64_t total_bytes);
void hx_app_progress_step(struct hx_app_progress *p, uint64_t done, uint64_t total, uint64_t step_bytes);
void hx_app_progress_end(struct hx_app_progress *p);
/* Weights being prepared for the devices while a context is set up, per device in MiB and %,
 * when stderr is a terminal or force (--progress), else nothing: hx_app_load_init, then
 * hx_app_load_params puts the callback (or NULL) into the context's parameters; p must outlive
 * hx_context_new. */
#define HX_APP_LOAD_DEVICES 8
struct hx_app_load {
    const char *cmd;
    bool enabled, tty, open;
    char dev[HX_APP_LOAD_DEVICES][64];
    int pct[HX_APP_LOAD_DEVICES], n_dev, cur;
    double last_us;
};
void hx_app_load_init(struct hx_app_load *p, const char *cmd, bool force);
void hx_app_load_params(struct hx_app_load *p, struct hx_context_params *cp);
void hx_app_load_progress(void *user_data, const char *device, uint64_t done, uint64_t total);
/*
 * The model shapes the app knows by name (app/shapes.c): "qwen3-0.6b", "tiny", "bitnet-2b4t",
 * "bonsai-1.7b". n_vocab is the real model's vocabulary, for its LM head (0: none; mkmodel takes
 * its vocabulary file's). arch, type and embd_type are what the real model is (mkmodel's
 * defaults; NULL: qwen3, and --type required).
 */
struct hx_app_shape {
    const char *name;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx, n_vocab;
    float rope_base, eps;
    const char *arch, *type, *embd_type;
    bool untied; /* the real model has its own output.weight (mkmodel: of the embedding's type) */
};
const struct hx_app_shape *hx_app_shape_find(const char *name);   /* NULL: unknown */
const char *hx_app_shape_names(void);                              /* "a, b, ..." for messages */
/* A weight GEMM: K inputs to N outputs, of an op class. */
struct hx_app_gemm {
    enum hx_op_class cls;
    int64_t k, n;
};
#define HX_APP_SHAPE_GEMMS 5
/* A shape's distinct weight GEMMs, as hx runs them: QKV (fused), O, gate+up (fused), down, and
 * the LM head when n_vocab is known; into g[0 .. HX_APP_SHAPE_GEMMS). Returns how many. */
int hx_app_shape_gemms(const struct hx_app_shape *s, struct hx_app_gemm *g);

/* general.file_type (llama_ftype) for a file whose matrices are mostly of this hx_dtype. */
uint32_t hx_app_file_type(int dtype);
