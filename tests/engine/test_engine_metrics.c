/* test_engine_metrics.c: /metrics as a scraper and a linter see it, and the
 * bounded step log behind it.
 *  - The default exposition is lint-clean by our own rules (names match
 *    [a-zA-Z_][a-zA-Z0-9_]*, each family has HELP and TYPE before its
 *    samples, counters end in _total, no colons) and, when promtool is
 *    installed, by `promtool check metrics`; vLLM's colon names appear only
 *    with metrics_vllm_names=1 (and promtool then complains, which shows the
 *    check can fail). Without promtool that part reports why and the test
 *    exits 77 (skipped) after its other checks pass.
 *  - step_log_max=8: the log keeps the newest 8 steps in order, reads below
 *    eng_step_first copy nothing, and loadlaw_step_log_dropped_total counts
 *    the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

static char *fetch_metrics(eng_engine *e)
{
    char u[256];
    tc_resp r;
    snprintf(u, sizeof u, "%s/metrics", eng_url(e));
    tc_request("GET", u, NULL, 0, &r);
    CHECK(r.status == 200, "GET /metrics: %ld", r.status);
    return r.body.p; /* ours now */
}

static void traffic(eng_engine *e, int n)
{
    char u[256];
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    for (int i = 0; i < n; i++) {
        tc_resp r;
        tc_request("POST", u, "{\"prompt\":\"a b c\",\"max_tokens\":4,\"ignore_eos\":true}", -1, &r);
        CHECK(r.status == 200, "request %d: %ld", i, r.status);
        tc_resp_free(&r);
    }
}

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

/* Our lint: returns the number of problems (each CHECKed with its line). */
static int lint(const char *text)
{
    char family[128] = "", type[32] = "";
    int help_seen = 0, bad = 0, families = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), p);
        p = nl ? nl + 1 : NULL;
        if (!*line)
            continue;
        char name[128];
        if (sscanf(line, "# HELP %127s", name) == 1) {
            snprintf(family, sizeof family, "%s", name);
            help_seen = 1;
            type[0] = '\0';
            families++;
            if (!name_ok(name, strlen(name)) || strlen(line) <= 8 + strlen(name) + 1) {
                CHECK(0, "family name and help text: %s", line);
                bad++;
            }
            continue;
        }
        if (sscanf(line, "# TYPE %127s %31s", name, type) == 2) {
            int known = !strcmp(type, "counter") || !strcmp(type, "gauge") || !strcmp(type, "histogram");
            if (!help_seen || strcmp(name, family) != 0 || !known) {
                CHECK(0, "TYPE follows its family's HELP: %s", line);
                bad++;
            }
            size_t fl = strlen(family);
            if (!strcmp(type, "counter") && (fl < 6 || strcmp(family + fl - 6, "_total") != 0)) {
                CHECK(0, "a counter ends in _total: %s", family);
                bad++;
            }
            continue;
        }
        /* a sample: NAME[{labels}] VALUE, of the current family */
        size_t n = strcspn(line, "{ ");
        size_t fl = strlen(family);
        int of_family = *type && n >= fl && strncmp(line, family, fl) == 0 &&
                        (n == fl || (!strcmp(type, "histogram") &&
                                     (!strcmp(line + fl, "_sum") || !strncmp(line + fl, "_bucket", 7) ||
                                      !strncmp(line + fl, "_count", 6) || !strncmp(line + fl, "_sum ", 5))));
        char *end = NULL;
        const char *val = strrchr(line, ' ');
        if (val)
            strtod(val + 1, &end);
        if (!name_ok(line, n) || !of_family || !val || !end || *end) {
            CHECK(0, "sample with a valid name, of its family, with a value: %s", line);
            bad++;
        }
    }
    CHECK(families >= 9, "%d metric families", families);
    return bad;
}

