/* analyze.c: fit_analyze, from a loaded run to a fit_result, in named steps
 * (read fit_analyze at the bottom first):
 *   rebuild_levels   per level: timeline and step samples (timeline.c), the
 *                    request, latency and rate figures (figures.c)
 *   count_left_out   what the samples leave out, run-wide
 *   fit_laws         steady samples grouped into engine steps (fit_level_steps),
 *                    the law on one point per step, OLS beside it, the naive
 *                    fit on every gap (regress.c); the model check (model.c)
 *   compare_levels   each level's steady throughput against the law, with
 *                    intervals
 *   fit_engine_steps the engine's own step records, when the run has them
 *   burst_check, notes_for_levels, notes_left_out: what a reader must know.
 * Definitions: fit.h. */
#include "fit_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

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
    free(r->samples);
    for (size_t i = 0; i < r->n_notes; i++)
        free(r->notes[i]);
    free(r->notes);
    free(r->turns);
    free(r);
}

static int cmp_sample_time(const void *a, const void *b)
{
    const fit_sample *x = *(const fit_sample *const *)a, *y = *(const fit_sample *const *)b;
    if (x->t_ns != y->t_ns)
        return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
    return (x->n > y->n) - (x->n < y->n);
}

/* fit.h, "One engine step": the one grouping rule, used by the law, the
 * steady throughput's interval and compare. */
int fit_level_steps(const fit_result *r, size_t level_idx, double at_n, fit_step **out,
                    size_t *n_out)
{
    int rc;
    LL_VEC(const fit_sample *) sel = {0};
    LL_VEC(fit_step) steps = {0};
    *out = NULL;
    *n_out = 0;
    for (size_t i = 0; i < r->n_samples; i++) {
        const fit_sample *s = &r->samples[i];
        if (s->level_idx == (int32_t)level_idx && s->steady && (!(at_n > 0) || s->n == at_n))
            LL_TRY(ll_vec_push(&sel, s));
    }
    if (sel.n > 1) /* qsort(NULL, 0) is undefined */
        qsort(sel.v, sel.n, sizeof *sel.v, cmp_sample_time);
    for (size_t i = 0; i < sel.n;) {
        const fit_sample *first = sel.v[i];
        fit_step st = {first->t_ns, first->n, 0, 0, 0, NAN, 0};
        /* each sample against its own gap: a sample of the next step ends a
         * whole (next) step after the first, however short that step is */
        for (; i < sel.n && sel.v[i]->n == first->n &&
               (double)(sel.v[i]->t_ns - first->t_ns) <=
                   FIT_STEP_GROUP_FRAC * sel.v[i]->gap_ms * 1e6 * sel.v[i]->tokens;
             i++) {
            st.n_samples++;
            st.tokens += sel.v[i]->tokens;
            st.gap_ms += sel.v[i]->gap_ms * sel.v[i]->tokens;
            st.k += sel.v[i]->k * sel.v[i]->tokens;
        }
        st.ms_per_tok = st.gap_ms / st.tokens;
        st.k /= st.tokens;
        LL_TRY(ll_vec_push(&steps, st));
    }
    ll_vec_free(&sel);
    *out = steps.v;
    *n_out = steps.n;
    return 0;
fail:
    ll_vec_free(&sel);
    ll_vec_free(&steps);
    return rc;
}

/* The run line's law as data: truth in played ms, the time scale, and the
 * law as written ("52+30n"), so the fitted law can be shown in the units the
 * user configured. */
static void read_truth(const fit_run_info *info, fit_result *res)
{
    res->has_truth = info->has_engine_law;
    res->truth_a_ms = info->has_engine_law ? info->law_a_ms : NAN;
    res->truth_b_ms = info->has_engine_law ? info->law_b_ms : NAN;
    res->time_scale = info->has_engine_law ? info->time_scale : NAN;
    res->engine_law_spec[0] = '\0';
    if (info->has_engine_law && res->time_scale > 0) {
        int n = snprintf(res->engine_law_spec, sizeof res->engine_law_spec, "%.6g+%.6gn",
                         info->law_a_ms / res->time_scale, info->law_b_ms / res->time_scale);
        if (info->law_c_ms_per_ktok > 0 && n > 0 && (size_t)n < sizeof res->engine_law_spec)
            snprintf(res->engine_law_spec + n, sizeof res->engine_law_spec - (size_t)n, "+%.6gc",
                     info->law_c_ms_per_ktok / res->time_scale);
    }
}

