/* test_fit_e2e.c: the fit validated end to end against the bundled synthetic
 * engine. `loadlaw sweep` starts the engine in-process with a law drawn at
 * random (fixed seed; a in [1, 100] ms, b in [0.1, 50] ms, uniform; jitter on),
 * drives it over HTTP through levels 1..16, and writes records; this test then
 * fits those records with the library and compares with the truth in the
 * engine's scaled units. A last case has a heavy prefill cost, where a naive
 * fit over all gaps is visibly biased and the steady fit is not.
 * A knee down on a quiet engine (test_knee_down): no level trimmed whole.
 * argv[1]: the loadlaw binary. Each case is kept to about 2 s of engine time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "testutil.h"

#define N_RANDOM 6
#define MAX_TOKENS 16
#define CASE_BUDGET_MS 2000.0
/* The recovered law is what the tool promises: b within 5%, a within 10%.
 * The per-level checks ride on real time, and on a loaded machine (ctest -j,
 * other jobs: load 8-20 on 2 cores seen) a client that falls behind reads a
 * level's chunks in bursts (median gap 0.02 ms once, under ASan) or a stall
 * lands in a level (29 ms median against 9.6), while the law, fitted on all
 * levels with robust weights, stays within 1-4%. So they are held in most
 * levels: MEAN_CLOSE_FRAC of levels with mean steady throughput within 5% of
 * the law, STEP_CLOSE_FRAC with the median step within 5% of the law and of
 * the engine's, and at most GROSS_MAX levels off by more than 25% (typically
 * 35/35, 35/35 and 0). The ASan build, which is there to find memory errors,
 * has a client several times slower and gets more room, also on the law
 * (b -5.6% seen, its interval still covering the truth). */
#if defined(__SANITIZE_ADDRESS__)
#define MEAN_CLOSE_FRAC 0.5
#define STEP_CLOSE_FRAC 0.7
#define GROSS_MAX 5
#define B_TOL 0.10
#define A_TOL 0.20
#else
#define MEAN_CLOSE_FRAC 0.7
#define STEP_CLOSE_FRAC 0.8
#define GROSS_MAX 3
#define B_TOL 0.05
#define A_TOL 0.10
#endif
/* The engine's steps stay on the law on a busy host ("engine steps" below:
 * within 2% and 5%), but its I/O threads hand the tokens to the sockets late
 * by a varying amount, and with steps of 1-5 ms that moves the client's point
 * estimates by more than B_TOL/A_TOL (b -11% and a -11% seen under ctest -j8
 * beside a build, each with its 95% interval covering the truth). So an
 * estimate passes within its tolerance, or else when its own interval covers
 * the truth and is no wider than +-CI_MAX of `scale`: a fit that is unsure
 * must say so, and still be near. The scales are the steps the fit sees, not
 * a or b alone, which may be small beside them: for a the smallest step,
 * a + b (C = 1), from which the intercept is extrapolated (a = 0.61 ms beside
 * b = 1.91 ms in case 0: a -29%, interval +-43% of a, +-10% of a + b); for
 * b the largest step per stream, a / 16 + b (C = 16: b = 0.53 ms beside
 * a = 5.5 ms in case 5: b -5.7%, interval +-30% of b, +-18% of that), both
 * seen with three busy loops beside ctest -j8. */
#define CI_MAX 0.25

static int near_truth(double est, const double ci[2], double truth, double scale, double tol)
{
    if (fabs(est / truth - 1) <= tol)
        return 1;
    return ci[0] <= truth && truth <= ci[1] && (ci[1] - ci[0]) / 2 <= CI_MAX * scale;
}

static const char *bin;
static char dir[64];

typedef struct e2e_case {
    double a_ms, b_ms, p_ms_per_tok, scale, jitter;
    int prefill_budget_tok; /* 0: the engine's default */
} e2e_case;

