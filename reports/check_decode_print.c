/* check_decode_print.c: decode against prefill logprobs (fit/check_decode.c)
 * as `loadlaw check-decode` shows it: per level and over all, requests,
 * positions compared, mean and max |delta|, the share over the bound, the
 * share prefill ranks first and the share that disagree (the gate);
 * --json's object, and the table. */
#include <math.h>
#include <stdio.h>

#include "json_internal.h"

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *stats_json(const fit_cd_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok = 1;
    if (s->level >= 0)
        ok = cJSON_AddNumberToObject(o, "level", s->level) && cJSON_AddNumberToObject(o, "concurrency", s->concurrency);
    ok = ok && cJSON_AddNumberToObject(o, "requests", (double)s->n_req) &&
         cJSON_AddNumberToObject(o, "positions", (double)s->n_pos);
    ok = ok && cJSON_AddItemToObject(o, "mean_abs_delta", num_or_null(s->mean_abs));
    ok = ok && cJSON_AddItemToObject(o, "max_abs_delta", num_or_null(s->n_pos ? s->max_abs : NAN));
    ok = ok && cJSON_AddNumberToObject(o, "over", (double)s->n_over);
    ok = ok && cJSON_AddItemToObject(o, "share_over", num_or_null(s->share_over));
    ok = ok && cJSON_AddItemToObject(o, "share_rank1", num_or_null(s->share_rank1));
    ok = ok && cJSON_AddNumberToObject(o, "rank_misses", (double)s->n_rank_miss);
    ok = ok && cJSON_AddNumberToObject(o, "disagree", (double)s->n_disagree);
    ok = ok && cJSON_AddItemToObject(o, "share_disagree", num_or_null(s->share_disagree));
    if (ok && s->n_pos) {
        cJSON *w = cJSON_AddObjectToObject(o, "worst");
        ok = w && cJSON_AddStringToObject(w, "key", s->worst_key) &&
             cJSON_AddNumberToObject(w, "position", (double)s->worst_pos) &&
             cJSON_AddNumberToObject(w, "decode_lp", s->worst_decode) &&
             cJSON_AddNumberToObject(w, "prefill_lp", s->worst_prefill);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *rpt_cd_to_json(const fit_check_decode *c)
{
    cJSON *o = cJSON_CreateObject(), *lv = cJSON_CreateArray();
    cJSON *all = stats_json(&c->all);
    int ok = o && lv && all && cJSON_AddNumberToObject(o, "tolerance", c->tolerance) &&
             cJSON_AddStringToObject(o, "dtype", fit_cd_dtype_name(c->dtype)) &&
             cJSON_AddNumberToObject(o, "rounding", c->rel) &&
             cJSON_AddNumberToObject(o, "max_share_over", c->max_over) &&
             cJSON_AddBoolToObject(o, "passed", fit_cd_passed(c));
    for (size_t i = 0; ok && i < c->n_levels; i++) {
        cJSON *s = stats_json(&c->levels[i]);
        ok = s && cJSON_AddItemToArray(lv, s);
        if (!ok)
            cJSON_Delete(s);
    }
    if (ok && cJSON_AddItemToObject(o, "levels", lv)) {
        lv = NULL;
        if (cJSON_AddItemToObject(o, "all", all))
            return o;
    }
    cJSON_Delete(lv);
    cJSON_Delete(all);
    cJSON_Delete(o);
    return NULL;
}

static void print_row(FILE *f, const char *name, const fit_cd_stats *s)
{
    if (!s->n_pos) {
        fprintf(f, "%-8s %8zu %9zu %12s %12s %10s %9s %9s\n", name, s->n_req, s->n_pos, "-", "-", "-", "-", "-");
        return;
    }
    char r1[16] = "-";
    if (s->n_ranked)
        snprintf(r1, sizeof r1, "%.1f%%", 100.0 * (double)s->n_rank1 / (double)s->n_ranked);
    fprintf(f, "%-8s %8zu %9zu %12.3g %12.3g %9.2f%% %9s %8.2f%%\n", name, s->n_req, s->n_pos, s->mean_abs,
            s->max_abs, 100.0 * s->share_over, r1, 100.0 * s->share_disagree);
}

void rpt_cd_print(FILE *f, const fit_check_decode *c)
{
    fprintf(f, "%-8s %8s %9s %12s %12s %10s %9s %9s\n", "level", "requests", "positions", "mean |d| nat",
            "max |d| nat", "over bound", "prefill#1", "disagree");
    for (size_t i = 0; i < c->n_levels; i++) {
        char name[24];
        snprintf(name, sizeof name, "C=%d", c->levels[i].concurrency);
        print_row(f, name, &c->levels[i]);
    }
    print_row(f, "all", &c->all);
    if (c->all.n_pos)
        fprintf(f, "worst: %s position %zu: decode %.4f, prefill %.4f\n", c->all.worst_key, c->all.worst_pos,
                c->all.worst_decode, c->all.worst_prefill);
}
