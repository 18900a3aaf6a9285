/*
 * sched-plan.c — the passes over a plan that run nothing: the dry walk, and the two passes made
 * with it, the cost pass (auto's choice, the predictions) and the plan text of `engine plan`.
 *
 * The walk follows a placed plan step by step exactly as sched-exec.c runs it — the same steps
 * (hx__step_end), the same coherence rules (hx__coh_take_*, hx__coh_wrote) on a copy of the
 * scheduler's coherence state, the same order of moves — and tells a callback what happens:
 * a split or group starts, a slot or KV cache is moved, a node is placed, the step runs, a
 * part is joined. Nothing runs, no buffer is touched and no state of the scheduler changes, so
 * a pass can be made at any time (before the first run, between runs) and as often as wanted.
 * Its counts are those a run of the same batch from the same state makes (test-bench checks
 * engine plan's bytes against engine bench's).
 */
#include <stdio.h>
#include <string.h>

#include "sched-impl.h"

/* ---- dry walk -------------------------------------------------------------------------------- */

struct hx_walk {
    const struct hx_sched *s;
    const struct hx_graph *g;
    hx_walk_cb *cb;
    void *user_data;
    struct hx_coh coh; /* a copy of the scheduler's: the walk changes nothing of it */
    struct hx_sched_stats stats;
};

/* Tell the pass about a step: ev at node (or first node) i on device d. */
static void hx__walk_emit(struct hx_walk *w, enum hx_walk_ev ev, int64_t i, int d,
                          struct hx_walk_step *e)
{
    e->ev = ev, e->i = i, e->d = d;
    w->cb(w->s, w->g, e, w->user_data);
}

/* A move of nb bytes src -> d, before (or, a join, after) node i: counted, then told. */
static void hx__walk_move(struct hx_walk *w, enum hx_walk_ev ev, int64_t i, int src, int d,
                          int slot, size_t nb)
{
    struct hx_walk_step e = {.src = src, .slot = slot, .nb = nb};
    hx__count_move(&w->stats, nb);
    hx__walk_emit(w, ev, i, d, &e);
}

/* What hx__fetch_inputs moves before node k runs on d. */
static void hx__walk_inputs(struct hx_walk *w, int64_t k, int d)
{
    const struct hx_node *nd = &w->g->nodes[k];
    int rd[4], n = hx__node_reads(nd, rd), src;
    for (int r = 0; r < n; r++)
        if ((src = hx__coh_take_slot(&w->coh, rd[r], d)) >= 0)
            hx__walk_move(w, HX_WALK_SLOT, k, src, d, rd[r], hx__slot_bytes(w->g, rd[r]));
    if (nd->desc.kind != HX_OP_ATTN || (src = hx__coh_take_kv(&w->coh, nd->desc.layer, d)) < 0)
        return;
    struct hx_walk_step e = {.src = src, .slot = -1, .layer = nd->desc.layer};
    hx__walk_emit(w, HX_WALK_KV, k, d, &e);
    for (int32_t q = 0; q < w->s->mem.n_seq; q++) {
        size_t nb = hx__kv_seq_bytes(w->s, q);
        if (!nb) continue;
        hx__walk_move(w, HX_WALK_KV_ROWS, k, src, d, -1, nb); /* K */
        hx__walk_move(w, HX_WALK_KV_ROWS, k, src, d, -1, nb); /* V */
    }
}

static void hx__walk_split(struct hx_walk *w, int64_t i, int64_t j, int d)
{
    struct hx_walk_step e = {.index = w->stats.n_splits++, .j = j};
    hx__walk_emit(w, HX_WALK_SPLIT, i, d, &e);
    for (int64_t k = i; k < j; k++) {
        hx__walk_inputs(w, k, d);
        hx__coh_wrote(&w->coh, &w->g->nodes[k], d);
        hx__walk_emit(w, HX_WALK_NODE, k, d, &(struct hx_walk_step){0});
    }
    e = (struct hx_walk_step){.j = j};
    hx__walk_emit(w, HX_WALK_RUN, i, d, &e);
}

