/*
 * model-load.c — build a struct hx_model from a GGUF file: architecture and hyperparameters
 * from metadata (formats.md §4.1), every tensor looked up by name with its shape checked
 * against the hparams (§4.2), norm gains made F32, and the per-layer QKV and gate|up weights
 * fused into one matrix each when their parts share a type and scales (one GEMM instead of
 * three / two — the shapes the NPU kernels are built for), described in place, never copied
 * (hx__fuse). An I2_S weight's data is its codes;
 * its tensor scale (the f32 in the tensor's tail) is read into hx_weight.tensor_scale.
 *
 * Invariant: after a successful load every hx_weight points at n_rows * row_bytes valid bytes,
 * in data or (a fused weight of parts) in its parts.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "vocab.h"

/* Weak: a program that never tokenizes (a numerics test) need not link the tokenizer; every
 * program that does (engine, server) references it strongly through the public API. */
#pragma weak hx__vocab_load
#pragma weak hx__vocab_free
#pragma weak hx__vocab_n_tokens

static const char *const hx__arch_names[] = {"llama", "qwen3", "bitnet"};
_Static_assert(HX_ARRAY_LEN(hx__arch_names) == HX_ARCH_COUNT, "arch names");

const char *hx__arch_name(enum hx_arch a)
{
    return (unsigned)a < HX_ARCH_COUNT ? hx__arch_names[a] : "?";
}

const struct hx_vocab *hx__model_vocab(const struct hx_model *m)
{
    return m ? m->vocab : NULL;
}

/* ---- metadata -------------------------------------------------------------------------------- */

struct hx_loader {
    struct hx_model *m;
    struct hx_gguf *g;
    const char *path;
};

static int hx__key_i64(struct hx_loader *L, const char *suffix, bool required, int64_t def,
                       int64_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->m->arch_name, suffix);
    uint64_t v;
    int st = hx__gguf_get_u64(L->g, key, &v);
    if (st == HX_E_NOTFOUND) {
        if (required)
            return hx__set_error(HX_E_FORMAT, "%s: required key '%s' is missing", L->path, key);
        *out = def;
        return HX_OK;
    }
    if (st != HX_OK) return hx__set_error(st, "%s: key '%s': %s", L->path, key, hx_last_error());
    if (v > (uint64_t)1 << 40)
        return hx__set_error(HX_E_FORMAT, "%s: key '%s' = %llu is absurd", L->path, key,
                             (unsigned long long)v);
    *out = (int64_t)v;
    return HX_OK;
}

static int hx__key_f32(struct hx_loader *L, const char *suffix, bool required, float def,
                       float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->m->arch_name, suffix);
    int st = hx__gguf_get_f32(L->g, key, out);
    if (st == HX_E_NOTFOUND) {
        if (required)
            return hx__set_error(HX_E_FORMAT, "%s: required key '%s' is missing", L->path, key);
        *out = def;
        return HX_OK;
    }
    if (st != HX_OK) return hx__set_error(st, "%s: key '%s': %s", L->path, key, hx_last_error());
    if (!isfinite(*out))
        return hx__set_error(HX_E_FORMAT, "%s: key '%s' is not finite", L->path, key);
    return HX_OK;
}

static int hx__load_arch(struct hx_loader *L)
{
    struct hx_gguf_str s;
    int st = hx__gguf_get_str(L->g, "general.architecture", &s);
    if (st != HX_OK)
        return hx__set_error(HX_E_FORMAT, "%s: key 'general.architecture' is missing or not a string",
                             L->path);
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)HX_MIN(s.len, 63), s.ptr);
    struct hx_model *m = L->m;
    snprintf(m->arch_name, sizeof m->arch_name, "%s", arch);
    if (!strcmp(arch, "llama")) m->arch = HX_ARCH_LLAMA;
    else if (!strcmp(arch, "qwen3")) m->arch = HX_ARCH_QWEN3;
    else if (!strcmp(arch, "bitnet") || !strcmp(arch, "bitnet-b1.58")) m->arch = HX_ARCH_BITNET;
    else
        return hx__set_error(HX_E_FORMAT,
                             "%s: unknown model architecture '%s' (supported: llama, qwen3, bitnet)",
                             L->path, arch);
    if (hx__gguf_get_str(L->g, "general.name", &s) == HX_OK)
        snprintf(m->name, sizeof m->name, "%.*s", (int)HX_MIN(s.len, 127), s.ptr);
    else {
        const char *base = strrchr(L->path, '/');
        snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : L->path);
    }
    return HX_OK;
}

