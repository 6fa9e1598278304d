/* test_fit_stream.c: a level analysed as one time-ordered sweep (fit/stream.c
 * "A streamed level") gives the exact walk's figures. A run recorded here
 * with `loadlaw sweep` against the bundled synthetic engine (law 20 + 2n +
 * 0.5c at time scale 0.05, prompts of 100-800 words wandering within levels
 * so K moves, thinking then answer tokens, warmup requests, closed-loop C =
 * 1, 4, 16 and one open-loop level at 40 requests/s; fixed seeds) is fitted
 * with the default options (every level on the exact walk) and with
 * stream_events = 1 (every level streamed); every figure of every level must
 * agree: counts, tokens, ramp, rates, the steady figures, burst figures and
 * the steady median exactly, the steps one for one (sums 1e-12 relative:
 * their additions come in another order), position bins, the law, naive fit
 * and model to 1e-9; a streamed level's samples (fit_level_samples) are the
 * exact walk's, reordered. Then stream_exact = 16 puts the burst figures
 * and the steady median past their exact bound: each within what the
 * histogram's error allows, and noted. argv: none (LOADLAW_BIN). Real time:
 * the sweep, about 3 s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_internal.h"
#include "testutil.h"
#include "tsupport.h"

#define REL_SUM 1e-12  /* sums added in another order */
#define REL_FIT 1e-9   /* fits on those sums */

static int close_rel(double a, double b, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) || a == b;
}

