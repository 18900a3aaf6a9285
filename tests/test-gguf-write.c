/*
 * test-gguf-write.c — the GGUF writer against the reader: every metadata type (string
 * arrays, nested arrays, odd floats), tensors of every weight type and alignment, bit-exact
 * round trips; every .gguf of the shared data copied key by key and tensor by tensor must
 * read back identical; failures must leave an existing file untouched and no temporary.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "gguf.h"
#include "harness.h"
#include "hx-impl.h"

static char tmpdir[512];

/* Remove what the tests wrote (at exit, so a single test run cleans up too). */
static void cleanup_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[1100];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(tmpdir);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][1024];
    static int k;
    if (!tmpdir[0]) {
        if (!hx_test_mkdtemp(tmpdir, sizeof tmpdir, "gguf-write")) {
            fprintf(stderr, "mkdtemp failed: %s\n", strerror(errno));
            exit(1);
        }
        atexit(cleanup_tmpdir);
    }
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

/* Entries in tmpdir whose name contains ".tmp." (leftover temporaries). */
static int count_temporaries(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t f32_bits(double d)
{
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static bool values_equal(const struct hx_gguf_value *a, const struct hx_gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case HX_GGUF_UINT8: case HX_GGUF_UINT16: case HX_GGUF_UINT32: case HX_GGUF_UINT64: return a->v.u64 == b->v.u64;
    case HX_GGUF_INT8: case HX_GGUF_INT16: case HX_GGUF_INT32: case HX_GGUF_INT64: return a->v.i64 == b->v.i64;
    case HX_GGUF_FLOAT32: return f32_bits(a->v.f64) == f32_bits(b->v.f64);
    case HX_GGUF_FLOAT64: return f64_bits(a->v.f64) == f64_bits(b->v.f64);
    case HX_GGUF_BOOL: return a->v.b == b->v.b;
    case HX_GGUF_STRING: return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case HX_GGUF_ARRAY:
        return a->v.arr.elem_type == b->v.arr.elem_type && a->v.arr.count == b->v.arr.count &&
               a->v.arr.nbytes == b->v.arr.nbytes && !memcmp(a->v.arr.data, b->v.arr.data, a->v.arr.nbytes);
    default: return false;
    }
}

/* Whole-file comparison of two readers: keys in order, values, tensor table and data. */
static int compare_gguf(const struct hx_gguf *a, const struct hx_gguf *b, char *why, size_t n)
{
    if (a->n_kv != b->n_kv) return snprintf(why, n, "n_kv %llu vs %llu", (unsigned long long)a->n_kv, (unsigned long long)b->n_kv), 1;
    for (uint64_t i = 0; i < a->n_kv; i++) {
        if (strcmp(a->kv[i].key, b->kv[i].key)) return snprintf(why, n, "key %llu: %s vs %s", (unsigned long long)i, a->kv[i].key, b->kv[i].key), 1;
        if (!values_equal(&a->kv[i].value, &b->kv[i].value)) return snprintf(why, n, "value of %s differs", a->kv[i].key), 1;
    }
    if (a->n_tensors != b->n_tensors) return snprintf(why, n, "n_tensors differ"), 1;
    if (a->alignment != b->alignment) return snprintf(why, n, "alignment differs"), 1;
    for (uint64_t i = 0; i < a->n_tensors; i++) {
        const struct hx_gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) || x->ggml_type != y->ggml_type || x->n_dims != y->n_dims ||
            memcmp(x->ne, y->ne, sizeof x->ne) || x->nbytes != y->nbytes)
            return snprintf(why, n, "tensor %llu (%s) header differs", (unsigned long long)i, x->name), 1;
        if (memcmp(x->data, y->data, x->nbytes)) return snprintf(why, n, "tensor %s data differs", x->name), 1;
    }
    return 0;
}

/* ggml's strict layout: tensor i at the sum of the aligned sizes of 0..i-1; all aligned. */
static bool layout_is_strict(const struct hx_gguf *g)
{
    uint64_t off = 0;
    if (g->n_tensors && g->data_offset % g->alignment) return false;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].offset != off) return false;
        off += g->tensors[i].nbytes + (g->alignment - g->tensors[i].nbytes % g->alignment) % g->alignment;
    }
    return g->n_tensors == 0 || g->data_offset + off == g->size;
}

