/* cuda_model.h (internal to engine/cuda/, shared with tests/cuda_engine): the
 * device parts of the cuda backend's decode step around the attention
 * kernels (cuda_attn.h). Same model as engine/cpu/cpu_model.h, same seeds:
 *
 *   embed    X (N, d_model) bf16     seeded embedding of each sequence's last
 *                                    token (cpu_embed's values, rounded to bf16)
 *   dense    Hd (N, d_ff) fp32 = X · W (d_model, d_ff) bf16: one cuBLAS GEMM
 *            (cublasGemmEx, bf16 in, fp32 accumulate and out); W is read once
 *            per step for the whole batch, so this is the law's a
 *   project  q (N, H, 576) fp32 and the new KV row of each sequence, written
 *            into its slot's rows of the pool (row (ctx-1) % capacity)
 *   top-k    idx (N, topk) GLOBAL pool rows (slot s owns rows
 *            [s*capacity, (s+1)*capacity)), cpu_topk_select's choice; -1 pads
 *   sample   mean over heads (N, 512), logits (N, vocab) = mean · Wv (fp32
 *            cublasSgemm), softmax and argmax per row (first maximum wins)
 *
 * Every function here enqueues work on `stream` and returns 0, a
 * cudaError_t, or CUDA_MODEL_BLAS + a cublasStatus_t (the two sets of codes
 * overlap: 1 is both cudaErrorInvalidValue and NOT_INITIALIZED), as a nonzero
 * int; cuda_model_errstr names either (what failed is also said in err when
 * err is not NULL); nothing synchronises except where stated.
 * Pointers named d_* are device pointers.
 */
#ifndef LOADLAW_CUDA_MODEL_H
#define LOADLAW_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The names the engine's trace and /metrics show for each timed phase: the
 * __global__ function (or library call) that does the phase's work. */
#define CUDA_K_FILL "kv_cache_fill_kernel"
#define CUDA_K_EMBED "embed_tokens_kernel"
#define CUDA_K_GEMM "cublasGemmEx_bf16_f32_dense"
#define CUDA_K_PROJECT "project_q_kv_kernel"
#define CUDA_K_TOPK "mla_topk_select_kernel"
#define CUDA_K_LOGITS "cublasSgemm_logits"
#define CUDA_K_SAMPLE "softmax_argmax_kernel"

/* One range of pool rows to fill with seeded values (cpu_kv_fill's): rows
 * row0 .. row0+n-1 of slot `slot`, each taken modulo capacity. */
typedef struct cuda_fill_item {
    int32_t slot;
    int32_t n;
    int64_t row0;
    uint64_t seed;
} cuda_fill_item;

/* Open cuBLAS (dlopen, once per process; $LOADLAW_CUBLAS_LIB overrides the
 * toolkit's libcublas.so.<major>, which must be of the same major version).
 * 0, or -1 with err saying what could not be loaded and how to point at it.
 * cuda_dense_init calls it. */
int cuda_cublas_load(char *err, size_t errlen);

/* The dense weights: W (d_model, d_ff) bf16 and Wv (512, vocab) fp32, made on
 * the device from the seed (cpu_dense_init's values; W rounded to bf16). */
typedef struct cuda_dense {
    int d_model, d_ff, vocab;
    int ld;         /* row stride of W and of Hd: d_ff, or for a shard (cuda_dense_init_cols)
                       cuda_dense_ld(ncols) */
    uint16_t *d_w;  /* (d_model, ld) bf16, columns d_ff..ld unused */
    float *d_wv;    /* (512, vocab) fp32 */
    void *cublas;   /* cublasHandle_t, bound to the stream */
} cuda_dense;

/* The row stride of a W shard and its Hd block of ncols columns: rounded up
 * to 8 (16-byte bf16 rows), which cuBLAS's tensor-core GEMM kernels want
 * (a shard is 3,583 columns at the defaults with tp=2). */
static inline int cuda_dense_ld(int ncols)
{
    return (ncols + 7) & ~7;
}

/* A failed cuBLAS call's return: CUDA_MODEL_BLAS + its cublasStatus_t. */
#define CUDA_MODEL_BLAS 100000
/* Whether a code says out of memory: cudaErrorMemoryAllocation (2) or
 * CUBLAS_STATUS_ALLOC_FAILED (3). */
static inline int cuda_model_is_oom(int code)
{
    return code == 2 || code == CUDA_MODEL_BLAS + 3;
}

/* A readable message for a code these functions return: a CUDA runtime
 * error ("cudaErrorNoDevice: no CUDA-capable device is detected") or
 * CUDA_MODEL_BLAS + a cuBLAS status ("CUBLAS_STATUS_EXECUTION_FAILED: ...");
 * per thread, valid until the next call. */
const char *cuda_model_errstr(int code);

/* Allocate and generate the weights, create the cuBLAS handle on `stream`;
 * synchronises `stream` (the weights' kernels ran). 0 or nonzero with err
 * set. Free with cuda_dense_free (safe when zeroed). */
int cuda_dense_init(cuda_dense *d, int d_model, int d_ff, int vocab, uint64_t seed, void *stream,
                    char *err, size_t errlen);
void cuda_dense_free(cuda_dense *d);

/* Fill n_items ranges of the pool (d_items on the device) with seeded rows in
 * `layout`; max_rows is the largest n of any item. */
int cuda_kv_fill(uint8_t *d_pool, cuda_kv_layout layout, int64_t capacity,
                 const cuda_fill_item *d_items, int n_items, int max_rows, void *stream);

