/* check_decode.c: decode-time against prefill-time logprobs (fit_outputs.h,
 * `loadlaw check-decode`).
 *
 * Per position i of a request's output, delta_i = decode_lp_i - prefill_lp_i
 * for the token decode chose. Figures per level and over all levels: mean
 * and max |delta|, the share of positions over the bound, the share whose
 * token prefill ranks first (for a greedy run every one should be, up to
 * near-ties), and the share that disagree (the gate). Positions where either
 * side said nothing (NAN) are skipped, not counted as agreeing.
 *
 * The bound. Decode and prefill are different kernels: they sum in other
 * orders and batch shapes, so even when both are right their logits differ
 * by what the server's arithmetic rounds. In a format with unit roundoff u
 * (fp32 2^-24, fp16 2^-11, bf16 2^-8) the logits are rounded, and where
 * decode's and prefill's unrounded logit straddle a rounding boundary the
 * two differ by one ulp, up to 2u|logit|; the logprob moves by about as
 * much. The server returns logprobs, not logits, so 1 + |prefill lp| stands
 * for the logit's size, and a position may differ by
 *     bound = tolerance + 4u (1 + |prefill lp|)
 * (2u for one ulp, twice that for the two paths' other roundings). For fp32
 * the rounding term is below 10^-5 and the bound is the tolerance (0.005:
 * the bundled engine prints 4 decimals). Measured (docs/check-decode.md): a
 * healthy bf16 vLLM's worst position was 0.0326 nat at lp -3.3 (its logits
 * near 5: a bf16 ulp there is 2^-5 = 0.031), under the bound's 0.072 there;
 * its rank misses are near-ties of exactly 0 or one ulp. A rank miss counts
 * only beyond the bound: greedy decode chose its argmax, so prefill putting
 * another token first by more than rounding explains is a wrong
 * distribution at that token or at the other. A bf16 server cannot show a
 * fault smaller than its rounding: the bundled engine's testing faults (at
 * most 0.03 and 0.11 nat at lp -6.9, rank gaps under 0.04) would pass a bf16
 * bound; they fail the fp32 one the bundled engine is judged by. */
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
    s->mean_abs = s->share_over = s->share_rank1 = s->share_disagree = NAN;
}

/* Unit roundoff per format, in fit_cd_dtype's order; and the spellings. */
static const struct {
    const char *name, *alias;
    double unit_roundoff;
} k_dtypes[FIT_CD_DTYPE__COUNT] = {
    {"fp32", "float32", 0x1p-24},
    {"bf16", "bfloat16", 0x1p-8},
    {"fp16", "float16", 0x1p-11},
};
#define CD_ROUNDINGS 4.0 /* one ulp is 2u; twice that for the two paths' other roundings */

int fit_cd_dtype_parse(const char *s, fit_cd_dtype *out)
{
    for (int d = 0; d < FIT_CD_DTYPE__COUNT; d++)
        if (s && (strcmp(s, k_dtypes[d].name) == 0 || strcmp(s, k_dtypes[d].alias) == 0)) {
            *out = (fit_cd_dtype)d;
            return 0;
        }
    return LL_EINVAL;
}

const char *fit_cd_dtype_name(fit_cd_dtype d) { return (unsigned)d < FIT_CD_DTYPE__COUNT ? k_dtypes[d].name : "?"; }

double fit_cd_bound(const fit_check_decode *c, double lp) { return c->tolerance + c->rel * (1 + fabs(lp)); }

fit_check_decode *fit_cd_new(double tolerance, fit_cd_dtype dtype, double max_over)
{
    fit_check_decode *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tolerance = tolerance;
    c->max_over = max_over;
    c->dtype = (unsigned)dtype < FIT_CD_DTYPE__COUNT ? dtype : FIT_CD_FP32;
    c->rel = CD_ROUNDINGS * k_dtypes[c->dtype].unit_roundoff;
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

/* One position: d, p decode's and prefill's logprob of decode's token, top
 * prefill's first logprob there, rank prefill's rank of the token. */
static void add_pos(fit_cd_stats *s, const fit_check_decode *c, const char *key, size_t i, double d, double p,
                    double top, int rank)
{
    if (rank > 0) {
        s->n_ranked++;
        s->n_rank1 += rank == 1;
        s->share_rank1 = (double)s->n_rank1 / (double)s->n_ranked;
    }
    if (!isfinite(d) || !isfinite(p))
        return;
    double a = fabs(d - p), bound = fit_cd_bound(c, p);
    int over = a > bound, miss = rank > 1 && isfinite(top) && top - p > bound;
    s->n_pos++;
    s->n_over += over;
    s->n_rank_miss += miss;
    s->n_disagree += over || miss;
    s->sum_abs += a;
    s->mean_abs = s->sum_abs / (double)s->n_pos;
    s->share_over = (double)s->n_over / (double)s->n_pos;
    s->share_disagree = (double)s->n_disagree / (double)s->n_pos;
    if (a > s->max_abs || s->n_pos == 1) {
        s->max_abs = a;
        snprintf(s->worst_key, sizeof s->worst_key, "%s", key ? key : "");
        s->worst_pos = i;
        s->worst_decode = d;
        s->worst_prefill = p;
    }
}

int fit_cd_add(fit_check_decode *c, int level, int concurrency, const char *key, const double *decode_lp,
               const double *prefill_lp, const double *prefill_top_lp, const int *rank, size_t n)
{
    fit_cd_stats *lv = level_stats(c, level, concurrency);
    if (!lv)
        return LL_ENOMEM;
    lv->n_req++;
    c->all.n_req++;
    for (size_t i = 0; i < n; i++) {
        int r = rank ? rank[i] : 0;
        double top = prefill_top_lp ? prefill_top_lp[i] : NAN;
        add_pos(lv, c, key, i, decode_lp[i], prefill_lp[i], top, r);
        add_pos(&c->all, c, key, i, decode_lp[i], prefill_lp[i], top, r);
    }
    return 0;
}

size_t fit_cd_positions(const fit_check_decode *c) { return c->all.n_pos; }

double fit_cd_share_disagree(const fit_check_decode *c) { return c->all.share_disagree; }

int fit_cd_passed(const fit_check_decode *c) { return c->all.n_pos > 0 && c->all.share_disagree <= c->max_over; }
