/*
 * cpu-x16.c — repacking GGUF weight rows into x16 tiles (layouts in cpu-x16.h), and the
 * activation scratch layout. Plain C, run once per weight at load: codes come from the panel
 * unpacker (cpu-unpack.h, the same decoding the other kernels use), scales are copied from
 * the GGUF blocks bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu-arena.h"
#include "cpu-impl.h"
#include "cpu-unpack.h"
#include "cpu-x16.h"
#include "hx-impl.h"
#include "pool.h"

#define HX_X16_ALIGN(x) (((x) + 63) & ~(size_t)63)

int hx__x16_group(enum hx_dtype t)
{
    switch (t) {
    case HX_DTYPE_Q8_0:
    case HX_DTYPE_Q4_0:
    case HX_DTYPE_Q4_K:
    case HX_DTYPE_Q5_K: return 32;
    case HX_DTYPE_Q6_K: return 16;
    case HX_DTYPE_TQ1_0:
    case HX_DTYPE_TQ2_0:
    case HX_DTYPE_I2_S: return 256;
    case HX_DTYPE_Q1_0: return 128;
    case HX_DTYPE_Q2_0: return 64;
    default: return 0;
    }
}

int hx__x16_act_block(enum hx_dtype t)
{
    switch (t) {
    case HX_DTYPE_Q6_K: return 32;
    default: return hx__x16_group(t);
    }
}

int hx__x16_bias(enum hx_dtype t)
{
    switch (t) {
    case HX_DTYPE_Q8_0: return 128;
    case HX_DTYPE_Q4_0: return 8;
    case HX_DTYPE_Q6_K: return 128; /* codes stored ×4: 4u − 128 = 4·(u − 32) */
    case HX_DTYPE_TQ1_0:
    case HX_DTYPE_TQ2_0:
    case HX_DTYPE_Q1_0:
    case HX_DTYPE_Q2_0:
    case HX_DTYPE_I2_S: return 1;
    default: return 0;
    }
}

size_t hx__x16_tile_bytes(enum hx_dtype t, int64_t k)
{
    return t == HX_DTYPE_Q4_K   ? (size_t)(k / 256) * 2368
           : t == HX_DTYPE_Q5_K ? (size_t)(k / 256) * 2880
                                : HX_X16_ROWS * hx_dtype_row_bytes(t, k);
}

bool hx__x16_usable(enum hx_dtype t, int64_t k)
{
    int64_t be = hx_dtype_block_elems(t), g = hx__x16_group(t);
    return g > 0 && k > 0 && k % be == 0 && k % g == 0 && k % 32 == 0; /* I2_S: K whole 256s */
}

/* Code of row i, element e, from an unpacked panel (TQ2_0 panels hold a permuted order, and
 * I2_S ones where K is whole 256s: always, here). */
static inline uint8_t hx_x16_code(const struct hx_cpu_panel *p, enum hx_dtype t, int i, int64_t e)
{
    if (hx__cpu_type_permuted(t, p->k)) e = (e & ~(int64_t)255) + hx__cpu_perm_tq2((int)(e & 255));
    return p->codes[(size_t)i * p->k + e];
}

/* Byte 4·i + b of chunk c of the tile, for the rows present. */
static inline uint8_t hx_x16_cb(const struct hx_cpu_panel *p, enum hx_dtype t, int nr, int pos,
                                int64_t c)
{
    int i = pos >> 2, b = pos & 3;
    return i < nr ? hx_x16_code(p, t, i, 4 * c + b) : 0;
}

static void hx_x16_put_h(uint8_t *dst, const uint8_t *rows[], int nr, size_t off)
{
    for (int i = 0; i < HX_X16_ROWS; i++) {
        dst[2 * i] = i < nr ? rows[i][off] : 0;
        dst[2 * i + 1] = i < nr ? rows[i][off + 1] : 0;
    }
}

