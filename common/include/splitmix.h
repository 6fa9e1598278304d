/* splitmix.h: the seeded hash every deterministic choice in loadlaw draws
 * from, defined once for host C (common/rng.c's seeding, the cpu backend,
 * the tests) and the CUDA device code (engine/cuda/cuda_model.cu,
 * cuda_dense.cu): under nvcc each function is __host__ __device__, elsewhere
 * plain static inline C, as engine/numfmt.h does for the number formats.
 * The cpu and cuda backends compute the same model because both take every
 * seeded value (KV rows, weights, the top-k stand-in, sampling) from here.
 *
 *   ll_splitmix64(x)  splitmix64's output for state x (Steele, Lea and Flood,
 *                     2014): x + LL_SPLITMIX_GAMMA through the finaliser.
 *                     A generator steps its state by LL_SPLITMIX_GAMMA.
 *   ll_hash_unit(h)   a uniform float in [-1, 1) from h's top 53 bits.
 *
 * Header-only, no dependencies: a bare GPU build (tests/cuda/refshim) can
 * include it with the CUDA toolkit alone. */
#ifndef LOADLAW_SPLITMIX_H
#define LOADLAW_SPLITMIX_H

#include <stdint.h>

#ifdef __CUDACC__
#define SPLITMIX_FN __host__ __device__ static inline
#else
#define SPLITMIX_FN static inline
#endif

#define LL_SPLITMIX_GAMMA 0x9e3779b97f4a7c15ull

SPLITMIX_FN uint64_t ll_splitmix64(uint64_t x)
{
    x += LL_SPLITMIX_GAMMA;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

SPLITMIX_FN float ll_hash_unit(uint64_t h)
{
    return (float)((int64_t)(h >> 11) - (1ll << 52)) / (float)(1ll << 52);
}

#undef SPLITMIX_FN

#endif
