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
 *   floor_curl --port P [--host 127.0.0.1] [--conns 256] [--tokens 256] [--model NAME]
 *              [--prompt-words 190]
 * Output: one line of key=value figures, the keys floor_reader prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

#include <curl/curl.h>

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

/* The body loadgen's xfer.c builds for the chat endpoint with remote defaults (as floor_reader). */
static char *build_body(const char *model, int tokens, int words)
{
    size_t cap = (size_t)words * 8 + 1024;
    char *body = malloc(cap);
    if (!body)
        return NULL;
    int n = snprintf(body, cap, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"", model);
    for (int i = 0; i < words; i++)
        n += snprintf(body + n, cap - (size_t)n, "%sword%d", i ? " " : "", i % 1000);
    snprintf(body + n, cap - (size_t)n,
             "\"}],\"max_tokens\":%d,\"stream_options\":{\"include_usage\":true,"
             "\"continuous_usage_stats\":true},\"stream\":true}",
             tokens);
    return body;
}

/* The split, as floor_reader's: a frame ends at "\n\n". */
static size_t on_data(char *buf, size_t size, size_t nmemb, void *ud)
{
    fc_conn *x = ud;
    size_t r = size * nmemb;
    x->reads++;
    x->bytes += r;
    if (r == 0)
        return 0;
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
    ((fc_loop *)userp)->timer_at = timeout_ms < 0 ? -1 : now_s() + (double)timeout_ms / 1e3;
    return 0;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *model = "loadlaw-synthetic";
    int port = 0, conns = 256, tokens = 256, words = 190;
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
            fprintf(stderr, "floor_curl: unknown option or missing value: %s\n", argv[i]);
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
            fprintf(stderr, "floor_curl: %s wants a whole number, not '%s'\n", argv[i], argv[i + 1]);
            return 2;
        }
        *opt[k].num = (int)v;
    }
    if (port <= 0 || conns <= 0 || tokens <= 0) {
        fprintf(stderr, "usage: floor_curl --port P [--host H] [--conns N] [--tokens T] [--model M]\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "floor_curl: curl_global_init failed\n");
        return 1;
    }
    char url[300];
    snprintf(url, sizeof url, "http://%s:%d/v1/chat/completions", host, port);
    char *body = build_body(model, tokens, words);
    fc_conn *c = calloc((size_t)conns, sizeof *c);
    fc_loop L = {.multi = curl_multi_init(), .ep = epoll_create1(0), .timer_at = -1};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = h ? curl_slist_append(h, "Accept: text/event-stream") : NULL;
    h = h ? curl_slist_append(h, "Expect:") : NULL;
    if (!body || !c || !L.multi || L.ep < 0 || !h) {
        fprintf(stderr, "floor_curl: out of memory, or curl_multi_init/epoll_create1 failed\n");
        return 1;
    }
    curl_multi_setopt(L.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(L.multi, CURLMOPT_SOCKETDATA, &L);
    curl_multi_setopt(L.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(L.multi, CURLMOPT_TIMERDATA, &L);
    curl_multi_setopt(L.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    curl_multi_setopt(L.multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    double c0 = cpu_s(), t0 = now_s();
    for (int i = 0; i < conns; i++) {
        CURL *e = c[i].easy = curl_easy_init();
        if (!e || curl_easy_setopt(e, CURLOPT_URL, url) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, h) || curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) ||
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) || curl_easy_setopt(e, CURLOPT_WRITEDATA, &c[i]) ||
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 600000L) ||
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L) ||
            curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) || curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 2048L) ||
            curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) ||
            curl_multi_add_handle(L.multi, e) != CURLM_OK) {
            fprintf(stderr, "floor_curl: setting up transfer %d failed\n", i);
            return 1;
        }
    }
    long errors = 0;
    int running = conns;
    struct epoll_event evs[256];
    while (running > 0) {
        int wait_ms = 30000;
        if (L.timer_at >= 0) {
            double left = (L.timer_at - now_s()) * 1e3;
            wait_ms = left <= 0 ? 0 : (int)left + 1;
        }
        int n = epoll_wait(L.ep, evs, 256, wait_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "floor_curl: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        int due = L.timer_at >= 0 && now_s() >= L.timer_at;
        if (n == 0 && !due) {
            fprintf(stderr, "floor_curl: no progress for 30 s with %d transfers running\n", running);
            errors += running;
            break;
        }
        if (due) {
            L.timer_at = -1; /* before the call, which may set the next one */
            curl_multi_socket_action(L.multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        for (int k = 0; k < n; k++) {
            int bits = ((evs[k].events & EPOLLIN) ? CURL_CSELECT_IN : 0) | ((evs[k].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                       ((evs[k].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(L.multi, evs[k].data.fd, bits, &running);
        }
        CURLMsg *m;
        int q;
        while ((m = curl_multi_info_read(L.multi, &q)))
            if (m->msg == CURLMSG_DONE && m->data.result != CURLE_OK) {
                errors++;
                fprintf(stderr, "floor_curl: a transfer failed: %s\n", curl_easy_strerror(m->data.result));
            }
    }
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    long frames = 0, reads = 0, short_streams = 0;
    unsigned long long bytes = 0;
    for (int i = 0; i < conns; i++) {
        frames += c[i].frames;
        reads += c[i].reads;
        bytes += c[i].bytes;
        if (c[i].frames < tokens)
            short_streams++;
        curl_multi_remove_handle(L.multi, c[i].easy);
        curl_easy_cleanup(c[i].easy);
    }
    long tok_events = (long)conns * tokens;
    printf("conns=%d tokens=%d frames=%ld frames_per_stream=%.2f token_events=%ld bytes=%llu "
           "bytes_per_frame=%.1f reads=%ld frames_per_read=%.2f wall_s=%.4f cpu_s=%.4f "
           "cpu_us_per_token_event=%.4f token_events_per_s=%.0f short_streams=%ld errors=%ld\n",
           conns, tokens, frames, (double)frames / conns, tok_events, bytes, (double)bytes / (double)frames,
           reads, (double)frames / (double)reads, wall, cpu, cpu / (double)tok_events * 1e6,
           (double)tok_events / wall, short_streams, errors);
    curl_multi_cleanup(L.multi);
    curl_slist_free_all(h);
    curl_global_cleanup();
    free(c);
    free(body);
    return errors || short_streams ? 1 : 0;
}
