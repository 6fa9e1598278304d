/* worker.c: one load-generating thread and its curl multi handle.
 *
 * DESIGN: closed loop pulls request indices from the level's shared atomic
 * counter, so the level keeps exactly C in flight until its prompts run out,
 * whichever worker frees a slot first. Open loop: the level's arrival times
 * are one seeded sequence; worker w takes arrivals w, w+W, w+2W, ... and
 * computes the whole sequence itself (nothing shared), sending each when it
 * is due and recording both intended and actual send times (a trace level:
 * arrival k at its row's time, scn_prompt_send_ns). A worker leaves
 * when it has nothing left to send and nothing in flight, or when the
 * interrupt deadline passes (then in-flight transfers are aborted). */
#include "lg_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* ---- the event loop: curl's socket API on epoll --------------------------------
 * curl says which sockets to watch (on_socket) and when it wants a call back
 * (on_timer); each wake-up hands curl only the sockets that are ready, so a
 * wake-up costs per ready stream. (curl_multi_poll + curl_multi_perform, used
 * before, visit every transfer in flight on every wake-up: at C = 1024 that
 * was 1024 transfers looked at for each few that had a token.) */

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    lg_worker *w = userp;
    if (what == CURL_POLL_REMOVE) {
        /* ENOENT/EBADF: curl closed it already, which removed it */
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    /* the transfer's socket: its reads' stamps are its own (xfer_recv.c arrival_ns) */
    lg_xfer *x = NULL;
    if (curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x) == CURLE_OK && x)
        x->fd = (int)s;
    struct epoll_event ev = {.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                                       ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
                             .data.fd = s};
    int op = socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(w->epfd, op, s, &ev) != 0) {
        /* a reused descriptor number: what curl calls new, epoll may still
         * hold (and the other way round) */
        op = errno == EEXIST ? EPOLL_CTL_MOD : errno == ENOENT ? EPOLL_CTL_ADD : -1;
        if (op < 0 || epoll_ctl(w->epfd, op, s, &ev) != 0)
            return -1;
    }
    if (!socketp)
        curl_multi_assign(w->multi, s, w); /* known: the next change is a MOD */
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    lg_worker *w = userp;
    w->timer_at = timeout_ms < 0 ? -1 : ll_now_ns() + (int64_t)timeout_ms * 1000000;
    return 0;
}

void lg_worker_wake(lg_worker *w)
{
    uint64_t one = 1;
    if (w->multi && w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        ll_warn("waking worker %d failed; it notices within 100 ms", w->index);
}

int lg_worker_init(lg_worker *w, lg_run *r, int index, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->run = r;
    w->index = index;
    w->epfd = w->wake_fd = -1;
    w->timer_at = -1;
    if (!(w->multi = curl_multi_init())) {
        ll_errf(err, errlen, "curl_multi_init failed");
        return LL_ENOMEM;
    }
    struct epoll_event wev = {.events = EPOLLIN};
    if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (wev.data.fd = w->wake_fd, epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &wev)) != 0) {
        ll_errf(err, errlen, "worker %d: epoll/eventfd: %s", index, strerror(errno));
        return LL_ESYS;
    }
    if (curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w) != CURLM_OK) {
        ll_errf(err, errlen, "curl_multi_setopt (socket API) failed");
        return LL_EINVAL;
    }
    /* No cap on connections: each in-flight stream needs its own HTTP/1.1
     * connection; keep idle ones for reuse across requests and levels. */
    if (curl_multi_setopt(w->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, 65536L) != CURLM_OK) {
        ll_errf(err, errlen, "curl_multi_setopt failed");
        return LL_EINVAL;
    }
    /* the rotation starts where this worker's place among all ranks' says */
    int rc = lg_src_init(&w->src, r->scn, r->rank * r->nthreads + index, err, errlen);
    if (rc)
        return rc;
    struct curl_slist *h = NULL, *t;
    /* "Expect:" off: curl would otherwise wait for 100-continue on bodies > 1 KiB. */
    const char *lines[] = {"Content-Type: application/json", "Accept: text/event-stream", "Expect:"};
    for (size_t i = 0; i < 3; i++) {
        if (!(t = curl_slist_append(h, lines[i])))
            goto nomem;
        h = t;
    }
    if (r->api_key) {
        char *auth = ll_bearer_header(r->api_key); /* any length: JWTs run past 1 KB */
        t = auth ? curl_slist_append(h, auth) : NULL;
        ll_wipe_free(auth);
        if (!t)
            goto nomem;
        h = t;
    }
    /* the scenario's own headers (--header), after ours: a name set both
     * here and there is sent twice */
    if (lg_xfer_headers(r->scn, &h))
        goto nomem;
    for (t = h; t; t = t->next)
        if (strncasecmp(t->data, "X-Request-Id:", 13) == 0)
            w->user_rid = 1;
    w->headers = h;
    return 0;
