/* test_sweep_auth.c: the keys a sweep's requests carry, end to end through
 * the real binary against the bundled engine started with an api_key.
 *
 * (a) The scraper sends the requests' credentials to their origin and
 *     nowhere else: given only --header 'Authorization: Bearer K', the
 *     engine's /metrics (which needs K) is scraped, at its default URL and
 *     at a --metrics-url of the same scheme, host and port; a --metrics-url
 *     on another port (a server here that logs what it gets) is scraped
 *     with neither the Authorization nor the X-Api-Key header.
 * (b) `--engine ...,api_key=K` alone: the requests (and the scraper) use K,
 *     so the sweep succeeds instead of getting 401 on every request, and K
 *     is written nowhere (records, summary, report, stdout, stderr); with
 *     $OPENAI_API_KEY set to something else, K still wins.
 * (c) --api-key L with an engine whose api_key is K: one line naming the
 *     fix, exit 2, before anything is sent; neither key shown. The same key
 *     twice is fine.
 *
 * argv: none (LOADLAW_BIN). Real time: about 8 s. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define ENGINE_KEY "sk-eng-KEY-only-here"
#define HDR_SECRET "hk-HDR-secret-value"

static char g_tmp[256];

/* ---- a /metrics server on another port that logs what it is sent ---------- */

typedef struct logsrv {
    int requests, with_secret;
} logsrv;

static int logsrv_answer(int fd, const char *head, void *ctx)
{
    static const char body[] = "# TYPE loadlaw_running_requests gauge\nloadlaw_running_requests 1\n";
    logsrv *m = ctx;
    m->requests++;
    if (strcasestr(head, "\nauthorization:") || strcasestr(head, "\nx-api-key:") || strstr(head, HDR_SECRET) ||
        strstr(head, ENGINE_KEY))
        m->with_secret++;
    tu_httpd_reply(fd, "200 OK", "text/plain", body, sizeof body - 1);
    return 0;
}

/* A loopback port nobody listens on now (the engine takes it a moment later). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* ---- helpers ------------------------------------------------------------------ */

typedef struct tally {
    int requests, ok;
} tally;

static int on_line(const cJSON *o, size_t n, void *ctx)
{
    tally *t = ctx;
    (void)n;
    if (!strcmp(ll_json_str(o, "type", ""), "request")) {
        t->requests++;
        t->ok += !strcmp(ll_json_str(o, "status", ""), "ok");
    }
    return 0;
}

static tally read_tally(const char *dir)
{
    tally t = {0};
    char path[400], err[256];
    size_t skipped = 0;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    if (ll_jsonl_foreach(path, on_line, &t, &skipped, err, sizeof err))
        t.requests = -1;
    return t;
}

/* ---- (a) the scraper and the requests' origin ----------------------------- */

static void test_scrape_headers(void)
{
    logsrv m = {0};
    tu_httpd *srv = NULL;
    char dir[300], errf[300], outf[300], rec[400], spec[300], other[96], same[96], src[256];
    int port = free_port();
    if (port < 0 || tu_httpd_start(logsrv_answer, &m, &srv)) {
        CHECK(0, "free port and logging server");
        return;
    }
    snprintf(dir, sizeof dir, "%s/hdr", g_tmp);
    snprintf(errf, sizeof errf, "%s/hdr.err", g_tmp);
    snprintf(outf, sizeof outf, "%s/hdr.out", g_tmp);
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    snprintf(spec, sizeof spec, "backend=synthetic,law=52+30n,time_scale=0.2,port=%d,api_key=%s", port, ENGINE_KEY);
    snprintf(other, sizeof other, "http://127.0.0.1:%d/metrics", tu_httpd_port(srv));
    /* the engine's own origin, spelled apart from the default URL so that
     * its records can be told apart */
    snprintf(same, sizeof same, "http://127.0.0.1:%d/metrics?same=1", port);
    char *args[] = {"loadlaw", "sweep", "-c", "1,2", "-n", "6", "--max-tokens", "16", "--think-tokens", "0",
                    "--engine", spec, "--header", "Authorization: Bearer " ENGINE_KEY, "--header",
                    "X-Api-Key: " HDR_SECRET, "--header", "X-Tenant: blue", "--metrics-interval", "0.1",
                    "--metrics-url", other, "--metrics-url", same, "--gpu", "off", "-o", dir, NULL};
    /* the environment's key stays out where the user gave an Authorization:
     * sent first, it would get every request 401 */
    setenv("OPENAI_API_KEY", "sk-env-OTHER-key", 1);
    int rc = tu_run(LOADLAW_BIN, args, outf, errf, 0);
    unsetenv("OPENAI_API_KEY");
    tu_httpd_stop(srv);
    tally t = read_tally(dir);
    CHECK(rc == 0 && t.requests == 12 && t.ok == 12, "the requests carry the header: exit %d, %d of %d ok (see %s)",
          rc, t.ok, t.requests, errf);
    CHECK(tu_count_in(errf, "HTTP 401") == 0, "no scrape answered 401 (see %s)", errf);
    snprintf(src, sizeof src, "\"src\":\"http://127.0.0.1:%d/metrics\",\"name\":\"loadlaw_running_requests\"", port);
    CHECK(tu_count_in(rec, src) >= 2,
          "the engine's /metrics at its default URL scraped with the header: %zu samples", tu_count_in(rec, src));
    snprintf(src, sizeof src, "\"src\":\"%s\",\"name\":\"loadlaw_running_requests\"", same);
    CHECK(tu_count_in(rec, src) >= 2, "a --metrics-url on the requests' origin gets them too: %zu samples",
          tu_count_in(rec, src));
    CHECK(m.requests >= 2, "the other origin was scraped (%d times)", m.requests);
    CHECK(m.with_secret == 0, "the other origin got a secret header %d times of %d", m.with_secret, m.requests);
    CHECK(tu_dir_has(dir, ENGINE_KEY) == 0 && tu_dir_has(dir, HDR_SECRET) == 0 &&
              !tu_count_in(errf, ENGINE_KEY) && !tu_count_in(errf, HDR_SECRET) && !tu_count_in(outf, ENGINE_KEY) &&
              !tu_count_in(outf, HDR_SECRET),
          "the header values are written nowhere");
}