/* p equals q byte for byte, except that p may have up to max_tail extra zero bytes. */
static bool file_bytes_equal_tail(const char *p, const char *q, int max_tail)
{
    FILE *a = fopen(p, "rb"), *b = fopen(q, "rb");
    bool eq = a && b;
    while (eq) {
        int x = fgetc(a), y = fgetc(b);
        if (y == EOF && x != EOF) {
            int extra = 1;
            eq = x == 0;
            while (eq && (x = fgetc(a)) != EOF) eq = x == 0 && ++extra <= max_tail;
            eq = eq && extra <= max_tail;
            break;
        }
        if (x != y) eq = false;
        if (x == EOF || y == EOF) break;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    return eq;
}

static bool file_bytes_equal(const char *p, const char *q) { return file_bytes_equal_tail(p, q, 0); }

/* ---- metadata ------------------------------------------------------------------------------ */

static int fill_none(void *ud, uint64_t i, void *dst, size_t n) { (void)ud, (void)i, (void)dst, (void)n; return HX_OK; }

TEST(every_metadata_type_round_trips)
{
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_writer_new(&w));
    float nanf_ = 0;
    uint32_t nanbits = 0x7fc01234u;   /* quiet NaN with a payload */
    memcpy(&nanf_, &nanbits, 4);
    ASSERT_OK(hx__gguf_set_u8(w, "t.u8", 250));
    ASSERT_OK(hx__gguf_set_i8(w, "t.i8", -128));
    ASSERT_OK(hx__gguf_set_u16(w, "t.u16", 65535));
    ASSERT_OK(hx__gguf_set_i16(w, "t.i16", -32768));
    ASSERT_OK(hx__gguf_set_u32(w, "t.u32", 4294967295u));
    ASSERT_OK(hx__gguf_set_i32(w, "t.i32", INT32_MIN));
    ASSERT_OK(hx__gguf_set_f32(w, "t.f32", -0.0f));
    ASSERT_OK(hx__gguf_set_f32(w, "t.f32nan", nanf_));
    ASSERT_OK(hx__gguf_set_bool(w, "t.bool", true));
    ASSERT_OK(hx__gguf_set_bool(w, "t.boolf", false));
    ASSERT_OK(hx__gguf_set_str(w, "t.str", "héllo ✓"));
    ASSERT_OK(hx__gguf_set_str(w, "t.empty", ""));
    ASSERT_OK(hx__gguf_set_strn(w, "t.nul", "a\0b", 3));
    ASSERT_OK(hx__gguf_set_u64(w, "t.u64", UINT64_MAX));
    ASSERT_OK(hx__gguf_set_i64(w, "t.i64", INT64_MIN));
    ASSERT_OK(hx__gguf_set_f64(w, "t.f64", 1e-300));
    const uint8_t u8s[] = {1, 2, 255};
    const int16_t i16s[] = {-1, 300, -32768};
    const uint32_t u32s[] = {7, 0, 4000000000u};
    const float f32s[] = {1.5f, -2.25f, 3.0e38f};
    const double f64s[] = {0.1, -1e200};
    const int64_t i64s[] = {INT64_MIN, 5};
    const uint8_t bools[] = {1, 0, 1};
    ASSERT_OK(hx__gguf_set_arr(w, "a.u8", HX_GGUF_UINT8, u8s, 3));
    ASSERT_OK(hx__gguf_set_arr(w, "a.i16", HX_GGUF_INT16, i16s, 3));
    ASSERT_OK(hx__gguf_set_arr(w, "a.u32", HX_GGUF_UINT32, u32s, 3));
    ASSERT_OK(hx__gguf_set_arr(w, "a.f32", HX_GGUF_FLOAT32, f32s, 3));
    ASSERT_OK(hx__gguf_set_arr(w, "a.f64", HX_GGUF_FLOAT64, f64s, 2));
    ASSERT_OK(hx__gguf_set_arr(w, "a.i64", HX_GGUF_INT64, i64s, 2));
    ASSERT_OK(hx__gguf_set_arr(w, "a.bool", HX_GGUF_BOOL, bools, 3));
    ASSERT_OK(hx__gguf_set_arr(w, "a.empty", HX_GGUF_INT32, NULL, 0));
    const char *strs[] = {"<unk>", "", "Ġthe", "▁world"};
    ASSERT_OK(hx__gguf_set_arr_str(w, "a.str", strs, 4));
    /* nested: [ [7,0,4e9] (u32), ["<unk>",...] (string), [] ] */
    struct hx_gguf_arr subs[3] = {
        {.elem_type = HX_GGUF_UINT32, .count = 3, .data = (const uint8_t *)u32s, .nbytes = 12},
        {.elem_type = HX_GGUF_UINT8, .count = 3, .data = u8s, .nbytes = 3},
        {.elem_type = HX_GGUF_FLOAT32, .count = 0, .data = NULL, .nbytes = 0},
    };
    ASSERT_OK(hx__gguf_set_arr_nested(w, "a.nested", subs, 3));
    /* replacing keeps the key's position */
    ASSERT_OK(hx__gguf_set_u32(w, "t.u8", 9));
    ASSERT_OK(hx__gguf_set_u8(w, "t.u8", 250));
    const char *p1 = tmp_path("kv1.gguf");
    ASSERT_OK(hx__gguf_write(w, p1, fill_none, NULL, NULL));

    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open(p1, false, &g));
    ASSERT_EQ(g->n_kv, 26);
    ASSERT_EQ(g->n_tensors, 0);
    ASSERT_STREQ(g->kv[0].key, "t.u8");
    ASSERT_EQ(g->kv[0].value.type, HX_GGUF_UINT8);
    ASSERT_EQ(g->kv[0].value.v.u64, 250);
    const struct hx_gguf_value *v;
    ASSERT_TRUE((v = hx__gguf_get(g, "t.i8")) && v->type == HX_GGUF_INT8 && v->v.i64 == -128);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.u16")) && v->type == HX_GGUF_UINT16 && v->v.u64 == 65535);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.i16")) && v->type == HX_GGUF_INT16 && v->v.i64 == -32768);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.u32")) && v->type == HX_GGUF_UINT32 && v->v.u64 == 4294967295u);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.i32")) && v->type == HX_GGUF_INT32 && v->v.i64 == INT32_MIN);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.f32")) && v->type == HX_GGUF_FLOAT32 && f32_bits(v->v.f64) == 0x80000000u);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.f32nan")) && f32_bits(v->v.f64) == nanbits);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.bool")) && v->type == HX_GGUF_BOOL && v->v.b);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.boolf")) && v->type == HX_GGUF_BOOL && !v->v.b);
    struct hx_gguf_str s;
    ASSERT_OK(hx__gguf_get_str(g, "t.str", &s));
    ASSERT_TRUE(s.len == strlen("héllo ✓") && !memcmp(s.ptr, "héllo ✓", s.len));
    ASSERT_OK(hx__gguf_get_str(g, "t.empty", &s));
    ASSERT_EQ(s.len, 0);
    ASSERT_OK(hx__gguf_get_str(g, "t.nul", &s));
    ASSERT_TRUE(s.len == 3 && !memcmp(s.ptr, "a\0b", 3));
    ASSERT_TRUE((v = hx__gguf_get(g, "t.u64")) && v->type == HX_GGUF_UINT64 && v->v.u64 == UINT64_MAX);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.i64")) && v->type == HX_GGUF_INT64 && v->v.i64 == INT64_MIN);
    ASSERT_TRUE((v = hx__gguf_get(g, "t.f64")) && v->type == HX_GGUF_FLOAT64 && v->v.f64 == 1e-300);
    struct hx_gguf_arr a;
    ASSERT_OK(hx__gguf_get_arr(g, "a.u8", &a));
    ASSERT_TRUE(a.elem_type == HX_GGUF_UINT8 && a.count == 3 && hx__gguf_arr_int(&a, 2) == 255);
    ASSERT_OK(hx__gguf_get_arr(g, "a.i16", &a));
    ASSERT_TRUE(a.count == 3 && hx__gguf_arr_int(&a, 0) == -1 && hx__gguf_arr_int(&a, 2) == -32768);
    ASSERT_OK(hx__gguf_get_arr(g, "a.u32", &a));
    ASSERT_TRUE(a.count == 3 && !memcmp(a.data, u32s, sizeof u32s));
    ASSERT_OK(hx__gguf_get_arr(g, "a.f32", &a));
    ASSERT_TRUE(a.count == 3 && !memcmp(a.data, f32s, sizeof f32s));
    ASSERT_OK(hx__gguf_get_arr(g, "a.f64", &a));
    ASSERT_TRUE(a.count == 2 && hx__gguf_arr_float(&a, 1) == -1e200);
    ASSERT_OK(hx__gguf_get_arr(g, "a.i64", &a));
    ASSERT_TRUE(a.count == 2 && hx__gguf_arr_int(&a, 0) == INT64_MIN);
    ASSERT_OK(hx__gguf_get_arr(g, "a.bool", &a));
    ASSERT_TRUE(a.elem_type == HX_GGUF_BOOL && a.count == 3 && !memcmp(a.data, bools, 3));
    ASSERT_OK(hx__gguf_get_arr(g, "a.empty", &a));
    ASSERT_TRUE(a.elem_type == HX_GGUF_INT32 && a.count == 0);
    ASSERT_OK(hx__gguf_get_arr(g, "a.str", &a));
    ASSERT_EQ(a.count, 4);
    for (uint64_t i = 0; i < 4; i++) {
        struct hx_gguf_str e = hx__gguf_arr_str(g, &a, i);
        ASSERT_TRUE(e.len == strlen(strs[i]) && !memcmp(e.ptr, strs[i], e.len));
    }
    ASSERT_OK(hx__gguf_get_arr(g, "a.nested", &a));
    ASSERT_TRUE(a.elem_type == HX_GGUF_ARRAY && a.count == 3);
    struct hx_gguf_arr sub;
    ASSERT_OK(hx__gguf_arr_sub(&a, 0, &sub));
    ASSERT_TRUE(sub.elem_type == HX_GGUF_UINT32 && sub.count == 3 && hx__gguf_arr_int(&sub, 2) == 4000000000ll);
    ASSERT_OK(hx__gguf_arr_sub(&a, 1, &sub));
    ASSERT_TRUE(sub.elem_type == HX_GGUF_UINT8 && sub.count == 3);
    ASSERT_OK(hx__gguf_arr_sub(&a, 2, &sub));
    ASSERT_TRUE(sub.elem_type == HX_GGUF_FLOAT32 && sub.count == 0);

    /* Depth 3 and strings inside nested arrays: nest the array we just read, plus a string
     * array; copy everything into a second file and compare the two readers. */
    struct hx_gguf_arr deep[2], strarr;
    ASSERT_OK(hx__gguf_get_arr(g, "a.nested", &deep[0]));
    ASSERT_OK(hx__gguf_get_arr(g, "a.str", &strarr));
    deep[1] = strarr;
    struct hx_gguf_writer *w2;
    ASSERT_OK(hx__gguf_writer_new(&w2));
    for (uint64_t i = 0; i < g->n_kv; i++) ASSERT_OK(hx__gguf_copy_kv(w2, g, i));
    ASSERT_OK(hx__gguf_set_arr_nested(w2, "a.deep", deep, 2));
    const char *p2 = tmp_path("kv2.gguf");
    ASSERT_OK(hx__gguf_write(w2, p2, NULL, NULL, NULL));
    struct hx_gguf *g2;
    ASSERT_OK(hx__gguf_open(p2, false, &g2));
    ASSERT_EQ(g2->n_kv, g->n_kv + 1);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        ASSERT_STREQ(g2->kv[i].key, g->kv[i].key);
        ASSERT_TRUE(values_equal(&g->kv[i].value, &g2->kv[i].value));
    }
    ASSERT_OK(hx__gguf_get_arr(g2, "a.deep", &a));
    ASSERT_OK(hx__gguf_arr_sub(&a, 0, &sub));
    ASSERT_TRUE(sub.elem_type == HX_GGUF_ARRAY && sub.count == 3);
    struct hx_gguf_arr sub2;
    ASSERT_OK(hx__gguf_arr_sub(&sub, 0, &sub2));
    ASSERT_TRUE(sub2.elem_type == HX_GGUF_UINT32 && hx__gguf_arr_int(&sub2, 0) == 7);
    ASSERT_OK(hx__gguf_arr_sub(&a, 1, &sub));
    ASSERT_TRUE(sub.elem_type == HX_GGUF_STRING && sub.count == 4);
    /* a copy of a file with no changes is byte-identical to a fresh write of the same keys */
    ASSERT_OK(hx__gguf_remove_kv(w2, "a.deep"));
    const char *p3 = tmp_path("kv3.gguf");
    ASSERT_OK(hx__gguf_write(w2, p3, NULL, NULL, NULL));
    ASSERT_TRUE(file_bytes_equal(p1, p3));
    hx__gguf_close(g2);
    hx__gguf_close(g);
    hx__gguf_writer_free(w2);
    hx__gguf_writer_free(w);
}

