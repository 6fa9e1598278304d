/* cuda_attn_emu.c: mla_decode_tiled_kernel (+ its combine) run on the host,
 * lane by lane, so the CPU test checks what no GPU here can: every per-lane
 * index expression of the kernel (Q fragments, K words, ldmatrix.trans row
 * addresses, P repacking, output scatter), the masking, the online softmax,
 * the score exchange, split-k and the combine, at the real tolerance and with
 * the kernel's bf16 roundings (Q, P) and fp8 dequantisation.
 *
 * The instructions are emulated from their PTX ISA definitions, written here
 * independently of the kernel (mma_emu, ldmatrix_x4_trans_emu); the kernel's
 * per-lane code is transcribed statement by statement (same names). KEEP IN
 * STEP with engine/cuda/cuda_attn.cu: a change there must be mirrored here.
 * The copy pipeline's stage ring (which stage a tile is issued into and read
 * from, the fp8 raw stages and their conversion) is modelled with copies that
 * land at issue. What this cannot see: races, cp.async timing, barriers,
 * bank conflicts.
 */
#include "cuda_attn_emu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h" /* bf16_to_f32, f32_to_bf16 */

#define DQK CUDA_ATTN_DQK
#define DV CUDA_ATTN_DV
#define BK CUDA_ATTN_TILE_ROWS
#define NTN (BK / 8)
#define NKV (BK / 16)
#define NE (NTN * 4)
#define ROWE 584
#define BF16_ROW 1152
#define FP8_ROW 656
#define LOG2E_F 1.4426950408889634f
#define LN2_F 0.6931471805599453f

/* ---- the PTX definitions ----------------------------------------------------- */

/* mma.m16n8k16 .bf16 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16
 * with floating point type"): element i of a lane's fragment. */
static int a_row(int lane, int i) { return (lane >> 2) + (((i >> 1) & 1) << 3); } /* i = 0..7 */
static int a_col(int lane, int i) { return ((lane & 3) << 1) + (i & 1) + ((i >> 2) << 3); }
static int b_k(int lane, int i) { return ((lane & 3) << 1) + (i & 1) + ((i >> 1) << 3); } /* i = 0..3 */
static int b_n(int lane) { return lane >> 2; }
static int c_row(int lane, int i) { return (lane >> 2) + ((i >> 1) << 3); } /* i = 0..3 */
static int c_col(int lane, int i) { return ((lane & 3) << 1) + (i & 1); }

/* element i of a packed .b32 register pair list: even i = low half */
static float reg_bf16(const uint32_t *regs, int i)
{
    uint32_t w = regs[i >> 1];
    return bf16_to_f32((uint16_t)((i & 1) ? w >> 16 : w & 0xffff));
}

/* D = A B + C for one warp: a[lane][4], b0/b1[lane], c[lane][4] in place */
static void mma_emu(float c[32][4], const uint32_t a[32][4], const uint32_t b0[32], const uint32_t b1[32])
{
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++)
            A[a_row(lane, i)][a_col(lane, i)] = reg_bf16(a[lane], i);
        uint32_t br[2] = {b0[lane], b1[lane]};
        for (int i = 0; i < 4; i++)
            B[b_k(lane, i)][b_n(lane)] = reg_bf16(br, i);
        for (int i = 0; i < 4; i++)
            C[c_row(lane, i)][c_col(lane, i)] = c[lane][i];
    }
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            float acc = C[m][n];
            for (int k = 0; k < 16; k++)
                acc += A[m][k] * B[k][n];
            C[m][n] = acc;
        }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++)
            c[lane][i] = C[c_row(lane, i)][c_col(lane, i)];
}

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lane 8j+r gives the address
 * of row r of matrix j (8 consecutive b16); with .trans lane l receives, of
 * each matrix j, elements (row 2(l%4), col l/4) and (row 2(l%4)+1, col l/4)
 * in register j (low half first). */
static void ldmatrix_x4_trans_emu(uint32_t r[32][4], const uint16_t *const addr[32])
{
    for (int lane = 0; lane < 32; lane++)
        for (int j = 0; j < 4; j++) {
            uint16_t lo = addr[8 * j + 2 * (lane & 3)][lane >> 2];
            uint16_t hi = addr[8 * j + 2 * (lane & 3) + 1][lane >> 2];
            r[lane][j] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
}

static uint32_t pack_bf16(float lo, float hi)
{
    return (uint32_t)f32_to_bf16(lo) | ((uint32_t)f32_to_bf16(hi) << 16);
}

static uint32_t word_at(const uint16_t *p) /* 32-bit little-endian load of 2 bf16 */
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 16);
}

