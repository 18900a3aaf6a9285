/*
 * cmd-quantize.c — `engine quantize IN OUT TYPE [--embd-type T] [--output-type T]
 * [--threads N] [--progress]`: rewrite a GGUF model with its matrices in another weight type.
 *
 * Every key is copied; general.file_type and general.quantization_version are updated. Each
 * tensor gets a target type: 1-D tensors (norm gains, biases, scales, rope factors) become F32;
 * token_embd.weight gets --embd-type and output.weight --output-type (both default to TYPE,
 * or Q8_0 when TYPE is ternary or binary, which would ruin a lookup table or LM head); other
 * matrices get TYPE. A matrix whose row length is not a multiple of the target's block keeps
 * a fallback type (Q4_K -> Q4_0 -> Q8_0 -> F16, Q6_K / TQ* / Q1_0 / Q2_0 / I2_S -> Q8_0 -> F16),
 * and the command says so. Conversion is dequantize-to-f32 then the reference quantizer of
 * core/quant.c, row by row (rows split over the thread pool); tensors stream through the GGUF writer one at a
 * time, so memory stays at about one tensor. I2_S, whose one scale is the whole tensor's
 * (hx-dtype.h), is dequantized with its tail's scale and written with max |x| of the tensor in
 * its tail: the rows' maxima are kept and the tail is written after the last row. Output:
 * alignment 32, tensor order and names of the input, i.e. what llama.cpp loads (bitnet.cpp for
 * I2_S).
 *
 * Also the file-type table shared with mkmodel (app.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "hx-internal.h"

/* ---- shared: file type ------------------------------------------------------------------- */

uint32_t hx_app_file_type(int dtype)
{
    /* enum llama_ftype (formats.md §2.3); Q4_K alone is llama.cpp's Q4_K_S mix. */
    static const uint32_t ftype[HX_DTYPE_COUNT] = {
        [HX_DTYPE_F32] = 0,    [HX_DTYPE_F16] = 1,    [HX_DTYPE_BF16] = 32,  [HX_DTYPE_Q8_0] = 7,
        [HX_DTYPE_Q4_0] = 2,   [HX_DTYPE_Q4_K] = 14,  [HX_DTYPE_Q6_K] = 18,  [HX_DTYPE_TQ1_0] = 36,
        [HX_DTYPE_TQ2_0] = 37, [HX_DTYPE_Q1_0] = 40, [HX_DTYPE_Q2_0] = 41,
        /* bitnet.cpp's LLAMA_FTYPE_MOSTLY_I2_S, which its files carry; 40 is Q1_0 in mainline.
         * Informational only: readers take each tensor's type from its own id. */
        [HX_DTYPE_I2_S] = 40,
        [HX_DTYPE_Q5_K] = 16, /* Q5_K alone: llama.cpp's Q5_K_S mix */
    };
    _Static_assert(HX_DTYPE_COUNT == 13, "file type table");
    return dtype >= 0 && dtype < HX_DTYPE_COUNT ? ftype[dtype] : 0;
}

/* ---- options --------------------------------------------------------------------------------- */

struct hx_quant_opts {
    const char *in, *out;
    enum hx_dtype type, embd_type, output_type;
    bool embd_set, output_set, progress;
    int n_threads;
};

struct hx_quant_tensor {
    enum hx_dtype src, dst;
    bool fallback;
};

struct hx_quant_job {
    const struct hx_quant_opts *o;
    struct hx_gguf *g;
    struct hx_quant_tensor *plan;
    size_t *out_bytes;
    struct hx_app_progress bar;
};

static void hx_quant_usage(FILE *f)
{
    fprintf(f,
            "usage: engine quantize IN.gguf OUT.gguf TYPE [options]\n"
            "  TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K TQ1_0 TQ2_0 Q1_0 Q2_0 I2_S\n"
            "  --embd-type T     type of token_embd.weight (default TYPE; Q8_0 for TQ1_0, TQ2_0,\n"
            "                    Q1_0, Q2_0 and I2_S)\n"
            "  --output-type T   type of output.weight (same default)\n"
            "  --threads N       conversion threads (default: all cores)\n"
            "  --progress        progress line on stderr even when it is not a terminal\n"
            "1-D tensors (norms) are written as F32; a matrix whose rows do not fit TYPE's block\n"
            "keeps a fallback type, which is reported.\n");
}

