/*
 * vulkan-gemm.c — weight ops of the Vulkan backend: MATMUL and EMBED, reading the GGUF blocks
 * in place from the uploaded weight (shaders/mmv.comp, gemm.comp, embed.comp; decoders in
 * shaders/dequant.glsl).
 *
 * Kernel choice (hx__vk_kernels_init, once per device; docs/vulkan.md):
 *   - GPU (discrete / integrated): m ≤ HX_VK_MMV_MR rows → GEMV `mmv` (NR weight rows per
 *     workgroup, a subgroup-multiple of invocations per row); larger m → tiled GEMM `gemm`
 *     (shared-memory tiles BM × BN, TM × TN outputs per invocation, all four sizes
 *     specialization constants).
 *   - CPU-type device (lavapipe): every m → lane-layout GEMV `mmvl` (one invocation per
 *     weight row, 2 activation rows per pass), because there an invocation is a SIMD lane,
 *     every buffer load costs a scalar load per lane, and the activations each lane needs
 *     are the same: loaded once per subgroup and broadcast. (lavapipe compiles a shader at
 *     its first dispatch; more rows per pass make the unrolled code too large.)
 *   - Quantized weights with int8 activations where the device has 8-bit integer support:
 *     a `quant` dispatch first turns the activation rows into int8 chunks in the device's
 *     scratch buffer, then the INT8 GEMV (`mmvq*`, `mmvlq*`) takes integer dot products,
 *     with the SPIR-V 4×8-bit dot product instruction when shaderIntegerDotProduct is on
 *     (`…d` variants). The tiled GEMM dequantizes to f32 in shared memory.
 *   The lane-layout kernels read the weight through a uniform texel
 *   buffer (16-byte texels, one view per binding chunk, cached with the weight): on lavapipe
 *   a texel fetch is one 16-byte load per invocation, a storage-buffer load a guarded
 *   scalar load per invocation and word.
 *   - GPUs with VK_NV_cooperative_matrix (16 × 16 × 16 f16 → f32, fp16, the Vulkan memory
 *     model): m ≥ 16 rows → `gemm_coopmat` (f16 fragments from shared-memory tiles, f32
 *     accumulators), except F32 weights; the choice is hx__vk_gemm_choose / hx__vk_mm_kernel
 *     (pure functions of vulkan-pick.h's caps, tested on synthetic devices). A coopmat
 *     pipeline that fails to build falls back to the tiled GEMM for its weight type with a
 *     logged reason.
 *   HX_VK_MATMUL=gpu|lane|auto, HX_VK_INT8=off|emul|dot|auto and HX_VK_GEMM=coopmat|tiled|auto
 *   override (tests, benchmarks).
 *
 * A storage-buffer binding is at most maxStorageBufferRange bytes (128 MiB on lavapipe; a
 * Qwen3 LM head is larger), so a weight is bound in chunks of whole rows and the activations
 * in chunks of whole rows; each chunk is one dispatch. Offsets are aligned down to the
 * device's binding alignment and the remainder is passed as a push constant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan-impl.h"

struct hx_vk_mm_push {
    uint32_t K, N, M;
    uint32_t a_off, a_stride, d_off, d_stride;
    uint32_t w_off, w_row_bytes;
    float scale;
    uint32_t qa_off, qa_stride;
    float wscale;       /* I2_S's tensor scale (hx_weight.tensor_scale) */
    uint32_t ks, ku;    /* mmvw: K splits, units per split */
    uint32_t ks_stride; /* mmvw: floats between two splits' partial sums */
};
_Static_assert(sizeof(struct hx_vk_mm_push) <= HX_VK_PUSH_BYTES, "push constants too large");

struct hx_vk_quant_push {
    uint32_t n_chunks, a_off, a_stride, qa_off, qa_stride, group;
};
_Static_assert(sizeof(struct hx_vk_quant_push) <= HX_VK_PUSH_BYTES, "push constants too large");

struct hx_vk_combine_push {
    uint32_t N, ks, part_off, ks_stride, d_off, d_stride;
    float scale;
};

struct hx_vk_embed_push {
    uint32_t K, n_rows, row0, nw;
    uint32_t w_off, w_row_bytes, d_off, d_stride;
    uint32_t tok_off;
    float wscale; /* I2_S's tensor scale */
};
_Static_assert(sizeof(struct hx_vk_embed_push) <= HX_VK_PUSH_BYTES, "push constants too large");

#define HX_VK_MMV_MR 4  /* activation rows per pass of the GPU-layout GEMV */
#define HX_VK_MMV_NR 4  /* weight rows per workgroup of the GPU-layout GEMV */
#define HX_VK_LANE_MR 2 /* activation rows per pass of the lane-layout GEMV (code size) */
#define HX_VK_LANE_WG 64
#define HX_VK_QCHUNK_BYTES 48 /* a quantized 32-element activation chunk: 8 words, d, d·Σq, 0, 0 */
#define HX_VK_SCRATCH_MAX ((size_t)64 << 20)

/* Shader ids per weight type, in the order the shaders/CMakeLists.txt emits them. */
struct hx_vk_type_shaders {
    enum hx_shader_id mmv, mmvl, gemm, embed, mmvw;
    int q;       /* index into the INT8 table, or -1 (float types) */
    bool ok;     /* shaders exist */
    uint32_t ue; /* elements per unit of the wide GEMV (mmvw.comp): a block, or 32 */
};
#define HX_VK_T(T, Q, UE)                                                                          \
    {                                                                                              \
        HX_SHADER_MMV_##T, HX_SHADER_MMVL_##T, HX_SHADER_GEMM_##T, HX_SHADER_EMBED_##T,            \
            HX_SHADER_MMVW_##T, Q, true, UE                                                        \
    }
