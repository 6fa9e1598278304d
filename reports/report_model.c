/* report_model.c: what the step-time model sees, as chart data.
 *
 * On a real server the step depends on N and on the context K of the running
 * requests (fit/model.c "The context term"), so the report shows the steady samples
 * against N coloured by the context per running request (K/N), the chosen
 * model drawn at three contexts (the 10th, 50th and 90th percentile of K/N
 * over those samples, K = N * that; the samples are the chart sample, fit.h
 * fit_chart_sample), each sample's residual against the model (fit_model_predict: the one predictor), and per level the step
 * against position in the request (fit_level_position). Every number comes
 * from fit; this file only picks and thins. Bounded as report_data.c's
 * series: at most RPT_MAX_POINTS samples, RPT_MODEL_LINE_POINTS + 1 points a
 * line, FIT_POS_BINS a level. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"

/* four significant decimals are plenty on a chart; NAN becomes null */
static cJSON *rnum(double x)
{
    return ll_json_num_item(isfinite(x) ? round(x * 1e4) / 1e4 : NAN);
}

static cJSON *row(const double *v, int n)
{
    cJSON *p = cJSON_CreateArray();
    for (int i = 0; p && i < n; i++)
        if (rpt_json_push(p, rnum(v[i]))) {
            cJSON_Delete(p);
            return NULL;
        }
    return p;
}

/* The chosen model's step at N with kr context tokens per request (the line
 * when the check was not done); NAN when there is neither. */
static double model_at(const fit_result *res, double n, double kr)
{
    return fit_model_predict(&res->model, &res->law, n, n * kr);
}

static int counted(const fit_chart_point *s)
{
    return s->n > 0;
}

/* K/N of the steady samples (the chart sample's), sorted (caller frees);
 * *n_out of them. */
static double *sorted_k_per_req(const fit_result *res, size_t *n_out)
{
    const fit_chart_point *pt = res->chart.steady;
    double *v = malloc((res->chart.n_steady + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < res->chart.n_steady; i++)
        if (counted(&pt[i]))
            v[n++] = pt[i].k / pt[i].n;
    if (v)
        ll_sort_doubles(v, n);
    *n_out = n;
    return v;
}

/* Every stride-th steady sample as [n, ms, K/N, K, ms - model]. */
static cJSON *points_json(const fit_result *res, size_t n_steady)
{
    cJSON *arr = cJSON_CreateArray();
    size_t stride = n_steady / RPT_MAX_POINTS + 1, k = 0;
    for (size_t i = 0; arr && i < res->chart.n_steady; i++) {
        const fit_chart_point *s = &res->chart.steady[i];
        if (!counted(s) || k++ % stride)
            continue;
        double v[5] = {s->n, s->gap_ms, s->k / s->n, s->k, s->gap_ms - model_at(res, s->n, s->k / s->n)};
        if (rpt_json_push(arr, row(v, 5))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* The model at kr context tokens per request over N in [0, n_max]: integer
 * N up to RPT_MODEL_LINE_POINTS (a bucket's or a knee's corner shows), else
 * that many even steps. */
static cJSON *line_json(const fit_result *res, double q, double kr, double n_max)
{
    cJSON *o = cJSON_CreateObject(), *pts = cJSON_CreateArray();
    if (rpt_json_add(o, "q", rnum(q)) || rpt_json_add(o, "k_per_req", rnum(kr)) || rpt_json_add(o, "pts", pts)) {
        cJSON_Delete(o);
        return NULL;
    }
    int m = n_max <= RPT_MODEL_LINE_POINTS ? (int)ceil(n_max) : RPT_MODEL_LINE_POINTS;
    for (int j = 0; j <= m; j++) {
        double n = n_max * j / (m > 0 ? m : 1), y = model_at(res, n, kr);
        double v[2] = {n, y};
        if (isfinite(y) && rpt_json_push(pts, row(v, 2))) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* {model, has_k, formula, k_edges (K/N at 0, 20, .., 100%), lines, points}. */
static int view_body(cJSON *o, const fit_result *res, const double *kr, size_t n, double n_max)
{
    const fit_model_check *m = &res->model;
    int has_k = m->done && m->best != FIT_MODEL_LINEAR && m->chosen.p && fit_model_fit_has(&m->chosen, FIT_TERM_K);
    char formula[200] = "";
    if (m->done && m->best != FIT_MODEL_LINEAR && m->chosen.p)
        fit_model_fit_formula(&m->chosen, 1, formula, sizeof formula);
    else if (res->law.ok)
        snprintf(formula, sizeof formula, "%.4g + %.4g*N", res->law.a_ms, res->law.b_ms);
    cJSON *edges = cJSON_CreateArray(), *lines = cJSON_CreateArray();
    if (rpt_json_add(o, "model", cJSON_CreateString(m->done ? fit_model_name(m->best) : "linear")) ||
        rpt_json_add(o, "has_k", cJSON_CreateBool(has_k)) || rpt_json_add(o, "formula", cJSON_CreateString(formula)) ||
        rpt_json_add(o, "k_edges", edges) || rpt_json_add(o, "lines", lines) || rpt_json_add(o, "points", points_json(res, n)))
        return -1;
    for (int e = 0; n && e <= 5; e++)
        if (rpt_json_push(edges, rnum(ll_quantile_sorted(kr, n, e / 5.0))))
            return -1;
    static const double qs[3] = {0.1, 0.5, 0.9};
    for (int j = has_k ? 0 : 1; j < (has_k ? 3 : 2); j++) {
        double k = n ? ll_quantile_sorted(kr, n, qs[j]) : 0;
        if (rpt_json_push(lines, line_json(res, qs[j], k, n_max)))
            return -1;
    }
    return 0;
}

cJSON *rpt_model_view_json(const fit_result *res, double n_max)
{
    size_t n = 0;
    double *kr = sorted_k_per_req(res, &n);
    cJSON *o = kr ? cJSON_CreateObject() : NULL;
    if (o && view_body(o, res, kr, n, n_max)) {
        cJSON_Delete(o);
        o = NULL;
    }
    free(kr);
    return o;
}

/* One series of bins as [[position, ms]] at each non-empty bin's centre. */
static cJSON *bins_json(const fit_pos_bins *pb, const double *ms)
{
    cJSON *arr = cJSON_CreateArray();
    for (int b = 0; arr && b < FIT_POS_BINS; b++) {
        double v[2] = {(b + 0.5) * pb->width_tok, ms[b]};
        if (isfinite(ms[b]) && rpt_json_push(arr, row(v, 2))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

cJSON *rpt_position_json(const fit_result *res, size_t level_idx)
{
    fit_pos_bins pb;
    fit_level_position(res, level_idx, &pb);
    cJSON *o = cJSON_CreateObject();
    if (!o || rpt_json_add(o, "width_tok", rnum(pb.width_tok)) || rpt_json_add(o, "steady", bins_json(&pb, pb.steady_ms)) ||
        rpt_json_add(o, "all", bins_json(&pb, pb.all_ms)) || rpt_json_add(o, "early_ms", rnum(pb.early_ms)) ||
        rpt_json_add(o, "late_ms", rnum(pb.late_ms)) || rpt_json_add(o, "early_all_ms", rnum(pb.early_all_ms)) ||
        rpt_json_add(o, "late_all_ms", rnum(pb.late_all_ms))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
