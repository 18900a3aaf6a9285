/*
 * gguf-write.c — GGUF v3 writer (formats.md §1).
 *
 * Keys are stored already encoded (the value bytes exactly as they go into the file), so
 * every value type, string arrays and nested arrays included, is one code path, and a key
 * copied from a reader is its raw array bytes re-validated. Tensor data is not held: at
 * write time a callback fills one buffer (sized for the largest tensor) per tensor, which is
 * written and zero-padded to the alignment. Offsets follow ggml's rule (tensor i starts at
 * the sum of the aligned sizes of tensors 0..i-1), which every GGUF reader accepts.
 *
 * Atomicity: the bytes go to a temporary file next to the target; only a complete, fsynced
 * file is renamed over it. Any failure unlinks the temporary and leaves the target alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "hx-impl.h"

#define HX__W_MAGIC 0x46554747u
#define HX__W_VERSION 3u
#define HX__W_MAX_DEPTH 8
#define HX__W_ALIGN_KEY "general.alignment"

struct hx__wkv {
    char *key;
    uint32_t type;     /* enum hx_gguf_type */
    uint8_t *val;      /* encoded value bytes (for ARRAY: elem type, count, elements) */
    size_t nbytes;
};

struct hx__wtensor {
    char name[64];
    uint32_t type, n_dims;
    int64_t ne[4];
    size_t nbytes;
};

struct hx_gguf_writer {
    struct hx__wkv *kv;
    size_t n_kv, cap_kv;
    struct hx__wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
};

/* ---- growable byte buffer ------------------------------------------------------------------ */

struct hx__bytes {
    uint8_t *p;
    size_t len, cap;
    bool failed;
};

