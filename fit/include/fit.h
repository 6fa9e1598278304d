/* fit.h: from a run's records to the step-time law step(N) = a + b*N.
 *
 * Two stages. fit_load_run reads RUN_DIR/records.jsonl (through the records
 * module's reader, records.h) into a fit_run (levels, requests with their
 * chunks, engine step samples); it tolerates a truncated last line, failed
 * requests and interrupted levels, and refuses a records schema newer than
 * LL_RECORDS_SCHEMA. fit_analyze rebuilds each level's timeline (P(t)
 * prefilling, D(t) decoding), cuts every inter-chunk gap into a step sample,
 * labels the steady ones, computes every per-level figure, and fits the law
 * on the steady steps with GSL (the answer, OLS beside it), checks the
 * straight line against a quadratic and a knee, and compares each level
 * with the law. fit is the only analysis: the sweep's table, summary.json,
 * `loadlaw fit`, the report and compare all print its result.
 *
 * Definitions (docs/records.md for the records):
 *  - A request is prefilling from send_ns to first_token_ns and decoding from
 *    first_token_ns to end_ns. Failed and warmup requests count in P and D
 *    (they occupied the server) but give no step samples; a failed request with
 *    no token is prefilling until its end.
 *  - Arrival: the chunks of one stream stamped at one instant (a chunk split
 *    into thinking and answer) are one arrival; a chunk without tokens is none.
 *  - Step sample: the gap between two consecutive arrivals of one stream,
 *    divided by the tokens of the later arrival (ms per token). N is the
 *    time-average of D over the gap. Steady: P = 0 and D constant inside the
 *    gap; events closer to either end than opt.edge_tol_frac of the gap count
 *    as at the end (chunks of one engine step reach different streams
 *    microseconds apart). The ITL (below) is the same gaps.
 *  - One engine step (fit_level_steps, FIT_STEP_GROUP_FRAC): in time order,
 *    steady samples of one level join the step of the first sample while they
 *    have its N and arrive within half of their OWN gap after it. A step's
 *    tokens reach the C streams microseconds apart; a sample of the next step
 *    arrives one whole (next) step after, so half its own gap separates them
 *    however much consecutive steps differ. (Half the first sample's gap did
 *    not: after a long step a short one fell inside it, two steps became one
 *    point, and the law sat 1 standard error below the mean with 30%
 *    exponential jitter.) The law's points, the steady throughput's interval
 *    and compare's bootstrap units are these steps.
 *  - The law (fit_result.law) estimates the MEAN step time at N: users read
 *    N / (a + b*N) as throughput, and throughput follows the mean step, not
 *    the typical one. One point per step (x = N, y = its mean ms per token,
 *    sum of gaps / sum of tokens), sized by its tokens (fit_line_sized), so
 *    the intervals count independent steps, not the C copies of each step
 *    that the C streams see, and at each N the law's mean is the same ratio
 *    as the steady throughput. A closed-loop level gives the steps of its
 *    steady windows (N = C) only; an open-loop level every steady step. The
 *    steady steps of a closed-loop level's ramp-down, where N falls every
 *    step, are not used: there the client's read lag shrinks with N step
 *    after step, each gap is its step minus that change, and on the bundled
 *    engine at 3 + 0.05*N ms, C = 256 those gaps ran 5-19% below their steps
 *    and pulled b 3% low. Over a window of constant N the lag's changes
 *    cancel. Robust only
 *    against true outliers (a stalled client or server, a burst read, a
 *    retransmission): points more than FIT_TRIM_SD robust sd from their N's
 *    median (from a bisquare line where an N has too few points) go, and
 *    weighted least squares (weights 1/noise^2 of each N) on the rest is the
 *    answer ("trimmed-wls"); right-skewed jitter, which is what moves the
 *    mean above the median, stays in. CIs: 95%, HC3 sandwich standard errors
 *    (noise grows with N), t distribution with n - 2 degrees of freedom.
 *    Measured (tests/fit/test_fit.c test_skewed_jitter): exponential jitter
 *    of 30% on 3 + 0.05*N ms, C = 1..256: the earlier bisquare of per-step
 *    medians gave 3.797 + 0.0612*N against a true mean of 3.900 + 0.065*N,
 *    its band missed the mean at all 9 levels and the steady throughput sat
 *    2-5% below its prediction. This law (steps sized by tokens, closed
 *    loop at N = C only), over 40 seeds: lognormal (25%) band covers the
 *    true mean 35-38/40 per level, err interval covers 0 36-40/40;
 *    exponential (30%) 35-39/40 and 38-40/40; gaussian 5% 34-38/40 and
 *    35-40/40. Over 400 seeds the band covers 94-97% at every level in all
 *    three; the err interval 93-97% at C <= 8 and 98-100% above (there
 *    the level's own steps carry the law's band at C, and the interval adds
 *    that band and the throughput's as if independent).
 *  - Ramp (closed loop): from the level's start until D first reaches C.
 *    Steady windows: spans with P = 0 and D = C.
 *  - steady_tok_per_s = C * (tokens of steady samples at N = C) / (sum of their
 *    gaps): exact for lockstep decoding and free of window-edge effects. Its
 *    95% interval is the ratio estimator's (delta method over the level's
 *    steps at N = C, t quantile); error_rel = steady / predicted - 1, and its
 *    interval combines that one with the law's mean-line band at C on the
 *    log scale.
 *  - The law against the server's N (fit_result.law_other, or the law itself
 *    with fit_options.n_server): the same steps, each with x = the server's
 *    running requests at its time: the total over labels of a scrape of the
 *    running gauge (server figures), given only where the two consecutive
 *    scrapes inside the level on either side of the step agree. A scrape is
 *    one instant, every 0.5 s, and a level may last little longer: the last
 *    scrape before a step, however old, gave N = 0 to 0.5 s of one-request
 *    steps (a scrape before the first admission) and the ramp-down's N to a
 *    level with one scrape, and on the bundled engine at 52+30n (time scale
 *    0.02, C = 1..16) b came out 0.528 for 0.6. Steps without an agreeing
 *    pair are left out (a note counts them); with too few left the law
 *    against the server's N is not fitted, and says why.
 *    Where the server runs exactly the client's D the two laws are one.
 *    Everything else (predictions at C, the model check on the law's points)
 *    follows whichever law is the answer.
 *
 * Times are integer nanoseconds since the run epoch (as in the records); step
 * times in milliseconds; rates in tokens per second. Results are plain structs
 * owned by the caller (fit_result_free); a fit_run is opaque (fit_run_free).
 * Errors: 0 or a negative LL_E* code (common.h) with a message in err.
 * Thread safety: distinct objects may be used from distinct threads; a
 * fit_run is read-only after loading and may be shared by readers.
 */
#ifndef LOADLAW_FIT_H
#define LOADLAW_FIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "records.h"

/* ---- loaded records ------------------------------------------------------- */

typedef struct fit_run fit_run;

/* Read RUN_DIR/records.jsonl (path may also name a .jsonl file directly).
 * LL_EIO: missing/unreadable; LL_EPARSE: malformed line (not the last one);
 * LL_EINVAL: no run line, schema too new, or no usable record. */
int fit_load_run(const char *path, fit_run **out, char *err, size_t errlen);
void fit_run_free(fit_run *r);

typedef struct fit_run_info {
    int schema;
    const char *version;      /* tool version that wrote the run ("" if absent) */
    const char *host;
    int ranks;
    int64_t epoch_wall_ns;
    const char *target_url;   /* "" if absent */
    const char *model;
    const char *endpoint;
    int bundled;              /* target was the in-process engine */
    const char *engine_spec;  /* "" for a remote server */
    const char *backend;      /* run line "backend": "synthetic" | "cpu" | "cuda"; "" remote */
    const char *scenario;
    int has_engine_law;       /* run line carried engine_law (bundled synthetic) */
    double law_a_ms, law_b_ms, law_c_ms_per_ktok, law_p_ms_per_tok; /* scaled units */
    double time_scale;        /* engine_law.time_scale: the law as played is the
                               * law as written times this; NAN without a law, 1
                               * for an older run line whose engine_law lacks it */
    const char *run_json;     /* the whole run line, unformatted JSON ("{}" if none) */
    size_t n_lines;           /* records read */
    size_t n_truncated;       /* truncated last line skipped (0 or 1) */
    size_t n_unknown;         /* lines of a type this reader does not know */
    size_t n_bad_requests;    /* request lines without usable times, dropped */
    size_t n_rejected;        /* records the reader rejected (records.h) */
    size_t n_out_of_range;    /* values out of range inside them (records.h) */
    size_t n_clamped;         /* request times moved to keep send <= first token
                               * <= end (a first token before the send, an end
                               * before the first token or the last chunk) */
} fit_run_info;
const fit_run_info *fit_run_get_info(const fit_run *r);

typedef struct fit_level_info {
    int level;                /* index in the sweep */
    int concurrency;          /* C; 0 = no cap (open loop) */
    int closed_loop;          /* mode == "closed" */
    double rate_per_s;        /* open loop, else NAN */
    int n_requests_planned, n_warmup_planned;
    int64_t start_ns;
    int64_t end_ns;           /* level_end, or the last request end if none */
    int has_end;              /* a level_end line was read */
    int interrupted;          /* level_end said so, or no level_end at all */
    int n_ok_reported, n_failed_reported; /* from level_end (-1 if none) */
    ll_rec_client client;     /* level_end "client": what the client's threads did
                               * (present = 0 in older files) */
    int repeat, pair, seq;    /* A/B runs (level record; docs/records.md): the
                               * r-th run of this level on this side, its pair
                               * number, its place in the order both sides ran
                               * in; -1 when absent */
} fit_level_info;
size_t fit_run_n_levels(const fit_run *r);
const fit_level_info *fit_run_level(const fit_run *r, size_t i); /* sorted by start */

enum { FIT_CHUNK_THINK = 't', FIT_CHUNK_ANSWER = 'a' };
typedef struct fit_chunk {
    int64_t t_ns;
    int32_t tokens;
    char kind;                /* FIT_CHUNK_THINK or FIT_CHUNK_ANSWER */
} fit_chunk;

