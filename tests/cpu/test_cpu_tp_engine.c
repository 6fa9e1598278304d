/* test_cpu_tp_engine.c: the cpu backend with tp=2 inside the real engine,
 * over loopback HTTP: completions come back whole, /metrics has the
 * all-reduce per rank and loadlaw_comm_seconds_total, the step log carries
 * comm_ns, and the profiler trace has one process lane per rank ("TP-0",
 * "TP-1") with all_reduce kernel events that `loadlaw trace` (reports/)
 * files under "communication" on each device. No timed assertions. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "report.h"
#include "tclient.h"
#include "testutil.h"

static int completion(eng_engine *e, int max_tokens)
{
    int got = -1;
    return tc_completion(eng_url(e), max_tokens, &got) == 200 ? got : -1;
}

static void check_trace(eng_engine *e)
{
    char url[256], body[320], path[600];
    ll_buf b = {0};
    snprintf(url, sizeof url, "%s/start_profile", eng_url(e));
    /* a plain folder under the engine's profile_dir, which the engine makes */
    snprintf(body, sizeof body, "{\"output_dir\":\"loadlaw-tptrace-%d\"}", (int)getpid());
    CHECK(tc_http("POST", url, body, &b) == 200, "start_profile: %s", b.p ? b.p : "");
    ll_buf_free(&b);
    CHECK(completion(e, 6) == 6, "a request while profiling");
    snprintf(url, sizeof url, "%s/stop_profile", eng_url(e));
    CHECK(tc_http("POST", url, "", &b) == 200, "stop_profile: %s", b.p ? b.p : "");
    cJSON *ans = b.p ? cJSON_Parse(b.p) : NULL;
    snprintf(path, sizeof path, "%s", ll_json_str(ans, "path", ""));
    char *text = NULL;
    size_t len = 0;
    char err[256] = "";
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "trace %s: %s", path, err);
    cJSON *t = text ? cJSON_Parse(text) : NULL;
    int lane[2] = {0, 0}, ar[2] = {0, 0}, other_pid = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(t, "traceEvents")) {
        const char *ph = ll_json_str(ev, "ph", ""), *name = ll_json_str(ev, "name", "");
        int64_t pid = ll_json_i64(ev, "pid", -1);
        if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
            const char *pn = ll_json_str(cJSON_GetObjectItemCaseSensitive(ev, "args"), "name", "");
            lane[0] |= pid == 0 && strcmp(pn, "TP-0") == 0;
            lane[1] |= pid == 1 && strcmp(pn, "TP-1") == 0;
        } else if (strcmp(ll_json_str(ev, "cat", ""), "kernel") == 0) {
            if (pid == 0 || pid == 1)
                ar[pid] += strcmp(name, "all_reduce") == 0;
            else
                other_pid++;
        }
    }
    CHECK(lane[0] && lane[1], "process lanes TP-0 (pid 0) and TP-1 (pid 1)");
    CHECK(ar[0] >= 5 && ar[0] == ar[1], "all_reduce events: %d on rank 0, %d on rank 1", ar[0], ar[1]);
    CHECK(other_pid == 0, "%d kernel events on another pid", other_pid);
    cJSON_Delete(t);
    free(text);

    /* what `loadlaw trace` prints per device */
    rpt_trace *tr = NULL;
    rpt_categories *cats = NULL;
    CHECK(rpt_trace_load(path, &tr, err, sizeof err) == 0, "rpt_trace_load: %s", err);
    CHECK(rpt_categories_new(&cats, err, sizeof err) == 0, "categories: %s", err);
    if (tr && cats) {
        for (int r = 0; r < 2; r++) {
            int64_t all = 0;
            int64_t comm = rpt_trace_device_category_ns(tr, r ? "1" : "0", cats, "communication", &all);
            CHECK(comm > 0 && comm < all, "device %d: communication %lld ns of %lld", r,
                  (long long)comm, (long long)all);
        }
        CHECK(strcmp(rpt_categories_classify(cats, "all_reduce"), "communication") == 0 &&
              strcmp(rpt_categories_classify(cats, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                     "communication") == 0, "all_reduce and NCCL's kernel are communication");
    }
    rpt_trace_free(tr);
    rpt_categories_free(cats);
    char *slash = strrchr(path, '/');
    if (*path && unlink(path) == 0 && slash) {
        *slash = '\0';
        rmdir(path); /* the folder named above */
    }
    cJSON_Delete(ans);
    ll_buf_free(&b);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    eng_config cfg;
    eng_config_default(&cfg);
    char err[256] = "";
    int rc = eng_parse_spec("backend=cpu,attn=tiled,heads=8,topk=128,threads=2,tp=2,max_running=8,"
                            "d_model=256,d_ff=1152,vocab=64,capacity=512", &cfg, err, sizeof err);
    CHECK(rc == 0 && cfg.tp == 2, "spec: %s", err);
    char spec_err[256] = "";
    eng_config bad;
    eng_config_default(&bad);
    CHECK(eng_parse_spec("tp=0", &bad, spec_err, sizeof spec_err) != 0 && strstr(spec_err, "tp"),
          "tp=0 refused: %s", spec_err);
    CHECK(eng_parse_spec("backend=cpu,heads=8,tp=3", &bad, spec_err, sizeof spec_err) == 0,
          "tp=3 parses (the backend checks the sharding)");
    eng_engine *e = NULL;
    CHECK(eng_start(&bad, &e, spec_err, sizeof spec_err) != 0 && strstr(spec_err, "heads (8)"),
          "tp=3 with 8 heads refused at start: %s", spec_err);
    eng_config_free(&bad);
    e = NULL;
    rc = eng_start(&cfg, &e, err, sizeof err);
    CHECK(rc == 0, "start: %s", err);
    if (rc != 0) {
        eng_config_free(&cfg);
        curl_global_cleanup();
        TEST_MAIN_END();
    }
    CHECK(completion(e, 24) == 24, "a whole completion at tp=2");

    char url[256];
    snprintf(url, sizeof url, "%s/metrics", eng_url(e));
    ll_buf m = {0};
    CHECK(tc_http("GET", url, NULL, &m) == 200 && m.p, "GET /metrics");
    const char *series[] = {
        "loadlaw_phase_seconds_total{phase=\"all_reduce\"}",
        "loadlaw_phase_seconds_total{phase=\"all_reduce\",rank=\"1\"}",
        "loadlaw_phase_seconds_total{phase=\"attention\",rank=\"1\"}",
        "loadlaw_phase_seconds_total{phase=\"sampling\"}",
        "loadlaw_comm_seconds_total",
    };
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++)
        CHECK(m.p && tc_metric(m.p, series[i]) > 0, "/metrics: %s > 0", series[i]);
    CHECK(m.p && tc_metric(m.p, "loadlaw_phase_seconds_total{phase=\"sampling\",rank=\"1\"}") < 0,
          "sampling runs on rank 0 only");
    ll_buf_free(&m);

    static eng_step st[1024];
    size_t n = eng_steps(e, 0, st, 1024);
    int dec = 0, with_comm = 0, bad_comm = 0;
    for (size_t i = 0; i < n; i++) {
        if (st[i].n_decode > 0) {
            dec++;
            with_comm += st[i].comm_ns > 0;
        }
        bad_comm += st[i].comm_ns < 0 || st[i].comm_ns > st[i].dur_ns ||
                    (st[i].n_decode == 0 && st[i].comm_ns != 0);
    }
    CHECK(dec >= 23 && with_comm == dec, "comm_ns on every decode step (%d of %d)", with_comm, dec);
    CHECK(bad_comm == 0, "%d steps with comm_ns outside [0, dur] or on a step without decode", bad_comm);
    check_trace(e);
    eng_stop(e);
    eng_config_free(&cfg);
    curl_global_cleanup();
    TEST_MAIN_END();
}
