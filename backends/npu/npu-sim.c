/*
 * npu-sim.c — the kernel-contract simulator: the glue interface of npu-glue.h implemented on
 * the CPU as npu.md §6 describes, so every line of the host path runs where no NPU exists.
 *
 * What it models and checks:
 *  - buffers: a host copy and a separate device copy of every BO, both poisoned (0xA5) when
 *    allocated, with guard bytes after the end of each; sync copies one way, a command reads
 *    and writes device copies only, and a finished command poisons the host copy of C, so a
 *    missing sync shows up as stale or poisoned data; unsynced host writes to an input are
 *    flagged at run time (or tolerated with stale=allow), broken guards always;
 *  - flags and groups (instructions CACHEABLE + group 1, data HOST_ONLY + group 3 + i, flags
 *    0 rejected), opcode 3, ninstr == words, 3..5 host BOs, distinct BOs, sizes >= the
 *    kernel's M·K, K·N and M·N·4 bytes, no sync of a BO a running command uses, no second
 *    run while one is in flight or after a timeout without abort;
 *  - the instruction stream (parsed from the device copy at every run: header, op walk,
 *    DDR_PATCH argument indices and offsets) and, at open, a placeholder xclbin describing
 *    the design, which must match the manifest;
 *  - compute: A row-major, B [k*N+j] or [j*K+k] (b_col_maj), C [i*N+j] or [i+j*M]; exact
 *    int8 x int8 products summed in int64, any result outside int32 flagged; all of M x N
 *    written (an all-zero A row gives an all-zero C row, computed without the products);
 *    (compute=off skips the products for host-overhead benchmarks: C keeps old contents;
 *    mutate=acc+1 / mutate=k0 compute a deliberately wrong kernel — every sum one too
 *    large, or the first K element of every sum left out — for tests that must catch it);
 *  - injected faults (hx__npu_sim_configure / HX_NPU_SIM): wait states ERROR, ABORT, TIMEOUT,
 *    NORESPONSE, open and BO-allocation failures, the per-process context limit;
 *  - an optional latency model (default on): every call's device time is the modelled
 *    ~55 µs + bytes/BW + ops/rate of hx__npu_model_call_us, reported as modelled, never as
 *    NPU performance; latency=sleep also waits for it.
 *
 * Commands run on one simulator worker thread, as a device runs beside the host: run()
 * queues, wait() blocks, so host work for the next call really overlaps the current one.
 * exec=lazy runs each command inside wait() on the caller's thread instead, so that on a
 * busy machine the emulated kernel never competes with the host work being measured
 * (host-overhead benchmarks). All shared state is under hx_sim.mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npu-impl.h"

#define HX_SIM_GUARD 64
#define HX_SIM_POISON 0xA5
#define HX_SIM_CANARY 0xCD
#define HX_SIM_ALIGN 64

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define HX_SIM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HX_SIM_CLONES
#endif

enum hx_sim_cmd { HX_SIM_IDLE, HX_SIM_QUEUED, HX_SIM_RUNNING, HX_SIM_DONE };
enum hx_sim_latency { HX_SIM_LAT_OFF, HX_SIM_LAT_MODEL, HX_SIM_LAT_SLEEP };

struct hx_sim_ctx;

struct hx_sim_bo {
    struct hx_sim_ctx *owner;
    uint8_t *host_raw, *dev_raw;
    uint8_t *host, *dev;
    size_t nbytes;
    uint32_t flags;
    int group;
    int in_use;                  /* references by the queued/running command */
};

struct hx_sim_ctx {
    struct hx_npu_kernel_desc d;
    char err[512];
    int n_live_bos;
    /* the command */
    enum hx_sim_cmd cmd;
    bool needs_abort;            /* a wait returned TIMEOUT */
    uint32_t ninstr;
    struct hx_sim_bo *instr, *bos[HX_NPU_MAX_HOST_BOS];
    int n_bos;
    int result;                  /* ert state of the finished command */
    char cmd_err[512];
    double modelled_us;
    bool have_timing;
    bool lazy_pending;           /* exec=lazy: queued, runs inside wait() */
    struct hx_sim_ctx *qnext;
};

struct hx_sim_knobs {
    int wait_state;              /* 0 = none */
    long long wait_after, wait_count;
    bool open_fail;
    long long open_after;
    bool alloc_fail;
    long long alloc_after, alloc_count;
    bool ninstr_bytes, stale_allow, no_compute, lazy;
    enum { HX_SIM_MUT_NONE, HX_SIM_MUT_ACC1, HX_SIM_MUT_K0 } mutate; /* a wrong kernel, for tests */
    enum hx_sim_latency latency;
    int ctx_limit;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t worker;
    bool worker_up, stop;
    struct hx_sim_ctx *qhead, *qtail;
    int n_ctx;
    struct hx_sim_knobs k;
    bool knobs_set;
    long long n_wait, n_wait_fired, n_open, n_alloc, n_alloc_fired;
    uint64_t violations;
} hx_sim = {.mu = PTHREAD_MUTEX_INITIALIZER,
            .work_cv = PTHREAD_COND_INITIALIZER,
            .done_cv = PTHREAD_COND_INITIALIZER,
            .k = {.wait_count = -1, .alloc_count = -1, .latency = HX_SIM_LAT_MODEL}};

