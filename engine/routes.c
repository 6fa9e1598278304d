/* routes.c: what the engine's HTTP server answers (server.c runs it): the
 * routes and their methods, the checks before a body is read (the descriptor
 * reserve, the API key, the body limit), and each route's answer: generation
 * (handed to the scheduler, its body read by response.c), /v1/models,
 * /health, /metrics, /tokenize, the profiler's /start_profile and /stop_profile,
 * and /reset_prefix_cache (a control route, vLLM's spelling and answer).
 * Also each connection's timeout: request_timeout while it waits for a
 * request (from its accept, or the end of its previous answer, until the
 * whole request is in), idle_timeout while the request is answered; a
 * connection that sends nothing holds its slot for seconds, not minutes.
 * Every function here runs on MHD's thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* The response block MHD allocates with each streaming response. With
 * HTTP/1.1 (chunked, what every streaming client speaks) libmicrohttpd
 * 0.9.75 never uses it: eng_response_read_cb writes straight into the connection's write
 * buffer, from its memory pool (connection.c try_ready_chunked_body), as
 * much as that has room for. Only an HTTP/1.0 client's body goes through
 * it, at most this much per eng_response_read_cb call: 512 B holds one SSE event (~300 B).
 * At 4 KiB it was a quarter of a stream's memory for nothing: bench/scale.sh
 * 1024,4096, serve's RSS slope 15.3 KB per stream at 4096 B, 11.6 at 256 B,
 * 12.4 at 1024 B. */
#define ENG_RESPONSE_BLOCK_BYTES 512

enum { R_CHAT, R_COMPL, R_MODELS, R_HEALTH, R_METRICS, R_START_PROF, R_STOP_PROF, R_TOKENIZE, R_RESET_PREFIX, R_NONE };

static const struct {
    const char *path;
    const char *method;
    int route;
} routes[] = {
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/completions", "POST", R_COMPL},
    {"/v1/models", "GET", R_MODELS},
    {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},
    {"/start_profile", "POST", R_START_PROF},
    {"/stop_profile", "POST", R_STOP_PROF},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/reset_prefix_cache", "POST", R_RESET_PREFIX},
};

/* Per-request state MHD keeps for us in *con_cls. */
typedef struct eng_conn {
    int route;                 /* R_* */
    int answered;              /* refused before its body (401, 413): the rest is skipped */
    int linger;                /* answered with a body still on its way: lingering close */
    const char *allow;         /* known path, wrong method: the method it takes */
    ll_buf body;
    int too_big, oom;
    eng_req *req;              /* generation requests (one reference) */
    int prof_wait;             /* suspended until a num_steps capture completes */
    unsigned prof_seq;
} eng_conn;

/* allow: the Allow header's value (405), or NULL. A 401 also says how to
 * authenticate (RFC 6750). */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *ctype,
                               const char *body, size_t len, const char *allow)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (ok == MHD_YES && allow)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (ok == MHD_YES && status == 401)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (ok == MHD_YES)
        ok = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result respond_error(struct MHD_Connection *conn, unsigned status,
                                     const char *param, const char *msg, const char *allow)
{
    ll_buf b = {0};
    if (eng_json_error(&b, (int)status, param, msg)) {
        ll_buf_free(&b);
        return MHD_NO;
    }
    enum MHD_Result ok = respond(conn, status, "application/json", b.p, b.len, allow);
    ll_buf_free(&b);
    return ok;
}

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!s)
        return respond_error(conn, 500, NULL, "out of memory", NULL);
    enum MHD_Result ok = respond(conn, status, "application/json", s, strlen(s), NULL);
    free(s);
    return ok;
}