static void hx__b_put(struct hx__bytes *b, const void *src, size_t n)
{
    if (b->failed || n == 0) return;
    if (n > SIZE_MAX - b->len) {
        b->failed = true;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        uint8_t *p = hx__realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* Little-endian regardless of the host. */
static void hx__b_le(struct hx__bytes *b, uint64_t v, size_t n)
{
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    hx__b_put(b, tmp, n);
}

static void hx__b_str(struct hx__bytes *b, const char *s, uint64_t len)
{
    hx__b_le(b, len, 8);
    hx__b_put(b, s, (size_t)len);
}

/* ---- value validation ----------------------------------------------------------------------- */

static size_t hx__w_scalar_size(uint32_t t)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < HX_GGUF_TYPE_COUNT ? sz[t] : 0;
}

static uint64_t hx__w_rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Walk `count` encoded elements of type t in p[*off..n); false if they do not fit exactly
 * the way a reader would parse them. */
static bool hx__w_walk(const uint8_t *p, size_t n, size_t *off, uint32_t t, uint64_t count, int depth)
{
    size_t es = hx__w_scalar_size(t);
    if (es) {
        if (count > (n - *off) / es) return false;
        *off += (size_t)count * es;
        return true;
    }
    if (t != HX_GGUF_STRING && t != HX_GGUF_ARRAY) return false;
    if (t == HX_GGUF_ARRAY && depth >= HX__W_MAX_DEPTH) return false;
    for (uint64_t i = 0; i < count; i++) {
        if (t == HX_GGUF_STRING) {
            if (n - *off < 8) return false;
            uint64_t len = hx__w_rd64(p + *off);
            *off += 8;
            if (len > n - *off) return false;
            *off += (size_t)len;
            continue;
        }
        if (n - *off < 12) return false;
        uint32_t et = (uint32_t)(p[*off] | p[*off + 1] << 8 | p[*off + 2] << 16 | (uint32_t)p[*off + 3] << 24);
        uint64_t c = hx__w_rd64(p + *off + 4);
        *off += 12;
        if (et >= HX_GGUF_TYPE_COUNT || !hx__w_walk(p, n, off, et, c, depth + 1)) return false;
    }
    return true;
}

/* ---- key table --------------------------------------------------------------------------------- */

static int64_t hx__w_find(const struct hx_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return (int64_t)i;
    return -1;
}

static int hx__w_check_key(const char *key)
{
    if (!key || !*key) return hx__set_error(HX_E_INVAL, "gguf write: empty metadata key");
    if (strlen(key) > 65535) return hx__set_error(HX_E_INVAL, "gguf write: metadata key longer than 65535 bytes");
    return HX_OK;
}

/* general.alignment must be a power-of-two u32; returns its value through *al. */
static int hx__w_check_align(uint32_t type, const uint8_t *val, size_t n, uint32_t *al)
{
    uint32_t a = 0;
    if (type == HX_GGUF_UINT32 && n == 4) a = (uint32_t)(val[0] | val[1] << 8 | val[2] << 16 | (uint32_t)val[3] << 24);
    if (type != HX_GGUF_UINT32 || a == 0 || (a & (a - 1)))
        return hx__set_error(HX_E_INVAL, "gguf write: general.alignment must be a power-of-two u32");
    *al = a;
    return HX_OK;
}

/* Store an encoded value under key (copying val); replaces an existing key in place. */
static int hx__w_set(struct hx_gguf_writer *w, const char *key, uint32_t type, const void *val, size_t n)
{
    int st = hx__w_check_key(key);
    if (st) return st;
    uint32_t al = w->alignment;
    if (!strcmp(key, HX__W_ALIGN_KEY) && (st = hx__w_check_align(type, val, n, &al))) return st;
    uint8_t *copy = hx__malloc(n ? n : 1);
    if (!copy) return HX_E_NOMEM;
    if (n) memcpy(copy, val, n);
    int64_t i = hx__w_find(w, key);
    if (i < 0) {
        if (w->n_kv == w->cap_kv) {
            size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
            struct hx__wkv *kv = hx__realloc(w->kv, cap * sizeof *kv);
            if (!kv) goto nomem;
            w->kv = kv, w->cap_kv = cap;
        }
        char *k = hx__malloc(strlen(key) + 1);
        if (!k) goto nomem;
        memcpy(k, key, strlen(key) + 1);
        i = (int64_t)w->n_kv++;
        w->kv[i] = (struct hx__wkv){.key = k};
    }
    hx__free(w->kv[i].val);
    w->kv[i].type = type;
    w->kv[i].val = copy;
    w->kv[i].nbytes = n;
    w->alignment = al;
    return HX_OK;
nomem:
    hx__free(copy);
    return HX_E_NOMEM;
}

static int hx__w_set_scalar(struct hx_gguf_writer *w, const char *key, uint32_t type, uint64_t bits)
{
    struct hx__bytes b = {0};
    hx__b_le(&b, bits, hx__w_scalar_size(type));
    int st = b.failed ? HX_E_NOMEM : hx__w_set(w, key, type, b.p, b.len);
    hx__free(b.p);
    return st;
}

/* ---- public: lifetime and setters ----------------------------------------------------------- */

int hx__gguf_writer_new(struct hx_gguf_writer **out)
{
    *out = hx__calloc(1, sizeof **out);
    if (!*out) return HX_E_NOMEM;
    (*out)->alignment = 32;
    return HX_OK;
}

void hx__gguf_writer_free(struct hx_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        hx__free(w->kv[i].key);
        hx__free(w->kv[i].val);
    }
    hx__free(w->kv);
    hx__free(w->t);
    hx__free(w);
}

static uint64_t hx__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t hx__f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

