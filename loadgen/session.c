/* session.c: load.sessions on a worker: its slots each hold one
 * conversation at a time, and this file walks them.
 *
 * DESIGN: a closed level with sessions keeps C conversations in flight, not
 * C requests: the worker's `slots` are conversation slots. An idle slot
 * takes the level's next conversation from the shared atomic counter (as a
 * closed level takes requests); the conversation then sends turn 1, and
 * when a turn's answer has ended, it waits the think time and sends the next
 * turn with everything before it: each earlier user message and the answer
 * text actually received for it (thinking left out, as chat templates drop
 * it), as chat messages in order, then the new user message. A failed turn,
 * or the last, ends the conversation and frees the slot. Everything here
 * runs on the worker's thread; a slot belongs to its worker.
 *
 * The first user message begins with a head naming the conversation and
 * the run ("[s0.3-7f3a9c21] "): no two conversations share a prefix, while
 * each turn's prompt begins with the whole of the turn before it, which is
 * what a server's prefix cache can serve. */
#include "lg_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int lg_sess_assign(lg_worker *w, int n)
{
    lg_sess_free_all(w);
    if (n <= 0)
        return 0;
    if (!(w->sess = calloc((size_t)n, sizeof *w->sess)))
        return LL_ENOMEM;
    w->n_sess = n;
    return 0;
}

void lg_sess_free_all(lg_worker *w)
{
    for (int i = 0; i < w->n_sess; i++) {
        ll_buf_free(&w->sess[i].hist);
        ll_buf_free(&w->sess[i].user);
    }
    free(w->sess);
    w->sess = NULL;
    w->n_sess = 0;
}

static int count_words(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++)
        w += s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r' &&
             (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\n' || s[i - 1] == '\t' || s[i - 1] == '\r');
    return w;
}

/* The head of a conversation's first message: the level and conversation,
 * then the run's tag (or, recording outputs for an A/B, the prompt set's
 * seed: both sides then send the same conversations). */
static int put_head(const lg_run *r, int level, int64_t session, ll_buf *b)
{
    if (r->scn->record_outputs)
        return ll_buf_printf(b, "[s%d.%" PRId64 "-s%" PRIu64 "] ", level, session, r->scn->seed);
    return ll_buf_printf(b, "[s%d.%" PRId64 "-%.8s] ", level, session, r->run_tag);
}

/* The slot's next turn: its user message, then the request. 1 when the
 * conversation has no such turn (a shorter ShareGPT conversation: it ends
 * here), else 0 or a code (w->rc is set by the caller). */
static int send_turn(lg_worker *w, lg_sess *q)
{
    lg_run *r = w->run;
    int rc;
    ll_buf_reset(&q->user);
    if (q->turn == 1 && (rc = put_head(r, w->lvl->index, q->session, &q->user)))
        return rc;
    if ((rc = scn_session_user(r->scn, r->prompts, w->lvl->index, q->session, q->turn, &q->user)))
        return rc;
    int idx = q->local * r->scn->session_turns + q->turn - 1;
    if ((rc = lg_xfer_start(w, idx, -1, q)))
        return rc;
    q->state = LG_SESS_INFLIGHT;
    return 0;
}

/* An idle slot takes the level's next conversation, if any is left. */
static void take_next(lg_worker *w, lg_sess *q, int64_t now)
{
    lg_level_ctx *L = w->lvl;
    int idx = atomic_fetch_add(&L->next, 1);
    if (idx >= L->sessions) {
        q->state = LG_SESS_DONE;
        return;
    }
    q->local = idx;
    q->session = (int64_t)idx * w->run->ranks + w->run->rank;
    q->turn = 1;
    q->hist_words = 0;
    ll_buf_reset(&q->hist);
    q->state = LG_SESS_DUE;
    q->due_ns = now;
}

int lg_sess_issue(lg_worker *w, int64_t now)
{
    int live = 0;
    for (int i = 0; i < w->n_sess && w->rc == 0; i++) {
        lg_sess *q = &w->sess[i];
        /* a conversation that ends at once (no such turn) frees the slot again */
        for (int tries = 0; tries < 64 && (q->state == LG_SESS_IDLE || q->state == LG_SESS_DUE); tries++) {
            if (q->state == LG_SESS_IDLE)
                take_next(w, q, now);
            if (q->state != LG_SESS_DUE || q->due_ns > now)
                break;
            int rc = send_turn(w, q);
            if (rc == 1) {
                q->state = LG_SESS_IDLE;
            } else if (rc) {
                w->rc = rc;
                snprintf(w->err, sizeof w->err, "starting a session's turn: %s", ll_strerror(rc));
            }
        }
        live += q->state != LG_SESS_DONE;
    }
    return live;
}

int64_t lg_sess_next_due(const lg_worker *w)
{
    int64_t t = INT64_MAX;
    for (int i = 0; i < w->n_sess; i++)
        if (w->sess[i].state == LG_SESS_DUE && w->sess[i].due_ns < t)
            t = w->sess[i].due_ns;
    return t;
}

/* One message object {"role":R,"content":TEXT}, after a comma unless first. */
static int put_message(ll_buf *b, const char *role, const char *text, size_t n)
{
    int rc = 0;
    char *t = strndup(text ? text : "", text ? n : 0);
    LL_TRY(t ? 0 : LL_ENOMEM);
    LL_TRY(ll_buf_printf(b, "%s{\"role\":\"%s\",\"content\":", b->len ? "," : "", role));
    LL_TRY(ll_json_escape(b, t));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    free(t);
    return rc;
}

int lg_sess_put_messages(ll_buf *b, const lg_sess *q, int *words)
{
    ll_buf msgs = {0};
    int rc = 0;
    LL_TRY(ll_buf_append(b, "[", 1));
    if (q->hist.len)
        LL_TRY(ll_buf_append(b, q->hist.p, q->hist.len));
    LL_TRY(put_message(&msgs, "user", q->user.p, q->user.len));
    if (q->hist.len)
        LL_TRY(ll_buf_append(b, ",", 1));
    LL_TRY(ll_buf_append(b, msgs.p, msgs.len));
    LL_TRY(ll_buf_append(b, "]", 1));
    *words = q->hist_words + count_words(q->user.p ? q->user.p : "", q->user.len);
fail:
    ll_buf_free(&msgs);
    return rc;
}

void lg_sess_end(lg_worker *w, lg_sess *q, const ll_buf *answer, int ok, int64_t now)
{
    const scn_scenario *s = w->run->scn;
    if (!ok || q->turn >= s->session_turns) {
        q->state = LG_SESS_IDLE; /* over: the slot takes the next conversation */
        return;
    }
    if (put_message(&q->hist, "user", q->user.p, q->user.len) ||
        put_message(&q->hist, "assistant", answer->p, answer->len)) {
        q->state = LG_SESS_IDLE; /* out of memory: this conversation ends here */
        return;
    }
    q->hist_words += count_words(q->user.p ? q->user.p : "", q->user.len) +
                     count_words(answer->p ? answer->p : "", answer->len);
    q->turn++;
    q->due_ns = now + (int64_t)(s->session_think_ms * 1e6);
    q->state = LG_SESS_DUE;
}
