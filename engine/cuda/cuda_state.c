/* cuda_state.c: the cuda backend's options, devices and memory (see
 * cuda_state.h and backend_cuda.c's header for the layout). K = tp ranks,
 * each a cuda_rank on its device (rank r on device `device` + r, cuda_tp.h)
 * with its own stream, events, cuBLAS handle, W (all of it at K = 1, else
 * its shard), full copy of the latent KV pool and step buffers; at K > 1
 * one NCCL communicator per rank (eng_comm_nccl_create: ncclCommInitAll in
 * this process, NCCL dlopen'ed). K = 1 never loads NCCL.
 *
 * Every size is known at create: nothing is allocated during a step. Every
 * CUDA and NCCL call is checked; a failure is a create() error naming the
 * device (and, at K > 1, the rank).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "common.h"
#include "cuda_state.h"

#define MB(x) ((double)(x) / 1048576.0)

/* ---- options ---------------------------------------------------------------- */

static int opts_from_config(const eng_config *cfg, cuda_state *st, char *err, size_t errlen)
{
    eng_model_opts *o = &st->o;
    int rc = eng_model_opts_from_config(cfg, "cuda", o, err, errlen);
    if (rc != 0)
        return rc;
    st->kind = o->tiled == 2 ? CUDA_ATTN_V2 : o->tiled ? CUDA_ATTN_TILED : CUDA_ATTN_NAIVE;
    /* the tiled kernel's testing faults, as the cpu backend's (ENG_ATTN_FAULT_*) */
    _Static_assert((int)CUDA_ATTN_FAULT_SKIP_LAST_TILE == (int)ENG_ATTN_FAULT_SKIP_LAST_TILE &&
                       (int)CUDA_ATTN_FAULT_SWAP_HEADS == (int)ENG_ATTN_FAULT_SWAP_HEADS,
                   "one numbering of the testing faults");
    st->fault = st->kind == CUDA_ATTN_TILED ? cfg->attn_fault : CUDA_ATTN_FAULT_NONE;
    const char *kv = cfg->kv ? cfg->kv : "bf16";
    if (strcmp(kv, "bf16") == 0)
        st->layout = CUDA_KV_BF16;
    else if (strcmp(kv, "fp8") == 0)
        st->layout = CUDA_KV_FP8_V32;
    else {
        ll_errf(err, errlen, "cuda backend: kv must be bf16 or fp8, got '%s'", kv);
        return LL_EINVAL;
    }
    if (o->tp > CUDA_TP_MAX) {
        ll_errf(err, errlen, "cuda backend: tp must be in [1, %d], got %d (each rank reports its "
                "phases of a step, and the engine takes %d)", CUDA_TP_MAX, o->tp, ENG_MAX_PHASES);
        return LL_EINVAL;
    }
    if (o->tp > 1 && (o->heads % o->tp != 0)) {
        ll_errf(err, errlen, "cuda backend: tp=%d must divide heads (%d): each rank owns heads/tp "
                "heads", o->tp, o->heads);
        return LL_EINVAL;
    }
    if (o->device < 0) {
        ll_errf(err, errlen, "cuda backend: device must be >= 0, got %d", o->device);
        return LL_EINVAL;
    }
    if (o->d_model < 1 || o->d_model > 65536 || o->d_ff < CUDA_ATTN_DQK || o->d_ff > 262144 ||
        o->vocab < 2 || o->vocab > 1 << 20) {
        ll_errf(err, errlen,
                "cuda backend: need 1 <= d_model <= 65536, %d <= d_ff <= 262144, 2 <= vocab <= "
                "1048576 (got %d, %d, %d)", CUDA_ATTN_DQK, o->d_model, o->d_ff, o->vocab);
        return LL_EINVAL;
    }
    /* global pool rows are int32 in the attention's indices; the launch
     * grids put sequences on gridDim.y */
    if ((int64_t)o->max_slots * o->capacity > INT32_MAX || o->max_slots > 65535) {
        ll_errf(err, errlen,
                "cuda backend: max_running x capacity must stay below 2^31 rows and max_running "
                "<= 65535 (got %d x %d)", o->max_slots, o->capacity);
        return LL_EINVAL;
    }
    return 0;
}

