/*
 * grammar.c — constrained decoding (docs/grammar.md): a GBNF subset compiled to byte-level
 * rules, matched as a set of parse stacks, and sampling that only picks the tokens the
 * grammar allows. The GBNF text is compiled by grammar-parse.c into what grammar-impl.h
 * declares, and grammar-tokens.c builds the model's token trie; this file matches, and
 * samples.
 *
 * Rules: every rule is a list of alternatives, each a run of elements in one flat array ended
 * by an END element. An element is a byte set (CHR: a 256-bit map) or a reference to a rule
 * (REF). Character classes over code points become rules whose alternatives are UTF-8 byte
 * sequences, so matching is bytes throughout.
 *
 * State: a set of stacks. A stack lists element positions, bottom first: the top is the byte
 * set to match next, the ones below are where to continue when the rule above finishes. An
 * empty stack means the text is a whole sentence. Rules that end in a reference pop before they
 * push, so right recursion (x*) keeps stacks flat.
 *
 * Tokens: the vocabulary's token bytes are kept per model (built on first use) as a trie laid
 * out in pre-order, so one pass over it with a stack set per depth, skipping whole subtrees
 * where no stack survives, gives the mask of allowed tokens. Sampling first looks the state up
 * in a cache of masks; otherwise, for greedy or top-k sampling, it checks the best candidates
 * one by one (cheap) and only when too few are valid walks the whole trie.
 *
 * Budget: each element position knows the fewest bytes that finish its alternative, so a stack
 * knows the fewest bytes that finish the sentence. A token is allowed only if that number after
 * it fits in the tokens left (every byte has a token), so generation under a budget ends whole.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar-impl.h"
#include "hx-impl.h"
#include "model.h"

/* ---- stack sets --------------------------------------------------------------------------- */

static void hx_g_set_clear(struct hx_g_set *s)
{
    s->n = s->n_data = 0;
}

static void hx_g_set_free(struct hx_g_set *s)
{
    hx__free(s->data);
    hx__free(s->off);
    hx__free(s->len);
    memset(s, 0, sizeof *s);
}

static void hx_g_set_add(struct hx_g_set *s, const uint32_t *st, uint32_t len)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->len[i] != len) continue;
        const uint32_t *o = s->data + s->off[i];
        uint32_t k = len;
        while (k > 0 && o[k - 1] == st[k - 1]) k--; /* tops differ most often */
        if (k == 0) return;
    }
    if (s->n == HX_G_MAX_STACKS) return; /* dropping a parse only narrows what is allowed */
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 8;
        uint32_t *no = hx__realloc(s->off, nc * sizeof *no),
                 *nl = no ? hx__realloc(s->len, nc * sizeof *nl) : NULL;
        if (no) s->off = no;
        if (!no || !nl) {
            s->oom = true;
            return;
        }
        s->len = nl, s->cap = nc;
    }
    if (s->n_data + len > s->cap_data || !s->data) { /* data is never NULL in a set with stacks */
        uint32_t nc = HX_MAX(s->cap_data * 2, s->n_data + len + 64);
        uint32_t *nd = hx__realloc(s->data, nc * sizeof *nd);
        if (!nd) {
            s->oom = true;
            return;
        }
        s->data = nd, s->cap_data = nc;
    }
    if (len) memcpy(s->data + s->n_data, st, len * sizeof *st); /* an empty stack: no data */
    s->off[s->n] = s->n_data;
    s->len[s->n++] = len;
    s->n_data += len;
}

static bool hx_g_set_copy(struct hx_g_set *dst, const struct hx_g_set *src)
{
    hx_g_set_clear(dst);
    for (uint32_t i = 0; i < src->n; i++) hx_g_set_add(dst, src->data + src->off[i], src->len[i]);
    return !dst->oom;
}

/* ---- matching ------------------------------------------------------------------------------- */

static bool hx_g_stk_room(struct hx_grammar *g, uint32_t n)
{
    if (n <= g->stk_cap) return true;
    uint32_t nc = HX_MAX(n, g->stk_cap * 2);
    uint32_t *ns = hx__realloc(g->stk, nc * sizeof *ns);
    if (!ns) return false;
    g->stk = ns, g->stk_cap = nc;
    return true;
}

