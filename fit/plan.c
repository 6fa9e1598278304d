/* plan.c: capacity planning from a fitted run (`loadlaw plan`). Every
 * figure is defined once, here, and computed here (reports/plan_print.c
 * prints it):
 *  max C for a per-token objective S (ITL or TPOT: the law is the mean step,
 *          the mean ms per token at N): the largest N with a + b*N <= S,
 *          N* = floor((S - a)/b). Its 95% interval solves the mean line's
 *          band (fit_law_mean_ci) for N: the lower end is where the band's
 *          upper edge reaches S, the upper end where its lower edge does
 *          (Fieller's interval for the ratio (S - a)/b, which, unlike the
 *          delta method, is asymmetric where b is poorly known and says
 *          "unbounded" when b's interval reaches 0). n_real and its interval
 *          are the real-valued crossings; n_star and n_star_ci their floors.
 *          Extrapolated when N* exceeds the largest measured C.
 *  at C    step = a + b*C with the band at C; throughput 1000*C/step tok/s
 *          and per-user 1000/step tok/s, their intervals the band's edges
 *          mapped through the same formulas (NAN where the band reaches 0).
 *          Extrapolated when C exceeds the largest measured C.
 *  TTFT at C  the measured closed-loop levels' TTFT p50 and p90 (the first
 *          level of each C), linearly interpolated in C between the two
 *          measured C around it; outside the measured range none is given
 *          (ttft_known = 0 and ttft_note says why): the prefill ramp is not a
 *          straight line to extrapolate.
 *  goodput per measured level: its measured (non-warmup) requests that
 *          finished ok AND met every objective given, per second of the
 *          level's wall time, as DistServe and SGLang/vLLM's `--goodput`
 *          count it: a request meets TTFT when its own TTFT <= the objective,
 *          TPOT when its own TPOT (fit_request_latency_ms) does (a
 *          single-token request has no TPOT and meets it, as those tools take
 *          its TPOT as 0), E2E likewise. A failed request meets nothing. The
 *          best level has the highest goodput (the lower C on a tie).
 * Plans are on the chosen model: the line, or the context model as a line
 * in N at context_tok (its a, its b + c*context_tok/1000, their HC3
 * covariance), with the intervals above; any other model at K =
 * N*context_tok, its max C by the point estimate (N where its step reaches
 * the objective, searched in steps of 0.01) without an interval, its step at
 * C with its HC3 interval (fit_model_fit_ci).
 *
 * DESIGN: the law (a, b, their covariance) answers questions about the mean
 * step at any N; questions the law cannot answer (TTFT, which is the prefill
 * ramp and queueing, and whether single requests meet objectives) come from
 * the measured levels only, and are refused outside them rather than
 * extrapolated. */
#include "fit_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int fit_slo_given(double v)
{
    return isfinite(v) && v > 0;
}

int fit_request_meets(const fit_run *run, const ll_rec_request *q, const fit_slo *slo)
{
    if (!fit_request_ok(q))
        return 0;
    fit_request_ms m;
    fit_request_latency_ms(run, q, &m);
    /* NAN fails every comparison: a request without a first token misses TTFT */
    if (fit_slo_given(slo->ttft_ms) && !(m.ttft_ms <= slo->ttft_ms))
        return 0;
    /* a single-token request has no TPOT; DistServe and vLLM take it as 0 */
    if (fit_slo_given(slo->tpot_ms) && !isnan(m.tpot_ms) && !(m.tpot_ms <= slo->tpot_ms))
        return 0;
    if (fit_slo_given(slo->e2e_ms) && !(m.e2e_ms <= slo->e2e_ms))
        return 0;
    return 1;
}

void fit_level_goodput_count(const fit_run *run, int level, const fit_slo *slo,
                             size_t *n_measured, size_t *n_good)
{
    size_t i0, i1;
    *n_measured = *n_good = 0;
    fit_run_level_span(run, level, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        if (q->level != level || q->warmup)
            continue;
        (*n_measured)++;
        *n_good += (size_t)fit_request_meets(run, q, slo);
    }
}

