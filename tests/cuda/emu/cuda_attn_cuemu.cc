/* cuda_attn_cuemu.cc: engine/cuda/cuda_attn.cu, the source nvcc compiles,
 * compiled as host C++ for cuemu (cuemu.h): the kernels run on the CPU. */
#include "cuda_attn.cu"
