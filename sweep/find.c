/* find.c: `loadlaw sweep --find OBJECTIVE`, the adaptive capacity search:
 * the largest closed-loop C whose measured figures meet an objective
 * (scenario.h scn_objective), found in few levels placed by the run's own
 * model, and proved by measurement.
 *
 * The method. After every level loadgen asks what to run next
 * (lg_next_level_fn); this file waits for the records to reach the file,
 * fits the whole run so far (fit_open: the one analysis) and judges the
 * level on fit's figures: a level meets the objective when every term does
 * and no more than load.max_failed of its requests failed.
 *   1. Ladder: C = 1, 2, 4, ... (default requests per level: they measure
 *      the model, far below the boundary) until a level fails, or three
 *      levels made the model (fit's chosen one) and it predicts a boundary
 *      within 4x the largest C measured.
 *   2. The prediction: the model gives the mean step at C (and K = C times
 *      the run's context per request); a term's figure at C is that times
 *      the ratio figure / model step at the measured level nearest C (ITL
 *      p99 / mean step, say: the spread a percentile adds to the mean),
 *      preferring levels that carried a probe's requests (a ladder rung's
 *      few hundred gaps put one or two beyond a p99), or for user_tps that
 *      ratio over the step. The predicted boundary is
 *      the largest C before the first C where a predicted figure misses.
 *   3. Probes, between lo (the largest C whose latest measurement meets,
 *      below every failing one) and hi (the smallest C whose latest
 *      measurement fails): the prediction clamped into (lo, hi), which
 *      measures C then C + 1; after two probes that went against the
 *      prediction, bisection (doubling while no C failed).
 *   4. Pinned (hi = lo + 1): a sustain at lo (twice a probe's requests),
 *      then C + 1 re-measured. Both as expected: found. A sustain that
 *      fails, or a re-measure that meets, moves lo or hi and the probes go
 *      on; after two such flips the boundary is within noise and the search
 *      says so with both levels' figures.
 * Probes, sustains and re-measures carry enough requests for the
 * percentile asked (find_requests). The search ends when found, when C = 1
 * fails, at FIND_MAX_C, or when the levels or the time of the budget ran
 * out (a level is not started after it); each level's role is in its level
 * record ("find_role") and the outcome in summary.json ("find").
 *
 * Threads: sweep_find_next runs on loadgen's driver thread; the rest on the
 * sweep's thread before and after the run. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "common.h"
#include "fit.h"
#include "fit_plan.h"
#include "find_internal.h"

/* ---- what a level needs ----------------------------------------------------- */

/* Requests a probe carries so the figure asked is measured, not guessed:
 * FIND_TAIL samples beyond the percentile. A per-request figure (TTFT,
 * TPOT, E2E, the goodput share) has one sample a request; ITL one a token
 * after the first; an error rate e needs FIND_TAIL / e requests to see
 * FIND_TAIL failures. why: the term that set it. */
static int find_requests(const scn_objective *o, int max_tokens, char *why, size_t n)
{
    int need = FIND_MIN_REQ;
    snprintf(why, n, "at least %d per level", FIND_MIN_REQ);
    for (size_t i = 0; i < o->n; i++) {
        const scn_obj_term *t = &o->t[i];
        double q = t->metric <= SCN_OBJ_E2E ? scn_obj_stat_q(t->stat)
                 : t->metric == SCN_OBJ_GOODPUT ? t->value
                 : t->metric == SCN_OBJ_ERROR_RATE ? 1 - t->value : NAN;
        if (!(q > 0 && q < 1))
            continue;
        double samples = ceil(FIND_TAIL / (1 - q) - 1e-9);
        int per_req = t->metric == SCN_OBJ_ITL ? (max_tokens > 1 ? max_tokens - 1 : 1) : 1;
        int req = (int)fmin(ceil(samples / per_req), FIND_MAX_REQ);
        if (req > need) {
            need = req;
            if (per_req > 1)
                snprintf(why, n, "%s: %.0f gaps put %.0f beyond its quantile, %d gaps a request", t->name,
                         samples, FIND_TAIL, per_req);
            else
                snprintf(why, n, "%s: %.0f requests put %.0f beyond its %s", t->name, samples, FIND_TAIL,
                         t->metric == SCN_OBJ_ERROR_RATE ? "rate" : "quantile");
        }
    }
    return need;
}

/* ---- judging a level on fit's figures --------------------------------------- */

static double dist_stat(const fit_dist *d, scn_obj_stat s)
{
    const double v[] = {d->mean_ms, d->p50_ms, d->p90_ms, d->p99_ms, d->max_ms};
    return d->n ? v[s] : NAN;
}