/* ---- tensors -------------------------------------------------------------------------------- */

struct tensor_src {
    uint8_t *data[HX_DTYPE_COUNT + 4];
    size_t nbytes[HX_DTYPE_COUNT + 4];
    int calls, last_done;
};

static int fill_from(void *ud, uint64_t i, void *dst, size_t n)
{
    struct tensor_src *s = ud;
    if (n != s->nbytes[i]) return hx__set_error(HX_E_INTERNAL, "size %zu vs %zu", n, s->nbytes[i]);
    memcpy(dst, s->data[i], n);
    s->calls++;
    return HX_OK;
}

static void progress_count(void *ud, uint64_t done, uint64_t total)
{
    struct tensor_src *s = ud;
    if (total == 16 || done == (uint64_t)s->calls) s->last_done = (int)done;   /* after the fill */
}

/* One tensor of each weight type (real quantized data), plus a 3-D, a 4-D, an empty one and
 * a type hx cannot compute with (Q3_K), written at alignments 32, 64 and 1. */
static void check_tensors_at(uint32_t alignment)
{
    struct hx_gguf_writer *w;
    struct tensor_src src = {0};
    ASSERT_OK(hx__gguf_writer_new(&w));
    ASSERT_OK(hx__gguf_set_str(w, "general.architecture", "test"));
    ASSERT_OK(hx__gguf_set_alignment(w, alignment));
    int n = 0;
    for (int t = 0; t < HX_DTYPE_COUNT; t++, n++) {
        int64_t ne[2] = {hx_dtype_block_elems((enum hx_dtype)t) * 2 + (t == 0 ? 3 : 0), 3 + t};
        if (hx_dtype_block_elems((enum hx_dtype)t) == 1) ne[0] = 37;   /* odd width for plain floats */
        char name[64];
        snprintf(name, sizeof name, "w.%s.weight", hx_dtype_name((enum hx_dtype)t));
        ASSERT_OK(hx__gguf_add_tensor(w, name, hx_dtype_to_ggml((enum hx_dtype)t), 2, ne, &src.nbytes[n]));
        /* the rows, and I2_S's tail with its tensor scale */
        ASSERT_EQ(src.nbytes[n], hx_dtype_tensor_bytes((enum hx_dtype)t, ne[1], ne[0]));
        src.data[n] = malloc(src.nbytes[n]);
        float *x = malloc((size_t)(ne[0] * ne[1]) * sizeof *x);
        for (int64_t c = 0; c < ne[0] * ne[1]; c++) x[c] = (float)((int64_t)(rng_next() % 20001) - 10000) / 3000.0f;
        ASSERT_OK(hx_quantize_tensor((enum hx_dtype)t, x, src.data[n], ne[1], ne[0]));
        free(x);
    }
    int64_t ne3[3] = {5, 4, 3}, ne4[4] = {2, 3, 2, 2}, ne0[2] = {0, 7}, neq[2] = {256, 2};
    ASSERT_OK(hx__gguf_add_tensor(w, "x.3d", 0, 3, ne3, &src.nbytes[n++]));
    ASSERT_OK(hx__gguf_add_tensor(w, "x.4d", 1, 4, ne4, &src.nbytes[n++]));
    ASSERT_OK(hx__gguf_add_tensor(w, "x.empty", 0, 2, ne0, &src.nbytes[n++]));
    ASSERT_OK(hx__gguf_add_tensor(w, "x.q3k", 11, 2, neq, &src.nbytes[n++]));
    ASSERT_EQ(src.nbytes[n - 1], 2 * 110);
    for (int i = HX_DTYPE_COUNT; i < n; i++) {
        src.data[i] = malloc(src.nbytes[i] ? src.nbytes[i] : 1);
        for (size_t k = 0; k < src.nbytes[i]; k++) src.data[i][k] = (uint8_t)rng_next();
    }
    ASSERT_EQ(hx__gguf_writer_n_tensors(w), n);
    char fname[64];
    snprintf(fname, sizeof fname, "tensors-a%u.gguf", alignment);
    const char *p = tmp_path(fname);
    ASSERT_OK(hx__gguf_write(w, p, fill_from, progress_count, &src));
    ASSERT_EQ(src.calls, n);
    ASSERT_EQ(src.last_done, n);

    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open(p, true, &g));
    ASSERT_EQ(g->alignment, alignment);
    ASSERT_EQ(hx__gguf_find_key(g, "general.alignment") >= 0, alignment != 32);
    ASSERT_EQ(g->n_tensors, n);
    ASSERT_TRUE(layout_is_strict(g));
    for (int i = 0; i < n; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        ASSERT_EQ(t->nbytes, src.nbytes[i]);
        ASSERT_EQ(t->offset % alignment, 0);
        ASSERT_TRUE(memcmp(t->data, src.data[i], t->nbytes) == 0);
    }
    const struct hx_gguf_tensor *t4 = hx__gguf_find_tensor(g, "x.4d");
    ASSERT_TRUE(t4 && t4->n_dims == 4 && t4->ne[3] == 2 && t4->ggml_type == 1);
    const struct hx_gguf_tensor *tq = hx__gguf_find_tensor(g, "w.Q4_K.weight");
    ASSERT_TRUE(tq && tq->ggml_type == 12 && tq->ne[0] == 512);
    hx__gguf_close(g);
    for (int i = 0; i < n; i++) free(src.data[i]);
    hx__gguf_writer_free(w);
}