nomem:
    curl_slist_free_all(h);
    ll_errf(err, errlen, "out of memory");
    return LL_ENOMEM;
}

static void abort_inflight(lg_worker *w);

void lg_worker_free(lg_worker *w)
{
    if (!w->run)
        return; /* never initialised (a zeroed slot of the workers' array) */
    abort_inflight(w);
    if (w->multi)
        curl_multi_cleanup(w->multi); /* may still call on_socket: epfd after it */
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    curl_slist_free_all(w->headers);
    ll_pct_free(w->read_lag);
    lg_src_free(&w->src);
    lg_sess_free_all(w);
    memset(w, 0, sizeof *w);
    w->epfd = w->wake_fd = -1;
}

/* Open loop schedule: the arrival sequence of the level, walked in order. */
typedef struct arrivals {
    ll_rng rng;
    double rate;
    int poisson;
    int k;          /* index of the arrival at t_ns */
    int64_t t_ns;
    const scn_prompts *trace; /* a trace level: arrival k at start + its row's time */
    int64_t start_ns;
} arrivals;

static void arr_next(arrivals *a)
{
    a->k++;
    if (a->trace) {
        a->t_ns = a->start_ns + scn_prompt_send_ns(a->trace, (size_t)a->k);
        return;
    }
    double gap_s = a->poisson ? ll_rng_exponential(&a->rng, a->rate) : 1.0 / a->rate;
    a->t_ns += (int64_t)(gap_s * 1e9);
}

/* One worker's walk through a level. */
typedef struct walk {
    lg_worker *w;
    lg_level_ctx *L;
    int open;          /* open loop (rate_per_s > 0) */
    int no_more;       /* nothing left to send */
    int stamped;       /* reads carry the kernel's stamp (w->rx attached) */
    arrivals a;        /* open loop: this worker's next arrival */
} walk;

static void walk_init(walk *k, lg_worker *w)
{
    lg_level_ctx *L = w->lvl;
    memset(k, 0, sizeof *k);
    k->w = w;
    k->L = L;
    k->open = L->rate_per_s > 0;
    k->no_more = w->slots == 0 && !k->open;
    if (!k->open)
        return;
    ll_rng_seed(&k->a.rng, L->seed);
    k->a.rate = L->rate_per_s;
    k->a.poisson = L->lv->arrival == SCN_ARRIVAL_POISSON;
    k->a.t_ns = L->start_ns;
    if (L->lv->arrival == SCN_ARRIVAL_TRACE && w->run->scn->trace) {
        k->a.trace = w->run->prompts;
        k->a.start_ns = L->start_ns;
        k->a.t_ns = L->start_ns + scn_prompt_send_ns(k->a.trace, 0);
    }
    while (k->a.k < w->offset)
        arr_next(&k->a);
    if (w->stride == 0)
        k->no_more = 1;
}

