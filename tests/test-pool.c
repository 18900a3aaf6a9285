/*
 * test-pool.c — the thread pool (core/pool.h): every item runs exactly once on a thread whose
 * tid is below the call's nth, the per-thread form runs each tid once, nested calls run inline,
 * two callers at once do not mix their work, and a thread that stalls inside its first chunk
 * has the rest of its share done by the others (work stealing) instead of holding it, and
 * workers late again and again send the pool solo for a while.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "pool.h"

#define N_MAX 5000

struct count_job {
    _Atomic int hits[N_MAX];
    _Atomic int firsts[64];
    _Atomic int64_t by_tid[64];
    int nth;
    _Atomic int bad; /* a tid out of range, or a range outside [0, n) */
    int64_t n;
};

static void count_chunk(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    struct count_job *j = arg;
    if (tid < 0 || tid >= j->nth || tid >= 64 || i0 < 0 || i1 > j->n || i0 >= i1) {
        atomic_store(&j->bad, 1);
        return;
    }
    if (first) atomic_fetch_add(&j->firsts[tid], 1);
    atomic_fetch_add(&j->by_tid[tid], i1 - i0);
    for (int64_t i = i0; i < i1; i++) atomic_fetch_add(&j->hits[i], 1);
}

static struct count_job *count_new(int64_t n, int nth)
{
    struct count_job *j = calloc(1, sizeof *j);
    if (j) j->n = n, j->nth = nth;
    return j;
}

/* 0 when every item ran once and each thread saw first on exactly its first chunk */
static int count_check(struct count_job *j)
{
    if (atomic_load(&j->bad)) return -1;
    for (int64_t i = 0; i < j->n; i++)
        if (atomic_load(&j->hits[i]) != 1) return (int)i + 1;
    for (int t = 0; t < 64; t++)
        if (atomic_load(&j->firsts[t]) != (atomic_load(&j->by_tid[t]) > 0)) return -2;
    return 0;
}

TEST(chunks_cover_every_item_once)
{
    static const int64_t ns[] = {1, 2, 3, 7, 64, 100, 1000, 4999};
    static const int64_t grains[] = {1, 3, 16, 1000};
    for (int nth = 1; nth <= 4; nth++)
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t b = 0; b < sizeof grains / sizeof grains[0]; b++)
                for (int rep = 0; rep < 20; rep++) {
                    struct count_job *j = count_new(ns[a], nth);
                    ASSERT_TRUE(j);
                    hx__pool_chunks(ns[a], grains[b], nth, count_chunk, j);
                    const int bad = count_check(j);
                    free(j);
                    if (bad)
                        fprintf(stderr, "  n %lld grain %lld nth %d: %d\n", (long long)ns[a],
                                (long long)grains[b], nth, bad);
                    ASSERT_EQ(bad, 0);
                }
}

struct run_job {
    _Atomic int hits[64];
    _Atomic int nth_seen;
};

static void run_task(void *arg, int tid, int nth)
{
    struct run_job *j = arg;
    atomic_store(&j->nth_seen, nth);
    if (tid >= 0 && tid < 64) atomic_fetch_add(&j->hits[tid], 1);
}

TEST(run_calls_each_tid_once)
{
    for (int nth = 1; nth <= 8; nth++)
        for (int rep = 0; rep < 200; rep++) {
            struct run_job j = {0};
            hx__pool_run(nth, run_task, &j);
            const int seen = atomic_load(&j.nth_seen);
            ASSERT_TRUE(seen >= 1 && seen <= nth);
            for (int t = 0; t < 64; t++) ASSERT_EQ(atomic_load(&j.hits[t]), t < seen ? 1 : 0);
        }
}

static void for_item(void *arg, int64_t i, int tid)
{
    struct count_job *j = arg;
    count_chunk(j, i, i + 1, tid, false);
}

TEST(for_covers_every_item_once)
{
    for (int dynamic = 0; dynamic <= 1; dynamic++)
        for (int nth = 1; nth <= 3; nth++)
            for (int64_t n = 1; n < 300; n += 37) {
                struct count_job *j = count_new(n, nth);
                ASSERT_TRUE(j);
                hx__pool_for(n, nth, dynamic, for_item, j);
                for (int64_t i = 0; i < n; i++) ASSERT_EQ(atomic_load(&j->hits[i]), 1);
                ASSERT_EQ(atomic_load(&j->bad), 0);
                free(j);
            }
}

/* Pool work that starts pool work runs the inner work inline on its own thread. */
struct nest_job {
    _Atomic int inner_calls, inner_items, bad;
};

static void nest_inner(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    struct nest_job *j = arg;
    if (tid != 0 || !first) atomic_store(&j->bad, 1);
    atomic_fetch_add(&j->inner_calls, 1);
    atomic_fetch_add(&j->inner_items, (int)(i1 - i0));
}

static void nest_outer(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    (void)tid, (void)first;
    for (int64_t i = i0; i < i1; i++) hx__pool_chunks(10, 1, 2, nest_inner, arg);
}

