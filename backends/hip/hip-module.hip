/*
 * hip-module.hip — the HIP device module: device enumeration (with the reason when none is
 * usable; hip-enum.h), buffers, weight upload (a fused weight of parts part by part), and run(), which
 * checks a split and enqueues its kernels on the device's compute stream (the checks and each
 * op's launches: hip-launch.h, included below). One source, three
 * builds (hip-module.h): hipcc for AMD, nvcc -x cu for NVIDIA (hip-compat.h), the host
 * compiler for the emulator (hip-emu.h).
 *
 * Streams: `stream` runs splits and activation transfers in order, so buffer reads and
 * writes are ordered after the kernels that touch them; `xfer` uploads weights through two
 * pinned staging buffers, the host copy of one chunk overlapping the DMA of the other.
 * Decode splits (few rows) are captured once per shape as a graph and replayed with one launch
 * (hip-graph.h); the row metadata they read is written to the split's scratch first.
 * Timing: events around the splits since the last synchronize give device time
 * (get_extension "hx.timing"). Every runtime failure is returned as HX_E_DEVICE or
 * HX_E_NOMEM with the call and its native error name; nothing here prints or aborts.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hip-module.h"
#include "hip-ops.h"

#ifndef HX_HIP_TARGETS
#define HX_HIP_TARGETS "unknown"
#endif

#define HX_HIP_MAX_DEVICES 16
#define HX_HIP_STAGE_BYTES ((size_t)8 << 20)
#define HX_HIP_GEMV_ROWS_MAX (4 * HX_HIP_GEMV_MAX_ROWS) /* beyond this: the tiled GEMM */

static struct hx_hip_host hx_hip_h;

/* Cleanup and best-effort calls whose error has nowhere better to go. */
#define HX_HIP_IGNORE(call) ((void)(call))

struct hx_hip_graphs;

struct hx_hip_dev {
    int idx; /* runtime device ordinal */
    hipStream_t stream, xfer;
    hipEvent_t ev_start, ev_stop;
    bool timing_open; /* ev_start recorded, not yet read by synchronize */
    int n_sm;         /* multiprocessors (the GEMVs' split-K plan) */
    int gemm;         /* prefill GEMM: HX_HIP_GEMM_* (hx_hip_gemm_pick) */
    bool gemm_float;  /* F32 / BF16 weights on the mma float paths (hx_hip_gemm_pick) */
    int attn;         /* HX_HIP_ATTN: enum hx_hip_attn_mode */
    void *scratch;    /* row metadata + int8 activations + split-K partial sums */
    size_t scratch_bytes;
    int32_t *meta; /* host: the row metadata, written to scratch with one copy */
    size_t meta_bytes;
    struct hx_hip_graphs *graphs; /* hip-graph.h: captured decode splits, host-call counters */
    void *stage[2]; /* pinned upload buffers (NULL: upload from pageable memory) */
    hipEvent_t staged[2];
    bool stage_busy[2];
    struct hx_timing_stats timing;
    char code[200]; /* where its kernels come from ("prebuilt code object for gfx1030") */
#if defined(HX_HIP_AMD_RTC)
    struct hx_hip_rtc_mod *rtc; /* the hipRTC code object; NULL: the prebuilt code */
#endif
};

struct hx_hip_weight {
    void *d;
    enum hx_dtype type;
    int64_t n_rows, n_cols;
    size_t row_bytes;
    float scale;
    float ts; /* the tensor scale (I2_S: hx_weight.tensor_scale; else unused) */
    /* a fused weight with a tensor scale per part (hx_weight.n_tparts): part i is rows
     * [part_row[i], part_row[i + 1]) with scale part_ts[i]; 0 parts: ts for every row */
    int n_parts;
    int64_t part_row[HX_WEIGHT_MAX_PARTS + 1];
    float part_ts[HX_WEIGHT_MAX_PARTS];
};

/* ---- errors --------------------------------------------------------------------------------- */

static int hx_hip_fail(hipError_t e, const char *what, char *err, size_t len)
{
    snprintf(err, len, "%s: %s (%s)", what, hipGetErrorName(e), hipGetErrorString(e));
    return e == hipErrorOutOfMemory ? HX_E_NOMEM : HX_E_DEVICE;
}
#define HX_HIP_TRY(call, what)                                                                     \
    do {                                                                                           \
        hipError_t hx_e_ = (call);                                                                 \
        if (hx_e_ != hipSuccess) return hx_hip_fail(hx_e_, (what), err, len);                      \
    } while (0)

