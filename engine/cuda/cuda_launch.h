/* cuda_launch.h (internal to engine/cuda/): how the .cu files launch a
 * kernel, LAUNCH(kernel, grid, block, smem, stream)(args...): nvcc's
 * <<<grid, block, smem, stream>>>, or, when the file is compiled as host
 * C++ with -DCUEMU, the launcher of cuemu, the CPU emulation the tests run
 * the kernels' own source with (tools/cuemu/cuemu.h). */
#ifndef LOADLAW_CUDA_LAUNCH_H
#define LOADLAW_CUDA_LAUNCH_H

#ifdef CUEMU
#include "cuemu.h"
#define LAUNCH(k, grid, block, smem, stream) CUEMU_LAUNCH(k, grid, block, smem, stream)
#else
#define LAUNCH(k, grid, block, smem, stream) k<<<grid, block, smem, stream>>>
#endif

#endif
