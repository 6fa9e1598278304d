/* fit_json.c: `loadlaw fit --json`, a fit_result as one JSON object: the
 * headline law (also summary.json's), every level (level_json.c), the other
 * laws beside the headline, the model check, what was left out and why, the
 * notes and the per-turn figures. Laws go through json_shapes.c in the run's
 * spelling; every number through ll_json_add_num (the one NaN -> null rule);
 * every cJSON_Add* is checked (LL_ENOMEM). */
#include "json_internal.h"
#include "html_internal.h"

#include <math.h>
#include <string.h>

#define ADD_OK(x) ((x) != NULL)

/* A level's C, or null for none (-1). */
static int add_level_c(cJSON *o, const char *k, const fit_result *r, int idx)
{
    return ll_json_add_num(o, k, idx >= 0 && (size_t)idx < r->n_levels ? r->levels[idx].concurrency : NAN);
}

/* "headline": fit/headline.c's figures and the words every printer leads
 * with (reports/headline.c). */
int rpt_json_add_headline(cJSON *parent, const char *key, const fit_result *r)
{
    const fit_headline *h = &r->headline;
    char text[1024];
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return LL_ENOMEM;
    rpt_headline_text(r, text, sizeof text);
    LL_TRY(rpt_json_str(o, "text", r->law.ok ? text : r->no_law));
    rpt_heldout_text(r, text, sizeof text);
    LL_TRY(rpt_json_str(o, "heldout_text", text));
    LL_TRY(rpt_json_str(o, "model", fit_model_name(h->model)));
    LL_TRY(rpt_json_bool(o, "fits_every_level", h->fits));
    LL_TRY(ll_json_add_num(o, "level_fit_bound", FIT_MODEL_LEVEL_FIT));
    LL_TRY(add_level_c(o, "worst_fit_c", r, h->worst_level));
    LL_TRY(ll_json_add_num(o, "worst_fit_rel", h->worst_level >= 0 ? r->levels[h->worst_level].model_error_rel : NAN));
    LL_TRY(add_level_c(o, "best_c", r, h->best_level));
    LL_TRY(ll_json_add_num(o, "best_tok_per_s", h->best_level >= 0 ? r->levels[h->best_level].steady_tok_per_s : NAN));
    LL_TRY(ll_json_add_num(o, "slope_ms", h->slope_ms));
    LL_TRY(ll_json_add_pair(o, "slope_ci_ms", h->slope_ci_ms));
    LL_TRY(ll_json_add_num(o, "ceiling_tok_per_s", h->ceiling_tok_per_s));
    LL_TRY(rpt_json_bool(o, "ceiling_extrapolated", isfinite(h->ceiling_tok_per_s)));
    if (!(h->no_ceiling[0] ? cJSON_AddStringToObject(o, "no_ceiling", h->no_ceiling)
                           : cJSON_AddNullToObject(o, "no_ceiling")))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "context_per_req_tok", r->context_per_req_tok));
    LL_TRY(ll_json_add_num(o, "max_c", h->max_c > 0 ? h->max_c : NAN));
    LL_TRY(ll_json_add_num(o, "at_max_c_tok_per_s", h->at_max_c_tok_per_s));
    LL_TRY(ll_json_add_num(o, "heldout_levels", (double)h->n_heldout));
    LL_TRY(add_level_c(o, "heldout_worst_c", r, h->heldout_worst_level));
    LL_TRY(ll_json_add_num(o, "heldout_worst_rel", h->heldout_worst_rel));
    LL_TRY(ll_json_add_num(o, "heldout_bound", FIT_HELDOUT_BOUND));
    LL_TRY(rpt_json_bool(o, "heldout_warn", h->heldout_warn));
    if (!(r->model.no_heldout[0] ? cJSON_AddStringToObject(o, "no_heldout", r->model.no_heldout)
                                 : cJSON_AddNullToObject(o, "no_heldout")))
        return LL_ENOMEM;
    return 0;
fail:
    return rc;
}

int rpt_json_headline(cJSON *o, const fit_result *r)
{
    int rc;
    LL_TRY(rpt_json_add_headline(o, "headline", r));
    LL_TRY(rpt_json_law(o, "law", &r->law, fit_model_name(r->model.best), NAN, rpt_law_in_run));
    LL_TRY(ll_json_add_num(o, "asymptote_tok_per_s", r->asymptote_tok_per_s));
    LL_TRY(ll_json_add_num(o, "n_half", r->n_half));
    return 0;
fail:
    return rc;
}