/* X (n, d_model) bf16 from tokens (n) on the device. */
int cuda_embed(const cuda_dense *d, const int32_t *d_tokens, int n, uint64_t seed, uint16_t *d_x,
               void *stream);
/* Hd (n, d_ff) fp32 = X · W. CUDA_MODEL_BLAS + the cublasStatus_t on failure. */
int cuda_dense_forward(const cuda_dense *d, const uint16_t *d_x, int n, float *d_hd);
/* q (n, heads, 576) from Hd, and each sequence's new KV row (Hd[i][0:576])
 * stored at pool row slot*capacity + (ctx-1) % capacity (ctx < 1 taken as 1). */
int cuda_project(const cuda_dense *d, const float *d_hd, int n, int heads, const int32_t *d_slot,
                 const int64_t *d_ctx, uint8_t *d_pool, cuda_kv_layout layout, int64_t capacity,
                 float *d_q, void *stream);
/* idx (n, topk): for sequence i, cpu_topk_select(c, topk, key_i, .) with c =
 * min(max(ctx, min_ctx), capacity), as global rows; -1 after the selected
 * ones. key_i = d_key[i] (the request's, cuda_state.h), or with d_key NULL
 * ll_splitmix64(seed ^ slot). */
int cuda_topk(const int32_t *d_slot, const int64_t *d_ctx, const uint64_t *d_key, int n, int topk,
              int64_t min_ctx, int64_t capacity, uint64_t seed, int32_t *d_idx, void *stream);
/* mean (n, 512) over heads of attn_out (n, heads, 512), then logits (n, vocab). */
int cuda_logits(const cuda_dense *d, const float *d_attn_out, int n, int heads, float *d_mean,
                float *d_logits, void *stream);
/* tokens (n) = argmax of each logits row (the first maximum), prob (n) the
 * winner's softmax probability. */
int cuda_sample(const float *d_logits, int n, int vocab, int32_t *d_tokens, float *d_prob,
                void *stream);

/* ---- tensor parallelism (tp=K, cuda_tp.h) ----------------------------------
 * A rank's dense part: W's columns d_cols[0..ncols) (global indices of the
 * full (d_model, d_ff) W, device memory) as a (d_model, ncols) bf16 shard
 * with the same values as the full W's columns; Wv only when with_wv (rank 0
 * samples). d->d_ff is set to ncols, so cuda_dense_forward computes the
 * rank's (n, ncols) block of Hd. The cuBLAS handle is bound to `stream`,
 * created on the current device. Synchronises `stream` (the column list
 * must stay valid until the kernel ran). */
int cuda_dense_init_cols(cuda_dense *d, int d_model, int d_ff, int vocab, uint64_t seed,
                         const int32_t *d_cols, int ncols, int with_wv, void *stream, char *err,
                         size_t errlen);
/* q (n, hr, 576) of heads [h0, h0+hr) from a rank's Hd block (n, ld_hd),
 * colmap (d_ff, device) mapping global columns to the block's (NULL: the
 * block is all of Hd; cuda_project is this with h0 = 0), and each sequence's
 * new KV row (global columns 0..575) stored in this rank's pool, at row
 * slot*capacity + (ctx-1) % capacity. */
int cuda_project_shard(const float *d_hd, int ld_hd, int n, int h0, int hr, int d_ff,
                       const int32_t *d_colmap, const int32_t *d_slot, const int64_t *d_ctx,
                       uint8_t *d_pool, cuda_kv_layout layout, int64_t capacity, float *d_q,
                       void *stream);
/* sum (n, 512) = attn_out (n, heads, 512) summed over its heads in head
 * order from 0.0f: a rank's share, which the all-reduce completes. */
int cuda_head_sum(const float *d_attn_out, int n, int heads, float *d_sum, void *stream);
/* mean (n, 512) = sum * (1 / heads) (sum over all heads), then logits (n,
 * vocab) = mean . Wv like cuda_logits. */
int cuda_logits_sum(const cuda_dense *d, const float *d_sum, int n, int heads, float *d_mean,
                    float *d_logits, void *stream);

/* Testing aid (eng_config.fault_fail_step): launch a kernel the runtime
 * refuses; returns its error (cudaErrorInvalidConfiguration). */
int cuda_model_fault_launch(void *stream);

/* ---- host mirrors, for tests without a GPU ----------------------------------
 * The same __host__ __device__ code the kernels run per element, called on
 * the CPU: tests/cuda_engine/test_cuda_model_host checks it against the cpu
 * backend's (cpu_kv_fill, cpu_topk_select, cpu_embed) and the kernels' FP8
 * layout (cuda_kv_dequantize_fp8). */
/* Row `row` of a slot's seeded cache (kv_cache_fill_kernel's). */
void cuda_model_host_fill_row(uint64_t seed, int64_t row, cuda_kv_layout layout, uint8_t *dst);
/* A new KV row from 576 fp32 values (project_q_kv_kernel's store). */
void cuda_model_host_store_row(const float *vals, cuda_kv_layout layout, uint8_t *dst);
/* Entry j of mla_topk_select_kernel's output for one sequence. */
int32_t cuda_model_host_topk_entry(int32_t slot, int64_t ctx, int topk, int64_t min_ctx,
                                   int64_t capacity, uint64_t seed, int j);
/* X[.][j] of embed_tokens_kernel for a token (bf16 bits). */
uint16_t cuda_model_host_embed(int32_t token, uint64_t seed, int j);

#ifdef __cplusplus
}
#endif

#endif
