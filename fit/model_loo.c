/* model_loo.c: the chosen model with each level left out in turn.
 *
 * The level it rests on alone: the level (its N) without which the chosen
 * model would not qualify against the line (model.c "The chosen model").
 *
 * Held-out prediction: for each distinct N, the chosen family refitted on
 * the points at every other N — its knees searched again over the run's N,
 * the left-out N among them (a concurrency the run chose to measure, not a
 * measurement: a knee at the left-out level is then found from the levels on
 * either side of it, as a kernel that changes path there would show) — and
 * kept, so that fit/analyze_law.c predicts the
 * level it never saw at the level's own N and mean context K. That is the
 * claim a fitted law makes (it predicts where it was not measured), and the
 * plain warning when it does not. Levels at the same C share their N and are
 * left out together: one of two repeats would otherwise predict the other
 * from itself. The check needs as many levels as the model has parameters
 * (its knees counted) and one more than its coefficients; a run with fewer
 * says it cannot be made (fit_model_check.no_heldout). */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The arrays a check without one level is built in. */
typedef struct loo_buf {
    double *x, *y, *k, *d;
} loo_buf;

static int loo_alloc(loo_buf *b, const mdata *md)
{
    b->x = malloc((md->n + 1) * sizeof *b->x);
    b->y = malloc((md->n + 1) * sizeof *b->y);
    b->k = malloc((md->n + 1) * sizeof *b->k);
    b->d = malloc((md->nd + 1) * sizeof *b->d);
    return b->x && b->y && b->k && b->d ? 0 : LL_ENOMEM;
}

static void loo_free(loo_buf *b)
{
    free(b->x);
    free(b->y);
    free(b->k);
    free(b->d);
}

/* md's points without those at N = md->d[j], into *s (over b's arrays),
 * with their own OLS line in s->cl and *line. 0, or the fit's error. */
static int loo_without(const mdata *md, size_t j, loo_buf *b, mdata *s, fit_model_fit *line)
{
    *s = *md;
    s->n = s->nd = 0;
    for (size_t i = 0; i < md->n; i++)
        if (md->x[i] != md->d[j]) {
            b->x[s->n] = md->x[i];
            b->y[s->n] = md->y[i];
            b->k[s->n++] = md->k ? md->k[i] : 0;
        }
    for (size_t q = 0; q < md->nd; q++)
        if (q != j)
            b->d[s->nd++] = md->d[q];
    s->x = b->x, s->y = b->y, s->k = md->k ? b->k : NULL, s->d = b->d;
    fit_model_fit_spec(line, FIT_MODEL_LINEAR, NAN, NAN);
    int rc = fit_model_fit_run(line, s->x, s->y, s->k, s->n, s->floor_rss, 0, NULL);
    s->cl[0] = line->coef[0];
    s->cl[1] = line->coef[1];
    s->bic_line = line->bic;
    return rc;
}

double fit_model_alone_level(const mdata *md, const fit_model_fit *chosen, const fit_options *opt)
{
    double out = NAN, least = INFINITY;
    loo_buf b;
    int ok = loo_alloc(&b, md) == 0;
    for (size_t j = 0; ok && md->nd >= 4 && j < md->nd; j++) {
        mdata s;
        fit_model_fit line, f = *chosen;
        if (loo_without(md, j, &b, &s, &line) || fit_mdata_fit(&s, &f, 0))
            break;
        double gain = line.bic - f.bic;
        if (!fit_model_qualifies(f.bic, line.bic, f.effect, opt) && gain < least) {
            least = gain;
            out = md->d[j];
        }
    }
    loo_free(&b);
    return out;
}

static int has_knees(fit_model_kind kind)
{
    return kind == FIT_MODEL_PIECEWISE || kind == FIT_MODEL_KNEE_CONTEXT || kind == FIT_MODEL_KNEES2;
}

/* The chosen family on s: the line, the knees searched again, or the same
 * terms. *ok = 0 when it cannot be fitted there (too few N for its knees, a
 * design the points do not fix). */
static int refit(const mdata *s, fit_model_kind kind, const fit_model_fit *line, fit_model_fit *f, int *ok)
{
    int rc;
    *ok = 0;
    if (kind == FIT_MODEL_LINEAR) {
        *f = *line;
        *ok = 1;
        return 0;
    }
    if (has_knees(kind)) {
        rc = fit_mdata_knees(s, kind, f);
    } else {
        fit_model_fit_spec(f, kind, NAN, NAN);
        rc = fit_model_fit_run(f, s->x, s->y, s->k, s->n, s->floor_rss, 0, NULL);
    }
    if (rc == LL_ENOMEM)
        return rc;
    for (size_t j = 0; rc == 0 && j < f->p; j++)
        if (!isfinite(f->coef[j]))
            rc = LL_EINVAL;
    *ok = rc == 0 && f->p > 0;
    return 0;
}

int fit_model_heldout_run(const mdata *md, fit_model_check *m)
{
    fit_model_fit two;
    fit_model_fit_spec(&two, FIT_MODEL_LINEAR, NAN, NAN);
    const fit_model_fit *c = m->best == FIT_MODEL_LINEAR ? &two : &m->chosen;
    /* as many levels as parameters (knees counted), and one more than its
     * coefficients, so that the rest fix them when one is left out */
    int params = fit_model_params(c), need = params > (int)c->p + 1 ? params : (int)c->p + 1;
    m->n_heldout = 0;
    if (md->nd < (size_t)need) {
        snprintf(m->no_heldout, sizeof m->no_heldout,
                 "not made: %zu levels; the %s model (%d parameters, knees counted) needs %d to leave one out",
                 md->nd, fit_model_name(m->best), params, need);
        return 0;
    }
    if (md->nd > FIT_MODEL_MAX_HELDOUT) {
        snprintf(m->no_heldout, sizeof m->no_heldout, "not made: %zu distinct N (at most %d are left out in turn)",
                 md->nd, FIT_MODEL_MAX_HELDOUT);
        return 0;
    }
    loo_buf b;
    int rc = loo_alloc(&b, md);
    for (size_t j = 0; rc == 0 && j < md->nd; j++) {
        mdata s;
        fit_model_fit line;
        fit_model_heldout *h = &m->heldout[m->n_heldout++];
        h->n = md->d[j];
        h->ok = 0;
        rc = loo_without(md, j, &b, &s, &line);
        if (rc == LL_ENOMEM)
            break;
        /* knees are searched over the run's N, the left-out one among them:
         * a concurrency the run chose, not a measurement */
        s.d = md->d;
        s.nd = md->nd;
        rc = rc ? 0 : refit(&s, m->best, &line, &h->f, &h->ok);
    }
    loo_free(&b);
    return rc;
}
