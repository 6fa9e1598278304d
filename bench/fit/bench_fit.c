/* bench_fit.c: how fast fit/ turns a big run into a law. Writes a constructed
 * run (tests/fit/sim.h: levels up to C = 1024, staggered prefill, jitter),
 * then times fit_load_run (JSON parsing dominates) and fit_analyze (timeline
 * sweep, samples, robust fit, model check) separately, best of --repeat.
 *
 *   bench_fit [--max-c 1024] [--tokens 128] [--repeat 3] [--dir DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "report.h"
#include "sim.h"

/* The command line. */
typedef struct bf_opts {
    int max_c, tokens, repeat;
    const char *dir;
} bf_opts;

/* -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, bf_opts *o)
{
    *o = (bf_opts){.max_c = 1024, .tokens = 128, .repeat = 3, .dir = "."};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_fit [--max-c C] [--tokens T] [--repeat R] [--dir DIR]\n");
            return 0;
        } else if (i + 1 < argc && !strcmp(argv[i], "--max-c")) {
            o->max_c = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--tokens")) {
            o->tokens = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--repeat")) {
            o->repeat = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--dir")) {
            o->dir = argv[++i];
        } else {
            fprintf(stderr, "bench_fit: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (o->max_c < 1 || o->max_c > 4096 || o->tokens < 2 || o->repeat < 1) {
        fprintf(stderr, "bench_fit: need 1 <= --max-c <= 4096, --tokens >= 2, --repeat >= 1\n");
        return 2;
    }
    return -1;
}

/* The constructed run: a law with a prefill term and jitter, levels C = 1, 4,
 * 16, ... up to max_c, two requests per stream. */
static void sim_setup(sim_cfg *c, const bf_opts *o)
{
    sim_default(c);
    c->a_ms = 52;
    c->b_ms = 30;
    c->p_ms_per_tok = 0.05;
    c->jitter_frac = 0.02;
    c->max_tokens = o->tokens;
    c->prefill_per_step = 16;
    c->n_levels = 0;
    for (int cc = 1; cc <= o->max_c && c->n_levels < SIM_MAX_LEVELS; cc *= 4) {
        c->conc[c->n_levels] = cc;
        c->n_requests[c->n_levels] = 2 * cc;
        c->n_levels++;
    }
}

/* Best times (ns) over the repetitions, and the sizes of what was analysed. */
typedef struct bf_times {
    double best_load, best_an;
    size_t chunks, samples, reqs;
} bf_times;

/* One load and one analysis, each timed on its own; the first prints its law.
 * 0, or 1 after a message. */
static int time_once(const char *path, int first, bf_times *t)
{
    char err[512];
    fit_run *run = NULL;
    fit_result *res = NULL;
    int64_t t0 = ll_now_ns();
    if (fit_load_run(path, &run, err, sizeof err)) {
        fprintf(stderr, "bench_fit: %s\n", err);
        return 1;
    }
    int64_t t1 = ll_now_ns();
    if (fit_analyze(run, NULL, &res, err, sizeof err)) {
        fprintf(stderr, "bench_fit: %s\n", err);
        return 1;
    }
    int64_t t2 = ll_now_ns();
    if ((double)(t1 - t0) < t->best_load)
        t->best_load = (double)(t1 - t0);
    if ((double)(t2 - t1) < t->best_an)
        t->best_an = (double)(t2 - t1);
    t->reqs = fit_run_n_requests(run);
    t->chunks = 0;
    for (size_t i = 0; i < t->reqs; i++)
        t->chunks += fit_run_request(run, i)->n_chunks;
    t->samples = res->n_samples;
    if (first)
        rpt_print_law_line(stdout, res);
    fit_result_free(res);
    fit_run_free(run);
    return 0;
}

static void print_figures(const sim_cfg *c, const sim_stats *st, const struct stat *sb, const bf_times *t)
{
    printf("records: %.1f MB, %d levels (C up to %d), %zu requests, %zu chunks, %zu samples, "
           "%ld engine steps\n",
           (double)sb->st_size / 1e6, c->n_levels, c->conc[c->n_levels - 1], t->reqs, t->chunks, t->samples,
           st->steps);
    printf("load    : %8.1f ms  (%.2f M chunks/s, %.0f MB/s)\n", t->best_load / 1e6,
           (double)t->chunks / (t->best_load / 1e9) / 1e6, (double)sb->st_size / 1e6 / (t->best_load / 1e9));
    printf("analyze : %8.1f ms  (%.2f M samples/s)\n", t->best_an / 1e6,
           (double)t->samples / (t->best_an / 1e9) / 1e6);
}

int main(int argc, char **argv)
{
    bf_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    sim_cfg c;
    sim_setup(&c, &o);
    char path[1024];
    snprintf(path, sizeof path, "%s/bench_fit_records.jsonl", o.dir);
    sim_stats st;
    if (sim_write(path, &c, &st)) {
        perror(path);
        return 1;
    }
    struct stat sb;
    stat(path, &sb);
    bf_times t = {.best_load = 1e30, .best_an = 1e30};
    for (int r = 0; r < o.repeat; r++)
        if (time_once(path, r == 0, &t) != 0)
            return 1;
    print_figures(&c, &st, &sb, &t);
    unlink(path);
    return 0;
}
