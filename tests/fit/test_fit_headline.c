/* test_fit_headline.c: the one headline (fit/headline.c, reports/headline.c)
 * and held-out prediction (fit/model_loo.c) on simulated runs whose law is
 * known (sim.c):
 *
 *  - 52 + 30n: the line is the headline, its first line "model (linear)",
 *    its ceiling 1000/30 said extrapolated; every level held out predicted
 *    within 2%;
 *  - 20 + 2n + 0.5c: the context model first, the line beneath as "line (not
 *    chosen)"; every level held out within 2%;
 *  - a knee at N = 8 (slope 2 then 6): every level held out within 2%, the
 *    knee level too (found from the levels on either side of it);
 *  - a knee the last level alone shows (the model fits every level, but
 *    refitted without that level predicts it far off): the held-out warning,
 *    exactly when a level misses by more than FIT_HELDOUT_BOUND, and no
 *    ceiling;
 *  - a law no model of the family fits: the first line says so, with the best
 *    level, and no "at most";
 *  - a knee after which an extra request costs nothing: no ceiling, and why;
 *  - two levels: the held-out check cannot be made, and says so.
 * argv: none. A few seconds (no real time is simulated). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

#include <cjson/cJSON.h>

static fit_result *fitted(const sim_cfg *c, const char *name)
{
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "/tmp/ll_test_fit_headline_%d_%s.jsonl", (int)getpid(), name);
    fit_run *run = NULL;
    fit_result *res = NULL;
    sim_stats st;
    int rc = sim_fit(path, c, NULL, &st, &run, &res, err, sizeof err);
    CHECK(rc == 0, "%s: fit: %s", name, err);
    fit_run_free(run);
    unlink(path);
    return rc == 0 ? res : NULL;
}

static sim_cfg law(double a, double b, uint64_t seed, const int *conc, int n)
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
    sim_set_levels(&c, conc, n, 8);
    return c;
}

/* a + b*n, then b2 a request above N = knee, fitted. */
static fit_result *knee_law(double a, double b, uint64_t seed, const int *conc, int n, double knee, double b2,
                            const char *name)
{
    sim_cfg c = law(a, b, seed, conc, n);
    c.knee_n = knee;
    c.b2_ms = b2;
    return fitted(&c, name);
}

/* What rpt_print_law_line writes (caller frees). */
static char *headline(const fit_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    rpt_print_law_line(f, r);
    fclose(f);
    return buf;
}

/* Every closed level has a held-out error within bound; the worst in *w. */
static int heldout_within(const fit_result *r, double bound, double *w)
{
    int ok = 1;
    *w = 0;
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        if (!L->closed_loop)
            continue;
        ok &= isfinite(L->heldout_error_rel) && fabs(L->heldout_error_rel) <= bound;
        *w = fmax(*w, fabs(L->heldout_error_rel));
        printf("  C=%d held out: %+.3f%% (predicted %.4g, measured %.4g)\n", L->concurrency,
               100 * L->heldout_error_rel, L->heldout_pred_tok_per_s, L->steady_tok_per_s);
    }
    return ok;
}

static void test_line(void)
{
    static const int conc[] = {1, 2, 4, 8, 16, 32};
    sim_cfg c = law(52, 30, 1, conc, 6);
    c.prompt_tok = 300;
    c.prompt_spread = 0.5;
    fit_result *r = fitted(&c, "line");
    if (!r)
        return;
    double w;
    CHECK(heldout_within(r, 0.02, &w), "52+30n: every level held out within 2%%: worst %.3f%%", 100 * w);
    char *h = headline(r);
    CHECK(h && strncmp(h, "model (linear): step(N) = ", 26) == 0, "the first line is the line's:\n%s", h ? h : "");
    CHECK(h && strstr(h, "-> at most ") && strstr(h, "as N grows (extrapolated: the model gives ") &&
              strstr(h, "at C=32, the largest measured)"),
          "its ceiling, said extrapolated:\n%s", h ? h : "");
    CHECK(h && strstr(h, "\nheld out: refitted without each level in turn, the linear model predicts it within"),
          "the held-out line:\n%s", h ? h : "");
    CHECK(h && !strstr(h, "line (not chosen)"), "the line is not shown twice");
    CHECK_REL(r->headline.ceiling_tok_per_s, 1000.0 / 30, 0.02, "ceiling 1000/b");
    CHECK(r->headline.n_heldout == 6 && !r->headline.heldout_warn, "6 levels held out, no warning");
    cJSON *j = rpt_fit_to_json(r), *o = cJSON_GetObjectItemCaseSensitive(j, "headline");
    CHECK(cJSON_IsObject(o) && cJSON_IsString(cJSON_GetObjectItem(o, "text")) &&
              strncmp(cJSON_GetObjectItem(o, "text")->valuestring, "model (linear)", 14) == 0 &&
              cJSON_IsTrue(cJSON_GetObjectItem(o, "fits_every_level")) &&
              cJSON_GetObjectItem(o, "heldout_levels")->valuedouble == 6,
          "--json headline");
    CHECK(cJSON_GetObjectItem(j, "asymptote_tok_per_s") && cJSON_GetObjectItem(j, "law"), "the old keys stay");
    cJSON_Delete(j);
    free(h);
    fit_result_free(r);
}

