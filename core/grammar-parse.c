/*
 * grammar-parse.c — GBNF text compiled into a grammar (docs/grammar.md): rules and byte sets
 * (grammar-impl.h), character classes as UTF-8 byte-sequence rules, repetitions as rules, then
 * the analysis every match relies on: each element's fewest bytes to the end of its
 * alternative, left recursion refused, rules that can never finish refused. grammar.c matches
 * the result. Errors name the line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar-impl.h"
#include "hx-impl.h"

/* ---- building ------------------------------------------------------------------------------- */

bool hx__g_push_el(struct hx_grammar *g, uint8_t type, uint32_t v)
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
        if (s < 0 || !hx__g_push_el(g, HX_G_CHR, (uint32_t)s)) return -1;
    }
    return hx__g_push_el(g, HX_G_END, 0) ? 0 : -1;
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
            !hx__g_push_el(g, HX_G_CHR, (uint32_t)s) || !hx__g_push_el(g, HX_G_END, 0))
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
        if (!hx__g_push_el(g, e[i].type, e[i].v)) return -1;
    return hx__g_push_el(g, HX_G_END, 0) ? r : -1;
}

/* R ::= x R | ε (right recursive: stacks stay flat) */
static int64_t hx_g_star(struct hx_grammar *g, uint32_t parent, struct hx_g_elem x, int line)
{
    int64_t r = hx_g_rule_anon(g, parent, line);
    if (r < 0) return -1;
    if (!hx_g_alt_begin(g, (uint32_t)r) || !hx__g_push_el(g, x.type, x.v) ||
        !hx__g_push_el(g, HX_G_REF, (uint32_t)r) || !hx__g_push_el(g, HX_G_END, 0) ||
        !hx_g_alt_begin(g, (uint32_t)r) || !hx__g_push_el(g, HX_G_END, 0))
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
        if (r < 0 || !hx_g_alt_begin(g, (uint32_t)r) || !hx__g_push_el(g, x.type, x.v) ||
            (inner >= 0 && !hx__g_push_el(g, HX_G_REF, (uint32_t)inner)) ||
            !hx__g_push_el(g, HX_G_END, 0) || !hx_g_alt_begin(g, (uint32_t)r) ||
            !hx__g_push_el(g, HX_G_END, 0))
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
        for (uint32_t i = 0; ok && i < q.n; i++) ok = hx__g_push_el(g, q.e[i].type, q.e[i].v);
        ok = ok && hx__g_push_el(g, HX_G_END, 0);
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

/* ---- compiling: the whole text, then the checks --------------------------------------------- */

/* hx_g_fail's message, as the status the compile returns (hx_g_fail's -1 is HX_E_NOMEM's value) */
static int hx_g_invalid(struct hx_g_parse *p, const char *msg)
{
    hx_g_fail(p, msg);
    return HX_E_INVAL;
}

static int hx_g_compile(struct hx_grammar *g, struct hx_g_parse *p)
{
    if (memchr(p->s, '\0', (size_t)(p->end - p->s)))
        return hx_g_invalid(p, "a NUL byte in the grammar");
    for (;;) {
        hx_g_skip(p, true);
        if (p->s >= p->end) break;
        const char *s = p->s;
        while (p->s < p->end && hx_g_name_char(*p->s)) p->s++;
        if (p->s == s || !hx_g_at_def(&(struct hx_g_parse){.s = s, .end = p->end}))
            return hx_g_invalid(p, "expected a rule: name ::= ...");
        int64_t r = hx_g_rule_find(g, s, (size_t)(p->s - s), p->line);
        if (r < 0) return HX_E_NOMEM;
        if (g->rules[r].defined) {
            snprintf(p->errbuf, sizeof p->errbuf, "rule '%.100s' is defined twice",
                     g->rules[r].name);
            return hx_g_invalid(p, p->errbuf);
        }
        g->rules[r].defined = true;
        g->rules[r].line = p->line;
        hx_g_skip(p, false);
        p->s += 3; /* ::= */
        if (hx_g_alts(p, (uint32_t)r, false)) return HX_E_INVAL;
        if (p->s < p->end && *p->s == ')') return hx_g_invalid(p, "unmatched ')'");
    }
    int64_t root = -1;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (!g->rules[r].defined) {
            p->line = g->rules[r].line;
            snprintf(p->errbuf, sizeof p->errbuf, "rule '%.100s' is used but not defined",
                     g->rules[r].name);
            return hx_g_invalid(p, p->errbuf);
        }
        if (!strcmp(g->rules[r].name, "root")) root = r;
    }
    if (root < 0) {
        p->line = 0;
        return hx_g_invalid(p, "no rule named 'root'");
    }
    g->root = (uint32_t)root;
    g->sufmin = hx__malloc((size_t)(g->n_el + 1) * sizeof *g->sufmin);
    uint8_t *mark = hx__calloc(g->n_rules, 1);
    uint32_t *lp = hx__malloc((g->n_rules + 1) * sizeof *lp);
    int rc = !g->sufmin || !mark || !lp ? HX_E_NOMEM : hx_g_analyse_minlen(g);
    for (uint32_t r = 0; rc == HX_OK && r < g->n_rules; r++) {
        int k = hx_g_left_rec(g, r, mark, lp, 0);
        if (k == -2) {
            p->line = 0;
            rc = hx_g_invalid(p, "rules nest more than 1000 deep before matching a byte");
        } else if (k >= 0) {
            p->line = g->rules[k].line;
            snprintf(p->errbuf, sizeof p->errbuf,
                     "rule '%.100s' can reach itself without matching a byte (left recursion, "
                     "or a repetition of something that can match nothing)",
                     g->rules[k].name);
            rc = hx_g_invalid(p, p->errbuf);
        }
    }
    hx__free(lp);
    hx__free(mark);
    if (rc != HX_OK) return rc;
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
            p->line = g->rules[r].line;
            snprintf(p->errbuf, sizeof p->errbuf, "rule '%.100s' can never finish",
                     g->rules[r].name);
            return hx_g_invalid(p, p->errbuf);
        }
    /* the start: a REF to root followed by END, after every rule's elements */
    if (!hx__g_push_el(g, HX_G_REF, (uint32_t)root) || !hx__g_push_el(g, HX_G_END, 0))
        return HX_E_NOMEM;
    uint32_t *sm = hx__realloc(g->sufmin, (size_t)g->n_el * sizeof *sm);
    if (!sm) return HX_E_NOMEM;
    g->sufmin = sm;
    g->sufmin[g->n_el - 2] = g->rules[root].minlen;
    g->sufmin[g->n_el - 1] = 0;
    return HX_OK;
}

int hx__grammar_compile(struct hx_grammar *g, const char *text, size_t len)
{
    /* a NUL-terminated copy, so number parsing cannot run past the end */
    char *copy = hx__malloc(len + 1);
    if (!copy) return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    memcpy(copy, text, len);
    copy[len] = '\0';
    struct hx_g_parse p = {.g = g, .s = copy, .end = copy + len, .line = 1};
    int rc = hx_g_compile(g, &p);
    hx__free(copy);
    if (rc == HX_OK) return HX_OK;
    if (rc == HX_E_NOMEM) return hx__set_error(HX_E_NOMEM, "grammar: out of memory");
    if (p.line > 0)
        return hx__set_error(HX_E_INVAL, "grammar, line %d: %s", p.line, p.err ? p.err : "invalid");
    return hx__set_error(HX_E_INVAL, "grammar: %s", p.err ? p.err : "invalid");
}