static int same_bits(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Counts, tokens, ramp, rates, phase and steady figures: exact. */
static void check_level_exact(const fit_level *a, const fit_level *b, int l)
{
    CHECK(a->n_samples == b->n_samples && a->n_steady_samples == b->n_steady_samples, "level %d samples %zu/%zu vs %zu/%zu",
          l, a->n_samples, a->n_steady_samples, b->n_samples, b->n_steady_samples);
    CHECK(a->n_samples_after_cut == b->n_samples_after_cut && a->n_requests == b->n_requests && a->n_ok == b->n_ok &&
              a->n_failed == b->n_failed && a->n_warmup == b->n_warmup &&
              a->n_excluded_requests == b->n_excluded_requests,
          "level %d request counts", l);
    CHECK(a->tokens == b->tokens && same_bits(a->whole_tok_per_s, b->whole_tok_per_s), "level %d tokens %.0f vs %.0f",
          l, a->tokens, b->tokens);
    CHECK(same_bits(a->steady_tok_per_s, b->steady_tok_per_s) && same_bits(a->steady_step_ms, b->steady_step_ms),
          "level %d steady %.6g tok/s %.6g ms vs %.6g %.6g", l, a->steady_tok_per_s, a->steady_step_ms,
          b->steady_tok_per_s, b->steady_step_ms);
    CHECK(a->ramp_reached == b->ramp_reached && same_bits(a->ramp_s, b->ramp_s) &&
              same_bits(a->ramp_tokens, b->ramp_tokens),
          "level %d ramp %.0f vs %.0f tokens", l, a->ramp_tokens, b->ramp_tokens);
    CHECK(same_bits(a->burst_gap_frac, b->burst_gap_frac) && same_bits(a->burst_gap_ms, b->burst_gap_ms),
          "level %d burst %.6g/%.6g vs %.6g/%.6g", l, a->burst_gap_frac, a->burst_gap_ms, b->burst_gap_frac,
          b->burst_gap_ms);
    CHECK(a->steady_n_max == b->steady_n_max && same_bits(a->pos_max_tok, b->pos_max_tok),
          "level %d steady_n_max %g vs %g, pos_max %g vs %g", l, a->steady_n_max, b->steady_n_max, a->pos_max_tok,
          b->pos_max_tok);
    int rates = a->n_rate_bins == b->n_rate_bins && a->rate_bin_ns == b->rate_bin_ns;
    for (size_t i = 0; rates && i < a->n_rate_bins; i++)
        rates = a->think_tok_per_s[i] == b->think_tok_per_s[i] && a->answer_tok_per_s[i] == b->answer_tok_per_s[i];
    CHECK(rates, "level %d rate series", l);
    CHECK(a->n_phase == b->n_phase && a->n_windows == b->n_windows && a->steady_s == b->steady_s,
          "level %d phase and windows", l);
    CHECK(same_bits(a->predicted_tok_per_s, b->predicted_tok_per_s) || close_rel(a->predicted_tok_per_s,
                                                                                 b->predicted_tok_per_s, REL_FIT),
          "level %d predicted", l);
}

/* Steps one for one; position bins to REL_SUM. */
static void check_level_kept(const fit_result *ra, const fit_result *rb, size_t l)
{
    const fit_step *sa, *sb;
    size_t na, nb;
    fit_level_steps(ra, l, &sa, &na);
    fit_level_steps(rb, l, &sb, &nb);
    CHECK(na == nb, "level %zu steps %zu vs %zu", l, na, nb);
    double g[2] = {0}, tok[2] = {0}, k[2] = {0};
    int each = na == nb;
    for (size_t i = 0; i < na && i < nb; i++) {
        each &= sa[i].t_ns == sb[i].t_ns && sa[i].n == sb[i].n && sa[i].tokens == sb[i].tokens &&
                sa[i].n_samples == sb[i].n_samples && close_rel(sa[i].gap_ms, sb[i].gap_ms, REL_SUM) &&
                close_rel(sa[i].k, sb[i].k, REL_SUM);
        g[0] += sa[i].gap_ms, g[1] += sb[i].gap_ms;
        tok[0] += sa[i].tokens, tok[1] += sb[i].tokens;
        k[0] += sa[i].k * sa[i].tokens, k[1] += sb[i].k * sb[i].tokens;
    }
    CHECK(each, "level %zu steps one for one", l);
    CHECK(tok[0] == tok[1] && close_rel(g[0], g[1], REL_SUM) && close_rel(k[0], k[1], REL_SUM),
          "level %zu step sums: %.9g ms %.0f tok vs %.9g ms %.0f tok", l, g[0], tok[0], g[1], tok[1]);
    CHECK(ra->kept->levels[l].n_step_requests == rb->kept->levels[l].n_step_requests,
          "level %zu requests behind the steps %zu vs %zu", l, ra->kept->levels[l].n_step_requests,
          rb->kept->levels[l].n_step_requests);
    fit_pos_bins pa, pb;
    fit_level_position(ra, l, &pa);
    fit_level_position(rb, l, &pb);
    int bins = same_bits(pa.pos_max_tok, pb.pos_max_tok) && same_bits(pa.width_tok, pb.width_tok);
    for (int b = 0; b < FIT_POS_BINS; b++)
        bins &= pa.all_tok[b] == pb.all_tok[b] && pa.steady_tok[b] == pb.steady_tok[b] &&
                close_rel(pa.all_ms[b], pb.all_ms[b], REL_SUM) && close_rel(pa.steady_ms[b], pb.steady_ms[b], REL_SUM);
    bins &= close_rel(pa.early_ms, pb.early_ms, REL_SUM) && close_rel(pa.late_ms, pb.late_ms, REL_SUM) &&
            close_rel(pa.early_all_ms, pb.early_all_ms, REL_SUM) && close_rel(pa.late_all_ms, pb.late_all_ms, REL_SUM);
    CHECK(bins, "level %zu position bins (pos_max %g vs %g)", l, pa.pos_max_tok, pb.pos_max_tok);
}

static void check_law(const char *what, const fit_law *a, const fit_law *b)
{
    CHECK(a->ok == b->ok && close_rel(a->a_ms, b->a_ms, REL_FIT) && close_rel(a->b_ms, b->b_ms, REL_FIT) &&
              close_rel(a->b_ci_ms[1], b->b_ci_ms[1], REL_FIT) && a->n_points == b->n_points &&
              a->n_samples == b->n_samples,
          "%s: %.12g + %.12g n vs %.12g + %.12g n", what, a->a_ms, a->b_ms, b->a_ms, b->b_ms);
}

static int cmp_sample(const void *x, const void *y)
{
    const fit_sample *a = x, *b = y;
    if (a->req_idx != b->req_idx)
        return a->req_idx < b->req_idx ? -1 : 1;
    return (a->t_ns > b->t_ns) - (a->t_ns < b->t_ns);
}

/* A streamed level's samples are the exact walk's, in another order. */
static void check_samples(const fit_run *run, const fit_result *ra, const fit_result *rb, size_t l)
{
    fit_sample *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(fit_level_samples(run, ra, l, &a, &na) == 0 && fit_level_samples(run, rb, l, &b, &nb) == 0,
          "level %zu samples made again", l);
    int same = na == nb && na > 0;
    for (size_t i = 1; same && i < nb; i++)
        same = b[i - 1].t_ns <= b[i].t_ns; /* streamed: time order */
    CHECK(same, "level %zu: %zu samples vs %zu streamed, in time order", l, na, nb);
    if (na > 1)
        qsort(a, na, sizeof *a, cmp_sample);
    if (nb > 1)
        qsort(b, nb, sizeof *b, cmp_sample);
    for (size_t i = 0; same && i < na; i++)
        same = a[i].t_ns == b[i].t_ns && a[i].gap_ms == b[i].gap_ms && a[i].n == b[i].n && a[i].k == b[i].k &&
               a[i].tokens == b[i].tokens && a[i].pos_tok == b[i].pos_tok && a[i].kind == b[i].kind &&
               a[i].steady == b[i].steady && a[i].level_idx == b[i].level_idx;
    CHECK(same, "level %zu: every sample the same (K too)", l);
    free(a);
    free(b);
}

static size_t notes_with(const fit_result *r, const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_notes; i++)
        n += strstr(r->notes[i], needle) != NULL;
    return n;
}