static void test_context(void)
{
    static const int conc[] = {1, 2, 4, 8, 12, 16};
    sim_cfg c = law(20, 2, 11, conc, 6);
    sim_set_levels(&c, conc, 6, 12);
    c.c_ms_per_ktok = 0.5;
    c.prompt_tok = 2000;
    c.prompt_spread = 0.9;
    fit_result *r = fitted(&c, "context");
    if (!r)
        return;
    double w;
    CHECK(r->model.best == FIT_MODEL_CONTEXT, "context chosen: %s", fit_model_name(r->model.best));
    CHECK(heldout_within(r, 0.02, &w), "20+2n+0.5c: every level held out within 2%%: worst %.3f%%", 100 * w);
    char *h = headline(r);
    CHECK(h && strncmp(h, "model (context): step(N, K) = ", 30) == 0, "the first line is the context model's:\n%s",
          h ? h : "");
    CHECK(h && strstr(h, " tokens of context per request as N grows (extrapolated"), "ceiling at the run's context");
    char *line = h ? strstr(h, "\nline (not chosen): step(N) = ") : NULL;
    CHECK(line && strstr(line, "; off the levels by "), "the line beneath, with its per-level error:\n%s", h ? h : "");
    /* the ceiling at the run's context: 1000 / (b + c*K/1k) */
    double kr = r->context_per_req_tok, want = 1000 / (r->model.ctx_b_ms + r->model.ctx_c_ms * kr / 1000);
    CHECK(fabs(r->headline.ceiling_tok_per_s / want - 1) < 1e-9, "ceiling at %.0f tokens per request: %g, 1000/(b + c K/1k) %g", kr,
          r->headline.ceiling_tok_per_s, want);
    free(h);
    fit_result_free(r);
}

static void test_knee(void)
{
    static const int conc[] = {1, 2, 4, 6, 8, 12, 16, 24};
    fit_result *r = knee_law(10, 2, 5, conc, 8, 8, 6, "knee");
    if (!r)
        return;
    double w;
    CHECK(r->model.best == FIT_MODEL_PIECEWISE, "knee chosen: %s", fit_model_name(r->model.best));
    CHECK(heldout_within(r, 0.02, &w), "knee at 8: every level held out within 2%%: worst %.3f%%", 100 * w);
    CHECK_REL(r->headline.ceiling_tok_per_s, 1000.0 / 6, 0.03, "ceiling from the slope after the knee");
    fit_result_free(r);
}

/* 4 + 2n to N = 8, then 10 per request: a knee only the last level shows.
 * The knee model fits every level (it has a parameter for that one); left
 * out, that level is the line's extrapolation, far off. */
