/* test_engine_e2e.c: loadgen against the bundled engine, started in this
 * process, over loopback HTTP — the engine's step log is the ground truth.
 * The engine's steps reach the run's records through the records writer
 * (eng_set_records), as in `loadlaw sweep`; everything below is read back
 * from those records (ll_rec_read), latencies through fit (fit.h).
 *
 * Checked:
 *  - the run line carries the engine as data: spec, backend, the law played
 *    (scaled) and its time scale; every engine step of the run is a step
 *    record;
 *  - counts equal the engine's exactly: tokens the client counted from the
 *    streams == sum of n_decode over the steps + one first token per request
 *    (engine.h: a sequence's first token is emitted by its prefill step and
 *    not counted in n_decode), and thinking/answer splits equal think=N;
 *  - every token chunk arrives after the end of some step and at most
 *    2 ms + 5% of that step's duration later (tolerance stated here), for
 *    >= 90% of chunks, and the median lateness is under 1 ms; to both the
 *    engine's own time from step end to socket write is added (its p90 and
 *    p50, from handoff records of every token: ~0.1 ms idle, milliseconds
 *    when every core is busy, which is the server's delay, not the
 *    client's). On an idle machine 0-1% fall outside; the slack is for a CI
 *    box shared by several builds, where a descheduled process delays whole
 *    bursts of chunks;
 *  - ITL p50 at each level (fit's figure) equals the law's step time a + b*C
 *    (scaled) within 10%; TTFT >= one step; TTFA - TTFT >= think steps;
 *  - timing checks are the only ones a loaded machine can break (a client
 *    thread not scheduled for 10 ms stamps its chunks 10 ms late), so a case
 *    whose counts all hold but whose timing misses is run again, up to 3
 *    times; a real timing defect (a stamp taken after parsing, a gap not
 *    divided by the chunk's tokens) misses every time. Counts must hold on
 *    every attempt;
 *  - 1024 concurrent streams against the engine complete with exact counts
 *    (their timing error is a figure printed by bench/loadgen, not a pass/fail
 *    bound: at 1024 streams it depends on how loaded the machine is). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gsl/gsl_errno.h>

#include "common.h"
#include "engine.h"
#include "fit.h"
#include "loadgen.h"
#include "testutil.h"

/* Sanitizers slow the engine and the client several-fold: their run checks
 * memory and exact counts; timing bounds hold only for an optimised build. */
#if defined(__SANITIZE_ADDRESS__)
#define TIMING_CHECKS 0
#else
#define TIMING_CHECKS 1
#endif

enum { MAX_LEVELS = 4 };

/* The records of one run, read back. */
typedef struct seen {
    LL_VEC(int64_t) arrivals;   /* every chunk's arrival, run clock */
    LL_VEC(int64_t) step_ends;  /* every step's end, run clock */
    LL_VEC(double) srv_ms;      /* each handoff sample's send_ns - step_end_ns, ms */
    long tokens, think, answer, requests, ok, decoded, steps;
    int levels, level_ok[MAX_LEVELS], level_failed[MAX_LEVELS];
    long level_think[MAX_LEVELS], level_tokens[MAX_LEVELS], level_usage[MAX_LEVELS];
    ll_rec_engine_law law;
    char backend[16], engine[128];
} seen;

static int on_run(const ll_rec_run *run, void *ctx)
{
    seen *c = ctx;
    c->law = run->law;
    snprintf(c->backend, sizeof c->backend, "%s", run->backend ? run->backend : "(null)");
    snprintf(c->engine, sizeof c->engine, "%s", run->engine ? run->engine : "(null)");
    return 0;
}