static void hx_x16_pack_tile(enum hx_dtype t, int64_t k, const uint8_t *rows[], int nr,
                             const struct hx_cpu_panel *p, uint8_t *o)
{
    switch (t) {
    case HX_DTYPE_Q8_0:
        for (int64_t g = 0; g < k / 32; g++, o += 544) {
            for (int c = 0; c < 8; c++)
                for (int pos = 0; pos < 64; pos++) o[64 * c + pos] = hx_x16_cb(p, t, nr, pos, 8 * g + c);
            hx_x16_put_h(o + 512, rows, nr, (size_t)g * 34);
        }
        break;
    case HX_DTYPE_Q4_0:
        for (int64_t g = 0; g < k / 32; g++, o += 288) {
            for (int v = 0; v < 4; v++)
                for (int pos = 0; pos < 64; pos++)
                    o[64 * v + pos] = (uint8_t)(hx_x16_cb(p, t, nr, pos, 8 * g + v) |
                                                hx_x16_cb(p, t, nr, pos, 8 * g + v + 4) << 4);
            hx_x16_put_h(o + 256, rows, nr, (size_t)g * 18);
        }
        break;
    case HX_DTYPE_Q4_K:
    case HX_DTYPE_Q5_K: { /* Q5_K: each group's nibbles are followed by its fifth bits */
        const size_t bb = t == HX_DTYPE_Q5_K ? 176 : 144, gb = t == HX_DTYPE_Q5_K ? 320 : 256;
        for (int64_t sb = 0; sb < k / 256; sb++, o += 320 + 8 * gb) {
            hx_x16_put_h(o, rows, nr, (size_t)sb * bb);
            hx_x16_put_h(o + 32, rows, nr, (size_t)sb * bb + 2);
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < HX_X16_ROWS; i++) {
                    int sc = 0, m = 0;
                    if (i < nr) hx_cpu_q4k_scale_min(rows[i] + sb * bb + 4, j, &sc, &m);
                    o[64 + 16 * j + i] = (uint8_t)sc;
                    o[192 + 16 * j + i] = (uint8_t)m;
                }
            for (int j = 0; j < 8; j++) {
                uint8_t *q = o + 320 + gb * j;
                for (int v = 0; v < 4; v++)
                    for (int pos = 0; pos < 64; pos++) {
                        int64_t c = 64 * sb + 8 * j + v;
                        q[64 * v + pos] = (uint8_t)((hx_x16_cb(p, t, nr, pos, c) & 15) |
                                                    (hx_x16_cb(p, t, nr, pos, c + 4) & 15) << 4);
                    }
                for (int pos = 0; t == HX_DTYPE_Q5_K && pos < 64; pos++) {
                    uint8_t hb = 0;
                    for (int c = 0; c < 8; c++)
                        hb |= (uint8_t)((hx_x16_cb(p, t, nr, pos, 64 * sb + 8 * j + c) >> 4) << c);
                    q[256 + pos] = hb;
                }
            }
        }
        break;
    }
    case HX_DTYPE_Q6_K:
        for (int64_t sb = 0; sb < k / 256; sb++, o += 3360) {
            hx_x16_put_h(o, rows, nr, (size_t)sb * 210 + 208);
            for (int j = 0; j < 16; j++)
                for (int i = 0; i < HX_X16_ROWS; i++) o[32 + 16 * j + i] = i < nr ? rows[i][sb * 210 + 192 + j] : 0;
            for (int j = 0; j < 16; j++) {
                uint8_t *q = o + 288 + 192 * j;
                int64_t c0 = 64 * sb + 4 * j;
                for (int pos = 0; pos < 64; pos++) {
                    uint8_t u[4];
                    for (int c = 0; c < 4; c++) u[c] = hx_x16_cb(p, t, nr, pos, c0 + c);
                    q[pos] = (uint8_t)(4 * u[0] | (u[3] >> 4));
                    q[64 + pos] = (uint8_t)(4 * u[1] | (u[3] & 3));
                    q[128 + pos] = (uint8_t)(4 * u[2] | (u[3] >> 2 & 3));
                }
            }
        }
        break;
    case HX_DTYPE_TQ2_0:
        for (int64_t sb = 0; sb < k / 256; sb++, o += 1056) {
            for (int v = 0; v < 16; v++)
                for (int pos = 0; pos < 64; pos++) {
                    uint8_t b = 0;
                    for (int s = 0; s < 4; s++) b |= (uint8_t)(hx_x16_cb(p, t, nr, pos, 64 * sb + v + 16 * s) << (2 * s));
                    o[64 * v + pos] = b;
                }
            hx_x16_put_h(o + 1024, rows, nr, (size_t)sb * 66 + 64);
        }
        break;
    case HX_DTYPE_TQ1_0:
        for (int64_t sb = 0; sb < k / 256; sb++, o += 864) {
            for (int v = 0; v < 13; v++)
                for (int pos = 0; pos < 64; pos++) {
                    unsigned val = 0;
                    for (int j = 0; j < 5; j++) {
                        int c = 5 * v + j;
                        val = val * 3 + (c < 64 && (v < 12 || j < 4) ? hx_x16_cb(p, t, nr, pos, 64 * sb + c) : 0);
                    }
                    o[64 * v + pos] = (uint8_t)((val * 256 + 242) / 243);
                }
            hx_x16_put_h(o + 832, rows, nr, (size_t)sb * 54 + 52);
        }
        break;
    case HX_DTYPE_Q1_0:
        for (int64_t sb = 0; sb < k / 128; sb++, o += 288) {
            hx_x16_put_h(o, rows, nr, (size_t)sb * 18);
            for (int v = 0; v < 4; v++)
                for (int pos = 0; pos < 64; pos++) {
                    uint8_t byte = 0;
                    for (int i = 0; i < 8; i++)
                        byte |= (uint8_t)((hx_x16_cb(p, t, nr, pos, 32 * sb + 8 * v + i) & 1) << i);
                    o[32 + 64 * v + pos] = byte;
                }
        }
        break;
    case HX_DTYPE_Q2_0:
        for (int64_t g = 0; g < k / 64; g++, o += 288) {
            hx_x16_put_h(o, rows, nr, (size_t)g * 18);
            for (int v = 0; v < 4; v++)
                for (int pos = 0; pos < 64; pos++) {
                    uint8_t b = 0;
                    for (int s = 0; s < 4; s++) b |= (uint8_t)(hx_x16_cb(p, t, nr, pos, 16 * g + v + 4 * s) << (2 * s));
                    o[32 + 64 * v + pos] = b;
                }
        }
        break;
    case HX_DTYPE_I2_S: /* TQ2_0's codes without its d: the tensor scale is x16.tscale */
        for (int64_t sb = 0; sb < k / 256; sb++, o += 1024)
            for (int v = 0; v < 16; v++)
                for (int pos = 0; pos < 64; pos++) {
                    uint8_t b = 0;
                    for (int s = 0; s < 4; s++) b |= (uint8_t)(hx_x16_cb(p, t, nr, pos, 64 * sb + v + 16 * s) << (2 * s));
                    o[64 * v + pos] = b;
                }
        break;
    default:
        break;
    }
}

