/* test_sweep_faults.c: `loadlaw sweep` when its own side misbehaves, as a
 * user's machine does: the client stopped while the server finishes (E2E
 * must end at the last byte's arrival, not when the worker woke), the
 * records file deleted mid-run (the run stops and keeps what it wrote), and
 * a server that refuses connections for a while (a closed loop backs off
 * instead of spending its level as connect errors). Real processes, real
 * loopback sockets: the test SSE server (sse_server.c) and the bundled
 * engine (`loadlaw serve`). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "sse_server.h"
#include "tsupport.h"
#include "testutil.h"

static char g_tmp[256];

typedef struct tally {
    int requests, ok, connect;
    int64_t e2e_max_ns, last_chunk_max_ns;
} tally;

static int on_request(const ll_rec_request *rq, void *ctx)
{
    tally *t = ctx;
    t->requests++;
    t->ok += rq->cls == LL_ERRC_OK;
    t->connect += rq->cls == LL_ERRC_CONNECT;
    if (rq->cls == LL_ERRC_OK && rq->end_ns - rq->send_ns > t->e2e_max_ns)
        t->e2e_max_ns = rq->end_ns - rq->send_ns;
    if (rq->n_chunks && rq->chunks[rq->n_chunks - 1].t_ns - rq->send_ns > t->last_chunk_max_ns)
        t->last_chunk_max_ns = rq->chunks[rq->n_chunks - 1].t_ns - rq->send_ns;
    return 0;
}

static int read_tally(const char *records, tally *t)
{
    ll_rec_handlers h = {.on_request = on_request};
    char err[256];
    memset(t, 0, sizeof *t);
    int rc = ll_rec_read(records, &h, t, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    return rc;
}

/* The sweep is stopped (SIGSTOP) while the server sends its whole stream and
 * for a second after; E2E is the stream's span as the kernel received it,
 * like TTFT and every gap, not the second the process slept. */
static void test_e2e_kernel_clock(void)
{
    ts_server *ts = NULL;
    ts_config tc = {.mode = TS_OK, .think_tok = 0, .answer_tok = 10, .gap_us = 10000};
    if (ts_start(&tc, &ts)) {
        CHECK(0, "test server starts");
        return;
    }
    char dir[300], errf[300], path[400], url[128];
    snprintf(url, sizeof url, "%s", ts_url(ts));
    snprintf(dir, sizeof dir, "%s/e2e", g_tmp);
    snprintf(errf, sizeof errf, "%s/e2e.err", g_tmp);
    char *args[] = {"loadlaw", "sweep", "--url", url, "--model", "m", "-c", "1", "-n", "1", "--warmup", "0",
                    "--max-tokens", "10", "-q", "--no-report", "-o", dir, NULL};
    pid_t p = tu_spawn(LOADLAW_BIN, args, NULL, errf);
    int64_t until = ll_now_ns() + (int64_t)20e9;
    while (ts_requests(ts) < 1 && ll_now_ns() < until)
        usleep(200);
    CHECK(kill(p, SIGSTOP) == 0, "sweep stopped once its request reached the server");
    usleep(1500000); /* the ~100 ms stream ends while the client sleeps */
    CHECK(kill(p, SIGCONT) == 0, "and continued 1.5 s later");
    int rc = tu_wait(p, 60);
    ts_stop(ts);
    CHECK(rc == 0, "sweep exits 0, got %d", rc);
    tally t;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    CHECK(read_tally(path, &t) == 0 && t.ok == 1, "one request, ok: %d of %d", t.ok, t.requests);
    /* The server needs ~100 ms; a busy machine may stretch it, never to the 1.5 s stop. */
    CHECK(t.e2e_max_ns < (int64_t)1000e6, "E2E %.1f ms: the stream's span, not the stop (>= 1500 ms)",
          (double)t.e2e_max_ns / 1e6);
    CHECK(t.e2e_max_ns >= t.last_chunk_max_ns && t.e2e_max_ns - t.last_chunk_max_ns < (int64_t)50e6,
          "E2E ends at the last bytes: %.1f ms, last chunk %.1f ms", (double)t.e2e_max_ns / 1e6,
          (double)t.last_chunk_max_ns / 1e6);
}

/* records.jsonl deleted while the first level runs: the run stops at that
 * level's end (not after every level), exits 1, says where the lines went,
 * and the saved file holds the level's requests. */
