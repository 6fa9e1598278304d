/* json.c: the one writer of fit's figures as JSON. Every file and page that
 * holds a law, a level or a latency distribution gets it from here:
 * `loadlaw fit --json` (fit_result_to_json), RUN_DIR/summary.json and the
 * report's data (reports/, through fit_json_level and fit_json_headline),
 * `loadlaw compare --json` and `loadlaw plan --json` (fit_json_law,
 * fit_json_dist).
 *
 * Where two files spell the same shape differently (fit_json.h, fit_json_style),
 * both spellings are here, each key once, so a file's keys never drift from
 * another's by a second writer. Every number goes through ll_json_add_num
 * (the one NaN -> null rule); every cJSON_Add* is checked (LL_ENOMEM). */
#include "fit_internal.h"

#include <math.h>
#include <string.h>

#define ADD_OK(x) ((x) != NULL)

static int add_bool(cJSON *o, const char *k, int v)
{
    return cJSON_AddBoolToObject(o, k, v) ? 0 : LL_ENOMEM;
}

static int add_str(cJSON *o, const char *k, const char *v)
{
    return cJSON_AddStringToObject(o, k, v) ? 0 : LL_ENOMEM;
}

/* ---- distributions ------------------------------------------------------- */

int fit_json_dist(cJSON *parent, const char *key, const fit_dist *d, fit_json_style style)
{
    /* the run's files: {n, p50, p90, p99, mean, max}; compare: {n, mean_ms,
     * p50_ms, p90_ms, p99_ms, max_ms} (its objects sit beside non-latency
     * figures, so the unit is in each name) */
    static const char *const run_keys[] = {"p50", "p90", "p99", "mean", "max"};
    static const char *const ms_keys[] = {"mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"};
    const double run_v[] = {d->p50_ms, d->p90_ms, d->p99_ms, d->mean_ms, d->max_ms};
    const double ms_v[] = {d->mean_ms, d->p50_ms, d->p90_ms, d->p99_ms, d->max_ms};
    int ms = style == FIT_JSON_COMPARE;
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o || ll_json_add_num(o, "n", (double)d->n))
        return LL_ENOMEM;
    for (int i = 0; i < 5; i++)
        if (ll_json_add_num(o, ms ? ms_keys[i] : run_keys[i], ms ? ms_v[i] : run_v[i]))
            return LL_ENOMEM;
    return 0;
}

/* ---- laws ---------------------------------------------------------------- */

static int law_ok(cJSON *o, const fit_law *L)
{
    return add_bool(o, "ok", L->ok);
}

static int add_asymptote(cJSON *o, double tok_per_s)
{
    return ll_json_add_num(o, "asymptote_tok_per_s", tok_per_s);
}

/* The law's uncertainty: what fit_law_mean_ci and plan's intervals use. */
static int law_se(cJSON *o, const fit_law *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "a_se_ms", L->a_se_ms));
    LL_TRY(ll_json_add_num(o, "b_se_ms", L->b_se_ms));
    LL_TRY(ll_json_add_num(o, "cov_ab_ms2", L->cov_ab_ms2));
    LL_TRY(ll_json_add_num(o, "t_crit", L->t_crit));
    return 0;
fail:
    return rc;
}

/* The chart's law: short names the page script reads. */
static int law_chart(cJSON *o, const fit_law *L)
{
    int rc;
    LL_TRY(law_ok(o, L));
    LL_TRY(ll_json_add_num(o, "a", L->a_ms));
    LL_TRY(ll_json_add_num(o, "b", L->b_ms));
    LL_TRY(ll_json_add_pair(o, "a_ci", L->a_ci_ms));
    LL_TRY(ll_json_add_pair(o, "b_ci", L->b_ci_ms));
    LL_TRY(ll_json_add_num(o, "cov_ab", L->cov_ab_ms2));
    LL_TRY(ll_json_add_num(o, "t_crit", L->t_crit));
    return 0;
fail:
    return rc;
}