static bool hx_quant_type_arg(const char *s, enum hx_dtype *out)
{
    if (hx_dtype_from_name(s, out) == HX_OK) return true;
    hx_app_error("quantize", "unknown type '%s' (known: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K TQ1_0 "
                 "TQ2_0 Q1_0 Q2_0 I2_S)", s);
    return false;
}

static bool hx_quant_low_bit(enum hx_dtype t)
{
    return t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0 || t == HX_DTYPE_Q1_0 ||
           t == HX_DTYPE_Q2_0 || t == HX_DTYPE_I2_S;
}

static int hx_quant_parse(int argc, char **argv, struct hx_quant_opts *o)
{
    const char *pos[3] = {0};
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        int64_t v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return hx_quant_usage(stdout), -1;
        if (!strcmp(a, "--progress")) o->progress = true;
        else if ((!strcmp(a, "--embd-type") || !strcmp(a, "--output-type")) && has_val) {
            bool embd = a[2] == 'e';
            if (!hx_quant_type_arg(argv[++i], embd ? &o->embd_type : &o->output_type)) return 2;
            *(embd ? &o->embd_set : &o->output_set) = true;
        } else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && has_val) {
            if (!hx_app_parse_i64(argv[++i], 1, HX_MAX_THREADS, &v)) {
                hx_app_error("quantize", "--threads wants a number from 1 to %d, not '%s'", HX_MAX_THREADS, argv[i]);
                return 2;
            }
            o->n_threads = (int)v;
        } else if (a[0] == '-' && a[1]) {
            hx_app_error("quantize", "unknown option or missing value: '%s' (see --help)", a);
            return 2;
        } else if (n_pos < 3) pos[n_pos++] = a;
        else {
            hx_app_error("quantize", "unexpected argument '%s' (IN OUT TYPE expected)", a);
            return 2;
        }
    }
    if (n_pos < 3) {
        hx_app_error("quantize", "need IN OUT TYPE (see --help)");
        return 2;
    }
    o->in = pos[0], o->out = pos[1];
    if (!hx_quant_type_arg(pos[2], &o->type)) return 2;
    enum hx_dtype dflt = hx_quant_low_bit(o->type) ? HX_DTYPE_Q8_0 : o->type;
    if (!o->embd_set) o->embd_type = dflt;
    if (!o->output_set) o->output_type = dflt;
    return 0;
}

/* IN and OUT must differ: the output replaces OUT, and IN is mapped while we write. */
static bool hx_quant_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- plan ------------------------------------------------------------------------------------ */

/* First type in t's fallback chain whose block divides n (F16 always does). */
static enum hx_dtype hx_quant_fallback(enum hx_dtype t, int64_t n)
{
    static const enum hx_dtype chain_q4k[] = {HX_DTYPE_Q4_0, HX_DTYPE_Q8_0, HX_DTYPE_F16};
    static const enum hx_dtype chain_other[] = {HX_DTYPE_Q8_0, HX_DTYPE_F16};
    const enum hx_dtype *c = t == HX_DTYPE_Q4_K ? chain_q4k : chain_other;
    size_t len = t == HX_DTYPE_Q4_K ? 3 : 2;
    for (size_t i = 0; i < len; i++)
        if (c[i] != t && n % hx_dtype_block_elems(c[i]) == 0) return c[i];
    return HX_DTYPE_F16;
}

static int hx_quant_plan_one(const struct hx_quant_opts *o, const struct hx_gguf_tensor *t,
                             struct hx_quant_tensor *q)
{
    if (hx_dtype_from_ggml(t->ggml_type, &q->src) != HX_OK) {
        const char *tn = hx__ggml_type_name(t->ggml_type);
        hx_app_error("quantize", "%s: tensor '%s' has type %s, which hx cannot convert", o->in, t->name,
                     tn ? tn : "unknown");
        return 1;
    }
    bool vector = t->n_dims <= 1;
    if (vector) q->dst = HX_DTYPE_F32;
    else if (!strcmp(t->name, "token_embd.weight")) q->dst = o->embd_type;
    else if (!strcmp(t->name, "output.weight")) q->dst = o->output_type;
    else q->dst = o->type;
    q->fallback = false;
    if (t->ne[0] % hx_dtype_block_elems(q->dst)) {
        enum hx_dtype want = q->dst;
        q->dst = hx_quant_fallback(want, t->ne[0]);
        q->fallback = true;
        hx_app_progress_note("quantize", "note: %s has rows of %lld, not a multiple of %s's block "
                             "of %lld: stored as %s", t->name, (long long)t->ne[0],
                             hx_dtype_name(want), (long long)hx_dtype_block_elems(want),
                             hx_dtype_name(q->dst));
    }
    return 0;
}