/* ---- knobs --------------------------------------------------------------------------------- */

/* "NAME[@AFTER][xCOUNT]" → value name, after, count. */
static bool hx_sim_parse_trigger(const char *v, char *name, size_t nn, long long *after,
                                 long long *count)
{
    size_t len = strcspn(v, "@x");
    if (!len || len >= nn) return false;
    memcpy(name, v, len);
    name[len] = '\0';
    *after = 0, *count = -1;
    const char *p = v + len;
    char *end;
    if (*p == '@') {
        *after = strtoll(p + 1, &end, 10);
        if (end == p + 1 || *after < 0) return false;
        p = end;
    }
    if (*p == 'x') {
        *count = strtoll(p + 1, &end, 10);
        if (end == p + 1 || *count < 1) return false;
        p = end;
    }
    return *p == '\0';
}

static int hx_sim_wait_state(const char *s)
{
    if (!strcmp(s, "error")) return HX_NPU_STATE_ERROR;
    if (!strcmp(s, "abort")) return HX_NPU_STATE_ABORT;
    if (!strcmp(s, "timeout")) return HX_NPU_STATE_TIMEOUT;
    if (!strcmp(s, "noresponse")) return HX_NPU_STATE_NORESPONSE;
    return 0;
}

static bool hx_sim_apply(struct hx_sim_knobs *k, const char *key, const char *v)
{
    char name[32];
    long long after, count;
    if (!strcmp(key, "wait")) {
        if (!hx_sim_parse_trigger(v, name, sizeof name, &after, &count)) return false;
        if (!(k->wait_state = hx_sim_wait_state(name))) return false;
        k->wait_after = after, k->wait_count = count;
    } else if (!strcmp(key, "open")) {
        if (!hx_sim_parse_trigger(v, name, sizeof name, &after, &count) || strcmp(name, "fail"))
            return false;
        k->open_fail = true, k->open_after = after;
    } else if (!strcmp(key, "alloc")) {
        if (!hx_sim_parse_trigger(v, name, sizeof name, &after, &count) || strcmp(name, "fail"))
            return false;
        k->alloc_fail = true, k->alloc_after = after, k->alloc_count = count;
    } else if (!strcmp(key, "ninstr")) {
        if (strcmp(v, "bytes") && strcmp(v, "words")) return false;
        k->ninstr_bytes = !strcmp(v, "bytes");
    } else if (!strcmp(key, "stale")) {
        if (strcmp(v, "allow") && strcmp(v, "flag")) return false;
        k->stale_allow = !strcmp(v, "allow");
    } else if (!strcmp(key, "compute")) {
        if (strcmp(v, "on") && strcmp(v, "off")) return false;
        k->no_compute = !strcmp(v, "off");
    } else if (!strcmp(key, "mutate")) {
        if (!strcmp(v, "none")) k->mutate = HX_SIM_MUT_NONE;
        else if (!strcmp(v, "acc+1")) k->mutate = HX_SIM_MUT_ACC1;
        else if (!strcmp(v, "k0")) k->mutate = HX_SIM_MUT_K0;
        else return false;
    } else if (!strcmp(key, "exec")) {
        if (strcmp(v, "thread") && strcmp(v, "lazy")) return false;
        k->lazy = !strcmp(v, "lazy");
    } else if (!strcmp(key, "latency")) {
        if (!strcmp(v, "off")) k->latency = HX_SIM_LAT_OFF;
        else if (!strcmp(v, "model")) k->latency = HX_SIM_LAT_MODEL;
        else if (!strcmp(v, "sleep")) k->latency = HX_SIM_LAT_SLEEP;
        else return false;
    } else if (!strcmp(key, "ctxlimit")) {
        char *end;
        long x = strtol(v, &end, 10);
        if (*end || x < 1 || x > 1024) return false;
        k->ctx_limit = (int)x;
    } else {
        return false;
    }
    return true;
}

static int hx_sim_parse(const char *spec, struct hx_sim_knobs *k)
{
    *k = (struct hx_sim_knobs){.wait_count = -1, .alloc_count = -1, .latency = HX_SIM_LAT_MODEL};
    char buf[512];
    if (strlen(spec) >= sizeof buf) return HX_E_INVAL;
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        while (*t == ' ') t++;
        if (!*t) continue;
        char *eq = strchr(t, '=');
        if (!eq) return HX_E_INVAL;
        *eq = '\0';
        if (!hx_sim_apply(k, t, eq + 1)) return HX_E_INVAL;
    }
    return HX_OK;
}

int hx__npu_sim_configure(const char *spec)
{
    struct hx_sim_knobs k;
    if (hx_sim_parse(spec ? spec : "", &k) != HX_OK)
        return hx__set_error(HX_E_INVAL, "npu-sim: bad knob spec '%s'", spec);
    pthread_mutex_lock(&hx_sim.mu);
    hx_sim.k = k;
    hx_sim.knobs_set = true;
    hx_sim.n_wait = hx_sim.n_wait_fired = hx_sim.n_open = hx_sim.n_alloc = hx_sim.n_alloc_fired = 0;
    pthread_mutex_unlock(&hx_sim.mu);
    return HX_OK;
}

