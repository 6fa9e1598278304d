/* records_read.c: the records.jsonl reader (common/records.h): each line
 * parsed with cJSON_ParseWithOpts (ll_jsonl_foreach), turned into the typed
 * record, and handed to the caller's handler; ll_rec_read_line does the same
 * for one line a caller reads again (where it lies: on_line).
 *
 * Hostile or damaged files are data, not crashes: a value a field cannot hold
 * (a time of 1e300 or beyond +/- 2^62 ns, a negative count, a chunk of more
 * than 2^31 - 1 tokens) is counted and drops its record instead of being cast
 * (casting an out-of-range double to an integer is undefined behaviour); a
 * record without a required key is dropped and counted; a truncated last line
 * (a killed writer) is skipped and counted; a newer schema is refused. */
#include "common.h"
#include "records_outputs.h"

#include <math.h>
#include <string.h>

/* Times beyond +/- 2^62 ns (146 years) are not times a run can hold. */
#define TIME_MAX_NS ((double)(INT64_C(1) << 62))

typedef struct reader {
    const char *path;
    const ll_rec_handlers *h;
    void *ctx;
    ll_rec_read_stats *st;
    int saw_run;
    LL_VEC(ll_rec_chunk) chunks;
    ll_jsonl_pos pos;         /* the line being read */
    char *err;
    size_t errlen;
    /* the record being read */
    int missing;              /* a required key absent or of the wrong type */
    size_t out_of_range;      /* values that do not fit their field */
} reader;

/* A number from obj[key] in [lo, hi], truncated to an integer. Absent or null:
 * dflt (a missing required key marks the record). Not a number, or outside
 * [lo, hi] (1e300, NaN from a hostile file): counted, dflt. */
static int64_t rd_int(reader *r, const cJSON *o, const char *key, int required, double lo, double hi,
                      int64_t dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) {
        if (required)
            r->missing = 1;
        return dflt;
    }
    if (!cJSON_IsNumber(it)) {
        r->missing = 1;
        return dflt;
    }
    double v = it->valuedouble;
    if (!(v >= lo && v <= hi)) {
        r->out_of_range++;
        return dflt;
    }
    return (int64_t)v;
}

static int64_t rd_time(reader *r, const cJSON *o, const char *key, int required)
{
    return rd_int(r, o, key, required, -TIME_MAX_NS, TIME_MAX_NS, -1);
}

static int rd_count(reader *r, const cJSON *o, const char *key, int required)
{
    return (int)rd_int(r, o, key, required, 0, INT32_MAX, 0);
}

/* Seconds in [0, 1e9] (a level lasts less than 30 years); else counted, NAN. */
static double rd_seconds(reader *r, const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it))
        return NAN;
    if (!(it->valuedouble >= 0 && it->valuedouble <= 1e9)) {
        r->out_of_range++;
        return NAN;
    }
    return it->valuedouble;
}

