/*
 * sched-verify.c — the scheduler's `verify`: every node is its own split (sched-exec.c);
 * before it runs, the slots it reads are copied to a separate instance of the reference
 * device, which runs the same node after it; the two outputs are compared against the error
 * model of core/numerics.h for what the target device computes. The reference keeps its own
 * KV cache, written from the target's K/V inputs, so it always equals the target's.
 *
 * Its interface to the scheduler is narrow: it is handed the target device's memory (a
 * struct hx_sdev) and the batch, and uses the memory layer (sched-mem.c) for its reference
 * like for any device; it never sees struct hx_sched. A failure of the reference stops
 * verification (logged, reported), never the run; only the target's own failures are errors.
 *
 * For engine diff's whole-model bound (docs/policies.md "The whole-model bound") verify can also
 * run twins: more instances of the reference, opened with its spec and device config, that run
 * every node on their own inputs (each its own whole model, like a single:REF run, fed the same
 * tokens). Twin 0 holds each matmul's weights as the device that ran it does
 * (HX_NUMERICS_INT8_ROW: its int8 conversion, added as x·(ŵ − w)ᵀ). Twins 1..HX_VERIFY_DRAWS add
 * every op's error drawn at random: a matmul's input dithered by the activation rounding of its
 * device's numerics (on a FLOAT device scaled down to the error the target's op had, when
 * smaller), its output by the f32 summation floor; any other op's output by the error verify
 * just measured in the target's op, in random directions. Twin 0 is what the devices' weights
 * make of the model; twin p − twin 0 is one draw of what the modelled rounding adds to it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "numerics.h"
#include "sched-impl.h"

/* A matmul weight's rows for the error model (numerics.h): per row j and K-block b. */
struct hx_vweight {
    const struct hx_weight *w;
    double *e;  /* Σ w² */
    double *dw; /* Σ (w − ŵ)² of HX_NUMERICS_INT8_ROW's conversion; NULL until one needs it */
    float *delta; /* the twins: ŵ − w of that conversion, rows × K (only if it fits the cap) */
};

/* The twins: 0 with the devices' weights, 1.. also with every op's modelled error drawn. */
#define HX_VTWINS (1 + HX_VERIFY_DRAWS)

struct hx_verify {
    bool on;                       /* checking; false once the reference failed */
    const struct hx_mem_geom *mem; /* the scheduler's sizes (borrowed) */
    struct hx_sdev sd;             /* the reference: its own device instance */
    struct hx_verify_op *ops[HX_PHASE_COUNT];
    int64_t cap[HX_PHASE_COUNT];
    struct hx_verify_report rep;
    float *a, *b; /* the target's and the reference's output rows */
    size_t ab_cap;
    int64_t run_index;
    struct hx_vweight *vw; /* matmul weights seen, linear search (a few per layer) */
    int64_t n_vw, cap_vw;
    float *x;      /* a matmul's input rows */
    double *model; /* their activation model: s and xm per row × block */
    size_t x_cap, model_cap;
    /* the twins (hx__verify_twins_start) */
    char *tw_spec;                  /* how to open them: the reference's spec and config */
    struct hx_device_config tw_cfg; /* its kernels_dir a copy of its own */
    bool tw_on;
    struct hx_sdev tw[HX_VTWINS];
    uint64_t tw_rng;
    int64_t tw_rows, tw_logits; /* the last run's batch rows, and how many (the last) have logits */
    float *tx, *ty, *tsave;     /* input rows (dithered), output rows, the input as it was */
    size_t tx_cap, ty_cap, tsave_cap;
    float *trow; /* one weight row and its conversion error */
    size_t trow_cap;
    double *rowerr; /* per output row, Σ (target − reference)² of the op just compared */
    double *tscale; /* per row, the share of its modelled error a random twin draws */
    size_t rowerr_cap, tscale_cap;
    int64_t tw_delta_bytes; /* bytes of cached conversion errors */
};

/* Scratch arrays of n elements at least (their contents are not kept). */
static int hx__grow_f(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return HX_OK;
    float *q = hx__realloc(*p, n * sizeof *q);
    if (!q) return HX_E_NOMEM;
    *p = q, *cap = n;
    return HX_OK;
}

