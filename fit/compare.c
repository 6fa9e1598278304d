/* compare.c: A/B comparison of run B against run A (the baseline) — the
 * levels matched by load, each common level compared (unpaired bootstrap:
 * compare_units.c; paired, for an interleaved A/B: compare_paired.c), the
 * slope ratio of the two laws, and the verdict line; tables and pages are
 * drawn by reports/. The RNG is GSL's mt19937 with a fixed seed so the same
 * runs always give the same interval.
 *
 * Levels are matched by load: closed-loop levels by concurrency C, open-loop
 * levels by request rate (and their cap on in-flight requests); closed ones
 * come first by C, then open ones by rate. Per level the steady rate of each
 * run is the ratio estimator
 *     X = c * sum tok / sum time
 * over the gaps between consecutive chunks of its ok, non-warmup requests
 * that lie wholly inside the level's steady windows (P = 0, D = C), with
 * c = C for a closed level (X is then fit_level.steady_tok_per_s) and c = 1
 * for an open one (X is the per-stream decode rate at that offered load, over
 * every steady step whatever its N: the ratio is how much faster B decodes at
 * the same arrival rate). Unpaired (a sequential A/B, or two unrelated runs:
 * the first level of each key in each run), the interval of X_B / X_A is a
 * bootstrap over engine steps (compare_units.c); paired (the level records
 * carry "pair", docs/records.md), the levels of one key pair up by pair
 * number (compare_paired.c).
 *
 * The slope ratio: the ratio B/A of the two laws' b (fit_result.law, fitted
 * on every level of each run, repeats and all), with a delta-method interval
 * on the log scale, se(log r)^2 = (se_bA/b_A)^2 + (se_bB/b_B)^2
 * (slope_method "delta"). When a run has no law, it falls back to each run's
 * steady step time per level (1000 * time / tok, ms) against C, OLS over the
 * common levels, with a percentile bootstrap resampling every level's steps
 * (slope_method "bootstrap"; needs two common levels, each with
 * FIT_COMPARE_MIN_UNITS units a side; otherwise "none", no ratio). When a
 * run has a law whose b interval includes 0 (fit_law_slope_resolved), there
 * is no ratio either, "unresolved": a slope that may be 0 divides into
 * anything. The verdict quotes the laws' b. The latencies (lat_a, lat_b) are
 * copies of each level's fit_level ttft, ttfa and itl (the first level of
 * the key in each run). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>

#include "compare_internal.h"

void fit_compare_options_default(fit_compare_options *o)
{
    o->n_resamples = 2000;
    o->seed = 1;
    o->ci = 0.95;
    o->resample_requests = 0;
    o->ignore_pairs = 0;
}

/* ---- matching levels ------------------------------------------------------------ */

/* Same load: closed levels by C; open ones by rate (relative 1e-9) and cap. */
static int same_key(const fit_run *ra_run, const fit_result *ra, size_t i, const fit_run *rb_run,
                    const fit_result *rb, size_t j)
{
    const fit_level *A = &ra->levels[i], *B = &rb->levels[j];
    if (A->closed_loop != B->closed_loop || A->concurrency != B->concurrency)
        return 0;
    if (A->closed_loop)
        return A->concurrency > 0;
    double x = fit_run_level(ra_run, i)->rate_per_s, y = fit_run_level(rb_run, j)->rate_per_s;
    return isfinite(x) && isfinite(y) && fabs(x - y) <= 1e-9 * fabs(x);
}

/* Order of keys: closed by C, then open by rate, then cap. */
static int key_before(const fit_run *run, const fit_result *r, size_t i, size_t j)
{
    const fit_level *A = &r->levels[i], *B = &r->levels[j];
    if (A->closed_loop != B->closed_loop)
        return A->closed_loop;
    if (A->closed_loop)
        return A->concurrency < B->concurrency;
    double x = fit_run_level(run, i)->rate_per_s, y = fit_run_level(run, j)->rate_per_s;
    return x < y || (x == y && A->concurrency < B->concurrency);
}

/* ---- the slope ratio ------------------------------------------------------------ */

