/* json_internal.h (internal to reports/): the JSON shapes reports' documents
 * share. A law and a latency distribution are each written by one function
 * that knows their fields (json_shapes.c), in the spelling of the document
 * they go into: the rpt_*_in_* tables, the keys each file has always had
 * (docs/records.md "JSON spellings"). A level's figures, the headline law and
 * the turns: fit_json.c and level_json.c. Adders: key = the object into
 * parent (or the keys into o), 0 or LL_ENOMEM; builders: the caller frees
 * with cJSON_Delete, NULL on no memory. NAN becomes null. */
#ifndef LOADLAW_REPORTS_JSON_INTERNAL_H
#define LOADLAW_REPORTS_JSON_INTERNAL_H

#include <cjson/cJSON.h>

#include "common.h"
#include "report.h"

/* key = a boolean, a string into o: 0 or LL_ENOMEM. */
static inline int rpt_json_bool(cJSON *o, const char *k, int v)
{
    return cJSON_AddBoolToObject(o, k, v) ? 0 : LL_ENOMEM;
}
static inline int rpt_json_str(cJSON *o, const char *k, const char *v)
{
    return cJSON_AddStringToObject(o, k, v) ? 0 : LL_ENOMEM;
}

/* A document's keys for a law's or a distribution's fields, in the order it
 * writes them, ending with {0, NULL}; field: json_shapes.c's enums. */
typedef struct rpt_law_key { int field; const char *key; } rpt_law_key;
typedef struct rpt_dist_key { int field; const char *key; } rpt_dist_key;
/* fit --json and summary.json: every field of the law (the full shape). */
extern const rpt_law_key rpt_law_in_run[];
/* compare --json (with the asymptote), plan --json, the report page's data. */
extern const rpt_law_key rpt_law_in_compare[], rpt_law_in_plan[], rpt_law_in_page[];
/* the run's files ({n, p50, ...}), compare --json ({n, mean_ms, ...}) */
extern const rpt_dist_key rpt_dist_in_run[], rpt_dist_in_compare[];

/* model: the chosen model's name, where the spelling has it (NULL: left
 * out); asym_tok_per_s: the asymptote, where the spelling has it. */
int rpt_json_law(cJSON *parent, const char *key, const fit_law *L, const char *model, double asym_tok_per_s,
                 const rpt_law_key *spelling);
int rpt_json_dist(cJSON *parent, const char *key, const fit_dist *d, const rpt_dist_key *spelling);

/* "law", "asymptote_tok_per_s", "n_half": fit --json's and summary.json's
 * headline; "turns":[...] (nothing without sessions). fit_json.c. */
int rpt_json_headline(cJSON *o, const fit_result *r);
int rpt_json_turns(cJSON *o, const fit_result *r);

/* level_json.c: a level's figures into o (summary.json's levels, the report's
 * "figures"); fit --json's level; summary.json's level, with what was planned
 * (planned NULL: nulls). */
int rpt_json_level_figures(cJSON *o, const fit_level *L);
cJSON *rpt_json_fit_level(const fit_level *L);
cJSON *rpt_json_summary_level(const fit_level *L, const fit_level_info *planned);

#endif
