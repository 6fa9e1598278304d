/* test_report_html.c: `loadlaw report` and `loadlaw compare --html` pages,
 * rendered in headless Chromium (Debian's chromium).
 *
 * The page's script records, after Chart.js has drawn, which charts exist,
 * how many points each holds and whether each drew, plus any script error;
 * the dumped DOM must show every expected chart drawn with data and no error.
 * Screenshots stay in the build directory (report.png, compare.png) as
 * artifacts. Also: the page is self-contained (no external script, style or
 * link), tables carry the numbers, big runs are thinned. A run whose step
 * grows with the context (runs_gen.h c_ms_per_ktok): the chosen model's lines
 * at three contexts, residuals around zero, the step against position rising
 * with the closed form's early and late figures, and words that say late
 * tokens are slower; a run without it says they are not. Skips (77) only when
 * chromium is not installed.
 *
 * argv[1] = the loadlaw binary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "runs_gen.h"
#include "testutil.h"
#include "tsupport.h"

static const int levels[] = {1, 2, 4, 8, 16};

static const char *find_chromium(void)
{
    static const char *const c[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (access(c[i], X_OK) == 0)
            return c[i];
    return NULL;
}

/* data-NAME="..." from the dumped DOM, entities decoded; caller frees. */
static char *dom_attr(const char *dom, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "data-%s=\"", name);
    const char *p = strstr(dom, key);
    if (!p)
        return NULL;
    p += strlen(key);
    const char *e = strchr(p, '"');
    if (!e)
        return NULL;
    char *out = malloc((size_t)(e - p) + 1);
    size_t k = 0;
    while (p < e) {
        if (strncmp(p, "&quot;", 6) == 0) {
            out[k++] = '"';
            p += 6;
        } else if (strncmp(p, "&amp;", 5) == 0) {
            out[k++] = '&';
            p += 5;
        } else if (strncmp(p, "&lt;", 4) == 0) {
            out[k++] = '<';
            p += 4;
        } else if (strncmp(p, "&gt;", 4) == 0) {
            out[k++] = '>';
            p += 4;
        } else {
            out[k++] = *p++;
        }
    }
    out[k] = '\0';
    return out;
}

/* Render page in Chromium; check every chart drew data and no script error. */
static void render(const char *chromium, const char *page, const char *png, int want_charts, const char *what)
{
    char cwd[1024], cmd[4096], err[256];
    if (!getcwd(cwd, sizeof cwd))
        return;
    const char *flags = "--headless --disable-gpu --no-sandbox --hide-scrollbars --enable-logging=stderr --v=0 "
                        "--virtual-time-budget=5000 --user-data-dir=chromium-profile";
    snprintf(cmd, sizeof cmd, "timeout 90 %s %s --dump-dom file://%s/%s > %s.dom 2> %s.chromium.log", chromium, flags,
             cwd, page, page, page);
    CHECK(tu_sh(cmd) == 0, "%s: chromium --dump-dom failed (see %s.chromium.log)", what, page);
    snprintf(cmd, sizeof cmd, "%s.dom", page);
    char *dom = NULL;
    size_t len = 0;
    if (ll_read_file(cmd, &dom, &len, err, sizeof err)) {
        CHECK(0, "%s: no DOM: %s", what, err);
        return;
    }
    char *errors = dom_attr(dom, "errors");
    CHECK(errors == NULL, "%s: script errors: %s", what, errors ? errors : "");
    free(errors);
    CHECK(strstr(dom, "<div id=\"ll-errors\"></div>") != NULL, "%s: error box not empty", what);
    char *charts = dom_attr(dom, "charts");
    CHECK(charts != NULL, "%s: page did not record its charts (script did not run?)", what);
    cJSON *j = charts ? cJSON_ParseWithOpts(charts, NULL, 1) : NULL;
    CHECK(!charts || j, "%s: charts state is not JSON: %s", what, charts);
    if (j) {
        int drawn = (int)ll_json_num(j, "drawn", -1), expected = (int)ll_json_num(j, "expected", -1);
        CHECK(expected == want_charts, "%s: %d charts created, want %d", what, expected, want_charts);
        CHECK(drawn == expected, "%s: %d of %d charts drew", what, drawn, expected);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "charts")) {
            CHECK(ll_json_num(c, "points", 0) > 0, "%s: chart %s has no data", what, ll_json_str(c, "id", "?"));
            CHECK(cJSON_IsTrue(cJSON_GetObjectItem(c, "drawn")), "%s: chart %s did not draw", what,
                  ll_json_str(c, "id", "?"));
        }
    }
    cJSON_Delete(j);
    free(charts);
    free(dom);
    snprintf(cmd, sizeof cmd, "timeout 90 %s %s --window-size=1300,2600 --screenshot=%s/%s file://%s/%s 2>/dev/null",
             chromium, flags, cwd, png, cwd, page);
    CHECK(tu_sh(cmd) == 0, "%s: screenshot failed", what);
    struct stat st;
    CHECK(stat(png, &st) == 0 && st.st_size > 20000, "%s: screenshot %s missing or blank", what, png);
}

