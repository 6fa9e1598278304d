/* path_engine.c: the engine path (conformance.h): the backend inside the
 * real engine, over real loopback HTTP (libcurl), from its row of
 * tb_engine_cases: the spec parses (and sets the sizes it names), the
 * engine starts and names its backend (a law only where it plays one); four
 * completions at once come back with the requested token counts; /metrics
 * has each of the backend's phases; the step log holds every decode token,
 * every decode step timed, some batching several sequences; the
 * /start_profile trace has the decode steps' kernel events, as many of each,
 * inside their steps (a law's: ending inside) on the device's stream lane; a bad capacity is refused
 * at parse and at start, naming its key; and a step that fails on purpose
 * (fault_fail_step) stops the engine with eng_failed and /health's 503
 * saying why. */
#define TESTUTIL_SHARED
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "conformance.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

#define NREQ 4

static void check_sizes(const tb_backend *be, const tb_engine_case *ec, const eng_config *cfg)
{
    if (!ec->sizes_set[0])
        return;
    tb_cfg w;
    tb_config(&w, "", ec->sizes_set);
    CHECK(cfg->d_model == w.c.d_model && cfg->d_ff == w.c.d_ff && cfg->vocab == w.c.vocab &&
              cfg->capacity_tok == w.c.capacity_tok && cfg->min_ctx_tok == -1 && cfg->device == w.c.device &&
              (!w.c.kv || (cfg->kv && strcmp(cfg->kv, w.c.kv) == 0)),
          "%s: sizes from the spec (%s)", be->name, ec->sizes_set);
}

/* The step log: every decode step ran real work, some with N >= 2. Each
 * request's first token comes from its prefill step, the rest from decode
 * steps. A step is logged before its tokens go out, so once every client has
 * its whole response the log holds all of them: read it once. */
static void check_steps(const tb_backend *be, eng_engine *e)
{
    int want_tokens = 0;
    for (int i = 0; i < NREQ; i++)
        want_tokens += 100 + i - 1;
    static eng_step st[4096]; /* the 4 requests make at most ~420 steps */
    int decode_steps = 0, batched = 0, tokens = 0, bad_dur = 0;
    size_t n_steps = eng_steps(e, 0, st, 4096);
    for (size_t i = 0; i < n_steps; i++) {
        if (st[i].n_decode > 0) {
            decode_steps++;
            tokens += st[i].n_decode;
            bad_dur += st[i].dur_ns <= 0;
        }
        batched += st[i].n_decode >= 2;
    }
    CHECK(bad_dur == 0, "%s: %d decode steps without a duration", be->name, bad_dur);
    CHECK(tokens == want_tokens, "%s: decode tokens in the step log %d, want %d", be->name, tokens, want_tokens);
    CHECK(batched > 0, "%s: some steps batched several sequences (%d of %d)", be->name, batched, decode_steps);
}

/* The /start_profile trace shows the backend's phases as separate kernel
 * events (what `loadlaw trace` breaks down), each inside its step, on the
 * device's stream lane (pid 0, tid 7). 6 tokens: one from the prefill step,
 * 5 decode steps with every one of the step's kernels. */
static void check_trace(const tb_backend *be, const tb_engine_case *ec, eng_engine *e)
{
    char why[512] = "";
    cJSON *t = tc_profile_trace(eng_url(e), 6, why, sizeof why);
    CHECK(t != NULL, "%s: profile capture: %s", be->name, why);
    int steps = 0, count[3] = {0}, inside = 1, on_stream = 1, nk = 0;
    while (nk < 3 && ec->step_kernels[nk])
        nk++;
    double s0 = 0, s1 = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(t, "traceEvents")) {
        const char *cat = ll_json_str(ev, "cat", ""), *name = ll_json_str(ev, "name", "");
        double ts = ll_json_num(ev, "ts", -1), dur = ll_json_num(ev, "dur", -1);
        if (strcmp(cat, "user_annotation") == 0) {
            steps++;
            s0 = ts;
            s1 = ts + dur;
        } else if (strcmp(cat, "kernel") == 0) {
            for (int k = 0; k < nk; k++)
                count[k] += strcmp(name, ec->step_kernels[k]) == 0;
            on_stream &= ll_json_num(ev, "pid", -1) == 0 && ll_json_num(ev, "tid", -1) == 7;
            /* kernels follow their step's annotation; 1 us of rounding slack.
             * A law's phases start at the step's planned start, which the
             * scheduler's own work may put before its measured one. */
            inside &= steps > 0 && (ec->planned_phases || ts >= s0 - 1) && ts + dur <= s1 + 1;
        }
    }
    int same = 1;
    for (int k = 1; k < nk; k++)
        same &= count[k] == count[0];
    CHECK(steps >= 6 && count[0] >= 5 && same, "%s: trace: %d steps, %d %s events and as many of each decode kernel",
          be->name, steps, count[0], ec->step_kernels[0]);
    CHECK(inside, "%s: each kernel event lies inside its step", be->name);
    CHECK(on_stream, "%s: kernel events on the device's stream lane (pid 0, tid 7)", be->name);
    cJSON_Delete(t);
}