static int hx_hip_inval(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int hx_hip_inval(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return HX_E_INVAL;
}

static void hx_hip_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hx_hip_log(int level, const char *fmt, ...)
{
    if (!hx_hip_h.log_fn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hx_hip_h.log_fn(level, msg);
}

static double hx_hip_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

#if defined(HX_HIP_AMD_RTC)
#include "hip-rtc.h"
#endif

/* ---- types on the host ------------------------------------------------------------------------ */

/* The types the kernels decode (hip-decode.h): all but Q5_K, whose matmuls run on the CPU
 * (the scheduler's fallback) until it has kernels here. */
static bool hx_hip_type_ok(int t)
{
    return t >= 0 && t < HX_DTYPE_COUNT && t != HX_DTYPE_Q5_K;
}

static int64_t hx_hip_block_elems(enum hx_dtype t)
{
    switch (t) {
    case HX_DTYPE_Q8_0: return hx_hip_blk<HX_DTYPE_Q8_0>::E;
    case HX_DTYPE_Q4_0: return hx_hip_blk<HX_DTYPE_Q4_0>::E;
    case HX_DTYPE_Q4_K: return hx_hip_blk<HX_DTYPE_Q4_K>::E;
    case HX_DTYPE_Q6_K: return hx_hip_blk<HX_DTYPE_Q6_K>::E;
    case HX_DTYPE_TQ1_0: return hx_hip_blk<HX_DTYPE_TQ1_0>::E;
    case HX_DTYPE_TQ2_0: return hx_hip_blk<HX_DTYPE_TQ2_0>::E;
    case HX_DTYPE_Q1_0: return hx_hip_blk<HX_DTYPE_Q1_0>::E;
    case HX_DTYPE_Q2_0: return hx_hip_blk<HX_DTYPE_Q2_0>::E;
    case HX_DTYPE_I2_S: return hx_hip_blk<HX_DTYPE_I2_S>::E;
    default: return 1;
    }
}

static size_t hx_hip_block_bytes(enum hx_dtype t)
{
    switch (t) {
    case HX_DTYPE_F32: return 4;
    case HX_DTYPE_F16:
    case HX_DTYPE_BF16: return 2;
    case HX_DTYPE_Q8_0: return hx_hip_blk<HX_DTYPE_Q8_0>::B;
    case HX_DTYPE_Q4_0: return hx_hip_blk<HX_DTYPE_Q4_0>::B;
    case HX_DTYPE_Q4_K: return hx_hip_blk<HX_DTYPE_Q4_K>::B;
    case HX_DTYPE_Q6_K: return hx_hip_blk<HX_DTYPE_Q6_K>::B;
    case HX_DTYPE_TQ1_0: return hx_hip_blk<HX_DTYPE_TQ1_0>::B;
    case HX_DTYPE_TQ2_0: return hx_hip_blk<HX_DTYPE_TQ2_0>::B;
    case HX_DTYPE_Q1_0: return hx_hip_blk<HX_DTYPE_Q1_0>::B;
    case HX_DTYPE_Q2_0: return hx_hip_blk<HX_DTYPE_Q2_0>::B;
    case HX_DTYPE_I2_S: return hx_hip_blk<HX_DTYPE_I2_S>::B;
    default: return 0;
    }
}

static bool hx_hip_is_float(enum hx_dtype t)
{
    return t == HX_DTYPE_F32 || t == HX_DTYPE_F16 || t == HX_DTYPE_BF16;
}

#include "hip-enum.h"

/* ---- device ---------------------------------------------------------------------------------- */

static void hx_hip_graphs_free(struct hx_hip_dev *d);
static void hx_hip_graphs_clear(struct hx_hip_dev *d);
static struct hx_hip_graphs *hx_hip_graphs_new(void);

static void hx_hip_release(struct hx_hip_dev *d)
{
    hx_hip_graphs_free(d);
    if (d->meta) hx_hip_h.free_fn(d->meta);
    for (int i = 0; i < 2; i++) {
        if (d->staged[i]) HX_HIP_IGNORE(hipEventDestroy(d->staged[i]));
        if (d->stage[i]) HX_HIP_IGNORE(hipHostFree(d->stage[i]));
    }
    if (d->scratch) HX_HIP_IGNORE(hipFree(d->scratch));
    if (d->ev_start) HX_HIP_IGNORE(hipEventDestroy(d->ev_start));
    if (d->ev_stop) HX_HIP_IGNORE(hipEventDestroy(d->ev_stop));
    if (d->xfer) HX_HIP_IGNORE(hipStreamDestroy(d->xfer));
    if (d->stream) HX_HIP_IGNORE(hipStreamDestroy(d->stream));
#if defined(HX_HIP_AMD_RTC)
    if (d->rtc) {
        if (d->rtc->mod) HX_HIP_IGNORE(hipModuleUnload(d->rtc->mod));
        hx_hip_h.free_fn(d->rtc);
    }
#endif
    hx_hip_h.free_fn(d);
}

#include "hip-gemm-pick.h"

static int hx_hip_init(int idx, void **mdev, char *err, size_t len)
{
    *mdev = NULL;
    const struct hx_hip_enum *en = hx_hip_devices();
    if (idx < 0 || idx >= en->n) {
        snprintf(err, len, "no HIP device %d", idx);
        return HX_E_NOTFOUND;
    }
    struct hx_hip_dev *d = (struct hx_hip_dev *)hx_hip_h.malloc_fn(sizeof *d);
    if (!d) return HX_E_NOMEM;
    memset(d, 0, sizeof *d);
    d->idx = en->ordinal[idx];
    snprintf(d->code, sizeof d->code, "%s", en->code[idx]);
    const char *what = "hipSetDevice";
    hipError_t e = hipSetDevice(d->idx);
    if (e == hipSuccess)
        what = "hipStreamCreateWithFlags",
        e = hipStreamCreateWithFlags(&d->stream, hipStreamNonBlocking);
    if (e == hipSuccess) e = hipStreamCreateWithFlags(&d->xfer, hipStreamNonBlocking);
    if (e == hipSuccess)
        what = "hipEventCreateWithFlags",
        e = hipEventCreateWithFlags(&d->ev_start, hipEventDefault);
    if (e == hipSuccess) e = hipEventCreateWithFlags(&d->ev_stop, hipEventDefault);
    for (int i = 0; i < 2 && e == hipSuccess; i++)
        e = hipEventCreateWithFlags(&d->staged[i], hipEventDisableTiming);
    hipDeviceProp_t prop;
    if (e == hipSuccess)
        what = "hipGetDeviceProperties", e = hipGetDeviceProperties(&prop, d->idx);
    if (e == hipSuccess) d->n_sm = prop.multiProcessorCount;
    /* tests: the multiprocessor count the GEMVs' split-K plan assumes (the emulator has one,
     * so few shapes would be cut without it) */
    const char *sm = getenv("HX_HIP_GEMV_SM");
    const long smv = sm ? strtol(sm, NULL, 10) : 0;
    if (smv > 0 && smv <= 1000000) d->n_sm = (int)smv;
    const char *am = getenv("HX_HIP_ATTN");
    if (e == hipSuccess && (d->attn = hx_hip_attn_mode_parse(am)) < 0) {
        snprintf(err, len, "HX_HIP_ATTN=%s: expected auto, flash or rows", am);
        hx_hip_release(d);
        return HX_E_INVAL;
    }
    if (e != hipSuccess) {
        int st = hx_hip_fail(e, what, err, len);
        hx_hip_release(d);
        return st;
    }
#if defined(HX_HIP_AMD_RTC)
    if (en->rtc_path[idx][0]) {
        d->rtc = (struct hx_hip_rtc_mod *)hx_hip_h.malloc_fn(sizeof *d->rtc);
        int st = d->rtc ? hx_hip_rtc_load(en->rtc_path[idx], d->rtc, err, len) : HX_E_NOMEM;
        if (st != HX_OK) {
            hx_hip_release(d);
            return st;
        }
    }
#endif
    hx_hip_gemm_pick(d, &prop);
    /* Pinned staging is an optimization: without it, uploads copy from pageable memory. */
    for (int i = 0; i < 2; i++)
        if (hipHostMalloc(&d->stage[i], HX_HIP_STAGE_BYTES, hipHostMallocDefault) != hipSuccess) {
            d->stage[i] = NULL;
            HX_HIP_IGNORE(hipGetLastError());
        }
#if defined(HX_HIP_EMU)
    d->timing.device_modelled = true; /* host time of emulated kernels, not a GPU's */
#endif
    if (!(d->graphs = hx_hip_graphs_new())) {
        hx_hip_release(d);
        return HX_E_NOMEM;
    }
    *mdev = d;
    return HX_OK;
}

static void hx_hip_fini(void *mdev)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    if (!d) return;
    HX_HIP_IGNORE(hipSetDevice(d->idx));
    HX_HIP_IGNORE(hipStreamSynchronize(d->stream));
    HX_HIP_IGNORE(hipStreamSynchronize(d->xfer));
    hx_hip_release(d);
}

/* ---- buffers ------------------------------------------------------------------------------- */

static int hx_hip_alloc(struct hx_hip_dev *d, size_t nbytes, void **dptr, const char *what,
                        char *err, size_t len)
{
    *dptr = NULL;
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
    hipError_t e = hipMalloc(dptr, nbytes ? nbytes : 1);
    if (e == hipSuccess) return HX_OK;
    *dptr = NULL;
    size_t fr = 0, tot = 0;
    HX_HIP_IGNORE(hipGetLastError());
    HX_HIP_IGNORE(hipMemGetInfo(&fr, &tot));
    snprintf(err, len, "%s: hipMalloc of %zu bytes: %s (%s); %zu of %zu bytes free", what, nbytes,
             hipGetErrorName(e), hipGetErrorString(e), fr, tot);
    return e == hipErrorOutOfMemory ? HX_E_NOMEM : HX_E_DEVICE;
}

static int hx_hip_buffer_alloc(void *mdev, size_t nbytes, void **dptr, char *err, size_t len)
{
    return hx_hip_alloc((struct hx_hip_dev *)mdev, nbytes, dptr, "buffer", err, len);
}

static void hx_hip_buffer_free(void *mdev, void *dptr)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    if (!dptr) return;
    HX_HIP_IGNORE(hipSetDevice(d->idx));
    HX_HIP_IGNORE(hipStreamSynchronize(d->stream));
    hx_hip_graphs_clear(d); /* they may point into it */
    HX_HIP_IGNORE(hipFree(dptr));
}