/* Any "http://" or "https://", any case: a self-contained page holds none, not
 * even in Chart.js's licence banner or the run's target (shown escaped). */
static const char *find_url(const char *page)
{
    for (const char *p = page; *p; p++)
        if ((strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0))
            return p;
    return NULL;
}

static double num_at(const cJSON *arr, int i)
{
    const cJSON *x = cJSON_GetArrayItem(arr, i);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* The context run's page data: the model's lines at three contexts, the
 * residuals around zero, the step against position rising at C=1 with the
 * closed form's figures. Early (positions 1..99 of 400) and late (300..399)
 * steps at C=1: a + b + c*(100 + mean position)/1000. */
static void check_context_data(const char *page, double a, double b, double c)
{
    cJSON *d = tu_page_data(page);
    const cJSON *mv = cJSON_GetObjectItem(d, "model_view");
    CHECK(mv != NULL, "%s: model_view in the page data", page);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(mv, "has_k")), "%s: the chosen model has the context term", page);
    const cJSON *lines = cJSON_GetObjectItem(mv, "lines"), *pts = cJSON_GetObjectItem(mv, "points");
    CHECK(cJSON_GetArraySize(lines) == 3, "%s: the model at three contexts", page);
    double k10 = ll_json_num(cJSON_GetArrayItem(lines, 0), "k_per_req", NAN);
    double k90 = ll_json_num(cJSON_GetArrayItem(lines, 2), "k_per_req", NAN);
    CHECK(k10 > 100 && k10 < 200 && k90 > 400 && k90 < 500, "%s: K/N p10 %.1f, p90 %.1f (100 + 0..400)", page, k10,
          k90);
    double sum = 0, sum_abs = 0;
    int n = cJSON_GetArraySize(pts);
    for (int i = 0; i < n; i++) {
        double r = num_at(cJSON_GetArrayItem(pts, i), 4);
        sum += r;
        sum_abs += fabs(r);
    }
    CHECK(n > 100 && fabs(sum / n) < 0.05 && sum_abs / n < 1.5, "%s: %d residuals, mean %.3f, mean |r| %.3f ms", page,
          n, n ? sum / n : NAN, n ? sum_abs / n : NAN);
    const cJSON *pos = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "levels"), 0), "position");
    const cJSON *steady = cJSON_GetObjectItem(pos, "steady");
    CHECK(cJSON_GetArraySize(steady) == 16, "%s: 16 position bins at C=1", page);
    for (int i = 1; i < cJSON_GetArraySize(steady); i++)
        CHECK(num_at(cJSON_GetArrayItem(steady, i), 1) > num_at(cJSON_GetArrayItem(steady, i - 1), 1),
              "%s: the step rises with position (bin %d)", page, i);
    double early = a + b + c * (100 + 50) / 1000, late = a + b + c * (100 + 349.5) / 1000;
    CHECK_REL(ll_json_num(pos, "early_ms", NAN), early, 0.02, "early tokens' step at C=1");
    CHECK_REL(ll_json_num(pos, "late_ms", NAN), late, 0.02, "late tokens' step at C=1");
    cJSON_Delete(d);
    char *html = tu_slurp(page);
    const char *w = html ? strstr(html, "At C=1 late tokens are ") : NULL;
    double pct = w ? strtod(w + strlen("At C=1 late tokens are "), NULL) : NAN;
    CHECK(w && strncmp(strchr(w + 23, '%'), "% slower than early ones", 24) == 0 &&
              fabs(pct - 100 * (late / early - 1)) < 3,
          "%s: the words say late tokens are %.0f%% slower at C=1 (closed form %.0f%%)", page, pct,
          100 * (late / early - 1));
    /* at C=8 the context is 8 times larger against a + b*8: 37 -> 84.9 ms */
    CHECK(html && strstr(html, "Late tokens are slower than early ones in steady steps, most at C=8 (12"),
          "%s: the section's summary names C=8", page);
    free(html);
}

