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


/* OLS of y on [1, cols[0], ..., cols[p-2]]: coefficients (p of them), the
 * residual sum of squares, and (cov_out != NULL) their covariance, p*p row
 * major, as GSL scales it (rss/(n-p) times (X'X)^-1). */
static int ols_cols(const double *const *cols, size_t p, const double *y, size_t n, double *coef, double *rss,
                    double *cov_out)
{
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
        for (size_t j = 1; j < p; j++)
            gsl_matrix_set(X, i, j, cols[j - 1][i]);
        gsl_vector_set(yv, i, y[i]);
    }
    if (gsl_multifit_linear(X, yv, c, cov, rss, w)) {
        rc = LL_EINVAL;
        goto done;
    }
    for (size_t j = 0; j < p; j++) {
        coef[j] = gsl_vector_get(c, j);
        for (size_t q = 0; cov_out && q < p; q++)
            cov_out[j * p + q] = gsl_matrix_get(cov, j, q);
    }
done:
    if (w)
        gsl_multifit_linear_free(w);
    gsl_vector_free(c);
    gsl_vector_free(yv);
    gsl_matrix_free(cov);
    gsl_matrix_free(X);
    return rc;
}

/* OLS residual sum of squares and coefficients for y ~ design(x). kind 0:
 * [1, x]; 1: [1, x, x^2]; 2: [1, x, max(0, x - knee)]. */
static int ols_design(const double *x, const double *y, size_t n, int kind, double knee,
                      double coef[3], double *rss)
{
    double *z = NULL;
    const double *cols[2] = {x, NULL};
    if (kind) {
        if (!(z = malloc((n + 1) * sizeof *z)))
            return LL_ENOMEM;
        for (size_t i = 0; i < n; i++)
            z[i] = kind == 1 ? x[i] * x[i] : x[i] > knee ? x[i] - knee : 0.0;
        cols[1] = z;
    }
    coef[2] = 0;
    int rc = ols_cols(cols, kind ? 3 : 2, y, n, coef, rss, NULL);
    free(z);
    return rc;
}

static double bic(double rss, double floor_rss, size_t n, int k)
{
    if (rss < floor_rss)
        rss = floor_rss; /* exact fits: keep ln finite; only differences matter */
    return (double)n * log(rss / (double)n) + (double)k * log((double)n);
}

/* A richer model qualifies with BIC lower than the line's by the margin and
 * a departure from the line over the minimum effect at some level. */
static int qualifies(double bic_model, double bic_line, double effect, const fit_options *opt)
{
    return isfinite(bic_model) && bic_model < bic_line - opt->model_bic_margin && effect > opt->model_min_effect;
}

/* The model the evidence chooses (the qualifying one with the lowest BIC),
 * and the verdict that says why. */
static void model_choose(fit_model_check *m, const fit_options *opt)
{
    const struct {
        fit_model_kind k;
        double bic, effect;
    } cand[] = {{FIT_MODEL_PIECEWISE, m->bic_piecewise, m->effect_piecewise},
                {FIT_MODEL_QUADRATIC, m->bic_quadratic, m->effect_quadratic},
                {FIT_MODEL_CONTEXT, m->bic_context, m->effect_context},
                {FIT_MODEL_BUCKETS, m->bic_buckets, m->effect_buckets}};
    double best_bic = INFINITY;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (qualifies(cand[i].bic, m->bic_linear, cand[i].effect, opt) && cand[i].bic < best_bic) {
            best_bic = cand[i].bic;
            m->best = cand[i].k;
        }
    char *v = m->verdict;
    size_t n = sizeof m->verdict;
    switch (m->best) {
    case FIT_MODEL_PIECEWISE:
        snprintf(v, n, "knee at N=%g: slope %.4g ms per request before, %.4g after (BIC %.1f lower than a line; "
                       "%.0f%% off it at N=%g)",
                 m->knee_n, m->slope_before_ms, m->slope_after_ms, m->bic_linear - m->bic_piecewise,
                 100 * m->effect_piecewise, m->worst_n_piecewise);
        break;
    case FIT_MODEL_QUADRATIC:
        snprintf(v, n, "curved: %+.4g ms*N^2 (%.0f%% off the line at N=%g; BIC %.1f lower)", m->quad_c_ms,
                 100 * m->effect_quadratic, m->worst_n_quadratic, m->bic_linear - m->bic_quadratic);
        break;
    case FIT_MODEL_CONTEXT:
        snprintf(v, n, "context: %.4g + %.4g*N + %.4g*K/1k ms (c 95%% [%.3g, %.3g]; BIC %.1f lower than a line; "
                       "%.0f%% off it at N=%g)",
                 m->ctx_a_ms, m->ctx_b_ms, m->ctx_c_ms, m->ctx_c_ci_ms[0], m->ctx_c_ci_ms[1],
                 m->bic_linear - m->bic_context, 100 * m->effect_context, m->worst_n_context);
        break;
    case FIT_MODEL_BUCKETS:
        snprintf(v, n, "batch buckets: %.4g + %.4g*bucket(N) ms, N padded to 1,2,4,8,16,24,... (BIC %.1f lower "
                       "than a line; %.0f%% off it at N=%g)",
                 m->bkt_a_ms, m->bkt_b_ms, m->bic_linear - m->bic_buckets, 100 * m->effect_buckets,
                 m->worst_n_buckets);
        break;
    default: {
        int len = snprintf(v, n, "a straight line fits: quadratic BIC %+.1f (%.1f%%), knee BIC %+.1f (%.1f%%)",
                           m->bic_quadratic - m->bic_linear, 100 * m->effect_quadratic,
                           m->bic_piecewise - m->bic_linear, 100 * m->effect_piecewise);
        if (len > 0 && (size_t)len < n && isfinite(m->bic_context))
            len += snprintf(v + len, n - (size_t)len, ", context BIC %+.1f (%.1f%%)",
                            m->bic_context - m->bic_linear, 100 * m->effect_context);
        if (len > 0 && (size_t)len < n && isfinite(m->bic_buckets))
            len += snprintf(v + len, n - (size_t)len, ", buckets BIC %+.1f (%.1f%%)",
                            m->bic_buckets - m->bic_linear, 100 * m->effect_buckets);
        if (len > 0 && (size_t)len < n)
            snprintf(v + len, n - (size_t)len, "; a richer model needs BIC -%g and %.0f%% at some level",
                     opt->model_bic_margin, 100 * opt->model_min_effect);
    }
    }
}

