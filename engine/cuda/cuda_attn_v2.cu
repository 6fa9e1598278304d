/* cuda_attn_v2.cu: the v2 sparse MLA decode attention kernel and its
 * combine (contract and math: cuda_attn.h; reference: engine/cpu/attn_ref.c;
 * the launch plan and its cost model: cuda_attn_sched.c).
 *
 * DESIGN
 * What changes against the tiled kernel (cuda_attn.cu), whose layouts,
 * fragments and copy pipeline it keeps:
 *   - heads per block: HB = 64 (16 or 32 for H <= 16 / 32), 4 warps per 16
 *     heads (512 threads at 64), so a KV tile is gathered once per sequence
 *     (FlashMLA's SM90 sparse decode serves 64 heads per block too);
 *   - scores once per tile: warp (hg, ds) still computes the partial
 *     S = Q Kt of its 16 heads over its 144 dims (18 mma), but the sum of the
 *     4 partials and the online softmax are then split across the head
 *     group's 4 warps by heads (warp ds: heads 4ds..4ds+3, lane l: head
 *     l >> 3, rows 2(l & 7) and +1), not repeated by each of them. The
 *     softmax writes P (bf16) and each head's rescale factor to shared
 *     memory; warp (hg, ds) then reads P as its mma A fragment (4 LDS.32);
 *   - K's B fragments by ldmatrix.x4 (one per k-step for both n-tiles of
 *     the tile) instead of two 32-bit loads per mma; 2^x in the softmax by
 *     one ex2.approx.ftz (fast_exp2) instead of exp2f's range check;
 *   - the gather and fp8 dequantisation keep a warp per row, now one row
 *     per warp per tile at 64 heads (cuda_attn_dev.cuh);
 *   - balanced split-KV (cuda_attn_sched.c): the grid is at most one wave of
 *     resident blocks; block b first runs q whole units (unit = (sequence,
 *     head group)), written to out directly, then its equal share
 *     [b*Tt/Bt, (b+1)*Tt/Bt) of the flat list of the tail units' Tt tiles,
 *     crossing unit boundaries. A piece of a unit is written, normalised,
 *     with its LSE, to the block's partial slot (0: the first unit of its
 *     share, 1: the last), and mla_decode_v2_combine_kernel merges the
 *     pieces of each shared unit by LSE. No per-call metadata: both kernels
 *     derive every range from (b, q, Bt, Tt, tiles).
 * Per tile: wait + barrier, gather the tile NS-1 ahead, [fp8: dequantise,
 * barrier], partial S, barrier, softmax of the block's share, barrier, P V.
 *
 * Registers and occupancy (ptxas -v, nvcc 13.0, bench/cuda/static_figures.sh):
 * __launch_bounds__(HB * 8, 4 / HG) caps every variant at 128 registers
 * (65,536 per SM / 512 threads at 64 heads; two 256-thread or four
 * 128-thread blocks' worth below). sm_90 and sm_120: 127-128 registers, no
 * spills in any variant. O (64 fp32), Q (36) and the partial S (8) stay in
 * registers; at 64 heads one block per SM (16 warps: its 91-93 KB of shared
 * memory would allow two on sm_90, its registers do not), with NS - 1 tiles
 * (~56 KB bf16) in flight by cp.async while the tensor cores work on the
 * current one; at 32 heads two blocks per SM on sm_90. The hot loop issues
 * ~309 instructions per warp per 16-row tile (bf16, 64 heads; 385 fp8)
 * against the tiled kernel's 536 / 689 and the first tiled kernel's 663.
 * All of it is static analysis: nothing here has run on a GPU yet.
 */
#include "cuda_attn_dev.cuh"

#define V2_SS 16 /* floats per head row of a warp's partial S (16 rows of the tile) */
#define V2_PS 12 /* 32-bit words per head row of P (8 used; 12: conflict-free A reads) */
#define NST_FP8_V2 5 /* raw fp8 stages in v2 (one fewer than tiled: its exchange is larger) */

