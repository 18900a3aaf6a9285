#version 450
// attn.comp — causal GQA attention over the device KV cache, the second half of ATTN.
// One workgroup per (head, row). Keys are visited in tiles of WG positions: each thread scores
// one position (q staged in shared memory, pre-scaled), then the tile is folded into a running
// softmax (online max / sum, as flash attention does) and every thread accumulates up to 4
// output dims (head_dim ≤ 4·WG) with coalesced reads of V. kvh = h / (n_head / n_head_kv).
// The loops inside the loop over tiles go 8 elements an iteration (unrolled, in the same order)
// or have constant trip counts: lavapipe ends a shader's loops after 65,535 iterations of all
// of them together, which one iteration per element reached at about 10,000 positions
// (docs/vulkan.md); now it is about 100,000.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer QBuf { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer KCBuf { float kc[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer MBuf { int meta[]; };
layout(std430, set = 0, binding = 4) readonly buffer VCBuf { float vc[]; };

layout(push_constant) uniform P {
    uint n_head, n_head_kv, head_dim, n_ctx, c_stride;
    uint q_off, q_stride, d_off, d_stride, kc_off, vc_off, pos_off, seq_off, n_rows;
    float scale;
} p;

#define MAXWG 256
#define MAXHD 256
shared float qs[MAXHD];
shared float sc[MAXWG];
shared float red[32];

float wg_max(float x)
{
    x = subgroupMax(x);
    if (subgroupElect()) red[gl_SubgroupID] = x;
    barrier();
    float r = red[0];
    [[unroll]] for (uint k = 1u; k < 32u; k++)
        if (k < gl_NumSubgroups) r = max(r, red[k]);
    barrier();
    return r;
}

float wg_sum(float x)
{
    x = subgroupAdd(x);
    if (subgroupElect()) red[gl_SubgroupID] = x;
    barrier();
    float r = 0.0;
    [[unroll]] for (uint k = 0u; k < 32u; k++)
        if (k < gl_NumSubgroups) r += red[k];
    barrier();
    return r;
}

void main()
{
    uint g = hx_group_index();
    uint h = g % p.n_head, r = g / p.n_head, tid = gl_LocalInvocationID.x;
    if (r >= p.n_rows) return;
    uint hd = p.head_dim, kv_dim = p.c_stride;
    uint kvh = h / (p.n_head / p.n_head_kv);
    uint qo = p.q_off + r * p.q_stride + h * hd;
    for (uint i = tid; i < hd; i += WG) qs[i] = q[qo + i] * p.scale;
    barrier();
    uint base = uint(meta[p.seq_off + r]) * p.n_ctx;
    uint n_t = uint(meta[p.pos_off + r]) + 1u;
    uint kvo = kvh * hd;

    float m = -1e30, l = 0.0;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    for (uint t0 = 0u; t0 < n_t; t0 += WG) {
        uint t = t0 + tid;
        float s = -1e30;
        if (t < n_t) {
            uint ko = p.kc_off + (base + t) * kv_dim + kvo;
            s = 0.0;
            uint i = 0u;
            for (; i + 8u <= hd; i += 8u)
                [[unroll]] for (uint u = 0u; u < 8u; u++) s += qs[i + u] * kc[ko + i + u];
            for (; i < hd; i++) s += qs[i] * kc[ko + i];
        }
        float m_new = max(m, wg_max(s));
        float f = exp(m - m_new);
        float pt = t < n_t ? exp(s - m_new) : 0.0;
        sc[tid] = pt;
        l = l * f + wg_sum(pt);   /* wg_sum's barriers also publish sc[] */
        uint nt = min(uint(WG), n_t - t0);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint dd = tid + j * WG;
            if (dd >= hd) break;
            float a = acc[j] * f;
            uint vo = p.vc_off + (base + t0) * kv_dim + kvo + dd;
            uint tt = 0u;
            for (; tt + 8u <= nt; tt += 8u)
                [[unroll]] for (uint u = 0u; u < 8u; u++)
                    a += sc[tt + u] * vc[vo + (tt + u) * kv_dim];
            for (; tt < nt; tt++) a += sc[tt] * vc[vo + tt * kv_dim];
            acc[j] = a;
        }
        m = m_new;
        barrier();
    }
    uint dof = p.d_off + r * p.d_stride + h * hd;
    for (uint j = 0u; j < 4u; j++) {
        uint dd = tid + j * WG;
        if (dd < hd) d[dof + dd] = acc[j] / l;
    }
}
