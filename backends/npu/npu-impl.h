/*
 * npu-impl.h — private declarations of the NPU backend (npu, npu-sim): the kernel manifest,
 * per-device state, prepared weights, the TXN instruction-stream helpers, the simulator's
 * test hooks and the debug knobs (get_extension "hx.npu.debug").
 *
 * Invariants: a device is usable only if every manifest kernel opened and its instruction
 * stream validated at init; BOs are allocated once per kernel (2 A, 2 C, 1 instruction) or
 * once per weight tile (B) and reused; K padding in A and B is always zero.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-impl.h"
#include "npu-glue.h"

#define HX_NPU_MAX_KERNELS 32
#define HX_NPU_MAX_CALLS_PER_TILE 256   /* "covers": K-tiles x N-tiles per M-tile */
#define HX_NPU_MAX_K 131071             /* |acc| <= K * 128 * 128 < 2^31 */

/* ---- manifest (npu-manifest.c) ---------------------------------------------------------- */

struct hx_npu_kernel {
    char name[64];
    char xclbin[512];            /* absolute path, "" = built-in (simulator only) */
    char insts[512];             /* absolute path, "" = generate a synthetic TXN stream */
    struct hx_npu_kernel_desc d; /* d.xclbin_path points at xclbin[] once placed */
    char dtype_in[8], dtype_out[8];
};

struct hx_npu_manifest {
    char source[600];            /* "built-in synthetic (Qwen3-0.6B + tile kernels)" or path */
    int dev_gen;
    int n_kernels;
    struct hx_npu_kernel k[HX_NPU_MAX_KERNELS];
};

/* Load DIR/manifest.json. HX_E_IO / HX_E_FORMAT / HX_E_UNSUPPORTED (no jansson) + message. */
int hx__npu_manifest_load(const char *dir, struct hx_npu_manifest *out, char *err, size_t n);
/* The built-in synthetic manifest (no files). */
void hx__npu_manifest_builtin(struct hx_npu_manifest *out);
/* Check a kernel against the §2.5 rules of its generation; err[] names the rule. */
int hx__npu_kernel_validate(const struct hx_npu_kernel_desc *d, char *err, size_t n);
/* Write DIR/manifest.json + placeholder xclbin + insts_*.bin for the built-in kernels. */
int hx__npu_write_synthetic_kernels(const char *dir);

/* ---- TXN instruction streams (npu-txn.c) ------------------------------------------------- */

#define HX_NPU_TXN_WRITE 0x00
#define HX_NPU_TXN_BLOCKWRITE 0x01
#define HX_NPU_TXN_MASKWRITE 0x03
#define HX_NPU_TXN_LOADPDI 0x08
#define HX_NPU_TXN_PREEMPT 0x06
#define HX_NPU_TXN_TCT 0x80
#define HX_NPU_TXN_DDR_PATCH 0x81

/* Synthetic stream: header + one DDR_PATCH per host BO + one TCT sync. Writes at most cap
 * words; *n_words gets the full length. */
int hx__npu_txn_generate(const struct hx_npu_kernel_desc *d, uint32_t *words, size_t cap,
                         size_t *n_words);
/* Validate a stream of nbytes: header (devGen, word3 == nbytes), op walk ends exactly at the
 * end, op count == word2, each DDR_PATCH arg index < n_bos and offset < bo_bytes[idx].
 * bo_bytes may be NULL (skip the offset checks). */
int hx__npu_txn_validate(const void *stream, size_t nbytes, int dev_gen, int n_bos,
                         const size_t *bo_bytes, char *err, size_t err_len);

/* ---- simulator hooks (npu-sim.c), for tests ---------------------------------------------- */

/* Inject faults: "wait=error|abort|timeout|noresponse[@after[xcount]]", "open=fail",
 * "alloc=fail[@after]", "ninstr=bytes" (accept byte counts), "latency=model|sleep|off",
 * ';'-separated; "" clears. Also read once from HX_NPU_SIM at first open. */
int hx__npu_sim_configure(const char *spec);
/* Number of open simulator contexts (per-process limit 6 on NPU1, 16 on NPU2). */
int hx__npu_sim_open_contexts(void);

/* ---- debug knobs: get_extension(dev, "hx.npu.debug") -------------------------------------- */

struct hx_npu_debug {
    bool poison_kpad;            /* write 0x5A into K padding of A and B instead of zeros */
    bool skip_sync_a;            /* "forget" the A sync (the simulator must catch it) */
    bool garbage_mpad;           /* fill padded A rows with garbage (results must ignore it) */
    uint32_t timeout_ms;         /* wait timeout (default 5000) */
    int64_t n_inexact_rows;      /* out: ternary/binary rows that had to fall back to int8 */
    int64_t n_exact_rows;        /* out: rows converted exactly (ternary bridge) */
};

/* ---- device state (npu-host.c) ----------------------------------------------------------- */

struct hx_npu_kinst {            /* one opened kernel */
    const struct hx_npu_kernel *kn;
    void *h;
    void *instr_bo;
    uint32_t ninstr;
    void *a_bo[2], *c_bo[2];
    int8_t *a_map[2];
    int32_t *c_map[2];
    int64_t a_rows_dirty[2];     /* rows of a_map[i] that hold data besides zeros */
};

struct hx_npu_dev {
    const struct hx_npu_glue_ops *glue;
    struct hx_npu_manifest man;
    struct hx_npu_kinst ki[HX_NPU_MAX_KERNELS];
    int n_ki;
    bool usable;
    char unusable_why[256];
    struct hx_timing_stats timing;
    struct hx_npu_debug dbg;
    /* host scratch, grown on demand */
    int8_t *qa;  size_t qa_cap;  /* quantized activations, rows x Kpad */
    float *sa;   size_t sa_cap;  /* per-row activation scales */
    int32_t *acc; size_t acc_cap;/* int32 accumulators of one (M-tile, N-tile) */
};

struct hx_npu_weight {
    struct hx_npu_kinst *ki;
    int64_t K, N, n_kt, n_nt;
    float *s_w;                  /* N per-output-channel scales (times weight->scale) */
    void **b_bo;                 /* n_nt * n_kt, index nt * n_kt + kt */
    bool exact;                  /* every row converted exactly (ternary bridge) */
};

int hx__npu_dev_init(struct hx_device *dev, const struct hx_npu_glue_ops *glue,
                     const struct hx_device_config *cfg, bool builtin_ok);
void hx__npu_dev_fini(struct hx_device *dev);
int hx__npu_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf);
void hx__npu_buffer_free(struct hx_device *dev, struct hx_buffer *buf);
int hx__npu_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                         const void *src, size_t nbytes);
int hx__npu_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                        size_t nbytes);
int hx__npu_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle);
void hx__npu_weight_release(struct hx_device *dev, void *handle);
bool hx__npu_supports(struct hx_device *dev, const struct hx_op_desc *op);
int hx__npu_run(struct hx_device *dev, const struct hx_split *split);
int hx__npu_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us);
void *hx__npu_get_extension(struct hx_device *dev, const char *name);
void hx__npu_describe(struct hx_device *dev, char *out, size_t len);
/* The kernel chosen for a (K, N) weight, or NULL; *calls = K-tiles * N-tiles. */
const struct hx_npu_kernel *hx__npu_pick_kernel(const struct hx_npu_manifest *man, int64_t K,
                                                int64_t N, int64_t *calls);