/* Metadata: every input key, then the file type and quantization version for the output. */
static int hx_quant_metadata(struct hx_quant_job *j, struct hx_gguf_writer *w)
{
    struct hx_gguf *g = j->g;
    bool any_q = false;
    for (uint64_t i = 0; i < g->n_kv; i++) /* a split input's split.* keys: the output is one file */
        if (strncmp(g->kv[i].key, "split.", 6) && hx__gguf_copy_kv(w, g, i)) return 1;
    for (uint64_t i = 0; i < g->n_tensors; i++) any_q |= hx_dtype_is_quantized(j->plan[i].dst);
    if (hx__gguf_set_alignment(w, 32) || hx__gguf_set_u32(w, "general.file_type", hx_app_file_type(j->o->type)))
        return 1;
    if (any_q) return hx__gguf_set_u32(w, "general.quantization_version", 2) ? 1 : 0;
    if (hx__gguf_find_key(g, "general.quantization_version") >= 0) hx__gguf_remove_kv(w, "general.quantization_version");
    return 0;
}

/* ---- conversion --------------------------------------------------------------------------- */

struct hx_quant_rows {
    enum hx_dtype st, dt;
    const uint8_t *src;
    uint8_t *dst;
    int64_t n;
    size_t sr, dr;
    float src_scale;  /* the source's tensor scale (I2_S), else 1 */
    float *amax;      /* per row max |x|, when the target keeps a tensor scale (I2_S) */
};

static int hx_quant_row(void *ctx, int64_t r, float *row)
{
    const struct hx_quant_rows *q = ctx;
    int st = hx_dequantize_row_scaled(q->st, q->src + (size_t)r * q->sr, row, q->n, q->src_scale);
    if (st) return st;
    if (q->amax) {
        float a = 0.0f;
        for (int64_t i = 0; i < q->n; i++) a = fmaxf(a, fabsf(row[i]));
        q->amax[r] = a;
    }
    return hx_quantize_row(q->dt, row, q->dst + (size_t)r * q->dr, q->n);
}

/* Convert rows [0, n_rows) of width n from src to dst, and dst's tail (I2_S: the tensor's max
 * |x|, as hx_quantize_tensor writes it); any row failing fails the tensor. */
static int hx_quant_rows(enum hx_dtype st, const uint8_t *src, enum hx_dtype dt, uint8_t *dst, int64_t n,
                         int64_t n_rows, int n_threads)
{
    struct hx_quant_rows q = {.st = st, .dt = dt, .src = src, .dst = dst, .n = n,
                              .sr = hx_dtype_row_bytes(st, n), .dr = hx_dtype_row_bytes(dt, n)};
    int rc = hx_dtype_tensor_scale(st, src, n_rows, n, &q.src_scale);
    if (rc) return rc;
    const size_t tail = hx_dtype_tail_bytes(dt);
    if (tail && !(q.amax = hx_calloc(n_rows > 0 ? (size_t)n_rows : 1, sizeof *q.amax)))
        return HX_E_NOMEM;
    rc = hx_app_rows(n_rows, n, n_threads, hx_quant_row, &q);
    if (!rc && tail) {
        float a = 0.0f;
        for (int64_t r = 0; r < n_rows; r++) a = fmaxf(a, q.amax[r]);
        uint8_t *p = dst + (size_t)n_rows * q.dr;
        memset(p, 0, tail);
        memcpy(p, &a, sizeof a);
    }
    hx_free(q.amax);
    return rc;
}

static int hx_quant_fill(void *user_data, uint64_t i, void *dst, size_t nbytes)
{
    struct hx_quant_job *j = user_data;
    const struct hx_gguf_tensor *t = &j->g->tensors[i];
    const struct hx_quant_tensor *q = &j->plan[i];
    if (nbytes != j->out_bytes[i]) return hx__set_error(HX_E_INTERNAL, "output size %zu, expected %zu", nbytes, j->out_bytes[i]);
    if (q->src == q->dst) {
        memcpy(dst, t->data, nbytes);
        return HX_OK;
    }
    int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    return hx_quant_rows(q->src, t->data, q->dst, dst, t->ne[0], t->ne[0] ? n_rows : 0, j->o->n_threads);
}

