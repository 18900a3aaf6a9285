/*
 * vulkan-pipeline.c — pipelines, descriptors and command recording for the Vulkan backend.
 *
 * One descriptor-set layout (HX_VK_BINDINGS storage buffers, then two uniform texel buffers
 * of 16-byte texels: the weight and the staged activations as the lane-layout GEMVs read
 * them) and one pipeline layout (128 bytes of push constants, compute stage) serve every
 * shader. A pipeline is created on first use from the embedded SPIR-V with its workgroup
 * size as specialization constant 0 and the tile sizes chosen at init (d->spec,
 * vulkan-gemm.c) as constants 1..4, and kept in d->pipes[shader id][variant] until fini;
 * variant 1 has constant 1 (rows per pass) forced to 1 (decode on lavapipe). A shader with a
 * required subgroup size (d->sg_req: the wide GEMV where the device has subgroup size
 * control) is created with it, and with full subgroups where the device offers them. A
 * shader id's constants never change for a device, so (id, variant) is the cache key.
 * Descriptor sets come from pools that are reset when a new split starts recording (the
 * previous submission has completed by then).
 */
#include <stdio.h>
#include <string.h>

#include "vulkan-impl.h"

#define HX_VK_SETS_PER_POOL 512

int hx__vk_pipeline_init(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    VkDescriptorSetLayoutBinding b[HX_VK_BINDINGS + HX_VK_TEX_BINDINGS];
    for (uint32_t i = 0; i < HX_VK_BINDINGS + HX_VK_TEX_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = i >= HX_VK_BINDINGS ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                  : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = HX_VK_BINDINGS + HX_VK_TEX_BINDINGS,
        .pBindings = b,
    };
    VkResult r = hx__vk_fn.vkCreateDescriptorSetLayout(d->dev, &lci, NULL, &d->dsl);
    if (r != VK_SUCCESS) return hx__vk_fail(dev, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pcr = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = HX_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &d->dsl,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pcr,
    };
    r = hx__vk_fn.vkCreatePipelineLayout(d->dev, &pci, NULL, &d->layout);
    if (r != VK_SUCCESS) return hx__vk_fail(dev, r, "vkCreatePipelineLayout");
    return HX_OK;
}

void hx__vk_pipeline_fini(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    for (int i = 0; i < HX_SHADER_COUNT; i++)
        for (int k = 0; k < 2; k++)
            if (d->pipes[i][k]) hx__vk_fn.vkDestroyPipeline(d->dev, d->pipes[i][k], NULL);
    hx__vk_rec_free(d, &d->base);
    for (int i = 0; i < HX_VK_REPLAY; i++) hx__vk_rec_free(d, &d->replay[i]);
    if (d->layout) hx__vk_fn.vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    if (d->dsl) hx__vk_fn.vkDestroyDescriptorSetLayout(d->dev, d->dsl, NULL);
}

/* Workgroup size per shader: 128 for the long reductions (norm), 64 otherwise; never more
 * than 32 subgroups (the shaders' shared reduction arrays). */
uint32_t hx__vk_wg(struct hx_device *dev, enum hx_shader_id id)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (d->spec[id][0]) return d->spec[id][0];
    uint32_t wg = id == HX_SHADER_RMS_NORM ? 128u : 64u;
    uint32_t sg = d->phys->subgroup_size ? d->phys->subgroup_size : 32u;
    if (wg > 32u * sg) wg = 32u * sg;
    return wg;
}

/* Create pipeline (id, alt) if it is not there; a failure's VkResult and the call that failed
 * are returned, the device's error is left alone. */
