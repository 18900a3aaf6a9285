/*
 * hip-emu-mma.cpp — the emulator's matrix fragment arithmetic (hip-emu.h hx_emu_mma): f32 <-> f16
 * conversion, and for each fragment op the documented per-lane layout that rebuilds A, B and C
 * from the 32 lanes' registers and hands back each lane's D. hip-emu.cpp runs it as a warp
 * collective. This file is the emulator's statement of the hardware layouts: the kernels in
 * hip-mma.h and the test in tests/test-hip-mma.cpp write them independently.
 */
#include "hip-emu-mma.h"

uint16_t hx_emu_f2h(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half, m * 2^-24 (exact scaling) */
        float f;
        memcpy(&f, &a, sizeof f);
        return (uint16_t)(sign | (uint32_t)nearbyintf(f * 16777216.0f));
    }
    uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* to nearest, ties to even */
    return (uint16_t)(sign | h);
}

namespace
{

float h2f(uint32_t h)
{
    h &= 0xffffu;
    const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float f = (float)m * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    const uint32_t u =
        e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

} // namespace

/* ---- float-weight fragment ops (issue #30 item 4) ------------------------------------------
 * f32 -> bf16 and f32 -> tf32 as the instructions round: cvt.rn.bf16x2.f32 to nearest even
 * (a NaN becomes the canonical 0x7fff), cvt.rna.tf32.f32 to nearest with ties away from zero
 * (add half a tf32 ulp to the magnitude's bits, keep the top 19; an infinity or NaN unchanged
 * but for the dropped bits). */
uint16_t hx_emu_f2bf(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
uint32_t hx_emu_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
    return u & 0xffffe000u;
}

/* Layouts (PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type", one table
 * for .f16 and .bf16, and "Matrix Fragments for mma.m16n8k8", .tf32), lane l, g = l / 4,
 * t = l % 4:
 *   m16n8k16 bf16  as f16: A reg i, half h: row g + 8 (i & 1), col 2t + 8 (i >> 1) + h;
 *                  B reg i, half h: row (k) 2t + 8i + h, col g
 *   m16n8k8 tf32   A reg i: row g + 8 (i & 1), col t + 4 (i >> 1); B reg i: row (k) t + 4i,
 *                  col g
 *   both           C/D reg i: row g + 8 (i >> 1), col 2t + (i & 1)
 * A tf32 operand is read as its top 19 bits (an f32 the kernel did not round is truncated
 * here; hip-mma.h always rounds first, so it never depends on this). Every bf16 x bf16 and
 * tf32 x tf32 product is exact in f32; they are summed in k order onto C in f32. */
void hx_emu_mma_float(int kind, const uint32_t *const *lanes, uint32_t (*out)[8])
{
    const bool bf = kind == HX_EMU_MMA_BF16;
    const int K = bf ? 16 : 8;
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const uint32_t *r = lanes[l];
        const int g = l / 4, t = l % 4;
        if (bf) {
            for (int i = 0; i < 4; i++)
                for (int h = 0; h < 2; h++)
                    A[g + 8 * (i & 1)][2 * t + 8 * (i >> 1) + h] = u2f((r[i] >> 16 * h) << 16);
            for (int i = 0; i < 2; i++)
                for (int h = 0; h < 2; h++)
                    B[2 * t + 8 * i + h][g] = u2f((r[4 + i] >> 16 * h) << 16);
        } else {
            for (int i = 0; i < 4; i++)
                A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = u2f(r[i] & 0xffffe000u);
            for (int i = 0; i < 2; i++) B[t + 4 * i][g] = u2f(r[4 + i] & 0xffffe000u);
        }
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = u2f(r[6 + i]);
    }
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            const int row = l / 4 + 8 * (i >> 1), col = 2 * (l % 4) + (i & 1);
            float s = C[row][col];
            for (int k = 0; k < K; k++) s += A[row][k] * B[k][col]; /* exact products */
            out[l][i] = f2u(s);
        }
}