/*
 * Normalise the stack g->stk[0..len) (its top may be END or REF) into stacks whose top is a byte
 * set (or empty), adding them to out. Recursion depth is bounded by the rules' left nesting,
 * which is finite (no left recursion).
 */
static void hx_g_expand(struct hx_grammar *g, uint32_t len, struct hx_g_set *out)
{
    for (;;) {
        if (len == 0) {
            hx_g_set_add(out, g->stk, 0);
            return;
        }
        uint32_t p = g->stk[len - 1];
        const struct hx_g_elem *e = &g->el[p];
        if (e->type == HX_G_END) {
            len--;
            continue;
        }
        if (e->type == HX_G_CHR) {
            hx_g_set_add(out, g->stk, len);
            return;
        }
        if (g->rules[e->v].dispatch) { /* a pending choice by the next byte */
            hx_g_set_add(out, g->stk, len);
            return;
        }
        /* REF: the continuation replaces the top (or pops if it is the end) */
        if (g->el[p + 1].type == HX_G_END)
            len--;
        else
            g->stk[len - 1] = p + 1;
        const struct hx_g_rule *R = &g->rules[e->v];
        if (!hx_g_stk_room(g, len + 1)) {
            out->oom = true;
            return;
        }
        uint32_t local[64], *save = NULL;
        if (R->n_alts > 1) {
            save = len <= 64 ? local : hx__malloc(len * sizeof *save);
            if (!save) {
                out->oom = true;
                return;
            }
            memcpy(save, g->stk, len * sizeof *save);
        }
        for (uint32_t a = 0; a + 1 < R->n_alts; a++) {
            if (a > 0) memcpy(g->stk, save, len * sizeof *save);
            g->stk[len] = R->alts[a];
            hx_g_expand(g, len + 1, out);
            if (!hx_g_stk_room(g, len + 1)) {
                out->oom = true;
                break;
            }
        }
        if (save) memcpy(g->stk, save, len * sizeof *save);
        if (save != local) hx__free(save);
        g->stk[len] = R->alts[R->n_alts - 1];
        len++;
    }
}

/* out = the stacks of `in` advanced by one byte. */
static void hx_g_advance(struct hx_grammar *g, const struct hx_g_set *in, uint8_t byte,
                         struct hx_g_set *out)
{
    hx_g_set_clear(out);
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t len = in->len[i];
        if (len == 0) continue;
        const uint32_t *st = in->data + in->off[i];
        uint32_t top = st[len - 1];
        const struct hx_g_elem *e = &g->el[top];
        if (e->type == HX_G_REF) { /* a dispatch rule: the alternatives this byte starts */
            const struct hx_g_rule *R = &g->rules[e->v];
            if (!(R->first[byte >> 6] >> (byte & 63) & 1)) continue;
            for (uint32_t a = 0; a < R->n_alts; a++) {
                uint32_t q = R->alts[a];
                const uint64_t *bits = g->sets[g->el[q].v];
                if (!(bits[byte >> 6] >> (byte & 63) & 1)) continue;
                if (!hx_g_stk_room(g, len + 2)) {
                    out->oom = true;
                    return;
                }
                memcpy(g->stk, st, len * sizeof *st);
                uint32_t n = len;
                if (g->el[top + 1].type == HX_G_END)
                    n--;
                else
                    g->stk[n - 1] = top + 1;
                g->stk[n++] = q + 1;
                hx_g_expand(g, n, out);
            }
            continue;
        }
        const uint64_t *bits = g->sets[e->v];
        if (!(bits[byte >> 6] >> (byte & 63) & 1)) continue;
        if (!hx_g_stk_room(g, len + 1)) {
            out->oom = true;
            return;
        }
        memcpy(g->stk, st, len * sizeof *st);
        g->stk[len - 1] = top + 1;
        hx_g_expand(g, len, out);
    }
}

/* Fewest bytes that finish the sentence from this state (HX_G_INF: none). */
static uint32_t hx_g_dist(const struct hx_grammar *g, const struct hx_g_set *s)
{
    uint32_t best = HX_G_INF;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t d = 0;
        const uint32_t *st = s->data + s->off[i];
        for (uint32_t k = 0; k < s->len[i]; k++) d = HX_MIN(d + g->sufmin[st[k]], HX_G_INF);
        best = HX_MIN(best, d);
    }
    return best;
}

