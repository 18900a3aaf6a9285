/*
 * sched-fit.c — the scheduler's memory: what each device may use, what a plan puts on it, the
 * refusal of a plan that does not fit, and `fit`'s search for the split that does.
 *
 * Limit: a device may use its --mem cap; without one, what it reports free (else its total; a
 * unified-memory device that reports neither shares the host's). 0 means unknown: no limit.
 *
 * Need: the plans of both phases are placed (sched-place.c) and every node adds to its device
 * the weights it reads (weight and aux, each once, sized by the backend's weight_bytes: repacks
 * as repacked, mapped weights as mapped), its layer's K and V caches if it is attention (and,
 * under a fallback chain, the host's mirror of them), and the activation slots it touches (each
 * a buffer of slot_cap rows). That is, by construction, exactly what the load (sched.c) and the
 * runs of both phases (sched-exec.c, sched-mem.c) allocate on the device, which
 * tests/test-mem.c checks against sched-mem.c's counters. A device that is not host-visible
 * (a discrete GPU) also stages every upload and move through a host-visible buffer of the
 * largest one (at most HX_STAGE_MAX): counted as staging, a backend-internal buffer the
 * counters do not see. A backend's own buffers that grow with the splits it runs (Vulkan's
 * and HIP's activation scratch and split metadata) are counted as scratch: every split of the
 * plan, with its positions at the context's end, goes to the backend's scratch_bytes, and each
 * of its buffers counts its largest need (what it grows to); so do the buffers a backend holds
 * from its opening on (the NPU's per-kernel buffer objects: an empty split, asked of every
 * device opened, used by the plan or not), and what auto's measuring runs grew them to
 * (sdev.prof_scratch, sched-auto.c). The CPU's per-thread buffers are the CPU backend's
 * scratch like any other.
 *
 * fit: whole layers from the first, as many as fit, on the fastest device, then the next,
 * the rest on the last (the CPU). Its rules are layer-split's with exact boundaries; the
 * embedding lookup stays on the host (it reads one row per token); the output norm and LM head
 * go on the fastest device when that puts more weight bytes there than the layers they
 * displace, else on the last device. Each boundary is the largest count whose need fits
 * (need grows with the count: a binary search of whole-plan accountings).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sched-impl.h"

#define HX_STAGE_MAX ((size_t)64 << 20) /* a discrete device's staging buffer, at most */

static const char *const hx__mem_kind_name[HX_MEM_KINDS] = {"weights", "kv", "act", "staging",
                                                             "scratch"};

int hx__phase_graphs(const struct hx_sched *s, struct hx_graph g[HX_PHASE_COUNT])
{
    memset(g, 0, HX_PHASE_COUNT * sizeof *g);
    int st = hx__graph_build(&g[HX_PHASE_PREFILL], s->model, s->n_batch, s->n_batch - 1,
                             s->mem.n_ctx, s->mem.n_seq);
    if (st == HX_OK)
        st = hx__graph_build(&g[HX_PHASE_DECODE], s->model, 1, 0, s->mem.n_ctx, s->mem.n_seq);
    if (st) hx__graph_free(&g[0]), hx__graph_free(&g[1]);
    return st;
}

/* ---- limits ---------------------------------------------------------------------------------- */

/* Does --mem's spec name device d? 2: by its id ("vulkan:1"), 1: by backend ("vulkan", "gpu"). */
static int hx__mem_names(const struct hx_sched *s, const char *spec, int d)
{
    const struct hx_device *dev = s->dev[d].dev;
    if (!strcasecmp(spec, dev->id)) return 2;
    if (!strcasecmp(spec, dev->ops->name)) return 1;
    const char *gpu = strcasecmp(spec, "gpu") ? NULL : hx__resolve_gpu();
    return gpu && !strcasecmp(gpu, dev->ops->name) ? 1 : 0;
}

