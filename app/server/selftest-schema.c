/*
 * selftest-schema.c — `engine serve --self-test` for structured output: the JSON-Schema
 * compiler (json-schema.c) on schemas it takes and schemas it refuses (the message names the
 * keyword and where it is), `response_format` in requests; and, given a model
 * (`--self-test -m MODEL`), each compiled grammar built with hx_grammar_new for that model's
 * vocabulary, checked to accept JSON texts the schema validates and to refuse ones it does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define HX_SRV_SCHECK(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "self-test FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            (*failures)++;                                                                         \
        }                                                                                          \
    } while (0)

/* Schemas refused, and a piece of the message each must give. */
static const struct {
    const char *schema, *msg;
} hx_srv_bad_schemas[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"pattern\":\"^a\"}}}",
     "'pattern' is not supported (at /properties/name)"},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     "'format' is not supported (at the schema's root)"},
    {"{\"type\":\"number\",\"minimum\":0}", "'minimum' is not supported"},
    {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "'exclusiveMinimum' is not supported"},
    {"{\"type\":\"integer\",\"multipleOf\":2}", "'multipleOf' is not supported"},
    {"{\"type\":\"object\",\"minProperties\":1}", "'minProperties' is not supported"},
    {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems' is not supported"},
    {"{\"not\":{\"type\":\"null\"}}", "'not' is not supported"},
    {"{\"allOf\":[{\"type\":\"null\"}]}", "'allOf' is not supported"},
    {"{\"oneOf\":[{\"type\":\"null\"}]}", "'oneOf' is not supported"},
    {"{\"if\":{},\"then\":{}}", "is not supported"},
    {"{\"type\":\"object\",\"patternProperties\":{\"a\":{}}}",
     "'patternProperties' is not supported"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"string\",\"maxLength\":3,\"pattern\":\"x\"}}}}",
     "'pattern' is not supported (at /properties/a/items)"},
    {"{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\",\"format\":\"uri\"}]}",
     "'format' is not supported (at /anyOf/1)"},
    {"{\"$defs\":{\"A\":{\"type\":\"string\",\"pattern\":\"x\"}},\"$ref\":\"#/$defs/A\"}",
     "'pattern' is not supported (at /$defs/A)"},
    {"false", "a 'false' schema admits no value"},
    {"{\"enum\":[]}", "'enum' must be a non-empty array"},
    {"{\"type\":\"integer\",\"enum\":[1.5,\"a\"]}", "no value of 'enum' has the 'type' given"},
    {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}",
     "'minLength' is greater than 'maxLength'"},
    {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", "'minItems' is greater than 'maxItems'"},
    {"{\"type\":\"array\",\"maxItems\":10001}", "'maxItems' above 10000 is not supported"},
    {"{\"type\":\"string\",\"maxLength\":20000}", "'maxLength' above 10000 is not supported"},
    {"{\"type\":\"string\",\"maxLength\":-1}", "'maxLength' must be a non-negative integer"},
    {"{\"type\":\"string\",\"minLength\":1.5}", "'minLength' must be a non-negative integer"},
    {"{\"$ref\":\"#/$defs/missing\"}", "'$ref' '#/$defs/missing' does not resolve"},
    {"{\"$ref\":\"https://example.invalid/s.json\"}", "only local references"},
    {"{\"$ref\":\"#\"}", "comes back to it without any value"},
    {"{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", "comes back to it without any value"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}},\"required\":[\"a\"]}",
     "no finite JSON value matches"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
     "'required' names 'b', which 'properties' does not declare"},
    {"{\"type\":\"object\",\"required\":[\"b\"]}", "'required' names 'b'"},
    {"{\"type\":\"strin\"}", "'type' must be one of"},
    {"{\"type\":[]}", "'type' must be one of"},
    {"{\"anyOf\":[]}", "'anyOf' must be a non-empty array"},
    {"{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1}]}",
     "'type' next to 'anyOf' is not supported"},
    {"{\"$ref\":\"#/$defs/A\",\"type\":\"null\",\"$defs\":{\"A\":{}}}",
     "'type' next to '$ref' is not supported"},
    {"{\"enum\":[1],\"minimum\":0}", "'minimum' is not supported"},
    {"{\"enum\":[\"a\"],\"maxLength\":3}", "'maxLength' next to 'enum' is not supported"},
    {"{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}",
     "a required property has a 'false' schema"},
    {"{\"type\":\"array\",\"items\":false,\"minItems\":1}", "'minItems' asks for more elements"},
    {"[1]", "a schema must be an object or a boolean"},
    {"{\"type\":", "the schema is not valid JSON"},
    {"{\"$defs\":[],\"type\":\"null\"}", "'$defs' must be an object"},
};

