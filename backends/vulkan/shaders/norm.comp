#version 450
// norm.comp — RMS norm per group of g consecutive columns: one workgroup per (group, row);
// dst = x · 1/sqrt(Σx²/g + eps) · gain[c % g]. Sums are reduced per subgroup, then across
// subgroups in shared memory. Grid: (d / g, rows).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer GBuf { float gain[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };

layout(push_constant) uniform P {
    uint g, a_off, a_stride, d_off, d_stride, gain_off;
    float eps;
} p;

shared float red[32];
shared float total;

void main()
{
    uint r = gl_WorkGroupID.y, c0 = gl_WorkGroupID.x * p.g, tid = gl_LocalInvocationID.x;
    uint ao = p.a_off + r * p.a_stride + c0;
    float s = 0.0;
    for (uint c = tid; c < p.g; c += WG) s += a[ao + c] * a[ao + c];
    s = subgroupAdd(s);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    if (tid == 0u) {
        float t = 0.0;
        for (uint k = 0u; k < gl_NumSubgroups; k++) t += red[k];
        total = t;
    }
    barrier();
    float sc = 1.0 / sqrt(total / float(p.g) + p.eps);
    uint dof = p.d_off + r * p.d_stride + c0;
    for (uint c = tid; c < p.g; c += WG) d[dof + c] = a[ao + c] * sc * gain[p.gain_off + c];
}
