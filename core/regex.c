/*
 * regex.c — a small backtracking regex engine over code points: the pattern parser, the
 * compiler to a VM program, and the matcher (vocab.h lists the syntax). Its one user is the
 * BPE pre-tokenizer (pretok.c, formats.md §5.4).
 *
 * The engine compiles a pattern to a program for a backtracking VM (instructions CLASS, SPLIT,
 * JMP, LOOK, BOL, EOL, MATCH) and runs it with an explicit backtrack stack, so a long run of
 * letters or spaces cannot overflow the C stack. SPLIT tries its first branch first, which
 * gives leftmost-first alternation and greedy quantifiers — the semantics of the ECMAScript
 * std::regex llama.cpp uses and of HF's Oniguruma patterns. Classes test Unicode general
 * category groups and White_Space from unicode.h. Loops whose body can match the empty string
 * are rejected at compile time, so matching always terminates; each match is additionally
 * capped in steps as a guard.
 */
#include <string.h>

#include "unicode.h"
#include "vocab.h"

/* ---- classes -------------------------------------------------------------------------------- */

enum hx_re_item_kind { HX_RE_RANGE, HX_RE_PROP, HX_RE_NPROP };

struct hx_re_item {
    uint8_t kind;
    uint32_t lo, hi;     /* RANGE: [lo, hi]; PROP/NPROP: flag mask in lo */
};

struct hx_re_class {
    struct hx_re_item *items;
    int n_items, cap_items;
    bool negate;
    bool icase;          /* ASCII case folding */
};

static bool hx_re_class_test1(const struct hx_re_class *c, uint32_t cp)
{
    uint32_t fl = 0;
    bool have_fl = false;
    for (int i = 0; i < c->n_items; i++) {
        const struct hx_re_item *it = &c->items[i];
        if (it->kind == HX_RE_RANGE) {
            if (cp >= it->lo && cp <= it->hi) return true;
            continue;
        }
        if (!have_fl) fl = hx__ucd_flags(cp), have_fl = true;
        bool has = (fl & it->lo) != 0;
        if (it->kind == HX_RE_PROP ? has : !has) return true;
    }
    return false;
}

static bool hx_re_class_test(const struct hx_re_class *c, uint32_t cp)
{
    bool in = hx_re_class_test1(c, cp);
    if (!in && c->icase) {
        uint32_t alt = cp;
        if (cp >= 'a' && cp <= 'z') alt = cp - 32;
        else if (cp >= 'A' && cp <= 'Z') alt = cp + 32;
        if (alt != cp) in = hx_re_class_test1(c, alt);
    }
    return in != c->negate;
}

/* ---- program ------------------------------------------------------------------------------- */

enum hx_re_op { HX_OP_CLASS, HX_OP_SPLIT, HX_OP_JMP, HX_OP_LOOK, HX_OP_BOL, HX_OP_EOL, HX_OP_MATCH };

struct hx_re_inst {
    uint8_t op;
    bool neg;            /* LOOK: negative lookahead */
    int32_t x, y;        /* CLASS: class index; SPLIT: x first, y second; JMP: x; LOOK: y = next */
};

struct hx_regex {
    struct hx_re_inst *prog;
    int32_t n_prog, cap_prog;
    struct hx_re_class *classes;
    int32_t n_classes, cap_classes;
};

/* ---- parser: pattern → AST ------------------------------------------------------------------ */

enum hx_re_node_kind { HX_N_CLASS, HX_N_SEQ, HX_N_ALT, HX_N_REPEAT, HX_N_LOOK, HX_N_BOL, HX_N_EOL };

struct hx_re_node {
    uint8_t kind;
    bool neg;                     /* LOOK */
    int32_t cls;                  /* CLASS */
    int32_t min, max;             /* REPEAT; max -1 = unbounded */
    struct hx_re_node **kids;
    int32_t n_kids, cap_kids;
};

struct hx_re_parser {
    const char *p, *end, *start;
    struct hx_regex *re;
    int st;
    int depth;
};

#define HX_RE_MAX_DEPTH 64

