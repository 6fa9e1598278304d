/* json_shapes.c: a law (fit_model.h fit_law) and a latency distribution
 * (fit.h fit_dist) as JSON: one function each that knows the fields, and per
 * document a table of the keys it spells them with.
 *
 * The spellings are kept for compatibility: each file has had its keys since
 * it was first written, and readers (scripts, the report page's script, CI
 * gates) look them up by name, so a document's keys never change. fit --json
 * and summary.json hold the full law; compare --json a subset with the
 * asymptote beside it; plan --json the parameters and the covariance its
 * intervals need; the report page the short names its script reads.
 * docs/records.md "JSON spellings" lists them (tests/reports/test_spellings.c
 * checks that it does). Every number goes through ll_json_add_num (the one
 * NaN -> null rule). */
#include "json_internal.h"

#include <math.h>
#include <stddef.h>

/* ---- a law ------------------------------------------------------------------- */

typedef enum law_field {
    LAW_OK, LAW_A, LAW_B, LAW_A_CI, LAW_B_CI, LAW_A_SE, LAW_B_SE, LAW_COV_AB, LAW_T_CRIT, LAW_R2, LAW_RESID_SD,
    LAW_N_POINTS, LAW_N_TRIMMED, LAW_N_SAMPLES, LAW_N_DISTINCT, LAW_METHOD, LAW_NOTE,
    LAW_MODEL,                /* the chosen model's name, beside the line (not a field of fit_law) */
    LAW_ASYMPTOTE,            /* 1000 / b, where the document wants it inside the law */
} law_field;

const rpt_law_key rpt_law_in_run[] = {
    {LAW_A, "a_ms"}, {LAW_B, "b_ms"}, {LAW_A_CI, "a_ci_ms"}, {LAW_B_CI, "b_ci_ms"}, {LAW_R2, "r2"},
    {LAW_N_SAMPLES, "n_samples"}, {LAW_MODEL, "model"}, {LAW_METHOD, "method"}, {LAW_OK, "ok"},
    {LAW_NOTE, "note"}, {LAW_A_SE, "a_se_ms"}, {LAW_B_SE, "b_se_ms"}, {LAW_COV_AB, "cov_ab_ms2"},
    {LAW_T_CRIT, "t_crit"}, {LAW_RESID_SD, "resid_sd_ms"}, {LAW_N_POINTS, "n_points"},
    {LAW_N_TRIMMED, "n_trimmed"}, {LAW_N_DISTINCT, "n_distinct_n"}, {0, NULL},
};
const rpt_law_key rpt_law_in_compare[] = {
    {LAW_OK, "ok"}, {LAW_A, "a_ms"}, {LAW_B, "b_ms"}, {LAW_A_CI, "a_ci_ms"}, {LAW_B_CI, "b_ci_ms"},
    {LAW_R2, "r2"}, {LAW_ASYMPTOTE, "asymptote_tok_per_s"}, {0, NULL},
};
const rpt_law_key rpt_law_in_plan[] = {
    {LAW_A, "a_ms"}, {LAW_B, "b_ms"}, {LAW_A_SE, "a_se_ms"}, {LAW_B_SE, "b_se_ms"},
    {LAW_COV_AB, "cov_ab_ms2"}, {LAW_T_CRIT, "t_crit"}, {0, NULL},
};
const rpt_law_key rpt_law_in_page[] = {
    {LAW_OK, "ok"}, {LAW_A, "a"}, {LAW_B, "b"}, {LAW_A_CI, "a_ci"}, {LAW_B_CI, "b_ci"},
    {LAW_COV_AB, "cov_ab"}, {LAW_T_CRIT, "t_crit"}, {0, NULL},
};

/* One field of a law under the spelling's key. */
static int law_put(cJSON *o, const rpt_law_key *k, const fit_law *L, const char *model, double asym)
{
    switch ((law_field)k->field) {
    case LAW_OK: return rpt_json_bool(o, k->key, L->ok);
    case LAW_A: return ll_json_add_num(o, k->key, L->a_ms);
    case LAW_B: return ll_json_add_num(o, k->key, L->b_ms);
    case LAW_A_CI: return ll_json_add_pair(o, k->key, L->a_ci_ms);
    case LAW_B_CI: return ll_json_add_pair(o, k->key, L->b_ci_ms);
    case LAW_A_SE: return ll_json_add_num(o, k->key, L->a_se_ms);
    case LAW_B_SE: return ll_json_add_num(o, k->key, L->b_se_ms);
    case LAW_COV_AB: return ll_json_add_num(o, k->key, L->cov_ab_ms2);
    case LAW_T_CRIT: return ll_json_add_num(o, k->key, L->t_crit);
    case LAW_R2: return ll_json_add_num(o, k->key, L->r2);
    case LAW_RESID_SD: return ll_json_add_num(o, k->key, L->resid_sd_ms);
    case LAW_N_POINTS: return ll_json_add_num(o, k->key, (double)L->n_points);
    case LAW_N_TRIMMED: return ll_json_add_num(o, k->key, (double)L->n_trimmed);
    case LAW_N_SAMPLES: return ll_json_add_num(o, k->key, (double)L->n_samples);
    case LAW_N_DISTINCT: return ll_json_add_num(o, k->key, (double)L->n_distinct);
    case LAW_METHOD: return rpt_json_str(o, k->key, L->method ? L->method : "none");
    case LAW_NOTE: return rpt_json_str(o, k->key, L->note);
    case LAW_MODEL: return model ? rpt_json_str(o, k->key, model) : 0;
    case LAW_ASYMPTOTE: return ll_json_add_num(o, k->key, asym);
    }
    return LL_EINVAL;
}

int rpt_json_law(cJSON *parent, const char *key, const fit_law *L, const char *model, double asym_tok_per_s,
                 const rpt_law_key *spelling)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    for (const rpt_law_key *k = spelling; k->key; k++) {
        int rc = law_put(o, k, L, model, asym_tok_per_s);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- a latency distribution ---------------------------------------------- */

typedef enum dist_field { DIST_N, DIST_MEAN, DIST_P50, DIST_P90, DIST_P99, DIST_MAX } dist_field;

/* the run's files: the unit is in the object's name ("ttft_ms") */
const rpt_dist_key rpt_dist_in_run[] = {
    {DIST_N, "n"}, {DIST_P50, "p50"}, {DIST_P90, "p90"}, {DIST_P99, "p99"}, {DIST_MEAN, "mean"},
    {DIST_MAX, "max"}, {0, NULL},
};
/* compare: its objects sit beside figures that are not latencies, so each
 * key carries the unit */
const rpt_dist_key rpt_dist_in_compare[] = {
    {DIST_N, "n"}, {DIST_MEAN, "mean_ms"}, {DIST_P50, "p50_ms"}, {DIST_P90, "p90_ms"}, {DIST_P99, "p99_ms"},
    {DIST_MAX, "max_ms"}, {0, NULL},
};

static double dist_value(const fit_dist *d, dist_field f)
{
    switch (f) {
    case DIST_N: return (double)d->n;
    case DIST_MEAN: return d->mean_ms;
    case DIST_P50: return d->p50_ms;
    case DIST_P90: return d->p90_ms;
    case DIST_P99: return d->p99_ms;
    case DIST_MAX: return d->max_ms;
    }
    return NAN;
}

int rpt_json_dist(cJSON *parent, const char *key, const fit_dist *d, const rpt_dist_key *spelling)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    for (const rpt_dist_key *k = spelling; k->key; k++)
        if (ll_json_add_num(o, k->key, dist_value(d, (dist_field)k->field)))
            return LL_ENOMEM;
    return 0;
}
