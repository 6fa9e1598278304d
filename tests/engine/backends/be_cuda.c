/* be_cuda.c: the cuda backend's adapter (conformance.h), on a GPU or on
 * cuemu (tools/cuemu: the same source, the emulated runtime). What the suite
 * may see beyond the ops table comes through backend_cuda.h's views of the
 * device buffers:
 *   - after step 2 of a deep variant, the step's attention output against
 *     attn_decode_ref (the cpu's double reference) on the same q, indices
 *     and pool copied back (fp8 dequantised exactly): FlashMLA's bf16
 *     tolerance, atol 1e-3 + rtol 2.01/128; with kv=bf16 the pool's seeded
 *     rows and the top-k rows are the cpu backend's, bit for bit
 *     (cpu_kv_fill, cpu_topk_select);
 *   - for the tp path each rank's view: its heads, its outputs, and the
 *     all-reduced head sum, which must have the same bits on every rank.
 * Phases: kv_cache_fill on a prefill step (every rank), then embed, GEMM,
 * project, top-k, the attention kernel (+ NCCL's all-reduce at tp > 1) and
 * on rank 0 logits and sampling. tp=2 needs NCCL: two GPUs, or two ranks on
 * one GPU with NCCL_MULTI_RANK_GPU_ENABLE=1 (set here when unset; NCCL
 * 2.30+), from $LOADLAW_NCCL_LIB, else the toolkit's copy found at configure
 * time (LOADLAW_TOOLKIT_NCCL), else the loader's path. */
#define TESTUTIL_SHARED
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend_cuda.h"
#include "conformance.h"
#include "cpu_kernels.h"
#include "cuda_attn.h"
#include "cuda_model.h"
#include "cuda_state.h"
#include "testutil.h"

static int cuda_probe(char *why, size_t len) { return cuda_backend_probe(0, why, len); }

static const char *attn_kernel(const char *attn)
{
    return attn && strcmp(attn, "naive") == 0 ? "mla_decode_naive_kernel"
           : attn && strcmp(attn, "v2") == 0  ? "mla_decode_v2_kernel"
                                              : "mla_decode_tiled_kernel";
}

static int cuda_phases(const char *attn, int prefill, int decode, const char **names)
{
    int n = 0;
    if (prefill)
        names[n++] = CUDA_K_FILL;
    if (decode) {
        const char *dec[] = {CUDA_K_EMBED, CUDA_K_GEMM, CUDA_K_PROJECT, CUDA_K_TOPK, attn_kernel(attn),
                             CUDA_K_LOGITS, CUDA_K_SAMPLE};
        for (int i = 0; i < 7; i++)
            names[n++] = dec[i];
    }
    return n;
}

static int copy_back(void *dst, const void *src, size_t bytes, const char *what)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    CHECK(e == cudaSuccess, "copy back %s: %s", what, cudaGetErrorString(e));
    return e != cudaSuccess;
}

/* Sequence i's selected rows: -1 pads the tail only, every entry in the
 * pool; the count of malformed entries, the valid ones in *k. */
static int index_rows(const int32_t *ix, int topk, int64_t pool_rows, int *k)
{
    int bad = 0;
    *k = 0;
    while (*k < topk && ix[*k] >= 0)
        (*k)++;
    for (int j = *k; j < topk; j++)
        bad += ix[j] != -1;
    for (int j = 0; j < *k; j++)
        bad += ix[j] >= pool_rows;
    return bad;
}

/* The last step's attention inputs copied back and run through the cpu
 * reference; every output within FlashMLA's bf16 tolerance. */
