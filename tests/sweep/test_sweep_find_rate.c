/* test_sweep_find_rate.c: `loadlaw sweep --find --find-by rate`, the
 * capacity search over open-loop arrival rates, end to end through the real
 * binary on the bundled engine (fixed seeds; the synthetic law is the
 * truth), and the roles read back by `loadlaw fit`.
 *
 * (a) 52 + 30n at time scale 0.1 (a step of 5.2 + 3N ms), 32-token outputs,
 *     itl_mean<=30ms over Poisson arrivals: found, the interval [lo, hi]
 *     within the default precision (hi <= 1.1 lo), the sustain at lo
 *     meeting it and the re-measure at hi failing it, lo below the engine's
 *     ceiling (1000 / (32 x 3 ms) = 10.4 requests/s: no rate above it keeps
 *     the queue finite) and above 3/s (N about 1.5). By Little's law the
 *     mean step is 30 ms at N = 8.3, about 8.6/s, and 59 ms at 9.5/s: near
 *     the ceiling a 10% step in rate moves N by far more than the arrivals'
 *     noise (an ITL p99 there wandered by 15% between two runs at one rate).
 * (b) The roles read back: `fit --json` gives every level its find_role
 *     (the opening one closed, the others open); `fit`'s table tags the
 *     levels with role and rate ("(find: probe at 8.6/s)").
 * (c) Usage: --find-by without --find, an unknown --find-by, a precision
 *     out of range, --rate beside --find: exit 2 with the reason.
 *
 * Timing: the boundary's two rates are 10% apart, their mean steps far
 * more; the test runs alone (RUN_SERIAL), and a search that missed is run
 * once more. argv: none (LOADLAW_BIN). Real time: about 70 s, 2.5 min when
 * the search is repeated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define ENGINE "backend=synthetic,law=52+30n,time_scale=0.1"

static char g_tmp[256];

/* One sweep on the bundled engine with args (NULL-ended) after the common
 * ones; its stdout and stderr in g_tmp/name.out and .err. */
static int sweep(const char *name, char *const extra[], char *dir, size_t n)
{
    char outf[400], errf[400];
    snprintf(dir, n, "%s/%s", g_tmp, name);
    snprintf(outf, sizeof outf, "%s/%s.out", g_tmp, name);
    snprintf(errf, sizeof errf, "%s/%s.err", g_tmp, name);
    char *args[40] = {"loadlaw", "sweep", "--engine", ENGINE, "--max-tokens", "32", "--no-report", "--gpu", "off",
                      "-q", "-o", dir};
    size_t k = 12;
    for (size_t i = 0; extra && extra[i] && k < 39; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    return tu_run(LOADLAW_BIN, args, outf, errf, 0);
}

/* The last level of role at rate x in find's levels: its itl_mean; NAN: none. */
static double itl_at(const cJSON *find, double x, const char *role)
{
    double v = NAN;
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(find, "levels"))
        if (ll_json_num(l, "rate_per_s", -1) == x && !strcmp(ll_json_str(l, "role", ""), role))
            v = ll_json_num(cJSON_GetObjectItemCaseSensitive(l, "figures"), "itl_mean", NAN);
    return v;
}

/* (b): fit --json's levels and fit's table on the search's run. */
static void check_read_back(const char *dir, int n_levels)
{
    char outf[400], *args[] = {"loadlaw", "fit", (char *)dir, "--json", NULL};
    snprintf(outf, sizeof outf, "%s/fit.json", g_tmp);
    CHECK(tu_run(LOADLAW_BIN, args, outf, NULL, 0) == 0, "fit --json: exit 0");
    cJSON *doc = tu_json_file(outf);
    const cJSON *l;
    int n = 0, roles = 0, open_rated = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(doc, "levels")) {
        const char *role = ll_json_str(l, "find_role", NULL);
        n++;
        roles += role != NULL;
        open_rated += !strcmp(ll_json_str(l, "mode", ""), "open");
        if (n == 1)
            CHECK(role && !strcmp(role, "ladder") && !strcmp(ll_json_str(l, "mode", ""), "closed"),
                  "fit --json: the opening level is a closed ladder rung");
    }
    CHECK(n == n_levels && roles == n_levels && open_rated == n_levels - 1,
          "fit --json: %d levels, %d with find_role, %d open; want %d, %d, %d", n, roles, open_rated,
          n_levels, n_levels, n_levels - 1);
    cJSON_Delete(doc);
    char *text_args[] = {"loadlaw", "fit", (char *)dir, NULL};
    snprintf(outf, sizeof outf, "%s/fit.txt", g_tmp);
    CHECK(tu_run(LOADLAW_BIN, text_args, outf, NULL, 0) == 0, "fit: exit 0");
    CHECK(tu_file_has(outf, "  (find: ladder)") && tu_file_has(outf, "(find: sustain at ") &&
              tu_file_has(outf, "(find: re-measure at "),
          "fit's table tags the levels with their roles (%s)", outf);
}

