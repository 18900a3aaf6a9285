/*
 * hip-graph.h — decode splits launched as one graph (included by hip-module.hip after the
 * launch code): the shape key, the per-device cache of executable graphs, capture, replay,
 * the fallback to direct launches, and the counters of host-side calls.
 *
 * Which splits: at most HX_HIP_GRAPH_ROWS rows (decode: one row per sequence), at least one
 * op, graphs on for the device (HX_HIP_GRAPH unset or not 0, no earlier graph failure).
 * Prefill keeps direct launches.
 *
 * The shape key says everything the split's launches take from the host, except the row
 * metadata (tokens, positions, sequences), which the kernels read from the split's scratch on
 * the device (hx_hip_scratch writes it with one copy before the launch). It is the list of
 * 64-bit words built by hx_hip_graph_key:
 *   - the split: rows, op count, whether tokens / positions / sequences are given, the
 *     scratch address, and the split attention's chunk count (0, or a power of two: the
 *     kernels' grids cover that many chunks of HX_HIP_ATTN_CHUNK positions and the chunks
 *     past a row's position exit at once, so a graph serves every position up to
 *     chunks * HX_HIP_ATTN_CHUNK, and a longer context captures once per doubling);
 *   - per op: kind, n_in, n_out, weight type, the kind's parameters (bit patterns of the
 *     floats), each tensor (sources, destination, KV caches) as device address, rows,
 *     columns and row stride, the weight and auxiliary handles with their device addresses.
 * Two splits with equal keys enqueue the same launches with the same arguments, so replaying
 * one's graph for the other is exact. The cache is emptied whenever memory a graph may point
 * into goes away: buffer_free, weight_release, the scratch growing, fini.
 *
 * Policy: a key seen for the first time runs direct and is remembered; the second time it is
 * captured (the launches of hx_hip_enqueue recorded on the compute stream, nothing runs),
 * instantiated and launched; from then on one hipGraphLaunch per split. HX_HIP_GRAPH=eager
 * captures at first sight (tests: every split of test-backend-ops runs from a graph).
 * HX_HIP_GRAPH_CACHE graphs per device, the least recently used replaced.
 *
 * Faults: a capture, instantiate or graph launch that fails turns graphs off for the device
 * (one HX_LOG_WARN with the call and the runtime's error) and the same split is enqueued by
 * direct launches, so the token is computed all the same. A graph launch either starts the
 * whole graph or nothing (the runtime checks it at launch; the emulator's too).
 */
#pragma once

#define HX_HIP_GRAPH_ROWS 8  /* splits of at most this many rows run as graphs */
#define HX_HIP_GRAPH_CACHE 8 /* executable graphs kept per device */

struct hx_hip_graph_ent {
    uint64_t *key; /* NULL: free slot */
    size_t n_key;
    uint64_t hash;
    hipGraphExec_t exec; /* NULL: seen once, not captured yet */
    int n_kernels;       /* kernels in the graph */
    uint64_t used;       /* tick of the last use */
};

struct hx_hip_graphs {
    int mode; /* 0 off, 1 capture at the second sight, 2 at the first (HX_HIP_GRAPH=eager) */
    bool warned;
    struct hx_hip_graph_ent ent[HX_HIP_GRAPH_CACHE];
    uint64_t tick;
    uint64_t *kbuf; /* the key of the split being run */
    size_t kcap, klen;
    struct {
        uint64_t splits, graph_splits; /* run() calls; of them, run as one graph launch */
        uint64_t kernels;              /* direct kernel launches (hipLaunchKernel) */
        uint64_t graph_launches;       /* hipGraphLaunch */
        uint64_t copies;               /* host-to-device copies of the row metadata */
        uint64_t captures;             /* graphs captured and instantiated */
    } n;
};

/* HX_HIP_GRAPH: unset/1 on, 0 (or off) never, eager: capture every candidate at first sight. */
static int hx_hip_graph_mode(void)
{
    const char *s = getenv("HX_HIP_GRAPH");
    if (!s || !*s) return 1;
    if (!strcmp(s, "0") || !strcmp(s, "off")) return 0;
    if (!strcmp(s, "eager")) return 2;
    return 1;
}

