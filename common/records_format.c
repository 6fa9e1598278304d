/* records_format.c: the records.jsonl vocabulary (error classes, count
 * sources) and each queued record's line, formatted on the writer thread
 * (records.c) from the struct the producer queued, or printed from the cJSON
 * tree of a run or profile record.
 *
 * The keys and shapes are docs/records.md; numbers are written as integers
 * where the struct holds integers (the same digits cJSON printed before). */
#include "common.h"
#include "records_item.h"
#include "records_outputs.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ---- vocabulary -------------------------------------------------------------- */

static const char *const err_class_names[LL_ERRC__COUNT] = {
    "ok", "http_4xx", "http_5xx", "stream_error", "truncated", "timeout", "connect", "reset", "other",
    "encoding", "headers"};

const char *ll_err_class_name(ll_err_class c)
{
    return (unsigned)c < LL_ERRC__COUNT ? err_class_names[c] : "other";
}

const char *ll_counts_name(ll_counts c)
{
    static const char *const names[LL_COUNTS__COUNT] = {"stream", "attributed", "tokenizer"};
    return (unsigned)c < LL_COUNTS__COUNT ? names[c] : "stream";
}

int ll_err_class_parse(const char *name, ll_err_class *out)
{
    for (int c = 0; c < LL_ERRC__COUNT; c++)
        if (name && strcmp(name, err_class_names[c]) == 0) {
            *out = (ll_err_class)c;
            return 0;
        }
    *out = LL_ERRC_OTHER;
    return LL_EINVAL;
}

/* ---- the writer: formatting (writer thread) ----------------------------------- */

/* Decimal digits of v at p (at most 20 bytes); returns how many. The chunk
 * list is most of an expanded request line: printf per number would be most
 * of its time. */
static size_t fmt_i64(char *p, int64_t v)
{
    char tmp[24];
    size_t n = 0, k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        p[k++] = '-';
    while (n)
        p[k++] = tmp[--n];
    return k;
}

/* [t_ns,tokens,"k"], preceded by a comma unless first. */
static int put_chunk(ll_buf *b, const ll_rec_chunk *c, int first)
{
    char tmp[64];
    size_t n = 0;
    if (!first)
        tmp[n++] = ',';
    tmp[n++] = '[';
    n += fmt_i64(tmp + n, c->t_ns);
    tmp[n++] = ',';
    n += fmt_i64(tmp + n, c->tokens);
    tmp[n++] = ',';
    tmp[n++] = '"';
    tmp[n++] = c->kind;
    tmp[n++] = '"';
    tmp[n++] = ']';
    return ll_buf_append(b, tmp, n);
}

