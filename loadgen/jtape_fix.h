/* jtape_fix.h: inside the JSON tape (jtape.c, jtape_fix.c), not for other
 * callers: the SWAR byte tests both passes use, and the rewrite that makes an
 * event safe for cJSON. */
#ifndef LL_JTAPE_FIX_H
#define LL_JTAPE_FIX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* SWAR tests over 8 bytes: whether any is zero, any is < 0x20 (no false
 * negatives; a hit only sends the caller to its byte loop). */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
static inline uint64_t has_zero(uint64_t v)
{
    return (v - ONES) & ~v & HIGHS;
}

/* A byte that ends a plain run of string: '"', '\\' or a control byte. */
static inline int has_special(const char *q)
{
    uint64_t v;
    memcpy(&v, q, 8);
    return (has_zero(v ^ (ONES * '"')) | has_zero(v ^ (ONES * '\\')) | ((v - ONES * 0x20) & ~v & HIGHS)) != 0;
}

/* The event p[0..len) as cJSON is to read it (jtape_fix.c says why): 0 with
 * *out NULL when it needs no rewrite, or *out a malloc'd rewrite of *out_len
 * bytes for the caller to free; -1 when it is not JSON, LL_ENOMEM. *ctl is
 * the first raw control byte inside a string, -1 when none. */
int lg_jfix(const char *p, size_t len, char **out, size_t *out_len, int *ctl);

#endif
