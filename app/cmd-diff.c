/*
 * cmd-diff.c — `engine diff -m M [--backend B | --policy P] [--ref R]`: does a backend or a
 * policy compute what the reference computes?
 *
 * Two contexts see the same tokens: the target runs `verify@R:P` (every op re-run on its own
 * instance of R with the target's inputs, so each op's error is its own, not inherited), and
 * a plain `single:R` context runs the whole model. The prompt is prefilled, then N tokens are
 * generated greedily by the target and fed to both (teacher forcing), so both see one token
 * sequence. Reported: per op (per layer) max abs error and NMSE against test-backend-ops'
 * thresholds (core/numerics.h, for what the device that ran the op computes: an NPU's INT8
 * GEMM is held to its own error model), the first op over its threshold, whole-model logits max abs error and NMSE per
 * step, top-1 agreement, and how many greedy tokens match before the first disagreement. A
 * disagreement where the reference's top-2 margin is within twice that step's logits error is
 * a near tie (data/README.md): reported, not a failure. Exit 0 pass, 1 fail, 2 usage.
 *
 * The whole-model bound on the logits (docs/policies.md) comes from verify's twins
 * (core/scheduler.h): twin 0 runs the model with the weights as the target's devices hold them,
 * twins 1.. also with every op's modelled error drawn at random. Summed over the steps, the
 * target's logits may be off twin 0 by the ratio bound of core/numerics.h times the mean of
 * the random twins' distances from it. --logits-nmse X adds a fixed bound on the NMSE against
 * ref.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "cli.h"
#include "hx-internal.h"

struct hx_diff_opts {
    const char *ref, *format, *ops;
    float logits_nmse;
    bool nmse_given; /* --logits-nmse: also a fixed bound on the NMSE against ref */
};

struct hx_diff_step {
    int32_t token; /* the target's greedy choice */
    int32_t ref_token;
    double max_abs, nmse, ref_margin;
    /* the whole-model bound, as NMSE against ref: twin 0 (the devices' weights) from ref, the
     * target from twin 0, the random twins (the error model) from twin 0, their mean */
    double w_nmse, off_nmse, model_nmse;
};

struct hx_diff {
    struct hx_model *m;
    struct hx_context *tc, *rc; /* target (verify), reference */
    int64_t n_vocab, n_prompt;
    struct hx_diff_step *steps;
    int64_t n_steps, n_agree, n_greedy, n_near_ties, n_bad_mismatch;
    double worst_nmse, worst_abs;
    float *tw[1 + HX_VERIFY_DRAWS];         /* the twins' logits of the step being compared */
    double s_ref, s_off, s_model, s_model2; /* sums over the steps (squares of logits) */
    char target[512], refpol[96];
    char devices[HX_PHASE_COUNT][256]; /* devices the target used, per phase, over every run */
};

static void hx_diff_usage(void)
{
    printf(
        "usage: engine diff -m MODEL [--backend B | --policy P] [--ref R] [-p PROMPT | -f FILE]\n"
        "       [-n N]"
        " [-o text|json] [--ops all|layers|failed] [--logits-nmse X] [-t THREADS] [-c N_CTX]\n"
        "       [--batch N] [--fallback L] [--mem DEV=SIZE,...]   (-f -: the prompt from stdin)\n"
        "Runs the prompt and N greedy tokens (default 16) through the target (default single on\n"
        "--backend, else cpu) and the reference R (default ref); exit 0 if every op is within\n"
        "its NMSE threshold, the logits are within the whole-model bound derived from the\n"
        "devices' error models (docs/policies.md; with --logits-nmse X also their NMSE within X)\n"
        "and the greedy tokens agree (near ties excepted), 1 otherwise, 2 on bad usage.\n");
}