/* The real N where the band's edges reach S (plan.c "Capacity plan": Fieller).
 * With d = S - a, the band holds S at N when (d - b N)^2 <= t^2 var(N), i.e.
 * A N^2 - 2 B N + K <= 0 with A = b^2 - t^2 var_b, B = d b + t^2 cov,
 * K = d^2 - t^2 var_a. A > 0 (b's interval excludes 0): a bounded interval
 * between the roots. Otherwise the set is unbounded above. */
static void max_n_interval(const fit_law *L, double slo_ms, double *n_real, double ci[2])
{
    double t2 = L->t_crit * L->t_crit;
    double va = L->a_se_ms * L->a_se_ms, vb = L->b_se_ms * L->b_se_ms;
    double d = slo_ms - L->a_ms;
    if (!(L->b_ms > 0)) {
        /* a flat or falling law: no load breaks a per-token objective the
         * first step meets */
        *n_real = d >= 0 ? INFINITY : -INFINITY;
        ci[0] = ci[1] = *n_real;
        return;
    }
    *n_real = d / L->b_ms;
    double A = L->b_ms * L->b_ms - t2 * vb;
    double B = d * L->b_ms + t2 * L->cov_ab_ms2;
    double K = d * d - t2 * va;
    double disc = B * B - A * K;
    /* at N = n_real the quadratic is -t^2 var <= 0, so real roots exist up to rounding */
    double sq = sqrt(disc > 0 ? disc : 0);
    if (A > 0) {
        ci[0] = (B - sq) / A;
        ci[1] = (B + sq) / A;
    } else {
        /* roots of a downward parabola: the lower end is the root below n_real */
        double r1 = A != 0 ? (B + sq) / A : K / (2 * B);
        double r2 = A != 0 ? (B - sq) / A : K / (2 * B);
        double lo = -INFINITY;
        if (r1 <= *n_real)
            lo = r1;
        if (r2 <= *n_real && r2 > lo)
            lo = r2;
        ci[0] = lo;
        ci[1] = INFINITY;
    }
    /* rounding must not put the point outside its own interval */
    if (ci[0] > *n_real)
        ci[0] = *n_real;
    if (ci[1] < *n_real)
        ci[1] = *n_real;
}

static long floor_n(double x)
{
    if (x == INFINITY)
        return LONG_MAX;
    if (!(x >= 0))
        return -1; /* not even N = 0: the idle step misses it */
    return (long)floor(x);
}

/* One measured TTFT point: the first closed-loop level of each C. */
typedef struct ttft_pt {
    int c;
    double p50_ms, p90_ms;
} ttft_pt;

static int cmp_ttft_pt(const void *x, const void *y)
{
    const ttft_pt *a = x, *b = y;
    return (a->c > b->c) - (a->c < b->c);
}

static void ttft_at(const ttft_pt *pt, size_t n, fit_plan_at *at)
{
    int c = at->concurrency;
    at->ttft_p50_ms = at->ttft_p90_ms = NAN;
    if (n == 0) {
        snprintf(at->ttft_note, sizeof at->ttft_note, "no measured level has a TTFT");
        return;
    }
    if (c < pt[0].c || c > pt[n - 1].c) {
        snprintf(at->ttft_note, sizeof at->ttft_note,
                 "C = %d is outside the measured %d..%d: not extrapolated", c, pt[0].c,
                 pt[n - 1].c);
        return;
    }
    size_t i = 0;
    while (i + 1 < n && pt[i + 1].c <= c)
        i++;
    at->ttft_known = 1;
    if (pt[i].c == c) {
        at->ttft_p50_ms = pt[i].p50_ms;
        at->ttft_p90_ms = pt[i].p90_ms;
        return;
    }
    /* pt[i].c < c < pt[i + 1].c */
    double w = (double)(c - pt[i].c) / (double)(pt[i + 1].c - pt[i].c);
    at->ttft_interpolated = 1;
    at->ttft_p50_ms = pt[i].p50_ms + w * (pt[i + 1].p50_ms - pt[i].p50_ms);
    at->ttft_p90_ms = pt[i].p90_ms + w * (pt[i + 1].p90_ms - pt[i].p90_ms);
}

