/* test_cpu_backend.c: eng_backend_cpu on a small configuration, through the
 * ops table the scheduler uses: phases in order with sane times, the same
 * tokens from naive and tiled (they compute the same step), determinism,
 * slot reuse, and clear errors for bad configuration and bad slots. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu_model.h"
#include "backend_script.h"
#include "testutil.h"

/* This test links the backend alone (not config.c), so it fills every field
 * the backend reads by hand. min_ctx -1 = topk, the engine's default. */
static void small_config(eng_config *cfg, const char *attn)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->attn = attn;
    cfg->heads = 8;
    cfg->topk = 96;
    cfg->threads = 2;
    cfg->max_running = 8;
    cfg->seed = 5;
    cfg->d_model = 256;
    cfg->d_ff = 1024;
    cfg->vocab = 64;
    cfg->capacity_tok = 512;
    cfg->min_ctx_tok = -1;
}

/* Runs a fixed script of steps; writes the token of each slot after each
 * decode step into tokens[step][slot]. */
#define STEPS SCRIPT_STEPS
#define SLOTS SCRIPT_SLOTS
static int run_script(const char *attn, int tokens[STEPS][SLOTS], int check_phases)
{
    eng_config cfg;
    small_config(&cfg, attn);
    void *st = NULL;
    char err[256] = "";
    int rc = eng_backend_cpu.create(&cfg, &st, err, sizeof err);
    CHECK(rc == 0, "create %s: %s", attn, err);
    if (rc != 0)
        return rc;
    for (int s = 0; s < STEPS; s++) {
        script_step sk;
        eng_batch b;
        script_batch(s, &sk, &b);
        eng_phase ph[ENG_MAX_PHASES];
        int nph = -1;
        int64_t t0 = ll_now_ns();
        rc = eng_backend_cpu.step(st, &b, t0, ph, &nph);
        int64_t t1 = ll_now_ns();
        CHECK(rc == 0, "%s step %d rc %d", attn, s, rc);
        if (check_phases) {
            const char *want0[] = {"prefill"};
            const char *want[] = {"dense_gemm", "attention", "sampling"};
            const char *want3[] = {"prefill", "dense_gemm", "attention", "sampling"};
            const char **w = s == 0 ? want0 : s == 3 ? want3 : want;
            int nw = s == 0 ? 1 : s == 3 ? 4 : 3;
            CHECK(nph == nw, "%s step %d: %d phases, want %d", attn, s, nph, nw);
            for (int i = 0; i < nph && i < nw; i++) {
                CHECK(strcmp(ph[i].name, w[i]) == 0, "step %d phase %d is %s, want %s", s, i, ph[i].name, w[i]);
                CHECK(ph[i].start_ns >= t0 && ph[i].dur_ns >= 0 && ph[i].start_ns + ph[i].dur_ns <= t1,
                      "step %d phase %s inside the step", s, ph[i].name);
                CHECK(i == 0 || ph[i].start_ns >= ph[i - 1].start_ns + ph[i - 1].dur_ns,
                      "step %d phase %s after the previous one", s, ph[i].name);
            }
        }
        for (int k = 0; k < SLOTS; k++)
            tokens[s][k] = cpu_backend_token(st, k);
    }
    /* release: the slot forgets its request, keeps its rows */
    eng_backend_cpu.release(st, 1);
    CHECK(cpu_backend_token(st, 1) == 0, "released slot reset");
    CHECK(cpu_backend_token(st, 99) == -1, "slot out of range");
    /* a slot out of range in a batch is an error, not a crash */
    int bad_slot = 8;
    int64_t bad_ctx = 10;
    eng_batch bad = {.n_decode = 1, .decode_slot = &bad_slot, .decode_ctx = &bad_ctx};
    eng_phase ph[ENG_MAX_PHASES];
    int nph = 0;
    CHECK(eng_backend_cpu.step(st, &bad, ll_now_ns(), ph, &nph) == LL_ERANGE, "slot 8 of 8 rejected");
    eng_backend_cpu.destroy(st);
    return 0;
}

