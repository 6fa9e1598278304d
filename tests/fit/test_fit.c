/* test_fit.c: fit/ on constructed timelines (sim.h) whose phases, samples and
 * law are known exactly, and on broken inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "fit_internal.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

static char dir[256];

static const char *rec_path(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s.jsonl", dir, name);
    return p;
}

/* Write, load, analyse. Returns the result (caller frees) or NULL. */
static fit_result *run_sim(const char *name, const sim_cfg *c, sim_stats *st, fit_run **run_out)
{
    char err[512] = "";
    fit_run *run;
    fit_result *res;
    int rc = sim_fit(rec_path(name), c, NULL, st, &run, &res, err, sizeof err);
    CHECK(rc == 0, "%s: %s", name, err);
    if (run_out)
        *run_out = run;
    else
        fit_run_free(run);
    return res;
}

static void levels_1_to_16(sim_cfg *c, int per_c)
{
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(c, cs, 5, per_c);
}

/* Every steady sample must sit exactly on the law, at an integer N (each
 * level's samples made again from the run: fit_level_samples). */
static void check_samples_on_law(const char *what, const fit_run *run, const fit_result *r, const sim_cfg *c)
{
    size_t off = 0, nonint = 0, all = 0;
    for (size_t l = 0; l < r->n_levels; l++) {
        fit_sample *v = NULL;
        size_t n = 0;
        CHECK(fit_level_samples(run, r, l, &v, &n) == 0, "%s: level %zu's samples", what, l);
        CHECK(n == r->levels[l].n_samples, "%s: level %zu: %zu samples made again, %zu counted", what, l, n,
              r->levels[l].n_samples);
        all += n;
        for (size_t i = 0; i < n; i++) {
            const fit_sample *s = &v[i];
            if (!s->steady)
                continue;
            if (s->n != floor(s->n))
                nonint++;
            if (fabs(s->gap_ms - sim_law(c, s->n)) > 1e-9)
                off++;
        }
        free(v);
    }
    CHECK(all == r->n_samples, "%s: %zu samples made again, %zu counted", what, all, r->n_samples);
    CHECK(off == 0, "%s: %zu steady samples off the law", what, off);
    CHECK(nonint == 0, "%s: %zu steady samples with fractional N", what, nonint);
}

/* Staggered first tokens (2 prefills per step), exact law: phases, counts,
 * ramp and the law to 1e-9. */
static void test_exact_staggered(void)
{
    sim_cfg c;
    sim_default(&c);
    levels_1_to_16(&c, 2);
    c.prefill_per_step = 2;
    c.p_ms_per_tok = 0.02; /* 100-token prompt: +2 ms per prefilled request */
    sim_stats st;
    fit_run *run = NULL;
    fit_result *r = run_sim("exact", &c, &st, &run);
    if (!r)
        return;
    CHECK(r->law.ok, "law fitted");
    CHECK_NEAR(r->law.a_ms, c.a_ms, 1e-9, "a exact");
    CHECK_NEAR(r->law.b_ms, c.b_ms, 1e-9, "b exact");
    CHECK_NEAR(r->ols.a_ms, c.a_ms, 1e-9, "ols a exact");
    CHECK_NEAR(r->ols.b_ms, c.b_ms, 1e-9, "ols b exact");
    CHECK_NEAR(r->law.r2, 1.0, 1e-9, "r2 = 1");
    CHECK_NEAR(r->asymptote_tok_per_s, 1000.0 / c.b_ms, 1e-6, "asymptote");
    CHECK_NEAR(r->n_half, c.a_ms / c.b_ms, 1e-9, "n_half");
    CHECK(r->engine.ok, "engine steps fitted");
    CHECK_NEAR(r->engine.a_ms, c.a_ms, 1e-9, "engine a");
    CHECK_NEAR(r->engine.b_ms, c.b_ms, 1e-9, "engine b");
    CHECK(r->has_truth && r->truth_a_ms == c.a_ms && r->truth_b_ms == c.b_ms, "truth read");
    CHECK(r->n_levels == 5, "5 levels, got %zu", r->n_levels);
    long all = 0, steady_at_c = 0;
    for (size_t i = 0; i < r->n_levels && i < 5; i++) {
        const fit_level *L = &r->levels[i];
        const sim_level_stats *s = &st.lv[i];
        char what[64];
        snprintf(what, sizeof what, "level %zu samples", i);
        CHECK((long)L->n_samples == s->samples, "%s: got %zu want %ld", what, L->n_samples,
              s->samples);
        CHECK((long)L->n_steady_samples == s->steady, "level %zu steady: got %zu want %ld", i,
              L->n_steady_samples, s->steady);
        CHECK(L->ramp_reached && s->ramp_end_ns > 0, "level %zu ramp reached", i);
        CHECK_NEAR(L->ramp_s, (double)(s->ramp_end_ns - s->start_ns) / 1e9, 1e-12, "ramp_s");
        CHECK_NEAR(L->ramp_tokens, s->ramp_tokens, 0, "ramp tokens");
        double want = 1000.0 * L->concurrency / sim_law(&c, L->concurrency);
        if (s->steady_at_c > 0) {
            CHECK_REL(L->steady_tok_per_s, want, 1e-9, "steady throughput");
            CHECK_REL(L->predicted_tok_per_s, want, 1e-9, "predicted throughput");
            CHECK_NEAR(L->error_rel, 0, 1e-9, "error_rel");
        }
        CHECK(L->whole_tok_per_s < L->steady_tok_per_s, "level %zu whole %g < steady %g", i,
              L->whole_tok_per_s, L->steady_tok_per_s);
        CHECK(L->n_rate_bins > 0 && L->think_tok_per_s && L->answer_tok_per_s, "rate series");
        double think = 0, answer = 0;
        for (size_t b = 0; b < L->n_rate_bins; b++) {
            think += L->think_tok_per_s[b] * (double)L->rate_bin_ns / 1e9;
            answer += L->answer_tok_per_s[b] * (double)L->rate_bin_ns / 1e9;
        }
        CHECK_NEAR(think + answer, L->tokens, 1e-6, "rate series adds up to the tokens");
        CHECK_NEAR(think, 5.0 * (double)L->n_requests, 1e-6, "thinking tokens (5 per request)");
        CHECK(L->n_phase > 0 && L->phase[L->n_phase - 1].decode == 0 &&
                  L->phase[L->n_phase - 1].prefill == 0,
              "phase series ends empty");
        all += s->samples;
        steady_at_c += s->steady_at_c;
    }
    CHECK(st.lv[4].steady > 0 && st.lv[4].steady < st.lv[4].samples,
          "C=16 has both steady and ramp samples");
    /* closed loop: the law takes the steady windows (N = C) only (fit/analyze_law.c "The law") */
    CHECK((long)r->law.n_samples == steady_at_c, "law n_samples %zu == %ld", r->law.n_samples,
          steady_at_c);
    CHECK((long)r->n_samples == all, "all samples");
    check_samples_on_law("exact", run, r, &c);
    /* Prefill makes ramp steps slower: the naive fit over all gaps is off. */
    CHECK(fabs(r->naive.b_ms / c.b_ms - 1) > 0.05 || fabs(r->naive.a_ms / c.a_ms - 1) > 0.10,
          "naive fit biased: a %g b %g", r->naive.a_ms, r->naive.b_ms);
    CHECK(r->model.done && r->model.best == FIT_MODEL_LINEAR, "model linear: %s",
          r->model.verdict);
    fit_result_free(r);
    fit_run_free(run);
}

