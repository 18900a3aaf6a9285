/*
 * bench-plot.c — `engine bench --plot FILE`: the rows of a run as an SVG bar chart.
 *
 * One panel per group (model and test), each with its own tokens/s axis, because pp and tg
 * figures differ by orders of magnitude; one bar per series (backend, policy, threads) in the
 * same place and colour in every panel.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "bench-model.h"
#include "hx.h"

#define HX_BM_PLOT_BAR 26
#define HX_BM_PLOT_GAP 10
#define HX_BM_PLOT_H 200    /* height of a panel's plot area */
#define HX_BM_PLOT_LEFT 64  /* room for the y-axis labels */

static const char *const hx_bm_palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                            "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

static void hx_bm_xml(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(*s, f);
        }
}

/* A tokens/s figure in at most 5 characters or so: 950, 18.3k, 1.25M. */
static void hx_bm_si(char *out, size_t cap, double v)
{
    if (v >= 1e6) snprintf(out, cap, "%.3gM", v / 1e6);
    else if (v >= 1e3) snprintf(out, cap, "%.3gk", v / 1e3);
    else snprintf(out, cap, "%.3g", v);
}

/* A tick step of 1, 2, 2.5 or 5 times a power of ten giving about 5 ticks up to top. */
static double hx_bm_tick_step(double top)
{
    double raw = top / 5, p = pow(10, floor(log10(raw))), r = raw / p;
    return p * (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10);
}

/* Distinct strings of bars[].group or .series, in order of first appearance. */
static int hx_bm_distinct(const struct hx_bm_out *out, bool series, const char **names, int cap)
{
    int n = 0;
    for (int i = 0; i < out->n_bars; i++) {
        const char *s = series ? out->bars[i].series : out->bars[i].group;
        int j = 0;
        while (j < n && strcmp(names[j], s)) j++;
        if (j == n && n < cap) names[n++] = s;
    }
    return n;
}

static int hx_bm_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

/* The panel of group g at (x0, y0): title, axis, ticks, bars with error bars and values. */
static void hx_bm_plot_panel(FILE *f, const struct hx_bm_out *out, const char *group,
                             const char *const *series, int n_series, int x0, int y0, int w)
{
    double top = 0;
    for (int i = 0; i < out->n_bars; i++)
        if (!strcmp(out->bars[i].group, group))
            top = fmax(top, out->bars[i].median_ts + out->bars[i].stddev_ts);
    double step = hx_bm_tick_step(top > 0 ? top : 1);
    top = ceil((top > 0 ? top : 1) / step - 1e-9) * step;
    int px = x0 + HX_BM_PLOT_LEFT, py = y0 + 40, pw = w - HX_BM_PLOT_LEFT - 12;
    fprintf(f, "<g class=\"panel\" data-group=\"");
    hx_bm_xml(f, group);
    fprintf(f, "\">\n<text x=\"%d\" y=\"%d\" font-weight=\"bold\">", px, y0 + 16);
    hx_bm_xml(f, group);
    fprintf(f, "</text>\n");
    for (int t = 0; t * step <= top * (1 + 1e-9); t++) {
        double v = t * step, y = py + HX_BM_PLOT_H * (1 - v / top);
        char lab[32];
        hx_bm_si(lab, sizeof lab, v);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%s</text>\n",
                px, y, px + pw, y, px - 4, y + 3, lab);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", px, py, px,
            py + HX_BM_PLOT_H);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %d %d)\">tokens/s</text>\n", x0 + 14, py + HX_BM_PLOT_H / 2,
            x0 + 14, py + HX_BM_PLOT_H / 2);
    for (int i = 0; i < out->n_bars; i++) {
        const struct hx_bm_bar *b = &out->bars[i];
        int s = hx_bm_index(series, n_series, b->series);
        if (strcmp(b->group, group) || s < 0) continue;
        double bx = px + HX_BM_PLOT_GAP + s * (HX_BM_PLOT_BAR + HX_BM_PLOT_GAP);
        double h = HX_BM_PLOT_H * b->median_ts / top, ybar = py + HX_BM_PLOT_H - h;
        double lo = fmax(b->median_ts - b->stddev_ts, 0), hi = b->median_ts + b->stddev_ts;
        double ylo = py + HX_BM_PLOT_H * (1 - lo / top), yhi = py + HX_BM_PLOT_H * (1 - hi / top);
        double cx = bx + HX_BM_PLOT_BAR / 2.0;
        bool fail = b->verified == HX_BM_V_FAIL;
        char val[32];
        hx_bm_si(val, sizeof val, b->median_ts);
        fprintf(f, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" "
                "fill=\"%s\"%s data-ts=\"%.3f\" data-stddev=\"%.3f\" data-verified=\"%s\" "
                "data-series=\"", bx, ybar, HX_BM_PLOT_BAR, h,
                hx_bm_palette[s % (int)(sizeof hx_bm_palette / sizeof *hx_bm_palette)],
                fail ? " stroke=\"#d00\" stroke-width=\"2\"" : "", b->median_ts, b->stddev_ts,
                hx_bm_vstate_name[b->verified]);
        hx_bm_xml(f, b->series);
        fprintf(f, "\"><title>");
        hx_bm_xml(f, b->series);
        fprintf(f, ": %.2f ± %.2f tokens/s, verified %s</title></rect>\n", b->median_ts,
                b->stddev_ts, hx_bm_vstate_name[b->verified]);
        if (b->stddev_ts > 0)
            fprintf(f, "<path class=\"err\" d=\"M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8\" "
                    "stroke=\"#222\" fill=\"none\"/>\n", cx, ylo, yhi, cx - 4, ylo, cx - 4, yhi);
        double ytext = fmin(yhi, ybar) - 3;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%s</text>\n",
                cx, ytext, val);
        if (fail)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\" "
                    "fill=\"#d00\" font-weight=\"bold\">FAIL</text>\n", cx, ytext - 10);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d</text>\n",
                cx, py + HX_BM_PLOT_H + 14, s + 1);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n</g>\n", px,
            py + HX_BM_PLOT_H, px + pw, py + HX_BM_PLOT_H);
}

