/*
 * gguf-seeds.c — writes the seed corpus of fuzz-gguf (tests/fuzz/corpus/gguf/) with the
 * project's own GGUF writer: small valid files (every value type, nested arrays, tensors of
 * several types and alignments, a SentencePiece and a byte-level BPE vocabulary with a chat
 * template) and malformed variants of them, each broken in one place the reader must catch
 * (truncations, bad magic/version/type ids, huge counts and lengths, bad tensor tables, and
 * the ids forks disagree on: an I2_S tensor whose data span is not n/4 + 32 or whose rows are
 * not whole blocks of 128, a type-42 tensor in PrismML's group-128 layout).
 *
 *   build-fuzz/tests/fuzz/gguf-seeds tests/fuzz/corpus/gguf
 *
 * Deterministic: the same files every run. Exits 1 if a file cannot be written or a valid
 * seed does not read back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hx.h"

static const char *hx_out_dir;
static int hx_n_written;

#define HX_TRY(x)                                                                                  \
    do {                                                                                           \
        int st_ = (x);                                                                             \
        if (st_ != HX_OK) {                                                                        \
            fprintf(stderr, "gguf-seeds: %s failed: %s\n", #x, hx_last_error());                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct hx_blob {
    unsigned char *p;
    size_t n;
};

static void hx_put(const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", hx_out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gguf-seeds: cannot write %s\n", path);
        exit(1);
    }
    hx_n_written++;
}

static struct hx_blob hx_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct hx_blob b = {0};
    long n = -1;
    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "gguf-seeds: cannot read %s\n", path);
        exit(1);
    }
    b.n = (size_t)n;
    b.p = malloc(b.n ? b.n : 1);
    if (!b.p || fread(b.p, 1, b.n, f) != b.n) exit(1);
    fclose(f);
    return b;
}

/* Tensor data: a byte pattern (the reader does not interpret it). */
static int hx_fill(void *user, uint64_t i, void *dst, size_t n)
{
    for (size_t k = 0; k < n; k++) ((unsigned char *)dst)[k] = (unsigned char)(k * 7 + i);
    return HX_OK;
}

/* Write w as name (through the writer's own path, then into the corpus) and return the bytes,
 * checked to read back. */
static struct hx_blob hx_emit(struct hx_gguf_writer *w, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", hx_out_dir, name);
    HX_TRY(hx__gguf_write(w, path, hx_fill, NULL, NULL));
    hx_n_written++;
    struct hx_blob b = hx_read(path);
    struct hx_gguf *g;
    HX_TRY(hx__gguf_open_memory(b.p, b.n, &g));
    hx__gguf_close(g);
    return b;
}

static void hx_wle(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A copy of b with 8 (or 4) bytes at off replaced, written as name. */
static void hx_patch(const struct hx_blob *b, const char *name, size_t off, uint64_t v, int width)
{
    if (off + (size_t)width > b->n) return;
    unsigned char *c = malloc(b->n);
    memcpy(c, b->p, b->n);
    hx_wle(c + off, v, width);
    hx_put(name, c, b->n);
    free(c);
}

/* Offset just after the first occurrence of the GGUF string s (u64 length + bytes). */
static size_t hx_after_str(const struct hx_blob *b, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 8; i + n <= b->n; i++)
        if (!memcmp(b->p + i, s, n) && b->p[i - 8] == (unsigned char)n && !b->p[i - 7])
            return i + n;
    fprintf(stderr, "gguf-seeds: '%s' not found\n", s);
    exit(1);
}

static void hx_truncations(const struct hx_blob *b, const char *stem)
{
    size_t cuts[] = {b->n / 3, b->n / 2, b->n - 1, 0, 3, 4, 8, 16, 23, 24, 31};
    size_t n_cuts = strcmp(stem, "kv") ? 3 : sizeof cuts / sizeof cuts[0]; /* short cuts once */
    for (size_t i = 0; i < n_cuts; i++) {
        if (cuts[i] >= b->n) continue;
        char name[128];
        snprintf(name, sizeof name, "bad-%s-cut%zu", stem, cuts[i]);
        hx_put(name, b->p, cuts[i]);
    }
}

