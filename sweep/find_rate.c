/* find_rate.c: `loadlaw sweep --find OBJECTIVE --find-by rate`, the
 * search over open-loop arrival rates: what differs from the search over C
 * (find.c "The method"), which judges, records and proves its levels the
 * same way.
 *
 * The method.
 *   1. Opening: one closed level at C = 1 (off the rate axis). A lone
 *      request that misses the objective misses it at every rate (exit 3).
 *      Its requests per second, 1000 / its mean E2E, is the rate that keeps
 *      about one request in flight: the first rung.
 *   2. Ladder: that rate, then doubling (each rung about twice the running
 *      requests), until a rung fails, or three levels made the model and it
 *      predicts a boundary within 4x the largest rate measured.
 *   3. The prediction, by Little's law: at rate x the running requests are
 *      N = x * E2E(N), with E2E(N) the model's mean step at N times the
 *      ratio E2E mean / model step of the measured level nearest N; solved
 *      by iterating from N = 0 (the least fixed point; none below
 *      FIND_MAX_C: beyond what the server serves). The terms' figures at N
 *      follow as in the search over C (find_meets_at); the predicted
 *      boundary is the largest rate that meets, by bisection on a log scale.
 *   4. Probes between lo (the largest rate whose latest measurement meets)
 *      and hi (the smallest that fails): the prediction clamped into
 *      [lo (1 + p), hi / (1 + p)], p = find.precision; after two probes went
 *      against it, the geometric midpoint (doubling while nothing failed,
 *      halving while nothing met). Pinned once hi <= lo (1 + p): a rate is
 *      continuous, so the answer is that interval; then the sustain at lo
 *      and the re-measure at hi, as over C.
 * An open level's latencies are from each request's intended send (what a
 * user arriving on schedule saw); its cap on requests in flight is
 * FIND_MAX_C (the sockets); the requests sent in its first E2E, while it
 * fills, are warmup, and it spans 4 E2E (a rung) or 8 (a probe, a sustain
 * twice that) at least: the arrivals' bunching moves all its requests'
 * figures together, so a percentile needs stretches of N as well as
 * requests. Rates are rounded to three significant digits where
 * that keeps them inside the interval, so the levels read as printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fit.h"
#include "find_internal.h"

/* Iterations of N = x * E2E(N) before the last one is taken. */
#define RATE_ITER 200
/* Bisection steps of the predicted boundary: 2^-40 of the ratio searched. */
#define RATE_BISECT 40
/* The prediction looks this many times beyond the largest rate measured. */
#define RATE_LOOK 64
/* An open level's requests, in E2E spans of the requests in flight (N
 * requests arrive in one E2E): a rung's, a probe's at least. */
#define RATE_SPAN_LADDER 4
#define RATE_SPAN_PROBE 8

/* The fit result's level for records level `level`, or NULL. */
static const fit_level *level_of(const fit_result *res, int level)
{
    for (size_t i = 0; i < res->n_levels; i++)
        if (res->levels[i].level == level)
            return &res->levels[i];
    return NULL;
}

/* A lone request's E2E (ms): the opening level's mean; NAN: not measured. */
static double lone_e2e_ms(const sweep_find *f, const fit_result *res)
{
    const fit_level *L = f->n_m && f->m[0].x == 0 ? level_of(res, f->m[0].level) : NULL;
    return L && L->e2e.n ? L->e2e.mean_ms : NAN;
}

/* x to three significant digits, rounded down (dir < 0), to the nearest
 * (0) or up (> 0). */
static double round3(double x, int dir)
{
    if (!(x > 0) || !isfinite(x))
        return x;
    double unit = pow(10, floor(log10(x)) - 2), k = x / unit;
    k = dir < 0 ? floor(k + 1e-9) : dir > 0 ? ceil(k - 1e-9) : round(k);
    return k * unit;
}

/* The running requests rate x makes by the model (Little's law, "The
 * method" 3); INFINITY: past FIND_MAX_C; NAN: no model or no E2E ratio. */
static double rate_inflight(const sweep_find *f, const fit_run *run, const fit_result *res, double x)
{
    const scn_obj_term e2e = {.metric = SCN_OBJ_E2E, .stat = SCN_OBJ_MEAN, .at_most = 1, .name = "e2e_mean"};
    double n = 0;
    if (!res->law.ok || !res->model.done)
        return NAN;
    for (int i = 0; i < RATE_ITER; i++) {
        double at = n > 1 ? n : 1; /* a running request shares its steps with itself at least */
        double ratio = find_term_ratio(f, run, res, &e2e, at), step = find_model_step(res, at);
        double next = x * ratio * step / 1000.0;
        if (!isfinite(next) || !(step > 0))
            return NAN;
        if (next > FIND_MAX_C)
            return INFINITY;
        int done = fabs(next - n) <= 1e-4 * (n > 1 ? n : 1);
        n = next;
        if (done)
            break;
    }
    return n;
}

