/* scrape.c: the sweep's scraper of Prometheus /metrics endpoints
 * (telemetry.h): what a server says about its own batch, queue and steps,
 * sampled beside the client's stamps.
 *
 * DESIGN: one thread (an ll_ticker, common.h: tel_scrape_stop ends its wait at
 * once), one libcurl easy handle per endpoint (kept, so the connection is
 * reused), a blocking curl_easy_perform per scrape. Each sample of a known family
 * becomes one `metric` record (records.h) stamped with the middle of its
 * scrape on the run clock; the fit (fit/server.c) differences counters over
 * each level's steady window. Only known families are kept: an exporter
 * serves hundreds of series, and a record per series per half second would
 * outweigh the run's own records.
 *
 * Why 2 Hz by default: a level's steady window lasts seconds to minutes,
 * and a gauge sampled every 15-30 s (Prometheus' usual interval) would give
 * a level one sample or none. */

#include <curl/curl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "telemetry.h"

/* A body larger than this is not a /metrics page we want (a DCGM exporter
 * with every field on 8 GPUs is ~200 KiB). */
#define SCRAPE_MAX_BYTES (16u << 20)

typedef struct endpoint {
    char *url;
    char *shown;              /* url with its secrets hidden: records and messages */
    CURL *easy;
    struct curl_slist *headers;
    ll_buf body;
    size_t n_ok, n_failed;
    int said;                 /* the first failure was reported */
    char curl_err[CURL_ERROR_SIZE];
} endpoint;

struct tel_scrape {
    endpoint *ep;
    size_t n_ep;
    int64_t interval_ns;
    ll_rec_writer *w;
    int64_t epoch_ns;
    ll_ticker *ticker;
    ll_buf labels;            /* scraper thread only */
    int64_t t_ns;             /* the scrape being written */
    const char *src;
    int put_failed;
};

/* Exact sample names kept (histograms and summaries: _sum and _count only;
 * the buckets of a per-step histogram add nothing to a mean). */
static const char *const known_names[] = {
    /* loadlaw's own engine (engine/metrics.c) */
    "loadlaw_running_requests", "loadlaw_waiting_requests", "loadlaw_steps_total",
    "loadlaw_step_duration_seconds_sum", "loadlaw_step_duration_seconds_count", "loadlaw_generation_tokens_total",
    /* vLLM (v1 names; gpu_cache_usage_perc and time_per_output_token are the older ones) */
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:iteration_tokens_total_sum",
    "vllm:iteration_tokens_total_count", "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_sum",
    "vllm:time_per_output_token_seconds_count", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total", "vllm:generation_tokens_total",
    /* SGLang (--enable-metrics) */
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:token_usage",
    /* DCGM exporter */
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_PROF_SM_OCCUPANCY",
};

int tel_scrape_known(const char *name)
{
    for (size_t i = 0; i < sizeof known_names / sizeof known_names[0]; i++)
        if (strcmp(name, known_names[i]) == 0)
            return 1;
    return 0;
}

int tel_scrape_default_url(const char *url, char *out, size_t n)
{
    return ll_url_join(url, "/v1", "/metrics", out, n);
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx)
{
    ll_buf *b = ctx;
    size_t n = sz * nm;
    if (b->len + n > SCRAPE_MAX_BYTES || ll_buf_append(b, p, n))
        return 0; /* curl fails the transfer: counted as a failed scrape */
    return n;
}

static int on_sample(const tel_prom_sample *s, void *ctx)
{
    tel_scrape *sc = ctx;
    if (!tel_scrape_known(s->name) || !isfinite(s->value))
        return 0;
    ll_buf_reset(&sc->labels);
    if (tel_prom_format_labels(&sc->labels, s))
        return LL_ENOMEM;
    ll_rec_metric m = {.t_ns = sc->t_ns, .src = sc->src, .name = s->name, .labels = sc->labels.p,
                       .value = s->value};
    int rc = ll_rec_put_metric(sc->w, &m);
    if (rc)
        sc->put_failed = 1;
    return rc;
}

static void say_failure(endpoint *e, const char *why)
{
    e->n_failed++;
    if (e->said)
        return;
    e->said = 1;
    fprintf(stderr, "loadlaw sweep: metrics: %s: %s (counted; the sweep goes on without them)\n", e->shown, why);
}

