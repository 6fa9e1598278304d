/* cuda_attn_naive.cu: the naive sparse MLA decode attention kernel and its
 * launch (cuda_attn_decode in cuda_attn.cu checks the arguments first;
 * contract and math: cuda_attn.h; the device helpers: cuda_attn_dev.cuh).
 *
 * DESIGN
 * naive  (mla_decode_naive_kernel) grid (H, N), 128 threads. The 4 warps of a
 *        block take the sequence's entries j = warp, warp+4, ...; a warp reads
 *        one selected row (lane l owns dims 2l+64i, i < 9), reduces the dot
 *        product with shuffles and keeps its own online softmax (m, l, 16
 *        output dims per lane); the 4 warps merge through shared memory. fp32
 *        FMA only; every block reads its rows itself: KV traffic N*H*k*row.
 *        The seed's slow kernel, kept as the baseline the others are timed
 *        and checked against.
 */
#include "cuda_attn_dev.cuh"

#define NAIVE_THREADS 128

/* Row r of the cache as the 9 float pairs lane owns (dims 2*lane + 64*i,
 * +1): bf16 read as is; fp8 dequantised by the scale of its 128-dim group,
 * its rope (i = 8) read as bf16. */
template <int LAYOUT>
__device__ __forceinline__ static void naive_load_row(float2 (&v)[9], const uint8_t *__restrict__ kv, int64_t r,
                                                      int lane)
{
    if (LAYOUT == CUDA_KV_BF16) {
        const uint32_t *row = reinterpret_cast<const uint32_t *>(kv + (size_t)r * BF16_ROW);
#pragma unroll
        for (int i = 0; i < 9; i++)
            v[i] = bf16x2_to_f2(__ldg(row + lane + 32 * i));
    } else {
        const uint8_t *row = kv + (size_t)r * FP8_ROW;
        const float4 sc = __ldg(reinterpret_cast<const float4 *>(row + FP8_SCALE_OFF));
        const float scs[4] = {sc.x, sc.y, sc.z, sc.w};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float2 f = e4m3x2_to_f2(__ldg(reinterpret_cast<const uint16_t *>(row + 2 * lane + 64 * i)));
            v[i] = make_float2(f.x * scs[i / 2], f.y * scs[i / 2]); /* dims < 64(i+1) <= 128*(i/2+1) */
        }
        v[8] = bf16x2_to_f2(__ldg(reinterpret_cast<const uint32_t *>(row + FP8_ROPE_OFF) + lane));
    }
}

/* The end of the naive kernel: the 4 warps' (m, l, o) merged through shared
 * memory; O / l written to (n, head) row `row` of out, the LSE (natural log)
 * to lse[row] when lse is not NULL. */
__device__ __forceinline__ static void naive_merge(const float2 (&o)[8], float m, float l, int lane, int warp,
                                                   float *out, float *lse, size_t row)
{
    __shared__ float sm_m[4], sm_l[4];
    __shared__ float sm_o[4][DV];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        *reinterpret_cast<float2 *>(&sm_o[warp][2 * lane + 64 * i]) = o[i];
    __syncthreads();
    float mx = fmaxf(fmaxf(sm_m[0], sm_m[1]), fmaxf(sm_m[2], sm_m[3]));
    float w[4], lt = 0.f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        w[k] = mx == -INFINITY ? 0.f : exp2f(sm_m[k] - mx);
        lt += w[k] * sm_l[k];
    }
    float inv = lt > 0.f ? 1.f / lt : 0.f;
    float *oh = out + row * DV;
    for (int d = threadIdx.x; d < DV; d += NAIVE_THREADS) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++)
            acc += w[k] * sm_o[k][d];
        oh[d] = acc * inv;
    }
    if (lse && threadIdx.x == 0)
        lse[row] = lt > 0.f ? (mx + log2f(lt)) * LN2_F : -INFINITY;
}

template <int LAYOUT>
__global__ void __launch_bounds__(NAIVE_THREADS, 4)
mla_decode_naive_kernel(const float *__restrict__ q, const uint8_t *__restrict__ kv, int64_t kv_rows,
                        const int32_t *__restrict__ idx, int heads, int topk, float scale_log2,
                        float *__restrict__ out, float *__restrict__ lse)
{
    const int h = blockIdx.x, n = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float *qh = q + ((size_t)n * heads + h) * DQK;
    const int32_t *idx_seq = idx + (size_t)n * topk;

    /* lane owns dims 2*lane + 64*i (+0, +1), i < 9; i < 8 are the value dims */
    float2 qf[9];
#pragma unroll
    for (int i = 0; i < 9; i++)
        qf[i] = *reinterpret_cast<const float2 *>(qh + 2 * lane + 64 * i);
    float2 o[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        o[i] = make_float2(0.f, 0.f);
    float m = -INFINITY, l = 0.f;

    for (int j = warp; j < topk; j += NAIVE_THREADS / 32) {
        int64_t r = entry_row(idx_seq, j, topk, kv_rows); /* warp-uniform */
        if (r < 0)
            continue;
        float2 v[9];
        naive_load_row<LAYOUT>(v, kv, r, lane);
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < 9; i++)
            dot = fmaf(qf[i].x, v[i].x, fmaf(qf[i].y, v[i].y, dot));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        float s = dot * scale_log2;
        float mn = fmaxf(m, s);               /* finite: s is finite */
        float alpha = exp2f(m - mn);          /* m = -inf -> 0 */
        float p = exp2f(s - mn);
        l = l * alpha + p;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            o[i].x = fmaf(p, v[i].x, o[i].x * alpha);
            o[i].y = fmaf(p, v[i].y, o[i].y * alpha);
        }
        m = mn;
    }
    naive_merge(o, m, l, lane, warp, out, lse, (size_t)n * heads + h);
}

/* ---- host side --------------------------------------------------------------- */

cudaError_t cuda_attn_naive_launch(const cuda_attn_args *a, float scale_log2, cudaStream_t st)
{
    dim3 grid((unsigned)a->heads, (unsigned)a->n_seq);
    if (a->layout == CUDA_KV_BF16)
        LAUNCH(mla_decode_naive_kernel<CUDA_KV_BF16>, grid, NAIVE_THREADS, 0, st)(
            a->q, a->kv, a->kv_rows, a->idx, a->heads, a->topk, scale_log2, a->out, a->lse);
    else
        LAUNCH(mla_decode_naive_kernel<CUDA_KV_FP8_V32>, grid, NAIVE_THREADS, 0, st)(
            a->q, a->kv, a->kv_rows, a->idx, a->heads, a->topk, scale_log2, a->out, a->lse);
    return cudaGetLastError();
}
