/* cuda_state.h (internal to engine/cuda/): the cuda backend's state, made
 * by cuda_state_create from the engine's keys (cuda_state.c: options, the
 * device, memory sizing, every allocation) and used by backend_cuda.c's
 * step. tp=1 uses the fields of cuda_state itself (one device, the whole
 * W); tp=K > 1 (cuda_tp.h) holds one cuda_rank per rank instead and leaves
 * cuda_state's device fields empty; the host-side fields (slots, upload,
 * tokens) are shared by both.
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

/* Phases of one step: fill, embed, GEMM, project, top-k, attention,
 * logits, sample. */
#define CUDA_MAX_PHASES 8
_Static_assert(CUDA_MAX_PHASES <= ENG_MAX_PHASES, "the engine takes every phase of a step");

/* Phases of a tp rank's step: fill, embed, GEMM, project, top-k, attention
 * (with its head sum), all-reduce; rank 0 also logits and sample. */
#define CUDA_TP_RANK_PHASES 9
_Static_assert(CUDA_TP_RANK_PHASES + (CUDA_TP_MAX - 1) * (CUDA_TP_RANK_PHASES - 2) <= ENG_MAX_PHASES,
               "the engine takes every rank's phases of a step");

/* The all-reduce phase, named like NCCL's kernel so `loadlaw trace` and
 * eng_phase_is_comm file it under communication. */
#define CUDA_K_ALLREDUCE "ncclDevKernel_AllReduce_Sum_f32_RING_LL"

typedef struct cuda_opts {
    int heads, topk, device, tp;
    cuda_attn_kind kind;
    cuda_kv_layout layout;
    int d_model, d_ff, vocab, capacity, min_ctx;
    int max_slots;
    uint64_t seed;
    int fault_step;       /* fault_fail_step: a testing aid (engine.h) */
} cuda_opts;

/* The host-to-device upload of one step, one copy: these arrays at fixed
 * offsets of a pinned buffer and its device twin. */
typedef struct cuda_upload {
    size_t off_slot, off_tok, off_ctx, off_items, bytes;
    int max_items;
} cuda_upload;

/* One tensor-parallel rank (tp > 1): everything on its device. */
typedef struct cuda_rank {
    int rank, device, h0, h1, sm_count;
    char dev_name[256];
    cudaStream_t stream;
    cudaEvent_t ev[CUDA_TP_RANK_PHASES + 1];
    int n_ev;
    cuda_dense dense;       /* W shard (d_model, ncols); Wv on rank 0 only */
    int ncols;
    int32_t *d_cols;        /* (ncols) global column of each local one */
    int32_t *d_colmap;      /* (d_ff) local column of each global one, -1 */
    uint8_t *d_pool;        /* a full copy of the latent KV pool */
    uint16_t *d_x;
    float *d_hd, *d_q, *d_out, *d_lse, *d_sum;
    int32_t *d_idx;
    void *d_ws;
    size_t ws_bytes;
    uint8_t *d_up;
    /* rank 0 only: sampling */
    float *d_mean, *d_logits, *d_prob;
    int32_t *d_tok_out;
} cuda_rank;

typedef struct cuda_state {
    cuda_opts o;
    /* tp > 1: the ranks and their NCCL communicators (NULL at tp=1) */
    cuda_rank *rk;
    eng_comm *comm;
    int sm_count;
    char dev_name[256];
    cudaStream_t stream;
    cudaEvent_t ev[CUDA_MAX_PHASES + 1];
    int n_ev;
    cuda_dense dense;
    uint8_t *d_pool;
    size_t row_bytes, pool_bytes;
    int64_t pool_rows;
    /* step buffers for max_slots sequences */
    uint16_t *d_x;
    float *d_hd, *d_q, *d_out, *d_lse, *d_mean, *d_logits, *d_prob;
    int32_t *d_idx, *d_tok_out;
    void *d_ws;
    size_t ws_bytes;
    cuda_upload up;
    uint8_t *h_up, *d_up; /* pinned host / device */
    int32_t *h_tok_out;   /* pinned */
    /* per slot, host side */
    uint8_t *filled;      /* history rows written */
    int64_t *prefilled;
    int32_t *token;
    int last_n;           /* sequences in the last decode step (view) */
    long steps;           /* steps run (fault_step counts them) */
    int broken;           /* a CUDA error happened: the context is unusable */
    const char *attn_name;
    char last_err[512];
} cuda_state;

/* splitmix64, cpu_hash64 of cpu_kernels.h: the seeds of a slot's rows are
 * the cpu backend's. */
static inline uint64_t cpu_hash64_host(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Check the keys, find the device, size and allocate everything (the total
 * checked against cudaMemGetInfo first), make the weights. 0, or LL_EINVAL
 * (a bad key, no device), LL_ENOMEM (does not fit; the message has the
 * sizes) or LL_EIO (a CUDA call failed), with the reason in err. */
int cuda_state_create(const eng_config *cfg, cuda_state **out, char *err, size_t errlen);
/* Safe on a partly made state and after a CUDA error. */
void cuda_state_destroy(cuda_state *st);

/* tp > 1 (cuda_tp_state.c): the ranks' devices, NCCL communicators and
 * memory, and the shared host buffers, into st (options already checked).
 * Errors name the rank and its device. cuda_tp_state_free is safe on a
 * partly made state and a no-op at tp=1. */
int cuda_tp_state_create(cuda_state *st, char *err, size_t errlen);
void cuda_tp_state_free(cuda_state *st);

/* The offsets of the step upload for max_slots sequences (cuda_state.c's
 * layout, shared by both paths). */
void cuda_upload_plan(cuda_upload *u, int max_slots);
/* Device memory create leaves free beyond what it allocates: cuBLAS's
 * workspace, NCCL's buffers, and the local memory the driver reserves for
 * every resident thread at a kernel's first launch (kv_cache_fill_kernel's
 * ~1.2 KB frame: ~320 MB on an H200). max(512 MiB, 1/32 of the device). */
size_t cuda_mem_reserve(size_t total_bytes);

#endif
