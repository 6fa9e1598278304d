/* cmd_plan.c: `loadlaw plan RUN_DIR`: capacity planning from a recorded
 * run's law and measured levels (fit/plan.c "Capacity plan"): the largest C
 * that meets a per-token objective, throughput at chosen C, TTFT between
 * measured levels, goodput per level. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit.h"
#include "fit_plan.h"
#include "report.h"
#include "opts.h"
#include "slo_opts.h"

enum { K_JSON = 256, K_C, K_CONTEXT };

static const cli_opt plan_table[] = {
    CLI_SLO_ROWS("per-token objective (50ms): the largest C whose mean step meets it, and the "
                 "TPOT part of goodput"),
    {"c", K_C, "LIST", "concurrencies to plan at (48 or 32,48,64; repeatable); default: the "
                "measured ones"},
    {"context", K_CONTEXT, "TOKENS", "when the chosen model has a context term: tokens of context per "
                "request to plan at (4k, 4ki, 1200); default the run's mean"},
    {"json", K_JSON, NULL, "print one JSON object instead of the tables"},
    {0},
};

static const cli_cmd plan_cmd = {
    "plan",
    "usage: loadlaw plan RUN_DIR [--itl-slo DUR | --tpot-slo DUR] [--ttft-slo DUR] "
    "[--e2e-slo DUR] [--c LIST]... [--context TOKENS] [--json]",
    "Capacity planning from RUN_DIR's chosen model (the law step(N) = a + b*N, or the\n"
    "richer model the fit's model check chose: a context term at --context tokens per\n"
    "request, a knee, batch buckets) and its measured\n"
    "levels: the largest C whose mean step meets a per-token objective (95% interval\n"
    "from the law's covariance), throughput and per-user tokens/s at any C (marked\n"
    "when beyond the largest measured C), TTFT interpolated between measured levels\n"
    "(never extrapolated), and goodput: requests per second meeting every objective.\n",
    plan_table,
    "exit codes: 0 ok, 1 unreadable run or no law (says why), 2 usage error\n",
};

#define PLAN_MAX_C 256

typedef struct plan_args {
    const char *dir;
    int json;
    cli_slo_args slo;
    int at_c[PLAN_MAX_C];
    size_t n_at_c;
    double context_tok;
} plan_args;

/* ---- the objective options, shared with `loadlaw report` (slo_opts.h) ---- */

void cli_slo_init(cli_slo_args *a)
{
    a->itl_ms = a->tpot_ms = NAN;
    a->slo = (fit_slo){NAN, NAN, NAN};
}

int cli_slo_opt(const cli_cmd *c, const cli_opt *o, const char *v, cli_slo_args *a, int *rc)
{
    double *to;
    switch (o->key) {
    case CLI_SLO_KEY_ITL: to = &a->itl_ms; break;
    case CLI_SLO_KEY_TPOT: to = &a->tpot_ms; break;
    case CLI_SLO_KEY_TTFT: to = &a->slo.ttft_ms; break;
    case CLI_SLO_KEY_E2E: to = &a->slo.e2e_ms; break;
    default: return 0;
    }
    double s = 0;
    *rc = cli_number(c, o->name, v, CLI_DURATION, 1e-9, 1e9, "a positive duration (50ms, 2s)", &s);
    *to = s * 1e3;
    return 1;
}

int cli_slo_finish(const cli_cmd *c, const cli_slo_args *a, fit_slo *out)
{
    /* ITL and TPOT name one objective on per-token latency: the law's mean
     * step is both; two different values would be two objectives */
    if (!isnan(a->itl_ms) && !isnan(a->tpot_ms) && a->itl_ms != a->tpot_ms)
        return cli_usage_error(c, "give one of --itl-slo and --tpot-slo (one per-token objective)");
    *out = a->slo;
    out->tpot_ms = isnan(a->itl_ms) ? a->tpot_ms : a->itl_ms;
    return 0;
}

/* ---- plan ------------------------------------------------------------------ */

static int add_c_list(plan_args *a, const char *v)
{
    int *cs = NULL;
    size_t n = 0;
    if (ll_parse_int_list(v, &cs, &n) || n == 0) {
        free(cs);
        return cli_usage_error(&plan_cmd, "--c: expected positive integers (48 or 32,48), got '%s'", v);
    }
    for (size_t i = 0; i < n; i++) {
        if (cs[i] <= 0 || a->n_at_c == PLAN_MAX_C) {
            free(cs);
            return cli_usage_error(&plan_cmd, "--c: each C must be positive, at most %d of them",
                                   PLAN_MAX_C);
        }
        a->at_c[a->n_at_c++] = cs[i];
    }
    free(cs);
    return 0;
}

static int on_opt(const cli_opt *o, const char *v, void *ctx)
{
    plan_args *a = ctx;
    if (!o) {
        if (a->dir)
            return cli_usage_error(&plan_cmd, "one RUN_DIR only ('%s' and '%s')", a->dir, v);
        a->dir = v;
        return 0;
    }
    int rc;
    if (cli_slo_opt(&plan_cmd, o, v, &a->slo, &rc))
        return rc;
    switch (o->key) {
    case K_JSON: a->json = 1; return 0;
    case K_C: return add_c_list(a, v);
    case K_CONTEXT:
        return cli_number(&plan_cmd, o->name, v, CLI_WHOLE, 1, 1e15, "a positive token count (4k, 1200)",
                          &a->context_tok);
    }
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    plan_args a = {0};
    cli_slo_init(&a.slo);
    int pr = cli_parse(&plan_cmd, argc, argv, on_opt, &a);
    if (pr != CLI_GO_ON)
        return pr;
    if (!a.dir)
        return cli_usage_error(&plan_cmd, "missing RUN_DIR (try loadlaw plan --help)");
    fit_slo slo;
    if (cli_slo_finish(&plan_cmd, &a.slo, &slo))
        return CLI_USAGE;

    char err[512] = "";
    fit_run *run = NULL;
    fit_result *res = NULL;
    fit_plan *plan = NULL;
    fit_plan_options po = {.slo = slo, .at_c = a.at_c, .n_at_c = a.n_at_c, .context_tok = a.context_tok};
    int rc = CLI_FAIL;
    if (fit_open(a.dir, NULL, &run, &res, err, sizeof err) || fit_plan_compute(run, res, &po, &plan, err, sizeof err)) {
        fprintf(stderr, "loadlaw plan: %s\n", err);
        goto done;
    }
    if (a.json) {
        cJSON *j = rpt_plan_to_json(plan);
        if (j && rpt_json_add_headline(j, "headline", res)) {
            cJSON_Delete(j);
            j = NULL;
        }
        rc = cli_print_json(&plan_cmd, j);
    } else {
        rpt_print_law_line(stdout, res);
        rpt_plan_print(stdout, plan);
        rc = fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
    }
done:
    fit_plan_free(plan);
    fit_result_free(res);
    fit_run_free(run);
    return rc;
}
