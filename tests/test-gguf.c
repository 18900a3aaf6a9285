/*
 * test-gguf.c — the GGUF reader: every shared-data file opens; a small valid file built in
 * memory parses; every truncation and a list of targeted corruptions fail with HX_E_FORMAT
 * and a message, never a crash.
 */
#include <dirent.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "harness.h"
#include "hx.h"

/* ---- a tiny byte builder ---------------------------------------------------------------------- */

struct buf {
    uint8_t d[8192];
    size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
    if (b->n + n <= sizeof b->d) memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void str(struct buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void pad(struct buf *b, size_t a) { while (b->n % a) put(b, "", 1); }

/* Knobs that corrupt the otherwise valid file made by build(). */
struct knobs {
    uint32_t magic, version;
    uint64_t n_kv_extra;        /* added to the kv count */
    int dup_key, empty_key, bad_vtype, nested, bad_align_type, align_val;
    int long_name, dup_name, n_dims5, bad_type, bad_ne0, overflow, past_eof, misalign, overlap;
    uint64_t str_len;           /* override the length of general.name */
};

static size_t build(struct buf *b, const struct knobs *k)
{
    b->n = 0;
    u32(b, k->magic ? k->magic : 0x46554747u);
    u32(b, k->version ? k->version : 3);
    u64(b, 2);                               /* tensors */
    u64(b, 4 + k->n_kv_extra + (k->nested ? 1 : 0));
    str(b, k->dup_key ? "general.name" : (k->empty_key ? "" : "general.architecture"));
    u32(b, k->bad_vtype ? 13 : 8);
    str(b, "llama");
    str(b, "general.name");
    u32(b, 8);
    if (k->str_len) {
        u64(b, k->str_len);
        put(b, "x", 1);
    } else {
        str(b, "tiny");
    }
    str(b, "general.alignment");
    u32(b, k->bad_align_type ? 5 : 4);
    u32(b, k->align_val ? (uint32_t)k->align_val : 32);
    str(b, "tokenizer.ggml.tokens");
    u32(b, 9);
    u32(b, 8);
    u64(b, 3);
    str(b, "a");
    str(b, "bb");
    str(b, "");
    if (k->nested) {                         /* array of 2 arrays of u16 */
        str(b, "x.nested");
        u32(b, 9);
        u32(b, 9);
        u64(b, 2);
        for (int i = 0; i < 2; i++) {
            u32(b, 2);
            u64(b, 2);
            uint16_t v[2] = {(uint16_t)i, 7};
            put(b, v, 4);
        }
    }
    /* tensor 0: F32 {32, 2} = 256 bytes at 0; tensor 1: Q8_0 {64} = 68 bytes at 256 */
    str(b, k->long_name ? "a_name_that_is_far_too_long_for_ggml_because_it_has_64_bytes_xxx"
                        : "t0.weight");
    u32(b, k->n_dims5 ? 5 : 2);
    u64(b, 32);
    u64(b, k->overflow ? (1ull << 62) : 2);
    if (k->n_dims5) u64(b, 1), u64(b, 1), u64(b, 1);
    u32(b, k->bad_type ? 4 : 0);
    u64(b, 0);
    str(b, k->dup_name ? "t0.weight" : "t1.weight");
    u32(b, 1);
    u64(b, k->bad_ne0 ? 48 : 64);
    u32(b, 8);
    u64(b, k->misalign ? 260 : k->overlap ? 224 : k->past_eof ? 4096 : 256);
    pad(b, 32);
    for (int i = 0; i < 256 + 68; i++) put(b, "\x01", 1);
    return b->n;
}

static int open_buf(const struct buf *b, size_t n)
{
    struct hx_gguf *g = NULL;
    int st = hx__gguf_open_memory(b->d, n, &g);
    if (st == 0) hx__gguf_close(g);
    else if (g) return 1000;   /* out must be NULL on failure */
    return st;
}

TEST(valid_small_file)
{
    struct buf b;
    struct knobs k = {.nested = 1};
    size_t n = build(&b, &k);
    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open_memory(b.d, n, &g));
    ASSERT_EQ(g->n_tensors, 2);
    ASSERT_EQ(g->n_kv, 5);
    ASSERT_EQ(g->alignment, 32);
    ASSERT_EQ(g->data_offset % 32, 0);
    struct hx_gguf_str s;
    ASSERT_OK(hx__gguf_get_str(g, "general.architecture", &s));
    ASSERT_TRUE(s.len == 5 && !memcmp(s.ptr, "llama", 5));
    struct hx_gguf_arr a;
    ASSERT_OK(hx__gguf_get_arr(g, "tokenizer.ggml.tokens", &a));
    ASSERT_EQ(a.count, 3);
    s = hx__gguf_arr_str(g, &a, 1);
    ASSERT_TRUE(s.len == 2 && !memcmp(s.ptr, "bb", 2));
    ASSERT_EQ(hx__gguf_arr_str(g, &a, 2).len, 0);
    ASSERT_OK(hx__gguf_get_arr(g, "x.nested", &a));
    struct hx_gguf_arr sub;
    ASSERT_OK(hx__gguf_arr_sub(&a, 1, &sub));
    ASSERT_EQ(sub.count, 2);
    ASSERT_EQ(hx__gguf_arr_int(&sub, 0), 1);
    ASSERT_EQ(hx__gguf_arr_int(&sub, 1), 7);
    const struct hx_gguf_tensor *t = hx__gguf_find_tensor(g, "t1.weight");
    ASSERT_TRUE(t != NULL);
    ASSERT_EQ(t->nbytes, 68);
    ASSERT_EQ(t->ggml_type, 8);
    ASSERT_EQ(((const uint8_t *)t->data)[0], 1);
    uint64_t u;
    ASSERT_EQ(hx__gguf_get_u64(g, "general.name", &u), HX_E_FORMAT);
    ASSERT_EQ(hx__gguf_get_u64(g, "nope", &u), HX_E_NOTFOUND);
    ASSERT_OK(hx__gguf_get_u64(g, "general.alignment", &u));
    ASSERT_EQ(u, 32);
    hx__gguf_close(g);
}

TEST(every_truncation_fails)
{
    struct buf b;
    struct knobs k = {.nested = 1};
    size_t n = build(&b, &k);
    for (size_t len = 0; len < n; len++) {
        int st = open_buf(&b, len);
        if (st != HX_E_FORMAT) {
            HX_FAIL_AT("truncated at %zu: status %d", len, st);
            return;
        }
        ASSERT_TRUE(hx_last_error()[0] != 0);
    }
}

#define BAD(name, ...)                                                                       \
    TEST(bad_##name)                                                                         \
    {                                                                                        \
        struct buf b;                                                                        \
        struct knobs k = {__VA_ARGS__};                                                      \
        size_t n = build(&b, &k);                                                            \
        ASSERT_EQ(open_buf(&b, n), HX_E_FORMAT);                                             \
        ASSERT_TRUE(strstr(hx_last_error(), "gguf:") != NULL);                               \
        fprintf(stderr, "  message: %s\n", hx_last_error());                                 \
    }

BAD(magic, .magic = 0x12345678)
BAD(version0, .version = 0x10000)
BAD(version1, .version = 1)
BAD(version4, .version = 4)
BAD(big_endian, .version = 0x03000000)
BAD(huge_kv_count, .n_kv_extra = 1ull << 40)
BAD(one_kv_too_many, .n_kv_extra = 1)
BAD(string_past_eof, .str_len = 1u << 20)
BAD(string_too_long, .str_len = (1ull << 30) + 1)
BAD(value_type, .bad_vtype = 1)
BAD(duplicate_key, .dup_key = 1)
BAD(empty_key, .empty_key = 1)
BAD(alignment_type, .bad_align_type = 1)
BAD(alignment_value, .align_val = 48)
BAD(tensor_name_long, .long_name = 1)
BAD(tensor_name_dup, .dup_name = 1)
BAD(n_dims5, .n_dims5 = 1)
BAD(type_removed, .bad_type = 1)
BAD(ne0_not_block, .bad_ne0 = 1)
BAD(shape_overflow, .overflow = 1)
BAD(data_past_eof, .past_eof = 1)
BAD(misaligned, .misalign = 1)
BAD(overlap, .overlap = 1)

TEST(version2_accepted)
{
    struct buf b;
    struct knobs k = {.version = 2};
    ASSERT_EQ(open_buf(&b, build(&b, &k)), 0);
}

TEST(nested_depth_limit)
{
    struct buf b = {.n = 0};
    u32(&b, 0x46554747u);
    u32(&b, 3);
    u64(&b, 0);
    u64(&b, 1);
    str(&b, "deep");
    u32(&b, 9);
    for (int i = 0; i < 20; i++) u32(&b, 9), u64(&b, 1);
    u32(&b, 0), u64(&b, 0);
    ASSERT_EQ(open_buf(&b, b.n), HX_E_FORMAT);
    ASSERT_TRUE(strstr(hx_last_error(), "nested") != NULL);
}

TEST(vocab_only_zero_tensors)
{
    struct buf b = {.n = 0};
    u32(&b, 0x46554747u);
    u32(&b, 3);
    u64(&b, 0);
    u64(&b, 1);
    str(&b, "general.architecture");
    u32(&b, 8);
    str(&b, "qwen2");
    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open_memory(b.d, b.n, &g));
    ASSERT_EQ(g->n_tensors, 0);
    ASSERT_EQ(g->data_offset, b.n);
    hx__gguf_close(g);
}

TEST(type_table)
{
    int64_t be;
    size_t bb;
    ASSERT_TRUE(hx__ggml_type_size(41, &be, &bb) && be == 128 && bb == 18);
    ASSERT_TRUE(hx__ggml_type_size(34, &be, &bb) && be == 256 && bb == 54);
    ASSERT_TRUE(hx__ggml_type_size(35, &be, &bb) && be == 256 && bb == 66);
    ASSERT_TRUE(hx__ggml_type_size(39, &be, &bb) && be == 32 && bb == 17);
    ASSERT_TRUE(hx__ggml_type_size(40, &be, &bb) && be == 64 && bb == 36);
    ASSERT_TRUE(hx__ggml_type_size(42, &be, &bb) && be == 64 && bb == 18);
    ASSERT_EQ(hx__ggml_type_tail(42), 0);
    /* 36: retired in mainline, bitnet.cpp's I2_S (blocks of 128 in 32 bytes, a 32-byte tail) */
    ASSERT_TRUE(hx__ggml_type_size(36, &be, &bb) && be == 128 && bb == 32);
    ASSERT_EQ(hx__ggml_type_tail(36), 32);
    ASSERT_STREQ(hx__ggml_type_name(36), "I2_S");
    ASSERT_STREQ(hx__ggml_type_name(30), "BF16");
    uint32_t removed[] = {4, 5, 31, 32, 33, 37, 38, 43, 1000};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        ASSERT_TRUE(!hx__ggml_type_size(removed[i], &be, &bb));
        ASSERT_TRUE(hx__ggml_type_name(removed[i]) == NULL);
    }
}