static int rd_bool(const cJSON *o, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static double rd_double(const cJSON *o, const char *key, double dflt)
{
    return ll_json_num(o, key, dflt);
}

/* A request's "server" timing: each member in range (rd_seconds' bounds)
 * or not said. */
static ll_rec_srv_timing rd_srv_timing(reader *r, const cJSON *o)
{
    ll_rec_srv_timing t = ll_rec_srv_timing_none();
    if (!cJSON_IsObject(o))
        return t;
    t.present = 1;
    double *ms[] = {&t.ttft_ms, &t.queue_ms, &t.prompt_ms, &t.decode_ms, &t.tpot_ms};
    const char *keys[] = {"ttft_ms", "queue_ms", "prompt_ms", "decode_ms", "tpot_ms"};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        *ms[i] = rd_seconds(r, o, keys[i]);
    t.prompt_n = rd_int(r, o, "prompt_n", 0, 0, TIME_MAX_NS, -1);
    t.decode_n = rd_int(r, o, "decode_n", 0, 0, TIME_MAX_NS, -1);
    return t;
}

/* Start of a record. */
static void rd_begin(reader *r)
{
    r->missing = 0;
    r->out_of_range = 0;
}

/* End of a record: 1 when it may be handed over, 0 when it is dropped (counted). */
static int rd_keep(reader *r)
{
    if (!r->missing && !r->out_of_range)
        return 1;
    r->st->n_rejected++;
    r->st->n_out_of_range += r->out_of_range;
    return 0;
}

/* An integer in [lo, 2^31 - 1] from a JSON number, or -1. */
static int rd_law_int(const cJSON *it, int lo)
{
    if (!cJSON_IsNumber(it))
        return -1;
    double v = it->valuedouble;
    return v >= lo && v <= INT32_MAX && v == floor(v) ? (int)v : -1;
}

/* engine_law's optional shape in N: "buckets" (strictly increasing integers
 * >= 1, at most LL_REC_LAW_MAX_BUCKETS) and "knee_n" (>= 1) with "knee_b_ms"
 * (>= 0). Absent: none. 0, or -1 when present but not of that form. */
static int rd_law_shape(const cJSON *l, ll_rec_engine_law *law)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(l, "buckets");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(l, "knee_n");
    if (b) {
        int n = cJSON_IsArray(b) ? cJSON_GetArraySize(b) : -1;
        if (n < 1 || n > LL_REC_LAW_MAX_BUCKETS)
            return -1;
        for (const cJSON *it = b->child; it; it = it->next) {
            int v = rd_law_int(it, 1);
            if (v < 0 || (law->n_buckets > 0 && v <= law->buckets[law->n_buckets - 1]))
                return -1;
            law->buckets[law->n_buckets++] = v;
        }
    }
    if (k) {
        law->knee_n = rd_law_int(k, 1);
        law->knee_b_ms = rd_double(l, "knee_b_ms", NAN);
        if (law->knee_n < 0 || !(law->knee_b_ms >= 0) || !isfinite(law->knee_b_ms))
            return -1;
    }
    return 0;
}

static void rd_law(const cJSON *o, ll_rec_engine_law *law)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, "engine_law");
    memset(law, 0, sizeof *law);
    law->time_scale = NAN;
    if (!cJSON_IsObject(l) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l, "a_ms")) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l, "b_ms")))
        return;
    law->present = 1;
    law->a_ms = rd_double(l, "a_ms", NAN);
    law->b_ms = rd_double(l, "b_ms", NAN);
    law->c_ms_per_ktok = rd_double(l, "c_ms_per_ktok", 0);
    law->p_ms_per_tok = rd_double(l, "p_ms_per_tok", 0);
    law->time_scale = rd_double(l, "time_scale", NAN);
    if (rd_law_shape(l, law)) { /* a shape that cannot be the engine's: no law, not a wrong one */
        memset(law, 0, sizeof *law);
        law->time_scale = NAN;
    }
}

static int rd_run(reader *r, const cJSON *o)
{
    ll_rec_run run;
    memset(&run, 0, sizeof run);
    const cJSON *tg = cJSON_GetObjectItemCaseSensitive(o, "target");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "schema");
    if (!cJSON_IsNumber(sc) || !(sc->valuedouble >= 1 && sc->valuedouble <= INT32_MAX)) {
        ll_errf(r->err, r->errlen, "%s: run line has no valid \"schema\"", r->path);
        return LL_EINVAL;
    }
    run.schema = (int)sc->valuedouble;
    if (run.schema > LL_RECORDS_SCHEMA) {
        ll_errf(r->err, r->errlen, "%s: records schema %d is newer than this reader knows (%d); upgrade loadlaw",
                r->path, run.schema, LL_RECORDS_SCHEMA);
        return LL_EINVAL;
    }
    rd_begin(r);
    run.version = ll_json_str(o, "version", NULL);
    run.host = ll_json_str(o, "host", NULL);
    run.ranks = (int)rd_int(r, o, "ranks", 0, 1, INT32_MAX, 1);
    run.threads = rd_count(r, o, "threads", 0);
    run.epoch_wall_ns = rd_int(r, o, "epoch_wall_ns", 0, 0, 9.2e18, 0);
    run.url = ll_json_str(tg, "url", NULL);
    run.model = ll_json_str(tg, "model", NULL);
    run.endpoint = ll_json_str(tg, "endpoint", NULL);
    run.bundled = rd_bool(tg, "bundled");
    run.engine = ll_json_str(o, "engine", NULL);
    run.backend = ll_json_str(o, "backend", NULL);
    rd_law(o, &run.law);
    run.scenario = ll_json_str(o, "scenario", NULL);
    run.config = cJSON_GetObjectItemCaseSensitive(o, "config");
    ll_rec_asked_of(run.config, &run.asked);
    /* The run line is never dropped: a bad label keeps its default, counted. */
    r->st->n_out_of_range += r->out_of_range;
    r->saw_run = 1;
    return r->h->on_run ? r->h->on_run(&run, r->ctx) : 0;
}