static int hx__grow_d(double **p, size_t *cap, size_t n)
{
    if (n <= *cap) return HX_OK;
    double *q = hx__realloc(*p, n * sizeof *q);
    if (!q) return HX_E_NOMEM;
    *p = q, *cap = n;
    return HX_OK;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

int hx__verify_new(const char *spec, const struct hx_device_config *cfg,
                   const struct hx_mem_geom *mem, struct hx_verify **out)
{
    *out = NULL;
    if (!strcasecmp(spec, "gpu") && !(spec = hx__resolve_gpu()))
        return hx__set_error(HX_E_UNAVAILABLE,
                             "verify: reference 'gpu' but no GPU backend is usable here");
    struct hx_verify *v = hx__calloc(1, sizeof *v);
    if (!v) return HX_E_NOMEM;
    int st = hx__device_open(spec, cfg, &v->sd.dev);
    if (st) {
        hx__free(v);
        return hx__set_error(st, "verify: reference device '%s': %s", spec, hx_last_error());
    }
    snprintf(v->rep.ref, sizeof v->rep.ref, "%s", v->sd.dev->id);
    v->mem = mem;
    v->on = true;
    /* kept for the twins, if engine diff asks for them (hx__verify_twins_start) */
    v->tw_cfg = *cfg;
    v->tw_spec = hx_strdup(spec);
    v->tw_cfg.kernels_dir = cfg->kernels_dir ? hx_strdup(cfg->kernels_dir) : NULL;
    if (!v->tw_spec || (cfg->kernels_dir && !v->tw_cfg.kernels_dir)) {
        hx__verify_free(v);
        return HX_E_NOMEM;
    }
    *out = v;
    return HX_OK;
}

void hx__verify_free(struct hx_verify *v)
{
    if (!v) return;
    hx__sdev_close(v->mem, &v->sd);
    for (int t = 0; t < HX_VTWINS; t++) hx__sdev_close(v->mem, &v->tw[t]);
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) hx__free(v->ops[ph]);
    hx__free(v->a);
    hx__free(v->b);
    for (int64_t i = 0; i < v->n_vw; i++)
        hx__free(v->vw[i].e), hx__free(v->vw[i].dw), hx__free(v->vw[i].delta);
    hx__free(v->vw);
    hx__free(v->x);
    hx__free(v->model);
    hx__free(v->tw_spec);
    hx__free((char *)v->tw_cfg.kernels_dir);
    hx__free(v->tx), hx__free(v->ty), hx__free(v->tsave), hx__free(v->trow);
    hx__free(v->rowerr), hx__free(v->tscale);
    hx__free(v);
}

bool hx__verify_on(const struct hx_verify *v)
{
    return v && v->on;
}

const char *hx__verify_ref(const struct hx_verify *v)
{
    return v ? v->rep.ref : "";
}

void hx__verify_run_done(struct hx_verify *v)
{
    if (v) v->run_index++;
}

const struct hx_verify_report *hx__verify_report(struct hx_verify *v)
{
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) v->rep.ops[ph] = v->ops[ph];
    return &v->rep;
}

/* ---- checks ---------------------------------------------------------------------------------- */

double hx__verify_ratio(double nmse, double threshold)
{
    if (isnan(nmse)) return INFINITY;
    return threshold > 0 ? nmse / threshold : nmse > 0 ? INFINITY : 0;
}

/* The twins stop for good (diff then has no whole-model bound: a failure). */
static void hx__tw_stop(struct hx_verify *v, const char *what, int st)
{
    if (!v->tw_on) return;
    HX_LOG_WARN("verify: the whole-model twins stopped (%s: %s: %s)", what, hx_status_name(st),
                hx_last_error());
    v->tw_on = false;
}

/* No further ops are checked (and the twins, which follow the checks, stop). */
static void hx__verify_off(struct hx_verify *v, int st)
{
    v->on = false;
    v->rep.ref_failed = true;
    hx__tw_stop(v, "verify stopped", st);
}

static void hx__verify_stop(struct hx_verify *v, int st)
{
    HX_LOG_WARN("verify: the reference %s failed (%s: %s); no further ops are checked", v->rep.ref,
                hx_status_name(st), v->sd.dev->last_error);
    hx__verify_off(v, st);
}

void hx__verify_before(struct hx_verify *v, const struct hx_graph *g, const struct hx_node *nd,
                       struct hx_sdev *target)
{
    int rd[4], n = hx__node_reads(nd, rd), st = HX_OK;
    for (int r = 0; r < n && st == HX_OK; r++) {
        struct hx_buffer *from = NULL, *to = NULL;
        size_t nb = hx__slot_bytes(g, rd[r]);
        st = hx__slot_buf(v->mem, target, rd[r], &from);
        if (st == HX_OK) st = hx__slot_buf(v->mem, &v->sd, rd[r], &to);
        if (st == HX_OK) st = hx__dev_copy(to, 0, from, 0, nb);
    }
    if (st) hx__verify_stop(v, st);
}

