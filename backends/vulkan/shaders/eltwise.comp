#version 450
// eltwise.comp — SWIGLU (silu(a)·b), RELU2_GLU (max(a,0)²·b), ADD (a + b) over (rows, cols);
// dst may alias a or b. Grid: (ceil(cols / WG), rows).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };

layout(push_constant) uniform P {
    uint n_cols, a_off, a_stride, b_off, b_stride, d_off, d_stride;
} p;

void main()
{
    uint r = gl_WorkGroupID.y, c = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    if (c >= p.n_cols) return;
    float x = a[p.a_off + r * p.a_stride + c];
    float y = b[p.b_off + r * p.b_stride + c];
#if defined(OP_SWIGLU)
    d[p.d_off + r * p.d_stride + c] = x / (1.0 + exp(-x)) * y;
#elif defined(OP_RELU2)
    float t = max(x, 0.0);
    d[p.d_off + r * p.d_stride + c] = t * t * y;
#else
    d[p.d_off + r * p.d_stride + c] = x + y;
#endif
}
