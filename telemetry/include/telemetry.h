/* telemetry.h: samplers that run beside a sweep on threads of their own,
 * never on a loadgen worker (the threads that stamp tokens), and write
 * `metric` records (docs/records.md) through the records writer:
 *
 *   - the Prometheus text parser (tel_prom_*), which the scraper uses and
 *     which tests and fuzzers drive directly;
 *   - the scraper of Prometheus /metrics endpoints (tel_scrape_*);
 *   - the NVML sampler of the local GPUs (tel_gpu_*).
 *
 * Prefix tel_. Errors: 0 or a negative LL_E* code (common.h), with a message
 * in a caller-owned buffer where one is taken. */
#ifndef LOADLAW_TELEMETRY_H
#define LOADLAW_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "records.h"

/* ---- the Prometheus text format ------------------------------------------- */

/* A parser of the Prometheus text exposition format (version 0.0.4,
 * what vLLM, SGLang, DCGM exporter and loadlaw's own engine serve at
 * /metrics), and its canonical re-serialisation.
 *
 * What it accepts: "# HELP name text" and "# TYPE name type" lines (other
 * comments are skipped), samples "name{label="value",...} value [timestamp_ms]"
 * with names that may hold colons (vllm:num_requests_running), label values
 * with the format's three escapes (\\ \" \n), a trailing comma in the label
 * set, values NaN, +Inf, -Inf or any decimal float, an optional integer
 * timestamp, blank lines and CRLF line ends. Anything else on a line (an
 * unknown escape, a duplicate label, an unquoted value, trailing garbage, an
 * unknown TYPE) makes the line malformed: it is counted and skipped, never
 * fatal, so one odd exporter line costs one sample, not the scrape.
 *
 * Histograms and summaries: a sample's family is the name of the TYPE line it
 * belongs to (the last TYPE line whose name is the sample's name, or its name
 * minus _bucket/_sum/_count for a histogram, _sum/_count for a summary,
 * _total for a counter, as prometheus_client writes them).
 *
 * No allocation per sample: the parser reuses one scratch
 * buffer, so the pointers handed to the callback are valid during the call
 * only. Thread safety: none needed (no globals); one tel_prom_parse per call.
 */

typedef enum tel_prom_type {
    TEL_PROM_UNTYPED = 0, /* no TYPE line, or "untyped" / "unknown" */
    TEL_PROM_COUNTER,
    TEL_PROM_GAUGE,
    TEL_PROM_HISTOGRAM,
    TEL_PROM_SUMMARY,
} tel_prom_type;
/* "untyped", "counter", "gauge", "histogram", "summary". */
const char *tel_prom_type_name(tel_prom_type t);

/* Labels per sample: a line with more is malformed (exporters use a handful). */
#define TEL_PROM_MAX_LABELS 32

typedef struct tel_prom_label {
    const char *name, *value;  /* value unescaped (NUL-terminated; may hold '\n') */
} tel_prom_label;

typedef struct tel_prom_sample {
    const char *name;          /* as written, e.g. vllm:iteration_tokens_total_sum */
    const char *family;        /* the TYPE line's name, or name when untyped */
    tel_prom_type type;
    size_t n_labels;
    tel_prom_label labels[TEL_PROM_MAX_LABELS]; /* in written order */
    double value;              /* NaN and +/-Inf kept */
    int has_ts;
    int64_t ts_ms;             /* the exporter's timestamp, when has_ts */
} tel_prom_sample;

typedef struct tel_prom_stats {
    size_t n_lines;            /* lines seen (blank ones included) */
    size_t n_samples;          /* samples handed to the callback */
    size_t n_bad;              /* malformed lines, skipped */
} tel_prom_stats;

/* Called per sample; return 0 to go on or a negative code to stop (returned
 * by tel_prom_parse). */
typedef int (*tel_prom_cb)(const tel_prom_sample *s, void *ctx);

/* Parse len bytes of text (need not be NUL-terminated; NUL bytes make their
 * line malformed). 0, the callback's code, or LL_ENOMEM. */
int tel_prom_parse(const char *text, size_t len, tel_prom_cb cb, void *ctx, tel_prom_stats *st);

/* The label set as one compact string in exposition form, sorted by nothing
 * (written order): k="v",k2="v2" with values escaped; "" when none. Appended
 * to b (NUL-terminated). 0 or LL_ENOMEM. */
int tel_prom_format_labels(ll_buf *b, const tel_prom_sample *s);

/* One sample as a canonical exposition line (with '\n'), values as %.17g,
 * NaN, +Inf, -Inf: parsing it gives back the same sample. 0 or LL_ENOMEM. */
