/*
 * backend-ops-cases.c — the case tables of test-backend-ops (see test-backend-ops.c for what
 * is checked): matmul and embedding for every weight type, norms, RoPE, attention, the
 * element-wise ops, and edge cases supports() accepts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-ops.h"

/* ---- thresholds (docs/testing.md, core/numerics.c) ----------------------------------------- */

/* The matmul activation model of the case, per row and K-block: s for float devices, s8 for
 * HX_NUMERICS_INT8_ROW ones (one int8 scale per row), xm = mean x². */
static void hx_t_mm_model(struct hx_t_case *c, const float *x, int64_t m, int64_t k)
{
    const int64_t nb = hx__mm_blocks(k);
    c->s = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->s);
    c->s8 = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->s8);
    c->xm = hx_t_xmalloc((size_t)(m * nb) * sizeof *c->xm);
    for (int64_t r = 0; r < m; r++) {
        hx__mm_act_row(HX_NUMERICS_FLOAT, c->desc.wtype, x + r * k, k, c->s + r * nb,
                       c->xm + r * nb);
        hx__mm_act_row(HX_NUMERICS_INT8_ROW, c->desc.wtype, x + r * k, k, c->s8 + r * nb,
                       c->xm + r * nb);
    }
}

/* ---- matmul and embedding cases ------------------------------------------------------------- */

/* K not a multiple of the tiles (for block-256 types: 3 or 5 blocks; for Q1_0 and I2_S odd
 * multiples of 128, where I2_S keeps its GGUF rows; for Q2_0 odd multiples of 64; for block-32
 * types odd multiples of 32; for float types odd K). */
static int64_t hx_t_k_small(enum hx_dtype t)
{
    switch (hx_dtype_block_elems(t)) {
    case 1: return 67;
    case 32: return 96;
    case 64: return 192;
    case 128: return 384;
    default: return 768;
    }
}

static int64_t hx_t_k_mid(enum hx_dtype t)
{
    switch (hx_dtype_block_elems(t)) {
    case 1: return 1029;
    case 32: return 1056;
    case 64: return 1088;
    case 128: return 1152;
    default: return 1280;
    }
}

