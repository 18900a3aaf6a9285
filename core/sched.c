/*
 * sched.c — the scheduler: devices, placement, coherence, execution, recovery.
 *
 * Placement: the policy names a preferred device for every node; the node goes to the first
 * healthy device of [preferred, --fallback chain..., cpu] whose supports() accepts it (every
 * off-policy placement is counted and shown by `engine plan`). Consecutive nodes on one device
 * form a split, run with one hx__dev_run.
 *
 * Coherence: each slot and each layer's KV cache has a valid-on bitmask over the devices.
 * Before a split, every slot its nodes read that its device lacks is copied from a device
 * that has it (the bytes are counted); a node's write makes its device the only valid
 * holder. KV caches move the same way (phase-split hands the cache over). With a fallback
 * chain, KV rows written on a non-host device are mirrored to the host, so when a device
 * fails the whole batch is re-planned without it and re-run from the embedding: nothing is
 * zero-filled and the cache stays consistent (positions of the batch are simply rewritten).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "scheduler.h"

enum hx_reason { HX_R_POLICY, HX_R_UNSUPPORTED, HX_R_UNHEALTHY };

struct hx_sdev {
    struct hx_device *dev;
    struct hx_buffer *slot[HX_SLOT_COUNT];
    void **wh;              /* prepared weight handles by weight id */
    bool *wh_ready;
    struct hx_buffer **kv_k, **kv_v;   /* per layer */
    bool used;
};

struct hx_sched {
    const struct hx_model *model;
    struct hx_policy policy;
    int64_t n_ctx, n_batch, n_logits;
    int32_t n_seq;
    int64_t n_weights;
    struct hx_sdev dev[HX_MAX_DEVICES];
    int n_dev;
    int host;                          /* the cpu device */
    int pol[HX_MAX_DEVICES];           /* policy device i -> dev index */
    int fb[HX_MAX_DEVICES];            /* fallback chain -> dev index */
    int n_fb;
    uint32_t slot_valid[HX_SLOT_COUNT];
    uint32_t *kv_valid;                /* per layer */
    int64_t slot_cap[HX_SLOT_COUNT];   /* rows */
    int32_t *assign;                   /* per node: dev index */
    uint8_t *reason;
    int32_t *want;                     /* per node: preferred dev index */
    int64_t assign_cap;
    struct hx_op *ops;
    int64_t ops_cap;
    struct hx_sched_stats stats;
    char used[256];
    const int32_t *kv_len;             /* during a run */
};

/* ---- devices ---------------------------------------------------------------------------- */

static int hx__find_dev(struct hx_sched *s, const char *id)
{
    for (int i = 0; i < s->n_dev; i++)
        if (!strcasecmp(s->dev[i].dev->id, id) || !strcasecmp(s->dev[i].dev->ops->name, id)) return i;
    return -1;
}

static int hx__open_one(struct hx_sched *s, const char *spec, const struct hx_device_config *cfg,
                        int *idx)
{
    char real[64];
    snprintf(real, sizeof real, "%s", spec);
    if (!strcasecmp(spec, "gpu")) {
        const char *g = hx__resolve_gpu();
        if (!g) return hx__set_error(HX_E_UNAVAILABLE, "policy names 'gpu' but no GPU backend is usable here");
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
        if (hx__open_one(s, s->policy.fallback[i], cfg, &idx) == HX_OK) s->fb[s->n_fb++] = idx;
        else HX_LOG_WARN("sched: fallback device '%s' unavailable: %s", s->policy.fallback[i], hx_last_error());
    }
    for (int i = 0; i < s->policy.n_devs; i++)
        if ((st = hx__open_policy_dev(s, s->policy.devs[i], cfg, &s->pol[i]))) return st;
    return HX_OK;
}

/* ---- placement ---------------------------------------------------------------------------- */

