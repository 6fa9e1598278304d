/* load.c: read records.jsonl into a fit_run (levels, requests, chunks, engine
 * steps) through the records module's reader (records.h), tolerating what an
 * interrupted or partly failed run leaves behind. Requests and steps are
 * kept as the reader's own structs (ll_rec_request, ll_rec_step).
 *
 * The reader parses and range-checks every record (and counts what it
 * rejects); this file only stores them and makes each request's times
 * consistent for the timeline, counting every time it has to move.
 * Chunks of all requests live in one array; requests keep offsets while the
 * file is read (the array moves as it grows) and get pointers at the end.
 *
 * A run of more than FIT_RESIDENT_EVENTS chunk events is paged
 * (load_paged.c): every request line's offset is recorded from the start, so
 * at the switch what was held is let go and only the references stay. What
 * run-wide figures need of each request (fit_run_tally, each level's first
 * send and last end) is gathered here as the file is read, in file order,
 * for a paged run and one held whole alike. */
#include "fit_internal.h"
#include "load_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A level's first send and last end, for finish_levels. */
typedef struct level_ends {
    int64_t lo, hi;
} level_ends;

typedef struct load_ctx {
    fit_run *r;
    LL_VEC(size_t) chunk_off;  /* per request, while loading */
    LL_VEC(level_ends) ends;   /* per r->levels entry, before they are sorted */
    fit_req_ref_vec refs;      /* every request kept, in file order */
    size_t bound;              /* chunk events held at most (FIT_RESIDENT_EVENTS) */
    size_t steps_keep;         /* engine step records kept (FIT_ENGINE_STEPS_KEEP) */
    int paged;
    uint64_t line_off;         /* the line being read (on_line) */
    size_t line_len;
    fit_rec_chunk_vec scratch; /* a paged run's request chunks, while read */
    char *err;
    size_t errlen;
} load_ctx;

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

/* Level index -> position in r->levels, creating a placeholder level for
 * requests whose level line is missing (an odd file, still usable). */
static int level_slot(load_ctx *c, int level, size_t *pos)
{
    fit_run *r = c->r;
    for (size_t i = 0; i < r->levels.n; i++)
        if (r->levels.v[i].level == level) {
            *pos = i;
            return 0;
        }
    fit_level_info L;
    memset(&L, 0, sizeof L);
    L.level = level;
    L.rate_per_s = NAN;
    L.start_ns = -1;
    L.end_ns = -1;
    L.n_requests_planned = -1;
    L.n_ok_reported = -1;
    L.n_failed_reported = -1;
    L.closed_loop = 1;
    L.repeat = L.pair = L.seq = -1;
    if (ll_vec_reserve(&c->ends, r->levels.n + 1) || ll_vec_reserve(&r->level_tally, r->levels.n + 1) ||
        ll_vec_push(&r->levels, L))
        return LL_ENOMEM;
    c->ends.v[c->ends.n++] = (level_ends){-1, -1};
    if (ll_vec_push(&r->level_tally, ((fit_level_tally){level, INT64_MAX, INT64_MIN, 0})))
        return LL_ENOMEM;
    *pos = r->levels.n - 1;
    return 0;
}

static int on_run(const ll_rec_run *run, void *vctx)
{
    load_ctx *c = vctx;
    fit_run *r = c->r;
    fit_run_info *in = &r->info;
    in->schema = run->schema;
    char *rj = fit_load_run_line_json(run);
    r->s_version = dup_or_empty(run->version);
    r->s_host = dup_or_empty(run->host);
    r->s_url = dup_or_empty(run->url);
    r->s_model = dup_or_empty(run->model);
    r->s_endpoint = dup_or_empty(run->endpoint);
    r->s_engine = dup_or_empty(run->engine);
    r->s_backend = dup_or_empty(run->backend);
    r->s_scenario = dup_or_empty(run->scenario);
    r->s_run_json = rj ? strdup(rj) : NULL;
    cJSON_free(rj);
    if (!r->s_version || !r->s_host || !r->s_url || !r->s_model || !r->s_endpoint ||
        !r->s_engine || !r->s_backend || !r->s_scenario || !r->s_run_json)
        return LL_ENOMEM;
    in->version = r->s_version;
    in->host = r->s_host;
    in->target_url = r->s_url;
    in->model = r->s_model;
    in->endpoint = r->s_endpoint;
    in->engine_spec = r->s_engine;
    in->backend = r->s_backend;
    in->scenario = r->s_scenario;
    in->run_json = r->s_run_json;
    in->asked = run->asked;
    in->ranks = run->ranks;
    in->epoch_wall_ns = run->epoch_wall_ns;
    in->bundled = run->bundled;
    if (run->law.present && isfinite(run->law.a_ms) && isfinite(run->law.b_ms)) {
        in->has_engine_law = 1;
        in->law_a_ms = run->law.a_ms;
        in->law_b_ms = run->law.b_ms;
        in->law_c_ms_per_ktok = run->law.c_ms_per_ktok;
        in->law_p_ms_per_tok = run->law.p_ms_per_tok;
        in->engine_law = run->law;
        /* a run line older than the time scale played its law as written */
        in->time_scale = run->law.time_scale > 0 ? run->law.time_scale : 1.0;
    }
    return 0;
}

