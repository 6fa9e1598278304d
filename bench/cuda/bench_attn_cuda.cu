/* bench_attn_cuda.cu: sparse MLA decode attention on the GPU, naive vs tiled
 * vs v2,
 * in the manner of llm.c's dev/cuda and bench/cpu/bench_attn.c:
 *   1. every kernel is checked against engine/cpu/attn_ref.c on the very
 *      inputs it is timed on (sequences 0 and N-1 of each batch, both
 *      layouts); a kernel that fails is never timed (exit 1);
 *   2. the roofs, measured in this run: a device copy kernel with 16-byte
 *      loads over 2 x 1 GiB (GB/s, read + write counted) and the bf16 tensor
 *      rate (cublasGemmEx 8192^3, bf16 in, fp32 accumulate);
 *   3. for N = 1, 2, 4, ..., max (H = 64, top-k 2048 by default), both
 *      layouts: each kernel's median time (CUDA events around each call,
 *      after warm-up, each call queued behind a 100 us spin kernel so host
 *      launch latency is not timed; the index sets rotate over the pool so L2
 *      holds no previous call's rows), unique KV bytes, FLOPs, GB/s over unique
 *      bytes and TFLOP/s against the roofs, naive/tiled; v2's time, GB/s and
 *      % of copy in the columns after them, and tiled/v2.
 *
 * Usage: bench_attn_cuda [--heads H] [--topk K] [--max-n N] [--only-n N]
 *                        [--iters I] [--csv FILE] [--no-roofs]
 * --only-n N: time only that batch size (a power of two <= max-n; the pool
 * still rotates over max-n sequences): one shape for a profiler
 * (device_check.sh's ncu step).
 * Exit: 0; 1 a kernel failed its check or a CUDA call failed; 2 usage;
 *       77 no CUDA device (prints SKIP: <reason>).
 *
 * Each sequence owns `topk` rows of the pool (disjoint), so unique KV bytes =
 * valid entries x row bytes. Expectation (H200, not measured here): naive is
 * fp32-FMA bound (~1.1 GFLOP per N x 64 heads, each block re-reads its rows);
 * tiled is meant to be bandwidth bound at N >= 64, aiming at >= 70% of the
 * copy roof (see engine/cuda/README.md for the reasoning and what limits it);
 * v2 (64 heads per block, the softmax once per tile, balanced split-KV) is
 * estimated from its static figures at about balanced between issue and
 * bytes for bf16 and issue-bound for fp8 — none of it measured yet.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_attn.h"
#include "cuda_attn_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_attn_cuda: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CKB(call)                                                                                  \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "bench_attn_cuda: %s:%d: %s: cublas status %d\n", __FILE__, __LINE__,   \
                    #call, (int)s_);                                                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- roofs ------------------------------------------------------------------ */

__global__ void copy16_kernel(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

__global__ void fill_bf16_kernel(__nv_bfloat16 *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 15;
        x *= 2246822519u;
        x ^= x >> 13;
        p[i] = __float2bfloat16((float)(x & 0xffff) / 32768.0f - 1.0f);
    }
}

/* read + write bytes per second */
static double copy_roof_gbs(int sm)
{
    const size_t bytes = (size_t)1 << 30;
    int4 *a, *b;
    CK(cudaMalloc((void **)&a, bytes));
    CK(cudaMalloc((void **)&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 2, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int it = 0; it < 12; it++) {
        CK(cudaEventRecord(e0));
        copy16_kernel<<<sm * 8, 512>>>(a, b, bytes / 16);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2)
            ms.push_back(t);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * bytes / (median(ms) * 1e-3) / 1e9;
}

static double gemm_roof_tflops(void)
{
    const int M = 8192;
    __nv_bfloat16 *A, *B;
    float *C;
    CK(cudaMalloc((void **)&A, (size_t)M * M * 2));
    CK(cudaMalloc((void **)&B, (size_t)M * M * 2));
    CK(cudaMalloc((void **)&C, (size_t)M * M * 4));
    fill_bf16_kernel<<<1024, 256>>>(A, (size_t)M * M, 1u);
    CK(cudaGetLastError());
    fill_bf16_kernel<<<1024, 256>>>(B, (size_t)M * M, 2u);
    CK(cudaGetLastError());
    cublasHandle_t h;
    CKB(cublasCreate(&h));
    const float alpha = 1.0f, beta = 0.0f;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int it = 0; it < 10; it++) {
        CK(cudaEventRecord(e0));
        CKB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &alpha, A, CUDA_R_16BF, M, B, CUDA_R_16BF, M, &beta,
                         C, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2)
            ms.push_back(t);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CKB(cublasDestroy(h));
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(C));
    return 2.0 * M * M * (double)M / (median(ms) * 1e-3) / 1e12;
}

