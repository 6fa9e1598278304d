/* fit_internal.h (internal to fit/): the run's storage, the steps of the
 * analysis and the helpers fit's files share, behind the public headers
 * (fit/include/), which it includes; the thresholds are fit_tuning.h's. */
#ifndef LOADLAW_FIT_INTERNAL_H
#define LOADLAW_FIT_INTERNAL_H

#include "common.h"
#include "dialect.h"
#include "fit.h"
#include "fit_compare.h"
#include "fit_model.h"
#include "fit_outputs.h"
#include "fit_plan.h"
#include "fit_tuning.h"

typedef LL_VEC(fit_level_info) fit_level_info_vec;
typedef LL_VEC(ll_rec_request) fit_rec_request_vec;
typedef LL_VEC(ll_rec_chunk) fit_rec_chunk_vec;
typedef LL_VEC(ll_rec_step) fit_rec_step_vec;
typedef LL_VEC(fit_sample) fit_sample_vec;  /* timeline.c appends, analyze.c owns */
typedef LL_VEC(double) fit_double_vec;
typedef LL_VEC(size_t) fit_size_vec;

/* server.c: what a scraped sample means to the fit: its server and role in
 * common/dialect.h's table, as one int (FIT_SMK); samples the table does not
 * name are not kept. */
#define FIT_SMK_NONE (-1)
#define FIT_SMK(srv, role) ((int)(srv) * (int)LL_ROLE__COUNT + (int)(role))
#define FIT_SMK_SRV(kind) ((ll_srv)((kind) / (int)LL_ROLE__COUNT))
#define FIT_SMK_ROLE(kind) ((ll_srv_role)((kind) % (int)LL_ROLE__COUNT))
typedef struct fit_server_sample {
    int64_t t_ns;
    int kind;                 /* FIT_SMK(server, role) */
    uint32_t series;          /* index into fit_run.series: one (src, name, labels) */
    double value;
} fit_server_sample;
typedef LL_VEC(fit_server_sample) fit_server_sample_vec;
typedef LL_VEC(char *) fit_str_vec;
/* The kind of a sample (name, labels in exposition form); FIT_SMK_NONE when
 * the fit does not use it. */
int fit_server_kind(const char *name, const char *labels);
/* The level's server figures (server.c "Server figures") from the run's
 * metric samples; L's windows, start/end and concurrency must be set. */
void fit_server_level(const fit_run *run, fit_level *L);
/* server.c, shared with gpu.c and analyze_law.c. Over the level's steady
 * windows (the whole level when it has none), or over [t0, t1]: */
/* Mean over the scrapes in L's windows of each scrape's total (avg = 0) or
 * mean (avg = 1) over the samples of kind; *n_out scrapes; NAN when none. */
double fit_server_gauge(const fit_run *run, const fit_level *L, int kind, int avg, size_t *n_out);
/* The increase of a counter kind over [t0, t1], per series with resets,
 * summed over series; the series' spans (last - first sample) summed, and
 * the first/last sample time of any (either may be NULL). NAN when no series
 * has two samples. */
double fit_server_counter(const fit_run *run, int kind, int64_t t0, int64_t t1, int64_t *span_ns,
                          int64_t *first_ns, int64_t *last_ns);
/* A histogram's mean over [t0, t1], times scale (1000: seconds as the
 * server counts them to ms): scale times the increase of srv's sum role
 * over that of its count role; NAN when the count did not grow. */
double fit_server_mean(const fit_run *run, int srv, ll_srv_role sum, ll_srv_role count, int64_t t0, int64_t t1,
                       double scale);
/* server_own.c: the server's own latency, KV-cache and queue figures of L
 * (server_own.c "The server's own latencies"), from server srv's samples. */
void fit_server_own_level(const fit_run *run, fit_level *L, int srv);
/* The server's N over L (start to end) as analyze_law.c "The law against the
 * server's N" reads it: each scrape's total of the running gauge (the first
 * family with any), in time order. *t_out, *v_out: caller frees (NULL when
 * none). 0 or LL_ENOMEM. */
