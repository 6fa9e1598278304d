/* analyze_law.c: the law and what is measured against it, steps of
 * fit_analyze (analyze.c): the steady samples grouped into engine steps
 * (fit_level_steps), the law fitted on one point per step against the
 * client's N and the server's, OLS and the naive fit beside it, the model
 * check (model.c); each closed-loop level's steady throughput against the
 * law and the chosen model, with intervals; and the fit of the engine's own
 * step records. The samples are timeline.c's ("Arrival", "Step sample").
 *
 * One engine step (reduce.c makes them, fit_level_steps gives them;
 * FIT_STEP_GROUP_FRAC): in time order,
 * steady samples of one level join the step of the first sample while they
 * have its N and arrive within half of their OWN gap after it. A step's
 * tokens reach the C streams microseconds apart; a sample of the next step
 * arrives one whole (next) step after, so half its own gap separates them
 * however much consecutive steps differ. (Half the first sample's gap did
 * not: after a long step a short one fell inside it, two steps became one
 * point, and the law sat 1 standard error below the mean with 30%
 * exponential jitter.) The law's points, the steady throughput's interval
 * and compare's bootstrap units are these steps.
 *
 * The law (fit_result.law) estimates the MEAN step time at N: users read
 * N / (a + b*N) as throughput, and throughput follows the mean step, not the
 * typical one. One point per step (x = N, y = its mean ms per token, sum of
 * gaps / sum of tokens), sized by its tokens (fit_line_sized), so the
 * intervals count independent steps, not the C copies of each step that the
 * C streams see, and at each N the law's mean is the same ratio as the
 * steady throughput. A closed-loop level gives the steps of its steady
 * windows (N = C) only; an open-loop level every steady step. The steady
 * steps of a closed-loop level's ramp-down, where N falls every step, are not
 * used: there the client's read lag shrinks with N step after step, each gap
 * is its step minus that change, and on the bundled engine at 3 + 0.05*N ms,
 * C = 256 those gaps ran 5-19% below their steps and pulled b 3% low. Over a
 * window of constant N the lag's changes cancel. Robust only against true
 * outliers (a stalled client or server, a burst read, a retransmission):
 * regress.c's trimmed weighted least squares ("trimmed-wls"), HC3 sandwich
 * errors (noise grows with N), t with n - 2 degrees of freedom; right-skewed
 * jitter, which is what moves the mean above the median, stays in.
 * Measured (tests/fit/test_fit.c test_skewed_jitter): exponential jitter of
 * 30% on 3 + 0.05*N ms, C = 1..256: the earlier bisquare of per-step medians
 * gave 3.797 + 0.0612*N against a true mean of 3.900 + 0.065*N, its band
 * missed the mean at all 9 levels and the steady throughput sat 2-5% below
 * its prediction. This law, over 40 seeds: lognormal (25%) band covers the
 * true mean 35-38/40 per level, err interval covers 0 36-40/40; exponential
 * (30%) 35-39/40 and 38-40/40; gaussian 5% 34-38/40 and 35-40/40. Over 400
 * seeds the band covers 94-97% at every level in all three; the err
 * interval 93-97% at C <= 8 and 98-100% above (there the level's own steps
 * carry the law's band at C, and the interval adds that band and the
 * throughput's as if independent).
 *
 * Steady throughput: steady_tok_per_s = C * (tokens of steady samples at
 * N = C) / (sum of their gaps), exact for lockstep decoding and free of
 * window-edge effects. Its 95% interval is the ratio estimator's (delta
 * method over the level's steps at N = C, t quantile); error_rel = steady /
 * predicted - 1, and its interval combines that one with the law's mean-line
 * band at C on the log scale.
 *
 * The law against the server's N (fit_result.law_other, or the law itself
 * with fit_options.n_server): the same steps, each with x = the server's
 * running requests at its time: the total over labels of a scrape of the
 * running gauge (server.c), given only where the two consecutive scrapes
 * inside the level on either side of the step agree. A scrape is one
 * instant, every 0.5 s, and a level may last little longer: the last scrape
 * before a step, however old, gave N = 0 to 0.5 s of one-request steps (a
 * scrape before the first admission) and the ramp-down's N to a level with
 * one scrape, and on the bundled engine at 52+30n (time scale 0.02, C =
 * 1..16) b came out 0.528 for 0.6. Steps without an agreeing pair are left
 * out (a note counts them); with too few left the law against the server's N
 * is not fitted, and says why. Where the server runs exactly the client's D
 * the two laws are one. Everything else (predictions at C, the model check
 * on the law's points) follows whichever law is the answer. */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

