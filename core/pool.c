/*
 * pool.c — the pool of pool.h.
 *
 * Seats: seat 0 is the caller, seat w + 1 is worker w (a worker always takes the same seat, so
 * per-tid scratch is per thread). Each seat owns one cache line holding its share of the items
 * as one 64-bit word, lo | hi << 32, and for a worker its slot. The owner claims [lo, lo +
 * grain) from the front with a CAS on its own line (no other core touches it unless stealing);
 * a thief takes the back half,
 * [mid, hi), with a CAS on the victim's word and makes it its own share. Items are claimed once
 * by construction, and work ends when every share is empty and every thread that entered has
 * left.
 *
 * Workers: a worker's slot is a 32-bit state, gen << 2 | phase. The caller posts work with
 * (gen, POSTED); the worker enters with a CAS to (gen, ENTERED), works, and stores (gen,
 * EXITED). When its own seat finds nothing left, the caller calls off each worker that has not
 * entered yet with a CAS from (gen, POSTED) to (gen, IDLE) and waits for the others to store
 * EXITED. So the work's description (and ctx, on the caller's stack) is only read by threads
 * that entered before it ended, and a worker that the OS had descheduled when the work was
 * posted finds it called off and waits for the next.
 *
 * Waiting (a worker for work, the caller for a worker to leave) spins for a while, then sleeps
 * on the state word with futex: the waiter sets its slot's flag and re-reads the state, the
 * other side changes the state and reads the flag (both sequentially consistent), so either
 * the waiter sees the change or the other side sees the flag and wakes it. A sleeping waiter
 * leaves its core to the thread it waits for, which on a busy machine is what lets that thread
 * run at all.
 *
 * Solo mode: see HX_POOL_LATE_US below. The caller reads the clock once per piece of work, and
 * twice more only when a worker was called off or had not left when the caller was done.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HX_PAUSE() _mm_pause()
#else
#define HX_PAUSE() ((void)0)
#endif

#define HX_POOL_MAX 256
/* How long a worker with nothing to do spins before it sleeps, and how long the caller spins
 * waiting for a worker to leave: see docs/cpu.md "Threads". HX_POOL_SPIN_US and
 * HX_POOL_JOIN_SPIN_US override them. */
#define HX_POOL_SPIN_US 100.0
#define HX_POOL_JOIN_SPIN_US 30.0
/* Solo mode (docs/cpu.md "Threads"): a piece of work is late when the caller ran longer than
 * HX_POOL_LATE_US and a worker had not started, or when the caller waited longer than
 * HX_POOL_LATE_US plus two of its own chunks for a worker to finish. With HX_POOL_SOLO_BAD of
 * the last 16 pieces late, work runs on the caller alone for a while, HX_POOL_SOLO_MIN_US at
 * first and twice as long each time it starts again within HX_POOL_SOLO_RESET works of the
 * last, up to HX_POOL_SOLO_MAX_US. HX_POOL_SOLO=0 turns it off. */
#define HX_POOL_LATE_US 20.0
#define HX_POOL_SOLO_BAD 4
#define HX_POOL_STALL_US 500.0
#define HX_POOL_SOLO_MIN_US 5000.0
#define HX_POOL_SOLO_MAX_US 320000.0
#define HX_POOL_SOLO_RESET 1024

enum { HX_POOL_IDLE, HX_POOL_POSTED, HX_POOL_ENTERED, HX_POOL_EXITED };
#define HX_POOL_STATE(gen, phase) ((uint32_t)(gen) << 2 | (uint32_t)(phase))
#define HX_POOL_PHASE(s) ((s)&3u)

/* A seat: its share of the items and, for a worker's seat, the worker's slot, on one cache line
 * (a thread that runs out of work reads the other's share, and the caller then looks at that
 * worker's state: one line transfer, not two). */
struct hx_pool_seat {
    _Atomic uint64_t share;  /* lo | hi << 32: the items this seat has yet to claim */
    _Atomic uint32_t state;  /* gen << 2 | phase (workers' seats) */
    _Atomic uint32_t sleeps; /* the worker sleeps on state (waiting for work) */
    _Atomic uint32_t joins;  /* the caller sleeps on state (waiting for EXITED) */
    int seat;
} __attribute__((aligned(64)));