static void hx__walk_group(struct hx_walk *w, int64_t i, int64_t j)
{
    const int32_t *assign = w->s->assign;
    int devs[HX_MAX_DEVICES], n_dev = hx__group_devices(w->s, w->g, i, devs), join = assign[i];
    struct hx_walk_step e = {.index = w->stats.n_parallel++, .j = j, .devs = devs, .n_dev = n_dev};
    w->stats.n_splits += n_dev;
    hx__walk_emit(w, HX_WALK_GROUP, i, join, &e);
    for (int64_t k = i; k < j; k++) {
        hx__walk_inputs(w, k, assign[k]);
        hx__walk_emit(w, HX_WALK_NODE, k, assign[k], &(struct hx_walk_step){0});
    }
    e.index = 0;
    hx__walk_emit(w, HX_WALK_RUN, i, join, &e);
    for (int64_t k = i + 1; k < j; k++)
        if (assign[k] != join)
            hx__walk_move(w, HX_WALK_JOIN, k, assign[k], join, w->g->nodes[k].dst.slot,
                          hx__part_bytes(&w->g->nodes[k]));
    hx__coh_wrote(&w->coh, &w->g->nodes[i], join);
}

int hx__walk(const struct hx_sched *s, const struct hx_graph *g, hx_walk_cb *cb, void *user_data,
             struct hx_sched_stats *stats)
{
    size_t kv_bytes = (size_t)s->model->hp.n_layer * sizeof *s->coh.kv;
    struct hx_walk w = {.s = s, .g = g, .cb = cb, .user_data = user_data};
    memcpy(w.coh.slot, s->coh.slot, sizeof w.coh.slot);
    if (!(w.coh.kv = hx__malloc(kv_bytes))) return HX_E_NOMEM;
    memcpy(w.coh.kv, s->coh.kv, kv_bytes);
    for (int64_t i = 0; i < g->n_nodes;) {
        int64_t j = hx__step_end(s, g, i, hx__verify_on(s->v));
        if (g->nodes[i].n_parts > 1)
            hx__walk_group(&w, i, j);
        else
            hx__walk_split(&w, i, j, s->assign[i]);
        i = j;
    }
    hx__free(w.coh.kv);
    if (stats) {
        stats->n_splits = w.stats.n_splits, stats->n_parallel = w.stats.n_parallel;
        stats->n_transfers = w.stats.n_transfers, stats->bytes_moved = w.stats.bytes_moved;
    }
    return HX_OK;
}

/* ---- the cost pass --------------------------------------------------------------------------- */

/* Adds up, in the walk's order (the run's), the predictions of the cost model (sched-cost.c),
 * so a plan's prediction is the same number whoever asks for it. */
static void hx__cost_step(const struct hx_sched *s, const struct hx_graph *g,
                          const struct hx_walk_step *e, void *user_data)
{
    double *us = user_data;
    switch (e->ev) {
    case HX_WALK_SLOT:
    case HX_WALK_KV_ROWS:
    case HX_WALK_JOIN: *us += hx__xfer_us(s, e->src, e->d, e->nb); break;
    case HX_WALK_RUN:
        *us += e->devs ? hx__group_us(s, g, e->i, e->devs, e->n_dev)
                       : hx__split_us(s, g, e->i, e->j, e->d);
        break;
    default: break;
    }
}

int hx__cost_walk(const struct hx_sched *s, const struct hx_graph *plan, double *us)
{
    *us = 0;
    return hx__walk(s, plan, hx__cost_step, us, NULL);
}

int hx__plan_cost(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *r, double *us)
{
    const struct hx_graph *xg;
    int64_t n_off;
    *us = 0;
    int st = hx__place(s, g, r, &xg, &n_off);
    return st ? st : hx__cost_walk(s, xg, us);
}

/* ---- plan text ------------------------------------------------------------------------------- */

static const char *const hx__reason_text[] = {"policy",
                                              "fallback: preferred device does not support it",
                                              "fallback: preferred device unhealthy"};

static void hx__plan_node_line(const struct hx_sched *s, const struct hx_node *nd, int64_t i,
                               struct hx_strbuf *sb)
{
    char layer[16] = "  -";
    if (nd->desc.layer >= 0) snprintf(layer, sizeof layer, "L%-2d", nd->desc.layer);
    char shape[96] = "";
    if (nd->desc.kind == HX_OP_MATMUL || nd->desc.kind == HX_OP_EMBED)
        snprintf(shape, sizeof shape, "%s %lld->%lld", hx_dtype_name(nd->desc.wtype),
                 (long long)nd->desc.n_in, (long long)nd->desc.n_out);
    else
        snprintf(shape, sizeof shape, "%lld cols", (long long)nd->desc.n_out);
    char part[96] = "";
    if (nd->n_parts > 1)
        snprintf(part, sizeof part, " cols [%lld,%lld) on %s", (long long)nd->dst.col,
                 (long long)(nd->dst.col + nd->dst.n_cols), hx__id(s, s->assign[i]));
    bool pol = s->reason[i] == HX_R_POLICY;
    hx__sb_printf(sb, "    [%3lld] %s %-9s %-8s %-22s%s%s%s%s\n", (long long)i, layer,
                  hx_op_kind_name(nd->desc.kind), hx_op_class_name(nd->desc.cls), shape, part,
                  pol ? "" : " (", pol ? "" : hx__reason_text[s->reason[i]], pol ? "" : ")");
}

