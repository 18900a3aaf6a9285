/*
 * cpu-arena.c — see cpu-arena.h. Slices are never reused: weights come and go with a model,
 * so a chunk lives until every weight cut from it is freed. Weights of more than a quarter
 * chunk get a chunk of their own, sized to them.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "cpu-arena.h"
#include "hx-impl.h"

#define HX_ARENA_HUGE ((size_t)2 << 20)
#define HX_ARENA_CHUNK ((size_t)64 << 20)
#define HX_ARENA_SLICE_ALIGN ((size_t)4096)

struct hx_cpu_chunk {
    void *map;        /* the mapping: cap plus up to 2 MiB of alignment slack */
    size_t map_bytes;
    char *base;       /* 2 MiB aligned */
    size_t cap, used;
    int live;         /* slices not yet freed */
};

static pthread_mutex_t hx_arena_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hx_cpu_chunk *hx_arena_cur; /* the shared chunk slices are cut from */

static struct hx_cpu_chunk *hx_arena_chunk_new(size_t cap)
{
    struct hx_cpu_chunk *c = hx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = (cap + HX_ARENA_HUGE - 1) / HX_ARENA_HUGE * HX_ARENA_HUGE;
    c->map_bytes = c->cap + HX_ARENA_HUGE;
    void *m = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        hx_free(c);
        return NULL;
    }
    c->map = m;
    c->base = (char *)(((uintptr_t)m + HX_ARENA_HUGE - 1) & ~(uintptr_t)(HX_ARENA_HUGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(c->base, c->cap, MADV_HUGEPAGE); /* advice only: 4 KiB pages if refused */
#endif
    return c;
}

static void hx_arena_chunk_drop(struct hx_cpu_chunk *c)
{
    munmap(c->map, c->map_bytes);
    hx_free(c);
}

void *hx__cpu_arena_alloc(size_t nbytes, struct hx_cpu_chunk **chunk)
{
    *chunk = NULL;
    if (nbytes == 0 || nbytes > SIZE_MAX - 2 * HX_ARENA_HUGE) return NULL;
    const size_t need = (nbytes + HX_ARENA_SLICE_ALIGN - 1) & ~(HX_ARENA_SLICE_ALIGN - 1);
    void *p = NULL;
    pthread_mutex_lock(&hx_arena_mu);
    struct hx_cpu_chunk *c = NULL;
    if (need > HX_ARENA_CHUNK / 4) {
        c = hx_arena_chunk_new(need); /* a chunk of its own, never shared */
    } else {
        if (!hx_arena_cur || hx_arena_cur->cap - hx_arena_cur->used < need) {
            struct hx_cpu_chunk *old = hx_arena_cur;
            hx_arena_cur = hx_arena_chunk_new(HX_ARENA_CHUNK);
            if (old && old->live == 0) hx_arena_chunk_drop(old);
        }
        c = hx_arena_cur;
    }
    if (c) {
        p = c->base + c->used;
        c->used += need;
        c->live++;
        *chunk = c;
    }
    pthread_mutex_unlock(&hx_arena_mu);
    return p;
}

void hx__cpu_arena_free(struct hx_cpu_chunk *c)
{
    if (!c) return;
    pthread_mutex_lock(&hx_arena_mu);
    if (--c->live == 0) {
        if (c == hx_arena_cur) hx_arena_cur = NULL;
        hx_arena_chunk_drop(c);
    }
    pthread_mutex_unlock(&hx_arena_mu);
}
