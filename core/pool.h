/*
 * pool.h — the threads of the fast CPU backend (and of the bandwidth probe, quantize and
 * mkmodel): a process-wide pool that runs one piece of work on up to n threads and returns
 * when all of it is done.
 *
 * Work is n independent items. Each thread starts with a contiguous share of them (thread 0,
 * the caller, the first) and takes its share in chunks of `grain` items from the front; a
 * thread whose share is used up steals the back half of the largest share left, so a thread
 * that the OS has descheduled has its work done by the others instead of holding up the join.
 * The call returns when every item is done and no pool thread is still inside the work; a
 * worker that had not started by then never starts (it is called off), so a late thread costs
 * nothing. Waiting threads spin briefly and then sleep (futex), which hands the core to
 * whatever thread is late. docs/cpu.md "Threads" has the measurements.
 *
 * Why not OpenMP: a decode step is ~400 short ops (a GEMV is 10-100 µs), and on this team's
 * 2-core VM one `#pragma omp parallel` (libgomp) costs 2.8 µs for 2 threads and 1.2 µs for
 * one (a futex call each time), against a 0.44 µs cache-line round trip between the cores;
 * and its static schedule waits for a descheduled thread. Here work starts with one store per
 * worker and ends with one load per worker, and work for one thread is a plain call.
 *
 * Items must not depend on each other or on which thread runs them: results are bit-identical
 * however the items fall (no reduction across items through per-thread accumulators).
 */
#ifndef HX_POOL_H
#define HX_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Items i0..i1-1 on thread tid (0 is the caller; tids are distinct among the threads of one
 * call and below its nth, so per-tid scratch is safe). first: tid's first chunk of this call. */
typedef void (*hx_pool_chunk_fn)(void *ctx, int64_t i0, int64_t i1, int tid, bool first);

/* Runs items 0..n-1 on up to nth threads, claimed grain (≥ 1) at a time; one thread (nth ≤ 1,
 * or n ≤ grain, or a call from inside pool work) is one call fn(ctx, 0, n, 0, true). A call
 * from inside pool work runs as tid 0 on whichever thread made it, so per-tid scratch of an
 * outer and an inner call must not be shared. */
void hx__pool_chunks(int64_t n, int64_t grain, int nth, hx_pool_chunk_fn fn, void *ctx);

/* Per-thread form: fn(ctx, i, nth) for every i < nth, each exactly once, on whichever pool
 * thread gets to it (thread i unless it is late; then one thread may run several i). nth is
 * reduced where threads cannot be made. From inside pool work: fn(ctx, 0, 1). */
typedef void (*hx_pool_task_fn)(void *ctx, int tid, int nth);
void hx__pool_run(int nth, hx_pool_task_fn fn, void *ctx);

/* What the pool has done since the process started: pieces of work that ran on several
 * threads, those where a worker was called off (never started) or late (see pool.c), items run
 * by the caller and by workers, µs the caller waited for workers after its own part, and the
 * solo periods (work on the caller alone after workers were late too often) and their µs. */
struct hx_pool_stats {
    uint64_t works, called_off, late, items_caller, items_workers, solo_periods;
    double wait_us, solo_us;
};
/* Not from inside pool work (it takes the lock the running work holds). */
void hx__pool_stats(struct hx_pool_stats *out);

/* The thread count to use when none is given: the CPUs online (1 if that cannot be read). */
int hx__pool_default_threads(void);

/* Rows [*r0, *r1) of n for thread tid of nth: contiguous, sizes differing by at most one. */
static inline void hx__pool_range(int64_t n, int tid, int nth, int64_t *r0, int64_t *r1)
{
    *r0 = n * tid / nth;
    *r1 = n * (tid + 1) / nth;
}

/* A loop over n items, one call of fn per item, tid as in hx__pool_chunks. dynamic: items of
 * uneven cost, claimed one at a time; else a few per claim. */
typedef void (*hx_pool_item_fn)(void *ctx, int64_t i, int tid);
void hx__pool_for(int64_t n, int nth, int dynamic, hx_pool_item_fn fn, void *ctx);

#endif
