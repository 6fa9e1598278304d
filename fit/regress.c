/* regress.c: the straight-line fits with 95% CIs: the law's trimmed mean
 * fit (analyze_law.c "The law") and OLS.
 *
 * The law estimates the mean step. Step-time noise grows with the step
 * (jitter is relative; big batches wander more) and the points at large N
 * carry the slope, so no fit may assume one noise level for all N. The
 * trimmed fit: each point's noise scale (MAD of its N's OLS residuals), a
 * bisquare line on the scaled rows that only serves to mark outliers (more
 * than FIT_TRIM_SD robust sd away: stalls, burst reads), then weighted least
 * squares on the rest with weights 1/(bisquare line)^2 and HC3 sandwich
 * standard errors. OLS reports HC3 errors too. Intervals use the t
 * distribution with n - 2 degrees of freedom. Coverage of the 95% intervals,
 * re-measured with the law's points sized by their tokens and closed-loop
 * levels at N = C only (40 seeds each, tests/fit sim; 400 seeds in
 * brackets): gaussian 5% jitter on C = 1..16, 2 waves a level
 * (test_noise_coverage, seeds 1000..): a 38/40, b 38/40, mean line 38-39/40
 * per level (39/40 at N = 8) [a 95%, b 96%, mean line 95-97%]; the same
 * staggered, 2 prefills a step: a 39/40, b 37/40, mean line 37-39/40;
 * lockstep C = 1..256, 3 + 0.05 N ms: gaussian 5% a 38/40, b 37/40, mean
 * line 34-38/40; lognormal 25% a 37/40, b 38/40, mean line 35-38/40;
 * exponential 30% a 38/40, b 36/40, mean line 35-39/40 [94-96% for a and
 * b, 94-97% for the mean line at every level, in all three]. HC3 errors
 * match the spread of the estimates across seeds (se/sd 0.97-1.08), skew
 * included. When GSL's robust fit fails, the answer is OLS labelled
 * "ols-fallback" with the reason in fit_law.note, never the robust label. */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>

void fit_law_nan(fit_law *L)
{
    memset(L, 0, sizeof *L);
    L->a_ms = L->b_ms = L->a_se_ms = L->b_se_ms = L->r2 = L->resid_sd_ms = NAN;
    L->cov_ab_ms2 = L->t_crit = NAN;
    L->a_ci_ms[0] = L->a_ci_ms[1] = L->b_ci_ms[0] = L->b_ci_ms[1] = NAN;
}

/* fit_internal.h. */
double fit_total_ss(const double *y, size_t n)
{
    double mean = 0, tss = 0;
    for (size_t i = 0; i < n; i++)
        mean += y[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++)
        tss += (y[i] - mean) * (y[i] - mean);
    return tss;
}

/* Distinct values of x, sorted, into *out (caller frees). */
int fit_distinct_x(const double *x, size_t n, double **out, size_t *nd)
{
    double *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return LL_ENOMEM;
    if (n) /* x may be NULL when n == 0 */
        memcpy(v, x, n * sizeof *v);
    ll_sort_doubles(v, n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1])
            v[k++] = v[i];
    *out = v;
    *nd = k;
    return 0;
}

void fit_law_set_ci(fit_law *L, double dof)
{
    double t = gsl_cdf_tdist_Pinv(0.975, dof);
    L->t_crit = t;
    L->a_ci_ms[0] = L->a_ms - t * L->a_se_ms;
    L->a_ci_ms[1] = L->a_ms + t * L->a_se_ms;
    L->b_ci_ms[0] = L->b_ms - t * L->b_se_ms;
    L->b_ci_ms[1] = L->b_ms + t * L->b_se_ms;
}

/* fit_internal.h. V = I M I, with I and M symmetric 2x2. */
void fit_hc3_sandwich(double i00, double i01, double i11, double m00, double m01, double m11, double *var_a,
                      double *var_b, double *cov_ab)
{
    double t00 = i00 * m00 + i01 * m01, t01 = i00 * m01 + i01 * m11;
    double t10 = i01 * m00 + i11 * m01, t11 = i01 * m01 + i11 * m11;
    *var_a = t00 * i00 + t01 * i01;
    *var_b = t10 * i01 + t11 * i11;
    *cov_ab = t00 * i01 + t01 * i11;
}

