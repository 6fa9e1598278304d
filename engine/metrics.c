/* metrics.c: step statistics and the Prometheus text served at /metrics.
 * Updated by the scheduler once per step, read by the HTTP thread; both under
 * eng->mu. Phase names come from the backend (static strings), so a cpu or
 * cuda backend's phases ("dense_gemm", "attention", ...) appear as they are.
 * With tensor parallelism each (phase, rank) is its own series: rank 0's keep
 * the plain {phase="..."} label (the step's critical path, as without tp),
 * the others add rank="r". The all-reduce is the phase "all_reduce" (NCCL's
 * kernel name on a GPU); loadlaw_comm_seconds_total sums rank 0's
 * communication phases, the same figure as the step records' comm_ns.
 * The requests' own latencies, as vLLM's page names them (the fit reads them
 * by the same roles, fit/server_own.c): the gap between a request's
 * consecutive tokens (step end to step end), submit to the end of the step
 * that made its first token, and submit to admission into the batch; the
 * scheduler observes them (sched.c emit, admit_waiting). */
#include <stddef.h>
#include <string.h>

#include "internal.h"

const double eng_hist_bounds_s[ENG_HIST_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1e300, /* last: +Inf */
};

static int bucket_of(double d)
{
    int b = 0;
    while (b < ENG_HIST_BUCKETS - 1 && d > eng_hist_bounds_s[b])
        b++;
    return b;
}

void eng_metrics_lat(eng_lat *l, int64_t ns)
{
    double d = (double)ns * 1e-9;
    l->sum_s += d;
    l->count++;
    l->hist[bucket_of(d)]++;
}

void eng_metrics_step(eng_engine *e, const eng_step *s, const eng_phase *ph, int n_ph,
                      int gen_tok)
{
    double d = (double)s->dur_ns * 1e-9;
    e->steps_total++;
    e->step_sum_s += d;
    e->prompt_tok_total += (uint64_t)s->prefill_tok;
    e->gen_tok_total += (uint64_t)gen_tok;
    e->hist[bucket_of(d)]++;
    e->comm_sum_s += (double)s->comm_ns * 1e-9;
    for (int i = 0; i < n_ph; i++) {
        int k = 0;
        while (k < e->n_phase_names &&
               (e->phase_rank[k] != ph[i].rank || strcmp(e->phase_name[k], ph[i].name) != 0))
            k++;
        if (k == e->n_phase_names) {
            if (k == ENG_MAX_PHASE_NAMES)
                continue; /* a backend with this many phase names is out of bounds */
            e->phase_rank[k] = ph[i].rank;
            e->phase_name[e->n_phase_names++] = ph[i].name;
        }
        e->phase_sum_s[k] += (double)ph[i].dur_ns * 1e-9;
        e->phase_count[k]++;
    }
}

#define GAUGE(b, name, help, fmt, v)                                           \
    ll_buf_printf(b, "# HELP " name " " help "\n# TYPE " name " gauge\n" name " " fmt "\n", v)
#define COUNTER(b, name, help, fmt, v)                                         \
    ll_buf_printf(b, "# HELP " name " " help "\n# TYPE " name " counter\n" name " " fmt "\n", v)

/* ",rank=\"r\"" for a tp rank other than 0, else "". */
static const char *rank_label(int rank, char *buf, size_t len)
{
    if (rank == 0)
        return "";
    snprintf(buf, len, ",rank=\"%d\"", rank);
    return buf;
}

/* A histogram: HELP, TYPE, cumulative buckets of eng_hist_bounds_s, sum, count. */
static int hist_write(ll_buf *b, const char *name, const char *help, const uint64_t *hist, double sum_s,
                      uint64_t count)
{
    int rc;
    LL_TRY(ll_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name));
    uint64_t cum = 0;
    for (int i = 0; i < ENG_HIST_BUCKETS; i++) {
        cum += hist[i];
        if (i == ENG_HIST_BUCKETS - 1)
            LL_TRY(ll_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum));
        else
            LL_TRY(ll_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, eng_hist_bounds_s[i],
                                 (unsigned long long)cum));
    }
    LL_TRY(ll_buf_printf(b, "%s_sum %.9f\n%s_count %llu\n", name, sum_s, name, (unsigned long long)count));
fail:
    return rc;
}

/* The requests' own latencies; the caller holds e->mu. */
static int latencies_write(eng_engine *e, ll_buf *b)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } h[] = {
        {"loadlaw_inter_token_latency_seconds", "Gap between a request's consecutive tokens (step ends).",
         offsetof(eng_engine, itl)},
        {"loadlaw_time_to_first_token_seconds", "Submit to the end of the step that made the first token.",
         offsetof(eng_engine, ttft)},
        {"loadlaw_request_queue_time_seconds", "Submit to admission into the running batch.",
         offsetof(eng_engine, queue)},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        const eng_lat *l = (const eng_lat *)((const char *)e + h[i].off);
        int rc = hist_write(b, h[i].name, h[i].help, l->hist, l->sum_s, l->count);
        if (rc)
            return rc;
    }
    return 0;
}

