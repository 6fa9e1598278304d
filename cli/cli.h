/* cli.h (internal to cli/): the subcommands and their shared exit codes.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage error, 3 a gate failed
 * (compare --expect-speedup), 130 interrupted before anything was measured. */
#ifndef LOADLAW_CLI_H
#define LOADLAW_CLI_H

#include "sweep.h"

/* The same numbers as the sweep library's (sweep.h), which commands return as they are. */
enum {
    CLI_OK = SWEEP_OK,
    CLI_FAIL = SWEEP_FAIL,
    CLI_USAGE = SWEEP_USAGE,
    CLI_GATE = SWEEP_GATE,
    CLI_INTERRUPTED = SWEEP_INTERRUPTED,
};

/* Each takes argv with argv[0] = the subcommand's name. */
int cmd_serve(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_check_decode(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_records(int argc, char **argv);

#endif
