/* said.c: the server's own per-request figures: what the server said about
 * each request in its own responses, per level beside the client's figures (records.h "request": "server",
 * "cached_tok", "finish"), over a level's ok measured requests:
 *  server TPOT     the median of the server's per-token decode time
 *                  (llama.cpp timings.predicted_per_token_ms, vLLM mean_itl_ms),
 *                  beside the client's TPOT p50: equal within a few per cent
 *                  when the client reads the stream as it arrives.
 *  server TTFT     vLLM's time_to_first_token_ms, else queue_ms + prompt_ms
 *                  (llama.cpp: prefill of the uncached prompt); ttft beyond
 *                  server = the median over requests of the client's TTFT
 *                  minus it: the network, the server's HTTP layer and queue
 *                  before it timed, and the client.
 *  cache share     sum of cached_tok over sum of usage prompt tokens, over the
 *                  requests that said both (FIT_CACHE_NOTE_FRAC: when noted).
 *  prompt asked    the prompt length the run asked in tokens when it built
 *                  synthetic prompts without a tokenizer (records.h
 *                  ll_rec_asked.prompt_tok; FIT_PROMPT_EST_DRIFT_FRAC).
 *  cut short       (not in a trace replay, whose rows ask their own lengths)
 *                  requests that returned fewer completion tokens than the run
 *                  asked (max_tokens) while asking the server to ignore EOS (so
 *                  a "stop" is the server's), or that said "length" short of
 *                  max_tokens (a server limit: context, slot size); counted
 *                  and named per level, and noted.
 *
 * DESIGN: one pass over the level's requests into small vectors, medians by
 * sorting them; what the run asked is the reader's typed block
 * (fit_run_info.asked), read once with the run line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit_internal.h"

/* The completion tokens a request returned: the server's usage where it
 * sent one, else what the stream carried. */
static int64_t completion_tok(const ll_rec_request *q)
{
    return q->usage_completion >= 0 ? q->usage_completion : q->think_tok + q->answer_tok;
}

static double median(fit_double_vec *v)
{
    if (!v->n)
        return NAN;
    ll_sort_doubles(v->v, v->n);
    return v->n % 2 ? v->v[v->n / 2] : (v->v[v->n / 2 - 1] + v->v[v->n / 2]) / 2;
}

/* One finish reason onto the level's tally ("stop x2, length x1"): the
 * reasons in first-seen order, at most 4 named. */
typedef struct reasons {
    char name[4][16];
    size_t n[4], k;
} reasons;

static void tally_reason(reasons *r, const char *finish)
{
    const char *f = finish[0] ? finish : "(none)";
    for (size_t i = 0; i < r->k; i++)
        if (strcmp(r->name[i], f) == 0) {
            r->n[i]++;
            return;
        }
    if (r->k < 4) {
        snprintf(r->name[r->k], sizeof r->name[0], "%s", f);
        r->n[r->k++] = 1;
    }
}

static void say_reasons(const reasons *r, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->k && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s x%zu", i ? ", " : "", r->name[i], r->n[i]);
}

/* The server's TTFT of one request: its own, else queue + prefill. */
static double server_ttft(const ll_rec_srv_timing *t)
{
    if (isfinite(t->ttft_ms))
        return t->ttft_ms;
    if (!isfinite(t->prompt_ms))
        return NAN;
    return t->prompt_ms + (isfinite(t->queue_ms) ? t->queue_ms : 0);
}

int fit_said_level(const fit_run *run, const size_t *req_idx, size_t n_req, fit_level *L)
{
    fit_double_vec tpot = {0}, prefill = {0}, ttft = {0}, beyond = {0};
    double cached = 0, prompt = 0;
    const ll_rec_asked *asked = &run->info.asked;
    /* a trace replay asks each row's own output length: no one max_tokens */
    int64_t max_tokens = asked->trace ? 0 : asked->max_tokens;
    int rc = 0;
    reasons why = {0};
    L->prompt_tok_asked = asked->prompt_tok;
    L->server_timed = L->n_cached_said = L->n_cut_short = 0;
    L->cut_short_why[0] = '\0';
    for (size_t i = 0; i < n_req; i++) {
        const ll_rec_request *q = fit_run_request(run, req_idx[i]);
        if (!fit_request_ok(q) || q->warmup)
            continue;
        if (q->srv.present) {
            L->server_timed++;
            fit_request_ms m;
            fit_request_latency_ms(run, q, &m);
            double st = server_ttft(&q->srv);
            if (isfinite(q->srv.tpot_ms))
                LL_TRY(ll_vec_push(&tpot, q->srv.tpot_ms));
            if (isfinite(q->srv.prompt_ms))
                LL_TRY(ll_vec_push(&prefill, q->srv.prompt_ms));
            if (isfinite(st))
                LL_TRY(ll_vec_push(&ttft, st));
            if (isfinite(st) && isfinite(m.ttft_ms))
                LL_TRY(ll_vec_push(&beyond, m.ttft_ms - st));
        }
        if (q->cached_tok >= 0 && q->usage_prompt > 0) {
            L->n_cached_said++;
            cached += (double)q->cached_tok;
            prompt += (double)q->usage_prompt;
        }
        int64_t got = completion_tok(q);
        if (max_tokens > 0 && got < max_tokens && (asked->ignore_eos || strcmp(q->finish, "length") == 0)) {
            L->n_cut_short++;
            tally_reason(&why, q->finish);
        }
    }
    say_reasons(&why, L->cut_short_why, sizeof L->cut_short_why);
    L->server_tpot_ms = median(&tpot);
    L->server_prefill_ms = median(&prefill);
    L->server_ttft_ms = median(&ttft);
    L->ttft_beyond_server_ms = median(&beyond);
    L->cache_share = prompt > 0 ? cached / prompt : NAN;
fail:
    ll_vec_free(&tpot);
    ll_vec_free(&prefill);
    ll_vec_free(&ttft);
    ll_vec_free(&beyond);
    return rc;
}
