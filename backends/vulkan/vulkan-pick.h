/*
 * vulkan-pick.h — the Vulkan backend's choice of matmul kernel as pure functions of plain
 * capability structs (no Vulkan types), so that tests/test-vulkan.c can drive every branch
 * with synthetic devices. The backend hands the functions out through get_extension
 * "hx.vk.pick" (struct hx_vk_pick_api) and what it chose for its device through
 * "hx.vk.gemm" (struct hx_vk_gemm_state). Implemented in vulkan-gemm.c.
 *
 * Prefill GEMM variants, best first (docs/vulkan.md):
 *   HX_VK_GEMM_COOPMAT_NV  gemm_coopmat.comp on VK_NV_cooperative_matrix, m ≥ 16 rows
 *   HX_VK_GEMM_TILED       gemm.comp, f32 shared-memory tiles, everywhere else
 *   HX_VK_GEMM_COOPMAT_EMU the same shader with the fragment operations emulated: tests only
 *                          (HX_VK_GEMM=coopmat-emu), so lavapipe runs the rest of its code
 * Decode GEMV variants (HX_VK_GEMV, hx__vk_gemv_plan): the wide-load kernel with or without
 * split K, or the older 4-byte-load one.
 *
 * A VK_KHR_cooperative_matrix variant (RADV on RDNA3+, Intel) would slot in above the NV
 * one: a caps flag, a shader, an enum value and a branch in hx__vk_gemm_choose.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hx_vk_gemm { HX_VK_GEMM_TILED, HX_VK_GEMM_COOPMAT_NV, HX_VK_GEMM_COOPMAT_EMU };

/* What one m-row matmul runs (hx__vk_mm_kernel). */
enum hx_vk_mm_kernel {
    HX_VK_MM_LANE,
    HX_VK_MM_MMV,
    HX_VK_MM_TILED,
    HX_VK_MM_COOPMAT_NV,
    HX_VK_MM_COOPMAT_EMU
};

#define HX_VK_COOPMAT_MIN_M 16      /* rows from which a cooperative-matrix GEMM is used */
#define HX_VK_COOPMAT_SHARED 22528u /* bytes of shared memory gemm_coopmat.comp declares */

/* The device facts the GEMM choice depends on. */
struct hx_vk_caps {
    bool coopmat_nv;    /* VK_NV_cooperative_matrix with its cooperativeMatrix feature */
    bool coopmat_nv_16; /* ... lists 16 × 16 × 16, f16 A, B, f32 C, D, subgroup scope */
    bool fp16;          /* shaderFloat16 (f16 arithmetic in shaders) */
    bool memory_model;  /* vulkanMemoryModel (the NV shader is in the Vulkan memory model) */
    uint32_t subgroup_size;
    uint32_t max_wg_invocations;
    uint32_t max_shared_bytes; /* maxComputeSharedMemorySize */
};

/* The GEMM variant for m ≥ HX_VK_COOPMAT_MIN_M on a device with caps c under the knob
 * HX_VK_GEMM (auto, coopmat, tiled, or coopmat-emu for tests). Returns the variant, or -1
 * for a bad knob. When a cooperative-matrix variant is asked for (coopmat, coopmat-emu) or
 * offered by the device (auto) but not taken, why (n bytes) gets the reason; else "". */
int hx__vk_gemm_choose(const struct hx_vk_caps *c, const char *knob, char *why, size_t n);

/* The kernel for a matmul of m activation rows: the lane-layout GEMV on CPU-type devices,
 * the subgroup GEMV for m ≤ 4, else the device's GEMM variant (tiled below
 * HX_VK_COOPMAT_MIN_M rows or for F32 weights, whose f32 activations the float numerics
 * model promises unrounded; f32_weights says the weight is F32). */
int hx__vk_mm_kernel(bool lane, int gemm, bool f32_weights, int64_t m);

/* Decode GEMV (m ≤ 4 rows on the GPU layout) under the knob HX_VK_GEMV:
 *   HX_VK_GEMV_WIDE  mmvw.comp: 16-byte loads over the blocks, LPR invocations per weight row,
 *                    NR rows per workgroup, split K where a shape has few rows (auto, wide)
 *   HX_VK_GEMV_MMV   mmv.comp, 4-byte loads, a chunk per invocation (mmv; and every K that is
 *                    not whole units of the wide kernel: I2_S at an odd number of 128s)
 *   HX_VK_GEMV_SPLIT the wide kernel splitting K wherever each invocation has ≥ 2 units (tests) */
enum hx_vk_gemv { HX_VK_GEMV_AUTO, HX_VK_GEMV_MMV, HX_VK_GEMV_WIDE, HX_VK_GEMV_SPLIT };

#define HX_VK_GEMV_KS_MAX 4      /* K splits at most */
#define HX_VK_GEMV_FEW_ROWS 2048 /* auto splits K for N ≤ this many weight rows */

/* The wide GEMV's layout for one shape. */
struct hx_vk_gemv_plan {
    int kernel;   /* HX_VK_GEMV_WIDE or HX_VK_GEMV_MMV */
    uint32_t lpr; /* invocations per weight row (a power of 2) */
    uint32_t nr;  /* weight rows per workgroup (workgroup = nr · lpr) */
    uint32_t ks;  /* K splits (1: none) */
    uint32_t ku;  /* units per split (a multiple of lpr) */
};

/* HX_VK_GEMV's value (auto, wide, mmv, split) as enum hx_vk_gemv, or -1. */
int hx__vk_gemv_mode(const char *knob);

