/*
 * backend-ops.h — what the files of test-backend-ops share: test-backend-ops.c (options,
 * filters, main), backend-ops-data.c (random data, weights, the buffers of a case),
 * backend-ops-devices.c (the devices under test, the cpu variants, their weight handles),
 * backend-ops-run.c (running a case on ref and on each device), backend-ops-check.c (the
 * comparator and its self-check) and backend-ops-cases.c (the case tables: which ops, types,
 * shapes and layouts are run, and each op's threshold).
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

/* ---- options and filters (test-backend-ops.c) */
struct hx_t_opts {
    bool full, list, quiet, verbose;
    const char *backend, *op, *type, *m;
    int threads;
};
extern struct hx_t_opts hx_t_opt;

/* Is `name` in the comma-separated list (case-insensitive)? NULL list = everything. */
bool hx_t_in_list(const char *list, const char *name);

/* ---- random data (splitmix64; backend-ops-data.c) */
uint64_t hx_t_next(uint64_t *s);
float hx_t_unif(uint64_t *s);
void *hx_t_xmalloc(size_t n);
/* Uniform values scaled per row; matmul activations also per 256 and per 32 elements. */
float *hx_t_act(int64_t rows, int64_t cols, float amp, uint64_t seed);
float *hx_t_act_mm(int64_t rows, int64_t k, uint64_t seed);

/* ---- weights (backend-ops-data.c) */

extern bool hx_t_have_npu; /* a device under test is HX_NUMERICS_INT8_ROW (set by main) */

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

/* ---- cases (backend-ops-data.c; the filter in test-backend-ops.c, the run in -run.c) */

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

/* ---- devices under test (backend-ops-devices.c) */

#define HX_T_MAX_DUTS 16
#define HX_T_DESC_BYTES 512

struct hx_t_dut {
    char label[96];
    struct hx_device *dev;
    const char *isa;      /* HX_CPU_ISA for this variant, or NULL */
    bool norepack;        /* HX_CPU_REPACK=0 */
    const char *streams;  /* HX_CPU_STREAMS for this variant, or NULL */
    bool novbmi;          /* HX_CPU_VBMI=0: runs the Q1_0 matmuls only (nothing else changes) */
    const char *prefetch; /* HX_CPU_PREFETCH for this variant (matmuls only), or NULL */
    const char *q1_lut;   /* HX_CPU_Q1_LUT for this variant, or NULL */
    bool variant;         /* an extra code path of a backend: big matmuls only with --full */
    uint64_t wid;         /* weight whose handle is cached */
    void *wh;
    int passed, failed, skipped;
    double seconds; /* wall time in this device's runs (weight prepare included) */
};

extern struct hx_t_dut hx_t_ref; /* the oracle */
extern struct hx_t_dut hx_t_duts[HX_T_MAX_DUTS];
extern int hx_t_n_duts;
extern int hx_t_passed, hx_t_failed, hx_t_skipped; /* over every device */
extern int hx_t_sanitized_left; /* big matmuls a simulated device left to the Release build */

/* Open every device --backend selects (and the cpu variants) as a device under test. */
void hx_t_open_devices(const struct hx_device_config *cfg);
/* Set the environment knobs of a device (a cpu variant's; cleared for every other device). */
void hx_t_dut_env(const struct hx_t_dut *d);
/* Drop a device's cached weight handle; drop every device's handle of weight id. */
void hx_t_dut_release(struct hx_t_dut *d);
void hx_t_release_weight(uint64_t id);
/* A device's description under the current environment ("" if it has none). */
void hx_t_describe(struct hx_device *dev, char desc[HX_T_DESC_BYTES]);

/* ---- running a case (backend-ops-run.c) and checking it (backend-ops-check.c) */

/* What one run of a case on one device gave. */
struct hx_t_out {
    int status;
    char err[600];
    uint32_t *buf[HX_T_MAX_BUFS]; /* every buffer read back after the op */
};
void hx_t_out_free(struct hx_t_out *o);
double hx_t_now(void); /* monotonic seconds */

/* The comparator's verdict on one (case, device). */
struct hx_t_cmp {
    double nmse, thr, maxrel, maxrel_lim;
    int64_t worst_row, worst_col;
    bool ok;
    char why[700];
};
/* got against want (ref's) for case c; int8_row: the device is HX_NUMERICS_INT8_ROW. */
void hx_t_compare(const struct hx_t_case *c, const struct hx_t_out *got,
                  const struct hx_t_out *want, bool int8_row, struct hx_t_cmp *r);
/* The comparator on planted errors: the number it missed (or a correct result it rejected). */
int hx_t_selfcheck(void);

/* ---- the case tables (backend-ops-cases.c) */
void hx_t_weight_ops(enum hx_dtype t);
void hx_t_norm_ops(void);
void hx_t_rope_ops(void);
void hx_t_attn_ops(void);
void hx_t_binary_ops(void);
void hx_t_edge_ops(void);