/* Schemas taken, with JSON texts they validate (good) and do not (bad, or not JSON at all). */
struct hx_srv_schema_case {
    const char *schema;
    const char *good[6], *bad[8];
};
static const struct hx_srv_schema_case hx_srv_schema_cases[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":8},\"age\":{\"type\":\"integer\"},\"email\":{\"type\":\"string\"}},"
     "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\":\"Al\",\"age\":30}",
      "{ \"name\" : \"Al\" ,\n \"age\" : -5 , \"email\" : \"a@b\" }",
      "{\"name\":\"\\u00e9\\n\\\"\",\"age\":0}", "{\"name\":\"日本語\",\"age\":7}"},
     {"{\"name\":\"\",\"age\":1}", "{\"name\":\"x\"}", "{\"name\":\"x\",\"age\":1.5}",
      "{\"name\":\"x\",\"age\":01}", "{\"name\":\"x\",\"age\":1,\"extra\":1}",
      "{\"name\":\"123456789\",\"age\":1}", "{\"name\":\"a\x01\",\"age\":1}", "{\"age\":1}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
     {"[1]", "[1.5,-2e10,0.0]", "[ 0 , 1E-2 ]"},
     {"[]", "[1,2,3,4]", "[1,]", "[\"1\"]", "[.5]", "[1.]", "[+1]", "[1e]"}},
    {"{\"enum\":[\"a\",1,null,{\"k\":[true]}]}",
     {"\"a\"", "1", "null", "{\"k\":[true]}"},
     {"\"b\"", "10", "true", "{\"k\":[false]}", "\"a"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
     "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":"
     "[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1}", "{\"v\":1,\"kids\":[]}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}"},
     {"{\"kids\":[]}", "{\"v\":1,\"kids\":[{}]}", "{\"v\":1,\"kids\":[{\"v\":\"x\"}]}"}},
    {"{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":"
     "\"null\"}]}},\"required\":[\"next\"]}",
     {"{\"next\":null}", "{\"next\":{\"next\":{\"next\":null}}}"},
     {"{}", "{\"next\":{}}", "{\"next\":1}"}},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\"}]}",
     {"\"ab\"", "12", "-3"},
     {"\"abc\"", "1.5", "null"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1", "[]", "nul"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"boolean\"}],"
     "\"items\":false}",
     {"[\"a\",true]", "[\"a\"]", "[]"},
     {"[\"a\",true,1]", "[true]", "[\"a\",1]"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{}", "{\"a\":1,\"b\":2}"},
     {"{\"a\":\"x\"}", "{\"a\":1,}", "[]"}},
    {"{}",
     {"{\"a\":[1,{\"b\":null}],\"c\":\"\\u00e9\"}", "[]", "\"s\"", "-0.5e+3", "true"},
     {"{", "[1,]", "tru", "{\"a\"}", "'x'", "01"}},
    {"{\"type\":\"object\"}", {"{\"a\":[1,{\"b\":null}]}", "{}"}, {"[1]", "\"x\"", "null"}},
    {"{\"type\":\"string\"}",
     {"\"a\\\"b\\\\\\u00e9\\n\\/\"", "\"日本\"", "\"\""},
     {"\"\\x\"", "\"a\tb\"", "\"\\u12\"", "\"a"}},
    {"{\"type\":\"array\"}", /* whitespace is bounded: "", " ", or "\n" and 20 of [ \t] */
     {"[\n                    ]", "[ 1 ,\n\t2 ]", "[\n  [\n    1\n  ]\n]", "[]"},
     {"[\n                     ]", "[  ]", "[\n\n]", "[\t1]"}},
    {"{\"type\":\"number\"}",
     {"0", "-0.5", "1e5", "1E-2", "123.25"},
     {"01", ".5", "1.", "+1", "1e", "--1", "NaN"}},
    {"{\"type\":\"integer\"}", {"0", "-7", "1234567890"}, {"1.0", "1e3", "00", "-"}},
    {"{\"type\":\"boolean\"}", {"true", "false"}, {"True", "1", "null"}},
    {"{\"const\":{\"a\":[1,\"x\"]}}", {"{\"a\":[1,\"x\"]}"}, {"{\"a\":[1]}", "null"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"abc\"", "\"é日\"", "\"\\n\\t\""},
     {"\"a\"", "\"abcd\"", "\"\""}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"null\"},"
     "\"c\":{\"type\":\"null\"}},\"required\":[\"b\"]}",
     {"{\"b\":null}", "{\"a\":null,\"b\":null}", "{\"b\":null,\"c\":null}",
      "{\"a\":null,\"b\":null,\"c\":null}"},
     {"{}", "{\"a\":null}", "{\"c\":null}", "{\"a\":null,\"c\":null}", "{\"b\":null,}"}},
    {"{\"definitions\":{\"x\":{\"type\":\"boolean\"}},\"type\":\"array\",\"items\":{\"$ref\":"
     "\"#/definitions/x\"},\"maxItems\":2}",
     {"[]", "[true,false]"},
     {"[true,false,true]", "[1]"}},
    {"true", {"null", "{\"x\":[]}"}, {"", "x"}},
};