/* Per level: timeline, step samples and every per-level figure. */
static int rebuild_levels(const fit_run *run, const fit_options *opt, fit_result *res,
                          fit_sample_vec *sv, char *err, size_t errlen)
{
    int rc;
    size_t nreq = fit_run_n_requests(run);
    LL_VEC(size_t) idx = {0};
    LL_TRY(ll_vec_reserve(&idx, nreq + 1));
    for (size_t l = 0; l < fit_run_n_levels(run); l++) {
        const fit_level_info *li = fit_run_level(run, l);
        idx.n = 0;
        for (size_t i = 0; i < nreq; i++)
            if (fit_run_request(run, i)->level == li->level)
                idx.v[idx.n++] = i;
        LL_TRY(fit_timeline_level(run, li, idx.v, idx.n, (int32_t)l, opt, &res->levels[l], sv,
                                  &res->n_empty_chunks, err, errlen));
        res->n_levels = l + 1;
        LL_TRY(fit_level_figures(run, idx.v, idx.n, &res->levels[l]));
        LL_TRY(fit_said_level(run, idx.v, idx.n, &res->levels[l]));
        fit_server_level(run, &res->levels[l]);
        fit_gpu_level(run, &res->levels[l]);
    }
    ll_vec_free(&idx);
    return 0;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory rebuilding levels");
    ll_vec_free(&idx);
    return rc;
}

static void count_left_out(const fit_run *run, fit_result *res)
{
    const fit_run_info *info = fit_run_get_info(run);
    for (size_t i = 0; i < fit_run_n_requests(run); i++) {
        const fit_request *q = fit_run_request(run, i);
        res->n_requests++;
        res->n_failed += !q->ok;
        res->n_warmup += q->warmup != 0;
        res->n_no_tokens += q->ok && q->n_chunks == 0;
    }
    res->n_truncated_lines = info->n_truncated;
    res->n_bad_requests = info->n_bad_requests;
    res->n_rejected_records = info->n_rejected;
    res->n_out_of_range = info->n_out_of_range;
    res->n_clamped = info->n_clamped;
}

/* The law on one point per client-observed step (fit.h "The law"); OLS on
 * the same points; the naive OLS on every raw gap beside them; then the
 * model check on the same points. */
/* The points of the law against one N (x, y, size) and the raw samples
 * behind them. */
typedef struct law_points {
    fit_double_vec x, y, w, k;
    size_t n_samples;
} law_points;

static int law_points_push(law_points *p, double x, const fit_step *s)
{
    int rc;
    LL_TRY(ll_vec_push(&p->x, x));
    LL_TRY(ll_vec_push(&p->k, s->k));
    LL_TRY(ll_vec_push(&p->y, s->ms_per_tok));
    LL_TRY(ll_vec_push(&p->w, (double)s->tokens));
    p->n_samples += s->n_samples;
fail:
    return rc;
}

static void law_points_free(law_points *p)
{
    ll_vec_free(&p->x);
    ll_vec_free(&p->y);
    ll_vec_free(&p->w);
    ll_vec_free(&p->k);
}

/* fit.h "The law against the server's N": the server's N at each step,
 * the last scrape at or before it inside the level. */
static int server_points(const fit_run *run, const fit_level *L, const fit_step *st, size_t ns, law_points *p)
{
    int64_t *t = NULL;
    double *v = NULL;
    size_t n = 0, j = 0;
    int rc = fit_server_n_series(run, L, &t, &v, &n);
    for (size_t k = 0; rc == 0 && k < ns && n; k++) {
        while (j + 1 < n && t[j + 1] <= st[k].t_ns)
            j++; /* steps come in time order */
        if (t[j] <= st[k].t_ns)
            rc = law_points_push(p, v[j], &st[k]);
    }
    free(t);
    free(v);
    return rc;
}

