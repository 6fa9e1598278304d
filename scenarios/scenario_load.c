/* scenario_load.c: a scenario file's text into a scn_scenario (the key
 * table's reader, scn_keyio.c, then the checks of scn_validate_origin), and
 * the keys of the table (scenario_keys.c) that need more than their type:
 * the levels (load.concurrency or levels[]), the target's headers, URL and
 * path, the length distributions' short form, the requests a level writes. */
#include "scenario.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_internal.h"
#include "scn_keys.h"

/* ---- levels ------------------------------------------------------------------ */

void *scn_first_level(void *base)
{
    return ((scn_scenario *)base)->levels;
}

/* One level per element of arr (a non-empty array), each starting from
 * load's keys (level 0 as read so far) and read by one(); on success they
 * replace the scenario's levels. */
static int levels_from(scn_rd *c, const cJSON *arr, scn_scenario *s,
                       int (*one)(scn_rd *, const cJSON *, size_t, scn_level *))
{
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    scn_level *lv = calloc(n, sizeof *lv);
    int rc;
    if (!lv)
        return LL_ENOMEM;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        lv[i] = s->levels[0];
        if ((rc = one(c, it, i, &lv[i]))) {
            free(lv);
            return rc;
        }
    }
    free(s->levels);
    s->levels = lv;
    s->n_levels = n;
    return 0;
}

/* Element i of "load.concurrency": its level's concurrency. */
static int concurrency_level(scn_rd *c, const cJSON *it, size_t i, scn_level *l)
{
    char p[64];
    int rc;
    snprintf(p, sizeof p, "load.concurrency[%zu]", i);
    if ((rc = scn_get_int(c, it, p, 0, 1000000, &l->concurrency)))
        return rc;
    /* scn_validate_origin would say levels[i], a key this file does not have */
    if (l->concurrency < 1 && !(l->rate_per_s > 0))
        return scn_bad(c, p, "an integer >= 1 (0, no cap, only with load.rate_per_s)");
    return 0;
}

int scn_concurrency_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                         void *base)
{
    (void)parent;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
        return scn_bad(c, path, k->what);
    return levels_from(c, v, base, concurrency_level);
}

/* Element i of "levels": an object whose keys override load's. */
static int array_level(scn_rd *c, const cJSON *it, size_t i, scn_level *l)
{
    char p[64];
    snprintf(p, sizeof p, "levels[%zu]", i);
    if (!cJSON_IsObject(it))
        return scn_bad(c, p, "an object");
    return scn_read_shape(c, it, p, &scn_level_shape, l);
}

int scn_levels_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                    void *base)
{
    const cJSON *load = cJSON_GetObjectItemCaseSensitive(parent, "load");
    if (cJSON_GetObjectItemCaseSensitive(load, "concurrency"))
        return scn_bad(c, "load.concurrency", "no \"levels\" beside it (use one or the other)");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
        return scn_bad(c, path, k->what);
    return levels_from(c, v, base, array_level);
}

/* "1,2,4": closed levels at these concurrencies (the defaults' form). */
int scn_levels_set(const scn_key *k, void *base, const char *text)
{
    int *c = NULL, rc = LL_EINVAL;
    size_t n = 0;
    (void)k;
    if (ll_parse_int_list(text, &c, &n) == 0 && n > 0)
        rc = scn_set_concurrency(base, c, n);
    free(c);
    return rc;
}

int scn_levels_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_scenario *s = base;
    cJSON *arr = cJSON_AddArrayToObject(o, k->name), *l;
    int rc = arr ? 0 : LL_ENOMEM;
    for (size_t i = 0; i < s->n_levels && rc == 0; i++) {
        if (!(l = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, l)) {
            cJSON_Delete(l);
            return LL_ENOMEM;
        }
        rc = scn_write_shape(l, &scn_level_shape, &s->levels[i]);
    }
    return rc;
}

/* A level's requests as it will send them (0 written as its default). */
int scn_requests_write(cJSON *o, const scn_key *k, const void *base)
{
    return ll_json_add_num(o, k->name, scn_level_requests(base));
}

int scn_rate_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path, void *base)
{
    int rc = scn_read_value(c, k, v, path, base);
    double r = ((const scn_level *)base)->rate_per_s;
    (void)parent;
    /* One arrival gap, 1/rate s, becomes int64 ns: 1e-300/s would overflow it. */
    if (rc == 0 && r > 0 && r < 1e-6)
        return scn_bad(c, path, "0 (closed loop) or a number in [1e-06, 1e+07]");
    return rc;
}

