/*
 * sched.c — the scheduler: devices, placement rules, coherence, execution, recovery, the
 * tensor-split expansion and the `auto` cost model; `verify` is in sched-verify.c.
 *
 * Rules: the policy becomes one placement rule per phase (prefill: more than one row; decode:
 * one row). phase-split is two single rules; auto measures its candidate devices and picks,
 * per phase, the candidate rule with the least predicted time (see "auto" below).
 *
 * Placement: a rule names a preferred device for every node; the node goes to the first
 * healthy device of [preferred, --fallback chain..., cpu] whose supports() accepts it (every
 * off-policy placement is counted and shown by `engine plan`). Consecutive nodes on one device
 * form a split, run with one hx__dev_run.
 *
 * Tensor-split: each weight matmul becomes a group of parts, part p computing the output
 * columns [r0, r0 + n) from rows [r0, r0 + n) of the weight (a row slice is itself a weight:
 * rows are stored whole). The parts of a group are enqueued on their devices together (each
 * synchronous device on its own thread) and then joined: every part's columns are copied to
 * the first part's device, which becomes the slot's only valid holder.
 *
 * Coherence: each slot and each layer's KV cache has a valid-on bitmask over the devices.
 * Before a split, every slot its nodes read that its device lacks is copied from a device
 * that has it (the bytes are counted); a node's write makes its device the only valid
 * holder. KV caches move the same way (phase-split hands the cache over). With a fallback
 * chain, KV rows written on a non-host device are mirrored to the host, so when a device
 * fails the whole batch is re-planned without it and re-run from the embedding: nothing is
 * zero-filled and the cache stays consistent (positions of the batch are simply rewritten).
 * A split that runs longer than HX_SPLIT_TIMEOUT_MS (when set) counts as a timed-out device.
 *
 * Verify (sched-verify.c): every node is its own split, run again on a separate instance of
 * the reference device and compared against core/numerics.h's error model.
 *
 * Weights are prepared once per device and looked up by their hx_weight address (slices
 * included) in a small per-device hash table.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "sched-impl.h"

static enum hx_phase hx__phase_of(const struct hx_graph *g)
{
    return g->n_rows > 1 ? HX_PHASE_PREFILL : HX_PHASE_DECODE;
}


/* ---- devices ---------------------------------------------------------------------------- */

static int hx__find_dev(struct hx_sched *s, const char *id)
{
    for (int i = 0; i < s->n_dev; i++)
        if (!strcasecmp(s->dev[i].dev->id, id) || !strcasecmp(s->dev[i].dev->ops->name, id))
            return i;
    return -1;
}

static int hx__open_one(struct hx_sched *s, const char *spec, const struct hx_device_config *cfg,
                        int *idx)
{
    char real[64];
    snprintf(real, sizeof real, "%s", spec);
    if (!strcasecmp(spec, "gpu")) {
        const char *g = hx__resolve_gpu();
        if (!g)
            return hx__set_error(HX_E_UNAVAILABLE,
                                 "policy names 'gpu' but no GPU backend is usable here");
        snprintf(real, sizeof real, "%s", g);
    }
    int have = hx__find_dev(s, real);
    if (have >= 0) return *idx = have, HX_OK;
    if (s->n_dev >= HX_MAX_DEVICES) return hx__set_error(HX_E_INVAL, "too many devices");
    struct hx_device *d;
    int st = hx__device_open(real, cfg, &d);
    if (st) return st;
    /* "vulkan" and "vulkan:0" may both resolve to one device: keep one. */
    have = hx__find_dev(s, d->id);
    if (have >= 0) {
        hx__device_close(d);
        return *idx = have, HX_OK;
    }
    s->dev[s->n_dev].dev = d;
    *idx = s->n_dev++;
    HX_LOG_INFO("sched: opened %s (%s)", d->id, d->info.name);
    return HX_OK;
}

/* Open a policy device; if it is absent and a fallback chain exists, substitute (logged). */
static int hx__open_policy_dev(struct hx_sched *s, const char *spec,
                               const struct hx_device_config *cfg, int *idx)
{
    int st = hx__open_one(s, spec, cfg, idx);
    if (st == HX_OK || s->policy.n_fallback == 0) return st;
    char why[1024];
    snprintf(why, sizeof why, "%s", hx_last_error());
    for (int i = 0; i < s->policy.n_fallback; i++)
        if (hx__open_one(s, s->policy.fallback[i], cfg, idx) == HX_OK) {
            HX_LOG_WARN("sched: device '%s' unavailable (%s); substituting %s", spec, why,
                        s->dev[*idx].dev->id);
            return HX_OK;
        }
    return hx__set_error(st, "%s; no device of the fallback chain is available either", why);
}

static int hx__open_devices(struct hx_sched *s, const struct hx_device_config *cfg)
{
    int st = hx__open_one(s, "cpu", cfg, &s->host);
    if (st) return st;
    for (int i = 0; i < s->policy.n_fallback; i++) {
        int idx;
        if (hx__open_one(s, s->policy.fallback[i], cfg, &idx) == HX_OK)
            s->fb[s->n_fb++] = idx;
        else
            HX_LOG_WARN("sched: fallback device '%s' unavailable: %s", s->policy.fallback[i],
                        hx_last_error());
    }
    for (int i = 0; i < s->policy.n_devs; i++)
        if ((st = hx__open_policy_dev(s, s->policy.devs[i], cfg, &s->pol[i]))) return st;
    return HX_OK;
}

/* The reference of `verify`: a separate instance, so its buffers never mix with the plan's. */
static int hx__open_verify(struct hx_sched *s, const struct hx_device_config *cfg)
{
    const char *spec = s->policy.verify_ref;
    if (!strcasecmp(spec, "gpu") && !(spec = hx__resolve_gpu()))
        return hx__set_error(HX_E_UNAVAILABLE,
                             "verify: reference 'gpu' but no GPU backend is usable here");
    int st = hx__device_open(spec, cfg, &s->v.sd.dev);
    if (st) return hx__set_error(st, "verify: reference device '%s': %s", spec, hx_last_error());
    snprintf(s->v.rep.ref, sizeof s->v.rep.ref, "%s", s->v.sd.dev->id);
    snprintf(s->v.tw_spec, sizeof s->v.tw_spec, "%s", spec); /* engine diff's twins, if asked */
    s->v.tw_cfg = *cfg;
    if (cfg->kernels_dir) {
        snprintf(s->v.tw_kdir, sizeof s->v.tw_kdir, "%s", cfg->kernels_dir);
        s->v.tw_cfg.kernels_dir = s->v.tw_kdir;
    }
    s->v.on = true;
    return HX_OK;
}

/* ---- prepared weights --------------------------------------------------------------------- */

static size_t hx__wmap_pos(const struct hx_sdev *sd, const struct hx_weight *w)
{
    uint64_t h = (uint64_t)(uintptr_t)w * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & (sd->wcap - 1);
    while (sd->wmap[i].w && sd->wmap[i].w != w) i = (i + 1) & (sd->wcap - 1);
    return i;
}

static int hx__wmap_grow(struct hx_sdev *sd)
{
    size_t cap = sd->wcap ? 2 * sd->wcap : 64;
    struct hx_whent *old = sd->wmap, *nw = hx__calloc(cap, sizeof *nw);
    if (!nw) return HX_E_NOMEM;
    size_t old_cap = sd->wcap;
    sd->wmap = nw, sd->wcap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].w) sd->wmap[hx__wmap_pos(sd, old[i].w)] = old[i];
    hx__free(old);
    return HX_OK;
}

static int hx__weight_handle(struct hx_sdev *sd, const struct hx_weight *w, void **out)
{
    *out = NULL;
    if (!w) return HX_OK;
    if (sd->wcap) {
        size_t i = hx__wmap_pos(sd, w);
        if (sd->wmap[i].w) return *out = sd->wmap[i].h, HX_OK;
    }
    if (2 * (sd->wn + 1) > sd->wcap && hx__wmap_grow(sd)) return HX_E_NOMEM;
    void *h;
    int st = hx__dev_weight_prepare(sd->dev, w, &h);
    if (st) return st;
    size_t i = hx__wmap_pos(sd, w);
    sd->wmap[i] = (struct hx_whent){w, h};
    sd->wn++;
    *out = h;
    return HX_OK;
}

static void hx__wmap_release(struct hx_sdev *sd)
{
    for (size_t i = 0; i < sd->wcap; i++)
        if (sd->wmap[i].w) hx__dev_weight_release(sd->dev, sd->wmap[i].h);
    hx__free(sd->wmap);
    sd->wmap = NULL, sd->wcap = sd->wn = 0;
}

/* ---- rules --------------------------------------------------------------------------------- */

static void hx__rule_init(struct hx_rule *r, enum hx_policy_kind kind)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    for (int i = 0; i < HX_CLASS_COUNT; i++) r->class_dev[i] = -1;
}

static void hx__ts_free(struct hx_tsplit *ts)
{
    if (!ts) return;
    hx__free(ts->w);
    hx__free(ts->r0);
    hx__free(ts->n_used);
    hx__free(ts);
}

