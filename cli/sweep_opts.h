/* sweep_opts.h (internal to cli/): the options of `loadlaw sweep`
 * (sweep_opts.c: the table and parsing; sweep_flags.c, sweep_ab_opts.c:
 * laying them over the scenario) and the scenario they are laid over;
 * cmd_sweep.c turns them into a sweep_job (sweep.h). A flag that sets one
 * scenario key is the key table's (scenario_keys.h): its help, its check
 * and how it is laid over come from the key's row. */
#ifndef LOADLAW_CLI_SWEEP_OPTS_H
#define LOADLAW_CLI_SWEEP_OPTS_H

#include "opts.h"
#include "scenario.h"
#include "scenario_keys.h"
#include "sweep.h"

/* The command line as given; NULL / 0 = not given (the scenario decides).
 * At most SWEEP_MAX_METRICS_URLS --metrics-url (sweep.h). */
#define SWEEP_MAX_HEADERS 64
#define SWEEP_MAX_KEYED 64

/* A flag that sets one scenario key (scenario_keys.h), as given: its value
 * already checked as the key takes it; NULL for a flag without one. */
typedef struct sweep_keyed {
    const scn_key *key;
    const char *value;
} sweep_keyed;

typedef struct sweep_opts {
    /* url, model, api_key: the first --url/--model/--api-key (A's); a second
     * one of each is B's (urls[1], ...): two --url make an A/B of two remote
     * servers; one --model or --api-key with two --url serves both. */
    const char *scenario, *url, *engine, *model, *api_key, *prompts;
    const char *urls[2], *models[2], *api_keys[2];
    int n_urls, n_models, n_api_keys;
    const char *conc, *rate;
    const char *requests, *duration;     /* one value for every level, or one per level */
    const char *prompt_tokens, *prompt_words, *tokenizer;
    const char *profile_dir;             /* --profile-dir */
    const char *headers[SWEEP_MAX_HEADERS];
    size_t n_headers;
    sweep_keyed keyed[SWEEP_MAX_KEYED];  /* in argv order; the last of one key wins */
    size_t n_keyed;
    const char *metrics_urls[SWEEP_MAX_METRICS_URLS]; /* --metrics-url, beside the target's own */
    size_t n_metrics_urls;
    double metrics_interval_s;           /* --metrics-interval; 0 = not given (0.5 s) */
    int no_metrics;
    int gpu;                             /* --gpu: SWEEP_GPU_* */
    int no_report, quiet;
} sweep_opts;

/* `loadlaw sweep` for opts.h: its option table and --help (sweep_opts.c);
 * usage errors anywhere in the flags are cli_usage_error(&sweep_cmd, ...). */
extern const cli_cmd sweep_cmd;

/* Parse argv (argv[0] = "sweep"). CLI_GO_ON (opts.h) to go on, CLI_OK after
 * --help, CLI_USAGE after a one-line message. */
int sweep_parse_args(int argc, char **argv, sweep_opts *o);
/* Lay the flags over the scenario: 0, or CLI_USAGE after a one-line message. */
int sweep_apply_flags(const sweep_opts *o, scn_scenario *s);
/* The value of the last scenario-key flag --FLAG given ("" for a flag
 * without a value), or NULL when it was not given. */
const char *sweep_keyed_flag(const sweep_opts *o, const char *flag);

/* Two --url (sweep_opts.urls): the scenario's "ab" with two remote sides
 * named "a" and "b", each with its model (--model once for both, or twice),
 * and --order/--repeat laid over any "ab". 0, or CLI_USAGE after a one-line
 * message (e.g. --repeat without two targets). */
int sweep_apply_ab_flags(const sweep_opts *o, scn_scenario *s);

#endif
