/* sched.c: the continuous-batching scheduler thread.
 *
 * Each step: drop cancelled requests, admit waiting ones up to max_running,
 * give every decoding sequence one token and spend the prefill budget on the
 * oldest prefilling sequences (chunked prefill), let the backend play the
 * step, then publish it (step log, attached records writer, metrics, profile
 * capture) and hand the tokens to their streams at once (published first, so
 * neither the step log nor the records ever trail what clients have
 * received). sched_main reads as that list: drop_cancelled_running,
 * next_work, build_batch, play_step, publish_step, emit (sched_emit.c),
 * drop_finished.
 *
 * DESIGN, timing: steps chain on absolute deadlines. Step k+1 is planned to
 * start at step k's deadline, not when the scheduler got round to it, so the
 * work done between steps (emitting tokens, admitting) is absorbed into the
 * next step and busy steps average exactly the law. When the scheduler is late
 * by more than a step (overload) or wakes from idle, the chain restarts at
 * "now" rather than shortening later steps to catch up. With nothing to do the
 * thread sleeps on a condition variable: no empty steps, no busy loop.
 *
 * DESIGN, backpressure: a step does not start while the previous step's
 * tokens still sit in the streams' buffers, not yet handed to MHD
 * (eng_sched_wait_drained, sched_emit.c). Without it a cheap law (0+0n) let
 * the scheduler loop without ever sleeping: it held io_mu and resumed every
 * connection at each step, starving the HTTP thread that must write the
 * events, and the unsent bytes piled up (fewer events/s at 0+0n than at
 * 0.05+0.001n). The wait happens after a step's deadline was set, so for a
 * law the server keeps up with it is absorbed into the next step like any
 * other work between steps. It is bounded: a client that stopped reading
 * (its backlog past ENG_STUCK_BYTES) does not hold the others back, and when
 * only such clients are left the scheduler still sleeps
 * ENG_DRAIN_WAIT_MAX_NS per step rather than spin.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "internal.h"
#include "sched_internal.h"


static void sched_free(eng_sched *s)
{
    if (!s)
        return;
    free(s->run); free(s->free_slot); free(s->dec_slot); free(s->pre_slot);
    free(s->pre_tok); free(s->dec_ctx); free(s->dec_req); free(s->pre_req);
    free(s->dec_seed); free(s->pre_seed); free(s->dec_out); free(s->pre_out); free(s->pre_at);
    free(s->pre_cont);
    free(s);
}

static eng_sched *sched_new(int cap)
{
    eng_sched *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cap = cap;
    s->run = calloc((size_t)cap, sizeof *s->run);
    s->free_slot = calloc((size_t)cap, sizeof *s->free_slot);
    s->dec_slot = calloc((size_t)cap, sizeof *s->dec_slot);
    s->pre_slot = calloc((size_t)cap, sizeof *s->pre_slot);
    s->pre_tok = calloc((size_t)cap, sizeof *s->pre_tok);
    s->dec_ctx = calloc((size_t)cap, sizeof *s->dec_ctx);
    s->dec_req = calloc((size_t)cap, sizeof *s->dec_req);
    s->pre_req = calloc((size_t)cap, sizeof *s->pre_req);
    s->dec_seed = calloc((size_t)cap, sizeof *s->dec_seed);
    s->pre_seed = calloc((size_t)cap, sizeof *s->pre_seed);
    s->dec_out = calloc((size_t)cap, sizeof *s->dec_out);
    s->pre_out = calloc((size_t)cap, sizeof *s->pre_out);
    s->pre_cont = calloc((size_t)cap, sizeof *s->pre_cont);
    s->pre_at = calloc((size_t)cap, sizeof *s->pre_at);
    if (!s->run || !s->free_slot || !s->dec_slot || !s->pre_slot || !s->pre_tok ||
        !s->dec_ctx || !s->dec_req || !s->pre_req || !s->dec_seed || !s->pre_seed ||
        !s->dec_out || !s->pre_out || !s->pre_at || !s->pre_cont) {
        sched_free(s);
        return NULL;
    }
    for (int i = 0; i < cap; i++)
        s->free_slot[i] = cap - 1 - i;
    s->n_free = cap;
    return s;
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
            eng_sched_wake(r);
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

/* Make room for one more step in the log, outside the step's timed span.
 * The ring grows by doubling up to step_log_max entries and is then reused
 * (publish_step). Out of memory only drops that step from the log (the
 * engine goes on). */
static void log_reserve(eng_engine *e)
{
    size_t max = e->cfg.step_log_max;
    pthread_mutex_lock(&e->log_mu);
    if (e->log.n == e->log.cap && e->log.cap < max) {
        size_t cap = e->log.cap ? e->log.cap * 2 : 1024;
        if (cap > max)
            cap = max;
        eng_step *v = realloc(e->log.v, cap * sizeof *v);
        if (v) {
            e->log.v = v;
            e->log.cap = cap;
        }
    }
    pthread_mutex_unlock(&e->log_mu);
}