/* Under mu: the environment's knobs, once, unless a test configured them first. */
static void hx_sim_env_locked(void)
{
    if (hx_sim.knobs_set) return;
    hx_sim.knobs_set = true;
    const char *env = getenv("HX_NPU_SIM");
    if (!env || !*env) return;
    struct hx_sim_knobs k;
    if (hx_sim_parse(env, &k) == HX_OK) hx_sim.k = k;
    else HX_LOG_WARN("npu-sim: ignoring malformed HX_NPU_SIM='%s'", env);
}

int hx__npu_sim_open_contexts(void)
{
    pthread_mutex_lock(&hx_sim.mu);
    int n = hx_sim.n_ctx;
    pthread_mutex_unlock(&hx_sim.mu);
    return n;
}

uint64_t hx__npu_sim_violations(void)
{
    pthread_mutex_lock(&hx_sim.mu);
    uint64_t v = hx_sim.violations;
    pthread_mutex_unlock(&hx_sim.mu);
    return v;
}

/* A contract violation: counted, logged, and the handle's error. Returns st. */
static int hx_sim_violation(struct hx_sim_ctx *c, int st, const char *fmt, ...) HX_PRINTF(3, 4);
static int hx_sim_violation(struct hx_sim_ctx *c, int st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "contract violation: %s", msg);
    __atomic_add_fetch(&hx_sim.violations, 1, __ATOMIC_RELAXED);
    HX_LOG_WARN("npu-sim: %s", c->err);
    return st;
}

/* ---- buffers ----------------------------------------------------------------------------------- */

static uint8_t *hx_sim_aligned(uint8_t *raw)
{
    return (uint8_t *)(((uintptr_t)raw + HX_SIM_ALIGN - 1) & ~(uintptr_t)(HX_SIM_ALIGN - 1));
}

static bool hx_sim_guard_ok(const uint8_t *p, size_t nbytes, size_t *bad)
{
    for (size_t i = 0; i < HX_SIM_GUARD; i++)
        if (p[nbytes + i] != HX_SIM_CANARY) return *bad = i, false;
    return true;
}

static const char *hx_sim_bo_name(const struct hx_sim_ctx *c, const struct hx_sim_bo *b)
{
    static const char *const names[] = {"A (arg 3)", "B (arg 4)", "C (arg 5)", "arg 6", "arg 7"};
    if (b == c->instr) return "the instruction buffer";
    if (b->group >= HX_NPU_ARG_BO0 && b->group < HX_NPU_ARG_BO0 + HX_NPU_MAX_HOST_BOS)
        return names[b->group - HX_NPU_ARG_BO0];
    return "a buffer";
}

static int hx_sim_bo_alloc(void *h, size_t nbytes, uint32_t flags, int group_id, void **bo)
{
    struct hx_sim_ctx *c = h;
    *bo = NULL;
    if (!nbytes) return hx_sim_violation(c, HX_E_INVAL, "BO of 0 bytes");
    if (flags == 0)
        return hx_sim_violation(c, HX_E_INVAL, "BO flags 0 (XCL_BO_FLAGS_NONE is rejected by the "
                                "XDNA shim: unsupported buffer type)");
    if (flags != HX_NPU_BO_CACHEABLE && flags != HX_NPU_BO_HOST_ONLY)
        return hx_sim_violation(c, HX_E_INVAL, "BO flags 0x%x (use CACHEABLE for instructions, "
                                "HOST_ONLY for data)", flags);
    pthread_mutex_lock(&hx_sim.mu);
    long long seen = hx_sim.n_alloc++;
    bool fail = hx_sim.k.alloc_fail && seen >= hx_sim.k.alloc_after &&
                (hx_sim.k.alloc_count < 0 || hx_sim.n_alloc_fired < hx_sim.k.alloc_count);
    if (fail) hx_sim.n_alloc_fired++;
    pthread_mutex_unlock(&hx_sim.mu);
    if (fail) {
        snprintf(c->err, sizeof c->err, "bo allocation of %zu bytes failed (injected: as when "
                 "the memlock limit is exceeded)", nbytes);
        return HX_E_NOMEM;
    }
    struct hx_sim_bo *b = hx_calloc(1, sizeof *b);
    size_t total = nbytes + HX_SIM_GUARD + HX_SIM_ALIGN;
    if (b && total > nbytes) {
        b->host_raw = hx_malloc(total);
        b->dev_raw = hx_malloc(total);
    }
    if (!b || !b->host_raw || !b->dev_raw) {
        if (b) hx_free(b->host_raw), hx_free(b->dev_raw);
        hx_free(b);
        snprintf(c->err, sizeof c->err, "bo allocation of %zu bytes failed: out of memory", nbytes);
        return HX_E_NOMEM;
    }
    b->owner = c, b->nbytes = nbytes, b->flags = flags, b->group = group_id;
    b->host = hx_sim_aligned(b->host_raw), b->dev = hx_sim_aligned(b->dev_raw);
    memset(b->host, HX_SIM_POISON, nbytes);
    memset(b->dev, HX_SIM_POISON, nbytes);
    memset(b->host + nbytes, HX_SIM_CANARY, HX_SIM_GUARD);
    memset(b->dev + nbytes, HX_SIM_CANARY, HX_SIM_GUARD);
    c->n_live_bos++;
    *bo = b;
    return HX_OK;
}

