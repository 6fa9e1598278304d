/* model_stream.c: a model's least-squares fit on very many points without
 * the design matrix (fit_model_fit_run past FIT_MODEL_STREAM_MIN points).
 *
 * GSL's fit (model_terms.c) builds X (n x p) and its workspace holds
 * another n x p copy: 2 x 90 MB for 2.8 M law points of four terms, the
 * largest part of `loadlaw fit`'s peak on a long run (docs/benchmarks.md),
 * and its SVD a good part of the CPU. Here each point's row is made on the
 * fly, twice:
 *  1. sequential QR (Givens rotations, Gentleman's method): every row is
 *     rotated into a p x p upper triangle R and Q'y; the coefficients by
 *     back-substitution (long double). The same least-squares solution as
 *     the SVD, and as stable (no normal equations: the condition number is
 *     not squared), so they differ by rounding only; a column with no
 *     weight left (a knee past every point) gets coefficient 0.
 *  2. the residuals: the RSS summed directly, and, when asked, the HC3
 *     sandwich with each point's leverage h = x'(R'R)^-1 x, as model_terms.c
 *     hc3 computes it from X.
 * O(p^2) memory and O(n p^2) time. tests/fit test_fit_models.c checks it
 * against the GSL fit on the same points. */
#include "fit_internal.h"
#include "model_internal.h"

#include <math.h>
#include <string.h>

#define P FIT_MODEL_MAX_TERMS

static void row_of(const fit_model_fit *f, double x, double k, double *r)
{
    for (size_t j = 0; j < f->p; j++)
        r[j] = fit_model_term_value(f->term[j], f->knee[j], x, k);
}

/* One row (r, y) rotated into R and qty (pass 1), in double: rotations are
 * backward stable, and sqrt in long double (x87) made this pass most of
 * fit's CPU. */
static void givens_row(double R[P][P], double *qty, double *r, double y, size_t p)
{
    for (size_t j = 0; j < p; j++) {
        if (r[j] == 0)
            continue;
        if (R[j][j] == 0) {
            for (size_t m = j; m < p; m++)
                R[j][m] = r[m];
            qty[j] = y;
            return;
        }
        double rho = sqrt(R[j][j] * R[j][j] + r[j] * r[j]), c = R[j][j] / rho, s = r[j] / rho;
        for (size_t m = j; m < p; m++) {
            double t = c * R[j][m] + s * r[m];
            r[m] = -s * R[j][m] + c * r[m];
            R[j][m] = t;
        }
        double t = c * qty[j] + s * y;
        y = -s * qty[j] + c * y;
        qty[j] = t;
    }
}

/* R c = qty by back-substitution; a column whose pivot is negligible
 * against the largest gets 0. Rinv: R^-1 (upper), for the leverages. */
static void solve_upper(double R[P][P], const double *qty, size_t p, long double *c, long double Rinv[P][P],
                        int *singular)
{
    long double big = 0;
    for (size_t j = 0; j < p; j++)
        big = fabsl(R[j][j]) > big ? fabsl(R[j][j]) : big;
    memset(Rinv, 0, sizeof(long double) * P * P);
    *singular = 0;
    for (size_t j = p; j-- > 0;) {
        if (!(fabsl(R[j][j]) > 1e-14L * big)) {
            c[j] = 0;
            *singular = 1;
            continue;
        }
        long double s = qty[j];
        for (size_t m = j + 1; m < p; m++)
            s -= R[j][m] * c[m];
        c[j] = s / R[j][j];
        /* column j of R^-1: solve R z = e_j upward */
        Rinv[j][j] = 1 / R[j][j];
        for (size_t i = j; i-- > 0;) {
            long double t = 0;
            for (size_t m = i + 1; m <= j; m++)
                t += R[i][m] * Rinv[m][j];
            Rinv[i][j] = fabsl(R[i][i]) > 1e-14L * big ? -t / R[i][i] : 0;
        }
    }
}

/* Pass 2: RSS, and with cov the HC3 meat sum x x' r^2 / (1-h)^2 and
 * (X'X)^-1 = Rinv Rinv', into f->cov and f->se as model_terms.c does. */
static long double residual_pass(fit_model_fit *f, const double *x, const double *y, const double *k, size_t n,
                                 const long double *c, long double Rinv[P][P], int want_cov, int singular)
{
    size_t p = f->p;
    long double rss = 0, M[P][P] = {{0}}, A[P][P] = {{0}};
    for (size_t a = 0; a < p; a++)
        for (size_t b = 0; b < p; b++)
            for (size_t m = 0; m < p; m++)
                A[a][b] += Rinv[a][m] * Rinv[b][m];
    for (size_t i = 0; i < n; i++) {
        double r[P];
        long double e = y[i];
        row_of(f, x[i], k ? k[i] : 0, r);
        for (size_t j = 0; j < p; j++)
            e -= c[j] * r[j];
        rss += e * e;
        if (!want_cov)
            continue;
        long double h = 0;
        for (size_t a = 0; a < p; a++)
            for (size_t b = 0; b < p; b++)
                h += r[a] * A[a][b] * r[b];
        long double w = h < 1 ? e * e / ((1 - h) * (1 - h)) : e * e;
        for (size_t a = 0; a < p; a++)
            for (size_t b = 0; b < p; b++)
                M[a][b] += w * r[a] * r[b];
    }
    for (size_t a = 0; want_cov && a < p; a++) {
        for (size_t b = 0; b < p; b++) {
            long double v = 0;
            for (size_t s = 0; s < p; s++)
                for (size_t t = 0; t < p; t++)
                    v += A[a][s] * M[s][t] * A[t][b];
            f->cov[a][b] = singular ? NAN : (double)v;
        }
        f->se[a] = !singular && f->cov[a][a] >= 0 ? sqrt(f->cov[a][a]) : NAN;
    }
    return rss;
}

int fit_model_fit_stream(fit_model_fit *f, const double *x, const double *y, const double *k, size_t n,
                         double floor_rss, int want_cov, double *rss_out)
{
    size_t p = f->p;
    double R[P][P] = {{0}}, qty[P] = {0}, r[P];
    long double c[P], Rinv[P][P];
    int singular, knees = 0;
    for (size_t i = 0; i < n; i++) {
        row_of(f, x[i], k ? k[i] : 0, r);
        givens_row(R, qty, r, y[i], p);
    }
    solve_upper(R, qty, p, c, Rinv, &singular);
    double rss = (double)residual_pass(f, x, y, k, n, c, Rinv, want_cov, singular);
    for (size_t j = 0; j < p; j++) {
        f->coef[j] = (double)c[j];
        knees += f->term[j] == FIT_TERM_HINGE;
    }
    f->bic = fit_model_bic(rss, floor_rss, n, (int)p + knees);
    if (rss_out)
        *rss_out = rss;
    return 0;
}