/* HC3 covariance of (a, b) for weighted least squares with weights w (NULL:
 * all 1) and residuals r: (X'WX)^-1 [sum w^2 r^2 x x' / (1-h)^2] (X'WX)^-1. */
static void hc3_se(const double *x, const double *r, const double *w, size_t n, double *se_a,
                   double *se_b, double *cov_ab)
{
    double s0 = 0, s1 = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        s0 += wi;
        s1 += wi * x[i];
        s2 += wi * x[i] * x[i];
    }
    double det = s0 * s2 - s1 * s1;
    if (!(det > 0)) {
        *se_a = *se_b = *cov_ab = NAN;
        return;
    }
    /* inverse of [[s0, s1], [s1, s2]] */
    double i00 = s2 / det, i01 = -s1 / det, i11 = s0 / det;
    double m00 = 0, m01 = 0, m11 = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        double h = wi * (i00 + 2 * i01 * x[i] + i11 * x[i] * x[i]);
        double d = 1.0 - h;
        if (d < 1e-12)
            d = 1e-12; /* a point that alone fixes the line: leverage 1 */
        double e = wi * r[i] / d, e2 = e * e;
        m00 += e2;
        m01 += e2 * x[i];
        m11 += e2 * x[i] * x[i];
    }
    double v00, v11;
    fit_hc3_sandwich(i00, i01, i11, m00, m01, m11, &v00, &v11, cov_ab);
    *se_a = sqrt(v00 > 0 ? v00 : 0);
    *se_b = sqrt(v11 > 0 ? v11 : 0);
}

static int fit_ols(const double *x, const double *y, size_t n, fit_law *L, char *err,
                   size_t errlen)
{
    double c0, c1, cov00, cov01, cov11, sumsq;
    int st = gsl_fit_linear(x, 1, y, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (st) {
        ll_errf(err, errlen, "OLS fit failed: %s", gsl_strerror(st));
        return LL_EINVAL;
    }
    double tss = fit_total_ss(y, n);
    double *r = calloc(n + 1, sizeof *r);
    if (!r) {
        ll_errf(err, errlen, "out of memory in fit");
        return LL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = y[i] - (c0 + c1 * x[i]);
    (void)cov00;
    (void)cov01;
    (void)cov11;
    L->method = "ols";
    L->a_ms = c0;
    L->b_ms = c1;
    hc3_se(x, r, NULL, n, &L->a_se_ms, &L->b_se_ms, &L->cov_ab_ms2);
    free(r);
    L->r2 = tss > 0 ? 1.0 - sumsq / tss : 1.0;
    L->resid_sd_ms = sqrt(sumsq / (double)(n - 2));
    L->converged = 1;
    fit_law_set_ci(L, (double)(n - 2));
    return 0;
}

void fit_median_mad(double *v, size_t n, double *med, double *sd)
{
    ll_sort_doubles(v, n);
    *med = ll_quantile_sorted(v, n, 0.5);
    for (size_t k = 0; k < n; k++)
        v[k] = fabs(v[k] - *med);
    ll_sort_doubles(v, n);
    /* 1.4826 * MAD estimates a normal distribution's standard deviation. */
    *sd = 1.4826 * ll_quantile_sorted(v, n, 0.5);
}

int fit_cmp_xi_pair(const void *a, const void *b)
{
    double u = ((const fit_xi_pair *)a)->x, v = ((const fit_xi_pair *)b)->x;
    return (u > v) - (u < v);
}

/* Robust scale of each point's noise: 1.4826 * MAD of the OLS residuals of
 * the points that share its x, for x values with at least 5 points; other
 * points borrow the nearest such x's scale. All 1 (no weighting) unless two
 * x values qualify, or when the data are exact (MAD 0). */
#define SCALE_MIN_GROUP 5
static int group_scales(const double *x, const double *r, size_t n, double *s)
{
    int rc = 0;
    fit_xi_pair *ord = malloc(n * sizeof *ord);
    double *buf = malloc(n * sizeof *buf), *gx = malloc(n * sizeof *gx),
           *gs = malloc(n * sizeof *gs);
    if (!ord || !buf || !gx || !gs) {
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        ord[i] = (fit_xi_pair){x[i], i};
        s[i] = 1.0;
    }
    qsort(ord, n, sizeof *ord, fit_cmp_xi_pair);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && ord[j].x == ord[i].x)
            j++;
        if (j - i >= SCALE_MIN_GROUP) {
            for (size_t k = i; k < j; k++)
                buf[k - i] = r[ord[k].i];
            double med, mad;
            fit_median_mad(buf, j - i, &med, &mad);
            if (mad > 0) {
                gx[ng] = ord[i].x;
                gs[ng++] = mad;
            }
        }
        i = j;
    }
    if (ng < 2)
        goto done;
    double smax = 0;
    for (size_t g = 0; g < ng; g++)
        smax = gs[g] > smax ? gs[g] : smax;
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        for (size_t g = 1; g < ng; g++)
            if (fabs(gx[g] - x[i]) < fabs(gx[best] - x[i]))
                best = g;
        s[i] = gs[best] > 1e-3 * smax ? gs[best] : 1e-3 * smax;
    }
