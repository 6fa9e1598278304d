/* outputs.c: did run B produce what run A produced? (outputs.c "outputs
 * comparison"; docs/ab.md "Outputs").
 *
 * Method. Each run's measured ok requests that carry an "outputs" member
 * (records.h ll_rec_outputs) are grouped by level (closed-loop C or open-loop
 * rate, so the R repeats of an A/B level fall together) and by prompt key; the
 * k-th request of a (level, key) in A, by request id, is paired with the k-th
 * in B. A pair is compared on the most exact sequence both sides hold: token
 * ids, else token texts (from logprobs), else the text's hash and length
 * (identical or not, without a position). Where the sequences differ, the
 * first index where they do is the divergence position; a shorter sequence
 * that is a prefix of the other diverges at its end. At that position, when
 * both sides sent top-k alternatives, A's token is looked up among B's and
 * B's among A's, by token text: a greedy tie broken the other way by a
 * different summation order keeps both tokens in each other's top-k, a wrong
 * kernel does not. The chosen tokens' |logprob_A - logprob_B| is averaged
 * over the common prefix (the tokens before the divergence; all of them for
 * an identical pair), per token. Cost: a sort of each run's requests, then
 * one pass over each pair's tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fit_internal.h"

typedef struct group {
    int open_loop, concurrency;
    double rate_per_s;
} group;

typedef struct oreq {
    int group;                  /* index into the groups (A's), -1 when A has none like it */
    uint64_t id;
    size_t occ;                 /* k-th request of its (group, key) */
    ll_rec_outputs *o;
} oreq;

typedef LL_VEC(group) group_vec;

typedef struct side {
    int is_b;
    group_vec *groups;          /* shared: A adds, B looks up */
    LL_VEC(int) level_group;    /* level index -> group (-1 unknown) */
    LL_VEC(oreq) reqs;
    fit_outputs *res;
    int no_outputs;             /* the run line says outputs were not recorded */
} side;

static int same_group(const group *g, int open_loop, int c, double rate)
{
    return g->open_loop == open_loop &&
           (open_loop ? fabs(g->rate_per_s - rate) <= 1e-9 * fabs(rate) : g->concurrency == c);
}

/* A run whose scenario did not record outputs has none: stop reading it
 * there (LL_EINTR, taken as done by read_side), so that a comparison of
 * ordinary runs reads no record twice. */
static int on_run(const ll_rec_run *run, void *ctx)
{
    side *s = ctx;
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(run->config, "request");
    s->no_outputs = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "record_outputs"));
    return s->no_outputs ? LL_EINTR : 0;
}

static int on_level(const ll_rec_level *lv, void *ctx)
{
    side *s = ctx;
    int gi = -1;
    for (size_t i = 0; i < s->groups->n; i++)
        if (same_group(&s->groups->v[i], lv->open_loop, lv->concurrency, lv->rate_per_s))
            gi = (int)i;
    if (gi < 0 && !s->is_b) {
        group g = {lv->open_loop, lv->concurrency, lv->rate_per_s};
        if (ll_vec_push(s->groups, g))
            return LL_ENOMEM;
        gi = (int)s->groups->n - 1;
    }
    if (lv->level < 0 || lv->level > 1000000)
        return 0;
    while (s->level_group.n <= (size_t)lv->level)
        if (ll_vec_push(&s->level_group, -1))
            return LL_ENOMEM;
    s->level_group.v[lv->level] = gi;
    return 0;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    side *s = ctx;
    int k = s->is_b;
    if (rq->warmup || rq->cls != LL_ERRC_OK)
        return 0;
    s->res->n_req[k]++;
    if (!rq->outputs)
        return 0;
    s->res->n_with_outputs[k]++;
    s->res->n_with_lp[k] += rq->outputs->lp != NULL;
    s->res->n_with_top[k] += rq->outputs->top_k > 0;
    s->res->n_with_ids[k] += rq->outputs->ids != NULL;
    int gi = rq->level >= 0 && (size_t)rq->level < s->level_group.n ? s->level_group.v[rq->level] : -1;
    oreq r = {gi, rq->id, 0, ll_rec_outputs_dup(rq->outputs)};
    if (!r.o || ll_vec_push(&s->reqs, r)) {
        ll_rec_outputs_free(r.o);
        return LL_ENOMEM;
    }
    return 0;
}

