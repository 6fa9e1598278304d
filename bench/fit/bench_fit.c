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
#include "sim.h"

int main(int argc, char **argv)
{
    int max_c = 1024, tokens = 128, repeat = 3;
    const char *dir = ".";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_fit [--max-c C] [--tokens T] [--repeat R] [--dir DIR]\n");
            return 0;
        } else if (i + 1 < argc && !strcmp(argv[i], "--max-c")) {
            max_c = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--tokens")) {
            tokens = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--repeat")) {
            repeat = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--dir")) {
            dir = argv[++i];
        } else {
            fprintf(stderr, "bench_fit: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (max_c < 1 || max_c > 4096 || tokens < 2 || repeat < 1) {
        fprintf(stderr, "bench_fit: need 1 <= --max-c <= 4096, --tokens >= 2, --repeat >= 1\n");
        return 2;
    }
    gsl_set_error_handler_off();
    sim_cfg c;
    sim_default(&c);
    c.a_ms = 52;
    c.b_ms = 30;
    c.p_ms_per_tok = 0.05;
    c.jitter_frac = 0.02;
    c.max_tokens = tokens;
    c.prefill_per_step = 16;
    c.n_levels = 0;
    for (int cc = 1; cc <= max_c && c.n_levels < SIM_MAX_LEVELS; cc *= 4) {
        c.conc[c.n_levels] = cc;
        c.n_requests[c.n_levels] = 2 * cc;
        c.n_levels++;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/bench_fit_records.jsonl", dir);
    sim_stats st;
    if (sim_write(path, &c, &st)) {
        perror(path);
        return 1;
    }
    struct stat sb;
    stat(path, &sb);
    double best_load = 1e30, best_an = 1e30;
    size_t chunks = 0, samples = 0, reqs = 0;
    char err[512];
    for (int r = 0; r < repeat; r++) {
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
        if ((double)(t1 - t0) < best_load)
            best_load = (double)(t1 - t0);
        if ((double)(t2 - t1) < best_an)
            best_an = (double)(t2 - t1);
        reqs = fit_run_n_requests(run);
        chunks = 0;
        for (size_t i = 0; i < reqs; i++)
            chunks += fit_run_request(run, i)->n_chunks;
        samples = res->n_samples;
        if (r == 0)
            fit_print_law_line(stdout, res);
        fit_result_free(res);
        fit_run_free(run);
    }
    printf("records: %.1f MB, %d levels (C up to %d), %zu requests, %zu chunks, %zu samples, "
           "%ld engine steps\n",
           (double)sb.st_size / 1e6, c.n_levels, c.conc[c.n_levels - 1], reqs, chunks, samples,
           st.steps);
    printf("load    : %8.1f ms  (%.2f M chunks/s, %.0f MB/s)\n", best_load / 1e6,
           (double)chunks / (best_load / 1e9) / 1e6, (double)sb.st_size / 1e6 / (best_load / 1e9));
    printf("analyze : %8.1f ms  (%.2f M samples/s)\n", best_an / 1e6,
           (double)samples / (best_an / 1e9) / 1e6);
    unlink(path);
    return 0;
}
