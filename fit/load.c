/* load.c: read records.jsonl into a fit_run (levels, requests, chunks, engine
 * steps), tolerating what an interrupted or partly failed run leaves behind.
 *
 * Chunks of all requests live in one array; requests keep offsets while the
 * file is read (the array moves as it grows) and get pointers at the end. */
#include "fit_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct load_ctx {
    fit_run *r;
    int saw_run;
    int fail;                 /* LL_E* code set by the callback */
    char *err;
    size_t errlen;
    size_t *chunk_off;        /* per request, while loading */
    size_t chunk_off_cap;
} load_ctx;

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return LL_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* Level index -> position in r->levels, creating a placeholder level for
 * requests whose level line is missing (an odd file, still usable). */
static int level_slot(fit_run *r, int level, size_t *pos)
{
    for (size_t i = 0; i < r->n_levels; i++)
        if (r->levels[i].level == level) {
            *pos = i;
            return 0;
        }
    if (grow((void **)&r->levels, &r->levels_cap, r->n_levels + 1, sizeof *r->levels))
        return LL_ENOMEM;
    fit_level_info *L = &r->levels[r->n_levels];
    memset(L, 0, sizeof *L);
    L->level = level;
    L->rate_per_s = NAN;
    L->start_ns = -1;
    L->end_ns = -1;
    L->n_ok_reported = -1;
    L->n_failed_reported = -1;
    L->closed_loop = 1;
    *pos = r->n_levels++;
    return 0;
}

static int on_run(load_ctx *c, const cJSON *o)
{
    fit_run *r = c->r;
    fit_run_info *in = &r->info;
    int64_t schema = ll_json_i64(o, "schema", -1);
    if (schema < 1) {
        ll_errf(c->err, c->errlen, "run line has no valid \"schema\"");
        return LL_EINVAL;
    }
    if (schema > LL_RECORDS_SCHEMA) {
        ll_errf(c->err, c->errlen,
                "records schema %lld is newer than this reader knows (%d); upgrade loadlaw",
                (long long)schema, LL_RECORDS_SCHEMA);
        return LL_EINVAL;
    }
    in->schema = (int)schema;
    const cJSON *tg = cJSON_GetObjectItemCaseSensitive(o, "target");
    const cJSON *law = cJSON_GetObjectItemCaseSensitive(o, "engine_law");
    char *run_json = cJSON_PrintUnformatted(o);
    r->s_version = dup_or_empty(ll_json_str(o, "version", ""));
    r->s_host = dup_or_empty(ll_json_str(o, "host", ""));
    r->s_url = dup_or_empty(ll_json_str(tg, "url", ""));
    r->s_model = dup_or_empty(ll_json_str(tg, "model", ""));
    r->s_endpoint = dup_or_empty(ll_json_str(tg, "endpoint", ""));
    r->s_engine = dup_or_empty(ll_json_str(o, "engine", ""));
    r->s_scenario = dup_or_empty(ll_json_str(o, "scenario", ""));
    r->s_run_json = run_json ? strdup(run_json) : strdup("{}");
    cJSON_free(run_json);
    if (!r->s_version || !r->s_host || !r->s_url || !r->s_model || !r->s_endpoint ||
        !r->s_engine || !r->s_scenario || !r->s_run_json)
        return LL_ENOMEM;
    in->version = r->s_version;
    in->host = r->s_host;
    in->target_url = r->s_url;
    in->model = r->s_model;
    in->endpoint = r->s_endpoint;
    in->engine_spec = r->s_engine;
    in->scenario = r->s_scenario;
    in->run_json = r->s_run_json;
    in->ranks = (int)ll_json_i64(o, "ranks", 1);
    in->epoch_wall_ns = ll_json_i64(o, "epoch_wall_ns", 0);
    in->bundled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tg, "bundled"));
    if (cJSON_IsObject(law) && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(law, "a_ms")) &&
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(law, "b_ms"))) {
        in->has_engine_law = 1;
        in->law_a_ms = ll_json_num(law, "a_ms", NAN);
        in->law_b_ms = ll_json_num(law, "b_ms", NAN);
        in->law_c_ms_per_ktok = ll_json_num(law, "c_ms_per_ktok", 0);
        in->law_p_ms_per_tok = ll_json_num(law, "p_ms_per_tok", 0);
    }
    c->saw_run = 1;
    return 0;
}

/* The level a level/level_end line names; *out NULL (counted as unknown)
 * when it names none. */
