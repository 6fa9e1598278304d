/* output.c: a fit_result as the --json object and as a terminal summary.
 * Every number goes through ll_json_add_num (the one NaN -> null rule) and
 * every cJSON_Add* is checked; a failure gives NULL (out of memory). */
#include "fit_internal.h"

#include <math.h>
#include <string.h>

#define ADD_OK(x) ((x) != NULL)

static int add_pair(cJSON *o, const char *k, const double v[2])
{
    cJSON *a = cJSON_AddArrayToObject(o, k), *x = NULL;
    if (!a)
        return LL_ENOMEM;
    for (int i = 0; i < 2; i++) {
        x = isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull();
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            return LL_ENOMEM;
        }
    }
    return 0;
}

/* The one shape of a law in JSON (fit --json, summary.json, compare). */
static int add_law(cJSON *parent, const char *key, const fit_law *L, const char *model)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "a_ms", L->a_ms));
    LL_TRY(ll_json_add_num(o, "b_ms", L->b_ms));
    LL_TRY(add_pair(o, "a_ci_ms", L->a_ci_ms));
    LL_TRY(add_pair(o, "b_ci_ms", L->b_ci_ms));
    LL_TRY(ll_json_add_num(o, "r2", L->r2));
    LL_TRY(ll_json_add_num(o, "n_samples", (double)L->n_samples));
    if (model && !ADD_OK(cJSON_AddStringToObject(o, "model", model)))
        return LL_ENOMEM;
    if (!ADD_OK(cJSON_AddStringToObject(o, "method", L->method ? L->method : "none")) ||
        !ADD_OK(cJSON_AddBoolToObject(o, "ok", L->ok)) ||
        !ADD_OK(cJSON_AddStringToObject(o, "note", L->note)))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "a_se_ms", L->a_se_ms));
    LL_TRY(ll_json_add_num(o, "b_se_ms", L->b_se_ms));
    LL_TRY(ll_json_add_num(o, "cov_ab_ms2", L->cov_ab_ms2));
    LL_TRY(ll_json_add_num(o, "t_crit", L->t_crit));
    LL_TRY(ll_json_add_num(o, "resid_sd_ms", L->resid_sd_ms));
    LL_TRY(ll_json_add_num(o, "n_points", (double)L->n_points));
    LL_TRY(ll_json_add_num(o, "n_trimmed", (double)L->n_trimmed));
    LL_TRY(ll_json_add_num(o, "n_distinct_n", (double)L->n_distinct));
    return 0;
fail:
    return rc;
}

/* {n, p50, p90, p99, mean, max}: summary.json's shape of a latency. */
static int add_dist(cJSON *parent, const char *key, const fit_dist *d)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "n", (double)d->n));
    LL_TRY(ll_json_add_num(o, "p50", d->p50_ms));
    LL_TRY(ll_json_add_num(o, "p90", d->p90_ms));
    LL_TRY(ll_json_add_num(o, "p99", d->p99_ms));
    LL_TRY(ll_json_add_num(o, "mean", d->mean_ms));
    LL_TRY(ll_json_add_num(o, "max", d->max_ms));
    return 0;
fail:
    return rc;
}

/* "token_rate": the level's token rate over time, thinking and answer apart
 * (t0_s: first bin's start, seconds after the level's start). */
static int add_rate_series(cJSON *o, const fit_level *L)
{
    int rc;
    cJSON *rate = cJSON_AddObjectToObject(o, "token_rate");
    if (!rate)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(rate, "t0_s", L->n_rate_bins ? (L->rate_t0_ns - L->start_ns) / 1e9 : NAN));
    LL_TRY(ll_json_add_num(rate, "bin_s", L->n_rate_bins ? L->rate_bin_ns / 1e9 : NAN));
    cJSON *th = cJSON_AddArrayToObject(rate, "think_tok_per_s");
    cJSON *an = cJSON_AddArrayToObject(rate, "answer_tok_per_s");
    if (!th || !an)
        return LL_ENOMEM;
    for (size_t i = 0; i < L->n_rate_bins; i++) {
        cJSON *x = cJSON_CreateNumber(L->think_tok_per_s[i]);
        if (!x || !cJSON_AddItemToArray(th, x))
            return cJSON_Delete(x), LL_ENOMEM;
        x = cJSON_CreateNumber(L->answer_tok_per_s[i]);
        if (!x || !cJSON_AddItemToArray(an, x))
            return cJSON_Delete(x), LL_ENOMEM;
    }
    return 0;
