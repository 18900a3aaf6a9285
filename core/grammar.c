/*
 * grammar.c — constrained decoding (docs/grammar.md): a GBNF subset compiled to byte-level
 * rules, matched as a set of parse stacks, and sampling that only picks the tokens the
 * grammar allows.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx-impl.h"
#include "model.h"
#include "vocab.h"

#define HX_G_INF 0x3fffffffu
#define HX_G_MAX_STACKS 1024 /* stacks kept per state (more: the rest dropped, see below) */
#define HX_G_MAX_ELEMS (1u << 22)
#define HX_G_MAX_REPEAT 10000
#define HX_G_CACHE 32

enum { HX_G_END, HX_G_CHR, HX_G_REF };

struct hx_g_elem {
    uint8_t type;
    uint32_t v; /* CHR: byte-set index; REF: rule index */
};

struct hx_g_rule {
    char *name;
    uint32_t *alts; /* element index where each alternative starts */
    uint32_t n_alts, cap_alts;
    uint32_t minlen;
    bool defined, nullable;
    bool dispatch;     /* every alternative starts with a byte set: kept unexpanded on a stack
                          top (the REF itself) and expanded only by the byte that matches */
    uint64_t first[4]; /* dispatch: the union of those first byte sets */
    int line;
};

/* ---- per-model token table: bytes and a pre-order trie ----------------------------------- */

struct hx_g_node {
    uint32_t size;       /* nodes in the subtree, this one included */
    uint32_t tok0, tok1; /* sorted[tok0..tok1): tokens whose bytes end here */
    uint16_t depth;      /* 1 for children of the root */
    uint8_t byte;
};

struct hx__tok_table {
    int64_t n_vocab;
    uint32_t *off; /* token t: bytes[off[t] .. off[t+1]) */
    uint8_t *bytes;
    uint8_t *eog;    /* end-of-generation flag per token */
    int32_t *sorted; /* tokens with bytes, in byte order */
    struct hx_g_node *nodes;
    uint32_t n_nodes;
    uint16_t max_depth;
};

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

static int hx_g_table(const struct hx_model *m, const struct hx__tok_table **out)
{
    pthread_mutex_lock(&hx_g_table_mu);
    struct hx_model *mm = (struct hx_model *)m; /* a lazily built cache; see model.h */
    int rc = HX_OK;
    if (!mm->tok_table) rc = hx_g_table_build(m->vocab, &mm->tok_table);
    *out = mm->tok_table;
    pthread_mutex_unlock(&hx_g_table_mu);
    return rc;
}

/* ---- stack sets --------------------------------------------------------------------------- */

struct hx_g_set {
    uint32_t *data;      /* stacks' entries, back to back */
    uint32_t *off, *len; /* stack i: data[off[i] .. off[i]+len[i]) */
    uint32_t n, n_data, cap, cap_data;
    bool oom;
};

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

/* ---- the grammar ---------------------------------------------------------------------------- */

struct hx_g_cache {
    uint64_t key;
    uint32_t *stacks; /* the state's stacks serialized (len, entries...), to confirm a hit */
    uint32_t n_stacks_data;
    uint64_t *mask; /* bit per token */
    uint32_t maxd;  /* largest distance left after an allowed token */
    uint64_t used;
};

struct hx_g_cand {
    float logit;
    int32_t id;
};

struct hx_grammar {
    const struct hx_model *model;
    const struct hx__tok_table *tt;
    struct hx_g_elem *el;
    uint32_t n_el, cap_el;
    uint64_t (*sets)[4];
    uint32_t n_sets, cap_sets;
    uint32_t *sufmin; /* per element: fewest bytes to the end of its alternative */
    struct hx_g_rule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *name_ht; /* named rules by name: index + 1, 0 = free */
    uint32_t name_cap, n_named;
    uint32_t root;
    struct hx_g_set start, cur;
    struct hx_g_set *lv; /* scratch per trie depth */
    uint32_t n_lv;
    uint32_t *stk; /* scratch stack for expansion */
    uint32_t stk_cap;
    float *work;
    struct hx_g_cache cache[HX_G_CACHE];
    uint64_t tick;
    uint64_t *mask; /* scratch mask */
    struct hx_g_cand *cand;
    struct hx_g_dfa *dfa;
    uint32_t *ids; /* per trie depth: the DFA state there */
};

/* ---- building ------------------------------------------------------------------------------- */

static bool hx_g_push_el(struct hx_grammar *g, uint8_t type, uint32_t v)
{
    if (g->n_el >= HX_G_MAX_ELEMS) return false;
    if (g->n_el == g->cap_el) {
        uint32_t nc = g->cap_el ? g->cap_el * 2 : 1024;
        struct hx_g_elem *ne = hx__realloc(g->el, nc * sizeof *ne);
        if (!ne) return false;
        g->el = ne, g->cap_el = nc;
    }
    g->el[g->n_el++] = (struct hx_g_elem){type, v};
    return true;
}

static int64_t hx_g_new_set(struct hx_grammar *g, const uint64_t bits[4])
{
    if (g->n_sets == g->cap_sets) {
        uint32_t nc = g->cap_sets ? g->cap_sets * 2 : 64;
        uint64_t(*ns)[4] = hx__realloc(g->sets, nc * sizeof *ns);
        if (!ns) return -1;
        g->sets = ns, g->cap_sets = nc;
    }
    memcpy(g->sets[g->n_sets], bits, 4 * sizeof(uint64_t));
    return g->n_sets++;
}

