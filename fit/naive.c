/* naive.c: the naive OLS on every step sample's (N, ms) ("naive OLS, all
 * gaps", fit_result.naive), fed level by level as reduce.c makes the
 * samples, in bounded memory.
 *
 * Up to keep points (FIT_NAIVE_KEEP) the points themselves are kept and
 * regress.c's fit_line fits them, so a run of that size gets the very
 * figures it always did. Past the bound only sums are kept (O(1) memory, not
 * 16 bytes a sample plus fit_line's copies): at the switch the kept points
 * give a centre cx (their mean x) and a provisional line ca + cb*u (u = x -
 * cx), every point is fed as (u, v = y - ca - cb*u), and the final line is
 * the provisional one plus the OLS of v on u. The sums, in long double:
 * Su[j] = sum u^j (j <= 6), Sv[j] = sum v*u^j (j <= 5), Svv[j] = sum v^2*u^j
 * (j <= 4), each run of samples with one x added at once (run_flush). They
 * give the OLS exactly (the same normal equations), and the
 * residual sums sum r^2*u^j that R2, the residual sd and the HC3 sandwich
 * need. HC3 weighs each squared residual by 1/(1-h)^2 with h the point's
 * leverage, a quadratic in u; the sums take it to first order, 1 + 2h, which
 * leaves out 3h^2 + ...: below 1e-10 relative for every point once n
 * exceeds the bound (h is about 1/n for all but extreme x). Centring and
 * the provisional line keep the sums from cancelling: they hold deviations,
 * not raw values. Measured against fit_line on the same points (tests/fit
 * test_fit.c naive_sums): a, b, their errors, R2 and the residual sd agree
 * to 1e-9 relative.
 *
 * n_distinct (distinct N: a sample's N is a time-average, so not always an
 * integer) is counted exactly in a hash set of at most FIT_NAIVE_DISTINCT
 * values; a run with more gives that many and the note says "at least". */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fit_naive_init(fit_naive *nv, size_t keep)
{
    memset(nv, 0, sizeof *nv);
    nv->keep = keep;
}

void fit_naive_free(fit_naive *nv)
{
    ll_vec_free(&nv->x);
    ll_vec_free(&nv->y);
    free(nv->set);
    nv->set = NULL;
}

/* Distinct x in an open-addressing set of 2 * FIT_NAIVE_DISTINCT slots; NAN
 * marks a free slot (x is finite here: reduce.c's samples are). */
static int distinct_add(fit_naive *nv, double x)
{
    const size_t slots = 2 * (size_t)FIT_NAIVE_DISTINCT;
    if (!nv->set) {
        if (!(nv->set = malloc(slots * sizeof *nv->set)))
            return LL_ENOMEM;
        for (size_t i = 0; i < slots; i++)
            nv->set[i] = NAN;
    }
    if (x == 0)
        x = 0; /* -0 and 0 are one value */
    uint64_t h;
    memcpy(&h, &x, sizeof h);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    for (size_t i = (size_t)(h & (slots - 1));; i = (i + 1) & (slots - 1)) {
        if (nv->set[i] == x)
            return 0;
        if (isnan(nv->set[i])) {
            if (nv->n_distinct < FIT_NAIVE_DISTINCT) {
                nv->set[i] = x;
                nv->n_distinct++;
            } else {
                nv->distinct_full = 1;
            }
            return 0;
        }
    }
}

/* A run of samples with one x (a level's steady samples share their N)
 * into the moments at once: with u fixed, Sv[j] gains u^j * sum v and
 * Svv[j] u^j * sum v^2, so each sample costs two additions, not eighteen. */
static void run_flush(fit_naive *nv)
{
    if (!nv->run_n)
        return;
    long double u = (long double)nv->run_x - nv->cx, p = 1;
    for (int j = 0; j <= 6; j++, p *= u) {
        nv->su[j] += (long double)nv->run_n * p;
        if (j <= 5)
            nv->sv[j] += nv->run_v * p;
        if (j <= 4)
            nv->svv[j] += nv->run_vv * p;
    }
    nv->run_n = 0;
    nv->run_v = nv->run_vv = 0;
}

static int sums_add(fit_naive *nv, double x, double y)
{
    if (!nv->run_n || x != nv->run_x) {
        run_flush(nv);
        nv->run_x = x;
        nv->run_c = nv->ca + nv->cb * ((long double)x - nv->cx);
        if (distinct_add(nv, x))
            return LL_ENOMEM;
    }
    long double v = (long double)y - nv->run_c;
    nv->run_n++;
    nv->run_v += v;
    nv->run_vv += v * v;
    return 0;
}

/* The switch to sums: centre and provisional line from the kept points
 * (plain means; only their closeness to the final ones matters), then the
 * kept points fed and let go. */
