/*
 * npu-mem.c — NPU device setup and memory: opening every manifest kernel (hw context,
 * instruction stream loaded and validated, the per-kernel buffers A×2, C×2 and the
 * instruction BO allocated once), activation buffers (host memory: the NPU shares system
 * memory, so the core reads and writes them in place), and weights converted once at load
 * into the kernel's B layout as int8 with per-output-channel scales.
 *
 * Weight conversion: each row (output channel) is dequantized from its GGUF type and turned
 * into int8 with one scale. Rows whose values are all integer multiples (|q| <= 127) of their
 * smallest non-zero magnitude convert exactly — every ternary (TQ1_0, TQ2_0) and binary
 * (Q1_0) row with one block scale per row does, and so do such rows stored as F16/F32 — the
 * ternary bridge. Other rows are rounded with scale amax / 127. K padding of B is zero, as is
 * N padding (its outputs are ignored anyway).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu-impl.h"

#define HX_NPU_ALIGN 64

int hx__npu_grow(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return HX_OK;
    size_t bytes;
    if (!hx__mul_size(n, elem, &bytes)) return HX_E_NOMEM;
    void *q = hx_realloc(*p, bytes);
    if (!q) return HX_E_NOMEM;
    *p = q, *cap = n;
    return HX_OK;
}

/* ---- kernels ------------------------------------------------------------------------------- */

static int hx_npu_kfail(struct hx_device *dev, int st, const struct hx_npu_kernel *kn,
                        const char *what, const char *why)
{
    return hx_device_set_error(dev, st, "kernel %s: %s: %s", kn->name, what, why);
}

static int hx_npu_load_insts(struct hx_device *dev, const struct hx_npu_kernel *kn,
                             uint32_t **words, size_t *n_words)
{
    char err[400];
    int st;
    if (kn->insts[0]) {
        if ((st = hx__npu_txn_read_file(kn->insts, words, n_words, err, sizeof err)))
            return hx_npu_kfail(dev, st, kn, "instructions", err);
    } else {
        size_t n = 0;
        hx__npu_txn_generate(&kn->d, NULL, 0, &n);
        if (!(*words = hx_malloc(n * sizeof **words))) return HX_E_NOMEM;
        hx__npu_txn_generate(&kn->d, *words, n, n_words);
    }
    const struct hx_npu_kernel_desc *d = &kn->d;
    size_t sizes[3] = {(size_t)(d->M * d->K), (size_t)(d->K * d->N), (size_t)(d->M * d->N * 4)};
    st = hx__npu_txn_validate(*words, *n_words * 4, d->dev_gen, 3, sizes, err, sizeof err);
    /* Real mlir-aie streams may hold opcodes this walker does not size (MASKPOLL, NOOP, ...):
     * on hardware the header checks stay fatal, an unwalkable body is only a warning — the
     * firmware validates it. The simulator runs only streams it can walk. */
    if (st && !hx_npu_ctx(dev)->simulated && strstr(err, "unknown opcode")) {
        char hdr[300];
        uint32_t head[4];
        memcpy(head, *words, sizeof head);
        head[2] = 0, head[3] = 16;   /* header alone: zero operations, 16 bytes */
        if (*n_words * 4 == (*words)[3] &&
            hx__npu_txn_validate(head, 16, d->dev_gen, 3, NULL, hdr, sizeof hdr) == HX_OK) {
            HX_LOG_WARN("kernel %s: instruction stream not fully checked: %s", kn->name, err);
            st = HX_OK;
        }
    }
    if (st) {
        hx_free(*words);
        *words = NULL;
        char what[600];
        snprintf(what, sizeof what, "instruction file %s", kn->insts[0] ? kn->insts : "(generated)");
        return hx_npu_kfail(dev, st, kn, what, err);
    }
    return HX_OK;
}

