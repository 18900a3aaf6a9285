/* fuzz-gguf.c — libFuzzer target for the GGUF reader and the tokenizer loader: any input must
 * parse or fail cleanly, everything a successful parse exposes must be readable within the
 * input, and a vocabulary it holds must load or fail cleanly and then tokenize and
 * detokenize a fixed text into ids within its range. Seeds: tests/fuzz/corpus/gguf/
 * (written by gguf-seeds.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hx-impl.h"
#include "vocab.h"

static void hx_fz_vocab(struct hx_gguf *g)
{
    struct hx_vocab *v = NULL;
    if (hx__vocab_load(g, &v) != HX_OK) return;
    static const char text[] =
        "Hello world! <|im_start|>user\n h\xc3\xa9llo  123 [INST] \xff\xe2\x96";
    hx_token ids[256];
    int64_t n = 0, nv = hx__vocab_n_tokens(v);
    if (hx__vocab_tokenize(v, text, sizeof text - 1, true, true, ids, 256, &n) == HX_OK) {
        if (n > 256) __builtin_trap(); /* no token covers less than one byte, plus BOS/EOS */
        for (int64_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= nv) __builtin_trap();
        char *out = NULL;
        size_t len = 0;
        if (hx__vocab_detokenize(v, ids, n, true, &out, &len) == HX_OK && strlen(out) > len)
            __builtin_trap();
        hx_free(out);
    }
    hx__vocab_free(v);
}

/* Warnings about a malformed vocabulary are formatted and read, not printed. */
static void hx_fz_log(enum hx_log_level level, const char *msg, void *user_data)
{
    if (strlen(msg) > ((size_t)1 << 20)) __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    hx_log_set(hx_fz_log, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hx_gguf *g;
    if (hx__gguf_open_memory(data, size, &g) != 0) return 0;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].nbytes)
            sink ^= ((const uint8_t *)g->tensors[i].data)[g->tensors[i].nbytes - 1];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hx_gguf_value *v = &g->kv[i].value;
        if (v->type == HX_GGUF_ARRAY && v->v.arr.elem_type == HX_GGUF_STRING && v->v.arr.count)
            sink ^= (uint8_t)hx__gguf_arr_str(g, &v->v.arr, v->v.arr.count - 1).len;
        if (v->type == HX_GGUF_ARRAY && v->v.arr.elem_type == HX_GGUF_ARRAY && v->v.arr.count) {
            struct hx_gguf_arr sub;
            hx__gguf_arr_sub(&v->v.arr, v->v.arr.count - 1, &sub);
        }
    }
    hx_fz_vocab(g);
    hx__gguf_close(g);
    return (int)(sink & 0);
}
