/* internal.h (internal to sweep/): what the sweep's files share: the steps
 * of one side (driver.c) that the A/B (ab.c) drives on two threads, and the
 * target every rank learns from rank 0 (share.c).
 *
 * Exit codes as sweep.h's (SWEEP_*). Threads: a side's functions run on the
 * thread that drives that side; the interrupt state (driver.c) is the only
 * state shared between sides and with the signal thread, under its lock. */
#ifndef LOADLAW_SWEEP_INTERNAL_H
#define LOADLAW_SWEEP_INTERNAL_H

#include "host_engine.h"
#include "sweep.h"

/* Runs that may be driven at once: the two sides of an interleaved A/B
 * (sweep_job.slot). */
#define SWEEP_SLOTS 2

/* sweep_one in three steps, for an interleaved A/B that opens both sides
 * first, runs them on two threads, then fits them one after the other:
 * open (start the target, open the records; SWEEP_OK or an exit code, then
 * sweep_side_abandon), run (every level, then close the records; the records
 * are complete when it returns), finish (the fit, tables, summary, report;
 * stops the engine; returns the exit code given ret, the run's). */
typedef struct sweep_find sweep_find;
typedef struct sweep_side {
    host_engine host;
    ll_rec_writer *w;
    const char *url, *model;
    char rec_path[4200];
    char *hold_url, *hold_model;
    char found_model[256];       /* the server's only model, when none was given */
    size_t n_ok;
    int stopped_after;           /* the level over max_failed the run stopped after; -1 */
    sweep_find *find;            /* sweep --find's search; NULL: the scenario's levels */
} sweep_side;
int sweep_side_open(const sweep_job *j, sweep_side *sd);
/* SWEEP_OK, or SWEEP_USAGE (said on stderr) when run_dir already holds a
 * run's records: a sweep never overwrites measurements. */
int sweep_check_fresh_dir(const char *run_dir);
int sweep_side_run(const sweep_job *j, sweep_side *sd);
int sweep_side_finish(const sweep_job *j, sweep_side *sd, int ret);
void sweep_side_abandon(sweep_side *sd);

/* models.c: the one model GET /v1/models lists (under url's API root, with
 * the key and the secret-named headers), into out. 0; LL_EINVAL when it
 * lists none or several (err names them); LL_EIO when the request failed. */
/* prompt_len.c: the prompts asked in tokens fitted to their lengths, the
 * head of each prompt's request inside, by the scenario's tokenizer or
 * the server's /tokenize (said on stderr by rank 0). SWEEP_OK (also when
 * the server has no /tokenize: said, the prompts stay estimates), or
 * SWEEP_FAIL after printing why. */
int sweep_fit_prompts(const sweep_job *j, lg_run *run, const char *url, const char *model, int rank);
int sweep_only_model(const char *url, const char *api_key, char *const *headers, size_t n_headers, char *out,
                     size_t n, char *err, size_t errlen);

/* Rank 0's target (its outcome, URL, model, host name) to every rank; on the
 * others *url and *model point into *hold_url and *hold_model (caller frees).
 * Returns rank 0's outcome on every rank. */
int sweep_share_target(const sweep_job *j, int ret, const char **url, const char **model, char **hold_url,
                       char **hold_model);

/* find.c, find_report.c: `sweep --find`, the adaptive capacity search
 * (find.c "The method"). sweep_find_new: *out NULL when the scenario has
 * no find.objective; 0 or LL_EINVAL (said) / LL_ENOMEM. The writer the
 * records go to (drained before each decision); sweep_find_next is the
 * run's lg_config.next_level with the search as ctx. sweep_find_report,
 * after the sweep's summary.json: the ending block, summary.json's "find",
 * and the exit code: ret when not SWEEP_OK, else SWEEP_OK (found),
 * SWEEP_FIND_NONE or SWEEP_FIND_UNPINNED. */
int sweep_find_new(const scn_scenario *scn, const char *run_dir, sweep_find **out);
void sweep_find_set_writer(sweep_find *f, ll_rec_writer *w);
int sweep_find_next(void *ctx, int done, scn_level *next, char *err, size_t errlen);
int sweep_find_report(sweep_find *f, int ret);
void sweep_find_free(sweep_find *f);

#endif
