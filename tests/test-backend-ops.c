/*
 * test-backend-ops.c — every registered backend device against `ref`, through the registry
 * and the hx__dev_* wrappers only: MATMUL for every weight type (decode m = 1 and prefill m = 7
 * and 64, K and N not multiples of the tile where the type allows, a Qwen3-0.6B shape at
 * m = 1), and the other ops. NMSE thresholds per op (docs/testing.md), NaN/Inf checks, guard
 * bytes after every output; cases a backend's supports() refuses are counted as skipped.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "registry.h"

#define GUARD 256

static struct hx_device *hx_t_ref;

struct hx_t_dev {
    struct hx_device *dev;
};

static float hx_t_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Weight rows for a type: random, ternary for TQ types, so both paths see their real inputs. */
static void *hx_t_weight(enum hx_dtype t, int64_t n, int64_t k, uint64_t seed, struct hx_weight *w)
{
    size_t rb = hx_dtype_row_bytes(t, k);
    uint8_t *data = malloc(rb * (size_t)n);
    float *row = malloc((size_t)k * sizeof *row);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < k; i++) {
            float v = hx_t_rand(&seed);
            if (t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_TQ2_0) v = (float)(v > 0.33f) - (float)(v < -0.33f);
            row[i] = v * 0.05f;
        }
        hx_quantize_row(t, row, data + (size_t)j * rb, k);
    }
    free(row);
    *w = (struct hx_weight){.name = "w", .type = t, .n_rows = n, .n_cols = k, .data = data,
                            .nbytes = rb * (size_t)n, .scale = 1.0f};
    return data;
}

/* Run one op on dev: inputs are host arrays (n_rows x cols), output read back. */
struct hx_t_case {
    struct hx_op_desc desc;
    const float *src[3];
    int64_t src_cols[3];
    int n_src;
    int64_t dst_cols;
    const struct hx_weight *w;
    const int32_t *tokens, *pos, *seq;
    int64_t kv_rows, kv_cols;
};

static int hx_t_run(struct hx_device *dev, const struct hx_t_case *c, float *out, int *guard_ok)
{
    struct hx_buffer *src[3] = {0}, *dst = NULL, *kk = NULL, *vv = NULL;
    struct hx_op op = {.desc = c->desc, .weight = c->w};
    int64_t n = c->desc.n_rows;
    int st = HX_OK;
    for (int i = 0; i < c->n_src && st == HX_OK; i++) {
        size_t nb = (size_t)n * (size_t)c->src_cols[i] * 4;
        st = hx__dev_buffer_alloc(dev, nb, &src[i]);
        if (st == HX_OK) st = hx__dev_buffer_write(src[i], 0, c->src[i], nb);
        op.src[i] = (struct hx_tensor_ref){src[i], 0, n, c->src_cols[i], (size_t)c->src_cols[i] * 4};
    }
    size_t dnb = (size_t)n * (size_t)c->dst_cols * 4;
    if (st == HX_OK) st = hx__dev_buffer_alloc(dev, dnb + GUARD, &dst);
    uint8_t pattern[GUARD];
    memset(pattern, 0xA5, sizeof pattern);
    if (st == HX_OK) st = hx__dev_buffer_write(dst, dnb, pattern, GUARD);
    op.dst = (struct hx_tensor_ref){dst, 0, n, c->dst_cols, (size_t)c->dst_cols * 4};
    if (c->kv_rows && st == HX_OK) {
        size_t kb = (size_t)c->kv_rows * (size_t)c->kv_cols * 4;
        st = hx__dev_buffer_alloc(dev, kb, &kk);
        if (st == HX_OK) st = hx__dev_buffer_alloc(dev, kb, &vv);
        op.k_cache = (struct hx_tensor_ref){kk, 0, c->kv_rows, c->kv_cols, (size_t)c->kv_cols * 4};
        op.v_cache = (struct hx_tensor_ref){vv, 0, c->kv_rows, c->kv_cols, (size_t)c->kv_cols * 4};
    }
    if (c->w && st == HX_OK) st = hx__dev_weight_prepare(dev, c->w, &op.weight_handle);
    struct hx_split sp = {.struct_size = sizeof sp, .ops = &op, .n_ops = 1, .n_rows = n,
                          .tokens = c->tokens, .pos = c->pos, .seq = c->seq};
    if (st == HX_OK) st = hx__dev_run(dev, &sp);
    if (st == HX_OK) st = hx__dev_synchronize(dev);
    if (st == HX_OK) st = hx__dev_buffer_read(dst, 0, out, dnb);
    uint8_t back[GUARD];
    if (st == HX_OK) st = hx__dev_buffer_read(dst, dnb, back, GUARD);
    *guard_ok = st == HX_OK && !memcmp(back, pattern, GUARD);
    if (c->w && op.weight_handle) hx__dev_weight_release(dev, op.weight_handle);
    for (int i = 0; i < 3; i++) hx__dev_buffer_free(src[i]);
    hx__dev_buffer_free(dst);
    hx__dev_buffer_free(kk);
    hx__dev_buffer_free(vv);
    return st;
}

