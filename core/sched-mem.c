/*
 * sched-mem.c — the scheduler's devices (struct hx_sdev), their memory, and its coherence.
 *
 * Devices: s->dev[] holds each device opened once, by spec ("gpu" resolved to the best GPU
 * backend; "vulkan" and "vulkan:0" are one device); index 0 is the host (cpu, always opened
 * first). Which spec is opened for which role (policy, fallback) is sched.c's business.
 *
 * Memory: per device (struct hx_sdev) one buffer per activation slot, of mem.slot_cap[slot]
 * rows, allocated on first use; per layer a K and a V cache of n_seq × n_ctx rows, allocated
 * where that layer's attention runs (or a copy of it lands); the weights prepared for the
 * device, once each, looked up by their hx_weight address (tensor-split slices included) in a
 * small open-addressing table. Every byte of these is counted per device and kind as it is
 * allocated and given back (sd->alloc; a weight by its backend's weight_bytes of the handle):
 * what sched-fit.c predicts a plan allocates, and what tests hold it to. hx__build_op binds a node to these: its slot regions, its weight
 * handles, its KV cache. verify's reference is a device like any other here.
 *
 * Coherence: each slot and each layer's KV cache has a valid-on bitmask over the devices
 * (struct hx_coh). Before a node runs on d, every slot it reads that d lacks is copied from a
 * device that has it (the bytes are counted); a node's write makes its device the only valid
 * holder. KV caches move the same way (phase-split hands the cache over). With a fallback
 * chain, KV rows written on a non-host device are mirrored to the host, so when a device
 * fails the batch can be re-planned without it and re-run from the embedding: nothing is
 * zero-filled and the cache stays consistent (positions of the batch are simply rewritten).
 * hx__coh_take_* and hx__coh_wrote state these rules once, for the run (hx__fetch_inputs,
 * called by sched-exec.c) and for the dry walk (sched-plan.c, on a copy of the bitmasks);
 * only the KV mirror here and the recovery in sched.c touch the bitmasks otherwise.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sched-impl.h"

/* ---- devices --------------------------------------------------------------------------------- */

static int hx__find_dev(struct hx_sched *s, const char *id)
{
    for (int i = 0; i < s->n_dev; i++)
        if (!strcasecmp(s->dev[i].dev->id, id) || !strcasecmp(s->dev[i].dev->ops->name, id))
            return i;
    return -1;
}

int hx__open_sdev(struct hx_sched *s, const char *spec, const struct hx_device_config *cfg,
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

/* ---- prepared weights ------------------------------------------------------------------------ */

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

int hx__weight_handle(struct hx_sdev *sd, const struct hx_weight *w, void **out)
{
    *out = NULL;
    if (!w) return HX_OK;
    if (sd->wcap) {
        size_t i = hx__wmap_pos(sd, w);
        if (sd->wmap[i].w) return *out = sd->wmap[i].h, HX_OK;
    }
    if (2 * (sd->wn + 1) > sd->wcap && hx__wmap_grow(sd)) return HX_E_NOMEM;
    void *h;
    size_t nb = 0;
    int st = hx__dev_weight_prepare(sd->dev, w, &h);
    if (st) return st;
    if ((st = hx__dev_weight_bytes(sd->dev, w, h, &nb))) {
        hx__dev_weight_release(sd->dev, h);
        return st;
    }
    size_t i = hx__wmap_pos(sd, w);
    sd->wmap[i] = (struct hx_whent){w, h, nb};
    sd->wn++;
    sd->alloc[HX_MEM_WEIGHTS] += nb;
    *out = h;
    return HX_OK;
}

void hx__wmap_release(struct hx_sdev *sd)
{
    for (size_t i = 0; i < sd->wcap; i++)
        if (sd->wmap[i].w) hx__dev_weight_release(sd->dev, sd->wmap[i].h);
    hx__free(sd->wmap);
    sd->wmap = NULL, sd->wcap = sd->wn = 0;
    sd->alloc[HX_MEM_WEIGHTS] = 0;
}

/* ---- memory ---------------------------------------------------------------------------------- */

static int64_t hx__slot_rows(const struct hx_graph *g, int slot)
{
    return (slot == HX_SLOT_XL || slot == HX_SLOT_LOGITS) ? g->n_logits : g->n_rows;
}

int hx__slot_buf(const struct hx_mem_geom *m, struct hx_sdev *sd, int slot, struct hx_buffer **out)
{
    *out = NULL;
    if (!sd->slot[slot]) {
        int64_t width[HX_SLOT_COUNT];
        hx__graph_slot_widths(m->model, width);
        size_t nb = (size_t)m->slot_cap[slot] * (size_t)width[slot] * sizeof(float);
        int st = hx__dev_buffer_alloc(sd->dev, nb, &sd->slot[slot]);
        if (st)
            return hx_device_set_error(sd->dev, st,
                                       "cannot allocate %zu bytes for activation slot '%s'", nb,
                                       hx__slot_name((enum hx_slot)slot));
        sd->alloc[HX_MEM_ACT] += sd->slot[slot]->nbytes;
    }
    *out = sd->slot[slot];
    return HX_OK;
}

static size_t hx__kv_bytes(const struct hx_mem_geom *m)
{
    return (size_t)m->n_seq * (size_t)m->n_ctx * (size_t)m->model->hp.n_kv * sizeof(float);
}

int hx__kv_bufs(const struct hx_mem_geom *m, struct hx_sdev *sd, int64_t layer)
{
    if (!sd->kv_k) {
        sd->kv_k = hx__calloc((size_t)m->model->hp.n_layer, sizeof *sd->kv_k);
        sd->kv_v = hx__calloc((size_t)m->model->hp.n_layer, sizeof *sd->kv_v);
        if (!sd->kv_k || !sd->kv_v) return HX_E_NOMEM;
    }
    if (sd->kv_k[layer] && sd->kv_v[layer]) return HX_OK;
    size_t nb = hx__kv_bytes(m);
    int st = HX_OK;
    if (!sd->kv_k[layer] && (st = hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_k[layer])) == HX_OK)
        sd->alloc[HX_MEM_KV] += sd->kv_k[layer]->nbytes;
    if (st == HX_OK && (st = hx__dev_buffer_alloc(sd->dev, nb, &sd->kv_v[layer])) == HX_OK)
        sd->alloc[HX_MEM_KV] += sd->kv_v[layer]->nbytes;
    if (st)
        return hx_device_set_error(sd->dev, st,
                                   "cannot allocate the KV cache of layer %lld (2 x %zu bytes)",
                                   (long long)layer, nb);
    return HX_OK;
}

