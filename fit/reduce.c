/* reduce.c: a level's step samples reduced to what the analysis and its
 * readers need after the level, so that the result holds no array of every
 * sample of the run (56 bytes an event: most of what `loadlaw fit` held on a
 * long run, docs/benchmarks.md).
 *
 * A level's samples, reduced (fit_level_reduce, once per level, right after
 * timeline.c made them; fit_analyze then lets them go):
 *  - its engine steps (analyze_law.c "One engine step"): the law's points,
 *    the steady throughput's interval and compare's units, and the count of
 *    requests behind them (compare);
 *  - its burst figures (fit_tuning.h FIT_BURST_*) and the largest N of its
 *    steady samples (plan: an open level's reach);
 *  - its position bins (position.c);
 *  - every sample's (N, ms) for the naive fit on every gap (naive.c: the
 *    points up to a bound, running sums past it), finished by fit_laws;
 *  - the chart sample below.
 * Each is computed from the level's samples exactly as it was from the run's
 * array, in the same order, so every figure is the same to the bit. A big
 * level's samples come one instant at a time from stream.c, which feeds the
 * same steps (fit_step_feed) and kept points (fit_kept_samples).
 *
 * Chart sample (fit_result.chart): the report draws at most RPT_MAX_POINTS
 * step samples of each kind (steady, other), every stride-th, and places the
 * model view's K/N lines at quantiles of the steady ones. Up to
 * FIT_CHART_KEEP samples of a kind are kept whole, so a run of that size
 * charts exactly as before; past it every second kept point is let go and
 * the stride doubles, so what is kept is every 2^j-th sample of the kind
 * (at most FIT_CHART_KEEP + 1 points) and the page draws from that. A note
 * says so when it happens. A fit_level_samples caller gets every sample
 * again from the run. */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int fit_kept_new(fit_result *res, size_t n_levels, const fit_options *opt)
{
    struct fit_kept *k = calloc(1, sizeof *k);
    if (!k || !(k->levels = calloc(n_levels ? n_levels : 1, sizeof *k->levels))) {
        free(k);
        return LL_ENOMEM;
    }
    k->opt = *opt;
    k->n_levels = n_levels;
    fit_naive_init(&k->naive, FIT_NAIVE_KEEP);
    k->step_stride = 1;
    res->kept = k;
    res->chart.stride_steady = res->chart.stride_other = 1;
    return 0;
}

void fit_kept_free(struct fit_kept *k)
{
    if (!k)
        return;
    for (size_t l = 0; l < k->n_levels; l++)
        free(k->levels[l].steps);
    free(k->levels);
    fit_naive_free(&k->naive);
    ll_vec_free(&k->steady);
    ll_vec_free(&k->other);
    free(k);
}

void fit_level_steps(const fit_result *r, size_t level_idx, const fit_step **out, size_t *n_out)
{
    const fit_level_kept *lk = r->kept && level_idx < r->kept->n_levels ? &r->kept->levels[level_idx] : NULL;
    *out = lk ? lk->steps : NULL;
    *n_out = lk ? lk->n_steps : 0;
}

/* The N a level's steps are taken at: C in a closed-loop level with one,
 * else 0 (every steady sample). */
static double steps_at_n(const fit_level *L)
{
    return L->closed_loop && L->concurrency > 0 ? L->concurrency : 0;
}

static int cmp_sample_time(const void *a, const void *b)
{
    const fit_sample *x = *(const fit_sample *const *)a, *y = *(const fit_sample *const *)b;
    if (x->t_ns != y->t_ns)
        return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
    return (x->n > y->n) - (x->n < y->n);
}

/* The level's steps kept until the result is freed: no growth slack. */
static void steps_fit(fit_level_kept *lk)
{
    fit_step *v = lk->n_steps ? realloc(lk->steps, lk->n_steps * sizeof *v) : NULL;
    if (!lk->n_steps) {
        free(lk->steps);
        lk->steps = NULL;
    } else if (v) {
        lk->steps = v;
    }
    lk->cap_steps = lk->n_steps;
}

/* "Steps kept": every step adds to the level's sums (the steady interval's
 * ratio and mean K use every step); 1 in k->step_stride is kept, the
 * level's 0th, stride-th, 2*stride-th... When the run holds more than
 * FIT_STEPS_KEEP, every level lets go of every second one it kept (what
 * stays is 1 in 2*stride, the same positions) and the stride doubles, so
 * every level keeps the same share of its steps whenever it was made. */
