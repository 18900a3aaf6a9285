/*
 * json-schema.c — JSON Schema → GBNF (docs/grammar.md) for structured output
 * (`response_format`, and tool parameters): hx__srv_schema_gbnf.
 *
 * The grammar matches a subset of the JSON texts the schema validates (never one it does not):
 * declared properties in declaration order, no undeclared keys when properties are declared,
 * at each place JSON allows whitespace only nothing, a space, or a newline and up to 20 spaces
 * or tabs, numbers of bounded length.
 * Every sub-schema is its own rule; every `$ref` target is compiled once, so recursion is a
 * rule that names itself (after a "{" or "[", which the compiler checks: a `$ref` that comes
 * back to itself without consuming anything would be left recursion). After compiling, a
 * fixpoint over the `$ref` targets checks that each has a finite value, so the grammar engine
 * can always complete a sentence. Keywords outside the supported set are refused by name with
 * their JSON-pointer location; nothing is silently ignored but annotations. The grammar is
 * kept unambiguous where that is cheap (no two adjacent whitespace rules; optional members
 * chosen by their first byte) so that the engine's parse stays small.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json-schema-impl.h"

static const char *const hx_js_annotations[] = {"title",      "description", "default",  "examples",
                                                "$schema",    "$id",         "$comment", "strict",
                                                "deprecated", "readOnly",    "writeOnly"};
static const char *const hx_js_keywords[] = {
    "$defs",    "definitions", "type",       "enum",     "const",
    "$ref",     "anyOf",       "properties", "required", "additionalProperties",
    "items",    "prefixItems", "minItems",   "maxItems", "minLength",
    "maxLength"};

#define HX_JS_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool hx_js_in(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static bool hx_js_annotation(const char *k)
{
    return hx_js_in(k, hx_js_annotations, HX_JS_COUNT(hx_js_annotations)) || !strcmp(k, "$defs") ||
           !strcmp(k, "definitions");
}

/* ---- errors and locations ------------------------------------------------------------------- */

bool hx__js_fail(struct hx_js *c, const char *fmt, ...)
{
    if (c->failed) return false;
    c->failed = true;
    if (!c->err || !c->err_cap) return false;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->err, c->err_cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < c->err_cap) {
        const char *at = c->path.len ? c->path.data : NULL;
        if (at)
            snprintf(c->err + n, c->err_cap - (size_t)n, " (at %s)", at);
        else
            snprintf(c->err + n, c->err_cap - (size_t)n, " (at the schema's root)");
    }
    return false;
}

/* Append "/" + seg (escaped as JSON pointers escape) to the path; returns the length to pop to. */
static size_t hx_js_push(struct hx_js *c, const char *seg)
{
    size_t old = c->path.len;
    hx__srv_buf_puts(&c->path, "/");
    for (const char *p = seg; *p; p++) {
        if (*p == '~')
            hx__srv_buf_puts(&c->path, "~0");
        else if (*p == '/')
            hx__srv_buf_puts(&c->path, "~1");
        else
            hx__srv_buf_append(&c->path, p, 1);
    }
    return old;
}

static size_t hx_js_push_index(struct hx_js *c, size_t i)
{
    char s[24];
    snprintf(s, sizeof s, "%zu", i);
    return hx_js_push(c, s);
}

static void hx_js_pop(struct hx_js *c, size_t old)
{
    if (!c->path.data) return;
    c->path.len = old;
    c->path.data[old] = '\0';
}

/* ---- output --------------------------------------------------------------------------------- */

static void hx_js_new_name(struct hx_js *c, char *name)
{
    snprintf(name, HX_JS_NAME, "%ss%d", c->prefix, c->n_names++);
}

/* Text as a GBNF literal: "..." with the bytes that need it escaped (UTF-8 stays as is). */
static void hx_js_literal(struct hx_srv_buf *b, const char *s, size_t n)
{
    hx__srv_buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"')
            hx__srv_buf_puts(b, "\\\"");
        else if (ch == '\\')
            hx__srv_buf_puts(b, "\\\\");
        else if (ch == '\n')
            hx__srv_buf_puts(b, "\\n");
        else if (ch == '\r')
            hx__srv_buf_puts(b, "\\r");
        else if (ch == '\t')
            hx__srv_buf_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f)
            hx__srv_buf_printf(b, "\\x%02X", ch);
        else
            hx__srv_buf_append(b, s + i, 1);
    }
    hx__srv_buf_puts(b, "\"");
}

/* A JSON value's compact text as a GBNF literal. */
static bool hx_js_value_literal(struct hx_js *c, struct hx_srv_buf *b, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return hx__js_fail(c, "cannot write a value of the schema as JSON");
    hx_js_literal(b, t, strlen(t));
    free(t);
    return true;
}

