/* compare_print.c: the terminal form of `loadlaw compare` — both laws, the
 * slope ratio, per-level speedups with their intervals and latency changes,
 * and the verdict line a person pastes into a pull request. The --json object
 * is compare_json.c's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "html_internal.h"
#include "report.h"

static const char *n2(char *b, size_t n, double x, int d)
{
    if (!isfinite(x))
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%.*f", d, x);
    return b;
}

/* Decimals that keep an interval from collapsing ("[1.00, 1.00]"): those of
 * fit_ci_decimals, at least min_d. */
_Static_assert(FIT_COMPARE_MIN_UNITS == 10, "the notes below say 10");
static int ci_decimals(const double ci[2], int min_d)
{
    int d = fit_ci_decimals(ci[0], ci[1]);
    return d < min_d ? min_d : d;
}

static void law_line(FILE *f, const char *tag, const char *label, const fit_law *l, double asym)
{
    char x[7][32];
    if (!l->ok) {
        fprintf(f, "  %s %-24s no law (too few steady points)\n", tag, label);
        return;
    }
    int da = ci_decimals(l->a_ci_ms, 2), db = ci_decimals(l->b_ci_ms, 3);
    fprintf(f, "  %s %-24s step = %s + %s*N ms  a [%s, %s]  b [%s, %s]  -> %s tok/s max\n", tag, label,
            n2(x[0], 32, l->a_ms, da), n2(x[1], 32, l->b_ms, db), n2(x[2], 32, l->a_ci_ms[0], da),
            n2(x[3], 32, l->a_ci_ms[1], da), n2(x[4], 32, l->b_ci_ms[0], db), n2(x[5], 32, l->b_ci_ms[1], db),
            n2(x[6], 32, asym, 1));
}

/* "12.3 -> 8.1 (-34%)" */
static const char *change(char *b, size_t n, double a, double bb)
{
    if (!isfinite(a) || !isfinite(bb)) {
        snprintf(b, n, "-");
        return b;
    }
    double pct = a > 0 ? round(100 * (bb / a - 1)) : 0;
    if (a > 0)
        snprintf(b, n, "%.1f -> %.1f (%+.0f%%)", a, bb, pct == 0 ? 0.0 : pct);
    else
        snprintf(b, n, "%.1f -> %.1f", a, bb);
    return b;
}

/* Both runs on the same richer model: every term B/A. */
static void print_terms(FILE *f, const fit_compare *c)
{
    char x[3][64];
    if (!c->n_terms)
        return;
    fprintf(f, "  %s model, both runs: each term B/A (HC3):", fit_model_name(c->terms_model));
    for (size_t j = 0; j < c->n_terms; j++) {
        char name[48];
        if (c->term[j] == FIT_TERM_HINGE)
            snprintf(name, sizeof name, "(N-%g)+", c->term_knee[j]);
        else
            snprintf(name, sizeof name, "%s", fit_term_name(c->term[j]));
        fprintf(f, "%s %s %s [%s, %s]", j ? "," : "", name, n2(x[0], 64, c->term_ratio[j], 3),
                n2(x[1], 64, c->term_ratio_ci[j][0], 3), n2(x[2], 64, c->term_ratio_ci[j][1], 3));
    }
    fputc('\n', f);
}

void rpt_compare_headlines(FILE *f, const fit_result *ra, const char *label_a, const fit_result *rb,
                           const char *label_b)
{
    const fit_result *r[2] = {ra, rb};
    const char *label[2] = {label_a, label_b};
    char text[1024];
    for (int i = 0; i < 2; i++) {
        if (r[i]->law.ok)
            rpt_headline_text(r[i], text, sizeof text);
        fprintf(f, "%s (%s): %s\n", i ? "B" : "A", label[i], r[i]->law.ok ? text : r[i]->no_law);
        if (!r[i]->law.ok)
            continue;
        rpt_heldout_text(r[i], text, sizeof text);
        fprintf(f, "  %s\n", text);
    }
    fputc('\n', f);
}

