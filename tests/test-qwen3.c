/*
 * test-qwen3.c — the Qwen3-architecture test models of ../shared/data/qwen3 (QK norm, GQA,
 * NEOX RoPE, tied embeddings; Q8_0, F16, TQ2_0 weights) against llama.cpp's reference
 * outputs: our tokenization of the prompt equals llama.cpp's prompt_ids; then, feeding the
 * reference tokens (teacher forcing), each step's logits of llama.cpp's top-10 tokens agree
 * within a tolerance, and the greedy id matches wherever the reference margin exceeds twice
 * that error (data/README.md: near-ties may flip with another summation order).
 * The ternary model's matrices rewritten as I2_S (bitnet.cpp's type: the same codes, the one
 * scale of each tensor in its tail) must give the TQ2_0 model's logits bit for bit on ref and
 * cpu; rewritten as Q2_0 (ggml's) they must meet llama.cpp's reference as TQ2_0 does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "hx-dtype.h"
#include "hx.h"

struct hx_ref_step {
    int id;
    double margin;
    int top_id[10];
    double top_logit[10];
};

struct hx_ref {
    char prompt[256];
    int prompt_ids[64], n_prompt;
    struct hx_ref_step steps[32];
    int n_steps;
};

static char *hx_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return s;
}

/* A tiny reader for the reference files' fixed shape (not a general JSON parser). */
static int hx_parse_ref(const char *path, struct hx_ref *r)
{
    char *s = hx_slurp(path);
    if (!s) return -1;
    memset(r, 0, sizeof *r);
    char *p = strstr(s, "\"prompt\": \"");
    if (p) sscanf(p + 11, "%255[^\"]", r->prompt);
    p = strstr(s, "\"prompt_ids\": [");
    for (p = p ? p + 15 : NULL; p && *p != ']' && r->n_prompt < 64;) {
        r->prompt_ids[r->n_prompt++] = (int)strtol(p, &p, 10);
        while (*p == ',' || *p == ' ') p++;
    }
    for (char *q = strstr(s, "{\"id\": "); q && r->n_steps < 32; q = strstr(q + 1, "{\"id\": ")) {
        struct hx_ref_step *st = &r->steps[r->n_steps++];
        st->id = atoi(q + 7);
        char *m = strstr(q, "\"margin\": ");
        st->margin = m ? atof(m + 10) : 0;
        char *t = strstr(q, "\"top\": [");
        if (t) t += 7; /* the outer '[' */
        for (int k = 0; t && k < 10; k++) {
            t = strchr(t + 1, '[');
            if (!t) break;
            sscanf(t + 1, "%d, %lf", &st->top_id[k], &st->top_logit[k]);
        }
    }
    free(s);
    return 0;
}

static int hx_argmax(const float *l, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return (int)b;
}

/* The model at path (NULL: qwen3/name.gguf) against name's reference; when all_logits is not
 * NULL, every step's logits (n_steps + 1 rows of n_vocab) are copied there. */