/* The per-request objectives of the goodput count: the objective's own
 * ttft, tpot (itl) and e2e terms. */
static fit_slo goodput_slo(const scn_objective *o)
{
    fit_slo s = {NAN, NAN, NAN};
    for (size_t i = 0; i < o->n; i++) {
        const scn_obj_term *t = &o->t[i];
        if (t->metric == SCN_OBJ_TTFT)
            s.ttft_ms = t->value;
        else if (t->metric == SCN_OBJ_ITL || t->metric == SCN_OBJ_TPOT)
            s.tpot_ms = t->value;
        else if (t->metric == SCN_OBJ_E2E)
            s.e2e_ms = t->value;
    }
    return s;
}

/* An open level's latencies are from the intended send (fit's *_sched):
 * what a user arriving on schedule saw, the client's own lag included. */
static const fit_dist *latency_dist(const fit_level *L, scn_obj_metric m)
{
    const fit_dist *closed[] = {&L->ttft, &L->itl, &L->tpot, &L->e2e};
    if (!L->closed_loop && m == SCN_OBJ_TTFT && L->ttft_sched.n)
        return &L->ttft_sched;
    if (!L->closed_loop && m == SCN_OBJ_E2E && L->e2e_sched.n)
        return &L->e2e_sched;
    return closed[m];
}

double find_term_figure(const scn_objective *o, const scn_obj_term *t, const fit_run *run, const fit_level *L)
{
    size_t n_meas = 0, n_good = 0;
    switch (t->metric) {
    case SCN_OBJ_ERROR_RATE: return L->n_sent ? (double)L->n_sent_failed / (double)L->n_sent : NAN;
    case SCN_OBJ_USER_TPS:
        /* open loop: no steady N = C; a user's pace is 1000 / TPOT p50 (the report's per-user axis) */
        if (!L->closed_loop)
            return L->tpot.n && L->tpot.p50_ms > 0 ? 1000.0 / L->tpot.p50_ms : NAN;
        return L->concurrency > 0 ? L->steady_tok_per_s / L->concurrency : NAN;
    case SCN_OBJ_GOODPUT: {
        fit_slo slo = goodput_slo(o);
        fit_level_goodput_count(run, L->level, &slo, &n_meas, &n_good);
        return n_meas ? (double)n_good / (double)n_meas : NAN;
    }
    default: return dist_stat(latency_dist(L, t->metric), t->stat);
    }
}

int find_term_meets(const scn_obj_term *t, double v)
{
    return isfinite(v) && (t->at_most ? v <= t->value : v >= t->value);
}

/* Measurement of records level `level`, judged. */
static void judge(const sweep_find *f, const fit_run *run, const fit_result *res, int level, find_meas *m)
{
    const fit_level *L = NULL;
    for (size_t i = 0; i < res->n_levels && !L; i++)
        if (res->levels[i].level == level)
            L = &res->levels[i];
    m->meets = L != NULL;
    for (size_t i = 0; i < f->obj.n; i++) {
        m->fig[i] = L ? find_term_figure(&f->obj, &f->obj.t[i], run, L) : NAN;
        m->meets &= find_term_meets(&f->obj.t[i], m->fig[i]);
    }
    m->n = L ? L->n_sent : 0;
    m->n_inflight = L ? find_level_n(L) : NAN;
    m->failed_share = L && L->n_sent ? (double)L->n_sent_failed / (double)L->n_sent : NAN;
    if (!(m->failed_share <= f->scn->max_failed)) /* a level of failures measured failures */
        m->meets = 0;
}

/* ---- the model's boundary ---------------------------------------------------- */

double find_model_step(const fit_result *res, double n)
{
    double ctx = isfinite(res->context_per_req_tok) ? res->context_per_req_tok : 0;
    return fit_model_predict(&res->model, &res->law, n, n * ctx);
}

double find_level_n(const fit_level *L)
{
    if (L->closed_loop)
        return L->concurrency;
    /* Little's law: the requests in flight (the client's queue too) are the
     * arrival rate times the time each stays, from its intended send */
    const fit_dist *e2e = latency_dist(L, SCN_OBJ_E2E);
    return isfinite(L->rate_per_s) && e2e->n ? L->rate_per_s * e2e->mean_ms / 1000.0 : NAN;
}

/* Level L is a better source of the ratio at n than best: one that carried
 * a probe's requests (a tail measured, not a few gaps' guess) first, then
 * the nearest N, then the larger. */
