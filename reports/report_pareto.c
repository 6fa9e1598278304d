/* report_pareto.c: the run report's Pareto chart as data — per-user tokens/s
 * against total tokens/s: the measured levels, the law's curve with its 95%
 * band, and the objectives (html_internal.h, rpt_pareto_json).
 *
 * DESIGN: every number comes from an existing definition. The curve is
 * `loadlaw plan` at C = 1 .. a quarter beyond the largest measured C
 * (fit_plan_compute: total 1000*C/step, per-user 1000/step, their intervals
 * the law's band mapped through the same formulas, "extrapolated" beyond the
 * largest measured C); goodput is plan's too. A measured closed-loop level's
 * point is its steady throughput (fit_level.steady_tok_per_s) and that over
 * C, the same steady decode the law describes; an open-loop level has no C,
 * so its point is its output tokens/s and 1000 / its median TPOT. The page
 * script only draws. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"

/* Numbers through common's one NaN -> null rule; 0 or -1. */
static int add_num(cJSON *o, const char *k, double v)
{
    return ll_json_add_num(o, k, v) ? -1 : 0;
}

static int add_pair(cJSON *o, const char *k, const double v[2])
{
    return ll_json_add_pair(o, k, v) ? -1 : 0;
}

/* The C to plan at: every C from 1 to c_end when few, else
 * RPT_PARETO_CURVE_POINTS evenly spaced ones, always with max_c itself (where
 * the solid line turns dashed). *out: caller frees. */
static int curve_cs(int max_c, int c_end, int **out, size_t *n_out)
{
    size_t cap = RPT_PARETO_CURVE_POINTS + 2, n = 0;
    int *cs = malloc(cap * sizeof *cs);
    if (!cs)
        return LL_ENOMEM;
    int prev = 0, added_max = max_c < 1;
    for (int i = 0; i <= RPT_PARETO_CURVE_POINTS; i++) {
        int c = c_end <= RPT_PARETO_CURVE_POINTS
                    ? 1 + i
                    : (int)lround(1 + (double)(c_end - 1) * i / RPT_PARETO_CURVE_POINTS);
        if (c > c_end)
            break;
        if (!added_max && max_c > prev && max_c < c) {
            cs[n++] = max_c;
            added_max = 1;
        }
        if (c > prev)
            cs[n++] = c;
        added_max |= c == max_c;
        prev = c > prev ? c : prev;
    }
    *out = cs;
    *n_out = n;
    return 0;
}

static int curve_json(cJSON *arr, const fit_plan *p)
{
    for (size_t i = 0; i < p->n_at; i++) {
        const fit_plan_at *at = &p->at[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            return -1;
        }
        if (add_num(o, "c", at->concurrency) || add_num(o, "tok_per_s", at->tok_per_s) ||
            add_num(o, "user_tok_per_s", at->user_tok_per_s) || add_pair(o, "tok_per_s_ci", at->tok_per_s_ci) ||
            add_pair(o, "user_tok_per_s_ci", at->user_tok_per_s_ci) ||
            !cJSON_AddBoolToObject(o, "extrapolated", at->extrapolated))
            return -1;
    }
    return 0;
}

/* A point's goodput against the objectives, and whether it meets them. */
static int point_goodput_json(cJSON *o, const fit_run *run, const fit_level *L, const fit_plan *p, size_t i,
                              const fit_slo *slo)
{
    /* goodput as plan counts it: plan's own figures when there is a law,
     * else the same count (fit_level_goodput_count) without a plan */
    size_t n_meas, n_good;
    double dur = L->duration_s;
    if (p) {
        n_meas = p->goodput[i].n_measured;
        n_good = p->goodput[i].n_good;
    } else {
        fit_level_goodput_count(run, L->level, slo, &n_meas, &n_good);
    }
    double frac = n_meas ? (double)n_good / (double)n_meas : NAN;
    if (add_num(o, "n_measured", (double)n_meas) || add_num(o, "n_good", (double)n_good) ||
        add_num(o, "good_frac", frac) || add_num(o, "goodput_req_per_s", dur > 0 ? n_good / dur : NAN) ||
        !cJSON_AddBoolToObject(o, "meets", frac >= RPT_PARETO_ATTAINMENT) ||
        /* plan's best level, unless nothing met the objectives anywhere */
        !cJSON_AddBoolToObject(o, "best", p && p->best_goodput_idx == (int)i && n_good > 0))
        return -1;
    return 0;
}

/* A level's point: total and per-user tok/s, and what they are (basis). */
static const char *point_rates(const fit_level *L, double *tok, double *user)
{
    if (L->closed_loop && L->concurrency > 0) {
        *tok = L->steady_tok_per_s;
        *user = *tok / L->concurrency;
        return "steady throughput / C";
    }
    *tok = L->output_tok_per_s;
    *user = L->tpot.n > 0 && L->tpot.p50_ms > 0 ? 1000.0 / L->tpot.p50_ms : NAN;
    return "output tokens/s, 1000 / TPOT p50";
}

/* An open level's planned rate (NAN for a closed one). */
static double point_rate(const fit_run *run, const fit_level *L)
{
    double rate = NAN;
    for (size_t k = 0; k < fit_run_n_levels(run); k++)
        if (fit_run_level(run, k)->level == L->level && !L->closed_loop)
            rate = fit_run_level(run, k)->rate_per_s;
    return rate;
}

