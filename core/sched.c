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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "sched-impl.h"

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
    s->v.on = true;
    return HX_OK;
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
    int st = hx__place(s, g, &s->rule[ex->phase], &xg, &s->stats.n_fallback_ops);
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
        most = HX_MAX(most, (size_t)s->mem.slot_cap[i] * (size_t)width[i] * sizeof(float));
    void *zero = hx__calloc(1, most);
    int st = zero ? HX_OK : HX_E_NOMEM;
    for (int i = 0; i < HX_SLOT_COUNT && st == HX_OK; i++) {
        struct hx_buffer *b = NULL;
        st = hx__slot_buf(&s->mem, sd, i, &b);
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
        pos[r] = (int32_t)(g->n_rows > 1 ? r % s->mem.n_ctx : HX_MIN(s->n_prof_rows, s->mem.n_ctx - 1));
    int st = HX_OK;
    for (int64_t k = 0; k < g->n_nodes && st == HX_OK; k++) {
        const struct hx_node *nd = &g->nodes[k];
        if (!hx__dev_supports(sd->dev, &nd->desc) ||
            hx__prof_find(&sd->prof, &nd->desc, true, true))
            continue;
        if (!sd->prof.n_measured) st = hx__prof_zero(s, sd);
        struct hx_op op;
        if (st == HX_OK) st = hx__build_op(&s->mem, g, sd, nd, &op);
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
        if (hx__plan_cost(s, g, &rules[i], &us[i])) us[i] = INFINITY;
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

static int hx__auto_choose(struct hx_sched *s, const struct hx_device_config *cfg)
{
    int cand[HX_MAX_DEVICES], n_cand = hx__auto_devices(s, cfg, cand), st = HX_OK;
    struct hx_graph g[HX_PHASE_COUNT] = {{0}};
    st = hx__graph_build(&g[0], s->model, s->n_prof_rows, s->n_prof_rows - 1, s->mem.n_ctx, s->mem.n_seq);
    if (st == HX_OK) st = hx__graph_build(&g[1], s->model, 1, 0, s->mem.n_ctx, s->mem.n_seq);
    for (int u = 0; u < n_cand && st == HX_OK; u++) {
        if ((st = hx__prof_device(s, cand[u], g)) == HX_OK || cand[u] == s->host) continue;
        /* A device that fails while being measured is no candidate (and no longer trusted). */
        HX_LOG_WARN("%s; dropping %s from auto's candidates", hx_last_error(), hx__id(s, cand[u]));
        s->dev[cand[u]].dev->healthy = false;
        memmove(cand + u, cand + u + 1, (size_t)(n_cand - u - 1) * sizeof *cand);
        n_cand--, u--, st = HX_OK;
    }
    for (int d = 0; d < s->n_dev; d++) hx__wmap_release(&s->dev[d]); /* re-prepared for the plan */
    if (st == HX_OK && n_cand > 1) s->handoff_us = hx__handoff_us(s, cand[1]);
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
    const struct hx_graph *g;
    int st = hx__place(s, g0, &s->rule[ph], &g, &s->stats.n_fallback_ops);
    for (int64_t i = 0; st == HX_OK && i < g->n_nodes; i++) {
        struct hx_sdev *sd = &s->dev[s->assign[i]];
        void *h;
        *used |= 1u << s->assign[i];
        st = hx__weight_handle(sd, g->nodes[i].weight, &h);
        if (st == HX_OK) st = hx__weight_handle(sd, g->nodes[i].aux, &h);
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
    s->model = s->mem.model = p->model;
    s->policy = *p->policy;
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

static void hx__sdev_fini(struct hx_sched *s, struct hx_sdev *sd)
{
    hx__worker_free(sd->worker);
    if (!sd->dev) return;
    hx__dev_synchronize(sd->dev);
    hx__sdev_free_mem(&s->mem, sd);
    hx__wmap_release(sd);
    hx__free(sd->prof.e);
    hx__device_close(sd->dev);
}

void hx__sched_free(struct hx_sched *s)
{
    if (!s) return;
    for (int d = 0; d < s->n_dev; d++) hx__sdev_fini(s, &s->dev[d]);
    hx__sdev_fini(s, &s->v.sd);
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
    hx__free(s->coh.kv);
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

