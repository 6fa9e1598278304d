/* prom.h: a parser of the Prometheus text exposition format (version 0.0.4,
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
 * Prefix ll_prom_. No allocation per sample: the parser reuses one scratch
 * buffer, so the pointers handed to the callback are valid during the call
 * only. Thread safety: none needed (no globals); one ll_prom_parse per call.
 */
#ifndef LOADLAW_PROM_H
#define LOADLAW_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef enum ll_prom_type {
    LL_PROM_UNTYPED = 0, /* no TYPE line, or "untyped" / "unknown" */
    LL_PROM_COUNTER,
    LL_PROM_GAUGE,
    LL_PROM_HISTOGRAM,
    LL_PROM_SUMMARY,
} ll_prom_type;
/* "untyped", "counter", "gauge", "histogram", "summary". */
const char *ll_prom_type_name(ll_prom_type t);

/* Labels per sample: a line with more is malformed (exporters use a handful). */
#define LL_PROM_MAX_LABELS 32

typedef struct ll_prom_label {
    const char *name, *value;  /* value unescaped (NUL-terminated; may hold '\n') */
} ll_prom_label;

typedef struct ll_prom_sample {
    const char *name;          /* as written, e.g. vllm:iteration_tokens_total_sum */
    const char *family;        /* the TYPE line's name, or name when untyped */
    ll_prom_type type;
    size_t n_labels;
    ll_prom_label labels[LL_PROM_MAX_LABELS]; /* in written order */
    double value;              /* NaN and +/-Inf kept */
    int has_ts;
    int64_t ts_ms;             /* the exporter's timestamp, when has_ts */
} ll_prom_sample;

typedef struct ll_prom_stats {
    size_t n_lines;            /* lines seen (blank ones included) */
    size_t n_samples;          /* samples handed to the callback */
    size_t n_bad;              /* malformed lines, skipped */
} ll_prom_stats;

/* Called per sample; return 0 to go on or a negative code to stop (returned
 * by ll_prom_parse). */
typedef int (*ll_prom_cb)(const ll_prom_sample *s, void *ctx);

/* Parse len bytes of text (need not be NUL-terminated; NUL bytes make their
 * line malformed). 0, the callback's code, or LL_ENOMEM. */
int ll_prom_parse(const char *text, size_t len, ll_prom_cb cb, void *ctx, ll_prom_stats *st);

/* The label set as one compact string in exposition form, sorted by nothing
 * (written order): k="v",k2="v2" with values escaped; "" when none. Appended
 * to b (NUL-terminated). 0 or LL_ENOMEM. */
int ll_prom_format_labels(ll_buf *b, const ll_prom_sample *s);

/* One sample as a canonical exposition line (with '\n'), values as %.17g,
 * NaN, +Inf, -Inf: parsing it gives back the same sample. 0 or LL_ENOMEM. */
int ll_prom_format_sample(ll_buf *b, const ll_prom_sample *s);

#endif