static int hx__preferred(const struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd)
{
    const struct hx_policy *p = &s->policy;
    int64_t n_layer = s->model->hp.n_layer;
    int64_t layer = nd->desc.layer < 0 ? (nd->desc.cls == HX_CLASS_EMBED ? 0 : n_layer - 1)
                                       : nd->desc.layer;
    switch (p->kind) {
    case HX_POLICY_GEMM_OFFLOAD:
        return nd->desc.kind == HX_OP_MATMUL ? s->pol[0] : s->host;
    case HX_POLICY_OP_MAP:
        return s->pol[p->class_dev[nd->desc.cls] >= 0 ? p->class_dev[nd->desc.cls] : 0];
    case HX_POLICY_LAYER_SPLIT: {
        if (p->alternate) return s->pol[layer % p->n_devs];
        double acc = 0;
        for (int i = 0; i < p->n_devs; i++) {
            acc += p->ratio[i];
            if ((double)layer < acc * (double)n_layer - 1e-9) return s->pol[i];
        }
        return s->pol[p->n_devs - 1];
    }
    case HX_POLICY_PHASE_SPLIT:
        return s->pol[g->n_rows > 1 ? 0 : 1];
    default:
        return s->pol[0];
    }
}

static bool hx__can_run(struct hx_sched *s, int d, const struct hx_node *nd)
{
    struct hx_device *dev = s->dev[d].dev;
    return dev->healthy && hx__dev_supports(dev, &nd->desc);
}

static int hx__place(struct hx_sched *s, const struct hx_graph *g)
{
    if (g->n_nodes > s->assign_cap) {
        int64_t cap = g->n_nodes;
        int32_t *a = hx__realloc(s->assign, (size_t)cap * sizeof *a);
        if (a) s->assign = a;
        int32_t *w = hx__realloc(s->want, (size_t)cap * sizeof *w);
        if (w) s->want = w;
        uint8_t *r = hx__realloc(s->reason, (size_t)cap);
        if (r) s->reason = r;
        if (!a || !w || !r) return HX_E_NOMEM;
        s->assign_cap = cap;
    }
    s->stats.n_fallback_ops = 0;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        const struct hx_node *nd = &g->nodes[i];
        int want = hx__preferred(s, g, nd), got = -1;
        s->want[i] = want;
        uint8_t why = HX_R_POLICY;
        if (hx__can_run(s, want, nd)) got = want;
        else why = s->dev[want].dev->healthy ? HX_R_UNSUPPORTED : HX_R_UNHEALTHY;
        for (int k = 0; got < 0 && k < s->n_fb; k++)
            if (hx__can_run(s, s->fb[k], nd)) got = s->fb[k];
        if (got < 0 && s->dev[s->host].dev->healthy) got = s->host;
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

static int64_t hx__slot_rows(const struct hx_graph *g, int slot)
{
    return (slot == HX_SLOT_XL || slot == HX_SLOT_LOGITS) ? g->n_logits : g->n_rows;
}

static int hx__slot_buf(struct hx_sched *s, int d, int slot, struct hx_buffer **out)
{
    struct hx_sdev *sd = &s->dev[d];
    if (!sd->slot[slot]) {
        int64_t width[HX_SLOT_COUNT];
        hx__graph_slot_widths(s->model, width);
        size_t nb = (size_t)s->slot_cap[slot] * (size_t)width[slot] * sizeof(float);
        int st = hx__dev_buffer_alloc(sd->dev, nb, &sd->slot[slot]);
        if (st)
            return hx_device_set_error(sd->dev, st, "cannot allocate %zu bytes for activation slot '%s'",
                                       nb, hx__slot_name((enum hx_slot)slot));
    }
    *out = sd->slot[slot];
    return HX_OK;
}

static size_t hx__kv_bytes(const struct hx_sched *s)
{
    return (size_t)s->n_seq * (size_t)s->n_ctx * (size_t)s->model->hp.n_kv * sizeof(float);
}

static int hx__kv_bufs(struct hx_sched *s, int d, int64_t layer)
{
    struct hx_sdev *sd = &s->dev[d];
    if (!sd->kv_k) {
        sd->kv_k = hx__calloc((size_t)s->model->hp.n_layer, sizeof *sd->kv_k);
        sd->kv_v = hx__calloc((size_t)s->model->hp.n_layer, sizeof *sd->kv_v);
        if (!sd->kv_k || !sd->kv_v) return HX_E_NOMEM;
    }
    if (sd->kv_k[layer]) return HX_OK;
    size_t nb = hx__kv_bytes(s);
    int st = hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_k[layer]);
    if (st == HX_OK) st = hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_v[layer]);
    if (st)
        return hx_device_set_error(sd->dev, st, "cannot allocate the KV cache of layer %lld (2 x %zu bytes)",
                                   (long long)layer, nb);
    return HX_OK;
}

