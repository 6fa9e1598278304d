/* cuda_attn.cu: sparse MLA decode attention on the GPU, the tiled kernel,
 * and cuda_attn_decode, which checks the arguments and launches every kind
 * (naive: cuda_attn_naive.cu; v2: cuda_attn_v2.cu; the device helpers they
 * share: cuda_attn_dev.cuh) (contract and math: cuda_attn.h; reference:
 * engine/cpu/attn_ref.c).
 *
 * DESIGN
 * tiled  (mla_decode_tiled_kernel) grid (head groups, splits, N), 4 warps
 *        per 16 heads: a block serves HB = 16 or 32 heads of one sequence and
 *        one split of its top-k range, in tiles of BK = 16 rows:
 *          1. the tile's rows are gathered once by cp.async (16 B, .cg: L2
 *             only) into shared memory (tiled_issue), NS-stage pipeline (bf16: 4 stages,
 *             3 tiles = 56 KB in flight per block; fp8: 6 raw stages,
 *             dequantised into one bf16 tile); all tiled variants stay
 *             <= 99 KB, and on sm_90 two blocks share an SM (128 registers);
 *          2. warp (hg, ds) holds Q of heads hg*16..+16, dims ds*144..+144 as
 *             bf16 mma A fragments in registers (36 regs, loaded once) and
 *             computes partial S = Q Kt (16 heads x 16 rows) over its 144
 *             dims with mma.m16n8k16; the 4 partials of a head group meet
 *             in shared memory and each of the 4 warps sums them in the same
 *             order (bitwise-identical S in all four) (tiled_scores);
 *          3. online softmax in registers, base 2 (scale*log2e applied to the
 *             fp32 scores, so Q's bf16 rounding is the only one before S)
 *             (tiled_softmax);
 *          4. the C fragments of S become P's A fragments (bf16) without
 *             shared memory; V B fragments come by ldmatrix.trans; warp
 *             (hg, ds) accumulates O for its 16 heads x dims ds*128..+128
 *             (64 fp32 regs) (tiled_pv).
 *        Each step is a __forceinline__ device function: the kernel compiles
 *        to the registers, spills and instruction count of the one-body
 *        kernel it was split from (checked with -Xptxas -v and nvdisasm).
 *        Split-k (plan in cuda_kv_host.c) writes normalised partial O and
 *        LSE to ws; mla_decode_combine_kernel merges them by LSE.
 *        Testing faults (cuda_attn.h CUDA_ATTN_FAULT_*, tiled only, a kernel
 *        argument so the healthy path is the same code): the last split's
 *        loop bound one tile short, or each head's accumulator swapped with
 *        its neighbour's (lanes 4 apart) before the write-back.
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 fragment layouts (PTX
 * ISA 9.7.14.5.8), g = lane>>2 (groupID), t = lane&3 (threadID_in_group);
 * the lower-numbered element sits in the low 16 bits of a .b32 register:
 *   A (16x16, row-major), 4 regs: a0,a1: (row g,   col 2t+{0,1})
 *                                 a2,a3: (row g+8, col 2t+{0,1})
 *                                 a4,a5: (row g,   col 2t+8+{0,1})
 *                                 a6,a7: (row g+8, col 2t+8+{0,1})
 *   B (16x8, "col"), 2 regs:      b0,b1: (k 2t+{0,1},   n g)
 *                                 b2,b3: (k 2t+8+{0,1}, n g)
 *   C/D (16x8 fp32), 4 regs:      c0,c1: (row g, col 2t+{0,1}); c2,c3: row g+8.
 * S = Q Kt: A = Q[head][dim], B[k=dim][n=row] = K[row][dim], so b0b1 is the
 * 32-bit word K[row0+g][d0+2t..], b2b3 the word at d0+8+2t (plain LDS.32;
 * banks: row stride 292 words = 4 mod 32, so (4g + t) covers all 32 banks).
 * P V: A = P[head][row]: for rows 16kk..16kk+15, a0a1 = S-tile 2kk's (c0,c1),
 * a2a3 = its (c2,c3), a4a5 = S-tile 2kk+1's (c0,c1), a6a7 = its (c2,c3).
 * B[k=row][n=dim] = V[row][dim]: ldmatrix.x4.trans, lane L points at row
 * 16kk + 8*(L>>3 & 1) + (L&7), dims d + 8*(L>>4); with .trans lane gets
 * stored (row 2t+{0,1}, col g) of each 8x8 matrix: regs r0,r1 = b0b1,b2b3 of
 * n-tile d, r2,r3 of n-tile d+8. Rows of 1168 B (73 x 16 B) make the 8 row
 * addresses of each matrix hit 8 different 16-B bank groups.
 */
