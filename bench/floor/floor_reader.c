/* floor_reader.c: the floor under the client's CPU per token event. A bare epoll reader that
 * opens N loopback connections to an OpenAI-compatible server, sends each the same streaming
 * chat request `loadlaw sweep --url` sends (same keys, continuous usage on), and then only
 * receives and splits the stream at "\n\n", counting frames. No JSON, no timestamps, no
 * records: whatever `loadlaw sweep` spends per event above this is the price of what it does
 * with the event. Prints figures; never pass/fail.
 *
 * DESIGN: one thread, one epoll set, level-triggered, 64 KiB reads. The "\n\n" split keeps one
 * bit of state per connection (was the last byte '\n'), so a frame cut across two reads is
 * still counted once. Each request says `Connection: close`; a connection ends when the server
 * closes it. CPU is the process's own (getrusage), from before the first connect to after the
 * last close.
 *
 *   floor_reader --port P [--host 127.0.0.1] [--conns 256] [--tokens 256] [--model NAME]
 *                [--prompt-words 190]
 * Output: one line of key=value figures (frames, token_events, bytes, wall_s, cpu_s, ...).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor_common.h"

typedef struct fr_conn {
    int fd;
    size_t sent;     /* request bytes written so far */
    int last_nl;     /* the previous byte received was '\n' */
    long frames;
} fr_conn;

/* The request loadgen's xfer_body.c builds for the chat endpoint with remote defaults. */
static char *build_request(const floor_opts *o, size_t *len)
{
    char *body = floor_body(o);
    size_t cap = body ? strlen(body) + 512 : 0;
    char *req = body ? malloc(cap) : NULL;
    if (!req) {
        free(body);
        return NULL;
    }
    int m = snprintf(req, cap,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Accept: text/event-stream\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     o->host, o->port, strlen(body), body);
    free(body);
    *len = (size_t)m;
    return req;
}

/* The run: the connections, their epoll set, the request each sends, the read
 * buffer, and the counts the loop keeps. */
typedef struct fr_run {
    fr_conn *c;
    int conns, ep, open_n;
    char *req, *buf;
    size_t req_len;
    long errors, reads;
    unsigned long long bytes;
} fr_run;

/* A non-blocking connect per connection, each watched for writing and reading:
 * 0, or 1 after a message. */
static int open_conns(fr_run *r, const struct sockaddr_in *sa)
{
    for (int i = 0; i < r->conns; i++) {
        fr_conn *x = &r->c[i];
        x->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (x->fd < 0) {
            fprintf(stderr, "floor_reader: socket %d: %s\n", i, strerror(errno));
            return 1;
        }
        int one = 1;
        setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(x->fd, (const struct sockaddr *)sa, sizeof *sa) != 0 && errno != EINPROGRESS) {
            fprintf(stderr, "floor_reader: connect %d: %s\n", i, strerror(errno));
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, x->fd, &ev) != 0) {
            fprintf(stderr, "floor_reader: epoll_ctl: %s\n", strerror(errno));
            return 1;
        }
    }
    return 0;
}

static void close_conn(fr_run *r, fr_conn *x)
{
    close(x->fd);
    x->fd = -1;
    r->open_n--;
}

/* More of the request; once it is all out, the connection is watched for
 * reading only. 0, or -1 when the write failed (the connection is closed). */
static int send_more(fr_run *r, fr_conn *x, uint32_t id)
{
    ssize_t w = write(x->fd, r->req + x->sent, r->req_len - x->sent);
    if (w > 0)
        x->sent += (size_t)w;
    else if (w < 0 && errno != EAGAIN) {
        r->errors++;
        close_conn(r, x);
        return -1;
    }
    if (x->sent == r->req_len) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = id};
        epoll_ctl(r->ep, EPOLL_CTL_MOD, x->fd, &ev);
    }
    return 0;
}

/* One read, split into frames; end of stream or an error closes the connection. */
static void receive_more(fr_run *r, fr_conn *x)
{
    ssize_t n = read(x->fd, r->buf, 65536);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        if (n < 0)
            r->errors++;
        close_conn(r, x);
        return;
    }
    r->reads++;
    r->bytes += (unsigned long long)n;
    x->frames += floor_split(r->buf, (size_t)n, &x->last_nl);
}

static void handle_event(fr_run *r, const struct epoll_event *ev)
{
    fr_conn *x = &r->c[ev->data.u32];
    if (x->fd < 0)
        return;
    if ((ev->events & EPOLLOUT) && x->sent < r->req_len && send_more(r, x, ev->data.u32) != 0)
        return;
    if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        receive_more(r, x);
}

/* Until every connection has closed, or 30 s pass without an event. */
static void run_loop(fr_run *r)
{
    struct epoll_event evs[256];
    while (r->open_n > 0) {
        int n = epoll_wait(r->ep, evs, 256, 30000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "floor_reader: no progress for 30 s with %d connections open\n", r->open_n);
            r->errors += r->open_n;
            break;
        }
        for (int k = 0; k < n; k++)
            handle_event(r, &evs[k]);
    }
}

int main(int argc, char **argv)
{
    floor_opts o;
    int prc = floor_parse("floor_reader", argc, argv, &o);
    if (prc)
        return prc;
    fr_run r = {.conns = o.conns, .open_n = o.conns};
    r.req = build_request(&o, &r.req_len);
    r.c = calloc((size_t)o.conns, sizeof *r.c);
    r.buf = malloc(65536);
    r.ep = epoll_create1(0);
    if (!r.req || !r.c || !r.buf || r.ep < 0) {
        fprintf(stderr, "floor_reader: out of memory or epoll_create1 failed\n");
        return 1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    if (inet_pton(AF_INET, o.host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_reader: --host must be an IPv4 address\n");
        return 2;
    }
    double c0 = floor_cpu_s(), t0 = floor_now_s();
    if (open_conns(&r, &sa) != 0)
        return 1;
    run_loop(&r);
    double wall = floor_now_s() - t0, cpu = floor_cpu_s() - c0;
    long frames = 0, short_streams = 0;
    for (int i = 0; i < r.conns; i++) {
        frames += r.c[i].frames;
        if (r.c[i].frames < o.tokens)
            short_streams++;
    }
    floor_report(&o, frames, r.bytes, r.reads, wall, cpu, short_streams, r.errors);
    free(r.buf);
    free(r.c);
    free(r.req);
    close(r.ep);
    return r.errors || short_streams ? 1 : 0;
}
