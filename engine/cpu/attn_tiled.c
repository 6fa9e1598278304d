/* attn_tiled.c: each tile of selected KV rows is gathered and converted from
 * bf16 once, then used by all H heads.
 *
 * Per sequence, queries are transposed once to qT (576, Hp), Hp = H rounded
 * up to 16 (padded heads have zero queries and are dropped at the end).
 * Per tile of T = ATTN_TILE selected rows (shapes):
 *   K_t   (T, 576)  fp32, gathered through idx and converted once
 *   Sᵀ    (T, Hp)   = scale · K_t · qT      (4 rows x 64 heads per block:
 *                   one K value broadcast against 16-head vectors)
 *   online softmax per head (flash-decoding): m_new = max(m, max_t S),
 *         c = exp(m - m_new), l = l·c + Σ_t exp(S - m_new), acc ·= c
 *   acc   (Hp, 512) += P (Hp, T) · K_t[:, 0:512]   (4 heads x 64 dims blocks)
 * so a step reads N·k·1152 bytes of KV instead of N·H·k·1152, and each
 * loaded K value feeds several heads' FMAs from registers.
 *
 * DESIGN (threads): tasks are (sequence, split). With few sequences the tiles
 * of each are split S ways (split-k) so every thread has work; each split
 * leaves (acc, m, l) in a shared partial buffer and a second pass merges the
 * splits per (sequence, head): M = max m_s, L = Σ l_s e^(m_s - M),
 * out = Σ acc_s e^(m_s - M) / L. Per-worker scratch holds K_t, S and the
 * running (acc, m, l) of the split being worked on.
 *
 * Faults (b->fault, for testing that an A/B catches a wrong kernel; each is
 * a slip such a rewrite makes, and each makes the kernel no slower):
 *   skip_last_tile  the split that owns a sequence's last tile stops one
 *                   short (an off-by-one loop bound): the newest rows, which
 *                   the indexer always selects, are never attended
 *   swap_heads      the write-back takes head h's accumulator from head h^1
 *                   but normalises it by h's own l (a head-index slip in the
 *                   epilogue): not a permutation, so the head mean moves
 */
#include <math.h>

#include "common.h"
#include "cpu_kernels.h"
#include "engine.h"

#define HB 4   /* heads per register block in P·V */
#define HV 16  /* heads per vector in Q·Kᵀ; heads are padded to a multiple */

typedef struct tiled_ctx {
    const attn_batch *b;
    attn_ws *ws;
    int splits;           /* S, the same for every sequence of the batch */
    int hp;               /* heads padded to a multiple of HV */
    float *part;          /* (N, S, H, ATTN_DV + 2): acc, then m and l */
} tiled_ctx;

static size_t part_stride(void) { return ATTN_DV + 2; }

/* sT (T, hp)[t][h] = scale · kt[t] · qT[:, h] for t < nt.
 * Kᵀ-free form: queries are transposed once per sequence into qT (576, hp),
 * so the inner step broadcasts one K value and multiplies a vector of 16
 * heads; a block of 4 rows x 64 heads keeps 16 vector accumulators. */
static void scores_tile(const float *qT, int hp, const float *kt, int nt, float scale, float *sT)
{
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const float *k[4];
        for (int j = 0; j < 4; j++) /* past the tail, recompute the last row */
            k[j] = kt + (size_t)(t0 + j < nt ? t0 + j : nt - 1) * ATTN_DQK;
        int h0 = 0;
        for (; h0 + 64 <= hp; h0 += 64) {
            float a[4][64] = {{0}};
            for (int d = 0; d < ATTN_DQK; d++) {
                const float *qd = qT + (size_t)d * hp + h0;
                for (int j = 0; j < 4; j++) {
                    float kv = k[j][d];
                    for (int l = 0; l < 64; l++)
                        a[j][l] += kv * qd[l];
                }
            }
            for (int j = 0; j < 4 && t0 + j < nt; j++)
                for (int l = 0; l < 64; l++)
                    sT[(size_t)(t0 + j) * hp + h0 + l] = scale * a[j][l];
        }
        /* 32 heads (a tp rank's share of 64): 8 accumulators, half the 64
         * block's reuse but 3x faster than 16-wide blocks (measured here:
         * H=32 in 16-wide blocks took 3.2x the time of H=64) */
        for (; h0 + 32 <= hp; h0 += 32) {
            float a[4][32] = {{0}};
            for (int d = 0; d < ATTN_DQK; d++) {
                const float *qd = qT + (size_t)d * hp + h0;
                for (int j = 0; j < 4; j++) {
                    float kv = k[j][d];
                    for (int l = 0; l < 32; l++)
                        a[j][l] += kv * qd[l];
                }
            }
            for (int j = 0; j < 4 && t0 + j < nt; j++)
                for (int l = 0; l < 32; l++)
                    sT[(size_t)(t0 + j) * hp + h0 + l] = scale * a[j][l];
        }
        for (; h0 < hp; h0 += HV) {
            float a[4][HV] = {{0}};
            for (int d = 0; d < ATTN_DQK; d++) {
                const float *qd = qT + (size_t)d * hp + h0;
                for (int j = 0; j < 4; j++) {
                    float kv = k[j][d];
                    for (int l = 0; l < HV; l++)
                        a[j][l] += kv * qd[l];
                }
            }
            for (int j = 0; j < 4 && t0 + j < nt; j++)
                for (int l = 0; l < HV; l++)
                    sT[(size_t)(t0 + j) * hp + h0 + l] = scale * a[j][l];
        }
    }
}