/* Seeded jitter: estimates near the truth, 95% CIs cover it most of the time. */
static void test_noise_coverage(void)
{
    int n = 40, cover_a = 0, cover_b = 0, cover_m = 0, lin = 0;
    double worst_b = 0;
    for (int s = 0; s < n; s++) {
        sim_cfg c;
        sim_default(&c);
        levels_1_to_16(&c, 2);
        c.jitter_frac = 0.05;
        c.seed = 1000 + (uint64_t)s;
        c.p_ms_per_tok = 0.05;
        c.write_steps = 0;
        sim_stats st;
        fit_result *r = run_sim("noise", &c, &st, NULL);
        if (!r)
            return;
        cover_a += r->law.a_ci_ms[0] <= c.a_ms && c.a_ms <= r->law.a_ci_ms[1];
        cover_b += r->law.b_ci_ms[0] <= c.b_ms && c.b_ms <= r->law.b_ci_ms[1];
        double mlo, mhi, mtrue = c.a_ms + 8 * c.b_ms;
        fit_law_mean_ci(&r->law, 8, &mlo, &mhi);
        cover_m += mlo <= mtrue && mtrue <= mhi;
        /* with the covariance the band is narrower than the corner band */
        CHECK(mhi - mlo < (r->law.a_ci_ms[1] + 8 * r->law.b_ci_ms[1]) - (r->law.a_ci_ms[0] + 8 * r->law.b_ci_ms[0]),
              "mean band at N=8 narrower than the corners");
        lin += r->model.best == FIT_MODEL_LINEAR;
        if (fabs(r->law.b_ms / c.b_ms - 1) > worst_b)
            worst_b = fabs(r->law.b_ms / c.b_ms - 1);
        CHECK(r->law.a_ci_ms[1] > r->law.a_ci_ms[0] && r->law.b_ci_ms[1] > r->law.b_ci_ms[0],
              "CIs have width");
        CHECK(r->law.resid_sd_ms > 0, "residual sd > 0 with jitter");
        fit_result_free(r);
    }
    printf("noise: a covered %d/%d, b covered %d/%d, mean line at N=8 covered %d/%d, worst b error %.3f%%, "
           "linear %d/%d\n",
           cover_a, n, cover_b, n, cover_m, n, 100 * worst_b, lin, n);
    CHECK(cover_m >= 0.8 * n, "mean-line band coverage %d/%d", cover_m, n);
    CHECK(cover_a >= 0.8 * n && cover_a <= n, "a coverage %d/%d", cover_a, n);
    CHECK(cover_b >= 0.8 * n, "b coverage %d/%d", cover_b, n);
    CHECK(cover_b < n || cover_a < n, "CIs not absurdly wide (some miss at 95%%)");
    CHECK(worst_b < 0.05, "b within 5%% (worst %.3f)", worst_b);
    CHECK(lin >= 0.9 * n, "linear chosen %d/%d", lin, n);
}

