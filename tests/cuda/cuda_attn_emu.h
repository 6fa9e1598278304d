/* cuda_attn_emu.h: the tiled kernel and its combine emulated on the host,
 * lane by lane (cuda_attn_emu.c), and the CUDA toolkit's own e4m3 decode on
 * the host (cuda_fp8_toolkit.cu), for the CPU test test_cuda_kv_host. */
#ifndef LOADLAW_CUDA_ATTN_EMU_H
#define LOADLAW_CUDA_ATTN_EMU_H

#include <stdint.h>

#include "cuda_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuda_attn_decode(CUDA_ATTN_TILED, a, sm_count) with HOST pointers in a:
 * same plan, same per-lane arithmetic. 0, or -1 (bad args, out of memory). */
int cuda_attn_tiled_emulate(const cuda_attn_args *a, int sm_count);

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
