/* model.c: is a straight line the right law? The linear fit against a
 * quadratic and against two lines joined at a knee (breakpoint searched over
 * the distinct N), by BIC on least-squares fits of the step points, with a
 * practical-size threshold so that thousands of points do not turn a 0.5%
 * wobble into "curved". */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_multifit.h>


/* OLS residual sum of squares and coefficients for y ~ design(x). kind 0:
 * [1, x]; 1: [1, x, x^2]; 2: [1, x, max(0, x - knee)]. */
static int ols_design(const double *x, const double *y, size_t n, int kind, double knee,
                      double coef[3], double *rss)
{
    size_t p = kind == 0 ? 2 : 3;
    int rc = 0;
    gsl_matrix *X = gsl_matrix_alloc(n, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *yv = gsl_vector_alloc(n), *c = gsl_vector_alloc(p);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, p);
    if (!X || !cov || !yv || !c || !w) {
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(X, i, 0, 1.0);
        gsl_matrix_set(X, i, 1, x[i]);
        if (kind == 1)
            gsl_matrix_set(X, i, 2, x[i] * x[i]);
        else if (kind == 2)
            gsl_matrix_set(X, i, 2, x[i] > knee ? x[i] - knee : 0.0);
        gsl_vector_set(yv, i, y[i]);
    }
    if (gsl_multifit_linear(X, yv, c, cov, rss, w)) {
        rc = LL_EINVAL;
        goto done;
    }
    for (size_t j = 0; j < 3; j++)
        coef[j] = j < p ? gsl_vector_get(c, j) : 0.0;
done:
    if (w)
        gsl_multifit_linear_free(w);
    gsl_vector_free(c);
    gsl_vector_free(yv);
    gsl_matrix_free(cov);
    gsl_matrix_free(X);
    return rc;
}

static double bic(double rss, double floor_rss, size_t n, int k)
{
    if (rss < floor_rss)
        rss = floor_rss; /* exact fits: keep ln finite; only differences matter */
    return (double)n * log(rss / (double)n) + (double)k * log((double)n);
}

/* The model the evidence chooses (BIC lower by the margin and an effect over
 * the minimum; the knee before the curve when both qualify), and the verdict
 * that says why. */
static void model_choose(fit_model_check *m, const fit_options *opt, double xmax)
{
    double margin = opt->model_bic_margin, eff = opt->model_min_effect;
    int q_ok = m->bic_quadratic < m->bic_linear - margin && m->effect_quadratic > eff;
    int p_ok = isfinite(m->bic_piecewise) && m->bic_piecewise < m->bic_linear - margin &&
               m->effect_piecewise > eff;
    if (p_ok && (!q_ok || m->bic_piecewise <= m->bic_quadratic))
        m->best = FIT_MODEL_PIECEWISE;
    else if (q_ok)
        m->best = FIT_MODEL_QUADRATIC;
    if (m->best == FIT_MODEL_PIECEWISE)
        snprintf(m->verdict, sizeof m->verdict,
                 "knee at N=%g: slope %.4g ms per request before, %.4g after "
                 "(BIC %.1f lower than a line)",
                 m->knee_n, m->slope_before_ms, m->slope_after_ms,
                 m->bic_linear - m->bic_piecewise);
    else if (m->best == FIT_MODEL_QUADRATIC)
        snprintf(m->verdict, sizeof m->verdict,
                 "curved: %+.4g ms*N^2 (%.0f%% off the line at N=%g; BIC %.1f lower)",
                 m->quad_c_ms, 100 * m->effect_quadratic, xmax, m->bic_linear - m->bic_quadratic);
    else if (isfinite(m->bic_piecewise))
        snprintf(m->verdict, sizeof m->verdict,
                 "a straight line fits: quadratic BIC %+.1f (%.1f%% at N=%g), knee BIC %+.1f "
                 "(%.1f%%); a richer model needs BIC -%g and %.0f%%",
                 m->bic_quadratic - m->bic_linear, 100 * m->effect_quadratic, xmax,
                 m->bic_piecewise - m->bic_linear, 100 * m->effect_piecewise, margin, 100 * eff);
    else
        snprintf(m->verdict, sizeof m->verdict,
                 "a straight line fits: quadratic BIC %+.1f (%.1f%% at N=%g); a richer model "
                 "needs BIC -%g and %.0f%%",
                 m->bic_quadratic - m->bic_linear, 100 * m->effect_quadratic, xmax, margin,
                 100 * eff);
}

/* Knee: every distinct N with at least two distinct N at or below it and
 * one above; the breakpoint counts as a fourth parameter. 0 or ols_design's
 * error. */