typedef struct fit_request {
    int level;                /* level index as in the records */
    int rank;
    int64_t id;
    int warmup;
    int ok;                   /* status == "ok" */
    const char *error_class;  /* "" when ok */
    const char *error;        /* server's or curl's message, "" if none */
    int http_status;
    int64_t intended_ns;      /* -1 when absent (closed loop) */
    int64_t send_ns, header_ns, first_token_ns, first_think_ns, first_answer_ns, end_ns; /* -1 = null */
    int64_t prompt_tok, think_tok, answer_tok;
    int64_t usage_prompt_tok, usage_completion_tok, usage_reasoning_tok; /* -1 = no usage */
    ll_counts counts;         /* where think_tok/answer_tok came from (records.h) */
    int64_t stream_think_tok, stream_answer_tok; /* the stream's own count when
                               * counts != STREAM, else -1 */
    int64_t prompt_tok_target;/* prompt built to this length (0 = not) */
    int64_t cached_tok;       /* prompt tokens the server said it served from its cache; -1 = not said */
    char finish[16];          /* finish_reason as sent, "" = none */
    ll_rec_srv_timing srv;    /* the server's own timing of the request (records.h) */
    ll_rec_work work;         /* its session and turn, trace row or prefix group (records.h) */
    int max_tokens;           /* the length cap it asked; 0 = not recorded */
    size_t n_chunks;
    const fit_chunk *chunks;  /* in arrival order */
} fit_request;
size_t fit_run_n_requests(const fit_run *r);
const fit_request *fit_run_request(const fit_run *r, size_t i); /* in file order */

typedef struct fit_engine_step {
    int64_t start_ns, dur_ns;
    int n_decode, n_running, prefill_tok;
    int64_t ctx_tok;
} fit_engine_step;
size_t fit_run_n_steps(const fit_run *r);
const fit_engine_step *fit_run_step(const fit_run *r, size_t i);

/* ---- analysis -------------------------------------------------------------- */

typedef struct fit_options {
    double edge_tol_frac;     /* see header comment; default 0.05 */
    int rate_bins;            /* token-rate bins per level; default 60 */
    double model_bic_margin;  /* BIC gain a richer model needs; default 10 */
    double model_min_effect;  /* and its relative departure from the line at
                               * the largest N; default 0.03 */
    int include_warmup;       /* take samples from warmup requests too; default 0 */
    int n_server;             /* 1: the law's N is the server's (header comment,
                               * "The law against the server's N"); default 0:
                               * the client's D */
} fit_options;
void fit_options_default(fit_options *o);

/* A straight-line fit y = a + b*x. ok = 0 when there was too little data
 * (fewer than 3 points or fewer than 2 distinct x); then the numbers are NAN. */
typedef struct fit_law {
    int ok;
    const char *method;       /* "trimmed-wls" (the law, header comment) | "ols" |
                               * "ols-fallback" (the robust pass failed; note says why) */
    double a_ms, b_ms;
    double a_ci_ms[2], b_ci_ms[2]; /* 95% */
    double a_se_ms, b_se_ms;  /* sandwich standard errors */
    double cov_ab_ms2;        /* covariance of a and b from the same sandwich
                               * matrix (ms^2): the mean line's band needs it,
                               * a and b being strongly anti-correlated */
    double t_crit;            /* t quantile behind the 95% CIs (n - 2 dof) */
    double r2;
    double resid_sd_ms;       /* sd of the residuals of the points fitted (ms) */
    size_t n_points;          /* points given (n_trimmed of them left out) */
    size_t n_trimmed;         /* outliers left out of the trimmed fit */
    size_t n_samples;         /* raw step samples behind those points */
    size_t n_distinct;        /* distinct x values */
    int converged;            /* trimmed: the bisquare pass converged */
    char note[160];           /* "" or why the fit fell back */
} fit_law;

/* Outliers of the law's fit (header comment, "The law"): more than this many
 * robust standard deviations from the median of their N's points (from the
 * bisquare line where an N has too few points to judge: fit/regress.c
 * judge_by_level), never a level's bulk. Exponential jitter puts
 * 1e-4 of its mass beyond that (its mean moves by 0.1% of the jitter; at 8
 * the law sat 0.8 standard errors low with 30% exponential jitter); a stall
 * of several steps is far beyond it. */
#define FIT_TRIM_SD 12.0

/* Fit y = a + b*x on raw points (robust = 1: the trimmed mean fit of the
 * header comment, else OLS). The trimmed fit weights each point by the noise
 * of its x (x values with >= 5 points); standard errors are HC3 sandwich
 * ones, so noise that grows with N does not make the intervals too narrow. */
int fit_line(const double *x, const double *y, size_t n, int robust, fit_law *out,
             char *err, size_t errlen);
/* The same with a size per point (robust fit only; NULL = all 1): the WLS
 * weight of point i is size[i] times its noise weight. The law's points are
 * engine steps sized by the tokens the client saw of them, so at each N the
 * law is the mean of every token's step time there, sum of gaps / sum of
 * tokens, the same ratio as the steady throughput (a step of which few
 * samples were steady does not count as much as a whole one). */
int fit_line_sized(const double *x, const double *y, const double *size, size_t n, int robust,
                   fit_law *out, char *err, size_t errlen);

/* The 95% confidence interval of the mean line a + b*n at n:
 * a + b*n -/+ t_crit * sqrt(var_a + n^2 var_b + 2 n cov_ab). NAN when !ok. */
void fit_law_mean_ci(const fit_law *L, double n, double *lo, double *hi);

/* 1 when the law's slope is measured: ok, and b's 95% interval lies above 0.
 * Only then does 1/b (the ceiling), a/b (N1/2) or a ratio of slopes mean
 * anything: with b = 0.001 [-0.005, 0.006] ms the "ceiling" was 1.4e6 tok/s
 * and a slope ratio 858 [0.2, 3.6e6]. The same condition bounds plan's
 * Fieller interval (b^2 > t^2 var_b); where it fails that interval is
 * unbounded above. */
int fit_law_slope_resolved(const fit_law *L);

typedef enum fit_model_kind {
    FIT_MODEL_LINEAR = 0,
    FIT_MODEL_QUADRATIC = 1,
    FIT_MODEL_PIECEWISE = 2,  /* two lines joined at a knee */
    FIT_MODEL_CONTEXT = 3,    /* a + b*N + c*K/1000: the context term */
    FIT_MODEL_BUCKETS = 4,    /* a + b*bucket(N): batches padded to captured sizes */
    FIT_MODEL_KNEES2 = 5,     /* three lines joined at two knees */
    FIT_MODEL_KNEE_CONTEXT = 6,    /* a knee and the context term */
    FIT_MODEL_BUCKETS_CONTEXT = 7, /* buckets and the context term */
} fit_model_kind;
/* "linear" | "quadratic" | "piecewise" | "context" | "buckets" | "two-knees"
 * | "piecewise+context" | "buckets+context" */
const char *fit_model_name(fit_model_kind k);

/* A model of the family as terms of one least-squares design: step =
 * sum coef[j] * term_j(N, K). FIT_TERM_HINGE is max(0, N - knee[j]) (the
 * slope's change at a knee), FIT_TERM_BUCKET is fit_bucket_of(N), FIT_TERM_K
 * is K/1000. The covariance is HC3 (the sandwich the line's errors use, fit.h
 * "The law"), so the intervals hold when the step's noise grows with N. */
#define FIT_MODEL_MAX_TERMS 6
typedef enum fit_term {
    FIT_TERM_ONE = 0,
    FIT_TERM_N,
    FIT_TERM_N2,
    FIT_TERM_HINGE,
    FIT_TERM_BUCKET,
    FIT_TERM_K,
} fit_term;
typedef struct fit_model_fit {
    fit_model_kind kind;
    size_t p;                            /* terms; 0: not fitted */
    fit_term term[FIT_MODEL_MAX_TERMS];
    double knee[FIT_MODEL_MAX_TERMS];    /* FIT_TERM_HINGE: its N (NAN otherwise) */
    double coef[FIT_MODEL_MAX_TERMS];
    double se[FIT_MODEL_MAX_TERMS];      /* HC3 standard errors */
    double cov[FIT_MODEL_MAX_TERMS][FIT_MODEL_MAX_TERMS]; /* HC3 covariance */
    double bic;                          /* knees count as parameters */
    double effect, worst_n;              /* largest departure from the line, and where */
} fit_model_fit;
/* The model's step (ms) at N with K context tokens in all. */
double fit_model_fit_eval(const fit_model_fit *f, double n, double k);
/* Its 95% interval there (delta method on the HC3 covariance); NANs when the
 * covariance is unknown. */
void fit_model_fit_ci(const fit_model_fit *f, double n, double k, double ci[2]);
/* "20.1 + 2.01*N + 0.498*K/1k", "10 + 2*N + 4*(N-8)+", "8 + 1.5*bucket(N)":
 * coefficients times scale (1, or 1/time_scale for the law as configured). */
void fit_model_fit_formula(const fit_model_fit *f, double scale, char *buf, size_t len);
/* The term's name as JSON and the report spell it: "a", "N", "N^2",
 * "(N-knee)+", "bucket(N)", "K/1k". */
const char *fit_term_name(fit_term t);
/* The step's growth per request as N grows past every knee, at kr context
 * tokens per request (the terms in N, the hinges' and K's share); NAN for the
 * quadratic, which has none. */
double fit_model_fit_slope(const fit_model_fit *f, double kr);
/* 1 when the model has term t (FIT_TERM_K: it needs a context to predict). */
int fit_model_fit_has(const fit_model_fit *f, fit_term t);

/* The context term (fit_model_check, FIT_MODEL_CONTEXT): K is the context
 * tokens of the decoding requests at a step (their prompts plus the tokens
 * they have received; fit_sample.k), c the step's cost per 1,000 of them.
 * c is identifiable only when K does not move with N: over the law's points,
 * |corr(N, K)| above FIT_CONTEXT_COLLINEAR leaves it "not identifiable from
 * this run" (vary prompt lengths, load.vary_context). Its effect is the
 * larger of its level means' departure from the line and the step time K
 * moves within a level (10th to 90th percentile), relative to the line. Buckets: N padded up
 * to the smallest of FIT_BUCKETS at or above it (vLLM's and SGLang's captured
 * batch sizes); identifiable only when some level's N is not one of them. A
 * richer model is chosen when its BIC is lower than the line's by the margin
 * and its prediction departs from the line's by more than the minimum effect
 * at some level (every level is judged; the one that departs most is named). */
