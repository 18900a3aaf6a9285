#version 450
// mmv.comp — dst (M, N) = scale · A (M, K) · Wᵀ for small M (decode), W (N, K) in GGUF blocks
// read in place (dequant.glsl). Each workgroup pass covers MR activation rows, so a weight
// byte is decoded once per MR rows. Variants (-D):
//   LANE   one invocation per weight row walking the whole of K, the block loaded once into
//          registers; activation addresses are then the same in every invocation of a
//          subgroup (uniform loads). For CPU-type devices (lavapipe), where an invocation is
//          a SIMD lane and every lane-varying load is a scalar load per lane.
//   (none) NR weight rows per workgroup of WG invocations, WG/NR invocations per row taking
//          32-element chunks in turn (neighbouring invocations read neighbouring blocks),
//          partial sums reduced through subgroups and shared memory. For GPUs.
//   INT8   the activations were quantized by quant.comp (binding 4, and binding 6 as texels
//          in the lane layout: per 32-element chunk {8 words of int8, d, d·Σq, 0, 0});
//          chunk dot products are integer. With DOT_EXT the
//          4×8-bit dot product instruction (SPV_KHR_integer_dot_product) is used, else it
//          is spelled out in 32-bit integer arithmetic.
// Specialization constants: 0 WG, 1 MR, 2 NR. Grid: x (folded with z) over row groups,
// y over passes of MR activation rows.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_ballot : require
#ifdef LANE
#define BLOCK_VIEW 1
#endif
#include "common.glsl"
#include "dequant.glsl"
#include "dot.glsl"

layout(constant_id = 1) const uint MR = 4u;
layout(constant_id = 2) const uint NR = 2u;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 4) readonly buffer QABuf { uint qa[]; };

layout(push_constant) uniform P {
    uint K, N, M;
    uint a_off, a_stride, d_off, d_stride;
    uint w_off, w_row_bytes;
    float scale;
    uint qa_off, qa_stride; /* INT8: words; a row of quantized activations is qa_stride words */
    float wscale;           /* I2_S: the tensor scale */
} p;

#ifdef WFLOAT
/* Σ W[row rb][e]·A[row][e] over the 32-element chunk c (e < K) */
float cdot_f(uint rb, uint row, uint c)
{
    uint ao = p.a_off + row * p.a_stride + 32u * c;
    float s = 0.0;
    if (32u * c + 32u <= p.K) {
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            vec4 x = vec4(a[ao + 4u * j], a[ao + 4u * j + 1u], a[ao + 4u * j + 2u], a[ao + 4u * j + 3u]);
            s += dot(wel4(rb, 8u * c + j), x);
        }
    } else {
        for (uint e = 32u * c; e < p.K; e++) s += wel(rb, e) * a[ao + e - 32u * c];
    }
    return s;
}
#else
float cdot_q(uint q[8], vec2 fs, float fm, uint row, uint c)
{
#ifdef INT8
    uint o = p.qa_off + row * p.qa_stride + 12u * c;
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        s0 = hx_dot4(q[k], qa[o + k], s0);
        s1 = hx_dot4(q[k + 4u], qa[o + 4u + k], s1);
    }
    return uintBitsToFloat(qa[o + 8u]) * (fs.x * float(s0) + fs.y * float(s1)) +
           fm * uintBitsToFloat(qa[o + 9u]);
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

#ifdef LANE
/* Lane layout: every invocation of a subgroup needs the same activation chunk, but only an
 * address built from constants and push constants loads once for the subgroup on lavapipe.
 * int8 chunks are fetched as texels (a 16-byte load each); f32 ones are loaded a quarter
 * per invocation (element l, l+8, ...) and spread by broadcasts (the host uses this layout
 * only where subgroups have at least 8 invocations). */
