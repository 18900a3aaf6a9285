/*
 * hx-backend.h — the backend-author API: device and buffer objects, weights, op descriptors,
 * splits and the backend vtable. The weight types and their quantization are hx-dtype.h's.
 *
 * Object model: backend (a runtime: cpu, ref, vulkan, hip, npu, npu-sim) → device → buffer.
 * Each object is { ops, ctx, parent }; the core allocates a device's private state from the
 * backend's declared ctx_size. The core calls a backend only through its wrappers (probing
 * and device_info: core/registry.c; everything else: hx__dev_*, core/device.c), which check
 * arguments, apply the defaults of optional entries, log, and are the fault-injection seam.
 *
 * Placement is decided only by the scheduler in core/. A backend answers questions
 * (supports, estimate_cost) and runs the splits it is given.
 *
 * Shapes are (rows, cols) in elements. Activations are row-major f32: row r of a tensor
 * reference starts at byte offset + r * row_stride_bytes. A weight is (n_rows = N outputs,
 * n_cols = K inputs), each row stored as K/block_elems consecutive GGUF blocks.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-dtype.h"
#include "hx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ------------------------------------------------------------------------------ */

enum hx_device_kind {
    HX_DEVICE_CPU,
    HX_DEVICE_GPU,   /* discrete */
    HX_DEVICE_IGPU,  /* integrated, shares system memory */
    HX_DEVICE_NPU,
    HX_DEVICE_KIND_COUNT
};
HX_API const char *hx_device_kind_name(enum hx_device_kind k);

/* What a device's matmuls compute: the error model its results are checked against
 * (core/numerics.h; derived in docs/testing.md "Thresholds, and why"). 0 = float. */
enum hx_numerics {
    /* Weights as stored; activations rounded at most as the weight type allows (none for
     * F32, to f16 for F16, to bf16 for BF16, symmetric int8 with one scale per block of at
     * most 256 for the quantized types); f32 accumulation. cpu, ref, Vulkan, HIP. */
    HX_NUMERICS_FLOAT,
    /* int8 activations with one scale per row, each row sent with its int8-rounded residual
     * (a second row, docs/npu-backend.md §2) × int8 weights with one scale per output channel
     * (exact where a row is integer multiples of one value), exact int32 sums (architecture.md's
     * NPU GEMM; npu, npu-sim). */
    HX_NUMERICS_INT8_ROW,
    HX_NUMERICS_COUNT
};

struct hx_device_info {
    uint32_t struct_size;
    char name[128];          /* "cpu", "llvmpipe (LLVM 15.0.6, 256 bits)", "npu-sim" */
    char description[256];   /* driver / features line, free text */
    enum hx_device_kind kind;
    /* The memory the engine may use on the device (the scheduler's default budget, which
     * --mem overrides): total, and free now; for a unified-memory GPU, the share the driver
     * lets the GPU use (its device-local heaps). 0 = unknown. */
    size_t memory_total_bytes;
    size_t memory_free_bytes;
    size_t max_alloc_bytes;      /* 0 = unlimited */
    size_t alignment_bytes;      /* buffer offset alignment */
    bool unified_memory;         /* host and device share memory (CPU, APU, lavapipe) */
    uint32_t weight_types;       /* bitmask of 1u << enum hx_dtype it can run matmuls on */
    bool simulated;              /* timings are not hardware performance (npu-sim) */
    enum hx_numerics numerics;   /* how its matmuls round (0: HX_NUMERICS_FLOAT) */
};

/* Init options handed to every device; fields a backend does not use are ignored. */
struct hx_device_config {
    uint32_t struct_size;
    int n_threads;               /* CPU threads, > 0 */
    const char *kernels_dir;     /* NPU kernel manifest directory or NULL */
};

struct hx_backend_ops;

/* A device instance. Created and owned by the core; `ctx` points at ops->ctx_size bytes of
 * zeroed backend state allocated by the core before init and freed after fini. */
struct hx_device {
    const struct hx_backend_ops *ops;
    void *ctx;
    int index;                   /* index among its backend's devices */
    struct hx_device_info info;
    char id[64];                 /* "cpu", "vulkan:0", "npu-sim" */
    char last_error[512];        /* set by hx_device_set_error; read by the scheduler */
    bool healthy;                /* cleared by the scheduler after a failure */
};

/* Record a failure message on the device (also logged at ERROR with [id]). Returns status. */
HX_API int hx_device_set_error(struct hx_device *dev, int status, const char *fmt, ...)
    HX_PRINTF(3, 4);