static struct hx_blob hx_kv_all_types(void)
{
    struct hx_gguf_writer *w;
    HX_TRY(hx__gguf_writer_new(&w));
    HX_TRY(hx__gguf_set_str(w, "general.architecture", "llama"));
    HX_TRY(hx__gguf_set_str(w, "general.name", "fuzz seed"));
    HX_TRY(hx__gguf_set_u8(w, "t.u8", 200));
    HX_TRY(hx__gguf_set_i8(w, "t.i8", -100));
    HX_TRY(hx__gguf_set_u16(w, "t.u16", 60000));
    HX_TRY(hx__gguf_set_i16(w, "t.i16", -30000));
    HX_TRY(hx__gguf_set_u32(w, "t.u32", 4000000000u));
    HX_TRY(hx__gguf_set_i32(w, "t.i32", -2000000000));
    HX_TRY(hx__gguf_set_u64(w, "t.u64", 18000000000000000000ull));
    HX_TRY(hx__gguf_set_i64(w, "t.i64", -9000000000000000000ll));
    HX_TRY(hx__gguf_set_f32(w, "t.f32", 1.5f));
    HX_TRY(hx__gguf_set_f64(w, "t.f64", -2.25));
    HX_TRY(hx__gguf_set_bool(w, "t.bool", true));
    HX_TRY(hx__gguf_set_strn(w, "t.str_nul", "a\0b", 3));
    HX_TRY(hx__gguf_set_str(w, "t.str_utf8", "caf\xc3\xa9 \xe2\x96\x81"));
    int32_t ints[5] = {1, -2, 3, -4, 5};
    HX_TRY(hx__gguf_set_arr(w, "t.arr_i32", HX_GGUF_INT32, ints, 5));
    float fl[3] = {0.5f, -1.0f, 3.0f};
    HX_TRY(hx__gguf_set_arr(w, "t.arr_f32", HX_GGUF_FLOAT32, fl, 3));
    uint8_t by[4] = {0, 1, 254, 255};
    HX_TRY(hx__gguf_set_arr(w, "t.arr_u8", HX_GGUF_UINT8, by, 4));
    HX_TRY(hx__gguf_set_arr(w, "t.arr_empty", HX_GGUF_UINT64, NULL, 0));
    const char *strs[4] = {"", "x", "two words", "\xe4\xb8\xad"};
    HX_TRY(hx__gguf_set_arr_str(w, "t.arr_str", strs, 4));
    /* nested: [[1,-2,3,-4,5], ["", "x", ...]] and one level deeper */
    struct hx_gguf *tmp;
    struct hx_blob b0 = hx_emit(w, "kv-flat");
    HX_TRY(hx__gguf_open_memory(b0.p, b0.n, &tmp));
    struct hx_gguf_arr subs[2];
    HX_TRY(hx__gguf_get_arr(tmp, "t.arr_i32", &subs[0]));
    HX_TRY(hx__gguf_get_arr(tmp, "t.arr_str", &subs[1]));
    HX_TRY(hx__gguf_set_arr_nested(w, "t.nested", subs, 2));
    hx__gguf_close(tmp);
    free(b0.p);
    struct hx_blob b1 = hx_emit(w, "kv-nested1");
    HX_TRY(hx__gguf_open_memory(b1.p, b1.n, &tmp));
    struct hx_gguf_arr deep[2];
    HX_TRY(hx__gguf_get_arr(tmp, "t.nested", &deep[0]));
    HX_TRY(hx__gguf_get_arr(tmp, "t.arr_f32", &deep[1]));
    HX_TRY(hx__gguf_set_arr_nested(w, "t.nested2", deep, 2));
    hx__gguf_close(tmp);
    free(b1.p);
    struct hx_blob b = hx_emit(w, "kv-all-types");
    hx__gguf_writer_free(w);
    return b;
}

