/* pct.c: percentiles, exact from sorted samples up to a bound, then from a
 * log-bucketed histogram (DDSketch-style buckets, relative error LL_PCT_REL_ERR).
 *
 * Exact mode keeps every sample; at the bound all samples are moved into the
 * histogram and memory stays fixed from then on. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HIST_MIN 1e-9  /* values below count as the lowest bucket */
#define HIST_MAX 1e15

struct ll_pct {
    size_t bound, n;       /* n: samples added, in either mode */
    LL_VEC(double) exact;  /* every sample while hist == NULL */
    int sorted;
    uint64_t *hist;  /* bucket counts once past the bound */
    uint64_t zeros;  /* samples <= HIST_MIN in histogram mode */
    size_t nbuckets;
    double log_gamma, sum, min, max;
    double inv_log_gamma, log_hist_min; /* bucket_of multiplies: no division per value */
};

ll_pct *ll_pct_new(size_t exact_bound)
{
    ll_pct *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->bound = exact_bound ? exact_bound : (size_t)1 << 20;
    double gamma = (1 + LL_PCT_REL_ERR) / (1 - LL_PCT_REL_ERR);
    p->log_gamma = log(gamma);
    p->inv_log_gamma = 1 / p->log_gamma;
    p->log_hist_min = log(HIST_MIN);
    p->nbuckets = (size_t)ceil(log(HIST_MAX / HIST_MIN) / p->log_gamma) + 1;
    p->min = INFINITY;
    p->max = -INFINITY;
    return p;
}

void ll_pct_free(ll_pct *p)
{
    if (!p)
        return;
    ll_vec_free(&p->exact);
    free(p->hist);
    free(p);
}

static size_t bucket_of(const ll_pct *p, double x)
{
    double i = ceil((log(x) - p->log_hist_min) * p->inv_log_gamma);
    if (i < 0)
        i = 0;
    if (i >= (double)p->nbuckets)
        i = (double)p->nbuckets - 1;
    return (size_t)i;
}

static double bucket_value(const ll_pct *p, size_t i)
{
    /* Midpoint in relative terms of (gamma^(i-1), gamma^i]. */
    double g = exp(p->log_gamma);
    return HIST_MIN * 2.0 * exp(p->log_gamma * (double)i) / (g + 1.0);
}

static void hist_put(ll_pct *p, double x)
{
    if (x <= HIST_MIN)
        p->zeros++;
    else
        p->hist[bucket_of(p, x)]++;
}

static int to_histogram(ll_pct *p)
{
    p->hist = calloc(p->nbuckets, sizeof *p->hist);
    if (!p->hist)
        return LL_ENOMEM;
    for (size_t i = 0; i < p->exact.n; i++)
        hist_put(p, p->exact.v[i]);
    ll_vec_free(&p->exact);
    return 0;
}

int ll_pct_add(ll_pct *p, double x)
{
    if (!(x >= 0) || !isfinite(x))
        return LL_EINVAL;
    if (!p->hist && p->n >= p->bound && to_histogram(p))
        return LL_ENOMEM;
    if (p->hist) {
        hist_put(p, x);
    } else {
        if (ll_vec_push(&p->exact, x))
            return LL_ENOMEM;
        p->sorted = 0;
    }
    p->n++;
    p->sum += x;
    if (x < p->min)
        p->min = x;
    if (x > p->max)
        p->max = x;
    return 0;
}

int ll_pct_merge(ll_pct *dst, const ll_pct *src)
{
    if (src->hist) {
        if (!dst->hist && to_histogram(dst))
            return LL_ENOMEM;
        for (size_t i = 0; i < src->nbuckets; i++)
            dst->hist[i] += src->hist[i];
        dst->zeros += src->zeros;
        dst->n += src->n;
        dst->sum += src->sum;
        if (src->min < dst->min)
            dst->min = src->min;
        if (src->max > dst->max)
            dst->max = src->max;
        return 0;
    }
    for (size_t i = 0; i < src->exact.n; i++)
        if (ll_pct_add(dst, src->exact.v[i]))
            return LL_ENOMEM;
    return 0;
}