int cuda_backend_probe(int device, char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        ll_errf(why, whylen, "no usable CUDA device (cudaGetDeviceCount: %s)", cuda_model_errstr(e));
        return 1;
    }
    if (n == 0) {
        ll_errf(why, whylen, "no CUDA device (cudaGetDeviceCount found 0)");
        return 1;
    }
    if (device < 0 || device >= n) {
        ll_errf(why, whylen, "device=%d, but this machine has %d CUDA device%s (0..%d)", device, n,
                n == 1 ? "" : "s", n - 1);
        return 1;
    }
    return 0;
}

/* ---- sizes ---------------------------------------------------------------------- */

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* The offsets of the step upload for max_slots sequences. */
static void upload_plan(cuda_upload *u, int max_slots)
{
    size_t M = (size_t)max_slots;
    u->max_items = 3 * max_slots; /* history fills (prefill + decode slots) and prefills */
    u->off_slot = 0;
    u->off_tok = align16(M * sizeof(int32_t));
    u->off_ctx = u->off_tok + align16(M * sizeof(int32_t));
    u->off_key = u->off_ctx + align16(M * sizeof(int64_t));
    u->off_items = u->off_key + align16(M * sizeof(uint64_t));
    u->bytes = u->off_items + (size_t)u->max_items * sizeof(cuda_fill_item);
}

/* Device memory create leaves free beyond what it allocates: cuBLAS's
 * workspace, NCCL's buffers, and the local memory the driver reserves for
 * every resident thread at a kernel's first launch (kv_cache_fill_kernel's
 * ~1.2 KB frame: ~320 MB on an H200). max(512 MiB, 1/32 of the device). */
static size_t mem_reserve(size_t total_bytes)
{
    size_t r = total_bytes / 32;
    return r > ((size_t)512 << 20) ? r : (size_t)512 << 20;
}

/* Sizes of what one rank allocates (NCCL's own buffers come on top). */
typedef struct rank_sizes {
    size_t pool, weights, step, ws, cols, up, total;
} rank_sizes;

static void plan_rank(const cuda_state *st, const cuda_rank *rk, rank_sizes *z)
{
    const eng_model_opts *o = &st->o;
    size_t M = (size_t)o->max_slots, Hr = (size_t)(rk->h1 - rk->h0);
    size_t C = rk->whole ? (size_t)o->d_ff : (size_t)cuda_dense_ld(rk->ncols); /* Hd's row stride */
    z->pool = (size_t)st->pool_rows * st->row_bytes;
    z->weights = (size_t)o->d_model * C * 2 + (rk->rank == 0 ? (size_t)CUDA_ATTN_DV * o->vocab * 4 : 0);
    z->step = M * o->d_model * 2 + M * C * 4 + M * Hr * CUDA_ATTN_DQK * 4 +
              M * Hr * CUDA_ATTN_DV * 4 + M * Hr * 4 + M * o->topk * 4;
    if (o->tp > 1)
        z->step += M * CUDA_ATTN_DV * 4; /* the head sum */
    if (rk->rank == 0)
        z->step += M * CUDA_ATTN_DV * 4 + M * o->vocab * 4 + M * 4 + M * 4;
    /* split-k scratch: cuda_attn_ws_bytes gives the most any batch of
     * 1..max_slots needs (small batches split more) */
    z->ws = cuda_attn_ws_bytes(st->kind, o->max_slots, (int)Hr, o->topk, rk->sm_count);
    z->cols = rk->whole ? 0 : (size_t)rk->ncols * 4 + (size_t)o->d_ff * 4;
    z->up = st->up.bytes;
    z->total = z->pool + z->weights + z->step + z->ws + z->cols + z->up;
}

/* "device 0 (NVIDIA H200)" at K = 1, "tp rank 1 on device 1 (...)" else. */
static const char *rank_who(const cuda_state *st, const cuda_rank *rk, char *buf, size_t len)
{
    const char *name = rk->dev_name[0] ? rk->dev_name : "?";
    if (st->o.tp > 1)
        snprintf(buf, len, "tp rank %d on device %d (%s)", rk->rank, rk->device, name);
    else
        snprintf(buf, len, "device %d (%s)", rk->device, name);
    return buf;
}

/* ---- destroy --------------------------------------------------------------------- */

