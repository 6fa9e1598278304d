/* test_fit_server_n.c: the law against the server's N (fit/analyze_law.c "The law
 * against the server's N"; fit --n server) on simulated runs (sim.h) with
 * the running gauge scraped as `sweep` scrapes it: every 0.5 s from 1 ms
 * after the run's start, whatever the levels do, each scrape the number of
 * requests the server holds at that instant (sent at least 2 ms before, the
 * HTTP hop and admission, and not yet ended). Levels last about as long as
 * a scrape interval, as short sweeps do:
 *  - C = 1..16 at 1.04 + 0.6*N ms (52+30n at time scale 0.02), jitter: the
 *    server's law finds b = 0.6 within its interval. Taking the last scrape
 *    before each step gave C = 1's first 0.5 s N = 0 (the scrape before the
 *    first admission) and b = 0.53, its interval short of 0.6.
 *  - one level, C = 4: no law against the server's N either ("one
 *    concurrency swept"), in the law, law_other and the JSON; it printed
 *    b = 0 from the N = 0 scrape before.
 *  - levels shorter than a scrape interval: no two agreeing scrapes around a
 *    step, the law refuses and says so.
 * Deterministic: no real time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

#define SCRAPE_NS 500000000LL
#define ADMIT_NS 2000000LL

/* Append the scrapes of the running gauge over the run in path. */
static int add_scrapes(const char *path)
{
    fit_run *run = NULL;
    char err[256];
    if (fit_load_run(path, &run, err, sizeof err))
        return -1;
    int64_t t0 = INT64_MAX, t1 = 0;
    for (size_t i = 0; i < fit_run_n_requests(run); i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        t0 = q->send_ns < t0 ? q->send_ns : t0;
        t1 = q->end_ns > t1 ? q->end_ns : t1;
    }
    FILE *f = fopen(path, "a");
    for (int64_t t = t0 + 1000000; f && t <= t1 + SCRAPE_NS; t += SCRAPE_NS) {
        int held = 0;
        for (size_t i = 0; i < fit_run_n_requests(run); i++) {
            const ll_rec_request *q = fit_run_request(run, i);
            held += q->send_ns + ADMIT_NS <= t && t < q->end_ns;
        }
        fprintf(f, "{\"type\":\"metric\",\"t_ns\":%lld,\"src\":\"http://127.0.0.1:8000/metrics\","
                   "\"name\":\"loadlaw_running_requests\",\"labels\":\"\",\"value\":%d}\n",
                (long long)t, held);
    }
    fit_run_free(run);
    return f && fclose(f) == 0 ? 0 : -1;
}

static int fit_with_scrapes(const char *path, const sim_cfg *c, int n_server, fit_run **run, fit_result **r)
{
    sim_stats st;
    char err[512] = "";
    fit_options o;
    fit_options_default(&o);
    o.n_server = n_server;
    if (sim_write(path, c, &st) || add_scrapes(path) || sim_load_fit(path, &o, run, r, err, sizeof err)) {
        fprintf(stderr, "simulate and fit: %s\n", err);
        return -1;
    }
    return 0;
}

static int has_note(const fit_result *r, const char *s)
{
    for (size_t i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], s))
            return 1;
    return 0;
}