/* BitNet's activation (formats.md §4.6, docs/bitnet.md): `<arch>.hidden_activation` when the
 * file says ("silu" or "relu2"; anything else is an error), else relu² for bitnet-b1.58 and for
 * a bitnet file with the Llama 3 vocabulary (2B4T converted by llama.cpp, whose graph computes
 * SiLU for it: a known llama.cpp bug), else SiLU (llama.cpp's bitnet graph). */
static int hx__bitnet_relu2(struct hx_loader *L, bool *relu2)
{
    char key[128];
    snprintf(key, sizeof key, "%s.hidden_activation", L->m->arch_name);
    struct hx_gguf_str s;
    int st = hx__gguf_get_str(L->g, key, &s);
    if (st == HX_OK) {
        *relu2 = s.len == 5 && !memcmp(s.ptr, "relu2", 5);
        if (!*relu2 && !(s.len == 4 && !memcmp(s.ptr, "silu", 4)))
            return hx__set_error(HX_E_FORMAT, "%s: key '%s' = '%.*s' is not an activation hx knows "
                                 "(silu, relu2)", L->path, key, (int)HX_MIN(s.len, 64), s.ptr);
        return HX_OK;
    }
    if (st != HX_E_NOTFOUND)
        return hx__set_error(HX_E_FORMAT, "%s: key '%s' must be a string (silu or relu2)",
                             L->path, key);
    *relu2 = !strcmp(L->m->arch_name, "bitnet-b1.58");
    struct hx_gguf_arr toks;
    if (hx__gguf_get_str(L->g, "tokenizer.ggml.model", &s) == HX_OK && s.len == 4 &&
        !memcmp(s.ptr, "gpt2", 4) &&
        hx__gguf_get_arr(L->g, "tokenizer.ggml.tokens", &toks) == HX_OK && toks.count == 128256)
        *relu2 = true;
    return HX_OK;
}

static int hx__load_hparams(struct hx_loader *L)
{
    struct hx_hparams *hp = &L->m->hp;
    int st;
    if ((st = hx__key_i64(L, "embedding_length", true, 0, &hp->n_embd)) ||
        (st = hx__key_i64(L, "block_count", true, 0, &hp->n_layer)) ||
        (st = hx__key_i64(L, "attention.head_count", true, 0, &hp->n_head)) ||
        (st = hx__key_i64(L, "feed_forward_length", true, 0, &hp->n_ff)) ||
        (st = hx__key_i64(L, "context_length", false, 4096, &hp->n_ctx_train)))
        return st;
    if (hp->n_ctx_train == 0) { /* written by a converter that did not know it */
        HX_LOG_WARN("%s: %s.context_length is 0; taking 4096, as when it is absent", L->path,
                    L->m->arch_name);
        hp->n_ctx_train = 4096;
    }
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_ff <= 0 ||
        hp->n_layer > 4096 || hp->n_head > 4096)
        return hx__set_error(HX_E_FORMAT, "%s: bad hyperparameters (embd %lld, layers %lld, heads %lld, ff %lld)",
                             L->path, (long long)hp->n_embd, (long long)hp->n_layer,
                             (long long)hp->n_head, (long long)hp->n_ff);
    if ((st = hx__key_i64(L, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv)) ||
        (st = hx__key_i64(L, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->head_dim)))
        return st;
    int64_t vlen;
    if ((st = hx__key_i64(L, "attention.value_length", false, hp->head_dim, &vlen))) return st;
    if (vlen != hp->head_dim)
        return hx__set_error(HX_E_FORMAT, "%s: value_length %lld != key_length %lld is not supported",
                             L->path, (long long)vlen, (long long)hp->head_dim);
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->head_dim <= 0 || hp->head_dim > 1024)
        return hx__set_error(HX_E_FORMAT, "%s: bad attention shape (heads %lld, kv heads %lld, head dim %lld)",
                             L->path, (long long)hp->n_head, (long long)hp->n_head_kv,
                             (long long)hp->head_dim);
    if ((st = hx__key_i64(L, "rope.dimension_count", false, hp->head_dim, &hp->n_rot))) return st;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return hx__set_error(HX_E_FORMAT, "%s: rope.dimension_count %lld invalid for head dim %lld",
                             L->path, (long long)hp->n_rot, (long long)hp->head_dim);
    if ((st = hx__key_f32(L, "attention.layer_norm_rms_epsilon", true, 0, &hp->eps)) ||
        (st = hx__key_f32(L, "rope.freq_base", false, 10000.0f, &hp->rope_base)))
        return st;
    /* rsqrt(mean + eps) of a negative eps, and base^(-2i/d) of a base <= 0, are NaN or
     * infinite: every logit NaN, and greedy decoding emitting token 0 without a word */
    if (hp->eps < 0 || hp->rope_base <= 0)
        return hx__set_error(HX_E_FORMAT, "%s: %s.%s = %g must be %s", L->path, L->m->arch_name,
                             hp->eps < 0 ? "attention.layer_norm_rms_epsilon" : "rope.freq_base",
                             hp->eps < 0 ? (double)hp->eps : (double)hp->rope_base,
                             hp->eps < 0 ? ">= 0" : "> 0");
    float factor = 0;
    if ((st = hx__key_f32(L, "rope.scaling.factor", false, 0, &factor))) return st;
    if (factor == 0 && (st = hx__key_f32(L, "rope.scale_linear", false, 0, &factor))) return st;
    hp->rope_freq_scale = factor > 0 ? 1.0f / factor : 1.0f;
    char key[128];
    struct hx_gguf_str s;
    snprintf(key, sizeof key, "%s.rope.scaling.type", L->m->arch_name);
    if (hx__gguf_get_str(L->g, key, &s) == HX_OK && !(s.len == 4 && !memcmp(s.ptr, "none", 4)) &&
        !(s.len == 6 && !memcmp(s.ptr, "linear", 6)))
        HX_LOG_WARN("%s: rope scaling '%.*s' not supported; using linear scaling", L->path,
                    (int)s.len, s.ptr);
    if ((st = hx__key_f32(L, "attention.scale", false, 0, &hp->attn_scale))) return st;
    if (hp->attn_scale == 0) hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->n_q = hp->n_head * hp->head_dim;
    hp->n_kv = hp->n_head_kv * hp->head_dim;
    hp->rope_mode = L->m->arch == HX_ARCH_LLAMA ? HX_ROPE_NORM : HX_ROPE_NEOX;
    hp->qk_norm = L->m->arch == HX_ARCH_QWEN3;
    hp->sub_norms = L->m->arch == HX_ARCH_BITNET;
    hp->relu2 = false;
    if (L->m->arch == HX_ARCH_BITNET && (st = hx__bitnet_relu2(L, &hp->relu2))) return st;
    return HX_OK;
}