/* The law on one point per client-observed step (analyze_law.c "The law"); OLS on
 * the same points; the naive OLS on every raw gap beside them; then the
 * model check on the same points. */
/* The points of the law against one N (x, y, size) and the raw samples
 * behind them. */
typedef struct law_points {
    fit_double_vec x, y, w, k;
    size_t n_samples;
} law_points;

static int law_points_push(law_points *p, double x, const fit_step *s)
{
    int rc;
    LL_TRY(ll_vec_push(&p->x, x));
    LL_TRY(ll_vec_push(&p->k, s->k));
    LL_TRY(ll_vec_push(&p->y, fit_step_ms_per_tok(s)));
    LL_TRY(ll_vec_push(&p->w, (double)s->tokens));
    p->n_samples += s->n_samples;
fail:
    return rc;
}

static void law_points_free(law_points *p)
{
    ll_vec_free(&p->x);
    ll_vec_free(&p->y);
    ll_vec_free(&p->w);
    ll_vec_free(&p->k);
}

/* analyze_law.c "The law against the server's N": a step gets the server's N only
 * where the scrapes describe it: the two consecutive scrapes inside its level
 * on either side of it (so neither is more than one scrape interval away)
 * read the same N. A scrape is one instant of a gauge that moves at every
 * admission and completion, and scrapes come every 0.5 s while a level may
 * last about as long: the last scrape before a step can be from before the
 * level's first admission (it reads 0 under 0.5 s of one-request steps) or
 * from the ramp, and a level with one scrape has nothing that says its N
 * held. Two that agree say it held at both ends of the one interval holding
 * the step; a change and its undoing between them no rule could see. Steps
 * with no such pair are left out; *n_scrapes counts the level's scrapes. */
static int server_points(const fit_run *run, const fit_level *L, const fit_step *st, size_t ns, law_points *p,
                         size_t *n_scrapes)
{
    int64_t *t = NULL;
    double *v = NULL;
    size_t n = 0, j = 0;
    int rc = fit_server_n_series(run, L, &t, &v, &n);
    for (size_t k = 0; rc == 0 && k < ns && n > 1; k++) {
        while (j + 2 < n && t[j + 1] <= st[k].t_ns)
            j++; /* steps come in time order */
        if (t[j] <= st[k].t_ns && st[k].t_ns <= t[j + 1] && v[j] == v[j + 1])
            rc = law_points_push(p, v[j], &st[k]);
    }
    *n_scrapes += n;
    free(t);
    free(v);
    return rc;
}

/* The naive fit on every sample's (N, ms), fed by reduce.c (naive.c), and
 * a note when it came from sums. */
static int naive_fit(fit_result *res, fit_naive *nv, char *err, size_t errlen)
{
    int summed = nv->summed, full = nv->distinct_full;
    size_t n = nv->n;
    int rc = fit_naive_finish(nv, &res->naive, err, errlen);
    if (rc || !summed)
        return rc;
    return fit_note(res, "the naive fit (OLS on every gap) is from running sums: %zu samples, over %zu (the same line "
                         "to ~1e-9 relative)%s",
                    n, FIT_NAIVE_KEEP, full ? "; its distinct N counted up to a bound (at least that many)" : "");
}

/* A note when the run's steps were more than reduce.c "Steps kept" holds. */
static int steps_note(fit_result *res)
{
    const struct fit_kept *k = res->kept;
    size_t seen = 0, kept = 0;
    if (k->step_stride <= 1)
        return 0;
    for (size_t l = 0; l < k->n_levels; l++) {
        seen += k->levels[l].n_steps_seen;
        kept += k->levels[l].n_steps;
    }
    return fit_note(res, "the law, the model family and compare's step units are from 1 in %zu engine steps (%zu of "
                         "%zu), every level thinned alike; each level's steady throughput and its interval use "
                         "every step",
                    k->step_stride, kept, seen);
}