static int64_t entry_row(const int32_t *idx_seq, int j, int kend, int64_t kv_rows)
{
    if (j >= kend)
        return -1;
    int32_t r = idx_seq[j];
    return (r >= 0 && (int64_t)r < kv_rows) ? (int64_t)r : -1;
}

/* the e4m3 decode of the kernel (cvt.rn.f16x2.e4m3x2: exact) */
static float e4m3(uint8_t c)
{
    int ex = (c >> 3) & 15, mant = c & 7;
    float v = ex == 0 ? ldexpf((float)mant, -9) : ldexpf(1.0f + mant / 8.0f, ex - 7);
    return (c & 0x80) ? -v : v;
}

/* ---- the kernel, one block -------------------------------------------------------- */

typedef struct emu_warp {
    uint32_t qa[9][32][4];
    float o[16][32][4];
    float m0[32], m1[32], l0[32], l1[32];
} emu_warp;

/* gather_issue: the copies of tile rows [j0, j0+BK) into dst (row stride
 * dst_stride bytes) land at once (a cp.async may land any time before its
 * wait; landing at issue makes a read of the wrong stage, or an overwrite of
 * the stage being read, visible); invalid rows: src-size 0, zeros. */
static void gather_issue(const cuda_attn_args *a, const int32_t *idx_seq, int j0, uint8_t *dst, int dst_stride,
                         int *valid)
{
    const int rowg = a->layout == CUDA_KV_BF16 ? BF16_ROW : FP8_ROW;
    for (int r = 0; r < BK; r++) {
        int64_t row = entry_row(idx_seq, j0 + r, a->topk, a->kv_rows);
        valid[r] = row >= 0;
        if (row >= 0)
            memcpy(dst + (size_t)r * dst_stride, a->kv + (size_t)row * rowg, rowg);
        else
            memset(dst + (size_t)r * dst_stride, 0, rowg);
    }
}

/* fp8_convert: the raw fp8 tile (BK x 656 B) into the bf16 tile */
static void fp8_convert(uint16_t *tile, const uint8_t *raw)
{
    for (int i = 0; i < BK * 72; i++) {
        int r = i / 72, c = i - r * 72;
        const uint8_t *src = raw + r * FP8_ROW;
        uint16_t *dst = tile + r * ROWE + 8 * c;
        if (c < 64) {
            float sc;
            memcpy(&sc, src + 512 + 4 * (c >> 4), 4);
            for (int e = 0; e < 8; e++)
                dst[e] = f32_to_bf16(e4m3(src[8 * c + e]) * sc);
        } else {
            memcpy(dst, src + 528 + 16 * (c - 64), 16);
        }
    }
}

#define EMU_NS_MAX (CUDA_ATTN_STAGES_BF16 > CUDA_ATTN_STAGES_FP8 ? CUDA_ATTN_STAGES_BF16 : CUDA_ATTN_STAGES_FP8)

