/*
 * prompt-cache.c — the server's prompt cache as bookkeeping: which tokens each slot's KV holds
 * (positions 0..n-1) and which free slot a waiting prompt should take. The inference worker
 * (worker.c) owns the KV itself: it truncates a slot's KV to what pick and release return and
 * records the tokens of every successful hx_decode here.
 *
 * The choice: the free slot whose tokens share the longest prefix with the prompt; a prefix
 * shorter than HX_SRV_CACHE_STEER tokens (a BOS, a role header) is not worth evicting another
 * conversation's longer cache for, so it does not steer, and ties and misses go to the least
 * recently used free slot (whose cache is the one evicted). docs/server.md "Prompt cache".
 */
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define HX_SRV_CACHE_STEER 16

int hx__srv_cache_init(struct hx_srv_cache *c, int n_slots, int64_t n_ctx)
{
    memset(c, 0, sizeof *c);
    c->slot = calloc((size_t)n_slots, sizeof *c->slot);
    if (!c->slot) return -1;
    c->n_slots = n_slots;
    for (int s = 0; s < n_slots; s++) {
        c->slot[s].toks = malloc((size_t)n_ctx * sizeof(hx_token));
        if (!c->slot[s].toks) {
            hx__srv_cache_free(c);
            return -1;
        }
    }
    return 0;
}

void hx__srv_cache_free(struct hx_srv_cache *c)
{
    for (int s = 0; c->slot && s < c->n_slots; s++) free(c->slot[s].toks);
    free(c->slot);
    memset(c, 0, sizeof *c);
}

static int64_t hx_srv_common_prefix(const struct hx_srv_cached *k, const hx_token *p, int64_t n)
{
    int64_t i = 0, m = k->n < n ? k->n : n;
    while (i < m && k->toks[i] == p[i]) i++;
    return i;
}

int hx__srv_cache_pick(const struct hx_srv_cache *c, struct hx_srv_job *const *taken,
                       const hx_token *prompt, int64_t n, bool use, int64_t *reuse)
{
    int best = -1;
    int64_t best_n = 0, best_rank = -1;
    const int64_t steer = HX_SRV_CACHE_STEER < n - 1 ? HX_SRV_CACHE_STEER : n - 1;
    for (int s = 0; s < c->n_slots; s++) {
        if (taken[s]) continue;
        const struct hx_srv_cached *k = &c->slot[s];
        const int64_t m = use ? hx_srv_common_prefix(k, prompt, n) : 0;
        const int64_t rank = m >= steer && m > 0 ? m : 0;
        if (best < 0 || rank > best_rank || (rank == best_rank && k->used < c->slot[best].used))
            best = s, best_n = m, best_rank = rank;
    }
    /* the last prompt token is always run: its logits give the first sampled token */
    *reuse = best_n < n ? best_n : n - 1;
    return best;
}

void hx__srv_cache_take(struct hx_srv_cache *c, int s, int64_t keep)
{
    c->slot[s].n = keep;
    c->slot[s].used = ++c->clock;
}

void hx__srv_cache_record(struct hx_srv_cache *c, int s, int64_t pos, const hx_token *toks,
                          int64_t n)
{
    memcpy(c->slot[s].toks + pos, toks, (size_t)n * sizeof *toks);
    c->slot[s].n = pos + n;
}

int64_t hx__srv_cache_release(struct hx_srv_cache *c, int s, int64_t kv_len, bool keep)
{
    struct hx_srv_cached *k = &c->slot[s];
    if (k->n > kv_len) k->n = kv_len; /* cannot happen: tokens are recorded after the decode */
    if (!keep) k->n = 0;              /* cache_prompt: false neither reads nor leaves a cache */
    k->used = ++c->clock;
    return k->n;
}
