/* workload.c: the scenario keys that shape the workload itself rather than
 * its levels: load.trace (replay a request trace, trace.c reads it),
 * load.shared_prefix (prompts that share one of G leading texts) and
 * load.sessions (multi-turn conversations, sessions.c). Loading,
 * checking, the trace's level and the run line's view of both; the prompts
 * they make are prompts.c's.
 */
#include "scn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int bad(const char *origin, const char *path, const char *what, char *err, size_t errlen)
{
    ll_errf(err, errlen, "%s: %s: expected %s", origin, path, what);
    return LL_EINVAL;
}

/* "trace": "FILE" or {"path":"FILE","speed":X,"window_s":[START,END]}.
 * "format" and "rows" are what the run line adds (scn_workload_to_json):
 * accepted and ignored, so a run's config loads back as it was. */
static int load_trace(const cJSON *v, const char *o, scn_scenario *s, char *err, size_t errlen)
{
    static const char *const keys[] = {"path", "speed", "window_s", "format", "rows", NULL};
    const cJSON *path = v, *speed = NULL, *win = NULL;
    if (cJSON_IsObject(v)) {
        if (scn_check_keys(v, "load.trace", keys, o, err, errlen))
            return LL_EINVAL;
        path = cJSON_GetObjectItemCaseSensitive(v, "path");
        speed = cJSON_GetObjectItemCaseSensitive(v, "speed");
        win = cJSON_GetObjectItemCaseSensitive(v, "window_s");
    }
    if (!cJSON_IsString(path) || !path->valuestring[0])
        return bad(o, cJSON_IsObject(v) ? "load.trace.path" : "load.trace",
                   "a trace file (or {\"path\",\"speed\",\"window_s\"})", err, errlen);
    if (speed && (!cJSON_IsNumber(speed) || !(speed->valuedouble >= 1e-3 && speed->valuedouble <= 1e6)))
        return bad(o, "load.trace.speed", "a number in [0.001, 1e6]", err, errlen);
    if (win && (!cJSON_IsArray(win) || cJSON_GetArraySize(win) != 2 || !cJSON_IsNumber(win->child) ||
                !cJSON_IsNumber(win->child->next) || win->child->valuedouble < 0 ||
                !(win->child->next->valuedouble == 0 || win->child->next->valuedouble > win->child->valuedouble)))
        return bad(o, "load.trace.window_s", "[START, END] seconds, 0 <= START < END (END 0: to the end)", err,
                   errlen);
    if (scn_set_str(&s->trace_path, path->valuestring))
        return LL_ENOMEM;
    if (speed)
        s->trace_speed = speed->valuedouble;
    if (win) {
        s->trace_start_s = win->child->valuedouble;
        s->trace_end_s = win->child->next->valuedouble;
    }
    return 0;
}

static int int_in(const cJSON *o, const char *k, int lo, int hi, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return -1;
    *out = (int)v->valuedouble;
    return 0;
}

/* "shared_prefix": {"groups":G,"tokens":P,"pick":"round-robin"|"seeded"}. */
static int load_prefix(const cJSON *v, const char *o, scn_scenario *s, char *err, size_t errlen)
{
    static const char *const keys[] = {"groups", "tokens", "pick", NULL};
    if (!cJSON_IsObject(v))
        return bad(o, "load.shared_prefix", "{\"groups\":G,\"tokens\":P}", err, errlen);
    if (scn_check_keys(v, "load.shared_prefix", keys, o, err, errlen))
        return LL_EINVAL;
    if (int_in(v, "groups", 1, 1000000, &s->prefix_groups))
        return bad(o, "load.shared_prefix.groups", "an integer in [1, 1000000]", err, errlen);
    if (int_in(v, "tokens", 1, 10000000, &s->prefix_tokens))
        return bad(o, "load.shared_prefix.tokens", "an integer in [1, 10000000]", err, errlen);
    const cJSON *pick = cJSON_GetObjectItemCaseSensitive(v, "pick");
    if (pick && !(cJSON_IsString(pick) &&
                  (!strcmp(pick->valuestring, "round-robin") || !strcmp(pick->valuestring, "seeded"))))
        return bad(o, "load.shared_prefix.pick", "\"round-robin\" or \"seeded\"", err, errlen);
    s->prefix_seeded = pick && !strcmp(pick->valuestring, "seeded");
    return 0;
}

int scn_workload_load(const cJSON *load, const char *origin, scn_scenario *s, char *err, size_t errlen)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(load, "trace");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(load, "shared_prefix");
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(load, "sessions");
    int rc;
    if (t && !cJSON_IsNull(t) && (rc = load_trace(t, origin, s, err, errlen)))
        return rc;
    if (p && !cJSON_IsNull(p) && (rc = load_prefix(p, origin, s, err, errlen)))
        return rc;
    if (ss && !cJSON_IsNull(ss) && (rc = scn_sessions_load(ss, origin, s, err, errlen)))
        return rc;
    return 0;
}

