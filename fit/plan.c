/* plan.c: capacity planning from a fitted run (`loadlaw plan`): the largest
 * concurrency that meets a per-token objective, throughput and per-user
 * rates at chosen C, TTFT interpolated between measured levels, and goodput
 * per measured level. Every figure is defined once, in fit.h ("Capacity
 * plan"); this file computes and prints them.
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

static int slo_given(double v)
{
    return isfinite(v) && v > 0;
}

int fit_request_meets(const fit_request *q, const fit_slo *slo)
{
    if (!q->ok)
        return 0;
    fit_request_ms m;
    fit_request_latency_ms(q, &m);
    /* NAN fails every comparison: a request without a first token misses TTFT */
    if (slo_given(slo->ttft_ms) && !(m.ttft_ms <= slo->ttft_ms))
        return 0;
    /* a single-token request has no TPOT; DistServe and vLLM take it as 0 */
    if (slo_given(slo->tpot_ms) && !isnan(m.tpot_ms) && !(m.tpot_ms <= slo->tpot_ms))
        return 0;
    if (slo_given(slo->e2e_ms) && !(m.e2e_ms <= slo->e2e_ms))
        return 0;
    return 1;
}

void fit_level_goodput_count(const fit_run *run, int level, const fit_slo *slo,
                             size_t *n_measured, size_t *n_good)
{
    *n_measured = *n_good = 0;
    for (size_t i = 0; i < fit_run_n_requests(run); i++) {
        const fit_request *q = fit_run_request(run, i);
        if (q->level != level || q->warmup)
            continue;
        (*n_measured)++;
        *n_good += (size_t)fit_request_meets(q, slo);
    }
}

/* The real N where the band's edges reach S (fit.h "Capacity plan": Fieller).
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

/* A knee, buckets or a curve (fit_plan's model): the step by its point
 * estimate, without an interval. */
static void model_point_at(const fit_plan *p, fit_plan_at *at)
{
    double c = at->concurrency;
    at->step_ms = fit_model_predict(p->check, &p->law, c, 0);
    at->step_ci_ms[0] = at->step_ci_ms[1] = NAN;
    at->tok_per_s = at->step_ms > 0 ? 1000.0 * c / at->step_ms : NAN;
    at->user_tok_per_s = at->step_ms > 0 ? 1000.0 / at->step_ms : NAN;
    at->tok_per_s_ci[0] = at->tok_per_s_ci[1] = at->user_tok_per_s_ci[0] = at->user_tok_per_s_ci[1] = NAN;
}

/* Point-estimate models: the real N where the step reaches S (the model's
 * step rises with N), searched in steps of 0.01 up to 100 times the largest
 * measured C; no interval. */
static void model_max_n(const fit_plan *p, double slo_ms, double *n_real, double ci[2])
{
    ci[0] = ci[1] = NAN;
    *n_real = INFINITY;
    double lim = 100.0 * (p->max_measured_c > 0 ? p->max_measured_c : 1);
    if (!(fit_model_predict(p->check, &p->law, 0, 0) <= slo_ms)) {
        *n_real = 0;
        return;
    }
    for (double n = 0.01; n <= lim; n += 0.01)
        if (fit_model_predict(p->check, &p->law, n, 0) > slo_ms) {
            *n_real = n - 0.01;
            return;
        }
}

/* The context model at k tokens per request as a line in N (K = N*k):
 * a + (b + c*k/1000)*N, with the OLS covariance of (a, b, c) carried. */
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
    L.method = "context model (OLS covariance)";
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

/* The measured closed-loop levels' TTFT, one point per C sorted by C (into
 * pt, room for every level); p->max_measured_c. Their count. */
