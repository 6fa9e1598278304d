/* test_compare_paired.c: compare of an interleaved A/B (fit/compare.c "A/B comparison",
 * paired) and open-loop matching by rate, on generated records with a known
 * ratio, and the paired interval's coverage on simulated pairs.
 *  - fit_paired_ratio: 2000 simulated sets of pairs with a known log-ratio,
 *    step noise and (second case) a per-pair disturbance three times the step
 *    noise: the 95% interval covers the truth at least ~94% of the time at
 *    m = 1, 2 and 4 pairs (one pair: about the nominal 95%; more: at least
 *    it, conservative where the step-noise floor wins), and never less than
 *    the plain t interval over pairs.
 *  - Planted drift: two runs written as an ABBA-ordered pair of sweeps
 *    (R = 2) whose step times grow by a factor exp(g * seq) with the position
 *    in the order (a linear drift on the log scale, g = 5% per level run). The
 *    paired estimate lands on the true ratio (52+30C)/(52+10C) within 1% and
 *    its interval covers it; the unpaired one (the first level of each C, A
 *    then B) sits at truth * exp(-g), 5% low, and its interval misses it.
 *  - Open loop: levels at 10 and 20 req/s in both runs (and 30 in A only)
 *    pair by rate, not by their cap; a closed C=4 beside an open level capped
 *    at 4 keeps its own match; the ratio of an open level is the per-stream
 *    decode rate B/A = step_A / step_B. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common.h"
#include "fit.h"
#include "fit_compare.h"
#include "fit_internal.h"
#include "testutil.h"

static char g_tmp[256];

/* ---- fit_paired_ratio coverage on simulated pairs ---------------------------- */

/* Coverage of log-ratio mu by the interval over trials; floor = 0 replaces
 * the random-effects variance by the plain t interval over pairs. */
static double coverage(gsl_rng *r, size_t m, double step_sd, double pair_sd, int floor, int trials)
{
    double y[16], v[16], mu = log(2.2);
    int hit = 0;
    for (int t = 0; t < trials; t++) {
        for (size_t i = 0; i < m; i++) {
            /* each pair's own step-noise variance is itself estimated from
             * ~200 steps: scale it by a chi-square/df draw */
            double vi = step_sd * step_sd * gsl_ran_chisq(r, 199) / 199;
            y[i] = mu + gsl_ran_gaussian(r, step_sd) + gsl_ran_gaussian(r, pair_sd);
            v[i] = floor ? vi : 0;
        }
        double ratio, ci[2], wv, bv, df;
        if (!floor && m < 2) {
            continue;
        }
        if (fit_paired_ratio(y, v, m, 0.95, &ratio, ci, &wv, &bv, &df))
            continue;
        hit += ci[0] <= exp(mu) && exp(mu) <= ci[1];
    }
    return (double)hit / trials;
}