int hx__gguf_set_u8(struct hx_gguf_writer *w, const char *k, uint8_t v) { return hx__w_set_scalar(w, k, HX_GGUF_UINT8, v); }
int hx__gguf_set_i8(struct hx_gguf_writer *w, const char *k, int8_t v) { return hx__w_set_scalar(w, k, HX_GGUF_INT8, (uint8_t)v); }
int hx__gguf_set_u16(struct hx_gguf_writer *w, const char *k, uint16_t v) { return hx__w_set_scalar(w, k, HX_GGUF_UINT16, v); }
int hx__gguf_set_i16(struct hx_gguf_writer *w, const char *k, int16_t v) { return hx__w_set_scalar(w, k, HX_GGUF_INT16, (uint16_t)v); }
int hx__gguf_set_u32(struct hx_gguf_writer *w, const char *k, uint32_t v) { return hx__w_set_scalar(w, k, HX_GGUF_UINT32, v); }
int hx__gguf_set_i32(struct hx_gguf_writer *w, const char *k, int32_t v) { return hx__w_set_scalar(w, k, HX_GGUF_INT32, (uint32_t)v); }
int hx__gguf_set_u64(struct hx_gguf_writer *w, const char *k, uint64_t v) { return hx__w_set_scalar(w, k, HX_GGUF_UINT64, v); }
int hx__gguf_set_i64(struct hx_gguf_writer *w, const char *k, int64_t v) { return hx__w_set_scalar(w, k, HX_GGUF_INT64, (uint64_t)v); }
int hx__gguf_set_f32(struct hx_gguf_writer *w, const char *k, float v) { return hx__w_set_scalar(w, k, HX_GGUF_FLOAT32, hx__f32_bits(v)); }
int hx__gguf_set_f64(struct hx_gguf_writer *w, const char *k, double v) { return hx__w_set_scalar(w, k, HX_GGUF_FLOAT64, hx__f64_bits(v)); }
int hx__gguf_set_bool(struct hx_gguf_writer *w, const char *k, bool v) { return hx__w_set_scalar(w, k, HX_GGUF_BOOL, v ? 1 : 0); }

int hx__gguf_set_strn(struct hx_gguf_writer *w, const char *key, const char *v, uint64_t len)
{
    if (!v && len) return hx__set_error(HX_E_INVAL, "gguf write: key '%s': NULL string", key ? key : "");
    struct hx__bytes b = {0};
    hx__b_str(&b, v, len);
    int st = b.failed ? HX_E_NOMEM : hx__w_set(w, key, HX_GGUF_STRING, b.p, b.len);
    hx__free(b.p);
    return st;
}

int hx__gguf_set_str(struct hx_gguf_writer *w, const char *key, const char *v)
{
    if (!v) return hx__set_error(HX_E_INVAL, "gguf write: key '%s': NULL string", key ? key : "");
    return hx__gguf_set_strn(w, key, v, strlen(v));
}

/* Encode (elem_type, count, raw element bytes) after checking the bytes parse exactly. */
static int hx__w_set_array(struct hx_gguf_writer *w, const char *key, uint32_t et, uint64_t count,
                           const void *data, size_t nbytes)
{
    size_t off = 0;
    if (et >= HX_GGUF_TYPE_COUNT || (nbytes && !data) || !hx__w_walk(data, nbytes, &off, et, count, 1) ||
        off != nbytes)
        return hx__set_error(HX_E_INVAL, "gguf write: key '%s': array of %llu x %s does not match its %zu data bytes",
                             key ? key : "", (unsigned long long)count, hx__gguf_type_name((enum hx_gguf_type)et), nbytes);
    struct hx__bytes b = {0};
    hx__b_le(&b, et, 4);
    hx__b_le(&b, count, 8);
    hx__b_put(&b, data, nbytes);
    int st = b.failed ? HX_E_NOMEM : hx__w_set(w, key, HX_GGUF_ARRAY, b.p, b.len);
    hx__free(b.p);
    return st;
}

int hx__gguf_set_arr(struct hx_gguf_writer *w, const char *key, enum hx_gguf_type elem_type,
                     const void *data, uint64_t count)
{
    size_t es = hx__w_scalar_size((uint32_t)elem_type), n;
    if (!es)
        return hx__set_error(HX_E_INVAL, "gguf write: key '%s': hx__gguf_set_arr needs a fixed-size element type, not %s",
                             key ? key : "", hx__gguf_type_name(elem_type));
    if (count > SIZE_MAX / es || !hx__mul_size((size_t)count, es, &n))
        return hx__set_error(HX_E_INVAL, "gguf write: key '%s': array too large", key ? key : "");
    return hx__w_set_array(w, key, (uint32_t)elem_type, count, data, n);
}

int hx__gguf_set_arr_str(struct hx_gguf_writer *w, const char *key, const char *const *strs, uint64_t count)
{
    struct hx__bytes b = {0};
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i]) {
            hx__free(b.p);
            return hx__set_error(HX_E_INVAL, "gguf write: key '%s': string %llu is NULL", key ? key : "",
                                 (unsigned long long)i);
        }
        hx__b_str(&b, strs[i], strlen(strs[i]));
    }
    int st = b.failed ? HX_E_NOMEM : hx__w_set_array(w, key, HX_GGUF_STRING, count, b.p, b.len);
    hx__free(b.p);
    return st;
}