static int by_group_key_id(const void *pa, const void *pb)
{
    const oreq *a = pa, *b = pb;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    int c = strcmp(a->o->key, b->o->key);
    if (c)
        return c;
    if (a->occ != b->occ)
        return a->occ < b->occ ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Sort by (group, key, id) and number each key's requests in id order. */
static void number_occurrences(side *s)
{
    if (s->reqs.n)
        qsort(s->reqs.v, s->reqs.n, sizeof *s->reqs.v, by_group_key_id);
    for (size_t i = 0; i < s->reqs.n; i++) {
        oreq *r = &s->reqs.v[i], *p = i ? &s->reqs.v[i - 1] : NULL;
        r->occ = p && p->group == r->group && strcmp(p->o->key, r->o->key) == 0 ? p->occ + 1 : 0;
    }
}

static int read_side(const char *run, side *s, char *err, size_t errlen)
{
    char path[4096];
    struct stat st;
    if (stat(run, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path, sizeof path, "%s/records.jsonl", run);
    else
        snprintf(path, sizeof path, "%s", run);
    ll_rec_handlers h = {0};
    h.on_run = on_run;
    h.on_level = on_level;
    h.on_request = on_request;
    ll_rec_read_stats rs = {0};
    int rc = ll_rec_read(path, &h, s, &rs, err, errlen);
    if (rc == LL_EINTR && s->no_outputs)
        rc = 0;
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory reading %s", path);
    if (rc == 0)
        number_occurrences(s);
    return rc;
}

/* ---- one pair ------------------------------------------------------------------ */

typedef struct acc {
    LL_VEC(double) pos;
    double sum_dlp;
} acc;

/* Whether token s is among row i's top-k of o. */
static int in_top(const ll_rec_outputs *o, size_t i, const char *s)
{
    if (!s || o->top_k <= 0 || i >= o->n_tok)
        return 0;
    for (int j = 0; j < o->top_k; j++) {
        const char *t = o->top_tok[i * (size_t)o->top_k + (size_t)j];
        if (t && strcmp(t, s) == 0)
            return 1;
    }
    return 0;
}

/* First index where the sequences differ (ids when both have them, else
 * token texts); min length when one is a prefix; n when identical. */
static size_t diverge_at(const ll_rec_outputs *a, const ll_rec_outputs *b, int use_ids)
{
    size_t n = a->n_tok < b->n_tok ? a->n_tok : b->n_tok;
    for (size_t i = 0; i < n; i++)
        if (use_ids ? a->ids[i] != b->ids[i] : strcmp(a->tok[i] ? a->tok[i] : "", b->tok[i] ? b->tok[i] : "") != 0)
            return i;
    return n;
}

static void tok_name(const ll_rec_outputs *o, size_t i, char *out, size_t n)
{
    if (i >= o->n_tok)
        snprintf(out, n, "(end)");
    else if (o->tok && o->tok[i])
        snprintf(out, n, "%s", o->tok[i]);
    else if (o->ids)
        snprintf(out, n, "#%lld", (long long)o->ids[i]);
    else
        snprintf(out, n, "?");
}

static void mean_dlp(fit_outputs_level *lv, acc *ac, const ll_rec_outputs *a, const ll_rec_outputs *b, size_t upto)
{
    if (!a->lp || !b->lp)
        return;
    for (size_t i = 0; i < upto; i++)
        if (isfinite(a->lp[i]) && isfinite(b->lp[i])) {
            ac->sum_dlp += fabs(a->lp[i] - b->lp[i]);
            lv->n_lp_tok++;
        }
}

static int compare_pair(fit_outputs *res, fit_outputs_level *lv, acc *ac, const ll_rec_outputs *a,
                        const ll_rec_outputs *b)
{
    int use_ids = a->ids && b->ids, use_tok = a->tok && b->tok;
    lv->n_pairs++;
    if (!use_ids && !use_tok) {
        if (!a->text || !b->text) {
            res->n_nothing++;
            lv->n_pairs--;
            return 0;
        }
        res->n_text_only++;
        int same = a->text_bytes == b->text_bytes && a->text_hash == b->text_hash;
        lv->n_identical += same;
        lv->n_diverged += !same;
        if (!same && !lv->example.found) {
            lv->example.found = 1;
            snprintf(lv->example.key, sizeof lv->example.key, "%s", a->key);
            lv->example.pos = (size_t)-1; /* no token position */
            snprintf(lv->example.tok_a, sizeof lv->example.tok_a, "(text only)");
            snprintf(lv->example.tok_b, sizeof lv->example.tok_b, "(text only)");
        }
        return 0;
    }
    size_t p = diverge_at(a, b, use_ids);
    if (p == a->n_tok && p == b->n_tok) {
        lv->n_identical++;
        mean_dlp(lv, ac, a, b, p);
        return 0;
    }
    lv->n_diverged++;
    lv->n_positioned++;
    mean_dlp(lv, ac, a, b, p);
    if (ll_vec_push(&ac->pos, (double)p))
        return LL_ENOMEM;
    int ok = 0;
    if (p < a->n_tok && p < b->n_tok && a->top_k > 0 && b->top_k > 0 && a->tok && b->tok) {
        int ain = in_top(b, p, a->tok[p]), bin = in_top(a, p, b->tok[p]);
        lv->n_topk_known++;
        lv->n_a_in_topb += ain;
        lv->n_b_in_topa += bin;
        ok = ain && bin;
        lv->n_topk_ok += ok;
    }
    if (!ok && !lv->example.found) {
        lv->example.found = 1;
        snprintf(lv->example.key, sizeof lv->example.key, "%s", a->key);
        lv->example.pos = p;
        tok_name(a, p, lv->example.tok_a, sizeof lv->example.tok_a);
        tok_name(b, p, lv->example.tok_b, sizeof lv->example.tok_b);
    }
    return 0;
}

/* ---- figures -------------------------------------------------------------------- */

static int cmp_dbl(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

/* Linear interpolation between order statistics (type 7). */
static double quantile(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double h = q * (double)(n - 1);
    size_t lo = (size_t)h;
    return lo + 1 < n ? v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]) : v[lo];
}

static void finish_level(fit_outputs_level *lv, acc *ac)
{
    if (ac->pos.n) /* qsort's base must not be NULL, even for 0 items */
        qsort(ac->pos.v, ac->pos.n, sizeof *ac->pos.v, cmp_dbl);
    lv->pos_p10 = quantile(ac->pos.v, ac->pos.n, 0.10);
    lv->pos_p50 = quantile(ac->pos.v, ac->pos.n, 0.50);
    lv->mean_abs_dlp = lv->n_lp_tok ? ac->sum_dlp / (double)lv->n_lp_tok : NAN;
    lv->share_ok = lv->n_pairs ? (double)(lv->n_identical + lv->n_topk_ok) / (double)lv->n_pairs : NAN;
    lv->share_identical = lv->n_pairs ? (double)lv->n_identical / (double)lv->n_pairs : NAN;
}

/* Add level l's counts into the overall figures. */
static void add_counts(fit_outputs_level *all, const fit_outputs_level *l)
{
    all->n_pairs += l->n_pairs;
    all->n_identical += l->n_identical;
    all->n_diverged += l->n_diverged;
    all->n_positioned += l->n_positioned;
    all->n_topk_known += l->n_topk_known;
    all->n_a_in_topb += l->n_a_in_topb;
    all->n_b_in_topa += l->n_b_in_topa;
    all->n_topk_ok += l->n_topk_ok;
    all->n_lp_tok += l->n_lp_tok;
    if (!all->example.found && l->example.found)
        all->example = l->example;
}

static int by_group_key_occ(const oreq *a, const oreq *b)
{
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    int c = strcmp(a->o->key, b->o->key);
    return c ? c : a->occ < b->occ ? -1 : a->occ > b->occ;
}

/* Walk both sorted sides together, comparing matched pairs. */
static int match(fit_outputs *res, side *sa, side *sb, acc *accs, acc *all)
{
    size_t i = 0, j = 0;
    int rc = 0;
    while (i < sa->reqs.n || j < sb->reqs.n) {
        const oreq *a = i < sa->reqs.n ? &sa->reqs.v[i] : NULL, *b = j < sb->reqs.n ? &sb->reqs.v[j] : NULL;
        int c = !a ? 1 : !b ? -1 : by_group_key_occ(a, b);
        if (c == 0 && a->group >= 0) {
            fit_outputs_level *lv = &res->levels[a->group];
            LL_TRY(compare_pair(res, lv, &accs[a->group], a->o, b->o));
            i++, j++;
            continue;
        }
        if (c <= 0)
            res->n_unmatched[0]++, i++;
        if (c >= 0)
            res->n_unmatched[1]++, j++;
    }
    for (size_t g = 0; g < res->n_levels; g++) {
        finish_level(&res->levels[g], &accs[g]);
        add_counts(&res->all, &res->levels[g]);
        for (size_t k = 0; k < accs[g].pos.n; k++)
            LL_TRY(ll_vec_push(&all->pos, accs[g].pos.v[k]));
        all->sum_dlp += accs[g].sum_dlp;
    }
    finish_level(&res->all, all);
fail:
    return rc;
}

static void free_side(side *s)
{
    for (size_t i = 0; i < s->reqs.n; i++)
        ll_rec_outputs_free(s->reqs.v[i].o);
    ll_vec_free(&s->reqs);
    ll_vec_free(&s->level_group);
}

int fit_outputs_compare(const char *run_a, const char *run_b, fit_outputs **out, char *err, size_t errlen)
{
    group_vec groups = {0};
    fit_outputs *res = calloc(1, sizeof *res);
    side sa = {.is_b = 0, .groups = &groups, .res = res}, sb = {.is_b = 1, .groups = &groups, .res = res};
    acc *accs = NULL, all = {0};
    int rc = 0;
    *out = NULL;
    LL_TRY(res ? 0 : LL_ENOMEM);
    LL_TRY(read_side(run_a, &sa, err, errlen));
    LL_TRY(read_side(run_b, &sb, err, errlen));
    res->n_levels = groups.n;
    LL_TRY((res->levels = calloc(groups.n ? groups.n : 1, sizeof *res->levels)) ? 0 : LL_ENOMEM);
    LL_TRY((accs = calloc(groups.n ? groups.n : 1, sizeof *accs)) ? 0 : LL_ENOMEM);
    for (size_t g = 0; g < groups.n; g++) {
        res->levels[g].open_loop = groups.v[g].open_loop;
        res->levels[g].concurrency = groups.v[g].concurrency;
        res->levels[g].rate_per_s = groups.v[g].rate_per_s;
    }
    LL_TRY(match(res, &sa, &sb, accs, &all));
    *out = res;
    res = NULL;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory comparing outputs");
    for (size_t g = 0; accs && g < groups.n; g++)
        ll_vec_free(&accs[g].pos);
    free(accs);
    ll_vec_free(&all.pos);
    ll_vec_free(&groups);
    free_side(&sa);
    free_side(&sb);
    fit_outputs_free(res);
    return rc;
}

/* Within one run: level CA's requests play A, level CB's play B, matched by
 * prompt key as between two runs (one group, reported as CB). */
static int split_levels(side *all, int ga, int gb, side *sa, side *sb)
{
    for (size_t i = 0; i < all->reqs.n; i++) {
        oreq r = all->reqs.v[i];
        side *to = r.group == ga ? sa : r.group == gb ? sb : NULL;
        if (!to)
            continue;
        r.group = 0;
        if (!(r.o = ll_rec_outputs_dup(r.o)) || ll_vec_push(&to->reqs, r)) {
            ll_rec_outputs_free(r.o);
            return LL_ENOMEM;
        }
        fit_outputs *res = sa->res;
        int k = to->is_b;
        res->n_req[k]++;
        res->n_with_outputs[k]++;
        res->n_with_lp[k] += r.o->lp != NULL;
        res->n_with_top[k] += r.o->top_k > 0;
        res->n_with_ids[k] += r.o->ids != NULL;
    }
    number_occurrences(sa);
    number_occurrences(sb);
    return 0;
}

int fit_outputs_compare_levels(const char *run, int c_a, int c_b, fit_outputs **out, char *err, size_t errlen)
{
    group_vec groups = {0};
    fit_outputs *res = calloc(1, sizeof *res);
    side s = {.is_b = 0, .groups = &groups, .res = res}, sa = {.is_b = 0, .res = res}, sb = {.is_b = 1, .res = res};
    acc ac = {0}, all = {0};
    int rc = 0, ga = -1, gb = -1;
    *out = NULL;
    LL_TRY(res ? 0 : LL_ENOMEM);
    LL_TRY(read_side(run, &s, err, errlen));
    for (size_t g = 0; g < groups.n; g++)
        if (!groups.v[g].open_loop) {
            ga = groups.v[g].concurrency == c_a ? (int)g : ga;
            gb = groups.v[g].concurrency == c_b ? (int)g : gb;
        }
    if (s.no_outputs || ga < 0 || gb < 0) {
        ll_errf(err, errlen, "%s: %s", run, s.no_outputs ? "recorded no outputs (sweep --record-outputs)"
                                            : "has no closed-loop level with that C and recorded outputs");
        rc = LL_EINVAL;
        goto fail;
    }
    memset(res->n_req, 0, sizeof res->n_req);
    memset(res->n_with_outputs, 0, sizeof res->n_with_outputs);
    memset(res->n_with_lp, 0, sizeof res->n_with_lp);
    memset(res->n_with_top, 0, sizeof res->n_with_top);
    memset(res->n_with_ids, 0, sizeof res->n_with_ids);
    LL_TRY(split_levels(&s, ga, gb, &sa, &sb));
    res->n_levels = 1;
    LL_TRY((res->levels = calloc(1, sizeof *res->levels)) ? 0 : LL_ENOMEM);
    res->levels[0].concurrency = c_b;
    LL_TRY(match(res, &sa, &sb, &ac, &all));
    *out = res;
    res = NULL;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory comparing outputs");
    ll_vec_free(&ac.pos);
    ll_vec_free(&all.pos);
    ll_vec_free(&groups);
    free_side(&s);
    free_side(&sa);
    free_side(&sb);
    fit_outputs_free(res);
    return rc;
}

void fit_outputs_free(fit_outputs *o)
{
    if (!o)
        return;
    free(o->levels);
    free(o);
}

int fit_outputs_recorded(const fit_outputs *o) { return o->n_with_outputs[0] || o->n_with_outputs[1]; }

const fit_outputs_level *fit_outputs_worst(const fit_outputs *o)
{
    const fit_outputs_level *w = NULL;
    for (size_t i = 0; i < o->n_levels; i++) {
        const fit_outputs_level *l = &o->levels[i];
        if (l->n_pairs && (!w || l->share_ok < w->share_ok))
            w = l;
    }
    return w;
}
