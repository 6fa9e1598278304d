/* compare.c: what `loadlaw compare RUN_A RUN_B` does once its options are
 * read (sweep.h sweep_compare), and what the "ab" form of `loadlaw sweep`
 * ends with: fit both runs, compare B against the baseline A (fit's
 * comparison: per-level speedups with bootstrap or paired intervals, both
 * laws, the slope ratio), print the tables or JSON, write the page, and
 * judge the gate (--expect-speedup: SWEEP_GATE when missed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fit.h"
#include "fit_compare.h"
#include "fit_outputs.h"
#include "report.h"
#include "sweep.h"

void sweep_compare_opts_default(sweep_compare_opts *o)
{
    memset(o, 0, sizeof *o);
    fit_compare_options_default(&o->co);
}

/* ---- the comparison, step by step ------------------------------------------ */

typedef struct compared {
    const char *dir[2];
    fit_run *run[2];
    fit_result *res[2];
    fit_compare *c;
    const fit_compare_level *gate; /* the level the verdict (and gate) judge */
    fit_outputs *outs;             /* NULL: neither run recorded outputs */
} compared;

/* Load and fit both runs, then compare them. */
static int load_and_compare(compared *k, const fit_compare_options *co)
{
    char err[1024];
    for (int i = 0; i < 2; i++)
        if (fit_open(k->dir[i], NULL, &k->run[i], &k->res[i], err, sizeof err)) {
            fprintf(stderr, "loadlaw compare: %s\n", err);
            return SWEEP_FAIL;
        }
    if (fit_compare_runs(k->run[0], k->res[0], k->run[1], k->res[1], co, &k->c, err, sizeof err)) {
        fprintf(stderr, "loadlaw compare: %s\n", err);
        return SWEEP_FAIL;
    }
    return SWEEP_OK;
}

/* Two runs asked for different work (their prompts or their requests
 * differ, how long the client waits aside: records.h ll_rec_asked): a
 * comparison of them measures that too, not only the two servers or
 * kernels. Said on stderr; the comparison goes on. */
static void warn_workloads(const compared *k)
{
    const ll_rec_asked *a = &fit_run_get_info(k->run[0])->asked, *b = &fit_run_get_info(k->run[1])->asked;
    char differ[64] = "";
    if (a->prompts_fp != b->prompts_fp)
        snprintf(differ, sizeof differ, "config.prompts");
    if (a->request_fp != b->request_fp)
        snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%sconfig.request", differ[0] ? ", " : "");
    if (differ[0])
        fprintf(stderr,
                "loadlaw compare: warning: the two runs asked for different work (%s differ): the figures below "
                "compare that too, not only the two targets\n",
                differ);
}

/* The level the verdict judges: expect_c's, else the highest shared one. */
static int pick_gate_level(compared *k, const sweep_compare_opts *o)
{
    int idx = (int)fit_compare_default_level(k->c);
    if (o->have_expect && o->expect_c) {
        idx = fit_compare_find(k->c, o->expect_c);
        if (idx < 0) {
            fprintf(stderr, "loadlaw compare: --expect-speedup @%d: the runs share no level with C=%d\n",
                    o->expect_c, o->expect_c);
            return SWEEP_USAGE;
        }
    }
    fit_compare_set_verdict(k->c, (size_t)idx);
    k->gate = &k->c->levels[idx];
    return SWEEP_OK;
}

static int gate_met(const compared *k, const sweep_compare_opts *o)
{
    return k->gate->ratio_ci[0] >= o->expect_x; /* NAN compares false: no interval, no pass */
}

/* The outputs comparison (fit_outputs.h): read when either run recorded outputs or
 * the outputs gate is asked for; k->outs stays NULL otherwise. */