/* Engine time of a sweep 1,2,4,8,16 with sweep's default requests per level
 * max(1.5C, 8): about MAX_TOKENS steps per round, 8,4,2,1,1.5 rounds. */
static double sweep_ms(const e2e_case *c)
{
    int cs[] = {1, 2, 4, 8, 16};
    double t = 0;
    for (int i = 0; i < 5; i++) {
        double n = 1.5 * cs[i] < 8 ? 8 : 1.5 * cs[i];
        t += n / cs[i] * MAX_TOKENS * (c->a_ms + c->b_ms * cs[i]);
    }
    return t;
}

/* The value as the engine spec will carry it (%.6g), so the truth is exact. */
static double spec_round(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return strtod(b, NULL);
}

static void tail_file(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tail -n 15 '%s' >&2", path);
    if (system(cmd) != 0)
        fprintf(stderr, "(no log)\n");
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median duration (ms) of the engine's decode-only steps with n = C that
 * started inside level L; NAN when there are none. */
static double engine_median_step_ms(const fit_run *run, const fit_level *L)
{
    size_t n = fit_run_n_steps(run), m = 0;
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (!d)
        return NAN;
    for (size_t i = 0; i < n; i++) {
        const ll_rec_step *s = fit_run_step(run, i);
        if (s->start_ns >= L->start_ns && s->start_ns < L->end_ns && s->n_decode == L->concurrency &&
            s->prefill_tok == 0)
            d[m++] = s->dur_ns / 1e6;
    }
    double med = NAN;
    if (m) {
        qsort(d, m, sizeof *d, cmp_dbl);
        med = m % 2 ? d[m / 2] : (d[m / 2 - 1] + d[m / 2]) / 2;
    }
    free(d);
    return med;
}

/* Run one sweep and fit it. Returns the result or NULL (checks recorded). */
static fit_result *sweep_and_fit(int k, const e2e_case *c, fit_run **run_out)
{
    char out[128], log[160], cmd[1024], law[128], extra[64] = "";
    snprintf(out, sizeof out, "%s/case%d", dir, k);
    snprintf(log, sizeof log, "%s/case%d.log", dir, k);
    if (c->p_ms_per_tok > 0)
        snprintf(law, sizeof law, "%.6g+%.6gn+%.6gp", c->a_ms, c->b_ms, c->p_ms_per_tok);
    else
        snprintf(law, sizeof law, "%.6g+%.6gn", c->a_ms, c->b_ms);
    if (c->prefill_budget_tok > 0)
        snprintf(extra, sizeof extra, ",prefill_budget=%d", c->prefill_budget_tok);
    snprintf(cmd, sizeof cmd,
             "'%s' sweep '%s/e2e.json' --engine 'backend=synthetic,law=%s,time_scale=%.6g,jitter=%.3g,seed=%d%s' "
             "-c 1,2,4,8,16 --max-tokens %d --think-tokens 4 --seed %d --no-report -q -o '%s' >'%s' 2>&1",
             bin, dir, law, c->scale, c->jitter, 11 + k, extra, MAX_TOKENS, 5 + k, out, log);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECK(rc == 0, "case %d: sweep exit %d: %s", k, rc, cmd);
    if (rc != 0) {
        tail_file(log);
        return NULL;
    }
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    if (fit_load_run(out, &run, err, sizeof err)) {
        CHECK(0, "case %d: load: %s", k, err);
        return NULL;
    }
    if (fit_analyze(run, NULL, &res, err, sizeof err)) {
        CHECK(0, "case %d: analyze: %s", k, err);
        fit_run_free(run);
        return NULL;
    }
    *run_out = run;
    return res;
}

/* A knee down on a quiet engine: 10 + 10N ms, 5 ms per N above N = 8, at time
 * scale 0.1 (about 6 s). The levels above the knee are real: their steps are
 * far from a line through C <= 8 only because the line misses them, and
 * each level's own spread is tiny. The trimming once left out nearly every
 * step of C = 12, 16 and 24 as outliers and gave b = 0.995 ms (the slope
 * below the knee; OLS 0.743, truth 0.5 above N = 8) and a ceiling of 1004
 * tok/s against a true 2000. Now no level's bulk goes, and the law's slope
 * sits by OLS's, with its misfit in the levels' err %. */
static void test_knee_down(void)
{
    char out[128], log[160], cmd[1024];
    snprintf(out, sizeof out, "%s/knee", dir);
    snprintf(log, sizeof log, "%s/knee.log", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' sweep --engine 'law=10+10n,knee=8:5,time_scale=0.1,seed=3' -c 1,2,4,8,12,16,24 -n 24 "
             "--max-tokens 32 --seed 3 --no-report -q -o '%s' >'%s' 2>&1",
             bin, out, log);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "knee sweep: %s", cmd);
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || fit_open(out, NULL, &run, &r, err, sizeof err)) {
        CHECK(0, "knee fit: %s", err);
        tail_file(log);
        return;
    }
    printf("knee down: law b %.4g ms (OLS %.4g), %zu of %zu points trimmed, C=24 err %+.1f%%\n",
           r->law.b_ms, r->ols.b_ms, r->law.n_trimmed, r->law.n_points,
           r->n_levels ? 100 * r->levels[r->n_levels - 1].error_rel : NAN);
    CHECK(r->law.ok && r->ols.ok, "knee: a law and OLS");
    CHECK(r->law.n_trimmed * 20 < r->law.n_points, "knee: %zu of %zu points trimmed (no level's bulk)",
          r->law.n_trimmed, r->law.n_points);
    CHECK(r->law.b_ms < 0.9 && fabs(r->law.b_ms - r->ols.b_ms) < 0.2 * r->ols.b_ms,
          "knee: law b %g ms beside OLS's %g, not the slope below the knee (1)", r->law.b_ms, r->ols.b_ms);
    CHECK(r->model.best == FIT_MODEL_PIECEWISE && fabs(r->model.knee_n - 8) <= 1 &&
              fabs(r->model.slope_after_ms - 0.5) < 0.1,
          "knee: the model finds it (%s at %g, slope after %g)", fit_model_name(r->model.best),
          r->model.knee_n, r->model.slope_after_ms);
    fit_result_free(r);
    fit_run_free(run);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_fit_e2e LOADLAW\n");
        return 2;
    }
    bin = argv[1];
    gsl_set_error_handler_off();
    snprintf(dir, sizeof dir, "fit_e2e_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* The cases are sized for 40-120-word prompts: the test's own scenario, so
     * a change to scenarios/default.json cannot move them. */
    char spath[128];
    snprintf(spath, sizeof spath, "%s/e2e.json", dir);
    FILE *sf = fopen(spath, "w");
    if (!sf) {
        perror(spath);
        return 1;
    }
    fputs("{\"name\": \"fit-e2e\", \"request\": {\"ignore_eos\": true},\n"
          " \"prompts\": {\"source\": \"synthetic\", \"words\": {\"dist\": \"uniform\", "
          "\"min\": 40, \"max\": 120}, \"count\": 256, \"seed\": 1}}\n", sf);
    fclose(sf);
    ll_rng rng;
    ll_rng_seed(&rng, 20261129);
    e2e_case cases[N_RANDOM + 1];
    for (int k = 0; k < N_RANDOM; k++) {
        e2e_case *c = &cases[k];
        memset(c, 0, sizeof *c);
        c->a_ms = spec_round(1 + 99 * ll_rng_uniform(&rng));
        c->b_ms = spec_round(0.1 + 49.9 * ll_rng_uniform(&rng));
        c->jitter = 0.02;
        c->scale = 1.0;
        c->scale = spec_round(CASE_BUDGET_MS / sweep_ms(c));
    }
    /* Heavy prefill: each prompt token costs 1 ms (unscaled), so a 40-120 word
     * prompt adds 2-6 times a to the step that prefills it; a small prefill
     * budget (chunked prefill, one prompt per step) staggers the streams so
     * that prefill steps are shared with decoding ones, as on a busy server. */
    e2e_case *h = &cases[N_RANDOM];
    memset(h, 0, sizeof *h);
    h->a_ms = 20;
    h->b_ms = 5;
    h->p_ms_per_tok = 1.0;
    h->prefill_budget_tok = 128;
    h->jitter = 0.02;
    h->scale = 1.0;
    h->scale = spec_round(CASE_BUDGET_MS / sweep_ms(h));

    int cover_a = 0, cover_b = 0, ran = 0, n_lv = 0, lv_close = 0, lv_typical = 0, lv_engine = 0,
        lv_gross = 0, n_linear = 0;
    for (int k = 0; k <= N_RANDOM; k++) {
        const e2e_case *c = &cases[k];
        fit_run *run = NULL;
        fit_result *r = sweep_and_fit(k, c, &run);
        if (!r)
            continue;
        ran++;
        double ta = c->a_ms * c->scale, tb = c->b_ms * c->scale;
        const fit_run_info *in = fit_run_get_info(run);
        CHECK(in->has_engine_law, "case %d: run line has engine_law", k);
        CHECK_REL(r->truth_a_ms, ta, 1e-9, "engine_law a is in scaled units");
        CHECK_REL(r->truth_b_ms, tb, 1e-9, "engine_law b is in scaled units");
        printf("case %d: truth a %.4g b %.4g (ms, scaled %.4g) | steady robust a %.4g [%.4g, %.4g] "
               "b %.4g [%.4g, %.4g] (%zu pts) | naive a %.4g b %.4g | engine a %.4g b %.4g\n",
               k, ta, tb, c->scale, r->law.a_ms, r->law.a_ci_ms[0], r->law.a_ci_ms[1], r->law.b_ms,
               r->law.b_ci_ms[0], r->law.b_ci_ms[1], r->law.n_points, r->naive.a_ms, r->naive.b_ms,
               r->engine.a_ms, r->engine.b_ms);
        printf("case %d: model check: %s: %s\n", k, fit_model_name(r->model.best),
               r->model.verdict);
        n_linear += r->model.best == FIT_MODEL_LINEAR;
        CHECK(r->law.ok, "case %d: law fitted", k);
        CHECK(near_truth(r->law.b_ms, r->law.b_ci_ms, tb, ta / 16 + tb, B_TOL),
              "case %d: b %.4g within %.0f%% of %.4g, or its interval [%.4g, %.4g] covers it, +-%.0f%% of a/16 + b "
              "at most", k, r->law.b_ms, 100 * B_TOL, tb, r->law.b_ci_ms[0], r->law.b_ci_ms[1], 100 * CI_MAX);
        CHECK(near_truth(r->law.a_ms, r->law.a_ci_ms, ta, ta + tb, A_TOL),
              "case %d: a %.4g within %.0f%% of %.4g, or its interval [%.4g, %.4g] covers it, +-%.0f%% of a + b at most",
              k, r->law.a_ms, 100 * A_TOL, ta, r->law.a_ci_ms[0], r->law.a_ci_ms[1], 100 * CI_MAX);
        cover_a += r->law.a_ci_ms[0] <= ta && ta <= r->law.a_ci_ms[1];
        cover_b += r->law.b_ci_ms[0] <= tb && tb <= r->law.b_ci_ms[1];
        /* The server's truth: the engine's own decode-only steps. */
        CHECK(r->engine.ok, "case %d: engine step records fitted", k);
        CHECK_REL(r->engine.b_ms, tb, 0.02, "engine steps b");
        CHECK_REL(r->engine.a_ms, ta, 0.05, "engine steps a");
        for (size_t i = 0; i < r->n_levels; i++) {
            const fit_level *L = &r->levels[i];
            CHECK(L->ramp_reached, "case %d level C=%d: ramp end found", k, L->concurrency);
            CHECK(isfinite(L->steady_tok_per_s), "case %d C=%d: steady throughput", k,
                  L->concurrency);
            /* Per level, the client's measurement against the law and
             * against the server's truth (the engine's median decode-only
             * step at n = C in this level); held in most levels, see
             * MEAN_CLOSE_FRAC above. A client that reads a chunk late makes
             * the next gap short, which pulls the median down; the mean
             * (tokens / time) carries the machine's pauses (a 50 ms stall in
             * a 4 ms-step level is 10%). */
            double eng_ms = engine_median_step_ms(run, L);
            double typical = 1000.0 * L->concurrency / L->steady_step_ms;
            int gross = !(fabs(typical / L->predicted_tok_per_s - 1) < 0.25) ||
                        !(fabs(L->steady_step_ms / eng_ms - 1) < 0.25);
            lv_gross += gross;
            if (gross || fabs(typical / L->predicted_tok_per_s - 1) >= 0.05 || fabs(L->steady_step_ms / eng_ms - 1) >= 0.05)
                printf("case %d C=%d:%s typical step %.4g ms, engine's %.4g ms, law %.4g ms\n", k,
                       L->concurrency, gross ? " GROSS" : "",
                       L->steady_step_ms, eng_ms, 1000.0 * L->concurrency / L->predicted_tok_per_s);
            n_lv++;
            lv_typical += fabs(typical / L->predicted_tok_per_s - 1) < 0.05;
            lv_engine += fabs(L->steady_step_ms / eng_ms - 1) < 0.05;
            lv_close += fabs(L->error_rel) < 0.05;
        }
        if (k == N_RANDOM) {
            /* Heavy prefill: prefill steps are far slower; counting their gaps
             * as decode bends the naive line, the steady one stays true. */
            printf("heavy prefill: naive a %+.0f%% b %+.0f%%, steady a %+.1f%% b %+.1f%%\n",
                   100 * (r->naive.a_ms / ta - 1), 100 * (r->naive.b_ms / tb - 1),
                   100 * (r->law.a_ms / ta - 1), 100 * (r->law.b_ms / tb - 1));
            CHECK(fabs(r->naive.a_ms / ta - 1) > 0.25 || fabs(r->naive.b_ms / tb - 1) > 0.15,
                  "naive fit visibly biased (a %g b %g vs %g %g)", r->naive.a_ms, r->naive.b_ms,
                  ta, tb);
        }
        fit_result_free(r);
        fit_run_free(run);
    }
    printf("95%% CIs covered the truth: a %d/%d, b %d/%d\n", cover_a, ran, cover_b, ran);
    printf("levels within 5%%: steady throughput vs law %d/%d, median step vs law %d/%d, vs engine %d/%d\n",
           lv_close, n_lv, lv_typical, n_lv, lv_engine, n_lv);
    CHECK(ran == N_RANDOM + 1, "all cases ran");
    CHECK(lv_gross <= GROSS_MAX, "%d levels off by more than 25%% (at most %d)", lv_gross, GROSS_MAX);
    CHECK(lv_typical >= STEP_CLOSE_FRAC * n_lv, "typical steady step near the law in most levels");
    CHECK(lv_engine >= STEP_CLOSE_FRAC * n_lv, "typical steady step near the engine's in most levels");
    CHECK(lv_close >= MEAN_CLOSE_FRAC * n_lv, "measured throughput near the law in most levels");
    /* Every engine law is a straight line: the model check must say so. */
    CHECK(n_linear >= ran - 1, "straight line chosen in %d of %d cases", n_linear, ran);
    CHECK(2 * cover_b > ran && 2 * cover_a > ran, "CIs cover the truth in most cases");

    test_knee_down();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tu_fail == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
