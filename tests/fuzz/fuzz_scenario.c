/* fuzz_scenario.c: the scenario loader and writer (scenarios/scenario_load.c;
 * the key table's reader and writer, scn_keyio.c and scn_keyout.c).
 *
 * Property: what the loader accepts survives a round trip. load(input) ->
 * to_json -> print must load again, and printing that second scenario gives
 * the same text: the effective scenario written into every run record is a
 * scenario the loader reads back as the same thing. scn_validate (what a
 * sweep runs next) must not crash on either.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "scenario.h"

/* The scenario as compact JSON text, "defaults" label included (the loader
 * takes it back); NULL on no memory. */
static char *print_scenario(const scn_scenario *s)
{
    cJSON *j = scn_to_json(s);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    scn_scenario *a = NULL, *b = NULL;
    char *text_a = NULL, *text_b = NULL;
    char *in = fuzz_strdup(data, size);
    if (!in)
        return 0;
    if (scn_load_string(in, "fuzz", &a, err, sizeof err) != 0)
        goto out;
    FUZZ_CHECK(a != NULL);
    if (!(text_a = print_scenario(a)))
        goto out;
    int rc = scn_load_string(text_a, "fuzz-again", &b, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "reload failed: %s\nof: %s\n", err, text_a);
        FUZZ_CHECK(rc == 0);
    }
    if (!(text_b = print_scenario(b)))
        goto out;
    if (strcmp(text_a, text_b) != 0) {
        fprintf(stderr, "first:  %s\nsecond: %s\n", text_a, text_b);
        FUZZ_CHECK(strcmp(text_a, text_b) == 0);
    }
    /* validate fills defaults in place; both copies must agree on the verdict */
    char err_b[512];
    int va = scn_validate(a, err, sizeof err), vb = scn_validate(b, err_b, sizeof err_b);
    FUZZ_CHECK(va == vb);
out:
    scn_free(a);
    scn_free(b);
    free(text_a);
    free(text_b);
    free(in);
    return 0;
}