static int hx_hip_buffer_write(void *mdev, void *dptr, size_t off, const void *src, size_t n,
                               char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
    HX_HIP_TRY(hipMemcpyAsync((char *)dptr + off, src, n, hipMemcpyHostToDevice, d->stream),
               "hipMemcpyAsync (write)");
    HX_HIP_TRY(hipStreamSynchronize(d->stream), "hipStreamSynchronize (write)");
    return HX_OK;
}

static int hx_hip_buffer_read(void *mdev, const void *dptr, size_t off, void *dst, size_t n,
                              char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
    HX_HIP_TRY(hipMemcpyAsync(dst, (const char *)dptr + off, n, hipMemcpyDeviceToHost, d->stream),
               "hipMemcpyAsync (read)");
    HX_HIP_TRY(hipStreamSynchronize(d->stream), "hipStreamSynchronize (read)");
    return HX_OK;
}

static int hx_hip_copy(void *mdev, void *dst, const void *src, size_t n, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
    HX_HIP_TRY(hipMemcpyAsync(dst, src, n, hipMemcpyDeviceToDevice, d->stream),
               "hipMemcpyAsync (copy)");
    HX_HIP_TRY(hipStreamSynchronize(d->stream), "hipStreamSynchronize (copy)");
    return HX_OK;
}