/* sweep --find's role (records.h ll_rec_level.find_role) as the static
 * name it was written from; NULL when absent or a name this reader does not
 * know (a later role: the level itself is as good as any other). */
static const char *rd_find_role(const cJSON *o)
{
    static const char *const roles[] = {"ladder", "probe", "sustain", "re-measure"};
    const char *v = ll_json_str(o, "find_role", NULL);
    if (!v)
        return NULL;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(v, roles[i]) == 0)
            return roles[i];
    return NULL;
}

static int rd_level(reader *r, const cJSON *o)
{
    ll_rec_level lv = {0};
    rd_begin(r);
    lv.level = rd_count(r, o, "level", 1);
    lv.concurrency = rd_count(r, o, "concurrency", 0);
    lv.open_loop = strcmp(ll_json_str(o, "mode", "closed"), "open") == 0;
    lv.rate_per_s = rd_double(o, "rate_per_s", 0);
    if (!isfinite(lv.rate_per_s) || lv.rate_per_s < 0) {
        r->out_of_range++;
        lv.rate_per_s = 0;
    }
    lv.poisson = strcmp(ll_json_str(o, "arrival", "poisson"), "poisson") == 0;
    lv.n_requests = rd_count(r, o, "n_requests", 0);
    lv.warmup = rd_count(r, o, "warmup", 0);
    lv.start_ns = rd_time(r, o, "start_ns", 1);
    /* A/B fields (optional; -1 when absent) */
    lv.repeat = (int)rd_int(r, o, "repeat", 0, 0, INT32_MAX, -1);
    lv.pair = (int)rd_int(r, o, "pair", 0, 0, INT32_MAX, -1);
    lv.seq = (int)rd_int(r, o, "seq", 0, 0, INT32_MAX, -1);
    lv.ab_tagged = lv.repeat >= 0;
    lv.find_role = rd_find_role(o);
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(o, "cache");
    if (cJSON_IsObject(cache)) { /* strings stay in the line: only the figures come back */
        lv.cache.present = 1;
        lv.cache.action_reset = strcmp(ll_json_str(cache, "action", "keep"), "reset") == 0;
        lv.cache.done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cache, "done"));
        lv.cache.status = (int)rd_int(r, cache, "status", 0, 0, 999, 0);
        lv.cache.slots = (int)rd_int(r, cache, "slots", 0, 0, INT32_MAX, 0);
    }
    if (!rd_keep(r) || !r->h->on_level)
        return 0;
    return r->h->on_level(&lv, r->ctx);
}

static int rd_level_end(reader *r, const cJSON *o)
{
    ll_rec_level_end le = {0};
    rd_begin(r);
    le.level = rd_count(r, o, "level", 1);
    le.end_ns = rd_time(r, o, "end_ns", 1);
    le.interrupted = rd_bool(o, "interrupted");
    le.ok = rd_count(r, o, "ok", 0);
    le.failed = rd_count(r, o, "failed", 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "client");
    le.client.reads_kstamp = -1; /* as in an older file: not recorded */
    le.client.read_lag_p50_ms = le.client.read_lag_p99_ms = le.client.read_lag_max_ms = NAN;
    if (cJSON_IsObject(c)) {
        le.client.present = 1;
        le.client.threads = rd_count(r, c, "threads", 0);
        le.client.wall_s = rd_seconds(r, c, "wall_s");
        le.client.cpu_s_max = rd_seconds(r, c, "cpu_s_max");
        le.client.cpu_s_sum = rd_seconds(r, c, "cpu_s_sum");
        le.client.reads = (uint64_t)rd_int(r, c, "reads", 0, 0, TIME_MAX_NS, 0);
        le.client.events = (uint64_t)rd_int(r, c, "events", 0, 0, TIME_MAX_NS, 0);
        le.client.reads_kstamp = rd_int(r, c, "reads_kstamp", 0, 0, TIME_MAX_NS, -1);
        const cJSON *lag = cJSON_GetObjectItemCaseSensitive(c, "read_lag_ms");
        if (cJSON_IsObject(lag)) { /* ms in [0, 1e9]: the same bound as seconds */
            le.client.read_lag_p50_ms = rd_seconds(r, lag, "p50");
            le.client.read_lag_p99_ms = rd_seconds(r, lag, "p99");
            le.client.read_lag_max_ms = rd_seconds(r, lag, "max");
        }
    }
    le.profiled = rd_bool(o, "profiled");
    if (!rd_keep(r) || !r->h->on_level_end)
        return 0;
    return r->h->on_level_end(&le, r->ctx);
}

