/* test_fit_models.c: the family of step-time models (fit.h "The context
 * term", "The chosen model") chosen by evidence on simulated runs whose law
 * is known (sim.c: a continuous-batching engine on a virtual clock).
 *
 *  - 20 + 2n + 0.5c (c per 1k context tokens, prompts 2,000 +- 90%): the
 *    context model, each term within 3%, c's interval covering 0.5;
 *  - the same law with every prompt the same length and short outputs: K
 *    moves with N only a little within a level; whatever is chosen, its
 *    prediction stays within 5% of every level;
 *  - 52 + 30n: the line, no spurious term, over 20 seeds at most one wrong;
 *  - a knee at N = 8 (slope 2 then 6): the knee, at 8;
 *  - batch buckets (N padded to 1, 2, 4, 8, 16, 24) over C = 1, 3, 5, 6, 12,
 *    20: the bucket model;
 *  - a law the family cannot express (a step in a at N >= 6 over a plain
 *    line): the headline's worst level beyond 5%.
 * argv: none. Real time: a few seconds (no real time is simulated). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "sim.h"
#include "testutil.h"

static fit_result *run_sim_keep(const sim_cfg *c, const char *name, fit_run **keep)
{
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "/tmp/ll_test_fit_models_%d_%s.jsonl", (int)getpid(), name);
    sim_stats st;
    if (sim_write(path, c, &st)) {
        CHECK(0, "%s: simulator failed", name);
        return NULL;
    }
    fit_options opt;
    fit_options_default(&opt);
    fit_run *run = NULL;
    fit_result *res = NULL;
    int rc = sim_load_fit(path, &opt, &run, &res, err, sizeof err);
    CHECK(rc == 0, "%s: fit: %s", name, err);
    if (keep)
        *keep = run;
    else
        fit_run_free(run);
    unlink(path);
    return res;
}

static fit_result *run_sim(const sim_cfg *c, const char *name)
{
    return run_sim_keep(c, name, NULL);
}

static sim_cfg base(double a, double b, uint64_t seed, const int *conc, int n_levels)
{
    sim_cfg c;
    sim_default(&c);
    c.a_ms = a;
    c.b_ms = b;
    c.seed = seed;
    c.think_tok = 0;
    c.max_tokens = 64;
    c.jitter_frac = 0.03;
    c.prefill_per_step = 1;
    sim_set_levels(&c, conc, n_levels, 6);
    return c;
}

static double worst_level_error(const fit_result *r)
{
    return r->model_worst_level >= 0 ? fabs(r->levels[r->model_worst_level].model_error_rel) : NAN;
}

static void test_context(void)
{
    static const int conc[] = {1, 2, 4, 8, 12, 16};
    sim_cfg c = base(20, 2, 11, conc, 6);
    sim_set_levels(&c, conc, 6, 12);
    c.c_ms_per_ktok = 0.5;
    c.prompt_tok = 2000;
    c.prompt_spread = 0.9;
    fit_run *run = NULL;
    fit_result *r = run_sim_keep(&c, "context", &run);
    if (!r)
        return;
    const fit_model_check *m = &r->model;
    CHECK(m->best == FIT_MODEL_CONTEXT, "20+2n+0.5c: the context model chosen: %s (%s)", fit_model_name(m->best),
          m->verdict);
    CHECK_REL(m->ctx_a_ms, 20, 0.03, "a");
    CHECK_REL(m->ctx_b_ms, 2, 0.03, "b");
    CHECK_REL(m->ctx_c_ms, 0.5, 0.03, "c");
    CHECK(m->ctx_c_ci_ms[0] <= 0.5 && 0.5 <= m->ctx_c_ci_ms[1], "c's interval [%g, %g] covers 0.5",
          m->ctx_c_ci_ms[0], m->ctx_c_ci_ms[1]);
    CHECK(worst_level_error(r) < FIT_MODEL_LEVEL_FIT, "every level within 5%%: worst %.3f", worst_level_error(r));

    /* plan on it at 4k tokens per request: (S - a) / (b + 4c), the closed form */
    fit_plan_options po = {.slo = {NAN, 60, NAN}, .context_tok = 4000};
    fit_plan *p = NULL;
    char err[256] = "";
    CHECK(fit_plan_compute(run, r, &po, &p, err, sizeof err) == 0 && p, "plan: %s", err);
    if (p) {
        double want = (60 - m->ctx_a_ms) / (m->ctx_b_ms + 4 * m->ctx_c_ms);
        CHECK(p->model == FIT_MODEL_CONTEXT && fabs(p->n_real - want) < 1e-9 * want,
              "plan --context 4k: N = %.6f, closed form %.6f", p->n_real, want);
        CHECK(p->n_real_ci[0] < p->n_real && p->n_real < p->n_real_ci[1], "its interval [%g, %g]",
              p->n_real_ci[0], p->n_real_ci[1]);
        /* the truth at 4k: (60 - 20) / (2 + 2) = 10 */
        CHECK(fabs(p->n_real - 10) < 0.5, "near the truth's 10: %.3f", p->n_real);
        fit_plan_free(p);
    }
    fit_run_free(run);
    fit_result_free(r);
}

/* compare on the context model: B halves c (a decode-attention rewrite),
 * keeps b: c B/A near 0.5 inside its interval, b B/A near 1 */
