/* driver.c: one sweep against one target (sweep.h sweep_one): start the
 * bundled engine in this process when no URL is given (host_engine.c), drive
 * the levels (loadgen) into RUN_DIR/records.jsonl with the samplers beside
 * them (telemetry.h), then fit the records once and print that one result
 * everywhere: the per-level tables, summary.json, the law and the report;
 * and the failure gate (--max-failed) judged from the fit's counts.
 *
 * DESIGN (data): this file owns the records writer (common/records.h). It
 * opens it before the run, loadgen's workers and the engine's scheduler put
 * their records into it (the engine through eng_set_records, not through
 * this file), and it is closed once the engine is detached; only then is the
 * file complete for fit.
 *
 * DESIGN (interrupts): the runs going now are published under g_mu, one slot
 * per side (an interleaved A/B drives two at once, each on its own thread).
 * sweep_interrupt (the command line's first SIGINT/SIGTERM) asks loadgen to
 * stop issuing and drain until the scenario's drain_s; the sweep then ends
 * as usual, with summary.json from the fit of what was recorded, and
 * returns SWEEP_INTERRUPTED. sweep_drain_records (the second) waits up to a
 * second for the records already queued to reach the file.
 *
 * DESIGN (K ranks, under mpirun: dist.h): each rank records its share into
 * its own RUN_DIR/rank-<r>.jsonl; loadgen's lg_dist hooks bring them into
 * rank 0's records.jsonl level by level, and rank 0 alone fits and reports.
 * Rank 0 alone hosts the bundled engine and sends its URL (share.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "dist.h"
#include "fit.h"
#include "internal.h"
#include "loadgen.h"
#include "report.h"
#include "scenario.h"
#include "telemetry.h"

/* How long sweep_drain_records waits for queued records to reach the file. */
#define DRAIN_AT_EXIT_NS 1000000000LL

/* ---- interrupts ------------------------------------------------------------ */

/* g_mu keeps the runs and the writers alive while the signal thread uses
 * them. One slot per side (sweep_job.slot). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static lg_run *g_run[SWEEP_SLOTS];
static ll_rec_writer *g_writer[SWEEP_SLOTS];
static double g_drain_s = 10;

/* The caller exits next: g_mu stays held, so no writer is closed under the
 * drain or the exit. */
void sweep_drain_records(void)
{
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < SWEEP_SLOTS; k++)
        if (g_writer[k])
            ll_rec_drain(g_writer[k], DRAIN_AT_EXIT_NS);
}

int sweep_interrupt(void)
{
    pthread_mutex_lock(&g_mu);
    int any = 0;
    for (int k = 0; k < SWEEP_SLOTS; k++)
        any |= g_run[k] != NULL;
    if (!any) {
        pthread_mutex_unlock(&g_mu);
        return 0;
    }
    fprintf(stderr, "\nloadlaw: stopping: in-flight requests may finish within %.0f s "
                    "(Ctrl-C again to quit now)\n", g_drain_s);
    for (int k = 0; k < SWEEP_SLOTS; k++)
        if (g_run[k])
            lg_run_interrupt(g_run[k], g_drain_s);
    pthread_mutex_unlock(&g_mu);
    return 1;
}

/* The bundled engine's scheduler stopped on a failed step (scheduler thread).
 * From now on every request would get a 503: stop issuing instead of
 * recording levels of failures; what was measured is kept, and the sweep
 * exits 1 with the engine's reason. Both sides of an A/B stop: a failed side
 * leaves nothing to compare. */
static void on_engine_failure(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* read back with eng_failed once the sweep returns */
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < SWEEP_SLOTS; k++)
        if (g_run[k])
            lg_run_interrupt(g_run[k], 0);
    pthread_mutex_unlock(&g_mu);
}

/* drain_s: the scenario's, for sweep_interrupt while run is going. */
static void publish(int slot, lg_run *run, ll_rec_writer *w, double drain_s)
{
    pthread_mutex_lock(&g_mu);
    if (run)
        g_drain_s = drain_s;
    g_run[slot] = run;
    g_writer[slot] = w;
    pthread_mutex_unlock(&g_mu);
}