static int better_source(const sweep_find *f, const fit_level *L, const fit_level *best, double n)
{
    if (!best)
        return 1;
    int full = L->n_sent >= (size_t)f->n_probe_req, best_full = best->n_sent >= (size_t)f->n_probe_req;
    if (full != best_full)
        return full;
    double ln = find_level_n(L), bn = find_level_n(best), d = fabs(ln - n), bd = fabs(bn - n);
    return d < bd || (d == bd && ln > bn);
}

double find_term_ratio(const sweep_find *f, const fit_run *run, const fit_result *res, const scn_obj_term *t,
                       double n)
{
    const fit_level *best = NULL;
    double v = NAN;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        double x;
        if (L->interrupted || !(find_level_n(L) >= 1) ||
            !isfinite(x = find_term_figure(&f->obj, t, run, L)))
            continue;
        if (better_source(f, L, best, n)) {
            best = L;
            v = x;
        }
    }
    double step = best ? find_model_step(res, find_level_n(best)) : NAN;
    if (!(step > 0))
        return NAN;
    return t->metric == SCN_OBJ_USER_TPS ? v * step : v / step;
}

int find_meets_at(const sweep_find *f, const fit_run *run, const fit_result *res, double n)
{
    int any = 0;
    double step = find_model_step(res, n);
    if (!(step > 0))
        return -1;
    for (size_t i = 0; i < f->obj.n; i++) {
        const scn_obj_term *t = &f->obj.t[i];
        if (t->metric > SCN_OBJ_E2E && t->metric != SCN_OBJ_USER_TPS)
            continue;
        double r = find_term_ratio(f, run, res, t, n);
        if (!isfinite(r))
            continue;
        any = 1;
        if (!find_term_meets(t, t->metric == SCN_OBJ_USER_TPS ? r / step : r * step))
            return 0;
    }
    return any ? 1 : -1;
}

/* The largest C the model says meets every term it can predict (latencies
 * and user_tps), up to FIND_MAX_C; -1 without a model or such a term. */
static double predict(const sweep_find *f, const fit_run *run, const fit_result *res)
{
    if (!res->law.ok || !res->model.done)
        return -1;
    for (int c = 1; c <= FIND_MAX_C; c++) {
        int meets = find_meets_at(f, run, res, c);
        if (meets < 0)
            return -1;
        if (!meets)
            return c - 1;
    }
    return FIND_MAX_C;
}

/* ---- where to measure next ---------------------------------------------------- */

const find_meas *find_latest(const sweep_find *f, double x)
{
    for (size_t i = f->n_m; x > 0 && i-- > 0;)
        if (f->m[i].x == x)
            return &f->m[i];
    return NULL;
}

void find_bounds(const sweep_find *f, double *lo, double *hi)
{
    *lo = 0;
    *hi = INFINITY;
    for (size_t i = 0; i < f->n_m; i++)
        if (find_latest(f, f->m[i].x) == &f->m[i] && !f->m[i].meets && f->m[i].x < *hi)
            *hi = f->m[i].x;
    for (size_t i = 0; i < f->n_m; i++)
        if (find_latest(f, f->m[i].x) == &f->m[i] && f->m[i].meets && f->m[i].x < *hi && f->m[i].x > *lo)
            *lo = f->m[i].x;
}

double find_largest_x(const sweep_find *f)
{
    double x = 0;
    for (size_t i = 0; i < f->n_m; i++)
        x = f->m[i].x > x ? f->m[i].x : x;
    return x;
}

/* After a ladder level: the next rung (*x), or 0 when the ladder is over. */
static int ladder_next(sweep_find *f, const find_meas *m, double pred, double *x)
{
    if (!m->meets)
        return 0;
    if (pred >= 0 && f->n_m >= 3 && pred <= FIND_REACH * m->x) {
        f->pred_ladder = pred;
        return 0;
    }
    *x = 2 * m->x;
    return *x <= FIND_MAX_C;
}

/* Between lo and hi, not pinned: lo + 1 when the prediction is lo or
 * below, else the prediction clamped into (lo, hi), or bisection once it
 * has missed FIND_MISSES times (doubling while nothing failed). *expect:
 * what the prediction says of the level. */
static double probe_c(const sweep_find *f, double lo, double hi, double pred, int *expect)
{
    double c;
    *expect = -1;
    if (pred >= 0 && pred <= lo) { /* the cheapest test of a boundary at lo */
        c = lo + 1;
        *expect = 0;
    } else if (pred < 0 || f->misses >= FIND_MISSES) {
        c = isinf(hi) ? 2 * lo : lo + floor((hi - lo) / 2);
    } else {
        c = pred >= hi ? hi - 1 : pred;
        *expect = c <= pred;
    }
    if (isinf(hi) && c > FIND_REACH * find_largest_x(f))
        c = FIND_REACH * find_largest_x(f);
    return c > FIND_MAX_C ? FIND_MAX_C : c < 1 ? 1 : c;
}

