/*
 * npu-manifest.c — the kernel manifest: which compiled GEMMs exist (xclbin + instruction
 * stream, M, K, N, m, k, n, columns, dtypes, B and C layouts, device generation), the §2.5
 * shape rules each must satisfy, the built-in synthetic set for the simulator (Qwen3-0.6B
 * shapes plus two tile kernels), writing that set to disk, and choosing a kernel for a weight.
 *
 * manifest.json (paths relative to its folder):
 *   { "format": "hx-npu-kernels", "version": 1, "device_generation": 4,
 *     "description": "...",
 *     "kernels": [ { "name": "qwen3-qkv", "xclbin": "final_....xclbin",
 *                    "insts": "insts_....bin", "M": 128, "K": 1024, "N": 4096,
 *                    "m": 16, "k": 64, "n": 64, "columns": 8, "dtype_in": "i8",
 *                    "dtype_out": "i32", "b_layout": "col_major", "c_layout": "row_major",
 *                    "device_generation": 4, "ninstr": "words" } ] }
 *
 * jansson parses and writes the JSON; this file checks every field's presence, type and range
 * and the shape rules. A build without jansson keeps the built-in set only: loading and
 * writing manifests return HX_E_UNSUPPORTED with the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "npu-impl.h"

#if HX_NPU_HAVE_JANSSON
#include <jansson.h>
#endif

#define HX_NPU_MANIFEST_MAX_BYTES (1u << 20)

/* ---- rules --------------------------------------------------------------------------------- */

int hx__npu_kernel_validate(const struct hx_npu_kernel_desc *d, char *err, size_t n)
{
#define HX_NPU_RULE(cond, ...)                                                               \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            snprintf(err, n, __VA_ARGS__);                                                   \
            return HX_E_FORMAT;                                                              \
        }                                                                                    \
    } while (0)
    HX_NPU_RULE(d->dev_gen == 3 || d->dev_gen == 4,
                "device generation %d (3 = NPU1, 4 = NPU2)", d->dev_gen);
    HX_NPU_RULE(d->M > 0 && d->K > 0 && d->N > 0 && d->m > 0 && d->k > 0 && d->n > 0,
                "sizes must be positive");
    HX_NPU_RULE(d->M <= 65536 && d->K <= HX_NPU_MAX_K && d->N <= (1 << 20),
                "M %lld, K %lld or N %lld out of range", (long long)d->M, (long long)d->K,
                (long long)d->N);
    HX_NPU_RULE(d->in_bytes == 1 && d->out_bytes == 4,
                "the host path needs dtype_in i8 and dtype_out i32 (exact int32 accumulation)");
    HX_NPU_RULE(d->cols == 1 || d->cols == 2 || d->cols == 4 || d->cols == 8,
                "columns %d (1, 2, 4 or 8)", d->cols);
    HX_NPU_RULE(d->cols <= (d->dev_gen == 3 ? 4 : 8), "columns %d > %d on NPU%d", d->cols,
                d->dev_gen == 3 ? 4 : 8, d->dev_gen - 2);
    HX_NPU_RULE(d->m % 16 == 0 && d->k % 8 == 0 && d->n % 16 == 0,
                "i8 tiles need m %% 16, k %% 8, n %% 16 (m %lld, k %lld, n %lld)",
                (long long)d->m, (long long)d->k, (long long)d->n);
    HX_NPU_RULE(d->M % (4 * d->m) == 0, "M %lld is not a multiple of 4m = %lld",
                (long long)d->M, (long long)(4 * d->m));
    HX_NPU_RULE((d->M / (4 * d->m)) % 2 == 0,
                "M / 4m = %lld must be even (two half transfer blocks): M must be a multiple of 8m",
                (long long)(d->M / (4 * d->m)));
    HX_NPU_RULE(d->K % d->k == 0, "K %lld is not a multiple of k %lld", (long long)d->K,
                (long long)d->k);
    HX_NPU_RULE(d->N % (d->n * d->cols) == 0, "N %lld is not a multiple of n x columns = %lld",
                (long long)d->N, (long long)(d->n * d->cols));
    HX_NPU_RULE(d->K % 4 == 0, "K %lld: A rows must be a multiple of 4 bytes", (long long)d->K);
    int64_t l1 = 2 * d->m * d->k * d->in_bytes + 2 * d->k * d->n * d->in_bytes +
                 2 * d->m * d->n * d->out_bytes + 3328;
    HX_NPU_RULE(l1 <= 65536, "L1 budget: %lld bytes per core > 64 KiB (2mk + 2kn + 8mn + 3328)",
                (long long)l1);
    HX_NPU_RULE(d->N / (d->n * d->cols) <= 64,
                "A is re-sent N / (n x columns) = %lld times; the shim repeat count is <= 64",
                (long long)(d->N / (d->n * d->cols)));
    HX_NPU_RULE(d->b_col_maj || d->k * d->N / 4 < (1 << 20),
                "row-major B strides k x N / 4 = %lld words >= 2^20", (long long)(d->k * d->N / 4));
