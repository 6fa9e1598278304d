/* summary.c: the sweep's own outputs, from fit's result: RUN_DIR/summary.json
 * and the per-level tables `loadlaw sweep` prints at its end.
 *
 * Nothing here measures: every figure is a field of fit_level (fit.h,
 * "Per-level figures", one definition each), so the table, summary.json,
 * `loadlaw fit --json` and the report's embedded data print the same value.
 * rpt_level_figures_json is the one place that names a level's figures in
 * JSON; summary.json and the report's data block both call it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_internal.h"

size_t rpt_level_failed(const fit_level *L)
{
    return L->n_sent_failed;
}

size_t rpt_level_ok(const fit_level *L)
{
    size_t f = rpt_level_failed(L);
    return L->n_sent > f ? L->n_sent - f : 0;
}

/* {"n","p50","p90","p99","mean","max"} of one distribution (ms). */
static int add_dist(cJSON *o, const char *key, const fit_dist *d)
{
    cJSON *x = cJSON_AddObjectToObject(o, key);
    if (!x || ll_json_add_num(x, "n", (double)d->n) || ll_json_add_num(x, "p50", d->p50_ms) ||
        ll_json_add_num(x, "p90", d->p90_ms) || ll_json_add_num(x, "p99", d->p99_ms) ||
        ll_json_add_num(x, "mean", d->mean_ms) || ll_json_add_num(x, "max", d->max_ms))
        return LL_ENOMEM;
    return 0;
}

int rpt_level_figures_json(cJSON *o, const fit_level *L)
{
    cJSON *fc;
    if (ll_json_add_num(o, "sent", (double)L->n_sent) || ll_json_add_num(o, "ok", (double)rpt_level_ok(L)) ||
        ll_json_add_num(o, "failed", (double)rpt_level_failed(L)) ||
        !(fc = cJSON_AddObjectToObject(o, "failed_by_class")))
        return LL_ENOMEM;
    for (int c = LL_ERRC_OK + 1; c < LL_ERRC__COUNT; c++)
        if (ll_json_add_num(fc, ll_err_class_name((ll_err_class)c), (double)L->failed_by_class[c]))
            return LL_ENOMEM;
    if (ll_json_add_num(o, "duration_s", L->duration_s) || ll_json_add_num(o, "ramp_s", L->ramp_s) ||
        add_dist(o, "ttft_ms", &L->ttft) || add_dist(o, "ttfa_ms", &L->ttfa) || add_dist(o, "tpot_ms", &L->tpot) ||
        add_dist(o, "itl_ms", &L->itl) || add_dist(o, "e2e_ms", &L->e2e))
        return LL_ENOMEM;
    if (!L->closed_loop && (add_dist(o, "client_lag_ms", &L->client_lag) ||
                            add_dist(o, "ttft_from_intended_ms", &L->ttft_sched) ||
                            add_dist(o, "e2e_from_intended_ms", &L->e2e_sched)))
        return LL_ENOMEM;
    if (ll_json_add_num(o, "think_tok", (double)L->think_tok) || ll_json_add_num(o, "answer_tok", (double)L->answer_tok) ||
        ll_json_add_num(o, "usage_completion_tok", (double)L->usage_completion_tok) ||
        ll_json_add_num(o, "think_tok_per_s", L->mean_think_tok_per_s) ||
        ll_json_add_num(o, "answer_tok_per_s", L->mean_answer_tok_per_s) ||
        ll_json_add_num(o, "output_tok_per_s", L->output_tok_per_s) || ll_json_add_num(o, "req_per_s", L->req_per_s) ||
        ll_json_add_num(o, "steady_tok_per_s", L->steady_tok_per_s) ||
        ll_json_add_num(o, "predicted_tok_per_s", L->predicted_tok_per_s))
        return LL_ENOMEM;
    /* the server's own figures (fit.h "Server figures"); null where not scraped */
    if (ll_json_add_num(o, "server_n", L->server_n) || ll_json_add_num(o, "server_waiting", L->server_waiting) ||
        ll_json_add_num(o, "server_step_ms", L->server_step_ms) ||
        ll_json_add_num(o, "server_tok_per_step", L->server_tok_per_step) ||
        ll_json_add_num(o, "server_scrapes", (double)L->server_scrapes) ||
        ll_json_add_num(o, "server_stale_s", L->server_stale_s) ||
        !cJSON_AddBoolToObject(o, "server_n_disagrees", L->server_n_disagrees))
        return LL_ENOMEM;
    /* GPU figures and the diagnosis (fit.h): fit's one writer */
    return fit_level_gpu_json(o, L);
}