/* ---- the steps of sched_main, in the order it runs them ------------------ */

/* The chain of deadlines across steps (DESIGN above). */
typedef struct step_clock {
    int64_t plan;            /* when the next step is planned to start */
    int64_t prev_end;        /* when the last step ended (the next one's start_ns) */
    int64_t last_dur;        /* the last step's planned length */
    int chained;             /* 0 after idling: the next step starts the chain anew */
} step_clock;

/* Once, on the scheduler thread: tighter timers, and a real-time priority
 * for a backend that only sleeps (ENG_CAP_SLEEPS). Where the system grants
 * it, the thread wakes on its deadline even when the HTTP and client threads
 * keep every core busy. Never for backends that compute on this thread (they
 * would starve the rest). Refusal is normal. */
static void setup_thread(eng_engine *e)
{
    /* Default timer slack (50 us) would add itself to every deadline. */
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0)
        ll_debug("engine: could not lower the scheduler's timer slack");
    if (!(e->be->caps & ENG_CAP_SLEEPS))
        return;
    struct sched_param sp = {.sched_priority = 1};
    int prc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (prc)
        ll_info("engine: no real-time (SCHED_FIFO) priority for the scheduler (%s); "
                "running at normal priority", strerror(prc));
}

/* Drop running requests whose client has gone. */
static void drop_cancelled_running(eng_engine *e, eng_sched *s)
{
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
}

/* Sleep until there is work (or a profile capture's deadline to check).
 * Caller holds mu. Idling breaks the deadline chain. */
static void wait_for_work(eng_engine *e, eng_sched *s, step_clock *clk)
{
    drop_cancelled_waiting(e);
    while (!e->stopping && s->n_run == 0 && !e->wait_head) {
        clk->chained = 0;
        int64_t wake_ns = eng_prof_idle(e);
        if (wake_ns > 0) {
            struct timespec ts = {.tv_sec = wake_ns / 1000000000LL, .tv_nsec = wake_ns % 1000000000LL};
            pthread_cond_timedwait(&e->cv, &e->mu, &ts); /* ETIMEDOUT: re-checked above */
        } else {
            pthread_cond_wait(&e->cv, &e->mu);
        }
        drop_cancelled_waiting(e);
    }
}

/* Move waiting requests into free slots, oldest first. Caller holds mu. */
static void admit_waiting(eng_engine *e, eng_sched *s)
{
    while (s->n_run < s->cap && e->wait_head) {
        eng_req *r = e->wait_head;
        e->wait_head = r->next;
        if (!e->wait_head)
            e->wait_tail = NULL;
        e->n_waiting--;
        r->next = NULL;
        r->slot = s->free_slot[--s->n_free];
        s->run[s->n_run++] = r;
        eng_metrics_lat(&e->queue, ll_now_ns() - r->submit_ns);
        if (e->prefix) { /* its cached leading blocks are not prefilled again */
            r->cached_tok = eng_prefix_admit(e->prefix, r->prefix_keys, r->n_prefix_keys, r->prompt_tok);
            r->prefilled = r->cached_tok;
            e->prompt_cached_total += (uint64_t)r->cached_tok;
        }
    }
    atomic_store(&e->n_running, s->n_run);
}

/* Wait for work and admit it. 1 when the engine is stopping. */
static int next_work(eng_engine *e, eng_sched *s, step_clock *clk)
{
    pthread_mutex_lock(&e->mu);
    wait_for_work(e, s, clk);
    int stopping = e->stopping;
    if (!stopping)
        admit_waiting(e, s);
    pthread_mutex_unlock(&e->mu);
    return stopping;
}

/* The batch: every started sequence decodes one token; prefill chunks go to
 * the oldest unstarted ones until the budget is spent. Sequences whose
 * prefill completes in this step emit their first token at its end: they
 * come first in pre_req (*n_pre_done of them) for eng_sched_emit(). */