static enum MHD_Result start_generation(eng_engine *e, struct MHD_Connection *conn, eng_conn *c)
{
    int status = 0;
    const char *param = NULL;
    char msg[256];
    if (c->too_big) {
        ll_errf(msg, sizeof msg, "request body is over this server's limit of %zu bytes",
                e->cfg.max_body_bytes);
        return respond_error(conn, 413, NULL, msg, NULL);
    }
    if (c->oom)
        return respond_error(conn, 500, NULL, "out of memory reading the body", NULL);
    eng_req *r = eng_req_parse(e, c->route == R_CHAT ? ENG_REQ_CHAT : ENG_REQ_COMPLETION,
                               c->body.p ? c->body.p : "", c->body.len, &status, &param, msg,
                               sizeof msg);
    if (!r)
        return respond_error(conn, (unsigned)status, param, msg, NULL);
    r->conn = conn;
    /* The client's X-Request-Id names the request in handoff records (and
     * what a log would say); printable ASCII up to 64 bytes, else our own. */
    const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t rid_len = rid ? strlen(rid) : 0;
    for (size_t i = 0; i < rid_len; i++)
        if (rid[i] < 0x21 || rid[i] > 0x7e)
            rid_len = 0;
    if (rid_len > 0 && rid_len < sizeof r->rid)
        memcpy(r->rid, rid, rid_len + 1);
    else
        snprintf(r->rid, sizeof r->rid, "engine-%" PRIu64, r->id);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->fd = ci ? (int)ci->connect_fd : -1; /* -1: a non-streaming client's exit goes unseen */
    c->req = r;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, ENG_RESPONSE_BLOCK_BYTES, eng_response_read_cb, r,
                                          eng_response_free_cb);
    if (!resp)
        return respond_error(conn, 500, NULL, "could not create the response", NULL);
    eng_req_ref(r); /* the response's reference, released by eng_response_free_cb */
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->stream ? "text/event-stream" : "application/json") != MHD_YES ||
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES) {
        MHD_destroy_response(resp);
        return respond_error(conn, 500, NULL, "could not set response headers", NULL);
    }
    int rc = eng_sched_submit(e, r);
    if (rc) {
        MHD_destroy_response(resp);
        return respond_error(conn, 503, NULL,
                             rc == LL_ERANGE ? "the request queue is full; retry later"
                                             : "the server is shutting down",
                             NULL);
    }
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    if (ok == MHD_YES && e->cfg.handoff_sample > 0)
        eng_response_track_sends(r); /* before MHD writes anything for it: this is its thread */
    MHD_destroy_response(resp);
    if (ok != MHD_YES)
        atomic_store(&r->cancelled, 1);
    return ok;
}

static enum MHD_Result models(eng_engine *e, struct MHD_Connection *conn)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    if (!root || !data || !m || !cJSON_AddStringToObject(root, "object", "list") ||
        !cJSON_AddStringToObject(m, "id", e->cfg.model) ||
        !cJSON_AddStringToObject(m, "object", "model") ||
        !cJSON_AddNumberToObject(m, "created", (double)(ll_wall_ns() / 1000000000LL)) ||
        !cJSON_AddStringToObject(m, "owned_by", "loadlaw") ||
        !cJSON_AddNumberToObject(m, "max_model_len", e->cfg.max_context_tok) ||
        !cJSON_AddItemToArray(data, m)) {
        cJSON_Delete(m);
        cJSON_Delete(root);
        return respond_error(conn, 500, NULL, "out of memory", NULL);
    }
    return respond_json(conn, 200, root);
}

/* vLLM's and SGLang's answer, {"count","max_model_len"}: the engine counts
 * words and has no vocabulary, so no "tokens" list. */
static enum MHD_Result tokenize(eng_engine *e, struct MHD_Connection *conn, const eng_conn *c)
{
    int n = 0, status = 400;
    const char *param = NULL;
    char msg[256];
    if (c->too_big || c->oom)
        return respond_error(conn, c->too_big ? 413 : 500, NULL, "request body not read", NULL);
    if (eng_req_count(e, c->body.p ? c->body.p : "", c->body.len, &n, &status, &param, msg, sizeof msg))
        return respond_error(conn, (unsigned)status, param, msg, NULL);
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddNumberToObject(o, "count", n) ||
              !cJSON_AddNumberToObject(o, "max_model_len", e->cfg.max_context_tok))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return respond_json(conn, 200, o);
}

static enum MHD_Result prof_written(struct MHD_Connection *conn, const char *path, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddStringToObject(o, "status", "written") ||
              !cJSON_AddStringToObject(o, "path", path) ||
              !cJSON_AddNumberToObject(o, "num_steps", (double)n))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return respond_json(conn, 200, o);
}

