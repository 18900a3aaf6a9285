/*
 * hip-attn.h — the prefill attention kernel of the HIP module (flash-style tiles, f32 SIMT).
 * hx_hip_attn (hip-ops.h) runs one block per (head, row) and so reads the whole context of
 * K and V once per query row; hx_hip_attn_flash runs one block per (head, tile of
 * HX_HIP_FA_BR batch rows) and stages the keys and values in shared memory HX_HIP_FA_BC
 * positions at a time, once for all the tile's rows.
 *
 * Semantics are hx_hip_attn's exactly: row r (query head h, KV head h / (n_head /
 * n_head_kv)) attends to positions 0 .. pos[r] of cache rows seq[r] * n_ctx + t. Rows of a
 * tile may have any positions (the keys visited run to the largest one; each row masks the
 * positions past its own) and any sequences (one pass over the keys per distinct sequence in
 * the tile, the other rows masked; a single-sequence prefill makes one pass). Per row an
 * online softmax: running max and sum in shared memory, the accumulator rescaled per tile.
 *
 * Thread layout (128 threads): scores — thread t takes key t % BC of the tile and rows
 * t / BC + 8i (i < 4), reading each staged key element once for four rows; output — thread t
 * owns dim t % hd of rows t / hd + (128 / hd) k, so head_dim must divide 128 (the module
 * falls back to hx_hip_attn otherwise, and for head_dim > HX_HIP_FA_HD).
 */
#pragma once

#define HX_HIP_FA_BR 32      /* query rows per block */
#define HX_HIP_FA_BC 16      /* key positions per staged tile */
#define HX_HIP_FA_HD 128     /* largest head_dim (which must divide 128) */
#define HX_HIP_FA_THREADS 128
#define HX_HIP_FA_ACC (HX_HIP_FA_BR * HX_HIP_FA_HD / HX_HIP_FA_THREADS)

/* true when hx_hip_attn_flash handles head_dim hd */
static inline __host__ __device__ bool hx_hip_attn_flash_ok(int hd)
{
    return hd > 0 && hd <= HX_HIP_FA_HD && HX_HIP_FA_THREADS % hd == 0;
}