static void test_paired_coverage(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    const size_t ms[] = {1, 2, 4};
    for (size_t k = 0; k < 3; k++) {
        double c0 = coverage(r, ms[k], 0.01, 0, 1, 2000);
        printf("coverage m=%zu: step noise only %.3f\n", ms[k], c0);
        /* one pair: the normal interval on its steps, about nominal; more:
         * at least nominal (conservative where the floor wins) */
        CHECK(c0 >= 0.93 && (ms[k] > 1 || c0 <= 0.97), "step noise only, m=%zu: coverage %.3f", ms[k], c0);
        if (ms[k] >= 2) {
            double c1 = coverage(r, ms[k], 0.01, 0.03, 1, 2000);
            printf("coverage m=%zu: pair spread 3x step noise %.3f\n", ms[k], c1);
            CHECK(c1 >= 0.94, "pair spread 3x step noise, m=%zu: coverage %.3f", ms[k], c1);
        }
    }
    /* The floor only widens: with step noise alone, the t interval over two
     * pairs (no floor) covers about the nominal, the floored one more. */
    double nf = coverage(r, 2, 0.01, 0, 0, 4000), wf = coverage(r, 2, 0.01, 0, 1, 4000);
    CHECK(nf >= 0.93 && nf <= 0.97 && wf >= nf, "m=2: no floor %.3f, with floor %.3f", nf, wf);
    /* m = 1: the interval is the pair's own step-noise one, normal quantile */
    double y = log(2), v = 0.0004, ratio, ci[2], wv, bv, df;
    CHECK(fit_paired_ratio(&y, &v, 1, 0.95, &ratio, ci, &wv, &bv, &df) == 0, "m=1");
    CHECK_REL(ratio, 2.0, 1e-12, "m=1 ratio");
    CHECK_REL(ci[1], 2 * exp(1.959963984540054 * 0.02), 1e-9, "m=1 upper end = exp(z*sd)");
    CHECK(isinf(df), "m=1: df infinite");
    /* two pairs far apart: t(1)-ish quantile, very wide */
    double y2[2] = {log(2.0), log(2.4)}, v2[2] = {1e-6, 1e-6};
    CHECK(fit_paired_ratio(y2, v2, 2, 0.95, &ratio, ci, &wv, &bv, &df) == 0, "m=2");
    CHECK_REL(ratio, sqrt(2.0 * 2.4), 1e-12, "m=2: geometric mean of the pairs");
    CHECK(bv > 0 && df == 1 && ci[0] < 1.5 && ci[1] > 3, "m=2 spread: df %.3g, [%.3g, %.3g]", df, ci[0], ci[1]);
    /* two pairs that agree: the floor, still with t(1) */
    double y3[2] = {log(2.0), log(2.0)}, v3[2] = {1e-4, 1e-4};
    CHECK(fit_paired_ratio(y3, v3, 2, 0.95, &ratio, ci, &wv, &bv, &df) == 0, "m=2 agree");
    CHECK(bv == 0 && df == 1, "agreeing pairs: no spread beyond the steps, df 1");
    CHECK_REL(ci[1], 2 * exp(12.706204736174696 * sqrt(1e-4 / 2)), 1e-6, "floor: t(1) * sqrt(mean v / m)");
    CHECK(fit_paired_ratio(y2, v2, 0, 0.95, &ratio, ci, &wv, &bv, &df) == LL_EINVAL, "m=0 is an error");
    /* a pair whose side had one unit has no step noise (NAN): it is not a
     * zero. One such pair alone has no interval, so a gate cannot pass on it */
    double vn = NAN;
    CHECK(fit_paired_ratio(&y, &vn, 1, 0.95, &ratio, ci, &wv, &bv, &df) == 0 && isnan(ci[0]) && isnan(ci[1]) &&
              isnan(df) && isnan(wv),
          "m=1 without step noise: no interval [%g, %g]", ci[0], ci[1]);
    CHECK_REL(ratio, 2.0, 1e-12, "m=1 without step noise: the estimate stays");
    /* two agreeing pairs, one without noise: the floor is the other's v, not half of it */
    double v4[2] = {1e-4, NAN};
    CHECK(fit_paired_ratio(y3, v4, 2, 0.95, &ratio, ci, &wv, &bv, &df) == 0, "m=2, one v unknown");
    CHECK(wv == 1e-4 && df == 1, "floor from the known v: %g", wv);
    CHECK_REL(ci[1], 2 * exp(12.706204736174696 * sqrt(1e-4 / 2)), 1e-6, "unknown v left out of the floor");
    gsl_rng_free(r);
}

/* ---- generated runs ------------------------------------------------------------ */

typedef struct gen_level {
    int c;             /* concurrency (in flight) */
    double rate;       /* > 0: written as an open-loop level at this rate */
    int repeat, pair, seq; /* -1: not written */
    double factor;     /* step-time multiplier (drift) */
} gen_level;

/* One run: lockstep waves as the synthetic engine plays them (runs_gen.h's
 * shape): `waves` waves of C requests, `tokens` tokens each, steps of
 * (a + b*C) * factor * (1 + 2% N(0,1)) ms. */
