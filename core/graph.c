/*
 * graph.c — build the op graph for one batch (formats.md §4.4–4.6): embedding, then per layer
 * norm → QKV → [QK norm] → RoPE → attention → [sub-norm] → O → add → norm → gate|up → GLU →
 * [sub-norm] → down → add, then the final norm and LM head on the rows that want logits.
 * Weights are addressed by stable ids (hx__model_weight) so each device prepares each once.
 */
#include <string.h>

#include "graph.h"

static const char *const hx__slot_names[] = {"x",   "h",   "qkv", "q",    "k",  "att",
                                             "tmp", "gu",  "act", "act2", "xl", "logits"};
_Static_assert(HX_ARRAY_LEN(hx__slot_names) == HX_SLOT_COUNT, "slot names");

const char *hx__slot_name(enum hx_slot s)
{
    return (unsigned)s < HX_SLOT_COUNT ? hx__slot_names[s] : "?";
}

/* ---- weight ids --------------------------------------------------------------------------- */

enum { HX__W_EMBD, HX__W_OUTPUT, HX__W_OUTPUT_NORM, HX__W_ROPE_FREQS, HX__W_GLOBAL };
enum {
    HX__LW_ATTN_NORM, HX__LW_FFN_NORM, HX__LW_Q_NORM, HX__LW_K_NORM, HX__LW_ATTN_SUB,
    HX__LW_FFN_SUB, HX__LW_Q, HX__LW_K, HX__LW_V, HX__LW_O, HX__LW_GATE, HX__LW_UP,
    HX__LW_DOWN, HX__LW_QKV, HX__LW_GU, HX__LW_COUNT
};

int64_t hx__model_weight_count(const struct hx_model *m)
{
    return HX__W_GLOBAL + m->hp.n_layer * HX__LW_COUNT;
}

const struct hx_weight *hx__model_weight(const struct hx_model *m, int64_t id)
{
    const struct hx_weight *w = NULL;
    if (id < HX__W_GLOBAL) {
        const struct hx_weight *g[] = {&m->tok_embd, &m->output, &m->output_norm, &m->rope_freqs};
        w = (id >= 0) ? g[id] : NULL;
        if (id == HX__W_OUTPUT && m->tied_output) w = NULL; /* same as the embedding */
    } else if (id < hx__model_weight_count(m)) {
        const struct hx_layer *ly = &m->layers[(id - HX__W_GLOBAL) / HX__LW_COUNT];
        const struct hx_weight *l[] = {&ly->attn_norm, &ly->ffn_norm, &ly->q_norm,
                                       &ly->k_norm, &ly->attn_sub_norm, &ly->ffn_sub_norm,
                                       &ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->wgate,
                                       &ly->wup, &ly->wdown, &ly->wqkv, &ly->wgu};
        _Static_assert(HX_ARRAY_LEN(l) == HX__LW_COUNT, "layer weights");
        w = l[(id - HX__W_GLOBAL) % HX__LW_COUNT];
    }
    return (w && (w->data || w->n_parts)) ? w : NULL;
}

static int32_t hx__lw(int64_t il, int k)
{
    return (int32_t)(HX__W_GLOBAL + il * HX__LW_COUNT + k);
}

/* ---- slots -------------------------------------------------------------------------------- */

void hx__graph_slot_widths(const struct hx_model *m, int64_t *w)
{
    const struct hx_hparams *hp = &m->hp;
    w[HX_SLOT_X] = hp->n_embd;
    w[HX_SLOT_H] = HX_MAX(hp->n_embd, hp->n_q);
    w[HX_SLOT_QKV] = hp->n_q + 2 * hp->n_kv;
    w[HX_SLOT_Q] = hp->n_q;
    w[HX_SLOT_K] = hp->n_kv;
    w[HX_SLOT_ATT] = hp->n_q;
    w[HX_SLOT_TMP] = hp->n_embd;
    w[HX_SLOT_GU] = 2 * hp->n_ff;
    w[HX_SLOT_ACT] = hp->n_ff;
    w[HX_SLOT_ACT2] = hp->n_ff;
    w[HX_SLOT_XL] = hp->n_embd;
    w[HX_SLOT_LOGITS] = hp->n_vocab;
}

/* ---- building ------------------------------------------------------------------------------ */

