/* scenario.c: the scenario struct: a new one with the key table's defaults
 * (scn_new), the setters the loader and the command line share, the names
 * of its enums, and the checks between keys that every scenario passes
 * however it was built (validate).
 *
 * Each key's own type and bounds are the key table's (scenario_keys.c), read
 * by the loader (scenario_load.c, scn_keyio.c) and the writer (the run
 * record's "config", scn_keyout.c); the sections with their own rules live
 * beside them (ab.c, workload.c, sessions.c). */
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "scn_internal.h"
#include "scn_keys.h"

/* ---- endpoints and the enums' names ---------------------------------------- */

#define ENDPOINT_NAME(id, name, path) #name,
#define ENDPOINT_PATH(id, name, path) path,
const char *const scn_endpoint_names[] = {SCN_ENDPOINTS(ENDPOINT_NAME) NULL};
static const char *const k_endpoint_path[] = {SCN_ENDPOINTS(ENDPOINT_PATH)};
#undef ENDPOINT_NAME
#undef ENDPOINT_PATH

const char *const scn_arrival_names[] = {"poisson", "constant", "trace", NULL};
const char *const scn_stamp_names[] = {"kernel", "user", NULL};
const char *const scn_cache_names[] = {"auto", "reset", "keep", NULL};

const char *scn_endpoint_name(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT ? scn_endpoint_names[e] : "?";
}

int scn_endpoint_parse(const char *name, scn_endpoint *out)
{
    for (int i = 0; name && i < SCN_ENDPOINT__COUNT; i++)
        if (strcmp(name, scn_endpoint_names[i]) == 0) {
            *out = (scn_endpoint)i;
            return 0;
        }
    return LL_EINVAL;
}

int scn_has_header(const scn_scenario *s, const char *name)
{
    size_t k = strlen(name);
    for (size_t i = 0; i < s->n_headers; i++) {
        const char *h = s->headers[i];
        size_t nl = strcspn(h, ":");
        while (nl && (h[nl - 1] == ' ' || h[nl - 1] == '\t'))
            nl--;
        if (nl == k && strncasecmp(h, name, k) == 0)
            return 1;
    }
    return 0;
}

const char *scn_endpoint_path(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT ? k_endpoint_path[e] : "/v1/chat/completions";
}

int scn_set_str(char **field, const char *value)
{
    char *n = NULL;
    if (value) {
        n = strdup(value);
        if (!n)
            return LL_ENOMEM;
    }
    free(*field);
    *field = n;
    return 0;
}

int scn_new(scn_scenario **out)
{
    scn_scenario *s = calloc(1, sizeof *s);
    int rc = LL_ENOMEM;
    if (!s || !(s->levels = calloc(1, sizeof *s->levels)))
        goto fail;
    scn_level_defaults(&s->levels[0]);
    s->n_levels = 1;
    if ((rc = scn_keys_defaults(s, 0))) /* every key's, the levels' ("1": one at C=1) included */
        goto fail;
    *out = s;
    return 0;
fail:
    scn_free(s);
    return rc;
}

void scn_free(scn_scenario *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->name);
    free(s->url);
    free(s->model);
    free(s->api_key_env);
    free(s->engine_spec);
    free(s->prompts_path);
    free(s->endpoint_path);
    for (size_t i = 0; i < s->n_headers; i++)
        free(s->headers[i]);
    free(s->headers);
    cJSON_Delete(s->extra_body);
    free(s->tokenizer_path);
    free(s->defaults);
    free(s->levels);
    free(s->output);
    free(s->source_addrs);
    free(s->find_objective);
    scn_ab_free(&s->ab);
    scn_workload_free(s);
    free(s);
}

/* 0 for a "Name: value" header line that is safe to send as one header. */
int scn_check_header(const char *h)
{
    const char *colon = h ? strchr(h, ':') : NULL;
    if (!colon || colon == h)
        return LL_EINVAL;
    /* A token name (RFC 9110), and no CR/LF anywhere: one header, never two. */
    for (const char *q = h; q < colon; q++)
        if (*q <= ' ' || *q >= 127 || strchr("\"(),/:;<=>?@[\\]{}", *q))
            return LL_EINVAL;
    for (const char *q = colon; *q; q++)
        if (*q == '\r' || *q == '\n' || *q == 0x7f || ((unsigned char)*q < ' ' && *q != '\t'))
            return LL_EINVAL;
    return 0;
}

int scn_add_header(scn_scenario *s, const char *h)
{
    if (scn_check_header(h))
        return LL_EINVAL;
    /* One form on the wire and in the run line: "Name: value". */
    const char *colon = strchr(h, ':'), *v = colon + 1;
    v += strspn(v, " \t");
    size_t nl = (size_t)(colon - h), len = nl + 2 + strlen(v) + 1;
    char *line = malloc(len), **n = realloc(s->headers, (s->n_headers + 1) * sizeof *n);
    if (n)
        s->headers = n;
    if (!line || !n) {
        free(line);
        return LL_ENOMEM;
    }
    snprintf(line, len, "%.*s: %s", (int)nl, h, v);
    s->headers[s->n_headers++] = line;
    return 0;
}

int scn_set_concurrency(scn_scenario *s, const int *c, size_t n)
{
    if (n == 0)
        return LL_EINVAL;
    scn_level *lv = calloc(n, sizeof *lv);
    if (!lv)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        lv[i] = s->levels[0];
        lv[i].concurrency = c[i];
    }
    free(s->levels);
    s->levels = lv;
    s->n_levels = n;
    return 0;
}

int scn_level_requests(const scn_level *l)
{
    if (l->n_requests > 0)
        return l->n_requests;
    if (l->rate_per_s > 0)
        return l->duration_s > 0 ? 100000000 : 100; /* open loop: bounded by the duration */
    int n = (l->concurrency * 3 + 1) / 2;
    return n < 8 ? 8 : n;
}

/* The checks between keys; a key's own range is checked where it is set
 * (the key table: a file's value and a flag's alike). */
int scn_validate_origin(scn_scenario *s, const scn_rd *c)
{
    int rc = scn_workload_validate(s, c);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n_levels; i++) {
        const scn_level *l = &s->levels[i];
        if (l->rate_per_s <= 0 && l->concurrency < 1) {
            char p[64];
            snprintf(p, sizeof p, "levels[%zu].concurrency", i);
            return scn_bad(c, p, "an integer >= 1 for a closed-loop level");
        }
    }
    if (s->words.kind == SCN_DIST_UNIFORM && s->words.max < s->words.min)
        return scn_bad(c, "prompts.words.max", ">= prompts.words.min");
    if (s->prompt_tokens_set && s->prompt_tokens.kind == SCN_DIST_UNIFORM &&
        s->prompt_tokens.max < s->prompt_tokens.min)
        return scn_bad(c, "prompts.tokens.max", ">= prompts.tokens.min");
    return scn_ab_validate(s, c);
}

int scn_validate(scn_scenario *s, char *err, size_t errlen)
{
    scn_rd c = {s->path ? s->path : "(scenario)", err, errlen};
    return scn_validate_origin(s, &c);
}