static void hx_quant_progress(void *user_data, uint64_t done, uint64_t total)
{
    struct hx_quant_job *j = user_data;
    hx_app_progress_step(&j->bar, done, total, j->out_bytes[done - 1]);
}

/* Declare the output tensors; returns the input and output data sizes. */
static int hx_quant_tensors(struct hx_quant_job *j, struct hx_gguf_writer *w, size_t *in_b, size_t *out_b)
{
    *in_b = *out_b = 0;
    for (uint64_t i = 0; i < j->g->n_tensors; i++) {
        const struct hx_gguf_tensor *t = &j->g->tensors[i];
        if (hx_quant_plan_one(j->o, t, &j->plan[i])) return 1;
        uint32_t nd = t->n_dims ? t->n_dims : 1;
        if (hx__gguf_add_tensor(w, t->name, hx_dtype_to_ggml(j->plan[i].dst), nd, t->ne, &j->out_bytes[i])) {
            hx_app_error("quantize", "%s", hx_last_error());
            return 1;
        }
        *in_b += t->nbytes;
        *out_b += j->out_bytes[i];
    }
    return 0;
}

static void hx_quant_summary(const struct hx_quant_job *j, size_t in_b, size_t out_b, double secs)
{
    uint64_t n = j->g->n_tensors, n_conv = 0, n_fb = 0, n_vec = 0;
    for (uint64_t i = 0; i < n; i++) {
        n_conv += j->plan[i].src != j->plan[i].dst;
        n_fb += j->plan[i].fallback;
        n_vec += j->g->tensors[i].n_dims <= 1;
    }
    hx_app_progress_note("quantize", "%s -> %s (%s): %llu tensors, %llu converted, %llu 1-D kept "
                         "F32, %llu with a fallback type", j->o->in, j->o->out,
                         hx_dtype_name(j->o->type), (unsigned long long)n,
                         (unsigned long long)n_conv, (unsigned long long)n_vec,
                         (unsigned long long)n_fb);
    hx_app_progress_note("quantize", "size %.2f MB -> %.2f MB (%.1f%%), %.2f s", in_b / 1e6,
                         out_b / 1e6, in_b ? 100.0 * (double)out_b / (double)in_b : 100.0, secs);
}

static int hx_quant_run(struct hx_quant_job *j)
{
    struct hx_gguf_writer *w = NULL;
    size_t in_b, out_b;
    int rc = 1;
    uint64_t n = j->g->n_tensors;
    j->plan = hx_calloc(n ? n : 1, sizeof *j->plan);
    j->out_bytes = hx_calloc(n ? n : 1, sizeof *j->out_bytes);
    if (!j->plan || !j->out_bytes || hx__gguf_writer_new(&w)) {
        hx_app_error("quantize", "out of memory");
        goto out;
    }
    if (hx_quant_tensors(j, w, &in_b, &out_b)) goto out;
    if (hx_quant_metadata(j, w)) {
        hx_app_error("quantize", "metadata: %s", hx_last_error());
        goto out;
    }
    double t0 = hx__time_us();
    hx_app_progress_init(&j->bar, "quantize", j->o->progress, out_b);
    int st = hx__gguf_write(w, j->o->out, hx_quant_fill, hx_quant_progress, j);
    hx_app_progress_end(&j->bar);
    if (st) {
        if (j->bar.tty) fputc('\n', stderr);
        hx_app_error("quantize", "%s (nothing written to '%s')", hx_last_error(), j->o->out);
        goto out;
    }
    hx_quant_summary(j, in_b, out_b, (hx__time_us() - t0) / 1e6);
    rc = 0;
out:
    hx__gguf_writer_free(w);
    hx_free(j->plan);
    hx_free(j->out_bytes);
    return rc;
}

int hx_cmd_quantize(int argc, char **argv)
{
    struct hx_quant_opts o = {0};
    int rc = hx_quant_parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.n_threads) o.n_threads = hx__pool_default_threads();
    if (hx_quant_same_file(o.in, o.out)) {
        hx_app_error("quantize", "IN and OUT are the same file ('%s'); write to a new file", o.out);
        return 2;
    }
    struct hx_quant_job j = {.o = &o};
    if (hx__gguf_open(o.in, false, &j.g) != HX_OK) {
        hx_app_error("quantize", "%s", hx_last_error());
        return 1;
    }
    rc = hx_quant_run(&j);
    hx__gguf_close(j.g);
    return rc;
}
