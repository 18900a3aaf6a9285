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
};

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
};

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
    *out = v;
    return HX_OK;
}

void hx__verify_free(struct hx_verify *v)
{
    if (!v) return;
    hx__sdev_close(v->mem, &v->sd);
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) hx__free(v->ops[ph]);
    hx__free(v->a);
    hx__free(v->b);
    for (int64_t i = 0; i < v->n_vw; i++) hx__free(v->vw[i].e), hx__free(v->vw[i].dw);
    hx__free(v->vw);
    hx__free(v->x);
    hx__free(v->model);
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

static void hx__verify_stop(struct hx_verify *v, int st)
{
    HX_LOG_WARN("verify: the reference %s failed (%s: %s); no further ops are checked", v->rep.ref,
                hx_status_name(st), v->sd.dev->last_error);
    v->on = false;
    v->rep.ref_failed = true;
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
                             const struct hx_vweight **out)
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
    const size_t rb = hx_dtype_row_bytes(w->type, k), cells = (size_t)(w->n_rows * nb);
    double *e = need_e ? hx__malloc(cells * sizeof *e) : vw->e;
    double *dw = need_dw ? hx__malloc(cells * sizeof *dw) : NULL;
    double *tmp = need_e ? NULL : hx__malloc((size_t)nb * sizeof *tmp);
    float *row = hx__malloc((size_t)k * sizeof *row);
    int st = e && (dw || !need_dw) && (tmp || need_e) && row ? HX_OK : HX_E_NOMEM;
    for (int64_t j = 0; j < w->n_rows && st == HX_OK; j++) {
        st = hx_dequantize_row(w->type, (const char *)w->data + (size_t)j * rb, row, k);
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
    const struct hx_vweight *vw;
    int st = hx__verify_weight(v, w, num, &vw);
    if (st == HX_OK && nx > v->x_cap) {
        float *x = hx__realloc(v->x, nx * sizeof *x);
        if (x)
            v->x = x, v->x_cap = nx;
        else
            st = HX_E_NOMEM;
    }
    if (st == HX_OK && (size_t)(2 * nb) > v->model_cap) {
        double *md = hx__realloc(v->model, (size_t)(2 * nb) * sizeof *md);
        if (md)
            v->model = md, v->model_cap = (size_t)(2 * nb);
        else
            st = HX_E_NOMEM;
    }
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
    for (int64_t row = 0; row < r->n_rows; row++)
        for (int64_t c = r->col; c < r->col + r->n_cols; c++) {
            double a = v->a[(size_t)row * w + (size_t)c], b = v->b[(size_t)row * w + (size_t)c];
            nonfinite |= !isfinite(a);
            num += (a - b) * (a - b), den += b * b;
            max_abs = HX_MAX(max_abs, fabs(a - b));
        }
    double thr = hx__op_nmse_threshold(nd->desc.kind);
    if (nd->desc.kind == HX_OP_MATMUL) {
        double allowed = 0;
        if ((st = hx__verify_mm_allowed(v, g, nd, target, &allowed))) {
            HX_LOG_WARN("verify: no error model for node %lld (%s: %s); no further ops are checked",
                        (long long)k, hx_status_name(st), hx_last_error());
            v->on = false;
            v->rep.ref_failed = true;
            return HX_OK;
        }
        thr = den > 0 ? allowed / den : allowed;
    }
    hx__verify_record(v, ph, k, nd, target, max_abs, den > 0 ? num / den : num, thr, nonfinite);
    return HX_OK;
}

int hx__verify_after(struct hx_verify *v, const struct hx_graph *g, int64_t k,
                     const struct hx_sdev *target, const struct hx_batch_rows *b)
{
    if (!hx__verify_on(v)) return HX_OK;
    struct hx_op op;
    int st = hx__build_op(v->mem, g, &v->sd, &g->nodes[k], &op);
    struct hx_split sp = {.struct_size = sizeof sp,
                          .ops = &op,
                          .n_ops = 1,
                          .n_rows = g->n_rows,
                          .tokens = b->tokens,
                          .pos = b->pos,
                          .seq = b->seq};
    if (st == HX_OK) st = hx__run_sync(v->sd.dev, &sp);
    if (st) {
        hx__verify_stop(v, st);
        return HX_OK;
    }
    return hx__verify_compare(v, g, k, target, b->phase);
}
