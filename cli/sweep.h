/* sweep.h (internal to cli/): one sweep against one target, shared by
 * `loadlaw sweep` (cmd_sweep.c) and its A/B form (cmd_sweep_ab.c). */
#ifndef LOADLAW_SWEEP_H
#define LOADLAW_SWEEP_H

#include "scenario.h"

typedef struct sweep_job {
    const scn_scenario *scn;     /* levels, request shape; scn->url or the bundled engine */
    const scn_prompts *prompts;
    const char *engine_spec;     /* bundled engine spec (NULL: engine defaults) */
    const char *profile_dir;     /* bundled engine's trace folder; NULL = its default */
    const char *run_dir;
    const char *api_key;         /* NULL = none */
    int quiet, no_report;
} sweep_job;

/* Start the bundled engine when scn->url is NULL, run every level into
 * run_dir, copy the engine's step log, write summary, fit and report.
 * Needs the signal thread (cmd_sweep.c) running. Returns a CLI_* exit code
 * (CLI_INTERRUPTED after a SIGINT). */
int sweep_one(const sweep_job *j);

/* The scenario's "ab" form: sweep_one per side into out_dir/<name>, the
 * sides' trace breakdowns, then `loadlaw compare` of the two runs with
 * out_dir/compare.html and the scenario's gate. CLI_* exit code (CLI_GATE
 * when the gate is missed). */
int sweep_ab(const sweep_job *base, const char *out_dir);

#endif
