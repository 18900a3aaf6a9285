/*
 * hx-dtype.h — the weight types and their quantization: the types the engine computes with,
 * their names and block geometry, the mapping to and from GGUF (ggml) type ids, reference
 * (de)quantization bit-exact with formats.md §3, and f16/bf16 conversion. Pure functions of
 * their arguments, callable from any thread. Used by the backends (hx-backend.h includes it),
 * by the engine's quantize/mkmodel/bench commands, and by anyone reading or writing weights.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Types the engine computes with. Values are our own; hx_dtype_from_ggml maps GGUF ids. */
enum hx_dtype {
    HX_DTYPE_F32,
    HX_DTYPE_F16,
    HX_DTYPE_BF16,
    HX_DTYPE_Q8_0,
    HX_DTYPE_Q4_0,
    HX_DTYPE_Q4_K,
    HX_DTYPE_Q6_K,
    HX_DTYPE_TQ1_0,
    HX_DTYPE_TQ2_0,
    HX_DTYPE_Q1_0,
    HX_DTYPE_Q2_0,   /* mainline ggml 42: 64 per 18-byte block, fp16 d, codes (q - 1)·d */
    HX_DTYPE_I2_S,   /* bitnet.cpp 36: ternary codes, one f32 scale per tensor (a tail) */
    HX_DTYPE_Q5_K,   /* ggml 13: 256 per 176-byte block, Q4_K's scales plus a fifth bit */
    HX_DTYPE_COUNT
};

HX_API const char *hx_dtype_name(enum hx_dtype t);       /* "Q8_0"; "?" if out of range */
HX_API int hx_dtype_from_name(const char *name, enum hx_dtype *out); /* case-insensitive */
HX_API int64_t hx_dtype_block_elems(enum hx_dtype t);    /* 1, 32, 64, 128 or 256 */
HX_API size_t hx_dtype_block_bytes(enum hx_dtype t);
HX_API uint32_t hx_dtype_to_ggml(enum hx_dtype t);       /* GGUF/ggml type id */
HX_API int hx_dtype_from_ggml(uint32_t ggml_type, enum hx_dtype *out); /* HX_E_UNSUPPORTED */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
HX_API size_t hx_dtype_row_bytes(enum hx_dtype t, int64_t n);
HX_API bool hx_dtype_is_quantized(enum hx_dtype t);

/* Reference (de)quantization, bit-exact with formats.md §3. n must be a multiple of the
 * block size. Quantize returns HX_E_INVAL otherwise. For a type with a tensor scale (I2_S,
 * below) the row functions work at scale 1: dequantize gives the code values (-1, 0, +1; +2
 * for the code 3 no quantizer writes), quantize writes the codes (bitnet.cpp's rule: |x| <
 * 1e-6 is 0, else the sign, whatever the scale). */
HX_API int hx_dequantize_row(enum hx_dtype t, const void *src, float *dst, int64_t n);
HX_API int hx_quantize_row(enum hx_dtype t, const float *src, void *dst, int64_t n);

/*
 * Tensor scales (docs/weights.md). I2_S keeps no scale in its blocks: its rows hold codes
 * only, and one f32 scale for the whole tensor sits in a 32-byte tail after the last row
 * (bytes 0..3 the scale, little-endian; the rest zero). Its tensor is n_rows × row bytes +
 * 32 bytes, not a whole number of blocks. The scale multiplies every element as a block's d
 * does. Every other type has no tail and a scale of 1.
 */
HX_API size_t hx_dtype_tail_bytes(enum hx_dtype t);      /* 32 for I2_S, else 0 */
/* Bytes of a whole tensor of n_rows rows of n_cols: the rows and the tail; 0 if n_cols is not
 * a multiple of the block size, n_rows < 0, or the size overflows. */
HX_API size_t hx_dtype_tensor_bytes(enum hx_dtype t, int64_t n_rows, int64_t n_cols);
/* The tensor scale of data, hx_dtype_tensor_bytes(t, n_rows, n_cols) bytes of type t: the f32
 * in I2_S's tail, 1 for the other types. HX_E_FORMAT (with a message) if it is not finite,
 * HX_E_INVAL for a bad shape. */
HX_API int hx_dtype_tensor_scale(enum hx_dtype t, const void *data, int64_t n_rows,
                                 int64_t n_cols, float *scale);
/* Quantize a whole tensor (n_rows × n_cols floats, row-major) into dst,
 * hx_dtype_tensor_bytes(t, n_rows, n_cols) bytes. I2_S: scale = max |x| over the tensor, as
 * bitnet.cpp's quantizer does, written to the tail with 28 zero bytes; the codes as
 * hx_quantize_row. Other types: row by row. */
HX_API int hx_quantize_tensor(enum hx_dtype t, const float *src, void *dst, int64_t n_rows,
                              int64_t n_cols);
/* Dequantize row `row` of a tensor whose scale is tensor_scale (hx_dtype_tensor_scale; it is
 * ignored for types without one): hx_dequantize_row times the scale. */
HX_API int hx_dequantize_row_scaled(enum hx_dtype t, const void *src, float *dst, int64_t n,
                                    float tensor_scale);

HX_API float hx_fp16_to_fp32(uint16_t h);
HX_API uint16_t hx_fp32_to_fp16(float f);   /* round to nearest even */
HX_API float hx_bf16_to_fp32(uint16_t h);
HX_API uint16_t hx_fp32_to_bf16(float f);   /* ggml's rounding, NaN quieted */

#ifdef __cplusplus
}
#endif
