/*
 * cpu-arena.h — memory for repacked weights: slices of 2 MiB-aligned anonymous mappings
 * advised for transparent huge pages. The kernel backs a 2 MiB page only where the whole
 * aligned 2 MiB range is in one advised mapping, so a mapping per weight left every weight
 * under a few MiB (most of a small model's) on 4 KiB pages; slices of one shared chunk do
 * not waste the rest of a huge page per weight either.
 */
#pragma once

#include <stddef.h>

struct hx_cpu_chunk;

/* nbytes of memory aligned to 4 KiB, zero-filled, or NULL; *chunk receives its owner. */
void *hx__cpu_arena_alloc(size_t nbytes, struct hx_cpu_chunk **chunk);
/* Release a slice: its chunk is unmapped when its last slice goes. NULL is a no-op. */
void hx__cpu_arena_free(struct hx_cpu_chunk *chunk);