/* Busy-waits `ns` nanoseconds (one thread): queued before a timed call so
 * the host's launch work (cudaFuncSetAttribute, the launch itself) overlaps
 * it and the start event fires with the kernel already queued; without it a
 * ~10 us decode call is timed with the host launch latency inside. */
__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* ---- the attention runs --------------------------------------------------------- */

typedef struct bench_dev {
    float *q, *out, *lse;
    uint8_t *kv;
    int32_t *idx2; /* the (max_n, topk) index array twice, for rotation */
    void *ws;
    size_t ws_bytes;
} bench_dev;

static int launch(const cac_data *d, const bench_dev *g, cuda_attn_kind kind, int n, int rot_seq, int sm)
{
    cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = n;
    a.heads = d->c.heads;
    a.topk = d->c.topk;
    a.scale = d->scale;
    a.layout = d->c.layout;
    a.q = g->q;
    a.kv = g->kv;
    a.kv_rows = d->kv_rows;
    a.idx = g->idx2 + (size_t)rot_seq * d->c.topk;
    a.out = g->out;
    a.lse = g->lse;
    a.ws = g->ws;
    a.ws_bytes = g->ws_bytes;
    return cuda_attn_decode(kind, &a, sm, NULL);
}

static const char *kind_name(cuda_attn_kind k)
{
    return k == CUDA_ATTN_NAIVE ? "naive" : k == CUDA_ATTN_V2 ? "v2" : "tiled";
}

/* Check `kind` at batch n on rotation 0 (sequences 0..n-1): sequences 0 and
 * n-1 against the reference. 0 ok, 1 failed. */
static int check_kind(cac_data *d, const bench_dev *g, cuda_attn_kind kind, int n, int sm)
{
    size_t rows = (size_t)n * d->c.heads;
    std::vector<float> out(rows * CUDA_ATTN_DV), lse(rows);
    CK(cudaMemset(g->out, 0xff, rows * CUDA_ATTN_DV * 4));
    CK(cudaMemset(g->lse, 0xff, rows * 4));
    int rc = launch(d, g, kind, n, 0, sm);
    if (rc) {
        fprintf(stderr, "bench_attn_cuda: %s launch: %s\n", kind_name(kind), cudaGetErrorString((cudaError_t)rc));
        return 1;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), g->out, rows * CUDA_ATTN_DV * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), g->lse, rows * 4, cudaMemcpyDeviceToHost));
    int seqs[2] = {0, n - 1};
    int ns = n > 1 ? 2 : 1;
    if (cac_reference(d, seqs, ns) != 0) {
        fprintf(stderr, "bench_attn_cuda: reference: out of memory\n");
        return 1;
    }
    /* cac_compare reads rows of `out` at (n*H + h): the device buffer holds the
     * first n sequences, the reference all max_n; same row numbering. */
    std::vector<float> full((size_t)d->c.n_seq * d->c.heads * CUDA_ATTN_DV, NAN), full_lse((size_t)d->c.n_seq * d->c.heads, NAN);
    std::copy(out.begin(), out.end(), full.begin());
    std::copy(lse.begin(), lse.end(), full_lse.begin());
    char msg[512];
    long bad = cac_compare(d, full.data(), full_lse.data(), seqs, ns, msg, sizeof msg);
    if (bad) {
        fprintf(stderr, "bench_attn_cuda: %s %s N=%d FAILED the reference check (%ld bad): %s\n", kind_name(kind),
                cuda_kv_layout_name(d->c.layout), n, bad, msg);
        return 1;
    }
    return 0;
}

