/* bench_server.c: how many concurrent streams, and token events per second,
 * the bundled engine's server sustains on loopback while its steps stay
 * within 2% of the law.
 *
 * For each level C it starts C streaming chat requests at once from one curl
 * multi handle (in this process, like `loadlaw sweep` with the bundled
 * engine), waits for all of them, and reports: streams completed, token
 * events/s seen by the client, and the error of the engine's steady steps
 * (N == C) against the law: p50/p99 of |actual - law| / law and the share of
 * steps within 2%. law_ev/s is what the law allows at that level, C/step(C):
 * the server keeps up while events/s stays near it. Prints figures only; never pass/fail.
 * The client drives curl with curl_multi_socket_action on epoll, so its cost
 * per event does not grow with the number of streams (curl_multi_perform
 * walks every transfer on each wake-up and would be the bottleneck).
 *
 *   bench_server [--levels 256,1024,4096] [--tokens 64] [--law 2+0.005n] [--time-scale 1]
 *                [--engine KEY=V,..]   (more engine keys, e.g. conn_memory=32768)
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "engine.h"

typedef struct bs_stream {
    int tokens, done;
    long status;
    ll_buf pend;
} bs_stream;

static int64_t g_first_ns, g_last_ns;
static long g_events;

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    bs_stream *s = ud;
    if (ll_buf_append(&s->pend, p, sz * n))
        return 0;
    char *start = s->pend.p, *end;
    while ((end = strstr(start, "\n\n")) != NULL) {
        *end = '\0';
        if (strcmp(start, "data: [DONE]") == 0) {
            s->done = 1;
        } else if (strstr(start, "\"content\":\" ") || strstr(start, "\"reasoning_content\":\" ")) {
            int64_t t = ll_now_ns();
            if (!g_first_ns)
                g_first_ns = t;
            g_last_ns = t;
            g_events++;
            s->tokens++;
        }
        start = end + 2;
    }
    size_t rest = s->pend.len - (size_t)(start - s->pend.p);
    memmove(s->pend.p, start, rest);
    s->pend.len = rest;
    s->pend.p[rest] = '\0';
    return sz * n;
}

typedef struct bs_loop {
    int ep;
    long timeout_ms;   /* from curl's timer callback; -1 = none */
} bs_loop;

static int on_socket(CURL *h, curl_socket_t fd, int what, void *ud, void *sockp)
{
    (void)h;
    (void)sockp;
    bs_loop *L = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(L->ep, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = fd};
    if (epoll_ctl(L->ep, EPOLL_CTL_MOD, fd, &ev) != 0 && epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        return -1;
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *ud)
{
    (void)m;
    ((bs_loop *)ud)->timeout_ms = timeout_ms;
    return 0;
}

static void reap(CURLM *m)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE) {
            bs_stream *s;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &s->status);
        }
}

/* One level's transfers: the multi handle on its epoll loop, an easy handle
 * and a stream per request. */
typedef struct bs_level {
    bs_loop L;
    CURLM *m;
    CURL **h;
    bs_stream *st;
    struct curl_slist *hdr;
    int c;
} bs_level;

/* The c requests added to the multi handle: 0, or -1 (level_close frees what was made). */
static int level_open(bs_level *lv, const char *url, const char *body)
{
    int c = lv->c;
    lv->L = (bs_loop){.ep = epoll_create1(0), .timeout_ms = 0};
    lv->m = curl_multi_init();
    lv->h = calloc((size_t)c, sizeof *lv->h);
    lv->st = calloc((size_t)c, sizeof *lv->st);
    lv->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (lv->L.ep < 0 || !lv->m || !lv->h || !lv->st || !lv->hdr)
        return -1;
    CURLM *m = lv->m;
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)c);
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, &lv->L);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, &lv->L);
    for (int i = 0; i < c; i++) {
        CURL *h = lv->h[i] = curl_easy_init();
        if (!h)
            return -1;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, lv->hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &lv->st[i]);
        curl_easy_setopt(h, CURLOPT_PRIVATE, &lv->st[i]);
        if (curl_multi_add_handle(m, h) != CURLM_OK)
            return -1;
    }
    return 0;
}

