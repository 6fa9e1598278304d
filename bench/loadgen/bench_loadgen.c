/* bench_loadgen.c: the client's own cost. Prints figures; never pass/fail.
 * This file runs them all (main) and holds the two short ones, 1 and 2.
 *
 *  1. Token events per second one worker thread ingests: recorded streams
 *     (a vLLM-style one: one token per chunk, continuous usage) fed in 16 KiB reads
 *     through the same path a libcurl write callback takes: one ll_now_ns()
 *     per read, SSE framing, JSON delta interpretation, chunk recording.
 *  2. The records writer: request records (64 chunks each) queued from two
 *     producer threads, as loadgen's workers queue them: the producers' put
 *     rate (what a stamping thread pays per finished request) and the rate
 *     at which the writer thread formats, writes and flushes them.
 *  3. ITL error against the bundled engine's true step times: bench_itl.c.
 *  4. Kernel receive stamps on loopback sockets, without libcurl or the
 *     engine: bench_stamp.c.
 *
 *  Streams of (1): one per dialect the parser reads (vLLM chat with
 *  reasoning_content and continuous usage; delta.reasoning; inline <think>;
 *  four tokens a chunk with usage; the Responses API; SGLang /generate), each
 *  with the count of events the fast JSON scanner handed to cJSON.
 *
 * usage: bench_loadgen [--quick | --parse]   (from the build dir: bench/loadgen/bench_loadgen)
 *        --parse: (1) alone */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gsl/gsl_errno.h>

#include "common.h"
#include "engine.h"
#include "api.h"
#include "loadgen.h"
#include "sse.h"
#include "bench_loadgen.h"

/* ---- 1. parse throughput ------------------------------------------------------ */

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
        s.d.api = lg_api_of(k == ST_RESPONSES ? SCN_ENDPOINT_RESPONSES
                            : k == ST_GENERATE ? SCN_ENDPOINT_GENERATE
                                               : SCN_ENDPOINT_CHAT);
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