/* No C (or rate) can meet: C = 1 failed. The rate search's opening level
 * at C = 1 is off its axis: a lone request that fails fails every rate. */
static int fails_at_1(const sweep_find *f, double lo, double hi)
{
    return f->by_rate ? f->n_m > 0 && f->m[0].x == 0 && !f->m[0].meets : lo == 0 && hi == 1;
}

/* The search reached the largest load it places with nothing failing. */
static int at_cap(const sweep_find *f, double lo, double hi)
{
    if (!f->by_rate)
        return lo >= FIND_MAX_C;
    const find_meas *m = find_latest(f, lo);
    return isinf(hi) && m && m->n_inflight >= FIND_MAX_C / 2;
}

/* The next level's x and role, or 0 with f->end set. */
static int decide(sweep_find *f, const fit_result *res, double pred, double *x, const char **role, int *expect)
{
    const find_meas *last = &f->m[f->n_m - 1];
    double lo, hi;
    *expect = -1;
    if (f->phase == PH_LADDER && (f->by_rate ? find_rate_ladder_next(f, res, last, pred, x)
                                             : ladder_next(f, last, pred, x))) {
        *role = "ladder";
        return 1;
    }
    f->phase = PH_PROBE;
    find_bounds(f, &lo, &hi);
    if (fails_at_1(f, lo, hi))
        return f->end = END_FAILS_AT_1, 0;
    if (f->flips >= FIND_FLIPS)
        return f->end = END_NOISE, 0;
    if (find_pinned(f, lo, hi)) {
        if (f->sustained_x == lo && f->rechecked_x == hi)
            return f->end = END_FOUND, 0;
        *x = f->sustained_x == lo ? hi : lo;
        *role = f->sustained_x == lo ? "re-measure" : "sustain";
        *expect = f->sustained_x != lo;
        return 1;
    }
    if (at_cap(f, lo, hi))
        return f->end = END_CAP, 0;
    *x = f->by_rate ? find_rate_probe(f, lo, hi, pred, expect) : probe_c(f, lo, hi, pred, expect);
    *role = "probe";
    return 1;
}

/* The measurement of level `done` (at x in role, as placed), its flips and
 * misses counted. */
static int record(sweep_find *f, const fit_run *run, const fit_result *res, int done, double x, const char *role,
                  int expected)
{
    if (f->n_m == f->cap_m) {
        size_t cap = f->cap_m ? 2 * f->cap_m : 16;
        find_meas *p = realloc(f->m, cap * sizeof *p);
        if (!p)
            return LL_ENOMEM;
        f->m = p;
        f->cap_m = cap;
    }
    find_meas *m = &f->m[f->n_m];
    memset(m, 0, sizeof *m);
    m->level = done;
    m->x = x;
    m->c = !f->by_rate ? (int)x : x > 0 ? FIND_MAX_C : 1; /* a rate level's C is its cap */
    m->role = role ? role : "ladder";
    m->expected = expected;
    judge(f, run, res, done, m);
    const find_meas *before = find_latest(f, m->x);
    f->flips += before && before->meets != m->meets;
    f->misses += expected >= 0 && expected != m->meets && !strcmp(m->role, "probe");
    if (!strcmp(m->role, "sustain"))
        f->sustained_x = m->meets ? m->x : 0;
    if (!strcmp(m->role, "re-measure"))
        f->rechecked_x = m->meets ? 0 : m->x;
    f->n_m++;
    return 0;
}

/* ---- the hook: one level measured, the next placed ------------------------------- */

/* A closed level for C in role: the scenario's first level's options
 * (warmup, duration), the requests the role needs. */
static void make_level(const sweep_find *f, int c, const char *role, scn_level *next)
{
    *next = f->scn->levels[0];
    next->concurrency = c;
    next->profile.enabled = 0;
    next->find_role = role;
    if (strcmp(role, "ladder") != 0) {
        scn_level dflt = *next;
        dflt.n_requests = 0;
        int n = scn_level_requests(&dflt);
        n = n > f->n_probe_req ? n : f->n_probe_req;
        next->n_requests = !strcmp(role, "sustain") ? 2 * n : n;
    }
}

