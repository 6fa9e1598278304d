/* bench_loadgen.c: the client's own cost. Prints figures; never pass/fail.
 *
 *  1. Token events per second one worker thread ingests: recorded streams
 *     (a vLLM-style one: one token per chunk, continuous usage) fed in 16 KiB reads
 *     through the same path a libcurl write callback takes: one ll_now_ns()
 *     per read, SSE framing, JSON delta interpretation, chunk recording.
 *  2. The records writer: request records (64 chunks each) queued from two
 *     producer threads, as loadgen's workers queue them: the producers' put
 *     rate (what a stamping thread pays per finished request) and the rate
 *     at which the writer thread formats, writes and flushes them.
 *  3. ITL error against the bundled engine's true step times at C=64 and
 *     C=1024: each chunk is matched to the latest step end before its arrival;
 *     the true inter-token gap is the distance between the two step ends, the
 *     measured one the distance between arrivals; their difference is the
 *     client's (plus HTTP stack's) error. Chunks are read back from the run's
 *     records (ll_rec_read); "measured ITL p50" is fit's figure (fit.h).
 *
 *  Streams of (1): one per dialect the parser reads (vLLM chat with
 *  reasoning_content and continuous usage; delta.reasoning; inline <think>;
 *  four tokens a chunk with usage; the Responses API; SGLang /generate), each
 *  with the count of events the fast JSON scanner handed to cJSON.
 *
 * usage: bench_loadgen [--quick | --parse]   (from the build dir: bench/loadgen/bench_loadgen)
 *        --parse: (1) alone */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gsl/gsl_errno.h>

#include "common.h"
#include "engine.h"
#include "netstamp.h"
#include "fit.h"
#include "loadgen.h"
#include "sse.h"

typedef struct sink {
    lg_delta d;
    int64_t now;
    LL_VEC(int64_t) t;   /* arrival of each token-carrying event, as xfer.c keeps chunks */
    long tokens;
} sink;

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    sink *s = ctx;
    lg_delta_out o;
    lg_delta_event(&s->d, event, data, len, &o);
    int tok = o.think_tok + o.answer_tok;
    if (tok) {
        if (ll_vec_push(&s->t, s->now))
            return LL_ENOMEM;
        s->tokens += tok;
    }
    return 0;
}

/* The recorded streams, one per dialect the parser supports: event i of n_tok. */
typedef enum { ST_VLLM, ST_REASONING, ST_THINK, ST_MULTI, ST_RESPONSES, ST_GENERATE, ST_N } stream_kind;
static const char *const k_stream_name[ST_N] = {
    "vLLM chat (reasoning_content, cont. usage)", "chat, delta.reasoning", "chat, inline <think>",
    "chat, 4 tokens/chunk + usage", "responses API", "SGLang /generate"};