static size_t measured_points(const fit_result *res, fit_plan *p, ttft_pt *pt)
{
    size_t n_pt = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (!L->closed_loop || L->concurrency <= 0)
            continue;
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
    if (!slo_given(slo->ttft_ms) && !slo_given(slo->tpot_ms) && !slo_given(slo->e2e_ms))
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
    if (p->model == FIT_MODEL_CONTEXT) {
        p->context_tok = opt->context_tok > 0 ? opt->context_tok : fit_context_per_request(res);
        if (!isfinite(p->context_tok))
            p->context_tok = 0;
        p->law = context_line(&res->model, &res->law, p->context_tok);
    }
    p->slo = opt->slo;
    p->best_goodput_idx = -1;
    size_t n_pt = measured_points(res, p, pt);
    if (slo_given(opt->slo.tpot_ms))
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
    free(pt);
    *out = p;
    return 0;
fail:
    ll_errf(err, errlen, "out of memory");
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

/* ---- JSON ------------------------------------------------------------------ */

static int add_bool(cJSON *o, const char *key, int v)
{
    return cJSON_AddBoolToObject(o, key, v) ? 0 : LL_ENOMEM;
}

static int at_json(cJSON *arr, const fit_plan_at *at)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return LL_ENOMEM;
    }
    LL_TRY(ll_json_add_num(o, "concurrency", at->concurrency));
    LL_TRY(add_bool(o, "extrapolated", at->extrapolated));
    LL_TRY(ll_json_add_num(o, "step_ms", at->step_ms));
    LL_TRY(ll_json_add_pair(o, "step_ci_ms", at->step_ci_ms));
    LL_TRY(ll_json_add_num(o, "tok_per_s", at->tok_per_s));
    LL_TRY(ll_json_add_pair(o, "tok_per_s_ci", at->tok_per_s_ci));
    LL_TRY(ll_json_add_num(o, "user_tok_per_s", at->user_tok_per_s));
    LL_TRY(ll_json_add_pair(o, "user_tok_per_s_ci", at->user_tok_per_s_ci));
    LL_TRY(ll_json_add_num(o, "ttft_p50_ms", at->ttft_p50_ms));
    LL_TRY(ll_json_add_num(o, "ttft_p90_ms", at->ttft_p90_ms));
    LL_TRY(add_bool(o, "ttft_interpolated", at->ttft_interpolated));
    if (at->ttft_note[0]) {
        if (!cJSON_AddStringToObject(o, "ttft_note", at->ttft_note)) {
            rc = LL_ENOMEM;
            goto fail;
        }
    } else if (!cJSON_AddNullToObject(o, "ttft_note")) {
        rc = LL_ENOMEM;
        goto fail;
    }
    return 0;
fail:
    return rc;
}

static int goodput_json(cJSON *arr, const fit_plan_goodput *g)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return LL_ENOMEM;
    }
    LL_TRY(ll_json_add_num(o, "level", g->level));
    LL_TRY(ll_json_add_num(o, "concurrency", g->concurrency));
    LL_TRY(ll_json_add_num(o, "n_measured", (double)g->n_measured));
    LL_TRY(ll_json_add_num(o, "n_good", (double)g->n_good));
    LL_TRY(ll_json_add_num(o, "duration_s", g->duration_s));
    LL_TRY(ll_json_add_num(o, "good_frac", g->good_frac));
    LL_TRY(ll_json_add_num(o, "goodput_req_per_s", g->goodput_req_per_s));
    return 0;
fail:
    return rc;
}

