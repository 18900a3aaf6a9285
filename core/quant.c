/*
 * quant.c — weight types: names, GGUF ids, block geometry, and the reference (de)quantizers,
 * bit-exact with formats.md §3 for F32, F16, BF16, Q8_0, Q4_0, TQ1_0, TQ2_0, Q1_0, and with
 * ggml's quantize_row_q2_0_ref / bitnet.cpp's quantize_i2_s for Q2_0 and I2_S (docs/weights.md).
 * Q4_K, Q5_K and Q6_K: dequantize is exact to the layout; the quantizers are our own simple
 * min/max (Q4_K, Q5_K) and absmax (Q6_K) searches, valid blocks but NOT bit-identical to
 * ggml's make_qkx2_quants scale search. fp16 conversion is portable scalar code (RNE, subnormals,
 * inf/NaN); no _Float16 or F16C dependence. I2_S is the one type with a tensor scale: its rows
 * are codes only and the tensor ends in a 32-byte tail holding one f32 scale.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "hx-impl.h"

struct hx__dtype_traits {
    const char *name;
    int64_t block_elems;
    size_t block_bytes;
    uint32_t ggml;
    size_t tail;       /* bytes after the last row: I2_S's tensor scale (and padding) */
};

static const struct hx__dtype_traits hx__dtypes[] = {
    [HX_DTYPE_F32] = {"F32", 1, 4, 0, 0},        [HX_DTYPE_F16] = {"F16", 1, 2, 1, 0},
    [HX_DTYPE_BF16] = {"BF16", 1, 2, 30, 0},     [HX_DTYPE_Q8_0] = {"Q8_0", 32, 34, 8, 0},
    [HX_DTYPE_Q4_0] = {"Q4_0", 32, 18, 2, 0},    [HX_DTYPE_Q4_K] = {"Q4_K", 256, 144, 12, 0},
    [HX_DTYPE_Q6_K] = {"Q6_K", 256, 210, 14, 0}, [HX_DTYPE_TQ1_0] = {"TQ1_0", 256, 54, 34, 0},
    [HX_DTYPE_TQ2_0] = {"TQ2_0", 256, 66, 35, 0}, [HX_DTYPE_Q1_0] = {"Q1_0", 128, 18, 41, 0},
    [HX_DTYPE_Q2_0] = {"Q2_0", 64, 18, 42, 0},    [HX_DTYPE_I2_S] = {"I2_S", 128, 32, 36, 32},
    [HX_DTYPE_Q5_K] = {"Q5_K", 256, 176, 13, 0},
};
_Static_assert(HX_DTYPE_COUNT == 13, "dtype table");

static bool hx__dtype_ok(enum hx_dtype t) { return (unsigned)t < HX_DTYPE_COUNT; }

const char *hx_dtype_name(enum hx_dtype t) { return hx__dtype_ok(t) ? hx__dtypes[t].name : "?"; }

int hx_dtype_from_name(const char *name, enum hx_dtype *out)
{
    for (int i = 0; name && i < HX_DTYPE_COUNT; i++)
        if (strcasecmp(name, hx__dtypes[i].name) == 0) {
            *out = (enum hx_dtype)i;
            return HX_OK;
        }
    return hx__set_error(HX_E_NOTFOUND, "unknown weight type '%s'", name ? name : "(null)");
}

int64_t hx_dtype_block_elems(enum hx_dtype t) { return hx__dtype_ok(t) ? hx__dtypes[t].block_elems : 0; }
size_t hx_dtype_block_bytes(enum hx_dtype t) { return hx__dtype_ok(t) ? hx__dtypes[t].block_bytes : 0; }
uint32_t hx_dtype_to_ggml(enum hx_dtype t) { return hx__dtype_ok(t) ? hx__dtypes[t].ggml : UINT32_MAX; }

int hx_dtype_from_ggml(uint32_t ggml_type, enum hx_dtype *out)
{
    for (int i = 0; i < HX_DTYPE_COUNT; i++)
        if (hx__dtypes[i].ggml == ggml_type) {
            *out = (enum hx_dtype)i;
            return HX_OK;
        }
    return hx__set_error(HX_E_UNSUPPORTED, "ggml type id %u is not supported", ggml_type);
}