static int hx_npu_bo(struct hx_device *dev, struct hx_npu_kinst *ki, size_t nbytes,
                     uint32_t flags, int group, void **bo, void **map)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    int st = d->glue->bo_alloc(ki->h, nbytes, flags, group, bo);
    if (st) return hx_npu_kfail(dev, st, ki->kn, "buffer allocation", d->glue->error(ki->h));
    if (!(*map = d->glue->bo_map(ki->h, *bo)))
        return hx_npu_kfail(dev, HX_E_DEVICE, ki->kn, "bo.map", d->glue->error(ki->h));
    return HX_OK;
}

static int hx_npu_sync(struct hx_device *dev, struct hx_npu_kinst *ki, void *bo, int dir,
                       size_t nbytes, size_t off)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    int st = d->glue->bo_sync(ki->h, bo, dir, nbytes, off);
    return st ? hx_npu_kfail(dev, st, ki->kn, "bo.sync", d->glue->error(ki->h)) : HX_OK;
}

static int hx_npu_kinst_open(struct hx_device *dev, struct hx_npu_kinst *ki,
                             const struct hx_npu_kernel *kn)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    memset(ki, 0, sizeof *ki);
    ki->kn = kn;
    struct hx_npu_kernel_desc kd = kn->d;
    kd.xclbin_path = kn->xclbin[0] ? kn->xclbin : NULL;
    char err[512] = "";
    int st = d->glue->open(&kd, &ki->h, err, sizeof err);
    if (st) return hx_npu_kfail(dev, st == HX_E_NOMEM ? st : HX_E_DEVICE, kn, "open", err);
    uint32_t *words = NULL;
    size_t nw = 0;
    if ((st = hx_npu_load_insts(dev, kn, &words, &nw))) return st;
    void *map;
    st = hx_npu_bo(dev, ki, nw * 4, HX_NPU_BO_CACHEABLE, HX_NPU_ARG_INSTR, &ki->instr_bo, &map);
    if (st == HX_OK) {
        memcpy(map, words, nw * 4);
        st = hx_npu_sync(dev, ki, ki->instr_bo, HX_NPU_SYNC_TO_DEVICE, nw * 4, 0);
    }
    hx_free(words);
    if (st) return st;
    ki->ninstr = (uint32_t)(kn->ninstr_bytes ? nw * 4 : nw);
    size_t a_bytes = (size_t)(kd.M * kd.K), c_bytes = (size_t)(kd.M * kd.N) * 4;
    for (int s = 0; s < 2 && st == HX_OK; s++) {
        st = hx_npu_bo(dev, ki, a_bytes, HX_NPU_BO_HOST_ONLY, HX_NPU_ARG_BO0, &ki->a_bo[s], &map);
        if (st) break;
        ki->a_map[s] = map;
        memset(map, 0, a_bytes);   /* padding rows and K padding start (and stay) zero */
        st = hx_npu_sync(dev, ki, ki->a_bo[s], HX_NPU_SYNC_TO_DEVICE, a_bytes, 0);
        if (st == HX_OK)
            st = hx_npu_bo(dev, ki, c_bytes, HX_NPU_BO_HOST_ONLY, HX_NPU_ARG_BO0 + 2, &ki->c_bo[s], &map);
        if (st == HX_OK) {
            ki->c_map[s] = map;
            memset(map, 0, c_bytes);
            st = hx_npu_sync(dev, ki, ki->c_bo[s], HX_NPU_SYNC_TO_DEVICE, c_bytes, 0);
        }
        if (st == HX_OK && !(ki->a_scale[s] = hx_calloc((size_t)kd.M, sizeof(float)))) st = HX_E_NOMEM;
    }
    if (st == HX_OK) /* the plan's memory counts these (hx__npu_scratch_bytes) */
        d->kernel_bytes += nw * 4 + 2 * (a_bytes + c_bytes + (size_t)kd.M * sizeof(float));
    return st;
}

