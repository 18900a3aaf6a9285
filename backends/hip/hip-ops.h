/*
 * hip-ops.h — the non-matmul kernels of the HIP module (docs/ops.md semantics, ref.c as the
 * definition): embedding lookup, RMS norm (plain and per-head QK norm), RoPE in both pair
 * conventions, the KV-cache store and causal GQA attention over the device-resident cache,
 * SwiGLU, squared-ReLU GLU and add. Every kernel loops rows over gridDim.y, so a batch may
 * exceed the 65535 grid limit. Indices that come from the host (tokens, positions,
 * sequences) are validated by the module before launch.
 */
#pragma once

#include "hip-gemv.h"
#include "hip-mma.h"
#include "hip-attn.h"

#define HX_HIP_ATTN_WARPS 4
#define HX_HIP_HD_MAX 256
#define HX_HIP_ATTN_CHUNK 128 /* positions per block of the split decode attention */

/* dst[r] = row tokens[r] of W, decoded 8 elements per thread and step. */
template <int T>
__global__ void __launch_bounds__(256)
    hx_hip_embed(const uint8_t *W, int64_t row_bytes, int64_t d, const int32_t *tokens, int64_t n,
                 float *dst, int64_t dst_stride, float ts)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const uint8_t *wr = W + (int64_t)tokens[r] * row_bytes;
        float *y = dst + r * dst_stride;
        for (int64_t k = 8 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x); k < d;
             k += 8 * (int64_t)gridDim.x * blockDim.x) {
            if (k + 8 <= d) {
                float v[8];
                hx_hip_dq8<T>(wr, k, v, ts);
                for (int i = 0; i < 8; i++) y[k + i] = v[i];
            } else {
                for (int64_t i = k; i < d; i++) y[i] = hx_hip_dq1<T>(wr, i, ts);
            }
        }
    }
}

/* One 256-thread block per (group, row): sum of squares in double (ref.c's order of
 * operations for the scale), then y = x * scale * gain. */
__global__ void __launch_bounds__(256)
    hx_hip_rms_norm(const float *src, int64_t src_stride, float *dst, int64_t dst_stride,
                    const float *gain, int64_t g, int64_t n_groups, int64_t n, float eps)
{
    __shared__ double part[256];
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
        for (int64_t grp = blockIdx.x; grp < n_groups; grp += gridDim.x) {
            const float *x = src + r * src_stride + grp * g;
            double s = 0.0;
            for (int64_t c = threadIdx.x; c < g; c += blockDim.x) s += (double)x[c] * (double)x[c];
            part[threadIdx.x] = s;
            __syncthreads();
            for (int m = blockDim.x / 2; m > 0; m >>= 1) {
                if ((int)threadIdx.x < m) part[threadIdx.x] += part[threadIdx.x + m];
                __syncthreads();
            }
            const float scale = 1.0f / sqrtf((float)(part[0] / (double)g) + eps);
            float *y = dst + r * dst_stride + grp * g;
            for (int64_t c = threadIdx.x; c < g; c += blockDim.x)
                y[c] = x[c] * scale * (gain ? gain[c] : 1.0f);
            __syncthreads(); /* part[] is reused by the next group */
        }
}

/* Rows of `cols` floats from src to dst (RoPE into a separate destination). */
__global__ void __launch_bounds__(256)
    hx_hip_copy_rows(const float *src, int64_t src_stride, float *dst, int64_t dst_stride,
                     int64_t n, int64_t cols)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)gridDim.x * blockDim.x)
            dst[r * dst_stride + c] = src[r * src_stride + c];
}

/* In place. One thread per rotation pair i, for every head of the row: theta is pos[r]
 * multiplied by theta_scale i times, in the same order as ref.c (and ggml), so the angles
 * are bit-identical to the reference; theta_scale = powf(base, -2 / n_rot) comes from the
 * host for the same reason. */
__global__ void __launch_bounds__(128)
    hx_hip_rope(float *x, int64_t stride, int64_t n, int n_head, int head_dim, int n_rot,
                float theta_scale, float freq_scale, int neox, const float *freqs,
                const int32_t *pos)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rot / 2) return;
    const int ia = neox ? i : 2 * i, ib = neox ? i + n_rot / 2 : 2 * i + 1;
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        float theta = (float)pos[r];
        for (int j = 0; j < i; j++) theta *= theta_scale;
        const float t = (freqs ? theta / freqs[i] : theta) * freq_scale;
        const float cs = cosf(t), sn = sinf(t);
        float *v = x + r * stride;
        for (int h = 0; h < n_head; h++, v += head_dim) {
            const float a = v[ia], b = v[ib];
            v[ia] = a * cs - b * sn;
            v[ib] = a * sn + b * cs;
        }
    }
}