static struct {
    pthread_mutex_t run_mu; /* one piece of work at a time */
    int n_workers;
    uint32_t gen;
    double spin_us, join_spin_us;
    /* solo mode (under run_mu, but solo_until is read without it) */
    _Atomic bool solo; /* solo_until is worth a look */
    _Atomic double solo_until;
    double solo_len;
    uint32_t late_bits;  /* 1 per late piece of work, newest in bit 0 */
    uint64_t since_solo; /* pieces of work since solo mode last ended */
    struct hx_pool_stats stats;
    /* the work, written before it is posted, read by the threads that entered it */
    hx_pool_chunk_fn fn;
    void *ctx;
    uint64_t grain;
    int nth;
    struct hx_pool_seat seat[HX_POOL_MAX + 1]; /* 0: the caller; w + 1: worker w */
} hx_pool = {.run_mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local bool hx_pool_inside; /* this thread is running pool work */

static double hx_pool_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static void hx_pool_futex_wait(_Atomic uint32_t *w, uint32_t v)
{
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
#else
    (void)w, (void)v;
    sched_yield();
#endif
}

static void hx_pool_futex_wake(_Atomic uint32_t *w)
{
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
#endif
}

/* Waits while *w == v: spins for spin_us, then sleeps with *flag set. Returns the new value.
 * Only time spent spinning counts: a gap between two looks at the clock longer than
 * HX_POOL_GAP_US is time the thread was descheduled, and a worker that slept through its
 * budget that way would otherwise go to sleep the moment it ran again. Asleep, it needs a
 * futex wake for the next work, and a woken thread on a busy machine is often placed on its
 * waker's core (measured: decode GEMVs at one thread's speed, bench-pool). */
#define HX_POOL_GAP_US 20.0
static uint32_t hx_pool_wait(_Atomic uint32_t *w, uint32_t v, _Atomic uint32_t *flag,
                             double spin_us)
{
    unsigned spins = 0;
    double last = 0.0, spent = 0.0;
    uint32_t x;
    while ((x = atomic_load_explicit(w, memory_order_acquire)) == v) {
        HX_PAUSE();
        if (++spins % 16) continue;
        const double t = hx_pool_now_us();
        if (last != 0.0 && t - last < HX_POOL_GAP_US) spent += t - last;
        last = t;
        if (spent < spin_us) continue;
        atomic_store(flag, 1);
        if (atomic_load(w) == v) hx_pool_futex_wait(w, v);
        atomic_store_explicit(flag, 0, memory_order_relaxed);
        last = 0.0;
    }
    return x;
}

/* Changes *w to x and wakes a waiter that set *flag. */
static void hx_pool_signal(_Atomic uint32_t *w, uint32_t x, _Atomic uint32_t *flag)
{
    atomic_store(w, x);
    if (atomic_load(flag)) hx_pool_futex_wake(w);
}

#define HX_POOL_LO(s) ((s)&0xFFFFFFFFu)
#define HX_POOL_HI(s) ((s) >> 32)
#define HX_POOL_SHARE(lo, hi) ((uint64_t)(lo) | (uint64_t)(hi) << 32)

/* Claims up to grain items from the front of seat me's share. */
static bool hx_pool_claim(int me, uint64_t grain, uint64_t *i0, uint64_t *i1)
{
    _Atomic uint64_t *w = &hx_pool.seat[me].share;
    uint64_t s = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        const uint64_t lo = HX_POOL_LO(s), hi = HX_POOL_HI(s);
        if (lo >= hi) return false;
        const uint64_t e = hi - lo > grain ? lo + grain : hi;
        if (atomic_compare_exchange_weak_explicit(w, &s, HX_POOL_SHARE(e, hi), memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            *i0 = lo, *i1 = e;
            return true;
        }
    }
}

/* Moves the back half of the largest other share (all of it when that is at most grain) into
 * seat me's share. False when every share is empty. */
static bool hx_pool_steal(int me, int nth, uint64_t grain)
{
    for (;;) {
        int v = -1;
        uint64_t best = 0, s = 0;
        for (int i = 0; i < nth; i++) {
            if (i == me) continue;
            const uint64_t si = atomic_load_explicit(&hx_pool.seat[i].share, memory_order_relaxed);
            const uint64_t left = HX_POOL_HI(si) - HX_POOL_LO(si);
            if (HX_POOL_LO(si) < HX_POOL_HI(si) && left > best) best = left, v = i, s = si;
        }
        if (v < 0) return false;
        const uint64_t lo = HX_POOL_LO(s), hi = HX_POOL_HI(s);
        const uint64_t mid = hi - lo <= grain ? lo : hi - (hi - lo) / 2;
        if (atomic_compare_exchange_strong_explicit(&hx_pool.seat[v].share, &s,
                                                    HX_POOL_SHARE(lo, mid), memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            atomic_store_explicit(&hx_pool.seat[me].share, HX_POOL_SHARE(mid, hi),
                                  memory_order_relaxed);
            return true;
        }
    }
}

/* Seat me's part of the work: its own share, then what it can steal. Returns the items it ran
 * and (*chunks) in how many chunks. */
static uint64_t hx_pool_work(int me, uint64_t *chunks)
{
    const uint64_t grain = hx_pool.grain;
    const int nth = hx_pool.nth;
    bool first = true;
    uint64_t items = 0, nc = 0;
    for (;;) {
        uint64_t i0, i1;
        if (hx_pool_claim(me, grain, &i0, &i1)) {
            hx_pool.fn(hx_pool.ctx, (int64_t)i0, (int64_t)i1, me, first);
            first = false;
            items += i1 - i0, nc++;
        } else if (!hx_pool_steal(me, nth, grain)) {
            if (chunks) *chunks = nc;
            return items;
        }
    }
}

static void *hx_pool_worker(void *arg)
{
    struct hx_pool_seat *s = arg;
    hx_pool_inside = true;
    uint32_t seen = atomic_load_explicit(&s->state, memory_order_acquire);
    for (;;) {
        while (HX_POOL_PHASE(seen) != HX_POOL_POSTED)
            seen = hx_pool_wait(&s->state, seen, &s->sleeps, hx_pool.spin_us);
        const uint32_t gen = seen >> 2;
        if (!atomic_compare_exchange_strong(&s->state, &seen, HX_POOL_STATE(gen, HX_POOL_ENTERED)))
            continue; /* called off (or reposted): seen holds the new state */
        hx_pool_work(s->seat, NULL);
        seen = HX_POOL_STATE(gen, HX_POOL_EXITED);
        hx_pool_signal(&s->state, seen, &s->joins);
    }
    return NULL;
}

static double hx_pool_env_us(const char *name, double dflt)
{
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    char *end;
    const double v = strtod(e, &end);
    return *end || v < 0.0 ? dflt : v;
}

/* HX_POOL_SOLO=0 keeps work on every thread however late the workers are (asked each time
 * solo mode would start, so tests can switch it) */
static bool hx_pool_solo_on(void)
{
    const char *e = getenv("HX_POOL_SOLO");
    return !(e && !strcmp(e, "0"));
}

/* Grows the pool to want workers (under run_mu); returns how many there are. */
static int hx_pool_grow(int want)
{
    if (want > HX_POOL_MAX) want = HX_POOL_MAX;
    if (hx_pool.n_workers == 0) {
        hx_pool.spin_us = hx_pool_env_us("HX_POOL_SPIN_US", HX_POOL_SPIN_US);
        hx_pool.join_spin_us = hx_pool_env_us("HX_POOL_JOIN_SPIN_US", HX_POOL_JOIN_SPIN_US);
        hx_pool.solo_len = HX_POOL_SOLO_MIN_US;
    }
    while (hx_pool.n_workers < want) {
        struct hx_pool_seat *s = &hx_pool.seat[hx_pool.n_workers + 1];
        s->seat = hx_pool.n_workers + 1;
        atomic_store(&s->state, HX_POOL_STATE(hx_pool.gen, HX_POOL_IDLE));
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

void hx__pool_chunks(int64_t n, int64_t grain, int nth, hx_pool_chunk_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    /* shares are 32-bit: a larger count (nothing here is that large) runs on one thread */
    if (n > (int64_t)UINT32_MAX) nth = 1;
    if (nth <= 1 || n <= grain || hx_pool_inside) {
        fn(ctx, 0, n, 0, true);
        return;
    }
    if ((n + grain - 1) / grain < nth) nth = (int)((n + grain - 1) / grain);
    double t0 = hx_pool_now_us();
    if (atomic_load_explicit(&hx_pool.solo, memory_order_relaxed)) {
        if (t0 < atomic_load_explicit(&hx_pool.solo_until, memory_order_relaxed)) {
            fn(ctx, 0, n, 0, true); /* solo: the workers were late too often of late */
            return;
        }
        atomic_store_explicit(&hx_pool.solo, false, memory_order_relaxed);
    }
    /* another context's work holds the pool: its time is not this caller's own work, which
     * would make this piece look late (and start a solo period) when nothing was */
    if (pthread_mutex_trylock(&hx_pool.run_mu) != 0) {
        pthread_mutex_lock(&hx_pool.run_mu);
        t0 = hx_pool_now_us();
    }
    const int nw = hx_pool_grow(nth - 1);
    if (nth > nw + 1) nth = nw + 1;
    const uint32_t gen = hx_pool.gen = (hx_pool.gen + 1) & (UINT32_MAX >> 2);
    hx_pool.fn = fn, hx_pool.ctx = ctx, hx_pool.grain = (uint64_t)grain, hx_pool.nth = nth;
    for (int i = 0; i < nth; i++) {
        int64_t r0, r1;
        hx__pool_range(n, i, nth, &r0, &r1);
        atomic_store_explicit(&hx_pool.seat[i].share, HX_POOL_SHARE(r0, r1), memory_order_relaxed);
    }
    for (int i = 0; i < nth - 1; i++) {
        struct hx_pool_seat *s = &hx_pool.seat[i + 1];
        hx_pool_signal(&s->state, HX_POOL_STATE(gen, HX_POOL_POSTED), &s->sleeps);
    }
    hx_pool_inside = true;
    uint64_t chunks0 = 0;
    const uint64_t items0 = hx_pool_work(0, &chunks0);
    hx_pool_inside = false;
    /* The clock is read again only when a worker was called off or had not left yet: on an
     * idle machine the workers are done by now and the join costs one look at each seat. */
    double t1 = 0.0, t2 = 0.0;
    bool called_off = false;
    for (int i = 0; i < nth - 1; i++) {
        struct hx_pool_seat *s = &hx_pool.seat[i + 1];
        uint32_t st = HX_POOL_STATE(gen, HX_POOL_POSTED);
        if (atomic_load_explicit(&s->state, memory_order_acquire) ==
            HX_POOL_STATE(gen, HX_POOL_EXITED))
            continue;
        if (t1 == 0.0) t1 = hx_pool_now_us();
        if (atomic_compare_exchange_strong(&s->state, &st, HX_POOL_STATE(gen, HX_POOL_IDLE))) {
            called_off = true; /* it never started */
            continue;
        }
        while (st != HX_POOL_STATE(gen, HX_POOL_EXITED))
            st = hx_pool_wait(&s->state, st, &s->joins, hx_pool.join_spin_us);
    }
    if (t1 != 0.0) t2 = hx_pool_now_us();
    /* late: a worker had not started while the caller worked a while, or the caller waited for
     * a worker much longer than its own chunks took (that worker was descheduled mid-chunk) */
    const double own = t1 != 0.0 ? t1 - t0 : 0.0, wait = t2 - t1;
    const double chunk = own / (double)(chunks0 ? chunks0 : 1);
    const bool late = (called_off && own > HX_POOL_LATE_US) || wait > HX_POOL_LATE_US + 2.0 * chunk;
    struct hx_pool_stats *stt = &hx_pool.stats;
    stt->works++;
    stt->called_off += called_off;
    stt->late += late;
    stt->items_caller += items0;
    stt->items_workers += (uint64_t)n - items0;
    stt->wait_us += wait;
    /* a wait of a scheduler time slice counts as much as HX_POOL_SOLO_BAD late pieces */
    hx_pool.late_bits = hx_pool.late_bits << 1 | late;
    const bool stalled = wait > HX_POOL_STALL_US + 4.0 * chunk, late_now = late || stalled;
    if (stalled) hx_pool.late_bits |= (1u << HX_POOL_SOLO_BAD) - 1;
    if (++hx_pool.since_solo > HX_POOL_SOLO_RESET) hx_pool.solo_len = HX_POOL_SOLO_MIN_US;
    /* judged when a piece is late (t2 is then its end): bits left from before were judged */
    const bool go_solo =
        late_now && __builtin_popcount(hx_pool.late_bits & 0xFFFFu) >= HX_POOL_SOLO_BAD;
    if (go_solo && !hx_pool_solo_on()) {
        hx_pool.late_bits = 0; /* HX_POOL_SOLO=0: nothing starts; judged afresh from here */
    } else if (go_solo) {
        atomic_store_explicit(&hx_pool.solo_until, t2 + hx_pool.solo_len, memory_order_relaxed);
        atomic_store_explicit(&hx_pool.solo, true, memory_order_relaxed);
        stt->solo_periods++;
        stt->solo_us += hx_pool.solo_len;
        hx_pool.solo_len =
            hx_pool.solo_len * 2 < HX_POOL_SOLO_MAX_US ? hx_pool.solo_len * 2 : HX_POOL_SOLO_MAX_US;
        hx_pool.late_bits = 0;
        hx_pool.since_solo = 0;
    }
    pthread_mutex_unlock(&hx_pool.run_mu);
}

void hx__pool_stats(struct hx_pool_stats *out)
{
    pthread_mutex_lock(&hx_pool.run_mu);
    *out = hx_pool.stats;
    pthread_mutex_unlock(&hx_pool.run_mu);
}

struct hx_pool_run {
    hx_pool_task_fn fn;
    void *ctx;
    int nth;
};

static void hx_pool_run_chunk(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    const struct hx_pool_run *r = arg;
    (void)tid, (void)first;
    for (int64_t i = i0; i < i1; i++) r->fn(r->ctx, (int)i, r->nth);
}

void hx__pool_run(int nth, hx_pool_task_fn fn, void *ctx)
{
    if (nth <= 1 || hx_pool_inside) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&hx_pool.run_mu); /* the thread count first: fn is told it */
    const int nw = hx_pool_grow(nth - 1);
    pthread_mutex_unlock(&hx_pool.run_mu);
    if (nth > nw + 1) nth = nw + 1;
    if (nth <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    struct hx_pool_run r = {.fn = fn, .ctx = ctx, .nth = nth};
    hx__pool_chunks(nth, 1, nth, hx_pool_run_chunk, &r);
}

int hx__pool_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct hx_pool_for {
    hx_pool_item_fn fn;
    void *ctx;
};

static void hx_pool_for_chunk(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    const struct hx_pool_for *f = arg;
    (void)first;
    for (int64_t i = i0; i < i1; i++) f->fn(f->ctx, i, tid);
}

void hx__pool_for(int64_t n, int nth, int dynamic, hx_pool_item_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (nth > n) nth = (int)n;
    /* static: about 8 claims per thread's share, so a late thread's share can still be split */
    int64_t grain = 1;
    if (!dynamic && nth > 1) grain = n / ((int64_t)nth * 8) > 1 ? n / ((int64_t)nth * 8) : 1;
    struct hx_pool_for f = {.fn = fn, .ctx = ctx};
    hx__pool_chunks(n, grain, nth, hx_pool_for_chunk, &f);
}
