/* figures.c: a level's request counts, latencies and rates, each defined
 * once here and computed only here. The sweep's table, summary.json,
 * `loadlaw fit`, the report and compare print these.
 *
 * Per-level figures:
 *  TTFT  send -> first token of any kind (thinking included).
 *  TTFA  send -> first answer token (requests without one give no sample).
 *  ITL   one sample per gap between consecutive arrivals of a stream
 *        (timeline.c "Arrival"), divided by the tokens of the later arrival;
 *        ms per token. The same gaps, by the same walk (fit_next_arrival), are
 *        the step samples (which also keep those after an interrupted level's
 *        cut out of the law, and warmup ones with include_warmup; the ITL
 *        never does either).
 *  TPOT  per request: (last token - first token) / (tokens - 1), over the
 *        tokens its chunks carry (reasoning a server did not stream, in
 *        think_tok with no chunks, came before the first token).
 *  E2E   send -> end of the response.
 *  Open loop, from the intended send time (no coordinated omission):
 *  client lag = send - intended; TTFT/E2E sched = first token / end - intended.
 * Over ok, measured (non-warmup) requests. Exact percentiles of the sorted
 * samples (linear interpolation between ranks).
 *
 * Past a bound: a level with more than FIT_PCT_EXACT values of one kind
 * (ITL is one value an event: 100 M events would be 800 MB) spills them, as
 * they come, into a log-bucketed histogram (common ll_pct): its p50/p90/p99
 * are within LL_PCT_REL_ERR of the order statistic at the rank below (the
 * exact figure interpolates between that one and the next), the mean and
 * max stay exact (the mean summed in arrival order, not sorted order, so its
 * last bits may differ). A negative value (a client lag from a send ahead of
 * its time) counts as 0 there. fit_level.dist_hist says which kinds, and a
 * note names them (fit_notes_latency_hist). Prompt drift: the mean
 * prompt_tok_target of the requests built to a length against the mean
 * usage.prompt_tokens the server reported. */
#include "fit_internal.h"

#include <math.h>
#include <string.h>

void fit_dist_of(const double *v, size_t n, fit_dist *out)
{
    out->n = n;
    if (n == 0) {
        out->mean_ms = out->p50_ms = out->p90_ms = out->p99_ms = out->max_ms = NAN;
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    out->mean_ms = sum / (double)n;
    out->p50_ms = ll_quantile_sorted(v, n, 0.50);
    out->p90_ms = ll_quantile_sorted(v, n, 0.90);
    out->p99_ms = ll_quantile_sorted(v, n, 0.99);
    out->max_ms = v[n - 1];
}

void fit_latency_free(fit_latency_samples *s)
{
    for (size_t k = 0; k < FIT_LAT_KINDS; k++)
        ll_pct_free(s->hist[k]);
    ll_vec_free(&s->ttft);
    ll_vec_free(&s->ttfa);
    ll_vec_free(&s->tpot);
    ll_vec_free(&s->itl);
    ll_vec_free(&s->e2e);
    ll_vec_free(&s->client_lag);
    ll_vec_free(&s->ttft_sched);
    ll_vec_free(&s->e2e_sched);
}

static double ms_between(int64_t t0_ns, int64_t t1_ns)
{
    return (double)(t1_ns - t0_ns) / 1e6;
}

/* ITL samples of one stream: figures.c "Per-level figures", ITL. */
static int stream_itl(const fit_chunks *ch, fit_double_vec *itl)
{
    size_t i = 0;
    int64_t t, prev_t = -1;
    int32_t tok;
    char kind;
    while (fit_next_arrival(ch, &i, &t, &tok, &kind)) {
        if (prev_t >= 0 && ll_vec_push(itl, ms_between(prev_t, t) / tok))
            return LL_ENOMEM;
        prev_t = t;
    }
    return 0;
}

/* TTFT, TPOT and E2E of one request: figures.c "Per-level figures", and
 * fit_request_latency_ms; the level's dists and goodput (plan.c) both use
 * this. TPOT counts tokens from the stream; no sample for a single token or
 * a zero span. */
static void latency_of(const ll_rec_request *q, const fit_chunks *ch, fit_request_ms *out)
{
    out->ttft_ms = q->first_token_ns >= 0 ? ms_between(q->send_ns, q->first_token_ns) : NAN;
    out->e2e_ms = ms_between(q->send_ns, q->end_ns);
    out->tpot_ms = NAN;
    int64_t tok = 0; /* streamed: hidden reasoning has no chunks ("TPOT" above) */
    for (size_t k = 0; k < ch->n; k++)
        tok += ch->v[k].tokens;
    if (tok <= 1 || ch->n == 0 || q->first_token_ns < 0)
        return;
    int64_t last = ch->v[ch->n - 1].t_ns;
    if (last > q->first_token_ns)
        out->tpot_ms = ms_between(q->first_token_ns, last) / (double)(tok - 1);
}

void fit_request_latency_ms(const fit_run *run, const ll_rec_request *q, fit_request_ms *out)
{
    fit_chunks ch = {0};
    if (fit_chunks_of(run, q, &ch) != 0)
        ch.v = NULL, ch.n = 0; /* unreadable: no TPOT, as for a stream without chunks */
    latency_of(q, &ch, out);
    fit_chunks_free(&ch);
}

static int request_latencies(const fit_run *run, const ll_rec_request *q, fit_chunks *ch, fit_latency_samples *s)
{
    int rc;
    fit_request_ms m;
    LL_TRY(fit_chunks_of(run, q, ch));
    latency_of(q, ch, &m);
    if (!isnan(m.ttft_ms))
        LL_TRY(ll_vec_push(&s->ttft, m.ttft_ms));
    if (q->first_answer_ns >= 0)
        LL_TRY(ll_vec_push(&s->ttfa, ms_between(q->send_ns, q->first_answer_ns)));
    if (!isnan(m.tpot_ms))
        LL_TRY(ll_vec_push(&s->tpot, m.tpot_ms));
    LL_TRY(stream_itl(ch, &s->itl));
    LL_TRY(ll_vec_push(&s->e2e, m.e2e_ms));
    if (q->intended_ns >= 0) {
        /* open loop: from the intended send (no coordinated omission) */
        LL_TRY(ll_vec_push(&s->client_lag, ms_between(q->intended_ns, q->send_ns)));
        if (q->first_token_ns >= 0)
            LL_TRY(ll_vec_push(&s->ttft_sched, ms_between(q->intended_ns, q->first_token_ns)));
        LL_TRY(ll_vec_push(&s->e2e_sched, ms_between(q->intended_ns, q->end_ns)));
    }
    return 0;
fail:
    return rc;
}

static fit_double_vec *latency_kind(fit_latency_samples *s, size_t k)
{
    fit_double_vec *all[FIT_LAT_KINDS] = {&s->ttft, &s->ttfa, &s->tpot, &s->itl, &s->e2e,
                                          &s->client_lag, &s->ttft_sched, &s->e2e_sched};
    return all[k];
}

/* "Past a bound": kind k's values so far into its histogram. */
static int spill(fit_latency_samples *s, size_t k)
{
    fit_double_vec *v = latency_kind(s, k);
    if (!s->hist[k] && !(s->hist[k] = ll_pct_new(1)))
        return LL_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < v->n && !rc; i++)
        rc = ll_pct_add(s->hist[k], v->v[i] > 0 ? v->v[i] : 0); /* finite: ns over tokens > 0 */
    v->n = 0;
    return rc;
}

