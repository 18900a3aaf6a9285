/*
 * cpu.c — the `cpu` backend: one device, the host, running every op of docs/ops.md with SIMD
 * kernels (scalar / AVX2 / AVX-512 VNNI, chosen at run time: cpu-features.c) on the threads
 * of core/pool.c (hx_device_config.n_threads). Buffers are host memory (host-buffer.c) and weights
 * are used in place from the model's mapping. run() executes the split synchronously, so
 * synchronize has nothing to wait for. Scratch (quantized activations, panels, attention
 * scores) is owned by the device and grown on demand; a device is used by one thread at a time.
 * scratch_bytes reports it (the plan's memory, docs/policies.md): the matmul buffer as
 * hx__cpu_matmul_scratch sizes it, the attention scores of every thread, and the largest
 * head-major K/V copy a prefill's attention made for its call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu-arena.h"
#include "cpu-impl.h"
#include "cpu-x16.h"
#include "host-buffer.h"
#include "hx-impl.h"
#include "pool.h"

struct hx_cpu_dev {
    int n_threads;
    void *mem;             /* matmul scratch */
    size_t mem_bytes;
    float *attn;           /* attention scratch: n_threads × attn_per floats */
    size_t attn_per, attn_threads;
    size_t kt_peak;        /* the largest head-major K/V copy of a prefill (held per call) */
};

static int hx_cpu_probe(struct hx_backend_probe *out)
{
    out->score = 10;
    out->n_devices = 1;
    return HX_OK;
}

static int hx_cpu_device_info(int idx, struct hx_device_info *out)
{
    (void)idx; /* 0, the only one */
    char name[64], desc[256];
    hx__cpu_name(name, sizeof name);
    const enum hx_cpu_isa best = hx__cpu_isa_best();
    /* what the kernels can use here, whatever HX_CPU_* asks for now */
    const bool vbmi = best == HX_CPU_ISA_AVX512 && hx__cpu_vbmi_supported();
    const bool amx = best == HX_CPU_ISA_AVX512 && hx__cpu_amx_supported();
    snprintf(desc, sizeof desc, "host CPU: %s, %ld logical CPUs; %s kernels%s%s%s, thread pool",
             name, sysconf(_SC_NPROCESSORS_ONLN), hx__cpu_isa_name(best),
             best == HX_CPU_ISA_AVX512 ? " (VNNI" : "", vbmi ? ", VBMI for Q1_0 decode" : "",
             best != HX_CPU_ISA_AVX512 ? "" : amx ? ", AMX-INT8 for Q8_0 prefill)" : ")");
    hx__host_device_info("cpu", desc, out);
    return HX_OK;
}

static int hx_cpu_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    struct hx_cpu_dev *c = dev->ctx;
    c->n_threads = cfg && cfg->n_threads > 0 ? cfg->n_threads : 1;
    return HX_OK;
}

static void hx_cpu_fini(struct hx_device *dev)
{
    struct hx_cpu_dev *c = dev->ctx;
    if (c->n_threads > 1 && hx_log_get_level() >= HX_LOG_LEVEL_DEBUG) {
        struct hx_pool_stats ps;
        hx__pool_stats(&ps);
        const double items = (double)(ps.items_caller + ps.items_workers);
        HX_LOG_DEBUG("cpu: thread pool since start: %llu pieces of work on several threads, "
                     "%llu with a worker called off, %llu late, %.1f%% of items by workers, "
                     "%.0f us waiting for workers, %llu solo periods (%.0f ms)",
                     (unsigned long long)ps.works, (unsigned long long)ps.called_off,
                     (unsigned long long)ps.late,
                     items > 0 ? 100.0 * (double)ps.items_workers / items : 0.0,
                     ps.wait_us, (unsigned long long)ps.solo_periods, ps.solo_us / 1e3);
    }
    hx_free(c->mem);
    hx_free(c->attn);
    memset(c, 0, sizeof *c);
}

/* Quantized matmul weights are repacked into x16 tiles when the AVX-512 VNNI kernels will run
 * them (HX_CPU_REPACK=0 keeps the GGUF rows, for comparisons). The handle is always an
 * hx_cpu_x16; its data is NULL when the weight is used as it is in the file. */