/* Shared memory layout (bytes); cuda_attn_sched.c's v2_smem_bytes must agree. */
template <int LAYOUT, int HG>
struct v2_smem {
    static constexpr int NS = LAYOUT == CUDA_KV_BF16 ? NST_BF16 : NST_FP8_V2; /* copy stages */
    static constexpr int TILE = BK * ROWB;
    static constexpr int RAW = BK * FP8_ROW;
    static constexpr int KV = LAYOUT == CUDA_KV_BF16 ? NS * TILE : TILE + NS * RAW;
    static constexpr int SX_OFF = KV;                        /* partial S: [warp][16 heads][V2_SS] */
    static constexpr int SX = HG * 4 * 16 * V2_SS * 4;
    static constexpr int P_OFF = SX_OFF + SX;                /* P: [HB heads][V2_PS] words */
    static constexpr int P = HG * 16 * V2_PS * 4;
    static constexpr int AL_OFF = P_OFF + P;                 /* alpha, l, m: [3][HB] */
    static constexpr int VALID_OFF = AL_OFF + 3 * HG * 16 * 4; /* int[NS][BK] */
    static constexpr int BYTES = VALID_OFF + NS * BK * 4;
};
static_assert(v2_smem<CUDA_KV_BF16, 4>::BYTES <= 99 * 1024, "fits SM120's 99 KB");
static_assert(v2_smem<CUDA_KV_FP8_V32, 4>::BYTES <= 99 * 1024, "fits SM120's 99 KB");
static_assert(BK == 16, "the softmax split gives each lane 2 of a head's 16 rows");

struct v2_params {
    const float *q;
    const uint8_t *kv;
    int64_t kv_rows;
    const int32_t *idx;
    int heads, topk, tiles, groups;
    int whole_per_block;        /* q: block b first runs units b*q .. b*q+q-1 whole */
    int tail_blocks;            /* Bt: blocks sharing the tail (0: none) */
    int64_t tail_base;          /* first tail unit (q * grid) */
    int64_t tail_tiles;         /* Tt: tiles of the tail units */
    float scale_log2;
    float *out, *lse, *ws_lse, *ws_out;
};

/* Partial S of this warp's 16 heads x 16 rows over its 144 dims, stored
 * to its slot of the exchange: [head][row], rows g / g+8, cols 8nt + 2t.
 * K's B fragments by ldmatrix.x4 (no .trans), one per k-step for both
 * n-tiles: matrix j = rows 8(j >> 1) + 0..7, dims d0 + 8(j & 1) + 0..7, so
 * registers 0, 1 are n-tile 0's b0b1, b2b3 and 2, 3 n-tile 1's (rows of
 * 1168 B: the 8 row addresses of a matrix hit 8 different bank groups). */
__device__ __forceinline__ void v2_partial_scores(float *slot, const __nv_bfloat16 *tile, const uint32_t qa[9][4],
                                                  int ds, int lane, int g, int t)
{
    static_assert(NTN == 2, "one ldmatrix.x4 covers the tile's two n-tiles");
    float sp[NTN][4];
#pragma unroll
    for (int nt = 0; nt < NTN; nt++)
        sp[nt][0] = sp[nt][1] = sp[nt][2] = sp[nt][3] = 0.f;
    const __nv_bfloat16 *krow = tile + ((lane & 7) + 8 * (lane >> 4)) * ROWE + ds * 144 + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int ks = 0; ks < 9; ks++) {
        uint32_t b[4];
        ldmatrix_x4(b, krow + 16 * ks);
        mma_bf16(sp[0], qa[ks], b[0], b[1]);
        mma_bf16(sp[1], qa[ks], b[2], b[3]);
    }
#pragma unroll
    for (int nt = 0; nt < NTN; nt++) {
        *reinterpret_cast<float2 *>(slot + g * V2_SS + nt * 8 + 2 * t) = make_float2(sp[nt][0], sp[nt][1]);
        *reinterpret_cast<float2 *>(slot + (g + 8) * V2_SS + nt * 8 + 2 * t) = make_float2(sp[nt][2], sp[nt][3]);
    }
}

/* Online softmax of this thread's share: head r (of the block), rows c, c+1
 * of the tile. Sums the 4 partials in a fixed order, updates the running
 * (m, l) the thread keeps for its head (l: its own 2 rows' part), writes
 * P's two bf16 values and, once per head, the rescale factor alpha. */
