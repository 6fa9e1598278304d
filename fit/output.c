/* output.c: a fit_result as the --json object and as a terminal summary. */
#include "fit_internal.h"

#include <math.h>

/* cJSON writes NAN as null only by accident of its printer; say it on purpose. */
static cJSON *num(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static int add_num(cJSON *o, const char *k, double v)
{
    cJSON *n = num(v);
    return n && cJSON_AddItemToObject(o, k, n) ? 0 : -1;
}

static int add_pair(cJSON *o, const char *k, const double v[2])
{
    cJSON *a = cJSON_CreateArray();
    if (!a || !cJSON_AddItemToObject(o, k, a))
        return cJSON_Delete(a), -1;
    cJSON *x = num(v[0]), *y = num(v[1]);
    if (!x || !cJSON_AddItemToArray(a, x))
        return cJSON_Delete(x), cJSON_Delete(y), -1;
    if (!y || !cJSON_AddItemToArray(a, y))
        return cJSON_Delete(y), -1;
    return 0;
}

static cJSON *law_json(const fit_law *L, const char *model)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int bad = 0;
    bad |= add_num(o, "a_ms", L->a_ms);
    bad |= add_num(o, "b_ms", L->b_ms);
    bad |= add_pair(o, "a_ci_ms", L->a_ci_ms);
    bad |= add_pair(o, "b_ci_ms", L->b_ci_ms);
    bad |= add_num(o, "r2", L->r2);
    bad |= add_num(o, "n_samples", (double)L->n_samples);
    if (model)
        bad |= !cJSON_AddStringToObject(o, "model", model);
    bad |= !cJSON_AddStringToObject(o, "method", L->method ? L->method : "none");
    bad |= !cJSON_AddBoolToObject(o, "ok", L->ok);
    bad |= add_num(o, "a_se_ms", L->a_se_ms);
    bad |= add_num(o, "b_se_ms", L->b_se_ms);
    bad |= add_num(o, "cov_ab_ms2", L->cov_ab_ms2);
    bad |= add_num(o, "t_crit", L->t_crit);
    bad |= add_num(o, "resid_sd_ms", L->resid_sd_ms);
    bad |= add_num(o, "n_points", (double)L->n_points);
    bad |= add_num(o, "n_distinct_n", (double)L->n_distinct);
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* "token_rate": the level's token rate over time, thinking and answer apart
 * (t0_s: first bin's start, seconds after the level's start). */
static int add_rate_series(cJSON *o, const fit_level *L)
{
    cJSON *rate = cJSON_AddObjectToObject(o, "token_rate");
    if (!rate)
        return -1;
    int bad = add_num(rate, "t0_s", L->n_rate_bins ? (L->rate_t0_ns - L->start_ns) / 1e9 : NAN);
    bad |= add_num(rate, "bin_s", L->n_rate_bins ? L->rate_bin_ns / 1e9 : NAN);
    cJSON *th = cJSON_AddArrayToObject(rate, "think_tok_per_s");
    cJSON *an = cJSON_AddArrayToObject(rate, "answer_tok_per_s");
    if (!th || !an)
        return -1;
    for (size_t i = 0; i < L->n_rate_bins; i++) {
        cJSON *x = num(L->think_tok_per_s[i]), *y = num(L->answer_tok_per_s[i]);
        if (!x || !cJSON_AddItemToArray(th, x)) {
            cJSON_Delete(x);
            cJSON_Delete(y);
            return -1;
        }
        if (!y || !cJSON_AddItemToArray(an, y)) {
            cJSON_Delete(y);
            return -1;
        }
    }
    return bad;
}

static cJSON *level_json(const fit_level *L)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int bad = 0;
    bad |= add_num(o, "level", L->level);
    bad |= add_num(o, "concurrency", L->concurrency);
    bad |= add_num(o, "steady_tok_per_s", L->steady_tok_per_s);
    bad |= add_num(o, "predicted_tok_per_s", L->predicted_tok_per_s);
    bad |= add_num(o, "ramp_s", L->ramp_s);
    bad |= add_num(o, "error_rel", L->error_rel);
    bad |= add_num(o, "whole_tok_per_s", L->whole_tok_per_s);
    bad |= add_num(o, "steady_step_ms", L->steady_step_ms);
    bad |= add_num(o, "burst_gap_frac", L->burst_gap_frac);
    bad |= add_num(o, "burst_gap_ms", L->burst_gap_ms);
    bad |= add_num(o, "steady_s", L->steady_s);
    bad |= add_num(o, "ramp_tokens", L->ramp_tokens);
    bad |= add_num(o, "duration_s", L->duration_s);
    bad |= add_num(o, "tokens", L->tokens);
    bad |= add_num(o, "ttft_p50_ms", L->ttft.p50_ms);
    bad |= add_num(o, "ttft_p99_ms", L->ttft.p99_ms);
    bad |= add_num(o, "n_requests", (double)L->n_requests);
    bad |= add_num(o, "n_ok", (double)L->n_ok);
    bad |= add_num(o, "n_failed", (double)L->n_failed);
    bad |= add_num(o, "n_warmup", (double)L->n_warmup);
    bad |= add_num(o, "n_samples", (double)L->n_samples);
    bad |= add_num(o, "n_steady_samples", (double)L->n_steady_samples);
    bad |= add_num(o, "n_steady_points", (double)L->n_steady_points);
    bad |= add_num(o, "n_samples_after_cut", (double)L->n_samples_after_cut);
    bad |= !cJSON_AddBoolToObject(o, "closed_loop", L->closed_loop);
    bad |= !cJSON_AddBoolToObject(o, "interrupted", L->interrupted);
    bad |= add_rate_series(o, L);
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fit_result_to_json(const fit_result *r)
{
    cJSON *o = cJSON_CreateObject(), *it;
    if (!o)
        return NULL;
    int bad = 0;
    const char *model = fit_model_name(r->model.best);
    if (!(it = law_json(&r->law, model)) || !cJSON_AddItemToObject(o, "law", it))
        goto fail;
    bad |= add_num(o, "asymptote_tok_per_s", r->asymptote_tok_per_s);
    bad |= add_num(o, "n_half", r->n_half);
    cJSON *lv = cJSON_AddArrayToObject(o, "levels");
    if (!lv)
        goto fail;
    for (size_t i = 0; i < r->n_levels; i++)
        if (!(it = level_json(&r->levels[i])) || !cJSON_AddItemToArray(lv, it))
            goto fail;
    if (!(it = law_json(&r->ols, NULL)) || !cJSON_AddItemToObject(o, "ols", it))
        goto fail;
    if (!(it = law_json(&r->naive, NULL)) || !cJSON_AddItemToObject(o, "naive", it))
        goto fail;
    if (r->engine.ok) {
        if (!(it = law_json(&r->engine, NULL)) || !cJSON_AddItemToObject(o, "engine_law", it))
            goto fail;
    } else {
        bad |= !cJSON_AddNullToObject(o, "engine_law");
    }
    if (r->has_truth) {
        cJSON *t = cJSON_AddObjectToObject(o, "truth");
        if (!t)
            goto fail;
        bad |= add_num(t, "a_ms", r->truth_a_ms);
        bad |= add_num(t, "b_ms", r->truth_b_ms);
        bad |= add_num(t, "time_scale", r->time_scale);
        bad |= !cJSON_AddStringToObject(t, "engine_law", r->engine_law_spec);
    }
    cJSON *m = cJSON_AddObjectToObject(o, "model_check");
    if (!m)
        goto fail;
    bad |= !cJSON_AddBoolToObject(m, "done", r->model.done);
    bad |= !cJSON_AddStringToObject(m, "best", model);
    bad |= add_num(m, "bic_linear", r->model.bic_linear);
    bad |= add_num(m, "bic_quadratic", r->model.bic_quadratic);
    bad |= add_num(m, "bic_piecewise", r->model.bic_piecewise);
    bad |= add_num(m, "quad_c_ms", r->model.quad_c_ms);
    bad |= add_num(m, "knee_n", r->model.knee_n);
    bad |= add_num(m, "slope_before_ms", r->model.slope_before_ms);
    bad |= add_num(m, "slope_after_ms", r->model.slope_after_ms);
    bad |= !cJSON_AddStringToObject(m, "verdict", r->model.verdict);
    cJSON *ex = cJSON_AddObjectToObject(o, "excluded");
    if (!ex)
        goto fail;
    /* "requests" is the number of request records read (kept for readers of
     * schema 1 output); the excluded ones are the failed, warmup and
     * token-less counts beside it. */
    bad |= add_num(ex, "requests", (double)r->n_requests);
    bad |= add_num(ex, "failed", (double)r->n_failed);
    bad |= add_num(ex, "warmup", (double)r->n_warmup);
    bad |= add_num(ex, "ok_without_tokens", (double)r->n_no_tokens);
    bad |= add_num(ex, "empty_chunks", (double)r->n_empty_chunks);
    bad |= add_num(ex, "truncated_lines", (double)r->n_truncated_lines);
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    if (!notes)
        goto fail;
    for (size_t i = 0; i < r->n_notes; i++)
        if (!(it = cJSON_CreateString(r->notes[i])) || !cJSON_AddItemToArray(notes, it))
            goto fail;
    if (bad)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* Decimals that show an interval of this width with two significant digits,
 * so "[5.199, 5.202]" never collapses to "[5.2, 5.2]"; -1 when the width is
 * zero or not a number (a noise-free fit), meaning "%.6g". */
static int ci_decimals(double lo, double hi)
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

void fit_print_law_line(FILE *f, const fit_result *r)
{
    const fit_law *L = &r->law;
    if (!L->ok) {
        fprintf(f, "law: not enough steady samples to fit step(N) = a + b*N\n");
        return;
    }
    char x[6][48];
    int da = ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    fprintf(f, "step(N) = %s + %s*N ms  (a 95%% [%s, %s], b 95%% [%s, %s])", fmt_dec(x[0], L->a_ms, da),
            fmt_dec(x[1], L->b_ms, db), fmt_dec(x[2], L->a_ci_ms[0], da), fmt_dec(x[3], L->a_ci_ms[1], da),
            fmt_dec(x[4], L->b_ci_ms[0], db), fmt_dec(x[5], L->b_ci_ms[1], db));
    if (r->has_truth && isfinite(r->time_scale) && r->time_scale > 0) {
        /* The bundled engine plays its law time_scale times faster; undo that
         * so the line reads in the law the user configured ("52+30n"), with
         * the decimals the interval needs at that scale (at least one). */
        double k = 1.0 / r->time_scale;
        int ua = ci_decimals(k * L->a_ci_ms[0], k * L->a_ci_ms[1]);
        int ub = ci_decimals(k * L->b_ci_ms[0], k * L->b_ci_ms[1]);
        if (r->time_scale != 1)
            fprintf(f, " = %s + %s*N ms at time scale 1", fmt_dec(x[0], k * L->a_ms, ua < 1 ? 1 : ua),
                    fmt_dec(x[1], k * L->b_ms, ub < 1 ? 1 : ub));
        if (r->engine_law_spec[0])
            fprintf(f, " (engine law %s)", r->engine_law_spec);
    }
    if (isfinite(r->asymptote_tok_per_s))
        fprintf(f, " -> at most %.4g tok/s, N1/2 = %.3g", r->asymptote_tok_per_s, r->n_half);
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
    int da = ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    fprintf(f, "  %-22s a = %9s ms [%s, %s]   b = %9s ms [%s, %s]   R2 %.4f  sd %.3g ms  n %zu\n", name,
            fmt_dec(x[0], L->a_ms, da), fmt_dec(x[1], L->a_ci_ms[0], da), fmt_dec(x[2], L->a_ci_ms[1], da),
            fmt_dec(x[3], L->b_ms, db), fmt_dec(x[4], L->b_ci_ms[0], db), fmt_dec(x[5], L->b_ci_ms[1], db),
            L->r2, L->resid_sd_ms, L->n_points);
}

void fit_print(FILE *f, const fit_result *r)
{
    fit_print_law_line(f, r);
    fprintf(f, "\nfits (step ms = a + b*N):\n");
    print_law_row(f, "robust, steady steps", &r->law);
    print_law_row(f, "OLS, steady steps", &r->ols);
    print_law_row(f, "naive OLS, all gaps", &r->naive);
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
    fprintf(f, "\n%5s %6s %12s %12s %8s %12s %9s %10s %8s %8s %7s\n", "level", "C", "steady t/s",
            "law t/s", "err %", "whole t/s", "ramp s", "ramp tok", "steady", "failed", "burst%");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32];
        fprintf(f, "%5d %6d %12s %12s %8s %12s %9s %10s %8zu %8zu %7s%s%s\n", L->level,
                L->concurrency, fmt_num(c1, L->steady_tok_per_s, "%.5g"),
                fmt_num(c2, L->predicted_tok_per_s, "%.5g"),
                fmt_num(c3, 100 * L->error_rel, "%+.2f"), fmt_num(c4, L->whole_tok_per_s, "%.5g"),
                fmt_num(c5, L->ramp_s, "%.4g"), fmt_num(c6, L->ramp_tokens, "%.6g"),
                L->n_steady_samples, L->n_failed, fmt_num(c7, 100 * L->burst_gap_frac, "%.1f"),
                L->closed_loop ? "" : "  (open loop)",
                L->interrupted ? "  (interrupted)" : "");
    }
    if (r->n_notes) {
        fprintf(f, "\nleft out, and why:\n");
        for (size_t i = 0; i < r->n_notes; i++)
            fprintf(f, "  - %s\n", r->notes[i]);
    }
}