void hx__sdev_free_mem(const struct hx_mem_geom *m, struct hx_sdev *sd)
{
    for (int i = 0; i < HX_SLOT_COUNT; i++) {
        hx__dev_buffer_free(sd->slot[i]);
        sd->slot[i] = NULL;
    }
    for (int64_t L = 0; sd->kv_k && L < m->model->hp.n_layer; L++) {
        hx__dev_buffer_free(sd->kv_k[L]);
        hx__dev_buffer_free(sd->kv_v[L]);
    }
    hx__free(sd->kv_k);
    hx__free(sd->kv_v);
    sd->kv_k = sd->kv_v = NULL;
    sd->alloc[HX_MEM_ACT] = sd->alloc[HX_MEM_KV] = 0;
}

void hx__sdev_close(const struct hx_mem_geom *m, struct hx_sdev *sd)
{
    if (!sd->dev) return;
    hx__dev_synchronize(sd->dev);
    hx__sdev_free_mem(m, sd);
    hx__wmap_release(sd);
    hx__device_close(sd->dev);
    sd->dev = NULL;
}

/* ---- coherence ------------------------------------------------------------------------------- */

/* d is about to read slot: d becomes one of its holders. Returns the holder to copy it from, or
 * -1 (d holds it already, or no one has written it yet: nothing to move). */
int hx__coh_take_slot(struct hx_coh *c, int slot, int d)
{
    if (c->slot[slot] & (1u << d)) return -1;
    int src = hx__first_bit(c->slot[slot]);
    c->slot[slot] |= 1u << d;
    return src;
}

/* The same for the KV cache of a layer (attention reads it). */
int hx__coh_take_kv(struct hx_coh *c, int64_t layer, int d)
{
    if (c->kv[layer] & (1u << d)) return -1;
    int src = hx__first_bit(c->kv[layer]);
    c->kv[layer] |= 1u << d;
    return src;
}

/* Node nd ran on d: d alone holds what it wrote (its slot; attention: its layer's cache). */
void hx__coh_wrote(struct hx_coh *c, const struct hx_node *nd, int d)
{
    c->slot[nd->dst.slot] = 1u << d;
    if (nd->desc.kind == HX_OP_ATTN) c->kv[nd->desc.layer] = 1u << d;
}

size_t hx__slot_bytes(const struct hx_graph *g, int slot)
{
    return (size_t)hx__slot_rows(g, slot) * (size_t)g->slot_width[slot] * sizeof(float);
}

/* Bytes of a tensor-split part's output columns: what its join copies. */
size_t hx__part_bytes(const struct hx_node *nd)
{
    return (size_t)nd->dst.n_rows * (size_t)nd->dst.n_cols * sizeof(float);
}

/* Bytes of sequence q's cached K (or V) rows of one layer: what a KV hand-over copies. */
size_t hx__kv_seq_bytes(const struct hx_sched *s, int32_t q)
{
    return s->kv_len ? (size_t)s->kv_len[q] * (size_t)s->model->hp.n_kv * sizeof(float) : 0;
}

static int hx__fetch_slot(struct hx_sched *s, const struct hx_graph *g, int d, int slot)
{
    int src = hx__coh_take_slot(&s->coh, slot, d);
    if (src < 0) return HX_OK;
    size_t nb = hx__slot_bytes(g, slot);
    hx__count_move(&s->stats, nb);
    struct hx_buffer *from = NULL, *to = NULL;
    int st = hx__slot_buf(&s->mem, &s->dev[src], slot, &from);
    if (st == HX_OK) st = hx__slot_buf(&s->mem, &s->dev[d], slot, &to);
    return st ? st : hx__dev_copy(to, 0, from, 0, nb);
}