int fit_server_n_series(const fit_run *run, const fit_level *L, int64_t **t_out, double **v_out, size_t *n_out);
/* gpu.c: the level's GPU figures and its diagnosis (gpu.c "GPU figures and
 * diagnosis"); after fit_server_level (it reads the waiting gauge). */
void fit_gpu_level(const fit_run *run, fit_level *L);

/* A request's chunks, in arrival order (load.c "Chunks"): v[0..n), the
 * run's own when it holds them, else read back from the records file into
 * buf. One fit_chunks may be reused request after request (each call
 * replaces v and n); fit_chunks_free lets buf go. */
typedef struct fit_chunks {
    const ll_rec_chunk *v;
    size_t n;
    fit_rec_chunk_vec buf;
} fit_chunks;
/* q's chunks into c; q must be fit_run_request's (or run NULL: q's own).
 * 0, LL_ENOMEM, LL_EIO (the file changed under the run) or LL_EINVAL (q of
 * a paged run's level that is no longer resident: a pointer kept too long). */
int fit_chunks_of(const fit_run *run, const ll_rec_request *q, fit_chunks *c);
void fit_chunks_free(fit_chunks *c);

/* What run-wide figures read of every request, gathered while the run is
 * read (load.c), in file order, so that a paged run need not read its
 * requests again for them: analyze.c count_left_out's counts and
 * analyze_notes.c's note on max_tokens. */
typedef struct fit_run_tally {
    size_t n_requests, n_failed, n_warmup, n_no_tokens;
    size_t n_ok_measured;     /* ok, not warmup */
    size_t n_over_max;        /* of those, got more tokens than max_tokens asked */
    int64_t over_got_tok, over_cap_tok; /* the first furthest over: got, asked */
} fit_run_tally;
const fit_run_tally *fit_run_get_tally(const fit_run *run);
/* The most tokens a request's records say it got: the server's usage, the
 * counts recorded, or what the stream alone counted (a usage that claims
 * fewer than were streamed does not hide them). */
static inline int64_t fit_request_tokens_got(const ll_rec_request *q)
{
    int64_t got = q->think_tok + q->answer_tok;
    if (q->usage_completion > got)
        got = q->usage_completion;
    if (q->stream_think_tok >= 0 && q->stream_answer_tok >= 0 && q->stream_think_tok + q->stream_answer_tok > got)
        got = q->stream_think_tok + q->stream_answer_tok;
    return got;
}

/* A run read whole holds every request and its chunks. Past
 * FIT_RESIDENT_EVENTS chunk events it is paged (load_paged.c): it keeps a
 * 16-byte reference per request line and one level's requests at a time,
 * read back from the file when a request of that level is asked for
 * (fit_run_request), their chunks decoded from the line on each
 * fit_chunks_of. A paged run's requests are indexed level by level in the
 * order of its levels, each level's in file order. The run is passed const
 * everywhere, but that resident level is a cache inside it: a fit_run is not
 * thread-safe (nothing in fit/, reports/ or cli/ shares one between
 * threads), and a request pointer is valid until a request of another level
 * is asked for: keep indices, or work level by level. */
struct fit_paged;
/* fit_load_run with its bounds (tests): the chunk events held before the
 * run is paged (fit_load_run: FIT_RESIDENT_EVENTS; 0 pages every run from
 * its first request), and the engine step records kept (0: the default,
 * FIT_ENGINE_STEPS_KEEP). */
typedef struct fit_load_opts {
    size_t resident_events;
    size_t engine_steps_keep;
} fit_load_opts;
int fit_load_run_opts(const char *path, const fit_load_opts *o, fit_run **out, char *err, size_t errlen);
/* The index range [*i0, *i1) that holds every request of level `level` (its
 * record number): exactly its requests in a paged run, every request in one
 * held whole (callers still check q->level). A loop over one level's span
 * makes no other level resident. */
void fit_run_level_span(const fit_run *run, int level, size_t *i0, size_t *i1);
/* What run-wide loops over one level read of its requests, gathered while
 * the run was read, so that they need not read a paged level back: */