TEST(tensors_of_every_type_round_trip_at_32) { check_tensors_at(32); }
TEST(tensors_of_every_type_round_trip_at_64) { check_tensors_at(64); }
TEST(tensors_of_every_type_round_trip_at_1) { check_tensors_at(1); }

/* ---- every file of the shared data, copied ------------------------------------------------ */

static int fill_copy(void *ud, uint64_t i, void *dst, size_t n)
{
    const struct hx_gguf *g = ud;
    if (n != g->tensors[i].nbytes) return hx__set_error(HX_E_INTERNAL, "size mismatch");
    memcpy(dst, g->tensors[i].data, n);
    return HX_OK;
}

static int n_files, n_identical;

static void rewrite_one(const char *path)
{
    struct hx_gguf *g, *g2;
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_open(path, false, &g));
    ASSERT_OK(hx__gguf_writer_new(&w));
    for (uint64_t i = 0; i < g->n_kv; i++) ASSERT_OK(hx__gguf_copy_kv(w, g, i));
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        size_t nb;
        ASSERT_OK(hx__gguf_add_tensor(w, t->name, t->ggml_type, t->n_dims ? t->n_dims : 1, t->ne, &nb));
        ASSERT_EQ(nb, t->nbytes);
    }
    const char *out = tmp_path("copy.gguf");
    ASSERT_OK(hx__gguf_write(w, out, fill_copy, NULL, g));
    ASSERT_OK(hx__gguf_open(out, false, &g2));
    char why[512];
    if (compare_gguf(g, g2, why, sizeof why)) HX_FAIL_AT("%s: copy differs: %s", path, why);
    ASSERT_TRUE(layout_is_strict(g2));
    n_files++;
    /* gguf-py pads even a tensor-less file to the alignment; ggml's writer does not. */
    int tail = g->n_tensors ? 0 : (int)g->alignment - 1;
    if (file_bytes_equal_tail(path, out, tail)) n_identical++;
    else fprintf(stderr, "  note: %s reads back identical but its bytes differ\n", path);
    hx__gguf_close(g2);
    hx__gguf_close(g);
    hx__gguf_writer_free(w);
}

