/*
 * npu-impl.h — private declarations of the NPU backend (npu, npu-sim): the kernel manifest,
 * per-device state, prepared weights, the TXN instruction-stream helpers, the simulator's
 * test hooks and the debug knobs (get_extension "hx.npu.debug").
 *
 * Invariants: a device is usable only if every manifest kernel opened and its instruction
 * stream validated at init; BOs are allocated once per kernel (2 A, 2 C, 1 instruction) or
 * once per weight tile (B) and reused; K padding in A and B is always zero; at most one
 * command is in flight per device, and none once run() has returned an error or
 * synchronize() has returned.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-impl.h"
#include "npu-glue.h"

#define HX_NPU_MAX_KERNELS 32
#define HX_NPU_MAX_K 131071             /* |acc| <= K * 127 * 128 < 2^31 */
#define HX_NPU_DEFAULT_TIMEOUT_MS 5000
#define HX_NPU_A_ROWS 2                 /* A rows per activation row: hi and residual (lo) */

/* ---- manifest (npu-manifest.c) ---------------------------------------------------------- */

struct hx_npu_kernel {
    char name[64];
    char xclbin[512];            /* absolute path, "" = built-in (simulator only) */
    char insts[512];             /* absolute path, "" = generate a synthetic TXN stream */
    struct hx_npu_kernel_desc d; /* d.xclbin_path points at xclbin[] (or NULL if "") */
    char dtype_in[8], dtype_out[8];
    bool ninstr_bytes;           /* the kernel wants arg 2 as a byte count (npu.md §1.4) */
};

struct hx_npu_manifest {
    char source[600];            /* "built-in synthetic (...)" or the manifest's path */
    char description[200];
    int dev_gen;
    int n_kernels;
    struct hx_npu_kernel k[HX_NPU_MAX_KERNELS];
};

/* Load DIR/manifest.json: HX_E_IO / HX_E_FORMAT with the reason in err. Kernels are
 * validated (hx__npu_kernel_validate); the first bad one fails the whole manifest. The JSON is
 * parsed by jansson; a build without it returns HX_E_UNSUPPORTED saying so. */
int hx__npu_manifest_load(const char *dir, struct hx_npu_manifest *out, char *err, size_t n);
/* Parse len bytes of manifest text (relative paths resolved against dir). HX_E_FORMAT with
 * "line L col C: what" in err for a JSON syntax error, else the rule or field that failed. */
int hx__npu_manifest_parse(const char *text, size_t len, const char *dir,
                           struct hx_npu_manifest *out, char *err, size_t n);
/* The built-in synthetic manifest: Qwen3-0.6B GEMM shapes plus two small tile kernels. */
void hx__npu_manifest_builtin(struct hx_npu_manifest *out);
/* Check a kernel against the §2.5 rules of its generation; err[] names the rule. */
int hx__npu_kernel_validate(const struct hx_npu_kernel_desc *d, char *err, size_t n);
/* Write DIR/manifest.json (jansson: one top-level member and one kernel per line),
 * simulator placeholder xclbins and insts_*.bin for the built-in kernels (DIR is created).
 * HX_E_IO with err on failure; HX_E_UNSUPPORTED in a build without jansson. */
int hx__npu_write_synthetic_kernels(const char *dir, char *err, size_t n);
/* Canonical artifact suffix "128x1024x4096_16x64x64_8c" of a kernel. */
void hx__npu_kernel_suffix(const struct hx_npu_kernel_desc *d, char *out, size_t n);

struct hx_npu_choice {
    int kernel;                  /* index into the manifest, -1 = none */
    int64_t n_kt, n_nt;          /* K-tiles and N-tiles: calls per M-tile = n_kt * n_nt */
    double cost_us;              /* modelled cost of one M-tile (for ranking) */
};
/* Cheapest kernel covering a (K, N) weight; false when none does. usable[i] false skips i. */
bool hx__npu_pick_kernel(const struct hx_npu_manifest *man, const bool *usable, int64_t K,
                         int64_t N, struct hx_npu_choice *out);
/* The latency model (µs) of one call of d: ~55 µs dispatch + bytes / 40 GB/s + ops / 25 TOPS
 * (npu.md §3.5-3.6). Only ever reported labelled "modelled". */
double hx__npu_model_call_us(const struct hx_npu_kernel_desc *d);

/* ---- TXN instruction streams (npu-txn.c) ------------------------------------------------- */

#define HX_NPU_TXN_WRITE 0x00
#define HX_NPU_TXN_BLOCKWRITE 0x01
#define HX_NPU_TXN_MASKWRITE 0x03
#define HX_NPU_TXN_PREEMPT 0x06
#define HX_NPU_TXN_LOADPDI 0x08
#define HX_NPU_TXN_TCT 0x80
#define HX_NPU_TXN_DDR_PATCH 0x81

/* Synthetic stream: header + per host BO (BLOCKWRITE of a BD, DDR_PATCH, queue WRITE) + one
 * TCT sync. Writes at most cap words; *n_words gets the full length. */