/* ---- weights ------------------------------------------------------------------------------- */

/* Host bytes → device, through the two pinned buffers when there are some. */
static int hx_hip_upload(struct hx_hip_dev *d, void *dst, const void *src, size_t n, char *err,
                         size_t len)
{
    if (!d->stage[0] || !d->stage[1]) {
        HX_HIP_TRY(hipMemcpyAsync(dst, src, n, hipMemcpyHostToDevice, d->xfer),
                   "hipMemcpyAsync (weight)");
        HX_HIP_TRY(hipStreamSynchronize(d->xfer), "hipStreamSynchronize (weight)");
        return HX_OK;
    }
    int slot = 0;
    for (size_t off = 0; off < n; off += HX_HIP_STAGE_BYTES, slot ^= 1) {
        const size_t c = HX_MIN(n - off, HX_HIP_STAGE_BYTES);
        if (d->stage_busy[slot])
            HX_HIP_TRY(hipEventSynchronize(d->staged[slot]), "hipEventSynchronize (weight)");
        d->stage_busy[slot] = false;
        memcpy(d->stage[slot], (const char *)src + off, c);
        HX_HIP_TRY(
            hipMemcpyAsync((char *)dst + off, d->stage[slot], c, hipMemcpyHostToDevice, d->xfer),
            "hipMemcpyAsync (weight)");
        HX_HIP_TRY(hipEventRecord(d->staged[slot], d->xfer), "hipEventRecord (weight)");
        d->stage_busy[slot] = true;
    }
    HX_HIP_TRY(hipStreamSynchronize(d->xfer), "hipStreamSynchronize (weight)");
    d->stage_busy[0] = d->stage_busy[1] = false;
    return HX_OK;
}

/* Weight w as a handle describes it, but for its device copy (d NULL). */
static hx_hip_weight hx_hip_weight_shape(const struct hx_weight *w)
{
    hx_hip_weight h;
    memset(&h, 0, sizeof h);
    h.type = w->type, h.n_rows = w->n_rows, h.n_cols = w->n_cols, h.scale = w->scale,
    h.ts = w->tensor_scale;
    const int64_t be = hx_hip_type_ok((int)w->type) ? hx_hip_block_elems(w->type) : 0;
    h.row_bytes = be > 0 ? (size_t)(w->n_cols / be) * hx_hip_block_bytes(w->type) : 0;
    h.n_parts = w->n_tparts;
    for (int i = 0; i < w->n_tparts && i < HX_WEIGHT_MAX_PARTS; i++)
        h.part_row[i + 1] = w->tpart_row[i + 1], h.part_ts[i] = w->tpart_tscale[i];
    return h;
}

