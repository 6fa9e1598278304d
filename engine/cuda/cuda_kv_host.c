/* cuda_kv_host.c: the host side of the CUDA attention kernels, plain C (no
 * CUDA), so the CPU tests check every number here without a GPU: KV layouts,
 * FP8 e4m3 quantise/dequantise, the traffic and FLOP model, the tiled
 * kernel's launch plan (split-k) and an emulation of its combine kernel.
 *
 * FP8 (CUDA_KV_FP8_V32, 656 B/row): per group of 128 latent dims one fp32
 * scale, a power of two chosen so the group's max |x| / scale <= 448 (e4m3's
 * largest finite value); values rounded to nearest e4m3 (ties to even,
 * saturating). A power-of-two scale times an e4m3 value (<= 4 significant
 * bits) is exact in bf16 and fp32, so the kernel's dequantised operand and
 * cuda_kv_dequantize_fp8's bf16 rows are the same numbers.
 */
#include <math.h>
#include <string.h>

#include "cuda_attn.h"
#include "numfmt.h"

#define FP8_LATENT_BYTES 512
#define FP8_SCALE_OFF 512
#define FP8_ROPE_OFF 528
#define FP8_ROW_BYTES 656
#define FP8_GROUP 128
#define E4M3_MAX 448.0f

size_t cuda_kv_row_bytes(cuda_kv_layout layout)
{
    switch (layout) {
    case CUDA_KV_BF16: return CUDA_ATTN_DQK * 2;
    case CUDA_KV_FP8_V32: return FP8_ROW_BYTES;
    case CUDA_KV_LAYOUT_MAX_: break;
    }
    return 0;
}

const char *cuda_kv_layout_name(cuda_kv_layout layout)
{
    switch (layout) {
    case CUDA_KV_BF16: return "bf16";
    case CUDA_KV_FP8_V32: return "fp8";
    case CUDA_KV_LAYOUT_MAX_: break;
    }
    return NULL;
}

/* bf16 and e4m3 scalars: numfmt.h (shared with engine/cpu and the kernels) */

/* Smallest power of two s with amax / s <= 448 (1 for an all-zero group). */
static float pow2_scale(float amax)
{
    if (!(amax > 0))
        return 1.0f;
    int e;
    frexp((double)amax / E4M3_MAX, &e); /* amax/448 = m * 2^e, m in [0.5,1) */
    double s = ldexp(1.0, e);
    if ((double)amax / ldexp(1.0, e - 1) <= E4M3_MAX) /* exact power of two case */
        s = ldexp(1.0, e - 1);
    return (float)s;
}

void cuda_kv_quantize_fp8(const float *rows, int64_t n, uint8_t *out)
{
    for (int64_t r = 0; r < n; r++) {
        const float *x = rows + r * CUDA_ATTN_DQK;
        uint8_t *o = out + r * FP8_ROW_BYTES;
        for (int g = 0; g < FP8_LATENT_BYTES / FP8_GROUP; g++) {
            float amax = 0;
            for (int d = 0; d < FP8_GROUP; d++)
                amax = fmaxf(amax, fabsf(x[g * FP8_GROUP + d]));
            float s = pow2_scale(amax);
            memcpy(o + FP8_SCALE_OFF + 4 * g, &s, 4);
            for (int d = 0; d < FP8_GROUP; d++)
                o[g * FP8_GROUP + d] = f32_to_e4m3(x[g * FP8_GROUP + d] / s); /* /2^k: exact */
        }
        for (int d = 0; d < CUDA_ATTN_DQK - CUDA_ATTN_DV; d++) {
            uint16_t b = f32_to_bf16(x[CUDA_ATTN_DV + d]);
            memcpy(o + FP8_ROPE_OFF + 2 * d, &b, 2);
        }
    }
}

void cuda_kv_dequantize_fp8(const uint8_t *rows, int64_t n, uint16_t *out_bf16)
{
    float lut[256];
    for (int c = 0; c < 256; c++)
        lut[c] = e4m3_to_f32((uint8_t)c);
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *x = rows + r * FP8_ROW_BYTES;
        uint16_t *o = out_bf16 + r * CUDA_ATTN_DQK;
        for (int d = 0; d < CUDA_ATTN_DV; d++) {
            float s;
            memcpy(&s, x + FP8_SCALE_OFF + 4 * (d / FP8_GROUP), 4);
            o[d] = f32_to_bf16(lut[x[d]] * s);
        }
        memcpy(o + CUDA_ATTN_DV, x + FP8_ROPE_OFF, 2 * (CUDA_ATTN_DQK - CUDA_ATTN_DV));
    }
}

