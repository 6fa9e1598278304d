/* cmd_serve.c: `loadlaw serve`, a thin wrapper over engine.h: flags become
 * engine keys (--time-scale -> time_scale), the URL goes to stdout so scripts
 * can read it, and SIGINT/SIGTERM stop the engine cleanly.
 *
 * DESIGN (signals): cli_signals (signals.c) turns the first SIGINT/SIGTERM
 * into a post on a semaphore that main waits on; main then stops the engine
 * and prints "stopped on SIG... after N steps" (exit 0). A second signal while
 * the engine stops exits at once with 130. A failed backend step (the engine
 * is then dead: every request would get 503) posts the same semaphore through
 * eng_config.on_failure; main logs the reason and exits 1. */
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "engine.h"
#include "opts.h"
#include "signals.h"

/* Every option but -v is an engine key, and the engine's key table
 * (eng_config_key: name, value form, help) is this command's option table:
 * --time-scale sets time_scale through eng_config_set, which checks the
 * value. A key added to the engine is a serve option without a change here.
 * A switch key (form "0|1") is a flag: --no-control sets no_control=1. */
enum { K_ENGINE = 256 };

#define SERVE_INTRO                                                                  \
    "Run the bundled decode engine behind an OpenAI-compatible server until\n"       \
    "SIGINT/SIGTERM. Prints the URL on stdout. Port 8000 unless --port says\n"      \
    "otherwise. Each option is a key of `loadlaw sweep --engine` (dashes for _).\n"

#define SERVE_OUTRO                                                                  \
    "Security: with --api-key (or LOADLAW_API_KEY) every endpoint but /health needs\n" \
    "\"Authorization: Bearer KEY\" (401 otherwise); --control-key (LOADLAW_CONTROL_KEY)\n" \
    "gives the control routes (/start_profile, /stop_profile, /reset_prefix_cache)\n" \
    "their own key, --no-control turns them off. Traces go under --profile-dir only.\n" \
    "A --host other than 127.x without a key is warned about.\n"                     \
    "The synthetic backend's scheduler thread asks for SCHED_FIFO priority 1 so it\n" \
    "wakes on its deadlines on a busy machine; where that is refused (the usual case\n" \
    "without CAP_SYS_NICE or an RLIMIT_RTPRIO), it runs at normal priority and -v\n" \
    "says so. Step times are then only as punctual as the machine is idle.\n"         \
    "Exit: 0 after a clean stop on SIGINT/SIGTERM (a second one exits with 130),\n"  \
    "1 if the engine cannot start or a backend step fails, 2 for a usage error.\n"

/* The option table: one row per engine key ("time_scale" -> --time-scale),
 * then -v. Caller frees with serve_table_free. NULL on no memory. */
static cli_opt *serve_table_new(void)
{
    size_t n = 0;
    while (eng_config_key(n, NULL, NULL))
        n++;
    cli_opt *t = calloc(n + 2, sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *form, *help;
        char *name = strdup(eng_config_key(i, &form, &help));
        if (!name) {
            for (size_t k = 0; k < i; k++)
                free((char *)t[k].name);
            free(t);
            return NULL;
        }
        for (char *c = name; *c; c++)
            if (*c == '_')
                *c = '-';
        if (strcmp(form, "0|1") == 0)
            form = NULL; /* a flag */
        t[i] = (cli_opt){name, K_ENGINE + (int)i, form, help}; /* distinct keys: getopt_long tells them apart */
    }
    t[n] = (cli_opt){"verbose", 'v', NULL, "log engine events to stderr"};
    return t;
}

static void serve_table_free(cli_opt *t)
{
    for (size_t i = 0; t && t[i].name; i++)
        if (t[i].key >= K_ENGINE)
            free((char *)t[i].name);
    free(t);
}

static const cli_cmd *g_serve_cmd; /* for messages from on_opt */

/* --time-scale X -> eng_config_set(cfg, "time_scale", X). */
static int on_opt(const cli_opt *o, const char *v, void *ctx)
{
    eng_config *cfg = ctx;
    char key[64], err[512];
    if (!o)
        return cli_usage_error(g_serve_cmd, "unexpected argument '%s' (try loadlaw serve --help)", v);
    if (o->key == 'v') {
        ll_log_level = LL_LOG_INFO;
        return 0;
    }
    snprintf(key, sizeof key, "%s", o->name);
    for (char *k = key; *k; k++)
        if (*k == '-')
            *k = '_';
    if (eng_config_set(cfg, key, o->arg ? v : "1", err, sizeof err))
        return cli_usage_error(g_serve_cmd, "--%s: %s", o->name, err);
    return 0;
}

typedef struct serve_wait {
    sem_t posted;
    atomic_int sig;
} serve_wait;

