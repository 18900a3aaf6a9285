/*
 * cpu-x16.h — the `cpu` backend's repacked weights ("x16") for AVX-512 VNNI.
 *
 * weight_prepare rewrites a quantized weight once at load into tiles of 16 output rows. Inside
 * a tile, K is cut into chunks of 4 elements; one chunk of the 16 rows is one 64-byte vector
 * whose byte 4·r + b is the code of row r, element 4·c + b. One vpdpbusd of that vector with
 * the 4 activation codes of the chunk broadcast to every lane adds 64 products into the 16 row
 * accumulators, so decode (m = 1) and prefill (m > 1) run the same kernel, the weight vector
 * reused for up to 8 activation rows in registers.
 *
 * Codes are unsigned: w = s·(u − K) per group of G elements (Q8_0: u = q + 128, K = 128;
 * Q4_0: K = 8; Q6_K: u = 4·code, K = 128, s = d·sc / 4; TQ1_0, TQ2_0, Q2_0: u = the 2-bit or
 * base-3 code, K = 1; I2_S: the same with s the tensor scale for every group; Q1_0: u = bit,
 * w = s·(2u − 1)), except
 * Q4_K and Q5_K, where w = d·sc·u − dmin·m. The −K·Σx term is an integer the activation quantizer
 * computes per group, used as the accumulator's start value, so it costs nothing in the loop.
 * Codes stay packed as tightly as in GGUF (nibbles, 2-bit, base-3, bit masks) and every tile
 * is 16 × the GGUF row size (Q4_K: 148 instead of 144 bytes per 256, the 6-bit scales being
 * stored as bytes), so a decode step streams the same bytes llama.cpp would.
 *
 * Tile layouts (per group, in order; "vec" = 64 bytes, "h[16]" = 16 fp16, one per row):
 *   Q8_0  G=32 : vec[8] codes, h[16] d                                         = 16 × 34
 *   Q4_0  G=32 : vec[4] (chunk v | chunk v+4 << 4), h[16] d                     = 16 × 18
 *   Q4_K  per 256: h[16] d, h[16] dmin, u8 sc[8][16], u8 m[8][16],
 *                  then per G=32: vec[4] as Q4_0                                = 16 × 148
 *   Q5_K  as Q4_K, each group's vec[4] followed by vec hb: bit c of byte 4·r + b is
 *                  the fifth bit of row r, element 4·c + b                       = 16 × 180
 *   Q6_K  per 256: h[16] d, i8 sc[16][16], then per G=16: vec[3], vec c = 4·(chunk c) |
 *                  2 bits of chunk 3 (vec 0: bits 4-5, vec 1: bits 0-1, vec 2: bits 2-3)  = 16 × 210
 *   TQ2_0 G=256: vec[16] (chunk p + 16·s at bits 2s), h[16] d                  = 16 × 66
 *   TQ1_0 G=256: vec[12] (chunks 5p..5p+4, base 3), vec (chunks 60..63 + a zero
 *                trit), h[16] d — the byte coding of GGUF's TQ1_0               = 16 × 54
 *   Q1_0  G=128: h[16] d, vec[4] (chunk 8v + i at bit i)                       = 16 × 18
 *   Q2_0  G=64 : h[16] d, vec[4] (chunk v + 4·s at bits 2s)                    = 16 × 18
 *   I2_S  G=256: vec[16] (chunk p + 16·s at bits 2s), TQ2_0's codes; no scale in the tile:
 *                the tensor's one scale is x16.tscale, applied per group as TQ2_0's d is, so
 *                the same ternary weights give TQ2_0's results bit for bit   = 16 × 64
 *                (K a multiple of 256; I2_S weights with K = 128 mod 256 keep the GGUF rows)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"

#define HX_X16_ROWS 16

struct hx_cpu_x16 {
    uint32_t magic;            /* HX_X16_MAGIC: tells a repacked handle from a plain weight */
    enum hx_dtype type;
    int64_t n, k, n_tiles;
    size_t tile_bytes;
    int streams;               /* decode: weight streams per thread (hx__cpu_decode_streams) */
    int prefetch;              /* decode: software prefetch distance in bytes, 0, 8192 or 16384
                                  (hx__cpu_decode_prefetch) */
    int lut_tiles, lut_ahead;  /* Q1_0 lookup decode: tiles per block (4, 8), groups ahead
                                  (hx__cpu_q1_lut) */
    float tscale;              /* the weight's tensor scale (I2_S), 1 for the other types */
    int n_parts;               /* a fused weight with a tensor scale per part (hx_weight.n_tparts):
                                  part i is tiles [part_tile[i], part_tile[i + 1]), scale
                                  part_tscale[i]; 0: tscale for every tile */
    int64_t part_tile[HX_WEIGHT_MAX_PARTS + 1];
    float part_tscale[HX_WEIGHT_MAX_PARTS];
    size_t chunk_decode, chunk_prefill; /* weight bytes a thread claims at a time, decode and
                                           prefill (hx__cpu_chunk_bytes; set for plain handles too) */
    uint8_t *data;             /* n_tiles × tile_bytes, 4 KiB aligned, on huge pages */
    const void *rows;          /* float weights (plain handle): a copy of the GGUF rows on huge
                                  pages that the decode GEMV reads, or NULL: read w->data */
    bool no_float_gemv;        /* HX_CPU_FLOAT_GEMV=0: float decode converts tiles, then dots
                                  (the path before the fused GEMV; for A/B measurements) */
    struct hx_cpu_chunk *chunk; /* the arena chunk holding data (cpu-arena.h) */
};
#define HX_X16_MAGIC 0x36317848u /* "Hx16" */

