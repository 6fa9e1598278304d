/* test_fit_position.c: step time against position in the request (fit/position.c
 * "Step time against position in the request") on simulated runs (sim.c: a
 * continuous-batching engine on a virtual clock, every gap one step).
 *
 *  - every sample's position is the tokens its request had received before
 *    its later chunk (the first gap's: the first chunk's tokens);
 *  - 5 + 1n + 20c (c per 1k context tokens, 100-token prompts, 256 tokens
 *    each): at C=1 a gap at position p is 6 + 20*(100 + p)/1000 ms, so the
 *    first quarter's mean step (p = 1..63) and the last's (192..255) have
 *    closed forms; the 16 bins rise; the level's early_ms/late_ms are the
 *    bins' own (one code); fit --json carries them;
 *  - 20 + 2n, no context term, a slow prefill (100 ms a request) at C=8,
 *    one request prefilled per step: over every sample the early tokens are
 *    slower (the ramp's first tokens share steps with the later requests'
 *    prefill), in steady steps early and late are alike within
 *    FIT_POS_SAME_FRAC.
 * argv: none. Real time: well under a second. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

/* Consecutive samples of one request: each position is the last one's plus
 * the last one's tokens; a request's first sample sits at its first chunk's
 * tokens (1 here). The samples: each level's made again (fit_level_samples). */
static void check_positions(const fit_run *run, const fit_result *r)
{
    size_t bad = 0, firsts = 0, all = 0;
    for (size_t l = 0; l < r->n_levels; l++) {
        fit_sample *v = NULL;
        size_t n = 0;
        CHECK(fit_level_samples(run, r, l, &v, &n) == 0, "level %zu's samples", l);
        for (size_t i = 0; i < n; i++) {
            if (i == 0 || v[i - 1].req_idx != v[i].req_idx) {
                firsts++;
                bad += v[i].pos_tok != 1;
            } else {
                bad += v[i].pos_tok != v[i - 1].pos_tok + v[i - 1].tokens;
            }
        }
        all += n;
        free(v);
    }
    CHECK(firsts > 0 && bad == 0, "positions: %zu of %zu samples wrong (%zu requests)", bad, all, firsts);
}

/* Simulate and fit; every sample's position checked while the run is held. */
static fit_result *run_sim(const sim_cfg *c, const char *name)
{
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "/tmp/ll_test_fit_position_%d_%s.jsonl", (int)getpid(), name);
    fit_run *run = NULL;
    fit_result *res = NULL;
    sim_stats st;
    int rc = sim_fit(path, c, NULL, &st, &run, &res, err, sizeof err);
    CHECK(rc == 0, "%s: simulate and fit: %s", name, err);
    if (rc == 0)
        check_positions(run, res);
    fit_run_free(run);
    unlink(path);
    return res;
}

/* Mean of c*(prompt + p)/1000 + law over p in [lo, hi]. */
static double closed_form(double law_ms, double c, double prompt, int lo, int hi)
{
    return law_ms + c * (prompt + (lo + hi) / 2.0) / 1000;
}

