/* fit.h: a run's records as fit holds them (fit/load.c), and from them the
 * step-time law step(N) = a + b*N and every per-level figure. fit_analyze
 * rebuilds each level's timeline (P(t) prefilling, D(t) decoding), makes
 * every gap between two arrivals of a stream a step sample, fits the law on
 * the steady engine steps, checks it against the model family (fit_model.h)
 * and compares each level with it: the one analysis that the sweep's table,
 * summary.json, `loadlaw fit`, the report and compare all print. A figure is
 * defined atop the file that computes it (fit/analyze_law.c the law,
 * fit/timeline.c samples, fit/figures.c latencies; for users
 * docs/measuring.md); reports/report.h prints them. Times: ns since the run
 * epoch; steps ms; rates tokens/s. A fit_run is opaque and read-only once
 * loaded, but not thread-safe (a big run caches one level inside it);
 * results are caller-owned; distinct objects may be used from distinct
 * threads. Errors: 0 or a negative LL_E* code (common.h) with a
 * message in err. */
#ifndef LOADLAW_FIT_H
#define LOADLAW_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "fit_model.h"
#include "records.h"

typedef struct fit_run fit_run;

/* Read RUN_DIR/records.jsonl (or path, a .jsonl file), keeping what a
 * truncated last line, failed requests or interrupted levels leave. LL_EIO:
 * unreadable; LL_EPARSE: a malformed line (not the last); LL_EINVAL: no run
 * line, a schema newer than LL_RECORDS_SCHEMA, no usable record. A big run
 * is read back from the file a level at a time (fit/load.c): the file must
 * stay as it is while the run is used (else the analysis, plan or compare
 * fails with LL_EIO and says so). */
int fit_load_run(const char *path, fit_run **out, char *err, size_t errlen);
void fit_run_free(fit_run *r);

/* The run line (strings "" when absent) and what reading it counted. */
typedef struct fit_run_info {
    int schema, ranks;
    int64_t epoch_wall_ns;
    const char *version, *host, *target_url, *model, *endpoint, *engine_spec, *backend, *scenario;
    int bundled;              /* the in-process engine (engine_spec, backend "" when remote) */
    int has_engine_law;       /* the synthetic engine's law, played (scaled) ms: */
    double law_a_ms, law_b_ms, law_c_ms_per_ktok, law_p_ms_per_tok;
    double time_scale;        /* played = as written * this; NAN without a law */
    ll_rec_engine_law engine_law; /* all of it as the run line gave it (knee, buckets) */
    ll_rec_asked asked;       /* what the run asked of the server */
    const char *run_json;     /* the run line, unformatted ("{}" if none) */
    size_t n_lines, n_truncated, n_unknown, n_rejected, n_out_of_range; /* records.h */
    size_t n_bad_requests;    /* request lines without usable times, dropped */
    size_t n_clamped;         /* request times moved (fit_run_request) */
} fit_run_info;
const fit_run_info *fit_run_get_info(const fit_run *r);

/* A level's level and level_end records together. */
typedef struct fit_level_info {
    int level, concurrency, closed_loop; /* index in the sweep; C (0: no cap, open loop) */
    double rate_per_s;        /* open loop, else NAN */
    int n_requests_planned, n_warmup_planned;
    int64_t start_ns, end_ns; /* end: level_end's, or the last request's */
    int has_end, interrupted; /* interrupted: level_end said so, or none was read */
    int n_ok_reported, n_failed_reported; /* level_end's (-1 without) */
    ll_rec_client client;     /* level_end "client" (present = 0 in older files) */
    int repeat, pair, seq;    /* A/B runs (docs/records.md "level"); -1 when absent */
    int profiled;             /* level_end "profiled": a profiler capture ran in it */
    const char *find_role;    /* sweep --find's role (records.h); NULL outside a search */
} fit_level_info;
size_t fit_run_n_levels(const fit_run *r);
const fit_level_info *fit_run_level(const fit_run *r, size_t i); /* sorted by start */

