/* cpu_rescore.h (internal to engine/cpu/): the cpu backend's prefill path
 * with logits per prompt position, for a prompt's scored continuation
 * (backend.h eng_cont, engine/prompt_lp.c).
 *
 * Decode makes one token per step: embed the last token, one GEMM row, write
 * its KV row, attend over the selected rows with the configured kernel
 * (naive or tiled), sample. Scoring a continuation of n tokens is the prefill
 * of those tokens: one GEMM for all n rows, then per position its KV row
 * written and its attention over the rows before it, always with the naive
 * kernel and never with a testing fault (a different kernel than a tiled
 * decode, as a server's prefill attention is), then one logits product for
 * all n. Positions are causal exactly as decode saw them: the rows after a
 * position still hold the history a decode step found there.
 */
#ifndef LOADLAW_CPU_RESCORE_H
#define LOADLAW_CPU_RESCORE_H

#include <stdint.h>

#include "backend.h"
#include "cpu_kernels.h"
#include "cpu_model.h"

typedef struct cpu_rescore_in {
    cpu_pool *pool;
    attn_ws *ws;
    const cpu_dense *dense;
    int heads, topk, capacity, min_ctx;
    float scale;               /* the decode attention's softmax scale */
    uint64_t model_seed;       /* the embedding's */
    uint64_t seq_seed;         /* the request's (top-k choice) */
    uint64_t hist_seed;        /* the rows no request wrote */
    int32_t first_tok;         /* the context's first token (the prefill's answer) */
    uint16_t *kv;              /* (capacity, ATTN_DQK) the slot's rows */
} cpu_rescore_in;

/* Score c (c->out, c->rank) and write its rows; *next gets the token that
 * follows it (the request's first output) and *rows_hi the rows touched.
 * 0 or LL_ENOMEM. */
int cpu_rescore(const cpu_rescore_in *in, const eng_cont *c, eng_tok *next, int64_t *rows_hi);

#endif
