#version 450
// quant.comp — activation rows (M, K) f32 → int8 chunks for the INT8 matmul variants. Each
// 32-element chunk c of row r becomes 12 words (three 16-byte texels) at
// qa[qa_off + r·qa_stride + 12c]: {q packed 4 per word (8 words), d, d·Σq, 0, 0},
// q = clamp(roundEven(x / d), ±127), d = amax / 127 where amax
// is taken over the group of `group` chunks holding c (1 for Q8_0-style weights, 4 for Q1_0,
// 8 for the ternary types: the CPU backend's activation blocks, so both round alike).
// One invocation per chunk. Grid: (ceil(K / 32 / WG), M).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 4) writeonly buffer QABuf { uint qa[]; };

layout(push_constant) uniform P {
    uint n_chunks, a_off, a_stride, qa_off, qa_stride, group;
} p;

void main()
{
    uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x, r = gl_WorkGroupID.y;
    if (c >= p.n_chunks) return;
    uint ar = p.a_off + r * p.a_stride;
    uint g0 = c - c % p.group;
    float amax = 0.0;
    for (uint e = 32u * g0; e < 32u * (g0 + p.group); e++) amax = max(amax, abs(a[ar + e]));
    float dd = amax / 127.0, id = dd > 0.0 ? 1.0 / dd : 0.0;
    uint o = p.qa_off + r * p.qa_stride + 12u * c;
    int sum = 0;
    for (uint k = 0u; k < 8u; k++) {
        uint w = 0u;
        for (uint i = 0u; i < 4u; i++) {
            int q = int(clamp(roundEven(a[ar + 32u * c + 4u * k + i] * id), -127.0, 127.0));
            sum += q;
            w |= (uint(q) & 255u) << (8u * i);
        }
        qa[o + k] = w;
    }
    qa[o + 8u] = floatBitsToUint(dd);
    qa[o + 9u] = floatBitsToUint(dd * float(sum));
    qa[o + 10u] = 0u;
    qa[o + 11u] = 0u;
}
