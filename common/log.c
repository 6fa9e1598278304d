/* log.c: diagnostics to stderr, error codes and message buffers. */
#include "common.h"

#include <stdio.h>
#include <string.h>

int ll_log_level = LL_LOG_WARN;

const char *ll_strerror(int code)
{
    switch (code) {
    case LL_OK: return "ok";
    case LL_ENOMEM: return "out of memory";
    case LL_EINVAL: return "invalid input";
    case LL_EIO: return "I/O error";
    case LL_EPARSE: return "parse error";
    case LL_ERANGE: return "value out of range";
    case LL_ESYS: return "system call failed";
    case LL_EINTR: return "interrupted";
    default: return "unknown error";
    }
}

void ll_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void ll_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > ll_log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines from different threads do not interleave. */
    fprintf(stderr, "loadlaw: %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}
