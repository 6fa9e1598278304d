/* cmd_sweep.c: `loadlaw sweep [SCENARIO.json] [flags]`: load a scenario, let
 * flags override it, start the bundled engine in this process when no URL is
 * given, drive the levels (loadgen), copy the engine's step log into the
 * records, then fit the law and write the report. A scenario with "ab" runs
 * that twice and compares (cmd_sweep_ab.c).
 *
 * DESIGN (signals, through cli/signals.h): the first SIGINT/SIGTERM asks
 * loadgen to stop issuing and drain until the scenario's drain_s, the second
 * exits at once with 130. Each first copies the engine's step log so far into
 * the records (a killed level keeps its steps). Records are flushed per line,
 * so both leave a valid records.jsonl. Exit: 0 ok, 1 failure, 2 usage, 3 ab
 * gate missed, 130 interrupted. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "engine.h"
#include "fit.h"
#include "loadgen.h"
#include "report.h"
#include "scenario.h"
#include "signals.h"
#include "sweep.h"

#ifndef LOADLAW_SOURCE_DIR
#define LOADLAW_SOURCE_DIR "."
#endif

static void sweep_usage(FILE *f)
{
    fprintf(f,
            "usage: loadlaw sweep [SCENARIO.json] [options]\n"
            "\n"
            "Drives an OpenAI-compatible endpoint through concurrency levels and records every\n"
            "token's arrival in RUN_DIR/records.jsonl; ends with the fitted law and the report.\n"
            "With no SCENARIO, runs scenarios/default.json (bundled engine, 52+30n, C=1..64).\n"
            "A scenario with \"ab\" (e.g. scenarios/kernel-ab.json) runs the sweep once per side,\n"
            "each on its own bundled engine, into RUN_DIR/<side>, then compares them as\n"
            "`loadlaw compare` does (RUN_DIR/compare.html; exit 3 when its expect_speedup is\n"
            "missed); --engine and --url are usage errors there (edit the sides instead).\n"
            "\n"
            "target:\n"
            "  --url URL            remote server (default: start the bundled engine in-process)\n"
            "  --engine SPEC        bundled engine settings, e.g. backend=synthetic,law=52+30n,time_scale=0.1\n"
            "  --model NAME         model to ask for (default: the bundled engine's name)\n"
            "  --endpoint chat|completions\n"
            "  --api-key KEY        Bearer token (default: $OPENAI_API_KEY); never written anywhere\n"
            "load:\n"
            "  -c, --concurrency L  closed-loop levels, e.g. 1,2,4,8,16,32,64\n"
            "  -n, --requests N     measured requests per level (default max(1.5*C, 8))\n"
            "  --warmup N           extra requests per level first, excluded from statistics\n"
            "  --rate R             open loop: R requests/s (alone: one level, no cap; with -c:\n"
            "                       one open level per C, C capping the requests in flight)\n"
            "  --arrival poisson|constant\n"
            "  --duration S         end each level's issuing after S (30s, 2m)\n"
            "  --threads N          worker threads (default: number of cores)\n"
            "request:\n"
            "  --max-tokens N  --think-tokens N  --timeout S  --seed N\n"
            "  --prompts FILE       .jsonl of {\"prompt\":..} or ShareGPT .json\n"
            "output:\n"
            "  -o, --output DIR     run directory (default runs/<timestamp>)\n"
            "  --no-report          skip the fit and report at the end\n"
            "  -q, --quiet          no progress line\n"
            "\n"
            "exit codes: 0 ok, 1 failure, 2 usage error, 3 ab gate missed, 130 interrupted (records kept)\n");
}

/* ---- engine step log -> records ------------------------------------------ */

/* mu: the driver (at each level's end) and the signal thread (at an
 * interrupt) both copy; `next` makes each step land in the records once. */
typedef struct step_copy {
    pthread_mutex_t mu;
    eng_engine *eng;
    size_t next;
} step_copy;

