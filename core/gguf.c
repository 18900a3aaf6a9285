/*
 * gguf.c — GGUF v2/v3 reader (formats.md §1): map the file, parse and validate everything
 * before returning. All reads go through a bounds-checked cursor, so a malformed file is an
 * HX_E_FORMAT naming what is wrong and at which byte offset — never a read outside the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "hx-impl.h"

#define HX__GGUF_MAGIC 0x46554747u
#define HX__MAX_STRING (1ull << 30)
#define HX__MAX_ARRAY (1ull << 30)
#define HX__MAX_DEPTH 8

/* ---- ggml types --------------------------------------------------------------------------- */

struct hx__ggml_type {
    const char *name;
    int64_t blck;
    size_t size;
    size_t tail;   /* bytes once per tensor after its blocks (I2_S: the f32 scale, padded) */
};

static const struct hx__ggml_type hx__ggml_types[] = {
    [0] = {"F32", 1, 4, 0},        [1] = {"F16", 1, 2, 0},        [2] = {"Q4_0", 32, 18, 0},
    [3] = {"Q4_1", 32, 20, 0},     [6] = {"Q5_0", 32, 22, 0},     [7] = {"Q5_1", 32, 24, 0},
    [8] = {"Q8_0", 32, 34, 0},     [9] = {"Q8_1", 32, 36, 0},     [10] = {"Q2_K", 256, 84, 0},
    [11] = {"Q3_K", 256, 110, 0},  [12] = {"Q4_K", 256, 144, 0},  [13] = {"Q5_K", 256, 176, 0},
    [14] = {"Q6_K", 256, 210, 0},  [15] = {"Q8_K", 256, 292, 0},  [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0}, [18] = {"IQ3_XXS", 256, 98, 0}, [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},  [21] = {"IQ3_S", 256, 110, 0}, [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0}, [24] = {"I8", 1, 1, 0},       [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},       [27] = {"I64", 1, 8, 0},       [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0},  [30] = {"BF16", 1, 2, 0},      [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},  [39] = {"MXFP4", 32, 17, 0},   [40] = {"NVFP4", 64, 36, 0},
    [41] = {"Q1_0", 128, 18, 0},   [42] = {"Q2_0", 64, 18, 0},
    /* 36 is retired in mainline ggml (IQ4_NL_4_4) and I2_S in bitnet.cpp's fork, whose ggml
     * declares it as 1-byte elements and overrides the size: n/4 bytes of 2-bit codes in
     * blocks of 128, then 32 bytes holding the tensor's f32 scale (docs/weights.md) */
    [36] = {"I2_S", 128, 32, 32},
};

const char *hx__ggml_type_name(uint32_t t)
{
    return t < HX_ARRAY_LEN(hx__ggml_types) ? hx__ggml_types[t].name : NULL;
}

bool hx__ggml_type_size(uint32_t t, int64_t *blck, size_t *size)
{
    if (t >= HX_ARRAY_LEN(hx__ggml_types) || !hx__ggml_types[t].name) return false;
    *blck = hx__ggml_types[t].blck;
    *size = hx__ggml_types[t].size;
    return true;
}

size_t hx__ggml_type_tail(uint32_t t)
{
    return t < HX_ARRAY_LEN(hx__ggml_types) ? hx__ggml_types[t].tail : 0;
}

const char *hx__gguf_type_name(enum hx_gguf_type t)
{
    static const char *const n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < HX_GGUF_TYPE_COUNT ? n[t] : "?";
}

/* ---- cursor ---------------------------------------------------------------------------------- */

struct hx__cur {
    const uint8_t *base;
    size_t size, off;
};

static int hx__need(struct hx__cur *c, uint64_t n, const char *what)
{
    if (n > c->size - c->off)
        return hx__set_error(HX_E_FORMAT, "gguf: %s at offset %zu needs %llu bytes but the file ends at %zu",
                             what, c->off, (unsigned long long)n, c->size);
    return HX_OK;
}