/* Step time (ms per token per stream) of a set of units, resampled or not. */
static double units_step_ms(const gsl_rng *rng, const cmp_unit *v, size_t n)
{
    double tok = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        const cmp_unit *p = rng ? &v[gsl_rng_uniform_int(rng, n)] : &v[i];
        tok += p->tok;
        t += p->time_s;
    }
    return tok > 0 ? 1e3 * t / tok : NAN;
}

/* OLS slope of y against x. */
static double ols_slope(const double *x, const double *y, size_t n)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    return sxx > 0 ? sxy / sxx : NAN;
}

/* Slope ratio from the common levels' steady step times: OLS of step time
 * against C in each run, ratio B/A, percentile bootstrap resampling each
 * level's units. Needs two distinct levels. */
static int slope_bootstrap(fit_compare *c, cmp_unit *const *ua, cmp_unit *const *ub, const fit_compare_options *o,
                           gsl_rng *rng)
{
    size_t n = 0; /* the closed levels come first (key order) */
    while (n < c->n_levels && !c->levels[n].open_loop)
        n++;
    if (n < 2 || o->n_resamples < 1)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c->levels[i].n_units_a < FIT_COMPARE_MIN_UNITS || c->levels[i].n_units_b < FIT_COMPARE_MIN_UNITS)
            return 0; /* too few steps to resample (compare_units.c) */
    double *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yb = malloc(n * sizeof *yb);
    double *boot = malloc(((size_t)o->n_resamples + 1) * sizeof *boot);
    int rc = LL_ENOMEM;
    if (!x || !ya || !yb || !boot)
        goto out;
    for (size_t i = 0; i < n; i++) {
        x[i] = c->levels[i].concurrency;
        ya[i] = units_step_ms(NULL, ua[i], c->levels[i].n_units_a);
        yb[i] = units_step_ms(NULL, ub[i], c->levels[i].n_units_b);
    }
    double slope_a = ols_slope(x, ya, n), slope_b = ols_slope(x, yb, n);
    size_t nb = 0;
    for (int r = 0; r < o->n_resamples; r++) {
        for (size_t i = 0; i < n; i++) {
            ya[i] = units_step_ms(rng, ua[i], c->levels[i].n_units_a);
            yb[i] = units_step_ms(rng, ub[i], c->levels[i].n_units_b);
        }
        double sa = ols_slope(x, ya, n), sb = ols_slope(x, yb, n);
        if (sa > 0 && isfinite(sb))
            boot[nb++] = sb / sa;
    }
    if (nb > 0 && slope_a > 0 && isfinite(slope_b)) {
        /* only a ratio with its interval: a slope of A <= 0 gives none */
        c->slope_a_ms = slope_a;
        c->slope_b_ms = slope_b;
        c->slope_ratio = slope_b / slope_a;
        ll_sort_doubles(boot, nb);
        c->slope_ratio_ci[0] = ll_quantile_sorted(boot, nb, (1 - o->ci) / 2);
        c->slope_ratio_ci[1] = ll_quantile_sorted(boot, nb, 1 - (1 - o->ci) / 2);
        c->slope_method = "bootstrap";
    }
    rc = 0;
out:
    free(x);
    free(ya);
    free(yb);
    free(boot);
    return rc;
}

/* Standard normal quantile for the two-sided interval (Acklam's rational
 * approximation would be overkill: only a handful of levels are used). */
