/*
 * graph.h — the per-layer op graph of a model for one batch (core-private).
 *
 * Activations live in a few named slots reused by every layer (x, h, qkv, ...); each slot is
 * (rows, width) f32. A node reads and writes slot regions (a column range and a row range),
 * so the q/k/v parts of the fused QKV output and the last rows fed to the LM head are plain
 * views. The scheduler (sched.c) places nodes on devices and keeps slot contents coherent
 * across devices.
 */
#pragma once

#include "model.h"

enum hx_slot {
    HX_SLOT_X,      /* residual stream (n, n_embd) */
    HX_SLOT_H,      /* normed input to a GEMM (n, max(n_embd, n_q)) */
    HX_SLOT_QKV,    /* q|k|v (n, n_q + 2 n_kv) */
    HX_SLOT_Q,      /* QK-normed q (n, n_q) */
    HX_SLOT_K,      /* QK-normed k (n, n_kv) */
    HX_SLOT_ATT,    /* attention output (n, n_q) */
    HX_SLOT_TMP,    /* GEMM output added to x (n, n_embd) */
    HX_SLOT_GU,     /* gate|up (n, 2 n_ff) */
    HX_SLOT_ACT,    /* GLU output (n, n_ff) */
    HX_SLOT_ACT2,   /* sub-normed GLU output (n, n_ff) */
    HX_SLOT_XL,     /* final-normed rows that want logits (k, n_embd) */
    HX_SLOT_LOGITS, /* (k, n_vocab) */
    HX_SLOT_COUNT
};
const char *hx__slot_name(enum hx_slot s);

struct hx_node_ref {
    int8_t slot;         /* enum hx_slot, -1 = none */
    int64_t col, n_cols; /* column range within the slot */
    int64_t row, n_rows; /* row range within the slot */
};

struct hx_node {
    struct hx_op_desc desc;
    struct hx_node_ref src[3];
    struct hx_node_ref dst;
    const struct hx_weight *weight;
    const struct hx_weight *aux;
    int32_t weight_id;   /* index into the graph's weight table, -1 none */
    int32_t aux_id;
    /* tensor-split: n_parts > 1 marks node `part` of a group of n_parts consecutive nodes that
     * compute column ranges of one matmul's output from row slices of its weight, on several
     * devices at once. Set only by the scheduler's expansion; 0 in graphs hx__graph_build makes. */
    int16_t part, n_parts;
};

struct hx_graph {
    struct hx_node *nodes;
    int64_t n_nodes, cap;
    int64_t n_rows;                 /* batch rows */
    int64_t logits_row, n_logits;   /* rows [logits_row, +n_logits) produce logits */
    int64_t slot_width[HX_SLOT_COUNT];
};

/* Widths of each slot for a model (rows are the batch or logits capacity). */
void hx__graph_slot_widths(const struct hx_model *m, int64_t *width);

/* Build the graph for a batch of n_rows rows, logits for rows [logits_row, n_rows). Reuses
 * g->nodes storage. */
int hx__graph_build(struct hx_graph *g, const struct hx_model *m, int64_t n_rows,
                    int64_t logits_row, int64_t n_ctx, int32_t n_seq);
void hx__graph_free(struct hx_graph *g);

/* Every weight the graph can reference (stable ids for per-device prepared handles). */
int64_t hx__model_weight_count(const struct hx_model *m);
const struct hx_weight *hx__model_weight(const struct hx_model *m, int64_t id);
