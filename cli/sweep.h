/* sweep.h (internal to cli/): one sweep against one target, shared by
 * `loadlaw sweep` (cmd_sweep.c) and its A/B form (cmd_sweep_ab.c); the
 * command's options (sweep_opts.c). */
#ifndef LOADLAW_SWEEP_H
#define LOADLAW_SWEEP_H

#include "host_engine.h"
#include "loadgen.h"
#include "scenario.h"

typedef struct mpi_sweep mpi_sweep; /* mpi_sweep.h */

/* Runs that may be driven at once: the two sides of an interleaved A/B. */
#define SWEEP_SLOTS 2

/* The command line as given; NULL / -1 = not given (the scenario decides). */
#define SWEEP_MAX_HEADERS 64
#define SWEEP_MAX_METRICS_URLS 16
typedef struct sweep_opts {
    /* url, model, api_key: the first --url/--model/--api-key (A's); a second
     * one of each is B's (urls[1], ...): two --url make an A/B of two remote
     * servers; one --model or --api-key with two --url serves both. */
    const char *scenario, *url, *engine, *model, *endpoint, *api_key, *output, *prompts, *arrival;
    const char *urls[2], *models[2], *api_keys[2];
    int n_urls, n_models, n_api_keys;
    long repeat;                         /* --repeat R (A/B only); -1 = not given */
    const char *arrival_stamp;           /* --arrival-stamp kernel|user; NULL = the scenario's */
    const char *source_addrs;            /* --source-addrs auto|off|LIST; NULL = the scenario's */
    const char *order;                   /* --order interleaved|sequential; NULL = not given */
    const char *conc, *rate, *timeout, *max_failed;
    const char *requests, *duration;     /* one value for every level, or one per level */
    const char *prompt_tokens, *prompt_words, *tokenizer, *extra_body, *endpoint_path;
    const char *headers[SWEEP_MAX_HEADERS];
    size_t n_headers;
    const char *metrics_urls[SWEEP_MAX_METRICS_URLS]; /* --metrics-url, beside the target's own */
    size_t n_metrics_urls;
    double metrics_interval_s;           /* --metrics-interval; 0 = not given (0.5 s) */
    int no_metrics;
    int gpu_off;                         /* --gpu off */
    long warmup, threads, max_tokens, think_tokens, seed;
    int no_report, quiet, no_continuous_usage;
    int keep_going;                      /* --keep-going: send the levels after one over --max-failed */
} sweep_opts;

/* Parse argv (argv[0] = "sweep"). CLI_GO_ON (opts.h) to go on, CLI_OK after
 * --help, CLI_USAGE after a one-line message. */
int sweep_parse_args(int argc, char **argv, sweep_opts *o);
/* Scenario files: as given (relative to the cwd), else in the source tree
 * (a build-tree binary), else in the data folder baked in at build time
 * (LOADLAW_DATADIR, e.g. /usr/local/share/loadlaw; the environment variable
 * LOADLAW_DATADIR overrides it): NAME, then NAME without a leading
 * "scenarios/" under DATADIR/scenarios. 0 when found; out always holds a
 * path to try. */
int sweep_find_scenario(const char *name, char *out, size_t n);
/* The scenario a sweep starts from: the file given (defaults "file"); with
 * --url and none, scn_new's remote-benchmark defaults (defaults "remote":
 * no engine extensions, 256-token synthetic prompts, C = 1..64); else
 * scenarios/default.json (defaults "bundled"). CLI_OK or an exit code after
 * printing why. Flags are not applied yet. */
int sweep_base_scenario(const sweep_opts *o, scn_scenario **out);
/* Lay the flags over the scenario: 0, or CLI_USAGE after a one-line message. */
int sweep_apply_flags(const sweep_opts *o, scn_scenario *s);

