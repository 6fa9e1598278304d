/* headline.c: fit/headline.c's headline in words, the same in every
 * printer: the sweep's ending, `fit`, `plan`, `compare` and the report lead
 * with it. First the chosen model (or, where no model of the family fits
 * every level within 5%, that, with what was measured), then how it predicts
 * the levels it did not see, then the line as the line when it was not
 * chosen. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "html_internal.h"

const char *rpt_fmt_dec(char buf[48], double v, int d)
{
    if (d < 0)
        snprintf(buf, 48, "%.6g", v);
    else
        snprintf(buf, 48, "%.*f", d, v);
    return buf;
}

/* printf at b + *at, never past n; *at stays within n. */
__attribute__((format(printf, 4, 5))) static void apf(char *b, size_t n, size_t *at, const char *fmt, ...)
{
    if (*at >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b + *at, n - *at, fmt, ap);
    va_end(ap);
    if (k > 0)
        *at = *at + (size_t)k < n ? *at + (size_t)k : n - 1;
}

/* "64,256": the concurrencies of the client-bound levels whose steps made
 * the law (fit_result.law_client_bound). */
static const char *client_bound_cs(const fit_result *r, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_levels && n < cap; i++)
        if (r->levels[i].client_bound && r->levels[i].n_steady_points > 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d", n ? "," : "", r->levels[i].concurrency);
    return buf;
}

static int rich(const fit_result *r)
{
    return r->headline.model != FIT_MODEL_LINEAR;
}

/* "step(N) = a + b*N ms  (a 95% [..], b 95% [..])", and the same at time
 * scale 1 on the bundled engine, with the engine's law as written. */
static void line_words(const fit_result *r, char *b, size_t n, size_t *at)
{
    const fit_law *L = &r->law;
    char x[6][48];
    int da = fit_ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = fit_ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    apf(b, n, at, "step(N) = %s + %s*N ms  (a 95%% [%s, %s], b 95%% [%s, %s])", rpt_fmt_dec(x[0], L->a_ms, da),
        rpt_fmt_dec(x[1], L->b_ms, db), rpt_fmt_dec(x[2], L->a_ci_ms[0], da), rpt_fmt_dec(x[3], L->a_ci_ms[1], da),
        rpt_fmt_dec(x[4], L->b_ci_ms[0], db), rpt_fmt_dec(x[5], L->b_ci_ms[1], db));
    if (!r->has_truth || !isfinite(r->time_scale) || !(r->time_scale > 0))
        return;
    /* The bundled engine plays its law time_scale times faster; undo that
     * so the line reads in the law the user configured ("52+30n"), with
     * the decimals the interval needs at that scale (at least one). */
    double k = 1.0 / r->time_scale;
    int ua = fit_ci_decimals(k * L->a_ci_ms[0], k * L->a_ci_ms[1]);
    int ub = fit_ci_decimals(k * L->b_ci_ms[0], k * L->b_ci_ms[1]);
    if (r->time_scale != 1)
        apf(b, n, at, " = %s + %s*N ms at time scale 1", rpt_fmt_dec(x[0], k * L->a_ms, ua < 1 ? 1 : ua),
            rpt_fmt_dec(x[1], k * L->b_ms, ub < 1 ? 1 : ub));
    if (r->engine_law_spec[0])
        apf(b, n, at, " (engine law %s)", r->engine_law_spec);
}

/* "model (context): step(N, K) = ... ms (K: ...)", at time scale 1 too. */
static void model_words(const fit_result *r, char *b, size_t n, size_t *at, const char *aside)
{
    const fit_model_fit *f = &r->model.chosen;
    apf(b, n, at, "model (%s%s): ", fit_model_name(r->headline.model), aside);
    if (!rich(r)) {
        line_words(r, b, n, at);
        return;
    }
    char formula[200];
    int ctx = fit_model_fit_has(f, FIT_TERM_K);
    fit_model_fit_formula(f, 1, formula, sizeof formula);
    apf(b, n, at, "step(N%s) = %s ms%s", ctx ? ", K" : "", formula,
        ctx ? " (K: context tokens of the running requests)" : "");
    if (r->has_truth && r->time_scale > 0 && r->time_scale != 1) {
        fit_model_fit_formula(f, 1 / r->time_scale, formula, sizeof formula);
        apf(b, n, at, " = %s ms at time scale 1", formula);
    }
}

