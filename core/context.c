/*
 * context.c — hx_context: the devices and plan for a model (through the scheduler), the KV
 * cache bookkeeping (cached length per sequence), batch validation and logits.
 *
 * Invariant: kv_len[s] positions of sequence s are valid on some device; hx_decode advances
 * them only after the whole batch succeeded, so a failed or canceled call leaves the cache
 * as it was (rows it wrote lie beyond kv_len and are never read).
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pool.h"
#include "scheduler.h"

struct hx_context {
    struct hx_model *model;
    struct hx_sched *sched;
    struct hx_policy policy;
    struct hx_graph graph;
    int64_t n_ctx, n_batch, n_logits;
    int32_t n_seq;
    int32_t *kv_len;
    float *logits;           /* (n_logits, n_vocab) */
    int64_t logits_row;      /* batch row of logits[0] */
    int64_t n_rows_last;
    int32_t *seen;           /* scratch: rows per sequence in a batch */
    volatile sig_atomic_t cancel;
    char devices[256];
};

static int hx__ctx_sizes(struct hx_context *c, const struct hx_context_params *p)
{
    const struct hx_hparams *hp = &c->model->hp;
    /* 0 asks for the default; a negative size is a caller's mistake, not a default */
    if (p && (p->n_ctx < 0 || p->n_seq < 0 || p->n_batch < 0 || p->n_threads < 0 ||
              p->n_threads > HX_MAX_THREADS))
        return hx__set_error(HX_E_INVAL, "context parameters out of range (n_ctx %lld, n_seq %d, "
                             "n_batch %lld, n_threads %d: each 0 for the default or positive, "
                             "n_threads at most %d)", (long long)p->n_ctx, p->n_seq,
                             (long long)p->n_batch, p->n_threads, HX_MAX_THREADS);
    c->n_ctx = p && p->n_ctx > 0 ? p->n_ctx : HX_MIN(hp->n_ctx_train, 4096);
    c->n_seq = p && p->n_seq > 0 ? p->n_seq : 1;
    c->n_batch = p && p->n_batch > 0 ? p->n_batch : 512;
    if (c->n_ctx > (int64_t)1 << 24 || c->n_seq > 4096 || c->n_batch > 65536)
        return hx__set_error(HX_E_INVAL, "context too large (n_ctx %lld, n_seq %d, n_batch %lld)",
                             (long long)c->n_ctx, c->n_seq, (long long)c->n_batch);
    /* Logits of up to n_seq rows (a decode step) or more when the vocabulary is small. */
    int64_t by_mem = (int64_t)((64u << 20) / ((size_t)hp->n_vocab * sizeof(float)));
    c->n_logits = HX_MIN(c->n_batch, HX_MAX((int64_t)c->n_seq, HX_MAX(by_mem, 1)));
    return HX_OK;
}

int hx_context_new(struct hx_model *model, const struct hx_context_params *p,
                   struct hx_context **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_context_new: out is NULL");
    *out = NULL;
    hx__clear_error();
    if (!model || !model->layers) return hx__set_error(HX_E_INVAL, "model has no weights (vocab-only?)");
    struct hx_context *c = hx__calloc(1, sizeof *c);
    if (!c) return HX_E_NOMEM;
    c->model = model;
    int st = hx__ctx_sizes(c, p);
    if (st == HX_OK)
        st = hx__policy_parse(p ? p->policy : NULL, p ? p->backend : NULL, p ? p->fallback : NULL,
                              &c->policy);
    size_t mem_end = offsetof(struct hx_context_params, mem) + sizeof p->mem;
    if (st == HX_OK && p && p->struct_size >= mem_end) st = hx__mem_parse(p->mem, &c->policy);
    c->kv_len = hx__calloc((size_t)c->n_seq, sizeof *c->kv_len);
    c->seen = hx__calloc((size_t)c->n_seq, sizeof *c->seen);
    c->logits = hx__malloc((size_t)c->n_logits * (size_t)model->hp.n_vocab * sizeof(float));
    if (st == HX_OK && (!c->kv_len || !c->seen || !c->logits)) st = HX_E_NOMEM;
    if (st == HX_OK) {
        struct hx_sched_params sp = {
            .model = model, .policy = &c->policy, .n_ctx = c->n_ctx, .n_batch = c->n_batch,
            .n_logits = c->n_logits, .n_seq = c->n_seq,
            .devcfg = {.struct_size = sizeof sp.devcfg,
                       .n_threads = p && p->n_threads > 0 ? p->n_threads : hx__pool_default_threads(),
                       .kernels_dir = p ? p->npu_kernels : NULL},
        };
        size_t prog_end = offsetof(struct hx_context_params, load_progress_data) +
                          sizeof p->load_progress_data;
        if (p && p->struct_size >= prog_end)
            sp.load_progress = p->load_progress, sp.load_progress_data = p->load_progress_data;
        st = hx__sched_new(&sp, &c->sched);
    }
    if (st) {
        hx_context_free(c);
        return st;
    }
    *out = c;
    return HX_OK;
}

