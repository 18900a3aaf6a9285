/*
 * cmd-mkmodel.c — `engine mkmodel --arch qwen3|llama|bitnet|bitnet-b1.58 --shape
 * qwen3-0.6b|tiny|bitnet-2b4t|bonsai-1.7b [--type T] --vocab VOCAB.gguf -o OUT [--seed S]
 * [--embd-type T] [--output-type T] [--scale-tensors] [--align N] [--threads N] [--progress]`: a
 * random-weight model of a real shape, for tests and benchmarks (docs/tools.md "mkmodel").
 *
 * The vocabulary (every tokenizer.* key) comes from any GGUF that has one, typically a
 * vocab-only file; n_vocab is its token count. The shape may name the real model's
 * architecture and types, which are then the defaults. Weights:
 *   - matrices of a float or 8/4/6-bit type: approximately N(0, sigma²) (a sum of four
 *     uniforms, so bounded at ±3.5 sigma), sigma = 1/sqrt(fan_in), and for the two matrices
 *     that write into the residual stream (attn_output, ffn_down) a further 1/sqrt(2·n_layer)
 *     (GPT-2's scaling), so the residual stream stays of order one through every layer;
 *   - matrices of type TQ1_0/TQ2_0/Q2_0/I2_S: ternary {-1, 0, +1}·s (each with probability
 *     1/3, s = sigma·sqrt(3/2) for the same variance), which the ternary formats store exactly;
 *     Q1_0: binary ±s with s = sigma, also exact;
 *   - token_embd: N(0, 0.02²); norm gains: 1.
 * BitNet (docs/bitnet.md): `bitnet` is llama.cpp's architecture (tensors and keys its loader
 * wants: attn_sub_norm over n_embd, ffn_sub_norm over n_ff, no output.weight, SiLU — said
 * explicitly by `bitnet.hidden_activation`, which llama.cpp ignores and hx reads), `bitnet-b1.58`
 * bitnet.cpp's (relu², implied by the name). Every layer matrix is ternary whatever its type,
 * each tensor with its own magnitude s_k = sigma·sqrt(3/2)·(0.75 + 0.5·u_k), u_k uniform from
 * the hash, rounded to fp16; with --scale-tensors (and for bitnet-b1.58 in any type but I2_S)
 * the matrix holds the bare {-1, 0, +1} and s_k is a one-element F32 tensor `<name>.scale` (the
 * per-tensor scale of I2_S, in the form both loaders read); else s_k is in the values, as
 * llama.cpp's converter writes them (I2_S: its tail, max |x| of the tensor). Values are hashed
 * from a tensor's place among the tensors that are not .scale ones, so one seed gives the same
 * weights in every type and form. Norm gains are uniform in [0.75, 1.25], so the sub-norms'
 * gains count. The chat template is BitNet 2B4T's (tokenizer.chat_template, replacing the
 * vocabulary file's).
 * Each value is a hash of (seed, tensor key, row, column), so the file is the same byte for
 * byte for a seed whatever the thread count. Embeddings are tied (no output.weight) unless
 * --output-type asks for a separate LM head. Tensors stream through the GGUF writer one at a
 * time (rows generated and quantized in parallel), so memory stays at about one tensor.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "hx-internal.h"

/* HX_MK_TERNARY: a BitNet layer matrix, ternary whatever its type; HX_MK_SCALE: its
 * one-element `.scale` tensor. */
enum hx_mk_kind { HX_MK_EMBD, HX_MK_NORM, HX_MK_MATRIX, HX_MK_TERNARY, HX_MK_SCALE };

struct hx_mk_tensor {
    char name[64];
    enum hx_dtype type;
    uint32_t n_dims;
    int64_t ne[2];
    enum hx_mk_kind kind;
    float sigma;  /* MATRIX: the spread; TERNARY: the magnitude s (1 with a .scale); SCALE: s;
                  * NORM: gains uniform in 1 ± sigma (0: all 1) */
    uint64_t key; /* what its values are hashed from: its index among the tensors that are not
                   * .scale ones, so a model's values do not depend on where its scales are */
    size_t nbytes;
};

/* The BitNet 2B4T chat template (microsoft/bitnet-b1.58-2B-4T's tokenizer_config.json), which
 * core/chat.c detects as `bitnet`. */