/* "{lo,hi}" in its shortest form; hi < 0: unbounded. */
static void hx_js_rep(struct hx_srv_buf *b, int64_t lo, int64_t hi)
{
    if (hi < 0) {
        if (lo == 0)
            hx__srv_buf_puts(b, "*");
        else if (lo == 1)
            hx__srv_buf_puts(b, "+");
        else
            hx__srv_buf_printf(b, "{%lld,}", (long long)lo);
    } else if (lo == 0 && hi == 1) {
        hx__srv_buf_puts(b, "?");
    } else if (lo == hi) {
        if (lo != 1) hx__srv_buf_printf(b, "{%lld}", (long long)lo);
    } else {
        hx__srv_buf_printf(b, "{%lld,%lld}", (long long)lo, (long long)hi);
    }
}

static void hx_js_rule(struct hx_js *c, const char *name, const struct hx_srv_buf *body)
{
    hx__srv_buf_printf(c->out, "%s ::= %s\n", name, body->data ? body->data : "\"\"");
}

/* The name of a shared rule, marking it used. */
static const char *hx_js_shared(struct hx_js *c, unsigned use, const char *what, char *buf)
{
    c->used |= use;
    snprintf(buf, HX_JS_NAME, "%s%s", c->prefix, what);
    return buf;
}

static void hx_js_write_shared(struct hx_js *c)
{
    unsigned u = c->used;
    if (u & HX_JS_U_VAL) u |= HX_JS_U_WS | HX_JS_U_STR | HX_JS_U_NUM;
    if (u & HX_JS_U_STR) u |= HX_JS_U_CHAR;
    if (u & HX_JS_U_NUM) u |= HX_JS_U_INT;
    const char *p = c->prefix;
    struct hx_srv_buf *o = c->out;
    /* nothing, a space, or a newline and up to 20 spaces or tabs (indentation) */
    if (u & HX_JS_U_WS) hx__srv_buf_printf(o, "%sws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n", p);
    /* any character but '"', '\' and controls; the escapes; no \u escape of a surrogate, so a
     * string's length in characters is the same whichever way a validator counts it */
    if (u & HX_JS_U_CHAR)
        hx__srv_buf_printf(
            o,
            "%schar ::= [^\\\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" "
            "( [0-9a-cA-C] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
            "[e-fE-F] [0-9a-fA-F]{3} ) )\n",
            p);
    if (u & HX_JS_U_STR) hx__srv_buf_printf(o, "%sstr ::= \"\\\"\" %schar* \"\\\"\"\n", p, p);
    /* at most 16 integer digits, 15 fraction digits, a 2-digit exponent: always finite */
    if (u & HX_JS_U_INT)
        hx__srv_buf_printf(o, "%sint ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n", p);
    if (u & HX_JS_U_NUM)
        hx__srv_buf_printf(o,
                           "%snum ::= %sint ( \".\" [0-9]{1,15} )? ( [eE] ( \"+\" | \"-\" )? "
                           "[0-9]{1,2} )?\n",
                           p, p);
    if (u & HX_JS_U_VAL) {
        hx__srv_buf_printf(o,
                           "%sval ::= %sobj | %sarr | %sstr | %snum | \"true\" | \"false\" | "
                           "\"null\"\n",
                           p, p, p, p, p);
        hx__srv_buf_printf(o,
                           "%sobj ::= \"{\" %sws ( %sstr %sws \":\" %sws %sval ( %sws \",\" %sws "
                           "%sstr %sws \":\" %sws %sval )* %sws )? \"}\"\n",
                           p, p, p, p, p, p, p, p, p, p, p, p, p);
        hx__srv_buf_printf(o,
                           "%sarr ::= \"[\" %sws ( %sval ( %sws \",\" %sws %sval )* %sws )? "
                           "\"]\"\n",
                           p, p, p, p, p, p, p);
    }
}

/* ---- schemas ---------------------------------------------------------------------------------- */

static bool hx_js_schema(struct hx_js *c, json_t *s, char *name);

/* A count keyword (minLength, ...): 1 set, 0 absent, -1 failed. */
static int hx_js_count(struct hx_js *c, json_t *s, const char *kw, int64_t *out)
{
    json_t *v = json_object_get(s, kw);
    if (!v) return 0;
    double d = json_is_integer(v) ? (double)json_integer_value(v)
               : json_is_real(v)  ? json_real_value(v)
                                  : -1;
    if (d > HX_JS_MAX_BOUND) {
        hx__js_fail(c, "'%s' above %d is not supported", kw, HX_JS_MAX_BOUND);
        return -1;
    }
    if (d < 0 || d != (double)(int64_t)d) {
        hx__js_fail(c, "'%s' must be a non-negative integer", kw);
        return -1;
    }
    *out = (int64_t)d;
    return 1;
}

