/*
 * cpu-impl.h — internals of the fast `cpu` backend, shared by cpu.c and the kernel files.
 *
 * Matmul design. Every quantized weight element is written as w = ws * u + mc, where u is an
 * unsigned 8-bit code (Q8_0: q ^ 0x80, Q4_*: the nibble, Q6_K: the 6-bit code, TQ*: the trit,
 * Q1_0: the bit), ws a float scale constant over 4 consecutive elements (a "lane") and mc a
 * float constant over 16 consecutive elements. Activations are quantized once per op to int8
 * blocks of `qb` elements (32, 128 or 256, per weight type) with one f32 scale per block, kept
 * expanded per lane (dl) and as scale * sum of every 16 codes (ds). Then
 *     Σ w·x ≈ Σ_lanes ws·dl·(Σ_4 u·q) + Σ_16-groups mc·ds,
 * where Σ u·q is exactly the unsigned × signed byte dot product of VNNI (vpdpbusd) and AVX2
 * (vpmaddubsw). A weight row is unpacked into that form (a "panel": codes, lane scales, group
 * corrections) once per tile and reused for every activation row; m = 1 GEMV for the low-bit
 * types reads the GGUF blocks directly (fused kernels), as decode is bound by memory.
 * Within a TQ2_0 block codes are stored in the order its bit layout unpacks to (see
 * hx__cpu_perm), and the activation quantizer writes the same order. I2_S (codes only; its one
 * tensor scale is the lane scale) takes TQ2_0's order and activation blocks where K allows.
 *
 * ISA paths (scalar, avx2, avx512) are chosen at run time (hx__cpu_isa), HX_CPU_ISA forces one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx-backend.h"

enum hx_cpu_isa { HX_CPU_ISA_SCALAR, HX_CPU_ISA_AVX2, HX_CPU_ISA_AVX512, HX_CPU_ISA_COUNT };

/* Best ISA this CPU supports. */
enum hx_cpu_isa hx__cpu_isa_best(void);
bool hx__cpu_isa_supported(enum hx_cpu_isa isa);
/* The ISA kernels use now: HX_CPU_ISA (scalar|avx2|avx512) if set and supported, else best.
 * Re-read from the environment on every call (cheap), so tests can switch paths. */
enum hx_cpu_isa hx__cpu_isa(void);
const char *hx__cpu_isa_name(enum hx_cpu_isa isa);
/* AMX-INT8 usable now: built in, on this CPU, granted by the OS, the ISA is avx512 and
 * HX_CPU_AMX is not 0 (tests turn it off to check the VNNI path on the same shapes). */
bool hx__cpu_amx(void);
/* The CPU and OS allow AMX-INT8 in this build, whatever the ISA and HX_CPU_AMX say (asked once). */
bool hx__cpu_amx_supported(void);
/* AVX-512 VBMI usable now (the Q1_0 lookup decode of cpu-x16-vbmi.c): on this CPU, the ISA is
 * avx512 and HX_CPU_VBMI is not 0 (tests turn it off to compare with the bit-mask kernel). */
bool hx__cpu_vbmi(void);
/* The CPU has AVX-512 VBMI, whatever the ISA and HX_CPU_VBMI say. */
bool hx__cpu_vbmi_supported(void);
/* The CPU's name (the CPUID brand string on x86, else /proc/cpuinfo's), "unknown CPU" if none. */
void hx__cpu_name(char *out, size_t len);

/* Sequential weight streams per thread for decode GEMVs (1; measured in cpu-features.c);
 * HX_CPU_STREAMS=1..4 overrides. Asked when a weight is repacked (x16). */
int hx__cpu_decode_streams(void);
/* How far ahead, in bytes, the decode tile kernels prefetch a weight of type t: 0 (none), 8192
 * or 16384 (16 KiB except on AMD family 19h: none for Q8_0, Q4_0, Q4_K, Q6_K and 8 KiB for
 * TQ2_0, TQ1_0; measured in cpu-features.c); HX_CPU_PREFETCH=0|8|16 (KiB) sets it for every
 * type. Asked when a weight is repacked (x16). */
int hx__cpu_decode_prefetch(enum hx_dtype t);