static int on_level(const ll_rec_level *lv, void *ctx)
{
    seen *c = ctx;
    c->levels++;
    return 0;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    seen *c = ctx;
    int rc;
    c->requests++;
    c->ok += rq->cls == LL_ERRC_OK;
    c->think += rq->think_tok;
    c->answer += rq->answer_tok;
    if (rq->level >= 0 && rq->level < MAX_LEVELS) {
        c->level_ok[rq->level] += rq->cls == LL_ERRC_OK;
        c->level_failed[rq->level] += rq->cls != LL_ERRC_OK;
        c->level_think[rq->level] += rq->think_tok;
        c->level_tokens[rq->level] += rq->think_tok + rq->answer_tok;
        c->level_usage[rq->level] += rq->usage_completion > 0 ? rq->usage_completion : 0;
    }
    for (size_t i = 0; i < rq->n_chunks; i++) {
        LL_TRY(ll_vec_push(&c->arrivals, rq->chunks[i].t_ns));
        c->tokens += rq->chunks[i].tokens;
    }
    return 0;
fail:
    return rc;
}

static int on_step(const ll_rec_step *st, void *ctx)
{
    seen *c = ctx;
    c->steps++;
    c->decoded += st->n_decode;
    return ll_vec_push(&c->step_ends, st->start_ns + st->dur_ns);
}

static int on_handoff(const ll_rec_handoff *h, void *ctx)
{
    seen *c = ctx;
    if (h->send_ns < 0)
        return 0; /* its connection ended before the bytes went out */
    return ll_vec_push(&c->srv_ms, (double)(h->send_ns - h->step_end_ns) / 1e6);
}

/* Timing checks: failures are notes until the last attempt (see above). */
static int g_timing_last, g_timing_missed;
#define TCHECK(cond, ...)                                                      \
    do {                                                                       \
        if (g_timing_last) {                                                   \
            CHECK(cond, __VA_ARGS__);                                          \
        } else if (!(cond)) {                                                  \
            g_timing_missed = 1;                                               \
            fprintf(stderr, "  timing missed (will retry): ");                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                              \
        }                                                                      \
    } while (0)

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Per-level latencies from fit, against the law. */
static void check_latencies(const char *dir, double a_ms, double b_ms, int think)
{
    fit_run *fr = NULL;
    fit_result *res = NULL;
    fit_options o;
    char err[512] = "";
    fit_options_default(&o);
    int rc = fit_load_run(dir, &fr, err, sizeof err);
    if (rc == 0)
        rc = fit_analyze(fr, &o, &res, err, sizeof err);
    CHECK(rc == 0, "fit %s: %s", dir, err);
    for (size_t i = 0; rc == 0 && i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        double law = a_ms + b_ms * L->concurrency;
        TCHECK(fabs(L->itl.p50_ms / law - 1) < 0.10, "level C=%d ITL p50 %.3f ms vs law %.3f ms", L->concurrency,
               L->itl.p50_ms, law);
        TCHECK(L->ttft.p50_ms >= a_ms * 0.9, "level C=%d TTFT p50 %.3f ms under one step (a = %.3f ms)",
               L->concurrency, L->ttft.p50_ms, a_ms);
        TCHECK(L->ttfa.p50_ms - L->ttft.p50_ms >= (think - 1) * law * 0.9, "level C=%d TTFA-TTFT %.2f ms",
               L->concurrency, L->ttfa.p50_ms - L->ttft.p50_ms);
    }
    fit_result_free(res);
    fit_run_free(fr);
}

/* Lateness of each chunk after the latest step end before it. The bounds
 * are the client's; the time the engine itself took from a step's end to
 * the socket write of its tokens (its handoff samples, send_ns - step_end_ns)
 * is added to them: ~0.1 ms on an idle machine, but a host whose cores are
 * all busy holds the engine's HTTP thread up for milliseconds (p50 2 ms, a
 * third of the chunks past 2 ms + 5% with three busy loops on two cores),
 * and that is the server's delay, which the client measures faithfully. */