/* chunks_packed (records_chunks.c) into r->chunks: malformed text drops the
 * record (missing), a value out of range is counted. */
static int rd_chunks_packed(reader *r, const cJSON *packed)
{
    if (!cJSON_IsString(packed)) {
        r->missing = 1;
        return 0;
    }
    int rc = ll_rec_chunks_unpack(packed->valuestring, strlen(packed->valuestring), &r->chunks.v, &r->chunks.n,
                                  &r->chunks.cap);
    if (rc == LL_EPARSE)
        r->missing = 1;
    else if (rc == LL_ERANGE)
        r->out_of_range++;
    return rc == LL_ENOMEM ? rc : 0;
}

/* chunks: [[t_ns, tokens, "t"|"a"], ...] (older files), or chunks_packed,
 * into r->chunks. A record with both is dropped: which one is the stream? */
static int rd_chunks(reader *r, const cJSON *o)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "chunks"), *c;
    const cJSON *packed = cJSON_GetObjectItemCaseSensitive(o, LL_REC_CHUNKS_PACKED);
    r->chunks.n = 0;
    if (packed && arr) {
        r->missing = 1;
        return 0;
    }
    if (packed)
        return rd_chunks_packed(r, packed);
    if (!arr || cJSON_IsNull(arr))
        return 0;
    if (!cJSON_IsArray(arr)) {
        r->missing = 1;
        return 0;
    }
    cJSON_ArrayForEach(c, arr) {
        const cJSON *t = cJSON_GetArrayItem(c, 0), *tk = cJSON_GetArrayItem(c, 1), *kd = cJSON_GetArrayItem(c, 2);
        if (!cJSON_IsNumber(t) || !cJSON_IsNumber(tk) || !cJSON_IsString(kd) ||
            (strcmp(kd->valuestring, "t") != 0 && strcmp(kd->valuestring, "a") != 0)) {
            r->missing = 1;
            return 0;
        }
        int bad_t = !(t->valuedouble >= -TIME_MAX_NS && t->valuedouble <= TIME_MAX_NS);
        int bad_tk = !(tk->valuedouble >= 0 && tk->valuedouble <= INT32_MAX);
        r->out_of_range += (size_t)bad_t + (size_t)bad_tk;
        if (bad_t || bad_tk)
            continue;
        ll_rec_chunk ch = {(int64_t)t->valuedouble, (int32_t)tk->valuedouble, kd->valuestring[0]};
        if (ll_vec_push(&r->chunks, ch))
            return LL_ENOMEM;
    }
    return 0;
}

/* "max_tokens" and the workload keys (records.h ll_rec_work): a session
 * needs both "session" and "turn" (turn >= 1); absent keys leave none. */
static void rd_work(reader *r, const cJSON *o, ll_rec_request *rq)
{
    rq->max_tokens = (int)rd_int(r, o, "max_tokens", 0, 0, INT32_MAX, 0);
    if (cJSON_GetObjectItemCaseSensitive(o, "session")) {
        rq->work.index = rd_int(r, o, "session", 1, 0, TIME_MAX_NS, 0);
        rq->work.turn = (int)rd_int(r, o, "turn", 1, 1, INT32_MAX, 0);
        rq->work.kind = rq->work.turn > 0 ? LL_WORK_SESSION : LL_WORK_NONE;
    } else if (cJSON_GetObjectItemCaseSensitive(o, "trace_row")) {
        rq->work.index = rd_int(r, o, "trace_row", 1, 0, TIME_MAX_NS, 0);
        rq->work.kind = LL_WORK_TRACE;
    } else if (cJSON_GetObjectItemCaseSensitive(o, "prefix_group")) {
        rq->work.index = rd_int(r, o, "prefix_group", 1, 0, INT32_MAX, 0);
        rq->work.kind = LL_WORK_PREFIX;
    }
}

