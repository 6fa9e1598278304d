/* test_http1.c: common's one-shot HTTP helper (http1.h) against a server
 * written here on a loopback socket, which keeps what each request said and
 * answers as the case asks:
 *   - GET and POST, the status whatever it is, the body;
 *   - credentials: the bearer key and, of the extra headers, only those whose
 *     name is a secret's; Content-Type when given;
 *   - the bound on the body: a transfer failed past it, or its head kept
 *     and the rest read (keep_head);
 *   - a handle's second request on the same connection;
 *   - a refused connection and a server that never answers (the timeout),
 *     in libcurl's words. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "http1.h"
#include "testutil.h"

typedef struct server {
    int fd, port;
    pthread_t thread;
    atomic_int accepted;
    atomic_int silent;          /* answer nothing (the client times out) */
    char reply[512];            /* the whole response, written as is */
    char last[4096];            /* the last request, head and body */
} server;

/* One request off fd into s->last: its head, then Content-Length bytes. 0,
 * or -1 when the client closed. */
static int read_request(server *s, int fd)
{
    size_t n = 0, want = 0;
    char *end = NULL;
    while (!end || n < want) {
        ssize_t k = read(fd, s->last + n, sizeof s->last - 1 - n);
        if (k <= 0)
            return -1;
        n += (size_t)k;
        s->last[n] = '\0';
        if (!end && (end = strstr(s->last, "\r\n\r\n"))) {
            const char *cl = strstr(s->last, "Content-Length: ");
            want = (size_t)(end + 4 - s->last) + (cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0);
        }
    }
    return 0;
}

static void *serve(void *arg)
{
    server *s = arg;
    for (;;) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        atomic_fetch_add(&s->accepted, 1);
        while (read_request(s, c) == 0) {
            if (atomic_load(&s->silent))
                continue; /* the client gives up and closes */
            if (write(c, s->reply, strlen(s->reply)) < 0)
                break;
        }
        close(c);
    }
}

static int server_start(server *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    memset(s, 0, sizeof *s);
    if ((s->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) ||
        listen(s->fd, 8) || getsockname(s->fd, (struct sockaddr *)&a, &len))
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, serve, s);
}

/* Stop accepting (the thread's accept fails) and join it. */
static void server_stop(server *s)
{
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_join(s->thread, NULL);
}

