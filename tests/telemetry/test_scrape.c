/* test_scrape.c: the /metrics scraper (telemetry/scrape.c) against a real
 * server on loopback: the bundled engine started in this process.
 *  - tel_scrape_default_url derives ROOT/metrics from an API URL (a last
 *    "/v1" and trailing '/'s dropped, the query kept).
 *  - Scraping the engine's /metrics for a few intervals writes `metric`
 *    records of its known families (loadlaw_running_requests, ...), each
 *    with the endpoint as src, and no record of an unknown family.
 *  - A second target that answers 404 (the engine's /nope) costs only its
 *    own samples: the sweep's records still get the first one's, and the
 *    scraper starts and stops without an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "records.h"
#include "telemetry.h"
#include "testutil.h"

static void test_default_url(void)
{
    char out[256];
    CHECK(tel_scrape_default_url("http://h:1/v1", out, sizeof out) == 0 &&
              strcmp(out, "http://h:1/metrics") == 0, "API root: %s", out);
    CHECK(tel_scrape_default_url("http://h/d/v1?v=1", out, sizeof out) == 0 &&
              strcmp(out, "http://h/d/metrics?v=1") == 0, "query kept: %s", out);
    CHECK(tel_scrape_default_url("http://h:1/", out, sizeof out) == 0 && strcmp(out, "http://h:1/metrics") == 0,
          "trailing slash: %s", out);
    CHECK(tel_scrape_default_url("http://h:1/v1", out, 8) == LL_ERANGE, "too long for the buffer");
    CHECK(tel_scrape_known("loadlaw_running_requests", NULL) && !tel_scrape_known("process_cpu_seconds_total", NULL),
          "known families");
}

static void test_scrape_engine(void)
{
    char err[512] = "", path[] = "/tmp/ll_test_scrape_XXXXXX", rec[600], own[300], bad[300];
    eng_config ec;
    eng_engine *e = NULL;
    ll_rec_writer *w = NULL;
    tel_scrape *sc = NULL;
    CHECK(mkdtemp(path) != NULL, "mkdtemp");
    snprintf(rec, sizeof rec, "%s/records.jsonl", path);
    eng_config_default(&ec);
    int rc = eng_start(&ec, &e, err, sizeof err);
    eng_config_free(&ec);
    CHECK(rc == 0, "engine: %s", err);
    if (rc)
        return;
    CHECK(tel_scrape_default_url(eng_url(e), own, sizeof own) == 0, "default url");
    snprintf(bad, sizeof bad, "%s/nope", eng_url(e));
    CHECK(ll_rec_open(rec, 0, &w, err, sizeof err) == 0, "records: %s", err);
    tel_scrape_target t[2] = {{.url = own}, {.url = bad}};
    rc = tel_scrape_start(t, 2, NULL, 0.05, w, &sc, err, sizeof err);
    CHECK(rc == 0 && sc, "start: %s", err);
    struct timespec ts = {0, 400 * 1000 * 1000};
    nanosleep(&ts, NULL);
    tel_scrape_stop(sc);
    CHECK(ll_rec_close(w) == 0, "close");
    eng_stop(e);

    FILE *f = fopen(rec, "r");
    CHECK(f != NULL, "open %s", rec);
    char line[4096];
    int n_metric = 0, n_running = 0, n_other_src = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"type\":\"metric\""))
            continue;
        n_metric++;
        if (strstr(line, "\"loadlaw_running_requests\""))
            n_running++;
        if (!strstr(line, own))
            n_other_src++;
        CHECK(!strstr(line, "process_") && !strstr(line, "python_"), "unknown family kept: %s", line);
    }
    if (f)
        fclose(f);
    CHECK(n_metric > 0, "metric records: %d", n_metric);
    CHECK(n_running >= 2, "loadlaw_running_requests samples over the scrapes: %d", n_running);
    CHECK(n_other_src == 0, "records from the 404 target: %d", n_other_src);
    unlink(rec);
    rmdir(path);
}

int main(void)
{
    test_default_url();
    test_scrape_engine();
    TEST_MAIN_END();
}
