#version 450
// mmvw.comp — the GPUs' decode GEMV: dst (M, N) = scale · A (M, K) · Wᵀ for small M, W (N, K) in
// GGUF blocks read in place with 16-byte loads (dequant.glsl's WVEC block view: the aligned
// 16-byte windows over a block, funnel-shifted into registers). K is a whole number of units
// (below): any multiple of 32 for the 32-element unit types.
//
// Layout: NR weight rows per workgroup, LPR invocations per row (WG = NR · LPR, both
// specialization constants chosen per device and type, vulkan-pick.h). A row is walked in
// units of one block (BE elements: 32 for Q8_0 / Q4_0, 256 for the ternary and K-quant types;
// I2_S as 256-element pairs of blocks, -DI2S_256, so that it walks exactly as TQ2_0) or, for
// the float types, one 32-element chunk: invocation t of a row takes units t, t + LPR, ...,
// so neighbouring invocations read neighbouring blocks. Each unit is decoded once for the MR
// activation rows of the pass.
//
// Split K: the grid's y is passes × KS; workgroup y = pass · KS + ks takes units
// [ks · ku, (ks + 1) · ku) and writes its unscaled partial sums to dst + ks · ks_stride (the
// host binds the scratch there and runs mmv_combine.comp after). KS = 1: plain dst, scaled.
//
// Reduction: where LPR is a multiple of the subgroup size, subgroupAdd and one shared step;
// else (LPR below the subgroup size, several rows per subgroup) a shared-memory tree or, with
// -DSG_SHUFFLE (devices with subgroup shuffles), a subgroupShuffleXor butterfly over each
// row's LPR neighbouring invocations, whose first invocation adds in the tree's order (the
// same bits). The subgroup size is SGS (constant 4) where the pipeline was created with that
// required size, else gl_SubgroupSize as the shader runs. Either way rows are assumed to map
// to invocations tid = subgroup · size + invocation in subgroup, as every driver lays out a
// one-dimensional workgroup.
//
// INT8 (binding 4, as 16-byte words): activations quantized by quant.comp, per 32-element
// chunk 12 words {8 words of int8, d, d·Σq, 0, 0} = three aligned uvec4; DOT_EXT takes the
// 4×8-bit dot product instruction. Without INT8 the f32 activations (binding 0).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef SG_SHUFFLE
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#define BLOCK_VIEW 1
#define WVEC 1
#include "common.glsl"
#include "dequant.glsl"
#include "dot.glsl"

layout(constant_id = 1) const uint MR = 4u;
layout(constant_id = 2) const uint NR = 4u;
layout(constant_id = 3) const uint LPR = 32u;
layout(constant_id = 4) const uint SGS = 0u; /* the required subgroup size, or 0: unknown */

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 4) readonly buffer QABuf { uvec4 qa4[]; };

layout(push_constant) uniform P {
    uint K, N, M;
    uint a_off, a_stride, d_off, d_stride;
    uint w_off, w_row_bytes;
    float scale;
    uint qa_off, qa_stride; /* INT8: words (multiples of 4); a quantized row is qa_stride words */
    float wscale;           /* I2_S: the tensor scale */
    uint ks, ku;            /* K splits and units per split */
    uint ks_stride;         /* floats between the partial sums of two splits */
} p;

#ifdef WFLOAT
#define UE 32u
#define UC 1
/* Σ over chunk c of the weight elements in V × activation row `row` */
float cdot_u(uint row, uint c)
{
    uint ao = p.a_off + row * p.a_stride + 32u * c;
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
#if defined(WTYPE_F32)
        vec4 w = uintBitsToFloat(uvec4(V[4u * j], V[4u * j + 1u], V[4u * j + 2u], V[4u * j + 3u]));
#else
        uint lo = V[2u * j], hi = V[2u * j + 1u];
        vec4 w = vec4(h2f(lo & 0xffffu), h2f(lo >> 16u), h2f(hi & 0xffffu), h2f(hi >> 16u));
#endif
        uint i = ao + 4u * j;
        s += dot(w, vec4(a[i], a[i + 1u], a[i + 2u], a[i + 3u]));
    }
    return s;
}
#else
#define UE BE
#define UC BC
float cdot_q(uint q[8], vec2 fs, float fm, uint row, uint c)
{
#ifdef INT8
    uint o = (p.qa_off + row * p.qa_stride + 12u * c) >> 2u;
    uvec4 x0 = qa4[o], x1 = qa4[o + 1u], x2 = qa4[o + 2u];
    int s0 = hx_dot4(q[0], x0.x, 0), s1 = hx_dot4(q[4], x1.x, 0);
    s0 = hx_dot4(q[1], x0.y, s0);
    s0 = hx_dot4(q[2], x0.z, s0);
    s0 = hx_dot4(q[3], x0.w, s0);
    s1 = hx_dot4(q[5], x1.y, s1);
    s1 = hx_dot4(q[6], x1.z, s1);
    s1 = hx_dot4(q[7], x1.w, s1);
    return uintBitsToFloat(x2.x) * (fs.x * float(s0) + fs.y * float(s1)) +
           fm * uintBitsToFloat(x2.y);
#else
    uint ao = p.a_off + row * p.a_stride + 32u * c;
    float s0 = 0.0, s1 = 0.0, sx = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint i = ao + 4u * k;
        vec4 x = vec4(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
        float t = dot(vec4(i8x4(q[k])), x);
        if (k < 4u) s0 += t; else s1 += t;
#ifdef HAS_FM
        sx += (x.x + x.y) + (x.z + x.w);
#endif
    }
    return fs.x * s0 + fs.y * s1 + fm * sx;
#endif
}
#endif

