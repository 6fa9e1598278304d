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

/* An endpoint to scrape; auth: a Bearer token sent to it (the target's own
 * /metrics only: a key is never sent to an extra endpoint), NULL = none. */
typedef struct scrape_target {
    const char *url, *auth;
} scrape_target;

/* Start the thread: every interval_s, each target in turn is fetched (one
 * libcurl easy handle each, timeout max(1 s, interval)), parsed (prom.h), and
 * its samples of known families (scrape_known) written to w on the run
 * clock. A failed scrape (refused, 404, timeout) is counted and said once per
 * endpoint on stderr; it never fails the sweep. *out: freed by scrape_stop. */
int scrape_start(const scrape_target *targets, size_t n, double interval_s, ll_rec_writer *w,
                 sweep_scrape **out, char *err, size_t errlen);
/* Stop and join the thread, free. NULL: no-op. */
void scrape_stop(sweep_scrape *s);

/* The target's /metrics: url without trailing '/' and a trailing "/v1"
 * (an API root), then "/metrics". 0, or LL_ERANGE when it does not fit. */
int scrape_default_url(const char *url, char *out, size_t n);

/* 1 when a sample name is one of the known families' (loadlaw's engine,
 * vLLM, SGLang, DCGM exporter; README "Server metrics"). */
int scrape_known(const char *name);

#endif