#include "cuda_attn_dev.cuh"

static const char *const names_naive[] = {"mla_decode_naive_kernel"};
static const char *const names_tiled[] = {"mla_decode_tiled_kernel", "mla_decode_combine_kernel"};
static const char *const names_v2[] = {"mla_decode_v2_kernel", "mla_decode_v2_combine_kernel"};

/* ---- tiled ------------------------------------------------------------------- */

/* Shared memory layout (bytes); cuda_kv_host.c's tiled_smem_bytes must agree. */
template <int LAYOUT, int HG>
struct tiled_smem {
    static constexpr int NS = LAYOUT == CUDA_KV_BF16 ? NST_BF16 : NST_FP8; /* copy stages */
    static constexpr int TILE = BK * ROWB;                               /* one bf16 tile */
    static constexpr int RAW = BK * FP8_ROW;                             /* one raw fp8 tile */
    static constexpr int KV = LAYOUT == CUDA_KV_BF16 ? NS * TILE : TILE + NS * RAW;
    static constexpr int SX_OFF = KV;                                    /* score exchange */
    static constexpr int SX = HG * 4 * (BK / 2) * 32 * 4;
    static constexpr int VALID_OFF = SX_OFF + SX;                        /* int[NS][BK] */
    static constexpr int BYTES = VALID_OFF + NS * BK * 4;
};
static_assert(tiled_smem<CUDA_KV_FP8_V32, 2>::BYTES <= 99 * 1024, "fits SM120's 99 KB");
static_assert(tiled_smem<CUDA_KV_BF16, 2>::BYTES <= 99 * 1024, "fits SM120's 99 KB");
static_assert(NST_BF16 >= 2 && NST_FP8 >= 2, "the pipeline needs two stages");
static_assert((BK * ROWB) % 16 == 0 && (BK * FP8_ROW) % 16 == 0, "16-byte aligned stages");


/* Blocks per SM the tiled kernel is compiled for. sm_90: two (2 x <= 90 KB
 * of the SM's 227 KB shared memory; ptxas then keeps the 256-thread kernel at
 * 128 registers without spills), doubling the tiles in flight per SM. sm_120:
 * one (its SMs hold one ~90 KB block; forcing 128 registers spills there). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define TILED_MIN_BLOCKS 1
#else
#define TILED_MIN_BLOCKS 2
#endif

/* testing fault (swap_heads): head h's accumulator becomes head h^1's, still
 * normalised by h's own l (heads h^1 >= heads keep their own). Rows g and
 * g^1 of a C fragment sit in lanes 4 apart; fault is uniform, so the whole
 * warp shuffles. */
__device__ static void swap_head_acc(float (&o)[16][4], int ha, int heads)
{
    const bool sa = (ha ^ 1) < heads, sb = ((ha + 8) ^ 1) < heads;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = __shfl_xor_sync(0xffffffffu, o[j][e], 4);
            if (e < 2 ? sa : sb)
                o[j][e] = v;
        }
}