static bool hx_cpu_repacks(const struct hx_weight *w)
{
    const char *env = getenv("HX_CPU_REPACK");
    return !(env && !strcmp(env, "0")) && hx__cpu_isa_best() == HX_CPU_ISA_AVX512 &&
           hx__x16_usable(w->type, w->n_cols) && hx__x16_parts_fit(w);
}

/* A fused weight of parts (hx_weight.parts) is repacked from a copy of its rows made for the
 * repack and unmapped after it (its own mapping: freed heap blocks between the repacked
 * weights' allocations would stay resident); where its rows are read as they are (no repack,
 * or HX_CPU_ISA asking for a kernel without x16), the run needs them in one host matrix:
 * hx_weight_host. HX_CPU_ISA is read here for such a weight: set it before the model's
 * weights are prepared. */
static struct hx_cpu_x16 *hx_cpu_pack_parts(struct hx_device *dev, const struct hx_weight *w,
                                            int n_threads, int *st)
{
    size_t n = (size_t)w->n_rows * hx_dtype_row_bytes(w->type, w->n_cols);
    struct hx_weight flat = *w;
    void *rows = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *st = rows != MAP_FAILED ? hx_weight_read(w, 0, rows, n) : HX_E_NOMEM;
    if (*st) {
        if (rows != MAP_FAILED) munmap(rows, n ? n : 1);
        hx_device_set_error(dev, *st, "preparing %s: %s", w->name,
                            rows != MAP_FAILED ? hx_last_error() : "out of memory");
        return NULL;
    }
    flat.data = rows, flat.n_parts = 0;
    struct hx_cpu_x16 *x = hx__x16_pack(&flat, n_threads);
    munmap(rows, n ? n : 1);
    return x;
}

static int hx_cpu_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle)
{
    struct hx_cpu_dev *c = dev->ctx;
    struct hx_cpu_x16 *x = NULL;
    int st = HX_OK;
    const bool repack = hx_cpu_repacks(w);
    if (w->n_parts && !w->data && (!repack || hx__cpu_isa() != HX_CPU_ISA_AVX512)) {
        const void *rows;
        if ((st = hx_weight_host(w, &rows)))
            return hx_device_set_error(dev, st, "preparing %s: %s", w->name, hx_last_error());
    }
    if (repack && w->n_parts && !w->data) {
        if (!(x = hx_cpu_pack_parts(dev, w, c->n_threads, &st)) && st) return st;
    } else if (repack)
        x = hx__x16_pack(w, c->n_threads);
    else if ((x = hx_calloc(1, sizeof *x))) {
        x->magic = HX_X16_MAGIC;
        x->type = w->type;
        x->prefetch = hx__cpu_decode_prefetch(w->type); /* the float GEMV's (cpu-matmul.c) */
        hx__cpu_chunk_bytes(&x->chunk_decode, &x->chunk_prefill);
        /* Float weights of 1 MiB and more are copied onto huge pages for the decode GEMV, as
         * the quantized ones are repacked: F16 2560x32768 ran at x1.13-1.20 of a plain read
         * of its bytes from the file's 4 KiB pages, x1.08-1.13 from the copy; 2560x6912
         * x1.08-1.20 against x1.11-1.24, better in 2 of 3 rounds (Xeon VM, loaded, --compare
         * HX_CPU_FLOAT_COPY=0,1). The file's pages stay mapped for the embedding.
         * HX_CPU_FLOAT_COPY=0 reads the file's rows. */
        const char *fg = getenv("HX_CPU_FLOAT_GEMV");
        x->no_float_gemv = fg && !strcmp(fg, "0");
        const char *cp = getenv("HX_CPU_FLOAT_COPY");
        if (!(cp && !strcmp(cp, "0")) && hx__cpu_isa_best() == HX_CPU_ISA_AVX512 &&
            !hx_dtype_is_quantized(w->type) && w->nbytes >= (1u << 20)) {
            void *rows = hx__cpu_arena_alloc(w->nbytes, &x->chunk);
            if (rows) memcpy(rows, w->data, w->nbytes);
            x->rows = rows;
        }
    }
    if (!x) return hx_device_set_error(dev, HX_E_NOMEM, "preparing %s: out of memory", w->name);
    *handle = x;
    return HX_OK;
}

/* Memory of a prepared weight: its x16 tiles (cpu-x16.h: 16 rows of the GGUF row size per
 * tile, Q4_K's 2368 and Q5_K's 2880 bytes per 256 columns), or the mapped bytes it is used
 * from in place. */