size_t hx__mem_limit(const struct hx_sched *s, int d, const char **from)
{
    static __thread char by[80];
    const struct hx_policy *p = &s->policy;
    int best = -1, how = 0;
    for (int i = 0; i < p->n_mem; i++) {
        int m = hx__mem_names(s, p->mem_dev[i], d);
        if (m > how) how = m, best = i;
    }
    const struct hx_device_info *in = &s->dev[d].dev->info;
    size_t dev = 0;
    if (in->memory_free_bytes)
        *from = "free", dev = in->memory_free_bytes;
    else if (in->memory_total_bytes)
        *from = "total", dev = in->memory_total_bytes;
    else if (in->unified_memory && d != s->host) {
        const struct hx_device_info *h = &s->dev[s->host].dev->info;
        *from = "host memory, shared";
        dev = h->memory_free_bytes ? h->memory_free_bytes : h->memory_total_bytes;
    } else
        *from = "unknown";
    /* a cap lowers what the device has; above it, the device's own figure stands */
    if (best >= 0 && (!dev || p->mem_cap[best] <= dev)) {
        snprintf(by, sizeof by, "--mem %s", p->mem_dev[best]);
        *from = by;
        return p->mem_cap[best];
    }
    return dev;
}

static size_t hx__need_sum(const size_t *k)
{
    size_t t = 0;
    for (int i = 0; i < HX_MEM_KINDS; i++) t += k[i];
    return t;
}

/* ---- need ------------------------------------------------------------------------------------ */

static int hx__ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

struct hx_need_acc {
    const struct hx_weight **w[HX_MAX_DEVICES]; /* every weight a device's nodes read */
    int64_t nw[HX_MAX_DEVICES], wcap[HX_MAX_DEVICES];
    uint8_t *kv;                    /* [d * n_layer + L]: layer L's caches on d */
    uint32_t slots[HX_MAX_DEVICES]; /* slot bit masks */
    size_t stage[HX_MAX_DEVICES];   /* largest move into or out of a discrete device */
    size_t scratch[HX_MAX_DEVICES][HX_SCRATCH_BUFS]; /* each backend buffer's largest need */
    struct hx_op *ops;              /* a plan split's ops (hx__scratch_step) */
    int32_t *rows;                  /* its row metadata: tokens, positions, sequences */
    int64_t ops_cap, rows_cap;
    int st;                         /* the first failure of a walk callback */
};

static int hx__acc_weight(struct hx_need_acc *a, int d, const struct hx_weight *w)
{
    if (!w) return HX_OK;
    if (a->nw[d] == a->wcap[d]) {
        int64_t cap = a->wcap[d] ? 2 * a->wcap[d] : 256;
        const struct hx_weight **n = hx__realloc(a->w[d], (size_t)cap * sizeof *n);
        if (!n) return HX_E_NOMEM;
        a->w[d] = n, a->wcap[d] = cap;
    }
    a->w[d][a->nw[d]++] = w;
    return HX_OK;
}

static bool hx__discrete(const struct hx_sched *s, int d)
{
    return !s->dev[d].dev->info.unified_memory;
}

static void hx__stage_step(const struct hx_sched *s, const struct hx_graph *g,
                           const struct hx_walk_step *e, void *user_data)
{
    (void)g;
    struct hx_need_acc *a = user_data;
    if (e->ev != HX_WALK_SLOT && e->ev != HX_WALK_KV_ROWS && e->ev != HX_WALK_JOIN) return;
    size_t nb = HX_MIN(e->nb, HX_STAGE_MAX);
    if (hx__discrete(s, e->d)) a->stage[e->d] = HX_MAX(a->stage[e->d], nb);
    if (hx__discrete(s, e->src)) a->stage[e->src] = HX_MAX(a->stage[e->src], nb);
}

/* A plan split of the nodes [i, j) of g that run on d: ops without buffers or weight handles,
 * every row at the context's end (what the run of the largest context meets). */
static int hx__plan_split(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j,
                          int d, bool group, struct hx_need_acc *a, struct hx_split *sp)
{
    if (j - i > a->ops_cap) {
        struct hx_op *n = hx__realloc(a->ops, (size_t)(j - i) * sizeof *n);
        if (!n) return HX_E_NOMEM;
        a->ops = n, a->ops_cap = j - i;
    }
    if (3 * g->n_rows > a->rows_cap) {
        int32_t *n = hx__realloc(a->rows, (size_t)(3 * g->n_rows) * sizeof *n);
        if (!n) return HX_E_NOMEM;
        a->rows = n, a->rows_cap = 3 * g->n_rows;
    }
    int64_t n = 0;
    for (int64_t k = i; k < j; k++) {
        const struct hx_node *nd = &g->nodes[k];
        if (group && s->assign[k] != d) continue;
        struct hx_op *op = &a->ops[n++];
        memset(op, 0, sizeof *op);
        op->desc = nd->desc, op->weight = nd->weight, op->aux = nd->aux;
        for (int r = 0; r < 3; r++) hx__ref_geom(g, &nd->src[r], &op->src[r]);
        hx__ref_geom(g, &nd->dst, &op->dst);
    }
    int32_t *tok = a->rows, *pos = tok + g->n_rows, *seq = pos + g->n_rows;
    for (int64_t r = 0; r < g->n_rows; r++)
        tok[r] = 0, pos[r] = (int32_t)(s->mem.n_ctx - 1), seq[r] = (int32_t)(s->mem.n_seq - 1);
    const struct hx_batch_rows b = {.tokens = tok, .pos = pos, .seq = seq};
    *sp = hx__split_of(a->ops, n, g->n_rows, &b);
    return HX_OK;
}