/* The run's full law (fit --json, summary.json). */
static int law_run_tail(cJSON *o, const fit_law *L, const char *model)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "n_samples", (double)L->n_samples));
    if (model)
        LL_TRY(add_str(o, "model", model));
    LL_TRY(add_str(o, "method", L->method ? L->method : "none"));
    LL_TRY(law_ok(o, L));
    LL_TRY(add_str(o, "note", L->note));
    LL_TRY(law_se(o, L));
    LL_TRY(ll_json_add_num(o, "resid_sd_ms", L->resid_sd_ms));
    LL_TRY(ll_json_add_num(o, "n_points", (double)L->n_points));
    LL_TRY(ll_json_add_num(o, "n_trimmed", (double)L->n_trimmed));
    LL_TRY(ll_json_add_num(o, "n_distinct_n", (double)L->n_distinct));
    return 0;
fail:
    return rc;
}

int fit_json_law(cJSON *parent, const char *key, const fit_law *L, const char *model, double asym_tok_per_s,
                 fit_json_style style)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    if (style == FIT_JSON_CHART)
        return law_chart(o, L);
    if (style == FIT_JSON_COMPARE)
        LL_TRY(law_ok(o, L));
    LL_TRY(ll_json_add_num(o, "a_ms", L->a_ms));
    LL_TRY(ll_json_add_num(o, "b_ms", L->b_ms));
    if (style == FIT_JSON_PLAN)
        return law_se(o, L);
    LL_TRY(ll_json_add_pair(o, "a_ci_ms", L->a_ci_ms));
    LL_TRY(ll_json_add_pair(o, "b_ci_ms", L->b_ci_ms));
    LL_TRY(ll_json_add_num(o, "r2", L->r2));
    if (style == FIT_JSON_COMPARE)
        return add_asymptote(o, asym_tok_per_s);
    return law_run_tail(o, L, model);
fail:
    return rc;
}

int fit_json_headline(cJSON *o, const fit_result *r)
{
    int rc;
    LL_TRY(fit_json_law(o, "law", &r->law, fit_model_name(r->model.best), NAN, FIT_JSON_RUN));
    LL_TRY(add_asymptote(o, r->asymptote_tok_per_s));
    LL_TRY(ll_json_add_num(o, "n_half", r->n_half));
    return 0;
fail:
    return rc;
}

/* ---- levels -------------------------------------------------------------- */

/* Keys both level shapes hold (fit --json and summary.json place them
 * differently), each spelled once: level_head and the put_* below. */
static int level_head(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "level", L->level));
    LL_TRY(ll_json_add_num(o, "concurrency", L->concurrency));
    return add_str(o, "mode", L->closed_loop ? "closed" : "open");
fail:
    return rc;
}

static int put_steady(cJSON *o, const fit_level *L)
{
    return ll_json_add_num(o, "steady_tok_per_s", L->steady_tok_per_s);
}

static int put_predicted(cJSON *o, const fit_level *L)
{
    return ll_json_add_num(o, "predicted_tok_per_s", L->predicted_tok_per_s);
}

static int put_ramp(cJSON *o, const fit_level *L)
{
    return ll_json_add_num(o, "ramp_s", L->ramp_s);
}

static int put_duration(cJSON *o, const fit_level *L)
{
    return ll_json_add_num(o, "duration_s", L->duration_s);
}

static int put_interrupted(cJSON *o, const fit_level *L)
{
    return add_bool(o, "interrupted", L->interrupted);
}

static int put_n_requests(cJSON *o, double n)
{
    return ll_json_add_num(o, "n_requests", n);
}

