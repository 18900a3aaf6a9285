/* test-quant.c — the weight formats, bit-exact against the worked examples and test vectors
 * of ../shared/docs/formats.md §3 and docs/weights.md (Q2_0, I2_S), plus round-trip error
 * bounds on random data. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "hx-dtype.h"

static int hx_t_bytes_eq(const uint8_t *got, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "  byte %zu: got %02X want %02X\n", i, got[i], want[i]);
            return 0;
        }
    return 1;
}

TEST(q8_0_vector)
{
    float x[32];
    for (int e = 0; e < 32; e++) x[e] = sinf(0.37f * e) * (e + 1) * 0.01f;
    static const uint8_t want[34] = {0xF9, 0x18, 0x00, 0x03, 0x08, 0x0F, 0x15, 0x18, 0x17, 0x11, 0x07, 0xF8,
                                     0xE8, 0xD8, 0xCC, 0xC7, 0xC9, 0xD4, 0xE7, 0x01, 0x1D, 0x38, 0x4E, 0x5A,
                                     0x5B, 0x4E, 0x35, 0x13, 0xEA, 0xC2, 0xA0, 0x89, 0x81, 0x8B};
    uint8_t got[34];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q8_0, x, got, 32));
    ASSERT_TRUE(hx_t_bytes_eq(got, want, 34));
}

TEST(q4_0_vector_and_example)
{
    float x[32];
    for (int e = 0; e < 32; e++) x[e] = sinf(0.37f * e) * (e + 1) * 0.01f;
    static const uint8_t want[18] = {0xEF, 0x28, 0x68, 0x88, 0xA9, 0xC9, 0xD9, 0xE9, 0xE9,
                                     0xD9, 0xB8, 0x98, 0x76, 0x46, 0x25, 0x04, 0x05, 0x15};
    uint8_t got[18];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q4_0, x, got, 32));
    ASSERT_TRUE(hx_t_bytes_eq(got, want, 18));
    float y[32] = {-1.6f, 0.8f, 0.35f, 1.0f};
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q4_0, y, got, 32));
    ASSERT_EQ(got[0] | got[1] << 8, 0x3266);
    float d[32];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q4_0, got, d, 32));
    ASSERT_NEAR(d[0], -1.6, 1e-3);
    ASSERT_NEAR(d[1], 0.8, 1e-3);
    ASSERT_NEAR(d[2], 0.4, 1e-3);
    ASSERT_NEAR(d[3], 1.0, 1e-3);
}

TEST(tq2_0_vector_and_example)
{
    float x[256];
    for (int e = 0; e < 256; e++) x[e] = 0.25f * (float)(((7 * e) % 3) - 1);
    uint8_t got[66];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_TQ2_0, x, got, 256));
    static const uint8_t pat[3] = {0x18, 0x61, 0x86};
    for (int i = 0; i < 64; i++) ASSERT_EQ(got[i], pat[i % 3]);
    ASSERT_EQ(got[64], 0x00);
    ASSERT_EQ(got[65], 0x34);
    float y[256];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_TQ2_0, got, y, 256));
    for (int e = 0; e < 256; e++) ASSERT_NEAR(y[e], x[e], 0);
    memset(x, 0, sizeof x);
    x[0] = -1, x[32] = 1, x[64] = 0, x[96] = -1;
    ASSERT_OK(hx_quantize_row(HX_DTYPE_TQ2_0, x, got, 256));
    ASSERT_EQ(got[0], 0x18);
}

TEST(tq1_0_vector)
{
    float x[256];
    for (int e = 0; e < 256; e++) x[e] = 0.25f * (float)(((7 * e) % 3) - 1);
    uint8_t got[54];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_TQ1_0, x, got, 256));
    static const uint8_t p32[3] = {0x45, 0x6C, 0xCF}, p16[3] = {0x94, 0xBB, 0x31};
    for (int i = 0; i < 32; i++) ASSERT_EQ(got[i], p32[i % 3]);
    for (int i = 0; i < 16; i++) ASSERT_EQ(got[32 + i], p16[i % 3]);
    static const uint8_t qh[4] = {0x30, 0x92, 0xBB, 0x30};
    ASSERT_TRUE(hx_t_bytes_eq(got + 48, qh, 4));
    ASSERT_EQ(got[52], 0x00);
    ASSERT_EQ(got[53], 0x34);
    float y[256];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_TQ1_0, got, y, 256));
    for (int e = 0; e < 256; e++) ASSERT_NEAR(y[e], x[e], 0);
}

TEST(tq1_0_byte_examples)
{
    /* Worked example 1: trits (2,1,0,2,1) at elements m, m+32, ..., m+128 → 0xCF. */
    float x[256] = {0};
    x[0] = 1, x[32] = 0, x[64] = -1, x[96] = 1, x[128] = 0;
    for (int e = 1; e < 256; e++)
        if (e % 32 && e < 160) x[e] = 0;
    x[1] = 1; /* keep amax = 1 regardless */
    uint8_t got[54];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_TQ1_0, x, got, 256));
    ASSERT_EQ(got[0], 0xCF);
    /* All-zero trits (value 0 → trit 1) give 128 bytes; worked example 2 for qh: (1,2,0,1). */
    memset(x, 0, sizeof x);
    x[1] = 1;
    x[241] = 1, x[245] = -1, x[249] = 0; /* qh[1]: elements 241, 245, 249, 253 → trits 2,0,1,1 */
    x[240] = 0, x[244] = 1, x[248] = -1, x[252] = 0; /* qh[0]: trits 1,2,0,1 → 0x92 */
    ASSERT_OK(hx_quantize_row(HX_DTYPE_TQ1_0, x, got, 256));
    ASSERT_EQ(got[48], 0x92);
    ASSERT_EQ(got[33], 128);
}

