/* model.c: which law does the data show? The family — the line, a curve,
 * one or two knees (breakpoints searched over the distinct N), batch
 * buckets, the context term, and a knee or buckets with the context term —
 * each a least-squares design of model_terms.c, judged by BIC with a
 * practical-size threshold (so that thousands of points do not turn a 0.5%
 * wobble into "curved"), richer models only when they beat the simpler one
 * chosen so far by the margin. The chosen model then gets HC3 errors, and
 * each level is left out in turn to name one that alone made it win.
 *
 * The context term: K is the context tokens of the
 * decoding requests at a step (their prompts plus the tokens they have
 * received; fit_sample.k), c the step's cost per 1,000 of them. c is
 * identifiable only when K does not move with N (FIT_CONTEXT_COLLINEAR). Its
 * effect is the larger of its level means' departure from the line and the
 * step time K moves within a level (10th to 90th percentile), relative to
 * the line. Buckets: N padded up to the smallest captured batch size at or
 * above it (fit_bucket_of: vLLM's and SGLang's CUDA-graph sizes);
 * identifiable only when some level's N is not one of them. A richer model
 * is chosen when its BIC is lower than the line's by the margin and its
 * prediction departs from the line's by more than the minimum effect at some
 * level (every level is judged; the one that departs most is named).
 *
 * The chosen model: the check's choice (the line when
 * nothing richer qualifies), predicted at each closed-loop level's N = C and
 * mean K; every level's error against it is printed, and when one misses by
 * more than FIT_MODEL_LEVEL_FIT the headline says that no model of the
 * family fits every level, naming the worst. */
#include "fit_internal.h"
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int fit_model_qualifies(double bic_model, double bic_line, double effect, const fit_options *opt)
{
    return isfinite(bic_model) && bic_model < bic_line - opt->model_bic_margin && effect > opt->model_min_effect;
}

/* N padded up to the smallest captured batch size at or above it: 1, 2, 4,
 * then multiples of 8 up to 512 (vLLM's and SGLang's CUDA-graph sizes);
 * beyond 512, N itself. */
double fit_bucket_of(double n)
{
    if (n <= 1)
        return 1;
    if (n <= 2)
        return 2;
    if (n <= 4)
        return 4;
    if (n <= 512)
        return 8 * ceil(n / 8);
    return n;
}

/* corr(x, k); NAN when either is constant. */
static double correlation(const double *x, const double *k, size_t n)
{
    double mx = 0, mk = 0, sxx = 0, skk = 0, sxk = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        mk += k[i];
    }
    mx /= (double)n;
    mk /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        skk += (k[i] - mk) * (k[i] - mk);
        sxk += (x[i] - mx) * (k[i] - mk);
    }
    return sxx > 0 && skk > 0 ? sxk / sqrt(sxx * skk) : NAN;
}

/* K's 10th-to-90th percentile range over the points at N = at. */
static double context_spread(const double *x, const double *k, size_t n, double at)
{
    size_t m = 0;
    double *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] == at)
            v[m++] = k[i];
    double r = 0;
    if (m >= 5) {
        ll_sort_doubles(v, m);
        r = ll_quantile_sorted(v, m, 0.9) - ll_quantile_sorted(v, m, 0.1);
    }
    free(v);
    return r;
}

/* The mean K of the points at N = at (0 without K). */
static double level_k(const mdata *md, double at)
{
    double s = 0;
    size_t c = 0;
    for (size_t i = 0; md->k && i < md->n; i++)
        if (md->x[i] == at) {
            s += md->k[i];
            c++;
        }
    return c ? s / (double)c : 0;
}

/* f's largest relative departure from the line over the distinct N (at
 * each N the points' mean K). Where K grows with N as N times a fixed
 * context per request, a context model's level means are a line too: its
 * effect is then the step time K moves within a level (10th to 90th
 * percentile there). */
static void depart(const mdata *md, fit_model_fit *f)
{
    int has_k = fit_model_fit_has(f, FIT_TERM_K);
    double c = 0;
    for (size_t j = 0; has_k && j < f->p; j++)
        if (f->term[j] == FIT_TERM_K)
            c = f->coef[j];
    f->effect = 0;
    f->worst_n = NAN;
    for (size_t j = 0; j < md->nd; j++) {
        double line = md->cl[0] + md->cl[1] * md->d[j];
        double e = fabs(fit_model_fit_eval(f, md->d[j], level_k(md, md->d[j])) - line) / fabs(line);
        if (has_k) {
            double spread = fabs(c) * context_spread(md->x, md->k, md->n, md->d[j]) / 1000 / fabs(line);
            e = spread > e ? spread : e;
        }
        if (e > f->effect) {
            f->effect = e;
            f->worst_n = md->d[j];
        }
    }
}