/* Copy the cached rows of every sequence of `layer` from device `src` to `d`. */
static int hx__fetch_kv(struct hx_sched *s, int d, int64_t layer)
{
    int st = hx__kv_bufs(&s->mem, &s->dev[d], layer), src;
    if (st || (src = hx__coh_take_kv(&s->coh, layer, d)) < 0) return st;
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int32_t q = 0; q < s->mem.n_seq; q++) {
        size_t n = hx__kv_seq_bytes(s, q), off = (size_t)q * (size_t)s->mem.n_ctx * row;
        if (!n) continue;
        hx__count_move(&s->stats, n);
        hx__count_move(&s->stats, n);
        st = hx__dev_copy(s->dev[d].kv_k[layer], off, s->dev[src].kv_k[layer], off, n);
        if (st == HX_OK)
            st = hx__dev_copy(s->dev[d].kv_v[layer], off, s->dev[src].kv_v[layer], off, n);
        if (st) return st;
    }
    return HX_OK;
}

/* After attention ran on a non-host device: write this batch's K/V rows through to the host
 * copy, so a later device failure loses nothing. Consecutive rows are coalesced. */
int hx__mirror_kv(struct hx_sched *s, const struct hx_graph *g, int d, int64_t layer,
                  const int32_t *pos, const int32_t *seq)
{
    if (d == s->host || s->n_fb == 0) return HX_OK;
    int st = hx__kv_bufs(&s->mem, &s->dev[s->host], layer);
    size_t row = (size_t)s->model->hp.n_kv * sizeof(float);
    for (int64_t r = 0; st == HX_OK && r < g->n_rows;) {
        int64_t e = r + 1;
        while (e < g->n_rows && seq[e] == seq[r] && pos[e] == pos[e - 1] + 1) e++;
        size_t off = ((size_t)seq[r] * (size_t)s->mem.n_ctx + (size_t)pos[r]) * row,
               n = (size_t)(e - r) * row;
        st = hx__dev_copy(s->dev[s->host].kv_k[layer], off, s->dev[d].kv_k[layer], off, n);
        if (st == HX_OK)
            st = hx__dev_copy(s->dev[s->host].kv_v[layer], off, s->dev[d].kv_v[layer], off, n);
        r = e;
    }
    if (st == HX_OK) s->coh.kv[layer] |= 1u << s->host;
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

/* Before node nd runs on d: copy to d every slot it reads that d lacks, and (attention) the KV
 * cache of its layer. */
int hx__fetch_inputs(struct hx_sched *s, const struct hx_graph *g, int d, const struct hx_node *nd)
{
    int rd[4], n = hx__node_reads(nd, rd), st = HX_OK;
    for (int r = 0; r < n && st == HX_OK; r++) st = hx__fetch_slot(s, g, d, rd[r]);
    if (st == HX_OK && nd->desc.kind == HX_OP_ATTN) st = hx__fetch_kv(s, d, nd->desc.layer);
    return st;
}

/* ---- ops ------------------------------------------------------------------------------------- */

static int hx__ref_to(const struct hx_mem_geom *m, const struct hx_graph *g, struct hx_sdev *sd,
                      const struct hx_node_ref *r, struct hx_tensor_ref *out)
{
    hx__ref_geom(g, r, out);
    return r->slot < 0 ? HX_OK : hx__slot_buf(m, sd, r->slot, &out->buf);
}

int hx__build_op(const struct hx_mem_geom *m, const struct hx_graph *g, struct hx_sdev *sd,
                 const struct hx_node *nd, struct hx_op *op)
{
    memset(op, 0, sizeof *op);
    op->desc = nd->desc;
    int st = HX_OK;
    for (int i = 0; i < 3 && st == HX_OK; i++) st = hx__ref_to(m, g, sd, &nd->src[i], &op->src[i]);
    if (st == HX_OK) st = hx__ref_to(m, g, sd, &nd->dst, &op->dst);
    op->weight = nd->weight;
    op->aux = nd->aux;
    if (st == HX_OK) st = hx__weight_handle(sd, nd->weight, &op->weight_handle);
    if (st == HX_OK) st = hx__weight_handle(sd, nd->aux, &op->aux_handle);
    if (st == HX_OK && nd->desc.kind == HX_OP_ATTN &&
        (st = hx__kv_bufs(m, sd, nd->desc.layer)) == HX_OK) {
        int64_t L = nd->desc.layer;
        size_t rows = (size_t)m->n_seq * (size_t)m->n_ctx;
        size_t stride = (size_t)m->model->hp.n_kv * sizeof(float);
        op->k_cache =
            (struct hx_tensor_ref){sd->kv_k[L], 0, (int64_t)rows, m->model->hp.n_kv, stride};
        op->v_cache =
            (struct hx_tensor_ref){sd->kv_v[L], 0, (int64_t)rows, m->model->hp.n_kv, stride};
    }
    return st;
}