static int fit_laws(const fit_run *run, fit_result *res, const fit_options *opt, char *err, size_t errlen)
{
    int rc;
    fit_double_vec ax = {0}, ay = {0};
    law_points client = {0}, server = {0};
    fit_step *st = NULL;
    for (size_t l = 0; l < res->n_levels; l++) {
        size_t ns;
        const fit_level *L = &res->levels[l];
        /* fit.h "The law": a closed-loop level gives its steady windows
         * (N = C); an open-loop level every steady step. */
        LL_TRY(fit_level_steps(res, l, L->closed_loop && L->concurrency > 0 ? L->concurrency : 0, &st, &ns));
        for (size_t k = 0; k < ns; k++)
            LL_TRY(law_points_push(&client, st[k].n, &st[k]));
        LL_TRY(server_points(run, L, st, ns, &server));
        res->levels[l].n_steady_points = ns;
        free(st);
        st = NULL;
    }
    const law_points *P = opt->n_server ? &server : &client, *O = opt->n_server ? &client : &server;
    res->law_n = opt->n_server ? "server" : "client";
    fit_double_vec px = P->x, py = P->y, pw = P->w;
    size_t n_law_samples = P->n_samples;
    LL_TRY(fit_line_sized(O->x.v, O->y.v, O->w.v, O->x.n, 1, &res->law_other, err, errlen));
    res->law_other.n_samples = O->n_samples;
    for (size_t i = 0; i < res->n_samples; i++) {
        LL_TRY(ll_vec_push(&ax, res->samples[i].n));
        LL_TRY(ll_vec_push(&ay, res->samples[i].gap_ms));
    }
    LL_TRY(fit_line_sized(px.v, py.v, pw.v, px.n, 1, &res->law, err, errlen));
    LL_TRY(fit_line(px.v, py.v, px.n, 0, &res->ols, err, errlen));
    LL_TRY(fit_line(ax.v, ay.v, ax.n, 0, &res->naive, err, errlen));
    res->law.n_samples = res->ols.n_samples = n_law_samples;
    res->n_trimmed = res->law.n_trimmed;
    res->asymptote_tok_per_s = res->law.ok && res->law.b_ms > 0 ? 1000.0 / res->law.b_ms : NAN;
    res->n_half = res->law.ok && res->law.b_ms > 0 ? res->law.a_ms / res->law.b_ms : NAN;
    LL_TRY(fit_model_check_run(px.v, py.v, P->k.v, px.n, opt, &res->model, err, errlen));
    if (res->model.done && res->model.context_negative)
        LL_TRY(fit_note(res, "a model with a context term fitted better, but its c came out negative (step time "
                             "falling as context grows is not a cost of context): set aside; something else that "
                             "differs with K between levels moved the step"));
    if (res->model.done && fabs(res->model.kn_corr) > FIT_CONTEXT_COLLINEAR)
        LL_TRY(fit_note(res, "the context term is not identifiable from this run: the context of the running "
                             "requests moved with N (corr %.3f); vary prompt lengths (load.vary_context) or "
                             "stagger requests within a level",
                        res->model.kn_corr));
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory fitting the law");
    free(st);
    law_points_free(&client);
    law_points_free(&server);
    ll_vec_free(&ax);
    ll_vec_free(&ay);
    return rc;
}

/* The steady throughput's 95% interval: the ratio R = sum gap / sum tokens
 * (ms per token) over the level's steps at N = C, delta method, t with
 * steps - 1 dof; the throughput is 1000 C / R. */
static int steady_interval(const fit_result *res, size_t l, double *r_ms, double *r_se_ms,
                           double *t_crit, double *k_mean)
{
    const fit_level *L = &res->levels[l];
    fit_step *st = NULL;
    size_t n = 0;
    *r_ms = *r_se_ms = *t_crit = NAN;
    if (fit_level_steps(res, l, L->concurrency, &st, &n))
        return LL_ENOMEM;
    double g = 0, t = 0, ss = 0, kt = 0;
    for (size_t k = 0; k < n; k++) {
        g += st[k].gap_ms;
        t += st[k].tokens;
        kt += st[k].k * st[k].tokens;
    }
    *k_mean = t > 0 ? kt / t : NAN;
    if (n >= 2 && t > 0) {
        double r = g / t, tbar = t / (double)n;
        for (size_t k = 0; k < n; k++)
            ss += (st[k].gap_ms - r * st[k].tokens) * (st[k].gap_ms - r * st[k].tokens);
        *r_ms = r;
        *r_se_ms = sqrt(ss / ((double)n * (double)(n - 1))) / tbar;
        *t_crit = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1));
    }
    free(st);
    return 0;
}

