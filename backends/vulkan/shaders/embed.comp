#version 450
// embed.comp — dst[r] = dequant(W row tokens[r]). The weight may be bound in row chunks
// (a binding is at most maxStorageBufferRange bytes): rows [row0, row0 + nw) are bound, and
// rows whose token lies elsewhere are left to another dispatch. One invocation per 32-element
// chunk of a row. Grid: (ceil(K / 32 / WG), rows).
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer MBuf { int meta[]; };

layout(push_constant) uniform P {
    uint K, n_rows, row0, nw;
    uint w_off, w_row_bytes, d_off, d_stride;
    uint tok_off;
    float wscale; /* I2_S: the tensor scale */
} p;

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint r = gl_WorkGroupID.y;
    uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    uint tok = uint(meta[p.tok_off + r]);
    if (32u * c >= p.K || tok < p.row0 || tok >= p.row0 + p.nw) return;
    uint rb = p.w_off + (tok - p.row0) * p.w_row_bytes;
    uint o = p.d_off + r * p.d_stride + 32u * c;
#ifdef WFLOAT
    for (uint e = 32u * c; e < min(p.K, 32u * c + 32u); e++) d[o + e - 32u * c] = wel(rb, e);
#else
    uint b = c / BC;
    begin_block(rb + b * BB);
    uint q[8];
    vec2 fs;
    float fm;
    chunk(c - b * BC, q, fs, fm);
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        vec4 w = vec4(i8x4(q[k])) * (k < 4u ? fs.x : fs.y) + fm;
        d[o + 4u * k] = w.x;
        d[o + 4u * k + 1u] = w.y;
        d[o + 4u * k + 2u] = w.z;
        d[o + 4u * k + 3u] = w.w;
    }
#endif
}
