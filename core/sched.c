/*
 * sched.c — the scheduler's lifecycle and its run loop; the layers it stands on share
 * sched-impl.h:
 *
 *   sched-place.c   rules per phase, the tensor-split expansion, the device of every node
 *   sched-cost.c    the cost model: predicted µs of nodes, splits, groups and moves
 *   sched-mem.c     the devices, their memory (slots, KV caches, prepared weights), coherence
 *   sched-verify.c  verify: every op again on a reference device, compared
 *   sched-exec.c    running a placed plan: splits, tensor-split groups, worker threads
 *   sched-plan.c    the dry walk over a plan and its passes: the cost pass, the plan text
 *   sched-auto.c    measured auto and its profile cache
 *
 * Here: which devices to open (cpu always, as the host; the --fallback chain; the policy's,
 * substituted from the chain when absent; verify's reference, as an instance of its own);
 * making the rules (from the policy, by fit's memory search, or by auto) and refusing them if
 * their memory exceeds a device's limit (sched-fit.c), before anything is loaded; preparing at
 * load every weight and KV cache the two phases' plans place on each device; and
 * hx__sched_run: place the batch's graph, run it, read the logits.
 *
 * Recovery: when a device fails during a run (an error, or a split past HX_SPLIT_TIMEOUT_MS)
 * and a fallback chain exists, the device is marked unhealthy, every activation is forgotten,
 * the KV caches are trusted only where the host mirror has them (sched-mem.c), and the whole
 * batch is placed again without that device and re-run from the embedding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched-impl.h"

/* ---- devices --------------------------------------------------------------------------------- */

/* Open a policy device; if it is absent and a fallback chain exists, substitute (logged). */
static int hx__open_policy_dev(struct hx_sched *s, const char *spec,
                               const struct hx_device_config *cfg, int *idx)
{
    int st = hx__open_sdev(s, spec, cfg, idx);
    if (st == HX_OK || s->policy.n_fallback == 0) return st;
    char why[1024];
    snprintf(why, sizeof why, "%s", hx_last_error());
    for (int i = 0; i < s->policy.n_fallback; i++)
        if (hx__open_sdev(s, s->policy.fallback[i], cfg, idx) == HX_OK) {
            HX_LOG_WARN("sched: device '%s' unavailable (%s); substituting %s", spec, why,
                        s->dev[*idx].dev->id);
            return HX_OK;
        }
    return hx__set_error(st, "%s; no device of the fallback chain is available either", why);
}

static int hx__open_devices(struct hx_sched *s, const struct hx_device_config *cfg)
{
    int st = hx__open_sdev(s, "cpu", cfg, &s->host);
    if (st) return st;
    for (int i = 0; i < s->policy.n_fallback; i++) {
        int idx;
        if (hx__open_sdev(s, s->policy.fallback[i], cfg, &idx) == HX_OK)
            s->fb[s->n_fb++] = idx;
        else
            HX_LOG_WARN("sched: fallback device '%s' unavailable: %s", s->policy.fallback[i],
                        hx_last_error());
    }
    for (int i = 0; i < s->policy.n_devs; i++)
        if ((st = hx__open_policy_dev(s, s->policy.devs[i], cfg, &s->pol[i]))) return st;
    return HX_OK;
}

/* ---- the run loop ---------------------------------------------------------------------------- */

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
    int d = hx__first_bit(s->coh.slot[HX_SLOT_LOGITS]);
    struct hx_buffer *b = NULL;
    int st = hx__slot_buf(&s->mem, &s->dev[d], HX_SLOT_LOGITS, &b);
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
    for (int i = 0; i < HX_SLOT_COUNT; i++) s->coh.slot[i] = 0;
    for (int64_t L = 0; L < s->model->hp.n_layer; L++)
        s->coh.kv[L] = (s->coh.kv[L] & ~(1u << failed)) |
                       (s->dev[s->host].kv_k && s->dev[s->host].kv_k[L] ? 1u << s->host : 0);
}

static bool hx__recoverable(int st)
{
    return st == HX_E_DEVICE || st == HX_E_TIMEOUT || st == HX_E_NOMEM || st == HX_E_UNAVAILABLE;
}

