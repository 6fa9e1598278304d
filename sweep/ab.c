/* ab.c: `loadlaw sweep` with two targets: a scenario with "ab" (two
 * bundled-engine specs, e.g. attn=naive vs attn=tiled) or two --url (two
 * remote servers, each with its model and key). Each side is a normal run
 * directory OUT/<name>; then the two are compared exactly as `loadlaw compare
 * OUT/<a> OUT/<b> --html OUT/compare.html [--expect-speedup G]` does: this
 * file calls sweep_compare (sweep.h), the function behind that command.
 *
 * DESIGN (order): interleaved (the default) runs each level on A, then on B,
 * and with R repeats in ABBA order (scn_ab_side_at): a load that comes and
 * goes on a shared machine, or a drift (thermal state, other tenants), then
 * hits both sides of a level alike instead of one side's whole sweep, and a
 * linear drift cancels within every two pairs. Each side's levels are the
 * scenario's, each repeated R times in a row, tagged with their repeat, pair
 * and place in the order (scn_level.repeat/pair/seq -> the level records),
 * which is what compare pairs. Sequential runs all of A, then all of B.
 *
 * DESIGN (threads, interleaved): both targets are started and both records
 * opened on this thread, one after the other. Then each side's sweep runs on
 * its own thread, and the two take turns through loadgen's per-level hooks
 * (lg_dist, with one rank): before_level blocks until the schedule names
 * this side and level (and until both sides are ready, so B's setup never
 * overlaps A's first level); after_level, once the level has drained, hands
 * the turn on. So only one side is loaded at a time; the idle engine waits
 * on its condition variable. A side that stops (interrupted, failed) stops
 * the other at its next turn. The fits, tables and reports run only after
 * both threads are joined, so they never load the machine while a side
 * measures.
 *
 * Each side's engine writes its profiler traces into its run directory: both
 * engines live in one process, and the default name (pid and a per-engine
 * sequence number) would make side B overwrite side A's trace in /tmp. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "internal.h"
#include "report.h"

/* The last profile record of a run that names a written trace. */
typedef struct trace_find {
    char path[4096];
} trace_find;

/* The records module's reader hands over each profile record. */
static int on_profile(const ll_rec_profile *pr, void *ctx)
{
    trace_find *tf = ctx;
    if (!pr->ok || !pr->detail)
        return 0;
    /* detail is the server's answer: {"status":"written","path":...} */
    cJSON *d = cJSON_ParseWithOpts(pr->detail, NULL, 0);
    const char *p = d ? ll_json_str(d, "path", NULL) : NULL;
    if (p)
        snprintf(tf->path, sizeof tf->path, "%s", p);
    cJSON_Delete(d);
    return 0;
}

/* Attention's share of the trace's kernel time, as the "by category" table
 * of rpt_trace_print counts it (built-in categories); NAN when no kernels. */
static double attention_share(const rpt_trace *t, const rpt_categories *cats)
{
    double all = 0, attn = 0;
    for (size_t i = 0; i < rpt_trace_n_kernels(t); i++) {
        const rpt_trace_kernel *k = rpt_trace_kernel_at(t, i);
        all += (double)k->total_ns;
        if (!strcmp(rpt_categories_classify(cats, k->name), "attention"))
            attn += (double)k->total_ns;
    }
    return all > 0 ? attn / all : NAN;
}

/* Print the kernel breakdown of a side's trace, if its run captured one, and
 * return attention's share (NAN without a trace). Missing or unreadable
 * traces are noted, not errors: the comparison stands without them. */
