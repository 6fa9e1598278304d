/* test_srcaddr.c: the local addresses connections come from (load.source_addrs,
 * loadgen/srcaddr.h). The spec's parser and the auto count alone; then real
 * sweeps against the test SSE server, which counts each connection by the
 * peer address accept() gave it: a list spreads them over every address it
 * names and none other, "off" and auto at a small C leave them all on
 * 127.0.0.1, and auto at a large C spreads them over 127.0.0.1..K. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "loadgen.h"
#include "srcaddr.h"
#include "sse_server.h"
#include "testutil.h"

static void test_auto_count(void)
{
    /* the default range, 32768-60999: 28,232 ports, a quarter is 7,058 */
    CHECK(lg_src_auto_count(0, 32768, 60999) == 1, "no connections: one address");
    CHECK(lg_src_auto_count(1024, 32768, 60999) == 1, "C = 1024: one address");
    CHECK(lg_src_auto_count(7058, 32768, 60999) == 1, "a quarter of the range: still one");
    CHECK(lg_src_auto_count(7059, 32768, 60999) == 2, "past a quarter: two");
    CHECK(lg_src_auto_count(16384, 32768, 60999) == 3, "C = 16384: %d", lg_src_auto_count(16384, 32768, 60999));
    CHECK(lg_src_auto_count(19744, 32768, 60999) == 3, "C = 19744: %d", lg_src_auto_count(19744, 32768, 60999));
    CHECK(lg_src_auto_count(16384, 1024, 65535) == 2, "a wide range: %d", lg_src_auto_count(16384, 1024, 65535));
    CHECK(lg_src_auto_count(1000000, 60000, 60001) == 64, "capped at 64");
}

static void test_parse(void)
{
    lg_src s;
    char err[512];
    CHECK(lg_src_parse(NULL, &s, err, sizeof err) == 0 && s.mode == LG_SRC_AUTO && s.n_v4 == 0, "NULL is auto");
    lg_src_free(&s);
    CHECK(lg_src_parse("auto", &s, err, sizeof err) == 0 && s.mode == LG_SRC_AUTO, "auto");
    lg_src_free(&s);
    CHECK(lg_src_parse("off", &s, err, sizeof err) == 0 && s.mode == LG_SRC_OFF && s.n_v4 + s.n_v6 == 0, "off");
    lg_src_free(&s);
    int rc = lg_src_parse("127.0.0.1-127.0.0.4,10.0.0.5,::1", &s, err, sizeof err);
    CHECK(rc == 0 && s.mode == LG_SRC_LIST && s.n_v4 == 5 && s.n_v6 == 1, "list: rc %d, %zu IPv4 %zu IPv6", rc,
          s.n_v4, s.n_v6);
    lg_src_free(&s);
    /* a range across an octet boundary counts every address in it */
    rc = lg_src_parse("10.0.0.250-10.0.1.4", &s, err, sizeof err);
    CHECK(rc == 0 && s.n_v4 == 11, "10.0.0.250-10.0.1.4: rc %d, %zu addresses", rc, s.n_v4);
    lg_src_free(&s);
    const char *bad[] = {"", "x", "127.0.0.5-127.0.0.1", "127.0.0.1,", ",127.0.0.1", "127.0.0.1,,127.0.0.2",
                         "127.0.0.256", "127.0.0.1-::1", "::1-::2", NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        rc = lg_src_parse(bad[i], &s, err, sizeof err);
        CHECK(rc == LL_EINVAL && err[0], "'%s' refused: rc %d '%s'", bad[i], rc, err);
        lg_src_free(&s);
    }
    rc = lg_src_parse("10.0.0.0-10.0.4.0", &s, err, sizeof err);
    CHECK(rc == LL_ERANGE && strstr(err, "more than 1024"), "a range past LG_SRC_MAX: rc %d '%s'", rc, err);
    lg_src_free(&s);
    /* 192.0.2.0/24 is documentation only (RFC 5737): no host has it */
    CHECK(lg_source_addrs_check("127.0.0.1-127.0.0.3", err, sizeof err) == 0, "loopback bindable: %s", err);
    rc = lg_source_addrs_check("127.0.0.1,192.0.2.7", err, sizeof err);
    CHECK(rc == LL_EINVAL && strstr(err, "192.0.2.7"), "an address this host lacks: rc %d '%s'", rc, err);
    CHECK(lg_source_addrs_check(NULL, err, sizeof err) == 0 && lg_source_addrs_check("off", err, sizeof err) == 0,
          "auto and off need no check");
}

/* One sweep of `requests` streams at concurrency C on 2 threads, with
 * load.source_addrs `spec` (NULL: not given), against a fresh test server.
 * from[i]: connections it accepted from 127.0.0.i (from[0]: elsewhere).
 * Returns the requests that ended well, or -1 when the sweep could not run. */
