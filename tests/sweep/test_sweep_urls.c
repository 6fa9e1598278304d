/* test_sweep_urls.c: `loadlaw sweep` and the URLs it is given (fork/exec of
 * the real binary against the test's SSE server on loopback, which logs the
 * target of every request it receives). A base URL's query stays on every
 * request and derived URL: the chat path, /metrics and /start_profile go
 * before it (an Azure-style ".../deployments/d?api-version=..."). A URL's
 * user:password and secret query values (?sig=, ?code=) and secret-named
 * headers (X-Credential, X-Passwd, X-Signature, X-Session-Id) are sent but
 * hidden on stderr, stdout and in the run directory. A URL without a scheme
 * (libcurl would guess http) is refused wherever a URL is accepted (--url,
 * --metrics-url, target.url, an ab side's url): one line, exit 2, no request
 * sent, and its password hidden in that line too. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "sse_server.h"
#include "testutil.h"
#include "tsupport.h"

static char g_tmp[256];

/* "METHOD target" lines of the server's log that start with prefix, and
 * whether each of them ends with suffix (*all_end). */
static int count_targets(const char *log, const char *prefix, const char *suffix, int *all_end)
{
    int n = 0;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    *all_end = 1;
    for (const char *l = log; *l;) {
        size_t ll = strcspn(l, "\n");
        if (ll >= pl && strncmp(l, prefix, pl) == 0) {
            n++;
            *all_end &= ll >= sl && strncmp(l + ll - sl, suffix, sl) == 0;
        }
        l += ll + (l[ll] == '\n');
    }
    return n;
}

#define QUERY "?api-version=2024-02-01&sig=SIG-SECRET&code=CODE-SECRET"

/* An Azure-style base URL with a user:password and a query, secret-named
 * headers, a profiled level and a fast scrape: every request the server saw
 * has the path before the query and the whole query; nothing secret is
 * written anywhere, the rest is. */
