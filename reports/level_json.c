/* level_json.c: a level's figures (fit.h fit_level) as JSON: the figures
 * object summary.json's levels and the report's "figures" hold, fit --json's
 * level and summary.json's level. The two level objects place some keys
 * differently (fit --json has the rates among its own analysis keys), so
 * each key is written by one helper that both call, and no file's key order
 * changes. Every figure is fit's (fit/figures.c "Per-level figures"); every
 * number goes through ll_json_add_num (NaN -> null). */
#include "json_internal.h"

#include <math.h>
#include <stddef.h>

#include "dialect.h"

/* Keys both level objects hold (fit --json and summary.json place them
 * differently), each spelled once: level_head and the put_* below. */
static int level_head(cJSON *o, const fit_level *L)
{
    int rc;
    LL_TRY(ll_json_add_num(o, "level", L->level));
    LL_TRY(ll_json_add_num(o, "concurrency", L->concurrency));
    LL_TRY(rpt_json_str(o, "mode", L->closed_loop ? "closed" : "open"));
    if (L->find_role) /* only where sweep --find placed the level: other runs' files stay as they were */
        LL_TRY(rpt_json_str(o, "find_role", L->find_role));
    return 0;
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

/* "interrupted", and "profiled" (fit_level) only where it was: the other
 * levels' objects stay as they were. */
static int put_interrupted(cJSON *o, const fit_level *L)
{
    if (L->profiled && (rpt_json_bool(o, "profiled", 1) || rpt_json_bool(o, "profiled_out_of_law", L->profiled_out)))
        return LL_ENOMEM;
    return rpt_json_bool(o, "interrupted", L->interrupted);
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
    LL_TRY(rpt_json_dist(o, "ttft_ms", &L->ttft, rpt_dist_in_run));
    LL_TRY(rpt_json_dist(o, "ttfa_ms", &L->ttfa, rpt_dist_in_run));
    LL_TRY(rpt_json_dist(o, "tpot_ms", &L->tpot, rpt_dist_in_run));
    LL_TRY(rpt_json_dist(o, "itl_ms", &L->itl, rpt_dist_in_run));
    LL_TRY(rpt_json_dist(o, "e2e_ms", &L->e2e, rpt_dist_in_run));
    if (!L->closed_loop) {
        LL_TRY(rpt_json_dist(o, "client_lag_ms", &L->client_lag, rpt_dist_in_run));
        LL_TRY(rpt_json_dist(o, "ttft_from_intended_ms", &L->ttft_sched, rpt_dist_in_run));
        LL_TRY(rpt_json_dist(o, "e2e_from_intended_ms", &L->e2e_sched, rpt_dist_in_run));
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

/* What the server said per request (fit/said.c "The server's own per-request
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

/* The server's own latencies, KV cache and queue (fit/server_own.c); null
 * where its page has none. */
static int level_server_own(cJSON *o, const fit_level *L)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"server_itl_mean_ms", offsetof(fit_level, server_itl_mean_ms)},
        {"server_ttft_mean_ms", offsetof(fit_level, server_ttft_mean_ms)},
        {"server_ttft_p90_ms", offsetof(fit_level, server_ttft_p90_ms)},
        {"server_queue_mean_ms", offsetof(fit_level, server_queue_mean_ms)},
        {"server_prefill_mean_ms", offsetof(fit_level, server_prefill_mean_ms)},
        {"server_decode_mean_ms", offsetof(fit_level, server_decode_mean_ms)},
        {"server_kv_usage_mean", offsetof(fit_level, server_kv_usage_mean)},
        {"server_kv_usage_max", offsetof(fit_level, server_kv_usage_max)},
        {"server_preemptions", offsetof(fit_level, server_preemptions)},
        {"server_waiting_capacity", offsetof(fit_level, server_waiting_capacity)},
        {"server_waiting_deferred", offsetof(fit_level, server_waiting_deferred)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (ll_json_add_num(o, keys[i].key, *(const double *)((const char *)L + keys[i].off)))
            return LL_ENOMEM;
    return 0;
}

/* The server's own figures (fit/server.c "Server figures"); null where not scraped. */
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
    LL_TRY(level_server_own(o, L));
    if (!(L->server >= 0 ? cJSON_AddStringToObject(o, "server", ll_srv_name((ll_srv)L->server))
                         : cJSON_AddNullToObject(o, "server")))
        return LL_ENOMEM;
    return rpt_json_bool(o, "server_n_disagrees", L->server_n_disagrees);
fail:
    return rc;
}

/* The GPU figures and the diagnosis (fit/gpu.c "GPU figures and diagnosis"). */
static int level_gpu(cJSON *o, const fit_level *L)
{
    if (ll_json_add_num(o, "gpu_power_w", L->gpu_power_w) ||
        ll_json_add_num(o, "gpu_power_limit_w", L->gpu_power_limit_w) ||
        ll_json_add_num(o, "gpu_power_frac", L->gpu_power_frac) ||
        ll_json_add_num(o, "gpu_sm_active", L->gpu_sm_active) ||
        ll_json_add_num(o, "gpu_tensor_active", L->gpu_tensor_active) ||
        ll_json_add_num(o, "gpu_dram_active", L->gpu_dram_active) ||
        ll_json_add_num(o, "gpu_energy_j", L->gpu_energy_j) ||
        ll_json_add_num(o, "gpu_j_per_tok", L->gpu_j_per_tok) ||
        ll_json_add_num(o, "gpu_scrapes", (double)L->gpu_scrapes) ||
        ll_json_add_num(o, "server_waiting_growth", L->server_waiting_growth) ||
        !cJSON_AddStringToObject(o, "diagnosis", fit_diag_name(L->diagnosis)) ||
        !cJSON_AddStringToObject(o, "diagnosis_why", L->diagnosis_why))
        return LL_ENOMEM;
    return 0;
}

/* Requests, latencies, rates, server and GPU figures (fit/figures.c "Per-level
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
    return level_gpu(o, L);
fail:
    return rc;
}

int rpt_json_level_figures(cJSON *o, const fit_level *L)
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
    LL_TRY(ll_json_add_num(o, "heldout_pred_tok_per_s", L->heldout_pred_tok_per_s));
    LL_TRY(ll_json_add_num(o, "heldout_error_rel", L->heldout_error_rel));
    LL_TRY(ll_json_add_pair(o, "error_rel_ci", L->error_rel_ci));
    LL_TRY(ll_json_add_num(o, "whole_tok_per_s", L->whole_tok_per_s));
    LL_TRY(ll_json_add_num(o, "steady_step_ms", L->steady_step_ms));
    LL_TRY(ll_json_add_num(o, "burst_gap_frac", L->burst_gap_frac));
    LL_TRY(ll_json_add_num(o, "burst_gap_ms", L->burst_gap_ms));
    LL_TRY(rpt_json_bool(o, "client_bound", L->client_bound));
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
    if (isfinite(L->prompt_tok_template)) /* chat runs with built lengths only */
        LL_TRY(ll_json_add_num(o, "prompt_tok_template", L->prompt_tok_template));
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
    LL_TRY(rpt_json_bool(o, "closed_loop", L->closed_loop));
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

/* fit --json's early and late tokens (fit/position.c "Step time against position in
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

/* summary.json's level: what was planned, then the figures. */
static int summary_level(cJSON *o, const fit_level *L, const fit_level_info *planned)
{
    int rc;
    LL_TRY(level_planned(o, L, planned));
    LL_TRY(put_interrupted(o, L));
    return level_figures(o, L, 1);
fail:
    return rc;
}

/* fit --json's level: the analysis, then the figures and the rate series. */
static int fit_level_keys(cJSON *o, const fit_level *L, const fit_level_info *planned)
{
    int rc;
    (void)planned;
    LL_TRY(level_analysis(o, L));
    LL_TRY(level_position(o, L));
    LL_TRY(level_counts(o, L));
    LL_TRY(put_interrupted(o, L));
    LL_TRY(level_figures(o, L, 0));
    return level_rate_series(o, L);
fail:
    return rc;
}

/* The level's head, then the object's own keys. */
static cJSON *level_object(const fit_level *L, const fit_level_info *planned,
                           int (*keys)(cJSON *, const fit_level *, const fit_level_info *))
{
    cJSON *o = cJSON_CreateObject();
    if (o && (level_head(o, L) || keys(o, L, planned))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *rpt_json_summary_level(const fit_level *L, const fit_level_info *planned)
{
    return level_object(L, planned, summary_level);
}

cJSON *rpt_json_fit_level(const fit_level *L)
{
    return level_object(L, NULL, fit_level_keys);
}