static int hx__rd(struct hx__cur *c, void *dst, size_t n, const char *what)
{
    int st = hx__need(c, n, what);
    if (st) return st;
    memcpy(dst, c->base + c->off, n);
    c->off += n;
    return HX_OK;
}

static int hx__rd_str(struct hx__cur *c, struct hx_gguf_str *s, const char *what)
{
    uint64_t len;
    size_t at = c->off;
    int st = hx__rd(c, &len, 8, what);
    if (st) return st;
    if (len > HX__MAX_STRING)
        return hx__set_error(HX_E_FORMAT, "gguf: %s at offset %zu has absurd length %llu", what, at,
                             (unsigned long long)len);
    if ((st = hx__need(c, len, what))) return st;
    s->ptr = (const char *)c->base + c->off;
    s->len = len;
    c->off += len;
    return HX_OK;
}

static size_t hx__scalar_size(enum hx_gguf_type t)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < HX_GGUF_TYPE_COUNT ? sz[t] : 0;
}

/* Skip-validate `count` elements of type t (recursing into nested arrays). */
static int hx__skip_elems(struct hx__cur *c, enum hx_gguf_type t, uint64_t count, int depth)
{
    size_t es = hx__scalar_size(t);
    if (es) {
        if (count > (c->size - c->off) / es) return hx__need(c, count * es, "array data");
        c->off += (size_t)(count * es);
        return HX_OK;
    }
    for (uint64_t i = 0; i < count; i++) {
        int st;
        if (t == HX_GGUF_STRING) {
            struct hx_gguf_str s;
            st = hx__rd_str(c, &s, "array string");
        } else {
            uint32_t et;
            uint64_t n;
            if (depth >= HX__MAX_DEPTH)
                return hx__set_error(HX_E_FORMAT, "gguf: arrays nested deeper than %d at offset %zu",
                                     HX__MAX_DEPTH, c->off);
            if ((st = hx__rd(c, &et, 4, "nested array type")) || (st = hx__rd(c, &n, 8, "nested array count")))
                return st;
            if (et >= HX_GGUF_TYPE_COUNT || n > HX__MAX_ARRAY)
                return hx__set_error(HX_E_FORMAT, "gguf: bad nested array (type %u, count %llu) at offset %zu",
                                     et, (unsigned long long)n, c->off);
            st = hx__skip_elems(c, (enum hx_gguf_type)et, n, depth + 1);
        }
        if (st) return st;
    }
    return HX_OK;
}

static int hx__rd_value(struct hx__cur *c, enum hx_gguf_type t, struct hx_gguf_value *v, const char *key)
{
    v->type = t;
    uint8_t raw[8] = {0};
    size_t es = hx__scalar_size(t);
    int st;
    if (t == HX_GGUF_STRING) return hx__rd_str(c, &v->v.str, key);
    if (t == HX_GGUF_ARRAY) {
        uint32_t et;
        if ((st = hx__rd(c, &et, 4, key)) || (st = hx__rd(c, &v->v.arr.count, 8, key))) return st;
        if (et >= HX_GGUF_TYPE_COUNT)
            return hx__set_error(HX_E_FORMAT, "gguf: key '%s': array element type %u is invalid", key, et);
        if (v->v.arr.count > HX__MAX_ARRAY)
            return hx__set_error(HX_E_FORMAT, "gguf: key '%s': array of %llu elements is too large", key,
                                 (unsigned long long)v->v.arr.count);
        v->v.arr.elem_type = (enum hx_gguf_type)et;
        v->v.arr.data = c->base + c->off;
        size_t start = c->off;
        if ((st = hx__skip_elems(c, v->v.arr.elem_type, v->v.arr.count, 1))) return st;
        v->v.arr.nbytes = c->off - start;
        return HX_OK;
    }
    if (!es) return hx__set_error(HX_E_FORMAT, "gguf: key '%s' has invalid value type %d", key, (int)t);
    if ((st = hx__rd(c, raw, es, key))) return st;
    switch (t) {
    case HX_GGUF_UINT8: v->v.u64 = raw[0]; break;
    case HX_GGUF_INT8: v->v.i64 = (int8_t)raw[0]; break;
    case HX_GGUF_UINT16: { uint16_t x; memcpy(&x, raw, 2); v->v.u64 = x; break; }
    case HX_GGUF_INT16: { int16_t x; memcpy(&x, raw, 2); v->v.i64 = x; break; }
    case HX_GGUF_UINT32: { uint32_t x; memcpy(&x, raw, 4); v->v.u64 = x; break; }
    case HX_GGUF_INT32: { int32_t x; memcpy(&x, raw, 4); v->v.i64 = x; break; }
    case HX_GGUF_FLOAT32: { float x; memcpy(&x, raw, 4); v->v.f64 = x; break; }
    case HX_GGUF_BOOL: v->v.b = raw[0] != 0; break;
    case HX_GGUF_UINT64: memcpy(&v->v.u64, raw, 8); break;
    case HX_GGUF_INT64: memcpy(&v->v.i64, raw, 8); break;
    case HX_GGUF_FLOAT64: memcpy(&v->v.f64, raw, 8); break;
    default: break;
    }
    return HX_OK;
}

