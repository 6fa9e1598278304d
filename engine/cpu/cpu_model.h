/* cpu_model.h (internal to engine/cpu/): the dense parts of the cpu
 * backend's decode step, around the attention kernels.
 *
 * Per step for N decoding sequences (shapes):
 *   embed    X (N, d_model)       seeded embedding of each sequence's last token
 *   dense    Hd (N, d_ff) = X · W (d_model, d_ff)       one cblas_sgemm: W is
 *            read once per step for the whole batch, so this is the law's a
 *   project  q (N, H, 576) and the new KV row (N, 576) sliced from Hd
 *   sample   o (N, 512) = mean over heads of the attention output;
 *            (under tp=K, engine/cpu/README.md: each rank computes Hd's
 *            d_ff/K columns, its H/K heads and their head sum; an all-reduce
 *            of the sums gives the mean)
 *            logits (N, vocab) = o · Wv (512, vocab); token = argmax, with
 *            the softmax probability of the winner kept (a real softmax pass)
 *
 * Weights are fp32, seeded, scaled ~1/sqrt(fan-in) so activations stay O(1).
 *
 * DESIGN (threads): OpenBLAS is set to one thread and the GEMM is split into
 * column blocks run by the backend's own pool. OpenBLAS's worker threads
 * busy-wait for a while after each call; on a small machine they then steal
 * the cores the attention phase needs right after (measured here: attention
 * 2x slower behind a 2-thread OpenBLAS GEMM). One pool, no spinning.
 */
#ifndef LOADLAW_CPU_MODEL_H
#define LOADLAW_CPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_pool.h"

typedef struct cpu_dense {
    int d_model, d_ff, vocab;
    float *w;   /* (d_model, d_ff) */
    float *wv;  /* (ATTN_DV, vocab) */
} cpu_dense;

/* 0, LL_EINVAL (sizes out of range; d_ff must be >= ATTN_DQK) or LL_ENOMEM.
 * Free with cpu_dense_free (safe on a zeroed struct). */
int cpu_dense_init(cpu_dense *d, int d_model, int d_ff, int vocab, uint64_t seed, char *err,
                   size_t errlen);
void cpu_dense_free(cpu_dense *d);

/* X (n, d_model) from tokens (n). */
void cpu_embed(const cpu_dense *d, const int32_t *tokens, int n, uint64_t seed, float *x);
/* Hd[:, c0:c1] = X · W[:, c0:c1] through OpenBLAS, split by column blocks
 * over the pool (OpenBLAS itself single-threaded: see cpu_dense_init); the
 * other columns of hd (n, d_ff) are left alone. [0, d_ff): the whole GEMM;
 * a tensor-parallel rank passes its shard. */
void cpu_dense_forward(cpu_pool *pool, const cpu_dense *d, const float *x, int n, int c0, int c1,
                       float *hd);
/* q (n, h1-h0, ATTN_DQK) fp32 for heads [h0, h1) (global indices) from the
 * whole Hd (n, d_ff). */
void cpu_project_q(const cpu_dense *d, const float *hd, int n, int h0, int h1, float *q);
/* kv_new (n, ATTN_DQK) fp32 from Hd's first ATTN_DQK columns. */
void cpu_project_kv(const cpu_dense *d, const float *hd, int n, float *kv_new);
/* sum (n, ATTN_DV) = the attention output (n, heads, ATTN_DV) summed over
 * its heads, in head order from 0.0f: a rank's share of the head mean (the
 * row-parallel part that the all-reduce completes). */
void cpu_head_sum(const float *attn_out, int n, int heads, float *sum);
/* tokens (n) from the sum over all `heads` heads (n, ATTN_DV), which is
 * scaled in place to the mean; logits (n, vocab) are caller scratch. prob
 * (n, may be NULL) gets the winner's softmax probability. */
void cpu_sample(const cpu_dense *d, float *sum, int n, int heads, float *logits, int32_t *tokens,
                float *prob);

/* For tests: the last token sampled for slot (0 before any decode), or -1
 * for a slot out of range. state is what eng_backend_cpu.create made. */
int cpu_backend_token(void *state, int slot);
/* For tests, after a decode step of n sequences: sequence i's attention
 * output for head h (ATTN_DV floats) and its logits (vocab floats), or NULL
 * out of range. Valid until the next step. */
const float *cpu_backend_attn_out(void *state, int i, int h);
const float *cpu_backend_logits(void *state, int i);

#endif