/* Requests by outcome: sent, ok, failed and failed_by_class. */
static int level_outcomes(cJSON *o, const fit_level *L)
{
    int rc;
    size_t failed = L->n_sent_failed, ok = L->n_sent > failed ? L->n_sent - failed : 0;
    LL_TRY(ll_json_add_num(o, "sent", (double)L->n_sent));
    LL_TRY(ll_json_add_num(o, "ok", (double)ok));
    LL_TRY(ll_json_add_num(o, "failed", (double)failed));
    cJSON *fc = cJSON_AddObjectToObject(o, "failed_by_class");
    if (!fc)
        return LL_ENOMEM;
    for (int c = LL_ERRC_OK + 1; c < LL_ERRC__COUNT; c++)
        LL_TRY(ll_json_add_num(fc, ll_err_class_name((ll_err_class)c), (double)L->failed_by_class[c]));
    return 0;
fail:
    return rc;
}

/* The latency distributions (the open-loop ones only for an open level). */
static int level_latencies(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(fit_json_dist(o, "ttft_ms", &L->ttft, FIT_JSON_RUN));
    LL_TRY(fit_json_dist(o, "ttfa_ms", &L->ttfa, FIT_JSON_RUN));
    LL_TRY(fit_json_dist(o, "tpot_ms", &L->tpot, FIT_JSON_RUN));
    LL_TRY(fit_json_dist(o, "itl_ms", &L->itl, FIT_JSON_RUN));
    LL_TRY(fit_json_dist(o, "e2e_ms", &L->e2e, FIT_JSON_RUN));
    if (!L->closed_loop) {
        LL_TRY(fit_json_dist(o, "client_lag_ms", &L->client_lag, FIT_JSON_RUN));
        LL_TRY(fit_json_dist(o, "ttft_from_intended_ms", &L->ttft_sched, FIT_JSON_RUN));
        LL_TRY(fit_json_dist(o, "e2e_from_intended_ms", &L->e2e_sched, FIT_JSON_RUN));
    }
    return 0;
fail:
    return rc;
}

static int level_tokens(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "think_tok", (double)L->think_tok));
    LL_TRY(ll_json_add_num(o, "answer_tok", (double)L->answer_tok));
    LL_TRY(ll_json_add_num(o, "usage_completion_tok", (double)L->usage_completion_tok));
    LL_TRY(ll_json_add_num(o, "think_tok_per_s", L->mean_think_tok_per_s));
    LL_TRY(ll_json_add_num(o, "answer_tok_per_s", L->mean_answer_tok_per_s));
    LL_TRY(ll_json_add_num(o, "output_tok_per_s", L->output_tok_per_s));
    LL_TRY(ll_json_add_num(o, "req_per_s", L->req_per_s));
    return 0;
fail:
    return rc;
}

/* What the server said per request (said.c "The server's own per-request
 * figures"); null where it said nothing. */
static int level_said(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "server_timed", (double)L->server_timed));
    LL_TRY(ll_json_add_num(o, "server_tpot_ms", L->server_tpot_ms));
    LL_TRY(ll_json_add_num(o, "server_prefill_ms", L->server_prefill_ms));
    LL_TRY(ll_json_add_num(o, "server_ttft_ms", L->server_ttft_ms));
    LL_TRY(ll_json_add_num(o, "ttft_beyond_server_ms", L->ttft_beyond_server_ms));
    LL_TRY(ll_json_add_num(o, "n_cached_said", (double)L->n_cached_said));
    LL_TRY(ll_json_add_num(o, "cache_share", L->cache_share));
    LL_TRY(ll_json_add_num(o, "prompt_tok_asked", L->prompt_tok_asked));
    LL_TRY(ll_json_add_num(o, "n_cut_short", (double)L->n_cut_short));
    LL_TRY(cJSON_AddStringToObject(o, "cut_short", L->cut_short_why) ? 0 : LL_ENOMEM);
fail:
    return rc;
}

