/* ab.c: the scenario's "ab" section: two targets for the same sweep (engine
 * specs, or remote URLs with their models), the order the sides run in, the
 * repeats per level, and optional gates (scenario.h, scn_ab). Its keys are
 * rows of the key table (scenario_keys.c); here are what they need beyond
 * their types: a side's name and its one target, the two names apart, the
 * speedup gate's forms, and the checks against the rest of the scenario. */
#include "scn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_keys.h"

/* The name becomes a directory under the output: no separators, no "..". */
int scn_side_name_check(const char *s, char *why, size_t n)
{
    (void)why, (void)n;
    if (!s[0] || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 64)
        return LL_EINVAL;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return LL_EINVAL;
    return 0;
}

/* A side is a bundled engine {"name","engine"} or a remote server
 * {"name","url","model"} (what `sweep --url A --url B` writes into the run
 * line), never both. */
int scn_side_done(scn_rd *c, const char *path, void *base)
{
    const scn_ab_side *side = base;
    char p[64];
    snprintf(p, sizeof p, "%s.engine", path);
    if (side->url && side->engine)
        return scn_bad(c, p, "no engine beside a url (a side is one or the other)");
    if (!side->url && !side->engine)
        return scn_bad(c, p, "a non-empty engine spec string");
    return 0;
}

int scn_ab_done(scn_rd *c, const char *path, void *base)
{
    scn_ab *ab = base;
    (void)path;
    if (!strcmp(ab->side[0].name, ab->side[1].name))
        return scn_bad(c, "ab.b.name", "a name different from ab.a.name (one directory each)");
    return 0;
}

int scn_ab_side_at(int k)
{
    /* ABBA: positions 0..3 of every block of four are A B B A */
    int r = k % 4;
    return r == 1 || r == 2;
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

/* "X", "Xx", "X@C" or a number X (null: no gate). */
int scn_speedup_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                     void *base)
{
    scn_ab *ab = base;
    int bad = 0;
    (void)parent;
    ab->expect_x = 0;
    ab->expect_c = 0;
    if (cJSON_IsNumber(v))
        bad = !speedup_ok(ab->expect_x = v->valuedouble);
    else if (!cJSON_IsNull(v))
        bad = !cJSON_IsString(v) || scn_parse_speedup(v->valuestring, &ab->expect_x, &ab->expect_c);
    return bad ? scn_bad(c, path, k->what) : 0;
}

int scn_speedup_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_ab *ab = base;
    char g[64];
    if (ab->expect_x <= 0)
        return cJSON_AddNullToObject(o, k->name) ? 0 : LL_ENOMEM;
    if (ab->expect_c)
        snprintf(g, sizeof g, "%.17g@%d", ab->expect_x, ab->expect_c);
    else
        snprintf(g, sizeof g, "%.17g", ab->expect_x);
    return cJSON_AddStringToObject(o, k->name, g) ? 0 : LL_ENOMEM;
}

int scn_ab_validate(const scn_scenario *s, const scn_rd *c)
{
    if (!s->ab.enabled)
        return 0;
    if (s->url)
        return scn_bad(c, "ab", "no target.url (each side names its own target)");
    if (s->ab.expect_outputs > 0 && !s->record_outputs)
        return scn_bad(c, "ab.expect_same_outputs", "request.record_outputs true (the gate compares the recorded outputs)");
    if (s->ab.expect_c) {
        for (size_t i = 0; i < s->n_levels; i++)
            if (s->levels[i].rate_per_s <= 0 && s->levels[i].concurrency == s->ab.expect_c)
                return 0;
        ll_errf(c->err, c->errlen, "%s: ab.expect_speedup: C=%d is not the concurrency of a closed-loop level",
                c->origin, s->ab.expect_c);
        return LL_EINVAL;
    }
    return 0;
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
