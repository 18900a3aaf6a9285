/*
 * gguf.h — GGUF v3 reader and writer (core-private).
 *
 * The reader maps the file read-only and validates everything before returning: header,
 * every key/value record (all 13 value types, arrays of strings, nested arrays), alignment,
 * the tensor table (names unique and < 64 bytes, n_dims <= 4, known type, ne[0] a multiple of
 * the block size, byte size from type and shape without overflow, data inside the file,
 * aligned, no two tensors overlapping; for the ids forks disagree on, 36 and 42, a data span
 * that fits the layout hx reads: docs/weights.md). Any failure is HX_E_FORMAT with hx_last_error()
 * naming what is wrong and where (byte offset, key or tensor name). It never reads outside
 * the mapping. After a successful open, all pointers into the file are safe to follow.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hx_gguf_type {
    HX_GGUF_UINT8 = 0,
    HX_GGUF_INT8 = 1,
    HX_GGUF_UINT16 = 2,
    HX_GGUF_INT16 = 3,
    HX_GGUF_UINT32 = 4,
    HX_GGUF_INT32 = 5,
    HX_GGUF_FLOAT32 = 6,
    HX_GGUF_BOOL = 7,
    HX_GGUF_STRING = 8,
    HX_GGUF_ARRAY = 9,
    HX_GGUF_UINT64 = 10,
    HX_GGUF_INT64 = 11,
    HX_GGUF_FLOAT64 = 12,
    HX_GGUF_TYPE_COUNT
};

const char *hx__gguf_type_name(enum hx_gguf_type t); /* "u32", "string", "array", ... */

struct hx_gguf_str {
    const char *ptr;   /* into the mapping; NOT NUL-terminated */
    uint64_t len;
};

/* An array value: `count` elements of `elem_type` starting at `data` (raw file bytes).
 * For elem_type STRING or ARRAY the elements are variable-size; use the accessors. */
struct hx_gguf_arr {
    enum hx_gguf_type elem_type;
    uint64_t count;
    const uint8_t *data;
    uint64_t nbytes;   /* bytes spanned by the elements */
};

struct hx_gguf_value {
    enum hx_gguf_type type;
    union {
        uint64_t u64;    /* UINT8/16/32/64 */
        int64_t i64;     /* INT8/16/32/64 */
        double f64;      /* FLOAT32/64 */
        bool b;
        struct hx_gguf_str str;
        struct hx_gguf_arr arr;
    } v;
};

struct hx_gguf_kv {
    char *key;         /* NUL-terminated copy (owned by the gguf) */
    struct hx_gguf_value value;
};

struct hx_gguf_tensor {
    char name[64];           /* NUL-terminated */
    uint32_t ggml_type;
    uint32_t n_dims;
    int64_t ne[4];           /* missing dims are 1 */
    uint64_t offset;         /* relative to the data section of its file */
    size_t nbytes;
    const void *data;        /* into the mapping */
    uint32_t file;           /* 0, or for a split model the part (0-based) that holds it */
};

struct hx_gguf {
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    struct hx_gguf_kv *kv;
    uint64_t n_tensors;
    struct hx_gguf_tensor *tensors;
    uint64_t data_offset;    /* file offset of the data section */
    const uint8_t *base;     /* the whole file */
    size_t size;
    /* private */
    bool mapped;
    bool owns_copy;
    void *priv;              /* string-array indexes built by hx__gguf_arr_str */
    struct hx_gguf **parts;  /* a split model's other files (parts 1..n_parts-1), or NULL */
    uint32_t n_parts;        /* files of the model: 1, or split.count */
};

/* Open and validate a file (mmap, or read into memory if no_mmap). HX_E_IO, HX_E_FORMAT
 * (message names the problem and the byte offset), HX_E_NOMEM. A split model (llama.cpp's
 * gguf-split: `NAME-00001-of-0000N.gguf` ... with split.no / split.count /
 * split.tensors.count) is opened from its first part: the other parts are found by name and
 * validated, and their tensors join the table (metadata is the first part's; `file` says
 * where each tensor lives). gguf-split.c. */
