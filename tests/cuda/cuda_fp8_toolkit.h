/* cuda_fp8_toolkit.h: the CUDA toolkit's own e4m3 conversions on the host
 * (cuda_fp8_toolkit.cu), for the CPU test test_cuda_kv_host. */
#ifndef LOADLAW_CUDA_FP8_TOOLKIT_H
#define LOADLAW_CUDA_FP8_TOOLKIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* __nv_cvt_fp8_to_halfraw(code, __NV_E4M3) as a float: the toolkit's
 * definition of the conversion the kernels use (host path of cuda_fp8.hpp). */
float cuda_fp8_toolkit_e4m3_to_f32(uint8_t code);
/* __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3): round to nearest
 * even, saturating (what the backend's device-side cache fill uses). */
uint8_t cuda_fp8_toolkit_f32_to_e4m3(float x);

#ifdef __cplusplus
}
#endif

#endif