static double print_trace(const char *name, const char *run_dir, const rpt_categories *cats)
{
    char path[4300], err[512] = "";
    trace_find tf = {""};
    ll_rec_handlers h = {.on_profile = on_profile};
    rpt_trace *t = NULL;
    double share = NAN;
    if (snprintf(path, sizeof path, "%s/records.jsonl", run_dir) >= (int)sizeof path ||
        ll_rec_read(path, &h, &tf, NULL, err, sizeof err) || !tf.path[0])
        return NAN;
    rpt_trace_print_opts po = {.top = 5, .cats = cats};
    const char *label = name;
    printf("\n== %s: loadlaw trace %s\n", name, tf.path);
    if (rpt_trace_load(tf.path, &t, err, sizeof err) || rpt_trace_print(stdout, &t, &label, 1, &po, err, sizeof err))
        fprintf(stderr, "loadlaw sweep: %s: trace breakdown: %s\n", name, err);
    else
        share = attention_share(t, cats);
    rpt_trace_free(t);
    return share;
}

static void print_traces(const scn_ab *ab, char dirs[2][4096])
{
    char err[512];
    double share[2];
    rpt_categories *cats = NULL;
    if (rpt_categories_new(&cats, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: trace categories: %s\n", err);
        return;
    }
    for (int k = 0; k < 2; k++)
        share[k] = print_trace(ab->side[k].name, dirs[k], cats);
    if (!isnan(share[0]) && !isnan(share[1]) && (share[0] > 0 || share[1] > 0))
        printf("\nattention share of kernel time: %s %.1f%% -> %s %.1f%%\n", ab->side[0].name, 100 * share[0],
               ab->side[1].name, 100 * share[1]);
    rpt_categories_free(cats);
}

/* ---- the order ---------------------------------------------------------------- */

/* Each side's levels: the scenario's, each R times in a row, tagged. The
 * turns (interleaved): side and side-level index in the order they run. */
typedef struct ab_turn {
    int side, level;
} ab_turn;

typedef struct ab_plan {
    scn_level *levels[2];
    size_t n_levels;          /* per side: n * R */
    ab_turn *turns;           /* 2 * n * R (interleaved only) */
    size_t n_turns;
} ab_plan;

static void plan_free(ab_plan *p)
{
    free(p->levels[0]);
    free(p->levels[1]);
    free(p->turns);
}

static int plan_make(const scn_scenario *scn, ab_plan *p)
{
    int R = scn->ab.repeat > 0 ? scn->ab.repeat : 1, inter = scn->ab.order == SCN_AB_INTERLEAVED;
    size_t n = scn->n_levels;
    memset(p, 0, sizeof *p);
    p->n_levels = n * (size_t)R;
    p->levels[0] = calloc(p->n_levels ? p->n_levels : 1, sizeof *p->levels[0]);
    p->levels[1] = calloc(p->n_levels ? p->n_levels : 1, sizeof *p->levels[1]);
    p->turns = calloc(2 * p->n_levels + 1, sizeof *p->turns);
    if (!p->levels[0] || !p->levels[1] || !p->turns) {
        plan_free(p);
        return LL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        int next[2] = {0, 0}; /* each side's next repeat of level i */
        for (int k = 0; k < 2 * R; k++) {
            int side = scn_ab_side_at(k), r = next[side]++;
            size_t j = i * (size_t)R + (size_t)r;
            scn_level *L = &p->levels[side][j];
            *L = scn->levels[i];
            L->ab_tagged = 1;
            L->repeat = r;
            /* Pair k/2 of level i holds repeat k/2 of each side. */
            L->pair = inter ? (int)(i * (size_t)R) + k / 2 : -1;
            L->seq = inter ? (int)(i * 2 * (size_t)R) + k : -1;
            if (inter)
                p->turns[p->n_turns++] = (ab_turn){side, (int)j};
        }
    }
    return 0;
}

/* ---- taking turns (interleaved) ------------------------------------------------ */

typedef struct ab_baton {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const ab_turn *turns;
    size_t n_turns, pos;      /* the turn running or next */
    int ready;                /* sides that reached their first level */
    int stop_rc;              /* 0, or why both stop: LL_EINTR (interrupted), LL_EIO (a side failed) */
} ab_baton;

typedef struct ab_hand {
    ab_baton *b;
    int side, seen;
    lg_dist dist;
} ab_hand;

static int on_before(void *ctx, int level, int stop, int64_t *epoch_ns, char *err, size_t errlen)
{
    ab_hand *h = ctx;
    ab_baton *b = h->b;
    (void)epoch_ns; /* each side keeps its own run clock */
    pthread_mutex_lock(&b->mu);
    if (!h->seen) {
        h->seen = 1;
        b->ready++;
        pthread_cond_broadcast(&b->cv);
    }
    if (stop && !b->stop_rc) {
        /* a side over --max-failed fails the comparison; no signal came */
        b->stop_rc = stop == LG_STOP_FAILED ? LL_EIO : LL_EINTR;
        pthread_cond_broadcast(&b->cv);
    }
    while (!b->stop_rc && (b->ready < 2 || b->pos >= b->n_turns || b->turns[b->pos].side != h->side ||
                           b->turns[b->pos].level != level))
        pthread_cond_wait(&b->cv, &b->mu);
    int rc = b->stop_rc;
    pthread_mutex_unlock(&b->mu);
    if (rc && rc != LL_EINTR)
        ll_errf(err, errlen, "side %c stops: side %c did not finish", 'a' + h->side, 'a' + !h->side);
    return rc;
}

static int on_after(void *ctx, int level, ll_rec_level_end *le, char *err, size_t errlen)
{
    ab_hand *h = ctx;
    (void)level;
    (void)le;
    (void)err;
    (void)errlen;
    pthread_mutex_lock(&h->b->mu);
    h->b->pos++;
    pthread_cond_broadcast(&h->b->cv);
    pthread_mutex_unlock(&h->b->mu);
    return 0;
}

/* A side's thread ended: one that did not run all its turns stops the other. */
static void side_done(ab_baton *b, int ret)
{
    pthread_mutex_lock(&b->mu);
    if (ret != SWEEP_OK && !b->stop_rc)
        b->stop_rc = ret == SWEEP_INTERRUPTED ? LL_EINTR : LL_EIO;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

typedef struct ab_thread {
    const sweep_job *job;
    sweep_side *side;
    ab_baton *baton;
    int ret;
} ab_thread;

static void *side_main(void *arg)
{
    ab_thread *t = arg;
    t->ret = sweep_side_run(t->job, t->side);
    side_done(t->baton, t->ret);
    return NULL;
}

/* "ab side a (DIR): TARGET" on stderr; secrets in the URL or engine spec hidden */
static void side_banner(const sweep_job *j, int k)
{
    char *spec = j->scn->url ? ll_redact_url(j->scn->url) : ll_redact_spec(j->engine_spec);
    fprintf(stderr, "loadlaw sweep: ab side %c (%s): %s\n", 'a' + k, j->run_dir,
            spec ? spec : j->scn->url ? "(url)" : "engine defaults");
    free(spec);
}

/* The worse of two exit codes: interrupted, then failure, then usage, then ok. */
static int worse(int a, int b)
{
    static const int rank[] = {SWEEP_INTERRUPTED, SWEEP_FAIL, SWEEP_USAGE, SWEEP_GATE, SWEEP_OK};
    for (size_t i = 0; i < sizeof rank / sizeof rank[0]; i++)
        if (a == rank[i] || b == rank[i])
            return rank[i];
    return a;
}

static int run_interleaved(const sweep_job jobs[2], const ab_plan *p)
{
    ab_baton b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .turns = p->turns,
                  .n_turns = p->n_turns};
    ab_hand hands[2];
    sweep_job j[2] = {jobs[0], jobs[1]};
    sweep_side sd[2];
    ab_thread th[2];
    pthread_t tid[2];
    int started[2] = {0, 0}, ret = SWEEP_OK;
    for (int k = 0; k < 2; k++) {
        hands[k] = (ab_hand){.b = &b, .side = k};
        hands[k].dist = (lg_dist){.rank = 0, .ranks = 1, .before_level = on_before, .after_level = on_after,
                                  .ctx = &hands[k]};
        j[k].turns = &hands[k].dist;
    }
    /* Neither side's folder may hold a run (checked before either starts:
     * an abandoned side would leave its run line behind). */
    for (int k = 0; k < 2; k++)
        if ((ret = sweep_check_fresh_dir(j[k].run_dir)) != SWEEP_OK)
            return ret;
    /* Both targets up and both records open before any level runs. */
    int orc[2] = {SWEEP_FAIL, SWEEP_FAIL};
    for (int k = 0; k < 2; k++) {
        side_banner(&j[k], k);
        if ((orc[k] = sweep_side_open(&j[k], &sd[k])) != SWEEP_OK)
            break;
    }
    if (orc[0] != SWEEP_OK || orc[1] != SWEEP_OK) {
        for (int k = 0; k < 2; k++)
            if (k == 0 || orc[0] == SWEEP_OK) /* B was tried only when A opened */
                sweep_side_abandon(&sd[k]);
        return orc[0] != SWEEP_OK ? orc[0] : orc[1];
    }
    for (int k = 0; k < 2; k++) {
        th[k] = (ab_thread){.job = &j[k], .side = &sd[k], .baton = &b, .ret = SWEEP_FAIL};
        if (pthread_create(&tid[k], NULL, side_main, &th[k]) == 0) {
            started[k] = 1;
        } else {
            fprintf(stderr, "loadlaw sweep: cannot start side %c's thread\n", 'a' + k);
            side_done(&b, SWEEP_FAIL);
        }
    }
    for (int k = 0; k < 2; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    /* Both runs' records are complete: now fit them, one at a time. */
    for (int k = 0; k < 2; k++) {
        if (!started[k]) {
            sweep_side_abandon(&sd[k]);
            ret = worse(ret, SWEEP_FAIL);
            continue;
        }
        printf("\n== %s\n", j[k].run_dir);
        ret = worse(ret, sweep_side_finish(&j[k], &sd[k], th[k].ret));
    }
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return ret;
}

static int run_sequential(const sweep_job jobs[2])
{
    for (int k = 0; k < 2; k++) {
        side_banner(&jobs[k], k);
        int ret = sweep_one(&jobs[k]);
        if (ret != SWEEP_OK)
            return ret; /* an interrupted or failed side has nothing to compare */
    }
    return SWEEP_OK;
}

/* Each side's engine spec (the shared "engine", then the side's keys, so
 * they win) and run directory (out_dir/<side name>); SWEEP_USAGE when one is
 * too long. */
static int side_paths(const sweep_job *base, const char *out_dir, char spec[2][2048], char dirs[2][4096])
{
    const scn_ab *ab = &base->scn->ab;
    const char *base_spec = base->engine_spec;
    for (int k = 0; k < 2; k++) {
        const scn_ab_side *s = &ab->side[k];
        int ns = snprintf(spec[k], sizeof spec[k], "%s%s%s", base_spec ? base_spec : "",
                          base_spec && s->engine ? "," : "", s->engine ? s->engine : "");
        int nd = snprintf(dirs[k], sizeof dirs[k], "%s/%s", out_dir, s->name);
        if (ns >= (int)sizeof spec[k] || nd >= (int)sizeof dirs[k]) {
            fprintf(stderr, "loadlaw sweep: ab.%c: engine spec or run directory too long\n", 'a' + k);
            return SWEEP_USAGE;
        }
    }
    return SWEEP_OK;
}

/* The --api-key a bundled side's spec key must agree with: b's second
 * --api-key; else the one --api-key, unless the other side is a remote
 * server (the key is that server's). NULL when none was given. */
static const char *side_given_key(const sweep_job *base, int k)
{
    if (k && base->api_key_b)
        return base->api_key_b;
    if (base->api_key_given && ((!k && base->api_key_b) || !base->scn->ab.side[!k].url))
        return base->api_key;
    return NULL;
}

/* Side k's scenario (a shallow copy of the base one that owns nothing: the
 * side's levels and target) and job. A bundled side whose spec sets api_key
 * sends that key (kept in *key_hold; caller wipes). SWEEP_OK, SWEEP_USAGE
 * or SWEEP_FAIL. */
static int make_side(const sweep_job *base, const ab_plan *plan, int k, char *spec, char *dir,
                     scn_scenario *scn, sweep_job *job, char **key_hold)
{
    const scn_ab_side *s = &base->scn->ab.side[k];
    char err[512];
    *scn = *base->scn;
    scn->levels = plan->levels[k];
    scn->n_levels = plan->n_levels;
    scn->url = s->url;
    scn->model = s->model ? s->model : base->scn->model;
    *job = *base;
    job->scn = scn;
    job->engine_spec = s->url ? NULL : spec;
    job->run_dir = dir;
    job->profile_dir = dir;
    job->slot = k;
    job->api_key = k && base->api_key_b ? base->api_key_b : base->api_key;
    int krc = s->url ? 0
                     : sweep_engine_key(spec, side_given_key(base, k), scn_has_header(base->scn, "Authorization"),
                                        key_hold, err, sizeof err);
    if (krc) {
        fprintf(stderr, "loadlaw sweep: ab.%c: %s\n", 'a' + k, krc == LL_EINVAL ? err : ll_strerror(krc));
        return krc == LL_EINVAL ? SWEEP_USAGE : SWEEP_FAIL;
    }
    if (*key_hold)
        job->api_key = *key_hold;
    return SWEEP_OK;
}

/* Both sides ran: their traces, then the comparison (and its gate) into
 * out_dir/compare.html. */
static int compare_sides(const scn_ab *ab, char dirs[2][4096], const char *out_dir)
{
    char html[4200];
    print_traces(ab, dirs);
    snprintf(html, sizeof html, "%s/compare.html", out_dir);
    sweep_compare_opts co;
    sweep_compare_opts_default(&co);
    co.html = html;
    co.have_expect = ab->expect_x > 0;
    co.expect_x = ab->expect_x;
    co.expect_c = ab->expect_c;
    co.have_expect_outputs = ab->expect_outputs > 0;
    co.expect_outputs = ab->expect_outputs;
    printf("\n== compare %s (A) vs %s (B)%s\n", ab->side[0].name, ab->side[1].name,
           ab->order == SCN_AB_INTERLEAVED ? ", paired (interleaved)" : "");
    fflush(stdout);
    return sweep_compare(dirs[0], dirs[1], &co);
}

int sweep_ab(const sweep_job *base, const char *out_dir)
{
    const scn_ab *ab = &base->scn->ab;
    char dirs[2][4096], spec[2][2048], err[512], *key_hold[2] = {NULL, NULL};
    scn_scenario scn[2];
    sweep_job jobs[2];
    ab_plan plan;
    int ret;
    if (ll_mkdir_p(out_dir, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return SWEEP_FAIL;
    }
    ret = side_paths(base, out_dir, spec, dirs);
    if (ret != SWEEP_OK)
        return ret;
    if (plan_make(base->scn, &plan)) {
        fprintf(stderr, "loadlaw sweep: out of memory\n");
        return SWEEP_FAIL;
    }
    for (int k = 0; k < 2 && ret == SWEEP_OK; k++)
        ret = make_side(base, &plan, k, spec[k], dirs[k], &scn[k], &jobs[k], &key_hold[k]);
    if (ret == SWEEP_OK)
        ret = ab->order == SCN_AB_INTERLEAVED ? run_interleaved(jobs, &plan) : run_sequential(jobs);
    plan_free(&plan);
    ll_wipe_free(key_hold[0]);
    ll_wipe_free(key_hold[1]);
    if (ret != SWEEP_OK)
        return ret;
    return compare_sides(ab, dirs, out_dir);
}
