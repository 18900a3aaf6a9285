/*
 * hip-emu.cpp — the host emulation of HIP declared in hip-emu.h: fibers for GPU threads,
 * barrier scheduling, warp shuffles, and a runtime whose device memory is host memory.
 *
 * A launch takes a process-wide lock (so the emulator's state is plain globals), then runs
 * the grid's blocks one after another on the calling thread. Each GPU thread of a block is a
 * fiber with its own stack. The scheduler resumes, round robin, every fiber that is running
 * or whose barrier has been released. A barrier is released when its last live thread
 * arrives (the block's for __syncthreads, the warp's for shuffles); a thread that exits
 * stops counting, as on GPUs since Volta. A pass that resumes nobody while threads remain is
 * a deadlock: threads wait at different barriers, a bug a GPU would hang on.
 *
 * Shuffles: a lane writes its value into slot[parity], waits at the warp barrier, reads its
 * partner's slot[parity]. The two slots alternate, so no second barrier is needed: a lane
 * can only write the same slot again after passing the next barrier, which needs every lane
 * of the warp to have finished reading this one.
 *
 * Fresh allocations are filled with 0xFF bytes (NaN as f32): a kernel that reads memory no
 * one wrote produces NaN, which the tests catch.
 *
 * Graphs: a stream under capture appends each launch (grid, block, the closure's bytes), copy
 * and memset to its list instead of running it; hipStreamEndCapture hands the list over as a
 * graph, hipGraphInstantiate copies it, hipGraphLaunch runs it in order under one hold of the
 * launch lock. A synchronize or a failed launch during capture invalidates it, as CUDA does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <mutex>
#include <new>
#include <vector>

#include "hip-emu-mma.h"

hx_emu_thread *hx_emu_self;
uint3 hx_emu_bdim, hx_emu_gdim;

/* Context switch. On x86-64 a few instructions push the callee-saved registers and swap
 * stacks (no signal-mask system call as in swapcontext, which makes a launch of 100 000 GPU
 * threads take seconds). The FP control words are not switched: no kernel changes them.
 * Elsewhere: ucontext. */
#if defined(__x86_64__)
extern "C" void hx_emu_switch(void **save_sp, void *new_sp);
extern "C" void hx_emu_trampoline(void);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl hx_emu_switch\n"
    ".hidden hx_emu_switch\n"
    ".type hx_emu_switch, @function\n"
    "hx_emu_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size hx_emu_switch, .-hx_emu_switch\n"
    ".p2align 4\n"
    ".globl hx_emu_trampoline\n"
    ".hidden hx_emu_trampoline\n"
    ".type hx_emu_trampoline, @function\n"
    "hx_emu_trampoline:\n"
    "    call hx_emu_fiber_entry@PLT\n"
    "    ud2\n"
    ".size hx_emu_trampoline, .-hx_emu_trampoline\n");
#endif

