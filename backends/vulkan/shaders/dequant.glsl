// dequant.glsl — reading GGUF weight blocks (formats.md §3) straight from the uploaded bytes.
// Included with exactly one WTYPE_* defined. The weight is binding 1, read as 32-bit words
// (one load per 4 bytes; blocks are only 2-byte aligned: a Q8_0 block is 34 bytes, so a
// 4-byte window at an even offset is funnel-shifted out of two words).
//
// Quantized types are decoded in chunks of 32 consecutive elements (the unit the activation
// quantizer uses too): chunk(cc, q, fs, fm) gives chunk cc of the current block as eight
// words of packed signed 8-bit codes q (element 4k+i is byte i of q[k]) and the affine map
//     w[e] = fs[e / 16] · q[e] + fm
// so a dot product with x is fs.x·Σ₀..₁₅ q·x + fs.y·Σ₁₆..₃₁ q·x + fm·Σx — integer dot
// products on quantized activations, or floats. Only Q6_K has two scales per chunk.
//
// begin_block(s) selects the block at byte s. With BLOCK_VIEW defined (the lane layout of
// mmv.comp, where one invocation walks a whole row) it loads the block once into registers,
// aligned to its first byte, and every chunk of it is decoded from there; otherwise rd()
// reads the buffer directly (one invocation per chunk: GPU layouts, embed).
// Words past a block's end may be read (at most 4 bytes): weight bindings carry 16 bytes of
// slack (vulkan-mem.c).
#extension GL_EXT_control_flow_attributes : require

layout(std430, set = 0, binding = 1) readonly buffer WBuf { uint wq[]; };

/* The 4 bytes at even byte offset o of the weight binding. */
uint w32(uint o)
{
    uint i = o >> 2u;
    uint lo = wq[i];
    if ((o & 2u) == 0u) return lo;
    return (lo >> 16u) | (wq[i + 1u] << 16u);
}

/* int8 lanes of a packed word → vec4 / ivec4 (sign-extended) */
ivec4 i8x4(uint w) { return ivec4(int(w << 24u), int(w << 16u), int(w << 8u), int(w)) >> 24; }

#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
#define WFLOAT 1
/* a 32-element chunk as a "block" for the block view (lane layout) */
#if defined(WTYPE_F32)
#define BB 128u
#define NV 32u
#else
#define BB 64u
#define NV 16u
#endif
#elif defined(WTYPE_Q8_0)
#define BE 32u
#define BC 1 /* chunks of 32 per block */
#define BB 34u
#define NV 9u
#elif defined(WTYPE_Q4_0)
#define BE 32u
#define BC 1 /* chunks of 32 per block */
#define BB 18u
#define NV 5u
#define HAS_FM 1
#elif defined(WTYPE_Q1_0)
#define BE 128u
#define BC 4 /* chunks of 32 per block */
#define BB 18u
#define NV 5u
#define HAS_FM 1
#elif defined(WTYPE_Q2_0)
#define BE 64u
#define BC 2 /* chunks of 32 per block */
#define BB 18u
#define NV 5u
#define HAS_FM 1
#elif defined(WTYPE_I2_S) && defined(I2S_256)
/* two I2_S "blocks" (256 elements, 64 bytes) as one, so that a kernel that walks blocks walks
 * I2_S exactly as TQ2_0 (mmvw.comp; for I2_S, K a multiple of 256) */
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 64u
#define NV 16u
#define HAS_FM 1
#elif defined(WTYPE_I2_S)
/* a "block" is 128 elements of a row, 32 bytes of codes: the scale is per tensor (hx_wscale) */
#define BE 128u
#define BC 4 /* chunks of 32 per block */
#define BB 32u
#define NV 8u
#define HAS_FM 1
#elif defined(WTYPE_TQ2_0)
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 66u
#define NV 17u
#define HAS_FM 1
#elif defined(WTYPE_TQ1_0)
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 54u
#define NV 14u
#define HAS_FM 1
#elif defined(WTYPE_Q4_K)
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 144u
#define NV 36u
#define HAS_FM 1
#elif defined(WTYPE_Q5_K)
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 176u
#define NV 44u
#define HAS_FM 1
#elif defined(WTYPE_Q6_K)
#define BE 256u
#define BC 8 /* chunks of 32 per block */
#define BB 210u
#define NV 53u
#else
#error "define one WTYPE_*"
#endif

