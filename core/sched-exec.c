/*
 * sched-exec.c — running a placed plan: its splits, its tensor-split groups, and the worker
 * threads those use.
 *
 * A split (nodes [i, j) on one device, sched-place.c's hx__step_end) runs as one hx__dev_run:
 * first each node's inputs are fetched to the device (sched-mem.c, which keeps the coherence
 * state and counts the bytes), then the ops are built against that device's memory, run and
 * synchronized; attention's new K/V rows are mirrored to the host when there is a fallback
 * chain. A split that answers later than HX_SPLIT_TIMEOUT_MS (when set) counts as a timed-out
 * device.
 *
 * A tensor-split group's parts are enqueued on their devices together: asynchronous devices
 * first, every synchronous device but one on its own persistent worker thread, the last on
 * the calling thread; then everything is waited for, and every part's columns are copied to
 * part 0's device, which becomes the slot's only valid holder.
 *
 * Under verify every node is its own split, and verify (sched-verify.c) is called before it
 * (to copy its inputs to the reference) and after it (to run it there and compare).
 *
 * On a failure ex->failed names the failed device, for the run loop's recovery (sched.c).
 * The order of fetches, runs and joins here is what sched-plan.c's dry walk mirrors.
 */
#include <math.h>
#include <pthread.h>

#include "sched-impl.h"

/* ---- ops ------------------------------------------------------------------------------------- */

