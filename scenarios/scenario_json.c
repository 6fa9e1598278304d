/* scenario_json.c: a scenario written back as JSON (scn_to_json) for the run
 * record's "config": the settings the run used, in the keys the loader reads
 * (a run line's config loads back as a scenario). Secrets stay out: the URL,
 * the engine spec and secret-named headers are written redacted. */
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_internal.h"

/* cJSON_Add* results as 0 or LL_ENOMEM, so scn_to_json chains them with LL_TRY. */
static int add_str(cJSON *o, const char *k, const char *v)
{
    return cJSON_AddStringToObject(o, k, v) ? 0 : LL_ENOMEM;
}

static int add_str_or_null(cJSON *o, const char *k, const char *v)
{
    return (v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k)) ? 0 : LL_ENOMEM;
}

static int add_obj(cJSON *o, const char *k, cJSON **out)
{
    return (*out = cJSON_AddObjectToObject(o, k)) ? 0 : LL_ENOMEM;
}

/* Attach a built item to an object (k) or an array (k NULL); NULL means it
 * could not be built. On failure the item is freed. */
static int add_item(cJSON *parent, const char *k, cJSON *item)
{
    if (item && (k ? cJSON_AddItemToObject(parent, k, item) : cJSON_AddItemToArray(parent, item)))
        return 0;
    cJSON_Delete(item);
    return LL_ENOMEM;
}

static int level_fields(cJSON *o, const scn_level *l)
{
    cJSON *p;
    int rc;
    LL_TRY(ll_json_add_num(o, "concurrency", l->concurrency));
    LL_TRY(ll_json_add_num(o, "requests", scn_level_requests(l)));
    LL_TRY(ll_json_add_num(o, "warmup", l->warmup));
    LL_TRY(ll_json_add_num(o, "duration_s", l->duration_s));
    LL_TRY(ll_json_add_num(o, "rate_per_s", l->rate_per_s));
    LL_TRY(add_str(o, "arrival", scn_arrival_names[l->arrival]));
    if (l->profile.enabled) {
        LL_TRY(add_obj(o, "profile", &p));
        LL_TRY(add_str(p, "when", "steady"));
        LL_TRY(ll_json_add_num(p, "num_steps", l->profile.num_steps));
        LL_TRY(add_str(p, "style", l->profile.style == SCN_PROFILE_VLLM ? "vllm" : "sglang"));
    }
fail:
    return rc;
}

static int dist_fields(cJSON *w, const scn_dist *d)
{
    static const char *const dist[] = {"fixed", "uniform", "normal"};
    int rc;
    LL_TRY(add_str(w, "dist", dist[d->kind]));
    LL_TRY(ll_json_add_num(w, "value", d->value));
    LL_TRY(ll_json_add_num(w, "min", d->min));
    LL_TRY(ll_json_add_num(w, "max", d->max));
    LL_TRY(ll_json_add_num(w, "mean", d->mean));
    LL_TRY(ll_json_add_num(w, "stddev", d->stddev));
fail:
    return rc;
}