/* What the model says of rate x: 1 meets, 0 misses, -1 cannot say. */
static int rate_meets(const sweep_find *f, const fit_run *run, const fit_result *res, double x)
{
    double n = rate_inflight(f, run, res, x);
    if (isnan(n))
        return -1;
    if (isinf(n))
        return 0;
    return find_meets_at(f, run, res, n > 1 ? n : 1);
}

double find_rate_predict(const sweep_find *f, const fit_run *run, const fit_result *res)
{
    double top = find_largest_x(f);
    if (!(top > 0))
        return -1;
    double a = top / RATE_LOOK, b = 2 * top;
    int ma = rate_meets(f, run, res, a), mb;
    if (ma < 0)
        return -1;
    if (!ma)
        return 0; /* not even a sixty-fourth of the rates measured */
    while ((mb = rate_meets(f, run, res, b)) == 1 && b < RATE_LOOK * top)
        b *= 2;
    if (mb == 1)
        return b;
    for (int i = 0; i < RATE_BISECT; i++) {
        double mid = sqrt(a * b);
        if (rate_meets(f, run, res, mid) == 1)
            a = mid;
        else
            b = mid;
    }
    return a;
}

int find_pinned(const sweep_find *f, double lo, double hi)
{
    if (!f->by_rate)
        return hi == lo + 1;
    return lo > 0 && isfinite(hi) && hi <= lo * (1 + f->scn->find_precision) * (1 + 1e-9);
}

int find_rate_ladder_next(sweep_find *f, const fit_result *res, const find_meas *m, double pred, double *x)
{
    if (!m->meets)
        return 0;
    if (m->x == 0) { /* the opening C = 1: its requests per second keep about one in flight */
        double e2e = lone_e2e_ms(f, res);
        *x = round3(1000.0 / e2e, 0);
        return *x > 0 && isfinite(*x);
    }
    if (pred >= 0 && f->n_m >= 3 && pred <= FIND_REACH * m->x) {
        f->pred_ladder = pred;
        return 0;
    }
    if (m->n_inflight >= FIND_MAX_C / 2)
        return 0; /* find.c at_cap: the next rung would pass the cap */
    *x = 2 * m->x;
    return 1;
}

/* x rounded (dir as round3) when that keeps it strictly inside (lo, hi). */
static double inside(double x, int dir, double lo, double hi)
{
    double r = round3(x, dir);
    return r > lo && r < hi ? r : x;
}

double find_rate_probe(const sweep_find *f, double lo, double hi, double pred, int *expect)
{
    double p = f->scn->find_precision, x;
    int guided = pred > 0 && f->misses < FIND_MISSES;
    *expect = -1;
    if (guided && lo > 0 && pred < lo * (1 + p)) { /* the cheapest test of a boundary at lo */
        x = inside(lo * (1 + p), -1, lo, hi);
        *expect = 0;
    } else if (guided && pred >= hi / (1 + p)) {
        x = inside(hi / (1 + p), 1, lo, hi);
        *expect = 1;
    } else if (guided) {
        x = inside(pred, 0, lo, hi);
        *expect = x <= pred;
    } else {
        x = isinf(hi) ? 2 * lo : lo > 0 ? inside(sqrt(lo * hi), 0, lo, hi) : inside(hi / 2, 0, 0, hi);
    }
    double top = find_largest_x(f);
    if (isinf(hi) && x > FIND_REACH * top)
        x = FIND_REACH * top;
    return x > 0 ? x : top > 0 ? top : 1;
}

void find_rate_level(const sweep_find *f, const fit_run *run, const fit_result *res, double x, const char *role,
                     scn_level *next)
{
    *next = f->scn->levels[0];
    next->profile.enabled = 0;
    next->find_role = role;
    next->rate_per_s = x;
    next->concurrency = FIND_MAX_C;
    next->duration_s = 0;
    /* N by the model, within FIND_REACH times what lone requests would make:
     * near saturation Little's law magnifies an early model's error in b, and
     * past it the queue grows without bound whatever the level's size */
    double lone = x * lone_e2e_ms(f, res) / 1000.0, n = rate_inflight(f, run, res, x);
    n = isfinite(lone) ? (isfinite(n) ? fmin(n, FIND_REACH * lone) : lone) : n;
    n = isfinite(n) ? fmin(fmax(n, 1), FIND_MAX_C) : 1;
    /* the requests sent while the level fills (one E2E: about N of them) are warmup */
    next->warmup += (int)ceil(n);
    /* The arrivals' bunching moves an open level's figures as a whole, so
     * its requests also span several E2E (a rung 4, a probe 8): about as
     * many independent stretches of N as requests in flight. */
    int ladder = !strcmp(role, "ladder"), req = (int)ceil((ladder ? RATE_SPAN_LADDER : RATE_SPAN_PROBE) * n);
    if (!ladder)
        req = req > f->n_probe_req ? req : f->n_probe_req;
    req = req > 8 ? req : 8;
    next->n_requests = !strcmp(role, "sustain") ? 2 * req : req;
}