typedef struct fit_level_tally {
    int level;
    int64_t first_chunk_ns, last_chunk_ns; /* its chunks' arrivals (INT64_MAX,
                               * INT64_MIN: none): gpu.c's tokens in a span */
    int max_turn;             /* its highest session turn (0: none): turns.c */
} fit_level_tally;
typedef LL_VEC(fit_level_tally) fit_level_tally_vec;
/* Level `level`'s (its record number); NULL when the run has no such level. */
const fit_level_tally *fit_run_level_tally(const fit_run *run, int level);
/* A paged run's first failure to read a level back (the file changed under
 * it, or memory ran out): its code with the message copied into err; 0 when
 * none (err untouched). */
int fit_run_read_error(const fit_run *run, char *err, size_t errlen);

struct fit_run {
    fit_run_info info;
    fit_level_info_vec levels;
    fit_rec_request_vec requests;  /* held whole: every request, in file order */
    fit_rec_chunk_vec chunks;      /* held whole: every request's chunks */
    struct fit_paged *paged;       /* paged: NULL while held whole */
    fit_run_tally tally;
    fit_level_tally_vec level_tally; /* per level, in no order */
    fit_rec_step_vec steps;        /* the engine's step records: 1 in steps_stride (load.c) */
    size_t steps_seen, steps_stride;
    fit_server_sample_vec server;  /* scraped samples the fit uses, in file (time) order */
    fit_str_vec series;            /* "src\x1fname\x1flabels" per series */
    char *s_version, *s_host, *s_url, *s_model, *s_endpoint, *s_engine, *s_backend,
        *s_scenario, *s_run_json;
};

/* regress.c: y = a + b*x on raw points (robust = 1: the law's trimmed fit,
 * each point weighted by the noise of its x (x values with >= 5 points), HC3
 * errors; else OLS). fit_line_sized: the robust fit with a size per point
 * (NULL = all 1) multiplying its weight: the law's points are engine steps
 * sized by the tokens the client saw of them, so at each N the law is the
 * mean of every token's step, the same ratio as the steady throughput. */
int fit_line(const double *x, const double *y, size_t n, int robust, fit_law *out, char *err, size_t errlen);
int fit_line_sized(const double *x, const double *y, const double *size, size_t n, int robust, fit_law *out,
                   char *err, size_t errlen);

/* analyze_law.c: one engine step as the client sees it ("One engine step"). */
typedef struct fit_step {    /* 40 bytes: kept for every step of the run */
    int64_t t_ns;             /* later arrival of its first sample */
    double n;                 /* N of its samples */
    double gap_ms;            /* sum of its samples' whole gaps (ms) */
    double k;                 /* mean K of its samples (token-weighted) */
    uint32_t tokens;          /* tokens of its samples */
    uint32_t n_samples;
} fit_step;
/* Its mean ms per token. */
static inline double fit_step_ms_per_tok(const fit_step *s) { return s->gap_ms / s->tokens; }
/* The steps of r->levels[level_idx] (reduce.c, kept by fit_analyze): its
 * steady samples grouped in time order, those at N = C only in a closed-loop
 * level with a C; past FIT_STEPS_KEEP steps in the run, 1 in
 * r->kept->step_stride of them (reduce.c "Steps kept"). *out: the result's
 * (NULL when there is none). */
void fit_level_steps(const fit_result *r, size_t level_idx, const fit_step **out, size_t *n_out);

/* naive.c: the naive OLS on every step sample's (N, ms), from the points up
 * to keep of them, from running sums past that (naive.c says how, and how
 * close). */
typedef struct fit_naive {
    size_t keep, n;
    fit_double_vec x, y;      /* the points while n <= keep */
    int summed;               /* past keep: the sums below only */
    long double cx, ca, cb;   /* centre and provisional line at the switch */
    long double su[7], sv[6], svv[5];
    double run_x;             /* the run of samples with one x not yet in the sums */
    size_t run_n;
    long double run_c, run_v, run_vv; /* its provisional line; sums of v, v^2 */
    double *set;              /* distinct x (summed only) */
    size_t n_distinct;
    int distinct_full;        /* more than FIT_NAIVE_DISTINCT distinct x */
} fit_naive;
void fit_naive_init(fit_naive *nv, size_t keep);
/* One point. 0 or LL_ENOMEM. */
int fit_naive_add(fit_naive *nv, double x, double y);
/* The fit into out (fit_line's, up to keep points) and nv's memory let go;
 * read nv->summed and nv->distinct_full first for the note. 0 or an error
 * (err filled). */