done:
    free(ord);
    free(buf);
    free(gx);
    free(gs);
    return rc;
}

/* The robust pass: a bisquare M-estimate on rows scaled by each point's
 * noise scale sc (weighted least squares inside the iterations, so noisy
 * large-N steps do not look like outliers next to quiet small-N ones). Its
 * line only tells the outliers apart (fit_trimmed); it is not the answer.
 * 0 with *ok = 0 when GSL's fit failed (status, or a line that is not
 * finite); the caller then falls back to OLS and says so. */
static int bisquare_line(const double *x, const double *y, const double *sc, size_t n,
                         double *a, double *b, int *converged, int *ok, char *why, size_t whylen)
{
    int rc = 0;
    *ok = 0;
    gsl_matrix *X = gsl_matrix_alloc(n, 2);
    gsl_vector *yv = gsl_vector_alloc(n), *c = gsl_vector_alloc(2);
    gsl_matrix *cov = gsl_matrix_alloc(2, 2);
    gsl_multifit_robust_workspace *w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, 2);
    if (!X || !yv || !c || !cov || !w) {
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(X, i, 0, 1.0 / sc[i]);
        gsl_matrix_set(X, i, 1, x[i] / sc[i]);
        gsl_vector_set(yv, i, y[i] / sc[i]);
    }
    int st = gsl_multifit_robust(X, yv, c, cov, w);
    *a = gsl_vector_get(c, 0);
    *b = gsl_vector_get(c, 1);
    *converged = st == 0;
    if (st && st != GSL_EMAXITER)
        snprintf(why, whylen, "GSL's robust fit failed (%s)", gsl_strerror(st));
    else if (!isfinite(*a) || !isfinite(*b))
        snprintf(why, whylen, "GSL's robust fit gave no finite line");
    else
        *ok = 1;
done:
    if (w)
        gsl_multifit_robust_free(w);
    gsl_matrix_free(cov);
    gsl_vector_free(c);
    gsl_vector_free(yv);
    gsl_matrix_free(X);
    return rc;
}

/* Weighted least squares (weights w = size/sc^2; size NULL: 1) on the points
 * keep[i] != 0, with HC3 sandwich errors: the law's answer once the outliers
 * are out. */
