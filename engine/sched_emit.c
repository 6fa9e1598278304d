/* sched_emit.c: a step's tokens to their streams (sched_internal.h): the
 * tokens kept for the response, the SSE events, the hand-off samples, TTFT
 * and ITL into /metrics; and the backpressure wait that holds the next step
 * until the streams' bytes are handed over (sched.c's DESIGN says why). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

void eng_sched_wake(eng_req *r)
{
    if (r->suspended) {
        r->suspended = 0;
        MHD_resume_connection(r->conn);
    }
}

/* Keep the token the backend's model chose at pos (none: id < 0), for sse.c. */
static int keep_token(eng_req *r, int pos, const eng_tok *t)
{
    if (t->id < 0 || pos >= r->target_tok)
        return 0;
    if (!r->toks && !(r->toks = calloc((size_t)r->target_tok, sizeof *r->toks)))
        return LL_ENOMEM;
    r->toks[pos] = *t;
    return 0;
}

/* The step's first tokens (TTFT) and gaps (ITL) into /metrics. */
static void observe_tokens(eng_engine *e, eng_sched *s, int n_dec, int n_pre_done, int64_t step_end_ns)
{
    pthread_mutex_lock(&e->mu);
    for (int k = 0; k < n_dec + n_pre_done; k++) {
        eng_req *r = k < n_dec ? s->dec_req[k] : s->pre_req[k - n_dec];
        if (r->gen == 0)
            eng_metrics_lat(&e->ttft, step_end_ns - r->submit_ns);
        else
            eng_metrics_lat(&e->itl, step_end_ns - r->last_tok_ns);
        r->last_tok_ns = step_end_ns;
    }
    pthread_mutex_unlock(&e->mu);
}

/* Hand this step's tokens (one per sequence) to their streams. */
void eng_sched_emit(eng_engine *e, eng_sched *s, int n_dec, int n_pre_done, int64_t step_end_ns)
{
    int k_sample = e->cfg.handoff_sample;
    observe_tokens(e, s, n_dec, n_pre_done, step_end_ns);
    pthread_mutex_lock(&e->io_mu);
    for (int k = 0; k < n_dec + n_pre_done; k++) {
        eng_req *r = k < n_dec ? s->dec_req[k] : s->pre_req[k - n_dec];
        int pos = r->gen++;
        r->started = 1;
        int rc = keep_token(r, pos, k < n_dec ? &s->dec_out[k] : &s->pre_out[s->pre_at[k - n_dec]]);
        if (r->stream && !rc)
            rc = eng_sse_tokens(r, pos, 1);
        if (k_sample > 0 && r->stream && !rc && pos % k_sample == 0) {
            /* eng_response_read_cb records it once the stream's bytes up to here are handed over */
            if (r->hs_n < ENG_HANDOFF_PENDING) {
                int i = (r->hs_head + r->hs_n++) % ENG_HANDOFF_PENDING;
                r->hs[i].tok = pos;
                r->hs[i].step_end_ns = step_end_ns;
                r->hs[i].end_off = r->sent_total + (int64_t)(r->out.len - r->out_off);
            } else {
                atomic_fetch_add(&e->handoff_dropped, 1);
            }
        }
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
            eng_sched_wake(r);
    }
    pthread_mutex_unlock(&e->io_mu);
}

/* A stream with more than this unsent has a client that stopped reading
 * (about 300 token events): the batch does not wait for it. */
#define ENG_STUCK_BYTES (64 * 1024)
/* The longest a step waits for the previous step's bytes to be handed over. */
#define ENG_DRAIN_WAIT_MAX_NS 10000000LL

/* Backpressure (DESIGN above): wait until no running stream whose client
 * reads has more than ENG_UNSENT_MAX_BYTES not yet handed to MHD; never
 * longer than ENG_DRAIN_WAIT_MAX_NS. The streams over the bound are marked
 * held; eng_response_read_cb releases them and signals drain_cv when none is left. A
 * spurious wake-up, a timeout or a client leaving (on_completed signals) only
 * means one more look. */
void eng_sched_wait_drained(eng_engine *e, eng_sched *s)
{
    int64_t until = ll_now_ns() + ENG_DRAIN_WAIT_MAX_NS;
    struct timespec ts = {.tv_sec = until / 1000000000LL, .tv_nsec = until % 1000000000LL};
    pthread_mutex_lock(&e->io_mu);
    for (;;) {
        int n_live = 0, n_held = 0, n_stuck = 0, n_plain = 0;
        for (int i = 0; i < s->n_run; i++) {
            eng_req *r = s->run[i];
            r->held = 0;
            if (r->aborted || r->finished || atomic_load(&r->cancelled))
                continue;
            if (!r->stream) {
                n_plain++;
                continue;
            }
            n_live++;
            size_t backlog = r->out.len - r->out_off;
            if (backlog > ENG_STUCK_BYTES) {
                n_stuck++;
            } else if (backlog > ENG_UNSENT_MAX_BYTES) {
                r->held = 1;
                n_held++;
            }
        }
        e->n_held = n_held;
        /* Done when no reading client is over the bound, unless every live
         * stream is stuck: then only the timeout ends the wait (no
         * spinning). A request that is not a stream has no reader to wait
         * for: while one runs, no step waits on a stream's client (a slow
         * or stuck one would hold its every token up to 10 ms). */
        if (n_plain > 0 || (n_held == 0 && (n_stuck == 0 || n_stuck < n_live)))
            break;
        if (pthread_cond_timedwait(&e->drain_cv, &e->io_mu, &ts) == ETIMEDOUT)
            break;
    }
    for (int i = 0; i < s->n_run; i++)
        s->run[i]->held = 0;
    e->n_held = 0;
    pthread_mutex_unlock(&e->io_mu);
}