static int hx_hip_weight_prepare(void *mdev, const struct hx_weight *w, void **handle, char *err,
                                 size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    *handle = NULL;
    const char *name = w->name ? w->name : "?";
    if (!hx_hip_type_ok((int)w->type) || w->n_rows <= 0 || w->n_cols <= 0 ||
        w->n_cols % hx_hip_block_elems(w->type) != 0) {
        snprintf(err, len, "weight %s: type %d with %lld x %lld elements is not supported", name,
                 (int)w->type, (long long)w->n_rows, (long long)w->n_cols);
        return HX_E_UNSUPPORTED;
    }
    const size_t rb =
        (size_t)(w->n_cols / hx_hip_block_elems(w->type)) * hx_hip_block_bytes(w->type);
    size_t total;
    size_t in_parts = 0; /* a fused weight of parts: each part in place in the mapping */
    for (int i = 0; i < w->n_parts && i < HX_WEIGHT_MAX_PARTS; i++) in_parts += w->parts[i].nbytes;
    if (__builtin_mul_overflow(rb, (size_t)w->n_rows, &total) || total > w->nbytes ||
        (!w->data && (w->n_parts < 1 || w->n_parts > HX_WEIGHT_MAX_PARTS || in_parts != total))) {
        snprintf(err, len, "weight %s: %lld rows of %zu bytes do not fit its %zu bytes", name,
                 (long long)w->n_rows, rb, w->nbytes);
        return HX_E_INVAL;
    }
    struct hx_hip_weight *h = (struct hx_hip_weight *)hx_hip_h.malloc_fn(sizeof *h);
    if (!h) return HX_E_NOMEM;
    *h = hx_hip_weight_shape(w);
    char what[96];
    snprintf(what, sizeof what, "weight %.80s", name);
    /* rounded to 16 bytes: the GEMVs read a row's bytes as the aligned 16-byte chunks that
     * hold them (hip-gemv.h) */
    int st = hx_hip_alloc(d, (total + 15) & ~(size_t)15, &h->d, what, err, len);
    if (st == HX_OK && w->data) st = hx_hip_upload(d, h->d, w->data, total, err, len);
    /* or part by part, each from the mapping to its row offset (no host copy of the whole) */
    for (size_t i = 0, off = 0; st == HX_OK && !w->data && i < (size_t)w->n_parts; i++) {
        st = hx_hip_upload(d, (char *)h->d + off, w->parts[i].data, w->parts[i].nbytes, err, len);
        off += w->parts[i].nbytes;
    }
    if (st != HX_OK) {
        if (h->d) HX_HIP_IGNORE(hipFree(h->d));
        hx_hip_h.free_fn(h);
        return st;
    }
    *handle = h;
    return HX_OK;
}

static void hx_hip_weight_release(void *mdev, void *handle)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    struct hx_hip_weight *h = (struct hx_hip_weight *)handle;
    if (!h) return;
    HX_HIP_IGNORE(hipSetDevice(d->idx));
    HX_HIP_IGNORE(hipStreamSynchronize(d->stream));
    hx_hip_graphs_clear(d); /* they may point into it (and a new handle may reuse h) */
    HX_HIP_IGNORE(hipFree(h->d));
    hx_hip_h.free_fn(h);
}

/* ---- supports ------------------------------------------------------------------------------ */

static bool hx_hip_supports(const struct hx_op_desc *op)
{
    switch (op->kind) {
    case HX_OP_MATMUL:
        return hx_hip_type_ok((int)op->wtype) && op->n_in > 0 && op->n_out > 0 &&
               op->n_in % hx_hip_block_elems(op->wtype) == 0;
    case HX_OP_EMBED:
        return hx_hip_type_ok((int)op->wtype) && op->n_out > 0 &&
               op->n_out % hx_hip_block_elems(op->wtype) == 0;
    case HX_OP_RMS_NORM:
        return op->wtype == HX_DTYPE_F32 && op->p.norm.group >= 0 && op->n_in > 0 &&
               (op->p.norm.group == 0 || op->n_in % op->p.norm.group == 0);
    case HX_OP_ROPE:
        return op->p.rope.n_head > 0 && op->p.rope.head_dim > 0 && op->p.rope.n_rot > 0 &&
               op->p.rope.n_rot % 2 == 0 && op->p.rope.n_rot <= op->p.rope.head_dim;
    case HX_OP_ATTN:
        return op->p.attn.head_dim > 0 && op->p.attn.head_dim <= HX_HIP_HD_MAX &&
               op->p.attn.n_head_kv > 0 && op->p.attn.n_head % op->p.attn.n_head_kv == 0 &&
               op->p.attn.n_ctx > 0 && op->p.attn.n_seq > 0;
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD: return true;
    default: return false;
    }
}

