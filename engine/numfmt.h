/* numfmt.h (internal to engine/): the number formats of the KV cache and the
 * weights, defined once for the cpu backend (engine/cpu), the CUDA kernels'
 * host helpers (engine/cuda/cuda_kv_host.c) and the CUDA device code
 * (engine/cuda/cuda_model.cu, cuda_dense.cu): under nvcc every function is
 * __host__ __device__, elsewhere plain static inline C.
 *
 *   bf16  1 sign, 8 exponent, 7 mantissa bits: the top half of an fp32.
 *         f32_to_bf16 rounds to nearest, ties to even; a NaN stays a quiet
 *         NaN (its payload's top bits kept, the quiet bit set); infinities
 *         and fp32 subnormals round like any other value (no flush to zero).
 *   e4m3  OCP FP8 E4M3: bias 7, no infinities, 0x7f/0xff NaN, largest finite
 *         448 (0x7e), subnormals in units of 2^-9. f32_to_e4m3 rounds to
 *         nearest, ties to even, and saturates (inf and |x| >= 448 -> 448):
 *         what __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) returns,
 *         which device code calls instead (one cvt instruction);
 *         tests/cuda/test_cuda_kv_host checks the two agree on every tie.
 *
 * Bit patterns of the edge cases: tests/engine/test_numfmt.c.
 */
#ifndef LOADLAW_ENGINE_NUMFMT_H
#define LOADLAW_ENGINE_NUMFMT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp8.h>
#define NUMFMT_FN __host__ __device__ static inline
#else
#define NUMFMT_FN static inline
#endif

NUMFMT_FN float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

NUMFMT_FN uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

NUMFMT_FN uint8_t f32_to_e4m3(float x)
{
#ifdef __CUDA_ARCH__
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint8_t sign = (u >> 31) ? 0x80 : 0;
    u &= 0x7fffffffu;
    if (u > 0x7f800000u)
        return sign | 0x7f; /* NaN stays NaN */
    if (u >= 0x43e00000u)   /* >= 448 (and inf): saturate */
        return sign | 0x7e;
    int e = (int)(u >> 23) - 127;
    uint32_t m = u & 0x7fffffu;
    if (e < -6) { /* subnormal: RNE in units of 2^-9; q = 8 is the smallest normal */
        if (e < -11)
            return sign; /* < 2^-11, a quarter unit: rounds to zero */
        uint32_t full = m | 0x800000u; /* value = full * 2^(e-23) = (full >> (14-e)) units */
        int sh = 14 - e;               /* 21..25 */
        uint32_t q = full >> sh, rem = full & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint8_t)q;
    }
    uint32_t keep = m >> 20, rem = m & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (keep & 1)))
        keep++;
    int code = ((e + 7) << 3) + (int)keep; /* keep == 8 carries into the exponent */
    if (code > 0x7e)
        code = 0x7e;
    return sign | (uint8_t)code;
#endif
}

/* Exact: every e4m3 value is an fp32 value. */
NUMFMT_FN float e4m3_to_f32(uint8_t c)
{
    uint32_t sign = (uint32_t)(c & 0x80) << 24, ex = (c >> 3) & 15u, m = c & 7u, u;
    if (ex == 15 && m == 7)
        u = sign | 0x7fc00000u;
    else if (ex == 0) { /* subnormal (or zero): m * 2^-9 */
        float f = (float)m * (1.0f / 512.0f);
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else
        u = sign | ((ex + 120u) << 23) | (m << 20); /* exponent ex - 7 + 127 */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#undef NUMFMT_FN

#endif