static struct hx_verify_op *hx__verify_slot(struct hx_verify *v, enum hx_phase ph, int64_t k,
                                            const struct hx_node *nd, const struct hx_sdev *target)
{
    if (k >= v->cap[ph]) {
        int64_t cap = HX_MAX(k + 1, 2 * v->cap[ph]);
        struct hx_verify_op *o = hx__realloc(v->ops[ph], (size_t)cap * sizeof *o);
        if (!o) return NULL;
        memset(o + v->cap[ph], 0, (size_t)(cap - v->cap[ph]) * sizeof *o);
        v->ops[ph] = o, v->cap[ph] = cap;
    }
    v->rep.n_ops[ph] = HX_MAX(v->rep.n_ops[ph], k + 1);
    struct hx_verify_op *op = &v->ops[ph][k];
    if (!op->n_checks || op->kind != nd->desc.kind || op->cls != nd->desc.cls ||
        op->part != nd->part) {
        memset(op, 0, sizeof *op);
        *op = (struct hx_verify_op){.node = k,
                                    .kind = nd->desc.kind,
                                    .cls = nd->desc.cls,
                                    .layer = nd->desc.layer,
                                    .part = nd->part,
                                    .n_parts = nd->n_parts};
    }
    snprintf(op->dev, sizeof op->dev, "%s", target->dev->id);
    return op;
}

static void hx__verify_record(struct hx_verify *v, enum hx_phase ph, int64_t k,
                              const struct hx_node *nd, const struct hx_sdev *target,
                              double max_abs, double nmse, double thr, bool nonfinite)
{
    struct hx_verify_op *op = hx__verify_slot(v, ph, k, nd, target);
    if (!op) return;
    bool fail = nonfinite || !(nmse <= thr);
    if (!op->n_checks || hx__verify_ratio(nmse, thr) > hx__verify_ratio(op->nmse, op->threshold))
        op->nmse = nmse, op->threshold = thr; /* the check closest to (or most over) its bound */
    op->max_abs = HX_MAX(op->max_abs, max_abs);
    op->nonfinite |= nonfinite;
    op->n_checks++, op->n_failed += fail;
    struct hx_verify_report *rep = &v->rep;
    rep->n_checks++, rep->n_failed += fail;
    if (!fail || rep->has_first) return;
    rep->has_first = true;
    rep->first = *op;
    rep->first.max_abs = max_abs, rep->first.nmse = nmse, rep->first.threshold = thr;
    rep->first.nonfinite = nonfinite;
    rep->first_phase = ph;
    rep->first_run = v->run_index;
    HX_LOG_WARN(
        "verify: first divergent op: node %lld (layer %d %s %s) on %s vs %s: NMSE %.3g > %.3g, "
        "max abs err %.3g%s (%s, run %lld)",
        (long long)k, nd->desc.layer, hx_op_kind_name(nd->desc.kind),
        hx_op_class_name(nd->desc.cls), target->dev->id, rep->ref, nmse, thr, max_abs,
        nonfinite ? ", non-finite output" : "", ph == HX_PHASE_PREFILL ? "prefill" : "decode",
        (long long)v->run_index);
}

static int hx__verify_bufs(struct hx_verify *v, size_t n)
{
    if (n <= v->ab_cap) return HX_OK;
    float *a = hx__realloc(v->a, n * sizeof *a);
    if (a) v->a = a;
    float *b = hx__realloc(v->b, n * sizeof *b);
    if (b) v->b = b;
    if (!a || !b) return HX_E_NOMEM;
    v->ab_cap = n;
    return HX_OK;
}

/* The weight's rows for the error model, computed once (and dw once an INT8_ROW device runs
 * it). */