static struct hx_blob hx_tensors(const char *name, uint32_t align)
{
    struct hx_gguf_writer *w;
    HX_TRY(hx__gguf_writer_new(&w));
    HX_TRY(hx__gguf_set_str(w, "general.architecture", "llama"));
    if (align) HX_TRY(hx__gguf_set_alignment(w, align));
    static const struct {
        const char *name;
        uint32_t type, n_dims;
        int64_t ne[4];
    } t[] = {
        {"token_embd.weight", 0 /* F32 */, 2, {4, 3}},
        {"blk.0.attn_norm.weight", 1 /* F16 */, 1, {8}},
        {"blk.0.attn_q.weight", 8 /* Q8_0 */, 2, {32, 2}},
        {"blk.0.ffn_down.weight", 12 /* Q4_K */, 2, {256, 1}},
        {"blk.0.ffn_up.weight", 14 /* Q6_K */, 3, {256, 1, 1}},
        {"empty", 0, 4, {0, 1, 1, 1}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        HX_TRY(hx__gguf_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, NULL));
    struct hx_blob b = hx_emit(w, name);
    hx__gguf_writer_free(w);
    return b;
}

/* Offset of tensor name's n_dims field (just after its name). */
#define HX_TINFO(b, name) hx_after_str(b, name)

/* The ternary types of bitnet.cpp (I2_S, id 36: n/4 bytes of codes and a 32-byte tail) and
 * ggml (Q2_0, id 42), then the variants the reader must refuse with a message naming the
 * tensor and the layout rule. */
static void hx_ternary(void)
{
    struct hx_gguf_writer *w;
    HX_TRY(hx__gguf_writer_new(&w));
    HX_TRY(hx__gguf_set_str(w, "general.architecture", "bitnet-b1.58"));
    HX_TRY(hx__gguf_set_u32(w, "general.file_type", 40));
    static const struct {
        const char *name;
        uint32_t type, n_dims;
        int64_t ne[2];
    } t[] = {
        {"blk.0.attn_q.weight", 36 /* I2_S: 512 / 4 + 32 = 160 bytes */, 2, {256, 2}},
        {"blk.0.ffn_up.weight", 42 /* Q2_0: 4 blocks of 18 = 72 bytes */, 2, {128, 2}},
        {"blk.0.ffn_gate.weight", 8 /* Q8_0 {32, 64}: 2176 bytes, PrismML's Q2_0 {128, 64} */, 2, {32, 64}},
        {"blk.0.attn_norm.weight", 0, 1, {8}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        HX_TRY(hx__gguf_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, NULL));
    struct hx_blob b = hx_emit(w, "ternary-i2s-q2_0");
    hx__gguf_writer_free(w);
    const size_t q = HX_TINFO(&b, "blk.0.attn_q.weight"), g = HX_TINFO(&b, "blk.0.ffn_gate.weight");
    hx_patch(&b, "bad-i2s-span-short", q + 12, 3, 8);    /* {256, 3} needs 224 of the 160 */
    hx_patch(&b, "bad-i2s-span-long", q + 12, 1, 8);     /* {256, 1} is 96 bytes, not 160 */
    hx_patch(&b, "bad-i2s-row-192", q + 4, 192, 8);      /* rows not whole blocks of 128 */
    hx_patch(&b, "bad-i2s-row-64", q + 4, 64, 8);
    { /* the Q8_0 tensor retyped as PrismML's Q2_0: type 42, {128, 64}, 34 bytes per 128 */
        unsigned char *c = malloc(b.n);
        memcpy(c, b.p, b.n);
        hx_wle(c + g + 4, 128, 8);
        hx_wle(c + g + 20, 42, 4);
        hx_put("bad-q2_0-prismml-128", c, b.n);
        free(c);
    }
    hx_truncations(&b, "ternary");
    free(b.p);
}

static void hx_vocab_common(struct hx_gguf_writer *w, const char *const *tok, const int32_t *type,
                            uint64_t n)
{
    HX_TRY(hx__gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, n));
    HX_TRY(hx__gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_INT32, type, n));
    float *scores = malloc(n * sizeof *scores);
    for (uint64_t i = 0; i < n; i++) scores[i] = -(float)i;
    HX_TRY(hx__gguf_set_arr(w, "tokenizer.ggml.scores", HX_GGUF_FLOAT32, scores, n));
    free(scores);
}