/* The trace's one level: open loop at its rows' times, no cap, no warmup
 * (every row is a request of the trace). rate_per_s is the trace's mean rate,
 * for the level line; the rows' times decide when each is sent. */
static int trace_level(scn_scenario *s)
{
    const scn_trace *t = s->trace;
    scn_level *l = calloc(1, sizeof *l);
    if (!l)
        return LL_ENOMEM;
    double span_s = (double)t->rows.v[t->rows.n - 1].send_ns / 1e9;
    l->profile.num_steps = 12;
    l->n_requests = (int)t->rows.n;
    l->rate_per_s = (double)t->rows.n / (span_s > 1e-3 ? span_s : 1e-3);
    l->arrival = SCN_ARRIVAL_TRACE;
    free(s->levels);
    s->levels = l;
    s->n_levels = 1;
    return 0;
}

int scn_workload_validate(scn_scenario *s, const char *o, char *err, size_t errlen)
{
    char path[4096];
    int rc;
    if (!s->trace_path) {
        for (size_t i = 0; i < s->n_levels; i++)
            if (s->levels[i].arrival == SCN_ARRIVAL_TRACE)
                return bad(o, "arrival", "\"poisson\" or \"constant\" (\"trace\" needs load.trace)", err, errlen);
        return scn_sessions_validate(s, o, err, errlen);
    }
    if (s->session_turns > 0)
        return bad(o, "load.sessions", "nothing beside load.trace (a trace row is one request)", err, errlen);
    if (s->prefix_groups > 0)
        return bad(o, "load.shared_prefix", "nothing beside load.trace (the trace's hash_ids say what is shared)",
                   err, errlen);
    if (s->ab.enabled)
        return bad(o, "load.trace", "no \"ab\" beside it (replay the trace against each side in turn)", err,
                   errlen);
    if (s->trace_speed <= 0)
        s->trace_speed = 1;
    scn_resolve_path(s, s->trace_path, path, sizeof path);
    /* read again when the keys changed since it was read (the command line
     * over a scenario's load.trace): the rows are timed by the speed and
     * cut by the window */
    const scn_trace *t = s->trace;
    if (t && (strcmp(t->path, path) != 0 || t->speed != s->trace_speed || t->start_s != s->trace_start_s ||
              t->end_s != s->trace_end_s)) {
        scn_trace_free(s->trace);
        s->trace = NULL;
    }
    if (!s->trace &&
        (rc = scn_trace_load(path, s->trace_speed, s->trace_start_s, s->trace_end_s, &s->trace, err, errlen)))
        return rc;
    return trace_level(s);
}

int scn_workload_to_json(cJSON *load, const scn_scenario *s)
{
    cJSON *o;
    if (s->trace_path) {
        if (!(o = cJSON_AddObjectToObject(load, "trace")) || !cJSON_AddStringToObject(o, "path", s->trace_path) ||
            ll_json_add_num(o, "speed", s->trace_speed > 0 ? s->trace_speed : 1) ||
            !cJSON_AddStringToObject(o, "format", s->trace ? s->trace->format : "unread") ||
            ll_json_add_num(o, "rows", s->trace ? (double)s->trace->rows.n : 0))
            return LL_ENOMEM;
        cJSON *w = cJSON_AddArrayToObject(o, "window_s");
        if (!w || !cJSON_AddItemToArray(w, cJSON_CreateNumber(s->trace_start_s)) ||
            !cJSON_AddItemToArray(w, cJSON_CreateNumber(s->trace_end_s)))
            return LL_ENOMEM;
    }
    if (s->prefix_groups > 0) {
        if (!(o = cJSON_AddObjectToObject(load, "shared_prefix")) || ll_json_add_num(o, "groups", s->prefix_groups) ||
            ll_json_add_num(o, "tokens", s->prefix_tokens) ||
            !cJSON_AddStringToObject(o, "pick", s->prefix_seeded ? "seeded" : "round-robin"))
            return LL_ENOMEM;
    }
    return scn_sessions_to_json(load, s);
}

void scn_workload_free(scn_scenario *s)
{
    scn_sessions_free(s);
    free(s->trace_path);
    s->trace_path = NULL;
    scn_trace_free(s->trace);
    s->trace = NULL;
}

const char *scn_trace_format(const scn_scenario *s) { return s->trace ? s->trace->format : NULL; }

size_t scn_trace_rows(const scn_scenario *s) { return s->trace ? s->trace->rows.n : 0; }