/* Under mu: wait until no command references b. */
static void hx_sim_wait_unused_locked(struct hx_sim_bo *b)
{
    while (b->in_use) pthread_cond_wait(&hx_sim.done_cv, &hx_sim.mu);
}

static void hx_sim_bo_free(void *h, void *bo)
{
    struct hx_sim_ctx *c = h;
    struct hx_sim_bo *b = bo;
    if (!b) return;
    pthread_mutex_lock(&hx_sim.mu);
    if (b->in_use) {
        hx_sim_violation(c, HX_E_BUSY, "%s freed while a command uses it", hx_sim_bo_name(c, b));
        hx_sim_wait_unused_locked(b);
    }
    pthread_mutex_unlock(&hx_sim.mu);
    size_t bad;
    if (!hx_sim_guard_ok(b->host, b->nbytes, &bad))
        hx_sim_violation(c, HX_E_RANGE, "host wrote past the end of %s (%zu bytes), found at free",
                         hx_sim_bo_name(c, b), b->nbytes);
    hx_free(b->host_raw);
    hx_free(b->dev_raw);
    hx_free(b);
    c->n_live_bos--;
}

static void *hx_sim_bo_map(void *h, void *bo)
{
    (void)h;
    return bo ? ((struct hx_sim_bo *)bo)->host : NULL;
}

static int hx_sim_bo_sync(void *h, void *bo, int dir, size_t nbytes, size_t offset)
{
    struct hx_sim_ctx *c = h;
    struct hx_sim_bo *b = bo;
    if (!b || b->owner != c) return hx_sim_violation(c, HX_E_INVAL, "sync of a BO of another context");
    if (dir != HX_NPU_SYNC_TO_DEVICE && dir != HX_NPU_SYNC_FROM_DEVICE)
        return hx_sim_violation(c, HX_E_INVAL, "sync direction %d", dir);
    if (offset > b->nbytes || nbytes > b->nbytes - offset)
        return hx_sim_violation(c, HX_E_RANGE, "sync of [%zu, +%zu) outside %s (%zu bytes)", offset,
                                nbytes, hx_sim_bo_name(c, b), b->nbytes);
    size_t bad;
    if (!hx_sim_guard_ok(b->host, b->nbytes, &bad))
        return hx_sim_violation(c, HX_E_RANGE, "host wrote past the end of %s (guard byte %zu)",
                                hx_sim_bo_name(c, b), bad);
    pthread_mutex_lock(&hx_sim.mu);
    bool busy = b->in_use != 0;
    pthread_mutex_unlock(&hx_sim.mu);
    if (busy)
        return hx_sim_violation(c, HX_E_BUSY, "sync %s of %s while the running command uses it",
                                dir == HX_NPU_SYNC_TO_DEVICE ? "to device" : "from device",
                                hx_sim_bo_name(c, b));
    if (dir == HX_NPU_SYNC_TO_DEVICE) memcpy(b->dev + offset, b->host + offset, nbytes);
    else memcpy(b->host + offset, b->dev + offset, nbytes);
    return HX_OK;
}

/* ---- open / close -------------------------------------------------------------------------- */

static void *hx_sim_worker_main(void *arg);
static void hx_sim_execute(struct hx_sim_ctx *c, const struct hx_sim_knobs *k);

/* Under mu: end a command that exec=lazy left for wait(): run it here (on the calling
 * thread, with mu released meanwhile) or, when dropping, just release its buffers. */
static void hx_sim_lazy_locked(struct hx_sim_ctx *c, bool run)
{
    c->lazy_pending = false;
    if (run) {
        c->cmd = HX_SIM_RUNNING;
        struct hx_sim_knobs k = hx_sim.k;
        pthread_mutex_unlock(&hx_sim.mu);
        hx_sim_execute(c, &k);
        pthread_mutex_lock(&hx_sim.mu);
    }
    c->instr->in_use--;
    for (int i = 0; i < c->n_bos; i++) c->bos[i]->in_use--;
    c->cmd = run ? HX_SIM_DONE : HX_SIM_IDLE;
    pthread_cond_broadcast(&hx_sim.done_cv);
}