static int hx__weight_handle(struct hx_sched *s, int d, int32_t id, void **out)
{
    struct hx_sdev *sd = &s->dev[d];
    *out = NULL;
    if (id < 0) return HX_OK;
    if (!sd->wh) {
        sd->wh = hx__calloc((size_t)s->n_weights, sizeof *sd->wh);
        sd->wh_ready = hx__calloc((size_t)s->n_weights, sizeof *sd->wh_ready);
        if (!sd->wh || !sd->wh_ready) return HX_E_NOMEM;
    }
    if (!sd->wh_ready[id]) {
        const struct hx_weight *w = hx__model_weight(s->model, id);
        int st = hx__dev_weight_prepare(sd->dev, w, &sd->wh[id]);
        if (st) return st;
        sd->wh_ready[id] = true;
    }
    *out = sd->wh[id];
    return HX_OK;
}

/* ---- coherence --------------------------------------------------------------------------------- */

struct hx_xfer_log {
    struct hx_strbuf *sb;    /* plan text, or NULL */
    bool dry;
};

static int hx__first_bit(uint32_t m)
{
    return m ? __builtin_ctz(m) : -1;
}

static int hx__ensure_slot(struct hx_sched *s, const struct hx_graph *g, int d, int slot,
                           struct hx_xfer_log *xl)
{
    if (s->slot_valid[slot] & (1u << d)) return HX_OK;
    int src = hx__first_bit(s->slot_valid[slot]);
    s->slot_valid[slot] |= 1u << d;
    if (src < 0) return HX_OK; /* never written: nothing to move */
    size_t nb = (size_t)hx__slot_rows(g, slot) * (size_t)g->slot_width[slot] * sizeof(float);
    s->stats.n_transfers++;
    s->stats.bytes_moved += nb;
    if (xl->sb)
        hx__sb_printf(xl->sb, "      transfer %-6s %s -> %s  %zu bytes\n", hx__slot_name((enum hx_slot)slot),
                      s->dev[src].dev->id, s->dev[d].dev->id, nb);
    if (xl->dry) return HX_OK;
    struct hx_buffer *from, *to;
    int st = hx__slot_buf(s, src, slot, &from);
    if (st == HX_OK) st = hx__slot_buf(s, d, slot, &to);
    return st ? st : hx__dev_copy(to, 0, from, 0, nb);
}

/* Copy the cached rows of every sequence of `layer` from device `src` to `d`. */
static int hx__copy_kv(struct hx_sched *s, int src, int d, int64_t layer, bool dry)
{
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int32_t q = 0; q < s->n_seq; q++) {
        size_t n = (size_t)s->kv_len[q] * row, off = (size_t)q * (size_t)s->n_ctx * row;
        if (!n) continue;
        s->stats.n_transfers += 2;
        s->stats.bytes_moved += 2 * n;
        if (dry) continue;
        int st = hx__dev_copy(s->dev[d].kv_k[layer], off, s->dev[src].kv_k[layer], off, n);
        if (st == HX_OK) st = hx__dev_copy(s->dev[d].kv_v[layer], off, s->dev[src].kv_v[layer], off, n);
        if (st) return st;
    }
    return HX_OK;
}

static int hx__ensure_kv(struct hx_sched *s, int d, int64_t layer, struct hx_xfer_log *xl)
{
    int st = xl->dry ? HX_OK : hx__kv_bufs(s, d, layer);
    if (st || (s->kv_valid[layer] & (1u << d))) return st;
    int src = hx__first_bit(s->kv_valid[layer]);
    s->kv_valid[layer] |= 1u << d;
    if (src < 0) return HX_OK;
    if (xl->sb)
        hx__sb_printf(xl->sb, "      transfer kv[%lld] %s -> %s (cached positions)\n", (long long)layer,
                      s->dev[src].dev->id, s->dev[d].dev->id);
    return hx__copy_kv(s, src, d, layer, xl->dry);
}