static void test_compare_terms(void)
{
    static const int conc[] = {1, 2, 4, 8, 12, 16};
    fit_run *ra = NULL, *rb = NULL;
    sim_cfg ca = base(20, 2, 21, conc, 6), cb = base(20, 2, 22, conc, 6);
    sim_set_levels(&ca, conc, 6, 12);
    sim_set_levels(&cb, conc, 6, 12);
    ca.prompt_tok = cb.prompt_tok = 2000;
    ca.prompt_spread = cb.prompt_spread = 0.9;
    ca.c_ms_per_ktok = 0.5;
    cb.c_ms_per_ktok = 0.25;
    fit_result *a = run_sim_keep(&ca, "cmp_a", &ra), *b = run_sim_keep(&cb, "cmp_b", &rb);
    if (a && b) {
        fit_compare_options o;
        fit_compare_options_default(&o);
        o.n_resamples = 0;
        fit_compare *c = NULL;
        char err[256] = "";
        CHECK(fit_compare_runs(ra, a, rb, b, &o, &c, err, sizeof err) == 0 && c, "compare: %s", err);
        if (c) {
            CHECK(fabs(c->ctx_c_ratio - 0.5) < 0.05 && c->ctx_c_ratio_ci[0] <= 0.5 && 0.5 <= c->ctx_c_ratio_ci[1],
                  "c B/A %.3f [%.3f, %.3f] around 0.5", c->ctx_c_ratio, c->ctx_c_ratio_ci[0], c->ctx_c_ratio_ci[1]);
            CHECK(fabs(c->ctx_b_ratio - 1) < 0.05, "b B/A %.3f near 1", c->ctx_b_ratio);
            fit_compare_free(c);
        }
    }
    fit_result_free(a);
    fit_result_free(b);
    fit_run_free(ra);
    fit_run_free(rb);
}

static void test_line_seeds(void)
{
    static const int conc[] = {1, 2, 4, 8, 16, 32};
    int wrong = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        sim_cfg c = base(52, 30, seed, conc, 6);
        c.prompt_tok = 300;
        c.prompt_spread = 0.5;
        fit_result *r = run_sim(&c, "line");
        if (!r)
            return;
        if (r->model.best != FIT_MODEL_LINEAR) {
            wrong++;
            fprintf(stderr, "seed %llu: %s (%s)\n", (unsigned long long)seed, fit_model_name(r->model.best),
                    r->model.verdict);
        }
        if (seed == 1)
            CHECK(worst_level_error(r) < FIT_MODEL_LEVEL_FIT, "52+30n: every level within 5%%: %.3f",
                  worst_level_error(r));
        fit_result_free(r);
    }
    CHECK(wrong <= 1, "52+30n: the line chosen in at least 19 of 20 seeds (%d wrong)", wrong);
}

static void test_knee(void)
{
    static const int conc[] = {1, 2, 4, 6, 8, 12, 16, 24};
    sim_cfg c = base(10, 2, 5, conc, 8);
    c.knee_n = 8;
    c.b2_ms = 6;
    fit_result *r = run_sim(&c, "knee");
    if (!r)
        return;
    CHECK(r->model.best == FIT_MODEL_PIECEWISE && r->model.knee_n == 8, "knee at 8: %s at %g (%s)",
          fit_model_name(r->model.best), r->model.knee_n, r->model.verdict);
    CHECK_REL(r->model.slope_before_ms, 2, 0.03, "slope before the knee");
    CHECK_REL(r->model.slope_after_ms, 6, 0.03, "slope after the knee");
    fit_result_free(r);
}

static void test_buckets(void)
{
    static const int conc[] = {1, 3, 5, 6, 12, 20};
    sim_cfg c = base(8, 1.5, 3, conc, 6);
    c.buckets = 1;
    fit_result *r = run_sim(&c, "buckets");
    if (!r)
        return;
    CHECK(r->model.best == FIT_MODEL_BUCKETS, "buckets: %s (%s)", fit_model_name(r->model.best), r->model.verdict);
    CHECK_REL(r->model.bkt_a_ms, 8, 0.03, "a over buckets");
    CHECK_REL(r->model.bkt_b_ms, 1.5, 0.03, "b over buckets");
    CHECK(worst_level_error(r) < FIT_MODEL_LEVEL_FIT, "every level within 5%%: %.3f", worst_level_error(r));
    fit_result_free(r);
}

static void test_no_model_fits(void)
{
    /* every level a line of its own: 4 + 2n for C < 6, 40 + 2n from 6 on,
     * a jump no model of the family has */
    static const int conc[] = {1, 2, 3, 4, 5, 6, 7, 8};
    sim_cfg c = base(4, 2, 9, conc, 8);
    c.knee_n = 5.5;
    c.b2_ms = 38; /* the knee's slope at one step past it: a jump of 36 at N = 6, then 38 per N */
    c.c2_ms = -1.2;
    fit_result *r = run_sim(&c, "nofit");
    if (!r)
        return;
    double w = worst_level_error(r);
    CHECK(isfinite(w) && w > FIT_MODEL_LEVEL_FIT, "a law outside the family: worst level %.3f beyond 5%%", w);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fit_print_law_line(f, r);
    fclose(f);
    CHECK(buf && strstr(buf, "NO MODEL OF THE FAMILY FITS EVERY LEVEL WITHIN 5%"), "the headline says so:\n%s",
          buf ? buf : "");
    free(buf);
    fit_result_free(r);
}

int main(void)
{
    test_context();
    test_compare_terms();
    test_line_seeds();
    test_knee();
    test_buckets();
    test_no_model_fits();
    TEST_MAIN_END();
}
