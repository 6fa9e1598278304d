/* server_own.c: the server's own latencies per level, from the histograms
 * and gauges of its /metrics page (common/dialect.h roles), beside the
 * client's figures of the same level.
 *
 * The server's own latencies (NAN where the page has no such row):
 *  ITL mean        Δsum / Δcount of the inter-token-latency histogram
 *                  (vLLM, SGLang: one observation per gap between a
 *                  request's consecutive tokens, as the engine stamped them).
 *  TTFT mean, p90  the time-to-first-token histogram: Δsum / Δcount, and the
 *                  90th percentile of its Δ buckets, interpolated linearly
 *                  inside the bucket that holds it (Prometheus'
 *                  histogram_quantile; buckets summed over engines by bound).
 *                  A p90 in the +Inf bucket is the highest finite bound (a
 *                  lower bound). vLLM's buckets near 1 s are 0.75, 1, 2.5 s
 *                  wide: the p90 is as coarse as they are.
 *  queue, prefill, decode
 *                  per-request means of the queue (arrival to scheduled),
 *                  prefill (scheduled to first token) and decode (first to
 *                  last token) histograms.
 *  KV usage        the KV-cache usage gauge (0..1), mean over engines per
 *                  scrape: its mean and its maximum over the level's scrapes.
 *  preemptions     the increase of the preemptions counter.
 *  waiting by reason  vLLM's waiting gauge split into "capacity" (batch or
 *                  KV capacity) and "deferred" (LoRA budget, KV transfer):
 *                  means over the steady windows, as the waiting gauge.
 * The histograms are observed when a request reaches the point they time
 * (first token, end), so they are differenced over the whole level (its
 * first to its last scrape), not its steady windows: a level's last
 * requests, observed after its last scrape, fall out of it.
 *
 * Cost: one pass over the run's samples per figure, and one per bucket
 * series for the p90 (vLLM writes ~20 TTFT buckets per engine). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit_internal.h"

#define TTFT_Q 0.90

/* The increase of one series over [t0, t1] (a drop: a restart); NAN with
 * fewer than two samples. */
static double series_delta(const fit_run *run, uint32_t ser, int64_t t0, int64_t t1)
{
    double prev = NAN, d = 0;
    size_t n = 0;
    for (size_t i = 0; i < run->server.n; i++) {
        const fit_server_sample *s = &run->server.v[i];
        if (s->series != ser || s->t_ns < t0 || s->t_ns > t1)
            continue;
        if (n++)
            d += s->value >= prev ? s->value - prev : s->value;
        prev = s->value;
    }
    return n >= 2 ? d : NAN;
}

/* A series' `le` bound from its key ("src\x1fname\x1flabels"); 0 when it has
 * none (never a bucket the table keeps). */
static int series_le(const char *key, double *le)
{
    const char *labels = strrchr(key, '\x1f');
    for (const char *p = labels; p && (p = strstr(p, "le=\"")); p += 4)
        if (p[-1] == '\x1f' || p[-1] == ',') {
            *le = strncmp(p + 4, "+Inf\"", 5) == 0 ? INFINITY : strtod(p + 4, NULL);
            return 1;
        }
    return 0;
}

typedef struct bucket {
    double le, count;
} bucket;

static int by_le(const void *a, const void *b)
{
    double x = ((const bucket *)a)->le, y = ((const bucket *)b)->le;
    return x < y ? -1 : x > y;
}

/* The q-quantile (seconds) of a bucket role's increase over [t0, t1]. */
static double bucket_quantile(const fit_run *run, int kind, int64_t t0, int64_t t1, double q)
{
    bucket *b = NULL;
    size_t n = 0;
    double out = NAN;
    for (uint32_t ser = 0; ser < run->series.n; ser++) {
        size_t i = 0;
        while (i < run->server.n && !(run->server.v[i].series == ser))
            i++;
        double le, d;
        if (i == run->server.n || run->server.v[i].kind != kind || !series_le(run->series.v[ser], &le) ||
            !isfinite(d = series_delta(run, ser, t0, t1)))
            continue;
        size_t j = 0;
        while (j < n && b[j].le != le)
            j++;
        if (j == n) {
            bucket *nb = realloc(b, (n + 1) * sizeof *b);
            if (!nb)
                goto done;
            b = nb;
            b[n++] = (bucket){le, 0};
        }
        b[j].count += d; /* engines' buckets of one bound, summed */
    }
    if (!n)
        goto done;
    qsort(b, n, sizeof *b, by_le);
    double total = b[n - 1].count, want = q * total, below = 0, lo = 0;
    if (!isinf(b[n - 1].le) || !(total > 0))
        goto done;
    for (size_t j = 0; j < n; j++) {
        if (b[j].count >= want) {
            if (isinf(b[j].le))
                out = lo;
            else
                out = b[j].count > below ? lo + (b[j].le - lo) * (want - below) / (b[j].count - below) : b[j].le;
            break;
        }
        below = b[j].count;
        lo = b[j].le;
    }
done:
    free(b);
    return out;
}