static void scrape_one(tel_scrape *sc, endpoint *e)
{
    char why[CURL_ERROR_SIZE + 64];
    long status = 0;
    ll_buf_reset(&e->body);
    e->curl_err[0] = '\0';
    int64_t t0 = ll_now_ns();
    CURLcode cc = curl_easy_perform(e->easy);
    int64_t t1 = ll_now_ns();
    if (cc != CURLE_OK) {
        snprintf(why, sizeof why, "%s", e->curl_err[0] ? e->curl_err : curl_easy_strerror(cc));
        say_failure(e, why);
        return;
    }
    if (curl_easy_getinfo(e->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200) {
        snprintf(why, sizeof why, "HTTP %ld", status);
        say_failure(e, why);
        return;
    }
    e->n_ok++;
    /* The server took its snapshot somewhere between send and receive. */
    sc->t_ns = t0 + (t1 - t0) / 2 - sc->epoch_ns;
    sc->src = e->shown;
    tel_prom_parse(e->body.p ? e->body.p : "", e->body.len, on_sample, sc, NULL);
}

/* One round over every endpoint; nonzero (the records writer refused) ends
 * the ticker. */
static int scrape_round(void *arg)
{
    tel_scrape *sc = arg;
    for (size_t i = 0; i < sc->n_ep && !sc->put_failed; i++)
        scrape_one(sc, &sc->ep[i]);
    return sc->put_failed;
}

/* One header line onto e's list (curl copies it). */
static int add_header(endpoint *e, const char *line)
{
    struct curl_slist *t = curl_slist_append(e->headers, line);
    if (!t)
        return LL_ENOMEM; /* the list so far stays e's */
    e->headers = t;
    return 0;
}

/* The requests' credentials (tel_scrape_auth), for a target of their origin. */
static int add_credentials(endpoint *e, const tel_scrape_auth *a)
{
    int rc = 0;
    if (a->key) {
        char *bearer = ll_bearer_header(a->key);
        rc = bearer ? add_header(e, bearer) : LL_ENOMEM;
        ll_wipe_free(bearer);
    }
    for (size_t i = 0; i < a->n_headers && rc == 0; i++)
        if (ll_secret_name(a->headers[i], strcspn(a->headers[i], ":")))
            rc = add_header(e, a->headers[i]);
    return rc;
}

static int endpoint_init(endpoint *e, const tel_scrape_target *t, const tel_scrape_auth *auth, double interval_s)
{
    int rc = LL_ENOMEM;
    if (!(e->url = strdup(t->url)) || !(e->shown = ll_redact_url(t->url)) || !(e->easy = curl_easy_init()))
        return LL_ENOMEM;
    /* never to another server: a --metrics-url elsewhere gets no key */
    if (auth && ll_same_origin(t->url, auth->url) && (rc = add_credentials(e, auth)))
        return rc;
    long timeout_ms = (long)(fmax(1.0, interval_s) * 1000);
    rc = curl_easy_setopt(e->easy, CURLOPT_URL, e->url) || curl_easy_setopt(e->easy, CURLOPT_NOSIGNAL, 1L) ||
                 curl_easy_setopt(e->easy, CURLOPT_WRITEFUNCTION, on_body) ||
                 curl_easy_setopt(e->easy, CURLOPT_WRITEDATA, &e->body) ||
                 curl_easy_setopt(e->easy, CURLOPT_ERRORBUFFER, e->curl_err) ||
                 curl_easy_setopt(e->easy, CURLOPT_TIMEOUT_MS, timeout_ms) ||
                 curl_easy_setopt(e->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms) ||
                 curl_easy_setopt(e->easy, CURLOPT_HTTPHEADER, e->headers)
             ? LL_EINVAL
             : 0;
    return rc;
}

static void scrape_free(tel_scrape *sc)
{
    for (size_t i = 0; i < sc->n_ep; i++) {
        endpoint *e = &sc->ep[i];
        if (e->easy)
            curl_easy_cleanup(e->easy);
        for (struct curl_slist *h = e->headers; h; h = h->next)
            explicit_bzero(h->data, strlen(h->data)); /* keys: not left in freed memory */
        curl_slist_free_all(e->headers);
        ll_buf_free(&e->body);
        free(e->url);
        free(e->shown);
    }
    free(sc->ep);
    ll_buf_free(&sc->labels);
    free(sc);
}

int tel_scrape_start(const tel_scrape_target *targets, size_t n, const tel_scrape_auth *auth, double interval_s,
                     ll_rec_writer *w, tel_scrape **out, char *err, size_t errlen)
{
    int rc;
    tel_scrape *sc = calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc)
        return LL_ENOMEM;
    sc->w = w;
    sc->epoch_ns = ll_rec_epoch_ns(w);
    sc->interval_ns = (int64_t)(interval_s * 1e9);
    LL_TRY((sc->ep = calloc(n ? n : 1, sizeof *sc->ep)) ? 0 : LL_ENOMEM);
    for (; sc->n_ep < n; sc->n_ep++)
        if ((rc = endpoint_init(&sc->ep[sc->n_ep], &targets[sc->n_ep], auth, interval_s))) {
            char *shown = ll_redact_url(targets[sc->n_ep].url);
            sc->n_ep++;
            ll_errf(err, errlen, "metrics: %s: %s", shown ? shown : "(url)", ll_strerror(rc));
            free(shown);
            goto fail;
        }
    if ((rc = ll_ticker_start(sc->interval_ns, scrape_round, sc, &sc->ticker))) {
        ll_errf(err, errlen, "metrics: cannot start the scraper thread");
        goto fail;
    }
    *out = sc;
    return 0;
fail:
    scrape_free(sc);
    return rc;
}

void tel_scrape_stop(tel_scrape *sc)
{
    if (!sc)
        return;
    ll_ticker_stop(sc->ticker);
    for (size_t i = 0; i < sc->n_ep; i++)
        if (sc->ep[i].n_failed && sc->ep[i].n_ok)
            fprintf(stderr, "loadlaw sweep: metrics: %s: %zu of %zu scrapes failed\n", sc->ep[i].shown,
                    sc->ep[i].n_failed, sc->ep[i].n_failed + sc->ep[i].n_ok);
    scrape_free(sc);
}