static int hx__verify_weight(struct hx_verify *v, const struct hx_weight *w, enum hx_numerics num,
                             struct hx_vweight **out)
{
    struct hx_vweight *vw = NULL;
    for (int64_t i = 0; i < v->n_vw && !vw; i++)
        if (v->vw[i].w == w) vw = &v->vw[i];
    if (!vw) {
        if (v->n_vw == v->cap_vw) {
            int64_t cap = HX_MAX(16, 2 * v->cap_vw);
            struct hx_vweight *n = hx__realloc(v->vw, (size_t)cap * sizeof *n);
            if (!n) return HX_E_NOMEM;
            v->vw = n, v->cap_vw = cap;
        }
        vw = &v->vw[v->n_vw];
        *vw = (struct hx_vweight){.w = w};
    }
    const bool need_e = !vw->e, need_dw = num == HX_NUMERICS_INT8_ROW && !vw->dw;
    if (!need_e && !need_dw) return *out = vw, HX_OK;
    const int64_t k = w->n_cols, nb = hx__mm_blocks(k);
    const size_t cells = (size_t)(w->n_rows * nb);
    double *e = need_e ? hx__malloc(cells * sizeof *e) : vw->e;
    double *dw = need_dw ? hx__malloc(cells * sizeof *dw) : NULL;
    double *tmp = need_e ? NULL : hx__malloc((size_t)nb * sizeof *tmp);
    float *row = hx__malloc((size_t)k * sizeof *row);
    int st = e && (dw || !need_dw) && (tmp || need_e) && row ? HX_OK : HX_E_NOMEM;
    for (int64_t j = 0; j < w->n_rows && st == HX_OK; j++) {
        st = hx_weight_dequantize_row(w, j, row);
        if (st == HX_OK)
            hx__mm_weight_row(num, row, k, need_e ? e + j * nb : tmp, dw ? dw + j * nb : NULL);
    }
    hx__free(row), hx__free(tmp);
    if (st) {
        if (need_e) hx__free(e);
        hx__free(dw);
        return st;
    }
    if (vw == &v->vw[v->n_vw]) v->n_vw++;
    if (need_e) vw->e = e;
    if (dw) vw->dw = dw;
    return *out = vw, HX_OK;
}

/* A matmul's Σ e² allowed by the error model of the device that ran it (numerics.h), from its
 * input rows as the reference holds them (a copy of the target's) and its weight. */
static int hx__verify_mm_allowed(struct hx_verify *v, const struct hx_graph *g,
                                 const struct hx_node *nd, const struct hx_sdev *target,
                                 double *allowed)
{
    const enum hx_numerics num = target->dev->info.numerics;
    const struct hx_weight *w = nd->weight;
    const struct hx_node_ref *in = &nd->src[0];
    if (!w || in->slot < 0 || in->n_cols != w->n_cols || nd->dst.n_cols != w->n_rows)
        return hx__set_error(HX_E_INTERNAL, "verify: matmul node without a matching weight");
    const int64_t k = w->n_cols, nb = hx__mm_blocks(k), m = in->n_rows, n = w->n_rows;
    const size_t sw = (size_t)g->slot_width[in->slot], nx = (size_t)m * sw;
    struct hx_vweight *vw;
    int st = hx__verify_weight(v, w, num, &vw);
    if (st == HX_OK) st = hx__grow_f(&v->x, &v->x_cap, nx);
    if (st == HX_OK) st = hx__grow_d(&v->model, &v->model_cap, (size_t)(2 * nb));
    if (st == HX_OK)
        st = hx__dev_buffer_read(v->sd.slot[in->slot], (size_t)in->row * sw * sizeof(float), v->x,
                                 nx * sizeof(float));
    if (st) return st;
    const double sc2 = (double)w->scale * w->scale;
    double sv = 0, sty = 0;
    double *ms = v->model, *mxm = v->model + nb;
    for (int64_t r = 0; r < m; r++) {
        hx__mm_act_row(num, w->type, v->x + (size_t)r * sw + (size_t)in->col, k, ms, mxm);
        for (int64_t j = 0; j < n; j++) {
            double var, typ;
            hx__mm_output(nb, ms, mxm, vw->e + j * nb,
                          num == HX_NUMERICS_INT8_ROW ? vw->dw + j * nb : NULL, sc2, &var, &typ);
            sv += var, sty += typ;
        }
    }
    *allowed = hx__mm_allowed(sv, sty, (double)m, k); /* trained weights: one dof per row */
    return HX_OK;
}