fail:
    return rc;
}

/* Requests, latencies and rates under summary.json's key names (fit.h
 * "Per-level figures"). */
static int add_level_figures(cJSON *o, const fit_level *L)
{
    int rc;
    size_t failed = L->n_sent_failed;
    LL_TRY(ll_json_add_num(o, "sent", (double)L->n_sent));
    LL_TRY(ll_json_add_num(o, "ok", (double)(L->n_sent - failed)));
    LL_TRY(ll_json_add_num(o, "failed", (double)failed));
    cJSON *fc = cJSON_AddObjectToObject(o, "failed_by_class");
    if (!fc)
        return LL_ENOMEM;
    for (int c = 1; c < LL_ERRC__COUNT; c++)
        LL_TRY(ll_json_add_num(fc, ll_err_class_name((ll_err_class)c), (double)L->failed_by_class[c]));
    LL_TRY(add_dist(o, "ttft_ms", &L->ttft));
    LL_TRY(add_dist(o, "ttfa_ms", &L->ttfa));
    LL_TRY(add_dist(o, "tpot_ms", &L->tpot));
    LL_TRY(add_dist(o, "itl_ms", &L->itl));
    LL_TRY(add_dist(o, "e2e_ms", &L->e2e));
    if (!L->closed_loop) {
        LL_TRY(add_dist(o, "client_lag_ms", &L->client_lag));
        LL_TRY(add_dist(o, "ttft_from_intended_ms", &L->ttft_sched));
        LL_TRY(add_dist(o, "e2e_from_intended_ms", &L->e2e_sched));
    }
    LL_TRY(ll_json_add_num(o, "think_tok", (double)L->think_tok));
    LL_TRY(ll_json_add_num(o, "answer_tok", (double)L->answer_tok));
    LL_TRY(ll_json_add_num(o, "usage_completion_tok", (double)L->usage_completion_tok));
    LL_TRY(ll_json_add_num(o, "think_tok_per_s", L->mean_think_tok_per_s));
    LL_TRY(ll_json_add_num(o, "answer_tok_per_s", L->mean_answer_tok_per_s));
    LL_TRY(ll_json_add_num(o, "output_tok_per_s", L->output_tok_per_s));
    LL_TRY(ll_json_add_num(o, "req_per_s", L->req_per_s));
    LL_TRY(ll_json_add_num(o, "server_n", L->server_n));
    LL_TRY(ll_json_add_num(o, "server_waiting", L->server_waiting));
    LL_TRY(ll_json_add_num(o, "server_step_ms", L->server_step_ms));
    LL_TRY(ll_json_add_num(o, "server_tok_per_step", L->server_tok_per_step));
    LL_TRY(ll_json_add_num(o, "server_scrapes", (double)L->server_scrapes));
    LL_TRY(ll_json_add_num(o, "server_stale_s", L->server_stale_s));
    if (!ADD_OK(cJSON_AddBoolToObject(o, "server_n_disagrees", L->server_n_disagrees)))
        return LL_ENOMEM;
    LL_TRY(fit_level_gpu_json(o, L));
    return 0;
fail:
    return rc;
}

