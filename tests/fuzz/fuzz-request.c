/*
 * fuzz-request.c — libFuzzer target for what a hostile client of `engine serve` reaches past
 * the HTTP framing: the JSON body and the OpenAI field validation (openai.c), the error
 * object, the model-name check, the chat template and the tokenization of the rendered prompt
 * with a real vocabulary and the context checks (prompt.c), then what the worker does once the
 * job has a slot: the sampler built from the request's fields, the detokenizer and the stop
 * strings (sse.c), and the response JSON. With tools (tools.c): the checks against the setup's
 * template, the grammar of a required call, and the output parser over the "generated" text,
 * whole and streamed (the same number of calls). A `response_format` schema goes through the
 * JSON-Schema compiler (json-schema.c); the grammar it writes must build for the vocabulary
 * (or be refused as too large) and sampling under it must give tokens it accepts.
 *
 * Input: byte 0 picks the route and the server setup, the rest is the request body.
 *   bit 0: 1 = /v1/chat/completions, 0 = /v1/completions
 *   bits 1-2: setup 0 qwen2 byte-level BPE, template detected from the GGUF (qwen3), n_ctx 4096
 *                   1 llama-bpe (Llama 3 BPE), template llama3, n_ctx 1024
 *                   2 llama-spm (Llama 2 SentencePiece), template llama2, n_ctx 256
 *                   3 stories260K (512-token SentencePiece), template bitnet, n_ctx 32
 * so 'a' 'c' 'e' 'g' are chat requests on setups 0-3 and '`' 'b' 'd' 'f' completions.
 *
 * The vocabularies are loaded once, vocab-only, from $HX_DATA (default: the build's
 * HX_DATA_DIR, ../shared/data beside the repository); without them the target says so and
 * exits 1. Any broken invariant is __builtin_trap(), i.e. a crash libFuzzer reports.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "prompt.h"
#include "server.h"

#ifndef HX_FUZZ_DATA_DIR
#define HX_FUZZ_DATA_DIR "../shared/data"
#endif

#define HX_FZ_SAMPLE_V 512 /* logits the sampler draws from (a tiny model's vocabulary) */
#define HX_FZ_CHECK(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-request: invariant failed at line %d: %s\n", __LINE__, #c);      \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

/* n_ctx: the per-sequence context of the imagined server; small ones let short inputs reach
 * the length checks (the byte bound is 2 * n_ctx * the longest token's bytes). */
static const struct {
    const char *file, *template_name, *model_id;
    int64_t n_ctx;
} hx_fz_setup_def[4] = {
    {"vocab/ggml-vocab-qwen2.gguf", NULL, "ggml-vocab-qwen2", 4096},
    {"vocab/ggml-vocab-llama-bpe.gguf", "llama3", "ggml-vocab-llama-bpe", 1024},
    {"vocab/ggml-vocab-llama-spm.gguf", "llama2", "ggml-vocab-llama-spm", 256},
    {"stories260K/stories260K.gguf", "bitnet", "stories260K", 32},
};

static struct {
    struct hx_model *model;
    struct hx_srv_prompt_env env;
    int64_t n_vocab;
} hx_fz_setups[4];

/* Log lines are formatted and read, not printed (a fuzzer runs millions of requests). */
static void hx_fz_log(enum hx_log_level level, const char *msg, void *user_data)
{
    HX_FZ_CHECK(strlen(msg) < ((size_t)1 << 20));
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    hx_log_set(hx_fz_log, NULL);
    const char *dir = getenv("HX_DATA");
    if (!dir || !*dir) dir = HX_FUZZ_DATA_DIR;
    for (int i = 0; i < 4; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, hx_fz_setup_def[i].file);
        struct hx_model_params mp = {.struct_size = sizeof mp, .vocab_only = true};
        if (hx_model_load(path, &mp, &hx_fz_setups[i].model) != HX_OK) {
            fprintf(stderr,
                    "fuzz-request: cannot load the vocabulary %s: %s (set HX_DATA to the "
                    "shared test data)\n",
                    path, hx_last_error());
            exit(1);
        }
        struct hx_model *m = hx_fz_setups[i].model;
        int64_t nv = hx_vocab_n_tokens(m);
        size_t maxp = 16; /* as the server computes it when it loads the model */
        for (hx_token t = 0; t < (hx_token)nv; t++) {
            const char *piece = hx_vocab_text(m, t);
            size_t n = piece ? strlen(piece) : 0;
            if (n > maxp) maxp = n;
        }
        hx_fz_setups[i].n_vocab = nv;
        hx_fz_setups[i].env = (struct hx_srv_prompt_env){m, hx_fz_setup_def[i].template_name,
                                                         hx_fz_setup_def[i].n_ctx, maxp};
    }
    return 0;
}

/* An error answer must be a valid JSON error object whatever the message holds. */
static void hx_fz_check_error(int status, const char *msg, const char *param, const char *code)
{
    HX_FZ_CHECK(msg && msg[0]);
    char *e = hx__srv_error_json(status, msg, param, code);
    HX_FZ_CHECK(e);
    json_t *j = json_loads(e, 0, NULL);
    HX_FZ_CHECK(j && json_is_object(json_object_get(j, "error")));
    json_decref(j);
    free(e);
}