/* ---- parse ------------------------------------------------------------------------------------- */

static int hx__parse_kv(struct hx_gguf *g, struct hx__cur *c)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        struct hx_gguf_str k;
        uint32_t t;
        size_t at = c->off;
        int st = hx__rd_str(c, &k, "metadata key");
        if (st) return st;
        if (k.len == 0 || k.len > 65535)
            return hx__set_error(HX_E_FORMAT, "gguf: metadata key %llu at offset %zu has length %llu",
                                 (unsigned long long)i, at, (unsigned long long)k.len);
        char *key = hx__malloc(k.len + 1);
        if (!key) return HX_E_NOMEM;
        memcpy(key, k.ptr, k.len);
        key[k.len] = '\0';
        g->kv[i].key = key;
        g->n_kv = HX_MAX(g->n_kv, i + 1);
        if (strlen(key) != k.len)
            return hx__set_error(HX_E_FORMAT, "gguf: metadata key at offset %zu contains a NUL byte", at);
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, key))
                return hx__set_error(HX_E_FORMAT, "gguf: duplicate metadata key '%s' at offset %zu", key, at);
        if ((st = hx__rd(c, &t, 4, key))) return st;
        if (t >= HX_GGUF_TYPE_COUNT)
            return hx__set_error(HX_E_FORMAT, "gguf: key '%s' has invalid value type %u", key, t);
        if ((st = hx__rd_value(c, (enum hx_gguf_type)t, &g->kv[i].value, key))) return st;
    }
    return HX_OK;
}

static int hx__parse_tensor(struct hx_gguf *g, struct hx__cur *c, uint64_t i)
{
    struct hx_gguf_tensor *t = &g->tensors[i];
    struct hx_gguf_str name;
    size_t at = c->off;
    int st = hx__rd_str(c, &name, "tensor name");
    if (st) return st;
    if (name.len == 0 || name.len >= sizeof t->name)
        return hx__set_error(HX_E_FORMAT, "gguf: tensor %llu at offset %zu: name length %llu (must be 1..63)",
                             (unsigned long long)i, at, (unsigned long long)name.len);
    memcpy(t->name, name.ptr, name.len);
    t->name[name.len] = '\0';
    if ((st = hx__rd(c, &t->n_dims, 4, t->name))) return st;
    if (t->n_dims > 4)
        return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s' has %u dimensions (at most 4)", t->name, t->n_dims);
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((st = hx__rd(c, &ne, 8, t->name))) return st;
        if (ne > ((uint64_t)1 << 48))
            return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s' dimension %u = %llu is absurd", t->name, d,
                                 (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    if ((st = hx__rd(c, &t->ggml_type, 4, t->name)) || (st = hx__rd(c, &t->offset, 8, t->name))) return st;
    int64_t blck;
    size_t bsz;
    if (!hx__ggml_type_size(t->ggml_type, &blck, &bsz))
        return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s' has unknown or removed type id %u", t->name,
                             t->ggml_type);
    if (t->ne[0] % blck)
        return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s': ne[0] = %lld is not a multiple of %s's block of %lld",
                             t->name, (long long)t->ne[0], hx__ggml_type_name(t->ggml_type), (long long)blck);
    size_t nb = (size_t)(t->ne[0] / blck), tail = hx__ggml_type_tail(t->ggml_type);
    for (int d = 0; d < 4 && nb; d++)
        if (!hx__mul_size(nb, d ? (size_t)t->ne[d] : bsz, &nb))
            return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s': byte size overflows", t->name);
    if (nb > SIZE_MAX - tail)
        return hx__set_error(HX_E_FORMAT, "gguf: tensor '%s': byte size overflows", t->name);
    t->nbytes = nb + tail;
    for (uint64_t j = 0; j < i; j++)
        if (!strcmp(g->tensors[j].name, t->name))
            return hx__set_error(HX_E_FORMAT, "gguf: duplicate tensor name '%s'", t->name);
    return HX_OK;
}

