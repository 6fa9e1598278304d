/* test_sweep_cache.c: fresh prompts against a caching server. The bundled
 * engine with its prefix cache on (prefix_cache=1, engine/prefix_cache.c)
 * serves a prompt's leading 16-word blocks that an earlier prompt had:
 *  (a) a default sweep (fresh prompts): 0 cached tokens at every level, in
 *      the responses (cached_tok) and in the engine's /metrics, and no note;
 *  (b) --reuse-prompts --cache keep: every level after the first is served
 *      from the cache (a share over 0.9 in both), noted, and its TTFT p50
 *      below the fresh run's at the same level (no prefill to wait for);
 *  (c) --reuse-prompts with the default --cache auto: the engine is told to
 *      forget its cache before each level (POST /reset_prefix_cache), so no
 *      level is served from it, and each level record says so;
 *  (d) a shared-prefix run (--shared-prefix 2:64, C = 2 twice): with --cache
 *      reset the second level's first requests start at 0 cached tokens, in
 *      their usage, and the engine's cached-token counter at the end
 *      (loadlaw_prompt_tokens_cached_total, as scraped into the records) is
 *      below the keep run's; with --cache keep they are cached from the first
 *      request on.
 * argv: none (LOADLAW_BIN). Real time: about 8 s. */
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

/* The level lines' and the requests' records of dir/name/records.jsonl:
 * level l's "cache" object into cache[l] (a copy: caller frees), and the
 * cached tokens of its first request by send time into first[l]; the
 * engine's loadlaw_prompt_tokens_cached_total at its last scrape (a
 * counter: the largest sample), -1 when never scraped. */
static double read_levels(const char *dir, const char *name, cJSON *cache[2], int first[2])
{
    double counter = -1;
    char path[512], line[65536];
    int64_t first_ns[2] = {INT64_MAX, INT64_MAX};
    snprintf(path, sizeof path, "%s/%s/records.jsonl", dir, name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: records", name);
    cache[0] = cache[1] = NULL;
    first[0] = first[1] = -1;
    while (f && fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        const char *type = ll_json_str(o, "type", "");
        int l = (int)ll_json_i64(o, "level", -1);
        if (l >= 0 && l < 2 && !strcmp(type, "level"))
            cache[l] = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "cache"), 1);
        if (l >= 0 && l < 2 && !strcmp(type, "request") && ll_json_i64(o, "send_ns", 0) < first_ns[l]) {
            first_ns[l] = ll_json_i64(o, "send_ns", 0);
            first[l] = (int)ll_json_i64(o, "cached_tok", -1);
        }
        if (!strcmp(type, "metric") && !strcmp(ll_json_str(o, "name", ""), "loadlaw_prompt_tokens_cached_total") &&
            ll_json_num(o, "value", -1) > counter)
            counter = ll_json_num(o, "value", -1);
        cJSON_Delete(o);
    }
    if (f)
        fclose(f);
    return counter;
}

static void test_reuse_reset(const char *dir)
{
    cJSON *j = sweep_fit(dir, "reuse-auto", "--reuse-prompts"), *cache[2];
    int first[2];
    for (int l = 0; l < 3; l++)
        CHECK(lnum(j, l, "cache_share") == 0, "reuse, cache auto, level %d: cached share %g", l,
              lnum(j, l, "cache_share"));
    (void)read_levels(dir, "reuse-auto", cache, first);
    for (int l = 0; l < 2; l++)
        CHECK(cache[l] && !strcmp(ll_json_str(cache[l], "asked", ""), "auto") &&
              !strcmp(ll_json_str(cache[l], "action", ""), "reset") &&
              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cache[l], "done")) &&
              ll_json_i64(cache[l], "status", 0) == 200 &&
              !strcmp(ll_json_str(cache[l], "how", ""), "POST /reset_prefix_cache") &&
              !strcmp(ll_json_str(cache[l], "server", ""), "loadlaw engine"),
              "reuse, cache auto, level %d record: the bundled engine told to forget, and it confirmed", l);
    cJSON_Delete(cache[0]);
    cJSON_Delete(cache[1]);
    cJSON_Delete(j);
}

/* A shared-prefix run with --cache `mode`: its fit, and its level records
 * and the engine's cached-token counter (read_levels). */
static cJSON *shared_run(const char *dir, const char *mode, cJSON *cache[2], int first[2], double *counter)
{
    char cmd[2048], path[512], name[32];
    snprintf(name, sizeof name, "shared-%s", mode);
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep --engine backend=synthetic,law=52+30n,p=0.1,time_scale=0.1,prefix_cache=1 "
                         "--shared-prefix 2:64 -c 2,2 -n 8 --max-tokens 8 --prompt-words 32 --seed 7 --cache %s "
                         "--metrics-interval 0.05 -q --no-report -o %s/%s > %s/%s.out 2>&1 && " LOADLAW_BIN
                         " fit %s/%s --json > %s/%s.json 2>/dev/null",
             mode, dir, name, dir, name, dir, name, dir, name);
    CHECK(tu_sh(cmd) == 0, "%s: sweep and fit (%s)", name, dir);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    *counter = read_levels(dir, name, cache, first);
    return tu_json_file(path);
}

static void test_shared_prefix(const char *dir)
{
    cJSON *rc[2], *kc[2];
    int rf[2], kf[2];
    double rs, ks;
    cJSON *reset = shared_run(dir, "reset", rc, rf, &rs), *keep = shared_run(dir, "keep", kc, kf, &ks);
    CHECK(rf[0] == 0 && kf[0] == 0, "level 0 starts cold either way (%d, %d)", rf[0], kf[0]);
    CHECK(rf[1] == 0, "reset: level 1's first request starts at 0 cached tokens (%d)", rf[1]);
    CHECK(kf[1] > 0, "keep: level 1's first request is served from the cache (%d tokens)", kf[1]);
    CHECK(lnum(reset, 1, "cache_share") < lnum(keep, 1, "cache_share"), "level 1's cached share: reset %g < keep %g",
          lnum(reset, 1, "cache_share"), lnum(keep, 1, "cache_share"));
    /* the engine's own count: the same run but for level 1's first requests */
    CHECK(rs >= 0 && rs < ks, "the engine's loadlaw_prompt_tokens_cached_total: reset %g < keep %g", rs, ks);
    CHECK(rc[1] && !strcmp(ll_json_str(rc[1], "action", ""), "reset") &&
          cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rc[1], "done")) &&
          ll_json_i64(rc[1], "status", 0) == 200,
          "reset: level 1's record says the reset was done and confirmed");
    CHECK(kc[1] && !strcmp(ll_json_str(kc[1], "asked", ""), "keep") &&
          !strcmp(ll_json_str(kc[1], "action", ""), "keep") &&
          !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kc[1], "done")),
          "keep: level 1's record says nothing was asked");
    for (int l = 0; l < 2; l++) {
        cJSON_Delete(rc[l]);
        cJSON_Delete(kc[l]);
    }
    cJSON_Delete(reset);
    cJSON_Delete(keep);
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_cache", dir, sizeof dir))
        return 1;
    cJSON *fresh = sweep_fit(dir, "fresh", ""), *reuse = sweep_fit(dir, "reuse", "--reuse-prompts --cache keep");
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
    test_reuse_reset(dir);
    test_shared_prefix(dir);
    cJSON_Delete(fresh);
    cJSON_Delete(reuse);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
