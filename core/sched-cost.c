/*
 * sched-cost.c — the cost model: the predicted µs of a node, a split, a tensor-split group and
 * a move (the cost pass of sched-plan.c adds them up over a plan, for auto's choice and
 * `engine plan`'s "predicted" figures).
 *
 * A node's cost on device d is, in order of trust: its measured time at that shape (the
 * device's profile, sched-auto.c); the nearest measured batch size of the same op scaled by
 * rows and output columns; the backend's estimate_cost; else unknown (-1, costed as 0). A
 * split costs one launch plus each node's time net of its launch; a group, its slowest
 * device's parts (the devices on the host's cores counted as one, the sum of theirs) plus the
 * worker hand-off when more than one synchronous device takes part; a
 * move, each non-host end's latency plus bytes × per-byte cost. Only auto measures profiles
 * (s->have_costs); without them `engine plan` shows no predictions.
 */
#include <stdlib.h>

#include "sched-impl.h"

double hx__xfer_us(const struct hx_sched *s, int a, int b, size_t nb)
{
    double t = 0;
    if (a == b) return 0;
    if (a != s->host)
        t += s->dev[a].prof.xfer_lat_us + (double)nb * s->dev[a].prof.xfer_us_per_byte;
    if (b != s->host)
        t += s->dev[b].prof.xfer_lat_us + (double)nb * s->dev[b].prof.xfer_us_per_byte;
    return t;
}

const struct hx_prof_ent *hx__prof_find(const struct hx_prof *pf, const struct hx_op_desc *d,
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
double hx__node_us(const struct hx_sched *s, int d, const struct hx_node *nd)
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

double hx__split_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j, int d)
{
    double launch = s->dev[d].prof.launch_us, t = launch;
    for (int64_t k = i; k < j; k++) {
        double us = hx__node_us(s, d, &g->nodes[k]);
        t += us > 0 ? HX_MAX(us - launch, 0.0) : 0;
    }
    return t;
}

/* Does device d compute on the host's own cores (the host, a CPU-type device such as ref or
 * lavapipe, a simulator such as npu-sim)? Each was profiled with the cores to itself. */
static bool hx__host_cores(const struct hx_sched *s, int d)
{
    const struct hx_device_info *in = &s->dev[d].dev->info;
    return d == s->host || in->kind == HX_DEVICE_CPU || in->simulated;
}

double hx__group_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i, const int *devs,
                    int n_dev)
{
    double t = 0, t_host = 0;
    int n_sync = 0;
    for (int u = 0; u < n_dev; u++) n_sync += !hx__dev_async(s->dev[devs[u]].dev);
    for (int u = 0; u < n_dev; u++) {
        double launch = s->dev[devs[u]].prof.launch_us, tu = launch;
        for (int64_t k = i; k < i + g->nodes[i].n_parts; k++)
            if (s->assign[k] == devs[u])
                tu += HX_MAX(hx__node_us(s, devs[u], &g->nodes[k]) - launch, 0.0);
        /* devices on the host's cores share them: their parts take about the sum of their
         * times, not the slowest one's (a tensor-split of cpu and npu-sim on 2 cores ran at
         * half cpu_only's prefill where the slowest part predicted 1.7x faster) */
        if (hx__host_cores(s, devs[u]))
            t_host += tu;
        else
            t = HX_MAX(t, tu);
    }
    return HX_MAX(t, t_host) + (n_sync > 1 ? s->handoff_us : 0);
}
