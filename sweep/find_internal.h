/* find_internal.h (internal to sweep/): the state of `sweep --find`'s
 * search, shared by find.c (the search: judging levels, the model's
 * boundary, where to measure next) and find_report.c (the ending block and
 * summary.json's "find"). One search per run, used on one thread at a time
 * (loadgen's driver thread during the run, the sweep's after it). */
#ifndef LOADLAW_SWEEP_FIND_INTERNAL_H
#define LOADLAW_SWEEP_FIND_INTERNAL_H

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


typedef struct find_meas {
    int level, c;
    const char *role;
    int meets, expected;          /* expected: 1 meet, 0 fail, -1 no expectation */
    double fig[SCN_OBJ_MAX_TERMS];
    double failed_share;
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
    int phase, end, misses, flips;
    int n_probe_req;
    char why_req[160];
    int pred_ladder, pred_last;   /* -1: none */
    int sustained_c, rechecked_c; /* the latest sustain that met, re-measure that failed; 0 */
    int pending_c, pending_expect;/* the level running now (placed by the last call) */
    const char *pending_role;
};

/* find_end_names[end]: the outcome as summary.json says it. */
extern const char *const find_end_names[];

/* The latest measurement at C, or NULL. */
const find_meas *find_latest(const sweep_find *f, int c);
/* hi: the smallest C whose latest measurement fails (INT_MAX: none); lo: the
 * largest C below it whose latest meets (0: none). */
void find_bounds(const sweep_find *f, int *lo, int *hi);
/* 1 when figure v meets term t (NAN never does). */
int find_term_meets(const scn_obj_term *t, double v);

#endif