static int hx_re_fail(struct hx_re_parser *P, const char *what)
{
    if (P->st == HX_OK)
        P->st = hx__set_error(HX_E_INVAL, "regex: %s at offset %d", what, (int)(P->p - P->start));
    return P->st;
}

static void hx_re_node_free(struct hx_re_node *n)
{
    if (!n) return;
    for (int32_t i = 0; i < n->n_kids; i++) hx_re_node_free(n->kids[i]);
    hx__free(n->kids);
    hx__free(n);
}

static struct hx_re_node *hx_re_node_new(struct hx_re_parser *P, int kind)
{
    struct hx_re_node *n = hx__calloc(1, sizeof *n);
    if (!n) {
        if (P->st == HX_OK) P->st = HX_E_NOMEM;
        return NULL;
    }
    n->kind = (uint8_t)kind;
    return n;
}

static bool hx_re_add_kid(struct hx_re_parser *P, struct hx_re_node *n, struct hx_re_node *k)
{
    if (n->n_kids == n->cap_kids) {
        int32_t cap = n->cap_kids ? n->cap_kids * 2 : 4;
        struct hx_re_node **kids = hx__realloc(n->kids, (size_t)cap * sizeof *kids);
        if (!kids) {
            hx_re_node_free(k);
            if (P->st == HX_OK) P->st = HX_E_NOMEM;
            return false;
        }
        n->kids = kids;
        n->cap_kids = cap;
    }
    n->kids[n->n_kids++] = k;
    return true;
}

static int32_t hx_re_class_new(struct hx_re_parser *P, bool icase)
{
    struct hx_regex *re = P->re;
    if (re->n_classes == re->cap_classes) {
        int32_t cap = re->cap_classes ? re->cap_classes * 2 : 8;
        struct hx_re_class *c = hx__realloc(re->classes, (size_t)cap * sizeof *c);
        if (!c) {
            if (P->st == HX_OK) P->st = HX_E_NOMEM;
            return -1;
        }
        re->classes = c;
        re->cap_classes = cap;
    }
    memset(&re->classes[re->n_classes], 0, sizeof re->classes[0]);
    re->classes[re->n_classes].icase = icase;
    return re->n_classes++;
}

static bool hx_re_class_add(struct hx_re_parser *P, int32_t ci, int kind, uint32_t lo, uint32_t hi)
{
    struct hx_re_class *c = &P->re->classes[ci];
    if (c->n_items == c->cap_items) {
        int cap = c->cap_items ? c->cap_items * 2 : 4;
        struct hx_re_item *it = hx__realloc(c->items, (size_t)cap * sizeof *it);
        if (!it) {
            if (P->st == HX_OK) P->st = HX_E_NOMEM;
            return false;
        }
        c->items = it;
        c->cap_items = cap;
    }
    c->items[c->n_items++] = (struct hx_re_item){.kind = (uint8_t)kind, .lo = lo, .hi = hi};
    return true;
}

static uint32_t hx_re_next_cp(struct hx_re_parser *P)
{
    uint32_t cp;
    P->p += hx__utf8_decode(P->p, (size_t)(P->end - P->p), &cp);
    return cp;
}

static int hx_re_hex(struct hx_re_parser *P, int min_digits, int max_digits, uint32_t *out)
{
    uint32_t v = 0;
    int n = 0;
    while (n < max_digits && P->p < P->end) {
        char c = *P->p;
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) break;
        v = v * 16 + (uint32_t)d;
        P->p++;
        n++;
    }
    if (n < min_digits || v > HX_UCD_MAX) return hx_re_fail(P, "bad hex escape");
    *out = v;
    return HX_OK;
}

static uint32_t hx_re_prop_mask(struct hx_re_parser *P)
{
    /* after "\p" or "\P": {X} or a single letter */
    char name[16];
    int n = 0;
    if (P->p < P->end && *P->p == '{') {
        P->p++;
        while (P->p < P->end && *P->p != '}' && n < 15) name[n++] = *P->p++;
        if (P->p >= P->end || *P->p != '}') return hx_re_fail(P, "unterminated \\p{"), 0;
        P->p++;
    } else if (P->p < P->end) {
        name[n++] = *P->p++;
    }
    name[n] = 0;
    static const struct { const char *name; uint32_t mask; } props[] = {
        {"L", HX_UCD_LETTER}, {"N", HX_UCD_NUMBER}, {"P", HX_UCD_PUNCT}, {"S", HX_UCD_SYMBOL},
        {"M", HX_UCD_MARK}, {"Z", HX_UCD_SEPARATOR}, {"C", HX_UCD_CONTROL | HX_UCD_UNDEF},
    };
    for (size_t i = 0; i < HX_ARRAY_LEN(props); i++)
        if (!strcmp(name, props[i].name)) return props[i].mask;
    hx_re_fail(P, "unsupported \\p{} property");
    return 0;
}