/* The keywords of s other than annotations and those listed: the first one, or NULL. */
static const char *hx_js_other(json_t *s, const char *const *allowed, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (!hx_js_annotation(k) && !hx_js_in(k, allowed, n)) return k;
    }
    return NULL;
}

static int hx_js_type_bit(const char *t)
{
    static const struct {
        const char *name;
        int bit;
    } types[] = {{"null", HX_JS_NULL},  {"boolean", HX_JS_BOOL}, {"object", HX_JS_OBJ},
                 {"array", HX_JS_ARR},  {"string", HX_JS_STR},   {"number", HX_JS_NUM},
                 {"integer", HX_JS_INT}};
    for (size_t i = 0; i < HX_JS_COUNT(types); i++)
        if (!strcmp(t, types[i].name)) return types[i].bit;
    return 0;
}

/* The types s allows: its `type`, or else those its type-specific keywords imply (a subset of
 * what it validates, and what its author meant), or else all. -1 on a bad `type`. */
int hx__js_types(struct hx_js *c, json_t *s)
{
    json_t *t = json_object_get(s, "type");
    int mask = 0;
    if (t) {
        if (json_is_string(t)) {
            mask = hx_js_type_bit(json_string_value(t));
        } else if (json_is_array(t) && json_array_size(t) > 0) {
            size_t i;
            json_t *e;
            json_array_foreach(t, i, e)
            {
                int b = json_is_string(e) ? hx_js_type_bit(json_string_value(e)) : 0;
                if (!b) {
                    mask = 0;
                    break;
                }
                mask |= b;
            }
        }
        if (!mask) {
            hx__js_fail(c, "'type' must be one of null, boolean, object, array, string, number, "
                           "integer, or a non-empty array of them");
            return -1;
        }
    } else {
        static const char *const obj[] = {"properties", "required", "additionalProperties"};
        static const char *const arr[] = {"items", "prefixItems", "minItems", "maxItems"};
        static const char *const str[] = {"minLength", "maxLength"};
        for (size_t i = 0; i < HX_JS_COUNT(obj); i++)
            if (json_object_get(s, obj[i])) mask |= HX_JS_OBJ;
        for (size_t i = 0; i < HX_JS_COUNT(arr); i++)
            if (json_object_get(s, arr[i])) mask |= HX_JS_ARR;
        for (size_t i = 0; i < HX_JS_COUNT(str); i++)
            if (json_object_get(s, str[i])) mask |= HX_JS_STR;
        if (!mask) mask = HX_JS_ALL;
    }
    if ((mask & HX_JS_NUM) && (mask & HX_JS_INT)) mask &= ~HX_JS_INT; /* integers are numbers */
    return mask;
}

static bool hx_js_value_has_type(const json_t *v, int mask)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return mask & HX_JS_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return mask & HX_JS_BOOL;
    case JSON_OBJECT: return mask & HX_JS_OBJ;
    case JSON_ARRAY: return mask & HX_JS_ARR;
    case JSON_STRING: return mask & HX_JS_STR;
    case JSON_INTEGER: return mask & (HX_JS_NUM | HX_JS_INT);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (mask & HX_JS_NUM) || ((mask & HX_JS_INT) && d == (double)(int64_t)d);
    }
    }
    return false;
}

/* An enum value's canonical text (compact, keys sorted: equal exactly when json_equal says so)
 * and its place in the enum. */
struct hx_js_ev {
    char *key;
    size_t i;
};

static int hx_js_ev_cmp(const void *a, const void *b)
{
    const struct hx_js_ev *x = a, *y = b;
    int d = strcmp(x->key, y->key);
    return d ? d : (x->i > y->i) - (x->i < y->i);
}

/* enum / const: the values' compact texts as alternatives, each value once (the first time it
 * occurs). Duplicates are found by sorting the canonical texts, not by comparing every pair:
 * an enum of 100,000 values took 45 s on the loop thread, which then answered nobody. */
