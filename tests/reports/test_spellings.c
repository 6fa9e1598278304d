/* test_spellings.c: each document's spelling of a law and of a latency
 * distribution (reports/json_shapes.c) is the row docs/records.md "JSON
 * spellings" gives it, key for key and in order, and every row of a spelling
 * names a field the writer knows. A key added to, dropped from or renamed in
 * a spelling without the table, or the reverse, fails here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_internal.h"
#include "testutil.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

/* "| `k1` `k2` ... `kn` " followed by "|" or "(": the keys of o, in order,
 * as a table cell of the page. */
static void check_row(const char *doc, const cJSON *o, const char *what)
{
    char row[1024] = "| ";
    size_t at = 2;
    for (const cJSON *c = o ? o->child : NULL; c && at < sizeof row; c = c->next)
        at += (size_t)snprintf(row + at, sizeof row - at, "`%s` ", c->string);
    CHECK(o && o->child, "%s: nothing written", what);
    const char *hit = strstr(doc, row);
    size_t len = strlen(row);
    CHECK(hit && (hit[len] == '|' || hit[len] == '('), "%s: docs/records.md has no row %s", what, row);
}

static void check_law(const char *doc, const rpt_law_key *spelling, const char *what)
{
    fit_law L = {.ok = 1, .method = "trimmed-wls", .a_ms = 5.2, .b_ms = 3, .a_ci_ms = {5.1, 5.3},
                 .b_ci_ms = {2.9, 3.1}, .t_crit = 1.97, .r2 = 0.99, .n_points = 40, .n_samples = 400,
                 .n_distinct = 4};
    cJSON *parent = cJSON_CreateObject();
    /* with the model's name and an asymptote, so no optional key is left out */
    int rc = parent ? rpt_json_law(parent, "law", &L, "linear", 333.3, spelling) : LL_ENOMEM;
    CHECK(rc == 0, "%s: rc %d (a row names a field the writer does not know?)", what, rc);
    check_row(doc, cJSON_GetObjectItemCaseSensitive(parent, "law"), what);
    cJSON_Delete(parent);
}

static void check_dist(const char *doc, const rpt_dist_key *spelling, const char *what)
{
    fit_dist d = {.n = 10, .mean_ms = 2, .p50_ms = 1.9, .p90_ms = 3, .p99_ms = 4, .max_ms = 5};
    cJSON *parent = cJSON_CreateObject();
    int rc = parent ? rpt_json_dist(parent, "d", &d, spelling) : LL_ENOMEM;
    CHECK(rc == 0, "%s: rc %d", what, rc);
    check_row(doc, cJSON_GetObjectItemCaseSensitive(parent, "d"), what);
    cJSON_Delete(parent);
}

int main(void)
{
    char *doc = read_all(LOADLAW_SOURCE_DIR "/docs/records.md");
    CHECK(doc != NULL, "cannot read docs/records.md");
    if (doc) {
        check_law(doc, rpt_law_in_run, "law, fit --json and summary.json");
        check_law(doc, rpt_law_in_compare, "law, compare --json");
        check_law(doc, rpt_law_in_plan, "law, plan --json");
        check_law(doc, rpt_law_in_page, "law, the report's data");
        check_dist(doc, rpt_dist_in_run, "distribution, the run's files");
        check_dist(doc, rpt_dist_in_compare, "distribution, compare --json");
    }
    free(doc);
    TEST_MAIN_END();
}