static int sweep_from(const char *spec, int c, int requests, int from[256])
{
    /* barrier: no stream ends before all have connected, so none can take
     * over the connection of one that ended (a busy host starts them slowly) */
    ts_config tc = {.mode = TS_OK, .think_tok = 0, .answer_tok = 2, .gap_us = 1000, .tokens_per_chunk = 1,
                    .barrier = requests};
    ts_server *srv = NULL;
    scn_scenario *scn = NULL;
    scn_prompts *prompts = NULL;
    ll_rec_writer *rec = NULL;
    lg_run *run = NULL;
    char json[512], dir[256], path[400], err[512] = "";
    int rc, ok = -1;
    snprintf(dir, sizeof dir, "%s/lg_srcaddr_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    /* cache keep: the load's connections only, no GET /metrics to tell the
     * server's prefix-cache reset (loadgen/cache_reset.c) */
    snprintf(json, sizeof json,
             "{\"load\":{\"threads\":2,\"cache\":\"keep\"%s%s%s},\"levels\":[{\"concurrency\":%d,\"requests\":%d}]}",
             spec ? ",\"source_addrs\":\"" : "", spec ? spec : "", spec ? "\"" : "", c, requests);
    memset(from, 0, 256 * sizeof *from);
    if ((rc = ts_start(&tc, &srv)) != 0) {
        CHECK(0, "server start");
        return -1;
    }
    rc = scn_load_string(json, "srcaddr", &scn, err, sizeof err);
    if (rc == 0)
        rc = scn_prompts_load(scn, &prompts, err, sizeof err);
    if (rc == 0)
        rc = ll_mkdir_p(dir, err, sizeof err);
    if (rc == 0)
        rc = ll_rec_open(path, 0, &rec, err, sizeof err);
    lg_config cfg = {.scn = scn, .prompts = prompts, .url = ts_url(srv), .model = "test-model", .records = rec,
                     .scenario_name = "srcaddr"};
    if (rc == 0)
        rc = lg_run_create(&cfg, &run, err, sizeof err);
    if (rc == 0)
        rc = lg_run_sweep(run, err, sizeof err);
    CHECK(rc == 0, "sweep with source_addrs %s: %s", spec ? spec : "(not given)", err);
    if (rc == 0) {
        size_t n_ok = 0, n_failed = 0;
        lg_run_counts(run, &n_ok, &n_failed);
        ok = (int)n_ok;
    }
    lg_run_free(run);
    if (rec)
        ll_rec_close(rec);
    scn_prompts_free(prompts);
    scn_free(scn);
    for (int i = 0; i < 256; i++) /* every stream has ended: its connection was accepted */
        from[i] = ts_conns_from(srv, i);
    ts_stop(srv);
    snprintf(json, sizeof json, "rm -rf '%s'", dir);
    if (system(json) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return ok;
}

/* Connections from 127.0.0.lo .. 127.0.0.hi: each address at least once, and
 * the total; none from any other address. */
static void check_spread(const char *what, const int from[256], int lo, int hi, int want_total)
{
    int total = 0, outside = 0;
    for (int i = 0; i < 256; i++) {
        if (i >= lo && i <= hi) {
            CHECK(from[i] >= 1, "%s: no connection from 127.0.0.%d", what, i);
            total += from[i];
        } else {
            outside += from[i];
        }
    }
    CHECK(outside == 0, "%s: %d connections from outside 127.0.0.%d-%d", what, outside, lo, hi);
    CHECK(total == want_total, "%s: %d connections, want %d", what, total, want_total);
}

static void test_spread(void)
{
    int from[256];
    /* a list: 8 streams at once on 2 threads, 8 connections over 4 addresses
     * that are not the kernel's own choice (127.0.0.1) */
    int ok = sweep_from("127.0.0.2-127.0.0.5", 8, 8, from);
    CHECK(ok == 8, "list: %d of 8 ok", ok);
    check_spread("127.0.0.2-127.0.0.5", from, 2, 5, 8);
    ok = sweep_from("127.0.0.7,127.0.0.9", 4, 4, from);
    CHECK(ok == 4 && from[7] == 2 && from[9] == 2, "a list of two: %d ok, %d from .7, %d from .9", ok, from[7],
          from[9]);
    /* off, and auto below the threshold: what the kernel picks, 127.0.0.1 */
    ok = sweep_from("off", 8, 8, from);
    CHECK(ok == 8, "off: %d of 8 ok", ok);
    check_spread("off", from, 1, 1, 8);
    ok = sweep_from(NULL, 8, 8, from);
    CHECK(ok == 8, "auto at C = 8: %d of 8 ok", ok);
    check_spread("auto at C = 8", from, 1, 1, 8);
    /* auto at a level of C = 40,000 (only 8 requests: 8 connections): the
     * count comes from C and this host's port range */
    long lo, hi;
    lg_src_port_range(&lo, &hi);
    int k = lg_src_auto_count(40000, lo, hi);
    ok = sweep_from("auto", 40000, 8, from);
    CHECK(ok == 8, "auto at C = 40000: %d of 8 ok", ok);
    CHECK(k > 1, "C = 40000 over ports %ld-%ld: %d addresses", lo, hi, k);
    if (k > 1 && k <= 8) {
        check_spread("auto at C = 40000", from, 1, k, 8);
    } else if (k > 8) { /* a narrow range: more addresses than connections */
        int used = 0, outside = from[0];
        for (int i = 1; i < 256; i++)
            used += i <= k && from[i] > 0, outside += i > k ? from[i] : 0;
        CHECK(used == 8 && outside == 0, "auto at C = 40000: %d addresses used, %d outside", used, outside);
    }
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    test_auto_count();
    test_parse();
    test_spread();
    curl_global_cleanup();
    TEST_MAIN_END();
}