static bool hx_g_has_empty(const struct hx_g_set *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->len[i] == 0) return true;
    return false;
}

static bool hx_g_levels(struct hx_grammar *g)
{
    uint32_t need = (uint32_t)g->tt->max_depth + 2;
    if (g->n_lv >= need) return true;
    struct hx_g_set *nl = hx__realloc(g->lv, need * sizeof *nl);
    if (!nl) return false;
    memset(nl + g->n_lv, 0, (need - g->n_lv) * sizeof *nl);
    g->lv = nl, g->n_lv = need;
    return true;
}

/* Walk bytes from `from`; the result is in g->lv[n % 2] style scratch: returns the final set. */
static const struct hx_g_set *hx_g_walk(struct hx_grammar *g, const struct hx_g_set *from,
                                        const uint8_t *b, size_t n)
{
    const struct hx_g_set *cur = from;
    for (size_t i = 0; i < n; i++) {
        struct hx_g_set *nx = &g->lv[i & 1];
        hx_g_advance(g, cur, b[i], nx);
        if (nx->oom || nx->n == 0) return nx->oom ? NULL : nx;
        cur = nx;
    }
    return cur;
}

/* ---- a lazily built DFA over stack sets ------------------------------------------------------
 * Every distinct stack set met is interned as a state (0 is the empty, dead set) with its
 * distance to the end; transitions by one byte are memoized. Inside a string, say, every
 * character leads back to the same set, so the trie walk becomes one table lookup per node.
 * When it grows past its limits it is dropped and rebuilt (between walks, never during one). */

#define HX_G_DFA_MAX_STATES (1u << 18)
#define HX_G_DFA_MAX_TRANS (1u << 23)
#define HX_G_DFA_MAX_ARENA ((size_t)1 << 24) /* 64 MiB of serialized states */

struct hx_g_dfa {
    uint32_t *arena; /* states serialized: n_stacks, then (len, entries...) each */
    size_t n_arena, cap_arena;
    uint32_t *off, *dist; /* per state */
    uint32_t n, cap;
    uint32_t *ht; /* state index + 1 by content hash (open addressing) */
    uint32_t ht_cap;
    uint64_t *tr_key; /* (state << 8 | byte) + 1; 0 = free */
    uint32_t *tr_val;
    uint32_t tr_cap, tr_n;
};

static void hx_g_dfa_free(struct hx_g_dfa *d)
{
    if (!d) return;
    hx__free(d->arena);
    hx__free(d->off);
    hx__free(d->dist);
    hx__free(d->ht);
    hx__free(d->tr_key);
    hx__free(d->tr_val);
    hx__free(d);
}

static uint64_t hx_g_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static bool hx_g_dfa_reset(struct hx_g_dfa *d)
{
    d->n_arena = 0;
    d->n = 0;
    d->tr_n = 0;
    if (!d->ht) {
        d->ht_cap = 1024;
        d->ht = hx__malloc(d->ht_cap * sizeof *d->ht);
        d->tr_cap = 1u << 14;
        d->tr_key = hx__malloc(d->tr_cap * sizeof *d->tr_key);
        d->tr_val = hx__malloc(d->tr_cap * sizeof *d->tr_val);
        if (!d->ht || !d->tr_key || !d->tr_val) return false;
    }
    memset(d->ht, 0, d->ht_cap * sizeof *d->ht);
    memset(d->tr_key, 0, d->tr_cap * sizeof *d->tr_key);
    return true;
}

static const uint32_t *hx_g_dfa_state(const struct hx_g_dfa *d, uint32_t id)
{
    return d->arena + d->off[id];
}

static size_t hx_g_dfa_len(const uint32_t *st)
{
    size_t k = 1;
    for (uint32_t i = 0; i < st[0]; i++) k += 1 + st[k];
    return k;
}