static void test_context(void)
{
    static const int conc[] = {1, 4};
    sim_cfg c;
    sim_default(&c);
    c.a_ms = 5;
    c.b_ms = 1;
    c.c_ms_per_ktok = 20;
    c.prompt_tok = 100;
    c.max_tokens = 256;
    c.think_tok = 0;
    c.jitter_frac = 0.02;
    c.prefill_per_step = 1;
    c.seed = 3;
    sim_set_levels(&c, conc, 2, 6);
    fit_result *r = run_sim(&c, "context");
    if (!r)
        return;
    const fit_level *L = &r->levels[0];
    CHECK(L->pos_max_tok == 255, "C=1: largest position %g, want 255", L->pos_max_tok);
    CHECK_REL(L->early_ms, closed_form(6, 20, 100, 1, 63), 0.01, "C=1: early tokens' mean step");
    CHECK_REL(L->late_ms, closed_form(6, 20, 100, 192, 255), 0.01, "C=1: late tokens' mean step");
    /* no prefill shares a step at C=1: every sample of a request is steady */
    CHECK_REL(L->early_all_ms, L->early_ms, 1e-9, "C=1: early over every sample");
    fit_pos_bins pb;
    fit_level_position(r, 0, &pb);
    CHECK(pb.early_ms == L->early_ms && pb.late_ms == L->late_ms, "the level's figures are the bins' own");
    CHECK_REL(pb.width_tok, 16, 1e-12, "bin width (255 + 1) / 16");
    int rising = 1;
    for (int b = 1; b < FIT_POS_BINS; b++)
        rising &= pb.steady_ms[b] > pb.steady_ms[b - 1];
    CHECK(rising, "C=1: the step rises bin by bin with position");
    /* bin 15 holds positions 240..255: 6 + 20*(100 + 247.5)/1000 */
    CHECK_REL(pb.steady_ms[FIT_POS_BINS - 1], closed_form(6, 20, 100, 240, 255), 0.01, "C=1: the last bin");
    double ms = 0, tok = 0;
    for (int b = 0; b < FIT_POS_BINS / 4; b++) {
        ms += pb.steady_ms[b] * pb.steady_tok[b];
        tok += pb.steady_tok[b];
    }
    CHECK_REL(ms / tok, L->early_ms, 1e-9, "early_ms: the first four bins together");
    CHECK(r->levels[1].late_ms > 1.3 * r->levels[1].early_ms, "C=4: late tokens slower (%.3g vs %.3g ms)",
          r->levels[1].late_ms, r->levels[1].early_ms);
    cJSON *j = rpt_fit_to_json(r);
    const cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 0);
    const cJSON *e = cJSON_GetObjectItem(l0, "early_ms"), *lt = cJSON_GetObjectItem(l0, "late_ms");
    CHECK(cJSON_IsNumber(e) && e->valuedouble == L->early_ms && cJSON_IsNumber(lt) && lt->valuedouble == L->late_ms,
          "fit --json: early_ms and late_ms");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(l0, "early_all_ms")) &&
              cJSON_IsNumber(cJSON_GetObjectItem(l0, "late_all_ms")) &&
              cJSON_IsNumber(cJSON_GetObjectItem(l0, "pos_max_tok")),
          "fit --json: early_all_ms, late_all_ms, pos_max_tok");
    cJSON_Delete(j);
    fit_result_free(r);
}

static void test_prefill(void)
{
    static const int conc[] = {8};
    sim_cfg c;
    sim_default(&c);
    c.a_ms = 20;
    c.b_ms = 2;
    c.p_ms_per_tok = 1; /* 100-token prompts: 100 ms a prefilled request */
    c.prompt_tok = 100;
    c.max_tokens = 64;
    c.think_tok = 0;
    c.jitter_frac = 0.02;
    c.prefill_per_step = 1;
    c.seed = 4;
    sim_set_levels(&c, conc, 1, 6);
    fit_result *r = run_sim(&c, "prefill");
    if (!r)
        return;
    const fit_level *L = &r->levels[0];
    CHECK(L->early_all_ms > L->late_all_ms * (1 + FIT_POS_SAME_FRAC),
          "every sample: early tokens slower (%.4g against %.4g ms)", L->early_all_ms, L->late_all_ms);
    CHECK(fabs(L->late_ms / L->early_ms - 1) < FIT_POS_SAME_FRAC,
          "steady at N = C: early and late alike (%.4g against %.4g ms)", L->early_ms, L->late_ms);
    CHECK_REL(L->early_ms, 20 + 2 * 8, 0.02, "steady early tokens: the law at C");
    fit_result_free(r);
}

int main(void)
{
    test_context();
    test_prefill();
    TEST_MAIN_END();
}