/* Each run of the plan (a split, or each device's part of a group) to its backend's
 * scratch_bytes: each buffer's largest need. */
static void hx__scratch_step(const struct hx_sched *s, const struct hx_graph *g,
                             const struct hx_walk_step *e, void *user_data)
{
    struct hx_need_acc *a = user_data;
    if (e->ev != HX_WALK_RUN || a->st) return;
    const int n_dev = e->devs ? e->n_dev : 1;
    for (int u = 0; u < n_dev && !a->st; u++) {
        const int d = e->devs ? e->devs[u] : e->d;
        struct hx_split sp;
        size_t b[HX_SCRATCH_BUFS];
        a->st = hx__plan_split(s, g, e->i, e->j, d, e->devs != NULL, a, &sp);
        if (!a->st && sp.n_ops) a->st = hx__dev_scratch_bytes(s->dev[d].dev, &sp, b);
        for (int k = 0; !a->st && sp.n_ops && k < HX_SCRATCH_BUFS; k++)
            a->scratch[d][k] = HX_MAX(a->scratch[d][k], b[k]);
    }
}

/* Add the placed plan xg (s->assign) to the tallies. */
static int hx__acc_plan(struct hx_sched *s, const struct hx_graph *xg, struct hx_need_acc *a)
{
    int64_t n_layer = s->model->hp.n_layer;
    int st = HX_OK;
    for (int64_t i = 0; i < xg->n_nodes && st == HX_OK; i++) {
        const struct hx_node *nd = &xg->nodes[i];
        int d = s->assign[i];
        st = hx__acc_weight(a, d, nd->weight);
        if (st == HX_OK) st = hx__acc_weight(a, d, nd->aux);
        for (int k = 0; k < 3; k++)
            if (nd->src[k].slot >= 0) a->slots[d] |= 1u << nd->src[k].slot;
        if (nd->dst.slot >= 0) a->slots[d] |= 1u << nd->dst.slot;
        if (nd->desc.kind == HX_OP_ATTN && nd->desc.layer >= 0 && nd->desc.layer < n_layer) {
            a->kv[(int64_t)d * n_layer + nd->desc.layer] = 1;
            if (s->n_fb > 0 && d != s->host) a->kv[(int64_t)s->host * n_layer + nd->desc.layer] = 1;
        }
    }
    /* staging: only a discrete device has any; the dry walk finds the moves */
    bool discrete = false;
    for (int d = 0; d < s->n_dev; d++) discrete |= hx__discrete(s, d);
    if (st == HX_OK && discrete) st = hx__walk(s, xg, hx__stage_step, a, NULL);
    if (st == HX_OK) st = hx__walk(s, xg, hx__scratch_step, a, NULL);
    return st ? st : a->st;
}