/* ---- tensors ---------------------------------------------------------------------------------- */

static void *hx__model_own(struct hx_model *m, size_t nbytes)
{
    void **list = hx__realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *list);
    if (!list) return NULL;
    m->owned = list;
    void *p = hx__malloc(nbytes);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

/* Look up `name`; check it is (rows, cols) with rows = 1 for vectors. */
static int hx__tensor(struct hx_loader *L, const char *name, int64_t cols, int64_t rows,
                      bool required, struct hx_weight *w, bool *found)
{
    memset(w, 0, sizeof *w);
    if (found) *found = false;
    const struct hx_gguf_tensor *t = hx__gguf_find_tensor(L->g, name);
    if (!t) {
        if (!required) return HX_OK;
        return hx__set_error(HX_E_FORMAT, "%s: required tensor '%s' is missing", L->path, name);
    }
    int64_t r = t->ne[1] * t->ne[2] * t->ne[3];
    if (t->ne[0] != cols || r != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return hx__set_error(HX_E_FORMAT,
                             "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                             L->path, name, (long long)t->ne[0], (long long)t->ne[1],
                             (long long)t->ne[2], (long long)t->ne[3], (long long)cols, (long long)rows);
    enum hx_dtype dt;
    if (hx_dtype_from_ggml(t->ggml_type, &dt) != HX_OK) {
        const char *tn = hx__ggml_type_name(t->ggml_type);
        return hx__set_error(HX_E_FORMAT, "%s: tensor '%s' has type %s (%u), which hx cannot compute with",
                             L->path, name, tn ? tn : "unknown", t->ggml_type);
    }
    if (hx_dtype_tensor_bytes(dt, rows, cols) != t->nbytes)
        return hx__set_error(HX_E_FORMAT, "%s: tensor '%s': %zu bytes do not match %s [%lld, %lld]",
                             L->path, name, t->nbytes, hx_dtype_name(dt), (long long)cols,
                             (long long)rows);
    /* I2_S: the rows are the codes; the tensor's scale, in its tail, goes with the weight */
    if (hx_dtype_tensor_scale(dt, t->data, rows, cols, &w->tensor_scale) != HX_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", hx_last_error());
        return hx__set_error(HX_E_FORMAT, "%s: tensor '%s': %s", L->path, name, msg);
    }
    w->name = t->name;
    w->type = dt;
    w->n_rows = rows;
    w->n_cols = cols;
    w->data = t->data;
    w->nbytes = t->nbytes - hx_dtype_tail_bytes(dt);
    w->scale = 1.0f;
    L->m->n_params += rows * cols;
    L->m->weight_bytes += t->nbytes;
    if (found) *found = true;
    return HX_OK;
}

/* A norm gain as F32 (converting F16/BF16 gains into owned memory). */
static int hx__norm(struct hx_loader *L, const char *name, int64_t n, bool required,
                    struct hx_weight *w)
{
    bool found;
    int st = hx__tensor(L, name, n, 1, required, w, &found);
    if (st != HX_OK || !found || w->type == HX_DTYPE_F32) return st;
    float *f = hx__model_own(L->m, (size_t)n * sizeof(float));
    if (!f) return HX_E_NOMEM;
    if ((st = hx_weight_dequantize_row(w, 0, f)) != HX_OK) return st;
    w->type = HX_DTYPE_F32;
    w->data = f;
    w->nbytes = (size_t)n * sizeof(float);
    w->tensor_scale = 1.0f;
    return HX_OK;
}

/* BitNet's optional per-matrix scalar scale `<base>.scale`. */
static int hx__scale(struct hx_loader *L, const char *base, struct hx_weight *w)
{
    char name[96];
    snprintf(name, sizeof name, "%s.scale", base);
    const struct hx_gguf_tensor *t = hx__gguf_find_tensor(L->g, name);
    if (!t) return HX_OK;
    if (t->ggml_type != 0 || t->nbytes != 4)
        return hx__set_error(HX_E_FORMAT, "%s: tensor '%s' must be one F32 value", L->path, name);
    memcpy(&w->scale, t->data, 4);
    if (!isfinite(w->scale))
        return hx__set_error(HX_E_FORMAT, "%s: tensor '%s' is not finite", L->path, name);
    return HX_OK;
}

/* One matrix named `name` of the rows of parts[0..n), without copying them: a view of the
 * mapping where the parts lie end to end there (llama.cpp's files, mkmodel's), else the parts
 * themselves (hx_weight.parts): each device reads them into its own memory when it prepares
 * the weight, so a fused weight has no host copy unless a device that runs from host memory
 * asks for one (hx_weight_host). Parts of one type, width and .scale (applied after the
 * product: one per matrix) fuse; tensor scales (I2_S's, applied inside the product where
 * TQ2_0's block d is) may differ, and then the fused matrix keeps each part's rows and scale
 * (hx_weight.n_tparts), so every row is computed as before. */
static int hx__fuse(struct hx_loader *L, const struct hx_weight *const *parts, int n,
                    const char *name, struct hx_weight *out, bool *fused)
{
    *fused = false;
    HX_ASSERT(n <= HX_WEIGHT_MAX_PARTS);
    bool adjacent = true, same_ts = true;
    for (int i = 1; i < n; i++) {
        if (parts[i]->type != parts[0]->type || parts[i]->n_cols != parts[0]->n_cols ||
            parts[i]->scale != parts[0]->scale)
            return HX_OK;
        adjacent &= (const char *)parts[i]->data ==
                    (const char *)parts[i - 1]->data + parts[i - 1]->nbytes;
        same_ts = same_ts && parts[i]->tensor_scale == parts[0]->tensor_scale;
    }
    /* a scale per part: parts of whole HX_WEIGHT_PART_ROWS, so no backend tile straddles two */
    for (int i = 0; i < n && !same_ts; i++)
        if (parts[i]->n_rows % HX_WEIGHT_PART_ROWS) return HX_OK;
    size_t total = 0;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) total += parts[i]->nbytes, rows += parts[i]->n_rows;
    char *nm = hx__model_own(L->m, strlen(name) + 1);
    if (!nm) return HX_E_NOMEM;
    memcpy(nm, name, strlen(name) + 1);
    *out = (struct hx_weight){.name = nm, .type = parts[0]->type, .n_rows = rows,
                              .n_cols = parts[0]->n_cols, .nbytes = total,
                              .scale = parts[0]->scale, .tensor_scale = parts[0]->tensor_scale};
    if (adjacent) out->data = parts[0]->data;
    else {
        out->n_parts = n;
        for (int i = 0; i < n; i++)
            out->parts[i] = (struct hx_weight_part){parts[i]->data, parts[i]->nbytes};
    }
    if (!same_ts) {
        out->n_tparts = n;
        for (int i = 0; i < n; i++) {
            out->tpart_row[i + 1] = out->tpart_row[i] + parts[i]->n_rows;
            out->tpart_tscale[i] = parts[i]->tensor_scale;
        }
    }
    *fused = true;
    return HX_OK;
}

