/*
 * hip-mma.h — the prefill GEMM on the matrix units (included once, by hip-module.hip, after
 * hip-kernels.h), for batches the GEMVs do not take (more than HX_HIP_GEMV_ROWS_MAX rows):
 *
 *   HX_HIP_TC_MMA_F16   NVIDIA sm_80+: mma.sync m16n8k16, f16 activations and weights (the
 *                       weights decoded with hx_hip_dq8 into shared-memory f16 tiles), f32
 *                       accumulators
 *   HX_HIP_TC_MMA_S8    NVIDIA sm_80+: mma.sync m16n8k32 on int8: the activations quantized
 *                       once per row and 32 elements (hx_hip_quantize_q8, Q8_0's rounding), the
 *                       weights' integer codes as stored; each 32-block's int32 result scaled
 *                       by (activation scale of the row) x (weight scale of the column's block)
 *                       into f32 accumulators. Types with one scale per 32 elements or coarser:
 *                       Q8_0, Q4_0, TQ2_0, TQ1_0, Q1_0, Q2_0, I2_S (hx_hip_tc_int8)
 *   HX_HIP_TC_WMMA_F16  AMD RDNA3 (gfx11): v_wmma_f32_16x16x16_f16 (wave32), f16 as above
 *
 * The fragment ops are hip-compat.h's; the host emulator runs them as warp collectives with the
 * hardware's per-lane layouts, so the register placement below is checked there. F32 and BF16
 * weights do not take f16 (f16 activations would add an error numerics.h does not allow them;
 * BF16 in f16 loses range): they have their own kernel, hx_hip_gemm_tcf, at the end of the
 * file (split operands on bf16 / tf32 mma). Each 256-thread block computes a 64 x 64 output
 * tile over K tiles of 128 (four 32-blocks between two barriers); warp w takes rows 16 (w % 4)
 * .. +15 and columns 32 (w / 4) .. +31.
 */
#pragma once

enum { HX_HIP_TC_SIMT = 0, HX_HIP_TC_MMA_F16 = 1, HX_HIP_TC_MMA_S8 = 2, HX_HIP_TC_WMMA_F16 = 3 };

/* Paths compiled into this code object, as bits 1 << path (hx_hip_gemm_caps writes them). */
#if defined(HX_HIP_HAVE_MMA)
#define HX_HIP_TC_CAPS_MMA ((1 << HX_HIP_TC_MMA_F16) | (1 << HX_HIP_TC_MMA_S8))
#else
#define HX_HIP_TC_CAPS_MMA 0
#endif
#if defined(HX_HIP_HAVE_WMMA)
#define HX_HIP_TC_CAPS_WMMA (1 << HX_HIP_TC_WMMA_F16)
#else
#define HX_HIP_TC_CAPS_WMMA 0
#endif

/* Float-weight paths (the block "float weights on the matrix units" at the end of the file);
 * their numbers start at 8 so that paths added beside them keep their own. */
enum { HX_HIP_TC_MMA_BF16 = 8, HX_HIP_TC_MMA_TF32 = 9 };
#if defined(HX_HIP_HAVE_MMA)
#define HX_HIP_TC_CAPS_MMAF ((1 << HX_HIP_TC_MMA_BF16) | (1 << HX_HIP_TC_MMA_TF32))
#else
#define HX_HIP_TC_CAPS_MMAF 0
#endif

/* AMD WMMA beyond RDNA3's f16 (hx_hip_gemm_wmma, at the end of this file); values from 16 up,
 * apart from the NVIDIA paths (0-3, and the float ones from 8):
 *   HX_HIP_TC_WMMA_I8     AMD RDNA3 (gfx11): v_wmma_i32_16x16x16_iu8 (wave32, signed), int8
 *                         as HX_HIP_TC_MMA_S8 (activations quantized once per row and 32-block,
 *                         each 32-block's int32 result, two WMMAs of K = 16, scaled by the row's
 *                         and the column's block scales); the types of hx_hip_tc_int8
 *   HX_HIP_TC_WMMA12_F16  AMD RDNA4 (gfx12): v_wmma_f32_16x16x16_f16 in gfx12's layout, f16 as
 *                         HX_HIP_TC_WMMA_F16
 *   HX_HIP_TC_WMMA12_I8   AMD RDNA4 (gfx12): v_wmma_i32_16x16x16_iu8 in gfx12's layout, int8 as
 *                         HX_HIP_TC_WMMA_I8 */
enum { HX_HIP_TC_WMMA_I8 = 16, HX_HIP_TC_WMMA12_F16 = 17, HX_HIP_TC_WMMA12_I8 = 18 };
#if defined(HX_HIP_HAVE_WMMA_I8)
#define HX_HIP_TC_CAPS_WMMA_I8 (1 << HX_HIP_TC_WMMA_I8)
#else
#define HX_HIP_TC_CAPS_WMMA_I8 0
#endif
#if defined(HX_HIP_HAVE_WMMA12)
#define HX_HIP_TC_CAPS_WMMA12 ((1 << HX_HIP_TC_WMMA12_F16) | (1 << HX_HIP_TC_WMMA12_I8))
#else
#define HX_HIP_TC_CAPS_WMMA12 0
#endif
#define HX_HIP_TC_CAPS_WMMA_AMD (HX_HIP_TC_CAPS_WMMA_I8 | HX_HIP_TC_CAPS_WMMA12)
/* Paths whose activations are hx_hip_quantize_q8's int8 (aq / ad), and the paths of
 * hx_hip_gemm_wmma. */