int fit_mdata_fit(const mdata *md, fit_model_fit *f, int want_cov)
{
    int rc = fit_model_fit_run(f, md->x, md->y, md->k, md->n, md->floor_rss, want_cov, NULL);
    if (!rc)
        depart(md, f);
    return rc;
}

/* The knee(s) of kind (one for PIECEWISE and KNEE_CONTEXT, two for KNEES2)
 * with the least BIC: each knee a distinct N with at least two distinct N at
 * or below the first, one between two knees and one above the last. */
int fit_mdata_knees(const mdata *md, fit_model_kind kind, fit_model_fit *best)
{
    int two = kind == FIT_MODEL_KNEES2;
    fit_model_fit_spec(best, kind, NAN, NAN);
    best->p = 0;
    for (size_t a = 1; a + 1 < md->nd; a++)
        for (size_t b = two ? a + 1 : a; b + 1 < md->nd && (two || b == a); b++) {
            fit_model_fit f;
            fit_model_fit_spec(&f, kind, md->d[a], md->d[b]);
            int rc = fit_model_fit_run(&f, md->x, md->y, md->k, md->n, md->floor_rss, 0, NULL);
            if (rc)
                return rc;
            if (!best->p || f.bic < best->bic)
                *best = f;
        }
    if (best->p)
        depart(md, best);
    return 0;
}

/* The candidates, simplest first (BIC parameters, knees counted). */
static const fit_model_kind candidates[] = {FIT_MODEL_BUCKETS,         FIT_MODEL_QUADRATIC, FIT_MODEL_CONTEXT,
                                            FIT_MODEL_BUCKETS_CONTEXT, FIT_MODEL_PIECEWISE, FIT_MODEL_KNEE_CONTEXT,
                                            FIT_MODEL_KNEES2};
#define N_CANDIDATES (sizeof candidates / sizeof candidates[0])

/* Whether kind can be fitted on these points: a context term needs K that
 * does not move with N; buckets a level whose N is not a bucket size; one
 * knee four distinct N, two knees five. */
static int can_fit(const mdata *md, const fit_model_check *m, fit_model_kind kind)
{
    int ctx = kind == FIT_MODEL_CONTEXT || kind == FIT_MODEL_KNEE_CONTEXT || kind == FIT_MODEL_BUCKETS_CONTEXT;
    if (ctx && (!md->k || !isfinite(m->kn_corr) || fabs(m->kn_corr) > FIT_CONTEXT_COLLINEAR))
        return 0;
    if (kind == FIT_MODEL_BUCKETS || kind == FIT_MODEL_BUCKETS_CONTEXT) {
        int differs = 0;
        for (size_t j = 0; j < md->nd; j++)
            differs |= fit_bucket_of(md->d[j]) != md->d[j];
        return differs;
    }
    if (kind == FIT_MODEL_PIECEWISE || kind == FIT_MODEL_KNEE_CONTEXT)
        return md->nd >= 4;
    return kind == FIT_MODEL_KNEES2 ? md->nd >= 5 : 1;
}

/* A candidate with a context term gets its HC3 errors here: the choice
 * needs its c's interval (context_positive). */
static int fit_candidate(const mdata *md, fit_model_kind kind, fit_model_fit *f)
{
    int rc;
    if (kind == FIT_MODEL_PIECEWISE || kind == FIT_MODEL_KNEE_CONTEXT || kind == FIT_MODEL_KNEES2) {
        if ((rc = fit_mdata_knees(md, kind, f)) || !f->p || !fit_model_fit_has(f, FIT_TERM_K))
            return rc;
        return fit_mdata_fit(md, f, 1);
    }
    fit_model_fit_spec(f, kind, NAN, NAN);
    return fit_mdata_fit(md, f, fit_model_fit_has(f, FIT_TERM_K));
}

/* A context term is physics only when reading more context costs time: c's
 * 95% interval above 0. A negative c fits something else that differs with
 * K between levels (a batch size the kernels like, lengths that differ level
 * to level), and is set aside (fit_model_check.context_negative). */
