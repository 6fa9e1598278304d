/* ab.c: the scenario's "ab" section: two targets for the same sweep (engine
 * specs, or remote URLs with their models), the order the sides run in, the
 * repeats per level, and an optional speedup gate (scenario.h, scn_ab).
 * Strict like the rest of the format: unknown keys and wrong types are errors
 * naming the file and path. */
#include "scn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int bad(char *err, size_t errlen, const char *origin, const char *path, const char *what)
{
    ll_errf(err, errlen, "%s: %s: expected %s", origin, path, what);
    return LL_EINVAL;
}

int scn_check_keys(const cJSON *o, const char *path, const char *const *keys, const char *origin, char *err,
                      size_t errlen)
{
    const char *dot = path[0] ? "." : "";
    for (const cJSON *it = o->child; it; it = it->next) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], it->string))
            i++;
        if (!keys[i]) {
            ll_errf(err, errlen, "%s: %s%s%s: unknown key", origin, path, dot, it->string);
            return LL_EINVAL;
        }
        /* cJSON keeps a repeated key and finds the first, where most JSON
         * tools take the last: a key written twice would mean different
         * things to different readers */
        for (const cJSON *e = o->child; e != it; e = e->next)
            if (strcmp(e->string, it->string) == 0) {
                ll_errf(err, errlen, "%s: %s%s%s: key given twice", origin, path, dot, it->string);
                return LL_EINVAL;
            }
    }
    return 0;
}

/* The name becomes a directory under the output: no separators, no "..". */
static int good_name(const char *s)
{
    if (!s[0] || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* An optional non-empty string at path.key; 0 when absent. */
static int opt_str(const cJSON *o, const char *path, const char *key, const char *origin, char **out, char *err,
                   size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[64];
    if (!v || cJSON_IsNull(v))
        return 0;
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return bad(err, errlen, origin, p, "a non-empty string");
    return scn_set_str(out, v->valuestring);
}

/* {"name":..,"engine":..} (a bundled engine) or {"name":..,"url":..,"model":..}
 * (a remote server; what `sweep --url A --url B` writes into the run line). */
static int load_side(const cJSON *o, const char *path, const char *origin, scn_ab_side *side, char *err,
                     size_t errlen)
{
    static const char *const keys[] = {"name", "engine", "url", "model", NULL};
    char p[64];
    int rc;
    if (!cJSON_IsObject(o))
        return bad(err, errlen, origin, path, "an object {\"name\":..,\"engine\":..}");
    if ((rc = scn_check_keys(o, path, keys, origin, err, errlen)))
        return rc;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "engine");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "url");
    snprintf(p, sizeof p, "%s.name", path);
    if (!cJSON_IsString(n) || !good_name(n->valuestring))
        return bad(err, errlen, origin, p, "a directory name of letters, digits, '.', '_' or '-'");
    if ((rc = scn_set_str(&side->name, n->valuestring)))
        return rc;
    if (u && !cJSON_IsNull(u)) {
        snprintf(p, sizeof p, "%s.engine", path);
        if (e && !cJSON_IsNull(e))
            return bad(err, errlen, origin, p, "no engine beside a url (a side is one or the other)");
        if ((rc = opt_str(o, path, "url", origin, &side->url, err, errlen)) ||
            (rc = opt_str(o, path, "model", origin, &side->model, err, errlen)))
            return rc;
        snprintf(p, sizeof p, "%s.url", path);
        char why[1024];
        if (!side->url)
            return bad(err, errlen, origin, p, "an http(s):// URL");
        if (ll_url_check(side->url, why, sizeof why)) {
            ll_errf(err, errlen, "%s: %s: %s", origin, p, why);
            return LL_EINVAL;
        }
        return 0;
    }
    snprintf(p, sizeof p, "%s.engine", path);
    if (!cJSON_IsString(e) || !e->valuestring[0])
        return bad(err, errlen, origin, p, "a non-empty engine spec string");
    if ((rc = scn_set_str(&side->engine, e->valuestring)))
        return rc;
    return opt_str(o, path, "model", origin, &side->model, err, errlen);
}

