/*
 * bench-model.h — what `engine bench -m` (cmd-bench-model.c) shares with its SVG chart
 * (bench-plot.c): the rows printed so far, one bar each, and the state of their checks.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#define HX_BM_VERIFY_REF "ref" /* the device every check compares with */

enum hx_bm_vstate { HX_BM_V_OFF, HX_BM_V_SKIPPED, HX_BM_V_YES, HX_BM_V_FAIL };
static const char *const hx_bm_vstate_name[] = {"off", "skipped", "yes", "FAIL"};

/* One bar of --plot, and what the markdown footer says about a row's check. */
struct hx_bm_bar {
    char group[200];          /* "model test" */
    char series[224];         /* "backend · policy · tN" */
    double median_ts, stddev_ts;
    enum hx_bm_vstate verified;
    char note[320];
};

/* What has been printed so far (for json separators, the markdown footnotes and the plot). */
struct hx_bm_out {
    int n_rows;
    bool any_cached;   /* a tg row whose weights fit in the last-level cache */
    bool any_failed;   /* a row failed its check */
    struct hx_bm_bar *bars;
    int n_bars, cap_bars;
};

/* Write the chart of every row printed to f (left open: the caller commits the file): one
 * panel per group (model and test), one bar per series. Returns 0. */
int hx_bm_plot(FILE *f, long long reps, const struct hx_bm_out *out);
