#version 450
// mmv_combine.comp — the second pass of a split-K GEMV (mmvw.comp with KS > 1): dst[m][n] =
// scale · Σ over the KS splits of the partial sums, in split order. The partials are in the
// scratch buffer (binding 4), split ks of row m at part_off + ks · ks_stride + m · N + n.
// Grid: x (folded with z) over N in workgroups of WG, y over the M rows.
#include "common.glsl"

layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 4) readonly buffer PBuf { float part[]; };

layout(push_constant) uniform P {
    uint N, ks, part_off, ks_stride, d_off, d_stride;
    float scale;
} p;

void main()
{
    uint n = hx_group_index() * WG + gl_LocalInvocationID.x, m = gl_WorkGroupID.y;
    if (n >= p.N) return;
    uint o = p.part_off + m * p.N + n;
    float s = part[o];
    for (uint k = 1u; k < p.ks; k++) s += part[o + k * p.ks_stride];
    d[p.d_off + m * p.d_stride + n] = s * p.scale;
}