#ifdef BLOCK_VIEW
uint V[NV];
#ifdef WTEX
/* The same weight bytes as a uniform texel buffer of 16-byte texels (R32G32B32A32_UINT):
 * on lavapipe a texel fetch is a plain 16-byte load per invocation, where a storage-buffer
 * load is a guarded scalar load per invocation and word. The view starts at a multiple of
 * 16 bytes; s is the block's byte offset from there. */
layout(set = 0, binding = 5) uniform usamplerBuffer wtex;
#define NT ((NV + 3u) / 4u + 2u) /* texels a block view can touch */
/* word j (0..7) of the 8 words a, b */
uint hx_w8(uvec4 a, uvec4 b, uint j) { return j < 4u ? a[j] : b[j & 3u]; }
void begin_block(uint s)
{
    int t0 = int(s >> 4u);
    uint q = (s & 15u) >> 2u, sh = (s & 2u) * 8u;
    uvec4 T[NT];
    [[unroll]] for (uint k = 0u; k < NT; k++) T[k] = texelFetch(wtex, t0 + int(k));
    [[unroll]] for (uint k = 0u; k < NV; k++) {
        uint lo = hx_w8(T[k >> 2u], T[(k >> 2u) + 1u], (k & 3u) + q);
        uint hi = hx_w8(T[(k + 1u) >> 2u], T[((k + 1u) >> 2u) + 1u], ((k + 1u) & 3u) + q);
        V[k] = (lo >> sh) | ((hi << 16u) << (16u - sh));
    }
}
#elif defined(WVEC)
/* The same weight bytes as 16-byte words (binding 1 viewed as uvec4; the binding starts at a
 * multiple of 16): the block's bytes [s, s + BB) lie in the NT aligned windows from s / 16,
 * loaded with one 16-byte load each and funnel-shifted into V. A word of V that reaches past
 * the last window holds only bytes past the block, which no decoder reads. */
layout(std430, set = 0, binding = 1) readonly buffer WBuf4 { uvec4 wq4[]; };
#define NT ((BB + 14u + 15u) / 16u)
uint hx_w8(uvec4 a, uvec4 b, uint j) { return j < 4u ? a[j] : b[j & 3u]; }
void begin_block(uint s)
{
    uint t0 = s >> 4u;
    uint q = (s & 15u) >> 2u, sh = (s & 2u) * 8u;
    uvec4 T[NT];
    [[unroll]] for (uint k = 0u; k < NT; k++) T[k] = wq4[t0 + k];
    [[unroll]] for (uint k = 0u; k < NV; k++) {
        uint a0 = min(k >> 2u, NT - 1u), a1 = min((k >> 2u) + 1u, NT - 1u);
        uint b0 = min((k + 1u) >> 2u, NT - 1u), b1 = min(((k + 1u) >> 2u) + 1u, NT - 1u);
        uint lo = hx_w8(T[a0], T[a1], (k & 3u) + q);
        uint hi = hx_w8(T[b0], T[b1], ((k + 1u) & 3u) + q);
        V[k] = (lo >> sh) | ((hi << 16u) << (16u - sh));
    }
}
#else
void begin_block(uint s)
{
    uint i = s >> 2u, sh = (s & 2u) * 8u;
    uint prev = wq[i];
    [[unroll]] for (uint k = 0u; k < NV; k++) {
        uint nxt = wq[i + k + 1u];
        V[k] = (prev >> sh) | ((nxt << 16u) << (16u - sh));
        prev = nxt;
    }
}
#endif
/* bytes [o, o + 4) of the block, o even (compile-time constant once unrolled) */
uint rd(uint o)
{
    uint j = o >> 2u;
    if ((o & 2u) == 0u) return V[j];
    return (V[j] >> 16u) | (V[j + 1u] << 16u);
}
#else
uint S;
void begin_block(uint s) { S = s; }
uint rd(uint o) { return w32(S + o); }
#endif
uint rd16(uint o) { return (rd(o & ~3u) >> ((o & 2u) * 8u)) & 0xffffu; }
float rdh(uint o) { return unpackHalf2x16(rd16(o)).x; }

