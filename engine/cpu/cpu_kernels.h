/* cpu_kernels.h (internal to engine/cpu/, shared with tests/cpu, tests/cuda,
 * tests/engine/backends and bench/cpu):
 * sparse MLA decode attention on the CPU, a reference beside two kernels.
 *
 * The model (DeepSeek MLA with absorbed queries, one decode token per sequence):
 *   - latent KV cache, shared by all query heads: per token ATTN_DQK = 576
 *     values (512 latent + 64 rope), stored as bf16. The first ATTN_DV = 512
 *     (the latent part) are also the values.
 *   - queries: per head 576 fp32 values (already multiplied by the absorbed
 *     key up-projection).
 *   - per sequence n a list of k_n selected positions (the top-k of the
 *     indexer; see cpu_topk_select), distinct, in [0, rows of its cache).
 *   - s[h][j] = scale * q[n][h] . kv[idx[j]]          (576 dims)
 *     p[h][j] = softmax_j(s[h][j])                     (over the k_n selected)
 *     out[n][h] = sum_j p[h][j] * kv[idx[j]][0:512]   (512 dims)
 *   A sequence with k_n = 0 gets a zero output.
 *
 * Kernels (same inputs, same outputs; each checked against the reference):
 *   attn_decode_ref    plain loops, double accumulation, one thread. Truth.
 *   attn_decode_naive  one task per (sequence, head); each walks its selected
 *                      rows on its own, so the KV rows are read H times per
 *                      step — the shape of the seed's slow kernel.
 *   attn_decode_tiled  tiles of ATTN_TILE selected rows are gathered and
 *                      converted once, then used by all H heads as two small
 *                      matrix products (scores = Q·Kᵀ, out += P·V) with an
 *                      online softmax; tasks are (sequence, split) with
 *                      split-k over tiles when N is small, then a merge. KV
 *                      traffic falls by about H.
 *
 * Arithmetic is fp32 in the kernels (bf16 only as storage). Thread safety:
 * kernels may run concurrently only on distinct workspaces.
 */
#ifndef LOADLAW_CPU_KERNELS_H
#define LOADLAW_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_pool.h"
#include "numfmt.h"
#include "splitmix.h" /* ll_splitmix64: every deterministic choice here */

#define ATTN_DQK 576  /* per-token latent + rope dims = query dims */
#define ATTN_DV 512   /* latent dims = value dims */
#define ATTN_TILE 64  /* selected rows per tile in attn_decode_tiled */
#define ATTN_ROW_BYTES (ATTN_DQK * 2)

/* bf16 storage: bf16_to_f32, f32_to_bf16 (numfmt.h, shared with engine/cuda) */

/* ---- one step's attention work ---------------------------------------------- */

typedef struct attn_seq {
    const uint16_t *kv;  /* (rows, ATTN_DQK) bf16 latent KV of this sequence */
    const int32_t *idx;  /* (k) selected rows, distinct, each in [0, rows) */
    int k;               /* >= 0 */
} attn_seq;

typedef struct attn_batch {
    int n_seq;           /* N >= 0 */
    int heads;           /* H >= 1 */
    float scale;         /* softmax scale, usually 1/sqrt(ATTN_DQK) */
    const float *q;      /* (N, H, ATTN_DQK) */
    const attn_seq *seq; /* (N) */
    float *out;          /* (N, H, ATTN_DV), written */
    int fault;           /* testing, attn_decode_tiled only: ENG_ATTN_FAULT_* (engine.h), a
                          * deliberate bug; 0 = none */
} attn_batch;

/* Bytes of KV each kernel must read for batch b (the traffic model the bench
 * reports): naive reads every selected row once per head, tiled once. Queries
 * and outputs (fp32) are counted in both. */
double attn_bytes_naive(const attn_batch *b);
double attn_bytes_tiled(const attn_batch *b);

/* 0, or LL_EINVAL with a message for a malformed batch (NULL pointers,
 * heads < 1, k < 0). Indices are not range-checked here (callers own them). */
int attn_batch_check(const attn_batch *b, char *err, size_t errlen);

/* Reference: plain loops, double accumulation, single thread.
 * 0 or LL_ENOMEM (score scratch). */
int attn_decode_ref(const attn_batch *b);

/* Per-thread scratch of the fast kernels. One workspace per concurrent
 * caller; it grows on demand and is freed by attn_ws_free. */
typedef struct attn_ws attn_ws;
attn_ws *attn_ws_new(void);
void attn_ws_free(attn_ws *ws);
/* Internal to the kernels: per-worker scratch of worker_floats each (64-byte
 * aligned) and a shared area of shared_floats; NULL on allocation failure. */
float *attn_ws_worker(attn_ws *ws, int worker);
float *attn_ws_shared(attn_ws *ws);
int attn_ws_reserve(attn_ws *ws, int workers, size_t worker_floats, size_t shared_floats);

/* 0 or LL_ENOMEM (scratch could not grow; out is then unspecified). */
int attn_decode_naive(cpu_pool *pool, attn_ws *ws, const attn_batch *b);
int attn_decode_tiled(cpu_pool *pool, attn_ws *ws, const attn_batch *b);

/* Shared vector primitives (attn_prims.c), written so the compiler can
 * vectorize them without reassociation flags: 16 independent partial sums. */
float attn_dot_f32(const float *a, const float *b, int n);     /* n % 16 == 0 */
float attn_dot_bf16(const float *a, const uint16_t *b, int n); /* n % 16 == 0 */

/* ---- the indexer stand-in and the synthetic cache ------------------------- */

/* Select min(k, ctx) distinct sorted rows of [0, ctx): the most recent quarter
 * of them, plus a seeded spread over the rest (one row per equal-width
 * bucket, offset by a hash of (seed, ctx, i)), so the choice changes as the
 * context grows, like a real indexer's. Writes idx[0..n) and returns n. */
int cpu_topk_select(int64_t ctx, int k, uint64_t seed, int32_t *idx);

/* Fill rows [row0, row0+n) of a (rows, ATTN_DQK) bf16 cache with seeded
 * values in about [-1, 1): value depends only on (seed, row, dim). */
void cpu_kv_fill(uint16_t *kv, int64_t row0, int64_t n, uint64_t seed);

#endif