static void stream_event(ll_buf *b, stream_kind k, int i, int n_tok)
{
    int think = i < n_tok / 2;
    switch (k) {
    case ST_VLLM:
        ll_buf_printf(b,
                      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                      "\"choices\":[{\"index\":0,\"delta\":{\"%s\":\" word%d\"},\"logprobs\":null,\"finish_reason\":null}],"
                      "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
                      think ? "reasoning_content" : "content", i, i + 1, i + 101);
        break;
    case ST_REASONING:
        ll_buf_printf(b,
                      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                      "\"choices\":[{\"index\":0,\"delta\":{\"%s\":\" word%d\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                      think ? "reasoning" : "content", i);
        break;
    case ST_THINK:
        ll_buf_printf(b,
                      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                      "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s word%d\\n\"},\"finish_reason\":null}]}\n\n",
                      i == 0 ? "<think>" : i == n_tok / 2 ? "</think>" : "", i);
        break;
    case ST_MULTI:
        ll_buf_printf(b,
                      "data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                      "\"choices\":[{\"index\":0,\"delta\":{\"%s\":\" a%d b c d\"},\"finish_reason\":null}],"
                      "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
                      think ? "reasoning_content" : "content", i, 4 * (i + 1), 4 * (i + 1) + 100);
        break;
    case ST_RESPONSES:
        ll_buf_printf(b,
                      "event: %s\ndata: {\"type\":\"%s\",\"item_id\":\"msg_1\",\"output_index\":0,"
                      "\"content_index\":0,\"delta\":\" word%d\",\"sequence_number\":%d}\n\n",
                      think ? "response.reasoning_text.delta" : "response.output_text.delta",
                      think ? "response.reasoning_text.delta" : "response.output_text.delta", i, i + 3);
        break;
    default: /* the cumulative text, kept short: a real one grows with the stream */
        ll_buf_printf(b,
                      "data: {\"text\":\"%.*s\",\"meta_info\":{\"id\":\"1\",\"prompt_tokens\":100,"
                      "\"completion_tokens\":%d,\"finish_reason\":null}}\n\n",
                      (i % 32) + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", i + 1);
        break;
    }
}

/* Token events/s one thread ingests from stream k: ll_now_ns() per 16 KiB
 * read, framing, interpretation, chunk recording. Best of reps (shared cores). */
static void bench_parse(stream_kind k, int n_tok, int reps)
{
    ll_buf b = {0};
    for (int i = 0; i < n_tok; i++)
        stream_event(&b, k, i, n_tok);
    ll_buf_printf(&b, "data: [DONE]\n\n");
    double best = 1e30, best_cpu = 1e30;
    long tokens = 0;
    int slow = 0, bad = 0;
    for (int r = 0; r < reps; r++) {
        sink s = {0};
        lg_sse sse;
        lg_delta_init(&s.d);
        s.d.dialect = k == ST_RESPONSES ? LG_DIALECT_RESPONSES : k == ST_GENERATE ? LG_DIALECT_GENERATE
                                                                                  : LG_DIALECT_OPENAI;
        lg_sse_init(&sse, on_event, &s);
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        int64_t t0 = ll_now_ns();
        for (size_t off = 0; off < b.len; off += 16384) {
            s.now = ll_now_ns();
            size_t n = b.len - off < 16384 ? b.len - off : 16384;
            lg_sse_feed(&sse, b.p + off, n);
        }
        lg_sse_finish(&sse);
        double sec = (double)(ll_now_ns() - t0) / 1e9;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
        best = sec < best ? sec : best;
        best_cpu = cpu < best_cpu ? cpu : best_cpu;
        tokens = s.tokens;
        slow = s.d.slow_events;
        bad = s.d.bad_events;
        lg_sse_free(&sse);
        lg_delta_free(&s.d);
        ll_vec_free(&s.t);
    }
    printf("  %-44s %9.0f events/s %7.1f MB/s %9.0f per CPU-s %6.3f CPU-us/event  (%ld tokens, %d to the "
           "full parser, %d bad)\n",
           k_stream_name[k], (double)n_tok / best, (double)b.len / best / 1e6, (double)n_tok / best_cpu,
           best_cpu / n_tok * 1e6, tokens, slow, bad);
    ll_buf_free(&b);
}

static void bench_parse_all(int n_tok)
{
    printf("parse+timestamp path, one thread, %d events per stream, best of 5 (wall, and the thread's own CPU time,\n"
           "which a shared core does not inflate):\n", n_tok);
    for (int k = 0; k < ST_N; k++)
        bench_parse((stream_kind)k, n_tok, 5);
}

/* A handoff record (the engine's handoff_sample): request id (the numeric
 * tail of X-Request-Id "loadlaw-<tag>-<id>"), token, and its times. */
typedef struct handoff {
    uint64_t id;
    int tok;
    int64_t step_end_ns, write_ns, send_ns;
} handoff;

typedef struct arrivals {
    int64_t epoch;
    LL_VEC(double) err_ms;   /* measured gap - true gap, per consecutive chunk pair */
    const int64_t *ends;
    size_t n_ends;
    LL_VEC(double) late_ms;
    LL_VEC(handoff) ho;      /* sorted by (id, tok) before the requests are read */
    LL_VEC(double) fanout_ms, lag_ms; /* step end -> write, write -> arrival */
    /* with the engine's send_ns: handed -> send() returned (MHD's pass), and
     * send() returned -> arrival (the wire and, with user stamps, the
     * client's read; a loopback packet is stamped inside the send, so a
     * kernel stamp comes microseconds before it returns: negative) */
    LL_VEC(double) pass_ms, wire_ms;
    size_t ho_matched;
    ll_rec_client client;    /* the level's level_end "client" */
} arrivals;

static int on_level_end(const ll_rec_level_end *le, void *ctx)
{
    ((arrivals *)ctx)->client = le->client;
    return 0;
}

static int on_handoff(const ll_rec_handoff *h, void *ctx)
{
    arrivals *a = ctx;
    const char *dash = strrchr(h->req, '-');
    if (strncmp(h->req, "loadlaw-", 8) != 0 || !dash)
        return 0;
    handoff x = {.id = strtoull(dash + 1, NULL, 10), .tok = h->tok, .step_end_ns = h->step_end_ns,
                 .write_ns = h->write_ns, .send_ns = h->send_ns};
    return ll_vec_push(&a->ho, x);
}

static int cmp_handoff(const void *x, const void *y)
{
    const handoff *p = x, *q = y;
    if (p->id != q->id)
        return p->id < q->id ? -1 : 1;
    return (p->tok > q->tok) - (p->tok < q->tok);
}

/* Split each sampled token's delay: server fan-out (its step's end to the
 * write) and client lag (the write to the chunk's arrival). */
static int match_handoffs(arrivals *a, const ll_rec_request *rq)
{
    handoff key = {.id = rq->id, .tok = 0};
    handoff *h = bsearch(&key, a->ho.v, a->ho.n, sizeof key, cmp_handoff);
    if (!h && a->ho.n > 0) { /* the first sample of this id need not be token 0 */
        size_t lo = 0, hi = a->ho.n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (a->ho.v[mid].id < rq->id)
                lo = mid + 1;
            else
                hi = mid;
        }
        h = lo < a->ho.n && a->ho.v[lo].id == rq->id ? &a->ho.v[lo] : NULL;
    }
    int64_t tok0 = 0; /* tokens before chunk i */
    for (size_t i = 0; h && i < rq->n_chunks; i++) {
        int64_t tok1 = tok0 + rq->chunks[i].tokens;
        while (h < a->ho.v + a->ho.n && h->id == rq->id && h->tok < tok1) {
            if (h->tok >= tok0) {
                int64_t arr = rq->chunks[i].t_ns;
                if (ll_vec_push(&a->fanout_ms, (double)(h->write_ns - h->step_end_ns) / 1e6) ||
                    ll_vec_push(&a->lag_ms, (double)(arr - h->write_ns) / 1e6))
                    return LL_ENOMEM;
                if (h->send_ns >= 0 && (ll_vec_push(&a->pass_ms, (double)(h->send_ns - h->write_ns) / 1e6) ||
                                        ll_vec_push(&a->wire_ms, (double)(arr - h->send_ns) / 1e6)))
                    return LL_ENOMEM;
                a->ho_matched++;
            }
            h++;
        }
        tok0 = tok1;
    }
    return 0;
}

/* The machine's own timer-wake lateness while the level runs: how late an
 * absolute-deadline sleep of 1 ms wakes (clock_nanosleep TIMER_ABSTIME). */
typedef struct waker {
    pthread_t th;
    atomic_int stop;
    LL_VEC(double) late_us;
} waker;

static void *waker_main(void *arg)
{
    waker *w = arg;
    int64_t next = ll_now_ns();
    while (!atomic_load(&w->stop)) {
        next += 1000000;
        struct timespec ts = {.tv_sec = next / 1000000000LL, .tv_nsec = next % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        int64_t now = ll_now_ns();
        if (ll_vec_push(&w->late_us, (double)(now - next) / 1e3))
            break;
        if (now > next + 1000000)
            next = now; /* fell behind: measure the next sleep, not the backlog */
    }
    return NULL;
}

static size_t step_of(const arrivals *a, int64_t t)
{
    size_t lo = 0, hi = a->n_ends;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (a->ends[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    arrivals *a = ctx;
    if (a->ho.n > 0 && match_handoffs(a, rq))
        return LL_ENOMEM;
    int64_t prev_t = -1;
    size_t prev_s = 0;
    for (size_t i = 0; i < rq->n_chunks; i++) {
        int64_t t = a->epoch + rq->chunks[i].t_ns;
        size_t s = step_of(a, t);
        if (ll_vec_push(&a->late_ms, (double)(t - a->ends[s]) / 1e6))
            return LL_ENOMEM;
        if (prev_t >= 0 && s > prev_s) {
            double meas = (double)(t - prev_t), truth = (double)(a->ends[s] - a->ends[prev_s]);
            if (ll_vec_push(&a->err_ms, (meas - truth) / 1e6))
                return LL_ENOMEM;
        }
        prev_t = t;
        prev_s = s;
    }
    return 0;
}

/* fit's ITL p50 of the run's first level (NAN when fit cannot say). */
static double fit_itl_p50(const char *dir)
{
    fit_run *fr = NULL;
    fit_result *res = NULL;
    fit_options o;
    char err[256];
    double p50 = NAN;
    fit_options_default(&o);
    if (fit_load_run(dir, &fr, err, sizeof err) == 0 && fit_analyze(fr, &o, &res, err, sizeof err) == 0 &&
        res->n_levels > 0)
        p50 = res->levels[0].itl.p50_ms;
    fit_result_free(res);
    fit_run_free(fr);
    return p50;
}

/* ---- 2. the records writer ---------------------------------------------------- */

typedef struct put_arg {
    ll_rec_writer *w;
    int n, first;
    double put_s;
} put_arg;

static void *put_main(void *p)
{
    put_arg *pa = p;
    int64_t t0 = ll_now_ns();
    for (int i = 0; i < pa->n; i++) {
        ll_rec_chunk *ch = malloc(64 * sizeof *ch);
        if (!ch)
            break;
        for (int k = 0; k < 64; k++)
            ch[k] = (ll_rec_chunk){INT64_C(1000000000) + (int64_t)k * 20000000, 1, k < 16 ? 't' : 'a'};
        ll_rec_request rq = {.id = (uint64_t)(pa->first + i), .send_ns = 1000, .header_ns = 2000,
                             .first_token_ns = 1000000000, .first_think_ns = 1000000000,
                             .first_answer_ns = 1320000000, .end_ns = 2300000000, .intended_ns = -1,
                             .prompt_tok = 100, .think_tok = 16, .answer_tok = 48, .usage_prompt = 100,
                             .usage_completion = 64, .usage_reasoning = 16, .http_status = 200,
                             .n_chunks = 64, .chunks = ch};
        if (ll_rec_put_request(pa->w, &rq))
            break;
    }
    pa->put_s = (double)(ll_now_ns() - t0) / 1e9;
    return NULL;
}

static void bench_writer(int n_per_thread)
{
    char path[128], err[256];
    ll_rec_writer *w = NULL;
    snprintf(path, sizeof path, "/tmp/lg_bench_rec_%d.jsonl", (int)getpid());
    if (ll_rec_open(path, 0, &w, err, sizeof err)) {
        fprintf(stderr, "bench writer: %s\n", err);
        return;
    }
    put_arg pa[2] = {{w, n_per_thread, 0, 0}, {w, n_per_thread, n_per_thread, 0}};
    pthread_t th[2];
    int64_t t0 = ll_now_ns();
    int started = 0;
    for (; started < 2; started++)
        if (pthread_create(&th[started], NULL, put_main, &pa[started]) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    int rc = ll_rec_drain(w, 0);
    double all_s = (double)(ll_now_ns() - t0) / 1e9;
    uint64_t written = ll_rec_written(w);
    rc = rc ? rc : ll_rec_close(w);
    double put_s = pa[0].put_s > pa[1].put_s ? pa[0].put_s : pa[1].put_s;
    printf("records writer: %llu request records (64 chunks each) from 2 threads: put %.0f records/s "
           "(%.2f us per put per thread), written+flushed %.0f records/s%s\n",
           (unsigned long long)written, (double)(2 * n_per_thread) / put_s,
           put_s / n_per_thread * 1e6, (double)written / all_s, rc ? " (write error)" : "");
    remove(path);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* One level of C streams on the in-process engine `spec`: the engine, the
 * scenario, the records the run writes, and the waker beside it. */
typedef struct itl_level {
    int C;
    const char *spec, *stamp; /* stamp: the client's load.arrival_stamp ("kernel" or "user") */
    eng_config ec;
    eng_engine *eng;
    scn_scenario *scn;
    scn_prompts *pr;
    ll_rec_writer *rec;
    size_t step0;  /* the engine's step count before the run */
    int64_t epoch; /* the records' time origin */
    waker wk;
    char err[512], dir[128], path[256];
} itl_level;

/* The engine, the scenario and the records file: 0, or an error (in lv->err). */
static int itl_setup(itl_level *lv, int max_tokens, int threads)
{
    char json[512];
    snprintf(lv->dir, sizeof lv->dir, "/tmp/lg_bench_%d", (int)getpid());
    snprintf(json, sizeof json,
             "{\"load\":{\"threads\":%d,\"arrival_stamp\":\"%s\"},\"levels\":[{\"concurrency\":%d,"
             "\"requests\":%d}],\"request\":{\"max_tokens\":%d}}",
             threads, lv->stamp, lv->C, lv->C, max_tokens);
    eng_config_default(&lv->ec);
    int rc = eng_parse_spec(lv->spec, &lv->ec, lv->err, sizeof lv->err);
    rc = rc ? rc : eng_start(&lv->ec, &lv->eng, lv->err, sizeof lv->err);
    rc = rc ? rc : scn_load_string(json, "bench", &lv->scn, lv->err, sizeof lv->err);
    rc = rc ? rc : scn_prompts_load(lv->scn, &lv->pr, lv->err, sizeof lv->err);
    snprintf(lv->path, sizeof lv->path, "%s/records.jsonl", lv->dir);
    rc = rc ? rc : ll_mkdir_p(lv->dir, lv->err, sizeof lv->err);
    rc = rc ? rc : ll_rec_open(lv->path, 0, &lv->rec, lv->err, sizeof lv->err);
    lv->step0 = lv->eng ? eng_step_count(lv->eng) : 0;
    return rc;
}

/* The measured run: loadgen's sweep of the level against the engine, which
 * writes its handoff records into the same file, with the waker running
 * beside it. Closes the records. rc: setup's result (nothing runs unless 0). */
static int itl_sweep(itl_level *lv, int rc)
{
    lg_run *run = NULL;
    lg_config lc = {.scn = lv->scn, .prompts = lv->pr, .url = lv->eng ? eng_url(lv->eng) : "",
                    .model = lv->ec.model, .records = lv->rec};
    rc = rc ? rc : lg_run_create(&lc, &run, lv->err, sizeof lv->err);
    if (!rc && lv->eng)
        eng_set_records(lv->eng, lv->rec);
    int wk_started = !rc && pthread_create(&lv->wk.th, NULL, waker_main, &lv->wk) == 0;
    rc = rc ? rc : lg_run_sweep(run, lv->err, sizeof lv->err);
    if (wk_started) {
        atomic_store(&lv->wk.stop, 1);
        pthread_join(lv->wk.th, NULL);
    }
    if (lv->eng)
        eng_set_records(lv->eng, NULL);
    if (lv->rec)
        lv->epoch = ll_rec_epoch_ns(lv->rec);
    lg_run_free(run);
    if (ll_rec_close(lv->rec) && rc == 0) {
        rc = LL_EIO;
        snprintf(lv->err, sizeof lv->err, "writing the records failed");
    }
    return rc;
}

/* The engine's true step times over the run. */
typedef struct itl_steps {
    int64_t *ends;   /* each step's end, sorted (a->ends points here) */
    int n_max;       /* the fullest batch: at C = 4096 on 2 cores it can stay under C */
    double mean_ms;  /* mean step of the batches within 90% of the fullest */
} itl_steps;

/* Reads the level's steps from the engine into s and a: 0, or -1 out of memory. */
static int itl_load_steps(const itl_level *lv, arrivals *a, itl_steps *s)
{
    size_t ns = eng_step_count(lv->eng) - lv->step0, got = 0, k;
    eng_step *st = calloc(ns + 1, sizeof *st);
    s->ends = calloc(ns + 1, sizeof *s->ends);
    if (!st || !s->ends) {
        free(st);
        return -1;
    }
    while (got < ns && (k = eng_steps(lv->eng, lv->step0 + got, st + got, ns - got)) > 0)
        got += k;
    double step_sum = 0;
    size_t n_full = 0;
    s->n_max = 0;
    for (size_t i = 0; i < got; i++)
        s->n_max = st[i].n_decode > s->n_max ? st[i].n_decode : s->n_max;
    for (size_t i = 0; i < got; i++) {
        s->ends[i] = st[i].start_ns + st[i].dur_ns;
        if (st[i].n_decode >= s->n_max * 9 / 10) {
            step_sum += (double)st[i].dur_ns / 1e6;
            n_full++;
        }
    }
    s->mean_ms = n_full ? step_sum / (double)n_full : NAN;
    free(st);
    qsort(s->ends, got, sizeof *s->ends, cmp_i64);
    a->ends = s->ends;
    a->n_ends = got;
    return 0;
}

/* The records read back: the handoffs first (sorted, for matching), then each
 * request's chunks against the step ends. 0 when there are gaps to report. */
static int itl_read_records(itl_level *lv, arrivals *a)
{
    ll_rec_handlers h0 = {.on_handoff = on_handoff, .on_level_end = on_level_end};
    if (ll_rec_read(lv->path, &h0, a, NULL, lv->err, sizeof lv->err) == 0 && a->ho.n > 0)
        qsort(a->ho.v, a->ho.n, sizeof *a->ho.v, cmp_handoff);
    ll_rec_handlers h = {.on_request = on_request};
    if (ll_rec_read(lv->path, &h, a, NULL, lv->err, sizeof lv->err) == 0 && a->err_ms.n > 0)
        return 0;
    return -1;
}

/* The level's first lines: the true step against fit's ITL, the ITL error and
 * the arrival delay after each step's end. */
static void print_itl_error(const itl_level *lv, arrivals *a, const itl_steps *s)
{
    size_t n = a->err_ms.n;
    double *abs_err = malloc(n * sizeof *abs_err);
    for (size_t i = 0; abs_err && i < n; i++)
        abs_err[i] = fabs(a->err_ms.v[i]);
    ll_sort_doubles(a->err_ms.v, n);
    ll_sort_doubles(a->late_ms.v, a->late_ms.n);
    if (abs_err)
        ll_sort_doubles(abs_err, n);
    printf("C=%-5d %s, %s stamps: %zu gaps; true step (N >= 0.9 x the fullest batch, %d) mean %.3f ms; "
           "measured ITL p50 %.3f ms\n", lv->C, lv->spec, lv->stamp, n, s->n_max, s->mean_ms,
           fit_itl_p50(lv->dir));
    printf("        ITL error (measured - true): p50 %+.3f ms, p99 %+.3f ms; |error| p50 %.3f ms, p99 %.3f ms\n",
           ll_quantile_sorted(a->err_ms.v, n, 0.5), ll_quantile_sorted(a->err_ms.v, n, 0.99),
           abs_err ? ll_quantile_sorted(abs_err, n, 0.5) : NAN, abs_err ? ll_quantile_sorted(abs_err, n, 0.99) : NAN);
    printf("        arrival after step end: p50 %.3f ms, p99 %.3f ms (server write + loopback + client read)\n",
           ll_quantile_sorted(a->late_ms.v, a->late_ms.n, 0.5), ll_quantile_sorted(a->late_ms.v, a->late_ms.n, 0.99));
    free(abs_err);
}

/* Where a sampled token's delay went: the engine's fan-out, then the way to
 * the stamp, and (with the engine's send time) MHD's pass and the client's lag. */
static void print_split(arrivals *a, const char *stamp)
{
    if (a->ho_matched == 0) {
        printf("        split: no handoff record matched a request (engine without handoff_sample?)\n");
        return;
    }
    int user = strcmp(stamp, "user") == 0;
    ll_sort_doubles(a->fanout_ms.v, a->fanout_ms.n);
    ll_sort_doubles(a->lag_ms.v, a->lag_ms.n);
    printf("        split (%zu sampled tokens of %zu handoff records): engine fan-out (step end -> "
           "handed to MHD) p50 %.3f ms, p99 %.3f ms; then to the stamp (MHD's next pass and send, loopback%s) "
           "p50 %.3f ms, p99 %.3f ms\n",
           a->ho_matched, a->ho.n, ll_quantile_sorted(a->fanout_ms.v, a->fanout_ms.n, 0.5),
           ll_quantile_sorted(a->fanout_ms.v, a->fanout_ms.n, 0.99), user ? ", the client's read" : "",
           ll_quantile_sorted(a->lag_ms.v, a->lag_ms.n, 0.5), ll_quantile_sorted(a->lag_ms.v, a->lag_ms.n, 0.99));
    if (a->wire_ms.n == 0)
        return;
    ll_sort_doubles(a->pass_ms.v, a->pass_ms.n);
    ll_sort_doubles(a->wire_ms.v, a->wire_ms.n);
    printf("        of which (%zu with the engine's send time): MHD's pass (handed -> its send() "
           "returned) p50 %.3f ms, p99 %.3f ms; client lag (send() returned -> arrival%s) "
           "p50 %+.4f ms, p99 %+.4f ms\n",
           a->wire_ms.n, ll_quantile_sorted(a->pass_ms.v, a->pass_ms.n, 0.5),
           ll_quantile_sorted(a->pass_ms.v, a->pass_ms.n, 0.99),
           user ? ", the client's read" : ", the kernel's stamp",
           ll_quantile_sorted(a->wire_ms.v, a->wire_ms.n, 0.5),
           ll_quantile_sorted(a->wire_ms.v, a->wire_ms.n, 0.99));
}

/* The client's own figures from the level_end record, and the machine's
 * timer-wake lateness during the run. */
static void print_client(const arrivals *a, waker *wk)
{
    const ll_rec_client *c = &a->client;
    if (c->present && c->reads > 0)
        printf("        client: %.1f%% of %llu reads kernel-stamped; read lag (stamp -> the worker's "
               "callback) p50 %.3f ms, p99 %.3f ms, max %.3f ms; worker CPU %.2f us per event\n",
               c->reads_kstamp > 0 ? 100.0 * (double)c->reads_kstamp / (double)c->reads : 0.0,
               (unsigned long long)c->reads, c->read_lag_p50_ms, c->read_lag_p99_ms, c->read_lag_max_ms,
               c->events ? c->cpu_s_sum / (double)c->events * 1e6 : NAN);
    if (wk->late_us.n > 0) {
        ll_sort_doubles(wk->late_us.v, wk->late_us.n);
        printf("        this machine's timer-wake lateness in the same run (1 ms absolute sleeps, %zu): "
               "p50 %.3f ms, p99 %.3f ms\n",
               wk->late_us.n, ll_quantile_sorted(wk->late_us.v, wk->late_us.n, 0.5) / 1e3,
               ll_quantile_sorted(wk->late_us.v, wk->late_us.n, 0.99) / 1e3);
    }
}

static void arrivals_free(arrivals *a)
{
    ll_vec_free(&a->err_ms);
    ll_vec_free(&a->late_ms);
    ll_vec_free(&a->ho);
    ll_vec_free(&a->fanout_ms);
    ll_vec_free(&a->lag_ms);
    ll_vec_free(&a->pass_ms);
    ll_vec_free(&a->wire_ms);
}

/* The engine stopped, the scenario freed and the run's folder removed. */
static void itl_teardown(itl_level *lv)
{
    char cmd[512];
    ll_vec_free(&lv->wk.late_us);
    if (lv->eng)
        eng_stop(lv->eng);
    scn_prompts_free(lv->pr);
    scn_free(lv->scn);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", lv->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
}

/* One level of C streams on the in-process engine `spec`; stamp: the
 * client's load.arrival_stamp ("kernel" or "user"). */
static void bench_itl(int C, const char *spec, int max_tokens, int threads, const char *stamp)
{
    itl_level lv = {.C = C, .spec = spec, .stamp = stamp};
    int rc = itl_sweep(&lv, itl_setup(&lv, max_tokens, threads));
    if (rc) {
        fprintf(stderr, "bench C=%d: %s\n", C, lv.err);
        itl_teardown(&lv);
        return;
    }
    arrivals a = {.epoch = lv.epoch};
    itl_steps s = {0};
    if (itl_load_steps(&lv, &a, &s) == 0 && itl_read_records(&lv, &a) == 0) {
        print_itl_error(&lv, &a, &s);
        print_split(&a, stamp);
        print_client(&a, &lv.wk);
    }
    free(s.ends);
    arrivals_free(&a);
    itl_teardown(&lv);
}

/* Stamp accuracy at C streams, without libcurl or the engine: a writer
 * thread writes one 288-byte frame to each of C loopback sockets every
 * step (30 ms), each frame carrying the clock read just before its write();
 * a reader thread reads them through loadgen's recv() (netstamp.h) on one
 * epoll set. Per frame: the kernel's stamp - the write (what a chunk time
 * now carries beyond the network) and the read - the write (what a clock
 * read at the callback carried before: the reader's queue). */
enum { STAMP_FRAME = 288 };

typedef struct stamp_bench {
    int C, steps;
    int *wr, *rd;                 /* server (writer) and client (reader) ends */
    int64_t start_ns;
    atomic_int stop;
    LL_VEC(double) k_us, u_us;    /* kernel stamp - write; read - write */
    size_t frames, unstamped;
} stamp_bench;

static void *stamp_writer(void *arg)
{
    stamp_bench *b = arg;
    char frame[STAMP_FRAME];
    memset(frame, 'x', sizeof frame);
    for (int s = 0; s < b->steps && !atomic_load(&b->stop); s++) {
        ll_sleep_until_ns(b->start_ns + (int64_t)s * 30000000);
        for (int i = 0; i < b->C; i++) {
            int64_t t = ll_now_ns();
            memcpy(frame, &t, sizeof t);
            if (write(b->wr[i], frame, sizeof frame) != (ssize_t)sizeof frame)
                atomic_store(&b->stop, 1);
        }
    }
    return NULL;
}

static int stamp_pairs(stamp_bench *b)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int on = 1, l = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        goto out;
    for (int i = 0; i < b->C; i++) {
        b->rd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (b->rd[i] < 0 || ns_rx_enable(b->rd[i]) || connect(b->rd[i], (struct sockaddr *)&a, sizeof a))
            goto out;
        b->wr[i] = accept(l, NULL, NULL);
        if (b->wr[i] < 0 || setsockopt(b->wr[i], IPPROTO_TCP, TCP_NODELAY, &on, sizeof on))
            goto out;
    }
    rc = 0;
out:
    if (l >= 0)
        close(l);
    return rc;
}

/* The C socket pairs and the reader's epoll set: 0, or -1 (reported when the
 * sockets fail). b->wr and b->rd are allocated and set to -1 first. */
static int stamp_open(stamp_bench *b, int ep)
{
    int C = b->C;
    b->wr = malloc((size_t)C * sizeof *b->wr);
    b->rd = malloc((size_t)C * sizeof *b->rd);
    if (!b->wr || !b->rd)
        return -1;
    for (int i = 0; i < C; i++)
        b->wr[i] = b->rd[i] = -1;
    if (ep < 0)
        return -1;
    if (stamp_pairs(b)) {
        fprintf(stderr, "bench_stamp C=%d: loopback sockets: %s\n", C, strerror(errno));
        return -1;
    }
    for (int i = 0; i < C; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, b->rd[i], &ev))
            return -1;
    }
    return 0;
}

static void stamp_close(stamp_bench *b, int ep)
{
    for (int i = 0; b->wr && b->rd && i < b->C; i++) {
        if (b->wr[i] >= 0)
            close(b->wr[i]);
        if (b->rd[i] >= 0)
            close(b->rd[i]);
    }
    if (ep >= 0)
        close(ep);
    free(b->wr);
    free(b->rd);
    ll_vec_free(&b->k_us);
    ll_vec_free(&b->u_us);
}

/* The frames a read completed on socket i (part/have: a frame split over
 * reads), each set against the write time it carries: t_k the read's kernel
 * stamp (-1: none), t_user the clock read after it. -1 out of memory. */
static int stamp_take(stamp_bench *b, char (*part)[STAMP_FRAME], int *have, int i, const char *buf,
                      ssize_t got, int64_t t_k, int64_t t_user)
{
    for (ssize_t off = 0; off < got;) {
        size_t take = (size_t)(got - off) < (size_t)(STAMP_FRAME - have[i]) ? (size_t)(got - off)
                                                                            : (size_t)(STAMP_FRAME - have[i]);
        memcpy(part[i] + have[i], buf + off, take);
        have[i] += (int)take;
        off += (ssize_t)take;
        if (have[i] < STAMP_FRAME)
            continue;
        int64_t w;
        memcpy(&w, part[i], sizeof w);
        have[i] = 0;
        b->frames++;
        if (t_k < 0)
            b->unstamped++;
        else if (ll_vec_push(&b->k_us, (double)(t_k - w) / 1e3))
            return -1;
        if (ll_vec_push(&b->u_us, (double)(t_user - w) / 1e3))
            return -1;
    }
    return 0;
}

/* The reader: every frame the writer sends, or until 5 s past its last step. */
static void stamp_read(stamp_bench *b, int ep, ns_rx *rx, char (*part)[STAMP_FRAME], int *have)
{
    size_t want = (size_t)b->C * (size_t)b->steps;
    int64_t give_up = b->start_ns + (int64_t)b->steps * 30000000 + 5000000000LL;
    struct epoll_event evs[256];
    char buf[4096];
    while (b->frames < want && ll_now_ns() < give_up && !atomic_load(&b->stop)) {
        int n = epoll_wait(ep, evs, 256, 100);
        if (n > 0)
            ns_rx_clock(rx);
        for (int e = 0; e < n; e++) {
            int i = (int)evs[e].data.u32;
            ssize_t got = recv(b->rd[i], buf, sizeof buf, 0);
            int64_t t_user = ll_now_ns(), t_k = rx->fd == b->rd[i] ? rx->t_ns : -1;
            stamp_take(b, part, have, i, buf, got, t_k, t_user);
        }
    }
}

static void stamp_print(stamp_bench *b)
{
    ll_sort_doubles(b->k_us.v, b->k_us.n);
    ll_sort_doubles(b->u_us.v, b->u_us.n);
    printf("stamps, C=%-5d %zu frames (%zu without a kernel stamp): kernel stamp - write() p50 %.1f us, p99 %.1f us, "
           "max %.1f us; read - write() p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
           b->C, b->frames, b->unstamped, b->k_us.n ? ll_quantile_sorted(b->k_us.v, b->k_us.n, 0.5) : NAN,
           b->k_us.n ? ll_quantile_sorted(b->k_us.v, b->k_us.n, 0.99) : NAN,
           b->k_us.n ? b->k_us.v[b->k_us.n - 1] : NAN,
           b->u_us.n ? ll_quantile_sorted(b->u_us.v, b->u_us.n, 0.5) / 1e3 : NAN,
           b->u_us.n ? ll_quantile_sorted(b->u_us.v, b->u_us.n, 0.99) / 1e3 : NAN,
           b->u_us.n ? b->u_us.v[b->u_us.n - 1] / 1e3 : NAN);
}

static void bench_stamp(int C, int steps)
{
    stamp_bench b = {.C = C, .steps = steps};
    int ep = epoll_create1(0);
    char (*part)[STAMP_FRAME] = NULL; /* a frame split over reads */
    int *have = NULL;
    if (stamp_open(&b, ep) != 0)
        goto out;
    part = calloc((size_t)C, STAMP_FRAME);
    have = calloc((size_t)C, sizeof *have);
    if (!part || !have)
        goto out;
    ns_rx rx;
    ns_rx_attach(&rx);
    b.start_ns = ll_now_ns() + 20000000;
    pthread_t th;
    if (pthread_create(&th, NULL, stamp_writer, &b) != 0) {
        ns_rx_attach(NULL);
        goto out;
    }
    stamp_read(&b, ep, &rx, part, have);
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    ns_rx_attach(NULL);
    stamp_print(&b);
out:
    free(part);
    free(have);
    stamp_close(&b, ep);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int parse_only = argc > 1 && strcmp(argv[1], "--parse") == 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    gsl_set_error_handler_off(); /* fit: GSL's default handler aborts */
    eng_blas_single_thread();    /* OpenBLAS's spinning threads off, as loadlaw does */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    printf("bench_loadgen (%s)\n", quick ? "--quick" : parse_only ? "--parse" : "full");
    bench_parse_all(quick || parse_only ? 50000 : 500000);
    if (parse_only) {
        curl_global_cleanup();
        return 0;
    }
    bench_writer(quick ? 20000 : 100000);
    printf("kernel receive stamps on loopback: one writer thread, one reader thread through loadgen's recv(), "
           "a 288-byte frame per socket every 30 ms:\n");
    bench_stamp(64, quick ? 10 : 40);
    bench_stamp(1024, quick ? 10 : 40);
    if (!quick)
        bench_stamp(4096, 20);
    /* 52+30n: at time scale 0.01 a C=64 step is 19.7 ms; at 0.001 a C=1024 step is 30.8 ms. */
    /* handoff_sample=8: every 8th token of each stream is timed at its
     * socket write too, which splits the delay into fan-out and client lag. */
    /* Each level twice: chunks timed by the kernel's receive stamp (the
     * default), then by the clock on the worker thread (the client's own lag
     * then shows in the error). */
    const char *c64 = "backend=synthetic,law=52+30n,time_scale=0.01,think=16,handoff_sample=8";
    const char *c1024 = "backend=synthetic,law=52+30n,time_scale=0.001,think=16,max_running=1024,"
                        "prefill_budget=131072,handoff_sample=8";
    /* at 0.0002 a C=4096 step is 24.6 ms */
    const char *c4096 = "backend=synthetic,law=52+30n,time_scale=0.0002,think=16,max_running=4096,"
                        "prefill_budget=524288,max_connections=8192,handoff_sample=8";
    for (int s = 0; s < 2; s++) {
        const char *stamp = s == 0 ? "kernel" : "user";
        bench_itl(64, c64, quick ? 32 : 64, 1, stamp);
        bench_itl(1024, c1024, quick ? 32 : 64, 2, stamp);
        if (!quick)
            bench_itl(4096, c4096, 32, 2, stamp);
    }
    curl_global_cleanup();
    return 0;
}
