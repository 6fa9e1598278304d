/* test_engine_abuse.c: the server's limits against clients that abuse it,
 * on real sockets:
 *  - connections that send nothing: one address holds at most
 *    max_connections_per_ip of them, so a client from another address is
 *    served while they sit; and request_timeout closes them (and a kept-alive
 *    connection idle between requests) soon, so a client from the same
 *    address is served too, while answers longer than it are not cut;
 *  - a body over max_body, declared: answered 413 before it is read, to a
 *    client that sends "Expect: 100-continue" (it never sends the body) and
 *    to one that writes the whole body before reading (it reads the 413, not
 *    a reset); a 401 the same way;
 *  - a duplicate key anywhere in a body: 400 naming it;
 *  - the sampling parameters the engine does not use: each checked, 400
 *    naming it;
 *  - /start_profile without a key: num_steps bounded by
 *    profile_max_steps_open, and a capture until /stop_profile too.
 *
 * Waits are bounded (ANSWER_MS), far above what an answer takes on a busy
 * machine, so a server that leaves a client waiting fails rather than
 * hangs. Idle connections come from 127.0.0.2 where another address is
 * needed: Linux routes all of 127.0.0.0/8 to the loopback device. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"
#include "tsupport.h"

#define ANSWER_MS 8000
#define MAX_IDLE 48

static int64_t now_ms(void) { return ll_now_ns() / 1000000; }

/* A connection from src (an IPv4 address) to the engine: the socket, or -1. */
static int connect_from(const eng_engine *e, const char *src)
{
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)eng_port(e))};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    inet_pton(AF_INET, src, &from.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* tc_read_answer within ANSWER_MS; *closed: the peer closed (end-of-file
 * or reset). */
static size_t read_answer(int fd, char *buf, size_t cap, int *closed)
{
    return tc_read_answer(fd, buf, cap, ANSWER_MS, closed);
}

/* 1 when the server has closed fd (end-of-file or reset) within ms. */
static int closed_within(int fd, int ms)
{
    char b[256];
    int64_t end = now_ms() + ms;
    for (;;) {
        int64_t left = end - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left > 0 ? (int)left : 0) <= 0)
            return 0;
        ssize_t k = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN))
            return 1;
        if (left <= 0)
            return 0;
    }
}

/* How many of fds[0, n) the server has closed once want of them are, or
 * ms have passed; each closed one is set to -1. */
static int count_closed(int *fds, int n, int want, int ms)
{
    int closed = 0;
    int64_t end = now_ms() + ms;
    for (;;) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0 && closed_within(fds[i], 0)) {
                close(fds[i]);
                fds[i] = -1;
                closed++;
            }
        if (closed >= want || now_ms() >= end)
            return closed;
        usleep(20000);
    }
}

/* The status at the head of an answer; 0 without one. */
static int status_of(const char *buf)
{
    int st = 0;
    return sscanf(buf, "HTTP/1.1 %d", &st) == 1 ? st : 0;
}

/* One completion from src on a new connection: the status, 0 for none
 * within ANSWER_MS. (Its answer is chunked: the server's close ends it.) */
static int completion_from(const eng_engine *e, const char *src)
{
    static const char body[] = "{\"prompt\":\"a b\",\"max_tokens\":2}";
    char req[256], buf[4096];
    int n = snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: "
                     "application/json\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    int fd = connect_from(e, src), closed;
    if (fd < 0)
        return 0;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return 0;
    }
    read_answer(fd, buf, sizeof buf, &closed);
    close(fd);
    return status_of(buf);
}

/* n connections from src that send nothing; fds[i] -1 where none opened. */
static int open_idle(const eng_engine *e, const char *src, int n, int *fds)
{
    int got = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = connect_from(e, src);
        got += fds[i] >= 0;
    }
    return got;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* One address fills what it may of the connection limit with connections
 * that send nothing; a client from another address is still served, and
 * the connections past the per-address cap were closed at once. Before the
 * cap, the 40 took all 32 slots and the client waited for the idle timeout. */
