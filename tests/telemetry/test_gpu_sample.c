/* test_gpu_sample.c: `sweep --gpu` (telemetry/gpu_sample.c) end to end through the
 * real binary against the bundled engine.
 *  (a) NVML absent ($LOADLAW_NVML_LIB names no file): exit 0 and no nvml_*
 *      records; with --gpu on exactly one stderr line about it (the sweep's
 *      own banner and notes beside it), with the default (auto) on a
 *      synthetic engine not a word: a host without GPUs is not told so.
 *  (b) --gpu off: not a word about the GPU.
 *  (c) a fake NVML (fake_nvml.c: two GPUs at 170 of 300 W each, GPM SM 95%,
 *      tensor 10%, DRAM 20%, an energy counter): nvml_* records for both
 *      GPUs, and the fit's per-level GPU figures and diagnosis from them
 *      (340 of 600 W, latency-bound) wherever a level had ticks in its
 *      steady windows, at least one level. This checks the plumbing, not
 *      real NVML: no GPU here.
 *  (d) `fit --n server` on that run: the law against the engine's scraped
 *      running requests, the client's beside it; `--n maybe` is a usage error.
 * argv[1] = the fake library. Real time: about 4 s. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define SWEEP " sweep -c 2,4 -n 12 --max-tokens 96 --engine backend=synthetic,law=2+0.5n " \
              "--metrics-interval 0.05 -q"

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_sample FAKE_NVML_SO\n");
        return 2;
    }
    char cmd[4096];
    /* (a) absent */
    snprintf(cmd, sizeof cmd,
             "rm -rf gpu_absent && LOADLAW_NVML_LIB=/nonexistent/libnvidia-ml.so.1 " LOADLAW_BIN SWEEP
             " -c 2 --gpu on -o gpu_absent > gpu_absent.out 2> gpu_absent.err");
    CHECK(tu_sh(cmd) == 0, "absent NVML, --gpu on: the sweep succeeds (gpu_absent.err)");
    char *err = tu_slurp("gpu_absent.err"), *rec = tu_slurp("gpu_absent/records.jsonl");
    CHECK(tu_count(err, "gpu:") == 1 && tu_count(err, "NVML") == 1 && tu_count(err, "telemetry") == 1,
          "absent NVML, --gpu on: one stderr line saying so, got:\n%s", err ? err : "(none)");
    CHECK(rec && tu_count(rec, "\"nvml_") == 0, "absent NVML: no nvml records");
    free(err);
    free(rec);
    snprintf(cmd, sizeof cmd,
             "rm -rf gpu_quiet && LOADLAW_NVML_LIB=/nonexistent/libnvidia-ml.so.1 " LOADLAW_BIN SWEEP
             " -c 2 -o gpu_quiet > gpu_quiet.out 2> gpu_quiet.err");
    CHECK(tu_sh(cmd) == 0, "absent NVML, auto: the sweep succeeds (gpu_quiet.err)");
    err = tu_slurp("gpu_quiet.err");
    CHECK(err && tu_count(err, "gpu:") == 0 && tu_count(err, "NVML") == 0,
          "absent NVML, auto, synthetic engine: nothing said, got:\n%s", err ? err : "(none)");
    free(err);

    /* (b) off */
    snprintf(cmd, sizeof cmd,
             "rm -rf gpu_off && LOADLAW_NVML_LIB=/nonexistent " LOADLAW_BIN SWEEP
             " -c 2 --gpu off -o gpu_off > gpu_off.out 2> gpu_off.err");
    CHECK(tu_sh(cmd) == 0, "--gpu off: the sweep succeeds");
    err = tu_slurp("gpu_off.err");
    CHECK(err && tu_count(err, "gpu:") == 0 && tu_count(err, "NVML") == 0, "--gpu off: nothing said, got:\n%s",
          err ? err : "(none)");
    free(err);
    CHECK(tu_sh(LOADLAW_BIN " sweep --gpu maybe -c 2 > /dev/null 2>&1") == 2, "--gpu maybe: usage error");

    /* (c) a fake NVML */
    snprintf(cmd, sizeof cmd,
             "rm -rf gpu_fake && LOADLAW_NVML_LIB=%s " LOADLAW_BIN SWEEP
             " -o gpu_fake > gpu_fake.out 2> gpu_fake.err && " LOADLAW_BIN " fit gpu_fake --json > gpu_fake.json",
             argv[1]);
    CHECK(tu_sh(cmd) == 0, "fake NVML: sweep and fit (gpu_fake.err)");
    err = tu_slurp("gpu_fake.err");
    rec = tu_slurp("gpu_fake/records.jsonl");
    CHECK(err && tu_count(err, "gpu:") == 0, "fake NVML: no complaint, got:\n%s", err ? err : "(none)");
    CHECK(tu_count(rec, "\"name\":\"nvml_power_w\",\"labels\":\"gpu=\\\"0\\\"\"") > 0 &&
              tu_count(rec, "\"name\":\"nvml_power_w\",\"labels\":\"gpu=\\\"1\\\"\"") > 0 &&
              tu_count(rec, "\"name\":\"nvml_energy_mj\"") > 0 &&
              tu_count(rec, "\"name\":\"nvml_sm_active_ratio\"") > 0 &&
              tu_count(rec, "\"name\":\"nvml_clock_event_reasons\"") > 0,
          "fake NVML: nvml records for both GPUs");
    cJSON *fit = tu_json_file("gpu_fake.json");
    const cJSON *lv = get(fit, "levels"), *L;
    size_t with = 0;
    cJSON_ArrayForEach(L, lv)
    {
        if (!(num(L, "gpu_scrapes") > 0))
            continue;
        with++;
        CHECK(num(L, "gpu_power_w") == 340 && num(L, "gpu_power_limit_w") == 600,
              "fake NVML: power %g of %g W (summed over 2 GPUs)", num(L, "gpu_power_w"),
              num(L, "gpu_power_limit_w"));
        CHECK(fabs(num(L, "gpu_sm_active") - 0.95) < 1e-12 && fabs(num(L, "gpu_tensor_active") - 0.1) < 1e-12 &&
                  fabs(num(L, "gpu_dram_active") - 0.2) < 1e-12,
              "fake NVML: GPM activities (%g, %g, %g)", num(L, "gpu_sm_active"), num(L, "gpu_tensor_active"),
              num(L, "gpu_dram_active"));
        const cJSON *d = get(L, "diagnosis");
        CHECK(cJSON_IsString(d) && !strcmp(d->valuestring, "latency-bound"), "fake NVML: latency-bound");
    }
    CHECK(with > 0, "fake NVML: a level with ticks in its steady windows");
    cJSON_Delete(fit);

    /* (d) */
    CHECK(tu_sh(LOADLAW_BIN " fit gpu_fake --n server --json > gpu_fake_nserver.json") == 0, "fit --n server");
    fit = tu_json_file("gpu_fake_nserver.json");
    const cJSON *ln = get(fit, "law_n"), *lo = get(fit, "law_other");
    CHECK(cJSON_IsString(ln) && !strcmp(ln->valuestring, "server"), "fit --n server: law_n");
    CHECK(cJSON_IsNumber(get(get(fit, "law"), "b_ms")) && cJSON_IsNumber(get(lo, "b_ms")),
          "fit --n server: both laws (the engine's N = C, so nearly one)");
    CHECK(tu_sh(LOADLAW_BIN " fit gpu_fake --n maybe > /dev/null 2>&1") == 2, "fit --n maybe: usage error");
    cJSON_Delete(fit);
    free(err);
    free(rec);
    TEST_MAIN_END();
}
