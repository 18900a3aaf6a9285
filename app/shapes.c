/*
 * shapes.c — the model shapes the app knows by name, in one table: the sizes `engine mkmodel
 * --shape` writes (and the architecture and weight types the real model has, its defaults), and
 * from them the weight GEMMs that `engine bench --kernels --shapes qwen3` times and `engine
 * devices` checks an NPU's kernels against. Sources of the real shapes: docs/tools.md "mkmodel".
 */
#include <string.h>

#include "app.h"

static const struct hx_app_shape hx_app_shapes[] = {
    /* name        embd layer head kv dim  ff   ctx  vocab  rope eps  arch type embd untied */
    {"qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 40960, 151936, 1e6f, 1e-6f, "qwen3", NULL, NULL,
     false},
    {"tiny", 256, 4, 4, 2, 64, 768, 4096, 0, 1e6f, 1e-6f, NULL, NULL, NULL, false},
    /* microsoft/bitnet-b1.58-2B-4T: published as bitnet.cpp's I2_S with an F16 embedding */
    {"bitnet-2b4t", 2560, 30, 20, 5, 128, 6912, 4096, 128256, 5e5f, 1e-5f, "bitnet-b1.58", "I2_S",
     "F16", false},
    /* prism-ml Bonsai-1.7B: Qwen3-1.7B in Q1_0, the embedding (which is also the LM head) too */
    {"bonsai-1.7b", 2048, 28, 16, 8, 128, 6144, 32768, 151936, 1e6f, 1e-6f, "qwen3", "Q1_0",
     "Q1_0", false},
    /* Qwen/Qwen3-8B: the shape of the policy matrix's model that does not fit a capped GPU */
    {"qwen3-8b", 4096, 36, 32, 8, 128, 12288, 40960, 151936, 1e6f, 1e-6f, "qwen3", NULL, NULL,
     true},
};

const char *hx_app_shape_names(void)
{
    return "qwen3-0.6b, tiny, bitnet-2b4t, bonsai-1.7b, qwen3-8b";
}

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
