/* scn_internal.h (internal to scenarios/): the "ab" section's loader, kept in
 * ab.c so scenario.c stays one job (the single-sweep format). */
#ifndef LOADLAW_SCN_INTERNAL_H
#define LOADLAW_SCN_INTERNAL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "scenario.h"

/* Parse the value of the top-level "ab" key into ab (origin names the file in
 * messages). 0 or LL_EINVAL / LL_ENOMEM. */
int scn_ab_load(const cJSON *v, const char *origin, scn_ab *ab, char *err, size_t errlen);
/* Checks that need the whole scenario (no url; the gate's C is a level). */
int scn_ab_validate(const scn_scenario *s, const char *origin, char *err, size_t errlen);
/* The section as JSON (for the run record); NULL on no memory. */
cJSON *scn_ab_to_json(const scn_ab *ab);
void scn_ab_free(scn_ab *ab);

#endif
