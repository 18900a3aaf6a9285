/*
 * fuzz-grammar.c — libFuzzer target for the grammar compiler and matcher (core/grammar.c), which
 * takes files from users (`engine run --grammar FILE`) and grammars the server writes from
 * clients' JSON Schemas.
 *
 * Input: the grammar text up to the first NUL byte; after it, bytes that drive the matcher:
 * the first one picks the vocabulary (even: the 512-token stories260K SentencePiece, odd: the
 * 151,936-token Qwen2 byte-level BPE), the rest are fed as text (hx_grammar_accept_text, which
 * may refuse them) and then seed the logits of a few sampling steps, each of which must give a
 * token the grammar then accepts. Vocabularies are loaded once, vocab-only, from $HX_DATA
 * (default: the build's HX_DATA_DIR). A broken invariant is __builtin_trap().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx.h"

#ifndef HX_FUZZ_DATA_DIR
#define HX_FUZZ_DATA_DIR "../shared/data"
#endif

#define HX_FG_CHECK(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-grammar: invariant failed at line %d: %s\n", __LINE__, #c);      \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static struct hx_model *hx_fg_models[2];
static float *hx_fg_logits;

static void hx_fg_load(void)
{
    static const char *const files[2] = {"stories260K/stories260K.gguf",
                                         "vocab/ggml-vocab-qwen2.gguf"};
    const char *dir = getenv("HX_DATA");
    if (!dir) dir = HX_FUZZ_DATA_DIR;
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        struct hx_model_params mp = {.struct_size = sizeof mp, .vocab_only = true};
        if (hx_model_load(path, &mp, &hx_fg_models[i]) != HX_OK) {
            fprintf(stderr, "fuzz-grammar: cannot load %s (set HX_DATA): %s\n", path,
                    hx_last_error());
            exit(1);
        }
    }
    hx_fg_logits = malloc((size_t)hx_vocab_n_tokens(hx_fg_models[1]) * sizeof *hx_fg_logits);
    if (!hx_fg_logits) exit(1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!hx_fg_models[0]) hx_fg_load();
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const uint8_t *drive = nul ? nul + 1 : data + size;
    size_t dlen = (size_t)(data + size - drive);
    struct hx_model *m = hx_fg_models[dlen > 0 && (drive[0] & 1)];
    struct hx_grammar *g = NULL;
    int rc = hx_grammar_new(m, (const char *)data, glen, &g);
    HX_FG_CHECK((rc == HX_OK) == (g != NULL));
    if (rc != HX_OK) {
        HX_FG_CHECK(rc == HX_E_INVAL || rc == HX_E_NOMEM);
        HX_FG_CHECK(strlen(hx_last_error()) > 0);
        return 0;
    }
    if (dlen > 0) drive++, dlen--;
    size_t half = dlen / 2;
    rc = hx_grammar_accept_text(g, (const char *)drive, half);
    HX_FG_CHECK(rc == HX_OK || rc == HX_E_INVAL);
    if (rc != HX_OK) hx_grammar_reset(g);
    int64_t nv = hx_vocab_n_tokens(m);
    struct hx_sampler_params sp;
    hx_sampler_params_init(&sp);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = half; i < dlen; i++) x = (x ^ drive[i]) * 0x100000001b3ull;
    sp.temperature = (x & 1) ? 0.0f : 0.9f;
    sp.top_k = (x & 2) ? 0 : 40;
    sp.seed = x;
    struct hx_sampler *s;
    HX_FG_CHECK(hx_sampler_new(&sp, nv, &s) == HX_OK);
    for (int step = 0; step < 8 && !hx_grammar_done(g); step++) {
        for (int64_t i = 0; i < nv; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            hx_fg_logits[i] = (float)(x >> 44) / 65536.0f;
        }
        hx_token t = hx_sampler_sample_grammar(s, g, hx_fg_logits, 16 - step);
        if (t == HX_TOKEN_NULL)
            break; /* a state with no token (e.g. only multi-byte text the
                                          vocabulary cannot spell) */
        HX_FG_CHECK(t >= 0 && t < nv);
        HX_FG_CHECK(hx_grammar_accept(g, t) == HX_OK);
        if (hx_vocab_is_eog(m, t)) break;
    }
    hx_sampler_free(s);
    hx_grammar_free(g);
    return 0;
}
