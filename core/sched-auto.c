/*
 * sched-auto.c — the `auto` policy: measure the candidate devices, keep their profiles in a
 * cache file, and pick per phase the candidate rule with the least predicted time.
 *
 * Profile: on first use per device and model shape, every distinct op of the graphs at the
 * profiling batch size (min(n_batch, HX_PROF_ROWS, n_ctx) rows) and at decode is run as its
 * own split on each candidate, after a warm-up, keeping the least of several runs; launch cost
 * is the cheapest op's time; transfers are timed between the host and each device. Profiles
 * are saved to (and loaded from) $HX_PROFILE_DIR or the XDG cache, keyed by backend, device,
 * driver, engine version and threads; HX_AUTO_PROFILE=refresh re-measures, HX_AUTO_COST=model
 * uses the backends' estimate_cost instead of measuring ops.
 *
 * Choice: candidates are the singles on each device, gemm-offload onto each non-host device,
 * an op-map of each class's fastest device, a tensor-split by matmul throughput, and fit's
 * split over the candidates (fastest single first); each is placed and costed by the cost pass
 * (sched-cost.c), and one whose memory does not fit the devices (sched-fit.c) is never chosen.
 * A multi-device plan must be predicted HX_AUTO_MARGIN faster than the best single one. A
 * model that no fit split of the candidates holds is refused before anything is measured. The reasons are kept as text for
 * `engine plan`. Weights prepared while measuring are released: the chosen plans prepare theirs.
 * What the measuring runs grow a backend's own buffers to (scratch, kept by the backend) is
 * asked of it per op measured and added to the plan's scratch (sched-fit.c): measuring runs
 * ops on every candidate, and the prefill at n_prof_rows rows, which can exceed the batch.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sched-impl.h"

/* ---- auto: profile --------------------------------------------------------------------------- */

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
    int32_t *pos = meta + g->n_rows;
    const struct hx_batch_rows rows = {.tokens = meta, .pos = pos, .seq = meta + 2 * g->n_rows};
    for (int64_t r = 0; r < g->n_rows; r++)
        pos[r] =
            (int32_t)(g->n_rows > 1 ? r % s->mem.n_ctx : HX_MIN(s->n_prof_rows, s->mem.n_ctx - 1));
    int st = HX_OK;
    for (int64_t k = 0; k < g->n_nodes && st == HX_OK; k++) {
        const struct hx_node *nd = &g->nodes[k];
        if (!hx__dev_supports(sd->dev, &nd->desc) ||
            hx__prof_find(&sd->prof, &nd->desc, true, true))
            continue;
        if (!sd->prof.n_measured) st = hx__prof_zero(s, sd);
        struct hx_op op;
        if (st == HX_OK) st = hx__build_op(&s->mem, g, sd, nd, &op);
        const struct hx_split sp = hx__split_of(&op, 1, g->n_rows, &rows);
        /* the backend's buffers grow to this run's need and keep it: the plan counts it */
        size_t b[HX_SCRATCH_BUFS];
        if (st == HX_OK) st = hx__dev_scratch_bytes(sd->dev, &sp, b);
        for (int i = 0; st == HX_OK && i < HX_SCRATCH_BUFS; i++)
            sd->prof_scratch[i] = HX_MAX(sd->prof_scratch[i], b[i]);
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
    bool model = mode && !strcmp(mode, "model") && hx__dev_has_cost_model(sd->dev);
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

/* ---- auto: choice ---------------------------------------------------------------------------- */

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
        if (!strcmp(e->ops->name, "cpu") || !strcmp(e->ops->name, "ref")) continue;
        for (int k = 0; k < e->n_devices && n < HX_MAX_DEVICES; k++) {
            struct hx_device_info info;
            char spec[80];
            int idx;
            if (hx__backend_device_info(e, k, &info) != HX_OK || info.simulated) continue;
            snprintf(spec, sizeof spec, "%s:%d", e->ops->name, k);
            if (hx__open_sdev(s, spec, cfg, &idx) == HX_OK)
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
                               int n_cand, const struct hx_rule *fit, struct hx_rule *rules)
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
    if (fit) hx__add_rule(s, rules, &n, fit);
    return n;
}