/* The server's own figures (server.c "Server figures"); null where not scraped. */
static int level_server(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "server_n", L->server_n));
    LL_TRY(ll_json_add_num(o, "server_waiting", L->server_waiting));
    LL_TRY(ll_json_add_num(o, "server_step_ms", L->server_step_ms));
    LL_TRY(ll_json_add_num(o, "server_tok_per_step", L->server_tok_per_step));
    LL_TRY(ll_json_add_num(o, "server_scrapes", (double)L->server_scrapes));
    LL_TRY(ll_json_add_num(o, "server_stale_s", L->server_stale_s));
    LL_TRY(ll_json_add_num(o, "server_gen_tok_s", L->server_gen_tok_s));
    LL_TRY(ll_json_add_num(o, "server_cache_share", L->server_cache_share));
    if (!(L->server >= 0 ? cJSON_AddStringToObject(o, "server", ll_srv_name((ll_srv)L->server))
                         : cJSON_AddNullToObject(o, "server")))
        return LL_ENOMEM;
    return add_bool(o, "server_n_disagrees", L->server_n_disagrees);
fail:
    return rc;
}

/* Requests, latencies, rates, server and GPU figures (figures.c "Per-level
 * figures"). with_rates: also the level's duration, ramp, steady and
 * predicted throughput, where they sit in summary.json (fit --json has them
 * among its own keys). */
static int level_figures(cJSON *o, const fit_level *L, int with_rates)
{
    int rc;
    LL_TRY(level_outcomes(o, L));
    if (with_rates) {
        LL_TRY(put_duration(o, L));
        LL_TRY(put_ramp(o, L));
    }
    LL_TRY(level_latencies(o, L));
    LL_TRY(level_tokens(o, L));
    if (with_rates) {
        LL_TRY(put_steady(o, L));
        LL_TRY(put_predicted(o, L));
    }
    LL_TRY(level_server(o, L));
    LL_TRY(level_said(o, L));
    /* GPU figures and the diagnosis: gpu.c's one writer */
    return fit_level_gpu_json(o, L);
fail:
    return rc;
}

int fit_json_level_figures(cJSON *o, const fit_level *L)
{
    return level_figures(o, L, 1);
}

/* "token_rate": the level's token rate over time, thinking and answer apart
 * (t0_s: first bin's start, seconds after the level's start). */
static int level_rate_series(cJSON *o, const fit_level *L)
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
        /* finite by construction (tokens over a bin's width) */
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

/* fit --json's steady-state and client figures, before the level's figures. */
static int level_analysis(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(put_steady(o, L));
    LL_TRY(ll_json_add_pair(o, "steady_tok_per_s_ci", L->steady_tok_per_s_ci));
    LL_TRY(put_predicted(o, L));
    LL_TRY(put_ramp(o, L));
    LL_TRY(ll_json_add_num(o, "error_rel", L->error_rel));
    LL_TRY(ll_json_add_num(o, "k_mean", L->k_mean));
    LL_TRY(ll_json_add_num(o, "model_pred_tok_per_s", L->model_pred_tok_per_s));
    LL_TRY(ll_json_add_num(o, "model_error_rel", L->model_error_rel));
    LL_TRY(ll_json_add_pair(o, "error_rel_ci", L->error_rel_ci));
    LL_TRY(ll_json_add_num(o, "whole_tok_per_s", L->whole_tok_per_s));
    LL_TRY(ll_json_add_num(o, "steady_step_ms", L->steady_step_ms));
    LL_TRY(ll_json_add_num(o, "burst_gap_frac", L->burst_gap_frac));
    LL_TRY(ll_json_add_num(o, "burst_gap_ms", L->burst_gap_ms));
    LL_TRY(add_bool(o, "client_bound", L->client_bound));
    LL_TRY(ll_json_add_num(o, "client_busy_frac", L->client_busy_frac));
    LL_TRY(ll_json_add_num(o, "client_events_per_read", L->client_events_per_read));
    LL_TRY(ll_json_add_num(o, "client_gap_vs_step", L->client_gap_vs_step));
    return 0;
fail:
    return rc;
}