static void hx_npu_kinst_close(struct hx_npu_dev *d, struct hx_npu_kinst *ki)
{
    if (!ki->h) return;
    for (int s = 0; s < 2; s++) {
        if (ki->a_bo[s]) d->glue->bo_free(ki->h, ki->a_bo[s]);
        if (ki->c_bo[s]) d->glue->bo_free(ki->h, ki->c_bo[s]);
        hx_free(ki->a_scale[s]);
    }
    if (ki->instr_bo) d->glue->bo_free(ki->h, ki->instr_bo);
    d->glue->close(ki->h);
    memset(ki, 0, sizeof *ki);
}

static int hx_npu_load_manifest(struct hx_device *dev, const struct hx_device_config *cfg)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    const char *dir = cfg && cfg->kernels_dir && *cfg->kernels_dir ? cfg->kernels_dir : getenv("HX_NPU_KERNELS");
    if (dir && *dir) {
        char err[700];
        int st = hx__npu_manifest_load(dir, &d->man, err, sizeof err);
        return st ? hx_device_set_error(dev, st, "kernel manifest: %s", err) : HX_OK;
    }
    if (!d->simulated)
        return hx_device_set_error(dev, HX_E_UNAVAILABLE,
                                   "no kernel manifest: pass --npu-kernels DIR (or set "
                                   "HX_NPU_KERNELS) naming a folder with manifest.json and the "
                                   "compiled xclbin/insts files (docs/npu-backend.md)");
    hx__npu_manifest_builtin(&d->man);
    return HX_OK;
}

int hx__npu_dev_init(struct hx_device *dev, const struct hx_npu_glue_ops *glue,
                     const struct hx_device_config *cfg, bool simulated)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    d->glue = glue;
    d->simulated = simulated;
    d->dbg.timeout_ms = HX_NPU_DEFAULT_TIMEOUT_MS;
    int st = hx_npu_load_manifest(dev, cfg);
    for (int i = 0; st == HX_OK && i < d->man.n_kernels; i++) {
        st = hx_npu_kinst_open(dev, &d->ki[i], &d->man.k[i]);
        d->n_ki = i + 1;
        d->ki_ok[i] = st == HX_OK;
    }
    if (st) {
        hx__npu_dev_fini(dev);
        return st;
    }
    HX_LOG_INFO("[%s] %d NPU kernels ready (%s, glue %s)", dev->id, d->n_ki, d->man.source, glue->name);
    return HX_OK;
}

void hx__npu_dev_fini(struct hx_device *dev)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    if (!d || !d->glue) return;
    if (d->pending) hx__npu_synchronize(dev);
    for (int i = 0; i < d->n_ki; i++) hx_npu_kinst_close(d, &d->ki[i]);
    d->n_ki = 0;
    hx_free(d->qa), hx_free(d->sa), hx_free(d->acc), hx_free(d->row), hx_free(d->qrow);
    hx_free(d->res), d->res = NULL, d->res_cap = 0;
    d->qa = NULL, d->sa = NULL, d->acc = NULL, d->row = NULL, d->qrow = NULL;
    d->qa_cap = d->sa_cap = d->acc_cap = d->row_cap = d->qrow_cap = 0;
    d->kernel_bytes = 0;
    d->glue = NULL;
}

/* ---- activation buffers ------------------------------------------------------------------ */

int hx__npu_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf)
{
    (void)dev;
    size_t total = nbytes + HX_NPU_ALIGN + sizeof(void *);
    if (total < nbytes) return HX_E_NOMEM;
    char *raw = hx_calloc(1, total);
    if (!raw) return HX_E_NOMEM;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + HX_NPU_ALIGN - 1) & ~(uintptr_t)(HX_NPU_ALIGN - 1);
    buf->ctx = raw;
    buf->host = (void *)p;
    buf->nbytes = nbytes;
    return HX_OK;
}