static const struct hx_vk_type_shaders hx_vk_types[HX_DTYPE_COUNT] = {
    [HX_DTYPE_F32] = HX_VK_T(F32, -1, 32),     [HX_DTYPE_F16] = HX_VK_T(F16, -1, 32),
    [HX_DTYPE_BF16] = HX_VK_T(BF16, -1, 32),   [HX_DTYPE_Q8_0] = HX_VK_T(Q8_0, 0, 32),
    [HX_DTYPE_Q4_0] = HX_VK_T(Q4_0, 1, 32),    [HX_DTYPE_Q4_K] = HX_VK_T(Q4_K, 2, 256),
    [HX_DTYPE_Q6_K] = HX_VK_T(Q6_K, 3, 256),   [HX_DTYPE_TQ1_0] = HX_VK_T(TQ1_0, 4, 256),
    [HX_DTYPE_TQ2_0] = HX_VK_T(TQ2_0, 5, 256), [HX_DTYPE_Q1_0] = HX_VK_T(Q1_0, 6, 128),
    [HX_DTYPE_Q2_0] = HX_VK_T(Q2_0, 7, 64),    [HX_DTYPE_I2_S] = HX_VK_T(I2_S, 8, 256),
    [HX_DTYPE_Q5_K] = HX_VK_T(Q5_K, 9, 256),
};
#undef HX_VK_T
/* [q][lane][dot] */
#define HX_VK_Q(T)                                                                                 \
    {                                                                                              \
        {HX_SHADER_MMVQ_##T, HX_SHADER_MMVQD_##T},                                                 \
        {                                                                                          \
            HX_SHADER_MMVLQ_##T, HX_SHADER_MMVLQD_##T                                              \
        }                                                                                          \
    }
static const enum hx_shader_id hx_vk_qshaders[10][2][2] = {
    HX_VK_Q(Q8_0),  HX_VK_Q(Q4_0), HX_VK_Q(Q4_K), HX_VK_Q(Q6_K), HX_VK_Q(TQ1_0),
    HX_VK_Q(TQ2_0), HX_VK_Q(Q1_0), HX_VK_Q(Q2_0), HX_VK_Q(I2_S), HX_VK_Q(Q5_K),
};
#undef HX_VK_Q
/* the wide GEMV with int8 activations: [q][dot] */
#define HX_VK_QW(T)                                                                                \
    {                                                                                              \
        HX_SHADER_MMVWQ_##T, HX_SHADER_MMVWQD_##T                                                  \
    }
static const enum hx_shader_id hx_vk_qwshaders[10][2] = {
    HX_VK_QW(Q8_0),  HX_VK_QW(Q4_0), HX_VK_QW(Q4_K), HX_VK_QW(Q6_K), HX_VK_QW(TQ1_0),
    HX_VK_QW(TQ2_0), HX_VK_QW(Q1_0), HX_VK_QW(Q2_0), HX_VK_QW(I2_S), HX_VK_QW(Q5_K),
};
#undef HX_VK_QW
/* the wide GEMV reducing by subgroup shuffles, for the types with blocks of more than 32
 * elements: [type][f32, int8, int8 dot] */
#define HX_VK_WS(T)                                                                                \
    [HX_DTYPE_##T] = {HX_SHADER_MMVWS_##T, HX_SHADER_MMVWSQ_##T, HX_SHADER_MMVWSQD_##T}
static const enum hx_shader_id hx_vk_wsshaders[HX_DTYPE_COUNT][3] = {
    HX_VK_WS(Q4_K), HX_VK_WS(Q6_K), HX_VK_WS(TQ1_0), HX_VK_WS(TQ2_0),
    HX_VK_WS(Q1_0), HX_VK_WS(Q2_0), HX_VK_WS(I2_S), HX_VK_WS(Q5_K),
};
#undef HX_VK_WS

/* Every wide-GEMV shader of a type (f32, int8, int8 dot, and their shuffle forms) into ids;
 * returns how many. */
static int hx_vk_wide_ids(const struct hx_vk_type_shaders *s, enum hx_shader_id ids[6])
{
    int n = 0;
    ids[n++] = s->mmvw;
    if (s->q >= 0) ids[n++] = hx_vk_qwshaders[s->q][0], ids[n++] = hx_vk_qwshaders[s->q][1];
    if (s->ue > 32u) {
        enum hx_dtype t = (enum hx_dtype)(s - hx_vk_types);
        for (int k = 0; k < 3; k++) ids[n++] = hx_vk_wsshaders[t][k];
    }
    return n;
}

/* gemm_coopmat per weight type; F32 has none (the float numerics model promises F32 weights
 * f32 activations, and f16 fragments would round them) */
#define HX_VK_CM(T) [HX_DTYPE_##T] = HX_SHADER_GEMMCM_##T
#define HX_VK_CME(T) [HX_DTYPE_##T] = HX_SHADER_GEMMCME_##T
static const int hx_vk_coopmat_shaders[2][HX_DTYPE_COUNT] = {
    {
        [HX_DTYPE_F32] = -1, HX_VK_CM(F16),  HX_VK_CM(BF16), HX_VK_CM(Q8_0),
        HX_VK_CM(Q4_0),      HX_VK_CM(Q4_K), HX_VK_CM(Q6_K), HX_VK_CM(TQ1_0),
        HX_VK_CM(TQ2_0),     HX_VK_CM(Q1_0), HX_VK_CM(Q2_0), HX_VK_CM(I2_S),
        HX_VK_CM(Q5_K),
    },
    {
        [HX_DTYPE_F32] = -1, HX_VK_CME(F16),  HX_VK_CME(BF16), HX_VK_CME(Q8_0),
        HX_VK_CME(Q4_0),     HX_VK_CME(Q4_K), HX_VK_CME(Q6_K), HX_VK_CME(TQ1_0),
        HX_VK_CME(TQ2_0),    HX_VK_CME(Q1_0), HX_VK_CME(Q2_0), HX_VK_CME(I2_S),
        HX_VK_CME(Q5_K),
    },
};
#undef HX_VK_CM
#undef HX_VK_CME
/* a new weight type needs its entries above (an unlisted one would read shader 0) */
_Static_assert(HX_DTYPE_COUNT == 13, "gemm_coopmat shaders per weight type");

/* The coopmat shader of type t under the device's variant (NV or its emulation), or -1. */
static int hx_vk_coop_shader(const struct hx_vk_dev *d, enum hx_dtype t)
{
    return hx_vk_coopmat_shaders[d->gemm.variant == HX_VK_GEMM_COOPMAT_EMU][t];
}

bool hx__vk_type_ok(enum hx_dtype t)
{
    return (unsigned)t < HX_DTYPE_COUNT && hx_vk_types[t].ok;
}

uint32_t hx__vk_weight_types(void)
{
    uint32_t m = 0;
    for (int t = 0; t < HX_DTYPE_COUNT; t++) m |= hx_vk_types[t].ok ? 1u << t : 0u;
    return m;
}

/* Chunks of 32 sharing one activation scale: the CPU backend's activation blocks (I2_S takes
 * TQ2_0's 256 where K allows, so the same ternary weights round alike as either type). */
static uint32_t hx_vk_qgroup(enum hx_dtype t, int64_t k)
{
    switch (t) {
    case HX_DTYPE_Q1_0: return 4u;
    case HX_DTYPE_TQ1_0:
    case HX_DTYPE_TQ2_0: return 8u;
    case HX_DTYPE_Q2_0: return 2u;
    case HX_DTYPE_I2_S: return k % 256 ? 4u : 8u;
    default: return 1u;
    }
}

static const char *hx_vk_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : "auto";
}

const char *hx__vk_int8_name(int mode)
{
    return mode == HX_VK_INT8_DOT    ? "int8 dot product"
           : mode == HX_VK_INT8_EMUL ? "int8 (32-bit arithmetic)"
                                     : "f32";
}

static const char *hx_vk_gemm_name(int g)
{
    return g == HX_VK_GEMM_COOPMAT_NV    ? "cooperative-matrix GEMM (NV, m >= 16)"
           : g == HX_VK_GEMM_COOPMAT_EMU ? "emulated cooperative-matrix GEMM (test, m >= 16)"
                                         : "tiled GEMM";
}

int hx__vk_gemm_choose(const struct hx_vk_caps *c, const char *knob, char *why, size_t n)
{
    if (n) why[0] = '\0';
    bool force = !strcmp(knob, "coopmat");
    if (!strcmp(knob, "tiled")) return HX_VK_GEMM_TILED;
    if (!strcmp(knob, "coopmat-emu")) {
        /* the emulation: f16 in shared memory, 1024 / subgroup size ≤ 128 outputs each */
        const char *no = !c->fp16 ? "the device lacks shaderFloat16"
                         : c->subgroup_size < 8 || c->subgroup_size > 64 ||
                                 (uint64_t)4 * c->subgroup_size > c->max_wg_invocations
                             ? "the subgroup size is not 8 to 64 with 4 subgroups per workgroup"
                         : c->max_shared_bytes < HX_VK_COOPMAT_SHARED
                             ? "maxComputeSharedMemorySize is below the tiles' 22 KiB"
                             : NULL;
        if (!no) return HX_VK_GEMM_COOPMAT_EMU;
        if (n) snprintf(why, n, "emulated cooperative-matrix GEMM not used: %s", no);
        return HX_VK_GEMM_TILED;
    }
    if (!force && strcmp(knob, "auto")) return -1;
    /* auto on a device without any cooperative-matrix extension: nothing to explain */
    if (!force && !c->coopmat_nv) return HX_VK_GEMM_TILED;
    const char *no = NULL;
    if (!c->coopmat_nv)
        no = "the device lacks VK_NV_cooperative_matrix (VK_KHR_cooperative_matrix shaders "
             "need a newer shader toolchain: docs/vulkan.md)";
    else if (!c->coopmat_nv_16)
        no = "VK_NV_cooperative_matrix lists no 16x16x16 f16*f16+f32 subgroup configuration";
    else if (!c->fp16)
        no = "the device lacks shaderFloat16";
    else if (!c->memory_model)
        no = "the device lacks vulkanMemoryModel";
    else if (c->subgroup_size < 16 || (uint64_t)4 * c->subgroup_size > c->max_wg_invocations)
        no = "the subgroup size does not allow 4 subgroups per workgroup of >= 64";
    else if (c->max_shared_bytes < HX_VK_COOPMAT_SHARED)
        no = "maxComputeSharedMemorySize is below the tiles' 22 KiB";
    if (!no) return HX_VK_GEMM_COOPMAT_NV;
    if (n) snprintf(why, n, "cooperative-matrix GEMM not used: %s", no);
    return HX_VK_GEMM_TILED;
}

int hx__vk_mm_kernel(bool lane, int gemm, bool f32_weights, int64_t m)
{
    if (lane) return HX_VK_MM_LANE;
    if (m <= HX_VK_MMV_MR) return HX_VK_MM_MMV;
    if (gemm != HX_VK_GEMM_TILED && m >= HX_VK_COOPMAT_MIN_M && !f32_weights)
        return gemm == HX_VK_GEMM_COOPMAT_EMU ? HX_VK_MM_COOPMAT_EMU : HX_VK_MM_COOPMAT_NV;
    return HX_VK_MM_TILED;
}

int hx__vk_gemv_mode(const char *knob)
{
    static const char *const names[] = {"auto", "mmv", "wide", "split"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(knob, names[i])) return i;
    return -1;
}

void hx__vk_gemv_plan(int mode, uint32_t sg, uint32_t max_wg, uint32_t ue, int64_t K, int64_t N,
                      bool may_split, struct hx_vk_gemv_plan *out)
{
    /* Invocations per row: a 32-element unit type (Q8_0 at K = 1024 has 32 blocks a row) takes
     * a whole subgroup of 32 or 64, reduced by one subgroupAdd; a larger block fewer, so that
     * K = 1024 still gives each invocation a unit (TQ2_0: 4 per row, 32 rows a workgroup). */
    uint32_t lpr = ue <= 32u ? (sg > 32u ? 64u : 32u) : HX_MAX(1024u / ue, 4u);
    uint32_t lim = max_wg ? max_wg : 128u;
    while (lpr > lim) lpr /= 2u;
    uint32_t wg = HX_MAX(128u, lpr);
    while (wg > lim && wg > lpr) wg /= 2u;
    *out = (struct hx_vk_gemv_plan){
        .kernel = HX_VK_GEMV_WIDE, .lpr = lpr, .nr = HX_MAX(wg / lpr, 1u), .ks = 1};
    int64_t units = K / (int64_t)(ue ? ue : 32u);
    out->ku = (uint32_t)units;
    /* any K of whole units (every K of the 32-element types: 1056, 800, 32, ...) */
    if (mode == HX_VK_GEMV_MMV || K % (int64_t)(ue ? ue : 32u) != 0 || units <= 0) {
        out->kernel = HX_VK_GEMV_MMV;
        return;
    }
    /* Split K where the rows are few (a Qwen3-0.6B o/down projection: 1024 rows) and every
     * invocation walks at least two units: each split takes ku units, a multiple of lpr. */
    int64_t per_lane = (units + lpr - 1) / lpr;
    bool want = mode == HX_VK_GEMV_SPLIT || (mode == HX_VK_GEMV_AUTO && N <= HX_VK_GEMV_FEW_ROWS);
    if (!may_split || !want || per_lane < 2) return;
    int64_t ks = HX_MIN(per_lane, HX_VK_GEMV_KS_MAX);
    int64_t ku = ((units + ks - 1) / ks + lpr - 1) / lpr * lpr;
    out->ku = (uint32_t)ku;
    out->ks = (uint32_t)((units + ku - 1) / ku);
}

uint32_t hx__vk_gemv_sg_required(const struct hx_vk_sgctl *c, uint32_t layout_sg, uint32_t wg)
{
    if (!c->ctl || !c->min || c->max < c->min) return 0;
    for (uint32_t s = 1u << 7; s >= 1u; s >>= 1)
        if (s <= layout_sg && s >= c->min && s <= c->max && wg % s == 0 &&
            (!c->max_wg_subgroups || wg / s <= c->max_wg_subgroups))
            return s;
    return 0;
}

int hx__vk_gemv_red(const char *knob, bool shuffle, char *why, size_t n)
{
    if (n) why[0] = 0;
    if (!strcmp(knob, "shared")) return HX_VK_GEMV_RED_SHARED;
    if (strcmp(knob, "auto") && strcmp(knob, "shuffle")) return -1;
    if (shuffle) return HX_VK_GEMV_RED_SHUFFLE;
    if (!strcmp(knob, "shuffle"))
        snprintf(why, n, "HX_VK_GEMV_RED=shuffle: the device lacks subgroup shuffles");
    return HX_VK_GEMV_RED_SHARED;
}

int hx__vk_attn_mode(const char *knob)
{
    static const char *const names[] = {"auto", "flash", "rows"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(knob, names[i])) return i;
    return -1;
}

bool hx__vk_attn_flash(const struct hx_vk_caps *c, int mode, int64_t n, int hd, char *why,
                       size_t len)
{
    if (len) why[0] = '\0';
    if (mode == HX_VK_ATTN_ROWS || (mode == HX_VK_ATTN_AUTO && n < HX_VK_FA_MIN_ROWS)) return false;
    if (hd < 4 || hd > 128 || 128 % hd) return false; /* the per-row kernel's shapes */
    /* its unrolled loops run to head_dim 128 and devices such as lavapipe execute the
     * inactive iterations masked: auto leaves small heads to attn.comp */
    if (mode == HX_VK_ATTN_AUTO && hd < HX_VK_FA_MIN_HD) return false;
    const char *no = c->max_wg_invocations < HX_VK_FA_WG ? "fewer than 128 invocations a workgroup"
                     : c->max_shared_bytes < HX_VK_FA_SHARED
                         ? "maxComputeSharedMemorySize is below its 26 KiB"
                         : NULL;
    if (no && len) snprintf(why, len, "flash attention not used: %s", no);
    return !no;
}

const struct hx_vk_pick_api hx__vk_pick_api = {
    hx__vk_gemm_choose,      hx__vk_mm_kernel, hx__vk_gemv_mode,  hx__vk_gemv_plan,
    hx__vk_gemv_sg_required, hx__vk_gemv_red,  hx__vk_attn_mode, hx__vk_attn_flash};

int hx__vk_kernels_init(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const struct hx_vk_phys *p = d->phys;
    const char *mm = hx_vk_env("HX_VK_MATMUL"), *i8 = hx_vk_env("HX_VK_INT8"),
               *gm = hx_vk_env("HX_VK_GEMM");
    if (strcmp(mm, "auto") && strcmp(mm, "gpu") && strcmp(mm, "lane"))
        return hx_device_set_error(dev, HX_E_INVAL, "HX_VK_MATMUL=%s: expected gpu, lane or auto",
                                   mm);
    /* the lane layout shares activation loads across a subgroup of at least 8 by broadcasts */
    bool lane_ok = p->ballot && p->subgroup_size >= 8;
    if (!strcmp(mm, "lane") && !lane_ok)
        HX_LOG_WARN("[%s] HX_VK_MATMUL=lane needs subgroup broadcasts over >= 8 invocations; "
                    "using the subgroup layout",
                    dev->id);
    d->lane =
        lane_ok && (!strcmp(mm, "lane") || (!strcmp(mm, "auto") && p->info.kind == HX_DEVICE_CPU));
    if (!strcmp(i8, "auto"))
        d->int8 = p->int_dot ? HX_VK_INT8_DOT : HX_VK_INT8_EMUL;
    else if (!strcmp(i8, "dot"))
        d->int8 = p->int_dot ? HX_VK_INT8_DOT : HX_VK_INT8_EMUL;
    else if (!strcmp(i8, "emul"))
        d->int8 = HX_VK_INT8_EMUL;
    else if (!strcmp(i8, "off"))
        d->int8 = HX_VK_INT8_OFF;
    else
        return hx_device_set_error(dev, HX_E_INVAL,
                                   "HX_VK_INT8=%s: expected off, emul, dot or auto", i8);
    d->gemm.variant = hx__vk_gemm_choose(&p->caps, gm, d->gemm.why, sizeof d->gemm.why);
    if (d->gemm.variant < 0)
        return hx_device_set_error(
            dev, HX_E_INVAL, "HX_VK_GEMM=%s: expected coopmat, tiled, coopmat-emu or auto", gm);
    if (d->gemm.why[0]) HX_LOG_WARN("[%s] %s; using the tiled GEMM", dev->id, d->gemm.why);
    memset(d->coop_ok, 0, sizeof d->coop_ok);
    const char *gv = hx_vk_env("HX_VK_GEMV"), *gsg = getenv("HX_VK_GEMV_SG");
    if ((d->gemv = hx__vk_gemv_mode(gv)) < 0)
        return hx_device_set_error(dev, HX_E_INVAL,
                                   "HX_VK_GEMV=%s: expected wide, split, mmv or auto", gv);
    /* the subgroup size the wide GEMV is laid out for: the device's, or (tests) 8 .. 64;
     * "off": the device's, without asking the pipelines for a subgroup size */
    d->gemv_sg = p->subgroup_size ? p->subgroup_size : 32u;
    bool sg_off = gsg && !strcmp(gsg, "off");
    if (gsg && *gsg && !sg_off && strcmp(gsg, "auto")) {
        char *e;
        unsigned long v = strtoul(gsg, &e, 10);
        if (*e || (v != 8 && v != 16 && v != 32 && v != 64))
            return hx_device_set_error(
                dev, HX_E_INVAL, "HX_VK_GEMV_SG=%s: expected 8, 16, 32, 64, off or auto", gsg);
        d->gemv_sg = (uint32_t)v;
    }
    const char *gred = hx_vk_env("HX_VK_GEMV_RED");
    char rwhy[96];
    int red = hx__vk_gemv_red(gred, p->shuffle, rwhy, sizeof rwhy);
    if (red < 0)
        return hx_device_set_error(dev, HX_E_INVAL,
                                   "HX_VK_GEMV_RED=%s: expected shuffle, shared or auto", gred);
    if (rwhy[0]) HX_LOG_WARN("[%s] %s; using shared memory", dev->id, rwhy);
    const struct hx_vk_sgctl sgc = {.ctl = p->sg_ctl && !sg_off,
                                    .min = p->sg_min,
                                    .max = p->sg_max,
                                    .max_wg_subgroups = p->sg_max_wg_subgroups};
    d->gemv_state = (struct hx_vk_gemv_state){.layout_sg = d->gemv_sg, .red = red};
    memset(d->sg_req, 0, sizeof d->sg_req);
    memset(d->n_gemv, 0, sizeof d->n_gemv);
    const char *am = hx_vk_env("HX_VK_ATTN");
    if ((d->attn = hx__vk_attn_mode(am)) < 0)
        return hx_device_set_error(dev, HX_E_INVAL, "HX_VK_ATTN=%s: expected flash, rows or auto",
                                   am);
    char awhy[96];
    if (d->attn != HX_VK_ATTN_ROWS && !hx__vk_attn_flash(&p->caps, HX_VK_ATTN_FLASH,
                                                         HX_VK_FA_MIN_ROWS, 64, awhy, sizeof awhy))
        HX_LOG_WARN("[%s] %s; using attn.comp", dev->id, awhy);
    d->spec[HX_SHADER_ATTN_FLASH][0] = HX_VK_FA_WG;
    const char *fp = getenv("HX_VK_FAIL_PIPELINE");
    snprintf(d->fail_pipeline, sizeof d->fail_pipeline, "%s", fp ? fp : "");

    uint32_t sg = p->subgroup_size ? p->subgroup_size : 32u;
    uint32_t tpr = sg < 32u ? 32u : sg; /* invocations per row, GPU GEMV */
    uint32_t max_inv = p->max_wg_invocations ? p->max_wg_invocations : 128u;
    uint32_t nr = HX_VK_MMV_NR;
    while (nr > 1 && tpr * nr > max_inv) nr /= 2;
    /* tiled GEMM: 64 × 64 tiles of 4 × 4 per invocation (256), else 32 × 32 (64) */
    uint32_t bm = max_inv >= 256u ? 64u : 32u;
    for (int t = 0; t < HX_DTYPE_COUNT; t++) {
        const struct hx_vk_type_shaders *s = &hx_vk_types[t];
        if (!s->ok) continue;
        uint32_t gpu[5] = {tpr * nr, HX_VK_MMV_MR, nr, 0, 0};
        uint32_t lane[5] = {HX_VK_LANE_WG, HX_VK_LANE_MR, 1, 0, 0};
        uint32_t gemm[5] = {(bm / 4) * (bm / 4), bm, bm, 4, 4};
        memcpy(d->spec[s->mmv], gpu, sizeof gpu);
        memcpy(d->spec[s->mmvl], lane, sizeof lane);
        memcpy(d->spec[s->gemm], gemm, sizeof gemm);
        /* gemm_coopmat: four subgroups (2 × 2 of 32 × 32 outputs) per 64 × 64 tile */
        for (int e = 0; e < 2; e++)
            if (hx_vk_coopmat_shaders[e][t] >= 0) d->spec[hx_vk_coopmat_shaders[e][t]][0] = 4u * sg;
        /* the wide GEMV: NR rows × LPR invocations (constants 2, 3), as planned for the type */
        struct hx_vk_gemv_plan gp;
        hx__vk_gemv_plan(HX_VK_GEMV_WIDE, d->gemv_sg, max_inv, s->ue, 256, 1, false, &gp);
        /* ... on subgroups of a required size where the device can be asked (constant 4) */
        uint32_t req = hx__vk_gemv_sg_required(&sgc, d->gemv_sg, gp.nr * gp.lpr);
        uint32_t wide[5] = {gp.nr * gp.lpr, HX_VK_MMV_MR, gp.nr, gp.lpr, req};
        enum hx_shader_id wids[6];
        int nw = hx_vk_wide_ids(s, wids);
        for (int k = 0; k < nw; k++) {
            memcpy(d->spec[wids[k]], wide, sizeof wide);
            d->sg_req[wids[k]] = req;
        }
        if (t == HX_DTYPE_Q8_0) d->gemv_state.required_sg = req;
        if (s->q >= 0)
            for (int k = 0; k < 2; k++) {
                memcpy(d->spec[hx_vk_qshaders[s->q][0][k]], gpu, sizeof gpu);
                memcpy(d->spec[hx_vk_qshaders[s->q][1][k]], lane, sizeof lane);
            }
    }
    d->gemv_state.full = d->gemv_state.required_sg && p->sg_full;
    static const char *const gemv_names[] = {"wide-load (split K for few rows)", "4-byte-load",
                                             "wide-load", "wide-load (split K forced)"};
    HX_LOG_INFO("[%s] vulkan matmul: %s GEMV%s%s, activations %s", dev->id,
                d->lane ? "lane-layout" : gemv_names[d->gemv], d->lane ? "" : " + ",
                d->lane ? "" : hx_vk_gemm_name(d->gemm.variant), hx__vk_int8_name(d->int8));
    if (!d->lane && d->gemv != HX_VK_GEMV_MMV) {
        char rq[48] = "the driver's";
        if (d->gemv_state.required_sg)
            snprintf(rq, sizeof rq, "%u required%s", d->gemv_state.required_sg,
                     d->gemv_state.full ? ", full" : "");
        HX_LOG_INFO("[%s] vulkan wide GEMV: rows laid out for subgroups of %u, subgroup size %s, "
                    "rows sharing a subgroup reduced by %s",
                    dev->id, d->gemv_sg, rq,
                    red == HX_VK_GEMV_RED_SHUFFLE ? "subgroup shuffles" : "shared memory");
    }
    return HX_OK;
}

/* Rows of a tensor whose binding of `width` bytes per row fits in the range limit. */
static int64_t hx_vk_rows_fit(struct hx_vk_dev *d, size_t stride, size_t width)
{
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align;
    if (width > lim) return 0;
    if (!stride) return INT64_MAX;
    return (int64_t)((lim - width) / stride) + 1;
}

static struct hx_vk_buf *hx_vk_tbuf(const struct hx_tensor_ref *t)
{
    return (struct hx_vk_buf *)t->buf->ctx;
}

static bool hx_vk_use_int8(struct hx_vk_dev *d, enum hx_dtype t)
{
    return d->int8 != HX_VK_INT8_OFF && hx_vk_types[t].q >= 0;
}

/* Does the matmul stage its activations in the scratch buffer (int8 chunks, or f32 rows for
 * the lane layout's float weights)? */
static bool hx_vk_staged(struct hx_vk_dev *d, enum hx_dtype t)
{
    return hx_vk_use_int8(d, t) || (d->lane && !hx_dtype_is_quantized(t));
}

/* Words per staged activation row. */
static uint32_t hx_vk_stage_stride(struct hx_vk_dev *d, enum hx_dtype t, int64_t K)
{
    return hx_vk_use_int8(d, t) ? (uint32_t)(K / 32 * 12) : (uint32_t)((K + 3) & ~(int64_t)3);
}

/* Activation rows per dispatch chunk (binding limits, the int8 scratch cap). */
static int64_t hx_vk_mm_rows(struct hx_vk_dev *d, const struct hx_op *op, int64_t nc,
                             int64_t n_rows)
{
    int64_t K = op->weight->n_cols;
    int64_t mc = HX_MIN(hx_vk_rows_fit(d, op->src[0].row_stride_bytes, (size_t)K * 4),
                        hx_vk_rows_fit(d, op->dst.row_stride_bytes, (size_t)nc * 4));
    if (hx_vk_staged(d, op->weight->type)) {
        size_t per_row = (size_t)hx_vk_stage_stride(d, op->weight->type, K) * 4;
        mc = HX_MIN(mc, (int64_t)(HX_VK_SCRATCH_MAX / per_row));
    }
    return HX_MIN(HX_MIN(mc, n_rows), 65535 * (int64_t)HX_VK_LANE_MR);
}

/* Weight rows per binding: the rows and the slack within the storage-buffer range limit and
 * (lane layout) the texel-buffer limit. */
static int64_t hx_vk_mm_wrows(struct hx_vk_dev *d, size_t row_bytes, int64_t n_rows)
{
    size_t lim = (size_t)d->phys->max_range - (size_t)d->align - HX_VK_WEIGHT_SLACK;
    if (d->lane) {
        size_t tex = (size_t)HX_MIN(d->phys->max_texels, (VkDeviceSize)1 << 32) * 16u;
        lim = HX_MIN(lim, tex - (size_t)d->phys->texel_align - HX_VK_WEIGHT_SLACK);
    }
    return HX_MIN(n_rows, (int64_t)(lim / row_bytes));
}

/* The texel view of rows [n0, n0 + nc) of w (chunk n0 / nc), made once and kept with the
 * weight; *rem gets the rows' byte offset from the view's start. */
/* The view of binding chunk ci (of n_chunks) of w's rows, which starts at row n0. */
static int hx_vk_weight_view(struct hx_device *dev, struct hx_vk_weight *w, int64_t ci,
                             int64_t n_chunks, int64_t n0, int64_t nc, VkBufferView *out,
                             uint32_t *rem)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!w->views) {
        if (!(w->views = hx__calloc((size_t)n_chunks, sizeof *w->views))) return HX_E_NOMEM;
        w->n_views = n_chunks;
    }
    size_t start = (size_t)n0 * w->row_bytes, vstart = start & ~(size_t)(d->phys->texel_align - 1);
    *rem = (uint32_t)(start - vstart);
    if (!w->views[ci]) {
        size_t end = HX_MIN((size_t)(n0 + nc) * w->row_bytes + HX_VK_WEIGHT_SLACK, w->b.nbytes);
        int st = hx__vk_view_create(dev, w->b.buf, vstart, end - vstart + 15, &w->views[ci]);
        if (st) return st;
    }
    *out = w->views[ci];
    return HX_OK;
}