static int context_positive(const fit_model_fit *f)
{
    for (size_t j = 0; j < f->p; j++)
        if (f->term[j] == FIT_TERM_K)
            return f->coef[j] - 1.96 * f->se[j] > 0;
    return 1;
}

int fit_model_params(const fit_model_fit *f)
{
    int k = (int)f->p;
    for (size_t j = 0; j < f->p; j++)
        k += f->term[j] == FIT_TERM_HINGE;
    return k;
}

/* The choice: simplest first, a candidate replaces the one chosen so far
 * when it qualifies against the line and its BIC is lower than the chosen
 * one's (by the margin when it has more parameters); a qualifying one with a
 * negative context term is set aside (*negative = 1). -1: the line. */
static int choose(const fit_model_fit *fits, const fit_options *opt, double bic_line, int *negative)
{
    int chosen = -1;
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        const fit_model_fit *f = &fits[i];
        if (!f->p || !fit_model_qualifies(f->bic, bic_line, f->effect, opt))
            continue;
        if (!context_positive(f)) {
            *negative = 1;
            continue;
        }
        double need = chosen < 0 ? bic_line - opt->model_bic_margin
                      : fit_model_params(f) > fit_model_params(&fits[chosen]) ? fits[chosen].bic - opt->model_bic_margin
                                                                : fits[chosen].bic;
        if (f->bic < need)
            chosen = (int)i;
    }
    return chosen;
}

/* The single models' figures, kept under their own names (JSON, verdicts,
 * compare's context terms). */
static void keep_figures(fit_model_check *m, const fit_model_fit *fits)
{
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        const fit_model_fit *f = &fits[i];
        if (!f->p)
            continue;
        switch (candidates[i]) {
        case FIT_MODEL_QUADRATIC:
            m->bic_quadratic = f->bic;
            m->quad_c_ms = f->coef[2];
            memcpy(m->quad_coef, f->coef, sizeof m->quad_coef);
            m->effect_quadratic = f->effect;
            m->worst_n_quadratic = f->worst_n;
            break;
        case FIT_MODEL_PIECEWISE:
            m->bic_piecewise = f->bic;
            m->knee_n = f->knee[2];
            memcpy(m->knee_coef, f->coef, sizeof m->knee_coef);
            m->slope_before_ms = f->coef[1];
            m->slope_after_ms = f->coef[1] + f->coef[2];
            m->effect_piecewise = f->effect;
            m->worst_n_piecewise = f->worst_n;
            break;
        case FIT_MODEL_CONTEXT:
            m->bic_context = f->bic;
            m->ctx_a_ms = f->coef[0];
            m->ctx_b_ms = f->coef[1];
            m->ctx_c_ms = f->coef[2];
            for (size_t a = 0; a < 3; a++)
                for (size_t b = 0; b < 3; b++)
                    m->ctx_cov[a][b] = f->cov[a][b];
            m->ctx_c_ci_ms[0] = f->coef[2] - 1.96 * f->se[2];
            m->ctx_c_ci_ms[1] = f->coef[2] + 1.96 * f->se[2];
            m->effect_context = f->effect;
            m->worst_n_context = f->worst_n;
            break;
        case FIT_MODEL_BUCKETS:
            m->bic_buckets = f->bic;
            m->bkt_a_ms = f->coef[0];
            m->bkt_b_ms = f->coef[1];
            m->effect_buckets = f->effect;
            m->worst_n_buckets = f->worst_n;
            break;
        case FIT_MODEL_KNEES2:
            m->knees2 = *f;
            break;
        case FIT_MODEL_KNEE_CONTEXT:
            m->knee_context = *f;
            break;
        default:
            m->buckets_context = *f;
        }
    }
}

/* The verdict's sentence for the chosen model (the line's says what each
 * richer model would have needed). */