static constexpr __host__ __device__ bool hx_hip_tc_int8_path(int p)
{
    return p == HX_HIP_TC_MMA_S8 || p == HX_HIP_TC_WMMA_I8 || p == HX_HIP_TC_WMMA12_I8;
}
static constexpr __host__ __device__ bool hx_hip_tc_amd(int p)
{
    return p == HX_HIP_TC_WMMA_I8 || p == HX_HIP_TC_WMMA12_F16 || p == HX_HIP_TC_WMMA12_I8;
}

/* Does the int8 path take weight type t? */
static constexpr __host__ __device__ bool hx_hip_tc_int8(int t)
{
    return t == HX_DTYPE_Q8_0 || t == HX_DTYPE_Q4_0 || t == HX_DTYPE_TQ2_0 ||
           t == HX_DTYPE_TQ1_0 || t == HX_DTYPE_Q1_0 || t == HX_DTYPE_Q2_0 || t == HX_DTYPE_I2_S;
}

/* The integer codes of elements k .. k+7 of a weight row (k % 8 == 0, one 32-block), offsets
 * applied (Q4_0 q - 8, ternary code - 1, Q1_0 2b - 1), as int8; returns the scale of their
 * block (ts for I2_S), so that weight = scale x code exactly as hx_hip_dq1 decodes it. */
template <int T>
static __device__ __forceinline__ float hx_hip_iq8(const uint8_t *row, int64_t k, int8_t *q,
                                                   float ts)
{
    typedef hx_hip_blk<T> G;
    const uint8_t *b = row + (k / G::E) * G::B;
    const int e = (int)(k % G::E);
    switch (T) {
    case HX_DTYPE_Q8_0:
        for (int i = 0; i < 8; i++) q[i] = (int8_t)b[2 + e + i];
        return hx_hip_ldh(b);
    case HX_DTYPE_Q4_0: {
        const uint8_t *p = b + 2 + (e & 15);
        for (int i = 0; i < 8; i++) q[i] = (int8_t)((e < 16 ? (p[i] & 0x0F) : (p[i] >> 4)) - 8);
        return hx_hip_ldh(b);
    }
    case HX_DTYPE_TQ2_0: {
        const int c = e / 128, n = (e % 128) / 32, m = e % 32;
        for (int i = 0; i < 8; i++) q[i] = (int8_t)(((b[32 * c + m + i] >> (2 * n)) & 3) - 1);
        return hx_hip_ldh(b + 64);
    }
    case HX_DTYPE_TQ1_0:
        for (int i = 0; i < 8; i++) q[i] = (int8_t)(hx_hip_tq1_code(b, e + i) - 1);
        return hx_hip_ldh(b + 52);
    case HX_DTYPE_Q1_0: {
        const int bits = b[2 + e / 8];
        for (int i = 0; i < 8; i++) q[i] = (int8_t)(((bits >> i) & 1) ? 1 : -1);
        return hx_hip_ldh(b);
    }
    case HX_DTYPE_Q2_0:
        for (int i = 0; i < 8; i++)
            q[i] = (int8_t)(((b[2 + (e + i) / 4] >> (2 * ((e + i) % 4))) & 3) - 1);
        return hx_hip_ldh(b);
    case HX_DTYPE_I2_S: {
        const int g = e / 32, m = e % 32;
        for (int i = 0; i < 8; i++) q[i] = (int8_t)(((b[m + i] >> (6 - 2 * g)) & 3) - 1);
        return ts;
    }
    default:
        for (int i = 0; i < 8; i++) q[i] = 0;
        return 0.0f;
    }
}

static __device__ __forceinline__ uint32_t hx_hip_ld_u32(const void *p)
{
    return *(const uint32_t *)p;
}

#define HX_HIP_TC_BK 128 /* K per shared-memory tile: four 32-blocks between two barriers */
#define HX_HIP_TC_KS (HX_HIP_TC_BK / 32)
#define HX_HIP_TC_PAD 8 /* f16 tile rows: 136 halves (272 bytes), 4-byte aligned pairs */

/* One K tile's fill, shared by hx_hip_gemm_tc and hx_hip_gemm_wmma: thread (lr, lk) writes
 * elements k0 + 32 sb + lk .. +7 (sb < HX_HIP_TC_KS) of activation row r and weight row j
 * into the tile's row lr. I8: the weights' integer codes (hx_hip_iq8) and the activations'
 * (aq), with their 32-block scales (K % 32 == 0: a 32-block is inside or wholly past K, where
 * codes and scales are 0); else both as f16 (weights decoded by hx_hip_dq8 / hx_hip_dq1, so K
 * need not be a multiple of 32 or 8; activations clamped to f16's range, so a finite input
 * stays finite). */