int hx_bm_plot(FILE *f, long long reps, const struct hx_bm_out *out)
{
    enum { CAP = 512 };
    static const char *groups[CAP], *series[CAP];
    int ng = hx_bm_distinct(out, false, groups, CAP), ns = hx_bm_distinct(out, true, series, CAP);
    int w = HX_BM_PLOT_LEFT + 12 + HX_BM_PLOT_GAP + ns * (HX_BM_PLOT_BAR + HX_BM_PLOT_GAP);
    w = w < 220 ? 220 : w;
    int cols = ng < 1 ? 1 : ng, panel_h = HX_BM_PLOT_H + 68;
    while (cols > 1 && cols * w > 1200) cols--;
    int rows = (ng + cols - 1) / cols, width = cols * w < 640 ? 640 : cols * w;
    int legend_y = 44 + rows * panel_h, height = legend_y + 18 * ns + 48;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
    fprintf(f, "<text x=\"12\" y=\"22\" font-size=\"14\" font-weight=\"bold\">engine bench (hx %s):"
            " tokens/s, median ± sample stddev of %lld runs</text>\n", hx_version(),
            reps);
    if (!out->n_bars) fprintf(f, "<text x=\"12\" y=\"60\">no rows were measured</text>\n");
    for (int g = 0; g < ng; g++)
        hx_bm_plot_panel(f, out, groups[g], series, ns, (g % cols) * w, 30 + (g / cols) * panel_h,
                         w);
    for (int s = 0; s < ns; s++) {
        int y = legend_y + 18 * s;
        fprintf(f, "<rect x=\"12\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"30\" y=\"%d\">%d  ", y, hx_bm_palette[s % 10], y + 10, s + 1);
        hx_bm_xml(f, series[s]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "<text x=\"12\" y=\"%d\" font-size=\"10\" fill=\"#555\">Each panel has its own "
            "axis. Error bars: ± one sample stddev.</text>\n<text x=\"12\" y=\"%d\" "
            "font-size=\"10\" fill=\"#555\">A red outline and FAIL: the row failed its check "
            "against %s (engine bench --help).</text>\n</svg>\n", legend_y + 18 * ns + 14,
            legend_y + 18 * ns + 28, HX_BM_VERIFY_REF);
    return 0;
}