static int hx__load_matrix(struct hx_loader *L, const char *base, int64_t cols, int64_t rows,
                           struct hx_weight *w)
{
    char name[96];
    snprintf(name, sizeof name, "%s.weight", base);
    int st = hx__tensor(L, name, cols, rows, true, w, NULL);
    return st ? st : hx__scale(L, base, w);
}

static int hx__load_layer(struct hx_loader *L, int64_t il)
{
    const struct hx_hparams *hp = &L->m->hp;
    struct hx_layer *ly = &L->m->layers[il];
    char b[96], nm[96];
    int st;
#define HX__NAME(fmt) (snprintf(b, sizeof b, "blk.%lld." fmt, (long long)il), b)
    if ((st = hx__norm(L, HX__NAME("attn_norm.weight"), hp->n_embd, true, &ly->attn_norm)) ||
        (st = hx__norm(L, HX__NAME("ffn_norm.weight"), hp->n_embd, true, &ly->ffn_norm)) ||
        (st = hx__load_matrix(L, HX__NAME("attn_q"), hp->n_embd, hp->n_q, &ly->wq)) ||
        (st = hx__load_matrix(L, HX__NAME("attn_k"), hp->n_embd, hp->n_kv, &ly->wk)) ||
        (st = hx__load_matrix(L, HX__NAME("attn_v"), hp->n_embd, hp->n_kv, &ly->wv)) ||
        (st = hx__load_matrix(L, HX__NAME("attn_output"), hp->n_q, hp->n_embd, &ly->wo)) ||
        (st = hx__load_matrix(L, HX__NAME("ffn_gate"), hp->n_embd, hp->n_ff, &ly->wgate)) ||
        (st = hx__load_matrix(L, HX__NAME("ffn_up"), hp->n_embd, hp->n_ff, &ly->wup)) ||
        (st = hx__load_matrix(L, HX__NAME("ffn_down"), hp->n_ff, hp->n_embd, &ly->wdown)))
        return st;
    if (hp->qk_norm &&
        ((st = hx__norm(L, HX__NAME("attn_q_norm.weight"), hp->head_dim, true, &ly->q_norm)) ||
         (st = hx__norm(L, HX__NAME("attn_k_norm.weight"), hp->head_dim, true, &ly->k_norm))))
        return st;
    if (hp->sub_norms &&
        ((st = hx__norm(L, HX__NAME("attn_sub_norm.weight"), hp->n_q, true, &ly->attn_sub_norm)) ||
         (st = hx__norm(L, HX__NAME("ffn_sub_norm.weight"), hp->n_ff, true, &ly->ffn_sub_norm))))
        return st;
#undef HX__NAME
    const struct hx_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
    snprintf(nm, sizeof nm, "blk.%lld.attn_qkv (fused)", (long long)il);
    if ((st = hx__fuse(L, qkv, 3, nm, &ly->wqkv, &ly->fused_qkv))) return st;
    const struct hx_weight *gu[2] = {&ly->wgate, &ly->wup};
    snprintf(nm, sizeof nm, "blk.%lld.ffn_gate_up (fused)", (long long)il);
    return hx__fuse(L, gu, 2, nm, &ly->wgu, &ly->fused_gu);
}