/* Take diff's own options out of argv; the rest goes to the shared parser. */
static int hx_diff_args(int argc, char **argv, struct hx_diff_opts *d, char **rest, int *n_rest)
{
    *d = (struct hx_diff_opts){.ref = "ref", .format = "text", .ops = "all", .logits_nmse = 1e-3f};
    *n_rest = 0;
    rest[(*n_rest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool own = !strcmp(a, "--ref") || !strcmp(a, "-o") || !strcmp(a, "--ops") ||
                   !strcmp(a, "--logits-nmse");
        if (!own) {
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            hx_app_error("diff", "option %s needs a value", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--ref"))
            d->ref = v;
        else if (!strcmp(a, "-o"))
            d->format = v;
        else if (!strcmp(a, "--ops"))
            d->ops = v;
        else if (!hx_app_parse_f32(v, 0, 1e6f, &d->logits_nmse))
            return hx_app_error("diff", "invalid value '%s' for %s", v, a), 2;
        else
            d->nmse_given = true;
    }
    if (strcmp(d->format, "text") && strcmp(d->format, "json"))
        return hx_app_error("diff", "-o takes text or json, not '%s'", d->format), 2;
    if (strcmp(d->ops, "all") && strcmp(d->ops, "layers") && strcmp(d->ops, "failed"))
        return hx_app_error("diff", "--ops takes all, layers or failed, not '%s'", d->ops), 2;
    return 0;
}

/* The target policy under verify, and the reference policy; checked before any loading. */
static int hx_diff_policies(const struct hx_cli *o, const struct hx_diff_opts *d,
                            struct hx_diff *df)
{
    char inner[256];
    if (o->policy && !strncmp(o->policy, "verify", 6) &&
        (!o->policy[6] || strchr(":@", o->policy[6])))
        return hx_app_error("diff", "give the policy without verify (engine diff adds it): '%s'",
                            o->policy),
               2;
    if (o->policy)
        snprintf(inner, sizeof inner, "%s", o->policy);
    else
        snprintf(inner, sizeof inner, "single:%s", o->backend ? o->backend : "cpu");
    snprintf(df->target, sizeof df->target, "verify@%s:%s", d->ref, inner);
    snprintf(df->refpol, sizeof df->refpol, "single:%s", d->ref);
    if (hx_policy_validate(df->target, o->backend, o->fallback) != HX_OK ||
        hx_policy_validate(df->refpol, NULL, NULL) != HX_OK || hx_mem_validate(o->mem) != HX_OK)
        return hx_app_error("diff", "%s", hx_last_error()), 2;
    return 0;
}

static int hx_diff_open(const struct hx_cli *o, struct hx_diff *df)
{
    if (hx_model_load(o->model, NULL, &df->m) != HX_OK)
        return hx_app_error("diff", "cannot load model: %s", hx_last_error()), 1;
    struct hx_model_info mi = {.struct_size = sizeof mi};
    hx_model_get_info(df->m, &mi);
    df->n_vocab = mi.n_vocab;
    struct hx_context_params cp = {.struct_size = sizeof cp,
                                   .backend = o->backend,
                                   .policy = df->target,
                                   .fallback = o->fallback,
                                   .n_threads = o->n_threads,
                                   .n_ctx = o->n_ctx, .n_batch = o->n_batch,
                                   .npu_kernels = o->npu_kernels, .mem = o->mem};
    if (hx_context_new(df->m, &cp, &df->tc) != HX_OK)
        return hx_app_error("diff", "target %s: %s", df->target, hx_last_error()), 1;
    if (hx__sched_verify_twins(hx__context_sched(df->tc)) != HX_OK)
        return hx_app_error("diff", "whole-model twins: %s", hx_last_error()), 1;
    for (int t = 0; t <= HX_VERIFY_DRAWS; t++)
        if (!(df->tw[t] = malloc((size_t)df->n_vocab * sizeof(float))))
            return hx_app_error("diff", "out of memory"), 1;
    cp.backend = NULL, cp.policy = df->refpol, cp.fallback = NULL, cp.mem = NULL;
    if (hx_context_new(df->m, &cp, &df->rc) != HX_OK)
        return hx_app_error("diff", "reference %s: %s", df->refpol, hx_last_error()), 1;
    return 0;
}

static int32_t hx_diff_argmax(const float *l, int64_t n, double *margin)
{
    int64_t b = 0, s = -1;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[b])
            s = b, b = i;
        else if (s < 0 || l[i] > l[s])
            s = i;
    if (margin) *margin = s >= 0 ? (double)l[b] - l[s] : INFINITY;
    return (int32_t)b;
}

/* Compare the logits of one step and pick the next token. */
static void hx_diff_step(struct hx_diff *df, const float *lt, const float *lr,
                         struct hx_diff_step *st)
{
    double num = 0, den = 0, mx = 0;
    for (int64_t v = 0; v < df->n_vocab; v++) {
        double e = (double)lt[v] - lr[v];
        num += e * e, den += (double)lr[v] * lr[v], mx = fmax(mx, fabs(e));
        if (!isfinite(lt[v])) mx = INFINITY;
    }
    st->max_abs = mx, st->nmse = den > 0 ? num / den : num;
    /* the whole-model bound: this step's logits of the twins (the last row, as lt's) */
    struct hx_sched *ts = hx__context_sched(df->tc);
    double w = 0, off = 0, model = 0;
    int tst = HX_OK;
    for (int t = 0; t <= HX_VERIFY_DRAWS && tst == HX_OK; t++)
        tst = hx__sched_verify_twin_logits(ts, t, -1, df->tw[t]);
    if (tst == HX_OK) {
        for (int64_t v = 0; v < df->n_vocab; v++) {
            double t0 = df->tw[0][v];
            w += (t0 - lr[v]) * (t0 - lr[v]), off += (lt[v] - t0) * (lt[v] - t0);
            for (int t = 1; t <= HX_VERIFY_DRAWS; t++)
                model += (df->tw[t][v] - t0) * (df->tw[t][v] - t0);
        }
        model /= HX_VERIFY_DRAWS;
    } else {
        w = off = model = NAN; /* the twins stopped: no whole-model bound (a failure) */
    }
    if (!isfinite(off)) off = NAN;
    const double dn = den > 0 ? den : 1;
    st->w_nmse = w / dn, st->off_nmse = off / dn, st->model_nmse = model / dn;
    df->s_ref += den, df->s_off += off, df->s_model += model, df->s_model2 += model * model;
    st->token = hx_diff_argmax(lt, df->n_vocab, NULL);
    st->ref_token = hx_diff_argmax(lr, df->n_vocab, &st->ref_margin);
    df->worst_abs = fmax(df->worst_abs, mx), df->worst_nmse = fmax(df->worst_nmse, st->nmse);
    bool agree = st->token == st->ref_token;
    df->n_agree += agree;
    if (agree && df->n_greedy == df->n_steps) df->n_greedy++;
    if (!agree && st->ref_margin <= 2 * mx)
        df->n_near_ties++;
    else if (!agree)
        df->n_bad_mismatch++;
    df->n_steps++;
}

static int hx_diff_run(struct hx_diff *df, const struct hx_cli *o)
{
    int64_t n = 0;
    hx_token *ids = NULL;
    df->steps = calloc((size_t)o->n_predict, sizeof *df->steps);
    if (!df->steps) return hx_app_error("diff", "out of memory"), 1;
    int rc = 1;
    if (hx_app_tokenize(df->m, o->prompt, strlen(o->prompt), true, &ids, &n) != HX_OK || n == 0) {
        hx_app_error("diff", "cannot tokenize the prompt: %s", n ? hx_last_error() : "no tokens");
        goto done;
    }
    df->n_prompt = n;
    if (n + o->n_predict - 1 > hx_context_n_ctx(df->tc)) {
        hx_app_error("diff", "prompt (%lld tokens) + %lld steps exceed the context of %lld (-c)",
                     (long long)n, (long long)o->n_predict, (long long)hx_context_n_ctx(df->tc));
        goto done;
    }
    const float *lt = NULL, *lr = NULL;
    int st = hx_app_prefill(df->tc, ids, n, 0, 0, NULL, NULL, &lt);
    hx_app_devices_add(df->devices[n > 1 ? HX_PHASE_PREFILL : HX_PHASE_DECODE],
                        sizeof df->devices[0], hx_context_devices(df->tc));
    if (st == HX_OK) st = hx_app_prefill(df->rc, ids, n, 0, 0, NULL, NULL, &lr);
    for (int64_t s = 0; st == HX_OK && s < o->n_predict; s++) {
        hx_diff_step(df, lt, lr, &df->steps[s]);
        if (s + 1 == o->n_predict) break;
        hx_token t = df->steps[s].token;
        st = hx_app_prefill(df->tc, &t, 1, (int32_t)(n + s), 0, NULL, NULL, &lt);
        hx_app_devices_add(df->devices[HX_PHASE_DECODE], sizeof df->devices[0],
                            hx_context_devices(df->tc));
        if (st == HX_OK) st = hx_app_prefill(df->rc, &t, 1, (int32_t)(n + s), 0, NULL, NULL, &lr);
    }
    if (st != HX_OK)
        hx_app_error("diff", "decode: %s", hx_last_error());
    else
        rc = 0;
done:
    hx_free(ids);
    return rc;
}

/* ---- report --------------------------------------------------------------------------------- */

static const char *const hx_diff_phase[] = {"prefill", "decode"};

static bool hx_diff_ops_ok(const struct hx_verify_report *r)
{
    return r->n_failed == 0 && !r->ref_failed && r->n_checks > 0;
}

/* The whole-model bound: the target's squared distance from twin 0 (the devices' weights),
 * summed over the steps, within hx__ratio_bound × the random twins' mean (the error model's).
 * Degrees of freedom: the effective number of steps of that sum, one per step (a step's
 * logits error may have one direction only), for the target and for each random twin. */
static double hx_diff_dof(const struct hx_diff *df)
{
    return df->s_model2 > 0 ? df->s_model * df->s_model / df->s_model2 : 0;
}

/* Target, twin 0 and the random twins all gave the same logits (ref against itself): there is
 * no error, so nothing to bound (the ratio bound of zero degrees of freedom is 0/0). */
static bool hx_diff_exact(const struct hx_diff *df)
{
    return df->s_off == 0 && df->s_model == 0;
}

static double hx_diff_bound(const struct hx_diff *df)
{
    if (hx_diff_exact(df)) return 0;
    const double nu = hx_diff_dof(df);
    return hx__ratio_bound(nu, HX_VERIFY_DRAWS * nu) * df->s_model;
}

static bool hx_diff_logits_ok(const struct hx_diff *df, const struct hx_diff_opts *d)
{
    return df->s_off <= hx_diff_bound(df) && (!d->nmse_given || df->worst_nmse <= d->logits_nmse);
}

static bool hx_diff_pass(const struct hx_diff *df, const struct hx_verify_report *r,
                         const struct hx_diff_opts *d)
{
    return hx_diff_ops_ok(r) && hx_diff_logits_ok(df, d) && df->n_bad_mismatch == 0;
}

static void hx_diff_op_line(const struct hx_verify_op *op, const char *phase)
{
    char layer[16] = "-", part[16] = "";
    if (op->layer >= 0) snprintf(layer, sizeof layer, "L%d", op->layer);
    if (op->n_parts > 1) snprintf(part, sizeof part, " p%d", op->part);
    bool fail = op->n_failed > 0;
    printf("  %-7s %5lld %-4s %-9s %-8s%-4s %-9s %6lld  %-10.3g %-10.3g %-8.2g %s\n", phase,
           (long long)op->node, layer, hx_op_kind_name(op->kind), hx_op_class_name(op->cls), part,
           op->dev, (long long)op->n_checks, op->max_abs, op->nmse, op->threshold,
           fail ? (op->nonfinite ? "FAIL (non-finite)" : "FAIL") : "ok");
}

/* One line per layer: the worst op of it. */
static void hx_diff_layer_lines(const struct hx_verify_op *ops, int64_t n, const char *phase)
{
    for (int64_t i = 0; i < n;) {
        int64_t j = i, worst = i, failed = 0;
        while (j < n && ops[j].layer == ops[i].layer) {
            if (hx__verify_ratio(ops[j].nmse, ops[j].threshold) >
                hx__verify_ratio(ops[worst].nmse, ops[worst].threshold))
                worst = j;
            failed += ops[j].n_failed > 0, j++;
        }
        char layer[16] = "-";
        if (ops[i].layer >= 0) snprintf(layer, sizeof layer, "L%d", ops[i].layer);
        printf(
            "  %-7s %-4s %3lld ops  worst %-9s %-8s max abs %-10.3g nmse %-10.3g (threshold %.2g)  %s\n",
            phase, layer, (long long)(j - i), hx_op_kind_name(ops[worst].kind),
            hx_op_class_name(ops[worst].cls), ops[worst].max_abs, ops[worst].nmse,
            ops[worst].threshold, failed ? "FAIL" : "ok");
        i = j;
    }
}

/* Every device the target used, prefill's first. */
static void hx_diff_all_devices(const struct hx_diff *df, char *out, size_t cap)
{
    out[0] = '\0';
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++) hx_app_devices_add(out, cap, df->devices[ph]);
}

static void hx_diff_text(const struct hx_diff *df, const struct hx_cli *o,
                         const struct hx_verify_report *r, const struct hx_diff_opts *d)
{
    char all[512];
    hx_diff_all_devices(df, all, sizeof all);
    printf("engine diff: %s\n  target    %s (devices %s; prefill on %s, decode on %s)\n", o->model,
           df->target, all, df->devices[HX_PHASE_PREFILL][0] ? df->devices[HX_PHASE_PREFILL] : "-",
           df->devices[HX_PHASE_DECODE][0] ? df->devices[HX_PHASE_DECODE] : "-");
    printf("  reference %s\n  %lld prompt tokens, %lld steps\n\n", df->refpol,
           (long long)df->n_prompt, (long long)df->n_steps);
    printf("per op (the reference is fed the target's inputs; thresholds as test-backend-ops):\n");
    if (strcmp(d->ops, "layers"))
        printf("  %-7s %5s %-4s %-9s %-12s %-9s %6s  %-10s %-10s %-8s %s\n", "phase", "node", "lyr",
               "op", "class", "device", "checks", "max_abs", "nmse", "thresh", "status");
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++)
        if (!strcmp(d->ops, "layers"))
            hx_diff_layer_lines(r->ops[ph], r->n_ops[ph], hx_diff_phase[ph]);
        else
            for (int64_t i = 0; i < r->n_ops[ph]; i++)
                if (r->ops[ph][i].n_checks && (!strcmp(d->ops, "all") || r->ops[ph][i].n_failed))
                    hx_diff_op_line(&r->ops[ph][i], hx_diff_phase[ph]);
    printf("  %lld checks, %lld over threshold%s\n", (long long)r->n_checks, (long long)r->n_failed,
           r->ref_failed ? "; the reference failed, checks stopped" : "");
    if (r->has_first)
        printf(
            "first op over its threshold: %s node %lld (layer %d %s %s on %s), NMSE %.3g > %.3g, max abs err %.3g\n",
            hx_diff_phase[r->first_phase], (long long)r->first.node, r->first.layer,
            hx_op_kind_name(r->first.kind), hx_op_class_name(r->first.cls), r->first.dev,
            r->first.nmse, r->first.threshold, r->first.max_abs);
    else
        printf("first op over its threshold: none\n");
    printf("\nlogits (whole model, per step; NMSE against ref: all of it, the part the devices' "
           "weights make (twin 0), the rest (target - twin 0) and the error model's (the mean "
           "of twins 1-%d - twin 0)):\n",
           HX_VERIFY_DRAWS);
    for (int64_t s = 0; s < df->n_steps; s++) {
        const struct hx_diff_step *st = &df->steps[s];
        printf("  step %3lld  max abs %-10.3g nmse %-10.3g top-1 %6d %s %-6d margin %-8.3g "
               "weights %-9.3g rest %-9.3g model %-9.3g%s\n",
               (long long)s, st->max_abs, st->nmse, st->token,
               st->token == st->ref_token ? "==" : "!=", st->ref_token, st->ref_margin, st->w_nmse,
               st->off_nmse, st->model_nmse,
               st->token == st->ref_token          ? ""
               : st->ref_margin <= 2 * st->max_abs ? "  (near tie)"
                                                   : "  MISMATCH");
    }
    const double sr = df->s_ref > 0 ? df->s_ref : 1;
    printf("logits: max abs err %.3g, worst NMSE %.3g", df->worst_abs, df->worst_nmse);
    if (d->nmse_given)
        printf(" (--logits-nmse %.0e: %s)", (double)d->logits_nmse,
               df->worst_nmse <= d->logits_nmse ? "ok" : "FAIL");
    if (hx_diff_exact(df))
        printf("\nwhole-model bound: the rest and the error model are both 0 (the logits are "
               "the reference's, bit for bit): ok\n");
    else if (isinf(hx_diff_bound(df)))
        printf("\nwhole-model bound: none: the error model's %.3g is in %.1f effective steps, too "
               "few for a bound at z = 5 (not checked; the per-op bounds stand)\n",
               df->s_model / sr, hx_diff_dof(df));
    else
        printf("\nwhole-model bound: the rest %.3g <= %.3g x the error model's %.3g (%.1f "
               "effective steps) = %.3g: %s\n",
               df->s_off / sr, hx_diff_bound(df) / (df->s_model > 0 ? df->s_model : 1),
               df->s_model / sr, hx_diff_dof(df), hx_diff_bound(df) / sr,
               df->s_off <= hx_diff_bound(df) ? "ok" : "FAIL");
    printf("top-1 agreement: %lld/%lld steps; greedy tokens match %lld/%lld; near ties %lld\n",
           (long long)df->n_agree, (long long)df->n_steps, (long long)df->n_greedy,
           (long long)df->n_steps, (long long)df->n_near_ties);
    printf("%s\n", hx_diff_pass(df, r, d) ? "PASS" : "FAIL");
}