static int on_level(const ll_rec_level *lv, void *vctx)
{
    load_ctx *c = vctx;
    size_t pos;
    if (level_slot(c, lv->level, &pos))
        return LL_ENOMEM;
    fit_level_info *L = &c->r->levels.v[pos];
    L->concurrency = lv->concurrency;
    L->closed_loop = !lv->open_loop;
    L->rate_per_s = lv->open_loop && lv->rate_per_s > 0 ? lv->rate_per_s : NAN;
    L->n_requests_planned = lv->n_requests;
    L->n_warmup_planned = lv->warmup;
    L->find_role = lv->find_role;
    if (lv->ab_tagged) {
        L->repeat = lv->repeat;
        L->pair = lv->pair;
        L->seq = lv->seq;
    }
    if (lv->start_ns >= 0 && (L->start_ns < 0 || lv->start_ns < L->start_ns))
        L->start_ns = lv->start_ns;
    return 0;
}

static int on_level_end(const ll_rec_level_end *le, void *vctx)
{
    load_ctx *c = vctx;
    size_t pos;
    if (level_slot(c, le->level, &pos))
        return LL_ENOMEM;
    fit_level_info *L = &c->r->levels.v[pos];
    if (le->end_ns > L->end_ns)
        L->end_ns = le->end_ns;
    L->has_end = 1;
    L->interrupted |= le->interrupted;
    L->profiled |= le->profiled;
    L->n_ok_reported = le->ok;
    L->n_failed_reported = le->failed;
    if (le->client.present)
        L->client = le->client;
    return 0;
}

