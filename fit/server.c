/* server.c: the server's own figures per level from the samples `sweep`
 * scraped from /metrics (records.h "metric"; docs/remote.md "Server
 * metrics"), read through common/dialect.h's table (one server per level:
 * the first in the table's order whose running gauge the level has, else the
 * first with any figure; GPU exporters never count).
 *
 * Server figures:
 *  server N        mean of the running-requests gauge (loadlaw_running_requests,
 *                  vllm:num_requests_running, sglang:num_running_reqs,
 *                  llamacpp:requests_processing, tgi_batch_current_size,
 *                  trtllm_num_requests_running), summed over the labels of one
 *                  scrape (engines, data-parallel ranks), over the scrapes
 *                  inside the level's steady windows (the whole level when it
 *                  has none). Beside the client's D = C of a closed-loop
 *                  level: they disagree past FIT_SERVER_N_REL and _ABS.
 *  server waiting  the waiting gauge, the same way.
 *  server step     the decode step on the server's clock, from the first of:
 *                  a step-duration histogram (loadlaw, TGI's forward duration
 *                  of method "decode"): delta sum / delta count; an
 *                  inter-token-latency histogram (vLLM, SGLang): delta sum /
 *                  delta count, the mean gap between a request's consecutive
 *                  tokens, which iterations that only prefilled never enter
 *                  (an iteration that prefilled beside decodes does: it is a
 *                  step the decoding requests waited for); llama.cpp's
 *                  seconds generating summed over requests over its generated
 *                  tokens (both counted when a request ends: over the whole
 *                  level; a request's first token is counted, its gap is
 *                  not, so it reads (n-1)/n of the step for n-token outputs);
 *                  else a counter of iterations (vLLM's iteration_tokens_total
 *                  count, llama.cpp's n_decode_total): span / delta count
 *                  (the engine is busy throughout a steady window; with
 *                  several engines, data-parallel series, their spans summed
 *                  over their counts summed; prefill iterations included:
 *                  +6% to +29% over vLLM's decode step at C = 1..32 with
 *                  64-token outputs, docs/remote.md); else TensorRT-LLM's
 *                  last-iteration gauge, its mean over the scrapes. Counters are
 *                  differenced over the span from the first steady window's
 *                  start to the last one's end, per series, a drop counted as a
 *                  reset (the new value is the increase), then summed over series.
 *  tokens per step vLLM: delta tokens / delta iterations of iteration_tokens_total;
 *                  llama.cpp: delta (n_busy_slots_per_decode * n_decode_total) /
 *                  delta n_decode_total (the gauge is a mean since start).
 *  generated tok/s delta of the generated-tokens counter over its span.
 *  cache share     prompt tokens the server served from its prefix cache over
 *                  the prompt tokens it was given, over the whole level (start to
 *                  end: prompts are prefilled in the ramp): vLLM hits / queries,
 *                  SGLang and TensorRT-LLM cached / prompt, llama.cpp cached /
 *                  (prompt + cached) (its prompt counter excludes cached tokens).
 *  stale           SGLang refreshes its gauges every --decode-log-interval steps:
 *                  a gen_throughput that held one value longer than
 *                  FIT_SGLANG_STALE_S while the level ran is noted.
 * Each figure's caveat (the table's) is printed under the server table.
 *
 * Gauges are means over scrapes inside the level's steady windows: each
 * scrape's samples share one t_ns, so a scrape's total over labels
 * (engines, data-parallel ranks) is the run of equal t_ns of one kind.
 * Counters are differenced per series with reset detection, over the span of
 * the steady windows. The scraper is one thread, so the samples are in time
 * order in the file. Cost: one pass over the run's samples per figure and
 * level (a run holds ~10 samples per scrape, 2 scrapes a second). The
 * gauge and counter helpers also serve gpu.c (the GPU figures), and the
 * running gauge's scrape series the law against the server's N (analyze_law.c). */
#include <math.h>
#include <string.h>

#include "fit_internal.h"

int fit_server_kind(const char *name, const char *labels)
{
    const ll_srv_metric *m = ll_srv_metric_find(name, labels);
    return m ? FIT_SMK(m->server, m->role) : FIT_SMK_NONE;
}