static const char hx_mk_bitnet_template[] =
    "{% for message in messages %}{{ message['role'] | capitalize + ': ' + message['content'] | "
    "trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant: ' }}"
    "{% endif %}";

struct hx_mk_opts {
    const char *arch, *shape_name, *vocab, *out;
    const struct hx_app_shape *shape;
    enum hx_dtype type, embd_type, output_type;
    bool type_set, embd_set, output_set, progress, scale_tensors, bitnet;
    uint64_t seed;
    int n_threads;
    uint32_t align; /* general.alignment; 0: not written (GGUF's 32) */
};

struct hx_mk_job {
    const struct hx_mk_opts *o;
    struct hx_mk_tensor *t;
    size_t n_t, cap_t;
    uint64_t n_keys; /* tensors other than .scale ones so far */
    int64_t n_vocab;
    struct hx_app_progress bar;
};

static void hx_mk_usage(FILE *f)
{
    fprintf(
        f,
        "usage: engine mkmodel --shape SHAPE [--type T] --vocab VOCAB.gguf -o OUT.gguf [options]\n"
        "  --arch A          qwen3, llama, bitnet (llama.cpp's BitNet: SiLU) or bitnet-b1.58\n"
        "                    (bitnet.cpp's: relu², per-tensor .scale);\n"
        "                    default: the shape's, else qwen3\n"
        "  --type T          matrix type: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K TQ1_0 TQ2_0 Q1_0 Q2_0\n"
        "                    I2_S (TQ1_0/TQ2_0/Q2_0/I2_S: ternary weights; Q1_0: binary weights;\n"
        "                    BitNet: always ternary); default: the shape's (bitnet-2b4t I2_S,\n"
        "                    bonsai-1.7b Q1_0)\n"
        "  --vocab FILE      GGUF whose tokenizer.* keys are copied (e.g. ggml-vocab-qwen2.gguf)\n"
        "  --seed S          random seed (default 1); same seed, same bytes\n"
        "  --embd-type T     token_embd type (default: the shape's, else T, or Q8_0 for\n"
        "                    TQ1_0/TQ2_0/Q1_0/Q2_0/I2_S)\n"
        "  --output-type T   write an untied output.weight of type T (default: tied, but the\n"
        "                    embedding's type for qwen3-8b; not BitNet)\n"
        "  --scale-tensors   bitnet: matrices as bare {-1,0,+1}, each with a per-tensor F32\n"
        "                    <name>.scale (always so for bitnet-b1.58, unless the type is I2_S,\n"
        "                    which keeps the scale in the tensor)\n"
        "  --align N         general.alignment: tensors start at multiples of N bytes (a power\n"
        "                    of two; default 32, GGUF's), e.g. so that a layer's q, k and v\n"
        "                    do not lie end to end and hx fuses them in parts (docs/policies.md)\n"
        "  --threads N       generation threads (default: all cores)\n"
        "  --progress        progress line on stderr even when it is not a terminal\n"
        "shapes: qwen3-0.6b (1024 wide, 28 layers, 16/8 heads x 128, FFN 3072),\n"
        "        tiny (256 wide, 4 layers, 4/2 heads x 64, FFN 768),\n"
        "        bitnet-2b4t (BitNet b1.58 2B4T: 2560 wide, 30 layers, 20/5 heads x 128,\n"
        "                     FFN 6912, bitnet-b1.58, I2_S, F16 embedding; Llama 3 vocabulary),\n"
        "        bonsai-1.7b (Bonsai 1.7B: Qwen3, 2048 wide, 28 layers, 16/8 heads x 128,\n"
        "                     FFN 6144, Q1_0 throughout; Qwen2 vocabulary),\n"
        "        qwen3-8b (4096 wide, 36 layers, 32/8 heads x 128, FFN 12288, untied LM head)\n");
}

/* ---- options ------------------------------------------------------------------------------- */

static bool hx_mk_type(const char *s, enum hx_dtype *out, bool *set)
{
    if (hx_dtype_from_name(s, out) == HX_OK) return *set = true;
    hx_app_error(
        "mkmodel",
        "unknown type '%s' (known: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K TQ1_0 TQ2_0 Q1_0 Q2_0 I2_S)",
        s);
    return false;
}