/* The layouts, lane l, g = l / 4, t = l % 4 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
 * floating point type" and "for mma.m16n8k32" with .s8):
 *   m16n8k16 f16  A reg i, half h: row g + 8 (i & 1), col 2t + 8 (i >> 1) + h
 *                 B reg i, half h: row (k) 2t + 8i + h, col g
 *   m16n8k32 s8   A reg i, byte j: row g + 8 (i & 1), col 4t + 16 (i >> 1) + j
 *                 B reg i, byte j: row (k) 4t + 16i + j, col g
 *   both          C/D reg i: row g + 8 (i >> 1), col 2t + (i & 1)
 * RDNA3 WMMA 16x16x16 f16, wave32 (AMD's RDNA3 ISA guide and the GPUOpen WMMA article): A
 * half e of lane l: row l % 16, col (k) e; B half e: row (k) e, col l % 16; lanes 16-31 hold
 * the same A and B as lanes 0-15; C/D element v: row 2v + l / 16, col l % 16. */
static void amd_wmma_compute(int kind, const uint32_t *const *lanes, uint32_t (*out)[8]);

void hx_emu_mma_compute(int kind, const uint32_t *const *lanes, uint32_t (*out)[8])
{
    if (kind == HX_EMU_WMMA_I8 || kind == HX_EMU_WMMA12_F16 || kind == HX_EMU_WMMA12_I8) {
        amd_wmma_compute(kind, lanes, out);
        return;
    }
    if (kind == HX_EMU_MMA_BF16 || kind == HX_EMU_MMA_TF32) {
        hx_emu_mma_float(kind, lanes, out);
        return;
    }
    if (kind == HX_EMU_MMA_F16) {
        float A[16][16], B[16][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            const uint32_t *r = lanes[l];
            const int g = l / 4, t = l % 4;
            for (int i = 0; i < 4; i++)
                for (int h = 0; h < 2; h++)
                    A[g + 8 * (i & 1)][2 * t + 8 * (i >> 1) + h] = h2f(r[i] >> 16 * h);
            for (int i = 0; i < 2; i++)
                for (int h = 0; h < 2; h++) B[2 * t + 8 * i + h][g] = h2f(r[4 + i] >> 16 * h);
            for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = u2f(r[6 + i]);
        }
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++) {
                const int row = l / 4 + 8 * (i >> 1), col = 2 * (l % 4) + (i & 1);
                float s = C[row][col];
                for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col]; /* exact products */
                out[l][i] = f2u(s);
            }
    } else if (kind == HX_EMU_MMA_S8) {
        int A[16][32], B[32][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            const uint32_t *r = lanes[l];
            const int g = l / 4, t = l % 4;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    A[g + 8 * (i & 1)][4 * t + 16 * (i >> 1) + j] = (int8_t)(r[i] >> 8 * j);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++) B[4 * t + 16 * i + j][g] = (int8_t)(r[4 + i] >> 8 * j);
            for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = (int)r[6 + i];
        }
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++) {
                const int row = l / 4 + 8 * (i >> 1), col = 2 * (l % 4) + (i & 1);
                int64_t s = C[row][col];
                for (int k = 0; k < 32; k++) s += A[row][k] * B[k][col];
                out[l][i] = (uint32_t)s; /* wraps as the s32 accumulator does */
            }
    } else {
        float A[16][16], B[16][16], C[16][16];
        for (int l = 0; l < 32; l++) {
            const uint32_t *r = lanes[l];
            for (int e = 0; e < 16; e++) {
                A[l % 16][e] = h2f(r[e / 2] >> 16 * (e % 2));
                B[e][l % 16] = h2f(r[8 + e / 2] >> 16 * (e % 2));
            }
            for (int v = 0; v < 8; v++) C[2 * v + l / 16][l % 16] = u2f(r[16 + v]);
        }
        for (int l = 0; l < 32; l++)
            for (int v = 0; v < 8; v++) {
                const int row = 2 * v + l / 16, col = l % 16;
                float s = C[row][col];
                for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
                out[l][v] = f2u(s);
            }
    }
}