TEST(q1_0_vector_and_example)
{
    float x[128];
    for (int e = 0; e < 128; e++) x[e] = (e % 3 == 0 ? -1.0f : 1.0f) * (0.1f + 0.01f * (float)(e % 5));
    static const uint8_t want[18] = {0xAA, 0x2F, 0xB6, 0x6D, 0xDB, 0xB6, 0x6D, 0xDB, 0xB6,
                                     0x6D, 0xDB, 0xB6, 0x6D, 0xDB, 0xB6, 0x6D, 0xDB, 0xB6};
    uint8_t got[18];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q1_0, x, got, 128));
    ASSERT_TRUE(hx_t_bytes_eq(got, want, 18));
    float y[128];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q1_0, got, y, 128));
    ASSERT_NEAR(y[0], -0.11975098, 1e-7);
    ASSERT_NEAR(y[1], 0.11975098, 1e-7);
    static const float s[8] = {-1, 1, 1, -1, 1, 1, -1, 1};
    for (int e = 0; e < 128; e++) x[e] = 0.5f * s[e % 8];
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q1_0, x, got, 128));
    ASSERT_EQ(got[0], 0x00);
    ASSERT_EQ(got[1], 0x38);
    ASSERT_EQ(got[2], 0xB6);
}

/* docs/weights.md, Q2_0 worked example: 0.5, 0, -0.5, 0.5 then 60 zeros. */
TEST(q2_0_example)
{
    float x[64] = {0.5f, 0.0f, -0.5f, 0.5f};
    static const uint8_t want[18] = {0x00, 0x38, 0x86, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55,
                                     0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
    uint8_t got[18];
    ASSERT_EQ(hx_dtype_block_bytes(HX_DTYPE_Q2_0), 18);
    ASSERT_EQ(hx_dtype_block_elems(HX_DTYPE_Q2_0), 64);
    ASSERT_EQ(hx_dtype_to_ggml(HX_DTYPE_Q2_0), 42);
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q2_0, x, got, 64));
    ASSERT_TRUE(hx_t_bytes_eq(got, want, 18));
    float y[64];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q2_0, got, y, 64));
    for (int j = 0; j < 64; j++) ASSERT_NEAR(y[j], x[j], 0);
}

/* Hand-made Q2_0 bytes: LSB first, code q is (q - 1)·d, including the +2 level (code 3) that
 * the reference quantizer never writes. */