static enum MHD_Result write_profile(eng_engine *e, struct MHD_Connection *conn)
{
    char path[600], msg[700];
    size_t n = 0;
    int rc = eng_prof_write(e, path, sizeof path, &n, msg, sizeof msg);
    if (rc)
        return respond_error(conn, rc == LL_EINVAL ? 400 : 500, NULL, msg, NULL);
    return prof_written(conn, path, n);
}

static enum MHD_Result start_profile(eng_engine *e, struct MHD_Connection *conn, eng_conn *c)
{
    char msg[700];
    pthread_mutex_lock(&e->mu);
    int rc = e->stopping ? LL_EINTR
                         : eng_prof_begin(e, c->body.p ? c->body.p : "", c->body.len, msg, sizeof msg);
    if (rc) {
        pthread_mutex_unlock(&e->mu);
        return respond_error(conn, rc == LL_EINTR ? 503 : rc == LL_EINVAL ? 400 : 500, NULL,
                             rc == LL_EINTR ? "the server is shutting down" : msg, NULL);
    }
    if (e->prof.want_steps > 0) {
        /* Answer once the capture is complete; suspended under mu so the
         * scheduler's resume (also under mu) cannot come first. */
        c->prof_wait = 1;
        c->prof_seq = e->prof.seq;
        e->prof.waiter = conn;
        e->prof.waiter_suspended = 1;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&e->mu);
        return MHD_YES;
    }
    char dir[sizeof e->prof.dir];
    memcpy(dir, e->prof.dir, sizeof dir);
    pthread_mutex_unlock(&e->mu);
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddStringToObject(o, "status", "started") ||
              !cJSON_AddStringToObject(o, "output_dir", dir))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return respond_json(conn, 200, o);
}

/* A /start_profile with num_steps, resumed: write the trace, unless a
 * /stop_profile already did, in which case report that file. */
static enum MHD_Result finish_profile_wait(eng_engine *e, struct MHD_Connection *conn, eng_conn *c)
{
    char path[600];
    size_t n;
    pthread_mutex_lock(&e->mu);
    int taken = e->prof.seq != c->prof_seq;
    snprintf(path, sizeof path, "%s", e->prof.last_path);
    n = e->prof.last_n;
    if (e->prof.waiter == conn) {
        e->prof.waiter = NULL;
        e->prof.waiter_suspended = 0;
    }
    pthread_mutex_unlock(&e->mu);
    c->prof_wait = 0;
    if (taken && !*path)
        return respond_error(conn, 500, NULL, "writing the trace failed (see the /stop_profile answer)", NULL);
    if (taken)
        return prof_written(conn, path, n);
    return write_profile(e, conn);
}

/* Equal strings, in time that depends on the expected key's length only, so
 * a client cannot learn the key a byte at a time from response times. */
static int key_equal(const char *got, const char *want)
{
    size_t n = strlen(want), m = strlen(got);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < m ? (unsigned char)got[i] : 0) ^ (unsigned char)want[i]);
    return diff == 0;
}

static int is_control(int route)
{
    return route == R_START_PROF || route == R_STOP_PROF || route == R_RESET_PREFIX;
}

/* The key a route needs: NULL when it is open. /health is always open (a
 * load balancer's probe carries no key); the control routes take
 * control_key when one is set. */
static const char *route_key(const eng_engine *e, int route)
{
    if (route == R_HEALTH)
        return NULL;
    if (is_control(route) && e->cfg.control_key)
        return e->cfg.control_key;
    return e->cfg.api_key;
}

/* 1 when the request may go on; 0 when it lacks the key its route needs.
 * Unknown paths need api_key too, so a client without it learns nothing
 * about the routes. */
static int authorized(const eng_engine *e, struct MHD_Connection *conn, int route)
{
    const char *want = route_key(e, route);
    if (!want)
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    return key_equal(h, want);
}

/* 1 when conn's socket is numbered in the reserve under the open-file limit
 * (ENG_FD_RESERVE): nearly every descriptor is taken, so this connection is
 * answered and closed rather than served. */
static int fd_exhausted(const eng_engine *e, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci && (int)ci->connect_fd >= e->conn_fd_max;
}

/* 503 with "Connection: close": the connection's descriptor goes back at
 * once, and the client learns now, not after a timeout. */