/* Compare the output region of node k (held by device d) with the reference's. */
static int hx__verify_compare(struct hx_verify *v, const struct hx_graph *g, int64_t k,
                              const struct hx_sdev *target, enum hx_phase ph)
{
    const struct hx_node *nd = &g->nodes[k];
    const struct hx_node_ref *r = &nd->dst;
    size_t w = (size_t)g->slot_width[r->slot], n = (size_t)r->n_rows * w;
    size_t off = (size_t)r->row * w * sizeof(float);
    int st = hx__verify_bufs(v, n);
    if (st == HX_OK) st = hx__dev_buffer_read(target->slot[r->slot], off, v->a, n * sizeof(float));
    if (st) return st; /* the target's read failed: a target error */
    if ((st = hx__dev_buffer_read(v->sd.slot[r->slot], off, v->b, n * sizeof(float)))) {
        hx__verify_stop(v, st);
        return HX_OK;
    }
    double num = 0, den = 0, max_abs = 0;
    bool nonfinite = false;
    if (v->tw_on && hx__grow_d(&v->rowerr, &v->rowerr_cap, (size_t)r->n_rows))
        hx__tw_stop(v, "the measured errors", HX_E_NOMEM);
    for (int64_t row = 0; row < r->n_rows; row++) {
        double rn = 0;
        for (int64_t c = r->col; c < r->col + r->n_cols; c++) {
            double a = v->a[(size_t)row * w + (size_t)c], b = v->b[(size_t)row * w + (size_t)c];
            nonfinite |= !isfinite(a);
            rn += (a - b) * (a - b), den += b * b;
            max_abs = HX_MAX(max_abs, fabs(a - b));
        }
        num += rn;
        if (v->tw_on) v->rowerr[row] = rn; /* the twins: this op's error, as it was */
    }
    double thr = hx__op_nmse_threshold(nd->desc.kind);
    if (nd->desc.kind == HX_OP_MATMUL) {
        double allowed = 0;
        if ((st = hx__verify_mm_allowed(v, g, nd, target, &allowed))) {
            HX_LOG_WARN("verify: no error model for node %lld (%s: %s); no further ops are checked",
                        (long long)k, hx_status_name(st), hx_last_error());
            hx__verify_off(v, st);
            return HX_OK;
        }
        thr = den > 0 ? allowed / den : allowed;
    }
    hx__verify_record(v, ph, k, nd, target, max_abs, den > 0 ? num / den : num, thr, nonfinite);
    return HX_OK;
}

/* ---- the twins ------------------------------------------------------------------------------- */

#define HX_TW_DELTA_CAP ((int64_t)256 << 20) /* bytes of cached weight conversion errors */

static double hx__tw_uniform(struct hx_verify *v) /* in (0, 1) */
{
    return ((double)(hx__splitmix(&v->tw_rng) >> 11) + 0.5) * 0x1.0p-53;
}

static double hx__tw_gauss(struct hx_verify *v)
{
    return sqrt(-2.0 * log(hx__tw_uniform(v))) * cos(6.283185307179586 * hx__tw_uniform(v));
}

/* Rows [r->row, + n_rows) of a node's slot region on twin sd, whole slot rows. */
static int hx__tw_io(struct hx_verify *v, const struct hx_graph *g, struct hx_sdev *sd,
                     const struct hx_node_ref *r, float *buf, bool write)
{
    struct hx_buffer *b;
    int st = hx__slot_buf(v->mem, sd, r->slot, &b);
    size_t w = (size_t)g->slot_width[r->slot];
    size_t off = (size_t)r->row * w * sizeof(float), nb = (size_t)r->n_rows * w * sizeof(float);
    if (st) return st;
    return write ? hx__dev_buffer_write(b, off, buf, nb) : hx__dev_buffer_read(b, off, buf, nb);
}

/* ŵ − w of weight row j (HX_NUMERICS_INT8_ROW), or NULL if the row converts exactly: from the
 * cache, else dequantized and converted into v->trow. */
static const float *hx__tw_delta(struct hx_verify *v, struct hx_vweight *vw, int64_t j, int *st)
{
    const struct hx_weight *w = vw->w;
    const int64_t k = w->n_cols, nb = hx__mm_blocks(k);
    double d2 = 0;
    for (int64_t b = 0; b < nb; b++) d2 += vw->dw[j * nb + b];
    if (d2 == 0) return NULL;
    if (vw->delta) return vw->delta + j * k;
    if ((*st = hx__grow_f(&v->trow, &v->trow_cap, (size_t)(2 * k)))) return NULL;
    if ((*st = hx_weight_dequantize_row(w, j, v->trow)))
        return NULL;
    if (!hx__mm_int8_row_delta(v->trow, k, v->trow + k)) return NULL;
    return v->trow + k;
}