/* A compute-bound turn: slope 0.5 ms up to N = 8, then 2.5 ms. */
static void test_knee(void)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16, 32};
    sim_set_levels(&c, cs, 6, 2);
    c.prefill_per_step = 4;
    c.b_ms = 0.5;
    c.knee_n = 8;
    c.b2_ms = 2.5;
    c.jitter_frac = 0.02;
    sim_stats st;
    fit_result *r = run_sim("knee", &c, &st, NULL);
    if (!r)
        return;
    CHECK(r->model.done, "model checked");
    CHECK(r->model.best == FIT_MODEL_PIECEWISE, "knee found: %s", r->model.verdict);
    CHECK(r->model.knee_n >= 7 && r->model.knee_n <= 10, "knee at %g", r->model.knee_n);
    CHECK_REL(r->model.slope_before_ms, 0.5, 0.2, "slope before");
    CHECK_REL(r->model.slope_after_ms, 2.5, 0.05, "slope after");
    CHECK(r->model.bic_piecewise < r->model.bic_linear - 10, "BIC prefers the knee");
    CHECK(strcmp(r->engine_law_spec, "2.5+0.5n, knee=8:2.5") == 0, "engine law quoted whole: %s",
          r->engine_law_spec);
    fit_result_free(r);
}

/* Curvature without a knee: step = 2.5 + 0.5*N + 0.03*N^2 (at N = 32 the
 * square term is 31 of 49 ms). The model check must say "quadratic", and a
 * straight law with the same jitter must stay "linear" (control). */
static void test_curved(void)
{
    for (int curved = 1; curved >= 0; curved--) {
        sim_cfg c;
        sim_default(&c);
        int cs[] = {1, 2, 4, 8, 16, 32};
        sim_set_levels(&c, cs, 6, 2);
        c.prefill_per_step = 4;
        c.b_ms = 0.5;
        c.c2_ms = curved ? 0.03 : 0;
        c.jitter_frac = 0.02;
        c.seed = 3;
        sim_stats st;
        fit_result *r = run_sim(curved ? "curved" : "straight", &c, &st, NULL);
        if (!r)
            return;
        CHECK(r->model.done, "model checked");
        if (curved) {
            CHECK(r->model.best == FIT_MODEL_QUADRATIC, "curvature found: %s", r->model.verdict);
            CHECK_REL(r->model.quad_c_ms, 0.03, 0.2, "square term");
            CHECK(strstr(r->model.verdict, "curved") != NULL, "verdict says curved: %s", r->model.verdict);
        } else {
            CHECK(r->model.best == FIT_MODEL_LINEAR, "straight law stays linear: %s", r->model.verdict);
            CHECK(strstr(r->model.verdict, "a straight line fits") != NULL, "verdict: %s", r->model.verdict);
        }
        fit_result_free(r);
    }
}

/* Stalls (every 23rd step 40 ms late, a paused server or client): the robust
 * law and the model check shrug them off; OLS does not. */
static void test_stalls(void)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16, 32};
    sim_set_levels(&c, cs, 6, 2);
    c.prefill_per_step = 4;
    c.jitter_frac = 0.02;
    c.stall_every = 23;
    c.stall_ms = 40;
    sim_stats st;
    fit_result *r = run_sim("stalls", &c, &st, NULL);
    if (!r)
        return;
    CHECK_REL(r->law.b_ms, c.b_ms, 0.03, "robust b despite stalls");
    CHECK_REL(r->law.a_ms, c.a_ms, 0.05, "robust a despite stalls");
    CHECK(fabs(r->ols.a_ms / c.a_ms - 1) > 0.1 &&
              fabs(r->ols.a_ms - c.a_ms) > 5 * fabs(r->law.a_ms - c.a_ms),
          "OLS a pulled by stalls (%g; robust %g)", r->ols.a_ms, r->law.a_ms);
    CHECK(r->law.b_ci_ms[0] <= c.b_ms && c.b_ms <= r->law.b_ci_ms[1], "b CI [%g, %g] covers",
          r->law.b_ci_ms[0], r->law.b_ci_ms[1]);
    CHECK(r->model.n_trimmed > 0, "stalls trimmed from the model check");
    CHECK(r->model.best == FIT_MODEL_LINEAR, "still linear: %s", r->model.verdict);
    int noted = 0;
    for (size_t i = 0; i < r->n_notes; i++)
        noted += strstr(r->notes[i], "pauses") != NULL;
    CHECK(noted > 0, "a note says steady throughput carries pauses");
    fit_result_free(r);
}

/* Open loop (no cap): arrivals at any time, N wanders; the law is still
 * exact from the steady samples, and no ramp or prediction is claimed. */
