/* testutil.h: the few macros every loadlaw test uses.
 *
 * CHECK(cond, fmt, ...) records a failure with file:line and a message and goes
 * on; TEST_MAIN_END prints "N passed, N failed" (read by CI) and returns 1 on
 * any failure. Tests that cannot run here (no GPU) return TEST_SKIP (77), which
 * ctest reports as skipped through SKIP_RETURN_CODE. */
#ifndef LOADLAW_TESTUTIL_H
#define LOADLAW_TESTUTIL_H

#include <math.h>
#include <stdio.h>

#define TEST_SKIP 77

/* One file's counters; a test of several files defines TESTUTIL_SHARED
 * (all of them) and TESTUTIL_COUNTERS in the one that owns the counters. */
#if defined(TESTUTIL_COUNTERS)
int tu_pass, tu_fail;
#elif defined(TESTUTIL_SHARED)
extern int tu_pass, tu_fail;
#else
static int tu_pass, tu_fail;
#endif

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            tu_pass++;                                                         \
        } else {                                                               \
            tu_fail++;                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* |got - want| <= tol */
#define CHECK_NEAR(got, want, tol, what)                                       \
    CHECK(fabs((double)(got) - (double)(want)) <= (double)(tol),              \
          "%s: got %.9g want %.9g (tol %.3g)", what, (double)(got), (double)(want), (double)(tol))

/* |got/want - 1| <= rel */
#define CHECK_REL(got, want, rel, what)                                        \
    CHECK(fabs((double)(got) / (double)(want) - 1.0) <= (double)(rel),        \
          "%s: got %.9g want %.9g (rel %.3g)", what, (double)(got), (double)(want), (double)(rel))

#define TEST_MAIN_END()                                                        \
    do {                                                                       \
        printf("%d passed, %d failed\n", tu_pass, tu_fail);                    \
        return tu_fail ? 1 : 0;                                                \
    } while (0)

#endif