#ifdef WFLOAT
/* element e of the row at byte rb */
#if defined(WTYPE_F32)
float wel(uint rb, uint e) { return uintBitsToFloat(wq[(rb >> 2u) + e]); }
#else
float h2f(uint h)
{
#if defined(WTYPE_F16)
    return unpackHalf2x16(h).x;
#else
    return uintBitsToFloat(h << 16u);
#endif
}
float wel(uint rb, uint e)
{
    uint o = rb + 2u * e;
    return h2f((wq[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu);
}
#endif
/* elements 4j..4j+3 of a row (4j + 3 < K) */
vec4 wel4(uint rb, uint j)
{
#if defined(WTYPE_F32)
    uint i = (rb >> 2u) + 4u * j;
    return uintBitsToFloat(uvec4(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]));
#else
    uint o = rb + 8u * j;
    uint lo = w32(o), hi = w32(o + 4u);
    return vec4(h2f(lo & 0xffffu), h2f(lo >> 16u), h2f(hi & 0xffffu), h2f(hi >> 16u));
#endif
}
#else /* quantized block types */

#if defined(WTYPE_I2_S)
/* I2_S's per-tensor scale (hx_weight.tensor_scale), set from the push constants by main() */
float hx_wscale;
#endif

#if defined(WTYPE_TQ1_0)
/* trit n of each byte of w (formats.md §3.7: q = byte·3ⁿ mod 256, trit = q·3 >> 8), two
 * bytes at a time in 16-bit lanes */
uint trits4(uint w, uint n)
{
    uint p3 = n == 0u ? 1u : n == 1u ? 3u : n == 2u ? 9u : n == 3u ? 27u : 81u;
    uint ev = ((w & 0x00ff00ffu) * p3) & 0x00ff00ffu;
    uint od = (((w >> 8u) & 0x00ff00ffu) * p3) & 0x00ff00ffu;
    ev = ((ev * 3u) >> 8u) & 0x00030003u;
    od = ((od * 3u) >> 8u) & 0x00030003u;
    return ev | (od << 8u);
}
#endif

void chunk(uint cc, out uint q[8], out vec2 fs, out float fm)
{
#if defined(WTYPE_Q8_0)
    float d = rdh(0u);
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = rd(2u + 4u * k);
    fs = vec2(d);
    fm = 0.0;
#elif defined(WTYPE_Q4_0)
    float d = rdh(0u);
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint w = rd(2u + 4u * k);
        q[k] = w & 0x0f0f0f0fu;
        q[k + 4u] = (w >> 4u) & 0x0f0f0f0fu;
    }
    fs = vec2(d);
    fm = -8.0 * d;
#elif defined(WTYPE_Q1_0)
    float d = rdh(0u);
    uint bits = rd(2u + 4u * cc);
    /* 4 bits → 4 bytes of 0/1: the shifted copies of the nibble do not overlap */
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = (((bits >> (4u * k)) & 15u) * 0x00204081u) & 0x01010101u;
    fs = vec2(2.0 * d);
    fm = -d;
#elif defined(WTYPE_Q2_0)
    /* elements 4i..4i+3 are the four bit pairs of byte i of qs, lowest first */
    float d = rdh(0u);
    [[unroll]] for (uint k = 0u; k < 2u; k++) {
        uint w = rd(2u + 8u * cc + 4u * k);
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint b = (w >> (8u * i)) & 255u;
            q[4u * k + i] = (b | (b << 6u) | (b << 12u) | (b << 18u)) & 0x03030303u;
        }
    }
    fs = vec2(d);
    fm = -d;