/* Fill vw->delta for the whole weight when it fits the cache (else rows are made per use). */
static void hx__tw_delta_cache(struct hx_verify *v, struct hx_vweight *vw)
{
    const struct hx_weight *w = vw->w;
    const int64_t bytes = w->n_rows * w->n_cols * (int64_t)sizeof(float);
    if (vw->delta || v->tw_delta_bytes + bytes > HX_TW_DELTA_CAP) return;
    float *all = hx__malloc((size_t)bytes);
    if (!all) return;
    int st = HX_OK;
    for (int64_t j = 0; j < w->n_rows && st == HX_OK; j++) {
        const float *dj = hx__tw_delta(v, vw, j, &st);
        if (dj)
            memcpy(all + j * w->n_cols, dj, (size_t)w->n_cols * sizeof *all);
        else
            memset(all + j * w->n_cols, 0, (size_t)w->n_cols * sizeof *all);
    }
    if (st) {
        hx__free(all);
        return;
    }
    vw->delta = all;
    v->tw_delta_bytes += bytes;
}

/* Twins 1..: dither the m input rows in v->tx by the activation rounding of numerics num
 * (uniform, the variance of numerics.h's s), and keep each row's share of its modelled error
 * in v->tscale. On a FLOAT device numerics.h's model is the coarsest rounding allowed ("at
 * most": a CPU may not round F16 activations at all), so there a row's draw is scaled down to
 * the error the target's op had (v->rowerr), never up; an INT8_ROW device is held to its model
 * as it is. */
static void hx__tw_dither(struct hx_verify *v, const struct hx_node *nd,
                          const struct hx_vweight *vw, enum hx_numerics num, size_t sw)
{
    const struct hx_weight *w = nd->weight;
    const int64_t k = w->n_cols, n = w->n_rows, m = nd->src[0].n_rows, nb = hx__mm_blocks(k);
    const double sc = w->scale, floor_k = hx__mm_f32_floor(k);
    double *ms = v->model, *mxm = v->model + nb;
    for (int64_t r = 0; r < m; r++) {
        float *x = v->tx + (size_t)r * sw + (size_t)nd->src[0].col;
        hx__mm_act_row(num, w->type, x, k, ms, mxm);
        double c = 1;
        if (num != HX_NUMERICS_INT8_ROW) { /* the row's modelled Σ var against what it had */
            double pred = 0;
            for (int64_t j = 0; j < n; j++)
                for (int64_t b = 0; b < nb; b++)
                    pred += (ms[b] + floor_k * mxm[b]) * vw->e[j * nb + b] * sc * sc;
            c = pred > v->rowerr[r] ? (pred > 0 ? v->rowerr[r] / pred : 0) : 1;
        }
        v->tscale[r] = c;
        for (int64_t i = 0; i < k; i++) {
            double a = sqrt(3.0 * c * ms[i / HX_NUM_BLOCK]);
            if (a > 0) x[i] = (float)(x[i] + a * (2.0 * hx__tw_uniform(v) - 1.0));
        }
    }
}

/* Twins 1..: put the matmul's input back as it was (its output may share the slot). */
static int hx__tw_restore(struct hx_verify *v, const struct hx_graph *g, struct hx_sdev *sd,
                          const struct hx_node *nd)
{
    const struct hx_node_ref *in = &nd->src[0];
    if (in->slot != nd->dst.slot) return hx__tw_io(v, g, sd, in, v->tsave, true);
    const size_t sw = (size_t)g->slot_width[in->slot];
    int st = hx__grow_f(&v->ty, &v->ty_cap, (size_t)in->n_rows * sw);
    if (st == HX_OK) st = hx__tw_io(v, g, sd, in, v->ty, false);
    for (int64_t r = 0; st == HX_OK && r < in->n_rows; r++)
        memcpy(v->ty + (size_t)r * sw + (size_t)in->col,
               v->tsave + (size_t)r * sw + (size_t)in->col, (size_t)in->n_cols * sizeof(float));
    return st == HX_OK ? hx__tw_io(v, g, sd, in, v->ty, true) : st;
}

/* A matmul on twin t: twins 1.. dither its input first (hx__tw_dither); then, with the input it
 * ran on, all add the weight conversion error of an INT8_ROW device, and twins 1.. the f32
 * floor. */