size_t hx_dtype_row_bytes(enum hx_dtype t, int64_t n)
{
    if (!hx__dtype_ok(t) || n < 0 || n % hx__dtypes[t].block_elems) return 0;
    return (size_t)(n / hx__dtypes[t].block_elems) * hx__dtypes[t].block_bytes;
}

bool hx_dtype_is_quantized(enum hx_dtype t) { return hx__dtype_ok(t) && hx__dtypes[t].block_elems > 1; }

/* ---- fp16 / bf16 ------------------------------------------------------------------------- */

static uint32_t hx__f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float hx__u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float hx_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return hx__u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return hx__u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hx_fp32_to_fp16(float f)
{
    uint32_t u = hx__f2u(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* NaN, quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* below 2^-14: subnormal half; round a*2^24 to nearest even */
        float v = hx__u2f(a) * 0x1p24f;  /* exact scaling (power of two) */
        float r = nearbyintf(v);           /* default rounding mode: nearest even */
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t exp = (a >> 23) - 112, man = a & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carry into exp is correct */
    return (uint16_t)(sign | h);
}

float hx_bf16_to_fp32(uint16_t h) { return hx__u2f((uint32_t)h << 16); }

uint16_t hx_fp32_to_bf16(float f)
{
    uint32_t u = hx__f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float hx__rd16(const uint8_t *p) { return hx_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }
static void hx__wr16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8); }

/* ---- per-block dequantizers (b: one block, y: block_elems floats) -------------------------- */

static void hx__deq_q8_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void hx__deq_q4_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0x0f) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void hx__q4k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void hx__deq_q4_k(const uint8_t *b, float *y)
{
    float d = hx__rd16(b), dmin = hx__rd16(b + 2);
    const uint8_t *qs = b + 16;
    for (int e = 0; e < 256; e++) {
        int c = e / 64, l = e % 64, sc, m;
        int q = l < 32 ? (qs[32 * c + l] & 0x0f) : (qs[32 * c + l - 32] >> 4);
        hx__q4k_scale_min(b + 4, e / 32, &sc, &m);
        y[e] = d * (float)sc * (float)q - dmin * (float)m;
    }
}

/* Q5_K: d, dmin (fp16), Q4_K's 12 bytes of 6-bit scales and mins, qh[32], qs[128]. Element
 * 64c + l (l < 32) is the low nibble of qs[32c + l], 64c + 32 + l its high nibble; its fifth
 * bit is bit 2c (2c + 1 for the high nibble) of qh[l]. */
static void hx__deq_q5_k(const uint8_t *b, float *y)
{
    float d = hx__rd16(b), dmin = hx__rd16(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int e = 0; e < 256; e++) {
        int c = e / 64, l = e % 64, sc, m;
        int q = l < 32 ? (qs[32 * c + l] & 0x0f) : (qs[32 * c + l - 32] >> 4);
        q |= ((qh[l % 32] >> (2 * c + l / 32)) & 1) << 4;
        hx__q4k_scale_min(b + 4, e / 32, &sc, &m);
        y[e] = d * (float)sc * (float)q - dmin * (float)m;
    }
}

static void hx__deq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = hx__rd16(b + 208);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, r = e % 128, l = r % 32, row = r / 32;
        const uint8_t *L = ql + 64 * h, *H = qh + 32 * h;
        int lo = row == 0 ? (L[l] & 0xf) : row == 1 ? (L[l + 32] & 0xf) : row == 2 ? (L[l] >> 4) : (L[l + 32] >> 4);
        int hi = (H[l] >> (2 * row)) & 3;
        y[e] = d * (float)scales[e / 16] * (float)((lo | (hi << 4)) - 32);
    }
}

static void hx__deq_tq2_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b + 64);
    for (int e = 0; e < 256; e++) {
        int c = e / 128, n = (e % 128) / 32, m = e % 32;
        y[e] = (float)(((b[32 * c + m] >> (2 * n)) & 3) - 1) * d;
    }
}

static int hx__tq1_trit(uint8_t byte, int n)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q = (uint8_t)(byte * pow3[n]);
    return (int)(((uint16_t)q * 3) >> 8);
}

/* Byte index and trit position of element e of a TQ1_0 block (qs at 0, qh at 48). */
static void hx__tq1_place(int e, int *byte, int *n)
{
    if (e < 160) { *byte = e % 32; *n = e / 32; }
    else if (e < 240) { *byte = 32 + (e - 160) % 16; *n = (e - 160) / 16; }
    else { *byte = 48 + (e - 240) % 4; *n = (e - 240) / 4; }
}

