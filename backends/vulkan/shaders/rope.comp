#version 450
// rope.comp — rotary embedding per (head, row); NEOX pairs (x[i], x[i + n_rot/2]), else
// adjacent pairs (x[2i], x[2i+1]). theta = pos · theta_scale^i is built by repeated
// multiplication as ggml does (so results match the reference bit for bit in the angle),
// divided by the freq factor when one is bound (has_ff), times freq_scale. Dims ≥ n_rot are
// copied. dst may alias src: each thread reads its pair before writing it. Grid: (heads, rows).
//
// sin and cos take the angle reduced to [-pi, pi] first: a GPU's sin/cos lose absolute
// accuracy in proportion to |x| (on an NVIDIA H200, angles up to 40960 rad put the rotated
// values 0.8-1.1% of rms off the reference; lavapipe's are exact). k = round(theta / 2pi),
// then theta - k·2pi with 2pi split Cody-Waite style into C1 + C2 + C3, C1 and C2 of 8
// significant bits so k·C1 and k·C2 are exact for |k| < 2^16 (Vulkan does not promise a
// fused fma, so the reduction must not need one); `precise` keeps the order.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer FBuf { float ff[]; };
layout(std430, set = 0, binding = 2) buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer MBuf { int meta[]; };

layout(push_constant) uniform P {
    uint head_dim, n_rot, a_off, a_stride, d_off, d_stride, pos_off, ff_off, has_ff;
    float theta_scale, freq_scale;
} p;

void main()
{
    uint h = gl_WorkGroupID.x, r = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint ao = p.a_off + r * p.a_stride + h * p.head_dim;
    uint dof = p.d_off + r * p.d_stride + h * p.head_dim;
    float pos = float(meta[p.pos_off + r]);
    uint half_rot = p.n_rot / 2u;
    for (uint i = tid; i < half_rot; i += WG) {
        float theta = pos;
        for (uint k = 0u; k < i; k++) theta *= p.theta_scale;
        if (p.has_ff != 0u) theta /= ff[p.ff_off + i];
        theta *= p.freq_scale;
        precise float kq = round(theta * 0.15915494309189535);
        precise float tr = theta - kq * 6.28125;
        tr = tr - kq * 0.00193023681640625;
        tr = tr - kq * 5.0703631802269e-6;
        float c = cos(tr), s = sin(tr);
#ifdef NEOX
        uint i0 = i, i1 = i + half_rot;
#else
        uint i0 = 2u * i, i1 = 2u * i + 1u;
#endif
        float x0 = a[ao + i0], x1 = a[ao + i1];
        d[dof + i0] = x0 * c - x1 * s;
        d[dof + i1] = x0 * s + x1 * c;
    }
    for (uint i = p.n_rot + tid; i < p.head_dim; i += WG) d[dof + i] = a[ao + i];
}