template <int T, bool I8>
static __device__ __forceinline__ void
    hx_hip_tc_fill(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                   int64_t src_stride, const int8_t *aq, const float2 *ad, int64_t n, int kvec,
                   float ts, int64_t k0, int64_t r, int64_t j, int lr, int lk,
                   uint16_t (*Ah)[HX_HIP_TC_BK + HX_HIP_TC_PAD],
                   uint16_t (*Bh)[HX_HIP_TC_BK + HX_HIP_TC_PAD], int8_t (*Aq)[HX_HIP_TC_BK + 4],
                   int8_t (*Bq)[HX_HIP_TC_BK + 4], float (*As)[HX_HIP_BM], float (*Bs)[HX_HIP_BN])
{
    /* by two on AMD: all four sub-blocks' loads at once took F16's WMMA kernels past 256
     * registers (96 bytes of spills on gfx11/gfx12, test-hip-isa) */
    HX_HIP_UNROLL2
    for (int sb = 0; sb < HX_HIP_TC_KS; sb++) {
        const int c = 32 * sb + lk; /* column in the tile */
        const int64_t k = k0 + c;
        if constexpr (I8) {
            int8_t wq[8];
            float dw = 0.0f;
            const bool in = k < K;
            if (j < N && in) dw = hx_hip_iq8<T>(W + j * row_bytes, k, wq, ts);
            else
                for (int i = 0; i < 8; i++) wq[i] = 0;
            const int8_t *a = aq + HX_MIN(r, n - 1) * K + (in ? k : 0);
            for (int i = 0; i < 8; i++)
                Bq[lr][c + i] = wq[i], Aq[lr][c + i] = r < n && in ? a[i] : 0;
            if (lk == 0) {
                Bs[sb][lr] = dw;
                As[sb][lr] = r < n && in ? ad[r * (K / 32) + k / 32].x : 0.0f;
            }
        } else {
            float v[8];
            hx_hip_dq8_at<T>(W, row_bytes, N, K, j, k, kvec, ts, v);
            for (int i = 0; i < 8; i++) {
                const float x = (r < n && k + i < K) ? src[r * src_stride + k + i] : 0.0f;
                Bh[lr][c + i] = hx_hip_f2h(v[i]);
                Ah[lr][c + i] = hx_hip_f2h(fminf(fmaxf(x, -65504.0f), 65504.0f));
            }
        }
    }
}

/* dst (n, N) = src (n, K) . W^T x scale on the matrix units, path P (above). For
 * HX_HIP_TC_MMA_S8 the activations are aq / ad (hx_hip_quantize_q8 of all n rows; K % 32 ==
 * 0) and src is not read; the others read src. kvec: K % 8 == 0. */