static double z_of(double ci)
{
    if (fabs(ci - 0.95) < 1e-9)
        return 1.959963984540054;
    if (fabs(ci - 0.90) < 1e-9)
        return 1.644853626951472;
    if (fabs(ci - 0.99) < 1e-9)
        return 2.575829303548901;
    /* bisection on erfc for any other level */
    double lo = 0, hi = 10, target = 1 - ci;
    for (int i = 0; i < 100; i++) {
        double mid = (lo + hi) / 2;
        if (erfc(mid / sqrt(2)) > target)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

void fit_compare_set_verdict(fit_compare *c, size_t i)
{
    char slope[160] = "";
    if (c->law_a.ok && c->law_b.ok)
        snprintf(slope, sizeof slope, "; slope %#.3g \u2192 %#.3g ms per request", c->law_a.b_ms, c->law_b.b_ms);
    if (i >= c->n_levels) {
        snprintf(c->verdict, sizeof c->verdict, "no common level%s", slope);
        return;
    }
    const fit_compare_level *L = &c->levels[i];
    char at[64];
    if (L->open_loop)
        snprintf(at, sizeof at, "%g req/s (per-stream decode)", L->rate_per_s);
    else
        snprintf(at, sizeof at, "C=%d", L->concurrency);
    if (!isfinite(L->ratio)) {
        snprintf(c->verdict, sizeof c->verdict, "no throughput to compare at %s%s", at, slope);
        return;
    }
    char pairs[48] = "";
    if (L->n_pairs)
        snprintf(pairs, sizeof pairs, " (%zu pair%s)", L->n_pairs, L->n_pairs > 1 ? "s" : "");
    /* the interval with the decimals that keep it from collapsing onto the
     * estimate (a gate missed by 0.004 must not read "[1.87, 1.87]") */
    int d = fit_ci_decimals(L->ratio_ci[0], L->ratio_ci[1]);
    d = d < 2 ? 2 : d;
    char iv[96];
    if (isfinite(L->ratio_ci[0]) && isfinite(L->ratio_ci[1]))
        snprintf(iv, sizeof iv, " [%.*f, %.*f]", d, L->ratio_ci[0], d, L->ratio_ci[1]);
    else
        snprintf(iv, sizeof iv, " (no interval)");
    snprintf(c->verdict, sizeof c->verdict, "B is %.*f\u00d7 A at %s%s%s%s%s", d, L->ratio, at, iv, pairs, slope,
             L->steady ? "" : " (no steady window: decode spans)");
}

/* The working state of one fit_compare_runs: A's level keys, the pairs of
 * one key, and each common level's resampling units (kept for the slope
 * bootstrap). All arrays have cap entries; the unit arrays are freed entry
 * by entry. */
typedef struct cmp_work {
    fit_compare_options o;
    gsl_rng *rng;
    size_t cap, nk, *keys, *nua, *nub;
    cmp_level_pair *lp;
    cmp_unit **ua, **ub;
} cmp_work;

/* The options, or the defaults; LL_EINVAL with a message when out of range. */
static int compare_options(fit_compare_options *o, const fit_compare_options *opt, char *err, size_t errlen)
{
    fit_compare_options_default(o);
    if (opt)
        *o = *opt;
    if (o->n_resamples < 0 || (o->n_resamples > 0 && o->n_resamples < FIT_COMPARE_MIN_RESAMPLES) ||
        !(o->ci > 0 && o->ci < 1)) {
        ll_errf(err, errlen, "compare: bad options (resamples %d: 0 or at least %d; ci %g)", o->n_resamples,
                FIT_COMPARE_MIN_RESAMPLES, o->ci);
        return LL_EINVAL;
    }
    return 0;
}

static void work_free(cmp_work *w)
{
    if (w->rng)
        gsl_rng_free(w->rng);
    for (size_t i = 0; w->ua && w->ub && i < w->cap; i++) {
        free(w->ua[i]);
        free(w->ub[i]);
    }
    free(w->ua);
    free(w->ub);
    free(w->keys);
    free(w->lp);
    free(w->nua);
    free(w->nub);
}

/* The result with room for every level of A, and the work arrays. */
static int work_alloc(cmp_work *w, fit_compare **out, size_t n_levels_a)
{
    w->cap = n_levels_a ? n_levels_a : 1;
    w->ua = calloc(w->cap, sizeof *w->ua);
    w->ub = calloc(w->cap, sizeof *w->ub);
    fit_compare *c = *out = calloc(1, sizeof *c);
    if (!c || !w->ua || !w->ub)
        return LL_ENOMEM;
    c->levels = calloc(w->cap, sizeof *c->levels);
    w->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!c->levels || !w->rng)
        return LL_ENOMEM;
    gsl_rng_set(w->rng, (unsigned long)w->o.seed);
    w->keys = malloc(w->cap * sizeof *w->keys);
    w->lp = malloc(w->cap * sizeof *w->lp);
    w->nua = calloc(w->cap, sizeof *w->nua);
    w->nub = calloc(w->cap, sizeof *w->nub);
    return w->keys && w->lp && w->nua && w->nub ? 0 : LL_ENOMEM;
}

/* B/A of one term with its interval (delta method on the log scale). */
static void term_ratio(double va, double vara, double vb, double varb, double ci, double *r, double out_ci[2])
{
    *r = out_ci[0] = out_ci[1] = NAN;
    if (!(va > 0 && vb > 0 && vara >= 0 && varb >= 0))
        return;
    double se = sqrt(vara / (va * va) + varb / (vb * vb)), z = gsl_cdf_ugaussian_Pinv(0.5 + ci / 2);
    *r = vb / va;
    out_ci[0] = *r * exp(-z * se);
    out_ci[1] = *r * exp(z * se);
}

/* fit_compare.h fit_compare.ctx_*: the context model's terms B/A when both chose it. */
static void compare_context_terms(fit_compare *c, const fit_model_check *ma, const fit_model_check *mb, double ci)
{
    c->ctx_b_ratio = c->ctx_c_ratio = NAN;
    c->ctx_b_ratio_ci[0] = c->ctx_b_ratio_ci[1] = c->ctx_c_ratio_ci[0] = c->ctx_c_ratio_ci[1] = NAN;
    if (!ma->done || !mb->done || ma->best != FIT_MODEL_CONTEXT || mb->best != FIT_MODEL_CONTEXT)
        return;
    term_ratio(ma->ctx_b_ms, ma->ctx_cov[1][1], mb->ctx_b_ms, mb->ctx_cov[1][1], ci, &c->ctx_b_ratio,
               c->ctx_b_ratio_ci);
    term_ratio(ma->ctx_c_ms, ma->ctx_cov[2][2], mb->ctx_c_ms, mb->ctx_cov[2][2], ci, &c->ctx_c_ratio,
               c->ctx_c_ratio_ci);
}

/* fit_compare.h fit_compare.term_*: every term B/A when both chose the same richer
 * model with the same knees. */
static void compare_model_terms(fit_compare *c, const fit_model_check *ma, const fit_model_check *mb, double ci)
{
    const fit_model_fit *fa = &ma->chosen, *fb = &mb->chosen;
    c->n_terms = 0;
    c->terms_model = FIT_MODEL_LINEAR;
    if (!ma->done || !mb->done || ma->best == FIT_MODEL_LINEAR || ma->best != mb->best || !fa->p || fa->p != fb->p)
        return;
    for (size_t j = 0; j < fa->p; j++)
        if (fa->term[j] != fb->term[j] || (fa->term[j] == FIT_TERM_HINGE && fa->knee[j] != fb->knee[j]))
            return;
    c->terms_model = ma->best;
    c->n_terms = fa->p;
    for (size_t j = 0; j < fa->p; j++) {
        c->term[j] = fa->term[j];
        c->term_knee[j] = fa->knee[j];
        term_ratio(fa->coef[j], fa->cov[j][j], fb->coef[j], fb->cov[j][j], ci, &c->term_ratio[j],
                   c->term_ratio_ci[j]);
    }
}

static const fit_level *level_of(const fit_result *r, int level)
{
    for (size_t i = 0; i < r->n_levels; i++)
        if (r->levels[i].level == level)
            return &r->levels[i];
    return NULL;
}

/* fit_compare.h fit_compare_level.model_ratio. */
static void compare_model_levels(fit_compare *c, const fit_result *ra, const fit_result *rb)
{
    for (size_t i = 0; i < c->n_levels; i++) {
        fit_compare_level *L = &c->levels[i];
        const fit_level *A = level_of(ra, L->level_a), *B = level_of(rb, L->level_b);
        L->model_ratio = NAN;
        if (L->open_loop || !A || !B || L->concurrency <= 0)
            continue;
        double sa = fit_model_predict(&ra->model, &ra->law, L->concurrency, A->k_mean);
        double sb = fit_model_predict(&rb->model, &rb->law, L->concurrency, B->k_mean);
        if (sa > 0 && sb > 0)
            L->model_ratio = sa / sb;
    }
}

/* Both laws, their asymptotes and the options the result reports. */
static void compare_laws(fit_compare *c, const fit_result *ra, const fit_result *rb, const fit_compare_options *o)
{
    c->law_a = ra->law;
    c->law_b = rb->law;
    /* from the copied laws themselves, so the printed asymptote is 1000/b of
     * the very law printed beside it */
    c->asym_a_tok_per_s = fit_law_slope_resolved(&c->law_a) ? 1000.0 / c->law_a.b_ms : NAN;
    c->asym_b_tok_per_s = fit_law_slope_resolved(&c->law_b) ? 1000.0 / c->law_b.b_ms : NAN;
    c->ci = o->ci;
    c->n_resamples = o->n_resamples;
    c->seed = o->seed;
    compare_context_terms(c, &ra->model, &rb->model, o->ci);
    compare_model_terms(c, &ra->model, &rb->model, o->ci);
}

/* The keys (load) of a's levels, first occurrence each, in key order. */
static void level_keys(cmp_work *w, const fit_run *a, const fit_result *ra)
{
    for (size_t i = 0; i < ra->n_levels; i++) {
        const fit_level *L = &ra->levels[i];
        if (L->closed_loop ? L->concurrency <= 0 : !isfinite(fit_run_level(a, i)->rate_per_s))
            continue;
        size_t k = 0;
        while (k < w->nk && !same_key(a, ra, w->keys[k], a, ra, i))
            k++;
        if (k < w->nk)
            continue;
        /* insertion in key order */
        for (k = w->nk++; k > 0 && key_before(a, ra, i, w->keys[k - 1]); k--)
            w->keys[k] = w->keys[k - 1];
        w->keys[k] = i;
    }
}

/* Pairs of key ka: A's levels of this key with a pair number, and B's of the
 * same (into w->lp); their count. */
static size_t key_pairs(cmp_work *w, const fit_run *a, const fit_result *ra, const fit_run *b,
                        const fit_result *rb, size_t ka)
{
    size_t m = 0;
    for (size_t i = 0; i < ra->n_levels && !w->o.ignore_pairs; i++) {
        int p = fit_run_level(a, i)->pair;
        if (p < 0 || !same_key(a, ra, ka, a, ra, i))
            continue;
        for (size_t j = 0; j < rb->n_levels; j++)
            if (fit_run_level(b, j)->pair == p && same_key(a, ra, i, b, rb, j)) {
                w->lp[m++] = (cmp_level_pair){i, j, p};
                break;
            }
    }
    return m;
}

/* Key ka (A's level index) compared, paired where the runs interleaved it,
 * as c's next level; nothing when B has no level of that key. */
static int compare_key(cmp_work *w, fit_compare *c, const fit_run *a, const fit_result *ra, const fit_run *b,
                       const fit_result *rb, size_t ka, char *err, size_t errlen)
{
    size_t m = key_pairs(w, a, ra, b, rb, ka), ib = SIZE_MAX, n = c->n_levels;
    int rc;
    for (size_t j = 0; j < rb->n_levels && ib == SIZE_MAX; j++)
        if (same_key(a, ra, ka, b, rb, j))
            ib = j;
    if (m > 0)
        rc = cmp_paired_level(a, ra, b, rb, w->lp, m, &w->o, &c->levels[n], &w->ua[n], &w->ub[n], &w->nua[n],
                              &w->nub[n], err, errlen);
    else if (ib != SIZE_MAX)
        rc = cmp_unpaired_level(a, ra, ka, b, rb, ib, &w->o, w->rng, &c->levels[n], &w->ua[n], &w->ub[n],
                                &w->nua[n], &w->nub[n], err, errlen);
    else
        return 0;
    if (rc)
        return rc;
    c->paired |= m > 0;
    c->n_levels++;
    return 0;
}

/* The slope ratio B/A: from the laws' standard errors (delta method) when
 * both laws have them, else by bootstrap over the common levels' units;
 * none when a law's slope may be 0 (its interval includes 0): the ratio
 * would divide by a slope indistinguishable from 0, and neither method
 * gives it a finite meaning. */
static int compare_slopes(fit_compare *c, cmp_work *w)
{
    c->slope_ratio = c->slope_ratio_ci[0] = c->slope_ratio_ci[1] = NAN;
    c->slope_a_ms = c->slope_b_ms = NAN;
    c->slope_method = "none";
    if ((c->law_a.ok && !fit_law_slope_resolved(&c->law_a)) || (c->law_b.ok && !fit_law_slope_resolved(&c->law_b))) {
        c->slope_method = "unresolved";
        return 0;
    }
    if (c->law_a.ok && c->law_b.ok && isfinite(c->law_a.b_se_ms) && isfinite(c->law_b.b_se_ms)) {
        /* The ratio of the two laws' slopes, the figures printed beside it. The
         * runs are independent, so on the log scale the variances add; each
         * b's standard error is the fit's sandwich one (coverage ~93% in
         * test_fit), which already accounts for the C streams sharing a step. */
        double r = c->law_b.b_ms / c->law_a.b_ms;
        double se = sqrt(pow(c->law_a.b_se_ms / c->law_a.b_ms, 2) + pow(c->law_b.b_se_ms / c->law_b.b_ms, 2));
        double z = z_of(w->o.ci);
        c->slope_a_ms = c->law_a.b_ms;
        c->slope_b_ms = c->law_b.b_ms;
        c->slope_ratio = r;
        c->slope_ratio_ci[0] = r * exp(-z * se);
        c->slope_ratio_ci[1] = r * exp(z * se);
        c->slope_method = "delta";
        return 0;
    }
    if (c->n_levels >= 2)
        return slope_bootstrap(c, w->ua, w->ub, &w->o, w->rng);
    return 0;
}

int fit_compare_runs(const fit_run *a, const fit_result *ra, const fit_run *b,
                     const fit_result *rb, const fit_compare_options *opt, fit_compare **out,
                     char *err, size_t errlen)
{
    cmp_work w = {0};
    fit_compare *c = NULL;
    int rc = compare_options(&w.o, opt, err, errlen);
    if (rc)
        return rc;
    if (work_alloc(&w, &c, ra->n_levels))
        goto oom;
    compare_laws(c, ra, rb, &w.o);
    level_keys(&w, a, ra);
    for (size_t k = 0; k < w.nk; k++)
        if ((rc = compare_key(&w, c, a, ra, b, rb, w.keys[k], err, errlen)))
            goto fail;
    if (c->n_levels == 0) {
        rc = LL_EINVAL;
        ll_errf(err, errlen, "the runs share no level (no closed-loop concurrency, no open-loop rate)");
        goto fail;
    }
    if (compare_slopes(c, &w))
        goto oom;
    compare_model_levels(c, ra, rb);
    fit_compare_set_verdict(c, fit_compare_default_level(c));
    /* the units read the requests again: a paged run's file must not have changed */
    if ((rc = fit_run_read_error(a, err, errlen)) || (rc = fit_run_read_error(b, err, errlen)))
        goto fail;
    work_free(&w);
    *out = c;
    return 0;
oom:
    rc = LL_ENOMEM;
    ll_errf(err, errlen, "out of memory");
fail:
    if (fit_run_read_error(a, err, errlen) == 0) /* a file changed under a paged run says so */
        fit_run_read_error(b, err, errlen);
    work_free(&w);
    fit_compare_free(c);
    return rc;
}

void fit_compare_free(fit_compare *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->levels && i < c->n_levels; i++)
        free(c->levels[i].pair_ratio);
    free(c->levels);
    free(c);
}

int fit_compare_find(const fit_compare *c, int concurrency)
{
    for (size_t i = 0; i < c->n_levels; i++)
        if (!c->levels[i].open_loop && c->levels[i].concurrency == concurrency)
            return (int)i;
    return -1;
}

size_t fit_compare_default_level(const fit_compare *c)
{
    /* closed levels come first, by C: the last of them; else the last open one */
    size_t i = c->n_levels;
    while (i > 0 && c->levels[i - 1].open_loop)
        i--;
    return i > 0 ? i - 1 : (c->n_levels ? c->n_levels - 1 : 0);
}
