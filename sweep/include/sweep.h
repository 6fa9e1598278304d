/* sweep.h: the application behind `loadlaw sweep` and `loadlaw compare`: one
 * sweep against one target (the bundled engine hosted in this process, or a
 * URL), its A/B form (two targets, then a comparison), the job shared by K
 * ranks under MPI (dist.h), and the failure gate (--max-failed). The command
 * line (cli/) turns argv into a sweep_job and calls these.
 *
 * Exit codes: every function that runs a command returns the project's exit
 * status (SWEEP_OK ... SWEEP_INTERRUPTED, the same numbers as the command
 * line's); messages go to stderr, tables to stdout.
 *
 * Signals: the library installs no handler. The command line's signal thread
 * calls sweep_interrupt on the first SIGINT/SIGTERM and sweep_drain_records
 * before it exits on the second; both may be called from any thread, never
 * from a signal handler. The runs they act on are the ones this process is
 * driving now (one user of the library at a time per process). */
#ifndef LOADLAW_SWEEP_H
#define LOADLAW_SWEEP_H

#include <stddef.h>

#include "dist.h"
#include "fit_compare.h"
#include "loadgen.h"
#include "scenario.h"

/* 0 success, 1 runtime failure, 2 usage error, 3 a gate failed (sweep
 * --find: no C meets the objective, not even C = 1), 4 sweep --find ran out
 * of its budget (or reached its largest C) before the boundary was pinned,
 * 130 interrupted. SWEEP_GO_ON: a step went well and the command goes on. */
enum {
    SWEEP_GO_ON = -1,
    SWEEP_OK = 0,
    SWEEP_FAIL = 1,
    SWEEP_USAGE = 2,
    SWEEP_GATE = 3,
    SWEEP_FIND_NONE = 3,
    SWEEP_FIND_UNPINNED = 4,
    SWEEP_INTERRUPTED = 130,
};

/* --metrics-url endpoints a sweep scrapes beside the target's own. */
#define SWEEP_MAX_METRICS_URLS 16

/* --gpu: auto samples the local GPUs when NVML loads and says nothing when
 * it does not (unless the bundled engine runs on cuda); on says why it
 * cannot; off starts no sampler. */
enum { SWEEP_GPU_AUTO = 0, SWEEP_GPU_ON, SWEEP_GPU_OFF };

typedef struct sweep_job {
    const scn_scenario *scn;     /* levels, request shape; scn->url or the bundled engine */
    scn_prompts *prompts;       /* fitted to their token lengths before the first level */
    const char *engine_spec;     /* bundled engine spec (NULL: engine defaults) */
    const char *profile_dir;     /* where the server's profiler traces go, seen from here: the
                                  * bundled engine's trace folder (NULL = its default), or a
                                  * remote server's (NULL = not known) */
    const char *run_dir;
    const char *api_key;         /* NULL = none */
    int quiet, no_report;
    dist_world *mpi;             /* one rank of K (dist.h); NULL: the whole load */
    /* Server metrics (telemetry.h), rank 0 only: the target's /metrics unless
     * no_metrics, plus these (at most SWEEP_MAX_METRICS_URLS); every
     * interval_s (0: 0.5 s). */
    const char *const *metrics_urls;
    size_t n_metrics_urls;
    double metrics_interval_s;
    int no_metrics;
    int gpu;                     /* SWEEP_GPU_*: the NVML sampler (telemetry.h); rank 0 only */
    int slot;                    /* 0, or 1 for an A/B's side B (set by sweep_ab) */
    const lg_dist *turns;        /* an interleaved A/B's turn-taking hooks (ab.c);
                                  * NULL otherwise; never with mpi */
    const char *api_key_b;       /* A/B: side B's key (NULL: api_key for both) */
    int api_key_given;           /* api_key is --api-key's (not the environment's): a
                                  * bundled side's own api_key must then be the same */
} sweep_job;

/* Open run_dir/records.jsonl, start the bundled engine when scn->url is
 * NULL (its steps go to the records), run every level (up to the first over
 * scn->max_failed unless scn->keep_going), then fit the records once: the
 * per-level tables, summary.json, the law and the report. A sweep exit code
 * (SWEEP_INTERRUPTED after sweep_interrupt; SWEEP_FAIL when a level failed
 * more than max_failed of its requests, after saying which). */
int sweep_one(const sweep_job *j);

/* The scenario's "ab" form: each side into out_dir/<name>, interleaved level
 * by level (ABBA with repeats; scenario.h scn_ab) or one side after the
 * other, the sides' trace breakdowns, then sweep_compare of the two runs
 * with out_dir/compare.html and the scenario's gate. A sweep exit code
 * (SWEEP_GATE when the gate is missed). */
int sweep_ab(const sweep_job *base, const char *out_dir);

/* A scenario with "ab": sweep_ab(j, j->run_dir); else sweep_one(j). */
int sweep_run(const sweep_job *j);
/* A run directory for a sweep without -o: runs/YYYYMMDD-HHMMSS (UTC), with
 * -2, -3... when that exists. */
void sweep_default_run_dir(char *out, size_t n);

/* Raise this process's open-file limit to its hard limit (a warning when
 * that fails). */
void sweep_raise_nofile(void);
/* Before the run: can the largest level's streams have their sockets (under
 * K ranks against a URL, this rank's share)? SWEEP_OK, or SWEEP_USAGE after
 * saying what the limit is and what to do. */