static double time_kind(const cac_data *d, const bench_dev *g, cuda_attn_kind kind, int n, int sm, int iters)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    const int max_n = d->c.n_seq;
    for (int it = -3; it < iters; it++) {
        int rot = (int)(((long)(it + 3) * n) % max_n); /* sequences rot..rot+n-1 of the doubled array */
        spin_kernel<<<1, 1>>>(100000); /* 100 us: covers the host's launch work */
        CK(cudaGetLastError());
        CK(cudaEventRecord(e0));
        int rc = launch(d, g, kind, n, rot, sm);
        if (rc) {
            fprintf(stderr, "bench_attn_cuda: %s launch: %s\n", kind_name(kind), cudaGetErrorString((cudaError_t)rc));
            exit(1);
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 0)
            ms.push_back(t);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return median(ms);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_attn_cuda [--heads H] [--topk K] [--max-n N] [--only-n N] [--iters I] [--csv FILE] "
               "[--no-roofs]\n");
}

/* The command line, and the machine's figures every row is read against. */
typedef struct bench_opts {
    int heads, topk, max_n, iters, roofs, only_n;
    const char *csv_path;
    int sm;                     /* the device's SM count */
    double copy_gbs, tc_tflops; /* the measured roofs; NAN with --no-roofs */
} bench_opts;

/* 0: run; 1: --help printed; 2: a usage error (printed). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.heads = 64, .topk = 2048, .max_n = 256, .iters = 40, .roofs = 1, .only_n = 0,
                      .csv_path = NULL, .sm = 0, .copy_gbs = NAN, .tc_tflops = NAN};
    const struct {
        const char *name;
        int *v;
    } nums[] = {{"--heads", &o->heads}, {"--topk", &o->topk},   {"--max-n", &o->max_n},
                {"--only-n", &o->only_n}, {"--iters", &o->iters}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc, done = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !done; k++)
            if (!strcmp(a, nums[k].name) && has) {
                *nums[k].v = atoi(argv[++i]);
                done = 1;
            }
        if (!done && !strcmp(a, "--csv") && has) {
            o->csv_path = argv[++i];
            done = 1;
        } else if (!done && !strcmp(a, "--no-roofs")) {
            o->roofs = 0;
            done = 1;
        }
        if (!done) {
            usage(stderr);
            return 2;
        }
    }
    if (o->heads < 1 || o->topk < 1 || o->max_n < 1 || o->iters < 1 || o->only_n < 0 || o->only_n > o->max_n ||
        (o->only_n & (o->only_n - 1)) != 0) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Device 0, its SM count and (unless --no-roofs) the roofs: 0, or 77 with
 * "SKIP: <reason>" printed where no device answers. */
static int open_device(bench_opts *o)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device: %s (error %d)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0", (int)e);
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    o->sm = prop.multiProcessorCount;
    printf("device: %s (sm_%d%d, %d SMs, L2 %d MB)\n", prop.name, prop.major, prop.minor, o->sm,
           prop.l2CacheSize >> 20);
    if (o->roofs) {
        o->copy_gbs = copy_roof_gbs(o->sm);
        o->tc_tflops = gemm_roof_tflops();
        printf("roofs: copy %.0f GB/s (16-byte loads, read+write, 2 x 1 GiB); bf16 tensor %.0f TFLOP/s "
               "(cublasGemmEx 8192^3)\n", o->copy_gbs, o->tc_tflops);
    }
    return 0;
}

/* The CSV with its header line, or NULL (no --csv); exits 1 when it cannot
 * be created. */
