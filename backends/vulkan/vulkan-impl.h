/*
 * vulkan-impl.h — private declarations of the Vulkan backend (backends/vulkan/ *.c).
 *
 * libvulkan is loaded at run time (dlopen "libvulkan.so.1" + vkGetInstanceProcAddr), so the
 * engine starts without a Vulkan loader; every entry point the backend uses is in
 * HX_VK_FUNCS and reached through hx__vk_fn. One process-wide instance (vulkan.c) enumerates
 * the physical devices once; a device's state (struct hx_vk_dev) is the hx_device ctx.
 *
 * Execution model: one command buffer per device, recorded for a whole split (dispatches
 * separated by compute→compute memory barriers), submitted once, completed by one fence.
 * Only one split is in flight per device: run() waits for the previous one first.
 * Every pipeline shares one descriptor-set layout (5 storage buffers, bindings 0..4, and 2
 * uniform texel buffers, bindings 5..6) and one pipeline layout (128 bytes of push
 * constants).
 */
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "hx-impl.h"
#include "shaders.h"
#include "vulkan-pick.h"

#define HX_VK_INSTANCE_FUNCS(X)                                                              \
    X(vkDestroyInstance)                                                                     \
    X(vkEnumeratePhysicalDevices)                                                            \
    X(vkGetPhysicalDeviceProperties)                                                         \
    X(vkGetPhysicalDeviceProperties2)                                                        \
    X(vkGetPhysicalDeviceFeatures2)                                                          \
    X(vkGetPhysicalDeviceMemoryProperties)                                                   \
    X(vkGetPhysicalDeviceMemoryProperties2)                                                  \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                              \
    X(vkEnumerateDeviceExtensionProperties)                                                  \
    X(vkCreateDevice)                                                                        \
    X(vkDestroyDevice)                                                                       \
    X(vkGetDeviceQueue)                                                                      \
    X(vkCreateBuffer)                                                                        \
    X(vkDestroyBuffer)                                                                       \
    X(vkGetBufferMemoryRequirements)                                                         \
    X(vkAllocateMemory)                                                                      \
    X(vkFreeMemory)                                                                          \
    X(vkBindBufferMemory)                                                                    \
    X(vkMapMemory)                                                                           \
    X(vkUnmapMemory)                                                                         \
    X(vkCreateShaderModule)                                                                  \
    X(vkDestroyShaderModule)                                                                 \
    X(vkCreateDescriptorSetLayout)                                                           \
    X(vkDestroyDescriptorSetLayout)                                                          \
    X(vkCreatePipelineLayout)                                                                \
    X(vkDestroyPipelineLayout)                                                               \
    X(vkCreateComputePipelines)                                                              \
    X(vkDestroyPipeline)                                                                     \
    X(vkCreateDescriptorPool)                                                                \
    X(vkDestroyDescriptorPool)                                                               \
    X(vkResetDescriptorPool)                                                                 \
    X(vkAllocateDescriptorSets)                                                              \
    X(vkUpdateDescriptorSets)                                                                \
    X(vkCreateCommandPool)                                                                   \
    X(vkDestroyCommandPool)                                                                  \
    X(vkAllocateCommandBuffers)                                                              \
    X(vkResetCommandBuffer)                                                                  \
    X(vkBeginCommandBuffer)                                                                  \
    X(vkEndCommandBuffer)                                                                    \
    X(vkCmdBindPipeline)                                                                     \
    X(vkCmdBindDescriptorSets)                                                               \
    X(vkCmdPushConstants)                                                                    \
    X(vkCmdDispatch)                                                                         \
    X(vkCmdPipelineBarrier)                                                                  \
    X(vkCmdCopyBuffer)                                                                       \
    X(vkCreateBufferView)                                                                    \
    X(vkDestroyBufferView)                                                                   \
    X(vkGetPhysicalDeviceFormatProperties)                                                   \
    X(vkCreateFence)                                                                         \
    X(vkDestroyFence)                                                                        \
    X(vkResetFences)                                                                         \
    X(vkWaitForFences)                                                                       \
    X(vkQueueSubmit)                                                                         \
    X(vkDeviceWaitIdle)

