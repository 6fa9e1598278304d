/* cublas_cuemu.cc: the cuBLAS entry points the cuda backend opens with
 * dlopen (engine/cuda/cuda_dense.cu), on the host, for cuemu: built as a
 * shared library and named in LOADLAW_CUBLAS_LIB, it stands where
 * libcublas.so.13 would. Plain loops, column-major as cuBLAS; arguments are
 * checked as cuBLAS documents them (a leading dimension below the rows of
 * its matrix is CUBLAS_STATUS_INVALID_VALUE; type combinations other than
 * those listed are CUBLAS_STATUS_NOT_SUPPORTED). With beta = 0, C is not
 * read (cuBLAS: it need not hold valid values). */
#include <cublas_v2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct cublasContext {
    cudaStream_t stream;
};

namespace {

float bf16(const void *p, size_t i)
{
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

bool ld_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    auto mx = [](int a) { return a > 1 ? a : 1; };
    if (m < 0 || n < 0 || k < 0)
        return false;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return false;
    return lda >= mx(ta == CUBLAS_OP_N ? m : k) && ldb >= mx(tb == CUBLAS_OP_N ? k : n) && ldc >= mx(m);
}

/* C = alpha op(A) op(B) + beta C, fp32 accumulation in k order. */
template <class GA, class GB>
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, GA a, int lda, GB b, int ldb,
          float beta, float *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                size_t ia = ta == CUBLAS_OP_N ? (size_t)i + (size_t)p * lda : (size_t)p + (size_t)i * lda;
                size_t ib = tb == CUBLAS_OP_N ? (size_t)p + (size_t)j * ldb : (size_t)j + (size_t)p * ldb;
                acc += a(ia) * b(ib);
            }
            float *cc = c + (size_t)i + (size_t)j * ldc;
            *cc = alpha * acc + (beta == 0.0f ? 0.0f : beta * *cc);
        }
}

} /* namespace */

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasContext{NULL};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!ld_ok(ta, tb, m, n, k, lda, ldb, ldc) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    gemm(ta, tb, m, n, k, *alpha, [A](size_t i) { return A[i]; }, lda, [B](size_t i) { return B[i]; }, ldb, *beta,
         C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!ld_ok(ta, tb, m, n, k, lda, ldb, ldc) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* fp32 scalars go with the 32F compute types */
    if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_FAST_16BF && ct != CUBLAS_COMPUTE_32F_FAST_TF32)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (Ctype != CUDA_R_32F || Atype != Btype || (Atype != CUDA_R_16BF && Atype != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    float al = *(const float *)alpha, be = *(const float *)beta;
    if (Atype == CUDA_R_16BF)
        gemm(ta, tb, m, n, k, al, [A](size_t i) { return bf16(A, i); }, lda, [B](size_t i) { return bf16(B, i); },
             ldb, be, (float *)C, ldc);
    else
        gemm(ta, tb, m, n, k, al, [A](size_t i) { return ((const float *)A)[i]; }, lda,
             [B](size_t i) { return ((const float *)B)[i]; }, ldb, be, (float *)C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument (cuemu's cuBLAS)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported (cuemu's cuBLAS)";
    default: return "cuemu's cuBLAS";
    }
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    *value = type == MAJOR_VERSION ? CUBLAS_VER_MAJOR : type == MINOR_VERSION ? CUBLAS_VER_MINOR : CUBLAS_VER_PATCH;
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
