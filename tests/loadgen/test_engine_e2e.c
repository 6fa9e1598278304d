/* test_engine_e2e.c: loadgen against the bundled engine, started in this
 * process, over loopback HTTP — the engine's step log is the ground truth.
 *
 * Checked:
 *  - counts equal the engine's exactly: tokens the client counted from the
 *    streams == sum of n_decode over the steps + one first token per request
 *    (engine.h: a sequence's first token is emitted by its prefill step and
 *    not counted in n_decode), and thinking/answer splits equal think=N;
 *  - every token chunk arrives after the end of some step and at most
 *    2 ms + 5% of that step's duration later (tolerance stated here), for
 *    >= 90% of chunks, and the median lateness is under 1 ms. On an idle
 *    machine 0-1% fall outside; the slack is for a CI box shared by several
 *    builds, where a descheduled process delays whole bursts of chunks;
 *  - measured ITL p50 at each level equals the law's step time a + b*C
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

#include "common.h"
#include "engine.h"
#include "loadgen.h"
#include "testutil.h"

/* Sanitizers slow the engine and the client several-fold: their run checks
 * memory and exact counts; timing bounds hold only for an optimised build. */
#if defined(__SANITIZE_ADDRESS__)
#define TIMING_CHECKS 0
#else
#define TIMING_CHECKS 1
#endif

typedef struct chunks {
    int64_t *t;   /* absolute arrival, ns */
    size_t n, cap;
    long tokens, think, answer, requests, ok;
    int64_t epoch;
} chunks;

static int on_line(const cJSON *o, size_t line_no, void *ctx)
{
    chunks *c = ctx;
    if (strcmp(ll_json_str(o, "type", ""), "request"))
        return 0;
    c->requests++;
    c->ok += strcmp(ll_json_str(o, "status", ""), "ok") == 0;
    c->think += ll_json_i64(o, "think_tok", 0);
    c->answer += ll_json_i64(o, "answer_tok", 0);
    const cJSON *ch = cJSON_GetObjectItem(o, "chunks");
    for (const cJSON *x = ch ? ch->child : NULL; x; x = x->next) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 4096;
            int64_t *nt = realloc(c->t, c->cap * sizeof *nt);
            if (!nt)
                return LL_ENOMEM;
            c->t = nt;
        }
        c->t[c->n++] = c->epoch + (int64_t)cJSON_GetArrayItem(x, 0)->valuedouble;
        c->tokens += (long)cJSON_GetArrayItem(x, 1)->valuedouble;
    }
    return 0;
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