static void test_records_deleted(void)
{
    ts_server *ts = NULL;
    ts_config tc = {.mode = TS_OK, .think_tok = 0, .answer_tok = 4, .gap_us = 2000};
    if (ts_start(&tc, &ts)) {
        CHECK(0, "test server starts");
        return;
    }
    char dir[300], errf[300], path[400], saved[420], url[128];
    snprintf(url, sizeof url, "%s", ts_url(ts));
    snprintf(dir, sizeof dir, "%s/gone", g_tmp);
    snprintf(errf, sizeof errf, "%s/gone.err", g_tmp);
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    snprintf(saved, sizeof saved, "%s.recovered", path);
    char *args[] = {"loadlaw", "sweep", "--url", url, "--model", "m", "-c", "2,4,8", "-n", "40", "--warmup", "0",
                    "--max-tokens", "4", "-q", "--no-report", "-o", dir, NULL};
    pid_t p = tu_spawn(LOADLAW_BIN, args, NULL, errf);
    int64_t until = ll_now_ns() + (int64_t)20e9;
    while (ts_requests(ts) < 3 && ll_now_ns() < until)
        usleep(500);
    CHECK(unlink(path) == 0, "records.jsonl deleted while level 0 runs");
    int rc = tu_wait(p, 60);
    int sent = ts_requests(ts);
    ts_stop(ts);
    CHECK(rc == 1, "exit 1, got %d", rc);
    CHECK(sent <= 40 + 8, "the run stopped after level 0: %d requests sent of 120", sent);
    CHECK(tu_file_has(errf, "records.jsonl was deleted during the run") && tu_file_has(errf, saved),
          "stderr says what happened and where the lines are");
    tally t;
    CHECK(read_tally(saved, &t) == 0 && t.requests == 40 && t.ok == 40,
          "the saved file holds level 0's 40 requests: %d (%d ok)", t.requests, t.ok);
}

/* A free loopback port, nothing listening on it (for a moment). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* The server comes up 1.5 s after the level began: without a back-off the
 * closed loop would spend all 48 requests as connect errors in a moment;
 * with it, at most one round of C plus a probe per worker and try fail, and
 * the rest are measured. */
static void test_connect_backoff(void)
{
    int port = free_port();
    CHECK(port > 0, "a free port");
    char dir[300], errf[300], serr[300], path[400], url[128], ports[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(ports, sizeof ports, "%d", port);
    snprintf(dir, sizeof dir, "%s/backoff", g_tmp);
    snprintf(errf, sizeof errf, "%s/backoff.err", g_tmp);
    snprintf(serr, sizeof serr, "%s/serve.err", g_tmp);
    char *sweep[] = {"loadlaw", "sweep", "--url", url, "--model", "loadlaw-synthetic", "-c", "4", "-n", "48", "--warmup", "0",
                     "--max-tokens", "4", "--threads", "2", "--max-failed", "1", "-q", "--no-report", "-o", dir,
                     NULL};
    char *serve[] = {"loadlaw", "serve", "--port", ports, "--law", "2+0n", NULL};
    pid_t p = tu_spawn(LOADLAW_BIN, sweep, NULL, errf);
    usleep(1500000);
    pid_t s = tu_spawn(LOADLAW_BIN, serve, NULL, serr);
    int rc = tu_wait(p, 60);
    kill(s, SIGTERM);
    tu_wait(s, 20);
    CHECK(rc == 0, "sweep exits 0, got %d", rc);
    tally t;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    CHECK(read_tally(path, &t) == 0 && t.requests == 48, "48 requests recorded: %d", t.requests);
    /* 4 refused at once, then per worker (2) one probe per back-off: 50,
     * 100, 200, 400, 800 ms cover the 1.5 s; twice as many for a slow start. */
    CHECK(t.connect >= 1 && t.connect <= 4 + 2 * 12, "connect errors %d: the first round and the probes",
          t.connect);
    CHECK(t.ok == t.requests - t.connect, "the rest measured: %d ok", t.ok);
    CHECK(tu_file_has(errf, "connection refused; backing off 50 ms"), "the back-off is said");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (tu_tmpdir("ll_sweep_faults", g_tmp, sizeof g_tmp))
        return 1;
    test_e2e_kernel_clock();
    test_records_deleted();
    test_connect_backoff();
    if (tu_fail == 0)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
