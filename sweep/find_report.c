/* find_report.c: the answer of `sweep --find` (find.c's search): the
 * ending block on stdout and the "find" object added to summary.json
 * (docs/records.md), and the exit code the outcome makes. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "common.h"
#include "find_internal.h"

const char *const find_end_names[] = {"", "found", "within noise", "fails at C=1", "budget of levels",
                                      "budget of time", "meets at the largest C searched"};

/* ---- the answer ----------------------------------------------------------------- */

/* A term's figure as the ending block prints it. */
static void fmt_fig(const scn_obj_term *t, double v, char *out, size_t n)
{
    if (!isfinite(v))
        snprintf(out, n, "%s not measured", t->name);
    else if (t->metric <= SCN_OBJ_E2E)
        snprintf(out, n, "%s %.1f ms", t->name, v);
    else if (t->metric == SCN_OBJ_USER_TPS)
        snprintf(out, n, "%s %.1f tok/s", t->name, v);
    else
        snprintf(out, n, "%s %.1f%%", t->name, 100 * v);
}

/* Every term's figure at m ("itl_p99 38.4 ms, ttft_p99 120.0 ms"); only
 * the failing ones when fails_only. */
static void fmt_meas(const sweep_find *f, const find_meas *m, int fails_only, char *out, size_t n)
{
    size_t l = 0;
    out[0] = '\0';
    for (size_t i = 0; i < f->obj.n && l < n; i++) {
        char one[96];
        if (fails_only && find_term_meets(&f->obj.t[i], m->fig[i]))
            continue;
        fmt_fig(&f->obj.t[i], m->fig[i], one, sizeof one);
        l += (size_t)snprintf(out + l, n - l, "%s%s", l ? ", " : "", one);
    }
    if (!out[0])
        snprintf(out, n, "%.0f%% of its requests failed", 100 * m->failed_share);
}

/* "1,2,4 (ladder), 11,12 (probe), 11 (sustain), 12 (re-measure)". */
static void fmt_levels(const sweep_find *f, char *out, size_t n)
{
    size_t l = 0;
    out[0] = '\0';
    for (size_t i = 0; i < f->n_m && l < n; i++) {
        int first = i == 0 || strcmp(f->m[i - 1].role, f->m[i].role) != 0;
        int last = i + 1 == f->n_m || strcmp(f->m[i + 1].role, f->m[i].role) != 0;
        l += (size_t)snprintf(out + l, n - l, "%s%d%s%s%s", first && i ? ", " : first ? "" : ",", f->m[i].c,
                              last ? " (" : "", last ? f->m[i].role : "", last ? ")" : "");
    }
}

/* The outcome's first words: the answer, or why there is none. */
static void fmt_outcome(const sweep_find *f, int lo, int hi, char *out, size_t n)
{
    char a[256] = "", b[256] = "";
    const find_meas *mlo = lo ? find_latest(f, lo) : NULL, *mhi = hi != INT_MAX ? find_latest(f, hi) : NULL;
    if (mlo)
        fmt_meas(f, mlo, 0, a, sizeof a);
    if (mhi)
        fmt_meas(f, mhi, 1, b, sizeof b);
    switch (f->end) {
    case END_FOUND:
        snprintf(out, n, "C = %d (measured %s; C = %d: %s, fails)", lo, a, hi, b);
        break;
    case END_NOISE:
        snprintf(out, n, "C = %d, the boundary within noise: results at one C disagreed %d times (C = %d: %s; "
                 "C = %d: %s)", lo, f->flips, lo, a, hi, b);
        break;
    case END_FAILS_AT_1: snprintf(out, n, "no C meets it (C = 1: %s)", b); break;
    case END_CAP: snprintf(out, n, "C >= %d (measured %s), the largest C searched", lo, a); break;
    default:
        snprintf(out, n, "not pinned, %s: C = %d meets%s%s%s%s", f->phase == PH_DONE ? find_end_names[f->end] : "interrupted",
                 lo, mlo ? " (" : "", a, mlo ? ")" : "", hi != INT_MAX ? "" : ", no C measured failed");
        if (mhi) {
            size_t l = strlen(out);
            snprintf(out + l, n - l, ", C = %d fails (%s)", hi, b);
        }
    }
}

/* The ending block on stdout. */
static void print_answer(const sweep_find *f, int lo, int hi)
{
    char what[1024], levels[1024], pred[96] = "";
    fmt_outcome(f, lo, hi, what, sizeof what);
    fmt_levels(f, levels, sizeof levels);
    if (f->pred_last >= 0 && f->pred_ladder >= 0 && f->pred_ladder != f->pred_last)
        snprintf(pred, sizeof pred, "; the model predicted %d (after the ladder: %d)", f->pred_last, f->pred_ladder);
    else if (f->pred_last >= 0)
        snprintf(pred, sizeof pred, "; the model predicted %d", f->pred_last);
    printf("\nfind %s: %s%s; %zu level%s in %.1f s: %s\n", f->scn->find_objective, what, pred, f->n_m,
           f->n_m == 1 ? "" : "s", f->elapsed_s, levels);
    printf("  probes carried %d requests (%s)\n", f->n_probe_req, f->why_req);
}

