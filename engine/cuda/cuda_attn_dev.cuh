/* cuda_attn_dev.cuh (internal to engine/cuda/): the device helpers the
 * attention kernel files share (cuda_attn_naive.cu; cuda_attn.cu: tiled;
 * cuda_attn_v2.cu: v2): sizes of the KV rows and their shared-memory
 * copies, bf16/e4m3 conversions, the PTX wrappers (mma.sync, ldmatrix, cp.async; cuemu defines
 * its own, tools/cuemu/cuemu.h), the index check, the row gather and the fp8
 * dequantisation. Fragment layouts: cuda_attn.cu's opening comment. */
#ifndef LOADLAW_CUDA_ATTN_DEV_CUH
#define LOADLAW_CUDA_ATTN_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_attn.h"
#include "cuda_launch.h"

#define DQK CUDA_ATTN_DQK
#define DV CUDA_ATTN_DV
#define BK CUDA_ATTN_TILE_ROWS /* KV rows per tile: 16 */
#define NST_BF16 CUDA_ATTN_STAGES_BF16 /* bf16 tile stages: 4 */
#define NST_FP8 CUDA_ATTN_STAGES_FP8   /* raw fp8 tile stages: 6 (+ one bf16 tile) */
#define NTN (BK / 8)                   /* n-tiles of 8 rows in a score tile */
#define NKV (BK / 16)                  /* k-steps of 16 rows in P V */
#define ROWE 584               /* bf16 per shared row: 576 + 8 pad = 1168 B */
#define ROWB (ROWE * 2)
#define BF16_ROW 1152
#define FP8_ROW 656
#define FP8_SCALE_OFF 512
#define FP8_ROPE_OFF 528

static_assert(DQK == 4 * 144 && DV == 4 * 128, "warp split of dims");
static_assert(BK % 16 == 0, "P V consumes rows in k-steps of 16");

#define LOG2E_F 1.4426950408889634f
#define LN2_F 0.6931471805599453f

/* ---- small device helpers ------------------------------------------------- */

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ float2 bf16x2_to_f2(uint32_t w)
{
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

/* Two e4m3 bytes (low byte = first value) to floats; e4m3 -> half is exact. */
__device__ __forceinline__ float2 e4m3x2_to_f2(uint16_t w)
{
    __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)w, __NV_E4M3);
    __half2 h(hr);
    return __half22float2(h);
}

#ifndef CUEMU /* the CPU emulation (tools/cuemu/cuemu.h) defines these helpers */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* four 8x8 b16 matrices, lanes 8j..8j+7 giving matrix j's row addresses;
 * lane (g, t) gets (row g, cols 2t, 2t+1) of each: mma B fragments of K */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* 16 bytes global -> shared, L2 only; src_bytes 0 zero-fills the 16 bytes. */
__device__ __forceinline__ void cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gsrc), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* wait until at most N of this thread's most recent groups are pending */
template <int N>
__device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* the block's dynamic shared memory (the launch's third argument) */
__device__ __forceinline__ uint8_t *dyn_smem(void)
{
    extern __shared__ __align__(16) uint8_t smem_[];
    return smem_;
}
#endif /* CUEMU */

/* 2^x by one MUFU.EX2 (ex2.approx.ftz: results below 2^-126 flush to 0,
 * which a softmax weight or rescale factor that small may; exp2f adds a
 * range check and two multiplies around it). cuemu: exp2f. */
