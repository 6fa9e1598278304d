/* cuda_dense.cu: the dense part of the cuda backend's step (cuda_model.h):
 * cuBLAS, opened at run time, and what runs through it — the seeded
 * weights W and Wv (whole, or a tensor-parallel rank's shard of W's
 * columns), the GEMM Hd = X · W, and the logits through Wv from the head
 * mean (or from a rank's all-reduced head sum) — and the messages for the
 * CUDA and cuBLAS codes every cuda_model.h function returns. Shapes and
 * seeds are cpu_model.c's; the per-element kernels around the dense part
 * (KV rows, embedding, projection, top-k, sampling) are cuda_model.cu's. */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_launch.h"
#include "cuda_model.h"
#include "cuda_model_internal.h"
#include "numfmt.h"

/* ---- cuBLAS, loaded at run time ------------------------------------------------
 * DESIGN: cuBLAS is opened with dlopen when a cuda backend starts, as NCCL
 * is (engine/comm_nccl.c), not linked: a loadlaw built with CUDA then starts
 * without the toolkit's libraries (every client command, the cpu and
 * synthetic backends) and does not map ~100 MB of libcublas/libcublasLt at
 * each start (~75 ms when it was linked). The pointers keep cublas_v2.h's
 * own types (decltype), so a call through them is checked like a direct one.
 * $LOADLAW_CUBLAS_LIB names another file; the default is this toolkit's
 * major version (libcublas.so.13 for CUDA 13). */
#define CUBLAS_XSTR(x) CUBLAS_STR(x)
#define CUBLAS_STR(x) #x
#define CUBLAS_SONAME "libcublas.so." CUBLAS_XSTR(CUBLAS_VER_MAJOR)

static struct {
    decltype(&cublasCreate) create;
    decltype(&cublasDestroy) destroy;
    decltype(&cublasSetStream) set_stream;
    /* the C entry point (C++ also sees an inline overload taking cudaDataType_t) */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *,
                              void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    decltype(&cublasSgemm) sgemm;
    decltype(&cublasGetStatusName) status_name;
    decltype(&cublasGetStatusString) status_string;
    decltype(&cublasGetProperty) get_property;
} cb;
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;
static char cb_err[512]; /* empty: loaded */

static void cublas_open(void)
{
    const char *lib = getenv("LOADLAW_CUBLAS_LIB");
    if (!lib || !*lib)
        lib = CUBLAS_SONAME;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cb_err, sizeof cb_err,
                 "cuBLAS could not be loaded (%s); put the folder that holds %s on LD_LIBRARY_PATH "
                 "or name the file in LOADLAW_CUBLAS_LIB", dlerror(), CUBLAS_SONAME);
        return;
    }
    /* the names the macros of cublas_v2.h expand to (cublasCreate_v2, ...) */
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&cb.create, CUBLAS_XSTR(cublasCreate)},
        {(void **)&cb.destroy, CUBLAS_XSTR(cublasDestroy)},
        {(void **)&cb.set_stream, CUBLAS_XSTR(cublasSetStream)},
        {(void **)&cb.gemm_ex, CUBLAS_XSTR(cublasGemmEx)},
        {(void **)&cb.sgemm, CUBLAS_XSTR(cublasSgemm)},
        {(void **)&cb.status_name, CUBLAS_XSTR(cublasGetStatusName)},
        {(void **)&cb.status_string, CUBLAS_XSTR(cublasGetStatusString)},
        {(void **)&cb.get_property, CUBLAS_XSTR(cublasGetProperty)},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
            snprintf(cb_err, sizeof cb_err, "cuBLAS (%s) has no %s: %s", lib, syms[i].name, dlerror());
            dlclose(h);
            memset(&cb, 0, sizeof cb);
            return;
        }
    /* the types above are this toolkit's: another major version may differ */
    int major = -1;
    if (cb.get_property(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS || major != CUBLAS_VER_MAJOR) {
        snprintf(cb_err, sizeof cb_err, "cuBLAS (%s) is major version %d; loadlaw was built against %d", lib,
                 major, CUBLAS_VER_MAJOR);
        dlclose(h);
        memset(&cb, 0, sizeof cb);
        return;
    }
    /* kept open for the process: handles outlive any one engine */
}

extern "C" int cuda_cublas_load(char *err, size_t errlen)
{
    pthread_once(&cb_once, cublas_open);
    if (cb_err[0]) {
        snprintf(err, errlen, "%s", cb_err);
        return -1;
    }
    return 0;
}

static const char *cublas_str(cublasStatus_t s)
{
    static __thread char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", cb.status_name(s), cb.status_string(s));
    return buf;
}

extern "C" const char *cuda_model_errstr(int e)
{
    if (e >= CUDA_MODEL_BLAS) {
        cublasStatus_t b = (cublasStatus_t)(e - CUDA_MODEL_BLAS);
        if (cb.status_name)
            return cublas_str(b);
        static __thread char bbuf[64];
        snprintf(bbuf, sizeof bbuf, "cuBLAS status %d", (int)b);
        return bbuf;
    }
    /* one buffer per thread: the scheduler and a test may both ask */
    static __thread char buf[256];
    snprintf(buf, sizeof buf, "%s: %s", cudaGetErrorName((cudaError_t)e), cudaGetErrorString((cudaError_t)e));
    return buf;
}