size_t hx__vk_matmul_scratch(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!op->weight) return 0;
    size_t need = 0;
    if (hx_vk_staged(d, op->weight->type)) {
        size_t rb = hx_dtype_row_bytes(op->weight->type, op->weight->n_cols);
        int64_t mc =
            rb ? hx_vk_mm_rows(d, op, hx_vk_mm_wrows(d, rb, op->weight->n_rows), n_rows) : 0;
        need =
            (size_t)HX_MAX(mc, 1) * hx_vk_stage_stride(d, op->weight->type, op->weight->n_cols) * 4;
    }
    /* the split-K GEMV's partial sums, after the staged rows (hx__vk_op_matmul) */
    if (!d->lane && n_rows <= HX_VK_MMV_MR && d->gemv != HX_VK_GEMV_MMV)
        need = ((need + d->align - 1) & ~(size_t)(d->align - 1)) +
               (size_t)HX_VK_GEMV_KS_MAX * (size_t)n_rows * (size_t)op->weight->n_rows * 4;
    return need;
}

struct hx_vk_copy_push {
    uint32_t K, a_off, a_stride, qa_off, qa_stride;
};

/* Stage activation rows [m0, m0 + mm) in the scratch buffer: int8 chunks (quant.comp) or
 * f32 rows (actcopy.comp); then a barrier. */
