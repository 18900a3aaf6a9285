/*
 * sched-verify.c — the scheduler's `verify` (see sched.c's header): every node is its own
 * split; before it runs, the slots it reads are copied to a separate instance of the reference
 * device, which runs the same node after it; the two outputs are compared against the error
 * model of core/numerics.h for what the target device computes. The reference keeps its own
 * KV cache, written from the target's K/V inputs, so it always equals the target's.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched-impl.h"

/* ---- verify -------------------------------------------------------------------------------------- */

double hx__verify_ratio(double nmse, double threshold)
{
    if (isnan(nmse)) return INFINITY;
    return threshold > 0 ? nmse / threshold : nmse > 0 ? INFINITY : 0;
}

void hx__verify_stop(struct hx_sched *s, int st)
{
    HX_LOG_WARN("verify: the reference %s failed (%s: %s); no further ops are checked",
                s->v.rep.ref, hx_status_name(st), s->v.sd.dev->last_error);
    s->v.on = false;
    s->v.rep.ref_failed = true;
}

/* Before node nd runs on d: give the reference the same inputs. */
void hx__verify_pre(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd, int d)
{
    int rd[4], n = hx__node_reads(nd, rd), st = HX_OK;
    for (int r = 0; r < n && st == HX_OK; r++) {
        struct hx_buffer *from = NULL, *to = NULL;
        size_t nb = hx__slot_bytes(g, rd[r]);
        st = hx__slot_buf(&s->mem, &s->dev[d], rd[r], &from);
        if (st == HX_OK) st = hx__slot_buf(&s->mem, &s->v.sd, rd[r], &to);
        if (st == HX_OK) st = hx__dev_copy(to, 0, from, 0, nb);
    }
    if (st) hx__verify_stop(s, st);
}

static struct hx_verify_op *hx__verify_slot(struct hx_sched *s, enum hx_phase ph, int64_t k,
                                            const struct hx_node *nd, int d)
{
    struct hx_vstate *v = &s->v;
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
    snprintf(op->dev, sizeof op->dev, "%s", hx__id(s, d));
    return op;
}

static void hx__verify_record(struct hx_sched *s, enum hx_phase ph, int64_t k,
                              const struct hx_node *nd, int d, double max_abs, double nmse,
                              double thr, bool nonfinite)
{
    struct hx_verify_op *op = hx__verify_slot(s, ph, k, nd, d);
    if (!op) return;
    bool fail = nonfinite || !(nmse <= thr);
    if (!op->n_checks || hx__verify_ratio(nmse, thr) > hx__verify_ratio(op->nmse, op->threshold))
        op->nmse = nmse, op->threshold = thr; /* the check closest to (or most over) its bound */
    op->max_abs = HX_MAX(op->max_abs, max_abs);
    op->nonfinite |= nonfinite;
    op->n_checks++, op->n_failed += fail;
    struct hx_verify_report *rep = &s->v.rep;
    rep->n_checks++, rep->n_failed += fail;
    if (!fail || rep->has_first) return;
    rep->has_first = true;
    rep->first = *op;
    rep->first.max_abs = max_abs, rep->first.nmse = nmse, rep->first.threshold = thr;
    rep->first.nonfinite = nonfinite;
    rep->first_phase = ph;
    rep->first_run = s->v.run_index;
    HX_LOG_WARN(
        "verify: first divergent op: node %lld (layer %d %s %s) on %s vs %s: NMSE %.3g > %.3g, "
        "max abs err %.3g%s (%s, run %lld)",
        (long long)k, nd->desc.layer, hx_op_kind_name(nd->desc.kind),
        hx_op_class_name(nd->desc.cls), hx__id(s, d), rep->ref, nmse, thr, max_abs,
        nonfinite ? ", non-finite output" : "", ph == HX_PHASE_PREFILL ? "prefill" : "decode",
        (long long)s->v.run_index);
}

