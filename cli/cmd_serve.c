/* cmd_serve.c: `loadlaw serve`, a thin wrapper over engine.h: flags become
 * engine keys (--time-scale -> time_scale), the URL goes to stdout so scripts
 * can read it, and SIGINT/SIGTERM stop the engine cleanly. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "engine.h"

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
        "  --attn naive|tiled, --heads N, --topk N, --threads N   cpu backend settings\n"
        "  -v, --verbose          log engine events to stderr\n"
        "  -h, --help             this help\n");
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

    /* Block the stop signals before any engine thread exists, so they all
     * inherit the mask and only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0) {
        fprintf(stderr, "loadlaw serve: could not block signals\n");
        return CLI_FAIL;
    }
    if (eng_start(&cfg, &eng, err, sizeof err) != 0) {
        fprintf(stderr, "loadlaw serve: %s\n", err);
        return CLI_FAIL;
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
    int sig = 0;
    if (sigwait(&stop, &sig) != 0)
        sig = SIGTERM;
    size_t n = eng_step_count(eng);
    eng_stop(eng);
    fprintf(stderr, "loadlaw serve: stopped on %s after %zu steps\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", n);
    return CLI_OK;
}