/* The Q1_0 lookup decode's tiles per block (4 or 8) and groups prefetched ahead (0..16): 8 and 7
 * on AMD, 8 and 3 elsewhere (measured in cpu-features.c); HX_CPU_Q1_LUT=TILES:AHEAD sets them.
 * Asked when a weight is repacked. */
void hx__cpu_q1_lut(int *tiles, int *ahead);

/* Bytes of x16 tiles a thread claims at a time from its share of a matmul (cpu-matmul.c), for
 * decode (1-2 activation rows) and prefill; HX_CPU_CHUNK_KIB=DECODE[:PREFILL] (KiB) sets them.
 * Asked when a weight is repacked (x16). */
void hx__cpu_chunk_bytes(size_t *decode, size_t *prefill);

/* Activation block size for a quantized weight type of rows of k (32, 64, 128 or 256; I2_S:
 * 256 where k is whole 256s, as TQ2_0, else 128). */
int hx__cpu_act_qb(enum hx_dtype t, int64_t k);
/* True if a type's codes are stored permuted within a 256 block (TQ2_0; I2_S where k is whole
 * 256s, so the same ternary weights take the same integer sums as TQ2_0's). */
bool hx__cpu_type_permuted(enum hx_dtype t, int64_t k);
/* Position of element e (0..255) of a TQ2_0 block in code order. */
static inline int hx__cpu_perm_tq2(int e)
{
    int c = e >> 7, n = (e >> 5) & 3, m = e & 31;
    return 64 * n + 32 * c + m;
}

/* Quantized activation rows: n_rows × k. Arrays are row-major with the strides below. */
struct hx_cpu_act {
    int64_t n_rows, k;
    int qb;
    int8_t *q;     /* n_rows × k codes (in the weight type's code order) */
    float *dl;     /* n_rows × k/4 : the block scale of each lane */
    float *ds;     /* n_rows × k/16: block scale × sum of the 16 codes */
};

/* Bytes of scratch hx__cpu_act_quantize needs for n rows of k. */
size_t hx__cpu_act_bytes(int64_t n_rows, int64_t k);
/* Lay out act over mem (64-byte aligned, hx__cpu_act_bytes large). */
void hx__cpu_act_init(struct hx_cpu_act *a, void *mem, int64_t n_rows, int64_t k, int qb);
/* Quantize row r of a (src: k floats); permuted: write TQ2_0 code order. */
void hx__cpu_act_quantize_row(struct hx_cpu_act *a, int64_t r, const float *src, bool permuted);

/* An unpacked panel of weight rows: row i at codes + i*k, wsl + i*k/4, mc + i*k/16. */
struct hx_cpu_panel {
    int64_t k;
    uint8_t *codes;
    float *wsl;
    float *mc;
};
size_t hx__cpu_panel_bytes(int64_t n_rows, int64_t k);
void hx__cpu_panel_init(struct hx_cpu_panel *p, void *mem, int64_t n_rows, int64_t k);
/* Unpack weight row `row` (GGUF blocks of type t, k elements; ts the weight's tensor scale,
 * hx_weight.tensor_scale) into panel row i. */
void hx__cpu_unpack_row(enum hx_dtype t, const void *row, int64_t k, float ts,
                        struct hx_cpu_panel *p, int i);

/* One matmul being computed: shared read-only state for the kernels. */
struct hx_cpu_mm {
    const struct hx_weight *w;
    const struct hx_cpu_act *act;  /* quantized types */
    const struct hx_tensor_ref *src, *dst;
    int64_t m, n, k;
    size_t w_row_bytes;
    float scale;
};