int fit_naive_finish(fit_naive *nv, fit_law *out, char *err, size_t errlen);
void fit_naive_free(fit_naive *nv);
/* regress.c, shared with naive.c: a law with no fit (NANs); the 95% intervals
 * from the errors at dof degrees of freedom; the HC3 sandwich I M I of the
 * inverse [[i00, i01], [i01, i11]] of X'WX and the meat [[m00, m01], [m01,
 * m11]] into the variances of a and b and their covariance. */
void fit_law_nan(fit_law *L);
void fit_law_set_ci(fit_law *L, double dof);
void fit_hc3_sandwich(double i00, double i01, double i11, double m00, double m01, double m11, double *var_a,
                      double *var_b, double *cov_ab);

/* reduce.c: what the result keeps of a level's step samples once they are
 * made ("A level's samples, reduced"), so that no run-wide array of them is
 * held: the level's steps, the count of requests behind them, its position
 * bins; the run's naive-fit points until fit_laws, and the chart sample. */
typedef struct fit_level_kept {
    fit_step *steps;          /* fit_level_steps: 1 in fit_kept.step_stride of them */
    size_t n_steps, cap_steps;
    size_t n_steps_seen;      /* every step the level made */
    double sum_gap_ms, sum_tok, sum_k_tok; /* over every one (the steady interval) */
    size_t n_step_requests;   /* requests with a steady sample at the steps' N */
    fit_pos_bins pos;         /* fit_level_position */
} fit_level_kept;
typedef LL_VEC(fit_chart_point) fit_chart_vec;
struct fit_kept {
    fit_options opt;          /* what the samples were made with (fit_level_samples) */
    size_t n_levels;
    fit_level_kept *levels;
    size_t step_stride;              /* "Steps kept": each level keeps 1 in this many */
    size_t n_steps_kept;             /* over every level */
    fit_naive naive;                 /* the naive fit's points or sums; fit_laws finishes it */
    fit_chart_vec steady, other;     /* the chart sample while it is made */
    size_t seen_steady, seen_other;
};
/* res->kept for n_levels levels. 0 or LL_ENOMEM. */
int fit_kept_new(fit_result *res, size_t n_levels, const fit_options *opt);
void fit_kept_free(struct fit_kept *k);
/* Level level_idx's samples s[0..n) (their level's, every one) reduced into
 * res->kept and the level's burst and reach figures; res->n_samples counts
 * them. 0 or LL_ENOMEM. */
int fit_level_reduce(fit_result *res, size_t level_idx, const fit_sample *s, size_t n);
/* The chart sample handed to res->chart, and a note when it is not every
 * sample. 0 or LL_ENOMEM. */
int fit_kept_finish(fit_result *res);

/* figures.c: one request's TTFT (send -> first token), TPOT ((last token -
 * first token) / (tokens - 1)) and E2E (send -> end), ms; NAN where it gives
 * none (no token; TPOT: one token or a zero span). */
typedef struct fit_request_ms {
    double ttft_ms, tpot_ms, e2e_ms;
} fit_request_ms;
void fit_request_latency_ms(const fit_run *run, const ll_rec_request *q, fit_request_ms *out);
/* plan.c: 1 when q finished ok and meets every objective given. */
int fit_request_meets(const fit_run *run, const ll_rec_request *q, const fit_slo *slo);
/* 1 when the request finished ok. */
static inline int fit_request_ok(const ll_rec_request *q) { return q->cls == LL_ERRC_OK; }

/* model_terms.c: a fitted model's step (ms) at N with K context tokens in
 * all; its 95% interval there (delta method on the HC3 covariance; NANs
 * without one); its growth per request past every knee at kr context tokens
 * per request (NAN for the quadratic, which has none). */
double fit_model_fit_eval(const fit_model_fit *f, double n, double k);
void fit_model_fit_ci(const fit_model_fit *f, double n, double k, double ci[2]);
double fit_model_fit_slope(const fit_model_fit *f, double kr);
/* model.c: the run's mean context per running request (each closed-loop
 * level's mean K over its C, averaged over levels); NAN when none. */
