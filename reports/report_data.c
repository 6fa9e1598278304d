/* report_data.c: what a page's charts draw, as JSON, from an analysed run.
 *
 * Bounded whatever the run's size: scatter series are thinned by a fixed
 * stride to RPT_MAX_POINTS, P/D timelines are binned to RPT_PHASE_POINTS
 * (each bin keeps its peak so a short burst still shows), distributions go
 * out as RPT_CDF_POINTS quantiles (what the model sees: report_model.c). Times on a level's charts are seconds from
 * the level's start. Each level also carries its figures ("figures": the
 * same object as in summary.json, from fit_level), so a page's numbers can be
 * checked against the run's other outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"
#include "json_internal.h"

/* a number, or null (common's one NaN -> null rule) */
static cJSON *num(double x)
{
    return ll_json_num_item(x);
}

static cJSON *xy(double x, double y)
{
    cJSON *p = cJSON_CreateArray();
    if (!p)
        return NULL;
    /* four significant digits are plenty on a chart and halve the page */
    if (rpt_json_push(p, num(round(x * 1e4) / 1e4)) || rpt_json_push(p, num(y == 0 ? 0 : round(y * 1e4) / 1e4))) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

/* The law, and the 95% confidence band of its mean line as [[n, lo, hi]] at
 * RPT_BAND_POINTS + 1 evenly spaced n in [0, n_max]: fit_law_mean_ci, which
 * carries the a-b covariance. The corners of the a and b intervals would give
 * a band several times too wide (a and b are strongly anti-correlated). */
static int add_law(cJSON *o, const fit_law *l, double n_max)
{
    /* the law itself in the page's spelling (the names report.js reads) */
    if (rpt_json_law(o, "law", l, NULL, NAN, rpt_law_in_page))
        return -1;
    cJSON *band = cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(o, "law"), "band");
    if (!band)
        return -1;
    for (int i = 0; l->ok && i <= RPT_BAND_POINTS; i++) {
        double n = n_max * i / RPT_BAND_POINTS, lo, hi;
        fit_law_mean_ci(l, n, &lo, &hi);
        cJSON *p = cJSON_CreateArray();
        if (rpt_json_push(band, p) || rpt_json_push(p, num(n)) || rpt_json_push(p, num(lo)) || rpt_json_push(p, num(hi)))
            return -1;
    }
    return 0;
}

/* The step chart's x range: the largest N seen (samples, levels), plus 5%. */
static double chart_n_max(const fit_result *res)
{
    double m = res->chart.n_max > 1 ? res->chart.n_max : 1;
    for (size_t i = 0; i < res->n_levels; i++)
        m = res->levels[i].concurrency > m ? res->levels[i].concurrency : m;
    return m * 1.05;
}