/* ---- traffic and FLOP model ---------------------------------------------- */

static double valid_entries(const int32_t *idx_host, int n_seq, int topk)
{
    double v = 0;
    for (int64_t i = 0; i < (int64_t)n_seq * topk; i++)
        v += idx_host[i] >= 0;
    return v;
}

/* Valid entries are distinct within a sequence (the API's rule), and the
 * benchmark gives sequences disjoint rows, so valid entries = unique rows. */
double cuda_attn_unique_kv_bytes(const int32_t *idx_host, int n_seq, int topk, cuda_kv_layout l)
{
    return valid_entries(idx_host, n_seq, topk) * (double)cuda_kv_row_bytes(l);
}

double cuda_attn_flops(const int32_t *idx_host, int n_seq, int heads, int topk)
{
    return 2.0 * heads * valid_entries(idx_host, n_seq, topk) * (CUDA_ATTN_DQK + CUDA_ATTN_DV);
}

/* ---- the tiled kernel's plan ------------------------------------------------ */

/* Shared memory of one tiled block; must match cuda_attn.cu's tiled_smem
 * (the launcher refuses a mismatch):
 * bf16: STAGES_BF16 tiles of TILE_ROWS x 1168 B (576 bf16 + 16 B pad);
 * fp8:  1 bf16 tile + STAGES_FP8 raw tiles of TILE_ROWS x 656 B;
 * both: score exchange (heads/16 x 4 warps x TILE_ROWS/2 x 32 floats) and
 *       stages x TILE_ROWS validity ints. */
static size_t tiled_smem_bytes(cuda_kv_layout layout, int head_blocks16)
{
    size_t tile = (size_t)CUDA_ATTN_TILE_ROWS * 1168;
    int ns = layout == CUDA_KV_BF16 ? CUDA_ATTN_STAGES_BF16 : CUDA_ATTN_STAGES_FP8;
    size_t kv = layout == CUDA_KV_BF16 ? ns * tile : tile + ns * (size_t)CUDA_ATTN_TILE_ROWS * FP8_ROW_BYTES;
    return kv + (size_t)head_blocks16 * 4 * (CUDA_ATTN_TILE_ROWS / 2) * 32 * 4 + (size_t)ns * CUDA_ATTN_TILE_ROWS * 4;
}

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* The cost model's constants (cuda_attn.h states the model), estimates
 * until a GPU measures them. The tile: bench/cuda/static_figures.sh counts
 * ~536 instructions a warp issues per tile in the sm_90 bf16 kernel; 8 warps
 * over an SM's 4 schedulers is ~1,070 cycles at an H200's 1.98 GHz. */
#define COST_TILE_US 0.54   /* one block-tile per SM, two blocks sharing it */
#define COST_ALONE 0.6      /* fraction of the SM's rate one block alone reaches (8 warps hide less latency) */
#define COST_BLOCK_US 1.0   /* a block's prologue: q (32 x 576 fp32) into registers, the pipeline's first tile */
#define COST_LAUNCH_US 2.5  /* a kernel launch on the GPU's side */
#define COST_COPY_BPS 4.0e12 /* the combine's bytes at about the copy roof */

double cuda_attn_tiled_predict_us(const cuda_attn_plan *p, int n_seq, int heads, int sm_count)
{
    if (sm_count < 1 || n_seq < 1)
        return 0;
    long slots = (long)sm_count * CUDA_ATTN_TILED_SLOTS_PER_SM;
    long blocks = (long)n_seq * p->head_groups * p->splits;
    double shared_us = COST_BLOCK_US + CUDA_ATTN_TILED_SLOTS_PER_SM * p->tiles_per_split * COST_TILE_US;
    double alone_us = COST_BLOCK_US + p->tiles_per_split * COST_TILE_US / COST_ALONE;
    long full = blocks / slots, tail = blocks % slots;
    double us = COST_LAUNCH_US + (double)full * shared_us;
    if (tail > 0)
        us += tail <= sm_count ? alone_us : shared_us;
    if (p->splits > 1) /* combine: reads every partial (512 + lse), writes out and lse */
        us += COST_LAUNCH_US + (double)(p->splits + 1) * n_seq * heads * (CUDA_ATTN_DV + 1) * 4 / COST_COPY_BPS * 1e6;
    return us;
}

/* Cut the tiles into `splits` runs (fewer when the last would be empty). */
static void set_splits(cuda_attn_plan *p, int splits)
{
    p->tiles_per_split = (p->tiles + splits - 1) / splits;
    p->splits = (p->tiles + p->tiles_per_split - 1) / p->tiles_per_split; /* no empty split */
}

