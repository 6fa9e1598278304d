/* ab.c: the scenario's "ab" section: two engine specs for the same sweep and
 * an optional speedup gate (scenario.h, scn_ab). Strict like the rest of the
 * format: unknown keys and wrong types are errors naming the file and path. */
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

static int check_keys(const cJSON *o, const char *path, const char *const *keys, const char *origin, char *err,
                      size_t errlen)
{
    for (const cJSON *it = o->child; it; it = it->next) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], it->string))
            i++;
        if (!keys[i]) {
            ll_errf(err, errlen, "%s: %s.%s: unknown key", origin, path, it->string);
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

static int load_side(const cJSON *o, const char *path, const char *origin, scn_ab_side *side, char *err,
                     size_t errlen)
{
    static const char *const keys[] = {"name", "engine", NULL};
    char p[64];
    int rc;
    if (!cJSON_IsObject(o))
        return bad(err, errlen, origin, path, "an object {\"name\":..,\"engine\":..}");
    if ((rc = check_keys(o, path, keys, origin, err, errlen)))
        return rc;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "engine");
    snprintf(p, sizeof p, "%s.name", path);
    if (!cJSON_IsString(n) || !good_name(n->valuestring))
        return bad(err, errlen, origin, p, "a directory name of letters, digits, '.', '_' or '-'");
    snprintf(p, sizeof p, "%s.engine", path);
    if (!cJSON_IsString(e) || !e->valuestring[0])
        return bad(err, errlen, origin, p, "a non-empty engine spec string");
    if ((rc = scn_set_str(&side->name, n->valuestring)) || (rc = scn_set_str(&side->engine, e->valuestring)))
        return rc;
    return 0;
}

/* "X", "Xx", "X@C" or a number X; X > 0, C >= 1. */
static int load_expect(const cJSON *v, scn_ab *ab)
{
    if (cJSON_IsNumber(v)) {
        ab->expect_x = v->valuedouble;
        ab->expect_c = 0;
        return isfinite(ab->expect_x) && ab->expect_x > 0 ? 0 : -1;
    }
    if (!cJSON_IsString(v))
        return -1;
    char buf[64], *at;
    if (snprintf(buf, sizeof buf, "%s", v->valuestring) >= (int)sizeof buf)
        return -1;
    ab->expect_c = 0;
    if ((at = strchr(buf, '@'))) {
        int64_t c;
        *at = '\0';
        if (ll_parse_int64(at + 1, &c) || c < 1 || c > 1000000)
            return -1;
        ab->expect_c = (int)c;
    }
    size_t n = strlen(buf);
    if (n > 0 && (buf[n - 1] == 'x' || buf[n - 1] == 'X'))
        buf[n - 1] = '\0';
    return ll_parse_double(buf, &ab->expect_x) || !isfinite(ab->expect_x) || !(ab->expect_x > 0) ? -1 : 0;
}

int scn_ab_load(const cJSON *v, const char *origin, scn_ab *ab, char *err, size_t errlen)
{
    static const char *const keys[] = {"a", "b", "expect_speedup", NULL};
    int rc;
    if (cJSON_IsNull(v)) {
        scn_ab_free(ab);
        return 0;
    }
    if (!cJSON_IsObject(v))
        return bad(err, errlen, origin, "ab", "an object {\"a\":{..},\"b\":{..}} or null");
    if ((rc = check_keys(v, "ab", keys, origin, err, errlen)) ||
        (rc = load_side(cJSON_GetObjectItemCaseSensitive(v, "a"), "ab.a", origin, &ab->side[0], err, errlen)) ||
        (rc = load_side(cJSON_GetObjectItemCaseSensitive(v, "b"), "ab.b", origin, &ab->side[1], err, errlen)))
        return rc;
    if (!strcmp(ab->side[0].name, ab->side[1].name))
        return bad(err, errlen, origin, "ab.b.name", "a name different from ab.a.name (one directory each)");
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, "expect_speedup");
    ab->expect_x = 0;
    ab->expect_c = 0;
    if (x && !cJSON_IsNull(x) && load_expect(x, ab))
        return bad(err, errlen, origin, "ab.expect_speedup", "\"X\" or \"X@C\" (X > 0, C >= 1), or a number");
    ab->enabled = 1;
    return 0;
}

int scn_ab_validate(const scn_scenario *s, const char *origin, char *err, size_t errlen)
{
    if (!s->ab.enabled)
        return 0;
    if (s->url)
        return bad(err, errlen, origin, "ab", "no target.url (each side starts its own bundled engine)");
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
        LL_TRY(cJSON_AddStringToObject(side, "name", ab->side[k].name) ? 0 : LL_ENOMEM);
        LL_TRY(cJSON_AddStringToObject(side, "engine", ab->side[k].engine) ? 0 : LL_ENOMEM);
    }
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
    }
    memset(ab, 0, sizeof *ab);
}
