/*
 * test-gguf-split.c — models split over several files as llama.cpp's gguf-split writes them
 * (core/gguf-split.c, docs/weights.md "Split models"). The shared Qwen3 micro model is
 * written here as 3 parts (the first with every metadata key and some tensors, the others
 * with only the split.* keys and tensors); loaded from its first part it gives the unsplit
 * model's logits bit for bit on ref and cpu, mapped and read into memory. Broken sets of
 * parts are refused with HX_E_FORMAT (a missing part HX_E_IO) and a message naming the file
 * and the rule: a later part opened first, a missing part, a part numbered wrongly or from a
 * model in another number of parts, a tensor in two parts, a wrong split.tensors.count, a
 * first part renamed, split.count without split.no.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "hx.h"

#define HX_T_MODEL "qwen3/qwen3-micro-q8_0.gguf"

static char hx_t_dir[512];

struct hx_t_fill {
    const struct hx_gguf *g;
    uint64_t first, n; /* the source's tensors first..first+n-1 are the part's */
    uint64_t dup;      /* the source tensor a part's tensor n (a duplicate) copies */
};

static int hx_t_fill(void *ud, uint64_t i, void *dst, size_t nbytes)
{
    const struct hx_t_fill *f = ud;
    memcpy(dst, f->g->tensors[i < f->n ? f->first + i : f->dup].data, nbytes);
    return HX_OK;
}

/* How to break the set of parts (HX_T_GOOD: gguf-split's layout). */
enum hx_t_break {
    HX_T_GOOD,
    HX_T_WRONG_NO,      /* part 2 says split.no 2 */
    HX_T_WRONG_COUNT,   /* part 3 says split.count 4 */
    HX_T_DUP_TENSOR,    /* part 3 repeats part 2's first tensor (split.tensors.count counts it) */
    HX_T_TOTAL,         /* split.tensors.count one more than the parts hold */
    HX_T_NO_SPLIT_NO,   /* the first part has split.count but not split.no */
};

/* The model at src as n parts named PREFIX-0000k-of-0000n.gguf in the test directory, tensors
 * dealt out in order (the first part takes fewer); returns the first part's path. */
static const char *hx_t_split(const char *src, const char *prefix, int n, enum hx_t_break brk)
{
    static char first[700];
    struct hx_gguf *g;
    if (hx__gguf_open(src, false, &g)) return NULL;
    uint64_t nt = g->n_tensors, per = (nt + (uint64_t)n - 1) / (uint64_t)n, at = 0;
    int st = HX_OK;
    for (int k = 0; k < n && !st; k++) {
        uint64_t take = k == n - 1 ? nt - at : k == 0 ? per / 2 : per;
        struct hx_gguf_writer *w;
        if ((st = hx__gguf_writer_new(&w))) break;
        for (uint64_t i = 0; k == 0 && i < g->n_kv && !st; i++) st = hx__gguf_copy_kv(w, g, i);
        if (!st && !(brk == HX_T_NO_SPLIT_NO && k == 0))
            st = hx__gguf_set_u16(w, "split.no", (uint16_t)(brk == HX_T_WRONG_NO && k == 1 ? 2 : k));
        if (!st) st = hx__gguf_set_u16(w, "split.count", (uint16_t)(brk == HX_T_WRONG_COUNT && k == 2 ? n + 1 : n));
        if (!st) st = hx__gguf_set_i32(w, "split.tensors.count", (int32_t)(nt + (brk == HX_T_TOTAL || brk == HX_T_DUP_TENSOR)));
        uint64_t first_t = at;
        for (uint64_t i = 0; i < take && !st; i++, at++) {
            const struct hx_gguf_tensor *t = &g->tensors[at];
            st = hx__gguf_add_tensor(w, t->name, t->ggml_type, t->n_dims, t->ne, NULL);
        }
        struct hx_t_fill f = {.g = g, .first = first_t, .n = take, .dup = per / 2};
        if (!st && brk == HX_T_DUP_TENSOR && k == n - 1) { /* a copy of part 2's first tensor */
            const struct hx_gguf_tensor *t = &g->tensors[per / 2];
            st = hx__gguf_add_tensor(w, t->name, t->ggml_type, t->n_dims, t->ne, NULL);
        }
        char path[700];
        snprintf(path, sizeof path, "%s/%s-%05d-of-%05d.gguf", hx_t_dir, prefix, k + 1, n);
        if (k == 0) snprintf(first, sizeof first, "%s", path);
        if (!st) st = hx__gguf_write(w, path, hx_t_fill, NULL, &f);
        hx__gguf_writer_free(w);
    }
    hx__gguf_close(g);
    return st ? NULL : first;
}

