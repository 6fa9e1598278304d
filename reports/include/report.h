/* report.h: what loadlaw shows people — fit's figures as terminal tables and
 * JSON documents (`loadlaw fit`, `plan`, `compare`, `check-decode`, the
 * sweep's summary.json), the profiler-trace breakdown (`loadlaw trace`), the
 * self-contained HTML run report (`loadlaw report`, written at the end of
 * `loadlaw sweep`) and the A/B comparison page (`loadlaw compare --html`).
 * fit computes every figure; nothing here measures. A law or a distribution
 * is written in each document's spelling, the keys it has always had
 * (docs/records.md "JSON spellings").
 *
 * Prefix rpt_. Errors: 0 or a negative LL_E* code (common.h) with a message in
 * the caller's err buffer. Nothing here keeps global state; distinct objects
 * may be used from distinct threads.
 */
#ifndef LOADLAW_REPORT_H
#define LOADLAW_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "fit.h"
#include "fit_compare.h"
#include "fit_outputs.h"
#include "fit_plan.h"

/* ---- fit's result, plan, outputs, check-decode ------------------------------
 * (fit_print.c, fit_json.c, plan_print.c, outputs_print.c,
 * check_decode_print.c). JSON builders: the caller frees with cJSON_Delete;
 * NULL on no memory; NAN becomes null. */

/* `loadlaw fit`: the law's line, the fits, the model check, the per-level
 * table, server, turns and GPU tables, the notes. */
void rpt_fit_print(FILE *f, const fit_result *r);
/* The law's one line and the chosen model under it ("step(N) = 5.200 +
 * 2.9991*N ms (a 95% [...]) ... -> at most 333.4 tok/s, N1/2 = 1.73"), or
 * why there is none; what `sweep`, `report` and `plan` print first. */
void rpt_print_law_line(FILE *f, const fit_result *r);
/* `loadlaw fit --json`: the headline law, levels, other laws, model check,
 * what was left out, notes, turns. */
cJSON *rpt_fit_to_json(const fit_result *r);
/* `loadlaw plan --json`'s object and `loadlaw plan`'s tables. */
cJSON *rpt_plan_to_json(const fit_plan *p);
void rpt_plan_print(FILE *f, const fit_plan *p);
/* compare's outputs section: --json's "outputs" object, and as text. */
cJSON *rpt_outputs_to_json(const fit_outputs *o);
void rpt_outputs_print(FILE *f, const fit_outputs *o);
/* `loadlaw check-decode`: --json's object, and the table. */
cJSON *rpt_cd_to_json(const fit_check_decode *c);
void rpt_cd_print(FILE *f, const fit_check_decode *c);

/* ---- the sweep's own outputs (summary.c) ----------------------------------- */

/* RUN_DIR/summary.json from fit's result: {"tool","schema","units",
 * "interrupted" (any level was), "url","model","levels":[{level, concurrency,
 * mode, rate_per_s, n_requests, warmup (planned), interrupted, sent, ok, failed
 * (measured requests), failed_by_class{http_4xx..other}, duration_s, ramp_s,
 * ttft_ms/ttfa_ms/tpot_ms/itl_ms/e2e_ms {n,p50,p90,p99,mean,max}, open loop
 * only: client_lag_ms, ttft_from_intended_ms, e2e_from_intended_ms;
 * think_tok, answer_tok, usage_completion_tok, think_tok_per_s,
 * answer_tok_per_s, output_tok_per_s, req_per_s, steady_tok_per_s,
 * predicted_tok_per_s}], "law" (as `loadlaw fit --json`), "asymptote_tok_per_s",
 * "n_half"}. Every figure is fit_level's (fit/figures.c "Per-level figures"); NAN is
 * null. Written through a temporary file and a rename. LL_ENOMEM, LL_EIO. */
int rpt_write_summary(const char *run_dir, const fit_run *run, const fit_result *res, char *err,
                      size_t errlen);
/* The sweep's per-level tables: counts and rates (out_tok/s, req/s, tokens,
 * ramp_s), failed requests by class, then TTFT/TTFA/TPOT/ITL/E2E p50, p90,
 * p99, mean and n per level (2 decimals), all from fit_level. */
void rpt_print_levels(FILE *f, const fit_result *res);

/* ---- HTML run report (report_html.c, report_data.c, report_model.c,
 * report_words.c) ---------------------------------------------------------- */

