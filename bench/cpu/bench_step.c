/* bench_step.c: whole decode steps of eng_backend_cpu, phase by phase, for
 * N = 1..16 running sequences, and the step law a + b·N fitted by least
 * squares to the per-N medians: the prediction that `loadlaw sweep --engine
 * backend=cpu,...` plus `loadlaw fit` should reproduce (the engine adds its
 * own overhead: HTTP, streaming, the scheduler).
 *
 * Usage: bench_step [--attn naive|tiled] [--threads T] [--heads H] [--topk K]
 *                   [--d-model D] [--d-ff F] [--vocab V] [--capacity C] [--min-ctx M]
 *                   [--n 1,2,4,...] [--steps S]
 * The sizes are the engine's cpu keys (engine.h), with the engine's defaults
 * except threads (2 here, 1 in the engine; 0 = all cores).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bench_args.h"
#include "common.h"

#define MAX_PH 8

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_step [--attn naive|tiled] [--threads T] [--heads H] [--topk K]\n"
               "                  [--d-model D] [--d-ff F] [--vocab V] [--capacity C] [--min-ctx M]\n"
               "                  [--n 1,2,4,...] [--steps S]\n");
}

/* The command line: the backend's config, the steps per N and the N list
 * (malloc'd; step_opts_free). */
typedef struct step_opts {
    eng_config cfg;
    int steps;
    int *ns;
    size_t n_ns;
} step_opts;

static void step_opts_free(step_opts *o)
{
    free(o->ns);
    o->ns = NULL;
}

static void default_opts(step_opts *o)
{
    memset(o, 0, sizeof *o);
    eng_config *cfg = &o->cfg;
    cfg->attn = "tiled";
    cfg->heads = 64;
    cfg->topk = 2048;
    cfg->threads = 2;
    cfg->max_running = 64;
    cfg->seed = 1;
    /* the engine's defaults (config.c); this bench links the backend alone */
    cfg->d_model = 2048;
    cfg->d_ff = 8192;
    cfg->vocab = 1024;
    cfg->capacity_tok = 4096;
    cfg->min_ctx_tok = -1; /* = topk */
    o->steps = 20;
}

/* One integer option: 0, or 2 (a usage error, already reported). */
static int parse_int_option(step_opts *o, const char *a, const char *v)
{
    int64_t x = 0;
    /* 0 is meaningful for --threads (all cores) and --min-ctx (real context) */
    int zero_ok = strcmp(a, "--threads") == 0 || strcmp(a, "--min-ctx") == 0;
    if (ll_parse_int64(v, &x) != 0 || x < (zero_ok ? 0 : 1) || x > (1 << 24)) {
        fprintf(stderr, "bench_step: bad value '%s' for %s\n", v, a);
        return 2;
    }
    eng_config *cfg = &o->cfg;
    if (strcmp(a, "--threads") == 0) cfg->threads = (int)x;
    else if (strcmp(a, "--heads") == 0) cfg->heads = (int)x;
    else if (strcmp(a, "--topk") == 0) cfg->topk = (int)x;
    else if (strcmp(a, "--d-model") == 0) cfg->d_model = (int)x;
    else if (strcmp(a, "--d-ff") == 0) cfg->d_ff = (int)x;
    else if (strcmp(a, "--vocab") == 0) cfg->vocab = (int)x;
    else if (strcmp(a, "--capacity") == 0) cfg->capacity_tok = (int)x;
    else if (strcmp(a, "--min-ctx") == 0) cfg->min_ctx_tok = (int)x;
    else if (strcmp(a, "--steps") == 0) o->steps = (int)x;
    else {
        fprintf(stderr, "bench_step: unknown option %s\n", a);
        return 2;
    }
    return 0;
}

/* One option with its value: 0, or 2 (a usage error, already reported). */
static int parse_option(step_opts *o, const char *a, const char *v)
{
    if (strcmp(a, "--attn") == 0) {
        o->cfg.attn = v;
        return 0;
    }
    if (strcmp(a, "--n") == 0) {
        free(o->ns);
        o->ns = NULL;
        if (ll_parse_int_list(v, &o->ns, &o->n_ns) != 0 || o->n_ns == 0) {
            fprintf(stderr, "bench_step: bad --n '%s'\n", v);
            return 2;
        }
        return 0;
    }
    return parse_int_option(o, a, v);
}

/* The default N list when --n was not given, each N checked: 0, or an exit code. */
static int parse_option_any(void *o, const char *a, const char *v)
{
    return parse_option(o, a, v);
}

static int settle_ns(step_opts *o)
{
    if (!o->ns) {
        static const int dflt[] = {1, 2, 4, 8, 16};
        o->n_ns = 5;
        o->ns = malloc(sizeof dflt);
        if (!o->ns)
            return 1;
        memcpy(o->ns, dflt, sizeof dflt);
    }
    for (size_t i = 0; i < o->n_ns; i++)
        if (o->ns[i] < 1 || o->ns[i] > o->cfg.max_running) {
            fprintf(stderr, "bench_step: --n values must be in [1, %d]\n", o->cfg.max_running);
            return 2;
        }
    return 0;
}

/* -1 to go on, else the exit code (0 after --help); o is freed on exit. */
static int parse_args(int argc, char **argv, step_opts *o)
{
    default_opts(o);
    int rc = bench_parse_pairs(argc, argv, usage, parse_option_any, o);
    if (rc < 0) {
        int s = settle_ns(o);
        if (s != 0)
            rc = s;
    }
    if (rc >= 0)
        step_opts_free(o);
    return rc;
}