int scn_ab_side_at(int k)
{
    /* ABBA: positions 0..3 of every block of four are A B B A */
    int r = k % 4;
    return r == 1 || r == 2;
}

/* "order" and "repeat". */
static int load_order(const cJSON *v, const char *origin, scn_ab *ab, char *err, size_t errlen)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(v, "order");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(v, "repeat");
    ab->order = SCN_AB_INTERLEAVED;
    ab->repeat = 1;
    if (o && !cJSON_IsNull(o)) {
        if (!cJSON_IsString(o) || (strcmp(o->valuestring, "interleaved") && strcmp(o->valuestring, "sequential")))
            return bad(err, errlen, origin, "ab.order", "\"interleaved\" or \"sequential\"");
        ab->order = o->valuestring[0] == 's' ? SCN_AB_SEQUENTIAL : SCN_AB_INTERLEAVED;
    }
    if (r && !cJSON_IsNull(r)) {
        if (!cJSON_IsNumber(r) || r->valuedouble != floor(r->valuedouble) || r->valuedouble < 1 ||
            r->valuedouble > SCN_AB_MAX_REPEAT)
            return bad(err, errlen, origin, "ab.repeat", "an integer in [1, 1000]");
        ab->repeat = (int)r->valuedouble;
    }
    return 0;
}

/* A speedup gate X in [SPEEDUP_MIN, SPEEDUP_MAX]: a ratio of two
 * throughputs, so a gate below 0.001 or above a million is a typo (and a
 * subnormal one would not survive being written back). */
#define SPEEDUP_MIN 1e-3
#define SPEEDUP_MAX 1e6

static int speedup_ok(double x)
{
    return x >= SPEEDUP_MIN && x <= SPEEDUP_MAX;
}

int scn_parse_speedup(const char *s, double *x, int *c)
{
    char buf[64], *at;
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    *c = 0;
    if ((at = strchr(buf, '@'))) {
        int64_t v;
        *at = '\0';
        if (ll_parse_int64(at + 1, &v) || v < 1 || v > 1000000)
            return -1;
        *c = (int)v;
    }
    size_t n = strlen(buf);
    if (n > 0 && (buf[n - 1] == 'x' || buf[n - 1] == 'X'))
        buf[n - 1] = '\0';
    return ll_parse_double(buf, x) || !speedup_ok(*x) ? -1 : 0;
}

/* "X", "Xx", "X@C" or a number X. */
static int load_expect(const cJSON *v, scn_ab *ab)
{
    if (cJSON_IsNumber(v)) {
        ab->expect_x = v->valuedouble;
        ab->expect_c = 0;
        return speedup_ok(ab->expect_x) ? 0 : -1;
    }
    return cJSON_IsString(v) ? scn_parse_speedup(v->valuestring, &ab->expect_x, &ab->expect_c) : -1;
}

int scn_ab_load(const cJSON *v, const char *origin, scn_ab *ab, char *err, size_t errlen)
{
    static const char *const keys[] = {"a", "b", "expect_speedup", "expect_same_outputs", "order", "repeat",
                                       NULL};
    int rc;
    if (cJSON_IsNull(v)) {
        scn_ab_free(ab);
        return 0;
    }
    if (!cJSON_IsObject(v))
        return bad(err, errlen, origin, "ab", "an object {\"a\":{..},\"b\":{..}} or null");
    if ((rc = scn_check_keys(v, "ab", keys, origin, err, errlen)) ||
        (rc = load_side(cJSON_GetObjectItemCaseSensitive(v, "a"), "ab.a", origin, &ab->side[0], err, errlen)) ||
        (rc = load_side(cJSON_GetObjectItemCaseSensitive(v, "b"), "ab.b", origin, &ab->side[1], err, errlen)))
        return rc;
    if (!strcmp(ab->side[0].name, ab->side[1].name))
        return bad(err, errlen, origin, "ab.b.name", "a name different from ab.a.name (one directory each)");
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, "expect_speedup");
    ab->expect_x = 0;
    ab->expect_c = 0;
    if (x && !cJSON_IsNull(x) && load_expect(x, ab))
        return bad(err, errlen, origin, "ab.expect_speedup", "\"X\" or \"X@C\" (0.001 <= X <= 1e6, C >= 1), or a number");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(v, "expect_same_outputs");
    ab->expect_outputs = 0;
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsNumber(so) || !(so->valuedouble > 0 && so->valuedouble <= 1))
            return bad(err, errlen, origin, "ab.expect_same_outputs", "a share in (0, 1], e.g. 0.99");
        ab->expect_outputs = so->valuedouble;
    }
    if ((rc = load_order(v, origin, ab, err, errlen)))
        return rc;
    ab->enabled = 1;
    return 0;
}