int ll_rec_format_chunk_list(ll_buf *b, const ll_rec_chunk *c, size_t n)
{
    int rc = ll_buf_append(b, "[", 1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = put_chunk(b, &c[i], i == 0);
    return rc ? rc : ll_buf_append(b, "]", 1);
}

static int put_time(ll_buf *b, const char *key, int64_t t)
{
    return t < 0 ? ll_buf_printf(b, ",\"%s\":null", key) : ll_buf_printf(b, ",\"%s\":%" PRId64, key, t);
}

/* ,"cache":{...}; strings may hold a server's words: escaped. */
static int format_cache(ll_buf *b, const ll_rec_cache *c)
{
    int rc;
    LL_TRY(ll_buf_printf(b, ",\"cache\":{\"asked\":\"%s\",\"action\":\"%s\",\"done\":%s,\"status\":", c->asked ? c->asked : "auto",
                         c->action_reset ? "reset" : "keep", c->done ? "true" : "false"));
    LL_TRY(c->status > 0 ? ll_buf_printf(b, "%d", c->status) : ll_buf_printf(b, "null"));
    LL_TRY(ll_buf_printf(b, ",\"how\":"));
    LL_TRY(c->how[0] ? ll_json_escape(b, c->how) : ll_buf_printf(b, "null"));
    if (c->slots > 0)
        LL_TRY(ll_buf_printf(b, ",\"slots\":%d", c->slots));
    LL_TRY(ll_buf_printf(b, ",\"server\":"));
    LL_TRY(c->server[0] ? ll_json_escape(b, c->server) : ll_buf_printf(b, "null"));
    LL_TRY(ll_buf_printf(b, ",\"note\":"));
    LL_TRY(ll_json_escape(b, c->note));
    LL_TRY(ll_buf_printf(b, "}"));
fail:
    return rc;
}

static int format_level(ll_buf *b, const ll_rec_level *lv)
{
    int rc;
    if (lv->open_loop)
        LL_TRY(ll_buf_printf(b,
                             "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"open\","
                             "\"rate_per_s\":%.17g,\"arrival\":\"%s\",\"n_requests\":%d,\"warmup\":%d,"
                             "\"start_ns\":%" PRId64,
                             lv->level, lv->concurrency, lv->rate_per_s, lv->poisson ? "poisson" : "constant",
                             lv->n_requests, lv->warmup, lv->start_ns));
    else
        LL_TRY(ll_buf_printf(b,
                             "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"closed\","
                             "\"rate_per_s\":null,\"n_requests\":%d,\"warmup\":%d,\"start_ns\":%" PRId64,
                             lv->level, lv->concurrency, lv->n_requests, lv->warmup, lv->start_ns));
    /* A/B fields: only where the sweep set them, so other runs stay as before. */
    if (lv->ab_tagged && lv->repeat >= 0)
        LL_TRY(ll_buf_printf(b, ",\"repeat\":%d", lv->repeat));
    if (lv->ab_tagged && lv->pair >= 0)
        LL_TRY(ll_buf_printf(b, ",\"pair\":%d", lv->pair));
    if (lv->ab_tagged && lv->seq >= 0)
        LL_TRY(ll_buf_printf(b, ",\"seq\":%d", lv->seq));
    if (lv->find_role)
        LL_TRY(ll_buf_printf(b, ",\"find_role\":\"%s\"", lv->find_role));
    if (lv->cache.present)
        LL_TRY(format_cache(b, &lv->cache));
    LL_TRY(ll_buf_printf(b, "}"));
fail:
    return rc;
}

static int format_level_end(ll_buf *b, const ll_rec_level_end *le)
{
    int rc;
    const ll_rec_client *c = &le->client;
    LL_TRY(ll_buf_printf(b,
                         "{\"type\":\"level_end\",\"level\":%d,\"end_ns\":%" PRId64
                         ",\"interrupted\":%s,\"ok\":%d,\"failed\":%d",
                         le->level, le->end_ns, le->interrupted ? "true" : "false", le->ok, le->failed));
    if (c->present) {
        LL_TRY(ll_buf_printf(b,
                             ",\"client\":{\"threads\":%d,\"wall_s\":%.9g,\"cpu_s_max\":%.9g,"
                             "\"cpu_s_sum\":%.9g,\"reads\":%" PRIu64 ",\"events\":%" PRIu64,
                             c->threads, c->wall_s, c->cpu_s_max, c->cpu_s_sum, c->reads, c->events));
        if (c->reads_kstamp >= 0) /* -1: not recorded (read from an older file) */
            LL_TRY(ll_buf_printf(b, ",\"reads_kstamp\":%" PRId64, c->reads_kstamp));
        if (c->reads_kstamp > 0 && isfinite(c->read_lag_p50_ms))
            LL_TRY(ll_buf_printf(b, ",\"read_lag_ms\":{\"p50\":%.6g,\"p99\":%.6g,\"max\":%.6g}",
                                 c->read_lag_p50_ms, c->read_lag_p99_ms, c->read_lag_max_ms));
        LL_TRY(ll_buf_append(b, "}", 1));
    }
    if (le->profiled) /* only then: an unprofiled level's line stays as it was */
        LL_TRY(ll_buf_printf(b, ",\"profiled\":true"));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

static int format_step(ll_buf *b, const ll_rec_step *st)
{
    int rc;
    LL_TRY(ll_buf_printf(b,
                         "{\"type\":\"step\",\"start_ns\":%" PRId64 ",\"dur_ns\":%" PRId64
                         ",\"n_decode\":%d,\"n_running\":%d,\"prefill_tok\":%d,\"ctx_tok\":%" PRId64,
                         st->start_ns, st->dur_ns, st->n_decode, st->n_running, st->prefill_tok, st->ctx_tok));
    if (st->comm_ns > 0) /* tensor parallelism only: other steps' lines stay as they were */
        LL_TRY(ll_buf_printf(b, ",\"comm_ns\":%" PRId64, st->comm_ns));
    LL_TRY(ll_buf_printf(b, "}"));
fail:
    return rc;
}

static int format_usage(ll_buf *b, const ll_rec_request *rq)
{
    int rc;
    if (rq->usage_completion < 0)
        return ll_buf_printf(b, ",\"usage\":null");
    LL_TRY(ll_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64,
                         rq->usage_prompt, rq->usage_completion));
    if (rq->usage_reasoning >= 0)
        LL_TRY(ll_buf_printf(b, ",\"reasoning_tokens\":%" PRId64, rq->usage_reasoning));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

ll_rec_srv_timing ll_rec_srv_timing_none(void)
{
    return (ll_rec_srv_timing){.ttft_ms = NAN, .queue_ms = NAN, .prompt_ms = NAN, .decode_ms = NAN,
                               .tpot_ms = NAN, .prompt_n = -1, .decode_n = -1};
}

/* "server":{...} with the members said, in a fixed order. */
static int format_srv_timing(ll_buf *b, const ll_rec_srv_timing *t)
{
    const struct {
        const char *key;
        double v;
    } ms[] = {{"ttft_ms", t->ttft_ms},     {"queue_ms", t->queue_ms}, {"prompt_ms", t->prompt_ms},
              {"decode_ms", t->decode_ms}, {"tpot_ms", t->tpot_ms}};
    const char *sep = "";
    int rc;
    LL_TRY(ll_buf_printf(b, ",\"server\":{"));
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        if (isfinite(ms[i].v)) {
            LL_TRY(ll_buf_printf(b, "%s\"%s\":%.6g", sep, ms[i].key, ms[i].v));
            sep = ",";
        }
    if (t->prompt_n >= 0) {
        LL_TRY(ll_buf_printf(b, "%s\"prompt_n\":%" PRId64, sep, t->prompt_n));
        sep = ",";
    }
    if (t->decode_n >= 0)
        LL_TRY(ll_buf_printf(b, "%s\"decode_n\":%" PRId64, sep, t->decode_n));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

/* The request's place in its workload and its max_tokens, each only where
 * it applies (records.h ll_rec_work). */
static int format_work(ll_buf *b, const ll_rec_request *rq)
{
    int rc = 0;
    if (rq->max_tokens > 0)
        LL_TRY(ll_buf_printf(b, ",\"max_tokens\":%d", rq->max_tokens));
    switch (rq->work.kind) {
    case LL_WORK_SESSION:
        LL_TRY(ll_buf_printf(b, ",\"session\":%" PRId64 ",\"turn\":%d", rq->work.index, rq->work.turn));
        break;
    case LL_WORK_TRACE:
        LL_TRY(ll_buf_printf(b, ",\"trace_row\":%" PRId64, rq->work.index));
        break;
    case LL_WORK_PREFIX:
        LL_TRY(ll_buf_printf(b, ",\"prefix_group\":%" PRId64, rq->work.index));
        break;
    default:
        break;
    }
fail:
    return rc;
}

static int format_request(ll_buf *b, const ll_rec_request *rq)
{
    int ok = rq->cls == LL_ERRC_OK, rc;
    LL_TRY(ll_buf_printf(b,
                         "{\"type\":\"request\",\"level\":%d,\"rank\":%d,\"id\":%" PRIu64
                         ",\"warmup\":%s,\"status\":\"%s\",\"error_class\":",
                         rq->level, rq->rank, rq->id, rq->warmup ? "true" : "false", ok ? "ok" : "error"));
    LL_TRY(ok ? ll_buf_printf(b, "null") : ll_buf_printf(b, "\"%s\"", ll_err_class_name(rq->cls)));
    LL_TRY(rq->http_status ? ll_buf_printf(b, ",\"http_status\":%d", rq->http_status)
                           : ll_buf_printf(b, ",\"http_status\":null"));
    LL_TRY(ll_buf_printf(b, ",\"error\":"));
    LL_TRY(rq->error ? ll_json_escape(b, rq->error) : ll_buf_printf(b, "null"));
    LL_TRY(put_time(b, "intended_ns", rq->intended_ns));
    LL_TRY(put_time(b, "send_ns", rq->send_ns));
    LL_TRY(put_time(b, "header_ns", rq->header_ns));
    LL_TRY(put_time(b, "first_token_ns", rq->first_token_ns));
    LL_TRY(put_time(b, "first_think_ns", rq->first_think_ns));
    LL_TRY(put_time(b, "first_answer_ns", rq->first_answer_ns));
    LL_TRY(put_time(b, "end_ns", rq->end_ns));
    LL_TRY(ll_buf_printf(b, ",\"prompt_tok\":%" PRId64 ",\"think_tok\":%" PRId64 ",\"answer_tok\":%" PRId64,
                         rq->prompt_tok, rq->think_tok, rq->answer_tok));
    LL_TRY(format_usage(b, rq));
    if (rq->counts != LL_COUNTS_STREAM)
        LL_TRY(ll_buf_printf(b, ",\"counts\":\"%s\",\"stream_tok\":{\"think\":%" PRId64 ",\"answer\":%" PRId64 "}",
                             ll_counts_name(rq->counts), rq->stream_think_tok, rq->stream_answer_tok));
    if (rq->prompt_tok_target > 0)
        LL_TRY(ll_buf_printf(b, ",\"prompt_tok_target\":%" PRId64, rq->prompt_tok_target));
    if (rq->cached_tok >= 0)
        LL_TRY(ll_buf_printf(b, ",\"cached_tok\":%" PRId64, rq->cached_tok));
    if (rq->finish[0]) {
        LL_TRY(ll_buf_printf(b, ",\"finish\":"));
        LL_TRY(ll_json_escape(b, rq->finish));
    }
    if (rq->srv.present)
        LL_TRY(format_srv_timing(b, &rq->srv));
    LL_TRY(format_work(b, rq));
    /* the packed list (records_chunks.c): ~2-6 bytes a chunk against ~19 as [t,tok,"k"] */
    LL_TRY(ll_buf_printf(b, ",\"" LL_REC_CHUNKS_PACKED "\":\""));
    LL_TRY(ll_rec_chunks_pack(b, rq->chunks, rq->n_chunks));
    LL_TRY(ll_buf_append(b, "\"", 1));
    if (rq->outputs)
        LL_TRY(ll_rec_format_outputs(b, rq->outputs));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

static int format_clock(ll_buf *b, const ll_rec_clock *ck)
{
    return ll_buf_printf(b,
                         "{\"type\":\"clock\",\"level\":%d,\"rank\":%d,\"offset_ns\":%" PRId64
                         ",\"rtt_ns\":%" PRId64 ",\"samples\":%d,\"start_ns\":%" PRId64 "}",
                         ck->level, ck->rank, ck->offset_ns, ck->rtt_ns, ck->samples, ck->start_ns);
}

static int format_handoff(ll_buf *b, const ll_rec_handoff *h, const char *req)
{
    int rc = ll_buf_printf(b, "{\"type\":\"handoff\",\"req\":");
    rc = rc ? rc : ll_json_escape(b, req);
    rc = rc ? rc
            : ll_buf_printf(b, ",\"tok\":%d,\"step_end_ns\":%" PRId64 ",\"write_ns\":%" PRId64, h->tok,
                            h->step_end_ns, h->write_ns);
    if (!rc && h->send_ns >= 0)
        rc = ll_buf_printf(b, ",\"send_ns\":%" PRId64, h->send_ns);
    return rc ? rc : ll_buf_printf(b, "}");
}

static int format_metric(ll_buf *b, const ll_rec_metric *m)
{
    int rc;
    LL_TRY(ll_buf_printf(b, "{\"type\":\"metric\",\"t_ns\":%" PRId64 ",\"src\":", m->t_ns));
    LL_TRY(ll_json_escape(b, m->src));
    LL_TRY(ll_buf_printf(b, ",\"name\":"));
    LL_TRY(ll_json_escape(b, m->name));
    LL_TRY(ll_buf_printf(b, ",\"labels\":"));
    LL_TRY(ll_json_escape(b, m->labels));
    /* %.17g: a counter of 2^53 or a histogram sum reads back bit for bit */
    LL_TRY(ll_buf_printf(b, ",\"value\":%.17g}", m->value));
fail:
    return rc;
}

int ll_rec_format_item(ll_buf *b, const rec_item *it)
{
    char *s;
    switch (it->kind) {
    case K_LEVEL:
        return format_level(b, &it->u.lv);
    case K_LEVEL_END:
        return format_level_end(b, &it->u.le);
    case K_REQUEST:
        return format_request(b, &it->u.rq);
    case K_STEP:
        return format_step(b, &it->u.st);
    case K_CLOCK:
        return format_clock(b, &it->u.ck);
    case K_METRIC:
        return format_metric(b, &it->u.metric.m);
    case K_HANDOFF:
        return format_handoff(b, &it->u.handoff.h, it->u.handoff.req);
    case K_LINES:
        return LL_EINVAL; /* written as they are (write_item) */
    case K_JSON:
        if (!(s = cJSON_PrintUnformatted(it->u.obj)))
            return LL_ENOMEM;
        int rc = ll_buf_append(b, s, strlen(s));
        cJSON_free(s);
        return rc;
    }
    return LL_EINVAL;
}