/* Request records in file order (a run read back a level at a time: level
 * by level in the levels' order, each level's in file order), owned by the
 * run; a pointer is valid until a request of another level is asked for
 * (keep indices). Chunks sorted by arrival (fit_internal.h fit_chunks_of),
 * outputs NULL (fit_outputs.h reads them), stream_*_tok -1 with
 * LL_COUNTS_STREAM, and times made consistent for the timeline (no first
 * token: the first chunk's; then send <= first token <= end, last chunk <=
 * end; each move counted in n_clamped). A record without a send time, or
 * ending before it, is dropped (n_bad_requests). */
size_t fit_run_n_requests(const fit_run *r);
const ll_rec_request *fit_run_request(const fit_run *r, size_t i);
/* The engine's step records with a start time, in file order; past
 * FIT_ENGINE_STEPS_KEEP of them 1 in fit_run_steps_stride (1: all) of the
 * fit_run_n_steps_seen the file holds, evenly through the run. */
size_t fit_run_n_steps(const fit_run *r);
const ll_rec_step *fit_run_step(const fit_run *r, size_t i);
size_t fit_run_steps_stride(const fit_run *r);
size_t fit_run_n_steps_seen(const fit_run *r);

typedef struct fit_options {
    double edge_tol_frac;     /* events this near a gap's end are at it; default 0.05 of it */
    int rate_bins;            /* token-rate bins per level; default 60 */
    double model_bic_margin;  /* BIC gain a richer model needs; default 10 */
    double model_min_effect;  /* and its departure from the line; default 0.03 */
    int include_warmup;       /* samples from warmup requests too; default 0 */
    int n_server;             /* 1: the law's N is the server's; default 0: D */
    int include_profiled;     /* 1: profiled levels make the law too; default 0 (the
                               * profiler slowed the server in them) */
    size_t steps_keep;        /* engine steps kept run-wide for the law; 0: the
                               * default (fit_tuning.h FIT_STEPS_KEEP); tests set it */
    size_t stream_events;     /* a level with more chunks is analysed as one time-ordered
                               * stream in bounded memory (fit/stream.c); 0: the default
                               * (1,048,576); 1: every level with chunks */
    size_t stream_exact;      /* a streamed level's burst figures and steady median are
                               * exact up to this many values, then from a histogram;
                               * 0: the default (1,048,576) */
} fit_options;
void fit_options_default(fit_options *o);

/* One step sample: the gap between two arrivals of one stream. */
typedef struct fit_sample {
    int64_t t_ns;             /* arrival of the later chunk */
    double gap_ms;            /* gap divided by the later chunk's tokens */
    double n;                 /* time-average of D across the gap */
    double k;                 /* context tokens of the decoding requests at its start */
    int32_t level_idx;        /* into fit_result.levels */
    uint32_t req_idx;         /* fit_run_request index */
    int32_t tokens, pos_tok;  /* the later chunk's tokens; the request's before it */
    char kind;                /* LL_CHUNK_THINK / LL_CHUNK_ANSWER */
    unsigned char steady;     /* P = 0 and D constant across the gap */
} fit_sample;

typedef struct fit_phase_point {
    int64_t t_ns;             /* P and D from here until the next point */
    int32_t prefill, decode;
} fit_phase_point;
typedef struct fit_window { int64_t t0_ns, t1_ns; } fit_window;

/* Latencies over ok, measured requests; exact percentiles; NAN when n == 0. */
typedef struct fit_dist {
    size_t n;
    double mean_ms, p50_ms, p90_ms, p99_ms, max_ms;
} fit_dist;

typedef enum fit_diag {
    FIT_DIAG_NONE, FIT_DIAG_LATENCY, FIT_DIAG_COMPUTE, FIT_DIAG_BANDWIDTH, FIT_DIAG_ADMISSION
} fit_diag;
const char *fit_diag_name(fit_diag d); /* "-", "latency-bound", ... */
const char *fit_diag_rule(void); /* the rule (fit/gpu.c) in one line */