TEST(nested_work_runs_inline)
{
    struct nest_job j = {0};
    hx__pool_chunks(16, 1, 2, nest_outer, &j);
    ASSERT_EQ(atomic_load(&j.bad), 0);
    ASSERT_EQ(atomic_load(&j.inner_calls), 16);
    ASSERT_EQ(atomic_load(&j.inner_items), 160);
}

/* Two threads calling the pool at once: each call's items are its own. */
static void *two_callers_thread(void *arg)
{
    _Atomic int *failures = arg;
    for (int rep = 0; rep < 300; rep++) {
        const int64_t n = 1 + rep * 7 % 900;
        struct count_job *j = count_new(n, 2);
        if (!j) return NULL;
        hx__pool_chunks(n, 1 + rep % 5, 2, count_chunk, j);
        if (count_check(j)) atomic_fetch_add(failures, 1);
        free(j);
    }
    return NULL;
}

TEST(two_callers_at_once)
{
    _Atomic int failures = 0;
    pthread_t a, b;
    ASSERT_EQ(pthread_create(&a, NULL, two_callers_thread, &failures), 0);
    ASSERT_EQ(pthread_create(&b, NULL, two_callers_thread, &failures), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    ASSERT_EQ(atomic_load(&failures), 0);
}

/* Workers that went to sleep (idle longer than they spin) are woken for the next work. */
TEST(work_after_idle_sleep)
{
    for (int rep = 0; rep < 5; rep++) {
        usleep(20000);
        struct count_job *j = count_new(N_MAX, 2);
        ASSERT_TRUE(j);
        hx__pool_chunks(N_MAX, 10, 2, count_chunk, j);
        const int bad = count_check(j);
        free(j);
        ASSERT_EQ(bad, 0);
    }
}

/* Busy for us µs (work that takes time, not a sleep). */
static void spin_us(double us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((double)(t.tv_sec - t0.tv_sec) * 1e6 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-3 < us);
}

/* A thread stalled (here: sleeping) in its first item is a thread the OS descheduled: the
 * other thread must take the rest of its share rather than wait for it. With a static split
 * thread 1 would run half of the items. */
struct stall_job {
    _Atomic int64_t by_tid[2];
    _Atomic int hits[1000];
};

static void stall_item(void *arg, int64_t i, int tid)
{
    struct stall_job *j = arg;
    static _Thread_local int64_t calls;
    if (tid == 1 && calls++ == 0) usleep(100000);
    spin_us(5.0); /* work enough that thread 1 gets to start */
    atomic_fetch_add(&j->by_tid[tid & 1], 1);
    atomic_fetch_add(&j->hits[i], 1);
}

TEST(stalled_thread_share_is_stolen)
{
    struct stall_job *j = calloc(1, sizeof *j);
    ASSERT_TRUE(j);
    hx__pool_for(1000, 2, 0, stall_item, j);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(atomic_load(&j->hits[i]), 1);
    const int64_t t1 = atomic_load(&j->by_tid[1]);
    fprintf(stderr, "  items run by the stalled thread: %lld of 1000\n", (long long)t1);
    free(j);
    ASSERT_TRUE(t1 <= 250);
}

/* Workers late again and again (here: stalled 2 ms in their first chunk, a scheduler time
 * slice on a busy machine) send the pool solo: the next work runs on the caller alone. */
struct late_job {
    _Atomic int64_t by_tid[2];
    int stall_us;
};

static void late_chunk(void *arg, int64_t i0, int64_t i1, int tid, bool first)
{
    struct late_job *j = arg;
    if (tid == 1 && first && j->stall_us) usleep((useconds_t)j->stall_us);
    atomic_fetch_add(&j->by_tid[tid & 1], i1 - i0);
    spin_us(2.0 * (double)(i1 - i0));
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

TEST(late_workers_send_work_solo)
{
    setenv("HX_POOL_SOLO", "1", 1);
    struct hx_pool_stats a, b;
    hx__pool_stats(&a);
    b = a;
    double t_solo = 0.0;
    for (int i = 0; i < 64 && b.solo_periods == a.solo_periods; i++) {
        struct late_job j = {.stall_us = 2000};
        hx__pool_chunks(64, 1, 2, late_chunk, &j);
        t_solo = now_us();
        hx__pool_stats(&b);
    }
    setenv("HX_POOL_SOLO", "0", 1);
    fprintf(stderr, "  late pieces of work: %llu, solo periods: %llu\n",
            (unsigned long long)(b.late - a.late),
            (unsigned long long)(b.solo_periods - a.solo_periods));
    ASSERT_TRUE(b.late > a.late);
    ASSERT_TRUE(b.solo_periods > a.solo_periods);
    struct late_job k = {0};
    hx__pool_chunks(64, 1, 2, late_chunk, &k);
    /* solo lasts at least 5 ms: only a test thread descheduled that long may see a worker */
    ASSERT_TRUE(atomic_load(&k.by_tid[1]) == 0 || now_us() - t_solo > 5000.0);
}

/* The tests above check that work is shared out right, so they keep every thread in it. */
__attribute__((constructor)) static void no_solo(void)
{
    setenv("HX_POOL_SOLO", "0", 1);
}

TEST_MAIN()