namespace
{

constexpr size_t kStackBytes = 64 * 1024;
constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / 32;

enum { RUNNING, AT_SYNCTHREADS, AT_WARP_BARRIER };

struct fiber : hx_emu_thread {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t ctx;
#endif
    int wait;        /* RUNNING or the barrier it waits at */
    unsigned gen;    /* generation of that barrier it waits for */
    unsigned n_shfl; /* shuffles done: picks the slot */
    float slot[2];   /* values offered to shuffles */
    uint32_t mma_in[24]; /* registers offered to a matrix op */
    int mma_kind;
    int lane, warp;
    bool done;
};

struct block_run {
#if defined(__x86_64__)
    void *sched_sp;
#else
    ucontext_t sched;
#endif
    fiber *f;
    int n, n_live;
    void (*fn)(void *);
    void *ctx;
    bool failed;
    int block_arrived;
    unsigned block_gen;
    int warp_live[kMaxWarps], warp_arrived[kMaxWarps];
    unsigned warp_gen[kMaxWarps];
    float red[kMaxWarps][32];    /* results of the warp's current reduction */
    unsigned red_tag[kMaxWarps]; /* which reduction: 2 * sequence number + op */
    uint32_t mma_out[kMaxWarps][32][8]; /* each lane's D registers of the warp's matrix op */
    unsigned mma_tag[kMaxWarps];        /* which matrix op: its sequence number */
};

/* Guarded by g_launch_mu. */
std::mutex g_launch_mu;
block_run *g_block;
char g_msg[256];
char *g_stacks;
fiber *g_fibers;

thread_local hipError_t g_last = hipSuccess;

enum { GRAPH_OK, GRAPH_FAIL_CAPTURE, GRAPH_FAIL_INSTANTIATE, GRAPH_FAIL_LAUNCH };

struct env_cfg {
    int devices = 1;
    bool driver_error = false;
    long fail_malloc = -1, fail_launch = -1;
    long n_malloc = 0, n_launch = 0;
    int fail_graph = GRAPH_OK;
    int mma_fault = -1; /* a fragment op kind whose lane 0 D register 0 comes out wrong */
    char arch[32] = "emu";
    env_cfg()
    {
        const char *s = getenv("HX_HIP_EMU_DEVICES");
        if (s && *s) devices = atoi(s) < 0 ? 0 : atoi(s);
        if ((s = getenv("HX_HIP_EMU_DRIVER_ERROR")) && *s == '1') driver_error = true;
        if ((s = getenv("HX_HIP_EMU_FAIL_MALLOC")) && *s) fail_malloc = atol(s);
        if ((s = getenv("HX_HIP_EMU_FAIL_LAUNCH")) && *s) fail_launch = atol(s);
        if ((s = getenv("HX_HIP_EMU_ARCH")) && *s) snprintf(arch, sizeof arch, "%s", s);
        if ((s = getenv("HX_HIP_EMU_MMA_FAULT")) && *s) mma_fault = atoi(s);
        if ((s = getenv("HX_HIP_EMU_FAIL_GRAPH")) && *s)
            fail_graph = !strcmp(s, "capture")                    ? GRAPH_FAIL_CAPTURE
                         : !strcmp(s, "instantiate") || *s == '1' ? GRAPH_FAIL_INSTANTIATE
                         : !strcmp(s, "launch")                   ? GRAPH_FAIL_LAUNCH
                                                                  : GRAPH_OK;
    }
};
std::mutex g_cfg_mu;
env_cfg &cfg()
{
    static env_cfg c;
    return c;
}

hipError_t fail(hipError_t e)
{
    g_last = e;
    return e;
}

bool reserve(int n)
{
    if (!g_fibers && !(g_fibers = (fiber *)calloc(kMaxThreads, sizeof(fiber)))) return false;
    if (!g_stacks && !(g_stacks = (char *)malloc(kStackBytes * kMaxThreads))) return false;
    (void)n; /* untouched stack pages cost nothing */
    return true;
}

void fiber_main()
{
    g_block->fn(g_block->ctx);
    fiber *f = static_cast<fiber *>(hx_emu_self);
    block_run *b = g_block;
    f->done = true;
    b->n_live--;
    b->warp_live[f->warp]--;
    /* The others may have been waiting only for this thread. */
    if (b->block_arrived > 0 && b->block_arrived == b->n_live) b->block_gen++, b->block_arrived = 0;
    if (b->warp_arrived[f->warp] > 0 && b->warp_arrived[f->warp] == b->warp_live[f->warp])
        b->warp_gen[f->warp]++, b->warp_arrived[f->warp] = 0;
    /* ucontext: returning resumes uc_link, the scheduler */
}

void yield_to_scheduler(fiber *f)
{
#if defined(__x86_64__)
    hx_emu_switch(&f->sp, g_block->sched_sp);
#else
    swapcontext(&f->ctx, &g_block->sched);
#endif
}

void resume(block_run *b, fiber *f)
{
#if defined(__x86_64__)
    hx_emu_switch(&b->sched_sp, f->sp);
#else
    swapcontext(&b->sched, &f->ctx);
#endif
}

/* A fresh fiber whose first resume starts fiber_main on its own stack. */
void fiber_prepare(block_run *b, fiber *f, char *stack)
{
#if defined(__x86_64__)
    (void)b;
    /* Frame popped by hx_emu_switch: r15..rbp, then the return address. After the `ret` into
     * the trampoline rsp is 16-byte aligned, so its call gives the callee the ABI's layout. */
    void **p = (void **)(((uintptr_t)(stack + kStackBytes) & ~(uintptr_t)15) - 16);
    *--p = (void *)hx_emu_trampoline;
    for (int i = 0; i < 6; i++) *--p = nullptr;
    f->sp = p;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stack;
    f->ctx.uc_stack.ss_size = kStackBytes;
    f->ctx.uc_link = &b->sched;
    makecontext(&f->ctx, fiber_main, 0);
#endif
}

void fault(const char *what)
{
    fiber *f = static_cast<fiber *>(hx_emu_self);
    snprintf(g_msg, sizeof g_msg, "%s (thread (%u,%u,%u) of block (%u,%u,%u))", what, f->tid.x,
             f->tid.y, f->tid.z, f->bid.x, f->bid.y, f->bid.z);
    g_block->failed = true;
    yield_to_scheduler(f); /* never resumed */
}

void warp_barrier(fiber *f)
{
    block_run *b = g_block;
    f->wait = AT_WARP_BARRIER;
    f->gen = b->warp_gen[f->warp] + 1;
    if (++b->warp_arrived[f->warp] == b->warp_live[f->warp])
        b->warp_gen[f->warp]++, b->warp_arrived[f->warp] = 0;
    yield_to_scheduler(f);
}

bool ready(const block_run *b, const fiber *f)
{
    switch (f->wait) {
    case AT_SYNCTHREADS: return b->block_gen >= f->gen;
    case AT_WARP_BARRIER: return b->warp_gen[f->warp] >= f->gen;
    default: return true;
    }
}

bool run_block(block_run *b, uint3 bid)
{
    const uint3 bd = hx_emu_bdim;
    const int n_warps = (b->n + 31) / 32;
    b->n_live = b->n;
    b->block_arrived = 0, b->block_gen = 0;
    for (int w = 0; w < n_warps; w++) {
        b->warp_live[w] = w < n_warps - 1 ? 32 : b->n - 32 * w;
        b->warp_arrived[w] = 0, b->warp_gen[w] = 0;
        b->red_tag[w] = ~0u;
        b->mma_tag[w] = ~0u;
    }
    for (int i = 0; i < b->n; i++) {
        fiber *f = &b->f[i];
        f->tid =
            uint3{(unsigned)i % bd.x, ((unsigned)i / bd.x) % bd.y, (unsigned)i / (bd.x * bd.y)};
        f->bid = bid;
        f->wait = RUNNING;
        f->gen = 0;
        f->n_shfl = 0;
        f->done = false;
        f->lane = i % 32;
        f->warp = i / 32;
        fiber_prepare(b, f, g_stacks + (size_t)i * kStackBytes);
    }
    for (;;) {
        bool progress = false;
        for (int i = 0; i < b->n; i++) {
            fiber *f = &b->f[i];
            if (f->done || !ready(b, f)) continue;
            f->wait = RUNNING;
            hx_emu_self = f;
            resume(b, f);
            progress = true;
            if (b->failed) return false;
        }
        if (b->n_live == 0) return true;
        if (!progress) {
            snprintf(g_msg, sizeof g_msg,
                     "threads of block (%u,%u,%u) wait at different barriers (deadlock)", bid.x,
                     bid.y, bid.z);
            return false;
        }
    }
}

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

} // namespace

