/* cuda_model_internal.h (internal to cuda_model.cu and cuda_dense.cu): the
 * seeded hash their kernels draw every value from (splitmix.h, shared with
 * the cpu backend, so that the two backends compute the same model) and the
 * launch check. */
#ifndef LOADLAW_CUDA_MODEL_INTERNAL_H
#define LOADLAW_CUDA_MODEL_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "splitmix.h"

/* The launch just made: 0, or its cudaError_t (a refused configuration;
 * what goes wrong while the kernel runs comes with a later synchronisation). */
static inline int launched(void)
{
    return (int)cudaGetLastError();
}

#endif