static VkResult hx_vk_pipeline_make(struct hx_device *dev, enum hx_shader_id id, int alt,
                                    const char **what)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (d->pipes[id][alt]) return VK_SUCCESS;
    const struct hx_shader *sh = &hx__shaders[id];
    VkShaderModuleCreateInfo mci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = sh->nwords * 4,
        .pCode = sh->words,
    };
    VkShaderModule mod;
    VkResult r = hx__vk_fn.vkCreateShaderModule(d->dev, &mci, NULL, &mod);
    if (r != VK_SUCCESS) {
        *what = "vkCreateShaderModule";
        return r;
    }
    uint32_t wg = hx__vk_wg(dev, id), vals[5];
    memcpy(vals, d->spec[id], sizeof vals);
    vals[0] = wg;
    if (alt) vals[1] = 1;
    /* constants 1..4 are tile sizes of the matmul shaders (for mmvw, 4 is the required
     * subgroup size); others ignore the entries */
    VkSpecializationMapEntry me[5] = {{.constantID = 0, .offset = 0, .size = 4}};
    uint32_t n_me = 1;
    for (uint32_t i = 1; i < 5; i++)
        if (vals[i])
            me[n_me++] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {
        .mapEntryCount = n_me, .pMapEntries = me, .dataSize = sizeof vals, .pData = vals};
    /* a required subgroup size (the wide GEMV where the device has subgroup size control,
     * vulkan-gemm.c), with full subgroups where the device offers them and the workgroup is
     * whole subgroups */
    uint32_t req = d->sg_req[id];
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rsi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = req,
    };
    bool full = req && d->phys->sg_full && wg % req == 0;
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = req ? &rsi : NULL,
                .flags = full ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = mod,
                .pName = "main",
                .pSpecializationInfo = &si,
            },
        .layout = d->layout,
    };
    r = hx__vk_fn.vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &ci, NULL,
                                           &d->pipes[id][alt]);
    hx__vk_fn.vkDestroyShaderModule(d->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        d->pipes[id][alt] = VK_NULL_HANDLE;
        *what = "vkCreateComputePipelines";
        return r;
    }
    d->wg[id] = wg;
    char sgs[40] = "";
    if (req) snprintf(sgs, sizeof sgs, ", subgroup %u required%s", req, full ? ", full" : "");
    HX_LOG_DEBUG("[%s] pipeline %s%s created (workgroup %u%s)", dev->id, sh->name,
                 alt ? " (1 row)" : "", wg, sgs);
    return VK_SUCCESS;
}

bool hx__vk_pipeline_try(struct hx_device *dev, enum hx_shader_id id, char *why, size_t n)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const char *what = "";
    VkResult r;
    /* tests: a driver that offers the feature but fails the pipeline */
    bool inject = d->fail_pipeline[0] &&
                  !strncmp(hx__shaders[id].name, d->fail_pipeline, strlen(d->fail_pipeline));
    if (inject) {
        what = "vkCreateComputePipelines";
        r = VK_ERROR_INITIALIZATION_FAILED;
    } else {
        r = hx_vk_pipeline_make(dev, id, 0, &what);
    }
    if (r == VK_SUCCESS) return true;
    snprintf(why, n, "%s(%s) failed: %s%s", what, hx__shaders[id].name, hx__vk_result_name(r),
             inject ? " (injected: HX_VK_FAIL_PIPELINE)" : "");
    return false;
}

static int hx_vk_pipeline_get(struct hx_device *dev, enum hx_shader_id id, int alt, VkPipeline *out)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    const char *what = "";
    VkResult r = hx_vk_pipeline_make(dev, id, alt, &what);
    if (r != VK_SUCCESS) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s(%s)", what, hx__shaders[id].name);
        return hx__vk_fail(dev, r, msg);
    }
    *out = d->pipes[id][alt];
    return HX_OK;
}

void hx__vk_rec_free(struct hx_vk_dev *d, struct hx_vk_rec *rec)
{
    for (int i = 0; i < rec->n_dpools; i++)
        hx__vk_fn.vkDestroyDescriptorPool(d->dev, rec->dpools[i], NULL);
    hx__free(rec->dpools);
    hx__free(rec->ops);
    rec->dpools = NULL, rec->ops = NULL;
    rec->n_dpools = 0, rec->cap_ops = rec->n_ops = 0;
    rec->valid = false;
}