void rpt_headline_text(const fit_result *r, char *b, size_t n)
{
    const fit_headline *h = &r->headline;
    size_t at = 0;
    b[0] = 0;
    if (!h->fits && h->worst_level >= 0 && h->best_level >= 0) {
        const fit_level *W = &r->levels[h->worst_level], *B = &r->levels[h->best_level];
        apf(b, n, &at,
            "NO MODEL OF THE FAMILY FITS EVERY LEVEL WITHIN %.0f%%: the best level measured %.4g tok/s at C=%d; "
            "the %s model misses C=%d by %+.1f%% (measured %.4g tok/s, the model %.4g); no ceiling said",
            100 * FIT_MODEL_LEVEL_FIT, B->steady_tok_per_s, B->concurrency, fit_model_name(h->model),
            W->concurrency, 100 * W->model_error_rel, W->steady_tok_per_s, W->model_pred_tok_per_s);
        return;
    }
    model_words(r, b, n, &at, "");
    if (isfinite(h->ceiling_tok_per_s)) {
        int ctx = rich(r) && fit_model_fit_has(&r->model.chosen, FIT_TERM_K) && isfinite(r->context_per_req_tok);
        apf(b, n, &at, " -> at most %.4g tok/s", h->ceiling_tok_per_s);
        if (ctx)
            apf(b, n, &at, " at %.0f tokens of context per request", r->context_per_req_tok);
        apf(b, n, &at, " as N grows (extrapolated: the model gives %.4g at C=%d, the largest measured)",
            h->at_max_c_tok_per_s, h->max_c);
        if (!rich(r) && isfinite(r->n_half))
            apf(b, n, &at, ", N1/2 = %.3g", r->n_half);
    } else if (h->no_ceiling[0]) {
        apf(b, n, &at, "; no ceiling: %s", h->no_ceiling);
    }
    char cs[128];
    if (r->law_client_bound)
        apf(b, n, &at, "  -- NOT THE SERVER'S LAW: the client set the pace at C=%s (see notes)",
            client_bound_cs(r, cs, sizeof cs));
}

void rpt_heldout_text(const fit_result *r, char *b, size_t n)
{
    const fit_headline *h = &r->headline;
    const char *name = fit_model_name(h->model);
    size_t at = 0;
    b[0] = 0;
    if (!h->n_heldout) {
        apf(b, n, &at, "held out: %s", r->model.no_heldout[0] ? r->model.no_heldout : "no level to predict");
        return;
    }
    const fit_level *W = &r->levels[h->heldout_worst_level];
    if (h->heldout_warn)
        apf(b, n, &at,
            "HELD OUT, A LEVEL IS MISSED: the %s model refitted without C=%d predicts %.4g tok/s there, measured "
            "%.4g (%+.1f%%, beyond %.0f%%): it describes the levels it saw, not those between or beyond them",
            name, W->concurrency, W->heldout_pred_tok_per_s, W->steady_tok_per_s, 100 * W->heldout_error_rel,
            100 * FIT_HELDOUT_BOUND);
    else
        apf(b, n, &at,
            "held out: refitted without each level in turn, the %s model predicts it within %.2g%% (worst C=%d; "
            "%zu levels; bound %.0f%%)",
            name, 100 * fabs(W->heldout_error_rel), W->concurrency, h->n_heldout, 100 * FIT_HELDOUT_BOUND);
}

void rpt_other_line_text(const fit_result *r, char *b, size_t n)
{
    size_t at = 0;
    double lo = INFINITY, hi = -INFINITY;
    b[0] = 0;
    if (!r->law.ok)
        return;
    if (!rich(r) && r->headline.fits)
        return; /* the line is the headline */
    if (!rich(r)) {
        model_words(r, b, n, &at, ", does not fit every level");
        return;
    }
    if (!r->headline.fits)
        model_words(r, b, n, &at, ", does not fit every level");
    for (size_t i = 0; i < r->n_levels; i++)
        if (isfinite(r->levels[i].error_rel) && !r->levels[i].profiled_out) {
            lo = fmin(lo, r->levels[i].error_rel);
            hi = fmax(hi, r->levels[i].error_rel);
        }
    apf(b, n, &at, "%sline (not chosen): ", at ? "\n" : "");
    line_words(r, b, n, &at);
    if (isfinite(lo))
        apf(b, n, &at, "; off the levels by %+.1f%% to %+.1f%%", 100 * lo, 100 * hi);
}