/* k_cache[seq * n_ctx + pos] = k[r], the same for v. */
__global__ void __launch_bounds__(256)
    hx_hip_kv_store(const float *k, int64_t k_stride, const float *v, int64_t v_stride, float *kc,
                    int64_t kc_stride, float *vc, int64_t vc_stride, int64_t width, int64_t n,
                    const int32_t *pos, const int32_t *seq, int64_t n_ctx)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const int64_t dr = (int64_t)seq[r] * n_ctx + pos[r];
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < width;
             c += (int64_t)gridDim.x * blockDim.x) {
            kc[dr * kc_stride + c] = k[r * k_stride + c];
            vc[dr * vc_stride + c] = v[r * v_stride + c];
        }
    }
}

/* Attention of one query row (head h, its KV head kvh) over the cache rows row0 + [t0, t1):
 * each 32-lane group of the block runs an online softmax over every HX_HIP_ATTN_WARPS-th
 * position (lane owns dims lane + 32i), then the groups' (max, sum, accumulator) are merged
 * through shared memory. With ml NULL, out[d] is the attention output (accumulator / sum);
 * else out[d] is the unnormalized accumulator and ml[0], ml[1] the max and the sum (0 for an
 * empty range), a part for hx_hip_attn_combine. Called by every thread of the block. */
static __device__ void hx_hip_attn_range(const float *qr, const float *kc, int64_t kc_stride,
                                         const float *vc, int64_t vc_stride, int64_t row0,
                                         int kvh, int hd, float scale, int32_t t0, int32_t t1,
                                         float *out, float *ml, float *sm, float *sl,
                                         float (*sacc)[HX_HIP_HD_MAX])
{
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    float qv[HX_HIP_HD_MAX / 32], acc[HX_HIP_HD_MAX / 32];
    for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
        const int d = lane + 32 * i;
        qv[i] = d < hd ? qr[d] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int32_t t = t0 + w; t < t1; t += HX_HIP_ATTN_WARPS) {
        const float *kr = kc + (row0 + t) * kc_stride + (int64_t)kvh * hd;
        const float *vr = vc + (row0 + t) * vc_stride + (int64_t)kvh * hd;
        float s = 0.0f;
        for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
            const int d = lane + 32 * i;
            if (d < hd) s += qv[i] * kr[d];
        }
        s = scale * hx_hip_warp_sum(s);
        const float mn = fmaxf(m, s), corr = expf(m - mn), e = expf(s - mn);
        l = l * corr + e;
        for (int i = 0; i < HX_HIP_HD_MAX / 32; i++) {
            const int d = lane + 32 * i;
            acc[i] = acc[i] * corr + (d < hd ? e * vr[d] : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) sm[w] = m, sl[w] = l;
    for (int i = 0; i < HX_HIP_HD_MAX / 32; i++)
        if (lane + 32 * i < hd) sacc[w][lane + 32 * i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < HX_HIP_ATTN_WARPS; i++) M = fmaxf(M, sm[i]);
    float L = 0.0f, f[HX_HIP_ATTN_WARPS];
    for (int i = 0; i < HX_HIP_ATTN_WARPS; i++) {
        f[i] = sl[i] > 0.0f ? expf(sm[i] - M) : 0.0f; /* a group with no positions adds 0 */
        L += sl[i] * f[i];
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float s = 0.0f;
        for (int i = 0; i < HX_HIP_ATTN_WARPS; i++)
            if (f[i] != 0.0f) s += sacc[i][d] * f[i];
        out[d] = ml ? s : s / L;
    }
    if (ml && threadIdx.x == 0) ml[0] = M, ml[1] = L;
    __syncthreads(); /* shared state is reused by the caller's next range */
}

/* One block per (head, row): the whole context of the row (positions 0 .. pos[r] of its
 * sequence). */
__global__ void __launch_bounds__(32 * HX_HIP_ATTN_WARPS)
    hx_hip_attn(const float *q, int64_t q_stride, const float *kc, int64_t kc_stride,
                const float *vc, int64_t vc_stride, float *dst, int64_t dst_stride, int n_head,
                int n_head_kv, int hd, float scale, int64_t n_ctx, int64_t n, const int32_t *pos,
                const int32_t *seq)
{
    __shared__ float sm[HX_HIP_ATTN_WARPS], sl[HX_HIP_ATTN_WARPS];
    __shared__ float sacc[HX_HIP_ATTN_WARPS][HX_HIP_HD_MAX];
    const int h = blockIdx.x, kvh = h / (n_head / n_head_kv);
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
        hx_hip_attn_range(q + r * q_stride + (int64_t)h * hd, kc, kc_stride, vc, vc_stride,
                          (int64_t)seq[r] * n_ctx, kvh, hd, scale, 0, pos[r] + 1,
                          dst + r * dst_stride + (int64_t)h * hd, NULL, sm, sl, sacc);
}