struct hx_vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
    PFN_vkEnumerateInstanceLayerProperties vkEnumerateInstanceLayerProperties;
    PFN_vkEnumerateInstanceExtensionProperties vkEnumerateInstanceExtensionProperties;
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
#define HX_VK_FN_FIELD(name) PFN_##name name;
    HX_VK_INSTANCE_FUNCS(HX_VK_FN_FIELD)
#undef HX_VK_FN_FIELD
};
extern struct hx_vk_fns hx__vk_fn;

#define HX_VK_MAX_DEVICES 16
#define HX_VK_BINDINGS 5       /* storage buffers 0..4 */
#define HX_VK_TEX_BINDINGS 2   /* uniform texel buffers 5, 6 */
#define HX_VK_PUSH_BYTES 128

/* What enumeration learned about one physical device (usable ones only are indexed). */
struct hx_vk_phys {
    VkPhysicalDevice pd;
    struct hx_device_info info;
    uint32_t api_version;
    uint32_t queue_family;
    uint32_t subgroup_size;
    VkDeviceSize min_align;        /* minStorageBufferOffsetAlignment */
    VkDeviceSize max_range;        /* maxStorageBufferRange */
    VkDeviceSize max_alloc;        /* maxMemoryAllocationSize */
    VkDeviceSize texel_align;      /* minTexelBufferOffsetAlignment (≥ 16) */
    VkDeviceSize max_texels;       /* maxTexelBufferElements; 0: no R32G32B32A32_UINT texel buffers */
    uint32_t max_wg_invocations;   /* maxComputeWorkGroupInvocations */
    bool ballot;                   /* subgroup ballot ops (broadcast) in compute */
    bool shuffle;                  /* subgroup shuffle ops (GL_KHR_shader_subgroup_shuffle) */
    /* subgroup size control (Vulkan 1.3 or VK_EXT_subgroup_size_control) for compute: a
     * pipeline may ask for a size in [sg_min, sg_max], and for full subgroups (sg_full) */
    bool sg_ctl, sg_ctl_ext, sg_full;
    uint32_t sg_min, sg_max, sg_max_wg_subgroups;
    bool int8, fp16;               /* shaderInt8, shaderFloat16 */
    bool int_dot;                  /* shaderIntegerDotProduct (Vulkan 1.3 or the KHR extension) */
    bool int_dot_ext;              /* ... through VK_KHR_shader_integer_dot_product (< 1.3) */
    bool int_dot_fast;             /* 4×8-bit packed signed dot product is accelerated */
    bool coopmat_nv_ext;           /* VK_NV_cooperative_matrix is offered (enabled when caps say) */
    struct hx_vk_caps caps;        /* what the GEMM choice reads (vulkan-pick.h) */
};

/* The process-wide instance (vulkan.c); NULL when unavailable. */
VkInstance hx__vk_instance(void);
const struct hx_vk_phys *hx__vk_phys(int idx);
/* Number of validation-layer errors reported so far (HX_VK_VALIDATION=1). */
uint32_t *hx__vk_validation_errors(void);

struct hx_vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;            /* persistent mapping when host-visible, else NULL */
    size_t nbytes;        /* usable bytes (allocation is rounded up) */
};

/* Bytes past the end of a weight that a shader may read (block views load one word more
 * than a block when it starts 2 bytes into a word, two texels more through the texel
 * buffer): allocated (zeroed where mapped) and bound with the weight. */
#define HX_VK_WEIGHT_SLACK 64

/* How quantized matmuls treat activations (vulkan-gemm.c). */
enum { HX_VK_INT8_OFF, HX_VK_INT8_EMUL, HX_VK_INT8_DOT };