static int rd_request(reader *r, const cJSON *o)
{
    ll_rec_request rq;
    memset(&rq, 0, sizeof rq);
    rd_begin(r);
    rq.level = rd_count(r, o, "level", 1);
    rq.rank = rd_count(r, o, "rank", 0);
    rq.id = (uint64_t)rd_int(r, o, "id", 0, 0, TIME_MAX_NS, 0);
    rq.warmup = rd_bool(o, "warmup");
    const char *status = ll_json_str(o, "status", NULL);
    if (!status)
        r->missing = 1;
    else if (strcmp(status, "ok") == 0)
        rq.cls = LL_ERRC_OK;
    else if (ll_err_class_parse(ll_json_str(o, "error_class", NULL), &rq.cls) || rq.cls == LL_ERRC_OK)
        rq.cls = LL_ERRC_OTHER; /* a failure whose class this reader does not know */
    rq.http_status = (int)rd_int(r, o, "http_status", 0, 0, 999, 0);
    rq.error = (char *)ll_json_str(o, "error", NULL);
    rq.intended_ns = rd_time(r, o, "intended_ns", 0);
    rq.send_ns = rd_time(r, o, "send_ns", 1);
    rq.header_ns = rd_time(r, o, "header_ns", 0);
    rq.first_token_ns = rd_time(r, o, "first_token_ns", 0);
    rq.first_think_ns = rd_time(r, o, "first_think_ns", 0);
    rq.first_answer_ns = rd_time(r, o, "first_answer_ns", 0);
    rq.end_ns = rd_time(r, o, "end_ns", 1);
    rq.prompt_tok = rd_int(r, o, "prompt_tok", 0, 0, TIME_MAX_NS, 0);
    rq.think_tok = rd_int(r, o, "think_tok", 0, 0, TIME_MAX_NS, 0);
    rq.answer_tok = rd_int(r, o, "answer_tok", 0, 0, TIME_MAX_NS, 0);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "usage");
    /* -1 is "not sent" (a server may send completion tokens without prompt tokens). */
    rq.usage_prompt = cJSON_IsObject(u) ? rd_int(r, u, "prompt_tokens", 0, -1, TIME_MAX_NS, -1) : -1;
    rq.usage_completion = cJSON_IsObject(u) ? rd_int(r, u, "completion_tokens", 0, -1, TIME_MAX_NS, -1) : -1;
    rq.usage_reasoning = cJSON_IsObject(u) ? rd_int(r, u, "reasoning_tokens", 0, -1, TIME_MAX_NS, -1) : -1;
    rq.counts = LL_COUNTS_STREAM;
    rq.stream_think_tok = rq.stream_answer_tok = -1;
    const char *counts = ll_json_str(o, "counts", "stream");
    for (int k = 0; k < LL_COUNTS__COUNT; k++)
        if (strcmp(counts, ll_counts_name((ll_counts)k)) == 0)
            rq.counts = (ll_counts)k;
    const cJSON *stok = cJSON_GetObjectItemCaseSensitive(o, "stream_tok");
    if (cJSON_IsObject(stok)) {
        rq.stream_think_tok = rd_int(r, stok, "think", 0, -1, TIME_MAX_NS, -1);
        rq.stream_answer_tok = rd_int(r, stok, "answer", 0, -1, TIME_MAX_NS, -1);
    }
    rq.prompt_tok_target = rd_int(r, o, "prompt_tok_target", 0, 0, TIME_MAX_NS, 0);
    rq.cached_tok = rd_int(r, o, "cached_tok", 0, 0, TIME_MAX_NS, -1);
    snprintf(rq.finish, sizeof rq.finish, "%s", ll_json_str(o, "finish", ""));
    rq.srv = rd_srv_timing(r, cJSON_GetObjectItemCaseSensitive(o, "server"));
    rd_work(r, o, &rq);
    int rc = rd_chunks(r, o);
    if (rc)
        return rc;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(o, "outputs");
    if (outs && r->h->on_request && (rc = ll_rec_read_outputs(outs, &rq.outputs)) != 0) {
        if (rc != LL_EINVAL)
            return rc;
        r->missing = 1; /* an outputs member of the wrong shape drops the record */
    }
    if (!rd_keep(r) || !r->h->on_request) {
        ll_rec_outputs_free(rq.outputs);
        return 0;
    }
    rq.n_chunks = r->chunks.n;
    rq.chunks = r->chunks.v;
    rc = r->h->on_request(&rq, r->ctx);
    ll_rec_outputs_free(rq.outputs);
    return rc;
}