static void test_heldout_warns(void)
{
    static const int conc[] = {1, 2, 4, 6, 8, 16};
    fit_result *r = knee_law(4, 2, 7, conc, 6, 8, 10, "lastknee");
    if (!r)
        return;
    const fit_headline *hd = &r->headline;
    CHECK(hd->fits, "the chosen %s model fits every level", fit_model_name(hd->model));
    CHECK(hd->heldout_worst_level >= 0 && r->levels[hd->heldout_worst_level].concurrency == 16 &&
              fabs(hd->heldout_worst_rel) > 0.3,
          "C=16 held out misses by %.1f%%", 100 * hd->heldout_worst_rel);
    char *h = headline(r);
    CHECK(h && strstr(h, "\nHELD OUT, A LEVEL IS MISSED: the ") && strstr(h, "refitted without C=16 predicts"),
          "the warning:\n%s", h ? h : "");
    /* the warning exactly when a level misses by more than the bound */
    size_t beyond = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        beyond += fabs(r->levels[i].heldout_error_rel) > FIT_HELDOUT_BOUND;
    CHECK(beyond >= 1 && hd->heldout_warn, "%zu level(s) beyond %.0f%%: warned", beyond, 100 * FIT_HELDOUT_BOUND);
    CHECK(isnan(hd->ceiling_tok_per_s) && h && strstr(h, "; no ceiling: refitted without C=16, the ") &&
              !strstr(h, "at most"),
          "no ceiling from a model that misses a level it did not see:\n%s", h ? h : "");
    free(h);
    fit_result_free(r);
}

/* 4 + 2n + 1.2n^2, and 36 more per request past N = 5.5: a curve with a
 * jump, which no model of the family follows. */
static void test_no_model_fits(void)
{
    static const int conc[] = {1, 2, 3, 4, 5, 6, 7, 8};
    sim_cfg c = law(4, 2, 9, conc, 8);
    sim_set_levels(&c, conc, 8, 6);
    c.knee_n = 5.5;
    c.b2_ms = 38;
    c.c2_ms = 1.2;
    fit_result *r = fitted(&c, "nofit");
    if (!r)
        return;
    char *h = headline(r);
    static const char first[] = "NO MODEL OF THE FAMILY FITS EVERY LEVEL WITHIN 5%: the best level measured ";
    CHECK(h && strncmp(h, first, sizeof first - 1) == 0,
          "the first line says no model fits:\n%s", h ? h : "");
    char *first_nl = h ? strchr(h, '\n') : NULL, *most = h ? strstr(h, "at most") : NULL;
    CHECK(first_nl && (!most || most > first_nl) && strstr(h, "no ceiling said"),
          "no ceiling in the headline");
    CHECK(!r->headline.fits && isnan(r->headline.ceiling_tok_per_s), "no ceiling figure");
    const fit_level *W = r->model_worst_level >= 0 ? &r->levels[r->model_worst_level] : NULL;
    CHECK(W && fabs(W->model_error_rel) > FIT_MODEL_LEVEL_FIT, "the worst level beyond 5%%: %.3f",
          W ? W->model_error_rel : NAN);
    CHECK(h && strstr(h, "does not fit every level): step(N"), "the model beneath, said not to fit:\n%s", h ? h : "");
    free(h);
    fit_result_free(r);
}

/* 10 + 4n to N = 8, then flat: the extra request beyond the knee costs
 * nothing, so the knee model bounds nothing. */
static void test_flat_after_knee(void)
{
    static const int conc[] = {1, 2, 4, 6, 8, 12, 16, 24};
    fit_result *r = knee_law(10, 4, 3, conc, 8, 8, 0, "flatknee");
    if (!r)
        return;
    char *h = headline(r);
    CHECK(r->model.best == FIT_MODEL_PIECEWISE, "knee chosen: %s", fit_model_name(r->model.best));
    CHECK(isnan(r->headline.ceiling_tok_per_s) && strstr(r->headline.no_ceiling, "beyond its last knee"),
          "no ceiling: %s", r->headline.no_ceiling);
    CHECK(h && strstr(h, "; no ceiling: the piecewise model's cost per request beyond its last knee") &&
              !strstr(h, "at most"),
          "said in the headline:\n%s", h ? h : "");
    free(h);
    fit_result_free(r);
}

static void test_two_levels(void)
{
    static const int conc[] = {4, 8};
    sim_cfg c = law(52, 30, 2, conc, 2);
    fit_result *r = fitted(&c, "two");
    if (!r)
        return;
    char *h = headline(r);
    CHECK(r->headline.n_heldout == 0 && h && strstr(h, "\nheld out: not made: 2 distinct N"),
          "two levels: no held-out check, said:\n%s", h ? h : "");
    free(h);
    fit_result_free(r);
}

int main(void)
{
    test_line();
    test_context();
    test_knee();
    test_heldout_warns();
    test_no_model_fits();
    test_flat_after_knee();
    test_two_levels();
    TEST_MAIN_END();
}