/* The tiled kernel's steps, each a named device function inlined into the
 * kernel (so registers and code are what one body would give). g = lane>>2,
 * t = lane&3: the fragment coordinates of the opening comment. */


/* Issue the copies of tile `tile` (rows tile*BK..) into copy stage `stage`:
 * bf16 rows straight into that stage's tile, fp8 rows into its raw stage. */
template <int LAYOUT, int HG>
__device__ __forceinline__ static void tiled_issue(uint8_t *smem, int *svalid, int stage, const uint8_t *kv,
                                                   int64_t kv_rows, const int32_t *idx_seq, int tile, int topk)
{
    using L = tiled_smem<LAYOUT, HG>;
    if (LAYOUT == CUDA_KV_BF16)
        gather_issue<BF16_ROW, ROWB, HG * 128>(smem + stage * L::TILE, svalid + stage * BK, kv, kv_rows, idx_seq,
                                               tile * BK, topk);
    else
        gather_issue<FP8_ROW, FP8_ROW, HG * 128>(smem + L::TILE + stage * L::RAW, svalid + stage * BK, kv, kv_rows,
                                                 idx_seq, tile * BK, topk);
}

/* Steps 1 and 2: the partial S = Q Kt of this warp's 144 dims (NTN n-tiles
 * of 8 rows, mma), then the exchange: warp (hg, ds) writes slot ds of sx
 * (NE floats per lane, lane-contiguous: conflict-free) and each of the 4
 * warps of the head group sums slots 0..3 in the same order, so all four
 * hold bitwise-identical S. */
__device__ __forceinline__ static void tiled_scores(float (&s)[NTN][4], const uint32_t (&qa)[9][4],
                                                    const __nv_bfloat16 *tile, float *sx, int hg, int ds, int lane,
                                                    int g, int t)
{
    float sp[NTN][4];
#pragma unroll
    for (int nt = 0; nt < NTN; nt++)
        sp[nt][0] = sp[nt][1] = sp[nt][2] = sp[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 9; ks++) {
        const int d0 = ds * 144 + 16 * ks + 2 * t;
#pragma unroll
        for (int nt = 0; nt < NTN; nt++) {
            const __nv_bfloat16 *kr = tile + (nt * 8 + g) * ROWE + d0;
            uint32_t b0 = *reinterpret_cast<const uint32_t *>(kr);
            uint32_t b1 = *reinterpret_cast<const uint32_t *>(kr + 8);
            mma_bf16(sp[nt], qa[ks], b0, b1);
        }
    }
    constexpr int NE = NTN * 4;
    float *mine = sx + (hg * 4 + ds) * NE * 32;
#pragma unroll
    for (int e = 0; e < NE; e++)
        mine[e * 32 + lane] = sp[e >> 2][e & 3];
    __syncthreads();
#pragma unroll
    for (int e = 0; e < NE; e++) {
        const float *base = sx + hg * 4 * NE * 32 + e * 32 + lane;
        s[e >> 2][e & 3] = ((base[0] + base[NE * 32]) + base[2 * NE * 32]) + base[3 * NE * 32];
    }
}

/* Step 3: online softmax, base 2, of rows g (m0, l0) and g+8 (m1, l1); the
 * tile's row (column of S) is 8nt + 2t + (e&1), -inf where invalid. s
 * becomes P; O is rescaled where a row's max moved. */