static int hx__cmp_off(const void *a, const void *b)
{
    const struct hx_gguf_tensor *const *x = a, *const *y = b;
    return (*x)->offset < (*y)->offset ? -1 : (*x)->offset > (*y)->offset;
}

/* Elements of t (bounded: every ne <= 2^48 and the byte size did not overflow). */
static uint64_t hx__tensor_elems(const struct hx_gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
}

/*
 * Type ids that forks use for different layouts (formats.md pitfall 11; docs/weights.md). The
 * file's own evidence decides: the tensor's data span (its offset to the next tensor's, or to
 * the end of the file) must hold exactly its bytes under the layout hx reads, plus at most the
 * alignment padding. 36: bitnet.cpp's I2_S (mainline retired it), n/4 + 32 bytes. 42: ggml's
 * Q2_0, 18 bytes per 64; PrismML's early files declared 42 for 34 bytes per 128 (later PQ2_0).
 */
static int hx__check_span(const struct hx_gguf *g, const struct hx_gguf_tensor *t, uint64_t span)
{
    if (t->ggml_type != 36 && t->ggml_type != 42) return HX_OK;
    const uint64_t a = g->alignment, padded = t->nbytes + (a - t->nbytes % a) % a;
    if (span >= t->nbytes && span <= padded) return HX_OK;
    const uint64_t n = hx__tensor_elems(t);
    if (t->ggml_type == 36)
        return hx__set_error(HX_E_FORMAT,
                             "gguf: tensor '%s' has type 36, I2_S (bitnet.cpp; retired in mainline "
                             "ggml), whose %llu elements take n/4 + 32 = %zu bytes (2-bit codes, "
                             "then a 32-byte tail with the f32 scale), but its data spans %llu bytes",
                             t->name, (unsigned long long)n, t->nbytes, (unsigned long long)span);
    const uint64_t prism = t->ne[0] % 128 ? 0 : n / 128 * 34;
    if (prism && span >= prism && span <= prism + (a - prism % a) % a)
        return hx__set_error(HX_E_FORMAT,
                             "gguf: tensor '%s' has type 42 but its %llu bytes of data are "
                             "PrismML's early Q2_0 (34 bytes per 128, since renamed PQ2_0), not "
                             "ggml's Q2_0 (18 bytes per 64: %zu bytes here); hx reads only ggml's",
                             t->name, (unsigned long long)span, t->nbytes);
    return hx__set_error(HX_E_FORMAT,
                         "gguf: tensor '%s' has type 42, Q2_0 (18 bytes per 64 elements: %zu bytes "
                         "here), but its data spans %llu bytes",
                         t->name, t->nbytes, (unsigned long long)span);
}

