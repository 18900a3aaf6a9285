/*
 * npu-json.c — a small, strict JSON reader for the kernel manifest (RFC 8259: objects,
 * arrays, strings with every escape incl. surrogate pairs, numbers, true/false/null).
 * Self-contained so the backend builds and reads manifests without any JSON library.
 *
 * Limits: nesting depth 32, input validated byte by byte (control characters in strings,
 * trailing garbage, lone surrogates and malformed numbers are errors with line and column).
 * The tree is heap nodes (hx_calloc), released with hx__json_free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu-impl.h"

#define HX_JSON_MAX_DEPTH 32

struct hx_json_p {
    const char *s, *end, *p;
    char *err;
    size_t err_len;
    bool failed;
};

static int hx_json_fail(struct hx_json_p *jp, const char *what)
{
    if (jp->failed) return HX_E_FORMAT;
    int line = 1, col = 1;
    for (const char *q = jp->s; q < jp->p && q < jp->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    snprintf(jp->err, jp->err_len, "line %d col %d: %s", line, col, what);
    jp->failed = true;
    return HX_E_FORMAT;
}

static void hx_json_ws(struct hx_json_p *jp)
{
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
        jp->p++;
}

static bool hx_json_lit(struct hx_json_p *jp, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, lit, n)) return false;
    jp->p += n;
    return true;
}

static int hx_json_hex4(struct hx_json_p *jp, unsigned *out)
{
    if (jp->end - jp->p < 4) return hx_json_fail(jp, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *jp->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return hx_json_fail(jp, "bad hex digit in \\u escape");
    }
    *out = v;
    return HX_OK;
}

static size_t hx_json_utf8(unsigned cp, char *o)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hx_json_escape(struct hx_json_p *jp, char *o, size_t *n)
{
    char c = *jp->p++;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        o[(*n)++] = to[hit - from];
        return HX_OK;
    }
    if (c != 'u') return hx_json_fail(jp, "unknown escape in string");
    unsigned cp, lo;
    if (hx_json_hex4(jp, &cp)) return HX_E_FORMAT;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return hx_json_fail(jp, "lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (!hx_json_lit(jp, "\\u") || hx_json_hex4(jp, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return hx_json_fail(jp, "high surrogate without a low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    *n += hx_json_utf8(cp, o + *n);
    return HX_OK;
}

/* jp->p is just past the opening quote. Escapes never expand, so the raw length bounds it. */
static int hx_json_string(struct hx_json_p *jp, char **out)
{
    const char *q = jp->p;
    while (q < jp->end && *q != '"') q += (*q == '\\' && q + 1 < jp->end) ? 2 : 1;
    if (q >= jp->end) return hx_json_fail(jp, "unterminated string");
    char *o = hx_malloc((size_t)(q - jp->p) + 1);
    if (!o) return HX_E_NOMEM;
    size_t n = 0;
    while (*jp->p != '"') {
        unsigned char c = (unsigned char)*jp->p;
        if (c < 0x20) {
            hx_free(o);
            return hx_json_fail(jp, "control character in string");
        }
        if (c == '\\') {
            jp->p++;
            if (hx_json_escape(jp, o, &n)) {
                hx_free(o);
                return HX_E_FORMAT;
            }
            continue;
        }
        o[n++] = (char)c;
        jp->p++;
    }
    jp->p++;
    o[n] = '\0';
    *out = o;
    return HX_OK;
}

