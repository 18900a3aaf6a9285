/*
 * sched-verify.c — the scheduler's `verify` (see sched.c's header): every node is its own
 * split; before it runs, the slots it reads are copied to a separate instance of the reference
 * device, which runs the same node after it; the two outputs are compared against the error
 * model of core/numerics.h for what the target device computes. The reference keeps its own
 * KV cache, written from the target's K/V inputs, so it always equals the target's.
 *
 * For engine diff's whole-model bound (docs/policies.md "The whole-model bound") verify can also
 * run twins: more instances of the reference that run every node on their own inputs (each its
 * own whole model, like a single:REF run, fed the same tokens). Twin 0 holds each matmul's
 * weights as the device that ran it does (HX_NUMERICS_INT8_ROW: its int8 conversion, added as
 * x·(ŵ − w)ᵀ). Twins 1..HX_VERIFY_DRAWS add every op's error drawn at random: a matmul's input
 * dithered by the activation rounding of its device's numerics (on a FLOAT device scaled down
 * to the error the target's op had, when smaller), its output by the f32 summation floor; any
 * other op's output by the error verify just measured in the target's op, in random directions.
 * Twin 0 is what the devices' weights make of the model; twin p − twin 0 is one draw of what
 * the modelled rounding adds to it.
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

/* The twins stop for good (diff then has no whole-model bound: a failure). */
static void hx__tw_stop(struct hx_sched *s, const char *what, int st)
{
    HX_LOG_WARN("verify: the whole-model twins stopped (%s: %s: %s)", what, hx_status_name(st),
                hx_last_error());
    s->v.tw_on = false;
}