/* A file with tensor "w" (type, ne0 x ne1) at offset 0 and data_bytes of data, then, when
 * next_at is not 0, an F32 tensor "z" of 8 values at that offset (else w is the last). */
static size_t build_one(struct buf *b, uint32_t type, uint64_t ne0, uint64_t ne1, size_t data_bytes,
                        size_t next_at)
{
    b->n = 0;
    u32(b, 0x46554747u);
    u32(b, 3);
    u64(b, next_at ? 2 : 1);
    u64(b, 1);
    str(b, "general.architecture");
    u32(b, 8);
    str(b, "bitnet-b1.58");
    str(b, "blk.0.attn_q.weight");
    u32(b, 2);
    u64(b, ne0);
    u64(b, ne1);
    u32(b, type);
    u64(b, 0);
    if (next_at) {
        str(b, "z");
        u32(b, 1);
        u64(b, 8);
        u32(b, 0);
        u64(b, next_at);
    }
    pad(b, 32);
    size_t end = next_at ? next_at + 32 : data_bytes;
    for (size_t i = 0; i < end; i++) put(b, i < data_bytes ? "\x55" : "", 1);
    return b->n;
}

/* The ids forks disagree on (docs/weights.md): the tensor's data span decides, and a file that
 * does not fit is refused with a message naming the tensor and the rule. */