int hx__gguf_open(const char *path, bool no_mmap, struct hx_gguf **out);
/* One file, its split.* keys not followed (gguf.c). */
int hx__gguf_open_file(const char *path, bool no_mmap, struct hx_gguf **out);
/* Same on a caller-owned memory image (fuzzing, tests); the bytes must outlive the gguf. */
int hx__gguf_open_memory(const void *data, size_t size, struct hx_gguf **out);
void hx__gguf_close(struct hx_gguf *g);

/* Index of key, or -1. */
int64_t hx__gguf_find_key(const struct hx_gguf *g, const char *key);
const struct hx_gguf_value *hx__gguf_get(const struct hx_gguf *g, const char *key);
/* Typed getters. HX_E_NOTFOUND if absent; HX_E_FORMAT (with message) if the stored type is
 * not convertible: integers accept any integer type in range, floats accept F32/F64 (and
 * integers), strings only STRING, bools BOOL. */
int hx__gguf_get_u64(const struct hx_gguf *g, const char *key, uint64_t *out);
int hx__gguf_get_i64(const struct hx_gguf *g, const char *key, int64_t *out);
int hx__gguf_get_f32(const struct hx_gguf *g, const char *key, float *out);
int hx__gguf_get_bool(const struct hx_gguf *g, const char *key, bool *out);
int hx__gguf_get_str(const struct hx_gguf *g, const char *key, struct hx_gguf_str *out);
int hx__gguf_get_arr(const struct hx_gguf *g, const char *key, struct hx_gguf_arr *out);

/* Array element accessors (bounds were validated at open; i < count is the caller's job). */
int64_t hx__gguf_arr_int(const struct hx_gguf_arr *a, uint64_t i);   /* integer elements */
double hx__gguf_arr_float(const struct hx_gguf_arr *a, uint64_t i);  /* float elements */
/* STRING elements: O(1) after the first call builds an index (hence non-const gguf). */
struct hx_gguf_str hx__gguf_arr_str(struct hx_gguf *g, const struct hx_gguf_arr *a,
                                    uint64_t i);
/* ARRAY elements (nested): sub-array i. O(i) walk. */
int hx__gguf_arr_sub(const struct hx_gguf_arr *a, uint64_t i, struct hx_gguf_arr *out);

const struct hx_gguf_tensor *hx__gguf_find_tensor(const struct hx_gguf *g, const char *name);

/* ggml type table for every id GGUF files use (so `inspect` can describe any file). */
const char *hx__ggml_type_name(uint32_t ggml_type);   /* NULL if unknown/removed */
/* Block elems and bytes; false for unknown or removed ids. */
bool hx__ggml_type_size(uint32_t ggml_type, int64_t *block_elems, size_t *block_bytes);
/* Bytes a tensor of the type has once after its blocks (36, I2_S: 32; others 0). */
size_t hx__ggml_type_tail(uint32_t ggml_type);

/* ---- writer ------------------------------------------------------------------------------ */

/*
 * Writer (core/gguf-write.c): collect metadata and tensor infos, then stream the file:
 * header + kv + tensor table + zero padding, then each tensor's data in declaration order,
 * produced by a callback into one reused buffer (so a converter never holds the whole model
 * in memory, only its largest tensor). Tensor data starts at a multiple of the alignment and
 * each tensor is zero-padded to it, contiguous in table order (what ggml's reader demands).
 *
 * Keys keep the order in which they were first set; setting an existing key replaces its
 * value in place. "general.alignment" is special: it must be a power-of-two u32 and sets the
 * alignment used for the file (hx__gguf_set_alignment does the same; default 32, and the key
 * is only written when set). Every setter copies what it is given; the writer owns its data.
 * Errors: HX_E_INVAL (bad key, value, name, shape; message says which), HX_E_NOMEM.
 * One writer is used by one thread at a time.
 */
struct hx_gguf_writer;

int hx__gguf_writer_new(struct hx_gguf_writer **out);
void hx__gguf_writer_free(struct hx_gguf_writer *w);   /* NULL is fine */

