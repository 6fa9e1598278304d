/* workload.c: the scenario keys that shape the workload itself rather than
 * its levels: load.trace (replay a request trace, trace.c reads it),
 * load.shared_prefix (prompts that share one of G leading texts) and
 * load.sessions (multi-turn conversations, sessions.c). Their keys are rows
 * of the key table (scenario_keys.c); here are what they need beyond their
 * types (the trace's two forms and window, the prefix's short form), the
 * checks against the rest of the scenario, and the trace's level. The
 * prompts they make are prompts.c's.
 */
#include "scn_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_keys.h"

/* ---- load.trace ----------------------------------------------------------------- */

/* "trace": "FILE" or {"path":"FILE","speed":X,"window_s":[START,END]}
 * ("format" and "rows" are what the run line adds: accepted and ignored, so
 * a run's config loads back as it was). */
int scn_trace_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                   void *base)
{
    scn_scenario *s = base;
    (void)parent;
    if (cJSON_IsNull(v))
        return 0;
    if (cJSON_IsObject(v))
        return scn_read_shape(c, v, path, k->shape, base);
    return scn_get_str(c, v, path, k->what, &s->trace_path);
}

int scn_trace_set(const scn_key *k, void *base, const char *text)
{
    (void)k;
    return text[0] ? scn_set_str(&((scn_scenario *)base)->trace_path, text) : LL_EINVAL;
}

int scn_trace_write(cJSON *o, const scn_key *k, const void *base)
{
    cJSON *t;
    if (!((const scn_scenario *)base)->trace_path)
        return 0;
    return (t = cJSON_AddObjectToObject(o, k->name)) ? scn_write_shape(t, k->shape, base) : LL_ENOMEM;
}

int scn_trace_format_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_trace *t = ((const scn_scenario *)base)->trace;
    return cJSON_AddStringToObject(o, k->name, t ? t->format : "unread") ? 0 : LL_ENOMEM;
}

int scn_trace_rows_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_trace *t = ((const scn_scenario *)base)->trace;
    return ll_json_add_num(o, k->name, t ? (double)t->rows.n : 0);
}

/* "window_s": [START, END] seconds, 0 <= START < END (END 0: to the end). */
int scn_window_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                    void *base)
{
    scn_scenario *s = base;
    const cJSON *a = cJSON_IsArray(v) ? v->child : NULL, *b = a ? a->next : NULL;
    (void)parent;
    if (cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 ||
        !(b->valuedouble == 0 || b->valuedouble > a->valuedouble))
        return scn_bad(c, path, k->what);
    s->trace_start_s = a->valuedouble;
    s->trace_end_s = b->valuedouble;
    return 0;
}

/* "START:END" (scn_parse_window). */
int scn_window_set(const scn_key *k, void *base, const char *text)
{
    scn_scenario *s = base;
    (void)k;
    return scn_parse_window(text, &s->trace_start_s, &s->trace_end_s) ? LL_EINVAL : 0;
}

int scn_window_write(cJSON *o, const scn_key *k, const void *base)
{
    const scn_scenario *s = base;
    cJSON *w = cJSON_AddArrayToObject(o, k->name);
    if (!w || ll_json_push_num(w, s->trace_start_s) || ll_json_push_num(w, s->trace_end_s))
        return LL_ENOMEM;
    return 0;
}

/* ---- load.shared_prefix ------------------------------------------------------------ */

/* "GROUPS:TOKENS" (scn_parse_shared_prefix). */
int scn_prefix_set(const scn_key *k, void *base, const char *text)
{
    (void)k;
    return scn_parse_shared_prefix(text, base) ? LL_EINVAL : 0;
}

int scn_has_prefix(const void *base)
{
    return ((const scn_scenario *)base)->prefix_groups > 0;
}

/* ---- the trace's level, and the checks ----------------------------------------------- */

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
    scn_level_defaults(l);
    l->n_requests = (int)t->rows.n;
    l->rate_per_s = (double)t->rows.n / (span_s > 1e-3 ? span_s : 1e-3);
    l->arrival = SCN_ARRIVAL_TRACE;
    free(s->levels);
    s->levels = l;
    s->n_levels = 1;
    return 0;
}

int scn_workload_validate(scn_scenario *s, const scn_rd *c)
{
    char path[4096];
    int rc;
    if (!s->trace_path) {
        for (size_t i = 0; i < s->n_levels; i++)
            if (s->levels[i].arrival == SCN_ARRIVAL_TRACE)
                return scn_bad(c, "arrival", "\"poisson\" or \"constant\" (\"trace\" needs load.trace)");
        return scn_sessions_validate(s, c);
    }
    if (s->session_turns > 0)
        return scn_bad(c, "load.sessions", "nothing beside load.trace (a trace row is one request)");
    if (s->prefix_groups > 0)
        return scn_bad(c, "load.shared_prefix", "nothing beside load.trace (the trace's hash_ids say what is shared)");
    if (s->ab.enabled)
        return scn_bad(c, "load.trace", "no \"ab\" beside it (replay the trace against each side in turn)");
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
        (rc = scn_trace_load(path, s->trace_speed, s->trace_start_s, s->trace_end_s, &s->trace, c->err, c->errlen)))
        return rc;
    return trace_level(s);
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