static void test_query_and_secrets(void)
{
    ts_server *ts = NULL;
    /* barrier 2: both streams decode together, so "steady" is reached and
     * the profile is asked for (pace_wait_s 0: no probe request, which the
     * barrier would hold alone) */
    ts_config tc = {.mode = TS_OK, .answer_tok = 8, .gap_us = 20000, .barrier = 2};
    if (ts_start(&tc, &ts)) {
        CHECK(0, "test server starts");
        return;
    }
    char url[256], dir[300], errf[300], outf[300], scn[300], log[16384], want[400], port[16];
    snprintf(port, sizeof port, "%s", strrchr(ts_url(ts), ':') + 1); /* used after ts_stop */
    snprintf(url, sizeof url, "http://user:PW-SECRET@127.0.0.1:%s/openai/deployments/d" QUERY, port);
    snprintf(dir, sizeof dir, "%s/azure", g_tmp);
    snprintf(errf, sizeof errf, "%s/azure.err", g_tmp);
    snprintf(outf, sizeof outf, "%s/azure.out", g_tmp);
    snprintf(scn, sizeof scn, "%s/azure.json", g_tmp);
    tu_write_file(scn, "{\"request\":{\"max_tokens\":8,\"timeout_s\":20},"
                    "\"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"fixed\",\"value\":10},\"count\":4,"
                    "\"seed\":1},\"levels\":[{\"concurrency\":2,\"requests\":2,"
                    "\"profile\":{\"when\":\"steady\",\"num_steps\":2,\"style\":\"vllm\",\"pace_wait_s\":0}}]}\n");
    char *args[] = {"loadlaw", "sweep", scn, "--url", url, "--model", "m", "--metrics-interval", "0.25",
                    "--header", "X-Credential: CRED-SECRET", "--header", "X-Passwd: PASSWD-SECRET",
                    "--header", "X-Signature: SIGNATURE-SECRET", "--header", "X-Session-Id: SESSION-SECRET",
                    "--header", "X-Tenant: blue-tenant", "-o", dir, NULL};
    int rc = tu_run(LOADLAW_BIN, args, outf, errf, 60);
    ts_targets(ts, log, sizeof log);
    ts_stop(ts);
    CHECK(rc == 0, "sweep against the Azure-style URL: exit 0, got %d", rc);

    int all_end = 0;
    int n = count_targets(log, "POST /openai/deployments/d/v1/chat/completions" QUERY, "", &all_end);
    CHECK(n == 2, "2 chat requests to the path before the query, got %d:\n%s", n, log);
    n = count_targets(log, "GET /openai/deployments/d/metrics" QUERY, "", &all_end);
    CHECK(n >= 1, "/metrics scraped before the query, got %d:\n%s", n, log);
    n = count_targets(log, "POST /openai/deployments/d/start_profile" QUERY, "", &all_end);
    CHECK(n == 1, "/start_profile once, before the query, got %d:\n%s", n, log);
    /* vLLM's form has no step count: its profiler writes the trace on stop */
    n = count_targets(log, "POST /openai/deployments/d/stop_profile" QUERY, "", &all_end);
    CHECK(n == 1, "/stop_profile once (the vllm form), before the query, got %d:\n%s", n, log);
    n = count_targets(log, "", QUERY, &all_end);
    CHECK(n >= 4 && all_end, "every request (%d) ends with the whole query:\n%s", n, log);

    /* the start line on stderr, and everything the run wrote */
    char *err_text = tu_slurp(errf);
    snprintf(want, sizeof want, "-> http://(hidden)@127.0.0.1:%s/openai/deployments/d"
                                "?api-version=2024-02-01&sig=(hidden)&code=(hidden) (1 levels)", port);
    CHECK(err_text && strstr(err_text, want),
          "the start line shows the URL with its secrets hidden (want '%s'):\n%s", want, err_text ? err_text : "");
    free(err_text);
    CHECK(tu_dir_has(dir, "\"type\":\"request\"") == 1 && tu_file_has(outf, "run: "), "the run wrote its records");
    static const char *const secrets[] = {"PW-SECRET", "SIG-SECRET", "CODE-SECRET", "CRED-SECRET",
                                          "PASSWD-SECRET", "SIGNATURE-SECRET", "SESSION-SECRET"};
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++)
        CHECK(tu_dir_has(dir, secrets[i]) == 0 && !tu_file_has(errf, secrets[i]) && !tu_file_has(outf, secrets[i]),
              "%s appears nowhere (records, summary, report, stdout, stderr)", secrets[i]);
    static const char *const kept[] = {"X-Credential: (hidden)", "X-Passwd: (hidden)", "X-Signature: (hidden)",
                                       "X-Session-Id: (hidden)", "X-Tenant: blue-tenant",
                                       "d?api-version=2024-02-01&sig=(hidden)&code=(hidden)"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        CHECK(tu_dir_has(dir, kept[i]) == 1, "the records hold '%s'", kept[i]);
}

/* The first "key":N after needle in text, or -1. */
static int64_t num_after(const char *text, const char *needle, const char *key)
{
    const char *at = text ? strstr(text, needle) : NULL, *k = at ? strstr(at, key) : NULL;
    return k ? strtoll(k + strlen(key), NULL, 10) : -1;
}

/* vLLM's profile hook: the start asks max_iterations, and the stop, which
 * vLLM answers once its trace is written (3 s here), is waited for after the
 * profiled level's end is stamped and before the next level starts: neither
 * level's figures hold the wait (they held it, and the next level met a
 * server still writing). */