static int wls_kept(const double *x, const double *y, const double *sc, const double *size,
                    const unsigned char *keep, size_t n, fit_law *L, char *err, size_t errlen)
{
    int rc = 0;
    size_t k = 0;
    double *kx = malloc(4 * (n + 1) * sizeof *kx);
    if (!kx) {
        ll_errf(err, errlen, "out of memory in fit");
        return LL_ENOMEM;
    }
    double *ky = kx + (n + 1), *kw = ky + (n + 1), *kr = kw + (n + 1);
    for (size_t i = 0; i < n; i++)
        if (keep[i]) {
            kx[k] = x[i];
            ky[k] = y[i];
            kw[k++] = (size ? size[i] : 1.0) / (sc[i] * sc[i]);
        }
    double c0, c1, v00, v01, v11, wsumsq;
    int st = gsl_fit_wlinear(kx, 1, kw, 1, ky, 1, k, &c0, &c1, &v00, &v01, &v11, &wsumsq);
    if (st || !isfinite(c0) || !isfinite(c1)) {
        ll_errf(err, errlen, "weighted fit failed: %s", st ? gsl_strerror(st) : "not finite");
        rc = LL_EINVAL;
        goto done;
    }
    double mean = 0, tss = 0, sse = 0;
    for (size_t i = 0; i < k; i++) {
        kr[i] = ky[i] - (c0 + c1 * kx[i]);
        mean += ky[i];
    }
    mean /= (double)k;
    for (size_t i = 0; i < k; i++) {
        tss += (ky[i] - mean) * (ky[i] - mean);
        sse += kr[i] * kr[i];
    }
    L->a_ms = c0;
    L->b_ms = c1;
    hc3_se(kx, kr, kw, k, &L->a_se_ms, &L->b_se_ms, &L->cov_ab_ms2);
    L->r2 = tss > 0 ? 1.0 - sse / tss : 1.0;
    L->resid_sd_ms = sqrt(sse / (double)(k - 2));
    fit_law_set_ci(L, (double)(k - 2));
done:
    free(kx);
    return rc;
}

/* Outliers are isolated stalls and burst reads, never a level's bulk, and
 * whether a point is one is judged within its own N, against the median and
 * the robust sd (1.4826 * MAD) of that N's points: its healthy steps, as
 * long as they are most of them. The line is no judge there: it follows the
 * majority of levels, so a real level off it (a knee the line does not bend
 * for) would count as "12 sd" away whole (on the bundled engine at 10 + 10 N
 * ms with a knee to 5 ms at N = 8, C = 1..24, the three levels above the
 * knee went out and the law came back at the slope below it: b 0.995
 * against 0.743 by OLS).
 *
 * When more than FIT_TRIM_NOISY_SHARE of an N's points lie that far out, they
 * are the level's own noise, not stalls: over a lossy link a stream waits
 * for a retransmission and then gets the held chunks at once, so its gaps
 * keep their sum, and trimming the long ones alone would bias the mean down
 * (b 5% low with 5% of chunks lost). Such a level keeps its far points,
 * except those far beyond even its noisy spread: taken from the farthest in,
 * a point more than FIT_TRIM_SD sd (the plain sd of the points nearer than
 * it, around the median) from the median is a stall, whatever share of its
 * level is noisy (a 3 s partition on that link: its one step point stayed
 * in, under a rule that kept every far point of such a level, and the law
 * moved 18%). An N with fewer than SCALE_MIN_GROUP points, or whose points
 * do not spread (MAD 0), keeps the line's verdict (mark_outliers). */
#define FIT_TRIM_NOISY_SHARE 0.1

/* A noisy N's stalls (above): dev holds the n points' |y - median|, sorted
 * in decreasing order; the count of the leading ones that are stalls. */
