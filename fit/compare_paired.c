/* compare_paired.c: the paired comparison of an interleaved A/B: per level,
 * the pairs' log-ratios and their interval. compare.c matches the levels and
 * calls cmp_paired_level for a key whose levels carry pair numbers in both
 * runs ("pair", docs/records.md).
 *
 * The levels of one key pair up by pair number, A_i with B_i from the same
 * ABBA block, i = 1..m. Per pair y_i = log(X_B,i / X_A,i) (compare.c's X),
 * with its own within-level variance v_i = var(log X_A,i) + var(log X_B,i)
 * by the delta method over its steps (ratio estimator: var(log X) =
 * sum (tok_k - X' t_k)^2 / (n (n-1) mean(t)^2 X'^2), X' = sum tok / sum t).
 * The estimate is exp(mean y_i), equal weights, and its interval
 * exp(mean y +- q * sqrt(V)) with V = max(s_y^2, mean v_i) / m, q the t
 * quantile with m - 1 df (the normal one when m = 1; s_y^2: the sample
 * variance of the y_i, 0 when m = 1; mean v_i over the pairs whose v_i is
 * known: a side of one step has none; one pair without a known v_i > 0 has
 * no interval). between_var = max(0, s_y^2 - mean v_i) is the part the step
 * noise does not explain; ratio_method says "paired"; pair_ratio holds each
 * pair's X_B,i / X_A,i.
 *
 * The unit is the pair, not the step: a load that came and went, or a drift,
 * moves both sides of a pair together (they ran one right after the other)
 * but moves pairs against each other, so the spread between pairs is the noise that
 * matters and the steps within a level cannot see it. Hence the per-pair
 * log-ratio, a t interval over pairs, and each pair's own delta-method
 * variance as the floor that two or three pairs cannot estimate well.
 *  - Equal weights, not 1/v_i: ABBA cancels a linear drift only when the AB
 *    and the BA pair of a block count alike (mean of +d and -d); weights
 *    from each pair's step noise would tip it towards the quieter pair, and
 *    a pair hit by a CPU hog is the noisier one.
 *  - The t interval over pairs with the step noise as a floor: the pairs'
 *    spread s^2 already holds each pair's step noise, so s^2/m with t(m-1)
 *    is the interval (exact for normal log-ratios); mean(v)/m is a floor
 *    under s^2/m, because with 2-3 pairs s^2 is often small by chance.
 *    The quantile stays t(m-1) with the floor: two versions that let the
 *    quantile fall to the normal one when s^2 looked small (Satterthwaite's
 *    df on tau^2 = s^2 - mean(v), and "normal quantile when the floor wins")
 *    covered 82% and 86% at m = 2 with a pair spread three times the step
 *    noise. So coverage is at least the nominal, and conservative where the
 *    floor wins.
 *  - Why not a bootstrap over pairs then steps: with m = 2-3 pairs there are
 *    at most 27 distinct pair resamples, and the percentile interval of so
 *    few is too narrow (it cannot reach beyond the most extreme pair).
 * The price is width with 2 pairs: t(1) = 12.7, so an R = 2 run whose two
 * pairs disagree gets a wide interval (R >= 3 for a gate). Measured in
 * tests/fit/test_compare_paired.c (simulated pairs with a known ratio, step
 * noise and a random per-pair disturbance, 2000 trials each): coverage of the
 * true ratio 0.954 at m = 1 (step noise only: the normal interval), and at
 * m = 2 / 4 1.000 / 0.999 with step noise only, 1.000 / 0.956 with a pair
 * spread three times the step noise: never below the nominal, conservative
 * where the floor wins (the width the few pairs cost). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "compare_internal.h"

/* var(log X) of the ratio estimator over units (delta method); NAN with < 2. */
static double log_ratio_var(const cmp_unit *v, size_t n)
{
    double tok = 0, t = 0, ss = 0;
    if (n < 2)
        return NAN;
    for (size_t i = 0; i < n; i++) {
        tok += v[i].tok;
        t += v[i].time_s;
    }
    if (!(t > 0 && tok > 0))
        return NAN;
    double r = tok / t, mt = t / (double)n;
    for (size_t i = 0; i < n; i++) {
        double e = v[i].tok - r * v[i].time_s;
        ss += e * e;
    }
    double var_r = ss / ((double)n * (double)(n - 1) * mt * mt);
    return var_r / (r * r);
}