/* The budget, before a level starts: 0, or the end it makes. */
static int over_budget(sweep_find *f)
{
    f->elapsed_s = (double)(ll_now_ns() - f->t0_ns) / 1e9;
    if ((int)f->n_m >= f->scn->find_budget_levels)
        return END_BUDGET_LEVELS;
    if (f->scn->find_budget_s > 0 && f->elapsed_s >= f->scn->find_budget_s)
        return END_BUDGET_TIME;
    return END_NONE;
}

/* The records so far on disk, fitted: 0, or a code with err. */
static int fit_so_far(sweep_find *f, fit_run **run, fit_result **res, char *err, size_t errlen)
{
    char why[512] = "";
    /* the level_end is queued before this call: once drained, the level is whole in the file */
    int rc = ll_rec_drain(f->w, 10 * 1000000000LL);
    if (rc == 0)
        rc = fit_open(f->run_dir, NULL, run, res, why, sizeof why);
    if (rc)
        ll_errf(err, errlen, "--find: fitting the run so far: %s", why[0] ? why : ll_strerror(rc));
    return rc;
}

/* The next level placed (1, with next filled), or 0 with the search done. */
static int place_next(sweep_find *f, const fit_run *run, const fit_result *res, double pred, scn_level *next)
{
    const char *role = NULL;
    double x = 0;
    int expect = -1;
    int go = decide(f, res, pred, &x, &role, &expect);
    if (go && (f->end = over_budget(f)) != END_NONE)
        go = 0;
    if (!go) {
        f->phase = PH_DONE;
        f->elapsed_s = (double)(ll_now_ns() - f->t0_ns) / 1e9;
        return 0;
    }
    if (f->by_rate)
        find_rate_level(f, run, res, x, role, next);
    else
        make_level(f, (int)x, role, next);
    f->pending_x = x;
    f->pending_role = role;
    f->pending_expect = expect;
    char at[48];
    if (f->by_rate)
        snprintf(at, sizeof at, "rate %.3g/s", x);
    else
        snprintf(at, sizeof at, "C=%d", (int)x);
    if (pred >= 0)
        fprintf(stderr, "loadlaw sweep: find: %s (%s; the model predicts %.3g)\n", at, role, pred);
    else
        fprintf(stderr, "loadlaw sweep: find: %s (%s)\n", at, role);
    return 1;
}

int sweep_find_next(void *ctx, int done, scn_level *next, char *err, size_t errlen)
{
    sweep_find *f = ctx;
    fit_run *run = NULL;
    fit_result *res = NULL;
    int rc = fit_so_far(f, &run, &res, err, errlen);
    if (rc)
        return rc;
    rc = record(f, run, res, done, f->pending_x, f->pending_role, f->pending_expect);
    int go = 0;
    if (rc) {
        ll_errf(err, errlen, "out of memory");
    } else {
        f->pred_last = f->by_rate ? find_rate_predict(f, run, res) : predict(f, run, res);
        go = place_next(f, run, res, f->pred_last, next);
    }
    fit_result_free(res);
    fit_run_free(run);
    return rc ? rc : go;
}

/* ---- the search's life ----------------------------------------------------------- */

int sweep_find_new(const scn_scenario *scn, const char *run_dir, sweep_find **out)
{
    char err[512];
    *out = NULL;
    if (!scn->find_objective)
        return 0;
    sweep_find *f = calloc(1, sizeof *f);
    if (!f)
        return LL_ENOMEM;
    if (scn_objective_parse(scn->find_objective, &f->obj, err, sizeof err)) {
        free(f); /* the key's check read it already: not reached from the command line */
        fprintf(stderr, "loadlaw sweep: find.objective: %s\n", err);
        return LL_EINVAL;
    }
    f->scn = scn;
    f->run_dir = run_dir;
    f->t0_ns = ll_now_ns();
    f->pred_ladder = f->pred_last = -1;
    f->by_rate = scn->find_by_rate;
    f->pending_x = f->by_rate ? 0 : scn->levels[0].concurrency; /* the rate search opens at C = 1, off its axis */
    f->pending_role = "ladder";
    f->n_probe_req = find_requests(&f->obj, scn->max_tokens, f->why_req, sizeof f->why_req);
    fprintf(stderr, "loadlaw sweep: find %s: probes carry %d requests (%s)\n", scn->find_objective,
            f->n_probe_req, f->why_req);
    *out = f;
    return 0;
}

void sweep_find_set_writer(sweep_find *f, ll_rec_writer *w)
{
    if (f)
        f->w = w;
}

void sweep_find_free(sweep_find *f)
{
    if (!f)
        return;
    free(f->m);
    free(f);
}