/* fit --json's counts: prompt and token accounting, samples. */
static int level_counts(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "prompt_tok_target_mean", L->prompt_tok_target_mean));
    LL_TRY(ll_json_add_num(o, "prompt_tok_server_mean", L->prompt_tok_server_mean));
    LL_TRY(ll_json_add_num(o, "n_counts_attributed", (double)L->n_counts_attributed));
    LL_TRY(ll_json_add_num(o, "n_counts_tokenizer", (double)L->n_counts_tokenizer));
    LL_TRY(ll_json_add_num(o, "counts_stream_tok", (double)L->counts_stream_tok));
    LL_TRY(ll_json_add_num(o, "counts_recorded_tok", (double)L->counts_recorded_tok));
    LL_TRY(ll_json_add_num(o, "steady_s", L->steady_s));
    LL_TRY(ll_json_add_num(o, "ramp_tokens", L->ramp_tokens));
    LL_TRY(put_duration(o, L));
    LL_TRY(ll_json_add_num(o, "tokens", L->tokens));
    LL_TRY(ll_json_add_num(o, "ttft_p50_ms", L->ttft.p50_ms));
    LL_TRY(ll_json_add_num(o, "ttft_p99_ms", L->ttft.p99_ms));
    LL_TRY(put_n_requests(o, (double)L->n_requests));
    LL_TRY(ll_json_add_num(o, "n_ok", (double)L->n_ok));
    LL_TRY(ll_json_add_num(o, "n_failed", (double)L->n_failed));
    LL_TRY(ll_json_add_num(o, "n_warmup", (double)L->n_warmup));
    LL_TRY(ll_json_add_num(o, "n_samples", (double)L->n_samples));
    LL_TRY(ll_json_add_num(o, "n_steady_samples", (double)L->n_steady_samples));
    LL_TRY(ll_json_add_num(o, "n_steady_points", (double)L->n_steady_points));
    LL_TRY(ll_json_add_num(o, "n_samples_after_cut", (double)L->n_samples_after_cut));
    LL_TRY(add_bool(o, "closed_loop", L->closed_loop));
    return 0;
fail:
    return rc;
}

/* summary.json's planned figures: what the run asked for (NULL: unknown). */
static int level_planned(cJSON *o, const fit_level *L, const fit_level_info *in)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "rate_per_s", in && !L->closed_loop ? in->rate_per_s : NAN));
    LL_TRY(put_n_requests(o, in ? in->n_requests_planned : NAN));
    LL_TRY(ll_json_add_num(o, "warmup", in ? in->n_warmup_planned : NAN));
    return 0;
fail:
    return rc;
}

/* fit --json's early and late tokens (position.c "Step time against position in
 * the request"): the mean step of the first and last quarter of positions,
 * steady samples and every sample. */
static int level_position(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "pos_max_tok", L->pos_max_tok));
    LL_TRY(ll_json_add_num(o, "early_ms", L->early_ms));
    LL_TRY(ll_json_add_num(o, "late_ms", L->late_ms));
    LL_TRY(ll_json_add_num(o, "early_all_ms", L->early_all_ms));
    LL_TRY(ll_json_add_num(o, "late_all_ms", L->late_all_ms));
    return 0;
fail:
    return rc;
}

cJSON *fit_json_level(const fit_level *L, const fit_level_info *planned, fit_json_style style)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    LL_TRY(level_head(o, L));
    if (style == FIT_JSON_SUMMARY) {
        LL_TRY(level_planned(o, L, planned));
        LL_TRY(put_interrupted(o, L));
        LL_TRY(level_figures(o, L, 1));
        return o;
    }
    LL_TRY(level_analysis(o, L));
    LL_TRY(level_position(o, L));
    LL_TRY(level_counts(o, L));
    LL_TRY(put_interrupted(o, L));
    LL_TRY(level_figures(o, L, 0));
    LL_TRY(level_rate_series(o, L));
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* ---- fit --json ---------------------------------------------------------- */