/* Burst figures and steady median from histograms (stream_exact small):
 * the median within twice LL_PCT_REL_ERR (the histogram's order statistic
 * against an interpolated one); the burst bound likewise, and its share
 * off by at most the gaps within that error of the bound. */
static void check_histograms(const fit_run *run, const fit_result *ra, const fit_result *rh)
{
    size_t noted = 0;
    for (size_t l = 0; l < ra->n_levels; l++) {
        const fit_level *a = &ra->levels[l], *h = &rh->levels[l];
        CHECK(close_rel(a->steady_step_ms, h->steady_step_ms, 2 * LL_PCT_REL_ERR),
              "level %zu steady median %.6g vs %.6g from a histogram", l, a->steady_step_ms, h->steady_step_ms);
        CHECK(close_rel(a->burst_gap_ms, h->burst_gap_ms, 2 * LL_PCT_REL_ERR),
              "level %zu burst bound %.6g vs %.6g", l, a->burst_gap_ms, h->burst_gap_ms);
        fit_sample *s = NULL;
        size_t n = 0, near = 0;
        CHECK(fit_level_samples(run, ra, l, &s, &n) == 0, "level %zu samples", l);
        for (size_t i = 0; i < n; i++)
            near += fabs(s[i].gap_ms / a->burst_gap_ms - 1) <= 3 * LL_PCT_REL_ERR;
        free(s);
        CHECK(isnan(a->burst_gap_frac) ? isnan(h->burst_gap_frac)
                                       : fabs(a->burst_gap_frac - h->burst_gap_frac) <= (double)near / (double)n,
              "level %zu burst share %.6g vs %.6g (%zu gaps near the bound)", l, a->burst_gap_frac, h->burst_gap_frac,
              near);
        noted += a->n_samples > 16;
        CHECK(h->n_samples == a->n_samples && h->tokens == a->tokens, "level %zu the rest unchanged", l);
    }
    CHECK(notes_with(rh, "burst figures from a histogram") == noted && noted >= 3, "a note per level past the bound: %zu",
          noted);
    CHECK(notes_with(rh, "steady step median from a histogram") >= 3, "the steady median's notes");
    CHECK(notes_with(ra, "from a histogram (") == 0, "none on the exact walk");
}