#if defined(__x86_64__)
/* First code of every fiber (called by hx_emu_trampoline); never returns. */
extern "C" __attribute__((visibility("hidden"), used)) void hx_emu_fiber_entry(void)
{
    fiber_main();
    yield_to_scheduler(static_cast<fiber *>(hx_emu_self));
    __builtin_unreachable();
}
#endif

/* One recorded operation of a captured stream. */
struct hx_emu_node {
    enum { KERNEL, COPY, SET } kind;
    dim3 grid, block;
    void (*fn)(void *);
    std::vector<unsigned char> ctx; /* the closure: the kernel and its argument values */
    void *dst;
    const void *src;
    size_t n;
    int v;
};

struct hx_emu_stream {
    bool capturing, invalidated;
    std::vector<hx_emu_node> rec;
};
struct hx_emu_graph {
    std::vector<hx_emu_node> nodes;
};
struct hx_emu_graph_exec {
    std::vector<hx_emu_node> nodes;
    long n_kernels;
};
struct hx_emu_event {
    double ms;
};

void hx_emu_syncthreads(void)
{
    fiber *f = static_cast<fiber *>(hx_emu_self);
    block_run *b = g_block;
    f->wait = AT_SYNCTHREADS;
    f->gen = b->block_gen + 1;
    if (++b->block_arrived == b->n_live) b->block_gen++, b->block_arrived = 0;
    yield_to_scheduler(f);
}