#ifdef INT8
/* the int8 chunks as 16-byte texels (binding 6, the whole scratch buffer) */
layout(set = 0, binding = 6) uniform usamplerBuffer qtex;
float cdot_lane(uint q[8], vec2 fs, float fm, uint row, uint c)
{
    int t = int((p.qa_off + row * p.qa_stride + 12u * c) >> 2u);
    uvec4 x0 = texelFetch(qtex, t), x1 = texelFetch(qtex, t + 1), x2 = texelFetch(qtex, t + 2);
    int s0 = hx_dot4(q[0], x0.x, 0), s1 = hx_dot4(q[4], x1.x, 0);
    s0 = hx_dot4(q[1], x0.y, s0);
    s0 = hx_dot4(q[2], x0.z, s0);
    s0 = hx_dot4(q[3], x0.w, s0);
    s1 = hx_dot4(q[5], x1.y, s1);
    s1 = hx_dot4(q[6], x1.z, s1);
    s1 = hx_dot4(q[7], x1.w, s1);
    return uintBitsToFloat(x2.x) * (fs.x * float(s0) + fs.y * float(s1)) + fm * uintBitsToFloat(x2.y);
}
#endif
/* elements 4k..4k+3 of the chunk held in v[] (element e in lane e % 8 of v[e / 8]) */
#define HX_X1(v, k, i) subgroupBroadcast(v[(k) >> 1], ((k) & 1u) * 4u + (i))
#define HX_X4(v, k) vec4(HX_X1(v, k, 0u), HX_X1(v, k, 1u), HX_X1(v, k, 2u), HX_X1(v, k, 3u))
#if !defined(INT8) && !defined(WFLOAT)
float cdot_lane(uint q[8], vec2 fs, float fm, uint row, uint c)
{
    uint ao = p.a_off + row * p.a_stride + 32u * c + (gl_SubgroupInvocationID & 7u);
    float v[4] = float[4](a[ao], a[ao + 8u], a[ao + 16u], a[ao + 24u]);
    float s0 = 0.0, s1 = 0.0, sx = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        vec4 x = HX_X4(v, k);
        float t = dot(vec4(i8x4(q[k])), x);
        if (k < 4u) s0 += t; else s1 += t;
#ifdef HAS_FM
        sx += (x.x + x.y) + (x.z + x.w);
#endif
    }
    return fs.x * s0 + fs.y * s1 + fm * sx;
}
#endif

#ifdef WFLOAT
/* the f32 activations as staged by actcopy.comp: 16-byte texels (binding 6) */
layout(set = 0, binding = 6) uniform usamplerBuffer xtex;
/* Σ over the full chunk c of the weight elements in V (begin_block) × activation row `row` */
float cdot_f_view(uint row, uint c)
{
    int t = int((p.qa_off + row * p.qa_stride + 32u * c) >> 2u);
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
#if defined(WTYPE_F32)
        vec4 w = uintBitsToFloat(uvec4(V[4u * j], V[4u * j + 1u], V[4u * j + 2u], V[4u * j + 3u]));
#else
        uint lo = V[2u * j], hi = V[2u * j + 1u];
        vec4 w = vec4(h2f(lo & 0xffffu), h2f(lo >> 16u), h2f(hi & 0xffffu), h2f(hi >> 16u));
#endif
        s += dot(w, uintBitsToFloat(texelFetch(xtex, t + int(j))));
    }
    return s;
}
#endif

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint n = hx_group_index() * WG + gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * MR;
    if (m0 >= p.M) return;              /* uniform */
    bool live = n < p.N;                /* others still load and broadcast, never store */
    uint mr = min(MR, p.M - m0);
    float acc[MR];
    [[unroll]] for (uint i = 0u; i < MR; i++) acc[i] = 0.0;
    uint rb = p.w_off + min(n, p.N - 1u) * p.w_row_bytes;