#include "hip-launch.h"

static size_t hx_hip_align(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* The bytes of scratch sp needs: tokens, positions, sequences, then the largest int8
 * activation set of the split or the largest set of split-attention parts (the stream runs
 * their users one after the other), then the largest set of the GEMVs' split-K partial sums
 * (hip-gemv.h), which start *q8_out bytes after the metadata. c->pos_max and c->attn_chunks
 * are the caller's. */
static size_t hx_hip_scratch_need(const struct hx_hip_dev *d, const struct hx_split *sp,
                                  const struct hx_hip_ctx *c, size_t *q8_out)
{
    const size_t meta = hx_hip_align((size_t)sp->n_rows * sizeof(int32_t));
    size_t q8 = 0, part = 0;
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        hx_hip_weight shape; /* a plan's split has no handle yet: the weight as it will be */
        const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
        if (!w && op->weight) shape = hx_hip_weight_shape(op->weight), w = &shape;
        const int n_chunk = hx_hip_op_chunks(c, op);
        if (n_chunk)
            q8 = HX_MAX(q8, hx_hip_align((size_t)op->dst.n_rows * (size_t)op->desc.p.attn.n_head *
                                         (size_t)n_chunk *
                                         (size_t)(op->desc.p.attn.head_dim + 2) * sizeof(float)));
        if (op->desc.kind != HX_OP_MATMUL || !w) continue;
        if (op->dst.n_rows > HX_HIP_GEMV_ROWS_MAX) {
            /* the int8 GEMM quantizes all its rows */
            if (!hx_hip_gemm_int8(d, w->type)) continue;
            const size_t rows = (size_t)op->dst.n_rows, K = (size_t)w->n_cols;
            q8 = HX_MAX(q8, hx_hip_align(rows * K) +
                                hx_hip_align(rows * (K / 32) * sizeof(float2)));
            continue;
        }
        for (int j = 0; j < HX_MAX(w->n_parts, 1); j++) {
            const int64_t N = w->n_parts > 0 ? w->part_row[j + 1] - w->part_row[j] : w->n_rows;
            part = HX_MAX(part, hx_hip_align(sizeof(float) *
                                             hx_hip_gemv_part_floats(w->type, w->n_cols, N,
                                                                     op->dst.n_rows, d->n_sm)));
        }
        if (hx_hip_is_float(w->type)) continue;
        const size_t rows = (size_t)op->dst.n_rows, K = (size_t)w->n_cols;
        q8 = HX_MAX(q8, hx_hip_align(rows * K) + hx_hip_align(rows * (K / 32) * sizeof(float2)));
    }
    *q8_out = q8;
    return 3 * meta + q8 + part;
}

/* Grow the split scratch to what sp needs and send the row metadata up (c: the split's
 * context, c->pos_max and c->attn_chunks set). */
static int hx_hip_scratch(struct hx_hip_dev *d, const struct hx_split *sp, struct hx_hip_ctx *c,
                          char *err, size_t len)
{
    const size_t meta = hx_hip_align((size_t)sp->n_rows * sizeof(int32_t));
    size_t q8;
    const size_t need = hx_hip_scratch_need(d, sp, c, &q8);
    if (need > d->scratch_bytes) {
        HX_HIP_TRY(hipStreamSynchronize(d->stream), "hipStreamSynchronize (scratch)");
        hx_hip_graphs_clear(d); /* they point into the old scratch */
        if (d->scratch) HX_HIP_IGNORE(hipFree(d->scratch));
        d->scratch = NULL, d->scratch_bytes = 0;
        int st = hx_hip_alloc(d, need, &d->scratch, "split scratch", err, len);
        if (st != HX_OK) return st;
        d->scratch_bytes = need;
    }
    char *base = (char *)d->scratch;
    int32_t *tok = (int32_t *)base, *pos = (int32_t *)(base + meta),
            *seq = (int32_t *)(base + 2 * meta);
    const size_t nb = (size_t)sp->n_rows * sizeof(int32_t);
    if (nb && (sp->tokens || sp->pos || sp->seq)) {
        if (3 * meta > d->meta_bytes) {
            if (d->meta) hx_hip_h.free_fn(d->meta);
            d->meta_bytes = 0;
            if (!(d->meta = (int32_t *)hx_hip_h.malloc_fn(3 * meta))) return HX_E_NOMEM;
            d->meta_bytes = 3 * meta;
        }
        char *m = (char *)d->meta;
        memset(m, 0, 3 * meta);
        if (sp->tokens) memcpy(m, sp->tokens, nb);
        if (sp->pos) memcpy(m + meta, sp->pos, nb);
        if (sp->seq) memcpy(m + 2 * meta, sp->seq, nb);
        /* a pageable source: the copy has left the host array when the call returns */
        HX_HIP_TRY(hipMemcpyAsync(base, m, 3 * meta, hipMemcpyHostToDevice, d->stream),
                   "hipMemcpyAsync (row metadata)");
    }
    c->tok = tok, c->pos = pos, c->seq = seq;
    c->aq = (int8_t *)(base + 3 * meta);
    c->ad = NULL;
    c->part = (float *)(base + 3 * meta + q8);
    return HX_OK;
}