/* "turns": fit/turns.c's figures per level and turn. */
int rpt_json_turns(cJSON *o, const fit_result *r)
{
    if (!r->n_turns)
        return 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "turns");
    if (!arr)
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_turns; i++) {
        const fit_turn *t = &r->turns[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return LL_ENOMEM;
        }
        if (ll_json_add_num(e, "level", t->level) || ll_json_add_num(e, "concurrency", t->concurrency) ||
            ll_json_add_num(e, "turn", t->turn) || ll_json_add_num(e, "n", (double)t->n) ||
            ll_json_add_num(e, "ttft_p50_ms", t->ttft_p50_ms) || ll_json_add_num(e, "ttft_p90_ms", t->ttft_p90_ms) ||
            ll_json_add_num(e, "tpot_p50_ms", t->tpot_p50_ms) ||
            ll_json_add_num(e, "prompt_tok_mean", t->prompt_tok_mean) ||
            ll_json_add_num(e, "cache_share", t->cache_share))
            return LL_ENOMEM;
    }
    return 0;
}

/* "chosen": the chosen model's terms ({"term","knee"?,"coef","se","ci"}),
 * HC3 errors; null for the line (the law is its fit). */
static int add_chosen(cJSON *o, const fit_model_check *m)
{
    int rc;
    const fit_model_fit *f = &m->chosen;
    if (!m->done || m->best == FIT_MODEL_LINEAR || !f->p)
        return cJSON_AddNullToObject(o, "chosen") ? 0 : LL_ENOMEM;
    cJSON *c = cJSON_AddObjectToObject(o, "chosen"), *terms = c ? cJSON_AddArrayToObject(c, "terms") : NULL;
    if (!terms || rpt_json_str(c, "model", fit_model_name(m->best)))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(c, "bic", f->bic));
    LL_TRY(ll_json_add_num(c, "effect", f->effect));
    LL_TRY(ll_json_add_num(c, "worst_n", f->worst_n));
    for (size_t j = 0; j < f->p; j++) {
        cJSON *t = cJSON_CreateObject();
        if (!t || !cJSON_AddItemToArray(terms, t) || rpt_json_str(t, "term", fit_term_name(f->term[j])))
            return LL_ENOMEM;
        if (f->term[j] == FIT_TERM_HINGE)
            LL_TRY(ll_json_add_num(t, "knee", f->knee[j]));
        double ci[2] = {f->coef[j] - 1.96 * f->se[j], f->coef[j] + 1.96 * f->se[j]};
        LL_TRY(ll_json_add_num(t, "coef", f->coef[j]));
        LL_TRY(ll_json_add_num(t, "se", f->se[j]));
        LL_TRY(ll_json_add_pair(t, "ci", ci));
    }
    return 0;
fail:
    return rc;
}

static int add_model_check(cJSON *parent, const fit_model_check *m)
{
    int rc;
    cJSON *o = cJSON_AddObjectToObject(parent, "model_check");
    if (!o || rpt_json_bool(o, "done", m->done) || rpt_json_str(o, "best", fit_model_name(m->best)))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(o, "bic_linear", m->bic_linear));
    LL_TRY(ll_json_add_num(o, "bic_quadratic", m->bic_quadratic));
    LL_TRY(ll_json_add_num(o, "bic_piecewise", m->bic_piecewise));
    LL_TRY(ll_json_add_num(o, "quad_c_ms", m->quad_c_ms));
    LL_TRY(ll_json_add_num(o, "knee_n", m->knee_n));
    LL_TRY(ll_json_add_num(o, "slope_before_ms", m->slope_before_ms));
    LL_TRY(ll_json_add_num(o, "slope_after_ms", m->slope_after_ms));
    LL_TRY(ll_json_add_num(o, "effect_quadratic", m->effect_quadratic));
    LL_TRY(ll_json_add_num(o, "effect_piecewise", m->effect_piecewise));
    LL_TRY(ll_json_add_num(o, "bic_context", m->bic_context));
    LL_TRY(ll_json_add_num(o, "ctx_a_ms", m->ctx_a_ms));
    LL_TRY(ll_json_add_num(o, "ctx_b_ms", m->ctx_b_ms));
    LL_TRY(ll_json_add_num(o, "ctx_c_ms_per_ktok", m->ctx_c_ms));
    LL_TRY(ll_json_add_pair(o, "ctx_c_ci_ms_per_ktok", m->ctx_c_ci_ms));
    LL_TRY(ll_json_add_num(o, "kn_corr", m->kn_corr));
    LL_TRY(ll_json_add_num(o, "effect_context", m->effect_context));
    LL_TRY(ll_json_add_num(o, "bic_buckets", m->bic_buckets));
    LL_TRY(ll_json_add_num(o, "bkt_a_ms", m->bkt_a_ms));
    LL_TRY(ll_json_add_num(o, "bkt_b_ms", m->bkt_b_ms));
    LL_TRY(ll_json_add_num(o, "effect_buckets", m->effect_buckets));
    LL_TRY(ll_json_add_num(o, "n_trimmed", (double)m->n_trimmed));
    LL_TRY(ll_json_add_num(o, "bic_two_knees", m->knees2.p ? m->knees2.bic : NAN));
    LL_TRY(ll_json_add_num(o, "bic_piecewise_context", m->knee_context.p ? m->knee_context.bic : NAN));
    LL_TRY(ll_json_add_num(o, "bic_buckets_context", m->buckets_context.p ? m->buckets_context.bic : NAN));
    LL_TRY(ll_json_add_num(o, "alone_n", m->alone_n));
    LL_TRY(rpt_json_bool(o, "context_negative", m->context_negative));
    LL_TRY(add_chosen(o, m));
    return rpt_json_str(o, "verdict", m->verdict);