int hx__mem_need(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *const *r,
                 size_t need[HX_MAX_DEVICES][HX_MEM_KINDS])
{
    int64_t n_layer = s->model->hp.n_layer;
    struct hx_need_acc a;
    memset(&a, 0, sizeof a);
    memset(need, 0, HX_MAX_DEVICES * sizeof need[0]);
    a.kv = hx__calloc((size_t)(HX_MAX_DEVICES * n_layer), 1);
    int st = a.kv ? HX_OK : HX_E_NOMEM;
    for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++) {
        const struct hx_graph *xg;
        int64_t n_off;
        st = hx__place(s, &g[ph], r[ph], &xg, &n_off);
        if (st == HX_OK) st = hx__acc_plan(s, xg, &a);
    }
    int64_t width[HX_SLOT_COUNT];
    hx__graph_slot_widths(s->model, width);
    size_t kv1 =
        (size_t)s->mem.n_seq * (size_t)s->mem.n_ctx * (size_t)s->model->hp.n_kv * sizeof(float);
    for (int d = 0; d < s->n_dev && st == HX_OK; d++) {
        size_t *n = need[d];
        if (a.nw[d]) qsort(a.w[d], (size_t)a.nw[d], sizeof *a.w[d], hx__ptr_cmp);
        for (int64_t i = 0; i < a.nw[d] && st == HX_OK; i++) {
            size_t b = 0;
            if (i > 0 && a.w[d][i] == a.w[d][i - 1]) continue;
            st = hx__dev_weight_bytes(s->dev[d].dev, a.w[d][i], NULL, &b);
            n[HX_MEM_WEIGHTS] += b;
            if (hx__discrete(s, d)) a.stage[d] = HX_MAX(a.stage[d], HX_MIN(b, HX_STAGE_MAX));
        }
        for (int64_t L = 0; L < n_layer; L++) n[HX_MEM_KV] += a.kv[d * n_layer + L] ? 2 * kv1 : 0;
        for (int k = 0; k < HX_SLOT_COUNT; k++)
            if (a.slots[d] & (1u << k))
                n[HX_MEM_ACT] += (size_t)s->mem.slot_cap[k] * (size_t)width[k] * sizeof(float);
        n[HX_MEM_STAGING] = a.stage[d];
        /* buffers the device holds from its opening on, and what measuring grew them to */
        size_t b[HX_SCRATCH_BUFS] = {0};
        const struct hx_split none = {.struct_size = sizeof none};
        if (st == HX_OK) st = hx__dev_scratch_bytes(s->dev[d].dev, &none, b);
        for (int k = 0; k < HX_SCRATCH_BUFS; k++)
            n[HX_MEM_SCRATCH] += HX_MAX(a.scratch[d][k], HX_MAX(b[k], s->dev[d].prof_scratch[k]));
    }
    for (int d = 0; d < HX_MAX_DEVICES; d++) hx__free(a.w[d]);
    hx__free(a.kv);
    hx__free(a.ops);
    hx__free(a.rows);
    return st;
}

/* ---- the check, and the text ----------------------------------------------------------------- */

static void hx__human(size_t b, char *out, size_t len)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    if (i == 0)
        snprintf(out, len, "%zu B", b);
    else
        snprintf(out, len, "%.1f %s", v, u[i]);
}

/* "weights 1.2 MiB, kv 64.0 KiB, act 3.0 KiB, staging 0 B, scratch 0 B = 1.3 MiB (1361920 bytes)" */
static void hx__need_line(const size_t *k, struct hx_strbuf *sb)
{
    char h[32];
    for (int i = 0; i < HX_MEM_KINDS; i++) {
        hx__human(k[i], h, sizeof h);
        hx__sb_printf(sb, "%s%s %s", i ? ", " : "", hx__mem_kind_name[i], h);
    }
    hx__human(hx__need_sum(k), h, sizeof h);
    hx__sb_printf(sb, " = %s (%zu bytes)", h, hx__need_sum(k));
}

/* Is d's memory the host's RAM? The host, ref and a CPU-type device (lavapipe) allocate it,
 * and so does a unified-memory device that reports no memory of its own (npu, npu-sim). A GPU
 * that reports its heaps (an APU's carve-out included) is held to those alone. */
static bool hx__host_ram(const struct hx_sched *s, int d)
{
    const struct hx_device_info *in = &s->dev[d].dev->info;
    return d == s->host || in->kind == HX_DEVICE_CPU ||
           (in->unified_memory && !in->memory_free_bytes && !in->memory_total_bytes);
}

