/* compare_json.c: a comparison (fit/compare.c "A/B comparison") as `loadlaw
 * compare --json` writes it, and as the comparison page embeds it. Laws and
 * latency distributions go through json_shapes.c in compare's spelling
 * ("p50_ms", a law with its asymptote); every number through common's NaN ->
 * null rule. */
#include "json_internal.h"

/* 0 or -1, the convention of this file's steps. */
static int add_num(cJSON *o, const char *k, double x)
{
    return ll_json_add_num(o, k, x) ? -1 : 0;
}

static int add_pair(cJSON *o, const char *k, const double *v)
{
    return ll_json_add_pair(o, k, v) ? -1 : 0;
}

/* One common level: loads, throughputs and the ratio with its interval. */
static int level_figures_json(cJSON *o, const fit_compare_level *L)
{
    if (add_num(o, "concurrency", L->concurrency) || add_num(o, "tok_per_s_a", L->tok_per_s_a) ||
        add_num(o, "tok_per_s_b", L->tok_per_s_b) || add_num(o, "ratio", L->ratio) ||
        add_pair(o, "ratio_ci", L->ratio_ci) || !cJSON_AddBoolToObject(o, "steady", L->steady))
        return -1;
    if (add_num(o, "n_req_a", (double)L->n_req_a) || add_num(o, "n_req_b", (double)L->n_req_b) ||
        add_num(o, "n_units_a", (double)L->n_units_a) || add_num(o, "n_units_b", (double)L->n_units_b))
        return -1;
    if (!cJSON_AddStringToObject(o, "mode", L->open_loop ? "open" : "closed") ||
        add_num(o, "rate_per_s", L->rate_per_s) || !cJSON_AddStringToObject(o, "ratio_method", L->ratio_method) ||
        add_num(o, "n_pairs", (double)L->n_pairs) || add_num(o, "df", L->df) ||
        add_num(o, "model_ratio", L->model_ratio))
        return -1;
    cJSON *pr = cJSON_AddArrayToObject(o, "pair_ratio");
    if (!pr)
        return -1;
    for (size_t q = 0; q < L->n_pairs; q++)
        if (ll_json_push_num(pr, L->pair_ratio[q]))
            return -1;
    return 0;
}

/* The level's latency distributions, A and B, in compare's spelling. */
static int level_latency_json(cJSON *o, const fit_compare_level *L)
{
    const char *k[] = {"ttft_a", "ttft_b", "ttfa_a", "ttfa_b", "itl_a", "itl_b"};
    const fit_dist *d[] = {&L->lat_a.ttft, &L->lat_b.ttft, &L->lat_a.ttfa, &L->lat_b.ttfa,
                           &L->lat_a.itl, &L->lat_b.itl};
    for (int j = 0; j < 6; j++)
        if (rpt_json_dist(o, k[j], d[j], rpt_dist_in_compare))
            return -1;
    return 0;
}

/* "terms": both runs' shared richer model, every term B/A (null when none). */
static int model_terms_json(cJSON *root, const fit_compare *c)
{
    if (!c->n_terms)
        return cJSON_AddNullToObject(root, "terms") ? 0 : -1;
    cJSON *o = cJSON_AddObjectToObject(root, "terms"), *t = o ? cJSON_AddArrayToObject(o, "terms") : NULL;
    if (!t || !cJSON_AddStringToObject(o, "model", fit_model_name(c->terms_model)))
        return -1;
    for (size_t j = 0; j < c->n_terms; j++) {
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(t, x) || !cJSON_AddStringToObject(x, "term", fit_term_name(c->term[j])) ||
            (c->term[j] == FIT_TERM_HINGE && add_num(x, "knee", c->term_knee[j])) ||
            add_num(x, "ratio", c->term_ratio[j]) || add_pair(x, "ratio_ci", c->term_ratio_ci[j]))
            return -1;
    }
    return 0;
}

/* The two laws, the slope ratio and the verdict. */
static int compare_head_json(cJSON *root, const fit_compare *c)
{
    if (rpt_json_law(root, "law_a", &c->law_a, NULL, c->asym_a_tok_per_s, rpt_law_in_compare) ||
        rpt_json_law(root, "law_b", &c->law_b, NULL, c->asym_b_tok_per_s, rpt_law_in_compare))
        return -1;
    if (add_num(root, "slope_ratio", c->slope_ratio) || add_num(root, "slope_a_ms", c->slope_a_ms) ||
        add_num(root, "slope_b_ms", c->slope_b_ms) ||
        !cJSON_AddStringToObject(root, "slope_method", c->slope_method) ||
        add_pair(root, "slope_ratio_ci", c->slope_ratio_ci))
        return -1;
    if (add_num(root, "ctx_b_ratio", c->ctx_b_ratio) || add_pair(root, "ctx_b_ratio_ci", c->ctx_b_ratio_ci) ||
        add_num(root, "ctx_c_ratio", c->ctx_c_ratio) || add_pair(root, "ctx_c_ratio_ci", c->ctx_c_ratio_ci))
        return -1;
    if (model_terms_json(root, c))
        return -1;
    if (add_num(root, "ci", c->ci) || add_num(root, "n_resamples", c->n_resamples) ||
        !cJSON_AddBoolToObject(root, "paired", c->paired) || !cJSON_AddStringToObject(root, "verdict", c->verdict))
        return -1;
    return 0;
}

cJSON *rpt_compare_to_json(const fit_compare *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *levels = root ? cJSON_AddArrayToObject(root, "levels") : NULL;
    if (!levels)
        goto fail;
    for (size_t i = 0; i < c->n_levels; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(levels, o)) {
            cJSON_Delete(o);
            goto fail;
        }
        if (level_figures_json(o, &c->levels[i]) || level_latency_json(o, &c->levels[i]))
            goto fail;
    }
    if (compare_head_json(root, c))
        goto fail;
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}