static int gen(const char *dir, double a, double b, const gen_level *lv, int n, int waves, int tokens, uint64_t seed)
{
    char path[600], err[256];
    if (ll_mkdir_p(dir, err, sizeof err))
        return -1;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    ll_rng r;
    ll_rng_seed(&r, seed);
    fprintf(f, "{\"type\":\"run\",\"schema\":1,\"tool\":\"loadlaw\",\"version\":\"0.1.0\",\"epoch_wall_ns\":0,"
               "\"host\":\"t\",\"ranks\":1,\"target\":{\"url\":\"http://127.0.0.1:1\",\"model\":\"m\","
               "\"endpoint\":\"chat\",\"bundled\":true},\"engine\":\"backend=synthetic\",\"engine_law\":null,"
               "\"scenario\":\"generated\",\"config\":{}}\n");
    int64_t t = 1000000;
    long id = 0;
    int64_t *ct = malloc(sizeof *ct * (size_t)tokens);
    for (int li = 0; li < n; li++) {
        const gen_level *L = &lv[li];
        if (L->rate > 0)
            fprintf(f, "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"open\",\"rate_per_s\":%g,"
                       "\"arrival\":\"constant\",\"n_requests\":%d,\"warmup\":0,\"start_ns\":%lld",
                    li, L->c, L->rate, L->c * waves, (long long)t);
        else
            fprintf(f, "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"closed\",\"rate_per_s\":null,"
                       "\"n_requests\":%d,\"warmup\":0,\"start_ns\":%lld",
                    li, L->c, L->c * waves, (long long)t);
        if (L->repeat >= 0)
            fprintf(f, ",\"repeat\":%d", L->repeat);
        if (L->pair >= 0)
            fprintf(f, ",\"pair\":%d,\"seq\":%d", L->pair, L->seq);
        fprintf(f, "}\n");
        for (int w = 0; w < waves; w++) {
            int64_t send = t, first = send + 2000000, end = 0;
            ct[0] = first;
            for (int k = 1; k < tokens; k++) {
                double step = (a + b * L->c) * L->factor * (1 + 0.02 * ll_rng_normal(&r));
                ct[k] = ct[k - 1] + (int64_t)(step * 1e6);
            }
            for (int q = 0; q < L->c; q++) {
                int64_t d = (int64_t)(ll_rng_uniform(&r) * 20000);
                fprintf(f, "{\"type\":\"request\",\"level\":%d,\"rank\":0,\"id\":%ld,\"warmup\":false,"
                           "\"status\":\"ok\",\"error_class\":null,\"http_status\":200,\"error\":null,"
                           "\"intended_ns\":%s,\"send_ns\":%lld,\"header_ns\":%lld,\"first_token_ns\":%lld,"
                           "\"first_think_ns\":null,\"first_answer_ns\":%lld,\"end_ns\":%lld,\"prompt_tok\":100,"
                           "\"think_tok\":0,\"answer_tok\":%d,\"usage\":{\"prompt_tokens\":100,"
                           "\"completion_tokens\":%d,\"reasoning_tokens\":0},\"chunks\":[",
                        li, id++, L->rate > 0 ? "null" : "null", (long long)send, (long long)send + 100000,
                        (long long)(first + d), (long long)(first + d), (long long)(ct[tokens - 1] + d + 50000),
                        tokens, tokens);
                for (int k = 0; k < tokens; k++)
                    fprintf(f, "%s[%lld,1,\"a\"]", k ? "," : "", (long long)(ct[k] + d));
                fprintf(f, "]}\n");
                if (ct[tokens - 1] + d + 50000 > end)
                    end = ct[tokens - 1] + d + 50000;
            }
            t = end + 1000000;
        }
        fprintf(f, "{\"type\":\"level_end\",\"level\":%d,\"end_ns\":%lld,\"interrupted\":false,\"ok\":%d,"
                   "\"failed\":0}\n",
                li, (long long)t, L->c * waves);
        t += 1000000;
    }
    free(ct);
    fclose(f);
    return 0;
}

typedef struct loaded {
    fit_run *run[2];
    fit_result *res[2];
} loaded;