template <int T, int P>
__global__ void __launch_bounds__(256)
    hx_hip_gemm_tc(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                   int64_t src_stride, const int8_t *aq, const float2 *ad, int64_t n, float *dst,
                   int64_t dst_stride, float scale, int kvec, float ts)
{
    __shared__ uint16_t Ah[P == HX_HIP_TC_MMA_S8 ? 1 : HX_HIP_BM][HX_HIP_TC_BK + HX_HIP_TC_PAD];
    __shared__ uint16_t Bh[P == HX_HIP_TC_MMA_S8 ? 1 : HX_HIP_BN][HX_HIP_TC_BK + HX_HIP_TC_PAD];
    __shared__ int8_t Aq[P == HX_HIP_TC_MMA_S8 ? HX_HIP_BM : 1][HX_HIP_TC_BK + 4];
    __shared__ int8_t Bq[P == HX_HIP_TC_MMA_S8 ? HX_HIP_BN : 1][HX_HIP_TC_BK + 4];
    /* the tile's block scales (int8): activation rows, weight columns, per 32-block */
    __shared__ float As[P == HX_HIP_TC_MMA_S8 ? HX_HIP_TC_KS : 1][HX_HIP_BM];
    __shared__ float Bs[P == HX_HIP_TC_MMA_S8 ? HX_HIP_TC_KS : 1][HX_HIP_BN];
    const int t = threadIdx.x, lane = t % 32, w = t / 32, wm = 16 * (w % 4), wn = 32 * (w / 4);
    const int lr = t / 4, lk = (t % 4) * 8; /* the row and 8 columns this thread loads */
    const int64_t r0 = (int64_t)blockIdx.y * HX_HIP_BM, j0 = (int64_t)blockIdx.x * HX_HIP_BN;
    const int g = lane / 4, q4 = lane % 4; /* NVIDIA fragments: group and thread in group */
    float acc[16];
    for (int i = 0; i < 16; i++) acc[i] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += HX_HIP_TC_BK) {
        const int64_t r = r0 + lr, j = j0 + lr;
        hx_hip_tc_fill<T, P == HX_HIP_TC_MMA_S8>(W, row_bytes, N, K, src, src_stride, aq, ad, n,
                                                 kvec, ts, k0, r, j, lr, lk, Ah, Bh, Aq, Bq, As,
                                                 Bs);
        /* the K of this tile that holds data: the mma steps stop at the first one past it (the
         * rest of the last step is zeros) */
        const int kend = (int)HX_MIN((int64_t)HX_HIP_TC_BK, K - k0);
        __syncthreads();
        if constexpr (P == HX_HIP_TC_MMA_F16) {
            for (int kk = 0; kk < kend; kk += 16) {
                uint32_t a[4];
                a[0] = hx_hip_ld_u32(&Ah[wm + g][kk + 2 * q4]);
                a[1] = hx_hip_ld_u32(&Ah[wm + g + 8][kk + 2 * q4]);
                a[2] = hx_hip_ld_u32(&Ah[wm + g][kk + 2 * q4 + 8]);
                a[3] = hx_hip_ld_u32(&Ah[wm + g + 8][kk + 2 * q4 + 8]);
                for (int nt = 0; nt < 4; nt++) {
                    const int c = wn + 8 * nt + g;
                    uint32_t b[2];
                    b[0] = hx_hip_ld_u32(&Bh[c][kk + 2 * q4]);
                    b[1] = hx_hip_ld_u32(&Bh[c][kk + 2 * q4 + 8]);
                    hx_hip_mma_f16(acc + 4 * nt, a, b);
                }
            }
        } else if constexpr (P == HX_HIP_TC_MMA_S8) {
            for (int sb = 0; 32 * sb < kend; sb++) {
                const int kk = 32 * sb;
                uint32_t a[4];
                a[0] = hx_hip_ld_u32(&Aq[wm + g][kk + 4 * q4]);
                a[1] = hx_hip_ld_u32(&Aq[wm + g + 8][kk + 4 * q4]);
                a[2] = hx_hip_ld_u32(&Aq[wm + g][kk + 4 * q4 + 16]);
                a[3] = hx_hip_ld_u32(&Aq[wm + g + 8][kk + 4 * q4 + 16]);
                const float da0 = As[sb][wm + g], da1 = As[sb][wm + g + 8];
                for (int nt = 0; nt < 4; nt++) {
                    const int c = wn + 8 * nt + g;
                    uint32_t b[2];
                    b[0] = hx_hip_ld_u32(&Bq[c][kk + 4 * q4]);
                    b[1] = hx_hip_ld_u32(&Bq[c][kk + 4 * q4 + 16]);
                    int d[4] = {0, 0, 0, 0};
                    hx_hip_mma_s8(d, a, b);
                    /* D reg i: row g + 8 (i >> 1), column 2 q4 + (i & 1) of the 8-column tile */
                    const int cc = wn + 8 * nt + 2 * q4;
                    acc[4 * nt + 0] += da0 * Bs[sb][cc] * (float)d[0];
                    acc[4 * nt + 1] += da0 * Bs[sb][cc + 1] * (float)d[1];
                    acc[4 * nt + 2] += da1 * Bs[sb][cc] * (float)d[2];
                    acc[4 * nt + 3] += da1 * Bs[sb][cc + 1] * (float)d[3];
                }
            }
        } else {
            /* WMMA: lane l holds A row l % 16 and B column l % 16, all 16 k (both halves of
             * the wave the same) */
            const int l16 = lane % 16;
            for (int kk = 0; kk < kend; kk += 16) {
                uint16_t a[16];
                for (int e = 0; e < 16; e++) a[e] = Ah[wm + l16][kk + e];
                for (int nt = 0; nt < 2; nt++) {
                    uint16_t b[16];
                    for (int e = 0; e < 16; e++) b[e] = Bh[wn + 16 * nt + l16][kk + e];
                    hx_hip_wmma_f16(acc + 8 * nt, a, b);
                }
            }
        }
        __syncthreads();
    }
    if constexpr (P == HX_HIP_TC_WMMA_F16) {
        /* D element v: row 2v + lane / 16, column lane % 16 of the 16 x 16 tile */
        for (int nt = 0; nt < 2; nt++)
            for (int v = 0; v < 8; v++) {
                const int64_t r = r0 + wm + 2 * v + lane / 16, j = j0 + wn + 16 * nt + lane % 16;
                if (r < n && j < N) dst[r * dst_stride + j] = acc[8 * nt + v] * scale;
            }
    } else {
        for (int nt = 0; nt < 4; nt++)
            for (int i = 0; i < 4; i++) {
                const int64_t r = r0 + wm + g + 8 * (i >> 1),
                              j = j0 + wn + 8 * nt + 2 * q4 + (i & 1);
                if (r < n && j < N) dst[r * dst_stride + j] = acc[4 * nt + i] * scale;
            }
    }
}

/* ---- float weights on the matrix units (issue #30 item 4) ------------------------------------
 * F32 and BF16 weights, at f32-class accuracy (core/numerics.h allows an F32 weight no
 * activation rounding; docs/hip.md "Prefill GEMM" has the error analysis):
 *
 *   HX_HIP_TC_MMA_BF16  BF16 weights, NVIDIA sm_80+ mma.sync m16n8k16 bf16 -> f32: each
 *                       activation split into two bf16 terms, hi = bf16(a), lo = bf16(a - hi),
 *                       and A.W = lo.W + hi.W, two mmas. The weights are bf16 already (exact);
 *                       every product is exact in f32. Left: a - hi - lo, at most 2^-16 |a|.
 *   HX_HIP_TC_MMA_TF32  F32 weights, NVIDIA sm_80+ mma.sync m16n8k8 tf32 -> f32, "3xTF32":
 *                       both sides split, x = hi + lo (tf32 = f32 rounded to 11 significant
 *                       bits), and A.W = lo_a.hi_w + hi_a.lo_w + hi_a.hi_w, three mmas. Left:
 *                       the two splits' remainders (at most 2^-22 |x| each) and lo_a.lo_w
 *                       (at most 2^-22 |a w|): about 3 x 2^-22 |a w| per product, below f32
 *                       accumulation's own error over K (numerics.h's floor).
 *
 * (The path numbers and HX_HIP_TC_CAPS_MMAF are near the top of the file, by the caps kernel.)
 * Same tile as hx_hip_gemm_tc (64 x 64 outputs per 256-thread block, warp w: rows 16 (w % 4)
 * .. +15, columns 32 (w / 4) .. +31), K tiles of 64, both operands as f32 in shared memory
 * and split when a fragment is loaded (each A fragment once per K step, reused over the
 * warp's four 8-column tiles). */