void hx_context_free(struct hx_context *c)
{
    if (!c) return;
    hx__sched_free(c->sched);
    hx__graph_free(&c->graph);
    hx__free(c->kv_len);
    hx__free(c->seen);
    hx__free(c->logits);
    hx__free(c);
}

/* Validate a batch against the cache; on success *logits_row is the first row with logits. */
static int hx__check_batch(struct hx_context *c, const struct hx_batch *b, int64_t *logits_row)
{
    if (!b || b->n_rows <= 0 || !b->token || !b->pos || !b->seq)
        return hx__set_error(HX_E_INVAL, "empty or incomplete batch");
    if (b->n_rows > c->n_batch)
        return hx__set_error(HX_E_INVAL, "batch has %lld rows; this context takes at most %lld",
                             (long long)b->n_rows, (long long)c->n_batch);
    memset(c->seen, 0, (size_t)c->n_seq * sizeof *c->seen);
    *logits_row = b->n_rows;
    for (int64_t r = 0; r < b->n_rows; r++) {
        int32_t s = b->seq[r];
        if (b->token[r] < 0 || b->token[r] >= c->model->hp.n_vocab)
            return hx__set_error(HX_E_INVAL, "row %lld: token %d out of range (vocabulary %lld)",
                                 (long long)r, b->token[r], (long long)c->model->hp.n_vocab);
        if (s < 0 || s >= c->n_seq)
            return hx__set_error(HX_E_INVAL, "row %lld: sequence %d out of range (%d slots)",
                                 (long long)r, s, c->n_seq);
        int32_t want = c->kv_len[s] + c->seen[s]++;
        if (b->pos[r] != want)
            return hx__set_error(HX_E_INVAL, "row %lld: sequence %d expects position %d, got %d",
                                 (long long)r, s, want, b->pos[r]);
        if (b->pos[r] >= c->n_ctx)
            return hx__set_error(HX_E_RANGE, "sequence %d is full: position %d is beyond the context of %lld",
                                 s, b->pos[r], (long long)c->n_ctx);
        bool wants = b->logits && b->logits[r];
        if (wants && *logits_row == b->n_rows) *logits_row = r;
        if (!wants && *logits_row < b->n_rows)
            return hx__set_error(HX_E_INVAL, "rows with logits must be a contiguous range ending at the last row");
    }
    if (b->n_rows - *logits_row > c->n_logits)
        return hx__set_error(HX_E_INVAL, "%lld rows want logits; this context returns at most %lld per call",
                             (long long)(b->n_rows - *logits_row), (long long)c->n_logits);
    return HX_OK;
}

int hx_decode(struct hx_context *c, const struct hx_batch *b)
{
    hx__clear_error();
    if (!c) return HX_E_INVAL;
    int64_t lr = 0;
    c->n_rows_last = 0, c->logits_row = 0; /* the previous batch's logits are gone either way */
    int st = hx__check_batch(c, b, &lr);
    if (st) return st;
    c->cancel = 0;
    st = hx__graph_build(&c->graph, c->model, b->n_rows, lr, c->n_ctx, c->n_seq);
    if (st == HX_OK)
        st = hx__sched_run(c->sched, &c->graph, b->token, b->pos, b->seq, c->kv_len, c->logits,
                           (const volatile int *)&c->cancel);
    if (st) return st;
    for (int64_t r = 0; r < b->n_rows; r++) c->kv_len[b->seq[r]]++;
    c->logits_row = lr;
    c->n_rows_last = b->n_rows;
    return HX_OK;
}

const float *hx_get_logits(struct hx_context *c, int64_t row)
{
    if (!c) {
        hx__set_error(HX_E_INVAL, "hx_get_logits: no context");
        return NULL;
    }
    int64_t r = row < 0 ? c->n_rows_last + row : row;
    if (r < c->logits_row || r >= c->n_rows_last) {
        if (c->n_rows_last == 0)
            hx__set_error(HX_E_INVAL, "hx_get_logits: row %lld: the last hx_decode returned no "
                                      "logits (none made, or it failed)", (long long)row);
        else if (c->logits_row >= c->n_rows_last)
            hx__set_error(HX_E_INVAL, "hx_get_logits: row %lld: the last batch (%lld rows) "
                                      "requested no logits", (long long)row,
                          (long long)c->n_rows_last);
        else
            hx__set_error(HX_E_INVAL, "hx_get_logits: row %lld: the last batch had %lld rows and "
                                      "holds logits for rows %lld..%lld only", (long long)row,
                          (long long)c->n_rows_last, (long long)c->logits_row,
                          (long long)c->n_rows_last - 1);
        return NULL;
    }
    return c->logits + (size_t)(r - c->logits_row) * (size_t)c->model->hp.n_vocab;
}