static int hx__check_data(struct hx_gguf *g)
{
    if (g->n_tensors == 0) return HX_OK;
    struct hx_gguf_tensor **order = hx__malloc(g->n_tensors * sizeof *order);
    if (!order) return HX_E_NOMEM;
    int st = HX_OK;
    size_t data_size = g->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct hx_gguf_tensor *t = &g->tensors[i];
        order[i] = t;
        if (t->offset % g->alignment) {
            st = hx__set_error(HX_E_FORMAT, "gguf: tensor '%s' offset %llu is not a multiple of the alignment %llu",
                               t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
            goto out;
        }
    }
    qsort(order, g->n_tensors, sizeof *order, hx__cmp_off);
    for (uint64_t i = 0, j = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = order[i];
        if (t->offset > data_size) break; /* and every tensor after it: reported below */
        while (j < g->n_tensors && order[j]->offset <= t->offset) j++;
        const uint64_t end =
            j < g->n_tensors && order[j]->offset <= data_size ? order[j]->offset : data_size;
        if ((st = hx__check_span(g, t, end - t->offset))) goto out;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct hx_gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            st = hx__set_error(HX_E_FORMAT, "gguf: tensor '%s' data [%llu, +%zu) lies outside the file (data section %zu bytes)",
                               t->name, (unsigned long long)t->offset, t->nbytes, data_size);
            goto out;
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    for (uint64_t i = 1; i < g->n_tensors; i++)
        if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset && order[i - 1]->nbytes && order[i]->nbytes) {
            st = hx__set_error(HX_E_FORMAT, "gguf: tensors '%s' and '%s' overlap", order[i - 1]->name, order[i]->name);
            goto out;
        }
out:
    hx__free(order);
    return st;
}

static int hx__parse(struct hx_gguf *g)
{
    struct hx__cur c = {.base = g->base, .size = g->size};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    int st = hx__rd(&c, &magic, 4, "magic");
    if (st || magic != HX__GGUF_MAGIC)
        return hx__set_error(HX_E_FORMAT, "gguf: not a GGUF file (bad magic at offset 0)");
    if ((st = hx__rd(&c, &g->version, 4, "version"))) return st;
    if ((g->version & 0xFFFF) == 0 && g->version)
        return hx__set_error(HX_E_FORMAT, "gguf: big-endian files are not supported (version field %#x)", g->version);
    if (g->version != 2 && g->version != 3)
        return hx__set_error(HX_E_FORMAT, "gguf: version %u is not supported (2 and 3 are)", g->version);
    if ((st = hx__rd(&c, &n_tensors, 8, "tensor count")) || (st = hx__rd(&c, &n_kv, 8, "metadata count")))
        return st;
    /* Each record takes at least 8 + 4 bytes: counts beyond the file are lies. */
    if (n_kv > g->size / 12 || n_tensors > g->size / 24)
        return hx__set_error(HX_E_FORMAT, "gguf: %llu tensors and %llu keys cannot fit in %zu bytes",
                             (unsigned long long)n_tensors, (unsigned long long)n_kv, g->size);
    g->kv = hx__calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = hx__calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return HX_E_NOMEM;
    g->n_kv = n_kv;
    uint64_t declared_kv = n_kv;
    g->n_kv = 0;
    struct hx_gguf tmp = *g;
    tmp.n_kv = declared_kv;
    if ((st = hx__parse_kv(&tmp, &c))) {
        g->n_kv = tmp.n_kv;
        return st;
    }
    g->n_kv = declared_kv;
    g->alignment = 32;
    const struct hx_gguf_value *al = hx__gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != HX_GGUF_UINT32 || al->v.u64 == 0 || (al->v.u64 & (al->v.u64 - 1)))
            return hx__set_error(HX_E_FORMAT, "gguf: general.alignment must be a power-of-two u32");
        g->alignment = al->v.u64;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = i + 1;
        if ((st = hx__parse_tensor(g, &c, i))) return st;
    }
    uint64_t data = c.off + (g->alignment - c.off % g->alignment) % g->alignment;
    if (n_tensors && data > g->size)
        return hx__set_error(HX_E_FORMAT, "gguf: data section at offset %llu starts past the end of the file",
                             (unsigned long long)data);
    g->data_offset = n_tensors ? data : c.off;
    return hx__check_data(g);
}

/* ---- open / close --------------------------------------------------------------------------------- */

