/* server.c: the OpenAI-compatible HTTP front of the engine (libmicrohttpd).
 *
 * DESIGN: one MHD polling thread (epoll) serves every connection and never
 * blocks. A generation response is a callback response whose reader copies the
 * bytes the scheduler queued in the request; when none are queued the reader
 * suspends the connection, and the scheduler resumes it at the end of the step
 * that produced tokens (both under eng->io_mu, see internal.h). A suspended
 * connection costs no CPU, so thousands of streams wait for free.
 * read_cb also ends the scheduler's backpressure wait (sched.c, wait_drained)
 * once a held stream's unsent bytes fall to ENG_UNSENT_MAX_BYTES.
 * A client that leaves mid-stream is noticed by MHD when a write fails; the
 * "request completed" notice marks the request cancelled and the scheduler
 * drops it at its next step. A non-streaming response writes nothing until it
 * ends, so there the scheduler looks at the suspended connection's socket
 * each step instead (sched.c, client_left) and ends the response itself.
 * Two additions work around 0.9.75's loop: a wake-up thread (mhd_nudge_main)
 * so a batch of exactly 128·k ready sockets is not left asleep, and a hook
 * on netstamp's send()/sendmsg() (where the program links netstamp), which
 * times when sampled tokens really left (handoff records' send_ns).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "netstamp.h"

/* The response block MHD allocates with each streaming response. With
 * HTTP/1.1 (chunked, what every streaming client speaks) libmicrohttpd
 * 0.9.75 never uses it: read_cb writes straight into the connection's write
 * buffer, from its memory pool (connection.c try_ready_chunked_body), as
 * much as that has room for. Only an HTTP/1.0 client's body goes through
 * it, at most this much per read_cb call: 512 B holds one SSE event (~300 B).
 * At 4 KiB it was a quarter of a stream's memory for nothing: bench/scale.sh
 * 1024,4096, serve's RSS slope 15.3 KB per stream at 4096 B, 11.6 at 256 B,
 * 12.4 at 1024 B. */
#define ENG_RESPONSE_BLOCK_BYTES 512

enum { R_CHAT, R_COMPL, R_MODELS, R_HEALTH, R_METRICS, R_START_PROF, R_STOP_PROF, R_NONE };

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
};

/* Per-request state MHD keeps for us in *con_cls. */
typedef struct eng_conn {
    int route;                 /* R_* */
    int answered;              /* refused before its body (401, 413): the rest is skipped */
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

/* ---- handoff records -----------------------------------------------------------
 * A sampled token (cfg.handoff_sample) is timed three times: its step's end
 * (sched.c), when read_cb hands its last byte to MHD (write_ns), and when the
 * socket write carrying that byte returns (send_ns). The last two differ:
 * libmicrohttpd 0.9.75 calls the content callbacks of all the ready
 * connections in one pass and send()s what they gave in the next, so at
 * C = 1024 the bytes wait milliseconds in MHD's buffer.
 *
 * MHD writes with send() (sendmsg() when headers and body go out together)
 * and has no hook after a write; netstamp/ (netstamp.h) defines both in the
 * programs that link it and calls sent_all, registered here, for the writes
 * of MHD's thread (ns_tx_attach). A write that took every byte it was asked
 * to -- MHD always asks for all it holds for the connection -- stamps the
 * samples read_cb handed on that socket. Where netstamp is not linked,
 * ns_tx_hook refuses, no socket is registered and send_ns is -1. Streams with samples register their socket in a table by
 * descriptor (MHD's thread sets, reads and clears an entry; the response's
 * free callback, which MHD runs before it closes the socket, clears it).
 * Every other thread, and every unregistered socket, goes straight to the
 * kernel. */
static eng_req **fd_req;            /* (fd_cap) the stream registered on each socket */
static size_t fd_cap;
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;

static void sent_all(int fd);

static void fd_table_alloc(void)
{
    if (ns_tx_hook(sent_all))
        return; /* no send stamps in this program: fd_cap stays 0 */
    /* as many entries as descriptors may exist (untouched pages cost no memory) */
    struct rlimit rl;
    size_t cap = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > cap)
        cap = (size_t)rl.rlim_max;
    if (cap > (size_t)1 << 20)
        cap = (size_t)1 << 20;
    if ((fd_req = calloc(cap, sizeof *fd_req)))
        fd_cap = cap;
}