int hx__npu_txn_generate(const struct hx_npu_kernel_desc *d, uint32_t *words, size_t cap,
                         size_t *n_words);
/* Validate a stream of nbytes: header (devGen, word3 == nbytes), op walk ends exactly at the
 * end, op count == word2, each DDR_PATCH arg index < n_bos and offset < bo_bytes[idx].
 * bo_bytes may be NULL (skip the offset checks). HX_E_FORMAT with err. */
int hx__npu_txn_validate(const void *stream, size_t nbytes, int dev_gen, int n_bos,
                         const size_t *bo_bytes, char *err, size_t err_len);
/* Read an instruction file: raw little-endian words (.bin) or one %08X word per line
 * (legacy .txt). *words released with hx_free. HX_E_IO / HX_E_FORMAT with err. */
int hx__npu_txn_read_file(const char *path, uint32_t **words, size_t *n_words, char *err,
                          size_t n);

/* ---- simulator hooks (npu-sim.c), for tests ---------------------------------------------- */

/* ';'-separated knobs, also read from HX_NPU_SIM at the first open; "" resets them all:
 *   wait=error|abort|timeout|noresponse[@AFTER][xCOUNT]   the (AFTER+1)-th wait on, COUNT times
 *   open=fail[@AFTER]   alloc=fail[@AFTER][xCOUNT]        device open / BO allocation fail
 *   ninstr=bytes        accept arg 2 as a byte count too (strict words by default)
 *   stale=allow         compute with stale device copies instead of flagging unsynced writes
 *   latency=model|sleep|off   modelled device time (default model); sleep also waits for it
 *   compute=off         skip the products (host-overhead benchmarks only; C keeps old data)
 *   exec=lazy           run each command inside wait() on the caller's thread (no worker)
 *   ctxlimit=N          per-process hardware-context limit (default 6 on NPU1, 16 on NPU2)
 *   mutate=acc+1|k0     a wrong kernel: every int32 sum one too large, or without its first K
 *                       element (what engine diff and the tests must catch); mutate=none
 * HX_E_INVAL on a malformed spec (nothing changed). */
int hx__npu_sim_configure(const char *spec);
/* Number of open simulator contexts. */
int hx__npu_sim_open_contexts(void);
/* Contract violations the simulator flagged since the process started (cumulative). */
uint64_t hx__npu_sim_violations(void);

/* ---- debug knobs: get_extension(dev, "hx.npu.debug") -------------------------------------- */

struct hx_npu_debug {
    bool poison_kpad;            /* write 0x5A into K padding of A and B instead of zeros */
    bool garbage_mpad;           /* fill padded A rows with garbage (results must ignore it) */
    bool garbage_npad;           /* fill padded B rows (N padding) with garbage at prepare */
    bool skip_sync_a;            /* "forget" the A sync (the simulator must catch it) */
    bool skip_sync_c;            /* "forget" the C sync back (stale host copy) */
    bool no_overlap;             /* drain after every call (for measuring the overlap) */
    uint32_t timeout_ms;         /* wait timeout (default HX_NPU_DEFAULT_TIMEOUT_MS) */
    int64_t n_inexact_rows;      /* out: weight rows requantized to int8 (rounding error) */
    int64_t n_exact_rows;        /* out: rows converted exactly (the ternary bridge) */
    int64_t n_calls_overlapped;  /* out: calls whose A was prepared while another ran */
};

/* Host-time stages, exposed as get_extension "hx.npu.stages" (double[HX_NPU_ST_COUNT], µs,
 * cumulative) and "hx.npu.stage_names" (const char *const[], NULL-terminated). */
enum hx_npu_stage {
    HX_NPU_ST_QUANT,             /* activation scale + int8 rounding + K/M padding */
    HX_NPU_ST_COPY,              /* A slices copied into BOs (K-tiled shapes only) */
    HX_NPU_ST_SYNC_A,            /* A (and dirty padding) synced to the device */
    HX_NPU_ST_LAUNCH,            /* run(): arguments and start */
    HX_NPU_ST_SYNC_C,            /* C synced back */
    HX_NPU_ST_DEQUANT,           /* int32 -> f32 with scales, K-tile accumulation */
    HX_NPU_ST_COUNT
};

/* ---- device state (npu-mem.c, npu-gemm.c) ------------------------------------------------ */

/* What an A buffer holds: rows of M-tile mt, K-tile kt of op `op` of run `run`. */
struct hx_npu_atag {
    uint64_t run;                /* 0 = nothing valid */
    int64_t op, mt, kt;
};

struct hx_npu_kinst {            /* one opened kernel */
    const struct hx_npu_kernel *kn;
    void *h;
    void *instr_bo;
    uint32_t ninstr;             /* value passed as kernel arg 2 */
    void *a_bo[2], *c_bo[2];
    int8_t *a_map[2];
    int32_t *c_map[2];
    float *a_scale[2];           /* per-A-row scales of what a_bo[i] holds (hi, lo, hi, ...) */
    int64_t a_rows[2];           /* valid A rows in a_bo[i] (2 per activation row) */
    int64_t a_dirty[2];          /* rows of a_bo[i] that may hold non-zero bytes */
    struct hx_npu_atag a_tag[2];
};

