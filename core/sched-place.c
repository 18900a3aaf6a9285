/*
 * sched-place.c — placement: a policy's rule per phase, the tensor-split expansion, and the
 * device of every node.
 *
 * Rules: the policy becomes one placement rule per phase (prefill: more than one row; decode:
 * one row); phase-split is two single rules. auto (sched-auto.c) builds its candidates with
 * the same rule_init / ts_build / rule_text and keeps one per phase.
 *
 * Placement: a rule names a preferred device for every node; the node goes to the first
 * healthy device of [preferred, --fallback chain..., cpu] whose supports() accepts it (every
 * off-policy placement is counted and its reason kept for `engine plan`). The result, the
 * *plan*, is the (expanded) graph with s->assign and s->reason per node; it is rebuilt for
 * every run, so a device marked unhealthy is avoided from the next placement on.
 *
 * Steps: consecutive nodes on one device form a split (one hx__dev_run); the parts of a
 * tensor-split group form one step of their own; under verify every node is its own split.
 * hx__step_end is the one definition of that, shared by the run (sched-exec.c) and the dry
 * passes (sched-plan.c), so the plan printed is the plan run.
 *
 * Tensor-split: each weight matmul becomes a group of parts, part p computing the output
 * columns [r0, r0 + n) from rows [r0, r0 + n) of the weight (a row slice is itself a weight:
 * rows are stored whole). Slices are whole groups of HX_TS_ALIGN rows, built once per rule.
 *
 * A new policy kind touches policy.c (parsing) and this file (hx__rule_from_policy and
 * hx__preferred) only; fit's boundaries come from its memory search (sched-fit.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched-impl.h"

/* ---- rules ----------------------------------------------------------------------------------- */

void hx__rule_init(struct hx_rule *r, enum hx_policy_kind kind)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    for (int i = 0; i < HX_CLASS_COUNT; i++) r->class_dev[i] = -1;
}

void hx__ts_free(struct hx_tsplit *ts)
{
    if (!ts) return;
    for (int64_t i = 0; ts->w && i < ts->n_w * ts->n_parts; i++) hx__weight_host_free(&ts->w[i]);
    hx__free(ts->w);
    hx__free(ts->r0);
    hx__free(ts->n_used);
    hx__free(ts);
}

/* fit:vulkan:0=L0-11,cpu=L12-23,lm_head=vulkan:0,embed=cpu */
static void hx__fit_text(const struct hx_sched *s, const struct hx_rule *r, struct hx_strbuf *sb)
{
    for (int i = 0, start = 0; i < r->n_dev; start = r->layer_end[i++])
        if (r->layer_end[i] > start)
            hx__sb_printf(sb, "%s=L%d-%d,", hx__id(s, r->dev[i]), start, r->layer_end[i] - 1);
    hx__sb_printf(sb, "lm_head=%s,embed=%s",
                  hx__id(s, r->head_dev >= 0 ? r->head_dev : r->dev[r->n_dev - 1]),
                  hx__id(s, r->embed_dev));
}

void hx__rule_text(const struct hx_sched *s, struct hx_rule *r)
{
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    hx__sb_printf(&sb, "%s:", hx__policy_kind_name(r->kind));
    if (r->kind == HX_POLICY_FIT) hx__fit_text(s, r, &sb);
    if (r->kind == HX_POLICY_SINGLE || r->kind == HX_POLICY_GEMM_OFFLOAD)
        hx__sb_printf(&sb, "%s", hx__id(s, r->dev[0]));
    if (r->kind == HX_POLICY_LAYER_SPLIT && r->alternate) hx__sb_printf(&sb, "alternate:");
    bool shares = r->kind == HX_POLICY_LAYER_SPLIT || r->kind == HX_POLICY_TENSOR_SPLIT;
    for (int i = 0; shares && i < r->n_dev; i++)
        if (r->alternate)
            hx__sb_printf(&sb, "%s%s", i ? "," : "", hx__id(s, r->dev[i]));
        else
            hx__sb_printf(&sb, "%s%s=%.2f", i ? "," : "", hx__id(s, r->dev[i]), r->ratio[i]);
    for (int c = 0; r->kind == HX_POLICY_OP_MAP && c < HX_CLASS_COUNT; c++)
        if (r->class_dev[c] >= 0 && r->dev[r->class_dev[c]] != r->dev[0])
            hx__sb_printf(&sb, "%s=%s,", hx_op_class_name((enum hx_op_class)c),
                          hx__id(s, r->dev[r->class_dev[c]]));
    if (r->kind == HX_POLICY_OP_MAP) hx__sb_printf(&sb, "default=%s", hx__id(s, r->dev[0]));
    snprintf(r->text, sizeof r->text, "%s", sb.data ? sb.data : "?");
    hx__sb_free(&sb);
}

