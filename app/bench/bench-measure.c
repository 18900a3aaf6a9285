/*
 * bench-measure.c — what `engine bench -m` measures: a model loaded with its random token ids
 * and the bytes of weights a token reads (from the GGUF tensor table), the timed runs of a test
 * (ppN: one prefill; tgN: N single-token decodes; both from a cache of -d tokens), the
 * scheduler's counters summed over them, and the row they make.
 */
#include <stdio.h>
#include <string.h>

#include "bench-model.h"
#include "hx-internal.h"

/* Bytes one generated token reads: every tensor once, except that the token embedding costs one
 * row, unless there is no output.weight and the embedding is also the head (then all of it). */
static int hx_bm_weights_scan(const char *path, struct hx_bm_weights *w)
{
    struct hx_gguf *g;
    memset(w, 0, sizeof *w);
    if (hx__gguf_open(path, false, &g) != HX_OK) return 1;
    bool tied = !hx__gguf_find_tensor(g, "output.weight");
    int64_t elems[64] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        size_t row = t->nbytes / (size_t)(t->ne[1] > 0 ? t->ne[1] : 1);
        bool embd = !strcmp(t->name, "token_embd.weight");
        w->bytes_per_token += !embd ? t->nbytes : tied ? t->nbytes + row : row;
        if (!strncmp(t->name, "blk.", 4) && t->n_dims >= 2 && t->ggml_type < 64)
            elems[t->ggml_type] += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    int best = 0;
    for (int i = 1; i < 64; i++) best = elems[i] > elems[best] ? i : best;
    const char *name = hx__ggml_type_name((uint32_t)best);
    snprintf(w->type, sizeof w->type, "%s", elems[best] && name ? name : "?");
    hx__gguf_close(g);
    return 0;
}

static void hx_bm_label(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf")) len -= 5;
    snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), base);
}

/* Fixed-seed token ids in [0, n_vocab) (xorshift64*): valid, and the same every run. */
static void hx_bm_random_ids(hx_token *ids, int64_t n, int64_t n_vocab, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        ids[i] = (hx_token)((s * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)n_vocab);
    }
}

int hx_bm_model_open(struct hx_bm_model *bm, const char *path, const struct hx_bm_opts *o,
                            int64_t n_ids)
{
    memset(bm, 0, sizeof *bm);
    bm->path = path;
    hx_bm_label(path, bm->label, sizeof bm->label);
    struct hx_model_params mp = {.struct_size = sizeof mp, .no_mmap = !o->mmap};
    if (hx_model_load(path, &mp, &bm->m) != HX_OK) {
        hx_app_error("bench", "cannot load model '%s': %s", path, hx_last_error());
        return 1;
    }
    bm->info.struct_size = sizeof bm->info;
    hx_model_get_info(bm->m, &bm->info);
    if (hx_bm_weights_scan(path, &bm->w) != 0) {
        hx_app_error("bench", "cannot read the tensor table of '%s': %s", path, hx_last_error());
        return 1;
    }
    bm->ids = hx_malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *bm->ids);
    if (!bm->ids) {
        hx_app_error("bench", "out of memory");
        return 1;
    }
    if (bm->info.n_vocab <= 0) {
        hx_app_error("bench", "'%s' has no vocabulary to draw token ids from", path);
        return 1;
    }
    hx_bm_random_ids(bm->ids, n_ids, bm->info.n_vocab, o->seed);
    return 0;
}

void hx_bm_model_close(struct hx_bm_model *bm)
{
    hx_free(bm->ids);
    hx_model_free(bm->m);
    bm->ids = NULL, bm->m = NULL;
}

struct hx_bm_tally_ctx {
    struct hx_context *c;
    struct hx_bm_tally *t;
};

/* Add the last batch's scheduler counters to t (NULL: not counting). Inside the timed span, but
 * it is a copy of a few counters: nanoseconds against the microseconds of a decode. */
static void hx_bm_tally_add(struct hx_context *c, struct hx_bm_tally *t)
{
    struct hx_run_stats rs = {.struct_size = sizeof rs};
    if (!t || hx_context_stats(c, &rs) != HX_OK) return;
    t->batches++;
    t->splits += rs.n_splits;
    t->fallback_ops += rs.n_fallback_ops;
    t->bytes_moved += (double)rs.bytes_moved;
}

static void hx_bm_tally_batch(void *user, int64_t n_fed)
{
    (void)n_fed;
    struct hx_bm_tally_ctx *tc = user;
    hx_bm_tally_add(tc->c, tc->t);
}

/* Prefill ids[from..from + n) at positions from.. in batches of the context's n_batch; logits
 * of the last row only (in *logits when not NULL). */
int hx_bm_prefill(struct hx_context *c, const hx_token *ids, int64_t from, int64_t n,
                         struct hx_bm_tally *t, const float **logits)
{
    struct hx_bm_tally_ctx tc = {c, t};
    return hx_app_prefill(c, ids + from, n, (int32_t)from, 0, t ? hx_bm_tally_batch : NULL, &tc,
                          logits);
}

/* Decode step i: token ids[i] at position i, with its logits (the head is computed). */
int hx_bm_step(struct hx_context *c, const hx_token *ids, int64_t i)
{
    int32_t pos = (int32_t)i, seq = 0;
    int8_t lg = 1;
    struct hx_batch b = {.n_rows = 1, .token = ids + i, .pos = &pos, .seq = &seq, .logits = &lg};
    return hx_decode(c, &b);
}