static void hx__rule_text(const struct hx_sched *s, struct hx_rule *r)
{
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    hx__sb_printf(&sb, "%s:", hx__policy_kind_name(r->kind));
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
static int hx__ts_build(struct hx_sched *s, struct hx_rule *r)
{
    int64_t nw = hx__model_weight_count(s->model);
    int np = r->n_dev;
    struct hx_tsplit *ts = hx__calloc(1, sizeof *ts);
    if (!ts) return HX_E_NOMEM;
    ts->n_parts = np;
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
            *sw = *w;
            sw->n_rows = b - prev;
            sw->data = (const char *)w->data + (size_t)prev * rb;
            sw->nbytes = (size_t)sw->n_rows * rb;
            ts->r0[id * np + p] = prev;
            used += sw->n_rows > 0;
            prev = b;
        }
        ts->n_used[id] = (int8_t)(used > 1 ? used : 0);
    }
    r->ts = ts;
    return HX_OK;
}

static int hx__rule_from_policy(struct hx_sched *s, enum hx_phase ph, struct hx_rule *r)
{
    const struct hx_policy *p = &s->policy;
    hx__rule_init(r, p->kind);
    r->n_dev = p->n_devs;
    r->alternate = p->alternate;
    for (int i = 0; i < p->n_devs; i++) r->dev[i] = s->pol[i], r->ratio[i] = p->ratio[i];
    memcpy(r->class_dev, p->class_dev, sizeof r->class_dev);
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
    case HX_POLICY_TENSOR_SPLIT: return r->dev[nd->n_parts > 1 ? nd->part : 0];
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
            pn->part = (int16_t)p, pn->n_parts = (int16_t)used;
        }
    }
    return x;
}

/* ---- placement ---------------------------------------------------------------------------- */

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

static int hx__place(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *rule)
{
    int st = hx__place_cap(s, g->n_nodes);
    if (st) return st;
    s->stats.n_fallback_ops = 0;
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
        if (got != want) s->stats.n_fallback_ops++;
        s->assign[i] = got;
        s->reason[i] = got == want ? HX_R_POLICY : why;
    }
    return HX_OK;
}

/* ---- memory --------------------------------------------------------------------------------- */

int64_t hx__slot_rows(const struct hx_graph *g, int slot)
{
    return (slot == HX_SLOT_XL || slot == HX_SLOT_LOGITS) ? g->n_logits : g->n_rows;
}

int hx__slot_buf(struct hx_sched *s, struct hx_sdev *sd, int slot, struct hx_buffer **out)
{
    *out = NULL;
    if (!sd->slot[slot]) {
        int64_t width[HX_SLOT_COUNT];
        hx__graph_slot_widths(s->model, width);
        size_t nb = (size_t)s->slot_cap[slot] * (size_t)width[slot] * sizeof(float);
        int st = hx__dev_buffer_alloc(sd->dev, nb, &sd->slot[slot]);
        if (st)
            return hx_device_set_error(sd->dev, st,
                                       "cannot allocate %zu bytes for activation slot '%s'", nb,
                                       hx__slot_name((enum hx_slot)slot));
    }
    *out = sd->slot[slot];
    return HX_OK;
}

static size_t hx__kv_bytes(const struct hx_sched *s)
{
    return (size_t)s->n_seq * (size_t)s->n_ctx * (size_t)s->model->hp.n_kv * sizeof(float);
}

static int hx__kv_bufs(struct hx_sched *s, struct hx_sdev *sd, int64_t layer)
{
    if (!sd->kv_k) {
        sd->kv_k = hx__calloc((size_t)s->model->hp.n_layer, sizeof *sd->kv_k);
        sd->kv_v = hx__calloc((size_t)s->model->hp.n_layer, sizeof *sd->kv_v);
        if (!sd->kv_k || !sd->kv_v) return HX_E_NOMEM;
    }
    if (sd->kv_k[layer] && sd->kv_v[layer]) return HX_OK;
    size_t nb = hx__kv_bytes(s);
    int st = sd->kv_k[layer] ? HX_OK : hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_k[layer]);
    if (st == HX_OK) st = hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_v[layer]);
    if (st)
        return hx_device_set_error(sd->dev, st,
                                   "cannot allocate the KV cache of layer %lld (2 x %zu bytes)",
                                   (long long)layer, nb);
    return HX_OK;
}

static void hx__sdev_free_mem(struct hx_sched *s, struct hx_sdev *sd)
{
    for (int i = 0; i < HX_SLOT_COUNT; i++) {
        hx__dev_buffer_free(sd->slot[i]);
        sd->slot[i] = NULL;
    }
    for (int64_t L = 0; sd->kv_k && L < s->model->hp.n_layer; L++) {
        hx__dev_buffer_free(sd->kv_k[L]);
        hx__dev_buffer_free(sd->kv_v[L]);
    }
    hx__free(sd->kv_k);
    hx__free(sd->kv_v);
    sd->kv_k = sd->kv_v = NULL;
}

/* ---- costs (auto) ---------------------------------------------------------------------------- */

static double hx__xfer_us(const struct hx_sched *s, int a, int b, size_t nb)
{
    double t = 0;
    if (a == b) return 0;
    if (a != s->host)
        t += s->dev[a].prof.xfer_lat_us + (double)nb * s->dev[a].prof.xfer_us_per_byte;
    if (b != s->host)
        t += s->dev[b].prof.xfer_lat_us + (double)nb * s->dev[b].prof.xfer_us_per_byte;
    return t;
}

static const struct hx_prof_ent *hx__prof_find(const struct hx_prof *pf, const struct hx_op_desc *d,
                                               bool same_rows, bool same_cols)
{
    const struct hx_prof_ent *best = NULL;
    for (int64_t i = 0; i < pf->n; i++) {
        const struct hx_prof_ent *e = &pf->e[i];
        if (e->kind != (int)d->kind || e->cls != (int)d->cls || e->wtype != (int)d->wtype ||
            e->n_in != d->n_in)
            continue;
        if ((same_rows && e->rows != d->n_rows) || (same_cols && e->n_out != d->n_out)) continue;
        if (!best || llabs(e->rows - d->n_rows) < llabs(best->rows - d->n_rows)) best = e;
    }
    return best;
}

/* Predicted µs of a node on device d: measured (exact, or the nearest batch size scaled by
 * rows and output columns), else the backend's estimate; -1 unknown. Launch included. */
static double hx__node_us(const struct hx_sched *s, int d, const struct hx_node *nd)
{
    const struct hx_prof *pf = &s->dev[d].prof;
    const struct hx_prof_ent *e = hx__prof_find(pf, &nd->desc, true, true);
    if (e) return e->us;
    if ((e = hx__prof_find(pf, &nd->desc, false, false))) {
        double net = HX_MAX(e->us - pf->launch_us, 0.0);
        net *= (double)nd->desc.n_out / (double)HX_MAX(e->n_out, 1);
        if (e->rows != nd->desc.n_rows) net *= (double)nd->desc.n_rows / (double)HX_MAX(e->rows, 1);
        return pf->launch_us + net;
    }
    double us;
    if (hx__dev_estimate_cost(s->dev[d].dev, &nd->desc, &us) == HX_OK) return us;
    return -1;
}

static double hx__split_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j,
                           int d)
{
    double launch = s->dev[d].prof.launch_us, t = launch;
    for (int64_t k = i; k < j; k++) {
        double us = hx__node_us(s, d, &g->nodes[k]);
        t += us > 0 ? HX_MAX(us - launch, 0.0) : 0;
    }
    return t;
}

/* ---- coherence --------------------------------------------------------------------------------- */

static int hx__first_bit(uint32_t m) { return m ? __builtin_ctz(m) : -1; }

static void hx__count_xfer(struct hx_sched *s, int src, int d, size_t nb)
{
    s->stats.n_transfers++;
    s->stats.bytes_moved += nb;
    if (s->costing) s->cost_us += hx__xfer_us(s, src, d, nb);
}

static int hx__ensure_slot(struct hx_sched *s, const struct hx_graph *g, int d, int slot,
                           struct hx_exec *ex)
{
    if (s->slot_valid[slot] & (1u << d)) return HX_OK;
    int src = hx__first_bit(s->slot_valid[slot]);
    s->slot_valid[slot] |= 1u << d;
    if (src < 0) return HX_OK; /* never written: nothing to move */
    size_t nb = (size_t)hx__slot_rows(g, slot) * (size_t)g->slot_width[slot] * sizeof(float);
    hx__count_xfer(s, src, d, nb);
    if (ex->sb)
        hx__sb_printf(ex->sb, "      transfer %-6s %s -> %s  %zu bytes\n",
                      hx__slot_name((enum hx_slot)slot), hx__id(s, src), hx__id(s, d), nb);
    if (ex->dry) return HX_OK;
    struct hx_buffer *from = NULL, *to = NULL;
    int st = hx__slot_buf(s, &s->dev[src], slot, &from);
    if (st == HX_OK) st = hx__slot_buf(s, &s->dev[d], slot, &to);
    return st ? st : hx__dev_copy(to, 0, from, 0, nb);
}