static void hx__deq_tq1_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b + 52);
    for (int e = 0; e < 256; e++) {
        int byte, n;
        hx__tq1_place(e, &byte, &n);
        y[e] = (float)(hx__tq1_trit(b[byte], n) - 1) * d;
    }
}

static void hx__deq_q1_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b);
    for (int j = 0; j < 128; j++) y[j] = ((b[2 + j / 8] >> (j % 8)) & 1) ? d : -d;
}

/* Q2_0: d, then element j at bits 2·(j % 4) of byte j / 4 (LSB first); y = (q - 1)·d. */
static void hx__deq_q2_0(const uint8_t *b, float *y)
{
    float d = hx__rd16(b);
    for (int j = 0; j < 64; j++) y[j] = (float)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
}

/* I2_S: element j of a 128 block at bits 7-6, 5-4, 3-2, 1-0 of byte j % 32 for j / 32 = 0..3
 * (MSB first); y = code - 1 (the tensor scale is applied by the caller). */
static int hx__i2s_code(const uint8_t *b, int j) { return (b[j % 32] >> (6 - 2 * (j / 32))) & 3; }

static void hx__deq_i2_s(const uint8_t *b, float *y)
{
    for (int j = 0; j < 128; j++) y[j] = (float)(hx__i2s_code(b, j) - 1);
}

/* ---- per-block quantizers -------------------------------------------------------------- */

static void hx__q_q8_0(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    hx__wr16(b, hx_fp32_to_fp16(d));
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void hx__q_q4_0(const float *x, uint8_t *b)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    hx__wr16(b, hx_fp32_to_fp16(d));
    for (int j = 0; j < 16; j++) {
        int q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[j + 16] * id + 8.5f);
        q0 = q0 > 15 ? 15 : q0;
        q1 = q1 > 15 ? 15 : q1;
        b[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

/* Q4_K (our own): per sub-block min/max → scale=(max-min)/15, min=-min (>= 0 clamp); then
 * 6-bit quantization of scales and mins against d = max_scale/63, dmin = max_min/63. */
static void hx__q_kmin(const float *x, uint8_t *b, int bits);

static void hx__q_q4_k(const float *x, uint8_t *b) { hx__q_kmin(x, b, 4); }

/* Q5_K (our own): as Q4_K with codes 0..31. */
static void hx__q_q5_k(const float *x, uint8_t *b) { hx__q_kmin(x, b, 5); }

/* The two: `bits` 4 writes Q4_K's 144 bytes, 5 Q5_K's 176 (qh before qs). */
static void hx__q_kmin(const float *x, uint8_t *b, int bits)
{
    const int qmax = (1 << bits) - 1;
    float scale[8], mn[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        float lo = x[32 * j], hi = x[32 * j];
        for (int i = 1; i < 32; i++) { lo = fminf(lo, x[32 * j + i]); hi = fmaxf(hi, x[32 * j + i]); }
        if (lo > 0) lo = 0;
        scale[j] = (hi - lo) / (float)qmax;
        mn[j] = -lo;
        smax = fmaxf(smax, scale[j]);
        mmax = fmaxf(mmax, mn[j]);
    }
    float d = smax / 63.0f, dmin = mmax / 63.0f;
    hx__wr16(b, hx_fp32_to_fp16(d));
    hx__wr16(b + 2, hx_fp32_to_fp16(dmin));
    d = hx__rd16(b);
    dmin = hx__rd16(b + 2);
    int sc[8], m[8];
    uint8_t *s = b + 4;
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0 ? (int)lroundf(scale[j] / d) : 0;
        m[j] = dmin > 0 ? (int)lroundf(mn[j] / dmin) : 0;
        sc[j] = sc[j] > 63 ? 63 : sc[j];
        m[j] = m[j] > 63 ? 63 : m[j];
    }
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    uint8_t *qh = b + 16, *qs = bits == 5 ? b + 48 : b + 16;
    memset(b + 16, 0, bits == 5 ? 160 : 128);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        float ds = d * (float)sc[j], dm = dmin * (float)m[j];
        int q = ds > 0 ? (int)lroundf((x[e] + dm) / ds) : 0;
        q = q < 0 ? 0 : q > qmax ? qmax : q;
        int c = e / 64, l = e % 64;
        if (l < 32) qs[32 * c + l] |= (uint8_t)(q & 15);
        else qs[32 * c + l - 32] |= (uint8_t)((q & 15) << 4);
        if (bits == 5) qh[l % 32] |= (uint8_t)((q >> 4) << (2 * c + l / 32));
    }
}