static int hx_vk_stage(struct hx_device *dev, const struct hx_op *op, int64_t m0, int64_t mm,
                       uint32_t *qa_stride)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const struct hx_tensor_ref *a = &op->src[0];
    int64_t K = op->weight->n_cols;
    if (!hx_vk_use_int8(d, op->weight->type)) {
        struct hx_vk_copy_push q = {
            .K = (uint32_t)K,
            .a_stride = (uint32_t)(a->row_stride_bytes / 4),
            .qa_stride = hx_vk_stage_stride(d, op->weight->type, K),
        };
        size_t need = (size_t)mm * q.qa_stride * 4;
        if (need > d->scratch.nbytes)
            return hx_device_set_error(dev, HX_E_INVAL, "staging scratch of %zu bytes, %zu needed",
                                       d->scratch.nbytes, need);
        struct hx_vk_bind b[5] = {0};
        b[0] =
            hx__vk_bind(d, hx_vk_tbuf(a)->buf, a->offset_bytes + (size_t)m0 * a->row_stride_bytes,
                        (size_t)(mm - 1) * a->row_stride_bytes + (size_t)K * 4, &q.a_off);
        q.a_off /= 4;
        b[4] = hx__vk_bind(d, d->scratch.buf, 0, need, NULL);
        uint32_t wg = hx__vk_wg(dev, HX_SHADER_ACTCOPY);
        int st = hx__vk_dispatch(dev, HX_SHADER_ACTCOPY, b, 5, &q, sizeof q,
                                 (q.qa_stride + wg - 1) / wg, (uint32_t)mm, 1);
        if (st) return st;
        hx__vk_barrier(d);
        *qa_stride = q.qa_stride;
        return HX_OK;
    }
    struct hx_vk_quant_push q = {
        .n_chunks = (uint32_t)(K / 32),
        .a_stride = (uint32_t)(a->row_stride_bytes / 4),
        .qa_stride = (uint32_t)(K / 32 * 12),
        .group = hx_vk_qgroup(op->weight->type, K),
    };
    size_t need = (size_t)mm * q.qa_stride * 4;
    if (need > d->scratch.nbytes)
        return hx_device_set_error(dev, HX_E_INVAL, "int8 scratch of %zu bytes, %zu needed",
                                   d->scratch.nbytes, need);
    struct hx_vk_bind b[5] = {0};
    b[0] = hx__vk_bind(d, hx_vk_tbuf(a)->buf, a->offset_bytes + (size_t)m0 * a->row_stride_bytes,
                       (size_t)(mm - 1) * a->row_stride_bytes + (size_t)K * 4, &q.a_off);
    q.a_off /= 4;
    b[4] = hx__vk_bind(d, d->scratch.buf, 0, need, NULL);
    uint32_t wg = hx__vk_wg(dev, HX_SHADER_QUANT);
    int st = hx__vk_dispatch(dev, HX_SHADER_QUANT, b, 5, &q, sizeof q,
                             (uint32_t)((q.n_chunks + wg - 1) / wg), (uint32_t)mm, 1);
    if (st) return st;
    hx__vk_barrier(d);
    *qa_stride = q.qa_stride;
    return HX_OK;
}

