/* scenario_load.c: the strict JSON loader: a scenario file's text into a
 * scn_scenario, section by section, then the checks (scn_validate_origin,
 * scenario.c).
 *
 * Strict on purpose: a typo in a key ("concurrancy") silently ignored would run
 * a different experiment than the user meant, so every object lists the keys it
 * accepts and anything else is an error naming the file and the JSON path. */
#include "scenario.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_internal.h"

/* Loader context: where messages point. */
typedef struct ld {
    const char *origin;
    char *err;
    size_t errlen;
} ld;

/* ---- typed field readers: each names file + path + expectation ----------- */

static int bad(ld *c, const char *path, const char *what)
{
    ll_errf(c->err, c->errlen, "%s: %s: expected %s", c->origin, path, what);
    return LL_EINVAL;
}

/* Every key of obj must be in allowed (NULL-terminated), once (scn_check_keys). */
static int check_keys(ld *c, const cJSON *obj, const char *path, const char *const *allowed)
{
    return scn_check_keys(obj, path, allowed, c->origin, c->err, c->errlen);
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
        (rc = get_enum(c, o, path, "arrival", scn_arrival_names, "\"poisson\" or \"constant\"", &arr)))
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
        (rc = get_enum(c, load, "load", "arrival_stamp", scn_stamp_names, "\"kernel\" or \"user\"", &st)) ||
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
    /* scn_validate_origin would say levels[i], a key this file does not have */
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
        if (!cJSON_IsString(it) || scn_check_header(it->valuestring)) {
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
              (rc = get_enum(c, t, "target", "endpoint", scn_endpoint_names,
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
    return scn_validate_origin(s, c->origin, c->err, c->errlen);
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
