/* test_check_decode.c: check-decode's arithmetic (fit/check_decode.c) on
 * positions measured on real servers, replayed from
 * fixtures/check_decode_positions.txt (one position a line: source, decode
 * logprob, prefill logprob, prefill's first logprob there, prefill's rank of
 * decode's token; sampled from the runs in docs/check-decode.md: every
 * position prefill ranked otherwise, up to 48, the 16 largest |delta| and an
 * even sample):
 *   - vLLM 0.32 (CPU backend) serving a random Llama in bf16: within the bf16
 *     bound at every position (its largest |delta| is one bf16 ulp of its
 *     logits, its rank misses near-ties of 0 or one ulp), so it passes as
 *     bf16 and fails as fp32 (the old 0.005-nat gate);
 *   - the same model in float32: passes as fp32;
 *   - the bundled cpu engine, healthy: passes as fp32; its testing faults
 *     skip_last_tile and swap_heads: fail as fp32, most positions over;
 *   - the bound itself: tolerance + 4u(1 + |lp|), u per dtype; the dtype
 *     spellings; a rank miss needs prefill's first logprob and a gap past
 *     the bound; levels kept apart. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fit_outputs.h"
#include "testutil.h"

enum { MAX_POS = 1024 };

typedef struct positions {
    size_t n;
    double d[MAX_POS], p[MAX_POS], top[MAX_POS];
    int rank[MAX_POS];
} positions;

/* The fixture's lines of one source into *ps; how many. */
static size_t load(const char *path, const char *source, positions *ps)
{
    FILE *f = fopen(path, "r");
    char line[256], name[64];
    memset(ps, 0, sizeof *ps);
    while (f && fgets(line, sizeof line, f) && ps->n < MAX_POS) {
        size_t i = ps->n;
        if (line[0] != '#' && sscanf(line, "%63s %lf %lf %lf %d", name, &ps->d[i], &ps->p[i], &ps->top[i],
                                     &ps->rank[i]) == 5 && strcmp(name, source) == 0)
            ps->n++;
    }
    if (f)
        fclose(f);
    return ps->n;
}

/* The source judged as dtype with the default tolerance and gate. */
static fit_check_decode *judge(const positions *ps, fit_cd_dtype dtype)
{
    fit_check_decode *c = fit_cd_new(0.005, dtype, 0.01);
    if (c && fit_cd_add(c, 0, 1, "fixture", ps->d, ps->p, ps->top, ps->rank, ps->n) != 0) {
        fit_cd_free(c);
        return NULL;
    }
    return c;
}

/* pass_*: whether it passes as that dtype; min_fail: the least share that
 * disagrees as fp32 when it fails. */
static void test_source(const char *path, const char *source, int pass_fp32, int pass_bf16, double min_fail)
{
    static positions ps;
    CHECK(load(path, source, &ps) >= 64, "%s: positions in the fixture (%zu)", source, ps.n);
    fit_check_decode *f32 = judge(&ps, FIT_CD_FP32), *b16 = judge(&ps, FIT_CD_BF16);
    CHECK(f32 && b16, "%s: judged", source);
    if (!f32 || !b16)
        goto done;
    CHECK(fit_cd_positions(f32) == ps.n, "%s: every position compared", source);
    CHECK(fit_cd_passed(f32) == pass_fp32, "%s as fp32: %s (%.2f%% disagree, max |delta| %.3g)", source,
          pass_fp32 ? "passes" : "fails", 100 * fit_cd_share_disagree(f32), f32->all.max_abs);
    CHECK(fit_cd_passed(b16) == pass_bf16, "%s as bf16: %s (%.2f%% disagree)", source, pass_bf16 ? "passes" : "fails",
          100 * fit_cd_share_disagree(b16));
    if (!pass_fp32)
        CHECK(fit_cd_share_disagree(f32) >= min_fail, "%s as fp32: at least %.0f%% disagree (%.2f%%)", source,
              100 * min_fail, 100 * fit_cd_share_disagree(f32));
done:
    fit_cd_free(f32);
    fit_cd_free(b16);
}