/* The split-K GEMV's second pass: dst (binding out, at the push's d_off in the row layout of
 * o) = scale · Σ of the gp->ks partial sums at part_off in the scratch. */
static int hx_vk_combine(struct hx_device *dev, uint32_t ks, const struct hx_vk_bind *out,
                         uint32_t d_off, uint32_t d_stride, float scale, size_t part_off,
                         int64_t mm, int64_t nn)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    hx__vk_barrier(d);
    struct hx_vk_combine_push q = {
        .N = (uint32_t)nn,
        .ks = ks,
        .ks_stride = (uint32_t)(mm * nn),
        .d_off = d_off,
        .d_stride = d_stride,
        .scale = scale,
    };
    struct hx_vk_bind b[5] = {0};
    b[2] = *out;
    b[4] = hx__vk_bind(d, d->scratch.buf, part_off, (size_t)ks * mm * nn * 4, NULL);
    uint32_t wg = hx__vk_wg(dev, HX_SHADER_MMV_COMBINE), gx, gz;
    hx__vk_grid(((uint64_t)nn + wg - 1) / wg, &gx, &gz);
    return hx__vk_dispatch(dev, HX_SHADER_MMV_COMBINE, b, 5, &q, sizeof q, gx, (uint32_t)mm, gz);
}