static void hx_fz_check_req(enum hx_srv_kind kind, const struct hx_srv_gen_req *r)
{
    HX_FZ_CHECK(r->kind == kind);
    if (kind == HX_SRV_CHAT) {
        HX_FZ_CHECK(r->n_msgs >= 1 && r->msgs && !r->prompt);
        for (size_t i = 0; i < r->n_msgs; i++) HX_FZ_CHECK(r->msgs[i].role && r->msgs[i].content);
    } else {
        HX_FZ_CHECK(r->prompt && !r->msgs);
    }
    HX_FZ_CHECK(r->n_stops >= 0 && r->n_stops <= HX_SRV_MAX_STOPS);
    for (int i = 0; i < r->n_stops; i++) HX_FZ_CHECK(r->stops[i] && r->stops[i][0]);
    HX_FZ_CHECK(r->max_tokens == -1 || r->max_tokens >= 1);
    const struct hx_sampler_params *sp = &r->sp;
    HX_FZ_CHECK(isfinite(sp->temperature) && isfinite(sp->top_p) && isfinite(sp->min_p));
    HX_FZ_CHECK(isfinite(sp->repeat_penalty) && isfinite(sp->presence_penalty) &&
                isfinite(sp->frequency_penalty));
    HX_FZ_CHECK(sp->top_k >= 0);
}

/* The sampler the worker builds from the request, over a small logits row. */
static void hx_fz_sample(const struct hx_srv_gen_req *r, const hx_token *ids, int64_t n, uint64_t h)
{
    struct hx_sampler_params sp = r->sp;
    if (!r->seed_set) sp.seed = h;
    struct hx_sampler *smp = NULL;
    HX_FZ_CHECK(hx_sampler_new(&sp, HX_FZ_SAMPLE_V, &smp) == HX_OK);
    if (sp.penalty_last_n != 0)
        for (int64_t i = 0; i < n; i++) hx_sampler_accept(smp, ids[i] % HX_FZ_SAMPLE_V);
    float logits[HX_FZ_SAMPLE_V];
    for (int i = 0; i < HX_FZ_SAMPLE_V; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)(int32_t)(h >> 40) / (float)(1 << 20);
    }
    for (int step = 0; step < 3; step++) {
        hx_token t = hx_sampler_sample(smp, logits);
        HX_FZ_CHECK(t >= 0 && t < HX_FZ_SAMPLE_V);
        hx_sampler_accept(smp, t);
    }
    hx_sampler_free(smp);
}

/* Detokenize the prompt's ids as if generated, through the stop strings, as the worker does;
 * then the response JSON. The released text is a prefix of the generated text that holds no
 * stop string; after a match a stop string starts where it ends, else it is all of it. */
static void hx_fz_generate(const struct hx_model *model, const struct hx_srv_gen_req *r,
                           const hx_token *ids, int64_t n)
{
    struct hx_detok *dt = NULL;
    HX_FZ_CHECK(hx_detok_new(model, false, &dt) == HX_OK);
    struct hx_srv_stopper stop = {.stops = (char **)r->stops, .n_stops = r->n_stops};
    struct hx_srv_buf all = {0}, out = {0};
    const char *piece;
    size_t len;
    for (int64_t i = 0; i <= n && !stop.matched; i++) {
        int st = i < n ? hx_detok_push(dt, ids[i], &piece, &len) : hx_detok_flush(dt, &piece, &len);
        HX_FZ_CHECK(st == HX_OK);
        hx__srv_buf_append(&all, piece, len);
        hx__srv_stopper_push(&stop, piece, len, &out);
    }
    hx__srv_stopper_finish(&stop, &out);
    HX_FZ_CHECK(!all.failed && !out.failed && out.len <= all.len);
    HX_FZ_CHECK(!out.len || !memcmp(out.data, all.data, out.len));
    bool at_stop = false;
    for (int i = 0; i < r->n_stops; i++) {
        size_t sl = strlen(r->stops[i]);
        HX_FZ_CHECK(!out.len || !memmem(out.data, out.len, r->stops[i], sl));
        at_stop =
            at_stop || (all.len - out.len >= sl && !memcmp(all.data + out.len, r->stops[i], sl));
    }
    HX_FZ_CHECK(stop.matched ? at_stop : out.len == all.len);
    struct hx_srv_result res = {.id = "cmpl-fuzz",
                                .model = "m",
                                .finish_reason = "stop",
                                .with_ids = r->return_token_ids,
                                .ids = ids,
                                .n_ids = n};
    char *j = hx__srv_response_json(r->kind, &res, out.data, out.len);
    HX_FZ_CHECK(j);
    free(j);
    j = hx__srv_chunk_json(r->kind, HX_SRV_CHUNK_TEXT, &res, out.data, out.len);
    HX_FZ_CHECK(j);
    free(j);
    if (hx__srv_tools_parsing(r->tools)) { /* the text as a tool-call answer, whole and streamed */
        j = hx__srv_tools_response(r->tools, &res, out.data, out.len);
        json_t *parsed = j ? json_loads(j, 0, NULL) : NULL;
        HX_FZ_CHECK(parsed);
        json_decref(parsed);
        free(j);
        const char *whole = hx__srv_tools_finish_reason(r->tools, "stop");
        struct hx_srv_buf sse = {0};
        for (size_t i = 0; i < out.len; i += 7)
            hx__srv_tools_stream(r->tools, &res, out.data + i, out.len - i < 7 ? out.len - i : 7,
                                 false, &sse);
        hx__srv_tools_stream(r->tools, &res, NULL, 0, true, &sse);
        HX_FZ_CHECK(!sse.failed && !strcmp(hx__srv_tools_finish_reason(r->tools, "stop"), whole));
        hx__srv_buf_free(&sse);
    }
    hx__srv_stopper_free(&stop);
    hx__srv_buf_free(&all);
    hx__srv_buf_free(&out);
    hx_detok_free(dt);
}

