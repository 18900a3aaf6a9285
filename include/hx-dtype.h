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
    HX_DTYPE_COUNT
};

HX_API const char *hx_dtype_name(enum hx_dtype t);       /* "Q8_0"; "?" if out of range */
HX_API int hx_dtype_from_name(const char *name, enum hx_dtype *out); /* case-insensitive */
HX_API int64_t hx_dtype_block_elems(enum hx_dtype t);    /* 1, 32, 128 or 256 */
HX_API size_t hx_dtype_block_bytes(enum hx_dtype t);
HX_API uint32_t hx_dtype_to_ggml(enum hx_dtype t);       /* GGUF/ggml type id */
HX_API int hx_dtype_from_ggml(uint32_t ggml_type, enum hx_dtype *out); /* HX_E_UNSUPPORTED */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
HX_API size_t hx_dtype_row_bytes(enum hx_dtype t, int64_t n);
HX_API bool hx_dtype_is_quantized(enum hx_dtype t);

/* Reference (de)quantization, bit-exact with formats.md §3. n must be a multiple of the
 * block size. Quantize returns HX_E_INVAL otherwise. */
HX_API int hx_dequantize_row(enum hx_dtype t, const void *src, float *dst, int64_t n);
HX_API int hx_quantize_row(enum hx_dtype t, const float *src, void *dst, int64_t n);

HX_API float hx_fp16_to_fp32(uint16_t h);
HX_API uint16_t hx_fp32_to_fp16(float f);   /* round to nearest even */
HX_API float hx_bf16_to_fp32(uint16_t h);
HX_API uint16_t hx_fp32_to_bf16(float f);   /* ggml's rounding, NaN quieted */

#ifdef __cplusplus
}
#endif
