/* scrape.c: the sweep's scraper of Prometheus /metrics endpoints
 * (telemetry.h): what a server says about its own batch, queue and steps,
 * sampled beside the client's stamps.
 *
 * DESIGN: one thread (an ll_ticker, common.h: tel_scrape_stop ends its wait at
 * once), one HTTP handle per endpoint (common's http1.h, kept so the
 * connection is reused), a blocking request per scrape. Each sample of a known family
 * becomes one `metric` record (records.h) stamped with the middle of its
 * scrape on the run clock; the fit (fit/server.c) differences counters over
 * each level's steady window. Only the samples common/dialect.h's table
 * names are kept (each server's running, waiting, step, token and cache
 * figures, the GPU exporters'): an exporter
 * serves hundreds of series, and a record per series per half second would
 * outweigh the run's own records.
 *
 * Why 2 Hz by default: a level's steady window lasts seconds to minutes,
 * and a gauge sampled every 15-30 s (Prometheus' usual interval) would give
 * a level one sample or none. */

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dialect.h"
#include "http1.h"
#include "telemetry.h"

/* A body larger than this is not a /metrics page we want (a DCGM exporter
 * with every field on 8 GPUs is ~200 KiB). */
#define SCRAPE_MAX_BYTES (16u << 20)

typedef struct endpoint {
    char *url;
    char *shown;              /* url with its secrets hidden: records and messages */
    ll_http1 *http;
    ll_buf body;
    size_t n_ok, n_failed;
    int said;                 /* the first failure was reported */
    int said_dialect;         /* the first page's server was said */
    int moved;                /* moved to /prometheus/metrics once */
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
    struct page_tally *tally; /* the page being tallied, or NULL */
};

int tel_scrape_known(const char *name, const char *labels)
{
    return ll_srv_metric_find(name, labels) != NULL;
}

int tel_scrape_default_url(const char *url, char *out, size_t n)
{
    return ll_url_join(url, "/v1", "/metrics", out, n);
}

/* What one page held, for the line that says which server answered. */
typedef struct page_tally {
    size_t n_samples, n_kept;
    size_t per_srv[LL_SRV__COUNT];   /* kept samples by server */
    size_t by_prefix[LL_SRV__COUNT]; /* any sample whose prefix names a server */
    char families[160];              /* the first few family names seen */
    char last_family[128];
} page_tally;

static void tally(page_tally *t, const tel_prom_sample *s, const ll_srv_metric *m)
{
    t->n_samples++;
    ll_srv p = ll_srv_of_prefix(s->name);
    if (p < LL_SRV__COUNT)
        t->by_prefix[p]++;
    if (m) {
        t->n_kept++;
        t->per_srv[m->server]++;
    }
    if (strcmp(t->last_family, s->family) == 0)
        return;
    snprintf(t->last_family, sizeof t->last_family, "%s", s->family);
    size_t len = strlen(t->families);
    if (len + strlen(s->family) + 3 < sizeof t->families)
        snprintf(t->families + len, sizeof t->families - len, "%s%s", len ? ", " : "", s->family);
}

static int on_sample(const tel_prom_sample *s, void *ctx)
{
    tel_scrape *sc = ctx;
    ll_buf_reset(&sc->labels);
    if (tel_prom_format_labels(&sc->labels, s))
        return LL_ENOMEM;
    const ll_srv_metric *known = ll_srv_metric_find(s->name, sc->labels.p);
    if (sc->tally)
        tally(sc->tally, s, known);
    if (!known || !isfinite(s->value))
        return 0;
    ll_rec_metric m = {.t_ns = sc->t_ns, .src = sc->src, .name = s->name, .labels = sc->labels.p,
                       .value = s->value};
    int rc = ll_rec_put_metric(sc->w, &m);
    if (rc)
        sc->put_failed = 1;
    return rc;
}

/* Said once per endpoint, after its first page: which server it is, or that
 * nothing on it is a figure loadlaw reads (with what was there instead). */
static void say_dialect(const endpoint *e, const page_tally *t)
{
    size_t best = LL_SRV__COUNT, prefix = LL_SRV__COUNT;
    for (size_t i = 0; i < LL_SRV__COUNT; i++) {
        if (t->per_srv[i] && (best == LL_SRV__COUNT || t->per_srv[i] > t->per_srv[best]))
            best = i;
        if (t->by_prefix[i] && (prefix == LL_SRV__COUNT || t->by_prefix[i] > t->by_prefix[prefix]))
            prefix = i;
    }
    if (best < LL_SRV__COUNT) {
        fprintf(stderr, "loadlaw sweep: metrics: %s: %s (%zu of %zu series kept)\n", e->shown,
                ll_srv_name((ll_srv)best), t->n_kept, t->n_samples);
        return;
    }
    if (!t->n_samples) {
        fprintf(stderr, "loadlaw sweep: metrics: %s: answered with no samples (metrics off on the server?)\n",
                e->shown);
        return;
    }
    fprintf(stderr,
            "loadlaw sweep: metrics: %s: %s%s%zu series, none a figure loadlaw reads (first families: %s); "
            "docs/remote.md lists the servers it understands\n",
            e->shown, prefix < LL_SRV__COUNT ? ll_srv_name((ll_srv)prefix) : "",
            prefix < LL_SRV__COUNT ? " by its names, " : "", t->n_samples, t->families);
}