static int hx_json_number(struct hx_json_p *jp, double *out)
{
    const char *q = jp->p;
    if (q < jp->end && *q == '-') q++;
    if (q >= jp->end || !(*q >= '0' && *q <= '9')) return hx_json_fail(jp, "bad number");
    if (*q == '0') q++;
    else while (q < jp->end && *q >= '0' && *q <= '9') q++;
    if (q < jp->end && *q == '.') {
        q++;
        if (q >= jp->end || !(*q >= '0' && *q <= '9')) return hx_json_fail(jp, "bad fraction");
        while (q < jp->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < jp->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < jp->end && (*q == '+' || *q == '-')) q++;
        if (q >= jp->end || !(*q >= '0' && *q <= '9')) return hx_json_fail(jp, "bad exponent");
        while (q < jp->end && *q >= '0' && *q <= '9') q++;
    }
    char buf[64];
    size_t n = (size_t)(q - jp->p);
    if (n >= sizeof buf) return hx_json_fail(jp, "number too long");
    memcpy(buf, jp->p, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    jp->p = q;
    return HX_OK;
}

static int hx_json_value(struct hx_json_p *jp, struct hx_json *v, int depth);

/* Elements of an array or members of an object, after the opening bracket. */
static int hx_json_items(struct hx_json_p *jp, struct hx_json *v, int depth, bool obj)
{
    char close = obj ? '}' : ']';
    struct hx_json **tail = &v->child;
    hx_json_ws(jp);
    if (jp->p < jp->end && *jp->p == close) return jp->p++, HX_OK;
    for (;;) {
        struct hx_json *e = hx_calloc(1, sizeof *e);
        if (!e) return HX_E_NOMEM;
        *tail = e, tail = &e->next;
        hx_json_ws(jp);
        if (obj) {
            if (jp->p >= jp->end || *jp->p != '"') return hx_json_fail(jp, "expected a member name");
            jp->p++;
            int st = hx_json_string(jp, &e->key);
            if (st) return st;
            hx_json_ws(jp);
            if (jp->p >= jp->end || *jp->p != ':') return hx_json_fail(jp, "expected ':'");
            jp->p++;
        }
        int st = hx_json_value(jp, e, depth + 1);
        if (st) return st;
        hx_json_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) return jp->p++, HX_OK;
        return hx_json_fail(jp, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int hx_json_value(struct hx_json_p *jp, struct hx_json *v, int depth)
{
    if (depth > HX_JSON_MAX_DEPTH) return hx_json_fail(jp, "nesting too deep");
    hx_json_ws(jp);
    if (jp->p >= jp->end) return hx_json_fail(jp, "unexpected end of input");
    char c = *jp->p;
    if (c == '{' || c == '[') {
        jp->p++;
        v->type = c == '{' ? HX_JSON_OBJ : HX_JSON_ARR;
        return hx_json_items(jp, v, depth, c == '{');
    }
    if (c == '"') {
        jp->p++;
        v->type = HX_JSON_STR;
        return hx_json_string(jp, &v->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        v->type = HX_JSON_NUM;
        return hx_json_number(jp, &v->num);
    }
    if (hx_json_lit(jp, "true")) return v->type = HX_JSON_BOOL, v->b = true, HX_OK;
    if (hx_json_lit(jp, "false")) return v->type = HX_JSON_BOOL, v->b = false, HX_OK;
    if (hx_json_lit(jp, "null")) return v->type = HX_JSON_NULL, HX_OK;
    return hx_json_fail(jp, "unexpected character");
}

int hx__json_parse(const char *text, size_t len, struct hx_json **out, char *err, size_t n)
{
    *out = NULL;
    struct hx_json_p jp = {.s = text, .end = text + len, .p = text, .err = err, .err_len = n};
    if (n) err[0] = '\0';
    struct hx_json *root = hx_calloc(1, sizeof *root);
    if (!root) return HX_E_NOMEM;
    int st = hx_json_value(&jp, root, 0);
    if (st == HX_OK) {
        hx_json_ws(&jp);
        if (jp.p != jp.end) st = hx_json_fail(&jp, "trailing characters after the value");
    }
    if (st) {
        if (st == HX_E_NOMEM && n) snprintf(err, n, "out of memory");
        hx__json_free(root);
        return st;
    }
    *out = root;
    return HX_OK;
}

void hx__json_free(struct hx_json *j)
{
    while (j) {
        struct hx_json *next = j->next;
        hx__json_free(j->child);
        hx_free(j->key);
        hx_free(j->str);
        hx_free(j);
        j = next;
    }
}

const struct hx_json *hx__json_get(const struct hx_json *obj, const char *key)
{
    if (!obj || obj->type != HX_JSON_OBJ) return NULL;
    for (const struct hx_json *e = obj->child; e; e = e->next)
        if (e->key && !strcmp(e->key, key)) return e;
    return NULL;
}
