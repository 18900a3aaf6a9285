/*
 * hx-internal.h — the one way from the engine program (app/) into the core's internals: what
 * its commands need beyond include/hx.h and include/hx-backend.h, and why.
 *
 *   gguf.h       the GGUF reader and writer: inspect, tokenize, quantize, mkmodel, bench -m
 *   vocab.h      a GGUF's tokenizer without its weights: tokenize
 *   pool.h       the thread pool: quantize, mkmodel, the bandwidth probe
 *   registry.h   the backend registry, device open/close and the hx__dev_* wrappers: devices,
 *                bench --kernels; with hx-impl.h's helpers (hx__time_us, hx__set_error for
 *                the GGUF writer's fill callbacks, hx__outfile_resolve)
 *   numerics.h   the error model's statistics: diff's whole-model bound (hx__ratio_bound)
 *   scheduler.h  policy names, the verify report and its whole-model twins, the scheduler
 *                behind a context: diff, bench; and the op graph, from which `devices` lists a
 *                model's GEMMs
 *
 * core/ itself is not on the engine program's include path (CMakeLists.txt: hxcore keeps it
 * PRIVATE; this folder is the interface target hxinternal, and this header is all it holds),
 * so these relative includes are the only way in: a command that needs more of the core adds
 * it here, where a reviewer sees it. Not an API: not installed, no ABI promise, not for
 * embedders (they have include/). Tests name core/ themselves: they test its internals.
 */
#pragma once

#include "../gguf.h"
#include "../numerics.h"
#include "../pool.h"
#include "../registry.h"
#include "../scheduler.h"
#include "../vocab.h"