/* Write the self-contained report of a run: one HTML file with Chart.js
 * inlined (read at report time from Debian's libjs-chart.js, see
 * rpt_chartjs_path) and the data embedded as JSON; it opens offline.
 * run_dir: a run directory (or its records.jsonl). out_path NULL ->
 * RUN_DIR/report.html. The path written goes to path_out (may be NULL).
 * Big runs stay small: scatter data is thinned to a few thousand points.
 * LL_EIO/LL_EPARSE/LL_EINVAL from loading the run, LL_EIO when Chart.js or the
 * output cannot be read or written (the message says which). */
int rpt_write_html(const char *run_dir, const char *out_path, char *path_out, size_t path_len,
                   char *err, size_t errlen);
/* The same from a run already loaded and analysed (what `loadlaw sweep` has). */
int rpt_write_html_from(const char *run_dir, const fit_run *run, const fit_result *res,
                        const char *out_path, char *path_out, size_t path_len, char *err,
                        size_t errlen);
/* The same with objectives (NULL: none): the Pareto chart then draws the
 * per-user rate 1000/tpot_ms that a per-token objective asks for, and marks
 * the measured levels that meet every objective given (goodput as `loadlaw
 * plan` counts it). rpt_write_html_from is this with slo = NULL. */
int rpt_write_html_with(const char *run_dir, const fit_run *run, const fit_result *res,
                        const fit_slo *slo, const char *out_path, char *path_out, size_t path_len,
                        char *err, size_t errlen);
/* Chart.js to inline: $LOADLAW_CHARTJS if set, else the path found at build
 * time (/usr/share/javascript/chart.js/chart.min.js on Debian). */
const char *rpt_chartjs_path(void);

/* ---- A/B comparison (compare_print.c, compare_html.c) --------------------- */

/* Tables: both laws, slope ratio, per-level speedups with intervals and
 * latency changes, then the verdict line. */
void rpt_compare_print(FILE *f, const fit_compare *c, const char *label_a, const char *label_b);
/* Each run's headline (its chosen model, how it predicts the levels it did
 * not see), A then B: what `compare` prints first. */
void rpt_compare_headlines(FILE *f, const fit_result *ra, const char *label_a, const fit_result *rb,
                           const char *label_b);
/* o[key] = the headline object of `fit --json` ("headline"). */
int rpt_json_add_headline(cJSON *o, const char *key, const fit_result *r);
/* {"levels":[{"concurrency","tok_per_s_a","tok_per_s_b","ratio","ratio_ci":[lo,hi],
 * "steady","ttft_a":{p50_ms,...},...}],"law_a","law_b","slope_ratio","slope_ratio_ci",
 * "slope_method","verdict",...}; NAN becomes null. Caller frees with
 * cJSON_Delete; NULL on no memory. */
cJSON *rpt_compare_to_json(const fit_compare *c);
/* The comparison page: both runs' throughput curves and step-time fits
 * overlaid, speedup per level with its interval, tables. */
int rpt_compare_write_html(const char *out_path, const char *label_a, const fit_run *a,
                           const fit_result *ra, const char *label_b, const fit_run *b,
                           const fit_result *rb, const fit_compare *c, char *err, size_t errlen);

/* ---- profiler traces (trace_parse.c, trace_busy.c) ------------------------ */

/* One Chrome/Kineto trace (.json or .json.gz), reduced while it streams past:
 * per distinct GPU event name the total time and count, per (device, stream)
 * the union of busy intervals; per distinct CPU operator its self time. Memory grows with the number of distinct names
 * and streams, not with the trace's size (see trace_busy.c for the one bound
 * on out-of-order events). */
typedef struct rpt_trace rpt_trace;

/* Parse path (gzip or plain; zlib tells them apart). *out: caller frees with
 * rpt_trace_free. LL_EIO when the file cannot be read, LL_EPARSE when it is
 * not JSON or has no trace events (message names the byte offset). */
int rpt_trace_load(const char *path, rpt_trace **out, char *err, size_t errlen);
void rpt_trace_free(rpt_trace *t);

typedef struct rpt_trace_info {
    uint64_t events;        /* objects in traceEvents */
    uint64_t gpu_events;    /* kernels, memcpys, memsets counted below */
    int64_t span_ns;        /* wall span: first start to last end of any "X" event */
    int64_t gpu_total_ns;   /* sum of GPU event durations (overlaps counted twice) */
    uint64_t late_events;   /* events too far out of order for an exact union (0 normally) */
    uint64_t bad_events;    /* GPU "X" events (by cat or args.stream) left out for lack of a
                             * numeric ts or a numeric dur >= 0, or for a time out of
                             * range (ts > 2^62 ns, a GPU dur > 2^40 ns) */
    /* CPU operators (trace_self.c): cat cpu_op and user_annotation events */
    uint64_t cpu_events;    /* counted for self time */
    int64_t cpu_self_ns;    /* their self time summed (each nanosecond once per thread) */
    uint64_t cpu_late;      /* too far out of start order or too deeply nested: all of
                             * their time counted as their own (0 normally) */
    uint64_t steps;         /* step markers (ProfilerStep#N, vLLM's execute_context_...): not operators */
    int64_t step_total_ns, step_min_ns, step_max_ns;
} rpt_trace_info;
void rpt_trace_get_info(const rpt_trace *t, rpt_trace_info *out);