/* A closed-loop level against the chosen model (fit.h "The chosen model"):
 * its prediction at N = C and the level's mean K, and the level's error;
 * the worst level kept in the result. */
static void model_level(fit_result *res, fit_level *L)
{
    double step = fit_model_predict(&res->model, &res->law, L->concurrency, L->k_mean);
    L->model_pred_tok_per_s = step > 0 ? 1000.0 * L->concurrency / step : NAN;
    L->model_error_rel = L->steady_tok_per_s / L->model_pred_tok_per_s - 1.0;
    if (!isfinite(L->model_error_rel))
        return;
    if (res->model_worst_level < 0 ||
        fabs(L->model_error_rel) > fabs(res->levels[res->model_worst_level].model_error_rel))
        res->model_worst_level = (int)(L - res->levels);
}

/* Each closed-loop level against the law (fit.h "steady_tok_per_s"). */
static int compare_levels(fit_result *res)
{
    res->model_worst_level = -1;
    for (size_t i = 0; i < res->n_levels; i++) {
        fit_level *L = &res->levels[i];
        /* Open loop: C is only a cap on in-flight requests, not the batch. */
        if (L->concurrency <= 0 || !L->closed_loop)
            continue;
        double r, r_se, t_r;
        if (steady_interval(res, i, &r, &r_se, &t_r, &L->k_mean))
            return LL_ENOMEM;
        model_level(res, L);
        if (isfinite(r_se) && r - t_r * r_se > 0) {
            L->steady_tok_per_s_ci[0] = 1000.0 * L->concurrency / (r + t_r * r_se);
            L->steady_tok_per_s_ci[1] = 1000.0 * L->concurrency / (r - t_r * r_se);
        }
        if (!res->law.ok)
            continue;
        double step = res->law.a_ms + res->law.b_ms * L->concurrency;
        if (step > 0)
            L->predicted_tok_per_s = 1000.0 * L->concurrency / step;
        if (!isfinite(L->steady_tok_per_s) || !isfinite(L->predicted_tok_per_s))
            continue;
        L->error_rel = L->steady_tok_per_s / L->predicted_tok_per_s - 1.0;
        /* steady / predicted = step / R: on the log scale the two relative
         * half-widths add in quadrature (the level's steps are also in the
         * law, which only makes this wider than the exact interval) */
        double lo, hi;
        fit_law_mean_ci(&res->law, L->concurrency, &lo, &hi);
        double hw_law = (hi - lo) / 2 / step, hw_r = t_r * r_se / r;
        if (isfinite(hw_law) && isfinite(hw_r)) {
            double hw = sqrt(hw_law * hw_law + hw_r * hw_r);
            L->error_rel_ci[0] = (1 + L->error_rel) * exp(-hw) - 1;
            L->error_rel_ci[1] = (1 + L->error_rel) * exp(hw) - 1;
        }
    }
    return 0;
}

static int fit_engine_steps(const fit_run *run, fit_result *res, char *err, size_t errlen)
{
    size_t ns = fit_run_n_steps(run), k = 0, skipped = 0;
    if (ns == 0) {
        memset(&res->engine, 0, sizeof res->engine);
        res->engine.a_ms = res->engine.b_ms = NAN;
        return 0;
    }
    double *x = malloc(ns * sizeof *x), *y = malloc(ns * sizeof *y);
    int rc = 0;
    if (!x || !y) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "out of memory fitting engine steps");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        const fit_engine_step *s = fit_run_step(run, i);
        if (s->prefill_tok != 0 || s->n_decode <= 0) {
            skipped++;
            continue;
        }
        x[k] = s->n_decode;
        y[k] = (double)s->dur_ns / 1e6;
        k++;
    }
    rc = fit_line(x, y, k, 1, &res->engine, err, errlen);
    if (rc == 0 && fit_note(res, "engine steps: %zu decode-only steps fitted, %zu with prefill "
                                 "or no decode left out", k, skipped))
        rc = LL_ENOMEM;
done:
    free(x);
    free(y);
    return rc;
}

