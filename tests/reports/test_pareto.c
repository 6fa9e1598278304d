/* test_pareto.c: the run report's Pareto chart data (report_pareto.c), read
 * back from the page's embedded JSON of a generated run with a known law.
 *
 * With objectives (`loadlaw report RUN --itl-slo 150ms --ttft-slo 40ms`):
 * the curve at each C is the law's closed form with the fitted a, b
 * (per user 1000/(a+bC), total C*1000/(a+bC)), its band brackets it, the
 * points beyond the largest measured C (and only those) are flagged
 * extrapolated and the curve reaches a quarter beyond it, the objective line
 * sits at 1000/SLO, and every level's goodput count, "meets" flag and
 * "best" flag are plan's (fit_plan_compute on the same run). Without
 * objectives: no line, no flags. A one-level run: points only, and a reason
 * for the missing curve. The shared objective parser refuses what plan
 * refuses.
 *
 * argv[1] = the loadlaw binary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fit.h"
#include "fit_plan.h"
#include "runs_gen.h"
#include "testutil.h"
#include "tsupport.h"

static const int levels[] = {1, 2, 4, 8, 16};

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k) { return cJSON_IsNumber(get(o, k)) ? get(o, k)->valuedouble : NAN; }
static double at2(const cJSON *o, const char *k, int i)
{
    const cJSON *x = cJSON_GetArrayItem(get(o, k), i);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static int close_rel(double x, double want) { return fabs(x - want) <= 1e-9 * fabs(want) + 1e-12; }

/* The run's law and plan, as `loadlaw plan RUN --itl-slo/--ttft-slo` sees them. */
static int plan_of(const char *dir, const fit_slo *slo, fit_run **run, fit_result **res, fit_plan **plan)
{
    char err[512];
    fit_options fo;
    fit_options_default(&fo);
    fit_plan_options po = {.slo = *slo};
    return fit_load_run(dir, run, err, sizeof err) || fit_analyze(*run, &fo, res, err, sizeof err) ||
           fit_plan_compute(*run, *res, &po, plan, err, sizeof err);
}

static void check_with_objectives(const char *bin)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s report par --itl-slo 150ms --ttft-slo 40ms -o par/slo.html > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "report with objectives");
    cJSON *d = tu_page_data("par/slo.html");
    const cJSON *p = get(d, "pareto");
    CHECK(p != NULL, "the page's data has \"pareto\"");
    fit_slo slo = {.ttft_ms = 40, .tpot_ms = 150, .e2e_ms = NAN};
    fit_run *run = NULL;
    fit_result *res = NULL;
    fit_plan *plan = NULL;
    CHECK(plan_of("par", &slo, &run, &res, &plan) == 0, "plan of the run");
    if (!p || !plan)
        goto out;
    double a = res->law.a_ms, b = res->law.b_ms;
    CHECK(fabs(a - 20) < 2 && fabs(b - 12) < 0.5, "law near the generator's 20+12n: %g + %g n", a, b);
    CHECK(cJSON_IsNull(get(p, "no_curve")), "a curve when there is a law");
    CHECK(num(p, "max_measured_c") == 16, "largest measured C 16: %g", num(p, "max_measured_c"));

    /* the curve: the closed forms, at C = 1, 2, ..., past 16 */
    const cJSON *q;
    int n = 0, n_extra = 0, last_c = 0, checked = 0;
    cJSON_ArrayForEach(q, get(p, "curve")) {
        int c = (int)num(q, "c");
        double step = a + b * c, user = num(q, "user_tok_per_s"), tok = num(q, "tok_per_s");
        CHECK(c == ++n, "curve C in order from 1: %d at %d", c, n);
        CHECK(close_rel(user, 1000.0 / step), "C=%d: per-user %.12g, 1000/(a+bC) %.12g", c, user, 1000.0 / step);
        CHECK(close_rel(tok, 1000.0 * c / step), "C=%d: total %.12g, C*1000/(a+bC) %.12g", c, tok,
              1000.0 * c / step);
        checked += c == 1 || c == 7 || c == 16 || c == 20;
        double ulo = at2(q, "user_tok_per_s_ci", 0), uhi = at2(q, "user_tok_per_s_ci", 1);
        double tlo = at2(q, "tok_per_s_ci", 0), thi = at2(q, "tok_per_s_ci", 1);
        CHECK(ulo < user && user < uhi && tlo < tok && tok < thi,
              "C=%d: band [%g, %g] brackets %g per user, [%g, %g] brackets %g total", c, ulo, uhi, user, tlo, thi,
              tok);
        int extra = cJSON_IsTrue(get(q, "extrapolated"));
        CHECK(extra == (c > 16), "C=%d extrapolated %d", c, extra);
        n_extra += extra;
        last_c = c;
    }
    CHECK(checked == 4, "C = 1, 7, 16 and 20 among the curve's points");
    CHECK(last_c == 20 && n_extra == 4, "curve to 1.25 x 16 = 20 (%d), 4 extrapolated (%d)", last_c, n_extra);

    const cJSON *ob = get(p, "objectives");
    CHECK(close_rel(num(ob, "user_tok_per_s_min"), 1000.0 / 150), "objective line at 1000/150: %g",
          num(ob, "user_tok_per_s_min"));
    CHECK(num(ob, "tpot_ms") == 150 && num(ob, "ttft_ms") == 40 && cJSON_IsNull(get(ob, "e2e_ms")),
          "objectives as given");
    CHECK(num(get(ob, "max_c"), "n") == (double)plan->n_star && plan->n_star == 10,
          "max C is plan's: %g, plan %ld", num(get(ob, "max_c"), "n"), plan->n_star);

    /* the points: each level's steady throughput and that over C; goodput as plan */
    int n_pts = 0, n_meet = 0, n_best = 0;
    cJSON_ArrayForEach(q, get(p, "points")) {
        size_t i = 0;
        while (i < res->n_levels && res->levels[i].level != (int)num(q, "level"))
            i++;
        CHECK(i < res->n_levels, "point of a known level");
        if (i == res->n_levels)
            continue;
        const fit_level *L = &res->levels[i];
        const fit_plan_goodput *g = &plan->goodput[i];
        n_pts++;
        /* cJSON prints 15 digits when they read back within DBL_EPSILON */
        CHECK(close_rel(num(q, "tok_per_s"), L->steady_tok_per_s) &&
                  close_rel(num(q, "user_tok_per_s"), L->steady_tok_per_s / L->concurrency),
              "C=%d: point %.17g at the steady throughput %.17g", L->concurrency, num(q, "tok_per_s"),
              L->steady_tok_per_s);
        CHECK(num(q, "n_good") == (double)g->n_good && num(q, "n_measured") == (double)g->n_measured &&
                  close_rel(num(q, "goodput_req_per_s"), g->goodput_req_per_s),
              "C=%d: goodput %g of %g, plan %zu of %zu", L->concurrency, num(q, "n_good"), num(q, "n_measured"),
              g->n_good, g->n_measured);
        int meets = cJSON_IsTrue(get(q, "meets"));
        CHECK(cJSON_IsBool(get(q, "meets")) && meets == (g->good_frac >= 0.9), "C=%d: meets %d, plan's share %g",
              L->concurrency, meets, g->good_frac);
        /* the law: TPOT 20+12C ms meets 150 ms up to C = 10 */
        CHECK(meets == (L->concurrency <= 8), "C=%d: meets %d", L->concurrency, meets);
        int best = cJSON_IsTrue(get(q, "best"));
        CHECK(best == (plan->best_goodput_idx == (int)i), "C=%d: best %d as plan", L->concurrency, best);
        n_meet += meets;
        n_best += best;
    }
    CHECK(n_pts == 5 && n_meet == 4 && n_best == 1, "5 points (%d), 4 meeting (%d), one best (%d)", n_pts, n_meet,
          n_best);