static struct hx_hip_graphs *hx_hip_graphs_new(void)
{
    struct hx_hip_graphs *g = (struct hx_hip_graphs *)hx_hip_h.malloc_fn(sizeof *g);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->mode = hx_hip_graph_mode();
    return g;
}

static void hx_hip_graph_ent_drop(struct hx_hip_graph_ent *e)
{
    if (e->exec) HX_HIP_IGNORE(hipGraphExecDestroy(e->exec));
    if (e->key) hx_hip_h.free_fn(e->key);
    memset(e, 0, sizeof *e);
}

/* Forget every graph (the memory they point into may be gone). The stream is idle: callers
 * synchronize before freeing. */
static void hx_hip_graphs_clear(struct hx_hip_dev *d)
{
    struct hx_hip_graphs *g = d->graphs;
    if (!g) return;
    for (int i = 0; i < HX_HIP_GRAPH_CACHE; i++) hx_hip_graph_ent_drop(&g->ent[i]);
}

static void hx_hip_graphs_free(struct hx_hip_dev *d)
{
    struct hx_hip_graphs *g = d->graphs;
    if (!g) return;
    hx_hip_graphs_clear(d);
    if (g->n.splits)
        hx_hip_log(HX_LOG_LEVEL_INFO,
                   "hip: device %d: %llu splits (%llu as graphs); host calls: %llu kernel "
                   "launches, %llu graph launches, %llu copies; graphs captured: %llu; graphs %s",
                   d->idx, (unsigned long long)g->n.splits, (unsigned long long)g->n.graph_splits,
                   (unsigned long long)g->n.kernels, (unsigned long long)g->n.graph_launches,
                   (unsigned long long)g->n.copies, (unsigned long long)g->n.captures,
                   g->mode == 2 ? "eager"
                   : g->mode    ? "on"
                                : "off");
    if (g->kbuf) hx_hip_h.free_fn(g->kbuf);
    hx_hip_h.free_fn(g);
    d->graphs = NULL;
}

/* Waits for the graphs launched so far before one is destroyed: CUDA frees an executable graph
 * destroyed in flight when it completes, HIP's hipGraphExecDestroy makes no such promise. */
static void hx_hip_graphs_idle(struct hx_hip_dev *d)
{
    if (hipStreamSynchronize(d->stream) != hipSuccess) HX_HIP_IGNORE(hipGetLastError());
}

/* Graphs off for this device from now on, with the reason logged once. */
static void hx_hip_graphs_off(struct hx_hip_dev *d, const char *why)
{
    struct hx_hip_graphs *g = d->graphs;
    hx_hip_graphs_idle(d); /* earlier replays of the graphs dropped here may still run */
    hx_hip_graphs_clear(d);
    g->mode = 0;
    if (!g->warned)
        hx_hip_log(HX_LOG_LEVEL_WARN,
                   "hip: device %d: decode graph failed, direct launches from now on: %s", d->idx,
                   why);
    g->warned = true;
}

static bool hx_hip_graph_wanted(const struct hx_hip_dev *d, const struct hx_split *sp)
{
    return d->graphs && d->graphs->mode && sp->n_ops > 0 && sp->n_rows > 0 &&
           sp->n_rows <= HX_HIP_GRAPH_ROWS;
}

/* The split attention's chunk count for a graph: a power of two covering pos_max. */
static int hx_hip_graph_chunks(int32_t pos_max)
{
    if (pos_max < HX_HIP_ATTN_CHUNK) return 0;
    const int live = (int)(pos_max / HX_HIP_ATTN_CHUNK) + 1;
    int n = 2;
    while (n < live) n *= 2;
    return n;
}

