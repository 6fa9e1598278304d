/* analyze.c: fit_analyze, from a loaded run to a fit_result, in named steps
 * (read fit_analyze at the bottom first):
 *   rebuild_levels   per level: timeline and step samples (timeline.c), the
 *                    samples reduced to what the rest needs (reduce.c: its
 *                    engine steps, burst figures, position bins, the naive
 *                    fit's points, the chart sample) and let go before the
 *                    next level, or for a big level both as one sweep in
 *                    time order (stream.c); the request, latency and rate
 *                    figures (figures.c)
 *   count_left_out   what the samples leave out, run-wide
 *   fit_laws         the law on one point per engine step (fit_level_steps),
 *                    OLS beside it, the naive fit on every gap (regress.c);
 *                    the model check (model.c)
 *   fit_compare_levels  each level's steady throughput against the law, with
 *                    intervals
 *   fit_engine_steps the engine's own step records, when the run has them
 *                    (these three: analyze_law.c)
 *   client_check     whether the client set a level's pace
 *   fit_no_law_reason, fit_notes_*: what a reader must know (analyze_notes.c).
 * Also the options' defaults, the notes list and the result's release.
 * Definitions: atop each step's file; thresholds: fit_tuning.h. */
#include "fit_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void fit_options_default(fit_options *o)
{
    memset(o, 0, sizeof *o);
    o->edge_tol_frac = 0.05;
    o->rate_bins = 60;
    o->model_bic_margin = 10.0;
    o->model_min_effect = 0.03;
    o->include_warmup = 0;
    o->n_server = 0;
}

int fit_note(fit_result *r, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **v = realloc(r->notes, (r->n_notes + 1) * sizeof *v);
    if (!v)
        return LL_ENOMEM;
    r->notes = v;
    if (!(v[r->n_notes] = strdup(buf)))
        return LL_ENOMEM;
    r->n_notes++;
    return 0;
}

void fit_result_free(fit_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_levels; i++)
        fit_level_release(&r->levels[i]);
    free(r->levels);
    fit_kept_free(r->kept);
    free(r->chart.steady);
    free(r->chart.other);
    for (size_t i = 0; i < r->n_notes; i++)
        free(r->notes[i]);
    free(r->notes);
    free(r->turns);
    free(r);
}

/* Text at *at into b[0..n), *at moved past it; nothing once b is full. */
static void spec_add(char *b, size_t n, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = *at < n ? vsnprintf(b + *at, n - *at, fmt, ap) : 0;
    va_end(ap);
    if (k > 0)
        *at = *at + (size_t)k < n ? *at + (size_t)k : n;
}

/* The run line's law as data: truth in played ms, the time scale, and the
 * law as written ("52+30n", with its c and p terms, knee and buckets in the
 * engine spec's own forms), so the fitted law can be shown in the units the
 * user configured. */
static void read_truth(const fit_run_info *info, fit_result *res)
{
    res->has_truth = info->has_engine_law;
    res->truth_a_ms = info->has_engine_law ? info->law_a_ms : NAN;
    res->truth_b_ms = info->has_engine_law ? info->law_b_ms : NAN;
    res->time_scale = info->has_engine_law ? info->time_scale : NAN;
    res->engine_law_spec[0] = '\0';
    if (!info->has_engine_law || !(res->time_scale > 0))
        return;
    char *b = res->engine_law_spec;
    size_t n = sizeof res->engine_law_spec, at = 0;
    double ts = res->time_scale;
    const ll_rec_engine_law *law = &info->engine_law;
    spec_add(b, n, &at, "%.6g+%.6gn", info->law_a_ms / ts, info->law_b_ms / ts);
    if (info->law_c_ms_per_ktok > 0)
        spec_add(b, n, &at, "+%.6gc", info->law_c_ms_per_ktok / ts);
    if (info->law_p_ms_per_tok > 0)
        spec_add(b, n, &at, "+%.6gp", info->law_p_ms_per_tok / ts);
    if (law->knee_n > 0)
        spec_add(b, n, &at, ", knee=%d:%.6g", law->knee_n, law->knee_b_ms / ts);
    for (int i = 0; i < law->n_buckets; i++)
        spec_add(b, n, &at, i ? ",%d" : ", buckets=%d", law->buckets[i]);
}

