/* sse_server.c: see sse_server.h. One accept thread polling a stop flag, one
 * thread per connection (HTTP/1.1 keep-alive, chunked SSE responses), all
 * joined by ts_stop. */
#define _GNU_SOURCE /* strcasestr */
#include "sse_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct ts_server {
    ts_config cfg;
    int lfd;
    char url[64];
    pthread_t acceptor;
    atomic_int stop, open_streams, peak, requests, profile_calls, profile_streams, barrier;
    atomic_int began;              /* streams begun since the barrier was set */
    int total_began;               /* under bmu: streams begun since start */
    int plan_at[8], plan_n[8], n_plan; /* under bmu: ts_set_barrier_plan */
    pthread_mutex_t mu;
    pthread_t *threads;
    size_t n_threads, cap_threads;
    char profile_body[256];
    char auth[2048];               /* under mu */
    char body[4096];               /* under mu: last completion request body */
    char head[4096];               /* under mu: its request line and headers */
    char targets[16384];           /* under mu: "METHOD target\n" of every request */
    atomic_int rejected;
    atomic_int from[256];          /* connections accepted from 127.0.0.i; [0]: from elsewhere */
    pthread_mutex_t bmu;           /* with bcv: the first-token barrier */
    pthread_cond_t bcv;
};

typedef struct conn {
    ts_server *s;
    int fd;
} conn;

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_chunk(int fd, const char *data)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%zx\r\n%s\r\n", strlen(data), data);
    return send_all(fd, buf, (size_t)n);
}

static int send_event(int fd, const char *json)
{
    char buf[900];
    snprintf(buf, sizeof buf, "data: %s\n\n", json);
    return send_chunk(fd, buf);
}

/* An event as its HTTP chunk, appended to b (cap bytes in all); its length. */
static size_t format_event(char *b, size_t cap, const char *json)
{
    char ev[900];
    snprintf(ev, sizeof ev, "data: %s\n\n", json);
    int n = snprintf(b, cap, "%zx\r\n%s\r\n", strlen(ev), ev);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void sleep_us(int us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Read one request; returns body length or -1 when the peer closed. */
static int read_request(int fd, char *buf, size_t cap, char *path, size_t pathcap, char **body, atomic_int *stop)
{
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        if (len + 1 >= cap)
            return -1;
        ssize_t k = recv(fd, buf + len, cap - 1 - len, 0);
        /* A receive timeout lets an idle keep-alive connection notice ts_stop. */
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) && !atomic_load(stop))
            continue;
        if (k <= 0)
            return -1;
        len += (size_t)k;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    size_t cl = 0;
    char *h = strcasestr(buf, "\r\ncontent-length:");
    if (h && h < end)
        cl = strtoul(h + 17, NULL, 10);
    size_t have = len - (size_t)(end + 4 - buf);
    while (have < cl) {
        if (len + 1 >= cap)
            return -1;
        ssize_t k = recv(fd, buf + len, cap - 1 - len, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) && !atomic_load(stop))
            continue;
        if (k <= 0)
            return -1;
        len += (size_t)k;
        have += (size_t)k;
    }
    buf[len] = '\0';
    if (sscanf(buf, "%*s %255s", path) != 1 || pathcap < 256)
        return -1;
    *body = end + 4;
    return (int)cl;
}

static const char k_sse_head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n";

static void stream_begin(ts_server *s)
{
    int n = atomic_fetch_add(&s->open_streams, 1) + 1, p = atomic_load(&s->peak);
    while (n > p && !atomic_compare_exchange_weak(&s->peak, &p, n))
        ;
    pthread_mutex_lock(&s->bmu);
    for (int i = 0; i < s->n_plan; i++)
        if (s->plan_at[i] == s->total_began) {
            atomic_store(&s->began, 0);
            atomic_store(&s->barrier, s->plan_n[i]);
        }
    s->total_began++;
    atomic_fetch_add(&s->began, 1);
    if (atomic_load(&s->barrier) > 0)
        pthread_cond_broadcast(&s->bcv);
    pthread_mutex_unlock(&s->bmu);
}

