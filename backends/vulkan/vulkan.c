/*
 * vulkan.c — the Vulkan backend's ops table, run-time loading of libvulkan, the process-wide
 * instance and device enumeration, device init/fini.
 *
 * libvulkan.so.1 is dlopen'ed by probe; if it or a usable device is missing the backend
 * reports why (probe's why[]) and the engine runs without it. The instance asks for
 * Vulkan 1.3 where the loader has it (a device's core 1.3 features — the integer dot
 * product — are usable only then), else 1.2. Enumeration happens once (in probe, which the core
 * calls once) and is kept for the process, ordered discrete GPU, integrated GPU, other, CPU (lavapipe), so
 * vulkan:0 is the best device: only devices with every required feature (Vulkan ≥ 1.2, 8- and
 * 16-bit storage buffers, subgroup basic + arithmetic in compute, subgroup size ≥ 4, 128
 * invocations per workgroup, R32G32B32A32_UINT uniform texel buffers, a compute queue) are
 * indexed; the others are listed with the reason in `why` and the log. Optional features
 * (integer dot product, subgroup ballot, int8, fp16) are recorded for the kernel choice
 * (vulkan-gemm.c). With HX_VK_VALIDATION=1 the Khronos validation layer and a debug
 * messenger counting errors are enabled (get_extension "hx.vk.validation_errors").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan-impl.h"

struct hx_vk_fns hx__vk_fn;

static struct {
    void *lib;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    int probe_status;
    char why[256];
    struct hx_vk_phys phys[HX_VK_MAX_DEVICES];
    int n_phys;
    int n_non_cpu;
    uint32_t validation_errors;
    uint32_t api_version; /* what the instance was created for: min(loader, 1.3) */
} hx_vk_g;

const char *hx__vk_result_name(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult";
    }
}

int hx__vk_fail(struct hx_device *dev, VkResult r, const char *what)
{
    int st = HX_E_DEVICE;
    if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) st = HX_E_NOMEM;
    if (r == VK_TIMEOUT) st = HX_E_TIMEOUT;
    if (r == VK_ERROR_DEVICE_LOST && dev->ctx) hx_vk_ctx(dev)->lost = true;
    return hx_device_set_error(dev, st, "%s failed: %s (VkResult %d)", what, hx__vk_result_name(r),
                               (int)r);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL
hx_vk_debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev, VkDebugUtilsMessageTypeFlagsEXT type,
               const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        __atomic_add_fetch(&hx_vk_g.validation_errors, 1, __ATOMIC_RELAXED);
        HX_LOG_ERROR("vulkan validation: %s", data && data->pMessage ? data->pMessage : "?");
    } else if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        HX_LOG_WARN("vulkan validation: %s", data && data->pMessage ? data->pMessage : "?");
    }
    return VK_FALSE;
}

uint32_t *hx__vk_validation_errors(void)
{
    return &hx_vk_g.validation_errors;
}
VkInstance hx__vk_instance(void)
{
    return hx_vk_g.instance;
}
const struct hx_vk_phys *hx__vk_phys(int idx)
{
    return idx >= 0 && idx < hx_vk_g.n_phys ? &hx_vk_g.phys[idx] : NULL;
}

static bool hx_vk_has_layer(const char *name)
{
    uint32_t n = 0;
    if (hx__vk_fn.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n) return false;
    VkLayerProperties *p = hx__calloc(n, sizeof *p);
    bool found = false;
    if (p && hx__vk_fn.vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) found |= strcmp(p[i].layerName, name) == 0;
    hx__free(p);
    return found;
}

static bool hx_vk_dev_has_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (hx__vk_fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS)
        return false;
    VkExtensionProperties *p = hx__calloc(n ? n : 1, sizeof *p);
    bool found = false;
    if (p && hx__vk_fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) found |= strcmp(p[i].extensionName, name) == 0;
    hx__free(p);
    return found;
}

static int hx_vk_load(void)
{
    const char *lib = getenv("HX_VK_LOADER"); /* tests: point at a missing library */
    hx_vk_g.lib = dlopen(lib && *lib ? lib : "libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!hx_vk_g.lib) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "%s not found",
                 lib && *lib ? lib : "libvulkan.so.1");
        return HX_E_UNAVAILABLE;
    }
    hx__vk_fn.vkGetInstanceProcAddr =
        (PFN_vkGetInstanceProcAddr)dlsym(hx_vk_g.lib, "vkGetInstanceProcAddr");
    if (!hx__vk_fn.vkGetInstanceProcAddr) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "libvulkan lacks vkGetInstanceProcAddr");
        return HX_E_UNAVAILABLE;
    }