static void copy_steps_locked(lg_run *r, step_copy *sc)
{
    eng_step buf[1024];
    int64_t epoch = lg_run_epoch_ns(r);
    size_t got;
    while ((got = eng_steps(sc->eng, sc->next, buf, 1024)) > 0) {
        sc->next += got;
        for (size_t i = 0; i < got; i++) {
            if (buf[i].start_ns < epoch)
                continue; /* before the run: not in the run's clock range */
            cJSON *o = cJSON_CreateObject();
            if (!o)
                return;
            cJSON_AddStringToObject(o, "type", "step");
            cJSON_AddNumberToObject(o, "start_ns", (double)(buf[i].start_ns - epoch));
            cJSON_AddNumberToObject(o, "dur_ns", (double)buf[i].dur_ns);
            cJSON_AddNumberToObject(o, "n_decode", buf[i].n_decode);
            cJSON_AddNumberToObject(o, "n_running", buf[i].n_running);
            cJSON_AddNumberToObject(o, "prefill_tok", buf[i].prefill_tok);
            cJSON_AddNumberToObject(o, "ctx_tok", (double)buf[i].ctx_tok);
            if (lg_run_write_record(r, o))
                ll_warn("writing step records failed");
            cJSON_Delete(o);
        }
    }
}

/* lg_level_cb (level = -1: called at an interrupt). */
static void copy_steps(lg_run *r, int level, void *ctx)
{
    step_copy *sc = ctx;
    (void)level;
    if (!sc || !sc->eng)
        return;
    pthread_mutex_lock(&sc->mu);
    copy_steps_locked(r, sc);
    pthread_mutex_unlock(&sc->mu);
}

/* ---- signals (cli/signals.h) ----------------------------------------------- */

/* g_mu keeps the run and its engine alive while the signal thread uses them. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static lg_run *g_run;
static step_copy *g_steps;
static double g_drain_s = 10;

/* Second signal (or a first one with no run going): keep the steps, quit. */
static _Noreturn void on_second(int sig, void *ctx)
{
    static const char m[] = "\nloadlaw: interrupted; records written so far are kept\n";
    (void)sig;
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    if (g_run)
        copy_steps(g_run, -1, g_steps);
    if (write(2, m, sizeof m - 1) < 0) {
        /* nothing more to do */
    }
    _exit(CLI_INTERRUPTED);
}

static void on_first(int sig, void *ctx)
{
    pthread_mutex_lock(&g_mu);
    lg_run *r = g_run;
    if (!r) {
        pthread_mutex_unlock(&g_mu);
        on_second(sig, ctx);
    }
    fprintf(stderr, "\nloadlaw: stopping: in-flight requests may finish within %.0f s "
                    "(Ctrl-C again to quit now)\n", g_drain_s);
    lg_run_interrupt(r, g_drain_s);
    copy_steps(r, -1, g_steps); /* kept even if the drain is killed */
    pthread_mutex_unlock(&g_mu);
}

/* The bundled engine's scheduler stopped on a failed step (scheduler thread).
 * From now on every request would get a 503: stop issuing instead of
 * recording levels of failures; what was measured is kept, and the sweep
 * exits 1 with the engine's reason. */
static void on_engine_failure(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* read back with eng_failed once the sweep returns */
    pthread_mutex_lock(&g_mu);
    if (g_run)
        lg_run_interrupt(g_run, 0);
    pthread_mutex_unlock(&g_mu);
}

/* ---- options -------------------------------------------------------------- */

typedef struct opts {
    const char *scenario, *url, *engine, *model, *endpoint, *api_key, *output, *prompts, *arrival;
    const char *conc;
    const char *rate, *duration, *timeout;
    long requests, warmup, threads, max_tokens, think_tokens, seed;
    int no_report, quiet;
} opts;

static int need(int argc, char **argv, int *i, const char **out)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "loadlaw sweep: %s needs a value\n", argv[*i]);
        return -1;
    }
    *out = argv[++*i];
    return 0;
}