/* Token chunks: `count` tokens of one kind, with continuous usage. */
static int send_tokens(ts_server *s, int fd, const char *field, int count, int *ct)
{
    int per = s->cfg.tokens_per_chunk > 1 ? s->cfg.tokens_per_chunk : 1;
    char ev[512], pend[2048];
    size_t pend_n = 0;
    for (int i = 0; i < count; i += per) {
        int k = count - i < per ? count - i : per;
        int second = s->cfg.pairs && (i / per) % 2 == 1; /* the second of a pair */
        char text[128] = "";
        for (int j = 0; j < k; j++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%c%d ", field[0], i + j);
        *ct += k;
        char usage[96] = "";
        if (!s->cfg.usage_at_end)
            snprintf(usage, sizeof usage, ",\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}", *ct);
        snprintf(ev, sizeof ev,
                 "{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                 "\"delta\":{\"%s\":\"%s\"},\"finish_reason\":null}]%s}",
                 field, text, usage);
        if (s->cfg.gap_us > 0 && !second)
            sleep_us(s->cfg.gap_us);
        if (s->cfg.pairs && !second && i + per < count) {
            pend_n = format_event(pend, sizeof pend, ev); /* sent with the next one */
            continue;
        }
        if (pend_n) {
            size_t n = format_event(pend + pend_n, sizeof pend - pend_n, ev);
            int bad = !n || send_all(fd, pend, pend_n + n);
            pend_n = 0;
            if (bad)
                return -1;
        } else if (send_event(fd, ev)) {
            return -1;
        }
    }
    return 0;
}

/* Thinking inline in content: "<think>t0 ", "t1 ", ..., "tN </think>", then
 * "a0 ", ...: one token each, packed per chunk across the think/answer
 * boundary, so one chunk can end the thinking and begin the answer. */
static int send_inline(ts_server *s, int fd, int *ct)
{
    int per = s->cfg.tokens_per_chunk > 1 ? s->cfg.tokens_per_chunk : 1;
    int nt = s->cfg.think_tok, n = nt + s->cfg.answer_tok;
    char ev[512];
    for (int i = 0; i < n; i += per) {
        char text[256] = "";
        int k = n - i < per ? n - i : per;
        for (int j = i; j < i + k; j++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%c%d %s",
                     j == 0 && nt ? "<think>" : "", j < nt ? 't' : 'a', j < nt ? j : j - nt,
                     j == nt - 1 ? "</think>" : "");
        *ct += k;
        char usage[96] = "";
        if (!s->cfg.usage_at_end)
            snprintf(usage, sizeof usage, ",\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}", *ct);
        snprintf(ev, sizeof ev, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]%s}", text, usage);
        if (s->cfg.gap_us > 0)
            sleep_us(s->cfg.gap_us);
        if (send_event(fd, ev))
            return -1;
    }
    return 0;
}

/* An event whose data (n bytes, NULs allowed) is sent as it is. */
static int send_event_n(int fd, const char *data, size_t n)
{
    char buf[1024];
    if (n + 32 > sizeof buf)
        return -1;
    int h = snprintf(buf, sizeof buf, "%zx\r\ndata: ", n + 8);
    memcpy(buf + h, data, n);
    memcpy(buf + h + n, "\n\n\r\n", 4);
    return send_all(fd, buf, (size_t)h + n + 4);
}

/* gzip of one content event ("hi") and [DONE], as a server's compressor
 * would send them (Python's gzip.compress, mtime 0). */
