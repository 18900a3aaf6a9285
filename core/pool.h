/*
 * pool.h — the threads of the fast CPU backend (and of the bandwidth probe, quantize and
 * mkmodel): a process-wide pool of spinning workers that runs one task on n threads and
 * returns when all are done.
 *
 * Why not OpenMP: a decode step is ~400 short ops (a GEMV is 10-100 µs), and on this team's
 * 2-core VM one `#pragma omp parallel` (libgomp) costs 2.8 µs for 2 threads and 1.2 µs for
 * one (a futex call each time), against a 0.44 µs cache-line round trip between the cores.
 * Here a task starts with one atomic store the workers spin on and ends with one counter,
 * and a task for one thread is a plain call. Workers that find nothing to do for
 * HX_POOL_SPIN_US go to sleep on a condition variable, so an idle engine costs nothing.
 */
#ifndef HX_POOL_H
#define HX_POOL_H

#include <stdatomic.h>
#include <stdint.h>

/* The task: thread tid of nth (0 is the caller). */
typedef void (*hx_pool_task_fn)(void *ctx, int tid, int nth);

/* Runs fn on nth threads (fewer if threads cannot be made; nth tells each call how many).
 * Callers from several threads take turns; a task that calls it again runs inline. */
void hx__pool_run(int nth, hx_pool_task_fn fn, void *ctx);

/* The thread count to use when none is given: the CPUs online (1 if that cannot be read). */
int hx__pool_default_threads(void);

/* Rows [*r0, *r1) of n for thread tid of nth: contiguous, sizes differing by at most one. */
static inline void hx__pool_range(int64_t n, int tid, int nth, int64_t *r0, int64_t *r1)
{
    *r0 = n * tid / nth;
    *r1 = n * (tid + 1) / nth;
}

/* A loop over n items, one call of fn per item: split statically in contiguous runs, or
 * handed out one at a time (dynamic) for items of uneven cost. */
typedef void (*hx_pool_item_fn)(void *ctx, int64_t i, int tid);
void hx__pool_for(int64_t n, int nth, int dynamic, hx_pool_item_fn fn, void *ctx);

#endif
