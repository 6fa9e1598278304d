/* cuda_tp_state.c: the cuda backend's state for tp=K > 1 (cuda_tp.h has the
 * design): one cuda_rank per rank, each on its device with its own stream,
 * events, cuBLAS handle, W shard, full copy of the latent KV pool and step
 * buffers; one NCCL communicator per rank (eng_comm_nccl_create:
 * ncclCommInitAll in this process, NCCL dlopen'ed). Every CUDA and NCCL
 * call is checked; a failure is a create() error naming the rank and its
 * device. tp=1 never comes here (cuda_state.c) and never loads NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cuda_state.h"

#define MB(x) ((double)(x) / 1048576.0)

/* Sizes of what one rank allocates (NCCL's own buffers come on top). */
typedef struct rank_sizes {
    size_t pool, weights, step, ws, cols, up, total;
} rank_sizes;

static void plan_rank(const cuda_state *st, const cuda_rank *rk, rank_sizes *z)
{
    const cuda_opts *o = &st->o;
    size_t M = (size_t)o->max_slots, Hr = (size_t)(rk->h1 - rk->h0), C = (size_t)cuda_dense_ld(rk->ncols);
    z->pool = (size_t)st->pool_rows * st->row_bytes;
    z->weights = (size_t)o->d_model * C * 2 + (rk->rank == 0 ? (size_t)CUDA_ATTN_DV * o->vocab * 4 : 0);
    z->step = M * o->d_model * 2 + M * C * 4 + M * Hr * CUDA_ATTN_DQK * 4 +
              M * Hr * CUDA_ATTN_DV * 4 + M * Hr * 4 + M * CUDA_ATTN_DV * 4 + M * o->topk * 4;
    if (rk->rank == 0)
        z->step += M * CUDA_ATTN_DV * 4 + M * o->vocab * 4 + M * 4 + M * 4;
    z->ws = cuda_attn_ws_bytes(o->kind, o->max_slots, (int)Hr, o->topk, rk->sm_count);
    z->cols = (size_t)rk->ncols * 4 + (size_t)o->d_ff * 4;
    z->up = st->up.bytes;
    z->total = z->pool + z->weights + z->step + z->ws + z->cols + z->up;
}

void cuda_tp_state_free(cuda_state *st)
{
    if (!st || (!st->rk && !st->comm))
        return;
    /* Errors are ignored: the backend is being torn down either way. The
     * streams drain before NCCL's communicators go; after a failed step a
     * rank's collective may wait for peers forever, so abort first (NCCL's
     * kernels then return) and drain after. */
    if (st->broken && st->comm)
        eng_comm_abort(st->comm);
    if (st->rk)
        for (int r = 0; r < st->o.tp; r++) {
            cuda_rank *rk = &st->rk[r];
            if (rk->stream && cudaSetDevice(rk->device) == cudaSuccess)
                (void)cudaStreamSynchronize(rk->stream);
        }
    eng_comm_destroy(st->comm);
    st->comm = NULL;
    if (st->rk) {
        for (int r = 0; r < st->o.tp; r++) {
            cuda_rank *rk = &st->rk[r];
            (void)cudaSetDevice(rk->device);
            cuda_dense_free(&rk->dense);
            cudaFree(rk->d_cols); cudaFree(rk->d_colmap); cudaFree(rk->d_pool);
            cudaFree(rk->d_x); cudaFree(rk->d_hd); cudaFree(rk->d_q); cudaFree(rk->d_out);
            cudaFree(rk->d_lse); cudaFree(rk->d_sum); cudaFree(rk->d_idx); cudaFree(rk->d_ws);
            cudaFree(rk->d_up); cudaFree(rk->d_mean); cudaFree(rk->d_logits);
            cudaFree(rk->d_prob); cudaFree(rk->d_tok_out);
            for (int i = 0; i < rk->n_ev; i++)
                cudaEventDestroy(rk->ev[i]);
            if (rk->stream)
                cudaStreamDestroy(rk->stream);
        }
        free(st->rk);
        st->rk = NULL;
    }
    (void)cudaGetLastError();
}