static int hx__tw_matmul(struct hx_verify *v, const struct hx_graph *g, const struct hx_node *nd,
                         int t, enum hx_numerics num, const struct hx_op *op)
{
    struct hx_sdev *sd = &v->tw[t];
    const struct hx_weight *w = nd->weight;
    const struct hx_node_ref *in = &nd->src[0], *out = &nd->dst;
    const int64_t k = w->n_cols, n = w->n_rows, m = in->n_rows, nb = hx__mm_blocks(k);
    const size_t sw = (size_t)g->slot_width[in->slot], so = (size_t)g->slot_width[out->slot];
    const bool dither = t > 0, int8 = num == HX_NUMERICS_INT8_ROW;
    struct hx_vweight *vw = NULL;
    int st = hx__verify_weight(v, w, num, &vw);
    if (st == HX_OK) st = hx__grow_f(&v->tx, &v->tx_cap, (size_t)m * sw);
    if (st == HX_OK) st = hx__grow_f(&v->tsave, &v->tsave_cap, (size_t)m * sw);
    if (st == HX_OK) st = hx__grow_f(&v->ty, &v->ty_cap, (size_t)m * so);
    if (st == HX_OK) st = hx__grow_d(&v->model, &v->model_cap, (size_t)(2 * nb));
    if (st == HX_OK && dither) st = hx__grow_d(&v->tscale, &v->tscale_cap, (size_t)m);
    if (st == HX_OK) st = hx__tw_io(v, g, sd, in, v->tx, false);
    if (st) return st;
    if (dither) {
        memcpy(v->tsave, v->tx, (size_t)m * sw * sizeof(float));
        hx__tw_dither(v, nd, vw, num, sw);
        if ((st = hx__tw_io(v, g, sd, in, v->tx, true))) return st;
    }
    const struct hx_split sp = hx__split_of(op, 1, g->n_rows, NULL);
    st = hx__run_sync(sd->dev, &sp);
    if (dither && st == HX_OK) st = hx__tw_restore(v, g, sd, nd);
    if (st || (!int8 && !dither)) return st;
    if ((st = hx__tw_io(v, g, sd, out, v->ty, false))) return st;
    if (int8) hx__tw_delta_cache(v, vw);
    const double sc = w->scale, floor_k = hx__mm_f32_floor(k);
    double *ms = v->model, *mxm = v->model + nb;
    for (int64_t r = 0; r < m && st == HX_OK; r++) {
        const float *x = v->tx + (size_t)r * sw + (size_t)in->col;
        float *y = v->ty + (size_t)r * so + (size_t)out->col;
        if (dither) hx__mm_act_row(num, w->type, x, k, ms, mxm);
        for (int64_t j = 0; j < n && st == HX_OK; j++) {
            double add = 0;
            const float *dj = int8 ? hx__tw_delta(v, vw, j, &st) : NULL;
            for (int64_t i = 0; dj && i < k; i++) add += (double)x[i] * dj[i];
            add *= sc;
            if (dither) {
                double typ = 0;
                for (int64_t b = 0; b < nb; b++) typ += mxm[b] * vw->e[j * nb + b];
                add += sqrt(v->tscale[r] * floor_k * typ * sc * sc) * hx__tw_gauss(v);
            }
            y[j] = (float)(y[j] + add);
        }
    }
    return st ? st : hx__tw_io(v, g, sd, out, v->ty, true);
}

/* Twins 1.., an op other than a matmul: its output off by as much as the target's was from the
 * reference's (verify just measured it, per row: v->rowerr), in random directions. These ops
 * are f32 arithmetic; their thresholds bound what a device may do (Vulkan's sin/cos), not
 * what it does, and as noise would swamp the matmuls' modelled error by 10^3. */
static int hx__tw_f32_noise(struct hx_verify *v, const struct hx_graph *g, const struct hx_node *nd,
                            int t)
{
    const struct hx_node_ref *out = &nd->dst;
    if (out->slot < 0 || out->n_rows <= 0 || out->n_cols <= 0) return HX_OK;
    bool any = false;
    for (int64_t r = 0; r < out->n_rows; r++) any |= v->rowerr[r] > 0;
    if (!any) return HX_OK; /* bit-exact, as EMBED and ADD must be */
    const size_t so = (size_t)g->slot_width[out->slot];
    int st = hx__grow_f(&v->ty, &v->ty_cap, (size_t)out->n_rows * so);
    if (st == HX_OK) st = hx__tw_io(v, g, &v->tw[t], out, v->ty, false);
    if (st) return st;
    for (int64_t r = 0; r < out->n_rows; r++) {
        float *y = v->ty + (size_t)r * so + (size_t)out->col;
        const double sd = sqrt(v->rowerr[r] / (double)out->n_cols);
        for (int64_t c = 0; sd > 0 && c < out->n_cols; c++)
            y[c] = (float)(y[c] + sd * hx__tw_gauss(v));
    }
    return hx__tw_io(v, g, &v->tw[t], out, v->ty, true);
}

