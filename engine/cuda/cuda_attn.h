/* cuda_attn.h (internal to engine/cuda/, shared with tests/cuda and bench/cuda):
 * sparse MLA decode attention on an NVIDIA GPU, the cuda backend's b.
 *
 * The model is the cpu backend's (engine/cpu/cpu_kernels.h), so the cpu
 * double-precision reference (attn_decode_ref) is the truth for both:
 *   - a latent KV pool shared by all query heads; each row holds ATTN_DQK = 576
 *     dims (512 latent + 64 rope); the first ATTN_DV = 512 are also the values
 *     (K = V in MLA);
 *   - queries (N, H, 576) fp32, already multiplied by the absorbed key
 *     up-projection;
 *   - per sequence n up to `topk` selected rows idx[n][0..topk) of the pool, as
 *     GLOBAL row numbers (FlashMLA's convention: the caller maps a sequence's
 *     cache to rows of the pool); -1 marks an invalid entry, which is skipped
 *     (a sequence with no valid entry gets a zero output and lse = -inf);
 *     an entry >= kv_rows is skipped the same way (never read out of bounds).
 *     The valid entries of a sequence must be distinct rows;
 *   - s[h][j] = scale * q[n][h] . kv[idx[j]]           (576 dims)
 *     p[h][j] = softmax_j s[h][j]                     (over the valid entries)
 *     out[n][h] = sum_j p[h][j] * kv[idx[j]][0:512]   (fp32)
 *     lse[n][h] = log sum_j exp(s[h][j])               (natural log)
 *
 * KV layouts (bytes per pool row):
 *   CUDA_KV_BF16     1152 B: 576 bf16.
 *   CUDA_KV_FP8_V32   656 B: DeepSeek-V3.2's FP8 cache (FlashMLA's sparse
 *                    FP8 layout): 512 e4m3 latent values, 4 fp32 scales (one
 *                    per group of 128 latent dims; value = e4m3 * scale), then
 *                    the 64 rope dims as bf16.
 *   Kernels dequantise FP8 rows in the gather. With power-of-two scales (what
 *   cuda_kv_quantize_fp8 writes) every dequantised value is exact in bf16, so
 *   the bf16 reference run on cuda_kv_dequantize_fp8's output is exact truth.
 *
 * Kernels (same inputs, same outputs):
 *   naive  one block per (head, sequence), fp32 SIMT, each block walking its
 *          selected rows itself: the seed's kernel; KV traffic ~ N*H*k*row.
 *   v2     the tiled kernel reworked (cuda_attn_v2.cu): 64 heads per block
 *          (a KV tile gathered once per sequence), the scores' sum and
 *          softmax computed once per tile and shared by the block's warps,
 *          and a balanced split-KV scheduler (cuda_attn_v2_plan below).
 *   tiled  a block serves a group of heads; each gathered KV tile (cp.async
 *          into shared memory) is used by all of them; S = Q.K^T and P.V on
 *          tensor cores (mma.sync bf16, fp32 accumulate), online softmax,
 *          split-k over the top-k range when there are too few blocks to
 *          fill the SMs, then an LSE combine. Shared memory <= 99 KB per
 *          block (runs on SM120 parts as well as SM90).
 *
 * Every call is asynchronous on `stream` and returns a cudaError_t as int
 * (0 = cudaSuccess) from the launch; errors of the kernels themselves show at
 * the next synchronisation. Pointers in cuda_attn_args are device pointers.
 */
#ifndef LOADLAW_CUDA_ATTN_H
#define LOADLAW_CUDA_ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_ATTN_DQK 576
#define CUDA_ATTN_DV 512

/* The _MAX_ members make every int a value of the enum in C++ (where the
 * .cu host code reads them): a caller's bad value is then an error the
 * functions report, not undefined behaviour (UBSan checked it in cuemu). */
typedef enum cuda_kv_layout {
    CUDA_KV_BF16 = 0,
    CUDA_KV_FP8_V32 = 1,
    CUDA_KV_LAYOUT_MAX_ = 0x7fffffff,
} cuda_kv_layout;

typedef enum cuda_attn_kind {
    CUDA_ATTN_NAIVE = 0,
    CUDA_ATTN_TILED = 1,
    CUDA_ATTN_V2 = 2,
    CUDA_ATTN_KIND_MAX_ = 0x7fffffff,
} cuda_attn_kind;