/* A failed CUDA call of rank rk at create. */
static int rank_fail(const cuda_rank *rk, cudaError_t e, const char *what, char *err, size_t errlen)
{
    ll_errf(err, errlen, "cuda backend: tp rank %d on device %d (%s): %s failed: %s", rk->rank,
            rk->device, rk->dev_name[0] ? rk->dev_name : "?", what, cuda_model_errstr(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;
}

#define RANK_ALLOC(ptr, bytes)                                                                 \
    do {                                                                                       \
        e = cudaMalloc((void **)&(ptr), (bytes) > 0 ? (bytes) : 16);                           \
        if (e != cudaSuccess) {                                                                \
            ll_errf(err, errlen, "cuda backend: tp rank %d on device %d (%s): cudaMalloc of "  \
                    "%.1f MiB (%s) failed: %s; the rank needs %.1f MiB (KV pool %.1f MiB, a "  \
                    "full copy on every rank = max_running %d x capacity %d x %zu B)",         \
                    rk->rank, rk->device, rk->dev_name, MB(bytes), #ptr, cuda_model_errstr(e), \
                    MB(z.total), MB(z.pool), o->max_slots, o->capacity, st->row_bytes);        \
            (void)cudaGetLastError();                                                          \
            return e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;                        \
        }                                                                                      \
    } while (0)

/* Stream, events, buffers and weights of one rank (its device current). */
static int make_rank(cuda_state *st, cuda_rank *rk, const int32_t *cols, const int32_t *colmap,
                     char *err, size_t errlen)
{
    const cuda_opts *o = &st->o;
    rank_sizes z;
    plan_rank(st, rk, &z);
    rk->ws_bytes = z.ws;
    cudaError_t e = cudaSetDevice(rk->device);
    if (e != cudaSuccess)
        return rank_fail(rk, e, "cudaSetDevice", err, errlen);
    e = cudaStreamCreateWithFlags(&rk->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return rank_fail(rk, e, "cudaStreamCreate", err, errlen);
    for (; rk->n_ev < CUDA_TP_RANK_PHASES + 1; rk->n_ev++) {
        e = cudaEventCreate(&rk->ev[rk->n_ev]);
        if (e != cudaSuccess)
            return rank_fail(rk, e, "cudaEventCreate", err, errlen);
    }
    size_t M = (size_t)o->max_slots, Hr = (size_t)(rk->h1 - rk->h0);
    RANK_ALLOC(rk->d_cols, (size_t)rk->ncols * 4);
    RANK_ALLOC(rk->d_colmap, (size_t)o->d_ff * 4);
    RANK_ALLOC(rk->d_pool, z.pool);
    RANK_ALLOC(rk->d_x, M * o->d_model * 2);
    RANK_ALLOC(rk->d_hd, M * (size_t)cuda_dense_ld(rk->ncols) * 4); /* rows of dense.ld */
    RANK_ALLOC(rk->d_q, M * Hr * CUDA_ATTN_DQK * 4);
    RANK_ALLOC(rk->d_out, M * Hr * CUDA_ATTN_DV * 4);
    RANK_ALLOC(rk->d_lse, M * Hr * 4);
    RANK_ALLOC(rk->d_sum, M * CUDA_ATTN_DV * 4);
    RANK_ALLOC(rk->d_idx, M * o->topk * 4);
    if (z.ws > 0)
        RANK_ALLOC(rk->d_ws, z.ws);
    RANK_ALLOC(rk->d_up, st->up.bytes);
    if (rk->rank == 0) {
        RANK_ALLOC(rk->d_mean, M * CUDA_ATTN_DV * 4);
        RANK_ALLOC(rk->d_logits, M * o->vocab * 4);
        RANK_ALLOC(rk->d_prob, M * 4);
        RANK_ALLOC(rk->d_tok_out, M * 4);
    }
    /* On the rank's own stream: it is cudaStreamNonBlocking, so a plain
     * cudaMemcpy (legacy stream; from pageable memory it may return before
     * the DMA lands) would not be ordered before the shard kernel below.
     * The stream is synchronised before cols/colmap are reused (and below). */
    e = cudaMemcpyAsync(rk->d_cols, cols, (size_t)rk->ncols * 4, cudaMemcpyHostToDevice,
                        rk->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(rk->d_colmap, colmap, (size_t)o->d_ff * 4, cudaMemcpyHostToDevice,
                            rk->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(rk->stream);
    if (e != cudaSuccess)
        return rank_fail(rk, e, "uploading the column map (cudaMemcpyAsync)", err, errlen);
    char why[400] = "";
    int rc = cuda_dense_init_cols(&rk->dense, o->d_model, o->d_ff, o->vocab, o->seed, rk->d_cols,
                                  rk->ncols, rk->rank == 0, rk->stream, why, sizeof why);
    if (rc != 0) {
        ll_errf(err, errlen, "cuda backend: tp rank %d on device %d (%s): %s", rk->rank, rk->device,
                rk->dev_name, why);
        (void)cudaGetLastError();
        return cuda_model_is_oom(rc) ? LL_ENOMEM : LL_EIO;
    }
    ll_info("cuda backend: tp rank %d/%d on device %d %s (%d SMs): heads %d..%d, W columns %d of "
            "%d (%.1f MiB bf16%s): %.1f MiB on the device (KV pool %.1f MiB, a full copy; step "
            "buffers %.1f MiB, attention scratch %.1f MiB) plus NCCL's buffers", rk->rank, o->tp,
            rk->device, rk->dev_name, rk->sm_count, rk->h0, rk->h1 - 1, rk->ncols, o->d_ff,
            MB((size_t)o->d_model * rk->ncols * 2), rk->rank == 0 ? ", and Wv: rank 0 samples" : "",
            MB(z.total), MB(z.pool), MB(z.step), MB(z.ws));
    return 0;
}

int cuda_tp_state_create(cuda_state *st, char *err, size_t errlen)
{
    cuda_opts *o = &st->o;
    const int K = o->tp;
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess) {
        ll_errf(err, errlen, "cuda backend: tp=%d: cudaGetDeviceCount failed: %s", K,
                cuda_model_errstr(e));
        (void)cudaGetLastError();
        return LL_EINVAL;
    }
    int devs[CUDA_TP_MAX];
    char why[512], dl[64];
    if (cuda_tp_devices(o->device, K, n_dev, cuda_tp_multi_rank_env(), devs, why, sizeof why) != 0) {
        ll_errf(err, errlen, "cuda backend: %s", why);
        return LL_EINVAL;
    }
    cuda_tp_devices_str(devs, K, dl, sizeof dl);
    st->row_bytes = cuda_kv_row_bytes(o->layout);
    st->pool_rows = (int64_t)o->max_slots * o->capacity;
    cuda_upload_plan(&st->up, o->max_slots);
    st->rk = calloc((size_t)K, sizeof *st->rk);
    int32_t *cols = malloc((size_t)o->d_ff * sizeof *cols);
    int32_t *colmap = malloc((size_t)o->d_ff * sizeof *colmap);
    int rc = 0;
    if (!st->rk || !cols || !colmap) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        rc = LL_ENOMEM;
        goto out;
    }
    /* the ranks' devices, shards and sizes; the memory of each device
     * checked against the sum of the ranks on it before anything is made */
    rank_sizes z[CUDA_TP_MAX];
    for (int r = 0; r < K; r++) {
        cuda_rank *rk = &st->rk[r];
        rk->rank = r;
        rk->device = devs[r];
        if (cuda_tp_shard(o->heads, o->d_ff, K, r, &rk->h0, &rk->h1, cols, &rk->ncols, NULL) != 0) {
            ll_errf(err, errlen, "cuda backend: tp=%d cannot shard heads=%d d_ff=%d", K, o->heads,
                    o->d_ff);
            rc = LL_EINVAL;
            goto out;
        }
        struct cudaDeviceProp prop;
        e = cudaGetDeviceProperties(&prop, rk->device);
        if (e != cudaSuccess) {
            rc = rank_fail(rk, e, "cudaGetDeviceProperties", err, errlen);
            goto out;
        }
        snprintf(rk->dev_name, sizeof rk->dev_name, "%s", prop.name);
        rk->sm_count = prop.multiProcessorCount;
        plan_rank(st, rk, &z[r]);
    }
    for (int r = 0; r < K; r++) {
        int d = devs[r];
        int first = 1;
        for (int q = 0; q < r; q++)
            first &= devs[q] != d;
        if (!first)
            continue;
        size_t need = 0;
        int on = 0;
        for (int q = r; q < K; q++)
            if (devs[q] == d) {
                need += z[q].total;
                on++;
            }
        size_t free_b = 0, total_b = 0;
        e = cudaSetDevice(d);
        if (e == cudaSuccess)
            e = cudaMemGetInfo(&free_b, &total_b);
        if (e != cudaSuccess) {
            rc = rank_fail(&st->rk[r], e, "cudaMemGetInfo", err, errlen);
            goto out;
        }
        if (need + cuda_mem_reserve(total_b) > free_b) {
            ll_errf(err, errlen,
                    "cuda backend: tp=%d on devices %s: device %d (%s) holds %d rank(s) (rank %d "
                    "first) that need %.1f MiB (+ %.0f MiB kept free for cuBLAS, NCCL and kernel "
                    "stacks) but has %.1f MiB free of %.1f MiB: per rank a full "
                    "KV pool %.1f MiB (max_running %d x capacity %d x %zu B per row, kv=%s), "
                    "its W shard %.1f MiB, step buffers %.1f MiB, attention scratch %.1f MiB; "
                    "lower max_running or capacity", K, dl, d, st->rk[r].dev_name, on, r,
                    MB(need), MB(cuda_mem_reserve(total_b)), MB(free_b), MB(total_b), MB(z[r].pool),
                    o->max_slots, o->capacity,
                    st->row_bytes, cuda_kv_layout_name(o->layout), MB(z[r].weights),
                    MB(z[r].step), MB(z[r].ws));
            rc = LL_ENOMEM;
            goto out;
        }
    }
    /* NCCL before the big allocations: a missing library or a refused
     * communicator (two ranks on one GPU before NCCL 2.30) fails fast */
    rc = eng_comm_nccl_create(K, devs, NULL, &st->comm, why, sizeof why);
    if (rc != 0) {
        ll_errf(err, errlen, "cuda backend: tp=%d on devices %s (rank r on the r-th): %s", K, dl,
                why);
        goto out;
    }
    for (int r = 0; r < K && rc == 0; r++) {
        cuda_rank *rk = &st->rk[r];
        int h0, h1, nc;
        if (cuda_tp_shard(o->heads, o->d_ff, K, r, &h0, &h1, cols, &nc, colmap) != 0) {
            rc = LL_EINVAL;
            ll_errf(err, errlen, "cuda backend: tp=%d cannot shard", K);
            break;
        }
        rc = make_rank(st, rk, cols, colmap, err, errlen);
    }
    if (rc != 0)
        goto out;
    /* host side, shared by the ranks: pinned (portable: every device's
     * stream copies from it) */
    size_t M = (size_t)o->max_slots;
    e = cudaSetDevice(devs[0]);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_up, st->up.bytes, cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_tok_out, M * sizeof(int32_t), cudaHostAllocPortable);
    if (e != cudaSuccess) {
        rc = rank_fail(&st->rk[0], e, "cudaHostAlloc (pinned step buffers)", err, errlen);
        goto out;
    }
    st->filled = calloc(M, 1);
    st->prefilled = calloc(M, sizeof(int64_t));
    st->token = calloc(M, sizeof(int32_t));
    if (!st->filled || !st->prefilled || !st->token) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        rc = LL_ENOMEM;
        goto out;
    }
    st->sm_count = st->rk[0].sm_count;
    snprintf(st->dev_name, sizeof st->dev_name, "%s", st->rk[0].dev_name);
    int n_names = 0;
    const char *const *names = cuda_attn_kernel_names(o->kind, &n_names);
    st->attn_name = n_names > 0 && names && names[0] ? names[0]
                    : o->kind == CUDA_ATTN_TILED ? "mla_decode_tiled_kernel"
                                                 : "mla_decode_naive_kernel";
    ll_info("cuda backend: tp=%d on devices %s over NCCL (%s), attn=%s kv=%s heads=%d (%d per "
            "rank) topk=%d dense %dx%d bf16, capacity=%d min_ctx=%d max_running=%d", K, dl,
            eng_comm_name(st->comm), o->kind == CUDA_ATTN_TILED ? "tiled" : "naive",
            cuda_kv_layout_name(o->layout), o->heads, o->heads / K, o->topk, o->d_model, o->d_ff,
            o->capacity, o->min_ctx, o->max_slots);
out:
    free(cols);
    free(colmap);
    return rc;
}
