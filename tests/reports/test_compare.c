/* test_compare.c: fit_compare_runs on run directories written with known laws
 * (runs_gen.h): run B's slope is a known factor smaller than A's, so the true
 * throughput ratio at C is (a + bA*C)/(a + bB*C) and the true slope ratio is
 * bB/bA; both must fall inside their intervals, and the intervals must be
 * tight enough to tell them from 1. With argv[1] = the loadlaw binary, the
 * --expect-speedup gate is checked for exit codes 3 and 0. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_cdf.h>

#include "common.h"
#include "fit.h"
#include "fit_compare.h"
#include "html_internal.h"
#include "report.h"
#include "runs_gen.h"
#include "testutil.h"
#include "tsupport.h"

static const int levels[] = {1, 2, 4, 8, 16};
#define A_MS 20.0
#define BA_MS 12.0
#define BB_MS 4.0

static int analyse(const char *dir, fit_run **run, fit_result **res)
{
    char err[512];
    fit_options o;
    fit_options_default(&o);
    if (fit_load_run(dir, run, err, sizeof err)) {
        CHECK(0, "load %s: %s", dir, err);
        return -1;
    }
    if (fit_analyze(*run, &o, res, err, sizeof err)) {
        CHECK(0, "analyze %s: %s", dir, err);
        return -1;
    }
    return 0;
}

/* Data embedded in <script type="application/json"> from a hostile model name
 * or error message: "</script>" must not close the block, and "<!--<script>"
 * must not push the HTML tokenizer into the script-data escaped states, where
 * the block's own "</script>" no longer ends it and the page is swallowed. So
 * no '<' at all may appear in the embedded JSON, and JSON.parse must still get
 * the same strings back (checked here with cJSON). */
static void check_json_embed(void)
{
    static const char *const hostile = "m<!--<script>x</script><img src=x onerror=alert(1)>\"\u00e9\x01";
    char fake[] = "/tmp/ll_test_chartjs_XXXXXX", err[512];
    int fd = mkstemp(fake);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    CHECK(write(fd, "var Chart=1;", 12) == 12, "write fake chart.js");
    close(fd);
    setenv("LOADLAW_CHARTJS", fake, 1);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "model", hostile);
    ll_buf b = {0};
    CHECK(html_page_begin(&b, hostile) == 0 && html_page_end(&b, d, err, sizeof err) == 0, "page: %s", err);
    const char *open_tag = "<script id=\"ll-data\" type=\"application/json\">";
    const char *start = b.p ? strstr(b.p, open_tag) : NULL;
    const char *end = start ? strstr(start, "</script>") : NULL;
    CHECK(start && end, "data block present");
    if (start && end) {
        start += strlen(open_tag);
        CHECK(memchr(start, '<', (size_t)(end - start)) == NULL, "no '<' inside the data block: %.*s",
              (int)(end - start), start);
        cJSON *back = cJSON_ParseWithLengthOpts(start, (size_t)(end - start), NULL, 0);
        const char *m = ll_json_str(back, "model", "");
        CHECK(strcmp(m, hostile) == 0, "round trip: got '%s'", m);
        cJSON_Delete(back);
    }
    ll_buf_free(&b);
    cJSON_Delete(d);
    unsetenv("LOADLAW_CHARTJS");
    unlink(fake);
}

/* The laws lines of the terminal output: "-> X tok/s max" must be 1000/b of
 * the b printed on the same line (a once stood there: 5.44 for a = 5.44). */
static void check_printed_asymptotes(const fit_compare *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL, "memstream");
    if (!f)
        return;
    rpt_compare_print(f, c, "a", "b");
    fclose(f);
    const fit_law *law[2] = {&c->law_a, &c->law_b};
    const char *tag[2] = {"  A a ", "  B b "};
    for (int k = 0; k < 2; k++) {
        const char *line = strstr(text, tag[k]);
        const char *bp = line ? strstr(line, "*N ms") : NULL;
        const char *ap = line ? strstr(line, "-> ") : NULL;
        double b_printed = NAN, asym = NAN;
        if (bp) {
            const char *p = bp;
            while (p > line && p[-1] != ' ')
                p--;
            b_printed = strtod(p, NULL);
        }
        if (ap)
            asym = strtod(ap + 3, NULL);
        CHECK(line && bp && ap, "laws line %c:\n%s", "AB"[k], text);
        CHECK(fabs(b_printed - law[k]->b_ms) <= 1e-3 * law[k]->b_ms, "printed b %c: %g", "AB"[k], b_printed);
        /* printed with one decimal */
        CHECK(fabs(asym - 1000.0 / law[k]->b_ms) <= 0.051, "printed asymptote %c: %g vs 1000/b = %g", "AB"[k], asym,
                   1000.0 / law[k]->b_ms);
        CHECK(fabs(asym - law[k]->a_ms) > 1, "asymptote %c is not a", "AB"[k]);
    }
    free(text);
}

