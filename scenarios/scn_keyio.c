/* scn_keyio.c: the key table (scenario_keys.c) put to work on the way in: a
 * file's values read into the scenario, each checked as its row says; a
 * flag's text (or a default's) set the same way; the defaults and the remote
 * defaults; and the flags as scenario_keys.h shows them to a command line.
 *
 * Strict on purpose: a typo in a key ("concurrancy") silently ignored would
 * run a different experiment than the user meant, so every object takes only
 * its shape's keys, each once, and anything else is an error naming the
 * file and the JSON path. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_internal.h"
#include "scn_keys.h"

static void *at(void *base, size_t off)
{
    return (char *)base + off;
}

int scn_bad(const scn_rd *c, const char *path, const char *what)
{
    ll_errf(c->err, c->errlen, "%s: %s: expected %s", c->origin, path, what);
    return LL_EINVAL;
}

void scn_join(char *out, size_t n, const char *path, const char *key)
{
    snprintf(out, n, "%s%s%s", path, path[0] ? "." : "", key);
}

/* ---- what a value must be -------------------------------------------------- */

/* The names said (the first `offered`), as "\"a\", \"b\" or \"c\"" in a
 * file's terms, "a, b or c" in a flag's. */
static void say_names(const scn_key *k, int json, char *out, size_t n)
{
    size_t m = 0, len = 0;
    while (k->names[m] && (!k->offered || m < (size_t)k->offered))
        m++;
    out[0] = '\0';
    for (size_t i = 0; i < m && len < n; i++) {
        const char *q = json ? "\"" : "", *sep = i == 0 ? "" : i + 1 == m ? " or " : ", ";
        len += (size_t)snprintf(out + len, n - len, "%s%s%s%s", sep, q, k->names[i], q);
    }
}

void scn_key_what(const scn_key *k, int json, char *out, size_t n)
{
    const char *fixed = !json && k->form ? k->form : k->what;
    int nullable = json && (k->flags & SCN_KF_NULL);
    if (fixed) {
        snprintf(out, n, "%s", fixed);
        return;
    }
    switch (k->type) {
    case SCN_K_INT:
    case SCN_K_U64:
        snprintf(out, n, "an integer in [%.0f, %.0f]", k->lo, k->hi);
        break;
    case SCN_K_NUM:
        snprintf(out, n, (k->flags & SCN_KF_LO_OPEN) ? "a number in (%g, %g]" : "a number in [%g, %g]", k->lo,
                 k->hi);
        break;
    case SCN_K_SECONDS:
        snprintf(out, n, json ? "a number in [%g, %g]" : "a duration like 30s or 2m, in [%g, %g] s", k->lo, k->hi);
        break;
    case SCN_K_BOOL:
        snprintf(out, n, "true or false");
        break;
    case SCN_K_ENUM:
        say_names(k, json, out, n);
        break;
    case SCN_K_STR:
        if (k->names)
            say_names(k, json, out, n);
        else
            snprintf(out, n, nullable ? "a non-empty string or null" : "a non-empty string");
        break;
    default:
        snprintf(out, n, nullable ? "an object or null" : "an object");
        break;
    }
}

static int bad_key(const scn_rd *c, const char *path, const scn_key *k)
{
    char what[256];
    scn_key_what(k, 1, what, sizeof what);
    return scn_bad(c, path, what);
}

/* ---- one value --------------------------------------------------------------- */

static int number_ok(const scn_key *k, double x)
{
    if (!isfinite(x) || x < k->lo || x > k->hi || ((k->flags & SCN_KF_LO_OPEN) && x == k->lo))
        return 0;
    return (k->type != SCN_K_INT && k->type != SCN_K_U64) || x == floor(x);
}

static void store_number(const scn_key *k, void *base, double x)
{
    void *p = at(base, k->off);
    if (k->type == SCN_K_INT || k->type == SCN_K_BOOL || (k->type == SCN_K_ENUM && !(k->flags & SCN_KF_CONST)))
        *(int *)p = (int)x;
    else if (k->type == SCN_K_U64)
        *(uint64_t *)p = (uint64_t)x;
    else if (k->type == SCN_K_NUM || k->type == SCN_K_SECONDS)
        *(double *)p = x;
}

/* i for names[i] == s (every name, offered or not, when all; else only the
 * offered), or -1. */
static int name_index(const scn_key *k, const char *s, int all)
{
    for (int i = 0; s && k->names[i] && (all || !k->offered || i < k->offered); i++)
        if (strcmp(s, k->names[i]) == 0)
            return i;
    return -1;
}

/* A string for a STR row: non-empty, one of its names, its check. 1 when
 * the check said why (in why), -1 when it is simply not what the row wants. */