/* Bytes of one pool row in a layout (1152 or 656); 0 for an unknown layout. */
size_t cuda_kv_row_bytes(cuda_kv_layout layout);
/* "bf16" | "fp8" (static), NULL for an unknown layout. */
const char *cuda_kv_layout_name(cuda_kv_layout layout);

/* Deliberate bugs of the tiled kernel, for testing that a check catches a
 * wrong kernel (the cpu backend's ENG_ATTN_FAULT_*, same values, same
 * meaning; each leaves the kernel no slower):
 *   SKIP_LAST_TILE  the split that owns the last tile of a sequence's top-k
 *                   range stops one short (an off-by-one loop bound): the
 *                   newest rows, which the indexer always selects, are never
 *                   attended (with -1 pads at the end, as a context below
 *                   topk with min_ctx=0 gives, the tile skipped may be pads)
 *   SWAP_HEADS      the write-back takes head h's accumulator from head h^1
 *                   but normalises it by h's own sum (a head-index slip in
 *                   the epilogue): not a permutation, so the head mean moves */
enum { CUDA_ATTN_FAULT_NONE = 0, CUDA_ATTN_FAULT_SKIP_LAST_TILE = 1, CUDA_ATTN_FAULT_SWAP_HEADS = 2 };

typedef struct cuda_attn_args {
    int n_seq;                /* N >= 0 */
    int heads;                /* H >= 1 */
    int topk;                 /* entries per sequence in idx (row stride), >= 1 */
    float scale;              /* softmax scale, usually 1/sqrt(576) */
    cuda_kv_layout layout;
    const float *q;           /* (N, H, 576) fp32 */
    const uint8_t *kv;        /* pool: rows * cuda_kv_row_bytes(layout) bytes */
    int64_t kv_rows;          /* rows in the pool (indices are < kv_rows) */
    const int32_t *idx;       /* (N, topk) global rows, -1 = invalid */
    float *out;               /* (N, H, 512) fp32, written */
    float *lse;               /* (N, H) fp32, written; may be NULL */
    void *ws;                 /* scratch for split-k partials; may be NULL when ws_bytes = 0 */
    size_t ws_bytes;
    int fault;                /* testing, CUDA_ATTN_TILED only: CUDA_ATTN_FAULT_* (0 = none);
                               * any other kind refuses a fault (cudaErrorInvalidValue) */
} cuda_attn_args;

/* Scratch bytes `kind` needs for ANY batch of 1..n_seq sequences with
 * (heads, topk) on a device with `sm_count` multiprocessors (0 for naive;
 * split-k partials for tiled and v2). Smaller batches split more, so this is the
 * maximum over the batch sizes, not the value at n_seq: size it once. */
size_t cuda_attn_ws_bytes(cuda_attn_kind kind, int n_seq, int heads, int topk, int sm_count);

/* How the tiled kernel cuts one call (plain host arithmetic, cuda_kv_host.c,
 * so the CPU tests check it). Tiles are CUDA_ATTN_TILE_ROWS consecutive
 * entries of idx; split s of a sequence covers tiles
 * [s*tiles_per_split, min((s+1)*tiles_per_split, tiles)), never empty.
 * Grid: (head_groups, splits, n_seq) blocks of `threads`.
 *
 * Split policy: the split count is the one (of 1 .. tiles/4, >= 4 tiles per
 * split) with the least predicted time under the cost model below, ties to
 * fewer splits. The model counts the grid in waves of the device's resident
 * block slots (sm_count x CUDA_ATTN_TILED_SLOTS_PER_SM), where a grid one
 * block past a whole wave pays a whole tail wave, so the plan fills whole
 * waves and splits while the unsplit grid leaves slots idle, in its tail
 * wave too (N*groups >= 2*SMs: only where the shorter tail saves more than
 * the combine costs). sm_count <= 1 never splits (the tests' way to run the
 * unsplit path on any device).
 *
 * Cost model (cuda_attn_tiled_predict_us; constants COST_* in
 * cuda_kv_host.c): a block costs a fixed prologue (q into registers, the
 * copy pipeline's fill) plus its tiles; two blocks on one SM share its
 * issue rate (a block-tile every COST_TILE_US per SM), a block alone runs
 * at COST_ALONE of the SM's rate; full waves run back to back, and a
 * tail wave lasts as long as its blocks alone or shared; split-k adds the
 * combine kernel (a launch plus its bytes at the copy bandwidth). An
 * estimate from the compiled SASS, not a measurement: it ranks grids, and
 * the CPU test holds the policy to it (no rise in predicted time per
 * sequence from N to N+1). */
