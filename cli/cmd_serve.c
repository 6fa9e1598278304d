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
#include <string.h>

#include "cli.h"
#include "common.h"
#include "engine.h"
#include "signals.h"

static void serve_usage(FILE *f)
{
    fprintf(f,
        "usage: loadlaw serve [options]\n"
        "Run the bundled decode engine behind an OpenAI-compatible server until\n"
        "SIGINT/SIGTERM. Prints the URL on stdout.\n\n"
        "  --host ADDR            IPv4 address to bind (default 127.0.0.1)\n"
        "  --port P               port (default 8000; 0 = ephemeral)\n"
        "  --model NAME           served model name (default loadlaw-synthetic)\n"
        "  --backend B            synthetic | cpu | cuda (default synthetic)\n"
        "  --law LAW              step time in ms before scaling: \"52+30n\", with optional\n"
        "                         terms \"+0.5c\" (per 1000 context tokens) \"+0.01p\" (per prefill token)\n"
        "  --c MS, --p MS         the c and p law terms on their own\n"
        "  --time-scale X         multiply every step time by X (default 1)\n"
        "  --jitter F             relative std-dev of seeded gaussian step jitter (default 0)\n"
        "  --seed S               seed for jitter and token words (default 1)\n"
        "  --think-tokens N       default thinking tokens per request (default 0)\n"
        "  --stop-after N         requests without ignore_eos stop after N tokens (default 0 = never)\n"
        "  --max-running N        sequences in the batch (default 256)\n"
        "  --max-waiting N        queue bound; a full queue answers 503 (default 8192)\n"
        "  --prefill-budget N     prompt tokens prefilled per step (default 2048)\n"
        "  --max-tokens-limit N   largest max_tokens accepted (default 32768)\n"
        "  --max-context N        prompt + output bound (default 131072)\n"
        "  --max-connections N    connection limit (default 8192)\n"
        "  --max-body BYTES       request body limit (default 1Mi)\n"
        "  --idle-timeout DUR     idle connection timeout (default 120s)\n"
        "  --profile-dir DIR      default output_dir of /start_profile (default /tmp)\n"
        "cpu backend (engine/cpu/README.md):\n"
        "  --attn naive|tiled     decode attention kernel (default tiled)\n"
        "  --heads N, --topk N    query heads (64), KV rows selected per decode (2048)\n"
        "  --threads N            compute threads, 0 = all cores (default 1)\n"
        "  --d-model N, --d-ff N, --vocab N   dense sizes (2048, 8192, 1024)\n"
        "  --capacity N           KV rows per sequence slot (default 4096)\n"
        "  --min-ctx N            rows attended at least (default: topk; 0 = real context)\n"
        "  -v, --verbose          log engine events to stderr\n"
        "  -h, --help             this help\n"
        "\n"
        "The synthetic backend's scheduler thread asks for SCHED_FIFO priority 1 so it\n"
        "wakes on its deadlines on a busy machine; where that is refused (the usual case\n"
        "without CAP_SYS_NICE or an RLIMIT_RTPRIO), it runs at normal priority and -v\n"
        "says so. Step times are then only as punctual as the machine is idle.\n"
        "Exit: 0 after a clean stop on SIGINT/SIGTERM (a second one exits with 130),\n"
        "1 if the engine cannot start or a backend step fails, 2 for a usage error.\n");
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

int cmd_serve(int argc, char **argv)
{
    eng_config cfg;
    char err[512];
    eng_engine *eng = NULL;
    eng_config_default(&cfg);
    cfg.port = 8000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            serve_usage(stdout);
            return CLI_OK;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            ll_log_level = LL_LOG_INFO;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(stderr, "loadlaw serve: unexpected argument '%s' (try --help)\n", a);
            return CLI_USAGE;
        }
        char key[64];
        const char *val;
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (klen == 0 || klen >= sizeof key) {
            fprintf(stderr, "loadlaw serve: unknown option '%s' (try --help)\n", a);
            return CLI_USAGE;
        }
        memcpy(key, a + 2, klen);
        key[klen] = '\0';
        for (char *k = key; *k; k++)
            if (*k == '-')
                *k = '_';
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            eng_config probe = cfg;
            int unknown = eng_config_set(&probe, key, "", err, sizeof err) != 0 &&
                          strncmp(err, "unknown engine key", 18) == 0;
            fprintf(stderr, unknown ? "loadlaw serve: unknown option '%s' (try --help)\n"
                                    : "loadlaw serve: option '%s' needs a value\n", a);
            return CLI_USAGE;
        }
        if (eng_config_set(&cfg, key, val, err, sizeof err) != 0) {
            if (strncmp(err, "unknown engine key", 18) == 0)
                fprintf(stderr, "loadlaw serve: unknown option '--%.*s' (try --help)\n", (int)klen, a + 2);
            else
                fprintf(stderr, "loadlaw serve: --%.*s: %s\n", (int)klen, a + 2, err);
            return CLI_USAGE;
        }
    }

    serve_wait w;
    atomic_init(&w.sig, 0);
    if (sem_init(&w.posted, 0, 0) != 0) {
        fprintf(stderr, "loadlaw serve: sem_init: %s\n", strerror(errno));
        return CLI_FAIL;
    }
    /* Before eng_start: a Ctrl-C during a slow start (cpu weights) still
     * ends in a clean stop once the engine is up. */
    if (cli_signals_start(serve_on_signal, NULL, &w, err, sizeof err) != 0) {
        fprintf(stderr, "loadlaw serve: %s\n", err);
        sem_destroy(&w.posted);
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
                cfg.model, cfg.law_a_ms, cfg.law_b_ms, cfg.law_c_ms_per_ktok, cfg.law_p_ms_per_tok,
                cfg.time_scale);
    else
        fprintf(stderr, "loadlaw serve: model %s, %s backend, Ctrl-C stops\n", cfg.model,
                cfg.backend == ENG_BACKEND_CPU ? "cpu" : "cuda");
    while (sem_wait(&w.posted) != 0 && errno == EINTR)
        ;
    size_t n = eng_step_count(eng);
    char why[256];
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
    return ret;
}