int fit_laws(const fit_run *run, fit_result *res, const fit_options *opt, char *err, size_t errlen)
{
    int rc;
    fit_naive *nv = &res->kept->naive;
    law_points client = {0}, server = {0};
    const fit_step *st;
    for (size_t l = 0; l < res->n_levels; l++) {
        size_t ns;
        const fit_level *L = &res->levels[l];
        if (L->profiled && !opt->include_profiled) {
            res->levels[l].profiled_out = 1; /* the profiler's steps are not the server's (fit_options) */
            continue;
        }
        /* analyze_law.c "The law": a closed-loop level gives its steady windows
         * (N = C); an open-loop level every steady step (reduce.c keeps those). */
        fit_level_steps(res, l, &st, &ns);
        for (size_t k = 0; k < ns; k++)
            LL_TRY(law_points_push(&client, st[k].n, &st[k]));
        LL_TRY(server_points(run, L, st, ns, &server, &res->law_server_scrapes));
        res->levels[l].n_steady_points = res->kept->levels[l].n_steps_seen;
    }
    LL_TRY(steps_note(res));
    const law_points *P = opt->n_server ? &server : &client, *O = opt->n_server ? &client : &server;
    res->law_n = opt->n_server ? "server" : "client";
    fit_double_vec px = P->x, py = P->y, pw = P->w;
    size_t n_law_samples = P->n_samples;
    LL_TRY(fit_line_sized(O->x.v, O->y.v, O->w.v, O->x.n, 1, &res->law_other, err, errlen));
    res->law_other.n_samples = O->n_samples;
    LL_TRY(fit_line_sized(px.v, py.v, pw.v, px.n, 1, &res->law, err, errlen));
    LL_TRY(fit_line(px.v, py.v, px.n, 0, &res->ols, err, errlen));
    LL_TRY(naive_fit(res, nv, err, errlen));
    res->law.n_samples = res->ols.n_samples = n_law_samples;
    res->n_trimmed = res->law.n_trimmed;
    /* a slope that may be 0 claims no ceiling (fit_law_slope_resolved) */
    int resolved = fit_law_slope_resolved(&res->law);
    res->asymptote_tok_per_s = resolved ? 1000.0 / res->law.b_ms : NAN;
    res->n_half = resolved ? res->law.a_ms / res->law.b_ms : NAN;
    LL_TRY(fit_model_check_run(px.v, py.v, P->k.v, px.n, opt, &res->model, err, errlen));
    if (res->model.done && res->model.context_negative)
        LL_TRY(fit_note(res, "a model with a context term fitted better, but its c came out negative (step time "
                             "falling as context grows is not a cost of context): set aside; something else that "
                             "differs with K between levels moved the step"));
    if (res->model.done && fabs(res->model.kn_corr) > FIT_CONTEXT_COLLINEAR)
        LL_TRY(fit_note(res, "the context term is not identifiable from this run: the context of the running "
                             "requests moved with N (corr %.3f); vary prompt lengths (load.vary_context) or "
                             "stagger requests within a level",
                        res->model.kn_corr));
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory fitting the law");
    law_points_free(&client);
    law_points_free(&server);
    return rc;
}

/* The steady throughput's 95% interval: the ratio R = sum gap / sum tokens
 * (ms per token) over the level's steps at N = C, delta method, t with
 * steps - 1 dof; the throughput is 1000 C / R. R and the mean K are over
 * every step; past reduce.c "Steps kept" the spread is the kept steps'
 * (1 in the stride, evenly through the level), scaled to every step. */
static int steady_interval(const fit_result *res, size_t l, double *r_ms, double *r_se_ms,
                           double *t_crit, double *k_mean)
{
    const fit_level_kept *lk = &res->kept->levels[l];
    const fit_step *st;
    size_t m, n = lk->n_steps_seen;
    *r_ms = *r_se_ms = *t_crit = NAN;
    fit_level_steps(res, l, &st, &m); /* a closed-loop level's: at N = C */
    double g = lk->sum_gap_ms, t = lk->sum_tok, ss = 0;
    *k_mean = t > 0 ? lk->sum_k_tok / t : NAN;
    if (n >= 2 && m >= 2 && t > 0) {
        double r = g / t, tbar = t / (double)n;
        for (size_t k = 0; k < m; k++)
            ss += (st[k].gap_ms - r * st[k].tokens) * (st[k].gap_ms - r * st[k].tokens);
        if (m != n)
            ss *= (double)(n - 1) / (double)(m - 1);
        *r_ms = r;
        *r_se_ms = sqrt(ss / ((double)n * (double)(n - 1))) / tbar;
        *t_crit = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1));
    }
    return 0;
}

/* The chosen family refitted without the level (model_loo.c "Held-out
 * prediction") at its N = C and mean K, and the level's error against it. */
static void heldout_level(const fit_result *res, fit_level *L)
{
    const fit_model_check *m = &res->model;
    for (size_t j = 0; j < m->n_heldout; j++)
        if (m->heldout[j].n == L->concurrency && m->heldout[j].ok) {
            double step = fit_model_fit_eval(&m->heldout[j].f, L->concurrency, L->k_mean);
            L->heldout_pred_tok_per_s = step > 0 ? 1000.0 * L->concurrency / step : NAN;
            L->heldout_error_rel = L->steady_tok_per_s / L->heldout_pred_tok_per_s - 1.0;
        }
}