double fit_context_per_request(const fit_result *r);

/* compare_paired.c: the paired interval on per-pair log-ratios y[0..m) and
 * their within-level variances v[0..m) (NAN or negative: unknown; the floor
 * is the mean of the known ones): estimate, interval at level ci, variance
 * parts, df. One pair without a positive known v has no interval (NANs).
 * LL_EINVAL when m == 0. Pure; tests measure its coverage. */
int fit_paired_ratio(const double *y, const double *v, size_t m, double ci, double *ratio, double ratio_ci[2],
                     double *within_var, double *between_var, double *df);

/* timeline.c: the arrivals of one stream (timeline.c "Arrival"). From chunk *i,
 * the next arrival: its time, tokens and kind (of its last chunk); *i moves
 * past it. 0 when no arrival is left. The step samples and the ITL both walk
 * a stream with this, so they are the same gaps. */
int fit_next_arrival(const fit_chunks *c, size_t *i, int64_t *t_ns, int32_t *tokens, char *kind);

/* figures.c: a level's latency samples, each sorted (figures.c "Per-level
 * figures"), from the requests at req_idx. With a bound (> 0), a kind past
 * it is spilled into hist[kind] (figures.c "Past a bound") and its vector
 * holds none; 0: every sample kept (callers that want the values). */
#define FIT_LAT_KINDS 8 /* in the order below */
typedef struct fit_latency_samples {
    fit_double_vec ttft, ttfa, tpot, itl, e2e, client_lag, ttft_sched, e2e_sched;
    ll_pct *hist[FIT_LAT_KINDS];
} fit_latency_samples;
int fit_latency_collect(const fit_run *run, const size_t *req_idx, size_t n_req, size_t bound,
                        fit_latency_samples *out);
void fit_latency_free(fit_latency_samples *s);
/* Mean, percentiles and max of sorted samples (fit.h fit_dist). */
void fit_dist_of(const double *sorted, size_t n, fit_dist *out);
/* Every request, latency and rate figure of the level (figures.c "Per-level
 * figures") into L, whose duration_s must be set. */
int fit_level_figures(const fit_run *run, const size_t *req_idx, size_t n_req, fit_level *L);
/* A note for each level's latency kind that came from a histogram. 0 or LL_ENOMEM. */
int fit_notes_latency_hist(fit_result *res);
/* said.c: the level's figures from what the server said per request (said.c
 * "The server's own per-request figures"). 0 or LL_ENOMEM. */
int fit_said_level(const fit_run *run, const size_t *req_idx, size_t n_req, fit_level *L);

/* timeline.c: rebuild one level's P(t)/D(t) from the requests at req_idx,
 * append its step samples to sv (level_idx set), and fill the level's
 * timeline fields (phase points, steady windows, ramp, rate series, counts).
 * Does not touch the law-dependent fields. */
int fit_timeline_level(const fit_run *run, const fit_level_info *info, const size_t *req_idx,
                       size_t n_req, int32_t level_idx, const fit_options *opt,
                       fit_level *out, fit_sample_vec *sv, size_t *n_empty_chunks,
                       char *err, size_t errlen);
void fit_level_release(fit_level *L);

/* timeline.c, shared with stream.c: one level's walk, whichever order it
 * takes. fit_tl_begin sets L from the level's record and makes its P/D line,
 * cut, ramp time and rate bins; the walk gives every request to
 * fit_tl_request (1: it makes samples), every chunk to fit_tl_chunk (counts,
 * ramp tokens, rates) and every gap between two arrivals of a stream to
 * fit_tl_sample; fit_tl_end makes the level's figures from what they counted
 * and hands the line to L; fit_tl_free, always, with the walk's rc (on an
 * error it fills err and releases L). */
/* A request's prompt in tokens as K counts it: the server's usage, else as
 * built. */