static int level_of(load_ctx *c, const cJSON *o, fit_level_info **out)
{
    size_t pos;
    int lv = (int)ll_json_i64(o, "level", -1);
    *out = NULL;
    if (lv < 0) {
        c->r->info.n_unknown++;
        return 0;
    }
    if (level_slot(c->r, lv, &pos))
        return LL_ENOMEM;
    *out = &c->r->levels[pos];
    return 0;
}

static int on_level(load_ctx *c, const cJSON *o)
{
    fit_level_info *L;
    int rc = level_of(c, o, &L);
    if (rc || !L)
        return rc;
    L->concurrency = (int)ll_json_i64(o, "concurrency", 0);
    if (L->concurrency < 0)
        L->concurrency = 0;
    const char *mode = ll_json_str(o, "mode", "closed");
    L->closed_loop = strcmp(mode, "open") != 0;
    L->rate_per_s = ll_json_num(o, "rate_per_s", NAN);
    L->n_requests_planned = (int)ll_json_i64(o, "n_requests", -1);
    L->n_warmup_planned = (int)ll_json_i64(o, "warmup", 0);
    int64_t s = ll_json_i64(o, "start_ns", -1);
    if (s >= 0 && (L->start_ns < 0 || s < L->start_ns))
        L->start_ns = s;
    return 0;
}

static int on_level_end(load_ctx *c, const cJSON *o)
{
    fit_level_info *L;
    int rc = level_of(c, o, &L);
    if (rc || !L)
        return rc;
    int64_t e = ll_json_i64(o, "end_ns", -1);
    if (e > L->end_ns)
        L->end_ns = e;
    L->has_end = 1;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "interrupted")))
        L->interrupted = 1;
    L->n_ok_reported = (int)ll_json_i64(o, "ok", -1);
    L->n_failed_reported = (int)ll_json_i64(o, "failed", -1);
    return 0;
}

static int cmp_chunk(const void *a, const void *b)
{
    const fit_chunk *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int on_request(load_ctx *c, const cJSON *o)
{
    fit_run *r = c->r;
    fit_request q;
    memset(&q, 0, sizeof q);
    q.level = (int)ll_json_i64(o, "level", -1);
    q.rank = (int)ll_json_i64(o, "rank", 0);
    q.id = ll_json_i64(o, "id", -1);
    q.warmup = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "warmup"));
    q.ok = strcmp(ll_json_str(o, "status", "error"), "ok") == 0;
    q.http_status = (int)ll_json_i64(o, "http_status", 0);
    q.intended_ns = ll_json_i64(o, "intended_ns", -1);
    q.send_ns = ll_json_i64(o, "send_ns", -1);
    q.header_ns = ll_json_i64(o, "header_ns", -1);
    q.first_token_ns = ll_json_i64(o, "first_token_ns", -1);
    q.first_think_ns = ll_json_i64(o, "first_think_ns", -1);
    q.first_answer_ns = ll_json_i64(o, "first_answer_ns", -1);
    q.end_ns = ll_json_i64(o, "end_ns", -1);
    q.prompt_tok = ll_json_i64(o, "prompt_tok", 0);
    q.think_tok = ll_json_i64(o, "think_tok", 0);
    q.answer_tok = ll_json_i64(o, "answer_tok", 0);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "usage");
    q.usage_prompt_tok = ll_json_i64(u, "prompt_tokens", -1);
    q.usage_completion_tok = ll_json_i64(u, "completion_tokens", -1);
    q.usage_reasoning_tok = ll_json_i64(u, "reasoning_tokens", -1);
    if (q.level < 0 || q.send_ns < 0 || q.end_ns < q.send_ns) {
        /* Without a level, a send time and an end, the request cannot be
         * placed on a timeline. */
        r->info.n_bad_requests++;
        return 0;
    }
    const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(o, "chunks");
    size_t n = cJSON_IsArray(chunks) ? (size_t)cJSON_GetArraySize(chunks) : 0;
    if (grow((void **)&r->chunks, &r->chunks_cap, r->n_chunks + n, sizeof *r->chunks))
        return LL_ENOMEM;
    size_t base = r->n_chunks, k = 0;
    int sorted = 1;
    const cJSON *ch;
    cJSON_ArrayForEach(ch, chunks) {
        const cJSON *t = cJSON_GetArrayItem(ch, 0), *tk = cJSON_GetArrayItem(ch, 1),
                    *kd = cJSON_GetArrayItem(ch, 2);
        if (!cJSON_IsNumber(t) || !cJSON_IsNumber(tk) || tk->valuedouble < 0 ||
            tk->valuedouble > 1e9) {
            r->info.n_bad_requests++;
            return 0; /* chunks written so far are overwritten by the next request */
        }
        fit_chunk *d = &r->chunks[base + k];
        d->t_ns = (int64_t)t->valuedouble;
        d->tokens = (int32_t)tk->valuedouble;
        d->kind = cJSON_IsString(kd) && strcmp(kd->valuestring, "t") == 0 ? FIT_CHUNK_THINK
                                                                          : FIT_CHUNK_ANSWER;
        if (k && d->t_ns < d[-1].t_ns)
            sorted = 0;
        k++;
    }
    if (!sorted)
        qsort(r->chunks + base, k, sizeof *r->chunks, cmp_chunk);
    /* first_token_ns may be null in a record that still has chunks (a writer
     * that lost it); the first chunk is the first token by definition. */
    if (q.first_token_ns < 0 && k)
        q.first_token_ns = r->chunks[base].t_ns;
    if (q.first_token_ns >= 0 && q.first_token_ns < q.send_ns)
        q.first_token_ns = q.send_ns;
    if (q.first_token_ns > q.end_ns)
        q.end_ns = q.first_token_ns;
    if (k && r->chunks[base + k - 1].t_ns > q.end_ns)
        q.end_ns = r->chunks[base + k - 1].t_ns;
    q.n_chunks = k;
    if (!q.ok) {
        q.error_class = strdup(ll_json_str(o, "error_class", "other"));
        q.error = strdup(ll_json_str(o, "error", ""));
        if (!q.error_class || !q.error) {
            free((char *)q.error_class);
            free((char *)q.error);
            return LL_ENOMEM;
        }
    } else {
        q.error_class = "";
        q.error = "";
    }
    if (grow((void **)&r->requests, &r->requests_cap, r->n_requests + 1, sizeof *r->requests) ||
        grow((void **)&c->chunk_off, &c->chunk_off_cap, r->n_requests + 1, sizeof *c->chunk_off)) {
        if (!q.ok) {
            free((char *)q.error_class);
            free((char *)q.error);
        }
        return LL_ENOMEM;
    }
    c->chunk_off[r->n_requests] = base;
    r->requests[r->n_requests++] = q;
    r->n_chunks += k;
    size_t pos;
    return level_slot(r, q.level, &pos);
}

