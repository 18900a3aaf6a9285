/*
 * npu-xrt.cpp — the XRT glue: the one C++ file of the NPU backend, behind the extern "C"
 * table of npu-glue.h. Built only against XRT >= 2.15 (xrt/xrt_hw_context.h) into the module
 * libhx-npu-xrt.so, which the npu backend dlopens, so the engine itself never links XRT.
 *
 * Sequence (npu.md §1.3): xrt::device(0); xrt::xclbin(path); the first kernel whose name
 * starts with "MLIR_AIE"; device.register_xclbin(xclbin) (a no-op on the XDNA shim, but XRT
 * records the xclbin there for the context); xrt::hw_context(device, uuid); xrt::kernel(ctx,
 * name); BOs as xrt::bo(device, bytes, flags, kernel.group_id(arg)); one xrt::run per handle,
 * re-armed with set_arg for every call (opcode 3, instruction BO, instruction count, A, B, C),
 * start(), wait(timeout) -> ert_cmd_state, abort() after a timeout.
 *
 * Every XRT call sits in a try block: an exception becomes a status code and the handle's
 * error string (the exception text). Nothing escapes into C.
 */
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>
#if __has_include(<xrt/experimental/xrt_xclbin.h>)
#include <xrt/experimental/xrt_xclbin.h>
#elif __has_include(<experimental/xrt_xclbin.h>)
#include <experimental/xrt_xclbin.h>
#endif

#include "hx.h"
#include "npu-glue.h"

namespace {

/* npu-glue.h restates XRT's values so that the C side needs no XRT header; compiling this
 * file against XRT (scripts/ci-xrt.sh in CI) checks that they still agree. x_wait hands the
 * ert_cmd_state through as it is. */
static_assert(HX_NPU_BO_CACHEABLE == XRT_BO_FLAGS_CACHEABLE, "BO flags");
static_assert(HX_NPU_BO_HOST_ONLY == XRT_BO_FLAGS_HOST_ONLY, "BO flags");
static_assert(int{HX_NPU_STATE_COMPLETED} == int{ERT_CMD_STATE_COMPLETED}, "state");
static_assert(int{HX_NPU_STATE_ERROR} == int{ERT_CMD_STATE_ERROR}, "state");
static_assert(int{HX_NPU_STATE_ABORT} == int{ERT_CMD_STATE_ABORT}, "state");
static_assert(int{HX_NPU_STATE_TIMEOUT} == int{ERT_CMD_STATE_TIMEOUT}, "state");
static_assert(int{HX_NPU_STATE_NORESPONSE} == int{ERT_CMD_STATE_NORESPONSE}, "state");

struct xrt_bo_h {
    xrt::bo bo;
    size_t nbytes;
};

struct xrt_ctx {
    xrt::device dev;
    xrt::xclbin xclbin;
    xrt::hw_context ctx;
    xrt::kernel kernel;
    xrt::run run;
    bool have_run = false;
    std::string err;
    std::chrono::steady_clock::time_point started;
    double last_us = -1.0;
};

using clock_type = std::chrono::steady_clock;

int fail(xrt_ctx *c, int st, const char *what, const char *why)
{
    if (c) c->err = std::string(what) + ": " + why;
    return st;
}

/* "..._<M>x<K>x<N>_<m>x<k>x<n>_<cols>c.xclbin": the mlir-aie artifact name, when it is one. */
bool name_matches(const char *path, const hx_npu_kernel_desc *d, char *err, size_t n)
{
    const char *base = std::strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *p = std::strchr(base, '_'); p; p = std::strchr(p + 1, '_')) {
        long long M, K, N, m, k, nn;
        int cols, used = 0;
        if (std::sscanf(p, "_%lldx%lldx%lld_%lldx%lldx%lld_%dc.xclbin%n", &M, &K, &N, &m, &k, &nn,
                        &cols, &used) != 7 || p[used] != '\0')
            continue;
        if (M != d->M || K != d->K || N != d->N || m != d->m || k != d->k || nn != d->n ||
            cols != d->cols) {
            std::snprintf(err, n, "xclbin %s is named for %lldx%lldx%lld tiles %lldx%lldx%lld on %d "
                          "columns, the manifest says %lldx%lldx%lld tiles %lldx%lldx%lld on %d",
                          base, M, K, N, m, k, nn, cols, (long long)d->M, (long long)d->K,
                          (long long)d->N, (long long)d->m, (long long)d->k, (long long)d->n, d->cols);
            return false;
        }
        return true;
    }
    return true;   /* not an mlir-aie name: nothing to compare */
}