int hx__gguf_open_memory(const void *data, size_t size, struct hx_gguf **out)
{
    *out = NULL;
    struct hx_gguf *g = hx__calloc(1, sizeof *g);
    if (!g) return HX_E_NOMEM;
    g->base = data;
    g->size = size;
    g->n_parts = 1;
    int st = hx__parse(g);
    if (st) {
        hx__gguf_close(g);
        return st;
    }
    *out = g;
    return HX_OK;
}

int hx__gguf_open_file(const char *path, bool no_mmap, struct hx_gguf **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hx__set_error(HX_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return hx__set_error(HX_E_IO, "'%s' is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 24) {
        close(fd);
        return hx__set_error(HX_E_FORMAT, "gguf: '%s' is %zu bytes, too short for a GGUF header", path, size);
    }
    void *base;
    bool mapped = !no_mmap;
    if (mapped) {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) mapped = false;
    }
    if (!mapped) {
        base = hx__malloc(size);
        size_t got = 0;
        while (base && got < size) {
            ssize_t r = pread(fd, (char *)base + got, size - got, (off_t)got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (!base || got != size) {
            hx__free(base);
            close(fd);
            return base ? hx__set_error(HX_E_IO, "cannot read '%s'", path) : HX_E_NOMEM;
        }
    }
    close(fd);
    struct hx_gguf *g;
    int st = hx__gguf_open_memory(base, size, &g);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hx_last_error());
        hx__set_error(st, "%s: %s", path, msg);
        if (mapped) munmap(base, size);
        else hx__free(base);
        return st;
    }
    g->mapped = mapped;
    g->owns_copy = !mapped;
    *out = g;
    return HX_OK;
}

void hx__gguf_close(struct hx_gguf *g)
{
    if (!g) return;
    for (uint32_t i = 0; g->parts && i + 1 < g->n_parts; i++) hx__gguf_close(g->parts[i]);
    hx__free(g->parts);
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) hx__free(g->kv[i].key);
    hx__free(g->kv);
    hx__free(g->tensors);
    if (g->mapped) munmap((void *)g->base, g->size);
    else if (g->owns_copy) hx__free((void *)g->base);
    hx__free(g);
}

/* ---- lookups ------------------------------------------------------------------------------------- */

int64_t hx__gguf_find_key(const struct hx_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return (int64_t)i;
    return -1;
}

const struct hx_gguf_value *hx__gguf_get(const struct hx_gguf *g, const char *key)
{
    int64_t i = hx__gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i].value;
}

static bool hx__is_uint(enum hx_gguf_type t)
{
    return t == HX_GGUF_UINT8 || t == HX_GGUF_UINT16 || t == HX_GGUF_UINT32 || t == HX_GGUF_UINT64;
}

static bool hx__is_sint(enum hx_gguf_type t)
{
    return t == HX_GGUF_INT8 || t == HX_GGUF_INT16 || t == HX_GGUF_INT32 || t == HX_GGUF_INT64;
}

int hx__gguf_get_u64(const struct hx_gguf *g, const char *key, uint64_t *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (hx__is_uint(v->type)) return *out = v->v.u64, HX_OK;
    if (hx__is_sint(v->type) && v->v.i64 >= 0) return *out = (uint64_t)v->v.i64, HX_OK;
    return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected a non-negative integer", key,
                         hx__gguf_type_name(v->type));
}

int hx__gguf_get_i64(const struct hx_gguf *g, const char *key, int64_t *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (hx__is_sint(v->type)) return *out = v->v.i64, HX_OK;
    if (hx__is_uint(v->type) && v->v.u64 <= INT64_MAX) return *out = (int64_t)v->v.u64, HX_OK;
    return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected an integer", key, hx__gguf_type_name(v->type));
}

int hx__gguf_get_f32(const struct hx_gguf *g, const char *key, float *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (v->type == HX_GGUF_FLOAT32 || v->type == HX_GGUF_FLOAT64) return *out = (float)v->v.f64, HX_OK;
    if (hx__is_uint(v->type)) return *out = (float)v->v.u64, HX_OK;
    if (hx__is_sint(v->type)) return *out = (float)v->v.i64, HX_OK;
    return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected a number", key, hx__gguf_type_name(v->type));
}