/* ---- one sweep, step by step ----------------------------------------------- */

/* The target: a remote URL with its model name (when none was given, the
 * server's only one from /v1/models, kept in found), or the bundled engine
 * started here. Returns SWEEP_OK or an exit code after printing why. */
static int start_target(const sweep_job *j, host_engine *host, const char **url, const char **model, char *found,
                        size_t nfound)
{
    char err[1024] = "";
    *url = j->scn->url;
    *model = j->scn->model;
    if (*url) {
        if (*model)
            return SWEEP_OK;
        if (sweep_only_model(*url, j->api_key, j->scn->headers, j->scn->n_headers, found, nfound, err,
                             sizeof err) == 0) {
            fprintf(stderr, "loadlaw sweep: model: %s, the only one the server lists (GET /v1/models)\n", found);
            *model = found;
            return SWEEP_OK;
        }
        fprintf(stderr, "loadlaw sweep: --model is required with a remote --url%s: %s\n",
                j->slot ? " (B's: a second --model, or one for both)" : "", err);
        return SWEEP_USAGE;
    }
    int rc = host_engine_start(host, j->engine_spec, j->profile_dir, on_engine_failure, err, sizeof err);
    if (rc == LL_EINVAL) {
        fprintf(stderr, "loadlaw sweep: --engine/engine: %s\n", err);
        return SWEEP_USAGE;
    }
    if (rc) {
        fprintf(stderr, "loadlaw sweep: starting the bundled engine: %s\n", err);
        return SWEEP_FAIL;
    }
    *url = host_engine_url(host);
    if (!*model)
        *model = host->model;
    return SWEEP_OK;
}

/* RUN_DIR (created) and its records writer: records.jsonl, or under K ranks
 * rank r's own rank-<r>.jsonl (path: the file, for dist_hooks to read back). */