static int str_ok(const scn_key *k, const char *v, char *why, size_t n)
{
    why[0] = '\0';
    if (!v || !v[0] || (k->names && name_index(k, v, 1) < 0))
        return -1;
    if (k->check && k->check(v, why, n))
        return why[0] ? 1 : -1;
    return 0;
}

/* null, or its text: the row's default (a number's none: lo - 1 for an
 * integer, 0 otherwise; a string's or object's: NULL; an object with a
 * presence flag: off). */
static int set_none(const scn_key *k, void *base)
{
    if (k->def && strcmp(k->def, "null") != 0)
        return scn_key_set_at(k, base, k->def);
    if (k->type == SCN_K_STR || k->type == SCN_K_JSON) {
        void **p = at(base, k->off);
        if (k->type == SCN_K_JSON)
            cJSON_Delete(*p);
        else
            free(*p);
        *p = NULL;
    } else if (k->type == SCN_K_OBJ) {
        if (k->flags & SCN_KF_ON)
            *(int *)at(base, k->on) = 0;
    } else {
        store_number(k, base, k->type == SCN_K_INT ? k->lo - 1 : 0);
    }
    return 0;
}

static int replace_json(const scn_key *k, void *base, cJSON *v)
{
    cJSON **p = at(base, k->off);
    cJSON_Delete(*p);
    *p = v;
    return 0;
}

int scn_read_value(scn_rd *c, const scn_key *k, const cJSON *v, const char *path, void *base)
{
    char why[1024];
    int rc;
    if (cJSON_IsNull(v) && (k->flags & SCN_KF_NULL))
        return set_none(k, base);
    switch (k->type) {
    case SCN_K_INT:
    case SCN_K_U64:
    case SCN_K_NUM:
    case SCN_K_SECONDS:
        if (!cJSON_IsNumber(v) || !number_ok(k, v->valuedouble))
            return bad_key(c, path, k);
        store_number(k, base, v->valuedouble);
        return 0;
    case SCN_K_BOOL:
        if (!cJSON_IsBool(v))
            return bad_key(c, path, k);
        store_number(k, base, cJSON_IsTrue(v));
        return 0;
    case SCN_K_ENUM:
        if ((rc = name_index(k, cJSON_GetStringValue(v), 1)) < 0)
            return bad_key(c, path, k);
        store_number(k, base, rc);
        return 0;
    case SCN_K_STR:
        if ((rc = str_ok(k, cJSON_GetStringValue(v), why, sizeof why)) > 0) {
            ll_errf(c->err, c->errlen, "%s: %s: %s", c->origin, path, why);
            return LL_EINVAL;
        }
        return rc ? bad_key(c, path, k) : scn_set_str(at(base, k->off), v->valuestring);
    case SCN_K_JSON: {
        cJSON *d = cJSON_IsObject(v) ? cJSON_Duplicate(v, 1) : NULL;
        if (!cJSON_IsObject(v))
            return bad_key(c, path, k);
        return d ? replace_json(k, base, d) : LL_ENOMEM;
    }
    case SCN_K_OBJ:
        if (!cJSON_IsObject(v))
            return bad_key(c, path, k);
        if ((rc = scn_read_shape(c, v, path, k->shape, at(base, k->off))))
            return rc;
        if (k->flags & SCN_KF_ON)
            *(int *)at(base, k->on) = 1;
        return 0;
    default:
        return 0;
    }
}

int scn_get_int(scn_rd *c, const cJSON *v, const char *path, double lo, double hi, int *out)
{
    scn_key k = {.type = SCN_K_INT, .lo = lo, .hi = hi};
    return scn_read_value(c, &k, v, path, out);
}

int scn_get_str(scn_rd *c, const cJSON *v, const char *path, const char *what, char **out)
{
    scn_key k = {.type = SCN_K_STR, .what = what};
    return scn_read_value(c, &k, v, path, out);
}

/* ---- an object ----------------------------------------------------------------- */

/* The row named name in sh or a shape inlined in it, or NULL. */
static const scn_key *find_row(const scn_shape *sh, const char *name)
{
    for (size_t i = 0; i < sh->n; i++) {
        const scn_key *k = &sh->keys[i], *r;
        if (k->type == SCN_K_INLINE && (r = find_row(k->shape, name)))
            return r;
        if (k->name && strcmp(k->name, name) == 0)
            return k;
    }
    return NULL;
}

/* Every member a key of sh, once. cJSON keeps a repeated key and finds the
 * first, where most JSON tools take the last: a key written twice would
 * mean different things to different readers. */
static int check_keys(scn_rd *c, const cJSON *o, const char *path, const scn_shape *sh)
{
    const char *dot = path[0] ? "." : "";
    for (const cJSON *it = o->child; it; it = it->next) {
        if (!find_row(sh, it->string)) {
            ll_errf(c->err, c->errlen, "%s: %s%s%s: unknown key", c->origin, path, dot, it->string);
            return LL_EINVAL;
        }
        for (const cJSON *e = o->child; e != it; e = e->next)
            if (strcmp(e->string, it->string) == 0) {
                ll_errf(c->err, c->errlen, "%s: %s%s%s: key given twice", c->origin, path, dot, it->string);
                return LL_EINVAL;
            }
    }
    return 0;
}

