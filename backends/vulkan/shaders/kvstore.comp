#version 450
// kvstore.comp — the first half of ATTN: k_cache[seq·n_ctx + pos] = k[r], same for v.
// Grid: (ceil(kv_dim / WG), rows).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer KBuf { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer VBuf { float v[]; };
layout(std430, set = 0, binding = 2) writeonly buffer KCBuf { float kc[]; };
layout(std430, set = 0, binding = 3) readonly buffer MBuf { int meta[]; };
layout(std430, set = 0, binding = 4) writeonly buffer VCBuf { float vc[]; };

layout(push_constant) uniform P {
    uint kv_dim, c_stride, n_ctx, k_off, k_stride, v_off, v_stride, kc_off, vc_off, pos_off, seq_off;
} p;

void main()
{
    uint r = gl_WorkGroupID.y, c = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    if (c >= p.kv_dim) return;
    uint row = uint(meta[p.seq_off + r]) * p.n_ctx + uint(meta[p.pos_off + r]);
    kc[p.kc_off + row * p.c_stride + c] = k[p.k_off + r * p.k_stride + c];
    vc[p.vc_off + row * p.c_stride + c] = v[p.v_off + r * p.v_stride + c];
}