static void rewrite_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) rewrite_dir(p);
        else if (strlen(e->d_name) > 5 && !strcmp(e->d_name + strlen(e->d_name) - 5, ".gguf")) {
            int before = hx_test_failed;
            rewrite_one(p);
            if (hx_test_failed && !before) fprintf(stderr, "  (while copying %s)\n", p);
        }
    }
    closedir(d);
}

TEST(every_shared_gguf_copies_identically)
{
    const char *root = hx_test_data("");
    struct stat sb;
    ASSERT_TRUE(stat(root, &sb) == 0 && S_ISDIR(sb.st_mode));
    n_files = n_identical = 0;
    rewrite_dir(root);
    fprintf(stderr, "  %d files copied; %d of them byte-identical to the original\n", n_files, n_identical);
    ASSERT_TRUE(n_files >= 20);
    /* Files from llama.cpp/gguf-py have the same canonical layout as ours, byte for byte
     * (up to the trailing padding of tensor-less files). */
    ASSERT_EQ(n_identical, n_files);
}

/* ---- failures never destroy an existing file ---------------------------------------------- */

static int fill_fail_second(void *ud, uint64_t i, void *dst, size_t n)
{
    (void)ud;
    memset(dst, 0xAB, n);
    return i == 1 ? hx__set_error(HX_E_CANCELED, "stop here") : HX_OK;
}

TEST(failed_write_keeps_existing_file)
{
    const char *p = tmp_path("keep.gguf");
    FILE *f = fopen(p, "wb");
    ASSERT_TRUE(f != NULL);
    fputs("precious contents", f);
    fclose(f);
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_writer_new(&w));
    int64_t ne[1] = {64};
    ASSERT_OK(hx__gguf_add_tensor(w, "a", 0, 1, ne, NULL));
    ASSERT_OK(hx__gguf_add_tensor(w, "b", 0, 1, ne, NULL));
    int st = hx__gguf_write(w, p, fill_fail_second, NULL, NULL);
    ASSERT_EQ(st, HX_E_CANCELED);
    ASSERT_TRUE(strstr(hx_last_error(), "'b'") && strstr(hx_last_error(), "stop here"));
    char buf[64] = {0};
    f = fopen(p, "rb");
    ASSERT_TRUE(f != NULL);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    ASSERT_EQ(got, strlen("precious contents"));
    ASSERT_STREQ(buf, "precious contents");
    ASSERT_EQ(count_temporaries(), 0);
    /* Missing directory: clear I/O error naming the path. */
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.gguf", tmpdir);
    ASSERT_EQ(hx__gguf_write(w, missing, fill_from, NULL, NULL), HX_E_IO);
    ASSERT_TRUE(strstr(hx_last_error(), "no-such-dir") && strstr(hx_last_error(), "No such file"));
    /* A directory as the output. */
    ASSERT_EQ(hx__gguf_write(w, tmpdir, fill_from, NULL, NULL), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "directory") != NULL);
    ASSERT_EQ(hx__gguf_write(w, p, NULL, NULL, NULL), HX_E_INVAL);
    hx__gguf_writer_free(w);
    ASSERT_EQ(count_temporaries(), 0);
}

TEST(bad_writer_input_is_rejected)
{
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_writer_new(&w));
    int64_t ne[4] = {33, 2, 1, 1}, ok_ne[2] = {32, 2};
    ASSERT_EQ(hx__gguf_set_u32(w, "", 1), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_str(w, "general.alignment", "64"), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_u32(w, "general.alignment", 48), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_u32(w, "general.alignment", 0), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_alignment(w, 3), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_arr(w, "k", HX_GGUF_STRING, "x", 1), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_set_arr(w, "k", HX_GGUF_UINT32, NULL, 4), HX_E_INVAL);
    const char *nul[] = {"a", NULL};
    ASSERT_EQ(hx__gguf_set_arr_str(w, "k", nul, 2), HX_E_INVAL);
    /* an array value whose bytes lie about its count */
    const uint8_t lie[8] = {5, 0, 0, 0, 0, 0, 0, 0};   /* string of length 5, no bytes */
    struct hx_gguf_value v = {.type = HX_GGUF_ARRAY,
                              .v.arr = {.elem_type = HX_GGUF_STRING, .count = 1, .data = lie, .nbytes = 8}};
    ASSERT_EQ(hx__gguf_set_value(w, "k", &v), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "'k'") != NULL);
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 8, 2, ne, NULL), HX_E_INVAL);          /* 33 % 32 */
    ASSERT_TRUE(strstr(hx_last_error(), "multiple") != NULL);
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 4, 2, ok_ne, NULL), HX_E_INVAL);       /* removed id */
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 99, 2, ok_ne, NULL), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 0, 0, ok_ne, NULL), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 0, 5, ne, NULL), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_add_tensor(w, "", 0, 2, ok_ne, NULL), HX_E_INVAL);
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    ASSERT_EQ(hx__gguf_add_tensor(w, longname, 0, 2, ok_ne, NULL), HX_E_INVAL);
    longname[63] = '\0';
    ASSERT_OK(hx__gguf_add_tensor(w, longname, 0, 2, ok_ne, NULL));
    ASSERT_OK(hx__gguf_add_tensor(w, "t", 8, 2, ok_ne, NULL));
    ASSERT_EQ(hx__gguf_add_tensor(w, "t", 0, 2, ok_ne, NULL), HX_E_INVAL);       /* duplicate */
    int64_t huge[4] = {(int64_t)1 << 40, (int64_t)1 << 40, 1 << 20, 1};
    ASSERT_EQ(hx__gguf_add_tensor(w, "h", 0, 3, huge, NULL), HX_E_INVAL);        /* overflow */
    ASSERT_EQ(hx__gguf_remove_kv(w, "absent"), HX_E_NOTFOUND);
    struct hx_gguf *none = NULL;
    ASSERT_EQ(hx__gguf_copy_kv(w, none, 0), HX_E_INVAL);
    ASSERT_EQ(hx__gguf_writer_n_tensors(w), 2);
    hx__gguf_writer_free(w);
    hx__gguf_writer_free(NULL);
}

