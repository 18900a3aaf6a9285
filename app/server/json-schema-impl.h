/*
 * json-schema-impl.h — what the JSON Schema → GBNF compiler's two files share: the compile
 * state (output, error, JSON pointer of the schema being compiled, the `$ref` targets) and the
 * type masks. json-schema.c compiles schemas to rules; json-schema-ref.c keeps the `$ref`
 * targets (resolution, the table by target, the finite-value check). Private to app/server/.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "server.h"

#define HX_JS_MAX_NEST 128    /* sub-schema and $ref nesting while compiling */
#define HX_JS_MAX_BOUND 10000 /* minLength/maxLength/minItems/maxItems: the engine's limit */
#define HX_JS_MAX_PREFIX 96
#define HX_JS_NAME 160

/* JSON types, as a mask */
enum {
    HX_JS_NULL = 1,
    HX_JS_BOOL = 2,
    HX_JS_OBJ = 4,
    HX_JS_ARR = 8,
    HX_JS_STR = 16,
    HX_JS_NUM = 32,
    HX_JS_INT = 64,
    HX_JS_ALL = HX_JS_NULL | HX_JS_BOOL | HX_JS_OBJ | HX_JS_ARR | HX_JS_STR | HX_JS_NUM,
};

/* shared rules written at the end when used */
enum {
    HX_JS_U_WS = 1,
    HX_JS_U_CHAR = 2,
    HX_JS_U_STR = 4,
    HX_JS_U_INT = 8,
    HX_JS_U_NUM = 16,
    HX_JS_U_VAL = 32, /* any value: val, obj, arr and everything they use */
};

struct hx_js_ref {
    const json_t *target;
    char name[HX_JS_NAME];
    char *path; /* the target's JSON pointer, for messages */
    int depth;  /* c->depth when its compilation began */
    bool done, prod;
};

struct hx_js {
    json_t *root;
    const char *prefix;
    struct hx_srv_buf *out;
    char *err;
    size_t err_cap;
    bool failed;
    unsigned used;
    int n_names;
    int depth; /* "{" and "[" entered on the way from the current $ref target */
    int nest;
    struct hx_srv_buf path; /* JSON pointer of the schema being compiled */
    struct hx_js_ref *refs;
    size_t n_refs, cap_refs;
    size_t *slots; /* open addressing over refs by target pointer: index + 1, 0 empty */
    size_t n_slots;
};

/* Fails the compile with a message at the current JSON pointer; returns false. */
bool hx__js_fail(struct hx_js *c, const char *fmt, ...) HX_PRINTF(2, 3);
/* The JSON types schema s allows, as a mask of HX_JS_*; -1 after a failure. */
int hx__js_types(struct hx_js *c, json_t *s);

/* json-schema-ref.c: the $ref target t's entry, or NULL; a new entry (NULL: out of memory). */
struct hx_js_ref *hx__js_find(struct hx_js *c, const json_t *t);
struct hx_js_ref *hx__js_add(struct hx_js *c, const json_t *t);
/* The value a local reference ("#", "#/$defs/A", "#/items/0") points at, or NULL. */
json_t *hx__js_resolve(json_t *root, const char *ref);
/* Every $ref target compiled has a finite value (else the grammar could never finish one). */
bool hx__js_check_finite(struct hx_js *c);