static void print_header(int argc, char **argv, const step_opts *o)
{
    const eng_config *cfg = &o->cfg;
    printf("command:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\nattn %s  heads %d  topk %d  threads %d  d_model %d  d_ff %d  vocab %d  capacity %d  "
           "min_ctx %d%s  (median of %d steps)\n\n",
           cfg->attn, cfg->heads, cfg->topk, cfg->threads, cfg->d_model, cfg->d_ff, cfg->vocab,
           cfg->capacity_tok, cfg->min_ctx_tok < 0 ? cfg->topk : cfg->min_ctx_tok,
           cfg->min_ctx_tok < 0 ? " (= topk)" : "", o->steps);
    printf("%4s | %9s %9s | %10s %10s %10s | %9s\n", "N", "step ms", "min ms", "dense ms", "attn ms",
           "sample ms", "tok/s");
}

/* Timed steps at N running sequences: t_step[s] the whole step, t_ph[k][s]
 * the backend's first three phases, all in ms, after 2 warm-up steps. */
static int time_steps(void *st, int N, int steps, double *t_step, double *t_ph[3])
{
    int slot[64];
    int64_t ctx[64];
    for (int i = 0; i < N; i++) {
        slot[i] = i;
        ctx[i] = 200 + 37 * i;
    }
    int rc = 0;
    for (int s = -2; s < steps && rc == 0; s++) { /* 2 warm-up steps */
        eng_batch b = {.n_decode = N, .decode_slot = slot, .decode_ctx = ctx};
        eng_phase ph[ENG_MAX_PHASES];
        int nph = 0;
        int64_t t0 = ll_now_ns();
        rc = eng_backend_cpu.step(st, &b, t0, ph, &nph);
        int64_t t1 = ll_now_ns();
        for (int i = 0; i < N; i++)
            ctx[i]++;
        if (s < 0)
            continue;
        t_step[s] = (double)(t1 - t0) / 1e6;
        for (int k = 0; k < nph && k < 3; k++)
            t_ph[k][s] = (double)ph[k].dur_ns / 1e6;
    }
    return rc;
}

/* Sums for the two least-squares lines, over the levels measured. */
typedef struct law_sums {
    double sx, sy, sxx, sxy, sm, sxm;
} law_sums;

/* One row of the table at N; its median and first step go into the sums. */
static int run_level(void *st, int N, int steps, law_sums *ls)
{
    double *t_step = malloc((size_t)steps * 4 * sizeof(double));
    if (!t_step)
        return LL_ENOMEM;
    double *t_ph[3] = {t_step + steps, t_step + 2 * (size_t)steps, t_step + 3 * (size_t)steps};
    memset(t_step, 0, (size_t)steps * 4 * sizeof(double));
    int rc = time_steps(st, N, steps, t_step, t_ph);
    if (rc != 0) {
        fprintf(stderr, "bench_step: step failed: %s\n", ll_strerror(rc));
        free(t_step);
        return rc;
    }
    /* medians: the machine is shared, and a median ignores the steps
     * another process interrupted */
    double med[4];
    for (int k = 0; k < 4; k++) {
        double *v = t_step + (size_t)k * steps;
        ll_sort_doubles(v, (size_t)steps);
        med[k] = ll_quantile_sorted(v, (size_t)steps, 0.5);
    }
    double ms = med[0], mn = t_step[0];
    free(t_step);
    printf("%4d | %9.3f %9.3f | %10.3f %10.3f %10.3f | %9.1f\n", N, ms, mn, med[1], med[2],
           med[3], N / ms * 1e3);
    fflush(stdout);
    ls->sx += N;
    ls->sy += ms;
    ls->sxx += (double)N * N;
    ls->sxy += N * ms;
    ls->sm += mn;
    ls->sxm += N * mn;
    return 0;
}

static void print_law(const law_sums *ls, size_t n_ns)
{
    double sx = ls->sx, sy = ls->sy, sxx = ls->sxx, sxy = ls->sxy, sm = ls->sm, sxm = ls->sxm;
    double n = (double)n_ns, b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
    printf("\nleast-squares law (medians): step = %.2f + %.2f·N ms  (asymptote %.1f tok/s)\n", a, b,
           1e3 / b);
    double bm = (n * sxm - sx * sm) / (n * sxx - sx * sx), am = (sm - bm * sx) / n;
    printf("least-squares law (minima, the least disturbed): step = %.2f + %.2f·N ms\n", am, bm);
}

int main(int argc, char **argv)
{
    step_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char err[256];
    void *st = NULL;
    if (eng_backend_cpu.create(&o.cfg, &st, err, sizeof err) != 0) {
        fprintf(stderr, "bench_step: %s\n", err);
        step_opts_free(&o);
        return 1;
    }
    print_header(argc, argv, &o);
    law_sums ls = {0};
    rc = 0;
    for (size_t li = 0; li < o.n_ns && rc == 0; li++)
        rc = run_level(st, o.ns[li], o.steps, &ls);
    if (rc == 0 && o.n_ns >= 2)
        print_law(&ls, o.n_ns);
    eng_backend_cpu.destroy(st);
    step_opts_free(&o);
    return rc == 0 ? 0 : 1;
}