void rpt_compare_print(FILE *f, const fit_compare *c, const char *label_a, const char *label_b)
{
    char x[8][64];
    fprintf(f, "lines (mean step time a + b*N, fitted on steady decode steps; each run's chosen model is above)\n");
    law_line(f, "A", label_a, &c->law_a, c->asym_a_tok_per_s);
    law_line(f, "B", label_b, &c->law_b, c->asym_b_tok_per_s);
    if (isfinite(c->slope_ratio))
        fprintf(f, "  slope B/A %s [%s, %s] (%s%s)\n", n2(x[0], 64, c->slope_ratio, 3),
                n2(x[1], 64, c->slope_ratio_ci[0], 3), n2(x[2], 64, c->slope_ratio_ci[1], 3), c->slope_method,
                c->slope_method[0] == 'b' ? ", steady step time per level against C" : " method, from the laws' standard errors");
    else if (strcmp(c->slope_method, "unresolved") == 0)
        fprintf(f, "  slope B/A: none (%s's slope b has a 95%% interval that includes 0: no measurable growth with "
                   "N, and a ratio to a slope that may be 0 means nothing)\n",
                c->law_a.ok && !fit_law_slope_resolved(&c->law_a) ? "A" : "B");
    print_terms(f, c);
    if (c->paired)
        fprintf(f, "\nper level: steady throughput B/A, paired (interleaved A/B): geometric mean of the pairs' "
                   "ratios, %.0f%% t interval over pairs with each pair's step noise as a floor (fit.h)\n",
                100 * c->ci);
    else
        fprintf(f, "\nper level: steady throughput B/A with a %.0f%% bootstrap interval (%d resamples of engine "
                   "steps)\n",
                100 * c->ci, c->n_resamples);
    fprintf(f, "  %5s %10s %10s %7s %17s %7s  %-24s %-24s %-24s\n", "C", "A tok/s", "B tok/s", "B/A", "interval",
            "model", "TTFT p50 ms A -> B", "TTFA p50 ms A -> B", "ITL p50 ms A -> B");
    for (size_t i = 0; i < c->n_levels; i++) {
        const fit_compare_level *L = &c->levels[i];
        char iv[160], key[32];
        int d = ci_decimals(L->ratio_ci, 2);
        snprintf(iv, sizeof iv, "[%s, %s]", n2(x[0], 64, L->ratio_ci[0], d), n2(x[1], 64, L->ratio_ci[1], d));
        const char *note = !L->steady ? "  (decode spans)" : "";
        if (!L->n_pairs && isfinite(L->ratio) && !isfinite(L->ratio_ci[0]) &&
            (L->n_units_a < FIT_COMPARE_MIN_UNITS || L->n_units_b < FIT_COMPARE_MIN_UNITS))
            note = L->steady ? "  (under 10 steps a side: no interval)" : "  (decode spans; under 10 a side: no interval)";
        /* an open level by its rate (its tok/s are per-stream decode rates) */
        if (L->open_loop)
            snprintf(key, sizeof key, "%g/s", L->rate_per_s);
        else
            snprintf(key, sizeof key, "%d", L->concurrency);
        char mr[64];
        fprintf(f, "  %5s %10s %10s %7s %17s %7s  %-24s %-24s %-24s%s\n", key,
                n2(x[2], 64, L->tok_per_s_a, 1), n2(x[3], 64, L->tok_per_s_b, 1), n2(x[4], 64, L->ratio, 2), iv,
                n2(mr, 64, L->model_ratio, 2),
                change(x[5], 64, L->lat_a.ttft.p50_ms, L->lat_b.ttft.p50_ms),
                change(x[6], 64, L->lat_a.ttfa.p50_ms, L->lat_b.ttfa.p50_ms),
                change(x[7], 64, L->lat_a.itl.p50_ms, L->lat_b.itl.p50_ms), note);
    }
    fprintf(f, "  (model: B/A as each run's chosen model predicts it at the level's C and mean context; far from "
               "the measured B/A, a model misses that level)\n");
    for (size_t i = 0; i < c->n_levels; i++) {
        const fit_compare_level *L = &c->levels[i];
        if (!L->n_pairs)
            continue;
        if (L->open_loop)
            fprintf(f, "  pairs at %g req/s:", L->rate_per_s);
        else
            fprintf(f, "  pairs at C=%d:", L->concurrency);
        for (size_t k = 0; k < L->n_pairs; k++)
            fprintf(f, " %s", n2(x[0], 64, L->pair_ratio[k], 3));
        if (L->n_pairs == 1 && !isfinite(L->ratio_ci[0]))
            fprintf(f, "  (one pair, with no step noise to see: no interval; --repeat 3 gives pairs to compare)\n");
        else if (L->n_pairs == 1)
            fprintf(f, "  (one pair: its step noise alone; --repeat 3 shows the spread between pairs)\n");
        else
            fprintf(f, "  (spread beyond step noise %s, t with %s df)\n", L->between_var > 0 ? "yes" : "no",
                    n2(x[1], 64, L->df, 0));
    }
    fprintf(f, "\n  %5s %-24s %-24s %-24s\n", "C", "TTFT p99 ms A -> B", "TTFA p99 ms A -> B", "ITL p99 ms A -> B");
    for (size_t i = 0; i < c->n_levels; i++) {
        const fit_compare_level *L = &c->levels[i];
        fprintf(f, "  %5d %-24s %-24s %-24s\n", L->concurrency,
                change(x[0], 64, L->lat_a.ttft.p99_ms, L->lat_b.ttft.p99_ms),
                change(x[1], 64, L->lat_a.ttfa.p99_ms, L->lat_b.ttfa.p99_ms),
                change(x[2], 64, L->lat_a.itl.p99_ms, L->lat_b.itl.p99_ms));
    }
    fprintf(f, "\n%s\n", c->verdict);
}