static int hx__run_once(struct hx_sched *s, const struct hx_graph *g, struct hx_exec *ex,
                        float *logits_out)
{
    const struct hx_graph *xg;
    int st = hx__place(s, g, &s->rule[ex->b.phase], &xg, &s->stats.n_fallback_ops);
    if (st == HX_OK) st = hx__execute(s, xg, ex);
    if (st) return st;
    hx__note_used(s);
    if ((st = hx__read_logits(s, xg, logits_out)))
        ex->failed = hx__first_bit(s->coh.slot[HX_SLOT_LOGITS]);
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
    struct hx_exec ex = {.b = {tokens, pos, seq, hx__phase_of(g)}, .cancel = cancel};
    s->stats.predicted_us = s->pred_us[ex.b.phase];
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
    hx__verify_run_done(s->v);
    return st;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

/* The load-progress callback for device d: its weight bytes held now of those accounted. */
static void hx__load_progress(struct hx_sched *s, int d)
{
    if (s->load_progress && s->need[d][HX_MEM_WEIGHTS])
        s->load_progress(s->load_progress_data, s->dev[d].dev->id,
                         s->dev[d].alloc[HX_MEM_WEIGHTS], s->need[d][HX_MEM_WEIGHTS]);
}

/* Prepare every weight the plan of phase ph places on each device, at load, telling the
 * load-progress callback after each weight a device did not hold yet. */
static int hx__prepare_for(struct hx_sched *s, const struct hx_graph *g0, enum hx_phase ph,
                           uint32_t *used)
{
    const struct hx_graph *g;
    int st = hx__place(s, g0, &s->rule[ph], &g, &s->stats.n_fallback_ops);
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes; i++) {
        struct hx_sdev *sd = &s->dev[s->assign[i]];
        void *h;
        size_t had = sd->alloc[HX_MEM_WEIGHTS];
        *used |= 1u << s->assign[i];
        st = hx__weight_handle(sd, g->nodes[i].weight, &h);
        if (st == HX_OK) st = hx__weight_handle(sd, g->nodes[i].aux, &h);
        if (st == HX_OK && sd->alloc[HX_MEM_WEIGHTS] != had) hx__load_progress(s, s->assign[i]);
        if (st == HX_OK && g->nodes[i].desc.kind == HX_OP_ATTN)
            st = hx__kv_bufs(&s->mem, sd, g->nodes[i].desc.layer);
    }
    return st;
}

static int hx__prepare_plans(struct hx_sched *s)
{
    struct hx_graph g = {0};
    uint32_t used = 0;
    int st = hx__graph_build(&g, s->model, s->n_batch, s->n_batch - 1, s->mem.n_ctx, s->mem.n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g, HX_PHASE_PREFILL, &used);
    if (st == HX_OK) st = hx__graph_build(&g, s->model, 1, 0, s->mem.n_ctx, s->mem.n_seq);
    if (st == HX_OK) st = hx__prepare_for(s, &g, HX_PHASE_DECODE, &used);
    hx__graph_free(&g);
    /* Devices auto measured but no plan uses: give their memory back (fallback re-allocates). */
    for (int d = 0; st == HX_OK && d < s->n_dev; d++)
        if (!(used & (1u << d)) && d != s->host)
            hx__sdev_free_mem(&s->mem, &s->dev[d]), hx__wmap_release(&s->dev[d]);
    for (int d = 0; st == HX_OK && d < s->n_dev; d++) hx__load_progress(s, d); /* each: ready */
    return st;
}

/* The rules of both phases, and what they put in each device's memory (s->need); a plan that
 * does not fit a device's limit is refused here, before any weight is prepared. */
static int hx__sched_rules(struct hx_sched *s, const struct hx_device_config *cfg)
{
    struct hx_graph g[HX_PHASE_COUNT];
    int st = hx__phase_graphs(s, g);
    if (st) return st;
    if (s->policy.kind == HX_POLICY_AUTO) {
        st = hx__auto_choose(s, cfg, g);
    } else if (s->policy.kind == HX_POLICY_FIT) {
        st = hx__fit_rule(s, g, s->pol, s->policy.n_devs, &s->rule[0]);
        s->rule[1] = s->rule[0];
    } else {
        for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++)
            st = hx__rule_from_policy(s, (enum hx_phase)ph, &s->rule[ph]);
    }
    const struct hx_rule *r[HX_PHASE_COUNT] = {&s->rule[0], &s->rule[1]};
    if (st == HX_OK) st = hx__mem_need(s, g, r, s->need);
    if (st == HX_OK) {
        char what[512];
        snprintf(what, sizeof what, "the plan (prefill %s, decode %s)", s->rule[0].text,
                 s->rule[1].text);
        st = hx__mem_check(s, s->need, what);
    }
    hx__graph_free(&g[0]);
    hx__graph_free(&g[1]);
    return st;
}