/* Copy the cached rows of every sequence of `layer` from device `src` to `d`. */
static int hx__copy_kv(struct hx_sched *s, int src, int d, int64_t layer, bool dry)
{
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int32_t q = 0; s->kv_len && q < s->n_seq; q++) {
        size_t n = (size_t)s->kv_len[q] * row, off = (size_t)q * (size_t)s->n_ctx * row;
        if (!n) continue;
        hx__count_xfer(s, src, d, n);
        hx__count_xfer(s, src, d, n);
        if (dry) continue;
        int st = hx__dev_copy(s->dev[d].kv_k[layer], off, s->dev[src].kv_k[layer], off, n);
        if (st == HX_OK)
            st = hx__dev_copy(s->dev[d].kv_v[layer], off, s->dev[src].kv_v[layer], off, n);
        if (st) return st;
    }
    return HX_OK;
}

static int hx__ensure_kv(struct hx_sched *s, int d, int64_t layer, struct hx_exec *ex)
{
    int st = ex->dry ? HX_OK : hx__kv_bufs(s, &s->dev[d], layer);
    if (st || (s->kv_valid[layer] & (1u << d))) return st;
    int src = hx__first_bit(s->kv_valid[layer]);
    s->kv_valid[layer] |= 1u << d;
    if (src < 0) return HX_OK;
    if (ex->sb)
        hx__sb_printf(ex->sb, "      transfer kv[%lld] %s -> %s (cached positions)\n",
                      (long long)layer, hx__id(s, src), hx__id(s, d));
    return hx__copy_kv(s, src, d, layer, ex->dry);
}

/* After attention ran on a non-host device: write this batch's K/V rows through to the host
 * copy, so a later device failure loses nothing. Consecutive rows are coalesced. */
static int hx__mirror_kv(struct hx_sched *s, const struct hx_graph *g, int d, int64_t layer,
                         const int32_t *pos, const int32_t *seq)
{
    if (d == s->host || s->n_fb == 0) return HX_OK;
    int st = hx__kv_bufs(s, &s->dev[s->host], layer);
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int64_t r = 0; st == HX_OK && r < g->n_rows;) {
        int64_t e = r + 1;
        while (e < g->n_rows && seq[e] == seq[r] && pos[e] == pos[e - 1] + 1) e++;
        size_t off = ((size_t)seq[r] * (size_t)s->n_ctx + (size_t)pos[r]) * row,
               n = (size_t)(e - r) * row;
        st = hx__dev_copy(s->dev[s->host].kv_k[layer], off, s->dev[d].kv_k[layer], off, n);
        if (st == HX_OK)
            st = hx__dev_copy(s->dev[s->host].kv_v[layer], off, s->dev[d].kv_v[layer], off, n);
        r = e;
    }
    if (st == HX_OK) s->kv_valid[layer] |= 1u << s->host;
    return st;
}

/* Slots a node reads: its sources, and its destination when it updates in place. */
int hx__node_reads(const struct hx_node *nd, int *slots)
{
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (nd->src[i].slot >= 0) slots[n++] = nd->src[i].slot;
    if (nd->desc.kind == HX_OP_ROPE || nd->desc.kind == HX_OP_ADD) slots[n++] = nd->dst.slot;
    return n;
}

static int hx__ensure_inputs(struct hx_sched *s, const struct hx_graph *g, int d,
                             const struct hx_node *nd, struct hx_exec *ex)
{
    int rd[4], n = hx__node_reads(nd, rd), st = HX_OK;
    for (int r = 0; r < n && st == HX_OK; r++) st = hx__ensure_slot(s, g, d, rd[r], ex);
    if (st == HX_OK && nd->desc.kind == HX_OP_ATTN) st = hx__ensure_kv(s, d, nd->desc.layer, ex);
    return st;
}

/* ---- ops ------------------------------------------------------------------------------------- */

static int hx__ref_to(struct hx_sched *s, const struct hx_graph *g, struct hx_sdev *sd,
                      const struct hx_node_ref *r, struct hx_tensor_ref *out)
{
    memset(out, 0, sizeof *out);
    if (r->slot < 0) return HX_OK;
    int st = hx__slot_buf(s, sd, r->slot, &out->buf);
    if (st) return st;
    size_t w = (size_t)g->slot_width[r->slot];
    out->offset_bytes = ((size_t)r->row * w + (size_t)r->col) * sizeof(float);
    out->n_rows = r->n_rows;
    out->n_cols = r->n_cols;
    out->row_stride_bytes = w * sizeof(float);
    return HX_OK;
}

int hx__build_op(struct hx_sched *s, const struct hx_graph *g, struct hx_sdev *sd,
                        const struct hx_node *nd, struct hx_op *op)
{
    memset(op, 0, sizeof *op);
    op->desc = nd->desc;
    int st = HX_OK;
    for (int i = 0; i < 3 && st == HX_OK; i++) st = hx__ref_to(s, g, sd, &nd->src[i], &op->src[i]);
    if (st == HX_OK) st = hx__ref_to(s, g, sd, &nd->dst, &op->dst);
    op->weight = nd->weight;
    op->aux = nd->aux;
    if (st == HX_OK) st = hx__weight_handle(sd, nd->weight, &op->weight_handle);
    if (st == HX_OK) st = hx__weight_handle(sd, nd->aux, &op->aux_handle);
    if (st == HX_OK && nd->desc.kind == HX_OP_ATTN &&
        (st = hx__kv_bufs(s, sd, nd->desc.layer)) == HX_OK) {
        int64_t L = nd->desc.layer;
        size_t rows = (size_t)s->n_seq * (size_t)s->n_ctx;
        size_t stride = (size_t)s->model->hp.n_kv * sizeof(float);
        op->k_cache =
            (struct hx_tensor_ref){sd->kv_k[L], 0, (int64_t)rows, s->model->hp.n_kv, stride};
        op->v_cache =
            (struct hx_tensor_ref){sd->kv_v[L], 0, (int64_t)rows, s->model->hp.n_kv, stride};
    }
    return st;
}

static int hx__ensure_ops_cap(struct hx_sched *s, int64_t n)
{
    if (n <= s->ops_cap) return HX_OK;
    struct hx_op *o = hx__realloc(s->ops, (size_t)n * sizeof *o);
    if (!o) return HX_E_NOMEM;
    s->ops = o, s->ops_cap = n;
    return HX_OK;
}

int hx__run_sync(struct hx_device *dev, const struct hx_split *sp)
{
    int st = hx__dev_run(dev, sp);
    int st2 = hx__dev_synchronize(dev);
    return st ? st : st2;
}

/* A split that answered, but later than the deadline, is a timed-out device. */
static int hx__deadline(struct hx_sched *s, struct hx_device *dev, double t0, int st)
{
    double us = hx__time_us() - t0;
    if (st || s->split_timeout_us <= 0 || us <= s->split_timeout_us) return st;
    return hx_device_set_error(
        dev, HX_E_TIMEOUT, "a split took %.0f ms, over the %.0f ms deadline (HX_SPLIT_TIMEOUT_MS)",
        us / 1e3, s->split_timeout_us / 1e3);
}

/* ---- execution ----------------------------------------------------------------------------------- */

static const char *const hx__reason_text[] = {"policy",
                                              "fallback: preferred device does not support it",
                                              "fallback: preferred device unhealthy"};

static void hx__plan_node_line(struct hx_sched *s, const struct hx_node *nd, int64_t i,
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

/* Nodes [i, j) on device d as one split. */
static int hx__run_split(struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j, int d,
                         struct hx_exec *ex)
{
    struct hx_sdev *sd = &s->dev[d];
    int st = HX_OK;
    if (ex->sb) {
        hx__sb_printf(ex->sb, "  split %lld on %s: %lld ops", (long long)s->stats.n_splits,
                      sd->dev->id, (long long)(j - i));
        if (s->have_costs)
            hx__sb_printf(ex->sb, ", predicted %.1f us", hx__split_us(s, g, i, j, d));
        hx__sb_printf(ex->sb, "\n");
    }
    s->stats.n_splits++;
    sd->used = true;
    for (int64_t k = i; st == HX_OK && k < j; k++) {
        const struct hx_node *nd = &g->nodes[k];
        st = hx__ensure_inputs(s, g, d, nd, ex);
        if (st == HX_OK && s->v.on && !ex->dry) hx__verify_pre(s, g, nd, d);
        s->slot_valid[nd->dst.slot] = 1u << d;
        if (nd->desc.kind == HX_OP_ATTN) s->kv_valid[nd->desc.layer] = 1u << d;
        if (ex->sb) hx__plan_node_line(s, nd, k, ex->sb);
        if (st == HX_OK && !ex->dry) st = hx__build_op(s, g, sd, nd, &s->ops[k - i]);
    }
    if (st == HX_OK && ex->dry) {
        if (s->costing) s->cost_us += hx__split_us(s, g, i, j, d);
        return HX_OK;
    }
    if (st == HX_OK) {
        struct hx_split sp = {.struct_size = sizeof sp,
                              .ops = s->ops,
                              .n_ops = j - i,
                              .n_rows = g->n_rows,
                              .tokens = ex->tokens,
                              .pos = ex->pos,
                              .seq = ex->seq};
        double t0 = hx__time_us();
        st = hx__deadline(s, sd->dev, t0, hx__run_sync(sd->dev, &sp));
        for (int64_t k = i; st == HX_OK && k < j; k++)
            if (g->nodes[k].desc.kind == HX_OP_ATTN)
                st = hx__mirror_kv(s, g, d, g->nodes[k].desc.layer, ex->pos, ex->seq);
    }
    if (st) return ex->failed = d, st;
    for (int64_t k = i; k < j && s->v.on && st == HX_OK; k++) st = hx__verify_post(s, g, k, d, ex);
    if (st) ex->failed = d;
    return st;
}

struct hx_job {
    int d;
    struct hx_device *dev;
    struct hx_split sp;
    int st;
    bool on_worker;
};

static void hx__job_main(struct hx_job *j) { j->st = hx__run_sync(j->dev, &j->sp); }

/* A thread that runs one synchronous device's parts, so parts on several CPU-side devices
 * run at once without creating a thread per group. */
struct hx_worker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct hx_job *job; /* pending or running; NULL when idle */
    bool quit;
};

