/*
 * backend-ops-run.c — running one case: on ref, then on every device under test that
 * supports() it (a variant only on the ops its knob changes; big matmuls only with --full),
 * each in fresh buffers written from the case's images and read back whole; then the
 * comparator's verdict, counted per device and printed as one OK/FAIL/SKIP line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-ops.h"
#include "sanitized.h"

#define HX_T_VARIANT_MACS 134217728.0 /* 2^27: larger matmuls skip variants without --full */

/* ---- running one case on one device --------------------------------------------------------- */

void hx_t_out_free(struct hx_t_out *o)
{
    for (int i = 0; i < HX_T_MAX_BUFS; i++) free(o->buf[i]);
    memset(o, 0, sizeof *o);
}

static struct hx_tensor_ref hx_t_ref_of(struct hx_buffer **bufs, const struct hx_t_tensor *t)
{
    return (struct hx_tensor_ref){bufs[t->buf], t->off, t->rows, t->cols, t->stride};
}

static int hx_t_exec_op(struct hx_t_dut *d, const struct hx_t_case *c, struct hx_buffer **bufs,
                        void **aux_h)
{
    struct hx_op op = {.desc = c->desc};
    for (int i = 0; i < c->n_src; i++) op.src[i] = hx_t_ref_of(bufs, &c->src[i]);
    op.dst = hx_t_ref_of(bufs, &c->dst);
    if (c->has_cache) {
        op.k_cache = hx_t_ref_of(bufs, &c->kc);
        op.v_cache = hx_t_ref_of(bufs, &c->vc);
    }
    int st = HX_OK;
    if (c->w) {
        if (d->wid != c->w->id) {
            hx_t_dut_release(d);
            if ((st = hx__dev_weight_prepare(d->dev, &c->w->w, &d->wh)) != HX_OK) return st;
            d->wid = c->w->id;
        }
        op.weight = &c->w->w;
        op.weight_handle = d->wh;
    }
    if (c->aux) {
        if ((st = hx__dev_weight_prepare(d->dev, &c->aux->w, aux_h)) != HX_OK) return st;
        op.aux = &c->aux->w;
        op.aux_handle = *aux_h;
    }
    struct hx_split sp = {.struct_size = sizeof sp,
                          .ops = &op,
                          .n_ops = 1,
                          .n_rows = c->desc.n_rows,
                          .tokens = c->tokens,
                          .pos = c->pos,
                          .seq = c->seq};
    if ((st = hx__dev_run(d->dev, &sp)) != HX_OK) return st;
    return hx__dev_synchronize(d->dev);
}

double hx_t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hx_t_exec(struct hx_t_dut *d, const struct hx_t_case *c, struct hx_t_out *o)
{
    const double t0 = hx_t_now();
    struct hx_buffer *bufs[HX_T_MAX_BUFS] = {0};
    void *aux_h = NULL;
    memset(o, 0, sizeof *o);
    hx_t_dut_env(d);
    d->dev->last_error[0] = '\0';
    int st = HX_OK;
    for (int i = 0; i < c->n_buf && st == HX_OK; i++) {
        st = hx__dev_buffer_alloc(d->dev, c->buf[i].nbytes, &bufs[i]);
        if (st == HX_OK) st = hx__dev_buffer_write(bufs[i], 0, c->buf[i].init, c->buf[i].nbytes);
    }
    if (st == HX_OK) st = hx_t_exec_op(d, c, bufs, &aux_h);
    for (int i = 0; i < c->n_buf && st == HX_OK; i++) {
        o->buf[i] = hx_t_xmalloc(c->buf[i].nbytes);
        st = hx__dev_buffer_read(bufs[i], 0, o->buf[i], c->buf[i].nbytes);
    }
    if (aux_h) hx__dev_weight_release(d->dev, aux_h);
    for (int i = 0; i < c->n_buf; i++) hx__dev_buffer_free(bufs[i]);
    o->status = st;
    d->seconds += hx_t_now() - t0;
    if (st != HX_OK)
        snprintf(o->err, sizeof o->err, "%s: %s", hx_status_name(st),
                 d->dev->last_error[0] ? d->dev->last_error : hx_last_error());
}

