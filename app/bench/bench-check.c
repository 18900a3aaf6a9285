/*
 * bench-check.c — no figure of `engine bench -m` comes from a wrong result. Before a policy is
 * timed it runs a few tokens under verify@ref:POLICY (every op re-run on the reference with the
 * same inputs); then the context to be timed runs the same tokens and its logits must match
 * that run's. A verify policy is its own check, over its timed runs. Each phase (prefill for
 * the pp rows, decode for the tg rows) gets a verdict: off, skipped (and why), yes or FAIL.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench-model.h"

static const char *const hx_bm_phase_name[] = {"prefill", "decode"};

/* "prefill of 8 rows", "2 decode steps": what phase ph of the check ran. */
static const char *hx_bm_check_what(const struct hx_bm_check *k, int ph)
{
    static char s[48];
    snprintf(s, sizeof s, ph ? "%lld decode step%s" : "prefill of %lld row%s", (long long)k->n[ph],
             k->n[ph] == 1 ? "" : "s");
    return s;
}

static double hx_bm_nmse(const float *x, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return INFINITY;
        double e = (double)x[i] - ref[i];
        num += e * e, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Run phase ph of the check from an empty cache: n prefill rows or n decode steps. With
 * save, the logits go to out (row by row); else they are compared with out, and *nmse gets
 * the worst NMSE. */
static int hx_bm_check_tokens(struct hx_context *c, const struct hx_bm_model *m, int ph, int64_t n,
                              float *out, bool save, double *nmse)
{
    size_t nv = (size_t)m->info.n_vocab;
    int st = hx_kv_truncate(c, 0, 0);
    for (int64_t i = 0; st == HX_OK && i < (ph ? n : 1); i++) {
        const float *l = NULL;
        st = ph ? hx_bm_step(c, m->ids, i) : hx_bm_prefill(c, m->ids, 0, n, NULL, &l);
        if (st == HX_OK && ph && !(l = hx_get_logits(c, -1))) st = HX_E_INTERNAL;
        if (st) break;
        if (save) memcpy(out + i * nv, l, nv * sizeof *l);
        else *nmse = fmax(*nmse, hx_bm_nmse(l, out + i * nv, (int64_t)nv));
    }
    return st;
}

static bool hx_bm_is_verify(const char *policy)
{
    return !strncmp(policy, "verify", 6) && (!policy[6] || strchr(":@", policy[6]));
}

static void hx_bm_vnote(struct hx_bm_verdict *v, enum hx_bm_vstate state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void hx_bm_vnote(struct hx_bm_verdict *v, enum hx_bm_vstate state, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    v->state = state;
    vsnprintf(v->note, sizeof v->note, fmt, ap);
    va_end(ap);
}

/* What the check will run, and each phase's verdict before it has run. */
static int hx_bm_check_init(const struct hx_bm_combo *cb, struct hx_bm_check *k)
{
    const struct hx_bm_opts *o = cb->o;
    int64_t max_p = hx_bm_max(o->n_prompt, o->n_n_prompt), max_n = hx_bm_max(o->n_gen, o->n_n_gen);
    memset(k, 0, sizeof *k);
    k->n[0] = max_p < HX_BM_VERIFY_PP ? max_p : HX_BM_VERIFY_PP;
    k->n[1] = max_n < HX_BM_VERIFY_TG ? max_n : HX_BM_VERIFY_TG;
    for (int ph = 0; ph < 2; ph++) {
        k->vd[ph].logits_nmse = -1;
        if (o->no_verify) hx_bm_vnote(&k->vd[ph], HX_BM_V_OFF, "--no-verify");
        else if (hx_bm_is_verify(cb->policy)) k->vd[ph].self = true;
        else if (cb->policy[0] == '@')
            hx_bm_vnote(&k->vd[ph], HX_BM_V_SKIPPED,
                        "an @FILE policy cannot be wrapped in verify@%s:...; give the policy "
                        "itself to have it checked", HX_BM_VERIFY_REF);
    }
    if (o->no_verify || k->vd[0].self || k->vd[0].state == HX_BM_V_SKIPPED) return 0;
    k->logits = hx_malloc((size_t)(1 + k->n[1]) * (size_t)cb->model->info.n_vocab * sizeof(float));
    if (!k->logits) return hx_app_error("bench", "out of memory"), 1;
    return 0;
}

/* Step 1: the policy under verify@ref, in a context of its own that is freed before the timed
 * one is made (so the weights are never prepared twice at once). Leaves each checked phase
 * YES or FAIL on the op checks, and the logits for step 2. */
static void hx_bm_check_verified(const struct hx_bm_combo *cb, struct hx_bm_check *k)
{
    char pol[320];
    snprintf(pol, sizeof pol, "verify@%s:%s", HX_BM_VERIFY_REF, cb->policy);
    int64_t n_max = k->n[0] > k->n[1] ? k->n[0] : k->n[1];
    struct hx_context_params cp = {.struct_size = sizeof cp, .backend = cb->backend,
                                   .policy = pol, .fallback = cb->o->fallback, .mem = cb->o->mem,
                                   .n_threads = (int)cb->n_threads, .n_ctx = n_max,
                                   .n_batch = k->n[0] > 1 ? k->n[0] : 1};
    struct hx_context *vc = NULL;
    if (hx_context_new(cb->model->m, &cp, &vc) != HX_OK) {
        for (int ph = 0; ph < 2; ph++)
            hx_bm_vnote(&k->vd[ph], HX_BM_V_SKIPPED, "cannot make a %s context: %s", pol,
                        hx_last_error());
        return;
    }
    hx_bm_progress(cb, "verify (%lld prefill rows, %lld decode steps against %s)",
                   (long long)k->n[0], (long long)k->n[1], HX_BM_VERIFY_REF);
    size_t nv = (size_t)cb->model->info.n_vocab;
    for (int ph = 0; ph < 2; ph++) {
        struct hx_bm_verdict *v = &k->vd[ph];
        if (!k->n[ph]) continue;
        struct hx_run_stats s0 = {.struct_size = sizeof s0}, s1 = s0;
        hx_context_stats(vc, &s0);
        int st = hx_bm_check_tokens(vc, cb->model, ph, k->n[ph], k->logits + (ph ? nv : 0), true,
                                    NULL);
        hx_context_stats(vc, &s1);
        v->checks = s1.verify_checks - s0.verify_checks;
        v->failed = s1.verify_failed - s0.verify_failed;
        if (st)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "the %s check could not run: %s",
                        hx_bm_phase_name[ph], hx_last_error());
        else if (v->failed)   /* checks made before any failure of the reference count */
            hx_bm_vnote(v, HX_BM_V_FAIL, "%s: %lld of %lld op checks against %s over their "
                        "NMSE threshold (see the 'verify: first divergent op' log line)",
                        hx_bm_check_what(k, ph), (long long)v->failed, (long long)v->checks,
                        HX_BM_VERIFY_REF);
        else if (s1.verify_ref_failed)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "the reference %s failed, so checking stopped",
                        HX_BM_VERIFY_REF);
        else if (!v->checks)
            hx_bm_vnote(v, HX_BM_V_SKIPPED, "verify checked no op");
        else
            v->state = HX_BM_V_YES;
    }
    hx_context_free(vc);
}