/* After attention ran on a non-host device: write this batch's K/V rows through to the host
 * copy, so a later device failure loses nothing. Consecutive rows are coalesced. */
static int hx__mirror_kv(struct hx_sched *s, const struct hx_graph *g, int d, int64_t layer,
                         const int32_t *pos, const int32_t *seq)
{
    if (d == s->host || s->n_fb == 0) return HX_OK;
    int st = hx__kv_bufs(s, s->host, layer);
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int64_t r = 0; st == HX_OK && r < g->n_rows;) {
        int64_t e = r + 1;
        while (e < g->n_rows && seq[e] == seq[r] && pos[e] == pos[e - 1] + 1) e++;
        size_t off = ((size_t)seq[r] * (size_t)s->n_ctx + (size_t)pos[r]) * row, n = (size_t)(e - r) * row;
        st = hx__dev_copy(s->dev[s->host].kv_k[layer], off, s->dev[d].kv_k[layer], off, n);
        if (st == HX_OK) st = hx__dev_copy(s->dev[s->host].kv_v[layer], off, s->dev[d].kv_v[layer], off, n);
        r = e;
    }
    if (st == HX_OK) s->kv_valid[layer] |= 1u << s->host;
    return st;
}

/* Slots a node reads: its sources, and its destination when it updates in place. */
static int hx__node_reads(const struct hx_node *nd, int *slots)
{
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (nd->src[i].slot >= 0) slots[n++] = nd->src[i].slot;
    if (nd->desc.kind == HX_OP_ROPE || nd->desc.kind == HX_OP_ADD) slots[n++] = nd->dst.slot;
    return n;
}

/* ---- execution ----------------------------------------------------------------------------------- */

static int hx__ref_to(struct hx_sched *s, const struct hx_graph *g, int d, const struct hx_node_ref *r,
                      struct hx_tensor_ref *out)
{
    memset(out, 0, sizeof *out);
    if (r->slot < 0) return HX_OK;
    int st = hx__slot_buf(s, d, r->slot, &out->buf);
    if (st) return st;
    size_t w = (size_t)g->slot_width[r->slot];
    out->offset_bytes = ((size_t)r->row * w + (size_t)r->col) * sizeof(float);
    out->n_rows = r->n_rows;
    out->n_cols = r->n_cols;
    out->row_stride_bytes = w * sizeof(float);
    return HX_OK;
}