__device__ __forceinline__ void v2_softmax(const float *grp_sx, uint32_t *sp_words, float *salpha, const int *valid,
                                           int r, int rl, int c, int lane, float scale_log2, float &m, float &l)
{
    const float *b = grp_sx + rl * V2_SS + c;
    const float2 x0 = *reinterpret_cast<const float2 *>(b), x1 = *reinterpret_cast<const float2 *>(b + 16 * V2_SS);
    const float2 x2 = *reinterpret_cast<const float2 *>(b + 32 * V2_SS);
    const float2 x3 = *reinterpret_cast<const float2 *>(b + 48 * V2_SS);
    const int2 v = *reinterpret_cast<const int2 *>(valid + c);
    const float s0 = v.x ? (((x0.x + x1.x) + x2.x) + x3.x) * scale_log2 : -INFINITY;
    const float s1 = v.y ? (((x0.y + x1.y) + x2.y) + x3.y) * scale_log2 : -INFINITY;
    float mx = fmaxf(s0, s1);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    const float mn = fmaxf(m, mx);
    const float mu = mn == -INFINITY ? 0.f : mn; /* nothing valid yet: exp2(-inf - 0) = 0 */
    const float al = fast_exp2(m - mu); /* m = -inf: 0 */
    const float p0 = fast_exp2(s0 - mu), p1 = fast_exp2(s1 - mu);
    l = l * al + (p0 + p1);
    m = mn;
    sp_words[r * V2_PS + (c >> 1)] = pack_bf16(p0, p1);
    if ((lane & 7) == 0)
        salpha[r] = al;
}

/* O += P V for this warp's 16 heads (block rows hb0 + g, + 8) and its 128
 * dims, after rescaling O by the heads' alpha when some max moved. */
__device__ __forceinline__ void v2_pv(float o[16][4], const __nv_bfloat16 *tile, const uint32_t *sp_words,
                                      const float *salpha, int hb0, int ds, int lane, int g, int t)
{
    uint32_t pa[4];
    pa[0] = sp_words[(hb0 + g) * V2_PS + t];
    pa[1] = sp_words[(hb0 + g + 8) * V2_PS + t];
    pa[2] = sp_words[(hb0 + g) * V2_PS + t + 4];
    pa[3] = sp_words[(hb0 + g + 8) * V2_PS + t + 4];
    const float al0 = salpha[hb0 + g], al1 = salpha[hb0 + g + 8];
    /* x1 is exact, so skipping it changes no bit; rare after the first tiles */
    if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            o[j][0] *= al0;
            o[j][1] *= al0;
            o[j][2] *= al1;
            o[j][3] *= al1;
        }
    }
    const __nv_bfloat16 *vrow = tile + (8 * ((lane >> 3) & 1) + (lane & 7)) * ROWE + ds * 128 + 8 * (lane >> 4);
#pragma unroll
    for (int np = 0; np < 8; np++) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vrow + 16 * np);
        mma_bf16(o[2 * np], pa, b[0], b[1]);
        mma_bf16(o[2 * np + 1], pa, b[2], b[3]);
    }
}

/* Issue tile `tile_no` of sequence idx_seq into stage st (cuda_attn.cu's pipeline). */
template <int LAYOUT, int NT>
__device__ __forceinline__ void v2_issue(uint8_t *smem, int *svalid, const v2_params &p, const int32_t *idx_seq,
                                         int st, int tile_no)
{
    using L = v2_smem<LAYOUT, NT / 128>;
    if (LAYOUT == CUDA_KV_BF16)
        gather_issue<BF16_ROW, ROWB, NT>(smem + st * L::TILE, svalid + st * BK, p.kv, p.kv_rows, idx_seq,
                                         tile_no * BK, p.topk);
    else
        gather_issue<FP8_ROW, FP8_ROW, NT>(smem + L::TILE + st * L::RAW, svalid + st * BK, p.kv, p.kv_rows,
                                           idx_seq, tile_no * BK, p.topk);
}

/* Write O / l and the LSE of this warp's heads: to out when the block has
 * the whole unit, else to partial slot `pslot` of ws. */