/* "chosen": the chosen model's terms ({"term","knee"?,"coef","se","ci"}),
 * HC3 errors; null for the line (the law is its fit). */
static int add_chosen(cJSON *o, const fit_model_check *m)
{
    int rc;
    const fit_model_fit *f = &m->chosen;
    if (!m->done || m->best == FIT_MODEL_LINEAR || !f->p)
        return cJSON_AddNullToObject(o, "chosen") ? 0 : LL_ENOMEM;
    cJSON *c = cJSON_AddObjectToObject(o, "chosen"), *terms = c ? cJSON_AddArrayToObject(c, "terms") : NULL;
    if (!terms || add_str(c, "model", fit_model_name(m->best)))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(c, "bic", f->bic));
    LL_TRY(ll_json_add_num(c, "effect", f->effect));
    LL_TRY(ll_json_add_num(c, "worst_n", f->worst_n));
    for (size_t j = 0; j < f->p; j++) {
        cJSON *t = cJSON_CreateObject();
        if (!t || !cJSON_AddItemToArray(terms, t) || add_str(t, "term", fit_term_name(f->term[j])))
            return LL_ENOMEM;
        if (f->term[j] == FIT_TERM_HINGE)
            LL_TRY(ll_json_add_num(t, "knee", f->knee[j]));
        double ci[2] = {f->coef[j] - 1.96 * f->se[j], f->coef[j] + 1.96 * f->se[j]};
        LL_TRY(ll_json_add_num(t, "coef", f->coef[j]));
        LL_TRY(ll_json_add_num(t, "se", f->se[j]));
        LL_TRY(ll_json_add_pair(t, "ci", ci));
    }
    return 0;
fail:
    return rc;
}

static int add_model_check(cJSON *parent, const fit_model_check *m)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, "model_check");
    if (!o || add_bool(o, "done", m->done) || add_str(o, "best", fit_model_name(m->best)))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "bic_linear", m->bic_linear));
    LL_TRY(ll_json_add_num(o, "bic_quadratic", m->bic_quadratic));
    LL_TRY(ll_json_add_num(o, "bic_piecewise", m->bic_piecewise));
    LL_TRY(ll_json_add_num(o, "quad_c_ms", m->quad_c_ms));
    LL_TRY(ll_json_add_num(o, "knee_n", m->knee_n));
    LL_TRY(ll_json_add_num(o, "slope_before_ms", m->slope_before_ms));
    LL_TRY(ll_json_add_num(o, "slope_after_ms", m->slope_after_ms));
    LL_TRY(ll_json_add_num(o, "effect_quadratic", m->effect_quadratic));
    LL_TRY(ll_json_add_num(o, "effect_piecewise", m->effect_piecewise));
    LL_TRY(ll_json_add_num(o, "bic_context", m->bic_context));
    LL_TRY(ll_json_add_num(o, "ctx_a_ms", m->ctx_a_ms));
    LL_TRY(ll_json_add_num(o, "ctx_b_ms", m->ctx_b_ms));
    LL_TRY(ll_json_add_num(o, "ctx_c_ms_per_ktok", m->ctx_c_ms));
    LL_TRY(ll_json_add_pair(o, "ctx_c_ci_ms_per_ktok", m->ctx_c_ci_ms));
    LL_TRY(ll_json_add_num(o, "kn_corr", m->kn_corr));
    LL_TRY(ll_json_add_num(o, "effect_context", m->effect_context));
    LL_TRY(ll_json_add_num(o, "bic_buckets", m->bic_buckets));
    LL_TRY(ll_json_add_num(o, "bkt_a_ms", m->bkt_a_ms));
    LL_TRY(ll_json_add_num(o, "bkt_b_ms", m->bkt_b_ms));
    LL_TRY(ll_json_add_num(o, "effect_buckets", m->effect_buckets));
    LL_TRY(ll_json_add_num(o, "n_trimmed", (double)m->n_trimmed));
    LL_TRY(ll_json_add_num(o, "bic_two_knees", m->knees2.p ? m->knees2.bic : NAN));
    LL_TRY(ll_json_add_num(o, "bic_piecewise_context", m->knee_context.p ? m->knee_context.bic : NAN));
    LL_TRY(ll_json_add_num(o, "bic_buckets_context", m->buckets_context.p ? m->buckets_context.bic : NAN));
    LL_TRY(ll_json_add_num(o, "alone_n", m->alone_n));
    LL_TRY(add_bool(o, "context_negative", m->context_negative));
    LL_TRY(add_chosen(o, m));
    return add_str(o, "verdict", m->verdict);
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