/* Is type t's cooperative-matrix pipeline usable? Built on first use; a failure is logged
 * with its reason once, and the type takes the tiled GEMM from then on. */
static bool hx_vk_coop_ready(struct hx_device *dev, enum hx_dtype t)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!d->coop_ok[t]) {
        char why[160];
        d->coop_ok[t] = hx__vk_pipeline_try(dev, (enum hx_shader_id)hx_vk_coop_shader(d, t), why,
                                            sizeof why)
                            ? 1
                            : -1;
        if (d->coop_ok[t] < 0) {
            HX_LOG_WARN("[%s] %s; %s matmuls use the tiled GEMM", dev->id, why, hx_dtype_name(t));
            snprintf(d->gemm.why, sizeof d->gemm.why, "%s: %.150s", hx_dtype_name(t), why);
        } else {
            HX_LOG_INFO("[%s] %s matmuls with m >= %d rows: cooperative-matrix GEMM (%s)", dev->id,
                        hx_dtype_name(t), HX_VK_COOPMAT_MIN_M,
                        hx__shaders[hx_vk_coop_shader(d, t)].name);
        }
    }
    return d->coop_ok[t] > 0;
}

/* The kernel for (type, m) on this device and its output tile (rows of W, rows of A); for
 * the GPU layout's GEMV, gp gets the plan (the wide kernel with its K splits, or mmv) for a
 * weight of K × N whose K may be split (may_split). */