struct hx_vk_weight {
    struct hx_vk_buf b;
    const struct hx_weight *w;
    size_t row_bytes;
    /* texel-buffer views of the weight, one per binding chunk of rows (made on first use) */
    VkBufferView *views;
    int64_t n_views;
};

struct hx_vk_lazy;        /* weights prepared on first use (vulkan-mem.c) */

/* A command buffer and the descriptor pools its sets come from. `base` records what runs once
 * (prefill batches, copies); a replay entry keeps a decode split's recording, which is
 * submitted again while the split's ops, row count and the device's buffers are the same:
 * everything that changes per token (tokens, positions, sequences) is read by the shaders
 * from the metadata buffer, written before each submit (vulkan-ops.c). */
struct hx_vk_rec {
    VkCommandBuffer cb;
    VkDescriptorPool *dpools;
    int n_dpools, cur_dpool;
    uint32_t cur_sets;
    struct hx_op *ops; /* replay: a copy of the recorded split's ops */
    int64_t n_ops, n_rows, cap_ops;
    uint64_t gen, used; /* the buffer generation recorded against; last use (LRU) */
    bool valid;
};
#define HX_VK_REPLAY 32      /* decode recordings kept per device (layer_by_layer: one per split) */
#define HX_VK_REPLAY_ROWS 16 /* splits of at most this many rows are kept (decode batches) */

struct hx_vk_dev {
    const struct hx_vk_phys *phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t mt_device;   /* memory type for device buffers */
    uint32_t mt_host;     /* host-visible coherent type for staging / metadata */
    bool uma;             /* device buffers are host-visible (integrated GPU, lavapipe) */
    VkDeviceSize align;   /* effective offset alignment for bindings (≥ 16) */

    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipes[HX_SHADER_COUNT][2];   /* [id][1]: specialization constant 1 forced to 1 */
    uint32_t wg[HX_SHADER_COUNT];
    /* specialization constants 0..4 per shader (0 = workgroup size; 0 there = default) */
    uint32_t spec[HX_SHADER_COUNT][5];
    bool lane;            /* lane-layout GEMVs (CPU-type device) instead of subgroup + GEMM */
    int int8;             /* HX_VK_INT8_*: quantized weights × int8 activations */
    struct hx_vk_gemm_state gemm; /* GEMM variant for m ≥ 16 (vulkan-pick.h) */
    int gemv;             /* HX_VK_GEMV mode (enum hx_vk_gemv) for the GPU layout's m ≤ 4 */
    uint32_t gemv_sg;     /* the subgroup size the wide GEMV is laid out for */
    /* its required subgroup size and reduction ("hx.vk.gemv_state") */
    struct hx_vk_gemv_state gemv_state;
    uint32_t sg_req[HX_SHADER_COUNT];   /* required subgroup size per pipeline (0: the driver's) */
    int attn;             /* HX_VK_ATTN mode (enum hx_vk_attn) */
    /* GPU-layout GEMV dispatches by kernel: mmv, mmvw, mmvw with split K ("hx.vk.gemv") */
    uint64_t n_gemv[3];
    int8_t coop_ok[HX_DTYPE_COUNT]; /* coopmat pipeline per type: 0 untried, 1 ok, -1 failed */
    char fail_pipeline[32]; /* HX_VK_FAIL_PIPELINE (tests): optional pipelines named so fail */

    VkCommandPool cmd_pool;
    struct hx_vk_rec base;                 /* one-time recordings */
    struct hx_vk_rec replay[HX_VK_REPLAY]; /* decode splits kept for re-submission */
    struct hx_vk_rec *rec;                 /* the one being recorded, or last submitted */
    bool replay_on;                        /* HX_VK_REPLAY=0 turns re-submission off */
    uint64_t gen;   /* bumped by every buffer created or destroyed: older recordings are stale */
    uint64_t tick;  /* replay LRU clock */
    uint64_t n_splits[2]; /* splits recorded, re-submitted (get_extension "hx.vk.replay") */
    VkFence fence;
    bool pending;         /* a submission is in flight */
    bool lost;            /* a fatal driver error happened; every call fails */
    int pending_status;

