/* analyze.c: fit_analyze, from a loaded run to a fit_result.
 *
 * Per level: timeline and samples (timeline.c). Then the steady samples are
 * grouped into client-observed engine steps, the law is fitted on one point per
 * step (regress.c), the model is checked, each level is compared with the law,
 * the engine's own steps are fitted, and everything left out is noted. */
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
    free(r);
}

static int cmp_sample_time(const void *a, const void *b)
{
    const fit_sample *x = *(const fit_sample *const *)a, *y = *(const fit_sample *const *)b;
    if (x->t_ns != y->t_ns)
        return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
    return (x->n > y->n) - (x->n < y->n);
}

/* Steady samples of one level whose later chunks arrive within half a gap of
 * each other came from the same engine step (a step's tokens reach the C
 * streams microseconds apart, consecutive steps a whole step apart). Each
 * group becomes one point: x = N, y = median ms per token. */
static int step_points(fit_result *res, size_t lv, const fit_sample **tmp, double *gbuf,
                       double *px, double *py, size_t *np)
{
    size_t m = 0;
    for (size_t i = 0; i < res->n_samples; i++)
        if (res->samples[i].level_idx == (int32_t)lv && res->samples[i].steady)
            tmp[m++] = &res->samples[i];
    qsort(tmp, m, sizeof *tmp, cmp_sample_time);
    size_t before = *np;
    for (size_t i = 0; i < m;) {
        const fit_sample *first = tmp[i];
        double gap_ns = first->gap_ms * 1e6 * first->tokens;
        size_t g = 0;
        for (; i < m && tmp[i]->n == first->n &&
               (double)(tmp[i]->t_ns - first->t_ns) <= 0.5 * gap_ns;
             i++)
            gbuf[g++] = tmp[i]->gap_ms;
        ll_sort_doubles(gbuf, g);
        px[*np] = first->n;
        py[*np] = ll_quantile_sorted(gbuf, g, 0.5);
        (*np)++;
    }
    res->levels[lv].n_steady_points = *np - before;
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

static void compare_levels(fit_result *res)
{
    for (size_t i = 0; i < res->n_levels; i++) {
        fit_level *L = &res->levels[i];
        /* Open loop: C is only a cap on in-flight requests, not the batch. */
        if (!res->law.ok || L->concurrency <= 0 || !L->closed_loop)
            continue;
        double step = res->law.a_ms + res->law.b_ms * L->concurrency;
        if (step > 0)
            L->predicted_tok_per_s = 1000.0 * L->concurrency / step;
        if (isfinite(L->steady_tok_per_s) && isfinite(L->predicted_tok_per_s))
            L->error_rel = L->steady_tok_per_s / L->predicted_tok_per_s - 1.0;
    }
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

static int notes_for_levels(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels && !rc; i++) {
        const fit_level *L = &res->levels[i];
        if (L->n_failed)
            rc |= fit_note(res, "level %d (C=%d): %zu failed requests left out of the samples "
                                "(their time still counts as occupancy)",
                           L->level, L->concurrency, L->n_failed);
        if (L->interrupted)
            rc |= fit_note(res, "level %d (C=%d): interrupted; %zu samples after the last full "
                                "occupancy left out (requests in flight were never recorded)",
                           L->level, L->concurrency, L->n_samples_after_cut);
        double typical = 1000.0 * L->concurrency / L->steady_step_ms;
        if (isfinite(L->steady_tok_per_s) && isfinite(typical) &&
            fabs(L->steady_tok_per_s / typical - 1) > 0.05)
            rc |= fit_note(res, "level %d (C=%d): steady throughput %.4g tok/s is %.0f%% off the "
                                "typical step's %.4g: pauses (server or client) inside steady "
                                "decode; the robust law ignores them, the throughput keeps them",
                           L->level, L->concurrency, L->steady_tok_per_s,
                           100 * (L->steady_tok_per_s / typical - 1), typical);
        if (L->burst_gap_frac > FIT_BURST_NOTE_FRAC)
            rc |= fit_note(res, "level %d (C=%d): %.0f%% of gaps under %.3g ms (a tenth of the "
                                "level's 90th-percentile gap): the client read in bursts; "
                                "timing at this level is unreliable",
                           L->level, L->concurrency, 100 * L->burst_gap_frac, L->burst_gap_ms);
        if (L->n_steady_samples == 0 && L->n_samples)
            rc |= fit_note(res, "level %d (C=%d): no steady sample (prefill in every gap)",
                           L->level, L->concurrency);
        if (L->closed_loop && L->concurrency > 0 && !L->ramp_reached && L->n_requests)
            rc |= fit_note(res, "level %d (C=%d): D never reached C; no ramp end, no steady window",
                           L->level, L->concurrency);
    }
    return rc ? LL_ENOMEM : 0;
}

/* From the bundled engine's spec ("backend=synthetic,law=52+30n,time_scale=0.1"):
 * the time scale (1 when absent or unreadable) and the law as written, so the
 * fitted law can be shown in the units the user configured. */
static void engine_spec_law(const char *spec, double *scale, char *law, size_t law_len)
{
    *scale = 1;
    law[0] = '\0';
    for (const char *p = spec; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 11 && strncmp(p, "time_scale=", 11) == 0) {
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)(len - 11), p + 11);
            double v;
            if (ll_parse_double(num, &v) == 0 && v > 0)
                *scale = v;
        } else if (len > 4 && strncmp(p, "law=", 4) == 0) {
            snprintf(law, law_len, "%.*s", (int)(len - 4), p + 4);
        }
        p = end ? end + 1 : NULL;
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
    if (!(opt.edge_tol_frac >= 0 && opt.edge_tol_frac < 0.5)) {
        ll_errf(err, errlen, "edge_tol_frac must be in [0, 0.5)");
        return LL_EINVAL;
    }
    *out = NULL;
    int rc = 0;
    fit_sample_vec sv = {NULL, 0, 0};
    size_t *idx = NULL, nreq = fit_run_n_requests(run);
    const fit_sample **tmp = NULL;
    double *gbuf = NULL, *px = NULL, *py = NULL, *ax = NULL, *ay = NULL;
    fit_result *res = calloc(1, sizeof *res);
    if (!res)
        goto oom;
    size_t nl = fit_run_n_levels(run);
    res->levels = calloc(nl ? nl : 1, sizeof *res->levels);
    idx = malloc((nreq + 1) * sizeof *idx);
    if (!res->levels || !idx)
        goto oom;
    const fit_run_info *info = fit_run_get_info(run);
    res->n_truncated_lines = info->n_truncated;
    res->has_truth = info->has_engine_law;
    res->truth_a_ms = info->has_engine_law ? info->law_a_ms : NAN;
    res->truth_b_ms = info->has_engine_law ? info->law_b_ms : NAN;
    res->time_scale = NAN;
    if (info->has_engine_law)
        engine_spec_law(info->engine_spec, &res->time_scale, res->engine_law_spec,
                        sizeof res->engine_law_spec);

    for (size_t l = 0; l < nl; l++) {
        const fit_level_info *li = fit_run_level(run, l);
        size_t n = 0;
        for (size_t i = 0; i < nreq; i++)
            if (fit_run_request(run, i)->level == li->level)
                idx[n++] = i;
        rc = fit_timeline_level(run, li, idx, n, (int32_t)l, &opt, &res->levels[l], &sv,
                                &res->n_empty_chunks, err, errlen);
        if (rc)
            goto fail;
        res->n_levels = l + 1;
    }
    res->samples = sv.v;
    res->n_samples = sv.n;
    sv.v = NULL;
    for (size_t i = 0; i < nreq; i++) {
        const fit_request *q = fit_run_request(run, i);
        res->n_requests++;
        res->n_failed += !q->ok;
        res->n_warmup += q->warmup != 0;
        res->n_no_tokens += q->ok && q->n_chunks == 0;
    }

    /* The law on one point per client-observed step; OLS on the same points;
     * the naive OLS on every raw gap beside them. */
    size_t ns = res->n_samples, np = 0, n_steady = 0;
    tmp = malloc((ns + 1) * sizeof *tmp);
    gbuf = malloc((ns + 1) * sizeof *gbuf);
    px = malloc((ns + 1) * sizeof *px);
    py = malloc((ns + 1) * sizeof *py);
    ax = malloc((ns + 1) * sizeof *ax);
    ay = malloc((ns + 1) * sizeof *ay);
    if (!tmp || !gbuf || !px || !py || !ax || !ay)
        goto oom;
    for (size_t l = 0; l < res->n_levels; l++)
        step_points(res, l, tmp, gbuf, px, py, &np);
    for (size_t i = 0; i < ns; i++) {
        ax[i] = res->samples[i].n;
        ay[i] = res->samples[i].gap_ms;
        n_steady += res->samples[i].steady;
    }
    if ((rc = fit_line(px, py, np, 1, &res->law, err, errlen)) ||
        (rc = fit_line(px, py, np, 0, &res->ols, err, errlen)) ||
        (rc = fit_line(ax, ay, ns, 0, &res->naive, err, errlen)))
        goto fail;
    res->law.n_samples = res->ols.n_samples = n_steady;
    res->asymptote_tok_per_s = res->law.ok && res->law.b_ms > 0 ? 1000.0 / res->law.b_ms : NAN;
    res->n_half = res->law.ok && res->law.b_ms > 0 ? res->law.a_ms / res->law.b_ms : NAN;
    if (!res->law.ok && fit_note(res, "no law: %zu steady step points over %zu distinct N "
                                      "(needs 3 points and 2 distinct N)",
                                 np, res->law.n_distinct))
        goto oom;
    if (res->law.ok && !res->law.converged &&
        fit_note(res, "robust fit: iteration limit reached; the law is the last iterate"))
        goto oom;
    if (res->law.ok && !(res->law.b_ms > 0) &&
        fit_note(res, "slope b <= 0: step time does not grow with N here; no asymptote"))
        goto oom;
    if ((rc = fit_model_check_run(px, py, np, &opt, &res->model, err, errlen)))
        goto fail;
    compare_levels(res);
    if ((rc = fit_engine_steps(run, res, err, errlen)))
        goto fail;
    if (burst_check(res) || notes_for_levels(res))
        goto oom;
    if (res->n_warmup && !opt.include_warmup &&
        fit_note(res, "%zu warmup requests: no samples from them", res->n_warmup))
        goto oom;
    if (res->n_truncated_lines &&
        fit_note(res, "truncated last line of records.jsonl skipped (interrupted writer)"))
        goto oom;
    if (info->n_bad_requests &&
        fit_note(res, "%zu request lines without usable times or chunks dropped",
                 info->n_bad_requests))
        goto oom;
    if (ns > n_steady &&
        fit_note(res, "%zu of %zu step samples not steady (prefill in the gap or D changed): "
                      "left out of the law, kept in the naive fit",
                 ns - n_steady, ns))
        goto oom;
    free(tmp);
    free(gbuf);
    free(px);
    free(py);
    free(ax);
    free(ay);
    free(idx);
    *out = res;
    return 0;
oom:
    rc = LL_ENOMEM;
    ll_errf(err, errlen, "out of memory in fit");
fail:
    free(tmp);
    free(gbuf);
    free(px);
    free(py);
    free(ax);
    free(ay);
    free(idx);
    free(sv.v);
    fit_result_free(res);
    return rc;
}