/* One level's figures; NAN where not known. */
typedef struct fit_level {
    int level, concurrency, closed_loop, interrupted;
    int profiled;                 /* a profiler capture ran in it (fit_level_info) */
    int profiled_out;             /* so it made no law point (fit_options.include_profiled 0) */
    const char *find_role;        /* fit_level_info's: sweep --find's role; NULL: none */
    double rate_per_s;            /* fit_level_info's: open loop's arrival rate, else NAN */
    int64_t start_ns, end_ns;
    double duration_s;
    size_t n_requests, n_ok, n_failed, n_warmup, n_excluded_requests; /* failed + warmup */
    size_t n_samples, n_steady_samples, n_steady_points;
    size_t n_samples_after_cut;   /* interrupted: after the last full occupancy, dropped */
    double tokens, whole_tok_per_s; /* all tokens received, over end - start */
    double steady_tok_per_s;      /* C * tokens / gaps of steady samples at N = C */
    double steady_step_ms, steady_s; /* their median ms per token; steady windows' length */
    double steady_tok_per_s_ci[2];
    double predicted_tok_per_s;   /* the law's 1000*C/(a + b*C); closed loop */
    double error_rel, error_rel_ci[2]; /* steady / predicted - 1 */
    int ramp_reached;             /* D reached C: ramp_s, ramp_tokens until then */
    double ramp_s, ramp_tokens;
    size_t n_sent;                /* measured (non-warmup) requests that finished */
    size_t failed_by_class[LL_ERRC__COUNT]; /* of those, failed, by class */
    size_t n_sent_failed;
    fit_dist ttft, ttfa, tpot, itl, e2e;        /* fit/figures.c */
    fit_dist client_lag, ttft_sched, e2e_sched; /* open loop only */
    int64_t think_tok, answer_tok, usage_completion_tok; /* ok measured requests */
    double mean_think_tok_per_s, mean_answer_tok_per_s; /* over duration_s */
    double output_tok_per_s, req_per_s; /* every ok request, warmup too */
    double burst_gap_frac, burst_gap_ms; /* share of gaps under a tenth of the p90 */
    unsigned dist_hist;       /* fit/figures.c: bit k set when latency kind k (ttft, ttfa, tpot, itl, e2e,
                                 client_lag, ttft_sched, e2e_sched) is from a histogram */
    double steady_n_max;          /* the largest N of its steady samples; 0: none */
    int client_bound;             /* the client set the pace (fit/analyze.c) */
    double client_busy_frac, client_events_per_read, client_gap_vs_step;
    double prompt_tok_target_mean, prompt_tok_server_mean;
    double prompt_tok_template;   /* chat: the server's count less the built bodies'; NAN elsewhere */
    size_t server_timed;          /* what the server said per request (fit/said.c) */
    double server_tpot_ms, server_prefill_ms, server_ttft_ms, ttft_beyond_server_ms;
    size_t n_cached_said;
    double cache_share, prompt_tok_asked;
    size_t n_cut_short;           /* ended short of max_tokens, not asked to */
    char cut_short_why[96];       /* "stop x2, length x1" */
    size_t n_counts_attributed, n_counts_tokenizer; /* counts not the stream's (ll_counts) */
    int64_t counts_stream_tok, counts_recorded_tok;
    size_t server_scrapes;        /* the server's /metrics (fit/server.c) */
    double server_n, server_waiting, server_step_ms, server_tok_per_step;
    double k_mean, model_pred_tok_per_s, model_error_rel; /* the chosen model at C */
    double heldout_pred_tok_per_s, heldout_error_rel; /* refitted without this level; NAN: not made */
    double pos_max_tok, early_ms, late_ms, early_all_ms, late_all_ms; /* fit/position.c */
    int server;                   /* ll_srv of the server figures; -1: none */
    double server_gen_tok_s, server_cache_share;
    int server_n_disagrees;       /* closed loop: server_n far from C */
    double server_stale_s, server_waiting_growth;
    /* the server's own latency histograms and gauges (fit/server_own.c), NAN where
     * its page has none: ms per request or token, KV usage 0..1, counts */
    double server_itl_mean_ms, server_ttft_mean_ms, server_ttft_p90_ms;
    double server_queue_mean_ms, server_prefill_mean_ms, server_decode_mean_ms;
    double server_kv_usage_mean, server_kv_usage_max, server_preemptions;
    double server_waiting_capacity, server_waiting_deferred;
    size_t gpu_scrapes;           /* GPU figures (fit/gpu.c); activities 0..1 */
    double gpu_power_w, gpu_power_limit_w, gpu_power_frac;
    double gpu_sm_active, gpu_tensor_active, gpu_dram_active, gpu_energy_j, gpu_j_per_tok;
    fit_diag diagnosis;
    char diagnosis_why[112];
    size_t n_phase;               /* time series for plots */
    fit_phase_point *phase;       /* P(t), D(t) change points */
    size_t n_windows;
    fit_window *windows;          /* steady windows: P = 0, D = C */
    int64_t rate_t0_ns, rate_bin_ns;
    size_t n_rate_bins;
    double *think_tok_per_s, *answer_tok_per_s; /* (n_rate_bins) */
} fit_level;

