/* cmd_fit.c: `loadlaw fit RUN_DIR [--json]`: the law, its confidence, the
 * model check and the per-level table of a recorded run (fit/fit.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit.h"

static void fit_usage(FILE *f)
{
    fprintf(f,
            "usage: loadlaw fit RUN_DIR [--json] [--include-warmup] [--edge-tol F]\n"
            "\n"
            "Fits step(N) = a + b*N ms on the steady decode samples of RUN_DIR/records.jsonl\n"
            "(robust bisquare regression, OLS beside it, 95%% CIs), checks for curvature or a\n"
            "knee, and compares each level's steady throughput with N/(a + b*N).\n"
            "\n"
            "  --json            print one JSON object instead of the summary\n"
            "  --include-warmup  take step samples from warmup requests too\n"
            "  --edge-tol F      events this fraction of a gap from its ends count as at\n"
            "                    the ends (default 0.05, in [0, 0.5))\n"
            "\n"
            "exit codes: 0 ok, 1 unreadable or unusable run, 2 usage error\n");
}

int cmd_fit(int argc, char **argv)
{
    const char *dir = NULL;
    int json = 0;
    fit_options opt;
    fit_options_default(&opt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fit_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--include-warmup") == 0) {
            opt.include_warmup = 1;
        } else if (strcmp(a, "--edge-tol") == 0) {
            if (i + 1 >= argc || ll_parse_double(argv[i + 1], &opt.edge_tol_frac) ||
                !(opt.edge_tol_frac >= 0 && opt.edge_tol_frac < 0.5)) {
                fprintf(stderr, "loadlaw fit: --edge-tol needs a number in [0, 0.5)\n");
                return CLI_USAGE;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "loadlaw fit: unknown option '%s' (try loadlaw fit --help)\n", a);
            return CLI_USAGE;
        } else if (dir) {
            fprintf(stderr, "loadlaw fit: one RUN_DIR only ('%s' and '%s')\n", dir, a);
            return CLI_USAGE;
        } else {
            dir = a;
        }
    }
    if (!dir) {
        fprintf(stderr, "loadlaw fit: missing RUN_DIR (try loadlaw fit --help)\n");
        return CLI_USAGE;
    }

    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    int rc = CLI_FAIL;
    if (fit_load_run(dir, &run, err, sizeof err)) {
        fprintf(stderr, "loadlaw fit: %s\n", err);
        goto done;
    }
    if (fit_analyze(run, &opt, &res, err, sizeof err)) {
        fprintf(stderr, "loadlaw fit: %s\n", err);
        goto done;
    }
    if (json) {
        cJSON *o = fit_result_to_json(res);
        char *s = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (!s) {
            fprintf(stderr, "loadlaw fit: out of memory writing JSON\n");
            goto done;
        }
        puts(s);
        cJSON_free(s);
    } else {
        fit_print(stdout, res);
    }
    rc = fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
done:
    fit_result_free(res);
    fit_run_free(run);
    return rc;
}