/* Slice every weight of the model by r's ratios into parts of whole 16-row groups. */
int hx__ts_build(struct hx_sched *s, struct hx_rule *r)
{
    int64_t nw = hx__model_weight_count(s->model);
    int np = r->n_dev;
    struct hx_tsplit *ts = hx__calloc(1, sizeof *ts);
    if (!ts) return HX_E_NOMEM;
    ts->n_parts = np;
    ts->n_w = nw;
    ts->w = hx__calloc((size_t)(nw * np), sizeof *ts->w);
    ts->r0 = hx__calloc((size_t)(nw * np), sizeof *ts->r0);
    ts->n_used = hx__calloc((size_t)nw, sizeof *ts->n_used);
    if (!ts->w || !ts->r0 || !ts->n_used) {
        hx__ts_free(ts);
        return HX_E_NOMEM;
    }
    for (int64_t id = 0; id < nw; id++) {
        const struct hx_weight *w = hx__model_weight(s->model, id);
        size_t rb = w ? hx_dtype_row_bytes(w->type, w->n_cols) : 0;
        if (!rb || w->n_rows < 2 * HX_TS_ALIGN) continue;
        double acc = 0;
        int64_t prev = 0, used = 0;
        for (int p = 0; p < np; p++) {
            acc += r->ratio[p];
            int64_t b = p == np - 1
                            ? w->n_rows
                            : (int64_t)llround(acc * (double)w->n_rows / HX_TS_ALIGN) * HX_TS_ALIGN;
            b = HX_MAX(prev, HX_MIN(b, w->n_rows));
            struct hx_weight *sw = &ts->w[id * np + p];
            hx__weight_slice(w, prev, b - prev, sw); /* of w's data, or of its parts */
            if (w->n_tparts > 0) { /* a tensor scale per part: the slice's parts, from its row 0 */
                int k = 0;
                for (int i = 0; i < w->n_tparts; i++) {
                    const int64_t lo = HX_MAX(w->tpart_row[i], prev);
                    const int64_t hi = HX_MIN(w->tpart_row[i + 1], b);
                    if (hi <= lo) continue;
                    sw->tpart_row[k] = lo - prev, sw->tpart_tscale[k] = w->tpart_tscale[i];
                    sw->tpart_row[++k] = hi - prev;
                }
                sw->n_tparts = k;
                if (k) sw->tensor_scale = sw->tpart_tscale[0];
            }
            ts->r0[id * np + p] = prev;
            used += sw->n_rows > 0;
            prev = b;
        }
        ts->n_used[id] = (int8_t)used; /* 1: one part holds every row (a share rounded to none) */
    }
    r->ts = ts;
    return HX_OK;
}