static void test_open_loop(void)
{
    sim_cfg c;
    sim_default(&c);
    sim_set_open(&c, 2, 30, 7.3);
    c.p_ms_per_tok = 0.05;
    sim_stats st;
    fit_run *run = NULL;
    fit_result *r = run_sim("open", &c, &st, &run);
    if (!r)
        return;
    CHECK_NEAR(r->law.a_ms, c.a_ms, 1e-9, "open loop a");
    CHECK_NEAR(r->law.b_ms, c.b_ms, 1e-9, "open loop b");
    CHECK(r->law.n_distinct >= 3, "several N (%zu)", r->law.n_distinct);
    check_samples_on_law("open", run, r, &c);
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        CHECK(!L->closed_loop && L->concurrency == 0, "open level");
        CHECK(isnan(L->ramp_s) && isnan(L->predicted_tok_per_s) && L->n_windows == 0,
              "no ramp, prediction or window in open loop");
        CHECK(L->n_steady_samples > 0 && (long)L->n_steady_samples <= st.lv[i].steady,
              "steady samples %zu <= truth %ld", L->n_steady_samples, st.lv[i].steady);
    }
    fit_result_free(r);
    fit_run_free(run);
}

/* Failed and warmup requests: left out of the samples, still occupancy. */
static void test_failed_and_warmup(void)
{
    sim_cfg c;
    sim_default(&c);
    levels_1_to_16(&c, 3);
    c.fail_every = 4;
    for (int i = 0; i < 5; i++)
        c.warmup[i] = 1;
    sim_stats st;
    fit_run *run = NULL;
    fit_result *r = run_sim("failed", &c, &st, &run);
    if (!r)
        return;
    size_t failed = 0;
    for (int i = 0; i < 5; i++)
        failed += (size_t)st.lv[i].failed;
    CHECK(failed > 5, "sim failed some (%zu)", failed);
    CHECK(r->n_failed == failed, "failed counted: %zu want %zu", r->n_failed, failed);
    CHECK(r->n_warmup == 5, "warmup counted: %zu", r->n_warmup);
    CHECK_NEAR(r->law.a_ms, c.a_ms, 1e-9, "a exact with failures");
    CHECK_NEAR(r->law.b_ms, c.b_ms, 1e-9, "b exact with failures");
    for (int i = 0; i < 5; i++) {
        CHECK((long)r->levels[i].n_samples == st.lv[i].samples, "level %d samples %zu want %ld", i,
              r->levels[i].n_samples, st.lv[i].samples);
        CHECK((long)r->levels[i].n_steady_samples == st.lv[i].steady, "level %d steady", i);
    }
    check_samples_on_law("failed", run, r, &c);
    int noted = 0;
    for (size_t i = 0; i < r->n_notes; i++)
        noted += strstr(r->notes[i], "failed") != NULL;
    CHECK(noted > 0, "notes say what failed");
    fit_result_free(r);
    fit_run_free(run);
}

/* Killed mid-level: no level_end, in-flight requests missing, a truncated
 * last line. The law stays exact because the incomplete tail is cut. */
static void test_interrupted(void)
{
    sim_cfg c;
    sim_default(&c);
    levels_1_to_16(&c, 4);
    c.prefill_per_step = 3;
    c.p_ms_per_tok = 0.01;
    c.truncate_tail = 1;
    sim_stats full;
    fit_result *r0 = run_sim("full", &c, &full, NULL);
    if (!r0)
        return;
    /* Kill in the middle of the last level. */
    c.kill_ns = full.lv[4].start_ns + (int64_t)(0.5 * (double)(r0->levels[4].end_ns -
                                                               full.lv[4].start_ns));
    fit_result_free(r0);
    sim_stats st;
    fit_run *run = NULL;
    fit_result *r = run_sim("killed", &c, &st, &run);
    if (!r)
        return;
    CHECK(fit_run_get_info(run)->n_truncated == 1, "truncated line skipped");
    CHECK(r->n_truncated_lines == 1, "truncated line reported");
    CHECK(r->n_levels == 5, "levels %zu", r->n_levels);
    const fit_level *L = &r->levels[4];
    CHECK(L->interrupted, "last level interrupted");
    CHECK(!r->levels[3].interrupted, "level 3 complete");
    CHECK(L->n_samples_after_cut > 0, "tail cut (%zu)", L->n_samples_after_cut);
    CHECK_NEAR(r->law.a_ms, c.a_ms, 1e-9, "a exact after kill");
    CHECK_NEAR(r->law.b_ms, c.b_ms, 1e-9, "b exact after kill");
    check_samples_on_law("killed", run, r, &c);
    fit_result_free(r);
    fit_run_free(run);
}