/* Hand samples to the records writer (rebased to the run clock), or count
 * them dropped. Takes rec_mu: never with io_mu held. */
static void put_handoffs(eng_engine *e, ll_rec_handoff *h, int n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&e->rec_mu);
    for (int i = 0; i < n; i++) {
        if (!e->rec || h[i].step_end_ns < e->rec_epoch_ns) {
            atomic_fetch_add(&e->handoff_dropped, 1);
            continue;
        }
        h[i].step_end_ns -= e->rec_epoch_ns;
        h[i].write_ns -= e->rec_epoch_ns;
        if (h[i].send_ns >= 0)
            h[i].send_ns -= e->rec_epoch_ns;
        if (ll_rec_put_handoff(e->rec, &h[i]))
            atomic_fetch_add(&e->handoff_dropped, 1);
    }
    pthread_mutex_unlock(&e->rec_mu);
}

/* The samples read_cb handed on r's socket, now out (send_ns) or never to
 * be (-1: the response ended first). MHD's thread. */
static void flush_handed(eng_req *r, int64_t send_ns)
{
    ll_rec_handoff h[ENG_HANDOFF_PENDING];
    int n = r->hh_n;
    for (int i = 0; i < n; i++)
        h[i] = (ll_rec_handoff){.req = r->rid, .tok = r->hh[i].tok, .step_end_ns = r->hh[i].step_end_ns,
                                .write_ns = r->hh[i].write_ns, .send_ns = send_ns};
    r->hh_n = 0;
    put_handoffs(r->eng, h, n);
}

/* A write on fd took every byte asked: the samples handed for it are out
 * (netstamp's send()/sendmsg() on MHD's thread; errno is theirs to keep). */
static void sent_all(int fd)
{
    if (fd < 0 || (size_t)fd >= fd_cap)
        return;
    eng_req *r = fd_req[fd];
    if (r && r->hh_n > 0)
        flush_handed(r, ll_now_ns());
}

/* Register r's socket for send_ns (MHD's thread, before MHD writes for r). */
static void track_sends(eng_req *r)
{
    ns_tx_attach(1);
    pthread_once(&fd_once, fd_table_alloc);
    if (r->fd >= 0 && (size_t)r->fd < fd_cap) {
        fd_req[r->fd] = r;
        r->send_fd = r->fd;
    }
}

/* Record the handoff samples whose bytes have now all been handed to MHD:
 * held for their send() when r's socket is tracked, else recorded now
 * (caller holds io_mu, which is released before the records writer is
 * taken: io_mu is never held with rec_mu). */
static void handoffs_due(eng_engine *e, eng_req *r)
{
    ll_rec_handoff h[ENG_HANDOFF_PENDING];
    int n = 0;
    int64_t now = ll_now_ns();
    while (r->hs_n > 0 && r->hs[r->hs_head].end_off <= r->sent_total) {
        int tok = r->hs[r->hs_head].tok;
        int64_t step_end = r->hs[r->hs_head].step_end_ns;
        r->hs_head = (r->hs_head + 1) % ENG_HANDOFF_PENDING;
        r->hs_n--;
        if (r->send_fd >= 0 && r->hh_n < ENG_HANDOFF_PENDING) {
            r->hh[r->hh_n].tok = tok;
            r->hh[r->hh_n].step_end_ns = step_end;
            r->hh[r->hh_n++].write_ns = now;
        } else {
            h[n++] = (ll_rec_handoff){.req = r->rid, .tok = tok, .step_end_ns = step_end, .write_ns = now,
                                      .send_ns = -1};
        }
    }
    pthread_mutex_unlock(&e->io_mu);
    put_handoffs(e, h, n);
}

static ssize_t read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    eng_req *r = cls;
    eng_engine *e = r->eng;
    ssize_t n;
    pthread_mutex_lock(&e->io_mu);
    size_t avail = r->out.len - r->out_off;
    if (avail > 0) {
        n = (ssize_t)(avail < max ? avail : max);
        memcpy(buf, r->out.p + r->out_off, (size_t)n);
        r->out_off += (size_t)n;
        r->sent_total += n;
        if (r->out_off == r->out.len) {
            ll_buf_reset(&r->out);
            r->out_off = 0;
        }
        /* The scheduler may be waiting for this backlog to shrink (sched.c). */
        if (r->held && r->out.len - r->out_off <= ENG_UNSENT_MAX_BYTES) {
            r->held = 0;
            if (--e->n_held == 0)
                pthread_cond_signal(&e->drain_cv);
        }
    } else if (r->finished) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (r->aborted) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
        n = 0;
    }
    if (r->hs_n > 0) {
        handoffs_due(e, r); /* unlocks io_mu */
        return n;
    }
    pthread_mutex_unlock(&e->io_mu);
    return n;
}