#define FIT_CONTEXT_COLLINEAR 0.995
#define FIT_MODEL_LEVEL_FIT 0.05  /* a model "fits" a level within 5% of its step */
/* The chosen model: the model check's choice (the line when nothing richer
 * qualifies), predicted at each closed-loop level's N = C and mean K; every
 * level's error against it is printed, and when one misses by more than
 * FIT_MODEL_LEVEL_FIT the headline says that no model of the family fits
 * every level, naming the worst. */

/* Decimals that show an interval [lo, hi] with two significant digits of its
 * width, so "[5.199, 5.202]" never collapses to "[5.2, 5.2]" (nor a missed
 * gate's interval to its estimate); -1 when the width is zero, not a number
 * or under 1e-9 (print "%.6g" then). */
int fit_ci_decimals(double lo, double hi);

typedef struct fit_model_check {
    int done;                 /* 0: too few distinct N to check (needs 3) */
    fit_model_kind best;
    double bic_linear, bic_quadratic, bic_piecewise; /* NAN when not fitted */
    double quad_c_ms;         /* coefficient of N^2 in the quadratic fit */
    double knee_n;            /* best breakpoint (NAN if none) */
    double slope_before_ms, slope_after_ms; /* piecewise slopes */
    double effect_quadratic, effect_piecewise; /* relative departure at max N */
    double bic_context, bic_buckets; /* NAN when not fitted */
    double ctx_a_ms, ctx_b_ms, ctx_c_ms;  /* a + b*N + c*K/1000, c per 1k context tokens */
    double ctx_c_ci_ms[2];    /* OLS 95% interval of c */
    double ctx_cov[3][3];     /* OLS covariance of (a, b, c) */
    double kn_corr;           /* corr(N, K) over the points; NAN without K */
    double effect_context, effect_buckets; /* largest relative departure from the line over the levels' N */
    double worst_n_quadratic, worst_n_piecewise, worst_n_context, worst_n_buckets; /* the N where each departs most */
    double bkt_a_ms, bkt_b_ms; /* a + b*bucket(N) */
    double quad_coef[3], knee_coef[3]; /* a, b, c of the quadratic; a, b, slope change of the knee */
    char verdict[448];        /* one sentence */
    size_t n_trimmed;         /* wild points left out of the check (> 6 robust sd
                               * from the median of their N) */
    fit_model_fit chosen;     /* the chosen model's terms (p = 0 for the line:
                               * the headline's robust line is its own fit) */
    fit_model_fit knees2, knee_context, buckets_context; /* the combinations
                               * (p = 0 when not fitted; their bic is NAN) */
    double alone_n;           /* the level (its N) without which the chosen model
                               * would not have qualified; NAN when none alone */
    int context_negative;     /* a model with a context term qualified but its c's
                               * interval was not above 0: set aside (a note says so) */
} fit_model_check;
/* The chosen model's step time (ms) at N with K context tokens in all (the
 * line's when it is the choice; NAN when the check was not done). */
double fit_model_predict(const fit_model_check *m, const fit_law *line, double n, double k);

/* One step sample. */
typedef struct fit_sample {
    int64_t t_ns;             /* arrival of the later chunk */
    double gap_ms;            /* gap divided by the later chunk's tokens */
    double n;                 /* time-average of D across the gap */
    double k;                 /* K: context tokens of the decoding requests at the gap's start */
    int32_t level_idx;        /* index into fit_result.levels */
    uint32_t req_idx;         /* the request (fit_run_request index) */
    int32_t tokens;           /* tokens of the later chunk */
    int32_t pos_tok;          /* its position in the request: the tokens the
                               * request had received before the later chunk
                               * (the first chunk's tokens for its first gap) */
    char kind;                /* FIT_CHUNK_THINK / FIT_CHUNK_ANSWER */
    unsigned char steady;
} fit_sample;

/* P and D from t_ns until the next point. */
typedef struct fit_phase_point {
    int64_t t_ns;
    int32_t prefill, decode;
} fit_phase_point;

typedef struct fit_window {
    int64_t t0_ns, t1_ns;
} fit_window;

/* Per-level figures: each is defined here once, computed once (analyze.c),
 * and printed by every table, file and page (the sweep's table, summary.json,
 * `loadlaw fit`, the report, compare).
 *  TTFT  send -> first token of any kind (thinking included).
 *  TTFA  send -> first answer token (requests without one give no sample).
 *  ITL   one sample per gap between consecutive arrivals of a stream (header
 *        comment: "Arrival"), divided by the tokens of the later arrival; ms
 *        per token. The same gaps, by the same code (timeline.c), are the
 *        step samples (which also keep those after an interrupted level's cut
 *        out of the law, and warmup ones with include_warmup; the ITL never
 *        does either).
 *  TPOT  per request: (last token - first token) / (tokens - 1), over the
 *        tokens its chunks carry (reasoning a server did not stream, in
 *        think_tok with no chunks, came before the first token).
 *  E2E   send -> end of the response.
 *  Open loop, from the intended send time (no coordinated omission):
 *  client lag = send - intended; TTFT/E2E sched = first token / end - intended.
 * Over ok, measured (non-warmup) requests. Exact percentiles of the sorted
 * samples (linear interpolation between ranks). */
typedef struct fit_dist {
    size_t n;
    double mean_ms, p50_ms, p90_ms, p99_ms, max_ms; /* NAN when n == 0 */
} fit_dist;

/* Burst reading (fit_level.burst_gap_frac): a level is noted as unreliable
 * when more than FIT_BURST_NOTE_FRAC of its samples are shorter than a tenth
 * of its 90th-percentile gap. The 75th percentile stays a real step until
 * three quarters of the gaps are bursts, where a median or a law fitted on
 * the same gaps would already be dragged down. Only reported: the law keeps
 * its samples (a burst gap is not steady-state timing, but dropping it would
 * hide the tokens its neighbour's long gap carried). */
#define FIT_BURST_MIN_SAMPLES 20
#define FIT_BURST_NOTE_FRAC 0.05

/* The client set a level's pace (fit_level.client_bound) when any of:
 *  - its busiest worker thread was on a CPU at least FIT_CLIENT_BUSY_FRAC of
 *    the level's wall time: a saturated read loop, whose lag, not the
 *    server's steps, spaces the arrivals;
 *  - it parsed at least FIT_CLIENT_EVENTS_PER_READ token chunks per socket
 *    read AND the level's gaps were bursts (burst_gap_frac over
 *    FIT_BURST_NOTE_FRAC): reads that each collect several steps;
 *  - its median gap was under FIT_CLIENT_GAP_FRAC of the engine's own step
 *    at C (when the run has engine step records or the engine's law): one
 *    stream cannot see tokens faster than the engine steps.
 * The burst check alone is relative to the level's own gaps and misses a
 * level whose gaps are all bursts; these are absolute. */
#define FIT_CLIENT_BUSY_FRAC 0.9
#define FIT_CLIENT_EVENTS_PER_READ 2.0
#define FIT_CLIENT_GAP_FRAC 0.5
/* Prompt drift worth a note: server's mean prompt tokens vs the requested. */
#define FIT_PROMPT_DRIFT_FRAC 0.02

/* Server figures (fit_level.server_*), from the target's /metrics scraped
 * during the sweep (records.h "metric"; docs/remote.md "Server metrics"),
 * read through common/dialect.h's table (one server per level: the first in
 * the table's order whose running gauge the level has, else the first with
 * any figure; GPU exporters never count):
 *  server N        mean of the running-requests gauge (loadlaw_running_requests,
 *                  vllm:num_requests_running, sglang:num_running_reqs,
 *                  llamacpp:requests_processing, tgi_batch_current_size,
 *                  trtllm_num_requests_running), summed over the labels of one
 *                  scrape (engines, data-parallel ranks), over the scrapes
 *                  inside the level's steady windows (the whole level when it
 *                  has none). Beside the client's D = C of a closed-loop level:
 *                  they disagree when |N - C| > FIT_SERVER_N_REL * C +
 *                  FIT_SERVER_N_ABS (another tenant, or a server that caps its
 *                  batch).
 *  server waiting  the waiting gauge, the same way.
 *  server step     a step-duration histogram where the server has one (loadlaw,
 *                  TGI's forward duration of method "decode"): delta sum / delta
 *                  count; else a counter of iterations (vLLM's
 *                  iteration_tokens_total count, llama.cpp's n_decode_total):
 *                  span / delta count (the engine is busy throughout a steady
 *                  window; with several engines, data-parallel series, their
 *                  spans summed over their counts summed); else TensorRT-LLM's
 *                  last-iteration gauge, its mean over the scrapes. Counters are
 *                  differenced over the span from the first steady window's
 *                  start to the last one's end, per series, a drop counted as a
 *                  reset (the new value is the increase), then summed over series.
 *  tokens per step vLLM: delta tokens / delta iterations of iteration_tokens_total;
 *                  llama.cpp: delta (n_busy_slots_per_decode * n_decode_total) /
 *                  delta n_decode_total (the gauge is a mean since start).
 *  generated tok/s delta of the generated-tokens counter over its span.
 *  cache share     prompt tokens the server served from its prefix cache over
 *                  the prompt tokens it was given, over the whole level (start to
 *                  end: prompts are prefilled in the ramp): vLLM hits / queries,
 *                  SGLang and TensorRT-LLM cached / prompt, llama.cpp cached /
 *                  (prompt + cached) (its prompt counter excludes cached tokens).
 *  stale           SGLang refreshes its gauges every --decode-log-interval
 *                  steps (default 40): a gen_throughput that held one value for
 *                  more than FIT_SGLANG_STALE_S while the level ran is noted.
 * Each figure's caveat (the table's) is printed under the server table. */