/* The exposition text; the caller holds e->mu. 0 or the first ll_buf_printf error. */
static int metrics_write(eng_engine *e, ll_buf *b)
{
    int rc;
    char rl[32];
    LL_TRY(GAUGE(b, "loadlaw_running_requests", "Sequences admitted to the batch (prefilling or decoding).",
                 "%d", atomic_load(&e->n_running)));
    LL_TRY(GAUGE(b, "loadlaw_waiting_requests", "Requests queued for admission.", "%d", e->n_waiting));
    /* vLLM's names for the same two gauges, so tools that scrape vLLM read
     * us too; only on request, since promtool refuses colons in names an
     * exporter writes (they are reserved for recording rules). */
    if (e->cfg.metrics_vllm_names) {
        LL_TRY(GAUGE(b, "vllm:num_requests_running", "Same as loadlaw_running_requests.", "%d",
                     atomic_load(&e->n_running)));
        LL_TRY(GAUGE(b, "vllm:num_requests_waiting", "Same as loadlaw_waiting_requests.", "%d",
                     e->n_waiting));
    }
    pthread_mutex_lock(&e->log_mu); /* order: mu, then log_mu (publish_step never nests them) */
    size_t dropped = e->log_total - e->log.n;
    pthread_mutex_unlock(&e->log_mu);
    LL_TRY(COUNTER(b, "loadlaw_step_log_dropped_total",
                   "Steps dropped from the step log's ring (step_log_max) to bound its memory.",
                   "%zu", dropped));
    LL_TRY(COUNTER(b, "loadlaw_handoff_dropped_total",
                   "handoff_sample tokens not recorded (8 unsent on one stream, or no records "
                   "writer attached).",
                   "%llu", (unsigned long long)atomic_load(&e->handoff_dropped)));
    LL_TRY(COUNTER(b, "loadlaw_steps_total", "Engine steps run.", "%llu",
                   (unsigned long long)e->steps_total));
    LL_TRY(COUNTER(b, "loadlaw_prompt_tokens_total", "Prompt tokens prefilled.", "%llu",
                   (unsigned long long)e->prompt_tok_total));
    LL_TRY(COUNTER(b, "loadlaw_prompt_tokens_cached_total",
                   "Prompt tokens the prefix cache served (prefix_cache=1), not prefilled.", "%llu",
                   (unsigned long long)e->prompt_cached_total));
    LL_TRY(COUNTER(b, "loadlaw_generation_tokens_total", "Tokens generated.", "%llu",
                   (unsigned long long)e->gen_tok_total));
    LL_TRY(ll_buf_printf(b, "# HELP loadlaw_requests_total Requests that left the engine, by outcome.\n"
                            "# TYPE loadlaw_requests_total counter\n"
                            "loadlaw_requests_total{outcome=\"finished\"} %llu\n"
                            "loadlaw_requests_total{outcome=\"cancelled\"} %llu\n"
                            "loadlaw_requests_total{outcome=\"rejected\"} %llu\n",
                         (unsigned long long)e->req_finished, (unsigned long long)e->req_cancelled,
                         (unsigned long long)e->req_rejected));
    LL_TRY(hist_write(b, "loadlaw_step_duration_seconds", "Wall time of each engine step.", e->hist, e->step_sum_s,
                      e->steps_total));
    LL_TRY(latencies_write(e, b));
    LL_TRY(ll_buf_printf(b, "# HELP loadlaw_phase_seconds_total Time spent in each backend phase.\n"
                            "# TYPE loadlaw_phase_seconds_total counter\n"));
    for (int k = 0; k < e->n_phase_names; k++)
        LL_TRY(ll_buf_printf(b, "loadlaw_phase_seconds_total{phase=\"%s\"%s} %.9f\n",
                             e->phase_name[k], rank_label(e->phase_rank[k], rl, sizeof rl),
                             e->phase_sum_s[k]));
    LL_TRY(ll_buf_printf(b, "# HELP loadlaw_phase_total Steps that ran each backend phase.\n"
                            "# TYPE loadlaw_phase_total counter\n"));
    for (int k = 0; k < e->n_phase_names; k++)
        LL_TRY(ll_buf_printf(b, "loadlaw_phase_total{phase=\"%s\"%s} %llu\n", e->phase_name[k],
                             rank_label(e->phase_rank[k], rl, sizeof rl),
                             (unsigned long long)e->phase_count[k]));
    LL_TRY(COUNTER(b, "loadlaw_comm_seconds_total",
                   "Time rank 0 spent in communication phases (tensor-parallel all-reduce).",
                   "%.9f", e->comm_sum_s));
fail:
    return rc;
}

int eng_metrics_text(eng_engine *e, ll_buf *b)
{
    pthread_mutex_lock(&e->mu);
    int rc = metrics_write(e, b);
    pthread_mutex_unlock(&e->mu);
    return rc;
}