static int to_sums(fit_naive *nv)
{
    size_t n = nv->x.n;
    long double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        mx += nv->x.v[i];
        my += nv->y.v[i];
    }
    mx /= n ? (long double)n : 1;
    my /= n ? (long double)n : 1;
    for (size_t i = 0; i < n; i++) {
        sxx += (nv->x.v[i] - mx) * (nv->x.v[i] - mx);
        sxy += (nv->x.v[i] - mx) * (nv->y.v[i] - my);
    }
    nv->cx = mx;
    nv->ca = my;
    nv->cb = sxx > 0 ? sxy / sxx : 0;
    nv->summed = 1;
    for (size_t i = 0; i < n; i++)
        if (sums_add(nv, nv->x.v[i], nv->y.v[i]))
            return LL_ENOMEM;
    ll_vec_free(&nv->x);
    ll_vec_free(&nv->y);
    return 0;
}

int fit_naive_add(fit_naive *nv, double x, double y)
{
    nv->n++;
    if (nv->summed)
        return sums_add(nv, x, y);
    if (ll_vec_push(&nv->x, x) || ll_vec_push(&nv->y, y))
        return LL_ENOMEM;
    return nv->x.n > nv->keep ? to_sums(nv) : 0;
}

/* sum r^2 u^j for the residual r = v - da - db*u. */
static long double resid_moment(const fit_naive *nv, int j, long double da, long double db)
{
    const long double *su = nv->su, *sv = nv->sv;
    return nv->svv[j] - 2 * da * sv[j] - 2 * db * sv[j + 1] + da * da * su[j] + 2 * da * db * su[j + 1] +
           db * db * su[j + 2];
}

/* The fit from the sums ("Past the bound" above), into L as fit_ols would. */
static void fit_from_sums(const fit_naive *nv, fit_law *L)
{
    const long double *su = nv->su;
    long double det = su[0] * su[2] - su[1] * su[1];
    if (!(det > 0))
        return; /* one distinct x after all: ok stays 0 */
    long double da = (su[2] * nv->sv[0] - su[1] * nv->sv[1]) / det;
    long double db = (su[0] * nv->sv[1] - su[1] * nv->sv[0]) / det;
    long double b = nv->cb + db, a_u = nv->ca + da;
    long double R[5];
    for (int j = 0; j <= 4; j++)
        R[j] = resid_moment(nv, j, da, db);
    /* total sum of squares of y = ca + w, w = cb*u + v */
    long double sw = nv->cb * su[1] + nv->sv[0];
    long double sww = nv->cb * nv->cb * su[2] + 2 * nv->cb * nv->sv[1] + nv->svv[0];
    long double tss = sww - sw * sw / su[0], sumsq = R[0] > 0 ? R[0] : 0;
    /* HC3 in u, leverage h(u) = i00 + 2 i01 u + i11 u^2, 1/(1-h)^2 ~ 1 + 2h */
    long double i00 = su[2] / det, i01 = -su[1] / det, i11 = su[0] / det;
    long double m[3];
    for (int j = 0; j <= 2; j++)
        m[j] = R[j] + 2 * (i00 * R[j] + 2 * i01 * R[j + 1] + i11 * R[j + 2]);
    double va, vb, cov;
    fit_hc3_sandwich((double)i00, (double)i01, (double)i11, (double)m[0], (double)m[1], (double)m[2], &va, &vb, &cov);
    /* back to x = u + cx: a = a_u - b cx, var and covariance moved with it */
    double cx = (double)nv->cx;
    double var_a = va + cx * cx * vb - 2 * cx * cov;
    L->method = "ols";
    L->b_ms = (double)b;
    L->a_ms = (double)(a_u - b * nv->cx);
    L->a_se_ms = sqrt(var_a > 0 ? var_a : 0);
    L->b_se_ms = sqrt(vb > 0 ? vb : 0);
    L->cov_ab_ms2 = cov - cx * vb;
    L->r2 = tss > 0 ? (double)(1 - sumsq / tss) : 1.0;
    L->resid_sd_ms = sqrt((double)sumsq / (double)(nv->n - 2));
    L->converged = 1;
    L->ok = 1;
    fit_law_set_ci(L, (double)(nv->n - 2));
}

int fit_naive_finish(fit_naive *nv, fit_law *out, char *err, size_t errlen)
{
    if (!nv->summed) {
        int rc = fit_line(nv->x.v, nv->y.v, nv->x.n, 0, out, err, errlen);
        fit_naive_free(nv);
        return rc;
    }
    run_flush(nv);
    fit_law_nan(out);
    out->method = "ols";
    out->n_points = out->n_samples = nv->n;
    out->n_distinct = nv->n_distinct;
    if (nv->n >= 3 && nv->n_distinct >= 2)
        fit_from_sums(nv, out);
    fit_naive_free(nv);
    return 0;
}