static eng_batch build_batch(eng_engine *e, eng_sched *s, int *n_pre_done)
{
    int n_dec = 0, n_pre = 0, budget = e->cfg.prefill_budget_tok, pre_total = 0, want_lp = 0;
    int64_t ctx = 0;
    for (int i = 0; i < s->n_run; i++) {
        eng_req *r = s->run[i];
        if (r->started) {
            s->dec_req[n_dec] = r;
            s->dec_slot[n_dec] = r->slot;
            s->dec_ctx[n_dec] = (int64_t)r->prompt_tok + r->gen;
            s->dec_seed[n_dec] = r->seed;
            s->dec_out[n_dec].id = -1;
            want_lp |= r->lp_top >= 0;
            ctx += s->dec_ctx[n_dec];
            n_dec++;
            continue;
        }
        int left = r->prompt_tok - r->prefilled;
        if (left > 0 && budget == 0)
            continue;
        int chunk = left < budget ? left : budget;
        budget -= chunk;
        s->pre_slot[n_pre] = r->slot;
        s->pre_tok[n_pre] = chunk;
        s->pre_req[n_pre] = r;
        s->pre_seed[n_pre] = r->seed;
        s->pre_out[n_pre].id = -1;
        s->pre_at[n_pre] = n_pre;
        pre_total += chunk;
        r->prefilled += chunk;
        s->pre_cont[n_pre] = r->cont.n > 0 && r->prefilled == r->prompt_tok ? &r->cont : NULL;
        want_lp |= r->lp_top >= 0;
        n_pre++;
    }
    /* pre_slot/pre_tok stay in admission order; this only reorders pre_req,
     * which the backend never sees. */
    *n_pre_done = 0;
    for (int i = 0; i < n_pre; i++)
        if (s->pre_req[i]->prefilled == s->pre_req[i]->prompt_tok) {
            eng_req *t = s->pre_req[i];
            int at = s->pre_at[i];
            s->pre_req[i] = s->pre_req[*n_pre_done];
            s->pre_at[i] = s->pre_at[*n_pre_done];
            s->pre_at[*n_pre_done] = at;
            s->pre_req[(*n_pre_done)++] = t;
        }
    return (eng_batch){
        .n_decode = n_dec, .decode_slot = s->dec_slot, .decode_ctx = s->dec_ctx,
        .n_prefill = n_pre, .prefill_slot = s->pre_slot, .prefill_tok = s->pre_tok,
        .prefill_tok_total = pre_total, .ctx_tok_total = ctx,
        .decode_seed = s->dec_seed, .prefill_seed = s->pre_seed,
        .decode_out = s->dec_out, .prefill_out = s->pre_out,
        .prefill_cont = (const eng_cont *const *)s->pre_cont, .want_lp = want_lp,
    };
}

/* A failed backend step stops the scheduler for good (eng_failed). */
static void record_failure(eng_engine *e, int rc)
{
    const char *why = e->be->last_error ? e->be->last_error(e->be_state) : NULL;
    snprintf(e->fail_msg, sizeof e->fail_msg, "backend %s step failed (%s)%s%s", e->be->name,
             ll_strerror(rc), why ? ": " : "", why ? why : "");
    atomic_store(&e->failed_rc, rc < 0 ? rc : LL_EIO);
    ll_error("engine: %s; stopping the scheduler", e->fail_msg);
}

/* Let the backend play the batch on the deadline chain and describe the
 * step in *st. When the scheduler is late by more than a step (overload) or
 * comes back from idling, the chain restarts at "now" rather than shortening
 * later steps to catch up. The backend's error code on failure. */
static int play_step(eng_engine *e, eng_sched *s, const eng_batch *b, step_clock *clk,
                     eng_step *st, eng_phase *ph, int *n_ph)
{
    int64_t now = ll_now_ns();
    int64_t slack = clk->last_dur > 200000 ? clk->last_dur : 200000;
    if (!clk->chained || now - clk->plan > slack) {
        clk->plan = now;
        clk->prev_end = now;
    }
    *n_ph = 0;
    int rc = e->be->step(e->be_state, b, clk->plan, ph, n_ph);
    int64_t end = ll_now_ns();
    if (rc) {
        record_failure(e, rc);
        return rc;
    }
    if (*n_ph < 0 || *n_ph > ENG_MAX_PHASES)
        *n_ph = 0;
    /* The deadline is where the backend's last phase ends, if it planned one
     * beyond the start (the synthetic backend's law), else the step's end. */
    int64_t deadline = end;
    int planned = *n_ph > 0 && ph[*n_ph - 1].start_ns + ph[*n_ph - 1].dur_ns > clk->plan;
    if (planned)
        deadline = ph[*n_ph - 1].start_ns + ph[*n_ph - 1].dur_ns;
    *st = (eng_step){.start_ns = clk->prev_end, .dur_ns = end - clk->prev_end,
                     .n_decode = b->n_decode, .n_running = s->n_run,
                     .prefill_tok = b->prefill_tok_total, .ctx_tok = b->ctx_tok_total,
                     .plan_ns = planned ? deadline - clk->plan : 0,
                     .comm_ns = eng_phases_comm_ns(ph, *n_ph)};
    clk->last_dur = deadline - clk->plan;
    clk->plan = deadline;
    clk->prev_end = end;
    clk->chained = 1;
    return 0;
}

/* Put the step into the attached records writer (eng_set_records), on the
 * run clock. Steps that started before the run's epoch are not the run's. */
