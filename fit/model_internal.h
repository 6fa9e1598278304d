/* model_internal.h: what model.c's check and model_loo.c's leave-one-out
 * share: the points of one check and the fits on them. */
#ifndef LOADLAW_FIT_MODEL_INTERNAL_H
#define LOADLAW_FIT_MODEL_INTERNAL_H

#include "fit_internal.h"

/* The points of one check and what every candidate is judged against. */
typedef struct mdata {
    const double *x, *y, *k; /* N, ms per token, K (NULL: no context) */
    size_t n;
    const double *d;         /* distinct N, sorted */
    size_t nd;
    double cl[2];            /* the OLS line a + b*N */
    double bic_line, floor_rss;
} mdata;

/* model.c: the fit of f's terms (set by fit_model_fit_spec) on md's points
 * with its departure from md's line; the knee(s) of kind with the least BIC
 * (f->p = 0 when md has too few distinct N for them); whether a model beats
 * the line by the margin and the minimum effect; a model's parameters, its
 * knees counted. */
int fit_mdata_fit(const mdata *md, fit_model_fit *f, int want_cov);
int fit_mdata_knees(const mdata *md, fit_model_kind kind, fit_model_fit *best);
int fit_model_qualifies(double bic_model, double bic_line, double effect, const fit_options *opt);
int fit_model_params(const fit_model_fit *f);

/* model_loo.c: the level (N) the chosen model rests on alone, NAN when
 * none; the chosen family refitted without each level in turn, into
 * m->heldout (m->best and m->chosen set). 0, LL_ENOMEM or LL_EINVAL. */
double fit_model_alone_level(const mdata *md, const fit_model_fit *chosen, const fit_options *opt);
int fit_model_heldout_run(const mdata *md, fit_model_check *m);

/* model_terms.c: term t's value at (N, K) (knee: a hinge's N). model_stream.c:
 * fit_model_fit_run's fit without the n x p design (model_stream.c says how),
 * which fit_model_fit_run takes past FIT_MODEL_STREAM_MIN points; the same
 * arguments and results. */
double fit_model_term_value(fit_term t, double knee, double n, double k);
int fit_model_fit_stream(fit_model_fit *f, const double *x, const double *y, const double *k, size_t n,
                         double floor_rss, int want_cov, double *rss_out);

#endif