static bool hx_js_enum(struct hx_js *c, json_t *s, struct hx_srv_buf *body)
{
    static const char *const allowed[] = {"enum", "const", "type"};
    const char *other = hx_js_other(s, allowed, HX_JS_COUNT(allowed));
    if (other)
        return hx__js_fail(c, "'%s' next to '%s' is not supported", other,
                           json_object_get(s, "enum") ? "enum" : "const");
    json_t *e = json_object_get(s, "enum"), *k = json_object_get(s, "const");
    if (e && (!json_is_array(e) || json_array_size(e) == 0))
        return hx__js_fail(c, "'enum' must be a non-empty array");
    int mask = json_object_get(s, "type") ? hx__js_types(c, s) : HX_JS_ALL | HX_JS_INT;
    if (mask < 0) return false;
    size_t n = e ? json_array_size(e) : 1, m = 0, kept = 0;
    struct hx_js_ev *ev = calloc(n, sizeof *ev);
    bool *drop = calloc(n, sizeof *drop), oom = !ev || !drop;
    for (size_t i = 0; !oom && i < n; i++) {
        json_t *v = e ? json_array_get(e, i) : k;
        if ((e && k && !json_equal(v, k)) || !hx_js_value_has_type(v, mask)) {
            drop[i] = true;
            continue;
        }
        ev[m].i = i;
        ev[m].key = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        oom = ev[m++].key == NULL;
    }
    bool ok = !oom;
    if (ok) qsort(ev, m, sizeof *ev, hx_js_ev_cmp);
    for (size_t j = 1; ok && j < m; j++) drop[ev[j].i] = !strcmp(ev[j].key, ev[j - 1].key);
    for (size_t i = 0; ok && i < n; i++) {
        if (drop[i]) continue;
        if (kept++) hx__srv_buf_puts(body, " | ");
        ok = hx_js_value_literal(c, body, e ? json_array_get(e, i) : k);
    }
    for (size_t j = 0; ev && j < m; j++) free(ev[j].key);
    free(ev);
    free(drop);
    if (oom) return hx__js_fail(c, "out of memory");
    if (!ok) return false;
    if (!kept)
        return hx__js_fail(c, "%s",
                           e && k ? "'enum' and 'const' have no value in common"
                           : e    ? "no value of 'enum' has the 'type' given"
                                  : "the value of 'const' does not have the 'type' given");
    return true;
}

static bool hx_js_anyof(struct hx_js *c, json_t *s, struct hx_srv_buf *body)
{
    static const char *const allowed[] = {"anyOf"};
    const char *other = hx_js_other(s, allowed, 1);
    if (other) return hx__js_fail(c, "'%s' next to 'anyOf' is not supported", other);
    json_t *a = json_object_get(s, "anyOf");
    if (!json_is_array(a) || json_array_size(a) == 0)
        return hx__js_fail(c, "'anyOf' must be a non-empty array of schemas");
    size_t i;
    json_t *sub;
    json_array_foreach(a, i, sub)
    {
        char name[HX_JS_NAME];
        size_t old = hx_js_push(c, "anyOf");
        hx_js_push_index(c, i);
        bool ok = hx_js_schema(c, sub, name);
        hx_js_pop(c, old);
        if (!ok) return false;
        hx__srv_buf_printf(body, "%s%s", i ? " | " : "", name);
    }
    return true;
}

/* The rule of a $ref target: compiled the first time it is met. */
static bool hx_js_ref_rule(struct hx_js *c, json_t *target, const char *pointer, char *name)
{
    struct hx_js_ref *r = hx__js_find(c, target);
    if (r) {
        if (!r->done && r->depth == c->depth)
            return hx__js_fail(c, "'$ref' to '#%s' comes back to it without any value in between",
                               r->path);
        snprintf(name, HX_JS_NAME, "%s", r->name);
        return true;
    }
    r = hx__js_add(c, target);
    char *path = strdup(pointer);
    if (!r || !path) {
        free(path);
        return hx__js_fail(c, "out of memory");
    }
    size_t idx = (size_t)(r - c->refs); /* c->refs may move while the target compiles */
    r->path = path;
    r->depth = c->depth;
    if (c->n_refs == 1)
        snprintf(r->name, HX_JS_NAME, "%sroot", c->prefix);
    else
        hx_js_new_name(c, r->name);
    snprintf(name, HX_JS_NAME, "%s", r->name);
    /* compile it where it is: messages name its own location */
    struct hx_srv_buf saved = c->path;
    c->path = (struct hx_srv_buf){0};
    hx__srv_buf_puts(&c->path, pointer);
    if (!*pointer) c->path.len = 0;
    char inner[HX_JS_NAME];
    bool ok = hx_js_schema(c, target, inner);
    hx__srv_buf_free(&c->path);
    c->path = saved;
    if (!ok) return false;
    c->refs[idx].done = true;
    hx__srv_buf_printf(c->out, "%s ::= %s\n", name, inner);
    return true;
}