TEST(q2_0_hand_bytes)
{
    uint8_t b[36] = {0x00, 0xB4}; /* d = -0.25 (fp16 0xB400) */
    b[2] = 0xE4;                  /* codes 0, 1, 2, 3 → +0.25, 0, -0.25, -0.5 */
    b[17] = 0x1B;                 /* elements 60..63: codes 3, 2, 1, 0 */
    memset(b + 3, 0x55, 14);
    b[18] = 0x00, b[19] = 0x40;   /* block 2: d = 2 */
    memset(b + 20, 0xAA, 16);     /* every code 2: +2 */
    float y[128];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q2_0, b, y, 128));
    static const float first[4] = {0.25f, 0.0f, -0.25f, -0.5f}, last[4] = {-0.5f, -0.25f, 0.0f, 0.25f};
    for (int j = 0; j < 4; j++) ASSERT_NEAR(y[j], first[j], 0);
    for (int j = 4; j < 60; j++) ASSERT_NEAR(y[j], 0, 0);
    for (int j = 0; j < 4; j++) ASSERT_NEAR(y[60 + j], last[j], 0);
    for (int j = 64; j < 128; j++) ASSERT_NEAR(y[j], 2.0, 0);
    /* beyond +d is clamped to code 3 only past 1.5·amax, which amax = max|x| rules out: the
     * largest value quantizes to code 2, and -amax to code 0 */
    float x[64];
    for (int j = 0; j < 64; j++) x[j] = (j % 4 == 0 ? -3.0f : 0.9f) * (float)((j % 3) + 1) / 3.0f;
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q2_0, x, b, 64));
    for (int j = 0; j < 64; j++) {
        int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
        ASSERT_TRUE(q <= 2);
        ASSERT_EQ(q, (int)roundf(x[j] / 3.0f) + 1);
    }
}

/* docs/weights.md, I2_S worked examples 1 and 2: hand-made bytes → values, and back. */
TEST(i2_s_examples)
{
    ASSERT_EQ(hx_dtype_block_elems(HX_DTYPE_I2_S), 128);
    ASSERT_EQ(hx_dtype_row_bytes(HX_DTYPE_I2_S, 2560), 640);
    ASSERT_EQ(hx_dtype_to_ggml(HX_DTYPE_I2_S), 36);
    ASSERT_EQ(hx_dtype_tail_bytes(HX_DTYPE_I2_S), 32);
    ASSERT_EQ(hx_dtype_tail_bytes(HX_DTYPE_TQ2_0), 0);
    /* example 1: 0..31 = +1, 32..63 = 0, 64..95 = -1, 96..127 alternate +1, -1 */
    uint8_t b[32 + 32];
    for (int k = 0; k < 32; k++) b[k] = k % 2 ? 0x90 : 0x92;
    float y[128], x[128];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_I2_S, b, y, 128));
    for (int j = 0; j < 128; j++) {
        x[j] = j < 32 ? 1.0f : j < 64 ? 0.0f : j < 96 ? -1.0f : (j % 2 ? -1.0f : 1.0f);
        ASSERT_NEAR(y[j], x[j], 0);
    }
    /* with the tensor scale 0.75 the values scale, and quantizing them gives the same bytes
     * and a tail of 00 00 40 3F (0.75) and 28 zero bytes */
    ASSERT_OK(hx_dequantize_row_scaled(HX_DTYPE_I2_S, b, y, 128, 0.75f));
    for (int j = 0; j < 128; j++) ASSERT_NEAR(y[j], 0.75 * x[j], 0);
    uint8_t got[64];
    memset(got, 0xEE, sizeof got);
    ASSERT_EQ(hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 1, 128), 64);
    ASSERT_OK(hx_quantize_tensor(HX_DTYPE_I2_S, y, got, 1, 128));
    ASSERT_TRUE(hx_t_bytes_eq(got, b, 32));
    static const uint8_t tail[32] = {0x00, 0x00, 0x40, 0x3F};
    ASSERT_TRUE(hx_t_bytes_eq(got + 32, tail, 32));
    float s = 0;
    ASSERT_OK(hx_dtype_tensor_scale(HX_DTYPE_I2_S, got, 1, 128, &s));
    ASSERT_NEAR(s, 0.75, 0);
    /* example 2: zeros but v[0] = +1, v[33] = -1, v[127] = +1 → 95 45 55 ... 55 56 */
    memset(x, 0, sizeof x);
    x[0] = 1, x[33] = -1, x[127] = 1;
    ASSERT_OK(hx_quantize_row(HX_DTYPE_I2_S, x, got, 128));
    ASSERT_EQ(got[0], 0x95);
    ASSERT_EQ(got[1], 0x45);
    for (int k = 2; k < 31; k++) ASSERT_EQ(got[k], 0x55);
    ASSERT_EQ(got[31], 0x56);
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_I2_S, got, y, 128));
    for (int j = 0; j < 128; j++) ASSERT_NEAR(y[j], x[j], 0);
    /* all-zero weights are 0x55, not 0x00 (which is all -1); code 3 decodes as +2 */
    memset(b, 0x00, 32);
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_I2_S, b, y, 128));
    ASSERT_NEAR(y[77], -1, 0);
    memset(b, 0xFF, 32);
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_I2_S, b, y, 128));
    ASSERT_NEAR(y[5], 2, 0);
}

