/* bench_loadgen.c: the client's own cost. Prints figures; never pass/fail.
 *
 *  1. Token events per second one worker thread ingests: a recorded vLLM-style
 *     stream (one token per chunk, continuous usage) fed in 16 KiB reads
 *     through the same path a libcurl write callback takes: one ll_now_ns()
 *     per read, SSE framing, JSON delta interpretation, chunk recording.
 *  2. ITL error against the bundled engine's true step times at C=64 and
 *     C=1024: each chunk is matched to the latest step end before its arrival;
 *     the true inter-token gap is the distance between the two step ends, the
 *     measured one the distance between arrivals; their difference is the
 *     client's (plus HTTP stack's) error.
 *
 * usage: bench_loadgen [--quick]      (from the build dir: bench/loadgen/bench_loadgen) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "engine.h"
#include "loadgen.h"
#include "sse.h"

typedef struct sink {
    lg_delta d;
    int64_t now;
    int64_t *t;
    size_t n, cap;
    long tokens;
} sink;

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    sink *s = ctx;
    lg_delta_out o;
    lg_delta_event(&s->d, event, data, len, &o);
    int tok = o.think_tok + o.answer_tok;
    if (tok) {
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 1024;
            int64_t *nt = realloc(s->t, s->cap * sizeof *nt);
            if (!nt)
                return LL_ENOMEM;
            s->t = nt;
        }
        s->t[s->n++] = s->now;
        s->tokens += tok;
    }
    return 0;
}

static void bench_parse(int n_tok)
{
    ll_buf b = {0};
    for (int i = 0; i < n_tok; i++)
        ll_buf_printf(&b,
                      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                      "\"choices\":[{\"index\":0,\"delta\":{\"%s\":\" word%d\"},\"logprobs\":null,\"finish_reason\":null}],"
                      "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
                      i < n_tok / 2 ? "reasoning_content" : "content", i, i + 1, i + 101);
    ll_buf_printf(&b, "data: [DONE]\n\n");
    sink s = {0};
    lg_sse sse;
    lg_delta_init(&s.d);
    lg_sse_init(&sse, on_event, &s);
    int64_t t0 = ll_now_ns();
    for (size_t off = 0; off < b.len; off += 16384) {
        s.now = ll_now_ns();
        size_t k = b.len - off < 16384 ? b.len - off : 16384;
        lg_sse_feed(&sse, b.p + off, k);
    }
    lg_sse_finish(&sse);
    double sec = (double)(ll_now_ns() - t0) / 1e9;
    printf("parse+timestamp path, one thread: %ld token events in %.3f s = %.0f tokens/s (%.2f MB/s of SSE)\n",
           s.tokens, sec, (double)s.tokens / sec, (double)b.len / sec / 1e6);
    lg_sse_free(&sse);
    free(s.t);
    ll_buf_free(&b);
}

typedef struct arrivals {
    int64_t epoch;
    double *err_ms;   /* measured gap - true gap, per consecutive chunk pair */
    size_t n, cap;
    const int64_t *ends;
    size_t n_ends;
    double *late_ms;
    size_t n_late, cap_late;
} arrivals;

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

