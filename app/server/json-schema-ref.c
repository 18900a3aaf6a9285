/*
 * json-schema-ref.c — the `$ref` targets of a JSON Schema being compiled to GBNF
 * (json-schema.c): resolving a local reference (a JSON pointer in a URI fragment), the table
 * of targets by address (each compiled once, as one rule), and the fixpoint that checks each
 * target has a finite value, so the grammar engine can always finish a sentence.
 */
#include <stdlib.h>
#include <string.h>

#include "json-schema-impl.h"

/* ---- $ref targets --------------------------------------------------------------------------- */

static size_t hx_js_hash(const void *p, size_t n_slots)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)(x & (n_slots - 1));
}

struct hx_js_ref *hx__js_find(struct hx_js *c, const json_t *t)
{
    if (!c->n_slots) return NULL;
    for (size_t h = hx_js_hash(t, c->n_slots);; h = (h + 1) & (c->n_slots - 1)) {
        if (!c->slots[h]) return NULL;
        if (c->refs[c->slots[h] - 1].target == t) return &c->refs[c->slots[h] - 1];
    }
}

struct hx_js_ref *hx__js_add(struct hx_js *c, const json_t *t)
{
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 16;
        struct hx_js_ref *r = realloc(c->refs, cap * sizeof *r);
        if (!r) return NULL;
        c->refs = r;
        c->cap_refs = cap;
    }
    if ((c->n_refs + 1) * 2 > c->n_slots) { /* keep the table at most half full */
        size_t n = c->n_slots ? c->n_slots * 2 : 64;
        size_t *s = calloc(n, sizeof *s);
        if (!s) return NULL;
        for (size_t i = 0; i < c->n_refs; i++) {
            size_t h = hx_js_hash(c->refs[i].target, n);
            while (s[h]) h = (h + 1) & (n - 1);
            s[h] = i + 1;
        }
        free(c->slots);
        c->slots = s;
        c->n_slots = n;
    }
    struct hx_js_ref *r = &c->refs[c->n_refs];
    memset(r, 0, sizeof *r);
    r->target = t;
    size_t h = hx_js_hash(t, c->n_slots);
    while (c->slots[h]) h = (h + 1) & (c->n_slots - 1);
    c->slots[h] = ++c->n_refs;
    return r;
}

/* The value a local reference ("#", "#/$defs/A", "#/items/0") points at, or NULL. */
json_t *hx__js_resolve(json_t *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    const char *p = ref + 1;
    json_t *v = root;
    if (!*p) return v;
    if (*p != '/') return NULL;
    size_t n = strlen(p);
    char *tok = malloc(n + 1);
    if (!tok) return NULL;
    while (v && *p == '/') {
        p++;
        size_t k = 0;
        for (; *p && *p != '/'; p++) { /* percent-decoding (a URI fragment), then ~1 ~0 */
            char ch = *p;
            if (ch == '%' && p[1] && p[2]) {
                char hex[3] = {p[1], p[2], 0}, *end;
                long x = strtol(hex, &end, 16);
                if (*end || x <= 0) {
                    v = NULL;
                    break;
                }
                ch = (char)x;
                p += 2;
            }
            tok[k++] = ch;
        }
        tok[k] = '\0';
        size_t o = 0;
        for (size_t i = 0; i < k; i++) {
            if (tok[i] == '~' && tok[i + 1] == '1')
                tok[o++] = '/', i++;
            else if (tok[i] == '~' && tok[i + 1] == '0')
                tok[o++] = '~', i++;
            else if (tok[i] == '~')
                v = NULL;
            else
                tok[o++] = tok[i];
        }
        tok[o] = '\0';
        if (!v) break;
        if (json_is_object(v)) {
            v = json_object_getn(v, tok, o);
        } else if (json_is_array(v)) {
            char *end;
            unsigned long long i = strtoull(tok, &end, 10);
            bool digits = o > 0 && !*end && (tok[0] != '0' || o == 1) && tok[0] != '-' &&
                          tok[0] != '+' && tok[0] != ' ';
            v = digits && i < json_array_size(v) ? json_array_get(v, (size_t)i) : NULL;
        } else {
            v = NULL;
        }
    }
    free(tok);
    return v;
}

/* ---- every $ref target has a finite value ------------------------------------------------------ */

static bool hx_js_prod(struct hx_js *c, json_t *s);

static bool hx_js_prod_object(struct hx_js *c, json_t *s)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    size_t i;
    json_t *e;
    json_array_foreach(req, i, e)
    {
        json_t *sub = json_object_getn(props, json_string_value(e), json_string_length(e));
        if (!hx_js_prod(c, sub)) return false;
    }
    return true; /* the optional members can be left out; a free-form object can be {} */
}

static bool hx_js_prod_array(struct hx_js *c, json_t *s)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    if (json_is_array(items)) prefix = items, items = NULL;
    json_t *lo_v = json_object_get(s, "minItems");
    int64_t lo = !lo_v                   ? 0
                 : json_is_integer(lo_v) ? json_integer_value(lo_v)
                                         : (int64_t)json_real_value(lo_v);
    size_t k = prefix ? json_array_size(prefix) : 0;
    for (int64_t j = 0; j < lo; j++) {
        json_t *sub = (size_t)j < k ? json_array_get(prefix, (size_t)j) : items;
        if ((size_t)j >= k && !sub) return true;
        if (!hx_js_prod(c, sub)) return false;
        if ((size_t)j >= k) return true; /* the same schema for every later position */
    }
    return true;
}

static bool hx_js_prod(struct hx_js *c, json_t *s)
{
    if (json_is_true(s)) return true;
    if (!json_is_object(s)) return false;
    json_t *v;
    if ((v = json_object_get(s, "$ref"))) {
        struct hx_js_ref *r = hx__js_find(c, hx__js_resolve(c->root, json_string_value(v)));
        return r && r->prod;
    }
    if ((v = json_object_get(s, "anyOf"))) {
        size_t i;
        json_t *sub;
        json_array_foreach(v, i, sub) if (hx_js_prod(c, sub)) return true;
        return false;
    }
    if (json_object_get(s, "enum") || json_object_get(s, "const")) return true;
    int mask = hx__js_types(c, s);
    if (mask & (HX_JS_NULL | HX_JS_BOOL | HX_JS_STR | HX_JS_NUM | HX_JS_INT)) return true;
    return ((mask & HX_JS_OBJ) && hx_js_prod_object(c, s)) ||
           ((mask & HX_JS_ARR) && hx_js_prod_array(c, s));
}

bool hx__js_check_finite(struct hx_js *c)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < c->n_refs; i++) {
            if (c->refs[i].prod) continue;
            if (hx_js_prod(c, (json_t *)c->refs[i].target)) c->refs[i].prod = changed = true;
        }
    }
    for (size_t i = 0; i < c->n_refs; i++) {
        if (c->refs[i].prod) continue;
        c->path.len = 0;
        hx__srv_buf_puts(&c->path, c->refs[i].path);
        if (!c->refs[i].path[0]) c->path.len = 0;
        return hx__js_fail(c, "no finite JSON value matches this schema (its '$ref' recursion "
                              "never ends)");
    }
    return true;
}
