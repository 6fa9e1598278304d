/* compare_units.c: the resampling units of one level of an A/B comparison
 * (its engine steps at N = C, per request, or each request's decode span)
 * and the unpaired bootstrap of a common level's throughput ratio (compare.c
 * defines the rate X). compare.c matches the levels and calls
 * cmp_unpaired_level for a key whose levels carry no pair numbers;
 * compare_paired.c uses the same units for the paired interval.
 *
 * Unpaired: the 95% interval of X_B / X_A is a percentile bootstrap over R
 * resamples that resamples engine steps: each step (fit_level_steps) is one
 * unit (tokens, time). A level with no steady window falls back to one unit
 * per request (its decode span, first token -> end) and says so (steady =
 * 0). Fewer than FIT_COMPARE_MIN_UNITS units on either side: no interval
 * (NAN ends, so a gate fails): a bootstrap over one unit repeats the
 * estimate R times, and over a handful it has almost nothing to vary. R
 * below FIT_COMPARE_MIN_RESAMPLES is refused (the 2.5% tail of a 95%
 * interval needs some resamples in it).
 *
 * The bootstrap resamples engine steps with every request's tokens in them,
 * not single requests, the unit that looks natural: the C streams of a
 * level share each engine step, so their rates move together, and
 * resampling requests as if independent (per-request steady tokens / steady
 * time, ratio of sums; fit_compare_options.resample_requests) gives
 * intervals too narrow. Measured on 100 pairs of generated runs (runs_gen.h:
 * 20+12n vs 20+4n ms, 3% jitter, 4 waves of 24 tokens, 1000 resamples),
 * coverage of the true ratio by the 95% interval: steps 0.93 / 0.95 / 0.93
 * at C = 1 / 4 / 16, requests 0.86 / 0.48 / 0.30 (widths 0.009 vs 0.044 at
 * C = 16, the sqrt(C)-ish shrink). test_compare re-measures a smaller
 * version. The RNG is the caller's (compare.c: GSL's mt19937 with a fixed
 * seed, so the same runs always give the same interval). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "compare_internal.h"

/* ---- resampling units --------------------------------------------------------- */

typedef LL_VEC(cmp_unit) unit_vec;

/* One unit per request: its whole decode span (first arrival -> last), for a
 * level without steady windows. */
static int decode_span_units(const fit_run *run, const fit_level *L, unit_vec *out, size_t *n_req)
{
    fit_chunks ch = {0};
    size_t i0, i1;
    int rc = 0;
    fit_run_level_span(run, L->level, &i0, &i1);
    for (size_t i = i0; i < i1 && !rc; i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        if (q->level != L->level || !fit_request_ok(q) || q->warmup || q->n_chunks < 2 ||
            (rc = fit_chunks_of(run, q, &ch)))
            continue;
        cmp_unit u = {0, (ch.v[ch.n - 1].t_ns - ch.v[0].t_ns) / 1e9};
        for (size_t k = 1; k < ch.n; k++)
            u.tok += ch.v[k].tokens;
        if (!(u.time_s > 0))
            continue;
        rc = ll_vec_push(out, u);
        *n_req += rc == 0;
    }
    fit_chunks_free(&ch);
    return rc;
}

/* One unit per request: its steady gaps at N = C (tokens, seconds), the
 * resample_requests mode kept for test_compare's coverage check; from the
 * level's samples made again (the result keeps them reduced). */
static int steady_request_units(const fit_run *run, const fit_result *res, size_t li, unit_vec *out,
                                size_t *n_req)
{
    const fit_level *L = &res->levels[li];
    fit_sample *s = NULL;
    size_t n = 0, last = 0;
    int rc = fit_level_samples(run, res, li, &s, &n);
    *n_req = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!s[i].steady || (L->closed_loop && s[i].n != L->concurrency))
            continue;
        /* samples are stream by stream: a new request starts a new unit */
        if (!*n_req || s[i].req_idx != s[last].req_idx) {
            rc = ll_vec_push(out, ((cmp_unit){0, 0}));
            *n_req += !rc;
        }
        if (!rc) {
            out->v[out->n - 1].tok += s[i].tokens;
            out->v[out->n - 1].time_s += s[i].gap_ms * s[i].tokens / 1e3;
        }
        last = i;
    }
    free(s);
    return rc;
}

/* The resampling units of one level, as (tokens, seconds) pairs.
 * steady = 1: one pair per engine step at N = C (fit_level_steps, analyze_law.c "One
 * engine step"), or per request with per_request; their ratio is exactly
 * fit_level.steady_tok_per_s. steady = 0: one pair per request, its whole
 * decode span. *n_req counts the requests that contributed. */