out:
    fit_plan_free(plan);
    fit_result_free(res);
    fit_run_free(run);
    cJSON_Delete(d);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_pareto LOADLAW\n");
        return 2;
    }
    const char *bin = argv[1];
    char cmd[2048];
    gen_spec g = {.a_ms = 20, .b_ms = 12, .jitter = 0.04, .prefill_ms = 30, .tokens = 40, .waves = 3, .think = 12,
                  .levels = levels, .n_levels = 5, .seed = 5};
    CHECK(gen_run("par", &g) == 0, "write the run");
    check_with_objectives(bin);

    /* no objectives (the sweep's own report): no line, no flags */
    snprintf(cmd, sizeof cmd, "%s report par > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "report without objectives");
    cJSON *d = tu_page_data("par/report.html");
    const cJSON *p = get(d, "pareto"), *q;
    CHECK(p && cJSON_IsNull(get(p, "objectives")), "no objectives");
    CHECK(cJSON_GetArraySize(get(p, "curve")) == 20, "the curve still drawn");
    cJSON_ArrayForEach(q, get(p, "points"))
        CHECK(cJSON_IsNull(get(q, "meets")) && cJSON_IsFalse(get(q, "best")), "no goodput flags");
    cJSON_Delete(d);

    /* one level: no law, so points only and why */
    static const int one[] = {4};
    gen_spec g1 = g;
    g1.levels = one;
    g1.n_levels = 1;
    CHECK(gen_run("par1", &g1) == 0, "write the one-level run");
    snprintf(cmd, sizeof cmd, "%s report par1 --itl-slo 100ms > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "report of one level");
    d = tu_page_data("par1/report.html");
    p = get(d, "pareto");
    const char *why = cJSON_GetStringValue(get(p, "no_curve"));
    CHECK(why && strstr(why, "one concurrency"), "says why there is no curve (the fit's no_law): %s",
          why ? why : "(null)");
    CHECK(cJSON_GetArraySize(get(p, "curve")) == 0 && cJSON_GetArraySize(get(p, "points")) == 1,
          "no curve, one point");
    CHECK(close_rel(num(get(p, "objectives"), "user_tok_per_s_min"), 10), "the objective line without a law");
    CHECK(cJSON_IsTrue(get(cJSON_GetArrayItem(get(p, "points"), 0), "meets")), "C=4 (68 ms) meets 100 ms");
    cJSON_Delete(d);

    /* the objective options parse as plan's */
    snprintf(cmd, sizeof cmd, "%s report par --itl-slo 50ms --tpot-slo 40ms > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 2, "two per-token objectives: usage error");
    snprintf(cmd, sizeof cmd, "%s report par --ttft-slo soon > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 2, "a bad duration: usage error");
    snprintf(cmd, sizeof cmd, "%s plan par --itl-slo 50ms --tpot-slo 40ms > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 2, "plan refuses the same");
    TEST_MAIN_END();
}