static int hx_sim_check_xclbin(const struct hx_npu_kernel_desc *d, char *err, size_t n)
{
    FILE *f = fopen(d->xclbin_path, "rb");
    if (!f) return snprintf(err, n, "cannot open xclbin %s: %s", d->xclbin_path, strerror(errno)), HX_E_IO;
    char text[1024];
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    if (got >= 7 && !memcmp(text, "xclbin2", 7))
        return snprintf(err, n, "%s is a real xclbin (AXLF); the simulator runs only its own "
                        "design descriptors — use the npu backend on hardware", d->xclbin_path),
               HX_E_FORMAT;
    long long M, K, N, m, k, nn;
    int cols, gen, bc, cc;
    if (strncmp(text, "HXSIM-XCLBIN 1\nkernel MLIR_AIE\n", 31) ||
        sscanf(text + 31, "M %lld K %lld N %lld m %lld k %lld n %lld cols %d gen %d in i8 out i32 "
               "b_col_maj %d c_col_maj %d", &M, &K, &N, &m, &k, &nn, &cols, &gen, &bc, &cc) != 10)
        return snprintf(err, n, "%s is not an xclbin (no AXLF or simulator descriptor header)",
                        d->xclbin_path), HX_E_FORMAT;
    struct { const char *what; long long have, want; } f2[] = {
        {"M", M, d->M}, {"K", K, d->K}, {"N", N, d->N}, {"m", m, d->m}, {"k", k, d->k},
        {"n", nn, d->n}, {"columns", cols, d->cols}, {"device generation", gen, d->dev_gen},
        {"b_col_maj", bc, d->b_col_maj}, {"c_col_maj", cc, d->c_col_maj}};
    for (size_t i = 0; i < HX_ARRAY_LEN(f2); i++)
        if (f2[i].have != f2[i].want)
            return snprintf(err, n, "xclbin %s does not match the manifest: %s is %lld in the "
                            "xclbin, %lld in the manifest", d->xclbin_path, f2[i].what,
                            f2[i].have, f2[i].want), HX_E_FORMAT;
    return HX_OK;
}

static int hx_sim_open(const struct hx_npu_kernel_desc *kd, void **h, char *err, size_t err_len)
{
    *h = NULL;
    pthread_mutex_lock(&hx_sim.mu);
    hx_sim_env_locked();
    long long seen = hx_sim.n_open++;
    bool fail = hx_sim.k.open_fail && seen >= hx_sim.k.open_after;
    int limit = hx_sim.k.ctx_limit ? hx_sim.k.ctx_limit : (kd->dev_gen == 3 ? 6 : 16);
    bool full = hx_sim.n_ctx >= limit;
    pthread_mutex_unlock(&hx_sim.mu);
    if (fail)
        return snprintf(err, err_len, "xrt::device(0) failed: No such device with index '0' "
                        "(injected open failure)"), HX_E_UNAVAILABLE;
    if (full)
        return snprintf(err, err_len, "hw_context creation failed: %d contexts already open "
                        "(per-process limit %d on NPU%d)", limit, limit, kd->dev_gen - 2), HX_E_BUSY;
    char sub[400];
    if (hx__npu_kernel_validate(kd, sub, sizeof sub))
        return snprintf(err, err_len, "design rejected: %s", sub), HX_E_FORMAT;
    if (kd->xclbin_path && *kd->xclbin_path) {
        int st = hx_sim_check_xclbin(kd, err, err_len);
        if (st) return st;
    }
    struct hx_sim_ctx *c = hx_calloc(1, sizeof *c);
    if (!c) return snprintf(err, err_len, "out of memory"), HX_E_NOMEM;
    c->d = *kd;
    c->d.xclbin_path = NULL;
    pthread_mutex_lock(&hx_sim.mu);
    int st = HX_OK;
    if (!hx_sim.worker_up) {
        hx_sim.stop = false;
        if (pthread_create(&hx_sim.worker, NULL, hx_sim_worker_main, NULL) == 0) hx_sim.worker_up = true;
        else st = HX_E_INTERNAL;
    }
    if (st == HX_OK) hx_sim.n_ctx++;
    pthread_mutex_unlock(&hx_sim.mu);
    if (st) {
        hx_free(c);
        return snprintf(err, err_len, "cannot start the simulator's device thread"), st;
    }
    *h = c;
    return HX_OK;
}

static void hx_sim_close(void *h)
{
    struct hx_sim_ctx *c = h;
    if (!c) return;
    pthread_mutex_lock(&hx_sim.mu);
    if (c->lazy_pending) hx_sim_lazy_locked(c, false);
    while (c->cmd == HX_SIM_QUEUED || c->cmd == HX_SIM_RUNNING)
        pthread_cond_wait(&hx_sim.done_cv, &hx_sim.mu);
    bool join = --hx_sim.n_ctx == 0 && hx_sim.worker_up;
    if (join) {
        hx_sim.stop = true;
        hx_sim.worker_up = false;
        pthread_cond_broadcast(&hx_sim.work_cv);
    }
    pthread_t w = hx_sim.worker;
    pthread_mutex_unlock(&hx_sim.mu);
    if (join) pthread_join(w, NULL);
    if (c->n_live_bos)
        HX_LOG_WARN("npu-sim: context closed with %d BOs still allocated", c->n_live_bos);
    hx_free(c);
}

/* ---- run / wait ----------------------------------------------------------------------------- */

static int hx_sim_check_bo(struct hx_sim_ctx *c, const struct hx_sim_bo *b, uint32_t flags,
                           int group, size_t need, const char *what)
{
    if (!b) return hx_sim_violation(c, HX_E_INVAL, "%s is NULL", what);
    if (b->owner != c) return hx_sim_violation(c, HX_E_INVAL, "%s belongs to another context", what);
    if (b->flags != flags)
        return hx_sim_violation(c, HX_E_INVAL, "%s has flags 0x%x, needs 0x%x", what, b->flags, flags);
    if (b->group != group)
        return hx_sim_violation(c, HX_E_INVAL, "%s was allocated for group %d, passed as argument %d",
                                what, b->group, group);
    if (b->nbytes < need)
        return hx_sim_violation(c, HX_E_RANGE, "%s has %zu bytes, the kernel reads/writes %zu", what,
                                b->nbytes, need);
    return HX_OK;
}