static cJSON *level_json(const fit_level *L)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    LL_TRY(ll_json_add_num(o, "level", L->level));
    LL_TRY(ll_json_add_num(o, "concurrency", L->concurrency));
    if (!ADD_OK(cJSON_AddStringToObject(o, "mode", L->closed_loop ? "closed" : "open"))) {
        rc = LL_ENOMEM;
        goto fail;
    }
    LL_TRY(ll_json_add_num(o, "steady_tok_per_s", L->steady_tok_per_s));
    LL_TRY(add_pair(o, "steady_tok_per_s_ci", L->steady_tok_per_s_ci));
    LL_TRY(ll_json_add_num(o, "predicted_tok_per_s", L->predicted_tok_per_s));
    LL_TRY(ll_json_add_num(o, "ramp_s", L->ramp_s));
    LL_TRY(ll_json_add_num(o, "error_rel", L->error_rel));
    LL_TRY(add_pair(o, "error_rel_ci", L->error_rel_ci));
    LL_TRY(ll_json_add_num(o, "whole_tok_per_s", L->whole_tok_per_s));
    LL_TRY(ll_json_add_num(o, "steady_step_ms", L->steady_step_ms));
    LL_TRY(ll_json_add_num(o, "burst_gap_frac", L->burst_gap_frac));
    LL_TRY(ll_json_add_num(o, "burst_gap_ms", L->burst_gap_ms));
    if (!ADD_OK(cJSON_AddBoolToObject(o, "client_bound", L->client_bound))) {
        rc = LL_ENOMEM;
        goto fail;
    }
    LL_TRY(ll_json_add_num(o, "client_busy_frac", L->client_busy_frac));
    LL_TRY(ll_json_add_num(o, "client_events_per_read", L->client_events_per_read));
    LL_TRY(ll_json_add_num(o, "client_gap_vs_step", L->client_gap_vs_step));
    LL_TRY(ll_json_add_num(o, "prompt_tok_target_mean", L->prompt_tok_target_mean));
    LL_TRY(ll_json_add_num(o, "prompt_tok_server_mean", L->prompt_tok_server_mean));
    LL_TRY(ll_json_add_num(o, "n_counts_attributed", (double)L->n_counts_attributed));
    LL_TRY(ll_json_add_num(o, "n_counts_tokenizer", (double)L->n_counts_tokenizer));
    LL_TRY(ll_json_add_num(o, "counts_stream_tok", (double)L->counts_stream_tok));
    LL_TRY(ll_json_add_num(o, "counts_recorded_tok", (double)L->counts_recorded_tok));
    LL_TRY(ll_json_add_num(o, "steady_s", L->steady_s));
    LL_TRY(ll_json_add_num(o, "ramp_tokens", L->ramp_tokens));
    LL_TRY(ll_json_add_num(o, "duration_s", L->duration_s));
    LL_TRY(ll_json_add_num(o, "tokens", L->tokens));
    LL_TRY(ll_json_add_num(o, "ttft_p50_ms", L->ttft.p50_ms));
    LL_TRY(ll_json_add_num(o, "ttft_p99_ms", L->ttft.p99_ms));
    LL_TRY(ll_json_add_num(o, "n_requests", (double)L->n_requests));
    LL_TRY(ll_json_add_num(o, "n_ok", (double)L->n_ok));
    LL_TRY(ll_json_add_num(o, "n_failed", (double)L->n_failed));
    LL_TRY(ll_json_add_num(o, "n_warmup", (double)L->n_warmup));
    LL_TRY(ll_json_add_num(o, "n_samples", (double)L->n_samples));
    LL_TRY(ll_json_add_num(o, "n_steady_samples", (double)L->n_steady_samples));
    LL_TRY(ll_json_add_num(o, "n_steady_points", (double)L->n_steady_points));
    LL_TRY(ll_json_add_num(o, "n_samples_after_cut", (double)L->n_samples_after_cut));
    if (!ADD_OK(cJSON_AddBoolToObject(o, "closed_loop", L->closed_loop)) ||
        !ADD_OK(cJSON_AddBoolToObject(o, "interrupted", L->interrupted))) {
        rc = LL_ENOMEM;
        goto fail;
    }
    LL_TRY(add_level_figures(o, L));
    LL_TRY(add_rate_series(o, L));
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static int add_model_check(cJSON *parent, const fit_model_check *m)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, "model_check");
    if (!o || !ADD_OK(cJSON_AddBoolToObject(o, "done", m->done)) ||
        !ADD_OK(cJSON_AddStringToObject(o, "best", fit_model_name(m->best))))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "bic_linear", m->bic_linear));
    LL_TRY(ll_json_add_num(o, "bic_quadratic", m->bic_quadratic));
    LL_TRY(ll_json_add_num(o, "bic_piecewise", m->bic_piecewise));
    LL_TRY(ll_json_add_num(o, "quad_c_ms", m->quad_c_ms));
    LL_TRY(ll_json_add_num(o, "knee_n", m->knee_n));
    LL_TRY(ll_json_add_num(o, "slope_before_ms", m->slope_before_ms));
    LL_TRY(ll_json_add_num(o, "slope_after_ms", m->slope_after_ms));
    LL_TRY(ll_json_add_num(o, "n_trimmed", (double)m->n_trimmed));
    if (!ADD_OK(cJSON_AddStringToObject(o, "verdict", m->verdict)))
        return LL_ENOMEM;
    return 0;