static int plan_json(cJSON *j, const fit_plan *p)
{
    int rc;
    /* the law's parameters the plan used: fit's one law writer */
    LL_TRY(fit_json_law(j, "law", &p->law, NULL, NAN, FIT_JSON_PLAN));
    cJSON *obj = cJSON_AddObjectToObject(j, "objectives");
    if (!obj)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(j, "max_measured_c", p->max_measured_c));
    LL_TRY(ll_json_add_num(j, "context_tok", p->context_tok));
    LL_TRY(ll_json_add_num(obj, "ttft_ms", slo_given(p->slo.ttft_ms) ? p->slo.ttft_ms : NAN));
    LL_TRY(ll_json_add_num(obj, "tpot_ms", slo_given(p->slo.tpot_ms) ? p->slo.tpot_ms : NAN));
    LL_TRY(ll_json_add_num(obj, "e2e_ms", slo_given(p->slo.e2e_ms) ? p->slo.e2e_ms : NAN));
    if (p->has_max_c) {
        cJSON *m = cJSON_AddObjectToObject(j, "max_c");
        if (!m)
            return LL_ENOMEM;
        int point = isnan(p->n_real_ci[0]);
        double n_ci[2] = {point ? NAN : (double)p->n_star_ci[0],
                          point ? NAN : p->n_star_ci[1] == LONG_MAX ? INFINITY : (double)p->n_star_ci[1]};
        LL_TRY(ll_json_add_num(m, "tpot_slo_ms", p->slo.tpot_ms));
        LL_TRY(ll_json_add_num(m, "n", p->n_star == LONG_MAX ? INFINITY : (double)p->n_star));
        LL_TRY(ll_json_add_pair(m, "n_ci", n_ci));
        LL_TRY(ll_json_add_num(m, "n_real", p->n_real));
        LL_TRY(ll_json_add_pair(m, "n_real_ci", p->n_real_ci));
        LL_TRY(add_bool(m, "extrapolated", p->n_star_extrapolated));
        if (!cJSON_AddStringToObject(m, "interval", point ? "none" : "fieller") ||
            !cJSON_AddStringToObject(m, "model", fit_model_name(p->model))) {
            rc = LL_ENOMEM;
            goto fail;
        }
    } else if (!cJSON_AddNullToObject(j, "max_c")) {
        return LL_ENOMEM;
    }
    cJSON *at = cJSON_AddArrayToObject(j, "at");
    cJSON *gp = cJSON_AddArrayToObject(j, "goodput");
    if (!at || !gp)
        return LL_ENOMEM;
    for (size_t i = 0; i < p->n_at; i++)
        LL_TRY(at_json(at, &p->at[i]));
    for (size_t i = 0; i < p->n_goodput; i++)
        LL_TRY(goodput_json(gp, &p->goodput[i]));
    LL_TRY(ll_json_add_num(j, "best_goodput_concurrency",
                   p->best_goodput_idx >= 0 ? p->goodput[p->best_goodput_idx].concurrency : NAN));
    return 0;
fail:
    return rc;
}