static int hx_sim_run(void *h, uint32_t opcode, void *instr_bo, uint32_t ninstr, void *const *bos,
                      int n_bos)
{
    struct hx_sim_ctx *c = h;
    const struct hx_npu_kernel_desc *d = &c->d;
    if (c->cmd != HX_SIM_IDLE)
        return hx_sim_violation(c, HX_E_BUSY, "run while the previous command was not waited for");
    if (c->needs_abort)
        return hx_sim_violation(c, HX_E_INVAL, "run after a TIMEOUT without calling abort()");
    if (opcode != HX_NPU_OPCODE) return hx_sim_violation(c, HX_E_INVAL, "opcode %u, must be 3", opcode);
    if (n_bos < 3 || n_bos > HX_NPU_MAX_HOST_BOS)
        return hx_sim_violation(c, HX_E_INVAL, "%d host BOs (3 to %d; passing more than the "
                                "kernel declares crashes XRT)", n_bos, HX_NPU_MAX_HOST_BOS);
    struct hx_sim_bo *ib = instr_bo;
    int st = hx_sim_check_bo(c, ib, HX_NPU_BO_CACHEABLE, HX_NPU_ARG_INSTR, 16, "the instruction BO");
    if (st) return st;
    bool bytes_ok;
    pthread_mutex_lock(&hx_sim.mu);
    bytes_ok = hx_sim.k.ninstr_bytes;
    pthread_mutex_unlock(&hx_sim.mu);
    if ((size_t)ninstr * 4 != ib->nbytes && !(bytes_ok && ninstr == ib->nbytes))
        return hx_sim_violation(c, HX_E_INVAL, "ninstr %u but the instruction BO holds %zu words%s",
                                ninstr, ib->nbytes / 4, bytes_ok ? " (or bytes)" : "");
    size_t need[3] = {(size_t)(d->M * d->K * d->in_bytes), (size_t)(d->K * d->N * d->in_bytes),
                      (size_t)(d->M * d->N * d->out_bytes)};
    static const char *const what[HX_NPU_MAX_HOST_BOS] = {"A (arg 3)", "B (arg 4)", "C (arg 5)",
                                                          "arg 6", "arg 7"};
    for (int i = 0; i < n_bos; i++) {
        if ((st = hx_sim_check_bo(c, bos[i], HX_NPU_BO_HOST_ONLY, HX_NPU_ARG_BO0 + i,
                                  i < 3 ? need[i] : 1, what[i])))
            return st;
        for (int j = 0; j < i; j++)
            if (bos[j] == bos[i])
                return hx_sim_violation(c, HX_E_INVAL, "%s and %s are the same BO", what[j], what[i]);
    }
    c->instr = ib, c->ninstr = ninstr, c->n_bos = n_bos;
    for (int i = 0; i < n_bos; i++) c->bos[i] = bos[i];
    pthread_mutex_lock(&hx_sim.mu);
    ib->in_use++;
    for (int i = 0; i < n_bos; i++) c->bos[i]->in_use++;
    c->cmd = HX_SIM_QUEUED;
    c->qnext = NULL;
    if (hx_sim.k.lazy) {
        c->lazy_pending = true;
    } else {
        if (hx_sim.qtail) hx_sim.qtail->qnext = c;
        else hx_sim.qhead = c;
        hx_sim.qtail = c;
        pthread_cond_signal(&hx_sim.work_cv);
    }
    pthread_mutex_unlock(&hx_sim.mu);
    return HX_OK;
}

static int hx_sim_wait(void *h, uint32_t timeout_ms, int *state)
{
    struct hx_sim_ctx *c = h;
    (void)timeout_ms;   /* a simulated command always ends; TIMEOUT is injected */
    *state = HX_NPU_STATE_ERROR;
    pthread_mutex_lock(&hx_sim.mu);
    if (c->cmd == HX_SIM_IDLE) {
        pthread_mutex_unlock(&hx_sim.mu);
        return hx_sim_violation(c, HX_E_INVAL, "wait without a started command");
    }
    if (c->lazy_pending) hx_sim_lazy_locked(c, true);
    while (c->cmd != HX_SIM_DONE) pthread_cond_wait(&hx_sim.done_cv, &hx_sim.mu);
    c->cmd = HX_SIM_IDLE;
    long long seen = hx_sim.n_wait++;
    int inject = 0;
    if (hx_sim.k.wait_state && seen >= hx_sim.k.wait_after &&
        (hx_sim.k.wait_count < 0 || hx_sim.n_wait_fired < hx_sim.k.wait_count)) {
        inject = hx_sim.k.wait_state;
        hx_sim.n_wait_fired++;
    }
    pthread_mutex_unlock(&hx_sim.mu);
    *state = c->result;
    if (c->result != HX_NPU_STATE_COMPLETED) snprintf(c->err, sizeof c->err, "%s", c->cmd_err);
    if (inject) {
        *state = inject;
        /* a failed command leaves garbage behind: the output is not what was computed */
        struct hx_sim_bo *cb = c->bos[2];
        memset(cb->dev, HX_SIM_POISON, cb->nbytes);
        snprintf(c->err, sizeof c->err, "command state %d (injected %s)", inject,
                 inject == HX_NPU_STATE_ERROR ? "ERROR" : inject == HX_NPU_STATE_ABORT ? "ABORT"
                 : inject == HX_NPU_STATE_TIMEOUT ? "TIMEOUT" : "NORESPONSE");
        if (inject == HX_NPU_STATE_TIMEOUT) c->needs_abort = true;
    }
    return HX_OK;
}