static void test_sweep(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(&c, cs, 5, 1);
    for (int l = 0; l < 5; l++)
        c.n_requests[l] = 24;
    c.a_ms = 1.04;
    c.b_ms = 0.6;
    c.max_tokens = 32;
    c.jitter_frac = 0.1;
    c.seed = 5;
    for (int srv = 0; srv < 2; srv++) {
        fit_run *run = NULL;
        fit_result *r = NULL;
        if (fit_with_scrapes(path, &c, srv, &run, &r)) {
            CHECK(0, "sweep: simulate and fit");
            return;
        }
        const fit_law *law = srv ? &r->law : &r->law_other, *cli = srv ? &r->law_other : &r->law;
        CHECK(r->law_server_scrapes >= 6, "scrapes in the levels: %zu", r->law_server_scrapes);
        CHECK(law->ok && cli->ok, "both laws");
        CHECK(law->b_ci_ms[0] <= c.b_ms && c.b_ms <= law->b_ci_ms[1], "b 95%% [%.4g, %.4g] covers %.3g (b %.4g)",
              law->b_ci_ms[0], law->b_ci_ms[1], c.b_ms, law->b_ms);
        CHECK_NEAR(law->b_ms, c.b_ms, 0.05, "b against the server's N");
        CHECK_NEAR(law->a_ms, c.a_ms, 0.15, "a against the server's N");
        CHECK(law->n_samples < cli->n_samples, "steps without agreeing scrapes left out (%zu of %zu)",
              law->n_samples, cli->n_samples);
        CHECK(has_note(r, "not between two consecutive scrapes"), "a note counts the steps left out");
        fit_result_free(r);
        fit_run_free(run);
    }
}

/* No law from a run that ran one concurrency (client's or server's N). */
static void check_refused(const fit_result *r, const fit_law *law, const char *why, const char *what)
{
    CHECK(!law->ok, "%s: the law against the server's N refuses (b %.4g over %zu distinct N)", what, law->b_ms,
          law->n_distinct);
    cJSON *j = rpt_fit_to_json(r);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    CHECK(back != NULL, "%s: JSON", what);
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(back, "law_other");
    const cJSON *no_law = cJSON_GetObjectItemCaseSensitive(back, "no_law");
    if (fit_law_n_is_server(r))
        CHECK(cJSON_IsString(no_law) && strstr(no_law->valuestring, why), "%s: JSON no_law says \"%s\"", what,
              why);
    else
        CHECK(cJSON_IsNull(other), "%s: JSON law_other null", what);
    cJSON_Delete(back);
    free(text);
    cJSON_Delete(j);
}

static void test_refusals(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int one[] = {4};
    sim_set_levels(&c, one, 1, 16); /* 64 requests: ~1.8 s, four scrapes */
    c.a_ms = 1.04;
    c.b_ms = 0.6;
    c.max_tokens = 32;
    for (int srv = 0; srv < 2; srv++) {
        fit_run *run = NULL;
        fit_result *r = NULL;
        if (fit_with_scrapes(path, &c, srv, &run, &r)) {
            CHECK(0, "one level: simulate and fit");
            return;
        }
        check_refused(r, srv ? &r->law : &r->law_other, "one concurrency swept", "one level");
        if (srv)
            CHECK(strstr(r->no_law, "one concurrency swept (C=4)"), "why: %s", r->no_law);
        fit_result_free(r);
        fit_run_free(run);
    }
    /* levels of ~0.15 s: at most one scrape inside each */
    int cs[] = {1, 2, 4};
    sim_set_levels(&c, cs, 3, 2);
    fit_run *run = NULL;
    fit_result *r = NULL;
    if (fit_with_scrapes(path, &c, 1, &run, &r)) {
        CHECK(0, "short levels: simulate and fit");
        return;
    }
    check_refused(r, &r->law, "no steady step between two consecutive scrapes", "short levels");
    CHECK(r->law_other.ok, "the client's law stands beside it");
    fit_result_free(r);
    fit_run_free(run);
    /* the same run, the client's law the answer: a note says why the server's is missing */
    fit_options o;
    fit_options_default(&o);
    char err[256];
    run = NULL;
    r = NULL;
    CHECK(sim_load_fit(path, &o, &run, &r, err, sizeof err) == 0, "short levels, client: %s", err);
    if (r) {
        CHECK(!r->law_other.ok && has_note(r, "no law against the server's N: no steady step"),
              "note on the missing server law");
        fit_result_free(r);
        fit_run_free(run);
    }
}

int main(void)
{
    gsl_set_error_handler_off();
    char path[64];
    snprintf(path, sizeof path, "server_n_%ld.jsonl", (long)getpid());
    test_sweep(path);
    test_refusals(path);
    unlink(path);
    TEST_MAIN_END();
}