int fit_latency_collect(const fit_run *run, const size_t *req_idx, size_t n_req, size_t bound,
                        fit_latency_samples *out)
{
    int rc;
    fit_chunks ch = {0};
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n_req; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        if (!fit_request_ok(q) || q->warmup)
            continue;
        LL_TRY(request_latencies(run, q, &ch, out));
        for (size_t k = 0; bound && k < FIT_LAT_KINDS; k++)
            if (latency_kind(out, k)->n > bound)
                LL_TRY(spill(out, k));
    }
    for (size_t k = 0; k < FIT_LAT_KINDS; k++) {
        if (out->hist[k])
            LL_TRY(spill(out, k));
        ll_sort_doubles(latency_kind(out, k)->v, latency_kind(out, k)->n);
    }
    fit_chunks_free(&ch);
    return 0;
fail:
    fit_chunks_free(&ch);
    fit_latency_free(out);
    return rc;
}

/* Counts, token sums and rates; figures.c "Per-level figures". */
static void level_counts(const fit_run *run, const size_t *req_idx, size_t n_req, fit_level *L)
{
    int64_t all_tok = 0;
    size_t ok_all = 0, n_target = 0, n_server = 0;
    double target_sum = 0, server_sum = 0;
    for (size_t i = 0; i < n_req; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        if (fit_request_ok(q)) {
            all_tok += q->think_tok + q->answer_tok;
            ok_all++;
        }
        if (q->warmup)
            continue;
        L->n_sent++;
        if (!fit_request_ok(q)) {
            ll_err_class c = q->cls < LL_ERRC__COUNT ? q->cls : LL_ERRC_OTHER;
            L->failed_by_class[c]++;
            L->n_sent_failed++;
            continue;
        }
        L->think_tok += q->think_tok;
        L->answer_tok += q->answer_tok;
        if (q->usage_completion > 0)
            L->usage_completion_tok += q->usage_completion;
        if (q->prompt_tok_target > 0) {
            target_sum += (double)q->prompt_tok_target;
            n_target++;
        }
        if (q->usage_prompt >= 0) {
            server_sum += (double)q->usage_prompt;
            n_server++;
        }
        if (q->counts == LL_COUNTS_ATTRIBUTED || q->counts == LL_COUNTS_TOKENIZER) {
            if (q->counts == LL_COUNTS_ATTRIBUTED)
                L->n_counts_attributed++;
            else
                L->n_counts_tokenizer++;
            /* the stream's own count: -1 halves (not recorded) add nothing */
            L->counts_stream_tok += (q->stream_think_tok > 0 ? q->stream_think_tok : 0) +
                                    (q->stream_answer_tok > 0 ? q->stream_answer_tok : 0);
            L->counts_recorded_tok += q->think_tok + q->answer_tok;
        }
    }
    L->prompt_tok_target_mean = n_target ? target_sum / (double)n_target : NAN;
    L->prompt_tok_server_mean = n_server ? server_sum / (double)n_server : NAN;
    /* Rates over the level's wall time. output_tok_per_s and req_per_s count
     * every ok request (warmup too: it loaded the server in that time); the
     * thinking/answer rates count measured requests only. */
    double d = L->duration_s > 0 ? L->duration_s : NAN;
    L->output_tok_per_s = (double)all_tok / d;
    L->req_per_s = (double)ok_all / d;
    L->mean_think_tok_per_s = (double)L->think_tok / d;
    L->mean_answer_tok_per_s = (double)L->answer_tok / d;
}

