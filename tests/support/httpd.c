/* httpd.c: the tests' scripted HTTP server on loopback (tsupport.h): one
 * thread, one connection at a time, a handler per request. The tests use
 * it as a /metrics endpoint that logs what it is sent, as recorded server
 * texts that move with time, and as a chat server that dies after a few
 * answers. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tsupport.h"

struct tu_httpd {
    int fd, port;
    atomic_int stop;
    tu_httpd_fn *fn;
    void *ctx;
    pthread_t th;
    char buf[65536]; /* the request being read: its head, then body bytes to drop */
    char body[65536]; /* its first body bytes, NUL-terminated (tu_httpd_body) */
    size_t body_len;
};

/* The request the handler on this thread is answering (tu_httpd_body). */
static __thread const tu_httpd *t_serving;

/* Reads one request on c: its head into h->buf (NUL-terminated), then
 * Content-Length bytes of body, the first 64 KiB kept in h->body. 0, or -1
 * when the head or the body did not all come. */
static int read_request(tu_httpd *h, int c)
{
    char *buf = h->buf, *end = NULL;
    size_t n = 0, cap = sizeof h->buf;
    ssize_t k;
    while (!end && n < cap - 1 && (k = read(c, buf + n, cap - 1 - n)) > 0) {
        n += (size_t)k;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end)
        return -1;
    const char *cl = strcasestr(buf, "\ncontent-length:");
    size_t want = cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0, have = n - (size_t)(end + 4 - buf);
    h->body_len = have < sizeof h->body - 1 ? have : sizeof h->body - 1;
    memcpy(h->body, end + 4, h->body_len);
    end[4] = '\0'; /* the handler sees the head alone */
    char drop[4096];
    while (have < want && (k = read(c, drop, sizeof drop)) > 0) {
        size_t keep = (size_t)k < sizeof h->body - 1 - h->body_len ? (size_t)k : sizeof h->body - 1 - h->body_len;
        memcpy(h->body + h->body_len, drop, keep);
        h->body_len += keep;
        have += (size_t)k;
    }
    h->body[h->body_len] = '\0';
    return have >= want ? 0 : -1;
}

static void *httpd_main(void *arg)
{
    tu_httpd *h = arg;
    int done = 0;
    while (!done && !atomic_load(&h->stop)) {
        int c = accept(h->fd, NULL, NULL);
        if (c < 0)
            continue; /* SO_RCVTIMEO: woke to look at the stop flag */
        if (read_request(h, c) == 0) {
            t_serving = h;
            done = h->fn(c, h->buf, h->ctx) != 0;
            t_serving = NULL;
        }
        close(c);
    }
    if (done) {
        /* the server dies: queued connections reset, new ones refused */
        close(h->fd);
        h->fd = -1;
    }
    return NULL;
}

int tu_httpd_start(tu_httpd_fn *fn, void *ctx, tu_httpd **out)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000}; /* accept wakes to see stop */
    tu_httpd *h = calloc(1, sizeof *h);
    *out = NULL;
    if (!h)
        return -1;
    h->fn = fn;
    h->ctx = ctx;
    if ((h->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(h->fd, (struct sockaddr *)&a, sizeof a) || listen(h->fd, 64) ||
        getsockname(h->fd, (struct sockaddr *)&a, &al) || setsockopt(h->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
        goto fail;
    h->port = ntohs(a.sin_port);
    if (pthread_create(&h->th, NULL, httpd_main, h))
        goto fail;
    *out = h;
    return 0;
fail:
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    return -1;
}

const char *tu_httpd_body(size_t *len)
{
    if (len)
        *len = t_serving ? t_serving->body_len : 0;
    return t_serving ? t_serving->body : NULL;
}

int tu_httpd_port(const tu_httpd *h)
{
    return h->port;
}

void tu_httpd_stop(tu_httpd *h)
{
    if (!h)
        return;
    atomic_store(&h->stop, 1);
    pthread_join(h->th, NULL);
    if (h->fd >= 0) /* the thread's own close happened before the join */
        close(h->fd);
    free(h);
}

void tu_httpd_reply(int fd, const char *status, const char *content_type, const char *body, size_t len)
{
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
                      content_type, len);
    if (write(fd, head, (size_t)hl) < 0 || (len && write(fd, body, len) < 0)) {
        /* the client gave up: nothing to do */
    }
}
