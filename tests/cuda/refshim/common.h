/* refshim/common.h: what engine/cpu/attn_ref.c needs from common/common.h
 * (error codes and ll_errf), without cJSON and the records module, so the
 * CUDA tests and benchmark compile the reference itself on a bare GPU machine
 * that has only the CUDA toolkit. Used ONLY by tests/cuda and bench/cuda
 * targets, which never link ll_common. The codes match common.h's. */
#ifndef LOADLAW_COMMON_H
#define LOADLAW_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

enum { LL_OK = 0, LL_ENOMEM = -1, LL_EINVAL = -2 };

static inline void ll_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif
