/*
 * cmd-inspect.c — `engine inspect FILE [--all]`: a GGUF file's header, every metadata key
 * with its type and value (arrays summarized to their first elements unless --all), and the
 * tensor table. A malformed file is a clear error naming the problem, exit 1.
 */
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "hx-internal.h"
#include "hx.h"

static void hx_inspect_str(struct hx_gguf_str s, size_t max)
{
    putchar('"');
    for (uint64_t i = 0; i < s.len && i < max; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20) printf("\\x%02x", c);
        else putchar(c);
    }
    if (s.len > max) printf("...");
    putchar('"');
}

static void hx_inspect_scalar(const struct hx_gguf_value *v)
{
    switch (v->type) {
    case HX_GGUF_UINT8: case HX_GGUF_UINT16: case HX_GGUF_UINT32: case HX_GGUF_UINT64:
        printf("%llu", (unsigned long long)v->v.u64); break;
    case HX_GGUF_INT8: case HX_GGUF_INT16: case HX_GGUF_INT32: case HX_GGUF_INT64:
        printf("%lld", (long long)v->v.i64); break;
    case HX_GGUF_FLOAT32: case HX_GGUF_FLOAT64: printf("%g", v->v.f64); break;
    case HX_GGUF_BOOL: printf("%s", v->v.b ? "true" : "false"); break;
    case HX_GGUF_STRING: hx_inspect_str(v->v.str, 200); break;
    default: break;
    }
}

static void hx_inspect_array(struct hx_gguf *g, const struct hx_gguf_arr *a, bool all)
{
    uint64_t show = all ? a->count : (a->count < 8 ? a->count : 5);
    printf("[%llu x %s] [", (unsigned long long)a->count, hx__gguf_type_name(a->elem_type));
    for (uint64_t i = 0; i < show; i++) {
        if (i) printf(", ");
        if (a->elem_type == HX_GGUF_STRING) hx_inspect_str(hx__gguf_arr_str(g, a, i), 60);
        else if (a->elem_type == HX_GGUF_FLOAT32 || a->elem_type == HX_GGUF_FLOAT64) printf("%g", hx__gguf_arr_float(a, i));
        else if (a->elem_type == HX_GGUF_ARRAY) {
            struct hx_gguf_arr sub;
            if (hx__gguf_arr_sub(a, i, &sub) == HX_OK) hx_inspect_array(g, &sub, all);
        } else printf("%lld", (long long)hx__gguf_arr_int(a, i));
    }
    printf("%s]", show < a->count ? ", ..." : "");
}

int hx_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: engine inspect FILE.gguf [--all]\n");
            return 0;
        }
        if (!strcmp(argv[i], "--all")) all = true;
        else if (argv[i][0] == '-') { hx_app_error("inspect", "unknown option '%s'", argv[i]); return 2; }
        else if (!path) path = argv[i];
        else { hx_app_error("inspect", "one file at a time"); return 2; }
    }
    if (!path) { hx_app_error("inspect", "no file given"); return 2; }
    struct hx_gguf *g;
    if (hx__gguf_open(path, false, &g) != HX_OK) {
        hx_app_error("inspect", "%s", hx_last_error());
        return 1;
    }
    printf("file: %s (%zu bytes)\nGGUF version %u, alignment %llu, %llu metadata keys, %llu tensors, data at offset %llu\n\n",
           path, g->size, g->version, (unsigned long long)g->alignment, (unsigned long long)g->n_kv,
           (unsigned long long)g->n_tensors, (unsigned long long)g->data_offset);
    if (g->n_parts > 1)
        printf("split model: %u files; a tensor of another part shows its part (1-based) before "
               "its offset in that file, e.g. 2:4096\n\n", g->n_parts);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hx_gguf_value *v = &g->kv[i].value;
        printf("%-48s %-6s ", g->kv[i].key, hx__gguf_type_name(v->type));
        if (v->type == HX_GGUF_ARRAY) hx_inspect_array(g, &v->v.arr, all);
        else hx_inspect_scalar(v);
        putchar('\n');
    }
    if (g->n_tensors) printf("\n%5s  %-40s %-7s %-28s %12s %12s\n", "#", "tensor", "type", "shape (ne)", "bytes", "offset");
    size_t total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &g->tensors[i];
        char shape[64] = "";
        size_t off = 0;
        for (uint32_t d = 0; d < (t->n_dims ? t->n_dims : 1); d++)
            off += (size_t)snprintf(shape + off, sizeof shape - off, "%s%lld", d ? ", " : "[", (long long)t->ne[d]);
        snprintf(shape + off, sizeof shape - off, "]");
        char where[48];
        if (t->file) snprintf(where, sizeof where, "%u:%llu", t->file + 1, (unsigned long long)t->offset);
        else snprintf(where, sizeof where, "%llu", (unsigned long long)t->offset);
        printf("%5llu  %-40s %-7s %-28s %12zu %12s\n", (unsigned long long)i, t->name,
               hx__ggml_type_name(t->ggml_type), shape, t->nbytes, where);
        total += t->nbytes;
    }
    if (g->n_tensors) printf("\n%llu tensors, %.2f MiB of tensor data\n", (unsigned long long)g->n_tensors, total / 1048576.0);
    hx__gguf_close(g);
    return 0;
}