static void check_lateness(seen *c, const char *spec, int timing)
{
    int64_t *ends = c->step_ends.v, *t = c->arrivals.v;
    size_t got = c->step_ends.n, n = c->arrivals.n, late_bad = 0;
    double *late = malloc((n + 1) * sizeof *late);
    double srv_p50 = 0, srv_p90 = 0;
    if (c->srv_ms.n) {
        ll_sort_doubles(c->srv_ms.v, c->srv_ms.n);
        srv_p50 = ll_quantile_sorted(c->srv_ms.v, c->srv_ms.n, 0.5);
        srv_p90 = ll_quantile_sorted(c->srv_ms.v, c->srv_ms.n, 0.9);
    }
    if (!late || !got)
        goto out;
    qsort(ends, got, sizeof *ends, cmp_i64);
    qsort(t, n, sizeof *t, cmp_i64);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j + 1 < got && ends[j + 1] <= t[i])
            j++;
        int64_t d = t[i] - ends[j];
        int64_t dur = j > 0 ? ends[j] - ends[j - 1] : 0;
        late[i] = (double)d / 1e6;
        if (d < 0 || (double)d > 2e6 + 0.05 * (double)dur + srv_p90 * 1e6)
            late_bad++;
    }
    ll_sort_doubles(late, n);
    double p50 = ll_quantile_sorted(late, n, 0.5), p99 = ll_quantile_sorted(late, n, 0.99);
    printf("  %s: %zu chunks, arrival after step end p50 %.3f ms p99 %.3f ms, outside 2ms+5%%+server's p90: %zu; "
           "server's own step end to send p50 %.3f ms p90 %.3f ms (%zu samples)\n",
           spec, n, p50, p99, late_bad, srv_p50, srv_p90, c->srv_ms.n);
    if (timing) {
        TCHECK(c->srv_ms.n > 0, "handoff samples recorded");
        TCHECK(late_bad <= n / 10, "%zu of %zu chunks outside 2 ms + 5%% of their step + %.3f ms", late_bad, n,
               srv_p90);
        TCHECK(p50 < 1.0 + srv_p50, "median lateness %.3f ms (server's own %.3f ms)", p50, srv_p50);
    }
out:
    free(late);
}

static void run_case_once(const char *spec, const char *scenario, double a_ms, double b_ms, int think, int timing)
{
    eng_config ec;
    eng_engine *eng = NULL;
    scn_scenario *scn = NULL;
    scn_prompts *pr = NULL;
    ll_rec_writer *rec = NULL;
    lg_run *run = NULL;
    ll_rec_engine_law law = {0};
    char err[512] = "", dir[256], path[400];
    seen c;
    memset(&c, 0, sizeof c);
    eng_config_default(&ec);
    snprintf(dir, sizeof dir, "/tmp/lg_e2e_%d", (int)getpid());
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    int rc = eng_parse_spec(spec, &ec, err, sizeof err);
    if (rc == 0)
        rc = eng_start(&ec, &eng, err, sizeof err);
    if (rc == 0)
        rc = scn_load_string(scenario, "e2e", &scn, err, sizeof err);
    if (rc == 0)
        rc = scn_prompts_load(scn, &pr, err, sizeof err);
    if (rc == 0)
        rc = ll_mkdir_p(dir, err, sizeof err);
    if (rc == 0)
        rc = ll_rec_open(path, 0, &rec, err, sizeof err);
    size_t step0 = eng ? eng_step_count(eng) : 0;
    if (eng) {
        eng_law(eng, &law);
        if (rec)
            eng_set_records(eng, rec);
    }
    lg_config lc = {.scn = scn, .prompts = pr, .url = eng ? eng_url(eng) : "", .model = ec.model,
                    .records = rec, .engine_spec = spec, .engine_backend = eng ? eng_backend_name(eng) : NULL,
                    .engine_law = &law};
    if (rc == 0)
        rc = lg_run_create(&lc, &run, err, sizeof err);
    if (rc == 0)
        rc = lg_run_sweep(run, err, sizeof err);
    CHECK(rc == 0, "e2e run (%s): %s", spec, err);
    lg_run_free(run);
    if (eng)
        eng_set_records(eng, NULL);
    CHECK(ll_rec_close(rec) == 0, "records closed");
    if (rc)
        goto out;

    ll_rec_handlers h = {.on_run = on_run, .on_level = on_level, .on_request = on_request, .on_step = on_step,
                         .on_handoff = on_handoff};
    ll_rec_read_stats rs;
    CHECK(ll_rec_read(path, &h, &c, &rs, err, sizeof err) == 0 && rs.n_rejected == 0, "read records: %s", err);
    CHECK(strcmp(c.backend, "synthetic") == 0 && strcmp(c.engine, spec) == 0, "run line: backend %s engine %s",
          c.backend, c.engine);
    CHECK(c.law.present && fabs(c.law.a_ms - a_ms) < 1e-9 && fabs(c.law.b_ms - b_ms) < 1e-9 &&
              c.law.time_scale == ec.time_scale,
          "run line law %.4f + %.4f n at time scale %g", c.law.a_ms, c.law.b_ms, c.law.time_scale);
    CHECK(c.steps == (long)(eng_step_count(eng) - step0), "every engine step recorded: %ld of %zu", c.steps,
          eng_step_count(eng) - step0);
    long want_req = 0;
    for (size_t i = 0; i < scn->n_levels; i++)
        want_req += scn_level_requests(&scn->levels[i]);
    for (int i = 0; i < c.levels && i < MAX_LEVELS; i++) {
        CHECK(c.level_failed[i] == 0, "level %d: %d failed", i, c.level_failed[i]);
        CHECK(c.level_think[i] == (long)think * c.level_ok[i], "level %d think tokens %ld", i, c.level_think[i]);
        CHECK(c.level_usage[i] == c.level_tokens[i], "level %d usage %ld vs stream %ld", i, c.level_usage[i],
              c.level_tokens[i]);
    }
    CHECK(c.requests == want_req && c.ok == want_req, "records: %ld requests, %ld ok of %ld", c.requests, c.ok,
          want_req);
    CHECK(c.tokens == c.decoded + c.requests, "client tokens %ld == engine decoded %ld + first tokens %ld", c.tokens,
          c.decoded, c.requests);
    CHECK(c.think == (long)think * c.requests, "thinking tokens %ld", c.think);
    check_lateness(&c, spec, timing);
    if (timing)
        check_latencies(dir, a_ms, b_ms, think);
out:
    ll_vec_free(&c.arrivals);
    ll_vec_free(&c.step_ends);
    ll_vec_free(&c.srv_ms);
    if (eng)
        eng_stop(eng);
    scn_prompts_free(pr);
    scn_free(scn);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0)
        fprintf(stderr, "cleanup failed\n");
}