shared float red[MR][WG];

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint tid = gl_LocalInvocationID.x;
    uint j = tid / LPR, t = tid % LPR;
    uint n = hx_group_index() * NR + j;
    uint ks = gl_WorkGroupID.y % p.ks, m0 = (gl_WorkGroupID.y / p.ks) * MR;
    if (m0 >= p.M) return;              /* uniform over the workgroup */
    uint mr = min(MR, p.M - m0);
    float acc[MR];
    [[unroll]] for (uint i = 0u; i < MR; i++) acc[i] = 0.0;
    uint u1 = min(p.K / UE, (ks + 1u) * p.ku);
    if (n < p.N) {
        uint rb = p.w_off + n * p.w_row_bytes;
        for (uint u = ks * p.ku + t; u < u1; u += LPR) {
            begin_block(rb + u * BB);
#ifdef WFLOAT
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) acc[i] += cdot_u(m0 + i, u);
#else
#if UC == 1 /* (an unrolled one-trip loop crashes the Debian 12 spirv-opt) */
            {
                uint cc = 0u;
#else
            [[unroll]] for (uint cc = 0u; cc < UC; cc++) {
#endif
                uint q[8];
                vec2 fs;
                float fm;
                chunk(cc, q, fs, fm);
                [[unroll]] for (uint i = 0u; i < MR; i++)
                    if (i < mr) acc[i] += cdot_q(q, fs, fm, m0 + i, u * UC + cc);
            }
#endif
        }
    }
    float sc = p.ks > 1u ? 1.0 : p.scale;
    uint dk = p.d_off + ks * p.ks_stride;
    uint sgs = SGS != 0u ? SGS : gl_SubgroupSize;
    if (LPR % sgs == 0u) {
        /* whole subgroups per row: row j's subgroups are j·spr .. j·spr + spr - 1 */
        uint spr = LPR / sgs;
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            float s = subgroupAdd(acc[i]);
            if (subgroupElect()) red[i][gl_SubgroupID] = s;
        }
        barrier();
        if (tid < MR * NR) {
            uint i = tid / NR, jj = tid % NR, nn = hx_group_index() * NR + jj;
            float s = red[i][jj * spr];
            for (uint k = 1u; k < spr; k++) s += red[i][jj * spr + k];
            if (i < mr && nn < p.N) d[dk + (m0 + i) * p.d_stride + nn] = s * sc;
        }
    }
#ifdef SG_SHUFFLE
    else if (sgs % LPR == 0u) {
        /* several whole rows per subgroup: invocation t adds t ^ h for h = LPR/2 .. 1, so
         * t = 0 sums as the shared tree does (s0 + s_h first) */
        [[unroll]] for (uint i = 0u; i < MR; i++)
            for (uint h = LPR / 2u; h > 0u; h >>= 1u) acc[i] += subgroupShuffleXor(acc[i], h);
        if (t == 0u && n < p.N)
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) d[dk + (m0 + i) * p.d_stride + n] = acc[i] * sc;
    }
#endif
    else {
        /* several rows per subgroup: a tree over the row's LPR invocations (a power of 2) */
        [[unroll]] for (uint i = 0u; i < MR; i++) red[i][tid] = acc[i];
        barrier();
        for (uint h = LPR / 2u; h > 0u; h >>= 1u) {
            if (t < h)
                [[unroll]] for (uint i = 0u; i < MR; i++) red[i][tid] += red[i][tid + h];
            barrier();
        }
        if (t == 0u && n < p.N)
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) d[dk + (m0 + i) * p.d_stride + n] = red[i][tid] * sc;
    }
}