__device__ __forceinline__ void v2_store(const v2_params &p, const float o[16][4], const float *sl, const float *sm,
                                         int n, int hgrp_h0, int hb0, int ds, int g, int t, int whole, int pslot,
                                         int hb)
{
    const float l0 = sl[hb0 + g], l1 = sl[hb0 + g + 8];
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    float *dst_o = whole ? p.out : p.ws_out;
    float *dst_l = whole ? p.lse : p.ws_lse;
    const size_t base = whole ? (size_t)n * p.heads + hgrp_h0 : (size_t)pslot * hb; /* row of local head 0 */
    const int la = hb0 + g, lb = hb0 + g + 8;                                     /* local heads */
    const bool oka = hgrp_h0 + la < p.heads, okb = hgrp_h0 + lb < p.heads;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int d = ds * 128 + 8 * j + 2 * t;
        if (oka)
            *reinterpret_cast<float2 *>(dst_o + (base + la) * DV + d) = make_float2(o[j][0] * inv0, o[j][1] * inv0);
        if (okb)
            *reinterpret_cast<float2 *>(dst_o + (base + lb) * DV + d) = make_float2(o[j][2] * inv1, o[j][3] * inv1);
    }
    if (dst_l && ds == 0 && t == 0) {
        if (oka)
            dst_l[base + la] = l0 > 0.f ? (sm[hb0 + g] + log2f(l0)) * LN2_F : -INFINITY;
        if (okb)
            dst_l[base + lb] = l1 > 0.f ? (sm[hb0 + g + 8] + log2f(l1)) * LN2_F : -INFINITY;
    }
}

/* One unit's tiles [t_begin, t_end): Q into registers, the copy pipeline,
 * per tile scores, softmax share and P V, then the store. Ends with every
 * thread past its last read of shared memory (the next unit refills it). */
template <int LAYOUT, int HG>
__device__ __forceinline__ void v2_unit(const v2_params &p, int64_t u, int t_begin, int t_end, int pslot)
{
    constexpr int NT = HG * 128, HB = HG * 16;
    using L = v2_smem<LAYOUT, HG>;
    uint8_t *const smem = dyn_smem();
    float *sx = reinterpret_cast<float *>(smem + L::SX_OFF);
    uint32_t *sp_words = reinterpret_cast<uint32_t *>(smem + L::P_OFF);
    float *salpha = reinterpret_cast<float *>(smem + L::AL_OFF);
    int *svalid = reinterpret_cast<int *>(smem + L::VALID_OFF);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hg = warp >> 2, ds = warp & 3, g = lane >> 2, t = lane & 3;
    const int n = (int)(u / p.groups), hgrp_h0 = (int)(u % p.groups) * HB;
    const int32_t *idx_seq = p.idx + (size_t)n * p.topk;
    const int r = hg * 16 + ds * 4 + (lane >> 3), c = 2 * (lane & 7); /* softmax share: head r, rows c, c+1 */
    constexpr int NS = L::NS;

    uint32_t qa[9][4];
    attn_load_q(qa, p.q, n, p.heads, hgrp_h0 + hg * 16, ds, g, t); /* as the tiled kernel */
    float o[16][4];
#pragma unroll
    for (int j = 0; j < 16; j++)
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m = -INFINITY, l = 0.f;

#pragma unroll
    for (int i = 0; i < NS - 1; i++) {
        if (t_begin + i < t_end)
            v2_issue<LAYOUT, NT>(smem, svalid, p, idx_seq, i, t_begin + i);
        cp_async_commit();
    }
    for (int ti = t_begin; ti < t_end; ti++) {
        const int i = ti - t_begin, st = (NS & (NS - 1)) == 0 ? (i & (NS - 1)) : i % NS; /* i >= 0 */
        cp_async_wait<NS - 2>();
        __syncthreads(); /* tile i landed for all; iteration i-1 done with stage (i-1) % NS, sx, P */
        if (ti + NS - 1 < t_end)
            v2_issue<LAYOUT, NT>(smem, svalid, p, idx_seq,
                                 (NS & (NS - 1)) == 0 ? ((i + NS - 1) & (NS - 1)) : (i + NS - 1) % NS, ti + NS - 1);
        cp_async_commit();
        const __nv_bfloat16 *tile = reinterpret_cast<const __nv_bfloat16 *>(smem);
        if (LAYOUT == CUDA_KV_BF16) {
            tile += st * (BK * ROWE);
        } else {
            fp8_convert<NT>(reinterpret_cast<__nv_bfloat16 *>(smem), smem + L::TILE + st * L::RAW);
            __syncthreads(); /* the bf16 tile is complete */
        }
        v2_partial_scores(sx + warp * 16 * V2_SS, tile, qa, ds, lane, g, t);
        __syncthreads(); /* the 4 partials of every head group are in */
        v2_softmax(sx + hg * 4 * 16 * V2_SS, sp_words, salpha, svalid + st * BK, r, ds * 4 + (lane >> 3), c, lane,
                   p.scale_log2, m, l);
        __syncthreads(); /* P and alpha of every head are in */
        v2_pv(o, tile, sp_words, salpha, hg * 16, ds, lane, g, t);
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1); /* a head's 8 lanes hold disjoint rows */
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    if ((lane & 7) == 0) {
        salpha[HB + r] = l;
        salpha[2 * HB + r] = m;
    }
    __syncthreads(); /* l, m in; every warp past its last P V of this unit */
    v2_store(p, o, salpha + HB, salpha + 2 * HB, n, hgrp_h0, hg * 16, ds, g, t,
             t_begin == 0 && t_end == p.tiles, pslot, HB);
}

