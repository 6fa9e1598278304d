/* test_fit_context_e2e.c: the context term recovered end to end: `loadlaw
 * sweep` against the bundled synthetic engine playing 20 + 2n + 0.5c (c per
 * 1,000 context tokens of the running requests) at time scale 0.1, with
 * prompt lengths varied within levels (load.vary_context), then `loadlaw fit
 * --json`: the model check chooses the context model, and each term is
 * within 8% of the law as played (TOL below), c's interval excluding 0;
 * measured once more when the first sweep misses (a busy host).
 * argv: none (LOADLAW_BIN). Real time: about 10 s (20 s with the retry). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

/* Each term's tolerance: 8% (real time on a shared machine; the simulated
 * runs of test_fit_models.c hold 3%); under the sanitizers, whose overhead
 * grows the client's and engine's per-step work unevenly with N and K, 15%. */
#ifdef LOADLAW_SANITIZED
#define TOL 0.15
#else
#define TOL 0.08
#endif

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Sweep and fit into dir/NAME; the fit's JSON (NULL when either failed). */
static cJSON *sweep_fit(const char *dir, const char *scn, const char *name)
{
    int rc = 0;
    cJSON *j = tu_sweep_fit(LOADLAW_BIN, scn, dir, name, &rc);
    CHECK(rc == 0, "sweep and fit (%s/%s)", dir, name);
    return j;
}

/* The context model chosen and a, b, c within TOL of the law as played
 * (2 + 0.2n + 0.05c at time scale 0.1). */
static int recovered(const cJSON *j)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model_check");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(m, "best");
    return cJSON_IsString(best) && strcmp(best->valuestring, "context") == 0 &&
           fabs(num(m, "ctx_a_ms") / 2.0 - 1) <= TOL && fabs(num(m, "ctx_b_ms") / 0.2 - 1) <= TOL &&
           fabs(num(m, "ctx_c_ms_per_ktok") / 0.05 - 1) <= TOL;
}

int main(void)
{
    char dir[256], path[512];
    if (tu_tmpdir("ll_test_fit_context", dir, sizeof dir))
        return 1;
    snprintf(path, sizeof path, "%s/ctx.json", dir);
    tu_write_file(path,
                  "{\"name\":\"context\",\"engine\":\"backend=synthetic,law=20+2n+0.5c,time_scale=0.1,seed=1\","
                  "\"request\":{\"max_tokens\":128,\"think_tokens\":0,\"ignore_eos\":true,\"timeout_s\":120},"
                  "\"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"uniform\",\"min\":1000,\"max\":2000},"
                  "\"count\":1024,\"seed\":1},"
                  "\"load\":{\"concurrency\":[1,2,4,8,16],\"requests\":0,\"warmup\":0,\"drain_s\":10,"
                  "\"vary_context\":true}}\n");
    /* measured once more when the first try misses: another process busy
     * during one level (a build, another suite) bends its steps; a wrong
     * engine or fit misses both tries */
    cJSON *j = sweep_fit(dir, path, "run");
    if (j && !recovered(j)) {
        printf("the first sweep missed the law by more than %.0f%%: measured once more\n", 100 * TOL);
        cJSON_Delete(j);
        j = sweep_fit(dir, path, "run-again");
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model_check");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(m, "best");
    CHECK(cJSON_IsString(best) && strcmp(best->valuestring, "context") == 0, "the context model chosen: %s",
          cJSON_IsString(best) ? best->valuestring : "(none)");
    /* played at time scale 0.1: 2 + 0.2n + 0.05c */
    CHECK_REL(num(m, "ctx_a_ms"), 2.0, TOL, "a");
    CHECK_REL(num(m, "ctx_b_ms"), 0.2, TOL, "b");
    CHECK_REL(num(m, "ctx_c_ms_per_ktok"), 0.05, TOL, "c per 1k context tokens");
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(m, "ctx_c_ci_ms_per_ktok");
    CHECK(cJSON_GetArraySize(ci) == 2 && cJSON_GetArrayItem(ci, 0)->valuedouble > 0, "c's interval excludes 0");
    cJSON_Delete(j);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