/* bitnet.cpp's quantizer: |x| < 1e-6 is zero, anything else its sign, whatever the scale; the
 * tensor scale is max |x| over every row; the shapes of BitNet b1.58 2B4T take n/4 + 32. */
TEST(i2_s_tensor)
{
    float x[3 * 256];
    for (int i = 0; i < 3 * 256; i++) x[i] = 0.5f * (float)((i * 7) % 3 - 1);
    x[5] = 5e-7f, x[6] = -2e-6f, x[700] = -1.25f; /* zero, -1 (a sign), and the tensor's max */
    uint8_t q[3 * 64 + 32];
    ASSERT_EQ(hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 3, 256), sizeof q);
    ASSERT_OK(hx_quantize_tensor(HX_DTYPE_I2_S, x, q, 3, 256));
    float s, y[256];
    ASSERT_OK(hx_dtype_tensor_scale(HX_DTYPE_I2_S, q, 3, 256, &s));
    ASSERT_NEAR(s, 1.25, 0);
    for (int i = 196; i < 224; i++) ASSERT_EQ(q[i], 0);
    for (int r = 0; r < 3; r++) {
        ASSERT_OK(hx_dequantize_row_scaled(HX_DTYPE_I2_S, q + 64 * r, y, 256, s));
        for (int c = 0; c < 256; c++) {
            float v = x[256 * r + c], want = fabsf(v) < 1e-6f ? 0.0f : v > 0 ? 1.25f : -1.25f;
            ASSERT_NEAR(y[c], want, 0);
        }
    }
    /* worked example 3 and the whole published file: attn_q 2560 x 2560 is 1,638,432 bytes */
    ASSERT_EQ(hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 2560, 2560), 1638432);
    size_t layer = 2 * hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 2560, 2560) +
                   2 * hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 640, 2560) +
                   2 * hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 6912, 2560) +
                   hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 2560, 6912);
    ASSERT_EQ(layer, 17367264);
    /* rows must be whole blocks of 128; a tail that is not a finite f32 is refused */
    ASSERT_EQ(hx_dtype_tensor_bytes(HX_DTYPE_I2_S, 2, 192), 0);
    ASSERT_TRUE(hx_quantize_row(HX_DTYPE_I2_S, x, q, 64) == HX_E_INVAL);
    ASSERT_TRUE(hx_quantize_tensor(HX_DTYPE_I2_S, x, q, 3, 64) == HX_E_INVAL);
    memcpy(q + 192, &(uint32_t){0x7FC00000u}, 4);
    ASSERT_TRUE(hx_dtype_tensor_scale(HX_DTYPE_I2_S, q, 3, 256, &s) == HX_E_FORMAT);
    /* other types: no tail, scale 1 */
    ASSERT_OK(hx_dtype_tensor_scale(HX_DTYPE_Q8_0, q, 1, 32, &s));
    ASSERT_NEAR(s, 1, 0);
    ASSERT_EQ(hx_dtype_tensor_bytes(HX_DTYPE_Q2_0, 3, 128), 3 * 36);
}

/* Ternary values with one scale (fp16-exact) survive both types exactly; random data keeps
 * Q2_0 within what two bits per 64 with an amax scale allow. */