/*
 * Parse an escape after '\'. Either a single code point (*cp set, returns 1) or a class item
 * added to class ci (returns 2). Returns <= 0 on error.
 */
static int hx_re_escape(struct hx_re_parser *P, int32_t ci, uint32_t *cp)
{
    if (P->p >= P->end) return hx_re_fail(P, "trailing backslash"), -1;
    char c = *P->p++;
    switch (c) {
    case 'n': *cp = '\n'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 't': *cp = '\t'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case '0': *cp = 0; return 1;
    case 'x':
        if (P->p < P->end && *P->p == '{') {
            P->p++;
            if (hx_re_hex(P, 1, 6, cp) || P->p >= P->end || *P->p != '}')
                return hx_re_fail(P, "bad \\x{} escape"), -1;
            P->p++;
            return 1;
        }
        return hx_re_hex(P, 2, 2, cp) ? -1 : 1;
    case 'u': return hx_re_hex(P, 4, 4, cp) ? -1 : 1;
    case 's': return hx_re_class_add(P, ci, HX_RE_PROP, HX_UCD_WHITESPACE, 0) ? 2 : -1;
    case 'S': return hx_re_class_add(P, ci, HX_RE_NPROP, HX_UCD_WHITESPACE, 0) ? 2 : -1;
    case 'd': return hx_re_class_add(P, ci, HX_RE_RANGE, '0', '9') ? 2 : -1;
    case 'D':
        return (hx_re_class_add(P, ci, HX_RE_RANGE, 0, '0' - 1) &&
                hx_re_class_add(P, ci, HX_RE_RANGE, '9' + 1, HX_UCD_MAX)) ? 2 : -1;
    case 'w':
        return (hx_re_class_add(P, ci, HX_RE_PROP, HX_UCD_LETTER | HX_UCD_NUMBER | HX_UCD_MARK, 0)
                && hx_re_class_add(P, ci, HX_RE_RANGE, '_', '_')) ? 2 : -1;
    case 'W': return hx_re_class_add(P, ci, HX_RE_NPROP, HX_UCD_LETTER | HX_UCD_NUMBER, 0) ? 2 : -1;
    case 'p':
    case 'P': {
        uint32_t mask = hx_re_prop_mask(P);
        if (!mask) return -1;
        return hx_re_class_add(P, ci, c == 'p' ? HX_RE_PROP : HX_RE_NPROP, mask, 0) ? 2 : -1;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            return hx_re_fail(P, "unsupported escape"), -1;
        P->p--;
        *cp = hx_re_next_cp(P);   /* escaped punctuation or any other literal */
        return 1;
    }
}

static struct hx_re_node *hx_re_class_node(struct hx_re_parser *P, int32_t ci)
{
    struct hx_re_node *n = hx_re_node_new(P, HX_N_CLASS);
    if (n) n->cls = ci;
    return n;
}

static struct hx_re_node *hx_re_parse_bracket(struct hx_re_parser *P, bool icase)
{
    int32_t ci = hx_re_class_new(P, icase);
    if (ci < 0) return NULL;
    if (P->p < P->end && *P->p == '^') {
        P->re->classes[ci].negate = true;
        P->p++;
    }
    bool first = true;
    for (;;) {
        if (P->p >= P->end) return hx_re_fail(P, "unterminated [ class"), NULL;
        if (*P->p == ']' && !first) {
            P->p++;
            break;
        }
        first = false;
        uint32_t lo;
        if (*P->p == '\\') {
            P->p++;
            int k = hx_re_escape(P, ci, &lo);
            if (k <= 0) return NULL;
            if (k == 2) continue;
        } else {
            lo = hx_re_next_cp(P);
        }
        uint32_t hi = lo;
        if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
            P->p++;
            if (*P->p == '\\') {
                P->p++;
                int k = hx_re_escape(P, ci, &hi);
                if (k != 1) return hx_re_fail(P, "bad range end"), NULL;
            } else {
                hi = hx_re_next_cp(P);
            }
            if (hi < lo) return hx_re_fail(P, "reversed range"), NULL;
        }
        if (!hx_re_class_add(P, ci, HX_RE_RANGE, lo, hi)) return NULL;
    }
    return hx_re_class_node(P, ci);
}