__device__ __forceinline__ float fast_exp2(float x)
{
#ifdef CUEMU
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* idx entry -> row, or -1 when invalid (negative, past kv_rows, past kend). */
__device__ __forceinline__ int64_t entry_row(const int32_t *idx_seq, int j, int kend, int64_t kv_rows)
{
    if (j >= kend)
        return -1;
    int32_t r = __ldg(idx_seq + j);
    /* one unsigned compare: a negative entry becomes >= 2^63 */
    return (uint64_t)(int64_t)r < (uint64_t)kv_rows ? (int64_t)r : -1;
}

/* Issue the cp.async copies of tile rows [j0, j0+BK) of one sequence into
 * dst (row stride DST bytes) and record which rows are valid. A warp takes
 * whole rows (warp w: rows w, w + NT/32, ...): its lanes read the row's
 * index once, one broadcast load, and lane l copies the row's 16-byte
 * chunks l, l + 32, ... So the index, its bounds check and the row's
 * address cost once per row, not once per chunk (a thread per chunk of the
 * tile costs ~54 instructions per 16-byte copy on sm_90, this ~23:
 * bench/cuda/static_figures.sh). */
template <int ROWG, int DST, int NT>
__device__ __forceinline__ void gather_issue(uint8_t *dst, int *valid, const uint8_t *kv, int64_t kv_rows,
                                             const int32_t *idx_seq, int j0, int kend)
{
    constexpr int CH = ROWG / 16; /* 72 (bf16) or 41 (fp8) chunks per row */
    constexpr int NW = NT / 32;
    static_assert(BK % NW == 0, "every warp copies the same number of rows");
    const int lane = threadIdx.x & 31;
#pragma unroll 1 /* unrolled, fp8 with 32 heads spills at its 128-register cap */
    for (int i = 0; i < BK / NW; i++) {
        const int r = (threadIdx.x >> 5) + i * NW;
        const int64_t row = entry_row(idx_seq, j0 + r, kend, kv_rows); /* warp-uniform */
        const uint8_t *src = kv + (row >= 0 ? (size_t)row * ROWG : 0);
        uint8_t *d = dst + r * DST;
        const int bytes = row >= 0 ? 16 : 0; /* invalid: zeros */
#pragma unroll
        for (int k = 0; k < (CH + 31) / 32; k++) {
            const int c = lane + 32 * k;
            if (c < CH)
                cp_async16(d + c * 16, src + c * 16, bytes);
        }
        if (lane == 0)
            valid[r] = row >= 0;
    }
}

/* Dequantise a raw fp8 tile (BK x 656 B) into the bf16 tile (BK x 1168 B).
 * As in the gather, a warp per row (warp w: rows w, w + NT/32, ...): a bf16
 * row is 72 16-byte chunks, 64 of latent (lane l converts chunks l and
 * l + 32, 8 e4m3 values each, scale group c / 16) and 8 of rope (lanes 0..7
 * copy them), so no division or row arithmetic per chunk. */
template <int NT>
__device__ __forceinline__ void fp8_convert(__nv_bfloat16 *tile, const uint8_t *raw)
{
    constexpr int NW = NT / 32;
    static_assert(BK % NW == 0, "every warp converts the same number of rows");
    const int lane = threadIdx.x & 31;
#pragma unroll 1
    for (int i = 0; i < BK / NW; i++) {
        const int r = (threadIdx.x >> 5) + i * NW;
        const uint8_t *src = raw + r * FP8_ROW;
        uint8_t *dst = reinterpret_cast<uint8_t *>(tile) + r * ROWB;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int c = lane + 32 * k; /* 16-byte chunk of the bf16 row (8 dims) */
            const float s = *reinterpret_cast<const float *>(src + FP8_SCALE_OFF + 4 * (c >> 4));
            const uint2 b = *reinterpret_cast<const uint2 *>(src + 8 * c);
            float2 f0 = e4m3x2_to_f2((uint16_t)(b.x & 0xffff)), f1 = e4m3x2_to_f2((uint16_t)(b.x >> 16));
            float2 f2 = e4m3x2_to_f2((uint16_t)(b.y & 0xffff)), f3 = e4m3x2_to_f2((uint16_t)(b.y >> 16));
            uint4 w;
            w.x = pack_bf16(f0.x * s, f0.y * s); /* exact: power-of-two scale */
            w.y = pack_bf16(f1.x * s, f1.y * s);
            w.z = pack_bf16(f2.x * s, f2.y * s);
            w.w = pack_bf16(f3.x * s, f3.y * s);
            *reinterpret_cast<uint4 *>(dst + 16 * c) = w;
        }
        if (lane < 8) /* rope: 64 bf16 = 8 chunks, copied */
            *reinterpret_cast<uint4 *>(dst + 16 * (64 + lane)) =
                *reinterpret_cast<const uint4 *>(src + FP8_ROPE_OFF + 16 * lane);
    }
}

/* Q fragments of heads h0+g and h0+g+8 (zeros past `heads`), dims
 * ds*144 + 16ks + {2t, 2t+8} (+0, +1), as bf16 mma A fragments: loaded once,
 * kept in 36 registers for the whole range (the tiled and v2 kernels). */
__device__ __forceinline__ static void attn_load_q(uint32_t (&qa)[9][4], const float *q, int n, int heads,
                                                    int h0, int ds, int g, int t)
{
    const bool ok0 = h0 + g < heads, ok1 = h0 + g + 8 < heads;
    const float *q0 = q + ((size_t)n * heads + (ok0 ? h0 + g : 0)) * DQK + ds * 144 + 2 * t;
    const float *q1 = q + ((size_t)n * heads + (ok1 ? h0 + g + 8 : 0)) * DQK + ds * 144 + 2 * t;
#pragma unroll
    for (int ks = 0; ks < 9; ks++) {
        float2 x0 = ok0 ? *reinterpret_cast<const float2 *>(q0 + 16 * ks) : make_float2(0.f, 0.f);
        float2 x1 = ok1 ? *reinterpret_cast<const float2 *>(q1 + 16 * ks) : make_float2(0.f, 0.f);
        float2 x2 = ok0 ? *reinterpret_cast<const float2 *>(q0 + 16 * ks + 8) : make_float2(0.f, 0.f);
        float2 x3 = ok1 ? *reinterpret_cast<const float2 *>(q1 + 16 * ks + 8) : make_float2(0.f, 0.f);
        qa[ks][0] = pack_bf16(x0.x, x0.y);
        qa[ks][1] = pack_bf16(x1.x, x1.y);
        qa[ks][2] = pack_bf16(x2.x, x2.y);
        qa[ks][3] = pack_bf16(x3.x, x3.y);
    }
}

/* cuda_attn_naive.cu and cuda_attn_v2.cu: their kernels' launch
 * (cuda_attn_decode checks the arguments first). */
cudaError_t cuda_attn_naive_launch(const cuda_attn_args *a, float scale_log2, cudaStream_t st);
cudaError_t cuda_attn_v2_launch(const cuda_attn_args *a, int sm_count, float scale_log2, cudaStream_t st);

#endif