/* Hands curl the sockets epoll found ready: 0, or -1 when curl fails. */
static int level_dispatch(CURLM *m, const struct epoll_event *evs, int n, int *running)
{
    for (int i = 0; i < n; i++) {
        int mask = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                   (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                   (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        if (curl_multi_socket_action(m, evs[i].data.fd, mask, running) != CURLM_OK)
            return -1;
    }
    return 0;
}

/* The event loop, until every transfer has finished: 0, or -1 when curl fails. */
static int level_drive(bs_level *lv)
{
    CURLM *m = lv->m;
    int running = lv->c;
    if (curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
        return -1;
    struct epoll_event evs[256];
    while (running > 0) {
        long t = lv->L.timeout_ms;
        int wait_ms = t < 0 ? 1000 : (int)(t > 1000 ? 1000 : t);
        int n = epoll_wait(lv->L.ep, evs, 256, wait_ms);
        if (n < 0)
            continue; /* EINTR */
        if (n == 0 && curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
            return -1;
        if (level_dispatch(m, evs, n, &running) != 0)
            return -1;
        reap(m);
    }
    reap(m);
    return 0;
}

/* Frees the level; the number of streams that ended 200 with [DONE]. */
static int level_close(bs_level *lv)
{
    int ok = 0;
    for (int i = 0; lv->h && lv->st && i < lv->c; i++) {
        ok += lv->st[i].status == 200 && lv->st[i].done;
        if (lv->h[i]) {
            curl_multi_remove_handle(lv->m, lv->h[i]);
            curl_easy_cleanup(lv->h[i]);
        }
        ll_buf_free(&lv->st[i].pend);
    }
    free(lv->h);
    free(lv->st);
    curl_slist_free_all(lv->hdr);
    if (lv->m)
        curl_multi_cleanup(lv->m);
    if (lv->L.ep >= 0)
        close(lv->L.ep);
    return ok;
}

static int run_level(const char *url, const char *body, int c, int *ok_out)
{
    bs_level lv = {.c = c};
    int rc = level_open(&lv, url, body) == 0 && level_drive(&lv) == 0 ? 0 : -1;
    *ok_out = level_close(&lv);
    return rc;
}

/* The command line; levels is malloc'd. */
typedef struct bs_opts {
    const char *levels_s, *law, *scale_s, *more;
    int tokens;
    int *levels;
    size_t nl;
    int maxc; /* the largest level */
} bs_opts;

/* 0, or 2 after a message (an exit status). */
static int parse_args(int argc, char **argv, bs_opts *o)
{
    *o = (bs_opts){.levels_s = "256,1024,4096", .law = "2+0.005n", .scale_s = "1", .more = "", .tokens = 64};
    for (int i = 1; i < argc; i += 2) {
        int64_t v;
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_server: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--levels") == 0)
            o->levels_s = argv[i + 1];
        else if (strcmp(argv[i], "--law") == 0)
            o->law = argv[i + 1];
        else if (strcmp(argv[i], "--time-scale") == 0)
            o->scale_s = argv[i + 1];
        else if (strcmp(argv[i], "--engine") == 0)
            o->more = argv[i + 1];
        else if (strcmp(argv[i], "--tokens") == 0 && ll_parse_int64(argv[i + 1], &v) == 0 && v >= 2 &&
                 v <= 32768)
            o->tokens = (int)v;
        else {
            fprintf(stderr, "usage: %s [--levels L,..] [--tokens N] [--law LAW] [--time-scale X] "
                            "[--engine KEY=V,..]\n", argv[0]);
            return 2;
        }
    }
    if (ll_parse_int_list(o->levels_s, &o->levels, &o->nl) || o->nl == 0 || o->tokens < 2) {
        fprintf(stderr, "bench_server: bad --levels or --tokens\n");
        return 2;
    }
    o->maxc = 0;
    for (size_t i = 0; i < o->nl; i++)
        o->maxc = o->levels[i] > o->maxc ? o->levels[i] : o->maxc;
    return 0;
}

/* The engine on an ephemeral port, room for the largest level: 0, or 1 after a message. */
static int start_engine(const bs_opts *o, eng_config *cfg, eng_engine **e)
{
    char err[256], spec[512];
    eng_config_default(cfg);
    cfg->port = 0;
    snprintf(spec, sizeof spec, "law=%s,time_scale=%s,max_running=%d,prefill_budget=1000000%s%s", o->law,
             o->scale_s, o->maxc, *o->more ? "," : "", o->more);
    if (eng_parse_spec(spec, cfg, err, sizeof err) || eng_start(cfg, e, err, sizeof err)) {
        fprintf(stderr, "bench_server: %s\n", err);
        return 1;
    }
    return 0;
}

static void print_header(const char *prog, const bs_opts *o, eng_engine *e)
{
    printf("command: %s --levels %s --tokens %d --law %s --time-scale %s --engine '%s'\n", prog, o->levels_s,
           o->tokens, o->law, o->scale_s, o->more);
    printf("engine: %s, law %s ms x %s, loopback, client and server in one process\n", eng_url(e), o->law,
           o->scale_s);
    printf("%8s %9s %12s %12s %8s %10s %10s %9s\n", "streams", "completed", "events/s", "law_ev/s",
           "steps", "err_p50", "err_p99", "within2%");
}

/* One row: the level's client figures, and its steady steps (all c decoding)
 * set against the law. */
static void print_level(eng_engine *e, const eng_config *cfg, int c, int ok, size_t from)
{
    size_t to = eng_step_count(e);
    eng_step *log = calloc(to - from + 1, sizeof *log);
    double *errs = calloc(to - from + 1, sizeof *errs);
    size_t got = eng_steps(e, from, log, to - from), ne = 0, within = 0;
    for (size_t i = 0; i < got; i++) {
        if (log[i].n_decode != c || log[i].prefill_tok != 0)
            continue; /* steady steps only: the whole level decoding */
        double law_ns = (cfg->law_a_ms + cfg->law_b_ms * c +
                         cfg->law_c_ms_per_ktok * (double)log[i].ctx_tok / 1000.0) * 1e6 * cfg->time_scale;
        double r = (double)log[i].dur_ns / law_ns - 1.0;
        errs[ne++] = r < 0 ? -r : r;
        within += (r < 0 ? -r : r) <= 0.02;
    }
    ll_sort_doubles(errs, ne);
    double secs = (double)(g_last_ns - g_first_ns) * 1e-9;
    double law_step_s = (cfg->law_a_ms + cfg->law_b_ms * c) * 1e-3 * cfg->time_scale;
    printf("%8d %9d %12.0f %12.0f %8zu", c, ok, secs > 0 ? (double)g_events / secs : 0,
           c / law_step_s, ne);
    if (ne)
        printf(" %9.3f%% %9.3f%% %8.1f%%\n", 100 * ll_quantile_sorted(errs, ne, 0.5),
               100 * ll_quantile_sorted(errs, ne, 0.99), 100.0 * (double)within / (double)ne);
    else /* no step had the whole level decoding: nothing to set against the law */
        printf(" %10s %10s %9s  (no steady step at N=%d: raise --tokens)\n", "-", "-", "-", c);
    fflush(stdout);
    free(log);
    free(errs);
}

int main(int argc, char **argv)
{
    bs_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    eng_config cfg;
    eng_engine *e = NULL;
    if (start_engine(&o, &cfg, &e) != 0)
        return 1;
    print_header(argv[0], &o, e);
    char url[160], body[256];
    snprintf(url, sizeof url, "%s/v1/chat/completions", eng_url(e));
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"bench\"}],\"max_tokens\":%d,"
             "\"ignore_eos\":true,\"stream\":true}", o.tokens);
    for (size_t l = 0; l < o.nl; l++) {
        int c = o.levels[l], ok = 0;
        size_t from = eng_step_count(e);
        g_first_ns = g_last_ns = 0;
        g_events = 0;
        if (run_level(url, body, c, &ok)) {
            fprintf(stderr, "bench_server: level %d: curl multi failed\n", c);
            break;
        }
        print_level(e, &cfg, c, ok, from);
    }
    free(o.levels);
    eng_stop(e);
    eng_config_free(&cfg);
    curl_global_cleanup();
    return 0;
}
