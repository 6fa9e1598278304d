/* scenario.c: the scenario struct, its strict JSON loader and validator.
 *
 * Strict on purpose: a typo in a key ("concurrancy") silently ignored would run
 * a different experiment than the user meant, so every object lists the keys it
 * accepts and anything else is an error naming the file and the JSON path. */
#include "scenario.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "scn_internal.h"

static int validate(scn_scenario *s, const char *origin, char *err, size_t errlen);

/* ---- endpoints ------------------------------------------------------------ */

static const char *const k_endpoint[] = {"chat", "completions", "responses", "generate", NULL};
static const char *const k_endpoint_path[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses",
                                              "/generate"};

const char *scn_endpoint_name(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT ? k_endpoint[e] : "?";
}

int scn_endpoint_parse(const char *name, scn_endpoint *out)
{
    for (int i = 0; name && i < SCN_ENDPOINT__COUNT; i++)
        if (strcmp(name, k_endpoint[i]) == 0) {
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

/* Loader context: where messages point. */
typedef struct ld {
    const char *origin;
    char *err;
    size_t errlen;
} ld;

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

/* ---- typed field readers: each names file + path + expectation ----------- */

static int bad(ld *c, const char *path, const char *what)
{
    ll_errf(c->err, c->errlen, "%s: %s: expected %s", c->origin, path, what);
    return LL_EINVAL;
}

/* Every key of obj must be in allowed (NULL-terminated). */
static int check_keys(ld *c, const cJSON *obj, const char *path, const char *const *allowed)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(it->string, allowed[i]) == 0)
                ok = 1;
        if (!ok) {
            ll_errf(c->err, c->errlen, "%s: %s%s%s: unknown key", c->origin, path,
                    path[0] ? "." : "", it->string);
            return LL_EINVAL;
        }
    }
    return 0;
}

static void join(char *out, size_t n, const char *path, const char *key)
{
    snprintf(out, n, "%s%s%s", path, path[0] ? "." : "", key);
}

static int get_num(ld *c, const cJSON *obj, const char *path, const char *key, double lo,
                   double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        char what[96];
        snprintf(what, sizeof what, "a number in [%g, %g]", lo, hi);
        return bad(c, p, what);
    }
    *out = v->valuedouble;
    return 0;
}

static int get_int(ld *c, const cJSON *obj, const char *path, const char *key, int lo, int hi, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        char what[96];
        snprintf(what, sizeof what, "an integer in [%d, %d]", lo, hi);
        return bad(c, p, what);
    }
    *out = (int)v->valuedouble;
    return 0;
}

