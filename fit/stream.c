/* stream.c: a big level analysed as one time-ordered sweep, in memory that
 * grows with the streams in flight, not with the level's events.
 *
 * A streamed level: one with more chunks than fit_options.stream_events
 * (fit_tuning.h FIT_STREAM_EVENTS). The exact walk (timeline.c, then
 * reduce.c) holds a K line of 16 bytes and a sample of 56 bytes per chunk
 * of the level, and sorts them: ~11 GB at 143 M events. Here the same
 * definitions (timeline.c atop) are computed in one pass in time order:
 *  - the requests with chunks wait in send order; at its send a stream
 *    decodes its chunks (fit_chunks_of, its own buffer) and joins a min-heap
 *    keyed by (its next event's time, its index in the level); it frees them
 *    after its last chunk and leaves at its K end event. Only the streams in
 *    flight are held decoded.
 *  - each pop is one instant of one stream: its chunks at that time (one
 *    arrival when they carry tokens: timeline.c "Arrival"), or its K end;
 *  - K(t) is a running sum of build_kline's very events (+prompt at the
 *    first chunk, +tokens per chunk, -total at max(end, last chunk + 1)).
 *    K is right-continuous, so every event at t is applied before any
 *    sample at t reads it: a stream's K at its previous arrival is taken
 *    once its instant is complete. Integers, so the sum is exact in any
 *    order;
 *  - each arrival makes its sample through fit_tl_sample (the exact walk's
 *    own), N from the P/D line by binary search;
 *  - the samples of one instant, sorted by N, go to streaming reducers:
 *    engine steps (reduce.c fit_step_feed: samples in time order, ties by
 *    N, as group_steps sorts them), position bins (position.c per-position
 *    sums, binned once pos_max is known), burst figures and the steady
 *    median (exact up to fit_options.stream_exact values, then common
 *    ll_pct's histogram, LL_PCT_REL_ERR, with a note), steady_n_max, the
 *    requests behind the steps (a flag per stream), the naive fit and the
 *    chart sample (fit_kept_samples, in time order here);
 *  - the level's per-chunk counts, ramp tokens and rates (fit_tl_chunk)
 *    in the same pass, so the sweep decodes each chunk once.
 * What differs from the exact walk: sums of doubles are added in another
 * order (the steps' and bins' ms and K: ~1e-15 relative), the chart and
 * naive points come in time order, and past the bound the burst figures
 * and steady median are within the histogram's error. A chunk stamped
 * before its request was sent (a damaged record: load.c clamps the request,
 * not its chunks) is taken when the sweep reaches the send; its gap keeps
 * its own times. Memory: 16 bytes a request for the send order, the P/D
 * line (3 events a request), ~100 bytes and the chunks of each stream in
 * flight, 32 bytes a position of the longest request, the bounded sets. */
#include "fit_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sw_stream {
    fit_chunks ch;
    size_t i;                 /* next chunk */
    uint32_t at;              /* index into the level's requests */
    int64_t prev_t;           /* its last arrival; -1: none yet */
    double k_prev;            /* K at prev_t */
    double total;             /* its share of K */
    int32_t pos;              /* tokens before its next arrival */
    unsigned char in_k, samples, behind_steps;
} sw_stream;

typedef struct sw_event {
    int64_t t_ns;
    uint32_t at, slot;        /* at: the heap's tie-break */
} sw_event;

typedef struct sw_arrival {
    int64_t t_ns;             /* its chunks' own time */
    uint32_t slot;
    int32_t tok;
    char kind;
} sw_arrival;

typedef struct sw_send {
    int64_t t_ns;
    uint32_t at;
} sw_send;

typedef struct sw_sweep {
    const fit_run *run;
    const size_t *req_idx;
    fit_tl_level tl;
    sw_send *order;           /* requests with chunks, by send time */
    size_t n_order, next;
    LL_VEC(sw_event) heap;
    LL_VEC(sw_stream) slot;
    LL_VEC(uint32_t) free_slot;
    LL_VEC(sw_arrival) arr;   /* arrivals of the instant */
    fit_sample_vec at_t;      /* samples of the instant */
    double k_sum;
    fit_sample_vec *sv;       /* collect here, or reduce into: */
    fit_result *res;
    fit_level_kept *lk;
    fit_step open;
    fit_pos_acc pos;
    ll_pct *burst;
    size_t n_samples, n_step_requests;
    double steady_n_max;
} sw_sweep;

