/* floor_curl.c: the floor under the client's CPU per token event when the client is libcurl.
 * The same N streaming requests as floor_reader (same body, continuous usage on), driven the
 * way loadgen drives libcurl -- one multi handle on its socket API over one level-triggered
 * epoll set, the easy options loadgen sets (no signals, TCP_NODELAY, HTTP/1.1, a 2 KiB receive
 * buffer, a total and a connect timeout) -- and a write callback that only splits the stream at
 * "\n\n", counting frames. No JSON, no timestamps, no records.
 *
 * So floor.sh can say where the client's CPU per event goes: floor_reader is what the kernel
 * costs (receive, epoll); floor_curl adds what libcurl costs (its state machine, timers,
 * chunked decoding, one extra clock read or two per read); `loadlaw sweep` adds loadlaw's own
 * work (the parse, the stamps, the records). Prints figures; never pass/fail.
 *
 * After every read libcurl 7.88 asks poll(), with a zero timeout, whether the socket has
 * more; loadlaw's client answers that from the read it just made, without a system call
 * (netstamp/include/netstamp.h). This floor links the same recv() and poll() (ll_netstamp) and
 * attaches an ns_rx to its thread as loadgen's workers do, or it would charge libcurl a system
 * call per event that loadlaw does not pay (an earlier version did: strace counted one poll per
 * recv). No socket asks for kernel stamps (ns_rx_enable), so a read carries none: what is left
 * of netstamp's recv() is recvmsg() and one clock read, as in loadlaw. FLOOR_CURL_POLL=1
 * attaches nothing: every recv() and poll() goes straight to the kernel, to see what the
 * shortcut saves.
 *
 *   floor_curl --port P [--host 127.0.0.1] [--conns 256] [--tokens 256] [--model NAME]
 *              [--prompt-words 190]
 * Output: one line of key=value figures, the keys floor_reader prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include <curl/curl.h>

#include "floor_common.h"
#include "netstamp.h"

typedef struct fc_conn {
    CURL *easy;
    int last_nl;     /* the previous byte received was '\n' */
    long frames;
    long reads;      /* write callbacks */
    unsigned long long bytes;
} fc_conn;

typedef struct fc_loop {
    CURLM *multi;
    int ep;
    double timer_at; /* curl's timer (CLOCK_MONOTONIC s), -1 = none */
} fc_loop;

/* The last read netstamp's recv() made on this (the only) thread: the socket it emptied answers
 * libcurl's next zero-timeout poll() on it. Forgotten before each curl call, so only a read
 * of that call answers its poll(). Attached unless FLOOR_CURL_POLL=1. */
static ns_rx rx;

/* The split, as floor_reader's. */
static size_t on_data(char *buf, size_t size, size_t nmemb, void *ud)
{
    fc_conn *x = ud;
    size_t r = size * nmemb;
    x->reads++;
    x->bytes += r;
    x->frames += floor_split(buf, r, &x->last_nl);
    return r;
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e;
    fc_loop *L = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(L->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
                             .data.fd = s};
    if (epoll_ctl(L->ep, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) != 0 &&
        epoll_ctl(L->ep, errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) != 0)
        return -1;
    if (!socketp)
        curl_multi_assign(L->multi, s, L);
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    ((fc_loop *)userp)->timer_at = timeout_ms < 0 ? -1 : floor_now_s() + (double)timeout_ms / 1e3;
    return 0;
}

/* What the run owns: the transfers, their loop and the request they share. */
typedef struct fc_run {
    floor_opts o;
    char url[300];
    char *body;
    fc_conn *c;
    fc_loop L;
    struct curl_slist *h;
} fc_run;

/* libcurl, the request, the multi handle and its epoll set: 0, or 1 after a message. */
static int setup(fc_run *r)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "floor_curl: curl_global_init failed\n");
        return 1;
    }
    snprintf(r->url, sizeof r->url, "http://%s:%d/v1/chat/completions", r->o.host, r->o.port);
    r->body = floor_body(&r->o);
    r->c = calloc((size_t)r->o.conns, sizeof *r->c);
    r->L = (fc_loop){.multi = curl_multi_init(), .ep = epoll_create1(0), .timer_at = -1};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = h ? curl_slist_append(h, "Accept: text/event-stream") : NULL;
    h = h ? curl_slist_append(h, "Expect:") : NULL;
    r->h = h;
    if (!r->body || !r->c || !r->L.multi || r->L.ep < 0 || !h) {
        fprintf(stderr, "floor_curl: out of memory, or curl_multi_init/epoll_create1 failed\n");
        return 1;
    }
    CURLM *multi = r->L.multi;
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, &r->L);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, &r->L);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    return 0;
}

/* One easy handle per connection, with loadgen's options, added to the multi
 * handle: 0, or 1 after a message. Timed: loadgen pays this per request too. */
