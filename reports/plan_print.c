/* plan_print.c: a capacity plan (fit/plan.c "Capacity plan") as `loadlaw
 * plan --json` writes it and as `loadlaw plan` prints it; fit/plan.c
 * computes it. */
#include "json_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------ */

static int at_json(cJSON *arr, const fit_plan_at *at)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return LL_ENOMEM;
    }
    LL_TRY(ll_json_add_num(o, "concurrency", at->concurrency));
    LL_TRY(rpt_json_bool(o, "extrapolated", at->extrapolated));
    LL_TRY(ll_json_add_num(o, "step_ms", at->step_ms));
    LL_TRY(ll_json_add_pair(o, "step_ci_ms", at->step_ci_ms));
    LL_TRY(ll_json_add_num(o, "tok_per_s", at->tok_per_s));
    LL_TRY(ll_json_add_pair(o, "tok_per_s_ci", at->tok_per_s_ci));
    LL_TRY(ll_json_add_num(o, "user_tok_per_s", at->user_tok_per_s));
    LL_TRY(ll_json_add_pair(o, "user_tok_per_s_ci", at->user_tok_per_s_ci));
    LL_TRY(ll_json_add_num(o, "ttft_p50_ms", at->ttft_p50_ms));
    LL_TRY(ll_json_add_num(o, "ttft_p90_ms", at->ttft_p90_ms));
    LL_TRY(rpt_json_bool(o, "ttft_interpolated", at->ttft_interpolated));
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
    /* the law's parameters the plan used, in plan's spelling */
    LL_TRY(rpt_json_law(j, "law", &p->law, NULL, NAN, rpt_law_in_plan));
    cJSON *obj = cJSON_AddObjectToObject(j, "objectives");
    if (!obj)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(j, "max_measured_c", p->max_measured_c));
    LL_TRY(ll_json_add_num(j, "context_tok", p->context_tok));
    LL_TRY(ll_json_add_num(obj, "ttft_ms", fit_slo_given(p->slo.ttft_ms) ? p->slo.ttft_ms : NAN));
    LL_TRY(ll_json_add_num(obj, "tpot_ms", fit_slo_given(p->slo.tpot_ms) ? p->slo.tpot_ms : NAN));
    LL_TRY(ll_json_add_num(obj, "e2e_ms", fit_slo_given(p->slo.e2e_ms) ? p->slo.e2e_ms : NAN));
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
        LL_TRY(rpt_json_bool(m, "extrapolated", p->n_star_extrapolated));
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

cJSON *rpt_plan_to_json(const fit_plan *p)
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
    if (p->model != FIT_MODEL_LINEAR && p->model != FIT_MODEL_CONTEXT)
        fprintf(f, "  (the %s model reaches it at N = %.2f)", fit_model_name(p->model), p->n_real);
    else
        fprintf(f, "  ((S - a)/b = %.2f)", p->n_real);
    if (p->n_star_extrapolated)
        fprintf(f, "  EXTRAPOLATED: beyond the largest measured C = %d", p->max_measured_c);
    fputc('\n', f);
}

void rpt_plan_print(FILE *f, const fit_plan *p)
{
    char b1[112], b2[112], b3[112];
    fprintf(f, "largest measured C: %d\n", p->max_measured_c);
    if (p->model == FIT_MODEL_CONTEXT)
        fprintf(f, "planned on the context model at %.0f tokens of context per request (--context): step(N) = "
                   "%.4g + %.4g*N ms\n",
                p->context_tok, p->law.a_ms, p->law.b_ms);
    else if (p->model != FIT_MODEL_LINEAR && isfinite(p->context_tok))
        fprintf(f, "planned on the %s model at %.0f tokens of context per request (--context; HC3 intervals): %s\n",
                fit_model_name(p->model), p->context_tok, p->check->verdict);
    else if (p->model != FIT_MODEL_LINEAR)
        fprintf(f, "planned on the %s model (HC3 intervals): %s\n", fit_model_name(p->model), p->check->verdict);
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
    if (fit_slo_given(p->slo.ttft_ms))
        fprintf(f, " TTFT <= %g ms", p->slo.ttft_ms);
    if (fit_slo_given(p->slo.tpot_ms))
        fprintf(f, " TPOT <= %g ms", p->slo.tpot_ms);
    if (fit_slo_given(p->slo.e2e_ms))
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