/* Greedy-relevant numbers: the logits of every row of a short prompt, one decode call. */
static float *hx_t_logits(const char *path, const char *backend, bool no_mmap, int64_t *nv)
{
    struct hx_model *m;
    struct hx_model_params mp = {.struct_size = sizeof mp, .no_mmap = no_mmap};
    if (hx_model_load(path, &mp, &m)) {
        fprintf(stderr, "  load %s: %s\n", path, hx_last_error());
        return NULL;
    }
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = backend, .n_ctx = 64, .n_threads = 2};
    struct hx_context *c;
    float *out = NULL;
    if (hx_context_new(m, &cp, &c) == HX_OK) {
        int32_t tok[6] = {1, 42, 7, 300, 1000, 5}, pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
        int8_t lg[6] = {1, 1, 1, 1, 1, 1};
        struct hx_batch b = {.n_rows = 6, .token = tok, .pos = pos, .seq = seq, .logits = lg};
        *nv = hx_vocab_n_tokens(m);
        if (hx_decode(c, &b) == HX_OK && (out = malloc((size_t)(6 * *nv) * sizeof *out)))
            for (int r = 0; r < 6; r++) memcpy(out + r * *nv, hx_get_logits(c, r), (size_t)*nv * sizeof *out);
        hx_context_free(c);
    }
    hx_model_free(m);
    return out;
}

/* The shared model is there (else a skip, a failure in CI) and the scratch directory made. */
static bool hx_t_setup(void)
{
    if (access(hx_test_data(HX_T_MODEL), R_OK) != 0) return false;
    return hx_t_dir[0] || hx_test_mkdtemp(hx_t_dir, sizeof hx_t_dir, "split");
}

static void hx_t_cleanup(void)
{
    if (!hx_t_dir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hx_t_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", hx_t_dir);
}

TEST(split_model_loads_bit_exact)
{
    if (!hx_t_setup()) SKIP("%s or a scratch directory not available", hx_test_data(HX_T_MODEL));
    const char *src = hx_test_data(HX_T_MODEL);
    const char *first = hx_t_split(src, "good", 3, HX_T_GOOD);
    ASSERT_TRUE(first != NULL);
    struct hx_gguf *g, *whole;
    ASSERT_OK(hx__gguf_open(first, false, &g));
    ASSERT_OK(hx__gguf_open(src, false, &whole));
    ASSERT_EQ(g->n_parts, 3u);
    ASSERT_EQ(g->n_tensors, whole->n_tensors);
    for (uint64_t i = 0; i < whole->n_tensors; i++) {
        const struct hx_gguf_tensor *t = hx__gguf_find_tensor(g, whole->tensors[i].name);
        ASSERT_TRUE(t != NULL);
        ASSERT_EQ(t->nbytes, whole->tensors[i].nbytes);
        ASSERT_TRUE(memcmp(t->data, whole->tensors[i].data, t->nbytes) == 0);
    }
    ASSERT_TRUE(g->tensors[g->n_tensors - 1].file == 2);
    hx__gguf_close(g);
    /* split.count 1 (gguf-split with one part), as llama.cpp: one file */
    const char *one = hx_t_split(src, "one", 1, HX_T_GOOD);
    ASSERT_TRUE(one != NULL);
    ASSERT_OK(hx__gguf_open(one, false, &g));
    ASSERT_EQ(g->n_parts, 1u);
    ASSERT_EQ(g->n_tensors, whole->n_tensors);
    hx__gguf_close(whole);
    hx__gguf_close(g);
    const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++)
        for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
            int64_t nv = 0, nv2 = 0;
            float *a = hx_t_logits(src, backends[b], false, &nv);
            float *s = hx_t_logits(first, backends[b], no_mmap, &nv2);
            ASSERT_TRUE(a && s && nv == nv2 && nv > 0);
            ASSERT_TRUE(memcmp(a, s, (size_t)(6 * nv) * sizeof *a) == 0);
            free(a);
            free(s);
        }
}

static void hx_t_refused(const char *path, int want, const char *needle)
{
    struct hx_model *m = (struct hx_model *)1;
    int st = hx_model_load(path, NULL, &m);
    if (st != want || m != NULL || !strstr(hx_last_error(), needle))
        fprintf(stderr, "  %s: status %d (want %d), message: %s (want '%s' in it)\n", path, st,
                want, hx_last_error(), needle);
    ASSERT_EQ(st, want);
    ASSERT_TRUE(m == NULL);
    ASSERT_TRUE(strstr(hx_last_error(), needle) != NULL);
}