static void hx_diff_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    putchar('"');
}

/* A JSON number, or null where there is none (a NaN or an infinity: no bound). */
static void hx_diff_json_num(double x)
{
    if (isfinite(x))
        printf("%.6g", x);
    else
        printf("null");
}

static void hx_diff_json_op(const struct hx_verify_op *op, const char *phase, bool comma)
{
    printf(
        "%s\n    {\"phase\": \"%s\", \"node\": %lld, \"layer\": %d, \"op\": \"%s\", \"class\": \"%s\", \"part\": %d, "
        "\"device\": ",
        comma ? "," : "", phase, (long long)op->node, op->layer, hx_op_kind_name(op->kind),
        hx_op_class_name(op->cls), op->n_parts > 1 ? op->part : -1);
    hx_diff_json_str(op->dev);
    printf(
        ", \"checks\": %lld, \"max_abs\": %.6g, \"nmse\": %.6g, \"threshold\": %.3g, \"ok\": %s}",
        (long long)op->n_checks, op->max_abs, op->nmse, op->threshold,
        op->n_failed ? "false" : "true");
}

static void hx_diff_json(const struct hx_diff *df, const struct hx_cli *o,
                         const struct hx_verify_report *r, const struct hx_diff_opts *d)
{
    printf("{\n  \"model\": ");
    hx_diff_json_str(o->model);
    printf(",\n  \"target\": ");
    hx_diff_json_str(df->target);
    char all[512];
    hx_diff_all_devices(df, all, sizeof all);
    printf(",\n  \"devices\": ");
    hx_diff_json_str(all);
    printf(",\n  \"devices_prefill\": ");
    hx_diff_json_str(df->devices[HX_PHASE_PREFILL]);
    printf(",\n  \"devices_decode\": ");
    hx_diff_json_str(df->devices[HX_PHASE_DECODE]);
    printf(",\n  \"reference\": ");
    hx_diff_json_str(df->refpol);
    printf(",\n  \"prompt_tokens\": %lld,\n  \"ops\": [", (long long)df->n_prompt);
    bool comma = false;
    for (int ph = 0; ph < HX_PHASE_COUNT; ph++)
        for (int64_t i = 0; i < r->n_ops[ph]; i++)
            if (r->ops[ph][i].n_checks)
                hx_diff_json_op(&r->ops[ph][i], hx_diff_phase[ph], comma), comma = true;
    printf(
        "\n  ],\n  \"op_checks\": %lld,\n  \"op_failures\": %lld,\n  \"reference_failed\": %s,\n  \"first_divergent\": ",
        (long long)r->n_checks, (long long)r->n_failed, r->ref_failed ? "true" : "false");
    if (r->has_first)
        hx_diff_json_op(&r->first, hx_diff_phase[r->first_phase], false);
    else
        printf("null");
    printf(",\n  \"steps\": [");
    for (int64_t s = 0; s < df->n_steps; s++) {
        const struct hx_diff_step *st = &df->steps[s];
        printf("%s\n    {\"max_abs\": ", s ? "," : "");
        hx_diff_json_num(st->max_abs);
        printf(", \"nmse\": ");
        hx_diff_json_num(st->nmse);
        printf(", \"token\": %d, \"ref_token\": %d, \"ref_margin\": ", st->token, st->ref_token);
        hx_diff_json_num(st->ref_margin);
        printf(", \"weights_nmse\": ");
        hx_diff_json_num(st->w_nmse);
        printf(", \"rest_nmse\": ");
        hx_diff_json_num(st->off_nmse);
        printf(", \"model_nmse\": ");
        hx_diff_json_num(st->model_nmse);
        printf("}");
    }
    printf("\n  ],\n  \"logits_max_abs\": ");
    hx_diff_json_num(df->worst_abs);
    printf(",\n  \"logits_nmse\": ");
    hx_diff_json_num(df->worst_nmse);
    printf(",\n  \"logits_nmse_threshold\": ");
    hx_diff_json_num(d->nmse_given ? (double)d->logits_nmse : NAN);
    const double sr = df->s_ref > 0 ? df->s_ref : 1, bound = hx_diff_bound(df);
    printf(",\n  \"whole_model\": {\"rest\": ");
    hx_diff_json_num(df->s_off / sr);
    printf(", \"model\": ");
    hx_diff_json_num(df->s_model / sr);
    printf(", \"dof\": ");
    hx_diff_json_num(hx_diff_dof(df));
    printf(", \"ratio_bound\": ");
    hx_diff_json_num(bound / (df->s_model > 0 ? df->s_model : 1));
    printf(", \"bound\": ");
    hx_diff_json_num(bound / sr);
    printf(", \"ok\": %s},\n", df->s_off <= bound ? "true" : "false");
    printf(
        "  \"top1_agree\": %lld,\n  \"greedy_match\": %lld,\n  \"near_ties\": %lld,\n  \"n_steps\": %lld,\n",
        (long long)df->n_agree, (long long)df->n_greedy, (long long)df->n_near_ties,
        (long long)df->n_steps);
    printf("  \"pass\": %s\n}\n", hx_diff_pass(df, r, d) ? "true" : "false");
}