static int cmp_chunk(const void *a, const void *b)
{
    const ll_rec_chunk *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

void fit_load_sort_chunks(ll_rec_chunk *c, size_t k)
{
    for (size_t i = 1; i < k; i++)
        if (c[i].t_ns < c[i - 1].t_ns) {
            qsort(c, k, sizeof *c, cmp_chunk);
            return;
        }
}

/* Keep send <= first token <= end and the last chunk <= end, so the timeline
 * never sees a negative span; each move is counted (fit_run_info.n_clamped). */
static void clamp_times(ll_rec_request *q, const ll_rec_chunk *ch, size_t k, size_t *n_clamped)
{
    /* first_token_ns may be null in a record that still has chunks (a writer
     * that lost it); the first chunk is the first token by definition. */
    if (q->first_token_ns < 0 && k)
        q->first_token_ns = ch[0].t_ns;
    if (q->first_token_ns >= 0 && q->first_token_ns < q->send_ns) {
        q->first_token_ns = q->send_ns;
        (*n_clamped)++;
    }
    if (q->first_token_ns > q->end_ns) {
        q->end_ns = q->first_token_ns;
        (*n_clamped)++;
    }
    if (k && ch[k - 1].t_ns > q->end_ns) {
        q->end_ns = ch[k - 1].t_ns;
        (*n_clamped)++;
    }
}

void fit_load_keep(const ll_rec_request *rq, ll_rec_request *q, ll_rec_chunk *dst, size_t *n_clamped)
{
    size_t k = rq->n_chunks;
    *q = *rq;
    q->outputs = NULL;
    q->chunks = NULL;
    if (q->counts == LL_COUNTS_STREAM)
        q->stream_think_tok = q->stream_answer_tok = -1;
    if (k)
        memcpy(dst, rq->chunks, k * sizeof *dst);
    fit_load_sort_chunks(dst, k);
    clamp_times(q, dst, k, n_clamped);
}

/* What run-wide figures read of q, its chunks ch sorted (fit_run_tally, the
 * level's ends and chunk times). */
static void tally_request(load_ctx *c, const ll_rec_request *q, const ll_rec_chunk *ch, size_t level_pos)
{
    fit_run_tally *t = &c->r->tally;
    level_ends *e = &c->ends.v[level_pos];
    fit_level_tally *lt = &c->r->level_tally.v[level_pos];
    int ok = fit_request_ok(q);
    if (q->n_chunks && ch[0].t_ns < lt->first_chunk_ns)
        lt->first_chunk_ns = ch[0].t_ns;
    if (q->n_chunks && ch[q->n_chunks - 1].t_ns > lt->last_chunk_ns)
        lt->last_chunk_ns = ch[q->n_chunks - 1].t_ns;
    if (q->work.kind == LL_WORK_SESSION && q->work.turn > lt->max_turn)
        lt->max_turn = q->work.turn;
    t->n_requests++;
    t->n_failed += !ok;
    t->n_warmup += q->warmup != 0;
    t->n_no_tokens += ok && q->n_chunks == 0;
    if (e->lo < 0 || q->send_ns < e->lo)
        e->lo = q->send_ns;
    if (q->end_ns > e->hi)
        e->hi = q->end_ns;
    if (!ok || q->warmup)
        return;
    t->n_ok_measured++;
    int64_t got = fit_request_tokens_got(q);
    if (q->max_tokens <= 0 || got <= q->max_tokens)
        return;
    t->n_over_max++;
    if (got - q->max_tokens > t->over_got_tok - t->over_cap_tok) {
        t->over_got_tok = got;
        t->over_cap_tok = q->max_tokens;
    }
}

static int on_line(uint64_t off, size_t len, void *vctx)
{
    load_ctx *c = vctx;
    c->line_off = off;
    c->line_len = len;
    return 0;
}

/* Past the bound: what is held becomes references (already recorded). */
static int go_paged(load_ctx *c)
{
    if (!(c->r->paged = calloc(1, sizeof *c->r->paged)))
        return LL_ENOMEM;
    fit_paged_begin(c->r);
    ll_vec_free(&c->chunk_off);
    c->paged = 1;
    return 0;
}

/* A paged run keeps the request's reference and its figures only. */
static int on_request_paged(load_ctx *c, const ll_rec_request *rq, size_t pos)
{
    ll_rec_request q;
    if (ll_vec_reserve(&c->scratch, rq->n_chunks + 1))
        return LL_ENOMEM;
    fit_load_keep(rq, &q, c->scratch.v, &c->r->info.n_clamped);
    tally_request(c, &q, c->scratch.v, pos);
    return 0;
}

/* The record as fit keeps it (fit.h fit_run_request): its chunks copied
 * into the run's one array (sorted by arrival), its error copied, its
 * outputs left to fit_outputs.h, its times made consistent. */
static int on_request(const ll_rec_request *rq, void *vctx)
{
    load_ctx *c = vctx;
    fit_run *r = c->r;
    size_t pos, k = rq->n_chunks;
    int rc;
    if (!fit_load_placeable(rq)) {
        /* Without a send time and an end after it, the request cannot be
         * placed on a timeline. */
        r->info.n_bad_requests++;
        return 0;
    }
    if (c->line_len > UINT32_MAX) { /* a reference holds 32 bits of length */
        ll_errf(c->err, c->errlen, "a request line of %zu bytes (more than 4 GiB)", c->line_len);
        return LL_EINVAL;
    }
    LL_TRY(level_slot(c, rq->level, &pos));
    LL_TRY(ll_vec_push(&c->refs, ((fit_req_ref){c->line_off, (uint32_t)c->line_len, rq->level})));
    if (!c->paged && r->chunks.n + k > c->bound)
        LL_TRY(go_paged(c));
    if (c->paged)
        return on_request_paged(c, rq, pos);
    ll_rec_request q;
    size_t base = r->chunks.n;
    LL_TRY(ll_vec_reserve(&r->chunks, base + k + 1));
    fit_load_keep(rq, &q, r->chunks.v + base, &r->info.n_clamped);
    q.error = NULL;
    if (rq->error && !(q.error = strdup(rq->error)))
        return LL_ENOMEM;
    if ((rc = ll_vec_push(&c->chunk_off, base)) || (rc = ll_vec_push(&r->requests, q))) {
        if (c->chunk_off.n > r->requests.n)
            c->chunk_off.n--;
        free(q.error);
        return rc;
    }
    tally_request(c, &q, r->chunks.v + base, pos);
    r->chunks.n += k;
    return 0;
fail:
    return rc;
}

/* The engine's step records (a bundled engine's run: one a step, so one a
 * token at C = 1): every one up to FIT_ENGINE_STEPS_KEEP, then, as the
 * chart sample and the law's steps do, every second one kept is let go and
 * the stride doubles: 1 in steps_stride of them, evenly through the run. */
static int on_step(const ll_rec_step *st, void *vctx)
{
    load_ctx *c = vctx;
    fit_run *r = c->r;
    if (st->start_ns < 0) {
        r->info.n_unknown++;
        return 0;
    }
    if (r->steps_seen++ % r->steps_stride)
        return 0;
    if (ll_vec_push(&r->steps, *st))
        return LL_ENOMEM;
    if (r->steps.n > c->steps_keep) {
        for (size_t i = 0; 2 * i < r->steps.n; i++)
            r->steps.v[i] = r->steps.v[2 * i];
        r->steps.n = (r->steps.n + 1) / 2;
        r->steps_stride *= 2;
    }
    return 0;
}

/* A scraped sample the fit uses (fit_server_kind), its series interned:
 * a run has tens of series, so a linear search is enough. */
static int on_metric(const ll_rec_metric *m, void *vctx)
{
    load_ctx *c = vctx;
    fit_run *r = c->r;
    int kind = fit_server_kind(m->name, m->labels);
    char key[2048];
    if (kind == FIT_SMK_NONE || m->t_ns < 0)
        return 0;
    snprintf(key, sizeof key, "%s\x1f%s\x1f%s", m->src, m->name, m->labels);
    size_t i = 0;
    while (i < r->series.n && strcmp(r->series.v[i], key) != 0)
        i++;
    if (i == r->series.n) {
        char *k = strdup(key);
        if (!k || ll_vec_push(&r->series, k)) {
            free(k);
            return LL_ENOMEM;
        }
    }
    fit_server_sample s = {.t_ns = m->t_ns, .kind = kind, .series = (uint32_t)i, .value = m->value};
    return ll_vec_push(&r->server, s);
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
static void finish_levels(fit_run *r, const level_ends *ends)
{
    for (size_t i = 0; i < r->levels.n; i++) {
        fit_level_info *L = &r->levels.v[i];
        int64_t lo = ends[i].lo, hi = ends[i].hi;
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
    if (r->levels.n > 1) /* a run line alone leaves no levels: qsort(NULL, 0) is undefined */
        qsort(r->levels.v, r->levels.n, sizeof *r->levels.v, cmp_level);
}

/* RUN_DIR/records.jsonl, or path itself when it names a file. */
static int records_path(const char *path, char **out, char *err, size_t errlen)
{
    struct stat st;
    if (!path || !*path) {
        ll_errf(err, errlen, "no run directory given");
        return LL_EINVAL;
    }
    if (stat(path, &st) != 0) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    size_t n = strlen(path) + sizeof "/records.jsonl";
    if (!(*out = malloc(n)))
        return LL_ENOMEM;
    snprintf(*out, n, S_ISDIR(st.st_mode) ? "%s/records.jsonl" : "%s", path);
    return 0;
}

static void load_ctx_free(load_ctx *c)
{
    ll_vec_free(&c->chunk_off);
    ll_vec_free(&c->ends);
    ll_vec_free(&c->refs);
    ll_vec_free(&c->scratch);
}

/* What the read leaves: the info's counts, the levels finished, chunk
 * pointers (held whole) or the references ordered (paged). */
static int load_finish(load_ctx *c, const ll_rec_read_stats *st, const char *file, char *err, size_t errlen)
{
    fit_run_info *in = &c->r->info;
    in->n_lines = st->n_lines;
    in->n_truncated = st->n_truncated;
    in->n_unknown += st->n_unknown;
    in->n_rejected = st->n_rejected;
    in->n_out_of_range = st->n_out_of_range;
    if (!c->paged)
        for (size_t i = 0; i < c->r->requests.n; i++)
            c->r->requests.v[i].chunks = c->r->chunks.v + c->chunk_off.v[i];
    finish_levels(c->r, c->ends.v);
    return c->paged ? fit_paged_finish(c->r, &c->refs, file, err, errlen) : 0;
}

int fit_load_run_opts(const char *path, const fit_load_opts *o, fit_run **out, char *err, size_t errlen)
{
    static const ll_rec_handlers h = {.on_run = on_run,
                                      .on_level = on_level,
                                      .on_level_end = on_level_end,
                                      .on_request = on_request,
                                      .on_step = on_step,
                                      .on_metric = on_metric,
                                      .on_line = on_line};
    char *file = NULL;
    ll_rec_read_stats st;
    load_ctx c;
    int rc;
    *out = NULL;
    memset(&c, 0, sizeof c);
    c.bound = o->resident_events;
    c.steps_keep = o->engine_steps_keep ? o->engine_steps_keep : FIT_ENGINE_STEPS_KEEP;
    c.err = err;
    c.errlen = errlen;
    LL_TRY(records_path(path, &file, err, errlen));
    if (!(c.r = calloc(1, sizeof *c.r))) {
        rc = LL_ENOMEM;
        goto fail;
    }
    c.r->steps_stride = 1;
    fit_run_info *in = &c.r->info;
    in->run_json = "{}";
    in->version = in->host = in->target_url = in->model = "";
    in->endpoint = in->engine_spec = in->backend = in->scenario = "";
    in->time_scale = NAN;
    ll_rec_asked_of(NULL, &in->asked);
    if (o->resident_events == 0)
        LL_TRY(go_paged(&c));
    rc = ll_rec_read(file, &h, &c, &st, err, errlen);
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory reading %s", file);
    if (rc || (rc = load_finish(&c, &st, file, err, errlen)))
        goto fail;
    load_ctx_free(&c);
    free(file);
    *out = c.r;
    return 0;
fail:
    fit_run_free(c.r);
    load_ctx_free(&c);
    free(file);
    return rc;
}

int fit_load_run(const char *path, fit_run **out, char *err, size_t errlen)
{
    fit_load_opts o = {.resident_events = FIT_RESIDENT_EVENTS, .engine_steps_keep = FIT_ENGINE_STEPS_KEEP};
    return fit_load_run_opts(path, &o, out, err, errlen);
}

void fit_run_free(fit_run *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->requests.n; i++)
        free(r->requests.v[i].error);
    ll_vec_free(&r->requests);
    ll_vec_free(&r->chunks);
    fit_paged_free(r->paged);
    ll_vec_free(&r->levels);
    ll_vec_free(&r->level_tally);
    ll_vec_free(&r->steps);
    ll_vec_free(&r->server);
    for (size_t i = 0; i < r->series.n; i++)
        free(r->series.v[i]);
    ll_vec_free(&r->series);
    free(r->s_version);
    free(r->s_host);
    free(r->s_url);
    free(r->s_model);
    free(r->s_endpoint);
    free(r->s_engine);
    free(r->s_backend);
    free(r->s_scenario);
    free(r->s_run_json);
    free(r);
}

const fit_run_info *fit_run_get_info(const fit_run *r) { return &r->info; }
size_t fit_run_n_levels(const fit_run *r) { return r->levels.n; }
const fit_level_info *fit_run_level(const fit_run *r, size_t i)
{
    return i < r->levels.n ? &r->levels.v[i] : NULL;
}
size_t fit_run_n_requests(const fit_run *r) { return r->paged ? r->paged->refs.n : r->requests.n; }
const ll_rec_request *fit_run_request(const fit_run *r, size_t i)
{
    if (r->paged)
        return fit_paged_request(r, i);
    return i < r->requests.n ? &r->requests.v[i] : NULL;
}
const fit_run_tally *fit_run_get_tally(const fit_run *run) { return &run->tally; }
const fit_level_tally *fit_run_level_tally(const fit_run *run, int level)
{
    for (size_t i = 0; i < run->level_tally.n; i++)
        if (run->level_tally.v[i].level == level)
            return &run->level_tally.v[i];
    return NULL;
}
size_t fit_run_n_steps(const fit_run *r) { return r->steps.n; }
size_t fit_run_steps_stride(const fit_run *r) { return r->steps_stride; }
size_t fit_run_n_steps_seen(const fit_run *r) { return r->steps_seen; }
const ll_rec_step *fit_run_step(const fit_run *r, size_t i)
{
    return i < r->steps.n ? &r->steps.v[i] : NULL;
}

/* Chunks: a run read whole holds every request's chunks (the pointer each
 * request carries); fit_chunks_of hands those out as they are. A paged run
 * decodes them from the file (load_paged.c). */
int fit_chunks_of(const fit_run *run, const ll_rec_request *q, fit_chunks *c)
{
    if (run && run->paged)
        return fit_paged_chunks_of(run, q, c);
    c->v = q->chunks;
    c->n = q->n_chunks;
    return 0;
}

void fit_chunks_free(fit_chunks *c)
{
    ll_vec_free(&c->buf);
    c->v = NULL;
    c->n = 0;
}