/* Lockstep: everyone starts together; steady only at N = C. */
static void test_lockstep(void)
{
    sim_cfg c;
    sim_default(&c);
    levels_1_to_16(&c, 1);
    c.a_ms = 52;
    c.b_ms = 30;
    c.p_ms_per_tok = 0.5;
    sim_stats st;
    fit_result *r = run_sim("lockstep", &c, &st, NULL);
    if (!r)
        return;
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        /* One request per slot, max_tokens 20: 19 gaps each, the first one
         * (covering the prefill step's successor) steady, all at N = C. */
        CHECK((long)L->n_steady_samples == 19L * L->concurrency, "level %zu steady %zu", i,
              L->n_steady_samples);
        CHECK(L->n_steady_points == 19, "level %zu steady steps %zu", i, L->n_steady_points);
        CHECK_NEAR(L->ramp_s, sim_law(&c, 0) / 1e3 + 0.5e-3 * 100 * L->concurrency, 1e-9,
                   "ramp = one prefill step");
        CHECK(L->n_windows == 1, "one steady window");
        CHECK_NEAR(L->steady_s, 19 * sim_law(&c, L->concurrency) / 1e3, 1e-9, "window length");
    }
    CHECK(r->law.n_points == 19 * 5, "points %zu", r->law.n_points);
    CHECK_NEAR(r->law.b_ms, 30, 1e-9, "b");
    CHECK_NEAR(r->asymptote_tok_per_s, 1000.0 / 30, 1e-9, "33 tok/s");
    cJSON *j = rpt_fit_to_json(r);
    CHECK(j != NULL, "json");
    const cJSON *law = cJSON_GetObjectItemCaseSensitive(j, "law");
    CHECK_NEAR(ll_json_num(law, "a_ms", NAN), 52, 1e-9, "json a_ms");
    CHECK_NEAR(ll_json_num(law, "b_ms", NAN), 30, 1e-9, "json b_ms");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(law, "a_ci_ms")) == 2, "a_ci_ms");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(law, "b_ci_ms")) == 2, "b_ci_ms");
    CHECK(ll_json_num(law, "r2", NAN) > 0.999999, "json r2");
    CHECK(ll_json_num(law, "n_samples", 0) == 19 * 31, "json n_samples");
    CHECK(strcmp(ll_json_str(law, "model", ""), "linear") == 0, "json model");
    CHECK_NEAR(ll_json_num(j, "asymptote_tok_per_s", NAN), 1000.0 / 30, 1e-9, "json asymptote");
    CHECK_NEAR(ll_json_num(j, "n_half", NAN), 52.0 / 30, 1e-9, "json n_half");
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
    CHECK(cJSON_GetArraySize(lv) == 5, "json levels");
    const cJSON *l4 = cJSON_GetArrayItem(lv, 4);
    CHECK(ll_json_num(l4, "concurrency", 0) == 16, "json concurrency");
    CHECK_REL(ll_json_num(l4, "steady_tok_per_s", NAN), 16000.0 / (52 + 30 * 16), 1e-9,
              "json steady");
    CHECK_REL(ll_json_num(l4, "predicted_tok_per_s", NAN), 16000.0 / (52 + 30 * 16), 1e-9,
              "json predicted");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l4, "ramp_s")), "json ramp_s");
    cJSON_Delete(j);
    fit_result_free(r);
}

/* fit/analyze_law.c "The law": a + b*N estimates the MEAN step, which throughput follows.
 * A real engine's step jitter is right-skewed (a late kernel, never an early
 * one), so its mean sits above its median; a fit that centres on medians
 * predicts more throughput than the engine gives. Lockstep levels C = 1..256
 * (all C steady for 19 steps per wave) with exponential and lognormal jitter:
 * at every C the law's mean-line band must cover the true mean step, and the
 * measured steady throughput must agree with the law's prediction within the
 * interval of their ratio (error_rel_ci covers 0). */