int hx__gguf_set_u8(struct hx_gguf_writer *w, const char *key, uint8_t v);
int hx__gguf_set_i8(struct hx_gguf_writer *w, const char *key, int8_t v);
int hx__gguf_set_u16(struct hx_gguf_writer *w, const char *key, uint16_t v);
int hx__gguf_set_i16(struct hx_gguf_writer *w, const char *key, int16_t v);
int hx__gguf_set_u32(struct hx_gguf_writer *w, const char *key, uint32_t v);
int hx__gguf_set_i32(struct hx_gguf_writer *w, const char *key, int32_t v);
int hx__gguf_set_u64(struct hx_gguf_writer *w, const char *key, uint64_t v);
int hx__gguf_set_i64(struct hx_gguf_writer *w, const char *key, int64_t v);
int hx__gguf_set_f32(struct hx_gguf_writer *w, const char *key, float v);
int hx__gguf_set_f64(struct hx_gguf_writer *w, const char *key, double v);
int hx__gguf_set_bool(struct hx_gguf_writer *w, const char *key, bool v);
/* NUL-terminated string; hx__gguf_set_strn for counted bytes (may hold NULs). */
int hx__gguf_set_str(struct hx_gguf_writer *w, const char *key, const char *v);
int hx__gguf_set_strn(struct hx_gguf_writer *w, const char *key, const char *v, uint64_t len);
/* Array of fixed-size elements (not STRING/ARRAY): count elements, raw little-endian bytes. */
int hx__gguf_set_arr(struct hx_gguf_writer *w, const char *key, enum hx_gguf_type elem_type,
                     const void *data, uint64_t count);
int hx__gguf_set_arr_str(struct hx_gguf_writer *w, const char *key, const char *const *strs,
                         uint64_t count);
/* Array of arrays: element i is subs[i] (any element type, itself nested or not; the
 * descriptors are what the reader's hx__gguf_get_arr / hx__gguf_arr_sub return). */
int hx__gguf_set_arr_nested(struct hx_gguf_writer *w, const char *key,
                            const struct hx_gguf_arr *subs, uint64_t count);
/* Any value as the reader describes it (arrays: raw element bytes, validated here). */
int hx__gguf_set_value(struct hx_gguf_writer *w, const char *key, const struct hx_gguf_value *v);
/* Copy a key/value (any type, nested arrays included) from a reader. HX_E_INVAL if
 * kv_index is out of range. */
int hx__gguf_copy_kv(struct hx_gguf_writer *w, const struct hx_gguf *src, uint64_t kv_index);
/* HX_E_NOTFOUND if the key is not set. */
int hx__gguf_remove_kv(struct hx_gguf_writer *w, const char *key);
/* Power of two; also sets (or, for 32 when absent, leaves out) general.alignment. */
int hx__gguf_set_alignment(struct hx_gguf_writer *w, uint32_t alignment);

/* Declare a tensor (order of calls = order in the file): name 1..63 bytes and unique,
 * n_dims 1..4, ne[0..n_dims-1] >= 0, any ggml type id hx__ggml_type_size knows, ne[0] a
 * multiple of its block. nbytes (optional) receives the tensor's data size. */
int hx__gguf_add_tensor(struct hx_gguf_writer *w, const char *name, uint32_t ggml_type,
                        uint32_t n_dims, const int64_t *ne, size_t *nbytes);
uint64_t hx__gguf_writer_n_tensors(const struct hx_gguf_writer *w);

/* Produce tensor i's bytes: write exactly nbytes into dst. Return an hx_status; on failure
 * set hx_last_error (the writer prefixes the tensor name). Called once per tensor, in order,
 * from the thread that called hx__gguf_write. */
typedef int (*hx_gguf_tensor_fill_fn)(void *user_data, uint64_t i, void *dst, size_t nbytes);

/* Progress: called after each tensor's data is written with (done tensors, total). */
typedef void (*hx_gguf_progress_cb)(void *user_data, uint64_t done, uint64_t total);

/*
 * Write the file atomically: everything goes to "<path>.tmp.<pid>" in the same directory,
 * which is fsynced and renamed over path only when complete, so a failure (bad callback,
 * full disk, unwritable directory) leaves an existing file at path untouched and removes
 * the temporary. HX_E_IO (message names the path and the OS error), HX_E_INVAL (path is a
 * directory, fill is NULL while tensors exist), HX_E_NOMEM, or the fill callback's status.
 * Blocks for the whole write. The writer is unchanged and may be written again.
 */
int hx__gguf_write(struct hx_gguf_writer *w, const char *path, hx_gguf_tensor_fill_fn fill,
                   hx_gguf_progress_cb progress, void *user_data);