static cJSON *json_c(int c) { return c > 0 && c != INT_MAX ? cJSON_CreateNumber(c) : cJSON_CreateNull(); }

static cJSON *json_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* One measured level: its C, role, whether it met, every term's figure. */
static cJSON *json_meas(const sweep_find *f, const find_meas *m)
{
    cJSON *o = cJSON_CreateObject(), *fig = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "level", m->level);
    cJSON_AddNumberToObject(o, "concurrency", m->c);
    cJSON_AddStringToObject(o, "role", m->role);
    cJSON_AddBoolToObject(o, "meets", m->meets);
    for (size_t i = 0; i < f->obj.n; i++)
        cJSON_AddItemToObject(fig, f->obj.t[i].name, json_num(m->fig[i]));
    cJSON_AddItemToObject(o, "figures", fig);
    cJSON_AddItemToObject(o, "failed_share", json_num(m->failed_share));
    return o;
}

/* summary.json's "find" (docs/records.md). */
static cJSON *json_find(const sweep_find *f, int lo, int hi)
{
    cJSON *o = cJSON_CreateObject(), *lv = cJSON_CreateArray();
    int found = f->end == END_FOUND || f->end == END_NOISE;
    cJSON_AddStringToObject(o, "objective", f->scn->find_objective);
    cJSON_AddStringToObject(o, "outcome", f->phase == PH_DONE ? find_end_names[f->end] : "interrupted");
    cJSON_AddItemToObject(o, "answer_c", json_c(found ? lo : 0));
    cJSON_AddItemToObject(o, "largest_c_met", json_c(lo));
    cJSON_AddItemToObject(o, "smallest_c_failed", json_c(hi));
    cJSON_AddBoolToObject(o, "within_noise", f->end == END_NOISE);
    cJSON_AddItemToObject(o, "predicted_c", f->pred_last >= 0 ? cJSON_CreateNumber(f->pred_last) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "predicted_c_after_ladder",
                          f->pred_ladder >= 0 ? cJSON_CreateNumber(f->pred_ladder) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "n_levels", (double)f->n_m);
    cJSON_AddNumberToObject(o, "elapsed_s", f->elapsed_s);
    cJSON_AddNumberToObject(o, "probe_requests", f->n_probe_req);
    cJSON_AddStringToObject(o, "probe_requests_why", f->why_req);
    cJSON_AddNumberToObject(o, "budget_levels", f->scn->find_budget_levels);
    cJSON_AddItemToObject(o, "budget_s", f->scn->find_budget_s > 0 ? cJSON_CreateNumber(f->scn->find_budget_s)
                                                                   : cJSON_CreateNull());
    for (size_t i = 0; i < f->n_m; i++)
        cJSON_AddItemToArray(lv, json_meas(f, &f->m[i]));
    cJSON_AddItemToObject(o, "levels", lv);
    return o;
}

/* RUN_DIR/summary.json (fit's, written just before) with "find" added. */
static int add_to_summary(const sweep_find *f, int lo, int hi)
{
    char path[4200], err[512] = "", *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/summary.json", f->run_dir);
    if (ll_read_file(path, &text, &len, err, sizeof err))
        return fprintf(stderr, "loadlaw sweep: find: %s\n", err), SWEEP_FAIL;
    cJSON *doc = cJSON_ParseWithLength(text, len), *fo = doc ? json_find(f, lo, hi) : NULL;
    free(text);
    char *out = NULL;
    if (fo && cJSON_IsObject(doc)) {
        cJSON_AddItemToObject(doc, "find", fo);
        out = cJSON_Print(doc);
    } else {
        cJSON_Delete(fo);
    }
    cJSON_Delete(doc);
    FILE *fp = out ? fopen(path, "w") : NULL;
    int bad = !fp || fputs(out, fp) < 0 || fputc('\n', fp) < 0;
    if (fp && fclose(fp))
        bad = 1;
    free(out);
    if (bad)
        fprintf(stderr, "loadlaw sweep: find: %s: the find object was not written\n", path);
    return bad ? SWEEP_FAIL : SWEEP_OK;
}

int sweep_find_report(sweep_find *f, int ret)
{
    int lo, hi;
    if (!f->n_m)
        return ret;
    if (f->phase != PH_DONE)
        f->elapsed_s = (double)(ll_now_ns() - f->t0_ns) / 1e9;
    find_bounds(f, &lo, &hi);
    print_answer(f, lo, hi);
    fflush(stdout);
    int wrc = add_to_summary(f, lo, hi);
    if (ret != SWEEP_OK)
        return ret; /* interrupted or failed: the sweep's own code */
    if (wrc != SWEEP_OK)
        return wrc;
    return f->end == END_FOUND || f->end == END_NOISE ? SWEEP_OK
         : f->end == END_FAILS_AT_1 ? SWEEP_FIND_NONE : SWEEP_FIND_UNPINNED;
}