#define HX_HIP_TCF_BK 64
#define HX_HIP_TCF_PAD 4

/* x0, x1 as two bf16 pairs (x0 in the low halves): hi = bf16(x), lo = bf16(x - hi). x is
 * clamped to bf16's largest finite value for hi, so a finite x never makes hi infinite; an
 * infinite or NaN x reaches the result through lo. */
static __device__ __forceinline__ void hx_hip_split_bf16(float x0, float x1, uint32_t *hi,
                                                         uint32_t *lo)
{
    const float m = __uint_as_float(0x7f7f0000u); /* bf16's largest finite value */
    const uint32_t h = hx_hip_f2bf2(fminf(fmaxf(x0, -m), m), fminf(fmaxf(x1, -m), m));
    *hi = h;
    *lo = hx_hip_f2bf2(x0 - __uint_as_float(h << 16), x1 - __uint_as_float(h & 0xffff0000u));
}
/* x as tf32 hi + lo (the same clamp, to tf32's largest finite value). */
static __device__ __forceinline__ void hx_hip_split_tf32(float x, uint32_t *hi, uint32_t *lo)
{
    const float m = __uint_as_float(0x7f7fe000u); /* tf32's largest finite value */
    const uint32_t h = hx_hip_tf32(fminf(fmaxf(x, -m), m));
    *hi = h;
    *lo = hx_hip_tf32(x - __uint_as_float(h));
}

/* dst (n, N) = src (n, K) . W^T x scale, weight type T (F32 or BF16), path P
 * (HX_HIP_TC_MMA_TF32 or HX_HIP_TC_MMA_BF16). kvec: K % 8 == 0. */
template <int T, int P>
__global__ void __launch_bounds__(256)
    hx_hip_gemm_tcf(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                    int64_t src_stride, int64_t n, float *dst, int64_t dst_stride, float scale,
                    int kvec, float ts)
{
    static_assert(P == HX_HIP_TC_MMA_BF16 || P == HX_HIP_TC_MMA_TF32, "a float-weight path");
    __shared__ float As[HX_HIP_BM][HX_HIP_TCF_BK + HX_HIP_TCF_PAD];
    __shared__ float Bs[HX_HIP_BN][HX_HIP_TCF_BK + HX_HIP_TCF_PAD];
    const int t = threadIdx.x, lane = t % 32, w = t / 32, wm = 16 * (w % 4), wn = 32 * (w / 4);
    const int lr = t / 4, lk = (t % 4) * 8; /* the row and 8 columns this thread loads */
    const int64_t r0 = (int64_t)blockIdx.y * HX_HIP_BM, j0 = (int64_t)blockIdx.x * HX_HIP_BN;
    const int g = lane / 4, q4 = lane % 4; /* NVIDIA fragments: group and thread in group */
    float acc[16];
    for (int i = 0; i < 16; i++) acc[i] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += HX_HIP_TCF_BK) {
        const int64_t r = r0 + lr, j = j0 + lr;
        for (int sb = 0; sb < HX_HIP_TCF_BK / 32; sb++) {
            const int c = 32 * sb + lk; /* column in the tile */
            const int64_t k = k0 + c;
            float v[8];
            hx_hip_dq8_at<T>(W, row_bytes, N, K, j, k, kvec, ts, v);
            for (int i = 0; i < 8; i++) {
                Bs[lr][c + i] = v[i];
                As[lr][c + i] = (r < n && k + i < K) ? src[r * src_stride + k + i] : 0.0f;
            }
        }
        /* the mma steps stop at the first one past K (the rest of the last step is zeros) */
        const int kend = (int)HX_MIN((int64_t)HX_HIP_TCF_BK, K - k0);
        __syncthreads();
        if constexpr (P == HX_HIP_TC_MMA_BF16) {
            for (int kk = 0; kk < kend; kk += 16) {
                /* A reg i: row g + 8 (i & 1), columns 2 q4 + 8 (i >> 1) and +1 */
                uint32_t ah[4], al[4];
                for (int i = 0; i < 4; i++) {
                    const float *a = &As[wm + g + 8 * (i & 1)][kk + 2 * q4 + 8 * (i >> 1)];
                    hx_hip_split_bf16(a[0], a[1], &ah[i], &al[i]);
                }
                for (int nt = 0; nt < 4; nt++) {
                    /* B reg i: k 2 q4 + 8 i and +1, column g (the weights are bf16: exact) */
                    const float *b = &Bs[wn + 8 * nt + g][kk + 2 * q4];
                    const uint32_t bw[2] = {hx_hip_f2bf2(b[0], b[1]), hx_hip_f2bf2(b[8], b[9])};
                    hx_hip_mma_bf16(acc + 4 * nt, al, bw);
                    hx_hip_mma_bf16(acc + 4 * nt, ah, bw);
                }
            }
        } else {
            for (int kk = 0; kk < kend; kk += 8) {
                /* A reg i: row g + 8 (i & 1), column q4 + 4 (i >> 1) */
                uint32_t ah[4], al[4];
                for (int i = 0; i < 4; i++)
                    hx_hip_split_tf32(As[wm + g + 8 * (i & 1)][kk + q4 + 4 * (i >> 1)], &ah[i],
                                      &al[i]);
                for (int nt = 0; nt < 4; nt++) {
                    /* B reg i: k q4 + 4 i, column g */
                    const float *b = &Bs[wn + 8 * nt + g][kk + q4];
                    uint32_t bh[2], bl[2];
                    hx_hip_split_tf32(b[0], &bh[0], &bl[0]);
                    hx_hip_split_tf32(b[4], &bh[1], &bl[1]);
                    /* the small terms first */
                    hx_hip_mma_tf32(acc + 4 * nt, al, bh);
                    hx_hip_mma_tf32(acc + 4 * nt, ah, bl);
                    hx_hip_mma_tf32(acc + 4 * nt, ah, bh);
                }
            }
        }
        __syncthreads();
    }
    /* D reg i: row g + 8 (i >> 1), column 2 q4 + (i & 1) of the 8-column tile */
    for (int nt = 0; nt < 4; nt++)
        for (int i = 0; i < 4; i++) {
            const int64_t r = r0 + wm + g + 8 * (i >> 1), j = j0 + wn + 8 * nt + 2 * q4 + (i & 1);
            if (r < n && j < N) dst[r * dst_stride + j] = acc[4 * nt + i] * scale;
        }
}