static void model_verdict(fit_model_check *m, const fit_options *opt)
{
    char *v = m->verdict, formula[160];
    size_t n = sizeof m->verdict;
    const fit_model_fit *c = &m->chosen;
    int len;
    fit_model_fit_formula(c, 1, formula, sizeof formula);
    switch (m->best) {
    case FIT_MODEL_LINEAR:
        len = snprintf(v, n, "a straight line fits: quadratic BIC %+.1f (%.1f%%), knee BIC %+.1f (%.1f%%)",
                       m->bic_quadratic - m->bic_linear, 100 * m->effect_quadratic, m->bic_piecewise - m->bic_linear,
                       100 * m->effect_piecewise);
        if (len > 0 && (size_t)len < n && isfinite(m->bic_context))
            len += snprintf(v + len, n - (size_t)len, ", context BIC %+.1f (%.1f%%)",
                            m->bic_context - m->bic_linear, 100 * m->effect_context);
        if (len > 0 && (size_t)len < n && isfinite(m->bic_buckets))
            len += snprintf(v + len, n - (size_t)len, ", buckets BIC %+.1f (%.1f%%)",
                            m->bic_buckets - m->bic_linear, 100 * m->effect_buckets);
        if (len > 0 && (size_t)len < n)
            snprintf(v + len, n - (size_t)len, "; a richer model needs BIC -%g and %.0f%% at some level",
                     opt->model_bic_margin, 100 * opt->model_min_effect);
        return;
    case FIT_MODEL_PIECEWISE:
        len = snprintf(v, n, "knee at N=%g: slope %.4g ms per request before, %.4g after", m->knee_n,
                       m->slope_before_ms, m->slope_after_ms);
        break;
    case FIT_MODEL_QUADRATIC:
        len = snprintf(v, n, "curved: %+.4g ms*N^2", m->quad_c_ms);
        break;
    case FIT_MODEL_CONTEXT:
        len = snprintf(v, n, "context: %s ms (c 95%% [%.3g, %.3g])", formula, m->ctx_c_ci_ms[0], m->ctx_c_ci_ms[1]);
        break;
    case FIT_MODEL_BUCKETS:
        len = snprintf(v, n, "batch buckets: %s ms, N padded to 1,2,4,8,16,24,...", formula);
        break;
    default:
        len = snprintf(v, n, "%s: %s ms", fit_model_name(m->best), formula);
    }
    if (len > 0 && (size_t)len < n)
        len += snprintf(v + len, n - (size_t)len, " (BIC %.1f lower than a line; %.0f%% off it at N=%g)",
                        m->bic_linear - c->bic, 100 * c->effect, c->worst_n);
    if (len > 0 && (size_t)len < n && isfinite(m->alone_n))
        snprintf(v + len, n - (size_t)len, "; it rests on the level at N=%g alone (without it the line would do)",
                 m->alone_n);
}

static void model_reset(fit_model_check *m)
{
    m->best = FIT_MODEL_LINEAR;
    m->bic_linear = m->bic_quadratic = m->bic_piecewise = m->bic_context = m->bic_buckets = NAN;
    m->quad_c_ms = m->knee_n = m->slope_before_ms = m->slope_after_ms = NAN;
    m->effect_quadratic = m->effect_piecewise = m->effect_context = m->effect_buckets = NAN;
    m->worst_n_quadratic = m->worst_n_piecewise = m->worst_n_context = m->worst_n_buckets = NAN;
    m->ctx_a_ms = m->ctx_b_ms = m->ctx_c_ms = m->ctx_c_ci_ms[0] = m->ctx_c_ci_ms[1] = m->kn_corr = NAN;
    m->bkt_a_ms = m->bkt_b_ms = NAN;
    m->alone_n = NAN;
    fit_model_fit_spec(&m->chosen, FIT_MODEL_LINEAR, NAN, NAN);
    m->chosen.p = 0;
    m->knees2 = m->knee_context = m->buckets_context = m->chosen;
}

/* Every candidate on the points, the choice, the chosen model's HC3 errors
 * and the level it may rest on. */
static int check_points(const mdata *md, fit_model_check *m, const fit_options *opt)
{
    fit_model_fit fits[N_CANDIDATES];
    int rc;
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        fit_model_fit_spec(&fits[i], candidates[i], NAN, NAN);
        fits[i].p = 0;
        if (can_fit(md, m, candidates[i]) && (rc = fit_candidate(md, candidates[i], &fits[i])))
            return rc;
    }
    keep_figures(m, fits);
    int c = choose(fits, opt, md->bic_line, &m->context_negative);
    m->best = c < 0 ? FIT_MODEL_LINEAR : candidates[c];
    if (c >= 0) {
        m->chosen = fits[c];
        if ((rc = fit_mdata_fit(md, &m->chosen, 1)))
            return rc;
        m->alone_n = fit_model_alone_level(md, &m->chosen, opt);
    }
    return fit_model_heldout_run(md, m);
}

