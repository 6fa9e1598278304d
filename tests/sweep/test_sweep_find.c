/* test_sweep_find.c: `loadlaw sweep --find`, the adaptive capacity search,
 * end to end through the real binary on the bundled engine (fixed seeds; the
 * synthetic law is the truth).
 *
 * (a) 52 + 30n at time scale 0.1 (a step of 5.2 + 3N ms), 32-token outputs,
 *     itl_p99<=40ms: C = 11 (truth: the mean step is 38.2 ms at 11 and 41.2
 *     ms at 12), in at most 7 levels (a doubling ramp with bisection needs
 *     1,2,4,8,16,12,10,11: 8), the sustain at 11 meeting it and the
 *     re-measure at 12 failing it; every level record carries its role and
 *     summary.json its "find".
 * (b) A knee: 20 + 2n, 10 ms a request above N = 8, time scale 0.5 (steps of
 *     28 ms at 10 and 33 at 11), itl_p99<=30.5ms: C = 10, re-measured.
 *     The ladder's line over-predicts; the probe that fails shows the knee.
 * (c) A context term: 10 + 8n + 2c (per 1k tokens of context) with the
 *     same ~1000-token prompts at every level (--reuse-prompts), time scale
 *     0.2 (steps of about 22 ms at 10 and 24 at 11), itl_p99<=23ms: C = 10,
 *     re-measured; the model chosen has the context term.
 * (d) Objectives with typos: exit 2 naming the term, nothing run.
 * (e) --find-budget 3 on (a): exit 4, outcome "budget of levels", 3 levels.
 * (f) itl_p99<=5ms on (a), which even C = 1 (8.2 ms) misses: exit 3.
 *
 * Timing: each boundary sits 4-8% from the objective, over a thousand gaps
 * a level; the test runs alone (RUN_SERIAL), and a search that missed is
 * run once more (check_found). argv: none (LOADLAW_BIN). Real time: about
 * 60 s, 2 min when a run is repeated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

static char g_tmp[256];

/* One --find sweep on the bundled engine; extra: more arguments (NULL-ended). */
static int find_run(const char *name, const char *engine, const char *objective, char *const extra[], char *dir,
                    size_t n)
{
    char errf[400];
    snprintf(dir, n, "%s/%s", g_tmp, name);
    snprintf(errf, sizeof errf, "%s/%s.err", g_tmp, name);
    char *args[40] = {"loadlaw", "sweep", "--engine", (char *)engine, "--max-tokens", "32", "--find",
                      (char *)objective, "--no-report", "--gpu", "off", "-q", "-o", dir};
    size_t k = 14;
    for (size_t i = 0; extra && extra[i] && k < 39; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    char outf[400];
    snprintf(outf, sizeof outf, "%s/%s.out", g_tmp, name);
    return tu_run(LOADLAW_BIN, args, outf, errf, 0);
}

static cJSON *summary_find(const char *dir, cJSON **doc)
{
    char path[400];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    *doc = tu_json_file(path);
    return *doc ? cJSON_GetObjectItemCaseSensitive(*doc, "find") : NULL;
}

/* The last level of role at C in find's levels: its figure `term`; NAN: none. */
static double figure_at(const cJSON *find, int c, const char *role, const char *term)
{
    double v = NAN;
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(find, "levels"))
        if ((int)ll_json_num(l, "concurrency", -1) == c && !strcmp(ll_json_str(l, "role", ""), role))
            v = ll_json_num(cJSON_GetObjectItemCaseSensitive(l, "figures"), term, NAN);
    return v;
}

/* Every level record carries a role, and there are n of them. */
static void check_roles(const char *dir, size_t n, const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    char *text = tu_slurp(path);
    size_t levels = 0, roles = 0;
    for (const char *p = text; p && (p = strstr(p, "\"type\":\"level\",")); p++) {
        const char *eol = strchr(p, '\n');
        const char *r = strstr(p, "\"find_role\":\"");
        levels++;
        roles += r && (!eol || r < eol);
    }
    free(text);
    CHECK(levels == n && roles == n, "%s: %zu level records, %zu with find_role, want %zu", name, levels, roles, n);
}

#ifdef LOADLAW_SANITIZED
/* Under the sanitizers the client and the engine's threads run several
 * times slower and unevenly: a p99 a few percent from its objective is
 * then the machine's, not the law's. The search must still end on the
 * boundary's neighbourhood, with its roles and its summary; how exactly it
 * pinned it is checked in the plain build. */
static void check_found(const char *name, const char *engine, const char *objective, char *const extra[],
                        const char *term, double limit, int want, int max_levels)
{
    char dir[300];
    cJSON *doc = NULL;
    (void)term;
    (void)limit;
    (void)figure_at; /* the plain build's proof reads it */
    int rc = find_run(name, engine, objective, extra, dir, sizeof dir);
    cJSON *f = summary_find(dir, &doc);
    int answer = (int)ll_json_num(f, "answer_c", -1), levels = (int)ll_json_num(f, "n_levels", -1);
    const char *outcome = ll_json_str(f, "outcome", "");
    CHECK(rc == 0 && (!strcmp(outcome, "found") || !strcmp(outcome, "within noise")),
          "%s (sanitized): exit %d, outcome '%s'", name, rc, outcome);
    CHECK(abs(answer - want) <= 1, "%s (sanitized): C = %d, want %d +- 1", name, answer, want);
    CHECK(levels >= 5 && levels <= max_levels + 6, "%s (sanitized): %d levels", name, levels);
    check_roles(dir, (size_t)levels, name);
    cJSON_Delete(doc);
}
#else
/* A found boundary: exit 0, answer `want` in at most max_levels, the
 * sustain at it meets `term` <= limit and the re-measure above it does not.
 * The shared machine's stalls (a compile beside the test) can add several ms
 * to a p99: a run that misses is run once more, and the second must pass. */
