/* timeline.c: one level's phases, rebuilt from its requests, and its step samples.
 *
 * Definitions (docs/records.md for the records):
 *  - A request is prefilling from send_ns to first_token_ns and decoding from
 *    first_token_ns to end_ns. Failed and warmup requests count in P and D
 *    (they occupied the server) but give no step samples; a failed request
 *    with no token is prefilling until its end.
 *  - Arrival: the chunks of one stream stamped at one instant (a chunk split
 *    into thinking and answer) are one arrival; a chunk without tokens is none.
 *  - Step sample: the gap between two consecutive arrivals of one stream,
 *    divided by the tokens of the later arrival (ms per token). N is the
 *    time-average of D over the gap. Steady: P = 0 and D constant inside the
 *    gap; events closer to either end than opt.edge_tol_frac of the gap count
 *    as at the end (chunks of one engine step reach different streams
 *    microseconds apart). The ITL (figures.c) is the same gaps.
 *  - Ramp (closed loop): from the level's start until D first reaches C.
 *    Steady windows: spans with P = 0 and D = C.
 *
 * DESIGN: every request contributes events (+1 P at send; -1 P, +1 D at its
 * first token; -1 D (or -1 P if it never got a token) at its end). Sorting the
 * events once and merging equal times gives P(t), D(t) as a list of change
 * points plus a running integral of D, so each gap between two chunks is
 * classified with two binary searches: O(n log n) for n chunks, which matters
 * at C = 1024 with hundreds of thousands of chunks.
 *
 * Values are right-continuous: the value at a change point already includes
 * the events at that instant. A stream's own first token raises D at exactly
 * the start of its first gap, so that gap sees the raised D, as it should.
 *
 * K(t), the context tokens of the decoding requests (model.c "The context
 * term"), is a second line of the same kind: a request adds its prompt and
 * first tokens at its first token, each later chunk's tokens as they
 * arrive, and takes its whole context away at its end.
 *
 * Each sample also carries its position in the request (the tokens the
 * request had received before its later chunk), for the step against
 * position (position.c).
 *
 * The walk here goes request by request and holds the level's K line and
 * samples; a big level is walked in time order instead (stream.c). Both
 * share this file's pieces (fit_tl_*: the line, each request's and chunk's
 * counts, each sample's making), so a figure is defined once. */
#include "fit_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct tl_event {
    int64_t t_ns;
    int32_t dp, dd;
} tl_event;

/* K(t): change times and the value from each on. */
typedef struct tl_kline {
    size_t n;
    int64_t *t;
    double *k;
} tl_kline;

typedef struct tl_kevent {
    int64_t t_ns;
    double dk;
} tl_kevent;