static void put_step_record(eng_engine *e, const eng_step *st)
{
    pthread_mutex_lock(&e->rec_mu);
    if (e->rec && st->start_ns >= e->rec_epoch_ns) {
        ll_rec_step r = {.start_ns = st->start_ns - e->rec_epoch_ns, .dur_ns = st->dur_ns,
                         .n_decode = st->n_decode, .n_running = st->n_running,
                         .prefill_tok = st->prefill_tok, .ctx_tok = st->ctx_tok,
                         .comm_ns = st->comm_ns};
        int rc = ll_rec_put_step(e->rec, &r);
        if (rc && !e->rec_warned) {
            ll_warn("engine: writing step records failed (%s); later failures are not logged",
                    ll_strerror(rc));
            e->rec_warned = 1;
        }
    }
    pthread_mutex_unlock(&e->rec_mu);
}

/* Make the step visible everywhere before its tokens go out, so a client
 * that has read its last token finds that step in eng_steps, in the records,
 * in /metrics and in a running profile capture. The log's room was made
 * before the step (log_reserve): only a store stands between the step's end
 * and its entry, so dur_ns stays honest. gen_tok: tokens the step made
 * (every decoding and every just-prefilled sequence gets one). */
static void publish_step(eng_engine *e, const eng_step *st, const eng_phase *ph, int n_ph,
                         int gen_tok)
{
    pthread_mutex_lock(&e->log_mu);
    if (e->log.n == e->cfg.step_log_max) { /* full: the newest replaces the oldest */
        e->log.v[e->log_total % e->log.n] = *st;
        e->log_total++;
    } else if (e->log.n < e->log.cap) {
        e->log.v[e->log.n++] = *st;
        e->log_total++;
    }
    pthread_mutex_unlock(&e->log_mu);

    put_step_record(e, st);

    pthread_mutex_lock(&e->mu);
    eng_metrics_step(e, st, ph, n_ph, gen_tok);
    eng_prof_record(e, st, ph, n_ph);
    pthread_mutex_unlock(&e->mu);
}

/* Drop the requests that have all their tokens. */
static void drop_finished(eng_engine *e, eng_sched *s)
{
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

/* A request that cannot go on (io_mu held). A stream ends as OpenAI-style
 * servers end one: an error event, then [DONE] (its 200 went out with its
 * headers), so a client reads why rather than a cut connection; a plain
 * request's 200 is also sent already and its body cannot say it, so its
 * connection ends in error. */
static void end_request(eng_engine *e, eng_req *r)
{
    static const char head[] = "data: ", tail[] = "\n\ndata: [DONE]\n\n";
    int failed = atomic_load(&e->failed_rc) != 0;
    if (r->stream && !r->finished && !r->aborted && ll_buf_append(&r->out, head, sizeof head - 1) == 0 &&
        eng_json_error(&r->out, failed ? 500 : 503, NULL, failed ? e->fail_msg : "the server is shutting down") ==
            0 &&
        ll_buf_append(&r->out, tail, sizeof tail - 1) == 0)
        r->finished = 1;
    else if (!r->finished)
        r->aborted = 1;
    eng_sched_wake(r);
}

/* Stopping (or a failed backend): end every request still here, waiting or
 * running (end_request), and refuse new ones. */
static void end_all_requests(eng_engine *e, eng_sched *s)
{
    pthread_mutex_lock(&e->mu);
    eng_req *w = e->wait_head;
    e->wait_head = e->wait_tail = NULL;
    e->n_waiting = 0;
    e->stopping = 1;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&e->io_mu);
    for (eng_req *r = w; r; r = r->next)
        end_request(e, r);
    for (int i = 0; i < s->n_run; i++)
        end_request(e, s->run[i]);
    pthread_mutex_unlock(&e->io_mu);
    while (w) {
        eng_req *n = w->next;
        eng_req_unref(w);
        w = n;
    }
    while (s->n_run > 0)
        drop_running(e, s, s->n_run - 1);
}

static void *sched_main(void *arg)
{
    eng_engine *e = arg;
    eng_sched *s = e->sched;
    step_clock clk = {0};
    setup_thread(e);
    for (;;) {
        drop_cancelled_running(e, s);
        if (next_work(e, s, &clk))
            break;
        int n_pre_done;
        eng_batch b = build_batch(e, s, &n_pre_done);
        eng_step st;
        eng_phase ph[ENG_MAX_PHASES];
        int n_ph;
        log_reserve(e);
        if (play_step(e, s, &b, &clk, &st, ph, &n_ph))
            break;
        publish_step(e, &st, ph, n_ph, b.n_decode + n_pre_done);
        eng_sched_emit(e, s, b.n_decode, n_pre_done, st.start_ns + st.dur_ns);
        drop_finished(e, s);
        eng_sched_wait_drained(e, s);
    }
    end_all_requests(e, s);
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