static int add_levels(cJSON *o, const fit_result *r)
{
    cJSON *lv = cJSON_AddArrayToObject(o, "levels"), *it = NULL;
    if (!lv)
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (!(it = fit_json_level(&r->levels[i], NULL, FIT_JSON_RUN)) || !cJSON_AddItemToArray(lv, it)) {
            cJSON_Delete(it);
            return LL_ENOMEM;
        }
    return 0;
}

/* A law, or null without one. */
static int add_law_or_null(cJSON *o, const char *key, const fit_law *L)
{
    if (L->ok)
        return fit_json_law(o, key, L, NULL, NAN, FIT_JSON_RUN);
    return cJSON_AddNullToObject(o, key) ? 0 : LL_ENOMEM;
}

/* The other laws beside the headline: OLS, naive, against the other N, the
 * engine's own steps (analyze_law.c "The law against the server's N"). */
static int add_other_laws(cJSON *o, const fit_result *r)
{
    int rc;
    LL_TRY(fit_json_law(o, "ols", &r->ols, NULL, NAN, FIT_JSON_RUN));
    LL_TRY(fit_json_law(o, "naive", &r->naive, NULL, NAN, FIT_JSON_RUN));
    LL_TRY(add_str(o, "law_n", r->law_n ? r->law_n : "client"));
    LL_TRY(add_law_or_null(o, "law_other", &r->law_other));
    return add_law_or_null(o, "engine_law", &r->engine);
fail:
    return rc;
}

static int add_truth(cJSON *o, const fit_result *r)
{
    int rc;
    if (!r->has_truth)
        return 0;
    cJSON *t = cJSON_AddObjectToObject(o, "truth");
    if (!t)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(t, "a_ms", r->truth_a_ms));
    LL_TRY(ll_json_add_num(t, "b_ms", r->truth_b_ms));
    LL_TRY(ll_json_add_num(t, "time_scale", r->time_scale));
    return add_str(t, "engine_law", r->engine_law_spec);
fail:
    return rc;
}

static int add_notes(cJSON *o, const fit_result *r)
{
    cJSON *notes = cJSON_AddArrayToObject(o, "notes"), *it = NULL;
    if (!notes)
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_notes; i++)
        if (!(it = cJSON_CreateString(r->notes[i])) || !cJSON_AddItemToArray(notes, it)) {
            cJSON_Delete(it);
            return LL_ENOMEM;
        }
    return 0;
}

cJSON *fit_result_to_json(const fit_result *r)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    LL_TRY(fit_json_headline(o, r));
    LL_TRY(add_bool(o, "law_client_bound", r->law_client_bound));
    if (!ADD_OK(r->law.ok ? cJSON_AddNullToObject(o, "no_law") : cJSON_AddStringToObject(o, "no_law", r->no_law)))
        goto fail;
    LL_TRY(add_levels(o, r));
    LL_TRY(add_other_laws(o, r));
    LL_TRY(add_truth(o, r));
    LL_TRY(add_model_check(o, &r->model));
    LL_TRY(add_excluded(o, r));
    LL_TRY(add_notes(o, r));
    LL_TRY(fit_json_turns(o, r));
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}