void hx__npu_buffer_free(struct hx_device *dev, struct hx_buffer *buf)
{
    if (hx_npu_ctx(dev)->pending) hx__npu_synchronize(dev);
    hx_free(buf->ctx);
    buf->ctx = buf->host = NULL;
}

int hx__npu_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                         const void *src, size_t nbytes)
{
    int st = hx_npu_ctx(dev)->pending ? hx__npu_synchronize(dev) : HX_OK;
    if (st == HX_OK) memcpy((char *)buf->host + offset, src, nbytes);
    return st;
}

int hx__npu_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                        size_t nbytes)
{
    int st = hx_npu_ctx(dev)->pending ? hx__npu_synchronize(dev) : HX_OK;
    if (st == HX_OK) memcpy(dst, (const char *)buf->host + offset, nbytes);
    return st;
}

/* ---- weights ------------------------------------------------------------------------------ */

static uint64_t hx_npu_garbage(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Scatter int8 row j of the weight into its B tiles (K padding and N padding already set). */
static void hx_npu_scatter_row(const struct hx_npu_kinst *ki, int8_t *const *maps,
                               const struct hx_npu_weight *w, int64_t j, const int8_t *q)
{
    const struct hx_npu_kernel_desc *kd = &ki->kn->d;
    int64_t nt = j / kd->N, jj = j % kd->N;
    for (int64_t kt = 0; kt < w->n_kt; kt++) {
        int8_t *t = maps[nt * w->n_kt + kt];
        int64_t k0 = kt * kd->K, len = HX_MIN(kd->K, w->K - k0);
        if (kd->b_col_maj) memcpy(t + jj * kd->K, q + k0, (size_t)len);
        else for (int64_t k = 0; k < len; k++) t[k * kd->N + jj] = q[k0 + k];
    }
}

/* Debug knobs: poison K padding, garbage in N-padding rows (the results must prove both). */
static void hx_npu_pad_knobs(const struct hx_npu_dev *d, const struct hx_npu_kinst *ki,
                             int8_t *const *maps, const struct hx_npu_weight *w)
{
    const struct hx_npu_kernel_desc *kd = &ki->kn->d;
    int64_t kpad0 = w->K - (w->n_kt - 1) * kd->K, nvalid = w->N - (w->n_nt - 1) * kd->N;
    uint64_t seed = 0x1234567u;
    for (int64_t nt = 0; nt < w->n_nt; nt++) {
        int8_t *t = maps[nt * w->n_kt + w->n_kt - 1];
        for (int64_t jj = 0; jj < kd->N; jj++) {
            bool pad_row = nt == w->n_nt - 1 && jj >= nvalid;
            for (int64_t k = 0; k < kd->K; k++) {
                int8_t *p = kd->b_col_maj ? t + jj * kd->K + k : t + k * kd->N + jj;
                if (pad_row && d->dbg.garbage_npad) *p = (int8_t)hx_npu_garbage(&seed);
                else if (!pad_row && k >= kpad0 && d->dbg.poison_kpad) *p = 0x5A;
            }
        }
    }
}

static int hx_npu_weight_fill(struct hx_device *dev, const struct hx_weight *hw,
                              struct hx_npu_weight *w, int8_t **maps)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_kinst *ki = &d->ki[w->ki];
    size_t row_bytes = hx_dtype_row_bytes(hw->type, w->K);
    if (!row_bytes || hw->nbytes < row_bytes * (size_t)w->N)
        return hx_device_set_error(dev, HX_E_FORMAT, "weight %s: %zu bytes for %lld x %lld %s",
                                   hw->name, hw->nbytes, (long long)w->N, (long long)w->K,
                                   hx_dtype_name(hw->type));
    if (hx__npu_grow((void **)&d->row, &d->row_cap, (size_t)w->K, sizeof(float)) ||
        hx__npu_grow((void **)&d->qrow, &d->qrow_cap, (size_t)w->K, 1))
        return HX_E_NOMEM;
    for (int64_t j = 0; j < w->N; j++) {
        int st = hx_weight_dequantize_row(hw, j, d->row); /* with I2_S's tensor scale */
        if (st) return hx_device_set_error(dev, st, "weight %s: row %lld cannot be decoded", hw->name, (long long)j);
        bool exact;
        w->s_w[j] = hx__npu_weight_row_to_i8(d->row, w->K, d->qrow, &exact) * hw->scale;
        w->n_exact_rows += exact;
        hx_npu_scatter_row(ki, maps, w, j, d->qrow);
    }
    return HX_OK;
}