/* Does rule r, run in both phases, fit every device's memory? (why: the refusal, if not) */
static bool hx__auto_fits(struct hx_sched *s, const struct hx_graph *gm, const struct hx_rule *r,
                          char *why, size_t len)
{
    size_t (*need)[HX_MEM_KINDS] = hx__calloc(HX_MAX_DEVICES, sizeof *need);
    const struct hx_rule *rr[HX_PHASE_COUNT] = {r, r};
    int st = need ? hx__mem_need(s, gm, rr, need) : HX_E_NOMEM;
    if (st == HX_OK) st = hx__mem_check(s, need, r->text);
    hx__free(need);
    if (st) snprintf(why, len, "%s", hx_last_error());
    return st == HX_OK;
}

static int hx__auto_pick(struct hx_sched *s, enum hx_phase ph, const struct hx_graph *g,
                         const struct hx_graph *gm, struct hx_rule *rules, int n)
{
    double us[HX_MAX_RULES] = {0};
    bool fits[HX_MAX_RULES];
    char why[HX_MAX_RULES][160];
    int best = -1, single = -1;
    for (int i = 0; i < n; i++) {
        why[i][0] = '\0';
        fits[i] = hx__auto_fits(s, gm, &rules[i], why[i], sizeof why[i]);
        if (!fits[i] || hx__plan_cost(s, g, &rules[i], &us[i])) us[i] = INFINITY;
        if (fits[i] && (best < 0 || us[i] < us[best])) best = i;
        if (fits[i] && rules[i].kind == HX_POLICY_SINGLE && (single < 0 || us[i] < us[single]))
            single = i;
    }
    if (best < 0) {
        for (int i = 0; i < n; i++) hx__ts_free(rules[i].ts);
        return hx__set_error(HX_E_NOMEM, "auto: no candidate plan fits the devices' memory (%s)",
                             n ? why[n - 1] : "no candidates");
    }
    if (single < 0) single = best;
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
        if (i != best && fits[i])
            hx__sb_printf(sb, "    rejected %-44s predicted %.1f us (%+.1f%%)\n", rules[i].text,
                          us[i], 100.0 * (us[i] - us[best]) / HX_MAX(us[best], 1e-9));
        else if (i != best)
            hx__sb_printf(sb, "    rejected %-44s %s\n", rules[i].text, why[i]);
    HX_LOG_INFO("auto: %s: %s, predicted %.1f us", ph == HX_PHASE_PREFILL ? "prefill" : "decode",
                rules[best].text, us[best]);
    s->rule[ph] = rules[best];
    s->pred_us[ph] = us[best];
    for (int i = 0; i < n; i++)
        if (i != best) hx__ts_free(rules[i].ts);
    return HX_OK;
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

/* fit over the candidates, fastest first (by each single plan's predicted decode time; before
 * measuring: the others before the host). */
static int hx__auto_fit(struct hx_sched *s, const struct hx_graph *gm, const struct hx_graph *gd,
                        const int *cand, int n_cand, struct hx_rule *fit)
{
    int order[HX_MAX_DEVICES], n = 0;
    double t[HX_MAX_DEVICES];
    for (int u = 0; u < n_cand; u++) {
        struct hx_rule r;
        hx__rule_init(&r, HX_POLICY_SINGLE);
        r.dev[0] = cand[u], r.n_dev = 1;
        t[u] = cand[u] == s->host ? 1e300 : 0;
        if (gd && hx__plan_cost(s, gd, &r, &t[u])) t[u] = INFINITY;
        int k = n++;
        while (k > 0 && t[order[k - 1]] > t[u]) order[k] = order[k - 1], k--;
        order[k] = u;
    }
    int devs[HX_MAX_DEVICES];
    for (int i = 0; i < n; i++) devs[i] = cand[order[i]];
    return hx__fit_rule(s, gm, devs, n, fit);
}

int hx__auto_choose(struct hx_sched *s, const struct hx_device_config *cfg,
                    const struct hx_graph *gm)
{
    int cand[HX_MAX_DEVICES], n_cand = hx__auto_devices(s, cfg, cand), st = HX_OK;
    struct hx_graph g[HX_PHASE_COUNT] = {{0}};
    struct hx_rule fit;
    /* A model that fits no split of the candidates is refused before anything is measured. */
    st = hx__auto_fit(s, gm, NULL, cand, n_cand, &fit);
    if (st) {
        char why[1024];
        snprintf(why, sizeof why, "%s", hx_last_error());
        return hx__set_error(st, "auto: %s", why);
    }
    st = hx__graph_build(&g[0], s->model, s->n_prof_rows, s->n_prof_rows - 1, s->mem.n_ctx,
                         s->mem.n_seq);
    if (st == HX_OK) st = hx__graph_build(&g[1], s->model, 1, 0, s->mem.n_ctx, s->mem.n_seq);
    for (int u = 0; u < n_cand && st == HX_OK; u++) {
        if ((st = hx__prof_device(s, cand[u], g)) == HX_OK || cand[u] == s->host) continue;
        /* A device that fails while being measured is no candidate (and no longer trusted). */
        HX_LOG_WARN("%s; dropping %s from auto's candidates", hx_last_error(), hx__id(s, cand[u]));
        s->dev[cand[u]].dev->healthy = false;
        memmove(cand + u, cand + u + 1, (size_t)(n_cand - u - 1) * sizeof *cand);
        n_cand--, u--, st = HX_OK;
    }
    /* What measuring allocated is given back: the plan allocates what sched-fit.c accounts. */
    for (int d = 0; d < s->n_dev; d++)
        hx__wmap_release(&s->dev[d]), hx__sdev_free_mem(&s->mem, &s->dev[d]);
    if (st == HX_OK && n_cand > 1) s->handoff_us = hx__handoff_us(s, cand[1]);
    struct hx_rule *rules = st == HX_OK ? hx__calloc(HX_MAX_RULES, sizeof *rules) : NULL;
    if (st == HX_OK && !rules) st = HX_E_NOMEM;
    s->have_costs = st == HX_OK;
    bool fit_cand = n_cand > 1 && st == HX_OK &&
                    hx__auto_fit(s, gm, &g[HX_PHASE_DECODE], cand, n_cand, &fit) == HX_OK;
    for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++) {
        int n = hx__auto_candidates(s, &g[ph], cand, n_cand, fit_cand ? &fit : NULL, rules);
        st = hx__auto_pick(s, (enum hx_phase)ph, &g[ph], gm, rules, n);
    }
    if (st == HX_OK && fit_cand) {
        /* each phase's choice fits; both together might not (one device holding the union) */
        size_t (*need)[HX_MEM_KINDS] = hx__calloc(HX_MAX_DEVICES, sizeof *need);
        const struct hx_rule *rr[HX_PHASE_COUNT] = {&s->rule[0], &s->rule[1]};
        st = need ? hx__mem_need(s, gm, rr, need) : HX_E_NOMEM;
        if (st == HX_OK && hx__mem_check(s, need, "auto") != HX_OK) {
            /* One plan for both phases: decode's choice if it fits alone (decode is what every
             * token pays; prefill under it is at worst that device's prefill), else
             * prefill's, else fit's. A choice with tensor-split state is not shared. */
            char why[512];
            snprintf(why, sizeof why, "%s", hx_last_error());
            struct hx_rule both = fit;
            const char *which = "fit's plan";
            static const enum hx_phase order[2] = {HX_PHASE_DECODE, HX_PHASE_PREFILL};
            for (int k = 0; k < 2 && st == HX_OK; k++) {
                const struct hx_rule *c = &s->rule[order[k]];
                if (c->ts) continue;
                const struct hx_rule *one[HX_PHASE_COUNT] = {c, c};
                memset(need, 0, HX_MAX_DEVICES * sizeof *need);
                st = hx__mem_need(s, gm, one, need);
                if (st == HX_OK && hx__mem_check(s, need, "auto") == HX_OK) {
                    both = *c;
                    which = order[k] == HX_PHASE_DECODE ? "decode's choice" : "prefill's choice";
                    break;
                }
            }
            hx__clear_error();
            HX_LOG_INFO("auto: the phases' choices do not fit together (%s); %s for both", why,
                        which);
            for (int ph = 0; ph < HX_PHASE_COUNT && st == HX_OK; ph++) {
                hx__ts_free(s->rule[ph].ts); /* both's is NULL: fit's, or a choice without */
                s->rule[ph] = both;
                hx__rule_text(s, &s->rule[ph]);
                hx__sb_printf(&s->why[ph],
                              "  auto: the phases' choices do not fit together: %s for both\n",
                              which);
            }
        }
        hx__free(need);
    }
    if (st == HX_OK) hx__auto_prof_text(s, cand, n_cand);
    hx__free(rules);
    hx__graph_free(&g[0]);
    hx__graph_free(&g[1]);
    return st;
}