#undef HX_NPU_RULE
    return HX_OK;
}

void hx__npu_kernel_suffix(const struct hx_npu_kernel_desc *d, char *out, size_t n)
{
    snprintf(out, n, "%lldx%lldx%lld_%lldx%lldx%lld_%dc", (long long)d->M, (long long)d->K,
             (long long)d->N, (long long)d->m, (long long)d->k, (long long)d->n, d->cols);
}

/* ---- built-in synthetic set ---------------------------------------------------------------- */

static const struct {
    const char *name;
    int64_t M, K, N, m, k, n;
} hx_npu_builtin[] = {
    {"qwen3-qkv", 128, 1024, 4096, 16, 64, 64},     /* also the LM head, tiled over N */
    {"qwen3-o", 128, 2048, 1024, 16, 64, 64},
    {"qwen3-gate-up", 128, 1024, 6144, 16, 64, 64},
    {"qwen3-down", 128, 3072, 1024, 16, 64, 64},
    {"tile-256x256", 128, 256, 256, 16, 64, 32},
    {"tile-256x1024", 128, 256, 1024, 16, 64, 64},
};

void hx__npu_manifest_builtin(struct hx_npu_manifest *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "built-in synthetic kernels (no files)");
    snprintf(out->description, sizeof out->description,
             "simulator kernels: Qwen3-0.6B GEMM shapes + 2 tile kernels, NPU2, 8 columns");
    out->dev_gen = 4;
    for (size_t i = 0; i < HX_ARRAY_LEN(hx_npu_builtin); i++) {
        struct hx_npu_kernel *k = &out->k[out->n_kernels++];
        snprintf(k->name, sizeof k->name, "%s", hx_npu_builtin[i].name);
        k->d = (struct hx_npu_kernel_desc){
            .M = hx_npu_builtin[i].M, .K = hx_npu_builtin[i].K, .N = hx_npu_builtin[i].N,
            .m = hx_npu_builtin[i].m, .k = hx_npu_builtin[i].k, .n = hx_npu_builtin[i].n,
            .cols = 8, .dev_gen = 4, .in_bytes = 1, .out_bytes = 4, .b_col_maj = true};
        snprintf(k->dtype_in, sizeof k->dtype_in, "i8");
        snprintf(k->dtype_out, sizeof k->dtype_out, "i32");
    }
}

/* ---- loading ----------------------------------------------------------------------------- */

#if HX_NPU_HAVE_JANSSON