static int64_t hx_g_rule_add(struct hx_grammar *g, const char *name, size_t n, int line)
{
    if (g->n_rules == g->cap_rules) {
        uint32_t nc = g->cap_rules ? g->cap_rules * 2 : 64;
        struct hx_g_rule *nr = hx__realloc(g->rules, nc * sizeof *nr);
        if (!nr) return -1;
        g->rules = nr, g->cap_rules = nc;
    }
    struct hx_g_rule *r = &g->rules[g->n_rules];
    memset(r, 0, sizeof *r);
    r->name = hx__malloc(n + 1);
    if (!r->name) return -1;
    memcpy(r->name, name, n);
    r->name[n] = '\0';
    r->line = line;
    return g->n_rules++;
}

static uint64_t hx_g_name_hash(const char *name, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
    return h;
}

/* The rule named name[0..n), added if new: an open-addressing table over the named rules. */
static int64_t hx_g_rule_find(struct hx_grammar *g, const char *name, size_t n, int line)
{
    if ((g->n_named + 1) * 2 > g->name_cap) {
        uint32_t nc = g->name_cap ? g->name_cap * 2 : 256;
        uint32_t *nt = hx__calloc(nc, sizeof *nt);
        if (!nt) return -1;
        for (uint32_t i = 0; i < g->name_cap; i++) {
            if (!g->name_ht[i]) continue;
            const char *o = g->rules[g->name_ht[i] - 1].name;
            uint32_t j = (uint32_t)hx_g_name_hash(o, strlen(o)) & (nc - 1);
            while (nt[j]) j = (j + 1) & (nc - 1);
            nt[j] = g->name_ht[i];
        }
        hx__free(g->name_ht);
        g->name_ht = nt, g->name_cap = nc;
    }
    uint32_t mask = g->name_cap - 1, j = (uint32_t)hx_g_name_hash(name, n) & mask;
    for (; g->name_ht[j]; j = (j + 1) & mask) {
        const char *o = g->rules[g->name_ht[j] - 1].name;
        if (!strncmp(o, name, n) && o[n] == '\0') return g->name_ht[j] - 1;
    }
    int64_t r = hx_g_rule_add(g, name, n, line);
    if (r < 0) return -1;
    g->name_ht[j] = (uint32_t)r + 1;
    g->n_named++;
    return r;
}

/* An anonymous rule named after its parent ("value_3"). */
static int64_t hx_g_rule_anon(struct hx_grammar *g, uint32_t parent, int line)
{
    char nm[160];
    int k = snprintf(nm, sizeof nm, "%.120s_%u", g->rules[parent].name, g->n_rules);
    int64_t r = hx_g_rule_add(g, nm, (size_t)k, line);
    if (r >= 0) g->rules[r].defined = true;
    return r;
}

static bool hx_g_alt_begin(struct hx_grammar *g, uint32_t rule)
{
    struct hx_g_rule *r = &g->rules[rule];
    if (r->n_alts == r->cap_alts) {
        uint32_t nc = r->cap_alts ? r->cap_alts * 2 : 2;
        uint32_t *na = hx__realloc(r->alts, nc * sizeof *na);
        if (!na) return false;
        r->alts = na, r->cap_alts = nc;
    }
    r->alts[r->n_alts++] = g->n_el;
    return true;
}

/* ---- the parser ----------------------------------------------------------------------------- */

struct hx_g_parse {
    struct hx_grammar *g;
    const char *s, *end;
    int line;
    const char *err;
    char errbuf[320];
};

/* A parsed atom: up to a few elements (a literal's bytes become several). */
struct hx_g_seq {
    struct hx_g_elem *e;
    uint32_t n, cap;
};

static bool hx_g_seq_push(struct hx_g_seq *q, uint8_t type, uint32_t v)
{
    if (q->n == q->cap) {
        uint32_t nc = q->cap ? q->cap * 2 : 16;
        struct hx_g_elem *ne = hx__realloc(q->e, nc * sizeof *ne);
        if (!ne) return false;
        q->e = ne, q->cap = nc;
    }
    q->e[q->n++] = (struct hx_g_elem){type, v};
    return true;
}

static void hx_g_skip(struct hx_g_parse *p, bool newlines)
{
    while (p->s < p->end) {
        char c = *p->s;
        if (c == '#') {
            while (p->s < p->end && *p->s != '\n') p->s++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p->s++;
        } else if (c == '\n' && newlines) {
            p->line++;
            p->s++;
        } else {
            break;
        }
    }
}

static bool hx_g_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static int hx_g_fail(struct hx_g_parse *p, const char *msg)
{
    if (!p->err) {
        if (msg != p->errbuf) snprintf(p->errbuf, sizeof p->errbuf, "%s", msg);
        p->err = p->errbuf;
    }
    return -1;
}

