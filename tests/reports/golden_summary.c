/* golden_summary RUN_DIR: write RUN_DIR/summary.json again from its records,
 * as the sweep's end writes it (fit_open, then rpt_write_summary). For
 * tests/reports/golden.sh, which checks that a change leaves every output of
 * a recorded run byte-identical. */
#include <stdio.h>

#include "fit.h"
#include "report.h"

int main(int argc, char **argv)
{
    char err[1024] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: golden_summary RUN_DIR\n");
        return 2;
    }
    int rc = fit_open(argv[1], NULL, &run, &res, err, sizeof err);
    if (!rc)
        rc = rpt_write_summary(argv[1], run, res, err, sizeof err);
    if (rc)
        fprintf(stderr, "golden_summary: %s\n", err);
    fit_result_free(res);
    fit_run_free(run);
    return rc ? 1 : 0;
}
