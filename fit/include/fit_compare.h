/* fit_compare.h: run B against the baseline A (fit/compare.c: levels matched
 * by load, each level's steady-rate ratio with a bootstrap interval over
 * engine steps or, for an interleaved A/B, a paired one; the laws' slope
 * ratio; the verdict). Tables and pages: reports/report.h. */
#ifndef LOADLAW_FIT_COMPARE_H
#define LOADLAW_FIT_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "fit.h"

typedef struct fit_level_latency { fit_dist ttft, ttfa, itl; } fit_level_latency;
/* A level's latencies as fit_level holds them, by the same code from the
 * records (level: its index there), with the sorted samples where asked
 * (caller frees each; NULL to skip). */
int fit_level_latency_get(const fit_run *run, int level, fit_level_latency *out, double **ttft_out,
                          double **ttfa_out, double **itl_out, size_t *n_itl_out, char *err, size_t errlen);

#define FIT_COMPARE_MIN_UNITS 10      /* fewer units a side: no interval (a gate fails) */
#define FIT_COMPARE_MIN_RESAMPLES 200 /* fewer resamples are refused */
typedef struct fit_compare_options {
    int n_resamples;          /* default 2000; 0: no intervals */
    uint64_t seed;            /* default 1 */
    double ci;                /* default 0.95 */
    int resample_requests;    /* tests: one unit per request, not per engine step */
    int ignore_pairs;         /* tests: unpaired even when the levels are paired */
} fit_compare_options;
void fit_compare_options_default(fit_compare_options *o);

typedef struct fit_compare_level {
    int concurrency;          /* C; an open level's cap on in-flight (0 = none) */
    int open_loop;            /* matched by rate_per_s (NAN when closed) */
    double rate_per_s;
    int level_a, level_b;     /* records level indices (the first pair's) */
    int steady;               /* 1: steady windows in both; 0: decode spans */
    size_t n_req_a, n_req_b, n_units_a, n_units_b; /* units: steps, or requests */
    double tok_per_s_a, tok_per_s_b;
    double ratio, ratio_ci[2];/* B / A; NAN when a side has no data */
    const char *ratio_method; /* "bootstrap" | "paired" */
    size_t n_pairs;           /* paired: pairs used; pair_ratio B/A each (owned) */
    double *pair_ratio;
    double within_var, between_var, df; /* paired: log scale; df INFINITY: normal */
    fit_level_latency lat_a, lat_b;
    double model_ratio;       /* closed: B/A as the chosen models predict it; else NAN */
} fit_compare_level;

typedef struct fit_compare {
    fit_law law_a, law_b;
    double asym_a_tok_per_s, asym_b_tok_per_s, slope_a_ms, slope_b_ms;
    double slope_ratio, slope_ratio_ci[2]; /* B / A; NAN when unknown */
    const char *slope_method;              /* "bootstrap" | "delta" | "none" | "unresolved" */
    /* both on the context model: b's and c's ratios B/A; NAN otherwise */
    double ctx_b_ratio, ctx_b_ratio_ci[2], ctx_c_ratio, ctx_c_ratio_ci[2];
    /* both on the same richer model: every term's ratio; n_terms 0 otherwise */
    fit_model_kind terms_model;
    size_t n_terms;
    fit_term term[FIT_MODEL_MAX_TERMS];
    double term_knee[FIT_MODEL_MAX_TERMS];
    double term_ratio[FIT_MODEL_MAX_TERMS], term_ratio_ci[FIT_MODEL_MAX_TERMS][2];
    double ci;
    int n_resamples, paired;  /* paired: some level was compared by pairs */
    uint64_t seed;
    size_t n_levels;
    fit_compare_level *levels;/* closed by C ascending, then open by rate */
    char verdict[320];        /* "B is 2.6x A at C=64 [2.4, 2.8]; slope 30.1 -> 10.4 ms ..." */
} fit_compare;

/* ra/rb: the fit_analyze results of a/b. LL_EINVAL when the runs share no
 * level. Free with fit_compare_free. */
int fit_compare_runs(const fit_run *a, const fit_result *ra, const fit_run *b, const fit_result *rb,
                     const fit_compare_options *opt, fit_compare **out, char *err, size_t errlen);
void fit_compare_free(fit_compare *c);
int fit_compare_find(const fit_compare *c, int concurrency); /* closed level C, or -1 */
/* The level the verdict judges by default (the highest common closed C, else
 * the last open level); the verdict rewritten for level i. */
size_t fit_compare_default_level(const fit_compare *c);
void fit_compare_set_verdict(fit_compare *c, size_t i);

#endif