static void run_block(const cuda_attn_args *a, const cuda_attn_plan *p, int hgrp, int split, int n, float scale_log2,
                      float *dst_out_all, float *dst_lse_all, emu_warp *W, uint8_t *smem, float *sx)
{
    const int HG = p->heads_per_block / 16, heads = a->heads;
    const int32_t *idx_seq = a->idx + (size_t)n * a->topk;
    const int t_begin = split * p->tiles_per_split;
    const int t_end = t_begin + p->tiles_per_split < p->tiles ? t_begin + p->tiles_per_split : p->tiles;
    /* shared memory as the kernel lays it out: bf16 NS tiles; fp8 one bf16
     * tile + NS raw tiles; NS x BK validity ints. Poisoned: bf16 NaN. */
    const int NS = a->layout == CUDA_KV_BF16 ? CUDA_ATTN_STAGES_BF16 : CUDA_ATTN_STAGES_FP8;
    const size_t TILE = (size_t)BK * ROWE * 2, RAW = (size_t)BK * FP8_ROW;
    uint16_t *tile0 = (uint16_t *)smem;
    uint8_t *raw0 = smem + TILE;
    int svalid[EMU_NS_MAX * BK];
    for (size_t k = 0; k < (size_t)EMU_NS_MAX * TILE / 2; k++)
        tile0[k] = 0x7fc0;
    for (int k = 0; k < EMU_NS_MAX * BK; k++)
        svalid[k] = -1;

    for (int warp = 0; warp < HG * 4; warp++) {
        emu_warp *w = &W[warp];
        const int hg = warp >> 2, ds = warp & 3;
        const int h0 = hgrp * HG * 16 + hg * 16;
        for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3;
            const int ok0 = h0 + g < heads, ok1 = h0 + g + 8 < heads;
            const float *q0 = a->q + ((size_t)n * heads + (ok0 ? h0 + g : 0)) * DQK + ds * 144 + 2 * t;
            const float *q1 = a->q + ((size_t)n * heads + (ok1 ? h0 + g + 8 : 0)) * DQK + ds * 144 + 2 * t;
            for (int ks = 0; ks < 9; ks++) {
                w->qa[ks][lane][0] = ok0 ? pack_bf16(q0[16 * ks], q0[16 * ks + 1]) : 0;
                w->qa[ks][lane][1] = ok1 ? pack_bf16(q1[16 * ks], q1[16 * ks + 1]) : 0;
                w->qa[ks][lane][2] = ok0 ? pack_bf16(q0[16 * ks + 8], q0[16 * ks + 9]) : 0;
                w->qa[ks][lane][3] = ok1 ? pack_bf16(q1[16 * ks + 8], q1[16 * ks + 9]) : 0;
            }
            for (int j = 0; j < 16; j++)
                w->o[j][lane][0] = w->o[j][lane][1] = w->o[j][lane][2] = w->o[j][lane][3] = 0.f;
            w->m0[lane] = w->m1[lane] = -INFINITY;
            w->l0[lane] = w->l1[lane] = 0.f;
        }
    }

    for (int i = 0; i < NS - 1; i++)
        if (t_begin + i < t_end) {
            if (a->layout == CUDA_KV_BF16)
                gather_issue(a, idx_seq, (t_begin + i) * BK, smem + i * TILE, ROWE * 2, svalid + i * BK);
            else
                gather_issue(a, idx_seq, (t_begin + i) * BK, raw0 + i * RAW, FP8_ROW, svalid + i * BK);
        }
    for (int ti = t_begin; ti < t_end; ti++) {
        const int i = ti - t_begin, st = i % NS, nx = (i + NS - 1) % NS;
        const uint16_t *tile;
        if (ti + NS - 1 < t_end) {
            if (a->layout == CUDA_KV_BF16)
                gather_issue(a, idx_seq, (ti + NS - 1) * BK, smem + nx * TILE, ROWE * 2, svalid + nx * BK);
            else
                gather_issue(a, idx_seq, (ti + NS - 1) * BK, raw0 + nx * RAW, FP8_ROW, svalid + nx * BK);
        }
        if (a->layout == CUDA_KV_BF16) {
            tile = tile0 + st * (BK * ROWE);
        } else {
            fp8_convert(tile0, raw0 + st * RAW);
            tile = tile0;
        }
        const int *valid = svalid + st * BK;
        static float sp[8][NTN][32][4]; /* [warp][nt][lane][e] partial scores */
        /* 1. partial S */
        for (int warp = 0; warp < HG * 4; warp++) {
            const int ds = warp & 3;
            memset(sp[warp], 0, sizeof sp[warp]);
            for (int ks = 0; ks < 9; ks++)
                for (int nt = 0; nt < NTN; nt++) {
                    uint32_t b0[32], b1[32];
                    for (int lane = 0; lane < 32; lane++) {
                        const int g = lane >> 2, t = lane & 3;
                        const int d0 = ds * 144 + 16 * ks + 2 * t;
                        const uint16_t *kr = tile + (nt * 8 + g) * ROWE + d0;
                        b0[lane] = word_at(kr);
                        b1[lane] = word_at(kr + 8);
                    }
                    mma_emu(sp[warp][nt], (const uint32_t(*)[4])W[warp].qa[ks], b0, b1);
                }
            /* 2. exchange: write slot */
            float *mine = sx + (size_t)((warp >> 2) * 4 + ds) * NE * 32;
            for (int lane = 0; lane < 32; lane++)
                for (int e = 0; e < NE; e++)
                    mine[e * 32 + lane] = sp[warp][e >> 2][lane][e & 3];
        }
        for (int warp = 0; warp < HG * 4; warp++) {
            emu_warp *w = &W[warp];
            const int hg = warp >> 2, ds = warp & 3;
            static float s[NTN][32][4];
            for (int lane = 0; lane < 32; lane++)
                for (int e = 0; e < NE; e++) {
                    const float *base = sx + hg * 4 * NE * 32 + e * 32 + lane;
                    s[e >> 2][lane][e & 3] = ((base[0] + base[NE * 32]) + base[2 * NE * 32]) + base[3 * NE * 32];
                }
            /* 3. online softmax (per lane; quad reductions over lanes 4g..4g+3) */
            float mx0[32], mx1[32];
            for (int lane = 0; lane < 32; lane++) {
                const int t = lane & 3;
                mx0[lane] = mx1[lane] = -INFINITY;
                for (int nt = 0; nt < NTN; nt++) {
                    const int v0 = valid[nt * 8 + 2 * t] != 0, v1 = valid[nt * 8 + 2 * t + 1] != 0;
                    s[nt][lane][0] = v0 ? s[nt][lane][0] * scale_log2 : -INFINITY;
                    s[nt][lane][1] = v1 ? s[nt][lane][1] * scale_log2 : -INFINITY;
                    s[nt][lane][2] = v0 ? s[nt][lane][2] * scale_log2 : -INFINITY;
                    s[nt][lane][3] = v1 ? s[nt][lane][3] * scale_log2 : -INFINITY;
                    mx0[lane] = fmaxf(mx0[lane], fmaxf(s[nt][lane][0], s[nt][lane][1]));
                    mx1[lane] = fmaxf(mx1[lane], fmaxf(s[nt][lane][2], s[nt][lane][3]));
                }
            }
            for (int off = 1; off <= 2; off <<= 1) { /* __shfl_xor_sync 1, 2 */
                float t0[32], t1[32];
                for (int lane = 0; lane < 32; lane++) {
                    t0[lane] = fmaxf(mx0[lane], mx0[lane ^ off]);
                    t1[lane] = fmaxf(mx1[lane], mx1[lane ^ off]);
                }
                memcpy(mx0, t0, sizeof t0);
                memcpy(mx1, t1, sizeof t1);
            }
            for (int lane = 0; lane < 32; lane++) {
                const float mn0 = fmaxf(w->m0[lane], mx0[lane]), mn1 = fmaxf(w->m1[lane], mx1[lane]);
                const float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
                const float al0 = exp2f(w->m0[lane] - mu0), al1 = exp2f(w->m1[lane] - mu1);
                w->m0[lane] = mn0;
                w->m1[lane] = mn1;
                float rs0 = 0.f, rs1 = 0.f;
                for (int nt = 0; nt < NTN; nt++) {
                    s[nt][lane][0] = exp2f(s[nt][lane][0] - mu0);
                    s[nt][lane][1] = exp2f(s[nt][lane][1] - mu0);
                    s[nt][lane][2] = exp2f(s[nt][lane][2] - mu1);
                    s[nt][lane][3] = exp2f(s[nt][lane][3] - mu1);
                    rs0 += s[nt][lane][0] + s[nt][lane][1];
                    rs1 += s[nt][lane][2] + s[nt][lane][3];
                }
                w->l0[lane] = w->l0[lane] * al0 + rs0;
                w->l1[lane] = w->l1[lane] * al1 + rs1;
                for (int j = 0; j < 16; j++) {
                    w->o[j][lane][0] *= al0;
                    w->o[j][lane][1] *= al0;
                    w->o[j][lane][2] *= al1;
                    w->o[j][lane][3] *= al1;
                }
            }
            /* 4. O += P V */
            for (int kk = 0; kk < NKV; kk++) {
                uint32_t pa[32][4];
                const uint16_t *vrow[32];
                for (int lane = 0; lane < 32; lane++) {
                    pa[lane][0] = pack_bf16(s[2 * kk][lane][0], s[2 * kk][lane][1]);
                    pa[lane][1] = pack_bf16(s[2 * kk][lane][2], s[2 * kk][lane][3]);
                    pa[lane][2] = pack_bf16(s[2 * kk + 1][lane][0], s[2 * kk + 1][lane][1]);
                    pa[lane][3] = pack_bf16(s[2 * kk + 1][lane][2], s[2 * kk + 1][lane][3]);
                    vrow[lane] = tile + (16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7)) * ROWE + ds * 128 + 8 * (lane >> 4);
                }
                for (int np = 0; np < 8; np++) {
                    uint32_t b[32][4], b0[32], b1[32], b2[32], b3[32];
                    const uint16_t *addr[32];
                    for (int lane = 0; lane < 32; lane++)
                        addr[lane] = vrow[lane] + 16 * np;
                    ldmatrix_x4_trans_emu(b, addr);
                    for (int lane = 0; lane < 32; lane++) {
                        b0[lane] = b[lane][0];
                        b1[lane] = b[lane][1];
                        b2[lane] = b[lane][2];
                        b3[lane] = b[lane][3];
                    }
                    mma_emu(w->o[2 * np], (const uint32_t(*)[4])pa, b0, b1);
                    mma_emu(w->o[2 * np + 1], (const uint32_t(*)[4])pa, b2, b3);
                }
            }
        }
    }

    /* epilogue */
    for (int warp = 0; warp < HG * 4; warp++) {
        emu_warp *w = &W[warp];
        const int hg = warp >> 2, ds = warp & 3;
        const int h0 = hgrp * HG * 16 + hg * 16;
        float l0[32], l1[32];
        for (int lane = 0; lane < 32; lane++) {
            l0[lane] = w->l0[lane];
            l1[lane] = w->l1[lane];
        }
        for (int off = 1; off <= 2; off <<= 1) {
            float t0[32], t1[32];
            for (int lane = 0; lane < 32; lane++) {
                t0[lane] = l0[lane] + l0[lane ^ off];
                t1[lane] = l1[lane] + l1[lane ^ off];
            }
            memcpy(l0, t0, sizeof t0);
            memcpy(l1, t1, sizeof t1);
        }
        size_t row_base = p->splits == 1 ? (size_t)n * heads : ((size_t)split * a->n_seq + n) * heads;
        for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3;
            const float inv0 = l0[lane] > 0.f ? 1.f / l0[lane] : 0.f, inv1 = l1[lane] > 0.f ? 1.f / l1[lane] : 0.f;
            const int ha = h0 + g, hb = h0 + g + 8;
            for (int j = 0; j < 16; j++) {
                const int d = ds * 128 + 8 * j + 2 * t;
                if (ha < heads) {
                    dst_out_all[(row_base + ha) * DV + d] = w->o[j][lane][0] * inv0;
                    dst_out_all[(row_base + ha) * DV + d + 1] = w->o[j][lane][1] * inv0;
                }
                if (hb < heads) {
                    dst_out_all[(row_base + hb) * DV + d] = w->o[j][lane][2] * inv1;
                    dst_out_all[(row_base + hb) * DV + d + 1] = w->o[j][lane][3] * inv1;
                }
            }
            if (dst_lse_all && ds == 0 && t == 0) {
                if (ha < heads)
                    dst_lse_all[row_base + ha] = l0[lane] > 0.f ? (w->m0[lane] + log2f(l0[lane])) * LN2_F : -INFINITY;
                if (hb < heads)
                    dst_lse_all[row_base + hb] = l1[lane] > 0.f ? (w->m1[lane] + log2f(l1[lane])) * LN2_F : -INFINITY;
            }
        }
    }
}