fail:
    return rc;
}

/* "excluded": what was left out, and why (the counts behind the notes).
 * "requests" is the number of request records read (kept for readers of
 * schema 1 output); the excluded ones are the counts beside it. */
static int add_excluded(cJSON *parent, const fit_result *r)
{
    int rc;
    cJSON *ex = cJSON_AddObjectToObject(parent, "excluded");
    if (!ex)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(ex, "requests", (double)r->n_requests));
    LL_TRY(ll_json_add_num(ex, "failed", (double)r->n_failed));
    LL_TRY(ll_json_add_num(ex, "warmup", (double)r->n_warmup));
    LL_TRY(ll_json_add_num(ex, "ok_without_tokens", (double)r->n_no_tokens));
    LL_TRY(ll_json_add_num(ex, "empty_chunks", (double)r->n_empty_chunks));
    LL_TRY(ll_json_add_num(ex, "truncated_lines", (double)r->n_truncated_lines));
    LL_TRY(ll_json_add_num(ex, "bad_requests", (double)r->n_bad_requests));
    LL_TRY(ll_json_add_num(ex, "rejected_records", (double)r->n_rejected_records));
    LL_TRY(ll_json_add_num(ex, "out_of_range_values", (double)r->n_out_of_range));
    LL_TRY(ll_json_add_num(ex, "clamped_times", (double)r->n_clamped));
    LL_TRY(ll_json_add_num(ex, "law_outliers", (double)r->n_trimmed));
    return 0;
fail:
    return rc;
}