static void say_failure(endpoint *e, const char *why)
{
    e->n_failed++;
    if (e->said)
        return;
    e->said = 1;
    fprintf(stderr, "loadlaw sweep: metrics: %s: %s (counted; the sweep goes on without them)\n", e->shown, why);
}

/* A body that opens with '[' or '{': JSON, not the text format. */
static int json_page(const ll_buf *b)
{
    for (size_t i = 0; i < b->len; i++)
        if (b->p[i] != ' ' && b->p[i] != '\n' && b->p[i] != '\r' && b->p[i] != '\t')
            return b->p[i] == '[' || b->p[i] == '{';
    return 0;
}

/* TensorRT-LLM's trtllm-serve answers /metrics with JSON iteration stats and
 * serves the text format at /prometheus/metrics: a URL whose path ends in
 * /metrics moves there once, and says so. 1 when it moved. */
static int try_prometheus_path(endpoint *e)
{
    size_t q = strcspn(e->url, "?#"), k = strlen("/metrics");
    if (e->moved || q < k || strncmp(e->url + q - k, "/metrics", k) != 0)
        return 0;
    ll_buf nu = {0};
    if (ll_buf_append(&nu, e->url, q - k) || ll_buf_append(&nu, "/prometheus/metrics", 19) ||
        ll_buf_append(&nu, e->url + q, strlen(e->url + q))) {
        ll_buf_free(&nu);
        return 0;
    }
    char *shown = ll_redact_url(nu.p);
    if (!shown || ll_http1_set_url(e->http, nu.p)) {
        free(shown);
        ll_buf_free(&nu);
        return 0;
    }
    fprintf(stderr, "loadlaw sweep: metrics: %s answered JSON; scraping %s (TensorRT-LLM's text format)\n", e->shown,
            shown);
    free(e->url);
    free(e->shown);
    e->url = nu.p; /* the buffer's bytes, NUL-terminated, now e's */
    e->shown = shown;
    e->moved = 1;
    return 1;
}

static void scrape_one(tel_scrape *sc, endpoint *e)
{
    char why[320];
    long status = 0;
    int64_t t0 = ll_now_ns();
    /* a body over SCRAPE_MAX_BYTES fails the request: counted as a failed scrape */
    int rc = ll_http1_do(e->http, NULL, &e->body, &status, why, sizeof why);
    int64_t t1 = ll_now_ns();
    if (rc) {
        say_failure(e, why);
        return;
    }
    if (status != 200) {
        snprintf(why, sizeof why, "HTTP %ld", status);
        say_failure(e, why);
        return;
    }
    e->n_ok++;
    /* The server took its snapshot somewhere between send and receive. */
    sc->t_ns = t0 + (t1 - t0) / 2 - sc->epoch_ns;
    sc->src = e->shown;
    if (!e->said_dialect && json_page(&e->body) && try_prometheus_path(e))
        return; /* TensorRT-LLM: JSON here, the text at /prometheus/metrics: next round */
    page_tally t = {0};
    sc->tally = e->said_dialect ? NULL : &t;
    tel_prom_parse(e->body.p ? e->body.p : "", e->body.len, on_sample, sc, NULL);
    if (sc->tally) {
        say_dialect(e, &t);
        e->said_dialect = 1;
        sc->tally = NULL;
    }
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

static int endpoint_init(endpoint *e, const tel_scrape_target *t, const tel_scrape_auth *auth, double interval_s)
{
    char why[320];
    if (!(e->url = strdup(t->url)) || !(e->shown = ll_redact_url(t->url)))
        return LL_ENOMEM;
    /* never to another server: a --metrics-url elsewhere gets no key */
    int creds = auth && ll_same_origin(t->url, auth->url);
    long timeout_ms = (long)(fmax(1.0, interval_s) * 1000);
    ll_http1_opts o = {.url = e->url, .api_key = creds ? auth->key : NULL, .headers = creds ? auth->headers : NULL,
                       .n_headers = creds ? auth->n_headers : 0, .max_bytes = SCRAPE_MAX_BYTES,
                       .timeout_ms = timeout_ms, .connect_timeout_ms = timeout_ms};
    return ll_http1_open(&o, &e->http, why, sizeof why);
}

static void scrape_free(tel_scrape *sc)
{
    for (size_t i = 0; i < sc->n_ep; i++) {
        endpoint *e = &sc->ep[i];
        ll_http1_close(e->http);
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