static inline double fit_prompt_tokens(const ll_rec_request *q)
{
    return q->usage_prompt >= 0 ? (double)q->usage_prompt : (double)q->prompt_tok;
}
typedef struct fit_tl_line {
    size_t n;
    fit_phase_point *pt;  /* change points */
    double *integ;        /* integral of D (count * ns) from pt[0] to pt[j] */
} fit_tl_line;
typedef struct fit_tl_level {
    const fit_level_info *info;
    const fit_options *opt;
    int32_t level_idx;
    fit_level *L;
    size_t *n_empty_chunks;
    fit_tl_line ln;
    int64_t cut_ns;           /* samples after it are dropped (an interrupted level) */
    int64_t ramp_ns;          /* D first reached C; INT64_MIN: never */
    double steady_tok_at_c, steady_gap_ns_at_c; /* integers: exact in any order */
    ll_pct *gaps_at_c;        /* steady ms per token at N = C, exact up to its bound */
} fit_tl_level;
/* gaps_exact: the steady median's values kept exactly (SIZE_MAX: all). */
int fit_tl_begin(const fit_run *run, const fit_level_info *info, const size_t *req_idx, size_t n_req,
                 int32_t level_idx, const fit_options *opt, size_t gaps_exact, fit_level *L,
                 size_t *n_empty_chunks, fit_tl_level *tl);
int fit_tl_request(fit_tl_level *tl, const ll_rec_request *q);
void fit_tl_chunk(fit_tl_level *tl, const ll_rec_chunk *c);
/* The sample of the gap [t0, t] of request req_idx, ending in an arrival of
 * tok tokens of kind after pos tokens, K = k at t0, into *s and counted: 1;
 * 0: after the cut (none made); LL_ENOMEM. */
int fit_tl_sample(fit_tl_level *tl, uint32_t req_idx, int64_t t0, int64_t t, int32_t tok, int32_t pos, char kind,
                  double k, fit_sample *s);
int fit_tl_end(fit_tl_level *tl);
void fit_tl_free(fit_tl_level *tl, int rc, char *err, size_t errlen);

/* stream.c: a level with more chunks than opt->stream_events (0:
 * FIT_STREAM_EVENTS) is walked as one time-ordered sweep (stream.c "A
 * streamed level") instead of fit_timeline_level + fit_level_reduce. */
int fit_stream_wanted(const fit_run *run, const size_t *req_idx, size_t n_req, const fit_options *opt);
/* The level's timeline and, with res, its samples reduced into res (as
 * fit_level_reduce does; res->levels[level_idx] is L); with sv, its samples
 * appended in time order instead. 0 or an error (err filled, L released). */
int fit_stream_level(const fit_run *run, const fit_level_info *info, const size_t *req_idx, size_t n_req,
                     int32_t level_idx, const fit_options *opt, fit_result *res, fit_level *L, fit_sample_vec *sv,
                     size_t *n_empty_chunks, char *err, size_t errlen);

/* reduce.c, shared with stream.c: a level's samples one at a time. Engine
 * steps: the samples fit_step_takes selects, in time order (ties at one t
 * by N), to fit_step_feed; fit_step_done closes the open step and trims
 * lk's steps. fit_step_request: the sample puts its request among those
 * behind the steps (fit_level_kept.n_step_requests). fit_kept_samples: the
 * naive fit's points and the chart sample. 0 or LL_ENOMEM each. */
int fit_step_takes(const fit_level *L, const fit_sample *s);
int fit_step_request(const fit_level *L, const fit_sample *s);
int fit_step_feed(struct fit_kept *k, fit_level_kept *lk, fit_step *open, const fit_sample *s);
int fit_step_done(struct fit_kept *k, fit_level_kept *lk, fit_step *open);
int fit_kept_samples(fit_result *res, const fit_sample *s, size_t n);

/* position.c, shared with stream.c: position bins one sample at a time,
 * before pos_max is known: sums per position (32 bytes a token of the
 * longest request), folded into FIT_POS_BINS bins at the end. */