static void test_skewed_jitter(void)
{
    const int kinds[] = {SIM_JITTER_EXP, SIM_JITTER_LOGNORMAL};
    const double jit[] = {0.3, 0.25};
    for (int k = 0; k < 2; k++) {
        sim_cfg c;
        sim_default(&c);
        int cs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
        sim_set_levels(&c, cs, 9, 12);
        c.a_ms = 3;
        c.b_ms = 0.05;
        c.jitter_kind = kinds[k];
        c.jitter_frac = jit[k];
        c.seed = 77 + (uint64_t)k;
        c.write_steps = 0;
        sim_stats st;
        fit_result *r = run_sim(k ? "lognormal" : "exponential", &c, &st, NULL);
        if (!r)
            return;
        CHECK(r->law.ok, "law fitted");
        printf("%s jitter %.2f: law %.4f + %.5f*N (truth mean %.4f + %.5f*N, median-line %.4f + %.5f*N) "
               "method %s, %zu trimmed\n",
               k ? "lognormal" : "exponential", c.jitter_frac, r->law.a_ms, r->law.b_ms,
               sim_mean_step(&c, 0), sim_mean_step(&c, 1) - sim_mean_step(&c, 0),
               sim_law(&c, 0) * (k ? 1 : 1 + c.jitter_frac * log(2.0)),
               c.b_ms * (k ? 1 : 1 + c.jitter_frac * log(2.0)), r->law.method, r->law.n_trimmed);
        /* Each check is a 95% interval: count the levels it covers rather
         * than demand all 9 (over 400 seeds all 9 held in only ~85% of runs
         * for the band and err%, ~64% for the throughput interval; 7 of 9
         * and 6 of 9 hold in > 99%). The old median law covered 0 of 9. */
        int band_ok = 0, err_ok = 0, thr_ok = 0;
        for (size_t i = 0; i < r->n_levels; i++) {
            const fit_level *L = &r->levels[i];
            double lo, hi, m = sim_mean_step(&c, L->concurrency);
            fit_law_mean_ci(&r->law, L->concurrency, &lo, &hi);
            printf("  C=%3d mean step %.4f, law %.4f [%.4f, %.4f]; steady %.2f tok/s [%.2f, %.2f], "
                   "law %.2f, err %+.2f%% [%+.2f, %+.2f]\n",
                   L->concurrency, m, (lo + hi) / 2, lo, hi, L->steady_tok_per_s, L->steady_tok_per_s_ci[0],
                   L->steady_tok_per_s_ci[1], L->predicted_tok_per_s, 100 * L->error_rel,
                   100 * L->error_rel_ci[0], 100 * L->error_rel_ci[1]);
            band_ok += lo <= m && m <= hi;
            err_ok += L->error_rel_ci[0] <= 0 && 0 <= L->error_rel_ci[1];
            thr_ok += L->steady_tok_per_s_ci[0] <= 1000.0 * L->concurrency / m &&
                      1000.0 * L->concurrency / m <= L->steady_tok_per_s_ci[1];
        }
        CHECK(band_ok >= 7, "true mean step inside the law's band at %d of 9 levels (>= 7)", band_ok);
        CHECK(err_ok >= 7, "err%% interval covers 0 at %d of 9 levels (>= 7)", err_ok);
        CHECK(thr_ok >= 6, "steady throughput interval covers the truth at %d of 9 levels (>= 6)", thr_ok);
        fit_result_free(r);
    }
}

