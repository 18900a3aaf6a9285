#version 450
// gemm_coopmat.comp — prefill GEMM on cooperative matrices (GL_NV_cooperative_matrix):
// dst (M, N) = scale · A (M, K) · Wᵀ, W (N, K) in GGUF blocks, as gemm.comp computes it but
// with 16 × 16 × 16 f16 fragments and f32 accumulators.
//
// A workgroup computes a 64 × 64 tile of dst (64 activation rows × 64 weight rows) with four
// subgroups in a 2 × 2 arrangement, each owning 32 × 32 outputs = 2 × 2 accumulator
// fragments. K is walked in steps of 64 (two 32-element chunks): the activation slice is
// converted to f16 into shared memory (As, row m holds its 64 k values), the 2 × 64 weight
// chunks are decoded (dequant.glsl, one chunk per invocation) into shared memory as f16
// (Ws, row n holds its 64 k values), and each subgroup multiplies its fragments from there:
// A fragments row-major from As, B (K × N) fragments column-major from Ws. At the end each
// accumulator goes through a per-subgroup shared staging fragment so that the writes are
// bounded to M × N and scaled, exactly where gemm.comp writes.
//
// Specialization constant 0: WG = 4 × the subgroup size (the host sets it; the layout
// assumes exactly four subgroups). Grid: x (folded with z) over ceil(N / 64), y over
// ceil(M / 64). Rows of shared memory are padded to 72 halves (144 bytes, a multiple of 16
// as fragment loads want) against bank conflicts.
//
// With -DCOOPMAT_EMU the fragment operations are emulated with plain f16 loads and f32
// multiply-adds, each invocation owning 1024 / subgroup size of its subgroup's 32 × 32
// outputs (subgroups of 8 to 64): everything else — staging, f16 conversion, dequantization,
// tiling, fragment offsets and strides, the bounded store — is the same code, so a device
// without cooperative matrices (lavapipe, in test-vulkan) checks it (HX_VK_GEMM=coopmat-emu).
#ifndef COOPMAT_EMU
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "dequant.glsl"

#define BM 64u
#define BN 64u
#define BK 64u
#define LDS 72u /* padded row, in halves */

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };

layout(push_constant) uniform P {
    uint K, N, M;
    uint a_off, a_stride, d_off, d_stride;
    uint w_off, w_row_bytes;
    float scale;
    uint pad0, pad1; /* mmv.comp's qa_off, qa_stride: the push constants are shared */
    float wscale;    /* I2_S: the tensor scale */
} p;

shared float16_t As[BM * LDS];
shared float16_t Ws[BN * LDS];
shared float Cs[4u * 256u];

#ifdef COOPMAT_EMU
/* Element t of this invocation's accumulators is output e = lane + t · subgroup size of the
 * subgroup's 32 × 32 block, in fragment order: fragment (i, j) = (e / 512, e / 256 % 2),
 * row e / 16 % 16 and column e % 16 within it. */
#define EMU_MAX 128u
float emu_acc[EMU_MAX];
/* acc(i, j) += A(i) · B(j) for one 16-deep step at kk: A row-major from As (offset, stride
 * LDS), B column-major from Ws — what coopMatLoadNV(…, false) / (…, true) would read. */
void emu_mma(uint sm, uint sn, uint kk)
{
    uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    for (uint t = 0u; t < EMU_MAX; t++) {
        uint e = lane + t * sgs;
        if (e >= 1024u) break;
        uint i = e / 512u, j = (e / 256u) % 2u, r = (e / 16u) % 16u, c = e % 16u;
        uint ao = (sm + 16u * i) * LDS + kk + r * LDS, bo = (sn + 16u * j) * LDS + kk + c * LDS;
        float s = emu_acc[t];
        for (uint k = 0u; k < 16u; k++) s += float(As[ao + k]) * float(Ws[bo + k]);
        emu_acc[t] = s;
    }
}
#else
#define FRAG16 fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FRAG32 fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#endif

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint sm = (sg >> 1u) * 32u, sn = (sg & 1u) * 32u;
    uint n0 = hx_group_index() * BN, m0 = gl_WorkGroupID.y * BM;
#ifdef COOPMAT_EMU
    for (uint t = 0u; t < EMU_MAX; t++) emu_acc[t] = 0.0;
#else
    FRAG32 acc[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = FRAG32(0.0);
#endif
    uint nc = (p.K + 31u) / 32u;
    for (uint c0 = 0u; c0 < nc; c0 += 2u) {
        /* stage A[m0 .. m0+64)[32·c0 .. 32·c0+64) as f16 */
        for (uint idx = tid; idx < BM * BK; idx += WG) {
            uint r = idx / BK, k = idx % BK, e = 32u * c0 + k;
            float v = (m0 + r < p.M && e < p.K) ? a[p.a_off + (m0 + r) * p.a_stride + e] : 0.0;
            As[r * LDS + k] = float16_t(v);
        }
        /* decode chunks c0, c0 + 1 of weight rows n0 .. n0+64 as f16 */
        for (uint idx = tid; idx < 2u * BN; idx += WG) {
            uint r = idx % BN, h = idx / BN, c = c0 + h;
            uint n = n0 + r;
            uint rb = p.w_off + n * p.w_row_bytes;
            uint base = r * LDS + 32u * h;
#ifdef WFLOAT
            for (uint k = 0u; k < 32u; k++) {
                uint e = 32u * c + k;
                Ws[base + k] = float16_t((n < p.N && e < p.K) ? wel(rb, e) : 0.0);
            }
#else
            if (n < p.N && c < nc) {
                uint b = c / BC;
                begin_block(rb + b * BB);
                uint q[8];
                vec2 fs;
                float fm;
                chunk(c - b * BC, q, fs, fm);
                [[unroll]] for (uint k = 0u; k < 8u; k++) {
                    vec4 w = vec4(i8x4(q[k])) * (k < 4u ? fs.x : fs.y) + fm;
                    Ws[base + 4u * k] = float16_t(w.x);
                    Ws[base + 4u * k + 1u] = float16_t(w.y);
                    Ws[base + 4u * k + 2u] = float16_t(w.z);
                    Ws[base + 4u * k + 3u] = float16_t(w.w);
                }
            } else {
                for (uint k = 0u; k < 32u; k++) Ws[base + k] = float16_t(0.0);
            }
#endif
        }
        barrier();
#ifdef COOPMAT_EMU
        for (uint kk = 0u; kk < BK; kk += 16u) emu_mma(sm, sn, kk);
#else
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            FRAG16 fa[2], fb[2];
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                coopMatLoadNV(fa[i], As, (sm + 16u * i) * LDS + kk, LDS, false);
            [[unroll]] for (uint j = 0u; j < 2u; j++)
                coopMatLoadNV(fb[j], Ws, (sn + 16u * j) * LDS + kk, LDS, true);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++)
                    acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
        }
#endif
        barrier();
    }
    /* each fragment through this subgroup's staging area, bounded and scaled */
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
#ifdef COOPMAT_EMU
            for (uint t = 0u; t < EMU_MAX; t++) {
                uint e = gl_SubgroupInvocationID + t * gl_SubgroupSize;
                if (e < 1024u && e / 256u == 2u * i + j) Cs[sg * 256u + e % 256u] = emu_acc[t];
            }
#else
            coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
#endif
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
                uint m = m0 + sm + 16u * i + e / 16u, n = n0 + sn + 16u * j + e % 16u;
                if (m < p.M && n < p.N)
                    d[p.d_off + m * p.d_stride + n] = Cs[sg * 256u + e] * p.scale;
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
        }
}