int cuda_attn_tiled_plan(int n_seq, int heads, int topk, int sm_count, cuda_kv_layout layout,
                         cuda_attn_plan *p)
{
    if (!p || n_seq < 0 || heads < 1 || topk < 1 || cuda_kv_row_bytes(layout) == 0)
        return -1;
    memset(p, 0, sizeof *p);
    p->heads_per_block = heads <= 16 ? 16 : 32;
    p->head_groups = (heads + p->heads_per_block - 1) / p->heads_per_block;
    p->threads = p->heads_per_block / 16 * 128;
    p->tiles = (topk + CUDA_ATTN_TILE_ROWS - 1) / CUDA_ATTN_TILE_ROWS;
    p->smem_bytes = tiled_smem_bytes(layout, p->heads_per_block / 16);
    set_splits(p, 1);
    /* Split while the unsplit grid leaves block slots idle; the count is
     * the model's cheapest, >= 4 tiles (64 rows) per split so each block's
     * copy pipeline has something to overlap. */
    long base = (long)n_seq * p->head_groups;
    int cap = p->tiles / 4 > 1 ? p->tiles / 4 : 1;
    if (sm_count > 1 && base > 0) {
        double best = cuda_attn_tiled_predict_us(p, n_seq, heads, sm_count);
        int best_s = 1;
        for (int s = 2; s <= cap; s++) {
            set_splits(p, s);
            double us = cuda_attn_tiled_predict_us(p, n_seq, heads, sm_count);
            if (us < best * (1 - 1e-9)) { /* ties, within rounding, to fewer splits */
                best = us;
                best_s = p->splits;
            }
        }
        set_splits(p, best_s);
    }
    p->blocks = base * p->splits;
    if (sm_count > 0) {
        p->waves = (double)p->blocks / ((double)sm_count * CUDA_ATTN_TILED_SLOTS_PER_SM);
        p->predicted_us = cuda_attn_tiled_predict_us(p, n_seq, heads, sm_count);
    }
    if (p->splits > 1) {
        size_t rows = (size_t)p->splits * n_seq * heads;
        p->ws_bytes = align256(rows * 4) + rows * CUDA_ATTN_DV * 4;
    }
    return 0;
}

size_t cuda_attn_ws_bytes(cuda_attn_kind kind, int n_seq, int heads, int topk, int sm_count)
{
    if (kind == CUDA_ATTN_V2) { /* a plan's tail has at most one wave of shares, at any N */
        cuda_attn_v2_plan p;
        if (n_seq < 1 || sm_count <= 1 || cuda_attn_v2_plan_make(1, heads, topk, sm_count, CUDA_KV_BF16, &p) != 0)
            return 0;
        size_t slots = (size_t)sm_count * p.slots_per_sm * 2 * p.heads_per_block;
        return align256(slots * 4) + slots * CUDA_ATTN_DV * 4;
    }
    if (kind != CUDA_ATTN_TILED)
        return 0;
    size_t most = 0;
    for (int n = 1; n <= n_seq; n++) {
        cuda_attn_plan p;
        if (cuda_attn_tiled_plan(n, heads, topk, sm_count, CUDA_KV_BF16, &p) == 0 && p.ws_bytes > most)
            most = p.ws_bytes;
    }
    return most;
}

void cuda_attn_combine_host(const float *part_out, const float *part_lse, int splits, int rows,
                            float *out, float *lse)
{
    for (int r = 0; r < rows; r++) {
        float lmax = -INFINITY;
        for (int s = 0; s < splits; s++)
            lmax = fmaxf(lmax, part_lse[(size_t)s * rows + r]);
        float wsum = 0;
        float *o = out + (size_t)r * CUDA_ATTN_DV;
        for (int d = 0; d < CUDA_ATTN_DV; d++)
            o[d] = 0;
        for (int s = 0; s < splits; s++) {
            float w = lmax == -INFINITY ? 0.0f : expf(part_lse[(size_t)s * rows + r] - lmax);
            const float *po = part_out + ((size_t)s * rows + r) * CUDA_ATTN_DV;
            for (int d = 0; d < CUDA_ATTN_DV; d++)
                o[d] += w * po[d];
            wsum += w;
        }
        float inv = wsum > 0 ? 1.0f / wsum : 0.0f;
        for (int d = 0; d < CUDA_ATTN_DV; d++)
            o[d] *= inv;
        if (lse)
            lse[r] = wsum > 0 ? lmax + logf(wsum) : -INFINITY;
    }
}