template <int LAYOUT, int HG>
__global__ void __launch_bounds__(HG * 128, 4 / HG)
mla_decode_v2_kernel(v2_params p)
{
    /* block b: whole units b*q .. b*q+q-1, then the units its equal share
     * [f0, f1) of the tail's flat tiles touches; one call site of v2_unit
     * (two inlined copies spilled in the 64-head fp8 kernel) */
    const int b = blockIdx.x, q = p.whole_per_block;
    int64_t f0 = 0, f1 = 0, u_first = 0;
    int n_work = q;
    if (b < p.tail_blocks) {
        f0 = b * p.tail_tiles / p.tail_blocks;
        f1 = (b + 1) * p.tail_tiles / p.tail_blocks;
        u_first = f0 / p.tiles;
        n_work += (int)((f1 - 1) / p.tiles - u_first + 1);
    }
    for (int w = 0; w < n_work; w++) {
        int64_t u = (int64_t)b * q + w;
        int t_begin = 0, t_end = p.tiles;
        if (w >= q) {
            const int64_t ub = (u_first + (w - q)) * p.tiles;
            t_begin = (int)((f0 > ub ? f0 : ub) - ub);
            t_end = (int)((f1 < ub + p.tiles ? f1 : ub + p.tiles) - ub);
            u = p.tail_base + u_first + (w - q);
        }
        v2_unit<LAYOUT, HG>(p, u, t_begin, t_end, 2 * b + (w > q ? 1 : 0));
    }
}

/* The tail block whose share holds tail tile f: the largest b with
 * b*Tt/Bt <= f. */
__device__ __forceinline__ int64_t v2_block_of(int64_t f, int64_t tail_tiles, int64_t tail_blocks)
{
    return ((f + 1) * tail_blocks - 1) / tail_tiles;
}

/* One block per (n, h) output row, 128 threads x 4 dims: merges the pieces
 * of a tail unit that tail blocks b_lo..b_hi share (nothing to do for a
 * unit one block had whole); same math as cuda_attn_combine_host. */
