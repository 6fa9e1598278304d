/* cuda_attn_cuemu.cc: engine/cuda/cuda_attn.cu, cuda_attn_naive.cu and
 * cuda_attn_v2.cu, the sources nvcc compiles, compiled as host C++ for cuemu (cuemu.h): the
 * kernels run on the CPU. */
#include "cuda_attn.cu"
#include "cuda_attn_naive.cu"
#include "cuda_attn_v2.cu"