struct hx_gb {
    struct hx_graph *g;
    const struct hx_model *m;
    int64_t n;       /* batch rows */
    int st;
};

static struct hx_node_ref hx__ref(enum hx_slot s, int64_t col, int64_t n_cols, int64_t row,
                                  int64_t n_rows)
{
    return (struct hx_node_ref){.slot = (int8_t)s, .col = col, .n_cols = n_cols, .row = row,
                                .n_rows = n_rows};
}

/* Whole-width view of a slot over the batch rows. */
static struct hx_node_ref hx__all(struct hx_gb *b, enum hx_slot s, int64_t n_cols)
{
    return hx__ref(s, 0, n_cols, 0, b->n);
}

static struct hx_node *hx__push(struct hx_gb *b, enum hx_op_kind kind, enum hx_op_class cls,
                                int32_t layer)
{
    struct hx_graph *g = b->g;
    if (b->st) return NULL;
    if (g->n_nodes == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 256;
        struct hx_node *nn = hx__realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            b->st = HX_E_NOMEM;
            return NULL;
        }
        g->nodes = nn, g->cap = cap;
    }
    struct hx_node *nd = &g->nodes[g->n_nodes++];
    memset(nd, 0, sizeof *nd);
    nd->desc.kind = kind;
    nd->desc.cls = cls;
    nd->desc.layer = layer;
    nd->desc.wtype = HX_DTYPE_F32;
    nd->weight_id = nd->aux_id = -1;
    for (int i = 0; i < 3; i++) nd->src[i].slot = -1;
    return nd;
}

static void hx__set_weight(struct hx_gb *b, struct hx_node *nd, int32_t id)
{
    if (id == HX__W_OUTPUT && b->m->tied_output) id = HX__W_EMBD;
    nd->weight_id = id;
    nd->weight = hx__model_weight(b->m, id);
    if (nd->weight) nd->desc.wtype = nd->weight->type;
}

static void hx__norm(struct hx_gb *b, enum hx_op_class cls, int32_t layer, int32_t wid,
                     struct hx_node_ref src, struct hx_node_ref dst, int64_t group)
{
    struct hx_node *nd = hx__push(b, HX_OP_RMS_NORM, cls, layer);
    if (!nd) return;
    nd->src[0] = src, nd->dst = dst;
    hx__set_weight(b, nd, wid);
    nd->desc.n_rows = src.n_rows;
    nd->desc.n_in = nd->desc.n_out = src.n_cols;
    nd->desc.p.norm.eps = b->m->hp.eps;
    nd->desc.p.norm.group = group;
}

static void hx__matmul(struct hx_gb *b, enum hx_op_class cls, int32_t layer, int32_t wid,
                       struct hx_node_ref src, struct hx_node_ref dst)
{
    struct hx_node *nd = hx__push(b, HX_OP_MATMUL, cls, layer);
    if (!nd) return;
    nd->src[0] = src, nd->dst = dst;
    hx__set_weight(b, nd, wid);
    nd->desc.n_rows = src.n_rows;
    nd->desc.n_in = src.n_cols;
    nd->desc.n_out = dst.n_cols;
}

static void hx__binary(struct hx_gb *b, enum hx_op_kind kind, enum hx_op_class cls,
                       int32_t layer, struct hx_node_ref a, struct hx_node_ref c,
                       struct hx_node_ref dst)
{
    struct hx_node *nd = hx__push(b, kind, cls, layer);
    if (!nd) return;
    nd->src[0] = a, nd->src[1] = c, nd->dst = dst;
    nd->desc.n_rows = a.n_rows;
    nd->desc.n_in = nd->desc.n_out = a.n_cols;
}

static void hx__rope(struct hx_gb *b, int32_t layer, struct hx_node_ref t, int64_t n_head)
{
    const struct hx_hparams *hp = &b->m->hp;
    struct hx_node *nd = hx__push(b, HX_OP_ROPE, HX_CLASS_ROPE, layer);
    if (!nd) return;
    nd->src[0] = t, nd->dst = t;
    nd->desc.n_rows = t.n_rows;
    nd->desc.n_in = nd->desc.n_out = t.n_cols;
    nd->desc.p.rope.n_head = (int32_t)n_head;
    nd->desc.p.rope.head_dim = (int32_t)hp->head_dim;
    nd->desc.p.rope.n_rot = (int32_t)hp->n_rot;
    nd->desc.p.rope.base = hp->rope_base;
    nd->desc.p.rope.freq_scale = hp->rope_freq_scale;
    nd->desc.p.rope.mode = hp->rope_mode;
    if (b->m->has_rope_freqs) {
        nd->aux_id = HX__W_ROPE_FREQS;
        nd->aux = &b->m->rope_freqs;
    }
}

