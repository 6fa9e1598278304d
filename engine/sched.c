/* sched.c: the continuous-batching scheduler thread.
 *
 * Each step: drop cancelled requests, admit waiting ones up to max_running,
 * give every decoding sequence one token and spend the prefill budget on the
 * oldest prefilling sequences (chunked prefill), let the backend play the
 * step, then log it and hand the tokens to their streams at once (logged
 * first, so the step log never trails what clients have received).
 *
 * DESIGN, timing: steps chain on absolute deadlines. Step k+1 is planned to
 * start at step k's deadline, not when the scheduler got round to it, so the
 * work done between steps (emitting tokens, admitting) is absorbed into the
 * next step and busy steps average exactly the law. When the scheduler is late
 * by more than a step (overload) or wakes from idle, the chain restarts at
 * "now" rather than shortening later steps to catch up. With nothing to do the
 * thread sleeps on a condition variable: no empty steps, no busy loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "internal.h"

typedef struct eng_sched {
    int cap;                 /* max_running */
    eng_req **run;           /* (cap) admitted requests, oldest first */
    int n_run;
    int *free_slot;          /* (cap) stack of free slots */
    int n_free;
    int *dec_slot, *pre_slot, *pre_tok;
    int64_t *dec_ctx;
    eng_req **dec_req, **pre_req;
} eng_sched;

static eng_sched *sched_new(int cap)
{
    eng_sched *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cap = cap;
    s->run = calloc((size_t)cap, sizeof *s->run);
    s->free_slot = calloc((size_t)cap, sizeof *s->free_slot);
    s->dec_slot = calloc((size_t)cap, sizeof(int));
    s->pre_slot = calloc((size_t)cap, sizeof(int));
    s->pre_tok = calloc((size_t)cap, sizeof(int));
    s->dec_ctx = calloc((size_t)cap, sizeof(int64_t));
    s->dec_req = calloc((size_t)cap, sizeof(eng_req *));
    s->pre_req = calloc((size_t)cap, sizeof(eng_req *));
    if (!s->run || !s->free_slot || !s->dec_slot || !s->pre_slot || !s->pre_tok ||
        !s->dec_ctx || !s->dec_req || !s->pre_req) {
        free(s->run); free(s->free_slot); free(s->dec_slot); free(s->pre_slot);
        free(s->pre_tok); free(s->dec_ctx); free(s->dec_req); free(s->pre_req);
        free(s);
        return NULL;
    }
    for (int i = 0; i < cap; i++)
        s->free_slot[i] = cap - 1 - i;
    s->n_free = cap;
    return s;
}

static void sched_free(eng_sched *s)
{
    if (!s)
        return;
    free(s->run); free(s->free_slot); free(s->dec_slot); free(s->pre_slot);
    free(s->pre_tok); free(s->dec_ctx); free(s->dec_req); free(s->pre_req);
    free(s);
}