static void run_case_once(const char *spec, const char *scenario, double a_ms, double b_ms, int think, int timing)
{
    eng_config ec;
    eng_engine *eng = NULL;
    scn_scenario *scn = NULL;
    scn_prompts *pr = NULL;
    lg_run *run = NULL;
    char err[512] = "", dir[256];
    eng_config_default(&ec);
    snprintf(dir, sizeof dir, "/tmp/lg_e2e_%d", (int)getpid());
    int rc = eng_parse_spec(spec, &ec, err, sizeof err);
    if (rc == 0)
        rc = eng_start(&ec, &eng, err, sizeof err);
    if (rc == 0)
        rc = scn_load_string(scenario, "e2e", &scn, err, sizeof err);
    if (rc == 0)
        rc = scn_prompts_load(scn, &pr, err, sizeof err);
    size_t step0 = eng ? eng_step_count(eng) : 0;
    lg_config lc = {.scn = scn, .prompts = pr, .url = eng ? eng_url(eng) : "", .model = ec.model, .run_dir = dir};
    if (rc == 0)
        rc = lg_run_create(&lc, &run, err, sizeof err);
    if (rc == 0)
        rc = lg_run_sweep(run, err, sizeof err);
    CHECK(rc == 0, "e2e run (%s): %s", spec, err);
    if (rc) {
        if (run)
            lg_run_free(run);
        goto out;
    }
    size_t nl;
    const lg_level_summary *L = lg_run_levels(run, &nl);
    int64_t epoch = lg_run_epoch_ns(run);
    int64_t want_req = 0;
    for (size_t i = 0; i < nl; i++) {
        want_req += L[i].n_requests;
        CHECK(L[i].ok == L[i].n_requests && L[i].failed == 0, "level C=%d ok %d of %d", L[i].concurrency, L[i].ok,
              L[i].n_requests);
        CHECK(L[i].think_tok == (int64_t)think * L[i].ok, "level C=%d think tokens %lld", L[i].concurrency,
              (long long)L[i].think_tok);
        CHECK(L[i].usage_completion_tok == L[i].think_tok + L[i].answer_tok, "level C=%d usage %lld vs stream %lld",
              L[i].concurrency, (long long)L[i].usage_completion_tok, (long long)(L[i].think_tok + L[i].answer_tok));
        if (timing) {
            double law = a_ms + b_ms * L[i].concurrency;
            TCHECK(fabs(L[i].itl_ms.p50 / law - 1) < 0.10, "level C=%d ITL p50 %.3f ms vs law %.3f ms",
                  L[i].concurrency, L[i].itl_ms.p50, law);
            TCHECK(L[i].ttft_ms.p50 >= a_ms * 0.9, "level C=%d TTFT p50 %.3f ms under one step (a = %.3f ms)",
                   L[i].concurrency, L[i].ttft_ms.p50, a_ms);
            TCHECK(L[i].ttfa_ms.p50 - L[i].ttft_ms.p50 >= (think - 1) * law * 0.9, "level C=%d TTFA-TTFT %.2f ms",
                  L[i].concurrency, L[i].ttfa_ms.p50 - L[i].ttft_ms.p50);
        }
    }
    lg_run_free(run);

    /* step log vs chunk arrivals */
    size_t ns = eng_step_count(eng) - step0;
    eng_step *st = calloc(ns + 1, sizeof *st);
    chunks c = {.epoch = epoch};
    char path[300];
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    CHECK(st && ll_jsonl_foreach(path, on_line, &c, NULL, err, sizeof err) == 0, "read records: %s", err);
    if (st) {
        size_t got = 0, k;
        while (got < ns && (k = eng_steps(eng, step0 + got, st + got, ns - got)) > 0)
            got += k;
        long decoded = 0;
        for (size_t i = 0; i < got; i++)
            decoded += st[i].n_decode;
        CHECK(c.requests == want_req && c.ok == want_req, "records: %ld requests", c.requests);
        CHECK(c.tokens == decoded + c.requests, "client tokens %ld == engine decoded %ld + first tokens %ld",
              c.tokens, decoded, c.requests);
        CHECK(c.think == (long)think * c.requests, "thinking tokens %ld", c.think);
        /* lateness of each chunk after the latest step end before it */
        int64_t *ends = malloc((got + 1) * sizeof *ends);
        size_t late_bad = 0;
        double *late = malloc((c.n + 1) * sizeof *late);
        if (ends && late) {
            for (size_t i = 0; i < got; i++)
                ends[i] = st[i].start_ns + st[i].dur_ns;
            qsort(ends, got, sizeof *ends, cmp_i64);
            qsort(c.t, c.n, sizeof *c.t, cmp_i64);
            size_t j = 0;
            for (size_t i = 0; i < c.n; i++) {
                while (j + 1 < got && ends[j + 1] <= c.t[i])
                    j++;
                int64_t d = c.t[i] - ends[j];
                int64_t dur = j > 0 ? ends[j] - ends[j - 1] : 0;
                late[i] = (double)d / 1e6;
                if (d < 0 || (double)d > 2e6 + 0.05 * (double)dur)
                    late_bad++;
            }
            ll_sort_doubles(late, c.n);
            double p50 = ll_quantile_sorted(late, c.n, 0.5), p99 = ll_quantile_sorted(late, c.n, 0.99);
            printf("  %s: %zu chunks, arrival after step end p50 %.3f ms p99 %.3f ms, outside 2ms+5%%: %zu\n", spec,
                   c.n, p50, p99, late_bad);
            if (timing) {
                TCHECK(late_bad <= c.n / 10, "%zu of %zu chunks outside 2 ms + 5%% of their step", late_bad, c.n);
                TCHECK(p50 < 1.0, "median lateness %.3f ms", p50);
            }
        }
        free(ends);
        free(late);
    }
    free(st);
    free(c.t);
out:
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
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    /* 52+30n at time scale 0.04: a = 2.08 ms, b = 1.2 ms per request. */
    run_case("backend=synthetic,law=52+30n,time_scale=0.04,think=8",
             "{\"load\":{\"threads\":2,\"concurrency\":[1,4,16]},\"request\":{\"max_tokens\":24,\"think_tokens\":8}}",
             2.08, 1.2, 8, TIMING_CHECKS);
    /* completions: the engine sends thinking inline between <think> tags */
    run_case("backend=synthetic,law=52+30n,time_scale=0.04,think=8",
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