/* Step 2: the context to be timed runs the same tokens (its first run), and its logits must
 * be the verified run's. A decode error here is the row's error. */
static int hx_bm_check_logits(const struct hx_bm_combo *cb, struct hx_context *c,
                              struct hx_bm_check *k)
{
    size_t nv = (size_t)cb->model->info.n_vocab;
    for (int ph = 0; ph < 2; ph++) {
        struct hx_bm_verdict *v = &k->vd[ph];
        if (!k->n[ph] || (v->state != HX_BM_V_YES && v->state != HX_BM_V_FAIL)) continue;
        double nmse = 0;
        int st = hx_bm_check_tokens(c, cb->model, ph, k->n[ph], k->logits + (ph ? nv : 0), false,
                                    &nmse);
        if (st) return st;
        v->logits_nmse = nmse;
        if (v->state == HX_BM_V_YES && !(nmse <= HX_BM_LOGITS_NMSE))
            hx_bm_vnote(v, HX_BM_V_FAIL, "%s: the timed context's logits differ from the "
                        "verified run's, NMSE %.3g > %.0e", hx_bm_check_what(k, ph), nmse,
                        HX_BM_LOGITS_NMSE);
        else if (v->state == HX_BM_V_YES)
            snprintf(v->note, sizeof v->note, "%s: %lld op checks against %s within their "
                     "thresholds; logits NMSE %.3g against the verified run",
                     hx_bm_check_what(k, ph), (long long)v->checks, HX_BM_VERIFY_REF, nmse);
    }
    return HX_OK;
}