static void check_found(const char *name, const char *engine, const char *objective, char *const extra[],
                        const char *term, double limit, int want, int max_levels)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        char dir[300], nm[64];
        cJSON *doc = NULL;
        snprintf(nm, sizeof nm, "%s%s", name, attempt ? "-again" : "");
        int rc = find_run(nm, engine, objective, extra, dir, sizeof dir);
        cJSON *f = summary_find(dir, &doc);
        int answer = (int)ll_json_num(f, "answer_c", -1), levels = (int)ll_json_num(f, "n_levels", -1);
        double at = figure_at(f, want, "sustain", term), above = figure_at(f, want + 1, "re-measure", term);
        int ok = rc == 0 && answer == want && levels >= 5 && levels <= max_levels && at <= limit && above > limit &&
                 !strcmp(ll_json_str(f, "outcome", ""), "found");
        if (!ok && attempt == 0) {
            fprintf(stderr, "%s: C = %d in %d levels (exit %d): once more\n", name, answer, levels, rc);
            cJSON_Delete(doc);
            continue;
        }
        CHECK(rc == 0, "%s: exit 0, got %d (see %s/%s.err)", nm, rc, g_tmp, nm);
        CHECK(answer == want, "%s: C = %d, want %d", nm, answer, want);
        CHECK(!strcmp(ll_json_str(f, "outcome", ""), "found"), "%s: outcome '%s'", nm,
              ll_json_str(f, "outcome", ""));
        CHECK(levels >= 5 && levels <= max_levels, "%s: %d levels, at most %d", nm, levels, max_levels);
        CHECK(at <= limit, "%s: %s at C = %d re-measured (sustain): %.2f <= %.2f", nm, term, want, at, limit);
        CHECK(above > limit, "%s: %s at C = %d re-measured: %.2f > %.2f", nm, term, want + 1, above, limit);
        check_roles(dir, (size_t)levels, nm);
        cJSON_Delete(doc);
        return;
    }
}
#endif

static void test_bad_objectives(void)
{
    static const char *const bad[][2] = {{"itl_p95<=40ms", "'itl_p95': unknown metric"},
                                         {"itl_p99>=40ms", "itl_p99: expected <="},
                                         {"ttft_p99<=2x", "ttft_p99: expected a duration"},
                                         {"goodput>=90%", "goodput counts the requests"},
                                         {"itl_p99<=40ms,itl_p99<=30ms", "itl_p99 given twice"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[300], errf[400], name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        int rc = find_run(name, "backend=synthetic", bad[i][0], NULL, dir, sizeof dir);
        snprintf(errf, sizeof errf, "%s/%s.err", g_tmp, name);
        CHECK(rc == 2, "'%s': exit 2, got %d", bad[i][0], rc);
        CHECK(tu_file_has(errf, bad[i][1]), "'%s': the message says '%s'", bad[i][0], bad[i][1]);
    }
    char dir[300];
    char *with_c[] = {"-c", "1,2", NULL};
    CHECK(find_run("bad_c", "backend=synthetic", "itl_p99<=40ms", with_c, dir, sizeof dir) == 2,
          "--find with -c: exit 2");
}

static void test_budget_and_none(void)
{
    char dir[300];
    cJSON *doc = NULL;
    char *budget[] = {"--find-budget", "3", NULL};
    int rc = find_run("budget", "backend=synthetic,law=52+30n,time_scale=0.1", "itl_p99<=40ms", budget, dir,
                      sizeof dir);
    CHECK(rc == 4, "budget: exit 4, got %d", rc);
    cJSON *f = summary_find(dir, &doc);
    CHECK(f && !strcmp(ll_json_str(f, "outcome", ""), "budget of levels"), "budget: outcome '%s'",
          f ? ll_json_str(f, "outcome", "") : "(none)");
    CHECK(f && ll_json_num(f, "n_levels", -1) == 3, "budget: 3 levels");
    CHECK(f && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(f, "answer_c")), "budget: no answer");
    cJSON_Delete(doc);
    rc = find_run("none", "backend=synthetic,law=52+30n,time_scale=0.1", "itl_p99<=5ms", NULL, dir, sizeof dir);
    CHECK(rc == 3, "none: exit 3, got %d", rc);
    f = summary_find(dir, &doc);
    CHECK(f && !strcmp(ll_json_str(f, "outcome", ""), "fails at C=1") && ll_json_num(f, "n_levels", -1) == 1,
          "none: outcome 'fails at C=1' after one level");
    cJSON_Delete(doc);
}

int main(void)
{
    if (tu_tmpdir("sweep_find", g_tmp, sizeof g_tmp)) {
        fprintf(stderr, "no scratch folder\n");
        return 1;
    }
    test_bad_objectives();
    test_budget_and_none();
    /* the same prompts at every level: the context per request (K/N) is the same at every C */
    char *ctx[] = {"--prompt-tokens", "1000", "--reuse-prompts", NULL};
    check_found("line", "backend=synthetic,law=52+30n,time_scale=0.1", "itl_p99<=40ms", NULL, "itl_p99", 40, 11, 7);
    check_found("knee", "backend=synthetic,law=20+2n,knee=8:10,time_scale=0.5", "itl_p99<=30.5ms", NULL, "itl_p99",
                30.5, 10, 10);
    check_found("context", "backend=synthetic,law=10+8n+2c,time_scale=0.2", "itl_p99<=23ms", ctx, "itl_p99", 23, 10,
                10);
    if (tu_fail == 0)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