static fit_compare *load_compare(const char *da, const char *db, int ignore_pairs, loaded *l)
{
    char err[512] = "";
    fit_options fo;
    fit_options_default(&fo);
    const char *d[2] = {da, db};
    memset(l, 0, sizeof *l);
    for (int k = 0; k < 2; k++)
        if (fit_load_run(d[k], &l->run[k], err, sizeof err) || fit_analyze(l->run[k], &fo, &l->res[k], err, sizeof err)) {
            CHECK(0, "load %s: %s", d[k], err);
            return NULL;
        }
    fit_compare_options co;
    fit_compare_options_default(&co);
    co.n_resamples = 1000;
    co.ignore_pairs = ignore_pairs;
    fit_compare *c = NULL;
    CHECK(fit_compare_runs(l->run[0], l->res[0], l->run[1], l->res[1], &co, &c, err, sizeof err) == 0, "compare: %s",
          err);
    return c;
}

static void unload(loaded *l)
{
    for (int k = 0; k < 2; k++) {
        fit_result_free(l->res[k]);
        fit_run_free(l->run[k]);
    }
}

/* Two runs in ABBA order with R = 2 per level, drift exp(g * seq). */
static void test_planted_drift(void)
{
    const int cs[] = {1, 4, 16};
    const double g = 0.05;
    gen_level la[6], lb[6];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) { /* A B B A */
            int side = k == 1 || k == 2, r = k == 0 || k == 1 ? 0 : 1, seq = 4 * i + k;
            gen_level L = {cs[i], 0, r, 2 * i + k / 2, seq, exp(g * seq)};
            (side ? lb : la)[2 * i + r] = L;
        }
    char da[400], db[400];
    snprintf(da, sizeof da, "%s/drift/a", g_tmp);
    snprintf(db, sizeof db, "%s/drift/b", g_tmp);
    CHECK(gen(da, 52, 30, la, 6, 6, 40, 11) == 0 && gen(db, 52, 10, lb, 6, 6, 40, 12) == 0, "generated");
    loaded lp, lu;
    fit_compare *p = load_compare(da, db, 0, &lp), *u = load_compare(da, db, 1, &lu);
    if (p && u) {
        CHECK(p->paired && !u->paired && p->n_levels == 3 && u->n_levels == 3, "paired %d/%d, levels %zu/%zu",
              p->paired, u->paired, p->n_levels, u->n_levels);
        for (size_t i = 0; i < 3 && i < p->n_levels; i++) {
            const fit_compare_level *P = &p->levels[i], *U = &u->levels[i];
            double truth = (52.0 + 30 * cs[i]) / (52.0 + 10 * cs[i]);
            CHECK(P->concurrency == cs[i] && P->n_pairs == 2 && !strcmp(P->ratio_method, "paired"),
                  "C=%d: 2 pairs (%zu)", P->concurrency, P->n_pairs);
            CHECK_REL(P->ratio, truth, 0.01, "paired estimate on the truth");
            CHECK(P->ratio_ci[0] <= truth && truth <= P->ratio_ci[1], "C=%d paired [%.4f, %.4f] covers %.4f",
                  cs[i], P->ratio_ci[0], P->ratio_ci[1], truth);
            /* each pair alone is off by the drift, in opposite directions */
            CHECK(P->pair_ratio[0] < truth * 0.97 && P->pair_ratio[1] > truth * 1.03, "C=%d pairs %.4f %.4f",
                  cs[i], P->pair_ratio[0], P->pair_ratio[1]);
            CHECK_REL(U->ratio, truth * exp(-g), 0.01, "unpaired estimate carries the drift");
            CHECK(!(U->ratio_ci[0] <= truth && truth <= U->ratio_ci[1]), "C=%d unpaired [%.4f, %.4f] misses %.4f",
                  cs[i], U->ratio_ci[0], U->ratio_ci[1], truth);
        }
        CHECK(strstr(p->verdict, "(2 pairs)") != NULL, "verdict names the pairs: %s", p->verdict);
        CHECK(fit_compare_find(p, 16) == 2, "find C=16");
    }
    fit_compare_free(p);
    fit_compare_free(u);
    unload(&lp);
    unload(&lu);
    /* A sequential run (repeat written, no pair) compares as before: unpaired. */
    for (int i = 0; i < 6; i++)
        la[i].pair = lb[i].pair = -1;
    CHECK(gen(da, 52, 30, la, 6, 6, 40, 11) == 0 && gen(db, 52, 10, lb, 6, 6, 40, 12) == 0, "generated");
    fit_compare *s = load_compare(da, db, 0, &lp);
    CHECK(s && !s->paired && s->n_levels == 3 && !strcmp(s->levels[0].ratio_method, "bootstrap"),
          "sequential: unpaired bootstrap");
    fit_compare_free(s);
    unload(&lp);
}