/* N padded up to the smallest captured batch size at or above it: 1, 2, 4,
 * then multiples of 8 up to 512 (vLLM's and SGLang's CUDA-graph sizes);
 * beyond 512, N itself. */
double fit_bucket_of(double n)
{
    if (n <= 1)
        return 1;
    if (n <= 2)
        return 2;
    if (n <= 4)
        return 4;
    if (n <= 512)
        return 8 * ceil(n / 8);
    return n;
}

/* The largest relative departure of a model's prediction from the line's
 * over the distinct N (at each N the points' mean K), and that N. */
typedef struct departure {
    double effect, worst_n;
} departure;

static departure depart(const double *x, const double *k, size_t n, const double *d, size_t nd, const double cl[2],
                        fit_model_kind kind, const double *c, double knee)
{
    departure out = {0, NAN};
    for (size_t j = 0; j < nd; j++) {
        double kbar = 0;
        size_t cnt = 0;
        for (size_t i = 0; k && i < n; i++)
            if (x[i] == d[j]) {
                kbar += k[i];
                cnt++;
            }
        kbar = cnt ? kbar / (double)cnt : 0;
        double line = cl[0] + cl[1] * d[j], pred;
        switch (kind) {
        case FIT_MODEL_QUADRATIC:
            pred = c[0] + c[1] * d[j] + c[2] * d[j] * d[j];
            break;
        case FIT_MODEL_PIECEWISE:
            pred = c[0] + c[1] * d[j] + c[2] * (d[j] > knee ? d[j] - knee : 0);
            break;
        case FIT_MODEL_CONTEXT:
            pred = c[0] + c[1] * d[j] + c[2] * kbar / 1000;
            break;
        default:
            pred = c[0] + c[1] * fit_bucket_of(d[j]);
        }
        double e = fabs(pred - line) / fabs(line);
        if (e > out.effect) {
            out.effect = e;
            out.worst_n = d[j];
        }
    }
    return out;
}

/* Knee: every distinct N with at least two distinct N at or below it and
 * one above; the breakpoint counts as a fourth parameter. 0 or ols_design's
 * error. */
static int knee_search(const double *x, const double *y, size_t n, const double *d, size_t nd, const double cl[2],
                       double floor_rss, fit_model_check *m)
{
    double best_rss = INFINITY, best[3] = {0};
    int rc;
    for (size_t k = 1; k + 1 < nd; k++) {
        double cp[3], rss;
        if ((rc = ols_design(x, y, n, 2, d[k], cp, &rss)))
            return rc;
        if (rss < best_rss) {
            best_rss = rss;
            m->knee_n = d[k];
            memcpy(best, cp, sizeof best);
        }
    }
    m->slope_before_ms = best[1];
    m->slope_after_ms = best[1] + best[2];
    memcpy(m->knee_coef, best, sizeof best);
    departure dp = depart(x, NULL, n, d, nd, cl, FIT_MODEL_PIECEWISE, best, m->knee_n);
    m->effect_piecewise = dp.effect;
    m->worst_n_piecewise = dp.worst_n;
    m->bic_piecewise = bic(best_rss, floor_rss, n, 4);
    return 0;
}

