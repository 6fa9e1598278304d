/* The naive fit in bounded memory (fit/naive.c): below its bound it is
 * fit_line to the bit; past it, from running sums, it must give fit_line's
 * line, HC3 errors, R2 and residual sd on the same points to 1e-9 relative
 * (leaving out the HC3 leverage term alone would miss by ~1/n = 1e-6), and
 * count distinct N exactly up to its set's bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_errno.h>
#include "common.h"
#include "fit_internal.h"
#include "testutil.h"

static uint64_t rng = 0x5eed42;

static double uniform(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Points like a run's samples: levels of rising N (so the first points,
 * which set the sums' centre, are not like the rest), step time 2.6 + 1.5 N
 * ms with noise that grows with N and a few stalls; frac: the share of
 * samples whose N is a time-average (not an integer). */
static void make_points(double *x, double *y, size_t n, double frac)
{
    for (size_t i = 0; i < n; i++) {
        double c = 1 + (double)(64 * i / n);
        x[i] = uniform() < frac ? c - uniform() : c;
        double noise = (uniform() - 0.5) * 0.2 * (2.6 + 1.5 * x[i]);
        y[i] = 2.6 + 1.5 * x[i] + noise + (uniform() < 0.001 ? 40 : 0);
    }
}

static int rel_near(double got, double want, double tol)
{
    return fabs(got - want) <= tol * fabs(want);
}

static void check_against_line(const char *what, const double *x, const double *y, size_t n, size_t keep,
                               size_t *n_distinct, int *full)
{
    fit_law want, got;
    fit_naive nv;
    char err[128];
    CHECK(fit_line(x, y, n, 0, &want, err, sizeof err) == 0 && want.ok, "%s: fit_line", what);
    fit_naive_init(&nv, keep);
    for (size_t i = 0; i < n; i++)
        CHECK(fit_naive_add(&nv, x[i], y[i]) == 0, "%s: add", what);
    CHECK(nv.summed == (n > keep), "%s: summed %d", what, nv.summed);
    *full = nv.distinct_full;
    CHECK(fit_naive_finish(&nv, &got, err, sizeof err) == 0 && got.ok, "%s: finish", what);
    *n_distinct = got.n_distinct;
    if (n <= keep) {
        CHECK(memcmp(&got, &want, sizeof got) == 0, "%s: below the bound, fit_line's result to the bit", what);
        return;
    }
    const double tol = 1e-9;
    CHECK(rel_near(got.a_ms, want.a_ms, tol), "%s: a %.15g vs %.15g", what, got.a_ms, want.a_ms);
    CHECK(rel_near(got.b_ms, want.b_ms, tol), "%s: b %.15g vs %.15g", what, got.b_ms, want.b_ms);
    CHECK(rel_near(got.a_se_ms, want.a_se_ms, tol), "%s: se(a) %.15g vs %.15g", what, got.a_se_ms, want.a_se_ms);
    CHECK(rel_near(got.b_se_ms, want.b_se_ms, tol), "%s: se(b) %.15g vs %.15g", what, got.b_se_ms, want.b_se_ms);
    CHECK(rel_near(got.cov_ab_ms2, want.cov_ab_ms2, tol), "%s: cov %.15g vs %.15g", what, got.cov_ab_ms2,
          want.cov_ab_ms2);
    CHECK(rel_near(got.r2, want.r2, tol), "%s: r2 %.15g vs %.15g", what, got.r2, want.r2);
    CHECK(rel_near(got.resid_sd_ms, want.resid_sd_ms, tol), "%s: sd %.15g vs %.15g", what, got.resid_sd_ms,
          want.resid_sd_ms);
    CHECK(rel_near(got.b_ci_ms[0], want.b_ci_ms[0], tol) && rel_near(got.a_ci_ms[1], want.a_ci_ms[1], tol),
          "%s: intervals", what);
    CHECK(got.t_crit == want.t_crit && got.n_points == n && got.n_samples == n, "%s: dof and counts", what);
    if (!*full)
        CHECK(got.n_distinct == want.n_distinct, "%s: distinct N %zu vs %zu", what, got.n_distinct,
              want.n_distinct);
}

int main(void)
{
    gsl_set_error_handler_off();
    const size_t n = 400000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    size_t nd;
    int full;
    CHECK(x && y, "memory");
    make_points(x, y, n, 0.01);
    check_against_line("below the bound", x, y, 3000, 4096, &nd, &full);
    check_against_line("integer-ish N, sums", x, y, n, 4096, &nd, &full);
    CHECK(!full && nd > 64 && nd < FIT_NAIVE_DISTINCT, "distinct N counted exactly: %zu", nd);
    make_points(x, y, n, 0.5);
    check_against_line("fractional N, sums", x, y, n, 4096, &nd, &full);
    CHECK(full && nd == FIT_NAIVE_DISTINCT, "distinct N past the set's bound: %zu, full %d", nd, full);
    free(x);
    free(y);
    TEST_MAIN_END();
}