static int hx_mk_parse_one(struct hx_mk_opts *o, const char *a, const char *v)
{
    int64_t n;
    if (!strcmp(a, "--arch"))
        o->arch = v;
    else if (!strcmp(a, "--shape"))
        o->shape_name = v;
    else if (!strcmp(a, "--vocab"))
        o->vocab = v;
    else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
        o->out = v;
    else if (!strcmp(a, "--type"))
        return hx_mk_type(v, &o->type, &o->type_set) ? 0 : 2;
    else if (!strcmp(a, "--embd-type"))
        return hx_mk_type(v, &o->embd_type, &o->embd_set) ? 0 : 2;
    else if (!strcmp(a, "--output-type"))
        return hx_mk_type(v, &o->output_type, &o->output_set) ? 0 : 2;
    else if (!strcmp(a, "--seed")) {
        if (!hx_app_parse_i64(v, 0, INT64_MAX, &n))
            return hx_app_error("mkmodel", "bad --seed '%s'", v), 2;
        o->seed = (uint64_t)n;
    } else if (!strcmp(a, "--align")) {
        if (!hx_app_parse_i64(v, 1, 1 << 24, &n) || (n & (n - 1)))
            return hx_app_error("mkmodel", "--align wants a power of two up to 16777216, not '%s'",
                                v), 2;
        o->align = (uint32_t)n;
    } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
        if (!hx_app_parse_i64(v, 1, HX_MAX_THREADS, &n))
            return hx_app_error("mkmodel", "--threads wants 1..%d, not '%s'", HX_MAX_THREADS, v), 2;
        o->n_threads = (int)n;
    } else
        return hx_app_error("mkmodel", "unknown option '%s' (see --help)", a), 2;
    return 0;
}

/* The types that store ternary values {-1, 0, +1}·s exactly (s: a block's or the tensor's). */
static bool hx_mk_ternary_type(enum hx_dtype t)
{
    return t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_Q2_0 || t == HX_DTYPE_I2_S;
}

/* A usage error: the message, exit status 2. */
static int __attribute__((format(printf, 1, 2))) hx_mk_bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hx_app_error("mkmodel", "%s", msg);
    return 2;
}

