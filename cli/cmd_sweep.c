/* cmd_sweep.c: `loadlaw sweep [SCENARIO.json] [flags]`: load a scenario, let
 * flags override it (sweep_opts.c), check that the largest level's sockets
 * fit, and hand the job to the sweep library (sweep.h: sweep_one, or sweep_ab
 * for a scenario with "ab"), which runs the levels, fits and reports.
 *
 * DESIGN (signals, through cli/signals.h): the first SIGINT/SIGTERM calls
 * sweep_interrupt (loadgen stops issuing and drains until the scenario's
 * drain_s; the sweep then ends as usual, with summary.json from the fit of
 * what was recorded, and exits 130). The second calls sweep_drain_records
 * (up to a second for the records already queued) and exits at once with
 * 130. Exit: 0 ok, 1 failure, 2 usage, 3 ab gate missed, 130 interrupted; with --find
 * also 3 no C meets the objective, 4 the budget ran out first.
 *
 * DESIGN (K ranks, under mpirun: dist.h): rank 0 parses the command line and
 * the scenario and sends the effective scenario, the run directory and the
 * key to every rank (sweep_share_job); the sweep library does the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "dist.h"
#include "opts.h"
#include "scenario.h"
#include "signals.h"
#include "sweep.h"
#include "sweep_opts.h"

_Static_assert(CLI_GO_ON == SWEEP_GO_ON, "cli_parse's go-on is the sweep's");

/* ---- signals (cli/signals.h) ----------------------------------------------- */

/* Second signal (or a first one with no run going): keep what is queued, quit. */
static _Noreturn void on_second(int sig, void *ctx)
{
    static const char m[] = "\nloadlaw: interrupted; records written so far are kept\n";
    (void)sig;
    (void)ctx;
    sweep_drain_records();
    if (write(2, m, sizeof m - 1) < 0) {
        /* nothing more to do */
    }
    _exit(CLI_INTERRUPTED);
}

static void on_first(int sig, void *ctx)
{
    if (!sweep_interrupt())
        on_second(sig, ctx);
}

/* ---- the command ------------------------------------------------------------ */

