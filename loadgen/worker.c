/* worker.c: one load-generating thread and its curl multi handle.
 *
 * DESIGN: closed loop pulls request indices from the level's shared atomic
 * counter, so the level keeps exactly C in flight until its prompts run out,
 * whichever worker frees a slot first. Open loop: the level's arrival times
 * are one seeded sequence; worker w takes arrivals w, w+W, w+2W, ... and
 * computes the whole sequence itself (nothing shared), sending each when it
 * is due and recording both intended and actual send times. A worker leaves
 * when it has nothing left to send and nothing in flight, or when the
 * interrupt deadline passes (then in-flight transfers are aborted). */
#include "lg_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int lg_worker_init(lg_worker *w, lg_run *r, int index, char *err, size_t errlen)
{
    char auth[1024];
    memset(w, 0, sizeof *w);
    w->run = r;
    w->index = index;
    if (!(w->multi = curl_multi_init())) {
        ll_errf(err, errlen, "curl_multi_init failed");
        return LL_ENOMEM;
    }
    /* No cap on connections: each in-flight stream needs its own HTTP/1.1
     * connection; keep idle ones for reuse across requests and levels. */
    if (curl_multi_setopt(w->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L) != CURLM_OK ||
        curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, 65536L) != CURLM_OK) {
        ll_errf(err, errlen, "curl_multi_setopt failed");
        return LL_EINVAL;
    }
    struct curl_slist *h = NULL, *t;
    /* "Expect:" off: curl would otherwise wait for 100-continue on bodies > 1 KiB. */
    const char *lines[] = {"Content-Type: application/json", "Accept: text/event-stream", "Expect:"};
    for (size_t i = 0; i < 3; i++) {
        if (!(t = curl_slist_append(h, lines[i])))
            goto nomem;
        h = t;
    }
    if (r->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->api_key);
        t = curl_slist_append(h, auth);
        memset(auth, 0, sizeof auth);
        if (!t)
            goto nomem;
        h = t;
    }
    /* the scenario's own headers (--header), after ours: a name set both
     * here and there is sent twice */
    if (lg_xfer_headers(r->scn, &h))
        goto nomem;
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
    abort_inflight(w);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->headers);
    memset(w, 0, sizeof *w);
}

/* Open loop schedule: the arrival sequence of the level, walked in order. */
typedef struct arrivals {
    ll_rng rng;
    double rate;
    int poisson;
    int k;          /* index of the arrival at t_ns */
    int64_t t_ns;
} arrivals;

static void arr_next(arrivals *a)
{
    double gap_s = a->poisson ? ll_rng_exponential(&a->rng, a->rate) : 1.0 / a->rate;
    a->t_ns += (int64_t)(gap_s * 1e9);
    a->k++;
}

/* One worker's walk through a level. */
typedef struct walk {
    lg_worker *w;
    lg_level_ctx *L;
    int open;          /* open loop (rate_per_s > 0) */
    int no_more;       /* nothing left to send */
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
    while (k->a.k < w->offset)
        arr_next(&k->a);
    if (w->stride == 0)
        k->no_more = 1;
}

static int start_request(lg_worker *w, int idx, int64_t intended_ns)
{
    if ((w->rc = lg_xfer_start(w, idx, intended_ns)))
        snprintf(w->err, sizeof w->err, "starting a request: %s", ll_strerror(w->rc));
    return w->rc;
}

/* Closed loop: fill this worker's free slots from the level's shared counter. */
static void issue_closed(walk *k)
{
    lg_worker *w = k->w;
    while (!k->no_more && w->inflight < w->slots) {
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

/* Let curl move the bytes; finish the transfers that ended. Returns how many
 * ended, or -1 on a curl failure (w->rc set). */
static int perform_and_collect(lg_worker *w)
{
    int running = 0, finished = 0, q;
    if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
        w->rc = LL_EIO;
        snprintf(w->err, sizeof w->err, "curl_multi_perform failed");
        return -1;
    }
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

static int poll_ms(int64_t now, int64_t until)
{
    int64_t d = (until - now) / 1000000; /* rounded down; the caller sleeps a last fraction */
    return d < 0 ? 0 : d > 100 ? 100 : (int)d;
}

/* Sleep until a socket is ready, the next arrival, the level's deadline, the
 * abort deadline or 100 ms, whichever comes first. -1 on a curl failure. */
static int wait_for_work(walk *k, int64_t now, int64_t abort_at)
{
    lg_worker *w = k->w;
    int64_t until = now + 100000000;
    if (k->open && !k->no_more && k->a.t_ns < until && (w->slots == 0 || w->inflight < w->slots))
        until = k->a.t_ns;
    if (k->L->deadline_ns && !k->no_more && k->L->deadline_ns < until)
        until = k->L->deadline_ns;
    if (abort_at && abort_at < until)
        until = abort_at;
    int64_t t = ll_now_ns();
    if (k->open && until > t && until - t < 1000000) {
        /* poll() counts whole milliseconds: sleep the last fraction so an
         * arrival is sent on time, not up to 1 ms late. */
        ll_sleep_until_ns(until);
        return 0;
    }
    if (curl_multi_poll(w->multi, NULL, 0, poll_ms(t, until), NULL) != CURLM_OK) {
        w->rc = LL_EIO;
        snprintf(w->err, sizeof w->err, "curl_multi_poll failed");
        return -1;
    }
    return 0;
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
        int finished = perform_and_collect(w);
        if (finished < 0)
            break;
        if (finished)
            continue; /* refill the freed slots before waiting */
        if (wait_for_work(&k, now, abort_at))
            break;
    }
    abort_inflight(w);
    w->cpu_s = thread_cpu_s() - cpu0_s;
    /* The driver checks workers_left under its lock: notify after the decrement. */
    atomic_fetch_sub(&r->workers_left, 1);
    lg_run_notify(r);
    return NULL;
}