/* ---- AMD WMMA: RDNA3 int8, RDNA4 f16 and int8 ------------------------------------------------
 * hx_hip_gemm_tc's tiles, fills and arguments (P: HX_HIP_TC_WMMA_I8, _WMMA12_F16, _WMMA12_I8;
 * the int8 paths read aq / ad, K % 32 == 0), with AMD's fragments: warp w's 16 x 32 outputs are
 * two 16 x 16 WMMA tiles. Lane l, h = l / 16, r = l % 16 (docs/hip.md "Prefill GEMM"):
 *   RDNA3 int8   A: row r, bytes k 0..15 (4 words); B: column r, the same k; D v: row 2v + h
 *   RDNA4        A: row r, k 8h .. 8h+7 (8 halves, or 8 bytes = 2 words); B: column r, the same
 *                k; D v: row 8h + v (no half-wave repetition)
 * Column r of the tile. A 32-block of the int8 paths is two WMMAs of K = 16 into one int32
 * result, scaled as HX_HIP_TC_MMA_S8's. */
template <int T, int P>
__global__ void __launch_bounds__(256)
    hx_hip_gemm_wmma(const uint8_t *W, int64_t row_bytes, int64_t N, int64_t K, const float *src,
                     int64_t src_stride, const int8_t *aq, const float2 *ad, int64_t n, float *dst,
                     int64_t dst_stride, float scale, int kvec, float ts)
{
    static_assert(hx_hip_tc_amd(P), "hx_hip_gemm_wmma: an AMD WMMA path");
    constexpr bool I8 = P != HX_HIP_TC_WMMA12_F16, RDNA4 = P != HX_HIP_TC_WMMA_I8;
    __shared__ uint16_t Ah[I8 ? 1 : HX_HIP_BM][HX_HIP_TC_BK + HX_HIP_TC_PAD];
    __shared__ uint16_t Bh[I8 ? 1 : HX_HIP_BN][HX_HIP_TC_BK + HX_HIP_TC_PAD];
    __shared__ int8_t Aq[I8 ? HX_HIP_BM : 1][HX_HIP_TC_BK + 4];
    __shared__ int8_t Bq[I8 ? HX_HIP_BN : 1][HX_HIP_TC_BK + 4];
    __shared__ float As[I8 ? HX_HIP_TC_KS : 1][HX_HIP_BM];
    __shared__ float Bs[I8 ? HX_HIP_TC_KS : 1][HX_HIP_BN];
    const int t = threadIdx.x, lane = t % 32, w = t / 32, wm = 16 * (w % 4), wn = 32 * (w / 4);
    const int lr = t / 4, lk = (t % 4) * 8; /* the row and 8 columns this thread loads */
    const int64_t r0 = (int64_t)blockIdx.y * HX_HIP_BM, j0 = (int64_t)blockIdx.x * HX_HIP_BN;
    const int h = lane / 16, r = lane % 16;
    float acc[16];
    for (int i = 0; i < 16; i++) acc[i] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += HX_HIP_TC_BK) {
        const int64_t ar = r0 + lr, j = j0 + lr;
        hx_hip_tc_fill<T, I8>(W, row_bytes, N, K, src, src_stride, aq, ad, n, kvec, ts, k0, ar, j,
                              lr, lk, Ah, Bh, Aq, Bq, As, Bs);
        const int kend = (int)HX_MIN((int64_t)HX_HIP_TC_BK, K - k0);
        __syncthreads();
        if constexpr (!I8) {
            for (int kk = 0; kk < kend; kk += 16) {
                uint16_t a[8], b[8];
                for (int e = 0; e < 8; e++) a[e] = Ah[wm + r][kk + 8 * h + e];
                for (int nt = 0; nt < 2; nt++) {
                    for (int e = 0; e < 8; e++) b[e] = Bh[wn + 16 * nt + r][kk + 8 * h + e];
                    hx_hip_wmma12_f16(acc + 8 * nt, a, b);
                }
            }
        } else {
            for (int sb = 0; 32 * sb < kend; sb++) {
                int d[2][8];
                for (int nt = 0; nt < 2; nt++)
                    for (int v = 0; v < 8; v++) d[nt][v] = 0;
                for (int q = 0; q < 2; q++) { /* K 16 q .. 16 q + 15 of the 32-block */
                    const int kk = 32 * sb + 16 * q;
                    if constexpr (RDNA4) {
                        uint32_t a[2], b[2];
                        for (int i = 0; i < 2; i++)
                            a[i] = hx_hip_ld_u32(&Aq[wm + r][kk + 8 * h + 4 * i]);
                        for (int nt = 0; nt < 2; nt++) {
                            for (int i = 0; i < 2; i++)
                                b[i] = hx_hip_ld_u32(&Bq[wn + 16 * nt + r][kk + 8 * h + 4 * i]);
                            hx_hip_wmma12_i8(d[nt], a, b);
                        }
                    } else {
                        uint32_t a[4], b[4];
                        for (int i = 0; i < 4; i++) a[i] = hx_hip_ld_u32(&Aq[wm + r][kk + 4 * i]);
                        for (int nt = 0; nt < 2; nt++) {
                            for (int i = 0; i < 4; i++)
                                b[i] = hx_hip_ld_u32(&Bq[wn + 16 * nt + r][kk + 4 * i]);
                            hx_hip_wmma_i8(d[nt], a, b);
                        }
                    }
                }
                for (int nt = 0; nt < 2; nt++) {
                    const float dw = Bs[sb][wn + 16 * nt + r];
                    for (int v = 0; v < 8; v++) {
                        const int row = RDNA4 ? 8 * h + v : 2 * v + h;
                        acc[8 * nt + v] += As[sb][wm + row] * dw * (float)d[nt][v];
                    }
                }
            }
        }
        __syncthreads();
    }
    for (int nt = 0; nt < 2; nt++)
        for (int v = 0; v < 8; v++) {
            const int64_t row = r0 + wm + (RDNA4 ? 8 * h + v : 2 * v + h),
                          col = j0 + wn + 16 * nt + r;
            if (row < n && col < N) dst[row * dst_stride + col] = acc[8 * nt + v] * scale;
        }
}