static int hx_mk_check(struct hx_mk_opts *o)
{
    o->shape = hx_app_shape_find(o->shape_name);
    if (!o->shape)
        return hx_mk_bad("%s --shape '%s' (known: %s)", o->shape_name ? "unknown" : "missing",
                         o->shape_name ? o->shape_name : "", hx_app_shape_names());
    const struct hx_app_shape *s = o->shape;
    if (!o->arch) o->arch = s->arch ? s->arch : "qwen3";
    o->bitnet = !strcmp(o->arch, "bitnet") || !strcmp(o->arch, "bitnet-b1.58");
    if (strcmp(o->arch, "qwen3") && strcmp(o->arch, "llama") && !o->bitnet)
        return hx_mk_bad("unknown --arch '%s' (known: qwen3, llama, bitnet, bitnet-b1.58)",
                         o->arch);
    if (o->bitnet && s->n_head * s->head_dim != s->n_embd)
        return hx_mk_bad("--arch %s needs n_head x head_dim = n_embd (the BitNet loaders' attn_q, "
                         "attn_output and attn_sub_norm are n_embd wide); shape %s has %lld x %lld "
                         "!= %lld",
                         o->arch, s->name, (long long)s->n_head, (long long)s->head_dim,
                         (long long)s->n_embd);
    if (o->bitnet && o->output_set)
        return hx_mk_bad("--arch %s has no output.weight (its LM head is the embedding), so no "
                         "--output-type",
                         o->arch);
    if (o->scale_tensors && !o->bitnet)
        return hx_mk_bad("--scale-tensors is for --arch bitnet (llama.cpp's %s loader would "
                         "refuse the extra tensors)",
                         o->arch);
    /* The real model's types: the matrix type unless --type, and with it its embedding's. */
    enum hx_dtype st;
    bool shape_type = s->type && hx_dtype_from_name(s->type, &st) == HX_OK;
    if (!o->type_set && shape_type) o->type = st, o->type_set = true;
    if (!o->type_set) return hx_mk_bad("missing --type (shape %s has no default)", s->name);
    if (!o->embd_set && shape_type && o->type == st && s->embd_type &&
        hx_dtype_from_name(s->embd_type, &o->embd_type) == HX_OK)
        o->embd_set = true;
    /* The per-tensor scale goes where the format has it: I2_S's tail, else a .scale tensor. */
    if (o->scale_tensors && o->type == HX_DTYPE_I2_S)
        return hx_mk_bad("--scale-tensors with I2_S: an I2_S tensor keeps its scale itself (its "
                         "tail)");
    if (!strcmp(o->arch, "bitnet-b1.58") && o->type != HX_DTYPE_I2_S) o->scale_tensors = true;
    if (!o->vocab) return hx_mk_bad("missing --vocab FILE.gguf");
    if (!o->out) return hx_mk_bad("missing -o OUT.gguf");
    bool low = hx_mk_ternary_type(o->type) || o->type == HX_DTYPE_Q1_0;
    if (!o->embd_set) o->embd_type = low ? HX_DTYPE_Q8_0 : o->type;
    if (s->untied && !o->output_set && !o->bitnet)
        o->output_type = o->embd_type, o->output_set = true;
    struct stat a, b;
    if (stat(o->vocab, &a) == 0 && stat(o->out, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return hx_mk_bad("the output '%s' is the vocabulary file", o->out);
    return 0;
}

static int hx_mk_parse(int argc, char **argv, struct hx_mk_opts *o)
{
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return hx_mk_usage(stdout), -1;
        if (!strcmp(a, "--progress")) {
            o->progress = true;
            continue;
        }
        if (!strcmp(a, "--scale-tensors")) {
            o->scale_tensors = true;
            continue;
        }
        if (a[0] != '-')
            return hx_app_error("mkmodel", "unexpected argument '%s' (see --help)", a), 2;
        if (i + 1 >= argc) return hx_app_error("mkmodel", "option '%s' needs a value", a), 2;
        int rc = hx_mk_parse_one(o, a, argv[++i]);
        if (rc) return rc;
    }
    return hx_mk_check(o);
}

/* ---- tensor list ---------------------------------------------------------------------------- */

static int hx_mk_add(struct hx_mk_job *j, const char *name, enum hx_dtype type, int64_t ne0,
                     int64_t ne1, enum hx_mk_kind kind, float sigma)
{
    if (j->n_t == j->cap_t) {
        size_t cap = j->cap_t ? 2 * j->cap_t : 64;
        struct hx_mk_tensor *t = hx_realloc(j->t, cap * sizeof *t);
        if (!t) return HX_E_NOMEM;
        j->t = t, j->cap_t = cap;
    }
    if (kind == HX_MK_NORM || kind == HX_MK_SCALE) type = HX_DTYPE_F32;
    if (ne0 % hx_dtype_block_elems(type))
        return hx__set_error(HX_E_INVAL, "%s: rows of %lld do not fit %s's block of %lld", name,
                             (long long)ne0, hx_dtype_name(type),
                             (long long)hx_dtype_block_elems(type));
    struct hx_mk_tensor *t = &j->t[j->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0, t->ne[1] = ne1 ? ne1 : 1;
    t->kind = kind;
    t->sigma = sigma;
    t->key = kind == HX_MK_SCALE ? 0 : j->n_keys++;
    return HX_OK;
}

static inline uint64_t hx_mk_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A BitNet matrix `base`.weight: ternary, its magnitude s = sigma·sqrt(3/2)·(0.75 + 0.5·u) with
 * u uniform from (seed, its index), so every tensor has its own scale as in a trained model,
 * rounded to fp16 so that every format holds it exactly (TQ's d, I2_S's f32 tail, .scale);
 * s in the values, or 1 in the values and s in `base`.scale. */
static int hx_mk_ternary(struct hx_mk_job *j, const char *base, int64_t ne0, int64_t ne1,
                         float sigma)
{
    char name[64];
    uint64_t h = hx_mk_mix(hx_mk_mix(j->o->seed ^ 0x510e527fade682d1ull) + j->n_keys);
    float s = sigma * sqrtf(1.5f) * (0.75f + 0.5f * (float)(h >> 40) / (float)(1u << 24));
    s = hx_fp16_to_fp32(hx_fp32_to_fp16(s)); /* fp16-exact: a TQ block's d holds it as is */
    snprintf(name, sizeof name, "%s.weight", base);
    int st =
        hx_mk_add(j, name, j->o->type, ne0, ne1, HX_MK_TERNARY, j->o->scale_tensors ? 1.0f : s);
    if (st || !j->o->scale_tensors) return st;
    snprintf(name, sizeof name, "%s.scale", base);
    return hx_mk_add(j, name, HX_DTYPE_F32, 1, 0, HX_MK_SCALE, s);
}

/* One layer's matrix `blk.il.base`: a plain random matrix, or a BitNet one. */
static int hx_mk_matrix(struct hx_mk_job *j, int64_t il, const char *base, int64_t ne0, int64_t ne1,
                        float sigma)
{
    char b[48]; /* "blk.N.attn_output", and room for ".weight" in a name */
    if (j->o->bitnet) {
        snprintf(b, sizeof b, "blk.%lld.%s", (long long)il, base);
        return hx_mk_ternary(j, b, ne0, ne1, sigma);
    }
    snprintf(b, sizeof b, "blk.%lld.%s.weight", (long long)il, base);
    return hx_mk_add(j, b, j->o->type, ne0, ne1, HX_MK_MATRIX, sigma);
}

static int hx_mk_layer(struct hx_mk_job *j, int64_t il)
{
    const struct hx_app_shape *s = j->o->shape;
    int64_t nq = s->n_head * s->head_dim, nkv = s->n_head_kv * s->head_dim;
    float in_e = 1.0f / sqrtf((float)s->n_embd), res = 1.0f / sqrtf(2.0f * (float)s->n_layer);
    char b[64];
    int st = 0;
    bool qwen3 = !strcmp(j->o->arch, "qwen3"), bitnet = j->o->bitnet;
    float gain = bitnet ? 0.25f : 0.0f; /* norm gains: 1, or uniform in 1 ± 0.25 */
#define HX_MK(fmt) (snprintf(b, sizeof b, "blk.%lld." fmt, (long long)il), b)
    st = st ? st
            : hx_mk_add(j, HX_MK("attn_norm.weight"), HX_DTYPE_F32, s->n_embd, 0, HX_MK_NORM, gain);
    st = st ? st : hx_mk_matrix(j, il, "attn_q", s->n_embd, nq, in_e);
    st = st ? st : hx_mk_matrix(j, il, "attn_k", s->n_embd, nkv, in_e);
    st = st ? st : hx_mk_matrix(j, il, "attn_v", s->n_embd, nkv, in_e);
    if (qwen3) {
        st = st ? st
                : hx_mk_add(j, HX_MK("attn_q_norm.weight"), HX_DTYPE_F32, s->head_dim, 0,
                            HX_MK_NORM, gain);
        st = st ? st
                : hx_mk_add(j, HX_MK("attn_k_norm.weight"), HX_DTYPE_F32, s->head_dim, 0,
                            HX_MK_NORM, gain);
    }
    if (bitnet)
        st =
            st ? st
               : hx_mk_add(j, HX_MK("attn_sub_norm.weight"), HX_DTYPE_F32, nq, 0, HX_MK_NORM, gain);
    st = st ? st : hx_mk_matrix(j, il, "attn_output", nq, s->n_embd, res / sqrtf((float)nq));
    st = st ? st
            : hx_mk_add(j, HX_MK("ffn_norm.weight"), HX_DTYPE_F32, s->n_embd, 0, HX_MK_NORM, gain);
    st = st ? st : hx_mk_matrix(j, il, "ffn_gate", s->n_embd, s->n_ff, in_e);
    st = st ? st : hx_mk_matrix(j, il, "ffn_up", s->n_embd, s->n_ff, in_e);
    if (bitnet)
        st = st ? st
                : hx_mk_add(j, HX_MK("ffn_sub_norm.weight"), HX_DTYPE_F32, s->n_ff, 0, HX_MK_NORM,
                            gain);
    st = st ? st : hx_mk_matrix(j, il, "ffn_down", s->n_ff, s->n_embd, res / sqrtf((float)s->n_ff));
#undef HX_MK
    return st;
}

/* Same order as llama.cpp's converters: embedding, layers, final norm, LM head. */
static int hx_mk_tensors(struct hx_mk_job *j)
{
    const struct hx_app_shape *s = j->o->shape;
    int st = hx_mk_add(j, "token_embd.weight", j->o->embd_type, s->n_embd, j->n_vocab, HX_MK_EMBD,
                       0.02f);
    for (int64_t il = 0; il < s->n_layer && !st; il++) st = hx_mk_layer(j, il);
    if (!st)
        st = hx_mk_add(j, "output_norm.weight", HX_DTYPE_F32, s->n_embd, 0, HX_MK_NORM,
                       j->o->bitnet ? 0.25f : 0);
    if (!st && j->o->output_set)
        st = hx_mk_add(j, "output.weight", j->o->output_type, s->n_embd, j->n_vocab, HX_MK_MATRIX,
                       1.0f / sqrtf((float)s->n_embd));
    return st;
}

/* ---- metadata ------------------------------------------------------------------------------- */

/* Open the vocabulary file; n_vocab is its token count. */
static int hx_mk_vocab_open(struct hx_mk_job *j, struct hx_gguf **out)
{
    struct hx_gguf_arr toks;
    if (hx__gguf_open(j->o->vocab, false, out) != HX_OK) return 1;
    if (hx__gguf_get_arr(*out, "tokenizer.ggml.tokens", &toks) != HX_OK ||
        toks.elem_type != HX_GGUF_STRING || toks.count == 0) {
        hx__gguf_close(*out);
        *out = NULL;
        return hx__set_error(HX_E_FORMAT, "'%s' has no tokenizer.ggml.tokens string array",
                             j->o->vocab),
               1;
    }
    j->n_vocab = (int64_t)toks.count;
    return 0;
}

static int hx_mk_hparams(struct hx_mk_job *j, struct hx_gguf_writer *w)
{
    const struct hx_app_shape *s = j->o->shape;
    const char *a = j->o->arch;
    char key[96], name[128];
    int st = 0;
#define HX_K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    st = st ? st : hx__gguf_set_u32(w, HX_K("context_length"), (uint32_t)s->n_ctx);
    st = st ? st : hx__gguf_set_u32(w, HX_K("embedding_length"), (uint32_t)s->n_embd);
    st = st ? st : hx__gguf_set_u32(w, HX_K("block_count"), (uint32_t)s->n_layer);
    st = st ? st : hx__gguf_set_u32(w, HX_K("feed_forward_length"), (uint32_t)s->n_ff);
    st = st ? st : hx__gguf_set_u32(w, HX_K("attention.head_count"), (uint32_t)s->n_head);
    st = st ? st : hx__gguf_set_u32(w, HX_K("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    st = st ? st : hx__gguf_set_u32(w, HX_K("attention.key_length"), (uint32_t)s->head_dim);
    st = st ? st : hx__gguf_set_u32(w, HX_K("attention.value_length"), (uint32_t)s->head_dim);
    st = st ? st : hx__gguf_set_u32(w, HX_K("rope.dimension_count"), (uint32_t)s->head_dim);
    st = st ? st : hx__gguf_set_f32(w, HX_K("rope.freq_base"), s->rope_base);
    st = st ? st : hx__gguf_set_f32(w, HX_K("attention.layer_norm_rms_epsilon"), s->eps);
    st = st ? st : hx__gguf_set_u32(w, HX_K("vocab_size"), (uint32_t)j->n_vocab);
    /* llama.cpp's bitnet graph computes SiLU and reads no activation key; hx would take relu²
     * for a bitnet file with the Llama 3 vocabulary (2B4T, model-load.c), so say it. */
    if (!strcmp(a, "bitnet")) st = st ? st : hx__gguf_set_str(w, HX_K("hidden_activation"), "silu");
#undef HX_K
    snprintf(name, sizeof name, "hx-mkmodel %s %s %s seed %llu", a, s->name,
             hx_dtype_name(j->o->type), (unsigned long long)j->o->seed);
    st = st ? st : hx__gguf_set_str(w, "general.name", name);
    return st;
}

static int hx_mk_metadata(struct hx_mk_job *j, struct hx_gguf_writer *w)
{
    struct hx_gguf *v;
    if (hx_mk_vocab_open(j, &v)) return 1;
    /* general.*, then the hparams, then the vocabulary, as converters write them. */
    int st = hx__gguf_set_str(w, "general.architecture", j->o->arch);
    st = st ? st : hx__gguf_set_str(w, "general.type", "model");
    if (j->o->align) st = st ? st : hx__gguf_set_u32(w, "general.alignment", j->o->align);
    st = st ? st : hx__gguf_set_u32(w, "general.file_type", hx_app_file_type(j->o->type));
    if (!st && (hx_dtype_is_quantized(j->o->type) || hx_dtype_is_quantized(j->o->embd_type) ||
                (j->o->output_set && hx_dtype_is_quantized(j->o->output_type))))
        st = hx__gguf_set_u32(w, "general.quantization_version", 2);
    st = st ? st : hx_mk_hparams(j, w);
    for (uint64_t i = 0; i < v->n_kv && !st; i++)
        if (!strncmp(v->kv[i].key, "tokenizer.", 10) &&
            !(j->o->bitnet && !strcmp(v->kv[i].key, "tokenizer.chat_template")))
            st = hx__gguf_copy_kv(w, v, i);
    if (j->o->bitnet)
        st = st ? st : hx__gguf_set_str(w, "tokenizer.chat_template", hx_mk_bitnet_template);
    hx__gguf_close(v);
    return st ? 1 : 0;
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Row r of the tensor whose key is k: values depend only on (seed, k, r, c). */
static void hx_mk_row(const struct hx_mk_tensor *t, uint64_t seed, uint64_t k, int64_t r, float *x)
{
    int64_t n = t->ne[0];
    if (t->kind == HX_MK_SCALE || (t->kind == HX_MK_NORM && t->sigma == 0)) {
        for (int64_t c = 0; c < n; c++) x[c] = t->kind == HX_MK_SCALE ? t->sigma : 1.0f;
        return;
    }
    uint64_t key =
        hx_mk_mix(hx_mk_mix(seed ^ 0x6a09e667f3bcc908ull) ^
                  hx_mk_mix((k + 1) * 0x3c6ef372fe94f82bull) ^ (uint64_t)r * 0x9e3779b97f4a7c15ull);
    bool ternary = t->kind == HX_MK_TERNARY || hx_mk_ternary_type(t->type);
    bool binary = !ternary && t->type == HX_DTYPE_Q1_0;
    float sigma = t->sigma;
    if (t->kind == HX_MK_NORM) {
        for (int64_t c = 0; c < n; c++) {
            uint64_t h = hx_mk_mix(key + (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull);
            x[c] = 1.0f + sigma * ((float)(h >> 40) / (float)(1u << 23) - 1.0f);
        }
    } else if (ternary) {
        float s = t->kind == HX_MK_TERNARY ? sigma : sigma * sqrtf(1.5f);
        for (int64_t c = 0; c < n; c++) {
            uint64_t h = hx_mk_mix(key + (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull);
            x[c] = (float)((int)(((h >> 32) * 3) >> 32) - 1) * s;
        }
    } else if (binary) {
        for (int64_t c = 0; c < n; c++) {
            uint64_t h = hx_mk_mix(key + (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull);
            x[c] = (h >> 63) ? sigma : -sigma;
        }
    } else {
        /* Sum of four 16-bit uniforms: mean 131070, standard deviation 65536/sqrt(3). */
        const float scale = sigma * 1.7320508f / 65536.0f;
        for (int64_t c = 0; c < n; c++) {
            uint64_t h = hx_mk_mix(key + (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull);
            int64_t sum = (int64_t)(h & 0xffff) + (int64_t)((h >> 16) & 0xffff) +
                          (int64_t)((h >> 32) & 0xffff) + (int64_t)(h >> 48);
            x[c] = (float)(sum - 131070) * scale;
        }
    }
}

struct hx_mk_rows {
    const struct hx_mk_tensor *t;
    uint64_t seed;
    uint8_t *dst;
    size_t rb;
    float *amax; /* per row max |x|, for a type with a tensor scale (I2_S) */
};

static int hx_mk_row_fill(void *ctx, int64_t r, float *x)
{
    const struct hx_mk_rows *m = ctx;
    hx_mk_row(m->t, m->seed, m->t->key, r, x);
    if (m->amax) {
        float a = 0.0f;
        for (int64_t c = 0; c < m->t->ne[0]; c++) a = fmaxf(a, fabsf(x[c]));
        m->amax[r] = a;
    }
    return hx_quantize_row(m->t->type, x, m->dst + (size_t)r * m->rb, m->t->ne[0]);
}

/* A tensor's rows, then its tail if its type has one (I2_S: max |x| over the tensor, as
 * bitnet.cpp's quantizer and hx_quantize_tensor write it, and 28 zero bytes). */
static int hx_mk_fill(void *user_data, uint64_t i, void *dst, size_t nbytes)
{
    struct hx_mk_job *j = user_data;
    const struct hx_mk_tensor *t = &j->t[i];
    size_t rb = hx_dtype_row_bytes(t->type, t->ne[0]), tail = hx_dtype_tail_bytes(t->type);
    if (hx_dtype_tensor_bytes(t->type, t->ne[1], t->ne[0]) != nbytes)
        return hx__set_error(HX_E_INTERNAL, "size mismatch");
    struct hx_mk_rows m = {.t = t, .seed = j->o->seed, .dst = dst, .rb = rb};
    if (tail && !(m.amax = hx_calloc((size_t)t->ne[1], sizeof *m.amax))) return HX_E_NOMEM;
    int st = hx_app_rows(t->ne[1], t->ne[0], j->o->n_threads, hx_mk_row_fill, &m);
    if (!st && tail) {
        float a = 0.0f;
        for (int64_t r = 0; r < t->ne[1]; r++) a = fmaxf(a, m.amax[r]);
        uint8_t *p = (uint8_t *)dst + rb * (size_t)t->ne[1];
        memset(p, 0, tail);
        memcpy(p, &a, sizeof a);
    }
    hx_free(m.amax);
    return st;
}

static void hx_mk_progress(void *user_data, uint64_t done, uint64_t total)
{
    struct hx_mk_job *j = user_data;
    hx_app_progress_step(&j->bar, done, total, j->t[done - 1].nbytes);
}

/* ---- command -------------------------------------------------------------------------------- */

static int hx_mk_write(struct hx_mk_job *j)
{
    struct hx_gguf_writer *w;
    if (hx__gguf_writer_new(&w)) return hx_app_error("mkmodel", "out of memory"), 1;
    int rc = 1;
    size_t total = 0;
    int64_t params = 0;
    if (hx_mk_metadata(j, w) || hx_mk_tensors(j)) {
        hx_app_error("mkmodel", "%s", hx_last_error());
        goto out;
    }
    for (size_t i = 0; i < j->n_t; i++) {
        const struct hx_mk_tensor *t = &j->t[i];
        if (hx__gguf_add_tensor(w, t->name, hx_dtype_to_ggml(t->type), t->n_dims, t->ne,
                                &j->t[i].nbytes)) {
            hx_app_error("mkmodel", "%s", hx_last_error());
            goto out;
        }
        total += j->t[i].nbytes;
        params += t->ne[0] * t->ne[1];
    }
    double t0 = hx__time_us();
    hx_app_progress_init(&j->bar, "mkmodel", j->o->progress, total);
    if (hx__gguf_write(w, j->o->out, hx_mk_fill, hx_mk_progress, j)) {
        hx_app_error("mkmodel", "%s (nothing written to '%s')", hx_last_error(), j->o->out);
        goto out;
    }
    hx_app_progress_end(&j->bar);
    const struct hx_mk_opts *o = j->o;
    hx_app_progress_note("mkmodel",
                         "wrote %s: %s %s, %s matrices, %s embedding%s%s, vocab %lld, "
                         "%.1fM parameters, %zu tensors, %.1f MB, %.2f s",
                         o->out, o->arch, o->shape->name, hx_dtype_name(o->type),
                         hx_dtype_name(o->embd_type), o->output_set ? ", output " : " (tied)",
                         o->output_set ? hx_dtype_name(o->output_type) : "", (long long)j->n_vocab,
                         params / 1e6, j->n_t, total / 1e6, (hx__time_us() - t0) / 1e6);
    rc = 0;
out:
    hx__gguf_writer_free(w);
    return rc;
}

int hx_cmd_mkmodel(int argc, char **argv)
{
    struct hx_mk_opts o = {0};
    int rc = hx_mk_parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.n_threads) o.n_threads = hx__pool_default_threads();
    struct hx_mk_job j = {.o = &o};
    rc = hx_mk_write(&j);
    hx_free(j.t);
    return rc;
}