static int cmp_kevent(const void *a, const void *b)
{
    const tl_kevent *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int build_kline(const fit_run *run, const size_t *req_idx, size_t n_req, fit_chunks *ch, tl_kline *kl)
{
    LL_VEC(tl_kevent) ev = {0};
    int rc = 0;
    for (size_t i = 0; i < n_req && rc == 0; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        if (!q->n_chunks || q->first_token_ns < 0 || (rc = fit_chunks_of(run, q, ch)))
            continue;
        double total = fit_prompt_tokens(q);
        rc = ll_vec_push(&ev, ((tl_kevent){ch->v[0].t_ns, total}));
        for (size_t c = 0; c < ch->n && rc == 0; c++) {
            total += ch->v[c].tokens;
            rc = ll_vec_push(&ev, ((tl_kevent){ch->v[c].t_ns, (double)ch->v[c].tokens}));
        }
        if (rc == 0)
            rc = ll_vec_push(&ev, ((tl_kevent){q->end_ns > ch->v[ch->n - 1].t_ns ? q->end_ns : ch->v[ch->n - 1].t_ns + 1,
                                               -total}));
    }
    if (rc == 0 && ev.n > 1)
        qsort(ev.v, ev.n, sizeof *ev.v, cmp_kevent);
    kl->t = rc ? NULL : malloc((ev.n + 1) * sizeof *kl->t);
    kl->k = rc ? NULL : malloc((ev.n + 1) * sizeof *kl->k);
    if (rc || !kl->t || !kl->k) {
        ll_vec_free(&ev);
        return rc ? rc : LL_ENOMEM;
    }
    double k = 0;
    size_t n = 0;
    for (size_t i = 0; i < ev.n;) {
        int64_t t = ev.v[i].t_ns;
        for (; i < ev.n && ev.v[i].t_ns == t; i++)
            k += ev.v[i].dk;
        kl->t[n] = t;
        kl->k[n++] = k > 0 ? k : 0;
    }
    kl->n = n;
    ll_vec_free(&ev);
    return 0;
}

/* K at t (right-continuous); 0 before the first change. */
static double k_at(const tl_kline *kl, int64_t t)
{
    long lo = 0, hi = (long)kl->n - 1, ans = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (kl->t[mid] <= t) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans < 0 ? 0 : kl->k[ans];
}

static int cmp_event(const void *a, const void *b)
{
    const tl_event *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int build_line(const fit_run *run, const size_t *req_idx, size_t n_req, fit_tl_line *ln)
{
    tl_event *ev = malloc((3 * n_req + 1) * sizeof *ev);
    if (!ev)
        return LL_ENOMEM;
    size_t ne = 0;
    for (size_t i = 0; i < n_req; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        ev[ne++] = (tl_event){q->send_ns, +1, 0};
        if (q->first_token_ns >= 0) {
            ev[ne++] = (tl_event){q->first_token_ns, -1, +1};
            ev[ne++] = (tl_event){q->end_ns, 0, -1};
        } else {
            ev[ne++] = (tl_event){q->end_ns, -1, 0};
        }
    }
    if (ne > 1)
        qsort(ev, ne, sizeof *ev, cmp_event);
    ln->pt = malloc((ne + 1) * sizeof *ln->pt);
    ln->integ = malloc((ne + 1) * sizeof *ln->integ);
    if (!ln->pt || !ln->integ) {
        free(ev);
        return LL_ENOMEM;
    }
    int32_t p = 0, d = 0;
    size_t n = 0;
    for (size_t i = 0; i < ne;) {
        int64_t t = ev[i].t_ns;
        for (; i < ne && ev[i].t_ns == t; i++) {
            p += ev[i].dp;
            d += ev[i].dd;
        }
        ln->integ[n] = n ? ln->integ[n - 1] + (double)ln->pt[n - 1].decode *
                                                   (double)(t - ln->pt[n - 1].t_ns)
                         : 0.0;
        ln->pt[n++] = (fit_phase_point){t, p, d};
    }
    ln->n = n;
    free(ev);
    return 0;
}

/* Index of the last change point at or before t, or -1. */
static long line_at(const fit_tl_line *ln, int64_t t)
{
    long lo = 0, hi = (long)ln->n - 1, ans = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (ln->pt[mid].t_ns <= t) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

static double integ_at(const fit_tl_line *ln, int64_t t)
{
    long j = line_at(ln, t);
    if (j < 0)
        return 0.0;
    return ln->integ[j] + (double)ln->pt[j].decode * (double)(t - ln->pt[j].t_ns);
}

/* Closed loop keeps P + D = C while requests remain; a killed level never
 * wrote its in-flight requests, so after the last drop from full occupancy
 * the recorded timeline undercounts. Returns that time (INT64_MAX when the
 * level is complete, the level start when it never was full). */
static int64_t cut_time(const fit_tl_line *ln, const fit_level_info *info)
{
    if (!info->interrupted || !info->closed_loop || info->concurrency <= 0)
        return INT64_MAX;
    int64_t cut = info->start_ns;
    for (size_t j = 1; j < ln->n; j++) {
        int before = ln->pt[j - 1].prefill + ln->pt[j - 1].decode;
        int now = ln->pt[j].prefill + ln->pt[j].decode;
        if (before >= info->concurrency && now < info->concurrency)
            cut = ln->pt[j].t_ns;
    }
    return cut;
}

static int excluded(const ll_rec_request *q, const fit_options *opt)
{
    return !fit_request_ok(q) || (q->warmup && !opt->include_warmup);
}

int fit_next_arrival(const fit_chunks *c, size_t *i, int64_t *t_ns, int32_t *tokens, char *kind)
{
    while (*i < c->n) {
        int64_t t = c->v[*i].t_ns;
        int32_t tok = 0;
        char k = c->v[*i].kind;
        for (; *i < c->n && c->v[*i].t_ns == t; (*i)++) {
            tok += c->v[*i].tokens;
            k = c->v[*i].kind;
        }
        if (tok > 0) {
            *t_ns = t;
            *tokens = tok;
            *kind = k;
            return 1;
        }
    }
    return 0;
}

/* One step sample, the gap [t0, t] of request req_idx ending in an arrival
 * of tok tokens at position pos, made and counted into the level; k is K at
 * t0. The exact walk below and stream.c both make every sample here. */
int fit_tl_sample(fit_tl_level *tl, uint32_t req_idx, int64_t t0, int64_t t, int32_t tok, int32_t pos, char kind,
                  double k, fit_sample *s)
{
    fit_level *L = tl->L;
    const fit_tl_line *ln = &tl->ln;
    int64_t gap = t - t0;
    if (t > tl->cut_ns) {
        L->n_samples_after_cut++;
        return 0;
    }
    int64_t tol = (int64_t)(tl->opt->edge_tol_frac * (double)gap);
    long i0 = line_at(ln, t0 + tol), i1 = line_at(ln, t - tol);
    s->t_ns = t;
    s->gap_ms = (double)gap / 1e6 / tok;
    s->level_idx = tl->level_idx;
    s->req_idx = req_idx;
    s->tokens = tok;
    s->pos_tok = pos;
    s->kind = kind;
    s->steady = i0 >= 0 && i0 == i1 && ln->pt[i0].prefill == 0;
    s->n = s->steady ? ln->pt[i0].decode : (integ_at(ln, t) - integ_at(ln, t0)) / (double)gap;
    s->k = k; /* the context the step that made this chunk read */
    L->n_samples++;
    if (!s->steady)
        return 1;
    L->n_steady_samples++;
    int conc = tl->info->concurrency;
    if (conc > 0 && (int)s->n == conc) {
        tl->steady_tok_at_c += tok;
        tl->steady_gap_ns_at_c += (double)gap;
        if (ll_pct_add(tl->gaps_at_c, s->gap_ms))
            return LL_ENOMEM;
    }
    return 1;
}

/* The step samples of one stream: the gaps between its arrivals. */
static int stream_samples(fit_tl_level *tl, const fit_chunks *ch, uint32_t req_idx, const tl_kline *kl,
                          fit_sample_vec *sv)
{
    int64_t prev_t = -1, t;
    int32_t tok, pos = 0; /* tokens received before this arrival */
    char kind;
    fit_sample s;
    for (size_t i = 0; fit_next_arrival(ch, &i, &t, &tok, &kind); pos += tok) {
        int64_t t0 = prev_t;
        prev_t = t;
        if (t0 < 0)
            continue;
        int rc = fit_tl_sample(tl, req_idx, t0, t, tok, pos, kind, k_at(kl, t0), &s);
        if (rc < 0 || (rc == 1 && ll_vec_push(sv, s)))
            return rc < 0 ? rc : LL_ENOMEM;
    }
    return 0;
}

static int steady_windows(const fit_tl_line *ln, int conc, int64_t cut, fit_level *L)
{
    if (conc <= 0 || ln->n == 0)
        return 0;
    L->windows = malloc(ln->n * sizeof *L->windows);
    if (!L->windows)
        return LL_ENOMEM;
    for (size_t j = 0; j + 1 < ln->n; j++) {
        if (ln->pt[j].prefill != 0 || ln->pt[j].decode != conc)
            continue;
        int64_t a = ln->pt[j].t_ns, b = ln->pt[j + 1].t_ns;
        if (b > cut)
            b = cut;
        if (b <= a)
            continue;
        if (L->n_windows && L->windows[L->n_windows - 1].t1_ns == a)
            L->windows[L->n_windows - 1].t1_ns = b;
        else
            L->windows[L->n_windows++] = (fit_window){a, b};
        L->steady_s += (double)(b - a) / 1e9;
    }
    return 0;
}

/* The level's token-rate bins (rate_bins over its span), filled chunk by
 * chunk (fit_tl_chunk) and made rates by rate_finish. */
static int rate_init(const fit_options *opt, fit_level *L)
{
    int64_t dur = L->end_ns - L->start_ns;
    size_t nb = opt->rate_bins > 0 ? (size_t)opt->rate_bins : 60;
    int64_t w = dur > 0 ? (dur + (int64_t)nb - 1) / (int64_t)nb : 1;
    if (w < 1)
        w = 1;
    L->rate_t0_ns = L->start_ns;
    L->rate_bin_ns = w;
    L->n_rate_bins = nb;
    L->think_tok_per_s = calloc(nb, sizeof *L->think_tok_per_s);
    L->answer_tok_per_s = calloc(nb, sizeof *L->answer_tok_per_s);
    return L->think_tok_per_s && L->answer_tok_per_s ? 0 : LL_ENOMEM;
}

static void rate_finish(fit_level *L)
{
    for (size_t b = 0; b < L->n_rate_bins; b++) {
        L->think_tok_per_s[b] /= (double)L->rate_bin_ns / 1e9;
        L->answer_tok_per_s[b] /= (double)L->rate_bin_ns / 1e9;
    }
}

/* L from the level's record: its identity and span, every figure unset. */
static void level_init(fit_level *L, const fit_level_info *info)
{
    memset(L, 0, sizeof *L);
    L->level = info->level;
    L->concurrency = info->concurrency;
    L->closed_loop = info->closed_loop;
    L->interrupted = info->interrupted;
    L->profiled = info->profiled;
    L->find_role = info->find_role;
    L->rate_per_s = info->rate_per_s;
    L->start_ns = info->start_ns;
    L->end_ns = info->end_ns;
    L->duration_s = (double)(info->end_ns - info->start_ns) / 1e9;
    L->steady_tok_per_s = L->steady_step_ms = L->predicted_tok_per_s = L->error_rel = NAN;
    L->k_mean = L->model_pred_tok_per_s = L->model_error_rel = NAN;
    L->heldout_pred_tok_per_s = L->heldout_error_rel = NAN;
    L->pos_max_tok = L->early_ms = L->late_ms = L->early_all_ms = L->late_all_ms = NAN;
    L->steady_tok_per_s_ci[0] = L->steady_tok_per_s_ci[1] = NAN;
    L->error_rel_ci[0] = L->error_rel_ci[1] = NAN;
    L->ramp_s = NAN;
    L->ramp_tokens = NAN;
}

int fit_tl_request(fit_tl_level *tl, const ll_rec_request *q)
{
    fit_level *L = tl->L;
    L->n_requests++;
    if (fit_request_ok(q))
        L->n_ok++;
    else
        L->n_failed++;
    if (q->warmup)
        L->n_warmup++;
    if (excluded(q, tl->opt)) {
        L->n_excluded_requests++;
        return 0;
    }
    return 1;
}

void fit_tl_chunk(fit_tl_level *tl, const ll_rec_chunk *c)
{
    fit_level *L = tl->L;
    L->tokens += c->tokens;
    if (c->tokens == 0)
        (*tl->n_empty_chunks)++;
    if (c->t_ns <= tl->ramp_ns)
        L->ramp_tokens += c->tokens;
    int64_t off = c->t_ns - L->start_ns;
    if (off < 0)
        off = 0;
    size_t b = (size_t)(off / L->rate_bin_ns);
    if (b >= L->n_rate_bins)
        b = L->n_rate_bins - 1;
    if (c->kind == LL_CHUNK_THINK)
        L->think_tok_per_s[b] += c->tokens;
    else
        L->answer_tok_per_s[b] += c->tokens;
}

/* The ramp of a closed level: the first time D reaches C (its tokens are
 * the chunks' at or before it, fit_tl_chunk); INT64_MIN when it never did. */
static int64_t level_ramp(fit_level *L, const fit_tl_line *ln, const fit_level_info *info)
{
    int conc = info->concurrency;
    if (!info->closed_loop || conc <= 0)
        return INT64_MIN;
    for (size_t j = 0; j < ln->n; j++) {
        if (ln->pt[j].decode < conc)
            continue;
        L->ramp_reached = 1;
        L->ramp_s = (double)(ln->pt[j].t_ns - info->start_ns) / 1e9;
        L->ramp_tokens = 0;
        return ln->pt[j].t_ns;
    }
    return INT64_MIN;
}

int fit_tl_begin(const fit_run *run, const fit_level_info *info, const size_t *req_idx, size_t n_req,
                 int32_t level_idx, const fit_options *opt, size_t gaps_exact, fit_level *L,
                 size_t *n_empty_chunks, fit_tl_level *tl)
{
    memset(tl, 0, sizeof *tl);
    tl->info = info;
    tl->opt = opt;
    tl->level_idx = level_idx;
    tl->L = L;
    tl->n_empty_chunks = n_empty_chunks;
    level_init(L, info);
    int rc = build_line(run, req_idx, n_req, &tl->ln);
    if (rc || (rc = rate_init(opt, L)))
        return rc;
    if (!(tl->gaps_at_c = ll_pct_new(gaps_exact)))
        return LL_ENOMEM;
    tl->cut_ns = cut_time(&tl->ln, info);
    tl->ramp_ns = level_ramp(L, &tl->ln, info);
    return 0;
}

int fit_tl_end(fit_tl_level *tl)
{
    fit_level *L = tl->L;
    int conc = tl->info->concurrency;
    if (L->duration_s > 0)
        L->whole_tok_per_s = L->tokens / L->duration_s;
    if (ll_pct_count(tl->gaps_at_c) && tl->steady_gap_ns_at_c > 0) {
        L->steady_tok_per_s = conc * tl->steady_tok_at_c / (tl->steady_gap_ns_at_c / 1e9);
        L->steady_step_ms = ll_pct_quantile(tl->gaps_at_c, 0.5);
    }
    rate_finish(L);
    int rc = steady_windows(&tl->ln, conc, tl->cut_ns, L);
    if (rc)
        return rc;
    /* The phase line becomes the level's P(t)/D(t) series. */
    L->phase = tl->ln.pt;
    L->n_phase = tl->ln.n;
    tl->ln.pt = NULL;
    return 0;
}

void fit_tl_free(fit_tl_level *tl, int rc, char *err, size_t errlen)
{
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory rebuilding level %d", tl->info->level);
    else if (rc == LL_EIO)
        ll_errf(err, errlen, "level %d: the records file no longer holds what was read from it", tl->info->level);
    free(tl->ln.pt);
    free(tl->ln.integ);
    ll_pct_free(tl->gaps_at_c);
    tl->ln.pt = NULL;
    tl->ln.integ = NULL;
    tl->gaps_at_c = NULL;
    if (rc && tl->L)
        fit_level_release(tl->L);
}

int fit_timeline_level(const fit_run *run, const fit_level_info *info, const size_t *req_idx,
                       size_t n_req, int32_t level_idx, const fit_options *opt,
                       fit_level *L, fit_sample_vec *sv, size_t *n_empty_chunks,
                       char *err, size_t errlen)
{
    fit_tl_level tl;
    tl_kline kl = {0, NULL, NULL};
    fit_chunks ch = {0};
    int rc = fit_tl_begin(run, info, req_idx, n_req, level_idx, opt, SIZE_MAX, L, n_empty_chunks, &tl);
    if (rc || (rc = build_kline(run, req_idx, n_req, &ch, &kl)))
        goto done;
    for (size_t i = 0; i < n_req && rc == 0; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        if ((rc = fit_chunks_of(run, q, &ch)))
            break;
        for (size_t k = 0; k < ch.n; k++)
            fit_tl_chunk(&tl, &ch.v[k]);
        if (fit_tl_request(&tl, q))
            rc = stream_samples(&tl, &ch, (uint32_t)req_idx[i], &kl, sv);
    }
    if (rc == 0)
        rc = fit_tl_end(&tl);
done:
    free(kl.t);
    free(kl.k);
    fit_chunks_free(&ch);
    fit_tl_free(&tl, rc, err, errlen);
    return rc;
}

void fit_level_release(fit_level *L)
{
    free(L->phase);
    free(L->windows);
    free(L->think_tok_per_s);
    free(L->answer_tok_per_s);
    L->phase = NULL;
    L->windows = NULL;
    L->think_tok_per_s = L->answer_tok_per_s = NULL;
    L->n_phase = L->n_windows = L->n_rate_bins = 0;
}
