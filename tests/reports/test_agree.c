/* test_agree.c: one run, one set of numbers. A real sweep
 * of the bundled synthetic engine, then every output that shows a level's
 * figures must agree exactly: the sweep's printed tables (at the decimals
 * they print), RUN_DIR/summary.json, `loadlaw fit --json` and the data
 * embedded in RUN_DIR/report.html (levels[i].figures). The JSON values are
 * compared as doubles for equality, not within a tolerance: they are one
 * fit's result written three times.
 *
 * argv[1] = the loadlaw binary. Real sockets, real time: about 2 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define RUN "agree_run"

static const char *const dists[] = {"ttft_ms", "ttfa_ms", "tpot_ms", "itl_ms", "e2e_ms"};
static const char *const dist_keys[] = {"n", "p50", "p90", "p99", "mean"};
static const char *const scalars[] = {"sent", "ok", "failed", "duration_s", "ramp_s", "think_tok", "answer_tok",
                                      "usage_completion_tok", "think_tok_per_s", "answer_tok_per_s",
                                      "output_tok_per_s", "req_per_s", "steady_tok_per_s", "server_n",
                                      "server_waiting", "server_step_ms", "server_scrapes", "gpu_power_w",
                                      "gpu_power_limit_w", "gpu_power_frac", "gpu_sm_active", "gpu_tensor_active",
                                      "gpu_dram_active", "gpu_energy_j", "gpu_j_per_tok", "gpu_scrapes",
                                      "server_waiting_growth"};
static const char *const strings[] = {"diagnosis", "diagnosis_why"};

/* The same value in two places: both numbers and equal, or both null. */
static int same(const cJSON *x, const cJSON *y)
{
    if (cJSON_IsNull(x) && cJSON_IsNull(y))
        return 1;
    return cJSON_IsNumber(x) && cJSON_IsNumber(y) && x->valuedouble == y->valuedouble;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* Every figure of level i in `other` equals summary.json's. */
static void agree_json(const char *what, const cJSON *sum, const cJSON *other, size_t i)
{
    for (size_t d = 0; d < sizeof dists / sizeof dists[0]; d++)
        for (size_t k = 0; k < sizeof dist_keys / sizeof dist_keys[0]; k++) {
            const cJSON *x = get(get(sum, dists[d]), dist_keys[k]), *y = get(get(other, dists[d]), dist_keys[k]);
            CHECK(same(x, y), "level %zu %s.%s: summary.json %.17g, %s %.17g", i, dists[d], dist_keys[k],
                  x ? x->valuedouble : NAN, what, y ? y->valuedouble : NAN);
        }
    for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
        const cJSON *x = get(sum, scalars[k]), *y = get(other, scalars[k]);
        CHECK(same(x, y), "level %zu %s: summary.json %.17g, %s %.17g", i, scalars[k], x ? x->valuedouble : NAN,
              what, y ? y->valuedouble : NAN);
    }
    for (size_t k = 0; k < sizeof strings / sizeof strings[0]; k++) {
        const cJSON *x = get(sum, strings[k]), *y = get(other, strings[k]);
        CHECK(cJSON_IsString(x) && cJSON_IsString(y) && !strcmp(x->valuestring, y->valuestring),
              "level %zu %s: summary.json '%s', %s '%s'", i, strings[k], cJSON_IsString(x) ? x->valuestring : "?",
              what, cJSON_IsString(y) ? y->valuestring : "?");
    }
}

/* v as the table prints it: "%.*f", or "-" for null. */
static void fmt(char *out, size_t n, const cJSON *v, int decimals)
{
    if (cJSON_IsNumber(v))
        snprintf(out, n, "%.*f", decimals, v->valuedouble);
    else
        snprintf(out, n, "-");
}

/* cJSON prints a double with 15 significant digits when that reads back
 * within DBL_EPSILON of it, so a file may hold 4.695 for 4.6949999999999994,
 * which the table (printing the double itself) rounds to 4.69. The table
 * agrees when it matches the value or a neighbour one ulp away. */