static FILE *open_csv(const char *path)
{
    if (!path)
        return NULL;
    FILE *csv = fopen(path, "w");
    if (!csv) {
        perror(path);
        exit(1);
    }
    fprintf(csv, "layout,n,heads,topk,naive_us,tiled_us,unique_kv_bytes,flops,naive_gbs,tiled_gbs,tiled_pct_copy,"
                 "naive_tflops,tiled_tflops,tiled_pct_tc,naive_over_tiled,copy_gbs,tc_tflops,v2_us,v2_gbs,"
                 "v2_pct_copy,tiled_over_v2\n");
    return csv;
}

/* One layout's inputs on the device: q, the pool, the index array twice
 * (for rotation), outputs and the larger of the tiled and v2 workspaces. */
static void dev_upload(const cac_data *d, const bench_opts *o, bench_dev *g)
{
    memset(g, 0, sizeof *g);
    size_t rows = (size_t)o->max_n * o->heads, nidx = (size_t)o->max_n * o->topk;
    CK(cudaMalloc((void **)&g->q, rows * CUDA_ATTN_DQK * 4));
    CK(cudaMalloc((void **)&g->out, rows * CUDA_ATTN_DV * 4));
    CK(cudaMalloc((void **)&g->lse, rows * 4));
    CK(cudaMalloc((void **)&g->kv, (size_t)d->kv_rows * d->row_bytes));
    CK(cudaMalloc((void **)&g->idx2, 2 * nidx * 4));
    g->ws_bytes = std::max(cuda_attn_ws_bytes(CUDA_ATTN_TILED, o->max_n, o->heads, o->topk, o->sm),
                           cuda_attn_ws_bytes(CUDA_ATTN_V2, o->max_n, o->heads, o->topk, o->sm));
    if (g->ws_bytes)
        CK(cudaMalloc(&g->ws, g->ws_bytes));
    CK(cudaMemcpy(g->q, d->q, rows * CUDA_ATTN_DQK * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->kv, d->kv, (size_t)d->kv_rows * d->row_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->idx2, d->idx, nidx * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->idx2 + nidx, d->idx, nidx * 4, cudaMemcpyHostToDevice));
}

static void dev_free(bench_dev *g)
{
    CK(cudaFree(g->q));
    CK(cudaFree(g->out));
    CK(cudaFree(g->lse));
    CK(cudaFree(g->kv));
    CK(cudaFree(g->idx2));
    if (g->ws)
        CK(cudaFree(g->ws));
}

/* Batch n of one layout: every kind validated against the reference, then
 * timed (llm.c); the row on stdout and in the CSV, and for the largest
 * N <= 64 (or N = 1) the layout's summary line. 0, or 1 when a check failed. */