static void hx__summarize_types(struct hx_model *m)
{
    int counts[HX_DTYPE_COUNT] = {0};
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        enum hx_dtype t;
        if (hx_dtype_from_ggml(m->gguf->tensors[i].ggml_type, &t) == HX_OK) counts[t]++;
    }
    size_t off = 0;
    for (int t = 0; t < HX_DTYPE_COUNT; t++)
        if (counts[t] && off < sizeof m->weight_types)
            off += (size_t)snprintf(m->weight_types + off, sizeof m->weight_types - off, "%s%s x%d",
                                    off ? ", " : "", hx_dtype_name((enum hx_dtype)t), counts[t]);
}

static int hx__load_weights(struct hx_loader *L)
{
    struct hx_model *m = L->m;
    const struct hx_hparams *hp = &m->hp;
    const struct hx_gguf_tensor *te = hx__gguf_find_tensor(L->g, "token_embd.weight");
    if (!te)
        return hx__set_error(HX_E_FORMAT, "%s: required tensor 'token_embd.weight' is missing", L->path);
    m->hp.n_vocab = te->ne[1];
    int st = hx__tensor(L, "token_embd.weight", hp->n_embd, m->hp.n_vocab, true, &m->tok_embd, NULL);
    if (st || (st = hx__norm(L, "output_norm.weight", hp->n_embd, true, &m->output_norm))) return st;
    bool found = false;
    if (m->arch != HX_ARCH_BITNET &&
        (st = hx__tensor(L, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output, &found)))
        return st;
    if (!found) m->output = m->tok_embd, m->tied_output = true;
    if (m->arch == HX_ARCH_LLAMA &&
        (st = hx__norm(L, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs)))
        return st;
    m->has_rope_freqs = m->rope_freqs.data != NULL;
    if (!(m->layers = hx__calloc((size_t)hp->n_layer, sizeof *m->layers))) return HX_E_NOMEM;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if ((st = hx__load_layer(L, il))) return st;
    hx__summarize_types(m);
    return HX_OK;
}