static int get_bool(ld *c, const cJSON *obj, const char *path, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (!cJSON_IsBool(v))
        return bad(c, p, "true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

/* String or null (null clears when nullable). */
static int get_str(ld *c, const cJSON *obj, const char *path, const char *key, int nullable, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (nullable && cJSON_IsNull(v))
        return scn_set_str(out, NULL);
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return bad(c, p, nullable ? "a non-empty string or null" : "a non-empty string");
    return scn_set_str(out, v->valuestring);
}

/* One of names[] -> index. */
static int get_enum(ld *c, const cJSON *obj, const char *path, const char *key,
                    const char *const *names, const char *what, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (cJSON_IsString(v))
        for (int i = 0; names[i]; i++)
            if (strcmp(v->valuestring, names[i]) == 0) {
                *out = i;
                return 0;
            }
    return bad(c, p, what);
}

static int get_obj(ld *c, const cJSON *obj, const char *path, const char *key, const cJSON **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[160];
    *out = NULL;
    if (!v)
        return 0;
    join(p, sizeof p, path, key);
    if (!cJSON_IsObject(v))
        return bad(c, p, "an object");
    *out = v;
    return 0;
}

/* ---- sections ------------------------------------------------------------- */

static const char *const k_arrival[] = {"poisson", "constant", "trace", NULL};
static const char *const k_stamp[] = {"kernel", "user", NULL};

static int load_profile(ld *c, const cJSON *o, const char *path, scn_profile *p)
{
    static const char *const keys[] = {"when", "num_steps", "style", NULL};
    static const char *const when[] = {"steady", NULL};
    static const char *const style[] = {"sglang", "vllm", NULL};
    int w = 0, st = (int)p->style, rc;
    if (cJSON_IsNull(o)) {
        p->enabled = 0;
        return 0;
    }
    if (!cJSON_IsObject(o))
        return bad(c, path, "an object or null");
    if ((rc = check_keys(c, o, path, keys)) || (rc = get_enum(c, o, path, "when", when, "\"steady\"", &w)) ||
        (rc = get_int(c, o, path, "num_steps", 1, 100000, &p->num_steps)) ||
        (rc = get_enum(c, o, path, "style", style, "\"sglang\" or \"vllm\"", &st)))
        return rc;
    p->style = (scn_profile_style)st;
    p->enabled = 1;
    return 0;
}

/* Fields shared by "load" (defaults for every level) and levels[i]. */
static int load_level_fields(ld *c, const cJSON *o, const char *path, scn_level *l)
{
    int arr = (int)l->arrival, rc;
    const cJSON *prof = cJSON_GetObjectItemCaseSensitive(o, "profile");
    if ((rc = get_int(c, o, path, "requests", 0, 100000000, &l->n_requests)) ||
        (rc = get_int(c, o, path, "warmup", 0, 100000000, &l->warmup)) ||
        (rc = get_num(c, o, path, "duration_s", 0, 1e7, &l->duration_s)) ||
        (rc = get_num(c, o, path, "rate_per_s", 0, 1e7, &l->rate_per_s)) ||
        (rc = get_enum(c, o, path, "arrival", k_arrival, "\"poisson\" or \"constant\"", &arr)))
        return rc;
    if (l->rate_per_s > 0 && l->rate_per_s < 1e-6 && cJSON_GetObjectItemCaseSensitive(o, "rate_per_s")) {
        /* One arrival gap, 1/rate s, becomes int64 ns: 1e-300/s would overflow it. */
        char p[160];
        join(p, sizeof p, path, "rate_per_s");
        return bad(c, p, "0 (closed loop) or a number in [1e-06, 1e+07]");
    }
    l->arrival = (scn_arrival)arr;
    if (prof) {
        char p[160];
        join(p, sizeof p, path, "profile");
        if ((rc = load_profile(c, prof, p, &l->profile)))
            return rc;
    }
    return 0;
}

/* The "load" object: run-wide settings into s, and the fields every level
 * starts from into *proto. */
static int load_load(ld *c, const cJSON *load, scn_scenario *s, scn_level *proto)
{
    static const char *const load_keys[] = {"threads", "concurrency", "requests", "warmup", "duration_s",
                                            "rate_per_s", "arrival", "drain_s", "max_failed", "keep_going",
                                            "profile", "arrival_stamp", "source_addrs", "vary_context", "trace",
                                            "shared_prefix", "sessions", NULL};
    int st = (int)s->arrival_stamp, rc;
    if ((rc = check_keys(c, load, "load", load_keys)) ||
        (rc = get_enum(c, load, "load", "arrival_stamp", k_stamp, "\"kernel\" or \"user\"", &st)) ||
        (rc = get_int(c, load, "load", "threads", 0, 4096, &s->threads)) ||
        (rc = get_num(c, load, "load", "drain_s", 0, 86400, &s->drain_s)) ||
        (rc = get_num(c, load, "load", "max_failed", 0, 1, &s->max_failed)) ||
        (rc = get_bool(c, load, "load", "keep_going", &s->keep_going)) ||
        (rc = get_bool(c, load, "load", "vary_context", &s->vary_context)) ||
        (rc = get_str(c, load, "load", "source_addrs", 0, &s->source_addrs)) ||
        (rc = scn_workload_load(load, c->origin, s, c->err, c->errlen)) ||
        (rc = load_level_fields(c, load, "load", proto)))
        return rc;
    s->arrival_stamp = (scn_stamp)st;
    return 0;
}

/* Element i of "load.concurrency": *l, which holds the load's fields,
 * gets it as its concurrency. */
static int concurrency_level(ld *c, const cJSON *it, size_t i, scn_level *l)
{
    char p[64];
    snprintf(p, sizeof p, "load.concurrency[%zu]", i);
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
        it->valuedouble > 1e6)
        return bad(c, p, "an integer in [0, 1000000]");
    l->concurrency = (int)it->valuedouble;
    /* validate() would say levels[i], a key this file does not have */
    if (l->concurrency < 1 && !(l->rate_per_s > 0))
        return bad(c, p, "an integer >= 1 (0, no cap, only with load.rate_per_s)");
    return 0;
}

/* Element i of "levels": an object whose fields override the load's in *l. */
static int array_level(ld *c, const cJSON *it, size_t i, scn_level *l)
{
    static const char *const level_keys[] = {"concurrency", "requests", "warmup", "duration_s",
                                             "rate_per_s", "arrival", "profile", NULL};
    char p[64];
    int rc;
    snprintf(p, sizeof p, "levels[%zu]", i);
    if (!cJSON_IsObject(it))
        return bad(c, p, "an object");
    if ((rc = check_keys(c, it, p, level_keys)) ||
        (rc = get_int(c, it, p, "concurrency", 0, 1000000, &l->concurrency)))
        return rc;
    return load_level_fields(c, it, p, l);
}

/* One level per element of arr (a non-empty array, checked by the caller),
 * each proto as read by one_level; on success they replace s's levels. */
static int levels_from(ld *c, const cJSON *arr, const scn_level *proto, scn_scenario *s,
                       int (*one_level)(ld *, const cJSON *, size_t, scn_level *))
{
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    scn_level *lv = calloc(n, sizeof *lv);
    int rc;
    if (!lv)
        return LL_ENOMEM;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        lv[i] = *proto;
        if ((rc = one_level(c, it, i, &lv[i]))) {
            free(lv);
            return rc;
        }
    }
    free(s->levels);
    s->levels = lv;
    s->n_levels = n;
    return 0;
}

