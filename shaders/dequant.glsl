// dequant.glsl — reading GGUF weight blocks (formats.md §3) straight from the uploaded bytes.
// Included by the matmul and embed shaders with exactly one WTYPE_* defined. The weight is
// binding 1, read as bytes (8-bit storage) for block types, halves for F16/BF16, floats for
// F32, because blocks are not 4-byte aligned (a Q8_0 block is 34 bytes).
//   dq4(row_byte, e): elements e..e+3 of the row starting at byte row_byte (e % 4 == 0, and
//                     e + 3 < K for the float types; block types have K % block == 0)
//   dq1(row_byte, e): element e
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

#if defined(WTYPE_F32)
layout(std430, set = 0, binding = 1) readonly buffer WBuf { float wf[]; };
#define BLOCK_ELEMS 1
vec4 dq4(uint rb, uint e)
{
    uint i = rb / 4u + e;
    return vec4(wf[i], wf[i + 1u], wf[i + 2u], wf[i + 3u]);
}
float dq1(uint rb, uint e) { return wf[rb / 4u + e]; }
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
layout(std430, set = 0, binding = 1) readonly buffer WBuf { uint16_t wh[]; };
#define BLOCK_ELEMS 1
#if defined(WTYPE_F16)
float h2f(uint h) { return unpackHalf2x16(h).x; }
#else
float h2f(uint h) { return uintBitsToFloat(h << 16); }
#endif
vec4 dq4(uint rb, uint e)
{
    uint i = rb / 2u + e;
    return vec4(h2f(uint(wh[i])), h2f(uint(wh[i + 1u])), h2f(uint(wh[i + 2u])),
                h2f(uint(wh[i + 3u])));
}
float dq1(uint rb, uint e) { return h2f(uint(wh[rb / 2u + e])); }
#else
layout(std430, set = 0, binding = 1) readonly buffer WBuf { uint8_t wb[]; };
uint b8(uint o) { return uint(wb[o]); }
int s8(uint o) { return bitfieldExtract(int(uint(wb[o])), 0, 8); }
float f16at(uint o) { return unpackHalf2x16(uint(wb[o]) | (uint(wb[o + 1u]) << 8)).x; }
/* four bytes starting at o packed into one uint (o need not be aligned) */
uint u32at(uint o)
{
    return uint(wb[o]) | (uint(wb[o + 1u]) << 8) | (uint(wb[o + 2u]) << 16) |
           (uint(wb[o + 3u]) << 24);
}

#if defined(WTYPE_Q8_0)
#define BLOCK_ELEMS 32
#define BLOCK_BYTES 34
vec4 dqb(uint base, uint i)
{
    float d = f16at(base);
    uint o = base + 2u + i;
    return d * vec4(s8(o), s8(o + 1u), s8(o + 2u), s8(o + 3u));
}
#elif defined(WTYPE_Q4_0)
#define BLOCK_ELEMS 32
#define BLOCK_BYTES 18
vec4 dqb(uint base, uint i)
{
    float d = f16at(base);
    uint q = u32at(base + 2u + (i & 15u));
    if (i >= 16u) q >>= 4;
    uvec4 c = uvec4(q, q >> 8, q >> 16, q >> 24) & 15u;
    return d * (vec4(c) - 8.0);
}
#elif defined(WTYPE_Q4_K)
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 144
vec4 dqb(uint base, uint i)
{
    uint j = i / 32u; /* sub-block */
    uint sc, m;
    if (j < 4u) {
        sc = b8(base + 4u + j) & 63u;
        m = b8(base + 8u + j) & 63u;
    } else {
        sc = (b8(base + 8u + j) & 15u) | ((b8(base + j) >> 6) << 4);
        m = (b8(base + 8u + j) >> 4) | ((b8(base + 4u + j) >> 6) << 4);
    }
    float d = f16at(base) * float(sc);
    float mn = f16at(base + 2u) * float(m);
    uint c = i / 64u, l = i & 31u;
    uint q = u32at(base + 16u + 32u * c + l);
    if ((i & 32u) != 0u) q >>= 4;
    uvec4 v = uvec4(q, q >> 8, q >> 16, q >> 24) & 15u;
    return d * vec4(v) - mn;
}
#elif defined(WTYPE_Q6_K)
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 210
vec4 dqb(uint base, uint i)
{
    uint h = i / 128u, r = i & 127u, g = r / 32u, l = r & 31u;
    uint lo = u32at(base + 64u * h + l + (g & 1u) * 32u);
    if (g >= 2u) lo >>= 4;
    uint hi = u32at(base + 128u + 32u * h + l) >> (2u * g);
    uvec4 ql = uvec4(lo, lo >> 8, lo >> 16, lo >> 24) & 15u;
    uvec4 qh = uvec4(hi, hi >> 8, hi >> 16, hi >> 24) & 3u;
    ivec4 q = ivec4(ql | (qh << 4)) - 32;
    float d = f16at(base + 208u) * float(s8(base + 192u + i / 16u));
    return d * vec4(q);
}
#elif defined(WTYPE_TQ2_0)
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 66
vec4 dqb(uint base, uint i)
{
    uint c = i / 128u, n = (i & 127u) / 32u, m = i & 31u;
    uint q = u32at(base + 32u * c + m) >> (2u * n);
    uvec4 v = uvec4(q, q >> 8, q >> 16, q >> 24) & 3u;
    return f16at(base + 64u) * (vec4(v) - 1.0);
}
#elif defined(WTYPE_TQ1_0)
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 54
uint trit(uint byte, uint n)
{
    const uint p3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
    uint q = (byte * p3[n]) & 255u;
    return (q * 3u) >> 8;
}
vec4 dqb(uint base, uint i)
{
    uint o, n;
    if (i < 160u) {
        o = base + (i & 31u);
        n = i / 32u;
    } else if (i < 240u) {
        uint r = i - 160u;
        o = base + 32u + (r & 15u);
        n = r / 16u;
    } else {
        uint r = i - 240u;
        o = base + 48u; /* r % 4 == 0: the four qh bytes */
        n = r / 4u;
    }
    uvec4 t = uvec4(trit(b8(o), n), trit(b8(o + 1u), n), trit(b8(o + 2u), n),
                    trit(b8(o + 3u), n));
    return f16at(base + 52u) * (vec4(t) - 1.0);
}
#elif defined(WTYPE_Q1_0)
#define BLOCK_ELEMS 128
#define BLOCK_BYTES 18
vec4 dqb(uint base, uint i)
{
    float d = f16at(base);
    uint q = b8(base + 2u + i / 8u) >> (i & 7u);
    uvec4 v = uvec4(q, q >> 1, q >> 2, q >> 3) & 1u;
    return d * (vec4(v) * 2.0 - 1.0);
}
#else
#error "define one WTYPE_*"
#endif

vec4 dq4(uint rb, uint e)
{
    uint b = e / uint(BLOCK_ELEMS);
    return dqb(rb + b * uint(BLOCK_BYTES), e - b * uint(BLOCK_ELEMS));
}
float dq1(uint rb, uint e)
{
    vec4 v = dq4(rb, e & ~3u);
    return v[e & 3u];
}
#endif