static bool hx_hip_key_push(struct hx_hip_graphs *g, uint64_t v)
{
    if (g->klen == g->kcap) {
        const size_t cap = g->kcap ? 2 * g->kcap : 1024;
        uint64_t *k = (uint64_t *)hx_hip_h.malloc_fn(cap * sizeof *k);
        if (!k) return false;
        if (g->klen) memcpy(k, g->kbuf, g->klen * sizeof *k);
        if (g->kbuf) hx_hip_h.free_fn(g->kbuf);
        g->kbuf = k, g->kcap = cap;
    }
    g->kbuf[g->klen++] = v;
    return true;
}

static uint64_t hx_hip_fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The shape key of the split (the list at the top) into g->kbuf; false: out of host memory. */
static bool hx_hip_graph_key(struct hx_hip_dev *d, const struct hx_split *sp,
                             const struct hx_hip_ctx *c)
{
    struct hx_hip_graphs *g = d->graphs;
    bool ok = true;
    g->klen = 0;
#define HX_HIP_K(v) (ok = ok && hx_hip_key_push(g, (uint64_t)(v)))
    HX_HIP_K(sp->n_rows), HX_HIP_K(sp->n_ops), HX_HIP_K((uintptr_t)d->scratch);
    HX_HIP_K(c->attn_chunks);
    HX_HIP_K((sp->tokens ? 1 : 0) | (sp->pos ? 2 : 0) | (sp->seq ? 4 : 0));
    for (int64_t i = 0; i < sp->n_ops && ok; i++) {
        const struct hx_op *op = &sp->ops[i];
        const struct hx_op_desc *de = &op->desc;
        HX_HIP_K(de->kind), HX_HIP_K(de->n_in), HX_HIP_K(de->n_out), HX_HIP_K(de->wtype);
        switch (de->kind) {
        case HX_OP_RMS_NORM:
            HX_HIP_K(hx_hip_fbits(de->p.norm.eps)), HX_HIP_K(de->p.norm.group);
            break;
        case HX_OP_ROPE:
            HX_HIP_K(de->p.rope.n_head), HX_HIP_K(de->p.rope.head_dim), HX_HIP_K(de->p.rope.n_rot);
            HX_HIP_K(hx_hip_fbits(de->p.rope.base)), HX_HIP_K(hx_hip_fbits(de->p.rope.freq_scale));
            HX_HIP_K(de->p.rope.mode);
            break;
        case HX_OP_ATTN:
            HX_HIP_K(de->p.attn.n_head), HX_HIP_K(de->p.attn.n_head_kv);
            HX_HIP_K(de->p.attn.head_dim), HX_HIP_K(hx_hip_fbits(de->p.attn.scale));
            HX_HIP_K(de->p.attn.n_ctx), HX_HIP_K(de->p.attn.n_seq);
            break;
        default: break;
        }
        const struct hx_tensor_ref *t[6] = {&op->src[0], &op->src[1],  &op->src[2],
                                            &op->dst,    &op->k_cache, &op->v_cache};
        for (int j = 0; j < 6; j++) {
            const bool has = t[j]->buf && t[j]->buf->ctx;
            HX_HIP_K(has ? (uintptr_t)t[j]->buf->ctx + t[j]->offset_bytes : 0);
            HX_HIP_K(t[j]->n_rows), HX_HIP_K(t[j]->n_cols), HX_HIP_K(t[j]->row_stride_bytes);
        }
        const hx_hip_weight *w = (const hx_hip_weight *)op->weight_handle,
                            *f = (const hx_hip_weight *)op->aux_handle;
        HX_HIP_K((uintptr_t)w), HX_HIP_K(w ? (uintptr_t)w->d : 0), HX_HIP_K(op->weight ? 1 : 0);
        HX_HIP_K((uintptr_t)f), HX_HIP_K(f ? (uintptr_t)f->d : 0), HX_HIP_K(op->aux ? 1 : 0);
    }
#undef HX_HIP_K
    return ok;
}

