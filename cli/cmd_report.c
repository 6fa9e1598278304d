/* cmd_report.c: `loadlaw report RUN_DIR` — writes RUN_DIR/report.html (one
 * self-contained file) and prints its path with the law in one line. The
 * objectives (--itl-slo, --ttft-slo, --e2e-slo) are read as `loadlaw plan`
 * reads them (slo_opts.h) and go to the Pareto chart. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit.h"
#include "fit_plan.h"
#include "opts.h"
#include "report.h"
#include "slo_opts.h"

static const cli_opt report_table[] = {
    {"output", 'o', "FILE", "write there instead of RUN_DIR/report.html"},
    CLI_SLO_ROWS("per-token objective (50ms): the Pareto chart's line at 1000/DUR tokens/s per "
                 "user, and the TPOT part of goodput"),
    {0},
};

static const cli_cmd report_cmd = {
    "report",
    "usage: loadlaw report RUN_DIR [-o OUT.html] [--itl-slo DUR | --tpot-slo DUR] [--ttft-slo DUR] "
    "[--e2e-slo DUR]",
    "Writes RUN_DIR/report.html: one self-contained file (Chart.js inlined from\n"
    "Debian's libjs-chart.js, data embedded) that opens offline in any browser:\n"
    "throughput against concurrency with the fitted curve N/(a+bN) and its\n"
    "asymptote, step time against N with the fit and the 95% confidence band of\n"
    "its mean line (from the fit's covariance of a and b), per level the\n"
    "prefill/decode timeline, token rate (thinking vs answer, ramp shaded) and\n"
    "TTFT/TTFA/ITL distributions; per-user against total tokens/s (Pareto) with the\n"
    "law's curve, its band and the objectives given; tables of the law, the levels\n"
    "and the run.\n",
    report_table,
    "environment: LOADLAW_CHARTJS, another Chart.js file to inline\n",
};

typedef struct report_args {
    const char *dir, *out;
    cli_slo_args slo;
} report_args;

static int on_opt(const cli_opt *o, const char *v, void *ctx)
{
    report_args *a = ctx;
    int rc;
    if (o && cli_slo_opt(&report_cmd, o, v, &a->slo, &rc))
        return rc;
    if (o) {
        a->out = v; /* -o */
        return 0;
    }
    if (a->dir)
        return cli_usage_error(&report_cmd, "one run directory, please ('%s' and '%s')", a->dir, v);
    a->dir = v;
    return 0;
}

int cmd_report(int argc, char **argv)
{
    report_args a = {0};
    cli_slo_init(&a.slo);
    int pr = cli_parse(&report_cmd, argc, argv, on_opt, &a);
    if (pr != CLI_GO_ON)
        return pr;
    if (!a.dir)
        return cli_usage_error(&report_cmd, "no run directory given (try loadlaw report --help)");
    fit_slo slo;
    if (cli_slo_finish(&report_cmd, &a.slo, &slo))
        return CLI_USAGE;
    const char *dir = a.dir, *out = a.out;
    char err[1024], path[4096];
    fit_run *run = NULL;
    fit_result *res = NULL;
    int rc = fit_open(dir, NULL, &run, &res, err, sizeof err);
    if (rc == 0)
        rc = rpt_write_html_with(dir, run, res, &slo, out, path, sizeof path, err, sizeof err);
    if (rc == 0) {
        rpt_print_law_line(stdout, res);
        printf("report: %s\n", path);
    } else {
        fprintf(stderr, "loadlaw report: %s\n", err);
    }
    fit_result_free(res);
    fit_run_free(run);
    return rc ? CLI_FAIL : CLI_OK;
}
