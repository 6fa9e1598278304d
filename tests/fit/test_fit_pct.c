/* A level's latency figures past a bound (fit/figures.c "Past a bound"):
 * collected with a small bound, a kind past it comes from a histogram whose
 * percentiles lie within LL_PCT_REL_ERR of the exact order statistics of the
 * same values, its count, mean and max those of every value; a kind under
 * the bound is the very same sorted values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gsl/gsl_errno.h>
#include "common.h"
#include "fit.h"
#include "fit_internal.h"
#include "sim.h"
#include "testutil.h"

static void check_hist(const char *what, ll_pct *h, const fit_double_vec *exact)
{
    size_t n = exact->n;
    CHECK(h && ll_pct_count(h) == n, "%s: %zu values in the histogram", what, h ? ll_pct_count(h) : 0);
    if (!h || !n)
        return;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += exact->v[i];
    CHECK(fabs(ll_pct_mean(h) / (sum / (double)n) - 1) < 1e-12, "%s: mean %.15g vs %.15g", what, ll_pct_mean(h),
          sum / (double)n);
    CHECK(ll_pct_max(h) == exact->v[n - 1], "%s: max", what);
    const double qs[] = {0.5, 0.9, 0.99};
    for (size_t k = 0; k < 3; k++) {
        double at = exact->v[(size_t)floor(qs[k] * (double)(n - 1))];
        double got = ll_pct_quantile(h, qs[k]);
        CHECK(fabs(got / at - 1) <= LL_PCT_REL_ERR + 1e-12, "%s: p%g %.6g vs the order statistic %.6g", what,
              100 * qs[k], got, at);
    }
}

int main(void)
{
    gsl_set_error_handler_off();
    char dir[] = "fit_pct_XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    sim_cfg c;
    sim_default(&c);
    int cs[] = {16};
    sim_set_levels(&c, cs, 1, 25); /* 400 requests of 200 tokens: ~80k ITL values */
    c.max_tokens = 200;
    c.jitter_frac = 0.3;
    c.jitter_kind = SIM_JITTER_LOGNORMAL;
    c.prefill_per_step = 2;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    CHECK(sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err) == 0, "%s", err);
    if (!run || !r)
        TEST_MAIN_END();
    fit_size_vec idx = {0};
    for (size_t i = 0; i < fit_run_n_requests(run); i++)
        CHECK(ll_vec_push(&idx, i) == 0, "memory");
    fit_latency_samples all, bounded;
    CHECK(fit_latency_collect(run, idx.v, idx.n, 0, &all) == 0, "every value");
    CHECK(fit_latency_collect(run, idx.v, idx.n, 5000, &bounded) == 0, "bounded at 5000");
    CHECK(all.itl.n > 50000 && !all.hist[3], "ITL: %zu values kept", all.itl.n);
    CHECK(bounded.itl.n == 0, "ITL past the bound: no values held (%zu)", bounded.itl.n);
    check_hist("ITL", bounded.hist[3], &all.itl);
    CHECK(!bounded.hist[0] && bounded.ttft.n == all.ttft.n && all.ttft.n > 300 &&
              memcmp(bounded.ttft.v, all.ttft.v, all.ttft.n * sizeof *all.ttft.v) == 0,
          "TTFT under the bound: the same sorted values");
    /* the figures the level prints agree with a histogram's, within its error */
    CHECK(fabs(r->levels[0].itl.p99_ms / ll_pct_quantile(bounded.hist[3], 0.99) - 1) < 2 * LL_PCT_REL_ERR,
          "level ITL p99 %.6g against the histogram's", r->levels[0].itl.p99_ms);
    CHECK(r->levels[0].dist_hist == 0, "a level under FIT_PCT_EXACT is exact");
    fit_latency_free(&all);
    fit_latency_free(&bounded);
    CHECK(fit_latency_collect(run, idx.v, idx.n, 100, &bounded) == 0 && fit_latency_collect(run, idx.v, idx.n, 0, &all) == 0,
          "bounded at 100");
    check_hist("TTFT", bounded.hist[0], &all.ttft);
    check_hist("E2E", bounded.hist[4], &all.e2e);
    fit_latency_free(&all);
    fit_latency_free(&bounded);
    ll_vec_free(&idx);
    fit_result_free(r);
    fit_run_free(run);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tu_fail == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
