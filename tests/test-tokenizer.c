/*
 * test-tokenizer.c — tokenizer vectors for every vocabulary in the shared data (llama.cpp's
 * .inp/.out pairs: add_special = false, parse_special = false), round trips, piece rules, the
 * streaming detokenizer's UTF-8 guarantees, special-token partition and load errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "harness.h"
#include "hx.h"
#include "unicode.h"
#include "vocab.h"

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    if (b) b[sz] = 0;
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static struct hx_vocab *load_vocab(const char *rel, struct hx_gguf **g)
{
    struct hx_vocab *v = NULL;
    *g = NULL;
    if (hx__gguf_open(hx_test_data(rel), false, g) != HX_OK) return NULL;
    if (hx__vocab_load(*g, &v) != HX_OK) {
        fprintf(stderr, "  load %s: %s\n", rel, hx_last_error());
        hx__gguf_close(*g);
        *g = NULL;
        return NULL;
    }
    return v;
}

static int tokenize(const struct hx_vocab *v, const char *s, size_t n, bool add, bool parse, hx_token *ids,
                    int64_t cap, int64_t *n_out)
{
    return hx__vocab_tokenize(v, s, n, add, parse, ids, cap, n_out);
}

static int g_total_fail;

/* Run the .inp/.out vectors of one vocabulary; returns mismatches (-1: files missing). */
static int run_vectors(const char *gguf_rel, const char *name)
{
    char inp_rel[512], out_rel[512];
    snprintf(inp_rel, sizeof inp_rel, "%s.inp", gguf_rel);
    snprintf(out_rel, sizeof out_rel, "%s.out", gguf_rel);
    size_t ni, no;
    char *inp = read_file(hx_test_data(inp_rel), &ni), *outf = read_file(hx_test_data(out_rel), &no);
    struct hx_gguf *g;
    struct hx_vocab *v = (inp && outf) ? load_vocab(gguf_rel, &g) : NULL;
    if (!v) {
        free(inp);
        free(outf);
        return -1;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    int pass = 0, fail = 0, rt_ok = 0, rt_n = 0;
    char *ip = inp, *op = outf;
    hx_token *ids = malloc(sizeof(hx_token) * 65536);
    double t0 = hx__time_us();
    for (;;) {
        char *e = strstr(ip, sep);
        if (!e) break;
        size_t len = (size_t)(e - ip);
        char *nl = strchr(op, '\n');
        if (!nl) break;
        *nl = 0;
        hx_token exp[4096];
        int64_t ne = 0;
        for (char *q = op; *q;) {
            char *end;
            long x = strtol(q, &end, 10);
            if (end == q) break;
            exp[ne++] = (hx_token)x;
            q = end;
        }
        int64_t n = 0;
        int st = tokenize(v, ip, len, false, false, ids, 65536, &n);
        bool ok = st == HX_OK && n == ne && !memcmp(ids, exp, (size_t)n * sizeof *ids);
        if (ok) {
            pass++;
        } else {
            fail++;
            fprintf(stderr, "  %s MISMATCH input \"%.*s\"\n    expected:", name, (int)len, ip);
            for (int64_t k = 0; k < ne; k++) fprintf(stderr, " %d", exp[k]);
            fprintf(stderr, "\n    got:     ");
            for (int64_t k = 0; k < n; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n");
        }
        /* round trip through the streaming detokenizer (raw pieces) */
        if (st == HX_OK) {
            struct hx_detok *d;
            if (hx__detok_new(v, false, &d) == HX_OK) {
                char *acc = malloc(len * 4 + 64);
                size_t al = 0;
                for (int64_t k = 0; k < n; k++) {
                    const char *p;
                    size_t pl;
                    if (hx__detok_push(d, ids[k], &p, &pl) == HX_OK) memcpy(acc + al, p, pl), al += pl;
                }
                const char *p;
                size_t pl;
                hx__detok_flush(d, &p, &pl);
                memcpy(acc + al, p, pl), al += pl;
                const char *want = ip;
                size_t wl = len;
                bool spm = v->kind == HX_VOCAB_SPM && v->add_space_prefix;
                bool good = (spm && wl > 0) ? (al == wl + 1 && acc[0] == ' ' && !memcmp(acc + 1, want, wl))
                                : (al == wl && !memcmp(acc, want, wl));
                rt_n++;
                rt_ok += good;
                if (!good) fprintf(stderr, "  %s ROUND TRIP differs: \"%.*s\" -> \"%.*s\"\n", name,
                                   (int)wl, want, (int)al, acc);
                free(acc);
                hx__detok_free(d);
            }
        }
        ip = e + sl;
        op = nl + 1;
    }
    double dt = (hx__time_us() - t0) / 1000.0;
    fprintf(stderr, "  %-16s %d/%d vectors pass, %d/%d stream round trips, %.1f ms\n", name, pass,
            pass + fail, rt_ok, rt_n, dt);
    free(ids);
    free(inp);
    free(outf);
    hx__vocab_free(v);
    hx__gguf_close(g);
    fail += rt_n - rt_ok;
    g_total_fail += fail;
    return fail;
}

static const char *const k_vocabs[] = {
    "qwen2", "llama-bpe", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon", "mpt",
    "starcoder", "refact", "llama-spm", "phi-3",
};

TEST(vectors_all_vocabularies)
{
    int ran = 0, bad = 0, missing = 0;
    char missed[512] = "";
    for (size_t i = 0; i <= sizeof k_vocabs / sizeof k_vocabs[0]; i++) {
        const bool last = i == sizeof k_vocabs / sizeof k_vocabs[0];
        const char *name = last ? "stories260K" : k_vocabs[i];
        char rel[256];
        if (last) snprintf(rel, sizeof rel, "stories260K/stories260K.gguf");
        else snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
        int r = run_vectors(rel, name);
        if (r < 0) {
            /* every vocabulary is checked or the test says it was not: no silent drops */
            fprintf(stderr, "  %s: files missing under HX_DATA\n", name);
            size_t u = strlen(missed);
            snprintf(missed + u, sizeof missed - u, "%s%s", missing++ ? ", " : "", name);
            continue;
        }
        ran++;
        bad += r;
    }
    ASSERT_EQ(bad, 0);
    if (missing) SKIP("%d of %d vocabularies missing under HX_DATA (%s); %d checked", missing,
                      missing + ran, missed, ran);
}

TEST(stream_never_splits_utf8)
{
    struct hx_gguf *g;
    struct hx_vocab *v = load_vocab("vocab/ggml-vocab-qwen2.gguf", &g);
    if (!v) SKIP("qwen2 vocab missing");
    /* "é🦙" tokenizes into byte-level pieces; feed one token at a time */
    const char *s = "\xC3\xA9\xF0\x9F\xA6\x99 x";
    hx_token ids[64];
    int64_t n;
    ASSERT_OK(tokenize(v, s, strlen(s), false, false, ids, 64, &n));
    ASSERT_TRUE(n >= 2);
    struct hx_detok *d;
    ASSERT_OK(hx__detok_new(v, false, &d));
    char acc[64];
    size_t al = 0;
    for (int64_t k = 0; k < n; k++) {
        const char *p;
        size_t pl;
        ASSERT_OK(hx__detok_push(d, ids[k], &p, &pl));
        /* every emitted chunk is complete UTF-8 */
        for (size_t i = 0; i < pl;) {
            int c = hx__utf8_check((const unsigned char *)p + i, pl - i);
            ASSERT_TRUE(c > 0);
            i += (size_t)c;
        }
        memcpy(acc + al, p, pl);
        al += pl;
    }
    ASSERT_EQ(al, strlen(s));
    ASSERT_TRUE(!memcmp(acc, s, al));
    /* a token for the lone lead byte 0xF0 ("ð" in the byte alphabet) is held, then flushed */
    hx_token lead = hx__vocab_find(v, "\xC3\xB0", 2);
    ASSERT_TRUE(lead >= 0);
    const char *p;
    size_t pl;
    ASSERT_OK(hx__detok_push(d, lead, &p, &pl));
    ASSERT_EQ(pl, 0);
    ASSERT_OK(hx__detok_flush(d, &p, &pl));
    ASSERT_EQ(pl, 3);
    ASSERT_TRUE(!memcmp(p, "\xEF\xBF\xBD", 3));
    hx__detok_free(d);
    hx__vocab_free(v);
    hx__gguf_close(g);
}

TEST(spm_byte_tokens_stream_and_detok)
{
    struct hx_gguf *g;
    struct hx_vocab *v = load_vocab("stories260K/stories260K.gguf", &g);
    if (!v) SKIP("stories260K missing");
    /* a CJK char is not in the 512-token vocab: byte fallback to three <0xXX> tokens */
    const char *s = "a\xE4\xB8\xAD";
    hx_token ids[32];
    int64_t n;
    ASSERT_OK(tokenize(v, s, strlen(s), false, false, ids, 32, &n));
    ASSERT_TRUE(n >= 3);
    ASSERT_EQ(v->tok[ids[n - 1]].type, HX_TOK_BYTE);
    struct hx_detok *d;
    ASSERT_OK(hx__detok_new(v, false, &d));
    const char *p;
    size_t pl;
    int64_t emitted_before_last = 0;
    for (int64_t k = 0; k < n; k++) {
        ASSERT_OK(hx__detok_push(d, ids[k], &p, &pl));
        if (k >= n - 3 && k < n - 1) ASSERT_EQ(pl, 0); /* partial sequence held */
        if (k == n - 1) ASSERT_EQ(pl, 3);
        if (k < n - 3) emitted_before_last += (int64_t)pl;
    }
    ASSERT_EQ(emitted_before_last, 2); /* " a" */
    hx__detok_free(d);
    /* whole-string: leading space of the first piece removed, BOS renders nothing */
    hx_token with_bos[33];
    with_bos[0] = v->bos;
    memcpy(with_bos + 1, ids, (size_t)n * sizeof *ids);
    char *out;
    size_t ol;
    ASSERT_OK(hx__vocab_detokenize(v, with_bos, n + 1, false, &out, &ol));
    ASSERT_STREQ(out, s);
    hx_free(out);
    ASSERT_OK(hx__vocab_detokenize(v, with_bos, n + 1, true, &out, &ol));
    ASSERT_TRUE(!strncmp(out, "<s> a", 5));
    hx_free(out);
    /* add_special: BOS first */
    ASSERT_OK(tokenize(v, "a", 1, true, false, ids, 32, &n));
    ASSERT_EQ(ids[0], v->bos);
    hx__vocab_free(v);
    hx__gguf_close(g);
}

TEST(special_tokens_partition)
{
    struct hx_gguf *g;
    struct hx_vocab *v = load_vocab("vocab/ggml-vocab-qwen2.gguf", &g);
    if (!v) SKIP("qwen2 vocab missing");
    hx_token im_start = hx__vocab_find(v, "<|im_start|>", 12);
    hx_token eot = hx__vocab_find(v, "<|endoftext|>", 13);
    ASSERT_TRUE(im_start >= 0 && eot >= 0);
    const char *s = "<|im_start|>user\nhi<|endoftext|>";
    hx_token ids[64];
    int64_t n;
    ASSERT_OK(tokenize(v, s, strlen(s), false, true, ids, 64, &n));
    ASSERT_EQ(ids[0], im_start);
    ASSERT_EQ(ids[n - 1], eot);
    ASSERT_TRUE(hx__vocab_is_eog(v, eot));
    /* parse_special = false: control text is tokenized as plain text */
    int64_t n2;
    ASSERT_OK(tokenize(v, s, strlen(s), false, false, ids, 64, &n2));
    ASSERT_TRUE(n2 > n);
    ASSERT_TRUE(ids[0] != im_start);
    /* control tokens render only with special */
    char buf[64];
    size_t pl;
    ASSERT_OK(hx__vocab_piece(v, im_start, false, buf, sizeof buf, &pl));
    ASSERT_EQ(pl, 0);
    ASSERT_OK(hx__vocab_piece(v, im_start, true, buf, sizeof buf, &pl));
    ASSERT_EQ(pl, 12);
    /* the count is reported even when cap is too small */
    ASSERT_OK(tokenize(v, "hello world", 11, false, false, ids, 1, &n));
    ASSERT_EQ(n, 2);
    ASSERT_TRUE(hx__vocab_piece(v, (hx_token)v->n_tokens, false, buf, sizeof buf, &pl) == HX_E_INVAL);
    hx__vocab_free(v);
    hx__gguf_close(g);
}

TEST(llama2_tiny_random_loads)
{
    struct hx_gguf *g;
    struct hx_vocab *v = load_vocab("misc/llama-2-tiny-random.gguf", &g);
    if (!v) SKIP("llama-2-tiny-random missing");
    ASSERT_EQ(hx__vocab_n_tokens(v), 32000);
    ASSERT_EQ(hx__vocab_bos(v), 1);
    hx_token ids[16];
    int64_t n;
    ASSERT_OK(tokenize(v, "Hello world", 11, true, false, ids, 16, &n));
    ASSERT_EQ(n, 3); /* <s> ▁Hello ▁world */
    ASSERT_EQ(ids[1], 15043);
    ASSERT_EQ(ids[2], 3186);
    hx__vocab_free(v);
    hx__gguf_close(g);
}

/* A minimal GGUF v3 image with string / string-array keys (no tensors). */
struct mini_gguf {
    unsigned char b[4096];
    size_t n;
    uint64_t n_kv;
};

static void mg_bytes(struct mini_gguf *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void mg_u32(struct mini_gguf *m, uint32_t x) { mg_bytes(m, &x, 4); }
static void mg_u64(struct mini_gguf *m, uint64_t x) { mg_bytes(m, &x, 8); }
static void mg_str(struct mini_gguf *m, const char *s)
{
    mg_u64(m, strlen(s));
    mg_bytes(m, s, strlen(s));
}
static void mg_begin(struct mini_gguf *m)
{
    m->n = 0;
    m->n_kv = 0;
    mg_bytes(m, "GGUF", 4);
    mg_u32(m, 3);
    mg_u64(m, 0);
    mg_u64(m, 0); /* n_kv, patched */
}
static void mg_kv_str(struct mini_gguf *m, const char *k, const char *v)
{
    mg_str(m, k);
    mg_u32(m, 8);
    mg_str(m, v);
    m->n_kv++;
    memcpy(m->b + 16, &m->n_kv, 8);
}
static void mg_kv_strs(struct mini_gguf *m, const char *k, const char *const *v, int n)
{
    mg_str(m, k);
    mg_u32(m, 9);
    mg_u32(m, 8);
    mg_u64(m, (uint64_t)n);
    for (int i = 0; i < n; i++) mg_str(m, v[i]);
    m->n_kv++;
    memcpy(m->b + 16, &m->n_kv, 8);
}

static int mg_load(struct mini_gguf *m, struct hx_vocab **v)
{
    struct hx_gguf *g;
    *v = NULL;
    int st = hx__gguf_open_memory(m->b, m->n, &g);
    if (st) return st;
    st = hx__vocab_load(g, v);
    hx__gguf_close(g); /* the vocab keeps copies: it must outlive the gguf */
    return st;
}

TEST(load_errors)
{
    static struct mini_gguf m;
    const char *toks[] = {"a", "b", "ab"};
    struct hx_vocab *v;
    mg_begin(&m);
    mg_kv_str(&m, "tokenizer.ggml.model", "t5");
    mg_kv_strs(&m, "tokenizer.ggml.tokens", toks, 3);
    ASSERT_EQ(mg_load(&m, &v), HX_E_FORMAT);
    ASSERT_TRUE(strstr(hx_last_error(), "gpt2") != NULL);
    mg_begin(&m);
    mg_kv_str(&m, "tokenizer.ggml.model", "gpt2");
    mg_kv_str(&m, "tokenizer.ggml.pre", "nonesuch");
    mg_kv_strs(&m, "tokenizer.ggml.tokens", toks, 3);
    const char *merges[] = {"a b"};
    mg_kv_strs(&m, "tokenizer.ggml.merges", merges, 1);
    ASSERT_EQ(mg_load(&m, &v), HX_E_FORMAT);
    ASSERT_TRUE(strstr(hx_last_error(), "qwen2") != NULL);
    mg_begin(&m);
    mg_kv_str(&m, "tokenizer.ggml.model", "gpt2");
    mg_kv_strs(&m, "tokenizer.ggml.tokens", toks, 3);
    ASSERT_EQ(mg_load(&m, &v), HX_E_FORMAT); /* no merges */
    ASSERT_TRUE(strstr(hx_last_error(), "merges") != NULL);
    mg_begin(&m);
    mg_kv_str(&m, "tokenizer.ggml.model", "gpt2");
    mg_kv_str(&m, "tokenizer.ggml.pre", "gpt-2");
    mg_kv_strs(&m, "tokenizer.ggml.tokens", toks, 3);
    mg_kv_strs(&m, "tokenizer.ggml.merges", merges, 1);
    ASSERT_OK(mg_load(&m, &v));
    hx_token ids[4];
    int64_t n;
    ASSERT_OK(hx__vocab_tokenize(v, "ab", 2, false, false, ids, 4, &n));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(ids[0], 2);
    hx__vocab_free(v);
    mg_begin(&m);
    mg_kv_str(&m, "tokenizer.ggml.model", "llama");
    ASSERT_EQ(mg_load(&m, &v), HX_E_FORMAT); /* no tokens */
    ASSERT_TRUE(strstr(hx_last_error(), "tokenizer.ggml.tokens") != NULL);
}

TEST(regex_engine)
{
    struct hx_regex *re;
    ASSERT_OK(hx__regex_compile("\\s+(?!\\S)|a{2,3}|(?i:ab)", &re));
    uint32_t t1[] = {' ', ' ', 'x'};
    ASSERT_EQ(hx__regex_match_at(re, t1, 3, 0), 1);
    uint32_t t2[] = {'a', 'a', 'a', 'a'};
    ASSERT_EQ(hx__regex_match_at(re, t2, 4, 0), 3);
    uint32_t t3[] = {'A', 'B'};
    ASSERT_EQ(hx__regex_match_at(re, t3, 2, 0), 2);
    uint32_t t4[] = {'x'};
    ASSERT_EQ(hx__regex_match_at(re, t4, 1, 0), -1);
    hx__regex_free(re);
    ASSERT_TRUE(hx__regex_compile("(a*)*", &re) != HX_OK);
    ASSERT_TRUE(hx__regex_compile("[abc", &re) != HX_OK);
}

TEST_MAIN()