static struct hx_re_node *hx_re_parse_alt(struct hx_re_parser *P, bool icase);

static struct hx_re_node *hx_re_parse_group(struct hx_re_parser *P, bool icase)
{
    /* after '(' */
    int look = 0; /* 1 = (?=, 2 = (?! */
    if (P->p < P->end && *P->p == '?') {
        P->p++;
        if (P->p >= P->end) return hx_re_fail(P, "bad group"), NULL;
        char c = *P->p++;
        if (c == ':') {
        } else if (c == '=') {
            look = 1;
        } else if (c == '!') {
            look = 2;
        } else if (c == 'i' && P->p < P->end && *P->p == ':') {
            P->p++;
            icase = true;
        } else {
            return hx_re_fail(P, "unsupported group syntax"), NULL;
        }
    }
    struct hx_re_node *inner = hx_re_parse_alt(P, icase);
    if (!inner) return NULL;
    if (P->p >= P->end || *P->p != ')') {
        hx_re_node_free(inner);
        return hx_re_fail(P, "missing )"), NULL;
    }
    P->p++;
    if (!look) return inner;
    struct hx_re_node *n = hx_re_node_new(P, HX_N_LOOK);
    if (!n) return hx_re_node_free(inner), NULL;
    n->neg = look == 2;
    if (!hx_re_add_kid(P, n, inner)) return hx_re_node_free(n), NULL;
    return n;
}

static struct hx_re_node *hx_re_parse_atom(struct hx_re_parser *P, bool icase)
{
    char c = *P->p;
    if (c == '(') {
        P->p++;
        if (++P->depth > HX_RE_MAX_DEPTH) return hx_re_fail(P, "nesting too deep"), NULL;
        struct hx_re_node *n = hx_re_parse_group(P, icase);
        P->depth--;
        return n;
    }
    if (c == '[') {
        P->p++;
        return hx_re_parse_bracket(P, icase);
    }
    if (c == '^' || c == '$') {
        P->p++;
        return hx_re_node_new(P, c == '^' ? HX_N_BOL : HX_N_EOL);
    }
    int32_t ci = hx_re_class_new(P, icase);
    if (ci < 0) return NULL;
    if (c == '.') {
        P->p++;
        P->re->classes[ci].negate = true;
        if (!hx_re_class_add(P, ci, HX_RE_RANGE, '\n', '\n') ||
            !hx_re_class_add(P, ci, HX_RE_RANGE, '\r', '\r') ||
            !hx_re_class_add(P, ci, HX_RE_RANGE, 0x2028, 0x2029))
            return NULL;
        return hx_re_class_node(P, ci);
    }
    uint32_t cp;
    if (c == '\\') {
        P->p++;
        int k = hx_re_escape(P, ci, &cp);
        if (k <= 0) return NULL;
        if (k == 2) return hx_re_class_node(P, ci);
    } else {
        if (c == ')' || c == '|' || c == '*' || c == '+' || c == '?' || c == '{')
            return hx_re_fail(P, "unexpected metacharacter"), NULL;
        cp = hx_re_next_cp(P);
    }
    if (!hx_re_class_add(P, ci, HX_RE_RANGE, cp, cp)) return NULL;
    return hx_re_class_node(P, ci);
}

static bool hx_re_parse_count(struct hx_re_parser *P, int32_t *out)
{
    int32_t v = 0;
    const char *s = P->p;
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9' && v < 100000) v = v * 10 + (*P->p++ - '0');
    *out = v;
    return P->p > s && v <= 1000;
}

