/* cuda_rescore.h (internal to engine/cuda/): the cuda backend's tokens with
 * their logprobs, and a prompt's scored continuation (backend.h eng_cont,
 * engine/prompt_lp.c) through a prefill path that shares nothing with the
 * decode attention kernel under test.
 *
 * Decode (backend_cuda.c) samples on the device; the step copies each row's
 * logits and its winner's softmax probability back, and cuda_score_row turns
 * them into the eng_tok the engine streams (logprob, rank, the ENG_TOK_TOP
 * best alternatives), as the cpu backend's cpu_rescore.c does.
 *
 * Scoring a continuation of n tokens after P context rows is the prefill of
 * those tokens on rank 0: embed and one GEMM per chunk of up to max_running
 * positions, then, position by position (causal as decode saw it: the rows
 * after a position still hold the slot's history), its new KV row and query
 * (project_q_kv_kernel), its top-k (the request's key) and its attention by
 * the NAIVE kernel with no testing fault, then one logits product and
 * softmax per chunk. Costs n single-sequence naive launches and one host
 * synchronisation per chunk, once per scored request.
 *
 * Thread safety: the scheduler thread's, like the step (cuda_state.h).
 */
#ifndef LOADLAW_CUDA_RESCORE_H
#define LOADLAW_CUDA_RESCORE_H

#include <stdint.h>

#include "backend.h"
#include "cuda_state.h"

/* The phase name of a step's continuation scoring (host-timed). */
#define CUDA_K_SCORE "prefill_score_naive"

/* t: token id's logprob under the logits lg (vocab), given the row's
 * winning softmax probability prob (softmax_argmax_kernel's: the log-sum-exp
 * is max - log(prob)); *rank (1 = argmax; may be NULL) and the ENG_TOK_TOP
 * largest logits, the largest first, ties to the lower id. */
void cuda_score_row(const float *lg, int vocab, float prob, int32_t id, eng_tok *t, int32_t *rank);

/* Score c (c->out, c->rank) for the request on `slot` (its key and first
 * token set by its prefill, its prompt rows already written) and write the
 * continuation's rows; *next gets the token that follows it. Synchronous.
 * 0, or LL_EIO with st->last_err set (the backend is broken then). At tp > 1
 * nothing is computed: c->out ids stay -1 and *next is the slot's token. */
int cuda_rescore(cuda_state *st, int slot, const eng_cont *c, eng_tok *next);

/* After a step's wait: the tokens for the engine. Each decode's with its
 * logprob and alternatives (from the logits copied back) when the step
 * wants them (eng_batch.want_lp), else its id alone; each prefill
 * chunk's first token, and where a chunk completes a prompt with a
 * continuation to score, the continuation (cuda_rescore), whose following
 * token becomes the request's first output; that work is appended to phases
 * as CUDA_K_SCORE, timed on the host (it waits for its kernels). 0 or
 * cuda_rescore's error. */
int cuda_step_outputs(cuda_state *st, const eng_batch *b, eng_phase *phases, int *n_phases);

#endif