/* Online-softmax update over one tile: sT becomes P (unnormalised), and the
 * running (m, l, acc) of every head are rescaled to the new max. */
static void softmax_tile(float *sT, int hp, int nt, float *acc, float *m, float *l, float *c)
{
    float mt[HV];
    for (int h0 = 0; h0 < hp; h0 += HV) {
        for (int i = 0; i < HV; i++)
            mt[i] = m[h0 + i];
        for (int t = 0; t < nt; t++)
            for (int i = 0; i < HV; i++)
                if (sT[(size_t)t * hp + h0 + i] > mt[i])
                    mt[i] = sT[(size_t)t * hp + h0 + i];
        for (int i = 0; i < HV; i++) {
            c[h0 + i] = expf(m[h0 + i] - mt[i]); /* 0 on the first tile (m = -inf) */
            l[h0 + i] *= c[h0 + i];
            m[h0 + i] = mt[i];
        }
    }
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < hp; h++) {
            float p = expf(sT[(size_t)t * hp + h] - m[h]);
            sT[(size_t)t * hp + h] = p;
            l[h] += p;
        }
    for (int h = 0; h < hp; h++)
        if (c[h] != 1.0f)
            for (int d = 0; d < ATTN_DV; d++)
                acc[(size_t)h * ATTN_DV + d] *= c[h];
}

/* acc (hp, 512) += P (hp, T) · kt[0:nt, 0:512], with P stored as pT (T, hp).
 * Blocks of 4 heads x 64 dims: per row, 4 broadcasts and 4 loads feed 16 FMAs. */
static void pv_tile(const float *pT, int hp, const float *kt, int nt, float *acc)
{
    for (int h0 = 0; h0 < hp; h0 += HB)
        for (int d0 = 0; d0 < ATTN_DV; d0 += 64) {
            float a[HB][64];
            for (int i = 0; i < HB; i++)
                for (int l = 0; l < 64; l++)
                    a[i][l] = acc[(size_t)(h0 + i) * ATTN_DV + d0 + l];
            for (int t = 0; t < nt; t++) {
                const float *v = kt + (size_t)t * ATTN_DQK + d0;
                for (int i = 0; i < HB; i++) {
                    float pi = pT[(size_t)t * hp + h0 + i];
                    for (int l = 0; l < 64; l++)
                        a[i][l] += pi * v[l];
                }
            }
            for (int i = 0; i < HB; i++)
                for (int l = 0; l < 64; l++)
                    acc[(size_t)(h0 + i) * ATTN_DV + d0 + l] = a[i][l];
        }
}

static size_t worker_floats(int hp)
{
    return (size_t)ATTN_DQK * hp +              /* qT */
           (size_t)ATTN_TILE * ATTN_DQK +       /* kt */
           (size_t)ATTN_TILE * hp +             /* sT */
           (size_t)hp * ATTN_DV + 3 * (size_t)hp; /* acc, m, l, c */
}

static void tiled_task(void *vctx, int task, int worker)
{
    const tiled_ctx *cx = vctx;
    const attn_batch *b = cx->b;
    const int H = b->heads, S = cx->splits, hp = cx->hp;
    const int n = task / S, split = task % S;
    const attn_seq *sq = &b->seq[n];
    const float *q = b->q + (size_t)n * H * ATTN_DQK;

    float *qT = attn_ws_worker(cx->ws, worker);          /* (576, hp) */
    float *kt = qT + (size_t)ATTN_DQK * hp;              /* (T, 576) */
    float *sT = kt + (size_t)ATTN_TILE * ATTN_DQK;       /* (T, hp) */
    float *acc = sT + (size_t)ATTN_TILE * hp;            /* (hp, 512) */
    float *m = acc + (size_t)hp * ATTN_DV;               /* (hp) */
    float *l = m + hp;                                   /* (hp) */
    float *c = l + hp;                                   /* (hp) */

    int tiles = (sq->k + ATTN_TILE - 1) / ATTN_TILE;
    int tile0 = (int)((int64_t)split * tiles / S), tile1 = (int)((int64_t)(split + 1) * tiles / S);
    if (b->fault == ENG_ATTN_FAULT_SKIP_LAST_TILE && tile1 == tiles && tile1 - tile0 > 1)
        tile1--;
    /* the head whose accumulator head hh's output is written from */
#define SRC_HEAD(hh) (b->fault == ENG_ATTN_FAULT_SWAP_HEADS && ((hh) ^ 1) < H ? (hh) ^ 1 : (hh))

    /* padded heads get zero queries: finite scores, ignored outputs */
    for (int d = 0; d < ATTN_DQK; d++)
        for (int h = 0; h < hp; h++)
            qT[(size_t)d * hp + h] = h < H ? q[(size_t)h * ATTN_DQK + d] : 0.0f;
    for (size_t i = 0; i < (size_t)hp * ATTN_DV; i++)
        acc[i] = 0.0f;
    for (int h = 0; h < hp; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    for (int tile = tile0; tile < tile1; tile++) {
        int j0 = tile * ATTN_TILE;
        int nt = sq->k - j0 < ATTN_TILE ? sq->k - j0 : ATTN_TILE;
        for (int t = 0; t < nt; t++) {
            const uint16_t *row = sq->kv + (size_t)sq->idx[j0 + t] * ATTN_DQK;
            float *dst = kt + (size_t)t * ATTN_DQK;
            for (int d = 0; d < ATTN_DQK; d++)
                dst[d] = bf16_to_f32(row[d]);
        }
        scores_tile(qT, hp, kt, nt, b->scale, sT);
        softmax_tile(sT, hp, nt, acc, m, l, c);
        pv_tile(sT, hp, kt, nt, acc);
    }

    if (S == 1) {
        float *o = b->out + (size_t)n * H * ATTN_DV;
        for (int hh = 0; hh < H; hh++) {
            float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f;
            for (int d = 0; d < ATTN_DV; d++)
                o[(size_t)hh * ATTN_DV + d] = acc[(size_t)SRC_HEAD(hh) * ATTN_DV + d] * inv;
        }
        return;
    }
    float *pp = cx->part + (size_t)task * H * part_stride();
    for (int hh = 0; hh < H; hh++) {
        float *dst = pp + (size_t)hh * part_stride();
        for (int d = 0; d < ATTN_DV; d++)
            dst[d] = acc[(size_t)SRC_HEAD(hh) * ATTN_DV + d];
        dst[ATTN_DV] = m[hh];
        dst[ATTN_DV + 1] = l[hh];
    }
#undef SRC_HEAD
}

static void merge_task(void *vctx, int n, int worker)
{
    (void)worker;
    const tiled_ctx *cx = vctx;
    const attn_batch *b = cx->b;
    const int H = b->heads, S = cx->splits;
    for (int h = 0; h < H; h++) {
        float M = -INFINITY;
        for (int sp = 0; sp < S; sp++) {
            const float *pp = cx->part + (((size_t)n * S + sp) * H + h) * part_stride();
            if (pp[ATTN_DV] > M)
                M = pp[ATTN_DV];
        }
        float *o = b->out + ((size_t)n * H + h) * ATTN_DV;
        for (int d = 0; d < ATTN_DV; d++)
            o[d] = 0.0f;
        if (M == -INFINITY) /* k = 0: every split empty */
            continue;
        float L = 0;
        for (int sp = 0; sp < S; sp++) {
            const float *pp = cx->part + (((size_t)n * S + sp) * H + h) * part_stride();
            float w = expf(pp[ATTN_DV] - M); /* 0 for an empty split */
            L += pp[ATTN_DV + 1] * w;
            if (w > 0.0f)
                for (int d = 0; d < ATTN_DV; d++)
                    o[d] += w * pp[d];
        }
        float inv = 1.0f / L;
        for (int d = 0; d < ATTN_DV; d++)
            o[d] *= inv;
    }
}

int attn_decode_tiled(cpu_pool *pool, attn_ws *ws, const attn_batch *b)
{
    if (b->n_seq == 0)
        return 0;
    int threads = cpu_pool_threads(pool);
    int max_tiles = 1;
    for (int n = 0; n < b->n_seq; n++) {
        int t = (b->seq[n].k + ATTN_TILE - 1) / ATTN_TILE;
        if (t > max_tiles)
            max_tiles = t;
    }
    /* enough tasks for dynamic balancing (about 2 per thread), but a split
     * never smaller than 4 tiles, where the merge would start to cost */
    int splits = (2 * threads + b->n_seq - 1) / b->n_seq;
    if (splits > max_tiles / 4)
        splits = max_tiles / 4;
    if (splits < 1)
        splits = 1;
    size_t part = splits > 1 ? (size_t)b->n_seq * splits * b->heads * part_stride() : 0;
    int hp = (b->heads + HV - 1) / HV * HV;
    if (attn_ws_reserve(ws, threads, worker_floats(hp), part) != 0)
        return LL_ENOMEM;
    tiled_ctx cx = {.b = b, .ws = ws, .splits = splits, .hp = hp, .part = attn_ws_shared(ws)};
    cpu_pool_run(pool, b->n_seq * splits, tiled_task, &cx);
    if (splits > 1)
        cpu_pool_run(pool, b->n_seq, merge_task, &cx);
    return 0;
}