/* The report's step-chart band: at every point, half-width
 * t(0.975, n-2) * sqrt(var_a + N^2 var_b + 2N cov_ab) around a + b*N, from the
 * law's own sandwich matrix; narrower than the band through the corners of
 * the a and b intervals wherever N > 0 (a and b are anti-correlated). */
static void check_band(const fit_run *run, const fit_result *res)
{
    char err[256];
    const fit_law *L = &res->law;
    CHECK(L->ok && isfinite(L->cov_ab_ms2) && L->cov_ab_ms2 < 0, "cov_ab %g (a, b anti-correlated)", L->cov_ab_ms2);
    double t = gsl_cdf_tdist_Pinv(0.975, (double)L->n_points - 2);
    CHECK_NEAR(L->t_crit, t, 1e-12, "t quantile");
    CHECK_NEAR(L->a_ci_ms[1] - L->a_ci_ms[0], 2 * t * L->a_se_ms, 1e-9, "a CI from the same se");
    cJSON *d = rpt_run_chart_data(run, res, 0, err, sizeof err);
    const cJSON *band = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "law"), "band");
    CHECK(cJSON_GetArraySize(band) == RPT_BAND_POINTS + 1, "band points %d", cJSON_GetArraySize(band));
    int checked = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, band) {
        double n = cJSON_GetArrayItem(p, 0)->valuedouble, lo = cJSON_GetArrayItem(p, 1)->valuedouble,
               hi = cJSON_GetArrayItem(p, 2)->valuedouble;
        double half = t * sqrt(L->a_se_ms * L->a_se_ms + n * n * L->b_se_ms * L->b_se_ms + 2 * n * L->cov_ab_ms2);
        CHECK(fabs((hi - lo) - 2 * half) <= 1e-9 * (1 + half), "band width at N=%g: %g vs %g", n, hi - lo, 2 * half);
        CHECK_NEAR((hi + lo) / 2, L->a_ms + L->b_ms * n, 1e-9 * (1 + hi), "band centre");
        double corners = (L->a_ci_ms[1] + L->b_ci_ms[1] * n) - (L->a_ci_ms[0] + L->b_ci_ms[0] * n);
        if (n > 0)
            CHECK(hi - lo < corners, "band at N=%g narrower than the corner band (%g vs %g)", n, hi - lo, corners);
        checked++;
    }
    CHECK(checked > 0, "band checked");
    cJSON_Delete(d);
}

/* Coverage of the true speedup by the 95% interval over fixed-seed repeats,
 * resampling engine steps (the default) and requests. Steps must cover near
 * 95%; requests, sharing every step at C = 16, fall far short (see the
 * comment at the top of fit/compare.c). */
static void check_coverage(void)
{
    static const int lv[] = {16};
    enum { REPS = 30 };
    int hit[2] = {0, 0}, n = 0;
    for (int rep = 0; rep < REPS; rep++) {
        gen_spec g = {.a_ms = A_MS, .b_ms = BA_MS, .jitter = 0.03, .prefill_ms = 30, .tokens = 24, .waves = 4,
                      .think = 8, .levels = lv, .n_levels = 1, .seed = 500 + 2 * (uint64_t)rep};
        fit_run *ra = NULL, *rb = NULL;
        fit_result *fa = NULL, *fb = NULL;
        if (gen_run("cov_a", &g) == 0 && (g.b_ms = BB_MS, g.seed++, gen_run("cov_b", &g) == 0) &&
            analyse("cov_a", &ra, &fa) == 0 && analyse("cov_b", &rb, &fb) == 0) {
            double want = (A_MS + BA_MS * 16) / (A_MS + BB_MS * 16);
            for (int m = 0; m < 2; m++) {
                fit_compare_options o;
                fit_compare_options_default(&o);
                o.n_resamples = 500;
                o.resample_requests = m;
                fit_compare *c = NULL;
                char err[256];
                if (fit_compare_runs(ra, fa, rb, fb, &o, &c, err, sizeof err) == 0 && c->n_levels == 1)
                    hit[m] += c->levels[0].ratio_ci[0] <= want && want <= c->levels[0].ratio_ci[1];
                fit_compare_free(c);
            }
            n++;
        }
        fit_result_free(fa);
        fit_result_free(fb);
        fit_run_free(ra);
        fit_run_free(rb);
    }
    printf("coverage at C=16 over %d repeats: steps %d, requests %d\n", n, hit[0], hit[1]);
    CHECK(n == REPS, "repeats analysed %d", n);
    CHECK(hit[0] >= 25, "step bootstrap covers %d/%d", hit[0], n);
    CHECK(hit[1] <= 18, "request bootstrap covers %d/%d (expected too narrow)", hit[1], n);
}