static int hx_passed, hx_failed, hx_skipped;

/* NMSE thresholds: f32 paths ~1e-10 (summation order only); matmuls whose activations are
 * quantized to int8 by the fast backends: per-element error <= amax/254 per block, which
 * over random data gives NMSE ~1e-5, so 5e-4 leaves room for the weight's own rounding. */
static double hx_t_threshold(const struct hx_op_desc *d)
{
    if (d->kind != HX_OP_MATMUL) return d->kind == HX_OP_ATTN ? 1e-7 : 1e-9;
    return d->wtype == HX_DTYPE_F32 ? 1e-9 : 5e-4;
}

static void hx_t_compare(struct hx_device *dev, const struct hx_t_case *c, const char *label)
{
    if (!hx__dev_supports(dev, &c->desc)) {
        hx_skipped++;
        printf("SKIP %-6s %-10s %s (unsupported)\n", dev->id, hx_op_kind_name(c->desc.kind), label);
        return;
    }
    size_t cnt = (size_t)c->desc.n_rows * (size_t)c->dst_cols;
    float *want = calloc(cnt, 4), *got = calloc(cnt, 4);
    int g1, g2;
    int s1 = hx_t_run(hx_t_ref, c, want, &g1), s2 = hx_t_run(dev, c, got, &g2);
    double num = 0, den = 0;
    int finite = 1;
    for (size_t i = 0; i < cnt; i++) {
        finite &= isfinite(got[i]) != 0;
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    double nmse = den > 0 ? num / den : num, thr = hx_t_threshold(&c->desc);
    int ok = s1 == HX_OK && s2 == HX_OK && g2 && finite && nmse <= thr;
    printf("%s %-6s %-10s %-28s nmse %.3g (max %.1g)%s%s\n", ok ? "OK  " : "FAIL", dev->id,
           hx_op_kind_name(c->desc.kind), label, nmse, thr, g2 ? "" : " GUARD OVERWRITTEN",
           finite ? "" : " NaN/Inf");
    if (ok) hx_passed++;
    else hx_failed++;
    free(want);
    free(got);
}

static float *hx_t_act(int64_t n, uint64_t seed)
{
    float *a = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) a[i] = hx_t_rand(&seed);
    return a;
}

static void hx_t_matmuls(struct hx_device *dev)
{
    static const int64_t shapes[][3] = {{1, 256, 33}, {7, 512, 65}, {64, 768, 96}, {1, 1024, 4096}};
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
            if (hx_dtype_row_bytes((enum hx_dtype)t, k) == 0) continue;
            struct hx_weight w;
            void *data = hx_t_weight((enum hx_dtype)t, n, k, 7 + (uint64_t)s, &w);
            float *x = hx_t_act(m * k, 99);
            struct hx_t_case c = {.desc = {.kind = HX_OP_MATMUL, .cls = HX_CLASS_QKV, .n_rows = m,
                                           .n_in = k, .n_out = n, .wtype = (enum hx_dtype)t},
                                  .src = {x}, .src_cols = {k}, .n_src = 1, .dst_cols = n, .w = &w};
            char label[64];
            snprintf(label, sizeof label, "%s m=%lld %lld->%lld", hx_dtype_name((enum hx_dtype)t),
                     (long long)m, (long long)k, (long long)n);
            hx_t_compare(dev, &c, label);
            free(x);
            free(data);
        }
    }
}