/* Open levels pair by rate; closed ones by C. */
static void test_open_by_rate(void)
{
    /* A: closed C=4, open 10/s (cap 4), open 20/s (cap 8), open 30/s (cap 2) */
    gen_level la[] = {{4, 0, -1, -1, -1, 1}, {4, 10, -1, -1, -1, 1}, {8, 20, -1, -1, -1, 1}, {2, 30, -1, -1, -1, 1}};
    /* B: the same rates in another order, 20/s first; no 30/s; an open 40/s */
    gen_level lb[] = {{8, 20, -1, -1, -1, 1}, {4, 0, -1, -1, -1, 1}, {4, 10, -1, -1, -1, 1}, {2, 40, -1, -1, -1, 1}};
    char da[400], db[400];
    snprintf(da, sizeof da, "%s/open/a", g_tmp);
    snprintf(db, sizeof db, "%s/open/b", g_tmp);
    CHECK(gen(da, 20, 6, la, 4, 5, 40, 21) == 0 && gen(db, 20, 2, lb, 4, 5, 40, 22) == 0, "generated");
    loaded l;
    fit_compare *c = load_compare(da, db, 0, &l);
    if (c) {
        CHECK(c->n_levels == 3, "3 shared levels (C=4, 10/s, 20/s), got %zu", c->n_levels);
        if (c->n_levels == 3) {
            const fit_compare_level *L0 = &c->levels[0], *L1 = &c->levels[1], *L2 = &c->levels[2];
            CHECK(!L0->open_loop && L0->concurrency == 4, "closed C=4 first");
            CHECK(L1->open_loop && L1->rate_per_s == 10 && L2->open_loop && L2->rate_per_s == 20,
                  "open levels by rate: %g %g", L1->rate_per_s, L2->rate_per_s);
            /* closed: throughput ratio; open: per-stream decode rate ratio, at each level's own N */
            CHECK_REL(L0->ratio, (20.0 + 6 * 4) / (20.0 + 2 * 4), 0.01, "closed C=4 ratio");
            CHECK_REL(L1->ratio, (20.0 + 6 * 4) / (20.0 + 2 * 4), 0.01, "open 10/s ratio (N=4)");
            CHECK_REL(L2->ratio, (20.0 + 6 * 8) / (20.0 + 2 * 8), 0.01, "open 20/s ratio (N=8)");
            CHECK(L2->level_a == 2 && L2->level_b == 0, "20/s: level 2 of A with level 0 of B (%d, %d)",
                  L2->level_a, L2->level_b);
            CHECK(L1->ratio_ci[0] < L1->ratio && L1->ratio < L1->ratio_ci[1], "open level has an interval");
        }
        CHECK(fit_compare_find(c, 4) == 0, "C=4 finds the closed level, not the open one capped at 4");
        CHECK(fit_compare_default_level(c) == 0, "the verdict judges the highest closed C");
    }
    fit_compare_free(c);
    unload(&l);
    /* Only open levels: matched, and the verdict names the rate. */
    gen_level oa[] = {{4, 10, -1, -1, -1, 1}}, ob[] = {{4, 10, -1, -1, -1, 1}};
    CHECK(gen(da, 20, 6, oa, 1, 5, 40, 23) == 0 && gen(db, 20, 2, ob, 1, 5, 40, 24) == 0, "generated");
    c = load_compare(da, db, 0, &l);
    CHECK(c && c->n_levels == 1 && strstr(c->verdict, "10 req/s") != NULL, "open-only verdict: %s",
          c ? c->verdict : "");
    fit_compare_free(c);
    unload(&l);
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_compare_paired.%d", (int)getpid());
    test_paired_coverage();
    test_planted_drift();
    test_open_by_rate();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (!tu_fail && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_MAIN_END();
}
