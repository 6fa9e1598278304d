/* headline.c: the one headline every printer leads with (DESIGN: the
 * chosen model is the answer; the line is shown as the line, beneath it).
 *
 * The chosen model: the model check's (model.c), or the law's line when
 * nothing richer qualified or there was no check.
 *
 * Whether it fits: every closed-loop level the law used within
 * FIT_MODEL_LEVEL_FIT of the model's prediction at its C and mean context.
 * Where one misses by more, the headline says so first and gives what was
 * measured (the best level and the worst misfit), and no ceiling.
 *
 * The ceiling: 1000 / the model's cost per request beyond its last knee, at
 * the run's context per request — the throughput it approaches as N grows,
 * always beyond the largest measured C (so always said to be extrapolated,
 * with the model's figure at that C beside it). Said only when that cost is
 * above 0 with its 95% interval (HC3, from the model's covariance; the law's
 * own interval for the line): a model whose extra request costs nothing or
 * less, or an amount not told apart from nothing, bounds nothing, and a
 * curve (the quadratic) has no constant cost to invert.
 *
 * Held out: the worst of the levels' held-out errors (model_loo.c), and a
 * warning when it is beyond FIT_HELDOUT_BOUND; then no ceiling either: the
 * ceiling is the model's furthest extrapolation, and a model refitted
 * without one of the levels that misses it has shown it does not
 * extrapolate (two knees on six levels can pass through every level and
 * still put the ceiling ten times above the best one measured). */
#include "fit_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The standard error of fit_model_fit_slope(f, kr): the gradient of the
 * slope in the coefficients (1 for the N, hinge and bucket terms, kr/1000
 * for the context term) through the covariance. */
static double slope_se(const fit_model_fit *f, double kr)
{
    double g[FIT_MODEL_MAX_TERMS] = {0}, v = 0;
    for (size_t j = 0; j < f->p; j++) {
        fit_term t = f->term[j];
        g[j] = t == FIT_TERM_N || t == FIT_TERM_HINGE || t == FIT_TERM_BUCKET ? 1
               : t == FIT_TERM_K                                               ? (isfinite(kr) ? kr : 0) / 1000
                                                                               : 0;
    }
    for (size_t a = 0; a < f->p; a++)
        for (size_t b = 0; b < f->p; b++)
            v += g[a] * g[b] * f->cov[a][b];
    return v >= 0 ? sqrt(v) : NAN;
}

/* The best level, the largest C and the worst held-out level over the
 * closed-loop levels the law used. */
static void scan_levels(const fit_result *res, fit_headline *h)
{
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (!L->closed_loop || L->concurrency <= 0 || L->profiled_out || !isfinite(L->steady_tok_per_s))
            continue;
        if (h->best_level < 0 || L->steady_tok_per_s > res->levels[h->best_level].steady_tok_per_s)
            h->best_level = (int)i;
        if (L->concurrency > h->max_c)
            h->max_c = L->concurrency;
        if (!isfinite(L->heldout_error_rel))
            continue;
        h->n_heldout++;
        if (h->heldout_worst_level < 0 || fabs(L->heldout_error_rel) > fabs(h->heldout_worst_rel)) {
            h->heldout_worst_level = (int)i;
            h->heldout_worst_rel = L->heldout_error_rel;
        }
    }
    h->heldout_warn = h->n_heldout && fabs(h->heldout_worst_rel) > FIT_HELDOUT_BOUND;
}

/* The ceiling, or why none is said. */
static void ceiling(const fit_result *res, fit_headline *h, int rich)
{
    const char *name = fit_model_name(h->model);
    const char *where = rich && fit_model_fit_has(&res->model.chosen, FIT_TERM_HINGE) ? " beyond its last knee" : "";
    if (!res->law.ok && !rich)
        snprintf(h->no_ceiling, sizeof h->no_ceiling, "no law was fitted");
    else if (!h->fits)
        snprintf(h->no_ceiling, sizeof h->no_ceiling, "no model of the family fits every level within %.0f%%",
                 100 * FIT_MODEL_LEVEL_FIT);
    else if (h->heldout_warn)
        snprintf(h->no_ceiling, sizeof h->no_ceiling,
                 "refitted without C=%d, the %s model misses it by %+.1f%%: a model that does not predict a "
                 "level it did not see does not predict the throughput beyond them",
                 res->levels[h->heldout_worst_level].concurrency, name, 100 * h->heldout_worst_rel);
    else if (!isfinite(h->slope_ms))
        snprintf(h->no_ceiling, sizeof h->no_ceiling,
                 "the %s model has no constant cost per request to bound throughput by", name);
    else if (h->slope_ms <= 0)
        snprintf(h->no_ceiling, sizeof h->no_ceiling,
                 "the %s model's cost per request%s is %.3g ms, not above 0: it bounds nothing", name, where,
                 h->slope_ms);
    else if (!(h->slope_ci_ms[0] > 0))
        snprintf(h->no_ceiling, sizeof h->no_ceiling,
                 "the %s model's cost per request%s, %.3g ms (95%% [%.3g, %.3g]), is not told apart from 0", name,
                 where, h->slope_ms, h->slope_ci_ms[0], h->slope_ci_ms[1]);
    else
        h->ceiling_tok_per_s = 1000 / h->slope_ms;
}

void fit_headline_compute(fit_result *res)
{
    fit_headline *h = &res->headline;
    const fit_model_check *m = &res->model;
    int rich = m->done && m->best != FIT_MODEL_LINEAR && m->chosen.p;
    memset(h, 0, sizeof *h);
    h->model = rich ? m->best : FIT_MODEL_LINEAR;
    h->worst_level = res->model_worst_level;
    h->best_level = h->heldout_worst_level = -1;
    h->heldout_worst_rel = h->ceiling_tok_per_s = h->at_max_c_tok_per_s = NAN;
    h->slope_ms = h->slope_ci_ms[0] = h->slope_ci_ms[1] = NAN;
    h->fits = h->worst_level < 0 || (size_t)h->worst_level >= res->n_levels ||
              !(fabs(res->levels[h->worst_level].model_error_rel) > FIT_MODEL_LEVEL_FIT);
    scan_levels(res, h);
    if (rich) {
        double kr = res->context_per_req_tok, se = slope_se(&m->chosen, kr);
        h->slope_ms = fit_model_fit_slope(&m->chosen, kr);
        h->slope_ci_ms[0] = h->slope_ms - 1.96 * se;
        h->slope_ci_ms[1] = h->slope_ms + 1.96 * se;
    } else if (res->law.ok) {
        h->slope_ms = res->law.b_ms;
        h->slope_ci_ms[0] = res->law.b_ci_ms[0];
        h->slope_ci_ms[1] = res->law.b_ci_ms[1];
    }
    if (h->max_c > 0) {
        double k = NAN;
        for (size_t i = 0; i < res->n_levels; i++)
            if (res->levels[i].concurrency == h->max_c && res->levels[i].closed_loop)
                k = res->levels[i].k_mean;
        double step = fit_model_predict(m, &res->law, h->max_c, k);
        h->at_max_c_tok_per_s = step > 0 ? 1000.0 * h->max_c / step : NAN;
    }
    ceiling(res, h, rich);
}