static void *hx__worker_main(void *arg)
{
    struct hx_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->job && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->job) break;
        struct hx_job *j = w->job;
        pthread_mutex_unlock(&w->mu);
        hx__job_main(j);
        pthread_mutex_lock(&w->mu);
        w->job = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static struct hx_worker *hx__worker_get(struct hx_sdev *sd)
{
    if (sd->worker) return sd->worker;
    struct hx_worker *w = hx__calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, hx__worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        hx__free(w);
        return NULL;
    }
    return sd->worker = w;
}

static void hx__worker_submit(struct hx_worker *w, struct hx_job *j)
{
    pthread_mutex_lock(&w->mu);
    w->job = j;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void hx__worker_wait(struct hx_worker *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->job) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void hx__worker_free(struct hx_worker *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    hx__free(w);
}

/* Run the jobs at once: asynchronous devices are enqueued first, every synchronous device but
 * one goes to its worker thread, the last runs here; then everything is waited for. */
static int hx__run_jobs(struct hx_sched *s, struct hx_job *jobs, int n, int *failed)
{
    int inline_job = -1;
    for (int k = 0; k < n; k++) {
        struct hx_worker *w;
        if (jobs[k].dev->ops->synchronize)
            jobs[k].st = hx__dev_run(jobs[k].dev, &jobs[k].sp);
        else if (inline_job < 0)
            inline_job = k;
        else if ((w = hx__worker_get(&s->dev[jobs[k].d])))
            jobs[k].on_worker = true, hx__worker_submit(w, &jobs[k]);
    }
    for (int k = 0; k < n; k++)
        if (!jobs[k].dev->ops->synchronize && !jobs[k].on_worker) hx__job_main(&jobs[k]);
    int first = HX_OK;
    *failed = -1;
    for (int k = 0; k < n; k++) {
        if (jobs[k].on_worker)
            hx__worker_wait(s->dev[jobs[k].d].worker);
        else if (jobs[k].dev->ops->synchronize) {
            int st2 = hx__dev_synchronize(jobs[k].dev);
            if (jobs[k].st == HX_OK) jobs[k].st = st2;
        }
        if (jobs[k].st && first == HX_OK) first = jobs[k].st, *failed = k;
    }
    if (first) { /* the detailed message may be a worker's: restate it on this thread */
        struct hx_device *dev = jobs[*failed].dev;
        *failed = jobs[*failed].d;
        hx__set_error(first, "[%s] %s", dev->id, dev->last_error);
    }
    return first;
}

/* Parts of the group at i: dry cost, or run all at once; then join on part 0's device. */
static int hx__group_devices(struct hx_sched *s, const struct hx_graph *g, int64_t i, int *devs)
{
    int n = 0;
    for (int64_t k = i; k < i + g->nodes[i].n_parts; k++) {
        bool seen = false;
        for (int u = 0; u < n; u++) seen |= devs[u] == s->assign[k];
        if (!seen) devs[n++] = s->assign[k];
    }
    return n;
}

static int hx__group_launch(struct hx_sched *s, const struct hx_graph *g, int64_t i,
                            const int *devs, int n_dev, struct hx_exec *ex)
{
    struct hx_job jobs[HX_MAX_DEVICES];
    int64_t n = g->nodes[i].n_parts, pos = 0;
    int st = HX_OK;
    for (int u = 0; u < n_dev && st == HX_OK; u++) {
        int64_t first = pos;
        for (int64_t k = i; k < i + n && st == HX_OK; k++)
            if (s->assign[k] == devs[u])
                st = hx__build_op(s, g, &s->dev[devs[u]], &g->nodes[k], &s->ops[pos++]);
        jobs[u] = (struct hx_job){.d = devs[u],
                                  .dev = s->dev[devs[u]].dev,
                                  .sp = {.struct_size = sizeof jobs[u].sp,
                                         .ops = s->ops + first,
                                         .n_ops = pos - first,
                                         .n_rows = g->n_rows,
                                         .tokens = ex->tokens,
                                         .pos = ex->pos,
                                         .seq = ex->seq}};
    }
    if (st) return ex->failed = devs[0], st;
    double t0 = hx__time_us();
    st = hx__run_jobs(s, jobs, n_dev, &ex->failed);
    if (st == HX_OK && (st = hx__deadline(s, s->dev[devs[n_dev - 1]].dev, t0, HX_OK)))
        ex->failed = devs[n_dev - 1];
    return st;
}

/* Copy part k's columns from its device to the join device (row by row unless whole rows). */
static int hx__join_part(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd,
                         int from, int to, struct hx_exec *ex)
{
    const struct hx_node_ref *r = &nd->dst;
    size_t w = (size_t)g->slot_width[r->slot],
           nb = (size_t)r->n_rows * (size_t)r->n_cols * sizeof(float);
    hx__count_xfer(s, from, to, nb);
    if (ex->sb)
        hx__sb_printf(ex->sb, "      join %s cols [%lld,%lld) %s -> %s  %zu bytes\n",
                      hx__slot_name((enum hx_slot)r->slot), (long long)r->col,
                      (long long)(r->col + r->n_cols), hx__id(s, from), hx__id(s, to), nb);
    if (ex->dry) return HX_OK;
    struct hx_buffer *a = s->dev[from].slot[r->slot], *b = NULL;
    int st = hx__slot_buf(s, &s->dev[to], r->slot, &b);
    bool whole = (size_t)r->n_cols == w;
    for (int64_t row = 0; st == HX_OK && row < (whole ? 1 : r->n_rows); row++) {
        size_t off = (((size_t)(r->row + row)) * w + (size_t)r->col) * sizeof(float);
        st = hx__dev_copy(b, off, a, off, whole ? nb : (size_t)r->n_cols * sizeof(float));
    }
    if (st) ex->failed = from;
    return st;
}

/* Predicted µs of a group: its slowest device's launch and parts. */
static double hx__group_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i,
                           const int *devs, int n_dev)
{
    double t = 0;
    int n_sync = 0;
    for (int u = 0; u < n_dev; u++) n_sync += !s->dev[devs[u]].dev->ops->synchronize;
    for (int u = 0; u < n_dev; u++) {
        double launch = s->dev[devs[u]].prof.launch_us, tu = launch;
        for (int64_t k = i; k < i + g->nodes[i].n_parts; k++)
            if (s->assign[k] == devs[u])
                tu += HX_MAX(hx__node_us(s, devs[u], &g->nodes[k]) - launch, 0.0);
        t = HX_MAX(t, tu);
    }
    return t + (n_sync > 1 ? s->handoff_us : 0);
}

static int hx__run_group(struct hx_sched *s, const struct hx_graph *g, int64_t i,
                         struct hx_exec *ex)
{
    const struct hx_node *nd0 = &g->nodes[i];
    int64_t n = nd0->n_parts;
    int devs[HX_MAX_DEVICES];
    int n_dev = hx__group_devices(s, g, i, devs), join = s->assign[i], st = HX_OK;
    if (ex->sb) {
        hx__sb_printf(ex->sb, "  parallel %lld: L%d %s split %lld ways across",
                      (long long)s->stats.n_parallel, nd0->desc.layer,
                      hx_op_class_name(nd0->desc.cls), (long long)n);
        for (int u = 0; u < n_dev; u++) hx__sb_printf(ex->sb, " %s", hx__id(s, devs[u]));
        if (s->have_costs)
            hx__sb_printf(ex->sb, ", predicted %.1f us", hx__group_us(s, g, i, devs, n_dev));
        hx__sb_printf(ex->sb, "\n");
    }
    s->stats.n_parallel++;
    s->stats.n_splits += n_dev;
    for (int64_t k = i; k < i + n; k++) {
        s->dev[s->assign[k]].used = true;
        if ((st = hx__ensure_inputs(s, g, s->assign[k], &g->nodes[k], ex)))
            return ex->failed = s->assign[k], st;
        if (ex->sb) hx__plan_node_line(s, &g->nodes[k], k, ex->sb);
    }
    if (s->v.on && !ex->dry) hx__verify_pre(s, g, nd0, join);
    if (ex->dry && s->costing) s->cost_us += hx__group_us(s, g, i, devs, n_dev);
    if (!ex->dry && (st = hx__group_launch(s, g, i, devs, n_dev, ex))) return st;
    for (int64_t k = i + 1; k < i + n && st == HX_OK; k++)
        if (s->assign[k] != join) st = hx__join_part(s, g, &g->nodes[k], s->assign[k], join, ex);
    s->slot_valid[nd0->dst.slot] = 1u << join;
    for (int64_t k = i; k < i + n && st == HX_OK && !ex->dry; k++)
        if ((st = hx__verify_post(s, g, k, s->assign[k], ex))) ex->failed = s->assign[k];
    return st;
}