/* ---- buffers ------------------------------------------------------------------------------ */

/* Device memory exists only as hx_buffer, allocated through the device that reads it. */
struct hx_buffer {
    struct hx_device *dev;
    void *ctx;        /* backend handle */
    void *host;       /* non-NULL when the memory is host-visible (CPU, unified, mapped) */
    size_t nbytes;
};

/* A row-major f32 activation tensor: (n_rows, n_cols), row r at buf + offset + r*stride. */
struct hx_tensor_ref {
    struct hx_buffer *buf;
    size_t offset_bytes;
    int64_t n_rows;
    int64_t n_cols;
    size_t row_stride_bytes;
};

/* ---- weights ------------------------------------------------------------------------------ */

#define HX_WEIGHT_MAX_PARTS 3
#define HX_WEIGHT_PART_ROWS 16 /* parts of a fused weight are whole multiples of this */

/* A weight matrix as stored in the model file (mmapped, read-only): (n_rows = N, n_cols = K).
 * 1-D tensors (norm gains) have n_rows = 1. */
struct hx_weight {
    const char *name;        /* GGUF tensor name, or "blk.3.attn_qkv (fused)" */
    enum hx_dtype type;
    int64_t n_rows;
    int64_t n_cols;
    const void *data;        /* host bytes, n_rows * hx_dtype_row_bytes(type, n_cols) */
    size_t nbytes;
    float scale;             /* multiply the matmul result by this (BitNet .scale); 1.0 = none */
    /* The type's tensor scale (hx-dtype.h: I2_S's tail, which is not part of data): a factor of
     * every element, as a block's d is, in matmuls and embeddings alike. Read by the loader
     * with hx_dtype_tensor_scale; ignored for types without one. */
    float tensor_scale;
    /* A fused weight (QKV, gate|up) whose parts do not lie end to end in the file is described
     * as its parts: n_parts > 0, parts[i] the bytes of part i's rows in place in the model's
     * mapping, in row order, and data NULL until a device that runs from one host matrix asks
     * for it (hx_weight_host). A device reads such a weight through hx_weight_span,
     * hx_weight_read or hx_weight_dequantize_row, straight from the mapping into its own
     * memory. n_parts = 0: data holds every row. */
    int n_parts;
    struct hx_weight_part {
        const void *data;
        size_t nbytes;   /* whole rows */
    } parts[HX_WEIGHT_MAX_PARTS];
    /* A fused matrix (the loader's Q|K|V, gate|up) whose parts have different tensor scales:
     * part i is rows [tpart_row[i], tpart_row[i + 1]) and has tensor scale tpart_tscale[i], for
     * i < n_tparts (tpart_row[0] = 0, tpart_row[n_tparts] = n_rows; tensor_scale =
     * tpart_tscale[0]),
     * each a multiple of HX_WEIGHT_PART_ROWS rows (the cpu backend's x16 tiles).
     * n_tparts 0: tensor_scale is every row's. hx_weight_row_tscale reads it. */
    int n_tparts;
    int64_t tpart_row[HX_WEIGHT_MAX_PARTS + 1];
    float tpart_tscale[HX_WEIGHT_MAX_PARTS];
};

/* The tensor scale of row r of w (its part's, for a fused matrix with n_tparts > 0). */
static inline float hx_weight_row_tscale(const struct hx_weight *w, int64_t r)
{
    for (int i = 1; i < w->n_tparts; i++)
        if (r < w->tpart_row[i]) return w->tpart_tscale[i - 1];
    return w->n_tparts > 0 ? w->tpart_tscale[w->n_tparts - 1] : w->tensor_scale;
}

/* Row r of w as f32, its tensor scale applied (hx_dequantize_row_scaled). */
HX_API int hx_weight_dequantize_row(const struct hx_weight *w, int64_t r, float *dst);
/* The run of w's row bytes at byte offset off (< n_rows * row bytes) that lies contiguous in
 * host memory: *src and *n, at most up to the end of the rows. Walk a weight with it to copy
 * or upload each piece without a staging copy: for (off = 0; off < total; off += n) ... */
HX_API int hx_weight_span(const struct hx_weight *w, size_t off, const void **src, size_t *n);
/* Copy w's row bytes [off, off + n) to dst, from wherever they lie. */
HX_API int hx_weight_read(const struct hx_weight *w, size_t off, void *dst, size_t n);
/* w's rows as one host matrix: w->data, or for a weight of parts a copy made on the first
 * call and kept with the weight (freed with the model, or with the tensor-split slice that
 * owns it), for the devices that run from host memory (ref; cpu where it does not repack).
 * Thread-safe. Counted by hx_weight_host_bytes. */