static int add_transfers(fc_run *r)
{
    for (int i = 0; i < r->o.conns; i++) {
        CURL *e = r->c[i].easy = curl_easy_init();
        if (!e || curl_easy_setopt(e, CURLOPT_URL, r->url) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->h) || curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body) ||
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) ||
            curl_easy_setopt(e, CURLOPT_WRITEDATA, &r->c[i]) ||
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 600000L) ||
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L) ||
            curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) || curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 2048L) ||
            curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) ||
            curl_multi_add_handle(r->L.multi, e) != CURLM_OK) {
            fprintf(stderr, "floor_curl: setting up transfer %d failed\n", i);
            return 1;
        }
    }
    return 0;
}

/* How long epoll may wait: until curl's timer, or 30 s without one. */
static int wait_ms_for(const fc_loop *L)
{
    int wait_ms = 30000;
    if (L->timer_at >= 0) {
        double left = (L->timer_at - floor_now_s()) * 1e3;
        wait_ms = left <= 0 ? 0 : (int)left + 1;
    }
    return wait_ms;
}

/* Hands curl the sockets epoll found ready. */
static void dispatch(fc_loop *L, const struct epoll_event *evs, int n, int *running)
{
    for (int k = 0; k < n; k++) {
        int bits = ((evs[k].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                   ((evs[k].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                   ((evs[k].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        ns_rx_reset(&rx); /* only a read of this call answers its poll() */
        curl_multi_socket_action(L->multi, evs[k].data.fd, bits, running);
    }
}

/* The transfers that finished with an error, each reported. */
static long count_failed(CURLM *multi)
{
    long errors = 0;
    CURLMsg *m;
    int q;
    while ((m = curl_multi_info_read(multi, &q)))
        if (m->msg == CURLMSG_DONE && m->data.result != CURLE_OK) {
            errors++;
            fprintf(stderr, "floor_curl: a transfer failed: %s\n", curl_easy_strerror(m->data.result));
        }
    return errors;
}

/* The event loop, until every transfer has finished or 30 s pass without
 * progress: 0, or 1 when epoll fails (reported). */
static int run_transfers(fc_loop *L, int conns, long *errors)
{
    int running = conns;
    struct epoll_event evs[256];
    while (running > 0) {
        int n = epoll_wait(L->ep, evs, 256, wait_ms_for(L));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "floor_curl: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        int due = L->timer_at >= 0 && floor_now_s() >= L->timer_at;
        if (n == 0 && !due) {
            fprintf(stderr, "floor_curl: no progress for 30 s with %d transfers running\n", running);
            *errors += running;
            break;
        }
        if (due) {
            L->timer_at = -1; /* before the call, which may set the next one */
            ns_rx_reset(&rx);
            curl_multi_socket_action(L->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        dispatch(L, evs, n, &running);
        *errors += count_failed(L->multi);
    }
    return 0;
}

/* Sums the connections' counts (short_streams: those with fewer frames than
 * tokens) and releases their handles. */
static void collect(fc_run *r, long *frames, long *reads, unsigned long long *bytes, long *short_streams)
{
    for (int i = 0; i < r->o.conns; i++) {
        fc_conn *c = &r->c[i];
        *frames += c->frames;
        *reads += c->reads;
        *bytes += c->bytes;
        if (c->frames < r->o.tokens)
            (*short_streams)++;
        curl_multi_remove_handle(r->L.multi, c->easy);
        curl_easy_cleanup(c->easy);
    }
}

int main(int argc, char **argv)
{
    fc_run r = {0};
    int prc = floor_parse("floor_curl", argc, argv, &r.o);
    if (prc)
        return prc;
    if (setup(&r) != 0)
        return 1;
    const char *keep_poll = getenv("FLOOR_CURL_POLL");
    ns_rx_attach(keep_poll && strcmp(keep_poll, "1") == 0 ? NULL : &rx);
    double c0 = floor_cpu_s(), t0 = floor_now_s();
    long errors = 0;
    if (add_transfers(&r) != 0 || run_transfers(&r.L, r.o.conns, &errors) != 0)
        return 1;
    double wall = floor_now_s() - t0, cpu = floor_cpu_s() - c0;
    long frames = 0, reads = 0, short_streams = 0;
    unsigned long long bytes = 0;
    collect(&r, &frames, &reads, &bytes, &short_streams);
    ns_rx_attach(NULL);
    floor_report(&r.o, frames, bytes, reads, wall, cpu, short_streams, errors);
    curl_multi_cleanup(r.L.multi);
    curl_slist_free_all(r.h);
    curl_global_cleanup();
    free(r.c);
    free(r.body);
    return errors || short_streams ? 1 : 0;
}
