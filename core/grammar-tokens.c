/*
 * grammar-tokens.c — the per-model token table constrained decoding matches against
 * (docs/grammar.md): every token's bytes and end-of-generation flag, and the tokens with bytes
 * sorted and laid out as a pre-order trie (struct hx__tok_table, grammar-impl.h). Built once
 * per model on first use, under a lock, and kept in the model (model.h) until it is freed;
 * read-only afterwards, so grammars on several threads share it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar-impl.h"
#include "hx-impl.h"
#include "model.h"
#include "vocab.h"

void hx__tok_table_free(struct hx__tok_table *t)
{
    if (!t) return;
    hx__free(t->off);
    hx__free(t->bytes);
    hx__free(t->eog);
    hx__free(t->sorted);
    hx__free(t->nodes);
    hx__free(t);
}

static const struct hx__tok_table *hx_g_sort_table; /* qsort has no context argument */
static int hx_g_tok_cmp(const void *a, const void *b)
{
    const struct hx__tok_table *t = hx_g_sort_table;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->off[x + 1] - t->off[x], ly = t->off[y + 1] - t->off[y];
    int c = memcmp(t->bytes + t->off[x], t->bytes + t->off[y], HX_MIN(lx, ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : 1;
}

static int hx_g_table_build(const struct hx_vocab *v, struct hx__tok_table **out)
{
    struct hx__tok_table *t = hx__calloc(1, sizeof *t);
    if (!t) return HX_E_NOMEM;
    int64_t n = hx__vocab_n_tokens(v);
    t->n_vocab = n;
    t->off = hx__malloc((size_t)(n + 1) * sizeof *t->off);
    t->eog = hx__calloc((size_t)n, 1);
    t->sorted = hx__malloc((size_t)n * sizeof *t->sorted);
    size_t cap = (size_t)n * 8 + 64, used = 0;
    t->bytes = hx__malloc(cap);
    if (!t->off || !t->eog || !t->sorted || !t->bytes) goto nomem;
    int64_t n_sorted = 0;
    for (int64_t i = 0; i < n; i++) {
        char buf[512];
        size_t len = 0;
        t->off[i] = (uint32_t)used;
        t->eog[i] = hx__vocab_is_eog(v, (hx_token)i);
        if (hx__vocab_piece(v, (hx_token)i, false, buf, sizeof buf, &len) != HX_OK ||
            len > sizeof buf)
            len = 0; /* a token longer than 512 bytes is never allowed */
        if (used + len > cap) {
            size_t nc = HX_MAX(cap * 2, used + len);
            uint8_t *nb = hx__realloc(t->bytes, nc);
            if (!nb) goto nomem;
            t->bytes = nb, cap = nc;
        }
        memcpy(t->bytes + used, buf, len);
        used += len;
        if (len > 0 && !t->eog[i]) t->sorted[n_sorted++] = (int32_t)i;
    }
    t->off[n] = (uint32_t)used;
    hx_g_sort_table = t;
    qsort(t->sorted, (size_t)n_sorted, sizeof *t->sorted, hx_g_tok_cmp);
    /* Pre-order trie from the sorted strings: keep the open path, close what diverges. */
    size_t ncap = 1024;
    t->nodes = hx__malloc(ncap * sizeof *t->nodes);
    uint32_t path[513];
    uint32_t plen = 0;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    if (!t->nodes) goto nomem;
    for (int64_t k = 0; k < n_sorted; k++) {
        int32_t tok = t->sorted[k];
        const uint8_t *b = t->bytes + t->off[tok];
        uint32_t len = t->off[tok + 1] - t->off[tok], common = 0;
        while (prev && common < len && common < prev_len && b[common] == prev[common]) common++;
        while (plen > common) { /* close nodes off the shared prefix */
            uint32_t i = path[--plen];
            t->nodes[i].size = t->n_nodes - i;
        }
        for (uint32_t d = common; d < len; d++) {
            if (t->n_nodes == ncap) {
                struct hx_g_node *nn = hx__realloc(t->nodes, ncap * 2 * sizeof *nn);
                if (!nn) goto nomem;
                t->nodes = nn, ncap *= 2;
            }
            t->nodes[t->n_nodes] = (struct hx_g_node){
                .depth = (uint16_t)(d + 1), .byte = b[d], .tok0 = (uint32_t)k, .tok1 = (uint32_t)k};
            path[plen++] = t->n_nodes++;
            t->max_depth = HX_MAX(t->max_depth, (uint16_t)(d + 1));
        }
        t->nodes[path[plen - 1]].tok1 = (uint32_t)k + 1; /* equal strings share the node */
        prev = b, prev_len = len;
    }
    while (plen > 0) {
        uint32_t i = path[--plen];
        t->nodes[i].size = t->n_nodes - i;
    }
    *out = t;
    return HX_OK;
nomem:
    hx__tok_table_free(t);
    return HX_E_NOMEM;
}

static pthread_mutex_t hx_g_table_mu = PTHREAD_MUTEX_INITIALIZER;

int hx__g_tok_table(const struct hx_model *m, const struct hx__tok_table **out)
{
    pthread_mutex_lock(&hx_g_table_mu);
    struct hx_model *mm = (struct hx_model *)m; /* a lazily built cache; see model.h */
    int rc = HX_OK;
    if (!mm->tok_table) rc = hx_g_table_build(m->vocab, &mm->tok_table);
    *out = mm->tok_table;
    pthread_mutex_unlock(&hx_g_table_mu);
    return rc;
}