/* The state of set s (interned if new); UINT32_MAX when out of memory. */
static uint32_t hx_g_dfa_intern(struct hx_grammar *g, const struct hx_g_set *s)
{
    struct hx_g_dfa *d = g->dfa;
    if (s->n == 0 && d->n > 0) return 0;
    size_t need = 1 + s->n + s->n_data;
    if (d->n_arena + need > d->cap_arena) {
        size_t nc = HX_MAX(d->cap_arena * 2, d->n_arena + need + 4096);
        uint32_t *na = hx__realloc(d->arena, nc * sizeof *na);
        if (!na) return UINT32_MAX;
        d->arena = na, d->cap_arena = nc;
    }
    uint32_t *w = d->arena + d->n_arena;
    size_t k = 0;
    w[k++] = s->n;
    for (uint32_t i = 0; i < s->n; i++) {
        w[k++] = s->len[i];
        if (s->len[i]) memcpy(w + k, s->data + s->off[i], s->len[i] * sizeof *w);
        k += s->len[i];
    }
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < k; i++) h = hx_g_mix(h ^ w[i]);
    uint32_t mask = d->ht_cap - 1;
    for (uint32_t j = (uint32_t)h & mask;; j = (j + 1) & mask) {
        uint32_t v = d->ht[j];
        if (v == 0) break;
        const uint32_t *o = hx_g_dfa_state(d, v - 1);
        if (hx_g_dfa_len(o) == k && !memcmp(o, w, k * sizeof *w)) return v - 1;
    }
    if (d->n == d->cap) {
        uint32_t nc = d->cap ? d->cap * 2 : 256;
        uint32_t *no = hx__realloc(d->off, nc * sizeof *no),
                 *nd = no ? hx__realloc(d->dist, nc * sizeof *nd) : NULL;
        if (no) d->off = no;
        if (!no || !nd) return UINT32_MAX;
        d->dist = nd, d->cap = nc;
    }
    if ((d->n + 1) * 2 > d->ht_cap) { /* grow the table and rehash */
        uint32_t nc = d->ht_cap * 2;
        uint32_t *nh = hx__calloc(nc, sizeof *nh);
        if (!nh) return UINT32_MAX;
        for (uint32_t id = 0; id < d->n; id++) {
            const uint32_t *o = hx_g_dfa_state(d, id);
            size_t ol = hx_g_dfa_len(o);
            uint64_t oh = 0x9E3779B97F4A7C15ull;
            for (size_t i = 0; i < ol; i++) oh = hx_g_mix(oh ^ o[i]);
            uint32_t j = (uint32_t)oh & (nc - 1);
            while (nh[j]) j = (j + 1) & (nc - 1);
            nh[j] = id + 1;
        }
        hx__free(d->ht);
        d->ht = nh, d->ht_cap = nc, mask = nc - 1;
    }
    uint32_t j = (uint32_t)h & mask;
    while (d->ht[j]) j = (j + 1) & mask;
    uint32_t id = d->n++;
    d->ht[j] = id + 1;
    d->off[id] = (uint32_t)d->n_arena;
    d->dist[id] = hx_g_dist(g, s);
    d->n_arena += k;
    return id;
}

static void hx_g_dfa_load(const struct hx_g_dfa *d, uint32_t id, struct hx_g_set *out)
{
    const uint32_t *st = hx_g_dfa_state(d, id);
    hx_g_set_clear(out);
    size_t k = 1;
    for (uint32_t i = 0; i < st[0]; i++) {
        hx_g_set_add(out, st + k + 1, st[k]);
        k += 1 + st[k];
    }
}