static int in_windows(const fit_level *L, int64_t t)
{
    if (!L->n_windows)
        return t >= L->start_ns && t <= L->end_ns;
    for (size_t w = 0; w < L->n_windows; w++)
        if (t >= L->windows[w].t0_ns && t <= L->windows[w].t1_ns)
            return 1;
    return 0;
}

/* fit_internal.h: a scrape is the run of equal t_ns of one kind. */
double fit_server_gauge(const fit_run *run, const fit_level *L, int kind, int avg, size_t *n_out)
{
    double total = 0, cur = 0;
    size_t n = 0, in_scrape = 0;
    int64_t t = -1;
    int open = 0;
    for (size_t i = 0; i <= run->server.n; i++) {
        const fit_server_sample *s = i < run->server.n ? &run->server.v[i] : NULL;
        if (s && s->kind != kind)
            continue;
        if (open && (!s || s->t_ns != t)) {
            total += avg ? cur / (double)in_scrape : cur;
            n++;
            open = 0;
        }
        if (!s)
            break;
        if (!in_windows(L, s->t_ns))
            continue;
        if (!open) {
            open = 1;
            cur = 0;
            in_scrape = 0;
            t = s->t_ns;
        }
        cur += s->value;
        in_scrape++;
    }
    *n_out = n;
    return n ? total / (double)n : NAN;
}

/* fit_internal.h. A drop: the counter restarted, its new value is the
 * increase. *span_ns: the sum over the series counted of last - first. */
double fit_server_counter(const fit_run *run, int kind, int64_t t0, int64_t t1, int64_t *span_ns,
                          int64_t *first_ns, int64_t *last_ns)
{
    double total = NAN;
    int64_t lo = -1, hi = -1;
    *span_ns = 0;
    for (size_t ser = 0; ser < run->series.n; ser++) {
        double prev = NAN, d = 0;
        int64_t first = -1, last = -1;
        for (size_t i = 0; i < run->server.n; i++) {
            const fit_server_sample *s = &run->server.v[i];
            if (s->kind != kind || s->series != ser || s->t_ns < t0 || s->t_ns > t1)
                continue;
            if (isfinite(prev))
                d += s->value >= prev ? s->value - prev : s->value;
            else
                first = s->t_ns;
            prev = s->value;
            last = s->t_ns;
        }
        if (first >= 0 && last > first) {
            total = isfinite(total) ? total + d : d;
            *span_ns += last - first;
            lo = lo < 0 || first < lo ? first : lo;
            hi = last > hi ? last : hi;
        }
    }
    if (first_ns)
        *first_ns = lo;
    if (last_ns)
        *last_ns = hi;
    return total;
}

/* fit_internal.h: a histogram's mean over [t0, t1], times scale. */
double fit_server_mean(const fit_run *run, int srv, ll_srv_role sum, ll_srv_role count, int64_t t0, int64_t t1,
                       double scale)
{
    int64_t span_ns;
    double dsum = fit_server_counter(run, FIT_SMK(srv, sum), t0, t1, &span_ns, NULL, NULL);
    double dcount = fit_server_counter(run, FIT_SMK(srv, count), t0, t1, &span_ns, NULL, NULL);
    return dcount > 0 && isfinite(dsum) ? scale * dsum / dcount : NAN;
}

int fit_server_n_series(const fit_run *run, const fit_level *L, int64_t **t_out, double **v_out, size_t *n_out)
{
    LL_VEC(int64_t) t = {0};
    fit_double_vec v = {0};
    int rc = 0;
    *t_out = NULL;
    *v_out = NULL;
    *n_out = 0;
    /* one family, as server N (an engine serving two families' names would count twice) */
    for (int srv = 0; srv < LL_SRV_DCGM && !t.n; srv++)
        for (size_t i = 0; i < run->server.n; i++) {
            const fit_server_sample *s = &run->server.v[i];
            if (s->kind != FIT_SMK(srv, LL_ROLE_RUNNING) || s->t_ns < L->start_ns || s->t_ns > L->end_ns)
                continue;
            if (t.n && t.v[t.n - 1] == s->t_ns) {
                v.v[v.n - 1] += s->value;
                continue;
            }
            LL_TRY(ll_vec_push(&t, s->t_ns));
            LL_TRY(ll_vec_push(&v, s->value));
        }
    *t_out = t.v;
    *v_out = v.v;
    *n_out = t.n;
    return 0;
fail:
    ll_vec_free(&t);
    ll_vec_free(&v);
    return rc;
}