static int knee_search(const double *x, const double *y, size_t n, const double *d, size_t nd, double lin_at_max,
                       double floor_rss, fit_model_check *m)
{
    double best_rss = INFINITY, xmax = d[nd - 1];
    int rc;
    for (size_t k = 1; k + 1 < nd; k++) {
        double cp[3], rss;
        if ((rc = ols_design(x, y, n, 2, d[k], cp, &rss)))
            return rc;
        if (rss < best_rss) {
            best_rss = rss;
            m->knee_n = d[k];
            m->slope_before_ms = cp[1];
            m->slope_after_ms = cp[1] + cp[2];
            m->effect_piecewise = fabs(cp[0] + cp[1] * xmax + cp[2] * (xmax - d[k]) -
                                       lin_at_max) / fabs(lin_at_max);
        }
    }
    m->bic_piecewise = bic(best_rss, floor_rss, n, 4);
    return 0;
}

static int model_check_core(const double *x, const double *y, size_t n, const fit_options *opt,
                            fit_model_check *m, char *err, size_t errlen)
{
    m->best = FIT_MODEL_LINEAR;
    m->bic_linear = m->bic_quadratic = m->bic_piecewise = NAN;
    m->quad_c_ms = m->knee_n = m->slope_before_ms = m->slope_after_ms = NAN;
    m->effect_quadratic = m->effect_piecewise = NAN;
    double *d = NULL;
    size_t nd = 0;
    int rc = fit_distinct_x(x, n, &d, &nd);
    if (rc)
        goto oom;
    if (nd < 3 || n < 5) {
        snprintf(m->verdict, sizeof m->verdict,
                 "not checked: %zu distinct N (a curvature or knee check needs 3)", nd);
        free(d);
        return 0;
    }
    double xmax = d[nd - 1], mean = 0, tss = 0;
    for (size_t i = 0; i < n; i++)
        mean += y[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++)
        tss += (y[i] - mean) * (y[i] - mean);
    double floor_rss = 1e-18 * (tss > 0 ? tss : 1.0);

    double cl[3], cq[3], rss_l, rss_q;
    if ((rc = ols_design(x, y, n, 0, 0, cl, &rss_l)) || (rc = ols_design(x, y, n, 1, 0, cq, &rss_q)))
        goto gslfail;
    double lin_at_max = cl[0] + cl[1] * xmax;
    m->bic_linear = bic(rss_l, floor_rss, n, 2);
    m->bic_quadratic = bic(rss_q, floor_rss, n, 3);
    m->quad_c_ms = cq[2];
    m->effect_quadratic = fabs(cq[0] + cq[1] * xmax + cq[2] * xmax * xmax - lin_at_max) /
                          fabs(lin_at_max);

    if (nd >= 4 && (rc = knee_search(x, y, n, d, nd, lin_at_max, floor_rss, m)))
        goto gslfail;
    m->done = 1;
    model_choose(m, opt, xmax);
    free(d);
    return 0;
gslfail:
    free(d);
    if (rc == LL_ENOMEM)
        goto oom;
    ll_errf(err, errlen, "model check: least-squares fit failed");
    return LL_EINVAL;
oom:
    ll_errf(err, errlen, "out of memory in model check");
    return LL_ENOMEM;
}

const char *fit_model_name(fit_model_kind k)
{
    switch (k) {
    case FIT_MODEL_QUADRATIC:
        return "quadratic";
    case FIT_MODEL_PIECEWISE:
        return "piecewise";
    default:
        return "linear";
    }
}


/* The model check compares least-squares fits, which a few wild steps (a
 * stalled client, a GC pause) would dominate. Points further than 6 robust
 * sd (1.4826 * MAD) from the median of their own N are left out first; the
 * test is model-free, so a real knee or curve is never trimmed away. Only N
 * values with at least 5 points are screened. */
int fit_model_check_run(const double *x, const double *y, size_t n, const fit_options *opt,
                        fit_model_check *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    fit_xi_pair *pr = malloc((n + 1) * sizeof *pr);
    double *buf = malloc((n + 1) * sizeof *buf), *tx = malloc((n + 1) * sizeof *tx),
           *ty = malloc((n + 1) * sizeof *ty);
    unsigned char *drop = calloc(n + 1, 1);
    int rc = 0;
    if (!pr || !buf || !tx || !ty || !drop) {
        ll_errf(err, errlen, "out of memory in model check");
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        pr[i] = (fit_xi_pair){x[i], i};
    qsort(pr, n, sizeof *pr, fit_cmp_xi_pair);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && pr[j].x == pr[i].x)
            j++;
        if (j - i >= 5) {
            for (size_t k = i; k < j; k++)
                buf[k - i] = y[pr[k].i];
            double med, sd;
            fit_median_mad(buf, j - i, &med, &sd);
            for (size_t k = i; sd > 0 && k < j; k++)
                drop[pr[k].i] = fabs(y[pr[k].i] - med) > 6 * sd;
        }
        i = j;
    }
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop[i]) {
            tx[nt] = x[i];
            ty[nt++] = y[i];
        }
    rc = model_check_core(tx, ty, nt, opt, m, err, errlen);
    m->n_trimmed = n - nt;
done:
    free(pr);
    free(buf);
    free(tx);
    free(ty);
    free(drop);
    return rc;
}