int x_open(const hx_npu_kernel_desc *kd, void **h, char *err, size_t err_len)
{
    *h = nullptr;
    if (!kd->xclbin_path || !*kd->xclbin_path) {
        std::snprintf(err, err_len, "the XRT backend needs an xclbin for every kernel");
        return HX_E_INVAL;
    }
    if (!name_matches(kd->xclbin_path, kd, err, err_len)) return HX_E_FORMAT;
    const char *step = "xrt::device(0)";
    try {
        std::unique_ptr<xrt_ctx> c(new xrt_ctx);
        c->dev = xrt::device(0u);
        step = "xrt::xclbin";
        c->xclbin = xrt::xclbin(std::string(kd->xclbin_path));
        std::string name;
        for (auto &k : c->xclbin.get_kernels())
            if (k.get_name().rfind("MLIR_AIE", 0) == 0) {
                name = k.get_name();
                break;
            }
        if (name.empty()) {
            std::snprintf(err, err_len, "%s has no kernel named MLIR_AIE*", kd->xclbin_path);
            return HX_E_FORMAT;
        }
        step = "device.register_xclbin";
        c->dev.register_xclbin(c->xclbin);
        step = "xrt::hw_context";
        c->ctx = xrt::hw_context(c->dev, c->xclbin.get_uuid());
        step = "xrt::kernel";
        c->kernel = xrt::kernel(c->ctx, name);
        *h = c.release();
        return HX_OK;
    } catch (const std::exception &e) {
        std::snprintf(err, err_len, "%s failed: %s", step, e.what());
    } catch (...) {
        std::snprintf(err, err_len, "%s failed: unknown exception", step);
    }
    return HX_E_DEVICE;
}

int x_bo_alloc(void *h, size_t nbytes, uint32_t flags, int group_id, void **bo)
{
    auto *c = static_cast<xrt_ctx *>(h);
    *bo = nullptr;
    xrt::bo::flags f;
    if (flags == HX_NPU_BO_CACHEABLE) f = xrt::bo::flags::cacheable;
    else if (flags == HX_NPU_BO_HOST_ONLY) f = xrt::bo::flags::host_only;
    else return fail(c, HX_E_INVAL, "xrt::bo", "unsupported flags");
    try {
        auto group = static_cast<xrt::memory_group>(c->kernel.group_id(group_id));
        *bo = new xrt_bo_h{xrt::bo(c->dev, nbytes, f, group), nbytes};
        return HX_OK;
    } catch (const std::exception &e) {
        std::string why = std::string(e.what()) + " (large BOs need `ulimit -l unlimited`: "
                          "set memlock in /etc/security/limits.d)";
        return fail(c, HX_E_NOMEM, "xrt::bo allocation", why.c_str());
    } catch (...) {
        return fail(c, HX_E_NOMEM, "xrt::bo allocation", "unknown exception");
    }
}

void x_bo_free(void *h, void *bo)
{
    (void)h;
    try {
        delete static_cast<xrt_bo_h *>(bo);
    } catch (...) {
    }
}

void *x_bo_map(void *h, void *bo)
{
    auto *c = static_cast<xrt_ctx *>(h);
    try {
        return static_cast<xrt_bo_h *>(bo)->bo.map<void *>();
    } catch (const std::exception &e) {
        fail(c, HX_E_DEVICE, "bo.map", e.what());
    } catch (...) {
        fail(c, HX_E_DEVICE, "bo.map", "unknown exception");
    }
    return nullptr;
}

