/* said.c: what the server said about each request in its own responses,
 * per level beside the client's figures (fit.h "The server's own
 * per-request figures"): its timing (llama.cpp's timings, vLLM's
 * per-request metrics), the prompt tokens its prefix cache served, and the
 * requests it ended short of what the run asked.
 *
 * DESIGN: one pass over the level's requests into three small vectors,
 * medians by sorting them; the run's max_tokens and ignore_eos are read
 * from the run line's config once per level (a sweep has tens of levels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit_internal.h"

/* What the run asked of every request: max_tokens (0 = unknown, as in a
 * trace replay, whose rows ask their own) and whether
 * the server was asked to ignore EOS (the scenario's ignore_eos, or an
 * extra body that sets it). */
/* The prompt length asked in tokens when prompts were built to it without
 * a tokenizer (as words: an estimate), else NAN: prompts.tokens' value or
 * mean in the run line's config. */
static double asked_prompt_tokens(const cJSON *config)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(config, "prompts");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(p, "tokens");
    const char *src = ll_json_str(p, "source", "");
    if (!cJSON_IsObject(tk) || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "tokenizer")) ||
        strcmp(src, "synthetic") != 0)
        return NAN;
    const char *dist = ll_json_str(tk, "dist", "");
    double v = ll_json_num(tk, strcmp(dist, "fixed") == 0 ? "value" : "mean", NAN);
    return v > 0 ? v : NAN;
}

static void asked(const fit_run *run, int64_t *max_tokens, int *ignore_eos, double *prompt_tok)
{
    *max_tokens = 0;
    *ignore_eos = 0;
    cJSON *root = cJSON_Parse(run->info.run_json ? run->info.run_json : "{}");
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(config, "request");
    *prompt_tok = asked_prompt_tokens(config);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(req, "extra_body");
    /* a trace replay asks each row's own output length: no one max_tokens */
    const cJSON *trace = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(config, "load"), "trace");
    if (cJSON_IsNumber(mt) && mt->valuedouble >= 1 && mt->valuedouble <= INT32_MAX &&
        (!trace || cJSON_IsNull(trace)))
        *max_tokens = (int64_t)mt->valuedouble;
    *ignore_eos = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "ignore_eos")) ||
                  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(extra, "ignore_eos"));
    cJSON_Delete(root);
}

/* The completion tokens a request returned: the server's usage where it
 * sent one, else what the stream carried. */
static int64_t completion_tok(const fit_request *q)
{
    return q->usage_completion_tok >= 0 ? q->usage_completion_tok : q->think_tok + q->answer_tok;
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
    int64_t max_tokens;
    int ignore_eos, rc = 0;
    reasons why = {0};
    asked(run, &max_tokens, &ignore_eos, &L->prompt_tok_asked);
    L->server_timed = L->n_cached_said = L->n_cut_short = 0;
    L->cut_short_why[0] = '\0';
    for (size_t i = 0; i < n_req; i++) {
        const fit_request *q = fit_run_request(run, req_idx[i]);
        if (!q->ok || q->warmup)
            continue;
        if (q->srv.present) {
            L->server_timed++;
            fit_request_ms m;
            fit_request_latency_ms(q, &m);
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
        if (q->cached_tok >= 0 && q->usage_prompt_tok > 0) {
            L->n_cached_said++;
            cached += (double)q->cached_tok;
            prompt += (double)q->usage_prompt_tok;
        }
        int64_t got = completion_tok(q);
        if (max_tokens > 0 && got < max_tokens && (ignore_eos || strcmp(q->finish, "length") == 0)) {
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