void cuda_state_destroy(cuda_state *st)
{
    if (!st)
        return;
    /* Errors are ignored: after a failed kernel every call fails, and the
     * backend is being torn down either way. The streams drain before
     * NCCL's communicators go; after a failed step a rank's collective may
     * wait for peers forever, so abort first (NCCL's kernels then return)
     * and drain after. */
    if (st->broken && st->comm)
        eng_comm_abort(st->comm);
    if (st->rk)
        for (int r = 0; r < st->o.tp; r++) {
            cuda_rank *rk = &st->rk[r];
            if (rk->stream && cudaSetDevice(rk->device) == cudaSuccess)
                (void)cudaStreamSynchronize(rk->stream);
        }
    eng_comm_destroy(st->comm);
    if (st->rk)
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
    cudaFreeHost(st->h_up);
    cudaFreeHost(st->h_tok_out);
    cudaFreeHost(st->h_logits);
    cudaFreeHost(st->h_prob);
    (void)cudaGetLastError();
    free(st->rk);
    free(st->filled);
    free(st->prefilled);
    free(st->token);
    free(st->key);
    free(st);
}

/* ---- create ---------------------------------------------------------------------- */

/* A failed CUDA call of rank rk at create. */
static int rank_fail(const cuda_state *st, const cuda_rank *rk, cudaError_t e, const char *what,
                     char *err, size_t errlen)
{
    char who[320];
    ll_errf(err, errlen, "cuda backend: %s: %s failed: %s", rank_who(st, rk, who, sizeof who), what,
            cuda_model_errstr(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;
}

#define RANK_ALLOC(ptr, bytes)                                                                 \
    do {                                                                                       \
        e = cudaMalloc((void **)&(ptr), (bytes) > 0 ? (bytes) : 16);                           \
        if (e != cudaSuccess) {                                                                \
            ll_errf(err, errlen, "cuda backend: %s: cudaMalloc of %.1f MiB (%s) failed: %s; "  \
                    "it needs %.1f MiB (KV pool %.1f MiB%s = max_running %d x capacity %d x "  \
                    "%zu B)", who, MB(bytes), #ptr, cuda_model_errstr(e), MB(z.total),         \
                    MB(z.pool), o->tp > 1 ? ", a full copy on every rank" : "", o->max_slots,  \
                    o->capacity, st->row_bytes);                                               \
            (void)cudaGetLastError();                                                          \
            return e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;                        \
        }                                                                                      \
    } while (0)

/* Stream, events, buffers and weights of one rank (its device current);
 * cols/colmap: its shard's columns (unused when it holds all of W). */
static int make_rank(cuda_state *st, cuda_rank *rk, const int32_t *cols, const int32_t *colmap,
                     char *err, size_t errlen)
{
    const eng_model_opts *o = &st->o;
    char who[320];
    rank_who(st, rk, who, sizeof who);
    rank_sizes z;
    plan_rank(st, rk, &z);
    rk->ws_bytes = z.ws;
    cudaError_t e = cudaSetDevice(rk->device);
    if (e != cudaSuccess)
        return rank_fail(st, rk, e, "cudaSetDevice", err, errlen);
    e = cudaStreamCreateWithFlags(&rk->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return rank_fail(st, rk, e, "cudaStreamCreate", err, errlen);
    for (; rk->n_ev < CUDA_TP_RANK_PHASES + 1; rk->n_ev++) {
        e = cudaEventCreate(&rk->ev[rk->n_ev]);
        if (e != cudaSuccess)
            return rank_fail(st, rk, e, "cudaEventCreate", err, errlen);
    }
    size_t M = (size_t)o->max_slots, Hr = (size_t)(rk->h1 - rk->h0);
    size_t ld = rk->whole ? (size_t)o->d_ff : (size_t)cuda_dense_ld(rk->ncols); /* dense.ld */
    RANK_ALLOC(rk->d_pool, z.pool);
    RANK_ALLOC(rk->d_x, M * o->d_model * 2);
    RANK_ALLOC(rk->d_hd, M * ld * 4);
    RANK_ALLOC(rk->d_q, M * Hr * CUDA_ATTN_DQK * 4);
    RANK_ALLOC(rk->d_out, M * Hr * CUDA_ATTN_DV * 4);
    RANK_ALLOC(rk->d_lse, M * Hr * 4);
    if (o->tp > 1)
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
    char why[400] = "";
    int rc;
    if (rk->whole) {
        rc = cuda_dense_init(&rk->dense, o->d_model, o->d_ff, o->vocab, o->seed, rk->stream, why,
                             sizeof why);
    } else {
        RANK_ALLOC(rk->d_cols, (size_t)rk->ncols * 4);
        RANK_ALLOC(rk->d_colmap, (size_t)o->d_ff * 4);
        /* On the rank's own stream: it is cudaStreamNonBlocking, so a plain
         * cudaMemcpy (legacy stream; from pageable memory it may return
         * before the DMA lands) would not be ordered before the shard
         * kernel. The stream is synchronised before cols/colmap are reused. */
        e = cudaMemcpyAsync(rk->d_cols, cols, (size_t)rk->ncols * 4, cudaMemcpyHostToDevice,
                            rk->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(rk->d_colmap, colmap, (size_t)o->d_ff * 4, cudaMemcpyHostToDevice,
                                rk->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(rk->stream);
        if (e != cudaSuccess)
            return rank_fail(st, rk, e, "uploading the column map (cudaMemcpyAsync)", err, errlen);
        rc = cuda_dense_init_cols(&rk->dense, o->d_model, o->d_ff, o->vocab, o->seed, rk->d_cols,
                                  rk->ncols, rk->rank == 0, rk->stream, why, sizeof why);
    }
    if (rc != 0) {
        ll_errf(err, errlen, "cuda backend: %s: %s", who, why);
        (void)cudaGetLastError();
        return cuda_model_is_oom(rc) ? LL_ENOMEM : LL_EIO;
    }
    ll_info("cuda backend: rank %d/%d on device %d %s (%d SMs): heads %d..%d, W columns %d of %d "
            "(%.1f MiB bf16%s): %.1f MiB on the device (KV pool %.1f MiB%s; step buffers %.1f MiB, "
            "attention scratch %.1f MiB)%s", rk->rank, o->tp, rk->device, rk->dev_name, rk->sm_count,
            rk->h0, rk->h1 - 1, rk->ncols, o->d_ff, MB((size_t)o->d_model * rk->ncols * 2),
            rk->rank == 0 ? ", and Wv: rank 0 samples" : "", MB(z.total), MB(z.pool),
            o->tp > 1 ? ", a full copy" : "", MB(z.step), MB(z.ws), o->tp > 1 ? " plus NCCL's buffers" : "");
    return 0;
}

/* Each device's memory against the sum of the ranks placed on it, before
 * anything is allocated. */
static int check_memory(cuda_state *st, const int *devs, const rank_sizes *z, const char *dl,
                        char *err, size_t errlen)
{
    const eng_model_opts *o = &st->o;
    const int K = o->tp;
    for (int r = 0; r < K; r++) {
        int d = devs[r], first = 1, on = 0;
        for (int q = 0; q < r; q++)
            first &= devs[q] != d;
        if (!first)
            continue;
        size_t need = 0, free_b = 0, total_b = 0;
        for (int q = r; q < K; q++)
            if (devs[q] == d) {
                need += z[q].total;
                on++;
            }
        cudaError_t e = cudaSetDevice(d);
        if (e == cudaSuccess)
            e = cudaMemGetInfo(&free_b, &total_b);
        if (e != cudaSuccess)
            return rank_fail(st, &st->rk[r], e, "cudaMemGetInfo", err, errlen);
        if (need + mem_reserve(total_b) <= free_b)
            continue;
        char who[512];
        if (K > 1)
            snprintf(who, sizeof who, "tp=%d on devices %s: device %d (%s) holds %d rank(s) (rank "
                     "%d first) that", K, dl, d, st->rk[r].dev_name, on, r);
        else
            snprintf(who, sizeof who, "device %d (%s)", d, st->rk[r].dev_name);
        ll_errf(err, errlen,
                "cuda backend: %s needs %.1f MiB of device memory (+ %.0f MiB kept free for "
                "cuBLAS, NCCL and kernel stacks) but has %.1f MiB free of %.1f MiB: %sKV pool "
                "%.1f MiB (max_running %d x capacity %d x %zu B per row, kv=%s), %s %.1f MiB, "
                "step buffers %.1f MiB, attention scratch %.1f MiB; lower max_running or capacity",
                who, MB(need), MB(mem_reserve(total_b)), MB(free_b), MB(total_b),
                K > 1 ? "per rank a full " : "", MB(z[r].pool), o->max_slots, o->capacity,
                st->row_bytes, cuda_kv_layout_name(st->layout),
                K > 1 ? "its W shard" : "dense weights", MB(z[r].weights), MB(z[r].step), MB(z[r].ws));
        return LL_ENOMEM;
    }
    return 0;
}

/* Rank r's heads and columns (all of them at K = 1); 0 or LL_EINVAL. */
static int rank_shard(cuda_state *st, cuda_rank *rk, int32_t *cols, int32_t *colmap, char *err,
                      size_t errlen)
{
    const eng_model_opts *o = &st->o;
    rk->whole = o->tp == 1;
    if (rk->whole) {
        rk->h0 = 0;
        rk->h1 = o->heads;
        rk->ncols = o->d_ff;
        return 0;
    }
    if (cuda_tp_shard(o->heads, o->d_ff, o->tp, rk->rank, &rk->h0, &rk->h1, cols, &rk->ncols,
                      colmap) != 0) {
        ll_errf(err, errlen, "cuda backend: tp=%d cannot shard heads=%d d_ff=%d", o->tp, o->heads,
                o->d_ff);
        return LL_EINVAL;
    }
    return 0;
}

/* The K devices the ranks run on (rank r on devs[r]) and their list as text
 * for messages (dl); 0 or LL_EINVAL. */
static int pick_devices(const eng_model_opts *o, int *devs, char *dl, size_t dllen, char *err,
                        size_t errlen)
{
    const int K = o->tp;
    int n_dev = 0;
    char why[512];
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess) {
        ll_errf(err, errlen, "cuda backend: tp=%d: cudaGetDeviceCount failed: %s", K,
                cuda_model_errstr(e));
        (void)cudaGetLastError();
        return LL_EINVAL;
    }
    if (cuda_tp_devices(o->device, K, n_dev, cuda_tp_multi_rank_env(), devs, why, sizeof why) != 0) {
        ll_errf(err, errlen, "cuda backend: %s", why);
        return LL_EINVAL;
    }
    cuda_tp_devices_str(devs, K, dl, dllen);
    return 0;
}

/* Each rank's device, shard and device properties, and its memory plan in
 * z[r]; nothing is allocated on a device yet. cols is scratch of d_ff. */
static int describe_ranks(cuda_state *st, const int *devs, int32_t *cols, rank_sizes *z, char *err,
                          size_t errlen)
{
    for (int r = 0; r < st->o.tp; r++) {
        cuda_rank *rk = &st->rk[r];
        rk->rank = r;
        rk->device = devs[r];
        int rc = rank_shard(st, rk, cols, NULL, err, errlen);
        if (rc != 0)
            return rc;
        struct cudaDeviceProp prop;
        cudaError_t e = cudaGetDeviceProperties(&prop, rk->device);
        if (e != cudaSuccess)
            return rank_fail(st, rk, e, "cudaGetDeviceProperties", err, errlen);
        snprintf(rk->dev_name, sizeof rk->dev_name, "%s", prop.name);
        rk->sm_count = prop.multiProcessorCount;
        plan_rank(st, rk, &z[r]);
    }
    return 0;
}

/* The NCCL communicator over the K > 1 ranks. It comes before the big
 * allocations: a missing library or a refused communicator (two ranks on
 * one GPU before NCCL 2.30) fails fast. */
static int open_comm(cuda_state *st, const int *devs, const char *dl, char *err, size_t errlen)
{
    const int K = st->o.tp;
    char why[512];
    int rc = eng_comm_nccl_create(K, devs, NULL, &st->comm, why, sizeof why);
    if (rc != 0)
        ll_errf(err, errlen, "cuda backend: tp=%d on devices %s (rank r on the r-th): %s", K, dl,
                why);
    return rc;
}

/* The host side, shared by the ranks: pinned (portable: every device's
 * stream copies from it). */
static int alloc_host(cuda_state *st, int dev0, char *err, size_t errlen)
{
    size_t M = (size_t)st->o.max_slots;
    cudaError_t e = cudaSetDevice(dev0);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_up, st->up.bytes, cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_tok_out, M * sizeof(int32_t), cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_logits, M * (size_t)st->o.vocab * sizeof(float), cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&st->h_prob, M * sizeof(float), cudaHostAllocPortable);
    if (e != cudaSuccess)
        return rank_fail(st, &st->rk[0], e, "cudaHostAlloc (pinned step buffers)", err, errlen);
    return 0;
}

static void log_ranks(const cuda_state *st, const char *dl)
{
    const eng_model_opts *o = &st->o;
    const int K = o->tp;
    ll_info("cuda backend: tp=%d on device%s %s%s%s, attn=%s kv=%s heads=%d (%d per rank) topk=%d "
            "dense %dx%d bf16, capacity=%d min_ctx=%d max_running=%d", K, K > 1 ? "s" : "", dl,
            K > 1 ? " over NCCL " : "", K > 1 ? eng_comm_name(st->comm) : "",
            st->kind == CUDA_ATTN_V2 ? "v2" : st->kind == CUDA_ATTN_TILED ? "tiled" : "naive",
            cuda_kv_layout_name(st->layout),
            o->heads, o->heads / K, o->topk, o->d_model, o->d_ff, o->capacity, o->min_ctx,
            o->max_slots);
}

/* The ranks' devices, shards and memory (each device's checked first), the
 * NCCL communicators (K > 1), every rank's buffers and weights, then the
 * host side. */
static int make_ranks(cuda_state *st, char *err, size_t errlen)
{
    eng_model_opts *o = &st->o;
    const int K = o->tp;
    int devs[CUDA_TP_MAX];
    char dl[64];
    int rc = pick_devices(o, devs, dl, sizeof dl, err, errlen);
    if (rc != 0)
        return rc;
    st->row_bytes = cuda_kv_row_bytes(st->layout);
    st->pool_rows = (int64_t)o->max_slots * o->capacity;
    upload_plan(&st->up, o->max_slots);
    st->rk = calloc((size_t)K, sizeof *st->rk);
    int32_t *cols = malloc((size_t)o->d_ff * sizeof *cols);
    int32_t *colmap = malloc((size_t)o->d_ff * sizeof *colmap);
    if (!st->rk || !cols || !colmap) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        rc = LL_ENOMEM;
        goto out;
    }
    rank_sizes z[CUDA_TP_MAX];
    rc = describe_ranks(st, devs, cols, z, err, errlen);
    if (rc == 0)
        rc = check_memory(st, devs, z, dl, err, errlen);
    if (rc == 0 && K > 1)
        rc = open_comm(st, devs, dl, err, errlen);
    for (int r = 0; r < K && rc == 0; r++) {
        rc = rank_shard(st, &st->rk[r], cols, colmap, err, errlen);
        if (rc == 0)
            rc = make_rank(st, &st->rk[r], cols, colmap, err, errlen);
    }
    if (rc == 0)
        rc = alloc_host(st, devs[0], err, errlen);
    if (rc == 0)
        log_ranks(st, dl);
    if (rc == 0 && st->fault != CUDA_ATTN_FAULT_NONE)
        ll_warn("cuda backend: attn_fault=%s: the tiled kernel is wrong on purpose (testing)",
                st->fault == CUDA_ATTN_FAULT_SKIP_LAST_TILE ? "skip_last_tile" : "swap_heads");
out:
    free(cols);
    free(colmap);
    return rc;
}

int cuda_state_create(const eng_config *cfg, cuda_state **out, char *err, size_t errlen)
{
    *out = NULL;
    cuda_state *st = calloc(1, sizeof *st);
    if (!st) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        return LL_ENOMEM;
    }
    int rc = opts_from_config(cfg, st, err, errlen);
    if (rc != 0)
        goto fail;
    char why[400];
    if (cuda_backend_probe(st->o.device, why, sizeof why) != 0) {
        ll_errf(err, errlen, "cuda backend: %s", why);
        rc = LL_EINVAL;
        goto fail;
    }
    rc = make_ranks(st, err, errlen);
    if (rc != 0)
        goto fail;
    size_t M = (size_t)st->o.max_slots;
    st->filled = calloc(M, 1);
    st->prefilled = calloc(M, sizeof(int64_t));
    st->token = calloc(M, sizeof(int32_t));
    st->key = calloc(M, sizeof(uint64_t));
    if (!st->filled || !st->prefilled || !st->token || !st->key) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        rc = LL_ENOMEM;
        goto fail;
    }
    for (int s = 0; s < st->o.max_slots; s++)
        st->key[s] = cuda_slot_key(st->o.seed, s);
    int n_names = 0;
    const char *const *names = cuda_attn_kernel_names(st->kind, &n_names);
    st->attn_name = n_names > 0 && names && names[0] ? names[0]
                    : st->kind == CUDA_ATTN_TILED ? "mla_decode_tiled_kernel"
                                                  : "mla_decode_naive_kernel";
    *out = st;
    return 0;
fail:
    cuda_state_destroy(st);
    return rc;
}