static int hx_npu_read_text(const char *path, char **out, size_t *len, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, n, "cannot open %s: %s", path, strerror(errno));
        return HX_E_IO;
    }
    char *buf = hx_malloc(HX_NPU_MANIFEST_MAX_BYTES + 1);
    size_t got = buf ? fread(buf, 1, HX_NPU_MANIFEST_MAX_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf) return HX_E_NOMEM;
    if (bad || got > HX_NPU_MANIFEST_MAX_BYTES) {
        hx_free(buf);
        snprintf(err, n, "%s: %s", path, bad ? "read error" : "larger than 1 MiB");
        return bad ? HX_E_IO : HX_E_FORMAT;
    }
    buf[got] = '\0';
    *out = buf, *len = got;
    return HX_OK;
}

/* An integer member: a JSON integer, or a number with an integral value in range (128.0, 1e2). */
static bool hx_npu_jnum(const json_t *o, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) return *out = (int64_t)json_integer_value(v), true;
    if (!json_is_real(v)) return false;
    double d = json_real_value(v);
    if (!(d >= -0x1p63 && d < 0x1p63) || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

/* A string member, NULL if absent or not a string. */
static const char *hx_npu_jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* An optional string member: *out NULL when absent; false when present but not a string. */
static bool hx_npu_jstr_opt(const json_t *o, const char *key, const char **out)
{
    const json_t *v = json_object_get(o, key);
    *out = json_string_value(v);
    return !v || *out;
}

static int hx_npu_path(const char *dir, const char *rel, char *out, size_t n, char *err, size_t en)
{
    int w = rel[0] == '/' ? snprintf(out, n, "%s", rel) : snprintf(out, n, "%s/%s", dir, rel);
    if (w < 0 || (size_t)w >= n) {
        snprintf(err, en, "path too long: %s", rel);
        return HX_E_FORMAT;
    }
    return HX_OK;
}

static int hx_npu_dtype_bytes(const char *s, bool in)
{
    if (!s) return -1;
    if (!strcmp(s, "i8")) return 1;
    if (!strcmp(s, "i16")) return 2;
    if (!strcmp(s, "i32") && !in) return 4;
    if (!strcmp(s, "bf16")) return 2;
    if (!strcmp(s, "f32") && !in) return 4;
    return -1;
}

static int hx_npu_layout(const json_t *o, const char *key, bool *col_maj)
{
    const char *s;
    if (!hx_npu_jstr_opt(o, key, &s)) return HX_E_FORMAT;
    if (!s || !strcmp(s, "row_major")) return *col_maj = false, HX_OK;
    if (!strcmp(s, "col_major")) return *col_maj = true, HX_OK;
    return HX_E_FORMAT;
}

static int hx_npu_parse_kernel(const json_t *o, const char *dir, int gen, struct hx_npu_kernel *k,
                               char *err, size_t n)
{
    const char *name = hx_npu_jstr(o, "name"), *xb = hx_npu_jstr(o, "xclbin"),
               *in = hx_npu_jstr(o, "insts");
    if (!name || !*name || strlen(name) >= sizeof k->name)
        return snprintf(err, n, "a kernel lacks a valid \"name\""), HX_E_FORMAT;
    snprintf(k->name, sizeof k->name, "%s", name);
    if (!xb || !in)
        return snprintf(err, n, "kernel %s: \"xclbin\" and \"insts\" are required", name),
               HX_E_FORMAT;
    char sub[400];
    int st = hx_npu_path(dir, xb, k->xclbin, sizeof k->xclbin, sub, sizeof sub);
    if (st == HX_OK) st = hx_npu_path(dir, in, k->insts, sizeof k->insts, sub, sizeof sub);
    if (st) return snprintf(err, n, "kernel %s: %.300s", name, sub), st;
    int64_t v[7];
    static const char *const keys[7] = {"M", "K", "N", "m", "k", "n", "columns"};
    for (int i = 0; i < 7; i++)
        if (!hx_npu_jnum(o, keys[i], &v[i]))
            return snprintf(err, n, "kernel %s: \"%s\" missing or not an integer", name, keys[i]),
                   HX_E_FORMAT;
    if (v[6] != (int)v[6])
        return snprintf(err, n, "kernel %s: columns %lld (1, 2, 4 or 8)", name, (long long)v[6]),
               HX_E_FORMAT;
    int64_t g = gen;
    if (json_object_get(o, "device_generation") &&
        (!hx_npu_jnum(o, "device_generation", &g) || g != (int)g))
        return snprintf(err, n, "kernel %s: bad \"device_generation\"", name), HX_E_FORMAT;
    if (g == 0)
        return snprintf(err, n, "kernel %s: no \"device_generation\" (3 = NPU1, 4 = NPU2) in the "
                        "kernel or at the top level", name), HX_E_FORMAT;
    const char *di = hx_npu_jstr(o, "dtype_in"), *dout = hx_npu_jstr(o, "dtype_out");
    snprintf(k->dtype_in, sizeof k->dtype_in, "%s", di ? di : "?");
    snprintf(k->dtype_out, sizeof k->dtype_out, "%s", dout ? dout : "?");
    int ib = hx_npu_dtype_bytes(di, true), ob = hx_npu_dtype_bytes(dout, false);
    if (ib < 0 || ob < 0)
        return snprintf(err, n, "kernel %s: unknown dtype_in/dtype_out '%s'/'%s'", name,
                        k->dtype_in, k->dtype_out), HX_E_FORMAT;
    k->d = (struct hx_npu_kernel_desc){.M = v[0], .K = v[1], .N = v[2], .m = v[3], .k = v[4],
                                       .n = v[5], .cols = (int)v[6], .dev_gen = (int)g,
                                       .in_bytes = ib, .out_bytes = ob};
    if (hx_npu_layout(o, "b_layout", &k->d.b_col_maj) ||
        hx_npu_layout(o, "c_layout", &k->d.c_col_maj))
        return snprintf(err, n, "kernel %s: layouts are \"row_major\" or \"col_major\"", name),
               HX_E_FORMAT;
    const char *ni;
    if (!hx_npu_jstr_opt(o, "ninstr", &ni) || (ni && strcmp(ni, "words") && strcmp(ni, "bytes")))
        return snprintf(err, n, "kernel %s: \"ninstr\" is \"words\" or \"bytes\"", name), HX_E_FORMAT;
    k->ninstr_bytes = ni && !strcmp(ni, "bytes");
    if ((st = hx__npu_kernel_validate(&k->d, sub, sizeof sub)))
        return snprintf(err, n, "kernel %s: %.300s", name, sub), st;
    if (gen && k->d.dev_gen != gen)
        return snprintf(err, n, "kernel %s: device generation %d in a manifest for generation %d",
                        name, k->d.dev_gen, gen), HX_E_FORMAT;
    return HX_OK;
}

static int hx_npu_parse_manifest(const json_t *root, const char *dir, struct hx_npu_manifest *out,
                                 char *err, size_t n)
{
    const char *fmt = hx_npu_jstr(root, "format");
    int64_t ver = 0, gen = 0;
    if (!fmt || strcmp(fmt, "hx-npu-kernels"))
        return snprintf(err, n, "\"format\" must be \"hx-npu-kernels\""), HX_E_FORMAT;
    if (!hx_npu_jnum(root, "version", &ver) || ver != 1)
        return snprintf(err, n, "unsupported manifest \"version\" (this engine reads 1)"), HX_E_FORMAT;
    if (json_object_get(root, "device_generation") &&
        (!hx_npu_jnum(root, "device_generation", &gen) || (gen != 3 && gen != 4)))
        return snprintf(err, n, "\"device_generation\" must be 3 (NPU1) or 4 (NPU2)"), HX_E_FORMAT;
    const char *desc;
    if (!hx_npu_jstr_opt(root, "description", &desc))
        return snprintf(err, n, "\"description\" must be a string"), HX_E_FORMAT;
    snprintf(out->description, sizeof out->description, "%s", desc ? desc : "");
    const json_t *ks = json_object_get(root, "kernels");
    if (!json_is_array(ks) || json_array_size(ks) == 0)
        return snprintf(err, n, "\"kernels\" must be a non-empty array"), HX_E_FORMAT;
    for (size_t i = 0; i < json_array_size(ks); i++) {
        const json_t *e = json_array_get(ks, i);
        if (out->n_kernels >= HX_NPU_MAX_KERNELS)
            return snprintf(err, n, "more than %d kernels", HX_NPU_MAX_KERNELS), HX_E_FORMAT;
        if (!json_is_object(e)) return snprintf(err, n, "a kernel entry is not an object"), HX_E_FORMAT;
        struct hx_npu_kernel *k = &out->k[out->n_kernels];
        int st = hx_npu_parse_kernel(e, dir, (int)gen, k, err, n);
        if (st) return st;
        for (int j = 0; j < out->n_kernels; j++)
            if (!strcmp(out->k[j].name, k->name))
                return snprintf(err, n, "kernel name '%s' appears twice", k->name), HX_E_FORMAT;
        gen = k->d.dev_gen;
        out->n_kernels++;
    }
    out->dev_gen = (int)gen;
    return HX_OK;
}

/* jansson parses (strict RFC 8259: UTF-8 checked, no NUL in strings, no duplicate member
 * names, depth <= 2048); the checks above validate every field's type and range. */
int hx__npu_manifest_parse(const char *text, size_t len, const char *dir,
                           struct hx_npu_manifest *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!root) {
#if JANSSON_VERSION_HEX >= 0x020b00
        if (json_error_code(&je) == json_error_out_of_memory)
            return snprintf(err, n, "out of memory"), HX_E_NOMEM;
#endif
        if (je.line > 0) snprintf(err, n, "line %d col %d: %s", je.line, je.column, je.text);
        else snprintf(err, n, "%s", je.text);
        return HX_E_FORMAT;
    }
    int st = json_is_object(root) ? hx_npu_parse_manifest(root, dir, out, err, n)
                                  : (snprintf(err, n, "top level is not an object"), HX_E_FORMAT);
    json_decref(root);
    return st;
}