static enum hx_shader_id hx_vk_mm_pick(struct hx_device *dev, enum hx_dtype t, int64_t mm,
                                       int64_t K, int64_t N, bool may_split,
                                       struct hx_vk_gemv_plan *gp, uint32_t *tile_n,
                                       uint32_t *tile_m, bool *int8)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const struct hx_vk_type_shaders *s = &hx_vk_types[t];
    *int8 = hx_vk_use_int8(d, t);
    int dot = d->int8 == HX_VK_INT8_DOT;
    enum hx_shader_id id;
    int k = hx__vk_mm_kernel(d->lane, d->gemm.variant, t == HX_DTYPE_F32, mm);
    *gp = (struct hx_vk_gemv_plan){.kernel = HX_VK_GEMV_MMV, .ks = 1};
    if (k == HX_VK_MM_MMV)
        hx__vk_gemv_plan(d->gemv, d->gemv_sg, d->phys->max_wg_invocations, s->ue, K, N, may_split,
                         gp);
    if ((k == HX_VK_MM_COOPMAT_NV || k == HX_VK_MM_COOPMAT_EMU) && hx_vk_coop_ready(dev, t)) {
        id = (enum hx_shader_id)hx_vk_coop_shader(d, t);
        *int8 = false;
        *tile_n = 64;
        *tile_m = 64;
    } else if (k == HX_VK_MM_LANE) {
        id = *int8 ? hx_vk_qshaders[s->q][1][dot] : s->mmvl;
        *tile_n = d->spec[id][0];
        *tile_m = d->spec[id][1];
    } else if (k == HX_VK_MM_MMV && gp->kernel == HX_VK_GEMV_WIDE) {
        id = *int8 ? hx_vk_qwshaders[s->q][dot] : s->mmvw;
        if (s->ue > 32u && d->gemv_state.red == HX_VK_GEMV_RED_SHUFFLE)
            id = hx_vk_wsshaders[t][*int8 ? 1 + dot : 0];
        *tile_n = d->spec[id][2];
        *tile_m = d->spec[id][1];
    } else if (k == HX_VK_MM_MMV) {
        id = *int8 ? hx_vk_qshaders[s->q][0][dot] : s->mmv;
        *tile_n = d->spec[id][2];
        *tile_m = d->spec[id][1];
    } else {
        id = s->gemm;
        *int8 = false;
        *tile_n = d->spec[id][2];
        *tile_m = d->spec[id][1];
    }
    return id;
}