    struct hx_vk_buf meta;    /* split tokens/pos/seq (host-visible) */
    struct hx_vk_buf dummy;   /* bound to unused bindings */
    VkBufferView dummy_view;  /* ... and its texel view */
    struct hx_vk_buf staging; /* host-visible bounce buffer (non-UMA devices) */
    struct hx_vk_buf scratch; /* int8 activations of the matmul being run (device memory) */
    VkBufferView scratch_view; /* ... as texels */

    struct hx_vk_lazy *lazy;

    struct hx_timing_stats timing;
    double submit_us;
};

static inline struct hx_vk_dev *hx_vk_ctx(struct hx_device *dev)
{
    return (struct hx_vk_dev *)dev->ctx;
}

/* vk result → set the device error (native VkResult in the message), return the status. */
int hx__vk_fail(struct hx_device *dev, VkResult r, const char *what);
const char *hx__vk_result_name(VkResult r);

/* vulkan-mem.c */
int hx__vk_buf_create(struct hx_device *dev, size_t nbytes, bool host, struct hx_vk_buf *out,
                      const char *what);
void hx__vk_buf_destroy(struct hx_vk_dev *d, struct hx_vk_buf *b);
int hx__vk_buffer_alloc(struct hx_device *dev, size_t nbytes, struct hx_buffer *buf);
void hx__vk_buffer_free(struct hx_device *dev, struct hx_buffer *buf);
int hx__vk_buffer_write(struct hx_device *dev, struct hx_buffer *buf, size_t offset,
                        const void *src, size_t nbytes);
int hx__vk_buffer_read(struct hx_device *dev, struct hx_buffer *buf, size_t offset, void *dst,
                       size_t nbytes);
int hx__vk_copy(struct hx_device *dev, struct hx_buffer *dst, size_t dst_off,
                struct hx_buffer *src, size_t src_off, size_t nbytes);
int hx__vk_weight_prepare(struct hx_device *dev, const struct hx_weight *w, void **handle);
int hx__vk_weight_bytes(struct hx_device *dev, const struct hx_weight *w, void *handle,
                        size_t *out);
void hx__vk_weight_release(struct hx_device *dev, void *handle);
/* handle from the op, else prepared now and cached until fini. */
int hx__vk_weight_get(struct hx_device *dev, const struct hx_weight *w, void *handle,
                      struct hx_vk_weight **out);
void hx__vk_lazy_free(struct hx_device *dev);
/* Make d->scratch at least nbytes (waits for the split in flight first). */
int hx__vk_scratch_reserve(struct hx_device *dev, size_t nbytes);
size_t hx__vk_scratch_size(struct hx_vk_dev *d, size_t nbytes);
/* The scheduler's accounting of the scratch and the split metadata (hx_backend_ops). */
int hx__vk_scratch_bytes(struct hx_device *dev, const struct hx_split *sp,
                         size_t out[HX_SCRATCH_BUFS]);

/* vulkan-pipeline.c */
int hx__vk_pipeline_init(struct hx_device *dev);
void hx__vk_pipeline_fini(struct hx_device *dev);
/* A bound range: the host aligns offsets down and passes the remainder to the shader. */
struct hx_vk_bind {
    VkBuffer buf;
    VkDeviceSize off, range;
};
/* Bind [off, off + nbytes) of b; *rem gets off minus the aligned binding start (bytes). */
struct hx_vk_bind hx__vk_bind(struct hx_vk_dev *d, VkBuffer b, size_t off, size_t nbytes,
                              uint32_t *rem);
/* Create the pipeline of shader id now without failing the device: a VkResult error is
 * written to why (n bytes) and returned as false (optional variants fall back on it). */