int hx__npu_weight_prepare(struct hx_device *dev, const struct hx_weight *hw, void **handle)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    *handle = NULL;
    dev->last_error[0] = '\0';
    struct hx_npu_choice ch;
    if (hw->n_rows < 1 || !hx__npu_pick_kernel(&d->man, d->ki_ok, hw->n_cols, hw->n_rows, &ch))
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "weight %s (%lld x %lld): no kernel of "
                                   "the manifest covers it", hw->name, (long long)hw->n_rows,
                                   (long long)hw->n_cols);
    struct hx_npu_kinst *ki = &d->ki[ch.kernel];
    const struct hx_npu_kernel_desc *kd = &ki->kn->d;
    struct hx_npu_weight *w = hx_calloc(1, sizeof *w);
    int64_t n_tiles = ch.n_kt * ch.n_nt;
    int8_t **maps = hx_calloc((size_t)n_tiles, sizeof *maps);
    int st = HX_OK;
    if (!w || !maps || !(w->s_w = hx_malloc((size_t)hw->n_rows * sizeof(float))) ||
        !(w->b_bo = hx_calloc((size_t)n_tiles, sizeof *w->b_bo))) {
        st = HX_E_NOMEM;
        goto fail;
    }
    w->ki = ch.kernel, w->K = hw->n_cols, w->N = hw->n_rows, w->n_kt = ch.n_kt, w->n_nt = ch.n_nt;
    size_t tile_bytes = (size_t)(kd->K * kd->N);
    for (int64_t t = 0; t < n_tiles; t++) {
        void *map;
        if ((st = hx_npu_bo(dev, ki, tile_bytes, HX_NPU_BO_HOST_ONLY, HX_NPU_ARG_BO0 + 1,
                            &w->b_bo[t], &map)))
            goto fail;
        maps[t] = map;
        memset(map, 0, tile_bytes);
    }
    if ((st = hx_npu_weight_fill(dev, hw, w, maps))) goto fail;
    if (d->dbg.poison_kpad || d->dbg.garbage_npad) hx_npu_pad_knobs(d, ki, maps, w);
    for (int64_t t = 0; t < n_tiles && st == HX_OK; t++)
        st = hx_npu_sync(dev, ki, w->b_bo[t], HX_NPU_SYNC_TO_DEVICE, tile_bytes, 0);
    if (st) goto fail;
    d->dbg.n_exact_rows += w->n_exact_rows;
    d->dbg.n_inexact_rows += w->N - w->n_exact_rows;
    hx_free(maps);
    HX_LOG_DEBUG("[%s] weight %s: kernel %s, %lld x %lld calls, %lld/%lld rows exact", dev->id,
                 hw->name, ki->kn->name, (long long)w->n_kt, (long long)w->n_nt,
                 (long long)w->n_exact_rows, (long long)w->N);
    *handle = w;
    return HX_OK;
fail:
    hx_free(maps);
    hx__npu_weight_release(dev, w);
    if (st == HX_E_NOMEM && !dev->last_error[0])
        hx_device_set_error(dev, st, "weight %s: out of memory", hw->name);
    return st;
}

/* Memory of a weight in B layout: its int8 tiles (K × N of the kernel each) and the f32
 * scale of every output channel (host memory: the NPU shares it). */