/* corr(x, k); NAN when either is constant. */
static double correlation(const double *x, const double *k, size_t n)
{
    double mx = 0, mk = 0, sxx = 0, skk = 0, sxk = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        mk += k[i];
    }
    mx /= (double)n;
    mk /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        skk += (k[i] - mk) * (k[i] - mk);
        sxk += (x[i] - mx) * (k[i] - mk);
    }
    return sxx > 0 && skk > 0 ? sxk / sqrt(sxx * skk) : NAN;
}

/* K's 10th-to-90th percentile range over the points at N = at. */
static double context_spread(const double *x, const double *k, size_t n, double at)
{
    size_t m = 0;
    double *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] == at)
            v[m++] = k[i];
    double r = 0;
    if (m >= 5) {
        ll_sort_doubles(v, m);
        r = ll_quantile_sorted(v, m, 0.9) - ll_quantile_sorted(v, m, 0.1);
    }
    free(v);
    return r;
}

/* a + b*N + c*K/1000, when K was given and does not move with N. */
static int context_fit(const double *x, const double *y, const double *k, size_t n, const double *d, size_t nd,
                       const double cl[2], double floor_rss, fit_model_check *m)
{
    m->kn_corr = correlation(x, k, n);
    if (!isfinite(m->kn_corr) || fabs(m->kn_corr) > FIT_CONTEXT_COLLINEAR)
        return 0; /* not identifiable: said by the caller from kn_corr */
    double *kk = malloc((n + 1) * sizeof *kk), c[3], rss;
    if (!kk)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        kk[i] = k[i] / 1000;
    const double *cols[2] = {x, kk};
    int rc = ols_cols(cols, 3, y, n, c, &rss, &m->ctx_cov[0][0]);
    free(kk);
    if (rc)
        return rc;
    m->ctx_a_ms = c[0];
    m->ctx_b_ms = c[1];
    m->ctx_c_ms = c[2];
    double hw = 1.96 * sqrt(m->ctx_cov[2][2]);
    m->ctx_c_ci_ms[0] = c[2] - hw;
    m->ctx_c_ci_ms[1] = c[2] + hw;
    m->bic_context = bic(rss, floor_rss, n, 3);
    departure dp = depart(x, k, n, d, nd, cl, FIT_MODEL_CONTEXT, c, 0);
    m->effect_context = dp.effect;
    m->worst_n_context = dp.worst_n;
    /* Where K grows with N as N times a fixed context per request, the
     * model's level means are a line too: its effect is then the step time
     * K moves within a level (its 10th to 90th percentile there). */
    for (size_t j = 0; j < nd; j++) {
        double spread = fabs(c[2]) * context_spread(x, k, n, d[j]) / 1000, line = cl[0] + cl[1] * d[j];
        if (spread / fabs(line) > m->effect_context) {
            m->effect_context = spread / fabs(line);
            m->worst_n_context = d[j];
        }
    }
    return 0;
}

/* a + b*bucket(N), when some level's N is not a bucket size. */
static int bucket_fit(const double *x, const double *y, size_t n, const double *d, size_t nd, const double cl[2],
                      double floor_rss, fit_model_check *m)
{
    int differs = 0;
    for (size_t j = 0; j < nd; j++)
        differs |= fit_bucket_of(d[j]) != d[j];
    if (!differs)
        return 0;
    double *bx = malloc((n + 1) * sizeof *bx), c[2], rss;
    if (!bx)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        bx[i] = fit_bucket_of(x[i]);
    const double *cols[1] = {bx};
    int rc = ols_cols(cols, 2, y, n, c, &rss, NULL);
    free(bx);
    if (rc)
        return rc;
    m->bkt_a_ms = c[0];
    m->bkt_b_ms = c[1];
    m->bic_buckets = bic(rss, floor_rss, n, 2);
    departure dp = depart(x, NULL, n, d, nd, cl, FIT_MODEL_BUCKETS, c, 0);
    m->effect_buckets = dp.effect;
    m->worst_n_buckets = dp.worst_n;
    return 0;
}

static void model_reset(fit_model_check *m)
{
    m->best = FIT_MODEL_LINEAR;
    m->bic_linear = m->bic_quadratic = m->bic_piecewise = m->bic_context = m->bic_buckets = NAN;
    m->quad_c_ms = m->knee_n = m->slope_before_ms = m->slope_after_ms = NAN;
    m->effect_quadratic = m->effect_piecewise = m->effect_context = m->effect_buckets = NAN;
    m->worst_n_quadratic = m->worst_n_piecewise = m->worst_n_context = m->worst_n_buckets = NAN;
    m->ctx_a_ms = m->ctx_b_ms = m->ctx_c_ms = m->ctx_c_ci_ms[0] = m->ctx_c_ci_ms[1] = m->kn_corr = NAN;
    m->bkt_a_ms = m->bkt_b_ms = NAN;
}