/* ---- (b), (c) the bundled engine's own key -------------------------------- */

static void test_engine_key(void)
{
    char dir[300], errf[300], outf[300], rec[400];
    const char *spec = "backend=synthetic,law=52+30n,time_scale=0.2,api_key=" ENGINE_KEY;
    snprintf(errf, sizeof errf, "%s/key.err", g_tmp);
    snprintf(outf, sizeof outf, "%s/key.out", g_tmp);

    /* (b) the spec's key alone; a different $OPENAI_API_KEY does not win */
    setenv("OPENAI_API_KEY", "sk-env-OTHER-key", 1);
    snprintf(dir, sizeof dir, "%s/key", g_tmp);
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    char *a1[] = {"loadlaw", "sweep", "-c", "1,2", "-n", "6", "--max-tokens", "16", "--think-tokens", "0",
                  "--engine", (char *)spec, "--metrics-interval", "0.1", "--gpu", "off", "-o", dir, NULL};
    int rc = tu_run(LOADLAW_BIN, a1, outf, errf, 0);
    unsetenv("OPENAI_API_KEY");
    tally t = read_tally(dir);
    CHECK(rc == 0 && t.requests == 12 && t.ok == 12, "api_key in --engine alone: exit %d, %d of %d ok (see %s)", rc,
          t.ok, t.requests, errf);
    CHECK(tu_count_in(rec, "\"name\":\"loadlaw_running_requests\"") >= 2 && tu_count_in(errf, "HTTP 401") == 0,
          "its /metrics scraped with the key (%zu samples)", tu_count_in(rec, "\"name\":\"loadlaw_running_requests\""));
    CHECK(tu_dir_has(dir, "KEY-only-here") == 0 && !tu_count_in(errf, "KEY-only-here") &&
              !tu_count_in(outf, "KEY-only-here"),
          "the engine's key appears nowhere (run dir, stdout, stderr)");
    CHECK(tu_dir_has(dir, "api_key=(hidden)") == 1, "the run line keeps the spec with its key hidden");

    /* (c) --api-key that differs: refused before anything is sent */
    snprintf(dir, sizeof dir, "%s/key-differs", g_tmp);
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    char *a2[] = {"loadlaw", "sweep", "-c", "1", "-n", "2", "--api-key", "sk-flag-OTHER-key", "--engine", (char *)spec,
                  "--gpu", "off", "-o", dir, NULL};
    rc = tu_run(LOADLAW_BIN, a2, outf, errf, 0);
    CHECK(rc == 2, "--api-key that differs from the engine's: exit 2, got %d", rc);
    CHECK(tu_count_in(errf, "\n") == 1 &&
              tu_count_in(errf, "--api-key differs from the api_key in the bundled engine's spec") == 1 &&
              tu_count_in(errf, "drop --api-key"),
          "one line naming the fix (see %s)", errf);
    CHECK(!tu_count_in(errf, "KEY-only-here") && !tu_count_in(errf, "OTHER-key") &&
              !tu_count_in(outf, "KEY-only-here") && !tu_count_in(outf, "OTHER-key"),
          "neither key shown");
    CHECK(access(rec, F_OK) != 0, "nothing was run (no %s)", rec);

    /* the same key given both ways */
    snprintf(dir, sizeof dir, "%s/key-same", g_tmp);
    char *a3[] = {"loadlaw", "sweep", "-c", "1", "-n", "2", "--max-tokens", "8", "--api-key", ENGINE_KEY, "--engine",
                  (char *)spec, "--no-metrics", "--gpu", "off", "--no-report", "-o", dir, NULL};
    rc = tu_run(LOADLAW_BIN, a3, outf, errf, 0);
    t = read_tally(dir);
    CHECK(rc == 0 && t.ok == 2, "the same key in --api-key and the spec: exit %d, %d ok", rc, t.ok);
}

int main(void)
{
    if (tu_tmpdir("ll_sweep_auth", g_tmp, sizeof g_tmp))
        return 1;
    unsetenv("OPENAI_API_KEY");
    test_scrape_headers();
    test_engine_key();
    if (tu_fail == 0) /* a failed run's files stay, to be read */
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