static void check_attention(void *st, const char *what)
{
    cuda_backend_view v;
    cuda_backend_view_get(st, &v);
    size_t nq = (size_t)v.n_seq * v.heads * CUDA_ATTN_DQK, no = (size_t)v.n_seq * v.heads * CUDA_ATTN_DV;
    size_t ni = (size_t)v.n_seq * v.topk, pool_b = (size_t)v.pool_rows * v.row_bytes;
    float *q = malloc(nq * 4), *out = malloc(no * 4), *ref = malloc(no * 4);
    int32_t *idx = malloc(ni * 4);
    uint8_t *pool = malloc(pool_b);
    uint16_t *bf = v.layout == CUDA_KV_BF16 ? (uint16_t *)pool : malloc((size_t)v.pool_rows * CUDA_ATTN_DQK * 2);
    attn_seq *seq = calloc((size_t)v.n_seq, sizeof *seq);
    if (!q || !out || !ref || !idx || !pool || !bf || !seq) {
        CHECK(0, "out of host memory");
        goto out;
    }
    if (copy_back(q, v.d_q, nq * 4, "q") || copy_back(out, v.d_out, no * 4, "out") ||
        copy_back(idx, v.d_idx, ni * 4, "idx") || copy_back(pool, v.d_pool, pool_b, "pool"))
        goto out;
    if (v.layout == CUDA_KV_FP8_V32)
        cuda_kv_dequantize_fp8(pool, v.pool_rows, bf);
    int bad_idx = 0;
    for (int i = 0; i < v.n_seq; i++) {
        const int32_t *ix = idx + (size_t)i * v.topk;
        int k;
        bad_idx += index_rows(ix, v.topk, v.pool_rows, &k);
        seq[i] = (attn_seq){.kv = bf, .idx = ix, .k = k}; /* global rows of the whole pool */
    }
    CHECK(bad_idx == 0, "%s: %d malformed indices", what, bad_idx);
    attn_batch ab = {.n_seq = v.n_seq, .heads = v.heads, .scale = v.scale, .q = q, .seq = seq, .out = ref};
    CHECK(attn_decode_ref(&ab) == 0, "reference");
    double worst = -1, max_err = 0;
    for (size_t j = 0; j < no; j++) {
        double err = fabs((double)out[j] - ref[j]);
        worst = fmax(worst, err - (1e-3 + 2.01 / 128 * fabs(ref[j])));
        max_err = fmax(max_err, err);
    }
    CHECK(worst <= 0, "%s: attention output vs attn_decode_ref: max |err| %.3g over tolerance", what, max_err);
    printf("%s: attention vs reference, %d sequences x %d heads: max |err| %.3g\n", what, v.n_seq, v.heads, max_err);
out:
    free(q); free(out); free(ref); free(idx); free(seq);
    if (bf != (uint16_t *)pool)
        free(bf);
    free(pool);
}

/* The pool's rows for slot 0 (history, never prefilled or decoded into past
 * row 300) and the top-k rows of the last step are the cpu backend's. */
static void check_rows_and_topk(void *st, const int *slots, const int64_t *ctx, int n, uint64_t seed)
{
    cuda_backend_view v;
    cuda_backend_view_get(st, &v);
    int64_t cap = v.pool_rows / 8;
    uint16_t *dev = malloc((size_t)cap * CUDA_ATTN_DQK * 2), *host = malloc((size_t)cap * ATTN_ROW_BYTES);
    int32_t *idx = malloc((size_t)n * v.topk * 4), *want = malloc((size_t)v.topk * 4);
    if (!dev || !host || !idx || !want) {
        CHECK(0, "out of host memory");
        goto out;
    }
    if (copy_back(dev, v.d_pool, (size_t)cap * v.row_bytes, "pool") ||
        copy_back(idx, v.d_idx, (size_t)n * v.topk * 4, "idx"))
        goto out;
    cpu_kv_fill(host, 0, cap, ll_splitmix64(seed ^ 0ull));
    int diff = 0;
    for (int64_t r = 400; r < cap; r++) /* rows 0..~60 were prefilled, ~40..50 decoded */
        diff += memcmp(dev + r * CUDA_ATTN_DQK, host + r * ATTN_DQK, ATTN_ROW_BYTES) != 0;
    CHECK(diff == 0, "slot 0 history rows 400..%lld: %d differ from cpu_kv_fill", (long long)cap - 1, diff);
    int tdiff = 0;
    for (int i = 0; i < n; i++) {
        int64_t c = ctx[i] > v.topk ? ctx[i] : v.topk; /* min_ctx = topk */
        if (c > cap)
            c = cap;
        int k = cpu_topk_select(c, v.topk, ll_splitmix64(seed ^ (uint64_t)slots[i]), want);
        for (int j = 0; j < v.topk; j++) {
            int32_t w = j < k ? (int32_t)(slots[i] * cap + want[j]) : -1;
            tdiff += idx[(size_t)i * v.topk + j] != w;
        }
    }
    CHECK(tdiff == 0, "top-k rows: %d differ from cpu_topk_select", tdiff);
out:
    free(dev); free(host); free(idx); free(want);
}

static void cuda_check_step(void *st, const char *what, const eng_config *cfg, int s, const script_step *sk)
{
    if (s != 2)
        return;
    check_attention(st, what);
    if (cfg->kv && strcmp(cfg->kv, "bf16") == 0)
        check_rows_and_topk(st, sk->dslot, sk->dctx, SCRIPT_MIXED.slots, cfg->seed);
}