/* One prefill step then one decode step on slot 0; the sampled token, or -1. */
static int prefill_decode_token(int threads)
{
    eng_config cfg;
    small_config(&cfg, "tiled");
    cfg.threads = threads;
    void *st = NULL;
    char err[256] = "";
    if (eng_backend_cpu.create(&cfg, &st, err, sizeof err) != 0) {
        CHECK(0, "create threads=%d: %s", threads, err);
        return -1;
    }
    int slot = 0, tok = 10, nph = 0, out = -1;
    int64_t ctx = 11;
    eng_phase ph[ENG_MAX_PHASES];
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &tok, .prefill_tok_total = 10};
    eng_batch d = {.n_decode = 1, .decode_slot = &slot, .decode_ctx = &ctx, .ctx_tok_total = 11};
    if (eng_backend_cpu.step(st, &b, ll_now_ns(), ph, &nph) == 0 &&
        eng_backend_cpu.step(st, &d, ll_now_ns(), ph, &nph) == 0 && nph == 3)
        out = cpu_backend_token(st, 0);
    eng_backend_cpu.destroy(st);
    return out;
}

static void test_errors(void)
{
    eng_config cfg;
    small_config(&cfg, "fast");
    void *st = NULL;
    char err[256] = "";
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL,
          "attn=fast rejected");
    CHECK(strstr(err, "naive or tiled") != NULL, "message names the choices: %s", err);
    small_config(&cfg, "v2");
    err[0] = '\0';
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL &&
              strstr(err, "v2 is the cuda backend's kernel"),
          "attn=v2 on the cpu backend refused, naming why: %s", err);

    small_config(&cfg, "tiled");
    cfg.d_ff = 100;
    err[0] = '\0';
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL,
          "d_ff < 576 rejected: %s", err);
    CHECK(strstr(err, "d_ff") != NULL, "message names d_ff: %s", err);
    small_config(&cfg, "tiled");
    cfg.capacity_tok = 0; /* a zeroed field is an error, not a silent default */
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL && strstr(err, "capacity"),
          "capacity 0 rejected: %s", err);
    small_config(&cfg, "tiled");
    cfg.min_ctx_tok = -2;
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL && strstr(err, "min_ctx"),
          "min_ctx -2 rejected: %s", err);
    small_config(&cfg, "tiled");
    cfg.d_model = 65536;
    cfg.d_ff = 65536; /* each in range, together 17 GB of weights */
    CHECK(eng_backend_cpu.create(&cfg, &st, err, sizeof err) == LL_EINVAL, "huge dense rejected: %s", err);

    /* threads = 0 means every online core; the pool size never changes the result */
    int t0 = prefill_decode_token(0), t2 = prefill_decode_token(2);
    CHECK(t0 >= 0 && t0 < 64, "threads=0 runs a step (token %d)", t0);
    CHECK(t0 == t2, "threads=0 and threads=2 sample the same token (%d, %d)", t0, t2);
}

int main(void)
{
    int tn[STEPS][SLOTS], tt[STEPS][SLOTS], tt2[STEPS][SLOTS];
    run_script("naive", tn, 1);
    run_script("tiled", tt, 1);
    run_script("tiled", tt2, 0);
    int same = 1, same2 = 1, varied = 0;
    for (int s = 1; s < STEPS; s++)
        for (int k = 0; k < SLOTS; k++) {
            same &= tn[s][k] == tt[s][k];
            same2 &= tt[s][k] == tt2[s][k];
            varied |= tt[s][k] != tt[1][0];
            CHECK(tt[s][k] >= 0 && tt[s][k] < 64, "token %d in vocab", tt[s][k]);
        }
    CHECK(same, "naive and tiled sample the same tokens");
    CHECK(same2, "a rerun samples the same tokens (seeded)");
    CHECK(varied, "tokens vary across slots and steps");
    test_errors();
    TEST_MAIN_END();
}