static fit_result *analyze(const fit_run *run, size_t stream_events, size_t stream_exact)
{
    fit_options o;
    fit_options_default(&o);
    o.stream_events = stream_events;
    o.stream_exact = stream_exact;
    fit_result *r = NULL;
    char err[256] = "";
    int rc = fit_analyze(run, &o, &r, err, sizeof err);
    CHECK(rc == 0, "fit_analyze (stream_events %zu): %s", stream_events, err);
    return r;
}

int main(void)
{
    char dir[256], scn[512], out[512], records[512];
    if (tu_tmpdir("ll_test_fit_stream", dir, sizeof dir))
        return 1;
    snprintf(scn, sizeof scn, "%s/stream.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(records, sizeof records, "%s/run/records.jsonl", dir);
    tu_write_file(scn,
                  "{\"name\":\"stream\",\"engine\":\"backend=synthetic,law=20+2n+0.5c,time_scale=0.05,seed=3\","
                  "\"request\":{\"max_tokens\":48,\"think_tokens\":8,\"ignore_eos\":true,\"timeout_s\":60},"
                  "\"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"uniform\",\"min\":100,\"max\":800},"
                  "\"count\":256,\"seed\":2},\"load\":{\"vary_context\":true,\"drain_s\":10},"
                  "\"levels\":[{\"concurrency\":1,\"requests\":6,\"warmup\":1},"
                  "{\"concurrency\":4,\"requests\":16,\"warmup\":2},{\"concurrency\":16,\"requests\":48},"
                  "{\"concurrency\":0,\"rate_per_s\":40,\"requests\":60}]}\n");
    char *args[] = {"loadlaw", "sweep", scn, "-o", out, "-q", "--no-report", NULL};
    CHECK(tu_run(LOADLAW_BIN, args, NULL, NULL, 120) == 0, "the sweep ran");
    fit_run *run = NULL;
    char err[256] = "";
    CHECK(fit_load_run(records, &run, err, sizeof err) == 0, "load: %s", err);
    if (!run)
        TEST_MAIN_END();
    fit_result *ra = analyze(run, 0, 0), *rb = analyze(run, 1, 0), *rh = analyze(run, 1, 16);
    if (!ra || !rb || !rh)
        TEST_MAIN_END();
    CHECK(ra->n_levels == 4 && rb->n_levels == 4, "four levels: %zu, %zu", ra->n_levels, rb->n_levels);
    CHECK(ra->n_samples == rb->n_samples && ra->n_samples > 1000 && ra->n_empty_chunks == rb->n_empty_chunks,
          "samples %zu vs %zu", ra->n_samples, rb->n_samples);
    for (size_t l = 0; l < ra->n_levels && l < rb->n_levels; l++) {
        check_level_exact(&ra->levels[l], &rb->levels[l], (int)l);
        check_level_kept(ra, rb, l);
        check_samples(run, ra, rb, l);
    }
    CHECK(ra->levels[0].n_warmup == 1 && ra->levels[1].n_warmup == 2 && !ra->levels[3].closed_loop,
          "the warmup requests and the open level are there");
    check_law("the law", &ra->law, &rb->law);
    check_law("OLS", &ra->ols, &rb->ols);
    check_law("the naive fit", &ra->naive, &rb->naive);
    CHECK(ra->model.best == rb->model.best && close_rel(ra->model.ctx_c_ms, rb->model.ctx_c_ms, REL_FIT) &&
              close_rel(ra->model.ctx_b_ms, rb->model.ctx_b_ms, REL_FIT) &&
              close_rel(ra->model.bic_context, rb->model.bic_context, REL_FIT),
          "the model: %d c %.12g vs %d c %.12g", ra->model.best, ra->model.ctx_c_ms, rb->model.best,
          rb->model.ctx_c_ms);
    CHECK(ra->chart.n_steady + ra->chart.n_other == rb->chart.n_steady + rb->chart.n_other, "chart points");
    check_histograms(run, ra, rh);
    fit_result_free(ra);
    fit_result_free(rb);
    fit_result_free(rh);
    fit_run_free(run);
    tu_rmtree(dir);
    TEST_MAIN_END();
}