/* A big run stays a small page: samples thinned to the bound. */
static void big_page(const char *bin)
{
    static const int big_levels[] = {32, 64};
    gen_spec gb = {.a_ms = 20, .b_ms = 2, .jitter = 0.04, .prefill_ms = 30, .tokens = 200, .waves = 6,
                   .levels = big_levels, .n_levels = 2, .seed = 9};
    char cmd[1024];
    CHECK(gen_run("rep_big", &gb) == 0, "write big run");
    snprintf(cmd, sizeof cmd, "%s report rep_big > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "big report");
    struct stat st;
    CHECK(stat("rep_big/report.html", &st) == 0 && st.st_size < 1500000, "big page %lld bytes",
          (long long)st.st_size);
}

/* A run whose step grows with the context, 5 + 1*C + 20*K/1k ms, 400 tokens,
 * with the server's running gauge scraped three times inside C=1's first
 * wave saying 3: its page (check_context_data) and the server's table
 * beside the client's, flagged N != D; rep_a, without server figures, has
 * no such table. */
static void context_page(const char *bin)
{
    static const int ctx_levels[] = {1, 2, 4, 8};
    gen_spec gc = {.a_ms = 5, .b_ms = 1, .c_ms_per_ktok = 20, .jitter = 0.02, .prefill_ms = 30, .tokens = 400,
                   .waves = 3, .levels = ctx_levels, .n_levels = 4, .seed = 11};
    char cmd[1024];
    CHECK(gen_run("rep_ctx", &gc) == 0, "write context run");
    FILE *f = fopen("rep_ctx/records.jsonl", "a");
    for (int k = 1; f && k <= 3; k++)
        fprintf(f, "{\"type\":\"metric\",\"t_ns\":%d000000000,\"src\":\"x\",\"name\":\"loadlaw_running_requests\","
                   "\"labels\":\"\",\"value\":3}\n",
                k);
    if (f)
        fclose(f);
    snprintf(cmd, sizeof cmd, "%s report rep_ctx > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "context report");
    check_context_data("rep_ctx/report.html", gc.a_ms, gc.b_ms, gc.c_ms_per_ktok);
    char *page = tu_slurp("rep_ctx/report.html");
    CHECK(page && strstr(page, "<h2>The server&#39;s own figures</h2>") &&
              strstr(page, "<tr><td>C=1</td><td>3.00 (N &ne; D)</td>"),
          "the server's table: N = 3 at C = 1, flagged");
    free(page);
    page = tu_slurp("rep_a/report.html");
    CHECK(page && !strstr(page, "The server&#39;s own figures"), "no server table without server figures");
    free(page);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_report_html LOADLAW\n");
        return 2;
    }
    const char *bin = argv[1];
    char cmd[4096];
    gen_spec g = {.a_ms = 20, .b_ms = 12, .jitter = 0.04, .prefill_ms = 30, .tokens = 40, .waves = 3, .think = 12,
                  .levels = levels, .n_levels = 5, .seed = 5, .with_steps = 1};
    CHECK(gen_run("rep_a", &g) == 0, "write run a");
    /* two failures at C=4 (level 2): a timeout and a 503 */
    FILE *f = fopen("rep_a/records.jsonl", "a");
    if (f) {
        fprintf(f, "{\"type\":\"request\",\"level\":2,\"rank\":0,\"id\":9001,\"warmup\":false,\"status\":\"error\","
                   "\"error_class\":\"timeout\",\"http_status\":0,\"error\":\"timed out\",\"intended_ns\":null,"
                   "\"send_ns\":%lld,\"header_ns\":null,\"first_token_ns\":null,\"first_think_ns\":null,"
                   "\"first_answer_ns\":null,\"end_ns\":%lld,\"prompt_tok\":100,\"think_tok\":0,\"answer_tok\":0,"
                   "\"usage\":null,\"chunks\":[]}\n",
                10000000000LL, 10100000000LL);
        fclose(f);
    }
    g.b_ms = 4;
    g.seed = 6;
    g.with_steps = 0;
    CHECK(gen_run("rep_b", &g) == 0, "write run b");

    snprintf(cmd, sizeof cmd, "%s report rep_a > report.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "loadlaw report exit");
    char *out = tu_slurp("report.out");
    CHECK(out && strstr(out, "report: rep_a/report.html"), "report prints its path: %s", out ? out : "");
    free(out);
    char *page = tu_slurp("rep_a/report.html");
    CHECK(page != NULL, "report.html written");
    if (page) {
        CHECK(strstr(page, "Chart.js v") != NULL, "Chart.js inlined");
        CHECK(strstr(page, "<script src") == NULL && strstr(page, "<link") == NULL && strstr(page, "@import") == NULL,
              "nothing loaded from elsewhere");
        const char *url = find_url(page);
        CHECK(url == NULL, "no http(s) URL in the page: %.60s", url ? url : "");
        CHECK(strstr(page, "http&#58;//127.0.0.1:1") != NULL, "the run's target still shown");
        CHECK(strstr(page, "timeout 1") != NULL, "failures by class in the level table");
        CHECK(strstr(page, "step(N) = ") != NULL && strstr(page, "engine&#39;s own step log") != NULL,
              "law table with the engine's fit");
        CHECK(strstr(page, "backend=synthetic,law=20+12n") != NULL, "run configuration");
        CHECK(strstr(page, "<td class=l>host</td><td class=l>testbox</td>") != NULL &&
                  strstr(page, "<td class=l>written by</td><td class=l>0.1.0</td>") != NULL &&
                  strstr(page, "loadlaw " LOADLAW_VERSION) != NULL,
              "run configuration: host and tool versions");
        CHECK(strstr(page, "<b>Model check:</b> a straight line fits") != NULL, "model check in the law section");
        CHECK(strstr(page, "a in [") != NULL && strstr(page, "(95%)") != NULL, "law intervals");
        CHECK(strstr(page, "At C=16 early and late tokens take the same steady step within 5%") &&
                  strstr(page, "In steady steps late tokens are nowhere more than 5% slower"),
              "a run without a context term: early and late tokens alike");
        CHECK(strstr(page, "The line is the chosen model (linear)"), "the model view names the line");
        CHECK(strstr(page, "TTFT p50 / p99 ms") && strstr(page, "TTFA p50 / p99 ms") && strstr(page, "ITL p50 / p99 ms") &&
                  strstr(page, "ramp s") && strstr(page, "steady tok/s") && strstr(page, "whole-level tok/s"),
              "per-level table: percentiles, ramp, throughputs");
        free(page);
    }
    snprintf(cmd, sizeof cmd, "%s compare rep_a rep_b --html compare.html > compare.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "loadlaw compare --html exit");
    page = tu_slurp("compare.html");
    CHECK(page != NULL, "compare.html written");
    if (page) {
        const char *url = find_url(page);
        CHECK(url == NULL, "no http(s) URL in the comparison page: %.60s", url ? url : "");
        free(page);
    }
    snprintf(cmd, sizeof cmd, "%s report /nonexistent/run > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 1, "missing run dir: exit 1");
    snprintf(cmd, sizeof cmd, "%s report > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 2, "no run dir: exit 2");
    snprintf(cmd, sizeof cmd, "LOADLAW_CHARTJS=/nonexistent.js %s report rep_a > nochart.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 1, "missing Chart.js: exit 1");
    out = tu_slurp("nochart.out");
    CHECK(out && strstr(out, "libjs-chart.js"), "missing Chart.js says how to fix it: %s", out ? out : "");
    free(out);

    big_page(bin);

    context_page(bin);

    const char *chromium = find_chromium();
    if (!chromium) {
        fprintf(stderr, "chromium not installed: skipping the rendering checks\n");
        return tu_fail ? 1 : TEST_SKIP;
    }
    /* run page: throughput + step + model + 2 residuals + Pareto, and 4 per level
     * (timeline, rate, distributions, step against position) */
    render(chromium, "rep_a/report.html", "report.png", 6 + 4 * 5, "report");
    render(chromium, "compare.html", "compare.png", 3, "compare");
    render(chromium, "rep_big/report.html", "report_big.png", 6 + 4 * 2, "big report");
    render(chromium, "rep_ctx/report.html", "report_ctx.png", 6 + 4 * 4, "context report");
    /* the Pareto chart with objectives (line, goodput flags), and with no law (points only) */
    snprintf(cmd, sizeof cmd,
             "%s report rep_a --itl-slo 100ms --ttft-slo 40ms -o rep_a/slo.html > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "report with objectives");
    render(chromium, "rep_a/slo.html", "report_slo.png", 6 + 4 * 5, "report with objectives");
    static const int one_level[] = {4};
    gen_spec g1 = g;
    g1.levels = one_level;
    g1.n_levels = 1;
    CHECK(gen_run("rep_one", &g1) == 0, "write one-level run");
    snprintf(cmd, sizeof cmd, "%s report rep_one > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "one-level report");
    page = tu_slurp("rep_one/report.html");
    CHECK(page && strstr(page, "<b>No law curve</b>"), "one level: the page says why there is no curve");
    CHECK(page && strstr(page, "No model: no law was fitted (one concurrency swept"),
          "one level: the model view says why it has no lines");
    free(page);
    /* one level, no law: no residuals to draw (the page says so instead) */
    render(chromium, "rep_one/report.html", "report_one.png", 4 + 4, "one-level report");
    TEST_MAIN_END();
}
