/*
 * grammar-impl.h — what the parts of constrained decoding share (docs/grammar.md): the
 * compiled grammar (rules as flat element arrays, byte sets, shortest completions) and the
 * stack sets it is matched with, and the model's token table. grammar-parse.c compiles GBNF
 * text into it; grammar-tokens.c builds the token table; grammar.c matches the grammar against
 * bytes and tokens. Private to core/.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hx_model;

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

/* ---- the model's tokens (grammar-tokens.c) ---------------------------------------------- */

/* The vocabulary's token bytes, and the tokens with bytes (not end-of-generation) sorted by
 * their bytes and laid out as a pre-order trie: node i's subtree is nodes[i .. i + size). */
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

/* The model's token table, built on first use (thread-safe) and owned by the model. Returns
 * HX_OK or HX_E_NOMEM. */
int hx__g_tok_table(const struct hx_model *m, const struct hx__tok_table **out);

/* ---- stack sets ------------------------------------------------------------------------ */

struct hx_g_set {
    uint32_t *data;      /* stacks' entries, back to back */
    uint32_t *off, *len; /* stack i: data[off[i] .. off[i]+len[i]) */
    uint32_t n, n_data, cap, cap_data;
    bool oom;
};

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

/* Parses `text` (GBNF, `len` bytes) into `g` (zeroed, model set): rules, byte sets, shortest
 * completions, dispatch rules, and after them the start (a REF to root, then END) as the last
 * two elements. Checks every rule is defined, reachable left recursion and unfinishable rules.
 * Returns HX_OK, or an error (HX_E_INVAL naming the line, HX_E_NOMEM) already set. */
int hx__grammar_compile(struct hx_grammar *g, const char *text, size_t len);

/* Appends one element; false when out of memory or past HX_G_MAX_ELEMS. */
bool hx__g_push_el(struct hx_grammar *g, uint8_t type, uint32_t v);
