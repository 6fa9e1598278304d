/* test_cuda_start.c: what the cuda backend does on any machine, GPU or not
 * (this test never skips):
 *   - its keys parse (kv, device) and bad values are refused naming the key;
 *   - eng_start with backend=cuda fails cleanly, naming the CUDA error, where
 *     no device answers (CI), or for a device that does not exist (GPU box);
 *   - the names its phases carry into the /start_profile trace classify as
 *     `loadlaw trace` should (attention, GEMM, ...), read back through the
 *     trace reader from a trace laid out like engine/profile.c writes it;
 *   - scenarios/kernel-ab-cuda.json loads: naive vs tiled on backend=cuda,
 *     C up to 256, gated at C=64 (speed) and on its greedy outputs (same
 *     outputs >= 0.99), the top level profiled. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "common.h"
#include "cuda_model.h"
#include "engine.h"
#include "report.h"
#include "scenario.h"
#include "testutil.h"

static void test_keys(void)
{
    eng_config cfg;
    eng_config_default(&cfg);
    char err[512] = "";
    CHECK(strcmp(cfg.kv, "bf16") == 0 && cfg.device == 0, "defaults kv=bf16 device=0");
    CHECK(eng_parse_spec("backend=cuda,kv=fp8,device=3,attn=naive", &cfg, err, sizeof err) == 0 &&
          cfg.backend == ENG_BACKEND_CUDA && strcmp(cfg.kv, "fp8") == 0 && cfg.device == 3,
          "cuda keys: %s", err);
    CHECK(eng_config_set(&cfg, "kv", "fp4", err, sizeof err) == LL_EINVAL && strstr(err, "kv") == err &&
          strcmp(cfg.kv, "fp8") == 0, "kv=fp4 refused: %s", err);
    CHECK(eng_config_set(&cfg, "device", "-1", err, sizeof err) == LL_EINVAL && strstr(err, "device") == err,
          "device=-1 refused: %s", err);
    eng_config copy;
    CHECK(eng_config_copy(&copy, &cfg) == 0 && strcmp(copy.kv, "fp8") == 0 && copy.kv != cfg.kv,
          "a copy owns its kv");
    eng_config_free(&copy);
    eng_config_free(&cfg);
}

static void test_start(void)
{
    char why[400] = "";
    int no_gpu = cuda_backend_probe(0, why, sizeof why) != 0;
    eng_config cfg;
    eng_config_default(&cfg);
    char err[512] = "";
    /* on a GPU machine: a device that is not there */
    CHECK(eng_parse_spec(no_gpu ? "backend=cuda" : "backend=cuda,device=99", &cfg, err, sizeof err) == 0,
          "spec: %s", err);
    eng_engine *e = NULL;
    err[0] = '\0';
    int rc = eng_start(&cfg, &e, err, sizeof err);
    CHECK(rc != 0 && e == NULL, "eng_start with backend=cuda fails here (rc %d)", rc);
    if (rc == 0)
        eng_stop(e);
    printf("eng_start(backend=cuda%s): %s\n", no_gpu ? "" : ",device=99", err);
    CHECK(strstr(err, "cuda backend: ") != NULL, "the message names the backend: %s", err);
    if (no_gpu)
        CHECK(strstr(err, why) != NULL && (strstr(err, "cudaError") || strstr(err, "found 0")),
              "the message names the CUDA error: %s", err);
    else
        CHECK(strstr(err, "device=99") != NULL, "the message names the device: %s", err);
    eng_config_free(&cfg);
}

/* A trace as engine/profile.c writes one, with the cuda backend's phase
 * names; `loadlaw trace` (rpt_trace_*) must read them as GPU kernels and
 * put them in the right categories. */