static cJSON *dist_json(const scn_dist *d)
{
    cJSON *o = cJSON_CreateObject();
    if (o && dist_fields(o, d)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* A header for the run record: its name, and its value only when the name
 * cannot carry a secret (an Authorization or X-Api-Key header's value would
 * otherwise land in records.jsonl, which users share). */
static const char *redacted_header(const char *h, char *buf, size_t n)
{
    const char *colon = strchr(h, ':');
    size_t nl = colon ? (size_t)(colon - h) : strlen(h);
    if (!ll_secret_name(h, nl))
        return h;
    snprintf(buf, n, "%.*s: (hidden)", (int)nl, h);
    return buf;
}

static cJSON *level_json(const scn_level *l)
{
    cJSON *o = cJSON_CreateObject();
    if (o && level_fields(o, l)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* request.record_outputs and request.greedy, written only when on: a run
 * that records no outputs keeps its run line as it was. */
static int output_fields(cJSON *r, const scn_scenario *s)
{
    if (s->record_outputs && !cJSON_AddBoolToObject(r, "record_outputs", 1))
        return LL_ENOMEM;
    if (s->greedy && !cJSON_AddBoolToObject(r, "greedy", 1))
        return LL_ENOMEM;
    return 0;
}

static int scenario_fields(cJSON *root, const scn_scenario *s)
{
    static const char *const src[] = {"synthetic", "sharegpt", "jsonl"};
    cJSON *t, *r, *p, *ld_, *lv, *hs;
    char hbuf[256];
    int rc;
    LL_TRY(add_str(root, "name", s->name ? s->name : "unnamed"));
    LL_TRY(add_str_or_null(root, "defaults", s->defaults));
    LL_TRY(add_obj(root, "target", &t));
    LL_TRY(add_obj(root, "request", &r));
    LL_TRY(add_obj(root, "prompts", &p));
    LL_TRY(add_obj(root, "load", &ld_));
    LL_TRY((lv = cJSON_AddArrayToObject(root, "levels")) ? 0 : LL_ENOMEM);
    char *url = ll_redact_url(s->url); /* user:password@, ?key= */
    rc = s->url && !url ? LL_ENOMEM : add_str_or_null(t, "url", url);
    free(url);
    LL_TRY(rc);
    LL_TRY(add_str_or_null(t, "model", s->model));
    LL_TRY(add_str(t, "endpoint", scn_endpoint_name(s->endpoint)));
    char *path = ll_redact_url(s->endpoint_path ? s->endpoint_path : scn_endpoint_path(s->endpoint)); /* ?key= */
    rc = path ? add_str(t, "path", path) : LL_ENOMEM;
    free(path);
    LL_TRY(rc);
    LL_TRY((hs = cJSON_AddArrayToObject(t, "headers")) ? 0 : LL_ENOMEM);
    for (size_t i = 0; i < s->n_headers; i++)
        LL_TRY(add_item(hs, NULL, cJSON_CreateString(redacted_header(s->headers[i], hbuf, sizeof hbuf))));
    char *spec = ll_redact_spec(s->engine_spec); /* api_key=(hidden) */
    rc = s->engine_spec && !spec ? LL_ENOMEM : add_str_or_null(root, "engine", spec);
    free(spec);
    LL_TRY(rc);
    LL_TRY(ll_json_add_num(r, "max_tokens", s->max_tokens));
    if (s->think_tokens >= 0)
        LL_TRY(ll_json_add_num(r, "think_tokens", s->think_tokens));
    else
        LL_TRY(cJSON_AddNullToObject(r, "think_tokens") ? 0 : LL_ENOMEM);
    LL_TRY(cJSON_AddBoolToObject(r, "ignore_eos", s->ignore_eos) ? 0 : LL_ENOMEM);
    LL_TRY(ll_json_add_num(r, "timeout_s", s->timeout_s));
    LL_TRY(cJSON_AddBoolToObject(r, "continuous_usage", s->continuous_usage) ? 0 : LL_ENOMEM);
    LL_TRY(output_fields(r, s));
    if (s->extra_body)
        LL_TRY(add_item(r, "extra_body", cJSON_Duplicate(s->extra_body, 1)));
    else
        LL_TRY(cJSON_AddNullToObject(r, "extra_body") ? 0 : LL_ENOMEM);
    LL_TRY(add_str(p, "source", src[s->source]));
    LL_TRY(add_str_or_null(p, "path", s->prompts_path));
    LL_TRY(ll_json_add_num(p, "count", s->prompt_count));
    LL_TRY(ll_json_add_num(p, "seed", (double)s->seed));
    LL_TRY(add_str_or_null(p, "tokenizer", s->tokenizer_path));
    LL_TRY(cJSON_AddBoolToObject(p, "reuse", s->prompts_reuse) ? 0 : LL_ENOMEM);
    LL_TRY(add_item(p, "words", dist_json(&s->words)));
    if (s->prompt_tokens_set)
        LL_TRY(add_item(p, "tokens", dist_json(&s->prompt_tokens)));
    LL_TRY(ll_json_add_num(ld_, "threads", s->threads));
    LL_TRY(ll_json_add_num(ld_, "drain_s", s->drain_s));
    LL_TRY(ll_json_add_num(ld_, "max_failed", s->max_failed));
    LL_TRY(cJSON_AddBoolToObject(ld_, "keep_going", s->keep_going) ? 0 : LL_ENOMEM);
    /* written only when on: a run without it keeps its run line */
    if (s->vary_context)
        LL_TRY(cJSON_AddBoolToObject(ld_, "vary_context", 1) ? 0 : LL_ENOMEM);
    LL_TRY(add_str(ld_, "arrival_stamp", scn_stamp_names[s->arrival_stamp]));
    LL_TRY(add_str(ld_, "source_addrs", s->source_addrs ? s->source_addrs : "auto"));
    LL_TRY(scn_workload_to_json(ld_, s));
    for (size_t i = 0; i < s->n_levels; i++)
        LL_TRY(add_item(lv, NULL, level_json(&s->levels[i])));
    LL_TRY(add_str_or_null(root, "output", s->output));
    if (s->ab.enabled)
        LL_TRY(add_item(root, "ab", scn_ab_to_json(&s->ab)));
fail:
    return rc;
}

cJSON *scn_to_json(const scn_scenario *s)
{
    cJSON *root = cJSON_CreateObject();
    if (root && scenario_fields(root, s)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