int tel_prom_format_sample(ll_buf *b, const tel_prom_sample *s);

/* ---- the /metrics scraper -------------------------------------------------- */

/* `sweep`'s scraper of Prometheus endpoints (the target's /metrics, plus
 * --metrics-url ones) into `metric` records (docs/records.md).
 *
 * Threads: one scraper thread of its own, started after the run line is
 * written and stopped before the records writer closes; it never runs on a
 * loadgen worker (the threads that stamp tokens). tel_scrape_start and
 * tel_scrape_stop are called from the sweep's thread. Errors: 0 or a negative LL_E* code
 * with a message in err. */

typedef struct tel_scrape tel_scrape;

/* An endpoint to scrape. */
typedef struct tel_scrape_target {
    const char *url;
} tel_scrape_target;

/* The requests' credentials. They go to every target of the same origin as
 * url (ll_same_origin: scheme, host and port; the target's own /metrics,
 * and a --metrics-url on that server) and to no other: key as
 * "Authorization: Bearer KEY", then those of headers ("Name: value", the
 * scenario's and --header's) whose name is secret (ll_secret_name:
 * Authorization, X-Api-Key, Cookie, ...), as the requests send them. A
 * server that guards /metrics with the key its API takes is scraped with it;
 * a DCGM exporter elsewhere never sees it. Redirects are not followed. NULL
 * members: none. Borrowed for the duration of tel_scrape_start (copied). */
typedef struct tel_scrape_auth {
    const char *url, *key;
    char *const *headers;
    size_t n_headers;
} tel_scrape_auth;

/* Start the thread: every interval_s, each target in turn is fetched (one
 * libcurl easy handle each, timeout max(1 s, interval); auth as above, NULL:
 * none), parsed (tel_prom_parse), and its samples of known families
 * (tel_scrape_known) written to w on the run clock. After each endpoint's
 * first page one stderr line says which server it recognised, or that the
 * page held nothing it reads, with the first families it saw. A page of JSON
 * at a URL ending in /metrics (TensorRT-LLM's iteration stats) moves that
 * endpoint to /prometheus/metrics once. A failed scrape (refused, 401, 404,
 * timeout) is counted and said once per endpoint on stderr; it never fails
 * the sweep. *out: freed by tel_scrape_stop. */
int tel_scrape_start(const tel_scrape_target *targets, size_t n, const tel_scrape_auth *auth, double interval_s,
                     ll_rec_writer *w, tel_scrape **out, char *err, size_t errlen);
/* Stop and join the thread, free. NULL: no-op. */
void tel_scrape_stop(tel_scrape *s);

/* The target's /metrics: "/metrics" after url's path, less the '/'s ending
 * it and a last "/v1" (an API root), and before its query (ll_url_join:
 * "http://h/d/v1?v=1" -> "http://h/d/metrics?v=1"). 0, or LL_ERANGE when it
 * does not fit. */
int tel_scrape_default_url(const char *url, char *out, size_t n);

/* 1 when a sample (its name, its labels as tel_prom_format_labels writes
 * them, NULL: none) is one the dialect table keeps (common/dialect.h: the
 * bundled engine, vLLM, SGLang, llama.cpp, TGI, TensorRT-LLM, DCGM exporter;
 * docs/remote.md "Server metrics"). */
int tel_scrape_known(const char *name, const char *labels);

/* ---- the NVML sampler ------------------------------------------------------ */

/* `sweep`'s sampler of the local GPUs through NVML, into `metric` records
 * named nvml_* (docs/records.md), which the fit reads as it reads a DCGM
 * exporter's (fit/gpu.c "GPU figures and diagnosis").
 *
 * NVML is loaded with dlopen (libnvidia-ml.so.1, or $LOADLAW_NVML_LIB), never
 * linked, so the binary runs where no driver is installed. Threads: one
 * sampler thread of its own, never a loadgen worker; start/stop from the
 * sweep's thread. Errors: 0 or a negative LL_E* code with a message. */

typedef struct tel_gpu tel_gpu;

/* Load NVML and start sampling every GPU every interval_s. Without NVML or
 * without a GPU this is not an error: it returns 0 with *out = NULL and a
 * one-line reason in why (the caller says it once). A failure after NVML
 * loaded (no thread, no memory) returns the code, with the message in why. */
int tel_gpu_start(double interval_s, ll_rec_writer *w, tel_gpu **out, char *why, size_t whylen);
/* Stop and join the thread, shut NVML down, free. NULL: no-op. */
void tel_gpu_stop(tel_gpu *g);

#endif
