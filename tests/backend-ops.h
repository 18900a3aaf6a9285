/*
 * backend-ops.h — what the two halves of test-backend-ops share: test-backend-ops.c (options,
 * random data, weights, the devices under test, running a case on each and checking it
 * against `ref`, main) and backend-ops-cases.c (the case tables: which ops, types, shapes and
 * layouts are run, and each op's threshold).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numerics.h"
#include "registry.h"

#define HX_T_GUARD 256u         /* poisoned bytes before and after every tensor */
#define HX_T_POISON 0xFFC0DEADu /* a quiet NaN: reading it poisons the result */
#define HX_T_MAX_BUFS 8

struct hx_t_opts {
    bool full, list, quiet, verbose;
    const char *backend, *op, *type, *m;
    int threads;
};
extern struct hx_t_opts hx_t_opt;
extern bool hx_t_have_npu; /* a device under test is HX_NUMERICS_INT8_ROW */

/* Is `name` in the comma-separated list (case-insensitive)? NULL list = everything. */
bool hx_t_in_list(const char *list, const char *name);

/* ---- random data (splitmix64) */
uint64_t hx_t_next(uint64_t *s);
float hx_t_unif(uint64_t *s);
void *hx_t_xmalloc(size_t n);
/* Uniform values scaled per row; matmul activations also per 256 and per 32 elements. */
float *hx_t_act(int64_t rows, int64_t cols, float amp, uint64_t seed);
float *hx_t_act_mm(int64_t rows, int64_t k, uint64_t seed);

/* ---- weights */

/* A weight of a case group. Planned with its shape first; the data is generated on the first
 * case that runs, so filtered-out groups (a 151936-row LM head) cost nothing. */
struct hx_t_weight {
    struct hx_weight w;
    uint64_t id; /* identifies the weight for the per-device handle cache; 0 = not built */
    uint64_t seed;
    uint8_t *data;
    /* For the matmul error model (core/numerics.h), per weight row j and K-block b: e = Σ w²,
     * dw = Σ (w - ŵ)² of an HX_NUMERICS_INT8_ROW device's conversion (NULL without one). */
    int64_t nb;
    double *e, *dw;
};

/* An n × k weight of type t (data made on first use); an F32 vector of n values in [lo, hi]. */
void hx_t_weight_plan(struct hx_t_weight *tw, enum hx_dtype t, int64_t n, int64_t k, float scale,
                      uint64_t seed);
void hx_t_weight_build(struct hx_t_weight *tw);
void hx_t_weight_vec(struct hx_t_weight *tw, const char *name, int64_t n, float lo, float hi,
                     uint64_t seed);
void hx_t_weight_free(struct hx_t_weight *tw);

/* ---- cases */

/* A word image of one buffer as written to the device before the op. */
struct hx_t_buf {
    size_t nbytes;
    uint32_t *init;
};
/* (rows, cols) f32 at byte offset `off` of buffer `buf`, rows `stride` bytes apart. */
struct hx_t_tensor {
    int buf;
    size_t off;
    int64_t rows, cols;
    size_t stride;
};
struct hx_t_case {
    char label[160];
    const char *family; /* --op name: the kind, or "qk_norm" */
    struct hx_op_desc desc;
    struct hx_t_buf buf[HX_T_MAX_BUFS];
    int n_buf;
    struct hx_t_tensor src[3], dst, kc, vc;
    int n_src;
    bool has_cache;                /* ATTN: kc/vc buffers must match ref's exactly */
    const struct hx_t_weight *w;   /* cached per device by id */
    const struct hx_t_weight *aux; /* prepared per run */
    int32_t *tokens, *pos, *seq;
    double thr; /* NMSE threshold (not matmul) */
    /* MATMUL error model (core/numerics.h), per activation row r and K-block b: s = expected
     * squared rounding error of an element, xm = mean x²; s8: s on an HX_NUMERICS_INT8_ROW
     * device. */
    double *s, *xm, *s8;
};

void hx_t_case_init(struct hx_t_case *c, enum hx_op_kind kind, int64_t m);
void hx_t_case_free(struct hx_t_case *c);
/* Tensors of a case: n column slices of one (rows, Σwidths + pad) buffer, a tensor alone in its
 * buffer, the slice at column `at` of a (rows, at + cols + after) buffer; row r's words in a
 * buffer image; values (given or random) written into the initial image. */
void hx_t_slices(struct hx_t_case *c, int64_t rows, int n, const int64_t *widths, int64_t pad,
                 struct hx_t_tensor *out);
struct hx_t_tensor hx_t_alone(struct hx_t_case *c, int64_t rows, int64_t cols);
struct hx_t_tensor hx_t_slice(struct hx_t_case *c, int64_t rows, int64_t at, int64_t cols,
                              int64_t after);
float *hx_t_at(const struct hx_t_tensor *t, uint32_t *words, int64_t r);
void hx_t_put(struct hx_t_case *c, const struct hx_t_tensor *t, const float *vals);
void hx_t_put_rand(struct hx_t_case *c, const struct hx_t_tensor *t, float amp, uint64_t seed);
/* Filters that do not need the data: false (and the case printed in --list mode) to skip. */
bool hx_t_want(const char *family, enum hx_op_kind kind, int wtype, int64_t m, bool full_only,
               const char *label);
/* Run a case on ref and on every device under test, check and count the results. */
void hx_t_run_case(struct hx_t_case *c);

/* ---- the case tables (backend-ops-cases.c) */
void hx_t_weight_ops(enum hx_dtype t);
void hx_t_norm_ops(void);
void hx_t_rope_ops(void);
void hx_t_attn_ops(void);
void hx_t_binary_ops(void);
void hx_t_edge_ops(void);