__device__ __forceinline__ static void tiled_softmax(float (&s)[NTN][4], float (&o)[16][4], const int *valid,
                                                     float scale_log2, int t, float &m0, float &m1, float &l0,
                                                     float &l1)
{
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NTN; nt++) {
        const bool v0 = valid[nt * 8 + 2 * t] != 0, v1 = valid[nt * 8 + 2 * t + 1] != 0;
        s[nt][0] = v0 ? s[nt][0] * scale_log2 : -INFINITY;
        s[nt][1] = v1 ? s[nt][1] * scale_log2 : -INFINITY;
        s[nt][2] = v0 ? s[nt][2] * scale_log2 : -INFINITY;
        s[nt][3] = v1 ? s[nt][3] * scale_log2 : -INFINITY;
        mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
        mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    /* nothing valid yet: subtract 0 so exp2(-inf - 0) = 0, never inf - inf */
    const float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
    const float al0 = exp2f(m0 - mu0), al1 = exp2f(m1 - mu1);
    m0 = mn0;
    m1 = mn1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < NTN; nt++) {
        s[nt][0] = exp2f(s[nt][0] - mu0);
        s[nt][1] = exp2f(s[nt][1] - mu0);
        s[nt][2] = exp2f(s[nt][2] - mu1);
        s[nt][3] = exp2f(s[nt][3] - mu1);
        rs0 += s[nt][0] + s[nt][1];
        rs1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * al0 + rs0;
    l1 = l1 * al1 + rs1;
    /* rescale O only when some row's max moved (x1 is exact, so skipping
     * changes no bit); rare after the first tiles */
    if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            o[j][0] *= al0;
            o[j][1] *= al0;
            o[j][2] *= al1;
            o[j][3] *= al1;
        }
    }
}

/* Step 4: O += P V, NKV k-steps of 16 rows, 8 pairs of n-tiles of 8 dims:
 * S's C fragments become P's A fragments (bf16) without shared memory, V's
 * B fragments come by ldmatrix.trans. */
__device__ __forceinline__ static void tiled_pv(float (&o)[16][4], const float (&s)[NTN][4],
                                                const __nv_bfloat16 *tile, int ds, int lane)
{
#pragma unroll
    for (int kk = 0; kk < NKV; kk++) {
        uint32_t pa[4];
        pa[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pa[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pa[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        const __nv_bfloat16 *vrow =
            tile + (16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7)) * ROWE + ds * 128 + 8 * (lane >> 4);
#pragma unroll
        for (int np = 0; np < 8; np++) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, vrow + 16 * np);
            mma_bf16(o[2 * np], pa, b[0], b[1]);
            mma_bf16(o[2 * np + 1], pa, b[2], b[3]);
        }
    }
}

/* The end of the range: l summed over the quad (its 4 lanes hold disjoint
 * columns of rows g / g+8), 1/l, and the swap_heads testing fault. */
__device__ __forceinline__ static void tiled_finish(float (&o)[16][4], float &l0, float &l1, float &inv0,
                                                    float &inv1, int ha, int heads, int fault)
{
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    inv0 = l0 > 0.f ? 1.f / l0 : 0.f;
    inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    if (fault == CUDA_ATTN_FAULT_SWAP_HEADS)
        swap_head_acc(o, ha, heads);
}

/* O / l and the LSE of heads ha = h0+g and hb = ha+8 at (n, head) rows
 * row_base + head of dst_o (DV floats a row) and dst_l (NULL: no LSE). */
__device__ __forceinline__ static void tiled_store(const float (&o)[16][4], float m0, float m1, float l0, float l1,
                                                   float inv0, float inv1, float *dst_o, float *dst_l,
                                                   size_t row_base, int ha, int heads, int ds, int t)
{
    const int hb = ha + 8;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int d = ds * 128 + 8 * j + 2 * t;
        if (ha < heads)
            *reinterpret_cast<float2 *>(dst_o + (row_base + ha) * DV + d) = make_float2(o[j][0] * inv0, o[j][1] * inv0);
        if (hb < heads)
            *reinterpret_cast<float2 *>(dst_o + (row_base + hb) * DV + d) = make_float2(o[j][2] * inv1, o[j][3] * inv1);
    }
    if (dst_l && ds == 0 && t == 0) {
        if (ha < heads)
            dst_l[row_base + ha] = l0 > 0.f ? (m0 + log2f(l0)) * LN2_F : -INFINITY;
        if (hb < heads)
            dst_l[row_base + hb] = l1 > 0.f ? (m1 + log2f(l1)) * LN2_F : -INFINITY;
    }
}