/* n single-token decodes from position from. */
static int hx_bm_generate(struct hx_context *c, const hx_token *ids, int64_t from, int64_t n,
                          struct hx_bm_tally *t)
{
    for (int64_t i = from; i < from + n; i++) {
        int st = hx_bm_step(c, ids, i);
        if (st) return st;
        hx_bm_tally_add(c, t);
    }
    return HX_OK;
}

/* One timed run of a test from a cache of depth tokens (ids[0..depth) are in it already):
 * nanoseconds in *ns. */
static int hx_bm_run_once(struct hx_context *c, const hx_token *ids, int64_t depth,
                          int64_t n_prompt, int64_t n_gen, double *ns, struct hx_bm_tally *t)
{
    int st = hx_kv_truncate(c, 0, (int32_t)depth);
    if (st) return st;
    double t0 = hx_app_now_us();
    st = n_prompt ? hx_bm_prefill(c, ids, depth, n_prompt, t, NULL)
                  : hx_bm_generate(c, ids, depth, n_gen, t);
    *ns = (hx_app_now_us() - t0) * 1e3;
    return st;
}

/* The untimed warm-up: one prefill (if any pp test) and a few decodes (if any tg test) read
 * every weight the timed runs will read, through the same mapping. */
int hx_bm_warmup(struct hx_context *c, const hx_token *ids, int64_t max_p, int64_t max_n)
{
    double ns;
    int st = HX_OK;
    if (max_p)
        st = hx_bm_run_once(c, ids, 0, max_p < HX_BM_BATCH ? max_p : HX_BM_BATCH, 0, &ns, NULL);
    if (!st && max_n) st = hx_bm_run_once(c, ids, 0, 0, max_n < 4 ? max_n : 4, &ns, NULL);
    return st;
}

static void hx_bm_stats(struct hx_bm_row *r, const double *ns, int reps, int64_t tokens)
{
    double ts[HX_BM_MAX_REPS];
    for (int i = 0; i < reps; i++) ts[i] = (double)tokens * 1e9 / ns[i];
    r->n_reps = reps;
    r->samples_ns = ns;
    r->avg_ts = hx_app_mean(ts, (size_t)reps);
    r->stddev_ts = hx_app_stddev(ts, (size_t)reps);
    r->median_ts = hx_app_median(ts, (size_t)reps);
    r->best_ts = hx_app_max(ts, (size_t)reps);
}

static void hx_bm_moves(struct hx_bm_row *r, const struct hx_bm_tally *t, int reps, int64_t tokens)
{
    double b = t->batches > 0 ? (double)t->batches : 1, n = (double)reps * (double)tokens;
    r->batches = (double)t->batches / reps;
    r->splits_per_batch = (double)t->splits / b;
    r->splits_per_token = (double)t->splits / n;
    r->bytes_moved_per_token = t->bytes_moved / n;
    r->fallback_ops_per_batch = (double)t->fallback_ops / b;
}

/* Time one test -r times and print its row. With a depth, the cache is first filled with that
 * many tokens (once, untimed) and each run starts from there. */
int hx_bm_test(const struct hx_bm_combo *cb, struct hx_context *c, int64_t depth,
                      int64_t n_prompt, int64_t n_gen, struct hx_bm_check *k,
                      struct hx_bm_out *out)
{
    const struct hx_bm_opts *o = cb->o;
    double ns[HX_BM_MAX_REPS];
    int64_t tokens = n_prompt ? n_prompt : n_gen;
    struct hx_bm_row r = {.model = cb->model, .backend = cb->backend, .policy = cb->policy,
                          .bw = cb->bw, .n_threads = cb->n_threads, .n_prompt = n_prompt,
                          .n_gen = n_gen, .n_depth = depth, .mmap = o->mmap};
    char tn[64];
    hx_bm_test_name(&r, tn, sizeof tn);
    struct hx_bm_tally tally = {0};
    int st = HX_OK;
    if (depth) {
        hx_bm_progress(cb, "%s: filling the cache to depth %lld", tn, (long long)depth);
        if ((st = hx_kv_truncate(c, 0, 0)) == HX_OK)
            st = hx_bm_prefill(c, cb->model->ids, 0, depth, NULL, NULL);
    }
    struct hx_run_stats s0 = {.struct_size = sizeof s0}, s1 = s0;
    hx_context_stats(c, &s0);
    struct hx_app_load_mark m0, m1;
    hx_app_load_mark(&m0);
    for (int i = 0; i < o->reps && st == HX_OK; i++) {
        hx_bm_progress(cb, "%s run %d/%lld", tn, i + 1, (long long)o->reps);
        st = hx_bm_run_once(c, cb->model->ids, depth, n_prompt, n_gen, &ns[i], &tally);
    }
    if (st != HX_OK) {
        hx_app_error("bench", "%s %s/%s %s: %s", cb->model->label, cb->backend, cb->policy, tn,
                     hx_last_error());
        return 1;
    }
    hx_app_load_mark(&m1);
    hx_context_stats(c, &s1);
    struct hx_bm_verdict *v = hx_bm_row_verdict(k, n_prompt), self = *v;
    if (v->self) hx_bm_self_verdict(v = &self, &s0, &s1);
    r.devices = hx_context_devices(c);
    r.other_cores = hx_app_other_cores(&m0, &m1);
    r.verdict = v;
    hx_bm_stats(&r, ns, (int)o->reps, tokens);
    hx_bm_moves(&r, &tally, (int)o->reps, tokens);
    /* A row that failed its check is timed and printed all the same, flagged; out->any_failed
     * makes the exit status 1 at the end. */
    if (v->state == HX_BM_V_FAIL)
        hx_app_error("bench", "%s %s/%s %s failed verification: %s", cb->model->label,
                     cb->backend, cb->policy, tn, v->note);
    hx_bm_emit(o, &r, out);
    return 0;
}