static void test_per_ip_cap(void)
{
    eng_engine *e = tc_start("law=1,max_connections=32,max_connections_per_ip=8,request_timeout=60s");
    int fds[MAX_IDLE];
    int opened = open_idle(e, "127.0.0.2", 40, fds);
    CHECK(opened == 40, "40 idle connections from 127.0.0.2 opened (%d; is 127.0.0.2 routable?)", opened);
    int closed = count_closed(fds, 40, 32, 3000);
    usleep(100000);
    closed += count_closed(fds, 40, 0, 0);
    CHECK(closed == 32, "the 32 past the per-address cap of 8 were closed at once (%d)", closed);
    CHECK(completion_from(e, "127.0.0.1") == 200, "a client from another address is served");
    close_all(fds, 40);
    eng_stop(e);

    /* the default cap on a small server: half of max_connections */
    e = tc_start("law=1,max_connections=32,request_timeout=60s");
    opened = open_idle(e, "127.0.0.2", 40, fds);
    CHECK(completion_from(e, "127.0.0.1") == 200, "default cap: a client from another address is "
          "served (%d idle opened)", opened);
    close_all(fds, 40);
    eng_stop(e);
}

/* Connections that send nothing are closed after request_timeout, so even
 * a client from their own address gets in; so is a kept-alive connection
 * idle between requests; an answer that takes longer than request_timeout
 * is not cut. */
static void test_request_timeout(void)
{
    eng_engine *e = tc_start("law=1,max_connections=32,max_connections_per_ip=32,request_timeout=1s");
    int fds[MAX_IDLE];
    int opened = open_idle(e, "127.0.0.1", 32, fds);
    int64_t t0 = now_ms();
    int st = completion_from(e, "127.0.0.1");
    int64_t waited = now_ms() - t0;
    CHECK(opened == 32 && st == 200 && waited < ANSWER_MS,
          "with every slot held by silent connections, a client from the same address is served "
          "once they time out: %d after %lld ms", st, (long long)waited);
    int closed = count_closed(fds, 32, 32, 3000);
    CHECK(closed == 32, "every silent connection was closed (%d of 32)", closed);
    close_all(fds, 32);

    /* kept alive after its answer, then silent: closed like a new one */
    char req[] = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n", buf[2048];
    int fd = connect_from(e, "127.0.0.1"), shut;
    CHECK(fd >= 0 && send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1),
          "health request sent");
    read_answer(fd, buf, sizeof buf, &shut);
    CHECK(status_of(buf) == 200 && !shut, "health answered, connection kept: %.40s", buf);
    CHECK(closed_within(fd, 4000), "the kept-alive connection was closed once silent");
    close(fd);

    /* answers of ~1.5 s (1500 steps of 1 ms), stream and not, are whole */
    char u[256];
    tc_resp r;
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    tc_request("POST", u, "{\"prompt\":\"a\",\"max_tokens\":1500,\"ignore_eos\":true,\"stream\":true}", -1, &r);
    CHECK(r.status == 200 && tc_stream_tokens(r.body.p) == 1500, "a stream longer than "
          "request_timeout is whole: %ld, %d tokens", r.status, tc_stream_tokens(r.body.p));
    tc_resp_free(&r);
    tc_request("POST", u, "{\"prompt\":\"a\",\"max_tokens\":1500,\"ignore_eos\":true}", -1, &r);
    CHECK(r.status == 200 && strstr(r.body.p, "\"completion_tokens\":1500"),
          "a non-streaming answer longer than request_timeout is whole: %ld", r.status);
    tc_resp_free(&r);
    eng_stop(e);
}

/* Send the headers of a POST with a body of body_len bytes (extra: more
 * header lines), then, unless expect, the whole body before reading; the
 * answer in buf. *sent_all = 1 when every byte of the body went out. */
static void post_large(const eng_engine *e, const char *path, size_t body_len, const char *extra,
                       int expect, char *buf, size_t cap, int *sent_all)
{
    char head[512];
    int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n", path, body_len, extra,
                     expect ? "Expect: 100-continue\r\n" : "");
    int fd = connect_from(e, "127.0.0.1"), closed;
    struct timeval tv = {ANSWER_MS / 1000, 0};
    *sent_all = 0;
    buf[0] = '\0';
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
        send(fd, head, (size_t)n, MSG_NOSIGNAL) != n) {
        if (fd >= 0)
            close(fd);
        return;
    }
    static char chunk[64 * 1024];
    memset(chunk, 'x', sizeof chunk);
    size_t off = 0;
    while (!expect && off < body_len) {
        size_t k = body_len - off < sizeof chunk ? body_len - off : sizeof chunk;
        ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    *sent_all = !expect && off == body_len;
    read_answer(fd, buf, cap, &closed);
    close(fd);
}

