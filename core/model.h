/*
 * model.h — a loaded model (core-private): architecture, hyperparameters, weights as views of
 * the mmapped GGUF (the fused QKV and gate|up matrices too: views of their parts), tokenizer.
 * Read-only after hx_model_load returns, but for the host copy of a fused weight of parts,
 * made on a device's first request (hx_weight_host) and freed with the model.
 */
#pragma once

#include "gguf.h"
#include "hx-impl.h"

struct hx_vocab;

enum hx_arch {
    HX_ARCH_LLAMA,
    HX_ARCH_QWEN3,
    HX_ARCH_BITNET,
    HX_ARCH_COUNT
};

struct hx_hparams {
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train, n_rot;
    int64_t n_q;          /* n_head * head_dim */
    int64_t n_kv;         /* n_head_kv * head_dim */
    float eps;
    float rope_base;
    float rope_freq_scale;
    enum hx_rope_mode rope_mode;
    float attn_scale;     /* 1/sqrt(head_dim) unless the file says otherwise */
    bool relu2;           /* BitNet b1.58: relu² GLU instead of SwiGLU */
    bool qk_norm;         /* Qwen3 per-head QK norm */
    bool sub_norms;       /* BitNet attn_sub_norm / ffn_sub_norm */
};

struct hx_layer {
    struct hx_weight attn_norm, ffn_norm;
    struct hx_weight q_norm, k_norm;               /* qwen3 */
    struct hx_weight attn_sub_norm, ffn_sub_norm;  /* bitnet */
    struct hx_weight wq, wk, wv, wo, wgate, wup, wdown;
    struct hx_weight wqkv;   /* fused rows q|k|v when the three share a type and scale */
    struct hx_weight wgu;    /* fused rows gate|up likewise */
    bool fused_qkv, fused_gu;
};

struct hx_model {
    struct hx_gguf *gguf;
    struct hx_vocab *vocab;
    enum hx_arch arch;
    char arch_name[64];
    char name[128];
    struct hx_hparams hp;
    struct hx_weight tok_embd, output, output_norm, rope_freqs;
    bool has_rope_freqs, tied_output;
    struct hx_layer *layers;
    void **owned;            /* heap blocks made at load (fused weights' names, converted norms) */
    int64_t n_owned;
    int64_t n_params;
    size_t weight_bytes;
    char weight_types[256];
    /* the vocabulary's token bytes and trie for grammars (grammar.c): built on first use under
     * a lock, the one thing written after load */
    struct hx__tok_table *tok_table;
};
void hx__tok_table_free(struct hx__tok_table *t);

const struct hx_vocab *hx__model_vocab(const struct hx_model *m);
const char *hx__arch_name(enum hx_arch a);