int hx__npu_manifest_load(const char *dir, struct hx_npu_manifest *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    char path[600];
    if (snprintf(path, sizeof path, "%s/manifest.json", dir) >= (int)sizeof path)
        return snprintf(err, n, "kernel directory path too long"), HX_E_INVAL;
    snprintf(out->source, sizeof out->source, "%s", path);
    char *text = NULL;
    size_t len = 0;
    int st = hx_npu_read_text(path, &text, &len, err, n);
    if (st) return st;
    char sub[400] = "";
    st = hx__npu_manifest_parse(text, len, dir, out, sub, sizeof sub);
    hx_free(text);
    snprintf(out->source, sizeof out->source, "%s", path);
    if (st) snprintf(err, n, "%s: %s", path, sub);
    return st;
}

#else /* no jansson: the built-in kernels only */

static int hx_npu_no_jansson(char *err, size_t n)
{
    snprintf(err, n, "this engine was built without jansson (libjansson-dev), so it reads and "
             "writes no kernel manifests; npu-sim still has its built-in kernels");
    return HX_E_UNSUPPORTED;
}

int hx__npu_manifest_parse(const char *text, size_t len, const char *dir,
                           struct hx_npu_manifest *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    return hx_npu_no_jansson(err, n);
}

int hx__npu_manifest_load(const char *dir, struct hx_npu_manifest *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s/manifest.json", dir);
    return hx_npu_no_jansson(err, n);
}