static int level_units(const fit_run *run, const fit_result *res, size_t li, int steady,
                       int per_request, cmp_unit **out, size_t *n_out, size_t *n_req)
{
    const fit_level *L = &res->levels[li];
    /* closed loop: the steps at N = C; open loop: every steady step */
    unit_vec v = {0};
    const fit_step *st;
    size_t ns = 0;
    int rc = 0;
    *n_req = 0;
    if (!steady) {
        rc = decode_span_units(run, L, &v, n_req);
    } else if (per_request) {
        rc = steady_request_units(run, res, li, &v, n_req);
    } else {
        fit_level_steps(res, li, &st, &ns);
        for (size_t k = 0; k < ns && !rc; k++)
            rc = ll_vec_push(&v, ((cmp_unit){st[k].tokens, st[k].gap_ms / 1e3}));
        *n_req = res->kept->levels[li].n_step_requests; /* the requests behind the steps */
    }
    if (rc) {
        ll_vec_free(&v);
        return rc;
    }
    *out = v.v;
    *n_out = v.n;
    return 0;
}

double cmp_ratio_estimate(const cmp_unit *v, size_t n, double c)
{
    double tok = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        tok += v[i].tok;
        t += v[i].time_s;
    }
    return t > 0 ? c * tok / t : NAN;
}

static double resample_estimate(const gsl_rng *rng, const cmp_unit *v, size_t n, double c)
{
    double tok = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        const cmp_unit *p = &v[gsl_rng_uniform_int(rng, n)];
        tok += p->tok;
        t += p->time_s;
    }
    return t > 0 ? c * tok / t : NAN;
}

void cmp_level_latency(const fit_level *L, fit_level_latency *out)
{
    out->ttft = L->ttft;
    out->ttfa = L->ttfa;
    out->itl = L->itl;
}

typedef struct span_ns {
    int64_t t0, t1;
} span_ns;

static int cmp_span_start(const void *a, const void *b)
{
    int64_t u = ((const span_ns *)a)->t0, v = ((const span_ns *)b)->t0;
    return (u > v) - (u < v);
}

/* The mean number of the level's requests decoding at once while any was:
 * the decode spans of decode_span_units, summed, over the time their union
 * covers. 0 when there are none; -1 when out of memory or the chunks
 * could not be read back. */
static double decoding_at_once(const fit_run *run, const fit_level *L)
{
    span_ns *sp = malloc((fit_run_n_requests(run) + 1) * sizeof *sp);
    if (!sp)
        return -1;
    size_t n = 0, i0, i1;
    fit_chunks ch = {0};
    fit_run_level_span(run, L->level, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        if (q->level != L->level || !fit_request_ok(q) || q->warmup || q->n_chunks < 2)
            continue;
        if (fit_chunks_of(run, q, &ch)) {
            fit_chunks_free(&ch);
            free(sp);
            return -1;
        }
        span_ns s = {ch.v[0].t_ns, ch.v[ch.n - 1].t_ns};
        if (s.t1 > s.t0)
            sp[n++] = s;
    }
    fit_chunks_free(&ch);
    qsort(sp, n, sizeof *sp, cmp_span_start);
    double sum = 0, cover = 0;
    int64_t end = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        sum += (double)(sp[i].t1 - sp[i].t0);
        if (sp[i].t1 > end) {
            cover += (double)(sp[i].t1 - (sp[i].t0 > end ? sp[i].t0 : end));
            end = sp[i].t1;
        }
    }
    free(sp);
    return cover > 0 ? sum / cover : 0;
}

/* The factor c of X = c * sum tok / sum time. An open level: 1 (X is the
 * per-stream decode rate). A closed level's steady steps: C (the steps are
 * at N = C, and X is its throughput). A closed level's decode spans: the
 * requests that decoded at once, measured, at most C. C itself assumed C
 * streams where fewer ran: with one request at C = 8 its one stream's rate
 * came out 8-fold, and a run of one request a level beat a run of two
 * (B/A 0.74 for a true 1.45). */
double cmp_rate_factor(const fit_run *run, const fit_level *L, int steady)
{
    if (!L->closed_loop || L->concurrency <= 0)
        return 1;
    if (steady)
        return L->concurrency;
    double m = decoding_at_once(run, L);
    if (m < 0)
        return NAN; /* out of memory: no figure rather than a wrong one */
    return m < 1 ? 1 : m > L->concurrency ? L->concurrency : m;
}

