/* scenario_keys.h: the scenario's keys, as a command line and the docs see
 * them.
 *
 * Every key of the scenario format is one row of one table
 * (scenarios/scenario_keys.c): its JSON path, its type with its bounds or
 * names, the field it lands in, its default, its remote default (a run with
 * --url and no scenario), the `loadlaw sweep` flag that sets it, and its
 * help. The loader, the writer (scn_to_json), scn_new, scn_remote_defaults,
 * the sweep's options and docs/scenarios.md all read that table, so a key is
 * added in one row (docs/contributing.md).
 *
 * Thread safety: the table is constant; these functions may run anywhere. */
#ifndef LOADLAW_SCENARIO_KEYS_H
#define LOADLAW_SCENARIO_KEYS_H

#include <stddef.h>
#include <stdio.h>

#include "scenario.h"

typedef struct scn_key scn_key;

/* The i-th key with a sweep flag, in the table's order; NULL past the last. */
const scn_key *scn_flag_key(size_t i);
/* Its JSON path ("request.max_tokens"; a level's keys "levels[].warmup"). */
const char *scn_key_path(const scn_key *k);
/* Its flag without "--" ("max-tokens"); the value's name in help ("N"),
 * NULL for a flag that takes none; the flag's help text. */
const char *scn_key_flag(const scn_key *k);
const char *scn_key_flag_arg(const scn_key *k);
const char *scn_key_flag_help(const scn_key *k);

/* A flag's value (NULL for a flag that takes none) checked as the key
 * takes it: 0, or LL_EINVAL with "expected WHAT, got 'VALUE'" in err. */
int scn_key_check(const scn_key *k, const char *value, char *err, size_t errlen);
/* The value laid over the scenario (a level's key: over every level):
 * 0, LL_EINVAL (message as scn_key_check's) or LL_ENOMEM. */
int scn_key_set(scn_scenario *s, const scn_key *k, const char *value, char *err, size_t errlen);

/* docs/scenarios.md, written from the table (`loadlaw help --scenario-keys`;
 * ctest's docs_scenarios compares it with the committed file). 0 or LL_EIO. */
int scn_keys_markdown(FILE *f);

#endif
