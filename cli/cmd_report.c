/* cmd_report.c: `loadlaw report RUN_DIR` — writes RUN_DIR/report.html (one
 * self-contained file) and prints its path with the law in one line. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit.h"
#include "report.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: loadlaw report RUN_DIR [-o OUT.html]\n\n"
               "Writes RUN_DIR/report.html: one self-contained file (Chart.js inlined from\n"
               "Debian's libjs-chart.js, data embedded) that opens offline in any browser:\n"
               "throughput against concurrency with the fitted curve N/(a+bN) and its\n"
               "asymptote, step time against N with the fit and the 95%% confidence band of\n"
               "its mean line (from the fit's covariance of a and b), per level the\n"
               "prefill/decode timeline, token rate (thinking vs answer, ramp shaded) and\n"
               "TTFT/TTFA/ITL distributions; tables of the law, the levels and the run.\n\n"
               "  -o, --output FILE   write there instead of RUN_DIR/report.html\n"
               "  LOADLAW_CHARTJS     environment: another Chart.js file to inline\n");
}

int cmd_report(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_OK;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "loadlaw report: %s needs a file name\n", argv[i - 1]);
                return CLI_USAGE;
            }
            out = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "loadlaw report: unknown option '%s' (try --help)\n", argv[i]);
            return CLI_USAGE;
        } else if (dir) {
            fprintf(stderr, "loadlaw report: one run directory, please ('%s' and '%s')\n", dir, argv[i]);
            return CLI_USAGE;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        fprintf(stderr, "loadlaw report: no run directory given (try --help)\n");
        return CLI_USAGE;
    }
    char err[1024], path[4096];
    fit_run *run = NULL;
    fit_result *res = NULL;
    fit_options o;
    fit_options_default(&o);
    int rc = fit_load_run(dir, &run, err, sizeof err);
    if (rc == 0)
        rc = fit_analyze(run, &o, &res, err, sizeof err);
    if (rc == 0)
        rc = rpt_write_html_from(dir, run, res, out, path, sizeof path, err, sizeof err);
    if (rc == 0) {
        fit_print_law_line(stdout, res);
        printf("report: %s\n", path);
    } else {
        fprintf(stderr, "loadlaw report: %s\n", err);
    }
    fit_result_free(res);
    fit_run_free(run);
    return rc ? CLI_FAIL : CLI_OK;
}