/* A cuBLAS call's status as this file's functions return it. */
static int blas_rc(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : CUDA_MODEL_BLAS + (int)s;
}

/* The dense part's cuBLAS handle, on stream s: 0 or the cuBLAS status. */
static int dense_cublas(cuda_dense *d, cudaStream_t s, const char *who, char *err, size_t errlen)
{
    cublasHandle_t h = NULL;
    char lerr[512];
    if (cuda_cublas_load(lerr, sizeof lerr)) {
        snprintf(err, errlen, "%s%s", who, lerr);
        return blas_rc(CUBLAS_STATUS_NOT_INITIALIZED);
    }
    cublasStatus_t cs = cb.create(&h);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "%scublasCreate failed: %s", who, cublas_str(cs));
        return blas_rc(cs);
    }
    d->cublas = h;
    cs = cb.set_stream(h, s);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "%scublasSetStream failed: %s", who, cublas_str(cs));
        return blas_rc(cs);
    }
    return 0;
}

/* ---- weights and the dense GEMM ---------------------------------------------- */

/* w[i] = scale * ll_hash_unit(ll_splitmix64(seed + i)) (cpu_model.c fill_weights), stored
 * bf16 (W) or fp32 (Wv). */
__global__ void init_weights_bf16_kernel(uint16_t *w, size_t n, float scale, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = f32_to_bf16(scale * ll_hash_unit(ll_splitmix64(seed + i)));
}

__global__ void init_weights_f32_kernel(float *w, size_t n, float scale, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = scale * ll_hash_unit(ll_splitmix64(seed + i));
}

/* W shard (d_model, ncols): column lc is the full W's column cols[lc], the
 * same value init_weights_bf16_kernel gives element k * d_ff + cols[lc]. */
__global__ void init_weights_cols_bf16_kernel(uint16_t *w, int ld, int d_model, int d_ff, const int32_t *cols,
                                              int ncols, float scale, uint64_t seed)
{
    size_t n = (size_t)d_model * ncols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t k = i / (size_t)ncols, lc = i % (size_t)ncols;
        w[k * ld + lc] = f32_to_bf16(scale * ll_hash_unit(ll_splitmix64(seed + k * (size_t)d_ff + (size_t)cols[lc])));
    }
}

/* W (all of it, d_cols NULL, or the shard of columns d_cols[0..ncols)), Wv
 * when with_wv, the cuBLAS handle; synchronises the stream, so the weights'
 * kernels have run (and failed here, not in a step) and d_cols may go. */
static int dense_init(cuda_dense *d, int d_model, int d_ff, int vocab, uint64_t seed,
                      const int32_t *d_cols, int ncols, int with_wv, void *stream, char *err,
                      size_t errlen)
{
    d->d_w = NULL;
    d->d_wv = NULL;
    d->cublas = NULL;
    d->d_model = d_model;
    d->d_ff = d_cols ? ncols : d_ff;
    d->ld = d_cols ? cuda_dense_ld(ncols) : d_ff;
    d->vocab = vocab;
    const char *what = d_cols ? "dense weight shard" : "dense weights";
    cudaStream_t s = (cudaStream_t)stream;
    size_t nw = (size_t)d_model * d->ld, nv = with_wv ? (size_t)CUDA_ATTN_DV * vocab : 0;
    cudaError_t e = cudaMalloc((void **)&d->d_w, nw * sizeof(uint16_t));
    if (e == cudaSuccess && nv)
        e = cudaMalloc((void **)&d->d_wv, nv * sizeof(float));
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMalloc of the %s (%.1f MB) failed: %s", what,
                 (double)(nw * 2 + nv * 4) / 1e6, cuda_model_errstr(e));
        (void)cudaGetLastError(); /* clear a non-sticky allocation error */
        return (int)e;
    }
    float scale = 1.0f / sqrtf((float)d_model);
    if (d_cols)
        LAUNCH(init_weights_cols_bf16_kernel, 1024, 256, 0, s)(d->d_w, d->ld, d_model, d_ff, d_cols,
                                                               ncols, scale, seed);
    else
        LAUNCH(init_weights_bf16_kernel, 1024, 256, 0, s)(d->d_w, nw, scale, seed);
    int rc = launched();
    if (rc == 0 && nv) {
        LAUNCH(init_weights_f32_kernel, 256, 256, 0, s)(d->d_wv, nv, 1.0f / sqrtf((float)CUDA_ATTN_DV),
                                                        ll_splitmix64(seed ^ 0x5eedull));
        rc = launched();
    }
    if (rc != 0) {
        snprintf(err, errlen, "init_weights kernels failed to launch: %s", cuda_model_errstr(rc));
        return rc;
    }
    e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "generating the %s failed: %s", what, cuda_model_errstr(e));
        return (int)e;
    }
    return dense_cublas(d, s, "", err, errlen);
}

