#version 450
// actcopy.comp — activation rows (M, K) f32 copied into the matmul scratch buffer, row r at
// word qa_off + r·qa_stride (qa_stride = K rounded up to 4, padded with zeros), so the lane
// layout GEMV of the float weight types can fetch them as 16-byte texels (binding 6), the
// same for every invocation of a subgroup. Grid: (ceil(qa_stride / WG), M).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 4) writeonly buffer QABuf { uint qa[]; };

layout(push_constant) uniform P {
    uint K, a_off, a_stride, qa_off, qa_stride;
} p;

void main()
{
    uint e = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x, r = gl_WorkGroupID.y;
    if (e >= p.qa_stride) return;
    qa[p.qa_off + r * p.qa_stride + e] = e < p.K ? floatBitsToUint(a[p.a_off + r * p.a_stride + e]) : 0u;
}