static void hx__attention(struct hx_gb *b, int64_t il, int64_t n_ctx, int32_t n_seq)
{
    const struct hx_hparams *hp = &b->m->hp;
    struct hx_node_ref q = hx__ref(HX_SLOT_QKV, 0, hp->n_q, 0, b->n);
    struct hx_node_ref k = hx__ref(HX_SLOT_QKV, hp->n_q, hp->n_kv, 0, b->n);
    struct hx_node_ref v = hx__ref(HX_SLOT_QKV, hp->n_q + hp->n_kv, hp->n_kv, 0, b->n);
    if (hp->qk_norm) {
        struct hx_node_ref qn = hx__all(b, HX_SLOT_Q, hp->n_q), kn = hx__all(b, HX_SLOT_K, hp->n_kv);
        hx__norm(b, HX_CLASS_NORM, (int32_t)il, hx__lw(il, HX__LW_Q_NORM), q, qn, hp->head_dim);
        hx__norm(b, HX_CLASS_NORM, (int32_t)il, hx__lw(il, HX__LW_K_NORM), k, kn, hp->head_dim);
        q = qn, k = kn;
    }
    hx__rope(b, (int32_t)il, q, hp->n_head);
    hx__rope(b, (int32_t)il, k, hp->n_head_kv);
    struct hx_node *nd = hx__push(b, HX_OP_ATTN, HX_CLASS_ATTN, (int32_t)il);
    if (!nd) return;
    nd->src[0] = q, nd->src[1] = k, nd->src[2] = v;
    nd->dst = hx__all(b, HX_SLOT_ATT, hp->n_q);
    nd->desc.n_rows = b->n;
    nd->desc.n_in = hp->n_q;
    nd->desc.n_out = hp->n_q;
    nd->desc.p.attn.n_head = (int32_t)hp->n_head;
    nd->desc.p.attn.n_head_kv = (int32_t)hp->n_head_kv;
    nd->desc.p.attn.head_dim = (int32_t)hp->head_dim;
    nd->desc.p.attn.scale = hp->attn_scale;
    nd->desc.p.attn.n_ctx = n_ctx;
    nd->desc.p.attn.n_seq = n_seq;
}