static int hx__ensure_ops_cap(struct hx_sched *s, int64_t n)
{
    if (n <= s->ops_cap) return HX_OK;
    struct hx_op *o = hx__realloc(s->ops, (size_t)n * sizeof *o);
    if (!o) return HX_E_NOMEM;
    s->ops = o, s->ops_cap = n;
    return HX_OK;
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

/* ---- splits ---------------------------------------------------------------------------------- */

/* Nodes [i, j) on device d as one split. */
static int hx__run_split(struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j, int d,
                         struct hx_exec *ex)
{
    struct hx_sdev *sd = &s->dev[d];
    int st = HX_OK;
    s->stats.n_splits++;
    sd->used = true;
    for (int64_t k = i; st == HX_OK && k < j; k++) {
        const struct hx_node *nd = &g->nodes[k];
        st = hx__fetch_inputs(s, g, d, nd);
        if (st == HX_OK && hx__verify_on(s->v)) hx__verify_before(s->v, g, nd, sd);
        hx__coh_wrote(&s->coh, nd, d);
        if (st == HX_OK) st = hx__build_op(&s->mem, g, sd, nd, &s->ops[k - i]);
    }
    if (st == HX_OK) {
        const struct hx_split sp = hx__split_of(s->ops, j - i, g->n_rows, &ex->b);
        double t0 = hx__time_us();
        st = hx__deadline(s, sd->dev, t0, hx__run_sync(sd->dev, &sp));
        for (int64_t k = i; st == HX_OK && k < j; k++)
            if (g->nodes[k].desc.kind == HX_OP_ATTN)
                st = hx__mirror_kv(s, g, d, g->nodes[k].desc.layer, ex->b.pos, ex->b.seq);
    }
    if (st) return ex->failed = d, st;
    for (int64_t k = i; k < j && hx__verify_on(s->v) && st == HX_OK; k++)
        st = hx__verify_after(s->v, g, k, sd, &ex->b);
    if (st) ex->failed = d;
    return st;
}

/* ---- tensor-split groups: jobs and worker threads -------------------------------------------- */

struct hx_job {
    int d;
    struct hx_device *dev;
    struct hx_split sp;
    int st;
    bool on_worker;
};

static void hx__job_main(struct hx_job *j)
{
    j->st = hx__run_sync(j->dev, &j->sp);
}

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

void hx__worker_free(struct hx_worker *w)
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
        if (hx__dev_async(jobs[k].dev))
            jobs[k].st = hx__dev_run(jobs[k].dev, &jobs[k].sp);
        else if (inline_job < 0)
            inline_job = k;
        else if ((w = hx__worker_get(&s->dev[jobs[k].d])))
            jobs[k].on_worker = true, hx__worker_submit(w, &jobs[k]);
    }
    for (int k = 0; k < n; k++)
        if (!hx__dev_async(jobs[k].dev) && !jobs[k].on_worker) hx__job_main(&jobs[k]);
    int first = HX_OK;
    *failed = -1;
    for (int k = 0; k < n; k++) {
        if (jobs[k].on_worker)
            hx__worker_wait(s->dev[jobs[k].d].worker);
        else if (hx__dev_async(jobs[k].dev)) {
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
                st = hx__build_op(&s->mem, g, &s->dev[devs[u]], &g->nodes[k], &s->ops[pos++]);
        jobs[u] = (struct hx_job){.d = devs[u],
                                  .dev = s->dev[devs[u]].dev,
                                  .sp = {.struct_size = sizeof jobs[u].sp,
                                         .ops = s->ops + first,
                                         .n_ops = pos - first,
                                         .n_rows = g->n_rows,
                                         .tokens = ex->b.tokens,
                                         .pos = ex->b.pos,
                                         .seq = ex->b.seq}};
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
    size_t w = (size_t)g->slot_width[r->slot], nb = hx__part_bytes(nd);
    hx__count_move(&s->stats, nb);
    struct hx_buffer *a = s->dev[from].slot[r->slot], *b = NULL;
    int st = hx__slot_buf(&s->mem, &s->dev[to], r->slot, &b);
    bool whole = (size_t)r->n_cols == w;
    for (int64_t row = 0; st == HX_OK && row < (whole ? 1 : r->n_rows); row++) {
        size_t off = (((size_t)(r->row + row)) * w + (size_t)r->col) * sizeof(float);
        st = hx__dev_copy(b, off, a, off, whole ? nb : (size_t)r->n_cols * sizeof(float));
    }
    if (st) ex->failed = from;
    return st;
}

/* The parts of the group at i, launched at once; then joined on part 0's device. */
static int hx__run_group(struct hx_sched *s, const struct hx_graph *g, int64_t i,
                         struct hx_exec *ex)
{
    const struct hx_node *nd0 = &g->nodes[i];
    int64_t n = nd0->n_parts;
    int devs[HX_MAX_DEVICES];
    int n_dev = hx__group_devices(s, g, i, devs), join = s->assign[i], st = HX_OK;
    s->stats.n_parallel++;
    s->stats.n_splits += n_dev;
    for (int64_t k = i; k < i + n; k++) {
        s->dev[s->assign[k]].used = true;
        if ((st = hx__fetch_inputs(s, g, s->assign[k], &g->nodes[k])))
            return ex->failed = s->assign[k], st;
    }
    if (hx__verify_on(s->v)) hx__verify_before(s->v, g, nd0, &s->dev[join]);
    if ((st = hx__group_launch(s, g, i, devs, n_dev, ex))) return st;
    for (int64_t k = i + 1; k < i + n && st == HX_OK; k++)
        if (s->assign[k] != join) st = hx__join_part(s, g, &g->nodes[k], s->assign[k], join, ex);
    hx__coh_wrote(&s->coh, nd0, join);
    for (int64_t k = i; k < i + n && st == HX_OK; k++)
        if ((st = hx__verify_after(s->v, g, k, &s->dev[s->assign[k]], &ex->b)))
            ex->failed = s->assign[k];
    return st;
}

/* ---- the plan -------------------------------------------------------------------------------- */

int hx__execute(struct hx_sched *s, const struct hx_graph *g, struct hx_exec *ex)
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
        int64_t j = hx__step_end(s, g, i, hx__verify_on(s->v));
        st = hx__run_split(s, g, i, j, s->assign[i], ex);
        i = j;
    }
    return st;
}

double hx__handoff_us(struct hx_sched *s, int d)
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
    return isfinite(best) ? best : 0;
}