/* ---- one case on every device ---------------------------------------------------------------- */

static void hx_t_line(const char *tag, const char *dev, const struct hx_t_case *c, const char *fmt,
                      ...) HX_PRINTF(4, 5);
static void hx_t_line(const char *tag, const char *dev, const struct hx_t_case *c, const char *fmt,
                      ...)
{
    char tail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    printf("%-4s %-22s %-9s %-44s %s\n", tag, dev, c->family, c->label, tail);
    fflush(stdout);
}

int hx_t_sanitized_left;

void hx_t_run_case(struct hx_t_case *c)
{
    bool any = false, sup[HX_T_MAX_DUTS];
    for (int i = 0; i < hx_t_n_duts; i++) {
        hx_t_dut_env(&hx_t_duts[i]);
        sup[i] = hx__dev_supports(hx_t_duts[i].dev, &c->desc);
        any |= sup[i];
    }
    struct hx_t_out want;
    memset(&want, 0, sizeof want);
    if (any) {
        if (hx_t_opt.verbose) printf("RUN  %-20s %-9s %s\n", "ref", c->family, c->label);
        fflush(stdout);
        const double t_before = hx_t_ref.seconds;
        hx_t_exec(&hx_t_ref, c, &want);
        if (hx_t_opt.verbose) printf("     %.3f s\n", hx_t_ref.seconds - t_before);
    }
    const double macs = (double)c->desc.n_rows * (double)c->desc.n_in * (double)c->desc.n_out;
    const bool big = c->desc.kind == HX_OP_MATMUL && macs > HX_T_VARIANT_MACS;
    for (int i = 0; i < hx_t_n_duts; i++) {
        struct hx_t_dut *d = &hx_t_duts[i];
        if (d->variant && big && !hx_t_opt.full) continue; /* not run, not counted */
        /* A simulated device's emulated kernels (npu-sim: the int8 GEMM of every tile in C) run
         * ~14x slower under the sanitizers: its m = 512 and big matmuls took ~130 of npu-sim's
         * 210 s in CI's ASan test-backend-ops (480 s). They are left to the Release run; under
         * the sanitizers test-npu-sim still runs two M-tiles, several K- and N-tiles, every
         * type, and test-backend-ops every type at m = 1, 7, 64. */
        if (HX_T_SANITIZED && d->dev->info.simulated && c->desc.kind == HX_OP_MATMUL &&
            (big || c->desc.n_rows > 64) && !hx_t_opt.full) {
            hx_t_sanitized_left++;
            continue;
        }
        if (d->novbmi && !(c->desc.kind == HX_OP_MATMUL && c->desc.wtype == HX_DTYPE_Q1_0))
            continue;
        if (d->prefetch && c->desc.kind != HX_OP_MATMUL) continue;
        if (!sup[i]) {
            d->skipped++, hx_t_skipped++;
            if (!hx_t_opt.quiet) hx_t_line("SKIP", d->label, c, "supports() refused");
            continue;
        }
        struct hx_t_cmp r;
        if (want.status != HX_OK) {
            memset(&r, 0, sizeof r);
            snprintf(r.why, sizeof r.why, "ref failed: %s", want.err);
        } else {
            if (hx_t_opt.verbose) printf("RUN  %-20s %-9s %s\n", d->label, c->family, c->label);
            fflush(stdout);
            struct hx_t_out got;
            const double t_before = d->seconds;
            hx_t_exec(d, c, &got);
            if (hx_t_opt.verbose) printf("     %.3f s\n", d->seconds - t_before);
            hx_t_compare(c, &got, &want, d->dev->info.numerics == HX_NUMERICS_INT8_ROW, &r);
            hx_t_out_free(&got);
        }
        if (r.ok)
            d->passed++, hx_t_passed++;
        else
            d->failed++, hx_t_failed++;
        if (!r.ok || !hx_t_opt.quiet)
            hx_t_line(r.ok ? "OK" : "FAIL", d->label, c,
                      "nmse %8.2e <= %8.2e  max %8.2e <= %8.2e%s%s", r.nmse, r.thr, r.maxrel,
                      r.maxrel_lim, r.ok ? "" : "  ", r.why);
    }
    hx_t_out_free(&want);
}