static int read_rows(scn_rd *c, const cJSON *o, const char *path, const scn_shape *sh, void *base)
{
    char p[160];
    int rc = 0;
    for (size_t i = 0; i < sh->n && rc == 0; i++) {
        const scn_key *k = &sh->keys[i];
        if (k->type == SCN_K_INLINE) {
            rc = read_rows(c, o, path, k->shape, k->at ? k->at(base) : base);
            continue;
        }
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k->name);
        scn_join(p, sizeof p, path, k->name);
        if (!v)
            rc = (k->flags & SCN_KF_REQUIRED) ? bad_key(c, p, k) : 0;
        else
            rc = k->read ? k->read(c, k, o, v, p, base) : scn_read_value(c, k, v, p, base);
    }
    return rc;
}

int scn_read_shape(scn_rd *c, const cJSON *o, const char *path, const scn_shape *sh, void *base)
{
    int rc;
    if ((rc = check_keys(c, o, path, sh)) || (rc = read_rows(c, o, path, sh, base)))
        return rc;
    return sh->done ? sh->done(c, path, base) : 0;
}

/* ---- a value from text (a flag's, a default's) ---------------------------------- */

static int text_number(const scn_key *k, const char *t, double *x)
{
    uint64_t u;
    if (k->type == SCN_K_SECONDS)
        return ll_parse_duration_s(t, x);
    if (k->type == SCN_K_NUM)
        return ll_parse_double(t, x);
    if (ll_parse_count(t, &u))
        return -1;
    *x = (double)u;
    return 0;
}

int scn_key_set_at(const scn_key *k, void *base, const char *t)
{
    char why[512];
    double x;
    int rc = LL_EINVAL, i;
    if (k->set)
        rc = k->set(k, base, t);
    else if (strcmp(t, "null") == 0 && (k->flags & SCN_KF_NULL) && k->type != SCN_K_STR)
        rc = set_none(k, base);
    else if (k->type == SCN_K_BOOL && (!strcmp(t, "true") || !strcmp(t, "false")))
        rc = (store_number(k, base, t[0] == 't'), 0);
    else if (k->type == SCN_K_ENUM && (i = name_index(k, t, 0)) >= 0)
        rc = (store_number(k, base, i), 0);
    else if (k->type == SCN_K_STR && str_ok(k, t, why, sizeof why) == 0)
        rc = scn_set_str(at(base, k->off), t);
    else if (k->type == SCN_K_JSON) {
        cJSON *v = cJSON_ParseWithOpts(t, NULL, 1);
        rc = cJSON_IsObject(v) ? replace_json(k, base, v) : (cJSON_Delete(v), LL_EINVAL);
    } else if ((k->type == SCN_K_INT || k->type == SCN_K_U64 || k->type == SCN_K_NUM ||
                k->type == SCN_K_SECONDS) && text_number(k, t, &x) == 0 && number_ok(k, x))
        rc = (store_number(k, base, x), 0);
    if (rc == 0 && (k->flags & SCN_KF_ON) && !(k->flags & SCN_KF_SET_ON))
        *(int *)at(base, k->on) = 1;
    return rc;
}

/* ---- defaults ------------------------------------------------------------------ */

/* Every row reachable from sh at base: its sub-objects first, then its own. */
static int defaults_of(const scn_shape *sh, void *base, int remote)
{
    int rc = 0;
    for (size_t i = 0; i < sh->n && rc == 0; i++) {
        const scn_key *k = &sh->keys[i];
        const char *t = remote ? k->rdef : k->def;
        if (k->type == SCN_K_OBJ)
            rc = defaults_of(k->shape, at(base, k->off), remote);
        else if (k->type == SCN_K_INLINE)
            rc = defaults_of(k->shape, k->at ? k->at(base) : base, remote);
        else if (k->type == SCN_K_HOOK && k->shape && k->shape != &scn_level_shape)
            rc = defaults_of(k->shape, base, remote); /* load.trace's keys: the scenario's fields */
        if (rc == 0 && t)
            rc = scn_key_set_at(k, base, t);
    }
    return rc;
}

int scn_keys_defaults(scn_scenario *s, int remote)
{
    return defaults_of(&scn_root_shape, s, remote);
}

void scn_level_defaults(scn_level *l)
{
    memset(l, 0, sizeof *l);
    defaults_of(&scn_level_shape, l, 0); /* numbers only: nothing to allocate */
}

/* ---- the flags, for a command line (scenario_keys.h) ------------------------------ */