static void hx__layer(struct hx_gb *b, int64_t il, int64_t n_ctx, int32_t n_seq)
{
    const struct hx_model *m = b->m;
    const struct hx_hparams *hp = &m->hp;
    const struct hx_layer *ly = &m->layers[il];
    int32_t L = (int32_t)il;
    struct hx_node_ref x = hx__all(b, HX_SLOT_X, hp->n_embd);
    struct hx_node_ref h = hx__all(b, HX_SLOT_H, hp->n_embd);
    struct hx_node_ref tmp = hx__all(b, HX_SLOT_TMP, hp->n_embd);

    hx__norm(b, HX_CLASS_NORM, L, hx__lw(il, HX__LW_ATTN_NORM), x, h, hp->n_embd);
    if (ly->fused_qkv) {
        hx__matmul(b, HX_CLASS_QKV, L, hx__lw(il, HX__LW_QKV), h,
                   hx__all(b, HX_SLOT_QKV, hp->n_q + 2 * hp->n_kv));
    } else {
        hx__matmul(b, HX_CLASS_QKV, L, hx__lw(il, HX__LW_Q), h, hx__ref(HX_SLOT_QKV, 0, hp->n_q, 0, b->n));
        hx__matmul(b, HX_CLASS_QKV, L, hx__lw(il, HX__LW_K), h,
                   hx__ref(HX_SLOT_QKV, hp->n_q, hp->n_kv, 0, b->n));
        hx__matmul(b, HX_CLASS_QKV, L, hx__lw(il, HX__LW_V), h,
                   hx__ref(HX_SLOT_QKV, hp->n_q + hp->n_kv, hp->n_kv, 0, b->n));
    }
    hx__attention(b, il, n_ctx, n_seq);
    struct hx_node_ref att = hx__all(b, HX_SLOT_ATT, hp->n_q);
    if (hp->sub_norms) {
        struct hx_node_ref hq = hx__all(b, HX_SLOT_H, hp->n_q);
        hx__norm(b, HX_CLASS_NORM, L, hx__lw(il, HX__LW_ATTN_SUB), att, hq, hp->n_q);
        att = hq;
    }
    hx__matmul(b, HX_CLASS_O, L, hx__lw(il, HX__LW_O), att, tmp);
    hx__binary(b, HX_OP_ADD, HX_CLASS_ADD, L, x, tmp, x);

    hx__norm(b, HX_CLASS_NORM, L, hx__lw(il, HX__LW_FFN_NORM), x, h, hp->n_embd);
    struct hx_node_ref gate = hx__ref(HX_SLOT_GU, 0, hp->n_ff, 0, b->n);
    struct hx_node_ref up = hx__ref(HX_SLOT_GU, hp->n_ff, hp->n_ff, 0, b->n);
    if (ly->fused_gu) {
        hx__matmul(b, HX_CLASS_GATE_UP, L, hx__lw(il, HX__LW_GU), h, hx__all(b, HX_SLOT_GU, 2 * hp->n_ff));
    } else {
        hx__matmul(b, HX_CLASS_GATE_UP, L, hx__lw(il, HX__LW_GATE), h, gate);
        hx__matmul(b, HX_CLASS_GATE_UP, L, hx__lw(il, HX__LW_UP), h, up);
    }
    struct hx_node_ref act = hx__all(b, HX_SLOT_ACT, hp->n_ff);
    hx__binary(b, hp->relu2 ? HX_OP_RELU2_GLU : HX_OP_SWIGLU, HX_CLASS_ACT, L, gate, up, act);
    if (hp->sub_norms) {
        struct hx_node_ref a2 = hx__all(b, HX_SLOT_ACT2, hp->n_ff);
        hx__norm(b, HX_CLASS_NORM, L, hx__lw(il, HX__LW_FFN_SUB), act, a2, hp->n_ff);
        act = a2;
    }
    hx__matmul(b, HX_CLASS_DOWN, L, hx__lw(il, HX__LW_DOWN), act, tmp);
    hx__binary(b, HX_OP_ADD, HX_CLASS_ADD, L, x, tmp, x);
}

int hx__graph_build(struct hx_graph *g, const struct hx_model *m, int64_t n_rows,
                    int64_t logits_row, int64_t n_ctx, int32_t n_seq)
{
    struct hx_gb b = {.g = g, .m = m, .n = n_rows};
    const struct hx_hparams *hp = &m->hp;
    g->n_nodes = 0;
    g->n_rows = n_rows;
    g->logits_row = logits_row;
    g->n_logits = n_rows - logits_row;
    hx__graph_slot_widths(m, g->slot_width);

    struct hx_node *e = hx__push(&b, HX_OP_EMBED, HX_CLASS_EMBED, -1);
    if (e) {
        e->dst = hx__all(&b, HX_SLOT_X, hp->n_embd);
        hx__set_weight(&b, e, HX__W_EMBD);
        e->desc.n_rows = n_rows;
        e->desc.n_in = hp->n_vocab;
        e->desc.n_out = hp->n_embd;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) hx__layer(&b, il, n_ctx, n_seq);
    if (g->n_logits > 0) {
        struct hx_node_ref xs = hx__ref(HX_SLOT_X, 0, hp->n_embd, logits_row, g->n_logits);
        struct hx_node_ref xl = hx__ref(HX_SLOT_XL, 0, hp->n_embd, 0, g->n_logits);
        hx__norm(&b, HX_CLASS_NORM, -1, HX__W_OUTPUT_NORM, xs, xl, hp->n_embd);
        hx__matmul(&b, HX_CLASS_LM_HEAD, -1, HX__W_OUTPUT, xl,
                   hx__ref(HX_SLOT_LOGITS, 0, hp->n_vocab, 0, g->n_logits));
    }
    return b.st;
}

void hx__graph_free(struct hx_graph *g)
{
    hx__free(g->nodes);
    memset(g, 0, sizeof *g);
}
