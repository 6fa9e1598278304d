/* find_report.c: the answer of `sweep --find` (find.c's search): the
 * ending block on stdout and the "find" object added to summary.json
 * (docs/records.md), and the exit code the outcome makes. */
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

/* Where x is on the search's axis: "C = 11", or "4.4/s" (the rate
 * search's opening level: "C = 1"). */
static void fmt_x(const sweep_find *f, double x, char *out, size_t n)
{
    if (f->by_rate && x > 0)
        snprintf(out, n, "%.4g/s", x);
    else
        snprintf(out, n, "C = %d", f->by_rate ? 1 : (int)x);
}

/* "1,2,4 (ladder), 11,12 (probe), 11 (sustain), 12 (re-measure)"; over
 * rates "C=1, 0.88,1.76,3.52 (ladder), ... req/s". */
static void fmt_levels(const sweep_find *f, char *out, size_t n)
{
    size_t l = 0;
    out[0] = '\0';
    for (size_t i = 0; i < f->n_m && l < n; i++) {
        int first = i == 0 || strcmp(f->m[i - 1].role, f->m[i].role) != 0 || f->m[i - 1].x == 0;
        int last = i + 1 == f->n_m || strcmp(f->m[i + 1].role, f->m[i].role) != 0;
        char at[32];
        if (f->by_rate && f->m[i].x == 0)
            snprintf(at, sizeof at, "C=1");
        else
            snprintf(at, sizeof at, f->by_rate ? "%.4g" : "%.0f", f->m[i].x);
        l += (size_t)snprintf(out + l, n - l, "%s%s%s%s%s", first && i ? ", " : first ? "" : ",", at,
                              last ? " (" : "", last ? f->m[i].role : "", last ? ")" : "");
    }
    if (f->by_rate && l < n)
        snprintf(out + l, n - l, " req/s");
}

/* The outcome's first words: the answer, or why there is none. */
static void fmt_outcome(const sweep_find *f, double lo, double hi, char *out, size_t n)
{
    char a[256] = "", b[256] = "", xl[32], xh[32], prec[64] = "";
    const find_meas *mlo = find_latest(f, lo), *mhi = find_latest(f, hi);
    if (mlo)
        fmt_meas(f, mlo, 0, a, sizeof a);
    if (mhi)
        fmt_meas(f, mhi, 1, b, sizeof b);
    fmt_x(f, lo, xl, sizeof xl);
    fmt_x(f, hi, xh, sizeof xh);
    if (f->by_rate)
        snprintf(prec, sizeof prec, " (the boundary in [%.4g, %.4g]/s, within %.0f%%)", lo, hi,
                 100 * f->scn->find_precision);
    switch (f->end) {
    case END_FOUND: snprintf(out, n, "%s (measured %s; %s: %s, fails)%s", xl, a, xh, b, prec); break;
    case END_NOISE:
        snprintf(out, n, "%s, the boundary within noise: results at one %s disagreed %d times (%s: %s; %s: %s)", xl,
                 f->by_rate ? "rate" : "C", f->flips, xl, a, xh, b);
        break;
    case END_FAILS_AT_1:
        snprintf(out, n, "no %s meets it (C = 1: %s)", f->by_rate ? "rate" : "C",
                 f->n_m ? (fmt_meas(f, &f->m[0], 1, b, sizeof b), b) : "");
        break;
    case END_CAP: snprintf(out, n, "%s or more (measured %s), the largest searched", xl, a); break;
    default:
        snprintf(out, n, "not pinned, %s: %s meets%s%s%s%s", f->phase == PH_DONE ? find_end_names[f->end] : "interrupted",
                 lo > 0 ? xl : "nothing", mlo ? " (" : "", a, mlo ? ")" : "",
                 isfinite(hi) ? "" : f->by_rate ? ", no rate measured failed" : ", no C measured failed");
        if (mhi) {
            size_t l = strlen(out);
            snprintf(out + l, n - l, ", %s fails (%s)", xh, b);
        }
    }
}

