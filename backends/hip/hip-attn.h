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
 * owns row t / 4 and the float4 groups of dims 4 (t % 4 + 4i) .. +3 (i < head_dim / 16), so
 * every address it uses is one base plus constant offsets (a layout whose rows depended on
 * head_dim kept 32 row addresses live and spilled 2.6 KB a thread on RDNA: test-hip-isa).
 * head_dim must be a multiple of 4 and at most HX_HIP_FA_HD (the module falls back to
 * hx_hip_attn otherwise).
 */
#pragma once

#define HX_HIP_FA_BR 32      /* query rows per block */
#define HX_HIP_FA_BC 16      /* key positions per staged tile */
#define HX_HIP_FA_HD 128     /* largest head_dim (a multiple of 4) */
#define HX_HIP_FA_THREADS 128
#define HX_HIP_FA_TPR (HX_HIP_FA_THREADS / HX_HIP_FA_BR) /* output threads per row (4) */
#define HX_HIP_FA_G (HX_HIP_FA_HD / 4 / HX_HIP_FA_TPR)    /* float4 groups per thread (8) */

/* true when hx_hip_attn_flash handles head_dim hd */
static inline __host__ __device__ bool hx_hip_attn_flash_ok(int hd)
{
    return hd > 0 && hd <= HX_HIP_FA_HD && hd % 4 == 0;
}

__global__ void __launch_bounds__(HX_HIP_FA_THREADS)
    hx_hip_attn_flash(const float *q, int64_t q_stride, const float *kc, int64_t kc_stride,
                      const float *vc, int64_t vc_stride, float *dst, int64_t dst_stride,
                      int n_head, int n_head_kv, int hd, float scale, int64_t n_ctx, int64_t n,
                      const int32_t *pos, const int32_t *seq)
{
    __shared__ float qs[HX_HIP_FA_BR][HX_HIP_FA_HD + 1]; /* +1: rows on different banks */
    __shared__ float ks[HX_HIP_FA_BC][HX_HIP_FA_HD + 1];
    __shared__ float4 vs[HX_HIP_FA_BC][HX_HIP_FA_HD / 4];
    __shared__ float ps[HX_HIP_FA_BR][HX_HIP_FA_BC + 1];
    __shared__ float sm[HX_HIP_FA_BR], sl[HX_HIP_FA_BR], sf[HX_HIP_FA_BR];
    __shared__ int32_t rp[HX_HIP_FA_BR], rs[HX_HIP_FA_BR], pass[2];
    const int tid = threadIdx.x, h = blockIdx.x, kvh = h / (n_head / n_head_kv);
    const int orow = tid / HX_HIP_FA_TPR, oq = tid % HX_HIP_FA_TPR, ng = hd / 4;
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
            /* the pass's sequence and its largest position, found by one thread (all of them
             * scanning the 64 values kept them in registers next to the accumulators) */
            if (tid == 0) {
                int32_t s = 0x7fffffff, tmax = -1;
                for (int i = 0; i < HX_HIP_FA_BR; i++)
                    if (rs[i] > done && rs[i] < s) s = rs[i];
                for (int i = 0; i < HX_HIP_FA_BR; i++)
                    if (rs[i] == s && rp[i] > tmax) tmax = rp[i];
                pass[0] = s, pass[1] = tmax;
            }
            __syncthreads();
            const int32_t s = pass[0], tmax = pass[1];
            if (s == 0x7fffffff) break; /* every thread sees the same shared state */
            done = s;
            if (tid < HX_HIP_FA_BR) sm[tid] = -INFINITY, sl[tid] = 0.0f;
            float acc[HX_HIP_FA_G][4];
            for (int i = 0; i < HX_HIP_FA_G; i++)
                for (int c = 0; c < 4; c++) acc[i][c] = 0.0f;
            const int64_t row0 = (int64_t)s * n_ctx;
            for (int32_t t0 = 0; t0 <= tmax; t0 += HX_HIP_FA_BC) {
                for (int e = tid; e < HX_HIP_FA_BC * hd; e += HX_HIP_FA_THREADS) {
                    const int j = e / hd, dd = e % hd;
                    const int32_t t = t0 + j;
                    const bool in = t <= tmax; /* positions past the tile's last stay unread */
                    ks[j][dd] = in ? kc[(row0 + t) * kc_stride + ko + dd] : 0.0f;
                    ((float *)vs[j])[dd] = in ? vc[(row0 + t) * vc_stride + ko + dd] : 0.0f;
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
                float p[HX_HIP_FA_BC];
                for (int j = 0; j < HX_HIP_FA_BC; j++) p[j] = ps[orow][j];
                const float f = sf[orow];
                for (int i = 0; i < HX_HIP_FA_G; i++) {
                    const int g = oq + HX_HIP_FA_TPR * i;
                    if (g < ng) {
                        float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        for (int j = 0; j < HX_HIP_FA_BC; j++) {
                            const float4 v = vs[j][g];
                            a[0] += p[j] * v.x, a[1] += p[j] * v.y;
                            a[2] += p[j] * v.z, a[3] += p[j] * v.w;
                        }
                        for (int c = 0; c < 4; c++) acc[i][c] = acc[i][c] * f + a[c];
                    }
                }
                __syncthreads(); /* ks, vs, ps and the stats are rewritten next tile */
            }
            if (rs[orow] == s) { /* rows past n have rs -1 */
                float *o = dst + (r0 + orow) * dst_stride + (int64_t)h * hd;
                const float l = sl[orow];
                for (int i = 0; i < HX_HIP_FA_G; i++) {
                    const int g = oq + HX_HIP_FA_TPR * i;
                    if (g < ng)
                        for (int c = 0; c < 4; c++) o[4 * g + c] = acc[i][c] / l;
                }
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
