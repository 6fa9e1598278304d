/* compare_internal.h (internal to fit/): what compare.c (matching levels,
 * the slope, the verdict), compare_units.c (a level's resampling units, the
 * unpaired bootstrap) and compare_paired.c (the paired interval) share.
 * Definitions: compare.c "A/B comparison". */
#ifndef LOADLAW_COMPARE_INTERNAL_H
#define LOADLAW_COMPARE_INTERNAL_H

#include <stddef.h>

#include <gsl/gsl_rng.h>

#include "fit_internal.h"

/* One resampling unit: an engine step (or a request's decode span). */
typedef struct cmp_unit {
    double tok, time_s;
} cmp_unit;

/* A's and B's level (indices into each fit_result) of one pair of a key. */
typedef struct cmp_level_pair {
    size_t ia, ib;
    int pair;
} cmp_level_pair;

/* c of X = c * sum tok / sum time: 1 for an open level; for a closed one C
 * over steady steps (steady != 0), over decode spans the measured number of
 * its requests decoding at once (at most C). NAN when out of memory. */
double cmp_rate_factor(const fit_run *run, const fit_level *L, int steady);
/* X over n units; NAN when they hold no time. */
double cmp_ratio_estimate(const cmp_unit *v, size_t n, double c);
void cmp_level_latency(const fit_level *L, fit_level_latency *out);
/* The comparison's key fields (C, open loop, rate) from A's level. */
void cmp_level_key(fit_compare_level *out, const fit_level *La, const fit_level_info *ia_info);
/* Units of level ia in a and ib in b (caller frees *pa, *pb), steady steps in
 * both or decode spans in both (*steady says which); rq: one unit per
 * request. 0 or LL_ENOMEM. */
int cmp_both_units(const fit_run *a, const fit_result *ra, size_t ia, const fit_run *b, const fit_result *rb,
                   size_t ib, int rq, int *steady, cmp_unit **pa, size_t *na, size_t *nra, cmp_unit **pb,
                   size_t *nb, size_t *nrb);
/* The unpaired comparison of A's level ia and B's level ib (compare_units.c):
 * the ratio's percentile bootstrap over each side's units, drawn from rng;
 * fills *out and hands the units back through *ua / *ub (caller frees) for
 * the slope bootstrap. 0 or LL_ENOMEM with err. */
int cmp_unpaired_level(const fit_run *a, const fit_result *ra, size_t ia, const fit_run *b, const fit_result *rb,
                       size_t ib, const fit_compare_options *o, gsl_rng *rng, fit_compare_level *out, cmp_unit **ua,
                       cmp_unit **ub, size_t *nua, size_t *nub, char *err, size_t errlen);
/* The paired comparison of one key over its m pairs lp (compare_paired.c):
 * fills *out (out->pair_ratio allocated; fit_compare_free frees it) and hands
 * every pair's units back through *ua / *ub (caller frees) for the slope
 * fallback. 0 or LL_ENOMEM with err. */
int cmp_paired_level(const fit_run *a, const fit_result *ra, const fit_run *b, const fit_result *rb,
                     const cmp_level_pair *lp, size_t m, const fit_compare_options *o, fit_compare_level *out,
                     cmp_unit **ua, cmp_unit **ub, size_t *nua, size_t *nub, char *err, size_t errlen);

#endif