static int push(double **v, size_t *n, size_t *cap, double x)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4096;
        double *nv = realloc(*v, *cap * sizeof *nv);
        if (!nv)
            return LL_ENOMEM;
        *v = nv;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int on_record(const cJSON *o, size_t line_no, void *ctx)
{
    arrivals *a = ctx;
    if (strcmp(ll_json_str(o, "type", ""), "request"))
        return 0;
    const cJSON *ch = cJSON_GetObjectItem(o, "chunks");
    int64_t prev_t = -1;
    size_t prev_s = 0;
    for (const cJSON *x = ch ? ch->child : NULL; x; x = x->next) {
        int64_t t = a->epoch + (int64_t)cJSON_GetArrayItem(x, 0)->valuedouble;
        size_t s = step_of(a, t);
        if (push(&a->late_ms, &a->n_late, &a->cap_late, (double)(t - a->ends[s]) / 1e6))
            return LL_ENOMEM;
        if (prev_t >= 0 && s > prev_s) {
            double meas = (double)(t - prev_t), truth = (double)(a->ends[s] - a->ends[prev_s]);
            if (push(&a->err_ms, &a->n, &a->cap, (meas - truth) / 1e6))
                return LL_ENOMEM;
        }
        prev_t = t;
        prev_s = s;
    }
    return 0;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static void bench_itl(int C, const char *spec, int max_tokens, int threads)
{
    eng_config ec;
    eng_engine *eng = NULL;
    scn_scenario *scn = NULL;
    scn_prompts *pr = NULL;
    lg_run *run = NULL;
    char err[512] = "", dir[128], json[512];
    snprintf(dir, sizeof dir, "/tmp/lg_bench_%d", (int)getpid());
    snprintf(json, sizeof json,
             "{\"load\":{\"threads\":%d},\"levels\":[{\"concurrency\":%d,\"requests\":%d}],"
             "\"request\":{\"max_tokens\":%d}}",
             threads, C, C, max_tokens);
    eng_config_default(&ec);
    int rc = eng_parse_spec(spec, &ec, err, sizeof err);
    rc = rc ? rc : eng_start(&ec, &eng, err, sizeof err);
    rc = rc ? rc : scn_load_string(json, "bench", &scn, err, sizeof err);
    rc = rc ? rc : scn_prompts_load(scn, &pr, err, sizeof err);
    size_t step0 = eng ? eng_step_count(eng) : 0;
    lg_config lc = {.scn = scn, .prompts = pr, .url = eng ? eng_url(eng) : "", .model = ec.model, .run_dir = dir};
    rc = rc ? rc : lg_run_create(&lc, &run, err, sizeof err);
    rc = rc ? rc : lg_run_sweep(run, err, sizeof err);
    if (rc) {
        fprintf(stderr, "bench C=%d: %s\n", C, err);
        goto out;
    }
    size_t nl;
    const lg_level_summary *L = lg_run_levels(run, &nl);
    arrivals a = {.epoch = lg_run_epoch_ns(run)};
    size_t ns = eng_step_count(eng) - step0, got = 0, k;
    eng_step *st = calloc(ns + 1, sizeof *st);
    int64_t *ends = calloc(ns + 1, sizeof *ends);
    if (!st || !ends)
        goto out2;
    while (got < ns && (k = eng_steps(eng, step0 + got, st + got, ns - got)) > 0)
        got += k;
    double step_sum = 0;
    size_t n_full = 0;
    for (size_t i = 0; i < got; i++) {
        ends[i] = st[i].start_ns + st[i].dur_ns;
        if (st[i].n_decode >= C * 9 / 10) {
            step_sum += (double)st[i].dur_ns / 1e6;
            n_full++;
        }
    }
    qsort(ends, got, sizeof *ends, cmp_i64);
    a.ends = ends;
    a.n_ends = got;
    char path[256];
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    if (ll_jsonl_foreach(path, on_record, &a, NULL, err, sizeof err) == 0 && a.n > 0) {
        double *abs_err = malloc(a.n * sizeof *abs_err);
        for (size_t i = 0; abs_err && i < a.n; i++)
            abs_err[i] = fabs(a.err_ms[i]);
        ll_sort_doubles(a.err_ms, a.n);
        ll_sort_doubles(a.late_ms, a.n_late);
        if (abs_err)
            ll_sort_doubles(abs_err, a.n);
        printf("C=%-5d %s: %zu gaps; true step (N>=0.9C) mean %.3f ms; measured ITL p50 %.3f ms\n", C, spec, a.n,
               n_full ? step_sum / (double)n_full : NAN, L[0].itl_ms.p50);
        printf("        ITL error (measured - true): p50 %+.3f ms, p99 %+.3f ms; |error| p50 %.3f ms, p99 %.3f ms\n",
               ll_quantile_sorted(a.err_ms, a.n, 0.5), ll_quantile_sorted(a.err_ms, a.n, 0.99),
               abs_err ? ll_quantile_sorted(abs_err, a.n, 0.5) : NAN,
               abs_err ? ll_quantile_sorted(abs_err, a.n, 0.99) : NAN);
        printf("        arrival after step end: p50 %.3f ms, p99 %.3f ms (server write + loopback + client read)\n",
               ll_quantile_sorted(a.late_ms, a.n_late, 0.5), ll_quantile_sorted(a.late_ms, a.n_late, 0.99));
        free(abs_err);
    }
out2:
    free(st);
    free(ends);
    free(a.err_ms);
    free(a.late_ms);
out:
    if (run)
        lg_run_free(run);
    if (eng)
        eng_stop(eng);
    scn_prompts_free(pr);
    scn_free(scn);
    snprintf(json, sizeof json, "rm -rf '%s'", dir);
    if (system(json) != 0)
        fprintf(stderr, "cleanup failed\n");
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    printf("bench_loadgen (%s)\n", quick ? "--quick" : "full");
    bench_parse(quick ? 50000 : 500000);
    /* 52+30n: at time scale 0.01 a C=64 step is 19.7 ms; at 0.001 a C=1024 step is 30.8 ms. */
    bench_itl(64, "backend=synthetic,law=52+30n,time_scale=0.01,think=16", quick ? 32 : 64, 1);
    bench_itl(1024, "backend=synthetic,law=52+30n,time_scale=0.001,think=16,max_running=1024,prefill_budget=131072",
              quick ? 32 : 64, 2);
    curl_global_cleanup();
    return 0;
}
