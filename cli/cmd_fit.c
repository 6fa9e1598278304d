/* cmd_fit.c: `loadlaw fit RUN_DIR [--json]`: the law, its confidence, the
 * model check and the per-level table of a recorded run (fit/fit.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit.h"
#include "report.h"
#include "opts.h"

enum { K_JSON = 256, K_INCLUDE_WARMUP, K_INCLUDE_PROFILED, K_EDGE_TOL, K_N, K_STREAM_EVENTS };

static const cli_opt fit_table[] = {
    {"json", K_JSON, NULL, "print one JSON object instead of the summary"},
    {"include-warmup", K_INCLUDE_WARMUP, NULL, "take step samples from warmup requests too"},
    {"include-profiled", K_INCLUDE_PROFILED, NULL, "fit the law on profiled levels too (left out by default: "
                "the profiler slowed the server)"},
    {"edge-tol", K_EDGE_TOL, "F", "events this fraction of a gap from its ends count as at "
                "the ends (default 0.05, in [0, 0.5))"},
    {"n", K_N, "client|server", "whose N the law is fitted against: the client's D (default) or the "
                "server's running requests scraped from /metrics; the other law is shown beside it"},
    {"stream-events", K_STREAM_EVENTS, "N", "analyse a level of more than N token chunks as one "
                "time-ordered stream, in memory bounded by the requests in flight (default 1048576; "
                "1: every level; below it each level is held whole, as always)"},
    {0},
};

static const cli_cmd fit_cmd = {
    "fit",
    "usage: loadlaw fit RUN_DIR [--json] [--include-warmup] [--include-profiled] [--edge-tol F] [--n client|server]\n"
    "                   [--stream-events N]",
    "Fits step(N) = a + b*N ms on the steady decode samples of RUN_DIR/records.jsonl\n"
    "(the mean step: outlier-trimmed weighted least squares, OLS beside it, 95% CIs),\n"
    "checks for curvature or a knee, and compares each level's steady throughput\n"
    "with N/(a + b*N).\n",
    fit_table,
    "exit codes: 0 ok, 1 unreadable or unusable run, 2 usage error\n",
};

typedef struct fit_args {
    const char *dir;
    int json;
    fit_options opt;
} fit_args;

static int on_opt(const cli_opt *o, const char *v, void *ctx)
{
    fit_args *a = ctx;
    if (!o) {
        if (a->dir)
            return cli_usage_error(&fit_cmd, "one RUN_DIR only ('%s' and '%s')", a->dir, v);
        a->dir = v;
        return 0;
    }
    switch (o->key) {
    case K_JSON: a->json = 1; break;
    case K_INCLUDE_WARMUP: a->opt.include_warmup = 1; break;
    case K_INCLUDE_PROFILED: a->opt.include_profiled = 1; break;
    case K_N:
        if (strcmp(v, "client") && strcmp(v, "server"))
            return cli_usage_error(&fit_cmd, "--n: expected client or server, got '%s'", v);
        a->opt.n_server = !strcmp(v, "server");
        break;
    case K_STREAM_EVENTS: {
        long n = 0;
        int rc = cli_long(&fit_cmd, o->name, v, 1, LONG_MAX, &n);
        a->opt.stream_events = rc ? 0 : (size_t)n;
        return rc;
    }
    case K_EDGE_TOL:
        return cli_number(&fit_cmd, o->name, v, CLI_REAL, 0, nextafter(0.5, 0), "a number in [0, 0.5)",
                          &a->opt.edge_tol_frac);
    }
    return 0;
}

int cmd_fit(int argc, char **argv)
{
    fit_args a = {0};
    fit_options_default(&a.opt);
    int pr = cli_parse(&fit_cmd, argc, argv, on_opt, &a);
    if (pr != CLI_GO_ON)
        return pr;
    if (!a.dir)
        return cli_usage_error(&fit_cmd, "missing RUN_DIR (try loadlaw fit --help)");
    const char *dir = a.dir;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    if (fit_open(dir, &a.opt, &run, &res, err, sizeof err)) {
        fprintf(stderr, "loadlaw fit: %s\n", err);
        return CLI_FAIL;
    }
    int rc;
    if (a.json) {
        rc = cli_print_json(&fit_cmd, rpt_fit_to_json(res));
    } else {
        rpt_fit_print(stdout, res);
        rc = fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
    }
    if (rc == CLI_OK && fit_run_n_requests(run) == 0) {
        /* a sweep stopped before its first request finished: say so, and fail, so a
         * script that fits every run directory notices the empty one */
        fprintf(stderr, "loadlaw fit: %s holds no request record: nothing to fit\n", dir);
        rc = CLI_FAIL;
    }
    fit_result_free(res);
    fit_run_free(run);
    return rc;
}