size_t ll_pct_count(const ll_pct *p) { return p->n; }
double ll_pct_mean(const ll_pct *p) { return p->n ? p->sum / (double)p->n : NAN; }
double ll_pct_min(const ll_pct *p) { return p->n ? p->min : NAN; }
double ll_pct_max(const ll_pct *p) { return p->n ? p->max : NAN; }
int ll_pct_is_exact(const ll_pct *p) { return p->hist == NULL; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Radix sort of doubles, for ll_sort_doubles past RADIX_MIN values: each
 * value's bits mapped to a 64-bit key that orders as the value does (sign bit
 * set: all bits flipped; else the sign bit set), then least-significant
 * digit first, RADIX_BITS a pass, a pass skipped when every key shares its
 * digit (the exponent's high bits, mostly). O(n) against qsort's n log n
 * compare calls, which were a fifth of `loadlaw fit`'s CPU on a long run
 * (docs/benchmarks.md). The keys map back to the very same bits, so the
 * result is qsort's, bit for bit, whenever no two distinct bit patterns
 * compare equal: -0 beside +0, or a NaN (which compares with nothing), send
 * the array to qsort instead. 1: sorted here; 0: not (qsort's turn). */
#define RADIX_BITS 11
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
#define RADIX_MIN 4096

/* 8 bytes at p as a key: the keys live in the values' own array, and a
 * memcpy (one load) keeps that free of type punning. */
static uint64_t key_at(const void *p)
{
    uint64_t k;
    memcpy(&k, p, sizeof k);
    return k;
}

#define DIGIT(k, p) ((size_t)((k) >> ((p) * RADIX_BITS)) & ((1u << RADIX_BITS) - 1))

static int radix_sort_doubles(double *v, size_t n)
{
    unsigned char *src = (unsigned char *)v, *dst = malloc(n * sizeof(uint64_t)), *buf = dst;
    uint32_t(*count)[1 << RADIX_BITS] = calloc(RADIX_PASSES, sizeof *count);
    int sorted = 0;
    if (!dst || !count)
        goto done;
    for (size_t i = 0; i < n; i++)
        if (isnan(v[i]) || (v[i] == 0 && signbit(v[i])))
            goto done; /* NaN or -0: qsort's order, not the bits' */
    for (size_t i = 0; i < n; i++) {
        uint64_t b = key_at(src + 8 * i), k = b >> 63 ? ~b : b | (uint64_t)1 << 63;
        memcpy(src + 8 * i, &k, sizeof k);
        for (int p = 0; p < RADIX_PASSES; p++)
            count[p][DIGIT(k, p)]++;
    }
    for (int p = 0; p < RADIX_PASSES; p++) {
        uint32_t *c = count[p], at = 0;
        if (c[DIGIT(key_at(src), p)] == n)
            continue; /* one digit for all: nothing moves */
        for (size_t d = 0; d < (1u << RADIX_BITS); d++) {
            uint32_t k = c[d];
            c[d] = at;
            at += k;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t k = key_at(src + 8 * i);
            memcpy(dst + 8 * (size_t)c[DIGIT(k, p)]++, &k, sizeof k);
        }
        unsigned char *t = src;
        src = dst;
        dst = t;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = key_at(src + 8 * i), b = k >> 63 ? k & ~((uint64_t)1 << 63) : ~k;
        memcpy(&v[i], &b, sizeof b);
    }
    sorted = 1;
done:
    free(buf);
    free(count);
    return sorted;
}

void ll_sort_doubles(double *v, size_t n)
{
    if (n >= RADIX_MIN && n <= UINT32_MAX && radix_sort_doubles(v, n))
        return;
    if (n > 1) /* qsort(NULL, 0) is undefined */
        qsort(v, n, sizeof *v, cmp_double);
}

double ll_quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    if (q <= 0)
        return v[0];
    if (q >= 1)
        return v[n - 1];
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] + f * (v[i + 1] - v[i]) : v[i];
}

size_t ll_pct_below(ll_pct *p, double x)
{
    size_t k = 0;
    if (!p->hist) {
        if (!p->sorted) {
            ll_sort_doubles(p->exact.v, p->exact.n);
            p->sorted = 1;
        }
        while (k < p->exact.n && p->exact.v[k] < x)
            k++;
        return k;
    }
    if (!(x > HIST_MIN))
        return 0;
    k = p->zeros;
    for (size_t i = 0, bx = bucket_of(p, x); i < bx; i++)
        k += p->hist[i];
    return k;
}

double ll_pct_quantile(ll_pct *p, double q)
{
    if (p->n == 0)
        return NAN;
    if (!p->hist) {
        if (!p->sorted) {
            ll_sort_doubles(p->exact.v, p->exact.n);
            p->sorted = 1;
        }
        return ll_quantile_sorted(p->exact.v, p->exact.n, q);
    }
    if (q <= 0)
        return p->min;
    if (q >= 1)
        return p->max;
    uint64_t rank = (uint64_t)floor(q * (double)(p->n - 1)) + 1; /* 1-based */
    uint64_t seen = p->zeros;
    if (seen >= rank)
        return p->min;
    for (size_t i = 0; i < p->nbuckets; i++) {
        seen += p->hist[i];
        if (seen >= rank) {
            double v = bucket_value(p, i);
            return v < p->min ? p->min : v > p->max ? p->max : v;
        }
    }
    return p->max;
}