float hx_emu_shfl_xor(float v, int mask, int width)
{
    fiber *f = static_cast<fiber *>(hx_emu_self);
    if (width <= 0 || width > 32 || (width & (width - 1)) || mask < 0 || mask >= width)
        fault("shuffle with a bad mask or width");
    const unsigned par = f->n_shfl++ & 1u;
    f->slot[par] = v;
    warp_barrier(f);
    const int src = (f->lane & ~(width - 1)) | ((f->lane ^ mask) & (width - 1));
    const int idx = f->warp * 32 + src;
    /* A partner that exited after offering its value is fine; one that exited before this
     * shuffle never offered one. */
    if (idx >= g_block->n || (g_block->f[idx].done && g_block->f[idx].n_shfl < f->n_shfl))
        fault("shuffle reads a lane that does not exist or has exited");
    return g_block->f[idx].slot[par];
}

float hx_emu_warp_butterfly(float v, int op)
{
    fiber *f = static_cast<fiber *>(hx_emu_self);
    block_run *b = g_block;
    const unsigned par = f->n_shfl++ & 1u;
    f->slot[par] = v;
    warp_barrier(f);
    const int base = f->warp * 32;
    if (base + 32 > b->n) fault("warp reduction in a partial warp");
    /* The first lane through the barrier computes the warp's results; the others of this
     * reduction read them before any lane can start the next one (that needs them all). */
    if (b->red_tag[f->warp] != f->n_shfl * 2u + (unsigned)op) {
        float a[32], t[32];
        for (int i = 0; i < 32; i++) {
            const fiber *g = &b->f[base + i];
            if (g->done && g->n_shfl < f->n_shfl)
                fault("warp reduction with a lane that has exited");
            a[i] = g->slot[par];
        }
        /* the xor butterfly of hx_hip_warp_sum / _max: step m, lane i combines i and i ^ m */
        for (int m = 16; m > 0; m >>= 1) {
            for (int i = 0; i < 32; i++) t[i] = op ? fmaxf(a[i], a[i ^ m]) : a[i] + a[i ^ m];
            memcpy(a, t, sizeof a);
        }
        memcpy(b->red[f->warp], a, sizeof a);
        b->red_tag[f->warp] = f->n_shfl * 2u + (unsigned)op;
    }
    return b->red[f->warp][f->lane];
}

/* ---- matrix fragments (the layouts: hip-emu-mma.cpp) -------------------------------------- */

void hx_emu_mma(int kind, const uint32_t *in, uint32_t *out)
{
    fiber *f = static_cast<fiber *>(hx_emu_self);
    block_run *b = g_block;
    int n_in = kind == HX_EMU_WMMA_F16 ? 24 : 10, n_out = kind == HX_EMU_WMMA_F16 ? 8 : 4;
    hx_emu_mma_amd_words(kind, &n_in, &n_out); /* the AMD kinds from 16 up */
    memcpy(f->mma_in, in, sizeof(uint32_t) * (size_t)n_in);
    f->mma_kind = kind;
    f->n_shfl++;
    warp_barrier(f);
    const int base = f->warp * 32;
    if (base + 32 > b->n) fault("matrix op in a partial warp");
    /* The first lane through the barrier computes every lane's D (as hx_emu_warp_butterfly). */
    if (b->mma_tag[f->warp] != f->n_shfl) {
        for (int i = 0; i < 32; i++) {
            const fiber *g = &b->f[base + i];
            if (g->done && g->n_shfl < f->n_shfl) fault("matrix op with a lane that has exited");
            if (g->mma_kind != kind) fault("lanes of a warp in different matrix ops");
        }
        const int rep = kind == HX_EMU_WMMA_F16 ? 16 : kind == HX_EMU_WMMA_I8 ? 8 : 0;
        if (rep)
            for (int i = 16; i < 32; i++)
                if (memcmp(b->f[base + i].mma_in, b->f[base + i - 16].mma_in,
                           (size_t)rep * sizeof(uint32_t)))
                    fault("WMMA: lanes 16-31 must hold the same A and B as lanes 0-15");
        const uint32_t *lanes[32];
        for (int i = 0; i < 32; i++) lanes[i] = b->f[base + i].mma_in;
        hx_emu_mma_compute(kind, lanes, b->mma_out[f->warp]);
        if (cfg().mma_fault == kind) b->mma_out[f->warp][0][0] ^= 1u; /* a wrong layout, for tests */
        b->mma_tag[f->warp] = f->n_shfl;
    }
    memcpy(out, b->mma_out[f->warp][f->lane], sizeof(uint32_t) * (size_t)n_out);
}

