/* find_internal.h (internal to sweep/): the state of `sweep --find`'s
 * search, shared by find.c (the search: judging levels, the model's
 * boundary, where to measure next), find_rate.c (what differs when the
 * search is over open-loop arrival rates) and find_report.c (the ending
 * block and summary.json's "find"). One search per run, used on one thread at a time
 * (loadgen's driver thread during the run, the sweep's after it). */
#ifndef LOADLAW_SWEEP_FIND_INTERNAL_H
#define LOADLAW_SWEEP_FIND_INTERNAL_H

#include "fit.h"
#include "internal.h"

/* The largest C the search places (two sockets a stream with the bundled
 * engine: within the usual 4096-file soft limit raised to its hard one). */
#define FIND_MAX_C 1024
/* The ladder stops once the model predicts a boundary within this many
 * times the largest C measured: beyond it, an extrapolation is a guess. */
#define FIND_REACH 4
/* Probes that went against the prediction before the search bisects. */
#define FIND_MISSES 2
/* Results at one C that disagreed with the one before: the boundary is
 * within noise after this many. */
#define FIND_FLIPS 2
/* Samples beyond the percentile a level must carry: n >= this / (1 - q). */
#define FIND_TAIL 10.0
/* Requests for a mean, a max, or a share of 1 (or 0). */
#define FIND_MIN_REQ 20
#define FIND_MAX_REQ 100000

enum { PH_LADDER, PH_PROBE, PH_DONE };
enum { END_NONE, END_FOUND, END_NOISE, END_FAILS_AT_1, END_BUDGET_LEVELS, END_BUDGET_TIME, END_CAP };


/* A measured level. x: where it sits on the search's axis: C (closed), or
 * the arrival rate in requests/s (find.by "rate"); 0 for the rate search's
 * opening level at C = 1, which is on neither (it measures a lone request). */
typedef struct find_meas {
    int level, c;
    double x;
    const char *role;
    int meets, expected;          /* expected: 1 meet, 0 fail, -1 no expectation */
    double fig[SCN_OBJ_MAX_TERMS];
    double failed_share;
    double n_inflight;            /* closed: C; open: rate x mean E2E (Little's law); NAN: not measured */
    size_t n;                     /* measured requests that finished */
} find_meas;

struct sweep_find {
    scn_objective obj;
    const scn_scenario *scn;
    const char *run_dir;
    ll_rec_writer *w;
    int64_t t0_ns;
    double elapsed_s;
    find_meas *m;
    size_t n_m, cap_m;
    int by_rate;                  /* find.by "rate": x is an open level's rate */
    int phase, end, misses, flips;
    int n_probe_req;
    char why_req[160];
    double pred_ladder, pred_last;/* the model's boundary on the axis; -1: none */
    double sustained_x, rechecked_x; /* the latest sustain that met, re-measure that failed; 0 */
    double pending_x;             /* the level running now (placed by the last call) */
    int pending_expect;
    const char *pending_role;
};

/* find_end_names[end]: the outcome as summary.json says it. */
extern const char *const find_end_names[];

/* The latest measurement at x (> 0), or NULL. */
const find_meas *find_latest(const sweep_find *f, double x);
/* hi: the smallest x whose latest measurement fails (INFINITY: none); lo:
 * the largest x below it whose latest meets (0: none). */
void find_bounds(const sweep_find *f, double *lo, double *hi);
/* 1 when figure v meets term t (NAN never does). */
int find_term_meets(const scn_obj_term *t, double v);
/* Term t's figure at level L (find.c): ms, a share, or tokens/s; NAN: not
 * measured. */
double find_term_figure(const scn_objective *o, const scn_obj_term *t, const fit_run *run, const fit_level *L);
/* The chosen model's mean step (ms) at N running requests with the run's
 * context per request. */
double find_model_step(const fit_result *res, double n);
/* Term t's figure over (user_tps: times) the model's step at the measured
 * level that is the best source for N = n (find.c better_source); NAN: none. */
double find_term_ratio(const sweep_find *f, const fit_run *run, const fit_result *res, const scn_obj_term *t,
                       double n);
/* A level's running requests for the ratios: C closed, Little's law open. */
double find_level_n(const fit_level *L);
/* What the model says of N running requests: 1 every term it can predict
 * (latencies, user_tps) meets, 0 one misses, -1 it predicts none. */
int find_meets_at(const sweep_find *f, const fit_run *run, const fit_result *res, double n);
/* The largest x measured (0: none). */
double find_largest_x(const sweep_find *f);

/* ---- the rate search (find_rate.c) -------------------------------------------- */

/* 1 when [lo, hi] pins a boundary: hi = lo + 1 (C), hi <= lo (1 + precision) (rate). */
int find_pinned(const sweep_find *f, double lo, double hi);
/* After a ladder level of the rate search: the next rung (*x), or 0 when the
 * ladder is over (a rung failed, or the model predicts the boundary). */
int find_rate_ladder_next(sweep_find *f, const fit_result *res, const find_meas *m, double pred, double *x);
/* The largest rate the model predicts meets every term it can predict;
 * -1 without a model or such a term. */
double find_rate_predict(const sweep_find *f, const fit_run *run, const fit_result *res);
/* A probe's rate between lo and hi (not pinned) and what the prediction
 * says of it (*expect: 1 meets, 0 fails, -1 nothing). */
double find_rate_probe(const sweep_find *f, double lo, double hi, double pred, int *expect);
/* The open level for rate x in role: requests and warmup from the running
 * requests the model (or C = 1) says the rate makes. */
void find_rate_level(const sweep_find *f, const fit_run *run, const fit_result *res, double x, const char *role,
                     scn_level *next);

#endif
