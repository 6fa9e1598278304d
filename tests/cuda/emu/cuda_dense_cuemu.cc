/* cuda_dense_cuemu.cc: engine/cuda/cuda_dense.cu, the source nvcc compiles,
 * compiled as host C++ for cuemu (cuemu.h): the weights' kernels and the
 * head reductions run on the CPU, cuBLAS is cublas_cuemu.cc (opened through
 * LOADLAW_CUBLAS_LIB, as the real one is). */
#include "cuda_dense.cu"
