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
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct fr_conn {
    int fd;
    size_t sent;     /* request bytes written so far */
    int last_nl;     /* the previous byte received was '\n' */
    long frames;
} fr_conn;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

/* The request loadgen's xfer.c builds for the chat endpoint with remote defaults. */
static char *build_request(const char *host, int port, const char *model, int tokens, int words, size_t *len)
{
    size_t cap = (size_t)words * 8 + 1024;
    char *body = malloc(cap), *req = malloc(cap + 512);
    if (!body || !req) {
        free(body);
        free(req);
        return NULL;
    }
    int n = snprintf(body, cap, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"", model);
    for (int i = 0; i < words; i++)
        n += snprintf(body + n, cap - (size_t)n, "%sword%d", i ? " " : "", i % 1000);
    n += snprintf(body + n, cap - (size_t)n,
                  "\"}],\"max_tokens\":%d,\"stream_options\":{\"include_usage\":true,"
                  "\"continuous_usage_stats\":true},\"stream\":true}",
                  tokens);
    int m = snprintf(req, cap + 512,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Accept: text/event-stream\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
                     host, port, n, body);
    free(body);
    *len = (size_t)m;
    return req;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *model = "loadlaw-synthetic";
    int port = 0, conns = 256, tokens = 256, words = 190;
    /* Options as a table: each takes one value, numbers checked whole with strtol. */
    struct {
        const char *name;
        int *num;
        const char **str;
    } opt[] = {{"--port", &port, NULL},   {"--conns", &conns, NULL}, {"--tokens", &tokens, NULL},
               {"--prompt-words", &words, NULL}, {"--host", NULL, &host}, {"--model", NULL, &model}};
    for (int i = 1; i < argc; i += 2) {
        size_t k = 0;
        while (k < sizeof opt / sizeof opt[0] && strcmp(argv[i], opt[k].name) != 0)
            k++;
        if (k == sizeof opt / sizeof opt[0] || i + 1 >= argc) {
            fprintf(stderr, "floor_reader: unknown option or missing value: %s\n", argv[i]);
            return 2;
        }
        if (opt[k].str) {
            *opt[k].str = argv[i + 1];
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(argv[i + 1], &end, 10);
        if (errno || *end || end == argv[i + 1] || v < 0 || v > 1000000000L) {
            fprintf(stderr, "floor_reader: %s wants a whole number, not '%s'\n", argv[i], argv[i + 1]);
            return 2;
        }
        *opt[k].num = (int)v;
    }
    if (port <= 0 || conns <= 0 || tokens <= 0) {
        fprintf(stderr, "usage: floor_reader --port P [--host H] [--conns N] [--tokens T] [--model M]\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    size_t req_len = 0;
    char *req = build_request(host, port, model, tokens, words, &req_len);
    fr_conn *c = calloc((size_t)conns, sizeof *c);
    char *buf = malloc(65536);
    int ep = epoll_create1(0);
    if (!req || !c || !buf || ep < 0) {
        fprintf(stderr, "floor_reader: out of memory or epoll_create1 failed\n");
        return 1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_reader: --host must be an IPv4 address\n");
        return 2;
    }
    double c0 = cpu_s(), t0 = now_s();
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
            /* The split: a frame ends at "\n\n"; memchr finds each '\n' at libc speed. */
            const char *p = buf, *end = buf + r;
            if (x->last_nl && *p == '\n') {
                x->frames++;
                p++;
            }
            x->last_nl = 0;
            while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl)
                    break;
                if (nl + 1 == end) {
                    x->last_nl = 1;
                    break;
                }
                if (nl[1] == '\n') {
                    x->frames++;
                    p = nl + 2;
                } else {
                    p = nl + 1;
                }
            }
        }
    }
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    long short_streams = 0;
    for (int i = 0; i < conns; i++) {
        frames += c[i].frames;
        if (c[i].frames < tokens)
            short_streams++;
    }
    long tok_events = (long)conns * tokens;
    printf("conns=%d tokens=%d frames=%ld frames_per_stream=%.2f token_events=%ld bytes=%llu "
           "bytes_per_frame=%.1f reads=%ld frames_per_read=%.2f wall_s=%.4f cpu_s=%.4f "
           "cpu_us_per_token_event=%.4f token_events_per_s=%.0f short_streams=%ld errors=%ld\n",
           conns, tokens, frames, (double)frames / conns, tok_events, bytes, (double)bytes / (double)frames,
           reads, (double)frames / (double)reads, wall, cpu, cpu / (double)tok_events * 1e6,
           (double)tok_events / wall, short_streams, errors);
    free(buf);
    free(c);
    free(req);
    close(ep);
    return errors || short_streams ? 1 : 0;
}