static size_t noisy_stalls(const double *dev, size_t n)
{
    double sum2 = 0;
    for (size_t i = 0; i < n; i++)
        sum2 += dev[i] * dev[i];
    size_t k = 0;
    for (; k + 2 < n; k++) {
        sum2 -= dev[k] * dev[k]; /* the spread of the points nearer than dev[k] */
        if (!(dev[k] > FIT_TRIM_SD * sqrt(sum2 / (double)(n - k - 2))))
            break;
    }
    return k;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* One N's points (ord[i..j), their y gathered in buf): keep[] as above;
 * returns how many go. */
static size_t judge_level(const double *y, const fit_xi_pair *ord, size_t i, size_t j, double *buf,
                          unsigned char *keep)
{
    size_t n = j - i, far = 0, out = 0;
    double med = 0, sd = 0;
    if (n >= SCALE_MIN_GROUP)
        fit_median_mad(buf, n, &med, &sd);
    double cut = FIT_TRIM_SD * sd;
    for (size_t k = i; k < j && sd > 0; k++)
        far += fabs(y[ord[k].i] - med) > cut;
    if (sd > 0 && (double)far > FIT_TRIM_NOISY_SHARE * (double)n) {
        for (size_t k = i; k < j; k++)
            buf[k - i] = fabs(y[ord[k].i] - med);
        qsort(buf, n, sizeof *buf, cmp_desc);
        size_t stalls = noisy_stalls(buf, n);
        cut = stalls ? buf[stalls - 1] : INFINITY;
        for (size_t k = i; k < j; k++) /* the nearest stall goes too: >= */
            keep[ord[k].i] = fabs(y[ord[k].i] - med) < cut;
    } else if (sd > 0) {
        for (size_t k = i; k < j; k++)
            keep[ord[k].i] = fabs(y[ord[k].i] - med) <= cut;
    }
    for (size_t k = i; k < j; k++)
        out += !keep[ord[k].i];
    return out;
}

/* Each N judged on its own (above). Sorts ord (n entries) by x; returns the
 * number of points left out. */
static size_t judge_by_level(const double *x, const double *y, size_t n, fit_xi_pair *ord, double *buf,
                             unsigned char *keep)
{
    for (size_t i = 0; i < n; i++)
        ord[i] = (fit_xi_pair){x[i], i};
    qsort(ord, n, sizeof *ord, fit_cmp_xi_pair);
    size_t trimmed = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && ord[j].x == ord[i].x; j++)
            buf[j - i] = y[ord[j].i];
        trimmed += judge_level(y, ord, i, j, buf, keep);
    }
    return trimmed;
}

/* Outliers: first the line's verdict, points whose scaled residual from the
 * bisquare line lies more than FIT_TRIM_SD robust standard deviations
 * (1.4826 * MAD of the scaled residuals, around their median) from the
 * median (nothing when that MAD is 0: a noise-free line); then each N's own
 * (judge_by_level). Returns the number trimmed, or (size_t)-1 when out of
 * memory. */
static size_t mark_outliers(const double *x, const double *y, const double *sc, size_t n,
                            double a, double b, double *buf, unsigned char *keep)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (y[i] - (a + b * x[i])) / sc[i];
    double *tmp = buf + n;
    memcpy(tmp, buf, n * sizeof *tmp);
    double med, sd;
    fit_median_mad(tmp, n, &med, &sd);
    for (size_t i = 0; i < n; i++)
        keep[i] = !(sd > 0) || fabs(buf[i] - med) <= FIT_TRIM_SD * sd;
    fit_xi_pair *ord = malloc((n + 1) * sizeof *ord);
    if (!ord)
        return (size_t)-1;
    size_t trimmed = judge_by_level(x, y, n, ord, buf, keep);
    free(ord);
    return trimmed;
}

/* analyze_law.c "The law": the mean step, robust only against true outliers. Scales
 * (group_scales) -> bisquare line -> outliers marked -> WLS on the rest.
 * When the bisquare fails, or trimming leaves too little, the answer is OLS
 * on every point, labelled "ols-fallback" with the reason in L->note. */