static int hx_sim_abort(void *h)
{
    struct hx_sim_ctx *c = h;
    pthread_mutex_lock(&hx_sim.mu);
    if (c->lazy_pending) hx_sim_lazy_locked(c, false);
    while (c->cmd == HX_SIM_QUEUED || c->cmd == HX_SIM_RUNNING)
        pthread_cond_wait(&hx_sim.done_cv, &hx_sim.mu);
    c->cmd = HX_SIM_IDLE;
    pthread_mutex_unlock(&hx_sim.mu);
    c->needs_abort = false;
    return HX_OK;
}

static const char *hx_sim_error(void *h)
{
    return h ? ((struct hx_sim_ctx *)h)->err : "no simulator context";
}

static int hx_sim_last_device_us(void *h, double *us, bool *modelled)
{
    struct hx_sim_ctx *c = h;
    *us = 0, *modelled = true;
    if (!c->have_timing) return HX_E_UNSUPPORTED;
    *us = c->modelled_us;
    return HX_OK;
}

/* ---- the device: checks and compute (worker thread) ------------------------------------------- */

HX_SIM_CLONES static int64_t hx_sim_dot(const int8_t *a, const int8_t *b, int64_t n)
{
    int64_t total = 0;
    for (int64_t k0 = 0; k0 < n; k0 += 32768) {
        int64_t e = HX_MIN(n, k0 + 32768);
        int32_t s = 0;   /* |s| <= 32768 * 16384 = 2^29 */
        for (int64_t k = k0; k < e; k++) s += (int32_t)a[k] * (int32_t)b[k];
        total += s;
    }
    return total;
}

HX_SIM_CLONES static void hx_sim_axpy(int64_t *acc, int32_t a, const int8_t *b, int64_t n)
{
    for (int64_t j = 0; j < n; j++) acc[j] += a * (int32_t)b[j];
}

static bool hx_sim_row_zero(const int8_t *a, int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, a + k, 8);
        if (w) return false;
    }
    for (; k < n; k++)
        if (a[k]) return false;
    return true;
}

/* C = A · B over the whole M x N (mut: a deliberately wrong kernel, knob `mutate`). Returns
 * false on an int32 overflow (first one in *where). */
static bool hx_sim_gemm(const struct hx_npu_kernel_desc *d, const int8_t *A, const int8_t *B,
                        int32_t *C, int64_t *scratch, int mut, char *where, size_t wn)
{
    bool ok = true;
    const int64_t k0 = mut == HX_SIM_MUT_K0; /* k0: the loop starts at 1 */
    for (int64_t i = 0; i < d->M; i++) {
        const int8_t *a = A + i * d->K;
        bool zero = hx_sim_row_zero(a, d->K);
        if (!zero && !d->b_col_maj) {
            memset(scratch, 0, (size_t)d->N * sizeof *scratch);
            for (int64_t k = k0; k < d->K; k++)
                if (a[k]) hx_sim_axpy(scratch, a[k], B + k * d->N, d->N);
        }
        for (int64_t j = 0; j < d->N; j++) {
            int64_t s = zero        ? 0
                        : d->b_col_maj ? hx_sim_dot(a + k0, B + j * d->K + k0, d->K - k0)
                                       : scratch[j];
            s += mut == HX_SIM_MUT_ACC1; /* acc+1: the accumulator starts at 1 */
            if (s > INT32_MAX || s < INT32_MIN) {
                if (ok) snprintf(where, wn, "C[%lld][%lld] = %lld", (long long)i, (long long)j, (long long)s);
                ok = false;
            }
            C[d->c_col_maj ? i + j * d->M : i * d->N + j] = (int32_t)(uint32_t)(uint64_t)s;
        }
    }
    return ok;
}

/* An input whose host copy differs from its device copy was written and not synced. */
static bool hx_sim_stale(const struct hx_sim_bo *b, size_t *at)
{
    if (!memcmp(b->host, b->dev, b->nbytes)) return false;
    size_t i = 0;
    while (i < b->nbytes && b->host[i] == b->dev[i]) i++;
    *at = i;
    return true;
}

static int hx_sim_fail_cmd(struct hx_sim_ctx *c, const char *fmt, ...) HX_PRINTF(2, 3);
static int hx_sim_fail_cmd(struct hx_sim_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->cmd_err, sizeof c->cmd_err, "contract violation: %s", msg);
    __atomic_add_fetch(&hx_sim.violations, 1, __ATOMIC_RELAXED);
    HX_LOG_WARN("npu-sim: %s", c->cmd_err);
    return HX_NPU_STATE_ERROR;
}