static void hx_t_other_ops(struct hx_device *dev)
{
    const int64_t n = 5, hd = 64, nh = 4, nkv = 2, ctx = 16;
    int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0, 0, 0, 0, 0}, tok[5] = {3, 1, 4, 1, 5};
    float *a = hx_t_act(n * nh * hd, 1), *b = hx_t_act(n * nh * hd, 2), *k = hx_t_act(n * nkv * hd, 3),
          *v = hx_t_act(n * nkv * hd, 4), gain[256];
    for (int i = 0; i < 256; i++) gain[i] = 1.0f + 0.01f * (float)i;
    struct hx_weight g = {.name = "gain", .type = HX_DTYPE_F32, .n_rows = 1, .n_cols = 256, .data = gain,
                          .nbytes = sizeof gain, .scale = 1};
    struct hx_t_case norm = {.desc = {.kind = HX_OP_RMS_NORM, .n_rows = n, .n_in = 256, .n_out = 256,
                                      .p.norm = {1e-6f, 256}},
                             .src = {a}, .src_cols = {256}, .n_src = 1, .dst_cols = 256, .w = &g};
    hx_t_compare(dev, &norm, "rows of 256");
    struct hx_weight gh = g;
    gh.n_cols = hd;
    struct hx_t_case qk = norm;
    qk.desc.p.norm.group = hd, qk.w = &gh;
    hx_t_compare(dev, &qk, "per head (group 64)");
    for (int mode = 0; mode < 2; mode++) {
        struct hx_t_case rope = {.desc = {.kind = HX_OP_ROPE, .n_rows = n, .n_in = nh * hd, .n_out = nh * hd,
                                          .p.rope = {(int32_t)nh, (int32_t)hd, 32, 10000.0f, 1.0f,
                                                     (enum hx_rope_mode)mode}},
                                 .src = {a}, .src_cols = {nh * hd}, .n_src = 1, .dst_cols = nh * hd, .pos = pos};
        hx_t_compare(dev, &rope, mode ? "neox n_rot 32" : "norm n_rot 32");
    }
    struct hx_t_case attn = {.desc = {.kind = HX_OP_ATTN, .n_rows = n, .n_in = nh * hd, .n_out = nh * hd,
                                      .p.attn = {(int32_t)nh, (int32_t)nkv, (int32_t)hd, 0.125f, ctx, 1}},
                             .src = {a, k, v}, .src_cols = {nh * hd, nkv * hd, nkv * hd}, .n_src = 3,
                             .dst_cols = nh * hd, .pos = pos, .seq = seq, .kv_rows = ctx, .kv_cols = nkv * hd};
    hx_t_compare(dev, &attn, "gqa 4/2 prefill 5");
    static const enum hx_op_kind ew[] = {HX_OP_SWIGLU, HX_OP_RELU2_GLU, HX_OP_ADD};
    for (size_t i = 0; i < 3; i++) {
        struct hx_t_case c = {.desc = {.kind = ew[i], .n_rows = n, .n_in = 256, .n_out = 256},
                              .src = {a, b}, .src_cols = {256, 256}, .n_src = 2, .dst_cols = 256};
        hx_t_compare(dev, &c, "256 cols");
    }
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        struct hx_weight w;
        void *data = hx_t_weight((enum hx_dtype)t, 8, 256, 11, &w);
        struct hx_t_case e = {.desc = {.kind = HX_OP_EMBED, .n_rows = n, .n_in = 8, .n_out = 256,
                                       .wtype = (enum hx_dtype)t},
                              .dst_cols = 256, .w = &w, .tokens = tok};
        hx_t_compare(dev, &e, hx_dtype_name((enum hx_dtype)t));
        free(data);
    }
    free(a), free(b), free(k), free(v);
}

int main(int argc, char **argv)
{
    const char *only = argc > 2 && !strcmp(argv[1], "-b") ? argv[2] : NULL;
    struct hx_device_config cfg = {.struct_size = sizeof cfg, .n_threads = 2};
    if (hx__device_open("ref", &cfg, &hx_t_ref) != HX_OK) {
        printf("cannot open ref: %s\n0 passed, 1 failed, 0 skipped\n", hx_last_error());
        return 1;
    }
    int tested = 0;
    for (int b = 0; b < hx__registry_count(); b++) {
        const struct hx_backend_entry *e = hx__registry_get(b);
        if (!strcmp(e->ops->name, "ref") || (only && strcmp(e->ops->name, only))) continue;
        if (e->probe_status != HX_OK) {
            printf("SKIP backend %s: %s\n", e->ops->name, e->why);
            hx_skipped++;
            continue;
        }
        int nd = 0;
        char why[256];
        e->ops->device_count(&nd, why, sizeof why);
        for (int i = 0; i < nd; i++) {
            char spec[80];
            snprintf(spec, sizeof spec, "%s:%d", e->ops->name, i);
            struct hx_device *dev;
            if (hx__device_open(spec, &cfg, &dev) != HX_OK) {
                printf("SKIP %s: %s\n", spec, hx_last_error());
                hx_skipped++;
                continue;
            }
            hx_t_matmuls(dev);
            hx_t_other_ops(dev);
            hx__device_close(dev);
            tested++;
        }
    }
    hx__device_close(hx_t_ref);
    if (!tested) printf("no backend besides ref is registered\n");
    printf("%d passed, %d failed, %d skipped\n", hx_passed, hx_failed, hx_skipped);
    return hx_failed ? 1 : 0;
}