/* Group size (elements per scale) and act block size of a type this path runs; 0 if none. */
int hx__x16_group(enum hx_dtype t);
int hx__x16_act_block(enum hx_dtype t);
/* Bytes of one tile (16 rows) of K columns of type t. */
size_t hx__x16_tile_bytes(enum hx_dtype t, int64_t k);
/* The −K of w = s·(u − K) (0 for Q4_K, Q5_K). */
int hx__x16_bias(enum hx_dtype t);
bool hx__x16_usable(enum hx_dtype t, int64_t k);
/* w's parts (hx_weight.n_tparts) fall on tile boundaries: each part whole tiles of 16 rows. */
bool hx__x16_parts_fit(const struct hx_weight *w);
/* The tensor scale of tile t: its part's, else x->tscale. */
static inline float hx__x16_tile_tscale(const struct hx_cpu_x16 *x, int64_t t)
{
    for (int i = 1; i < x->n_parts; i++)
        if (t < x->part_tile[i]) return x->part_tscale[i - 1];
    return x->n_parts > 0 ? x->part_tscale[x->n_parts - 1] : x->tscale;
}
/* Repack w (n_threads for the conversion). NULL on allocation failure or unusable type. */
struct hx_cpu_x16 *hx__x16_pack(const struct hx_weight *w, int n_threads);
void hx__x16_free(struct hx_cpu_x16 *x);

/* Quantized activations for the x16 kernels: m rows of k int8 codes, per act block one f32
 * scale, per weight group the integer start value bias·Σq and (Q4_K) the float −d·Σq. */
struct hx_cpu_xact {
    int64_t m, k;
    int qb, g;
    int8_t *q;       /* m × k */
    float *d;        /* m × k/qb */
    int32_t *ks;     /* m × k/g */
    float *fs;       /* m × k/g */
    uint8_t *lut;    /* Q1_0 decode by lookup (cpu-x16-vbmi.c): room for row 0's tables, which
                        the walk's first block builds, or NULL */
    bool lut_built;  /* the tables are in lut already (a thread's later chunks of a call) */
};
size_t hx__xact_bytes(int64_t m, int64_t k, enum hx_dtype t);
void hx__xact_init(struct hx_cpu_xact *a, void *mem, int64_t m, int64_t k, enum hx_dtype t);

/* AVX-512 entry points (cpu-x16-avx512.c). */
void hx__x16_quantize_rows_avx512(struct hx_cpu_xact *a, enum hx_dtype t, const float *src,
                                  size_t src_stride_floats, int64_t r0, int64_t r1);
/* dst rows r0..r1 (act rows), columns of tiles t0..t1; dst row stride in floats. */
void hx__x16_prefetch_head(const struct hx_cpu_x16 *x, int64_t t0, int64_t t1);
void hx__x16_gemm_avx512(const struct hx_cpu_x16 *x, const struct hx_cpu_xact *a, int64_t r0,
                         int64_t r1, int64_t t0, int64_t t1, float *dst, int64_t dst_stride,
                         float scale); /* hx_weight.scale; x->tscale is applied per group */
/* Q1_0, one activation row, by table lookup (cpu-x16-vbmi.c, only where hx__cpu_vbmi()):
 * columns of tiles t0..t1 of a quantized row bq (its codes; dx: its act scales), the row's
 * tables (hx__x16_q1_lut_bytes(k) bytes, 64-aligned) built into lut as the first block walks;
 * hx__x16_q1_prefetch_head fetches that block's first group, to be called before the row is
 * quantized. */
size_t hx__x16_q1_lut_bytes(int64_t k);
void hx__x16_q1_prefetch_head(const struct hx_cpu_x16 *x, int64_t t0, int64_t t1);
void hx__x16_q1_gemv_vbmi(const struct hx_cpu_x16 *x, uint8_t *lut, const int8_t *bq,
                          const float *dx, int64_t t0, int64_t t1, float *out, float scale);
/* Q8_0 on AMX (cpu-x16-amx.c, only where hx__cpu_amx()): act rows r0 .. r0 + 16·⌊(r1−r0)/16⌋,
 * the rows after the last full 16 are the caller's to run with hx__x16_gemm_avx512. */
void hx__x16_gemm_amx_q8_0(const struct hx_cpu_x16 *x, const struct hx_cpu_xact *a, int64_t r0,
                           int64_t r1, int64_t t0, int64_t t1, float *dst, int64_t dst_stride,
                           float scale);