/* The response is gone (MHD runs this before it closes the socket): the
 * socket's entry goes with it. */
static void free_cb(void *cls)
{
    eng_req *r = cls;
    if (r->send_fd >= 0) {
        if (fd_req[r->send_fd] == r)
            fd_req[r->send_fd] = NULL;
        r->send_fd = -1;
        flush_handed(r, -1);
    }
    eng_req_unref(r);
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
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, ENG_RESPONSE_BLOCK_BYTES, read_cb, r, free_cb);
    if (!resp)
        return respond_error(conn, 500, NULL, "could not create the response", NULL);
    eng_req_ref(r); /* the response's reference, released by free_cb */
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
        track_sends(r); /* before MHD writes anything for it: this is its thread */
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

/* The key a route needs: NULL when it is open. /health is always open (a
 * load balancer's probe carries no key); the control routes take
 * control_key when one is set. */
static const char *route_key(const eng_engine *e, int route)
{
    if (route == R_HEALTH)
        return NULL;
    if ((route == R_START_PROF || route == R_STOP_PROF) && e->cfg.control_key)
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

static int is_control(int route) { return route == R_START_PROF || route == R_STOP_PROF; }

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

/* The checks made once the headers are in, before any body is read: the
 * descriptor reserve, the key, and a declared body over the limit. Each
 * refusal marks c answered so the body that still arrives is dropped. */
static enum MHD_Result admit(eng_engine *e, struct MHD_Connection *conn, eng_conn *c)
{
    if (fd_exhausted(e, conn)) {
        c->answered = 1;
        return respond_fd_exhausted(e, conn);
    }
    if (!authorized(e, conn, c->route)) {
        c->answered = 1;
        return respond_error(conn, 401, NULL,
                             "Incorrect or missing API key: send \"Authorization: Bearer KEY\".",
                             NULL);
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared;
    if (cl && ll_parse_count(cl, &declared) == 0 && declared > e->cfg.max_body_bytes) {
        char msg[160];
        ll_errf(msg, sizeof msg, "request body of %llu bytes is over this server's limit of %zu bytes",
                (unsigned long long)declared, e->cfg.max_body_bytes);
        c->answered = 1;
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
    default:
        return respond_no_route(conn, c, url, method);
    }
}

/* MHD calls this first with the headers (no eng_conn yet), then once per
 * piece of body, then with nothing left to upload. */
static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
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
    return dispatch(e, conn, c, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    eng_engine *e = cls;
    eng_conn *c = *con_cls;
    if (!c)
        return;
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

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    ll_debug("libmicrohttpd: %s", line);
}

/* libmicrohttpd 0.9.75's epoll loop (daemon.c, MHD_epoll) computes its
 * epoll_wait timeout once per pass, before draining, and calls epoll_wait
 * again with that same timeout for as long as a call returns a full batch
 * (MAX_EVENTS, 128). When exactly 128 or 256 sockets turn readable at once
 * (a burst of new requests) and nothing else is pending, the last call waits
 * with the idle timeout (up to 120 s) although the calls before it have put
 * those connections on MHD's ready list: none is read or dispatched until
 * some other event reaches the epoll set. This thread is that event every
 * ENG_MHD_NUDGE_NS while MHD has a connection: it writes an eventfd
 * registered edge-triggered in MHD's epoll set with data.ptr NULL, which
 * MHD_epoll skips ("shutdown signal"), so such a lapse lasts at most one
 * period. (A periodic timerfd would not do: it re-arms only when read.) */
#define ENG_MHD_NUDGE_NS 10000000L /* 10 ms */

static void *mhd_nudge_main(void *arg)
{
    eng_engine *e = arg;
    const uint64_t one = 1;
    const struct timespec period = {0, ENG_MHD_NUDGE_NS};
    while (!atomic_load(&e->mhd_nudge_stop)) {
        nanosleep(&period, NULL);
        /* No connection, nothing to miss: an idle server stays asleep. */
        const union MHD_DaemonInfo *ci =
            MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (ci && ci->num_connections == 0)
            continue;
        if (write(e->mhd_nudge_fd, &one, sizeof one) < 0) { /* EAGAIN after 2^64 writes */
            uint64_t n;
            if (read(e->mhd_nudge_fd, &n, sizeof n) < 0)
                break;
        }
    }
    return NULL;
}

static int mhd_nudge_start(eng_engine *e)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!info || fd < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = NULL};
    if (epoll_ctl(info->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        goto fail;
    e->mhd_nudge_fd = fd;
    atomic_store(&e->mhd_nudge_stop, 0);
    if (pthread_create(&e->mhd_nudge_thread, NULL, mhd_nudge_main, e) != 0)
        goto fail; /* closing the fd takes it out of the set */
    e->mhd_nudge_started = 1;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    e->mhd_nudge_fd = -1;
    return -1;
}

int eng_server_start(eng_engine *e, char *err, size_t errlen)
{
    e->mhd_nudge_fd = -1;
    e->mhd_nudge_started = 0;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)e->cfg.port);
    const char *host = e->cfg.bind_addr ? e->cfg.bind_addr : "127.0.0.1";
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        ll_errf(err, errlen, "bind address \"%s\" is not an IPv4 address", host);
        return LL_EINVAL;
    }
    /* 127.0.0.0/8 only reaches this machine; anything else, without a key,
     * hands generation and the profiler to whoever can reach the port. */
    if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127 && !e->cfg.api_key)
        ll_warn("engine: listening on %s without an API key: anyone who can reach this port can "
                "use every endpoint (set api_key / serve --api-key or LOADLAW_API_KEY)", host);
    /* MHD_USE_TURBO: libmicrohttpd reads, writes and accepts before epoll
     * says a socket is ready. 0.9.75's epoll loop can sleep with connections
     * on its ready list when exactly 128·k sockets turn readable at once
     * (mhd_nudge_main above has the mechanism and the cure); TURBO, which
     * reads a new connection in the pass that accepts it, makes that rarer
     * (25 bursts of 256 in 70 stalled without it) and costs nothing in
     * events/s. Plain poll() has no such loop but cost 60% of the events/s
     * at 4096 streams. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    e->mhd = MHD_start_daemon(flags, (uint16_t)e->cfg.port, NULL, NULL, on_access, e,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                              MHD_OPTION_CONNECTION_LIMIT, e->cfg.max_connections,
                              MHD_OPTION_CONNECTION_TIMEOUT, e->cfg.idle_timeout_s,
                              /* the per-stream cost: see eng_config.conn_memory_bytes */
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, e->cfg.conn_memory_bytes,
                              MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, e,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                              MHD_OPTION_END);
    if (!e->mhd) {
        ll_errf(err, errlen, "could not start the HTTP server on %s:%d (port in use, or no permission?)",
                host, e->cfg.port);
        return LL_ESYS;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_BIND_PORT);
    e->port = info ? (int)info->port : e->cfg.port;
    if (e->port <= 0) {
        MHD_stop_daemon(e->mhd);
        e->mhd = NULL;
        ll_errf(err, errlen, "could not learn the HTTP server's port");
        return LL_ESYS;
    }
    snprintf(e->url, sizeof e->url, "http://%s:%d",
             strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host, e->port);
    if (mhd_nudge_start(e))
        ll_warn("engine: could not start the HTTP loop's wake-up thread: a burst of new requests "
                "may wait for the next connection");
    return 0;
}

/* After the scheduler has stopped (every request aborted and resumed): wake a
 * waiting /start_profile too, since MHD may not be stopped with a suspended
 * connection. */
void eng_server_stop(eng_engine *e)
{
    if (!e->mhd)
        return;
    pthread_mutex_lock(&e->mu);
    if (e->prof.waiter_suspended) {
        e->prof.waiter_suspended = 0;
        MHD_resume_connection(e->prof.waiter);
    }
    pthread_mutex_unlock(&e->mu);
    if (e->mhd_nudge_started) {
        atomic_store(&e->mhd_nudge_stop, 1);
        pthread_join(e->mhd_nudge_thread, NULL);
        e->mhd_nudge_started = 0;
    }
    MHD_stop_daemon(e->mhd);
    e->mhd = NULL;
    if (e->mhd_nudge_fd >= 0) {
        close(e->mhd_nudge_fd);
        e->mhd_nudge_fd = -1;
    }
}
