/* server.c: the server's own figures per level (fit.h "Server figures")
 * from the samples `sweep` scraped from /metrics (records.h "metric").
 *
 * Gauges are means over scrapes inside the level's steady windows: each
 * scrape's samples share one t_ns, so a scrape's total over labels
 * (engines, data-parallel ranks) is the run of equal t_ns of one kind.
 * Counters are differenced per series with reset detection, over the span of
 * the steady windows. The scraper is one thread, so the samples are in time
 * order in the file. Cost: one pass over the run's samples per figure and
 * level (a run holds ~10 samples per scrape, 2 scrapes a second). The
 * gauge and counter helpers also serve gpu.c (the GPU figures), and the
 * running gauge's scrape series the law against the server's N (analyze.c). */
#include <math.h>
#include <string.h>

#include "fit_internal.h"

static const struct {
    const char *name;
    fit_smk kind;
} kinds[] = {
    {"loadlaw_running_requests", FIT_SMK_RUN_LL},
    {"vllm:num_requests_running", FIT_SMK_RUN_VLLM},
    {"sglang:num_running_reqs", FIT_SMK_RUN_SGL},
    {"loadlaw_waiting_requests", FIT_SMK_WAIT_LL},
    {"vllm:num_requests_waiting", FIT_SMK_WAIT_VLLM},
    {"sglang:num_queue_reqs", FIT_SMK_WAIT_SGL},
    {"loadlaw_step_duration_seconds_sum", FIT_SMK_LL_STEP_SUM},
    {"loadlaw_step_duration_seconds_count", FIT_SMK_LL_STEP_COUNT},
    {"vllm:iteration_tokens_total_sum", FIT_SMK_VLLM_ITER_SUM},
    {"vllm:iteration_tokens_total_count", FIT_SMK_VLLM_ITER_COUNT},
    {"sglang:gen_throughput", FIT_SMK_SGL_GEN_THROUGHPUT},
    {"nvml_power_w", FIT_SMK_NVML_POWER},
    {"DCGM_FI_DEV_POWER_USAGE", FIT_SMK_DCGM_POWER},
    {"nvml_power_limit_w", FIT_SMK_NVML_LIMIT},
    {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", FIT_SMK_DCGM_LIMIT},
    {"DCGM_FI_DEV_POWER_MGMT_LIMIT", FIT_SMK_DCGM_MGMT_LIMIT},
    {"nvml_energy_mj", FIT_SMK_NVML_ENERGY},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", FIT_SMK_DCGM_ENERGY},
    {"nvml_sm_active_ratio", FIT_SMK_NVML_SM},
    {"DCGM_FI_PROF_SM_ACTIVE", FIT_SMK_DCGM_SM},
    {"nvml_tensor_active_ratio", FIT_SMK_NVML_TENSOR},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", FIT_SMK_DCGM_TENSOR},
    {"nvml_dram_active_ratio", FIT_SMK_NVML_DRAM},
    {"DCGM_FI_PROF_DRAM_ACTIVE", FIT_SMK_DCGM_DRAM},
};

int fit_server_kind(const char *name)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(name, kinds[i].name) == 0)
            return kinds[i].kind;
    return FIT_SMK_NONE;
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

int fit_server_n_series(const fit_run *run, const fit_level *L, int64_t **t_out, double **v_out, size_t *n_out)
{
    static const int run_kinds[] = {FIT_SMK_RUN_LL, FIT_SMK_RUN_VLLM, FIT_SMK_RUN_SGL};
    LL_VEC(int64_t) t = {0};
    fit_double_vec v = {0};
    int rc = 0;
    *t_out = NULL;
    *v_out = NULL;
    *n_out = 0;
    /* one family, as server N (an engine serving two families' names would count twice) */
    for (size_t k = 0; k < 3 && !t.n; k++)
        for (size_t i = 0; i < run->server.n; i++) {
            const fit_server_sample *s = &run->server.v[i];
            if (s->kind != run_kinds[k] || s->t_ns < L->start_ns || s->t_ns > L->end_ns)
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

void fit_server_level(const fit_run *run, fit_level *L)
{
    static const int run_kinds[] = {FIT_SMK_RUN_LL, FIT_SMK_RUN_VLLM, FIT_SMK_RUN_SGL};
    L->server_scrapes = 0;
    L->server_n = L->server_waiting = L->server_step_ms = L->server_tok_per_step = L->server_stale_s = NAN;
    L->server_n_disagrees = 0;
    if (!run->server.n)
        return;
    /* One family's gauge: an engine that also serves vLLM's names would count twice. */
    for (size_t k = 0; k < 3 && !L->server_scrapes; k++) {
        L->server_n = fit_server_gauge(run, L, run_kinds[k], 0, &L->server_scrapes);
        size_t nw;
        L->server_waiting = fit_server_gauge(run, L, run_kinds[k] + (FIT_SMK_WAIT_LL - FIT_SMK_RUN_LL), 0, &nw);
    }
    int64_t t0 = L->n_windows ? L->windows[0].t0_ns : L->start_ns;
    int64_t t1 = L->n_windows ? L->windows[L->n_windows - 1].t1_ns : L->end_ns, span_ns, span2_ns;
    double dsum = fit_server_counter(run, FIT_SMK_LL_STEP_SUM, t0, t1, &span_ns, NULL, NULL);
    double dcount = fit_server_counter(run, FIT_SMK_LL_STEP_COUNT, t0, t1, &span2_ns, NULL, NULL);
    if (dcount > 0 && isfinite(dsum))
        L->server_step_ms = 1000 * dsum / dcount;
    dsum = fit_server_counter(run, FIT_SMK_VLLM_ITER_SUM, t0, t1, &span_ns, NULL, NULL);
    dcount = fit_server_counter(run, FIT_SMK_VLLM_ITER_COUNT, t0, t1, &span2_ns, NULL, NULL);
    if (dcount > 0 && !isfinite(L->server_step_ms)) {
        /* each engine's (series') span over its own steps, summed: k
         * data-parallel engines step k times as often as one, not faster */
        L->server_step_ms = span2_ns / 1e6 / dcount;
        L->server_tok_per_step = isfinite(dsum) ? dsum / dcount : NAN;
    }
    L->server_stale_s = stale_span_s(run, L, FIT_SMK_SGL_GEN_THROUGHPUT);
    if (L->closed_loop && L->n_windows && L->concurrency > 0 && isfinite(L->server_n))
        L->server_n_disagrees =
            fabs(L->server_n - L->concurrency) > FIT_SERVER_N_REL * L->concurrency + FIT_SERVER_N_ABS;
}