static uint64_t hx_hip_key_hash(const uint64_t *k, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
    for (size_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull;
    return h;
}

/* Records the split's launches on the compute stream into an executable graph. On failure
 * writes the reason to why and returns NULL; the stream is no longer capturing. */
static hipGraphExec_t hx_hip_graph_capture(struct hx_hip_dev *d, const struct hx_split *sp,
                                           struct hx_hip_ctx *c, int *n_kernels, char *why,
                                           size_t why_len)
{
    hipGraph_t graph = NULL;
    hipGraphExec_t exec = NULL;
    const int n0 = c->n_launch;
    hipError_t e = hipStreamBeginCapture(d->stream, hipStreamCaptureModeRelaxed);
    if (e != hipSuccess) {
        hx_hip_fail(e, "hipStreamBeginCapture", why, why_len);
        HX_HIP_IGNORE(hipGetLastError());
        return NULL;
    }
    char serr[256] = "";
    const int st = hx_hip_enqueue(d, sp, c, serr, sizeof serr);
    *n_kernels = c->n_launch - n0;
    c->n_launch = n0;
    e = hipStreamEndCapture(d->stream, &graph);
    if (st != HX_OK)
        snprintf(why, why_len, "capture: %s", serr);
    else if (e != hipSuccess)
        hx_hip_fail(e, "hipStreamEndCapture", why, why_len);
    else if ((e = hx_hip_graph_instantiate(&exec, graph)) != hipSuccess)
        hx_hip_fail(e, "hipGraphInstantiate", why, why_len), exec = NULL;
    if (graph) HX_HIP_IGNORE(hipGraphDestroy(graph));
    if (!exec) HX_HIP_IGNORE(hipGetLastError());
    return exec;
}

/* Runs the split as one graph launch when it can (*done true). *done false: the caller
 * enqueues it with direct launches — a new shape, graphs off, or a graph failure, which this
 * has logged and turned graphs off for. The row metadata is already on its way (scratch). */
static void hx_hip_graph_run(struct hx_hip_dev *d, const struct hx_split *sp, struct hx_hip_ctx *c,
                             bool *done)
{
    struct hx_hip_graphs *g = d->graphs;
    *done = false;
    if (!hx_hip_graph_key(d, sp, c)) return; /* no host memory for the key: direct */
    const uint64_t h = hx_hip_key_hash(g->kbuf, g->klen);
    struct hx_hip_graph_ent *ent = NULL, *victim = &g->ent[0];
    for (int i = 0; i < HX_HIP_GRAPH_CACHE; i++) {
        struct hx_hip_graph_ent *x = &g->ent[i];
        if (x->key && x->hash == h && x->n_key == g->klen &&
            !memcmp(x->key, g->kbuf, g->klen * sizeof *g->kbuf)) {
            ent = x;
            break;
        }
        if (!x->key || (victim->key && x->used < victim->used)) victim = x;
    }
    g->tick++;
    if (!ent) { /* a new shape: remember it */
        if (victim->exec) hx_hip_graphs_idle(d); /* the replaced graph may still run */
        hx_hip_graph_ent_drop(victim);
        victim->key = (uint64_t *)hx_hip_h.malloc_fn(g->klen * sizeof *g->kbuf);
        if (!victim->key) return;
        memcpy(victim->key, g->kbuf, g->klen * sizeof *g->kbuf);
        victim->n_key = g->klen, victim->hash = h, victim->used = g->tick;
        if (g->mode != 2) return; /* captured when it comes again */
        ent = victim;
    }
    ent->used = g->tick;
    char why[320];
    if (!ent->exec) {
        ent->exec = hx_hip_graph_capture(d, sp, c, &ent->n_kernels, why, sizeof why);
        if (!ent->exec) {
            hx_hip_graphs_off(d, why);
            return;
        }
        g->n.captures++;
    }
    hipError_t e = hipGraphLaunch(ent->exec, d->stream);
    if (e != hipSuccess) {
        hx_hip_fail(e, "hipGraphLaunch", why, sizeof why);
        HX_HIP_IGNORE(hipGetLastError());
        hx_hip_graphs_off(d, why);
        return;
    }
    c->n_launch += ent->n_kernels;
    g->n.graph_launches++, g->n.graph_splits++;
    *done = true;
}