int hx__gguf_get_bool(const struct hx_gguf *g, const char *key, bool *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (v->type != HX_GGUF_BOOL)
        return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected bool", key, hx__gguf_type_name(v->type));
    *out = v->v.b;
    return HX_OK;
}

int hx__gguf_get_str(const struct hx_gguf *g, const char *key, struct hx_gguf_str *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (v->type != HX_GGUF_STRING)
        return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected string", key, hx__gguf_type_name(v->type));
    *out = v->v.str;
    return HX_OK;
}

int hx__gguf_get_arr(const struct hx_gguf *g, const char *key, struct hx_gguf_arr *out)
{
    const struct hx_gguf_value *v = hx__gguf_get(g, key);
    if (!v) return HX_E_NOTFOUND;
    if (v->type != HX_GGUF_ARRAY)
        return hx__set_error(HX_E_FORMAT, "key '%s' has type %s, expected array", key, hx__gguf_type_name(v->type));
    *out = v->v.arr;
    return HX_OK;
}

int64_t hx__gguf_arr_int(const struct hx_gguf_arr *a, uint64_t i)
{
    struct hx__cur c = {.base = a->data, .size = (size_t)a->nbytes, .off = (size_t)(i * hx__scalar_size(a->elem_type))};
    struct hx_gguf_value v;
    if (hx__rd_value(&c, a->elem_type, &v, "array element") != HX_OK) return 0;
    return hx__is_uint(a->elem_type) ? (int64_t)v.v.u64 : a->elem_type == HX_GGUF_BOOL ? v.v.b : v.v.i64;
}

double hx__gguf_arr_float(const struct hx_gguf_arr *a, uint64_t i)
{
    if (a->elem_type == HX_GGUF_FLOAT32 || a->elem_type == HX_GGUF_FLOAT64) {
        struct hx__cur c = {.base = a->data, .size = (size_t)a->nbytes, .off = (size_t)(i * hx__scalar_size(a->elem_type))};
        struct hx_gguf_value v;
        return hx__rd_value(&c, a->elem_type, &v, "array element") == HX_OK ? v.v.f64 : 0.0;
    }
    return (double)hx__gguf_arr_int(a, i);
}

/* String arrays: walk from the start, remembering the last position so a sequential scan
 * (the common case: loading a vocabulary) is O(1) per element. */
struct hx_gguf_str hx__gguf_arr_str(struct hx_gguf *g, const struct hx_gguf_arr *a, uint64_t i)
{
    static _Thread_local const uint8_t *last_data;
    static _Thread_local uint64_t last_i;
    static _Thread_local size_t last_off;
    (void)g;
    struct hx__cur c = {.base = a->data, .size = (size_t)a->nbytes};
    uint64_t k = 0;
    if (last_data == a->data && last_i <= i) k = last_i, c.off = last_off;
    struct hx_gguf_str s = {0};
    for (; k <= i; k++) {
        if (hx__rd_str(&c, &s, "array string") != HX_OK) return (struct hx_gguf_str){0};
        if (k == i) break;
    }
    last_data = a->data, last_i = i + 1, last_off = c.off;
    return s;
}

int hx__gguf_arr_sub(const struct hx_gguf_arr *a, uint64_t i, struct hx_gguf_arr *out)
{
    if (a->elem_type != HX_GGUF_ARRAY || i >= a->count) return HX_E_INVAL;
    struct hx__cur c = {.base = a->data, .size = (size_t)a->nbytes};
    for (uint64_t k = 0; k <= i; k++) {
        struct hx_gguf_value v;
        int st = hx__rd_value(&c, HX_GGUF_ARRAY, &v, "nested array");
        if (st) return st;
        if (k == i) return *out = v.v.arr, HX_OK;
    }
    return HX_E_INVAL;
}

const struct hx_gguf_tensor *hx__gguf_find_tensor(const struct hx_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}