static void hx__text_step(const struct hx_sched *s, const struct hx_graph *g,
                          const struct hx_walk_step *e, void *user_data)
{
    struct hx_strbuf *sb = user_data;
    const struct hx_node *nd = &g->nodes[e->i];
    switch (e->ev) {
    case HX_WALK_SPLIT:
        hx__sb_printf(sb, "  split %lld on %s: %lld ops", (long long)e->index, hx__id(s, e->d),
                      (long long)(e->j - e->i));
        if (s->have_costs)
            hx__sb_printf(sb, ", predicted %.1f us", hx__split_us(s, g, e->i, e->j, e->d));
        hx__sb_printf(sb, "\n");
        break;
    case HX_WALK_GROUP:
        hx__sb_printf(sb, "  parallel %lld: L%d %s split %lld ways across", (long long)e->index,
                      nd->desc.layer, hx_op_class_name(nd->desc.cls), (long long)(e->j - e->i));
        for (int u = 0; u < e->n_dev; u++) hx__sb_printf(sb, " %s", hx__id(s, e->devs[u]));
        if (s->have_costs)
            hx__sb_printf(sb, ", predicted %.1f us", hx__group_us(s, g, e->i, e->devs, e->n_dev));
        hx__sb_printf(sb, "\n");
        break;
    case HX_WALK_SLOT:
        hx__sb_printf(sb, "      transfer %-6s %s -> %s  %zu bytes\n",
                      hx__slot_name((enum hx_slot)e->slot), hx__id(s, e->src), hx__id(s, e->d),
                      e->nb);
        break;
    case HX_WALK_KV:
        hx__sb_printf(sb, "      transfer kv[%lld] %s -> %s (cached positions)\n",
                      (long long)e->layer, hx__id(s, e->src), hx__id(s, e->d));
        break;
    case HX_WALK_NODE: hx__plan_node_line(s, nd, e->i, sb); break;
    case HX_WALK_JOIN:
        hx__sb_printf(sb, "      join %s cols [%lld,%lld) %s -> %s  %zu bytes\n",
                      hx__slot_name((enum hx_slot)e->slot), (long long)nd->dst.col,
                      (long long)(nd->dst.col + nd->dst.n_cols), hx__id(s, e->src), hx__id(s, e->d),
                      e->nb);
        break;
    default: break;
    }
}

int hx__sched_plan_text(struct hx_sched *s, const struct hx_graph *g, const char *phase,
                        struct hx_strbuf *sb)
{
    enum hx_phase ph = hx__phase_of(g);
    const struct hx_rule *r = &s->rule[ph];
    const struct hx_graph *xg;
    struct hx_sched_stats t = {0};
    struct hx_strbuf body;
    hx__sb_init(&body);
    double us = 0;
    int st = hx__place(s, g, r, &xg, &t.n_fallback_ops);
    if (st == HX_OK) st = hx__walk(s, xg, hx__text_step, &body, &t);
    if (st == HX_OK && s->have_costs) st = hx__cost_walk(s, xg, &us);
    if (st == HX_OK) {
        hx__sb_printf(
            sb,
            "phase %s (%lld rows, %lld with logits): rule %s; %lld ops, %lld splits, %lld parallel, "
            "%lld transfers, %zu bytes moved between devices, %lld ops off their policy device",
            phase, (long long)g->n_rows, (long long)g->n_logits, r->text, (long long)xg->n_nodes,
            (long long)t.n_splits, (long long)t.n_parallel, (long long)t.n_transfers, t.bytes_moved,
            (long long)t.n_fallback_ops);
        if (s->have_costs) hx__sb_printf(sb, "; predicted %.1f us", us);
        hx__sb_printf(sb, "\n");
        if (s->why[ph].len) hx__sb_append(sb, s->why[ph].data, s->why[ph].len);
        if (ph == HX_PHASE_PREFILL && s->prof_text.len)
            hx__sb_append(sb, s->prof_text.data, s->prof_text.len);
        if (hx__verify_on(s->v))
            hx__sb_printf(
                sb,
                "  verify: every op runs as its own split and again on %s (its own instance) with the "
                "same inputs; thresholds as test-backend-ops (core/numerics.h): per f32 op, and per "
                "matmul from its data and the device's numerics\n",
                hx__verify_ref(s->v));
        hx__sb_append(sb, body.data ? body.data : "", body.len);
    }
    hx__sb_free(&body);
    return st;
}