/* ---- back-off from a server that refuses connections --------------------------
 * A closed loop starts the next request as soon as one ends, so a level that
 * meets a server down for a few seconds would spend every request it has in
 * a fraction of a second as connect errors (64 requests in 0.27 s). After a
 * refused connection the worker waits LG_BACKOFF_FIRST_MS, doubling per
 * refused round to LG_BACKOFF_MAX_MS, and meanwhile keeps one request in
 * flight, a probe: the first response ends the back-off and the level goes
 * on at its C. An open loop keeps its schedule (the arrivals are the load
 * asked for, and what a user would meet). */
#define LG_BACKOFF_FIRST_MS 50
#define LG_BACKOFF_MAX_MS 1000

void lg_worker_connect_result(lg_worker *w, const lg_xfer *x, ll_err_class cls)
{
    if (x->header_ns >= 0) {
        if (w->backoff_k > 0) {
            w->backoff_k = 0;
            atomic_store(&w->run->backoff_ms, 0);
        }
        return;
    }
    if (cls != LL_ERRC_CONNECT || x->aborted || w->lvl->rate_per_s > 0)
        return;
    if (w->backoff_k > 0 && x->send_ns < w->backoff_set_ns)
        return; /* sent before this round began: the same outage, already counted */
    int shift = w->backoff_k < 5 ? w->backoff_k : 5;
    int ms = LG_BACKOFF_FIRST_MS << shift;
    ms = ms < LG_BACKOFF_MAX_MS ? ms : LG_BACKOFF_MAX_MS;
    int64_t now = ll_now_ns();
    w->backoff_k++;
    w->backoff_set_ns = now;
    w->backoff_until_ns = now + (int64_t)ms * 1000000;
    lg_run *r = w->run;
    if (atomic_exchange(&r->backoff_ms, ms) == 0 && w->backoff_k == 1)
        fprintf(stderr, "%sloadlaw: level %d: connection refused; backing off %d ms, then one request per "
                        "worker until the server answers (at most %d ms between tries)\n",
                r->progress ? "\n" : "", w->lvl->index, ms, LG_BACKOFF_MAX_MS);
}

/* How many requests the worker may have in flight now: none while a back-off
 * runs, one (the probe) after it until a response comes, else its slots. */
static int backoff_slots(const lg_worker *w, int64_t now, int slots)
{
    if (w->backoff_k == 0)
        return slots;
    return now < w->backoff_until_ns ? 0 : slots < 1 ? slots : 1;
}

static int start_request(lg_worker *w, int idx, int64_t intended_ns)
{
    if ((w->rc = lg_xfer_start(w, idx, intended_ns, NULL)))
        snprintf(w->err, sizeof w->err, "starting a request: %s", ll_strerror(w->rc));
    return w->rc;
}

/* Closed loop: fill this worker's free slots from the level's shared counter. */
static void issue_closed(walk *k)
{
    lg_worker *w = k->w;
    int slots = backoff_slots(w, ll_now_ns(), w->slots);
    if (w->inflight >= slots)
        return;
    if (w->n_sess > 0) {
        /* load.sessions: the slots are conversations (session.c); past the
         * level's deadline or an interrupt no further turn starts */
        if (!k->no_more)
            k->no_more = lg_sess_issue(w, ll_now_ns()) == 0;
        return;
    }
    while (!k->no_more && w->inflight < slots) {
        int idx = atomic_fetch_add(&k->L->next, 1);
        if (idx >= k->L->total) {
            k->no_more = 1;
            break;
        }
        if (start_request(w, idx, -1))
            break;
    }
}

/* Open loop: send every arrival that is due (within the in-flight cap). */
static void issue_open(walk *k, int64_t now)
{
    lg_worker *w = k->w;
    while (!k->no_more && k->a.t_ns <= now && (w->slots == 0 || w->inflight < w->slots)) {
        if (k->a.k >= k->L->total) {
            k->no_more = 1;
            break;
        }
        if (start_request(w, k->a.k, k->a.t_ns))
            break;
        for (int s = 0; s < w->stride; s++)
            arr_next(&k->a);
    }
    if (k->a.k >= k->L->total)
        k->no_more = 1;
}