TEST(i2_s_and_q2_0_spans)
{
    struct buf b;
    struct hx_gguf *g;
    /* I2_S {256, 2}: 512 / 4 + 32 = 160 bytes, last in the file or followed at 160 */
    size_t n = build_one(&b, 36, 256, 2, 160, 0);
    ASSERT_OK(hx__gguf_open_memory(b.d, n, &g));
    ASSERT_EQ(g->tensors[0].nbytes, 160);
    hx__gguf_close(g);
    n = build_one(&b, 36, 256, 2, 160, 160);
    ASSERT_OK(hx__gguf_open_memory(b.d, n, &g));
    hx__gguf_close(g);
    /* {256, 3}: 224 bytes, padded to 224 (a multiple of 32) or, unpadded, a file ending early */
    n = build_one(&b, 36, 256, 3, 224, 224);
    ASSERT_OK(hx__gguf_open_memory(b.d, n, &g));
    hx__gguf_close(g);
    /* the codes without the tail; with 32 bytes too many; rows of 192 */
    static const struct { uint64_t ne0, ne1; size_t bytes, next; const char *want; } bad[] = {
        {256, 2, 128, 128, "n/4 + 32 = 160 bytes"},
        {256, 2, 128, 0, "spans 128 bytes"},
        {256, 2, 192, 192, "spans 192 bytes"},
        {192, 2, 160, 0, "not a multiple of I2_S's block of 128"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = build_one(&b, 36, bad[i].ne0, bad[i].ne1, bad[i].bytes, bad[i].next);
        g = NULL;
        ASSERT_EQ(hx__gguf_open_memory(b.d, n, &g), HX_E_FORMAT);
        ASSERT_TRUE(g == NULL);
        fprintf(stderr, "  (expected) %s\n", hx_last_error());
        ASSERT_TRUE(strstr(hx_last_error(), "blk.0.attn_q.weight") != NULL);
        ASSERT_TRUE(strstr(hx_last_error(), bad[i].want) != NULL);
    }
    /* Q2_0 {128, 64}: ggml's 18 bytes per 64 = 2304; PrismML's 34 per 128 = 2176 is refused
     * by name, and any other span too */
    n = build_one(&b, 42, 128, 64, 2304, 0);
    ASSERT_OK(hx__gguf_open_memory(b.d, n, &g));
    ASSERT_EQ(g->tensors[0].nbytes, 2304);
    hx__gguf_close(g);
    n = build_one(&b, 42, 128, 64, 2176, 2176);
    ASSERT_EQ(hx__gguf_open_memory(b.d, n, &g), HX_E_FORMAT);
    fprintf(stderr, "  (expected) %s\n", hx_last_error());
    ASSERT_TRUE(strstr(hx_last_error(), "PrismML") && strstr(hx_last_error(), "blk.0.attn_q.weight"));
    n = build_one(&b, 42, 128, 64, 2176, 0);
    ASSERT_EQ(hx__gguf_open_memory(b.d, n, &g), HX_E_FORMAT);
    ASSERT_TRUE(strstr(hx_last_error(), "PrismML") != NULL);
    n = build_one(&b, 42, 128, 64, 2400, 2400);
    ASSERT_EQ(hx__gguf_open_memory(b.d, n, &g), HX_E_FORMAT);
    ASSERT_TRUE(strstr(hx_last_error(), "18 bytes per 64 elements: 2304 bytes") != NULL);
}

static int open_dir(const char *sub, int *n_files)
{
    DIR *d = opendir(hx_test_data(sub));
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
        char rel[512];
        snprintf(rel, sizeof rel, "%s/%s", sub, e->d_name);
        struct hx_gguf *g;
        int st = hx__gguf_open(hx_test_data(rel), false, &g);
        if (st) {
            fprintf(stderr, "  %s: %s\n", rel, hx_last_error());
            closedir(d);
            return -1;
        }
        struct hx_gguf_str s;
        if (hx__gguf_get_str(g, "general.architecture", &s)) {
            fprintf(stderr, "  %s: no general.architecture\n", rel);
            hx__gguf_close(g);
            closedir(d);
            return -1;
        }
        hx__gguf_close(g);
        (*n_files)++;
    }
    closedir(d);
    return 0;
}