/* Q6_K (our own): per-16 absmax → scale = amax/32 (so codes span [-32, 31]), signed 8-bit
 * sub-scales against d = max|scale|/127. */
static void hx__q_q6_k(const float *x, uint8_t *b)
{
    float scale[16], smax = 0;
    for (int s = 0; s < 16; s++) {
        float amax = 0, max = 0;
        for (int i = 0; i < 16; i++)
            if (fabsf(x[16 * s + i]) > amax) { amax = fabsf(x[16 * s + i]); max = x[16 * s + i]; }
        scale[s] = max / -32.0f; /* like Q4_0: the extreme lands on code -32 exactly */
        smax = fmaxf(smax, fabsf(scale[s]));
    }
    float d = smax / 127.0f;
    hx__wr16(b + 208, hx_fp32_to_fp16(d));
    d = hx__rd16(b + 208);
    int8_t *scales = (int8_t *)(b + 192);
    for (int s = 0; s < 16; s++) {
        int v = d != 0 ? (int)lroundf(scale[s] / d) : 0;
        scales[s] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
    uint8_t *ql = b, *qh = b + 128;
    memset(b, 0, 192);
    for (int e = 0; e < 256; e++) {
        float ds = d * (float)scales[e / 16];
        int q = ds != 0 ? (int)lroundf(x[e] / ds) : 0;
        q = (q < -32 ? -32 : q > 31 ? 31 : q) + 32;
        int h = e / 128, r = e % 128, l = r % 32, row = r / 32;
        uint8_t *L = ql + 64 * h, *H = qh + 32 * h;
        int li = (row & 1) ? l + 32 : l;
        L[li] |= (uint8_t)((q & 15) << ((row & 2) ? 4 : 0));
        H[l] |= (uint8_t)((q >> 4) << (2 * row));
    }
}

static float hx__amax(const float *x, int n)
{
    float a = 0;
    for (int i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

static void hx__q_tq2_0(const float *x, uint8_t *b)
{
    float d = hx__amax(x, 256), id = d != 0 ? 1.0f / d : 0.0f;
    memset(b, 0, 64);
    for (int e = 0; e < 256; e++) {
        int code = (int)lroundf(x[e] * id) + 1;
        int c = e / 128, n = (e % 128) / 32, m = e % 32;
        b[32 * c + m] |= (uint8_t)((code & 3) << (2 * n));
    }
    hx__wr16(b + 64, hx_fp32_to_fp16(d));
}

static void hx__q_tq1_0(const float *x, uint8_t *b)
{
    float d = hx__amax(x, 256), id = d != 0 ? 1.0f / d : 0.0f;
    int v[52] = {0};
    for (int e = 0; e < 256; e++) {
        int t = (int)lroundf(x[e] * id) + 1, byte, n;
        hx__tq1_place(e, &byte, &n);
        static const int w5[5] = {81, 27, 9, 3, 1};
        v[byte] += t * (byte < 48 ? w5[n] : w5[n] * 1); /* qh: t0·81+t1·27+t2·9+t3·3 == (…)·3 */
    }
    for (int i = 0; i < 52; i++) b[i] = (uint8_t)((v[i] * 256 + 242) / 243);
    hx__wr16(b + 52, hx_fp32_to_fp16(d));
}

static void hx__q_q1_0(const float *x, uint8_t *b)
{
    float sum = 0;
    for (int j = 0; j < 128; j++) sum += fabsf(x[j]);
    hx__wr16(b, hx_fp32_to_fp16(sum / 128.0f));
    memset(b + 2, 0, 16);
    for (int j = 0; j < 128; j++)
        if (x[j] >= 0) b[2 + j / 8] |= (uint8_t)(1u << (j % 8));
}

/* ggml's quantize_row_q2_0_ref: d = amax, q = clamp(roundf(x / d) + 1, 0, 3). */
static void hx__q_q2_0(const float *x, uint8_t *b)
{
    float d = hx__amax(x, 64), id = d > 0.0f ? 1.0f / d : 0.0f;
    hx__wr16(b, hx_fp32_to_fp16(d));
    memset(b + 2, 0, 16);
    for (int j = 0; j < 64; j++) {
        int q = (int)roundf(x[j] * id) + 1;
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        b[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
    }
}

/* bitnet.cpp's quantize_i2_s: |x| < 1e-6 is code 1 (zero), else the sign (2 or 0); the scale,
 * max |x| over the tensor, goes in the tail (hx_quantize_tensor). */
static void hx__q_i2_s(const float *x, uint8_t *b)
{
    memset(b, 0, 32);
    for (int j = 0; j < 128; j++) {
        int code = fabsf(x[j]) < 1e-6f ? 1 : x[j] > 0 ? 2 : 0;
        b[j % 32] |= (uint8_t)(code << (6 - 2 * (j / 32)));
    }
}

typedef void (*hx__deq_fn)(const uint8_t *b, float *y);
typedef void (*hx__q_fn)(const float *x, uint8_t *b);
static const hx__deq_fn hx__deq[HX_DTYPE_COUNT] = {
    [HX_DTYPE_Q8_0] = hx__deq_q8_0, [HX_DTYPE_Q4_0] = hx__deq_q4_0, [HX_DTYPE_Q4_K] = hx__deq_q4_k,
    [HX_DTYPE_Q6_K] = hx__deq_q6_k, [HX_DTYPE_TQ1_0] = hx__deq_tq1_0,
    [HX_DTYPE_TQ2_0] = hx__deq_tq2_0, [HX_DTYPE_Q1_0] = hx__deq_q1_0,
    [HX_DTYPE_Q2_0] = hx__deq_q2_0,   [HX_DTYPE_I2_S] = hx__deq_i2_s,
    [HX_DTYPE_Q5_K] = hx__deq_q5_k,
};
static const hx__q_fn hx__q[HX_DTYPE_COUNT] = {
    [HX_DTYPE_Q8_0] = hx__q_q8_0, [HX_DTYPE_Q4_0] = hx__q_q4_0, [HX_DTYPE_Q4_K] = hx__q_q4_k,
    [HX_DTYPE_Q6_K] = hx__q_q6_k, [HX_DTYPE_TQ1_0] = hx__q_tq1_0,
    [HX_DTYPE_TQ2_0] = hx__q_tq2_0, [HX_DTYPE_Q1_0] = hx__q_q1_0,
    [HX_DTYPE_Q2_0] = hx__q_q2_0,   [HX_DTYPE_I2_S] = hx__q_i2_s,
    [HX_DTYPE_Q5_K] = hx__q_q5_k,
};

static int hx__check_row(enum hx_dtype t, const void *a, const void *b, int64_t n)
{
    if (!hx__dtype_ok(t)) return hx__set_error(HX_E_INVAL, "quant: bad dtype %d", (int)t);
    if (!a || !b || n < 0 || n % hx__dtypes[t].block_elems)
        return hx__set_error(HX_E_INVAL, "quant: %s row of %lld elements (block %lld)",
                             hx__dtypes[t].name, (long long)n, (long long)hx__dtypes[t].block_elems);
    return HX_OK;
}

int hx_dequantize_row(enum hx_dtype t, const void *src, float *dst, int64_t n)
{
    int st = hx__check_row(t, src, dst, n);
    if (st) return st;
    const uint8_t *p = src;
    if (t == HX_DTYPE_F32) { memcpy(dst, src, (size_t)n * 4); return HX_OK; }
    if (t == HX_DTYPE_F16 || t == HX_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            dst[i] = t == HX_DTYPE_F16 ? hx_fp16_to_fp32(h) : hx_bf16_to_fp32(h);
        }
        return HX_OK;
    }
    int64_t be = hx__dtypes[t].block_elems;
    for (int64_t i = 0; i < n / be; i++) hx__deq[t](p + i * hx__dtypes[t].block_bytes, dst + i * be);
    return HX_OK;
}

int hx_quantize_row(enum hx_dtype t, const float *src, void *dst, int64_t n)
{
    int st = hx__check_row(t, src, dst, n);
    if (st) return st;
    uint8_t *p = dst;
    if (t == HX_DTYPE_F32) { memcpy(dst, src, (size_t)n * 4); return HX_OK; }
    if (t == HX_DTYPE_F16 || t == HX_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++)
            hx__wr16(p + 2 * i, t == HX_DTYPE_F16 ? hx_fp32_to_fp16(src[i]) : hx_fp32_to_bf16(src[i]));
        return HX_OK;
    }
    int64_t be = hx__dtypes[t].block_elems;
    for (int64_t i = 0; i < n / be; i++) hx__q[t](src + i * be, p + i * hx__dtypes[t].block_bytes);
    return HX_OK;
}

/* ---- tensor scales ------------------------------------------------------------------------ */

size_t hx_dtype_tail_bytes(enum hx_dtype t) { return hx__dtype_ok(t) ? hx__dtypes[t].tail : 0; }

size_t hx_dtype_tensor_bytes(enum hx_dtype t, int64_t n_rows, int64_t n_cols)
{
    size_t rb = hx_dtype_row_bytes(t, n_cols), nb;
    if (!hx__dtype_ok(t) || n_rows < 0 || (n_cols && !rb) ||
        !hx__mul_size(rb, (size_t)n_rows, &nb) || nb > SIZE_MAX - hx__dtypes[t].tail)
        return 0;
    return nb + hx__dtypes[t].tail;
}

int hx_dtype_tensor_scale(enum hx_dtype t, const void *data, int64_t n_rows, int64_t n_cols,
                          float *scale)
{
    *scale = 1.0f;
    if (!hx__dtype_ok(t) || !hx__dtypes[t].tail) return HX_OK;
    size_t nb = hx_dtype_tensor_bytes(t, n_rows, n_cols);
    if (!nb || !data)
        return hx__set_error(HX_E_INVAL, "quant: %s tensor of %lld x %lld", hx__dtypes[t].name,
                             (long long)n_rows, (long long)n_cols);
    memcpy(scale, (const uint8_t *)data + (nb - hx__dtypes[t].tail), 4);
    if (!isfinite(*scale))
        return hx__set_error(HX_E_FORMAT, "%s tensor scale (the f32 at byte %zu) is not finite",
                             hx__dtypes[t].name, nb - hx__dtypes[t].tail);
    return HX_OK;
}

int hx_dequantize_row_scaled(enum hx_dtype t, const void *src, float *dst, int64_t n,
                             float tensor_scale)
{
    int st = hx_dequantize_row(t, src, dst, n);
    if (st || !hx__dtypes[t].tail) return st;
    for (int64_t i = 0; i < n; i++) dst[i] *= tensor_scale;
    return HX_OK;
}

int hx_quantize_tensor(enum hx_dtype t, const float *src, void *dst, int64_t n_rows,
                       int64_t n_cols)
{
    size_t nb = hx_dtype_tensor_bytes(t, n_rows, n_cols), rb = hx_dtype_row_bytes(t, n_cols);
    if (!nb || !src || !dst)
        return hx__set_error(HX_E_INVAL, "quant: %s tensor of %lld x %lld", hx_dtype_name(t),
                             (long long)n_rows, (long long)n_cols);
    float amax = 0.0f;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = src + r * n_cols;
        int st = hx_quantize_row(t, x, (uint8_t *)dst + (size_t)r * rb, n_cols);
        if (st) return st;
        if (hx__dtypes[t].tail) amax = fmaxf(amax, hx__amax(x, (int)n_cols));
    }
    if (hx__dtypes[t].tail) {
        uint8_t *tail = (uint8_t *)dst + (nb - hx__dtypes[t].tail);
        memset(tail, 0, hx__dtypes[t].tail);
        memcpy(tail, &amax, 4);
    }
    return HX_OK;
}

int hx_weight_dequantize_row(const struct hx_weight *w, int64_t r, float *dst)
{
    if (!w || r < 0 || r >= w->n_rows)
        return hx__set_error(HX_E_INVAL, "weight %s: row %lld of %lld",
                             w && w->name ? w->name : "?", (long long)r,
                             w ? (long long)w->n_rows : 0LL);
    const void *row = hx__weight_row(w, r); /* in data, or in the part that holds it */
    if (!row) return hx__set_error(HX_E_INVAL, "weight %s: row %lld has no bytes",
                                   w->name ? w->name : "?", (long long)r);
    return hx_dequantize_row_scaled(w->type, row, dst, w->n_cols, hx_weight_row_tscale(w, r));
}