int hx_cmd_diff(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return hx_diff_usage(), 0;
    struct hx_diff_opts d;
    struct hx_cli o;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n_rest = 0, rc = rest ? hx_diff_args(argc, argv, &d, rest, &n_rest) : 1;
    if (rc == 0) rc = hx_cli_parse("diff", n_rest, rest, &o);
    free(rest);
    if (rc) return rc;
    bool n_given = false;
    for (int i = 1; i < argc; i++)
        n_given |= !strcmp(argv[i], "-n") || !strcmp(argv[i], "--n-predict");
    if (!n_given) o.n_predict = 16;
    if (!o.prompt) o.prompt = "Once upon a time";
    struct hx_diff df = {0};
    if ((rc = hx_diff_policies(&o, &d, &df))) return hx_cli_deinit(&o), rc;
    const struct hx_verify_report *r = NULL;
    rc = hx_diff_open(&o, &df);
    if (rc == 0) rc = hx_diff_run(&df, &o);
    if (rc == 0 && hx__sched_verify_report(hx__context_sched(df.tc), &r) != HX_OK) rc = 1;
    if (rc == 0) {
        if (!strcmp(d.format, "json"))
            hx_diff_json(&df, &o, r, &d);
        else
            hx_diff_text(&df, &o, r, &d);
        rc = hx_diff_pass(&df, r, &d) ? 0 : 1;
    }
    free(df.steps);
    for (int t = 0; t <= HX_VERIFY_DRAWS; t++) free(df.tw[t]);
    hx_context_free(df.tc);
    hx_context_free(df.rc);
    hx_model_free(df.m);
    hx_cli_deinit(&o);
    return rc;
}