int hx_bm_check_ref(const struct hx_bm_combo *cb, struct hx_bm_check *k)
{
    if (hx_bm_check_init(cb, k)) return 1;
    if (k->logits) hx_bm_check_verified(cb, k);
    return 0;
}

int hx_bm_check_timed(const struct hx_bm_combo *cb, struct hx_context *c, struct hx_bm_check *k)
{
    /* An @FILE policy may hold a verify policy: the context knows. */
    struct hx_run_stats rs = {.struct_size = sizeof rs};
    if (!cb->o->no_verify && cb->policy[0] == '@' && hx_context_stats(c, &rs) == HX_OK && rs.verify)
        k->vd[0].self = k->vd[1].self = true;
    int rc = 0;
    if (k->logits && hx_bm_check_logits(cb, c, k) != HX_OK) {
        hx_app_error("bench", "%s %s/%s check run: %s", cb->model->label, cb->backend,
                     cb->policy, hx_last_error());
        rc = 1;
    }
    for (int ph = 0; ph < 2 && !rc; ph++)
        if (k->n[ph] && k->vd[ph].state == HX_BM_V_SKIPPED && !k->vd[ph].self)
            hx_app_progress_note("bench", "%s %s/%s: %s not verified: %s", cb->model->label,
                                 cb->backend, cb->policy, hx_bm_phase_name[ph], k->vd[ph].note);
    hx_free(k->logits);
    k->logits = NULL;
    return rc;
}

/* The verdict of a row: pp rows are prefill batches, except pp1, which is a one-row batch and
 * so runs the decode plan. */
struct hx_bm_verdict *hx_bm_row_verdict(struct hx_bm_check *k, int64_t n_prompt)
{
    return &k->vd[!n_prompt || (n_prompt == 1 && k->n[1]) ? 1 : 0];
}

/* A verify policy checks its own timed runs: the row's verdict is what they found. */
void hx_bm_self_verdict(struct hx_bm_verdict *v, const struct hx_run_stats *s0,
                               const struct hx_run_stats *s1)
{
    v->checks = s1->verify_checks - s0->verify_checks;
    v->failed = s1->verify_failed - s0->verify_failed;
    v->logits_nmse = -1;
    if (!s1->verify)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy does not verify");
    else if (s1->verify_ref_failed && !v->failed)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy's reference failed, so checking stopped");
    else if (!v->checks)
        hx_bm_vnote(v, HX_BM_V_SKIPPED, "the policy's verify checked no op");
    else
        hx_bm_vnote(v, v->failed ? HX_BM_V_FAIL : HX_BM_V_YES,
                    "the policy verifies itself: %lld of %lld op checks of the timed runs over "
                    "their NMSE threshold", (long long)v->failed, (long long)v->checks);
}