/* ---- public ----------------------------------------------------------------------------------- */

int hx_model_load(const char *path, const struct hx_model_params *params, struct hx_model **out)
{
    if (!out) return hx__set_error(HX_E_INVAL, "hx_model_load: out is NULL");
    *out = NULL;
    hx__clear_error();
    if (!path) return hx__set_error(HX_E_INVAL, "no model path given");
    struct hx_model *m = hx__calloc(1, sizeof *m);
    if (!m) return HX_E_NOMEM;
    bool vocab_only = params && params->vocab_only;
    int st = hx__gguf_open(path, params && params->no_mmap, &m->gguf);
    if (st != HX_OK) goto fail;
    struct hx_loader L = {.m = m, .g = m->gguf, .path = path};
    if (!hx__vocab_load) {
        HX_LOG_DEBUG("%s: tokenizer not linked into this program; loading weights only", path);
    } else if ((st = hx__vocab_load(m->gguf, &m->vocab)) != HX_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hx_last_error());
        st = hx__set_error(st, "%s: tokenizer: %s", path, msg);
        goto fail;
    }
    if (!vocab_only) {
        if ((st = hx__load_arch(&L)) || (st = hx__load_hparams(&L)) || (st = hx__load_weights(&L)))
            goto fail;
        if (m->vocab && hx__vocab_n_tokens(m->vocab) > m->hp.n_vocab)
            HX_LOG_WARN("%s: tokenizer has %lld tokens, embedding only %lld", path,
                        (long long)hx__vocab_n_tokens(m->vocab), (long long)m->hp.n_vocab);
    }
    *out = m;
    return HX_OK;
fail:
    hx_model_free(m);
    return st;
}

void hx_model_free(struct hx_model *m)
{
    if (!m) return;
    for (int64_t il = 0; m->layers && il < m->hp.n_layer; il++) {
        hx__weight_host_free(&m->layers[il].wqkv);
        hx__weight_host_free(&m->layers[il].wgu);
    }
    for (int64_t i = 0; i < m->n_owned; i++) hx__free(m->owned[i]);
    hx__free(m->owned);
    hx__free(m->layers);
    if (m->vocab) hx__vocab_free(m->vocab);
    hx__tok_table_free(m->tok_table);
    hx__gguf_close(m->gguf);
    hx__free(m);
}

int hx_model_get_info(const struct hx_model *m, struct hx_model_info *out)
{
    if (!m || !out) return HX_E_INVAL;
    *out = (struct hx_model_info){
        .struct_size = sizeof *out, .arch = m->arch_name, .name = m->name,
        .n_vocab = m->hp.n_vocab, .n_embd = m->hp.n_embd, .n_layer = m->hp.n_layer,
        .n_head = m->hp.n_head, .n_head_kv = m->hp.n_head_kv, .head_dim = m->hp.head_dim,
        .n_ff = m->hp.n_ff, .n_ctx_train = m->hp.n_ctx_train, .n_params = m->n_params,
        .weight_bytes = m->weight_bytes, .weight_types = m->weight_types,
    };
    return HX_OK;
}