static int hx_cpu_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                               size_t *out)
{
    (void)dev;
    const struct hx_cpu_x16 *x = handle;
    if (x) {
        *out = x->data ? x->tile_bytes * (size_t)x->n_tiles : w->nbytes;
        return HX_OK;
    }
    if (!hx_cpu_repacks(w)) return *out = w->nbytes, HX_OK;
    size_t tiles = (size_t)((w->n_rows + HX_X16_ROWS - 1) / HX_X16_ROWS);
    *out = hx__x16_tile_bytes(w->type, w->n_cols) * tiles;
    return HX_OK;
}

static void hx_cpu_weight_release(struct hx_device *dev, void *handle)
{
    (void)dev;
    hx__x16_free(handle);
}

static bool hx_cpu_supports(struct hx_device *dev, const struct hx_op_desc *op)
{
    (void)dev;
    switch (op->kind) {
    case HX_OP_MATMUL:
        return (unsigned)op->wtype < HX_DTYPE_COUNT &&
               op->n_in % hx_dtype_block_elems(op->wtype) == 0;
    case HX_OP_EMBED: /* rows of n_out (the embedding width) are what get dequantized */
        return (unsigned)op->wtype < HX_DTYPE_COUNT &&
               op->n_out % hx_dtype_block_elems(op->wtype) == 0;
    case HX_OP_RMS_NORM:
        return op->p.norm.group <= 0 || op->n_in % op->p.norm.group == 0;
    case HX_OP_ROPE:
        return op->p.rope.n_rot % 2 == 0 && op->p.rope.n_rot <= op->p.rope.head_dim &&
               op->p.rope.n_rot <= 1024;
    case HX_OP_ATTN:
        return op->p.attn.n_head_kv > 0 && op->p.attn.n_head % op->p.attn.n_head_kv == 0;
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU:
    case HX_OP_ADD:
        return true;
    default:
        return false;
    }
}

static int hx_cpu_attn_scratch(struct hx_cpu_dev *c, const struct hx_op *op)
{
    size_t per = hx__cpu_attn_per_thread(op);
    size_t nt = (size_t)c->n_threads;
    if (c->attn && c->attn_per >= per && c->attn_threads >= nt) return HX_OK;
    hx_free(c->attn);
    c->attn = hx_malloc(per * nt * sizeof(float));
    c->attn_per = per;
    c->attn_threads = nt;
    return c->attn ? HX_OK : HX_E_NOMEM;
}

static int hx_cpu_run_op(struct hx_device *dev, const struct hx_op *op, const struct hx_split *s)
{
    struct hx_cpu_dev *c = dev->ctx;
    int st = HX_OK;
    switch (op->desc.kind) {
    case HX_OP_EMBED:
        st = hx__cpu_op_embed(op, s, c->n_threads);
        if (st == HX_E_INVAL)
            return hx_device_set_error(dev, st, "embed: token id out of range (vocab %lld)",
                                       (long long)op->weight->n_rows);
        break;
    case HX_OP_RMS_NORM: hx__cpu_op_rms_norm(op, c->n_threads); break;
    case HX_OP_MATMUL: st = hx__cpu_matmul(op, c->n_threads, &c->mem, &c->mem_bytes); break;
    case HX_OP_ROPE: hx__cpu_op_rope(op, s, c->n_threads); break;
    case HX_OP_ATTN:
        if ((st = hx_cpu_attn_scratch(c, op)) == HX_OK)
            hx__cpu_op_attn(op, s, c->n_threads, c->attn, c->attn_per, &c->kt_peak);
        break;
    case HX_OP_SWIGLU:
    case HX_OP_RELU2_GLU: hx__cpu_op_glu(op, c->n_threads); break;
    case HX_OP_ADD: hx__cpu_op_add(op, c->n_threads); break;
    default:
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "op %d not supported", op->desc.kind);
    }
    if (st != HX_OK)
        return hx_device_set_error(dev, st, "%s: %s", hx_op_kind_name(op->desc.kind),
                                   hx_strerror(st));
    return HX_OK;
}

static int hx_cpu_run(struct hx_device *dev, const struct hx_split *split)
{
    for (int64_t i = 0; i < split->n_ops; i++) {
        int st = hx_cpu_run_op(dev, &split->ops[i], split);
        if (st != HX_OK) return st;
    }
    return HX_OK;
}