/* Per level and turn of multi-turn sessions (fit/turns.c). */
typedef struct fit_turn {
    int level, concurrency, turn;
    size_t n;
    double ttft_p50_ms, ttft_p90_ms, tpot_p50_ms; /* NAN with no sample */
    double prompt_tok_mean, cache_share;
} fit_turn;

/* The one headline (fit/headline.c): the chosen model, whether it fits
 * every level, its ceiling where one can be said, and how it predicts the
 * levels it did not see. Every printer leads with it. */
typedef struct fit_headline {
    fit_model_kind model;         /* the chosen model (the line when none richer, or no check) */
    int fits;                     /* every level within FIT_MODEL_LEVEL_FIT of it */
    int worst_level;              /* index of the level it misses most; -1 none */
    int best_level;               /* index of the closed-loop level with the most steady tok/s; -1 none */
    int max_c;                    /* the largest measured closed-loop C; 0 none */
    double slope_ms, slope_ci_ms[2]; /* ms per request added beyond its last knee, at the run's context */
    double ceiling_tok_per_s;     /* 1000 / slope_ms; NAN when none is said (no_ceiling says why) */
    double at_max_c_tok_per_s;    /* the model at max_c */
    char no_ceiling[200];
    int heldout_worst_level;      /* index; -1 when no level was held out */
    double heldout_worst_rel;     /* its held-out error */
    size_t n_heldout;             /* levels with a held-out prediction */
    int heldout_warn;             /* heldout_worst_rel beyond FIT_HELDOUT_BOUND */
} fit_headline;

/* The step samples the report's charts draw (fit/reduce.c "Chart sample"):
 * every stride-th sample of its kind in sample order, stride 1 (all of them)
 * up to FIT_CHART_KEEP (fit_tuning.h) of the kind, then doubled as needed. */
typedef struct fit_chart_point {
    double n, gap_ms, k;      /* fit_sample's */
} fit_chart_point;
typedef struct fit_chart_sample {
    double n_max;             /* the largest N of any step sample; 0: none */
    size_t n_steady, n_other; /* points kept: steady samples, the rest */
    fit_chart_point *steady, *other;
    size_t stride_steady, stride_other; /* 1: every sample */
} fit_chart_sample;

struct fit_kept; /* fit's own reduced per-level data (fit_internal.h) */