namespace
{

bool config_ok(dim3 grid, dim3 block)
{
    const unsigned long n = (unsigned long)block.x * block.y * block.z;
    /* the limits of the GPUs the module targets: gridDim.x < 2^31, gridDim.y and z <= 65535 */
    if (!grid.x || !grid.y || !grid.z || grid.x > 2147483647u || grid.y > 65535u ||
        grid.z > 65535u || !n || n > (unsigned long)kMaxThreads) {
        snprintf(g_msg, sizeof g_msg, "bad launch configuration: grid (%u,%u,%u), block (%u,%u,%u)",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return false;
    }
    return true;
}

/* Runs the grid; the caller holds g_launch_mu and has checked the configuration. */
hipError_t run_grid(dim3 grid, dim3 block, void (*fn)(void *), void *ctx)
{
    const unsigned long n = (unsigned long)block.x * block.y * block.z;
    if (!reserve((int)n)) return fail(hipErrorOutOfMemory);
    static block_run b; /* large (per-warp arrays); guarded by the lock */
    b.f = g_fibers;
    b.n = (int)n;
    b.fn = fn;
    b.ctx = ctx;
    b.failed = false;
    hx_emu_bdim = uint3{block.x, block.y, block.z};
    hx_emu_gdim = uint3{grid.x, grid.y, grid.z};
    g_block = &b;
    bool ok = true;
    for (unsigned z = 0; ok && z < grid.z; z++)
        for (unsigned y = 0; ok && y < grid.y; y++)
            for (unsigned x = 0; ok && x < grid.x; x++) ok = run_block(&b, uint3{x, y, z});
    hx_emu_self = nullptr;
    g_block = nullptr;
    return ok ? hipSuccess : fail(hipErrorLaunchFailure);
}

/* Takes k launches off HX_HIP_EMU_FAIL_LAUNCH's allowance; false (nothing taken) when one of
 * them would fail. */
bool launch_allowed(long k)
{
    std::lock_guard<std::mutex> cl(g_cfg_mu);
    env_cfg &c = cfg();
    if (c.fail_launch >= 0 && c.n_launch + k > c.fail_launch) {
        if (k == 1) c.n_launch++;
        snprintf(g_msg, sizeof g_msg, "injected launch failure (HX_HIP_EMU_FAIL_LAUNCH)");
        return false;
    }
    c.n_launch += k;
    return true;
}

} // namespace

hipError_t hx_emu_launch(dim3 grid, dim3 block, hipStream_t s, void (*fn)(void *), const void *ctx,
                         size_t ctx_bytes)
{
    if (s && s->capturing) {
        std::lock_guard<std::mutex> lock(g_launch_mu); /* g_msg */
        if (!config_ok(grid, block)) {
            s->invalidated = true;
            return fail(hipErrorInvalidValue);
        }
        hx_emu_node nd{};
        nd.kind = hx_emu_node::KERNEL;
        nd.grid = grid, nd.block = block, nd.fn = fn;
        nd.ctx.assign((const unsigned char *)ctx, (const unsigned char *)ctx + ctx_bytes);
        s->rec.push_back(std::move(nd));
        return hipSuccess;
    }
    std::lock_guard<std::mutex> lock(g_launch_mu);
    if (!config_ok(grid, block)) return fail(hipErrorInvalidValue);
    if (!launch_allowed(1)) return fail(hipErrorLaunchFailure);
    return run_grid(grid, block, fn, const_cast<void *>(ctx));
}

const char *hx_emu_last_message(void)
{
    return g_msg;
}

/* ---- runtime ------------------------------------------------------------------------------ */

hipError_t hipGetDeviceCount(int *n)
{
    *n = 0;
    if (cfg().driver_error) return fail(hipErrorInsufficientDriver);
    *n = cfg().devices;
    return *n ? hipSuccess : fail(hipErrorNoDevice);
}

static thread_local int hx_emu_current;

hipError_t hipSetDevice(int idx)
{
    if (idx < 0 || idx >= cfg().devices) return fail(hipErrorInvalidDevice);
    hx_emu_current = idx;
    return hipSuccess;
}

hipError_t hipGetDevice(int *idx)
{
    *idx = hx_emu_current;
    return hipSuccess;
}

hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int idx)
{
    if (idx < 0 || idx >= cfg().devices) return fail(hipErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "hx-hip-emu (HIP kernels emulated on the host CPU)");
    /* HX_HIP_EMU_ARCH: an NVIDIA compute capability (sm_80) or an AMD target (gfx1100) */
    const char *arch = cfg().arch;
    int cc = 0;
    if (sscanf(arch, "sm_%d", &cc) == 1 && cc > 0) {
        p->major = cc / 10, p->minor = cc % 10;
        snprintf(p->gcnArchName, sizeof p->gcnArchName, "emu");
    } else {
        snprintf(p->gcnArchName, sizeof p->gcnArchName, "%s", arch);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    p->totalGlobalMem = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 2 : (size_t)1 << 30;
    p->multiProcessorCount = 1;
    p->warpSize = 32;
    return hipSuccess;
}

hipError_t hipDriverGetVersion(int *v)
{
    *v = 1;
    return hipSuccess;
}

hipError_t hipRuntimeGetVersion(int *v)
{
    *v = 1;
    return hipSuccess;
}

hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    hipDeviceProp_t p;
    hipGetDeviceProperties(&p, 0);
    *free_bytes = *total_bytes = p.totalGlobalMem;
    return hipSuccess;
}