/* Parse a quantifier after an atom, if any; wraps the atom in a REPEAT node. */
static struct hx_re_node *hx_re_parse_quant(struct hx_re_parser *P, struct hx_re_node *atom)
{
    if (P->p >= P->end) return atom;
    int32_t min, max;
    char c = *P->p;
    if (c == '?') min = 0, max = 1;
    else if (c == '*') min = 0, max = -1;
    else if (c == '+') min = 1, max = -1;
    else if (c == '{') {
        P->p++;
        if (!hx_re_parse_count(P, &min)) return hx_re_node_free(atom), hx_re_fail(P, "bad {n,m}"), NULL;
        max = min;
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            if (P->p < P->end && *P->p == '}') max = -1;
            else if (!hx_re_parse_count(P, &max) || max < min)
                return hx_re_node_free(atom), hx_re_fail(P, "bad {n,m}"), NULL;
        }
        if (P->p >= P->end || *P->p != '}') return hx_re_node_free(atom), hx_re_fail(P, "bad {n,m}"), NULL;
    } else {
        return atom;
    }
    P->p++;
    if (P->p < P->end && (*P->p == '?' || *P->p == '+'))
        return hx_re_node_free(atom), hx_re_fail(P, "lazy/possessive quantifiers unsupported"), NULL;
    struct hx_re_node *n = hx_re_node_new(P, HX_N_REPEAT);
    if (!n) return hx_re_node_free(atom), NULL;
    n->min = min;
    n->max = max;
    if (!hx_re_add_kid(P, n, atom)) return hx_re_node_free(n), NULL;
    return n;
}

static struct hx_re_node *hx_re_parse_seq(struct hx_re_parser *P, bool icase)
{
    struct hx_re_node *seq = hx_re_node_new(P, HX_N_SEQ);
    if (!seq) return NULL;
    while (P->p < P->end && *P->p != '|' && *P->p != ')') {
        struct hx_re_node *a = hx_re_parse_atom(P, icase);
        if (!a) return hx_re_node_free(seq), NULL;
        a = hx_re_parse_quant(P, a);
        if (!a || !hx_re_add_kid(P, seq, a)) return hx_re_node_free(seq), NULL;
    }
    return seq;
}

static struct hx_re_node *hx_re_parse_alt(struct hx_re_parser *P, bool icase)
{
    struct hx_re_node *first = hx_re_parse_seq(P, icase);
    if (!first) return NULL;
    if (P->p >= P->end || *P->p != '|') return first;
    struct hx_re_node *alt = hx_re_node_new(P, HX_N_ALT);
    if (!alt || !hx_re_add_kid(P, alt, first)) return hx_re_node_free(alt), NULL;
    while (P->p < P->end && *P->p == '|') {
        P->p++;
        struct hx_re_node *s = hx_re_parse_seq(P, icase);
        if (!s || !hx_re_add_kid(P, alt, s)) return hx_re_node_free(alt), NULL;
    }
    return alt;
}

/* ---- compiler: AST → program ----------------------------------------------------------------- */

static bool hx_re_nullable(const struct hx_re_node *n)
{
    switch (n->kind) {
    case HX_N_CLASS: return false;
    case HX_N_SEQ:
        for (int32_t i = 0; i < n->n_kids; i++)
            if (!hx_re_nullable(n->kids[i])) return false;
        return true;
    case HX_N_ALT:
        for (int32_t i = 0; i < n->n_kids; i++)
            if (hx_re_nullable(n->kids[i])) return true;
        return false;
    case HX_N_REPEAT: return n->min == 0 || hx_re_nullable(n->kids[0]);
    default: return true; /* LOOK, BOL, EOL consume nothing */
    }
}

static int32_t hx_re_emit(struct hx_re_parser *P, int op, int32_t x, int32_t y)
{
    struct hx_regex *re = P->re;
    if (re->n_prog == re->cap_prog) {
        int32_t cap = re->cap_prog ? re->cap_prog * 2 : 32;
        if (cap > (1 << 20)) return hx_re_fail(P, "pattern too large"), -1;
        struct hx_re_inst *p = hx__realloc(re->prog, (size_t)cap * sizeof *p);
        if (!p) {
            if (P->st == HX_OK) P->st = HX_E_NOMEM;
            return -1;
        }
        re->prog = p;
        re->cap_prog = cap;
    }
    re->prog[re->n_prog] = (struct hx_re_inst){.op = (uint8_t)op, .x = x, .y = y};
    return re->n_prog++;
}