/* The chosen model's step at N, K = N * the context per request planned
 * at (0 when the model has no context term). */
static double model_k(const fit_plan *p, double n)
{
    return isfinite(p->context_tok) ? n * p->context_tok : 0;
}

/* A knee, buckets, a curve or a combination (fit_plan's model): the step
 * by the model, with its HC3 interval (fit_model_fit_ci). */
static void model_point_at(const fit_plan *p, fit_plan_at *at)
{
    double c = at->concurrency, ci[2];
    at->step_ms = fit_model_predict(p->check, &p->law, c, model_k(p, c));
    fit_model_fit_ci(&p->check->chosen, c, model_k(p, c), ci);
    at->step_ci_ms[0] = ci[0];
    at->step_ci_ms[1] = ci[1];
    at->tok_per_s = at->step_ms > 0 ? 1000.0 * c / at->step_ms : NAN;
    at->user_tok_per_s = at->step_ms > 0 ? 1000.0 / at->step_ms : NAN;
    at->tok_per_s_ci[0] = ci[1] > 0 ? 1000.0 * c / ci[1] : NAN;
    at->tok_per_s_ci[1] = ci[0] > 0 ? 1000.0 * c / ci[0] : NAN;
    at->user_tok_per_s_ci[0] = ci[1] > 0 ? 1000.0 / ci[1] : NAN;
    at->user_tok_per_s_ci[1] = ci[0] > 0 ? 1000.0 / ci[0] : NAN;
}

/* The step at n by the model (which 0), or its interval's upper (1) or
 * lower (2) end. */
static double model_step(const fit_plan *p, double n, int which)
{
    double ci[2];
    if (which == 0)
        return fit_model_predict(p->check, &p->law, n, model_k(p, n));
    fit_model_fit_ci(&p->check->chosen, n, model_k(p, n), ci);
    return which == 1 ? ci[1] : ci[0];
}

/* The first N (steps of 0.01 from 0, up to lim) past which the step (which:
 * model_step) exceeds S: 0 when it does at N = 0, INFINITY when never, NAN
 * when the interval is unknown. */
static double model_cross(const fit_plan *p, double slo_ms, double lim, int which)
{
    double s0 = model_step(p, 0, which);
    if (isnan(s0))
        return NAN;
    if (!(s0 <= slo_ms))
        return 0;
    for (double n = 0.01; n <= lim; n += 0.01)
        if (model_step(p, n, which) > slo_ms)
            return n - 0.01;
    return INFINITY;
}

/* Models other than the line: the real N where the step reaches S (the
 * model's step rises with N), searched in steps of 0.01 up to 100 times the
 * largest measured C; its interval where the step's interval ends reach S. */
static void model_max_n(const fit_plan *p, double slo_ms, double *n_real, double ci[2])
{
    double lim = 100.0 * (p->max_measured_c > 0 ? p->max_measured_c : 1);
    *n_real = model_cross(p, slo_ms, lim, 0);
    ci[0] = model_cross(p, slo_ms, lim, 1);
    ci[1] = model_cross(p, slo_ms, lim, 2);
    if (isnan(ci[0]) || isnan(ci[1]))
        ci[0] = ci[1] = NAN;
}

/* The context model at k tokens per request as a line in N (K = N*k):
 * a + (b + c*k/1000)*N, with the HC3 covariance of (a, b, c) carried. */
static fit_law context_line(const fit_model_check *m, const fit_law *line, double k)
{
    fit_law L = *line;
    double u = k / 1000;
    L.a_ms = m->ctx_a_ms;
    L.b_ms = m->ctx_b_ms + m->ctx_c_ms * u;
    L.a_se_ms = sqrt(m->ctx_cov[0][0]);
    L.b_se_ms = sqrt(m->ctx_cov[1][1] + 2 * u * m->ctx_cov[1][2] + u * u * m->ctx_cov[2][2]);
    L.cov_ab_ms2 = m->ctx_cov[0][1] + u * m->ctx_cov[0][2];
    L.t_crit = 1.96;
    L.a_ci_ms[0] = L.a_ms - L.t_crit * L.a_se_ms;
    L.a_ci_ms[1] = L.a_ms + L.t_crit * L.a_se_ms;
    L.b_ci_ms[0] = L.b_ms - L.t_crit * L.b_se_ms;
    L.b_ci_ms[1] = L.b_ms + L.t_crit * L.b_se_ms;
    L.method = "context model (HC3 covariance)";
    return L;
}