/* This thread's CPU time (s): the client's own cost, to tell when the client,
 * not the server, set the pace (records.h ll_rec_client). 0 if the clock is
 * missing (then the level reads as idle, and fit falls back on its gaps). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Token-carrying chunks of a transfer about to be finished: counted here,
 * once per transfer, so the write callback pays nothing for it. */
static void count_events(lg_worker *w, const lg_xfer *x)
{
    w->events += x->chunks.n;
}

/* Hand curl one ready socket (or its timeout: CURL_SOCKET_TIMEOUT). -1 on a
 * curl failure (w->rc set). */
static int drive(lg_worker *w, curl_socket_t fd, int ev)
{
    int running;
    CURLMcode mc = curl_multi_socket_action(w->multi, fd, ev, &running);
    /* Only a read made in one call stamps what that call delivers, and
     * answers poll() for its socket (netstamp.h): the worker's recv() calls
     * are all made inside this one. */
    ns_rx_reset(&w->rx);
    if (mc != CURLM_OK) {
        w->rc = LL_EIO;
        snprintf(w->err, sizeof w->err, "curl_multi_socket_action: %s", curl_multi_strerror(mc));
        return -1;
    }
    return 0;
}

/* curl's timer, if due (it asks for one after every new transfer). */
static int run_timer(lg_worker *w, int64_t now)
{
    if (w->timer_at < 0 || now < w->timer_at)
        return 0;
    w->timer_at = -1; /* before the call, which may set the next one */
    return drive(w, CURL_SOCKET_TIMEOUT, 0);
}

/* Finish the transfers that ended; returns how many. */
static int collect(lg_worker *w)
{
    int finished = 0, q;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &q))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        lg_xfer *x = NULL;
        CURLcode res = m->data.result;
        if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x) == CURLE_OK && x) {
            count_events(w, x);
            lg_xfer_done(x, res);
            finished++;
        }
    }
    return finished;
}

#define LG_EPOLL_EVENTS 256

/* When the worker must be up again: the next arrival (when a slot is free
 * for it), the level's deadline, the abort deadline or 100 ms after now,
 * whichever comes first. curl's timer is not in it (see wait_ms). */
static int64_t wake_at(const walk *k, int64_t now, int64_t abort_at)
{
    const lg_worker *w = k->w;
    int64_t until = now + 100000000;
    if (k->open && !k->no_more && k->a.t_ns < until && (w->slots == 0 || w->inflight < w->slots))
        until = k->a.t_ns;
    if (k->L->deadline_ns && !k->no_more && k->L->deadline_ns < until)
        until = k->L->deadline_ns;
    if (w->n_sess > 0 && !k->no_more && lg_sess_next_due(w) < until)
        until = lg_sess_next_due(w); /* a conversation's next turn, after its think time */
    if (abort_at && abort_at < until)
        until = abort_at;
    if (!k->open && w->backoff_k > 0 && w->backoff_until_ns > now && w->backoff_until_ns < until)
        until = w->backoff_until_ns;
    return until;
}

/* epoll's timeout (ms) from t to until or to curl's timer, the earlier:
 * whole ms, rounded down for our own deadlines (a last fraction is slept by
 * wait_for_work or spun over in the caller's next turn), up for curl's timer
 * (it counts in ms; waking early would only spin). */
static int wait_ms(const lg_worker *w, int64_t until, int64_t t)
{
    int64_t d = until - t;
    int ms = d <= 0 ? 0 : (int)(d / 1000000);
    if (w->timer_at >= 0) {
        int64_t dt = w->timer_at - t;
        int tms = dt <= 0 ? 0 : (int)((dt + 999999) / 1000000);
        ms = tms < ms ? tms : ms;
    }
    return ms;
}