/* ---- allocation failure: every k-th allocation fails once ------------------------------------ */

static long oom_countdown = -1;   /* fail when it reaches 0; -1 = never */
static bool oom_hit;
static bool oom_tick(void)
{
    if (oom_countdown < 0) return false;
    if (oom_countdown-- == 0) return oom_hit = true;
    return false;
}
static void *oom_malloc(size_t n) { return oom_tick() ? NULL : malloc(n); }
static void *oom_calloc(size_t c, size_t n) { return oom_tick() ? NULL : calloc(c, n); }
static void *oom_realloc(void *p, size_t n) { return oom_tick() ? NULL : realloc(p, n); }

static int oom_scenario(const char *path)
{
    struct hx_gguf_writer *w;
    int st = hx__gguf_writer_new(&w);
    if (st) return st;
    const char *strs[] = {"a", "bb", "ccc"};
    int64_t ne[2] = {32, 3};
    struct tensor_src src = {0};
    uint8_t d0[32 * 3 * 4] = {1}, d1[3 * 34] = {2};
    src.data[0] = d0, src.nbytes[0] = sizeof d0, src.data[1] = d1, src.nbytes[1] = sizeof d1;
    if (!(st = hx__gguf_set_str(w, "general.architecture", "x")) && !(st = hx__gguf_set_arr_str(w, "k.s", strs, 3)) &&
        !(st = hx__gguf_set_alignment(w, 64)) && !(st = hx__gguf_add_tensor(w, "t0", 0, 2, ne, NULL)) &&
        !(st = hx__gguf_add_tensor(w, "t1", 8, 2, ne, NULL)))
        st = hx__gguf_write(w, path, fill_from, NULL, &src);
    hx__gguf_writer_free(w);
    return st;
}

TEST(writer_survives_every_allocation_failure)
{
    const char *p = tmp_path("oom.gguf");
    FILE *f = fopen(p, "wb");
    ASSERT_TRUE(f != NULL);
    fputs("old", f);
    fclose(f);
    ASSERT_OK(hx_set_allocator(oom_malloc, oom_calloc, oom_realloc, free));
    int k, st = HX_E_NOMEM;
    for (k = 0; k < 200; k++) {
        oom_countdown = k, oom_hit = false;
        st = oom_scenario(p);
        if (!oom_hit) break;
        if (st != HX_E_NOMEM) break;
        char buf[8] = {0};
        f = fopen(p, "rb");
        size_t got = f ? fread(buf, 1, 7, f) : 0;
        if (f) fclose(f);
        if (got != 3 || strcmp(buf, "old")) break;
    }
    oom_countdown = -1;
    hx_set_allocator(NULL, NULL, NULL, NULL);
    fprintf(stderr, "  %d allocation points failed one by one\n", k);
    ASSERT_TRUE(!oom_hit);   /* the loop ended because no failure was injected... */
    ASSERT_OK(st);           /* ...and then the write succeeded */
    ASSERT_TRUE(k >= 8);
    ASSERT_EQ(count_temporaries(), 0);
    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open(p, false, &g));
    ASSERT_EQ(g->n_tensors, 2);
    ASSERT_EQ(g->alignment, 64);
    hx__gguf_close(g);
}

/* ---- quantize and mkmodel through the writer ------------------------------------------------ */

static int run_cmd(int (*cmd)(int, char **), const char *const *args)
{
    char *argv[32];
    int argc = 0;
    while (args[argc] && argc < 31) argv[argc] = (char *)args[argc], argc++;
    argv[argc] = NULL;
    return cmd(argc, argv);
}

/* Data nobody here wrote: llama.cpp-side TQ2_0 of the same ternary values as the F16 file. */
TEST(quantize_ternary_f16_matches_reference_tq2_0_bytes)
{
    const char *out = tmp_path("tern-tq2.gguf");
    const char *args[] = {"quantize", hx_test_data("qwen3/qwen3-tern-f16.gguf"), out, "TQ2_0", NULL};
    ASSERT_EQ(run_cmd(hx_cmd_quantize, args), 0);
    struct hx_gguf *ours, *ref;
    ASSERT_OK(hx__gguf_open(out, false, &ours));
    ASSERT_OK(hx__gguf_open(hx_test_data("qwen3/qwen3-tern-tq2_0.gguf"), false, &ref));
    ASSERT_EQ(ours->n_tensors, ref->n_tensors);
    int n_tq = 0;
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const struct hx_gguf_tensor *r = &ref->tensors[i], *o = hx__gguf_find_tensor(ours, r->name);
        ASSERT_TRUE(o != NULL);
        ASSERT_EQ(o->ggml_type, r->ggml_type == 8 ? 8u : r->ggml_type);   /* embedding: Q8_0 both */
        if (r->ggml_type != 35 && r->ggml_type != 0) continue;   /* Q8_0 embd came from f32 there */
        n_tq += r->ggml_type == 35;
        ASSERT_EQ(o->nbytes, r->nbytes);
        if (memcmp(o->data, r->data, r->nbytes)) HX_FAIL_AT("tensor %s differs from the reference", r->name);
    }
    ASSERT_EQ(n_tq, 14);
    hx__gguf_close(ref);
    hx__gguf_close(ours);
}