#endif

/* ---- writing the synthetic set --------------------------------------------------------------- */

#if HX_NPU_HAVE_JANSSON

static int hx_npu_write_file(const char *path, const void *data, size_t len, char *err, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return snprintf(err, n, "cannot create %s: %s", path, strerror(errno)), HX_E_IO;
    bool ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    if (!ok) return snprintf(err, n, "cannot write %s", path), HX_E_IO;
    return HX_OK;
}

/* The simulator's stand-in for an xclbin: a text descriptor it checks against the manifest. */
static int hx_npu_sim_xclbin_text(const struct hx_npu_kernel *k, char *out, size_t n)
{
    const struct hx_npu_kernel_desc *d = &k->d;
    return snprintf(out, n,
                    "HXSIM-XCLBIN 1\nkernel MLIR_AIE\n"
                    "M %lld K %lld N %lld m %lld k %lld n %lld cols %d gen %d in i8 out i32 "
                    "b_col_maj %d c_col_maj %d\n"
                    "Not a real xclbin: a design descriptor for hx's kernel-contract simulator.\n",
                    (long long)d->M, (long long)d->K, (long long)d->N, (long long)d->m,
                    (long long)d->k, (long long)d->n, d->cols, d->dev_gen, d->b_col_maj,
                    d->c_col_maj);
}