/* The ending block on stdout. */
static void print_answer(const sweep_find *f, double lo, double hi)
{
    char what[1024], levels[1024], pred[128] = "";
    const char *fmt = f->by_rate ? "%.3g/s" : "%.0f";
    char pl[32], pa[32];
    snprintf(pl, sizeof pl, fmt, f->pred_last);
    snprintf(pa, sizeof pa, fmt, f->pred_ladder);
    fmt_outcome(f, lo, hi, what, sizeof what);
    fmt_levels(f, levels, sizeof levels);
    if (f->pred_last >= 0 && f->pred_ladder >= 0 && f->pred_ladder != f->pred_last)
        snprintf(pred, sizeof pred, "; the model predicted %s (after the ladder: %s)", pl, pa);
    else if (f->pred_last >= 0)
        snprintf(pred, sizeof pred, "; the model predicted %s", pl);
    printf("\nfind %s: %s%s; %zu level%s in %.1f s: %s\n", f->scn->find_objective, what, pred, f->n_m,
           f->n_m == 1 ? "" : "s", f->elapsed_s, levels);
    printf("  probes carried %d requests (%s)\n", f->n_probe_req, f->why_req);
}

static cJSON *json_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* A point on the axis; null for none (0 or INFINITY as bounds, -1 as a
 * prediction). */
static cJSON *json_x(double x) { return x > 0 && isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

/* A prediction: 0 is one (the model says nothing meets), -1 none. */
static cJSON *json_pred(double x) { return x >= 0 && isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

/* One measured level: its C, role, whether it met, every term's figure. */
static cJSON *json_meas(const sweep_find *f, const find_meas *m)
{
    cJSON *o = cJSON_CreateObject(), *fig = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "level", m->level);
    cJSON_AddNumberToObject(o, "concurrency", m->c);
    if (f->by_rate)
        cJSON_AddItemToObject(o, "rate_per_s", json_x(m->x));
    cJSON_AddStringToObject(o, "role", m->role);
    cJSON_AddBoolToObject(o, "meets", m->meets);
    for (size_t i = 0; i < f->obj.n; i++)
        cJSON_AddItemToObject(fig, f->obj.t[i].name, json_num(m->fig[i]));
    cJSON_AddItemToObject(o, "figures", fig);
    cJSON_AddItemToObject(o, "failed_share", json_num(m->failed_share));
    return o;
}

/* summary.json's "find" (docs/records.md). */
static cJSON *json_find(const sweep_find *f, double lo, double hi)
{
    cJSON *o = cJSON_CreateObject(), *lv = cJSON_CreateArray();
    int found = f->end == END_FOUND || f->end == END_NOISE;
    const char *const k_c[] = {"answer_c", "largest_c_met", "smallest_c_failed", "predicted_c",
                               "predicted_c_after_ladder"};
    const char *const k_rate[] = {"answer_rate_per_s", "largest_rate_met", "smallest_rate_failed",
                                  "predicted_rate_per_s", "predicted_rate_after_ladder"};
    const char *const *k = f->by_rate ? k_rate : k_c;
    cJSON_AddStringToObject(o, "objective", f->scn->find_objective);
    cJSON_AddStringToObject(o, "by", f->by_rate ? "rate" : "concurrency");
    cJSON_AddStringToObject(o, "outcome", f->phase == PH_DONE ? find_end_names[f->end] : "interrupted");
    cJSON_AddItemToObject(o, k[0], json_x(found ? lo : 0));
    cJSON_AddItemToObject(o, k[1], json_x(lo));
    cJSON_AddItemToObject(o, k[2], json_x(hi));
    if (f->by_rate)
        cJSON_AddNumberToObject(o, "precision", f->scn->find_precision);
    cJSON_AddBoolToObject(o, "within_noise", f->end == END_NOISE);
    cJSON_AddItemToObject(o, k[3], json_pred(f->pred_last));
    cJSON_AddItemToObject(o, k[4], json_pred(f->pred_ladder));
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
static int add_to_summary(const sweep_find *f, double lo, double hi)
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
    double lo, hi;
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