static bool hx_js_ref(struct hx_js *c, json_t *s, char *name)
{
    static const char *const allowed[] = {"$ref"};
    const char *other = hx_js_other(s, allowed, 1);
    if (other) return hx__js_fail(c, "'%s' next to '$ref' is not supported", other);
    json_t *ref = json_object_get(s, "$ref");
    if (!json_is_string(ref)) return hx__js_fail(c, "'$ref' must be a string");
    const char *r = json_string_value(ref);
    if (r[0] != '#')
        return hx__js_fail(c,
                           "'$ref' '%s': only local references (\"#\", \"#/$defs/...\") are "
                           "supported",
                           r);
    json_t *target = hx__js_resolve(c->root, r);
    if (!target) return hx__js_fail(c, "'$ref' '%s' does not resolve", r);
    return hx_js_ref_rule(c, target, r + 1, name);
}

static bool hx_js_string(struct hx_js *c, json_t *s, struct hx_srv_buf *body)
{
    int64_t lo = 0, hi = -1;
    if (hx_js_count(c, s, "minLength", &lo) < 0 || hx_js_count(c, s, "maxLength", &hi) < 0)
        return false;
    if (hi >= 0 && lo > hi) return hx__js_fail(c, "'minLength' is greater than 'maxLength'");
    char buf[HX_JS_NAME];
    if (lo == 0 && hi < 0) {
        hx__srv_buf_puts(body, hx_js_shared(c, HX_JS_U_STR, "str", buf));
        return true;
    }
    hx__srv_buf_puts(body, "\"\\\"\"");
    if (hi != 0) {
        hx__srv_buf_printf(body, " %s", hx_js_shared(c, HX_JS_U_CHAR, "char", buf));
        hx_js_rep(body, lo, hi);
    }
    hx__srv_buf_puts(body, " \"\\\"\"");
    return true;
}

struct hx_js_member {
    struct hx_srv_buf kv; /* "\"key\"" ws ":" ws rule */
    bool required;
};

static bool hx_js_members_rules(struct hx_js *c, const char *name, struct hx_js_member *m, size_t n,
                                size_t first_req, const char *ws)
{
    /* t<i>: the members from i on, each after a comma; f<i>: the first member present is at i
     * or later (only up to the first required one) */
    for (size_t i = n - 1; i >= 1; i--) {
        struct hx_srv_buf b = {0};
        if (m[i].required)
            hx__srv_buf_printf(&b, "%s \",\" %s %s", ws, ws, m[i].kv.data);
        else
            hx__srv_buf_printf(&b, "( %s \",\" %s %s )?", ws, ws, m[i].kv.data);
        if (i + 1 < n) hx__srv_buf_printf(&b, " %s-t%zu", name, i + 1);
        hx__srv_buf_printf(c->out, "%s-t%zu ::= %s\n", name, i, b.data);
        hx__srv_buf_free(&b);
    }
    size_t last = first_req < n ? first_req : n - 1;
    for (size_t i = 0; i <= last; i++) {
        hx__srv_buf_printf(c->out, "%s-f%zu ::= %s", name, i, m[i].kv.data);
        if (i + 1 < n) hx__srv_buf_printf(c->out, " %s-t%zu", name, i + 1);
        if (!m[i].required && i + 1 < n) hx__srv_buf_printf(c->out, " | %s-f%zu", name, i + 1);
        hx__srv_buf_puts(c->out, "\n");
    }
    return true;
}

