/* cli.h (internal to cli/): the subcommands and their shared exit codes.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage error, 3 a gate failed
 * (compare --expect-speedup), 130 interrupted before anything was measured. */
#ifndef LOADLAW_CLI_H
#define LOADLAW_CLI_H

#include "fit.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_GATE = 3, CLI_INTERRUPTED = 130 };

/* Each takes argv with argv[0] = the subcommand's name. */
int cmd_serve(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_trace(int argc, char **argv);

/* What `loadlaw compare` does once its options are read (cmd_compare.c). */
typedef struct compare_opts {
    const char *html;          /* NULL: no comparison page */
    int json;                  /* JSON instead of tables */
    int have_expect;           /* a gate: expect_x at expect_c (0: highest shared C) */
    double expect_x;
    int expect_c;
    fit_compare_options co;
} compare_opts;
void compare_opts_default(compare_opts *o);
/* Fit both runs, compare B (run_b) against the baseline A, print the tables
 * (or JSON), write the page, judge the gate. A CLI_* exit code: CLI_GATE when
 * the gate is missed, CLI_USAGE when its C is not shared by the runs. */
int compare_runs(const char *run_a, const char *run_b, const compare_opts *o);

#endif