/* The state after one byte; UINT32_MAX when out of memory. */
static uint32_t hx_g_dfa_step(struct hx_grammar *g, uint32_t id, uint8_t byte)
{
    struct hx_g_dfa *d = g->dfa;
    uint64_t key = ((uint64_t)id << 8 | byte) + 1;
    uint32_t mask = d->tr_cap - 1;
    uint32_t j = (uint32_t)hx_g_mix(key) & mask;
    for (; d->tr_key[j]; j = (j + 1) & mask)
        if (d->tr_key[j] == key) return d->tr_val[j];
    struct hx_g_set *a = &g->lv[0], *b = &g->lv[1];
    hx_g_dfa_load(d, id, a);
    hx_g_advance(g, a, byte, b);
    if (a->oom || b->oom) return UINT32_MAX;
    uint32_t to = hx_g_dfa_intern(g, b);
    if (to == UINT32_MAX) return to;
    if ((d->tr_n + 1) * 2 > d->tr_cap) { /* grow and rehash */
        uint32_t nc = d->tr_cap * 2;
        uint64_t *nk = hx__calloc(nc, sizeof *nk);
        uint32_t *nv = hx__malloc(nc * sizeof *nv);
        if (!nk || !nv) {
            hx__free(nk);
            hx__free(nv);
            return UINT32_MAX;
        }
        for (uint32_t i = 0; i < d->tr_cap; i++) {
            if (!d->tr_key[i]) continue;
            uint32_t q = (uint32_t)hx_g_mix(d->tr_key[i]) & (nc - 1);
            while (nk[q]) q = (q + 1) & (nc - 1);
            nk[q] = d->tr_key[i], nv[q] = d->tr_val[i];
        }
        hx__free(d->tr_key);
        hx__free(d->tr_val);
        d->tr_key = nk, d->tr_val = nv, d->tr_cap = nc, mask = nc - 1;
        j = (uint32_t)hx_g_mix(key) & mask;
        while (d->tr_key[j]) j = (j + 1) & mask;
    }
    d->tr_key[j] = key, d->tr_val[j] = to;
    d->tr_n++;
    return to;
}

/* The current state's DFA state, after dropping the DFA if it grew too large. */
static uint32_t hx_g_dfa_cur(struct hx_grammar *g)
{
    struct hx_g_dfa *d = g->dfa;
    if (d->n > HX_G_DFA_MAX_STATES || d->tr_n > HX_G_DFA_MAX_TRANS ||
        d->n_arena > HX_G_DFA_MAX_ARENA || d->n == 0) {
        if (!hx_g_dfa_reset(d)) return UINT32_MAX;
        struct hx_g_set empty = {0};
        if (hx_g_dfa_intern(g, &empty) != 0) return UINT32_MAX; /* state 0: dead */
    }
    return hx_g_dfa_intern(g, &g->cur);
}

/* ---- public: build ------------------------------------------------------------------------- */

void hx_grammar_free(struct hx_grammar *g)
{
    if (!g) return;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        hx__free(g->rules[r].name);
        hx__free(g->rules[r].alts);
    }
    hx__free(g->rules);
    hx__free(g->name_ht);
    hx__free(g->el);
    hx__free(g->sets);
    hx__free(g->sufmin);
    hx_g_set_free(&g->start);
    hx_g_set_free(&g->cur);
    hx_g_dfa_free(g->dfa);
    hx__free(g->ids);
    for (uint32_t i = 0; i < g->n_lv; i++) hx_g_set_free(&g->lv[i]);
    hx__free(g->lv);
    hx__free(g->stk);
    hx__free(g->work);
    hx__free(g->mask);
    hx__free(g->cand);
    for (int i = 0; i < HX_G_CACHE; i++) {
        hx__free(g->cache[i].stacks);
        hx__free(g->cache[i].mask);
    }
    hx__free(g);
}

int hx_grammar_new(const struct hx_model *model, const char *text, size_t len,
                   struct hx_grammar **out)
{
    if (!out) return HX_E_INVAL;
    *out = NULL;
    if (!model || !text) return hx__set_error(HX_E_INVAL, "grammar: no model or no text");
    struct hx_grammar *g = hx__calloc(1, sizeof *g);
    if (!g) return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    g->model = model;
    int rc = hx__grammar_compile(g, text, len);
    if (rc != HX_OK) {
        hx_grammar_free(g);
        return rc;
    }
    if (hx__g_tok_table(model, &g->tt) != HX_OK) goto nomem;
    int64_t nv = g->tt->n_vocab;
    g->work = hx__malloc((size_t)nv * sizeof *g->work);
    g->mask = hx__malloc((size_t)(nv + 63) / 64 * 8);
    g->cand = hx__malloc(1024 * sizeof *g->cand);
    g->dfa = hx__calloc(1, sizeof *g->dfa);
    g->ids = hx__malloc(((size_t)g->tt->max_depth + 2) * sizeof *g->ids);
    if (!g->work || !g->mask || !g->cand || !g->dfa || !g->ids || !hx_g_levels(g) ||
        !hx_g_stk_room(g, 64))
        goto nomem;
    g->stk[0] = g->n_el - 2; /* the start compile appended: a REF to root, then END */
    hx_g_expand(g, 1, &g->start);
    if (g->start.oom || !hx_g_set_copy(&g->cur, &g->start)) goto nomem;
    *out = g;
    return HX_OK;
nomem:
    hx_grammar_free(g);
    return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
}