typedef struct fit_result {
    fit_law law;                  /* THE answer: the mean step on steady engine steps */
    const char *law_n;            /* whose N it is: "client" (D) | "server" */
    fit_law law_other;            /* against the other N; ok = 0 without one */
    size_t law_server_scrapes;
    fit_law ols;                  /* OLS on the same points */
    fit_law naive;                /* OLS on every raw gap, steady or not */
    fit_law engine;               /* the engine's decode-only step records */
    int has_truth;                /* the run line carried the synthetic law */
    double truth_a_ms, truth_b_ms;
    double time_scale;            /* NAN without a truth */
    char engine_law_spec[160];    /* the law as written ("52+30n", "20+2n, knee=8:10"); "" without */
    double asymptote_tok_per_s;   /* 1000 / b_ms, NAN unless fit_law_slope_resolved */
    double n_half;                /* a / b, likewise */
    fit_model_check model;
    int model_worst_level;        /* the level the chosen model misses most; -1 none */
    double context_per_req_tok;   /* closed levels' mean K per running request; NAN: none */
    double model_slope_ms;        /* the chosen model's ms per request added, at that K; NAN: line */
    fit_headline headline;
    size_t n_levels;
    fit_level *levels;
    size_t n_samples;             /* step samples, every level (fit_level_samples makes a
                                   * level's again: the result keeps them reduced) */
    fit_chart_sample chart;       /* what the report's step charts draw */
    /* what was left out, and why */
    size_t n_requests, n_failed, n_warmup, n_no_tokens;
    size_t n_empty_chunks, n_truncated_lines, n_bad_requests;
    size_t n_rejected_records, n_out_of_range, n_clamped;
    size_t n_trimmed;             /* law points left out as outliers */
    int law_client_bound;         /* a client-bound level made the law */
    char no_law[200];             /* why there is no law ("" when law.ok) */
    size_t n_notes;
    char **notes;
    size_t n_turns;
    fit_turn *turns;              /* by level, then turn; none without sessions */
    struct fit_kept *kept;
} fit_result;

int fit_analyze(const fit_run *run, const fit_options *opt, fit_result **out, char *err, size_t errlen);
void fit_result_free(fit_result *r);
/* fit_load_run then fit_analyze (opt NULL: defaults): both set, or neither. */
int fit_open(const char *dir, const fit_options *opt, fit_run **run, fit_result **res, char *err,
             size_t errlen);
/* The step samples of level level_idx of res (fit_analyze of run), made
 * again from run's requests as fit_analyze made them (the result keeps them
 * only reduced): request by request, or, for a level fit_analyze streamed
 * (fit_options.stream_events), the same samples in time order (ties at one
 * instant by N). *out: caller frees (NULL when none). 0, LL_EINVAL (no such
 * level), LL_ENOMEM. */
int fit_level_samples(const fit_run *run, const fit_result *res, size_t level_idx, fit_sample **out,
                      size_t *n_out);
/* 1 when the law's N is the server's (fit_options.n_server). */
int fit_law_n_is_server(const fit_result *r);

/* Step time against position in the request (fit/position.c): a level's
 * samples in FIT_POS_BINS bins of equal width over [0, pos_max_tok]; a
 * difference within FIT_POS_SAME_FRAC is read as none. */
#define FIT_POS_BINS 16
#define FIT_POS_SAME_FRAC 0.05
typedef struct fit_pos_bins {
    double pos_max_tok;       /* NAN with no sample */
    double width_tok;         /* bin b holds positions in [b*width, (b+1)*width) */
    double steady_ms[FIT_POS_BINS], all_ms[FIT_POS_BINS];   /* NAN when empty */
    double steady_tok[FIT_POS_BINS], all_tok[FIT_POS_BINS]; /* tokens behind each */
    double early_ms, late_ms, early_all_ms, late_all_ms;    /* fit_level's figures */
} fit_pos_bins;
void fit_level_position(const fit_result *r, size_t level_idx, fit_pos_bins *out);

#endif