#define HX_VK_GLOBAL(name) hx__vk_fn.name = (PFN_##name)hx__vk_fn.vkGetInstanceProcAddr(NULL, #name)
    HX_VK_GLOBAL(vkCreateInstance);
    HX_VK_GLOBAL(vkEnumerateInstanceVersion);
    HX_VK_GLOBAL(vkEnumerateInstanceLayerProperties);
    HX_VK_GLOBAL(vkEnumerateInstanceExtensionProperties);
#undef HX_VK_GLOBAL
    if (!hx__vk_fn.vkCreateInstance || !hx__vk_fn.vkEnumerateInstanceVersion ||
        !hx__vk_fn.vkEnumerateInstanceLayerProperties) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "Vulkan loader older than 1.1");
        return HX_E_UNAVAILABLE;
    }
    return HX_OK;
}

static int hx_vk_create_instance(void)
{
    uint32_t ver = 0;
    hx__vk_fn.vkEnumerateInstanceVersion(&ver);
    if (ver < VK_API_VERSION_1_2) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "Vulkan instance version %u.%u < 1.2",
                 VK_API_VERSION_MAJOR(ver), VK_API_VERSION_MINOR(ver));
        return HX_E_UNAVAILABLE;
    }
    /* 1.3 where the loader has it: a device's core 1.3 features (the integer dot product)
     * are usable only if the application asks for 1.3 */
    hx_vk_g.api_version = ver >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
    const char *env = getenv("HX_VK_VALIDATION");
    bool validate = env && env[0] == '1';
    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[2];
    uint32_t n_exts = 0;
    if (validate && !hx_vk_has_layer(layers[0])) {
        HX_LOG_WARN("vulkan: HX_VK_VALIDATION=1 but %s is not installed", layers[0]);
        validate = false;
    }
    if (validate) exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "hx",
        .pEngineName = "hx",
        .apiVersion = hx_vk_g.api_version,
    };
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = hx_vk_debug_cb,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validate ? &dbg : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1u : 0u,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = hx__vk_fn.vkCreateInstance(&ci, NULL, &hx_vk_g.instance);
    if (r != VK_SUCCESS) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "vkCreateInstance failed: %s (%d)",
                 hx__vk_result_name(r), (int)r);
        hx_vk_g.instance = VK_NULL_HANDLE;
        return HX_E_UNAVAILABLE;
    }
#define HX_VK_LOAD(name)                                                                           \
    hx__vk_fn.name = (PFN_##name)hx__vk_fn.vkGetInstanceProcAddr(hx_vk_g.instance, #name);         \
    if (!hx__vk_fn.name) {                                                                         \
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "Vulkan entry point %s missing", #name);         \
        return HX_E_UNAVAILABLE;                                                                   \
    }
    HX_VK_INSTANCE_FUNCS(HX_VK_LOAD)
#undef HX_VK_LOAD
    if (validate) {
        hx__vk_fn.vkCreateDebugUtilsMessengerEXT =
            (PFN_vkCreateDebugUtilsMessengerEXT)hx__vk_fn.vkGetInstanceProcAddr(
                hx_vk_g.instance, "vkCreateDebugUtilsMessengerEXT");
        if (hx__vk_fn.vkCreateDebugUtilsMessengerEXT)
            hx__vk_fn.vkCreateDebugUtilsMessengerEXT(hx_vk_g.instance, &dbg, NULL,
                                                     &hx_vk_g.messenger);
        HX_LOG_INFO("vulkan: validation layer enabled");
    }
    return HX_OK;
}

static const char *hx_vk_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU (software)";
    default: return "other";
    }
}

static enum hx_device_kind hx_vk_kind(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return HX_DEVICE_CPU;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return HX_DEVICE_IGPU;
    default: return HX_DEVICE_GPU;
    }
}

/* Does pd list a 16 × 16 × 16 cooperative-matrix configuration with f16 A and B, f32 C and
 * D at subgroup scope (what gemm_coopmat.comp multiplies)? */