static bool hx_js_object(struct hx_js *c, json_t *s, const char *name, struct hx_srv_buf *body)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    char ws[HX_JS_NAME], buf[HX_JS_NAME];
    hx_js_shared(c, HX_JS_U_WS, "ws", ws);
    if (props && !json_is_object(props)) return hx__js_fail(c, "'properties' must be an object");
    if (req && !json_is_array(req)) return hx__js_fail(c, "'required' must be an array of strings");
    if (add && !json_is_boolean(add) && !json_is_object(add))
        return hx__js_fail(c, "'additionalProperties' must be a schema");
    size_t i;
    json_t *e;
    json_array_foreach(req, i, e)
    {
        if (!json_is_string(e)) return hx__js_fail(c, "'required' must be an array of strings");
        if (!props || !json_object_getn(props, json_string_value(e), json_string_length(e)))
            return hx__js_fail(c, "'required' names '%s', which 'properties' does not declare",
                               json_string_value(e));
    }
    size_t np = props ? json_object_size(props) : 0;
    if (np == 0) { /* free-form: keys are any strings */
        if (json_is_false(add)) {
            hx__srv_buf_printf(body, "\"{\" %s \"}\"", ws);
            return true;
        }
        if (!add || json_is_true(add)) {
            hx__srv_buf_puts(body, hx_js_shared(c, HX_JS_U_VAL, "obj", buf));
            return true;
        }
        char v[HX_JS_NAME], str[HX_JS_NAME];
        hx_js_shared(c, HX_JS_U_STR, "str", str);
        size_t old = hx_js_push(c, "additionalProperties");
        c->depth++;
        bool ok = hx_js_schema(c, add, v);
        c->depth--;
        hx_js_pop(c, old);
        if (!ok) return false;
        hx__srv_buf_printf(body,
                           "\"{\" %s ( %s %s \":\" %s %s ( %s \",\" %s %s %s \":\" %s %s )* %s )? "
                           "\"}\"",
                           ws, str, ws, ws, v, ws, ws, str, ws, ws, v, ws);
        return true;
    }
    /* the required names as a set: looked up once per property (scanning the array for each
     * made 20,000 required properties take 3.8 s on the loop thread) */
    json_t *req_set = json_object();
    struct hx_js_member *m = calloc(np, sizeof *m);
    bool oom = !req_set || !m;
    json_array_foreach(req, i, e) oom = oom || json_object_set(req_set, json_string_value(e), e);
    if (oom) {
        json_decref(req_set);
        free(m);
        return hx__js_fail(c, "out of memory");
    }
    size_t n = 0, first_req = np;
    bool ok = true;
    const char *key;
    json_t *sub;
    json_object_foreach(props, key, sub)
    {
        bool required = json_object_get(req_set, key) != NULL;
        size_t old = hx_js_push(c, "properties");
        hx_js_push(c, key);
        char v[HX_JS_NAME];
        if (json_is_false(sub)) { /* may not be present: never generated */
            if (required) ok = hx__js_fail(c, "a required property has a 'false' schema");
            hx_js_pop(c, old);
            if (!ok) break;
            continue;
        }
        c->depth++;
        ok = hx_js_schema(c, sub, v);
        c->depth--;
        hx_js_pop(c, old);
        if (!ok) break;
        json_t *k = json_string(key);
        char *kt = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
        json_decref(k);
        if (!kt) {
            ok = hx__js_fail(c, "out of memory");
            break;
        }
        hx_js_literal(&m[n].kv, kt, strlen(kt));
        free(kt);
        hx__srv_buf_printf(&m[n].kv, " %s \":\" %s %s", ws, ws, v);
        m[n].required = required;
        if (required && first_req == np) first_req = n;
        n++;
    }
    bool all_required = true;
    for (size_t j = 0; j < n; j++) all_required = all_required && m[j].required;
    if (ok && n == 0) {
        hx__srv_buf_printf(body, "\"{\" %s \"}\"", ws);
    } else if (ok && all_required) { /* members separated by ws "," ws */
        hx__srv_buf_printf(body, "\"{\" %s", ws);
        for (size_t j = 0; j < n; j++) {
            if (j) hx__srv_buf_printf(body, " %s \",\" %s", ws, ws);
            hx__srv_buf_printf(body, " %s", m[j].kv.data);
        }
        hx__srv_buf_printf(body, " %s \"}\"", ws);
    } else if (ok) {
        if (first_req == np) first_req = n;
        ok = hx_js_members_rules(c, name, m, n, first_req, ws);
        if (first_req < n)
            hx__srv_buf_printf(body, "\"{\" %s %s-f0 %s \"}\"", ws, name, ws);
        else
            hx__srv_buf_printf(body, "\"{\" %s ( %s-f0 %s )? \"}\"", ws, name, ws);
    }
    for (size_t j = 0; j < np; j++) hx__srv_buf_free(&m[j].kv);
    free(m);
    json_decref(req_set);
    return ok;
}

/* The elements of an array from position j on (j < hi, or hi < 0), as a GBNF expression. */
static void hx_js_elements(struct hx_srv_buf *b, char (*pre)[HX_JS_NAME], size_t k,
                           const char *items, int64_t lo, int64_t hi, size_t j, const char *ws)
{
    if (j < k) {
        bool opt = j > 0 && (int64_t)j >= lo;
        if (opt) hx__srv_buf_puts(b, "( ");
        if (j) hx__srv_buf_printf(b, "%s \",\" %s ", ws, ws);
        hx__srv_buf_puts(b, pre[j]);
        if (hi < 0 || (int64_t)j + 1 < hi) {
            hx__srv_buf_puts(b, " ");
            hx_js_elements(b, pre, k, items, lo, hi, j + 1, ws);
        }
        if (opt) hx__srv_buf_puts(b, " )?");
        return;
    }
    int64_t rlo = lo > (int64_t)j ? lo - (int64_t)j : 0, rhi = hi < 0 ? -1 : hi - (int64_t)j;
    if (j == 0) { /* the first element has no comma; emptiness is the caller's */
        hx__srv_buf_puts(b, items);
        rlo = rlo > 0 ? rlo - 1 : 0;
        rhi = rhi < 0 ? -1 : rhi - 1;
    }
    if (rhi == 0) return;
    hx__srv_buf_printf(b, "%s( %s \",\" %s %s )", j == 0 ? " " : "", ws, ws, items);
    hx_js_rep(b, rlo, rhi);
}