/* The requests of run level l, by index, into idx (emptied first). */
static int level_requests(const fit_run *run, size_t l, fit_size_vec *idx)
{
    int level = fit_run_level(run, l)->level;
    size_t i0, i1;
    idx->n = 0;
    fit_run_level_span(run, level, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        if (fit_run_request(run, i)->level == level && ll_vec_push(idx, i))
            return LL_ENOMEM;
    return 0;
}

/* Per level: timeline and step samples, every per-level figure, and the
 * samples reduced (reduce.c) and let go before the next level, so the
 * samples held at once are one level's. */
static int rebuild_levels(const fit_run *run, const fit_options *opt, fit_result *res, char *err,
                          size_t errlen)
{
    int rc;
    fit_size_vec idx = {0};
    fit_sample_vec sv = {0};
    for (size_t l = 0; l < fit_run_n_levels(run); l++) {
        LL_TRY(level_requests(run, l, &idx));
        if (fit_stream_wanted(run, idx.v, idx.n, opt)) {
            LL_TRY(fit_stream_level(run, fit_run_level(run, l), idx.v, idx.n, (int32_t)l, opt, res, &res->levels[l],
                                    NULL, &res->n_empty_chunks, err, errlen));
            res->n_levels = l + 1;
        } else {
            sv.n = 0;
            LL_TRY(fit_timeline_level(run, fit_run_level(run, l), idx.v, idx.n, (int32_t)l, opt, &res->levels[l],
                                      &sv, &res->n_empty_chunks, err, errlen));
            res->n_levels = l + 1;
            LL_TRY(fit_level_reduce(res, l, sv.v, sv.n));
        }
        LL_TRY(fit_level_figures(run, idx.v, idx.n, &res->levels[l]));
        LL_TRY(fit_said_level(run, idx.v, idx.n, &res->levels[l]));
        fit_server_level(run, &res->levels[l]);
        fit_gpu_level(run, &res->levels[l]);
    }
    ll_vec_free(&idx);
    ll_vec_free(&sv);
    return 0;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory rebuilding levels");
    ll_vec_free(&idx);
    ll_vec_free(&sv);
    return rc;
}

int fit_level_samples(const fit_run *run, const fit_result *res, size_t level_idx, fit_sample **out,
                      size_t *n_out)
{
    fit_size_vec idx = {0};
    fit_sample_vec sv = {0};
    fit_level L;
    size_t n_empty = 0;
    char err[128];
    int rc;
    *out = NULL;
    *n_out = 0;
    if (!res->kept || level_idx >= fit_run_n_levels(run) || level_idx >= res->n_levels)
        return LL_EINVAL;
    LL_TRY(level_requests(run, level_idx, &idx));
    if (fit_stream_wanted(run, idx.v, idx.n, &res->kept->opt))
        LL_TRY(fit_stream_level(run, fit_run_level(run, level_idx), idx.v, idx.n, (int32_t)level_idx,
                                &res->kept->opt, NULL, &L, &sv, &n_empty, err, sizeof err));
    else
        LL_TRY(fit_timeline_level(run, fit_run_level(run, level_idx), idx.v, idx.n, (int32_t)level_idx,
                                  &res->kept->opt, &L, &sv, &n_empty, err, sizeof err));
    fit_level_release(&L);
    ll_vec_free(&idx);
    *out = sv.v;
    *n_out = sv.n;
    return 0;
fail:
    ll_vec_free(&idx);
    ll_vec_free(&sv);
    return rc;
}

/* From what the load gathered of every request (fit_run_tally), so that a
 * paged run is not read again for it. */
static void count_left_out(const fit_run *run, fit_result *res)
{
    const fit_run_info *info = fit_run_get_info(run);
    const fit_run_tally *t = fit_run_get_tally(run);
    res->n_requests = t->n_requests;
    res->n_failed = t->n_failed;
    res->n_warmup = t->n_warmup;
    res->n_no_tokens = t->n_no_tokens;
    res->n_truncated_lines = info->n_truncated;
    res->n_bad_requests = info->n_bad_requests;
    res->n_rejected_records = info->n_rejected;
    res->n_out_of_range = info->n_out_of_range;
    res->n_clamped = info->n_clamped;
}

/* fit_tuning.h FIT_CLIENT_*: did the client, not the server, set each level's pace?
 * From what the client recorded about itself (level_end "client") and, where
 * the run knows the engine's step time, the level's gaps against it. */
static void client_check(const fit_run *run, fit_result *res)
{
    for (size_t l = 0; l < res->n_levels; l++) {
        fit_level *L = &res->levels[l];
        const fit_level_info *li = fit_run_level(run, l);
        const ll_rec_client *c = li ? &li->client : NULL;
        L->client_busy_frac = L->client_events_per_read = L->client_gap_vs_step = NAN;
        if (c && c->present && c->wall_s > 0 && c->cpu_s_max >= 0)
            L->client_busy_frac = c->cpu_s_max / c->wall_s;
        if (c && c->present && c->reads > 0)
            L->client_events_per_read = (double)c->events / (double)c->reads;
        double step_ms = NAN;
        int at_c = L->closed_loop && L->concurrency > 0; /* an open level's C is a cap, not its batch */
        if (at_c && res->engine.ok)
            step_ms = res->engine.a_ms + res->engine.b_ms * L->concurrency;
        else if (at_c && res->has_truth)
            step_ms = res->truth_a_ms + res->truth_b_ms * L->concurrency;
        if (step_ms > 0 && L->itl.n >= FIT_BURST_MIN_SAMPLES)
            L->client_gap_vs_step = L->itl.p50_ms / step_ms;
        L->client_bound = L->client_busy_frac >= FIT_CLIENT_BUSY_FRAC ||
                          (L->client_events_per_read >= FIT_CLIENT_EVENTS_PER_READ &&
                           L->burst_gap_frac > FIT_BURST_NOTE_FRAC) ||
                          L->client_gap_vs_step < FIT_CLIENT_GAP_FRAC;
    }
}
int fit_analyze(const fit_run *run, const fit_options *opt_in, fit_result **out, char *err,
                size_t errlen)
{
    fit_options opt;
    if (opt_in)
        opt = *opt_in;
    else
        fit_options_default(&opt);
    *out = NULL;
    if (!(opt.edge_tol_frac >= 0 && opt.edge_tol_frac < 0.5)) {
        ll_errf(err, errlen, "edge_tol_frac must be in [0, 0.5)");
        return LL_EINVAL;
    }
    int rc = LL_ENOMEM, read_rc;
    size_t nl = fit_run_n_levels(run);
    fit_result *res = calloc(1, sizeof *res);
    if (!res || !(res->levels = calloc(nl ? nl : 1, sizeof *res->levels)) || fit_kept_new(res, nl, &opt))
        goto fail;
    read_truth(fit_run_get_info(run), res);
    LL_TRY(rebuild_levels(run, &opt, res, err, errlen));
    count_left_out(run, res);
    LL_TRY(fit_laws(run, res, &opt, err, errlen));
    LL_TRY(fit_compare_levels(res));
    LL_TRY(fit_engine_steps(run, res, err, errlen));
    client_check(run, res);
    fit_no_law_reason(res);
    for (size_t l = 0; l < res->n_levels; l++)
        res->law_client_bound |= res->law.ok && res->levels[l].client_bound &&
                                 res->levels[l].n_steady_points > 0;
    LL_TRY(fit_notes_for_levels(res));
    LL_TRY(fit_notes_latency_hist(res));
    LL_TRY(fit_notes_server(res));
    for (size_t l = 0; l < res->n_levels; l++)
        if (res->levels[l].client_bound)
            LL_TRY(fit_note_client_bound(res, run, l));
    LL_TRY(fit_notes_counts(run, res));
    LL_TRY(fit_notes_left_out(run, &opt, res));
    LL_TRY(fit_turns_compute(run, res));
    LL_TRY(fit_kept_finish(res));
    LL_TRY(fit_run_read_error(run, err, errlen));
    *out = res;
    return 0;
fail:
    /* a paged run whose file changed fails where it first read it back;
     * that message, not the step's, says why */
    if ((read_rc = fit_run_read_error(run, err, errlen)) != 0)
        rc = read_rc;
    else if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory in fit");
    fit_result_free(res);
    return rc;
}

int fit_law_n_is_server(const fit_result *r) { return r->law_n && strcmp(r->law_n, "server") == 0; }

int fit_open(const char *dir, const fit_options *opt, fit_run **run, fit_result **res, char *err, size_t errlen)
{
    *run = NULL;
    *res = NULL;
    int rc = fit_load_run(dir, run, err, errlen);
    if (rc == 0)
        rc = fit_analyze(*run, opt, res, err, errlen);
    if (rc != 0) {
        fit_run_free(*run);
        *run = NULL;
    }
    return rc;
}