static bool hx_vk_coopmat_nv_16(VkPhysicalDevice pd)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)hx__vk_fn.vkGetInstanceProcAddr(
            hx_vk_g.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(pd, &n, NULL) != VK_SUCCESS || !n) return false;
    VkCooperativeMatrixPropertiesNV *cp = hx__calloc(n, sizeof *cp);
    if (!cp) return false;
    for (uint32_t i = 0; i < n; i++)
        cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    bool found = false;
    if (get(pd, &n, cp) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) {
            const VkCooperativeMatrixPropertiesNV *c = &cp[i];
            found |= c->MSize == 16 && c->NSize == 16 && c->KSize == 16 &&
                     c->AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                     c->BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                     c->CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                     c->DType == VK_COMPONENT_TYPE_FLOAT32_NV && c->scope == VK_SCOPE_SUBGROUP_NV;
        }
    hx__free(cp);
    return found;
}

/* Fill p from pd; returns NULL when usable, else the reason. */
static const char *hx_vk_examine(VkPhysicalDevice pd, struct hx_vk_phys *p, char *buf, size_t n)
{
    VkPhysicalDeviceSubgroupProperties sg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &sg};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &m3};
    hx__vk_fn.vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceProperties *pr = &props.properties;
    memset(p, 0, sizeof *p);
    p->pd = pd;
    p->api_version = pr->apiVersion;
    struct hx_device_info *info = &p->info;
    info->struct_size = sizeof *info;
    snprintf(info->name, sizeof info->name, "%.127s", pr->deviceName);
    info->kind = hx_vk_kind(pr->deviceType);
    if (pr->apiVersion < VK_API_VERSION_1_2) {
        snprintf(buf, n, "Vulkan %u.%u < 1.2", VK_API_VERSION_MAJOR(pr->apiVersion),
                 VK_API_VERSION_MINOR(pr->apiVersion));
        return buf;
    }
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f11};
    /* the integer dot product: core in 1.3, else the KHR extension; query its feature bit
     * only where the structure is known to the device */
    bool dot_core =
        pr->apiVersion >= VK_API_VERSION_1_3 && hx_vk_g.api_version >= VK_API_VERSION_1_3;
    p->int_dot_ext =
        !dot_core && hx_vk_dev_has_ext(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    VkPhysicalDeviceShaderIntegerDotProductFeatures fdot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    if (dot_core || p->int_dot_ext) f12.pNext = &fdot;
    /* cooperative matrices (NV): the feature bit where the extension is offered */
    p->coopmat_nv_ext = hx_vk_dev_has_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .pNext = f12.pNext};
    if (p->coopmat_nv_ext) f12.pNext = &fcm;
    hx__vk_fn.vkGetPhysicalDeviceFeatures2(pd, &f);
    p->int8 = f12.shaderInt8;
    p->fp16 = f12.shaderFloat16;
    p->int_dot = (dot_core || p->int_dot_ext) && fdot.shaderIntegerDotProduct;
    if (p->int_dot) {
        VkPhysicalDeviceShaderIntegerDotProductProperties pdot = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
        VkPhysicalDeviceProperties2 pp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &pdot};
        hx__vk_fn.vkGetPhysicalDeviceProperties2(pd, &pp);
        p->int_dot_fast = pdot.integerDotProduct4x8BitPackedSignedAccelerated;
    }
    p->max_wg_invocations = pr->limits.maxComputeWorkGroupInvocations;
    p->caps = (struct hx_vk_caps){
        .coopmat_nv = p->coopmat_nv_ext && fcm.cooperativeMatrix,
        .coopmat_nv_16 = p->coopmat_nv_ext && fcm.cooperativeMatrix && hx_vk_coopmat_nv_16(pd),
        .fp16 = p->fp16,
        .memory_model = f12.vulkanMemoryModel,
        .subgroup_size = sg.subgroupSize,
        .max_wg_invocations = pr->limits.maxComputeWorkGroupInvocations,
        .max_shared_bytes = pr->limits.maxComputeSharedMemorySize,
    };
    VkFormatProperties fp;
    hx__vk_fn.vkGetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R32G32B32A32_UINT, &fp);
    p->texel_align = HX_MAX(pr->limits.minTexelBufferOffsetAlignment, 16);
    p->max_texels = (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT)
                        ? pr->limits.maxTexelBufferElements
                        : 0;
    p->ballot = (sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0;
    p->subgroup_size = sg.subgroupSize;
    p->min_align = pr->limits.minStorageBufferOffsetAlignment;
    p->max_range = pr->limits.maxStorageBufferRange;
    p->max_alloc = m3.maxMemoryAllocationSize;

    VkPhysicalDeviceMemoryProperties mp;
    hx__vk_fn.vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    size_t total = 0;
    char heaps[96] = "";
    size_t hl = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++) {
        bool local = mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
        if (local) total += mp.memoryHeaps[i].size;
        if (hl < sizeof heaps - 24)
            hl +=
                (size_t)snprintf(heaps + hl, sizeof heaps - hl, "%s%.1f GiB%s", i ? "+" : "",
                                 (double)mp.memoryHeaps[i].size / (1u << 30), local ? "" : " host");
    }
    bool uma = false;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags fl = mp.memoryTypes[i].propertyFlags;
        const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        if ((fl & want) == want) uma = true;
    }
    info->unified_memory = uma && info->kind != HX_DEVICE_GPU;
    info->memory_total_bytes = total;
    /* Free: what VK_EXT_memory_budget says the process may still allocate from the
     * device-local heaps (budget − usage); without it, unknown. */
    if (hx_vk_dev_has_ext(pd, "VK_EXT_memory_budget")) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT bud = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 mp2 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &bud};
        hx__vk_fn.vkGetPhysicalDeviceMemoryProperties2(pd, &mp2);
        size_t avail = 0;
        for (uint32_t i = 0; i < mp2.memoryProperties.memoryHeapCount; i++)
            if ((mp2.memoryProperties.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
                bud.heapBudget[i] > bud.heapUsage[i])
                avail += (size_t)(bud.heapBudget[i] - bud.heapUsage[i]);
        info->memory_free_bytes = avail;
    }
    info->max_alloc_bytes = (size_t)p->max_alloc;
    info->alignment_bytes = (size_t)HX_MAX(p->min_align, 16);
    info->weight_types = hx__vk_weight_types();
    snprintf(info->description, sizeof info->description,
             "%s, Vulkan %u.%u.%u, driver 0x%x, heaps %s, subgroup %u, int8 %s, fp16 %s, "
             "int-dot %s, coopmat %s, max binding %zu MiB",
             hx_vk_type_name(pr->deviceType), VK_API_VERSION_MAJOR(pr->apiVersion),
             VK_API_VERSION_MINOR(pr->apiVersion), VK_API_VERSION_PATCH(pr->apiVersion),
             pr->driverVersion, heaps, sg.subgroupSize, p->int8 ? "yes" : "no",
             p->fp16 ? "yes" : "no",
             p->int_dot ? (p->int_dot_fast ? "yes (accelerated)" : "yes (not accelerated)") : "no",
             p->caps.coopmat_nv_16 ? "NV 16x16x16 f16->f32"
             : p->caps.coopmat_nv  ? "NV (no 16x16x16 f16->f32)"
                                   : "no",
             (size_t)(p->max_range >> 20));

    if (!f11.storageBuffer16BitAccess) return "lacks storageBuffer16BitAccess";
    if (!f12.storageBuffer8BitAccess) return "lacks storageBuffer8BitAccess";
    VkSubgroupFeatureFlags need =
        VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sg.supportedOperations & need) != need ||
        !(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
        return "lacks subgroup basic/arithmetic operations in compute shaders";
    if (sg.subgroupSize < 4) return "subgroup size < 4";
    if (pr->limits.maxComputeWorkGroupInvocations < 128)
        return "maxComputeWorkGroupInvocations < 128";
    if (!p->max_texels) return "no uniform texel buffers of R32G32B32A32_UINT";
    if (p->max_range < (1u << 24)) return "maxStorageBufferRange < 16 MiB";

    uint32_t nq = 0;
    hx__vk_fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    hx__vk_fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
    int best = -1;
    for (uint32_t i = 0; i < nq; i++) {
        if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        /* prefer a compute-only queue family (async compute on discrete GPUs) */
        if (best < 0 || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = (int)i;
    }
    if (best < 0) return "no compute queue";
    p->queue_family = (uint32_t)best;
    return NULL;
}

/* Rank for the device order: discrete GPUs first, then integrated, then anything else, CPU
 * implementations (lavapipe) last, so index 0 is the best device and the registry's default
 * (the first non-CPU device) is it. */
static int hx_vk_rank(const struct hx_vk_phys *p)
{
    VkPhysicalDeviceProperties pr;
    hx__vk_fn.vkGetPhysicalDeviceProperties(p->pd, &pr);
    switch (pr.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 2;
    }
}

static void hx_vk_order(void)
{
    /* insertion sort: stable, so devices of one rank keep the driver's order */
    for (int i = 1; i < hx_vk_g.n_phys; i++) {
        struct hx_vk_phys t = hx_vk_g.phys[i];
        int r = hx_vk_rank(&t), j = i;
        for (; j > 0 && hx_vk_rank(&hx_vk_g.phys[j - 1]) > r; j--)
            hx_vk_g.phys[j] = hx_vk_g.phys[j - 1];
        hx_vk_g.phys[j] = t;
    }
}

static void hx_vk_enumerate(void)
{
    uint32_t n = 0;
    VkResult r = hx__vk_fn.vkEnumeratePhysicalDevices(hx_vk_g.instance, &n, NULL);
    VkPhysicalDevice pds[HX_VK_MAX_DEVICES];
    if (n > HX_VK_MAX_DEVICES) n = HX_VK_MAX_DEVICES;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        r = hx__vk_fn.vkEnumeratePhysicalDevices(hx_vk_g.instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "vkEnumeratePhysicalDevices failed: %s (%d)",
                 hx__vk_result_name(r), (int)r);
        return;
    }
    size_t wl = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct hx_vk_phys *p = &hx_vk_g.phys[hx_vk_g.n_phys];
        char buf[96];
        const char *bad = hx_vk_examine(pds[i], p, buf, sizeof buf);
        if (bad) {
            HX_LOG_INFO("vulkan: device '%s' not used: %s", p->info.name, bad);
            if (wl < sizeof hx_vk_g.why - 1)
                wl += (size_t)snprintf(hx_vk_g.why + wl, sizeof hx_vk_g.why - wl, "%s'%s' %s",
                                       wl ? "; " : "", p->info.name, bad);
            continue;
        }
        if (p->info.kind != HX_DEVICE_CPU) hx_vk_g.n_non_cpu++;
        hx_vk_g.n_phys++;
    }
    if (!n) snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "no Vulkan devices");
    hx_vk_order();
}