static int step_keep(struct fit_kept *k, fit_level_kept *lk, const fit_step *st)
{
    lk->sum_gap_ms += st->gap_ms;
    lk->sum_tok += st->tokens;
    lk->sum_k_tok += st->k * st->tokens;
    if (lk->n_steps_seen++ % k->step_stride)
        return 0;
    if (lk->n_steps == lk->cap_steps) {
        size_t cap = lk->cap_steps ? 2 * lk->cap_steps : 64;
        fit_step *v = realloc(lk->steps, cap * sizeof *v);
        if (!v)
            return LL_ENOMEM;
        lk->steps = v;
        lk->cap_steps = cap;
    }
    lk->steps[lk->n_steps++] = *st;
    if (++k->n_steps_kept <= (k->opt.steps_keep ? k->opt.steps_keep : FIT_STEPS_KEEP))
        return 0;
    k->n_steps_kept = 0;
    for (size_t l = 0; l < k->n_levels; l++) {
        fit_level_kept *o = &k->levels[l];
        for (size_t i = 0; 2 * i < o->n_steps; i++)
            o->steps[i] = o->steps[2 * i];
        o->n_steps = (o->n_steps + 1) / 2;
        k->n_steps_kept += o->n_steps;
        if (o != lk)
            steps_fit(o);
    }
    k->step_stride *= 2;
    return 0;
}

int fit_step_takes(const fit_level *L, const fit_sample *s)
{
    double at_n = steps_at_n(L);
    return s->steady && (!(at_n > 0) || s->n == at_n);
}

/* The open step, if any, kept (its K the token-weighted mean). */
static int step_close(struct fit_kept *k, fit_level_kept *lk, fit_step *open)
{
    if (!open->n_samples)
        return 0;
    open->k /= open->tokens;
    int rc = step_keep(k, lk, open);
    memset(open, 0, sizeof *open);
    return rc;
}

/* analyze_law.c "One engine step": s joins the open step while it has its N
 * and arrives within FIT_STEP_GROUP_FRAC of its own gap after the step's
 * first sample (a sample of the next step ends a whole (next) step after
 * the first, however short that step is); else it opens the next. */
int fit_step_feed(struct fit_kept *k, fit_level_kept *lk, fit_step *open, const fit_sample *s)
{
    if (!open->n_samples || s->n != open->n ||
        !((double)(s->t_ns - open->t_ns) <= FIT_STEP_GROUP_FRAC * s->gap_ms * 1e6 * s->tokens)) {
        int rc = step_close(k, lk, open);
        if (rc)
            return rc;
        *open = (fit_step){.t_ns = s->t_ns, .n = s->n};
    }
    open->n_samples++;
    open->tokens += (uint32_t)s->tokens;
    open->gap_ms += s->gap_ms * s->tokens;
    open->k += s->k * s->tokens;
    return 0;
}

int fit_step_done(struct fit_kept *k, fit_level_kept *lk, fit_step *open)
{
    int rc = step_close(k, lk, open);
    steps_fit(lk);
    return rc;
}

/* The level's steady samples that make steps, in time order, fed one by
 * one (fit_step_feed). */
static int group_steps(struct fit_kept *k, const fit_level *L, const fit_sample *s, size_t n, fit_level_kept *lk)
{
    int rc;
    LL_VEC(const fit_sample *) sel = {0};
    fit_step open = {0};
    for (size_t i = 0; i < n; i++)
        if (fit_step_takes(L, &s[i]))
            LL_TRY(ll_vec_push(&sel, &s[i]));
    if (sel.n > 1) /* qsort(NULL, 0) is undefined */
        qsort(sel.v, sel.n, sizeof *sel.v, cmp_sample_time);
    for (size_t i = 0; i < sel.n; i++)
        LL_TRY(fit_step_feed(k, lk, &open, sel.v[i]));
fail:
    ll_vec_free(&sel);
    int done = fit_step_done(k, lk, &open);
    return rc ? rc : done;
}

int fit_step_request(const fit_level *L, const fit_sample *s)
{
    return s->steady && !(L->closed_loop && s->n != L->concurrency);
}

/* Requests with a steady sample at the level's C (closed loop) or any
 * (open loop): compare's count of the requests behind its units. Samples
 * come stream by stream, so each request is one run of them. */