/* A declared body over max_body is answered before it is read. A client
 * that asks "Expect: 100-continue" gets the 413 instead of a 100 and never
 * sends the body; one that writes all 64 MB before it reads gets all of
 * them out and then reads the 413: before the lingering close, the server's
 * close with the body unread reset the connection and its write failed. */
static void test_early_413(void)
{
    eng_engine *e = tc_start("law=1,max_body=64k");
    char buf[4096];
    int sent_all;
    post_large(e, "/v1/completions", 100u << 20, "", 1, buf, sizeof buf, &sent_all);
    CHECK(status_of(buf) == 413 && strstr(buf, "over this server's limit") && !strstr(buf, "100 Continue"),
          "Expect: 100-continue with 100 MB declared: 413 at once: %.80s", buf);
    post_large(e, "/v1/completions", 64u << 20, "", 0, buf, sizeof buf, &sent_all);
    CHECK(sent_all && status_of(buf) == 413 && strstr(buf, "67108864 bytes"), "a client that writes 64 MB before reading gets it all "
          "out (%d) and reads the 413: %.80s", sent_all, buf);
    CHECK(completion_from(e, "127.0.0.1") == 200, "served after the refused bodies");
    eng_stop(e);

    e = tc_start("law=1,api_key=k");
    post_large(e, "/v1/completions", 32u << 20, "", 0, buf, sizeof buf, &sent_all);
    CHECK(sent_all && status_of(buf) == 401, "a 401 before a 32 MB body is read too (%d): %.80s",
          sent_all, buf);
    eng_stop(e);
}

/* POST path body; the status, with error.message and error.param copied. */
static long post(const eng_engine *e, const char *path, const char *body, char *msg, size_t msglen,
                 char *param, size_t paramlen)
{
    char u[256];
    tc_resp r;
    snprintf(u, sizeof u, "%s%s", eng_url(e), path);
    tc_request("POST", u, body, -1, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
    snprintf(msg, msglen, "%s", ll_json_str(er, "message", ""));
    snprintf(param, paramlen, "%s", ll_json_str(er, "param", ""));
    cJSON_Delete(o);
    tc_resp_free(&r);
    return r.status;
}

/* A key twice in one object, anywhere: 400 naming it. Before, the first of
 * two max_tokens won (1 token, 200) where Python readers take the last. */
static void test_duplicate_keys(const char *root)
{
    static const struct {
        const char *path, *body, *names;
    } dup[] = {
        {"/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":1,\"max_tokens\":100000}", "\"max_tokens\""},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stream\":true,"
         "\"stream_options\":{\"include_usage\":false,\"include_usage\":true}}",
         "\"stream_options.include_usage\""},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"content\":\"b c\"}]}",
         "\"messages[0].content\""},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"role\":\"system\",\"content\":\"a\"}]}",
         "\"messages[0].role\""},
        {"/v1/completions", "{\"prompt\":\"a\",\"metadata\":{\"x\":{\"k\":1,\"k\":2}}}", "\"metadata.x.k\""},
        {"/start_profile", "{\"num_steps\":1,\"num_steps\":2}", "\"num_steps\""},
    };
    char spec[400], msg[512], param[64];
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s/dup", root);
    eng_engine *e = tc_start(spec);
    for (size_t i = 0; i < sizeof dup / sizeof dup[0]; i++) {
        long st = post(e, dup[i].path, dup[i].body, msg, sizeof msg, param, sizeof param);
        CHECK(st == 400 && strstr(msg, "duplicate key") && strstr(msg, dup[i].names),
              "%s %s: 400 naming %s: %ld %s", dup[i].path, dup[i].body, dup[i].names, st, msg);
    }
    long st = post(e, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2,\"metadata\":{\"max_tokens\":3},"
                   "\"x\":[{\"k\":1},{\"k\":2}]}", msg, sizeof msg, param, sizeof param);
    CHECK(st == 200, "one key in several objects is no duplicate: %ld %s", st, msg);
    /* 200 objects deep: the path is elided, the key still named */
    char deep[2048];
    size_t n = (size_t)snprintf(deep, sizeof deep, "{\"prompt\":\"a\",\"x\":");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"a\":");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"bb\":1,\"bb\":2}");
    for (int i = 0; i < 201; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "}");
    st = post(e, "/v1/completions", deep, msg, sizeof msg, param, sizeof param);
    CHECK(st == 400 && strstr(msg, "\"x.a.a.") && strstr(msg, "...bb\""), "deep duplicate named: %ld %s",
          st, msg);
    eng_stop(e);
    snprintf(spec, sizeof spec, "%s/dup", root);
    rmdir(spec);
}

