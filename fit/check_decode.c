/* check_decode.c: decode-time against prefill-time logprobs (fit_outputs.h,
 * `loadlaw check-decode`).
 *
 * Per position i of a request's output, delta_i = decode_lp_i - prefill_lp_i
 * for the token decode chose. Figures per level and over all levels: mean
 * and max |delta|, the share of positions with |delta| > tolerance (the
 * gate), and the share of positions whose token prefill ranks first (for a
 * greedy run every one should be, up to near-ties). Positions where either
 * side said nothing (NAN) are skipped, not counted as agreeing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fit_outputs.h"

static void stats_init(fit_cd_stats *s, int level, int concurrency)
{
    memset(s, 0, sizeof *s);
    s->level = level;
    s->concurrency = concurrency;
    s->worst_decode = s->worst_prefill = NAN;
    s->mean_abs = s->share_over = s->share_rank1 = NAN;
}

fit_check_decode *fit_cd_new(double tolerance, double max_over)
{
    fit_check_decode *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tolerance = tolerance;
    c->max_over = max_over;
    stats_init(&c->all, -1, -1);
    return c;
}

void fit_cd_free(fit_check_decode *c)
{
    if (!c)
        return;
    free(c->levels);
    free(c);
}

static fit_cd_stats *level_stats(fit_check_decode *c, int level, int concurrency)
{
    for (size_t i = 0; i < c->n_levels; i++)
        if (c->levels[i].level == level)
            return &c->levels[i];
    fit_cd_stats *g = realloc(c->levels, (c->n_levels + 1) * sizeof *g);
    if (!g)
        return NULL;
    c->levels = g;
    stats_init(&g[c->n_levels], level, concurrency);
    return &g[c->n_levels++];
}

static void add_pos(fit_cd_stats *s, double tol, const char *key, size_t i, double d, double p, int rank)
{
    if (rank > 0) {
        s->n_ranked++;
        s->n_rank1 += rank == 1;
        s->share_rank1 = (double)s->n_rank1 / (double)s->n_ranked;
    }
    if (!isfinite(d) || !isfinite(p))
        return;
    double a = fabs(d - p);
    s->n_pos++;
    s->n_over += a > tol;
    s->sum_abs += a;
    s->mean_abs = s->sum_abs / (double)s->n_pos;
    s->share_over = (double)s->n_over / (double)s->n_pos;
    if (a > s->max_abs || s->n_pos == 1) {
        s->max_abs = a;
        snprintf(s->worst_key, sizeof s->worst_key, "%s", key ? key : "");
        s->worst_pos = i;
        s->worst_decode = d;
        s->worst_prefill = p;
    }
}

int fit_cd_add(fit_check_decode *c, int level, int concurrency, const char *key, const double *decode_lp,
               const double *prefill_lp, const int *rank, size_t n)
{
    fit_cd_stats *lv = level_stats(c, level, concurrency);
    if (!lv)
        return LL_ENOMEM;
    lv->n_req++;
    c->all.n_req++;
    for (size_t i = 0; i < n; i++) {
        int r = rank ? rank[i] : 0;
        add_pos(lv, c->tolerance, key, i, decode_lp[i], prefill_lp[i], r);
        add_pos(&c->all, c->tolerance, key, i, decode_lp[i], prefill_lp[i], r);
    }
    return 0;
}

size_t fit_cd_positions(const fit_check_decode *c) { return c->all.n_pos; }

double fit_cd_share_over(const fit_check_decode *c) { return c->all.share_over; }

int fit_cd_passed(const fit_check_decode *c) { return c->all.n_pos > 0 && c->all.share_over <= c->max_over; }