static int rd_step(reader *r, const cJSON *o)
{
    ll_rec_step s = {0};
    rd_begin(r);
    s.start_ns = rd_time(r, o, "start_ns", 1);
    s.dur_ns = rd_int(r, o, "dur_ns", 1, 0, TIME_MAX_NS, 0);
    s.n_decode = rd_count(r, o, "n_decode", 0);
    s.n_running = rd_count(r, o, "n_running", 0);
    s.prefill_tok = rd_count(r, o, "prefill_tok", 0);
    s.ctx_tok = rd_int(r, o, "ctx_tok", 0, 0, TIME_MAX_NS, 0);
    s.comm_ns = rd_int(r, o, "comm_ns", 0, 0, TIME_MAX_NS, 0);
    if (!rd_keep(r) || !r->h->on_step)
        return 0;
    return r->h->on_step(&s, r->ctx);
}

static int rd_profile(reader *r, const cJSON *o)
{
    ll_rec_profile p = {0};
    rd_begin(r);
    p.level = rd_count(r, o, "level", 1);
    p.t_ns = rd_time(r, o, "t_ns", 1);
    p.num_steps = rd_count(r, o, "num_steps", 0);
    p.style = ll_json_str(o, "style", NULL);
    p.http_status = (int)rd_int(r, o, "http_status", 0, 0, 999, 0);
    p.ok = rd_bool(o, "ok");
    p.detail = ll_json_str(o, "detail", NULL);
    p.stop_s = p.wait_s = p.probe_ref_ms = p.probe_ms = NAN;
    if (cJSON_GetObjectItemCaseSensitive(o, "done_ns")) { /* the wait: newer files only */
        p.has_wait = 1;
        p.done_ns = rd_time(r, o, "done_ns", 0);
        p.wait_s = rd_seconds(r, o, "wait_s");
        p.settled = rd_bool(o, "settled");
    }
    if (!rd_keep(r) || !r->h->on_profile)
        return 0;
    return r->h->on_profile(&p, r->ctx);
}

static int rd_clock(reader *r, const cJSON *o)
{
    ll_rec_clock c = {0};
    rd_begin(r);
    c.level = rd_count(r, o, "level", 1);
    c.rank = rd_count(r, o, "rank", 1);
    /* an offset may be negative: the rank's clock behind rank 0's */
    c.offset_ns = rd_int(r, o, "offset_ns", 1, -TIME_MAX_NS, TIME_MAX_NS, 0);
    c.rtt_ns = rd_time(r, o, "rtt_ns", 0);
    c.samples = rd_count(r, o, "samples", 0);
    c.start_ns = rd_time(r, o, "start_ns", 0);
    if (!rd_keep(r) || !r->h->on_clock)
        return 0;
    return r->h->on_clock(&c, r->ctx);
}

static int rd_metric(reader *r, const cJSON *o)
{
    ll_rec_metric m = {0};
    rd_begin(r);
    m.t_ns = rd_time(r, o, "t_ns", 1);
    m.src = ll_json_str(o, "src", "");
    m.name = ll_json_str(o, "name", NULL);
    m.labels = ll_json_str(o, "labels", "");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "value");
    if (!m.name || !cJSON_IsNumber(v))
        r->missing = 1;
    else if (!isfinite(v->valuedouble))
        r->out_of_range++;
    else
        m.value = v->valuedouble;
    if (!rd_keep(r) || !r->h->on_metric)
        return 0;
    return r->h->on_metric(&m, r->ctx);
}