struct hx_x16_pack_job {
    const struct hx_weight *w;
    struct hx_cpu_x16 *x;
    char *panels;
    size_t pb, rb;
};

static void hx_x16_pack_one(void *arg, int64_t tt, int tid)
{
    const struct hx_x16_pack_job *j = arg;
    const struct hx_weight *w = j->w;
    const int64_t k = j->x->k, n = j->x->n;
    struct hx_cpu_panel p;
    hx__cpu_panel_init(&p, j->panels + j->pb * (size_t)tid, HX_X16_ROWS, k);
    const int64_t j0 = tt * HX_X16_ROWS;
    const int nr = (int)HX_MIN((int64_t)HX_X16_ROWS, n - j0);
    const uint8_t *rows[HX_X16_ROWS];
    for (int i = 0; i < nr; i++) {
        rows[i] = (const uint8_t *)w->data + (size_t)(j0 + i) * j->rb;
        hx__cpu_unpack_row(w->type, rows[i], k, hx_weight_row_tscale(w, j0 + i), &p, i);
    }
    hx_x16_pack_tile(w->type, k, rows, nr, &p, j->x->data + j->x->tile_bytes * (size_t)tt);
}

bool hx__x16_parts_fit(const struct hx_weight *w)
{
    for (int i = 0; i <= w->n_tparts; i++)
        if (w->tpart_row[i] % HX_X16_ROWS) return false;
    return true;
}

