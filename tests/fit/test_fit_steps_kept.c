/* The engine steps a run keeps for the law past a bound (fit/reduce.c "Steps
 * kept"): fitted with a small bound, every level keeps exactly the steps at
 * positions 0, s, 2s, ... of its full list (s the run's stride, the same for
 * every level), the run keeps at most the bound, a note says so, each
 * level's steady throughput and mean K are those of every step to the bit,
 * and the law from the kept steps, a sample of all, lies within its own
 * (wider) interval of the law from every step. The engine's own step
 * records (fit/load.c) are kept the same way past their bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gsl/gsl_errno.h>
#include "common.h"
#include "fit.h"
#include "fit_internal.h"
#include "sim.h"
#include "testutil.h"

static int has_note(const fit_result *r, const char *what)
{
    for (size_t i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], what))
            return 1;
    return 0;
}

/* Level l of the thinned fit against the full one. */
static void check_level(const fit_result *full, const fit_result *thin, size_t l, size_t stride)
{
    const fit_step *a, *b;
    size_t na, nb;
    fit_level_steps(full, l, &a, &na);
    fit_level_steps(thin, l, &b, &nb);
    CHECK(nb == (na + stride - 1) / stride, "level %zu: %zu of %zu steps kept at stride %zu", l, nb, na, stride);
    int same = 1;
    for (size_t i = 0; i < nb && same; i++)
        same = memcmp(&b[i], &a[i * stride], sizeof *b) == 0;
    CHECK(same, "level %zu: the kept steps are the full list's 0th, %zu-th, ...", l, stride);
    const fit_level *F = &full->levels[l], *T = &thin->levels[l];
    CHECK(F->n_steady_points == na && T->n_steady_points == na, "level %zu: %zu steady steps counted in both", l, na);
    CHECK(F->steady_tok_per_s == T->steady_tok_per_s && F->k_mean == T->k_mean,
          "level %zu: steady throughput %.17g vs %.17g, mean K the same", l, F->steady_tok_per_s,
          T->steady_tok_per_s);
    double wf = F->steady_tok_per_s_ci[1] - F->steady_tok_per_s_ci[0];
    double wt = T->steady_tok_per_s_ci[1] - T->steady_tok_per_s_ci[0];
    CHECK(na < 16 || (wt > 0.5 * wf && wt < 2 * wf), "level %zu: interval width %.4g from the kept steps, %.4g from all",
          l, wt, wf);
}

/* The engine's step records loaded with a bound of keep, against all of them. */
static void check_engine_steps(const char *path, const fit_run *all, const fit_result *full, size_t keep)
{
    fit_run *run = NULL;
    fit_result *r = NULL;
    char err[256] = "";
    CHECK(fit_load_run_opts(path, &(fit_load_opts){.resident_events = (size_t)1 << 30, .engine_steps_keep = keep},
                            &run, err, sizeof err) == 0 &&
              fit_analyze(run, NULL, &r, err, sizeof err) == 0,
          "engine steps kept up to %zu: %s", keep, err);
    if (!r)
        return;
    size_t s = fit_run_steps_stride(run), n = fit_run_n_steps(run), seen = fit_run_n_steps_seen(run);
    CHECK(seen == fit_run_n_steps(all) && seen > 4 * keep, "%zu step records in the file, %zu in the bound", seen,
          keep);
    CHECK(s >= 2 && n <= keep && n == (seen + s - 1) / s, "%zu of %zu kept at stride %zu", n, seen, s);
    int same = 1;
    for (size_t i = 0; i < n && same; i++)
        same = memcmp(fit_run_step(run, i), fit_run_step(all, i * s), sizeof(ll_rec_step)) == 0;
    CHECK(same, "the kept records are the file's 0th, %zu-th, ...", s);
    CHECK(has_note(r, "step records kept"), "a note says the engine's law is from a share of its steps");
    double h = (r->engine.b_ci_ms[1] - r->engine.b_ci_ms[0]) / 2;
    CHECK(r->engine.ok && fabs(r->engine.b_ms - full->engine.b_ms) <= h,
          "engine law slope from the kept records %.4f (+/- %.4f), from all %.4f", r->engine.b_ms, h,
          full->engine.b_ms);
    fit_result_free(r);
    fit_run_free(run);
}

int main(void)
{
    gsl_set_error_handler_off();
    char dir[] = "fit_steps_XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(&c, cs, 5, 4);
    c.max_tokens = 120;
    c.jitter_frac = 0.05;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *full = NULL, *thin = NULL;
    CHECK(sim_fit(path, &c, NULL, &st, &run, &full, err, sizeof err) == 0, "%s", err);
    fit_options o;
    fit_options_default(&o);
    o.steps_keep = 500;
    CHECK(full && fit_analyze(run, &o, &thin, err, sizeof err) == 0 && thin, "thinned fit: %s", err);
    if (!full || !thin)
        TEST_MAIN_END();
    size_t seen = 0, kept = 0, stride = thin->kept->step_stride;
    for (size_t l = 0; l < thin->n_levels; l++) {
        seen += thin->kept->levels[l].n_steps_seen;
        kept += thin->kept->levels[l].n_steps;
    }
    CHECK(full->kept->step_stride == 1 && !has_note(full, "engine steps ("), "the full fit keeps every step");
    CHECK(stride >= 2 && kept <= 500 && kept > 500 / 2 - thin->n_levels, "%zu of %zu steps kept at stride %zu", kept,
          seen, stride);
    CHECK(seen > 4 * 500, "the run has %zu steps, past the bound", seen);
    CHECK(has_note(thin, "from 1 in"), "a note says the law is from a share of the steps");
    for (size_t l = 0; l < thin->n_levels; l++)
        check_level(full, thin, l, stride);
    /* the kept steps are a sample of all: their law differs from the full one
     * by less than its own (wider) interval says it may */
    const fit_law *F = &full->law, *T = &thin->law;
    double hb = (T->b_ci_ms[1] - T->b_ci_ms[0]) / 2, ha = (T->a_ci_ms[1] - T->a_ci_ms[0]) / 2;
    CHECK(T->ok && fabs(T->b_ms - F->b_ms) <= hb && fabs(T->a_ms - F->a_ms) <= ha,
          "law from the kept steps %.4f + %.4f n (+/- %.4f, %.4f) against every step's %.4f + %.4f n", T->a_ms, T->b_ms,
          ha, hb, F->a_ms, F->b_ms);
    CHECK(hb > (F->b_ci_ms[1] - F->b_ci_ms[0]) / 2, "the kept steps' interval is the wider");
    CHECK(fit_run_steps_stride(run) == 1 && !has_note(full, "step records kept"), "every engine step kept by default");
    check_engine_steps(path, run, full, 300);
    CHECK(fabs(T->b_ms - c.b_ms) < 0.05 * c.b_ms,
          "kept-step law slope %.4f against the truth %.4f", T->b_ms, c.b_ms);
    fit_result_free(full);
    fit_result_free(thin);
    fit_run_free(run);
    unlink(path);
    rmdir(dir);
    TEST_MAIN_END();
}