/* Each rank's view: its heads and their outputs; rank 0's mean and logits;
 * every rank's all-reduced head sum with rank 0's bits. */
static void cuda_snap(void *st, int tp, int n_seq, int heads, int vocab, tb_snap *sn)
{
    static float sum0[SCRIPT_MAX_SLOTS][TB_DV], sum[SCRIPT_MAX_SLOTS][TB_DV];
    memset(sn, 0, sizeof *sn);
    sn->has_mean = 1;
    for (int r = 0; r < tp; r++) {
        cuda_backend_view v;
        CHECK(cuda_backend_view_rank(st, r, &v) == 0, "view of rank %d", r);
        CHECK(v.n_seq == n_seq && v.tp == tp && v.rank == r, "view: %d seqs, tp %d, rank %d", v.n_seq, v.tp, v.rank);
        CHECK(v.heads == heads / tp && v.h0 == r * heads / tp, "rank %d heads %d from %d", r, v.heads, v.h0);
        float *o = malloc((size_t)n_seq * v.heads * TB_DV * 4);
        if (!o || copy_back(o, v.d_out, (size_t)n_seq * v.heads * TB_DV * 4, "out")) {
            free(o);
            return;
        }
        for (int i = 0; i < n_seq; i++)
            for (int h = 0; h < v.heads; h++)
                memcpy(sn->attn[i][v.h0 + h], o + ((size_t)i * v.heads + h) * TB_DV, TB_DV * 4);
        free(o);
        for (int i = 0; r == 0 && i < n_seq; i++) {
            copy_back(sn->mean[i], v.d_mean + (size_t)i * TB_DV, TB_DV * 4, "mean");
            copy_back(sn->logits[i], v.d_logits + (size_t)i * vocab, (size_t)vocab * 4, "logits");
        }
        if (tp > 1 && copy_back(r ? sum : sum0, v.d_sum, (size_t)n_seq * TB_DV * 4, "all-reduced sum") == 0 && r)
            CHECK(memcmp(sum0, sum, (size_t)n_seq * TB_DV * 4) == 0, "rank %d's all-reduced head sum has rank 0's bits",
                  r);
    }
}

static int cuda_rank_phases(int tp, int rank, int prefill, int decode)
{
    return prefill + (decode ? 5 + (tp > 1) + 2 * (rank == 0) : 0);
}

/* Two ranks need two GPUs, or NCCL's two ranks on one: 0, or 77 saying why. */
static int cuda_tp_prepare(void)
{
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev < 1) {
        printf("SKIP: cudaGetDeviceCount\n");
        return TEST_SKIP;
    }
    const char *multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if (n_dev < 2 && multi && strcmp(multi, "1") != 0) {
        printf("SKIP: one GPU and NCCL_MULTI_RANK_GPU_ENABLE=%s: tp=2 needs two GPUs or "
               "NCCL_MULTI_RANK_GPU_ENABLE=1\n", multi);
        return TEST_SKIP;
    }
    if (n_dev < 2 && !multi) {
        printf("one GPU: setting NCCL_MULTI_RANK_GPU_ENABLE=1 for two ranks on it (NCCL 2.30+)\n");
        setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    }
#ifdef LOADLAW_TOOLKIT_NCCL
    if (!getenv("LOADLAW_NCCL_LIB"))
        setenv("LOADLAW_NCCL_LIB", LOADLAW_TOOLKIT_NCCL, 0);
#endif
    printf("%d GPU(s); NCCL from %s\n", n_dev,
           getenv("LOADLAW_NCCL_LIB") ? getenv("LOADLAW_NCCL_LIB") : "the loader's path");
    return 0;
}

static const char *const k_rank0_only[] = {CUDA_K_LOGITS, CUDA_K_SAMPLE, NULL};

const tb_backend tb_cuda = {
    .id = TB_CUDA,
    .name = "cuda",
    .ops = &eng_backend_cuda,
    .probe = cuda_probe,
    .token = cuda_backend_token,
    .phases = cuda_phases,
    .validates_slots = 1,
    .fault_step = 1,
    .fail_says = "cudaErrorInvalidConfiguration",
    .fail_sticky = 1,
    .check_step = cuda_check_step,
    .tp_snap = cuda_snap,
    .tp_rank_phases = cuda_rank_phases,
    .tp_rank0_only = k_rank0_only,
    .tp_comm_name = CUDA_K_ALLREDUCE,
    .tp_prepare = cuda_tp_prepare,
};