static int model_check_core(const double *x, const double *y, const double *k, size_t n, const fit_options *opt,
                            fit_model_check *m, char *err, size_t errlen)
{
    model_reset(m);
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
    double tss = fit_total_ss(y, n);
    double floor_rss = 1e-18 * (tss > 0 ? tss : 1.0);

    double cl[3], cq[3], rss_l, rss_q;
    if ((rc = ols_design(x, y, n, 0, 0, cl, &rss_l)) || (rc = ols_design(x, y, n, 1, 0, cq, &rss_q)))
        goto gslfail;
    m->bic_linear = bic(rss_l, floor_rss, n, 2);
    m->bic_quadratic = bic(rss_q, floor_rss, n, 3);
    m->quad_c_ms = cq[2];
    memcpy(m->quad_coef, cq, sizeof cq);
    departure dq = depart(x, NULL, n, d, nd, cl, FIT_MODEL_QUADRATIC, cq, 0);
    m->effect_quadratic = dq.effect;
    m->worst_n_quadratic = dq.worst_n;
    if ((nd >= 4 && (rc = knee_search(x, y, n, d, nd, cl, floor_rss, m))) ||
        (k && (rc = context_fit(x, y, k, n, d, nd, cl, floor_rss, m))) ||
        (rc = bucket_fit(x, y, n, d, nd, cl, floor_rss, m)))
        goto gslfail;
    m->done = 1;
    model_choose(m, opt);
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

double fit_context_per_request(const fit_result *r)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        if (r->levels[i].closed_loop && r->levels[i].concurrency > 0 && r->levels[i].k_mean > 0) {
            sum += r->levels[i].k_mean / r->levels[i].concurrency;
            n++;
        }
    return n ? sum / (double)n : NAN;
}

double fit_model_predict(const fit_model_check *m, const fit_law *line, double n, double k)
{
    switch (m->best) {
    case FIT_MODEL_QUADRATIC:
        return m->quad_coef[0] + m->quad_coef[1] * n + m->quad_coef[2] * n * n;
    case FIT_MODEL_PIECEWISE:
        return m->knee_coef[0] + m->knee_coef[1] * n + m->knee_coef[2] * (n > m->knee_n ? n - m->knee_n : 0);
    case FIT_MODEL_CONTEXT:
        return m->ctx_a_ms + m->ctx_b_ms * n + m->ctx_c_ms * k / 1000;
    case FIT_MODEL_BUCKETS:
        return m->bkt_a_ms + m->bkt_b_ms * fit_bucket_of(n);
    default:
        return line && line->ok ? line->a_ms + line->b_ms * n : NAN;
    }
}

const char *fit_model_name(fit_model_kind k)
{
    switch (k) {
    case FIT_MODEL_QUADRATIC:
        return "quadratic";
    case FIT_MODEL_PIECEWISE:
        return "piecewise";
    case FIT_MODEL_CONTEXT:
        return "context";
    case FIT_MODEL_BUCKETS:
        return "buckets";
    default:
        return "linear";
    }
}


/* The model check compares least-squares fits, which a few wild steps (a
 * stalled client, a GC pause) would dominate. Points further than 6 robust
 * sd (1.4826 * MAD) from the median of their own N are left out first; the
 * test is model-free, so a real knee or curve is never trimmed away. Only N
 * values with at least 5 points are screened. */
int fit_model_check_run(const double *x, const double *y, const double *k, size_t n, const fit_options *opt,
                        fit_model_check *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    fit_xi_pair *pr = malloc((n + 1) * sizeof *pr);
    double *buf = malloc((n + 1) * sizeof *buf), *tx = malloc((n + 1) * sizeof *tx),
           *ty = malloc((n + 1) * sizeof *ty), *tk = malloc((n + 1) * sizeof *tk);
    unsigned char *drop = calloc(n + 1, 1);
    int rc = 0;
    if (!pr || !buf || !tx || !ty || !tk || !drop) {
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
            for (size_t q = i; q < j; q++)
                buf[q - i] = y[pr[q].i];
            double med, sd;
            fit_median_mad(buf, j - i, &med, &sd);
            for (size_t q = i; sd > 0 && q < j; q++)
                drop[pr[q].i] = fabs(y[pr[q].i] - med) > 6 * sd;
        }
        i = j;
    }
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop[i]) {
            tx[nt] = x[i];
            tk[nt] = k ? k[i] : 0;
            ty[nt++] = y[i];
        }
    rc = model_check_core(tx, ty, k ? tk : NULL, nt, opt, m, err, errlen);
    m->n_trimmed = n - nt;
done:
    free(pr);
    free(buf);
    free(tx);
    free(ty);
    free(tk);
    free(drop);
    return rc;
}
