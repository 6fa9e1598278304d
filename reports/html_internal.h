/* html_internal.h (internal to reports/): pieces shared by the run report and
 * the comparison page — escaping, the page frame with Chart.js and the page
 * script inlined, the JSON data block, and the per-run chart data. */
#ifndef LOADLAW_HTML_INTERNAL_H
#define LOADLAW_HTML_INTERNAL_H

#include <cjson/cJSON.h>

#include "common.h"
#include "report.h"

/* Scatter points kept per series: enough to see the cloud, small enough that
 * a page of a million-sample run stays a few MB. */
#define RPT_MAX_POINTS 3000
/* Points per CDF curve and per P/D timeline. */
#define RPT_CDF_POINTS 200
/* points of the step chart's confidence band */
#define RPT_BAND_POINTS 60
#define RPT_PHASE_POINTS 2000

extern const char rpt_report_js[];
extern const size_t rpt_report_js_len;

/* Append s with & < > " ' escaped. */
int html_esc(ll_buf *b, const char *s);
/* printf, then escape the result (for numbers mixed with text). */
int html_escf(ll_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "1.23" or "–" for NAN, with d decimals. */
const char *html_num(char *buf, size_t n, double x, int d);

/* <!doctype>…<body> with the title and the stylesheet; html_page_end appends
 * the data block (JSON, "</" escaped so it cannot close the script), Chart.js
 * read from rpt_chartjs_path(), the page script, and </html>. */
int html_page_begin(ll_buf *b, const char *title);
int html_page_end(ll_buf *b, const cJSON *data, char *err, size_t errlen);
/* Write b to path through a temporary file and rename (a reader never sees
 * half a page). */
int html_write_file(const ll_buf *b, const char *path, char *err, size_t errlen);

/* Chart data of one run: {"law":{ok,a,b,a_ci,b_ci}, "levels":[{c, duration_s,
 * steady_tok_per_s, whole_tok_per_s, phase, windows, ramp, rate, cdf,
 * position}], "samples":{"steady":[[n,ms]],"other":[[n,ms]]},
 * "engine_steps":[[n,ms]], "model_view" (rpt_model_view_json)}.
 * full = 0 keeps only what the comparison page draws. NULL on no memory. */
cJSON *rpt_run_chart_data(const fit_run *run, const fit_result *res, int full, char *err,
                          size_t errlen);

/* What the model sees (report_model.c): {"model", "has_k", "formula",
 * "k_edges": K/N at the 0, 20, .., 100th percentile of the steady samples,
 * "lines": [{q, k_per_req, pts: [[n, ms]]}] (the chosen model at the 10th,
 * 50th and 90th percentile of K/N when it has a context term, else one line),
 * "points": [[n, ms, K/N, K, ms - model]] (steady samples, thinned to
 * RPT_MAX_POINTS)}, lines over N in [0, n_max]. NULL on no memory. */
#define RPT_MODEL_LINE_POINTS 200
cJSON *rpt_model_view_json(const fit_result *res, double n_max);
/* A level's step against position in the request (fit_level_position):
 * {"width_tok", "steady": [[position, ms]], "all": [[position, ms]],
 * "early_ms", "late_ms", "early_all_ms", "late_all_ms"}; NULL on no memory. */
cJSON *rpt_position_json(const fit_result *res, size_t level_idx);
/* The sentence that says whether early or late tokens of level L are slower
 * and why (fit/position.c "Step time against position"), from its figures. */
int rpt_position_words(ll_buf *b, const fit_level *L);
/* The section's opening: the level where early and late differ most. */
int rpt_position_summary(ll_buf *b, const fit_result *r);
/* The server's per-level figures (fit/server.c "Server figures", fit/said.c "The server's own
 * per-request figures") beside the client's, when the run has any. */
int rpt_server_table(ll_buf *b, const fit_result *r);

/* The Pareto chart (report_pareto.c): the curve runs over C = 1 .. this times
 * the largest measured C, at most RPT_PARETO_CURVE_POINTS + 2 C; a level
 * "meets" the objectives when at least RPT_PARETO_ATTAINMENT of its measured
 * requests do (DistServe's 90% attainment; plan's goodput counts them). */
#define RPT_PARETO_BEYOND 1.25
#define RPT_PARETO_CURVE_POINTS 80
#define RPT_PARETO_ATTAINMENT 0.9

/* {"max_measured_c", "no_curve": null | why there is no law curve,
 * "curve":[{c, tok_per_s, user_tok_per_s, tok_per_s_ci:[lo,hi],
 * user_tok_per_s_ci:[lo,hi], extrapolated}] (fit_plan_at at each C),
 * "points":[{level, c, mode "closed"|"open", rate_per_s, tok_per_s,
 * user_tok_per_s, basis, meets (null without objectives), best (plan's best
 * goodput level, when its goodput is above 0), and with
 * objectives n_measured, n_good, good_frac, goodput_req_per_s}],
 * "objectives": null | {ttft_ms, tpot_ms, e2e_ms, user_tok_per_s_min
 * (1000/tpot_ms), attainment, max_c: null | {n, n_ci, extrapolated}}}.
 * slo may be NULL (no objectives). NAN becomes null. NULL on no memory. */
cJSON *rpt_pareto_json(const fit_run *run, const fit_result *res, const fit_slo *slo, char *err,
                       size_t errlen);

/* Measured (non-warmup) requests of a level that failed (the sum of
 * failed_by_class), and that finished ok (n_sent minus those). */
size_t rpt_level_failed(const fit_level *L);
size_t rpt_level_ok(const fit_level *L);
/* Beside a profiled level: "  (profiled: not fitted)" when the law left it
 * out, "  (profiled)" when it made the law; "" for the others. */
const char *rpt_profiled_tag(const fit_level *L);
/* Beside a level that sweep --find placed: "  (find: probe)", and an open
 * level's rate, "  (find: probe at 3.52/s)", in buf; "" for the others
 * (their lines stay as they were). */
const char *rpt_find_tag(const fit_level *L, char *buf, size_t n);
/* The per-turn table of multi-turn sessions (fit_print.c), under `loadlaw
 * fit`'s and the sweep's tables; nothing without sessions. */
void rpt_print_turns(FILE *f, const fit_result *r);
/* headline.c: the headline's words (fit/headline.c), one line each without
 * the newline: the chosen model and its ceiling, or that no model fits; how
 * it predicts the levels it did not see; the line when it is not the
 * headline ("" when it is; two lines when no model fits). And a number with
 * d decimals (-1: %.6g). */
void rpt_headline_text(const fit_result *r, char *b, size_t n);
void rpt_heldout_text(const fit_result *r, char *b, size_t n);
void rpt_other_line_text(const fit_result *r, char *b, size_t n);
const char *rpt_fmt_dec(char buf[48], double v, int d);

/* Chart data: attach v to o under k / append it to arr; -1 (v freed) when v
 * is NULL or cannot be attached, 0 otherwise. */
int rpt_json_add(cJSON *o, const char *k, cJSON *v);
int rpt_json_push(cJSON *arr, cJSON *v);

#endif
