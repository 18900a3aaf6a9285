#version 450
// embed.comp — dst[r] = dequant(W row tokens[r]). The weight may be bound in row chunks
// (a binding is at most maxStorageBufferRange bytes): rows [row0, row0 + nw) are bound, and
// rows whose token lies elsewhere are left to another dispatch. Grid: (K / (4·WG), rows).
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer MBuf { int meta[]; };

layout(push_constant) uniform P {
    uint K, n_rows, row0, nw;
    uint w_off, w_row_bytes, d_off, d_stride;
    uint tok_off;
} p;

void main()
{
    uint r = gl_WorkGroupID.y;
    uint tok = uint(meta[p.tok_off + r]);
    if (tok < p.row0 || tok >= p.row0 + p.nw) return;
    uint rb = p.w_off + (tok - p.row0) * p.w_row_bytes;
    uint e = 4u * (gl_WorkGroupID.x * WG + gl_LocalInvocationID.x);
    uint o = p.d_off + r * p.d_stride + e;
    if (e + 3u < p.K) {
        vec4 v = dq4(rb, e);
        d[o] = v.x;
        d[o + 1u] = v.y;
        d[o + 2u] = v.z;
        d[o + 3u] = v.w;
    } else {
        for (uint k = 0u; e + k < p.K; k++) d[o + k] = dq1(rb, e + k);
    }
}