/* The worker's grammar (response_format) over the setup's vocabulary: what the compiler wrote
 * builds (anything else the engine refuses is a compiler bug), and a few tokens sampled under
 * it with a budget are accepted. */
static void hx_fz_grammar(const struct hx_model *model, int64_t n_vocab,
                          const struct hx_srv_gen_req *r, uint64_t h)
{
    if (!r->grammar) return;
    struct hx_grammar *g = NULL;
    int st = hx_grammar_new(model, r->grammar, strlen(r->grammar), &g);
    if (st != HX_OK) {
        HX_FZ_CHECK(st == HX_E_NOMEM || strstr(hx_last_error(), "too large"));
        return;
    }
    struct hx_sampler_params sp = r->sp;
    sp.seed = h;
    struct hx_sampler *smp = NULL;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    HX_FZ_CHECK(logits && hx_sampler_new(&sp, n_vocab, &smp) == HX_OK);
    for (int64_t i = 0; i < n_vocab; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)(int32_t)(h >> 40) / (float)(1 << 20);
    }
    for (int step = 0; step < 4 && !hx_grammar_done(g); step++) {
        hx_token t = hx_sampler_sample_grammar(smp, g, logits, 256 - step);
        if (t == HX_TOKEN_NULL) break;
        HX_FZ_CHECK(t >= 0 && t < n_vocab);
        HX_FZ_CHECK(hx_grammar_accept(g, t) == HX_OK);
    }
    hx_sampler_free(smp);
    free(logits);
    hx_grammar_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    enum hx_srv_kind kind = (data[0] & 1) ? HX_SRV_CHAT : HX_SRV_COMPLETION;
    int si = (data[0] >> 1) & 3;
    const struct hx_srv_prompt_env *env = &hx_fz_setups[si].env;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    /* routes.c: parse and validate (400), then the model name (404) */
    struct hx_srv_gen_req req;
    const char *param = NULL;
    char msg[512];
    if (!hx__srv_gen_req_parse(kind, body, len, &req, &param, msg, sizeof msg)) {
        HX_FZ_CHECK(req.msgs == NULL && req.prompt == NULL && req.model == NULL);
        hx_fz_check_error(400, msg, param, NULL);
        return 0;
    }
    hx_fz_check_req(kind, &req);
    const char *model_id = hx_fz_setup_def[si].model_id;
    if (req.model && strcmp(req.model, model_id)) {
        snprintf(msg, sizeof msg, "the model '%.200s' does not exist; this server has '%.200s'",
                 req.model, model_id);
        hx_fz_check_error(404, msg, "model", "model_not_found");
        /* the server stops here; go on anyway so that requests naming any model reach the rest */
    }

    /* routes.c: tools against the template's format (400), the grammar of a required call */
    const char *tmpl = env->chat_template ? env->chat_template : hx_chat_template_detect(env->model);
    if (!hx__srv_tools_prepare(&req, tmpl, &param, msg, sizeof msg)) {
        hx_fz_check_error(400, msg, param, NULL);
        hx__srv_gen_req_free(&req);
        return 0;
    }

    /* worker.c: the job's prompt, before it waits for a slot */
    hx_token *ids = NULL;
    int64_t n = 0;
    const char *code = NULL;
    int status = hx__srv_prompt_prepare(env, &req, &ids, &n, &code, msg, sizeof msg);
    if (status) {
        HX_FZ_CHECK(ids == NULL && (status == 400 || status == 500));
        hx_fz_check_error(status, msg, NULL, code);
        hx__srv_gen_req_free(&req);
        return 0;
    }
    HX_FZ_CHECK(ids && n >= 1 && n < env->n_ctx);
    HX_FZ_CHECK(req.max_tokens <= env->n_ctx - n);
    for (int64_t i = 0; i < n; i++) HX_FZ_CHECK(ids[i] >= 0 && ids[i] < hx_fz_setups[si].n_vocab);

    /* the worker, once the job has a slot */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
    hx_fz_sample(&req, ids, n, h);
    hx_fz_grammar(env->model, hx_fz_setups[si].n_vocab, &req, h);
    hx_fz_generate(env->model, &req, ids, n);

    free(ids);
    hx__srv_gen_req_free(&req);
    return 0;
}