/* ---- summary.json ------------------------------------------------------------ */

static const fit_level_info *level_info(const fit_run *run, int level)
{
    for (size_t i = 0; i < fit_run_n_levels(run); i++)
        if (fit_run_level(run, i)->level == level)
            return fit_run_level(run, i);
    return NULL;
}

static int any_interrupted(const fit_result *res)
{
    for (size_t i = 0; i < res->n_levels; i++)
        if (res->levels[i].interrupted)
            return 1;
    return 0;
}

/* One element of "levels": what the run planned, then fit's figures. */
static cJSON *summary_level(const fit_run *run, const fit_level *L)
{
    const fit_level_info *in = level_info(run, L->level);
    cJSON *o = cJSON_CreateObject();
    if (!o || ll_json_add_num(o, "level", L->level) || ll_json_add_num(o, "concurrency", L->concurrency) ||
        !cJSON_AddStringToObject(o, "mode", L->closed_loop ? "closed" : "open") ||
        ll_json_add_num(o, "rate_per_s", in && !L->closed_loop ? in->rate_per_s : NAN) ||
        ll_json_add_num(o, "n_requests", in ? in->n_requests_planned : NAN) ||
        ll_json_add_num(o, "warmup", in ? in->n_warmup_planned : NAN) ||
        !cJSON_AddBoolToObject(o, "interrupted", L->interrupted) || rpt_level_figures_json(o, L)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The law as `loadlaw fit --json` writes it: fit's one shape, taken from
 * fit_result_to_json rather than written a second time here. */
static int add_law(cJSON *o, const fit_result *res)
{
    cJSON *fj = fit_result_to_json(res);
    cJSON *law = fj ? cJSON_DetachItemFromObjectCaseSensitive(fj, "law") : NULL;
    cJSON_Delete(fj);
    if (!law)
        return LL_ENOMEM;
    if (!cJSON_AddItemToObject(o, "law", law)) {
        cJSON_Delete(law);
        return LL_ENOMEM;
    }
    if (ll_json_add_num(o, "asymptote_tok_per_s", res->asymptote_tok_per_s) || ll_json_add_num(o, "n_half", res->n_half))
        return LL_ENOMEM;
    return 0;
}

static cJSON *summary_json(const fit_run *run, const fit_result *res)
{
    const fit_run_info *in = fit_run_get_info(run);
    cJSON *o = cJSON_CreateObject(), *lv;
    if (!o || !cJSON_AddStringToObject(o, "tool", "loadlaw") || ll_json_add_num(o, "schema", LL_RECORDS_SCHEMA) ||
        !cJSON_AddStringToObject(o, "units", "latencies in ms; rates per second") ||
        !cJSON_AddBoolToObject(o, "interrupted", any_interrupted(res)) ||
        !cJSON_AddStringToObject(o, "url", in->target_url ? in->target_url : "") ||
        !cJSON_AddStringToObject(o, "model", in->model ? in->model : "") ||
        !(lv = cJSON_AddArrayToObject(o, "levels")))
        goto fail;
    for (size_t i = 0; i < res->n_levels; i++) {
        cJSON *l = summary_level(run, &res->levels[i]);
        if (!l || !cJSON_AddItemToArray(lv, l)) {
            cJSON_Delete(l);
            goto fail;
        }
    }
    if (add_law(o, res))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

int rpt_write_summary(const char *run_dir, const fit_run *run, const fit_result *res, char *err,
                      size_t errlen)
{
    char path[4096];
    ll_buf b = {0};
    cJSON *o = NULL;
    char *text = NULL;
    int rc;
    if (snprintf(path, sizeof path, "%s/summary.json", run_dir) >= (int)sizeof path) {
        ll_errf(err, errlen, "%s: run directory name too long", run_dir);
        return LL_EINVAL;
    }
    if (!(o = summary_json(run, res)) || !(text = cJSON_Print(o))) {
        ll_errf(err, errlen, "out of memory writing %s", path);
        rc = LL_ENOMEM;
        goto fail;
    }
    if ((rc = ll_buf_printf(&b, "%s\n", text))) {
        ll_errf(err, errlen, "out of memory writing %s", path);
        goto fail;
    }
    /* Through a temporary file and rename: a reader never sees half a file. */
    LL_TRY(html_write_file(&b, path, err, errlen));
fail:
    ll_buf_free(&b);
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}

/* ---- the terminal tables ---------------------------------------------------- */

/* "%9.2f", or "-" where there were no samples. */
static void put_ms(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %9.2f", v);
    else
        fprintf(f, " %9s", "-");
}

static void put_dist_row(FILE *f, const char *name, const fit_dist *d)
{
    fprintf(f, "%12s %-10s", "", name);
    put_ms(f, d->p50_ms);
    put_ms(f, d->p90_ms);
    put_ms(f, d->p99_ms);
    put_ms(f, d->mean_ms);
    fprintf(f, " %8zu\n", d->n);
}

/* Counts and rates, one row per level (failed requests by class beneath). */
static void print_counts(FILE *f, const fit_result *res)
{
    fprintf(f, "%5s %6s %6s %6s %9s %7s %9s %10s %8s %9s %7s\n", "level", "C", "ok", "failed", "out_tok/s",
            "req/s", "think_tok", "answer_tok", "think/s", "answer/s", "ramp_s");
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        fprintf(f, "%5d %6d %6zu %6zu %9.1f %7.2f %9lld %10lld %8.1f %9.1f", L->level, L->concurrency,
                rpt_level_ok(L), rpt_level_failed(L), L->output_tok_per_s, L->req_per_s, (long long)L->think_tok,
                (long long)L->answer_tok, L->mean_think_tok_per_s, L->mean_answer_tok_per_s);
        if (isfinite(L->ramp_s))
            fprintf(f, " %7.3f", L->ramp_s);
        else
            fprintf(f, " %7s", "-");
        fprintf(f, "%s\n", L->interrupted ? "  (interrupted)" : "");
        if (rpt_level_failed(L)) {
            fprintf(f, "      failed:");
            for (int c = LL_ERRC_OK + 1; c < LL_ERRC__COUNT; c++)
                if (L->failed_by_class[c])
                    fprintf(f, " %s=%zu", ll_err_class_name((ll_err_class)c), L->failed_by_class[c]);
            fputc('\n', f);
        }
    }
}

/* Latencies, one row per level and metric, so lines stay under ~100 columns. */
static void print_latencies(FILE *f, const fit_result *res)
{
    int any_open = 0;
    fprintf(f, "\n%5s %6s %-10s %9s %9s %9s %9s %8s\n", "level", "C", "latency ms", "p50", "p90", "p99", "mean",
            "n");
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        fprintf(f, "%5d %6d", L->level, L->concurrency);
        if (!L->closed_loop)
            fprintf(f, " open loop; latencies below from the actual send\n");
        else
            fputc('\n', f);
        put_dist_row(f, "TTFT", &L->ttft);
        put_dist_row(f, "TTFA", &L->ttfa);
        put_dist_row(f, "TPOT", &L->tpot);
        put_dist_row(f, "ITL", &L->itl);
        put_dist_row(f, "E2E", &L->e2e);
        if (!L->closed_loop) {
            /* From the intended send: what a user arriving on schedule saw. */
            any_open = 1;
            put_dist_row(f, "client lag", &L->client_lag);
            put_dist_row(f, "TTFT sched", &L->ttft_sched);
            put_dist_row(f, "E2E sched", &L->e2e_sched);
        }
    }
    fprintf(f, "(TTFT: first token of any kind; TTFA: first answer token; rates over each level's wall time%s)\n",
            any_open ? "; sched: from the intended send time" : "");
}

void rpt_print_levels(FILE *f, const fit_result *res)
{
    print_counts(f, res);
    print_latencies(f, res);
}
