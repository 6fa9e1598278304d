/* main.c: `loadlaw <subcommand>`; dispatch only. Each subcommand lives in
 * cmd_<name>.c and maps library results to exit codes (cli.h). */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>
#include <gsl/gsl_errno.h>

#include "cli.h"
#include "common.h"
#include "engine.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} cmds[] = {
    {"sweep", cmd_sweep, "drive an endpoint through concurrency levels, record every token"},
    {"serve", cmd_serve, "run the bundled decode engine behind an OpenAI-compatible server"},
    {"fit", cmd_fit, "fit step time = a + b*N on a run's steady decode samples"},
    {"plan", cmd_plan, "capacity planning from the law: max C for an objective, goodput"},
    {"report", cmd_report, "write RUN_DIR/report.html (self-contained, opens offline)"},
    {"compare", cmd_compare, "compare two runs: per-level speedups with CIs, law change, gate"},
    {"trace", cmd_trace, "kernel-time breakdown of PyTorch/Kineto profiler traces"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: loadlaw <command> [options]   (loadlaw <command> --help)\n\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].what);
    fprintf(f, "\n  --version  print the version\n"
               "\nexit codes: 0 ok, 1 failure, 2 usage error, 3 gate failed\n"
               "`loadlaw sweep` with no arguments runs scenarios/default.json against the\n"
               "bundled engine and ends with the fitted law and a report.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("loadlaw %s (%s)\n", LOADLAW_VERSION, curl_version());
        return CLI_OK;
    }
    /* GSL's default handler aborts the process; every gsl_* status is checked instead. */
    gsl_set_error_handler_off();
    eng_blas_single_thread(); /* GSL's BLAS calls: no spinning threads beside the client's */
    /* Before any thread exists (curl_global_init is not thread-safe). */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "loadlaw: curl_global_init failed\n");
        return CLI_FAIL;
    }
    int rc = -1;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            rc = cmds[i].fn(argc - 1, argv + 1);
    if (rc < 0) {
        fprintf(stderr, "loadlaw: unknown command '%s' (try loadlaw --help)\n", argv[1]);
        rc = CLI_USAGE;
    }
    curl_global_cleanup();
    return rc;
}
