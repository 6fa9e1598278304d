/* tclient.c: libcurl helpers for the engine tests (see tclient.h). */
#include "tclient.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

/* A request's time limit: a safety net against a hung server, far above
 * what a request takes. TC_TIMEOUT_S raises it where the engine runs slowly
 * on purpose (the CUDA backend on cuemu, under the sanitizers, on a busy CI
 * host: tests/engine/backends/CMakeLists.txt, tests/cuda_engine/CMakeLists.txt). */
static long tc_timeout_s(long dflt)
{
    const char *v = getenv("TC_TIMEOUT_S");
    long t = v ? strtol(v, NULL, 10) : 0;
    return t > dflt ? t : dflt;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    return ll_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    tc_resp *r = ud;
    size_t len = sz * n;
    if (len > 6 && strncasecmp(p, "Allow:", 6) == 0) {
        size_t i = 6;
        while (i < len && p[i] == ' ')
            i++;
        size_t k = 0;
        while (i < len && p[i] != '\r' && p[i] != '\n' && k + 1 < sizeof r->allow)
            r->allow[k++] = p[i++];
        r->allow[k] = '\0';
    }
    return len;
}

int tc_request(const char *method, const char *url, const char *body, long body_len, tc_resp *out)
{
    return tc_request_hdr(method, url, body, body_len, NULL, out);
}

int tc_request_hdr(const char *method, const char *url, const char *body, long body_len,
                   const char *header, tc_resp *out)
{
    memset(out, 0, sizeof *out);
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (hdr && header)
        hdr = curl_slist_append(hdr, header);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, tc_timeout_s(60));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, body ? (body_len < 0 ? (long)strlen(body) : body_len) : 0L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    out->curl_rc = (int)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (!out->body.p)
        ll_buf_append(&out->body, "", 0);
    return out->curl_rc == CURLE_OK ? 0 : -1;
}

void tc_resp_free(tc_resp *r) { ll_buf_free(&r->body); }

long tc_http(const char *method, const char *url, const char *body, ll_buf *out)
{
    tc_resp r;
    tc_request(method, url, body, -1, &r);
    ll_buf_free(out);
    *out = r.body; /* moved */
    return r.status;
}

long tc_completion(const char *base_url, int max_tokens, int *completion_tokens)
{
    char url[256], body[256];
    snprintf(url, sizeof url, "%s/v1/completions", base_url);
    snprintf(body, sizeof body,
             "{\"prompt\":\"the quick brown fox jumps over the lazy dog\",\"max_tokens\":%d,"
             "\"ignore_eos\":true}", max_tokens);
    tc_resp r;
    tc_request("POST", url, body, -1, &r);
    if (completion_tokens) {
        cJSON *j = r.body.p ? cJSON_ParseWithOpts(r.body.p, NULL, 0) : NULL;
        cJSON *u = j ? cJSON_GetObjectItemCaseSensitive(j, "usage") : NULL;
        *completion_tokens = (int)ll_json_i64(u, "completion_tokens", -1);
        cJSON_Delete(j);
    }
    tc_resp_free(&r);
    return r.status;
}

int tc_sse_split(const char *body, tc_events *ev)
{
    memset(ev, 0, sizeof *ev);
    const char *p = body;
    while (p && *p) {
        const char *end = strstr(p, "\n\n");
        if (!end)
            return -1; /* an event without its terminating blank line */
        if (strncmp(p, "data: ", 6) != 0)
            return -1;
        size_t len = (size_t)(end - p - 6);
        char **nd = realloc(ev->data, (ev->n + 1) * sizeof *nd);
        if (!nd)
            return -1;
        ev->data = nd;
        ev->data[ev->n] = strndup(p + 6, len);
        if (!ev->data[ev->n])
            return -1;
        ev->n++;
        p = end + 2;
    }
    return 0;
}

void tc_events_free(tc_events *ev)
{
    for (size_t i = 0; i < ev->n; i++)
        free(ev->data[i]);
    free(ev->data);
    memset(ev, 0, sizeof *ev);
}

int tc_count_words(const char *s)
{
    int n = 0, in = 0;
    for (; s && *s; s++) {
        int sp = isspace((unsigned char)*s);
        if (!sp && !in)
            n++;
        in = !sp;
    }
    return n;
}

eng_engine *tc_start(const char *spec)
{
    eng_config cfg;
    char err[256];
    eng_engine *e = NULL;
    eng_config_default(&cfg);
    cfg.port = 0;
    int rc = eng_parse_spec(spec, &cfg, err, sizeof err);
    if (rc == 0)
        rc = eng_start(&cfg, &e, err, sizeof err); /* the engine keeps its own copy */
    eng_config_free(&cfg);
    if (rc != 0) {
        fprintf(stderr, "cannot start engine \"%s\": %s\n", spec, err);
        exit(1);
    }
    return e;
}