static int hx_sim_check_inputs(struct hx_sim_ctx *c, bool stale_allow)
{
    struct hx_sim_bo *list[1 + HX_NPU_MAX_HOST_BOS] = {c->instr};
    for (int i = 0; i < c->n_bos; i++) list[1 + i] = c->bos[i];
    for (int i = 0; i < 1 + c->n_bos; i++) {
        size_t at;
        if (!hx_sim_guard_ok(list[i]->host, list[i]->nbytes, &at))
            return hx_sim_fail_cmd(c, "host wrote past the end of %s (guard byte %zu)",
                                   hx_sim_bo_name(c, list[i]), at);
        bool input = i <= 2;   /* instructions, A, B */
        if (input && !stale_allow && hx_sim_stale(list[i], &at))
            return hx_sim_fail_cmd(c, "the host copy of %s changed after its last sync to the "
                                   "device (first difference at byte %zu): missing bo.sync(TO_DEVICE)",
                                   hx_sim_bo_name(c, list[i]), at);
    }
    size_t sizes[HX_NPU_MAX_HOST_BOS];
    for (int i = 0; i < c->n_bos; i++) sizes[i] = c->bos[i]->nbytes;
    char err[300];
    if (hx__npu_txn_validate(c->instr->dev, c->instr->nbytes, c->d.dev_gen, c->n_bos, sizes, err,
                             sizeof err))
        return hx_sim_fail_cmd(c, "instruction stream: %s", err);
    return HX_NPU_STATE_COMPLETED;
}

static void hx_sim_sleep_until(double t_end_us)
{
    double now = hx__time_us();
    if (now >= t_end_us) return;
    double left = t_end_us - now;
    struct timespec ts = {(time_t)(left / 1e6), (long)((left - (double)(time_t)(left / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void hx_sim_execute(struct hx_sim_ctx *c, const struct hx_sim_knobs *k)
{
    double t0 = hx__time_us();
    c->cmd_err[0] = '\0';
    c->result = hx_sim_check_inputs(c, k->stale_allow);
    if (c->result == HX_NPU_STATE_COMPLETED && !k->no_compute) {
        const struct hx_npu_kernel_desc *d = &c->d;
        int64_t *scratch = d->b_col_maj ? NULL : hx_malloc((size_t)d->N * sizeof *scratch);
        char where[128];
        if (!d->b_col_maj && !scratch) {
            snprintf(c->cmd_err, sizeof c->cmd_err, "simulator out of memory");
            c->result = HX_NPU_STATE_ERROR;
        } else if (!hx_sim_gemm(d, (const int8_t *)c->bos[0]->dev, (const int8_t *)c->bos[1]->dev,
                                (int32_t *)(void *)c->bos[2]->dev, scratch, (int)k->mutate, where,
                                sizeof where)) {
            c->result = hx_sim_fail_cmd(c, "int32 accumulator overflow (%s): inputs exceed the "
                                        "kernel's exact range", where);
        }
        hx_free(scratch);
    }
    /* the host's cached view of C is stale until it syncs from the device */
    memset(c->bos[2]->host, HX_SIM_POISON, c->bos[2]->nbytes);
    c->have_timing = k->latency != HX_SIM_LAT_OFF;
    c->modelled_us = c->have_timing ? hx__npu_model_call_us(&c->d) : 0;
    if (k->latency == HX_SIM_LAT_SLEEP) hx_sim_sleep_until(t0 + c->modelled_us);
}

static void *hx_sim_worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hx_sim.mu);
    for (;;) {
        while (!hx_sim.qhead && !hx_sim.stop) pthread_cond_wait(&hx_sim.work_cv, &hx_sim.mu);
        if (!hx_sim.qhead) break;
        struct hx_sim_ctx *c = hx_sim.qhead;
        hx_sim.qhead = c->qnext;
        if (!hx_sim.qhead) hx_sim.qtail = NULL;
        c->cmd = HX_SIM_RUNNING;
        struct hx_sim_knobs k = hx_sim.k;
        pthread_mutex_unlock(&hx_sim.mu);
        hx_sim_execute(c, &k);
        pthread_mutex_lock(&hx_sim.mu);
        c->instr->in_use--;
        for (int i = 0; i < c->n_bos; i++) c->bos[i]->in_use--;
        c->cmd = HX_SIM_DONE;
        pthread_cond_broadcast(&hx_sim.done_cv);
    }
    pthread_mutex_unlock(&hx_sim.mu);
    return NULL;
}

const struct hx_npu_glue_ops hx__npu_sim_glue = {
    .name = "sim",
    .open = hx_sim_open,
    .bo_alloc = hx_sim_bo_alloc,
    .bo_free = hx_sim_bo_free,
    .bo_map = hx_sim_bo_map,
    .bo_sync = hx_sim_bo_sync,
    .run = hx_sim_run,
    .wait = hx_sim_wait,
    .abort = hx_sim_abort,
    .close = hx_sim_close,
    .error = hx_sim_error,
    .last_device_us = hx_sim_last_device_us,
};