int hx__npu_weight_bytes(struct hx_device *dev, const struct hx_weight *hw, void *handle,
                         size_t *out)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    const struct hx_npu_weight *w = handle;
    struct hx_npu_choice ch;
    *out = hw->nbytes; /* no kernel covers it: weight_prepare refuses it anyway */
    if (w) {
        const struct hx_npu_kernel_desc *kd = &d->ki[w->ki].kn->d;
        *out = (size_t)(w->n_kt * w->n_nt) * (size_t)(kd->K * kd->N) + (size_t)w->N * sizeof(float);
    } else if (hw->n_rows >= 1 &&
               hx__npu_pick_kernel(&d->man, d->ki_ok, hw->n_cols, hw->n_rows, &ch)) {
        const struct hx_npu_kernel_desc *kd = &d->ki[ch.kernel].kn->d;
        *out = (size_t)(ch.n_kt * ch.n_nt) * (size_t)(kd->K * kd->N) +
               (size_t)hw->n_rows * sizeof(float);
    }
    return HX_OK;
}

void hx__npu_weight_release(struct hx_device *dev, void *handle)
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    struct hx_npu_weight *w = handle;
    if (!w) return;
    if (d->pending) hx__npu_synchronize(dev);
    struct hx_npu_kinst *ki = &d->ki[w->ki];
    for (int64_t t = 0; w->b_bo && t < w->n_kt * w->n_nt; t++)
        if (w->b_bo[t] && ki->h) d->glue->bo_free(ki->h, w->b_bo[t]);
    hx_free(w->b_bo);
    hx_free(w->s_w);
    hx_free(w);
}

/* ---- the plan's memory ------------------------------------------------------------------- */

/* What the buffers above grow to, sized as hx_npu_check_split (npu-gemm.c) and
 * hx_npu_weight_fill grow them: a weight's kernel from its handle, or (a plan's op, no handle
 * yet) the one weight_prepare will pick. BOs count the bytes asked of the driver (the
 * simulator keeps a device-side copy of each as well, its own memory). */
int hx__npu_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                          size_t out[HX_SCRATCH_BUFS])
{
    struct hx_npu_dev *d = hx_npu_ctx(dev);
    out[0] = d->kernel_bytes;
    if (!sp) {
        out[1] = d->qa_cap, out[2] = d->sa_cap * sizeof(float);
        out[3] = d->acc_cap * sizeof(int32_t), out[4] = d->res_cap * sizeof(float);
        out[5] = d->row_cap * sizeof(float), out[6] = d->qrow_cap;
        return HX_OK;
    }
    for (int64_t i = 0; i < sp->n_ops; i++) {
        const struct hx_op *op = &sp->ops[i];
        const struct hx_weight *hw = op->weight;
        const struct hx_npu_weight *w = op->weight_handle;
        struct hx_npu_choice ch;
        if (op->desc.kind != HX_OP_MATMUL || !hw) continue;
        if (w)
            ch.kernel = w->ki, ch.n_kt = w->n_kt;
        else if (hw->n_rows < 1 ||
                 !hx__npu_pick_kernel(&d->man, d->ki_ok, hw->n_cols, hw->n_rows, &ch))
            continue; /* weight_prepare refuses it */
        const struct hx_npu_kernel_desc *kd = &d->ki[ch.kernel].kn->d;
        const size_t K = (size_t)hw->n_cols;
        if (op->desc.n_rows > 0) out[4] = HX_MAX(out[4], K * sizeof(float));
        if (op->desc.n_rows > 0 && ch.n_kt > 1) {
            out[1] = HX_MAX(out[1], (size_t)(kd->M * ch.n_kt * kd->K));
            out[2] = HX_MAX(out[2], (size_t)kd->M * sizeof(float));
            out[3] = HX_MAX(out[3], (size_t)(kd->M * kd->N) * sizeof(int32_t));
        }
        out[5] = HX_MAX(out[5], K * sizeof(float));
        out[6] = HX_MAX(out[6], K);
    }
    return HX_OK;
}