static void hx_vk_global_init(void)
{
    hx_vk_g.probe_status = hx_vk_load();
    if (hx_vk_g.probe_status == HX_OK) hx_vk_g.probe_status = hx_vk_create_instance();
    if (hx_vk_g.probe_status == HX_OK) hx_vk_enumerate();
    if (hx_vk_g.probe_status == HX_OK && hx_vk_g.n_phys == 0) {
        hx_vk_g.probe_status = HX_E_UNAVAILABLE;
        if (!hx_vk_g.why[0]) snprintf(hx_vk_g.why, sizeof hx_vk_g.why, "no usable Vulkan device");
    }
}

static int hx_vk_probe(struct hx_backend_probe *out)
{
    hx_vk_global_init();
    out->score = hx_vk_g.n_non_cpu > 0 ? 50 : 5;
    out->n_devices = hx_vk_g.n_phys;
    snprintf(out->why, sizeof out->why, "%s", hx_vk_g.why);
    return hx_vk_g.probe_status;
}

static int hx_vk_device_info(int idx, struct hx_device_info *out)
{
    *out = hx__vk_phys(idx)->info;
    return HX_OK;
}

static uint32_t hx_vk_pick_type(const VkPhysicalDeviceMemoryProperties *mp,
                                VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & want) == want && !(f & avoid)) return i;
    }
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
        if ((mp->memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

static int hx_vk_init(struct hx_device *dev, const struct hx_device_config *cfg)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    d->phys = hx__vk_phys(dev->index);
    if (!d->phys) return hx_device_set_error(dev, HX_E_NOTFOUND, "no Vulkan device %d", dev->index);
    const struct hx_vk_phys *p = d->phys;
    int st = HX_E_DEVICE; /* what a failure below returns unless it says otherwise */

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = p->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkPhysicalDeviceShaderIntegerDotProductFeatures fdot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = VK_TRUE,
    };
    /* cooperative matrices and the Vulkan memory model (gemm_coopmat.comp) where the device
     * has what that shader needs */
    const bool coop = p->caps.coopmat_nv && p->caps.memory_model;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .pNext = p->int_dot ? &fdot : NULL,
        .cooperativeMatrix = VK_TRUE,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = coop ? (void *)&fcm : p->int_dot ? (void *)&fdot : NULL,
        .storageBuffer8BitAccess = VK_TRUE,
        .shaderInt8 = p->int8 ? VK_TRUE : VK_FALSE,
        .shaderFloat16 = p->fp16 ? VK_TRUE : VK_FALSE,
        .vulkanMemoryModel = coop ? VK_TRUE : VK_FALSE,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &f12,
        .storageBuffer16BitAccess = VK_TRUE,
    };
    const char *exts[2];
    uint32_t n_exts = 0;
    if (p->int_dot && p->int_dot_ext)
        exts[n_exts++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    if (coop) exts[n_exts++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f11,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = hx__vk_fn.vkCreateDevice(p->pd, &dci, NULL, &d->dev);
    if (r != VK_SUCCESS) {
        d->dev = VK_NULL_HANDLE;
        return hx__vk_fail(dev, r, "vkCreateDevice");
    }
    hx__vk_fn.vkGetDeviceQueue(d->dev, p->queue_family, 0, &d->queue);

    VkPhysicalDeviceMemoryProperties mp;
    hx__vk_fn.vkGetPhysicalDeviceMemoryProperties(p->pd, &mp);
    const VkMemoryPropertyFlags hv =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    d->uma = p->info.unified_memory;
    if (d->uma) {
        d->mt_device = hx_vk_pick_type(&mp, hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        d->mt_host = d->mt_device;
    } else {
        d->mt_device = hx_vk_pick_type(&mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        d->mt_host = hx_vk_pick_type(&mp, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
        if (d->mt_host == UINT32_MAX) d->mt_host = hx_vk_pick_type(&mp, hv, 0);
    }
    if (d->mt_device == UINT32_MAX || d->mt_host == UINT32_MAX) {
        st = hx_device_set_error(dev, HX_E_UNSUPPORTED, "no suitable Vulkan memory type");
        goto fail;
    }
    d->align = HX_MAX(p->min_align, 16);

    VkCommandPoolCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = p->queue_family,
    };
    if ((r = hx__vk_fn.vkCreateCommandPool(d->dev, &cpi, NULL, &d->cmd_pool)) != VK_SUCCESS) {
        st = hx__vk_fail(dev, r, "vkCreateCommandPool");
        goto fail;
    }
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = d->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    for (int i = -1; i < HX_VK_REPLAY; i++) {
        struct hx_vk_rec *rc = i < 0 ? &d->base : &d->replay[i];
        if ((r = hx__vk_fn.vkAllocateCommandBuffers(d->dev, &cai, &rc->cb)) != VK_SUCCESS) {
            st = hx__vk_fail(dev, r, "vkAllocateCommandBuffers");
            goto fail;
        }
    }
    d->rec = &d->base;
    const char *rp = getenv("HX_VK_REPLAY"); /* 0: record every split (comparisons, tests) */
    d->replay_on = !(rp && !strcmp(rp, "0"));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = hx__vk_fn.vkCreateFence(d->dev, &fci, NULL, &d->fence)) != VK_SUCCESS) {
        st = hx__vk_fail(dev, r, "vkCreateFence");
        goto fail;
    }
    if ((st = hx__vk_kernels_init(dev)) != HX_OK) goto fail;
    if ((st = hx__vk_pipeline_init(dev)) != HX_OK) goto fail;
    if ((st = hx__vk_buf_create(dev, 256, true, &d->dummy, "dummy buffer")) != HX_OK) goto fail;
    if (p->max_texels && (st = hx__vk_view_create(dev, d->dummy.buf, 0, 256, &d->dummy_view)))
        goto fail;
    HX_LOG_INFO("[%s] vulkan device '%s' (%s), %s memory", dev->id, p->info.name,
                hx_device_kind_name(p->info.kind), d->uma ? "unified" : "device-local");
    return HX_OK;
fail:
    dev->ops->fini(dev);
    return st;
}

static void hx_vk_fini(struct hx_device *dev)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    if (!d || !d->dev) return;
    hx__vk_fn.vkDeviceWaitIdle(d->dev);
    HX_LOG_DEBUG("[%s] %llu splits recorded, %llu re-submitted from kept recordings", dev->id,
                 (unsigned long long)d->n_splits[0], (unsigned long long)d->n_splits[1]);
    hx__vk_lazy_free(dev);
    hx__vk_buf_destroy(d, &d->meta);
    if (d->dummy_view) hx__vk_fn.vkDestroyBufferView(d->dev, d->dummy_view, NULL);
    d->dummy_view = VK_NULL_HANDLE;
    hx__vk_buf_destroy(d, &d->dummy);
    hx__vk_buf_destroy(d, &d->staging);
    if (d->scratch_view) hx__vk_fn.vkDestroyBufferView(d->dev, d->scratch_view, NULL);
    d->scratch_view = VK_NULL_HANDLE;
    hx__vk_buf_destroy(d, &d->scratch);
    hx__vk_pipeline_fini(dev);
    if (d->fence) hx__vk_fn.vkDestroyFence(d->dev, d->fence, NULL);
    if (d->cmd_pool) hx__vk_fn.vkDestroyCommandPool(d->dev, d->cmd_pool, NULL);
    hx__vk_fn.vkDestroyDevice(d->dev, NULL);
    d->dev = VK_NULL_HANDLE;
}