__global__ void __launch_bounds__(128)
mla_decode_v2_combine_kernel(v2_params p, int hb)
{
    const int64_t row = blockIdx.x, n = row / p.heads;
    const int h = (int)(row % p.heads), hl = h % hb;
    const int64_t u = n * p.groups + h / hb - p.tail_base, fs = u * p.tiles;
    if (u < 0)
        return;
    const int64_t b_lo = v2_block_of(fs, p.tail_tiles, p.tail_blocks);
    const int64_t b_hi = v2_block_of(fs + p.tiles - 1, p.tail_tiles, p.tail_blocks);
    if (b_lo == b_hi)
        return;
    float lmax = -INFINITY;
    for (int64_t b = b_lo; b <= b_hi; b++) {
        const int64_t ps = 2 * b + ((b * p.tail_tiles / p.tail_blocks) / p.tiles == u ? 0 : 1);
        lmax = fmaxf(lmax, p.ws_lse[ps * hb + hl]);
    }
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    float wsum = 0.f;
    for (int64_t b = b_lo; b <= b_hi; b++) {
        const int64_t ps = 2 * b + ((b * p.tail_tiles / p.tail_blocks) / p.tiles == u ? 0 : 1);
        const float w = lmax == -INFINITY ? 0.f : expf(p.ws_lse[ps * hb + hl] - lmax);
        const float4 v = *reinterpret_cast<const float4 *>(p.ws_out + ((size_t)ps * hb + hl) * DV + 4 * threadIdx.x);
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
        wsum += w;
    }
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    *reinterpret_cast<float4 *>(p.out + (size_t)row * DV + 4 * threadIdx.x) =
        make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (p.lse && threadIdx.x == 0)
        p.lse[row] = wsum > 0.f ? lmax + logf(wsum) : -INFINITY;
}

/* ---- host side --------------------------------------------------------------- */

template <int LAYOUT, int HG>
static cudaError_t launch_v2(const cuda_attn_args *a, const cuda_attn_v2_plan *pl, float scale_log2,
                             cudaStream_t st)
{
    auto kern = mla_decode_v2_kernel<LAYOUT, HG>;
    if ((int)pl->smem_bytes != v2_smem<LAYOUT, HG>::BYTES || pl->threads != HG * 128)
        return cudaErrorInvalidConfiguration; /* cuda_attn_sched.c and this file disagree */
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pl->smem_bytes);
    if (e != cudaSuccess)
        return e;
    v2_params p = {a->q, a->kv, a->kv_rows, a->idx, a->heads, a->topk, pl->tiles, pl->head_groups,
                   pl->whole_per_block, pl->tail_blocks, (int64_t)pl->whole_per_block * pl->blocks,
                   (int64_t)pl->tail_tiles, scale_log2, a->out, a->lse, NULL, NULL};
    if (pl->combine) {
        const size_t pieces = (size_t)pl->tail_blocks * 2 * pl->heads_per_block;
        p.ws_lse = (float *)a->ws;
        p.ws_out = (float *)((uint8_t *)a->ws + ((pieces * 4 + 255) & ~(size_t)255));
    }
    LAUNCH(kern, pl->blocks, pl->threads, pl->smem_bytes, st)(p);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    if (pl->combine) {
        const unsigned rows = (unsigned)a->n_seq * (unsigned)a->heads;
        LAUNCH(mla_decode_v2_combine_kernel, rows, 128, 0, st)(p, pl->heads_per_block);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

/* cuda_attn_decode's v2 branch (arguments already checked there). */
cudaError_t cuda_attn_v2_launch(const cuda_attn_args *a, int sm_count, float scale_log2, cudaStream_t st)
{
    cuda_attn_v2_plan pl;
    if (cuda_attn_v2_plan_make(a->n_seq, a->heads, a->topk, sm_count, a->layout, &pl) != 0)
        return cudaErrorInvalidValue;
    if (pl.combine && (!a->ws || a->ws_bytes < pl.ws_bytes))
        return cudaErrorInvalidValue;
    const bool bf16 = a->layout == CUDA_KV_BF16;
    switch (pl.heads_per_block) {
    case 16: return bf16 ? launch_v2<CUDA_KV_BF16, 1>(a, &pl, scale_log2, st) : launch_v2<CUDA_KV_FP8_V32, 1>(a, &pl, scale_log2, st);
    case 32: return bf16 ? launch_v2<CUDA_KV_BF16, 2>(a, &pl, scale_log2, st) : launch_v2<CUDA_KV_FP8_V32, 2>(a, &pl, scale_log2, st);
    default: return bf16 ? launch_v2<CUDA_KV_BF16, 4>(a, &pl, scale_log2, st) : launch_v2<CUDA_KV_FP8_V32, 4>(a, &pl, scale_log2, st);
    }
}
