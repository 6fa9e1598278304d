/* cuda_state.h (internal to engine/cuda/): the cuda backend's state, made
 * by cuda_state_create from the engine's keys (cuda_state.c: options, the
 * devices, memory sizing, every allocation) and used by backend_cuda.c's
 * step. One path for every tp: K = tp ranks (cuda_tp.h), each a cuda_rank on
 * its device; tp=1 is K = 1, a rank that holds all of W and all heads, with
 * no communicator. The host-side fields (slots, upload, tokens) are shared
 * by the ranks.
 *
 * Thread safety: none; the engine calls in from one thread at a time
 * (create, then the scheduler's steps, then destroy).
 */
#ifndef LOADLAW_CUDA_STATE_H
#define LOADLAW_CUDA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_attn.h"
#include "comm.h"
#include "cuda_model.h"
#include "cuda_tp.h"
#include "model_opts.h"
#include "splitmix.h" /* the seeds of a slot's rows are the cpu backend's */

/* Phases of a rank's step: fill, embed, GEMM, project, top-k, attention
 * (with its head sum), all-reduce (K > 1); rank 0 also logits and sample. */
#define CUDA_TP_RANK_PHASES 9
_Static_assert(CUDA_TP_RANK_PHASES + (CUDA_TP_MAX - 1) * (CUDA_TP_RANK_PHASES - 2) <= ENG_MAX_PHASES,
               "the engine takes every rank's phases of a step");

/* The all-reduce phase, named like NCCL's kernel so `loadlaw trace` and
 * eng_phase_is_comm file it under communication. */
#define CUDA_K_ALLREDUCE "ncclDevKernel_AllReduce_Sum_f32_RING_LL"

/* The host-to-device upload of one step, one copy: these arrays at fixed
 * offsets of a pinned buffer and its device twin. */
typedef struct cuda_upload {
    size_t off_slot, off_tok, off_ctx, off_key, off_items, bytes;
    int max_items;
} cuda_upload;

/* One rank: everything on its device. */
typedef struct cuda_rank {
    int rank, device, h0, h1, sm_count;
    int whole;              /* holds all of W (K = 1): the unsharded GEMM and projection */
    char dev_name[256];
    cudaStream_t stream;
    cudaEvent_t ev[CUDA_TP_RANK_PHASES + 1];
    int n_ev;
    cuda_dense dense;       /* W, or its shard (d_model, ncols); Wv on rank 0 only */
    int ncols;
    int32_t *d_cols;        /* shard: (ncols) global column of each local one */
    int32_t *d_colmap;      /* shard: (d_ff) local column of each global one, -1 */
    uint8_t *d_pool;        /* the latent KV pool (a full copy on every rank) */
    uint16_t *d_x;
    float *d_hd, *d_q, *d_out, *d_lse;
    float *d_sum;           /* K > 1: the head sum, all-reduced in place */
    int32_t *d_idx;
    void *d_ws;
    size_t ws_bytes;
    uint8_t *d_up;
    /* rank 0 only: sampling */
    float *d_mean, *d_logits, *d_prob;
    int32_t *d_tok_out;
} cuda_rank;

typedef struct cuda_state {
    eng_model_opts o;
    cuda_attn_kind kind;
    cuda_kv_layout layout;
    cuda_rank *rk;        /* (o.tp) */
    eng_comm *comm;       /* NCCL over the ranks; NULL at K = 1 */
    size_t row_bytes;
    int64_t pool_rows;
    cuda_upload up;
    uint8_t *h_up;        /* pinned, portable: every rank's stream copies from it */
    int32_t *h_tok_out;   /* pinned */
    float *h_logits;      /* pinned (max_running, vocab): the last sample's logits */
    float *h_prob;        /* pinned (max_running): each row's winning probability */
    int fault;            /* attn_fault on the tiled kernel (CUDA_ATTN_FAULT_*), else 0 */
    /* per slot, host side */
    uint8_t *filled;      /* history rows written (cleared when a request leaves) */
    int64_t *prefilled;
    int32_t *token;
    uint64_t *key;        /* the request's key: its top-k choice and prompt rows */
    int last_n;           /* sequences in the last decode step (view) */
    long steps;           /* steps run (fault_step counts them) */
    int broken;           /* a CUDA error happened: the context is unusable */
    const char *attn_name;
    char last_err[512];
} cuda_state;

/* The seeded history rows of every slot (a request starts on them, so no
 * output depends on which slot it landed on). */
static inline uint64_t cuda_history_seed(uint64_t model_seed)
{
    return ll_splitmix64(model_seed);
}

/* A slot's key while no request with a seed holds it (a batch without
 * prefill_seed): the top-k choice ll_splitmix64(seed ^ slot). */
static inline uint64_t cuda_slot_key(uint64_t model_seed, int slot)
{
    return ll_splitmix64(model_seed ^ (uint64_t)slot);
}

/* Check the keys, find the devices, size and allocate everything (each
 * device's total checked against cudaMemGetInfo first), make the weights;
 * at K > 1 the NCCL communicators too. 0, or LL_EINVAL (a bad key, no
 * device, NCCL refused), LL_ENOMEM (does not fit; the message has the sizes)
 * or LL_EIO (a CUDA call failed), with the reason in err; K > 1 errors name
 * the rank and its device. */
int cuda_state_create(const eng_config *cfg, cuda_state **out, char *err, size_t errlen);
/* Safe on a partly made state and after a CUDA error (the communicators are
 * aborted first when a step broke the backend). */
void cuda_state_destroy(cuda_state *st);

#endif