/* ---- target ------------------------------------------------------------------ */

int scn_url_check(const char *v, char *why, size_t n)
{
    return ll_url_check(v, why, n);
}

int scn_path_check(const char *p, char *why, size_t n)
{
    (void)why, (void)n;
    if (p[0] != '/')
        return LL_EINVAL;
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return LL_EINVAL;
    return 0;
}

/* The path requests go to, its ?key= hidden. */
int scn_path_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_scenario *s = base;
    char *path = ll_redact_url(s->endpoint_path ? s->endpoint_path : scn_endpoint_path(s->endpoint));
    int rc = path && cJSON_AddStringToObject(o, k->name, path) ? 0 : LL_ENOMEM;
    free(path);
    return rc;
}

/* "target.headers": ["Name: value", ...] (replaces any set before). */
int scn_headers_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                     void *base)
{
    scn_scenario *s = base;
    size_t i = 0;
    int rc;
    (void)parent;
    if (!cJSON_IsArray(v))
        return scn_bad(c, path, k->what);
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        if (!cJSON_IsString(it) || scn_check_header(it->valuestring)) {
            char p[64];
            snprintf(p, sizeof p, "%s[%zu]", path, i);
            return scn_bad(c, p, "a \"Name: value\" string (a token name, no line breaks)");
        }
    }
    while (s->n_headers)
        free(s->headers[--s->n_headers]);
    for (const cJSON *it = v->child; it; it = it->next)
        if ((rc = scn_add_header(s, it->valuestring)))
            return rc;
    return 0;
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

int scn_headers_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_scenario *s = base;
    cJSON *hs = cJSON_AddArrayToObject(o, k->name);
    char hbuf[256];
    for (size_t i = 0; hs && i < s->n_headers; i++) {
        cJSON *h = cJSON_CreateString(redacted_header(s->headers[i], hbuf, sizeof hbuf));
        if (!h || !cJSON_AddItemToArray(hs, h)) {
            cJSON_Delete(h);
            return LL_ENOMEM;
        }
    }
    return hs ? 0 : LL_ENOMEM;
}

/* ---- prompts ------------------------------------------------------------------ */

/* A length's short form, MEAN[,STDDEV] (scn_parse_length). */
int scn_dist_set(const scn_key *k, void *base, const char *text)
{
    return scn_parse_length(text, (scn_dist *)((char *)base + k->off)) ? LL_EINVAL : 0;
}

/* --profile C[:STEPS], set on each level in turn: the levels of concurrency
 * C get the capture (STEPS, or the key's default steps), the rest keep what
 * the scenario said. */
int scn_profile_set(const scn_key *k, void *base, const char *text)
{
    scn_level *l = base;
    char *end = NULL;
    (void)k;
    errno = 0;
    long c = strtol(text, &end, 10), steps = l->profile.num_steps;
    if (end == text || errno || c < 0 || c > 1000000)
        return LL_EINVAL;
    if (*end == ':') {
        const char *t = end + 1;
        steps = strtol(t, &end, 10);
        if (end == t || errno || steps < 1 || steps > 100000)
            return LL_EINVAL;
    }
    if (*end)
        return LL_EINVAL;
    if (l->concurrency == (int)c) {
        l->profile.enabled = 1;
        l->profile.num_steps = (int)steps;
    }
    return 0;
}

int scn_prompts_done(scn_rd *c, const char *path, void *base)
{
    const scn_scenario *s = base;
    (void)path;
    if (s->source != SCN_SOURCE_SYNTHETIC && !s->prompts_path)
        return scn_bad(c, "prompts.path", "a file name (source is not synthetic)");
    return 0;
}

/* ---- the text ------------------------------------------------------------------ */

/* The text's scenario; path (NULL: none) is set before the checks, so the
 * files it names (load.trace, ...) are looked up beside it. */
static int load_text(const char *json, const char *origin, const char *path, scn_scenario **out, char *err,
                     size_t errlen)
{
    scn_rd c = {origin ? origin : "(scenario)", err, errlen};
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
    if (!cJSON_IsObject(root)) {
        rc = scn_bad(&c, "(top level)", "a JSON object");
        goto fail;
    }
    if ((rc = scn_read_shape(&c, root, "", &scn_root_shape, s)) || (rc = scn_validate_origin(s, &c)))
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
