/*
 * shapes.c — the model shapes the app knows by name, in one table: the sizes `engine mkmodel
 * --shape` writes, and from them the weight GEMMs that `engine bench --kernels --shapes qwen3`
 * times and `engine devices` checks an NPU's kernels against.
 */
#include <string.h>

#include "app.h"

static const struct hx_app_shape hx_app_shapes[] = {
    /* name         embd layer head kv  dim   ff    ctx    vocab   rope  eps */
    {"qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 40960, 151936, 1e6f, 1e-6f},
    {"tiny", 256, 4, 4, 2, 64, 768, 4096, 0, 1e6f, 1e-6f},
};

const struct hx_app_shape *hx_app_shape_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof hx_app_shapes / sizeof hx_app_shapes[0]; i++)
        if (!strcmp(name, hx_app_shapes[i].name)) return &hx_app_shapes[i];
    return NULL;
}

int hx_app_shape_gemms(const struct hx_app_shape *s, struct hx_app_gemm *g)
{
    int64_t nq = s->n_head * s->head_dim, nkv = s->n_head_kv * s->head_dim;
    int n = 0;
    g[n++] = (struct hx_app_gemm){HX_CLASS_QKV, s->n_embd, nq + 2 * nkv};
    g[n++] = (struct hx_app_gemm){HX_CLASS_O, nq, s->n_embd};
    g[n++] = (struct hx_app_gemm){HX_CLASS_GATE_UP, s->n_embd, 2 * s->n_ff};
    g[n++] = (struct hx_app_gemm){HX_CLASS_DOWN, s->n_ff, s->n_embd};
    if (s->n_vocab) g[n++] = (struct hx_app_gemm){HX_CLASS_LM_HEAD, s->n_embd, s->n_vocab};
    return n;
}