int fit_paired_ratio(const double *y, const double *v, size_t m, double ci, double *ratio, double ratio_ci[2],
                     double *within_var, double *between_var, double *df)
{
    if (m == 0 || !(ci > 0 && ci < 1))
        return LL_EINVAL;
    double my = 0, mv = 0, s2 = 0;
    size_t nv = 0;
    for (size_t i = 0; i < m; i++) {
        my += y[i];
        if (isfinite(v[i]) && v[i] >= 0) {
            mv += v[i];
            nv++;
        }
    }
    my /= (double)m;
    /* the step noise of the pairs that have one: a pair whose side had one
     * unit has none to show, and counting it as 0 would lower the floor */
    mv = nv ? mv / (double)nv : 0;
    for (size_t i = 0; i < m; i++)
        s2 += (y[i] - my) * (y[i] - my);
    s2 = m > 1 ? s2 / (double)(m - 1) : 0;
    /* The spread of the y_i already holds each pair's step noise, so s^2/m
     * alone estimates var(mean y) with m - 1 df (the t interval over pairs,
     * exact for normal y_i). The step noise is the floor under it: with 2-3
     * pairs s^2 is often small by chance. The quantile stays t(m-1) (a
     * normal one whenever the floor won covered only 86% at m = 2 with a
     * pair spread three times the step noise: s^2 small by chance is exactly
     * when the spread is underestimated); one pair has no spread to see, its
     * steps' interval (normal quantile) is all there is. */
    *ratio = exp(my);
    *within_var = nv ? mv : NAN;
    if (m == 1 && !(mv > 0)) {
        /* one pair and no step noise to see: no interval (a gate fails) */
        ratio_ci[0] = ratio_ci[1] = NAN;
        *between_var = NAN;
        *df = NAN;
        return 0;
    }
    double tau2 = s2 > mv ? s2 - mv : 0;
    double var = (s2 > mv ? s2 : mv) / (double)m;
    double nu = m > 1 ? (double)(m - 1) : INFINITY;
    double q = isfinite(nu) ? gsl_cdf_tdist_Pinv(1 - (1 - ci) / 2, nu) : gsl_cdf_ugaussian_Pinv(1 - (1 - ci) / 2);
    ratio_ci[0] = exp(my - q * sqrt(var));
    ratio_ci[1] = exp(my + q * sqrt(var));
    *between_var = tau2;
    *df = nu;
    return 0;
}

/* Units of every pair appended to *ua / *ub (for the slope fallback). */
static int append_units(cmp_unit **dst, size_t *n, const cmp_unit *src, size_t k)
{
    if (!k)
        return 0;
    cmp_unit *p = realloc(*dst, (*n + k) * sizeof *p);
    if (!p)
        return LL_ENOMEM;
    memcpy(p + *n, src, k * sizeof *p);
    *dst = p;
    *n += k;
    return 0;
}

int cmp_paired_level(const fit_run *a, const fit_result *ra, const fit_run *b, const fit_result *rb,
                     const cmp_level_pair *lp, size_t m, const fit_compare_options *o, fit_compare_level *out,
                     cmp_unit **ua, cmp_unit **ub, size_t *nua, size_t *nub, char *err, size_t errlen)
{
    double *y = calloc(m, sizeof *y), *v = calloc(m, sizeof *v);
    cmp_unit *pa = NULL, *pb = NULL;
    size_t na = 0, nb = 0, used = 0;
    int rc = LL_ENOMEM;
    const fit_level *La0 = &ra->levels[lp[0].ia];
    memset(out, 0, sizeof *out);
    out->pair_ratio = calloc(m, sizeof *out->pair_ratio);
    if (!y || !v || !out->pair_ratio)
        goto fail;
    cmp_level_key(out, La0, fit_run_level(a, lp[0].ia));
    out->level_a = La0->level;
    out->level_b = rb->levels[lp[0].ib].level;
    out->ratio_method = "paired";
    out->steady = 1;
    *ua = *ub = NULL;
    *nua = *nub = 0;
    for (size_t i = 0; i < m; i++) {
        const fit_level *La = &ra->levels[lp[i].ia], *Lb = &rb->levels[lp[i].ib];
        size_t nra = 0, nrb = 0;
        int steady;
        if (cmp_both_units(a, ra, lp[i].ia, b, rb, lp[i].ib, 0, &steady, &pa, &na, &nra, &pb, &nb, &nrb))
            goto fail;
        out->steady &= steady;
        out->n_req_a += nra;
        out->n_req_b += nrb;
        double xa = cmp_ratio_estimate(pa, na, cmp_rate_factor(a, La, steady));
        double xb = cmp_ratio_estimate(pb, nb, cmp_rate_factor(b, Lb, steady));
        out->pair_ratio[i] = xb / xa;
        if (xa > 0 && xb > 0 && isfinite(xa) && isfinite(xb)) {
            y[used] = log(xb / xa);
            v[used] = log_ratio_var(pa, na) + log_ratio_var(pb, nb);
            used++;
        }
        if (append_units(ua, nua, pa, na) || append_units(ub, nub, pb, nb))
            goto fail;
        free(pa);
        free(pb);
        pa = pb = NULL;
    }
    out->n_pairs = m;
    out->n_units_a = *nua;
    out->n_units_b = *nub;
    out->tok_per_s_a = cmp_ratio_estimate(*ua, *nua, cmp_rate_factor(a, La0, out->steady));
    out->tok_per_s_b = cmp_ratio_estimate(*ub, *nub, cmp_rate_factor(b, &rb->levels[lp[0].ib], out->steady));
    out->ratio = out->ratio_ci[0] = out->ratio_ci[1] = NAN;
    out->within_var = out->between_var = out->df = NAN;
    if (used)
        fit_paired_ratio(y, v, used, o->ci, &out->ratio, out->ratio_ci, &out->within_var, &out->between_var,
                         &out->df);
    cmp_level_latency(La0, &out->lat_a);
    cmp_level_latency(&rb->levels[lp[0].ib], &out->lat_b);
    rc = 0;
fail:
    if (rc) {
        ll_errf(err, errlen, "out of memory");
        free(out->pair_ratio);
        out->pair_ratio = NULL;
    }
    free(pa);
    free(pb);
    free(y);
    free(v);
    return rc;
}