/* curl's readiness bits for what epoll reported on a socket. */
static int select_bits(uint32_t events)
{
    return ((events & EPOLLIN) ? CURL_CSELECT_IN : 0) | ((events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
           ((events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
}

/* Hand curl the n ready sockets of one wake-up; the wake-up descriptor is
 * only emptied. -1 on a curl failure (w->rc set). */
static int drive_ready(walk *k, const struct epoll_event *ev, int n)
{
    lg_worker *w = k->w;
    if (n > 0 && k->stamped)
        ns_rx_clock(&w->rx); /* the stamps' clock offset, once per wake-up (netstamp.h) */
    for (int i = 0; i < n; i++) {
        if (ev[i].data.fd == w->wake_fd) {
            uint64_t v;
            if (read(w->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
                ll_warn("worker %d: reading its wake-up: %s", w->index, strerror(errno));
            continue;
        }
        if (drive(w, ev[i].data.fd, select_bits(ev[i].events)))
            return -1;
    }
    return 0;
}

/* Sleep until a socket is ready, curl's timer, the next arrival, the level's
 * deadline, the abort deadline or 100 ms, whichever comes first; then hand
 * curl what is ready. -1 on a failure (w->rc set). */
static int wait_for_work(walk *k, int64_t now, int64_t abort_at)
{
    lg_worker *w = k->w;
    int64_t until = wake_at(k, now, abort_at);
    int64_t t = ll_now_ns();
    if (k->open && until > t && until - t < 1000000 && (w->timer_at < 0 || w->timer_at >= until)) {
        /* epoll counts whole milliseconds: sleep the last fraction so an
         * arrival is sent on time, not up to 1 ms late. */
        ll_sleep_until_ns(until);
        return 0;
    }
    struct epoll_event ev[LG_EPOLL_EVENTS];
    int n = epoll_wait(w->epfd, ev, LG_EPOLL_EVENTS, wait_ms(w, until, t));
    if (n < 0) {
        if (errno == EINTR)
            return 0;
        w->rc = LL_ESYS;
        snprintf(w->err, sizeof w->err, "epoll_wait: %s", strerror(errno));
        return -1;
    }
    return drive_ready(k, ev, n);
}

/* Past the interrupt deadline (or on an error): abort what is left; the
 * records say so. */
static void abort_inflight(lg_worker *w)
{
    while (w->head) {
        w->head->aborted = 1;
        count_events(w, w->head);
        lg_xfer_done(w->head, CURLE_ABORTED_BY_CALLBACK);
    }
}

void *lg_worker_main(void *arg)
{
    lg_worker *w = arg;
    lg_run *r = w->run;
    walk k;
    double cpu0_s = thread_cpu_s();
    walk_init(&k, w);
    /* This thread's recv() calls (libcurl's) leave the kernel's stamp in w->rx. */
    k.stamped = r->kstamp;
    ns_rx_reset(&w->rx);
    ns_rx_attach(k.stamped ? &w->rx : NULL);
    while (w->rc == 0) {
        int64_t now = ll_now_ns();
        int64_t abort_at = atomic_load(&r->abort_at_ns);
        if (abort_at && now >= abort_at)
            break;
        if (atomic_load(&r->stop_issue) || (k.L->deadline_ns && now >= k.L->deadline_ns))
            k.no_more = 1;
        if (k.open)
            issue_open(&k, now);
        else
            issue_closed(&k);
        if (w->rc || (k.no_more && w->inflight == 0))
            break;
        if (run_timer(w, ll_now_ns()))
            break;
        if (collect(w))
            continue; /* refill the freed slots before waiting */
        if (wait_for_work(&k, now, abort_at))
            break;
    }
    abort_inflight(w);
    ns_rx_attach(NULL);
    w->cpu_s = thread_cpu_s() - cpu0_s;
    /* The driver checks workers_left under its lock: notify after the decrement. */
    atomic_fetch_sub(&r->workers_left, 1);
    lg_run_notify(r);
    return NULL;
}
