/* cmd_sweep_ab.c: `loadlaw sweep` of a scenario with "ab": the same sweep on
 * two bundled-engine specs (e.g. attn=naive vs attn=tiled), each side a
 * normal run directory OUT/<name> with its own in-process engine, then the
 * two compared exactly as `loadlaw compare OUT/<a> OUT/<b> --html
 * OUT/compare.html [--expect-speedup G]` does: this file calls compare_runs
 * (cli.h), the function behind that command.
 *
 * Each side's engine writes its profiler traces into its run directory: both
 * engines live in one process, and the default name (pid and a per-engine
 * sequence number) would make side B overwrite side A's trace in /tmp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "report.h"
#include "sweep.h"

/* The last profile record of a run that names a written trace. */
typedef struct trace_find {
    char path[4096];
} trace_find;

/* The records module's reader hands over each profile record. */
static int on_profile(const ll_rec_profile *pr, void *ctx)
{
    trace_find *tf = ctx;
    if (!pr->ok || !pr->detail)
        return 0;
    /* detail is the server's answer: {"status":"written","path":...} */
    cJSON *d = cJSON_ParseWithOpts(pr->detail, NULL, 0);
    const char *p = d ? ll_json_str(d, "path", NULL) : NULL;
    if (p)
        snprintf(tf->path, sizeof tf->path, "%s", p);
    cJSON_Delete(d);
    return 0;
}

/* Attention's share of the trace's kernel time, as the "by category" table
 * of rpt_trace_print counts it (built-in categories); NAN when no kernels. */
static double attention_share(const rpt_trace *t, const rpt_categories *cats)
{
    double all = 0, attn = 0;
    for (size_t i = 0; i < rpt_trace_n_kernels(t); i++) {
        const rpt_trace_kernel *k = rpt_trace_kernel_at(t, i);
        all += (double)k->total_ns;
        if (!strcmp(rpt_categories_classify(cats, k->name), "attention"))
            attn += (double)k->total_ns;
    }
    return all > 0 ? attn / all : NAN;
}

/* Print the kernel breakdown of a side's trace, if its run captured one, and
 * return attention's share (NAN without a trace). Missing or unreadable
 * traces are noted, not errors: the comparison stands without them. */
static double print_trace(const char *name, const char *run_dir, const rpt_categories *cats)
{
    char path[4300], err[512] = "";
    trace_find tf = {""};
    ll_rec_handlers h = {.on_profile = on_profile};
    rpt_trace *t = NULL;
    double share = NAN;
    if (snprintf(path, sizeof path, "%s/records.jsonl", run_dir) >= (int)sizeof path ||
        ll_rec_read(path, &h, &tf, NULL, err, sizeof err) || !tf.path[0])
        return NAN;
    rpt_trace_print_opts po = {.top = 5, .cats = cats};
    const char *label = name;
    printf("\n== %s: loadlaw trace %s\n", name, tf.path);
    if (rpt_trace_load(tf.path, &t, err, sizeof err) || rpt_trace_print(stdout, &t, &label, 1, &po, err, sizeof err))
        fprintf(stderr, "loadlaw sweep: %s: trace breakdown: %s\n", name, err);
    else
        share = attention_share(t, cats);
    rpt_trace_free(t);
    return share;
}

static void print_traces(const scn_ab *ab, char dirs[2][4096])
{
    char err[512];
    double share[2];
    rpt_categories *cats = NULL;
    if (rpt_categories_new(&cats, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: trace categories: %s\n", err);
        return;
    }
    for (int k = 0; k < 2; k++)
        share[k] = print_trace(ab->side[k].name, dirs[k], cats);
    if (!isnan(share[0]) && !isnan(share[1]) && (share[0] > 0 || share[1] > 0))
        printf("\nattention share of kernel time: %s %.1f%% -> %s %.1f%%\n", ab->side[0].name, 100 * share[0],
               ab->side[1].name, 100 * share[1]);
    rpt_categories_free(cats);
}

int sweep_ab(const sweep_job *base, const char *out_dir)
{
    const scn_ab *ab = &base->scn->ab;
    const char *base_spec = base->engine_spec;
    char dirs[2][4096], spec[2][2048], html[4200], err[512];
    int ret = CLI_OK;
    if (ll_mkdir_p(out_dir, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return CLI_FAIL;
    }
    for (int k = 0; k < 2; k++) {
        const scn_ab_side *s = &ab->side[k];
        /* The side's keys come last, so they win over the shared "engine". */
        int ns = snprintf(spec[k], sizeof spec[k], "%s%s%s", base_spec ? base_spec : "", base_spec ? "," : "",
                          s->engine);
        int nd = snprintf(dirs[k], sizeof dirs[k], "%s/%s", out_dir, s->name);
        if (ns >= (int)sizeof spec[k] || nd >= (int)sizeof dirs[k]) {
            fprintf(stderr, "loadlaw sweep: ab.%c: engine spec or run directory too long\n", 'a' + k);
            return CLI_USAGE;
        }
    }
    for (int k = 0; k < 2; k++) {
        sweep_job j = *base;
        j.engine_spec = spec[k];
        j.run_dir = dirs[k];
        j.profile_dir = dirs[k];
        fprintf(stderr, "loadlaw sweep: ab side %c (%s): %s\n", 'a' + k, ab->side[k].name, spec[k]);
        if ((ret = sweep_one(&j)) != CLI_OK)
            return ret; /* an interrupted or failed side has nothing to compare */
    }
    print_traces(ab, dirs);
    snprintf(html, sizeof html, "%s/compare.html", out_dir);
    compare_opts co;
    compare_opts_default(&co);
    co.html = html;
    co.have_expect = ab->expect_x > 0;
    co.expect_x = ab->expect_x;
    co.expect_c = ab->expect_c;
    printf("\n== compare %s (A) vs %s (B)\n", ab->side[0].name, ab->side[1].name);
    fflush(stdout);
    return compare_runs(dirs[0], dirs[1], &co);
}