static bool hx_js_array(struct hx_js *c, json_t *s, struct hx_srv_buf *body)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    int64_t lo = 0, hi = -1;
    if (hx_js_count(c, s, "minItems", &lo) < 0 || hx_js_count(c, s, "maxItems", &hi) < 0)
        return false;
    if (hi >= 0 && lo > hi) return hx__js_fail(c, "'minItems' is greater than 'maxItems'");
    if (prefix && !json_is_array(prefix))
        return hx__js_fail(c, "'prefixItems' must be an array of schemas");
    const char *pkw = "prefixItems";
    if (json_is_array(items)) { /* draft-07's tuple form */
        if (prefix) return hx__js_fail(c, "'items' must be a schema next to 'prefixItems'");
        prefix = items;
        pkw = "items";
        items = NULL;
    }
    if (items && !json_is_boolean(items) && !json_is_object(items))
        return hx__js_fail(c, "'items' must be a schema");
    size_t k = prefix ? json_array_size(prefix) : 0;
    for (size_t j = 0; j < k; j++) /* a `false` position ends the array before it */
        if (json_is_false(json_array_get(prefix, j))) k = j;
    if (k > HX_JS_MAX_BOUND) return hx__js_fail(c, "more than %d '%s'", HX_JS_MAX_BOUND, pkw);
    if (json_is_false(items) || (prefix && k < json_array_size(prefix)))
        hi = hi < 0 || hi > (int64_t)k ? (int64_t)k : hi;
    if (hi >= 0 && lo > hi)
        return hx__js_fail(c, "'minItems' asks for more elements than '%s' allows", pkw);
    char ws[HX_JS_NAME];
    if ((!items || json_is_true(items)) && !prefix && lo == 0 && hi < 0) {
        hx__srv_buf_puts(body, hx_js_shared(c, HX_JS_U_VAL, "arr", ws));
        return true;
    }
    hx_js_shared(c, HX_JS_U_WS, "ws", ws);
    if (hi == 0) {
        hx__srv_buf_printf(body, "\"[\" %s \"]\"", ws);
        return true;
    }
    size_t used_k = hi >= 0 && (int64_t)k > hi ? (size_t)hi : k;
    char(*pre)[HX_JS_NAME] = used_k ? calloc(used_k, HX_JS_NAME) : NULL;
    if (used_k && !pre) return hx__js_fail(c, "out of memory");
    char it[HX_JS_NAME];
    bool ok = true;
    c->depth++;
    for (size_t j = 0; j < used_k && ok; j++) {
        size_t old = hx_js_push(c, pkw);
        hx_js_push_index(c, j);
        ok = hx_js_schema(c, json_array_get(prefix, j), pre[j]);
        hx_js_pop(c, old);
    }
    bool need_items = hi < 0 || hi > (int64_t)used_k;
    if (ok && need_items) {
        if (!items || json_is_true(items)) {
            hx_js_shared(c, HX_JS_U_VAL, "val", it);
        } else {
            size_t old = hx_js_push(c, "items");
            ok = hx_js_schema(c, items, it);
            hx_js_pop(c, old);
        }
    }
    c->depth--;
    if (ok) {
        struct hx_srv_buf a = {0};
        hx_js_elements(&a, pre, used_k, it, lo, hi, 0, ws);
        if (lo == 0)
            hx__srv_buf_printf(body, "\"[\" %s ( %s %s )? \"]\"", ws, a.data, ws);
        else
            hx__srv_buf_printf(body, "\"[\" %s %s %s \"]\"", ws, a.data, ws);
        hx__srv_buf_free(&a);
    }
    free(pre);
    return ok;
}