static void cell_is(const char *cell, const cJSON *v, int decimals, const char *what, size_t level)
{
    char want[64], lo[64], hi[64];
    fmt(want, sizeof want, v, decimals);
    snprintf(lo, sizeof lo, "%s", want);
    snprintf(hi, sizeof hi, "%s", want);
    if (cJSON_IsNumber(v)) {
        snprintf(lo, sizeof lo, "%.*f", decimals, nextafter(v->valuedouble, -INFINITY));
        snprintf(hi, sizeof hi, "%.*f", decimals, nextafter(v->valuedouble, INFINITY));
    }
    CHECK(cell && (!strcmp(cell, want) || !strcmp(cell, lo) || !strcmp(cell, hi)),
          "level %zu %s: table '%s', summary.json rounded '%s'", level, what, cell ? cell : "(missing)", want);
}

/* Split a table line into at most max whitespace-separated cells. */
static size_t cells(char *line, char **out, size_t max)
{
    size_t n = 0;
    for (char *t = strtok(line, " \t\n"); t && n < max; t = strtok(NULL, " \t\n"))
        out[n++] = t;
    return n;
}

/* The printed tables: the counts row of each level, then its latency rows
 * (p50, p90, p99, mean at 2 decimals, n). */
static void agree_table(const char *out_path, const cJSON *levels)
{
    char *text = tu_slurp(out_path), *save = NULL;
    CHECK(text != NULL, "the sweep's stdout");
    if (!text)
        return;
    int in_counts = 0, in_lat = 0;
    size_t lat_level = 0, n_count_rows = 0, n_lat_rows = 0;
    static const char *const names[] = {"TTFT", "TTFA", "TPOT", "ITL", "E2E"};
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char buf[512], *c[16];
        snprintf(buf, sizeof buf, "%s", line);
        size_t n = cells(buf, c, 16);
        if (n > 3 && !strcmp(c[0], "level") && !strcmp(c[2], "ok")) {
            in_counts = 1;
            continue;
        }
        if (n > 3 && !strcmp(c[0], "level") && !strcmp(c[2], "latency")) {
            in_counts = 0;
            in_lat = 1;
            continue;
        }
        if (in_counts && n >= 11) {
            const cJSON *L = cJSON_GetArrayItem(levels, atoi(c[0]));
            size_t i = (size_t)atoi(c[0]);
            cell_is(c[2], get(L, "ok"), 0, "ok", i);
            cell_is(c[3], get(L, "failed"), 0, "failed", i);
            cell_is(c[4], get(L, "output_tok_per_s"), 1, "out_tok/s", i);
            cell_is(c[5], get(L, "req_per_s"), 2, "req/s", i);
            cell_is(c[6], get(L, "think_tok"), 0, "think_tok", i);
            cell_is(c[7], get(L, "answer_tok"), 0, "answer_tok", i);
            cell_is(c[8], get(L, "think_tok_per_s"), 1, "think/s", i);
            cell_is(c[9], get(L, "answer_tok_per_s"), 1, "answer/s", i);
            cell_is(c[10], get(L, "ramp_s"), 3, "ramp_s", i);
            n_count_rows++;
        } else if (in_lat && n == 2) {
            lat_level = (size_t)atoi(c[0]);
        } else if (in_lat && n == 6) {
            const cJSON *L = cJSON_GetArrayItem(levels, (int)lat_level);
            for (size_t d = 0; d < 5; d++) {
                if (strcmp(c[0], names[d]))
                    continue;
                const cJSON *D = get(L, dists[d]);
                char what[64];
                for (size_t k = 0; k < 4; k++) {
                    snprintf(what, sizeof what, "%s %s", c[0], dist_keys[k + 1]);
                    cell_is(c[k + 1], get(D, dist_keys[k + 1]), 2, what, lat_level);
                }
                snprintf(what, sizeof what, "%s n", c[0]);
                cell_is(c[5], get(D, "n"), 0, what, lat_level);
                n_lat_rows++;
            }
        }
    }
    size_t nl = (size_t)cJSON_GetArraySize(levels);
    CHECK(n_count_rows == nl && n_lat_rows == 5 * nl, "table rows: %zu counts, %zu latencies for %zu levels",
          n_count_rows, n_lat_rows, nl);
    free(text);
}

/* `loadlaw fit`'s gpu / diagnosis table (fit/gpu.c "GPU figures and diagnosis"):
 * each level's row against summary.json, at the decimals it prints. */