static void law_at(const fit_law *L, int max_c, fit_plan_at *at)
{
    double c = at->concurrency, lo, hi;
    at->extrapolated = at->concurrency > max_c;
    at->step_ms = L->a_ms + L->b_ms * c;
    fit_law_mean_ci(L, c, &lo, &hi);
    at->step_ci_ms[0] = lo;
    at->step_ci_ms[1] = hi;
    at->tok_per_s = at->step_ms > 0 ? 1000.0 * c / at->step_ms : NAN;
    at->user_tok_per_s = at->step_ms > 0 ? 1000.0 / at->step_ms : NAN;
    /* a band that reaches 0 ms leaves the rate's upper end unbounded */
    at->tok_per_s_ci[0] = hi > 0 ? 1000.0 * c / hi : NAN;
    at->tok_per_s_ci[1] = lo > 0 ? 1000.0 * c / lo : NAN;
    at->user_tok_per_s_ci[0] = hi > 0 ? 1000.0 / hi : NAN;
    at->user_tok_per_s_ci[1] = lo > 0 ? 1000.0 / lo : NAN;
}

/* An open level's measured reach: it has no C (0, no cap), so the largest
 * number of running requests its steady steps decoded at, whole. */
static int open_level_reach(const fit_result *res, size_t level_idx)
{
    return (int)floor(res->levels[level_idx].steady_n_max);
}

/* The measured closed-loop levels' TTFT, one point per C sorted by C (into
 * pt, room for every level); p->max_measured_c, which an open level (a
 * rate, a trace) raises to the N its steps reached. Their count. */
static size_t measured_points(const fit_result *res, fit_plan *p, ttft_pt *pt)
{
    size_t n_pt = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (!L->closed_loop || L->concurrency <= 0) {
            int reach = open_level_reach(res, i);
            if (reach > p->max_measured_c)
                p->max_measured_c = reach;
            continue;
        }
        if (L->concurrency > p->max_measured_c)
            p->max_measured_c = L->concurrency;
        int seen = 0;
        for (size_t k = 0; k < n_pt; k++)
            seen |= pt[k].c == L->concurrency;
        if (!seen && L->ttft.n > 0)
            pt[n_pt++] = (ttft_pt){L->concurrency, L->ttft.p50_ms, L->ttft.p90_ms};
    }
    qsort(pt, n_pt, sizeof *pt, cmp_ttft_pt);
    return n_pt;
}

/* The largest C that meets the TPOT objective, with its interval. */
static void plan_max_c(fit_plan *p, double tpot_slo_ms)
{
    p->has_max_c = 1;
    if (p->model == FIT_MODEL_LINEAR || p->model == FIT_MODEL_CONTEXT)
        max_n_interval(&p->law, tpot_slo_ms, &p->n_real, p->n_real_ci);
    else
        model_max_n(p, tpot_slo_ms, &p->n_real, p->n_real_ci);
    p->n_star = floor_n(p->n_real);
    p->n_star_ci[0] = floor_n(p->n_real_ci[0]);
    p->n_star_ci[1] = floor_n(p->n_real_ci[1]);
    p->n_star_extrapolated = p->n_star > p->max_measured_c;
}