/* Each sampling parameter out of its range or of the wrong type: 400 with
 * error.param naming it; in range: 200. Before, only temperature was
 * checked. */
static void test_sampling_params(void)
{
    static const struct {
        const char *field, *value;
        int ok;
    } cases[] = {
        {"top_p", "-1", 0}, {"top_p", "0", 0}, {"top_p", "1.5", 0}, {"top_p", "1e308", 0},
        {"top_p", "\"x\"", 0}, {"top_p", "{}", 0}, {"top_p", "1", 1}, {"top_p", "0.25", 1},
        {"seed", "1.5", 0}, {"seed", "1e308", 0}, {"seed", "\"x\"", 0}, {"seed", "{}", 0},
        {"seed", "9300000000000000000", 0}, {"seed", "-9300000000000000000", 0},
        {"seed", "-1", 1}, {"seed", "0", 1}, {"seed", "9007199254740993", 1},
        {"seed", "-9223372036854775808", 1},
        {"frequency_penalty", "2.5", 0}, {"frequency_penalty", "true", 0}, {"frequency_penalty", "-2", 1},
        {"presence_penalty", "-2.5", 0}, {"presence_penalty", "[]", 0}, {"presence_penalty", "1.5", 1},
        {"repetition_penalty", "0", 0}, {"repetition_penalty", "-1", 0}, {"repetition_penalty", "1e999", 0},
        {"repetition_penalty", "1.1", 1},
        {"min_p", "1.5", 0}, {"min_p", "-0.1", 0}, {"min_p", "0.05", 1},
        {"top_k", "-2", 0}, {"top_k", "1.5", 0}, {"top_k", "\"5\"", 0}, {"top_k", "-1", 1},
        {"top_k", "0", 1}, {"top_k", "40", 1},
        {"temperature", "-0.1", 0}, {"temperature", "\"hot\"", 0}, {"temperature", "0", 1},
        {"logit_bias", "[]", 0}, {"logit_bias", "{\"x\":1}", 0}, {"logit_bias", "{\"42\":101}", 0},
        {"logit_bias", "{\"-1\":1}", 0}, {"logit_bias", "{\"42\":\"1\"}", 0},
        {"logit_bias", "{\"42\":-100,\"7\":0.5}", 1},
        {"user", "5", 0}, {"user", "\"u-1\"", 1},
    };
    eng_engine *e = tc_start("law=1");
    char body[256], msg[512], param[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(body, sizeof body, "{\"prompt\":\"a\",\"max_tokens\":1,\"%s\":%s}", cases[i].field,
                 cases[i].value);
        long st = post(e, "/v1/completions", body, msg, sizeof msg, param, sizeof param);
        if (cases[i].ok)
            CHECK(st == 200, "%s %s accepted: %ld %s", cases[i].field, cases[i].value, st, msg);
        else
            CHECK(st == 400 && strcmp(param, cases[i].field) == 0 && strstr(msg, cases[i].field),
                  "%s %s: 400 naming it: %ld param %s: %s", cases[i].field, cases[i].value, st, param, msg);
    }
    long st = post(e, "/v1/chat/completions", "{\"messages\":[{\"role\":\"robot\",\"content\":\"a\"}]}",
                   msg, sizeof msg, param, sizeof param);
    CHECK(st == 400 && strcmp(param, "messages") == 0 && strstr(msg, "role"), "an unknown role: %ld %s",
          st, msg);
    st = post(e, "/v1/chat/completions", "{\"messages\":[{\"role\":\"developer\",\"content\":\"a\"},"
              "{\"role\":\"user\",\"content\":\"b\"}],\"max_tokens\":1}", msg, sizeof msg, param, sizeof param);
    CHECK(st == 200, "developer and user roles: %ld %s", st, msg);
    eng_stop(e);
}