int fit_stream_wanted(const fit_run *run, const size_t *req_idx, size_t n_req, const fit_options *opt)
{
    size_t bound = opt->stream_events ? opt->stream_events : FIT_STREAM_EVENTS, n = 0;
    for (size_t i = 0; i < n_req && n <= bound; i++)
        n += fit_run_request(run, req_idx[i])->n_chunks;
    return n > bound;
}

static size_t exact_bound(const fit_options *opt)
{
    return opt->stream_exact ? opt->stream_exact : FIT_PCT_EXACT;
}

/* ---- the heap of streams in flight: (time, index in the level) --------- */

static int ev_less(const sw_event *a, const sw_event *b)
{
    return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->at < b->at);
}

static int heap_push(sw_sweep *w, sw_event e)
{
    if (ll_vec_push(&w->heap, e))
        return LL_ENOMEM;
    sw_event *h = w->heap.v;
    for (size_t i = w->heap.n - 1; i > 0;) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&h[i], &h[p]))
            break;
        sw_event t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
    return 0;
}

static sw_event heap_pop(sw_sweep *w)
{
    sw_event *h = w->heap.v, top = h[0];
    size_t n = --w->heap.n, i = 0;
    h[0] = h[n];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ev_less(&h[l], &h[m]))
            m = l;
        if (r < n && ev_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            break;
        sw_event t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* ---- streams ---------------------------------------------------------- */

static int cmp_send(const void *a, const void *b)
{
    const sw_send *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
    return (x->at > y->at) - (x->at < y->at);
}

/* Every request with chunks, in send order; the rest are counted now. */
static int send_order(sw_sweep *w, size_t n_req)
{
    w->order = malloc((n_req ? n_req : 1) * sizeof *w->order);
    if (!w->order)
        return LL_ENOMEM;
    for (size_t i = 0; i < n_req; i++) {
        const ll_rec_request *q = fit_run_request(w->run, w->req_idx[i]);
        if (q->n_chunks)
            w->order[w->n_order++] = (sw_send){q->send_ns, (uint32_t)i};
        else
            fit_tl_request(&w->tl, q);
    }
    if (w->n_order > 1)
        qsort(w->order, w->n_order, sizeof *w->order, cmp_send);
    return 0;
}

/* The stream of the level's request `at` starts at its send time now_ns:
 * its chunks decoded, its first instant scheduled. */
static int stream_start(sw_sweep *w, uint32_t at, int64_t now_ns)
{
    const ll_rec_request *q = fit_run_request(w->run, w->req_idx[at]);
    uint32_t slot;
    int rc;
    if (w->free_slot.n) {
        slot = w->free_slot.v[--w->free_slot.n];
    } else {
        if ((rc = ll_vec_push(&w->slot, ((sw_stream){0}))))
            return rc;
        slot = (uint32_t)(w->slot.n - 1);
    }
    sw_stream *s = &w->slot.v[slot];
    fit_chunks ch = s->ch;
    *s = (sw_stream){.ch = ch, .at = at, .prev_t = -1};
    s->samples = (unsigned char)fit_tl_request(&w->tl, q);
    if ((rc = fit_chunks_of(w->run, q, &s->ch)))
        return rc;
    if (!s->ch.n) /* the record said chunks, the file none: an end event alone */
        return heap_push(w, (sw_event){now_ns, at, slot});
    s->in_k = q->first_token_ns >= 0;
    int64_t t = s->ch.v[0].t_ns;
    return heap_push(w, (sw_event){t > now_ns ? t : now_ns, at, slot});
}

/* The stream's instant at now_ns: its chunks at one time (an arrival when
 * they carry tokens) and its next event; or, past its chunks, its K end. */
static int stream_instant(sw_sweep *w, uint32_t slot, int64_t now_ns)
{
    sw_stream *s = &w->slot.v[slot];
    if (s->i >= s->ch.n) {
        w->k_sum -= s->in_k ? s->total : 0;
        fit_chunks_free(&s->ch);
        return ll_vec_push(&w->free_slot, slot);
    }
    const ll_rec_chunk *v = s->ch.v;
    int64_t t = v[s->i].t_ns;
    if (s->in_k && s->i == 0) { /* its prompt joins K at its first chunk */
        s->total = fit_prompt_tokens(fit_run_request(w->run, w->req_idx[s->at]));
        w->k_sum += s->total;
    }
    sw_arrival a = {t, slot, 0, v[s->i].kind};
    for (; s->i < s->ch.n && v[s->i].t_ns == t; s->i++) {
        fit_tl_chunk(&w->tl, &v[s->i]);
        a.tok += v[s->i].tokens;
        a.kind = v[s->i].kind;
    }
    if (s->in_k) {
        s->total += a.tok;
        w->k_sum += a.tok;
    }
    if (a.tok > 0 && ll_vec_push(&w->arr, a))
        return LL_ENOMEM;
    int64_t next;
    if (s->i < s->ch.n) {
        next = v[s->i].t_ns;
    } else {
        const ll_rec_request *q = fit_run_request(w->run, w->req_idx[s->at]);
        next = q->end_ns > t ? q->end_ns : t + 1;
        s->ch.n = 0; /* every chunk read: let them go before the end event */
        fit_chunks_free(&s->ch);
        s->i = 0;
    }
    return heap_push(w, (sw_event){next > now_ns ? next : now_ns, s->at, slot});
}

/* ---- samples and their reducers ------------------------------------------ */

static int cmp_sample_n(const void *a, const void *b)
{
    const fit_sample *x = a, *y = b;
    return (x->n > y->n) - (x->n < y->n);
}

/* One sample into the level's reducers (stream.c atop), or into sv. */
static int reduce_one(sw_sweep *w, const fit_sample *s)
{
    int rc;
    if (w->sv)
        return ll_vec_push(w->sv, *s);
    const fit_level *L = w->tl.L;
    w->n_samples++;
    LL_TRY(fit_pos_acc_add(&w->pos, s));
    LL_TRY(ll_pct_add(w->burst, s->gap_ms));
    if (s->steady && s->n > w->steady_n_max)
        w->steady_n_max = s->n;
    if (fit_step_takes(L, s))
        LL_TRY(fit_step_feed(w->res->kept, w->lk, &w->open, s));
    LL_TRY(fit_kept_samples(w->res, s, 1));
fail:
    return rc;
}

/* The instant's arrivals, once all its events are in K: their samples,
 * sorted by N (group_steps' order for ties at one t), reduced. */
static int instant_samples(sw_sweep *w)
{
    double k_now = w->k_sum > 0 ? w->k_sum : 0;
    fit_sample s;
    w->at_t.n = 0;
    for (size_t j = 0; j < w->arr.n; j++) {
        const sw_arrival *a = &w->arr.v[j];
        sw_stream *st = &w->slot.v[a->slot];
        if (st->samples && st->prev_t >= 0) {
            uint32_t req = (uint32_t)w->req_idx[st->at];
            int rc = fit_tl_sample(&w->tl, req, st->prev_t, a->t_ns, a->tok, st->pos, a->kind, st->k_prev, &s);
            if (rc < 0 || (rc == 1 && ll_vec_push(&w->at_t, s)))
                return rc < 0 ? rc : LL_ENOMEM;
            if (rc == 1 && !st->behind_steps && fit_step_request(w->tl.L, &s)) {
                st->behind_steps = 1;
                w->n_step_requests++;
            }
        }
        st->prev_t = a->t_ns;
        st->k_prev = k_now;
        st->pos += a->tok;
    }
    w->arr.n = 0;
    if (w->at_t.n > 1)
        qsort(w->at_t.v, w->at_t.n, sizeof *w->at_t.v, cmp_sample_n);
    for (size_t j = 0; j < w->at_t.n; j++) {
        int rc = reduce_one(w, &w->at_t.v[j]);
        if (rc)
            return rc;
    }
    return 0;
}

/* The sweep: instant after instant, every event at one time, then its samples. */
static int sweep(sw_sweep *w)
{
    int rc = 0;
    for (;;) {
        if (!w->heap.n && w->next >= w->n_order)
            return 0;
        int64_t t = w->heap.n ? w->heap.v[0].t_ns : INT64_MAX;
        if (w->next < w->n_order && w->order[w->next].t_ns < t)
            t = w->order[w->next].t_ns;
        while (rc == 0 && w->next < w->n_order && w->order[w->next].t_ns <= t)
            rc = stream_start(w, w->order[w->next++].at, t);
        while (rc == 0 && w->heap.n && w->heap.v[0].t_ns == t)
            rc = stream_instant(w, heap_pop(w).slot, t);
        if (rc || (rc = instant_samples(w)))
            return rc;
    }
}

/* fit_tuning.h FIT_BURST_*, as reduce.c's burst_level, from w->burst. */
static void burst_figures(sw_sweep *w, fit_level *L)
{
    L->burst_gap_frac = L->burst_gap_ms = NAN;
    if (w->n_samples < FIT_BURST_MIN_SAMPLES)
        return;
    double bound = 0.1 * ll_pct_quantile(w->burst, 0.9);
    L->burst_gap_ms = bound;
    L->burst_gap_frac = (double)ll_pct_below(w->burst, bound) / (double)w->n_samples;
}

/* What fit_level_reduce keeps of a level, from the reducers; a note for
 * each figure that came from a histogram. */
static int reduce_finish(sw_sweep *w)
{
    fit_level *L = w->tl.L;
    int rc;
    w->res->n_samples += w->n_samples;
    fit_pos_acc_finish(&w->pos, L, &w->lk->pos);
    burst_figures(w, L);
    LL_TRY(fit_step_done(w->res->kept, w->lk, &w->open));
    w->lk->n_step_requests = w->n_step_requests;
    L->steady_n_max = w->steady_n_max;
    if (w->n_samples >= FIT_BURST_MIN_SAMPLES && !ll_pct_is_exact(w->burst))
        LL_TRY(fit_note(w->res, "level %d (C=%d): burst figures from a histogram (%zu gaps, over %zu): within %g%%",
                        L->level, L->concurrency, w->n_samples, exact_bound(w->tl.opt), 100 * LL_PCT_REL_ERR));
    if (!isnan(L->steady_step_ms) && !ll_pct_is_exact(w->tl.gaps_at_c))
        LL_TRY(fit_note(w->res, "level %d (C=%d): steady step median from a histogram (%zu gaps, over %zu): within %g%%",
                        L->level, L->concurrency, ll_pct_count(w->tl.gaps_at_c), exact_bound(w->tl.opt),
                        100 * LL_PCT_REL_ERR));
fail:
    return rc;
}

static void sweep_free(sw_sweep *w)
{
    for (size_t i = 0; i < w->slot.n; i++)
        fit_chunks_free(&w->slot.v[i].ch);
    ll_vec_free(&w->slot);
    ll_vec_free(&w->free_slot);
    ll_vec_free(&w->heap);
    ll_vec_free(&w->arr);
    ll_vec_free(&w->at_t);
    free(w->order);
    fit_pos_acc_free(&w->pos);
    ll_pct_free(w->burst);
}

int fit_stream_level(const fit_run *run, const fit_level_info *info, const size_t *req_idx, size_t n_req,
                     int32_t level_idx, const fit_options *opt, fit_result *res, fit_level *L, fit_sample_vec *sv,
                     size_t *n_empty_chunks, char *err, size_t errlen)
{
    sw_sweep w;
    memset(&w, 0, sizeof w);
    w.run = run;
    w.req_idx = req_idx;
    w.sv = sv;
    w.res = sv ? NULL : res;
    int rc = fit_tl_begin(run, info, req_idx, n_req, level_idx, opt, exact_bound(opt), L, n_empty_chunks, &w.tl);
    if (rc == 0 && !sv) {
        w.lk = &res->kept->levels[level_idx];
        fit_pos_acc_init(&w.pos, L);
        rc = (w.burst = ll_pct_new(exact_bound(opt))) ? 0 : LL_ENOMEM;
    }
    if (rc == 0 && (rc = send_order(&w, n_req)) == 0 && (rc = sweep(&w)) == 0)
        rc = fit_tl_end(&w.tl);
    if (rc == 0 && !sv)
        rc = reduce_finish(&w);
    sweep_free(&w);
    fit_tl_free(&w.tl, rc, err, errlen);
    return rc;
}