/* (a): found and proved; 0 when it was (or the second run failed its checks). */
static int found_once(const char *name, int last)
{
    char dir[300], sum[400];
    char *extra[] = {"--find", "itl_mean<=30ms", "--find-by", "rate", NULL};
    int rc = sweep(name, extra, dir, sizeof dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    cJSON *doc = tu_json_file(sum), *f = cJSON_GetObjectItemCaseSensitive(doc, "find");
    double lo = ll_json_num(f, "largest_rate_met", NAN), hi = ll_json_num(f, "smallest_rate_failed", NAN);
    double answer = ll_json_num(f, "answer_rate_per_s", NAN);
    double at = itl_at(f, lo, "sustain"), above = itl_at(f, hi, "re-measure");
    /* fit's figures at the two rates: the objective's limit between them */
    int levels = (int)ll_json_num(f, "n_levels", -1);
    const char *outcome = ll_json_str(f, "outcome", "");
    int ok = rc == 0 && !strcmp(outcome, "found") && answer == lo && hi <= 1.1 * lo * (1 + 1e-9) && lo > 3 &&
             lo < 10.4 && at <= 30 && above > 30 && !strcmp(ll_json_str(f, "by", ""), "rate");
    if (!ok && !last) {
        fprintf(stderr, "%s: exit %d, %s, [%g, %g]/s, itl_mean %.1f / %.1f: once more\n", name, rc, outcome, lo, hi,
                at, above);
        cJSON_Delete(doc);
        return -1;
    }
    CHECK(rc == 0, "%s: exit 0, got %d (see %s/%s.err)", name, rc, g_tmp, name);
    CHECK(!strcmp(outcome, "found"), "%s: outcome '%s'", name, outcome);
    CHECK(answer == lo, "%s: the answer %g is the largest rate met %g", name, answer, lo);
    CHECK(hi <= 1.1 * lo * (1 + 1e-9), "%s: [%g, %g] within 10%%", name, lo, hi);
    CHECK(lo > 3 && lo < 10.4, "%s: %g/s between 3/s and the engine's ceiling 10.4/s", name, lo);
    CHECK(at <= 30, "%s: itl_mean at %g/s re-measured (sustain): %.2f <= 30", name, lo, at);
    CHECK(above > 30, "%s: itl_mean at %g/s re-measured: %.2f > 30", name, hi, above);
    CHECK(levels >= 5 && levels <= 12, "%s: %d levels", name, levels);
    CHECK(tu_file_has(sum, "\"predicted_rate_per_s\":"), "%s: the model's prediction in summary.json", name);
    check_read_back(dir, levels);
    cJSON_Delete(doc);
    return 0;
}

static void test_usage(void)
{
    static const char *const cases[][5] = {
        {"--find-by", "rate", NULL, NULL, "--find-by: needs --find"},
        {"--find", "itl_mean<=30ms", "--find-by", "speed", "--find-by"},
        {"--find", "itl_mean<=30ms", "--find-precision", "0", "--find-precision"},
        {"--find", "itl_mean<=30ms", "--rate", "5", "--find-by rate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[300], errf[400], name[32];
        char *extra[] = {(char *)cases[i][0], (char *)cases[i][1], (char *)cases[i][2], (char *)cases[i][3], NULL};
        snprintf(name, sizeof name, "usage%zu", i);
        snprintf(errf, sizeof errf, "%s/%s.err", g_tmp, name);
        int rc = sweep(name, extra, dir, sizeof dir);
        CHECK(rc == 2, "%s %s: exit 2, got %d", cases[i][0], cases[i][3] ? cases[i][3] : cases[i][1], rc);
        CHECK(tu_file_has(errf, cases[i][4]), "%s: the message says '%s'", name, cases[i][4]);
    }
}

int main(void)
{
    if (tu_tmpdir("sweep_find_rate", g_tmp, sizeof g_tmp)) {
        fprintf(stderr, "no scratch folder\n");
        return 1;
    }
    test_usage();
    if (found_once("rate", 0))
        found_once("rate-again", 1);
    if (tu_fail == 0)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
