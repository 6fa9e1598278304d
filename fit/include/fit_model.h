/* fit_model.h: the law's line and the family of step-time models it is
 * checked against; the method and its measured coverage open fit/regress.c
 * and fit/model.c. Steps in ms; N running requests; K their context tokens. */
#ifndef LOADLAW_FIT_MODEL_H
#define LOADLAW_FIT_MODEL_H

#include <stddef.h>

/* y = a + b*x; ok = 0 with under 3 points or 2 distinct x (numbers NAN). */
typedef struct fit_law {
    int ok;
    const char *method;       /* "trimmed-wls" (the law) | "ols" | "ols-fallback" (note says why) */
    double a_ms, b_ms;
    double a_ci_ms[2], b_ci_ms[2]; /* 95% */
    double a_se_ms, b_se_ms, cov_ab_ms2; /* HC3 sandwich; the band needs the covariance */
    double t_crit;            /* t quantile behind the CIs (n - 2 dof) */
    double r2, resid_sd_ms;
    size_t n_points, n_trimmed; /* points given; outliers left out of them */
    size_t n_samples, n_distinct; /* raw step samples behind them; distinct x */
    int converged;            /* the bisquare pass converged */
    char note[160];           /* "" or why the fit fell back */
} fit_law;
/* The 95% interval of the mean line a + b*n at n; NAN when !ok. */
void fit_law_mean_ci(const fit_law *L, double n, double *lo, double *hi);
/* 1 when ok and b's interval lies above 0: only then do 1/b (the ceiling),
 * a/b (N1/2) and a ratio of slopes mean anything. */
int fit_law_slope_resolved(const fit_law *L);

typedef enum fit_model_kind {
    FIT_MODEL_LINEAR = 0, FIT_MODEL_QUADRATIC = 1,
    FIT_MODEL_PIECEWISE = 2,       /* two lines joined at a knee */
    FIT_MODEL_CONTEXT = 3,         /* a + b*N + c*K/1000 */
    FIT_MODEL_BUCKETS = 4,         /* a + b*bucket(N): batches padded to captured sizes */
    FIT_MODEL_KNEES2 = 5,          /* three lines joined at two knees */
    FIT_MODEL_KNEE_CONTEXT = 6,
    FIT_MODEL_BUCKETS_CONTEXT = 7,
} fit_model_kind;
const char *fit_model_name(fit_model_kind k); /* "linear", "two-knees", "buckets+context", ... */

/* A model as one least-squares design: step = sum coef[j] * term_j(N, K). */
#define FIT_MODEL_MAX_TERMS 6
typedef enum fit_term {
    FIT_TERM_ONE = 0, FIT_TERM_N, FIT_TERM_N2,
    FIT_TERM_HINGE,           /* max(0, N - knee[j]) */
    FIT_TERM_BUCKET,          /* N padded up to a captured batch size */
    FIT_TERM_K,               /* K/1000 */
} fit_term;
typedef struct fit_model_fit {
    fit_model_kind kind;
    size_t p;                            /* terms; 0: not fitted */
    fit_term term[FIT_MODEL_MAX_TERMS];
    double knee[FIT_MODEL_MAX_TERMS];    /* FIT_TERM_HINGE's N, else NAN */
    double coef[FIT_MODEL_MAX_TERMS], se[FIT_MODEL_MAX_TERMS]; /* HC3 errors */
    double cov[FIT_MODEL_MAX_TERMS][FIT_MODEL_MAX_TERMS];
    double bic;                          /* knees count as parameters */
    double effect, worst_n;              /* largest departure from the line, and where */
} fit_model_fit;
/* "20.1 + 2.01*N + 0.498*K/1k": coefficients times scale (1, or 1/time_scale). */
void fit_model_fit_formula(const fit_model_fit *f, double scale, char *buf, size_t len);
const char *fit_term_name(fit_term t); /* "a", "N", "N^2", "(N-knee)+", "bucket(N)", "K/1k" */
int fit_model_fit_has(const fit_model_fit *f, fit_term t);

/* A model fits a level within this share of its step; the headline says so
 * first when the chosen one misses a level by more. */
#define FIT_MODEL_LEVEL_FIT 0.05

/* The chosen family refitted without the level at N (fit/model_loo.c
 * "Held-out prediction"); ok = 0 when it cannot be fitted without it. */
#define FIT_MODEL_MAX_HELDOUT 64
typedef struct fit_model_heldout {
    double n;
    int ok;
    fit_model_fit f;
} fit_model_heldout;
/* A model refitted without a level predicts it within this share of its
 * throughput; the headline warns when one misses by more. */
#define FIT_HELDOUT_BOUND 0.05

/* Each richer model against the line (fit/model.c); NAN where not fitted;
 * effect_*: largest relative departure from the line, at worst_n_*. */
typedef struct fit_model_check {
    int done;                 /* 0: too few distinct N (needs 3) */
    fit_model_kind best;
    double bic_linear, bic_quadratic, bic_piecewise, bic_context, bic_buckets;
    double quad_c_ms, knee_n, slope_before_ms, slope_after_ms;
    double effect_quadratic, effect_piecewise, effect_context, effect_buckets;
    double worst_n_quadratic, worst_n_piecewise, worst_n_context, worst_n_buckets;
    double ctx_a_ms, ctx_b_ms, ctx_c_ms, ctx_c_ci_ms[2]; /* c per 1k context tokens */
    double ctx_cov[3][3];     /* OLS covariance of (a, b, c) */
    double kn_corr;           /* corr(N, K) over the points; NAN without K */
    double bkt_a_ms, bkt_b_ms;
    double quad_coef[3], knee_coef[3];
    char verdict[448];
    size_t n_trimmed;         /* wild points left out of the check */
    fit_model_fit chosen;     /* p = 0 for the line (the law is its own fit) */
    fit_model_fit knees2, knee_context, buckets_context; /* p = 0: not fitted */
    double alone_n;           /* the level (N) the choice rests on alone; NAN: none */
    int context_negative;     /* a context model qualified with c not above 0: set aside */
    size_t n_heldout;         /* one per distinct N, in N order; 0: not made (no_heldout says why) */
    fit_model_heldout heldout[FIT_MODEL_MAX_HELDOUT];
    char no_heldout[128];
} fit_model_check;
/* The chosen model's step at N and K (the line's if chosen; NAN: no check). */
double fit_model_predict(const fit_model_check *m, const fit_law *line, double n, double k);

/* Decimals that show [lo, hi] with two significant digits of its width
 * ("[5.199, 5.202]", not "[5.2, 5.2]"); -1: zero, NAN or under 1e-9 wide. */
int fit_ci_decimals(double lo, double hi);

#endif