static void test_bound(void)
{
    fit_cd_dtype d = FIT_CD_FP32;
    CHECK(fit_cd_dtype_parse("bf16", &d) == 0 && d == FIT_CD_BF16, "bf16");
    CHECK(fit_cd_dtype_parse("bfloat16", &d) == 0 && d == FIT_CD_BF16, "bfloat16");
    CHECK(fit_cd_dtype_parse("float16", &d) == 0 && d == FIT_CD_FP16, "float16");
    CHECK(fit_cd_dtype_parse("fp32", &d) == 0 && d == FIT_CD_FP32, "fp32");
    CHECK(fit_cd_dtype_parse("int8", &d) == LL_EINVAL && fit_cd_dtype_parse(NULL, &d) == LL_EINVAL, "unknown");
    CHECK(strcmp(fit_cd_dtype_name(FIT_CD_FP16), "fp16") == 0, "fp16's name");

    fit_check_decode *c = fit_cd_new(0.005, FIT_CD_BF16, 0.01);
    CHECK(c != NULL, "new");
    if (!c)
        return;
    CHECK_NEAR(fit_cd_bound(c, -3.0), 0.005 + 4 * 0x1p-8 * 4.0, 1e-12, "bf16 bound at lp -3");
    /* level 0: one position over (0.08 > 0.052 at lp -2), one rank miss
     * (another token 0.2 above), one near-tie (0.03 above: within), one with
     * no first logprob said (not judged by rank), one skipped (NAN) */
    const double d0[] = {-2.08, -1.0, -1.5, -0.74, NAN}, p0[] = {-2.0, -1.0, -1.5, -0.75, -1.0};
    const double t0[] = {-2.0, -0.8, -1.47, NAN, -1.0};
    const int r0[] = {1, 2, 2, 3, 1};
    CHECK(fit_cd_add(c, 0, 1, "a", d0, p0, t0, r0, 5) == 0, "add level 0");
    /* level 1: four positions that agree */
    const double d1[] = {-0.1, -0.2, -0.3, -0.4};
    const int r1[] = {1, 1, 1, 1};
    CHECK(fit_cd_add(c, 1, 4, "b", d1, d1, d1, r1, 4) == 0, "add level 1");
    const fit_cd_stats *l0 = &c->levels[0], *a = &c->all;
    CHECK(c->n_levels == 2 && l0->n_pos == 4 && l0->n_over == 1 && l0->n_rank_miss == 1 && l0->n_disagree == 2,
          "level 0: 4 positions, 1 over, 1 rank miss, 2 disagree (%zu, %zu, %zu, %zu)", l0->n_pos, l0->n_over,
          l0->n_rank_miss, l0->n_disagree);
    CHECK(a->n_pos == 8 && a->n_disagree == 2 && fabs(a->share_disagree - 0.25) < 1e-12 && !fit_cd_passed(c),
          "all: 2 of 8 disagree, the gate missed");
    CHECK(c->levels[1].n_disagree == 0 && c->levels[1].concurrency == 4, "level 1 agrees");
    fit_cd_free(c);

    fit_check_decode *e = fit_cd_new(0.005, FIT_CD_FP32, 0.01);
    CHECK(e && !fit_cd_passed(e) && isnan(fit_cd_share_disagree(e)), "nothing compared: not passed");
    CHECK(e && fit_cd_bound(e, -7.0) < 0.005 + 1e-5, "fp32: the bound is the tolerance");
    fit_cd_free(e);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_check_decode FIXTURE\n");
        return 2;
    }
    test_bound();
    test_source(argv[1], "vllm_bf16", 0, 1, 0.05);
    test_source(argv[1], "vllm_fp32", 1, 1, 0);
    test_source(argv[1], "engine_none", 1, 1, 0);
    test_source(argv[1], "engine_skip_last_tile", 0, 1, 0.5);
    test_source(argv[1], "engine_swap_heads", 0, 1, 0.5);
    TEST_MAIN_END();
}