#define FIT_SERVER_N_REL 0.10
#define FIT_SERVER_N_ABS 1.0
#define FIT_SGLANG_STALE_S 2.0

/* The server's own per-request figures (fit_level.server_timed ...), from
 * what each response carried beside its tokens (records.h "request":
 * "server", "cached_tok", "finish"), over a level's ok measured requests:
 *  server TPOT     the median of the server's per-token decode time
 *                  (llama.cpp timings.predicted_per_token_ms, vLLM mean_itl_ms),
 *                  beside the client's TPOT p50: equal within a few per cent
 *                  when the client reads the stream as it arrives.
 *  server TTFT     vLLM's time_to_first_token_ms, else queue_ms + prompt_ms
 *                  (llama.cpp: prefill of the uncached prompt); ttft beyond
 *                  server = the median over requests of the client's TTFT
 *                  minus it: the network, the server's HTTP layer and queue
 *                  before it timed, and the client.
 *  cache share     sum of cached_tok over sum of usage prompt tokens, over the
 *                  requests that said both: prompt tokens served from the
 *                  server's prefix cache. A sweep's prompts are fresh unless
 *                  its scenario shares them: a share above FIT_CACHE_NOTE_FRAC
 *                  is noted (TTFT then measures the cache, not prefill). Below
 *                  it: a chat template's opening, the same for every request
 *                  (~10 tokens), is served from the cache by servers that cache
 *                  per token (llama.cpp).
 *  prompt asked    the prompt length the run asked in tokens when it built
 *                  synthetic prompts without a tokenizer (words = tokens / 1.33):
 *                  beside the server's mean prompt tokens, a drift over
 *                  FIT_PROMPT_EST_DRIFT_FRAC is noted as an estimate (give
 *                  --tokenizer for exact lengths).
 *  cut short       (not in a trace replay, whose rows ask their own lengths)
 *                  requests that returned fewer completion tokens than the run
 *                  asked (request.max_tokens) while asking the server to ignore
 *                  EOS (so a "stop" is the server's), or that said "length"
 *                  short of max_tokens (a server limit: context, slot size);
 *                  counted and named per level, and noted. */
#define FIT_CACHE_NOTE_FRAC 0.10
#define FIT_PROMPT_EST_DRIFT_FRAC 0.05

/* GPU figures and diagnosis (fit_level.gpu_*, .diagnosis), from GPU
 * telemetry among the metric records: loadlaw's own NVML sampler (`sweep
 * --gpu`, names nvml_*) or a scraped DCGM exporter (DCGM_FI_*); per figure
 * NVML when the level has it, else DCGM, never both added.
 *  power, limit    mean over the scrapes in the level's steady windows (the
 *                  whole level when it has none) of the scrape's power summed
 *                  over GPUs (W), and of the enforced power limit summed the
 *                  same way; power_frac = power / limit.
 *  SM, tensor,     the same scrapes' mean over GPUs of DCGM_FI_PROF_SM_ACTIVE,
 *  DRAM activity   _PIPE_TENSOR_ACTIVE, _DRAM_ACTIVE (NVML: the GPM metrics
 *                  SM_UTIL, ANY_TENSOR_UTIL, DRAM_BW_UTIL / 100), 0..1.
 *                  NVML's "utilization" (time any kernel ran) is not SM
 *                  activity and is never used for it.
 *  energy          the energy counter (mJ) differenced per GPU over the span
 *                  of the steady windows as the server figures' counters are
 *                  (a drop is a reset), summed over GPUs; J per token = that
 *                  energy / the tokens of every stream that arrived after the
 *                  counter's first sample and up to its last. Power samples are
 *                  1 s averages and never enter it.
 *  waiting growth  the waiting gauge (server figures) over the whole level:
 *                  mean of the last third of its scrapes minus mean of the
 *                  first third (NAN with fewer than 3 scrapes).
 * The diagnosis, first rule that holds, in this order:
 *  latency-bound   SM >= FIT_DIAG_SM_BUSY, tensor and DRAM < FIT_DIAG_LOW, and
 *                  power < FIT_DIAG_POWER_LOW of the limit: SMs wait on
 *                  launches and small per-head work (the story: 340 W of 600 W);
 *  compute-bound   tensor >= FIT_DIAG_TENSOR_HIGH and power >= FIT_DIAG_POWER_CAP
 *                  of the limit;
 *  bandwidth-bound DRAM >= FIT_DIAG_DRAM_PEAK;
 *  admission-bound the server's waiting requests grew by >= FIT_DIAG_WAIT_GROWTH
 *                  across the level (the server, not the GPU, holds them back);
 *  "-"             none held; diagnosis_why says why (no GPU data, or the
 *                  figures that missed). A figure that is absent fails its rule. */
#define FIT_DIAG_SM_BUSY 0.8
#define FIT_DIAG_LOW 0.3
#define FIT_DIAG_POWER_LOW 0.7
#define FIT_DIAG_TENSOR_HIGH 0.5
#define FIT_DIAG_POWER_CAP 0.9
#define FIT_DIAG_DRAM_PEAK 0.7
#define FIT_DIAG_WAIT_GROWTH 1.0
typedef enum fit_diag {
    FIT_DIAG_NONE = 0,
    FIT_DIAG_LATENCY,
    FIT_DIAG_COMPUTE,
    FIT_DIAG_BANDWIDTH,
    FIT_DIAG_ADMISSION,
} fit_diag;
/* "-" | "latency-bound" | "compute-bound" | "bandwidth-bound" | "admission-bound" */
const char *fit_diag_name(fit_diag d);
/* The rule above in one line, as `loadlaw fit` and the report print it. */
const char *fit_diag_rule(void);

typedef struct fit_level {
    int level, concurrency, closed_loop, interrupted;
    int64_t start_ns, end_ns;
    double duration_s;
    size_t n_requests, n_ok, n_failed, n_warmup;
    size_t n_excluded_requests;   /* failed + warmup (unless included) */
    size_t n_samples, n_steady_samples, n_steady_points;
    size_t n_samples_after_cut;   /* interrupted: samples after the last full
                                   * occupancy, dropped (timeline incomplete) */
    double tokens;                /* all tokens received in the level */
    double whole_tok_per_s;       /* tokens / (end - start) */
    double steady_tok_per_s;      /* see header comment; NAN if no steady sample at N = C */
    double steady_step_ms;        /* median ms per token of steady samples at N = C
                                   * (the typical step; pauses do not move it) */
    double steady_s;              /* total length of steady windows */
    double steady_tok_per_s_ci[2];/* 95%; header comment */
    double predicted_tok_per_s;   /* 1000*C/(a + b*C) from the law; closed
                                   * loop only (NAN otherwise or without a law) */
    double error_rel;             /* steady/predicted - 1 */
    double error_rel_ci[2];       /* 95%; covers 0 when law and throughput agree */
    int ramp_reached;             /* D reached C */
    double ramp_s;                /* NAN if not reached or open loop */
    double ramp_tokens;           /* tokens that arrived during the ramp */
    /* Requests and latencies (definitions: "Per-level figures" below). */
    size_t n_sent;                /* measured (non-warmup) requests that finished */
    size_t failed_by_class[LL_ERRC__COUNT]; /* measured requests, by class */
    size_t n_sent_failed;         /* measured requests that failed: the sum of failed_by_class */
    fit_dist ttft, ttfa, tpot, itl, e2e;    /* ok, measured requests */
    fit_dist client_lag, ttft_sched, e2e_sched; /* open loop only (n = 0 else) */
    int64_t think_tok, answer_tok;           /* ok, measured requests, from the streams */
    int64_t usage_completion_tok;            /* the servers' usage, ok measured requests */
    double mean_think_tok_per_s, mean_answer_tok_per_s; /* measured requests over duration_s */
    double output_tok_per_s, req_per_s;      /* every ok request (warmup too) over duration_s */
    double burst_gap_frac;        /* share of this level's step samples (ok,
                                   * non-warmup requests, during decode) whose
                                   * gap is under burst_gap_ms: a client that
                                   * fell behind reads several steps' chunks in
                                   * one burst, stamped microseconds apart. NAN
                                   * with fewer than FIT_BURST_MIN_SAMPLES. */
    double burst_gap_ms;          /* the bound: a tenth of the level's 90th-
                                   * percentile ms per token (NAN likewise) */
    /* Did the client set the pace? (FIT_CLIENT_*) From level_end "client"
     * and the level's gaps; NAN where the records do not say. */
    int client_bound;             /* one of the signs below held */
    double client_busy_frac;      /* busiest worker thread's CPU time / level wall time */
    double client_events_per_read;/* token-carrying chunks per socket read with data */
    double client_gap_vs_step;    /* median ITL / the engine's step at C (engine step
                                   * records, else the run line's law) */
    /* Prompt length drift (ok measured requests): mean prompt_tok_target of
     * those built to a length, against the mean usage.prompt_tokens the
     * server reported; NAN when absent. */
    double prompt_tok_target_mean, prompt_tok_server_mean;
    /* What the server said in its responses ("The server's own per-request
     * figures"); ok measured requests; NAN / 0 where none said it. */
    size_t server_timed;          /* requests with the server's own timing */
    double server_tpot_ms;        /* p50 of the server's per-token decode time */
    double server_prefill_ms;     /* p50 of its prompt processing (llama.cpp prompt_ms) */
    double server_ttft_ms;        /* p50 of its TTFT: vLLM's own, else queue + prefill */
    double ttft_beyond_server_ms; /* p50 over requests of client TTFT - the server's */
    size_t n_cached_said;         /* requests that said their cached prompt tokens */
    double cache_share;           /* their cached tokens over their prompt tokens */
    double prompt_tok_asked;      /* prompts.tokens asked without a tokenizer (built as
                                   * words: an estimate); NAN otherwise */
    size_t n_cut_short;           /* ended before max_tokens, not by the client's asking */
    char cut_short_why[96];       /* their finish reasons, "stop x2, length x1" */
    /* Requests whose token counts were not the stream's own (records.h
     * ll_counts), ok measured ones: how many, what their streams alone
     * counted, and the counts recorded (the usage attributed, or the
     * tokenizer's), which the gaps use. */
    size_t n_counts_attributed, n_counts_tokenizer;
    int64_t counts_stream_tok, counts_recorded_tok;
    /* Server figures (header comment "Server figures"), from the scraped
     * /metrics (metric records); NAN where the server did not say. */
    size_t server_scrapes;        /* scrapes of the running gauge in the steady windows */
    double server_n;              /* mean running requests (summed over engine/dp labels) */
    double server_waiting;        /* mean waiting requests, same scrapes */
    double server_step_ms;        /* mean step on the server's clock */
    double server_tok_per_step;   /* vLLM, llama.cpp: requests (tokens) per engine iteration */
    /* The chosen model at this level (fit.h "The chosen model"): the mean K
     * of its steady steps at N = C, the model's throughput there, and the
     * measured steady throughput's error against it; NAN when not known. */
    double k_mean, model_pred_tok_per_s, model_error_rel;
    /* Early against late tokens (fit.h "Step time against position"): the
     * mean step (ms per token) of the first and last quarter of positions,
     * over the level's steady samples (closed loop: at N = C), and over all
     * its samples (steps shared with prefill too); NAN when a quarter has
     * none. pos_max_tok: the largest position seen. */
    double pos_max_tok, early_ms, late_ms, early_all_ms, late_all_ms;
    int server;                   /* ll_srv of these figures, -1 when none */
    double server_gen_tok_s;      /* generated tokens per second, the server's counter */
    double server_cache_share;    /* prompt tokens served from the prefix cache, 0..1 */
    int server_n_disagrees;       /* closed loop: |server_n - C| > FIT_SERVER_N_REL*C + FIT_SERVER_N_ABS */
    double server_stale_s;        /* SGLang: longest span gen_throughput kept one value
                                   * while the level ran */
    double server_waiting_growth; /* "GPU figures and diagnosis": NAN without 3 scrapes */
    /* GPU figures ("GPU figures and diagnosis"); NAN where nothing said. */
    size_t gpu_scrapes;           /* scrapes of power or activity in the steady windows */
    double gpu_power_w, gpu_power_limit_w, gpu_power_frac;
    double gpu_sm_active, gpu_tensor_active, gpu_dram_active; /* 0..1, mean over GPUs */
    double gpu_energy_j;          /* counter difference, summed over GPUs */
    double gpu_j_per_tok;         /* gpu_energy_j / tokens over the counter's span */
    fit_diag diagnosis;
    char diagnosis_why[112];      /* the figures behind it, or why there is none */
    /* time series for plots */
    size_t n_phase;
    fit_phase_point *phase;       /* P(t), D(t) change points */
    size_t n_windows;
    fit_window *windows;          /* steady windows */
    int64_t rate_t0_ns, rate_bin_ns;
    size_t n_rate_bins;
    double *think_tok_per_s, *answer_tok_per_s; /* (n_rate_bins) */
} fit_level;