int main(int argc, char **argv)
{
    check_json_embed();
    gen_spec g = {.a_ms = A_MS, .b_ms = BA_MS, .jitter = 0.03, .prefill_ms = 30, .tokens = 24, .waves = 4,
                  .think = 8, .levels = levels, .n_levels = 5, .seed = 11};
    CHECK(gen_run("cmp_a", &g) == 0, "write run a");
    g.b_ms = BB_MS;
    g.seed = 12;
    CHECK(gen_run("cmp_b", &g) == 0, "write run b");

    fit_run *ra = NULL, *rb = NULL;
    fit_result *fa = NULL, *fb = NULL;
    fit_compare *c = NULL;
    char err[512];
    if (analyse("cmp_a", &ra, &fa) || analyse("cmp_b", &rb, &fb))
        goto out;
    CHECK(fa->law.ok && fabs(fa->law.b_ms - BA_MS) < 0.05 * BA_MS, "law a slope %g", fa->law.b_ms);

    fit_compare_options o;
    fit_compare_options_default(&o);
    CHECK(fit_compare_runs(ra, fa, rb, fb, &o, &c, err, sizeof err) == 0, "compare: %s", err);
    if (!c)
        goto out;
    CHECK(c->n_levels == 5, "common levels %zu", c->n_levels);
    for (size_t i = 0; i < c->n_levels; i++) {
        const fit_compare_level *L = &c->levels[i];
        double want = (A_MS + BA_MS * L->concurrency) / (A_MS + BB_MS * L->concurrency);
        CHECK(L->concurrency == levels[i], "level order");
        CHECK(L->steady, "C=%d steady", L->concurrency);
        CHECK(L->ratio_ci[0] <= want && want <= L->ratio_ci[1], "C=%d: true ratio %.3f outside [%.3f, %.3f] (est %.3f)",
              L->concurrency, want, L->ratio_ci[0], L->ratio_ci[1], L->ratio);
        CHECK_REL(L->ratio, want, 0.03, "ratio estimate");
        /* the interval is informative: narrower than 10% of the ratio */
        CHECK(L->ratio_ci[1] - L->ratio_ci[0] < 0.1 * want && L->ratio_ci[1] > L->ratio_ci[0],
              "C=%d: interval width %.3f", L->concurrency, L->ratio_ci[1] - L->ratio_ci[0]);
        CHECK_REL(L->tok_per_s_a, 1000.0 * L->concurrency / (A_MS + BA_MS * L->concurrency), 0.03, "X_A");
        CHECK(L->n_req_a == (size_t)(4 * L->concurrency), "requests %zu", L->n_req_a);
        /* latency: TTFT = prefill 30 ms + <= 20 µs; TTFA after 8 thinking tokens */
        CHECK_NEAR(L->lat_a.ttft.p50_ms, 30.0, 0.03, "TTFT p50");
        double step_a = A_MS + BA_MS * L->concurrency, step_b = A_MS + BB_MS * L->concurrency;
        CHECK_REL(L->lat_a.ttfa.p50_ms, 30.0 + 8 * step_a, 0.05, "TTFA p50 A");
        CHECK_REL(L->lat_b.ttfa.p50_ms, 30.0 + 8 * step_b, 0.05, "TTFA p50 B");
        CHECK_REL(L->lat_a.itl.p50_ms, step_a, 0.05, "ITL p50 A");
        CHECK_REL(L->lat_b.itl.p50_ms, step_b, 0.05, "ITL p50 B");
    }
    double want_slope = BB_MS / BA_MS;
    CHECK(c->slope_ratio_ci[0] <= want_slope && want_slope <= c->slope_ratio_ci[1],
          "slope ratio %.3f outside [%.3f, %.3f]", want_slope, c->slope_ratio_ci[0], c->slope_ratio_ci[1]);
    CHECK(c->slope_ratio_ci[1] < 0.5, "slope interval excludes no-change: hi %.3f", c->slope_ratio_ci[1]);
    CHECK(strstr(c->verdict, "at C=16 [") && strstr(c->verdict, "ms per request"), "verdict: %s", c->verdict);
    printf("verdict: %s\n", c->verdict);
    {
        /* The pasteable form: "B is 2.52× A at C=16 [2.49, 2.55]; slope 12.0 → 4.00 ms per request" */
        double r = 0, lo = 0, hi = 0, sa = 0, sb = 0;
        int cc = 0;
        int n = sscanf(c->verdict, "B is %lf\u00d7 A at C=%d [%lf, %lf]; slope %lf \u2192 %lf ms per request", &r, &cc,
                       &lo, &hi, &sa, &sb);
        const fit_compare_level *G = &c->levels[c->n_levels - 1];
        CHECK(n == 6, "verdict format (%d fields): %s", n, c->verdict);
        CHECK(cc == 16 && fabs(r - G->ratio) < 0.006 && fabs(lo - G->ratio_ci[0]) < 0.006 &&
                  fabs(hi - G->ratio_ci[1]) < 0.006,
              "verdict numbers are the C=16 ratio and interval: %s", c->verdict);
        CHECK_REL(sa, c->law_a.b_ms, 0.005, "verdict slope A");
        CHECK_REL(sb, c->law_b.b_ms, 0.005, "verdict slope B");
    }

    /* Same seed, same answer. */
    fit_compare *c2 = NULL;
    CHECK(fit_compare_runs(ra, fa, rb, fb, &o, &c2, err, sizeof err) == 0, "compare again");
    if (c2) {
        CHECK(c2->levels[4].ratio_ci[0] == c->levels[4].ratio_ci[0], "deterministic interval");
        fit_compare_free(c2);
    }
    cJSON *j = rpt_compare_to_json(c);
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "levels")) == 5, "json levels");
    CHECK_REL(ll_json_num(cJSON_GetObjectItem(j, "law_a"), "asymptote_tok_per_s", 0), 1000.0 / c->law_a.b_ms, 1e-12,
              "json asymptote A = 1000/b");
    cJSON_Delete(j);
    check_printed_asymptotes(c);
    check_band(ra, fa);
    check_coverage();

    /* No common level: a clear error. */
    static const int other[] = {3};
    gen_spec g3 = g;
    g3.levels = other;
    g3.n_levels = 1;
    gen_run("cmp_c", &g3);
    fit_run *rc3 = NULL;
    fit_result *fc3 = NULL;
    if (analyse("cmp_c", &rc3, &fc3) == 0) {
        fit_compare *c3 = NULL;
        CHECK(fit_compare_runs(ra, fa, rc3, fc3, &o, &c3, err, sizeof err) == LL_EINVAL && strstr(err, "no closed-loop"),
              "no common level: %s", err);
        fit_compare_free(c3);
    }
    fit_result_free(fc3);
    fit_run_free(rc3);

    /* Too few units to resample: one request of 3 tokens a side at C=1.
     * The estimate stays; the interval does not (a bootstrap over one unit
     * repeats it: "[1.06, 1.06]" once passed a gate), so a gate fails. */
    static const int one[] = {1};
    gen_spec gs = g;
    gs.levels = one;
    gs.n_levels = 1;
    gs.waves = 1;
    gs.tokens = 3;
    gs.think = 0;
    gs.b_ms = BA_MS;
    gen_run("cmp_small_a", &gs);
    gs.b_ms = BB_MS;
    gen_run("cmp_small_b", &gs);
    fit_run *rsa = NULL, *rsb = NULL;
    fit_result *fsa = NULL, *fsb = NULL;
    if (analyse("cmp_small_a", &rsa, &fsa) == 0 && analyse("cmp_small_b", &rsb, &fsb) == 0) {
        fit_compare *cs = NULL;
        CHECK(fit_compare_runs(rsa, fsa, rsb, fsb, &o, &cs, err, sizeof err) == 0, "compare small: %s", err);
        if (cs) {
            const fit_compare_level *L = &cs->levels[0];
            CHECK(L->n_units_a < FIT_COMPARE_MIN_UNITS && isfinite(L->ratio) && L->ratio > 1 &&
                      isnan(L->ratio_ci[0]) && isnan(L->ratio_ci[1]),
                  "%zu/%zu units: ratio %.3f, no interval [%g, %g]", L->n_units_a, L->n_units_b, L->ratio,
                  L->ratio_ci[0], L->ratio_ci[1]);
            CHECK(strstr(cs->verdict, "(no interval)"), "verdict says so: %s", cs->verdict);
            fit_compare_free(cs);
        }
        /* resamples: 0 (no intervals) or enough for the tails */
        fit_compare_options few = o;
        few.n_resamples = FIT_COMPARE_MIN_RESAMPLES - 1;
        CHECK(fit_compare_runs(ra, fa, rb, fb, &few, &cs, err, sizeof err) == LL_EINVAL && strstr(err, "resamples"),
              "%d resamples refused: %s", few.n_resamples, err);
    }
    fit_result_free(fsa);
    fit_result_free(fsb);
    fit_run_free(rsa);
    fit_run_free(rsb);

    if (argc > 1) {
        /* The gate. At C=16 the true speedup is 212/84 = 2.52. */
        char cmd[2048];
        const char *bin = argv[1];
        struct { const char *args; int want; } gate[] = {
            {"--expect-speedup 2.0", 0},        /* highest common level: 2.52 > 2.0 */
            {"--expect-speedup 3.0", 3},
            {"--expect-speedup 2.0@16", 0},
            {"--expect-speedup 1.5@1", 3},      /* at C=1: 32/24 = 1.33 */
            {"--expect-speedup 1.2@1", 0},
            {"--expect-speedup 1.2@5", 2},      /* no such level: usage error */
            {"--expect-speedup abc", 2},
            {"--resamples 1 --expect-speedup 2.0", 2}, /* one draw is no interval */
        };
        for (size_t i = 0; i < sizeof gate / sizeof gate[0]; i++) {
            snprintf(cmd, sizeof cmd, "%s compare cmp_a cmp_b %s >gate_%zu.out 2>&1", bin, gate[i].args, i);
            int rc = tu_sh(cmd);
            CHECK(rc == gate[i].want, "'%s' exited %d, want %d", gate[i].args, rc, gate[i].want);
        }
        snprintf(cmd, sizeof cmd, "%s compare cmp_a cmp_b --json > cmp.json", bin);
        CHECK(tu_sh(cmd) == 0, "compare --json");
        char *text = NULL;
        size_t len;
        if (ll_read_file("cmp.json", &text, &len, err, sizeof err) == 0) {
            cJSON *jj = cJSON_ParseWithOpts(text, NULL, 1);
            CHECK(jj && cJSON_GetObjectItem(jj, "slope_ratio"), "json output parses");
            cJSON_Delete(jj);
            free(text);
        }
        snprintf(cmd, sizeof cmd, "%s compare cmp_a cmp_b --json --expect-speedup 3@16 > gate.json 2>/dev/null", bin);
        CHECK(tu_sh(cmd) == 3, "json gate exit");
        if (ll_read_file("gate.json", &text, &len, err, sizeof err) == 0) {
            cJSON *jj = cJSON_ParseWithOpts(text, NULL, 1);
            const cJSON *gj = cJSON_GetObjectItem(jj, "gate");
            CHECK(gj && cJSON_IsFalse(cJSON_GetObjectItem(gj, "met")) && ll_json_num(gj, "concurrency", 0) == 16,
                  "gate in json");
            cJSON_Delete(jj);
            free(text);
        }
        snprintf(cmd, sizeof cmd, "%s compare cmp_a cmp_b > cmp.txt", bin);
        CHECK(tu_sh(cmd) == 0, "compare text");
        if (ll_read_file("cmp.txt", &text, &len, err, sizeof err) == 0) {
            CHECK(strstr(text, "B is 2.5") != NULL, "verdict in text:\n%s", text);
            free(text);
        }
        /* The gate line (stderr) follows the verdict (stdout) through a
         * shared pipe: stdout is flushed before it. */
        snprintf(cmd, sizeof cmd, "%s compare cmp_a cmp_b --expect-speedup 2.0@16 2>&1 | cat > gate_order.out", bin);
        CHECK(tu_sh(cmd) == 0, "compare | cat");
        if (ll_read_file("gate_order.out", &text, &len, err, sizeof err) == 0) {
            const char *v = strstr(text, "B is "), *gl = strstr(text, "gate: expected >= 2");
            CHECK(v && gl && gl > v && strstr(gl, ": met\n"), "gate line after the verdict:\n%s", text);
            free(text);
        }
        snprintf(cmd, sizeof cmd, "%s compare cmp_small_a cmp_small_b --expect-speedup 1.0@1 >gate_small.out 2>&1",
                 bin);
        CHECK(tu_sh(cmd) == 3, "a gate on one unit a side fails (see gate_small.out)");
        CHECK(tu_sh("false") == 1, "sanity");
        snprintf(cmd, sizeof cmd, "%s compare cmp_a /nonexistent >/dev/null 2>&1", bin);
        CHECK(tu_sh(cmd) == 1, "missing run dir -> 1");
    }
out:
    fit_compare_free(c);
    fit_result_free(fa);
    fit_result_free(fb);
    fit_run_free(ra);
    fit_run_free(rb);
    TEST_MAIN_END();
}