void hx_grammar_reset(struct hx_grammar *g)
{
    if (g) hx_g_set_copy(&g->cur, &g->start);
}

bool hx_grammar_can_end(const struct hx_grammar *g)
{
    return g && hx_g_has_empty(&g->cur);
}

bool hx_grammar_done(const struct hx_grammar *g)
{
    return g && g->cur.n == 1 && g->cur.len[0] == 0;
}

int hx_grammar_accept_text(struct hx_grammar *g, const char *text, size_t len)
{
    if (!g || (!text && len)) return HX_E_INVAL;
    const struct hx_g_set *s = hx_g_walk(g, &g->cur, (const uint8_t *)text, len);
    if (!s) return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    if (s->n == 0)
        return hx__set_error(HX_E_INVAL, "grammar: the text does not continue the grammar");
    if (s != &g->cur && !hx_g_set_copy(&g->cur, s)) return HX_E_NOMEM;
    return HX_OK;
}

int hx_grammar_accept(struct hx_grammar *g, hx_token tok)
{
    if (!g || tok < 0 || tok >= g->tt->n_vocab)
        return hx__set_error(HX_E_INVAL, "grammar: token out of range");
    const struct hx__tok_table *t = g->tt;
    if (t->eog[tok]) {
        if (hx_g_has_empty(&g->cur)) return HX_OK;
        return hx__set_error(HX_E_INVAL, "grammar: end of generation before the text is whole");
    }
    uint32_t n = t->off[tok + 1] - t->off[tok];
    if (n == 0) return hx__set_error(HX_E_INVAL, "grammar: token %d has no text", tok);
    return hx_grammar_accept_text(g, (const char *)t->bytes + t->off[tok], n);
}

/* ---- masks ---------------------------------------------------------------------------------- */

static uint64_t hx_g_state_hash(const struct hx_g_set *s)
{
    uint64_t h = 0xcbf29ce484222325ull ^ s->n;
    for (uint32_t i = 0; i < s->n; i++) {
        h = (h ^ s->len[i]) * 0x100000001b3ull;
        for (uint32_t k = 0; k < s->len[i]; k++)
            h = (h ^ s->data[s->off[i] + k]) * 0x100000001b3ull;
    }
    return h;
}

static bool hx_g_cache_match(const struct hx_g_cache *c, const struct hx_g_set *s)
{
    uint32_t pos = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (pos + 1 + s->len[i] > c->n_stacks_data || c->stacks[pos] != s->len[i] ||
            (s->len[i] &&
             memcmp(c->stacks + pos + 1, s->data + s->off[i], s->len[i] * sizeof(uint32_t))))
            return false;
        pos += 1 + s->len[i];
    }
    return pos == c->n_stacks_data;
}

/*
 * Allowed tokens from the current state into g->mask (bit per token), counting them; with
 * limit < HX_G_INF only tokens after which the sentence can be finished within `limit` bytes.
 * *maxd: the largest such distance among the allowed tokens.
 */