static int write_text(const char *name, const char *text)
{
    FILE *f = fopen(rec_path(name), "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static void expect_load_error(const char *name, const char *text, int want, const char *needle)
{
    char err[512] = "";
    fit_run *run = NULL;
    if (text)
        CHECK(write_text(name, text) == 0, "write %s", name);
    int rc = fit_load_run(text ? rec_path(name) : name, &run, err, sizeof err);
    CHECK(rc == want, "%s: rc %d want %d (%s)", name, rc, want, err);
    CHECK(run == NULL, "%s: no run on error", name);
    CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", name, err, needle);
    fit_run_free(run);
}

static void test_bad_input(void)
{
    expect_load_error("/nonexistent/run/dir", NULL, LL_EIO, "No such file");
    expect_load_error("schema2", "{\"type\":\"run\",\"schema\":2}\n", LL_EINVAL, "schema 2");
    expect_load_error("norun", "{\"type\":\"level\",\"level\":0}\n", LL_EINVAL, "run");
    expect_load_error("empty", "", LL_EINVAL, "no run line");
    expect_load_error("malformed",
                      "{\"type\":\"run\",\"schema\":1}\n{\"type\":\"request\",,}\n"
                      "{\"type\":\"level\",\"level\":0}\n",
                      LL_EPARSE, ":2");
    /* A run with no requests loads, analyses, and says there is no law. */
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    CHECK(write_text("bare", "{\"type\":\"run\",\"schema\":1}\n{\"type\":\"level\",\"level\":0,"
                             "\"concurrency\":4,\"start_ns\":5}\n") == 0, "write bare");
    CHECK(fit_load_run(rec_path("bare"), &run, err, sizeof err) == 0, "bare loads: %s", err);
    if (run) {
        CHECK(fit_analyze(run, NULL, &res, err, sizeof err) == 0, "bare analyses: %s", err);
        CHECK(res && !res->law.ok && isnan(res->asymptote_tok_per_s), "no law on no data");
        CHECK(res && res->n_notes > 0, "a note says why");
        cJSON *j = res ? rpt_fit_to_json(res) : NULL;
        CHECK(j && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(
                       cJSON_GetObjectItemCaseSensitive(j, "law"), "a_ms")),
              "NAN is null in JSON");
        cJSON_Delete(j);
        fit_result_free(res);
        fit_run_free(run);
    }
    /* Garbage inside a request (bad chunk) drops that request, not the run. */
    run = NULL;
    CHECK(write_text("badchunk",
                     "{\"type\":\"run\",\"schema\":1}\n"
                     "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,"
                     "\"end_ns\":9,\"chunks\":[[2,\"x\",\"t\"]]}\n"
                     "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,"
                     "\"end_ns\":9,\"chunks\":[[2,1,\"t\"],[5,2,\"a\"]]}\n") == 0,
          "write badchunk");
    CHECK(fit_load_run(rec_path("badchunk"), &run, err, sizeof err) == 0, "badchunk: %s", err);
    if (run) {
        CHECK(fit_run_n_requests(run) == 1, "one good request");
        CHECK(fit_run_get_info(run)->n_rejected == 1, "one bad request counted");
        CHECK(fit_run_n_levels(run) == 1, "implicit level");
        const ll_rec_request *q = fit_run_request(run, 0);
        fit_chunks ch = {0};
        CHECK(q && fit_chunks_of(run, q, &ch) == 0 && q->n_chunks == 2 && ch.n == 2 && ch.v[1].tokens == 2 &&
                  ch.v[1].kind == LL_CHUNK_ANSWER && q->first_token_ns == 2,
              "chunks read");
        fit_chunks_free(&ch);
        fit_run_free(run);
    }
    fit_options o;
    fit_options_default(&o);
    o.edge_tol_frac = 0.7;
    run = NULL;
    if (fit_load_run(rec_path("bare"), &run, err, sizeof err) == 0) {
        res = NULL;
        CHECK(fit_analyze(run, &o, &res, err, sizeof err) == LL_EINVAL, "bad option refused");
        CHECK(res == NULL, "no result on bad option");
        fit_run_free(run);
    }
}

/* Hostile and truncated records through the whole path: load, analyse, JSON,
 * print. Under the sanitizer build each of these was undefined behaviour once
 * (an int64 cast of 1e300, qsort(NULL, 0), NULL + 0); in a release build the
 * 1e300 chunk printed a throughput of 1.3e8 tok/s. */
static fit_result *analyse_text(const char *name, const char *text, fit_run **run_out)
{
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    *run_out = NULL;
    CHECK(write_text(name, text) == 0, "write %s", name);
    if (fit_load_run(rec_path(name), &run, err, sizeof err) != 0) {
        CHECK(0, "%s loads: %s", name, err);
        return NULL;
    }
    CHECK(fit_analyze(run, NULL, &res, err, sizeof err) == 0, "%s analyses: %s", name, err);
    if (res) {
        cJSON *j = rpt_fit_to_json(res);
        CHECK(j != NULL, "%s: JSON", name);
        cJSON_Delete(j);
        FILE *f = fopen("/dev/null", "w");
        if (f) {
            rpt_fit_print(f, res);
            fclose(f);
        }
    }
    *run_out = run;
    return res;
}

#define RUN_L "{\"type\":\"run\",\"schema\":1}\n"
#define LEVEL_L "{\"type\":\"level\",\"level\":0,\"concurrency\":2,\"start_ns\":0}\n"
#define LEVEL_END_L "{\"type\":\"level_end\",\"level\":0,\"end_ns\":100000000}\n"
#define REQ_L(send, end, chunks)                                                                 \
    "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":" #send ",\"end_ns\":" #end \
    ",\"chunks\":" chunks "}\n"

static void test_hostile_records(void)
{
    fit_run *run;
    /* A sweep killed before its first level: the run line alone. */
    fit_result *res = analyse_text("runonly", RUN_L, &run);
    CHECK(res && res->n_levels == 0 && !res->law.ok && strstr(res->no_law, "no request"),
          "run line alone: %zu levels, no law because '%s'", res ? res->n_levels : 99, res ? res->no_law : "");
    fit_result_free(res);
    fit_run_free(run);

    /* Requests that never got a chunk (the server died before the first token). */
    res = analyse_text("nochunks", RUN_L LEVEL_L REQ_L(1000, 50000000, "[]") REQ_L(2000, 60000000, "[]") LEVEL_END_L,
                       &run);
    CHECK(res && res->n_levels == 1 && res->levels[0].n_requests == 2 && res->levels[0].whole_tok_per_s == 0 &&
              isnan(res->levels[0].steady_tok_per_s) && !res->law.ok,
          "no chunks: %zu requests, whole %.3g tok/s, steady %.3g",
          res && res->n_levels ? res->levels[0].n_requests : 0, res && res->n_levels ? res->levels[0].whole_tok_per_s : -1,
          res && res->n_levels ? res->levels[0].steady_tok_per_s : -1);
    fit_result_free(res);
    fit_run_free(run);

    /* One chunk at 1e300 ns in an otherwise sane level: that request is
     * rejected and counted; the other's 3 tokens over 0.1 s are 30 tok/s. */
    res = analyse_text("bigtime",
                       RUN_L LEVEL_L REQ_L(1000, 50000000, "[[1e6,1,\"a\"],[1e300,1,\"a\"]]")
                           REQ_L(2000, 60000000, "[[2e6,1,\"a\"],[3e6,1,\"a\"],[4e6,1,\"a\"]]") LEVEL_END_L,
                       &run);
    CHECK(res && res->n_rejected_records == 1 && res->n_out_of_range == 1 && res->n_levels == 1 &&
              res->levels[0].n_requests == 1 && fabs(res->levels[0].whole_tok_per_s - 30.0) < 1e-9,
          "1e300 chunk: %zu rejected, %zu out of range, whole %.6g tok/s (want 30)",
          res ? res->n_rejected_records : 0, res ? res->n_out_of_range : 0,
          res && res->n_levels ? res->levels[0].whole_tok_per_s : -1);
    fit_result_free(res);
    fit_run_free(run);

    /* Times past 2^62 ns and negative token counts: the same, never cast. */
    res = analyse_text("negtok",
                       RUN_L LEVEL_L REQ_L(1000, 9.3e18, "[[1e6,1,\"a\"]]") REQ_L(1000, 50000000, "[[1e6,-5,\"a\"]]")
                           LEVEL_END_L,
                       &run);
    CHECK(res && res->n_rejected_records == 2 && res->n_levels == 1 && res->levels[0].n_requests == 0,
          "9.3e18 end and -5 tokens: %zu rejected", res ? res->n_rejected_records : 0);
    fit_result_free(res);
    fit_run_free(run);
}

static void test_fit_line(void)
{
    /* Known OLS answer: y = 1 + 2x + e with e = (+1,-1,-1,+1). */
    double x[] = {1, 2, 3, 4}, y[] = {4, 4, 6, 10};
    fit_law L;
    char err[128];
    CHECK(fit_line(x, y, 4, 0, &L, err, sizeof err) == 0, "ols");
    CHECK_NEAR(L.b_ms, 2.0, 1e-12, "ols slope");
    CHECK_NEAR(L.a_ms, 1.0, 1e-12, "ols intercept");
    /* RSS = 4 over 2 dof: s = sqrt(2). HC3 by hand: leverages (.7,.3,.3,.7),
     * (X'X)^-1 = [[1.5,-.5],[-.5,.2]], e/(1-h) = (10/3, -10/7, -10/7, 10/3):
     * var(b) = 2 + 2/49 = 100/49, so se(b) = 10/7 (the pooled one: sqrt(2/5)). */
    CHECK_NEAR(L.resid_sd_ms, sqrt(2.0), 1e-12, "ols sd");
    CHECK_NEAR(L.b_se_ms, 10.0 / 7.0, 1e-12, "ols HC3 se(b)");
    CHECK_NEAR(L.b_ci_ms[1] - L.b_ms, 4.302652729911275 * 10.0 / 7.0, 1e-9, "t(2) CI");
    /* The rest of the same HC3 matrix (I M I, exact fractions): var(a) =
     * 6350/441, cov(a, b) = -250/49. The mean line's band at x = 2 is then
     * t * sqrt(6350/441 + 4*100/49 - 4*250/49) = t * sqrt(950/441). */
    CHECK_NEAR(L.a_se_ms, sqrt(6350.0 / 441.0), 1e-12, "ols HC3 se(a)");
    CHECK_NEAR(L.cov_ab_ms2, -250.0 / 49.0, 1e-12, "ols HC3 cov(a, b)");
    CHECK_NEAR(L.t_crit, 4.302652729911275, 1e-9, "t(2) quantile kept");
    double lo, hi;
    fit_law_mean_ci(&L, 2, &lo, &hi);
    CHECK_NEAR(hi - lo, 2 * 4.302652729911275 * sqrt(950.0 / 441.0), 1e-9, "mean-line band at x = 2");
    CHECK_NEAR((hi + lo) / 2, 5.0, 1e-12, "band centred on the line");
    /* One wild point: bisquare ignores it, OLS does not. */
    double xr[20], yr[20];
    for (int i = 0; i < 20; i++) {
        xr[i] = i + 1;
        yr[i] = 3 + 0.5 * xr[i] + 0.01 * ((i * 7) % 5 - 2);
    }
    yr[10] += 50;
    fit_law R, O;
    CHECK(fit_line(xr, yr, 20, 1, &R, err, sizeof err) == 0, "robust");
    CHECK(fit_line(xr, yr, 20, 0, &O, err, sizeof err) == 0, "ols");
    CHECK_NEAR(R.b_ms, 0.5, 0.01, "robust slope ignores outlier");
    CHECK_NEAR(R.a_ms, 3, 0.05, "robust intercept ignores outlier");
    CHECK(fabs(O.a_ms - 3) > 0.5, "OLS intercept pulled by outlier (%g)", O.a_ms);
    CHECK(R.converged, "robust converged");
    /* Too little data is not an error, just no law. */
    double x1[] = {4, 4, 4}, y1[] = {1, 2, 3};
    CHECK(fit_line(x1, y1, 3, 1, &L, err, sizeof err) == 0 && !L.ok && L.n_distinct == 1,
          "one distinct x: no law");
    double bad[] = {1, NAN, 3};
    CHECK(fit_line(x, bad, 3, 0, &L, err, sizeof err) == LL_EINVAL, "NAN refused");
}

int main(void)
{
    gsl_set_error_handler_off();
    snprintf(dir, sizeof dir, "fit_test_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fit_line();
    test_exact_staggered();
    test_lockstep();
    test_failed_and_warmup();
    test_interrupted();
    test_knee();
    test_curved();
    test_open_loop();
    test_stalls();
    test_noise_coverage();
    test_skewed_jitter();
    test_bad_input();
    test_hostile_records();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tu_fail == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