/* fit.h, FIT_BURST_*: the share of each level's samples too short to be a
 * step. Real steps of one stream are never shorter than the step itself;
 * only the client's reading (several steps' chunks collected in one read,
 * each stamped as it is parsed) makes gaps of microseconds. Chunks stamped
 * at one instant are merged into one sample by timeline.c and stay honest
 * (the gap over their tokens), so only distinct stamps show up here. */
static int burst_check(fit_result *res)
{
    double *g = malloc((res->n_samples + 1) * sizeof *g);
    if (!g)
        return LL_ENOMEM;
    for (size_t l = 0; l < res->n_levels; l++) {
        fit_level *L = &res->levels[l];
        size_t n = 0;
        L->burst_gap_frac = L->burst_gap_ms = NAN;
        for (size_t i = 0; i < res->n_samples; i++)
            if (res->samples[i].level_idx == (int32_t)l)
                g[n++] = res->samples[i].gap_ms;
        if (n < FIT_BURST_MIN_SAMPLES)
            continue;
        ll_sort_doubles(g, n);
        double bound = 0.1 * ll_quantile_sorted(g, n, 0.9);
        size_t k = 0;
        while (k < n && g[k] < bound)
            k++;
        L->burst_gap_ms = bound;
        L->burst_gap_frac = (double)k / (double)n;
    }
    free(g);
    return 0;
}

/* fit.h FIT_CLIENT_*: did the client, not the server, set each level's pace?
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
        if (L->concurrency > 0 && res->engine.ok)
            step_ms = res->engine.a_ms + res->engine.b_ms * L->concurrency;
        else if (L->concurrency > 0 && res->has_truth)
            step_ms = res->truth_a_ms + res->truth_b_ms * L->concurrency;
        if (step_ms > 0 && L->itl.n >= FIT_BURST_MIN_SAMPLES)
            L->client_gap_vs_step = L->itl.p50_ms / step_ms;
        L->client_bound = L->client_busy_frac >= FIT_CLIENT_BUSY_FRAC ||
                          (L->client_events_per_read >= FIT_CLIENT_EVENTS_PER_READ &&
                           L->burst_gap_frac > FIT_BURST_NOTE_FRAC) ||
                          L->client_gap_vs_step < FIT_CLIENT_GAP_FRAC;
    }
}

/* The note of a client-bound level: each sign that held, in numbers. */
static int note_client_bound(fit_result *res, const fit_run *run, size_t l)
{
    const fit_level *L = &res->levels[l];
    const ll_rec_client *c = &fit_run_level(run, l)->client;
    char why[400] = "";
    size_t n = 0;
    if (L->client_busy_frac >= FIT_CLIENT_BUSY_FRAC)
        n += (size_t)snprintf(why + n, sizeof why - n,
                              "its busiest thread was %.0f%% busy (%.3g s CPU in %.3g s, %d threads)",
                              100 * L->client_busy_frac, c->cpu_s_max, c->wall_s, c->threads);
    if (n < sizeof why && L->client_events_per_read >= FIT_CLIENT_EVENTS_PER_READ &&
        L->burst_gap_frac > FIT_BURST_NOTE_FRAC)
        n += (size_t)snprintf(why + n, sizeof why - n,
                              "%s%.3g token chunks per read with %.0f%% of gaps bursts",
                              n ? "; " : "", L->client_events_per_read, 100 * L->burst_gap_frac);
    if (n < sizeof why && L->client_gap_vs_step < FIT_CLIENT_GAP_FRAC)
        snprintf(why + n, sizeof why - n,
                 "%sits median gap %.3g ms is %.0f%% of the engine's step at C (%.3g ms)",
                 n ? "; " : "", L->itl.p50_ms, 100 * L->client_gap_vs_step,
                 L->itl.p50_ms / L->client_gap_vs_step);
    return fit_note(res, "level %d (C=%d): the client set the pace: %s; its gaps are the client's "
                         "reading, the law is not the server's at this level",
                    L->level, L->concurrency, why);
}

/* Per level: prompts the server's cache served (its responses' cached tokens,
 * else its /metrics), and requests it ended short of what the run asked. */
