/* A model's fit without its design matrix (fit/model_stream.c, taken past
 * FIT_MODEL_STREAM_MIN points) against GSL's fit (model_terms.c) on the same
 * points, for every shape of design the family uses: coefficients, RSS, BIC
 * and the HC3 errors agree to rounding (1e-9 relative; the errors' last
 * digits depend on the leverages, 1e-7). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_errno.h>
#include "common.h"
#include "fit_internal.h"
#include "model_internal.h"
#include "testutil.h"

static uint64_t rng = 0x5eed77;

static double uniform(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static int near(double got, double want, double rel, double scale)
{
    return fabs(got - want) <= rel * (fabs(want) > scale ? fabs(want) : scale);
}

static void check_kind(const char *what, fit_model_kind kind, double knee1, double knee2, const double *x,
                       const double *y, const double *k, size_t n)
{
    fit_model_fit g, s;
    double rss_g, rss_s;
    fit_model_fit_spec(&g, kind, knee1, knee2);
    fit_model_fit_spec(&s, kind, knee1, knee2);
    CHECK(fit_model_fit_run(&g, x, y, k, n, 1e-12, 1, &rss_g) == 0, "%s: GSL fit", what);
    CHECK(fit_model_fit_stream(&s, x, y, k, n, 1e-12, 1, &rss_s) == 0, "%s: streamed fit", what);
    CHECK(near(rss_s, rss_g, 1e-9, 0), "%s: rss %.15g vs %.15g", what, rss_s, rss_g);
    CHECK(fabs(s.bic - g.bic) < 1e-6, "%s: bic %.15g vs %.15g", what, s.bic, g.bic);
    for (size_t j = 0; j < g.p; j++) {
        CHECK(near(s.coef[j], g.coef[j], 1e-9, 1e-6), "%s: coef %zu %.15g vs %.15g", what, j, s.coef[j], g.coef[j]);
        CHECK(near(s.se[j], g.se[j], 1e-7, 0), "%s: se %zu %.15g vs %.15g", what, j, s.se[j], g.se[j]);
        for (size_t m = 0; m < g.p; m++)
            CHECK(near(s.cov[j][m], g.cov[j][m], 1e-7, 1e-7 * sqrt(fabs(g.cov[j][j] * g.cov[m][m]))),
                  "%s: cov %zu %zu", what, j, m);
    }
}

int main(void)
{
    gsl_set_error_handler_off();
    const size_t n = 300000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *k = malloc(n * sizeof *k);
    CHECK(x && y && k, "memory");
    if (!x || !y || !k)
        TEST_MAIN_END();
    /* levels N = 1..200 (not all on bucket sizes), K moving within a level,
     * a knee at 64, noise growing with the step and a few stalls */
    for (size_t i = 0; i < n; i++) {
        x[i] = 1 + (double)(i % 200);
        k[i] = 1000 * x[i] * (0.5 + uniform());
        double law = 3 + 0.4 * x[i] + (x[i] > 64 ? 0.3 * (x[i] - 64) : 0) + 0.002 * k[i] / 1000;
        y[i] = law * (1 + 0.1 * (uniform() - 0.5)) + (uniform() < 0.001 ? 30 : 0);
    }
    check_kind("linear", FIT_MODEL_LINEAR, NAN, NAN, x, y, NULL, n);
    check_kind("quadratic", FIT_MODEL_QUADRATIC, NAN, NAN, x, y, NULL, n);
    check_kind("knee", FIT_MODEL_PIECEWISE, 64, NAN, x, y, NULL, n);
    check_kind("two knees", FIT_MODEL_KNEES2, 32, 128, x, y, NULL, n);
    check_kind("context", FIT_MODEL_CONTEXT, NAN, NAN, x, y, k, n);
    check_kind("knee+context", FIT_MODEL_KNEE_CONTEXT, 64, NAN, x, y, k, n);
    check_kind("buckets+context", FIT_MODEL_BUCKETS_CONTEXT, NAN, NAN, x, y, k, n);
    free(x);
    free(y);
    free(k);
    TEST_MAIN_END();
}