/* Longest span (s) a kind's scrape totals kept one value inside the level. */
static double stale_span_s(const fit_run *run, const fit_level *L, int kind)
{
    double best = NAN, run_v = NAN;
    int64_t run_t0 = -1;
    for (size_t i = 0; i < run->server.n; i++) {
        const fit_server_sample *s = &run->server.v[i];
        if (s->kind != kind || s->t_ns < L->start_ns || s->t_ns > L->end_ns)
            continue;
        if (s->value != run_v || run_t0 < 0) {
            run_v = s->value;
            run_t0 = s->t_ns;
        }
        double span = (s->t_ns - run_t0) / 1e9;
        if (!(span <= best))
            best = span;
    }
    return best;
}

/* The first and last sample of a kind in [t0, t1] (its first series'
 * only: a gauge of one server without labels). 0 when it has fewer than 2. */
static int first_last(const fit_run *run, int kind, int64_t t0, int64_t t1, double *v0, double *v1)
{
    int64_t ser = -1, ta = -1, tb = -1;
    for (size_t i = 0; i < run->server.n; i++) {
        const fit_server_sample *s = &run->server.v[i];
        if (s->kind != kind || s->t_ns < t0 || s->t_ns > t1 || (ser >= 0 && s->series != (uint32_t)ser))
            continue;
        if (ser < 0) {
            ser = s->series;
            ta = s->t_ns;
            *v0 = s->value;
        }
        tb = s->t_ns;
        *v1 = s->value;
    }
    return ser >= 0 && tb > ta;
}

/* Which server the level's figures come from: the first (table order) with
 * a running gauge in the level, else with any sample in it; -1 when none. */
static int level_server(const fit_run *run, const fit_level *L)
{
    int running = -1, any = -1;
    for (size_t i = 0; i < run->server.n; i++) {
        const fit_server_sample *s = &run->server.v[i];
        int srv = FIT_SMK_SRV(s->kind);
        if (srv >= LL_SRV_DCGM || s->t_ns < L->start_ns || s->t_ns > L->end_ns)
            continue;
        if (FIT_SMK_ROLE(s->kind) == LL_ROLE_RUNNING && (running < 0 || srv < running))
            running = srv;
        if (any < 0 || srv < any)
            any = srv;
    }
    return running >= 0 ? running : any;
}

/* Tokens per step from the iteration counter, over [t0, t1]. */
static void server_tok_per_step(const fit_run *run, fit_level *L, int srv, int64_t t0, int64_t t1, double iters)
{
    int64_t span_ns;
    double tok = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_ITER_TOKENS), t0, t1, &span_ns, NULL, NULL);
    double b0, b1, n0, n1;
    if (isfinite(tok))
        L->server_tok_per_step = tok / iters;
    else if (first_last(run, FIT_SMK(srv, LL_ROLE_BUSY_PER_ITER), t0, t1, &b0, &b1) &&
             first_last(run, FIT_SMK(srv, LL_ROLE_ITERS), t0, t1, &n0, &n1) && n1 > n0)
        L->server_tok_per_step = (b1 * n1 - b0 * n0) / (n1 - n0); /* a mean since start, differenced */
}

/* Step time and tokens per step on the server's clock, over [t0, t1]: the
 * first of the server's decode-only figures ("Server figures", server step)
 * it has; iterations only where it has none of them. */