#elif defined(WTYPE_I2_S) && defined(I2S_256)
    /* two 32-byte I2_S blocks: chunk cc is bit pair 6 - 2(cc % 4) of block cc / 4 */
    uint h = cc >> 2u, n = 6u - 2u * (cc & 3u);
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = (rd(32u * h + 4u * k) >> n) & 0x03030303u;
    fs = vec2(hx_wscale);
    fm = -hx_wscale;
#elif defined(WTYPE_I2_S)
    /* chunk cc is bit pair 6 - 2cc of the block's 32 bytes (TQ2_0's is 2cc of its half) */
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = (rd(4u * k) >> (6u - 2u * cc)) & 0x03030303u;
    fs = vec2(hx_wscale);
    fm = -hx_wscale;
#elif defined(WTYPE_TQ2_0)
    uint h = cc >> 2u, n = 2u * (cc & 3u);
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = (rd(32u * h + 4u * k) >> n) & 0x03030303u;
    float d = rdh(64u);
    fs = vec2(d);
    fm = -d;
#elif defined(WTYPE_TQ1_0)
    if (cc < 5u) {
        [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = trits4(rd(4u * k), cc);
    } else {
        uint n0 = 2u * (cc - 5u);
        [[unroll]] for (uint k = 0u; k < 4u; k++) q[k] = trits4(rd(32u + 4u * k), n0);
        if (cc < 7u) {
            [[unroll]] for (uint k = 0u; k < 4u; k++) q[k + 4u] = trits4(rd(32u + 4u * k), n0 + 1u);
        } else {
            uint qh = rd(48u);
            [[unroll]] for (uint k = 0u; k < 4u; k++) q[k + 4u] = trits4(qh, k);
        }
    }
    float d = rdh(52u);
    fs = vec2(d);
    fm = -d;
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
    uint dw = rd(0u);
    uint s0 = rd(4u), s1 = rd(8u), s2 = rd(12u);
    uint j = cc & 3u, sh = 8u * j;
    uint sc, m;
    if (cc < 4u) {
        sc = (s0 >> sh) & 63u;
        m = (s1 >> sh) & 63u;
    } else {
        sc = ((s2 >> sh) & 15u) | (((s0 >> sh) >> 6u) & 3u) << 4u;
        m = (((s2 >> sh) >> 4u) & 15u) | (((s1 >> sh) >> 6u) & 3u) << 4u;
    }
    uint c64 = cc >> 1u, hi = 4u * (cc & 1u);
#if defined(WTYPE_Q5_K)
    /* qs after qh[32]; chunk cc's fifth bits are bit cc of qh[0..31] */
    [[unroll]] for (uint k = 0u; k < 8u; k++)
        q[k] = ((rd(48u + 32u * c64 + 4u * k) >> hi) & 0x0f0f0f0fu) |
               (((rd(16u + 4u * k) >> cc) & 0x01010101u) << 4u);
#else
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = (rd(16u + 32u * c64 + 4u * k) >> hi) & 0x0f0f0f0fu;
#endif
    fs = vec2(unpackHalf2x16(dw).x * float(sc));
    fm = -unpackHalf2x16(dw >> 16u).x * float(m);
#elif defined(WTYPE_Q6_K)
    uint h = cc >> 2u, g = cc & 3u;
    uint lo_o = 64u * h + 32u * (g & 1u), lo_s = 4u * (g >> 1u), hi_o = 128u + 32u * h, hi_s = 2u * g;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint v = ((rd(lo_o + 4u * k) >> lo_s) & 0x0f0f0f0fu) |
                 (((rd(hi_o + 4u * k) >> hi_s) & 0x03030303u) << 4u);
        q[k] = ((v | 0x80808080u) - 0x20202020u) ^ 0x80808080u; /* bytewise v - 32 */
    }
    uint sw = rd16(192u + 2u * cc);
    float d = rdh(208u);
    fs = d * vec2(float(int(sw << 24u) >> 24), float(int(sw << 16u) >> 24));
    fm = 0.0;
#endif
}
#endif