/* The device's scratch: [0] the matmul buffer, [1] the attention scores (every thread's),
 * [2] the head-major K/V copy (the most a call held). */
static int hx_cpu_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                                size_t out[HX_SCRATCH_BUFS])
{
    struct hx_cpu_dev *c = dev->ctx;
    if (!sp) {
        out[0] = c->mem ? c->mem_bytes : 0;
        out[1] = c->attn ? c->attn_per * c->attn_threads * sizeof(float) : 0;
        out[2] = c->kt_peak;
        return HX_OK;
    }
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        if (op->desc.kind == HX_OP_MATMUL && op->weight) {
            /* a plan's op has no handle: what weight_prepare will make */
            const int repack = op->weight_handle ? -1 : hx_cpu_repacks(op->weight);
            out[0] = HX_MAX(out[0], hx__cpu_matmul_scratch(op, c->n_threads, repack));
        }
        if (op->desc.kind == HX_OP_ATTN) {
            const size_t scores = hx__cpu_attn_per_thread(op) * (size_t)c->n_threads;
            out[1] = HX_MAX(out[1], scores * sizeof(float));
            out[2] = HX_MAX(out[2], hx__cpu_attn_kt_bytes(op, op->src[0].n_rows));
        }
    }
    return HX_OK;
}

static void hx_cpu_describe(struct hx_device *dev, char *out, size_t len)
{
    struct hx_cpu_dev *c = dev->ctx;
    /* the decode prefetch distance: one figure, or per x16 type where they differ */
    static const enum hx_dtype x16[] = {HX_DTYPE_Q8_0, HX_DTYPE_Q4_0, HX_DTYPE_Q4_K, HX_DTYPE_Q5_K,
                                        HX_DTYPE_Q6_K, HX_DTYPE_TQ2_0, HX_DTYPE_TQ1_0,
                                        HX_DTYPE_Q1_0, HX_DTYPE_Q2_0,  HX_DTYPE_I2_S};
    const size_t nx = sizeof x16 / sizeof x16[0];
    char pf[160] = "";
    bool same = true;
    for (size_t i = 1; i < nx; i++) same = same && hx__cpu_decode_prefetch(x16[i]) == hx__cpu_decode_prefetch(x16[0]);
    if (same) snprintf(pf, sizeof pf, ": %d KiB ahead", hx__cpu_decode_prefetch(x16[0]) / 1024);
    else
        for (size_t i = 0; i < nx; i++)
            snprintf(pf + strlen(pf), sizeof pf - strlen(pf), "%s%s %d", i ? ", " : " (KiB ahead): ",
                     hx_dtype_name(x16[i]), hx__cpu_decode_prefetch(x16[i]) / 1024);
    char lut[128] = "";
    if (hx__cpu_vbmi()) { /* tiles per block : groups prefetched ahead */
        int tiles, ahead;
        hx__cpu_q1_lut(&tiles, &ahead);
        snprintf(lut, sizeof lut, ", Q1_0 lookup decode (tiles:groups ahead): %d:%d", tiles, ahead);
    }
    snprintf(out, len, "kernels: %s (best on this CPU: %s), threads: %d, decode streams per thread: %d, "
             "decode software prefetch%s%s", hx__cpu_isa_name(hx__cpu_isa()),
             hx__cpu_isa_name(hx__cpu_isa_best()), c->n_threads, hx__cpu_decode_streams(), pf, lut);
}

const struct hx_backend_ops hx__backend_cpu_ops = {
    .abi_version = HX_BACKEND_ABI_VERSION,
    .struct_size = sizeof(struct hx_backend_ops),
    .name = "cpu",
    .ctx_size = sizeof(struct hx_cpu_dev),
    .probe = hx_cpu_probe,
    .device_info = hx_cpu_device_info,
    .init = hx_cpu_init,
    .fini = hx_cpu_fini,
    .buffer_alloc = hx__host_buffer_alloc,
    .buffer_free = hx__host_buffer_free,
    .buffer_write = hx__host_buffer_write,
    .buffer_read = hx__host_buffer_read,
    .weight_prepare = hx_cpu_weight_prepare,
    .weight_bytes = hx_cpu_weight_bytes,
    .weight_release = hx_cpu_weight_release,
    .supports = hx_cpu_supports,
    .run = hx_cpu_run,
    .describe = hx_cpu_describe,
    .scratch_bytes = hx_cpu_scratch_bytes,
};