/* Walk the plan split by split (dry: count transfers, cost and text only). On a device
 * failure ex->failed is that device. */
static int hx__execute(struct hx_sched *s, const struct hx_graph *g, struct hx_exec *ex)
{
    int st = hx__ensure_ops_cap(s, g->n_nodes);
    ex->failed = -1;
    s->stats.n_splits = s->stats.n_transfers = s->stats.n_parallel = 0;
    s->stats.bytes_moved = 0;
    for (int i = 0; i < s->n_dev; i++) s->dev[i].used = false;
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes;) {
        if (ex->cancel && *ex->cancel) return HX_E_CANCELED;
        if (g->nodes[i].n_parts > 1) {
            st = hx__run_group(s, g, i, ex);
            i += g->nodes[i].n_parts;
            continue;
        }
        int d = s->assign[i];
        int64_t j = i + 1;
        while (!s->v.on && j < g->n_nodes && s->assign[j] == d && g->nodes[j].n_parts <= 1) j++;
        st = hx__run_split(s, g, i, j, d, ex);
        i = j;
    }
    return st;
}

static void hx__note_used(struct hx_sched *s)
{
    size_t off = 0;
    s->used[0] = '\0';
    for (int i = 0; i < s->n_dev; i++)
        if (s->dev[i].used && off < sizeof s->used)
            off += (size_t)snprintf(s->used + off, sizeof s->used - off, "%s%s", off ? "," : "",
                                    s->dev[i].dev->id);
}

static int hx__read_logits(struct hx_sched *s, const struct hx_graph *g, float *out)
{
    if (g->n_logits <= 0 || !out) return HX_OK;
    int d = hx__first_bit(s->slot_valid[HX_SLOT_LOGITS]);
    struct hx_buffer *b = NULL;
    int st = hx__slot_buf(s, &s->dev[d], HX_SLOT_LOGITS, &b);
    size_t nb = (size_t)g->n_logits * (size_t)s->model->hp.n_vocab * sizeof(float);
    if (st == HX_OK) st = hx__dev_buffer_read(b, 0, out, nb);
    return st;
}

/* After a failure: forget every activation (the batch restarts from the embedding) and
 * trust only the host's mirror of the KV cache. */
static void hx__reset_after_failure(struct hx_sched *s, int failed)
{
    s->dev[failed].dev->healthy = false;
    s->stats.n_recoveries++;
    for (int i = 0; i < HX_SLOT_COUNT; i++) s->slot_valid[i] = 0;
    for (int64_t L = 0; L < s->model->hp.n_layer; L++)
        s->kv_valid[L] = (s->kv_valid[L] & ~(1u << failed)) |
                         (s->dev[s->host].kv_k && s->dev[s->host].kv_k[L] ? 1u << s->host : 0);
}

static bool hx__recoverable(int st)
{
    return st == HX_E_DEVICE || st == HX_E_TIMEOUT || st == HX_E_NOMEM || st == HX_E_UNAVAILABLE;
}

static int hx__run_once(struct hx_sched *s, const struct hx_graph *g, struct hx_exec *ex,
                        float *logits_out)
{
    const struct hx_graph *xg = hx__expand(s, g, &s->rule[ex->phase]);
    if (!xg) return HX_E_NOMEM;
    int st = hx__place(s, xg, &s->rule[ex->phase]);
    if (st == HX_OK) st = hx__execute(s, xg, ex);
    if (st) return st;
    hx__note_used(s);
    if ((st = hx__read_logits(s, xg, logits_out)))
        ex->failed = hx__first_bit(s->slot_valid[HX_SLOT_LOGITS]);
    return st;
}

int hx__sched_run(struct hx_sched *s, const struct hx_graph *g, const int32_t *tokens,
                  const int32_t *pos, const int32_t *seq, const int32_t *kv_len, float *logits_out,
                  const volatile int *cancel)
{
    s->kv_len = kv_len;
    if (g->n_rows > s->n_batch || g->n_logits > s->n_logits)
        return hx__set_error(
            HX_E_INVAL, "batch of %lld rows (%lld with logits) exceeds the context's %lld (%lld)",
            (long long)g->n_rows, (long long)g->n_logits, (long long)s->n_batch,
            (long long)s->n_logits);
    struct hx_exec ex = {
        .tokens = tokens, .pos = pos, .seq = seq, .cancel = cancel, .phase = hx__phase_of(g)};
    s->stats.predicted_us = s->pred_us[ex.phase];
    int st = HX_OK;
    for (int attempt = 0;; attempt++) {
        st = hx__run_once(s, g, &ex, logits_out);
        if (st == HX_OK || st == HX_E_CANCELED || ex.failed < 0 || !hx__recoverable(st) ||
            s->n_fb == 0 || ex.failed == s->host || attempt >= s->n_dev)
            break;
        HX_LOG_WARN(
            "sched: %s failed (%s); marking it unhealthy and re-running the batch on the fallback chain",
            hx__id(s, ex.failed), s->dev[ex.failed].dev->last_error);
        hx__reset_after_failure(s, ex.failed);
    }
    s->v.run_index++;
    return st;
}

/* ---- plan text ---------------------------------------------------------------------------------- */

/* Place and walk g dry under rule r, leaving the coherence state and the last run's stats as
 * they were; *sim gets the plan's stats, with costing *us its predicted µs. */
static int hx__simulate(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *r,
                        struct hx_strbuf *sb, bool costing, double *us, struct hx_sched_stats *sim)
{
    struct hx_sched_stats keep = s->stats;
    const struct hx_graph *xg = hx__expand(s, g, r);
    if (!xg) return HX_E_NOMEM;
    int st = hx__place(s, xg, r);
    if (st) return s->stats = keep, st;
    uint32_t save_slots[HX_SLOT_COUNT];
    memcpy(save_slots, s->slot_valid, sizeof save_slots);
    uint32_t *save_kv = hx__malloc((size_t)s->model->hp.n_layer * sizeof *save_kv);
    if (!save_kv) return HX_E_NOMEM;
    memcpy(save_kv, s->kv_valid, (size_t)s->model->hp.n_layer * sizeof *save_kv);
    struct hx_exec ex = {.dry = true, .sb = sb, .phase = hx__phase_of(g)};
    s->costing = costing, s->cost_us = 0;
    st = hx__execute(s, xg, &ex);
    if (us) *us = s->cost_us;
    if (sim) *sim = s->stats;
    s->stats = keep;
    s->costing = false;
    memcpy(s->slot_valid, save_slots, sizeof save_slots);
    memcpy(s->kv_valid, save_kv, (size_t)s->model->hp.n_layer * sizeof *save_kv);
    hx__free(save_kv);
    return st;
}

int hx__sched_plan_text(struct hx_sched *s, const struct hx_graph *g, const char *phase,
                        struct hx_strbuf *sb)
{
    enum hx_phase ph = hx__phase_of(g);
    struct hx_strbuf body;
    hx__sb_init(&body);
    double us = 0;
    struct hx_sched_stats t;
    int st = hx__simulate(s, g, &s->rule[ph], &body, s->have_costs, &us, &t);
    if (st == HX_OK) {
        hx__sb_printf(
            sb,
            "phase %s (%lld rows, %lld with logits): rule %s; %lld ops, %lld splits, %lld parallel, "
            "%lld transfers, %zu bytes moved between devices, %lld ops off their policy device",
            phase, (long long)g->n_rows, (long long)g->n_logits, s->rule[ph].text,
            (long long)(s->rule[ph].ts ? s->xg.n_nodes : g->n_nodes), (long long)t.n_splits,
            (long long)t.n_parallel, (long long)t.n_transfers, t.bytes_moved,
            (long long)t.n_fallback_ops);
        if (s->have_costs) hx__sb_printf(sb, "; predicted %.1f us", us);
        hx__sb_printf(sb, "\n");
        if (s->why[ph].len) hx__sb_append(sb, s->why[ph].data, s->why[ph].len);
        if (ph == HX_PHASE_PREFILL && s->prof_text.len)
            hx__sb_append(sb, s->prof_text.data, s->prof_text.len);
        if (s->v.on)
            hx__sb_printf(
                sb,
                "  verify: every op runs as its own split and again on %s (its own instance) with the "
                "same inputs; thresholds as test-backend-ops (core/numerics.h): per f32 op, and per "
                "matmul from its data and the device's numerics\n",
                s->v.rep.ref);
        hx__sb_append(sb, body.data ? body.data : "", body.len);
    }
    hx__sb_free(&body);
    return st;
}

/* ---- auto: profile ---------------------------------------------------------------------------- */

static void hx__prof_add(struct hx_prof *pf, const struct hx_op_desc *d, double us)
{
    if (pf->n == pf->cap) {
        int64_t cap = pf->cap ? 2 * pf->cap : 64;
        struct hx_prof_ent *e = hx__realloc(pf->e, (size_t)cap * sizeof *e);
        if (!e) return;
        pf->e = e, pf->cap = cap;
    }
    pf->e[pf->n++] = (struct hx_prof_ent){
        (int16_t)d->kind, (int16_t)d->cls, (int16_t)d->wtype, d->n_rows, d->n_in, d->n_out, us};
}