int hx__gguf_set_arr_nested(struct hx_gguf_writer *w, const char *key, const struct hx_gguf_arr *subs,
                            uint64_t count)
{
    struct hx__bytes b = {0};
    for (uint64_t i = 0; i < count; i++) {
        hx__b_le(&b, subs[i].elem_type, 4);
        hx__b_le(&b, subs[i].count, 8);
        hx__b_put(&b, subs[i].data, (size_t)subs[i].nbytes);
    }
    int st = b.failed ? HX_E_NOMEM : hx__w_set_array(w, key, HX_GGUF_ARRAY, count, b.p, b.len);
    hx__free(b.p);
    return st;
}

int hx__gguf_set_value(struct hx_gguf_writer *w, const char *key, const struct hx_gguf_value *v)
{
    switch (v->type) {
    case HX_GGUF_UINT8: case HX_GGUF_UINT16: case HX_GGUF_UINT32: case HX_GGUF_UINT64:
        return hx__w_set_scalar(w, key, v->type, v->v.u64);
    case HX_GGUF_INT8: case HX_GGUF_INT16: case HX_GGUF_INT32: case HX_GGUF_INT64:
        return hx__w_set_scalar(w, key, v->type, (uint64_t)v->v.i64);
    case HX_GGUF_FLOAT32: return hx__gguf_set_f32(w, key, (float)v->v.f64);
    case HX_GGUF_FLOAT64: return hx__gguf_set_f64(w, key, v->v.f64);
    case HX_GGUF_BOOL: return hx__gguf_set_bool(w, key, v->v.b);
    case HX_GGUF_STRING: return hx__gguf_set_strn(w, key, v->v.str.ptr, v->v.str.len);
    case HX_GGUF_ARRAY:
        return hx__w_set_array(w, key, v->v.arr.elem_type, v->v.arr.count, v->v.arr.data, (size_t)v->v.arr.nbytes);
    default:
        return hx__set_error(HX_E_INVAL, "gguf write: key '%s': invalid value type %d", key ? key : "", (int)v->type);
    }
}

int hx__gguf_copy_kv(struct hx_gguf_writer *w, const struct hx_gguf *src, uint64_t kv_index)
{
    if (!src || kv_index >= src->n_kv)
        return hx__set_error(HX_E_INVAL, "gguf write: copy of key %llu, but the source has %llu keys",
                             (unsigned long long)kv_index, src ? (unsigned long long)src->n_kv : 0ull);
    return hx__gguf_set_value(w, src->kv[kv_index].key, &src->kv[kv_index].value);
}

int hx__gguf_remove_kv(struct hx_gguf_writer *w, const char *key)
{
    int64_t i = key ? hx__w_find(w, key) : -1;
    if (i < 0) return hx__set_error(HX_E_NOTFOUND, "gguf write: key '%s' is not set", key ? key : "");
    hx__free(w->kv[i].key);
    hx__free(w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!strcmp(key, HX__W_ALIGN_KEY)) w->alignment = 32;
    return HX_OK;
}

int hx__gguf_set_alignment(struct hx_gguf_writer *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)))
        return hx__set_error(HX_E_INVAL, "gguf write: alignment %u is not a power of two", alignment);
    if (alignment == 32 && hx__w_find(w, HX__W_ALIGN_KEY) < 0) return HX_OK;
    return hx__gguf_set_u32(w, HX__W_ALIGN_KEY, alignment);
}

/* ---- tensors ------------------------------------------------------------------------------------ */