/* Per turn of multi-turn sessions (load.sessions; turns.c): for each level
 * and turn k, the level's measured requests that finished ok as turn k of a
 * conversation (records' "turn"), with each request's TTFT and TPOT as
 * fit_request_latency_ms defines them (the one definition): TTFT p50 and
 * p90, TPOT p50; the mean prompt tokens (the server's usage where it said,
 * else the client's count), and the cached share: the cached tokens over
 * the prompt tokens of those whose server said its cached tokens (NAN when
 * none did). A later turn resends every turn before it, so a server's prefix
 * cache can serve all of that: the share rises and TTFT falls with the turn
 * where it does. */
typedef struct fit_turn {
    int level, concurrency, turn;
    size_t n;
    double ttft_p50_ms, ttft_p90_ms, tpot_p50_ms; /* NAN with no sample */
    double prompt_tok_mean, cache_share;
} fit_turn;

typedef struct fit_result {
    fit_law law;                  /* THE answer: trimmed WLS on steady steps, the mean step */
    const char *law_n;            /* whose N the law's x is: "client" (D) | "server" */
    fit_law law_other;            /* the same fit against the other N ("The law
                                   * against the server's N"); ok = 0 without
                                   * server metrics or too few steps they describe */
    size_t law_server_scrapes;    /* scrapes of the running gauge inside the levels:
                                   * where the server's N comes from */
    fit_law ols;                  /* OLS on the same points */
    fit_law naive;                /* OLS on every raw gap, steady or not: what
                                   * ignoring the phases would report */
    fit_law engine;               /* engine step records with prefill_tok == 0
                                   * (ok = 0 when the run has none) */
    int has_truth;                /* run line carried the synthetic law */
    double truth_a_ms, truth_b_ms;
    double time_scale;            /* fit_run_info.time_scale; NAN without a truth */
    char engine_law_spec[64];     /* the law as written, formatted from the run
                                   * line's data: a/time_scale "+" b/time_scale
                                   * "n" ("52+30n"); "" without a truth */
    double asymptote_tok_per_s;   /* 1000 / b_ms; NAN (JSON null) unless
                                   * fit_law_slope_resolved(&law) */
    double n_half;                /* a / b; NAN likewise */
    fit_model_check model;
    int model_worst_level;        /* the level the chosen model misses most; -1 none */
    size_t n_levels;
    fit_level *levels;
    size_t n_samples;
    fit_sample *samples;          /* every step sample: by level, then stream by
                                   * stream in time order */
    /* what was left out, and why */
    size_t n_requests, n_failed, n_warmup, n_no_tokens;
    size_t n_empty_chunks;        /* chunks carrying no token, skipped */
    size_t n_truncated_lines;
    size_t n_bad_requests;        /* request records without usable times */
    size_t n_rejected_records;    /* records the reader rejected */
    size_t n_out_of_range;        /* values out of range in them */
    size_t n_clamped;             /* request times clamped (fit_run_info) */
    size_t n_trimmed;             /* law points left out as outliers */
    int law_client_bound;         /* a level whose steps made the law was client-bound
                                   * (fit_level.client_bound): not the server's law */
    char no_law[200];             /* why there is no law ("" when law.ok) */
    size_t n_notes;
    char **notes;                 /* one line each */
    size_t n_turns;               /* per-turn figures (fit_turn); 0 without sessions */
    fit_turn *turns;              /* by level, then turn */
} fit_result;

/* The per-turn table (fit_turn) as `loadlaw fit` and the sweep print it;
 * nothing without sessions. */
void fit_print_turns(FILE *f, const fit_result *r);
/* "turns":[{"level","concurrency","turn","n","ttft_p50_ms","ttft_p90_ms",
 * "tpot_p50_ms","prompt_tok_mean","cache_share"}] into o (fit --json,
 * summary.json); nothing without sessions. 0 or LL_ENOMEM. */
int fit_json_turns(cJSON *o, const fit_result *r);

int fit_analyze(const fit_run *run, const fit_options *opt, fit_result **out,
                char *err, size_t errlen);
void fit_result_free(fit_result *r);
/* fit_load_run then fit_analyze: both set, or both NULL and the first
 * error's code and message. */
int fit_open(const char *dir, const fit_options *opt, fit_run **run, fit_result **res, char *err,
             size_t errlen);

/* The --json object: {"law":{"a_ms","b_ms","a_ci_ms":[lo,hi],"b_ci_ms":[lo,hi],
 * "r2","n_samples","model","a_se_ms","b_se_ms","cov_ab_ms2","t_crit",...},
 * "asymptote_tok_per_s", "n_half", "truth":{"a_ms","b_ms","time_scale","engine_law"},
 * "law_client_bound", "no_law" (null with a law, else why not),
 * "levels":[{"concurrency","steady_tok_per_s","predicted_tok_per_s","ramp_s",
 * "burst_gap_frac","burst_gap_ms","client_bound","client_busy_frac",
 * "client_events_per_read","client_gap_vs_step","prompt_tok_target_mean",
 * "prompt_tok_server_mean","n_counts_attributed","n_counts_tokenizer",
 * "counts_stream_tok","counts_recorded_tok","pos_max_tok","early_ms","late_ms",
 * "early_all_ms","late_all_ms" (step against position), the server_* and
 * (fit_level_gpu_json) gpu_* / diagnosis keys,...}], "law_n" ("client" | "server"), "law_other" (the
 * law against the other N, null without one), "turns" (multi-turn sessions
 * only: fit_json_turns),
 * ...}. NAN becomes null. Caller frees with cJSON_Delete; NULL on no memory. */
cJSON *fit_result_to_json(const fit_result *r);

/* ---- JSON shapes: fit is their only writer (json.c) ----
 * A law, a level and a latency distribution have one writer each; where the
 * files that hold them spell a shape differently, the style says which
 * spelling (each kept, so no file's keys change):
 *   FIT_JSON_RUN      fit --json, summary.json, the report's data: a
 *                     distribution is {n, p50, p90, p99, mean, max} (the
 *                     object's key names the unit: "ttft_ms"); the full law.
 *   FIT_JSON_SUMMARY  a summary.json level (fit_json_level only).
 *   FIT_JSON_COMPARE  compare --json: a distribution is {n, mean_ms, p50_ms,
 *                     p90_ms, p99_ms, max_ms} (its objects, "ttft_a", name no
 *                     unit); a law is {ok, a_ms, b_ms, a_ci_ms, b_ci_ms, r2,
 *                     asymptote_tok_per_s}.
 *   FIT_JSON_PLAN     plan --json's law: {a_ms, b_ms, a_se_ms, b_se_ms,
 *                     cov_ab_ms2, t_crit}, what its intervals use.
 *   FIT_JSON_CHART    the report page's law: {ok, a, b, a_ci, b_ci, cov_ab,
 *                     t_crit}, the names its script reads.
 * NAN becomes null. Each adds key = the object to parent; 0 or LL_ENOMEM. */
typedef enum fit_json_style {
    FIT_JSON_RUN,
    FIT_JSON_SUMMARY,
    FIT_JSON_COMPARE,
    FIT_JSON_PLAN,
    FIT_JSON_CHART
} fit_json_style;
int fit_json_dist(cJSON *parent, const char *key, const fit_dist *d, fit_json_style style);
/* model: the chosen model's name (FIT_JSON_RUN; NULL leaves it out);
 * asym_tok_per_s: FIT_JSON_COMPARE's asymptote (ignored by the others). */