static uint64_t hx__fnv(const char *str)
{
    uint64_t h = 1469598103934665603ull;
    for (; *str; str++) h = (h ^ (unsigned char)*str) * 1099511628211ull;
    return h;
}

/* The cache file of a device's profile: keyed by backend, device, driver, engine version and
 * threads. "" when caching is off (HX_PROFILE_DIR=off) or no home exists. */
static void hx__prof_path(struct hx_sched *s, int d)
{
    struct hx_sdev *sd = &s->dev[d];
    const char *dir = getenv("HX_PROFILE_DIR"), *base = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    char path[512] = "", key[768], id[64];
    if (dir && (!*dir || !strcmp(dir, "off"))) return;
    if (dir) {
        snprintf(path, sizeof path, "%s", dir);
    } else if (base && *base) {
        mkdir(base, 0755);
        snprintf(path, sizeof path, "%s/hx", base);
    } else if (home && *home) {
        snprintf(key, sizeof key, "%s/.cache", home);
        mkdir(key, 0755);
        snprintf(path, sizeof path, "%s/.cache/hx", home);
    }
    if (!path[0] || (mkdir(path, 0755) != 0 && errno != EEXIST)) return;
    snprintf(key, sizeof key, "%s|%s|%s|hx %s|abi %d|threads %d|rows %lld", sd->dev->ops->name,
             sd->dev->info.name, sd->dev->info.description, hx_version(), HX_BACKEND_ABI_VERSION,
             s->n_threads, (long long)s->n_prof_rows);
    snprintf(id, sizeof id, "%s", sd->dev->id);
    for (char *c = id; *c; c++)
        if (*c == ':' || *c == '/') *c = '-';
    snprintf(sd->prof.path, sizeof sd->prof.path, "%s/profile-%s-%016llx.txt", path, id,
             (unsigned long long)hx__fnv(key));
}

static bool hx__prof_parse(struct hx_prof *pf, char *line)
{
    char kind[32], cls[32], wt[32];
    long long rows, n_in, n_out;
    double us, a, b;
    if (sscanf(line, "xfer %lf %lf", &a, &b) == 2)
        return pf->xfer_lat_us = a, pf->xfer_us_per_byte = b, pf->have_xfer = true;
    if (sscanf(line, "launch %lf", &a) == 1) return pf->launch_us = a, true;
    if (sscanf(line, "op %31s %31s %31s %lld %lld %lld %lf", kind, cls, wt, &rows, &n_in, &n_out,
               &us) != 7)
        return false;
    struct hx_op_desc d = {.n_rows = rows, .n_in = n_in, .n_out = n_out};
    int k = 0;
    while (k < HX_OP_KIND_COUNT && strcmp(hx_op_kind_name((enum hx_op_kind)k), kind)) k++;
    if (k == HX_OP_KIND_COUNT || hx_op_class_from_name(cls, &d.cls) ||
        hx_dtype_from_name(wt, &d.wtype))
        return false;
    d.kind = (enum hx_op_kind)k;
    hx__prof_add(pf, &d, us);
    return true;
}

static void hx__prof_load(struct hx_prof *pf)
{
    FILE *f = pf->path[0] ? fopen(pf->path, "r") : NULL;
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && !hx__prof_parse(pf, line))
            HX_LOG_DEBUG("auto: %s: ignoring line '%s'", pf->path, line);
    fclose(f);
    pf->loaded = pf->n > 0;
}

static void hx__prof_save(const struct hx_sdev *sd)
{
    const struct hx_prof *pf = &sd->prof;
    FILE *f = pf->path[0] ? fopen(pf->path, "w") : NULL;
    if (!f) {
        if (pf->path[0]) HX_LOG_WARN("auto: cannot write the profile cache %s", pf->path);
        return;
    }
    char line[256];
    snprintf(line, sizeof line,
             "# hx cost profile of %s (%s): microseconds per op, launch included\n", sd->dev->id,
             sd->dev->info.name);
    fputs(line, f);
    snprintf(line, sizeof line, "launch %.3f\nxfer %.3f %.6g\n", pf->launch_us, pf->xfer_lat_us,
             pf->xfer_us_per_byte);
    fputs(line, f);
    for (int64_t i = 0; i < pf->n; i++) {
        const struct hx_prof_ent *e = &pf->e[i];
        snprintf(line, sizeof line, "op %s %s %s %lld %lld %lld %.3f\n",
                 hx_op_kind_name((enum hx_op_kind)e->kind),
                 hx_op_class_name((enum hx_op_class)e->cls), hx_dtype_name((enum hx_dtype)e->wtype),
                 (long long)e->rows, (long long)e->n_in, (long long)e->n_out, e->us);
        fputs(line, f);
    }
    fclose(f);
}

/* Zero every activation slot of d, so timings never see garbage (NaN, denormals). */
static int hx__prof_zero(struct hx_sched *s, struct hx_sdev *sd)
{
    int64_t width[HX_SLOT_COUNT];
    hx__graph_slot_widths(s->model, width);
    size_t most = 0;
    for (int i = 0; i < HX_SLOT_COUNT; i++)
        most = HX_MAX(most, (size_t)s->slot_cap[i] * (size_t)width[i] * sizeof(float));
    void *zero = hx__calloc(1, most);
    int st = zero ? HX_OK : HX_E_NOMEM;
    for (int i = 0; i < HX_SLOT_COUNT && st == HX_OK; i++) {
        struct hx_buffer *b = NULL;
        st = hx__slot_buf(s, sd, i, &b);
        if (st == HX_OK) st = hx__dev_buffer_write(b, 0, zero, b->nbytes);
    }
    hx__free(zero);
    return st;
}

/* The least of several timed runs after a warm-up: at least 3 and up to 20, until 20 ms have
 * been spent (one for an op slower than 100 ms). The minimum, because on a shared machine a
 * run is only ever slowed down by others. */
static double hx__time_split(struct hx_device *dev, const struct hx_split *sp, int *st)
{
    double best = INFINITY, spent = 0;
    for (int rep = 0; rep < 21 && *st == HX_OK; rep++) {
        double t0 = hx__time_us();
        *st = hx__run_sync(dev, sp);
        double t = hx__time_us() - t0;
        if (rep == 0 && t > 100e3) rep = 19; /* slow op: one timed run is enough */
        if (rep == 0) continue;
        best = HX_MIN(best, t), spent += t;
        if (rep >= 3 && spent > 20e3) break;
    }
    return best;
}

/* Measure every node of g whose shape d has no entry for yet. */
static int hx__prof_graph(struct hx_sched *s, int d, const struct hx_graph *g)
{
    struct hx_sdev *sd = &s->dev[d];
    int32_t *meta = hx__calloc((size_t)g->n_rows * 3, sizeof *meta);
    if (!meta) return HX_E_NOMEM;
    int32_t *tok = meta, *pos = meta + g->n_rows, *seq = meta + 2 * g->n_rows;
    for (int64_t r = 0; r < g->n_rows; r++)
        pos[r] = (int32_t)(g->n_rows > 1 ? r % s->n_ctx : HX_MIN(s->n_prof_rows, s->n_ctx - 1));
    int st = HX_OK;
    for (int64_t k = 0; k < g->n_nodes && st == HX_OK; k++) {
        const struct hx_node *nd = &g->nodes[k];
        if (!hx__dev_supports(sd->dev, &nd->desc) ||
            hx__prof_find(&sd->prof, &nd->desc, true, true))
            continue;
        if (!sd->prof.n_measured) st = hx__prof_zero(s, sd);
        struct hx_op op;
        if (st == HX_OK) st = hx__build_op(s, g, sd, nd, &op);
        struct hx_split sp = {.struct_size = sizeof sp,
                              .ops = &op,
                              .n_ops = 1,
                              .n_rows = g->n_rows,
                              .tokens = tok,
                              .pos = pos,
                              .seq = seq};
        double us = st == HX_OK ? hx__time_split(sd->dev, &sp, &st) : 0;
        if (st == HX_OK) hx__prof_add(&sd->prof, &nd->desc, us), sd->prof.n_measured++;
    }
    hx__free(meta);
    return st;
}

/* Latency and per-byte cost of moving activations between d and the host. */
static int hx__prof_xfer(struct hx_sched *s, int d)
{
    struct hx_prof *pf = &s->dev[d].prof;
    struct hx_buffer *a = NULL, *b = NULL;
    size_t big = 1u << 20, small = 4096;
    int st = hx__dev_buffer_alloc(s->dev[s->host].dev, big, &a);
    if (st == HX_OK) st = hx__dev_buffer_alloc(s->dev[d].dev, big, &b);
    double t_small = INFINITY, t_big = INFINITY;
    for (int rep = 0; rep < 3 && st == HX_OK; rep++) {
        double t0 = hx__time_us();
        st = hx__dev_copy(b, 0, a, 0, small);
        if (st == HX_OK) st = hx__dev_copy(a, 0, b, 0, small);
        double t1 = hx__time_us();
        if (st == HX_OK) st = hx__dev_copy(b, 0, a, 0, big);
        if (st == HX_OK) st = hx__dev_copy(a, 0, b, 0, big);
        t_small = HX_MIN(t_small, (t1 - t0) / 2), t_big = HX_MIN(t_big, (hx__time_us() - t1) / 2);
    }
    hx__dev_buffer_free(a);
    hx__dev_buffer_free(b);
    if (st) return st;
    pf->xfer_lat_us = t_small;
    pf->xfer_us_per_byte = HX_MAX(t_big - t_small, 0.0) / (double)(big - small);
    pf->have_xfer = true;
    return HX_OK;
}

