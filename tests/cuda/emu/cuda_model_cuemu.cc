/* cuda_model_cuemu.cc: engine/cuda/cuda_model.cu, the source nvcc compiles,
 * compiled as host C++ for cuemu (cuemu.h): the backend's own kernels
 * (weights, KV fill, embed, projection, top-k, head mean, sampling) run on
 * the CPU, cuBLAS is cublas_cuemu.cc (LOADLAW_CUBLAS_LIB). */
#include "cuda_model.cu"