static int notes_said(fit_result *res, const fit_level *L)
{
    int rc = 0;
    double share = isfinite(L->cache_share) ? L->cache_share : L->server_cache_share;
    if (share > FIT_CACHE_NOTE_FRAC)
        LL_TRY(fit_note(res, "level %d (C=%d): the server served %.0f%% of the prompt tokens from its prefix "
                             "cache (%s): TTFT measures the cache, not prefill; prompts repeated across levels "
                             "or runs, or a shared prefix",
                        L->level, L->concurrency, 100 * share,
                        isfinite(L->cache_share) ? "its responses' cached tokens" : "its /metrics"));
    double a = L->prompt_tok_asked, got = L->prompt_tok_server_mean;
    if (a > 0 && isfinite(got) && fabs(got / a - 1) > FIT_PROMPT_EST_DRIFT_FRAC)
        LL_TRY(fit_note(res, "level %d (C=%d): prompts asked for %.0f tokens, built as words without a "
                             "tokenizer (an estimate); the server counted %.1f (%+.1f%%, its chat template "
                             "included): give --tokenizer for exact lengths",
                        L->level, L->concurrency, a, got, 100 * (got / a - 1)));
    if (L->n_cut_short)
        LL_TRY(fit_note(res, "level %d (C=%d): %zu of %zu ok requests ended before max_tokens, not by the "
                             "client's asking (finish: %s): a server limit (context, slot size) or EOS "
                             "despite ignore_eos; their TPOT counts fewer tokens",
                        L->level, L->concurrency, L->n_cut_short, L->n_sent - L->n_sent_failed, L->cut_short_why));
fail:
    return rc;
}

/* Per level: prompt-length drift and token counts that were not the stream's
 * own, warned once per level with the numbers (not once per request). */
static int notes_counts(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        double t = L->prompt_tok_target_mean, s = L->prompt_tok_server_mean;
        if (t > 0 && isfinite(s) && fabs(s / t - 1) > FIT_PROMPT_DRIFT_FRAC)
            LL_TRY(fit_note(res, "level %d (C=%d): prompts built to %.1f tokens on average, the "
                                 "server counted %.1f (%+.1f%%): its tokenizer or chat template "
                                 "differs from the one used",
                            L->level, L->concurrency, t, s, 100 * (s / t - 1)));
        LL_TRY(notes_said(res, L));
        if (L->n_counts_attributed)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu requests' final usage disagreed with their "
                                 "streams (%zu requests: stream %lld tokens, usage %lld): the "
                                 "usage was attributed over the chunks, the gaps use it",
                            L->level, L->concurrency, L->n_counts_attributed,
                            L->n_counts_attributed + L->n_counts_tokenizer,
                            (long long)L->counts_stream_tok, (long long)L->counts_recorded_tok));
        if (L->n_counts_tokenizer)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu requests without usage were counted with "
                                 "the tokenizer (stream %lld tokens, counted %lld over the %zu "
                                 "requests not counted by their streams)",
                            L->level, L->concurrency, L->n_counts_tokenizer,
                            (long long)L->counts_stream_tok, (long long)L->counts_recorded_tok,
                            L->n_counts_attributed + L->n_counts_tokenizer));
    }
fail:
    return rc;
}

/* Why there is no law, in the user's terms (fit_result.no_law). */
static void no_law_reason(fit_result *res)
{
    const fit_law *law = &res->law;
    int c0 = -1, distinct_c = 0;
    res->no_law[0] = '\0';
    if (law->ok)
        return;
    /* distinct concurrencies among the levels that ran */
    for (size_t l = 0; l < res->n_levels; l++) {
        int c = res->levels[l].concurrency, seen = 0;
        if (!res->levels[l].n_requests || c <= 0)
            continue;
        for (size_t k = 0; k < l; k++)
            seen |= res->levels[k].n_requests && res->levels[k].concurrency == c;
        if (!seen && distinct_c++ == 0)
            c0 = c;
    }
    size_t n_req = 0;
    for (size_t l = 0; l < res->n_levels; l++)
        n_req += res->levels[l].n_requests;
    if (res->n_levels == 0 || n_req == 0)
        /* what a sweep stopped before its first level ended leaves behind */
        snprintf(res->no_law, sizeof res->no_law,
                 "no request was recorded in any level: nothing to fit step(N) = a + b*N to");
    else if (law->n_points == 0 && fit_law_n_is_server(res))
        snprintf(res->no_law, sizeof res->no_law, "no scrape of the server's running-requests gauge "
                                              "before any steady step (fit --n server): nothing to fit to");
    else if (law->n_points == 0)
        snprintf(res->no_law, sizeof res->no_law, "no steady step (prefill or a change of N in every "
                                              "gap): nothing to fit step(N) = a + b*N to");
    else if (distinct_c == 1 && law->n_distinct <= 1)
        snprintf(res->no_law, sizeof res->no_law,
                 "one concurrency swept (C=%d): a line needs at least two distinct N", c0);
    else if (law->n_distinct <= 1)
        snprintf(res->no_law, sizeof res->no_law,
                 "steady steps at one N only (%zu points): a line needs at least two distinct N",
                 law->n_points);
    else
        snprintf(res->no_law, sizeof res->no_law,
                 "%zu steady step points over %zu distinct N: a line needs 3 points and 2 distinct N",
                 law->n_points, law->n_distinct);
}