static int hx_vk_alloc_set(struct hx_device *dev, VkDescriptorSet *out)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    struct hx_vk_rec *rc = d->rec;
    if (rc->cur_dpool >= rc->n_dpools || rc->cur_sets >= HX_VK_SETS_PER_POOL) {
        if (rc->cur_dpool < rc->n_dpools && rc->cur_sets >= HX_VK_SETS_PER_POOL) rc->cur_dpool++;
        if (rc->cur_dpool >= rc->n_dpools) {
            VkDescriptorPool *np =
                hx__realloc(rc->dpools, (size_t)(rc->n_dpools + 1) * sizeof *np);
            if (!np) return HX_E_NOMEM;
            rc->dpools = np;
            VkDescriptorPoolSize ps[2] = {
                {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                 .descriptorCount = HX_VK_SETS_PER_POOL * HX_VK_BINDINGS},
                {.type = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                 .descriptorCount = HX_VK_SETS_PER_POOL * HX_VK_TEX_BINDINGS},
            };
            VkDescriptorPoolCreateInfo pci = {
                .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                .maxSets = HX_VK_SETS_PER_POOL,
                .poolSizeCount = 2,
                .pPoolSizes = ps,
            };
            VkResult r =
                hx__vk_fn.vkCreateDescriptorPool(d->dev, &pci, NULL, &rc->dpools[rc->n_dpools]);
            if (r != VK_SUCCESS) return hx__vk_fail(dev, r, "vkCreateDescriptorPool");
            rc->cur_dpool = rc->n_dpools++;
        }
        rc->cur_sets = 0;
    }
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = rc->dpools[rc->cur_dpool],
        .descriptorSetCount = 1,
        .pSetLayouts = &d->dsl,
    };
    VkResult r = hx__vk_fn.vkAllocateDescriptorSets(d->dev, &ai, out);
    if (r != VK_SUCCESS) return hx__vk_fail(dev, r, "vkAllocateDescriptorSets");
    rc->cur_sets++;
    return HX_OK;
}

struct hx_vk_bind hx__vk_bind(struct hx_vk_dev *d, VkBuffer b, size_t off, size_t nbytes,
                              uint32_t *rem)
{
    size_t start = off & ~(size_t)(d->align - 1);
    if (rem) *rem = (uint32_t)(off - start);
    return (struct hx_vk_bind){.buf = b, .off = start, .range = off - start + HX_MAX(nbytes, 4)};
}

int hx__vk_dispatch(struct hx_device *dev, enum hx_shader_id id, const struct hx_vk_bind *binds,
                    int n_binds, const void *push, size_t push_bytes, uint32_t gx, uint32_t gy,
                    uint32_t gz)
{
    return hx__vk_dispatch_tex(dev, id, binds, n_binds, NULL, push, push_bytes, gx, gy, gz);
}

int hx__vk_dispatch_tex(struct hx_device *dev, enum hx_shader_id id, const struct hx_vk_bind *binds,
                        int n_binds, const VkBufferView *tex, const void *push, size_t push_bytes,
                        uint32_t gx, uint32_t gy, uint32_t gz)
{
    return hx__vk_dispatch_ex(dev, id, false, binds, n_binds, tex, push, push_bytes, gx, gy, gz);
}

int hx__vk_dispatch_ex(struct hx_device *dev, enum hx_shader_id id, bool one_row,
                       const struct hx_vk_bind *binds, int n_binds, const VkBufferView *tex,
                       const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!gx || !gy || !gz) return HX_OK;
    HX_ASSERT(push_bytes <= HX_VK_PUSH_BYTES && n_binds <= HX_VK_BINDINGS);
    VkPipeline pipe = VK_NULL_HANDLE;
    VkDescriptorSet set = VK_NULL_HANDLE;
    int st = hx_vk_pipeline_get(dev, id, one_row ? 1 : 0, &pipe);
    if (st == HX_OK) st = hx_vk_alloc_set(dev, &set);
    if (st) return st;
    VkDescriptorBufferInfo bi[HX_VK_BINDINGS];
    VkWriteDescriptorSet wr[HX_VK_BINDINGS + HX_VK_TEX_BINDINGS];
    for (int i = 0; i < HX_VK_BINDINGS; i++) {
        if (i < n_binds && binds[i].buf)
            bi[i] = (VkDescriptorBufferInfo){binds[i].buf, binds[i].off, binds[i].range};
        else
            bi[i] = (VkDescriptorBufferInfo){d->dummy.buf, 0, VK_WHOLE_SIZE};
        wr[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = (uint32_t)i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[i],
        };
    }
    VkBufferView views[HX_VK_TEX_BINDINGS];
    for (int i = 0; i < HX_VK_TEX_BINDINGS; i++) {
        views[i] = tex && tex[i] ? tex[i] : d->dummy_view;
        wr[HX_VK_BINDINGS + i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = (uint32_t)(HX_VK_BINDINGS + i),
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
            .pTexelBufferView = &views[i],
        };
    }
    hx__vk_fn.vkUpdateDescriptorSets(d->dev, HX_VK_BINDINGS + HX_VK_TEX_BINDINGS, wr, 0, NULL);
    hx__vk_fn.vkCmdBindPipeline(d->rec->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    hx__vk_fn.vkCmdBindDescriptorSets(d->rec->cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &set,
                                      0, NULL);
    hx__vk_fn.vkCmdPushConstants(d->rec->cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                 (uint32_t)push_bytes, push);
    hx__vk_fn.vkCmdDispatch(d->rec->cb, gx, gy, gz);
    d->timing.n_calls++;
    return HX_OK;
}