TEST(q2_0_i2_s_round_trip)
{
    float x[512], y[512];
    uint8_t buf[512];
    uint64_t r = 777;
    for (int i = 0; i < 512; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 0.375f * (float)((int)((r >> 33) % 3) - 1);
    }
    x[0] = 0.375f;
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q2_0, x, buf, 512));
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q2_0, buf, y, 512));
    for (int i = 0; i < 512; i++) ASSERT_NEAR(y[i], x[i], 0);
    ASSERT_OK(hx_quantize_tensor(HX_DTYPE_I2_S, x, buf, 2, 256));
    float s;
    ASSERT_OK(hx_dtype_tensor_scale(HX_DTYPE_I2_S, buf, 2, 256, &s));
    for (int row = 0; row < 2; row++) {
        ASSERT_OK(hx_dequantize_row_scaled(HX_DTYPE_I2_S, buf + 64 * row, y, 256, s));
        for (int i = 0; i < 256; i++) ASSERT_NEAR(y[i], x[256 * row + i], 0);
    }
    for (int i = 0; i < 512; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
    }
    ASSERT_OK(hx_quantize_row(HX_DTYPE_Q2_0, x, buf, 512));
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q2_0, buf, y, 512));
    double num = 0, den = 0;
    for (int i = 0; i < 512; i++) num += (x[i] - y[i]) * (double)(x[i] - y[i]), den += (double)x[i] * x[i];
    /* uniform x in a block of amax A: error uniform in ±A/2 → NMSE ≈ (A²/12) / (A²/3) = 0.25 */
    ASSERT_TRUE(num / den < 0.3 && num / den > 0.1);
}

TEST(q4_k_scale_packing)
{
    /* Decode a hand-packed block: scales 81 82 43 FF C5 06 47 C8 C8 91 F1 0E carry
     * sc = {1,2,3,63,40,33,17,62}, m = {5,6,7,8,60,9,31,48}. With d = 1, dmin = 1 and all
     * codes 0, element e of sub-block j decodes to -m_j; with codes 1, to sc_j - m_j. */
    uint8_t b[144] = {0};
    b[0] = 0x00, b[1] = 0x3C; /* d = 1.0 */
    b[2] = 0x00, b[3] = 0x3C; /* dmin = 1.0 */
    static const uint8_t sc[12] = {0x81, 0x82, 0x43, 0xFF, 0xC5, 0x06, 0x47, 0xC8, 0xC8, 0x91, 0xF1, 0x0E};
    memcpy(b + 4, sc, 12);
    memset(b + 16, 0x11, 128); /* every code 1 */
    float y[256];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q4_K, b, y, 256));
    static const int s[8] = {1, 2, 3, 63, 40, 33, 17, 62}, m[8] = {5, 6, 7, 8, 60, 9, 31, 48};
    for (int j = 0; j < 8; j++) ASSERT_NEAR(y[32 * j + 5], s[j] - m[j], 0);
}

TEST(q6_k_element_200)
{
    uint8_t b[210] = {0};
    b[208] = 0x00, b[209] = 0x3C; /* d = 1 */
    b[192 + 12] = 2;              /* scales[12] */
    b[64 + 8] = 0x50;             /* ql[72] high nibble 5 */
    b[128 + 32 + 8] = 0x20;       /* qh[40] bits 4-5 = 2 */
    float y[256];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q6_K, b, y, 256));
    ASSERT_NEAR(y[200], 2.0 * ((5 | 2 << 4) - 32), 0);
}

/* Q5_K (176 bytes: d, dmin, Q4_K's scales, qh[32], qs[128]): element 64c + l takes the low
 * nibble of qs[32c + l] (l < 32) or the high nibble of qs[32c + l - 32], and bit 2c (low) or
 * 2c + 1 (high) of qh[l mod 32] as its fifth bit (ggml's dequantize_row_q5_K). Element 200 =
 * 64·3 + 8: the low nibble of qs[104] and bit 6 of qh[8]; 233 = 64·3 + 41: the high nibble of
 * qs[105] and bit 7 of qh[9]; 170 = 64·2 + 42: the high nibble of qs[74] and bit 5 of qh[10];
 * 138 = 64·2 + 10: the low nibble of qs[74] and bit 4 of qh[10]. The scales are those of
 * q4_k_scale_packing (sub-block j = e / 32: 4 → sc 40, m 60; 5 → 33, 9; 6 → 17, 31; 7 → 62, 48). */