static int fill_zero(void *ud, uint64_t i, void *dst, size_t n) { (void)ud, (void)i; memset(dst, 0, n); return HX_OK; }

TEST(quantize_refuses_a_type_it_cannot_read)
{
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_writer_new(&w));
    ASSERT_OK(hx__gguf_set_str(w, "general.architecture", "llama"));
    int64_t ne[2] = {256, 4};
    ASSERT_OK(hx__gguf_add_tensor(w, "blk.0.attn_q.weight", 11 /* Q3_K */, 2, ne, NULL));
    const char *in = tmp_path("q3k.gguf"), *out = tmp_path("q3k-out.gguf");
    ASSERT_OK(hx__gguf_write(w, in, fill_zero, NULL, NULL));
    hx__gguf_writer_free(w);
    const char *args[] = {"quantize", in, out, "Q8_0", NULL};
    ASSERT_EQ(run_cmd(hx_cmd_quantize, args), 1);
    ASSERT_TRUE(access(out, F_OK) != 0);
    ASSERT_EQ(count_temporaries(), 0);
    /* A vocab-only file (no tensors) converts to itself plus the file type. */
    const char *vout = tmp_path("vocab-out.gguf");
    const char *vargs[] = {"quantize", hx_test_data("vocab/ggml-vocab-gpt-2.gguf"), vout, "Q8_0", NULL};
    ASSERT_EQ(run_cmd(hx_cmd_quantize, vargs), 0);
    struct hx_gguf *g;
    uint64_t ft;
    ASSERT_OK(hx__gguf_open(vout, false, &g));
    ASSERT_OK(hx__gguf_get_u64(g, "general.file_type", &ft));
    ASSERT_EQ(ft, 7);
    ASSERT_EQ(g->n_tensors, 0);
    hx__gguf_close(g);
}

struct stats {
    double mean, sd, amax, amin_nz, zero_frac;
    bool one_magnitude;   /* every non-zero |x| equal */
};

static int tensor_stats(const struct hx_gguf_tensor *t, struct stats *st)
{
    enum hx_dtype dt;
    if (hx_dtype_from_ggml(t->ggml_type, &dt)) return -1;
    int64_t n = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    float *x = malloc((size_t)n * sizeof *x);
    double s1 = 0, s2 = 0, amax = 0, amin = INFINITY, first = -1;
    int64_t zeros = 0;
    bool one = true;
    size_t rb = hx_dtype_row_bytes(dt, n);
    for (int64_t r = 0; r < rows; r++) {
        if (hx_dequantize_row(dt, (const uint8_t *)t->data + (size_t)r * rb, x, n)) return free(x), -1;
        for (int64_t c = 0; c < n; c++) {
            double v = x[c], a = fabs(v);
            s1 += v, s2 += v * v;
            if (a > amax) amax = a;
            if (a == 0) zeros++;
            else {
                if (a < amin) amin = a;
                if (first < 0) first = a;
                else if (a != first) one = false;
            }
        }
    }
    double cnt = (double)n * (double)rows;
    st->mean = s1 / cnt;
    st->sd = sqrt(s2 / cnt - st->mean * st->mean);
    st->amax = amax, st->amin_nz = amin, st->zero_frac = (double)zeros / cnt, st->one_magnitude = one;
    free(x);
    return 0;
}

/* The scale mkmodel promises for a tensor of the tiny shape (256 wide, 4 layers, FFN 768). */
static double tiny_sigma(const char *name)
{
    if (!strcmp(name, "token_embd.weight")) return 0.02;
    if (strstr(name, "attn_output")) return 1.0 / sqrt(256.0) / sqrt(8.0);
    if (strstr(name, "ffn_down")) return 1.0 / sqrt(768.0) / sqrt(8.0);
    if (strstr(name, "norm")) return 0;
    return 1.0 / sqrt(256.0);
}

static void check_mkmodel_values(const char *type, const char *embd)
{
    char fname[64];
    snprintf(fname, sizeof fname, "mk-%s.gguf", type);
    const char *out = tmp_path(fname);
    const char *args[] = {"mkmodel", "--shape", "tiny", "--type", type, "--embd-type", embd, "--vocab",
                          hx_test_data("stories260K/stories260K.gguf"), "--seed", "3", "-o", out, NULL};
    ASSERT_EQ(run_cmd(hx_cmd_mkmodel, args), 0);
    struct hx_gguf *g;
    ASSERT_OK(hx__gguf_open(out, false, &g));
    ASSERT_EQ(g->n_tensors, 1 + 4 * 11 + 1);
    bool ternary = !strcmp(type, "TQ2_0") || !strcmp(type, "TQ1_0"), binary = !strcmp(type, "Q1_0");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        struct stats st;
        double sigma = tiny_sigma(t->name);
        ASSERT_EQ(tensor_stats(t, &st), 0);
        if (sigma == 0) {   /* norm gains */
            ASSERT_TRUE(t->ggml_type == 0 && st.mean == 1.0 && st.sd == 0);
            continue;
        }
        bool is_embd = !strcmp(t->name, "token_embd.weight");
        if (is_embd || (!ternary && !binary)) {
            /* approximately normal: mean ~ 0, sd within 3%, bounded by the 4-uniform sum */
            if (fabs(st.mean) > 0.05 * sigma || fabs(st.sd / sigma - 1) > 0.03 || st.amax > 3.5 * sigma * 1.02)
                HX_FAIL_AT("%s: mean %g sd %g amax %g, sigma %g", t->name, st.mean, st.sd, st.amax, sigma);
        } else if (ternary) {
            double s = sigma * sqrt(1.5);
            if (!st.one_magnitude || fabs(st.amax / s - 1) > 1e-3 || st.zero_frac < 0.31 || st.zero_frac > 0.36)
                HX_FAIL_AT("%s: not ternary: one %d amax %g (s %g) zeros %.3f", t->name, st.one_magnitude, st.amax, s,
                           st.zero_frac);
        } else {
            if (!st.one_magnitude || st.zero_frac != 0 || fabs(st.amax / sigma - 1) > 1e-3 || fabs(st.mean) > 0.03 * sigma)
                HX_FAIL_AT("%s: not binary: one %d zeros %.3f amax %g mean %g", t->name, st.one_magnitude, st.zero_frac,
                           st.amax, st.mean);
        }
        if (hx_test_failed) break;
    }
    hx__gguf_close(g);
}