/* Kernel entry points of one ISA. */
struct hx_cpu_kernels {
    /* out[c*out_stride + i] = Σ panel row i · act row r0+c, for i < nr (≤ 4), c < nc (any). */
    void (*panel_dot)(const struct hx_cpu_panel *p, int nr, const struct hx_cpu_act *a,
                      int64_t r0, int64_t nc, float *out, int64_t out_stride);
    /* Unpack weight row `row` into panel row i (hx__cpu_unpack_row compiled for this ISA). */
    void (*unpack_row)(enum hx_dtype t, const void *row, int64_t k, float ts,
                       struct hx_cpu_panel *p, int i);
    /* Fused m = 1 GEMV over GGUF rows j0..j1 (type-specific; NULL = use panels). */
    bool (*gemv_fused)(const struct hx_cpu_mm *mm, int64_t j0, int64_t j1, float *out);
    /* Float weights: convert a row of weight type t to f32. */
    void (*to_f32)(enum hx_dtype t, const void *row, float *dst, int64_t k);
    /* Σ w[i]·x[i] in f32. */
    float (*dot_f32)(const float *w, const float *x, int64_t k);
    /* Float weights (F32, F16, BF16), m = 1: out[j] = (row j · x)·scale for j < n, rows rb
     * bytes apart from w, the same bits as to_f32 then dot_f32 then ·scale; software
     * prefetch pf bytes ahead (0: none). NULL = convert and dot. */
    void (*gemv_float)(enum hx_dtype t, const void *w, size_t rb, const float *x, int64_t k,
                       int64_t n, float *out, float scale, size_t pf);
};

const struct hx_cpu_kernels *hx__cpu_kernels(enum hx_cpu_isa isa);
extern const struct hx_cpu_kernels hx__cpu_kernels_scalar;
extern const struct hx_cpu_kernels hx__cpu_kernels_avx2;
extern const struct hx_cpu_kernels hx__cpu_kernels_avx512;

/* Non-matmul ops (cpu-ops.c); each parallelizes over rows with n_threads. */
int hx__cpu_op_embed(const struct hx_op *op, const struct hx_split *s, int n_threads);
void hx__cpu_op_rms_norm(const struct hx_op *op, int n_threads);
void hx__cpu_op_rope(const struct hx_op *op, const struct hx_split *s, int n_threads);
void hx__cpu_op_attn(const struct hx_op *op, const struct hx_split *s, int n_threads,
                     float *scratch, size_t scratch_floats_per_thread, size_t *kt_peak);
/* Floats of attention scratch per thread (hx__cpu_op_attn's scratch). */
size_t hx__cpu_attn_per_thread(const struct hx_op *op);
/* Bytes of the head-major K and V copy a prefill of n_rows rows of one sequence makes for the
 * call (allocated and freed in it, at the context's length rounded up to 32 keys); 0 when
 * the op never makes one. hx__cpu_op_attn adds what it allocates to *kt_peak's maximum. */
size_t hx__cpu_attn_kt_bytes(const struct hx_op *op, int64_t n_rows);
void hx__cpu_op_glu(const struct hx_op *op, int n_threads);
void hx__cpu_op_add(const struct hx_op *op, int n_threads);

/* AVX-512 inner loops (cpu-ops-avx512.c): attention of one query row and head over len keys
 * (rows k_stride / v_stride floats apart), SiLU-GLU of f values, Σx² in double. */
void hx__cpu_attn_row_avx512(const float *q, const float *k0, size_t k_stride, const float *v0,
                             size_t v_stride, int64_t len, int hd, float scale, float *out);
/* kt: one KV head's keys transposed in blocks of 32 (cpu-ops-avx512.c says how). */
void hx__cpu_attn_kt_avx512(const float *q, const float *kt, const float *v0,
                            size_t v_stride, int64_t len, int hd, float scale, float *sc,
                            float *out);
void hx__cpu_attn_flash_avx512(const float *const *qs, int nq, const int64_t *lens,
                               const float *kt, const float *v0, size_t v_stride,
                               int hd, float scale, float *const *outs);
void hx__cpu_silu_glu_avx512(const float *g, const float *u, float *y, int64_t f);
double hx__cpu_sumsq_avx512(const float *x, int64_t n);

/* Matmul (cpu-matmul.c): scratch is grown in *mem / *mem_bytes as needed. */
int hx__cpu_matmul(const struct hx_op *op, int n_threads, void **mem, size_t *mem_bytes);
/* The bytes of *mem hx__cpu_matmul needs for op. repack < 0: the op's weight handle says how
 * it runs; a plan's op (no handle yet): repack (0, 1) says whether weight_prepare will repack
 * its weight into x16 tiles. */
size_t hx__cpu_matmul_scratch(const struct hx_op *op, int n_threads, int repack);