int scn_ab_validate(const scn_scenario *s, const char *origin, char *err, size_t errlen)
{
    if (!s->ab.enabled)
        return 0;
    if (s->url)
        return bad(err, errlen, origin, "ab", "no target.url (each side names its own target)");
    if (s->ab.expect_outputs > 0 && !s->record_outputs)
        return bad(err, errlen, origin, "ab.expect_same_outputs",
                   "request.record_outputs true (the gate compares the recorded outputs)");
    if (s->ab.expect_c) {
        for (size_t i = 0; i < s->n_levels; i++)
            if (s->levels[i].rate_per_s <= 0 && s->levels[i].concurrency == s->ab.expect_c)
                return 0;
        ll_errf(err, errlen, "%s: ab.expect_speedup: C=%d is not the concurrency of a closed-loop level", origin,
                s->ab.expect_c);
        return LL_EINVAL;
    }
    return 0;
}

static int ab_fields(cJSON *o, const scn_ab *ab)
{
    cJSON *side;
    int rc;
    for (int k = 0; k < 2; k++) {
        LL_TRY((side = cJSON_AddObjectToObject(o, k ? "b" : "a")) ? 0 : LL_ENOMEM);
        const scn_ab_side *sd = &ab->side[k];
        LL_TRY(cJSON_AddStringToObject(side, "name", sd->name) ? 0 : LL_ENOMEM);
        if (sd->engine) {
            char *spec = ll_redact_spec(sd->engine); /* records are shared: api_key=(hidden) */
            rc = spec && cJSON_AddStringToObject(side, "engine", spec) ? 0 : LL_ENOMEM;
            free(spec);
            LL_TRY(rc);
        }
        if (sd->url) {
            char *url = ll_redact_url(sd->url);
            rc = url && cJSON_AddStringToObject(side, "url", url) ? 0 : LL_ENOMEM;
            free(url);
            LL_TRY(rc);
        }
        if (sd->model)
            LL_TRY(cJSON_AddStringToObject(side, "model", sd->model) ? 0 : LL_ENOMEM);
    }
    LL_TRY(cJSON_AddStringToObject(o, "order", ab->order == SCN_AB_SEQUENTIAL ? "sequential" : "interleaved")
               ? 0 : LL_ENOMEM);
    LL_TRY(cJSON_AddNumberToObject(o, "repeat", ab->repeat > 0 ? ab->repeat : 1) ? 0 : LL_ENOMEM);
    if (ab->expect_x > 0) {
        char g[64];
        if (ab->expect_c)
            snprintf(g, sizeof g, "%.17g@%d", ab->expect_x, ab->expect_c);
        else
            snprintf(g, sizeof g, "%.17g", ab->expect_x);
        LL_TRY(cJSON_AddStringToObject(o, "expect_speedup", g) ? 0 : LL_ENOMEM);
    } else {
        LL_TRY(cJSON_AddNullToObject(o, "expect_speedup") ? 0 : LL_ENOMEM);
    }
    if (ab->expect_outputs > 0)
        LL_TRY(cJSON_AddNumberToObject(o, "expect_same_outputs", ab->expect_outputs) ? 0 : LL_ENOMEM);
fail:
    return rc;
}

cJSON *scn_ab_to_json(const scn_ab *ab)
{
    cJSON *o = cJSON_CreateObject();
    if (o && ab_fields(o, ab)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

void scn_ab_free(scn_ab *ab)
{
    for (int k = 0; k < 2; k++) {
        free(ab->side[k].name);
        free(ab->side[k].engine);
        free(ab->side[k].url);
        free(ab->side[k].model);
    }
    memset(ab, 0, sizeof *ab);
}