static int hx_re_gen(struct hx_re_parser *P, const struct hx_re_node *n)
{
    struct hx_regex *re = P->re;
    switch (n->kind) {
    case HX_N_CLASS: return hx_re_emit(P, HX_OP_CLASS, n->cls, 0) < 0 ? P->st : HX_OK;
    case HX_N_BOL: return hx_re_emit(P, HX_OP_BOL, 0, 0) < 0 ? P->st : HX_OK;
    case HX_N_EOL: return hx_re_emit(P, HX_OP_EOL, 0, 0) < 0 ? P->st : HX_OK;
    case HX_N_SEQ:
        for (int32_t i = 0; i < n->n_kids; i++)
            if (hx_re_gen(P, n->kids[i])) return P->st;
        return HX_OK;
    case HX_N_ALT: {
        /* SPLIT L1, next; L1: a; JMP end; next: SPLIT L2, next2; ... last: z; end: */
        int32_t jumps[64];
        int32_t n_j = 0;
        if (n->n_kids > 64) return hx_re_fail(P, "too many alternatives");
        for (int32_t i = 0; i < n->n_kids; i++) {
            int32_t split = -1;
            if (i + 1 < n->n_kids && (split = hx_re_emit(P, HX_OP_SPLIT, 0, 0)) < 0) return P->st;
            if (split >= 0) re->prog[split].x = re->n_prog;
            if (hx_re_gen(P, n->kids[i])) return P->st;
            if (i + 1 < n->n_kids) {
                int32_t j = hx_re_emit(P, HX_OP_JMP, 0, 0);
                if (j < 0) return P->st;
                jumps[n_j++] = j;
                re->prog[split].y = re->n_prog;
            }
        }
        for (int32_t i = 0; i < n_j; i++) re->prog[jumps[i]].x = re->n_prog;
        return HX_OK;
    }
    case HX_N_REPEAT: {
        const struct hx_re_node *k = n->kids[0];
        if (n->max < 0 && hx_re_nullable(k)) return hx_re_fail(P, "loop body can match empty");
        for (int32_t i = 0; i < n->min; i++)
            if (hx_re_gen(P, k)) return P->st;
        if (n->max < 0) {
            int32_t split = hx_re_emit(P, HX_OP_SPLIT, 0, 0);
            if (split < 0) return P->st;
            re->prog[split].x = re->n_prog;
            if (hx_re_gen(P, k) || hx_re_emit(P, HX_OP_JMP, split, 0) < 0) return P->st;
            re->prog[split].y = re->n_prog;
            return HX_OK;
        }
        int32_t splits[1000];
        int32_t n_s = 0;
        for (int32_t i = n->min; i < n->max; i++) {
            int32_t split = hx_re_emit(P, HX_OP_SPLIT, 0, 0);
            if (split < 0) return P->st;
            re->prog[split].x = re->n_prog;
            splits[n_s++] = split;
            if (hx_re_gen(P, k)) return P->st;
        }
        for (int32_t i = 0; i < n_s; i++) re->prog[splits[i]].y = re->n_prog;
        return HX_OK;
    }
    case HX_N_LOOK: {
        int32_t look = hx_re_emit(P, HX_OP_LOOK, 0, 0);
        if (look < 0) return P->st;
        re->prog[look].neg = n->neg;
        if (hx_re_gen(P, n->kids[0]) || hx_re_emit(P, HX_OP_MATCH, 0, 0) < 0) return P->st;
        re->prog[look].y = re->n_prog;
        return HX_OK;
    }
    }
    return hx_re_fail(P, "internal: bad node");
}

void hx__regex_free(struct hx_regex *re)
{
    if (!re) return;
    for (int32_t i = 0; i < re->n_classes; i++) hx__free(re->classes[i].items);
    hx__free(re->classes);
    hx__free(re->prog);
    hx__free(re);
}

