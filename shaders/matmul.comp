#version 450
// matmul.comp — dst (M, N) = scale · A (M, K) · Wᵀ, W (N, K) in GGUF blocks read in place.
// One workgroup computes NR weight rows against up to MR activation rows, so each weight byte
// is decoded once per MR rows (decode: M = 1). Threads of a workgroup walk K in 4-element
// groups (consecutive threads → consecutive bytes); partial sums are reduced with subgroup
// adds, then across subgroups in shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "dequant.glsl"

#define MR 4
#define NR 2

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };

layout(push_constant) uniform P {
    uint K, N, M;
    uint a_off, a_stride, d_off, d_stride;
    uint w_off, w_row_bytes;
    float scale;
} p;

shared float red[MR * NR][32];

void main()
{
    uint g = hx_group_index();
    uint ngn = (p.N + NR - 1u) / NR;
    uint n0 = (g % ngn) * NR;
    uint m0 = (g / ngn) * MR;
    if (m0 >= p.M) return;
    uint tid = gl_LocalInvocationID.x;

    float acc[MR][NR];
    for (uint i = 0u; i < MR; i++)
        for (uint j = 0u; j < NR; j++) acc[i][j] = 0.0;

    uint mr = min(uint(MR), p.M - m0);
    uint nr = min(uint(NR), p.N - n0);
    uint K4 = p.K & ~3u;
    for (uint e = 4u * tid; e < K4; e += 4u * WG) {
        vec4 w[NR];
        for (uint j = 0u; j < NR; j++)
            w[j] = j < nr ? dq4(p.w_off + (n0 + j) * p.w_row_bytes, e) : vec4(0.0);
        for (uint i = 0u; i < MR; i++) {
            if (i >= mr) break;
            uint ao = p.a_off + (m0 + i) * p.a_stride + e;
            vec4 x = vec4(a[ao], a[ao + 1u], a[ao + 2u], a[ao + 3u]);
            for (uint j = 0u; j < NR; j++) acc[i][j] += dot(x, w[j]);
        }
    }
#if BLOCK_ELEMS == 1
    for (uint e = K4 + tid; e < p.K; e += WG) {
        for (uint j = 0u; j < nr; j++) {
            float w = dq1(p.w_off + (n0 + j) * p.w_row_bytes, e);
            for (uint i = 0u; i < mr; i++) acc[i][j] += a[p.a_off + (m0 + i) * p.a_stride + e] * w;
        }
    }
#endif
    for (uint i = 0u; i < MR; i++)
        for (uint j = 0u; j < NR; j++) {
            float s = subgroupAdd(acc[i][j]);
            if (subgroupElect()) red[i * NR + j][gl_SubgroupID] = s;
        }
    barrier();
    if (tid < MR * NR) {
        uint i = tid / NR, j = tid % NR;
        float s = 0.0;
        for (uint k = 0u; k < gl_NumSubgroups; k++) s += red[tid][k];
        if (i < mr && j < nr) d[p.d_off + (m0 + i) * p.d_stride + n0 + j] = s * p.scale;
    }
}