static size_t on_stream(char *p, size_t sz, size_t n, void *ud)
{
    tc_stream *s = ud;
    if (ll_buf_append(&s->pending, p, sz * n))
        return 0;
    char *start = s->pending.p, *end;
    while ((end = strstr(start, "\n\n")) != NULL) {
        *end = '\0';
        if (strcmp(start, "data: [DONE]") == 0)
            s->done = 1;
        else if (strstr(start, "\"content\":\" ") || strstr(start, "\"reasoning_content\":\" ") ||
                 strstr(start, "\"text\":\" ") || strstr(start, "\"text\":\"<think> "))
            s->tokens++;
        start = end + 2;
    }
    size_t rest = s->pending.len - (size_t)(start - s->pending.p);
    memmove(s->pending.p, start, rest);
    s->pending.len = rest;
    s->pending.p[rest] = '\0';
    return sz * n;
}

/* The body of a held stream (tc_streams_together): nothing (a pause) until
 * the stream is released, then the body. */
static size_t on_upload(char *p, size_t sz, size_t n, void *ud)
{
    tc_stream *s = ud;
    if (!s->released_) {
        s->ready_ = 1; /* connected, headers out: curl asks for the body */
        return CURL_READFUNC_PAUSE;
    }
    size_t k = s->body_len_ - s->body_off_;
    if (k > sz * n)
        k = sz * n;
    memcpy(p, s->body_ + s->body_off_, k);
    s->body_off_ += k;
    return k;
}

static int streams_run(const char *url, const char *body, int n, tc_stream *out, int together)
{
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)n, sizeof *h);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    int rc = -1, held = together ? n : 0;
    memset(out, 0, (size_t)n * sizeof *out);
    if (hdr && together)
        hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
    if (!m || !h || !hdr)
        goto out;
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)n);
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    for (int i = 0; i < n; i++) {
        h[i] = curl_easy_init();
        if (!h[i])
            goto out;
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT, tc_timeout_s(120));
        if (together) {
            out[i].body_ = body;
            out[i].body_len_ = strlen(body);
            curl_easy_setopt(h[i], CURLOPT_POST, 1L);
            curl_easy_setopt(h[i], CURLOPT_POSTFIELDSIZE, (long)out[i].body_len_);
            curl_easy_setopt(h[i], CURLOPT_READFUNCTION, on_upload);
            curl_easy_setopt(h[i], CURLOPT_READDATA, &out[i]);
        } else {
            curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, body);
        }
        curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, on_stream);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &out[i]);
        curl_easy_setopt(h[i], CURLOPT_PRIVATE, &out[i]);
        if (curl_multi_add_handle(m, h[i]) != CURLM_OK)
            goto out;
    }
    int running = n;
    while (running > 0) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            goto out;
        if (running > 0 && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
            goto out;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            tc_stream *s;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            s->curl_rc = (int)msg->data.result;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &s->status);
            s->ready_ = 1; /* a transfer that failed before its body holds nothing up */
        }
        /* every stream held (or ended): release them all at once */
        int ready = 0;
        for (int i = 0; held && i < n; i++)
            ready += out[i].ready_;
        if (held && ready == n) {
            for (int i = 0; i < n; i++) {
                out[i].released_ = 1;
                if (curl_easy_pause(h[i], CURLPAUSE_CONT) != CURLE_OK)
                    goto out;
            }
            held = 0;
        }
    }
    rc = 0;
out:
    for (int i = 0; h && i < n; i++) {
        if (h[i]) {
            curl_multi_remove_handle(m, h[i]);
            curl_easy_cleanup(h[i]);
        }
        ll_buf_free(&out[i].pending);
    }
    free(h);
    curl_slist_free_all(hdr);
    if (m)
        curl_multi_cleanup(m);
    return rc;
}

int tc_streams(const char *url, const char *body, int n, tc_stream *out)
{
    return streams_run(url, body, n, out, 0);
}

int tc_streams_together(const char *url, const char *body, int n, tc_stream *out)
{
    return streams_run(url, body, n, out, 1);
}

static void *bg_main(void *arg)
{
    tc_bg *b = arg;
    tc_request("POST", b->url, b->body, -1, &b->resp);
    return NULL;
}