static void agree_gpu_table(const char *out_path, const cJSON *levels)
{
    char *text = tu_slurp(out_path), *save = NULL;
    int in = 0;
    size_t rows = 0;
    CHECK(text != NULL, "loadlaw fit's stdout");
    for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
        char buf[1024], *c[24];
        snprintf(buf, sizeof buf, "%s", line);
        size_t n = cells(buf, c, 24);
        if (n > 10 && !strcmp(c[0], "level") && !strcmp(c[2], "power")) {
            in = 1;
            continue;
        }
        if (!in || n < 11 || !strcmp(c[0], "-"))
            continue;
        if (!strcmp(c[0], "left")) /* the notes follow the table */
            break;
        size_t i = (size_t)atoi(c[0]);
        const cJSON *L = cJSON_GetArrayItem(levels, atoi(c[0]));
        cell_is(c[2], get(L, "gpu_power_w"), 1, "power W", i);
        cell_is(c[3], get(L, "gpu_power_limit_w"), 1, "limit W", i);
        cell_is(c[4], get(L, "gpu_power_frac"), 2, "of cap", i);
        cell_is(c[5], get(L, "gpu_sm_active"), 2, "SM", i);
        cell_is(c[6], get(L, "gpu_tensor_active"), 2, "tensor", i);
        cell_is(c[7], get(L, "gpu_dram_active"), 2, "DRAM", i);
        cell_is(c[8], get(L, "gpu_j_per_tok"), 4, "J/token", i);
        cell_is(c[9], get(L, "server_waiting_growth"), 2, "wait +", i);
        const cJSON *d = get(L, "diagnosis");
        CHECK(cJSON_IsString(d) && !strcmp(c[10], d->valuestring), "level %zu diagnosis: table '%s'", i, c[10]);
        rows++;
    }
    CHECK(rows == (size_t)cJSON_GetArraySize(levels), "gpu table rows: %zu for %d levels", rows,
          cJSON_GetArraySize(levels));
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_agree LOADLAW\n");
        return 2;
    }
    const char *bin = argv[1];
    char cmd[4096];
    /* The gpu / diagnosis table is printed when a level has a server scrape
     * inside its steady windows; the levels last ~0.3-0.7 s, so at the
     * default 0.5 s a busy host (short windows, a late scrape) left both
     * without one now and then: scrape every 50 ms. */
    snprintf(cmd, sizeof cmd,
             "rm -rf " RUN " && %s sweep -c 1,4 -n 8 --max-tokens 32 --think-tokens 8 "
             "--engine backend=synthetic,law=2+0.5n --metrics-interval 0.05 -q -o " RUN
             " > agree_sweep.out 2> agree_sweep.err && "
             "%s fit " RUN " --json > agree_fit.json && %s fit " RUN " > agree_fit.txt",
             bin, bin, bin);
    CHECK(tu_sh(cmd) == 0, "sweep and fit (see agree_sweep.err)");
    cJSON *sum = tu_json_file(RUN "/summary.json"), *fit = tu_json_file("agree_fit.json");
    cJSON *rep = tu_page_data(RUN "/report.html");
    CHECK(sum && fit && rep, "summary.json %s, fit --json %s, report data %s", sum ? "read" : "missing",
          fit ? "read" : "missing", rep ? "read" : "missing");
    const cJSON *sl = get(sum, "levels"), *fl = get(fit, "levels"), *rl = get(rep, "levels");
    int n = cJSON_GetArraySize(sl);
    CHECK(n == 2 && cJSON_GetArraySize(fl) == n && cJSON_GetArraySize(rl) == n, "two levels everywhere (%d, %d, %d)",
          n, cJSON_GetArraySize(fl), cJSON_GetArraySize(rl));
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(sl, i);
        /* A figure that is missing everywhere would agree: insist on data. */
        CHECK(cJSON_IsNumber(get(get(s, "ttft_ms"), "p50")) && cJSON_IsNumber(get(get(s, "ttfa_ms"), "p50")) &&
                  cJSON_IsNumber(get(get(s, "itl_ms"), "p99")) && cJSON_IsNumber(get(s, "ramp_s")) &&
                  get(s, "ok") && get(s, "ok")->valuedouble == 8,
              "level %d has its figures in summary.json", i);
        agree_json("fit --json", s, cJSON_GetArrayItem(fl, i), (size_t)i);
        agree_json("report data", s, get(cJSON_GetArrayItem(rl, i), "figures"), (size_t)i);
    }
    if (sl) {
        agree_table("agree_sweep.out", sl);
        agree_gpu_table("agree_fit.txt", sl);
    }
    cJSON_Delete(sum);
    cJSON_Delete(fit);
    cJSON_Delete(rep);
    TEST_MAIN_END();
}
