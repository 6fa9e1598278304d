/* model_terms.c: one least-squares design for every model of the family
 * (fit_model.h fit_model_fit): the terms' values at (N, K), the fit with HC3
 * sandwich errors, the prediction and its interval, and the formula and
 * interval decimals the headline prints. model.c decides which terms to try and which model wins. */
#include "fit_internal.h"
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multifit.h>

double fit_model_term_value(fit_term t, double knee, double n, double k)
{
    switch (t) {
    case FIT_TERM_ONE:
        return 1.0;
    case FIT_TERM_N:
        return n;
    case FIT_TERM_N2:
        return n * n;
    case FIT_TERM_HINGE:
        return n > knee ? n - knee : 0.0;
    case FIT_TERM_BUCKET:
        return fit_bucket_of(n);
    default:
        return k / 1000;
    }
}

const char *fit_term_name(fit_term t)
{
    static const char *const names[] = {"a", "N", "N^2", "(N-knee)+", "bucket(N)", "K/1k"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

double fit_model_fit_eval(const fit_model_fit *f, double n, double k)
{
    if (!f->p)
        return NAN;
    double s = 0;
    for (size_t j = 0; j < f->p; j++)
        s += f->coef[j] * fit_model_term_value(f->term[j], f->knee[j], n, k);
    return s;
}

void fit_model_fit_ci(const fit_model_fit *f, double n, double k, double ci[2])
{
    double g[FIT_MODEL_MAX_TERMS], v = 0;
    ci[0] = ci[1] = NAN;
    if (!f->p)
        return;
    for (size_t j = 0; j < f->p; j++)
        g[j] = fit_model_term_value(f->term[j], f->knee[j], n, k);
    for (size_t i = 0; i < f->p; i++)
        for (size_t j = 0; j < f->p; j++)
            v += g[i] * f->cov[i][j] * g[j];
    if (!(v >= 0))
        return;
    double mid = fit_model_fit_eval(f, n, k), hw = 1.96 * sqrt(v);
    ci[0] = mid - hw;
    ci[1] = mid + hw;
}

double fit_model_fit_slope(const fit_model_fit *f, double kr)
{
    double s = 0;
    for (size_t j = 0; j < f->p; j++) {
        if (f->term[j] == FIT_TERM_N2)
            return NAN;
        if (f->term[j] == FIT_TERM_N || f->term[j] == FIT_TERM_HINGE || f->term[j] == FIT_TERM_BUCKET)
            s += f->coef[j];
        else if (f->term[j] == FIT_TERM_K)
            s += f->coef[j] * (isfinite(kr) ? kr : 0) / 1000;
    }
    return f->p ? s : NAN;
}

void fit_model_fit_formula(const fit_model_fit *f, double scale, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t j = 0; j < f->p && at < len; j++) {
        double c = f->coef[j] * scale;
        const char *sign = j == 0 ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
        char term[48];
        switch (f->term[j]) {
        case FIT_TERM_ONE:
            term[0] = 0;
            break;
        case FIT_TERM_HINGE:
            snprintf(term, sizeof term, "*(N-%g)+", f->knee[j]);
            break;
        default:
            snprintf(term, sizeof term, "*%s", fit_term_name(f->term[j]));
        }
        int w = snprintf(buf + at, len - at, "%s%.4g%s", sign, fabs(c), term);
        if (w < 0)
            return;
        at += (size_t)w;
    }
}

/* Two significant digits of the interval's width (fit_model.h): what the
 * headline, compare's verdict and every table print an interval with. */
int fit_ci_decimals(double lo, double hi)
{
    double w = hi - lo;
    if (!(w > 0) || !isfinite(w))
        return -1;
    int d = 1 - (int)floor(log10(w));
    if (d > 9)
        return -1;
    return d < 0 ? 0 : d;
}

/* (X'X)^-1 into inv (p*p), from X (n*p); LL_EINVAL when X'X is singular. */
static int xtx_inverse(const gsl_matrix *X, gsl_matrix *inv)
{
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, X, X, 0.0, inv);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_linalg_cholesky_decomp1(inv);
    if (!st)
        st = gsl_linalg_cholesky_invert(inv);
    gsl_set_error_handler(old);
    return st ? LL_EINVAL : 0;
}

/* HC3: (X'X)^-1 [sum x_i x_i' e_i^2 / (1 - h_ii)^2] (X'X)^-1, into f->cov and
 * f->se; NANs when X'X is singular (a knee past every point left in). */