int fit_json_law(cJSON *parent, const char *key, const fit_law *L, const char *model, double asym_tok_per_s,
                 fit_json_style style);
/* "law" (with the chosen model), "asymptote_tok_per_s", "n_half": the
 * headline of fit --json and summary.json. */
int fit_json_headline(cJSON *o, const fit_result *r);
/* One level: FIT_JSON_RUN, fit --json's element of "levels" (planned
 * unused); FIT_JSON_SUMMARY, summary.json's: level, concurrency, mode, what
 * the run planned (planned: rate_per_s, n_requests, warmup; null when NULL),
 * interrupted, then fit_json_level_figures. Caller frees with cJSON_Delete;
 * NULL on no memory. */
cJSON *fit_json_level(const fit_level *L, const fit_level_info *planned, fit_json_style style);
/* A level's figures as summary.json holds them (fit.h "Per-level figures":
 * requests by outcome, duration_s, ramp_s, the latency distributions, token
 * counts and rates, steady and predicted tok/s, server_*, fit_level_gpu_json's
 * keys) into o: summary.json's levels and the report data's "figures". */
int fit_json_level_figures(cJSON *o, const fit_level *L);

/* A level's GPU figures and diagnosis into o (gpu_power_w, gpu_power_limit_w,
 * gpu_power_frac, gpu_sm_active, gpu_tensor_active, gpu_dram_active,
 * gpu_energy_j, gpu_j_per_tok, gpu_scrapes, server_waiting_growth,
 * diagnosis, diagnosis_why): the one writer behind fit --json, summary.json
 * and the report. 0 or LL_ENOMEM. */
int fit_level_gpu_json(cJSON *o, const fit_level *L);

/* 1 when the law's N is the server's (fit_options.n_server). */
int fit_law_n_is_server(const fit_result *r);

/* Readable summary: law with CIs, asymptote, N1/2, model check, per-level
 * table, what was excluded. */
void fit_print(FILE *f, const fit_result *r);
/* One line: "step(N) = 5.2003 + 2.99990*N ms  (a 95% [5.1986, 5.2019], b 95%
 * [2.99967, 3.00014]) = 52.003 + 29.9990*N ms at time scale 1 (engine law
 * 52+30n) -> at most 333.3 tok/s, N1/2 = 1.73" (or why there is no law). Each
 * parameter gets the decimals that show its interval's width with two
 * significant digits; the unscaled part appears when the run line carried
 * the bundled engine's law and time scale. */
void fit_print_law_line(FILE *f, const fit_result *r);

/* One engine step as the client sees it (header comment, "One engine step"):
 * steady samples of one level with the same N, the later arrival of each
 * within FIT_STEP_GROUP_FRAC of its own gap after the first one's. */
#define FIT_STEP_GROUP_FRAC 0.5
typedef struct fit_step {
    int64_t t_ns;             /* later arrival of its first sample */
    double n;                 /* N of its samples */
    size_t n_samples;
    double tokens;            /* tokens of its samples */
    double gap_ms;            /* sum of its samples' whole gaps (ms) */
    double ms_per_tok;        /* gap_ms / tokens: its mean ms per token */
    double k;                 /* mean K of its samples (token-weighted) */
} fit_step;
/* The steady samples of r->levels[level_idx] grouped into steps, in time
 * order (only those at N = at_n when at_n > 0). *out: caller frees with free
 * (NULL when there is none). 0 or LL_ENOMEM. */
int fit_level_steps(const fit_result *r, size_t level_idx, double at_n, fit_step **out,
                    size_t *n_out);

/* Step time against position in the request (position.c): a level's
 * samples by their position (fit_sample.pos_tok) in FIT_POS_BINS bins of
 * equal width over [0, pos_max_tok], each bin's mean step the ratio sum of
 * gaps / sum of tokens (the law's mean, header comment). Two series: the
 * steady samples (a closed-loop level's at N = C only, so the batch is the
 * same early and late and what moves the step is the context; an open-loop
 * level's all steady ones) and every sample, steps shared with prefill
 * included. Late tokens slower in steady steps: the step grows with the
 * context (fit.h "The context term"). Early tokens slower over every sample
 * but not in steady steps: they share steps with prefill. fit_level's
 * early_ms and late_ms are the first FIT_POS_BINS/4 bins and the last
 * FIT_POS_BINS/4 together (the first and last quarter of positions); a
 * difference within FIT_POS_SAME_FRAC is read as none. */
#define FIT_POS_BINS 16
#define FIT_POS_SAME_FRAC 0.05
typedef struct fit_pos_bins {
    double pos_max_tok;       /* largest position among the level's samples; NAN with none */
    double width_tok;         /* (pos_max_tok + 1) / FIT_POS_BINS: bin b holds
                               * positions in [b*width, (b+1)*width) */
    double steady_ms[FIT_POS_BINS], all_ms[FIT_POS_BINS]; /* NAN when a bin is empty */
    double steady_tok[FIT_POS_BINS], all_tok[FIT_POS_BINS]; /* tokens behind each */
    double early_ms, late_ms, early_all_ms, late_all_ms;  /* fit_level's figures */
} fit_pos_bins;
/* The bins of r->levels[level_idx] (the figures in fit_level come from the
 * same code). */
void fit_level_position(const fit_result *r, size_t level_idx, fit_pos_bins *out);

/* ---- Capacity plan (plan.c) ----
 *
 * What a run's law and measured levels say about serving at other loads
 * (`loadlaw plan`). One definition per figure:
 *  max C for a per-token objective S (ITL or TPOT: the law is the mean step,
 *          the mean ms per token at N): the largest N with a + b*N <= S,
 *          N* = floor((S - a)/b). Its 95% interval solves the mean line's
 *          band (fit_law_mean_ci) for N: the lower end is where the band's
 *          upper edge reaches S, the upper end where its lower edge does
 *          (Fieller's interval for the ratio (S - a)/b, which, unlike the
 *          delta method, is asymmetric where b is poorly known and says
 *          "unbounded" when b's interval reaches 0). n_real and its interval
 *          are the real-valued crossings; n_star and n_star_ci their floors.
 *          Extrapolated when N* exceeds the largest measured C.
 *  at C    step = a + b*C with the band at C; throughput 1000*C/step tok/s
 *          and per-user 1000/step tok/s, their intervals the band's edges
 *          mapped through the same formulas (NAN where the band reaches 0).
 *          Extrapolated when C exceeds the largest measured C.
 *  TTFT at C  the measured closed-loop levels' TTFT p50 and p90 (fit_level.ttft;
 *          the first level of each C), linearly interpolated in C between the
 *          two measured C around it; outside the measured range none is
 *          given (ttft_known = 0 and ttft_note says why): the prefill ramp is
 *          not a straight line to extrapolate.
 *  goodput per measured level: its measured (non-warmup) requests that
 *          finished ok AND met every objective given, per second of the
 *          level's wall time (fit_level.duration_s), as DistServe and
 *          SGLang/vLLM's `--goodput` count it: a request meets TTFT when its
 *          own TTFT <= the objective, TPOT when its own TPOT (fit_request_ms)
 *          does (a single-token request has no TPOT and meets it, as those
 *          tools take its TPOT as 0), E2E likewise. A failed request meets
 *          nothing. The best level is the one with the highest goodput (the
 *          lower C on a tie). */

/* One request's latencies, as "Per-level figures" defines them (figures.c
 * computes the level's dists from these): TTFT send -> first token, TPOT
 * (last token - first token) / (tokens - 1), E2E send -> end; ms, NAN where
 * the request gives none (no token; TPOT: one token or a zero span). */
typedef struct fit_request_ms {
    double ttft_ms, tpot_ms, e2e_ms;
} fit_request_ms;
void fit_request_latency_ms(const fit_request *q, fit_request_ms *out);

/* Objectives; NAN (or <= 0) = not given. */
typedef struct fit_slo {
    double ttft_ms, tpot_ms, e2e_ms;
} fit_slo;
/* 1 when q finished ok and meets every objective given (block comment above). */
int fit_request_meets(const fit_request *q, const fit_slo *slo);
/* The measured requests of the level with records index `level`: how many
 * (*n_measured) and how many meet slo (*n_good). */
void fit_level_goodput_count(const fit_run *run, int level, const fit_slo *slo,
                             size_t *n_measured, size_t *n_good);

typedef struct fit_plan_options {
    fit_slo slo;              /* tpot_ms also gives the max-C figure */
    const int *at_c;          /* concurrencies to plan at; NULL/0: the measured ones */
    size_t n_at_c;
    double context_tok;       /* a model with a context term: tokens of context per
                               * request to plan at (--context); <= 0 or NAN: the run's mean */
} fit_plan_options;

typedef struct fit_plan_at {
    int concurrency;
    int extrapolated;         /* C > max_measured_c */
    double step_ms, step_ci_ms[2];
    double tok_per_s, tok_per_s_ci[2];
    double user_tok_per_s, user_tok_per_s_ci[2];
    int ttft_known;           /* 0: outside the measured range (ttft_note) */
    int ttft_interpolated;    /* 1: between two measured C; 0: a measured C */
    double ttft_p50_ms, ttft_p90_ms; /* NAN when not known */
    char ttft_note[96];
} fit_plan_at;

typedef struct fit_plan_goodput {
    int level, concurrency;
    size_t n_measured, n_good;
    double duration_s;
    double good_frac;         /* n_good / n_measured (NAN with none) */
    double goodput_req_per_s; /* n_good / duration_s */
} fit_plan_goodput;