static void test_vllm_profile_wait(void)
{
    ts_server *ts = NULL;
    ts_config tc = {.mode = TS_OK, .answer_tok = 8, .gap_us = 20000, .barrier = 2, .stop_profile_ms = 3000};
    if (ts_start(&tc, &ts)) {
        CHECK(0, "test server starts");
        return;
    }
    char dir[300], errf[300], scn[300], rec[320];
    snprintf(dir, sizeof dir, "%s/vprof", g_tmp);
    snprintf(errf, sizeof errf, "%s/vprof.err", g_tmp);
    snprintf(scn, sizeof scn, "%s/vprof.json", g_tmp);
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    tu_write_file(scn, "{\"request\":{\"max_tokens\":8,\"timeout_s\":20},"
                    "\"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"fixed\",\"value\":10},\"count\":4,"
                    "\"seed\":1},\"levels\":[{\"concurrency\":2,\"requests\":2,"
                    "\"profile\":{\"when\":\"steady\",\"num_steps\":5,\"style\":\"vllm\"}},"
                    "{\"concurrency\":2,\"requests\":2}]}\n");
    char *args[] = {"loadlaw", "sweep", scn, "--url", (char *)ts_url(ts), "--model", "m", "--no-metrics",
                    "--no-report", "-o", dir, NULL};
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 60);
    CHECK(rc == 0, "sweep with a vllm-style profile: exit 0, got %d", rc);
    CHECK(strstr(ts_profile_body(ts), "\"max_iterations\":5") != NULL, "the start asks max_iterations: %s",
          ts_profile_body(ts));
    ts_stop(ts);
    char *text = tu_slurp(rec), *err = tu_slurp(errf);
    int64_t start0 = num_after(text, "\"type\":\"level\",\"level\":0", "\"start_ns\":");
    int64_t end0 = num_after(text, "\"type\":\"level_end\",\"level\":0", "\"end_ns\":");
    int64_t start1 = num_after(text, "\"type\":\"level\",\"level\":1", "\"start_ns\":");
    CHECK(start0 >= 0 && end0 > start0 && end0 - start0 < 2900000000LL,
          "the profiled level ends before the stop's answer (%.3f s, the stop takes 3 s)", (end0 - start0) / 1e9);
    CHECK(start1 >= end0 + 2900000000LL, "the next level starts after the trace is written (%.3f s after)",
          (start1 - end0) / 1e9);
    CHECK(err && strstr(err, "level 0: /stop_profile answered in") &&
              strstr(err, "level 0: the server is back at its pace"),
          "stderr says the wait: %s", err ? err : "");
    free(text);
    free(err);
}

/* One refused URL: exit 2, one line holding each of needles, no password
 * in it, and no request at the server. */
static void refused(const char *what, char *const args[], const ts_server *ts, const char *n1, const char *n2)
{
    char errf[300];
    snprintf(errf, sizeof errf, "%s/refused.err", g_tmp);
    int before = ts_requests(ts);
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 20);
    char *text = tu_slurp(errf);
    const char *t = text ? text : "";
    CHECK(rc == 2 && tu_count(t, "\n") == 1 && strstr(t, n1) && (!n2 || strstr(t, n2)),
          "%s: exit 2 (got %d), one line naming '%s' and '%s':\n%s", what, rc, n1, n2 ? n2 : "", t);
    CHECK(!strstr(t, "PW-SECRET"), "%s: the password is not shown:\n%s", what, t);
    CHECK(ts_requests(ts) == before, "%s: no request sent", what);
    free(text);
}

/* Wherever a URL is accepted, one without "http://" or "https://" is
 * refused; a scheme in capitals is still a scheme. */