int hx__rule_from_policy(struct hx_sched *s, enum hx_phase ph, struct hx_rule *r)
{
    const struct hx_policy *p = &s->policy;
    hx__rule_init(r, p->kind);
    r->n_dev = p->n_devs;
    r->alternate = p->alternate;
    for (int i = 0; i < p->n_devs; i++) r->dev[i] = s->pol[i], r->ratio[i] = p->ratio[i];
    memcpy(r->class_dev, p->class_dev, sizeof r->class_dev);
    if (p->kind == HX_POLICY_FIT) { /* sched-fit.c sets the boundaries; until then: all on dev[0] */
        r->embed_dev = r->dev[0], r->head_dev = -1;
        for (int i = 0; i < r->n_dev; i++) r->layer_end[i] = (int32_t)s->model->hp.n_layer;
    }
    if (p->kind == HX_POLICY_PHASE_SPLIT) {
        r->kind = HX_POLICY_SINGLE;
        r->dev[0] = s->pol[ph == HX_PHASE_PREFILL ? 0 : 1];
        r->n_dev = 1;
    }
    hx__rule_text(s, r);
    return r->kind == HX_POLICY_TENSOR_SPLIT ? hx__ts_build(s, r) : HX_OK;
}

static int hx__preferred(const struct hx_sched *s, const struct hx_rule *r,
                         const struct hx_node *nd)
{
    int64_t n_layer = s->model->hp.n_layer;
    int64_t layer =
        nd->desc.layer < 0 ? (nd->desc.cls == HX_CLASS_EMBED ? 0 : n_layer - 1) : nd->desc.layer;
    switch (r->kind) {
    case HX_POLICY_GEMM_OFFLOAD: return nd->desc.kind == HX_OP_MATMUL ? r->dev[0] : s->host;
    case HX_POLICY_OP_MAP:
        return r->dev[r->class_dev[nd->desc.cls] >= 0 ? r->class_dev[nd->desc.cls] : 0];
    case HX_POLICY_LAYER_SPLIT: {
        if (r->alternate) return r->dev[layer % r->n_dev];
        double acc = 0;
        for (int i = 0; i < r->n_dev; i++) {
            acc += r->ratio[i];
            if ((double)layer < acc * (double)n_layer - 1e-9) return r->dev[i];
        }
        return r->dev[r->n_dev - 1];
    }
    case HX_POLICY_FIT:
        if (nd->desc.layer < 0 && nd->desc.cls == HX_CLASS_EMBED) return r->embed_dev;
        if (nd->desc.layer < 0 && r->head_dev >= 0) return r->head_dev;
        for (int i = 0; i < r->n_dev; i++)
            if (layer < r->layer_end[i]) return r->dev[i];
        return r->dev[r->n_dev - 1];
    /* part is 0 but for the expansion's nodes: a part of a split matmul, or a whole matmul
     * whose rows all fell to one device because the others' shares rounded to no rows. */
    case HX_POLICY_TENSOR_SPLIT: return r->dev[nd->part];
    default: return r->dev[0];
    }
}

/* The graph a rule runs: g itself, or g with every sliced matmul replaced by its parts. */
static const struct hx_graph *hx__expand(struct hx_sched *s, const struct hx_graph *g,
                                         const struct hx_rule *r)
{
    const struct hx_tsplit *ts = r->ts;
    if (!ts) return g;
    struct hx_graph *x = &s->xg;
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        const struct hx_node *nd = &g->nodes[i];
        bool split =
            nd->desc.kind == HX_OP_MATMUL && nd->weight_id >= 0 && ts->n_used[nd->weight_id];
        n += split ? ts->n_used[nd->weight_id] : 1;
    }
    if (n > x->cap) {
        struct hx_node *nn = hx__realloc(x->nodes, (size_t)n * sizeof *nn);
        if (!nn) return NULL;
        x->nodes = nn, x->cap = n;
    }
    struct hx_node *nodes = x->nodes;
    int64_t cap = x->cap;
    *x = *g;
    x->nodes = nodes, x->cap = cap, x->n_nodes = 0;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        const struct hx_node *nd = &g->nodes[i];
        int used =
            nd->desc.kind == HX_OP_MATMUL && nd->weight_id >= 0 ? ts->n_used[nd->weight_id] : 0;
        if (!used) {
            x->nodes[x->n_nodes++] = *nd;
            continue;
        }
        for (int p = 0; p < ts->n_parts; p++) {
            const struct hx_weight *sw = &ts->w[(int64_t)nd->weight_id * ts->n_parts + p];
            if (!sw->n_rows) continue;
            struct hx_node *pn = &x->nodes[x->n_nodes++];
            *pn = *nd;
            pn->weight = sw;
            pn->desc.n_out = sw->n_rows;
            pn->dst.col += ts->r0[(int64_t)nd->weight_id * ts->n_parts + p];
            pn->dst.n_cols = sw->n_rows;
            pn->part = (int16_t)p, pn->n_parts = (int16_t)(used > 1 ? used : 0);
        }
    }
    return x;
}