static int bench_n(cac_data *d, const bench_dev *g, const bench_opts *o, int n, FILE *csv, char *summary,
                   size_t summary_len)
{
    const int sm = o->sm, heads = o->heads, topk = o->topk;
    if (check_kind(d, g, CUDA_ATTN_NAIVE, n, sm) || check_kind(d, g, CUDA_ATTN_TILED, n, sm) ||
        check_kind(d, g, CUDA_ATTN_V2, n, sm))
        return 1;
    double t_naive = time_kind(d, g, CUDA_ATTN_NAIVE, n, sm, o->iters);
    double t_tiled = time_kind(d, g, CUDA_ATTN_TILED, n, sm, o->iters);
    double t_v2 = time_kind(d, g, CUDA_ATTN_V2, n, sm, o->iters);
    double bytes = cuda_attn_unique_kv_bytes(d->idx, n, topk, d->c.layout);
    double flops = cuda_attn_flops(d->idx, n, heads, topk);
    double gbs_n = bytes / (t_naive * 1e-3) / 1e9, gbs_t = bytes / (t_tiled * 1e-3) / 1e9;
    double gbs_v = bytes / (t_v2 * 1e-3) / 1e9;
    double tf_n = flops / (t_naive * 1e-3) / 1e12, tf_t = flops / (t_tiled * 1e-3) / 1e12;
    const double copy_gbs = o->copy_gbs, tc_tflops = o->tc_tflops;
    const char *layout = cuda_kv_layout_name(d->c.layout);
    printf("%-5s %4d %10.1f %10.1f %9.2f %8.2f %9.0f %9.0f %5.0f%% %8.1f %8.1f %5.0f%% %7.1f %10.1f %9.0f %5.0f%% "
           "%7.2f\n",
           layout, n, t_naive * 1e3, t_tiled * 1e3, bytes / 1e6, flops / 1e9, gbs_n, gbs_t, 100 * gbs_t / copy_gbs,
           tf_n, tf_t, 100 * tf_t / tc_tflops, t_naive / t_tiled, t_v2 * 1e3, gbs_v, 100 * gbs_v / copy_gbs,
           t_tiled / t_v2);
    if (csv)
        fprintf(csv, "%s,%d,%d,%d,%.3f,%.3f,%.0f,%.0f,%.1f,%.1f,%.2f,%.3f,%.3f,%.2f,%.3f,%.1f,%.1f,%.3f,%.1f,%.2f,"
                     "%.3f\n",
                layout, n, heads, topk, t_naive * 1e3, t_tiled * 1e3, bytes, flops, gbs_n, gbs_t,
                100 * gbs_t / copy_gbs, tf_n, tf_t, 100 * tf_t / tc_tflops, t_naive / t_tiled, copy_gbs, tc_tflops,
                t_v2 * 1e3, gbs_v, 100 * gbs_v / copy_gbs, t_tiled / t_v2);
    fflush(stdout);
    if (n <= 64 || summary[0] == 0)
        snprintf(summary, summary_len,
                 "summary %s N=%d: tiled %.0f GB/s = %.0f%% of copy (%.0f GB/s), %.1f TFLOP/s; naive %.1f TFLOP/s; "
                 "naive/tiled %.1fx; v2 %.0f GB/s = %.0f%% of copy, tiled/v2 %.2fx",
                 layout, n, gbs_t, 100 * gbs_t / copy_gbs, copy_gbs, tf_t, tf_n, t_naive / t_tiled, gbs_v,
                 100 * gbs_v / copy_gbs, t_tiled / t_v2);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if ((rc = open_device(&o)) != 0)
        return rc;
    FILE *csv = open_csv(o.csv_path);
    printf("\n%-5s %4s %10s %10s %9s %8s %9s %9s %6s %8s %8s %6s %7s %10s %9s %6s %7s\n", "kv", "N", "naive_us",
           "tiled_us", "uniq_MB", "GFLOP", "naive_GBs", "tiled_GBs", "%copy", "naive_TF", "tiled_TF", "%tc", "n/t",
           "v2_us", "v2_GBs", "%copy", "t/v2");

    char summary[2][256] = {"", ""};
    for (int l = 0; l < 2; l++) {
        cac_case c;
        memset(&c, 0, sizeof c);
        c.n_seq = o.max_n;
        c.heads = o.heads;
        c.topk = o.topk;
        c.layout = (cuda_kv_layout)l;
        c.ctx_rows = o.topk; /* each sequence selects all of its own rows: unique = valid */
        c.seed = 42 + l;
        cac_data d;
        if (cac_make(&c, &d) != 0) {
            fprintf(stderr, "bench_attn_cuda: out of host memory\n");
            return 1;
        }
        bench_dev g;
        dev_upload(&d, &o, &g);
        for (int n = o.only_n ? o.only_n : 1; n <= (o.only_n ? o.only_n : o.max_n); n *= 2)
            if (bench_n(&d, &g, &o, n, csv, summary[l], sizeof summary[l]) != 0)
                return 1;
        dev_free(&g);
        cac_free(&d);
    }
    if (csv)
        fclose(csv);
    printf("\nchecked: every kernel at every N against attn_ref.c (sequences 0 and N-1) before timing\n");
    for (int l = 0; l < 2; l++)
        printf("%s\n", summary[l]);
    return 0;
}