cJSON *fit_result_to_json(const fit_result *r)
{
    int rc;
    cJSON *o = cJSON_CreateObject(), *it;
    if (!o)
        return NULL;
    LL_TRY(add_law(o, "law", &r->law, fit_model_name(r->model.best)));
    LL_TRY(ll_json_add_num(o, "asymptote_tok_per_s", r->asymptote_tok_per_s));
    LL_TRY(ll_json_add_num(o, "n_half", r->n_half));
    if (!ADD_OK(cJSON_AddBoolToObject(o, "law_client_bound", r->law_client_bound)) ||
        !ADD_OK(r->law.ok ? cJSON_AddNullToObject(o, "no_law") : cJSON_AddStringToObject(o, "no_law", r->no_law)))
        goto fail;
    cJSON *lv = cJSON_AddArrayToObject(o, "levels");
    if (!lv)
        goto fail;
    for (size_t i = 0; i < r->n_levels; i++)
        if (!(it = level_json(&r->levels[i])) || !cJSON_AddItemToArray(lv, it)) {
            cJSON_Delete(it);
            goto fail;
        }
    LL_TRY(add_law(o, "ols", &r->ols, NULL));
    LL_TRY(add_law(o, "naive", &r->naive, NULL));
    /* fit.h "The law against the server's N" */
    if (!ADD_OK(cJSON_AddStringToObject(o, "law_n", r->law_n ? r->law_n : "client")))
        goto fail;
    if (r->law_other.ok)
        LL_TRY(add_law(o, "law_other", &r->law_other, NULL));
    else if (!ADD_OK(cJSON_AddNullToObject(o, "law_other")))
        goto fail;
    if (r->engine.ok)
        LL_TRY(add_law(o, "engine_law", &r->engine, NULL));
    else if (!ADD_OK(cJSON_AddNullToObject(o, "engine_law")))
        goto fail;
    if (r->has_truth) {
        cJSON *t = cJSON_AddObjectToObject(o, "truth");
        if (!t)
            goto fail;
        LL_TRY(ll_json_add_num(t, "a_ms", r->truth_a_ms));
        LL_TRY(ll_json_add_num(t, "b_ms", r->truth_b_ms));
        LL_TRY(ll_json_add_num(t, "time_scale", r->time_scale));
        if (!ADD_OK(cJSON_AddStringToObject(t, "engine_law", r->engine_law_spec)))
            goto fail;
    }
    LL_TRY(add_model_check(o, &r->model));
    LL_TRY(add_excluded(o, r));
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    if (!notes)
        goto fail;
    for (size_t i = 0; i < r->n_notes; i++)
        if (!(it = cJSON_CreateString(r->notes[i])) || !cJSON_AddItemToArray(notes, it)) {
            cJSON_Delete(it);
            goto fail;
        }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

int fit_ci_decimals(double lo, double hi)
{
    double w = hi - lo;
    if (!(w > 0) || !isfinite(w))
        return -1;
    int d = 1 - (int)floor(log10(w));
    if (d > 9)
        return -1;
    return d < 0 ? 0 : d;
}

static const char *fmt_dec(char buf[48], double v, int d)
{
    if (d < 0)
        snprintf(buf, 48, "%.6g", v);
    else
        snprintf(buf, 48, "%.*f", d, v);
    return buf;
}

/* "64,256": the concurrencies of the client-bound levels whose steps made
 * the law (fit_result.law_client_bound). */
static const char *client_bound_cs(const fit_result *r, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_levels && n < cap; i++)
        if (r->levels[i].client_bound && r->levels[i].n_steady_points > 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d", n ? "," : "", r->levels[i].concurrency);
    return buf;
}

void fit_print_law_line(FILE *f, const fit_result *r)
{
    const fit_law *L = &r->law;
    if (!L->ok) {
        /* No "law:" prefix: the sweep prints one before this line. */
        fprintf(f, "step(N) not fitted: %s\n", r->no_law[0] ? r->no_law : "no steady steps");
        return;
    }
    char x[6][48];
    int da = fit_ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = fit_ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    fprintf(f, "step(N) = %s + %s*N ms  (a 95%% [%s, %s], b 95%% [%s, %s])", fmt_dec(x[0], L->a_ms, da),
            fmt_dec(x[1], L->b_ms, db), fmt_dec(x[2], L->a_ci_ms[0], da), fmt_dec(x[3], L->a_ci_ms[1], da),
            fmt_dec(x[4], L->b_ci_ms[0], db), fmt_dec(x[5], L->b_ci_ms[1], db));
    if (r->has_truth && isfinite(r->time_scale) && r->time_scale > 0) {
        /* The bundled engine plays its law time_scale times faster; undo that
         * so the line reads in the law the user configured ("52+30n"), with
         * the decimals the interval needs at that scale (at least one). */
        double k = 1.0 / r->time_scale;
        int ua = fit_ci_decimals(k * L->a_ci_ms[0], k * L->a_ci_ms[1]);
        int ub = fit_ci_decimals(k * L->b_ci_ms[0], k * L->b_ci_ms[1]);
        if (r->time_scale != 1)
            fprintf(f, " = %s + %s*N ms at time scale 1", fmt_dec(x[0], k * L->a_ms, ua < 1 ? 1 : ua),
                    fmt_dec(x[1], k * L->b_ms, ub < 1 ? 1 : ub));
        if (r->engine_law_spec[0])
            fprintf(f, " (engine law %s)", r->engine_law_spec);
    }
    if (isfinite(r->asymptote_tok_per_s))
        fprintf(f, " -> at most %.4g tok/s, N1/2 = %.3g", r->asymptote_tok_per_s, r->n_half);
    char cs[128];
    if (r->law_client_bound)
        fprintf(f, "  -- NOT THE SERVER'S LAW: the client set the pace at C=%s (see notes)",
                client_bound_cs(r, cs, sizeof cs));
    fputc('\n', f);
}

/* A number for a table cell, or "-" when there is none. */
static const char *fmt_num(char buf[32], double v, const char *fmt)
{
    if (!isfinite(v))
        return "-";
    snprintf(buf, 32, fmt, v);
    return buf;
}

static void print_law_row(FILE *f, const char *name, const fit_law *L)
{
    if (!L->ok) {
        fprintf(f, "  %-22s (not fitted)\n", name);
        return;
    }
    /* The decimals each interval needs, so a tight one never prints as [3, 3]. */
    char x[6][48];
    int da = fit_ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = fit_ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    fprintf(f, "  %-22s a = %9s ms [%s, %s]   b = %9s ms [%s, %s]   R2 %.4f  sd %.3g ms  n %zu\n", name,
            fmt_dec(x[0], L->a_ms, da), fmt_dec(x[1], L->a_ci_ms[0], da), fmt_dec(x[2], L->a_ci_ms[1], da),
            fmt_dec(x[3], L->b_ms, db), fmt_dec(x[4], L->b_ci_ms[0], db), fmt_dec(x[5], L->b_ci_ms[1], db),
            L->r2, L->resid_sd_ms, L->n_points);
}

/* The server's own figures (fit.h "Server figures") beside the client's
 * steady step, when the sweep scraped any. */
static void print_server(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].server_scrapes || isfinite(r->levels[i].server_step_ms);
    if (!any)
        return;
    fprintf(f, "\nserver (scraped /metrics):\n%5s %6s %9s %9s %12s %12s %10s %8s\n", "level", "C", "server N",
            "waiting", "step ms", "client step", "tok/step", "scrapes");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32];
        fprintf(f, "%5d %6d %9s %9s %12s %12s %10s %8zu%s\n", L->level, L->concurrency,
                fmt_num(c1, L->server_n, "%.2f"), fmt_num(c2, L->server_waiting, "%.2f"),
                fmt_num(c3, L->server_step_ms, "%.4g"), fmt_num(c4, L->steady_step_ms, "%.4g"),
                fmt_num(c5, L->server_tok_per_step, "%.4g"), L->server_scrapes,
                L->server_n_disagrees ? "  N != D" : "");
    }
}

