#version 450
// attn_flash.comp — prefill attention (the second half of ATTN) in flash-style tiles, f32.
// attn.comp runs one workgroup per (head, row) and so reads the whole context of K and V once
// per query row; this shader runs one workgroup of 128 invocations per (head, tile of BR batch
// rows) and stages keys and values in shared memory BC positions at a time, once for all the
// tile's rows. Same semantics as attn.comp: row r (query head h, KV head h / (n_head /
// n_head_kv)) attends to positions 0 .. pos[r] of cache rows seq[r]·n_ctx + t. A tile's rows
// may have any positions (the keys visited run to the largest; each row masks the positions
// past its own) and any sequences (one pass over the keys per distinct sequence in the tile,
// the other rows masked). Per row an online softmax: running max and sum in shared memory,
// the accumulators rescaled per tile.
// Layout: scores — invocation t takes key t % BC and rows t / BC + (128 / BC)·i; output —
// invocation t owns dim t % head_dim of rows t / head_dim + (128 / head_dim)·k, so head_dim
// must divide 128 (the host runs attn.comp otherwise). The host sets WG = 128.
// Shared memory: 26.4 KiB (HX_VK_FA_SHARED in vulkan-pick.h), within lavapipe's 32 KiB.
// Every loop inside the loop over key tiles has a constant trip count and is unrolled:
// llvmpipe (lavapipe) ends a shader's loops after 65535 iterations of all of them together
// (LP_MAX_TGSI_LOOP_ITERATIONS), so a loop over head_dim per tile would cut a context of a
// few thousand positions short; unrolled, only the tiles count (524,280 positions).
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

#define NT 128u  // invocations (WG)
#define BR 32u   // query rows per workgroup
#define BC 8u    // key positions per staged tile
#define HD 128u  // largest head_dim
#define ACC 32u  // accumulators per invocation: BR · HD / NT
#define SR 2u    // scores per invocation: BR · BC / NT
#define NEG -3.0e38

shared vec4 qs[BR][HD / 4u + 1u];  // +1: rows on different banks
shared vec4 ks[BC][HD / 4u + 1u];
shared float vs[BC][HD];
shared float ps[BR][BC + 1u];
shared float sm[BR], sl[BR], sf[BR];
shared int rp[BR], rs[BR];

void main()
{
    uint g = hx_group_index();
    uint h = g % p.n_head, r0 = (g / p.n_head) * BR, tid = gl_LocalInvocationID.x;
    if (r0 >= p.n_rows) return;  // the whole workgroup
    uint hd = p.head_dim, hd4 = hd / 4u, kvo = (h / (p.n_head / p.n_head_kv)) * hd;
    uint nrp = NT / hd, dcol = tid % hd, rph = tid / hd;
    uint sj = tid % BC, srow = tid / BC, srs = NT / BC;
    if (tid < BR) {
        bool in_ = r0 + tid < p.n_rows;
        rp[tid] = in_ ? meta[p.pos_off + r0 + tid] : -1;
        rs[tid] = in_ ? meta[p.seq_off + r0 + tid] : -1;
    }
    for (uint e = tid; e < BR * hd4; e += NT) {
        uint i = e / hd4, c = e % hd4, qo = p.q_off + (r0 + i) * p.q_stride + h * hd + 4u * c;
        qs[i][c] = r0 + i < p.n_rows ? vec4(q[qo], q[qo + 1u], q[qo + 2u], q[qo + 3u]) * p.scale
                                      : vec4(0.0);
    }
    barrier();
    int done = -1;  // passes run in increasing sequence id
    for (;;) {
        int s = 0x7fffffff, tmax = -1;
        for (uint i = 0u; i < BR; i++)
            if (rs[i] > done && rs[i] < s) s = rs[i];
        if (s == 0x7fffffff) break;  // every invocation sees the same shared state
        for (uint i = 0u; i < BR; i++)
            if (rs[i] == s && rp[i] > tmax) tmax = rp[i];
        done = s;
        if (tid < BR) {
            sm[tid] = NEG;
            sl[tid] = 0.0;
        }
        float acc[ACC];
        [[unroll]] for (uint k = 0u; k < ACC; k++) acc[k] = 0.0;
        uint row0 = uint(s) * p.n_ctx;
        for (int t0 = 0; t0 <= tmax; t0 += int(BC)) {
            [[unroll]] for (uint u = 0u; u < BC * HD / NT; u++) {
                uint e = tid + u * NT;
                if (e < BC * hd) {
                    uint j = e / hd, dd = e % hd;
                    int t = t0 + int(j);
                    bool in_ = t <= tmax;  // positions past the tile's last stay unread
                    uint co = (row0 + uint(t)) * p.c_stride + kvo + dd;
                    float kx = in_ ? kc[p.kc_off + co] : 0.0;
                    ks[j][dd / 4u][dd % 4u] = kx;
                    vs[j][dd] = in_ ? vc[p.vc_off + co] : 0.0;
                }
            }
            barrier();
            float sc[SR];
            [[unroll]] for (uint i = 0u; i < SR; i++) sc[i] = 0.0;
            [[unroll]] for (uint c = 0u; c < HD / 4u; c++) {
                if (c < hd4) {
                    vec4 kv = ks[sj][c];
                    [[unroll]] for (uint i = 0u; i < SR; i++) sc[i] += dot(qs[srow + srs * i][c], kv);
                }
            }
            [[unroll]] for (uint i = 0u; i < SR; i++) {
                uint row = srow + srs * i;
                ps[row][sj] = rs[row] == s && t0 + int(sj) <= rp[row] ? sc[i] : NEG;
            }
            barrier();
            if (tid < BR) {  // the row's running max and sum
                float mt = NEG;
                [[unroll]] for (uint j = 0u; j < BC; j++) mt = max(mt, ps[tid][j]);
                float m = sm[tid], mn = max(m, mt);
                if (mn == NEG) {  // a row of another sequence (or past the batch)
                    sf[tid] = 1.0;
                    [[unroll]] for (uint j = 0u; j < BC; j++) ps[tid][j] = 0.0;
                } else {
                    float l = 0.0;
                    [[unroll]] for (uint j = 0u; j < BC; j++) {
                        float e = ps[tid][j] == NEG ? 0.0 : exp(ps[tid][j] - mn);
                        ps[tid][j] = e;
                        l += e;
                    }
                    float f = m == NEG ? 0.0 : exp(m - mn);
                    sl[tid] = sl[tid] * f + l;
                    sm[tid] = mn;
                    sf[tid] = f;
                }
            }
            barrier();
            float v[BC];
            [[unroll]] for (uint j = 0u; j < BC; j++) v[j] = vs[j][dcol];
            [[unroll]] for (uint k = 0u; k < ACC; k++) {
                uint row = rph + nrp * k;
                if (row < BR) {
                    float a = 0.0;
                    [[unroll]] for (uint j = 0u; j < BC; j++) a += ps[row][j] * v[j];
                    acc[k] = acc[k] * sf[row] + a;
                }
            }
            barrier();  // ks, vs, ps and the stats are rewritten next tile
        }
        for (uint k = 0u; k < ACC; k++) {
            uint row = rph + nrp * k;
            if (row >= BR) break;
            if (rs[row] == s) d[p.d_off + (r0 + row) * p.d_stride + h * hd + dcol] = acc[k] / sl[row];
        }
        barrier();  // sm, sl are reset by the next pass
    }
}