/* A schema's value by its types: alternatives, one per type. */
static bool hx_js_typed(struct hx_js *c, json_t *s, const char *name, struct hx_srv_buf *body)
{
    int mask = hx__js_types(c, s);
    if (mask < 0) return false;
    char buf[HX_JS_NAME];
    bool any = false;
#define HX_JS_ALT() (any ? hx__srv_buf_puts(body, " | ") : (void)0, any = true)
    if (mask & HX_JS_OBJ) {
        HX_JS_ALT();
        if (!hx_js_object(c, s, name, body)) return false;
    }
    if (mask & HX_JS_ARR) {
        HX_JS_ALT();
        if (!hx_js_array(c, s, body)) return false;
    }
    if (mask & HX_JS_STR) {
        HX_JS_ALT();
        if (!hx_js_string(c, s, body)) return false;
    }
    if (mask & HX_JS_NUM) {
        HX_JS_ALT();
        hx__srv_buf_puts(body, hx_js_shared(c, HX_JS_U_NUM, "num", buf));
    }
    if (mask & HX_JS_INT) {
        HX_JS_ALT();
        hx__srv_buf_puts(body, hx_js_shared(c, HX_JS_U_INT, "int", buf));
    }
    if (mask & HX_JS_BOOL) {
        HX_JS_ALT();
        hx__srv_buf_puts(body, "\"true\" | \"false\"");
    }
    if (mask & HX_JS_NULL) {
        HX_JS_ALT();
        hx__srv_buf_puts(body, "\"null\"");
    }
#undef HX_JS_ALT
    return true;
}

/* Compile s into a rule; its name in name. */
static bool hx_js_schema(struct hx_js *c, json_t *s, char *name)
{
    if (c->failed) return false;
    if (json_is_true(s)) {
        hx_js_shared(c, HX_JS_U_VAL, "val", name);
        return true;
    }
    if (json_is_false(s)) return hx__js_fail(c, "a 'false' schema admits no value");
    if (!json_is_object(s)) return hx__js_fail(c, "a schema must be an object or a boolean");
    if (c->nest >= HX_JS_MAX_NEST)
        return hx__js_fail(c, "the schema nests deeper than %d levels", HX_JS_MAX_NEST);
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (!hx_js_annotation(k) && !hx_js_in(k, hx_js_keywords, HX_JS_COUNT(hx_js_keywords)))
            return hx__js_fail(c, "'%s' is not supported", k);
    }
    if ((v = json_object_get(s, "$defs")) && !json_is_object(v))
        return hx__js_fail(c, "'$defs' must be an object");
    if ((v = json_object_get(s, "definitions")) && !json_is_object(v))
        return hx__js_fail(c, "'definitions' must be an object");
    c->nest++;
    bool ok;
    if (json_object_get(s, "$ref")) {
        ok = hx_js_ref(c, s, name);
    } else {
        hx_js_new_name(c, name);
        struct hx_srv_buf body = {0};
        if (json_object_get(s, "anyOf"))
            ok = hx_js_anyof(c, s, &body);
        else if (json_object_get(s, "enum") || json_object_get(s, "const"))
            ok = hx_js_enum(c, s, &body);
        else
            ok = hx_js_typed(c, s, name, &body);
        if (ok) hx_js_rule(c, name, &body);
        hx__srv_buf_free(&body);
    }
    c->nest--;
    return ok && !c->failed;
}

/* ---- entry ------------------------------------------------------------------------------------- */

bool hx__srv_schema_gbnf(const char *schema, size_t len, const char *prefix, struct hx_srv_buf *out,
                         char *err, size_t err_cap)
{
    struct hx_js c = {.prefix = prefix ? prefix : "", .out = out, .err = err, .err_cap = err_cap};
    if (err && err_cap) err[0] = '\0';
    size_t pl = strlen(c.prefix);
    if (pl > HX_JS_MAX_PREFIX || strspn(c.prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                  "VWXYZ0123456789_-") != pl)
        return hx__js_fail(&c, "the rule prefix must be at most %d of [a-zA-Z0-9_-]",
                           HX_JS_MAX_PREFIX);
    json_error_t jerr;
    c.root = schema ? json_loadb(schema, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr)
                    : json_true();
    if (!c.root)
        return hx__js_fail(&c, "the schema is not valid JSON: %s (line %d, column %d)", jerr.text,
                           jerr.line, jerr.column);
    size_t start = out->len;
    char name[HX_JS_NAME];
    bool ok = hx_js_ref_rule(&c, c.root, "", name) && hx__js_check_finite(&c);
    if (ok) hx_js_write_shared(&c);
    if (ok && out->failed) ok = hx__js_fail(&c, "out of memory");
    if (!ok && out->data) { /* leave out as it was */
        out->len = start;
        out->data[start] = '\0';
    }
    for (size_t i = 0; i < c.n_refs; i++) free(c.refs[i].path);
    free(c.refs);
    free(c.slots);
    hx__srv_buf_free(&c.path);
    json_decref(c.root);
    return ok;
}