static int notes_for_levels(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (L->n_failed)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu failed requests left out of the samples "
                                 "(their time still counts as occupancy)",
                            L->level, L->concurrency, L->n_failed));
        if (L->interrupted)
            LL_TRY(fit_note(res, "level %d (C=%d): interrupted; %zu samples after the last full "
                                 "occupancy left out (requests in flight were never recorded)",
                            L->level, L->concurrency, L->n_samples_after_cut));
        double typical = 1000.0 * L->concurrency / L->steady_step_ms;
        if (isfinite(L->steady_tok_per_s) && isfinite(typical) &&
            fabs(L->steady_tok_per_s / typical - 1) > 0.05)
            LL_TRY(fit_note(res, "level %d (C=%d): steady throughput %.4g tok/s is %.0f%% off the "
                                 "typical step's %.4g: pauses (server or client) inside steady "
                                 "decode; the law leaves steps beyond %g robust sd out, the throughput "
                                 "keeps them",
                            L->level, L->concurrency, L->steady_tok_per_s,
                            100 * (L->steady_tok_per_s / typical - 1), typical, FIT_TRIM_SD));
        if (L->burst_gap_frac > FIT_BURST_NOTE_FRAC)
            LL_TRY(fit_note(res, "level %d (C=%d): %.0f%% of gaps under %.3g ms (a tenth of the "
                                 "level's 90th-percentile gap): the client read in bursts; "
                                 "timing at this level is unreliable",
                            L->level, L->concurrency, 100 * L->burst_gap_frac, L->burst_gap_ms));
        if (L->n_steady_samples == 0 && L->n_samples)
            LL_TRY(fit_note(res, "level %d (C=%d): no steady sample (prefill in every gap)",
                            L->level, L->concurrency));
        if (L->closed_loop && L->concurrency > 0 && !L->ramp_reached && L->n_requests)
            LL_TRY(fit_note(res, "level %d (C=%d): D never reached C; no ramp end, no steady window",
                            L->level, L->concurrency));
    }
fail:
    return rc;
}

/* What the server's own metrics say against the client's view (fit.h
 * "Server figures"). */
static int notes_server(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (L->server_n_disagrees)
            LL_TRY(fit_note(res, "level %d (C=%d): the server ran N = %.3g sequences while the client held "
                                 "D = %d (more than %.0f%% + %.0f apart): another tenant on the server, or it "
                                 "caps its batch; the law's N is the client's",
                            L->level, L->concurrency, L->server_n, L->concurrency, 100 * FIT_SERVER_N_REL,
                            FIT_SERVER_N_ABS));
        if (L->server_stale_s > FIT_SGLANG_STALE_S)
            LL_TRY(fit_note(res, "level %d (C=%d): SGLang's gauges held one value for %.3g s while the "
                                 "level ran: it refreshes them every --decode-log-interval steps (default "
                                 "40); start it with --decode-log-interval 1 for per-level server figures",
                            L->level, L->concurrency, L->server_stale_s));
    }
fail:
    return rc;
}