TEST(shared_data_files_open)
{
    int n = 0;
    const char *dirs[] = {"vocab", "qwen3", "misc", "stories260K"};
    for (size_t i = 0; i < 4; i++) ASSERT_EQ(open_dir(dirs[i], &n), 0);
    if (n == 0) SKIP("no .gguf files under HX_DATA");
    ASSERT_TRUE(n >= 10);
}

TEST(stories260k)
{
    struct hx_gguf *g;
    if (hx__gguf_open(hx_test_data("stories260K/stories260K.gguf"), true, &g))
        SKIP("stories260K not available: %s", hx_last_error());
    struct hx_gguf_str s;
    int st = hx__gguf_get_str(g, "general.architecture", &s);
    bool ok = st == 0 && s.len == 5 && !memcmp(s.ptr, "llama", 5);
    bool has_embd = hx__gguf_find_tensor(g, "token_embd.weight") != NULL;
    uint64_t n_layer = 0;
    int st2 = hx__gguf_get_u64(g, "llama.block_count", &n_layer);
    uint64_t nt = g->n_tensors;
    uint64_t n_out = hx__gguf_find_tensor(g, "output.weight") ? 1 : 0;
    hx__gguf_close(g);
    ASSERT_TRUE(ok);
    ASSERT_TRUE(has_embd);
    ASSERT_OK(st2);
    ASSERT_EQ(nt, 2 + n_out + 9 * n_layer);   /* embd, output_norm, [output], 9 per layer */
}

TEST(vocab_qwen2_strings)
{
    struct hx_gguf *g;
    if (hx__gguf_open(hx_test_data("vocab/ggml-vocab-qwen2.gguf"), false, &g))
        SKIP("qwen2 vocab not available");
    struct hx_gguf_arr a;
    int st = hx__gguf_get_arr(g, "tokenizer.ggml.tokens", &a);
    struct hx_gguf_str s0 = {0}, last = {0};
    if (!st) s0 = hx__gguf_arr_str(g, &a, 0), last = hx__gguf_arr_str(g, &a, a.count - 1);
    uint64_t n = a.count, nt = g->n_tensors;
    bool first_ok = s0.len == 1 && s0.ptr[0] == '!';
    hx__gguf_close(g);
    ASSERT_OK(st);
    ASSERT_TRUE(n > 150000);
    ASSERT_EQ(nt, 0);
    ASSERT_TRUE(first_ok);
    ASSERT_TRUE(last.len > 0);
}

TEST_MAIN()