static void hx_srv_schema_compile_tests(int *failures)
{
    char err[512];
    for (size_t i = 0; i < sizeof hx_srv_bad_schemas / sizeof hx_srv_bad_schemas[0]; i++) {
        struct hx_srv_buf out = {0};
        const char *s = hx_srv_bad_schemas[i].schema;
        bool ok = hx__srv_schema_gbnf(s, strlen(s), "", &out, err, sizeof err);
        bool named = !ok && strstr(err, hx_srv_bad_schemas[i].msg);
        if (!named) fprintf(stderr, "self-test: schema %s: %s\n", s, ok ? "accepted" : err);
        HX_SRV_SCHECK(named);
        HX_SRV_SCHECK(!out.len); /* nothing written on failure */
        hx__srv_buf_free(&out);
    }
    for (size_t i = 0; i < sizeof hx_srv_schema_cases / sizeof hx_srv_schema_cases[0]; i++) {
        const char *s = hx_srv_schema_cases[i].schema;
        struct hx_srv_buf a = {0}, b = {0};
        bool ok = hx__srv_schema_gbnf(s, strlen(s), "", &a, err, sizeof err);
        if (!ok) fprintf(stderr, "self-test: schema %s refused: %s\n", s, err);
        HX_SRV_SCHECK(ok && a.data && strstr(a.data, "root ::= "));
        /* with a prefix: every rule is the prefix's, and the rest is the same text */
        ok = hx__srv_schema_gbnf(s, strlen(s), "fn_x-", &b, err, sizeof err);
        HX_SRV_SCHECK(ok && b.data && strstr(b.data, "fn_x-root ::= "));
        for (const char *line = b.data; ok && line && *line;) {
            HX_SRV_SCHECK(!strncmp(line, "fn_x-", 5));
            line = strchr(line, '\n');
            line = line ? line + 1 : NULL;
        }
        hx__srv_buf_free(&a);
        hx__srv_buf_free(&b);
    }
    /* NULL: any JSON value; two schemas appended into one grammar under their prefixes */
    struct hx_srv_buf g = {0};
    HX_SRV_SCHECK(hx__srv_schema_gbnf(NULL, 0, "", &g, err, sizeof err) &&
                  strstr(g.data, "root ::= val\n"));
    size_t n0 = g.len;
    HX_SRV_SCHECK(!hx__srv_schema_gbnf("{\"not\":{}}", 10, "a-", &g, err, sizeof err));
    HX_SRV_SCHECK(g.len == n0); /* a refused schema leaves what was there */
    HX_SRV_SCHECK(!hx__srv_schema_gbnf("{}", 2, "bad prefix", &g, err, sizeof err));
    hx__srv_buf_free(&g);
}