static void server_steps(const fit_run *run, fit_level *L, int srv, int64_t t0, int64_t t1)
{
    int64_t span_ns, span2_ns;
    double iters = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_ITERS), t0, t1, &span2_ns, NULL, NULL);
    if (iters > 0)
        server_tok_per_step(run, L, srv, t0, t1, iters);
    double step_ms = fit_server_mean(run, srv, LL_ROLE_STEP_SUM, LL_ROLE_STEP_COUNT, t0, t1, 1000);
    if (!isfinite(step_ms))
        step_ms = fit_server_mean(run, srv, LL_ROLE_ITL_SUM, LL_ROLE_ITL_COUNT, t0, t1, 1000);
    if (!isfinite(step_ms)) {
        /* counted when a request ends: over the whole level, not its steady windows */
        double sec = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_GEN_SECONDS), L->start_ns, L->end_ns, &span_ns,
                                        NULL, NULL);
        double gen = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_GEN_TOKENS), L->start_ns, L->end_ns, &span_ns,
                                        NULL, NULL);
        if (gen > 0 && isfinite(sec))
            step_ms = 1000 * sec / gen;
    }
    if (isfinite(step_ms)) {
        L->server_step_ms = step_ms;
        return;
    }
    if (iters > 0) {
        /* each engine's (series') span over its own steps, summed: k
         * data-parallel engines step k times as often as one, not faster */
        L->server_step_ms = span2_ns / 1e6 / iters;
        return;
    }
    size_t n;
    double last = fit_server_gauge(run, L, FIT_SMK(srv, LL_ROLE_STEP_LAST), 0, &n);
    if (n)
        L->server_step_ms = 1000 * last;
}

/* Generated tokens per second and the prefix-cache share over the level. */
static void server_tokens(const fit_run *run, fit_level *L, int srv)
{
    int64_t span_ns, s2;
    double gen = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_GEN_TOKENS), L->start_ns, L->end_ns, &span_ns, NULL,
                                    NULL);
    if (gen >= 0 && span_ns > 0)
        L->server_gen_tok_s = gen / (span_ns / 1e9);
    double hits = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_CACHED_TOKENS), L->start_ns, L->end_ns, &s2, NULL,
                                     NULL);
    if (!isfinite(hits))
        return;
    double queries = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_CACHE_QUERIES), L->start_ns, L->end_ns, &s2,
                                        NULL, NULL);
    double prompt = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_PROMPT_TOKENS), L->start_ns, L->end_ns, &s2,
                                       NULL, NULL);
    double computed = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_PROMPT_UNCACHED), L->start_ns, L->end_ns, &s2,
                                         NULL, NULL);
    double all = queries > 0 ? queries : prompt > 0 ? prompt : computed >= 0 ? computed + hits : NAN;
    if (all > 0)
        L->server_cache_share = hits / all;
}

void fit_server_level(const fit_run *run, fit_level *L)
{
    L->server_scrapes = 0;
    L->server_n = L->server_waiting = L->server_step_ms = L->server_tok_per_step = L->server_stale_s = NAN;
    L->server_gen_tok_s = L->server_cache_share = NAN;
    L->server_n_disagrees = 0;
    L->server = -1;
    if (!run->server.n || (L->server = level_server(run, L)) < 0) {
        fit_server_own_level(run, L, -1);
        return;
    }
    int srv = L->server;
    size_t nw;
    /* One server's gauge: an engine that also serves vLLM's names would count twice. */
    L->server_n = fit_server_gauge(run, L, FIT_SMK(srv, LL_ROLE_RUNNING), 0, &L->server_scrapes);
    L->server_waiting = fit_server_gauge(run, L, FIT_SMK(srv, LL_ROLE_WAITING), 0, &nw);
    int64_t t0 = L->n_windows ? L->windows[0].t0_ns : L->start_ns;
    int64_t t1 = L->n_windows ? L->windows[L->n_windows - 1].t1_ns : L->end_ns;
    server_steps(run, L, srv, t0, t1);
    server_tokens(run, L, srv);
    fit_server_own_level(run, L, srv);
    /* any SGLang page scraped (a --metrics-url beside another server's too) */
    L->server_stale_s = stale_span_s(run, L, FIT_SMK(LL_SRV_SGLANG, LL_ROLE_GEN_THROUGHPUT));
    if (L->closed_loop && L->n_windows && L->concurrency > 0 && isfinite(L->server_n))
        L->server_n_disagrees =
            fabs(L->server_n - L->concurrency) > FIT_SERVER_N_REL * L->concurrency + FIT_SERVER_N_ABS;
}
