/*
 * sampling.c — token sampling: repetition / presence / frequency penalties over a window of
 * accepted tokens, then greedy (temperature <= 0) or top-k → top-p → min-p on the
 * distribution at temperature 1, and a draw from what is left at the given temperature.
 * Deterministic for a seed: the generator is splitmix64 seeded from params.seed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hx-impl.h"

struct hx_cand {
    float logit;
    int32_t id;
};

struct hx_sampler {
    struct hx_sampler_params p;
    int64_t n_vocab;
    struct hx_cand *cand;
    float *work;
    hx_token *hist;          /* ring of the last penalty_last_n tokens (or all) */
    int64_t hist_cap, hist_len, hist_head;
    int32_t *count;          /* occurrences in the window per token */
    uint64_t rng;
};

void hx_sampler_params_init(struct hx_sampler_params *p)
{
    *p = (struct hx_sampler_params){.struct_size = sizeof *p, .temperature = 0.8f, .top_k = 40,
                                    .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                                    .penalty_last_n = 64, .seed = 0};
}

int hx_sampler_new(const struct hx_sampler_params *p, int64_t n_vocab, struct hx_sampler **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_sampler_new: out is NULL");
    *out = NULL;
    const char *bad = !p                                            ? "no parameters"
                      : n_vocab <= 0                                ? "n_vocab (must be positive)"
                      : !(isfinite(p->temperature) && p->temperature >= 0) ? "temperature (finite, >= 0)"
                      : !(p->top_p >= 0)                            ? "top_p (>= 0)"
                      : !(p->min_p >= 0 && p->min_p <= 1)           ? "min_p (0..1)"
                      : !(p->repeat_penalty > 0)                    ? "repeat_penalty (> 0)"
                      : !isfinite(p->presence_penalty)              ? "presence_penalty (finite)"
                      : !isfinite(p->frequency_penalty)             ? "frequency_penalty (finite)"
                      : p->penalty_last_n < -1                      ? "penalty_last_n (>= -1)"
                                                                    : NULL;
    if (bad) return hx__set_error(HX_E_INVAL, "invalid sampling parameters: %s", bad);
    struct hx_sampler *s = hx__calloc(1, sizeof *s);
    if (!s) return HX_E_NOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->hist_cap = p->penalty_last_n < 0 ? 1 << 20 : p->penalty_last_n;
    s->cand = hx__malloc((size_t)n_vocab * sizeof *s->cand);
    s->work = hx__malloc((size_t)n_vocab * sizeof *s->work);
    s->count = hx__calloc((size_t)n_vocab, sizeof *s->count);
    s->hist = hx__malloc((size_t)HX_MAX(s->hist_cap, 1) * sizeof *s->hist);
    if (!s->cand || !s->work || !s->count || !s->hist) {
        hx_sampler_free(s);
        return HX_E_NOMEM;
    }
    hx_sampler_reset(s);
    *out = s;
    return HX_OK;
}

const struct hx_sampler_params *hx__sampler_params(const struct hx_sampler *s) { return &s->p; }

void hx_sampler_free(struct hx_sampler *s)
{
    if (!s) return;
    hx__free(s->cand);
    hx__free(s->work);
    hx__free(s->count);
    hx__free(s->hist);
    hx__free(s);
}

void hx_sampler_reset(struct hx_sampler *s)
{
    s->hist_len = s->hist_head = 0;
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    s->rng = s->p.seed ^ 0x9E3779B97F4A7C15ull;
}

void hx_sampler_accept(struct hx_sampler *s, hx_token tok)
{
    if (!s || tok < 0 || tok >= s->n_vocab || s->hist_cap == 0) return;
    if (s->hist_len == s->hist_cap) {
        hx_token old = s->hist[s->hist_head];
        s->count[old]--;
        s->hist[s->hist_head] = tok;
        s->hist_head = (s->hist_head + 1) % s->hist_cap;
    } else {
        s->hist[(s->hist_head + s->hist_len) % s->hist_cap] = tok;
        s->hist_len++;
    }
    s->count[tok]++;
}

static void hx__penalize(struct hx_sampler *s, float *l)
{
    const struct hx_sampler_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0 && p->frequency_penalty == 0) return;
    for (int64_t i = 0; i < s->hist_len; i++) {
        hx_token t = s->hist[(s->hist_head + i) % s->hist_cap];
        if (s->count[t] < 0) continue; /* already applied (marked) */
        int32_t c = s->count[t];
        if (p->repeat_penalty != 1.0f) l[t] = l[t] > 0 ? l[t] / p->repeat_penalty : l[t] * p->repeat_penalty;
        l[t] -= (float)c * p->frequency_penalty + (c > 0 ? p->presence_penalty : 0);
        s->count[t] = -c - 1;
    }
    for (int64_t i = 0; i < s->hist_len; i++) {
        hx_token t = s->hist[(s->hist_head + i) % s->hist_cap];
        if (s->count[t] < 0) s->count[t] = -s->count[t] - 1;
    }
}

static int hx__cand_cmp(const void *a, const void *b)
{
    const struct hx_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* Move the k largest candidates to the front, sorted (quickselect, then sort k). */
static void hx__top_k(struct hx_cand *c, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        struct hx_cand pivot = c[(lo + hi) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (hx__cand_cmp(&c[i], &pivot) < 0) i++;
            while (hx__cand_cmp(&c[j], &pivot) > 0) j--;
            if (i <= j) {
                struct hx_cand t = c[i];
                c[i++] = c[j], c[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
    qsort(c, (size_t)k, sizeof *c, hx__cand_cmp);
}

hx_token hx_sampler_sample(struct hx_sampler *s, const float *logits)
{
    float *l = s->work;
    memcpy(l, logits, (size_t)s->n_vocab * sizeof *l);
    hx__penalize(s, l);
    if (s->p.temperature <= 0) {
        int64_t best = 0;
        for (int64_t i = 1; i < s->n_vocab; i++)
            if (l[i] > l[best]) best = i;
        return (hx_token)best;
    }
    int64_t n = 0;
    for (int64_t i = 0; i < s->n_vocab; i++)
        if (isfinite(l[i])) s->cand[n++] = (struct hx_cand){l[i], (int32_t)i};
    if (n == 0) return 0;
    int64_t k = (s->p.top_k > 0 && s->p.top_k < n) ? s->p.top_k : n;
    hx__top_k(s->cand, n, k);
    n = k;
    /* Probabilities at temperature 1 for top-p and min-p. */
    double sum = 0, mx = s->cand[0].logit;
    for (int64_t i = 0; i < n; i++) sum += exp(s->cand[i].logit - mx);
    if (s->p.top_p < 1.0f) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += exp(s->cand[i].logit - mx) / sum;
            if (acc >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {
        double cut = log(s->p.min_p);
        int64_t keep = 1;
        while (keep < n && s->cand[keep].logit - mx >= cut) keep++;
        n = keep;
    }
    double t = s->p.temperature, total = 0;
    for (int64_t i = 0; i < n; i++) total += exp((s->cand[i].logit - mx) / t);
    double u = (double)(hx__splitmix(&s->rng) >> 11) / 9007199254740992.0 * total, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += exp((s->cand[i].logit - mx) / t);
        if (u < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