HX_API int hx_weight_host(const struct hx_weight *w, const void **data);
/* Bytes of host copies hx_weight_host made that are still held (the whole process). */
HX_API size_t hx_weight_host_bytes(void);

/* ---- ops ---------------------------------------------------------------------------------- */

enum hx_op_kind {
    HX_OP_EMBED,      /* dst[r] = dequant(weight row tokens[r]) */
    HX_OP_RMS_NORM,   /* dst = src0 * rsqrt(mean(src0^2) + eps) * gain, per group of cols */
    HX_OP_MATMUL,     /* dst (n, N) = src0 (n, K) · weightᵀ, times weight->scale */
    HX_OP_ROPE,       /* rotate src0 in place or into dst, per head, at pos[r] */
    HX_OP_ATTN,       /* write k,v rows into the KV cache, then causal GQA attention */
    HX_OP_SWIGLU,     /* dst = silu(src0) * src1 */
    HX_OP_RELU2_GLU,  /* dst = max(src0, 0)^2 * src1 */
    HX_OP_ADD,        /* dst = src0 + src1 */
    HX_OP_KIND_COUNT
};
HX_API const char *hx_op_kind_name(enum hx_op_kind k);

/* What a policy can name. */
enum hx_op_class {
    HX_CLASS_EMBED,
    HX_CLASS_NORM,
    HX_CLASS_QKV,
    HX_CLASS_ROPE,
    HX_CLASS_ATTN,
    HX_CLASS_O,
    HX_CLASS_GATE_UP,
    HX_CLASS_ACT,
    HX_CLASS_DOWN,
    HX_CLASS_ADD,
    HX_CLASS_LM_HEAD,
    HX_CLASS_COUNT
};
HX_API const char *hx_op_class_name(enum hx_op_class c);   /* "qkv", "gate_up", ... */
HX_API int hx_op_class_from_name(const char *name, enum hx_op_class *out);

enum hx_rope_mode {
    HX_ROPE_NORM,  /* adjacent pairs (x[2i], x[2i+1]) — llama */
    HX_ROPE_NEOX,  /* half split (x[i], x[i + n_rot/2]) — qwen3, bitnet */
};

/* Plain description of one op, enough for supports() and estimate_cost(). */
struct hx_op_desc {
    enum hx_op_kind kind;
    enum hx_op_class cls;
    int32_t layer;           /* -1 for embedding / output */
    int64_t n_rows;          /* tokens in the batch */
    int64_t n_in;            /* K for matmul; rows of the table for embed; width of src0 otherwise */
    int64_t n_out;           /* N for matmul; width of dst otherwise */
    enum hx_dtype wtype;     /* matmul / embed weight type; F32 for norm gains */
    union {
        struct { float eps; int64_t group; } norm;            /* group = cols per norm */
        struct {
            int32_t n_head, head_dim, n_rot;
            float base, freq_scale;
            enum hx_rope_mode mode;
        } rope;
        struct {
            int32_t n_head, n_head_kv, head_dim;
            float scale;
            int64_t n_ctx;   /* positions per sequence in the cache */
            int32_t n_seq;   /* sequences (slots) in the cache */
        } attn;
    } p;
};

/* One op ready to run on a device. */
struct hx_op {
    struct hx_op_desc desc;
    struct hx_tensor_ref src[3];   /* ATTN: q, k, v; binary ops: src0, src1 */
    struct hx_tensor_ref dst;      /* may alias src[0] for ROPE and ADD (in place) */
    const struct hx_weight *weight;/* MATMUL, EMBED, RMS_NORM gain; NULL otherwise */
    void *weight_handle;           /* what this device's weight_prepare returned */
    const struct hx_weight *aux;   /* ROPE: rope_freqs factors (F32, n_rot/2) or NULL */
    void *aux_handle;
    /* ATTN: the layer's KV cache on this device, each (n_seq * n_ctx, n_head_kv * head_dim)
     * f32 rows; row (seq * n_ctx + pos). */
    struct hx_tensor_ref k_cache, v_cache;
};

