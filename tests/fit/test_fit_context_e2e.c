/* test_fit_context_e2e.c: the context term recovered end to end: `loadlaw
 * sweep` against the bundled synthetic engine playing 20 + 2n + 0.5c (c per
 * 1,000 context tokens of the running requests) at time scale 0.1, with
 * prompt lengths varied within levels (load.vary_context), then `loadlaw fit
 * --json`: the model check chooses the context model, and each term is
 * within 8% of the law as played (TOL below), c's interval excluding 0.
 * argv: none (LOADLAW_BIN). Real time: about 10 s. */
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

int main(void)
{
    char dir[256], path[512], cmd[2048];
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
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep %s -o %s/run -q --no-report > %s/sweep.out 2>&1 && " LOADLAW_BIN
                         " fit %s/run --json > %s/fit.json 2> %s/fit.err",
             path, dir, dir, dir, dir, dir);
    CHECK(tu_sh(cmd) == 0, "sweep and fit (%s)", dir);
    snprintf(path, sizeof path, "%s/fit.json", dir);
    cJSON *j = tu_json_file(path);
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