/* CDF of sorted values as [[x, F(x)]], at most RPT_CDF_POINTS points. */
static cJSON *cdf_json(const double *v, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    size_t m = n < RPT_CDF_POINTS ? n : RPT_CDF_POINTS;
    for (size_t k = 0; k < m; k++) {
        double x, f;
        if (n <= RPT_CDF_POINTS) {
            x = v[k];
            f = (double)(k + 1) / (double)n;
        } else {
            f = (double)k / (double)(m - 1);
            x = ll_quantile_sorted(v, n, f);
        }
        if (x <= 0)
            continue; /* zero gaps (chunks read together) have no place on a log axis */
        if (rpt_json_push(arr, xy(x, f))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* P(t), D(t) binned to at most RPT_PHASE_POINTS steps, each bin at its peak. */
static cJSON *phase_json(const fit_level *L)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    double t0 = L->start_ns / 1e9;
    if (L->n_phase <= RPT_PHASE_POINTS) {
        for (size_t i = 0; i < L->n_phase; i++) {
            cJSON *p = xy(L->phase[i].t_ns / 1e9 - t0, L->phase[i].prefill);
            if (!p || rpt_json_push(p, cJSON_CreateNumber(L->phase[i].decode)) || rpt_json_push(arr, p)) {
                cJSON_Delete(p);
                cJSON_Delete(arr);
                return NULL;
            }
        }
        return arr;
    }
    int64_t span = L->phase[L->n_phase - 1].t_ns - L->phase[0].t_ns;
    int64_t bin = span / RPT_PHASE_POINTS + 1;
    size_t i = 0;
    int32_t cur_p = 0, cur_d = 0;
    for (int64_t b0 = L->phase[0].t_ns; i < L->n_phase; b0 += bin) {
        int32_t mp = cur_p, md = cur_d;
        while (i < L->n_phase && L->phase[i].t_ns < b0 + bin) {
            cur_p = L->phase[i].prefill;
            cur_d = L->phase[i].decode;
            if (cur_p > mp)
                mp = cur_p;
            if (cur_d > md)
                md = cur_d;
            i++;
        }
        cJSON *p = xy(b0 / 1e9 - t0, mp);
        if (!p || rpt_json_push(p, cJSON_CreateNumber(md)) || rpt_json_push(arr, p)) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* The level's steady windows and ramp, seconds from its start. */
static int windows_json(cJSON *o, const fit_level *L)
{
    double t0 = L->start_ns / 1e9;
    cJSON *win = cJSON_CreateArray();
    if (rpt_json_add(o, "phase", phase_json(L)) || rpt_json_add(o, "windows", win))
        return -1;
    for (size_t i = 0; i < L->n_windows; i++) {
        if (rpt_json_push(win, xy(L->windows[i].t0_ns / 1e9 - t0, L->windows[i].t1_ns / 1e9 - t0)))
            return -1;
    }
    if (L->ramp_reached && isfinite(L->ramp_s) && rpt_json_add(o, "ramp", xy(0, L->ramp_s)))
        return -1;
    return 0;
}

/* The level's token rate over time, thinking and answer apart. */
static int rate_json(cJSON *o, const fit_level *L)
{
    double t0 = L->start_ns / 1e9;
    if (L->n_rate_bins == 0)
        return 0;
    cJSON *rate = cJSON_CreateObject(), *th = cJSON_CreateArray(), *an = cJSON_CreateArray();
    if (rpt_json_add(o, "rate", rate) || rpt_json_add(rate, "t0_s", num(L->rate_t0_ns / 1e9 - t0)) ||
        rpt_json_add(rate, "bin_s", num(L->rate_bin_ns / 1e9)) || rpt_json_add(rate, "think", th) || rpt_json_add(rate, "answer", an))
        return -1;
    for (size_t i = 0; i < L->n_rate_bins; i++)
        if (rpt_json_push(th, num(round(L->think_tok_per_s[i] * 100) / 100)) ||
            rpt_json_push(an, num(round(L->answer_tok_per_s[i] * 100) / 100)))
            return -1;
    return 0;
}

/* The level's latency CDFs (TTFT, TTFA, ITL) from its requests. */
static int cdfs_json(cJSON *o, const fit_run *run, const fit_level *L, char *err, size_t errlen)
{
    double *ttft = NULL, *ttfa = NULL, *itl = NULL;
    fit_level_latency lat;
    size_t n_itl = 0;
    int rc = -1;
    if (fit_level_latency_get(run, L->level, &lat, &ttft, &ttfa, &itl, &n_itl, err, errlen))
        goto out;
    cJSON *cdf = cJSON_CreateObject();
    if (rpt_json_add(o, "cdf", cdf) || rpt_json_add(cdf, "ttft", cdf_json(ttft, lat.ttft.n)) ||
        rpt_json_add(cdf, "ttfa", cdf_json(ttfa, lat.ttfa.n)) || rpt_json_add(cdf, "itl", cdf_json(itl, n_itl)))
        goto out;
    rc = 0;
out:
    free(ttft);
    free(ttfa);
    free(itl);
    return rc;
}

static cJSON *level_json(const fit_run *run, const fit_result *res, size_t i, int full, char *err,
                         size_t errlen)
{
    const fit_level *L = &res->levels[i];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (rpt_json_add(o, "c", cJSON_CreateNumber(L->concurrency)) || rpt_json_add(o, "level", cJSON_CreateNumber(L->level)) ||
        rpt_json_add(o, "duration_s", num(L->duration_s)) || rpt_json_add(o, "steady_tok_per_s", num(L->steady_tok_per_s)) ||
        rpt_json_add(o, "whole_tok_per_s", num(L->whole_tok_per_s)))
        goto fail;
    /* The level's figures exactly as summary.json has them (one writer). */
    cJSON *fig = cJSON_AddObjectToObject(o, "figures");
    if (!fig || rpt_json_level_figures(fig, L))
        goto fail;
    if (!full)
        return o;
    if (windows_json(o, L) || rate_json(o, L) || cdfs_json(o, run, L, err, errlen) ||
        rpt_json_add(o, "position", rpt_position_json(res, i)))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* Every stride-th sample of a kind, at most RPT_MAX_POINTS, from the chart
 * sample (fit.h fit_chart_sample: every sample of a run up to its bound). */
static cJSON *samples_json(const fit_result *r, int steady)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    const fit_chart_point *pt = steady ? r->chart.steady : r->chart.other;
    size_t n = steady ? r->chart.n_steady : r->chart.n_other;
    size_t stride = n / RPT_MAX_POINTS + 1;
    for (size_t i = 0; i < n; i += stride) {
        const fit_chart_point *s = &pt[i];
        if (rpt_json_push(arr, xy(s->n, s->gap_ms))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static cJSON *engine_json(const fit_run *run)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < fit_run_n_steps(run); i++)
        n += fit_run_step(run, i)->prefill_tok == 0 && fit_run_step(run, i)->n_decode > 0;
    size_t stride = n / RPT_MAX_POINTS + 1, k = 0;
    for (size_t i = 0; i < fit_run_n_steps(run); i++) {
        const ll_rec_step *s = fit_run_step(run, i);
        if (s->prefill_tok != 0 || s->n_decode <= 0 || k++ % stride)
            continue;
        if (rpt_json_push(arr, xy(s->n_decode, s->dur_ns / 1e6))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

cJSON *rpt_run_chart_data(const fit_run *run, const fit_result *res, int full, char *err,
                          size_t errlen)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *levels = o ? cJSON_AddArrayToObject(o, "levels") : NULL;
    cJSON *samples = o ? cJSON_AddObjectToObject(o, "samples") : NULL;
    if (!levels || !samples || add_law(o, &res->law, chart_n_max(res)))
        goto fail;
    for (size_t i = 0; i < res->n_levels; i++)
        if (rpt_json_push(levels, level_json(run, res, i, full, err, errlen)))
            goto fail;
    if (rpt_json_add(samples, "steady", samples_json(res, 1)))
        goto fail;
    if (full && (rpt_json_add(samples, "other", samples_json(res, 0)) || rpt_json_add(o, "engine_steps", engine_json(run)) ||
                 rpt_json_add(o, "model_view", rpt_model_view_json(res, chart_n_max(res)))))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    ll_errf(err, errlen, "out of memory building chart data");
    return NULL;
}