/* A contiguous span of ops for one device, with the batch's host-side row metadata. */
struct hx_split {
    uint32_t struct_size;
    const struct hx_op *ops;
    int64_t n_ops;
    int64_t n_rows;
    const int32_t *tokens;   /* n_rows token ids (EMBED) */
    const int32_t *pos;      /* n_rows positions (ROPE, ATTN) */
    const int32_t *seq;      /* n_rows sequence ids (ATTN) */
};

/* ---- the vtable --------------------------------------------------------------------------- */

/* 2: caps says what the core used to infer from an entry being NULL (asynchrony).
 * 3: probe reports the devices too (device_count is gone); the core checks device indices.
 * 4: weight_bytes appended (the scheduler's memory accounting, docs/policies.md).
 * 5: scratch_bytes appended (a backend's own buffers in that accounting).
 * 6: HX_SCRATCH_BUFS 4 -> 8 (the NPU reports 7 buffers); scratch_bytes answers an empty split.
 * 2, 3 and 6 changed the layout rather than appending, which is safe only because every table is
 * compiled with the core: the registry rejects a table of another version. */
#define HX_BACKEND_ABI_VERSION 6

/* Buffers of its own a backend may report (scratch_bytes). */
#define HX_SCRATCH_BUFS 8

/* What a backend's probe found. The core zeroes it before the call and keeps it. */
struct hx_backend_probe {
    int score;        /* ranks defaults: higher wins (cpu is 10) */
    int n_devices;    /* devices device_info and init accept: indices 0 .. n_devices - 1 */
    char why[256];    /* what is missing (when unusable or without devices), or what was left out */
};

/* What a backend can do, said rather than inferred (hx_backend_ops.caps). */
enum hx_backend_cap {
    /* run() may return before the split completes; synchronize() waits for it. Without this,
     * run() returns with the results in place and synchronize is never called. */
    HX_BACKEND_ASYNC = 1u << 0,
};

/*
 * Entries marked (optional) may be NULL; the default is written beside each. New entries are
 * only appended, bumping HX_BACKEND_ABI_VERSION. All entries returning int return hx_status.
 * The core reads the table only in its wrappers (core/registry.c, core/device.c).
 */
struct hx_backend_ops {
    uint32_t abi_version;    /* HX_BACKEND_ABI_VERSION */
    uint32_t struct_size;    /* sizeof(struct hx_backend_ops) */
    const char *name;        /* "cpu", "ref", "vulkan", "hip", "npu", "npu-sim" */
    size_t ctx_size;         /* bytes of per-device state the core allocates (zeroed) */
    uint32_t caps;           /* enum hx_backend_cap bits */

    /* Is the runtime usable here, and with how many devices? Called once per process, from
     * one thread, before any other entry: the backend's one-time discovery (loading its
     * library, creating an instance, listing devices) happens here, and nothing else that a
     * caller could notice. HX_OK, or HX_E_UNAVAILABLE with why[] saying what is missing
     * ("libvulkan.so.1 not found"). */
    int (*probe)(struct hx_backend_probe *out);
    /* Describe device idx (the core checks 0 <= idx < n_devices) without initializing it;
     * out arrives zeroed, struct_size set. */
    int (*device_info)(int idx, struct hx_device_info *out);

    int (*init)(struct hx_device *dev, const struct hx_device_config *cfg);
    void (*fini)(struct hx_device *dev);                 /* (optional) default: nothing */

    int (*buffer_alloc)(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf);
    void (*buffer_free)(struct hx_device *dev, struct hx_buffer *buf);
    /* Blocking; waits for pending work touching the buffer. */
    int (*buffer_write)(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                        const void *src, size_t nbytes);
    int (*buffer_read)(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                       size_t nbytes);

    /* Make a weight usable on the device (upload, repack, convert) once at load. *handle is
     * passed back in hx_op.weight_handle. The hx_weight outlives the handle. A fused weight
     * may come as its parts (data NULL, n_parts > 0): read it with hx_weight_span /
     * hx_weight_read / hx_weight_dequantize_row, or hx_weight_host if the device runs it from
     * one host matrix. */
    int (*weight_prepare)(struct hx_device *dev, const struct hx_weight *w, void **handle);
    void (*weight_release)(struct hx_device *dev, void *handle); /* (optional) nothing */

    /* Pure and cheap: can this device run the op as described? */
    bool (*supports)(struct hx_device *dev, const struct hx_op_desc *op);