int sweep_check_nofile(const scn_scenario *s, int ranks);

/* The first SIGINT/SIGTERM: the runs going now stop issuing and drain until
 * their scenario's drain_s (said on stderr); the sweep then ends as usual
 * with the summary of what was recorded and SWEEP_INTERRUPTED. Returns 1,
 * or 0 when no run is going (nothing to drain: the caller quits). */
int sweep_interrupt(void);
/* Before quitting at once (the second signal): wait up to a second for the
 * records already queued to reach their files. */
void sweep_drain_records(void);

/* The key a sweep's requests need for a bundled engine started from spec:
 * its api_key, so that `--engine api_key=K` alone does not get 401 on every
 * request. given: --api-key (NULL: none); own_auth: the requests carry an
 * Authorization header of their own (scn_has_header). *key (caller frees
 * with ll_wipe_free) is NULL when the spec sets no api_key, does not parse
 * (the engine's start says why), or own_auth. 0; LL_EINVAL with one line in
 * err, naming the fix and neither key, when given and the spec's api_key
 * differ; LL_ENOMEM. */
int sweep_engine_key(const char *spec, const char *given, int own_auth, char **key, char *err, size_t errlen);

/* K ranks (share.c). Rank 0's outcome of preparing the job (ret:
 * SWEEP_GO_ON or an exit code) and, when it goes on, the scenario, run
 * directory, key and -q / --no-report to every rank; the others get *scn
 * (theirs to free), run_dir, *quiet, *no_report and *key (valid while *hold
 * lives; caller deletes it with cJSON_Delete). Returns rank 0's outcome on
 * every rank (SWEEP_GO_ON: run the sweep). */
int sweep_share_job(dist_world *mpi, int ret, int *quiet, int *no_report, scn_scenario **scn, char *run_dir,
                    size_t n, const char **key, cJSON **hold);

/* What `loadlaw compare` does once its options are read. */
typedef struct sweep_compare_opts {
    const char *html;          /* NULL: no comparison page */
    int json;                  /* JSON instead of tables */
    int have_expect;           /* a gate: expect_x at expect_c (0: highest shared C) */
    double expect_x;
    int expect_c;
    /* a second gate: at every level, at least this share of the matched
     * requests produced identical outputs or passed the top-k check
     * (fit/outputs.c "outputs comparison"); have_expect_outputs 0: none */
    int have_expect_outputs;
    double expect_outputs;
    fit_compare_options co;
} sweep_compare_opts;
void sweep_compare_opts_default(sweep_compare_opts *o);
/* Fit both runs, compare B (run_b) against the baseline A, print the tables
 * (or JSON) and, when either run recorded outputs, their comparison, write
 * the page, judge the gates. A sweep exit code: SWEEP_GATE
 * when the gate is missed, SWEEP_USAGE when its C is not shared by the runs. */
int sweep_compare(const char *run_a, const char *run_b, const sweep_compare_opts *o);
/* Within one run: the outputs at closed-loop level C = c_b against those at
 * c_a for the same prompt keys (fit_outputs_compare_levels), printed (or
 * JSON), and o's outputs gate judged. SWEEP_FAIL when the run lacks outputs
 * or either level. */
int sweep_compare_levels(const char *run, int c_a, int c_b, const sweep_compare_opts *o);

/* ---- check-decode (check_decode.c) ----
 * `loadlaw check-decode RUN_DIR`: a run's recorded outputs (sweep
 * --record-outputs) sent back, after their prompts, to the same server with
 * prompt logprobs asked, and the decode-time logprobs compared with the
 * prefill-time ones (fit/check_decode.c "The bound": a position may differ
 * by tolerance + what the server's arithmetic rounds). The default
 * tolerance: the bundled cpu engine (fp32, logprobs printed to 4 decimals)
 * agrees with itself within 1e-4 nat and its tiled kernel's testing fault
 * moves 0.002 to 0.1 nat (docs/check-decode.md). The dtype: the bundled
 * engine's is fp32; a remote server is taken as bf16 (what servers run; no
 * OpenAI-compatible server says) unless --dtype says. */
#define SWEEP_CHECK_DECODE_TOLERANCE 0.005
#define SWEEP_CHECK_DECODE_MAX_OVER 0.01
#define SWEEP_CHECK_DECODE_DTYPE_AUTO (-1)
typedef struct sweep_check_decode_opts {
    const char *url;           /* NULL: the run's target */
    const char *engine;        /* start the bundled engine with this spec and check against it */
    const char *api_key;       /* NULL: none */
    int max_requests;          /* re-score at most this many, evenly spaced (0: all); default 200 */
    double tolerance;          /* nats */
    double max_over;           /* gate: share of positions that disagree */
    int dtype;                 /* fit_cd_dtype, or SWEEP_CHECK_DECODE_DTYPE_AUTO (the default) */
    double timeout_s;          /* per request */
    int json;
} sweep_check_decode_opts;
void sweep_check_decode_opts_default(sweep_check_decode_opts *o);
/* Print the figures (or JSON) and judge the gate: SWEEP_OK, SWEEP_GATE when
 * the share that disagrees exceeds the gate, SWEEP_USAGE when the run has no
 * recorded outputs (or prompts) or the server cannot return prompt logprobs,
 * SWEEP_FAIL when nothing could be compared. */
int sweep_check_decode(const char *run_dir, const sweep_check_decode_opts *o);
/* ---- end check-decode ---- */

#endif