static void test_trace_names(void)
{
    const char *names[] = {CUDA_K_FILL, CUDA_K_EMBED, CUDA_K_GEMM, CUDA_K_PROJECT, CUDA_K_TOPK,
                           "mla_decode_tiled_kernel", CUDA_K_LOGITS, CUDA_K_SAMPLE};
    const char *want[] = {"elementwise & copies", "other", "GEMM", "other", "attention",
                          "attention", "GEMM", "other"};
    const int dur_us[] = {5, 2, 40, 3, 4, 120, 6, 2};
    char path[] = "/tmp/loadlaw-cudanames-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"deviceProperties\":[{\"id\":0,"
               "\"name\":\"loadlaw cuda backend\"}],\"traceEvents\":[\n"
               "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"device 0\"}}");
    double ts = 1000;
    for (int step = 0; step < 2; step++) {
        fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"decode_step\",\"pid\":1,"
                   "\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d}}", ts, 300.0, step);
        for (int k = 0; k < 8; k++) {
            fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":7,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"stream\":7,\"device\":0,\"step\":%d}}",
                    names[k], ts, (double)dur_us[k], step);
            ts += dur_us[k];
        }
        ts += 100;
    }
    fprintf(f, "\n]}\n");
    CHECK(fclose(f) == 0, "write %s", path);
    rpt_trace *t = NULL;
    rpt_categories *cats = NULL;
    char err[256] = "";
    CHECK(rpt_trace_load(path, &t, err, sizeof err) == 0, "load: %s", err);
    CHECK(rpt_categories_new(&cats, err, sizeof err) == 0, "categories: %s", err);
    if (t && cats) {
        CHECK(rpt_trace_n_kernels(t) == 8, "%zu kernels in the trace, want 8", rpt_trace_n_kernels(t));
        int found = 0;
        for (size_t i = 0; i < rpt_trace_n_kernels(t); i++) {
            const rpt_trace_kernel *k = rpt_trace_kernel_at(t, i);
            for (int j = 0; j < 8; j++)
                if (strcmp(k->name, names[j]) == 0) {
                    found++;
                    CHECK(k->count == 2 && k->total_ns == 2000LL * dur_us[j], "%s: %llu events, %lld ns",
                          k->name, (unsigned long long)k->count, (long long)k->total_ns);
                    const char *c = rpt_categories_classify(cats, k->name);
                    CHECK(strcmp(c, want[j]) == 0, "%s is %s, want %s", k->name, c, want[j]);
                }
        }
        CHECK(found == 8, "every phase name found as a kernel (%d)", found);
        /* the naive kernel and the attention kernels' own names too */
        CHECK(strcmp(rpt_categories_classify(cats, "mla_decode_naive_kernel"), "attention") == 0,
              "naive kernel is attention");
    }
    rpt_categories_free(cats);
    rpt_trace_free(t);
    unlink(path);
}

static void test_scenario(void)
{
    char err[512] = "";
    scn_scenario *s = NULL;
    /* a copy of this test run elsewhere (bench/cuda/device_check.sh) is
     * told where the tree is */
    const char *src = getenv("LOADLAW_SOURCE_DIR") ? getenv("LOADLAW_SOURCE_DIR") : LOADLAW_SOURCE_DIR;
    char path[1024];
    snprintf(path, sizeof path, "%s/scenarios/kernel-ab-cuda.json", src);
    int rc = scn_load_file(path, &s, err, sizeof err);
    CHECK(rc == 0, "kernel-ab-cuda.json: %s", err);
    if (rc)
        return;
    CHECK(s->ab.enabled && !strcmp(s->ab.side[0].engine, "attn=naive") &&
              !strcmp(s->ab.side[1].engine, "attn=tiled") && s->engine_spec &&
              strstr(s->engine_spec, "backend=cuda") && s->ab.expect_c == 64 &&
              s->levels[s->n_levels - 1].concurrency == 256 && s->levels[s->n_levels - 1].profile.enabled &&
              s->levels[s->n_levels - 1].profile.num_steps == 8,
          "kernel-ab-cuda.json: naive vs tiled on the cuda backend, C to 256, gated at C=64, profiled");
    CHECK(s->record_outputs && s->greedy && s->ab.expect_outputs == 0.99,
          "kernel-ab-cuda.json: greedy outputs recorded and gated (same outputs >= 0.99)");
    /* every key of its engine spec is one the engine knows */
    eng_config cfg;
    eng_config_default(&cfg);
    CHECK(eng_parse_spec(s->engine_spec, &cfg, err, sizeof err) == 0 &&
              eng_parse_spec(s->ab.side[0].engine, &cfg, err, sizeof err) == 0,
          "its engine spec parses: %s", err);
    eng_config_free(&cfg);
    scn_free(s);
}

int main(void)
{
    test_keys();
    test_start();
    test_trace_names();
    test_scenario();
    TEST_MAIN_END();
}