static int load_levels(ld *c, const cJSON *root, scn_scenario *s)
{
    const cJSON *load, *levels = cJSON_GetObjectItemCaseSensitive(root, "levels");
    scn_level proto = s->levels[0];
    int rc;
    proto.concurrency = 1;
    if ((rc = get_obj(c, root, "", "load", &load)))
        return rc;
    if (load && (rc = load_load(c, load, s, &proto)))
        return rc;
    const cJSON *conc = load ? cJSON_GetObjectItemCaseSensitive(load, "concurrency") : NULL;
    if (conc && levels)
        return bad(c, "load.concurrency", "no \"levels\" beside it (use one or the other)");
    if (conc) {
        if (!cJSON_IsArray(conc) || cJSON_GetArraySize(conc) < 1)
            return bad(c, "load.concurrency", "a non-empty array of integers in [0, 1000000]");
        return levels_from(c, conc, &proto, s, concurrency_level);
    }
    if (levels) {
        if (!cJSON_IsArray(levels) || cJSON_GetArraySize(levels) < 1)
            return bad(c, "levels", "a non-empty array of level objects");
        return levels_from(c, levels, &proto, s, array_level);
    }
    s->levels[0] = proto;
    s->levels[0].concurrency = s->levels[0].concurrency ? s->levels[0].concurrency : 1;
    return 0;
}

/* A length distribution ("prompts.words", "prompts.tokens"). */
static int load_dist(ld *c, const cJSON *w, const char *path, scn_dist *d)
{
    static const char *const wkeys[] = {"dist", "value", "min", "max", "mean", "stddev", NULL};
    static const char *const dist[] = {"fixed", "uniform", "normal", NULL};
    int rc, di = (int)d->kind;
    if ((rc = check_keys(c, w, path, wkeys)) ||
        (rc = get_enum(c, w, path, "dist", dist, "\"fixed\", \"uniform\" or \"normal\"", &di)) ||
        (rc = get_num(c, w, path, "value", 0, 1e6, &d->value)) || (rc = get_num(c, w, path, "min", 0, 1e6, &d->min)) ||
        (rc = get_num(c, w, path, "max", 0, 1e6, &d->max)) || (rc = get_num(c, w, path, "mean", 0, 1e6, &d->mean)) ||
        (rc = get_num(c, w, path, "stddev", 0, 1e6, &d->stddev)))
        return rc;
    d->kind = (scn_dist_kind)di;
    return 0;
}

static int load_prompts(ld *c, const cJSON *root, scn_scenario *s)
{
    static const char *const keys[] = {"source", "path",  "words", "tokens", "tokenizer",
                                       "count",  "seed", "reuse", NULL};
    static const char *const src[] = {"synthetic", "sharegpt", "jsonl", NULL};
    const cJSON *o, *w, *tk;
    int rc, si = (int)s->source;
    double seed = (double)s->seed;
    if ((rc = get_obj(c, root, "", "prompts", &o)) || !o)
        return rc;
    if ((rc = check_keys(c, o, "prompts", keys)) ||
        (rc = get_enum(c, o, "prompts", "source", src, "\"synthetic\", \"sharegpt\" or \"jsonl\"", &si)) ||
        (rc = get_str(c, o, "prompts", "path", 1, &s->prompts_path)) ||
        (rc = get_int(c, o, "prompts", "count", 1, 10000000, &s->prompt_count)) ||
        (rc = get_num(c, o, "prompts", "seed", 0, 9007199254740992.0, &seed)) ||
        (rc = get_str(c, o, "prompts", "tokenizer", 1, &s->tokenizer_path)) ||
        (rc = get_obj(c, o, "prompts", "words", &w)) || (rc = get_obj(c, o, "prompts", "tokens", &tk)) ||
        (rc = get_bool(c, o, "prompts", "reuse", &s->prompts_reuse)))
        return rc;
    s->source = (scn_source)si;
    s->seed = (uint64_t)seed;
    if (w && (rc = load_dist(c, w, "prompts.words", &s->words)))
        return rc;
    if (tk) {
        if ((rc = load_dist(c, tk, "prompts.tokens", &s->prompt_tokens)))
            return rc;
        s->prompt_tokens_set = 1;
    }
    if (s->source != SCN_SOURCE_SYNTHETIC && !s->prompts_path)
        return bad(c, "prompts.path", "a file name (source is not synthetic)");
    return 0;
}