/* The GPU figures and diagnosis (fit.h "GPU figures and diagnosis"), when
 * any level has GPU or server data. */
static void print_gpu(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].gpu_scrapes || r->levels[i].server_scrapes;
    if (!any)
        return;
    fprintf(f, "\ngpu / diagnosis (steady windows; power summed over GPUs, activities averaged; wait +: "
               "server waiting, last third of the level minus first)\n  rule, first that holds: %s\n"
               "%5s %6s %8s %8s %6s %6s %6s %6s %9s %8s  %s\n",
            fit_diag_rule(), "level", "C", "power W", "limit W", "of cap", "SM", "tensor", "DRAM", "J/token", "wait +",
            "diagnosis");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c[8][32];
        fprintf(f, "%5d %6d %8s %8s %6s %6s %6s %6s %9s %8s  %s (%s)\n", L->level, L->concurrency,
                fmt_num(c[0], L->gpu_power_w, "%.1f"), fmt_num(c[1], L->gpu_power_limit_w, "%.1f"),
                fmt_num(c[2], L->gpu_power_frac, "%.2f"), fmt_num(c[3], L->gpu_sm_active, "%.2f"),
                fmt_num(c[4], L->gpu_tensor_active, "%.2f"), fmt_num(c[5], L->gpu_dram_active, "%.2f"),
                fmt_num(c[6], L->gpu_j_per_tok, "%.4f"), fmt_num(c[7], L->server_waiting_growth, "%.2f"),
                fit_diag_name(L->diagnosis), L->diagnosis_why);
    }
}