/* Kind k's figures: from its sorted values, or its histogram past the bound. */
static void dist_of_kind(fit_latency_samples *s, size_t k, fit_dist *out)
{
    ll_pct *h = s->hist[k];
    if (!h) {
        fit_dist_of(latency_kind(s, k)->v, latency_kind(s, k)->n, out);
        return;
    }
    out->n = ll_pct_count(h);
    out->mean_ms = ll_pct_mean(h);
    out->p50_ms = ll_pct_quantile(h, 0.50);
    out->p90_ms = ll_pct_quantile(h, 0.90);
    out->p99_ms = ll_pct_quantile(h, 0.99);
    out->max_ms = ll_pct_max(h);
}

int fit_level_figures(const fit_run *run, const size_t *req_idx, size_t n_req, fit_level *L)
{
    fit_latency_samples s;
    int rc = fit_latency_collect(run, req_idx, n_req, FIT_PCT_EXACT, &s);
    if (rc)
        return rc;
    level_counts(run, req_idx, n_req, L);
    fit_dist *out[FIT_LAT_KINDS] = {&L->ttft, &L->ttfa, &L->tpot, &L->itl, &L->e2e,
                                    &L->client_lag, &L->ttft_sched, &L->e2e_sched};
    L->dist_hist = 0;
    for (size_t k = 0; k < FIT_LAT_KINDS; k++) {
        dist_of_kind(&s, k, out[k]);
        L->dist_hist |= s.hist[k] ? 1u << k : 0;
    }
    fit_latency_free(&s);
    return 0;
}

int fit_notes_latency_hist(fit_result *res)
{
    static const char *const names[FIT_LAT_KINDS] = {"TTFT", "TTFA", "TPOT", "ITL", "E2E",
                                                     "client lag", "TTFT sched", "E2E sched"};
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        const fit_dist *d[FIT_LAT_KINDS] = {&L->ttft, &L->ttfa, &L->tpot, &L->itl, &L->e2e,
                                            &L->client_lag, &L->ttft_sched, &L->e2e_sched};
        for (size_t k = 0; k < FIT_LAT_KINDS; k++)
            if ((L->dist_hist >> k & 1) &&
                fit_note(res, "level %d (C=%d): %s percentiles from a histogram (%zu values, over %zu): "
                              "within %g%%",
                         L->level, L->concurrency, names[k], d[k]->n, FIT_PCT_EXACT, 100 * LL_PCT_REL_ERR))
                return LL_ENOMEM;
    }
    return 0;
}

int fit_level_latency_get(const fit_run *run, int level, fit_level_latency *out,
                          double **ttft_out, double **ttfa_out, double **itl_out,
                          size_t *n_itl_out, char *err, size_t errlen)
{
    LL_VEC(size_t) idx = {0};
    fit_latency_samples s;
    size_t i0, i1;
    int rc;
    fit_run_level_span(run, level, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        if (fit_run_request(run, i)->level == level && (rc = ll_vec_push(&idx, i)))
            goto fail;
    if ((rc = fit_latency_collect(run, idx.v, idx.n, 0, &s)))
        goto fail;
    ll_vec_free(&idx);
    fit_dist_of(s.ttft.v, s.ttft.n, &out->ttft);
    fit_dist_of(s.ttfa.v, s.ttfa.n, &out->ttfa);
    fit_dist_of(s.itl.v, s.itl.n, &out->itl);
    if (n_itl_out)
        *n_itl_out = s.itl.n;
    /* hand over what the caller asked for; the vectors' arrays move out */
    if (ttft_out)
        *ttft_out = s.ttft.v, s.ttft.v = NULL;
    if (ttfa_out)
        *ttfa_out = s.ttfa.v, s.ttfa.v = NULL;
    if (itl_out)
        *itl_out = s.itl.v, s.itl.v = NULL;
    fit_latency_free(&s);
    return 0;
fail:
    ll_vec_free(&idx);
    ll_errf(err, errlen, "out of memory");
    return rc;
}