static int hx_npu_write_kernel(const char *dir, const struct hx_npu_kernel *k, char *xb,
                               char *in, size_t names, char *err, size_t n)
{
    char suffix[96], path[700], text[512];
    hx__npu_kernel_suffix(&k->d, suffix, sizeof suffix);
    snprintf(xb, names, "final_%s.xclbin", suffix);
    snprintf(in, names, "insts_%s.bin", suffix);
    int len = hx_npu_sim_xclbin_text(k, text, sizeof text);
    snprintf(path, sizeof path, "%s/%s", dir, xb);
    int st = hx_npu_write_file(path, text, (size_t)len, err, n);
    if (st) return st;
    uint32_t words[256];
    size_t nw = 0;
    if ((st = hx__npu_txn_generate(&k->d, words, HX_ARRAY_LEN(words), &nw)) || nw > 256)
        return snprintf(err, n, "cannot generate instructions for %s", k->name), HX_E_INTERNAL;
    uint8_t bytes[1024];
    for (size_t i = 0; i < nw; i++)
        for (int b = 0; b < 4; b++) bytes[4 * i + (size_t)b] = (uint8_t)(words[i] >> (8 * b));
    snprintf(path, sizeof path, "%s/%s", dir, in);
    return hx_npu_write_file(path, bytes, nw * 4, err, n);
}

static int hx_npu_sb_sink(const char *buf, size_t size, void *data)
{
    hx__sb_append(data, buf, size);
    return 0;
}

static void hx_npu_sb_dump(struct hx_strbuf *sb, const json_t *v, size_t flags)
{
    if (!v || json_dump_callback(v, hx_npu_sb_sink, sb, flags | JSON_ENCODE_ANY)) sb->failed = true;
}

/* The manifest as jansson writes it, one top-level member and one array element per line: an
 * object per line is what tests/npu/run.sh's shape listing reads. */
static void hx_npu_dump_manifest(json_t *root, struct hx_strbuf *sb)
{
    const char *key;
    json_t *v;
    bool first = true;
    hx__sb_append(sb, "{", 1);
    json_object_foreach(root, key, v) {
        hx__sb_printf(sb, "%s\n  ", first ? "" : ",");
        first = false;
        json_t *jk = json_string(key);
        hx_npu_sb_dump(sb, jk, 0);
        json_decref(jk);
        hx__sb_append(sb, ": ", 2);
        if (!json_is_array(v) || json_array_size(v) == 0) {
            hx_npu_sb_dump(sb, v, 0);
            continue;
        }
        hx__sb_append(sb, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            hx__sb_printf(sb, "%s\n    ", i ? "," : "");
            hx_npu_sb_dump(sb, json_array_get(v, i), 0);
        }
        hx__sb_append(sb, "\n  ]", 4);
    }
    hx__sb_append(sb, "\n}\n", 3);
}