static const unsigned char k_gzip_stream[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0x49, 0x2c, 0x49, 0xb4, 0x52, 0xa8, 0x56,
    0x4a, 0xce, 0xc8, 0xcf, 0x4c, 0x4e, 0x2d, 0x56, 0xb2, 0x8a, 0xae, 0x56, 0xca, 0xcc, 0x4b, 0x49, 0xad, 0x50,
    0xb2, 0x32, 0xd0, 0x51, 0x4a, 0x49, 0xcd, 0x29, 0x49, 0x54, 0xb2, 0x02, 0x4a, 0xe7, 0xe7, 0x95, 0xa4, 0xe6,
    0x95, 0x28, 0x59, 0x29, 0x65, 0x64, 0x2a, 0xd5, 0xd6, 0xc6, 0xd6, 0x72, 0x71, 0xa5, 0x80, 0x75, 0x46, 0xbb,
    0xf8, 0xfb, 0xb9, 0xc6, 0x72, 0x71, 0x01, 0x00, 0x16, 0x0e, 0x51, 0x45, 0x48, 0x00, 0x00, 0x00};

/* The modes that misbehave before or instead of an ordinary stream (their
 * head, their encoding): 1 to keep the connection, 0 to close it. */
static int respond_odd_head(int fd, ts_mode mode)
{
    if (mode == TS_GZIP || mode == TS_GZIP_503) {
        char head[256];
        int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: text/event-stream\r\n"
                         "Content-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
                         mode == TS_GZIP ? "200 OK" : "503 Service Unavailable", sizeof k_gzip_stream);
        return send_all(fd, head, (size_t)n) == 0 &&
               send_all(fd, (const char *)k_gzip_stream, sizeof k_gzip_stream) == 0;
    }
    /* headers past a client's limits: 1024 of 1 KB, or one of 1 MiB */
    size_t line = mode == TS_MANY_HEADERS ? 1024 : (1u << 20) + 16, count = mode == TS_MANY_HEADERS ? 1024 : 1;
    char *h = malloc(line * count + 256);
    if (!h)
        return 0;
    size_t n = (size_t)sprintf(h, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n");
    for (size_t i = 0; i < count; i++) {
        int k = sprintf(h + n, "X-Pad-%zu: ", i);
        memset(h + n + k, 'a', line - (size_t)k - 2);
        memcpy(h + n + line - 2, "\r\n", 2);
        n += line;
    }
    n += (size_t)sprintf(h + n, "Content-Length: 14\r\n\r\ndata: [DONE]\n\n");
    (void)send_all(fd, h, n); /* the client may hang up before the end */
    free(h);
    return 0;
}