static int on_step(load_ctx *c, const cJSON *o)
{
    fit_run *r = c->r;
    fit_engine_step s;
    s.start_ns = ll_json_i64(o, "start_ns", -1);
    s.dur_ns = ll_json_i64(o, "dur_ns", -1);
    s.n_decode = (int)ll_json_i64(o, "n_decode", -1);
    s.n_running = (int)ll_json_i64(o, "n_running", -1);
    s.prefill_tok = (int)ll_json_i64(o, "prefill_tok", -1);
    s.ctx_tok = ll_json_i64(o, "ctx_tok", 0);
    if (s.start_ns < 0 || s.dur_ns < 0 || s.n_decode < 0 || s.prefill_tok < 0) {
        r->info.n_unknown++;
        return 0;
    }
    if (grow((void **)&r->steps, &r->steps_cap, r->n_steps + 1, sizeof *r->steps))
        return LL_ENOMEM;
    r->steps[r->n_steps++] = s;
    return 0;
}

static int on_line(const cJSON *o, size_t line_no, void *vctx)
{
    load_ctx *c = vctx;
    const char *type = ll_json_str(o, "type", "");
    int rc = 0;
    c->r->info.n_lines++;
    if (!c->saw_run && strcmp(type, "run") != 0) {
        ll_errf(c->err, c->errlen, "line %zu: expected the \"run\" line first, got type \"%s\"",
                line_no, type);
        rc = LL_EINVAL;
    } else if (strcmp(type, "run") == 0) {
        if (c->saw_run)
            c->r->info.n_unknown++; /* a second run line (appended run): keep the first */
        else
            rc = on_run(c, o);
    } else if (strcmp(type, "level") == 0) {
        rc = on_level(c, o);
    } else if (strcmp(type, "level_end") == 0) {
        rc = on_level_end(c, o);
    } else if (strcmp(type, "request") == 0) {
        rc = on_request(c, o);
    } else if (strcmp(type, "step") == 0) {
        rc = on_step(c, o);
    } else {
        c->r->info.n_unknown++; /* profile, telemetry, newer types: not ours */
    }
    if (rc == LL_ENOMEM)
        ll_errf(c->err, c->errlen, "out of memory reading line %zu", line_no);
    if (rc)
        c->fail = rc;
    return rc ? 1 : 0;
}