TEST(broken_sets_of_parts_are_refused)
{
    if (!hx_t_setup()) SKIP("%s or a scratch directory not available", hx_test_data(HX_T_MODEL));
    const char *src = hx_test_data(HX_T_MODEL);
    char path[800], other[800];
    ASSERT_TRUE(hx_t_split(src, "later", 3, HX_T_GOOD) != NULL);
    snprintf(path, sizeof path, "%s/later-00002-of-00003.gguf", hx_t_dir);
    hx_t_refused(path, HX_E_FORMAT, "later-00001-of-00003.gguf");
    snprintf(path, sizeof path, "%s/later-00003-of-00003.gguf", hx_t_dir);
    ASSERT_EQ(unlink(path), 0);
    snprintf(path, sizeof path, "%s/later-00001-of-00003.gguf", hx_t_dir);
    hx_t_refused(path, HX_E_IO, "part 3 of 3");

    ASSERT_TRUE(hx_t_split(src, "renamed", 2, HX_T_GOOD) != NULL);
    snprintf(path, sizeof path, "%s/renamed-00001-of-00002.gguf", hx_t_dir);
    snprintf(other, sizeof other, "%s/renamed.gguf", hx_t_dir);
    ASSERT_EQ(rename(path, other), 0);
    hx_t_refused(other, HX_E_FORMAT, "-00001-of-00002.gguf");

    const struct {
        enum hx_t_break brk;
        const char *prefix, *needle;
    } cases[] = {
        {HX_T_WRONG_NO, "wrongno", "split.no 2"},
        {HX_T_WRONG_COUNT, "wrongcount", "split.count 4"},
        {HX_T_DUP_TENSOR, "dup", "earlier part"},
        {HX_T_TOTAL, "total", "split.tensors.count"},
        {HX_T_NO_SPLIT_NO, "nosplitno", "without split.no"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *first = hx_t_split(src, cases[i].prefix, 3, cases[i].brk);
        ASSERT_TRUE(first != NULL);
        hx_t_refused(first, HX_E_FORMAT, cases[i].needle);
    }
}

/* The engine's commands take the first part like any model file: inspect lists the parts,
 * run generates, quantize writes one file without split.* keys whose tensors are the
 * unsplit model's (Q8_0 to Q8_0 keeps the bytes). */
TEST(engine_commands_take_the_first_part)
{
    if (!hx_t_setup()) SKIP("%s or a scratch directory not available", hx_test_data(HX_T_MODEL));
    const char *engine = getenv("HX_ENGINE");
    if (!engine || access(engine, X_OK) != 0) SKIP("no engine program (HX_ENGINE)");
    const char *src = hx_test_data(HX_T_MODEL);
    const char *first = hx_t_split(src, "cmd", 3, HX_T_GOOD);
    ASSERT_TRUE(first != NULL);
    char cmd[3000], out[800];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' | grep -q 'split model: 3 files'", engine, first);
    ASSERT_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hello -n 3 > /dev/null 2>&1", engine, first);
    ASSERT_EQ(system(cmd), 0);
    snprintf(out, sizeof out, "%s/merged.gguf", hx_t_dir);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' Q8_0 > /dev/null 2>&1", engine, first, out);
    ASSERT_EQ(system(cmd), 0);
    struct hx_gguf *g, *whole;
    ASSERT_OK(hx__gguf_open(out, false, &g));
    ASSERT_OK(hx__gguf_open(src, false, &whole));
    ASSERT_EQ(g->n_parts, 1u);
    ASSERT_TRUE(hx__gguf_find_key(g, "split.count") < 0 && hx__gguf_find_key(g, "split.no") < 0);
    ASSERT_EQ(g->n_tensors, whole->n_tensors);
    for (uint64_t i = 0; i < whole->n_tensors; i++) {
        const struct hx_gguf_tensor *t = hx__gguf_find_tensor(g, whole->tensors[i].name);
        ASSERT_TRUE(t != NULL && t->nbytes == whole->tensors[i].nbytes);
        ASSERT_TRUE(memcmp(t->data, whole->tensors[i].data, t->nbytes) == 0);
    }
    hx__gguf_close(whole);
    hx__gguf_close(g);
    /* a later part on the command line: the error names the first, exit status 1 */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s/cmd-00002-of-00003.gguf' -p hi -n 1 > %s/err.txt 2>&1",
             engine, hx_t_dir, hx_t_dir);
    int rc = system(cmd);
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    snprintf(cmd, sizeof cmd, "grep -q 'open the first part.*cmd-00001-of-00003.gguf' %s/err.txt", hx_t_dir);
    ASSERT_EQ(system(cmd), 0);
}

int main(int argc, char **argv)
{
    atexit(hx_t_cleanup);
    return hx_test_main(argc, argv);
}