/* The scenario with the flags laid over it, validated. CLI_OK or an exit code. */
static int load_scenario(const sweep_opts *o, scn_scenario **out)
{
    char err[1024] = "";
    int rc;
    if ((rc = scn_load_base(o->scenario, o->url != NULL, out, err, sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return rc == LL_EIO || rc == LL_ENOMEM ? CLI_FAIL : CLI_USAGE;
    }
    scn_scenario *scn = *out;
    if (scn->ab.enabled && (o->engine || o->url)) {
        /* Overriding both sides with one spec would compare a run with itself. */
        fprintf(stderr, "loadlaw sweep: %s: an \"ab\" scenario takes no %s (edit ab.a/ab.b.engine)\n",
                scn->path ? scn->path : "scenario", o->engine ? "--engine" : "--url");
        return CLI_USAGE;
    }
    if (sweep_apply_flags(o, scn))
        return CLI_USAGE;
    if (scn_validate(scn, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* Rank 0's side of the command before any rank runs: the options, the
 * scenario with the flags laid over it, the run directory and the key.
 * CLI_GO_ON to run the sweep, else the exit code (CLI_OK after --help). */
static int prepare(int argc, char **argv, sweep_opts *o, scn_scenario **scn, char *run_dir, size_t n,
                   const char **key, char **key_hold, int ranks)
{
    char err[512] = "";
    int ret = sweep_parse_args(argc, argv, o);
    if (ret != CLI_GO_ON)
        return ret;
    if ((ret = load_scenario(o, scn)) != CLI_OK)
        return ret;
    if (ranks > 1 && (*scn)->trace_path) {
        fprintf(stderr, "loadlaw sweep: a trace replays in one process (run it without mpirun)\n");
        return CLI_USAGE;
    }
    if (ranks > 1 && (*scn)->find_objective) {
        fprintf(stderr, "loadlaw sweep: --find decides each level from the one before, in one process "
                        "(run it without mpirun)\n");
        return CLI_USAGE;
    }
    if (ranks > 1 && (*scn)->ab.enabled) {
        fprintf(stderr, "loadlaw sweep: an \"ab\" scenario runs in one process (run each side under mpirun)\n");
        return CLI_USAGE;
    }
    /* The environment's key goes only where the user gave no Authorization
     * of their own: it would go first, and to that other provider too. */
    *key = o->api_key ? o->api_key
                      : scn_has_header(*scn, "Authorization")
                            ? NULL
                            : getenv((*scn)->api_key_env ? (*scn)->api_key_env : "OPENAI_API_KEY");
    /* A bundled engine with an api_key: the requests carry it (every rank's: the job shares it). */
    if (!(*scn)->url && !(*scn)->ab.enabled &&
        (ret = sweep_engine_key((*scn)->engine_spec, o->api_key, scn_has_header(*scn, "Authorization"), key_hold, err,
                                sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", ret == LL_EINVAL ? err : ll_strerror(ret));
        return ret == LL_EINVAL ? CLI_USAGE : CLI_FAIL;
    }
    if (*key_hold)
        *key = *key_hold;
    if ((*scn)->output)
        snprintf(run_dir, n, "%s", (*scn)->output);
    else
        sweep_default_run_dir(run_dir, n);
    return CLI_GO_ON;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_opts o = {0};
    char err[1024] = "", run_dir[4096] = "";
    scn_scenario *scn = NULL;
    scn_prompts *prompts = NULL;
    dist_world *mpi = NULL;
    cJSON *hold = NULL;
    const char *key = NULL;
    char *key_hold = NULL; /* the bundled engine's api_key, when it is the one sent */
    int ret;
    /* Under mpirun: one rank of K (dist.h); a plain run never starts MPI. */
    if (dist_launched() && dist_init(&mpi, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return CLI_FAIL;
    }
    int rank = mpi ? dist_rank(mpi) : 0, ranks = mpi ? dist_ranks(mpi) : 1;
    ret = rank == 0 ? prepare(argc, argv, &o, &scn, run_dir, sizeof run_dir, &key, &key_hold, ranks) : CLI_GO_ON;
    if (mpi)
        ret = sweep_share_job(mpi, ret, &o.quiet, &o.no_report, &scn, run_dir, sizeof run_dir, &key, &hold);
    if (ret != CLI_GO_ON)
        goto out;
    ret = CLI_FAIL;
    if (scn_prompts_load(scn, &prompts, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        goto out;
    }
    sweep_raise_nofile();
    if (rank == 0 && (ret = sweep_check_nofile(scn, ranks)) != CLI_OK)
        goto out;
    ret = CLI_FAIL;
    if (cli_signals_start(on_first, on_second, NULL, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        goto out;
    }
    sweep_job job = {.scn = scn, .prompts = prompts, .engine_spec = scn->engine_spec, .run_dir = run_dir,
                     .api_key = key && key[0] ? key : NULL, .quiet = o.quiet, .no_report = o.no_report,
                     .mpi = mpi, .metrics_urls = o.metrics_urls, .n_metrics_urls = o.n_metrics_urls,
                     .metrics_interval_s = o.metrics_interval_s, .no_metrics = o.no_metrics,
                     .gpu = o.gpu, .profile_dir = o.profile_dir,
                     .api_key_b = o.n_api_keys == 2 && o.api_keys[1][0] ? o.api_keys[1] : NULL,
                     .api_key_given = o.api_key != NULL};
    ret = sweep_run(&job);
    cli_signals_stop();
out:
    scn_prompts_free(prompts);
    scn_free(scn);
    cJSON_Delete(hold);
    ll_wipe_free(key_hold);
    /* The job's exit status is rank 0's: mpirun ends the whole job as soon
     * as any process exits non-zero, which would kill rank 0 before its
     * summary. A rank that failed out of step aborts in dist_end. */
    if (rank > 0 && (ret == CLI_INTERRUPTED || ret == CLI_USAGE))
        ret = CLI_OK;
    dist_end(mpi, ret);
    return ret;
}