static int rd_handoff(reader *r, const cJSON *o)
{
    ll_rec_handoff h = {0};
    rd_begin(r);
    h.req = ll_json_str(o, "req", NULL);
    if (!h.req)
        r->missing = 1;
    h.tok = rd_count(r, o, "tok", 1);
    h.step_end_ns = rd_time(r, o, "step_end_ns", 1);
    h.write_ns = rd_time(r, o, "write_ns", 1);
    h.send_ns = rd_time(r, o, "send_ns", 0); /* -1 when absent (older engines) */
    if (!rd_keep(r) || !r->h->on_handoff)
        return 0;
    return r->h->on_handoff(&h, r->ctx);
}

static int rd_line(const cJSON *o, size_t line_no, void *ctx)
{
    reader *r = ctx;
    const char *type = ll_json_str(o, "type", NULL);
    int rc;
    r->st->n_lines++;
    if (r->h->on_line && (rc = r->h->on_line(r->pos.off, r->pos.len, r->ctx)) != 0)
        return rc;
    if (!r->saw_run) {
        if (!type || strcmp(type, LL_REC_RUN) != 0) {
            ll_errf(r->err, r->errlen, "%s:%zu: the first record is not a run line", r->path, line_no);
            return LL_EINVAL;
        }
        return rd_run(r, o);
    }
    if (!type) {
        r->st->n_rejected++;
        return 0;
    }
    if (strcmp(type, LL_REC_REQUEST) == 0)
        return rd_request(r, o);
    if (strcmp(type, LL_REC_STEP) == 0)
        return rd_step(r, o);
    if (strcmp(type, LL_REC_LEVEL) == 0)
        return rd_level(r, o);
    if (strcmp(type, LL_REC_LEVEL_END) == 0)
        return rd_level_end(r, o);
    if (strcmp(type, LL_REC_PROFILE) == 0)
        return rd_profile(r, o);
    if (strcmp(type, LL_REC_CLOCK) == 0)
        return rd_clock(r, o);
    if (strcmp(type, LL_REC_METRIC) == 0)
        return rd_metric(r, o);
    if (strcmp(type, LL_REC_HANDOFF) == 0)
        return rd_handoff(r, o);
    if (strcmp(type, LL_REC_RUN) == 0) {
        r->st->n_rejected++; /* a second run line: the first one describes the run */
        return 0;
    }
    r->st->n_unknown++;
    return r->h->on_other ? r->h->on_other(o, type, r->ctx) : 0;
}

int ll_rec_read(const char *path, const ll_rec_handlers *h, void *ctx, ll_rec_read_stats *st,
                char *err, size_t errlen)
{
    ll_rec_read_stats local;
    reader r = {.path = path, .h = h, .ctx = ctx, .st = st ? st : &local, .err = err, .errlen = errlen};
    memset(r.st, 0, sizeof *r.st);
    int rc = ll_jsonl_foreach_pos(path, rd_line, &r, &r.st->n_truncated, &r.pos, err, errlen);
    if (rc == 0 && !r.saw_run) {
        ll_errf(err, errlen, "%s: no run line", path);
        rc = LL_EINVAL;
    }
    ll_vec_free(&r.chunks);
    return rc;
}

int ll_rec_read_line(const char *line, size_t len, const ll_rec_handlers *h, void *ctx, ll_rec_read_stats *st,
                     char *err, size_t errlen)
{
    ll_rec_read_stats local = {0};
    reader r = {.path = "records line", .h = h, .ctx = ctx, .st = st ? st : &local, .saw_run = 1,
                .pos = {0, len}, .err = err, .errlen = errlen};
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    int rc;
    /* what follows the object must be blank, as ll_jsonl_foreach asks */
    while (o && end && end < line + len && (unsigned char)*end <= ' ' && *end)
        end++;
    if (!o || !cJSON_IsObject(o) || end != line + len) {
        size_t at = end && end >= line ? (size_t)(end - line) : 0;
        ll_errf(err, errlen, "malformed JSON line near byte %zu", at);
        rc = LL_EPARSE;
    } else
        rc = rd_line(o, 0, &r);
    cJSON_Delete(o);
    ll_vec_free(&r.chunks);
    return rc;
}