typedef struct rpt_trace_kernel {
    const char *name;       /* full name as in the trace; owned by the trace */
    int64_t total_ns;
    uint64_t count;
} rpt_trace_kernel;
/* Kernels sorted by total time, largest first (ties by name). */
size_t rpt_trace_n_kernels(const rpt_trace *t);
const rpt_trace_kernel *rpt_trace_kernel_at(const rpt_trace *t, size_t i);

/* CPU operators sorted by self time (total_ns: the self time; an event's
 * duration less that of the events directly inside it on its thread). */
size_t rpt_trace_n_cpu_ops(const rpt_trace *t);
const rpt_trace_kernel *rpt_trace_cpu_op_at(const rpt_trace *t, size_t i);

typedef struct rpt_trace_stream {
    const char *pid;        /* device: the event's pid, as text */
    const char *tid;        /* stream: the event's tid as text; "*" = all streams of the device */
    int64_t busy_ns;        /* union of busy intervals */
    uint64_t events;
} rpt_trace_stream;
/* Streams sorted by (pid, tid), each device's "*" row first. */
size_t rpt_trace_n_streams(const rpt_trace *t);
const rpt_trace_stream *rpt_trace_stream_at(const rpt_trace *t, size_t i);
/* CPU threads (pid = process, tid = thread), busy_ns = their operators' self
 * time, most first. */
size_t rpt_trace_n_threads(const rpt_trace *t);
const rpt_trace_stream *rpt_trace_thread_at(const rpt_trace *t, size_t i);

/* Kernel categories: ordered (name, POSIX extended regex, case-insensitive);
 * a name takes the first category whose regex matches, else "other". */
typedef struct rpt_categories rpt_categories;
/* The built-in set: communication, attention, MoE, GEMM, elementwise & copies. */
int rpt_categories_new(rpt_categories **out, char *err, size_t errlen);
/* "NAME=REGEX": replaces NAME's regex when NAME exists, otherwise adds NAME
 * ahead of the built-ins (a user's category wins over ours). LL_EINVAL on a
 * missing '=' or a regex that does not compile. */
int rpt_categories_set(rpt_categories *c, const char *spec, char *err, size_t errlen);
const char *rpt_categories_classify(const rpt_categories *c, const char *kernel_name);
/* Kernel time of device `pid` (a "*" row's pid) whose names classify as
 * `category`; *total_ns (may be NULL) gets the device's kernel time. With one
 * process lane per tensor-parallel rank this is each rank's communication. */
int64_t rpt_trace_device_category_ns(const rpt_trace *t, const char *pid,
                                     const rpt_categories *cats, const char *category,
                                     int64_t *total_ns);
size_t rpt_categories_count(const rpt_categories *c);       /* including "other" */
const char *rpt_categories_name(const rpt_categories *c, size_t i);
void rpt_categories_free(rpt_categories *c);

/* A kernel name a person can read: drops "void ", parameter lists and template
 * arguments (keeping the first argument of a generic wrapper such as
 * cutlass::Kernel2<...>), then ellipsizes to at most max_chars. Writes into out
 * (always terminated) and returns out. */
char *rpt_kernel_short_name(const char *full, size_t max_chars, char *out, size_t outlen);

typedef struct rpt_trace_print_opts {
    int top;                     /* kernel rows; 0 = default 15 */
    int wide;                    /* full names, one row per distinct name */
    int json;                    /* machine-readable instead of tables */
    const rpt_categories *cats;  /* NULL = built-in set */
} rpt_trace_print_opts;
/* Print the breakdown of n traces (one column per trace when n > 1, e.g. one
 * per tensor-parallel rank); labels[i] names trace i (NULL = "#i"). */
int rpt_trace_print(FILE *f, rpt_trace *const *traces, const char *const *labels, size_t n,
                    const rpt_trace_print_opts *opts, char *err, size_t errlen);
/* Load the n files (rpt_trace_load) and print their breakdown, labelled by
 * path: 0, or the first error with its message (`loadlaw trace`). */
int rpt_trace_files(FILE *f, const char *const *paths, size_t n, const rpt_trace_print_opts *opts, char *err,
                    size_t errlen);

#endif