int hx__mem_check(const struct hx_sched *s, size_t need[HX_MAX_DEVICES][HX_MEM_KINDS],
                  const char *what)
{
    for (int d = 0; d < s->n_dev; d++) {
        const char *from;
        size_t lim = hx__mem_limit(s, d, &from), tot = hx__need_sum(need[d]);
        if (!lim || tot <= lim) continue;
        struct hx_strbuf sb;
        char h[32];
        hx__sb_init(&sb);
        hx__need_line(need[d], &sb);
        hx__human(lim, h, sizeof h);
        int st = hx__set_error(HX_E_NOMEM,
                               "%s does not fit: %s needs %s, over its limit of %s (%zu bytes, %s)",
                               what, hx__id(s, d), sb.data ? sb.data : "?", h, lim, from);
        hx__sb_free(&sb);
        return st;
    }
    /* The devices on host RAM together, against `--mem host=SIZE`, else what the host reports
     * (a device's own cap divides the RAM, it does not add to it): each fitting its own limit
     * is not enough when the host holds the weights of several (auto's phases on two). */
    const struct hx_device_info *hi = &s->dev[s->host].dev->info;
    size_t ram = hi->memory_free_bytes ? hi->memory_free_bytes : hi->memory_total_bytes;
    const char *ram_from = hi->memory_free_bytes ? "free" : "total";
    for (int i = 0; i < s->policy.n_mem; i++)
        if (!strcasecmp(s->policy.mem_dev[i], "host"))
            ram = s->policy.mem_cap[i], ram_from = "--mem host";
    size_t pool = 0;
    int n_pool = 0;
    for (int d = 0; d < s->n_dev; d++)
        if (hx__host_ram(s, d) && hx__need_sum(need[d])) pool += hx__need_sum(need[d]), n_pool++;
    if (ram && (n_pool > 1 || !strcmp(ram_from, "--mem host")) && pool > ram) {
        struct hx_strbuf sb;
        char h[32], r[32];
        hx__sb_init(&sb);
        for (int d = 0; d < s->n_dev; d++)
            if (hx__host_ram(s, d) && hx__need_sum(need[d])) {
                hx__human(hx__need_sum(need[d]), h, sizeof h);
                hx__sb_printf(&sb, "%s%s %s", sb.data && sb.data[0] ? ", " : "", hx__id(s, d), h);
            }
        hx__human(pool, h, sizeof h);
        hx__human(ram, r, sizeof r);
        int st = hx__set_error(HX_E_NOMEM,
                               "%s does not fit: %s share host memory and need %s together (%zu "
                               "bytes), over the host's %s (%zu bytes, %s)",
                               what, sb.data ? sb.data : "?", h, pool, r, ram, ram_from);
        hx__sb_free(&sb);
        return st;
    }
    return HX_OK;
}

void hx__mem_text(const struct hx_sched *s, struct hx_strbuf *sb)
{
    hx__sb_printf(sb, "memory per device (what this plan allocates there; limit: --mem, else "
                      "what the device reports):\n");
    for (int d = 0; d < s->n_dev; d++) {
        if (!hx__need_sum(s->need[d])) continue;
        const char *from;
        size_t lim = hx__mem_limit(s, d, &from);
        char h[32];
        hx__sb_printf(sb, "  %-10s ", hx__id(s, d));
        hx__need_line(s->need[d], sb);
        if (lim) {
            hx__human(lim, h, sizeof h);
            hx__sb_printf(sb, " of %s (%zu bytes, %s)\n", h, lim, from);
        } else {
            hx__sb_printf(sb, "; limit unknown\n");
        }
    }
}

/* ---- fit ------------------------------------------------------------------------------------- */

struct hx_fit {
    struct hx_sched *s;
    const struct hx_graph *g;
    struct hx_rule *r;
    size_t need[HX_MAX_DEVICES][HX_MEM_KINDS];
};

/* Set r's boundaries: devs[i] gets layers [start, start + k), every later layer the last
 * device's; then account the plan. */
static int hx__fit_try(struct hx_fit *f, int i, int32_t start, int32_t k)
{
    int32_t n_layer = (int32_t)f->s->model->hp.n_layer;
    f->r->layer_end[i] = start + k;
    for (int j = i + 1; j < f->r->n_dev; j++) f->r->layer_end[j] = n_layer;
    const struct hx_rule *rr[HX_PHASE_COUNT] = {f->r, f->r};
    return hx__mem_need(f->s, f->g, rr, f->need);
}

static bool hx__fit_ok(struct hx_fit *f, int d)
{
    const char *from;
    size_t lim = hx__mem_limit(f->s, d, &from);
    return !lim || hx__need_sum(f->need[d]) <= lim;
}