/* A SentencePiece vocabulary: control tokens, byte fallback for a few bytes, pieces; then
 * variants the tokenizer loader must refuse or survive, written with the same writer. */
static struct hx_blob hx_vocab_spm(void)
{
    static const char *const tok[] = {"<unk>",
                                      "<s>",
                                      "</s>",
                                      "<0x0A>",
                                      "<0x20>",
                                      "<0xC3>",
                                      "<0xA9>",
                                      "\xe2\x96\x81",
                                      "\xe2\x96\x81H",
                                      "ello",
                                      "\xe2\x96\x81w",
                                      "or",
                                      "ld",
                                      "\xe2\x96\x81t",
                                      "he",
                                      "e",
                                      "l",
                                      "o",
                                      "H",
                                      "w",
                                      "r",
                                      "d",
                                      "t",
                                      "h",
                                      "\xe2\x96\x81the",
                                      "[INST]",
                                      "[/INST]"};
    static const int32_t type[] = {2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4};
    struct hx_gguf_writer *w;
    HX_TRY(hx__gguf_writer_new(&w));
    HX_TRY(hx__gguf_set_str(w, "general.architecture", "llama"));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.ggml.model", "llama"));
    hx_vocab_common(w, tok, type, sizeof tok / sizeof tok[0]);
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    HX_TRY(hx__gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    HX_TRY(hx__gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", true));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.chat_template", "[INST] {{ m }} [/INST]"));
    struct hx_blob b = hx_emit(w, "vocab-spm");
    uint64_t n = sizeof tok / sizeof tok[0];
    HX_TRY(hx__gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_INT32, type, 3));
    free(hx_emit(w, "bad-vocab-toktype-count").p);
    int32_t type7[sizeof type / sizeof type[0]];
    memcpy(type7, type, sizeof type);
    type7[5] = 7;
    HX_TRY(hx__gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_INT32, type7, n));
    free(hx_emit(w, "bad-vocab-toktype-7").p);
    HX_TRY(hx__gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_INT32, type, n));
    HX_TRY(hx__gguf_set_arr_str(w, "tokenizer.ggml.scores", tok, n));
    free(hx_emit(w, "bad-vocab-scores-str").p);
    HX_TRY(hx__gguf_remove_kv(w, "tokenizer.ggml.scores"));
    HX_TRY(hx__gguf_remove_kv(w, "tokenizer.ggml.token_type"));
    free(hx_emit(w, "vocab-spm-no-types").p);
    hx_vocab_common(w, tok, type, n);
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 100000));
    HX_TRY(hx__gguf_set_f32(w, "tokenizer.ggml.eos_token_id", 2.5f));
    HX_TRY(hx__gguf_set_i32(w, "tokenizer.ggml.unknown_token_id", -1));
    free(hx_emit(w, "vocab-spm-odd-ids").p);
    static const char *const odd[] = {"<unk>", "<s>",    "",    "\xe2\x96\x81", "\xe2\x96\x81",
                                      "a",     "<0xZZ>", "<0x", "[INST]",       ""};
    static const int32_t odd_type[] = {2, 3, 1, 1, 1, 1, 6, 6, 4, 4};
    hx_vocab_common(w, odd, odd_type, sizeof odd / sizeof odd[0]);
    free(hx_emit(w, "vocab-spm-odd-tokens").p);
    hx__gguf_writer_free(w);
    return b;
}