/* ---- the paths a device may run: compiled in, and checked on the device ----------------------
 * Every fragment layout above is the documented one, emulated here, and never yet confirmed on
 * a GPU. hx_hip_gemm_caps (one warp, at device open) therefore runs each compiled path's
 * fragment op once on known small integers — A(r, k) and B(k, c) below, loaded into the
 * registers exactly as the GEMM kernels load them — and each lane compares every D element it
 * holds with the sum it computes itself (exact: small integers in every format). out[0]: the
 * paths compiled in whose check passed, out[1]: the paths compiled in. A device whose layout
 * differs fails that path, and the host leaves it unused (hip-gemm-pick.h). */
static __device__ __forceinline__ int hx_hip_sc_a(int r, int k) { return (5 * r + 3 * k) % 7 - 3; }
static __device__ __forceinline__ int hx_hip_sc_b(int k, int c) { return (2 * k + 7 * c) % 5 - 2; }
static __device__ __forceinline__ bool hx_hip_sc_ok(float d, int r, int c, int K)
{
    int s = 0;
    for (int k = 0; k < K; k++) s += hx_hip_sc_a(r, k) * hx_hip_sc_b(k, c);
    return d == (float)s;
}
static __device__ __forceinline__ uint16_t hx_hip_sc_h(int x) { return hx_hip_f2h((float)x); }
static __device__ __forceinline__ uint32_t hx_hip_sc_s8(int x) { return (uint32_t)(uint8_t)(int8_t)x; }