/* Load d's profile from the cache and measure what it lacks for graphs g[0..1]. */
static int hx__prof_device(struct hx_sched *s, int d, const struct hx_graph *g)
{
    struct hx_sdev *sd = &s->dev[d];
    const char *again = getenv("HX_AUTO_PROFILE");
    hx__prof_path(s, d);
    if (!(again && !strcmp(again, "refresh"))) hx__prof_load(&sd->prof);
    double t0 = hx__time_us();
    int64_t before = sd->prof.n;
    int st = HX_OK;
    const char *mode = getenv("HX_AUTO_COST");
    bool model = mode && !strcmp(mode, "model") && sd->dev->ops->estimate_cost;
    for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK && !model; ph++)
        st = hx__prof_graph(s, d, &g[ph]);
    if (st == HX_OK && !sd->prof.have_xfer && d != s->host) st = hx__prof_xfer(s, d);
    if (st)
        return hx__set_error(st, "auto: measuring %s failed: %s", sd->dev->id, sd->dev->last_error);
    double launch = INFINITY;
    for (int64_t i = 0; i < sd->prof.n; i++) launch = HX_MIN(launch, sd->prof.e[i].us);
    sd->prof.launch_us = isfinite(launch) ? launch : 0;
    sd->prof.measure_ms = (hx__time_us() - t0) / 1e3;
    if (sd->prof.n > before) hx__prof_save(sd);
    return HX_OK;
}

/* ---- auto: choice ------------------------------------------------------------------------------ */

/* Candidate devices: cpu, the policy's devices, or (none named) every device of the other
 * backends present, simulators excepted (their timings are not hardware's); ref is the oracle,
 * never a candidate unless named. */
static int hx__auto_devices(struct hx_sched *s, const struct hx_device_config *cfg, int *cand)
{
    int n = 0;
    cand[n++] = s->host;
    for (int i = 0; i < s->policy.n_devs; i++)
        if (s->pol[i] != s->host) cand[n++] = s->pol[i];
    if (s->policy.n_devs) return n;
    for (int i = 0; i < hx__registry_count() && n < HX_MAX_DEVICES; i++) {
        const struct hx_backend_entry *e = hx__registry_get(i);
        int count = 0;
        char why[64];
        if (!strcmp(e->ops->name, "cpu") || !strcmp(e->ops->name, "ref")) continue;
        if (e->probe_status != HX_OK || e->ops->device_count(&count, why, sizeof why) != HX_OK)
            continue;
        for (int k = 0; k < count && n < HX_MAX_DEVICES; k++) {
            struct hx_device_info info = {.struct_size = sizeof info};
            char spec[80];
            int idx;
            if (e->ops->device_info(k, &info) != HX_OK || info.simulated) continue;
            snprintf(spec, sizeof spec, "%s:%d", e->ops->name, k);
            if (hx__open_one(s, spec, cfg, &idx) == HX_OK)
                cand[n++] = idx;
            else
                HX_LOG_WARN("auto: %s is not usable: %s", spec, hx_last_error());
        }
    }
    return n;
}

static void hx__add_rule(struct hx_sched *s, struct hx_rule *rules, int *n, const struct hx_rule *r)
{
    if (*n >= HX_MAX_RULES) return;
    rules[*n] = *r;
    hx__rule_text(s, &rules[*n]);
    (*n)++;
}

/* Per class, the candidate with the least summed cost for that class's nodes. */
static void hx__auto_op_map(struct hx_sched *s, const struct hx_graph *g, const int *cand,
                            int n_cand, struct hx_rule *r)
{
    hx__rule_init(r, HX_POLICY_OP_MAP);
    r->n_dev = n_cand;
    memcpy(r->dev, cand, (size_t)n_cand * sizeof *cand);
    for (int c = 0; c < HX_CLASS_COUNT; c++) {
        double best = INFINITY;
        for (int u = 0; u < n_cand; u++) {
            double t = 0;
            for (int64_t k = 0; k < g->n_nodes && isfinite(t); k++) {
                const struct hx_node *nd = &g->nodes[k];
                if ((int)nd->desc.cls != c) continue;
                double us = hx__dev_supports(s->dev[cand[u]].dev, &nd->desc)
                                ? hx__node_us(s, cand[u], nd)
                                : -1;
                t = us >= 0 ? t + us : INFINITY;
            }
            if (t < best) best = t, r->class_dev[c] = u;
        }
    }
}

/* Tensor-split shares proportional to each candidate's matmul throughput. */
static bool hx__auto_tensor_split(struct hx_sched *s, const struct hx_graph *g, const int *cand,
                                  int n_cand, struct hx_rule *r)
{
    double inv[HX_MAX_DEVICES], sum = 0;
    hx__rule_init(r, HX_POLICY_TENSOR_SPLIT);
    for (int u = 0; u < n_cand; u++) {
        double t = 0;
        for (int64_t k = 0; k < g->n_nodes; k++) {
            const struct hx_node *nd = &g->nodes[k];
            if (nd->desc.kind != HX_OP_MATMUL) continue;
            double us =
                hx__dev_supports(s->dev[cand[u]].dev, &nd->desc) ? hx__node_us(s, cand[u], nd) : -1;
            t = us >= 0 && isfinite(t) ? t + HX_MAX(us - s->dev[cand[u]].prof.launch_us, 0.01)
                                       : INFINITY;
        }
        inv[u] = isfinite(t) && t > 0 ? 1.0 / t : 0;
        sum += inv[u];
    }
    for (int u = 0; u < n_cand && sum > 0; u++)
        if (inv[u] / sum >= 0.05) r->dev[r->n_dev] = cand[u], r->ratio[r->n_dev++] = inv[u];
    double tot = 0;
    for (int i = 0; i < r->n_dev; i++) tot += r->ratio[i];
    for (int i = 0; i < r->n_dev; i++) r->ratio[i] = round(100 * r->ratio[i] / tot) / 100;
    return r->n_dev >= 2;
}

static int hx__auto_candidates(struct hx_sched *s, const struct hx_graph *g, const int *cand,
                               int n_cand, struct hx_rule *rules)
{
    int n = 0;
    struct hx_rule r;
    for (int u = 0; u < n_cand; u++) {
        hx__rule_init(&r, HX_POLICY_SINGLE);
        r.dev[0] = cand[u], r.n_dev = 1;
        hx__add_rule(s, rules, &n, &r);
        if (cand[u] == s->host) continue;
        r.kind = HX_POLICY_GEMM_OFFLOAD;
        hx__add_rule(s, rules, &n, &r);
    }
    if (n_cand < 2) return n;
    hx__auto_op_map(s, g, cand, n_cand, &r);
    bool differs = false;
    for (int c = 1; c < HX_CLASS_COUNT; c++) differs |= r.class_dev[c] != r.class_dev[0];
    if (differs) hx__add_rule(s, rules, &n, &r); /* else it is one of the singles */
    if (hx__auto_tensor_split(s, g, cand, n_cand, &r) && hx__ts_build(s, &r) == HX_OK)
        hx__add_rule(s, rules, &n, &r);
    return n;
}

static void hx__auto_pick(struct hx_sched *s, enum hx_phase ph, const struct hx_graph *g,
                          struct hx_rule *rules, int n)
{
    double us[HX_MAX_RULES] = {0};
    int best = 0, single = 0;
    for (int i = 0; i < n; i++) {
        if (hx__simulate(s, g, &rules[i], NULL, true, &us[i], NULL)) us[i] = INFINITY;
        if (us[i] < us[best]) best = i;
        if (rules[i].kind == HX_POLICY_SINGLE && us[i] < us[single]) single = i;
    }
    /* A plan over several devices must beat the best single device by a margin worth its
     * transfers and its exposure to more devices; the predictions carry noise. */
    if (us[best] > (1.0 - HX_AUTO_MARGIN) * us[single]) best = single;
    struct hx_strbuf *sb = &s->why[ph];
    hx__sb_printf(sb, "  auto (%s at %lld rows): chose %s, predicted %.1f us%s\n",
                  ph == HX_PHASE_PREFILL ? "prefill" : "decode", (long long)g->n_rows,
                  rules[best].text, us[best],
                  best == single && n > 1 ? " (multi-device plans must be predicted 5% faster)"
                                          : "");
    for (int i = 0; i < n; i++)
        if (i != best)
            hx__sb_printf(sb, "    rejected %-44s predicted %.1f us (%+.1f%%)\n", rules[i].text,
                          us[i], 100.0 * (us[i] - us[best]) / HX_MAX(us[best], 1e-9));
    HX_LOG_INFO("auto: %s: %s, predicted %.1f us", ph == HX_PHASE_PREFILL ? "prefill" : "decode",
                rules[best].text, us[best]);
    s->rule[ph] = rules[best];
    s->pred_us[ph] = us[best];
    for (int i = 0; i < n; i++)
        if (i != best) hx__ts_free(rules[i].ts);
}

