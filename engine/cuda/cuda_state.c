/* cuda_state.c: the cuda backend's options, device and memory (see
 * cuda_state.h and backend_cuda.c's header for the layout). Every size is
 * known at create: nothing is allocated during a step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "common.h"
#include "cuda_state.h"

/* ---- options ---------------------------------------------------------------- */

static int opts_from_config(const eng_config *cfg, cuda_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->heads = cfg->heads > 0 ? cfg->heads : 64;
    o->topk = cfg->topk > 0 ? cfg->topk : 2048;
    o->device = cfg->device;
    const char *attn = cfg->attn ? cfg->attn : "tiled";
    if (strcmp(attn, "tiled") == 0)
        o->kind = CUDA_ATTN_TILED;
    else if (strcmp(attn, "naive") == 0)
        o->kind = CUDA_ATTN_NAIVE;
    else {
        ll_errf(err, errlen, "cuda backend: attn must be naive or tiled, got '%s'", attn);
        return LL_EINVAL;
    }
    const char *kv = cfg->kv ? cfg->kv : "bf16";
    if (strcmp(kv, "bf16") == 0)
        o->layout = CUDA_KV_BF16;
    else if (strcmp(kv, "fp8") == 0)
        o->layout = CUDA_KV_FP8_V32;
    else {
        ll_errf(err, errlen, "cuda backend: kv must be bf16 or fp8, got '%s'", kv);
        return LL_EINVAL;
    }
    o->d_model = cfg->d_model;
    o->d_ff = cfg->d_ff;
    o->vocab = cfg->vocab;
    o->capacity = cfg->capacity_tok;
    o->min_ctx = cfg->min_ctx_tok < 0 ? o->topk : cfg->min_ctx_tok;
    o->max_slots = cfg->max_running > 0 ? cfg->max_running : 256;
    o->seed = cfg->seed;
    o->fault_step = cfg->fault_fail_step;
    /* tp=K (cuda_tp.h, cuda_tp_state.c): K ranks over NCCL; tp=1 is the
     * one-device path below and never touches NCCL */
    o->tp = cfg->tp > 0 ? cfg->tp : 1;
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
    if (o->heads > 1024 || o->topk > 1 << 20) {
        ll_errf(err, errlen, "cuda backend: heads <= 1024 and topk <= 1048576 (got %d, %d)",
                o->heads, o->topk);
        return LL_EINVAL;
    }
    if (o->d_model < 1 || o->d_model > 65536 || o->d_ff < CUDA_ATTN_DQK || o->d_ff > 262144 ||
        o->vocab < 2 || o->vocab > 1 << 20) {
        ll_errf(err, errlen,
                "cuda backend: need 1 <= d_model <= 65536, %d <= d_ff <= 262144, 2 <= vocab <= "
                "1048576 (got %d, %d, %d)", CUDA_ATTN_DQK, o->d_model, o->d_ff, o->vocab);
        return LL_EINVAL;
    }
    if (o->capacity < 1 || o->capacity > 1 << 24) {
        ll_errf(err, errlen, "cuda backend: capacity must be in [1, 16777216] rows, got %d",
                o->capacity);
        return LL_EINVAL;
    }
    if (cfg->min_ctx_tok < -1 || cfg->min_ctx_tok > 1 << 24) {
        ll_errf(err, errlen, "cuda backend: min_ctx must be -1 (= topk) or in [0, 16777216], got %d",
                cfg->min_ctx_tok);
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

/* ---- create / destroy ---------------------------------------------------------- */

void cuda_state_destroy(cuda_state *st)
{
    if (!st)
        return;
    cuda_tp_state_free(st);
    /* Errors are ignored here: after a failed kernel every call fails, and
     * the process is tearing the backend down either way. */
    (void)cudaSetDevice(st->o.device);
    if (st->stream)
        (void)cudaStreamSynchronize(st->stream);
    cuda_dense_free(&st->dense);
    cudaFree(st->d_pool);
    cudaFree(st->d_x); cudaFree(st->d_hd); cudaFree(st->d_q); cudaFree(st->d_out);
    cudaFree(st->d_lse); cudaFree(st->d_mean); cudaFree(st->d_logits); cudaFree(st->d_prob);
    cudaFree(st->d_idx); cudaFree(st->d_tok_out); cudaFree(st->d_ws); cudaFree(st->d_up);
    cudaFreeHost(st->h_up);
    cudaFreeHost(st->h_tok_out);
    for (int i = 0; i < st->n_ev; i++)
        cudaEventDestroy(st->ev[i]);
    if (st->stream)
        cudaStreamDestroy(st->stream);
    (void)cudaGetLastError();
    free(st->filled);
    free(st->prefilled);
    free(st->token);
    free(st);
}

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

void cuda_upload_plan(cuda_upload *u, int max_slots)
{
    size_t M = (size_t)max_slots;
    u->max_items = 3 * max_slots; /* history fills (prefill + decode slots) and prefills */
    u->off_slot = 0;
    u->off_tok = align16(M * sizeof(int32_t));
    u->off_ctx = u->off_tok + align16(M * sizeof(int32_t));
    u->off_items = u->off_ctx + align16(M * sizeof(int64_t));
    u->bytes = u->off_items + (size_t)u->max_items * sizeof(cuda_fill_item);
}

/* Sizes of everything create allocates, for the memory check and message. */
typedef struct cuda_sizes {
    size_t pool, weights, step, ws, total;
} cuda_sizes;

size_t cuda_mem_reserve(size_t total_bytes)
{
    size_t r = total_bytes / 32;
    return r > ((size_t)512 << 20) ? r : (size_t)512 << 20;
}

static void plan_memory(cuda_state *st, cuda_sizes *z)
{
    const cuda_opts *o = &st->o;
    size_t M = (size_t)o->max_slots, H = (size_t)o->heads;
    st->row_bytes = cuda_kv_row_bytes(o->layout);
    st->pool_rows = (int64_t)o->max_slots * o->capacity;
    z->pool = (size_t)st->pool_rows * st->row_bytes;
    z->weights = (size_t)o->d_model * o->d_ff * 2 + (size_t)CUDA_ATTN_DV * o->vocab * 4;
    z->step = M * o->d_model * 2 + M * o->d_ff * 4 + M * H * CUDA_ATTN_DQK * 4 +
              M * H * CUDA_ATTN_DV * 4 + M * H * 4 + M * CUDA_ATTN_DV * 4 + M * o->vocab * 4 +
              M * 4 + M * o->topk * 4 + M * 4;
    /* split-k scratch: cuda_attn_ws_bytes gives the most any batch of
     * 1..max_slots needs (small batches split more) */
    z->ws = cuda_attn_ws_bytes(o->kind, o->max_slots, o->heads, o->topk, st->sm_count);
    st->ws_bytes = z->ws;
    cuda_upload_plan(&st->up, o->max_slots);
    const cuda_upload *u = &st->up;
    z->total = z->pool + z->weights + z->step + z->ws + u->bytes;
}

#define MB(x) ((double)(x) / 1048576.0)

static int create_fail(cuda_state *st, cudaError_t e, const char *what, char *err, size_t errlen)
{
    ll_errf(err, errlen, "cuda backend: %s on device %d (%s) failed: %s", what, st->o.device,
            st->dev_name[0] ? st->dev_name : "?", cuda_model_errstr(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;
}

#define ALLOC(ptr, bytes)                                                                      \
    do {                                                                                       \
        e = cudaMalloc((void **)&(ptr), (bytes) > 0 ? (bytes) : 16);                           \
        if (e != cudaSuccess) {                                                                \
            ll_errf(err, errlen, "cuda backend: cudaMalloc of %.1f MiB (%s) failed: %s; the "  \
                    "backend needs %.1f MiB in all (KV pool %.1f MiB = max_running %d x "      \
                    "capacity %d x %zu B)", MB(bytes), #ptr, cuda_model_errstr(e),             \
                    MB(z.total), MB(z.pool), st->o.max_slots, st->o.capacity, st->row_bytes);  \
            (void)cudaGetLastError();                                                          \
            rc = e == cudaErrorMemoryAllocation ? LL_ENOMEM : LL_EIO;                         \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

int cuda_state_create(const eng_config *cfg, cuda_state **out, char *err, size_t errlen)
{
    *out = NULL;
    cuda_state *st = calloc(1, sizeof *st);
    if (!st) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        return LL_ENOMEM;
    }
    cuda_sizes z = {0};
    cudaError_t e;
    int rc = opts_from_config(cfg, &st->o, err, errlen);
    if (rc != 0)
        goto fail;
    char why[400];
    if (cuda_backend_probe(st->o.device, why, sizeof why) != 0) {
        ll_errf(err, errlen, "cuda backend: %s", why);
        rc = LL_EINVAL;
        goto fail;
    }
    if (st->o.tp > 1) {
        rc = cuda_tp_state_create(st, err, errlen);
        if (rc != 0)
            goto fail;
        *out = st;
        return 0;
    }
    e = cudaSetDevice(st->o.device);
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "cudaSetDevice", err, errlen);
        goto fail;
    }
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, st->o.device);
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "cudaGetDeviceProperties", err, errlen);
        goto fail;
    }
    snprintf(st->dev_name, sizeof st->dev_name, "%s", prop.name);
    st->sm_count = prop.multiProcessorCount;
    plan_memory(st, &z);
    size_t free_b = 0, total_b = 0;
    e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "cudaMemGetInfo", err, errlen);
        goto fail;
    }
    if (z.total + cuda_mem_reserve(total_b) > free_b) {
        ll_errf(err, errlen,
                "cuda backend: needs %.1f MiB of device memory (+ %.0f MiB kept free for cuBLAS, NCCL "
                "and kernel stacks) but device %d (%s) has %.1f MiB free "
                "of %.1f MiB: KV pool %.1f MiB (max_running %d x capacity %d x %zu B per row, "
                "kv=%s), dense weights %.1f MiB, step buffers %.1f MiB, attention scratch %.1f MiB; "
                "lower max_running or capacity", MB(z.total), MB(cuda_mem_reserve(total_b)), st->o.device,
                st->dev_name, MB(free_b), MB(total_b), MB(z.pool), st->o.max_slots, st->o.capacity,
                st->row_bytes, cuda_kv_layout_name(st->o.layout), MB(z.weights), MB(z.step), MB(z.ws));
        rc = LL_ENOMEM;
        goto fail;
    }
    e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "cudaStreamCreate", err, errlen);
        goto fail;
    }
    for (; st->n_ev < CUDA_MAX_PHASES + 1; st->n_ev++) {
        e = cudaEventCreate(&st->ev[st->n_ev]);
        if (e != cudaSuccess) {
            rc = create_fail(st, e, "cudaEventCreate", err, errlen);
            goto fail;
        }
    }
    size_t M = (size_t)st->o.max_slots, H = (size_t)st->o.heads;
    ALLOC(st->d_pool, z.pool);
    st->pool_bytes = z.pool;
    ALLOC(st->d_x, M * st->o.d_model * 2);
    ALLOC(st->d_hd, M * st->o.d_ff * 4);
    ALLOC(st->d_q, M * H * CUDA_ATTN_DQK * 4);
    ALLOC(st->d_out, M * H * CUDA_ATTN_DV * 4);
    ALLOC(st->d_lse, M * H * 4);
    ALLOC(st->d_mean, M * CUDA_ATTN_DV * 4);
    ALLOC(st->d_logits, M * st->o.vocab * 4);
    ALLOC(st->d_prob, M * 4);
    ALLOC(st->d_idx, M * st->o.topk * 4);
    ALLOC(st->d_tok_out, M * 4);
    if (z.ws > 0)
        ALLOC(st->d_ws, z.ws);
    ALLOC(st->d_up, st->up.bytes);
    e = cudaMallocHost((void **)&st->h_up, st->up.bytes);
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&st->h_tok_out, M * sizeof(int32_t));
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "cudaMallocHost (pinned step buffers)", err, errlen);
        goto fail;
    }
    rc = cuda_dense_init(&st->dense, st->o.d_model, st->o.d_ff, st->o.vocab, st->o.seed, st->stream,
                         err, errlen);
    if (rc != 0) {
        rc = cuda_model_is_oom(rc) ? LL_ENOMEM : LL_EIO;
        goto fail;
    }
    /* the weights' kernels ran: their errors show here, not in step 1 */
    e = cudaStreamSynchronize(st->stream);
    if (e != cudaSuccess) {
        rc = create_fail(st, e, "generating the dense weights", err, errlen);
        goto fail;
    }
    st->filled = calloc(M, 1);
    st->prefilled = calloc(M, sizeof(int64_t));
    st->token = calloc(M, sizeof(int32_t));
    if (!st->filled || !st->prefilled || !st->token) {
        ll_errf(err, errlen, "cuda backend: out of memory");
        rc = LL_ENOMEM;
        goto fail;
    }
    int n_names = 0;
    const char *const *names = cuda_attn_kernel_names(st->o.kind, &n_names);
    st->attn_name = n_names > 0 && names && names[0] ? names[0]
                    : st->o.kind == CUDA_ATTN_TILED ? "mla_decode_tiled_kernel"
                                                     : "mla_decode_naive_kernel";
    ll_info("cuda backend: device %d %s (%d SMs, %.0f MiB), attn=%s kv=%s heads=%d topk=%d "
            "dense %dx%d bf16, capacity=%d min_ctx=%d max_running=%d: %.1f MiB on the device "
            "(KV pool %.1f MiB)", st->o.device, st->dev_name, st->sm_count, MB(total_b),
            st->o.kind == CUDA_ATTN_TILED ? "tiled" : "naive", cuda_kv_layout_name(st->o.layout),
            st->o.heads, st->o.topk, st->o.d_model, st->o.d_ff, st->o.capacity, st->o.min_ctx,
            st->o.max_slots, MB(z.total), MB(z.pool));
    *out = st;
    return 0;
fail:
    cuda_state_destroy(st);
    return rc;
}