/* Returns 1 to keep the connection, 0 to close it. */
static int respond(ts_server *s, int fd, ts_mode mode, const char *reqbody)
{
    char ev[256];
    int ct = 0;
    if (s->cfg.reject_cont_usage && strstr(reqbody, "continuous_usage_stats")) {
        /* vLLM-style strict validation error */
        const char *body = "{\"object\":\"error\",\"message\":\"[{'type': 'extra_forbidden', 'loc': "
                           "('body', 'stream_options', 'continuous_usage_stats'), 'msg': 'Extra inputs are "
                           "not permitted'}]\",\"type\":\"BadRequestError\",\"code\":400}";
        char head[256];
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         strlen(body));
        atomic_fetch_add(&s->rejected, 1);
        return send_all(fd, head, (size_t)n) == 0 && send_all(fd, body, strlen(body)) == 0;
    }
    if (mode == TS_JSON_BODY) {
        const char *body = "{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                           "\"message\":{\"role\":\"assistant\",\"content\":\"one two\"},\"finish_reason\":\"stop\"}],"
                           "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}";
        char head[256];
        int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         strlen(body));
        return send_all(fd, head, (size_t)n) == 0 && send_all(fd, body, strlen(body)) == 0;
    }
    if (mode == TS_GZIP || mode == TS_GZIP_503 || mode == TS_MANY_HEADERS || mode == TS_BIG_HEADER)
        return respond_odd_head(fd, mode);
    if (mode == TS_HTTP500 || mode == TS_HTTP429) {
        const char *body = mode == TS_HTTP500
                               ? "{\"error\":{\"message\":\"internal failure\",\"type\":\"server_error\",\"code\":500}}"
                               : "{\"object\":\"error\",\"message\":\"rate limited\",\"type\":\"RateLimitError\",\"code\":429}";
        char head[256];
        int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         mode == TS_HTTP500 ? "500 Internal Server Error" : "429 Too Many Requests", strlen(body));
        return send_all(fd, head, (size_t)n) == 0 && send_all(fd, body, strlen(body)) == 0;
    }
    if (send_all(fd, k_sse_head, sizeof k_sse_head - 1))
        return 0;
    stream_begin(s);
    int keep = 0;
    if (send_event(fd, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],"
                       "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":0}}"))
        goto out;
    if (atomic_load(&s->barrier) > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 30;
        pthread_mutex_lock(&s->bmu);
        while (atomic_load(&s->began) < atomic_load(&s->barrier) && !atomic_load(&s->stop))
            if (pthread_cond_timedwait(&s->bcv, &s->bmu, &until) != 0)
                break; /* timed out: go on rather than hang the test */
        pthread_mutex_unlock(&s->bmu);
    }
    switch (mode) {
    case TS_OK:
        if (s->cfg.hidden_think)
            ct += s->cfg.think_tok; /* reasoned, not streamed */
        if (s->cfg.inline_think ? send_inline(s, fd, &ct)
                                : ((!s->cfg.hidden_think &&
                                    send_tokens(s, fd, "reasoning_content", s->cfg.think_tok, &ct)) ||
                                   send_tokens(s, fd, "content", s->cfg.answer_tok, &ct)))
            goto out;
        snprintf(ev, sizeof ev, "{\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d,"
                                "\"completion_tokens_details\":{\"reasoning_tokens\":%d}}}", ct, s->cfg.think_tok);
        if (send_event(fd, "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}") ||
            (!s->cfg.no_usage && send_event(fd, ev)) || send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    case TS_ERR_NESTED:
    case TS_ERR_FLAT:
        if (send_tokens(s, fd, "content", 2, &ct) ||
            send_event(fd, mode == TS_ERR_NESTED
                               ? "{\"error\":{\"message\":\"KV cache exhausted\",\"type\":\"server_error\"}}"
                               : "{\"object\":\"error\",\"message\":\"worker died\",\"type\":\"InternalServerError\"}") ||
            send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    case TS_BADJSON:
        if (send_tokens(s, fd, "content", 2, &ct) ||
            send_event(fd, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lost ") ||
            send_tokens(s, fd, "content", 2, &ct) || send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    case TS_CTL_BYTE: {
        static const char nul_ev[] = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"n\0ul \"}}]}";
        if (send_tokens(s, fd, "content", 2, &ct) || send_event_n(fd, nul_ev, sizeof nul_ev - 1) ||
            send_tokens(s, fd, "content", 2, &ct) || send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    }
    case TS_DONE_ONLY:
        if (send_event(fd, "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}") ||
            send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    case TS_USAGE_JUMP:
        for (int i = 0; i < 5; i++) {
            snprintf(ev, sizeof ev,
                     "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"j%d \"}}],"
                     "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}}",
                     i, i % 2 ? 0 : 1000000000);
            if (send_event(fd, ev))
                goto out;
        }
        if (send_event(fd, "[DONE]") || send_all(fd, "0\r\n\r\n", 5))
            goto out;
        keep = 1;
        break;
    case TS_CUT:
        send_tokens(s, fd, "content", 2, &ct);
        break; /* close without the terminating chunk */
    case TS_STALL:
        send_tokens(s, fd, "content", 1, &ct);
        for (int i = 0; i < 600 && !atomic_load(&s->stop); i++) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 50) > 0)
                break; /* the client gave up and closed */
        }
        break;
    case TS_ENDLESS: {
        /* HTTP chunks of one unterminated SSE line, until the client hangs up. */
        static char junk[65536 + 16];
        if (send_tokens(s, fd, "content", 1, &ct))
            break;
        int n = snprintf(junk, sizeof junk, "%x\r\n", 65536);
        memset(junk + n, 'x', 65536);
        memcpy(junk + n, "data: ", 6);
        memcpy(junk + n + 65536, "\r\n", 2);
        for (int i = 0; i < 1024; i++) {
            if (send_all(fd, junk, (size_t)n + 65536 + 2))
                break;
            if (i == 0)
                memset(junk + n, 'x', 6); /* later chunks continue the same line */
        }
        break;
    }
    case TS_RESET: {
        send_tokens(s, fd, "content", 1, &ct);
        struct linger lg = {1, 0}; /* close() now sends RST */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        break;
    }
    default:
        break;
    }
out:
    atomic_fetch_sub(&s->open_streams, 1);
    return keep;
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    ts_server *s = c->s;
    char *buf = malloc(65536), path[256], *body = NULL;
    while (buf && !atomic_load(&s->stop)) {
        int bl = read_request(c->fd, buf, 65536, path, sizeof path, &body, &s->stop);
        if (bl < 0)
            break;
        char line[300];
        size_t ml = strcspn(buf, " ");
        int ll = snprintf(line, sizeof line, "%.*s %s\n", (int)(ml < 16 ? ml : 16), buf, path);
        pthread_mutex_lock(&s->mu);
        size_t tl = strlen(s->targets);
        if (ll > 0 && tl + (size_t)ll < sizeof s->targets) /* whole lines only */
            memcpy(s->targets + tl, line, (size_t)ll + 1);
        pthread_mutex_unlock(&s->mu);
        size_t pl = strcspn(path, "?"); /* the path, before a query */
        if (strstr(path, "/start_profile")) {
            snprintf(s->profile_body, sizeof s->profile_body, "%.*s", bl, body);
            atomic_store(&s->profile_streams, atomic_load(&s->open_streams));
            atomic_fetch_add(&s->profile_calls, 1);
            const char *r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
            if (send_all(c->fd, r, strlen(r)))
                break;
            continue;
        }
        if (pl >= 13 && strncmp(path + pl - 13, "/stop_profile", 13) == 0) {
            if (s->cfg.stop_profile_ms > 0)
                sleep_us(s->cfg.stop_profile_ms * 1000);
            const char *r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
            if (send_all(c->fd, r, strlen(r)))
                break;
            continue;
        }
        if (pl >= 8 && strncmp(path + pl - 8, "/metrics", 8) == 0) {
            /* sweep scrapes its target's /metrics (telemetry/scrape.c): a server
             * without one answers 404, and the scrape must not count as a
             * completion request nor replace the last one's head and body. */
            const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            if (send_all(c->fd, r, strlen(r)))
                break;
            continue;
        }
        const char *h = strcasestr(buf, "\r\nauthorization:");
        if (h && h < body) {
            h += 16;
            while (*h == ' ')
                h++;
            size_t n = strcspn(h, "\r\n");
            pthread_mutex_lock(&s->mu);
            snprintf(s->auth, sizeof s->auth, "%.*s", (int)(n < sizeof s->auth ? n : sizeof s->auth - 1), h);
            pthread_mutex_unlock(&s->mu);
        }
        pthread_mutex_lock(&s->mu);
        snprintf(s->body, sizeof s->body, "%.*s", bl, body);
        snprintf(s->head, sizeof s->head, "%.*s", (int)(body - buf), buf);
        pthread_mutex_unlock(&s->mu);
        int no = atomic_fetch_add(&s->requests, 1);
        ts_mode m = s->cfg.mode == TS_MIX ? (ts_mode)(no % 8) : s->cfg.mode;
        if (!respond(s, c->fd, m, body))
            break;
    }
    free(buf);
    close(c->fd);
    free(c);
    return NULL;
}

static void *accept_main(void *arg)
{
    ts_server *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = accept(s->lfd, (struct sockaddr *)&peer, &pl);
        if (fd < 0)
            continue;
        uint32_t ip = pl == sizeof peer && peer.sin_family == AF_INET ? ntohl(peer.sin_addr.s_addr) : 0;
        atomic_fetch_add(&s->from[(ip >> 8) == 0x7f0000 ? ip & 0xff : 0], 1);
        conn *c = malloc(sizeof *c);
        pthread_attr_t at;
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->s = s;
        c->fd = fd;
        struct timeval tv = {0, 200000};
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        /* Like real servers: without it Nagle + delayed ACK coalesce chunks. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256 * 1024);
        pthread_mutex_lock(&s->mu);
        int ok = 0;
        if (s->n_threads == s->cap_threads) {
            size_t nc = s->cap_threads ? s->cap_threads * 2 : 256;
            pthread_t *n = realloc(s->threads, nc * sizeof *n);
            if (n) {
                s->threads = n;
                s->cap_threads = nc;
            }
        }
        if (s->n_threads < s->cap_threads && pthread_create(&t, &at, conn_main, c) == 0) {
            s->threads[s->n_threads++] = t;
            ok = 1;
        }
        pthread_mutex_unlock(&s->mu);
        pthread_attr_destroy(&at);
        if (!ok) {
            close(fd);
            free(c);
        }
    }
    return NULL;
}

int ts_start(const ts_config *cfg, ts_server **out)
{
    ts_server *s = calloc(1, sizeof *s);
    struct sockaddr_in a = {0};
    socklen_t al = sizeof a;
    int one = 1;
    if (!s)
        return -1;
    s->cfg = *cfg;
    atomic_init(&s->barrier, cfg->barrier);
    pthread_mutex_init(&s->bmu, NULL);
    pthread_cond_init(&s->bcv, NULL);
    pthread_mutex_init(&s->mu, NULL);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((s->lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 4096) != 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &al) != 0)
        goto fail;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    if (pthread_create(&s->acceptor, NULL, accept_main, s) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    free(s);
    return -1;
}

const char *ts_url(const ts_server *s) { return s->url; }
int ts_peak_streams(const ts_server *s) { return atomic_load(&s->peak); }
int ts_requests(const ts_server *s) { return atomic_load(&s->requests); }
int ts_profile_calls(const ts_server *s) { return atomic_load(&s->profile_calls); }
int ts_profile_streams(const ts_server *s) { return atomic_load(&s->profile_streams); }
char *ts_profile_body(const ts_server *s) { return (char *)s->profile_body; }
const char *ts_last_auth(const ts_server *s) { return s->auth; }
const char *ts_last_body(const ts_server *s) { return s->body; }
const char *ts_last_head(const ts_server *s) { return s->head; }
int ts_rejected(const ts_server *s) { return atomic_load(&s->rejected); }
int ts_conns_from(const ts_server *s, int i) { return i >= 0 && i < 256 ? atomic_load(&s->from[i]) : 0; }
void ts_targets(ts_server *s, char *out, size_t n)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, n, "%s", s->targets);
    pthread_mutex_unlock(&s->mu);
}
void ts_set_barrier(ts_server *s, int n)
{
    pthread_mutex_lock(&s->bmu);
    atomic_store(&s->began, 0);
    atomic_store(&s->barrier, n);
    pthread_cond_broadcast(&s->bcv);
    pthread_mutex_unlock(&s->bmu);
}

void ts_set_barrier_plan(ts_server *s, const int *at, const int *n, int count)
{
    pthread_mutex_lock(&s->bmu);
    s->n_plan = count < 8 ? count : 8;
    for (int i = 0; i < s->n_plan; i++) {
        s->plan_at[i] = at[i];
        s->plan_n[i] = n[i];
    }
    pthread_mutex_unlock(&s->bmu);
}

void ts_stop(ts_server *s)
{
    atomic_store(&s->stop, 1);
    pthread_mutex_lock(&s->bmu);
    s->n_plan = 0;
    pthread_mutex_unlock(&s->bmu);
    ts_set_barrier(s, 0); /* wakes streams held at the barrier */
    pthread_join(s->acceptor, NULL);
    pthread_mutex_lock(&s->mu);
    size_t n = s->n_threads;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n; i++)
        pthread_join(s->threads[i], NULL);
    close(s->lfd);
    free(s->threads);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->bmu);
    pthread_cond_destroy(&s->bcv);
    free(s);
}