static enum MHD_Result respond_fd_exhausted(eng_engine *e, struct MHD_Connection *conn)
{
    char msg[200];
    ll_buf b = {0};
    ll_errf(msg, sizeof msg, "the server is at its open-file limit (%d or more descriptors "
            "open): this connection is closed; retry later", e->conn_fd_max);
    struct MHD_Response *resp = NULL;
    enum MHD_Result ok = MHD_NO;
    if (eng_json_error(&b, 503, NULL, msg) == 0 &&
        (resp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY)) &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") == MHD_YES &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES)
        ok = MHD_queue_response(conn, 503, resp);
    if (resp)
        MHD_destroy_response(resp);
    ll_buf_free(&b);
    return ok;
}

/* The route url and method name, or R_NONE; c->allow is set when the path
 * exists under another method. Control routes switched off read as unknown,
 * so they answer 404. */
static void match_route(const eng_engine *e, eng_conn *c, const char *url, const char *method)
{
    c->route = R_NONE;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].path) == 0 &&
            !(e->cfg.no_control && is_control(routes[i].route))) {
            if (strcmp(method, routes[i].method) == 0)
                c->route = routes[i].route;
            else
                c->allow = routes[i].method;
        }
}

/* 1 when the request has a body on its way (a Content-Length above 0, or a
 * chunked one); *declared gets the Content-Length (0: none). */
static int has_body(struct MHD_Connection *conn, uint64_t *declared)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    *declared = 0;
    if (cl && ll_parse_count(cl, declared) != 0)
        *declared = 0;
    return *declared > 0 ||
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

/* The checks made once the headers are in, before any body is read: the
 * descriptor reserve, the key, and a declared body over the limit. Each
 * refusal is answered now, before the body, so a client that sent
 * "Expect: 100-continue" never sends it and one that reads while it writes
 * stops early; c is marked answered so what still arrives is dropped, and
 * (but for the descriptor reserve, which has no descriptors to spare) its
 * connection lingers (linger.c) so that a client that writes its whole body
 * before it reads gets the answer rather than a reset. */
static enum MHD_Result admit(eng_engine *e, struct MHD_Connection *conn, eng_conn *c)
{
    uint64_t declared;
    if (fd_exhausted(e, conn)) {
        c->answered = 1;
        return respond_fd_exhausted(e, conn);
    }
    int body = has_body(conn, &declared);
    if (!authorized(e, conn, c->route)) {
        c->answered = 1;
        c->linger = body;
        return respond_error(conn, 401, NULL,
                             "Incorrect or missing API key: send \"Authorization: Bearer KEY\".",
                             NULL);
    }
    if (declared > e->cfg.max_body_bytes) {
        char msg[160];
        ll_errf(msg, sizeof msg, "request body of %llu bytes is over this server's limit of %zu bytes",
                (unsigned long long)declared, e->cfg.max_body_bytes);
        c->answered = 1;
        c->linger = 1;
        return respond_error(conn, 413, NULL, msg, NULL);
    }
    return MHD_YES;
}

/* Keeps a piece of the body. Only routed requests keep theirs; the limit is
 * enforced as it arrives (chunked uploads declare no length), and past it or
 * on a failed allocation the body is dropped and the flag answers later. */
static void take_upload(const eng_engine *e, eng_conn *c, const char *data, size_t n)
{
    if (c->route == R_NONE || c->too_big || c->oom)
        return;
    if (c->body.len + n > e->cfg.max_body_bytes) {
        c->too_big = 1;
        ll_buf_free(&c->body);
    } else if (ll_buf_append(&c->body, data, n)) {
        c->oom = 1;
        ll_buf_free(&c->body);
    }
}

static enum MHD_Result respond_health(eng_engine *e, struct MHD_Connection *conn)
{
    char why[512]; /* eng_engine.fail_msg's size */
    if (eng_failed(e, why, sizeof why))
        return respond_error(conn, 503, NULL, why, NULL);
    return respond(conn, 200, "application/json", "{\"status\":\"ok\"}", 15, NULL);
}

static enum MHD_Result respond_metrics(eng_engine *e, struct MHD_Connection *conn)
{
    ll_buf b = {0};
    if (eng_metrics_text(e, &b)) {
        ll_buf_free(&b);
        return respond_error(conn, 500, NULL, "out of memory", NULL);
    }
    enum MHD_Result ok = respond(conn, 200, "text/plain; version=0.0.4", b.p, b.len, NULL);
    ll_buf_free(&b);
    return ok;
}