/* A closed-loop level against the chosen model (model.c "The chosen model"):
 * its prediction at N = C and the level's mean K, and the level's error;
 * the worst level kept in the result. */
static void model_level(fit_result *res, fit_level *L)
{
    double step = fit_model_predict(&res->model, &res->law, L->concurrency, L->k_mean);
    L->model_pred_tok_per_s = step > 0 ? 1000.0 * L->concurrency / step : NAN;
    L->model_error_rel = L->steady_tok_per_s / L->model_pred_tok_per_s - 1.0;
    heldout_level(res, L);
    if (!isfinite(L->model_error_rel) || L->profiled_out)
        return; /* a level the law left out is not one the model must fit */
    if (res->model_worst_level < 0 ||
        fabs(L->model_error_rel) > fabs(res->levels[res->model_worst_level].model_error_rel))
        res->model_worst_level = (int)(L - res->levels);
}

/* Each closed-loop level against the law ("Steady throughput" above). */
int fit_compare_levels(fit_result *res)
{
    res->model_worst_level = -1;
    for (size_t i = 0; i < res->n_levels; i++) {
        fit_level *L = &res->levels[i];
        /* Open loop: C is only a cap on in-flight requests, not the batch. */
        if (L->concurrency <= 0 || !L->closed_loop)
            continue;
        double r, r_se, t_r;
        if (steady_interval(res, i, &r, &r_se, &t_r, &L->k_mean))
            return LL_ENOMEM;
        model_level(res, L);
        if (isfinite(r_se) && r - t_r * r_se > 0) {
            L->steady_tok_per_s_ci[0] = 1000.0 * L->concurrency / (r + t_r * r_se);
            L->steady_tok_per_s_ci[1] = 1000.0 * L->concurrency / (r - t_r * r_se);
        }
        if (!res->law.ok)
            continue;
        double step = res->law.a_ms + res->law.b_ms * L->concurrency;
        if (step > 0)
            L->predicted_tok_per_s = 1000.0 * L->concurrency / step;
        if (!isfinite(L->steady_tok_per_s) || !isfinite(L->predicted_tok_per_s))
            continue;
        L->error_rel = L->steady_tok_per_s / L->predicted_tok_per_s - 1.0;
        /* steady / predicted = step / R: on the log scale the two relative
         * half-widths add in quadrature (the level's steps are also in the
         * law, which only makes this wider than the exact interval) */
        double lo, hi;
        fit_law_mean_ci(&res->law, L->concurrency, &lo, &hi);
        double hw_law = (hi - lo) / 2 / step, hw_r = t_r * r_se / r;
        if (isfinite(hw_law) && isfinite(hw_r)) {
            double hw = sqrt(hw_law * hw_law + hw_r * hw_r);
            L->error_rel_ci[0] = (1 + L->error_rel) * exp(-hw) - 1;
            L->error_rel_ci[1] = (1 + L->error_rel) * exp(hw) - 1;
        }
    }
    /* what the chosen model's headline says: its growth per request at the
     * run's context per request (NAN for the line and the quadratic) */
    res->context_per_req_tok = fit_context_per_request(res);
    res->model_slope_ms = fit_model_fit_slope(&res->model.chosen, res->context_per_req_tok);
    fit_headline_compute(res);
    return 0;
}

int fit_engine_steps(const fit_run *run, fit_result *res, char *err, size_t errlen)
{
    size_t ns = fit_run_n_steps(run), k = 0, skipped = 0;
    if (ns == 0) {
        memset(&res->engine, 0, sizeof res->engine);
        res->engine.a_ms = res->engine.b_ms = NAN;
        return 0;
    }
    double *x = malloc(ns * sizeof *x), *y = malloc(ns * sizeof *y);
    int rc = 0;
    if (!x || !y) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "out of memory fitting engine steps");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        const ll_rec_step *s = fit_run_step(run, i);
        if (s->prefill_tok != 0 || s->n_decode <= 0) {
            skipped++;
            continue;
        }
        x[k] = s->n_decode;
        y[k] = (double)s->dur_ns / 1e6;
        k++;
    }
    rc = fit_line(x, y, k, 1, &res->engine, err, errlen);
    if (rc == 0 && fit_note(res, "engine steps: %zu decode-only steps fitted, %zu with prefill "
                                 "or no decode left out", k, skipped))
        rc = LL_ENOMEM;
    if (rc == 0 && fit_run_steps_stride(run) > 1 &&
        fit_note(res, "engine steps: 1 in %zu of the run's %zu step records kept (load.c), evenly through it",
                 fit_run_steps_stride(run), fit_run_n_steps_seen(run)))
        rc = LL_ENOMEM;
done:
    free(x);
    free(y);
    return rc;
}