static void hx_t_matmul_case(struct hx_t_weight *tw, int64_t m, bool strided, bool full_only,
                             const char *extra)
{
    const enum hx_dtype t = tw->w.type;
    const int64_t k = tw->w.n_cols, n = tw->w.n_rows;
    char label[160];
    snprintf(label, sizeof label, "%-5s m=%lld K=%lld N=%lld%s", hx_dtype_name(t), (long long)m,
             (long long)k, (long long)n, extra);
    if (!hx_t_want("matmul", HX_OP_MATMUL, t, m, full_only, label)) return;
    hx_t_weight_build(tw);
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_MATMUL, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = n > 100000 ? HX_CLASS_LM_HEAD : HX_CLASS_QKV;
    c.desc.n_in = k, c.desc.n_out = n, c.desc.wtype = t;
    c.n_src = 1;
    if (strided) { /* input a slice of a wider buffer; output the middle slice of a fused one */
        c.src[0] = hx_t_slice(&c, m, 0, k, 37);
        int64_t w[3] = {13, n, 7};
        struct hx_t_tensor o[3];
        hx_t_slices(&c, m, 3, w, 0, o);
        c.dst = o[1];
    } else {
        c.src[0] = hx_t_alone(&c, m, k);
        c.dst = hx_t_alone(&c, m, n);
    }
    float *x = hx_t_act_mm(m, k, 1000 + (uint64_t)m * 7 + (uint64_t)k);
    hx_t_put(&c, &c.src[0], x);
    hx_t_mm_model(&c, x, m, k);
    free(x);
    c.w = tw;
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

/* Tokens: the last and first rows of the table, then random ones (repeats allowed). */
static int32_t *hx_t_tokens(int64_t m, int64_t n_vocab, uint64_t seed)
{
    int32_t *tok = hx_t_xmalloc((size_t)m * sizeof *tok);
    for (int64_t r = 0; r < m; r++) tok[r] = (int32_t)(hx_t_next(&seed) % (uint64_t)n_vocab);
    tok[0] = (int32_t)(n_vocab - 1);
    if (m > 1) tok[1] = 0;
    return tok;
}

static void hx_t_embed_case(struct hx_t_weight *tw, int64_t m, bool strided, bool full_only)
{
    const enum hx_dtype t = tw->w.type;
    char label[160];
    snprintf(label, sizeof label, "%-5s m=%lld vocab=%lld width=%lld%s", hx_dtype_name(t),
             (long long)m, (long long)tw->w.n_rows, (long long)tw->w.n_cols,
             strided ? " strided" : "");
    if (!hx_t_want("embed", HX_OP_EMBED, t, m, full_only, label)) return;
    hx_t_weight_build(tw);
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_EMBED, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = HX_CLASS_EMBED, c.desc.layer = -1;
    c.desc.n_in = tw->w.n_rows, c.desc.n_out = tw->w.n_cols, c.desc.wtype = t;
    c.dst = strided ? hx_t_slice(&c, m, 5, tw->w.n_cols, 3) : hx_t_alone(&c, m, tw->w.n_cols);
    c.tokens = hx_t_tokens(m, tw->w.n_rows, 77 + (uint64_t)m);
    c.thr = hx__op_nmse_threshold(HX_OP_EMBED);
    c.w = tw;
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

static bool hx_t_ops_wanted(const char *a, const char *b)
{
    return !hx_t_opt.op || hx_t_in_list(hx_t_opt.op, a) || (b && hx_t_in_list(hx_t_opt.op, b));
}

static const int64_t hx_t_ms[] = {1, 7, 64, 512};

/* Every matmul and embedding case of weight type t, grouped by weight. */
void hx_t_weight_ops(enum hx_dtype t)
{
    if (hx_t_opt.type && !hx_t_in_list(hx_t_opt.type, hx_dtype_name(t))) return;
    const bool mm = hx_t_ops_wanted("matmul", NULL), em = hx_t_ops_wanted("embed", NULL);
    const int64_t be = hx_dtype_block_elems(t), ks = hx_t_k_small(t), km = hx_t_k_mid(t);
    struct hx_t_weight tw;
    if (mm) { /* one block per row (K = 3 for float types), one output */
        hx_t_weight_plan(&tw, t, 1, be == 1 ? 3 : be, 1.0f, 11);
        hx_t_matmul_case(&tw, 1, false, false, " one block");
        hx_t_matmul_case(&tw, 7, false, false, " one block");
        hx_t_weight_free(&tw);
        /* small K, N = 17: every m, and m = 2 (the two-row decode kernel) and 9 (8 + 1) */
        hx_t_weight_plan(&tw, t, 17, ks, 1.0f, 12);
        for (size_t i = 0; i < 4; i++) hx_t_matmul_case(&tw, hx_t_ms[i], false, false, "");
        hx_t_matmul_case(&tw, 2, false, false, "");
        hx_t_matmul_case(&tw, 9, false, false, "");
        hx_t_weight_free(&tw);
        /* strided input and output, and a BitNet-style weight scale */
        hx_t_weight_plan(&tw, t, 33, ks, 0.37f, 13);
        hx_t_matmul_case(&tw, 7, true, false, " strided scale=.37");
        hx_t_matmul_case(&tw, 64, true, false, " strided scale=.37");
        hx_t_weight_free(&tw);
        /* K off the 256 grid, N = 1009 = 16·63 + 1 */
        hx_t_weight_plan(&tw, t, 1009, km, 1.0f, 14);
        for (size_t i = 0; i < 4; i++)
            hx_t_matmul_case(&tw, hx_t_ms[i], false, hx_t_ms[i] == 512, "");
        hx_t_weight_free(&tw);
        hx_t_weight_plan(&tw, t, 33, km, 1.0f, 15);
        hx_t_matmul_case(&tw, 512, false, false, "");
        hx_t_weight_free(&tw);
    }
    if (em) {
        hx_t_weight_plan(&tw, t, 1009, ks, 1.0f, 16);
        for (size_t i = 0; i < 4; i++) hx_t_embed_case(&tw, hx_t_ms[i], false, false);
        hx_t_embed_case(&tw, 7, true, false);
        hx_t_weight_free(&tw);
    }
    /* Qwen3-0.6B: q|k|v-sized, O, gate|up, down at m = 1, 7 (O also 64; the rest --full) */
    static const int64_t qwen[][2] = {{1024, 4096}, {2048, 1024}, {1024, 6144}, {3072, 1024}};
    for (size_t s = 0; mm && s < 4; s++) {
        hx_t_weight_plan(&tw, t, qwen[s][1], qwen[s][0], 1.0f, 20 + s);
        for (size_t i = 0; i < 4; i++)
            hx_t_matmul_case(&tw, hx_t_ms[i], false, hx_t_ms[i] > (s == 1 ? 64 : 7), "");
        hx_t_weight_free(&tw);
    }
    /* BitNet b1.58 2B4T's matrices (k|v, gate|up-sized, down) for the ternary types its files
     * use (I2_S, TQ2_0) and Q2_0, at m = 1 and 7 */
    static const int64_t bitnet[][2] = {{2560, 640}, {2560, 6912}, {6912, 2560}};
    const bool tern = t == HX_DTYPE_I2_S || t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_Q2_0;
    for (size_t s = 0; mm && tern && s < 3; s++) {
        hx_t_weight_plan(&tw, t, bitnet[s][1], bitnet[s][0], 1.0f, 40 + s);
        hx_t_matmul_case(&tw, 1, false, false, " BitNet");
        hx_t_matmul_case(&tw, 7, false, false, " BitNet");
        hx_t_weight_free(&tw);
    }
    /* The LM head, tied with the embedding table: 151936 rows. By default m = 1 and 7 for the
     * types Qwen3 files store it in (F16, Q8_0, Q6_K: bigger than a 128 MiB Vulkan binding
     * or just under); every type and m = 64, 512 with --full. */
    const bool lm = t == HX_DTYPE_F16 || t == HX_DTYPE_Q8_0 || t == HX_DTYPE_Q6_K;
    hx_t_weight_plan(&tw, t, 151936, 1024, 1.0f, 30);
    for (size_t i = 0; mm && i < 4; i++)
        hx_t_matmul_case(&tw, hx_t_ms[i], false, !lm || hx_t_ms[i] > 7, "");
    if (em) hx_t_embed_case(&tw, 7, false, !lm);
    hx_t_weight_free(&tw);
}

/* ---- norm cases ----------------------------------------------------------------------------- */

static void hx_t_norm_case(int64_t m, int64_t width, int64_t group, int layout, float eps,
                           bool full_only)
{
    const char *fam = group < width ? "qk_norm" : "rms_norm";
    char label[160];
    snprintf(label, sizeof label, "m=%lld width=%lld group=%lld eps=%g%s", (long long)m,
             (long long)width, (long long)group, (double)eps,
             layout == 1   ? " q of fused qkv"
             : layout == 2 ? " k of fused qkv"
                           : "");
    if (!hx_t_want(fam, HX_OP_RMS_NORM, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_RMS_NORM, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.family = fam;
    c.desc.cls = HX_CLASS_NORM;
    c.desc.n_in = c.desc.n_out = width;
    c.desc.p.norm.eps = eps, c.desc.p.norm.group = group;
    c.n_src = 1;
    if (layout) { /* Qwen3: q (2048) | k (1024) | v (1024); norm reads a slice */
        int64_t w[3] = {2048, 1024, 1024};
        struct hx_t_tensor s[3];
        hx_t_slices(&c, m, 3, w, 0, s);
        c.src[0] = s[layout - 1];
        c.src[0].cols = width;
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
    }
    hx_t_put_rand(&c, &c.src[0], 1.0f, 300 + (uint64_t)(m + width + group));
    c.dst = hx_t_alone(&c, m, width);
    struct hx_t_weight gain;
    hx_t_weight_vec(&gain, "gain", group, 0.5f, 2.0f, 301 + (uint64_t)group);
    c.w = &gain;
    c.thr = hx__op_nmse_threshold(HX_OP_RMS_NORM);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
    hx_t_weight_free(&gain);
}

void hx_t_norm_ops(void)
{
    if (!hx_t_ops_wanted("rms_norm", "qk_norm")) return;
    for (size_t i = 0; i < 4; i++) {
        hx_t_norm_case(hx_t_ms[i], 1024, 1024, 0, 1e-6f, false);
        hx_t_norm_case(hx_t_ms[i], 1001, 1001, 0, 1e-5f, false);
        hx_t_norm_case(hx_t_ms[i], 2048, 128, 1, 1e-6f, false);
        hx_t_norm_case(hx_t_ms[i], 1024, 128, 2, 1e-6f, false);
    }
    hx_t_norm_case(7, 6912, 6912, 0, 1e-5f, false); /* BitNet ffn_sub_norm */
    hx_t_norm_case(7, 192, 64, 0, 1e-6f, false);    /* 3 heads of 64 */
    hx_t_norm_case(3, 4096, 4096, 0, 1e-5f, false);
}

/* ---- rope ------------------------------------------------------------------------------------ */

struct hx_t_rope {
    int32_t n_head, head_dim, n_rot;
    float base, freq_scale;
    bool freqs; /* llama3 rope_freqs factors */
    int layout; /* 0: in place, contiguous; 1: in place on the k slice of qkv; 2: to dst */
};

/* Positions: a prefill from 0, a later chunk, or scattered (a batch of sequences). */
static int32_t *hx_t_positions(int64_t m, int kind, uint64_t seed)
{
    int32_t *p = hx_t_xmalloc((size_t)m * sizeof *p);
    for (int64_t r = 0; r < m; r++)
        p[r] = kind == 0   ? (int32_t)r
               : kind == 1 ? (int32_t)(1000 + r)
                           : (int32_t)(hx_t_next(&seed) % 40960);
    if (kind == 2) p[0] = 40959;
    return p;
}

static void hx_t_rope_case(const struct hx_t_rope *rp, enum hx_rope_mode mode, int64_t m,
                           int pos_kind, bool full_only)
{
    static const char *const pk[] = {"pos 0..", "pos 1000..", "pos random<40960"};
    static const char *const lay[] = {"in place", "in place on qkv slice", "to dst"};
    char label[160];
    snprintf(label, sizeof label, "%s m=%lld h=%d hd=%d rot=%d %s%s %s",
             mode == HX_ROPE_NEOX ? "neox" : "norm", (long long)m, rp->n_head, rp->head_dim,
             rp->n_rot, pk[pos_kind], rp->freqs ? " freqs+scale" : "", lay[rp->layout]);
    if (!hx_t_want("rope", HX_OP_ROPE, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ROPE, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    const int64_t width = (int64_t)rp->n_head * rp->head_dim;
    c.desc.cls = HX_CLASS_ROPE;
    c.desc.n_in = c.desc.n_out = width;
    c.desc.p.rope.n_head = rp->n_head, c.desc.p.rope.head_dim = rp->head_dim;
    c.desc.p.rope.n_rot = rp->n_rot, c.desc.p.rope.base = rp->base;
    c.desc.p.rope.freq_scale = rp->freq_scale, c.desc.p.rope.mode = mode;
    c.n_src = 1;
    if (rp->layout == 1) {
        int64_t w[3] = {2 * width, width, width};
        struct hx_t_tensor s[3];
        hx_t_slices(&c, m, 3, w, 0, s);
        c.src[0] = s[1];
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
    }
    c.dst = rp->layout == 2 ? hx_t_alone(&c, m, width) : c.src[0];
    hx_t_put_rand(&c, &c.src[0], 1.0f, 400 + (uint64_t)(m + width));
    c.pos = hx_t_positions(m, pos_kind, 401);
    struct hx_t_weight ff = {0};
    if (rp->freqs) {
        hx_t_weight_vec(&ff, "rope_freqs", rp->n_rot / 2, 1.0f, 8.0f, 402);
        c.aux = &ff;
    }
    c.thr = hx__op_nmse_threshold(HX_OP_ROPE);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
    if (rp->freqs) hx_t_weight_free(&ff);
}

void hx_t_rope_ops(void)
{
    if (!hx_t_ops_wanted("rope", NULL)) return;
    static const struct hx_t_rope qwen_q = {16, 128, 128, 1e6f, 1.0f, false, 0};
    static const struct hx_t_rope llama_k = {8, 64, 64, 1e4f, 1.0f, false, 1};
    static const struct hx_t_rope partial = {3, 64, 32, 1e4f, 1.0f, false, 2};
    static const struct hx_t_rope llama3 = {4, 128, 128, 5e5f, 0.25f, true, 2};
    for (int mode = 0; mode < 2; mode++) {
        enum hx_rope_mode md = mode ? HX_ROPE_NEOX : HX_ROPE_NORM;
        hx_t_rope_case(&qwen_q, md, 1, 2, false);
        hx_t_rope_case(&qwen_q, md, 7, 0, false);
        hx_t_rope_case(&qwen_q, md, 64, 1, false);
        hx_t_rope_case(&qwen_q, md, 512, 2, false);
        hx_t_rope_case(&llama_k, md, 7, 1, false);
        hx_t_rope_case(&partial, md, 7, 0, false);
        hx_t_rope_case(&llama3, md, 7, 2, false);
        hx_t_rope_case(&llama_k, md, 512, 0, true);
    }
}

/* ---- attention ------------------------------------------------------------------------------- */

struct hx_t_attn {
    int32_t n_head, n_kv, hd;
};

/* A batch: row r is token pos[r] of sequence seq[r]; hist[s] positions already in the cache. */
struct hx_t_batch {
    const char *name;
    int64_t m, n_ctx;
    int32_t n_seq;
    int32_t *pos, *seq;
    int64_t hist[4];
};

static void hx_t_batch_make(struct hx_t_batch *b, int kind, int64_t m)
{
    memset(b, 0, sizeof *b);
    b->n_seq = 1, b->m = m;
    b->pos = hx_t_xmalloc((size_t)m * sizeof *b->pos);
    b->seq = hx_t_xmalloc((size_t)m * sizeof *b->seq);
    int64_t start = 0;
    switch (kind) {
    case 0: b->name = "prefill", start = 0, b->n_ctx = m + 37; break;
    case 1: b->name = "chunk", start = 300, b->n_ctx = 320 + m; break;
    case 2: b->name = "decode", start = 1000, b->n_ctx = 1100; break;
    case 3: b->name = "decode", start = 4000, b->n_ctx = 4096; break;
    case 4: b->name = "first token", start = 0, b->n_ctx = 16; break;
    /* 5 live chunks of 128 in a context of 9: a HIP graph launches 8, 3 of them past pos */
    case 6: b->name = "decode", start = 600, b->n_ctx = 1100; break;
    /* past the ~10,000 positions lavapipe's loop budget gave attn.comp (docs/vulkan.md) */
    case 7: b->name = "decode", start = 16000, b->n_ctx = 16400; break;
    default: break;
    }
    for (int64_t r = 0; r < m; r++) b->pos[r] = (int32_t)(start + r), b->seq[r] = 0;
    b->hist[0] = start;
    if (kind == 5) { /* 3 sequences, interleaved rows: one starting, two decoding */
        static const int32_t s[] = {1, 0, 2, 0, 2, 1, 0, 2, 0, 2};
        static const int32_t p[] = {0, 17, 200, 18, 201, 1, 19, 202, 20, 203};
        b->name = "3 seqs", b->n_seq = 3, b->n_ctx = 256;
        int32_t next[3] = {21, 2, 204}; /* rows past the 10th: seq r % 3, its next position */
        for (int64_t r = 0; r < m; r++) {
            b->seq[r] = r < 10 ? s[r] : (int32_t)(r % 3);
            b->pos[r] = r < 10 ? p[r] : next[r % 3]++;
        }
        b->hist[0] = 17, b->hist[1] = 0, b->hist[2] = 200;
    }
}

static void hx_t_attn_case(const struct hx_t_attn *a, int kind, int64_t m, bool fused,
                           bool full_only)
{
    struct hx_t_batch b;
    hx_t_batch_make(&b, kind, m);
    char label[160];
    snprintf(label, sizeof label, "h=%d/%d hd=%d %s m=%lld pos=%d ctx=%lld%s", a->n_head, a->n_kv,
             a->hd, b.name, (long long)m, b.pos[0], (long long)b.n_ctx, fused ? " fused qkv" : "");
    if (!hx_t_want("attn", HX_OP_ATTN, -1, m, full_only, label)) {
        free(b.pos), free(b.seq);
        return;
    }
    struct hx_t_case c;
    hx_t_case_init(&c, HX_OP_ATTN, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    const int64_t nq = (int64_t)a->n_head * a->hd, nkv = (int64_t)a->n_kv * a->hd;
    c.desc.cls = HX_CLASS_ATTN;
    c.desc.n_in = c.desc.n_out = nq;
    c.desc.p.attn.n_head = a->n_head, c.desc.p.attn.n_head_kv = a->n_kv;
    c.desc.p.attn.head_dim = a->hd, c.desc.p.attn.scale = 1.0f / sqrtf((float)a->hd);
    c.desc.p.attn.n_ctx = b.n_ctx, c.desc.p.attn.n_seq = b.n_seq;
    c.n_src = 3;
    if (fused) {
        int64_t w[3] = {nq, nkv, nkv};
        hx_t_slices(&c, m, 3, w, 0, c.src);
    } else {
        c.src[0] = hx_t_alone(&c, m, nq);
        c.src[1] = hx_t_alone(&c, m, nkv);
        c.src[2] = hx_t_alone(&c, m, nkv);
    }
    hx_t_put_rand(&c, &c.src[0], 3.0f, 500 + (uint64_t)m);
    hx_t_put_rand(&c, &c.src[1], 1.0f, 501 + (uint64_t)m);
    hx_t_put_rand(&c, &c.src[2], 1.0f, 502 + (uint64_t)m);
    c.dst = hx_t_alone(&c, m, nq);
    /* The cache: rows of earlier positions hold data, every other row is stale (poison). */
    const int64_t rows = (int64_t)b.n_seq * b.n_ctx;
    c.kc = hx_t_alone(&c, rows, nkv);
    c.vc = hx_t_alone(&c, rows, nkv);
    c.has_cache = true;
    uint64_t seed = 503;
    for (int32_t s = 0; s < b.n_seq; s++) {
        for (int64_t p = 0; p < b.hist[s]; p++) {
            float *kr = hx_t_at(&c.kc, c.buf[c.kc.buf].init, s * b.n_ctx + p);
            float *vr = hx_t_at(&c.vc, c.buf[c.vc.buf].init, s * b.n_ctx + p);
            for (int64_t i = 0; i < nkv; i++) kr[i] = hx_t_unif(&seed), vr[i] = hx_t_unif(&seed);
        }
    }
    c.pos = b.pos, c.seq = b.seq;
    c.thr = hx__op_nmse_threshold(HX_OP_ATTN);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

void hx_t_attn_ops(void)
{
    if (!hx_t_ops_wanted("attn", NULL)) return;
    static const struct hx_t_attn qwen = {16, 8, 128}, bitnet = {20, 5, 128}, mha = {4, 4, 64},
                                  odd = {6, 2, 80}, wide = {4, 1, 256}, mqa = {16, 1, 64},
                                  small = {8, 2, 32};
    hx_t_attn_case(&qwen, 4, 1, false, false);
    hx_t_attn_case(&qwen, 7, 1, false, false);
    hx_t_attn_case(&qwen, 0, 7, false, false);
    hx_t_attn_case(&qwen, 0, 16, false, false);  /* a last key block of 16: the flash kernel reads 32 */
    hx_t_attn_case(&qwen, 0, 64, false, false);
    hx_t_attn_case(&qwen, 0, 512, false, false);
    hx_t_attn_case(&qwen, 0, 37, false, false);  /* a last job of one row: 2 queries, not 8 */
    hx_t_attn_case(&bitnet, 0, 64, false, false);
    hx_t_attn_case(&mha, 0, 48, false, false);   /* flash kernel, head_dim 64: the generic body */
    hx_t_attn_case(&wide, 0, 40, false, false);
    hx_t_attn_case(&mqa, 0, 40, false, false);   /* 16 heads per KV head: the row-wise kt kernel */
    hx_t_attn_case(&qwen, 1, 7, true, false);
    hx_t_attn_case(&qwen, 2, 1, false, false);
    hx_t_attn_case(&qwen, 3, 1, true, false);
    hx_t_attn_case(&qwen, 6, 1, false, false);
    hx_t_attn_case(&qwen, 5, 5, false, false);
    hx_t_attn_case(&qwen, 5, 10, true, false);
    hx_t_attn_case(&bitnet, 1, 7, false, false);
    hx_t_attn_case(&bitnet, 2, 1, false, false);
    hx_t_attn_case(&mha, 1, 7, false, false);
    hx_t_attn_case(&odd, 1, 7, false, false);
    hx_t_attn_case(&odd, 2, 1, false, false);
    hx_t_attn_case(&wide, 1, 7, false, false);
    /* the GPU backends' flash-style prefill kernels (tiles of 32 rows; auto from 16 rows):
     * around a tile's edge, a prefill continuing a cached context, sequences mixed in a tile */
    hx_t_attn_case(&qwen, 0, 15, false, false);
    hx_t_attn_case(&qwen, 1, 16, false, false);
    hx_t_attn_case(&qwen, 1, 17, false, false);
    hx_t_attn_case(&mqa, 1, 33, false, false);
    hx_t_attn_case(&small, 1, 130, false, false);
    hx_t_attn_case(&qwen, 5, 40, false, false);
    hx_t_attn_case(&qwen, 1, 64, false, true);
    hx_t_attn_case(&bitnet, 0, 512, false, true);
    hx_t_attn_case(&qwen, 3, 1, false, true);
}

/* ---- element-wise ops ------------------------------------------------------------------------ */

/* layout 0: separate buffers; 1: gate|up slices of one fused buffer; 2: dst = src0 (in place);
 * 3: dst = src1. */
static void hx_t_binary_case(enum hx_op_kind kind, int64_t m, int64_t width, int layout,
                             bool full_only)
{
    static const char *const lay[] = {"", " fused gate|up", " in place (dst = a)",
                                      " in place (dst = b)"};
    char label[160];
    snprintf(label, sizeof label, "m=%lld width=%lld%s", (long long)m, (long long)width,
             lay[layout]);
    if (!hx_t_want(hx_op_kind_name(kind), kind, -1, m, full_only, label)) return;
    struct hx_t_case c;
    hx_t_case_init(&c, kind, m);
    snprintf(c.label, sizeof c.label, "%s", label);
    c.desc.cls = kind == HX_OP_ADD ? HX_CLASS_ADD : HX_CLASS_ACT;
    c.desc.n_in = c.desc.n_out = width;
    c.n_src = 2;
    if (layout == 1) {
        int64_t w[2] = {width, width};
        hx_t_slices(&c, m, 2, w, 0, c.src);
    } else {
        c.src[0] = hx_t_alone(&c, m, width);
        c.src[1] = hx_t_alone(&c, m, width);
    }
    /* gates over a wide range: SiLU's exp saturates both ways */
    float *g = hx_t_act(m, width, kind == HX_OP_ADD ? 1.0f : 6.0f, 600 + (uint64_t)m);
    uint64_t s = 601;
    for (int64_t i = 0; kind != HX_OP_ADD && i < m * width; i++)
        if (hx_t_next(&s) % 97 == 0) g[i] = 30.0f * hx_t_unif(&s) * 3.0f;
    hx_t_put(&c, &c.src[0], g);
    free(g);
    hx_t_put_rand(&c, &c.src[1], 1.0f, 602 + (uint64_t)m);
    c.dst = layout == 2 ? c.src[0] : layout == 3 ? c.src[1] : hx_t_alone(&c, m, width);
    c.thr = hx__op_nmse_threshold(kind);
    hx_t_run_case(&c);
    hx_t_case_free(&c);
}

void hx_t_binary_ops(void)
{
    static const enum hx_op_kind glu[] = {HX_OP_SWIGLU, HX_OP_RELU2_GLU};
    for (size_t k = 0; k < 2; k++) {
        if (!hx_t_ops_wanted(hx_op_kind_name(glu[k]), NULL)) continue;
        for (size_t i = 0; i < 4; i++) hx_t_binary_case(glu[k], hx_t_ms[i], 3072, 1, false);
        hx_t_binary_case(glu[k], 1, 1001, 0, false);
        hx_t_binary_case(glu[k], 7, 1001, 0, false);
        hx_t_binary_case(glu[k], 7, 6912, 1, false);
    }
    if (!hx_t_ops_wanted("add", NULL)) return;
    for (size_t i = 0; i < 4; i++) hx_t_binary_case(HX_OP_ADD, hx_t_ms[i], 1024, 2, false);
    hx_t_binary_case(HX_OP_ADD, 7, 1001, 0, false);
    hx_t_binary_case(HX_OP_ADD, 7, 1001, 3, false);
    hx_t_binary_case(HX_OP_ADD, 64, 2560, 2, false);
}

/* ---- edge cases that supports() accepts ------------------------------------------------------ */

void hx_t_edge_ops(void)
{
    /* head_dim and n_rot beyond any model's, but within what supports() promises */
    static const struct hx_t_rope big = {1, 2048, 2048, 1e4f, 1.0f, false, 2};
    if (hx_t_ops_wanted("rope", NULL)) hx_t_rope_case(&big, HX_ROPE_NEOX, 2, 0, false);
}