static void hx_t_model_at(const char *name, const char *path_or_null, const char *backend,
                          double tol, float **all_logits)
{
    char path[1024], refp[256];
    snprintf(refp, sizeof refp, "qwen3/%s.gguf", name);
    snprintf(path, sizeof path, "%s", path_or_null ? path_or_null : hx_test_data(refp));
    snprintf(refp, sizeof refp, "qwen3/%s.p1.json", name);
    struct hx_ref ref;
    if (hx_parse_ref(hx_test_data(refp), &ref) != 0) SKIP("%s not found under HX_DATA", refp);
    struct hx_model *m;
    ASSERT_OK(hx_model_load(path, NULL, &m));
    hx_token ids[64];
    int64_t n = 0;
    ASSERT_OK(hx_tokenize(m, ref.prompt, strlen(ref.prompt), true, true, ids, 64, &n));
    ASSERT_EQ(n, ref.n_prompt);
    for (int i = 0; i < n; i++) ASSERT_EQ(ids[i], ref.prompt_ids[i]);
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = backend, .n_threads = 2, .n_ctx = 128};
    struct hx_context *c;
    ASSERT_OK(hx_context_new(m, &cp, &c));
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(m, &mi);
    int32_t pos[64], seq[64] = {0};
    int8_t lg[64] = {0};
    for (int i = 0; i < n; i++) pos[i] = i;
    lg[n - 1] = 1;
    struct hx_batch b = {.n_rows = n, .token = ids, .pos = pos, .seq = seq, .logits = lg};
    ASSERT_OK(hx_decode(c, &b));
    const float *l = hx_get_logits(c, n - 1);
    double max_err = 0;
    int compared = 0, mismatched = 0;
    if (all_logits) *all_logits = malloc(sizeof(float) * (size_t)(mi.n_vocab * (ref.n_steps + 1)));
    for (int s = 0; s <= ref.n_steps; s++) {
        if (all_logits) memcpy(*all_logits + s * mi.n_vocab, l, sizeof(float) * (size_t)mi.n_vocab);
        if (s == ref.n_steps) break;
        for (int k = 0; k < 10; k++) max_err = fmax(max_err, fabs(l[ref.steps[s].top_id[k]] - ref.steps[s].top_logit[k]));
        if (ref.steps[s].margin > 2 * tol) {
            compared++;
            if (hx_argmax(l, mi.n_vocab) != ref.steps[s].id) mismatched++;
        }
        int32_t p = (int32_t)(n + s), sq = 0;
        int8_t one = 1;
        hx_token t = ref.steps[s].id;
        struct hx_batch d = {.n_rows = 1, .token = &t, .pos = &p, .seq = &sq, .logits = &one};
        ASSERT_OK(hx_decode(c, &d));
        l = hx_get_logits(c, 0);
    }
    fprintf(stderr, "  %-20s %-4s max |logit - llama.cpp| over top-10 x %d steps: %.4g; greedy ids: %d/%d match\n",
            path_or_null ? strrchr(path, '/') + 1 : name, backend, ref.n_steps, max_err,
            compared - mismatched, compared);
    ASSERT_TRUE(max_err <= tol);
    ASSERT_EQ(mismatched, 0);
    hx_context_free(c);
    hx_model_free(m);
}

static void hx_t_model(const char *name, const char *backend, double tol)
{
    hx_t_model_at(name, NULL, backend, tol, NULL);
}

/* ---- the ternary model in bitnet.cpp's I2_S and ggml's Q2_0 --------------------------------- */

static char hx_t_dir[512];

static void hx_t_cleanup(void)
{
    const char *files[] = {"tern-i2_s.gguf", "tern-q2_0.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", hx_t_dir, files[i]);
        unlink(p);
    }
    rmdir(hx_t_dir);
}

struct hx_t_conv {
    struct hx_gguf *g;
    enum hx_dtype to;
};

/* Tensor i: TQ2_0 matrices dequantized and written as `to` (I2_S through hx_quantize_tensor,
 * its tail the tensor's max |w|: each has one d here), everything else copied. */
static int hx_t_conv_fill(void *ud, uint64_t i, void *dst, size_t nbytes)
{
    const struct hx_t_conv *cv = ud;
    const struct hx_gguf_tensor *t = &cv->g->tensors[i];
    if (t->ggml_type != 35) {
        memcpy(dst, t->data, nbytes);
        return HX_OK;
    }
    const int64_t k = t->ne[0], n = t->ne[1];
    float *f = malloc(sizeof(float) * (size_t)(n * k));
    int st = f ? HX_OK : HX_E_NOMEM;
    for (int64_t r = 0; r < n && !st; r++)
        st = hx_dequantize_row(HX_DTYPE_TQ2_0, (const uint8_t *)t->data + (size_t)r * hx_dtype_row_bytes(HX_DTYPE_TQ2_0, k),
                               f + r * k, k);
    if (!st && hx_dtype_tensor_bytes(cv->to, n, k) != nbytes) st = HX_E_INTERNAL;
    if (!st) st = hx_quantize_tensor(cv->to, f, dst, n, k);
    free(f);
    return st;
}

/* qwen3-tern-tq2_0.gguf with its TQ2_0 matrices as `to`, in the test's temporary folder. */
static const char *hx_t_convert(enum hx_dtype to, const char *file)
{
    static char out[2][600];
    char *o = out[to == HX_DTYPE_I2_S];
    if (!hx_t_dir[0]) {
        if (!hx_test_mkdtemp(hx_t_dir, sizeof hx_t_dir, "qwen3")) return NULL;
        atexit(hx_t_cleanup);
    }
    snprintf(o, sizeof out[0], "%s/%s", hx_t_dir, file);
    struct hx_t_conv cv = {.to = to};
    struct hx_gguf_writer *w = NULL;
    int st = hx__gguf_open(hx_test_data("qwen3/qwen3-tern-tq2_0.gguf"), false, &cv.g);
    if (st) return NULL;
    st = hx__gguf_writer_new(&w);
    for (uint64_t i = 0; !st && i < cv.g->n_kv; i++) st = hx__gguf_copy_kv(w, cv.g, i);
    for (uint64_t i = 0; !st && i < cv.g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &cv.g->tensors[i];
        st = hx__gguf_add_tensor(w, t->name, t->ggml_type == 35 ? hx_dtype_to_ggml(to) : t->ggml_type,
                                 t->n_dims, t->ne, NULL);
    }
    if (!st) st = hx__gguf_write(w, o, hx_t_conv_fill, NULL, &cv);
    if (st) fprintf(stderr, "  converting to %s: %s\n", hx_dtype_name(to), hx_last_error());
    hx__gguf_writer_free(w);
    hx__gguf_close(cv.g);
    return st ? NULL : o;
}