static int cmp_level(const void *a, const void *b)
{
    const fit_level_info *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
    return (x->level > y->level) - (x->level < y->level);
}

/* Fill what level lines did not say from the requests: a missing start (no
 * level line) or end (interrupted: no level_end). */
static void finish_levels(fit_run *r)
{
    for (size_t i = 0; i < r->n_levels; i++) {
        fit_level_info *L = &r->levels[i];
        int64_t lo = -1, hi = -1;
        for (size_t j = 0; j < r->n_requests; j++) {
            const fit_request *q = &r->requests[j];
            if (q->level != L->level)
                continue;
            if (lo < 0 || q->send_ns < lo)
                lo = q->send_ns;
            if (q->end_ns > hi)
                hi = q->end_ns;
        }
        if (L->start_ns < 0 || (lo >= 0 && lo < L->start_ns))
            L->start_ns = lo >= 0 ? lo : 0;
        if (!L->has_end) {
            L->interrupted = 1;
            L->end_ns = hi;
        }
        if (hi > L->end_ns)
            L->end_ns = hi;
        if (L->end_ns < L->start_ns)
            L->end_ns = L->start_ns;
    }
    qsort(r->levels, r->n_levels, sizeof *r->levels, cmp_level);
}

int fit_load_run(const char *path, fit_run **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !*path) {
        ll_errf(err, errlen, "no run directory given");
        return LL_EINVAL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    char *file = NULL;
    size_t plen = strlen(path);
    file = malloc(plen + sizeof "/records.jsonl");
    if (!file)
        return LL_ENOMEM;
    if (S_ISDIR(st.st_mode))
        snprintf(file, plen + sizeof "/records.jsonl", "%s/records.jsonl", path);
    else
        memcpy(file, path, plen + 1);

    int rc;
    load_ctx c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.errlen = errlen;
    c.r = calloc(1, sizeof *c.r);
    if (!c.r) {
        rc = LL_ENOMEM;
        goto fail;
    }
    c.r->info.run_json = "{}";
    c.r->info.version = c.r->info.host = c.r->info.target_url = c.r->info.model = "";
    c.r->info.endpoint = c.r->info.engine_spec = c.r->info.scenario = "";
    rc = ll_jsonl_foreach(file, on_line, &c, &c.r->info.n_truncated, err, errlen);
    if (c.fail) {
        rc = c.fail;
        goto fail;
    }
    if (rc)
        goto fail;
    if (!c.saw_run) {
        ll_errf(err, errlen, "%s: no \"run\" line (empty or not a loadlaw records file)", file);
        rc = LL_EINVAL;
        goto fail;
    }
    for (size_t i = 0; i < c.r->n_requests; i++)
        c.r->requests[i].chunks = c.r->chunks + c.chunk_off[i];
    finish_levels(c.r);
    free(c.chunk_off);
    free(file);
    *out = c.r;
    return 0;
fail:
    if (c.r) {
        for (size_t i = 0; i < c.r->n_requests; i++)
            c.r->requests[i].chunks = NULL;
        fit_run_free(c.r);
    }
    free(c.chunk_off);
    free(file);
    return rc;
}

void fit_run_free(fit_run *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_requests; i++)
        if (!r->requests[i].ok) {
            free((char *)r->requests[i].error_class);
            free((char *)r->requests[i].error);
        }
    free(r->requests);
    free(r->chunks);
    free(r->levels);
    free(r->steps);
    free(r->s_version);
    free(r->s_host);
    free(r->s_url);
    free(r->s_model);
    free(r->s_endpoint);
    free(r->s_engine);
    free(r->s_scenario);
    free(r->s_run_json);
    free(r);
}

const fit_run_info *fit_run_get_info(const fit_run *r) { return &r->info; }
size_t fit_run_n_levels(const fit_run *r) { return r->n_levels; }
const fit_level_info *fit_run_level(const fit_run *r, size_t i)
{
    return i < r->n_levels ? &r->levels[i] : NULL;
}
size_t fit_run_n_requests(const fit_run *r) { return r->n_requests; }
const fit_request *fit_run_request(const fit_run *r, size_t i)
{
    return i < r->n_requests ? &r->requests[i] : NULL;
}
size_t fit_run_n_steps(const fit_run *r) { return r->n_steps; }
const fit_engine_step *fit_run_step(const fit_run *r, size_t i)
{
    return i < r->n_steps ? &r->steps[i] : NULL;
}