int fit_law_n_is_server(const fit_result *r) { return r->law_n && strcmp(r->law_n, "server") == 0; }

void fit_print(FILE *f, const fit_result *r)
{
    fit_print_law_line(f, r);
    if (fit_law_n_is_server(r))
        fprintf(f, "(N is the server's: its running requests at each step, fit --n server)\n");
    fprintf(f, "\nfits (step ms = a + b*N):\n");
    print_law_row(f, r->law.method && strcmp(r->law.method, "ols-fallback") == 0 ? "OLS FALLBACK, steady" : "law (mean step)", &r->law);
    print_law_row(f, "OLS, steady steps", &r->ols);
    print_law_row(f, "naive OLS, all gaps", &r->naive);
    if (r->law_other.ok)
        print_law_row(f, fit_law_n_is_server(r) ? "law vs client's D" : "law vs server's N", &r->law_other);
    if (r->engine.ok)
        print_law_row(f, "engine's own steps", &r->engine);
    if (r->has_truth)
        fprintf(f, "  %-22s a = %9.4g ms   b = %9.4g ms\n", "engine law (truth)", r->truth_a_ms,
                r->truth_b_ms);
    fprintf(f, "  steady samples %zu, in %zu step points; %zu samples in all\n",
            r->law.n_samples, r->law.n_points, r->n_samples);
    if (r->model.done)
        fprintf(f, "\nmodel check: %s: %s\n", fit_model_name(r->model.best), r->model.verdict);
    else /* no model was compared: naming "linear" would claim the data chose it */
        fprintf(f, "\nmodel check: %s\n", r->model.verdict);
    fprintf(f, "\n%5s %6s %12s %12s %8s %12s %9s %10s %8s %8s %7s %7s\n", "level", "C", "steady t/s",
            "law t/s", "err %", "whole t/s", "ramp s", "ramp tok", "steady", "failed", "burst%", "client");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32];
        fprintf(f, "%5d %6d %12s %12s %8s %12s %9s %10s %8zu %8zu %7s %7s%s%s\n", L->level,
                L->concurrency, fmt_num(c1, L->steady_tok_per_s, "%.5g"),
                fmt_num(c2, L->predicted_tok_per_s, "%.5g"),
                fmt_num(c3, 100 * L->error_rel, "%+.2f"), fmt_num(c4, L->whole_tok_per_s, "%.5g"),
                fmt_num(c5, L->ramp_s, "%.4g"), fmt_num(c6, L->ramp_tokens, "%.6g"),
                L->n_steady_samples, L->n_failed, fmt_num(c7, 100 * L->burst_gap_frac, "%.1f"),
                L->client_bound ? "BOUND" : "-",
                L->closed_loop ? "" : "  (open loop)",
                L->interrupted ? "  (interrupted)" : "");
    }
    print_server(f, r);
    print_gpu(f, r);
    if (r->n_notes) {
        fprintf(f, "\nleft out, and why:\n");
        for (size_t i = 0; i < r->n_notes; i++)
            fprintf(f, "  - %s\n", r->notes[i]);
    }
}