/* Before node nd runs on d: give the reference the same inputs. */
void hx__verify_pre(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd, int d)
{
    int rd[4], n = hx__node_reads(nd, rd), st = HX_OK;
    for (int r = 0; r < n && st == HX_OK; r++) {
        struct hx_buffer *from = NULL, *to = NULL;
        size_t nb = (size_t)hx__slot_rows(g, rd[r]) * (size_t)g->slot_width[rd[r]] * sizeof(float);
        st = hx__slot_buf(s, &s->dev[d], rd[r], &from);
        if (st == HX_OK) st = hx__slot_buf(s, &s->v.sd, rd[r], &to);
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
    if (s->v.tw_on && (size_t)r->n_rows > s->v.rowerr_cap) {
        double *re = hx__realloc(s->v.rowerr, (size_t)r->n_rows * sizeof *re);
        if (re) s->v.rowerr = re, s->v.rowerr_cap = (size_t)r->n_rows;
        else hx__tw_stop(s, "the measured errors", HX_E_NOMEM);
    }
    for (int64_t row = 0; row < r->n_rows; row++) {
        double rn = 0;
        for (int64_t c = r->col; c < r->col + r->n_cols; c++) {
            double a = s->v.a[(size_t)row * w + (size_t)c], b = s->v.b[(size_t)row * w + (size_t)c];
            nonfinite |= !isfinite(a);
            rn += (a - b) * (a - b), den += b * b;
            max_abs = HX_MAX(max_abs, fabs(a - b));
        }
        num += rn;
        if (s->v.tw_on) s->v.rowerr[row] = rn; /* the twins: this op's error, as it was */
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

/* ---- the twins --------------------------------------------------------------------------------- */

#define HX_TW_DELTA_CAP ((int64_t)256 << 20) /* bytes of cached weight conversion errors */


static double hx__tw_uniform(struct hx_vstate *v) /* in (0, 1) */
{
    uint64_t z = (v->tw_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * 0x1.0p-53;
}

static double hx__tw_gauss(struct hx_vstate *v)
{
    return sqrt(-2.0 * log(hx__tw_uniform(v))) * cos(6.283185307179586 * hx__tw_uniform(v));
}

static int hx__tw_grow(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return HX_OK;
    float *q = hx__realloc(*p, n * sizeof *q);
    if (!q) return HX_E_NOMEM;
    *p = q, *cap = n;
    return HX_OK;
}

/* Rows [r->row, + n_rows) of a node's slot region on twin sd, whole slot rows. */
static int hx__tw_io(struct hx_sched *s, const struct hx_graph *g, struct hx_sdev *sd,
                     const struct hx_node_ref *r, float *buf, bool write)
{
    struct hx_buffer *b;
    int st = hx__slot_buf(s, sd, r->slot, &b);
    size_t w = (size_t)g->slot_width[r->slot];
    size_t off = (size_t)r->row * w * sizeof(float), nb = (size_t)r->n_rows * w * sizeof(float);
    if (st) return st;
    return write ? hx__dev_buffer_write(b, off, buf, nb) : hx__dev_buffer_read(b, off, buf, nb);
}

/* ŵ − w of weight row j (HX_NUMERICS_INT8_ROW), or NULL if the row converts exactly: from the
 * cache, else dequantized and converted into v->trow. */
static const float *hx__tw_delta(struct hx_vstate *v, struct hx_vweight *vw, int64_t j, int *st)
{
    const struct hx_weight *w = vw->w;
    const int64_t k = w->n_cols, nb = hx__mm_blocks(k);
    double d2 = 0;
    for (int64_t b = 0; b < nb; b++) d2 += vw->dw[j * nb + b];
    if (d2 == 0) return NULL;
    if (vw->delta) return vw->delta + j * k;
    if ((*st = hx__tw_grow(&v->trow, &v->trow_cap, (size_t)(2 * k)))) return NULL;
    const size_t rb = hx_dtype_row_bytes(w->type, k);
    if ((*st = hx_dequantize_row(w->type, (const char *)w->data + (size_t)j * rb, v->trow, k)))
        return NULL;
    if (!hx__mm_int8_row_delta(v->trow, k, v->trow + k)) return NULL;
    return v->trow + k;
}

/* Fill vw->delta for the whole weight when it fits the cache (else rows are made per use). */
static void hx__tw_delta_cache(struct hx_vstate *v, struct hx_vweight *vw)
{
    const struct hx_weight *w = vw->w;
    const int64_t bytes = w->n_rows * w->n_cols * (int64_t)sizeof(float);
    if (vw->delta || v->tw_delta_bytes + bytes > HX_TW_DELTA_CAP) return;
    float *all = hx__malloc((size_t)bytes);
    if (!all) return;
    int st = HX_OK;
    for (int64_t j = 0; j < w->n_rows && st == HX_OK; j++) {
        const float *dj = hx__tw_delta(v, vw, j, &st);
        if (dj) memcpy(all + j * w->n_cols, dj, (size_t)w->n_cols * sizeof *all);
        else memset(all + j * w->n_cols, 0, (size_t)w->n_cols * sizeof *all);
    }
    if (st) {
        hx__free(all);
        return;
    }
    vw->delta = all;
    v->tw_delta_bytes += bytes;
}

/* A matmul on twin t: twins 1.. dither its input by the activation rounding of numerics num
 * (uniform, the variance of numerics.h's s) first; then, with the input it ran on, all add
 * the weight conversion error of an INT8_ROW device, and twins 1.. the f32 floor. On a FLOAT
 * device numerics.h's model is the coarsest rounding allowed ("at most": a CPU may not round
 * F16 activations at all), so there a row's draw is scaled down to the error the target's op
 * had (v->rowerr), never up; an INT8_ROW device is held to its model as it is. */
static int hx__tw_matmul(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd,
                         int t, enum hx_numerics num, const struct hx_op *op)
{
    struct hx_vstate *v = &s->v;
    struct hx_sdev *sd = &v->tw[t];
    const struct hx_weight *w = nd->weight;
    const struct hx_node_ref *in = &nd->src[0], *out = &nd->dst;
    const int64_t k = w->n_cols, n = w->n_rows, m = in->n_rows, nb = hx__mm_blocks(k);
    const size_t sw = (size_t)g->slot_width[in->slot], so = (size_t)g->slot_width[out->slot];
    const bool dither = t > 0, int8 = num == HX_NUMERICS_INT8_ROW;
    struct hx_vweight *vw = NULL;
    int st = hx__verify_weight(v, w, num, (const struct hx_vweight **)&vw);
    if (st == HX_OK) st = hx__tw_grow(&v->tx, &v->tx_cap, (size_t)m * sw);
    if (st == HX_OK) st = hx__tw_grow(&v->tsave, &v->tsave_cap, (size_t)m * sw);
    if (st == HX_OK) st = hx__tw_grow(&v->ty, &v->ty_cap, (size_t)m * so);
    if (st == HX_OK && (size_t)(2 * nb) > v->model_cap) {
        double *md = hx__realloc(v->model, (size_t)(2 * nb) * sizeof *md);
        if (md) v->model = md, v->model_cap = (size_t)(2 * nb);
        else st = HX_E_NOMEM;
    }
    if (st == HX_OK) st = hx__tw_io(s, g, sd, in, v->tx, false);
    if (st) return st;
    double *ms = v->model, *mxm = v->model + nb;
    if (dither && (size_t)m > v->tscale_cap) {
        double *ts = hx__realloc(v->tscale, (size_t)m * sizeof *ts);
        if (!ts) return HX_E_NOMEM;
        v->tscale = ts, v->tscale_cap = (size_t)m;
    }
    const double sc = w->scale, floor_k = hx__mm_f32_floor(k);
    if (dither) {
        memcpy(v->tsave, v->tx, (size_t)m * sw * sizeof(float));
        for (int64_t r = 0; r < m; r++) {
            float *x = v->tx + (size_t)r * sw + (size_t)in->col;
            hx__mm_act_row(num, w->type, x, k, ms, mxm);
            double c = 1;
            if (!int8) { /* the row's modelled Σ var over its outputs against what it had */
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
        if ((st = hx__tw_io(s, g, sd, in, v->tx, true))) return st;
    }
    struct hx_split sp = {.struct_size = sizeof sp, .ops = op, .n_ops = 1, .n_rows = g->n_rows};
    st = hx__run_sync(sd->dev, &sp);
    if (dither && st == HX_OK) { /* put the input back as it was (the output may share a slot) */
        if (in->slot == out->slot) {
            st = hx__tw_grow(&v->ty, &v->ty_cap, (size_t)m * sw);
            if (st == HX_OK) st = hx__tw_io(s, g, sd, in, v->ty, false);
            for (int64_t r = 0; st == HX_OK && r < m; r++)
                memcpy(v->ty + (size_t)r * sw + (size_t)in->col,
                       v->tsave + (size_t)r * sw + (size_t)in->col, (size_t)k * sizeof(float));
            if (st == HX_OK) st = hx__tw_io(s, g, sd, in, v->ty, true);
        } else {
            st = hx__tw_io(s, g, sd, in, v->tsave, true);
        }
    }
    if (st || (!int8 && !dither)) return st;
    if ((st = hx__tw_io(s, g, sd, out, v->ty, false))) return st;
    if (int8) hx__tw_delta_cache(v, vw);
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
    return st ? st : hx__tw_io(s, g, sd, out, v->ty, true);
}

/* Twins 1.., an op other than a matmul: its output off by as much as the target's was from the
 * reference's (verify just measured it, per row: v->rowerr), in random directions. These ops
 * are f32 arithmetic; their thresholds bound what a device may do (Vulkan's sin/cos), not
 * what it does, and as noise would swamp the matmuls' modelled error by 10^3. */
static int hx__tw_f32_noise(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd,
                            int t)
{
    struct hx_vstate *v = &s->v;
    const struct hx_node_ref *out = &nd->dst;
    if (out->slot < 0 || out->n_rows <= 0 || out->n_cols <= 0) return HX_OK;
    bool any = false;
    for (int64_t r = 0; r < out->n_rows; r++) any |= v->rowerr[r] > 0;
    if (!any) return HX_OK; /* bit-exact, as EMBED and ADD must be */
    const size_t so = (size_t)g->slot_width[out->slot];
    int st = hx__tw_grow(&v->ty, &v->ty_cap, (size_t)out->n_rows * so);
    if (st == HX_OK) st = hx__tw_io(s, g, &v->tw[t], out, v->ty, false);
    if (st) return st;
    for (int64_t r = 0; r < out->n_rows; r++) {
        float *y = v->ty + (size_t)r * so + (size_t)out->col;
        const double sd = sqrt(v->rowerr[r] / (double)out->n_cols);
        for (int64_t c = 0; sd > 0 && c < out->n_cols; c++)
            y[c] = (float)(y[c] + sd * hx__tw_gauss(v));
    }
    return hx__tw_io(s, g, &v->tw[t], out, v->ty, true);
}

/* Node k (run by the target on device d) on every twin, each from its own inputs. */
static void hx__tw_node(struct hx_sched *s, const struct hx_graph *g, int64_t k, int d,
                        const struct hx_exec *ex)
{
    const struct hx_node *nd = &g->nodes[k];
    const enum hx_numerics num = s->dev[d].dev->info.numerics;
    const bool mm = nd->desc.kind == HX_OP_MATMUL && nd->weight && nd->src[0].slot >= 0;
    for (int t = 0; t < HX_VTWINS && s->v.tw_on; t++) {
        struct hx_op op;
        int st = hx__build_op(s, g, &s->v.tw[t], nd, &op);
        if (st == HX_OK && mm) {
            st = hx__tw_matmul(s, g, nd, t, num, &op);
        } else if (st == HX_OK) {
            struct hx_split sp = {.struct_size = sizeof sp,
                                  .ops = &op,
                                  .n_ops = 1,
                                  .n_rows = g->n_rows,
                                  .tokens = ex->tokens,
                                  .pos = ex->pos,
                                  .seq = ex->seq};
            st = hx__run_sync(s->v.tw[t].dev, &sp);
            if (st == HX_OK && t > 0) st = hx__tw_f32_noise(s, g, nd, t);
        }
        if (st) hx__tw_stop(s, "a node", st);
    }
}

int hx__sched_verify_twins(struct hx_sched *s)
{
    if (!s || !s->policy.verify || !s->v.sd.dev)
        return hx__set_error(HX_E_INVAL, "the policy does not verify");
    for (int t = 0; t < HX_VTWINS; t++) {
        if (s->v.tw[t].dev) continue;
        int st = hx__device_open(s->v.tw_spec, &s->v.tw_cfg, &s->v.tw[t].dev);
        if (st)
            return hx__set_error(st, "verify: twin %d of reference '%s': %s", t, s->v.tw_spec,
                                 hx_last_error());
    }
    s->v.tw_on = true;
    s->v.tw_rng = 0x5EED0F7A1Aull; /* fixed: a run is reproducible */
    return HX_OK;
}

int hx__sched_verify_twin_logits(struct hx_sched *s, int t, int64_t i, float *out)
{
    if (!s || t < 0 || t >= HX_VTWINS || !s->v.tw[t].dev || !s->v.tw[t].slot[HX_SLOT_LOGITS])
        return hx__set_error(HX_E_INVAL, "no twin logits");
    if (!s->v.tw_on)
        return hx__set_error(HX_E_DEVICE, "the whole-model twins stopped (logged)");
    const size_t nv = (size_t)s->model->hp.n_vocab;
    return hx__dev_buffer_read(s->v.tw[t].slot[HX_SLOT_LOGITS], (size_t)i * nv * sizeof(float),
                               out, nv * sizeof(float));
}

void hx__verify_free(struct hx_sched *s)
{
    struct hx_vstate *v = &s->v;
    for (int t = 0; t < HX_VTWINS; t++) hx__sdev_fini(s, &v->tw[t]);
    for (int64_t i = 0; i < v->n_vw; i++) hx__free(v->vw[i].delta), v->vw[i].delta = NULL;
    hx__free(v->tx), hx__free(v->ty), hx__free(v->tsave), hx__free(v->trow), hx__free(v->rowerr);
    hx__free(v->tscale);
}

/* After node k ran on d: run it on the reference and compare, then on the twins (if on). A
 * reference or twin failure stops that checking (logged); only a failure of the target is
 * returned. */
int hx__verify_post(struct hx_sched *s, const struct hx_graph *g, int64_t k, int d,
                    struct hx_exec *ex)
{
    if (!s->v.on) {
        if (s->v.tw_on) hx__tw_stop(s, "verify stopped", HX_E_DEVICE);
        return HX_OK;
    }
    struct hx_op op;
    int st = hx__build_op(s, g, &s->v.sd, &g->nodes[k], &op);
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
        if (s->v.tw_on) hx__tw_stop(s, "verify stopped", st);
        return HX_OK;
    }
    st = hx__verify_compare(s, g, k, d, ex->phase);
    if (st == HX_OK && s->v.tw_on) {
        if (s->v.on) hx__tw_node(s, g, k, d, ex);
        else hx__tw_stop(s, "verify stopped", HX_E_DEVICE);
    }
    return st;
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