static int fit_trimmed(const double *x, const double *y, const double *size, size_t n, fit_law *L,
                       char *err, size_t errlen)
{
    int rc = 0, ok = 0, converged = 0;
    double *sc = malloc(4 * (n + 1) * sizeof *sc);
    unsigned char *keep = malloc(n + 1);
    char why[120] = "";
    if (!sc || !keep) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "out of memory in fit");
        goto done;
    }
    double *r = sc + (n + 1), *buf = r + (n + 1);
    double c0, c1, v00, v01, v11, sumsq, a0 = NAN, b0 = NAN;
    if (gsl_fit_linear(x, 1, y, 1, n, &c0, &c1, &v00, &v01, &v11, &sumsq) == 0) {
        for (size_t i = 0; i < n; i++)
            r[i] = y[i] - (c0 + c1 * x[i]);
        if ((rc = group_scales(x, r, n, sc))) {
            ll_errf(err, errlen, "out of memory in fit");
            goto done;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            sc[i] = 1.0;
    }
    if ((rc = bisquare_line(x, y, sc, n, &a0, &b0, &converged, &ok, why, sizeof why))) {
        ll_errf(err, errlen, "out of memory in robust fit");
        goto done;
    }
    if (ok) {
        L->n_trimmed = mark_outliers(x, y, sc, n, a0, b0, buf, keep);
        if (L->n_trimmed == (size_t)-1) {
            rc = LL_ENOMEM;
            ll_errf(err, errlen, "out of memory in fit");
            goto done;
        }
        double *kd = NULL;
        size_t k = 0, nd = 0;
        for (size_t i = 0; i < n; i++)
            if (keep[i])
                r[k++] = x[i];
        if ((rc = fit_distinct_x(r, k, &kd, &nd))) {
            ll_errf(err, errlen, "out of memory in fit");
            goto done;
        }
        free(kd);
        if (k < 3 || nd < 2) {
            ok = 0;
            snprintf(why, sizeof why, "outliers left %zu points over %zu distinct N", k, nd);
        }
    }
    if (!ok) {
        L->n_trimmed = 0;
        rc = fit_ols(x, y, n, L, err, errlen);
        L->method = "ols-fallback";
        snprintf(L->note, sizeof L->note, "%s: OLS on every point, no outlier left out", why);
        goto done;
    }
    /* Weights from the bisquare line's step time (noise relative to the
     * step), not from each N's own spread: with skewed jitter a group's
     * spread grows with its mean, and weighting by it pulled the line below
     * the mean by about one standard error. */
    for (size_t i = 0; i < n; i++) {
        double s_line = a0 + b0 * x[i];
        buf[i] = s_line > 0 && isfinite(s_line) ? s_line : sc[i];
    }
    rc = wls_kept(x, y, buf, size, keep, n, L, err, errlen);
    L->method = "trimmed-wls";
    L->converged = converged;
done:
    free(sc);
    free(keep);
    return rc;
}

void fit_law_mean_ci(const fit_law *L, double n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (!L->ok)
        return;
    double var = L->a_se_ms * L->a_se_ms + n * n * L->b_se_ms * L->b_se_ms + 2 * n * L->cov_ab_ms2;
    /* the sandwich matrix is positive semi-definite; rounding may leave -0 */
    double half = L->t_crit * sqrt(var > 0 ? var : 0);
    *lo = L->a_ms + L->b_ms * n - half;
    *hi = L->a_ms + L->b_ms * n + half;
}

int fit_law_slope_resolved(const fit_law *L)
{
    return L->ok && L->b_ms > 0 && L->b_ci_ms[0] > 0;
}

int fit_line(const double *x, const double *y, size_t n, int robust, fit_law *out, char *err,
             size_t errlen)
{
    return fit_line_sized(x, y, NULL, n, robust, out, err, errlen);
}

int fit_line_sized(const double *x, const double *y, const double *size, size_t n, int robust,
                   fit_law *out, char *err, size_t errlen)
{
    fit_law_nan(out);
    out->method = robust ? "trimmed-wls" : "ols";
    out->n_points = out->n_samples = n;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            ll_errf(err, errlen, "fit_line: point %zu is not finite", i);
            return LL_EINVAL;
        }
    double *d = NULL;
    size_t nd = 0;
    if (fit_distinct_x(x, n, &d, &nd)) {
        ll_errf(err, errlen, "out of memory in fit");
        return LL_ENOMEM;
    }
    free(d);
    out->n_distinct = nd;
    if (n < 3 || nd < 2)
        return 0; /* not an error: too little data, ok stays 0 */
    for (size_t i = 0; size && i < n; i++)
        if (!(size[i] > 0) || !isfinite(size[i])) {
            ll_errf(err, errlen, "fit_line: point %zu has no positive size", i);
            return LL_EINVAL;
        }
    int rc = robust ? fit_trimmed(x, y, size, n, out, err, errlen) : fit_ols(x, y, n, out, err, errlen);
    if (rc == 0)
        out->ok = 1;
    return rc;
}