/* Decode attention split over the context (flash-decoding): one block per (head, chunk of
 * HX_HIP_ATTN_CHUNK positions, row) writes its part — max, sum, unnormalized accumulator — at
 * part + ((r * n_head + h) * n_chunk + chunk) * (hd + 2); a chunk past the row's position
 * writes an empty part (sum 0) and exits, so the grid may cover more chunks than the
 * positions need (a graph replayed for later positions, hip-graph.h). hx_hip_attn_combine
 * then merges the parts of each (head, row), so a long context keeps every multiprocessor
 * busy instead of n_head blocks. */
__global__ void __launch_bounds__(32 * HX_HIP_ATTN_WARPS)
    hx_hip_attn_part(const float *q, int64_t q_stride, const float *kc, int64_t kc_stride,
                     const float *vc, int64_t vc_stride, float *part, int n_head, int n_head_kv,
                     int hd, float scale, int64_t n_ctx, int n_chunk, const int32_t *pos,
                     const int32_t *seq)
{
    __shared__ float sm[HX_HIP_ATTN_WARPS], sl[HX_HIP_ATTN_WARPS];
    __shared__ float sacc[HX_HIP_ATTN_WARPS][HX_HIP_HD_MAX];
    const int h = blockIdx.x, kvh = h / (n_head / n_head_kv), ch = blockIdx.y;
    const int64_t r = blockIdx.z;
    const int32_t t0 = ch * HX_HIP_ATTN_CHUNK, end = pos[r] + 1;
    const int32_t t1 = t0 + HX_HIP_ATTN_CHUNK < end ? t0 + HX_HIP_ATTN_CHUNK : end;
    float *pp = part + ((r * n_head + h) * n_chunk + ch) * (int64_t)(hd + 2);
    if (t0 >= end) { /* the whole block: no barrier is left waiting */
        if (threadIdx.x == 0) pp[1] = 0.0f;
        return;
    }
    hx_hip_attn_range(q + r * q_stride + (int64_t)h * hd, kc, kc_stride, vc, vc_stride,
                      (int64_t)seq[r] * n_ctx, kvh, hd, scale, t0, t1, pp + 2, pp, sm, sl, sacc);
}

/* One block per (head, row): the parts of hx_hip_attn_part merged into the output. */
__global__ void __launch_bounds__(128)
    hx_hip_attn_combine(const float *part, float *dst, int64_t dst_stride, int n_head, int hd,
                        int n_chunk)
{
    const int h = blockIdx.x;
    const int64_t r = blockIdx.y;
    const float *pp = part + (r * n_head + h) * (int64_t)n_chunk * (hd + 2);
    float M = -INFINITY;
    for (int c = 0; c < n_chunk; c++)
        if (pp[c * (hd + 2) + 1] > 0.0f) M = fmaxf(M, pp[c * (hd + 2)]);
    float L = 0.0f;
    for (int c = 0; c < n_chunk; c++) {
        const float l = pp[c * (hd + 2) + 1];
        if (l > 0.0f) L += l * expf(pp[c * (hd + 2)] - M);
    }
    float *o = dst + r * dst_stride + (int64_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float s = 0.0f;
        for (int c = 0; c < n_chunk; c++) {
            const float *pc = pp + c * (hd + 2);
            if (pc[1] > 0.0f) s += pc[2 + d] * expf(pc[0] - M);
        }
        o[d] = s / L;
    }
}

enum { HX_HIP_EW_ADD, HX_HIP_EW_SWIGLU, HX_HIP_EW_RELU2 };

__global__ void __launch_bounds__(256)
    hx_hip_eltwise(int kind, const float *a, int64_t a_stride, const float *b, int64_t b_stride,
                   float *y, int64_t y_stride, int64_t n, int64_t f)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < f;
             c += (int64_t)gridDim.x * blockDim.x) {
            const float g = a[r * a_stride + c], u = b[r * b_stride + c];
            float v;
            if (kind == HX_HIP_EW_ADD)
                v = g + u;
            else if (kind == HX_HIP_EW_SWIGLU)
                v = g / (1.0f + expf(-g)) * u;
            else
                v = (g > 0.0f ? g * g : 0.0f) * u;
            y[r * y_stride + c] = v;
        }
}