/* The GEMV for a weight of N rows × K columns whose type walks units of ue elements (32 for
 * the float types, Q8_0 and Q4_0; the block size for the others, 256 for I2_S) on a device
 * with subgroups of sg and workgroups of at most max_wg invocations; may_split says K can be
 * split (one weight binding, no per-part scales). lpr and nr depend on (mode, sg, max_wg, ue)
 * only, so that the pipeline's specialization constants can be set once per type. */
void hx__vk_gemv_plan(int mode, uint32_t sg, uint32_t max_wg, uint32_t ue, int64_t K, int64_t N,
                      bool may_split, struct hx_vk_gemv_plan *out);

/* The wide GEMV's subgroup size control (VK_EXT_subgroup_size_control, core in 1.3). */
struct hx_vk_sgctl {
    bool ctl;      /* a compute pipeline may require a subgroup size */
    uint32_t min, max;
    uint32_t max_wg_subgroups; /* maxComputeWorkgroupSubgroups */
};

/* The subgroup size a wide-GEMV pipeline of wg invocations laid out for subgroups of
 * layout_sg should require: the largest power of 2 in [min, max] that is at most layout_sg
 * (so LPR, 32 or 64 for the 32-element units, stays a multiple of it), divides wg and gives
 * at most max_wg_subgroups subgroups; 0 (the driver's choice) without control or where none
 * fits. */
uint32_t hx__vk_gemv_sg_required(const struct hx_vk_sgctl *c, uint32_t layout_sg, uint32_t wg);

/* How the wide GEMV sums a row whose invocations are fewer than a subgroup's (HX_VK_GEMV_RED). */
enum hx_vk_gemv_red { HX_VK_GEMV_RED_SHARED, HX_VK_GEMV_RED_SHUFFLE };

/* HX_VK_GEMV_RED (auto, shuffle, shared) on a device with (shuffle) or without subgroup
 * shuffles: the reduction, or -1 for a bad knob. shuffle asked for but missing: shared, and
 * why (n bytes) says so; else why is "". */
int hx__vk_gemv_red(const char *knob, bool shuffle, char *why, size_t n);

/* What the device's wide GEMV pipelines were given ("hx.vk.gemv_state"). */
struct hx_vk_gemv_state {
    uint32_t layout_sg;   /* the subgroup size the rows are laid out for (LPR, NR) */
    uint32_t required_sg; /* the required subgroup size of the Q8_0 pipeline (0: none) */
    bool full;            /* ... with VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT */
    int red;              /* enum hx_vk_gemv_red */
};

/* Attention (the second half of ATTN) under the knob HX_VK_ATTN:
 *   HX_VK_ATTN_AUTO  attn_flash.comp (flash-style tiles of HX_VK_FA_BR rows × HX_VK_FA_BC keys
 *                    staged in shared memory) from HX_VK_FA_MIN_ROWS rows and head_dim
 *                    HX_VK_FA_MIN_HD, attn.comp below
 *   HX_VK_ATTN_FLASH attn_flash.comp for every batch (tests)
 *   HX_VK_ATTN_ROWS  attn.comp (one workgroup per head and row) for every batch
 * attn_flash.comp needs head_dim to divide 128 and be a multiple of 4, HX_VK_FA_WG invocations and
 * HX_VK_FA_SHARED bytes of shared memory; without them attn.comp runs under every knob. */
enum hx_vk_attn { HX_VK_ATTN_AUTO, HX_VK_ATTN_FLASH, HX_VK_ATTN_ROWS };

#define HX_VK_FA_MIN_ROWS 16
#define HX_VK_FA_MIN_HD 32    /* auto: smaller head_dims stay on attn.comp */
#define HX_VK_FA_BR 32        /* query rows per workgroup (attn_flash.comp's BR) */
#define HX_VK_FA_BC 8         /* key positions per staged tile (its BC) */
#define HX_VK_FA_WG 128u      /* its invocations */
#define HX_VK_FA_SHARED 27008u /* bytes of shared memory it declares */

/* HX_VK_ATTN's value (auto, flash, rows) as enum hx_vk_attn, or -1. */
int hx__vk_attn_mode(const char *knob);

/* Whether a batch of n rows with head_dim hd runs attn_flash.comp under mode on a device with
 * caps c; when it cannot for want of the device's limits, why (n bytes) says so; else "". */
bool hx__vk_attn_flash(const struct hx_vk_caps *c, int mode, int64_t n, int hd, char *why,
                       size_t len);

struct hx_vk_pick_api {
    int (*gemm_choose)(const struct hx_vk_caps *c, const char *knob, char *why, size_t n);
    int (*mm_kernel)(bool lane, int gemm, bool f32_weights, int64_t m);
    int (*gemv_mode)(const char *knob);
    void (*gemv_plan)(int mode, uint32_t sg, uint32_t max_wg, uint32_t ue, int64_t K, int64_t N,
                      bool may_split, struct hx_vk_gemv_plan *out);
    uint32_t (*gemv_sg_required)(const struct hx_vk_sgctl *c, uint32_t layout_sg, uint32_t wg);
    int (*gemv_red)(const char *knob, bool shuffle, char *why, size_t n);
    int (*attn_mode)(const char *knob);
    bool (*attn_flash)(const struct hx_vk_caps *c, int mode, int64_t n, int hd, char *why,
                       size_t len);
};

/* The device's choice ("hx.vk.gemm"): the variant in use and, when a cooperative-matrix
 * variant was wanted but not taken (or its pipeline failed for a weight type), why. */
struct hx_vk_gemm_state {
    int variant; /* enum hx_vk_gemm */
    char why[192];
};