/* Units of level ia in a and ib in b, steady in both or decode spans in both. */
int cmp_both_units(const fit_run *a, const fit_result *ra, size_t ia, const fit_run *b, const fit_result *rb,
                   size_t ib, int rq, int *steady, cmp_unit **pa, size_t *na, size_t *nra, cmp_unit **pb,
                   size_t *nb, size_t *nrb)
{
    const fit_level *La = &ra->levels[ia], *Lb = &rb->levels[ib];
    /* an open level has no windows of D = C; its steps tell whether it was steady */
    *steady = (La->n_windows > 0 || !La->closed_loop) && (Lb->n_windows > 0 || !Lb->closed_loop);
    *pa = *pb = NULL;
    if (level_units(a, ra, ia, *steady, rq, pa, na, nra) || level_units(b, rb, ib, *steady, rq, pb, nb, nrb))
        return LL_ENOMEM;
    if (*steady && (*na == 0 || *nb == 0)) {
        /* windows exist but no gap lies inside one: use decode spans */
        free(*pa);
        free(*pb);
        *pa = *pb = NULL;
        *steady = 0;
        if (level_units(a, ra, ia, 0, 0, pa, na, nra) || level_units(b, rb, ib, 0, 0, pb, nb, nrb))
            return LL_ENOMEM;
    }
    return 0;
}

void cmp_level_key(fit_compare_level *out, const fit_level *La, const fit_level_info *ia_info)
{
    out->concurrency = La->concurrency;
    out->open_loop = !La->closed_loop;
    out->rate_per_s = out->open_loop ? ia_info->rate_per_s : NAN;
}

int cmp_unpaired_level(const fit_run *a, const fit_result *ra, size_t ia, const fit_run *b, const fit_result *rb,
                       size_t ib, const fit_compare_options *o, gsl_rng *rng, fit_compare_level *out, cmp_unit **ua,
                       cmp_unit **ub, size_t *nua, size_t *nub, char *err, size_t errlen)
{
    const fit_level *La = &ra->levels[ia], *Lb = &rb->levels[ib];
    int rc = LL_ENOMEM;
    cmp_unit *pa = NULL, *pb = NULL;
    double *boot = NULL;
    size_t na = 0, nb = 0;
    memset(out, 0, sizeof *out);
    cmp_level_key(out, La, fit_run_level(a, ia));
    out->level_a = La->level;
    out->level_b = Lb->level;
    out->ratio_method = "bootstrap";
    out->within_var = out->between_var = out->df = NAN;
    if (cmp_both_units(a, ra, ia, b, rb, ib, o->resample_requests, &out->steady, &pa, &na, &out->n_req_a, &pb, &nb,
                   &out->n_req_b))
        goto fail;
    double ca = cmp_rate_factor(a, La, out->steady), cb = cmp_rate_factor(b, Lb, out->steady);
    out->n_units_a = na;
    out->n_units_b = nb;
    out->tok_per_s_a = cmp_ratio_estimate(pa, na, ca);
    out->tok_per_s_b = cmp_ratio_estimate(pb, nb, cb);
    out->ratio = out->tok_per_s_b / out->tok_per_s_a;
    out->ratio_ci[0] = out->ratio_ci[1] = NAN;
    if (na >= FIT_COMPARE_MIN_UNITS && nb >= FIT_COMPARE_MIN_UNITS && o->n_resamples > 0) {
        boot = malloc((size_t)o->n_resamples * sizeof *boot);
        if (!boot)
            goto fail;
        size_t nbt = 0;
        for (int r = 0; r < o->n_resamples; r++) {
            double xa = resample_estimate(rng, pa, na, ca);
            double xb = resample_estimate(rng, pb, nb, cb);
            if (xa > 0 && isfinite(xb))
                boot[nbt++] = xb / xa;
        }
        if (nbt > 0) {
            ll_sort_doubles(boot, nbt);
            double alpha = (1 - o->ci) / 2;
            out->ratio_ci[0] = ll_quantile_sorted(boot, nbt, alpha);
            out->ratio_ci[1] = ll_quantile_sorted(boot, nbt, 1 - alpha);
        }
    }
    cmp_level_latency(La, &out->lat_a);
    cmp_level_latency(Lb, &out->lat_b);
    *ua = pa;
    *ub = pb;
    *nua = na;
    *nub = nb;
    pa = pb = NULL;
    rc = 0;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory");
    free(pa);
    free(pb);
    free(boot);
    return rc;
}
