/* cuda_attn_sched.c: the v2 kernel's launch plan, a balanced split-KV
 * scheduler, and the cost model it minimises (cuda_attn.h states both);
 * plain C, so the CPU tests check every number without a GPU.
 *
 * The method. A call is `units` = N x head groups units of `tiles` KV
 * tiles. A grid of one wave of resident blocks (B = SMs x slots) runs the
 * units it can give every block whole (q = units / B each: no partials, no
 * combine), then the tail's r = units mod B units, cut as one flat list of
 * r x tiles tiles into Bt equal shares that cross unit boundaries (as
 * FlashMLA's SM90 decode scheduler cuts its whole batch). Bt is chosen by
 * the cost model from 1..B (ties to fewer): a share of a unit costs a
 * partial result (HB x 513 fp32, ~131 KB at 64 heads, written and read
 * back by the combine), so a tail of few units is not cut into 1-tile
 * slivers. The wave is never exceeded, so there is no tail wave: adding a
 * sequence adds its tiles to the shares of all the blocks, which is what
 * flattens the saw-tooth of the tiled kernel's equal splits. Cost: O(B^2)
 * per plan (each candidate counts its pieces exactly), ~10^5 steps.
 *
 * The cost model's constants are estimates from the static figures
 * (bench/cuda/static_figures.sh: instructions a warp issues per tile) and
 * the copy roof measured on H200s (~4.3 TB/s); nothing here is measured on
 * a GPU running this kernel yet.
 */
#include <math.h>
#include <string.h>

#include "cuda_attn.h"

#define V2_LAUNCH_US 2.5  /* a kernel launch on the GPU's side */
#define V2_UNIT_US 1.0    /* a unit's latency: Q into registers, the copy pipeline's fill */
#define V2_ALONE 0.6      /* fraction of the SM's issue rate a lone 4- or 8-warp block reaches */
#define V2_COPY_BPS 4.0e12 /* device bandwidth shared by the blocks streaming at once */
/* One 16-row tile of a 64-head block at the SM's full issue rate: 16
 * warps x the instructions a warp issues per tile (static_figures.sh, sm_90)
 * / 4 schedulers / 1.98 GHz. */
#define V2_ISSUE_TILE_US_BF16 (16 * 309 / 4 / 1.98e3)
#define V2_ISSUE_TILE_US_FP8 (16 * 385 / 4 / 1.98e3)

/* Shared memory of one v2 block; must match cuda_attn_v2.cu's v2_smem (the
 * launcher refuses a mismatch): KV stages (bf16: 4 tiles of 16 x 1168 B;
 * fp8: one bf16 tile + 5 raw tiles of 16 x 656 B), the partial scores
 * (4 warps per 16 heads x 16 x 16 fp32), P (heads x 12 words), alpha, l, m
 * (3 x heads fp32) and the stages' validity ints. */
static size_t v2_smem_bytes(cuda_kv_layout layout, int hg)
{
    size_t tile = (size_t)CUDA_ATTN_TILE_ROWS * 1168;
    int ns = layout == CUDA_KV_BF16 ? CUDA_ATTN_STAGES_BF16 : 5;
    size_t kv = layout == CUDA_KV_BF16 ? ns * tile : tile + ns * (size_t)CUDA_ATTN_TILE_ROWS * 656;
    return kv + (size_t)hg * 4 * 16 * 16 * 4 + (size_t)hg * 16 * 12 * 4 + (size_t)3 * hg * 16 * 4 +
           (size_t)ns * CUDA_ATTN_TILE_ROWS * 4;
}

/* One block-tile's issue time with `active` blocks resident (the blocks on
 * one SM share its issue rate; a lone 4- or 8-warp block reaches less). */
static double v2_issue_us(const cuda_attn_v2_plan *p, int sm_count, long active)
{
    long per_sm = (active + sm_count - 1) / sm_count;
    double issue = (p->layout == CUDA_KV_BF16 ? V2_ISSUE_TILE_US_BF16 : V2_ISSUE_TILE_US_FP8) *
                   p->heads_per_block / CUDA_ATTN_V2_HEADS * (double)per_sm;
    return per_sm == 1 && p->heads_per_block < CUDA_ATTN_V2_HEADS ? issue / V2_ALONE : issue;
}

/* Bytes a unit's segment moves besides its KV tiles: q in (fp32), out or
 * its piece (512 + lse, fp32) written. */
static double v2_io_bytes(const cuda_attn_v2_plan *p)
{
    return (double)p->heads_per_block * (CUDA_ATTN_DQK + CUDA_ATTN_DV + 1) * 4.0;
}

/* A phase in which `active` blocks run `w` tiles and `segs` unit segments
 * each on the critical path, moving `bytes` in all: the longer of the
 * critical path (issue, each segment's latency) and the bytes at the copy
 * bandwidth (segments start at different times, so their q loads and
 * stores overlap other blocks' streaming: only their bytes count). */
static double v2_phase_us(const cuda_attn_v2_plan *p, int sm_count, long active, long w, long segs, double bytes)
{
    double crit = (double)w * v2_issue_us(p, sm_count, active) + (double)segs * V2_UNIT_US;
    double bw = bytes / V2_COPY_BPS * 1e6;
    return crit > bw ? crit : bw;
}