cJSON *fit_plan_to_json(const fit_plan *p)
{
    cJSON *j = cJSON_CreateObject();
    if (j && plan_json(j, p)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* ---- text ------------------------------------------------------------------ */

/* "12.3 [11.9, 12.8]" into buf; "-" for NAN, "inf" for an unbounded end. */
static const char *fmt_ci(char *buf, size_t n, double v, const double ci[2], int dec)
{
    char lo[32], hi[32];
    if (isnan(v))
        return snprintf(buf, n, "-"), buf;
    snprintf(lo, sizeof lo, "%.*f", dec, ci[0]);
    snprintf(hi, sizeof hi, isnan(ci[1]) ? "inf" : "%.*f", dec, ci[1]);
    snprintf(buf, n, "%.*f [%s, %s]", dec, v, isnan(ci[0]) ? "-" : lo, hi);
    return buf;
}

static void print_max_c(FILE *f, const fit_plan *p)
{
    fprintf(f, "max C for ITL/TPOT <= %g ms: ", p->slo.tpot_ms);
    if (p->n_star == LONG_MAX) {
        fprintf(f, "unbounded (b = %g ms per request)\n", p->law.b_ms);
        return;
    }
    if (p->n_star < 1) {
        fprintf(f, "none: the law's step at N = 1 (%.3f ms) is already above it\n",
                p->law.a_ms + p->law.b_ms);
        return;
    }
    if (isnan(p->n_real_ci[0])) {
        fprintf(f, "N = %ld (the %s model's point estimate, N = %.2f; no interval)%s\n", p->n_star,
                fit_model_name(p->model), p->n_real, p->n_star_extrapolated ? "  EXTRAPOLATED" : "");
        return;
    }
    fprintf(f, "N = %ld, 95%% [%ld, ", p->n_star, p->n_star_ci[0] < 0 ? 0 : p->n_star_ci[0]);
    if (p->n_star_ci[1] == LONG_MAX)
        fprintf(f, "unbounded]");
    else
        fprintf(f, "%ld]", p->n_star_ci[1]);
    fprintf(f, "  ((S - a)/b = %.2f)", p->n_real);
    if (p->n_star_extrapolated)
        fprintf(f, "  EXTRAPOLATED: beyond the largest measured C = %d", p->max_measured_c);
    fputc('\n', f);
}

void fit_plan_print(FILE *f, const fit_plan *p)
{
    char b1[112], b2[112], b3[112];
    fprintf(f, "largest measured C: %d\n", p->max_measured_c);
    if (p->model == FIT_MODEL_CONTEXT)
        fprintf(f, "planned on the context model at %.0f tokens of context per request (--context): step(N) = "
                   "%.4g + %.4g*N ms\n",
                p->context_tok, p->law.a_ms, p->law.b_ms);
    else if (p->model != FIT_MODEL_LINEAR)
        fprintf(f, "planned on the %s model (point estimates, no intervals): %s\n", fit_model_name(p->model),
                p->check->verdict);
    if (p->has_max_c)
        print_max_c(f, p);
    fprintf(f, "\n%6s  %-26s %-30s %-24s %s\n", "C", "step ms [95%]", "tok/s [95%]",
            "per-user tok/s [95%]", "TTFT p50 / p90 ms");
    int any_extra = 0;
    for (size_t i = 0; i < p->n_at; i++) {
        const fit_plan_at *at = &p->at[i];
        char c[16], ttft[112];
        snprintf(c, sizeof c, "%d%s", at->concurrency, at->extrapolated ? "*" : "");
        any_extra |= at->extrapolated;
        if (at->ttft_known)
            snprintf(ttft, sizeof ttft, "%.1f / %.1f%s", at->ttft_p50_ms, at->ttft_p90_ms,
                     at->ttft_interpolated ? " (interpolated)" : "");
        else
            snprintf(ttft, sizeof ttft, "not given: %s", at->ttft_note);
        fprintf(f, "%6s  %-26s %-30s %-24s %s\n", c,
                fmt_ci(b1, sizeof b1, at->step_ms, at->step_ci_ms, 3),
                fmt_ci(b2, sizeof b2, at->tok_per_s, at->tok_per_s_ci, 1),
                fmt_ci(b3, sizeof b3, at->user_tok_per_s, at->user_tok_per_s_ci, 2), ttft);
    }
    if (any_extra)
        fprintf(f, "     * extrapolated: beyond the largest measured C (%d)\n", p->max_measured_c);
    if (p->n_goodput == 0) {
        fprintf(f, "\ngoodput: no objective given (--ttft-slo, --itl-slo/--tpot-slo, --e2e-slo)\n");
        return;
    }
    fprintf(f, "\ngoodput: requests per second meeting");
    if (slo_given(p->slo.ttft_ms))
        fprintf(f, " TTFT <= %g ms", p->slo.ttft_ms);
    if (slo_given(p->slo.tpot_ms))
        fprintf(f, " TPOT <= %g ms", p->slo.tpot_ms);
    if (slo_given(p->slo.e2e_ms))
        fprintf(f, " E2E <= %g ms", p->slo.e2e_ms);
    fprintf(f, " (each request's own)\n%6s  %9s  %9s  %7s  %14s\n", "C", "requests", "meeting",
            "share", "goodput req/s");
    for (size_t i = 0; i < p->n_goodput; i++) {
        const fit_plan_goodput *g = &p->goodput[i];
        char c[16];
        if (g->concurrency > 0)
            snprintf(c, sizeof c, "%d", g->concurrency);
        else
            snprintf(c, sizeof c, "open");
        fprintf(f, "%6s  %9zu  %9zu  %6.1f%%  %14.3f%s\n", c, g->n_measured, g->n_good,
                100 * g->good_frac, g->goodput_req_per_s,
                (int)i == p->best_goodput_idx ? "  <- best" : "");
    }
}