int hx__regex_compile(const char *pattern, struct hx_regex **out)
{
    *out = NULL;
    struct hx_regex *re = hx__calloc(1, sizeof *re);
    if (!re) return HX_E_NOMEM;
    struct hx_re_parser P = {.p = pattern, .end = pattern + strlen(pattern), .start = pattern,
                             .re = re, .st = HX_OK};
    struct hx_re_node *root = hx_re_parse_alt(&P, false);
    if (root && P.p < P.end) hx_re_fail(&P, "unbalanced )");
    if (root && P.st == HX_OK) {
        if (hx_re_gen(&P, root) == HX_OK) hx_re_emit(&P, HX_OP_MATCH, 0, 0);
    }
    hx_re_node_free(root);
    if (P.st != HX_OK || !root) {
        int st = P.st != HX_OK ? P.st : HX_E_INVAL;
        hx__regex_free(re);
        return st;
    }
    *out = re;
    return HX_OK;
}

/* ---- matcher ---------------------------------------------------------------------------------- */

struct hx_re_frame {
    int32_t pc;
    uint32_t pos;
};

struct hx_re_stack {
    struct hx_re_frame *f;
    size_t n, cap;
    struct hx_re_frame local[256];
};

static bool hx_re_push(struct hx_re_stack *s, int32_t pc, size_t pos)
{
    if (s->n == s->cap) {
        size_t cap = s->cap * 2;
        struct hx_re_frame *f;
        if (s->f == s->local) {
            f = hx__malloc(cap * sizeof *f);
            if (f) memcpy(f, s->local, sizeof s->local);
        } else {
            f = hx__realloc(s->f, cap * sizeof *f);
        }
        if (!f) return false;
        s->f = f;
        s->cap = cap;
    }
    s->f[s->n++] = (struct hx_re_frame){pc, (uint32_t)pos};
    return true;
}

#define HX_RE_MAX_STEPS 50000000u

/* Run from pc at pos; returns end position (>= 0), -1 no match, -2 out of memory/steps. */
static int64_t hx_re_run(const struct hx_regex *re, int32_t pc0, const uint32_t *cps, size_t n,
                         size_t pos0, uint32_t *steps)
{
    struct hx_re_stack s = {.n = 0, .cap = HX_ARRAY_LEN(s.local)};
    s.f = s.local;
    int64_t result = -1;
    s.f[s.n++] = (struct hx_re_frame){pc0, (uint32_t)pos0};
    while (s.n > 0 && result == -1) {
        struct hx_re_frame fr = s.f[--s.n];
        int32_t pc = fr.pc;
        size_t pos = fr.pos;
        for (;;) {
            if (++*steps > HX_RE_MAX_STEPS) {
                result = -2;
                break;
            }
            const struct hx_re_inst *in = &re->prog[pc];
            if (in->op == HX_OP_CLASS) {
                if (pos >= n || !hx_re_class_test(&re->classes[in->x], cps[pos])) break;
                pos++;
                pc++;
            } else if (in->op == HX_OP_SPLIT) {
                if (!hx_re_push(&s, in->y, pos)) {
                    result = -2;
                    break;
                }
                pc = in->x;
            } else if (in->op == HX_OP_JMP) {
                pc = in->x;
            } else if (in->op == HX_OP_LOOK) {
                int64_t r = hx_re_run(re, pc + 1, cps, n, pos, steps);
                if (r == -2) {
                    result = -2;
                    break;
                }
                if ((r >= 0) == in->neg) break;
                pc = in->y;
            } else if (in->op == HX_OP_BOL) {
                if (pos != 0) break;
                pc++;
            } else if (in->op == HX_OP_EOL) {
                if (pos != n) break;
                pc++;
            } else { /* MATCH */
                result = (int64_t)pos;
                break;
            }
        }
    }
    if (s.f != s.local) hx__free(s.f);
    return result;
}

int64_t hx__regex_match_at(const struct hx_regex *re, const uint32_t *cps, size_t n, size_t pos)
{
    uint32_t steps = 0;
    int64_t end = hx_re_run(re, 0, cps, n, pos, &steps);
    return end >= 0 ? end - (int64_t)pos : end;
}
