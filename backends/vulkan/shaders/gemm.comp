#version 450
// gemm.comp — tiled prefill GEMM: dst (M, N) = scale · A (M, K) · Wᵀ, W (N, K) in GGUF blocks.
// A workgroup computes a BM × BN tile of dst (BM activation rows × BN weight rows); K is
// walked in steps of 32 (one chunk): the activation slice is staged into shared memory and
// BN weight chunks are decoded (dequant.glsl) into shared memory as f32, then every
// invocation accumulates its TM × TN outputs from registers. Output (m, n) of the tile is
// owned by invocation (n % (BN/TN), m % (BM/TM)), so neighbouring invocations read
// neighbouring weight columns of shared memory and the same activation value.
// Specialization constants: 0 WG (= BM·BN / (TM·TN)), 1 BM, 2 BN, 3 TM, 4 TN.
// Grid: x (folded with z) over ceil(N / BN), y over ceil(M / BM).
#include "common.glsl"
#include "dequant.glsl"

layout(constant_id = 1) const uint BM = 64u;
layout(constant_id = 2) const uint BN = 64u;
layout(constant_id = 3) const uint TM = 4u;
layout(constant_id = 4) const uint TN = 4u;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d[]; };

layout(push_constant) uniform P {
    uint K, N, M;
    uint a_off, a_stride, d_off, d_stride;
    uint w_off, w_row_bytes;
    float scale;
    uint pad0, pad1; /* mmv.comp's qa_off, qa_stride: the push constants are shared */
    float wscale;    /* I2_S: the tensor scale */
} p;

shared float As[32][BM];
shared float Ws[32][BN];

void main()
{
#ifdef WTYPE_I2_S
    hx_wscale = p.wscale;
#endif
    uint tid = gl_LocalInvocationID.x;
    uint nx = BN / TN, tx = tid % nx, ty = tid / nx;
    uint n0 = hx_group_index() * BN, m0 = gl_WorkGroupID.y * BM;
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;
    uint nc = (p.K + 31u) / 32u;
    for (uint c = 0u; c < nc; c++) {
        /* stage A[m0 .. m0+BM)[32c .. 32c+32) */
        for (uint idx = tid; idx < 32u * BM; idx += WG) {
            uint r = idx / 32u, k = idx % 32u, e = 32u * c + k;
            As[k][r] = (m0 + r < p.M && e < p.K) ? a[p.a_off + (m0 + r) * p.a_stride + e] : 0.0;
        }
        /* decode chunk c of weight rows n0 .. n0+BN */
        for (uint r = tid; r < BN; r += WG) {
            uint n = n0 + r;
            uint rb = p.w_off + n * p.w_row_bytes;
#ifdef WFLOAT
            for (uint k = 0u; k < 32u; k++) {
                uint e = 32u * c + k;
                Ws[k][r] = (n < p.N && e < p.K) ? wel(rb, e) : 0.0;
            }
#else
            if (n < p.N) {
                uint b = c / BC;
                begin_block(rb + b * BB);
                uint q[8];
                vec2 fs;
                float fm;
                chunk(c - b * BC, q, fs, fm);
                [[unroll]] for (uint k = 0u; k < 8u; k++) {
                    vec4 w = vec4(i8x4(q[k])) * (k < 4u ? fs.x : fs.y) + fm;
                    Ws[4u * k][r] = w.x;
                    Ws[4u * k + 1u][r] = w.y;
                    Ws[4u * k + 2u][r] = w.z;
                    Ws[4u * k + 3u][r] = w.w;
                }
            } else {
                for (uint k = 0u; k < 32u; k++) Ws[k][r] = 0.0;
            }
#endif
        }
        barrier();
        for (uint k = 0u; k < 32u; k++) {
            float av[TM], wv[TN];
            [[unroll]] for (uint i = 0u; i < TM; i++) av[i] = As[k][ty + i * (BM / TM)];
            [[unroll]] for (uint j = 0u; j < TN; j++) wv[j] = Ws[k][tx + j * nx];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] += av[i] * wv[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint m = m0 + ty + i * (BM / TM);
        if (m >= p.M) continue;
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint n = n0 + tx + j * nx;
            if (n < p.N) d[p.d_off + m * p.d_stride + n] = acc[i][j] * p.scale;
        }
    }
}
