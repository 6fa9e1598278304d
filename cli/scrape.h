/* scrape.h (internal to cli/): `sweep`'s scraper of Prometheus endpoints
 * (the target's /metrics, plus --metrics-url ones) into `metric` records
 * (docs/records.md).
 *
 * Threads: one scraper thread of its own, started after the run line is
 * written and stopped before the records writer closes; it never runs on a
 * loadgen worker (the threads that stamp tokens). scrape_start/scrape_stop
 * are called from the sweep's thread. Errors: 0 or a negative LL_E* code
 * with a message in err. */
#ifndef LOADLAW_CLI_SCRAPE_H
#define LOADLAW_CLI_SCRAPE_H

#include <stddef.h>

#include "common.h"
#include "records.h"

typedef struct sweep_scrape sweep_scrape;

/* An endpoint to scrape. */
typedef struct scrape_target {
    const char *url;
} scrape_target;

/* The requests' credentials. They go to every target of the same origin as
 * url (ll_same_origin: scheme, host and port; the target's own /metrics,
 * and a --metrics-url on that server) and to no other: key as
 * "Authorization: Bearer KEY", then those of headers ("Name: value", the
 * scenario's and --header's) whose name is secret (ll_secret_name:
 * Authorization, X-Api-Key, Cookie, ...), as the requests send them. A
 * server that guards /metrics with the key its API takes is scraped with it;
 * a DCGM exporter elsewhere never sees it. Redirects are not followed. NULL
 * members: none. Borrowed for the duration of scrape_start (copied). */
typedef struct scrape_auth {
    const char *url, *key;
    char *const *headers;
    size_t n_headers;
} scrape_auth;

/* Start the thread: every interval_s, each target in turn is fetched (one
 * libcurl easy handle each, timeout max(1 s, interval); auth as above, NULL:
 * none), parsed (prom.h), and its samples of known families (scrape_known)
 * written to w on the run clock. A failed scrape (refused, 401, 404,
 * timeout) is counted and said once per endpoint on stderr; it never fails
 * the sweep. *out: freed by scrape_stop. */
int scrape_start(const scrape_target *targets, size_t n, const scrape_auth *auth, double interval_s,
                 ll_rec_writer *w, sweep_scrape **out, char *err, size_t errlen);
/* Stop and join the thread, free. NULL: no-op. */
void scrape_stop(sweep_scrape *s);

/* The target's /metrics: "/metrics" after url's path, less the '/'s ending
 * it and a last "/v1" (an API root), and before its query (ll_url_join:
 * "http://h/d/v1?v=1" -> "http://h/d/metrics?v=1"). 0, or LL_ERANGE when it
 * does not fit. */
int scrape_default_url(const char *url, char *out, size_t n);

/* 1 when a sample name is one of the known families' (loadlaw's engine,
 * vLLM, SGLang, DCGM exporter; README "Server metrics"). */
int scrape_known(const char *name);

#endif