/* A byte-level BPE vocabulary (GPT-2 byte map: 'Ġ' is the space), merges, special tokens. */
static struct hx_blob hx_vocab_bpe(const char *name, const char *pre)
{
    static const char *const tok[] = {"H",
                                      "e",
                                      "l",
                                      "o",
                                      "w",
                                      "r",
                                      "d",
                                      "\xc4\xa0",
                                      "\xc4\x8a",
                                      "he",
                                      "ll",
                                      "hell",
                                      "hello",
                                      "\xc4\xa0w",
                                      "or",
                                      "\xc4\xa0wor",
                                      "ld",
                                      "\xc4\xa0world",
                                      "1",
                                      "2",
                                      "3",
                                      "12",
                                      "123",
                                      "!",
                                      "<|endoftext|>",
                                      "<|im_start|>",
                                      "<|im_end|>",
                                      "<think>",
                                      "</think>",
                                      "h",
                                      "W"};
    static const int32_t type[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 4, 4, 1, 1};
    static const char *const merges[] = {
        "h e",          "l l", "he ll",          "hell o", "\xc4\xa0 w", "o r",
        "\xc4\xa0w or", "l d", "\xc4\xa0wor ld", "1 2",    "12 3"};
    struct hx_gguf_writer *w;
    HX_TRY(hx__gguf_writer_new(&w));
    HX_TRY(hx__gguf_set_str(w, "general.architecture", "qwen3"));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.ggml.pre", pre));
    hx_vocab_common(w, tok, type, sizeof tok / sizeof tok[0]);
    HX_TRY(
        hx__gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof merges[0]));
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 26));
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 24));
    HX_TRY(hx__gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 24));
    HX_TRY(hx__gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.chat_template",
                            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                            "<|im_end|>\n{% endfor %}"));
    struct hx_blob b = hx_emit(w, name);
    if (strcmp(pre, "qwen2")) {
        hx__gguf_writer_free(w);
        return b;
    }
    static const char *const bad_merges[] = {
        "hello", "x y", "", "h e l", " ", "he ll o", "\xc4\xa0 \xc4\xa0"};
    for (size_t i = 0; i < sizeof bad_merges / sizeof bad_merges[0]; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "vocab-bpe-odd-merge%zu", i);
        HX_TRY(hx__gguf_set_arr_str(w, "tokenizer.ggml.merges", bad_merges + i, 1));
        free(hx_emit(w, nm).p);
    }
    HX_TRY(hx__gguf_remove_kv(w, "tokenizer.ggml.merges"));
    free(hx_emit(w, "bad-vocab-no-merges").p);
    HX_TRY(hx__gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 1));
    HX_TRY(hx__gguf_set_str(w, "tokenizer.ggml.pre", "no-such-pre"));
    free(hx_emit(w, "bad-vocab-pre-unknown").p);
    HX_TRY(hx__gguf_remove_kv(w, "tokenizer.ggml.pre"));
    free(hx_emit(w, "vocab-bpe-no-pre").p);
    HX_TRY(hx__gguf_set_str(w, "tokenizer.ggml.model", "bert"));
    free(hx_emit(w, "bad-vocab-model-unknown").p);
    hx__gguf_writer_free(w);
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gguf-seeds OUT_DIR\n");
        return 2;
    }
    hx_out_dir = argv[1];

    struct hx_blob kv = hx_kv_all_types();
    struct hx_blob tn = hx_tensors("tensors", 0);
    struct hx_blob ta = hx_tensors("tensors-align64", 64);
    struct hx_blob spm = hx_vocab_spm();
    struct hx_blob bpe = hx_vocab_bpe("vocab-bpe-qwen2", "qwen2");
    struct hx_blob bpe3 = hx_vocab_bpe("vocab-bpe-llama3", "llama-bpe");
    free(bpe3.p);
    hx_ternary();

    /* header: magic, version, n_tensors, n_kv */
    hx_patch(&kv, "bad-magic", 0, 0x46554746, 4);
    hx_patch(&kv, "bad-version2", 4, 2, 4);
    hx_patch(&kv, "bad-version4", 4, 4, 4);
    hx_patch(&kv, "bad-nkv-huge", 16, 0x0fffffffffffffffull, 8);
    hx_patch(&kv, "bad-nkv-plus1", 16, kv.p[16] + 1u, 8);
    hx_patch(&tn, "bad-ntensors-huge", 8, 0x00ffffffffffffffull, 8);
    hx_patch(&tn, "bad-ntensors-plus1", 8, tn.p[8] + 1u, 8);
    /* key/value records: key length, value type, string length, array type and count */
    hx_patch(&kv, "bad-keylen-huge", 24, 0x7fffffffffffffffull, 8);
    hx_patch(&kv, "bad-keylen-zero", 24, 0, 8);
    size_t v0 = hx_after_str(&kv, "general.architecture");
    hx_patch(&kv, "bad-type13", v0, 13, 4);
    hx_patch(&kv, "bad-type-huge", v0, 0xffffffffu, 4);
    hx_patch(&kv, "bad-strlen-huge", v0 + 4, 0xfffffffffffffff0ull, 8);
    hx_patch(&kv, "bad-strlen-past-end", v0 + 4, kv.n, 8);
    size_t a0 = hx_after_str(&kv, "t.arr_i32");
    hx_patch(&kv, "bad-arr-elemtype", a0 + 4, 13, 4);
    hx_patch(&kv, "bad-arr-of-arr-count", a0 + 4, HX_GGUF_ARRAY, 4);
    hx_patch(&kv, "bad-arr-count-huge", a0 + 8, 0x2000000000000000ull, 8);
    size_t as = hx_after_str(&kv, "t.arr_str");
    hx_patch(&kv, "bad-arrstr-count", as + 8, 5, 8);
    hx_patch(&kv, "bad-arrstr-elemlen", as + 16, 0xffffffffffffull, 8);
    size_t an = hx_after_str(&kv, "t.nested");
    hx_patch(&kv, "bad-nested-count", an + 8, 3, 8);
    hx_patch(&kv, "bad-nested-inner-type", an + 16, 11, 4);
    size_t al = hx_after_str(&ta, "general.alignment");
    hx_patch(&ta, "bad-align-3", al + 4, 3, 4);
    hx_patch(&ta, "bad-align-0", al + 4, 0, 4);
    hx_patch(&ta, "bad-align-type", al, HX_GGUF_UINT64, 4);
    hx_truncations(&kv, "kv");
    hx_truncations(&ta, "tensors");
    /* tensor table: n_dims, ne, type, offset of one tensor */
    size_t t0 = hx_after_str(&tn, "blk.0.attn_q.weight");
    hx_patch(&tn, "bad-ndims5", t0, 5, 4);
    hx_patch(&tn, "bad-ndims0", t0, 0, 4);
    hx_patch(&tn, "bad-ne-negative", t0 + 4, (uint64_t)-32, 8);
    hx_patch(&tn, "bad-ne-not-block", t0 + 4, 33, 8);
    hx_patch(&tn, "bad-ne-overflow", t0 + 12, 0x4000000000000000ull, 8);
    hx_patch(&tn, "bad-ttype-unknown", t0 + 20, 99, 4);
    hx_patch(&tn, "bad-ttype-removed", t0 + 20, 4, 4);
    hx_patch(&tn, "bad-offset-misaligned", t0 + 24, 3, 8);
    hx_patch(&tn, "bad-offset-overlap", t0 + 24, 0, 8);
    hx_patch(&tn, "bad-offset-past-end", t0 + 24, tn.n, 8);
    { /* two tensors named alike: blk.0.ffn_up.weight renamed blk.0.attn_q.weight (19 bytes) */
        unsigned char *c = malloc(tn.n);
        memcpy(c, tn.p, tn.n);
        size_t u = hx_after_str(&tn, "blk.0.ffn_up.weight") - strlen("blk.0.ffn_up.weight");
        memcpy(c + u, "blk.0.attn_q.weight", strlen("blk.0.attn_q.weight"));
        hx_put("bad-name-dup", c, tn.n);
        free(c);
    }
    size_t t1 = hx_after_str(&tn, "blk.0.attn_norm.weight");
    hx_patch(&tn, "bad-name-len-huge", t1 - strlen("blk.0.attn_norm.weight") - 8, 0xffffffffull, 8);
    hx_patch(&tn, "bad-name-len-64", t1 - strlen("blk.0.attn_norm.weight") - 8, 64, 8);
    /* vocabularies: refused or odd variants are written by hx_vocab_spm and hx_vocab_bpe */
    hx_truncations(&spm, "vocab-spm");

    free(kv.p);
    free(tn.p);
    free(ta.p);
    free(spm.p);
    free(bpe.p);
    printf("gguf-seeds: %d files in %s\n", hx_n_written, hx_out_dir);
    return 0;
}