#define CUDA_ATTN_TILE_ROWS 16   /* selected rows per tile */
#define CUDA_ATTN_STAGES_BF16 4  /* cp.async stages of bf16 tiles */
#define CUDA_ATTN_STAGES_FP8 6   /* cp.async stages of raw fp8 tiles (+ one bf16 tile) */
#define CUDA_ATTN_TILED_SLOTS_PER_SM 2 /* resident tiled blocks per SM on sm_90 (__launch_bounds__(256, 2)) */
typedef struct cuda_attn_plan {
    int heads_per_block;  /* 16 (heads <= 16) or 32; heads are padded up to it */
    int head_groups;      /* ceil(heads / heads_per_block) */
    int threads;          /* 4 warps per 16 heads: 128 or 256 */
    int tiles;            /* ceil(topk / CUDA_ATTN_TILE_ROWS) */
    int splits;           /* split-k factor, >= 1 (1: no combine kernel) */
    int tiles_per_split;
    size_t smem_bytes;    /* dynamic shared memory per block (<= 99 KB) */
    size_t ws_bytes;      /* split-k partials for this call (0 when splits == 1) */
    long blocks;          /* head_groups * splits * n_seq */
    double waves;         /* blocks / (sm_count * CUDA_ATTN_TILED_SLOTS_PER_SM); 0 when sm_count is 0 */
    double predicted_us;  /* the cost model's time for this call (0 when sm_count is 0) */
} cuda_attn_plan;
/* 0 or -1 (bad sizes). */
int cuda_attn_tiled_plan(int n_seq, int heads, int topk, int sm_count, cuda_kv_layout layout,
                         cuda_attn_plan *plan);
/* The cost model's time (µs) for n_seq sequences cut as `plan` says (its
 * heads_per_block, head_groups, splits, tiles_per_split) on sm_count SMs
 * (>= 1); heads for the combine's bytes. */
double cuda_attn_tiled_predict_us(const cuda_attn_plan *plan, int n_seq, int heads, int sm_count);

/* How the v2 kernel (cuda_attn_v2.cu) cuts one call: the balanced split-KV
 * scheduler (cuda_attn_sched.c, plain C). Work comes in units, one per
 * (sequence, head group) of heads_per_block heads, each `tiles` tiles of
 * CUDA_ATTN_TILE_ROWS entries. The grid is at most one wave of resident
 * blocks (sm_count x slots_per_sm). Block b first runs whole units
 * b*q .. b*q+q-1 (q = whole_per_block = units / blocks when units fill the
 * wave, else 0), written straight to out; the units left over (the tail:
 * units - q*blocks of them, tail_tiles tiles) are cut as a flat list of
 * tiles into tail_blocks equal shares [b*Tt/Bt, (b+1)*Tt/Bt), crossing unit
 * boundaries, and every unit a share holds in part is merged by the v2
 * combine kernel. tail_blocks is the count with the least predicted time
 * (cuda_attn_v2_predict_us), so a tail is spread over as many SMs as pays
 * for the pieces' traffic, instead of a whole tail wave or none.
 * sm_count <= 1 plans one block per unit, no tail (the unsplit path). */