fail:
    return rc;
}

/* "excluded": what was left out, and why (the counts behind the notes).
 * "requests" is the number of request records read (kept for readers of
 * schema 1 output); the excluded ones are the counts beside it. */
static int add_excluded(cJSON *parent, const fit_result *r)
{
    int rc;
    cJSON *ex = cJSON_AddObjectToObject(parent, "excluded");
    if (!ex)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(ex, "requests", (double)r->n_requests));
    LL_TRY(ll_json_add_num(ex, "failed", (double)r->n_failed));
    LL_TRY(ll_json_add_num(ex, "warmup", (double)r->n_warmup));
    LL_TRY(ll_json_add_num(ex, "ok_without_tokens", (double)r->n_no_tokens));
    LL_TRY(ll_json_add_num(ex, "empty_chunks", (double)r->n_empty_chunks));
    LL_TRY(ll_json_add_num(ex, "truncated_lines", (double)r->n_truncated_lines));
    LL_TRY(ll_json_add_num(ex, "bad_requests", (double)r->n_bad_requests));
    LL_TRY(ll_json_add_num(ex, "rejected_records", (double)r->n_rejected_records));
    LL_TRY(ll_json_add_num(ex, "out_of_range_values", (double)r->n_out_of_range));
    LL_TRY(ll_json_add_num(ex, "clamped_times", (double)r->n_clamped));
    LL_TRY(ll_json_add_num(ex, "law_outliers", (double)r->n_trimmed));
    return 0;
fail:
    return rc;
}

static int add_levels(cJSON *o, const fit_result *r)
{
    cJSON *lv = cJSON_AddArrayToObject(o, "levels"), *it = NULL;
    if (!lv)
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (!(it = rpt_json_fit_level(&r->levels[i])) || !cJSON_AddItemToArray(lv, it)) {
            cJSON_Delete(it);
            return LL_ENOMEM;
        }
    return 0;
}

/* A law, or null without one. */
static int add_law_or_null(cJSON *o, const char *key, const fit_law *L)
{
    if (L->ok)
        return rpt_json_law(o, key, L, NULL, NAN, rpt_law_in_run);
    return cJSON_AddNullToObject(o, key) ? 0 : LL_ENOMEM;
}

/* The other laws beside the headline: OLS, naive, against the other N, the
 * engine's own steps (fit/analyze_law.c "The law against the server's N"). */
static int add_other_laws(cJSON *o, const fit_result *r)
{
    int rc;
    LL_TRY(rpt_json_law(o, "ols", &r->ols, NULL, NAN, rpt_law_in_run));
    LL_TRY(rpt_json_law(o, "naive", &r->naive, NULL, NAN, rpt_law_in_run));
    LL_TRY(rpt_json_str(o, "law_n", r->law_n ? r->law_n : "client"));
    LL_TRY(add_law_or_null(o, "law_other", &r->law_other));
    return add_law_or_null(o, "engine_law", &r->engine);
fail:
    return rc;
}

static int add_truth(cJSON *o, const fit_result *r)
{
    int rc;
    if (!r->has_truth)
        return 0;
    cJSON *t = cJSON_AddObjectToObject(o, "truth");
    if (!t)
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(t, "a_ms", r->truth_a_ms));
    LL_TRY(ll_json_add_num(t, "b_ms", r->truth_b_ms));
    LL_TRY(ll_json_add_num(t, "time_scale", r->time_scale));
    return rpt_json_str(t, "engine_law", r->engine_law_spec);
fail:
    return rc;
}

static int add_notes(cJSON *o, const fit_result *r)
{
    cJSON *notes = cJSON_AddArrayToObject(o, "notes"), *it = NULL;
    if (!notes)
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_notes; i++)
        if (!(it = cJSON_CreateString(r->notes[i])) || !cJSON_AddItemToArray(notes, it)) {
            cJSON_Delete(it);
            return LL_ENOMEM;
        }
    return 0;
}

cJSON *rpt_fit_to_json(const fit_result *r)
{
    int rc;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    LL_TRY(rpt_json_headline(o, r));
    LL_TRY(rpt_json_bool(o, "law_client_bound", r->law_client_bound));
    if (!ADD_OK(r->law.ok ? cJSON_AddNullToObject(o, "no_law") : cJSON_AddStringToObject(o, "no_law", r->no_law)))
        goto fail;
    LL_TRY(add_levels(o, r));
    LL_TRY(add_other_laws(o, r));
    LL_TRY(add_truth(o, r));
    LL_TRY(add_model_check(o, &r->model));
    LL_TRY(add_excluded(o, r));
    LL_TRY(add_notes(o, r));
    LL_TRY(rpt_json_turns(o, r));
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}