static int hx_g_hex(struct hx_g_parse *p, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (p->s >= p->end) return hx_g_fail(p, "truncated escape");
        char c = *p->s++;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return hx_g_fail(p, "bad hex digit in an escape");
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* One character of a literal or class: a code point (escapes decoded, UTF-8 decoded). */
static int hx_g_char(struct hx_g_parse *p, uint32_t *cp)
{
    if (p->s >= p->end) return hx_g_fail(p, "unterminated literal or class");
    unsigned char c = (unsigned char)*p->s++;
    if (c == '\\') {
        if (p->s >= p->end) return hx_g_fail(p, "truncated escape");
        char e = *p->s++;
        switch (e) {
        case 'n': *cp = '\n'; return 0;
        case 'r': *cp = '\r'; return 0;
        case 't': *cp = '\t'; return 0;
        case 'x': return hx_g_hex(p, 2, cp);
        case 'u': return hx_g_hex(p, 4, cp);
        case 'U': return hx_g_hex(p, 8, cp);
        case '\\':
        case '"':
        case '\'':
        case ']':
        case '[':
        case '-':
        case '/':
        case '^': *cp = (uint32_t)e; return 0;
        default: return hx_g_fail(p, "unknown escape");
        }
    }
    if (c == '\n') return hx_g_fail(p, "newline inside a literal or class");
    if (c < 0x80) {
        *cp = c;
        return 0;
    }
    int k = (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (k < 0 || p->s + k > p->end) return hx_g_fail(p, "invalid UTF-8 in the grammar");
    uint32_t v = c & (0x3f >> k);
    for (int i = 0; i < k; i++) {
        unsigned char d = (unsigned char)*p->s++;
        if ((d >> 6) != 2) return hx_g_fail(p, "invalid UTF-8 in the grammar");
        v = v << 6 | (d & 0x3f);
    }
    *cp = v;
    return 0;
}

static int hx_g_utf8(uint32_t cp, uint8_t *b)
{
    if (cp < 0x80) return b[0] = (uint8_t)cp, 1;
    if (cp < 0x800) return b[0] = (uint8_t)(0xC0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000) {
        b[0] = (uint8_t)(0xE0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
        b[2] = (uint8_t)(0x80 | (cp & 63));
        return 3;
    }
    b[0] = (uint8_t)(0xF0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
    b[2] = (uint8_t)(0x80 | (cp >> 6 & 63)), b[3] = (uint8_t)(0x80 | (cp & 63));
    return 4;
}

static int64_t hx_g_byte_set(struct hx_grammar *g, uint32_t lo, uint32_t hi)
{
    uint64_t bits[4] = {0};
    for (uint32_t b = lo; b <= hi; b++) bits[b >> 6] |= 1ull << (b & 63);
    return hx_g_new_set(g, bits);
}

/* Alternatives for the code points [lo, hi] (same UTF-8 length n) as byte-range sequences:
 * split until each byte position is a plain range. */
static int hx_g_utf8_range(struct hx_grammar *g, uint32_t rule, uint32_t lo, uint32_t hi, int n)
{
    uint8_t a[4], b[4];
    hx_g_utf8(lo, a);
    hx_g_utf8(hi, b);
    for (int i = 0; i < n - 1; i++) {
        uint32_t m = (1u << (6 * (n - 1 - i))) - 1; /* the bits below position i */
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                if (hx_g_utf8_range(g, rule, lo, lo | m, n) ||
                    hx_g_utf8_range(g, rule, (lo | m) + 1, hi, n))
                    return -1;
                return 0;
            }
            if ((hi & m) != m) {
                if (hx_g_utf8_range(g, rule, lo, (hi & ~m) - 1, n) ||
                    hx_g_utf8_range(g, rule, hi & ~m, hi, n))
                    return -1;
                return 0;
            }
        }
    }
    if (!hx_g_alt_begin(g, rule)) return -1;
    for (int i = 0; i < n; i++) {
        int64_t s = hx_g_byte_set(g, a[i], b[i]);
        if (s < 0 || !hx_g_push_el(g, HX_G_CHR, (uint32_t)s)) return -1;
    }
    return hx_g_push_el(g, HX_G_END, 0) ? 0 : -1;
}

struct hx_g_ranges {
    uint32_t lo[256], hi[256];
    int n;
};

/* A class (code-point ranges, possibly negated) as one CHR (all ASCII) or a REF to a rule. */
static int hx_g_class(struct hx_g_parse *p, uint32_t parent, struct hx_g_ranges *r, bool neg,
                      struct hx_g_seq *q)
{
    struct hx_grammar *g = p->g;
    /* normalise: sort, merge, complement when negated, drop surrogates */
    for (int i = 1; i < r->n; i++)
        for (int j = i; j > 0 && r->lo[j] < r->lo[j - 1]; j--) {
            uint32_t t = r->lo[j];
            r->lo[j] = r->lo[j - 1];
            r->lo[j - 1] = t;
            t = r->hi[j];
            r->hi[j] = r->hi[j - 1];
            r->hi[j - 1] = t;
        }
    struct hx_g_ranges m = {.n = 0};
    for (int i = 0; i < r->n; i++) {
        if (m.n && r->lo[i] <= m.hi[m.n - 1] + 1) {
            m.hi[m.n - 1] = HX_MAX(m.hi[m.n - 1], r->hi[i]);
        } else {
            m.lo[m.n] = r->lo[i], m.hi[m.n++] = r->hi[i];
        }
    }
    if (neg) {
        struct hx_g_ranges c = {.n = 0};
        uint32_t next = 0;
        for (int i = 0; i < m.n; i++) {
            if (m.lo[i] > next) c.lo[c.n] = next, c.hi[c.n++] = m.lo[i] - 1;
            next = m.hi[i] + 1;
        }
        if (next <= 0x10FFFF) c.lo[c.n] = next, c.hi[c.n++] = 0x10FFFF;
        m = c;
    }
    uint64_t ascii[4] = {0};
    bool any_ascii = false, multi = false;
    for (int i = 0; i < m.n; i++) {
        for (uint32_t c = m.lo[i]; c <= HX_MIN(m.hi[i], 0x7Fu); c++)
            ascii[c >> 6] |= 1ull << (c & 63), any_ascii = true;
        if (m.hi[i] >= 0x80) multi = true;
    }
    if (!any_ascii && !multi) return hx_g_fail(p, "a character class that matches nothing");
    if (!multi) {
        int64_t s = hx_g_new_set(g, ascii);
        return s >= 0 && hx_g_seq_push(q, HX_G_CHR, (uint32_t)s) ? 0
                                                                 : hx_g_fail(p, "out of memory");
    }
    int64_t rule = hx_g_rule_anon(g, parent, p->line);
    if (rule < 0) return hx_g_fail(p, "out of memory");
    if (any_ascii) {
        int64_t s = hx_g_new_set(g, ascii);
        if (s < 0 || !hx_g_alt_begin(g, (uint32_t)rule) ||
            !hx_g_push_el(g, HX_G_CHR, (uint32_t)s) || !hx_g_push_el(g, HX_G_END, 0))
            return hx_g_fail(p, "out of memory");
    }
    static const uint32_t bounds[][2] = {{0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}};
    for (int i = 0; i < m.n; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t lo = HX_MAX(m.lo[i], bounds[k][0]), hi = HX_MIN(m.hi[i], bounds[k][1]);
            if (lo > hi) continue;
            /* no surrogates */
            uint32_t parts[2][2] = {{lo, hi}, {1, 0}};
            if (k == 1 && lo <= 0xDFFF && hi >= 0xD800) {
                parts[0][0] = lo, parts[0][1] = 0xD7FF;
                parts[1][0] = 0xE000, parts[1][1] = hi;
            }
            for (int j = 0; j < 2; j++)
                if (parts[j][0] <= parts[j][1] &&
                    hx_g_utf8_range(g, (uint32_t)rule, parts[j][0], parts[j][1], k + 2))
                    return hx_g_fail(p, "out of memory");
        }
    return hx_g_seq_push(q, HX_G_REF, (uint32_t)rule) ? 0 : hx_g_fail(p, "out of memory");
}

static int hx_g_alts(struct hx_g_parse *p, uint32_t rule, bool nested);

/* Wrap a sequence into a new rule with one alternative; returns the rule. */
static int64_t hx_g_wrap(struct hx_g_parse *p, uint32_t parent, const struct hx_g_elem *e,
                         uint32_t n)
{
    struct hx_grammar *g = p->g;
    int64_t r = hx_g_rule_anon(g, parent, p->line);
    if (r < 0 || !hx_g_alt_begin(g, (uint32_t)r)) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (!hx_g_push_el(g, e[i].type, e[i].v)) return -1;
    return hx_g_push_el(g, HX_G_END, 0) ? r : -1;
}

/* R ::= x R | ε (right recursive: stacks stay flat) */
static int64_t hx_g_star(struct hx_grammar *g, uint32_t parent, struct hx_g_elem x, int line)
{
    int64_t r = hx_g_rule_anon(g, parent, line);
    if (r < 0) return -1;
    if (!hx_g_alt_begin(g, (uint32_t)r) || !hx_g_push_el(g, x.type, x.v) ||
        !hx_g_push_el(g, HX_G_REF, (uint32_t)r) || !hx_g_push_el(g, HX_G_END, 0) ||
        !hx_g_alt_begin(g, (uint32_t)r) || !hx_g_push_el(g, HX_G_END, 0))
        return -1;
    return r;
}

/* Apply a postfix operator to the last atom (elements q->e[from..]). */
static int hx_g_postfix(struct hx_g_parse *p, uint32_t parent, struct hx_g_seq *q, uint32_t from)
{
    struct hx_grammar *g = p->g;
    if (p->s >= p->end) return 0;
    char c = *p->s;
    long lo, hi; /* hi < 0: unbounded */
    if (c == '*')
        lo = 0, hi = -1;
    else if (c == '+')
        lo = 1, hi = -1;
    else if (c == '?')
        lo = 0, hi = 1;
    else if (c == '{') {
        const char *s = p->s + 1;
        char *e;
        lo = strtol(s, &e, 10);
        if (e == s || lo < 0) return hx_g_fail(p, "bad repetition: {n}, {n,} or {n,m}");
        hi = lo;
        if (*e == ',') {
            s = e + 1;
            while (*s == ' ') s++;
            if (*s == '}') {
                hi = -1, e = (char *)s;
            } else {
                hi = strtol(s, &e, 10);
                if (e == s || hi < lo) return hx_g_fail(p, "bad repetition: {n,m} needs n <= m");
            }
        }
        while (*e == ' ') e++;
        if (*e != '}') return hx_g_fail(p, "bad repetition: {n}, {n,} or {n,m}");
        if (lo > HX_G_MAX_REPEAT || hi > HX_G_MAX_REPEAT)
            return hx_g_fail(p, "a repetition bound over 10000");
        p->s = e; /* the '}' is skipped below */
    } else {
        return 0;
    }
    p->s++;
    /* the atom as one element */
    struct hx_g_elem x;
    if (q->n - from == 1) {
        x = q->e[from];
    } else {
        int64_t r = hx_g_wrap(p, parent, q->e + from, q->n - from);
        if (r < 0) return hx_g_fail(p, "out of memory");
        x = (struct hx_g_elem){HX_G_REF, (uint32_t)r};
    }
    q->n = from;
    for (long i = 0; i < lo; i++)
        if (!hx_g_seq_push(q, x.type, x.v)) return hx_g_fail(p, "out of memory");
    if (hi < 0) {
        int64_t r = hx_g_star(g, parent, x, p->line);
        if (r < 0 || !hx_g_seq_push(q, HX_G_REF, (uint32_t)r)) return hx_g_fail(p, "out of memory");
        return 0;
    }
    /* up to hi - lo more: O1 ::= x O2 | ε ... built from the innermost out */
    int64_t inner = -1;
    for (long i = 0; i < hi - lo; i++) {
        int64_t r = hx_g_rule_anon(g, parent, p->line);
        if (r < 0 || !hx_g_alt_begin(g, (uint32_t)r) || !hx_g_push_el(g, x.type, x.v) ||
            (inner >= 0 && !hx_g_push_el(g, HX_G_REF, (uint32_t)inner)) ||
            !hx_g_push_el(g, HX_G_END, 0) || !hx_g_alt_begin(g, (uint32_t)r) ||
            !hx_g_push_el(g, HX_G_END, 0))
            return hx_g_fail(p, "out of memory");
        inner = r;
    }
    if (inner >= 0 && !hx_g_seq_push(q, HX_G_REF, (uint32_t)inner))
        return hx_g_fail(p, "out of memory");
    return 0;
}

/* Is the text at p the start of a rule definition ("name ::=")? */
static bool hx_g_at_def(const struct hx_g_parse *p)
{
    const char *s = p->s;
    while (s < p->end && hx_g_name_char(*s)) s++;
    if (s == p->s) return false;
    while (s < p->end && (*s == ' ' || *s == '\t')) s++;
    return p->end - s >= 3 && !memcmp(s, "::=", 3);
}

/* One alternative: a sequence of atoms, into q. */
static int hx_g_sequence(struct hx_g_parse *p, uint32_t rule, struct hx_g_seq *q, bool nested)
{
    struct hx_grammar *g = p->g;
    for (;;) {
        hx_g_skip(p, true);
        if (p->s >= p->end) return 0;
        char c = *p->s;
        if (c == '|' || (c == ')' && nested)) return 0;
        if (!nested && hx_g_at_def(p)) return 0;
        uint32_t from = q->n;
        if (c == '"') {
            p->s++;
            while (p->s < p->end && *p->s != '"') {
                uint32_t cp;
                if (hx_g_char(p, &cp)) return -1;
                uint8_t b[4];
                int n = hx_g_utf8(cp, b);
                for (int i = 0; i < n; i++) {
                    int64_t s = hx_g_byte_set(g, b[i], b[i]);
                    if (s < 0 || !hx_g_seq_push(q, HX_G_CHR, (uint32_t)s))
                        return hx_g_fail(p, "out of memory");
                }
            }
            if (p->s >= p->end) return hx_g_fail(p, "unterminated literal");
            p->s++;
            if (q->n == from) { /* "" matches nothing; a postfix on it is refused below */
                if (p->s < p->end && strchr("*+?{", *p->s))
                    return hx_g_fail(p, "a repetition of something that can match nothing");
                continue;
            }
        } else if (c == '[') {
            p->s++;
            bool neg = p->s < p->end && *p->s == '^';
            if (neg) p->s++;
            struct hx_g_ranges r = {.n = 0};
            while (p->s < p->end && *p->s != ']') {
                uint32_t lo, hi;
                if (hx_g_char(p, &lo)) return -1;
                hi = lo;
                if (p->s + 1 < p->end && *p->s == '-' && p->s[1] != ']') {
                    p->s++;
                    if (hx_g_char(p, &hi)) return -1;
                    if (hi < lo) return hx_g_fail(p, "a class range out of order");
                }
                if (r.n == 256) return hx_g_fail(p, "a class with more than 256 ranges");
                r.lo[r.n] = lo, r.hi[r.n++] = hi;
            }
            if (p->s >= p->end) return hx_g_fail(p, "unterminated class");
            p->s++;
            if (r.n == 0 && !neg) return hx_g_fail(p, "an empty class");
            if (hx_g_class(p, rule, &r, neg, q)) return -1;
        } else if (c == '.') {
            p->s++;
            struct hx_g_ranges r = {.n = 1, .lo = {0}, .hi = {0x10FFFF}};
            if (hx_g_class(p, rule, &r, false, q)) return -1;
        } else if (c == '(') {
            p->s++;
            int64_t r = hx_g_rule_anon(g, rule, p->line);
            if (r < 0) return hx_g_fail(p, "out of memory");
            if (hx_g_alts(p, (uint32_t)r, true)) return -1;
            hx_g_skip(p, true);
            if (p->s >= p->end || *p->s != ')') return hx_g_fail(p, "missing ')'");
            p->s++;
            if (!hx_g_seq_push(q, HX_G_REF, (uint32_t)r)) return hx_g_fail(p, "out of memory");
        } else if (hx_g_name_char(c)) {
            const char *s = p->s;
            while (p->s < p->end && hx_g_name_char(*p->s)) p->s++;
            int64_t r = hx_g_rule_find(g, s, (size_t)(p->s - s), p->line);
            if (r < 0 || !hx_g_seq_push(q, HX_G_REF, (uint32_t)r))
                return hx_g_fail(p, "out of memory");
        } else {
            snprintf(p->errbuf, sizeof p->errbuf, "unexpected '%c'", c);
            return hx_g_fail(p, p->errbuf);
        }
        if (hx_g_postfix(p, rule, q, from)) return -1;
    }
}

static int hx_g_alts(struct hx_g_parse *p, uint32_t rule, bool nested)
{
    struct hx_grammar *g = p->g;
    for (;;) {
        struct hx_g_seq q = {0};
        int rc = hx_g_sequence(p, rule, &q, nested);
        bool ok = rc == 0 && hx_g_alt_begin(g, rule);
        for (uint32_t i = 0; ok && i < q.n; i++) ok = hx_g_push_el(g, q.e[i].type, q.e[i].v);
        ok = ok && hx_g_push_el(g, HX_G_END, 0);
        hx__free(q.e);
        if (rc) return -1;
        if (!ok)
            return hx_g_fail(p, g->n_el >= HX_G_MAX_ELEMS ? "the grammar is too large"
                                                          : "out of memory");
        hx_g_skip(p, true);
        if (p->s < p->end && *p->s == '|') {
            p->s++;
            continue;
        }
        return 0;
    }
}

/* ---- analysis: nullable, left recursion, shortest completions ------------------------------ */

/*
 * Each rule's shortest sentence, in bytes: Knuth's generalisation of Dijkstra's algorithm (an
 * alternative's length is the sum of its parts, never less than any of them), so the time is
 * linear in the grammar (times a log), whatever the order of the rules. Rules that no finite
 * derivation finishes stay HX_G_INF.
 */
static int hx_g_analyse_minlen(struct hx_grammar *g)
{
    uint32_t n_alts = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) n_alts += g->rules[r].n_alts;
    uint32_t *alt_rule = hx__malloc((n_alts + 1) * sizeof *alt_rule);
    uint32_t *unresolved = hx__calloc(n_alts + 1, sizeof *unresolved),
             *sum = hx__calloc(n_alts + 1, sizeof *sum);
    uint32_t *occ_n = hx__calloc(g->n_rules + 1, sizeof *occ_n);
    uint32_t *occ = NULL, *heap_r = NULL, *heap_v = NULL;
    uint8_t *done = hx__calloc(g->n_rules + 1, 1);
    int rc = HX_E_NOMEM;
    if (!alt_rule || !unresolved || !sum || !occ_n || !done) goto out;
    uint32_t n_refs = 0;
    for (uint32_t r = 0, a = 0; r < g->n_rules; r++)
        for (uint32_t k = 0; k < g->rules[r].n_alts; k++, a++) {
            alt_rule[a] = r;
            for (uint32_t i = g->rules[r].alts[k]; g->el[i].type != HX_G_END; i++)
                if (g->el[i].type == HX_G_CHR)
                    sum[a]++;
                else
                    unresolved[a]++, occ_n[g->el[i].v]++, n_refs++;
        }
    /* occurrences of each rule: the alternatives that reference it (CSR, once per reference) */
    uint32_t *occ_at = hx__malloc((g->n_rules + 1) * sizeof *occ_at);
    occ = hx__malloc((n_refs + 1) * sizeof *occ);
    heap_r = hx__malloc((n_alts + n_refs + 1) * sizeof *heap_r);
    heap_v = hx__malloc((n_alts + n_refs + 1) * sizeof *heap_v);
    if (!occ_at || !occ || !heap_r || !heap_v) {
        hx__free(occ_at);
        goto out;
    }
    for (uint32_t r = 0, at = 0; r < g->n_rules; r++) occ_at[r] = at, at += occ_n[r];
    for (uint32_t r = 0, a = 0; r < g->n_rules; r++)
        for (uint32_t k = 0; k < g->rules[r].n_alts; k++, a++)
            for (uint32_t i = g->rules[r].alts[k]; g->el[i].type != HX_G_END; i++)
                if (g->el[i].type == HX_G_REF) occ[occ_at[g->el[i].v]++] = a;
    for (uint32_t r = g->n_rules; r-- > 0;) occ_at[r] = r ? occ_at[r - 1] : 0; /* back to starts */
    for (uint32_t r = 0; r < g->n_rules; r++) g->rules[r].minlen = HX_G_INF;
    uint32_t hn = 0;
#define HX_G_PUSH(val, rule)                                                                       \
    do {                                                                                           \
        uint32_t j_ = hn++;                                                                        \
        while (j_ > 0 && heap_v[(j_ - 1) / 2] > (val)) {                                           \
            heap_v[j_] = heap_v[(j_ - 1) / 2], heap_r[j_] = heap_r[(j_ - 1) / 2];                  \
            j_ = (j_ - 1) / 2;                                                                     \
        }                                                                                          \
        heap_v[j_] = (val), heap_r[j_] = (rule);                                                   \
    } while (0)
    for (uint32_t a = 0; a < n_alts; a++)
        if (unresolved[a] == 0 && sum[a] < g->rules[alt_rule[a]].minlen) {
            g->rules[alt_rule[a]].minlen = sum[a];
            HX_G_PUSH(sum[a], alt_rule[a]);
        }
    while (hn > 0) {
        uint32_t v = heap_v[0], r = heap_r[0];
        uint32_t lv = heap_v[--hn], lr = heap_r[hn], j = 0; /* pop: sift the last one down */
        for (;;) {
            uint32_t c = 2 * j + 1;
            if (c >= hn) break;
            if (c + 1 < hn && heap_v[c + 1] < heap_v[c]) c++;
            if (heap_v[c] >= lv) break;
            heap_v[j] = heap_v[c], heap_r[j] = heap_r[c], j = c;
        }
        if (hn > 0) heap_v[j] = lv, heap_r[j] = lr;
        if (done[r] || v > g->rules[r].minlen) continue;
        done[r] = 1;
        for (uint32_t k = 0; k < occ_n[r]; k++) {
            uint32_t a = occ[occ_at[r] + k], ar = alt_rule[a];
            sum[a] = HX_MIN(sum[a] + v, HX_G_INF);
            if (--unresolved[a] == 0 && !done[ar] && sum[a] < g->rules[ar].minlen) {
                g->rules[ar].minlen = sum[a];
                HX_G_PUSH(sum[a], ar);
            }
        }
    }
#undef HX_G_PUSH
    hx__free(occ_at);
    rc = HX_OK;
out:
    hx__free(alt_rule);
    hx__free(unresolved);
    hx__free(sum);
    hx__free(occ_n);
    hx__free(occ);
    hx__free(heap_r);
    hx__free(heap_v);
    hx__free(done);
    if (rc != HX_OK) return rc;
    for (uint32_t r = 0; r < g->n_rules; r++) g->rules[r].nullable = g->rules[r].minlen == 0;
    /* suffix minima: walk each alternative backwards */
    for (uint32_t r = 0; r < g->n_rules; r++) {
        struct hx_g_rule *R = &g->rules[r];
        for (uint32_t a = 0; a < R->n_alts; a++) {
            uint32_t e = R->alts[a];
            while (g->el[e].type != HX_G_END) e++;
            g->sufmin[e] = 0;
            for (uint32_t i = e; i-- > R->alts[a];) {
                uint32_t m = g->el[i].type == HX_G_CHR ? 1 : g->rules[g->el[i].v].minlen;
                g->sufmin[i] = HX_MIN(g->sufmin[i + 1] + m, HX_G_INF);
            }
        }
    }
    return HX_OK;
}

#define HX_G_MAX_LEFT 1000 /* rules nested at the start of a rule, before any byte */

/*
 * Depth-first search for a rule reaching itself at a position where all before is nullable
 * (returns that rule), and for the longest such chain of rules (lp[r]; -2 when it passes
 * HX_G_MAX_LEFT: matching expands such chains recursively, so they are bounded).
 */
static int hx_g_left_rec(struct hx_grammar *g, uint32_t r, uint8_t *mark, uint32_t *lp,
                         uint32_t depth)
{
    if (mark[r] == 1) return (int)r;
    if (mark[r] == 2) return -1;
    if (depth > HX_G_MAX_LEFT) return -2;
    mark[r] = 1;
    uint32_t best = 0;
    struct hx_g_rule *R = &g->rules[r];
    for (uint32_t a = 0; a < R->n_alts; a++)
        for (uint32_t i = R->alts[a]; g->el[i].type == HX_G_REF; i++) {
            int k = hx_g_left_rec(g, g->el[i].v, mark, lp, depth + 1);
            if (k != -1) return k;
            best = HX_MAX(best, lp[g->el[i].v]);
            if (!g->rules[g->el[i].v].nullable) break;
        }
    lp[r] = best + 1;
    if (lp[r] > HX_G_MAX_LEFT) return -2;
    mark[r] = 2;
    return -1;
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
    if (!g) return HX_E_NOMEM;
    g->model = model;
    /* a NUL-terminated copy, so number parsing cannot run past the end */
    char *copy = hx__malloc(len + 1);
    if (!copy) {
        hx__free(g);
        return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    struct hx_g_parse p = {.g = g, .s = copy, .end = copy + len, .line = 1};
    int rc = HX_E_INVAL;
    if (memchr(text, '\0', len)) {
        hx_g_fail(&p, "a NUL byte in the grammar");
        goto fail;
    }
    for (;;) {
        hx_g_skip(&p, true);
        if (p.s >= p.end) break;
        const char *s = p.s;
        while (p.s < p.end && hx_g_name_char(*p.s)) p.s++;
        if (p.s == s || !hx_g_at_def(&(struct hx_g_parse){.s = s, .end = p.end})) {
            hx_g_fail(&p, "expected a rule: name ::= ...");
            goto fail;
        }
        int64_t r = hx_g_rule_find(g, s, (size_t)(p.s - s), p.line);
        if (r < 0) {
            rc = HX_E_NOMEM;
            goto fail;
        }
        if (g->rules[r].defined) {
            snprintf(p.errbuf, sizeof p.errbuf, "rule '%.100s' is defined twice", g->rules[r].name);
            hx_g_fail(&p, p.errbuf);
            goto fail;
        }
        g->rules[r].defined = true;
        g->rules[r].line = p.line;
        hx_g_skip(&p, false);
        p.s += 3; /* ::= */
        if (hx_g_alts(&p, (uint32_t)r, false)) goto fail;
        if (p.s < p.end && *p.s == ')') {
            hx_g_fail(&p, "unmatched ')'");
            goto fail;
        }
    }
    int64_t root = -1;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (!g->rules[r].defined) {
            p.line = g->rules[r].line;
            snprintf(p.errbuf, sizeof p.errbuf, "rule '%.100s' is used but not defined",
                     g->rules[r].name);
            hx_g_fail(&p, p.errbuf);
            goto fail;
        }
        if (!strcmp(g->rules[r].name, "root")) root = r;
    }
    if (root < 0) {
        p.line = 0;
        hx_g_fail(&p, "no rule named 'root'");
        goto fail;
    }
    g->root = (uint32_t)root;
    g->sufmin = hx__malloc((size_t)(g->n_el + 1) * sizeof *g->sufmin);
    uint8_t *mark = hx__calloc(g->n_rules, 1);
    if (!g->sufmin || !mark) {
        hx__free(mark);
        rc = HX_E_NOMEM;
        goto fail;
    }
    uint32_t *lp = hx__malloc((g->n_rules + 1) * sizeof *lp);
    if (!lp || hx_g_analyse_minlen(g) != HX_OK) {
        hx__free(lp);
        hx__free(mark);
        rc = HX_E_NOMEM;
        goto fail;
    }
    for (uint32_t r = 0; r < g->n_rules; r++) {
        int k = hx_g_left_rec(g, r, mark, lp, 0);
        if (k == -2) {
            p.line = 0;
            hx_g_fail(&p, "rules nest more than 1000 deep before matching a byte");
            hx__free(lp);
            hx__free(mark);
            goto fail;
        }
        if (k >= 0) {
            p.line = g->rules[k].line;
            snprintf(p.errbuf, sizeof p.errbuf,
                     "rule '%.100s' can reach itself without matching a byte (left recursion, or a "
                     "repetition of something that can match nothing)",
                     g->rules[k].name);
            hx_g_fail(&p, p.errbuf);
            hx__free(lp);
            hx__free(mark);
            goto fail;
        }
    }
    hx__free(lp);
    hx__free(mark);
    for (uint32_t r = 0; r < g->n_rules; r++) {
        struct hx_g_rule *R = &g->rules[r];
        R->dispatch = R->n_alts > 0;
        for (uint32_t a = 0; a < R->n_alts && R->dispatch; a++) {
            const struct hx_g_elem *e = &g->el[R->alts[a]];
            R->dispatch = e->type == HX_G_CHR;
            for (int w = 0; R->dispatch && w < 4; w++) R->first[w] |= g->sets[e->v][w];
        }
    }
    for (uint32_t r = 0; r < g->n_rules; r++) /* a parse that enters it could never end */
        if (g->rules[r].minlen >= HX_G_INF) {
            p.line = g->rules[r].line;
            snprintf(p.errbuf, sizeof p.errbuf, "rule '%.100s' can never finish", g->rules[r].name);
            hx_g_fail(&p, p.errbuf);
            goto fail;
        }
    rc = hx_g_table(model, &g->tt);
    if (rc != HX_OK) goto fail;
    int64_t nv = g->tt->n_vocab;
    g->work = hx__malloc((size_t)nv * sizeof *g->work);
    g->mask = hx__malloc((size_t)(nv + 63) / 64 * 8);
    g->cand = hx__malloc(1024 * sizeof *g->cand);
    g->dfa = hx__calloc(1, sizeof *g->dfa);
    g->ids = hx__malloc(((size_t)g->tt->max_depth + 2) * sizeof *g->ids);
    if (!g->work || !g->mask || !g->cand || !g->dfa || !g->ids || !hx_g_levels(g) ||
        !hx_g_stk_room(g, 64)) {
        rc = HX_E_NOMEM;
        goto fail;
    }
    /* the start: a REF to root followed by END, after every rule's elements */
    if (!hx_g_push_el(g, HX_G_REF, (uint32_t)root) || !hx_g_push_el(g, HX_G_END, 0)) {
        rc = HX_E_NOMEM;
        goto fail;
    }
    uint32_t *sm = hx__realloc(g->sufmin, (size_t)g->n_el * sizeof *sm);
    if (!sm) {
        rc = HX_E_NOMEM;
        goto fail;
    }
    g->sufmin = sm;
    g->sufmin[g->n_el - 2] = g->rules[root].minlen;
    g->sufmin[g->n_el - 1] = 0;
    g->stk[0] = g->n_el - 2;
    hx_g_expand(g, 1, &g->start);
    if (g->start.oom || !hx_g_set_copy(&g->cur, &g->start)) {
        rc = HX_E_NOMEM;
        goto fail;
    }
    hx__free(copy);
    *out = g;
    return HX_OK;
fail:
    hx__free(copy);
    hx_grammar_free(g);
    if (rc == HX_E_NOMEM) return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    if (p.line > 0)
        return hx__set_error(HX_E_INVAL, "grammar, line %d: %s", p.line, p.err ? p.err : "invalid");
    return hx__set_error(HX_E_INVAL, "grammar: %s", p.err ? p.err : "invalid");
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