static int hx__w_tensor_size(const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, size_t *out)
{
    int64_t blck;
    size_t bsz, nb;
    if (!hx__ggml_type_size(type, &blck, &bsz))
        return hx__set_error(HX_E_INVAL, "gguf write: tensor '%s': unknown or removed type id %u", name, type);
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] < 0 || ne[d] > ((int64_t)1 << 48))
            return hx__set_error(HX_E_INVAL, "gguf write: tensor '%s': dimension %u = %lld", name, d, (long long)ne[d]);
    if (ne[0] % blck)
        return hx__set_error(HX_E_INVAL, "gguf write: tensor '%s': ne[0] = %lld is not a multiple of %s's block of %lld",
                             name, (long long)ne[0], hx__ggml_type_name(type), (long long)blck);
    nb = (size_t)(ne[0] / blck);
    bool ok = hx__mul_size(nb, bsz, &nb);
    for (uint32_t d = 1; d < n_dims && ok; d++) ok = hx__mul_size(nb, (size_t)ne[d], &nb);
    size_t tail = hx__ggml_type_tail(type); /* I2_S: the tensor scale after its codes */
    if (!ok || nb > SIZE_MAX - tail)
        return hx__set_error(HX_E_INVAL, "gguf write: tensor '%s': byte size overflows", name);
    *out = nb + tail;
    return HX_OK;
}

int hx__gguf_add_tensor(struct hx_gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                        const int64_t *ne, size_t *nbytes)
{
    size_t len = name ? strlen(name) : 0, nb = 0;
    if (len == 0 || len > 63)
        return hx__set_error(HX_E_INVAL, "gguf write: tensor name '%s' must be 1..63 bytes", name ? name : "");
    if (n_dims < 1 || n_dims > 4 || !ne)
        return hx__set_error(HX_E_INVAL, "gguf write: tensor '%s': %u dimensions (must be 1..4)", name, n_dims);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return hx__set_error(HX_E_INVAL, "gguf write: duplicate tensor name '%s'", name);
    int st = hx__w_tensor_size(name, ggml_type, n_dims, ne, &nb);
    if (st) return st;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct hx__wtensor *t = hx__realloc(w->t, cap * sizeof *t);
        if (!t) return HX_E_NOMEM;
        w->t = t, w->cap_t = cap;
    }
    struct hx__wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->type = ggml_type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->nbytes = nb;
    if (nbytes) *nbytes = nb;
    return HX_OK;
}

uint64_t hx__gguf_writer_n_tensors(const struct hx_gguf_writer *w) { return w->n_t; }

/* ---- file output ------------------------------------------------------------------------------ */

static size_t hx__w_pad(size_t x, size_t a) { return (a - x % a) % a; }

/* Header, metadata, tensor table and the padding before the data section. */
static int hx__w_header(const struct hx_gguf_writer *w, struct hx__bytes *b)
{
    hx__b_le(b, HX__W_MAGIC, 4);
    hx__b_le(b, HX__W_VERSION, 4);
    hx__b_le(b, w->n_t, 8);
    hx__b_le(b, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        hx__b_str(b, w->kv[i].key, strlen(w->kv[i].key));
        hx__b_le(b, w->kv[i].type, 4);
        hx__b_put(b, w->kv[i].val, w->kv[i].nbytes);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct hx__wtensor *t = &w->t[i];
        hx__b_str(b, t->name, strlen(t->name));
        hx__b_le(b, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) hx__b_le(b, (uint64_t)t->ne[d], 8);
        hx__b_le(b, t->type, 4);
        hx__b_le(b, off, 8);
        off += t->nbytes + hx__w_pad(t->nbytes, w->alignment);
    }
    if (w->n_t) {
        static const uint8_t zeros[256];
        for (size_t pad = hx__w_pad(b->len, w->alignment); pad;) {
            size_t n = HX_MIN(pad, sizeof zeros);
            hx__b_put(b, zeros, n);
            pad -= n;
        }
    }
    return b->failed ? HX_E_NOMEM : HX_OK;
}

static int hx__w_write_all(int fd, const void *p, size_t n, const char *path)
{
    const uint8_t *c = p;
    while (n) {
        ssize_t r = write(fd, c, HX_MIN(n, (size_t)1 << 30));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return hx__set_error(HX_E_IO, "cannot write '%s': %s", path, r < 0 ? strerror(errno) : "short write");
        c += r, n -= (size_t)r;
    }
    return HX_OK;
}

static int hx__w_write_pad(int fd, size_t n, const char *path)
{
    static const uint8_t zeros[256];
    while (n) {
        size_t k = HX_MIN(n, sizeof zeros);
        int st = hx__w_write_all(fd, zeros, k, path);
        if (st) return st;
        n -= k;
    }
    return HX_OK;
}

