/* test_sweep_cache.c: fresh prompts against a caching server. The bundled
 * engine with its prefix cache on (prefix_cache=1, engine/prefix_cache.c)
 * serves a prompt's leading 16-word blocks that an earlier prompt had:
 *  (a) a default sweep (fresh prompts): 0 cached tokens at every level, in
 *      the responses (cached_tok) and in the engine's /metrics, and no note;
 *  (b) --reuse-prompts: every level after the first is served from the cache
 *      (a share over 0.9 in both), noted, and its TTFT p50 below the fresh
 *      run's at the same level (no prefill to wait for).
 * argv: none (LOADLAW_BIN). Real time: about 5 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

static cJSON *sweep_fit(const char *dir, const char *name, const char *extra)
{
    char cmd[2048], path[512];
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep --engine backend=synthetic,law=52+30n,p=0.2,time_scale=0.05,prefix_cache=1 "
                         "-c 1,2,4 -n 8 --max-tokens 16 --prompt-words 300 --metrics-interval 0.05 -q --no-report "
                         "-o %s/%s %s > %s/%s.out 2>&1 && " LOADLAW_BIN " fit %s/%s --json > %s/%s.json 2>/dev/null",
             dir, name, extra, dir, name, dir, name, dir, name);
    CHECK(tu_sh(cmd) == 0, "%s: sweep and fit (%s)", name, dir);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    return tu_json_file(path);
}

static double lnum(const cJSON *j, int level, const char *k)
{
    const cJSON *L = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "levels"), level);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(L, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static double ttft_p50(const cJSON *j, int level)
{
    return lnum(j, level, "ttft_p50_ms");
}

static int has_note(const cJSON *j, const char *needle)
{
    const cJSON *n;
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(j, "notes"))
    {
        if (cJSON_IsString(n) && strstr(n->valuestring, needle))
            return 1;
    }
    return 0;
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_cache", dir, sizeof dir))
        return 1;
    cJSON *fresh = sweep_fit(dir, "fresh", ""), *reuse = sweep_fit(dir, "reuse", "--reuse-prompts");
    for (int l = 0; l < 3; l++) {
        CHECK(lnum(fresh, l, "cache_share") == 0 && lnum(fresh, l, "n_cached_said") == 8,
              "fresh, level %d: cached share %g of %g requests", l, lnum(fresh, l, "cache_share"),
              lnum(fresh, l, "n_cached_said"));
        double s = lnum(fresh, l, "server_cache_share");
        CHECK(isnan(s) || s == 0, "fresh, level %d: the engine's /metrics share %g", l, s);
    }
    CHECK(!has_note(fresh, "prefix cache"), "fresh: no cache note");
    CHECK(lnum(reuse, 0, "cache_share") == 0, "reuse, level 0: nothing cached yet");
    for (int l = 1; l < 3; l++) {
        CHECK(lnum(reuse, l, "cache_share") > 0.9, "reuse, level %d: cached share %g", l,
              lnum(reuse, l, "cache_share"));
        CHECK(ttft_p50(reuse, l) < ttft_p50(fresh, l), "reuse, level %d: TTFT p50 %.3f below fresh %.3f ms", l,
              ttft_p50(reuse, l), ttft_p50(fresh, l));
    }
    CHECK(has_note(reuse, "prefix cache"), "reuse: the cache noted");
    cJSON_Delete(fresh);
    cJSON_Delete(reuse);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