int x_bo_sync(void *h, void *bo, int dir, size_t nbytes, size_t offset)
{
    auto *c = static_cast<xrt_ctx *>(h);
    try {
        static_cast<xrt_bo_h *>(bo)->bo.sync(dir == HX_NPU_SYNC_TO_DEVICE ? XCL_BO_SYNC_BO_TO_DEVICE
                                                                          : XCL_BO_SYNC_BO_FROM_DEVICE,
                                             nbytes, offset);
        return HX_OK;
    } catch (const std::exception &e) {
        return fail(c, HX_E_DEVICE, "bo.sync", e.what());
    } catch (...) {
        return fail(c, HX_E_DEVICE, "bo.sync", "unknown exception");
    }
}

int x_run(void *h, uint32_t opcode, void *instr_bo, uint32_t ninstr, void *const *bos, int n_bos)
{
    auto *c = static_cast<xrt_ctx *>(h);
    if (n_bos < 1 || n_bos > HX_NPU_MAX_HOST_BOS) return fail(c, HX_E_INVAL, "run", "bad BO count");
    try {
        if (!c->have_run) {
            c->run = xrt::run(c->kernel);
            c->have_run = true;
        }
        c->run.set_arg(0, static_cast<uint64_t>(opcode));
        c->run.set_arg(1, static_cast<xrt_bo_h *>(instr_bo)->bo);
        c->run.set_arg(2, ninstr);
        for (int i = 0; i < n_bos; i++) c->run.set_arg(HX_NPU_ARG_BO0 + i, static_cast<xrt_bo_h *>(bos[i])->bo);
        c->started = clock_type::now();
        c->run.start();
        return HX_OK;
    } catch (const std::exception &e) {
        return fail(c, HX_E_DEVICE, "run.start", e.what());
    } catch (...) {
        return fail(c, HX_E_DEVICE, "run.start", "unknown exception");
    }
}

int x_wait(void *h, uint32_t timeout_ms, int *state)
{
    auto *c = static_cast<xrt_ctx *>(h);
    *state = HX_NPU_STATE_ERROR;
    try {
        ert_cmd_state s = c->run.wait(std::chrono::milliseconds(timeout_ms));
        c->last_us = std::chrono::duration<double, std::micro>(clock_type::now() - c->started).count();
        *state = static_cast<int>(s);
        if (s != ERT_CMD_STATE_COMPLETED) c->err = "command state " + std::to_string(static_cast<int>(s));
        return HX_OK;
    } catch (const std::exception &e) {
        return fail(c, HX_E_DEVICE, "run.wait", e.what());
    } catch (...) {
        return fail(c, HX_E_DEVICE, "run.wait", "unknown exception");
    }
}

int x_abort(void *h)
{
    auto *c = static_cast<xrt_ctx *>(h);
    try {
        if (c->have_run) c->run.abort();
        return HX_OK;
    } catch (const std::exception &e) {
        return fail(c, HX_E_DEVICE, "run.abort", e.what());
    } catch (...) {
        return fail(c, HX_E_DEVICE, "run.abort", "unknown exception");
    }
}

void x_close(void *h)
{
    try {
        delete static_cast<xrt_ctx *>(h);
    } catch (...) {
    }
}

const char *x_error(void *h)
{
    return h ? static_cast<xrt_ctx *>(h)->err.c_str() : "no XRT context";
}

int x_last_device_us(void *h, double *us, bool *modelled)
{
    auto *c = static_cast<xrt_ctx *>(h);
    *modelled = false;
    *us = c->last_us;
    return c->last_us >= 0 ? HX_OK : HX_E_UNSUPPORTED;
}

const hx_npu_glue_ops xrt_glue = {
    "xrt", x_open, x_bo_alloc, x_bo_free, x_bo_map, x_bo_sync,
    x_run, x_wait, x_abort, x_close, x_error, x_last_device_us,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const hx_npu_glue_ops *hx_npu_xrt_glue_get(uint32_t abi)
{
    return abi == HX_NPU_GLUE_ABI ? &xrt_glue : nullptr;
}