/* 0: promtool passed; 1: it complained; -1: not installed (why in *why). */
static int promtool(const char *text, char *out, size_t outlen, const char **why)
{
    const char *paths[] = {"/usr/bin/promtool", "/usr/local/bin/promtool"};
    const char *tool = NULL;
    for (size_t i = 0; i < 2 && !tool; i++)
        if (access(paths[i], X_OK) == 0)
            tool = paths[i];
    if (!tool && system("command -v promtool >/dev/null 2>&1") == 0)
        tool = "promtool";
    if (!tool) {
        *why = "promtool not found (install the prometheus package)";
        return -1;
    }
    char in[] = "/tmp/loadlaw-engmet-XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0) {
        *why = "mkstemp failed";
        return -1;
    }
    size_t len = strlen(text);
    int wrote = write(fd, text, len) == (ssize_t)len;
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s check metrics < %s 2>&1", tool, in);
    FILE *f = wrote ? popen(cmd, "r") : NULL;
    size_t n = f ? fread(out, 1, outlen - 1, f) : 0;
    out[n] = '\0';
    int st = f ? pclose(f) : -1;
    unlink(in);
    if (!f) {
        *why = "could not run promtool";
        return -1;
    }
    return st == 0 ? 0 : 1;
}

static int test_exposition(void)
{
    eng_engine *e = tc_start("law=0.5");
    traffic(e, 3);
    char *text = fetch_metrics(e);
    CHECK(text && !strchr(text, ':'), "no colon anywhere in the default exposition");
    CHECK(text && lint(text) == 0, "default exposition passes our lint");
    CHECK(text && tc_metric(text, "loadlaw_steps_total") > 0 &&
          tc_metric(text, "loadlaw_step_log_dropped_total") == 0, "steps counted, none dropped");
    char out[4096];
    const char *why = "";
    int pt = text ? promtool(text, out, sizeof out, &why) : -1;
    if (pt >= 0)
        CHECK(pt == 0, "promtool check metrics passes the default /metrics: %s", out);
    free(text);
    eng_stop(e);

    e = tc_start("law=0.5,metrics_vllm_names=1");
    text = fetch_metrics(e);
    CHECK(text && tc_metric(text, "vllm:num_requests_running") == 0 &&
          tc_metric(text, "vllm:num_requests_waiting") == 0, "vLLM's names behind the switch");
    if (pt >= 0) {
        int pv = text ? promtool(text, out, sizeof out, &why) : -1;
        CHECK(pv == 1 && strstr(out, "vllm:"), "promtool refuses the colon names (the check can fail): %s",
              out);
    }
    free(text);
    eng_stop(e);
    if (pt < 0)
        fprintf(stderr, "SKIPPED: promtool part: %s\n", why);
    return pt < 0;
}

static void test_ring(void)
{
    enum { KEEP = 8 };
    eng_engine *e = tc_start("law=0.2,step_log_max=8");
    traffic(e, 6); /* 4 tokens each, one step per token at least: > 20 steps */
    size_t count = eng_step_count(e), first = eng_step_first(e);
    CHECK(count >= 20 && first == count - KEEP, "count %zu, first %zu: the newest %d kept", count, first,
          KEEP);
    eng_step got[3 * KEEP];
    CHECK(eng_steps(e, first - 1, got, 3 * KEEP) == 0, "a read below the first index copies nothing");
    CHECK(eng_steps(e, 0, got, 3 * KEEP) == 0, "index 0 is gone");
    size_t n = eng_steps(e, first, got, 3 * KEEP);
    int ordered = 1;
    for (size_t i = 1; i < n; i++)
        ordered &= got[i].start_ns >= got[i - 1].start_ns + got[i - 1].dur_ns;
    CHECK(n == KEEP && ordered, "the %zu kept steps read in order across the ring's wrap", n);
    eng_step tail[3];
    size_t nt = eng_steps(e, count - 3, tail, 3);
    CHECK(nt == 3 && memcmp(tail, got + KEEP - 3, sizeof tail) == 0, "an index read mid-ring: same steps");
    CHECK(eng_steps(e, count, tail, 3) == 0, "nothing past the end");
    char *text = fetch_metrics(e);
    CHECK(text && tc_metric(text, "loadlaw_step_log_dropped_total") == (double)first &&
          tc_metric(text, "loadlaw_steps_total") == (double)count, "dropped %g of %g steps in /metrics",
          text ? tc_metric(text, "loadlaw_step_log_dropped_total") : -1.0,
          text ? tc_metric(text, "loadlaw_steps_total") : -1.0);
    free(text);
    eng_stop(e);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    test_ring();
    int skipped = test_exposition();
    curl_global_cleanup();
    if (skipped && tu_fail == 0) {
        printf("%d passed, 0 failed (promtool part skipped)\n", tu_pass);
        return TEST_SKIP;
    }
    TEST_MAIN_END();
}
