/* fit_json.h: fit's figures as JSON (fit/json.c, their only writer). Where
 * files spell one shape differently, the style names the spelling (each
 * kept, so no file's keys change): FIT_JSON_RUN fit --json,
 * summary.json, the report's data; FIT_JSON_SUMMARY a summary.json level;
 * FIT_JSON_COMPARE compare --json ({n, mean_ms, p50_ms, ...}, a law with its
 * asymptote); FIT_JSON_PLAN plan --json's law; FIT_JSON_CHART the report
 * page's law. NAN becomes null. Adders: key = the object into parent, 0 or
 * LL_ENOMEM. Builders: the caller frees with cJSON_Delete; NULL: no memory. */
#ifndef LOADLAW_FIT_JSON_H
#define LOADLAW_FIT_JSON_H

#include <cjson/cJSON.h>

#include "fit.h"

typedef enum fit_json_style {
    FIT_JSON_RUN, FIT_JSON_SUMMARY, FIT_JSON_COMPARE, FIT_JSON_PLAN, FIT_JSON_CHART
} fit_json_style;

/* The fit --json object. */
cJSON *fit_result_to_json(const fit_result *r);
/* model: the chosen model's name (FIT_JSON_RUN; NULL: left out);
 * asym_tok_per_s: FIT_JSON_COMPARE's asymptote. */
int fit_json_law(cJSON *parent, const char *key, const fit_law *L, const char *model, double asym_tok_per_s,
                 fit_json_style style);
/* "law", "asymptote_tok_per_s", "n_half": fit --json's and summary.json's headline. */
int fit_json_headline(cJSON *o, const fit_result *r);
/* One level: FIT_JSON_RUN, fit --json's; FIT_JSON_SUMMARY, summary.json's
 * (with what was planned: null when planned is NULL). */
cJSON *fit_json_level(const fit_level *L, const fit_level_info *planned, fit_json_style style);
/* A level's figures into o (summary.json's levels, the report's "figures"). */
int fit_json_level_figures(cJSON *o, const fit_level *L);
/* "turns":[...] into o; nothing without sessions. */
int fit_json_turns(cJSON *o, const fit_result *r);

#endif