double cuda_attn_v2_predict_us(const cuda_attn_v2_plan *p, int n_seq, int heads, int sm_count)
{
    (void)heads;
    if (sm_count < 1 || n_seq < 1 || p->blocks < 1)
        return 0;
    const double tile_bytes = (double)CUDA_ATTN_TILE_ROWS * (double)cuda_kv_row_bytes(p->layout);
    double us = V2_LAUNCH_US;
    if (p->whole_per_block > 0) {
        long units = (long)p->whole_per_block * p->blocks;
        us += v2_phase_us(p, sm_count, p->blocks, (long)p->whole_per_block * p->tiles, p->whole_per_block,
                          (double)units * (p->tiles * tile_bytes + v2_io_bytes(p)));
    }
    if (p->tail_blocks > 0) {
        long w = (p->tail_tiles + p->tail_blocks - 1) / p->tail_blocks; /* the largest share */
        us += v2_phase_us(p, sm_count, p->tail_blocks, w, p->tail_units_max,
                          (double)p->tail_tiles * tile_bytes + (double)p->tail_segments * v2_io_bytes(p));
    }
    if (p->combine) /* pieces (HB x 513 fp32) read back, at most as many rows written */
        us += V2_LAUNCH_US + (double)p->pieces * 2 * p->heads_per_block * (CUDA_ATTN_DV + 1) * 4.0 / V2_COPY_BPS * 1e6;
    return us;
}

/* Pieces (partial results) of a tail cut into p->tail_blocks shares, and
 * the most units one share touches. */
static void v2_count_pieces(cuda_attn_v2_plan *p)
{
    long pieces = 0, most = 0, segs = 0, bt = p->tail_blocks, tt = p->tail_tiles, k = p->tiles;
    for (long b = 0; b < bt; b++) {
        long f0 = b * tt / bt, f1 = (b + 1) * tt / bt;
        long u0 = f0 / k, u1 = (f1 - 1) / k;
        pieces += !(f0 % k == 0 && f1 >= (u0 + 1) * k);
        if (u1 != u0)
            pieces += f1 % k != 0;
        if (u1 - u0 + 1 > most)
            most = u1 - u0 + 1;
        segs += u1 - u0 + 1;
    }
    p->pieces = pieces;
    p->tail_segments = segs;
    p->tail_units_max = (int)most;
}

static void v2_set_tail(cuda_attn_v2_plan *p, int tail_blocks)
{
    p->tail_blocks = tail_blocks;
    p->pieces = 0;
    p->tail_units_max = 0;
    p->tail_segments = 0;
    if (tail_blocks > 0)
        v2_count_pieces(p);
    p->combine = p->pieces > 0;
    if (p->whole_per_block == 0)
        p->blocks = tail_blocks;
}

/* The tail's share count with the least predicted time, ties to fewer. */
static void v2_pick_tail(cuda_attn_v2_plan *p, int n_seq, int heads, int sm_count, long most)
{
    int best = 1;
    v2_set_tail(p, 1);
    double best_us = cuda_attn_v2_predict_us(p, n_seq, heads, sm_count);
    for (long bt = 2; bt <= most && bt <= p->tail_tiles; bt++) {
        v2_set_tail(p, (int)bt);
        double us = cuda_attn_v2_predict_us(p, n_seq, heads, sm_count);
        if (us < best_us * (1 - 1e-9)) {
            best_us = us;
            best = (int)bt;
        }
    }
    v2_set_tail(p, best);
}

int cuda_attn_v2_plan_make(int n_seq, int heads, int topk, int sm_count, cuda_kv_layout layout,
                           cuda_attn_v2_plan *p)
{
    if (!p || n_seq < 0 || heads < 1 || topk < 1 || cuda_kv_row_bytes(layout) == 0)
        return -1;
    memset(p, 0, sizeof *p);
    p->heads_per_block = heads <= 16 ? 16 : heads <= 32 ? 32 : CUDA_ATTN_V2_HEADS;
    p->head_groups = (heads + p->heads_per_block - 1) / p->heads_per_block;
    p->threads = p->heads_per_block * 8;
    p->slots_per_sm = p->heads_per_block == CUDA_ATTN_V2_HEADS ? 1 : 2;
    p->tiles = (topk + CUDA_ATTN_TILE_ROWS - 1) / CUDA_ATTN_TILE_ROWS;
    p->units = (long)n_seq * p->head_groups;
    p->layout = layout;
    p->smem_bytes = v2_smem_bytes(layout, p->heads_per_block / 16);
    if (p->units == 0)
        return 0;
    long wave = (long)(sm_count > 1 ? sm_count : 1) * p->slots_per_sm;
    if (sm_count <= 1 || p->units >= wave) { /* whole units for every block, then the tail */
        p->blocks = sm_count <= 1 ? (int)p->units : (int)wave;
        p->whole_per_block = (int)(p->units / p->blocks);
        p->tail_tiles = (p->units - (long)p->whole_per_block * p->blocks) * p->tiles;
        if (p->tail_tiles > 0)
            v2_pick_tail(p, n_seq, heads, sm_count, p->blocks);
    } else { /* fewer units than slots: all of it is tail */
        p->tail_tiles = p->units * p->tiles;
        v2_pick_tail(p, n_seq, heads, sm_count, wave);
    }
    if (p->combine) {
        size_t slots = (size_t)p->tail_blocks * 2 * p->heads_per_block;
        p->ws_bytes = ((slots * 4 + 255) & ~(size_t)255) + slots * CUDA_ATTN_DV * 4;
    }
    if (sm_count > 0) {
        p->waves = (double)p->blocks / ((double)sm_count * p->slots_per_sm);
        p->predicted_us = cuda_attn_v2_predict_us(p, n_seq, heads, sm_count);
    }
    return 0;
}