/* The kernel: a block's range of tiles through the steps above, then the
 * write. Copy pipeline, NS stages: tile t_begin+i lives in stage i % NS and
 * is commit group i. The prologue issues tiles 0..NS-2; iteration i waits
 * until at most NS-2 groups are pending (so group i is complete), then a
 * barrier (copies visible to all; every warp done with iteration i-1), then
 * issues tile i+NS-1 into stage (i-1) % NS, the one iteration i-1 used. One
 * commit per step, empty or not, keeps the count exact. */
template <int LAYOUT, int HG>
__global__ void __launch_bounds__(HG * 128, TILED_MIN_BLOCKS)
mla_decode_tiled_kernel(const float *__restrict__ q, const uint8_t *__restrict__ kv, int64_t kv_rows,
                        const int32_t *__restrict__ idx, int n_seq, int heads, int topk, int tiles,
                        int tiles_per_split, float scale_log2, float *__restrict__ out_final,
                        float *__restrict__ lse_final, float *__restrict__ ws_lse, float *__restrict__ ws_out,
                        int fault)
{
    constexpr int NT = HG * 128;
    using L = tiled_smem<LAYOUT, HG>;
    uint8_t *const smem = dyn_smem();
    float *sx = reinterpret_cast<float *>(smem + L::SX_OFF);
    int *svalid = reinterpret_cast<int *>(smem + L::VALID_OFF);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hg = warp >> 2, ds = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int hgrp = blockIdx.x, split = blockIdx.y, n = blockIdx.z, splits = gridDim.y;
    const int h0 = hgrp * HG * 16 + hg * 16; /* this warp's first head */
    const int32_t *idx_seq = idx + (size_t)n * topk;
    const int t_begin = split * tiles_per_split;
    int t_end = min(t_begin + tiles_per_split, tiles);
    /* testing fault: the split that owns the last tile stops one short */
    if (fault == CUDA_ATTN_FAULT_SKIP_LAST_TILE && t_end == tiles && t_end - t_begin > 1)
        t_end--;

    uint32_t qa[9][4];
    attn_load_q(qa, q, n, heads, h0, ds, g, t);
    float o[16][4]; /* 16 n-tiles of 8 dims: dims ds*128 + 8j + 2t (+1), heads g / g+8 */
#pragma unroll
    for (int j = 0; j < 16; j++)
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f; /* rows g and g+8; l per thread */

    constexpr int NS = L::NS;
    __nv_bfloat16 *tile0 = reinterpret_cast<__nv_bfloat16 *>(smem); /* bf16: stage 0; fp8: the tile */
    uint8_t *raw0 = smem + L::TILE;                                   /* fp8 only: raw stage 0 */
#pragma unroll
    for (int i = 0; i < NS - 1; i++) {
        if (t_begin + i < t_end)
            tiled_issue<LAYOUT, HG>(smem, svalid, i, kv, kv_rows, idx_seq, t_begin + i, topk);
        cp_async_commit();
    }

    for (int ti = t_begin; ti < t_end; ti++) {
        const int i = ti - t_begin, st = i % NS, nx = (i + NS - 1) % NS;
        const __nv_bfloat16 *tile;
        cp_async_wait<NS - 2>();
        __syncthreads();
        if (ti + NS - 1 < t_end)
            tiled_issue<LAYOUT, HG>(smem, svalid, nx, kv, kv_rows, idx_seq, ti + NS - 1, topk);
        cp_async_commit();
        if (LAYOUT == CUDA_KV_BF16) {
            tile = tile0 + st * (BK * ROWE);
        } else {
            fp8_convert<NT>(tile0, raw0 + st * L::RAW); /* the tile's last readers passed the barrier */
            __syncthreads();                            /* the bf16 tile is complete */
            tile = tile0;
        }
        float s[NTN][4];
        tiled_scores(s, qa, tile, sx, hg, ds, lane, g, t);
        tiled_softmax(s, o, svalid + st * BK, scale_log2, t, m0, m1, l0, l1);
        tiled_pv(o, s, tile, ds, lane);
    }

    float inv0, inv1;
    tiled_finish(o, l0, l1, inv0, inv1, h0 + g, heads, fault);
    /* one split: the final output; several: the workspace the combine
     * kernel merges by LSE */
    float *dst_o, *dst_l;
    size_t row_base; /* (n, head) row index in the destination */
    if (splits == 1) {
        dst_o = out_final;
        dst_l = lse_final;
        row_base = (size_t)n * heads;
    } else {
        dst_o = ws_out;
        dst_l = ws_lse;
        row_base = ((size_t)split * n_seq + n) * heads;
    }
    tiled_store(o, m0, m1, l0, l1, inv0, inv1, dst_o, dst_l, row_base, h0 + g, heads, ds, t);
}