int cuda_attn_tiled_emulate(const cuda_attn_args *a, int sm_count)
{
    cuda_attn_plan p;
    if (!a || cuda_attn_tiled_plan(a->n_seq, a->heads, a->topk, sm_count, a->layout, &p) != 0 || !a->out)
        return -1;
    int rc = -1;
    size_t rows = (size_t)a->n_seq * a->heads;
    emu_warp *W = malloc(8 * sizeof *W);
    /* the largest layout: EMU_NS_MAX bf16 tiles (covers 1 bf16 + NS raw fp8) */
    uint8_t *smem = malloc((size_t)EMU_NS_MAX * BK * ROWE * 2);
    float *sx = malloc(2 * 4 * NE * 32 * sizeof(float));
    float *ws_out = NULL, *ws_lse = NULL;
    if (!W || !smem || !sx)
        goto done;
    if (p.splits > 1) {
        ws_out = malloc((size_t)p.splits * rows * DV * sizeof(float));
        ws_lse = malloc((size_t)p.splits * rows * sizeof(float));
        if (!ws_out || !ws_lse)
            goto done;
    }
    const float scale_log2 = a->scale * LOG2E_F;
    for (int n = 0; n < a->n_seq; n++)
        for (int split = 0; split < p.splits; split++)
            for (int hgrp = 0; hgrp < p.head_groups; hgrp++)
                run_block(a, &p, hgrp, split, n, scale_log2, p.splits > 1 ? ws_out : a->out,
                          p.splits > 1 ? ws_lse : a->lse, W, smem, sx);
    if (p.splits > 1)
        cuda_attn_combine_host(ws_out, ws_lse, p.splits, (int)rows, a->out, a->lse);
    rc = 0;
done:
    free(W);
    free(smem);
    free(sx);
    free(ws_out);
    free(ws_lse);
    return rc;
}