typedef struct fit_pos_acc {
    int at_c;                 /* the level's C when closed loop, else 0 */
    size_t n;                 /* positions 0..n-1 held */
    double (*sum)[4];         /* per position: all ms, all tokens, steady ms, steady tokens */
    int32_t pos_max;          /* -1: no sample */
} fit_pos_acc;
void fit_pos_acc_init(fit_pos_acc *a, const fit_level *L);
int fit_pos_acc_add(fit_pos_acc *a, const fit_sample *s);
/* L's figures and out, as fit_position_level makes them; a's memory let go. */
void fit_pos_acc_finish(fit_pos_acc *a, fit_level *L, fit_pos_bins *out);
void fit_pos_acc_free(fit_pos_acc *a);
/* position.c: L's early/late figures (position.c "Step time against position")
 * and its bins (into *out) from the samples of level_idx among s[0..n). */
void fit_position_level(fit_level *L, const fit_sample *s, size_t n, int32_t level_idx, fit_pos_bins *out);

/* regress.c: helpers shared with model.c. Distinct values of x, sorted, into
 * *out (caller frees); (x, index) pairs sorted by x with fit_cmp_xi_pair. */
int fit_distinct_x(const double *x, size_t n, double **out, size_t *nd);
typedef struct fit_xi_pair {
    double x;
    size_t i;
} fit_xi_pair;
int fit_cmp_xi_pair(const void *a, const void *b);

/* Median of v[0..n) and the normal-consistent MAD (1.4826 * median absolute
 * deviation) around it; v is reordered and overwritten. */
void fit_median_mad(double *v, size_t n, double *med, double *sd);

/* regress.c: the total sum of squares of y[0..n) around its mean (n > 0). */
double fit_total_ss(const double *y, size_t n);
/* model.c: N padded to the captured batch size (model.c "The context term"). */
double fit_bucket_of(double n);
/* model_terms.c: BIC of a least-squares fit (params counts the knees);
 * the fit of f's terms (set by fit_model_fit_spec) on the points, its bic,
 * and with want_cov its HC3 covariance; its residual sum of squares. */
double fit_model_bic(double rss, double floor_rss, size_t n, int params);
int fit_model_fit_run(fit_model_fit *f, const double *x, const double *y, const double *k, size_t n,
                      double floor_rss, int want_cov, double *rss_out);
/* The terms of kind (knees where it has them), nothing fitted yet. */
void fit_model_fit_spec(fit_model_fit *f, fit_model_kind kind, double knee1, double knee2);
/* headline.c: res->headline from the levels' errors against the chosen
 * model (fit_compare_levels sets them first). */
void fit_headline_compute(fit_result *res);
/* model.c: the model check on step points (x = N, y = ms per token, k = K
 * per point or NULL). */
int fit_model_check_run(const double *x, const double *y, const double *k, size_t n, const fit_options *opt,
                        fit_model_check *out, char *err, size_t errlen);

/* turns.c: the per-turn figures (fit.h fit_turn) into r->turns, after the
 * levels are built. 0 or LL_ENOMEM. */
int fit_turns_compute(const fit_run *run, fit_result *r);

/* analyze.c: append a formatted note to the result. */
int fit_note(fit_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* analyze_law.c: steps of fit_analyze after the levels are rebuilt. */
/* The law (and OLS, the naive fit, the model check) on the steady steps of
 * every level, against the N opt names; each level's n_steady_points. */
int fit_laws(const fit_run *run, fit_result *res, const fit_options *opt, char *err, size_t errlen);
/* Each closed-loop level's steady throughput against the law and the chosen
 * model, with intervals; res->model_worst_level. 0 or LL_ENOMEM. */
int fit_compare_levels(fit_result *res);
/* The law on the engine's own decode-only step records (res->engine). */
int fit_engine_steps(const fit_run *run, fit_result *res, char *err, size_t errlen);

/* analyze_notes.c: what a reader must know, as notes (fit_note), after the
 * law, the burst and client checks. 0 or LL_ENOMEM each. */
/* Why there is no law, in the user's terms, into res->no_law ("" with one). */
void fit_no_law_reason(fit_result *res);
int fit_notes_for_levels(fit_result *res);
int fit_notes_server(fit_result *res);
/* Level l's note when the client set its pace: each sign that held. */
int fit_note_client_bound(fit_result *res, const fit_run *run, size_t l);
int fit_notes_counts(const fit_run *run, fit_result *res);
int fit_notes_left_out(const fit_run *run, const fit_options *opt, fit_result *res);

#endif
