/* cuda_fp8_toolkit.cu: host access to the toolkit's e4m3 decode (the host
 * path of cuda_fp8.hpp, which defines what cvt.rn.f16x2.e4m3x2 returns), so
 * test_cuda_kv_host can check cuda_kv_host.c's quantiser against it. */
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "cuda_fp8_toolkit.h"

extern "C" float cuda_fp8_toolkit_e4m3_to_f32(uint8_t code)
{
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3);
    return __half2float(__half(h));
}

extern "C" uint8_t cuda_fp8_toolkit_f32_to_e4m3(float x)
{
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
