/* slo_opts.h (internal to cli/): the objective options that `loadlaw plan`
 * and `loadlaw report` share (--itl-slo/--tpot-slo, --ttft-slo, --e2e-slo),
 * parsed in one place (cmd_plan.c) so both read a duration the same way and
 * refuse the same mistakes. */
#ifndef LOADLAW_CLI_SLO_OPTS_H
#define LOADLAW_CLI_SLO_OPTS_H

#include "fit_plan.h"
#include "opts.h"

/* Option keys; a command's own keys stay below CLI_SLO_KEY_ITL. */
enum { CLI_SLO_KEY_ITL = 900, CLI_SLO_KEY_TPOT, CLI_SLO_KEY_TTFT, CLI_SLO_KEY_E2E };

/* The four option rows, for a command's table; itl_help says what the
 * per-token objective does in that command. */
#define CLI_SLO_ROWS(itl_help)                                                                          \
    {"itl-slo", CLI_SLO_KEY_ITL, "DUR", itl_help},                                                      \
        {"tpot-slo", CLI_SLO_KEY_TPOT, "DUR", "the same objective under its other name (give one)"},   \
        {"ttft-slo", CLI_SLO_KEY_TTFT, "DUR", "time-to-first-token objective for goodput"},            \
        {"e2e-slo", CLI_SLO_KEY_E2E, "DUR", "end-to-end latency objective for goodput"}

typedef struct cli_slo_args {
    double itl_ms, tpot_ms;   /* NAN until given */
    fit_slo slo;              /* ttft_ms, e2e_ms as given; tpot_ms set by cli_slo_finish */
} cli_slo_args;

void cli_slo_init(cli_slo_args *a);
/* When o is one of the rows above: parses v into a (a positive duration, 50ms
 * or 2s), sets *rc to 0 or CLI_USAGE (having said why) and returns 1;
 * otherwise returns 0 and leaves *rc alone. */
int cli_slo_opt(const cli_cmd *c, const cli_opt *o, const char *v, cli_slo_args *a, int *rc);
/* After parsing: ITL and TPOT name one objective, so two different values are
 * a usage error (CLI_USAGE, said); else 0 with the objectives in *out. */
int cli_slo_finish(const cli_cmd *c, const cli_slo_args *a, fit_slo *out);

#endif