    /* Run a split. With HX_BACKEND_ASYNC it may return before the split completes, and the
     * split and every buffer it names stay valid until synchronize returns. */
    int (*run)(struct hx_device *dev, const struct hx_split *split);
    /* Wait for all enqueued work; returns the first error of it. Present exactly when caps
     * has HX_BACKEND_ASYNC (the registry rejects a table where they disagree). */
    int (*synchronize)(struct hx_device *dev);

    /* (optional) predicted µs for the op on this device; default: HX_E_UNSUPPORTED (unknown) */
    int (*estimate_cost)(struct hx_device *dev, const struct hx_op_desc *op, double *us);
    /* (optional) device → device copy; default: read into a host bounce buffer and write */
    int (*copy)(struct hx_device *dev, struct hx_buffer *dst, size_t dst_off,
                struct hx_buffer *src, size_t src_off, size_t nbytes);
    /* (optional) debug knobs only, never something the core depends on; default NULL */
    void *(*get_extension)(struct hx_device *dev, const char *name);
    /* (optional) extra text for `engine devices` (manifest, kernels); default nothing.
     * Writes a NUL-terminated string of at most len bytes. */
    void (*describe)(struct hx_device *dev, char *out, size_t len);
    /* (optional) bytes of memory weight w takes on this device once prepared: with handle NULL,
     * what weight_prepare(w) would take (the scheduler's plan, before anything is loaded); with
     * a handle weight_prepare returned, what that handle holds. Both must agree (a test checks).
     * Weights used in place from the model's mapping count their mapped bytes. Pure and cheap.
     * Default: w->nbytes (the weight as stored). */
    int (*weight_bytes)(struct hx_device *dev, const struct hx_weight *w, void *handle,
                        size_t *out);
    /* (optional) The memory of the backend's own buffers (device memory, or host memory the
     * backend allocates for the device: activation scratch, split metadata, per-thread work
     * buffers, per-kernel buffer objects), one entry per buffer, at most HX_SCRATCH_BUFS.
     * With sp, what each buffer must hold to run sp: the scheduler takes the largest over a
     * plan's splits, which must be what the buffers hold after running them (a test checks).
     * The scheduler passes a plan's splits: ops without buffers or weight handles (desc,
     * weight, aux and the geometry of src and dst are set), positions at the context's end;
     * a buffer a weight's preparation grows counts in the splits whose ops read that weight.
     * An empty split (n_ops 0) asks for what the device holds from its opening on, whatever
     * it runs (buffers allocated at init; 0 for those that grow with the splits), and is asked
     * of every device the scheduler opens. With sp NULL, what each buffer holds now (a buffer
     * a call allocates and frees again: the most it has held). Pure and cheap. Default: none. */
    int (*scratch_bytes)(struct hx_device *dev, const struct hx_split *sp,
                         size_t out[HX_SCRATCH_BUFS]);
};

/* ---- helpers for backends ------------------------------------------------------------------ */

/* Pointer to row r of a host-visible tensor reference. */
static inline float *hx_tensor_row(const struct hx_tensor_ref *t, int64_t r)
{
    return (float *)((char *)t->buf->host + t->offset_bytes + (size_t)r * t->row_stride_bytes);
}

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * get_extension(dev, "hx.timing") (optional): the device's live cumulative counters, for
 * benchmarks to report host-side time separately from device time. A benchmark reads them
 * before and after a run and prints the difference. device_modelled marks times produced by
 * a latency model (simulator), which must never be reported as hardware performance.
 */
struct hx_timing_stats {
    uint64_t n_calls;        /* device launches */
    double host_us;          /* host work: quantize, pack, copy, sync, dequantize */
    double device_us;        /* device execution (measured, or modelled if flagged) */
    bool device_modelled;
};

/*
 * get_extension(dev, "hx.npu.sim") (npu-sim devices): the simulator's process-wide controls,
 * for the NPU benchmark. configure applies a knob spec, HX_NPU_SIM's grammar
 * ("latency=model;compute=on;exec=lazy", docs/npu-backend.md), to every simulated device:
 * HX_E_INVAL on a malformed spec, which changes nothing. write_kernels writes the simulator's
 * synthetic kernels (manifest.json, placeholder xclbins, instruction streams) into dir, which
 * it creates: HX_E_IO with err filled (at most len bytes), HX_E_UNSUPPORTED in a build
 * without jansson.
 */
struct hx_npu_sim_ext {
    int (*configure)(const char *spec);
    int (*write_kernels)(const char *dir, char *err, size_t len);
};

#ifdef __cplusplus
}
#endif
