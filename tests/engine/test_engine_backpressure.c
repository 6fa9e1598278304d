/* test_engine_backpressure.c: a zero-cost law (0+0n) must not let the
 * scheduler run steps while the tokens of earlier ones are still unsent.
 *
 * A raw-socket client asks for a long stream and never reads. Once the socket
 * buffers are full nothing can be handed to MHD any more, so the scheduler
 * must sleep (one bounded wait per step) instead of looping: a looping one
 * spins through step after step at 0+0n, piling up bytes nobody can send
 * and burning the core the HTTP thread needs. Counting
 * steps over a fixed window is deterministic in what it separates: a spinning
 * scheduler makes tens of thousands, a waiting one at most one per
 * ENG_DRAIN_WAIT_MAX_NS (10 ms). A plain (not streamed) request beside the
 * stuck stream must not wait with it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_stalled_reader(void)
{
    eng_config cfg;
    char err[256];
    eng_config_default(&cfg);
    int rc = eng_parse_spec("backend=synthetic,law=0+0n,max_tokens_limit=4000000,"
                            "max_context=8000000", &cfg, err, sizeof err);
    CHECK(rc == 0, "spec: %s", err);
    eng_engine *e = NULL;
    rc = rc ? rc : eng_start(&cfg, &e, err, sizeof err);
    eng_config_free(&cfg);
    if (rc) {
        CHECK(0, "eng_start: %s", err);
        return;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096; /* fill the pipe early: the test is about what follows */
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)eng_port(e))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
    const char *body = "{\"prompt\":\"a\",\"max_tokens\":4000000,\"ignore_eos\":true,\"stream\":true}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    CHECK(write(fd, req, (size_t)n) == n, "send the request");
    /* Let the socket buffers fill: the stream has begun (100 steps) and two
     * 100 ms windows in a row have fewer than 50 steps each (a waiting
     * scheduler makes at most 10), 20 s at most. A fixed 500 ms was not
     * always enough on a busy host under the sanitizers, and the window
     * below then counted the filling (4,229 steps once). A spinning
     * scheduler never gets here and the check below catches it. */
    size_t c1 = eng_step_count(e);
    for (int i = 0, calm = 0; i < 200 && calm < 2; i++) {
        sleep_ms(100);
        size_t now = eng_step_count(e);
        calm = now >= 100 && now - c1 < 50 ? calm + 1 : 0;
        c1 = now;
    }
    sleep_ms(500);
    size_t c2 = eng_step_count(e);
    /* 500 ms of bounded waits: about 50 steps; spinning: far above 5000. */
    CHECK(c2 - c1 < 500, "steps while the client read nothing for 500 ms: %zu (spinning?)",
          c2 - c1);
    CHECK(c2 < 200000, "steps against a client that never read, buffers filled: %zu", c2);
    /* A request that is not a stream has no reader to wait for: its 200
     * steps run at the law's 0 ms, not at one bounded wait (10 ms) each for
     * the stream beside it, held or stuck (2 s or more). */
    int got = -1;
    int64_t t0 = ll_now_ns();
    size_t s0 = eng_step_count(e);
    long st = tc_completion(eng_url(e), 200, &got);
    double took_s = (double)(ll_now_ns() - t0) / 1e9;
    printf("a plain request of 200 tokens beside the stalled stream: %.3f s, %zu steps\n", took_s,
           eng_step_count(e) - s0);
    CHECK(st == 200 && got == 200, "a plain request beside the stuck stream: status %ld, %d tokens", st, got);
    CHECK(took_s < 1.0, "its 200 steps did not wait on the stuck stream: %.3f s (>= 2 s when each waits 10 ms)",
          took_s);
    close(fd);
    eng_stop(e);
}

int main(void)
{
    test_stalled_reader();
    TEST_MAIN_END();
}