static int load_outputs(compared *k, const sweep_compare_opts *o)
{
    char err[1024];
    if (fit_outputs_compare(k->dir[0], k->dir[1], &k->outs, err, sizeof err)) {
        fprintf(stderr, "loadlaw compare: outputs: %s\n", err);
        return SWEEP_FAIL;
    }
    if (!o->have_expect_outputs && !fit_outputs_recorded(k->outs)) {
        fit_outputs_free(k->outs);
        k->outs = NULL;
    }
    return SWEEP_OK;
}

/* The outputs gate: every level's share of identical or top-k-consistent
 * pairs at least expect_outputs; a line on stderr naming the worst level and
 * its first failing pair. No pair compared misses it. */
static int check_outputs_gate(const compared *k, const sweep_compare_opts *o)
{
    const fit_outputs_level *w = fit_outputs_worst(k->outs);
    char at[64];
    if (!w) {
        fprintf(stderr, "gate: expected same outputs >= %.3g; no request pair could be compared: MISSED\n",
                o->expect_outputs);
        return SWEEP_GATE;
    }
    int met = w->share_ok >= o->expect_outputs;
    if (w->open_loop)
        snprintf(at, sizeof at, "%g req/s", w->rate_per_s);
    else
        snprintf(at, sizeof at, "C=%d", w->concurrency);
    fprintf(stderr, "gate: expected same outputs >= %.3g; worst level %s: %.3f of %zu pairs: %s\n", o->expect_outputs,
            at, w->share_ok, w->n_pairs, met ? "met" : "MISSED");
    if (!met && w->example.found && w->example.pos != (size_t)-1)
        fprintf(stderr, "  e.g. prompt %s, token %zu: A \"%s\", B \"%s\"\n", w->example.key, w->example.pos,
                w->example.tok_a, w->example.tok_b);
    else if (!met && w->example.found)
        fprintf(stderr, "  e.g. prompt %s: the texts differ\n", w->example.key);
    return met ? SWEEP_OK : SWEEP_GATE;
}

/* The comparison as JSON ({"gate":{...}} added when there is one, and
 * "outputs" when either run recorded them). */
static int print_json(const compared *k, const sweep_compare_opts *o)
{
    cJSON *j = rpt_compare_to_json(k->c), *g = NULL, *x;
    int ok = j != NULL;
    if (ok)
        ok = !rpt_json_add_headline(j, "headline_a", k->res[0]) && !rpt_json_add_headline(j, "headline_b", k->res[1]);
    if (ok && k->outs)
        ok = (x = rpt_outputs_to_json(k->outs)) && cJSON_AddItemToObject(j, "outputs", x);
    if (ok && o->have_expect)
        ok = (g = cJSON_AddObjectToObject(j, "gate")) && !ll_json_add_num(g, "expect_speedup", o->expect_x) &&
             !ll_json_add_num(g, "concurrency", k->gate->concurrency) &&
             cJSON_AddBoolToObject(g, "met", gate_met(k, o));
    char *s = ok ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "loadlaw compare: out of memory\n");
        return SWEEP_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return SWEEP_OK;
}

static int write_page(const compared *k, const sweep_compare_opts *o)
{
    char err[1024];
    if (rpt_compare_write_html(o->html, k->dir[0], k->run[0], k->res[0], k->dir[1], k->run[1], k->res[1], k->c,
                               err, sizeof err)) {
        fprintf(stderr, "loadlaw compare: %s\n", err);
        return SWEEP_FAIL;
    }
    fprintf(o->json ? stderr : stdout, "comparison page: %s\n", o->html);
    return SWEEP_OK;
}

/* The gate line is a diagnostic for a CI log (stderr; `sweep` of an ab
 * scenario and its tests read it there). The tables are flushed first:
 * stdout is block-buffered in a pipe, so without this the gate line came
 * before the verdict it judges in `compare ... 2>&1 | tee`. */
