/* load_run_line.c: the run line as JSON again (fit_run_info.run_json), for
 * the outputs that quote it, from what the records reader gave: the keys of
 * records.h's ll_rec_run, rebuilt rather than kept as read. */
#include "load_internal.h"

static int add_str(cJSON *o, const char *k, const char *v)
{
    return cJSON_AddStringToObject(o, k, v) ? 0 : LL_ENOMEM;
}

static int add_str_or_null(cJSON *o, const char *k, const char *v)
{
    return (v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k)) ? 0 : LL_ENOMEM;
}

/* Attach a built item (NULL: it could not be built); on failure it is freed. */
static int add_item(cJSON *o, const char *k, cJSON *item)
{
    if (item && cJSON_AddItemToObject(o, k, item))
        return 0;
    cJSON_Delete(item);
    return LL_ENOMEM;
}

static int run_line_fields(cJSON *o, const ll_rec_run *run)
{
    cJSON *tg, *law;
    int rc;
    LL_TRY(add_str(o, "type", LL_REC_RUN));
    LL_TRY(ll_json_add_num(o, "schema", run->schema));
    LL_TRY(add_str(o, "version", run->version ? run->version : ""));
    LL_TRY(add_str(o, "host", run->host ? run->host : ""));
    LL_TRY(ll_json_add_num(o, "ranks", run->ranks));
    LL_TRY(ll_json_add_num(o, "threads", run->threads));
    LL_TRY(ll_json_add_num(o, "epoch_wall_ns", (double)run->epoch_wall_ns));
    LL_TRY((tg = cJSON_AddObjectToObject(o, "target")) ? 0 : LL_ENOMEM);
    LL_TRY(add_str(tg, "url", run->url ? run->url : ""));
    LL_TRY(add_str(tg, "model", run->model ? run->model : ""));
    LL_TRY(add_str(tg, "endpoint", run->endpoint ? run->endpoint : ""));
    LL_TRY(cJSON_AddBoolToObject(tg, "bundled", run->bundled) ? 0 : LL_ENOMEM);
    LL_TRY(add_str_or_null(o, "engine", run->engine));
    LL_TRY(add_str_or_null(o, "backend", run->backend));
    if (run->law.present) {
        LL_TRY((law = cJSON_AddObjectToObject(o, "engine_law")) ? 0 : LL_ENOMEM);
        LL_TRY(ll_json_add_num(law, "a_ms", run->law.a_ms));
        LL_TRY(ll_json_add_num(law, "b_ms", run->law.b_ms));
        LL_TRY(ll_json_add_num(law, "c_ms_per_ktok", run->law.c_ms_per_ktok));
        LL_TRY(ll_json_add_num(law, "p_ms_per_tok", run->law.p_ms_per_tok));
        LL_TRY(ll_json_add_num(law, "time_scale", run->law.time_scale));
    }
    LL_TRY(add_str_or_null(o, "scenario", run->scenario));
    if (run->config)
        LL_TRY(add_item(o, "config", cJSON_Duplicate(run->config, 1)));
    return 0;
fail:
    return rc;
}

char *fit_load_run_line_json(const ll_rec_run *run)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;
    if (o && run_line_fields(o, run) == 0)
        text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