/* A 200 (or status) with body, keeping the connection open. */
static void set_reply(server *s, int status, const char *body)
{
    snprintf(s->reply, sizeof s->reply, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n\r\n%s", status, strlen(body), body);
}

static void test_get_post(server *s, const char *url)
{
    char err[256] = "";
    char *headers[] = {"X-Api-Key: hk", "X-Other: plain"};
    ll_http1_opts o = {.url = url, .api_key = "sk-1", .headers = headers, .n_headers = 2, .max_bytes = 1024,
                       .timeout_ms = 5000};
    ll_buf resp = {0};
    long status = -1;
    set_reply(s, 200, "hello");
    int rc = ll_http1_once(&o, NULL, &resp, &status, err, sizeof err);
    CHECK(rc == 0 && status == 200 && resp.p && strcmp(resp.p, "hello") == 0, "GET: rc %d status %ld '%s' %s", rc,
          status, resp.p ? resp.p : "", err);
    CHECK(strncmp(s->last, "GET /m HTTP/1.1", 15) == 0, "a GET: %.40s", s->last);
    CHECK(strstr(s->last, "Authorization: Bearer sk-1\r\n") && strstr(s->last, "X-Api-Key: hk\r\n"),
          "the key and the secret-named header go: %s", s->last);
    CHECK(!strstr(s->last, "X-Other"), "a header that is no credential does not: %s", s->last);
    o.content_type = "application/json";
    o.api_key = NULL;
    o.n_headers = 0;
    set_reply(s, 404, "{\"error\":\"no\"}");
    rc = ll_http1_once(&o, "{\"a\":1}", &resp, &status, err, sizeof err);
    CHECK(rc == 0 && status == 404 && strcmp(resp.p, "{\"error\":\"no\"}") == 0,
          "POST: a 404 is an answer (rc %d, status %ld)", rc, status);
    CHECK(strncmp(s->last, "POST /m HTTP/1.1", 16) == 0 && strstr(s->last, "Content-Type: application/json\r\n") &&
              strstr(s->last, "\r\n\r\n{\"a\":1}") && !strstr(s->last, "Authorization"),
          "a POST with its type and body, no key: %s", s->last);
    ll_buf_free(&resp);
}

static void test_bound(server *s, const char *url)
{
    char err[256] = "";
    ll_http1_opts o = {.url = url, .max_bytes = 10, .timeout_ms = 5000};
    ll_buf resp = {0};
    long status = 0;
    set_reply(s, 200, "0123456789abcdefghij");
    int rc = ll_http1_once(&o, NULL, &resp, &status, err, sizeof err);
    CHECK(rc == LL_EIO && err[0], "past max_bytes the transfer fails: rc %d '%s'", rc, err);
    o.keep_head = 1;
    rc = ll_http1_once(&o, "", &resp, &status, err, sizeof err);
    CHECK(rc == 0 && status == 200 && resp.len == 10 && strcmp(resp.p, "0123456789") == 0,
          "keep_head: the first 10 bytes (rc %d, %zu bytes)", rc, resp.len);
    ll_buf_free(&resp);
}

static void test_reuse(server *s, const char *url)
{
    char err[256] = "";
    ll_http1_opts o = {.url = url, .max_bytes = 64, .timeout_ms = 5000};
    ll_http1 *h = NULL;
    ll_buf resp = {0};
    long status = 0;
    set_reply(s, 200, "again");
    int before = atomic_load(&s->accepted);
    CHECK(ll_http1_open(&o, &h, err, sizeof err) == 0, "open: %s", err);
    for (int i = 0; h && i < 3; i++)
        CHECK(ll_http1_do(h, NULL, &resp, &status, err, sizeof err) == 0 && strcmp(resp.p, "again") == 0,
              "request %d on the handle: %s", i, err);
    CHECK(atomic_load(&s->accepted) - before == 1, "one connection for three requests (%d)",
          atomic_load(&s->accepted) - before);
    ll_http1_close(h);
    ll_buf_free(&resp);
}

static void test_failures(server *s, const char *url)
{
    char err[256] = "", closed[64];
    ll_buf resp = {0};
    long status = -1;
    /* a port nobody listens on: a socket bound, then closed */
    server dead;
    if (server_start(&dead) == 0) {
        server_stop(&dead);
        snprintf(closed, sizeof closed, "http://127.0.0.1:%d/m", dead.port);
        ll_http1_opts o = {.url = closed, .max_bytes = 64, .timeout_ms = 5000};
        int rc = ll_http1_once(&o, NULL, &resp, &status, err, sizeof err);
        CHECK(rc == LL_EIO && status == 0 && strstr(err, "onnect"), "refused: rc %d status %ld '%s'", rc, status,
              err);
    }
    atomic_store(&s->silent, 1);
    ll_http1_opts o = {.url = url, .max_bytes = 64, .timeout_ms = 300};
    int64_t t0 = ll_now_ns();
    int rc = ll_http1_once(&o, NULL, &resp, &status, err, sizeof err);
    double took_s = (double)(ll_now_ns() - t0) / 1e9;
    CHECK(rc == LL_EIO && strstr(err, "imed out") && took_s < 3, "timeout: rc %d after %.2f s '%s'", rc, took_s,
          err);
    atomic_store(&s->silent, 0);
    ll_buf_free(&resp);
}

int main(void)
{
    server s;
    char url[64];
    if (server_start(&s)) {
        fprintf(stderr, "test server: cannot listen\n");
        return 1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/m", s.port);
    test_get_post(&s, url);
    test_bound(&s, url);
    test_reuse(&s, url);
    test_failures(&s, url);
    server_stop(&s);
    TEST_MAIN_END();
}
