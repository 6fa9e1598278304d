/* position.c: step time against position in the request.
 *
 * Each step sample carries the tokens its request had received before it
 * (fit_sample.pos_tok, set where timeline.c builds the samples). A level's
 * samples fall into FIT_POS_BINS bins of equal width over [0, pos_max_tok];
 * each bin's mean is sum of gaps over sum of tokens, as the law's points and
 * the steady throughput are. Two series: the steady samples (a closed-loop
 * level's at N = C only, so the batch is the same early and late and what
 * moves the step is the context; an open-loop level's all steady ones) and
 * every sample, steps shared with prefill included. Late tokens slower in
 * steady steps: the step grows with the context (model.c "The context
 * term"). Early tokens slower over every sample but not in steady steps:
 * they share steps with prefill. fit_level's early_ms and late_ms are the
 * first FIT_POS_BINS/4 bins and the last FIT_POS_BINS/4 together (the first
 * and last quarter of positions); a difference within FIT_POS_SAME_FRAC is
 * read as none. Two passes over the level's samples, O(n). */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Samples of one level that the steady series counts: steady, and in a
 * closed-loop level at N = C (the same batch early and late). */
static int steady_counts(const fit_sample *s, int at_c)
{
    return s->steady && (at_c <= 0 || (int)s->n == at_c);
}

static double ratio_or_nan(double ms, double tok)
{
    return tok > 0 ? ms / tok : NAN;
}

/* out's means and quarters from the bins' sums (ms; out's tokens). */
static void bins_finish(const double *st_ms, const double *all_ms, fit_pos_bins *out)
{
    /* the first and the last quarter of positions: FIT_POS_BINS / 4 bins each */
    double q[4][2] = {{0}};
    for (int b = 0; b < FIT_POS_BINS; b++) {
        out->steady_ms[b] = ratio_or_nan(st_ms[b], out->steady_tok[b]);
        out->all_ms[b] = ratio_or_nan(all_ms[b], out->all_tok[b]);
        int late = b >= FIT_POS_BINS - FIT_POS_BINS / 4;
        if (b >= FIT_POS_BINS / 4 && !late)
            continue;
        q[late][0] += st_ms[b];
        q[late][1] += out->steady_tok[b];
        q[2 + late][0] += all_ms[b];
        q[2 + late][1] += out->all_tok[b];
    }
    out->early_ms = ratio_or_nan(q[0][0], q[0][1]);
    out->late_ms = ratio_or_nan(q[1][0], q[1][1]);
    out->early_all_ms = ratio_or_nan(q[2][0], q[2][1]);
    out->late_all_ms = ratio_or_nan(q[3][0], q[3][1]);
    if (out->pos_max_tok < 0)
        out->pos_max_tok = out->width_tok = NAN;
}

/* The bins and quarters of the samples of level_idx among s[0..n). at_c:
 * the level's C when closed loop, else 0. */
static void position_of(const fit_sample *s, size_t n, int32_t level_idx, int at_c, fit_pos_bins *out)
{
    double st_ms[FIT_POS_BINS] = {0}, all_ms[FIT_POS_BINS] = {0};
    memset(out, 0, sizeof *out);
    out->pos_max_tok = -1;
    for (size_t i = 0; i < n; i++)
        if (s[i].level_idx == level_idx && s[i].pos_tok > out->pos_max_tok)
            out->pos_max_tok = s[i].pos_tok;
    out->width_tok = (out->pos_max_tok + 1) / FIT_POS_BINS;
    for (size_t i = 0; i < n && out->pos_max_tok >= 0; i++) {
        if (s[i].level_idx != level_idx)
            continue;
        int b = (int)(s[i].pos_tok / out->width_tok);
        b = b < 0 ? 0 : b >= FIT_POS_BINS ? FIT_POS_BINS - 1 : b;
        double ms = s[i].gap_ms * s[i].tokens; /* the whole gap */
        all_ms[b] += ms;
        out->all_tok[b] += s[i].tokens;
        if (steady_counts(&s[i], at_c)) {
            st_ms[b] += ms;
            out->steady_tok[b] += s[i].tokens;
        }
    }
    bins_finish(st_ms, all_ms, out);
}

static int level_at_c(const fit_level *L)
{
    return L->closed_loop && L->concurrency > 0 ? L->concurrency : 0;
}

static void level_figures(fit_level *L, const fit_pos_bins *out)
{
    L->pos_max_tok = out->pos_max_tok;
    L->early_ms = out->early_ms;
    L->late_ms = out->late_ms;
    L->early_all_ms = out->early_all_ms;
    L->late_all_ms = out->late_all_ms;
}

void fit_position_level(fit_level *L, const fit_sample *s, size_t n, int32_t level_idx, fit_pos_bins *out)
{
    position_of(s, n, level_idx, level_at_c(L), out);
    level_figures(L, out);
}

void fit_pos_acc_init(fit_pos_acc *a, const fit_level *L)
{
    memset(a, 0, sizeof *a);
    a->at_c = level_at_c(L);
    a->pos_max = -1;
}

int fit_pos_acc_add(fit_pos_acc *a, const fit_sample *s)
{
    size_t p = s->pos_tok > 0 ? (size_t)s->pos_tok : 0; /* bin 0 either way */
    if (p >= a->n) {
        size_t n = a->n ? a->n : 1024;
        while (n <= p)
            n *= 2;
        double(*v)[4] = realloc(a->sum, n * sizeof *v);
        if (!v)
            return LL_ENOMEM;
        memset(v + a->n, 0, (n - a->n) * sizeof *v);
        a->sum = v;
        a->n = n;
    }
    double ms = s->gap_ms * s->tokens; /* the whole gap */
    a->sum[p][0] += ms;
    a->sum[p][1] += s->tokens;
    if (steady_counts(s, a->at_c)) {
        a->sum[p][2] += ms;
        a->sum[p][3] += s->tokens;
    }
    if (s->pos_tok > a->pos_max)
        a->pos_max = s->pos_tok;
    return 0;
}

/* The per-position sums into position_of's bins: the same bins, the same
 * figures, each sum added in another order (a last bit apart at most). */
void fit_pos_acc_finish(fit_pos_acc *a, fit_level *L, fit_pos_bins *out)
{
    double st_ms[FIT_POS_BINS] = {0}, all_ms[FIT_POS_BINS] = {0};
    memset(out, 0, sizeof *out);
    out->pos_max_tok = a->pos_max;
    out->width_tok = (out->pos_max_tok + 1) / FIT_POS_BINS;
    for (size_t p = 0; a->pos_max >= 0 && p < a->n && p <= (size_t)a->pos_max; p++) {
        int b = (int)((double)p / out->width_tok);
        b = b < 0 ? 0 : b >= FIT_POS_BINS ? FIT_POS_BINS - 1 : b;
        all_ms[b] += a->sum[p][0];
        out->all_tok[b] += a->sum[p][1];
        st_ms[b] += a->sum[p][2];
        out->steady_tok[b] += a->sum[p][3];
    }
    bins_finish(st_ms, all_ms, out);
    fit_pos_acc_free(a);
    level_figures(L, out);
}

void fit_pos_acc_free(fit_pos_acc *a)
{
    free(a->sum);
    a->sum = NULL;
    a->n = 0;
}

/* The bins reduce.c kept when the level's samples were made. */
void fit_level_position(const fit_result *r, size_t level_idx, fit_pos_bins *out)
{
    if (level_idx >= r->n_levels || !r->kept || level_idx >= r->kept->n_levels) {
        position_of(NULL, 0, -1, 0, out);
        return;
    }
    *out = r->kept->levels[level_idx].pos;
}