int hx__vk_op_matmul(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_weight *w;
    int st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &w);
    if (st) return st;
    const struct hx_tensor_ref *a = &op->src[0], *o = &op->dst;
    int64_t K = op->weight->n_cols, N = op->weight->n_rows;
    int64_t nc = hx_vk_mm_wrows(d, w->row_bytes, N);
    int64_t mc = nc > 0 ? hx_vk_mm_rows(d, op, nc, n_rows) : 0;
    bool tex = d->lane;
    /* A fused weight with a tensor scale per part (hx_weight.n_tparts) runs part by part, each
     * with its scale: the rows of each part computed as they were unfused, so the same bits. */
    const struct hx_weight *hw = op->weight;
    const int np = hw->n_tparts > 0 ? hw->n_tparts : 1;
    int64_t n_chunks = 0;
    for (int pi = 0; nc > 0 && pi < np; pi++)
        n_chunks += ((np > 1 ? hw->tpart_row[pi + 1] - hw->tpart_row[pi] : N) + nc - 1) / nc;
    if (nc <= 0 || mc <= 0)
        return hx_device_set_error(dev, HX_E_UNSUPPORTED,
                                   "matmul %lld x %lld: rows exceed a binding", (long long)N,
                                   (long long)K);
    for (int64_t m0 = 0; m0 < n_rows; m0 += mc) {
        int64_t mm = HX_MIN(mc, n_rows - m0);
        uint32_t tn, tm, qa_stride = 0;
        bool int8;
        struct hx_vk_gemv_plan gp;
        /* K is split only where the weight is one binding with one scale (one dispatch) */
        enum hx_shader_id sid = hx_vk_mm_pick(dev, op->weight->type, mm, K, N, np == 1 && nc >= N,
                                              &gp, &tn, &tm, &int8);
        bool staged = int8 || (d->lane && !hx_dtype_is_quantized(op->weight->type));
        if (staged && (st = hx_vk_stage(dev, op, m0, mm, &qa_stride))) return st;
        bool wide = !d->lane && mm <= HX_VK_MMV_MR && gp.kernel == HX_VK_GEMV_WIDE;
        if (!d->lane && mm <= HX_VK_MMV_MR) d->n_gemv[wide ? 1 + (gp.ks > 1) : 0]++;
        int64_t ci = 0;
        for (int pi = 0; pi < np; pi++)
        for (int64_t n0 = np > 1 ? hw->tpart_row[pi] : 0, ne = np > 1 ? hw->tpart_row[pi + 1] : N;
             n0 < ne; n0 += nc, ci++) {
            int64_t nn = HX_MIN(nc, ne - n0);
            struct hx_vk_mm_push p = {
                .K = (uint32_t)K,
                .N = (uint32_t)nn,
                .M = (uint32_t)mm,
                .a_stride = (uint32_t)(a->row_stride_bytes / 4),
                .d_stride = (uint32_t)(o->row_stride_bytes / 4),
                .w_row_bytes = (uint32_t)w->row_bytes,
                .scale = op->weight->scale,
                .qa_stride = qa_stride,
                .wscale = np > 1 ? hw->tpart_tscale[pi] : hw->tensor_scale,
                .ks = gp.ks,
                .ku = gp.ku,
            };
            struct hx_vk_bind b[5] = {0};
            b[0] = hx__vk_bind(d, hx_vk_tbuf(a)->buf,
                               a->offset_bytes + (size_t)m0 * a->row_stride_bytes,
                               (size_t)(mm - 1) * a->row_stride_bytes + (size_t)K * 4, &p.a_off);
            b[1] = hx__vk_bind(d, w->b.buf, (size_t)n0 * w->row_bytes,
                               (size_t)nn * w->row_bytes + HX_VK_WEIGHT_SLACK, &p.w_off);
            b[2] = hx__vk_bind(d, hx_vk_tbuf(o)->buf,
                               o->offset_bytes + (size_t)m0 * o->row_stride_bytes + (size_t)n0 * 4,
                               (size_t)(mm - 1) * o->row_stride_bytes + (size_t)nn * 4, &p.d_off);
            if (staged) b[4] = hx__vk_bind(d, d->scratch.buf, 0, (size_t)mm * qa_stride * 4, NULL);
            VkBufferView views[2] = {VK_NULL_HANDLE, staged ? d->scratch_view : VK_NULL_HANDLE};
            if (tex && (st = hx_vk_weight_view(dev, w, ci, n_chunks, n0, nc, &views[0], &p.w_off)))
                return st;
            p.a_off /= 4;
            p.d_off /= 4;
            /* split K: the partial sums go to the scratch after the staged activations */
            struct hx_vk_bind out = b[2];
            uint32_t out_off = p.d_off, out_stride = p.d_stride;
            size_t part_off = ((staged ? (size_t)mm * qa_stride * 4 : 0) + d->align - 1) &
                              ~(size_t)(d->align - 1);
            if (wide && gp.ks > 1) {
                b[2] = hx__vk_bind(d, d->scratch.buf, part_off, (size_t)gp.ks * mm * nn * 4, NULL);
                p.d_off = 0;
                p.d_stride = (uint32_t)nn;
                p.ks_stride = (uint32_t)(mm * nn);
            }
            uint32_t gx, gz;
            hx__vk_grid((uint64_t)((nn + tn - 1) / tn), &gx, &gz);
            /* lavapipe runs a "uniform" `if (row < m)` masked, not skipped: one-row passes
             * (decode) get the pipeline specialized for one row; so does the wide GEMV */
            bool one = (d->lane || wide) && mm == 1;
            if ((st = hx__vk_dispatch_ex(dev, sid, one, b, 5, views, &p, sizeof p, gx,
                                         (uint32_t)((mm + tm - 1) / tm) * gp.ks, gz)))
                return st;
            if (wide && gp.ks > 1 &&
                (st = hx_vk_combine(dev, gp.ks, &out, out_off, out_stride, p.scale, part_off, mm,
                                    nn)))
                return st;
        }
        if (staged && m0 + mm < n_rows) hx__vk_barrier(d); /* the next chunk rewrites the scratch */
    }
    return HX_OK;
}

int hx__vk_op_embed(struct hx_device *dev, const struct hx_op *op, int64_t n_rows)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_weight *w;
    int st = hx__vk_weight_get(dev, op->weight, op->weight_handle, &w);
    if (st) return st;
    const struct hx_tensor_ref *o = &op->dst;
    int64_t K = op->weight->n_cols, N = op->weight->n_rows;
    int64_t nc = hx_vk_mm_wrows(d, w->row_bytes, N);
    int64_t mc =
        HX_MIN(HX_MIN(hx_vk_rows_fit(d, o->row_stride_bytes, (size_t)K * 4), n_rows), 65535);
    if (nc <= 0 || mc <= 0)
        return hx_device_set_error(dev, HX_E_UNSUPPORTED, "embed: a row exceeds a binding");
    enum hx_shader_id sid = hx_vk_types[op->weight->type].embed;
    uint32_t wg = hx__vk_wg(dev, sid);
    struct hx_vk_bind meta = hx__vk_bind(d, d->meta.buf, 0, (size_t)n_rows * 4 * 3, NULL);
    uint32_t gx = (uint32_t)(((uint64_t)K + 32u * wg - 1) / (32u * wg));
    for (int64_t m0 = 0; m0 < n_rows; m0 += mc) {
        int64_t mm = HX_MIN(mc, n_rows - m0);
        for (int64_t n0 = 0; n0 < N; n0 += nc) {
            int64_t nn = HX_MIN(nc, N - n0);
            struct hx_vk_embed_push p = {
                .K = (uint32_t)K,
                .n_rows = (uint32_t)mm,
                .row0 = (uint32_t)n0,
                .nw = (uint32_t)nn,
                .w_row_bytes = (uint32_t)w->row_bytes,
                .d_stride = (uint32_t)(o->row_stride_bytes / 4),
                .tok_off = (uint32_t)m0,
                .wscale = op->weight->tensor_scale,
            };
            struct hx_vk_bind b[4];
            b[0] = (struct hx_vk_bind){0};
            b[1] = hx__vk_bind(d, w->b.buf, (size_t)n0 * w->row_bytes,
                               (size_t)nn * w->row_bytes + HX_VK_WEIGHT_SLACK, &p.w_off);
            b[2] = hx__vk_bind(d, hx_vk_tbuf(o)->buf,
                               o->offset_bytes + (size_t)m0 * o->row_stride_bytes,
                               (size_t)(mm - 1) * o->row_stride_bytes + (size_t)K * 4, &p.d_off);
            p.d_off /= 4;
            b[3] = meta;
            if ((st = hx__vk_dispatch(dev, sid, b, 4, &p, sizeof p, gx, (uint32_t)mm, 1)))
                return st;
        }
    }
    return HX_OK;
}