/* Does path p's fragment op give this lane's D elements right? (lane l, one warp) */
static __device__ bool hx_hip_sc_path(int p, int l)
{
    const int g = l / 4, q = l % 4, h = l / 16, r = l % 16;
    bool ok = true;
    if (p == HX_HIP_TC_MMA_F16 || p == HX_HIP_TC_MMA_BF16) { /* m16n8k16, A 16x16, B 16x8 */
        uint32_t a[4], b[2];
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < 4; i++) {
            const int rr = g + 8 * (i & 1), k = 2 * q + 8 * (i >> 1);
            a[i] = p == HX_HIP_TC_MMA_F16
                       ? hx_hip_sc_h(hx_hip_sc_a(rr, k)) |
                             (uint32_t)hx_hip_sc_h(hx_hip_sc_a(rr, k + 1)) << 16
                       : hx_hip_f2bf2((float)hx_hip_sc_a(rr, k), (float)hx_hip_sc_a(rr, k + 1));
        }
        for (int i = 0; i < 2; i++) {
            const int k = 2 * q + 8 * i;
            b[i] = p == HX_HIP_TC_MMA_F16
                       ? hx_hip_sc_h(hx_hip_sc_b(k, g)) |
                             (uint32_t)hx_hip_sc_h(hx_hip_sc_b(k + 1, g)) << 16
                       : hx_hip_f2bf2((float)hx_hip_sc_b(k, g), (float)hx_hip_sc_b(k + 1, g));
        }
        if (p == HX_HIP_TC_MMA_F16) hx_hip_mma_f16(d, a, b);
        else hx_hip_mma_bf16(d, a, b);
        for (int i = 0; i < 4; i++) ok &= hx_hip_sc_ok(d[i], g + 8 * (i >> 1), 2 * q + (i & 1), 16);
    } else if (p == HX_HIP_TC_MMA_TF32) { /* m16n8k8, A 16x8, B 8x8 */
        uint32_t a[4], b[2];
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < 4; i++)
            a[i] = hx_hip_tf32((float)hx_hip_sc_a(g + 8 * (i & 1), q + 4 * (i >> 1)));
        for (int i = 0; i < 2; i++) b[i] = hx_hip_tf32((float)hx_hip_sc_b(q + 4 * i, g));
        hx_hip_mma_tf32(d, a, b);
        for (int i = 0; i < 4; i++) ok &= hx_hip_sc_ok(d[i], g + 8 * (i >> 1), 2 * q + (i & 1), 8);
    } else if (p == HX_HIP_TC_MMA_S8) { /* m16n8k32, A 16x32, B 32x8 */
        uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
        int d[4] = {0, 0, 0, 0};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                a[i] |= hx_hip_sc_s8(hx_hip_sc_a(g + 8 * (i & 1), 4 * q + 16 * (i >> 1) + j)) << 8 * j;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++) b[i] |= hx_hip_sc_s8(hx_hip_sc_b(4 * q + 16 * i + j, g)) << 8 * j;
        hx_hip_mma_s8(d, a, b);
        for (int i = 0; i < 4; i++)
            ok &= hx_hip_sc_ok((float)d[i], g + 8 * (i >> 1), 2 * q + (i & 1), 32);
    } else if (p == HX_HIP_TC_WMMA_F16 || p == HX_HIP_TC_WMMA12_F16) { /* 16x16x16 f16 */
        const bool r4 = p == HX_HIP_TC_WMMA12_F16;
        uint16_t a[16], b[16];
        float d[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        for (int e = 0; e < 16; e++) {
            const int k = r4 ? 8 * h + e % 8 : e; /* RDNA4: 8 halves a lane, k 8h + e */
            a[e] = hx_hip_sc_h(hx_hip_sc_a(r, k)), b[e] = hx_hip_sc_h(hx_hip_sc_b(k, r));
        }
        if (r4) hx_hip_wmma12_f16(d, a, b);
        else hx_hip_wmma_f16(d, a, b);
        for (int v = 0; v < 8; v++) ok &= hx_hip_sc_ok(d[v], r4 ? 8 * h + v : 2 * v + h, r, 16);
    } else if (p == HX_HIP_TC_WMMA_I8 || p == HX_HIP_TC_WMMA12_I8) { /* 16x16x16 int8 */
        const bool r4 = p == HX_HIP_TC_WMMA12_I8;
        uint32_t a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
        int d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int e = 0; e < (r4 ? 8 : 16); e++) { /* RDNA3: 16 bytes, k e; RDNA4: 8, k 8h + e */
            const int k = r4 ? 8 * h + e : e;
            a[e / 4] |= hx_hip_sc_s8(hx_hip_sc_a(r, k)) << 8 * (e % 4);
            b[e / 4] |= hx_hip_sc_s8(hx_hip_sc_b(k, r)) << 8 * (e % 4);
        }
        if (r4) hx_hip_wmma12_i8(d, a, b);
        else hx_hip_wmma_i8(d, a, b);
        for (int v = 0; v < 8; v++)
            ok &= hx_hip_sc_ok((float)d[v], r4 ? 8 * h + v : 2 * v + h, r, 16);
    }
    return ok;
}

__global__ void hx_hip_gemm_caps(int *out)
{
    constexpr int compiled = HX_HIP_TC_CAPS_MMA | HX_HIP_TC_CAPS_WMMA | HX_HIP_TC_CAPS_MMAF |
                             HX_HIP_TC_CAPS_WMMA_AMD;
    __shared__ int failed[32];
    const int l = (int)threadIdx.x;
    int f = 0;
    for (int p = 1; p < 32; p++) /* a path's op runs on every lane of the warp together */
        if (compiled & (1 << p) && !hx_hip_sc_path(p, l)) f |= 1 << p;
    failed[l] = f;
    __syncthreads();
    if (l == 0) {
        for (int i = 1; i < 32; i++) f |= failed[i];
        out[0] = compiled & ~f;
        out[1] = compiled;
    }
}