static void test_no_scheme(void)
{
    ts_server *ts = NULL;
    ts_config tc = {.mode = TS_OK, .answer_tok = 2, .gap_us = 1000};
    if (ts_start(&tc, &ts)) {
        CHECK(0, "test server starts");
        return;
    }
    char bare[128], good[128], scn[300], ab[300], dir[300], errf[300], text[600];
    const char *port = strrchr(ts_url(ts), ':') + 1;
    snprintf(bare, sizeof bare, "user:PW-SECRET@127.0.0.1:%s", port);
    snprintf(good, sizeof good, "http://127.0.0.1:%s", port);
    snprintf(dir, sizeof dir, "%s/bare", g_tmp);

    char *a1[] = {"loadlaw", "sweep", "--url", bare, "--model", "m", "-c", "1", "-n", "2", "-o", dir, NULL};
    refused("--url without a scheme", a1, ts, "loadlaw sweep: --url '(hidden)@127.0.0.1:", "' has no scheme; write "
            "http://... or https://...");
    char *a2[] = {"loadlaw", "sweep", "--url", good, "--url", bare, "--model", "m", "-o", dir, NULL};
    refused("a second --url without a scheme", a2, ts, "--url '(hidden)@127.0.0.1:", "has no scheme");
    char *a3[] = {"loadlaw", "sweep", "--url", good, "--model", "m", "--metrics-url", bare, "-o", dir, NULL};
    refused("--metrics-url without a scheme", a3, ts, "--metrics-url '(hidden)@127.0.0.1:", "has no scheme");
    char *a4[] = {"loadlaw", "sweep", "--url", "ftp://u:PW-SECRET@127.0.0.1:21", "--model", "m", "-o", dir, NULL};
    refused("--url ftp://", a4, ts, "--url 'ftp://(hidden)@127.0.0.1:21' is not an http(s) URL", NULL);

    snprintf(scn, sizeof scn, "%s/bare.json", g_tmp);
    snprintf(text, sizeof text, "{\"target\":{\"url\":\"%s\",\"model\":\"m\"},\"levels\":[{\"concurrency\":1,"
                                "\"requests\":2}]}\n", bare);
    tu_write_file(scn, text);
    char *a5[] = {"loadlaw", "sweep", scn, "-o", dir, NULL};
    refused("target.url without a scheme", a5, ts, "bare.json: target.url: '(hidden)@127.0.0.1:", "has no scheme");
    snprintf(ab, sizeof ab, "%s/bare-ab.json", g_tmp);
    snprintf(text, sizeof text, "{\"levels\":[{\"concurrency\":1,\"requests\":2}],\"ab\":{"
                                "\"a\":{\"name\":\"a\",\"url\":\"%s\",\"model\":\"m\"},"
                                "\"b\":{\"name\":\"b\",\"url\":\"%s\",\"model\":\"m\"}}}\n", good, bare);
    tu_write_file(ab, text);
    char *a6[] = {"loadlaw", "sweep", ab, "-o", dir, NULL};
    refused("an ab side's url without a scheme", a6, ts, "bare-ab.json: ab.b.url: '(hidden)@127.0.0.1:",
            "has no scheme");

    /* HTTP:// is http:// (a scenario file used to refuse it) */
    snprintf(scn, sizeof scn, "%s/upper.json", g_tmp);
    snprintf(text, sizeof text, "{\"target\":{\"url\":\"HTTP://127.0.0.1:%s\",\"model\":\"m\"},"
                                "\"request\":{\"max_tokens\":2},\"levels\":[{\"concurrency\":1,\"requests\":2}]}\n",
             port);
    tu_write_file(scn, text);
    snprintf(dir, sizeof dir, "%s/upper", g_tmp);
    snprintf(errf, sizeof errf, "%s/upper.err", g_tmp);
    char *a7[] = {"loadlaw", "sweep", scn, "-o", dir, "--no-report", "-q", NULL};
    int before = ts_requests(ts), rc = tu_run(LOADLAW_BIN, a7, NULL, errf, 30);
    CHECK(rc == 0 && ts_requests(ts) == before + 2, "target.url HTTP://: exit 0 (got %d), 2 requests (got %d)", rc,
          ts_requests(ts) - before);
    ts_stop(ts);
}

int main(void)
{
    if (tu_tmpdir("lg_urls", g_tmp, sizeof g_tmp))
        return 1;
    test_query_and_secrets();
    test_vllm_profile_wait();
    test_no_scheme();
    if (tu_fail == 0) /* a failed run's files stay, to be read */
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
