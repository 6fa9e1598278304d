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

/* One level's figures, or all levels' (level = concurrency = -1). */
typedef struct cd_stats {
    int level, concurrency;
    size_t n_req, n_pos;              /* requests; positions with both logprobs */
    size_t n_over;                    /* positions with |delta| > tolerance */
    size_t n_ranked, n_rank1;         /* positions with a prefill rank; of those, rank 1 */
    double sum_abs, max_abs;          /* |decode lp - prefill lp|, nats */
    char worst_key[48];               /* where max_abs is: prompt key, position */
    size_t worst_pos;
    double worst_decode, worst_prefill;
} cd_stats;

struct fit_check_decode {
    double tolerance;                 /* nats */
    double max_over;                  /* the gate: share of positions over tolerance */
    cd_stats all;
    cd_stats *levels;                 /* in the order first seen */
    size_t n_levels;
};

static void stats_init(cd_stats *s, int level, int concurrency)
{
    memset(s, 0, sizeof *s);
    s->level = level;
    s->concurrency = concurrency;
    s->worst_decode = s->worst_prefill = NAN;
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

static cd_stats *level_stats(fit_check_decode *c, int level, int concurrency)
{
    for (size_t i = 0; i < c->n_levels; i++)
        if (c->levels[i].level == level)
            return &c->levels[i];
    cd_stats *g = realloc(c->levels, (c->n_levels + 1) * sizeof *g);
    if (!g)
        return NULL;
    c->levels = g;
    stats_init(&g[c->n_levels], level, concurrency);
    return &g[c->n_levels++];
}

static void add_pos(cd_stats *s, double tol, const char *key, size_t i, double d, double p, int rank)
{
    if (rank > 0) {
        s->n_ranked++;
        s->n_rank1 += rank == 1;
    }
    if (!isfinite(d) || !isfinite(p))
        return;
    double a = fabs(d - p);
    s->n_pos++;
    s->n_over += a > tol;
    s->sum_abs += a;
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
    cd_stats *lv = level_stats(c, level, concurrency);
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

static double mean_abs(const cd_stats *s) { return s->n_pos ? s->sum_abs / (double)s->n_pos : NAN; }

static double share_over(const cd_stats *s) { return s->n_pos ? (double)s->n_over / (double)s->n_pos : NAN; }

size_t fit_cd_positions(const fit_check_decode *c) { return c->all.n_pos; }

double fit_cd_share_over(const fit_check_decode *c) { return share_over(&c->all); }

int fit_cd_passed(const fit_check_decode *c) { return c->all.n_pos > 0 && share_over(&c->all) <= c->max_over; }

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *stats_json(const cd_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok = 1;
    if (s->level >= 0)
        ok = cJSON_AddNumberToObject(o, "level", s->level) && cJSON_AddNumberToObject(o, "concurrency", s->concurrency);
    ok = ok && cJSON_AddNumberToObject(o, "requests", (double)s->n_req) &&
         cJSON_AddNumberToObject(o, "positions", (double)s->n_pos);
    ok = ok && cJSON_AddItemToObject(o, "mean_abs_delta", num_or_null(mean_abs(s)));
    ok = ok && cJSON_AddItemToObject(o, "max_abs_delta", num_or_null(s->n_pos ? s->max_abs : NAN));
    ok = ok && cJSON_AddNumberToObject(o, "over", (double)s->n_over);
    ok = ok && cJSON_AddItemToObject(o, "share_over", num_or_null(share_over(s)));
    ok = ok && cJSON_AddItemToObject(o, "share_rank1",
                                     num_or_null(s->n_ranked ? (double)s->n_rank1 / (double)s->n_ranked : NAN));
    if (ok && s->n_pos) {
        cJSON *w = cJSON_AddObjectToObject(o, "worst");
        ok = w && cJSON_AddStringToObject(w, "key", s->worst_key) &&
             cJSON_AddNumberToObject(w, "position", (double)s->worst_pos) &&
             cJSON_AddNumberToObject(w, "decode_lp", s->worst_decode) &&
             cJSON_AddNumberToObject(w, "prefill_lp", s->worst_prefill);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fit_cd_to_json(const fit_check_decode *c)
{
    cJSON *o = cJSON_CreateObject(), *lv = cJSON_CreateArray();
    cJSON *all = stats_json(&c->all);
    int ok = o && lv && all && cJSON_AddNumberToObject(o, "tolerance", c->tolerance) &&
             cJSON_AddNumberToObject(o, "max_share_over", c->max_over) &&
             cJSON_AddBoolToObject(o, "passed", fit_cd_passed(c));
    for (size_t i = 0; ok && i < c->n_levels; i++) {
        cJSON *s = stats_json(&c->levels[i]);
        ok = s && cJSON_AddItemToArray(lv, s);
        if (!ok)
            cJSON_Delete(s);
    }
    if (ok && cJSON_AddItemToObject(o, "levels", lv)) {
        lv = NULL;
        if (cJSON_AddItemToObject(o, "all", all))
            return o;
    }
    cJSON_Delete(lv);
    cJSON_Delete(all);
    cJSON_Delete(o);
    return NULL;
}

static void print_row(FILE *f, const char *name, const cd_stats *s)
{
    if (!s->n_pos) {
        fprintf(f, "%-8s %8zu %9zu %12s %12s %9s %9s\n", name, s->n_req, s->n_pos, "-", "-", "-", "-");
        return;
    }
    char r1[16] = "-";
    if (s->n_ranked)
        snprintf(r1, sizeof r1, "%.1f%%", 100.0 * (double)s->n_rank1 / (double)s->n_ranked);
    fprintf(f, "%-8s %8zu %9zu %12.3g %12.3g %8.2f%% %9s\n", name, s->n_req, s->n_pos, mean_abs(s), s->max_abs,
            100.0 * share_over(s), r1);
}

void fit_cd_print(FILE *f, const fit_check_decode *c)
{
    fprintf(f, "%-8s %8s %9s %12s %12s %9s %9s\n", "level", "requests", "positions", "mean |d| nat", "max |d| nat",
            "over tol", "prefill#1");
    for (size_t i = 0; i < c->n_levels; i++) {
        char name[24];
        snprintf(name, sizeof name, "C=%d", c->levels[i].concurrency);
        print_row(f, name, &c->levels[i]);
    }
    print_row(f, "all", &c->all);
    if (c->all.n_pos)
        fprintf(f, "worst: %s position %zu: decode %.4f, prefill %.4f\n", c->all.worst_key, c->all.worst_pos,
                c->all.worst_decode, c->all.worst_prefill);
}