hipError_t hipMalloc(void **p, size_t n)
{
    *p = nullptr;
    {
        std::lock_guard<std::mutex> cl(g_cfg_mu);
        env_cfg &c = cfg();
        if (c.fail_malloc >= 0 && c.n_malloc++ >= c.fail_malloc) return fail(hipErrorOutOfMemory);
    }
    size_t sz = (n + 255) & ~(size_t)255;
    if (sz < n || !(*p = aligned_alloc(256, sz ? sz : 256))) return fail(hipErrorOutOfMemory);
    memset(*p, 0xFF, sz ? sz : 256);
    return hipSuccess;
}

hipError_t hipFree(void *p)
{
    free(p);
    return hipSuccess;
}

hipError_t hipHostMalloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p ? hipSuccess : fail(hipErrorOutOfMemory);
}

hipError_t hipHostFree(void *p)
{
    free(p);
    return hipSuccess;
}

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t s)
{
    (void)kind;
    if (n && (!dst || !src)) return fail(hipErrorInvalidValue);
    if (s && s->capturing) {
        hx_emu_node nd{};
        nd.kind = hx_emu_node::COPY;
        nd.dst = dst, nd.src = src, nd.n = n;
        s->rec.push_back(std::move(nd));
        return hipSuccess;
    }
    memmove(dst, src, n);
    return hipSuccess;
}

hipError_t hipMemsetAsync(void *dst, int v, size_t n, hipStream_t s)
{
    if (n && !dst) return fail(hipErrorInvalidValue);
    if (s && s->capturing) {
        hx_emu_node nd{};
        nd.kind = hx_emu_node::SET;
        nd.dst = dst, nd.n = n, nd.v = v;
        s->rec.push_back(std::move(nd));
        return hipSuccess;
    }
    memset(dst, v, n);
    return hipSuccess;
}

hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned flags)
{
    (void)flags;
    *s = new (std::nothrow) hx_emu_stream();
    return *s ? hipSuccess : fail(hipErrorOutOfMemory);
}

hipError_t hipStreamDestroy(hipStream_t s)
{
    delete s;
    return hipSuccess;
}

hipError_t hipStreamSynchronize(hipStream_t s)
{
    /* everything ran at enqueue; waiting on a stream under capture is an error */
    if (s && s->capturing) {
        s->invalidated = true;
        return fail(hipErrorStreamCaptureUnsupported);
    }
    return hipSuccess;
}

/* ---- graphs ------------------------------------------------------------------------------- */

hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode mode)
{
    (void)mode;
    if (!s || s->capturing) return fail(hipErrorInvalidValue);
    if (cfg().fail_graph == GRAPH_FAIL_CAPTURE) return fail(hipErrorNotSupported);
    s->capturing = true, s->invalidated = false;
    s->rec.clear();
    return hipSuccess;
}

hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *graph)
{
    *graph = nullptr;
    if (!s || !s->capturing) return fail(hipErrorInvalidValue);
    s->capturing = false;
    if (s->invalidated) {
        s->rec.clear();
        return fail(hipErrorStreamCaptureInvalidated);
    }
    hx_emu_graph *g = new (std::nothrow) hx_emu_graph();
    if (!g) return fail(hipErrorOutOfMemory);
    g->nodes.swap(s->rec);
    *graph = g;
    return hipSuccess;
}

hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph, hipGraphNode_t *err_node,
                               char *log, size_t log_len)
{
    (void)err_node, (void)log, (void)log_len;
    *exec = nullptr;
    if (!graph) return fail(hipErrorInvalidValue);
    if (cfg().fail_graph == GRAPH_FAIL_INSTANTIATE) return fail(hipErrorNotSupported);
    hx_emu_graph_exec *x = new (std::nothrow) hx_emu_graph_exec();
    if (!x) return fail(hipErrorOutOfMemory);
    x->nodes = graph->nodes;
    x->n_kernels = 0;
    for (const hx_emu_node &nd : x->nodes) x->n_kernels += nd.kind == hx_emu_node::KERNEL;
    *exec = x;
    return hipSuccess;
}

hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t s)
{
    if (!exec || (s && s->capturing)) return fail(hipErrorInvalidValue);
    if (cfg().fail_graph == GRAPH_FAIL_LAUNCH) return fail(hipErrorNotSupported);
    std::lock_guard<std::mutex> lock(g_launch_mu);
    /* all or nothing: a graph launch that fails has run none of its nodes */
    if (!launch_allowed(exec->n_kernels)) return fail(hipErrorLaunchFailure);
    for (hx_emu_node &nd : exec->nodes) {
        hipError_t e = hipSuccess;
        switch (nd.kind) {
        case hx_emu_node::KERNEL: e = run_grid(nd.grid, nd.block, nd.fn, nd.ctx.data()); break;
        case hx_emu_node::COPY: memmove(nd.dst, nd.src, nd.n); break;
        case hx_emu_node::SET: memset(nd.dst, nd.v, nd.n); break;
        }
        if (e != hipSuccess) return e; /* a kernel fault: the stream's work is lost, as on a GPU */
    }
    return hipSuccess;
}

hipError_t hipGraphExecDestroy(hipGraphExec_t exec)
{
    delete exec;
    return hipSuccess;
}

hipError_t hipGraphDestroy(hipGraph_t graph)
{
    delete graph;
    return hipSuccess;
}

hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags)
{
    (void)s, (void)e, (void)flags;
    return hipSuccess;
}

hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (hipEvent_t)calloc(1, sizeof(hx_emu_event));
    return *e ? hipSuccess : fail(hipErrorOutOfMemory);
}

hipError_t hipEventRecord(hipEvent_t e, hipStream_t s)
{
    (void)s;
    e->ms = now_ms();
    return hipSuccess;
}

hipError_t hipEventSynchronize(hipEvent_t e)
{
    (void)e;
    return hipSuccess;
}

hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b)
{
    *ms = (float)(b->ms - a->ms);
    return hipSuccess;
}

hipError_t hipEventDestroy(hipEvent_t e)
{
    free(e);
    return hipSuccess;
}

hipError_t hipGetLastError(void)
{
    hipError_t e = g_last;
    g_last = hipSuccess;
    return e;
}

const char *hipGetErrorName(hipError_t e)
{
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorNoBinaryForGpu: return "hipErrorNoBinaryForGpu";
    case hipErrorInsufficientDriver: return "hipErrorInsufficientDriver";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    case hipErrorNotSupported: return "hipErrorNotSupported";
    case hipErrorStreamCaptureUnsupported: return "hipErrorStreamCaptureUnsupported";
    case hipErrorStreamCaptureInvalidated: return "hipErrorStreamCaptureInvalidated";
    }
    return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t e)
{
    switch (e) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNoDevice: return "no emulated device (HX_HIP_EMU_DEVICES=0)";
    case hipErrorInvalidDevice: return "invalid device ordinal";
    case hipErrorNoBinaryForGpu: return "no kernel image for the device";
    case hipErrorInsufficientDriver:
        return "driver older than the runtime (HX_HIP_EMU_DRIVER_ERROR=1)";
    case hipErrorLaunchFailure: return g_msg[0] ? g_msg : "unspecified launch failure";
    case hipErrorNotSupported:
        return "operation not supported (HX_HIP_EMU_FAIL_GRAPH injects this for graphs)";
    case hipErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case hipErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    }
    return "unknown error";
}