/* Run-wide notes: how the law was fitted and what it or the reader left out. */
static int notes_left_out(const fit_run *run, const fit_options *opt, fit_result *res)
{
    const fit_law *law = &res->law;
    const fit_run_info *info = fit_run_get_info(run);
    size_t ns = res->n_samples, n_steady = 0, n_used = law->n_samples;
    int rc = 0;
    for (size_t l = 0; l < res->n_levels; l++)
        n_steady += res->levels[l].n_steady_samples;
    if (!law->ok)
        LL_TRY(fit_note(res, "no law: %s", res->no_law));
    if (law->ok && res->law_client_bound)
        LL_TRY(fit_note(res, "the law is not the server's: levels whose steps made it were "
                             "client-bound (notes above); rerun with more threads, fewer "
                             "streams, or a slower server"));
    if (law->ok && law->note[0])
        LL_TRY(fit_note(res, "law fitted by %s: %s", law->method, law->note));
    if (law->ok && !law->converged && strcmp(law->method, "trimmed-wls") == 0)
        LL_TRY(fit_note(res, "robust pass: iteration limit reached; outliers were marked from its "
                             "last iterate"));
    if (law->n_trimmed)
        LL_TRY(fit_note(res, "%zu of %zu step points more than %g robust sd from the line (stalls, "
                             "burst reads) left out of the law", law->n_trimmed, law->n_points,
                        FIT_TRIM_SD));
    if (law->ok && !(law->b_ms > 0))
        LL_TRY(fit_note(res, "slope b <= 0: step time does not grow with N here; no asymptote"));
    if (res->n_warmup && !opt->include_warmup)
        LL_TRY(fit_note(res, "%zu warmup requests: no samples from them", res->n_warmup));
    if (res->n_truncated_lines)
        LL_TRY(fit_note(res, "truncated last line of records.jsonl skipped (interrupted writer)"));
    if (res->n_rejected_records)
        LL_TRY(fit_note(res, "%zu records rejected by the reader (%zu values out of range)",
                        res->n_rejected_records, res->n_out_of_range));
    if (info->n_bad_requests)
        LL_TRY(fit_note(res, "%zu request lines without usable times or chunks dropped",
                        info->n_bad_requests));
    if (res->n_clamped)
        LL_TRY(fit_note(res, "%zu request times clamped to keep send <= first token <= end "
                             "(a first token before the send, or an end before a token)",
                        res->n_clamped));
    if (ns > n_steady)
        LL_TRY(fit_note(res, "%zu of %zu step samples not steady (prefill in the gap or D "
                             "changed): left out of the law, kept in the naive fit",
                        ns - n_steady, ns));
    if (n_steady > n_used)
        LL_TRY(fit_note(res, "%zu steady step samples of closed-loop levels at N below C (the "
                             "ramp-down, where N falls every step and the client's read lag "
                             "with it) left out of the law",
                        n_steady - n_used));
fail:
    return rc;
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
    int rc = LL_ENOMEM;
    fit_sample_vec sv = {0};
    size_t nl = fit_run_n_levels(run);
    fit_result *res = calloc(1, sizeof *res);
    if (!res || !(res->levels = calloc(nl ? nl : 1, sizeof *res->levels)))
        goto fail;
    read_truth(fit_run_get_info(run), res);
    LL_TRY(rebuild_levels(run, &opt, res, &sv, err, errlen));
    res->samples = sv.v;
    res->n_samples = sv.n;
    sv.v = NULL;
    count_left_out(run, res);
    LL_TRY(fit_laws(run, res, &opt, err, errlen));
    LL_TRY(compare_levels(res));
    LL_TRY(fit_engine_steps(run, res, err, errlen));
    LL_TRY(burst_check(res));
    client_check(run, res);
    no_law_reason(res);
    for (size_t l = 0; l < res->n_levels; l++)
        res->law_client_bound |= res->law.ok && res->levels[l].client_bound &&
                                 res->levels[l].n_steady_points > 0;
    LL_TRY(notes_for_levels(res));
    LL_TRY(notes_server(res));
    for (size_t l = 0; l < res->n_levels; l++)
        if (res->levels[l].client_bound)
            LL_TRY(note_client_bound(res, run, l));
    LL_TRY(notes_counts(res));
    LL_TRY(notes_left_out(run, &opt, res));
    LL_TRY(fit_turns_compute(run, res));
    *out = res;
    return 0;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory in fit");
    ll_vec_free(&sv);
    fit_result_free(res);
    return rc;
}

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
