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

/* The request loadgen's xfer.c sends for the chat endpoint with remote defaults. */
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

int main(int argc, char **argv)
{
    floor_opts o;
    int prc = floor_parse("floor_reader", argc, argv, &o);
    if (prc)
        return prc;
    int conns = o.conns, tokens = o.tokens;
    size_t req_len = 0;
    char *req = build_request(&o, &req_len);
    fr_conn *c = calloc((size_t)conns, sizeof *c);
    char *buf = malloc(65536);
    int ep = epoll_create1(0);
    if (!req || !c || !buf || ep < 0) {
        fprintf(stderr, "floor_reader: out of memory or epoll_create1 failed\n");
        return 1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    if (inet_pton(AF_INET, o.host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_reader: --host must be an IPv4 address\n");
        return 2;
    }
    double c0 = floor_cpu_s(), t0 = floor_now_s();
    for (int i = 0; i < conns; i++) {
        c[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (c[i].fd < 0) {
            fprintf(stderr, "floor_reader: socket %d: %s\n", i, strerror(errno));
            return 1;
        }
        int one = 1;
        setsockopt(c[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
            fprintf(stderr, "floor_reader: connect %d: %s\n", i, strerror(errno));
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev) != 0) {
            fprintf(stderr, "floor_reader: epoll_ctl: %s\n", strerror(errno));
            return 1;
        }
    }
    long frames = 0, errors = 0, reads = 0;
    unsigned long long bytes = 0;
    int open_n = conns;
    struct epoll_event evs[256];
    while (open_n > 0) {
        int n = epoll_wait(ep, evs, 256, 30000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "floor_reader: no progress for 30 s with %d connections open\n", open_n);
            errors += open_n;
            break;
        }
        for (int k = 0; k < n; k++) {
            fr_conn *x = &c[evs[k].data.u32];
            if (x->fd < 0)
                continue;
            if ((evs[k].events & EPOLLOUT) && x->sent < req_len) {
                ssize_t w = write(x->fd, req + x->sent, req_len - x->sent);
                if (w > 0)
                    x->sent += (size_t)w;
                else if (w < 0 && errno != EAGAIN) {
                    errors++;
                    close(x->fd);
                    x->fd = -1;
                    open_n--;
                    continue;
                }
                if (x->sent == req_len) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[k].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, x->fd, &ev);
                }
            }
            if (!(evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            ssize_t r = read(x->fd, buf, 65536);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                if (r < 0)
                    errors++;
                close(x->fd);
                x->fd = -1;
                open_n--;
                continue;
            }
            reads++;
            bytes += (unsigned long long)r;
            x->frames += floor_split(buf, (size_t)r, &x->last_nl);
        }
    }
    double wall = floor_now_s() - t0, cpu = floor_cpu_s() - c0;
    long short_streams = 0;
    for (int i = 0; i < conns; i++) {
        frames += c[i].frames;
        if (c[i].frames < tokens)
            short_streams++;
    }
    floor_report(&o, frames, bytes, reads, wall, cpu, short_streams, errors);
    free(buf);
    free(c);
    free(req);
    close(ep);
    return errors || short_streams ? 1 : 0;
}
