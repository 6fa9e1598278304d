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
    w->headers = h;
    return 0;
nomem:
    curl_slist_free_all(h);
    ll_errf(err, errlen, "out of memory");
    return LL_ENOMEM;
}

void lg_worker_free(lg_worker *w)
{
    while (w->head) {
        w->head->aborted = 1;
        lg_xfer_done(w->head, CURLE_ABORTED_BY_CALLBACK);
    }
    if (w->multi)
        curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->headers);
    free(w->res);
    ll_pct_free(w->itl_ms);
    ll_buf_free(&w->line);
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

static int poll_ms(int64_t now, int64_t until)
{
    int64_t d = (until - now) / 1000000; /* rounded down; the caller sleeps a last fraction */
    return d < 0 ? 0 : d > 100 ? 100 : (int)d;
}

void *lg_worker_main(void *arg)
{
    lg_worker *w = arg;
    lg_run *r = w->run;
    lg_level_ctx *L = w->lvl;
    int open = L->lv->rate_per_s > 0, no_more = w->slots == 0 && !open;
    arrivals a = {0};
    if (open) {
        ll_rng_seed(&a.rng, L->seed);
        a.rate = L->lv->rate_per_s;
        a.poisson = L->lv->arrival == SCN_ARRIVAL_POISSON;
        a.t_ns = L->start_ns;
        while (a.k < w->offset)
            arr_next(&a);
        if (w->stride == 0)
            no_more = 1;
    }
    while (w->rc == 0) {
        int64_t now = ll_now_ns();
        int64_t abort_at = atomic_load(&r->abort_at_ns);
        if (abort_at && now >= abort_at)
            break;
        if (atomic_load(&r->stop_issue) || (L->deadline_ns && now >= L->deadline_ns))
            no_more = 1;
        while (!no_more && !open && w->inflight < w->slots) {
            int idx = atomic_fetch_add(&L->next, 1);
            if (idx >= L->total) {
                no_more = 1;
                break;
            }
            if ((w->rc = lg_xfer_start(w, idx, -1))) {
                snprintf(w->err, sizeof w->err, "starting a request: %s", ll_strerror(w->rc));
                break;
            }
        }
        while (!no_more && open && a.t_ns <= now && (w->slots == 0 || w->inflight < w->slots)) {
            if (a.k >= L->total) {
                no_more = 1;
                break;
            }
            if ((w->rc = lg_xfer_start(w, a.k, a.t_ns))) {
                snprintf(w->err, sizeof w->err, "starting a request: %s", ll_strerror(w->rc));
                break;
            }
            for (int s = 0; s < w->stride; s++)
                arr_next(&a);
        }
        if (open && a.k >= L->total)
            no_more = 1;
        if (no_more && w->inflight == 0)
            break;
        int running = 0, finished = 0, q;
        if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
            w->rc = LL_EIO;
            snprintf(w->err, sizeof w->err, "curl_multi_perform failed");
            break;
        }
        CURLMsg *m;
        while ((m = curl_multi_info_read(w->multi, &q))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            lg_xfer *x = NULL;
            CURLcode res = m->data.result;
            if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x) == CURLE_OK && x) {
                lg_xfer_done(x, res);
                finished++;
            }
        }
        if (finished)
            continue; /* refill the freed slots before waiting */
        int64_t until = now + 100000000;
        if (open && !no_more && a.t_ns < until && (w->slots == 0 || w->inflight < w->slots))
            until = a.t_ns;
        if (L->deadline_ns && !no_more && L->deadline_ns < until)
            until = L->deadline_ns;
        if (abort_at && abort_at < until)
            until = abort_at;
        int64_t t = ll_now_ns();
        if (open && until > t && until - t < 1000000) {
            /* poll() counts whole milliseconds: sleep the last fraction so an
             * arrival is sent on time, not up to 1 ms late. */
            ll_sleep_until_ns(until);
            continue;
        }
        if (curl_multi_poll(w->multi, NULL, 0, poll_ms(t, until), NULL) != CURLM_OK) {
            w->rc = LL_EIO;
            snprintf(w->err, sizeof w->err, "curl_multi_poll failed");
            break;
        }
    }
    /* Past the interrupt deadline (or on an error): abort what is left; the
     * records say so. */
    while (w->head) {
        w->head->aborted = 1;
        lg_xfer_done(w->head, CURLE_ABORTED_BY_CALLBACK);
    }
    atomic_fetch_sub(&r->workers_left, 1);
    return NULL;
}