void hx_logits_rows(const struct hx_context *c, int64_t *first, int64_t *n)
{
    bool any = c && c->n_rows_last > c->logits_row;
    *first = any ? c->logits_row : 0;
    *n = any ? c->n_rows_last - c->logits_row : 0;
}

int hx_kv_truncate(struct hx_context *c, int32_t seq, int32_t pos)
{
    hx__clear_error();
    if (!c) return hx__set_error(HX_E_INVAL, "hx_kv_truncate: no context");
    if (seq < 0 || seq >= c->n_seq || pos < 0)
        return hx__set_error(HX_E_INVAL, "hx_kv_truncate: sequence %d, position %d (sequences "
                             "0..%d, positions from 0)", seq, pos, c->n_seq - 1);
    if (pos < c->kv_len[seq]) c->kv_len[seq] = pos;
    return HX_OK;
}

int32_t hx_kv_len(const struct hx_context *c, int32_t seq)
{
    return (c && seq >= 0 && seq < c->n_seq) ? c->kv_len[seq] : 0;
}

int64_t hx_context_n_ctx(const struct hx_context *c) { return c ? c->n_ctx : 0; }
int64_t hx_context_n_batch(const struct hx_context *c) { return c ? c->n_batch : 0; }
int hx_context_n_seq(const struct hx_context *c) { return c ? c->n_seq : 0; }

void hx_context_cancel(struct hx_context *c)
{
    if (c) c->cancel = 1;
}

const char *hx_context_devices(const struct hx_context *c)
{
    return c ? hx__sched_devices_used(c->sched) : "";
}

const char *hx_context_policy(const struct hx_context *c)
{
    return c ? c->policy.text : "";
}

int hx_context_plan_text(struct hx_context *c, char **out)
{
    hx__clear_error();
    if (!c || !out) return hx__set_error(HX_E_INVAL, "hx_context_plan_text: no context or out is NULL");
    *out = NULL;
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    hx__sb_printf(&sb, "policy %s (%s); devices:", c->policy.text, hx__policy_kind_name(c->policy.kind));
    for (int i = 0; i < c->policy.n_devs; i++) hx__sb_printf(&sb, " %s", c->policy.devs[i]);
    if (c->policy.n_fallback) {
        hx__sb_printf(&sb, "; fallback:");
        for (int i = 0; i < c->policy.n_fallback; i++) hx__sb_printf(&sb, " %s", c->policy.fallback[i]);
    }
    hx__sb_printf(&sb, "\n");
    hx__sched_mem_text(c->sched, &sb);
    struct hx_graph g = {0};
    int64_t n_pre = HX_MIN(c->n_batch, 128);
    int st = hx__graph_build(&g, c->model, n_pre, n_pre - 1, c->n_ctx, c->n_seq);
    if (st == HX_OK) st = hx__sched_plan_text(c->sched, &g, "prefill", &sb);
    if (st == HX_OK) st = hx__graph_build(&g, c->model, 1, 0, c->n_ctx, c->n_seq);
    if (st == HX_OK) st = hx__sched_plan_text(c->sched, &g, "decode", &sb);
    hx__graph_free(&g);
    if (st == HX_OK && sb.failed) st = HX_E_NOMEM;
    if (st) {
        hx__sb_free(&sb);
        return st;
    }
    *out = hx__sb_take(&sb);
    return HX_OK;
}

int hx_context_stats(const struct hx_context *c, struct hx_run_stats *out)
{
    hx__clear_error();
    if (!c || !out || out->struct_size < sizeof out->struct_size)
        return hx__set_error(HX_E_INVAL, "hx_context_stats: no context, no output, or its "
                             "struct_size (%u) below %zu", out ? out->struct_size : 0u,
                             sizeof out->struct_size);
    const struct hx_sched_stats *s = hx__sched_stats(c->sched);
    struct hx_run_stats r = {
        .struct_size = sizeof r, .n_rows = c->n_rows_last, .n_splits = s->n_splits,
        .n_transfers = s->n_transfers, .bytes_moved = s->bytes_moved,
        .n_fallback_ops = s->n_fallback_ops, .n_recoveries = s->n_recoveries};
    const struct hx_verify_report *v;
    if (c->policy.verify && hx__sched_verify_report(c->sched, &v) == HX_OK)
        r.verify = true, r.verify_checks = v->n_checks, r.verify_failed = v->n_failed,
        r.verify_ref_failed = v->ref_failed;
    /* A caller built against an older, shorter struct gets the fields it knows of. */
    size_t n = out->struct_size < sizeof r ? out->struct_size : sizeof r;
    memcpy(out, &r, n);
    out->struct_size = (uint32_t)n;
    return HX_OK;
}

struct hx_sched *hx__context_sched(struct hx_context *c)
{
    return c ? c->sched : NULL;
}