/* 0 for a "Name: value" header line that is safe to send as one header. */
static int check_header(const char *h)
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
    if (check_header(h))
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

/* "target.headers": ["Name: value", ...] (replaces any set before). */
static int load_headers(ld *c, const cJSON *t, scn_scenario *s)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "headers");
    size_t i = 0;
    int rc;
    if (!h)
        return 0;
    if (!cJSON_IsArray(h))
        return bad(c, "target.headers", "an array of \"Name: value\" strings");
    for (const cJSON *it = h->child; it; it = it->next, i++) {
        if (!cJSON_IsString(it) || check_header(it->valuestring)) {
            char p[64];
            snprintf(p, sizeof p, "target.headers[%zu]", i);
            return bad(c, p, "a \"Name: value\" string (a token name, no line breaks)");
        }
    }
    while (s->n_headers)
        free(s->headers[--s->n_headers]);
    for (const cJSON *it = h->child; it; it = it->next)
        if ((rc = scn_add_header(s, it->valuestring)))
            return rc;
    return 0;
}

/* "defaults": the label scn_to_json writes (which defaults a run started
 * from); accepted back so a run line's "config" loads as a scenario. */
static int load_defaults_label(ld *c, const cJSON *root, scn_scenario *s)
{
    static const char *const k_defaults[] = {"bundled", "remote", "file", NULL};
    const cJSON *dv = cJSON_GetObjectItemCaseSensitive(root, "defaults");
    int d = 0, rc;
    if (!dv || cJSON_IsNull(dv))
        return 0;
    if ((rc = get_enum(c, root, "", "defaults", k_defaults, "\"bundled\", \"remote\" or \"file\"", &d)))
        return rc;
    return scn_set_str(&s->defaults, k_defaults[d]);
}

/* The "target" object (t, NULL when absent): where requests go and how they
 * name themselves. The URL is checked whichever way it was set. */
static int load_target(ld *c, const cJSON *t, scn_scenario *s)
{
    static const char *const tkeys[] = {"url", "model", "endpoint", "path", "headers", "api_key_env", NULL};
    int rc, e = (int)s->endpoint;
    if (t && ((rc = check_keys(c, t, "target", tkeys)) || (rc = get_str(c, t, "target", "url", 1, &s->url)) ||
              (rc = get_str(c, t, "target", "model", 1, &s->model)) ||
              (rc = get_str(c, t, "target", "api_key_env", 0, &s->api_key_env)) ||
              (rc = get_enum(c, t, "target", "endpoint", k_endpoint,
                             "\"chat\", \"completions\", \"responses\" or \"generate\"", &e)) ||
              (rc = get_str(c, t, "target", "path", 1, &s->endpoint_path)) || (rc = load_headers(c, t, s))))
        return rc;
    s->endpoint = (scn_endpoint)e;

    char why[1024];
    if (s->url && ll_url_check(s->url, why, sizeof why)) {
        ll_errf(c->err, c->errlen, "%s: target.url: %s", c->origin, why);
        return LL_EINVAL;
    }
    return 0;
}

/* "request.extra_body": an object merged into every request body (a copy is
 * kept), or null. */
static int load_extra_body(ld *c, const cJSON *r, scn_scenario *s)
{
    const cJSON *eb = cJSON_GetObjectItemCaseSensitive(r, "extra_body");
    if (!eb || cJSON_IsNull(eb))
        return 0;
    if (!cJSON_IsObject(eb))
        return bad(c, "request.extra_body", "an object (keys merged into every request body) or null");
    cJSON_Delete(s->extra_body);
    if (!(s->extra_body = cJSON_Duplicate(eb, 1)))
        return LL_ENOMEM;
    return 0;
}