void tc_bg_start(tc_bg *b, const char *url, const char *body)
{
    b->url = url;
    b->body = body;
    if (pthread_create(&b->th, NULL, bg_main, b) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
}

void tc_bg_join(tc_bg *b) { pthread_join(b->th, NULL); }

int tc_stream_tokens(const char *body)
{
    tc_events ev;
    int n = 0, done = 0;
    if (tc_sse_split(body, &ev) != 0) {
        tc_events_free(&ev);
        return -1;
    }
    for (size_t i = 0; i < ev.n; i++) {
        if (strstr(ev.data[i], "\"content\":\" ") || strstr(ev.data[i], "\"text\":\" "))
            n++;
        if (strcmp(ev.data[i], "[DONE]") == 0)
            done = 1;
    }
    tc_events_free(&ev);
    return done ? n : -1;
}

double tc_metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

double tc_wait_metric(const char *metrics_url, const char *name, double want, double timeout_s)
{
    int64_t end = ll_now_ns() + (int64_t)(timeout_s * 1e9);
    double v;
    for (;;) {
        tc_resp r;
        tc_request("GET", metrics_url, NULL, 0, &r);
        v = r.status == 200 ? tc_metric(r.body.p, name) : -1;
        tc_resp_free(&r);
        if (v == want || ll_now_ns() >= end)
            return v;
        usleep(2000);
    }
}

typedef struct tc_par {
    const char *url;
    int max_tokens, tokens;
    long status;
} tc_par;

static void *tc_par_main(void *p)
{
    tc_par *a = p;
    a->status = tc_completion(a->url, a->max_tokens, &a->tokens);
    return NULL;
}

int tc_completions_parallel(const char *base_url, int n, int max_tokens0, long *status, int *tokens)
{
    tc_par *a = calloc((size_t)n, sizeof *a);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    char *ok = calloc((size_t)n, 1);
    int rc = a && th && ok ? 0 : -1;
    for (int i = 0; !rc && i < n; i++) {
        a[i] = (tc_par){.url = base_url, .max_tokens = max_tokens0 + i, .tokens = -1};
        ok[i] = pthread_create(&th[i], NULL, tc_par_main, &a[i]) == 0;
        rc = ok[i] ? 0 : -1;
    }
    for (int i = 0; i < n && a && th && ok; i++) {
        if (ok[i])
            pthread_join(th[i], NULL);
        status[i] = a[i].status;
        tokens[i] = a[i].tokens;
    }
    free(a);
    free(th);
    free(ok);
    return rc;
}

cJSON *tc_profile_trace(const char *base_url, int max_tokens, char *why, size_t whylen)
{
    static unsigned calls;
    char url[256], body[320], path[600] = "";
    cJSON *trace = NULL, *ans = NULL;
    ll_buf b = {0};
    char *text = NULL;
    size_t len = 0;
    int got = -1;
    snprintf(url, sizeof url, "%s/start_profile", base_url);
    /* a request names a plain folder under the engine's profile_dir (the
     * engine makes it) */
    snprintf(body, sizeof body, "{\"output_dir\":\"loadlaw-tctrace-%d-%u\"}", (int)getpid(), ++calls);
    long st = tc_http("POST", url, body, &b);
    if (st != 200) {
        snprintf(why, whylen, "start_profile: %ld %s", st, b.p ? b.p : "");
        goto out;
    }
    if ((st = tc_completion(base_url, max_tokens, &got)) != 200 || got != max_tokens) {
        snprintf(why, whylen, "the request while profiling: %ld, %d tokens", st, got);
        goto out;
    }
    snprintf(url, sizeof url, "%s/stop_profile", base_url);
    if ((st = tc_http("POST", url, "", &b)) != 200) {
        snprintf(why, whylen, "stop_profile: %ld %s", st, b.p ? b.p : "");
        goto out;
    }
    ans = b.p ? cJSON_Parse(b.p) : NULL;
    snprintf(path, sizeof path, "%s", ll_json_str(ans, "path", ""));
    char err[256] = "";
    if (ll_read_file(path, &text, &len, err, sizeof err) != 0)
        snprintf(why, whylen, "trace %s: %s", path, err);
    else if (!(trace = cJSON_Parse(text)))
        snprintf(why, whylen, "trace %s: not JSON", path);
    char *slash = strrchr(path, '/');
    if (*path && unlink(path) == 0 && slash) {
        *slash = '\0';
        rmdir(path); /* the folder named above */
    }
out:
    cJSON_Delete(ans);
    free(text);
    ll_buf_free(&b);
    return trace;
}

size_t tc_read_answer(int fd, char *buf, size_t cap, int ms, int *closed)
{
    size_t n = 0;
    int64_t end = ll_now_ns() / 1000000 + ms;
    *closed = 0;
    buf[0] = '\0';
    for (;;) {
        const char *h = strstr(buf, "\r\n\r\n");
        const char *cl = h ? strstr(buf, "Content-Length: ") : NULL;
        if (h && cl && cl < h && n >= (size_t)(h + 4 - buf) + strtoul(cl + 16, NULL, 10))
            return n;
        int64_t left = end - ll_now_ns() / 1000000;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || n + 1 >= cap || poll(&p, 1, (int)left) <= 0)
            return n;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
        if (k <= 0) {
            *closed = k == 0 ? 1 : 2;
            return n;
        }
        n += (size_t)k;
        buf[n] = '\0';
    }
}
