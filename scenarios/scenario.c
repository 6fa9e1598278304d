/* scenario.c: the scenario struct: its defaults (scn_new), the setters the
 * loader and the command line share, the names of its enums, and the checks
 * every scenario passes however it was built (validate).
 *
 * Reading a scenario file is scenario_load.c's job, writing one back (the run
 * record's "config") scenario_json.c's; the sections with their own rules
 * live beside them (ab.c, workload.c, sessions.c). */
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "scn_internal.h"

/* ---- endpoints and the enums' names ---------------------------------------- */

const char *const scn_endpoint_names[] = {"chat", "completions", "responses", "generate", NULL};
static const char *const k_endpoint_path[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses",
                                              "/generate"};

const char *const scn_arrival_names[] = {"poisson", "constant", "trace", NULL};
const char *const scn_stamp_names[] = {"kernel", "user", NULL};

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

static void level_default(scn_level *l, int c)
{
    memset(l, 0, sizeof *l);
    l->concurrency = c;
    l->profile.num_steps = 12;
}

int scn_new(scn_scenario **out)
{
    scn_scenario *s = calloc(1, sizeof *s);
    if (!s)
        return LL_ENOMEM;
    s->endpoint = SCN_ENDPOINT_CHAT;
    s->continuous_usage = 1;
    s->max_tokens = 64;
    s->think_tokens = -1;
    s->ignore_eos = 1;
    s->timeout_s = 300;
    s->source = SCN_SOURCE_SYNTHETIC;
    s->words.kind = SCN_DIST_FIXED;
    s->words.value = 100;
    s->prompt_count = 1024;
    s->seed = 1;
    s->drain_s = 10;
    s->max_failed = SCN_MAX_FAILED_DEFAULT;
    s->levels = calloc(1, sizeof *s->levels);
    if (!s->levels || scn_set_str(&s->name, "unnamed") || scn_set_str(&s->api_key_env, "OPENAI_API_KEY")) {
        scn_free(s);
        return LL_ENOMEM;
    }
    level_default(&s->levels[0], 1);
    s->n_levels = 1;
    *out = s;
    return 0;
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

static int check_endpoint_path(const char *p)
{
    if (!p || p[0] != '/')
        return LL_EINVAL;
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
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

int scn_validate_origin(scn_scenario *s, const char *o, char *err, size_t errlen)
{
    int rc = scn_workload_validate(s, o, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n_levels; i++) {
        const scn_level *l = &s->levels[i];
        if (l->rate_per_s <= 0 && l->concurrency < 1) {
            ll_errf(err, errlen, "%s: levels[%zu].concurrency: expected an integer >= 1 for a closed-loop level",
                    o, i);
            return LL_EINVAL;
        }
    }
    if (s->words.kind == SCN_DIST_UNIFORM && s->words.max < s->words.min) {
        ll_errf(err, errlen, "%s: prompts.words.max: expected >= prompts.words.min", o);
        return LL_EINVAL;
    }
    /* Here, not only in the loader: the command line sets these fields too. */
    if (s->endpoint_path && check_endpoint_path(s->endpoint_path)) {
        ll_errf(err, errlen, "%s: target.path: expected a path starting with '/' (no spaces or control characters)", o);
        return LL_EINVAL;
    }
    for (size_t i = 0; i < s->n_headers; i++)
        if (scn_check_header(s->headers[i])) {
            ll_errf(err, errlen, "%s: target.headers[%zu]: expected a \"Name: value\" string (a token name, no line breaks)",
                    o, i);
            return LL_EINVAL;
        }
    if (s->extra_body && !cJSON_IsObject(s->extra_body)) {
        ll_errf(err, errlen, "%s: request.extra_body: expected an object", o);
        return LL_EINVAL;
    }
    if (s->prompt_tokens_set && s->prompt_tokens.kind == SCN_DIST_UNIFORM &&
        s->prompt_tokens.max < s->prompt_tokens.min) {
        ll_errf(err, errlen, "%s: prompts.tokens.max: expected >= prompts.tokens.min", o);
        return LL_EINVAL;
    }
    return scn_ab_validate(s, o, err, errlen);
}

int scn_validate(scn_scenario *s, char *err, size_t errlen)
{
    return scn_validate_origin(s, s->path ? s->path : "(scenario)", err, errlen);
}