#define CUDA_ATTN_V2_HEADS 64 /* heads per v2 block when heads > 32 */
typedef struct cuda_attn_v2_plan {
    int heads_per_block;  /* 16 (heads <= 16), 32 (<= 32) or 64; heads are padded up to it */
    int head_groups;      /* ceil(heads / heads_per_block) */
    int threads;          /* 4 warps per 16 heads: 128, 256 or 512 */
    int slots_per_sm;     /* resident blocks per SM: 1 at 64 heads, 2 below (sm_90 figures) */
    int tiles;            /* tiles per unit: ceil(topk / CUDA_ATTN_TILE_ROWS) */
    long units;           /* n_seq * head_groups */
    int blocks;           /* grid size, <= sm_count * slots_per_sm (one wave) unless sm_count <= 1 */
    int whole_per_block;  /* q */
    int tail_blocks;      /* Bt, <= blocks; 0 when no tail */
    long tail_tiles;      /* Tt = (units - q * blocks) * tiles */
    int combine;          /* 1 when some tail unit is shared by two blocks (the combine kernel runs) */
    long pieces;          /* partial results the blocks write for the combine */
    int tail_units_max;   /* the most tail units one share touches */
    long tail_segments;   /* (share, unit) pairs of the tail: q loads and stores */
    cuda_kv_layout layout;
    size_t smem_bytes;    /* dynamic shared memory per block (<= 99 KB) */
    size_t ws_bytes;      /* partials: tail_blocks x 2 slots x heads_per_block x (512 + 1) fp32 */
    double waves;         /* blocks / (sm_count * slots_per_sm) */
    double predicted_us;  /* the cost model's time for this call (0 when sm_count is 0) */
} cuda_attn_v2_plan;
/* 0 or -1 (bad sizes). */
int cuda_attn_v2_plan_make(int n_seq, int heads, int topk, int sm_count, cuda_kv_layout layout,
                           cuda_attn_v2_plan *plan);
/* The cost model's time (µs) for the plan's grid on sm_count SMs (>= 1):
 * per block-tile the larger of its issue time (instructions per tile from
 * the compiled SASS, shared by the blocks on one SM) and its bytes at the
 * copy bandwidth shared by all blocks streaming at once; whole units, then
 * the tail's largest share, each unit adding a prologue (q in, out written);
 * the pieces' bytes (written, read back by the combine) and the combine's
 * launch. An estimate from static figures, not a measurement. */
double cuda_attn_v2_predict_us(const cuda_attn_v2_plan *plan, int n_seq, int heads, int sm_count);

/* The combine kernel's math on the host (the emulation the CPU test checks):
 * rows = N*H; part_out (splits, rows, 512) normalised partial outputs,
 * part_lse (splits, rows) their natural-log LSE (-inf: no valid entry).
 * Writes out (rows, 512) and lse (rows): out = sum_s w_s out_s / sum_s w_s,
 * w_s = exp(lse_s - max lse); all -inf gives out = 0, lse = -inf. */
void cuda_attn_combine_host(const float *part_out, const float *part_lse, int splits, int rows,
                            float *out, float *lse);

/* Launch the kernel(s) of `kind`. 0, or a cudaError_t (as int):
 * cudaErrorInvalidValue for a malformed args (NULL pointers, heads < 1,
 * topk < 1, too little ws, kv/out/ws not 16-byte or q not 8-byte aligned,
 * n_seq > 65535); cudaErrorInvalidConfiguration if cuda_kv_host.c's plan and
 * the kernel's shared-memory layout disagree (a build defect). n_seq = 0
 * launches nothing and returns 0. */
int cuda_attn_decode(cuda_attn_kind kind, const cuda_attn_args *a, int sm_count, void *stream);

/* The __global__ function names each kind launches, as the profiler shows
 * them ("mla_decode_naive_kernel", "mla_decode_tiled_kernel" and its combine),
 * for the engine's trace. n_names gets the count; static strings. */
const char *const *cuda_attn_kernel_names(cuda_attn_kind kind, int *n_names);

/* Traffic model for the benchmark, idx_host (N, topk) on the host: KV bytes
 * of the valid entries, each once (= unique rows when sequences do not share
 * rows, as in bench_attn_cuda; the naive kernel reads them H times, from L2
 * mostly). FLOPs: 2*H*valid*(576+512). */
double cuda_attn_unique_kv_bytes(const int32_t *idx_host, int n_seq, int topk, cuda_kv_layout l);
double cuda_attn_flops(const int32_t *idx_host, int n_seq, int heads, int topk);

/* ---- host helpers for FP8 (tests and the backend's cache fill) ------------ */

/* Quantise n rows of 576 fp32 values into CUDA_KV_FP8_V32 rows (656 B each):
 * per group of 128 latent dims a power-of-two scale so max |x| fits e4m3
 * (448), values rounded to nearest e4m3; rope dims to bf16. */
void cuda_kv_quantize_fp8(const float *rows, int64_t n, uint8_t *out);
/* The exact bf16 rows (576 each) an FP8_V32 row stands for. */
void cuda_kv_dequantize_fp8(const uint8_t *rows, int64_t n, uint16_t *out_bf16);

#ifdef __cplusplus
}
#endif

#endif