struct hx_npu_weight {
    int ki;                      /* index into dev->ki */
    int64_t K, N, n_kt, n_nt;
    float *s_w;                  /* N per-output-channel scales (times weight->scale) */
    void **b_bo;                 /* n_nt * n_kt, index nt * n_kt + kt */
    int64_t n_exact_rows;
};

/* One kernel call of the pipeline. */
struct hx_npu_call {
    int64_t op;                  /* index into the split's ops */
    int64_t mt, nt, kt;
    int slot_a, slot_c;
};

struct hx_npu_dev {
    const struct hx_npu_glue_ops *glue;
    bool simulated;
    struct hx_npu_manifest man;
    struct hx_npu_kinst ki[HX_NPU_MAX_KERNELS];
    bool ki_ok[HX_NPU_MAX_KERNELS];
    int n_ki;
    struct hx_timing_stats timing;
    double stage_us[HX_NPU_ST_COUNT];
    double wait_us;              /* time blocked in wait (excluded from host_us) */
    struct hx_npu_debug dbg;
    uint64_t run_seq;            /* numbers runs, for A tags */
    /* the last call of a run, left in flight by run() and finished by synchronize() */
    bool pending;
    struct hx_npu_call pend;
    const struct hx_op *pend_ops;
    struct hx_npu_atag qa_tag;   /* which (run, op, mt) qa/sa hold (kt unused) */
    /* host scratch, grown on demand */
    int8_t *qa;  size_t qa_cap;  /* quantized activations of one M-tile, rows x K-padded */
    float *sa;   size_t sa_cap;  /* their per-row scales */
    int32_t *acc; size_t acc_cap;/* int32 accumulators of one (M-tile, N-tile) */
    float *row;  size_t row_cap; /* one dequantized weight row (prepare) */
    int8_t *qrow; size_t qrow_cap;
    char cover[256];             /* answer of the "hx.npu.cover:K:N" extension */
    float *res;  size_t res_cap; /* one activation row's residual */
    size_t kernel_bytes;         /* the kernels' own buffers: instruction, A×2, C×2 BOs, scales */
};

static inline struct hx_npu_dev *hx_npu_ctx(struct hx_device *dev)
{
    return (struct hx_npu_dev *)dev->ctx;
}

/* npu-mem.c */
int hx__npu_dev_init(struct hx_device *dev, const struct hx_npu_glue_ops *glue,
                     const struct hx_device_config *cfg, bool simulated);
void hx__npu_dev_fini(struct hx_device *dev);
int hx__npu_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf);
void hx__npu_buffer_free(struct hx_device *dev, struct hx_buffer *buf);
int hx__npu_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                         const void *src, size_t nbytes);
int hx__npu_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                        size_t nbytes);
int hx__npu_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle);
int hx__npu_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                         size_t *out);
void hx__npu_weight_release(struct hx_device *dev, void *handle);
/* The backend's own buffers for the plan's memory (hx_backend_ops.scratch_bytes): [0] every
 * kernel's BOs and A scales (from the opening on), [1..4] the K-tiling scratch (qa, sa, acc)
 * and the residual row of a run, [5..6] the row buffers of a weight's conversion. */
int hx__npu_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                          size_t out[HX_SCRATCH_BUFS]);
/* Grow *p to hold n elements of elem bytes. */
int hx__npu_grow(void **p, size_t *cap, size_t n, size_t elem);

/* npu-gemm.c */
bool hx__npu_supports(struct hx_device *dev, const struct hx_op_desc *op);
int hx__npu_run(struct hx_device *dev, const struct hx_split *split);
int hx__npu_synchronize(struct hx_device *dev);
int hx__npu_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us);
/* Quantize one f32 row of k values to int8 (round to nearest, |q| <= 127) into q[0..k) and
 * write pad_byte into q[k..k_pad). Returns the scale (amax / 127; 0 for an all-zero row). */
float hx__npu_quantize_row(const float *x, int64_t k, int8_t *q, int64_t k_pad, int8_t pad_byte);
/* One activation row as two int8 rows (docs/npu-backend.md §2): hi = quantize_row(x) with
 * scale *s_hi, lo = quantize_row(x − *s_hi·hi) with scale *s_lo (res: k floats of scratch).
 * x ≈ *s_hi·hi + *s_lo·lo with |error| <= *s_lo / 2. Both rows are padded like quantize_row. */
void hx__npu_quantize_row2(const float *x, int64_t k, int8_t *hi, int8_t *lo, int64_t k_pad,
                           int8_t pad_byte, float *s_hi, float *s_lo, float *res);
/* Convert one weight row to int8 with one scale. Tries an exact conversion first (every
 * value an integer multiple, |q| <= 127, of the smallest non-zero magnitude — true for
 * ternary and binary rows); else amax / 127 rounding. *exact says which. Returns the scale. */
float hx__npu_weight_row_to_i8(const float *w, int64_t k, int8_t *q, bool *exact);