int hx__sched_new(const struct hx_sched_params *p, struct hx_sched **out)
{
    *out = NULL;
    struct hx_sched *s = hx__calloc(1, sizeof *s);
    if (!s) return HX_E_NOMEM;
    s->model = s->mem.model = p->model;
    s->policy = *p->policy;
    s->load_progress = p->load_progress, s->load_progress_data = p->load_progress_data;
    s->mem.n_ctx = p->n_ctx, s->mem.n_seq = p->n_seq;
    s->n_batch = p->n_batch, s->n_logits = p->n_logits;
    s->n_prof_rows = HX_MAX(HX_MIN(HX_MIN(p->n_batch, HX_PROF_ROWS), p->n_ctx), 2);
    s->n_threads = p->devcfg.n_threads;
    for (int i = 0; i < HX_SLOT_COUNT; i++) s->mem.slot_cap[i] = HX_MAX(p->n_batch, s->n_prof_rows);
    s->mem.slot_cap[HX_SLOT_XL] = s->mem.slot_cap[HX_SLOT_LOGITS] = p->n_logits;
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) hx__sb_init(&s->why[ph]);
    hx__sb_init(&s->prof_text);
    const char *to = getenv("HX_SPLIT_TIMEOUT_MS");
    s->split_timeout_us = to ? strtod(to, NULL) * 1e3 : 0;
    s->coh.kv = hx__calloc((size_t)p->model->hp.n_layer, sizeof *s->coh.kv);
    int st = s->coh.kv ? hx__open_devices(s, &p->devcfg) : HX_E_NOMEM;
    /* verify's reference: a separate instance, so its buffers never mix with the plan's */
    if (st == HX_OK && s->policy.verify)
        st = hx__verify_new(s->policy.verify_ref, &p->devcfg, &s->mem, &s->v);
    if (st == HX_OK) st = hx__sched_rules(s, &p->devcfg);
    if (st == HX_OK) st = hx__prepare_plans(s);
    if (st) {
        hx__sched_free(s);
        return st;
    }
    *out = s;
    return HX_OK;
}

static void hx__sdev_fini(struct hx_sched *s, struct hx_sdev *sd)
{
    hx__worker_free(sd->worker);
    hx__free(sd->prof.e);
    hx__sdev_close(&s->mem, sd);
}

void hx__sched_free(struct hx_sched *s)
{
    if (!s) return;
    for (int d = 0; d < s->n_dev; d++) hx__sdev_fini(s, &s->dev[d]);
    hx__verify_free(s->v);
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) {
        hx__ts_free(s->rule[ph].ts);
        hx__sb_free(&s->why[ph]);
    }
    hx__sb_free(&s->prof_text);
    hx__graph_free(&s->xg);
    hx__free(s->coh.kv);
    hx__free(s->assign);
    hx__free(s->reason);
    hx__free(s->ops);
    hx__free(s);
}

const struct hx_sched_stats *hx__sched_stats(const struct hx_sched *s)
{
    return &s->stats;
}

_Static_assert(HX_SCHED_MEM_KINDS == HX_MEM_KINDS, "memory kinds");

int hx__sched_mem(const struct hx_sched *s, struct hx_sched_mem *out, int max)
{
    int n = 0;
    for (int d = 0; d < s->n_dev && n < max; d++, n++) {
        const char *from;
        memset(&out[n], 0, sizeof out[n]);
        snprintf(out[n].id, sizeof out[n].id, "%s", hx__id(s, d));
        memcpy(out[n].need, s->need[d], sizeof out[n].need);
        memcpy(out[n].alloc, s->dev[d].alloc, sizeof out[n].alloc);
        size_t b[HX_SCRATCH_BUFS]; /* the backend's own buffers: what they hold now */
        if (hx__dev_scratch_bytes(s->dev[d].dev, NULL, b) == HX_OK)
            for (int k = 0; k < HX_SCRATCH_BUFS; k++) out[n].alloc[HX_MEM_SCRATCH] += b[k];
        out[n].limit = hx__mem_limit(s, d, &from);
        snprintf(out[n].limit_from, sizeof out[n].limit_from, "%s", from);
    }
    return n;
}

void hx__sched_mem_text(const struct hx_sched *s, struct hx_strbuf *sb)
{
    hx__mem_text(s, sb);
}

const char *hx__sched_devices_used(const struct hx_sched *s)
{
    return s->used;
}

const char *hx__sched_rule_text(const struct hx_sched *s, enum hx_phase phase)
{
    return (unsigned)phase < HX_PHASE_COUNT ? s->rule[phase].text : "";
}

int hx__sched_verify_report(const struct hx_sched *s, const struct hx_verify_report **out)
{
    *out = NULL;
    if (!s || !s->policy.verify) return hx__set_error(HX_E_INVAL, "the policy does not verify");
    *out = hx__verify_report(s->v);
    return HX_OK;
}

int hx__sched_verify_twins(struct hx_sched *s)
{
    if (!s || !s->policy.verify) return hx__set_error(HX_E_INVAL, "the policy does not verify");
    return hx__verify_twins_start(s->v);
}

int hx__sched_verify_twin_logits(const struct hx_sched *s, int t, int64_t row, float *out)
{
    if (!s || !s->policy.verify) return hx__set_error(HX_E_INVAL, "the policy does not verify");
    return hx__verify_twin_logits(s->v, t, row, out);
}