static void hx_t_i2s_bits(const char *backend)
{
    if (access(hx_test_data("qwen3/qwen3-tern-tq2_0.gguf"), R_OK)) SKIP("qwen3-tern-tq2_0.gguf not found under HX_DATA");
    const char *p = hx_t_convert(HX_DTYPE_I2_S, "tern-i2_s.gguf");
    ASSERT_TRUE(p != NULL);
    float *a = NULL, *b = NULL;
    hx_t_model_at("qwen3-tern-tq2_0", NULL, backend, 0.15, &a);
    hx_t_model_at("qwen3-tern-tq2_0", p, backend, 0.15, &b);
    ASSERT_TRUE(a && b);
    const size_t n = 512 * 33; /* 512-token vocabulary, the prompt's logits and 32 steps' */
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(a + i, b + i, sizeof(float)) != 0;
    fprintf(stderr, "  I2_S vs TQ2_0 on %s: %zu of %zu logits differ\n", backend, diff, n);
    free(a), free(b);
    ASSERT_EQ(diff, 0);
}

TEST(tern_i2_s_equals_tq2_0_ref) { hx_t_i2s_bits("ref"); }
TEST(tern_i2_s_equals_tq2_0_cpu) { hx_t_i2s_bits("cpu"); }

static void hx_t_q2_0(const char *backend)
{
    if (access(hx_test_data("qwen3/qwen3-tern-tq2_0.gguf"), R_OK)) SKIP("qwen3-tern-tq2_0.gguf not found under HX_DATA");
    const char *p = hx_t_convert(HX_DTYPE_Q2_0, "tern-q2_0.gguf");
    ASSERT_TRUE(p != NULL);
    hx_t_model_at("qwen3-tern-tq2_0", p, backend, 0.15, NULL);
}

TEST(tern_q2_0_ref) { hx_t_q2_0("ref"); }
TEST(tern_q2_0_cpu) { hx_t_q2_0("cpu"); }

/* Tolerances: llama.cpp quantizes activations to 8 bits for Q8_0/TQ2_0 weights (Q8_0/Q8_K)
 * and computes F16 weights in F16; ref computes in f32/f64, cpu with its own int8 blocks.
 * Measured (test output): F16 models 1.7e-3 / 3.3e-3 -> bound 0.02. Q8_0: 0.023 and TQ2_0:
 * 0.047 (ref) / 0.064 (cpu) -> bounds 0.06 and 0.15: llama.cpp rounds the activations of
 * these types to 8 bits (Q8_0 / Q8_K) while ref keeps f32 — the same ternary weights stored
 * as F16 (qwen3-tern-f16) agree to 3.3e-3, so the gap is llama.cpp's activation rounding. */
TEST(micro_q8_0_ref) { hx_t_model("qwen3-micro-q8_0", "ref", 0.06); }
TEST(micro_q8_0_cpu) { hx_t_model("qwen3-micro-q8_0", "cpu", 0.06); }
TEST(micro_f16_ref) { hx_t_model("qwen3-micro-f16", "ref", 0.02); }
TEST(micro_f16_cpu) { hx_t_model("qwen3-micro-f16", "cpu", 0.02); }
TEST(tern_tq2_0_ref) { hx_t_model("qwen3-tern-tq2_0", "ref", 0.15); }
TEST(tern_tq2_0_cpu) { hx_t_model("qwen3-tern-tq2_0", "cpu", 0.15); }
TEST(tern_f16_ref) { hx_t_model("qwen3-tern-f16", "ref", 0.02); }
TEST(tern_f16_cpu) { hx_t_model("qwen3-tern-f16", "cpu", 0.02); }

TEST_MAIN()