static int model_check_core(const double *x, const double *y, const double *k, size_t n, const fit_options *opt,
                            fit_model_check *m, char *err, size_t errlen)
{
    model_reset(m);
    double *d = NULL;
    size_t nd = 0;
    int rc = fit_distinct_x(x, n, &d, &nd);
    if (rc)
        goto oom;
    if (nd < 3 || n < 5) {
        snprintf(m->verdict, sizeof m->verdict,
                 "not checked: %zu distinct N (a curvature or knee check needs 3)", nd);
        snprintf(m->no_heldout, sizeof m->no_heldout, "not made: %zu distinct N (the line's 2 parameters need 3)",
                 nd);
        free(d);
        return 0;
    }
    double tss = fit_total_ss(y, n);
    mdata md = {.x = x, .y = y, .k = k, .n = n, .d = d, .nd = nd, .floor_rss = 1e-18 * (tss > 0 ? tss : 1.0)};
    fit_model_fit line;
    fit_model_fit_spec(&line, FIT_MODEL_LINEAR, NAN, NAN);
    if ((rc = fit_model_fit_run(&line, x, y, k, n, md.floor_rss, 0, NULL)))
        goto gslfail;
    md.cl[0] = line.coef[0];
    md.cl[1] = line.coef[1];
    md.bic_line = m->bic_linear = line.bic;
    if (k)
        m->kn_corr = correlation(x, k, n);
    if ((rc = check_points(&md, m, opt)))
        goto gslfail;
    m->done = 1;
    model_verdict(m, opt);
    free(d);
    return 0;
gslfail:
    free(d);
    if (rc == LL_ENOMEM)
        goto oom;
    ll_errf(err, errlen, "model check: least-squares fit failed");
    return LL_EINVAL;
oom:
    ll_errf(err, errlen, "out of memory in model check");
    return LL_ENOMEM;
}

double fit_context_per_request(const fit_result *r)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        if (r->levels[i].closed_loop && r->levels[i].concurrency > 0 && r->levels[i].k_mean > 0) {
            sum += r->levels[i].k_mean / r->levels[i].concurrency;
            n++;
        }
    return n ? sum / (double)n : NAN;
}

double fit_model_predict(const fit_model_check *m, const fit_law *line, double n, double k)
{
    if (m->done && m->best != FIT_MODEL_LINEAR && m->chosen.p)
        return fit_model_fit_eval(&m->chosen, n, k);
    return line && line->ok ? line->a_ms + line->b_ms * n : NAN;
}

const char *fit_model_name(fit_model_kind k)
{
    static const char *const names[] = {"linear",    "quadratic", "piecewise",         "context",
                                        "buckets",   "two-knees", "piecewise+context", "buckets+context"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "linear";
}

/* The model check compares least-squares fits, which a few wild steps (a
 * stalled client, a GC pause) would dominate. Points further than 6 robust
 * sd (1.4826 * MAD) from the median of their own N are left out first; the
 * test is model-free, so a real knee or curve is never trimmed away. Only N
 * values with at least 5 points are screened. */
int fit_model_check_run(const double *x, const double *y, const double *k, size_t n, const fit_options *opt,
                        fit_model_check *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    fit_xi_pair *pr = malloc((n + 1) * sizeof *pr);
    double *buf = malloc((n + 1) * sizeof *buf), *tx = malloc((n + 1) * sizeof *tx),
           *ty = malloc((n + 1) * sizeof *ty), *tk = malloc((n + 1) * sizeof *tk);
    unsigned char *drop = calloc(n + 1, 1);
    int rc = 0;
    if (!pr || !buf || !tx || !ty || !tk || !drop) {
        ll_errf(err, errlen, "out of memory in model check");
        rc = LL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        pr[i] = (fit_xi_pair){x[i], i};
    qsort(pr, n, sizeof *pr, fit_cmp_xi_pair);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && pr[j].x == pr[i].x)
            j++;
        if (j - i >= 5) {
            for (size_t q = i; q < j; q++)
                buf[q - i] = y[pr[q].i];
            double med, sd;
            fit_median_mad(buf, j - i, &med, &sd);
            for (size_t q = i; sd > 0 && q < j; q++)
                drop[pr[q].i] = fabs(y[pr[q].i] - med) > 6 * sd;
        }
        i = j;
    }
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop[i]) {
            tx[nt] = x[i];
            tk[nt] = k ? k[i] : 0;
            ty[nt++] = y[i];
        }
    rc = model_check_core(tx, ty, k ? tk : NULL, nt, opt, m, err, errlen);
    m->n_trimmed = n - nt;
done:
    free(pr);
    free(buf);
    free(tx);
    free(ty);
    free(tk);
    free(drop);
    return rc;
}