/* response_format in a request: which grammar (or which 400) it gives. */
static void hx_srv_response_format_tests(int *failures)
{
    static const struct {
        const char *rf;
        int want; /* 0: no grammar, 1: a grammar, -1: 400 with param response_format */
        const char *msg;
    } cases[] = {
        {"{\"type\":\"text\"}", 0, NULL},
        {"null", 0, NULL},
        {"{\"type\":\"json_object\"}", 1, NULL},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":"
         "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"],"
         "\"additionalProperties\":false}}}",
         1, NULL},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\"}}", 1, NULL},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"object\","
         "\"properties\":{\"name\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}",
         -1,
         "response_format.json_schema.schema: 'pattern' is not supported (at /properties/name)"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"nope\"}}}", -1,
         "'type' must be one of"},
        {"{\"type\":\"json_schema\"}", -1, "response_format.json_schema must be an object"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":1,\"schema\":{}}}", -1,
         "json_schema.name must be a string"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"strict\":\"yes\",\"schema\":{}}}", -1,
         "json_schema.strict must be a boolean"},
        {"{\"type\":\"xml\"}", -1, "response_format.type must be"},
        {"{}", -1, "response_format.type must be"},
        {"\"json_object\"", -1, "'response_format' must be an object"},
        {"{\"type\":\"json_object\",\"schema\":{\"type\":\"array\",\"uniqueItems\":true}}", -1,
         "response_format.schema: 'uniqueItems' is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int kind = 0; kind < 2; kind++) {
            char body[1024], msg[512];
            snprintf(body, sizeof body,
                     kind ? "{\"prompt\":\"x\",\"response_format\":%s}"
                          : "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                            "\"response_format\":%s}",
                     cases[i].rf);
            struct hx_srv_gen_req r;
            const char *param = NULL;
            bool ok = hx__srv_gen_req_parse(kind ? HX_SRV_COMPLETION : HX_SRV_CHAT, body,
                                            strlen(body), &r, &param, msg, sizeof msg);
            if (cases[i].want >= 0) {
                if (!ok) fprintf(stderr, "self-test: %s: %s\n", body, msg);
                HX_SRV_SCHECK(ok);
                if (ok) HX_SRV_SCHECK((r.grammar != NULL) == (cases[i].want == 1));
                if (ok) hx__srv_gen_req_free(&r);
            } else {
                HX_SRV_SCHECK(!ok && param && !strcmp(param, "response_format"));
                if (!ok && !strstr(msg, cases[i].msg))
                    fprintf(stderr, "self-test: %s: message '%s'\n", body, msg);
                HX_SRV_SCHECK(!ok && strstr(msg, cases[i].msg));
            }
        }
    }
}

/* Each case's grammar built for the model: good texts accepted whole, bad ones refused (a byte
 * refused, or the text not a whole sentence). */
static void hx_srv_schema_model_tests(const char *model_path, int *failures)
{
    struct hx_model *model = NULL;
    struct hx_model_params mp = {.struct_size = sizeof mp};
    if (hx_model_load(model_path, &mp, &model) != HX_OK) {
        fprintf(stderr, "self-test FAIL: cannot load %s: %s\n", model_path, hx_last_error());
        (*failures)++;
        return;
    }
    int checked = 0;
    for (size_t i = 0; i < sizeof hx_srv_schema_cases / sizeof hx_srv_schema_cases[0]; i++) {
        const struct hx_srv_schema_case *k = &hx_srv_schema_cases[i];
        struct hx_srv_buf gb = {0};
        char err[512];
        if (!hx__srv_schema_gbnf(k->schema, strlen(k->schema), "", &gb, err, sizeof err)) {
            hx__srv_buf_free(&gb);
            continue; /* reported by the compile tests */
        }
        struct hx_grammar *g = NULL;
        int st = hx_grammar_new(model, gb.data, gb.len, &g);
        if (st != HX_OK)
            fprintf(stderr, "self-test: grammar of %s refused: %s\n%s", k->schema, hx_last_error(),
                    gb.data);
        HX_SRV_SCHECK(st == HX_OK);
        for (int good = 1; g && good >= 0; good--) {
            const char *const *texts = good ? k->good : k->bad;
            size_t n = good ? 6 : 8;
            for (size_t t = 0; t < n && texts[t]; t++) {
                hx_grammar_reset(g);
                bool whole = hx_grammar_accept_text(g, texts[t], strlen(texts[t])) == HX_OK &&
                             hx_grammar_can_end(g);
                if (whole != (good == 1))
                    fprintf(stderr, "self-test FAIL: schema %s %s the %s text %s\n", k->schema,
                            whole ? "accepts" : "refuses", good ? "valid" : "invalid", texts[t]);
                HX_SRV_SCHECK(whole == (good == 1));
                checked++;
            }
        }
        hx_grammar_free(g);
        hx__srv_buf_free(&gb);
    }
    fprintf(stderr,
            "engine serve --self-test: %d JSON texts checked against their schemas' "
            "grammars on %s\n",
            checked, model_path);
    hx_model_free(model);
}

void hx__srv_selftest_schema(const char *model_path, int *failures)
{
    hx_srv_schema_compile_tests(failures);
    hx_srv_response_format_tests(failures);
    if (model_path) hx_srv_schema_model_tests(model_path, failures);
}