static void run_case(const char *spec, const char *scenario, double a_ms, double b_ms, int think, int timing)
{
    for (int attempt = 1; attempt <= 3; attempt++) {
        g_timing_last = attempt == 3 || !timing;
        g_timing_missed = 0;
        run_case_once(spec, scenario, a_ms, b_ms, think, timing);
        if (!g_timing_missed)
            return;
    }
}

int main(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    gsl_set_error_handler_off(); /* fit: GSL's default handler aborts */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    /* 52+30n at time scale 0.04: a = 2.08 ms, b = 1.2 ms per request. */
    run_case("backend=synthetic,law=52+30n,time_scale=0.04,think=8,handoff_sample=1",
             "{\"load\":{\"threads\":2,\"concurrency\":[1,4,16]},\"request\":{\"max_tokens\":24,\"think_tokens\":8}}",
             2.08, 1.2, 8, TIMING_CHECKS);
    /* completions: the engine sends thinking inline between <think> tags */
    run_case("backend=synthetic,law=52+30n,time_scale=0.04,think=8,handoff_sample=1",
             "{\"target\":{\"endpoint\":\"completions\"},\"load\":{\"threads\":1,\"concurrency\":[4]},"
             "\"request\":{\"max_tokens\":24,\"think_tokens\":8}}",
             2.08, 1.2, 8, TIMING_CHECKS);
    /* 1024 streams at once: a small law so the level takes well under a second. */
    run_case("backend=synthetic,law=2+0.01n,time_scale=1,think=4,max_running=1024",
             "{\"load\":{\"threads\":2},\"levels\":[{\"concurrency\":1024,\"requests\":1024}],"
             "\"request\":{\"max_tokens\":8,\"think_tokens\":4}}",
             2, 0.01, 4, 0);
    curl_global_cleanup();
    TEST_MAIN_END();
}