/* One block per (n, h) row: 128 threads x 4 dims. Same math as
 * cuda_attn_combine_host. */
__global__ void __launch_bounds__(128)
mla_decode_combine_kernel(const float *__restrict__ ws_lse, const float *__restrict__ ws_out, int splits, int rows,
                          float *__restrict__ out, float *__restrict__ lse)
{
    const int r = blockIdx.x;
    float lmax = -INFINITY;
    for (int s = 0; s < splits; s++)
        lmax = fmaxf(lmax, ws_lse[(size_t)s * rows + r]);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    float wsum = 0.f;
    for (int s = 0; s < splits; s++) {
        float w = lmax == -INFINITY ? 0.f : expf(ws_lse[(size_t)s * rows + r] - lmax);
        float4 v = *reinterpret_cast<const float4 *>(ws_out + ((size_t)s * rows + r) * DV + 4 * threadIdx.x);
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
        wsum += w;
    }
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    *reinterpret_cast<float4 *>(out + (size_t)r * DV + 4 * threadIdx.x) =
        make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (lse && threadIdx.x == 0)
        lse[r] = wsum > 0.f ? lmax + logf(wsum) : -INFINITY;
}

/* ---- host side --------------------------------------------------------------- */

template <int LAYOUT, int HG>
static cudaError_t launch_tiled(const cuda_attn_args *a, const cuda_attn_plan *p, float scale_log2,
                                cudaStream_t st)
{
    auto kern = mla_decode_tiled_kernel<LAYOUT, HG>;
    if ((int)p->smem_bytes != tiled_smem<LAYOUT, HG>::BYTES || p->threads != HG * 128)
        return cudaErrorInvalidConfiguration; /* cuda_kv_host.c and this file disagree */
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p->smem_bytes);
    if (e != cudaSuccess)
        return e;
    /* a hint: the largest shared-memory carveout, so two blocks fit an SM90 SM */
    e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess)
        return e;
    float *ws_lse = NULL, *ws_out = NULL;
    if (p->splits > 1) {
        size_t rows = (size_t)p->splits * a->n_seq * a->heads;
        ws_lse = (float *)a->ws;
        ws_out = (float *)((uint8_t *)a->ws + ((rows * 4 + 255) & ~(size_t)255));
    }
    dim3 grid((unsigned)p->head_groups, (unsigned)p->splits, (unsigned)a->n_seq);
    LAUNCH(kern, grid, p->threads, p->smem_bytes, st)(a->q, a->kv, a->kv_rows, a->idx, a->n_seq, a->heads,
                                                      a->topk, p->tiles, p->tiles_per_split, scale_log2, a->out,
                                                      a->lse, ws_lse, ws_out, a->fault);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    if (p->splits > 1) {
        int rows = a->n_seq * a->heads;
        LAUNCH(mla_decode_combine_kernel, rows, 128, 0, st)(ws_lse, ws_out, p->splits, rows, a->out, a->lse);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

/* The arguments every kind needs, checked before any launch: 0 or
 * cudaErrorInvalidValue. */
static cudaError_t check_args(cuda_attn_kind kind, const cuda_attn_args *a)
{
    if (!a || a->n_seq < 0 || a->heads < 1 || a->topk < 1 || cuda_kv_row_bytes(a->layout) == 0 || a->kv_rows < 0)
        return cudaErrorInvalidValue;
    if (a->fault < CUDA_ATTN_FAULT_NONE || a->fault > CUDA_ATTN_FAULT_SWAP_HEADS ||
        (a->fault != CUDA_ATTN_FAULT_NONE && kind != CUDA_ATTN_TILED))
        return cudaErrorInvalidValue; /* a fault is the tiled kernel's only */
    if (a->n_seq == 0)
        return cudaSuccess;
    if (!a->q || !a->kv || !a->idx || !a->out)
        return cudaErrorInvalidValue;
    /* 16-byte cp.async / float4 stores, float2 query loads (cudaMalloc gives 256) */
    if (((uintptr_t)a->kv & 15) || ((uintptr_t)a->out & 15) || ((uintptr_t)a->q & 7) || ((uintptr_t)a->ws & 15) ||
        ((uintptr_t)a->idx & 3))
        return cudaErrorInvalidValue;
    /* grid.y/z limits (65535) and 32-bit (n, head) row counts */
    if (a->n_seq > 65535 || (int64_t)a->n_seq * a->heads > INT32_MAX / DV)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The tiled kernel for the plan's layout and heads per block (16 or 32),
 * after its plan and workspace are checked. */
static cudaError_t plan_and_launch_tiled(const cuda_attn_args *a, int sm_count, float scale_log2, cudaStream_t st)
{
    cuda_attn_plan p;
    if (cuda_attn_tiled_plan(a->n_seq, a->heads, a->topk, sm_count, a->layout, &p) != 0)
        return cudaErrorInvalidValue;
    if (p.splits > 1 && (!a->ws || a->ws_bytes < p.ws_bytes))
        return cudaErrorInvalidValue;
    if (a->layout == CUDA_KV_BF16)
        return p.heads_per_block == 16 ? launch_tiled<CUDA_KV_BF16, 1>(a, &p, scale_log2, st)
                                       : launch_tiled<CUDA_KV_BF16, 2>(a, &p, scale_log2, st);
    return p.heads_per_block == 16 ? launch_tiled<CUDA_KV_FP8_V32, 1>(a, &p, scale_log2, st)
                                   : launch_tiled<CUDA_KV_FP8_V32, 2>(a, &p, scale_log2, st);
}

extern "C" int cuda_attn_decode(cuda_attn_kind kind, const cuda_attn_args *a, int sm_count, void *stream)
{
    cudaError_t e = check_args(kind, a);
    if (e != cudaSuccess || a->n_seq == 0)
        return (int)e;
    cudaStream_t st = (cudaStream_t)stream;
    const float scale_log2 = a->scale * LOG2E_F;
    switch (kind) {
    case CUDA_ATTN_NAIVE:
        return (int)cuda_attn_naive_launch(a, scale_log2, st);
    case CUDA_ATTN_TILED:
        return (int)plan_and_launch_tiled(a, sm_count, scale_log2, st);
    case CUDA_ATTN_V2:
        return (int)cuda_attn_v2_launch(a, sm_count, scale_log2, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

extern "C" const char *const *cuda_attn_kernel_names(cuda_attn_kind kind, int *n_names)
{
    if (kind == CUDA_ATTN_TILED || kind == CUDA_ATTN_V2) {
        if (n_names)
            *n_names = 2;
        return kind == CUDA_ATTN_V2 ? names_v2 : names_tiled;
    }
    if (n_names)
        *n_names = 1;
    return names_naive;
}