static int64_t hx_g_full_mask(struct hx_grammar *g, uint32_t limit, uint32_t *maxd)
{
    const struct hx__tok_table *t = g->tt;
    size_t words = (size_t)(t->n_vocab + 63) / 64;
    memset(g->mask, 0, words * 8);
    int64_t count = 0;
    *maxd = 0;
    uint32_t *ids = g->ids, *dist;
    if ((ids[0] = hx_g_dfa_cur(g)) == UINT32_MAX) return -1;
    for (uint32_t i = 0; i < t->n_nodes;) {
        const struct hx_g_node *nd = &t->nodes[i];
        uint32_t id = hx_g_dfa_step(g, ids[nd->depth - 1], nd->byte);
        if (id == UINT32_MAX) return -1;
        if (id == 0) {
            i += nd->size;
            continue;
        }
        ids[nd->depth] = id;
        dist = g->dfa->dist; /* may move as the DFA grows */
        if (nd->tok1 > nd->tok0 && dist[id] <= limit) {
            for (uint32_t k = nd->tok0; k < nd->tok1; k++) {
                int32_t tok = t->sorted[k];
                g->mask[tok >> 6] |= 1ull << (tok & 63);
            }
            count += nd->tok1 - nd->tok0;
            *maxd = HX_MAX(*maxd, dist[id]);
        }
        i++;
    }
    if (hx_g_has_empty(&g->cur))
        for (int64_t k = 0; k < t->n_vocab; k++)
            if (t->eog[k]) g->mask[k >> 6] |= 1ull << (k & 63), count++;
    return count;
}

static void hx_g_apply_mask(struct hx_grammar *g, const uint64_t *mask, const float *logits)
{
    int64_t n = g->tt->n_vocab;
    for (int64_t i = 0; i < n; i++)
        g->work[i] = (mask[i >> 6] >> (i & 63) & 1) ? logits[i] : -INFINITY;
}

/* Is token tok allowed now (with the budget limit)? */
static bool hx_g_token_ok(struct hx_grammar *g, uint32_t cur_id, int32_t tok, uint32_t limit)
{
    const struct hx__tok_table *t = g->tt;
    if (t->eog[tok]) return hx_g_has_empty(&g->cur);
    uint32_t n = t->off[tok + 1] - t->off[tok], id = cur_id;
    if (n == 0) return false;
    for (uint32_t i = 0; i < n && id != 0; i++) {
        id = hx_g_dfa_step(g, id, t->bytes[t->off[tok] + i]);
        if (id == UINT32_MAX) return false;
    }
    return id != 0 && g->dfa->dist[id] <= limit;
}

static struct hx_g_cache *hx_g_cache_find(struct hx_grammar *g, uint64_t key)
{
    for (int i = 0; i < HX_G_CACHE; i++)
        if (g->cache[i].mask && g->cache[i].key == key && hx_g_cache_match(&g->cache[i], &g->cur))
            return &g->cache[i];
    return NULL;
}

static void hx_g_cache_put(struct hx_grammar *g, uint64_t key, uint32_t maxd)
{
    struct hx_g_cache *c = &g->cache[0];
    for (int i = 0; i < HX_G_CACHE; i++) {
        if (!g->cache[i].mask) {
            c = &g->cache[i];
            break;
        }
        if (g->cache[i].used < c->used) c = &g->cache[i];
    }
    size_t words = (size_t)(g->tt->n_vocab + 63) / 64;
    uint32_t nd = g->cur.n + g->cur.n_data;
    if (!c->mask) c->mask = hx__malloc(words * 8);
    uint32_t *st = hx__realloc(c->stacks, (nd + 1) * sizeof *st);
    if (!c->mask || !st) {
        hx__free(c->mask);
        c->mask = NULL;
        if (st) c->stacks = st;
        return;
    }
    c->stacks = st;
    uint32_t pos = 0;
    for (uint32_t i = 0; i < g->cur.n; i++) {
        st[pos++] = g->cur.len[i];
        if (g->cur.len[i])
            memcpy(st + pos, g->cur.data + g->cur.off[i], g->cur.len[i] * sizeof *st);
        pos += g->cur.len[i];
    }
    c->n_stacks_data = pos;
    memcpy(c->mask, g->mask, words * 8);
    c->key = key;
    c->maxd = maxd;
    c->used = ++g->tick;
}

