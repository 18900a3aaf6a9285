/*
 * pool.c — the pool of pool.h.
 *
 * Each worker owns one cache line (its slot): the job (fn, ctx, nth) and a generation count
 * it spins on. The caller fills the slots of the workers the task needs, bumps their
 * generations (release), runs thread 0 itself and spins until the shared count of workers
 * still running is zero. A slot is written only while its worker is idle (its previous job
 * is counted done before the caller returns), so a worker never sees half a job, and workers
 * a task does not need are not disturbed. Start and finish cost one line transfer each.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HX_PAUSE() _mm_pause()
#else
#define HX_PAUSE() ((void)0)
#endif

#define HX_POOL_MAX 256
#define HX_POOL_SPIN_US 2000.0 /* a worker idle this long sleeps until the next task */

struct hx_pool_slot {
    _Atomic uint32_t gen;
    hx_pool_task_fn fn;
    void *ctx;
    int tid, nth;
} __attribute__((aligned(64)));

static struct {
    pthread_mutex_t run_mu;        /* one task at a time */
    pthread_mutex_t mu;            /* sleeping workers */
    pthread_cond_t cv;
    _Atomic int sleepers;
    _Atomic int running __attribute__((aligned(64))); /* workers not yet done with the task */
    int n_workers;
    struct hx_pool_slot slot[HX_POOL_MAX];
} hx_pool = {
    .run_mu = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

static _Thread_local bool hx_pool_inside; /* this thread is running a task */

static double hx_pool_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static void *hx_pool_worker(void *arg)
{
    struct hx_pool_slot *s = arg;
    hx_pool_inside = true;
    /* a new slot's gen is 0 and only moves once the worker exists: the first task may be
     * posted before this thread runs, so it must not read its starting point from gen */
    uint32_t seen = 0;
    for (;;) {
        unsigned spins = 0;
        double t0 = 0.0;
        uint32_t g;
        while ((g = atomic_load_explicit(&s->gen, memory_order_acquire)) == seen) {
            HX_PAUSE();
            if (++spins % 1024) continue;
            const double t = hx_pool_now_us();
            if (t0 == 0.0) t0 = t;
            if (t - t0 < HX_POOL_SPIN_US) continue;
            /* The caller bumps gen before it reads sleepers; this thread counts itself a
             * sleeper before it reads gen again (both sequentially consistent), so either
             * the caller sees a sleeper and signals under mu, or this thread sees the job. */
            pthread_mutex_lock(&hx_pool.mu);
            atomic_fetch_add(&hx_pool.sleepers, 1);
            while (atomic_load(&s->gen) == seen) pthread_cond_wait(&hx_pool.cv, &hx_pool.mu);
            atomic_fetch_sub(&hx_pool.sleepers, 1);
            pthread_mutex_unlock(&hx_pool.mu);
            spins = 0, t0 = 0.0;
        }
        seen = g;
        s->fn(s->ctx, s->tid, s->nth);
        atomic_fetch_sub_explicit(&hx_pool.running, 1, memory_order_release);
    }
    return NULL;
}

/* Grows the pool to want workers (under run_mu); returns how many there are. */
static int hx_pool_grow(int want)
{
    if (want > HX_POOL_MAX) want = HX_POOL_MAX;
    while (hx_pool.n_workers < want) {
        struct hx_pool_slot *s = &hx_pool.slot[hx_pool.n_workers];
        s->tid = hx_pool.n_workers + 1;
        pthread_attr_t at;
        pthread_t th;
        if (pthread_attr_init(&at)) break;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&th, &at, hx_pool_worker, s);
        pthread_attr_destroy(&at);
        if (rc) break; /* run with the threads there are */
        hx_pool.n_workers++;
    }
    return hx_pool.n_workers;
}

void hx__pool_run(int nth, hx_pool_task_fn fn, void *ctx)
{
    if (nth <= 1 || hx_pool_inside) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&hx_pool.run_mu);
    const int nw = hx_pool_grow(nth - 1);
    if (nth > nw + 1) nth = nw + 1;
    atomic_store_explicit(&hx_pool.running, nth - 1, memory_order_relaxed);
    for (int i = 0; i < nth - 1; i++) {
        struct hx_pool_slot *s = &hx_pool.slot[i];
        s->fn = fn, s->ctx = ctx, s->nth = nth;
        atomic_fetch_add(&s->gen, 1); /* sequentially consistent: see hx_pool_worker */
    }
    if (atomic_load(&hx_pool.sleepers) > 0) {
        pthread_mutex_lock(&hx_pool.mu);
        pthread_cond_broadcast(&hx_pool.cv);
        pthread_mutex_unlock(&hx_pool.mu);
    }
    hx_pool_inside = true;
    fn(ctx, 0, nth);
    hx_pool_inside = false;
    for (unsigned spins = 0; atomic_load_explicit(&hx_pool.running, memory_order_acquire) > 0;)
        if (++spins % 65536) HX_PAUSE();
        else sched_yield(); /* a worker was descheduled: let it run */
    pthread_mutex_unlock(&hx_pool.run_mu);
}

int hx__pool_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct hx_pool_for {
    hx_pool_item_fn fn;
    void *ctx;
    int64_t n;
    int dynamic;
    _Atomic int64_t next;
};

static void hx_pool_for_task(void *arg, int tid, int nth)
{
    struct hx_pool_for *f = arg;
    if (f->dynamic) {
        for (int64_t i; (i = atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed)) < f->n;)
            f->fn(f->ctx, i, tid);
        return;
    }
    int64_t r0, r1;
    hx__pool_range(f->n, tid, nth, &r0, &r1);
    for (int64_t i = r0; i < r1; i++) f->fn(f->ctx, i, tid);
}

void hx__pool_for(int64_t n, int nth, int dynamic, hx_pool_item_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (nth > n) nth = (int)n;
    struct hx_pool_for f = {.fn = fn, .ctx = ctx, .n = n, .dynamic = dynamic};
    atomic_init(&f.next, 0);
    hx__pool_run(nth, hx_pool_for_task, &f);
}
