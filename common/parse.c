/* parse.c: checked number parsing with unit suffixes ("30s", "2m", "4k"). */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int ll_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v))
        return LL_EINVAL;
    *out = v;
    return 0;
}

int ll_parse_int64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return LL_EINVAL;
    *out = v;
    return 0;
}

int ll_parse_count(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return LL_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return LL_EINVAL;
    uint64_t mul = 1;
    if (*end) {
        int bin = end[1] == 'i' || end[1] == 'I';
        switch (*end) {
        case 'k': case 'K': mul = bin ? 1024ULL : 1000ULL; break;
        case 'm': case 'M': mul = bin ? 1048576ULL : 1000000ULL; break;
        case 'g': case 'G': mul = bin ? 1073741824ULL : 1000000000ULL; break;
        default: return LL_EINVAL;
        }
        if (end[1 + bin] != '\0')
            return LL_EINVAL;
    }
    if (v > UINT64_MAX / mul)
        return LL_ERANGE;
    *out = v * mul;
    return 0;
}

int ll_parse_duration_s(const char *s, double *out_s)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return LL_EINVAL;
    double mul;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mul = 1;
    else if (strcmp(end, "ms") == 0)
        mul = 1e-3;
    else if (strcmp(end, "us") == 0)
        mul = 1e-6;
    else if (strcmp(end, "ns") == 0)
        mul = 1e-9;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mul = 60;
    else if (strcmp(end, "h") == 0)
        mul = 3600;
    else
        return LL_EINVAL;
    /* "1e308h" is finite before the unit and infinite after it. */
    if (!isfinite(v * mul))
        return LL_ERANGE;
    *out_s = v * mul;
    return 0;
}

int ll_parse_int_list(const char *s, int **out, size_t *n)
{
    if (!s || !*s)
        return LL_EINVAL;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int *v = malloc(cap * sizeof *v);
    if (!v)
        return LL_ENOMEM;
    size_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || x <= 0 || x > 1000000 || (*end != ',' && *end != '\0')) {
            free(v);
            return LL_EINVAL;
        }
        v[k++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            free(v);
            return LL_EINVAL;
        }
    }
    *out = v;
    *n = k;
    return 0;
}
