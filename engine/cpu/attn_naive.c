/* attn_naive.c: one task per (sequence, head), each walking its selected KV
 * rows on its own.
 *
 * This is the shape of the seed's slow kernel: H tasks read the same rows of
 * the same sequence independently, so the KV traffic of a step is
 * N·H·k·1152 bytes, and converting bf16 to fp32 is repeated per head. Each
 * task is a single pass with an online softmax (running max m, running sum
 * l; the accumulator is rescaled only when the max grows), so every row is
 * read once per head, not twice.
 */
#include <math.h>

#include "common.h"
#include "cpu_kernels.h"

static void naive_task(void *ctx, int task, int worker)
{
    (void)worker;
    const attn_batch *b = ctx;
    int n = task / b->heads;
    const attn_seq *sq = &b->seq[n];
    const float *q = b->q + (size_t)task * ATTN_DQK;   /* task = n*H + h */
    float *o = b->out + (size_t)task * ATTN_DV;
    float acc[ATTN_DV];
    float m = -INFINITY, l = 0.0f;

    for (int d = 0; d < ATTN_DV; d++)
        acc[d] = 0.0f;
    for (int j = 0; j < sq->k; j++) {
        const uint16_t *row = sq->kv + (size_t)sq->idx[j] * ATTN_DQK;
        float s = b->scale * attn_dot_bf16(q, row, ATTN_DQK);
        if (s > m) {
            float c = expf(m - s); /* 0 on the first row (m = -inf) */
            l *= c;
            for (int d = 0; d < ATTN_DV; d++)
                acc[d] *= c;
            m = s;
        }
        float p = expf(s - m);
        l += p;
        for (int d = 0; d < ATTN_DV; d++)
            acc[d] += p * bf16_to_f32(row[d]);
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = 0; d < ATTN_DV; d++)
        o[d] = acc[d] * inv;
}

int attn_decode_naive(cpu_pool *pool, attn_ws *ws, const attn_batch *b)
{
    (void)ws;
    cpu_pool_run(pool, b->n_seq * b->heads, naive_task, (void *)b);
    return 0;
}