/* MHD's inactivity timeout for conn, in seconds. It refuses only an unknown
 * option; a connection left with the timeout it had is no worse. */
static void set_timeout(struct MHD_Connection *conn, unsigned s)
{
    if (MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s) != MHD_YES)
        ll_debug("engine: a connection's timeout could not be set to %us", s);
}

/* 405 when the path exists under another method, 404 otherwise. method and
 * url are the client's bytes (MHD has decoded "%ff" in the path into the
 * byte 0xff): whole characters only, valid UTF-8. */
static enum MHD_Result respond_no_route(struct MHD_Connection *conn, const eng_conn *c,
                                        const char *url, const char *method)
{
    char msg[300], m[24], u[208];
    eng_clip_utf8(m, sizeof m, method, 16);
    eng_clip_utf8(u, sizeof u, url, 200);
    if (c->allow) {
        ll_errf(msg, sizeof msg, "method %s is not allowed on %s (use %s)", m, u, c->allow);
        return respond_error(conn, 405, NULL, msg, c->allow);
    }
    ll_errf(msg, sizeof msg, "no route for %s %s", m, u);
    return respond_error(conn, 404, NULL, msg, NULL);
}

/* The answer once the whole request is in. */
static enum MHD_Result dispatch(eng_engine *e, struct MHD_Connection *conn, eng_conn *c,
                                const char *url, const char *method)
{
    switch (c->route) {
    case R_CHAT:
    case R_COMPL:
        return start_generation(e, conn, c);
    case R_MODELS:
        return models(e, conn);
    case R_HEALTH:
        return respond_health(e, conn);
    case R_METRICS:
        return respond_metrics(e, conn);
    case R_START_PROF:
        if (c->too_big)
            return respond_error(conn, 413, NULL, "request body is over this server's limit", NULL);
        return start_profile(e, conn, c);
    case R_STOP_PROF:
        return write_profile(e, conn);
    case R_TOKENIZE:
        return tokenize(e, conn, c);
    case R_RESET_PREFIX:
        return respond_json(conn, 200, eng_prefix_reset_answer(e));
    default:
        return respond_no_route(conn, c, url, method);
    }
}

/* MHD calls this first with the headers (no eng_conn yet), then once per
 * piece of body, then with nothing left to upload. */
enum MHD_Result eng_routes_on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    (void)version;
    eng_engine *e = cls;
    eng_conn *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return MHD_NO;
        match_route(e, c, url, method);
        *con_cls = c;
        return admit(e, conn, c);
    }
    if (c->answered) { /* its answer is queued: drop what still arrives */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        take_upload(e, c, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->prof_wait)
        return finish_profile_wait(e, conn, c);
    set_timeout(conn, e->cfg.idle_timeout_s); /* the request is in: it is being answered */
    return dispatch(e, conn, c, url, method);
}

void eng_routes_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    eng_engine *e = cls;
    (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        set_timeout(conn, e->cfg.request_timeout_s);
}

/* A request's answer is out: a connection kept open waits for the next
 * request under request_timeout; one refused before its body lingers. */
static void after_answer(eng_engine *e, struct MHD_Connection *conn, const eng_conn *c)
{
    if (!c->linger) {
        set_timeout(conn, e->cfg.request_timeout_s);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        eng_linger_add(e->linger, (int)ci->connect_fd);
}

void eng_routes_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    eng_engine *e = cls;
    eng_conn *c = *con_cls;
    if (!c)
        return;
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        after_answer(e, conn, c);
    if (c->req) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            atomic_store(&c->req->cancelled, 1);
            /* Its unsent bytes no longer hold the next step back. Without
             * io_mu (lock order against MHD's own locks): a missed wake-up
             * only costs the scheduler its bounded wait. */
            pthread_cond_signal(&e->drain_cv);
        }
        eng_req_unref(c->req);
    }
    if (c->prof_wait) {
        pthread_mutex_lock(&e->mu);
        if (e->prof.waiter == conn) {
            e->prof.waiter = NULL;
            e->prof.waiter_suspended = 0;
        }
        pthread_mutex_unlock(&e->mu);
    }
    ll_buf_free(&c->body);
    free(c);
    *con_cls = NULL;
}
