/* cuda_model_cuemu.cc: engine/cuda/cuda_model.cu, the source nvcc compiles,
 * compiled as host C++ for cuemu (cuemu.h): the backend's per-element
 * kernels (KV fill, embed, projection, top-k, sampling) run on the CPU; the
 * dense part is cuda_dense_cuemu.cc. */
#include "cuda_model.cu"