typedef struct fit_plan {
    fit_law law;              /* the law planned on (ok = 1): the result's line, or the
                               * context model at context_tok as a line in N (its a, its
                               * b + c*context_tok/1000, their HC3 covariance). Other
                               * models are planned on by fit_model_predict at K =
                               * N*context_tok, intervals by fit_model_fit_ci */
    fit_model_kind model;     /* the chosen model planned on (fit.h "The chosen model") */
    const fit_model_check *check; /* the result's model check (borrowed) */
    double context_tok;       /* a model with a context term: tokens per request planned
                               * at; NAN otherwise */
    fit_slo slo;
    int max_measured_c;       /* largest closed-loop C measured, or the largest
                               * N an open level's steady steps reached */
    int has_max_c;            /* a TPOT objective was given */
    double n_real, n_real_ci[2]; /* (S - a)/b and its interval; hi = INFINITY when unbounded */
    long n_star, n_star_ci[2];/* floors; -1 when not even N = 0 meets it */
    int n_star_extrapolated;
    size_t n_at;
    fit_plan_at *at;
    size_t n_goodput;         /* 0 without objectives */
    fit_plan_goodput *goodput;/* per measured level, in the result's order */
    int best_goodput_idx;     /* into goodput; -1 when none (no level had a good request) */
} fit_plan;

/* The run's mean context per running request: each closed-loop level's
 * mean K over its C, averaged over levels; NAN when none. */
double fit_context_per_request(const fit_result *r);

/* Plans on the chosen model: the line and the context model with their
 * intervals (Fieller, as the line's); a knee, buckets or a curve by their
 * point estimates (N where the model's step reaches the objective, searched
 * in steps of 0.01), without intervals. */
/* LL_EINVAL (message in err, the result's no_law) when res has no law;
 * LL_ENOMEM. *out: caller frees with fit_plan_free. */
int fit_plan_compute(const fit_run *run, const fit_result *res, const fit_plan_options *opt,
                     fit_plan **out, char *err, size_t errlen);
void fit_plan_free(fit_plan *p);
/* {"law":{a_ms,b_ms,a_se_ms,b_se_ms,cov_ab_ms2,t_crit}, "max_measured_c",
 * "objectives":{ttft_ms,tpot_ms,e2e_ms}, "max_c":{"tpot_slo_ms","n","n_ci",
 * "n_real","n_real_ci","interval":"fieller","extrapolated"} | null,
 * "at":[{concurrency,extrapolated,step_ms,step_ci_ms,tok_per_s,tok_per_s_ci,
 * user_tok_per_s,user_tok_per_s_ci,ttft_p50_ms,ttft_p90_ms,ttft_interpolated,
 * ttft_note}], "goodput":[{level,concurrency,n_measured,n_good,good_frac,
 * goodput_req_per_s}], "best_goodput_concurrency" (null when none)}. NAN and
 * an unbounded end become null. Caller frees with cJSON_Delete; NULL on no memory. */
cJSON *fit_plan_to_json(const fit_plan *p);
/* The tables: max C, the planned C, goodput (the law line itself is
 * fit_print_law_line's, printed before it by `loadlaw plan`). */
void fit_plan_print(FILE *f, const fit_plan *p);
/* ---- end capacity plan ---- */

/* ---- A/B comparison (compare.c, compare_paired.c) ---- */
/* The latencies of one level as fit_level holds them (ttft, ttfa, itl). */
typedef struct fit_level_latency {
    fit_dist ttft, ttfa, itl;
} fit_level_latency;
/* The samples behind fit_level's ttft, ttfa and itl, computed by the same
 * code (figures.c) from the same requests, so out equals those dists exactly.
 * level: the level index as in the records. Optionally hands back the sorted
 * samples (caller frees each *_out with free; pass NULL to skip). */
int fit_level_latency_get(const fit_run *run, int level, fit_level_latency *out,
                          double **ttft_out, double **ttfa_out, double **itl_out,
                          size_t *n_itl_out, char *err, size_t errlen);

/* Comparison of run B against run A (the baseline).
 *
 * Levels are matched by load: closed-loop levels by concurrency C, open-loop
 * levels by request rate (and their cap on in-flight requests); closed ones
 * come first by C, then open ones by rate. Per level the steady rate of each
 * run is the ratio estimator
 *     X = c * sum tok / sum time
 * over the gaps between consecutive chunks of its ok, non-warmup requests that
 * lie wholly inside the level's steady windows (P = 0, D = C), with c = C for
 * a closed level (X is then fit_level.steady_tok_per_s) and c = 1 for an open
 * one (X is the per-stream decode rate at that offered load, over every
 * steady step whatever its N: the ratio is how much faster B decodes at the
 * same arrival rate).
 *
 * Unpaired (a sequential A/B, or two unrelated runs: the first level of each
 * key in each run): the 95% interval of X_B / X_A is a percentile bootstrap
 * over R resamples (GSL mt19937, fixed seed) that resamples engine steps:
 * each step (fit_level_steps, "One engine step") is one unit (tokens, time).
 * The C requests of a level share every step, so resampling requests one by
 * one would treat C copies of one step as independent and give intervals
 * about sqrt(C) too narrow. A level with no steady window falls back to one
 * unit per request (its decode span, first token -> end) and says so
 * (steady = 0). Fewer than FIT_COMPARE_MIN_UNITS units on either side: no
 * interval (NAN ends, so a gate fails): a bootstrap over one unit repeats
 * the estimate R times, and over a handful it has almost nothing to vary.
 * R below FIT_COMPARE_MIN_RESAMPLES is refused (the 2.5% tail of a 95%
 * interval needs some resamples in it).
 *
 * Paired (an interleaved A/B: the level records carry "pair", docs/records.md):
 * the levels of one key pair up by pair number, A_i with B_i from the same
 * ABBA block, i = 1..m. Per pair y_i = log(X_B,i / X_A,i), with its own
 * within-level variance v_i = var(log X_A,i) + var(log X_B,i) by the delta
 * method over its steps (ratio estimator: var(log X) = sum (tok_k - X' t_k)^2
 * / (n (n-1) mean(t)^2 X'^2), X' = sum tok / sum t). The estimate is
 * exp(mean y_i), equal weights (see compare.c for why), and its interval
 * exp(mean y +- q * sqrt(V)) with
 *     V = max(s_y^2, mean v_i) / m,
 * q = the t quantile with m - 1 df (the normal one when m = 1; s_y^2: the
 * sample variance of the y_i, 0 when m = 1; mean v_i over the pairs whose v_i
 * is known: a side of one step has none; one pair without a known v_i > 0
 * has no interval). The pairs' spread
 * holds both the step noise and what moved one pair against another (load
 * that came and went, drift); the step noise is the floor when the pairs
 * agree better than their steps allow. between_var = max(0, s_y^2 - mean v_i)
 * is the part the step noise does not explain. ratio_method says "paired"
 * or "bootstrap"; pair_ratio holds each pair's X_B,i / X_A,i.
 *
 * The slope ratio: the ratio B/A of the two laws' b (fit_result.law, the
 * slopes printed beside it, fitted on every level of each run, repeats and
 * all), with a delta-method interval on the log
 * scale, se(log r)^2 = (se_bA/b_A)^2 + (se_bB/b_B)^2 (slope_method "delta").
 * When a run has no law, it falls back to each run's steady step time per
 * level (1000 * time / tok, ms) against C, OLS over the common levels, with a
 * percentile bootstrap resampling every level's steps as above
 * (slope_method "bootstrap"; needs two common levels, each with
 * FIT_COMPARE_MIN_UNITS units a side; otherwise "none", no ratio). When a
 * run has a law whose b interval includes 0 (fit_law_slope_resolved), there
 * is no ratio either, "unresolved": a slope that may be 0 divides into
 * anything. The
 * verdict quotes the laws' b (fit_result.law). The latencies (lat_a, lat_b)
 * are copies of each level's fit_level ttft, ttfa and itl (the first level
 * of the key in each run). */
#define FIT_COMPARE_MIN_UNITS 10
#define FIT_COMPARE_MIN_RESAMPLES 200
typedef struct fit_compare_options {
    int n_resamples;          /* default 2000; 0: no intervals, else >= FIT_COMPARE_MIN_RESAMPLES */
    uint64_t seed;            /* default 1 */
    double ci;                /* default 0.95 */
    int resample_requests;    /* 1: one unit per request (its steady tokens and
                               * time) instead of per engine step; default 0,
                               * kept for the coverage check in test_compare */
    int ignore_pairs;         /* 1: compare as unpaired even when the records
                               * pair the levels (tests; default 0) */
} fit_compare_options;
void fit_compare_options_default(fit_compare_options *o);

typedef struct fit_compare_level {
    int concurrency;          /* C; an open level's cap on in-flight (0 = none) */
    int open_loop;            /* 1: an open-loop level, matched by rate */
    double rate_per_s;        /* open loop: the offered rate; NAN when closed */
    int level_a, level_b;     /* level indices in each run's records (the first pair's) */
    int steady;               /* 1: steady windows in both; 0: decode-span fallback */
    size_t n_req_a, n_req_b;  /* requests contributing */
    size_t n_units_a, n_units_b; /* resampling units: steps (or requests when !steady) */
    double tok_per_s_a, tok_per_s_b; /* X of each run (all pairs pooled when paired) */
    double ratio, ratio_ci[2];/* B / A; NAN when a side has no data */
    const char *ratio_method; /* "bootstrap" | "paired" */
    size_t n_pairs;           /* paired: pairs used (0 unpaired) */
    double *pair_ratio;       /* paired: X_B,i / X_A,i per pair, by pair number (owned) */
    double within_var, between_var; /* paired: mean v_i and tau^2 (log scale) */
    double df;                /* paired: t degrees of freedom (INFINITY: normal) */
    fit_level_latency lat_a, lat_b;
    double model_ratio;       /* closed levels: each run's chosen model at C and its
                               * level's mean K, throughput B/A = step A / step B (what
                               * the models predict beside what was measured); NAN
                               * otherwise */
} fit_compare_level;