static void hc3(fit_model_fit *f, const gsl_matrix *X, const gsl_vector *e)
{
    size_t n = X->size1, p = X->size2;
    gsl_matrix *A = gsl_matrix_alloc(p, p), *M = gsl_matrix_calloc(p, p), *T = gsl_matrix_alloc(p, p),
               *C = gsl_matrix_alloc(p, p);
    int ok = A && M && T && C && !xtx_inverse(X, A);
    for (size_t i = 0; ok && i < n; i++) {
        double h = 0, xi[FIT_MODEL_MAX_TERMS];
        for (size_t a = 0; a < p; a++)
            xi[a] = gsl_matrix_get(X, i, a);
        for (size_t a = 0; a < p; a++)
            for (size_t b = 0; b < p; b++)
                h += xi[a] * gsl_matrix_get(A, a, b) * xi[b];
        double r = gsl_vector_get(e, i), w = h < 1 ? r * r / ((1 - h) * (1 - h)) : r * r;
        for (size_t a = 0; a < p; a++)
            for (size_t b = 0; b < p; b++)
                gsl_matrix_set(M, a, b, gsl_matrix_get(M, a, b) + w * xi[a] * xi[b]);
    }
    if (ok) {
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, A, M, 0.0, T);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, T, A, 0.0, C);
    }
    for (size_t a = 0; a < p; a++) {
        for (size_t b = 0; b < p; b++)
            f->cov[a][b] = ok ? gsl_matrix_get(C, a, b) : NAN;
        f->se[a] = ok && f->cov[a][a] >= 0 ? sqrt(f->cov[a][a]) : NAN;
    }
    gsl_matrix_free(A);
    gsl_matrix_free(M);
    gsl_matrix_free(T);
    gsl_matrix_free(C);
}

double fit_model_bic(double rss, double floor_rss, size_t n, int params)
{
    if (rss < floor_rss)
        rss = floor_rss; /* exact fits: keep ln finite; only differences matter */
    return (double)n * log(rss / (double)n) + (double)params * log((double)n);
}

int fit_model_fit_run(fit_model_fit *f, const double *x, const double *y, const double *k, size_t n,
                      double floor_rss, int want_cov, double *rss_out)
{
    if (n > FIT_MODEL_STREAM_MIN) /* no n x p matrices (model_stream.c) */
        return fit_model_fit_stream(f, x, y, k, n, floor_rss, want_cov, rss_out);
    size_t p = f->p;
    int rc = 0, knees = 0;
    double rss = NAN;
    gsl_matrix *X = gsl_matrix_alloc(n, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *yv = gsl_vector_alloc(n), *c = gsl_vector_alloc(p), *e = gsl_vector_alloc(n);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, p);
    if (!X || !cov || !yv || !c || !e || !w) {
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < p; j++)
            gsl_matrix_set(X, i, j, fit_model_term_value(f->term[j], f->knee[j], x[i], k ? k[i] : 0));
        gsl_vector_set(yv, i, y[i]);
    }
    if (gsl_multifit_linear(X, yv, c, cov, &rss, w)) {
        rc = LL_EINVAL;
        goto done;
    }
    for (size_t j = 0; j < p; j++) {
        f->coef[j] = gsl_vector_get(c, j);
        knees += f->term[j] == FIT_TERM_HINGE;
    }
    f->bic = fit_model_bic(rss, floor_rss, n, (int)p + knees);
    if (want_cov) {
        gsl_multifit_linear_residuals(X, yv, c, e);
        hc3(f, X, e);
    }
done:
    if (rss_out)
        *rss_out = rss;
    if (w)
        gsl_multifit_linear_free(w);
    gsl_vector_free(e);
    gsl_vector_free(c);
    gsl_vector_free(yv);
    gsl_matrix_free(cov);
    gsl_matrix_free(X);
    return rc;
}

void fit_model_fit_spec(fit_model_fit *f, fit_model_kind kind, double knee1, double knee2)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->bic = f->effect = f->worst_n = NAN;
    for (size_t j = 0; j < FIT_MODEL_MAX_TERMS; j++)
        f->knee[j] = NAN;
    fit_term t[FIT_MODEL_MAX_TERMS];
    size_t p = 0;
    t[p++] = FIT_TERM_ONE;
    int bucket = kind == FIT_MODEL_BUCKETS || kind == FIT_MODEL_BUCKETS_CONTEXT;
    t[p++] = bucket ? FIT_TERM_BUCKET : FIT_TERM_N;
    if (kind == FIT_MODEL_QUADRATIC)
        t[p++] = FIT_TERM_N2;
    if (kind == FIT_MODEL_PIECEWISE || kind == FIT_MODEL_KNEE_CONTEXT || kind == FIT_MODEL_KNEES2) {
        f->knee[p] = knee1;
        t[p++] = FIT_TERM_HINGE;
    }
    if (kind == FIT_MODEL_KNEES2) {
        f->knee[p] = knee2;
        t[p++] = FIT_TERM_HINGE;
    }
    if (kind == FIT_MODEL_CONTEXT || kind == FIT_MODEL_KNEE_CONTEXT || kind == FIT_MODEL_BUCKETS_CONTEXT)
        t[p++] = FIT_TERM_K;
    memcpy(f->term, t, p * sizeof *t);
    f->p = p;
}

int fit_model_fit_has(const fit_model_fit *f, fit_term t)
{
    for (size_t j = 0; j < f->p; j++)
        if (f->term[j] == t)
            return 1;
    return 0;
}