__global__ void __launch_bounds__(HX_HIP_FA_THREADS)
    hx_hip_attn_flash(const float *q, int64_t q_stride, const float *kc, int64_t kc_stride,
                      const float *vc, int64_t vc_stride, float *dst, int64_t dst_stride,
                      int n_head, int n_head_kv, int hd, float scale, int64_t n_ctx, int64_t n,
                      const int32_t *pos, const int32_t *seq)
{
    __shared__ float qs[HX_HIP_FA_BR][HX_HIP_FA_HD + 1]; /* +1: rows on different banks */
    __shared__ float ks[HX_HIP_FA_BC][HX_HIP_FA_HD + 1];
    __shared__ float vs[HX_HIP_FA_BC][HX_HIP_FA_HD];
    __shared__ float ps[HX_HIP_FA_BR][HX_HIP_FA_BC + 1];
    __shared__ float sm[HX_HIP_FA_BR], sl[HX_HIP_FA_BR], sf[HX_HIP_FA_BR];
    __shared__ int32_t rp[HX_HIP_FA_BR], rs[HX_HIP_FA_BR];
    const int tid = threadIdx.x, h = blockIdx.x, kvh = h / (n_head / n_head_kv);
    const int nrp = HX_HIP_FA_THREADS / hd, dcol = tid % hd, rph = tid / hd;
    const int sj = tid % HX_HIP_FA_BC, srow = tid / HX_HIP_FA_BC;
    const int srstep = HX_HIP_FA_THREADS / HX_HIP_FA_BC;
    const int64_t ko = (int64_t)kvh * hd;
    for (int64_t r0 = (int64_t)blockIdx.y * HX_HIP_FA_BR; r0 < n;
         r0 += (int64_t)gridDim.y * HX_HIP_FA_BR) {
        if (tid < HX_HIP_FA_BR) {
            const bool in = r0 + tid < n;
            rp[tid] = in ? pos[r0 + tid] : -1;
            rs[tid] = in ? seq[r0 + tid] : -1;
        }
        for (int e = tid; e < HX_HIP_FA_BR * hd; e += HX_HIP_FA_THREADS) {
            const int i = e / hd, dd = e % hd;
            qs[i][dd] = r0 + i < n ? scale * q[(r0 + i) * q_stride + (int64_t)h * hd + dd] : 0.0f;
        }
        __syncthreads();
        int32_t done = -1; /* passes run in increasing sequence id */
        for (;;) {
            int32_t s = 0x7fffffff, tmax = -1;
            for (int i = 0; i < HX_HIP_FA_BR; i++)
                if (rs[i] > done && rs[i] < s) s = rs[i];
            if (s == 0x7fffffff) break; /* every thread sees the same shared state */
            for (int i = 0; i < HX_HIP_FA_BR; i++)
                if (rs[i] == s && rp[i] > tmax) tmax = rp[i];
            done = s;
            if (tid < HX_HIP_FA_BR) sm[tid] = -INFINITY, sl[tid] = 0.0f;
            float acc[HX_HIP_FA_ACC];
            for (int k = 0; k < HX_HIP_FA_ACC; k++) acc[k] = 0.0f;
            const int64_t row0 = (int64_t)s * n_ctx;
            for (int32_t t0 = 0; t0 <= tmax; t0 += HX_HIP_FA_BC) {
                for (int e = tid; e < HX_HIP_FA_BC * hd; e += HX_HIP_FA_THREADS) {
                    const int j = e / hd, dd = e % hd;
                    const int32_t t = t0 + j;
                    const bool in = t <= tmax; /* positions past the tile's last stay unread */
                    ks[j][dd] = in ? kc[(row0 + t) * kc_stride + ko + dd] : 0.0f;
                    vs[j][dd] = in ? vc[(row0 + t) * vc_stride + ko + dd] : 0.0f;
                }
                __syncthreads();
                float sc[HX_HIP_FA_BR / (HX_HIP_FA_THREADS / HX_HIP_FA_BC)];
                for (int i = 0; i < HX_HIP_FA_BR / srstep; i++) sc[i] = 0.0f;
                for (int dd = 0; dd < hd; dd++) {
                    const float kv = ks[sj][dd];
                    for (int i = 0; i < HX_HIP_FA_BR / srstep; i++)
                        sc[i] += qs[srow + srstep * i][dd] * kv;
                }
                for (int i = 0; i < HX_HIP_FA_BR / srstep; i++) {
                    const int row = srow + srstep * i;
                    ps[row][sj] = rs[row] == s && t0 + sj <= rp[row] ? sc[i] : -INFINITY;
                }
                __syncthreads();
                if (tid < HX_HIP_FA_BR) { /* the row's running max and sum */
                    float mt = -INFINITY;
                    for (int j = 0; j < HX_HIP_FA_BC; j++) mt = fmaxf(mt, ps[tid][j]);
                    const float m = sm[tid], mn = fmaxf(m, mt);
                    if (mn == -INFINITY) { /* a row of another sequence (or past n) */
                        sf[tid] = 1.0f;
                        for (int j = 0; j < HX_HIP_FA_BC; j++) ps[tid][j] = 0.0f;
                    } else {
                        float l = 0.0f;
                        for (int j = 0; j < HX_HIP_FA_BC; j++) {
                            const float e = expf(ps[tid][j] - mn);
                            ps[tid][j] = e;
                            l += e;
                        }
                        const float f = expf(m - mn); /* 0 on the first tile */
                        sl[tid] = sl[tid] * f + l;
                        sm[tid] = mn;
                        sf[tid] = f;
                    }
                }
                __syncthreads();
                float v[HX_HIP_FA_BC];
                for (int j = 0; j < HX_HIP_FA_BC; j++) v[j] = vs[j][dcol];
                for (int k = 0; k < HX_HIP_FA_ACC; k++) {
                    const int row = rph + nrp * k;
                    if (row >= HX_HIP_FA_BR) break;
                    float a = 0.0f;
                    for (int j = 0; j < HX_HIP_FA_BC; j++) a += ps[row][j] * v[j];
                    acc[k] = acc[k] * sf[row] + a;
                }
                __syncthreads(); /* ks, vs, ps and the stats are rewritten next tile */
            }
            for (int k = 0; k < HX_HIP_FA_ACC; k++) {
                const int row = rph + nrp * k;
                if (row >= HX_HIP_FA_BR) break;
                if (rs[row] == s)
                    dst[(r0 + row) * dst_stride + (int64_t)h * hd + dcol] = acc[k] / sl[row];
            }
            __syncthreads(); /* sm, sl are reset by the next pass */
        }
        __syncthreads(); /* rp, rs, qs are rewritten by the next tile of rows */
    }
}

#if !defined(HX_HIP_RTC)
/* HX_HIP_ATTN: which attention kernel a batch of rows runs (hx_hip_attn_op). auto: the
 * flash-style hx_hip_attn_flash from HX_HIP_FA_MIN_ROWS rows (prefill), today's per-row or
 * split decode kernels for fewer rows; flash: the flash kernel for every batch it supports (tests);
 * rows: never the flash kernel. A head_dim the flash kernel does not support runs the
 * per-row kernel under every setting. */
enum hx_hip_attn_mode { HX_HIP_ATTN_AUTO, HX_HIP_ATTN_FLASH, HX_HIP_ATTN_ROWS };
#define HX_HIP_FA_MIN_ROWS 16

/* HX_HIP_ATTN's value as enum hx_hip_attn_mode, or -1. */
static int hx_hip_attn_mode_parse(const char *s)
{
    if (!s || !*s || !strcmp(s, "auto")) return HX_HIP_ATTN_AUTO;
    if (!strcmp(s, "flash")) return HX_HIP_ATTN_FLASH;
    if (!strcmp(s, "rows")) return HX_HIP_ATTN_ROWS;
    return -1;
}
#endif