int hx__npu_write_synthetic_kernels(const char *dir, char *err, size_t n)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return snprintf(err, n, "cannot create %s: %s", dir, strerror(errno)), HX_E_IO;
    struct hx_npu_manifest man;
    hx__npu_manifest_builtin(&man);
    char desc[300];
    snprintf(desc, sizeof desc, "%s (generated; the xclbins are simulator descriptors)",
             man.description);
    json_t *root = json_pack("{s:s, s:i, s:i, s:s}", "format", "hx-npu-kernels", "version", 1,
                             "device_generation", man.dev_gen, "description", desc);
    json_t *ks = json_array();
    int st = root && ks && !json_object_set(root, "kernels", ks) ? HX_OK : HX_E_NOMEM;
    for (int i = 0; i < man.n_kernels && st == HX_OK; i++) {
        const struct hx_npu_kernel *k = &man.k[i];
        char xb[128], in[128];
        st = hx_npu_write_kernel(dir, k, xb, in, sizeof xb, err, n);
        if (st) break;
        json_t *e = json_pack(
            "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:s, s:s, s:s, s:s, s:i, s:s}",
            "name", k->name, "xclbin", xb, "insts", in, "M", (json_int_t)k->d.M,
            "K", (json_int_t)k->d.K, "N", (json_int_t)k->d.N, "m", (json_int_t)k->d.m,
            "k", (json_int_t)k->d.k, "n", (json_int_t)k->d.n, "columns", k->d.cols,
            "dtype_in", k->dtype_in, "dtype_out", k->dtype_out,
            "b_layout", k->d.b_col_maj ? "col_major" : "row_major",
            "c_layout", k->d.c_col_maj ? "col_major" : "row_major",
            "device_generation", k->d.dev_gen, "ninstr", k->ninstr_bytes ? "bytes" : "words");
        if (json_array_append_new(ks, e)) st = HX_E_NOMEM;
    }
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    if (st == HX_OK) hx_npu_dump_manifest(root, &sb);
    if (st == HX_OK && sb.failed) st = HX_E_NOMEM;
    if (st == HX_E_NOMEM) snprintf(err, n, "out of memory writing %s/manifest.json", dir);
    if (st == HX_OK) {
        char path[600];
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        st = hx_npu_write_file(path, sb.data, sb.len, err, n);
    }
    hx__sb_free(&sb);
    json_decref(ks);
    json_decref(root);
    return st;
}

#else

int hx__npu_write_synthetic_kernels(const char *dir, char *err, size_t n)
{
    snprintf(err, n, "this engine was built without jansson (libjansson-dev), so it writes no "
             "kernel manifests");
    return HX_E_UNSUPPORTED;
}

#endif

/* ---- choosing a kernel ------------------------------------------------------------------------- */

double hx__npu_model_call_us(const struct hx_npu_kernel_desc *d)
{
    double bytes = (double)(d->M * d->K * d->in_bytes + d->K * d->N * d->in_bytes +
                            d->M * d->N * d->out_bytes);
    double ops = 2.0 * (double)d->M * (double)d->K * (double)d->N;
    return 55.0 + bytes / 40e3 + ops / 25e6;
}

bool hx__npu_pick_kernel(const struct hx_npu_manifest *man, const bool *usable, int64_t K,
                         int64_t N, struct hx_npu_choice *out)
{
    *out = (struct hx_npu_choice){.kernel = -1};
    if (K <= 0 || N <= 0 || K > HX_NPU_MAX_K) return false;
    for (int i = 0; i < man->n_kernels; i++) {
        const struct hx_npu_kernel_desc *d = &man->k[i].d;
        if ((usable && !usable[i]) || d->in_bytes != 1 || d->out_bytes != 4) continue;
        int64_t n_kt = (K + d->K - 1) / d->K, n_nt = (N + d->N - 1) / d->N;
        double cost = (double)(n_kt * n_nt) * hx__npu_model_call_us(d);
        if (out->kernel < 0 || cost < out->cost_us)
            *out = (struct hx_npu_choice){.kernel = i, .n_kt = n_kt, .n_nt = n_nt, .cost_us = cost};
    }
    return out->kernel >= 0;
}