bool hx__vk_pipeline_try(struct hx_device *dev, enum hx_shader_id id, char *why, size_t n);
int hx__vk_dispatch(struct hx_device *dev, enum hx_shader_id id, const struct hx_vk_bind *binds,
                    int n_binds, const void *push, size_t push_bytes, uint32_t gx, uint32_t gy,
                    uint32_t gz);
/* The same with bindings 5, 6 (uniform texel buffers) = tex[0], tex[1]; NULL / VK_NULL_HANDLE
 * binds a dummy. */
int hx__vk_dispatch_tex(struct hx_device *dev, enum hx_shader_id id, const struct hx_vk_bind *binds,
                        int n_binds, const VkBufferView *tex, const void *push, size_t push_bytes,
                        uint32_t gx, uint32_t gy, uint32_t gz);
/* ... with the pipeline variant whose constant 1 (rows per pass) is 1 when one_row. */
int hx__vk_dispatch_ex(struct hx_device *dev, enum hx_shader_id id, bool one_row,
                       const struct hx_vk_bind *binds, int n_binds, const VkBufferView *tex,
                       const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);
/* A texel view (R32G32B32A32_UINT) of [off, off + nbytes) of buf; off % texel_align == 0. */
int hx__vk_view_create(struct hx_device *dev, VkBuffer buf, size_t off, size_t nbytes, VkBufferView *out);
uint32_t hx__vk_wg(struct hx_device *dev, enum hx_shader_id id);
void hx__vk_barrier(struct hx_vk_dev *d);
/* Begin recording into d->base (waits for the previous submission, resets its pools). */
int hx__vk_begin(struct hx_device *dev);
/* ... into rec, kept for re-submission (not one-time) unless rec is &d->base. */
int hx__vk_begin_rec(struct hx_device *dev, struct hx_vk_rec *rec);
/* End d->rec's recording and submit it. */
int hx__vk_submit(struct hx_device *dev);
/* Submit rec's recording again (ended earlier; nothing pending). */
int hx__vk_resubmit(struct hx_device *dev, struct hx_vk_rec *rec);
/* Free what a recording holds (its pools, its ops copy; the command buffer goes with the
 * pool). */
void hx__vk_rec_free(struct hx_vk_dev *d, struct hx_vk_rec *rec);
int hx__vk_wait(struct hx_device *dev);
/* After a failed wait the work may still run: wait for the device to go idle before
 * freeing anything (buffer_free, weight_release). */
void hx__vk_idle_if_lost(struct hx_device *dev);
/* Fold n workgroups over x and z (x ≤ 65535). */
void hx__vk_grid(uint64_t n, uint32_t *gx, uint32_t *gz);

/* vulkan-ops.c / vulkan-gemm.c */
bool hx__vk_supports(struct hx_device *dev, const struct hx_op_desc *op);
/* Weight types with shaders (vulkan-gemm.c): the one test, and the device's weight_types mask. */
bool hx__vk_type_ok(enum hx_dtype t);
uint32_t hx__vk_weight_types(void);
int hx__vk_run(struct hx_device *dev, const struct hx_split *split);
int hx__vk_synchronize(struct hx_device *dev);
int hx__vk_op_matmul(struct hx_device *dev, const struct hx_op *op, int64_t n_rows);
/* Pick the matmul kernels and their specialization constants (device init). */
int hx__vk_kernels_init(struct hx_device *dev);
/* Scratch bytes the matmul op needs for its int8 activations (0: none). */
size_t hx__vk_matmul_scratch(struct hx_device *dev, const struct hx_op *op, int64_t n_rows);
const char *hx__vk_int8_name(int mode);
/* The pure kernel-choice functions (vulkan-pick.h), for get_extension "hx.vk.pick". */
extern const struct hx_vk_pick_api hx__vk_pick_api;
int hx__vk_op_embed(struct hx_device *dev, const struct hx_op *op, int64_t n_rows);
int hx__vk_estimate_cost(struct hx_device *dev, const struct hx_op_desc *op, double *us);