typedef struct sweep_job {
    const scn_scenario *scn;     /* levels, request shape; scn->url or the bundled engine */
    const scn_prompts *prompts;
    const char *engine_spec;     /* bundled engine spec (NULL: engine defaults) */
    const char *profile_dir;     /* bundled engine's trace folder; NULL = its default */
    const char *run_dir;
    const char *api_key;         /* NULL = none */
    int quiet, no_report;
    mpi_sweep *mpi;              /* one rank of K (mpi_sweep.h); NULL: the whole load */
    /* Server metrics (scrape.h), rank 0 only: the target's /metrics unless
     * no_metrics, plus these; every interval_s (0: 0.5 s). */
    const char *const *metrics_urls;
    size_t n_metrics_urls;
    double metrics_interval_s;
    int no_metrics;
    int gpu_off;                 /* no NVML sampler (gpu_sample.h); rank 0 only */
    int slot;                    /* 0, or 1 for an A/B's side B (signals' slot, SWEEP_SLOTS) */
    const lg_dist *turns;        /* an interleaved A/B's turn-taking hooks (cmd_sweep_ab.c);
                                  * NULL otherwise; never with mpi */
    const char *api_key_b;       /* A/B: side B's key (NULL: api_key for both) */
    int api_key_given;           /* api_key is --api-key's (not the environment's): a
                                  * bundled side's own api_key must then be the same */
} sweep_job;

/* K ranks (sweep_share.c). Rank 0's outcome of preparing the job (ret:
 * CLI_GO_ON or an exit code) and, when it goes on, the scenario, run directory, key and -q /
 * --no-report to every rank; the others get *scn (theirs to free), run_dir,
 * o->quiet, o->no_report and *key (valid while *hold lives; caller deletes it
 * with cJSON_Delete). Returns rank 0's outcome on every rank (CLI_GO_ON:
 * run the sweep). */
int sweep_share_job(mpi_sweep *mpi, int ret, sweep_opts *o, scn_scenario **scn, char *run_dir, size_t n,
                    const char **key, cJSON **hold);
/* Rank 0's target (its outcome, URL, model, host name) to every rank; on the
 * others *url and *model point into *hold_url and *hold_model (caller frees).
 * Returns rank 0's outcome on every rank. */
int sweep_share_target(const sweep_job *j, int ret, const char **url, const char **model, char **hold_url,
                       char **hold_model);

/* Open run_dir/records.jsonl, start the bundled engine when scn->url is
 * NULL (its steps go to the records), run every level, then fit the records
 * once: the per-level tables, summary.json, the law and the report.
 * Needs the signal thread (cmd_sweep.c) running. Returns a CLI_* exit code
 * (CLI_INTERRUPTED after a SIGINT). */
int sweep_one(const sweep_job *j);

/* sweep_one in three steps, for an interleaved A/B that opens both sides
 * first, runs them on two threads, then fits them one after the other:
 * open (start the target, open the records; CLI_OK or an exit code, then
 * sweep_side_abandon), run (every level, then close the records; the records
 * are complete when it returns), finish (the fit, tables, summary, report;
 * stops the engine; returns the exit code given ret, the run's). */
typedef struct sweep_side {
    host_engine host;
    ll_rec_writer *w;
    const char *url, *model;
    char rec_path[4200];
    char *hold_url, *hold_model;
    size_t n_ok;
    int stopped_after;           /* the level over max_failed the run stopped after; -1 */
} sweep_side;
int sweep_side_open(const sweep_job *j, sweep_side *sd);
int sweep_side_run(const sweep_job *j, sweep_side *sd);
int sweep_side_finish(const sweep_job *j, sweep_side *sd, int ret);
void sweep_side_abandon(sweep_side *sd);

/* Two --url (sweep_opts.urls): the scenario's "ab" with two remote sides
 * named "a" and "b", each with its model (--model once for both, or twice),
 * and --order/--repeat laid over any "ab". 0, or CLI_USAGE after a one-line
 * message (e.g. --repeat without two targets). */
int sweep_apply_ab_flags(const sweep_opts *o, scn_scenario *s);

/* The scenario's "ab" form: each side into out_dir/<name>, interleaved level
 * by level (ABBA with repeats; scenario.h scn_ab) or one side after the
 * other, the sides' trace breakdowns, then compare_runs (cli.h) of the two
 * runs with out_dir/compare.html and the scenario's gate. CLI_* exit code
 * (CLI_GATE when the gate is missed). */
int sweep_ab(const sweep_job *base, const char *out_dir);

#endif