/* Create "<path>.tmp.<pid>[.<k>]" exclusively, so nothing else is ever clobbered. */
static int hx__w_open_tmp(const char *path, char **tmp_out, int *fd_out)
{
    size_t n = strlen(path) + 48;
    char *tmp = hx__malloc(n);
    if (!tmp) return HX_E_NOMEM;
    for (int k = 0; k < 100; k++) {
        if (k) snprintf(tmp, n, "%s.tmp.%ld.%d", path, (long)getpid(), k);
        else snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp_out = tmp, *fd_out = fd;
            return HX_OK;
        }
        if (errno != EEXIST) {
            int e = errno;
            hx__set_error(HX_E_IO, "cannot create '%s' (for '%s'): %s", tmp, path, strerror(e));
            hx__free(tmp);
            return HX_E_IO;
        }
    }
    hx__free(tmp);
    return hx__set_error(HX_E_IO, "cannot create a temporary file next to '%s'", path);
}

/* fsync the directory holding path so the rename itself is durable (best effort). */
static void hx__w_sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

static int hx__w_tensors(const struct hx_gguf_writer *w, int fd, const char *path, hx_gguf_tensor_fill_fn fill,
                         hx_gguf_progress_cb progress, void *user_data)
{
    size_t max = 0;
    for (size_t i = 0; i < w->n_t; i++) max = HX_MAX(max, w->t[i].nbytes);
    uint8_t *buf = hx__malloc(max ? max : 1);
    if (!buf) return hx__set_error(HX_E_NOMEM, "gguf write: no memory for a %zu-byte tensor buffer", max);
    int st = HX_OK;
    for (size_t i = 0; i < w->n_t && !st; i++) {
        const struct hx__wtensor *t = &w->t[i];
        hx__clear_error();
        if ((st = fill(user_data, i, buf, t->nbytes))) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hx_last_error());
            st = hx__set_error(st, "gguf write: tensor '%s': %s", t->name, msg[0] ? msg : hx_strerror(st));
            break;
        }
        if (!(st = hx__w_write_all(fd, buf, t->nbytes, path)) &&
            !(st = hx__w_write_pad(fd, hx__w_pad(t->nbytes, w->alignment), path)) && progress)
            progress(user_data, i + 1, w->n_t);
    }
    hx__free(buf);
    return st;
}

int hx__gguf_write(struct hx_gguf_writer *w, const char *path, hx_gguf_tensor_fill_fn fill,
                   hx_gguf_progress_cb progress, void *user_data)
{
    if (!path || !*path) return hx__set_error(HX_E_INVAL, "gguf write: no output path");
    if (w->n_t && !fill) return hx__set_error(HX_E_INVAL, "gguf write: tensors declared but no fill callback");
    char *target = NULL;
    bool exists;
    unsigned mode;
    int st = hx__outfile_resolve(path, &target, &exists, &mode);
    if (st) return st;
    path = target; /* a symbolic link is written through: its target is replaced */
    struct hx__bytes hdr = {0};
    char *tmp = NULL;
    int fd = -1;
    if ((st = hx__w_header(w, &hdr)) || (st = hx__w_open_tmp(path, &tmp, &fd))) goto fail;
    /* The replaced file's permission bits carry over (the temporary was made 0666 & ~umask). */
    if (exists && fchmod(fd, (mode_t)mode) != 0) {
        st = hx__set_error(HX_E_IO, "cannot set the mode of '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    if ((st = hx__w_write_all(fd, hdr.p, hdr.len, tmp))) goto fail;
    hx__free(hdr.p);
    hdr.p = NULL;
    if ((st = hx__w_tensors(w, fd, tmp, fill, progress, user_data))) goto fail;
    if (fsync(fd) != 0) {
        st = hx__set_error(HX_E_IO, "cannot sync '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        st = hx__set_error(HX_E_IO, "cannot close '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = hx__set_error(HX_E_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto fail;
    }
    hx__w_sync_dir(path);
    hx__free(tmp);
    hx__free(target);
    return HX_OK;
fail:
    hx__free(hdr.p);
    if (fd >= 0) close(fd);
    if (tmp) unlink(tmp);
    hx__free(tmp);
    hx__free(target);
    return st;
}