static int need_long(int argc, char **argv, int *i, long lo, long hi, long *out)
{
    const char *v;
    uint64_t x;
    if (need(argc, argv, i, &v))
        return -1;
    if (ll_parse_count(v, &x) || (long)x < lo || (long)x > hi) {
        fprintf(stderr, "loadlaw sweep: %s: expected an integer in [%ld, %ld], got '%s'\n", argv[*i - 1], lo, hi, v);
        return -1;
    }
    *out = (long)x;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->requests = o->warmup = o->threads = o->max_tokens = o->think_tokens = o->seed = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            sweep_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--url")) rc = need(argc, argv, &i, &o->url);
        else if (!strcmp(a, "--engine")) rc = need(argc, argv, &i, &o->engine);
        else if (!strcmp(a, "--model")) rc = need(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--endpoint")) rc = need(argc, argv, &i, &o->endpoint);
        else if (!strcmp(a, "--api-key")) rc = need(argc, argv, &i, &o->api_key);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) rc = need(argc, argv, &i, &o->output);
        else if (!strcmp(a, "--prompts")) rc = need(argc, argv, &i, &o->prompts);
        else if (!strcmp(a, "--arrival")) rc = need(argc, argv, &i, &o->arrival);
        else if (!strcmp(a, "-c") || !strcmp(a, "--concurrency")) rc = need(argc, argv, &i, &o->conc);
        else if (!strcmp(a, "--rate")) rc = need(argc, argv, &i, &o->rate);
        else if (!strcmp(a, "--duration")) rc = need(argc, argv, &i, &o->duration);
        else if (!strcmp(a, "--timeout")) rc = need(argc, argv, &i, &o->timeout);
        else if (!strcmp(a, "-n") || !strcmp(a, "--requests")) rc = need_long(argc, argv, &i, 1, 100000000, &o->requests);
        else if (!strcmp(a, "--warmup")) rc = need_long(argc, argv, &i, 0, 100000000, &o->warmup);
        else if (!strcmp(a, "--threads")) rc = need_long(argc, argv, &i, 1, 4096, &o->threads);
        else if (!strcmp(a, "--max-tokens")) rc = need_long(argc, argv, &i, 1, 10000000, &o->max_tokens);
        else if (!strcmp(a, "--think-tokens")) rc = need_long(argc, argv, &i, 0, 10000000, &o->think_tokens);
        else if (!strcmp(a, "--seed")) rc = need_long(argc, argv, &i, 0, 0x7fffffffL, &o->seed);
        else if (!strcmp(a, "--no-report")) o->no_report = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o->quiet = 1;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "loadlaw sweep: unknown option '%s' (try loadlaw sweep --help)\n", a);
            return -1;
        } else if (o->scenario) {
            fprintf(stderr, "loadlaw sweep: one scenario only ('%s' and '%s')\n", o->scenario, a);
            return -1;
        } else {
            o->scenario = a;
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* Scenario files: as given (relative to the cwd), else in the source tree. */
static int find_scenario(const char *name, char *out, size_t n)
{
    struct stat st;
    const char *forms[] = {"%s", LOADLAW_SOURCE_DIR "/%s", LOADLAW_SOURCE_DIR "/scenarios/%s"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(out, n, forms[i], name);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
            return 0;
        if (name[0] == '/')
            break;
    }
    snprintf(out, n, "%s", name);
    return -1;
}

/* Apply the flags over the scenario. Returns 0 or prints why and returns -1. */
static int apply_flags(const opts *o, scn_scenario *s)
{
    int rc = 0;
    if (o->url)
        rc |= scn_set_str(&s->url, o->url);
    if (o->engine)
        rc |= scn_set_str(&s->engine_spec, o->engine);
    if (o->model)
        rc |= scn_set_str(&s->model, o->model);
    if (o->output)
        rc |= scn_set_str(&s->output, o->output);
    if (rc)
        return -1;
    if (o->endpoint) {
        if (strcmp(o->endpoint, "chat") && strcmp(o->endpoint, "completions")) {
            fprintf(stderr, "loadlaw sweep: --endpoint: expected chat or completions\n");
            return -1;
        }
        s->endpoint = o->endpoint[0] == 'c' && o->endpoint[1] == 'h' ? SCN_ENDPOINT_CHAT : SCN_ENDPOINT_COMPLETIONS;
    }
    if (o->prompts) {
        size_t l = strlen(o->prompts);
        s->source = l > 6 && !strcmp(o->prompts + l - 6, ".jsonl") ? SCN_SOURCE_JSONL : SCN_SOURCE_SHAREGPT;
        if (scn_set_str(&s->prompts_path, o->prompts))
            return -1;
    }
    if (o->conc) {
        int *c = NULL;
        size_t n = 0;
        if (ll_parse_int_list(o->conc, &c, &n) || n == 0) {
            fprintf(stderr, "loadlaw sweep: -c: expected a list like 1,2,4,8, got '%s'\n", o->conc);
            free(c);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (c[i] < 0 || c[i] > 1000000) {
                fprintf(stderr, "loadlaw sweep: -c: %d out of range [0, 1000000]\n", c[i]);
                free(c);
                return -1;
            }
        rc = scn_set_concurrency(s, c, n);
        free(c);
        if (rc)
            return -1;
    }
    if (o->rate && !o->conc) {
        /* --rate alone: one open-loop level with no cap on requests in flight. */
        int zero = 0;
        if (scn_set_concurrency(s, &zero, 1))
            return -1;
    }
    for (size_t i = 0; i < s->n_levels; i++) {
        scn_level *l = &s->levels[i];
        double v;
        if (o->requests > 0)
            l->n_requests = (int)o->requests;
        if (o->warmup >= 0)
            l->warmup = (int)o->warmup;
        if (o->rate) {
            /* The floor keeps one arrival gap (1/rate s) within int64 ns. */
            if (ll_parse_double(o->rate, &v) || !(v >= 1e-6 && v <= 1e7)) {
                fprintf(stderr, "loadlaw sweep: --rate: expected requests/s in [1e-6, 1e7], got '%s'\n", o->rate);
                return -1;
            }
            l->rate_per_s = v;
        }
        if (o->arrival) {
            if (strcmp(o->arrival, "poisson") && strcmp(o->arrival, "constant")) {
                fprintf(stderr, "loadlaw sweep: --arrival: expected poisson or constant\n");
                return -1;
            }
            l->arrival = o->arrival[0] == 'p' ? SCN_ARRIVAL_POISSON : SCN_ARRIVAL_CONSTANT;
        }
        if (o->duration) {
            /* The scenario file's bound: the loadgen turns it into int64 ns. */
            if (ll_parse_duration_s(o->duration, &v) || !(v > 0) || v > 1e7) {
                fprintf(stderr, "loadlaw sweep: --duration: expected a duration like 30s (at most 1e7 s), got '%s'\n",
                        o->duration);
                return -1;
            }
            l->duration_s = v;
        }
    }
    if (o->timeout) {
        double v;
        if (ll_parse_duration_s(o->timeout, &v) || !(v > 0) || v > 1e6) {
            fprintf(stderr, "loadlaw sweep: --timeout: expected a duration (at most 1e6 s), got '%s'\n", o->timeout);
            return -1;
        }
        s->timeout_s = v;
    }
    if (o->threads > 0)
        s->threads = (int)o->threads;
    if (o->max_tokens > 0)
        s->max_tokens = (int)o->max_tokens;
    if (o->think_tokens >= 0)
        s->think_tokens = (int)o->think_tokens;
    if (o->seed >= 0)
        s->seed = (uint64_t)o->seed;
    return 0;
}

/* ---- the end: law and report ---------------------------------------------- */

/* Fit the run's steady samples, print the law, write RUN_DIR/report.html.
 * A run the fit cannot use (e.g. too few steady samples) is reported, not an
 * error of the sweep: the measurements are still there. */
static void sweep_finish(const char *run_dir)
{
    char err[512] = "", path[4096] = "";
    fit_run *fr = NULL;
    fit_result *res = NULL;
    fit_options opt;
    fit_options_default(&opt);
    if (fit_load_run(run_dir, &fr, err, sizeof err) || fit_analyze(fr, &opt, &res, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: no law fitted: %s\n", err);
    } else {
        printf("\nlaw: ");
        fit_print_law_line(stdout, res);
        if (rpt_write_html_from(run_dir, fr, res, NULL, path, sizeof path, err, sizeof err))
            fprintf(stderr, "loadlaw sweep: report not written: %s\n", err);
        else
            printf("report: %s\n", path);
    }
    fit_result_free(res);
    fit_run_free(fr);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    /* One socket per in-flight stream (and the engine's side of it). */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            ll_warn("could not raise the open-file limit: %s", strerror(errno));
    }
}

static void default_run_dir(char *out, size_t n)
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

int sweep_one(const sweep_job *j)
{
    char err[1024] = "";
    const scn_scenario *scn = j->scn;
    eng_engine *eng = NULL;
    lg_run *run = NULL;
    cJSON *law = NULL;
    int ret = CLI_FAIL, rc;
    const char *url = scn->url, *model = scn->model;
    step_copy sc = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char spec_buf[1024] = "";
    if (!url) {
        eng_config ec;
        eng_config_default(&ec);
        if (eng_parse_spec(j->engine_spec, &ec, err, sizeof err)) {
            fprintf(stderr, "loadlaw sweep: --engine/engine: %s\n", err);
            ret = CLI_USAGE;
            goto out;
        }
        if (ec.max_connections < 16384)
            ec.max_connections = 16384;
        if (j->profile_dir)
            ec.profile_dir = j->profile_dir; /* eng_start copies it */
        ec.on_failure = on_engine_failure;
        if ((rc = eng_start(&ec, &eng, err, sizeof err))) {
            fprintf(stderr, "loadlaw sweep: starting the bundled engine: %s\n", err);
            goto out;
        }
        url = eng_url(eng);
        if (!model)
            model = ec.model;
        sc.eng = eng;
        sc.next = eng_step_count(eng);
        snprintf(spec_buf, sizeof spec_buf, "%s", j->engine_spec ? j->engine_spec : "backend=synthetic");
        if (ec.backend == ENG_BACKEND_SYNTHETIC && (law = cJSON_CreateObject())) {
            /* The law as played, in scaled milliseconds (records.md). */
            cJSON_AddNumberToObject(law, "a_ms", ec.law_a_ms * ec.time_scale);
            cJSON_AddNumberToObject(law, "b_ms", ec.law_b_ms * ec.time_scale);
            cJSON_AddNumberToObject(law, "c_ms_per_ktok", ec.law_c_ms_per_ktok * ec.time_scale);
            cJSON_AddNumberToObject(law, "p_ms_per_tok", ec.law_p_ms_per_tok * ec.time_scale);
        }
    } else if (!model) {
        fprintf(stderr, "loadlaw sweep: --model is required with a remote --url\n");
        ret = CLI_USAGE;
        goto out;
    }
    lg_config lc = {.scn = scn, .prompts = j->prompts, .url = url, .model = model,
                    .api_key = j->api_key, .run_dir = j->run_dir,
                    .engine_spec = eng ? spec_buf : NULL, .engine_law = law,
                    .scenario_name = scn->path, .progress = !j->quiet && isatty(2),
                    .on_level_end = copy_steps, .cb_ctx = &sc};
    if ((rc = lg_run_create(&lc, &run, err, sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        goto out;
    }
    pthread_mutex_lock(&g_mu);
    g_run = run;
    g_steps = &sc;
    pthread_mutex_unlock(&g_mu);
    fprintf(stderr, "loadlaw sweep: %s -> %s (%zu levels), records in %s/records.jsonl\n",
            scn->path ? scn->path : "scenario", url, scn->n_levels, j->run_dir);
    rc = lg_run_sweep(run, err, sizeof err);
    if (rc && rc != LL_EINTR)
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    /* Steps after the last level's end (or all of them when the sweep
     * failed before one ended) still belong to the run. */
    copy_steps(run, -1, &sc);
    int wrc = lg_run_write_summary(run, err, sizeof err);
    if (wrc)
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    lg_run_print_table(run, stdout);
    printf("run: %s\n", j->run_dir);
    fflush(stdout);
    ret = rc == LL_EINTR ? CLI_INTERRUPTED : rc || wrc ? CLI_FAIL : CLI_OK;
    char ferr[512];
    if (eng && eng_failed(eng, ferr, sizeof ferr)) {
        fprintf(stderr, "loadlaw sweep: the bundled engine failed: %s (records so far are kept)\n", ferr);
        ret = CLI_FAIL;
    }
    size_t nl, n_ok = 0;
    const lg_level_summary *ls = lg_run_levels(run, &nl);
    for (size_t i = 0; i < nl; i++)
        n_ok += (size_t)ls[i].ok;
    if (ret == CLI_OK && n_ok == 0) {
        /* Failures are data, but a run where nothing succeeded measured nothing. */
        fprintf(stderr, "loadlaw sweep: no request succeeded (see the failed classes above)\n");
        ret = CLI_FAIL;
    }
    if (ret == CLI_OK && !j->no_report)
        sweep_finish(j->run_dir);
out:
    if (run) {
        pthread_mutex_lock(&g_mu);
        g_run = NULL;
        g_steps = NULL;
        pthread_mutex_unlock(&g_mu);
        lg_run_free(run);
    }
    if (eng)
        eng_stop(eng);
    cJSON_Delete(law);
    return ret;
}

int cmd_sweep(int argc, char **argv)
{
    opts o;
    char err[1024] = "", spath[4096], run_dir[4096];
    scn_scenario *scn = NULL;
    scn_prompts *prompts = NULL;
    int ret = CLI_FAIL, rc;
    int pa = parse_args(argc, argv, &o);
    if (pa)
        return pa > 0 ? CLI_OK : CLI_USAGE;
    find_scenario(o.scenario ? o.scenario : "scenarios/default.json", spath, sizeof spath);
    if ((rc = scn_load_file(spath, &scn, err, sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return rc == LL_EIO ? CLI_FAIL : CLI_USAGE;
    }
    if (scn->ab.enabled && (o.engine || o.url)) {
        /* Overriding both sides with one spec would compare a run with itself. */
        fprintf(stderr, "loadlaw sweep: %s: an \"ab\" scenario takes no %s (edit ab.a/ab.b.engine)\n", spath,
                o.engine ? "--engine" : "--url");
        scn_free(scn);
        return CLI_USAGE;
    }
    if (apply_flags(&o, scn) || scn_validate(scn, err, sizeof err)) {
        if (err[0])
            fprintf(stderr, "loadlaw sweep: %s\n", err);
        scn_free(scn);
        return CLI_USAGE;
    }
    g_drain_s = scn->drain_s;
    if ((rc = scn_prompts_load(scn, &prompts, err, sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        goto out;
    }
    raise_nofile();
    if (cli_signals_start(on_first, on_second, NULL, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        goto out;
    }
    const char *key = o.api_key ? o.api_key : getenv(scn->api_key_env ? scn->api_key_env : "OPENAI_API_KEY");
    if (scn->output)
        snprintf(run_dir, sizeof run_dir, "%s", scn->output);
    else
        default_run_dir(run_dir, sizeof run_dir);
    sweep_job job = {.scn = scn, .prompts = prompts, .engine_spec = scn->engine_spec, .run_dir = run_dir,
                     .api_key = key && key[0] ? key : NULL, .quiet = o.quiet, .no_report = o.no_report};
    ret = scn->ab.enabled ? sweep_ab(&job, run_dir) : sweep_one(&job);
    cli_signals_stop();
out:
    scn_prompts_free(prompts);
    scn_free(scn);
    return ret;
}