/* POST /start_profile body (a short timeout_s: an idle engine answers once
 * it passes); the status and, when written, the trace's step count. The
 * trace is removed. */
static long start_profile(const eng_engine *e, const char *body, const char *key, long *steps, char *msg,
                          size_t msglen)
{
    char u[256], h[64];
    tc_resp r;
    snprintf(u, sizeof u, "%s/start_profile", eng_url(e));
    snprintf(h, sizeof h, "Authorization: Bearer %s", key ? key : "");
    tc_request_hdr("POST", u, body, -1, key ? h : NULL, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    const char *path = ll_json_str(o, "path", NULL);
    if (path)
        unlink(path);
    *steps = ll_json_i64(o, "num_steps", -1);
    snprintf(msg, msglen, "%s", ll_json_str(cJSON_GetObjectItemCaseSensitive(o, "error"), "message", ""));
    cJSON_Delete(o);
    tc_resp_free(&r);
    return r.status;
}

/* Without a key, a capture is bounded by profile_max_steps_open (default
 * 100,000); with one, by 10,000,000. Before, 10,000,000 steps were open to
 * anyone. */
static void test_profile_cap(const char *root)
{
    char spec[400], msg[512], dir[300];
    long steps;
    snprintf(dir, sizeof dir, "%s/prof", root);
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", dir);
    eng_engine *e = tc_start(spec);
    long st = start_profile(e, "{\"num_steps\":100001,\"timeout_s\":0.1}", NULL, &steps, msg, sizeof msg);
    CHECK(st == 400 && strstr(msg, "100000") && strstr(msg, "profile_max_steps_open"),
          "no key: 100,001 steps refused, naming the bound: %ld %s", st, msg);
    st = start_profile(e, "{\"num_steps\":100000,\"timeout_s\":0.1}", NULL, &steps, msg, sizeof msg);
    CHECK(st == 200, "no key: 100,000 steps accepted: %ld %s", st, msg);
    eng_stop(e);

    snprintf(spec, sizeof spec, "law=1,profile_dir=%s,profile_max_steps_open=3", dir);
    e = tc_start(spec);
    st = start_profile(e, "{\"num_steps\":4,\"timeout_s\":0.1}", NULL, &steps, msg, sizeof msg);
    CHECK(st == 400, "profile_max_steps_open=3: 4 steps refused: %ld %s", st, msg);
    /* a capture until /stop_profile stops at the bound too */
    char u[256];
    tc_resp r;
    snprintf(u, sizeof u, "%s/start_profile", eng_url(e));
    tc_request("POST", u, "", 0, &r);
    CHECK(r.status == 200, "open-ended capture started: %ld", r.status);
    tc_resp_free(&r);
    CHECK(tc_completion(eng_url(e), 20, NULL) == 200, "20 tokens generated during the capture");
    snprintf(u, sizeof u, "%s/stop_profile", eng_url(e));
    tc_request("POST", u, "", 0, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    CHECK(r.status == 200 && ll_json_i64(o, "num_steps", -1) == 3, "the capture holds 3 steps: %s", r.body.p);
    unlink(ll_json_str(o, "path", ""));
    cJSON_Delete(o);
    tc_resp_free(&r);
    eng_stop(e);

    /* with a key the bound is 10,000,000, whatever profile_max_steps_open says */
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s,profile_max_steps_open=3,control_key=c", dir);
    e = tc_start(spec);
    st = start_profile(e, "{\"num_steps\":10000000,\"timeout_s\":0.1}", "c", &steps, msg, sizeof msg);
    CHECK(st == 200, "control key: 10,000,000 steps accepted: %ld %s", st, msg);
    st = start_profile(e, "{\"num_steps\":10000001,\"timeout_s\":0.1}", "c", &steps, msg, sizeof msg);
    CHECK(st == 400, "control key: 10,000,001 refused: %ld %s", st, msg);
    eng_stop(e);
    rmdir(dir);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    char root[] = "/tmp/loadlaw-engabuse-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    test_per_ip_cap();
    test_request_timeout();
    test_early_413();
    test_duplicate_keys(root);
    test_sampling_params();
    test_profile_cap(root);
    tu_rmtree(root); /* the traces the profile tests wrote */
    curl_global_cleanup();
    TEST_MAIN_END();
}