int eng_sched_submit(eng_engine *e, eng_req *r)
{
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        rc = LL_EINTR;
    } else if (e->n_waiting >= e->cfg.max_waiting +
                                    (e->cfg.max_running - atomic_load(&e->n_running))) {
        /* Requests that free slots will take at the next step are not
         * "waiting" in the sense of the bound. */
        e->req_rejected++;
        rc = LL_ERANGE;
    } else {
        eng_req_ref(r); /* the scheduler's reference */
        r->submit_ns = ll_now_ns();
        r->next = NULL;
        if (e->wait_tail)
            e->wait_tail->next = r;
        else
            e->wait_head = r;
        e->wait_tail = r;
        e->n_waiting++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* Remove run[i] (order kept: prefill priority is admission order). */
static void drop_running(eng_engine *e, eng_sched *s, int i)
{
    eng_req *r = s->run[i];
    e->be->release(e->be_state, r->slot);
    s->free_slot[s->n_free++] = r->slot;
    memmove(&s->run[i], &s->run[i + 1], (size_t)(s->n_run - i - 1) * sizeof *s->run);
    s->n_run--;
    atomic_store(&e->n_running, s->n_run);
    eng_req_unref(r);
}

/* Wake a suspended connection: caller holds io_mu. */
static void wake(eng_req *r)
{
    if (r->suspended) {
        r->suspended = 0;
        MHD_resume_connection(r->conn);
    }
}

/* A non-streaming response sends nothing until its last token, so a client
 * that leaves is never noticed by a failing write (as a stream's is): look at
 * its socket instead. Only while the connection is suspended, when MHD neither
 * touches nor closes that socket. EOF or an error means the client has gone;
 * bytes waiting (a pipelined request) do not. Caller holds io_mu. */
static int client_left(const eng_req *r)
{
    if (r->stream || !r->suspended || r->fd < 0)
        return 0;
    char c;
    ssize_t k = recv(r->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Mark running non-streaming requests whose client left as cancelled and end
 * their responses (so MHD closes and frees the connection). */
static void check_clients(eng_engine *e, eng_sched *s)
{
    pthread_mutex_lock(&e->io_mu);
    for (int i = 0; i < s->n_run; i++) {
        eng_req *r = s->run[i];
        if (client_left(r)) {
            atomic_store(&r->cancelled, 1);
            r->aborted = 1;
            wake(r);
        }
    }
    pthread_mutex_unlock(&e->io_mu);
}

/* Under mu: unlink cancelled waiting requests (their clients are gone). */
static void drop_cancelled_waiting(eng_engine *e)
{
    eng_req **pp = &e->wait_head, *prev = NULL;
    while (*pp) {
        eng_req *r = *pp;
        if (atomic_load(&r->cancelled)) {
            *pp = r->next;
            if (e->wait_tail == r)
                e->wait_tail = prev;
            e->n_waiting--;
            e->req_cancelled++;
            eng_req_unref(r);
        } else {
            prev = r;
            pp = &r->next;
        }
    }
}

/* Hand this step's tokens (one per sequence) to their streams. */
static void emit(eng_engine *e, eng_sched *s, int n_dec, int n_pre_done)
{
    pthread_mutex_lock(&e->io_mu);
    for (int k = 0; k < n_dec + n_pre_done; k++) {
        eng_req *r = k < n_dec ? s->dec_req[k] : s->pre_req[k - n_dec];
        int pos = r->gen++;
        r->started = 1;
        int rc = 0;
        if (r->stream)
            rc = eng_sse_tokens(r, pos, 1);
        if (r->gen == r->target_tok) {
            if (!r->stream && !rc)
                rc = eng_json_full(r);
            r->finished = 1;
        }
        if (rc)
            r->aborted = 1; /* out of memory: end this stream with an error */
        /* A non-streaming response has nothing to send before it ends:
         * resuming it each step would only make MHD suspend it again. */
        if (r->stream || r->finished || r->aborted)
            wake(r);
    }
    pthread_mutex_unlock(&e->io_mu);
}

/* Make room for one more step in the log, outside the step's timed span.
 * Out of memory only drops that step from the log (the engine goes on). */
static void log_reserve(eng_engine *e)
{
    pthread_mutex_lock(&e->log_mu);
    if (e->log_n == e->log_cap) {
        size_t cap = e->log_cap ? e->log_cap * 2 : 4096;
        eng_step *nl = realloc(e->log, cap * sizeof *nl);
        if (nl) {
            e->log = nl;
            e->log_cap = cap;
        }
    }
    pthread_mutex_unlock(&e->log_mu);
}

static void *sched_main(void *arg)
{
    eng_engine *e = arg;
    eng_sched *s = e->sched;
    eng_phase ph[ENG_MAX_PHASES];
    int64_t plan = 0, prev_end = 0, last_dur = 0;
    int chained = 0;

    /* Default timer slack (50 us) would add itself to every deadline. */
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0)
        ll_debug("engine: could not lower the scheduler's timer slack");
    /* The synthetic backend only sleeps: a real-time priority, where the
     * system grants it, lets it wake on its deadline even when the HTTP and
     * client threads keep every core busy. Never for backends that compute
     * on this thread (they would starve the rest). Refusal is normal. */
    if (e->be == &eng_backend_synthetic) {
        struct sched_param sp = {.sched_priority = 1};
        int prc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
        if (prc)
            ll_info("engine: no real-time (SCHED_FIFO) priority for the scheduler (%s); "
                    "running at normal priority", strerror(prc));
    }
    for (;;) {
        check_clients(e, s);
        for (int i = 0; i < s->n_run;)
            if (atomic_load(&s->run[i]->cancelled)) {
                drop_running(e, s, i);
                pthread_mutex_lock(&e->mu);
                e->req_cancelled++;
                pthread_mutex_unlock(&e->mu);
            } else {
                i++;
            }
        pthread_mutex_lock(&e->mu);
        drop_cancelled_waiting(e);
        while (!e->stopping && s->n_run == 0 && !e->wait_head) {
            chained = 0;
            int64_t wake_ns = eng_prof_idle(e);
            if (wake_ns > 0) {
                struct timespec ts = {.tv_sec = wake_ns / 1000000000LL, .tv_nsec = wake_ns % 1000000000LL};
                pthread_cond_timedwait(&e->cv, &e->mu, &ts); /* ETIMEDOUT: re-checked above */
            } else {
                pthread_cond_wait(&e->cv, &e->mu);
            }
            drop_cancelled_waiting(e);
        }
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        while (s->n_run < s->cap && e->wait_head) {
            eng_req *r = e->wait_head;
            e->wait_head = r->next;
            if (!e->wait_head)
                e->wait_tail = NULL;
            e->n_waiting--;
            r->next = NULL;
            r->slot = s->free_slot[--s->n_free];
            s->run[s->n_run++] = r;
        }
        atomic_store(&e->n_running, s->n_run);
        pthread_mutex_unlock(&e->mu);

        /* The batch: every started sequence decodes one token; prefill chunks
         * go to the oldest unstarted ones until the budget is spent. */
        int n_dec = 0, n_pre = 0, n_pre_done = 0, budget = e->cfg.prefill_budget_tok;
        int64_t ctx = 0;
        int pre_total = 0;
        for (int i = 0; i < s->n_run; i++) {
            eng_req *r = s->run[i];
            if (r->started) {
                s->dec_req[n_dec] = r;
                s->dec_slot[n_dec] = r->slot;
                s->dec_ctx[n_dec] = (int64_t)r->prompt_tok + r->gen;
                ctx += s->dec_ctx[n_dec];
                n_dec++;
            } else {
                int left = r->prompt_tok - r->prefilled;
                if (left > 0 && budget == 0)
                    continue;
                int chunk = left < budget ? left : budget;
                budget -= chunk;
                s->pre_slot[n_pre] = r->slot;
                s->pre_tok[n_pre] = chunk;
                s->pre_req[n_pre] = r;
                pre_total += chunk;
                r->prefilled += chunk;
                n_pre++;
            }
        }
        /* Sequences whose prefill completes now emit their first token at the
         * step's end: move them to the front of pre_req for emit(). */
        for (int i = 0; i < n_pre; i++)
            if (s->pre_req[i]->prefilled == s->pre_req[i]->prompt_tok) {
                eng_req *t = s->pre_req[i];
                s->pre_req[i] = s->pre_req[n_pre_done];
                s->pre_req[n_pre_done++] = t;
            }
        eng_batch batch = {
            .n_decode = n_dec, .decode_slot = s->dec_slot, .decode_ctx = s->dec_ctx,
            .n_prefill = n_pre, .prefill_slot = s->pre_slot, .prefill_tok = s->pre_tok,
            .prefill_tok_total = pre_total, .ctx_tok_total = ctx,
        };
        /* pre_slot/pre_tok were filled in admission order; the swap above
         * only reorders pre_req, which the backend never sees. */

        log_reserve(e);
        int64_t now = ll_now_ns();
        int64_t slack = last_dur > 200000 ? last_dur : 200000;
        if (!chained || now - plan > slack) {
            plan = now;
            prev_end = now;
        }
        int n_ph = 0;
        int rc = e->be->step(e->be_state, &batch, plan, ph, &n_ph);
        int64_t end = ll_now_ns();
        if (rc) {
            snprintf(e->fail_msg, sizeof e->fail_msg, "backend %s step failed (%s)",
                     e->be->name, ll_strerror(rc));
            atomic_store(&e->failed_rc, rc < 0 ? rc : LL_EIO);
            ll_error("engine: %s; stopping the scheduler", e->fail_msg);
            break;
        }
        if (n_ph < 0 || n_ph > ENG_MAX_PHASES)
            n_ph = 0;
        int64_t deadline = end;
        if (n_ph > 0 && ph[n_ph - 1].start_ns + ph[n_ph - 1].dur_ns > plan)
            deadline = ph[n_ph - 1].start_ns + ph[n_ph - 1].dur_ns;
        last_dur = deadline - plan;
        eng_step st = {.start_ns = prev_end, .dur_ns = end - prev_end, .n_decode = n_dec,
                       .n_running = s->n_run, .prefill_tok = pre_total, .ctx_tok = ctx};
        plan = deadline;
        prev_end = end;
        chained = 1;

        /* Log the step before its tokens go out, so a client that has read
         * its last token finds that step in eng_steps. The room was made
         * before the step (log_reserve): only a store stands between `end`
         * and the release, so dur_ns stays honest. */
        pthread_mutex_lock(&e->log_mu);
        if (e->log_n < e->log_cap)
            e->log[e->log_n++] = st;
        pthread_mutex_unlock(&e->log_mu);

        /* Account for it (metrics, a profile capture) before the release
         * too: a client that has its last token and then asks for /metrics
         * or POST /stop_profile finds this step there. Every decoding and
         * every just-prefilled sequence gets one token. */
        pthread_mutex_lock(&e->mu);
        eng_metrics_step(e, &st, ph, n_ph, n_dec + n_pre_done);
        eng_prof_record(e, &st, ph, n_ph);
        pthread_mutex_unlock(&e->mu);

        emit(e, s, n_dec, n_pre_done);

        for (int i = 0; i < s->n_run;)
            if (s->run[i]->gen >= s->run[i]->target_tok) {
                drop_running(e, s, i);
                pthread_mutex_lock(&e->mu);
                e->req_finished++;
                pthread_mutex_unlock(&e->mu);
            } else {
                i++;
            }
    }

    /* Stopping (or a failed backend): end every request still here. */
    pthread_mutex_lock(&e->mu);
    eng_req *w = e->wait_head;
    e->wait_head = e->wait_tail = NULL;
    e->n_waiting = 0;
    e->stopping = 1;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&e->io_mu);
    for (eng_req *r = w; r; r = r->next) {
        r->aborted = 1;
        wake(r);
    }
    for (int i = 0; i < s->n_run; i++) {
        s->run[i]->aborted = 1;
        wake(s->run[i]);
    }
    pthread_mutex_unlock(&e->io_mu);
    while (w) {
        eng_req *n = w->next;
        eng_req_unref(w);
        w = n;
    }
    while (s->n_run > 0)
        drop_running(e, s, s->n_run - 1);
    if (atomic_load(&e->failed_rc) && e->cfg.on_failure)
        e->cfg.on_failure(e->cfg.on_failure_arg, e->fail_msg);
    return NULL;
}

int eng_sched_start(eng_engine *e, char *err, size_t errlen)
{
    e->sched = sched_new(e->cfg.max_running);
    if (!e->sched) {
        ll_errf(err, errlen, "scheduler: out of memory (max_running %d)", e->cfg.max_running);
        return LL_ENOMEM;
    }
    int rc = pthread_create(&e->sched_thread, NULL, sched_main, e);
    if (rc) {
        ll_errf(err, errlen, "scheduler: pthread_create: %s", strerror(rc));
        sched_free(e->sched);
        e->sched = NULL;
        return LL_ESYS;
    }
    e->sched_started = 1;
    return 0;
}

void eng_sched_stop(eng_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->sched_started) {
        pthread_join(e->sched_thread, NULL);
        e->sched_started = 0;
    }
    sched_free(e->sched);
    e->sched = NULL;
}