/* Mean and maximum over the scrapes in [L start, L end] of each scrape's
 * mean of a gauge kind over its labels; NAN when none. */
static void gauge_mean_max(const fit_run *run, const fit_level *L, int kind, double *mean, double *max)
{
    double total = 0, cur = 0, hi = NAN;
    size_t n = 0, in_scrape = 0;
    int64_t t = -1;
    for (size_t i = 0; i <= run->server.n; i++) {
        const fit_server_sample *s = i < run->server.n ? &run->server.v[i] : NULL;
        if (s && (s->kind != kind || s->t_ns < L->start_ns || s->t_ns > L->end_ns))
            continue;
        if (in_scrape && (!s || s->t_ns != t)) {
            double v = cur / (double)in_scrape;
            total += v;
            hi = n++ && hi >= v ? hi : v;
            cur = 0;
            in_scrape = 0;
        }
        if (!s)
            break;
        t = s->t_ns;
        cur += s->value;
        in_scrape++;
    }
    *mean = n ? total / (double)n : NAN;
    *max = hi;
}

void fit_server_own_level(const fit_run *run, fit_level *L, int srv)
{
    L->server_itl_mean_ms = L->server_ttft_mean_ms = L->server_ttft_p90_ms = NAN;
    L->server_queue_mean_ms = L->server_prefill_mean_ms = L->server_decode_mean_ms = NAN;
    L->server_kv_usage_mean = L->server_kv_usage_max = L->server_preemptions = NAN;
    L->server_waiting_capacity = L->server_waiting_deferred = NAN;
    if (srv < 0)
        return;
    int64_t t0 = L->start_ns, t1 = L->end_ns, span_ns;
    L->server_itl_mean_ms = fit_server_mean(run, srv, LL_ROLE_ITL_SUM, LL_ROLE_ITL_COUNT, t0, t1, 1000);
    L->server_ttft_mean_ms = fit_server_mean(run, srv, LL_ROLE_TTFT_SUM, LL_ROLE_TTFT_COUNT, t0, t1, 1000);
    L->server_ttft_p90_ms = 1000 * bucket_quantile(run, FIT_SMK(srv, LL_ROLE_TTFT_BUCKET), t0, t1, TTFT_Q);
    L->server_queue_mean_ms = fit_server_mean(run, srv, LL_ROLE_QUEUE_SUM, LL_ROLE_QUEUE_COUNT, t0, t1, 1000);
    L->server_prefill_mean_ms = fit_server_mean(run, srv, LL_ROLE_PREFILL_SUM, LL_ROLE_PREFILL_COUNT, t0, t1, 1000);
    L->server_decode_mean_ms = fit_server_mean(run, srv, LL_ROLE_DECODE_SUM, LL_ROLE_DECODE_COUNT, t0, t1, 1000);
    gauge_mean_max(run, L, FIT_SMK(srv, LL_ROLE_KV_USAGE), &L->server_kv_usage_mean, &L->server_kv_usage_max);
    L->server_preemptions = fit_server_counter(run, FIT_SMK(srv, LL_ROLE_PREEMPTIONS), t0, t1, &span_ns, NULL, NULL);
    size_t n;
    L->server_waiting_capacity = fit_server_gauge(run, L, FIT_SMK(srv, LL_ROLE_WAITING_CAPACITY), 0, &n);
    L->server_waiting_deferred = fit_server_gauge(run, L, FIT_SMK(srv, LL_ROLE_WAITING_DEFERRED), 0, &n);
}