/* Level i's goodput against the objectives; plan's best level so far. */
static void plan_goodput_level(fit_plan *p, const fit_run *run, const fit_level *L, const fit_slo *slo, size_t i)
{
    fit_plan_goodput *g = &p->goodput[i];
    g->level = L->level;
    g->concurrency = L->concurrency;
    g->duration_s = L->duration_s;
    fit_level_goodput_count(run, L->level, slo, &g->n_measured, &g->n_good);
    g->good_frac = g->n_measured ? (double)g->n_good / (double)g->n_measured : NAN;
    g->goodput_req_per_s = L->duration_s > 0 ? (double)g->n_good / L->duration_s : NAN;
    if (!isfinite(g->goodput_req_per_s) || g->n_good == 0)
        return; /* a level that met the SLOs nowhere is no best */
    int b = p->best_goodput_idx;
    if (b < 0 || g->goodput_req_per_s > p->goodput[b].goodput_req_per_s ||
        (g->goodput_req_per_s == p->goodput[b].goodput_req_per_s && g->concurrency < p->goodput[b].concurrency))
        p->best_goodput_idx = (int)i;
}

/* Every level's goodput, when any objective is given. */
static int plan_goodput(fit_plan *p, const fit_run *run, const fit_result *res, const fit_slo *slo)
{
    if (!fit_slo_given(slo->ttft_ms) && !fit_slo_given(slo->tpot_ms) && !fit_slo_given(slo->e2e_ms))
        return 0;
    p->goodput = calloc(res->n_levels ? res->n_levels : 1, sizeof *p->goodput);
    if (!p->goodput)
        return LL_ENOMEM;
    p->n_goodput = res->n_levels;
    for (size_t i = 0; i < res->n_levels; i++)
        plan_goodput_level(p, run, &res->levels[i], slo, i);
    return 0;
}

int fit_plan_compute(const fit_run *run, const fit_result *res, const fit_plan_options *opt,
                     fit_plan **out, char *err, size_t errlen)
{
    int rc = LL_ENOMEM;
    fit_plan *p = NULL;
    ttft_pt *pt = NULL;
    *out = NULL;
    if (!res->law.ok) {
        ll_errf(err, errlen, "no law: %s", res->no_law[0] ? res->no_law : "too few steady steps");
        return LL_EINVAL;
    }
    p = calloc(1, sizeof *p);
    pt = calloc(res->n_levels ? res->n_levels : 1, sizeof *pt);
    if (!p || !pt)
        goto fail;
    p->law = res->law;
    p->check = &res->model;
    p->model = res->model.done ? res->model.best : FIT_MODEL_LINEAR;
    p->context_tok = NAN;
    if (p->model != FIT_MODEL_LINEAR && fit_model_fit_has(&res->model.chosen, FIT_TERM_K)) {
        p->context_tok = opt->context_tok > 0 ? opt->context_tok : fit_context_per_request(res);
        if (!isfinite(p->context_tok))
            p->context_tok = 0;
    }
    if (p->model == FIT_MODEL_CONTEXT)
        p->law = context_line(&res->model, &res->law, p->context_tok);
    p->slo = opt->slo;
    p->best_goodput_idx = -1;
    size_t n_pt = measured_points(res, p, pt);
    if (fit_slo_given(opt->slo.tpot_ms))
        plan_max_c(p, opt->slo.tpot_ms);

    /* where to plan: the given C, else the measured ones */
    size_t n_at = opt->n_at_c ? opt->n_at_c : n_pt;
    p->at = calloc(n_at ? n_at : 1, sizeof *p->at);
    if (!p->at)
        goto fail;
    p->n_at = n_at;
    for (size_t i = 0; i < n_at; i++) {
        fit_plan_at *at = &p->at[i];
        at->concurrency = opt->n_at_c ? opt->at_c[i] : pt[i].c;
        law_at(&p->law, p->max_measured_c, at);
        if (p->model != FIT_MODEL_LINEAR && p->model != FIT_MODEL_CONTEXT)
            model_point_at(p, at);
        ttft_at(pt, n_pt, at);
    }
    if ((rc = plan_goodput(p, run, res, &opt->slo)))
        goto fail;
    /* goodput read the requests again: a paged run's file must not have changed */
    if ((rc = fit_run_read_error(run, err, errlen)))
        goto read_fail;
    free(pt);
    *out = p;
    return 0;
fail:
    ll_errf(err, errlen, "out of memory");
read_fail:
    free(pt);
    fit_plan_free(p);
    return rc;
}

void fit_plan_free(fit_plan *p)
{
    if (!p)
        return;
    free(p->at);
    free(p->goodput);
    free(p);
}