/* The "request" object: what each request asks the server for. */
static int load_request(ld *c, const cJSON *r, scn_scenario *s)
{
    static const char *const rkeys[] = {"max_tokens", "think_tokens", "ignore_eos", "timeout_s",
                                        "extra_body", "continuous_usage", "record_outputs", "greedy", NULL};
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(r, "think_tokens");
    int rc;
    if ((rc = check_keys(c, r, "request", rkeys)) ||
        (rc = get_int(c, r, "request", "max_tokens", 1, 10000000, &s->max_tokens)) ||
        (rc = get_bool(c, r, "request", "ignore_eos", &s->ignore_eos)) ||
        (rc = get_num(c, r, "request", "timeout_s", 0.001, 1e6, &s->timeout_s)) ||
        (rc = get_bool(c, r, "request", "continuous_usage", &s->continuous_usage)) ||
        (rc = get_bool(c, r, "request", "record_outputs", &s->record_outputs)) ||
        (rc = get_bool(c, r, "request", "greedy", &s->greedy)) ||
        (rc = load_extra_body(c, r, s)))
        return rc;
    if (tt && cJSON_IsNull(tt))
        s->think_tokens = -1;
    else if ((rc = get_int(c, r, "request", "think_tokens", 0, 10000000, &s->think_tokens)))
        return rc;
    return 0;
}

static int load_root(ld *c, const cJSON *root, scn_scenario *s)
{
    static const char *const keys[] = {"name", "target", "engine", "request", "prompts", "load",
                                       "levels", "output", "ab", "defaults", "$comment", NULL};
    const cJSON *t, *r;
    int rc;
    if (!cJSON_IsObject(root))
        return bad(c, "(top level)", "a JSON object");
    if ((rc = check_keys(c, root, "", keys)) || (rc = get_str(c, root, "", "name", 0, &s->name)) ||
        (rc = get_str(c, root, "", "engine", 1, &s->engine_spec)) ||
        (rc = get_str(c, root, "", "output", 1, &s->output)) || (rc = get_obj(c, root, "", "target", &t)) ||
        (rc = get_obj(c, root, "", "request", &r)) || (rc = load_defaults_label(c, root, s)) ||
        (rc = load_target(c, t, s)) || (r && (rc = load_request(c, r, s))))
        return rc;
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(root, "ab");
    if ((rc = load_prompts(c, root, s)) || (rc = load_levels(c, root, s)) ||
        (ab && (rc = scn_ab_load(ab, c->origin, &s->ab, c->err, c->errlen))))
        return rc;
    return validate(s, c->origin, c->err, c->errlen);
}

/* The text's scenario; path (NULL: none) is set before the checks, so the
 * files it names (load.trace, ...) are looked up beside it. */
static int load_text(const char *json, const char *origin, const char *path, scn_scenario **out, char *err,
                     size_t errlen)
{
    ld c = {origin ? origin : "(scenario)", err, errlen};
    scn_scenario *s = NULL;
    cJSON *root = NULL;
    const char *end = NULL;
    int rc = scn_new(&s);
    if (rc || (path && (rc = scn_set_str(&s->path, path))))
        goto fail;
    root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - json) : 0;
        int line = 1;
        for (size_t i = 0; i < off && json[i]; i++)
            line += json[i] == '\n';
        ll_errf(err, errlen, "%s: line %d: malformed JSON", c.origin, line);
        rc = LL_EPARSE;
        goto fail;
    }
    if ((rc = load_root(&c, root, s)))
        goto fail;
    cJSON_Delete(root);
    *out = s;
    return 0;
fail:
    cJSON_Delete(root);
    scn_free(s);
    return rc;
}

int scn_load_string(const char *json, const char *origin, scn_scenario **out, char *err, size_t errlen)
{
    return load_text(json, origin, NULL, out, err, errlen);
}

int scn_load_file(const char *path, scn_scenario **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = ll_read_file(path, &text, &len, err, errlen);
    if (rc)
        return rc;
    rc = load_text(text, path, path, out, err, errlen);
    free(text);
    return rc;
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

static int validate(scn_scenario *s, const char *o, char *err, size_t errlen)
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
        if (check_header(s->headers[i])) {
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
    return validate(s, s->path ? s->path : "(scenario)", err, errlen);
}

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
    LL_TRY(add_str(o, "arrival", k_arrival[l->arrival]));
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
    LL_TRY(add_str(ld_, "arrival_stamp", k_stamp[s->arrival_stamp]));
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
