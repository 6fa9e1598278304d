/* fit_plan.h: what a run's chosen model and measured levels say about
 * serving at other loads (`loadlaw plan`; fit/plan.c defines each figure:
 * the largest C for a per-token objective with Fieller's interval, step and
 * throughput at any C, TTFT between measured levels only, goodput per
 * measured level). Objectives in ms; NAN or <= 0: not given. */
#ifndef LOADLAW_FIT_PLAN_H
#define LOADLAW_FIT_PLAN_H

#include <stddef.h>

#include "fit.h"

typedef struct fit_slo { double ttft_ms, tpot_ms, e2e_ms; } fit_slo;
int fit_slo_given(double v); /* 1: an objective (a number > 0) */
/* The measured requests of records level `level`, and how many finished ok
 * meeting every objective given. */
void fit_level_goodput_count(const fit_run *run, int level, const fit_slo *slo, size_t *n_measured,
                             size_t *n_good);

typedef struct fit_plan_options {
    fit_slo slo;              /* tpot_ms also gives the max-C figure */
    const int *at_c;          /* concurrencies to plan at; NULL/0: the measured ones */
    size_t n_at_c;
    double context_tok;       /* context per request to plan a K model at; <= 0: the run's */
} fit_plan_options;

typedef struct fit_plan_at {
    int concurrency;
    int extrapolated;         /* C > max_measured_c */
    double step_ms, step_ci_ms[2], tok_per_s, tok_per_s_ci[2], user_tok_per_s, user_tok_per_s_ci[2];
    int ttft_known;           /* 0: outside the measured range (ttft_note says so) */
    int ttft_interpolated;    /* 1: between two measured C; 0: a measured C */
    double ttft_p50_ms, ttft_p90_ms;
    char ttft_note[96];
} fit_plan_at;

typedef struct fit_plan_goodput {
    int level, concurrency;
    size_t n_measured, n_good;
    double duration_s, good_frac, goodput_req_per_s;
} fit_plan_goodput;

typedef struct fit_plan {
    fit_law law;              /* the line planned on (the context model's at context_tok) */
    fit_model_kind model;     /* the chosen model */
    const fit_model_check *check; /* the result's (borrowed) */
    double context_tok;       /* planned at; NAN without a context term */
    fit_slo slo;
    int max_measured_c;       /* largest closed C, or an open level's largest N */
    int has_max_c;            /* a TPOT objective was given: */
    double n_real, n_real_ci[2]; /* (S - a)/b and its interval; INFINITY: unbounded */
    long n_star, n_star_ci[2];/* floors; -1 when not even N = 0 meets S */
    int n_star_extrapolated;
    size_t n_at;
    fit_plan_at *at;
    size_t n_goodput;         /* 0 without objectives; per measured level */
    fit_plan_goodput *goodput;
    int best_goodput_idx;     /* into goodput; -1 when no level had a good request */
} fit_plan;

/* LL_EINVAL when res has no law; LL_ENOMEM. Free with fit_plan_free. */
int fit_plan_compute(const fit_run *run, const fit_result *res, const fit_plan_options *opt, fit_plan **out,
                     char *err, size_t errlen);
void fit_plan_free(fit_plan *p);

#endif