static int hx__build_op(struct hx_sched *s, const struct hx_graph *g, int d, const struct hx_node *nd,
                        struct hx_op *op)
{
    memset(op, 0, sizeof *op);
    op->desc = nd->desc;
    int st = HX_OK;
    for (int i = 0; i < 3 && st == HX_OK; i++) st = hx__ref_to(s, g, d, &nd->src[i], &op->src[i]);
    if (st == HX_OK) st = hx__ref_to(s, g, d, &nd->dst, &op->dst);
    op->weight = nd->weight;
    op->aux = nd->aux;
    if (st == HX_OK) st = hx__weight_handle(s, d, nd->weight_id, &op->weight_handle);
    if (st == HX_OK) st = hx__weight_handle(s, d, nd->aux_id, &op->aux_handle);
    if (st == HX_OK && nd->desc.kind == HX_OP_ATTN) {
        int64_t L = nd->desc.layer;
        size_t rows = (size_t)s->n_seq * (size_t)s->n_ctx;
        size_t stride = (size_t)s->model->hp.n_kv * sizeof(float);
        op->k_cache = (struct hx_tensor_ref){s->dev[d].kv_k[L], 0, (int64_t)rows, s->model->hp.n_kv, stride};
        op->v_cache = (struct hx_tensor_ref){s->dev[d].kv_v[L], 0, (int64_t)rows, s->model->hp.n_kv, stride};
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

static const char *const hx__reason_text[] = {"policy", "fallback: preferred device does not support it",
                                              "fallback: preferred device unhealthy"};

static void hx__plan_node_line(struct hx_sched *s, const struct hx_node *nd, int64_t i, struct hx_strbuf *sb)
{
    char layer[16] = "  -";
    if (nd->desc.layer >= 0) snprintf(layer, sizeof layer, "L%-2d", nd->desc.layer);
    char shape[64] = "";
    if (nd->desc.kind == HX_OP_MATMUL || nd->desc.kind == HX_OP_EMBED)
        snprintf(shape, sizeof shape, "%s %lld->%lld", hx_dtype_name(nd->desc.wtype),
                 (long long)nd->desc.n_in, (long long)nd->desc.n_out);
    else
        snprintf(shape, sizeof shape, "%lld cols", (long long)nd->desc.n_out);
    hx__sb_printf(sb, "    [%3lld] %s %-9s %-8s %-22s %s%s%s\n", (long long)i, layer,
                  hx_op_kind_name(nd->desc.kind), hx_op_class_name(nd->desc.cls), shape,
                  s->reason[i] == HX_R_POLICY ? "" : "(", s->reason[i] == HX_R_POLICY ? "" : hx__reason_text[s->reason[i]],
                  s->reason[i] == HX_R_POLICY ? "" : ")");
}

/* Walk the plan split by split. dry: count transfers only (for `engine plan`). On a device
 * failure *failed is that device. */
static int hx__execute(struct hx_sched *s, const struct hx_graph *g, const int32_t *tokens,
                       const int32_t *pos, const int32_t *seq, bool dry, struct hx_strbuf *sb,
                       const volatile int *cancel, int *failed)
{
    struct hx_xfer_log xl = {.sb = sb, .dry = dry};
    int st = hx__ensure_ops_cap(s, g->n_nodes);
    *failed = -1;
    s->stats.n_splits = s->stats.n_transfers = 0;
    s->stats.bytes_moved = 0;
    for (int i = 0; i < s->n_dev; i++) s->dev[i].used = false;
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes;) {
        if (cancel && *cancel) return HX_E_CANCELED;
        int d = s->assign[i];
        int64_t j = i;
        while (j < g->n_nodes && s->assign[j] == d) j++;
        if (sb)
            hx__sb_printf(sb, "  split %lld on %s: %lld ops\n", (long long)s->stats.n_splits,
                          s->dev[d].dev->id, (long long)(j - i));
        s->stats.n_splits++;
        s->dev[d].used = true;
        for (int64_t k = i; st == HX_OK && k < j; k++) {
            const struct hx_node *nd = &g->nodes[k];
            int rd[4], n = hx__node_reads(nd, rd);
            for (int r = 0; r < n && st == HX_OK; r++) st = hx__ensure_slot(s, g, d, rd[r], &xl);
            if (st == HX_OK && nd->desc.kind == HX_OP_ATTN) st = hx__ensure_kv(s, d, nd->desc.layer, &xl);
            s->slot_valid[nd->dst.slot] = 1u << d;
            if (nd->desc.kind == HX_OP_ATTN) s->kv_valid[nd->desc.layer] = 1u << d;
            if (sb) hx__plan_node_line(s, nd, k, sb);
            if (st == HX_OK && !dry) st = hx__build_op(s, g, d, nd, &s->ops[k - i]);
        }
        if (st == HX_OK && !dry) {
            struct hx_split sp = {.struct_size = sizeof sp, .ops = s->ops, .n_ops = j - i,
                                  .n_rows = g->n_rows, .tokens = tokens, .pos = pos, .seq = seq};
            st = hx__dev_run(s->dev[d].dev, &sp);
            int st2 = hx__dev_synchronize(s->dev[d].dev);
            if (st == HX_OK) st = st2;
            for (int64_t k = i; st == HX_OK && k < j; k++)
                if (g->nodes[k].desc.kind == HX_OP_ATTN)
                    st = hx__mirror_kv(s, g, d, g->nodes[k].desc.layer, pos, seq);
        }
        if (st) *failed = d;
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
            off += (size_t)snprintf(s->used + off, sizeof s->used - off, "%s%s", off ? "," : "", s->dev[i].dev->id);
}

static int hx__read_logits(struct hx_sched *s, const struct hx_graph *g, float *out)
{
    if (g->n_logits <= 0 || !out) return HX_OK;
    int d = hx__first_bit(s->slot_valid[HX_SLOT_LOGITS]);
    struct hx_buffer *b = NULL;
    int st = hx__slot_buf(s, d, HX_SLOT_LOGITS, &b);
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
        s->kv_valid[L] = (s->kv_valid[L] & ~(1u << failed)) | (s->dev[s->host].kv_k && s->dev[s->host].kv_k[L] ? 1u << s->host : 0);
}

static bool hx__recoverable(int st)
{
    return st == HX_E_DEVICE || st == HX_E_TIMEOUT || st == HX_E_NOMEM || st == HX_E_UNAVAILABLE;
}

int hx__sched_run(struct hx_sched *s, const struct hx_graph *g, const int32_t *tokens,
                  const int32_t *pos, const int32_t *seq, const int32_t *kv_len,
                  float *logits_out, const volatile int *cancel)
{
    s->kv_len = kv_len;
    if (g->n_rows > s->n_batch || g->n_logits > s->n_logits)
        return hx__set_error(HX_E_INVAL, "batch of %lld rows (%lld with logits) exceeds the context's %lld (%lld)",
                             (long long)g->n_rows, (long long)g->n_logits, (long long)s->n_batch,
                             (long long)s->n_logits);
    for (int attempt = 0;; attempt++) {
        int st = hx__place(s, g), failed = -1;
        if (st == HX_OK) st = hx__execute(s, g, tokens, pos, seq, false, NULL, cancel, &failed);
        if (st == HX_OK) {
            hx__note_used(s);
            st = hx__read_logits(s, g, logits_out);
            if (st == HX_OK) return HX_OK;
            failed = hx__first_bit(s->slot_valid[HX_SLOT_LOGITS]);
        }
        if (st == HX_E_CANCELED || failed < 0 || !hx__recoverable(st) || s->n_fb == 0 ||
            failed == s->host || attempt >= s->n_dev)
            return st;
        HX_LOG_WARN("sched: %s failed (%s); marking it unhealthy and re-running the batch on the fallback chain",
                    s->dev[failed].dev->id, s->dev[failed].dev->last_error);
        hx__reset_after_failure(s, failed);
    }
}

int hx__sched_plan_text(struct hx_sched *s, const struct hx_graph *g, const char *phase,
                        struct hx_strbuf *sb)
{
    int st = hx__place(s, g);
    if (st) return st;
    uint32_t save_slots[HX_SLOT_COUNT];
    memcpy(save_slots, s->slot_valid, sizeof save_slots);
    uint32_t *save_kv = hx__malloc((size_t)s->model->hp.n_layer * sizeof *save_kv);
    if (!save_kv) return HX_E_NOMEM;
    memcpy(save_kv, s->kv_valid, (size_t)s->model->hp.n_layer * sizeof *save_kv);
    static const int32_t zero_len[1] = {0};
    if (!s->kv_len) s->kv_len = zero_len;
    struct hx_strbuf body;
    hx__sb_init(&body);
    int failed;
    st = hx__execute(s, g, NULL, NULL, NULL, true, &body, NULL, &failed);
    if (st == HX_OK) {
        hx__sb_printf(sb, "phase %s (%lld rows, %lld with logits): %lld ops, %lld splits, %lld transfers, "
                      "%zu bytes moved between devices, %lld ops off their policy device\n",
                      phase, (long long)g->n_rows, (long long)g->n_logits, (long long)g->n_nodes,
                      (long long)s->stats.n_splits, (long long)s->stats.n_transfers,
                      s->stats.bytes_moved, (long long)s->stats.n_fallback_ops);
        hx__sb_append(sb, body.data ? body.data : "", body.len);
    }
    hx__sb_free(&body);
    memcpy(s->slot_valid, save_slots, sizeof save_slots);
    memcpy(s->kv_valid, save_kv, (size_t)s->model->hp.n_layer * sizeof *save_kv);
    hx__free(save_kv);
    return st;
}

/* ---- lifecycle ------------------------------------------------------------------------------------- */

/* Prepare every weight the plans of both phases place on each device, at load. */
static int hx__prepare_for(struct hx_sched *s, const struct hx_graph *g)
{
    int st = hx__place(s, g);
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes; i++) {
        void *h;
        st = hx__weight_handle(s, s->assign[i], g->nodes[i].weight_id, &h);
        if (st == HX_OK) st = hx__weight_handle(s, s->assign[i], g->nodes[i].aux_id, &h);
        if (st == HX_OK && g->nodes[i].desc.kind == HX_OP_ATTN)
            st = hx__kv_bufs(s, s->assign[i], g->nodes[i].desc.layer);
    }
    return st;
}

static int hx__prepare_plans(struct hx_sched *s)
{
    struct hx_graph g = {0};
    int st = hx__graph_build(&g, s->model, s->n_batch, s->n_batch - 1, s->n_ctx, s->n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g);
    if (st == HX_OK) st = hx__graph_build(&g, s->model, 1, 0, s->n_ctx, s->n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g);
    hx__graph_free(&g);
    return st;
}

int hx__sched_new(const struct hx_sched_params *p, struct hx_sched **out)
{
    *out = NULL;
    if (p->policy->kind == HX_POLICY_TENSOR_SPLIT || p->policy->kind == HX_POLICY_AUTO ||
        p->policy->kind == HX_POLICY_VERIFY)
        return hx__set_error(HX_E_UNSUPPORTED, "policy '%s' is not available in this build yet",
                             hx__policy_kind_name(p->policy->kind));
    struct hx_sched *s = hx__calloc(1, sizeof *s);
    if (!s) return HX_E_NOMEM;
    s->model = p->model;
    s->policy = *p->policy;
    s->n_ctx = p->n_ctx, s->n_batch = p->n_batch, s->n_logits = p->n_logits, s->n_seq = p->n_seq;
    s->n_weights = hx__model_weight_count(p->model);
    for (int i = 0; i < HX_SLOT_COUNT; i++) s->slot_cap[i] = p->n_batch;
    s->slot_cap[HX_SLOT_XL] = s->slot_cap[HX_SLOT_LOGITS] = p->n_logits;
    s->kv_valid = hx__calloc((size_t)p->model->hp.n_layer, sizeof *s->kv_valid);
    int st = s->kv_valid ? hx__open_devices(s, &p->devcfg) : HX_E_NOMEM;
    if (st == HX_OK) st = hx__prepare_plans(s);
    if (st) {
        hx__sched_free(s);
        return st;
    }
    *out = s;
    return HX_OK;
}

void hx__sched_free(struct hx_sched *s)
{
    if (!s) return;
    for (int d = 0; d < s->n_dev; d++) {
        struct hx_sdev *sd = &s->dev[d];
        hx__dev_synchronize(sd->dev);
        for (int i = 0; i < HX_SLOT_COUNT; i++) hx__dev_buffer_free(sd->slot[i]);
        for (int64_t L = 0; sd->kv_k && L < s->model->hp.n_layer; L++) {
            hx__dev_buffer_free(sd->kv_k[L]);
            hx__dev_buffer_free(sd->kv_v[L]);
        }
        for (int64_t w = 0; sd->wh && w < s->n_weights; w++)
            if (sd->wh_ready[w]) hx__dev_weight_release(sd->dev, sd->wh[w]);
        hx__free(sd->kv_k);
        hx__free(sd->kv_v);
        hx__free(sd->wh);
        hx__free(sd->wh_ready);
        hx__device_close(sd->dev);
    }
    hx__free(s->kv_valid);
    hx__free(s->assign);
    hx__free(s->want);
    hx__free(s->reason);
    hx__free(s->ops);
    hx__free(s);
}

const struct hx_sched_stats *hx__sched_stats(const struct hx_sched *s)
{
    return &s->stats;
}

const char *hx__sched_devices_used(const struct hx_sched *s)
{
    return s->used;
}