/* Where a row lands from the scenario: an offset, or within every level. */
typedef struct spot {
    const scn_key *want; /* the row sought (NULL: the index-th flag) */
    size_t index, seen;  /* flags met so far */
    const scn_key *found;
    size_t off;
    int per_level;
    char path[160];
} spot;

/* Depth first from sh (at off from the scenario, or within a level); 1 once
 * found. A level's keys are met once, as load's (every level's defaults):
 * the levels' own list (a hook) is not walked, so no flag is met twice. */
static int walk(spot *sp, const scn_shape *sh, size_t off, int per_level, const char *path)
{
    char p[160];
    for (size_t i = 0; i < sh->n; i++) {
        const scn_key *k = &sh->keys[i];
        if (k->type == SCN_K_INLINE) {
            int lv = per_level || (k->flags & SCN_KF_PER_LEVEL);
            if (walk(sp, k->shape, lv && !per_level ? 0 : off, lv, path))
                return 1;
            continue;
        }
        scn_join(p, sizeof p, path, k->name);
        if (k->flag && (sp->want ? sp->want == k : sp->seen++ == sp->index)) {
            sp->found = k;
            sp->off = off + k->off;
            sp->per_level = per_level;
            snprintf(sp->path, sizeof sp->path, "%s", p);
            return 1;
        }
        if ((k->type == SCN_K_OBJ || (k->type == SCN_K_HOOK && k->shape && k->shape != &scn_level_shape)) &&
            walk(sp, k->shape, k->type == SCN_K_OBJ ? off + k->off : off, per_level, p))
            return 1;
    }
    return 0;
}

static int locate(const scn_key *k, spot *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->want = k;
    return walk(sp, &scn_root_shape, 0, 0, "");
}

const scn_key *scn_flag_key(size_t i)
{
    spot sp = {.index = i};
    return walk(&sp, &scn_root_shape, 0, 0, "") ? sp.found : NULL;
}

const char *scn_key_path(const scn_key *k)
{
    static __thread spot sp;
    return locate(k, &sp) ? sp.path : k->name;
}

const char *scn_key_flag(const scn_key *k)
{
    return k->flag;
}

/* An enum's names as "a|b|c" (its offered ones), made once per key and
 * kept for the program's life: help tables hold the pointer. */
static const char *names_arg(const scn_key *k)
{
    static struct {
        const scn_key *k;
        char *arg;
    } made[16];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    const char *out = "VALUE";
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        if (made[i].k == k || !made[i].k) {
            if (!made[i].k) {
                ll_buf b = {0};
                for (int j = 0; k->names[j] && (!k->offered || j < k->offered); j++)
                    if ((j && ll_buf_append(&b, "|", 1)) || ll_buf_append(&b, k->names[j], strlen(k->names[j])))
                        break;
                if (!b.p)
                    break;
                made[i].k = k;
                made[i].arg = b.p;
            }
            out = made[i].arg;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return out;
}

const char *scn_key_flag_arg(const scn_key *k)
{
    if (k->type == SCN_K_BOOL)
        return NULL;
    if (k->arg)
        return k->arg;
    return k->type == SCN_K_ENUM && k->names ? names_arg(k) : "VALUE";
}

const char *scn_key_flag_help(const scn_key *k)
{
    return k->flag_help ? k->flag_help : k->help;
}

int scn_key_set(scn_scenario *s, const scn_key *k, const char *value, char *err, size_t errlen)
{
    const char *t = value ? value : k->flag_val ? k->flag_val : "true";
    spot sp;
    int rc = locate(k, &sp) ? 0 : LL_EINVAL;
    if (rc == 0 && sp.per_level) {
        for (size_t i = 0; i < s->n_levels && rc == 0; i++)
            rc = scn_key_set_at(k, at(&s->levels[i], sp.off - k->off), t);
    } else if (rc == 0) {
        rc = scn_key_set_at(k, at(s, sp.off - k->off), t);
    }
    char why[512] = "";
    if (rc == LL_EINVAL && k->type == SCN_K_STR && str_ok(k, t, why, sizeof why) > 0) {
        ll_errf(err, errlen, "%s", why); /* the check's own words name what is wrong */
    } else if (rc == LL_EINVAL) {
        char what[512];
        scn_key_what(k, 0, what, sizeof what);
        ll_errf(err, errlen, "expected %s, got '%s'", what, t);
    } else if (rc) {
        ll_errf(err, errlen, "%s", ll_strerror(rc));
    }
    return rc;
}

int scn_key_check(const scn_key *k, const char *value, char *err, size_t errlen)
{
    scn_scenario *s = NULL;
    int rc = scn_new(&s);
    if (rc == 0)
        rc = scn_key_set(s, k, value, err, errlen);
    else
        ll_errf(err, errlen, "%s", ll_strerror(rc));
    scn_free(s);
    return rc;
}