hx_token hx_sampler_sample_grammar(struct hx_sampler *s, struct hx_grammar *g, const float *logits,
                                   int64_t budget)
{
    if (!s || !g || !logits || g->cur.n == 0) return HX_TOKEN_NULL;
    if (hx_grammar_done(g)) return HX_TOKEN_NULL;
    const struct hx_sampler_params *sp = hx__sampler_params(s);
    int64_t nv = g->tt->n_vocab;
    uint32_t limit = budget > 0 ? (uint32_t)HX_MIN(budget - 1, (int64_t)HX_G_INF - 1) : HX_G_INF;
    /* each byte of the shortest completion is a token: with d bytes to go and `budget` tokens
     * left, a token must leave at most budget - 1 bytes; if even that cannot be, stay valid */
    if (limit < HX_G_INF && hx_g_dist(g, &g->cur) > limit + 1) limit = HX_G_INF;
    uint64_t key = hx_g_state_hash(&g->cur);
    struct hx_g_cache *c = hx_g_cache_find(g, key);
    if (c && c->maxd <= limit) {
        c->used = ++g->tick;
        hx_g_apply_mask(g, c->mask, logits);
        return hx_sampler_sample(s, g->work);
    }
    /* the best candidates one by one: exact for greedy and top-k when enough are valid */
    bool penalties =
        sp->repeat_penalty != 1.0f || sp->presence_penalty != 0 || sp->frequency_penalty != 0;
    bool greedy = sp->temperature <= 0;
    int need = greedy ? 1 : sp->top_k;
    if (!penalties && need > 0 && need <= 256) {
        int m = HX_MIN(greedy ? 64 : 2 * need + 64, 1024), n = 0;
        /* a min-heap of the m largest logits */
        for (int64_t i = 0; i < nv; i++) {
            float v = logits[i];
            if (!(v > -INFINITY)) continue;
            if (n == m && v <= g->cand[0].logit) continue;
            int k;
            if (n < m) {
                k = n++;
                while (k > 0 && g->cand[(k - 1) / 2].logit > v)
                    g->cand[k] = g->cand[(k - 1) / 2], k = (k - 1) / 2;
            } else {
                k = 0;
                for (;;) {
                    int a = 2 * k + 1, b = a + 1, sm = k;
                    float cur = v;
                    if (a < n && g->cand[a].logit < cur) sm = a, cur = g->cand[a].logit;
                    if (b < n && g->cand[b].logit < cur) sm = b;
                    if (sm == k) break;
                    g->cand[k] = g->cand[sm];
                    k = sm;
                }
            }
            g->cand[k].logit = v, g->cand[k].id = (int32_t)i;
        }
        /* sort descending (heap → sorted by repeated extraction is simpler as insertion) */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && (g->cand[j].logit > g->cand[j - 1].logit ||
                                      (g->cand[j].logit == g->cand[j - 1].logit &&
                                       g->cand[j].id < g->cand[j - 1].id));
                 j--) {
                struct hx_g_cand tmp = g->cand[j];
                g->cand[j] = g->cand[j - 1], g->cand[j - 1] = tmp;
            }
        int found = 0;
        uint32_t cur_id = hx_g_dfa_cur(g);
        for (int i = 0; i < n && found < need && cur_id != UINT32_MAX; i++)
            if (hx_g_token_ok(g, cur_id, g->cand[i].id, limit)) g->cand[found++] = g->cand[i];
        if (found == need || (found > 0 && n == nv)) {
            for (int64_t i = 0; i < nv; i++) g->work[i] = -INFINITY;
            for (int i = 0; i < found; i++) g->work[g->cand[i].id] = g->cand[i].logit;
            return hx_sampler_sample(s, g->work);
        }
    }
    uint32_t maxd;
    int64_t count = hx_g_full_mask(g, HX_G_INF, &maxd);
    if (count < 0) return HX_TOKEN_NULL;
    if (count > 0) hx_g_cache_put(g, key, maxd);
    if (count > 0 && maxd > limit) count = hx_g_full_mask(g, limit, &maxd);
    if (count < 0) return HX_TOKEN_NULL;
    if (count == 0 && limit < HX_G_INF) count = hx_g_full_mask(g, HX_G_INF, &maxd);
    if (count <= 0) return HX_TOKEN_NULL;
    hx_g_apply_mask(g, g->mask, logits);
    /* the sampler skips -inf; if every allowed logit is -inf itself, take the first allowed */
    hx_token tok = hx_sampler_sample(s, g->work);
    if (!(g->mask[tok >> 6] >> (tok & 63) & 1))
        for (int64_t i = 0; i < nv; i++)
            if (g->mask[i >> 6] >> (i & 63) & 1) return (hx_token)i;
    return tok;
}