static int check_gate(const compared *k, const sweep_compare_opts *o)
{
    if (fflush(stdout) != 0) {
        fprintf(stderr, "loadlaw compare: cannot write the tables to stdout\n");
        return SWEEP_FAIL;
    }
    int met = gate_met(k, o);
    const fit_compare_level *g = k->gate;
    char at[64], iv[96];
    if (g->open_loop)
        snprintf(at, sizeof at, "%g req/s", g->rate_per_s);
    else
        snprintf(at, sizeof at, "C=%d", g->concurrency);
    if (isfinite(g->ratio_ci[0]) && isfinite(g->ratio_ci[1])) {
        int d = fit_ci_decimals(g->ratio_ci[0], g->ratio_ci[1]);
        d = d < 3 ? 3 : d;
        snprintf(iv, sizeof iv, "interval [%.*f, %.*f]", d, g->ratio_ci[0], d, g->ratio_ci[1]);
    } else {
        snprintf(iv, sizeof iv, "no interval (too few steps or pairs to tell)");
    }
    fprintf(stderr, "gate: expected >= %.3g\u00d7 at %s; %s: %s\n", o->expect_x, at, iv, met ? "met" : "MISSED");
    return met ? SWEEP_OK : SWEEP_GATE;
}

int sweep_compare(const char *run_a, const char *run_b, const sweep_compare_opts *o)
{
    compared k = {.dir = {run_a, run_b}};
    int rc = load_and_compare(&k, &o->co);
    if (rc == SWEEP_OK)
        warn_workloads(&k);
    if (rc == SWEEP_OK)
        rc = pick_gate_level(&k, o);
    if (rc == SWEEP_OK)
        rc = load_outputs(&k, o);
    if (rc == SWEEP_OK) {
        if (o->json)
            rc = print_json(&k, o);
        else {
            rpt_compare_headlines(stdout, k.res[0], run_a, k.res[1], run_b);
            rpt_compare_print(stdout, k.c, run_a, run_b);
        }
        if (!o->json && k.outs)
            rpt_outputs_print(stdout, k.outs);
    }
    if (rc == SWEEP_OK && o->html)
        rc = write_page(&k, o);
    if (rc == SWEEP_OK && o->have_expect)
        rc = check_gate(&k, o);
    if ((rc == SWEEP_OK || rc == SWEEP_GATE) && o->have_expect_outputs) {
        int orc = check_outputs_gate(&k, o);
        rc = rc == SWEEP_OK ? orc : rc;
    }
    fit_outputs_free(k.outs);
    fit_compare_free(k.c);
    for (int i = 0; i < 2; i++) {
        fit_result_free(k.res[i]);
        fit_run_free(k.run[i]);
    }
    return rc;
}


int sweep_compare_levels(const char *run, int c_a, int c_b, const sweep_compare_opts *o)
{
    char err[1024];
    compared k = {.dir = {run, run}};
    if (fit_outputs_compare_levels(run, c_a, c_b, &k.outs, err, sizeof err)) {
        fprintf(stderr, "loadlaw compare: outputs: %s\n", err);
        return SWEEP_FAIL;
    }
    int rc = SWEEP_OK;
    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *x = rpt_outputs_to_json(k.outs);
        if (j && x && cJSON_AddItemToObject(j, "outputs", x))
            x = NULL; /* j owns it */
        int ok = j && !x && !ll_json_add_num(j, "level_a", c_a) && !ll_json_add_num(j, "level_b", c_b);
        cJSON_Delete(x);
        char *s = ok ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (s)
            printf("%s\n", s);
        else
            rc = SWEEP_FAIL;
        free(s);
    } else {
        printf("outputs within %s: C=%d (as B) against C=%d (as A), same prompt keys\n", run, c_b, c_a);
        rpt_outputs_print(stdout, k.outs);
    }
    if (rc == SWEEP_OK && o->have_expect_outputs) {
        fflush(stdout);
        rc = check_outputs_gate(&k, o);
    }
    fit_outputs_free(k.outs);
    return rc;
}