TEST(q5_k_elements)
{
    uint8_t b[176] = {0};
    b[0] = 0x00, b[1] = 0x3C; /* d = 1 */
    b[2] = 0x00, b[3] = 0x3C; /* dmin = 1 */
    static const uint8_t sc[12] = {0x81, 0x82, 0x43, 0xFF, 0xC5, 0x06, 0x47, 0xC8, 0xC8, 0x91, 0xF1, 0x0E};
    memcpy(b + 4, sc, 12);
    uint8_t *qh = b + 16, *qs = b + 48;
    qs[104] = 0x0B;   /* element 200: low nibble 11 */
    qh[8] = 1u << 6;  /* element 200: fifth bit set -> 27 */
    qs[105] = 0x70;   /* element 233: high nibble 7 */
    qh[9] = 1u << 7;  /* element 233: fifth bit set -> 23 */
    qh[10] = 1u << 5; /* element 170's fifth bit; 138's (bit 4) stays 0 */
    float y[256];
    ASSERT_OK(hx_dequantize_row(HX_DTYPE_Q5_K, b, y, 256));
    ASSERT_NEAR(y[200], 17.0 * 27 - 31, 0);
    ASSERT_NEAR(y[233], 62.0 * 23 - 48, 0);
    ASSERT_NEAR(y[201], 17.0 * 0 - 31, 0);
    ASSERT_NEAR(y[138], 40.0 * 0 - 60, 0);
    ASSERT_NEAR(y[170], 33.0 * 16 - 9, 0);
    ASSERT_EQ(hx_dtype_block_bytes(HX_DTYPE_Q5_K), 176);
    ASSERT_EQ(hx_dtype_to_ggml(HX_DTYPE_Q5_K), 13);
}

TEST(fp16_bf16)
{
    ASSERT_EQ(hx_fp32_to_fp16(65504.0f), 0x7BFF);
    ASSERT_EQ(hx_fp32_to_fp16(1.0f), 0x3C00);
    ASSERT_EQ(hx_fp32_to_fp16(INFINITY), 0x7C00);
    ASSERT_TRUE(isnan(hx_fp16_to_fp32(0x7E00)));
    ASSERT_NEAR(hx_fp16_to_fp32(0x0001), 5.9604645e-8, 1e-13);
    ASSERT_EQ(hx_fp32_to_fp16(0.02f), 0x251F);
    ASSERT_EQ(hx_fp32_to_bf16(1.0f), 0x3F80);
    ASSERT_NEAR(hx_bf16_to_fp32(0x3F80), 1.0, 0);
    uint32_t nan_bits = 0x7F800001u;
    float nanf_;
    memcpy(&nanf_, &nan_bits, 4);
    ASSERT_EQ(hx_fp32_to_bf16(nanf_) & 0x40, 0x40);
}

/* Every type round-trips random data within a bound set by its bits per weight. */
TEST(round_trip_error)
{
    static const struct { enum hx_dtype t; double max_nmse; } cases[] = {
        {HX_DTYPE_F32, 0}, {HX_DTYPE_F16, 1e-6}, {HX_DTYPE_BF16, 1e-4}, {HX_DTYPE_Q8_0, 1e-4},
        {HX_DTYPE_Q6_K, 1e-3}, {HX_DTYPE_Q5_K, 3e-3}, {HX_DTYPE_Q4_K, 1e-2}, {HX_DTYPE_Q4_0, 2e-2},
    };
    float x[512], y[512];
    uint8_t buf[4096];
    uint64_t r = 12345;
    for (int i = 0; i < 512; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ASSERT_OK(hx_quantize_row(cases[c].t, x, buf, 512));
        ASSERT_OK(hx_dequantize_row(cases[c].t, buf, y, 512));
        double num = 0, den = 0;
        for (int i = 0; i < 512; i++) num += (x[i] - y[i]) * (double)(x[i] - y[i]), den += (double)x[i] * x[i];
        if (num / den > cases[c].max_nmse)
            HX_FAIL_AT("%s: nmse %g > %g", hx_dtype_name(cases[c].t), num / den, cases[c].max_nmse);
    }
    ASSERT_EQ(hx_dtype_row_bytes(HX_DTYPE_Q1_0, 256), 36);
    ASSERT_EQ(hx_dtype_row_bytes(HX_DTYPE_TQ1_0, 256), 54);
    ASSERT_EQ(hx_dtype_row_bytes(HX_DTYPE_Q8_0, 33), 0);
    ASSERT_TRUE(hx_quantize_row(HX_DTYPE_Q8_0, x, buf, 33) != 0);
}

TEST_MAIN()