/* One measured level's point; skipped (0) when the level lacks the figures. */
static int point_json(cJSON *arr, const fit_run *run, const fit_level *L, const fit_plan *p, size_t i,
                      const fit_slo *slo, int any_slo)
{
    double tok, user;
    const char *basis = point_rates(L, &tok, &user);
    if (!isfinite(tok) || !isfinite(user))
        return 0;
    double rate = point_rate(run, L);
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return -1;
    }
    if (add_num(o, "level", L->level) || add_num(o, "c", L->concurrency) ||
        !cJSON_AddStringToObject(o, "mode", L->closed_loop ? "closed" : "open") || add_num(o, "rate_per_s", rate) ||
        add_num(o, "tok_per_s", tok) || add_num(o, "user_tok_per_s", user) ||
        !cJSON_AddStringToObject(o, "basis", basis))
        return -1;
    if (!any_slo)
        return cJSON_AddNullToObject(o, "meets") && cJSON_AddFalseToObject(o, "best") ? 0 : -1;
    return point_goodput_json(o, run, L, p, i, slo);
}

static int objectives_json(cJSON *o, const fit_slo *slo, const fit_plan *p)
{
    cJSON *j = cJSON_AddObjectToObject(o, "objectives");
    if (!j || add_num(j, "ttft_ms", fit_slo_given(slo->ttft_ms) ? slo->ttft_ms : NAN) ||
        add_num(j, "tpot_ms", fit_slo_given(slo->tpot_ms) ? slo->tpot_ms : NAN) ||
        add_num(j, "e2e_ms", fit_slo_given(slo->e2e_ms) ? slo->e2e_ms : NAN) ||
        /* a stream meets a per-token objective S when its rate is >= 1000/S */
        add_num(j, "user_tok_per_s_min", fit_slo_given(slo->tpot_ms) ? 1000.0 / slo->tpot_ms : NAN) ||
        add_num(j, "attainment", RPT_PARETO_ATTAINMENT))
        return -1;
    if (!p || !p->has_max_c)
        return cJSON_AddNullToObject(j, "max_c") ? 0 : -1;
    cJSON *m = cJSON_AddObjectToObject(j, "max_c");
    double ci[2] = {p->n_star_ci[0] < 0 ? 0 : (double)p->n_star_ci[0],
                    p->n_star_ci[1] == LONG_MAX ? INFINITY : (double)p->n_star_ci[1]};
    if (!m || add_num(m, "n", p->n_star == LONG_MAX ? INFINITY : (double)p->n_star) || add_pair(m, "n_ci", ci) ||
        !cJSON_AddBoolToObject(m, "extrapolated", p->n_star_extrapolated))
        return -1;
    return 0;
}

/* The curve's last C, and (*max_c) the largest measured closed-loop C. */
static int curve_end(const fit_result *res, int *max_c)
{
    for (size_t i = 0; i < res->n_levels; i++)
        if (res->levels[i].closed_loop && res->levels[i].concurrency > *max_c)
            *max_c = res->levels[i].concurrency;
    /* a bit beyond the largest measured C, at least one step; with open-loop
     * levels only, beyond the largest N the law was fitted on (all of it
     * "extrapolated" by plan's definition: no C was measured) */
    double base = *max_c;
    if (*max_c == 0 && res->chart.n_max > base) /* the largest N of any step sample */
        base = res->chart.n_max;
    int c_end = (int)ceil(ceil(base) * RPT_PARETO_BEYOND);
    if (c_end <= (int)ceil(base))
        c_end = (int)ceil(base) + 1;
    if (c_end > 1000000)
        c_end = 1000000;
    return c_end;
}

cJSON *rpt_pareto_json(const fit_run *run, const fit_result *res, const fit_slo *slo_in, char *err,
                       size_t errlen)
{
    fit_slo slo = slo_in ? *slo_in : (fit_slo){NAN, NAN, NAN};
    int any_slo = fit_slo_given(slo.ttft_ms) || fit_slo_given(slo.tpot_ms) || fit_slo_given(slo.e2e_ms);
    int *cs = NULL;
    size_t n_cs = 0;
    fit_plan *plan = NULL;
    char why[256] = "";
    cJSON *o = cJSON_CreateObject();
    if (!o)
        goto oom;

    int max_c = 0, c_end = curve_end(res, &max_c);
    if (res->law.ok) {
        if (curve_cs(max_c, c_end, &cs, &n_cs))
            goto oom;
        fit_plan_options po = {.slo = slo, .at_c = cs, .n_at_c = n_cs};
        int rc = fit_plan_compute(run, res, &po, &plan, why, sizeof why);
        if (rc == LL_ENOMEM)
            goto oom;
    } else {
        snprintf(why, sizeof why, "%s", res->no_law[0] ? res->no_law : "too few steady steps");
    }
    cJSON *curve = cJSON_AddArrayToObject(o, "curve");
    cJSON *pts = cJSON_AddArrayToObject(o, "points");
    if (!curve || !pts || add_num(o, "max_measured_c", max_c) ||
        (plan ? !cJSON_AddNullToObject(o, "no_curve") : !cJSON_AddStringToObject(o, "no_curve", why)))
        goto oom;
    if (plan && curve_json(curve, plan))
        goto oom;
    for (size_t i = 0; i < res->n_levels; i++)
        if (point_json(pts, run, &res->levels[i], plan, i, &slo, any_slo))
            goto oom;
    if (any_slo ? objectives_json(o, &slo, plan) : !cJSON_AddNullToObject(o, "objectives"))
        goto oom;
    free(cs);
    fit_plan_free(plan);
    return o;
oom:
    ll_errf(err, errlen, "out of memory building the Pareto chart's data");
    free(cs);
    fit_plan_free(plan);
    cJSON_Delete(o);
    return NULL;
}