/* ---- placement ------------------------------------------------------------------------------- */

static bool hx__can_run(struct hx_sched *s, int d, const struct hx_node *nd)
{
    struct hx_device *dev = s->dev[d].dev;
    return dev->healthy && hx__dev_supports(dev, &nd->desc);
}

static int hx__place_cap(struct hx_sched *s, int64_t n)
{
    if (n <= s->assign_cap) return HX_OK;
    int32_t *a = hx__realloc(s->assign, (size_t)n * sizeof *a);
    if (a) s->assign = a;
    uint8_t *r = hx__realloc(s->reason, (size_t)n);
    if (r) s->reason = r;
    if (!a || !r) return HX_E_NOMEM;
    s->assign_cap = n;
    return HX_OK;
}

/* Place every node of g (already expanded) under rule; *n_off counts the nodes off their
 * preferred device as it goes. */
static int hx__place_nodes(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *rule,
                           int64_t *n_off)
{
    int st = hx__place_cap(s, g->n_nodes);
    if (st) return st;
    *n_off = 0;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        const struct hx_node *nd = &g->nodes[i];
        int want = hx__preferred(s, rule, nd), got = -1;
        uint8_t why = HX_R_POLICY;
        if (hx__can_run(s, want, nd))
            got = want;
        else
            why = s->dev[want].dev->healthy ? HX_R_UNSUPPORTED : HX_R_UNHEALTHY;
        for (int k = 0; got < 0 && k < s->n_fb; k++)
            if (hx__can_run(s, s->fb[k], nd)) got = s->fb[k];
        if (got < 0 && hx__can_run(s, s->host, nd)) got = s->host;
        if (got < 0)
            return hx__set_error(HX_E_DEVICE, "no healthy device can run %s (%s) of layer %d",
                                 hx_op_kind_name(nd->desc.kind), hx_op_class_name(nd->desc.cls),
                                 nd->desc.layer);
        if (got != want) (*n_off)++;
        s->assign[i] = got;
        s->reason[i] = got == want ? HX_R_POLICY : why;
    }
    return HX_OK;
}

int hx__place(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *rule,
              const struct hx_graph **plan, int64_t *n_off)
{
    const struct hx_graph *xg = hx__expand(s, g, rule);
    *plan = xg;
    return xg ? hx__place_nodes(s, xg, rule, n_off) : HX_E_NOMEM;
}

/* ---- steps ----------------------------------------------------------------------------------- */

int64_t hx__step_end(const struct hx_sched *s, const struct hx_graph *g, int64_t i, bool one_by_one)
{
    if (g->nodes[i].n_parts > 1) return i + g->nodes[i].n_parts;
    int d = s->assign[i];
    int64_t j = i + 1;
    while (!one_by_one && j < g->n_nodes && s->assign[j] == d && g->nodes[j].n_parts <= 1) j++;
    return j;
}

int hx__group_devices(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int *devs)
{
    int n = 0;
    for (int64_t k = i; k < i + g->nodes[i].n_parts; k++) {
        bool seen = false;
        for (int u = 0; u < n; u++) seen |= devs[u] == s->assign[k];
        if (!seen) devs[n++] = s->assign[k];
    }
    return n;
}
