/* test_fit_burst.c: fit_analyze flags a level whose client read in bursts
 * (sim.h burst_every), in the level's field, its note and the JSON, and
 * leaves the clean levels of the same run unflagged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "sim.h"
#include "testutil.h"

static const char *note_for(const fit_result *r, int conc)
{
    char key[32];
    snprintf(key, sizeof key, "(C=%d)", conc);
    for (size_t i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], key) && strstr(r->notes[i], "read in bursts"))
            return r->notes[i];
    return NULL;
}

/* Levels C = 1..16 with prefill interleaved and jitter; level 3 (C=8) read
 * three chunks at a time: two gaps in three are 20 us, the third three steps. */
static void test_burst_level(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(&c, cs, 5, 4);
    c.prefill_per_step = 2;
    c.jitter_frac = 0.05;
    c.burst_every = 3;
    c.burst_level = 3;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    CHECK(sim_write(path, &c, &st) == 0, "sim_write");
    int rc = fit_load_run(path, &run, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    if (rc)
        return;
    rc = fit_analyze(run, NULL, &r, err, sizeof err);
    CHECK(rc == 0, "analyze: %s", err);
    if (rc) {
        fit_run_free(run);
        return;
    }
    CHECK(r->n_levels == 5, "5 levels (%zu)", r->n_levels);
    for (size_t i = 0; i < r->n_levels && r->n_levels == 5; i++) {
        const fit_level *L = &r->levels[i];
        if (i == 3) {
            /* 20 chunks after the first token in reads of 3: 12 of 19 gaps short
             * per stream; the bound is a tenth of a multi-step gap, far above 20 us. */
            CHECK_REL(L->burst_gap_frac, 12.0 / 19.0, 0.02, "C=8 burst_gap_frac");
            CHECK(L->burst_gap_ms > 0.02 && L->burst_gap_ms < sim_law(&c, 8),
                  "C=8 bound %g ms between 20 us and a step", L->burst_gap_ms);
            const char *n = note_for(r, 8);
            CHECK(n && strstr(n, "63% of gaps under") && strstr(n, "unreliable"),
                  "C=8 note: %s", n ? n : "(none)");
        } else {
            CHECK(L->burst_gap_frac == 0, "C=%d clean: burst_gap_frac %g", L->concurrency,
                  L->burst_gap_frac);
            CHECK(note_for(r, L->concurrency) == NULL, "C=%d: no burst note", L->concurrency);
        }
    }
    cJSON *j = fit_result_to_json(r);
    CHECK(j != NULL, "json");
    if (j) {
        cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
        cJSON *l3 = cJSON_GetArrayItem(lv, 3), *l0 = cJSON_GetArrayItem(lv, 0);
        cJSON *f3 = cJSON_GetObjectItemCaseSensitive(l3, "burst_gap_frac");
        cJSON *f0 = cJSON_GetObjectItemCaseSensitive(l0, "burst_gap_frac");
        CHECK(cJSON_IsNumber(f3) && fabs(f3->valuedouble - 12.0 / 19.0) < 0.02,
              "json C=8 burst_gap_frac");
        CHECK(cJSON_IsNumber(f0) && f0->valuedouble == 0, "json C=1 burst_gap_frac 0");
        cJSON_Delete(j);
    }
    fit_result_free(r);
    fit_run_free(run);
}

/* Too few samples to judge: NAN, no note. */
static void test_burst_few(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1};
    sim_set_levels(&c, cs, 1, 1);
    c.max_tokens = 5;
    c.burst_every = 2;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    CHECK(sim_write(path, &c, &st) == 0, "sim_write");
    if (fit_load_run(path, &run, err, sizeof err)) {
        CHECK(0, "load: %s", err);
        return;
    }
    CHECK(fit_analyze(run, NULL, &r, err, sizeof err) == 0, "analyze: %s", err);
    if (r) {
        CHECK(r->n_levels == 1 && isnan(r->levels[0].burst_gap_frac), "4 samples: NAN");
        CHECK(note_for(r, 1) == NULL, "no burst note on 4 samples");
    }
    fit_result_free(r);
    fit_run_free(run);
}

int main(void)
{
    gsl_set_error_handler_off();
    char path[64];
    snprintf(path, sizeof path, "fit_burst_%ld.jsonl", (long)getpid());
    test_burst_level(path);
    test_burst_few(path);
    unlink(path);
    TEST_MAIN_END();
}
