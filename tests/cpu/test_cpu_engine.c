/* test_cpu_engine.c: the cpu backend inside the real engine, over real
 * loopback HTTP (libcurl): completions come back with the requested token
 * counts, /metrics shows the backend's four phases, and the step log shows
 * decode steps with the batch sizes the requests made. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

/* The /start_profile trace shows the backend's phases as separate kernel
 * events (what `loadlaw trace` breaks down), each inside its step. */
static void check_trace(eng_engine *e)
{
    char why[512] = "";
    cJSON *t = tc_profile_trace(eng_url(e), 6, why, sizeof why);
    CHECK(t != NULL, "profile capture: %s", why);
    int steps = 0, dense = 0, attn = 0, sampling = 0, inside = 1;
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
            dense += strcmp(name, "dense_gemm") == 0;
            attn += strcmp(name, "attention") == 0;
            sampling += strcmp(name, "sampling") == 0;
            /* kernels follow their step's annotation; 1 us of rounding slack */
            inside &= steps > 0 && ts >= s0 - 1 && ts + dur <= s1 + 1;
        }
    }
    /* 6 tokens: one from the prefill step, 5 decode steps with all three phases */
    CHECK(steps >= 6 && dense >= 5 && dense == attn && attn == sampling,
          "trace: %d steps, %d dense_gemm, %d attention, %d sampling kernel events", steps, dense, attn,
          sampling);
    CHECK(inside, "each kernel event lies inside its step");
    cJSON_Delete(t);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    /* steps of ~0.5 ms and 100+ tokens per request: the four requests overlap
     * for tens of steps even when their threads start late on a loaded box */
    eng_config cfg;
    eng_config_default(&cfg);
    char err[256] = "";
    int rc = eng_parse_spec("backend=cpu,attn=tiled,heads=8,topk=256,threads=2,max_running=8,"
                            "d_model=512,d_ff=2048,vocab=64,capacity=512", &cfg, err, sizeof err);
    CHECK(rc == 0, "spec: %s", err);
    CHECK(cfg.d_model == 512 && cfg.d_ff == 2048 && cfg.vocab == 64 && cfg.capacity_tok == 512 &&
          cfg.min_ctx_tok == -1, "cpu sizes from the spec");
    eng_engine *e = NULL;
    rc = eng_start(&cfg, &e, err, sizeof err);
    CHECK(rc == 0, "start: %s", err);
    if (rc != 0) {
        eng_config_free(&cfg);
        curl_global_cleanup();
        TEST_MAIN_END();
    }

    /* a computing backend has no law to report, and is named */
    ll_rec_engine_law law;
    CHECK(strcmp(eng_backend_name(e), "cpu") == 0, "backend name %s", eng_backend_name(e));
    CHECK(eng_law(e, &law) == 0 && law.present == 0, "the cpu backend plays no law");

    /* four requests at once, so steps batch several sequences */
    enum { NREQ = 4 };
    long status[NREQ];
    int toks[NREQ];
    CHECK(tc_completions_parallel(eng_url(e), NREQ, 100, status, toks) == 0, "threads started");
    for (int i = 0; i < NREQ; i++) {
        CHECK(status[i] == 200, "request %d status %ld", i, status[i]);
        CHECK(toks[i] == 100 + i, "request %d: %d tokens, want %d", i, toks[i], 100 + i);
    }

    char url[256];
    snprintf(url, sizeof url, "%s/metrics", eng_url(e));
    ll_buf m = {0};
    CHECK(tc_http("GET", url, NULL, &m) == 200, "GET /metrics");
    const char *phases[] = {"prefill", "dense_gemm", "attention", "sampling"};
    for (int i = 0; i < 4; i++) {
        char want[96];
        snprintf(want, sizeof want, "loadlaw_phase_seconds_total{phase=\"%s\"}", phases[i]);
        CHECK(m.p && strstr(m.p, want), "/metrics has %s", want);
    }
    ll_buf_free(&m);

    /* the step log: every decode step ran real work, some with N >= 2. Each
     * request's first token comes from its prefill step, the rest from decode
     * steps. A step is logged before its tokens go out, so once every client
     * has its whole response the log holds all of them: read it once. */
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
        if (st[i].n_decode >= 2)
            batched++;
    }
    CHECK(bad_dur == 0, "%d decode steps without a duration", bad_dur);
    CHECK(tokens == want_tokens, "decode tokens in the step log %d, want %d", tokens, want_tokens);
    CHECK(batched > 0, "some steps batched several sequences (%d of %d)", batched, decode_steps);
    check_trace(e);
    eng_stop(e);

    /* a bad cpu size is a clear error naming its key: at parse time from a
     * spec, at start from a config filled in by hand */
    eng_config bad;
    CHECK(eng_config_copy(&bad, &cfg) == 0, "copy the config");
    rc = eng_parse_spec("capacity=0", &bad, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "capacity") && bad.capacity_tok == 512, "capacity=0 refused: %s", err);
    bad.capacity_tok = 0;
    rc = eng_start(&bad, &e, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "capacity"), "capacity 0 refused at start: %s", err);
    if (rc == 0)
        eng_stop(e);
    eng_config_free(&bad);
    eng_config_free(&cfg);
    curl_global_cleanup();
    TEST_MAIN_END();
}