static void check_serving(const tb_backend *be, const tb_engine_case *ec, eng_engine *e)
{
    ll_rec_engine_law law;
    CHECK(strcmp(eng_backend_name(e), be->name) == 0, "backend name %s", eng_backend_name(e));
    CHECK(eng_law(e, &law) == ec->plays_law && law.present == ec->plays_law, "%s: a law reported: %d", be->name,
          law.present);
    long status[NREQ];
    int toks[NREQ];
    CHECK(tc_completions_parallel(eng_url(e), NREQ, 100, status, toks) == 0, "threads started");
    for (int i = 0; i < NREQ; i++) {
        CHECK(status[i] == 200, "%s: request %d status %ld", be->name, i, status[i]);
        CHECK(toks[i] == 100 + i, "%s: request %d: %d tokens, want %d", be->name, i, toks[i], 100 + i);
    }
    char url[256];
    snprintf(url, sizeof url, "%s/metrics", eng_url(e));
    ll_buf m = {0};
    CHECK(tc_http("GET", url, NULL, &m) == 200, "GET /metrics");
    for (int i = 0; i < 9 && ec->phases[i]; i++) {
        char want[128];
        snprintf(want, sizeof want, "loadlaw_phase_seconds_total{phase=\"%s\"}", ec->phases[i]);
        CHECK(m.p && strstr(m.p, want), "%s: /metrics has %s", be->name, want);
    }
    ll_buf_free(&m);
    check_steps(be, e);
    snprintf(url, sizeof url, "%s/health", eng_url(e));
    CHECK(tc_http("GET", url, NULL, &m) == 200, "%s: GET /health: 200 while the backend is healthy", be->name);
    ll_buf_free(&m);
    check_trace(be, ec, e);
}

/* A bad size is a clear error naming its key: at parse time from a spec, at
 * start from a config filled in by hand. */
static void check_capacity(const tb_backend *be, const eng_config *cfg)
{
    eng_config bad;
    eng_engine *e = NULL;
    char err[256] = "";
    CHECK(eng_config_copy(&bad, cfg) == 0, "copy the config");
    int rc = eng_parse_spec("capacity=0", &bad, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "capacity") && bad.capacity_tok == cfg->capacity_tok, "%s: capacity=0 refused: %s",
          be->name, err);
    bad.capacity_tok = 0;
    rc = eng_start(&bad, &e, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "capacity"), "%s: capacity 0 refused at start: %s", be->name, err);
    if (rc == 0)
        eng_stop(e);
    eng_config_free(&bad);
}

/* A step that fails (fault_fail_step) stops the engine: eng_failed and
 * /health's 503 carry the backend's reason, not just "I/O error". */
static void check_failure(const tb_backend *be, const tb_engine_case *ec)
{
    eng_config cfg;
    eng_config_default(&cfg);
    char err[512] = "", why[512] = "", url[256], want[64];
    int rc = eng_parse_spec(ec->fail_spec, &cfg, err, sizeof err);
    CHECK(rc == 0, "%s: fault spec: %s", be->name, err);
    eng_engine *e = NULL;
    if (rc == 0)
        rc = eng_start(&cfg, &e, err, sizeof err);
    CHECK(rc == 0, "%s: start with fault_fail_step: %s", be->name, err);
    if (rc != 0) {
        eng_config_free(&cfg);
        return;
    }
    int got = -1;
    long st = tc_completion(eng_url(e), 10, &got);
    CHECK(st != 200 || got != 10, "%s: the request was cut by the failure (%ld, %d)", be->name, st, got);
    for (int i = 0; i < 1000 && eng_failed(e, why, sizeof why) == 0; i++)
        usleep(10000);
    snprintf(want, sizeof want, "backend %s step failed", be->name);
    CHECK(strstr(why, want) && strstr(why, ec->fail_says), "%s: eng_failed names the error: %s", be->name, why);
    snprintf(url, sizeof url, "%s/health", eng_url(e));
    ll_buf h = {0};
    CHECK(tc_http("GET", url, NULL, &h) == 503 && h.p && strstr(h.p, ec->fail_says), "%s: /health 503 with the reason: %s",
          be->name, h.p ? h.p : "");
    ll_buf_free(&h);
    eng_stop(e);
    eng_config_free(&cfg);
}

void tb_path_engine(const tb_backend *be)
{
    const tb_engine_case *ec = &tb_engine_cases[be->id];
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        CHECK(0, "curl_global_init failed");
        return;
    }
    eng_config cfg;
    eng_config_default(&cfg);
    char err[256] = "";
    int rc = eng_parse_spec(ec->spec, &cfg, err, sizeof err);
    CHECK(rc == 0, "%s: spec: %s", be->name, err);
    check_sizes(be, ec, &cfg);
    eng_engine *e = NULL;
    if (rc == 0)
        rc = eng_start(&cfg, &e, err, sizeof err);
    CHECK(rc == 0, "%s: start: %s", be->name, err);
    if (rc == 0) {
        check_serving(be, ec, e);
        eng_stop(e);
        if (ec->checks_capacity)
            check_capacity(be, &cfg);
    }
    eng_config_free(&cfg);
    if (ec->fail_spec)
        check_failure(be, ec);
    curl_global_cleanup();
}