typedef struct fit_compare {
    fit_law law_a, law_b;     /* copies of each result's law */
    double asym_a_tok_per_s, asym_b_tok_per_s;
    double slope_a_ms, slope_b_ms;         /* the slopes behind slope_ratio */
    double slope_ratio, slope_ratio_ci[2]; /* B / A; NAN when unknown */
    const char *slope_method;              /* "bootstrap" | "delta" | "none" |
                                            * "unresolved" (a law's b interval
                                            * includes 0: no ratio) */
    /* Both runs on the context model (fit.h "The context term"): each term
     * B/A with a delta-method interval from the models' HC3 covariances, log
     * scale; NAN unless both chose it. The per-request term b and the
     * context term c say which part of the step a kernel change moved (a
     * decode-attention rewrite moves c). */
    double ctx_b_ratio, ctx_b_ratio_ci[2], ctx_c_ratio, ctx_c_ratio_ci[2];
    /* Both runs on the same richer model (same terms, same knees): every
     * term B/A the same way (HC3 covariances); n_terms = 0 otherwise, and a
     * ratio is NAN where a side's coefficient is not positive (a slope
     * change at a knee may be negative). */
    fit_model_kind terms_model;
    size_t n_terms;
    fit_term term[FIT_MODEL_MAX_TERMS];
    double term_knee[FIT_MODEL_MAX_TERMS];
    double term_ratio[FIT_MODEL_MAX_TERMS], term_ratio_ci[FIT_MODEL_MAX_TERMS][2];
    double ci;
    int n_resamples;
    uint64_t seed;
    int paired;               /* some level was compared by pairs */
    size_t n_levels;
    fit_compare_level *levels;/* closed by C ascending, then open by rate */
    char verdict[320];        /* "B is 2.6x A at C=64 [2.4, 2.8]; slope 30.1 -> 10.4 ms per request" */
} fit_compare;

/* The paired interval above on given per-pair log-ratios y[0..m) and their
 * within-level variances v[0..m) (a NAN or negative v is unknown: the floor
 * is the mean of the known ones; none known gives no floor): estimate (exp
 * of the mean), interval at level ci, and the variance parts and df. One
 * pair without a positive known v has no interval (NAN ends, NAN df).
 * LL_EINVAL when m == 0. Pure; exposed for tests (simulated coverage). */
int fit_paired_ratio(const double *y, const double *v, size_t m, double ci, double *ratio, double ratio_ci[2],
                     double *within_var, double *between_var, double *df);

/* ra/rb: fit_analyze results of a/b (they give the laws and steady windows).
 * LL_EINVAL when the runs share no level (closed C or open rate). *out: caller
 * frees with fit_compare_free. */
int fit_compare_runs(const fit_run *a, const fit_result *ra, const fit_run *b,
                     const fit_result *rb, const fit_compare_options *opt, fit_compare **out,
                     char *err, size_t errlen);
void fit_compare_free(fit_compare *c);
/* Index into c->levels of the closed-loop level of concurrency C, or -1. */
int fit_compare_find(const fit_compare *c, int concurrency);
/* The level the default verdict judges: the highest common closed-loop C
 * (the last open level when there is no closed one). */
size_t fit_compare_default_level(const fit_compare *c);
/* Rewrite c->verdict for level index i (the default verdict uses the highest
 * common closed-loop level). */
void fit_compare_set_verdict(fit_compare *c, size_t i);
/* {"levels":[{"concurrency","tok_per_s_a","tok_per_s_b","ratio","ratio_ci":[lo,hi],
 * "steady","n_req_a",...,"pair_ratio":[...],"ttft_a":{n,mean_ms,p50_ms,...},...}],
 * "law_a","law_b" (fit_json_law, FIT_JSON_COMPARE),"slope_ratio","slope_ratio_ci",
 * "slope_method","ci","n_resamples","paired","verdict"}: `loadlaw compare
 * --json` and the comparison page's data. NAN becomes null. Caller frees with
 * cJSON_Delete; NULL on no memory. Tables: reports/report.h (rpt_compare_print). */
cJSON *fit_compare_to_json(const fit_compare *c);
/* ---- end A/B comparison ---- */

/* ---- outputs comparison (fit/outputs.c) ----
 * Did B produce what A produced? For two runs recorded with --record-outputs
 * (records.h ll_rec_outputs), the measured ok requests of each level are
 * matched by prompt key (the k-th request of a key in A with the k-th in B;
 * levels by closed-loop C or open-loop rate) and each pair compared on the
 * most exact thing both sides said: token ids, else token texts (from
 * logprobs), else the output text's hash (identical or not, no position).
 * A pair that differs has its first divergence position; where both sides
 * sent top-k alternatives there, each side's token is looked up in the
 * other's top-k (the check vLLM's tests use: a tie flipped by a different
 * summation order passes, a wrong kernel does not). Over the common prefix
 * the chosen tokens' |delta logprob| is averaged. */
typedef struct fit_outputs_example {
    int found;
    char key[48];
    size_t pos;                       /* first divergence (tokens) */
    char tok_a[64], tok_b[64];        /* the tokens there ("(end)" past a side's last) */
} fit_outputs_example;

typedef struct fit_outputs_level {
    int concurrency, open_loop;
    double rate_per_s;
    size_t n_pairs;                   /* matched pairs compared */
    size_t n_identical;
    size_t n_diverged;                /* n_pairs - n_identical */
    size_t n_positioned;              /* diverged pairs with a token position */
    double pos_p10, pos_p50;          /* of those positions; NAN when none */
    size_t n_topk_known;              /* diverged pairs with both sides' top-k at the position */
    size_t n_a_in_topb, n_b_in_topa;  /* A's token within B's top-k, and B's within A's */
    size_t n_topk_ok;                 /* both: passes the top-k check */
    double mean_abs_dlp;              /* over the common prefixes' tokens; NAN when no logprobs */
    size_t n_lp_tok;                  /* tokens in that mean */
    double share_ok;                  /* (identical + top-k ok) / pairs; NAN when no pair */
    fit_outputs_example example;      /* the first pair that failed the check */
} fit_outputs_level;

typedef struct fit_outputs {
    size_t n_levels;
    fit_outputs_level *levels;        /* in A's order */
    fit_outputs_level all;            /* every level together */
    /* what could not be compared, and why */
    size_t n_req[2];                  /* measured ok requests read, A and B (0 for a run
                                       * whose run line says it recorded no outputs: not read) */
    size_t n_with_outputs[2];         /* of those, with an outputs member */
    size_t n_with_lp[2], n_with_top[2], n_with_ids[2];
    size_t n_unmatched[2];            /* no request of the same key and level on the other side */
    size_t n_text_only;               /* pairs compared by text hash only (no token position) */
    size_t n_nothing;                 /* pairs where the sides share no kind of output */
} fit_outputs;

/* Read RUN_A and RUN_B (run directories or records.jsonl files) and compare
 * their outputs. *out: caller frees with fit_outputs_free; a run without
 * recorded outputs is not an error (n_with_outputs says so). LL_EIO /
 * LL_EPARSE / LL_EINVAL from the reader, LL_ENOMEM; err says which. */
int fit_outputs_compare(const char *run_a, const char *run_b, fit_outputs **out, char *err, size_t errlen);
void fit_outputs_free(fit_outputs *o);
/* Within one run: the requests of closed-loop level C = c_b against those of
 * C = c_a with the same prompt key (do outputs depend on batch size?), as one
 * level reported at c_b. The levels must share prompts (sweep
 * --reuse-prompts). LL_EINVAL when the run recorded no outputs or lacks
 * either level (err says which); else as fit_outputs_compare. */
int fit_outputs_compare_levels(const char *run, int c_a, int c_b, fit_outputs **out, char *err, size_t errlen);
/* The level with the lowest share_ok (NULL when no level compared a pair). */
const fit_outputs_level *fit_outputs_worst(const fit_outputs *o);
/* The "outputs" section of `compare --json` (fit/outputs_json.c); NULL on no memory. */
cJSON *fit_outputs_to_json(const fit_outputs *o);
/* The section as text, for compare's tables. */
void fit_outputs_print(FILE *f, const fit_outputs *o);
/* ---- end outputs comparison ---- */

/* ---- decode self-check (fit/check_decode.c) ----
 * `loadlaw check-decode`: each re-scored request's decode-time logprobs
 * (recorded with its tokens) against the same tokens' logprobs from the
 * server's prefill (prompt logprobs), position by position. A healthy server
 * computes the same distribution both ways up to its arithmetic; a decode
 * kernel bug shows as |delta| far beyond it and as greedy tokens that prefill
 * does not rank first. Pure arithmetic: sweep/ does the HTTP. */
typedef struct fit_cd_stats {
    int level, concurrency;           /* level index and its C; -1 for all levels */
    size_t n_req;                     /* requests compared */
    size_t n_pos;                     /* positions with both logprobs */
    size_t n_over;                    /* of those, |delta| > tolerance */
    size_t n_ranked, n_rank1;         /* positions with a prefill rank; of those, rank 1 */
    double sum_abs, max_abs;          /* |decode lp - prefill lp|, nats */
    char worst_key[48];               /* where max_abs is: prompt key, position */
    size_t worst_pos;
    double worst_decode, worst_prefill;
} fit_cd_stats;

typedef struct fit_check_decode {
    double tolerance;                 /* nats */
    double max_over;                  /* the gate: share of positions over tolerance */
    fit_cd_stats all;
    fit_cd_stats *levels;             /* in the order first seen */
    size_t n_levels;
} fit_check_decode;

void fit_cd_init(fit_check_decode *c, double tolerance, double max_over);
/* One request's n positions: decode and prefill logprobs (NAN: not said,
 * the position is skipped) and prefill ranks (0: not said). 0 or LL_ENOMEM. */
int fit_cd_add(fit_check_decode *c, int level, int concurrency, const char *key, const double *decode_lp,
               const double *prefill_lp, const int *rank, size_t n);
double fit_cd_mean_abs(const fit_cd_stats *s);   /* NAN when no position */
double fit_cd_share_over(const fit_cd_stats *s); /* NAN when no position */
/* 1 when positions were compared and the share over tolerance is <= max_over. */
int fit_cd_passed(const fit_check_decode *c);
/* The figures as JSON (caller deletes), NULL on no memory. */
cJSON *fit_cd_to_json(const fit_check_decode *c);
/* Per level and overall, as text. */
void fit_cd_print(FILE *f, const fit_check_decode *c);
void fit_cd_free(fit_check_decode *c);
/* ---- end decode self-check ---- */

#endif