/* The most layers from start that devs[i] holds within its limit (0..n_layer - start). */
static int hx__fit_most(struct hx_fit *f, int i, int32_t start, int32_t *most)
{
    int32_t lo = 0, hi = (int32_t)f->s->model->hp.n_layer - start;
    int st = hx__fit_try(f, i, start, hi);
    if (st) return st;
    if (hx__fit_ok(f, f->r->dev[i])) return *most = hi, HX_OK;
    while (lo < hi - 1) { /* lo fits (or is 0), hi does not */
        int32_t mid = lo + (hi - lo) / 2;
        if ((st = hx__fit_try(f, i, start, mid))) return st;
        if (hx__fit_ok(f, f->r->dev[i]))
            lo = mid;
        else
            hi = mid;
    }
    *most = lo;
    return HX_OK;
}

/* Weight bytes the plan puts on device d. */
static size_t hx__fit_wbytes(const struct hx_fit *f, int d)
{
    return f->need[d][HX_MEM_WEIGHTS];
}

int hx__fit_rule(struct hx_sched *s, const struct hx_graph *g, const int *devs, int n_dev,
                 struct hx_rule *r)
{
    struct hx_fit *f = hx__calloc(1, sizeof *f);
    if (!f) return HX_E_NOMEM;
    *f = (struct hx_fit){.s = s, .g = g, .r = r};
    int32_t n_layer = (int32_t)s->model->hp.n_layer;
    hx__rule_init(r, HX_POLICY_FIT);
    r->n_dev = n_dev;
    memcpy(r->dev, devs, (size_t)n_dev * sizeof *devs);
    r->embed_dev = devs[n_dev - 1];
    for (int i = 0; i < n_dev; i++)
        if (devs[i] == s->host) r->embed_dev = s->host;
    r->head_dev = devs[n_dev - 1];
    int st = HX_OK;
    int32_t start = 0;
    for (int i = 0; i < n_dev - 1 && st == HX_OK && start < n_layer; i++) {
        int32_t k = 0;
        if (i == 0) {
            /* the head on the fastest device, if that puts more weight bytes there */
            int32_t k_head = 0, k_none = 0;
            size_t w_head = 0, w_none = 0;
            r->head_dev = devs[0];
            if ((st = hx__fit_most(f, 0, 0, &k_head)) == HX_OK &&
                (st = hx__fit_try(f, 0, 0, k_head)) == HX_OK)
                w_head = hx__fit_ok(f, devs[0]) ? hx__fit_wbytes(f, devs[0]) : 0;
            r->head_dev = devs[n_dev - 1];
            if (st == HX_OK && (st = hx__fit_most(f, 0, 0, &k_none)) == HX_OK &&
                (st = hx__fit_try(f, 0, 0, k_none)) == HX_OK)
                w_none = hx__fit_ok(f, devs[0]) ? hx__fit_wbytes(f, devs[0]) : 0;
            if (w_head >= w_none && w_head > 0)
                r->head_dev = devs[0], k = k_head;
            else
                k = k_none;
        } else if (st == HX_OK) {
            st = hx__fit_most(f, i, start, &k);
        }
        if (st == HX_OK) st = hx__fit_try(f, i, start, k);
        start += k;
    }
    r->layer_end[n_dev - 1] = n_layer;
    hx__rule_text(s, r);
    const struct hx_rule *rr[HX_PHASE_COUNT] = {r, r};
    if (st == HX_OK) st = hx__mem_need(s, g, rr, f->need);
    if (st == HX_OK) {
        char what[256];
        snprintf(what, sizeof what, "the model (%lld layers) under %s", (long long)n_layer,
                 r->text);
        st = hx__mem_check(s, f->need, what);
    }
    hx__free(f);
    /* Each device within its own limit, yet the ones on host RAM together over it: a first
     * device on host RAM (ref, lavapipe, npu-sim) only adds to the pool, so fit without it. */
    if (st == HX_E_NOMEM && n_dev > 1 && devs[0] != s->host && hx__host_ram(s, devs[0])) {
        char why[1024];
        snprintf(why, sizeof why, "%s", hx_last_error());
        struct hx_rule rest;
        if (hx__fit_rule(s, g, devs + 1, n_dev - 1, &rest) == HX_OK) {
            HX_LOG_INFO("fit: %s; without %s: %s", why, hx__id(s, devs[0]), rest.text);
            *r = rest;
            return HX_OK;
        }
        st = hx__set_error(HX_E_NOMEM, "%s", why);
    }
    return st;
}
