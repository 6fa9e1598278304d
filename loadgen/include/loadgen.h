/* loadgen.h: drive an OpenAI-compatible endpoint through a scenario's levels
 * and record every token's arrival.
 *
 * DESIGN: lg_run_sweep runs on the caller's thread (the "driver"). For each
 * level it starts `threads` worker threads; each owns one libcurl multi handle,
 * its transfers, buffers and counters. Workers share only atomics (next request
 * index, stop flag, progress counters) and the records writer, which takes one
 * lock per finished request (never per token). Each level's results are merged
 * on the driver after pthread_join. Timestamps are ll_now_ns() taken in the
 * curl write callback on the worker thread, stored relative to the run epoch.
 *
 * The caller (cli/cmd_sweep.c) owns the target: loadgen knows only a base URL
 * ("http://127.0.0.1:40123"; "/v1/chat/completions" or "/v1/completions" is
 * appended). curl_global_init must have been called before lg_run_create.
 *
 * Errors: 0 or a negative LL_E* code (common.h) with a message in err.
 */
#ifndef LOADLAW_LOADGEN_H
#define LOADLAW_LOADGEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "scenario.h"

/* Error classes of a failed request (records.md "error_class"). */
typedef enum lg_err_class {
    LG_OK = 0,
    LG_ERR_HTTP_4XX,
    LG_ERR_HTTP_5XX,
    LG_ERR_STREAM,     /* an error event inside a 200 stream */
    LG_ERR_TRUNCATED,  /* stream ended before [DONE] */
    LG_ERR_TIMEOUT,
    LG_ERR_CONNECT,    /* refused / unreachable */
    LG_ERR_RESET,      /* connection reset or closed with nothing received */
    LG_ERR_OTHER,      /* anything else, including aborts at the interrupt deadline */
    LG_ERR__COUNT
} lg_err_class;
/* "http_4xx", ... as in records.md; "ok" for LG_OK. */
const char *lg_err_class_name(lg_err_class c);

typedef struct lg_run lg_run;

/* Called on the driver thread after each level has drained (level_end written),
 * e.g. to copy the bundled engine's step log into the records. */
typedef void (*lg_level_cb)(lg_run *r, int level, void *ctx);

typedef struct lg_config {
    const scn_scenario *scn;     /* levels and request shape (read-only, outlives the run) */
    const scn_prompts *prompts;  /* read-only, outlives the run */
    const char *url;             /* base URL, required */
    const char *model;           /* sent as "model"; required */
    const char *api_key;         /* Bearer token or NULL; never logged or recorded */
    const char *run_dir;         /* created if missing; records.jsonl goes there */
    const char *engine_spec;     /* run record "engine" (NULL for a remote server) */
    const cJSON *engine_law;     /* run record "engine_law" (copied; may be NULL) */
    const char *scenario_name;   /* run record "scenario" */
    int threads;                 /* 0 = scn->threads, then number of cores */
    int progress;                /* 1: a progress line on stderr (caller checks isatty) */
    lg_level_cb on_level_end;
    void *cb_ctx;
} lg_config;

/* Open RUN_DIR/records.jsonl and write the run line. */
int lg_run_create(const lg_config *cfg, lg_run **out, char *err, size_t errlen);

/* Run every level. Returns 0 when all levels ran (failed requests are data,
 * not errors), LL_EINTR when lg_run_interrupt stopped it (records and the
 * finished levels' statistics are valid), or another error code. */
int lg_run_sweep(lg_run *r, char *err, size_t errlen);

/* Stop issuing requests; in-flight ones may finish until `drain_s` from now,
 * then they are aborted (recorded as error_class "other"). Safe to call from
 * any thread (a signal-handling thread), not from a signal handler. */
void lg_run_interrupt(lg_run *r, double drain_s);
int lg_run_interrupted(const lg_run *r);

/* CLOCK_MONOTONIC ns (ll_now_ns) of the run epoch: record time 0. */
int64_t lg_run_epoch_ns(const lg_run *r);
/* Append one record line (e.g. a step); flushed. Thread-safe. */
int lg_run_write_record(lg_run *r, const cJSON *obj);

/* ---- results -------------------------------------------------------------- */

/* Milliseconds; NAN fields when there were no samples. */
typedef struct lg_stat {
    size_t n;
    double p50, p90, p99, mean;
} lg_stat;

typedef struct lg_level_summary {
    int level;
    int concurrency;
    double rate_per_s;           /* 0 for closed loop */
    int n_requests, warmup;      /* planned */
    int sent, ok, failed;        /* measured requests only (warmup excluded) */
    int failed_by_class[LG_ERR__COUNT];
    int interrupted;
    double duration_s;           /* level start to drained */
    double ramp_s;               /* until D first reached C (closed loop); NAN if never */
    lg_stat ttft_ms, ttfa_ms, tpot_ms, itl_ms, e2e_ms;
    lg_stat lag_ms;              /* open loop: send - intended */
    lg_stat ttft_intended_ms, e2e_intended_ms; /* open loop: from the intended send */
    int64_t think_tok, answer_tok;             /* counted from the streams of ok requests */
    int64_t usage_completion_tok;              /* sum of the servers' usage, ok requests */
    double think_tok_per_s, answer_tok_per_s, output_tok_per_s, req_per_s;
} lg_level_summary;

/* Levels finished so far (valid until lg_run_free). */
const lg_level_summary *lg_run_levels(const lg_run *r, size_t *n);
/* RUN_DIR/summary.json. */
int lg_run_write_summary(lg_run *r, char *err, size_t errlen);
/* The per-level table, human-readable. */
void lg_run_print_table(const lg_run *r, FILE *f);
/* Path of RUN_DIR (as given). */
const char *lg_run_dir(const lg_run *r);

/* Close the records file and free everything. */
int lg_run_free(lg_run *r);

#endif
