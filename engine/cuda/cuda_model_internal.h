/* cuda_model_internal.h (internal to cuda_model.cu and cuda_dense.cu): the
 * seeded hash their kernels draw every value from — cpu_kernels.h's
 * cpu_hash64 and cpu_model.c's hash_unit, as __host__ __device__ code, so
 * that the two backends compute the same model — and the launch check. */
#ifndef LOADLAW_CUDA_MODEL_INTERNAL_H
#define LOADLAW_CUDA_MODEL_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

__host__ __device__ static inline uint64_t hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Seeded uniform in [-1, 1) (cpu_model.c's hash_unit). */
__host__ __device__ static inline float hash_unit(uint64_t h)
{
    return (float)((int64_t)(h >> 11) - (1ll << 52)) / (float)(1ll << 52);
}

/* The launch just made: 0, or its cudaError_t (a refused configuration;
 * what goes wrong while the kernel runs comes with a later synchronisation). */
static inline int launched(void)
{
    return (int)cudaGetLastError();
}

#endif
