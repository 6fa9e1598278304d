/* test_e2e.c: compare and trace on real runs of the bundled engine.
 *
 * Two sweeps of the synthetic engine whose slopes differ by a factor of 3
 * (law 20+12n and 20+4n ms, time_scale 0.05): `loadlaw compare` must put 1/3
 * inside the slope ratio's interval and the law's speedup at C=16,
 * (20+192)/(20+64) = 2.52, inside that level's interval; the gate exits 0
 * and 3 where it should. Then a profiled sweep (the engine's /start_profile,
 * 12 steps at C=32 of (52+30*32)*0.01 = 10.12 ms) read back by `loadlaw trace`.
 *
 * argv[1] = the loadlaw binary. Real sockets, real time: about 15 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_e2e LOADLAW\n");
        return 2;
    }
    const char *bin = argv[1];
    char cmd[4096];
    const char *common = "-c 1,2,4,8,16 -n 24 --max-tokens 48 -q --no-report";
    snprintf(cmd, sizeof cmd, "rm -rf e2e_a e2e_b e2e_prof && %s sweep --engine "
                              "backend=synthetic,law=20+12n,time_scale=0.05,jitter=0.02,seed=1 %s -o e2e_a > e2e_a.log 2>&1",
             bin, common);
    CHECK(tu_sh(cmd) == 0, "sweep A (see e2e_a.log)");
    snprintf(cmd, sizeof cmd, "%s sweep --engine backend=synthetic,law=20+4n,time_scale=0.05,jitter=0.02,seed=2 %s "
                              "-o e2e_b > e2e_b.log 2>&1",
             bin, common);
    CHECK(tu_sh(cmd) == 0, "sweep B (see e2e_b.log)");

    snprintf(cmd, sizeof cmd, "%s compare e2e_a e2e_b --json > e2e_cmp.json", bin);
    CHECK(tu_sh(cmd) == 0, "compare");
    cJSON *j = tu_json_file("e2e_cmp.json");
    CHECK(j != NULL, "compare json");
    if (j) {
        const cJSON *ci = cJSON_GetObjectItem(j, "slope_ratio_ci");
        double lo = cJSON_GetArrayItem(ci, 0) ? cJSON_GetArrayItem(ci, 0)->valuedouble : NAN;
        double hi = cJSON_GetArrayItem(ci, 1) ? cJSON_GetArrayItem(ci, 1)->valuedouble : NAN;
        CHECK(lo <= 1.0 / 3 && 1.0 / 3 <= hi, "slope ratio 1/3 outside [%.3f, %.3f]", lo, hi);
        CHECK(hi < 0.5, "slope interval tells 1/3 from 1/2: hi %.3f", hi);
        const cJSON *L, *top = NULL;
        cJSON_ArrayForEach(L, cJSON_GetObjectItem(j, "levels")) if (ll_json_num(L, "concurrency", 0) == 16) top = L;
        CHECK(top != NULL, "level C=16 compared");
        if (top) {
            const cJSON *r = cJSON_GetObjectItem(top, "ratio_ci");
            double want = (20 + 12 * 16.0) / (20 + 4 * 16.0);
            double rlo = cJSON_GetArrayItem(r, 0)->valuedouble, rhi = cJSON_GetArrayItem(r, 1)->valuedouble;
            CHECK(rlo <= want && want <= rhi, "C=16 speedup %.3f outside [%.3f, %.3f]", want, rlo, rhi);
            CHECK(cJSON_IsTrue(cJSON_GetObjectItem(top, "steady")), "C=16 had steady windows");
        }
        cJSON_Delete(j);
    }
    snprintf(cmd, sizeof cmd, "%s compare e2e_a e2e_b --expect-speedup 2.0@16 > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "gate 2.0@16 met");
    snprintf(cmd, sizeof cmd, "%s compare e2e_a e2e_b --expect-speedup 3.5 > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 3, "gate 3.5 missed -> 3");
    snprintf(cmd, sizeof cmd, "%s compare e2e_b e2e_a --expect-speedup 1.0 > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 3, "the slower run does not pass as a speedup");

    /* The engine's own profiler trace, through `loadlaw trace`. */
    snprintf(cmd, sizeof cmd, "mkdir -p e2e_prof && %s sweep %s/scenarios/profile-c32.json --engine "
                              "backend=synthetic,law=52+30n,time_scale=0.01,think=32,seed=1,profile_dir=e2e_prof "
                              "-n 40 -q --no-report -o e2e_prof > e2e_prof.log 2>&1 && "
                              "%s trace e2e_prof/*.pt.trace.json* --json > e2e_trace.json",
             bin, LOADLAW_SOURCE_DIR, bin);
    CHECK(tu_sh(cmd) == 0, "profiled sweep + trace (see e2e_prof.log)");
    j = tu_json_file("e2e_trace.json");
    CHECK(j != NULL, "trace json");
    if (j) {
        const cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
        CHECK(ll_json_num(f0, "gpu_events", 0) == 12, "12 profiled steps, got %g", ll_json_num(f0, "gpu_events", 0));
        CHECK_NEAR(ll_json_num(f0, "gpu_total_us", 0), 12 * 10120.0, 1.0, "GPU time = 12 steps of 10.12 ms");
        /* busy: the steps' time over the span from the first to the last;
         * how close to 1 depends on the host (a stall of over a step restarts
         * the engine's deadline chain and leaves a gap), so it is checked
         * against the file's own span, not a threshold */
        const cJSON *s0 = cJSON_GetArrayItem(cJSON_GetObjectItem(f0, "streams"), 0);
        double busy = ll_json_num(s0, "busy_us", 0), span = ll_json_num(f0, "span_us", 0);
        CHECK(busy == 12 * 10120.0 && span >= busy &&
                  fabs(ll_json_num(s0, "busy_frac", 0) - busy / span) < 1e-9,
              "engine stream busy %.1f us of a %.1f us span, busy_frac %.4f", busy, span,
              ll_json_num(s0, "busy_frac", 0));
        cJSON_Delete(j);
    }
    TEST_MAIN_END();
}