/* On the signal thread: wake main, which stops the engine. */
static void serve_on_signal(int sig, void *ctx)
{
    serve_wait *w = ctx;
    atomic_store(&w->sig, sig);
    fprintf(stderr, "\nloadlaw serve: stopping (Ctrl-C again to quit now)\n");
    sem_post(&w->posted);
}

/* On the scheduler thread, after a backend step failed: wake main, which
 * stops the engine and exits 1 (eng_stop joins this thread, so not here). */
static void serve_on_failure(void *ctx, const char *msg)
{
    (void)msg; /* main reads it with eng_failed */
    serve_wait *w = ctx;
    sem_post(&w->posted);
}

/* The engine's settings: defaults (port 8000), the secrets from the
 * environment, then the flags. CLI_GO_ON, or an exit code with cfg freed. */
static int serve_config(int argc, char **argv, eng_config *cfg)
{
    char err[512];
    eng_config_default(cfg);
    cfg->port = 8000;
    /* Secrets from the environment (as vLLM reads VLLM_API_KEY), so they
     * need not sit in the process list; a flag given too wins. Never echoed. */
    static const char *const env_keys[][2] = {{"LOADLAW_API_KEY", "api_key"},
                                              {"LOADLAW_CONTROL_KEY", "control_key"}};
    for (size_t i = 0; i < sizeof env_keys / sizeof env_keys[0]; i++) {
        const char *v = getenv(env_keys[i][0]);
        if (v && *v && eng_config_set(cfg, env_keys[i][1], v, err, sizeof err)) {
            fprintf(stderr, "loadlaw serve: %s: %s\n", env_keys[i][0], err);
            eng_config_free(cfg);
            return CLI_USAGE;
        }
    }
    cli_opt *table = serve_table_new();
    if (!table) {
        fprintf(stderr, "loadlaw serve: out of memory\n");
        eng_config_free(cfg);
        return CLI_FAIL;
    }
    cli_cmd cmd = {"serve", "usage: loadlaw serve [options]", SERVE_INTRO, table, SERVE_OUTRO};
    g_serve_cmd = &cmd;
    int pr = cli_parse(&cmd, argc, argv, on_opt, cfg);
    g_serve_cmd = NULL;
    serve_table_free(table);
    if (pr != CLI_GO_ON)
        eng_config_free(cfg);
    return pr;
}

int cmd_serve(int argc, char **argv)
{
    eng_config cfg;
    char err[512];
    eng_engine *eng = NULL;
    int pr = serve_config(argc, argv, &cfg);
    if (pr != CLI_GO_ON)
        return pr;

    serve_wait w;
    atomic_init(&w.sig, 0);
    if (sem_init(&w.posted, 0, 0) != 0) {
        fprintf(stderr, "loadlaw serve: sem_init: %s\n", strerror(errno));
        eng_config_free(&cfg);
        return CLI_FAIL;
    }
    /* Before eng_start: a Ctrl-C during a slow start (cpu weights) still
     * ends in a clean stop once the engine is up. */
    if (cli_signals_start(serve_on_signal, NULL, &w, err, sizeof err) != 0) {
        fprintf(stderr, "loadlaw serve: %s\n", err);
        sem_destroy(&w.posted);
        eng_config_free(&cfg);
        return CLI_FAIL;
    }
    int ret = CLI_FAIL;
    cfg.on_failure = serve_on_failure;
    cfg.on_failure_arg = &w;
    if (eng_start(&cfg, &eng, err, sizeof err) != 0) {
        fprintf(stderr, "loadlaw serve: %s\n", err);
        goto out;
    }
    printf("%s\n", eng_url(eng));
    fflush(stdout);
    if (cfg.backend == ENG_BACKEND_SYNTHETIC)
        fprintf(stderr, "loadlaw serve: model %s, synthetic law %g+%gn+%gc+%gp ms (x%g), Ctrl-C stops\n",
                eng_model(eng), cfg.law_a_ms, cfg.law_b_ms, cfg.law_c_ms_per_ktok, cfg.law_p_ms_per_tok,
                cfg.time_scale);
    else
        fprintf(stderr, "loadlaw serve: model %s, %s backend, Ctrl-C stops\n", eng_model(eng),
                eng_backend_name(eng));
    while (sem_wait(&w.posted) != 0 && errno == EINTR)
        ;
    size_t n = eng_step_count(eng);
    char why[512];
    int failed = eng_failed(eng, why, sizeof why);
    eng_stop(eng);
    if (failed) {
        fprintf(stderr, "loadlaw serve: engine failed after %zu steps: %s\n", n, why);
        goto out;
    }
    fprintf(stderr, "loadlaw serve: stopped on %s after %zu steps\n",
            atomic_load(&w.sig) == SIGINT ? "SIGINT" : "SIGTERM", n);
    ret = CLI_OK;
out:
    cli_signals_stop();
    sem_destroy(&w.posted);
    eng_config_free(&cfg);
    return ret;
}
