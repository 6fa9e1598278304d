/* fuzz_util.h (tests/fuzz/ only): what every harness shares.
 *
 * The loaders under test take a path (they stream files), so an input is handed
 * to them through an in-memory file: memfd_create plus its /proc/self/fd name,
 * no disk traffic and nothing to clean up after a crash (harnesses are built
 * with _GNU_SOURCE for memfd_create and open_memstream). A violated property
 * ends the run with FUZZ_CHECK, which prints the condition and aborts so that
 * libFuzzer saves the input, exactly as a sanitizer report would.
 */
#ifndef LOADLAW_FUZZ_UTIL_H
#define LOADLAW_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define FUZZ_CHECK(cond)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

/* libFuzzer calls this once before the first input. The loaders warn on
 * stderr about what they skip (a truncated last line, ...): at tens of
 * thousands of inputs a second that is most of the run's time and log, so
 * only sanitizer reports and FUZZ_CHECK failures are printed. A harness may
 * define FUZZ_INIT() (before including this file) for what its library
 * expects main to have done. */
#ifndef FUZZ_INIT
#define FUZZ_INIT() ((void)0)
#endif
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ll_log_level = -1;
    FUZZ_INIT();
    return 0;
}

/* An in-memory file holding data; *path gets its name. Returns the fd (close
 * it when done) or -1. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* 1 when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF). */
static inline int fuzz_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xbf;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0)
                lo = 0xa0;
            if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0)
                lo = 0x90;
            if (c == 0xf4)
                hi = 0x8f;
        } else {
            return 0;
        }
        if (i + k >= n)
            return 0;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= k; j++)
            if ((p[i + j] & 0xc0) != 0x80)
                return 0;
        i += k + 1;
    }
    return 1;
}

/* A NUL-terminated copy of the input (the parsers take C strings); caller frees. */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return NULL;
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