void hx__vk_barrier(struct hx_vk_dev *d)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    hx__vk_fn.vkCmdPipelineBarrier(
        d->rec->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL,
        0, NULL);
}

void hx__vk_grid(uint64_t n, uint32_t *gx, uint32_t *gz)
{
    if (n <= 65535) {
        *gx = (uint32_t)n;
        *gz = 1;
        return;
    }
    *gx = 65535;
    *gz = (uint32_t)((n + 65534) / 65535);
}

int hx__vk_wait(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!d->pending) return d->lost ? HX_E_DEVICE : HX_OK;
    double t0 = hx__time_us();
    VkResult r = hx__vk_fn.vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_C(60000000000));
    if (r != VK_SUCCESS) {
        /* a hang or a lost device: the work may still be running, so nothing it uses may be
         * freed before vkDeviceWaitIdle (hx__vk_idle_if_lost); every later call fails */
        d->lost = true;
        return hx__vk_fail(dev, r, "vkWaitForFences");
    }
    d->pending = false;
    double t1 = hx__time_us();
    d->timing.device_us += t1 - d->submit_us;
    d->timing.host_us += t1 - t0;
    return HX_OK;
}

void hx__vk_idle_if_lost(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (d->lost && d->pending) {
        hx__vk_fn.vkDeviceWaitIdle(d->dev);
        d->pending = false;
    }
}

int hx__vk_begin(struct hx_device *dev)
{
    return hx__vk_begin_rec(dev, &hx_vk_ctx(dev)->base);
}

int hx__vk_begin_rec(struct hx_device *dev, struct hx_vk_rec *rec)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (d->lost) return hx_device_set_error(dev, HX_E_DEVICE, "device was lost earlier");
    int st = hx__vk_wait(dev);
    if (st) return st;
    VkResult r;
    rec->valid = false;
    for (int i = 0; i < rec->n_dpools; i++)
        if ((r = hx__vk_fn.vkResetDescriptorPool(d->dev, rec->dpools[i], 0)) != VK_SUCCESS)
            return hx__vk_fail(dev, r, "vkResetDescriptorPool");
    rec->cur_dpool = 0;
    rec->cur_sets = 0;
    d->rec = rec;
    if ((r = hx__vk_fn.vkResetCommandBuffer(rec->cb, 0)) != VK_SUCCESS)
        return hx__vk_fail(dev, r, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = rec == &d->base ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0,
    };
    if ((r = hx__vk_fn.vkBeginCommandBuffer(rec->cb, &bi)) != VK_SUCCESS)
        return hx__vk_fail(dev, r, "vkBeginCommandBuffer");
    return HX_OK;
}

int hx__vk_submit(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    VkResult r = hx__vk_fn.vkEndCommandBuffer(d->rec->cb);
    if (r != VK_SUCCESS) return hx__vk_fail(dev, r, "vkEndCommandBuffer");
    return hx__vk_resubmit(dev, d->rec);
}

int hx__vk_resubmit(struct hx_device *dev, struct hx_vk_rec *rec)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    VkResult r;
    d->rec = rec;
    if ((r = hx__vk_fn.vkResetFences(d->dev, 1, &d->fence)) != VK_SUCCESS)
        return hx__vk_fail(dev, r, "vkResetFences");
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &rec->cb,
    };
    d->submit_us = hx__time_us();
    if ((r = hx__vk_fn.vkQueueSubmit(d->queue, 1, &si, d->fence)) != VK_SUCCESS)
        return hx__vk_fail(dev, r, "vkQueueSubmit");
    d->pending = true;
    return HX_OK;
}
