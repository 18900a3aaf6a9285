/*
 * backend-ops-check.c — the comparator of test-backend-ops: a device's result against ref's.
 * Every byte outside the output unchanged (guards, stride gaps, inputs, stale KV rows) and the
 * KV cache bit-identical to ref's; no NaN/Inf; NMSE within the op's threshold and each row's
 * worst element within 8·sqrt(threshold) of the row's RMS, or, for MATMUL, within the error
 * model of the device's numerics computed from the case's own data (core/numerics.h). And a
 * self-check that the comparator catches what it must.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-ops.h"

/* ---- comparison ------------------------------------------------------------------------------ */

static void hx_t_why(struct hx_t_cmp *r, const char *fmt, ...) HX_PRINTF(2, 3);
static void hx_t_why(struct hx_t_cmp *r, const char *fmt, ...)
{
    r->ok = false;
    if (r->why[0]) return; /* keep the first reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
}

/* Is byte offset `at` of buffer b inside tensor t? */
static bool hx_t_inside(const struct hx_t_tensor *t, int b, size_t at)
{
    if (t->buf != b || at < t->off) return false;
    size_t rel = at - t->off, row = rel / t->stride, col = (rel % t->stride) / 4;
    return row < (size_t)t->rows && col < (size_t)t->cols;
}

/* Where a stray write landed, in words relative to the output. */
static void hx_t_where(const struct hx_t_case *c, int b, size_t at, char *out, size_t len)
{
    const struct hx_t_tensor *t = &c->dst;
    if (b != t->buf) {
        snprintf(out, len, "input buffer %d byte %zu", b, at);
    } else if (at < t->off) {
        snprintf(out, len, "guard %zu bytes before the output", t->off - at);
    } else {
        size_t rel = at - t->off, row = rel / t->stride;
        if (row >= (size_t)t->rows)
            snprintf(out, len, "guard %zu bytes after the output",
                     rel - (size_t)(t->rows - 1) * t->stride - (size_t)t->cols * 4);
        else
            snprintf(out, len, "row %zu, column %zu of a %lld-column output (stride gap)", row,
                     (rel % t->stride) / 4, (long long)t->cols);
    }
}

/* Bytes outside the output must be as written; cache buffers must equal ref's exactly. */
static void hx_t_check_untouched(const struct hx_t_case *c, const struct hx_t_out *got,
                                 const struct hx_t_out *want, struct hx_t_cmp *r)
{
    for (int b = 0; b < c->n_buf; b++) {
        const size_t nw = c->buf[b].nbytes / 4;
        const bool cache = c->has_cache && (b == c->kc.buf || b == c->vc.buf);
        for (size_t i = 0; i < nw; i++) {
            if (cache) {
                if (got->buf[b][i] == want->buf[b][i]) continue;
                const struct hx_t_tensor *t = b == c->kc.buf ? &c->kc : &c->vc;
                size_t at = i * 4 < t->off ? 0 : (i * 4 - t->off) / t->stride;
                hx_t_why(r, "%s cache row %zu differs from ref (word %zu)",
                         b == c->kc.buf ? "K" : "V", at, i);
                return;
            }
            if (hx_t_inside(&c->dst, b, i * 4) || got->buf[b][i] == c->buf[b].init[i]) continue;
            char where[160];
            hx_t_where(c, b, i * 4, where, sizeof where);
            hx_t_why(r, "wrote outside its output: %s (0x%08x)", where, got->buf[b][i]);
            return;
        }
    }
}

/* NMSE over the output, NaN/Inf, and each row's worst element against 8·sqrt(thr)·rms. */
static void hx_t_check_values(const struct hx_t_case *c, const struct hx_t_out *got,
                              const struct hx_t_out *want, struct hx_t_cmp *r)
{
    const struct hx_t_tensor *t = &c->dst;
    double num = 0, den = 0, worst = 0;
    int64_t bad_nan = -1, want_nan = -1;
    for (int64_t row = 0; row < t->rows; row++) {
        const float *g = hx_t_at(t, got->buf[t->buf], row), *w = hx_t_at(t, want->buf[t->buf], row);
        double rn = 0, rd = 0, rmax = 0;
        int64_t rcol = 0;
        for (int64_t j = 0; j < t->cols; j++) {
            if (!isfinite(g[j]) && bad_nan < 0) bad_nan = row * t->cols + j;
            if (!isfinite(w[j]) && want_nan < 0) want_nan = row * t->cols + j;
            double e = (double)g[j] - (double)w[j];
            rn += e * e, rd += (double)w[j] * w[j];
            if (fabs(e) > rmax || isnan(e)) rmax = fabs(e), rcol = j;
        }
        num += rn, den += rd;
        double rms = sqrt(rd / (double)t->cols);
        if (rms == 0) rms = 1e-30;
        double lim = hx__op_elem_limit(c->thr), rel = rmax / rms;
        double ratio = lim > 0 ? rel / lim : (rel > 0 ? INFINITY : 0);
        if (isnan(ratio)) ratio = INFINITY;
        if (row == 0 || ratio > worst) {
            worst = ratio, r->maxrel = rel, r->maxrel_lim = lim;
            r->worst_row = row, r->worst_col = rcol;
        }
    }
    r->nmse = den > 0 ? num / den : num;
    r->thr = c->thr;
    if (want_nan >= 0) hx_t_why(r, "ref produced NaN/Inf at element %lld", (long long)want_nan);
    if (bad_nan >= 0)
        hx_t_why(r, "NaN/Inf at row %lld col %lld", (long long)(bad_nan / t->cols),
                 (long long)(bad_nan % t->cols));
    if (!(r->nmse <= c->thr)) hx_t_why(r, "NMSE above threshold");
    if (!(worst <= 1.0))
        hx_t_why(r, "row %lld col %lld off by %.3g x rms (limit %.3g)", (long long)r->worst_row,
                 (long long)r->worst_col, r->maxrel, r->maxrel_lim);
}

/* MATMUL against the error model of the device's numerics (core/numerics.h): Σ e² within
 * hx__mm_allowed of Σ var and Σ typ; each |e| within hx__mm_elem_limit. */
static void hx_t_check_matmul(const struct hx_t_case *c, const struct hx_t_out *got,
                              const struct hx_t_out *want, bool int8_row, struct hx_t_cmp *r)
{
    const struct hx_t_tensor *t = &c->dst;
    const struct hx_t_weight *tw = c->w;
    const int64_t nb = tw->nb, n = t->cols, k = tw->w.n_cols;
    const double sc2 = (double)tw->w.scale * tw->w.scale;
    double se = 0, sy = 0, sv = 0, st = 0, worst = -1;
    int64_t bad_nan = -1, want_nan = -1;
    for (int64_t row = 0; row < t->rows; row++) {
        const float *g = hx_t_at(t, got->buf[t->buf], row), *w = hx_t_at(t, want->buf[t->buf], row);
        const double *s = (int8_row ? c->s8 : c->s) + row * nb, *xm = c->xm + row * nb;
        for (int64_t j = 0; j < n; j++) {
            const double *dw = int8_row && tw->dw ? tw->dw + j * nb : NULL;
            double var, typ;
            hx__mm_output(nb, s, xm, tw->e + j * nb, dw, sc2, &var, &typ);
            if (!isfinite(g[j]) && bad_nan < 0) bad_nan = row * n + j;
            if (!isfinite(w[j]) && want_nan < 0) want_nan = row * n + j;
            const double err = (double)g[j] - (double)w[j];
            se += err * err, sy += (double)w[j] * w[j], sv += var, st += typ;
            const double lim = hx__mm_elem_limit(var, typ, k), ratio = fabs(err) / lim;
            if (ratio > worst || isnan(err)) {
                worst = isnan(err) ? INFINITY : ratio;
                r->worst_row = row, r->worst_col = j;
                r->maxrel = fabs(err) / sqrt(typ), r->maxrel_lim = lim / sqrt(typ);
            }
        }
    }
    const double allowed = hx__mm_allowed(sv, st, hx__mm_dof_iid(t->rows, n, k), k);
    r->nmse = sy > 0 ? se / sy : se;
    r->thr = sy > 0 ? allowed / sy : allowed;
    if (want_nan >= 0) hx_t_why(r, "ref produced NaN/Inf at element %lld", (long long)want_nan);
    if (bad_nan >= 0)
        hx_t_why(r, "NaN/Inf at row %lld col %lld", (long long)(bad_nan / n),
                 (long long)(bad_nan % n));
    if (!(se <= allowed)) hx_t_why(r, "NMSE above threshold");
    if (!(worst <= 1.0))
        hx_t_why(r, "row %lld col %lld off by %.3g x its typical size (limit %.3g)",
                 (long long)r->worst_row, (long long)r->worst_col, r->maxrel, r->maxrel_lim);
}

void hx_t_compare(const struct hx_t_case *c, const struct hx_t_out *got,
                  const struct hx_t_out *want, bool int8_row, struct hx_t_cmp *r)
{
    memset(r, 0, sizeof *r);
    r->ok = true;
    if (got->status != HX_OK) {
        hx_t_why(r, "%s", got->err);
        return;
    }
    hx_t_check_untouched(c, got, want, r);
    if (c->desc.kind == HX_OP_MATMUL)
        hx_t_check_matmul(c, got, want, int8_row, r);
    else
        hx_t_check_values(c, got, want, r);
}

/* ---- self-check of the comparator ------------------------------------------------------------ */

/* The checker must catch one wrong column in a long row, one stray word in a guard or a
 * stride gap, a NaN, and a changed KV row; a checker that cannot fail tests nothing. */
int hx_t_selfcheck(void)
{
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ADD, 3);
    snprintf(c.label, sizeof c.label, "self-check");
    c.dst = hx_t_slice(&c, 3, 4, 151936, 2);
    c.kc = hx_t_alone(&c, 4, 8);
    c.vc = hx_t_alone(&c, 4, 8);
    c.has_cache = true;
    hx_t_put_rand(&c, &c.dst, 1.0f, 1);
    c.thr = 5e-5;
    struct hx_t_out want = {0}, got = {0};
    for (int i = 0; i < c.n_buf; i++) {
        want.buf[i] = hx_t_xmalloc(c.buf[i].nbytes);
        got.buf[i] = hx_t_xmalloc(c.buf[i].nbytes);
        memcpy(want.buf[i], c.buf[i].init, c.buf[i].nbytes);
    }
    int bad = 0;
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < c.n_buf; i++) memcpy(got.buf[i], want.buf[i], c.buf[i].nbytes);
        float *row = hx_t_at(&c.dst, got.buf[c.dst.buf], 2);
        switch (trial) {
        case 1: row[151935] += 1.0f; break;                     /* one column */
        case 2: got.buf[c.dst.buf][0] ^= 1; break;              /* guard before */
        case 3: row[151936] = 0.0f; break;                      /* stride gap */
        case 4: row[77] = NAN; break;                           /* NaN */
        case 5: got.buf[c.kc.buf][c.kc.off / 4 + 8] = 0; break; /* KV row 1 */
        default: break;
        }
        struct hx_t_cmp r;
        hx_t_compare(&c, &got, &want, false, &r);
        if (r.ok != (trial == 0)) {
            printf("FAIL self-check %d: the comparator %s (%s)\n", trial,
                   r.ok ? "missed an error" : "rejected a correct result", r.why);
            bad++;
        }
    }
    hx_t_out_free(&want);
    hx_t_out_free(&got);
    hx_t_case_free(&c);
    return bad;
}