static int open_records(const char *run_dir, int rank, ll_rec_writer **w, char *path, size_t pathlen)
{
    char err[1024] = "";
    int n = rank ? snprintf(path, pathlen, "%s/rank-%d.jsonl", run_dir, rank)
                 : snprintf(path, pathlen, "%s/records.jsonl", run_dir);
    if (n < 0 || (size_t)n >= pathlen) {
        fprintf(stderr, "loadlaw sweep: %s: run directory name too long\n", run_dir);
        return SWEEP_USAGE;
    }
    if (ll_mkdir_p(run_dir, err, sizeof err) || ll_rec_open(path, 0, w, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return SWEEP_FAIL;
    }
    return SWEEP_OK;
}

/* Rank 0's scraper (telemetry.h): the target's /metrics and the --metrics-url
 * ones; the key and secret headers the requests carry go to those on the
 * requests' origin only (tel_scrape_auth). NULL when there is nothing to scrape
 * or it could not start (said; the sweep goes on without it). */
static tel_scrape *start_scrape(const sweep_job *j, const char *url, ll_rec_writer *w)
{
    tel_scrape_target t[SWEEP_MAX_METRICS_URLS + 1];
    tel_scrape_auth auth = {.url = url, .key = j->api_key, .headers = j->scn->headers, .n_headers = j->scn->n_headers};
    char own[4200], err[1024] = "";
    size_t n = 0;
    tel_scrape *sc = NULL;
    if (!j->no_metrics && tel_scrape_default_url(url, own, sizeof own) == 0)
        t[n++] = (tel_scrape_target){.url = own};
    for (size_t i = 0; i < j->n_metrics_urls && i < SWEEP_MAX_METRICS_URLS; i++)
        t[n++] = (tel_scrape_target){.url = j->metrics_urls[i]};
    double interval_s = j->metrics_interval_s > 0 ? j->metrics_interval_s : 0.5;
    if (n && tel_scrape_start(t, n, &auth, interval_s, w, &sc, err, sizeof err))
        fprintf(stderr, "loadlaw sweep: %s (no server metrics)\n", err);
    return sc;
}

/* Rank 0's NVML sampler (telemetry.h) at the scrape interval, unless
 * --gpu off. Without NVML or a GPU the sweep goes on, and says so in one
 * line only where GPU figures were expected: --gpu on, or the bundled
 * engine on its cuda backend (a client host driving a remote server has no
 * GPU of interest, and auto stays quiet there). */
static tel_gpu *start_gpu(const sweep_job *j, ll_rec_writer *w, const char *backend)
{
    char why[512] = "";
    tel_gpu *g = NULL;
    if (j->gpu == SWEEP_GPU_OFF)
        return NULL;
    double interval_s = j->metrics_interval_s > 0 ? j->metrics_interval_s : 0.5;
    int expected = j->gpu == SWEEP_GPU_ON || (backend && strcmp(backend, "cuda") == 0);
    if ((tel_gpu_start(interval_s, w, &g, why, sizeof why) || !g) && expected)
        fprintf(stderr, "loadlaw sweep: gpu: %s; no GPU telemetry (--gpu off to skip)\n", why);
    return g;
}

/* The load generator's run over j's levels; under K ranks its levels are
 * shared out through dist_hooks, which read rank records back from
 * rec_path. SWEEP_OK with *run, or SWEEP_FAIL after printing why. */
static int create_run(const sweep_job *j, const char *url, const char *model, host_engine *host,
                      ll_rec_writer *w, const char *rec_path, int rank, sweep_find *find, lg_run **run)
{
    char err[1024] = "";
    int bundled = host->eng != NULL;
    /* How long rank 0 waits for a rank past its own share of a level: that
     * rank's last request may run a whole timeout, then a drain. */
    double wait_s = j->scn->timeout_s + j->scn->drain_s + 30;
    const lg_dist *dist = j->turns; /* an interleaved A/B's turns, or the ranks' hooks */
    if (j->mpi && dist_hooks(j->mpi, w, rec_path, wait_s, &dist)) {
        fprintf(stderr, "loadlaw sweep: out of memory\n");
        return SWEEP_FAIL;
    }
    lg_config lc = {.scn = j->scn, .prompts = j->prompts, .url = url, .model = model, .api_key = j->api_key,
                    .profile_dir = j->profile_dir,
                    .records = w, .engine_spec = bundled ? host->spec : NULL,
                    .engine_backend = bundled ? host->backend : NULL, .engine_law = bundled ? &host->law : NULL,
                    /* under mpirun stderr is its pipe, never a terminal: rank 0
                     * shows the line unless -q (mpirun passes it to the terminal) */
                    .scenario_name = j->scn->path, .progress = rank == 0 && !j->quiet && (isatty(2) || j->mpi),
                    .dist = dist, .stop_on_failed = !j->scn->keep_going, .max_failed = j->scn->max_failed,
                    .next_level = find ? sweep_find_next : NULL, .next_ctx = find};
    if (lg_run_create(&lc, run, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return SWEEP_FAIL;
    }
    return SWEEP_OK;
}

/* Rank 0's line on stderr: the scenario, the target, the levels and where
 * the records go. */
static void announce(const sweep_job *j, const char *url)
{
    char ranks[32] = "";
    if (j->mpi)
        snprintf(ranks, sizeof ranks, ", %d ranks", dist_ranks(j->mpi));
    char *shown = ll_redact_url(url); /* user:password@, ?key=: stderr is often kept in logs */
    fprintf(stderr, "loadlaw sweep: %s (%s defaults) -> %s (%zu levels%s), records in %s/records.jsonl\n",
            j->scn->path ? j->scn->path : "no scenario", j->scn->defaults ? j->scn->defaults : "file",
            shown ? shown : "(url)", j->scn->n_levels, ranks, j->run_dir);
    free(shown);
}

/* lg_run_sweep, with rank 0's server-metrics scraper and GPU sampler running
 * around it; its code (an error other than an interrupt is printed). */
static int sweep_with_telemetry(const sweep_job *j, lg_run *run, const char *url, ll_rec_writer *w,
                                int rank, const char *backend)
{
    char err[1024] = "";
    tel_scrape *sc = rank == 0 ? start_scrape(j, url, w) : NULL;
    tel_gpu *gs = rank == 0 ? start_gpu(j, w, backend) : NULL;
    int rc = lg_run_sweep(run, err, sizeof err);
    tel_gpu_stop(gs);
    tel_scrape_stop(sc);
    if (rc && rc != LL_EINTR)
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    return rc;
}

/* Run every level, or up to the first over max_failed unless keep_going
 * (*stopped_after: that level, or -1); the engine's steps go to the records
 * from the run line on. Returns SWEEP_OK, SWEEP_INTERRUPTED or SWEEP_FAIL, and the
 * run's counts. */
static int run_levels(const sweep_job *j, const char *url, const char *model, host_engine *host,
                      ll_rec_writer *w, const char *rec_path, sweep_find *find, size_t *n_ok, int *stopped_after)
{
    lg_run *run = NULL;
    int bundled = host->eng != NULL, rank = j->mpi ? dist_rank(j->mpi) : 0;
    *stopped_after = -1;
    sweep_find_set_writer(find, w);
    if (create_run(j, url, model, host, w, rec_path, rank, find, &run) != SWEEP_OK)
        return SWEEP_FAIL;
    if (sweep_fit_prompts(j, run, url, model, rank) != SWEEP_OK) {
        lg_run_free(run);
        return SWEEP_FAIL;
    }
    /* After the run line: a record before it would make the file unreadable. */
    host_engine_attach(host, w);
    publish(j->slot, run, w, j->scn->drain_s);
    char why[256];
    if (bundled && host_engine_failed(host, why, sizeof why))
        lg_run_interrupt(run, 0); /* it failed before on_engine_failure could see the run */
    if (rank == 0)
        announce(j, url);
    int rc = sweep_with_telemetry(j, run, url, w, rank, bundled ? host->backend : NULL);
    size_t failed = 0;
    lg_run_counts(run, n_ok, &failed);
    *stopped_after = lg_run_stopped_after(run);
    /* All ranks left the level loop together (a stop is agreed in
     * before_level): each may end on its own, without aborting the job. */
    if (j->mpi && (rc == 0 || rc == LL_EINTR))
        dist_synced(j->mpi);
    /* The writer stays published: a second Ctrl-C still drains it. */
    publish(j->slot, NULL, w, 0);
    lg_run_free(run);
    return rc == LL_EINTR ? SWEEP_INTERRUPTED : rc ? SWEEP_FAIL : SWEEP_OK;
}

/* Detach the engine, then close the writer: every record is on disk. */
static int close_records(int slot, host_engine *host, ll_rec_writer *w)
{
    host_engine_detach(host);
    publish(slot, NULL, NULL, 0);
    int rc = ll_rec_close(w);
    if (rc)
        fprintf(stderr, "loadlaw sweep: writing the records failed: %s\n", ll_strerror(rc));
    return rc ? SWEEP_FAIL : SWEEP_OK;
}

/* The law line and RUN_DIR/report.html. A run without a law is reported
 * (the measurements are still there), not an error of the sweep. */
static void print_law_and_report(const char *run_dir, const fit_run *fr, const fit_result *res)
{
    char err[512] = "", path[4096] = "";
    /* the headline starts "model (...)"; a run without a law says so */
    printf(res->law.ok ? "\n" : "\nlaw: ");
    rpt_print_law_line(stdout, res);
    if (rpt_write_html_from(run_dir, fr, res, NULL, path, sizeof path, err, sizeof err))
        fprintf(stderr, "loadlaw sweep: report not written: %s\n", err);
    else
        printf("report: %s\n", path);
}

/* The fit's notes (per-level warnings: counts reconciled with the server's
 * usage, a client that set the pace, ...): on stderr, where a user who
 * redirects the tables still sees them. */
static void print_notes(const fit_result *res)
{
    if (!res->n_notes)
        return;
    fflush(stdout);
    fprintf(stderr, "notes:\n");
    for (size_t i = 0; i < res->n_notes; i++)
        fprintf(stderr, "  %s\n", res->notes[i]);
}

/* The first level over max_failed (an interrupted one not counted), or the
 * one the run stopped after (stopped_after, -1: none): 1 after saying which
 * level, how many of its requests failed and of which classes, and which
 * levels were not sent. Judged from the fit's counts, the same the tables
 * print. */
static int too_many_failed(const fit_result *res, double max_failed, const scn_scenario *scn, int stopped_after)
{
    const fit_level *L = NULL;
    for (size_t i = 0; i < res->n_levels && !L; i++) {
        const fit_level *c = &res->levels[i];
        /* an interrupted level's last requests were cut at the deadline:
         * failures of the interrupt, not of the server */
        if (c->level == stopped_after ||
            (!c->interrupted && c->n_sent_failed && (double)c->n_sent_failed / (double)c->n_sent > max_failed))
            L = c;
    }
    if (!L)
        return 0;
    fflush(stdout);
    fprintf(stderr, "loadlaw sweep: %zu of %zu requests failed at level %d (C=%d), over --max-failed %g:",
            L->n_sent_failed, L->n_sent, L->level, L->concurrency, scn->max_failed);
    for (int c = LL_ERRC_OK + 1; c < LL_ERRC__COUNT; c++)
        if (L->failed_by_class[c])
            fprintf(stderr, " %s=%zu", ll_err_class_name((ll_err_class)c), L->failed_by_class[c]);
    for (size_t i = (size_t)stopped_after + 1; stopped_after >= 0 && i < scn->n_levels; i++)
        fprintf(stderr, "%s %zu (C=%d)", i == (size_t)stopped_after + 1 ? "; stopped before levels" : ",", i,
                scn->levels[i].concurrency);
    fprintf(stderr, "%s\n", stopped_after >= 0 ? " (--keep-going sends them)" : "");
    return 1;
}

/* Fit the records once and print that result everywhere: the per-level
 * tables, summary.json, and (report = 1) the law and the report. Returns
 * SWEEP_OK, or SWEEP_FAIL when no summary was written or a level failed more
 * than max_failed of its requests (everything is still written; the run
 * may have stopped after it: stopped_after, too_many_failed). */
static int finish(const char *run_dir, int report, double max_failed, const scn_scenario *scn, int stopped_after)
{
    char err[1024] = "";
    fit_run *fr = NULL;
    fit_result *res = NULL;
    int ret = SWEEP_FAIL;
    if (fit_open(run_dir, NULL, &fr, &res, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: no summary: %s\n", err);
        printf("run: %s\n", run_dir);
        goto out;
    }
    rpt_print_levels(stdout, res);
    print_notes(res);
    if (rpt_write_summary(run_dir, fr, res, err, sizeof err))
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    else
        ret = SWEEP_OK;
    printf("run: %s\n", run_dir);
    if (ret == SWEEP_OK && report)
        print_law_and_report(run_dir, fr, res);
    if (ret == SWEEP_OK && too_many_failed(res, max_failed, scn, stopped_after))
        ret = SWEEP_FAIL;
out:
    fflush(stdout);
    fit_result_free(res);
    fit_run_free(fr);
    return ret;
}

/* A run folder that already holds records is another run's measurements:
 * refused (a usage error), never overwritten. */
int sweep_check_fresh_dir(const char *run_dir)
{
    char path[4096];
    struct stat st;
    int n = snprintf(path, sizeof path, "%s/records.jsonl", run_dir);
    if (n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0 && st.st_size > 0) {
        fprintf(stderr,
                "loadlaw sweep: %s already holds a run (records.jsonl, %lld bytes): choose another -o DIR, "
                "or remove that one first\n",
                run_dir, (long long)st.st_size);
        return SWEEP_USAGE;
    }
    return SWEEP_OK;
}

int sweep_side_open(const sweep_job *j, sweep_side *sd)
{
    memset(sd, 0, sizeof *sd);
    sd->stopped_after = -1;
    int rank = j->mpi ? dist_rank(j->mpi) : 0;
    int ret = rank == 0 ? sweep_check_fresh_dir(j->run_dir) : SWEEP_OK;
    if (ret == SWEEP_OK && rank == 0)
        ret = start_target(j, &sd->host, &sd->url, &sd->model, sd->found_model, sizeof sd->found_model);
    if (j->mpi)
        ret = sweep_share_target(j, ret, &sd->url, &sd->model, &sd->hold_url, &sd->hold_model);
    if (ret == SWEEP_OK)
        ret = open_records(j->run_dir, rank, &sd->w, sd->rec_path, sizeof sd->rec_path);
    if (ret == SWEEP_OK && rank == 0 && sweep_find_new(j->scn, j->run_dir, &sd->find))
        ret = SWEEP_FAIL;
    return ret;
}

int sweep_side_run(const sweep_job *j, sweep_side *sd)
{
    int ret = run_levels(j, sd->url, sd->model, &sd->host, sd->w, sd->rec_path, sd->find, &sd->n_ok,
                         &sd->stopped_after);
    int crc = close_records(j->slot, &sd->host, sd->w);
    sd->w = NULL;
    return ret == SWEEP_OK ? crc : ret;
}

void sweep_side_abandon(sweep_side *sd)
{
    if (sd->w) { /* opened, never run: the run line alone stays */
        host_engine_detach(&sd->host);
        ll_rec_close(sd->w);
        sd->w = NULL;
    }
    host_engine_stop(&sd->host);
    sweep_find_free(sd->find);
    sd->find = NULL;
    free(sd->hold_url);
    free(sd->hold_model);
    sd->hold_url = sd->hold_model = NULL;
}

int sweep_side_finish(const sweep_job *j, sweep_side *sd, int ret)
{
    char why[512];
    int rank = j->mpi ? dist_rank(j->mpi) : 0;
    if (rank != 0)
        goto out; /* its records are in rank 0's file; rank 0 fits and reports */
    if (host_engine_failed(&sd->host, why, sizeof why)) {
        fprintf(stderr, "loadlaw sweep: the bundled engine failed: %s (records so far are kept)\n", why);
        ret = SWEEP_FAIL;
    }
    /* Failures are data, but a run where nothing succeeded measured nothing. */
    int none_ok = ret == SWEEP_OK && sd->n_ok == 0;
    /* An interrupted or failed run still gets the summary of what it
     * recorded. A search judged each level's failures itself (find.c). */
    int frc = finish(j->run_dir, ret == SWEEP_OK && !none_ok && !j->no_report,
                     none_ok || sd->find ? 1.0 : j->scn->max_failed, j->scn, sd->stopped_after);
    if (none_ok) {
        fprintf(stderr, "loadlaw sweep: no request succeeded (see the failed classes above)\n");
        ret = SWEEP_FAIL;
    }
    if (ret == SWEEP_OK)
        ret = frc;
    if (sd->find)
        ret = sweep_find_report(sd->find, ret);
out:
    sweep_side_abandon(sd);
    return ret;
}

int sweep_one(const sweep_job *j)
{
    sweep_side sd;
    int ret = sweep_side_open(j, &sd);
    if (ret != SWEEP_OK) {
        sweep_side_abandon(&sd);
        return ret;
    }
    ret = sweep_side_run(j, &sd);
    return sweep_side_finish(j, &sd, ret);
}

int sweep_run(const sweep_job *j)
{
    return j->scn->ab.enabled ? sweep_ab(j, j->run_dir) : sweep_one(j);
}

void sweep_default_run_dir(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    struct stat st;
    char base[64];
    gmtime_r(&t, &tm);
    strftime(base, sizeof base, "runs/%Y%m%d-%H%M%S", &tm);
    snprintf(out, n, "%s", base);
    for (int i = 2; stat(out, &st) == 0 && i < 1000; i++)
        snprintf(out, n, "%s-%d", base, i);
}