static int hx_hip_enqueue(struct hx_hip_dev *d, const struct hx_split *sp, struct hx_hip_ctx *c,
                          char *err, size_t len);

#include "hip-graph.h"

/* The split scratch: what it holds (sp NULL), or what sp needs with its positions' attention
 * chunks as a graph would launch them (never fewer than direct launches'). */
static int hx_hip_scratch_bytes(void *mdev, const struct hx_split *sp, size_t out[HX_SCRATCH_BUFS])
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    if (!sp) {
        out[0] = d->scratch_bytes;
        return HX_OK;
    }
    struct hx_hip_ctx c = {d, NULL, NULL, NULL, NULL, NULL, 0, -1, 0, NULL};
    for (int64_t r = 0; sp->pos && r < sp->n_rows; r++) c.pos_max = HX_MAX(c.pos_max, sp->pos[r]);
    c.attn_chunks = hx_hip_graph_chunks(c.pos_max);
    size_t q8;
    out[0] = hx_hip_scratch_need(d, sp, &c, &q8);
    return HX_OK;
}

static int hx_hip_run(void *mdev, const struct hx_split *sp, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    const double t0 = hx_hip_now_us();
    if (sp->n_rows < 0 || (sp->n_ops > 0 && !sp->ops))
        return hx_hip_inval(err, len, "split of %lld ops and %lld rows", (long long)sp->n_ops,
                            (long long)sp->n_rows);
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        if ((unsigned)op->desc.kind >= HX_OP_KIND_COUNT || !hx_hip_supports(&op->desc))
            return hx_hip_inval(err, len, "op %lld (kind %lld) is not supported by the HIP kernels",
                                (long long)i, (long long)op->desc.kind);
        int st = hx_hip_check_op(sp, op, err, len);
        if (st != HX_OK) {
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", err);
            snprintf(err, len, "op %lld (%s): %s", (long long)i, hx_hip_op_names[op->desc.kind],
                     tmp);
            return st;
        }
    }
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
#if defined(HX_HIP_AMD_RTC)
    hx_hip_rtc_cur = d->rtc; /* hx_hip_launch's code object on this thread */
#endif
    struct hx_hip_ctx c = {d, NULL, NULL, NULL, NULL, NULL, 0, -1, 0, NULL};
    for (int64_t r = 0; sp->pos && r < sp->n_rows; r++) c.pos_max = HX_MAX(c.pos_max, sp->pos[r]);
    const bool graph = hx_hip_graph_wanted(d, sp);
    /* (the batch-size limit of the split attention is per op: hx_hip_op_chunks) */
    c.attn_chunks = graph ? hx_hip_graph_chunks(c.pos_max) : hx_hip_attn_chunks(1, c.pos_max);
    int st = hx_hip_scratch(d, sp, &c, err, len);
    if (st != HX_OK) return st;
    if (!d->timing_open) {
        HX_HIP_TRY(hipEventRecord(d->ev_start, d->stream), "hipEventRecord");
        d->timing_open = true;
    }
    d->graphs->n.splits++;
    if (sp->n_rows && (sp->tokens || sp->pos || sp->seq)) d->graphs->n.copies++; /* scratch */
    bool done = false;
    if (graph) hx_hip_graph_run(d, sp, &c, &done);
    if (!done) {
        const int n0 = c.n_launch;
        st = hx_hip_enqueue(d, sp, &c, err, len);
        d->graphs->n.kernels += (uint64_t)(c.n_launch - n0);
        if (st != HX_OK) return st;
    }
    HX_HIP_TRY(hipEventRecord(d->ev_stop, d->stream), "hipEventRecord");
    d->timing.n_calls += (uint64_t)c.n_launch;
    d->timing.host_us += hx_hip_now_us() - t0;
    return HX_OK;
}