static size_t step_requests(const fit_level *L, const fit_sample *s, size_t n)
{
    size_t count = 0;
    int have = 0;
    uint32_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fit_step_request(L, &s[i]))
            continue;
        if (!have || last != s[i].req_idx)
            count++;
        have = 1;
        last = s[i].req_idx;
    }
    return count;
}

/* fit_tuning.h FIT_BURST_*: the share of the level's samples too short to be
 * a step. Real steps of one stream are never shorter than the step itself;
 * only the client's reading (several steps' chunks collected in one read,
 * each stamped as it is parsed) makes gaps of microseconds. Chunks stamped
 * at one instant are merged into one sample by timeline.c and stay honest
 * (the gap over their tokens), so only distinct stamps show up here. */
static int burst_level(fit_level *L, const fit_sample *s, size_t n)
{
    L->burst_gap_frac = L->burst_gap_ms = NAN;
    if (n < FIT_BURST_MIN_SAMPLES)
        return 0;
    double *g = malloc(n * sizeof *g);
    if (!g)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        g[i] = s[i].gap_ms;
    ll_sort_doubles(g, n);
    double bound = 0.1 * ll_quantile_sorted(g, n, 0.9);
    size_t k = 0;
    while (k < n && g[k] < bound)
        k++;
    L->burst_gap_ms = bound;
    L->burst_gap_frac = (double)k / (double)n;
    free(g);
    return 0;
}

/* "Chart sample" above: p, the seen-th sample of its kind, kept when seen
 * is a multiple of the stride; past FIT_CHART_KEEP points every second
 * one goes and the stride doubles. */
static int chart_push(fit_chart_vec *v, size_t *seen, size_t *stride, fit_chart_point p)
{
    if ((*seen)++ % *stride)
        return 0;
    if (ll_vec_push(v, p))
        return LL_ENOMEM;
    if (v->n > FIT_CHART_KEEP) {
        for (size_t i = 0; 2 * i < v->n; i++)
            v->v[i] = v->v[2 * i];
        v->n = (v->n + 1) / 2;
        *stride *= 2;
    }
    return 0;
}

int fit_kept_samples(fit_result *res, const fit_sample *s, size_t n)
{
    struct fit_kept *k = res->kept;
    fit_chart_sample *c = &res->chart;
    int rc;
    for (size_t i = 0; i < n; i++) {
        LL_TRY(fit_naive_add(&k->naive, s[i].n, s[i].gap_ms));
        c->n_max = s[i].n > c->n_max ? s[i].n : c->n_max;
        fit_chart_point p = {s[i].n, s[i].gap_ms, s[i].k};
        if (s[i].steady)
            LL_TRY(chart_push(&k->steady, &k->seen_steady, &c->stride_steady, p));
        else
            LL_TRY(chart_push(&k->other, &k->seen_other, &c->stride_other, p));
    }
fail:
    return rc;
}

int fit_level_reduce(fit_result *res, size_t level_idx, const fit_sample *s, size_t n)
{
    fit_level *L = &res->levels[level_idx];
    fit_level_kept *lk = &res->kept->levels[level_idx];
    int rc;
    res->n_samples += n;
    fit_position_level(L, n ? s : NULL, n, (int32_t)level_idx, &lk->pos);
    LL_TRY(burst_level(L, s, n));
    LL_TRY(group_steps(res->kept, L, s, n, lk));
    lk->n_step_requests = step_requests(L, s, n);
    L->steady_n_max = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].steady && s[i].n > L->steady_n_max)
            L->steady_n_max = s[i].n;
    LL_TRY(fit_kept_samples(res, s, n));
fail:
    return rc;
}

/* The note for one kind when its chart points are a sample. */
static int chart_note(fit_result *res, const char *kind, size_t stride, size_t kept, size_t seen)
{
    if (stride <= 1)
        return 0;
    return fit_note(res, "the report's step charts draw %s step samples from a sample: 1 in %zu (%zu of %zu)", kind,
                    stride, kept, seen);
}

int fit_kept_finish(fit_result *res)
{
    struct fit_kept *k = res->kept;
    fit_chart_sample *c = &res->chart;
    c->steady = k->steady.v;
    c->n_steady = k->steady.n;
    c->other = k->other.v;
    c->n_other = k->other.n;
    memset(&k->steady, 0, sizeof k->steady);
    memset(&k->other, 0, sizeof k->other);
    int rc = chart_note(res, "steady", c->stride_steady, c->n_steady, k->seen_steady);
    return rc ? rc : chart_note(res, "other", c->stride_other, c->n_other, k->seen_other);
}