/* ---- AMD WMMA beyond RDNA3's f16 --------------------------------------------------------------
 * Lane l, h = l / 16 (which half of the wave), r = l % 16:
 * RDNA3 v_wmma_i32_16x16x16_iu8, wave32 (AMD's RDNA3 ISA guide, "Wave Matrix Multiply
 *   Accumulate"; the same arrangement as the f16 op's, a byte where that has a half): A byte e of
 *   lane l (word e / 4, byte e % 4): row r, col (k) e; B byte e: row (k) e, col r; lanes 16-31
 *   repeat lanes 0-15 (hip-emu.cpp checks it); C/D element v (s32): row 2v + h, col r.
 * RDNA4 (gfx12) v_wmma_f32_16x16x16_f16 and v_wmma_i32_16x16x16_iu8, wave32 (AMD's RDNA4 ISA
 *   guide; GPUOpen "Using the Matrix Cores of AMD RDNA 4 architecture GPUs"): no repetition;
 *   A element e (half e of words 0-3, or byte e of words 0-1): row r, col (k) 8h + e; B element
 *   e: row (k) 8h + e, col r; C/D element v: row 8h + v, col r.
 * Integer ops: both operands signed (the builtins' sign flags set), the s32 sum wrapping. */
void hx_emu_mma_amd_words(int kind, int *n_in, int *n_out)
{
    if (kind == HX_EMU_WMMA_I8 || kind == HX_EMU_WMMA12_F16) *n_in = 16, *n_out = 8;
    if (kind == HX_EMU_WMMA12_I8) *n_in = 12, *n_out = 8;
}

static void amd_wmma_compute(int kind, const uint32_t *const *lanes, uint32_t (*out)[8])
{
    double A[16][16], B[16][16], C[16][16];
    const bool i8 = kind != HX_EMU_WMMA12_F16, rdna4 = kind != HX_EMU_WMMA_I8;
    const int ab = kind == HX_EMU_WMMA12_I8 ? 2 : 4; /* words of A (and of B) per lane */
    for (int l = 0; l < 32; l++) {
        const uint32_t *w = lanes[l];
        const int h = l / 16, r = l % 16;
        const int ne = rdna4 ? 8 : 16, k0 = rdna4 ? 8 * h : 0; /* elements per lane, first k */
        for (int e = 0; e < ne; e++) {
            const uint32_t aw = w[i8 ? e / 4 : e / 2], bw = w[ab + (i8 ? e / 4 : e / 2)];
            const int sh = i8 ? 8 * (e % 4) : 16 * (e % 2);
            A[r][k0 + e] = i8 ? (double)(int8_t)(aw >> sh) : (double)h2f(aw >> sh);
            B[k0 + e][r] = i8 ? (double)(int8_t)(bw >> sh) : (double)h2f(bw >> sh);
        }
        for (int v = 0; v < 8; v++) {
            const uint32_t c = w[2 * ab + v];
            C[rdna4 ? 8 * h + v : 2 * v + h][r] = i8 ? (double)(int32_t)c : (double)u2f(c);
        }
    }
    for (int l = 0; l < 32; l++)
        for (int v = 0; v < 8; v++) {
            const int row = rdna4 ? 8 * (l / 16) + v : 2 * v + l / 16, col = l % 16;
            if (i8) {
                int64_t s = (int64_t)C[row][col];
                for (int k = 0; k < 16; k++) s += (int64_t)A[row][k] * (int64_t)B[k][col];
                out[l][v] = (uint32_t)s; /* wraps as the s32 accumulator does */
            } else {
                float s = (float)C[row][col];
                for (int k = 0; k < 16; k++) s += (float)A[row][k] * (float)B[k][col];
                out[l][v] = f2u(s);
            }
        }
}
