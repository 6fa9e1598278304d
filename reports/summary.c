/* summary.c: the sweep's own outputs, from fit's result: RUN_DIR/summary.json
 * and the per-level tables `loadlaw sweep` prints at its end.
 *
 * Nothing here measures: every figure is a field of fit_level (fit/figures.c
 * "Per-level figures", one definition each), so the table, summary.json,
 * `loadlaw fit --json` and the report's embedded data print the same value;
 * levels, laws and distributions are json_internal.h's shapes: this file
 * only assembles summary.json from them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_internal.h"
#include "json_internal.h"

size_t rpt_level_failed(const fit_level *L)
{
    return L->n_sent_failed;
}

size_t rpt_level_ok(const fit_level *L)
{
    size_t f = rpt_level_failed(L);
    return L->n_sent > f ? L->n_sent - f : 0;
}

const char *rpt_profiled_tag(const fit_level *L)
{
    return !L->profiled ? "" : L->profiled_out ? "  (profiled: not fitted)" : "  (profiled)";
}

const char *rpt_find_tag(const fit_level *L, char *buf, size_t n)
{
    if (!L->find_role)
        return "";
    if (!L->closed_loop && isfinite(L->rate_per_s))
        snprintf(buf, n, "  (find: %s at %.3g/s)", L->find_role, L->rate_per_s);
    else
        snprintf(buf, n, "  (find: %s)", L->find_role);
    return buf;
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
        /* what the run planned, then fit's figures */
        const fit_level *L = &res->levels[i];
        cJSON *l = rpt_json_summary_level(L, level_info(run, L->level));
        if (!l || !cJSON_AddItemToArray(lv, l)) {
            cJSON_Delete(l);
            goto fail;
        }
    }
    /* the law as `loadlaw fit --json` writes it, asymptote and N1/2 */
    if (rpt_json_headline(o, res) || rpt_json_turns(o, res))
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
        char tag[64];
        fprintf(f, "%s%s%s\n", L->interrupted ? "  (interrupted)" : "", rpt_profiled_tag(L),
                rpt_find_tag(L, tag, sizeof tag));
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
    rpt_print_turns(f, res);
}