/* Node k (run by the target) on every twin, each from its own inputs. */
static void hx__tw_node(struct hx_verify *v, const struct hx_graph *g, int64_t k,
                        const struct hx_sdev *target, const struct hx_batch_rows *b)
{
    const struct hx_node *nd = &g->nodes[k];
    const enum hx_numerics num = target->dev->info.numerics;
    const bool mm = nd->desc.kind == HX_OP_MATMUL && nd->weight && nd->src[0].slot >= 0;
    v->tw_rows = g->n_rows, v->tw_logits = g->n_logits;
    for (int t = 0; t < HX_VTWINS && v->tw_on; t++) {
        struct hx_op op;
        int st = hx__build_op(v->mem, g, &v->tw[t], nd, &op);
        if (st == HX_OK && mm) {
            st = hx__tw_matmul(v, g, nd, t, num, &op);
        } else if (st == HX_OK) {
            const struct hx_split sp = hx__split_of(&op, 1, g->n_rows, b);
            st = hx__run_sync(v->tw[t].dev, &sp);
            if (st == HX_OK && t > 0) st = hx__tw_f32_noise(v, g, nd, t);
        }
        if (st) hx__tw_stop(v, "a node", st);
    }
}

int hx__verify_twins_start(struct hx_verify *v)
{
    if (!v) return hx__set_error(HX_E_INVAL, "the policy does not verify");
    if (v->run_index > 0 || v->rep.n_checks > 0)
        return hx__set_error(HX_E_INVAL, "the whole-model twins start before the first run");
    if (!v->on) return hx__set_error(HX_E_DEVICE, "verify stopped: its reference failed");
    for (int t = 0; t < HX_VTWINS; t++) {
        if (v->tw[t].dev) continue;
        int st = hx__device_open(v->tw_spec, &v->tw_cfg, &v->tw[t].dev);
        if (st)
            return hx__set_error(st, "verify: twin %d of reference '%s': %s", t, v->tw_spec,
                                 hx_last_error());
    }
    v->tw_on = true;
    v->tw_rng = 0x5EED0F7A1Aull; /* fixed: a run is reproducible */
    return HX_OK;
}

int hx__verify_twin_logits(const struct hx_verify *v, int t, int64_t row, float *out)
{
    if (!v || t < 0 || t >= HX_VTWINS || !v->tw[t].dev || !v->tw[t].slot[HX_SLOT_LOGITS])
        return hx__set_error(HX_E_INVAL, "no twin logits");
    if (!v->tw_on) return hx__set_error(HX_E_DEVICE, "the whole-model twins stopped (logged)");
    const int64_t r = row < 0 ? v->tw_rows + row : row, first = v->tw_rows - v->tw_logits;
    if (r < first || r >= v->tw_rows)
        return hx__set_error(
            HX_E_INVAL, "twin logits of row %lld: the last batch had %lld rows, %lld with logits",
            (long long)row, (long long)v->tw_rows, (long long)v->tw_logits);
    const size_t nv = (size_t)v->mem->model->hp.n_vocab;
    return hx__dev_buffer_read(v->tw[t].slot[HX_SLOT_LOGITS],
                               (size_t)(r - first) * nv * sizeof(float), out, nv * sizeof(float));
}

/* ---- after a node ---------------------------------------------------------------------------- */

int hx__verify_after(struct hx_verify *v, const struct hx_graph *g, int64_t k,
                     const struct hx_sdev *target, const struct hx_batch_rows *b)
{
    if (!hx__verify_on(v)) return HX_OK;
    struct hx_op op;
    int st = hx__build_op(v->mem, g, &v->sd, &g->nodes[k], &op);
    const struct hx_split sp = hx__split_of(&op, 1, g->n_rows, b);
    if (st == HX_OK) st = hx__run_sync(v->sd.dev, &sp);
    if (st) {
        hx__verify_stop(v, st);
        return HX_OK;
    }
    st = hx__verify_compare(v, g, k, target, b->phase);
    if (st == HX_OK && v->tw_on) hx__tw_node(v, g, k, target, b);
    return st;
}