/* Enqueues the split's kernels one launch each (recorded instead while the stream captures). */
static int hx_hip_enqueue(struct hx_hip_dev *d, const struct hx_split *sp, struct hx_hip_ctx *c,
                          char *err, size_t len)
{
    (void)d;
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        if (op->desc.kind == HX_OP_MATMUL) {
            const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle;
            /* every row: the int8 GEMM quantizes all (the GEMVs take at most 32) */
            const size_t rows = (size_t)op->dst.n_rows;
            c->ad = (float2 *)((int8_t *)c->aq + hx_hip_align(rows * (size_t)w->n_cols));
        }
        hipError_t e = hx_hip_op(c, op);
        if (e != hipSuccess) {
            char what[96];
            snprintf(what, sizeof what, "op %lld (%s): kernel launch", (long long)i,
                     hx_hip_op_names[op->desc.kind]);
            HX_HIP_IGNORE(hipGetLastError());
            return hx_hip_fail(e, what, err, len);
        }
    }
    return HX_OK;
}

static int hx_hip_synchronize(void *mdev, char *err, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    const double t0 = hx_hip_now_us();
    HX_HIP_TRY(hipSetDevice(d->idx), "hipSetDevice");
    HX_HIP_TRY(hipStreamSynchronize(d->stream), "hipStreamSynchronize (a kernel failed)");
    if (d->timing_open) {
        float ms = 0.0f;
        d->timing_open = false;
        if (hipEventElapsedTime(&ms, d->ev_start, d->ev_stop) == hipSuccess)
            d->timing.device_us += (double)ms * 1e3;
        HX_HIP_IGNORE(hipGetLastError());
    }
    d->timing.host_us += hx_hip_now_us() - t0;
    return HX_OK;
}

static struct hx_timing_stats *hx_hip_timing(void *mdev)
{
    return &((struct hx_hip_dev *)mdev)->timing;
}

static void hx_hip_describe(void *mdev, char *out, size_t len)
{
    struct hx_hip_dev *d = (struct hx_hip_dev *)mdev;
    char ver[96];
    size_t fr = 0, tot = 0;
    HX_HIP_IGNORE(hipSetDevice(d->idx));
    hx_hip_version(ver, sizeof ver);
    if (hipMemGetInfo(&fr, &tot) != hipSuccess) HX_HIP_IGNORE(hipGetLastError());
    const int gm = d->graphs ? d->graphs->mode : 0;
    snprintf(out, len,
             "%s, %s, %.1f of %.1f GiB free, %s uploads, decode graphs %s, prefill GEMM %s", ver,
             d->code,
             (double)fr / 1073741824.0, (double)tot / 1073741824.0,
             d->stage[0] ? "pinned double-buffered" : "pageable",
             gm == 2 ? "eager"
             : gm    ? "on"
                     : "off (HX_HIP_GRAPH=0 or a graph failure)",
             d->gemm == HX_HIP_GEMM_MMA
                 ? (d->gemm_float ? "mma (int8 + f16 + bf16x2 + 3xtf32)" : "mma (int8 + f16)")
             : d->gemm == HX_HIP_GEMM_MMA_F16
                 ? (d->gemm_float ? "mma (f16 + bf16x2 + 3xtf32)" : "mma (f16)")
             : d->gemm == HX_HIP_GEMM_WMMA        ? "wmma (f16)"
             : d->gemm == HX_HIP_GEMM_WMMA_I8     ? "wmma (int8 + f16)"
             : d->gemm == HX_HIP_GEMM_WMMA12      ? "wmma12 (int8 + f16)"
             : d->gemm == HX_HIP_GEMM_WMMA12_F16  ? "wmma12 (f16)"
                                                  : "simt");
}

static const struct hx_hip_module_ops hx_hip_module = {
    HX_HIP_MODULE_ABI,
    sizeof(struct hx_hip_module_ops),
    HX_HIP_LAYOUT_INIT,
    HX_HIP_RUNTIME,
    HX_HIP_TARGETS,
#if defined(HX_HIP_EMU)
    true,
#else
    false,
#endif
    hx_hip_device_count,
    hx_hip_device_info,
    hx_hip_init,
    hx_hip_fini,
    hx_hip_buffer_alloc,
    hx_hip_buffer_free,
    hx_hip_buffer_write,
    hx_hip_buffer_read,
    hx_hip_copy,
    hx_hip_weight_prepare,
    hx_hip_weight_release,
    hx_hip_supports,
    hx_hip_run,
    hx_hip_synchronize,
    hx_hip_timing,
    hx_hip_describe,
#if defined(HX_HIP_AMD_RTC)
    hx_hip_rtc_get,
    hx_hip_rtc_compile,
#else
    NULL,
    NULL,
#endif
    hx_hip_scratch_bytes,
};

extern "C" __attribute__((visibility("default"))) const struct hx_hip_module_ops *
hx_hip_module_get_ops(uint32_t abi, const struct hx_hip_host *host)
{
    if (abi != HX_HIP_MODULE_ABI || !host || host->struct_size < sizeof(struct hx_hip_host) ||
        !host->malloc_fn || !host->free_fn)
        return NULL;
    hx_hip_h = *host;
    return &hx_hip_module;
}