struct hx_cpu_x16 *hx__x16_pack(const struct hx_weight *w, int n_threads)
{
    if (!hx__x16_usable(w->type, w->n_cols)) return NULL;
    struct hx_cpu_x16 *x = hx_calloc(1, sizeof *x);
    if (!x) return NULL;
    const int64_t k = w->n_cols, n = w->n_rows;
    const size_t rb = hx_dtype_row_bytes(w->type, k);
    x->magic = HX_X16_MAGIC;
    x->type = w->type;
    x->streams = hx__cpu_decode_streams();
    x->prefetch = hx__cpu_decode_prefetch(w->type);
    x->tscale = hx_dtype_tail_bytes(w->type) ? w->tensor_scale : 1.0f;
    if (hx_dtype_tail_bytes(w->type) && w->n_tparts > 0) { /* hx__x16_parts_fit was asked */
        x->n_parts = w->n_tparts;
        for (int i = 0; i <= w->n_tparts; i++) x->part_tile[i] = w->tpart_row[i] / HX_X16_ROWS;
        for (int i = 0; i < w->n_tparts; i++) x->part_tscale[i] = w->tpart_tscale[i];
    }
    if (w->type == HX_DTYPE_Q1_0) hx__cpu_q1_lut(&x->lut_tiles, &x->lut_ahead);
    x->n = n;
    x->k = k;
    x->n_tiles = (n + HX_X16_ROWS - 1) / HX_X16_ROWS;
    x->tile_bytes = hx__x16_tile_bytes(w->type, k);
    hx__cpu_chunk_bytes(&x->chunk_decode, &x->chunk_prefill);
    const size_t total = x->tile_bytes * (size_t)x->n_tiles;
    const int nt = n_threads > 0 ? n_threads : 1;
    const size_t pb = hx__cpu_panel_bytes(HX_X16_ROWS, k);
    char *panels = hx_malloc(pb * (size_t)nt);
    /* Decode streams the whole buffer: on 4 KiB pages it would cost a TLB walk every 4 KiB
     * and restart the hardware prefetcher at every page (cpu-arena.h). */
    x->data = hx__cpu_arena_alloc(total, &x->chunk);
    if (!x->data || !panels) {
        hx_free(panels);
        hx__x16_free(x);
        return NULL;
    }
    struct hx_x16_pack_job j = {.w = w, .x = x, .panels = panels, .pb = pb, .rb = rb};
    hx__pool_for(x->n_tiles, nt, 1, hx_x16_pack_one, &j);
    hx_free(panels);
    return x;
}

void hx__x16_free(struct hx_cpu_x16 *x)
{
    if (!x) return;
    hx__cpu_arena_free(x->chunk);
    hx_free(x);
}

size_t hx__xact_bytes(int64_t m, int64_t k, enum hx_dtype t)
{
    size_t mm = (size_t)m, kk = (size_t)k, qb = (size_t)hx__x16_act_block(t), g = (size_t)hx__x16_group(t);
    return HX_X16_ALIGN(mm * kk) + HX_X16_ALIGN(mm * (kk / qb) * 4) + 2 * HX_X16_ALIGN(mm * (kk / g) * 4) + 64;
}

void hx__xact_init(struct hx_cpu_xact *a, void *mem, int64_t m, int64_t k, enum hx_dtype t)
{
    size_t mm = (size_t)m, kk = (size_t)k;
    a->m = m;
    a->k = k;
    a->qb = hx__x16_act_block(t);
    a->g = hx__x16_group(t);
    char *p = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    a->q = (int8_t *)p;
    p += HX_X16_ALIGN(mm * kk);
    a->d = (float *)p;
    p += HX_X16_ALIGN(mm * (kk / (size_t)a->qb) * 4);
    a->ks = (int32_t *)p;
    p += HX_X16_ALIGN(mm * (kk / (size_t)a->g) * 4);
    a->fs = (float *)p;
    a->lut = NULL;
    a->lut_built = false;
}