#ifdef WFLOAT
    /* full chunks through the texel view, decoded once for every activation row; the tail
     * (K % 32) from the storage buffer */
    uint nfull = p.K / 32u;
    for (uint c = 0u; c < nfull; c++) {
        begin_block(rb + BB * c);
        [[unroll]] for (uint i = 0u; i < MR; i++)
            if (i < mr) acc[i] += cdot_f_view(m0 + i, c);
    }
    if (32u * nfull < p.K)
        [[unroll]] for (uint i = 0u; i < MR; i++)
            if (i < mr) acc[i] += cdot_f(rb, m0 + i, nfull);
#else
    uint nb = p.K / BE;
    for (uint b = 0u; b < nb; b++) {
        begin_block(rb + b * BB);
#if BC == 1 /* (an unrolled one-trip loop here crashes the Debian 12 spirv-opt) */
        {
            uint cc = 0u;
#else
        [[unroll]] for (uint cc = 0u; cc < BC; cc++) {
#endif
            uint q[8];
            vec2 fs;
            float fm;
            chunk(cc, q, fs, fm);
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) acc[i] += cdot_lane(q, fs, fm, m0 + i, b * BC + cc);
        }
    }
#endif
    if (!live) return;
    [[unroll]] for (uint i = 0u; i < MR; i++)
        if (i < mr) d[p.d_off + (m0 + i) * p.d_stride + n] = acc[i] * p.scale;
}
#else
shared float red[MR * NR][64];
shared float part[MR][WG];

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint tid = gl_LocalInvocationID.x;
    uint tpr = WG / NR;                 /* invocations per weight row */
    uint j = tid / tpr, t = tid % tpr;
    uint n = hx_group_index() * NR + j;
    uint m0 = gl_WorkGroupID.y * MR;
    if (m0 >= p.M) return;              /* uniform over the workgroup */
    uint mr = min(MR, p.M - m0);
    float acc[MR];
    [[unroll]] for (uint i = 0u; i < MR; i++) acc[i] = 0.0;
    if (n < p.N) {
        uint rb = p.w_off + n * p.w_row_bytes;
#ifdef WFLOAT
        uint nc = (p.K + 31u) / 32u;
        for (uint c = t; c < nc; c += tpr)
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) acc[i] += cdot_f(rb, m0 + i, c);
#else
        uint nc = p.K / 32u;
        for (uint c = t; c < nc; c += tpr) {
            uint b = c / BC;
            begin_block(rb + b * BB);
            uint q[8];
            vec2 fs;
            float fm;
            chunk(c - b * BC, q, fs, fm);
            [[unroll]] for (uint i = 0u; i < MR; i++)
                if (i < mr) acc[i] += cdot_q(q, fs, fm, m0 + i, c);
        }
#endif
    }
    /* Row j's partial sums live in invocations [j·tpr, (j+1)·tpr). When subgroups tile
     * that range (the usual case) reduce per subgroup; otherwise through shared memory. */
    uint sgs = gl_SubgroupSize;
    if (tpr % sgs == 0u && gl_NumSubgroups <= 64u) {
        uint spr = tpr / sgs;
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            float s = subgroupAdd(acc[i]);
            if (subgroupElect()) red[i * NR + j][gl_SubgroupID % spr] = s;
        }
        barrier();
        if (tid < MR * NR) {
            uint i = tid / NR, jj = tid % NR, nn = hx_group_index() * NR + jj;
            float s = 0.0;
            for (uint k = 0u; k < spr; k++) s += red[tid][k];
            if (i < mr && nn < p.N) d[p.d_off + (m0 + i) * p.d_stride + nn] = s * p.scale;
        }
    } else {
        [[unroll]] for (uint i = 0u; i < MR; i++) part[i][tid] = acc[i];
        barrier();
        if (tid < MR * NR) {
            uint i = tid / NR, jj = tid % NR, nn = hx_group_index() * NR + jj;
            float s = 0.0;
            for (uint k = 0u; k < tpr; k++) s += part[i][jj * tpr + k];
            if (i < mr && nn < p.N) d[p.d_off + (m0 + i) * p.d_stride + nn] = s * p.scale;
        }
    }
}
#endif