static int hx__verify_bufs(struct hx_vstate *v, size_t n)
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
static int hx__verify_weight(struct hx_vstate *v, const struct hx_weight *w, enum hx_numerics num,
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
static int hx__verify_mm_allowed(struct hx_sched *s, const struct hx_graph *g,
                                 const struct hx_node *nd, int d, double *allowed)
{
    struct hx_vstate *v = &s->v;
    const enum hx_numerics num = s->dev[d].dev->info.numerics;
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
        if (x) v->x = x, v->x_cap = nx;
        else st = HX_E_NOMEM;
    }
    if (st == HX_OK && (size_t)(2 * nb) > v->model_cap) {
        double *md = hx__realloc(v->model, (size_t)(2 * nb) * sizeof *md);
        if (md) v->model = md, v->model_cap = (size_t)(2 * nb);
        else st = HX_E_NOMEM;
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
static int hx__verify_compare(struct hx_sched *s, const struct hx_graph *g, int64_t k, int d,
                              enum hx_phase ph)
{
    const struct hx_node *nd = &g->nodes[k];
    const struct hx_node_ref *r = &nd->dst;
    size_t w = (size_t)g->slot_width[r->slot], n = (size_t)r->n_rows * w;
    size_t off = (size_t)r->row * w * sizeof(float);
    int st = hx__verify_bufs(&s->v, n);
    if (st == HX_OK)
        st = hx__dev_buffer_read(s->dev[d].slot[r->slot], off, s->v.a, n * sizeof(float));
    if (st) return st; /* the target's read failed: a target error */
    if ((st = hx__dev_buffer_read(s->v.sd.slot[r->slot], off, s->v.b, n * sizeof(float)))) {
        hx__verify_stop(s, st);
        return HX_OK;
    }
    double num = 0, den = 0, max_abs = 0;
    bool nonfinite = false;
    for (int64_t row = 0; row < r->n_rows; row++)
        for (int64_t c = r->col; c < r->col + r->n_cols; c++) {
            double a = s->v.a[(size_t)row * w + (size_t)c], b = s->v.b[(size_t)row * w + (size_t)c];
            nonfinite |= !isfinite(a);
            num += (a - b) * (a - b), den += b * b;
            max_abs = HX_MAX(max_abs, fabs(a - b));
        }
    double thr = hx__op_nmse_threshold(nd->desc.kind);
    if (nd->desc.kind == HX_OP_MATMUL) {
        double allowed = 0;
        if ((st = hx__verify_mm_allowed(s, g, nd, d, &allowed))) {
            HX_LOG_WARN("verify: no error model for node %lld (%s: %s); no further ops are checked",
                        (long long)k, hx_status_name(st), hx_last_error());
            s->v.on = false;
            s->v.rep.ref_failed = true;
            return HX_OK;
        }
        thr = den > 0 ? allowed / den : allowed;
    }
    hx__verify_record(s, ph, k, nd, d, max_abs, den > 0 ? num / den : num, thr, nonfinite);
    return HX_OK;
}

/* After node k ran on d: run it on the reference and compare. A reference failure stops
 * verification (logged); only a failure of the target is returned. */
int hx__verify_post(struct hx_sched *s, const struct hx_graph *g, int64_t k, int d,
                    struct hx_exec *ex)
{
    if (!s->v.on) return HX_OK;
    struct hx_op op;
    int st = hx__build_op(&s->mem, g, &s->v.sd, &g->nodes[k], &op);
    struct hx_split sp = {.struct_size = sizeof sp,
                          .ops = &op,
                          .n_ops = 1,
                          .n_rows = g->n_rows,
                          .tokens = ex->tokens,
                          .pos = ex->pos,
                          .seq = ex->seq};
    if (st == HX_OK) st = hx__run_sync(s->v.sd.dev, &sp);
    if (st) {
        hx__verify_stop(s, st);
        return HX_OK;
    }
    return hx__verify_compare(s, g, k, d, ex->phase);
}

int hx__sched_verify_report(const struct hx_sched *s, const struct hx_verify_report **out)
{
    *out = NULL;
    if (!s || !s->policy.verify) return hx__set_error(HX_E_INVAL, "the policy does not verify");
    struct hx_sched *m = (struct hx_sched *)s; /* the report points into live state */
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) m->v.rep.ops[ph] = m->v.ops[ph];
    *out = &m->v.rep;
    return HX_OK;
}