static void *hx_vk_get_extension(struct hx_device *dev, const char *name)
{
    if (strcmp(name, "hx.timing") == 0) return &hx_vk_ctx(dev)->timing;
    if (strcmp(name, "hx.vk.validation_errors") == 0) return hx__vk_validation_errors();
    /* uint64_t[2]: splits recorded, splits re-submitted from a kept recording */
    if (strcmp(name, "hx.vk.replay") == 0) return hx_vk_ctx(dev)->n_splits;
    /* the GEMM choice: its pure functions (tests), and this device's (vulkan-pick.h) */
    if (strcmp(name, "hx.vk.pick") == 0) return (void *)&hx__vk_pick_api;
    if (strcmp(name, "hx.vk.gemm") == 0) return &hx_vk_ctx(dev)->gemm;
    if (strcmp(name, "hx.vk.gemv") == 0) return hx_vk_ctx(dev)->n_gemv;
    return NULL;
}

static void hx_vk_describe(struct hx_device *dev, char *out, size_t len)
{
    struct hx_vk_dev *d = hx_vk_ctx(dev);
    snprintf(out, len, "%s memory, %d shaders embedded, matmul: %s, activations %s%s%s",
             d->uma ? "unified (host-visible, no staging copy)" : "device-local (staged uploads)",
             (int)HX_SHADER_COUNT,
             d->lane ? "lane-layout GEMV"
             : d->gemm.variant == HX_VK_GEMM_COOPMAT_NV
                 ? "subgroup GEMV (m <= 4) + tiled GEMM (m < 16) + cooperative-matrix GEMM (NV)"
                 : "subgroup GEMV (m <= 4) + tiled GEMM",
             hx__vk_int8_name(d->int8), hx_vk_g.why[0] ? "; not used: " : "", hx_vk_g.why);
}

const struct hx_backend_ops hx__backend_vulkan_ops = {
    .abi_version = HX_BACKEND_ABI_VERSION,
    .struct_size = sizeof(struct hx_backend_ops),
    .name = "vulkan",
    .ctx_size = sizeof(struct hx_vk_dev),
    .caps = HX_BACKEND_ASYNC,
    .probe = hx_vk_probe,
    .device_info = hx_vk_device_info,
    .init = hx_vk_init,
    .fini = hx_vk_fini,
    .buffer_alloc = hx__vk_buffer_alloc,
    .buffer_free = hx__vk_buffer_free,
    .buffer_write = hx__vk_buffer_write,
    .buffer_read = hx__vk_buffer_read,
    .weight_prepare = hx__vk_weight_prepare,
    .weight_bytes = hx__vk_weight_bytes,
    .scratch_bytes = hx__vk_scratch_bytes,
    .weight_release = hx__vk_weight_release,
    .supports = hx__vk_supports,
    .run = hx__vk_run,
    .synchronize = hx__vk_synchronize,
    .estimate_cost = hx__vk_estimate_cost,
    .copy = hx__vk_copy,
    .get_extension = hx_vk_get_extension,
    .describe = hx_vk_describe,
};
