/* backend_cuda.h (internal to engine/cuda/, for tests/cuda_engine and the
 * backend conformance suite, tests/engine/backends/be_cuda.c): what the
 * tests may see of eng_backend_cuda's state beyond the ops table. */
#ifndef LOADLAW_BACKEND_CUDA_H
#define LOADLAW_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_attn.h"

/* 0 when device `device` can be used (the runtime answers and it exists),
 * else nonzero with the reason in why ("no CUDA device: cudaGetDeviceCount:
 * cudaErrorInsufficientDriver: ..."). Tests skip on nonzero. */
int cuda_backend_probe(int device, char *why, size_t whylen);

/* The last token sampled for slot (0 before any decode), or -1 for a slot
 * out of range. state is what eng_backend_cuda.create made. */
int cuda_backend_token(void *state, int slot);

/* The device buffers of the last decode step, for a test to copy back and
 * check against the cpu reference. Device pointers, valid until the next step
 * or destroy. */
typedef struct cuda_backend_view {
    int n_seq;                  /* sequences in the last decode step */
    int heads, topk;
    float scale;                /* softmax scale the attention used */
    cuda_kv_layout layout;
    cuda_attn_kind kind;
    const float *d_q;           /* (n_seq, heads, 576) */
    const int32_t *d_idx;       /* (n_seq, topk) global pool rows, -1 = none */
    const float *d_out;         /* (n_seq, heads, 512) attention output */
    const uint8_t *d_pool;      /* pool_rows * row_bytes */
    int64_t pool_rows;
    size_t row_bytes;
    /* tensor parallelism: at tp=1 tp = 1, rank 0, h0 = 0 and heads is all of
     * them; at tp=K the pointers above are rank `rank`'s (on `device`): its
     * heads [h0, h0 + heads) of q and out, its own pool copy */
    int tp, rank, device, h0;
    int vocab;
    const float *d_mean;        /* (n_seq, 512) mean over all heads (rank 0's device) */
    const float *d_logits;      /* (n_seq, vocab) (rank 0's device) */
    const float *d_sum;         /* tp > 1: (n_seq, 512) the all-reduced head sum; NULL at tp=1 */
} cuda_backend_view;

/* Rank 0's view (the only one at tp=1). */
void cuda_backend_view_get(void *state, cuda_backend_view *v);
/* Rank r's view; nonzero when r is not in [0, tp). */
int cuda_backend_view_rank(void *state, int r, cuda_backend_view *v);

#endif