static void hx__auto_prof_text(struct hx_sched *s, const int *cand, int n_cand)
{
    hx__sb_printf(&s->prof_text, "  auto profile:");
    for (int u = 0; u < n_cand; u++) {
        const struct hx_sdev *sd = &s->dev[cand[u]];
        hx__sb_printf(
            &s->prof_text,
            "%s %s: %lld shapes (%lld measured now in %.0f ms), launch %.1f us, transfer %.1f us + %.3f us/KiB%s%s",
            u ? ";" : "", sd->dev->id, (long long)sd->prof.n, (long long)sd->prof.n_measured,
            sd->prof.measure_ms, sd->prof.launch_us, sd->prof.xfer_lat_us,
            sd->prof.xfer_us_per_byte * 1024, sd->prof.path[0] ? ", cache " : "", sd->prof.path);
    }
    hx__sb_printf(&s->prof_text, "; worker hand-off %.1f us\n", s->handoff_us);
}

/* What handing an (empty) part to a worker thread and waiting for it costs. */
static void hx__measure_handoff(struct hx_sched *s, int d)
{
    struct hx_worker *w = hx__worker_get(&s->dev[d]);
    double best = INFINITY;
    for (int rep = 0; w && rep < 20; rep++) {
        struct hx_job j = {.d = d, .dev = s->dev[d].dev, .sp = {.struct_size = sizeof j.sp}};
        double t0 = hx__time_us();
        hx__worker_submit(w, &j);
        hx__worker_wait(w);
        best = HX_MIN(best, hx__time_us() - t0);
    }
    s->handoff_us = isfinite(best) ? best : 0;
}

static int hx__auto_choose(struct hx_sched *s, const struct hx_device_config *cfg)
{
    int cand[HX_MAX_DEVICES], n_cand = hx__auto_devices(s, cfg, cand), st = HX_OK;
    struct hx_graph g[HX_PHASE_COUNT] = {{0}};
    st = hx__graph_build(&g[0], s->model, s->n_prof_rows, s->n_prof_rows - 1, s->n_ctx, s->n_seq);
    if (st == HX_OK) st = hx__graph_build(&g[1], s->model, 1, 0, s->n_ctx, s->n_seq);
    for (int u = 0; u < n_cand && st == HX_OK; u++) {
        if ((st = hx__prof_device(s, cand[u], g)) == HX_OK || cand[u] == s->host) continue;
        /* A device that fails while being measured is no candidate (and no longer trusted). */
        HX_LOG_WARN("%s; dropping %s from auto's candidates", hx_last_error(), hx__id(s, cand[u]));
        s->dev[cand[u]].dev->healthy = false;
        memmove(cand + u, cand + u + 1, (size_t)(n_cand - u - 1) * sizeof *cand);
        n_cand--, u--, st = HX_OK;
    }
    for (int d = 0; d < s->n_dev; d++) hx__wmap_release(&s->dev[d]); /* re-prepared for the plan */
    if (st == HX_OK && n_cand > 1) hx__measure_handoff(s, cand[1]);
    struct hx_rule *rules = st == HX_OK ? hx__calloc(HX_MAX_RULES, sizeof *rules) : NULL;
    if (st == HX_OK && !rules) st = HX_E_NOMEM;
    s->have_costs = st == HX_OK;
    for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++) {
        int n = hx__auto_candidates(s, &g[ph], cand, n_cand, rules);
        hx__auto_pick(s, (enum hx_phase)ph, &g[ph], rules, n);
    }
    if (st == HX_OK) hx__auto_prof_text(s, cand, n_cand);
    hx__free(rules);
    hx__graph_free(&g[0]);
    hx__graph_free(&g[1]);
    return st;
}

/* ---- lifecycle ------------------------------------------------------------------------------------- */

/* Prepare every weight the plan of phase ph places on each device, at load. */
static int hx__prepare_for(struct hx_sched *s, const struct hx_graph *g0, enum hx_phase ph,
                           uint32_t *used)
{
    const struct hx_graph *g = hx__expand(s, g0, &s->rule[ph]);
    if (!g) return HX_E_NOMEM;
    int st = hx__place(s, g, &s->rule[ph]);
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes; i++) {
        struct hx_sdev *sd = &s->dev[s->assign[i]];
        void *h;
        *used |= 1u << s->assign[i];
        st = hx__weight_handle(sd, g->nodes[i].weight, &h);
        if (st == HX_OK) st = hx__weight_handle(sd, g->nodes[i].aux, &h);
        if (st == HX_OK && g->nodes[i].desc.kind == HX_OP_ATTN)
            st = hx__kv_bufs(s, sd, g->nodes[i].desc.layer);
    }
    return st;
}

static int hx__prepare_plans(struct hx_sched *s)
{
    struct hx_graph g = {0};
    uint32_t used = 0;
    int st = hx__graph_build(&g, s->model, s->n_batch, s->n_batch - 1, s->n_ctx, s->n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g, HX_PHASE_PREFILL, &used);
    if (st == HX_OK) st = hx__graph_build(&g, s->model, 1, 0, s->n_ctx, s->n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g, HX_PHASE_DECODE, &used);
    hx__graph_free(&g);
    /* Devices auto measured but no plan uses: give their memory back (fallback re-allocates). */
    for (int d = 0; st == HX_OK && d < s->n_dev; d++)
        if (!(used & (1u << d)) && d != s->host)
            hx__sdev_free_mem(s, &s->dev[d]), hx__wmap_release(&s->dev[d]);
    return st;
}

static int hx__sched_rules(struct hx_sched *s, const struct hx_device_config *cfg)
{
    if (s->policy.kind == HX_POLICY_AUTO) return hx__auto_choose(s, cfg);
    int st = HX_OK;
    for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++)
        st = hx__rule_from_policy(s, (enum hx_phase)ph, &s->rule[ph]);
    return st;
}

int hx__sched_new(const struct hx_sched_params *p, struct hx_sched **out)
{
    *out = NULL;
    struct hx_sched *s = hx__calloc(1, sizeof *s);
    if (!s) return HX_E_NOMEM;
    s->model = p->model;
    s->policy = *p->policy;
    s->n_ctx = p->n_ctx, s->n_batch = p->n_batch, s->n_logits = p->n_logits, s->n_seq = p->n_seq;
    s->n_prof_rows = HX_MAX(HX_MIN(HX_MIN(p->n_batch, HX_PROF_ROWS), p->n_ctx), 2);
    s->n_threads = p->devcfg.n_threads;
    for (int i = 0; i < HX_SLOT_COUNT; i++) s->slot_cap[i] = HX_MAX(p->n_batch, s->n_prof_rows);
    s->slot_cap[HX_SLOT_XL] = s->slot_cap[HX_SLOT_LOGITS] = p->n_logits;
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) hx__sb_init(&s->why[ph]);
    hx__sb_init(&s->prof_text);
    const char *to = getenv("HX_SPLIT_TIMEOUT_MS");
    s->split_timeout_us = to ? strtod(to, NULL) * 1e3 : 0;
    s->kv_valid = hx__calloc((size_t)p->model->hp.n_layer, sizeof *s->kv_valid);
    int st = s->kv_valid ? hx__open_devices(s, &p->devcfg) : HX_E_NOMEM;
    if (st == HX_OK && s->policy.verify) st = hx__open_verify(s, &p->devcfg);
    if (st == HX_OK) st = hx__sched_rules(s, &p->devcfg);
    if (st == HX_OK) st = hx__prepare_plans(s);
    if (st) {
        hx__sched_free(s);
        return st;
    }
    *out = s;
    return HX_OK;
}

void hx__sdev_fini(struct hx_sched *s, struct hx_sdev *sd)
{
    hx__worker_free(sd->worker);
    if (!sd->dev) return;
    hx__dev_synchronize(sd->dev);
    hx__sdev_free_mem(s, sd);
    hx__wmap_release(sd);
    hx__free(sd->prof.e);
    hx__device_close(sd->dev);
}

void hx__sched_free(struct hx_sched *s)
{
    if (!s) return;
    for (int d = 0; d < s->n_dev; d++) hx__sdev_fini(s, &s->dev[d]);
    hx__sdev_fini(s, &s->v.sd);
    hx__verify_free(s);
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) {
        hx__ts_free(s->rule[ph].ts);
        hx__sb_free(&s->why[ph]);
        hx__free(s->v.ops[ph]);
    }
    hx__sb_free(&s->prof_text);
    hx__free(s->v.a);
    hx__free(s->v.b);
    for (int64_t i = 0; i < s->v.n_vw; i++) hx__free(s->v.vw[i].e), hx__free(s->v.vw[i].dw);
    hx__free(s->v.vw);
    hx__free(s->v.x);
    hx__free(s->v.model);
    hx__graph_free(&s->xg);
    hx__free(s->kv_valid);
    hx__free(s->assign);
    hx__free(s->reason);
    hx__free(s->ops);
    hx__free(s);
}

const struct hx_sched_stats *hx__sched_stats(const struct hx_sched *s) { return &s->stats; }

const char *hx__sched_devices_used(const struct hx_sched *s) { return s->used; }

const char *hx__sched_rule_text(const struct hx_sched *s, enum hx_phase phase)
{
    return (unsigned)phase < HX_PHASE_COUNT ? s->rule[phase].text : "";
}