extern "C" int cuda_dense_init(cuda_dense *d, int d_model, int d_ff, int vocab, uint64_t seed,
                               void *stream, char *err, size_t errlen)
{
    return dense_init(d, d_model, d_ff, vocab, seed, NULL, 0, 1, stream, err, errlen);
}

extern "C" void cuda_dense_free(cuda_dense *d)
{
    if (d->cublas)
        cb.destroy((cublasHandle_t)d->cublas);
    cudaFree(d->d_w);
    cudaFree(d->d_wv);
    d->cublas = NULL;
    d->d_w = NULL;
    d->d_wv = NULL;
}

extern "C" int cuda_dense_forward(const cuda_dense *d, const uint16_t *d_x, int n, float *d_hd)
{
    if (n <= 0)
        return 0;
    /* Row-major Hd (n, d_ff) = X (n, d_model) · W (d_model, d_ff) is, in
     * cuBLAS's column-major terms, Hd^T (d_ff x n) = W^T (d_ff x d_model) ·
     * X^T (d_model x n): no transposes, leading dimensions ld, d_model, ld
     * (ld = d_ff, or a shard's padded stride). */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cb.gemm_ex((cublasHandle_t)d->cublas, CUBLAS_OP_N, CUBLAS_OP_N, d->d_ff, n,
                                  d->d_model, &one, d->d_w, CUDA_R_16BF, d->ld, d_x, CUDA_R_16BF,
                                  d->d_model, &zero, d_hd, CUDA_R_32F, d->ld, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT);
    return blas_rc(s);
}

/* ---- logits ----------------------------------------------------------------- */

/* dst (n, 512) = scale * the sum over heads of out (n, heads, 512), summed
 * from 0.0f in head order (the cpu's order): scale 1 gives a rank's head
 * sum, 1/heads the mean. */
__global__ void head_reduce_kernel(const float *out, int heads, float scale, float *dst)
{
    int i = blockIdx.x;
    for (int j = threadIdx.x; j < CUDA_ATTN_DV; j += blockDim.x) {
        float m = 0.0f;
        for (int h = 0; h < heads; h++)
            m += out[((size_t)i * heads + h) * CUDA_ATTN_DV + j];
        dst[(size_t)i * CUDA_ATTN_DV + j] = m * scale;
    }
}

/* logits^T (vocab x n) = Wv^T (vocab x 512) · mean^T (512 x n), column-major */
static int logits_of_mean(const cuda_dense *d, const float *d_mean, int n, float *d_logits)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cb.sgemm((cublasHandle_t)d->cublas, CUBLAS_OP_N, CUBLAS_OP_N, d->vocab, n,
                                CUDA_ATTN_DV, &one, d->d_wv, d->vocab, d_mean, CUDA_ATTN_DV, &zero,
                                d_logits, d->vocab);
    return blas_rc(s);
}

extern "C" int cuda_logits(const cuda_dense *d, const float *d_attn_out, int n, int heads,
                           float *d_mean, float *d_logits, void *stream)
{
    if (n <= 0)
        return 0;
    LAUNCH(head_reduce_kernel, (unsigned)n, 256, 0, (cudaStream_t)stream)(d_attn_out, heads,
                                                                          1.0f / (float)heads, d_mean);
    int rc = launched();
    return rc != 0 ? rc : logits_of_mean(d, d_mean, n, d_logits);
}

/* ---- tensor parallelism (cuda_tp.h) ------------------------------------------- */

extern "C" int cuda_dense_init_cols(cuda_dense *d, int d_model, int d_ff, int vocab, uint64_t seed,
                                    const int32_t *d_cols, int ncols, int with_wv, void *stream,
                                    char *err, size_t errlen)
{
    return dense_init(d, d_model, d_ff, vocab, seed, d_cols, ncols, with_wv, stream, err, errlen);
}

extern "C" int cuda_head_sum(const float *d_attn_out, int n, int heads, float *d_sum, void *stream)
{
    if (n <= 0)
        return 0;
    LAUNCH(head_reduce_kernel, (unsigned)n, 256, 0, (cudaStream_t)stream)(d_attn_out, heads, 1.0f, d_sum);
    return launched();
}

__global__ void scale_mean_kernel(const float *sum, size_t n, float inv, float *mean)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mean[i] = sum[i] * inv;
}

extern "C" int cuda_logits_sum(const cuda_dense *d, const float *d_sum, int n, int heads,
                               float *d_mean, float *d_logits, void *stream)
{
    if (n <= 0)
        return 0;
    size_t cnt = (size_t)n * CUDA_ATTN_DV;
    LAUNCH(scale_mean_kernel, (unsigned)((cnt + 255) / 256), 256, 0, (cudaStream_t)stream)(
        d_sum, cnt, 1.0f / (float)heads, d_mean);
    int rc = launched();
    return rc != 0 ? rc : logits_of_mean(d, d_mean, n, d_logits);
}