TEST(mkmodel_f32_weights_have_the_promised_scale) { check_mkmodel_values("F32", "F32"); }
TEST(mkmodel_tq2_0_weights_are_ternary) { check_mkmodel_values("TQ2_0", "F32"); }
TEST(mkmodel_tq1_0_weights_are_ternary) { check_mkmodel_values("TQ1_0", "F32"); }
TEST(mkmodel_q1_0_weights_are_binary) { check_mkmodel_values("Q1_0", "F32"); }

/* Activations do not blow up: logits of a random model are finite and of order one. */
static void check_logits(const char *arch, const char *type)
{
    char fname[64];
    snprintf(fname, sizeof fname, "lg-%s-%s.gguf", arch, type);
    const char *out = tmp_path(fname);
    const char *args[] = {"mkmodel", "--arch", arch, "--shape", "tiny", "--type", type, "--vocab",
                          hx_test_data("stories260K/stories260K.gguf"), "-o", out, NULL};
    ASSERT_EQ(run_cmd(hx_cmd_mkmodel, args), 0);
    struct hx_model *m;
    struct hx_context *c;
    struct hx_model_params mp = {.struct_size = sizeof mp};
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = "ref", .n_ctx = 64};
    ASSERT_OK(hx_model_load(out, &mp, &m));
    ASSERT_OK(hx_context_new(m, &cp, &c));
    hx_token toks[16];
    int32_t pos[16], seq[16] = {0};
    int8_t lg[16];
    for (int i = 0; i < 16; i++) toks[i] = 3 + (hx_token)(i * 37 % 500), pos[i] = i, lg[i] = i == 15;
    struct hx_batch b = {.n_rows = 16, .token = toks, .pos = pos, .seq = seq, .logits = lg};
    ASSERT_OK(hx_decode(c, &b));
    const float *l = hx_get_logits(c, 15);
    ASSERT_TRUE(l != NULL);
    int64_t nv = hx_vocab_n_tokens(m);
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < nv; i++) {
        ASSERT_TRUE(isfinite(l[i]));
        s1 += l[i], s2 += (double)l[i] * l[i];
    }
    double sd = sqrt(s2 / nv - (s1 / nv) * (s1 / nv));
    fprintf(stderr, "  %s %s: logit sd %.3f\n", arch, type, sd);
    ASSERT_TRUE(sd > 0.05 && sd < 10);
    hx_context_free(c);
    hx_model_free(m);
}

TEST(mkmodel_qwen3_q8_0_logits_are_sane) { check_logits("qwen3", "Q8_0"); }
TEST(mkmodel_qwen3_tq2_0_logits_are_sane) { check_logits("qwen3", "TQ2_0"); }
TEST(mkmodel_llama_q4_k_logits_are_sane) { check_logits("llama", "Q4_K"); }

TEST_MAIN()

/* ---- an EOS-less vocabulary ------------------------------------------------------------------ */

/* stories260K with tokenizer.ggml.eos_token_id = -1 ("none", as converters write it): no end
 * of generation at all. `run` still works (bounded by -n, with a note); `chat` refuses with a
 * message, since an answer could never end. */
TEST(eos_less_vocabulary_is_handled)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/stories260K/stories260K.gguf", getenv("HX_DATA") ? getenv("HX_DATA") : "../shared/data");
    struct hx_gguf *g;
    struct hx_gguf_writer *w;
    ASSERT_OK(hx__gguf_open(src, false, &g));
    ASSERT_OK(hx__gguf_writer_new(&w));
    for (uint64_t i = 0; i < g->n_kv; i++) ASSERT_OK(hx__gguf_copy_kv(w, g, i));
    ASSERT_OK(hx__gguf_set_u32(w, "tokenizer.ggml.eos_token_id", UINT32_MAX));
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        ASSERT_OK(hx__gguf_add_tensor(w, t->name, t->ggml_type, t->n_dims ? t->n_dims : 1, t->ne, NULL));
    }
    const char *out = tmp_path("no-eos.gguf");
    ASSERT_OK(hx__gguf_write(w, out, fill_copy, NULL, g));
    hx__gguf_writer_free(w);
    hx__gguf_close(g);

    struct hx_model *m = NULL;
    ASSERT_OK(hx_model_load(out, NULL, &m));
    ASSERT_EQ(hx_vocab_n_eog(m), 0);
    ASSERT_TRUE(hx_vocab_eos(m) == HX_TOKEN_NULL);
    hx_model_free(m);
    const char *run_args[] = {"run", "-m", out, "-p", "Once upon a time", "-n", "8", "--temp", "0", "--ids", NULL};
    ASSERT_EQ(run_cmd(hx_cmd_run, run_args), 0);
    const char *chat_args[] = {"chat", "-m", out, "--chat-template", "llama2", NULL};
    ASSERT_EQ(run_cmd(hx_cmd_chat, chat_args), 1);
}
