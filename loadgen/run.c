/* run.c: a sweep: the run record, levels back to back, the driver's wait
 * (progress line, profile hook), the prefix cache before each level
 * (cache_reset.c), interruption.
 *
 * DESIGN: the driver thread queues the level record, starts the level's
 * workers and sleeps on r->cv. Workers signal it (lg_run_notify) when the
 * last of them leaves and, while the profile hook is armed (r->watch), each
 * time a request starts decoding or finishes: the hook fires the moment every
 * in-flight request of the level is decoding (its requests: profile_hook.c).
 * With a progress line the wait is also bounded by the next 250 ms tick.
 * After the workers are joined, the driver queues level_end with the counts
 * the workers kept; when more of them failed than cfg.max_failed allows
 * (stop_on_failed), no later level starts.
 *
 * With lg_dist (K ranks), run_level takes this rank's share of the level
 * (share()), and the hooks frame it: before_level agrees on the start and
 * this level's clock, after_level moves the other ranks' records and counts
 * to rank 0 before rank 0's level_end. */
/* sched_getaffinity and CPU_COUNT are GNU extensions */
#define _GNU_SOURCE
#include "lg_internal.h"

#include "api.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int put_run_line(lg_run *r, const lg_config *cfg)
{
    cJSON *config = scn_to_json(r->scn);
    char *spec = ll_redact_spec(cfg->engine_spec); /* records are shared: api_key=(hidden) */
    char *url = ll_redact_url(r->url_base);
    ll_rec_run run = {
        .ranks = r->ranks,
        .threads = r->nthreads,
        .url = url,
        .model = r->model,
        .endpoint = scn_endpoint_name(r->scn->endpoint),
        .bundled = cfg->engine_spec != NULL,
        .engine = spec,
        .backend = cfg->engine_backend,
        .scenario = cfg->scenario_name,
        .config = config,
    };
    if (!config || (cfg->engine_spec && !spec) || !url) {
        cJSON_Delete(config);
        free(spec);
        free(url);
        return LL_ENOMEM;
    }
    if (cfg->engine_law && cfg->engine_law->present)
        run.law = *cfg->engine_law;
    int rc = ll_rec_put_run(r->rec, &run);
    cJSON_Delete(config);
    free(spec);
    free(url);
    return rc;
}

static int init_wakeup(lg_run *r)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a))
        return LL_ESYS;
    int bad = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) || pthread_cond_init(&r->cv, &a);
    pthread_condattr_destroy(&a);
    return bad || pthread_mutex_init(&r->mu, NULL) ? LL_ESYS : 0;
}

/* The base URL as the run line shows it (no '/' ending its path, no
 * fragment), and the request URL: the scenario's path (lg_request_path:
 * endpoint_path, else the endpoint's own, "/v1/chat/completions") put after
 * the base's path and before its query (ll_url_join), so that an Azure-style
 * "?api-version=" stays on every request. A base that already names the API
 * root ("…/v1") is not doubled. */
static int set_urls(lg_run *r, const lg_config *cfg)
{
    const char *path = lg_request_path(cfg->scn);
    size_t n = strlen(cfg->url) + strlen(path) + 2;
    if (!(r->url_base = malloc(n)) || !(r->url_full = malloc(n)))
        return LL_ENOMEM;
    if (ll_url_join(cfg->url, NULL, "", r->url_base, n) ||
        ll_url_join(cfg->url, strncmp(path, "/v1/", 4) == 0 ? "/v1" : NULL, path, r->url_full, n))
        return LL_ERANGE; /* cannot happen: n is the bound ll_url_join states */
    return 0;
}

/* One worker per CPU this process may run on: under `taskset -c 0` (or a
 * container's cpuset) that is 1, not the machine's count; more threads than
 * CPUs would only take turns and make the client look slower than it is. */
static int default_threads(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* X-Request-Id's run part: this process's start, its pid and the first
 * address it allocated, hashed (xfer.c) */
static void set_run_tag(lg_run *r)
{
    uint64_t tag = (uint64_t)ll_wall_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)r;
    tag ^= tag >> 33;
    tag *= 0xff51afd7ed558ccdULL;
    tag ^= tag >> 33;
    snprintf(r->run_tag, sizeof r->run_tag, "%016" PRIx64, tag);
}

/* Kernel stamps need netstamp in the program (netstamp.h); without it the
 * reads are timed as with load.arrival_stamp "user", and that is said. */
static void set_stamping(lg_run *r)
{
    r->kstamp = r->scn->arrival_stamp == SCN_STAMP_KERNEL && ns_rx_available();
    if (r->scn->arrival_stamp == SCN_STAMP_KERNEL && !r->kstamp)
        ll_warn("kernel receive stamps are not linked into this program (netstamp): chunk arrivals "
                "are timed by the clock in the write callback, as with --arrival-stamp user");
    /* The kernel turns receive stamping on a moment after the first socket
     * asks: ask now (once per process), so the first packets are stamped too. */
    if (r->kstamp)
        (void)ns_rx_keep_on();
}

/* The settings the run keeps from cfg (borrowed, not copied). */
static void take_config(lg_run *r, const lg_config *cfg)
{
    r->prompts = cfg->prompts;
    r->progress = cfg->progress;
    r->rec = cfg->records;
    r->epoch_ns = ll_rec_epoch_ns(cfg->records);
    r->dist = cfg->dist;
    r->stop_on_failed = cfg->stop_on_failed;
    r->max_failed = cfg->max_failed;
    r->stopped_after = -1;
    r->rank = cfg->dist ? cfg->dist->rank : 0;
    r->ranks = cfg->dist ? cfg->dist->ranks : 1;
}

/* The worker threads' state (not started): cfg's count, else the
 * scenario's, else one per CPU. */
static int init_workers(lg_run *r, const lg_config *cfg, char *err, size_t errlen)
{
    int rc = 0;
    r->nthreads = cfg->threads > 0 ? cfg->threads : cfg->scn->threads;
    if (r->nthreads <= 0)
        r->nthreads = default_threads();
    LL_TRY((r->workers = calloc((size_t)r->nthreads, sizeof *r->workers)) ? 0 : LL_ENOMEM);
    for (int i = 0; i < r->nthreads; i++)
        LL_TRY(lg_worker_init(&r->workers[i], r, i, err, errlen));
fail:
    return rc;
}

static int copy_levels(lg_run *r)
{
    r->cap_levels = r->n_levels = r->scn->n_levels;
    if (!r->n_levels)
        return 0;
    if (!(r->levels = malloc(r->n_levels * sizeof *r->levels)))
        return LL_ENOMEM;
    memcpy(r->levels, r->scn->levels, r->n_levels * sizeof *r->levels);
    return 0;
}

/* After level i: the next_level hook's level appended, when it gives one
 * and none is planned after i. 0 (nothing more, or appended) or its code. */
static int plan_next(lg_run *r, size_t i, char *err, size_t errlen)
{
    scn_level next;
    if (!r->next_level || i + 1 < r->n_levels || atomic_load(&r->stop_issue) || r->stopped_after >= 0)
        return 0;
    memset(&next, 0, sizeof next);
    int rc = r->next_level(r->next_ctx, (int)i, &next, err, errlen);
    if (rc <= 0)
        return rc;
    if (r->n_levels == r->cap_levels) {
        size_t cap = r->cap_levels ? 2 * r->cap_levels : 8;
        scn_level *p = realloc(r->levels, cap * sizeof *p);
        if (!p) {
            ll_errf(err, errlen, "out of memory");
            return LL_ENOMEM;
        }
        r->levels = p;
        r->cap_levels = cap;
    }
    r->levels[r->n_levels++] = next;
    return 0;
}

int lg_run_create(const lg_config *cfg, lg_run **out, char *err, size_t errlen)
{
    int rc;
    lg_run *r = calloc(1, sizeof *r);
    if (!r)
        return LL_ENOMEM;
    if (!cfg->scn || !cfg->prompts || !cfg->url || !cfg->model || !cfg->records) {
        ll_errf(err, errlen, "lg_run_create: scenario, prompts, url, model and records are required");
        free(r);
        return LL_EINVAL;
    }
    set_run_tag(r);
    if (init_wakeup(r)) {
        ll_errf(err, errlen, "lg_run_create: pthread_cond_init failed");
        free(r);
        return LL_ESYS;
    }
    r->scn = cfg->scn;
    r->next_level = cfg->dist ? NULL : cfg->next_level;
    r->next_ctx = cfg->next_ctx;
    r->api = lg_api_of(cfg->scn->endpoint);
    set_stamping(r);
    take_config(r, cfg);
    if (r->ranks < 1 || r->rank < 0 || r->rank >= r->ranks) {
        ll_errf(err, errlen, "lg_run_create: rank %d of %d", r->rank, r->ranks);
        rc = LL_EINVAL;
        goto fail;
    }
    LL_TRY(set_urls(r, cfg));
    LL_TRY((r->model = strdup(cfg->model)) ? 0 : LL_ENOMEM);
    LL_TRY(!cfg->api_key || (r->api_key = dup_or_null(cfg->api_key)) ? 0 : LL_ENOMEM);
    LL_TRY(!cfg->profile_dir || (r->profile_dir = dup_or_null(cfg->profile_dir)) ? 0 : LL_ENOMEM);
    LL_TRY(copy_levels(r));
    LL_TRY(init_workers(r, cfg, err, errlen));
    if ((rc = put_run_line(r, cfg))) {
        ll_errf(err, errlen, "queueing the run record: %s", ll_strerror(rc));
        goto fail;
    }
    *out = r;
    return 0;
fail:
    if (rc == LL_ENOMEM && err && !err[0])
        ll_errf(err, errlen, "out of memory");
    lg_run_free(r);
    return rc;
}

int lg_run_free(lg_run *r)
{
    if (!r)
        return 0;
    if (r->workers)
        for (int i = 0; i < r->nthreads; i++)
            lg_worker_free(&r->workers[i]);
    free(r->workers);
    free(r->levels);
    if (r->api_key)
        memset(r->api_key, 0, strlen(r->api_key));
    free(r->api_key);
    free(r->profile_dir);
    free(r->url_full);
    free(r->url_base);
    free(r->model);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return 0;
}

void lg_run_notify(lg_run *r)
{
    pthread_mutex_lock(&r->mu);
    r->events++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void lg_run_interrupt(lg_run *r, double drain_s)
{
    int64_t at = ll_now_ns() + (int64_t)(drain_s * 1e9);
    long long zero = 0;
    atomic_store(&r->interrupted, 1);
    atomic_store(&r->stop_issue, 1);
    atomic_compare_exchange_strong(&r->abort_at_ns, &zero, at > 0 ? at : 1);
    for (int i = 0; i < r->nthreads; i++)
        lg_worker_wake(&r->workers[i]); /* it waits at most 100 ms anyway */
}

int lg_run_interrupted(const lg_run *r) { return atomic_load(&r->interrupted); }

int lg_run_stopped_after(const lg_run *r) { return r->stopped_after; }

void lg_run_counts(const lg_run *r, size_t *ok, size_t *failed)
{
    if (ok)
        *ok = atomic_load(&r->total_ok);
    if (failed)
        *failed = atomic_load(&r->total_failed);
}

/* This process's part of the level so far (lg_progress). */
static lg_progress my_progress(lg_run *r, const lg_level_ctx *L)
{
    return (lg_progress){.level = L->index, .done = atomic_load(&r->done), .total = L->total,
                         .errors = atomic_load(&r->errors), .inflight = atomic_load(&r->inflight),
                         .tokens = atomic_load(&r->tokens)};
}

/* p: the whole level (every rank's part, as rank 0 last heard them). */
static void progress_line(lg_run *r, const lg_level_ctx *L, int64_t now, const lg_progress *p)
{
    double el = (double)(now - L->start_ns) / 1e9;
    /* the whole level's count, before every rank has been heard from */
    int total = r->ranks > 1 ? scn_level_requests(L->lv) + L->lv->warmup : p->total;
    fprintf(stderr, "\r\033[Klevel %d C=%d  done %d/%d  %.0f tok/s  errors %d  in flight %d", L->index,
            L->lv->concurrency, p->done, total, el > 0 ? (double)p->tokens / el : 0.0, p->errors, p->inflight);
    if (r->ranks > 1)
        fprintf(stderr, "  (%d ranks)", r->ranks);
    int backoff_ms = atomic_load(&r->backoff_ms);
    if (backoff_ms > 0)
        fprintf(stderr, "  connection refused: backing off %d ms", backoff_ms);
}

static int put_level_line(lg_run *r, const lg_level_ctx *L)
{
    const scn_level *lv = L->lv;
    int whole = r->rank == 0;
    ll_rec_level rec = {
        .level = L->index,
        .concurrency = whole ? lv->concurrency : L->concurrency,
        .open_loop = lv->rate_per_s > 0,
        .rate_per_s = whole ? lv->rate_per_s : L->rate_per_s,
        .poisson = lv->arrival == SCN_ARRIVAL_POISSON,
        .n_requests = whole ? scn_level_requests(lv) : L->total - L->warmup,
        .warmup = whole ? lv->warmup : L->warmup,
        .start_ns = L->start_ns - r->epoch_ns,
        .ab_tagged = lv->ab_tagged, .repeat = lv->repeat, .pair = lv->pair, .seq = lv->seq,
        .find_role = lv->find_role,
        .cache = r->cache, /* lg_cache_before_level's, just before */
    };
    return ll_rec_put_level(r->rec, &rec);
}

/* The workers' read lag (kernel stamp -> write callback) over the level. */
static void read_lag_summary(const lg_run *r, ll_rec_client *c)
{
    c->read_lag_p50_ms = c->read_lag_p99_ms = c->read_lag_max_ms = NAN;
    ll_pct *all = ll_pct_new(0);
    for (int i = 0; all && i < r->nthreads; i++)
        if (r->workers[i].read_lag && ll_pct_merge(all, r->workers[i].read_lag)) {
            ll_pct_free(all);
            return;
        }
    if (all && ll_pct_count(all) > 0) {
        c->read_lag_p50_ms = ll_pct_quantile(all, 0.5);
        c->read_lag_p99_ms = ll_pct_quantile(all, 0.99);
        c->read_lag_max_ms = ll_pct_max(all);
    }
    ll_pct_free(all);
}

/* Split C over the workers: the first C % W get one more. */
static void assign(lg_run *r, lg_level_ctx *L)
{
    int W = r->nthreads, C = L->concurrency;
    int active = L->rate_per_s > 0 && C == 0 ? W : (C < W ? C : W);
    for (int i = 0; i < W; i++) {
        lg_worker *w = &r->workers[i];
        w->lvl = L;
        w->n_ok = w->n_failed = 0;
        w->cpu_s = 0;
        w->reads = w->reads_kstamp = w->events = 0;
        ll_pct_free(w->read_lag);
        w->read_lag = ll_pct_new(4096); /* NULL (no memory): the lag goes unrecorded */
        w->rc = 0;
        w->err[0] = '\0';
        w->slots = C / W + (i < C % W);
        w->stride = i < active ? active : 0;
        w->offset = i;
        /* load.sessions: each slot holds a conversation (session.c) */
        if (lg_sess_assign(w, L->sessions > 0 ? w->slots : 0)) {
            w->rc = LL_ENOMEM;
            snprintf(w->err, sizeof w->err, "out of memory for the level's conversations");
        }
    }
}

/* The profile hook's moment: every in-flight request of the level decoding
 * (closed loop: all C of them), and the run not stopping. */
static int profile_due(lg_run *r, const lg_level_ctx *L)
{
    int inflight = atomic_load(&r->inflight), dec = atomic_load(&r->decoding);
    int target = L->rate_per_s > 0 ? (inflight > 0 ? inflight : -1) : L->concurrency;
    return !atomic_load(&r->stop_issue) && inflight == target && dec == target;
}

/* Sleep until a worker signals (or, with progress on, the next tick). */
static void wait_event(lg_run *r, uint64_t *seen, int64_t tick_ns)
{
    struct timespec ts = {(time_t)(tick_ns / 1000000000), (long)(tick_ns % 1000000000)};
    pthread_mutex_lock(&r->mu);
    while (r->events == *seen && atomic_load(&r->workers_left) > 0)
        if (tick_ns ? pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT : pthread_cond_wait(&r->cv, &r->mu) != 0)
            break;
    *seen = r->events;
    pthread_mutex_unlock(&r->mu);
}

/* The driver's watch over a running level: the profile hook (prof: NULL
 * for none) and the progress line, until the last worker has left.
 * r->watch was set before the workers started, so no start of decoding goes
 * unsignalled. The caller finishes the capture once the level's end is
 * stamped. */
static void watch_level(lg_run *r, const lg_level_ctx *L, lg_prof *prof)
{
    int armed = prof != NULL;
    int ticking = r->progress || (r->dist && r->dist->tick);
    int64_t next_tick = 0;
    uint64_t seen = 0;
    while (atomic_load(&r->workers_left) > 0) {
        if (armed && profile_due(r, L)) {
            armed = 0;
            atomic_store(&r->watch, 0);
            lg_profile_start(r, L, prof);
        }
        int64_t now = ll_now_ns();
        if (ticking && now >= next_tick) {
            lg_progress mine = my_progress(r, L), all = mine;
            if (r->dist && r->dist->tick)
                r->dist->tick(r->dist->ctx, &mine, &all);
            if (r->progress)
                progress_line(r, L, now, &all);
            next_tick = now + LG_TICK_NS;
        }
        wait_event(r, &seen, ticking ? next_tick : 0);
    }
    atomic_store(&r->watch, 0);
}

static void reset_level_counters(lg_run *r)
{
    atomic_store(&r->done, 0);
    atomic_store(&r->errors, 0);
    atomic_store(&r->tokens, 0);
}

/* Start the workers; on a failed start, stop the ones that did start. */
static int start_workers(lg_run *r, int *started, char *err, size_t errlen)
{
    atomic_store(&r->workers_left, r->nthreads);
    for (*started = 0; *started < r->nthreads; (*started)++)
        if (pthread_create(&r->workers[*started].thread, NULL, lg_worker_main, &r->workers[*started]) != 0) {
            ll_errf(err, errlen, "pthread_create failed");
            /* the ones not started will never decrement workers_left */
            atomic_fetch_sub(&r->workers_left, r->nthreads - *started);
            lg_run_interrupt(r, 0);
            return LL_ESYS;
        }
    return 0;
}

/* Join the workers; the first worker error becomes the level's. */
static int join_workers(lg_run *r, int started, int rc, char *err, size_t errlen)
{
    for (int i = 0; i < started; i++)
        if (pthread_join(r->workers[i].thread, NULL) != 0 && rc == 0) {
            ll_errf(err, errlen, "pthread_join failed");
            rc = LL_ESYS;
        }
    for (int i = 0; i < r->nthreads && rc == 0; i++)
        if (r->workers[i].rc) {
            rc = r->workers[i].rc;
            ll_errf(err, errlen, "worker %d: %s", i, r->workers[i].err[0] ? r->workers[i].err : ll_strerror(rc));
        }
    return rc;
}

/* rc/err: the level's outcome so far; a failed after_level hook (a rank
 * that did not report) becomes it when nothing failed before. The level_end
 * is queued either way: what was measured stays readable. */
static int put_level_end(lg_run *r, const lg_level_ctx *L, int64_t end_ns, int profiled, int *rc, char *err,
                         size_t errlen)
{
    ll_rec_level_end le = {.level = L->index, .end_ns = end_ns - r->epoch_ns,
                           .interrupted = atomic_load(&r->interrupted), .profiled = profiled};
    /* The client's own cost (records.h ll_rec_client): fit tells from it
     * when a saturated worker thread, not the server, set the pace. */
    le.client.present = 1;
    le.client.threads = r->nthreads;
    le.client.wall_s = (double)(end_ns - L->start_ns) / 1e9;
    for (int i = 0; i < r->nthreads; i++) {
        const lg_worker *w = &r->workers[i];
        le.ok += w->n_ok;
        le.failed += w->n_failed;
        if (w->cpu_s > le.client.cpu_s_max)
            le.client.cpu_s_max = w->cpu_s;
        le.client.cpu_s_sum += w->cpu_s;
        le.client.reads += w->reads;
        le.client.reads_kstamp += (int64_t)w->reads_kstamp;
        le.client.events += w->events;
    }
    read_lag_summary(r, &le.client);
    if (r->dist && r->dist->after_level) {
        char herr[512] = "";
        int hrc = r->dist->after_level(r->dist->ctx, L->index, &le, herr, sizeof herr);
        if (hrc && *rc == 0) {
            *rc = hrc;
            ll_errf(err, errlen, "%s", herr);
        }
    }
    /* Rank 0 now holds the whole level's counts (the same the fit reads from
     * the request records): over max_failed, no later level is sent. */
    int n = le.ok + le.failed;
    if (r->stop_on_failed && r->rank == 0 && !le.interrupted && n > 0 && (double)le.failed / n > r->max_failed &&
        (size_t)L->index + 1 < r->n_levels)
        r->stopped_after = L->index;
    return ll_rec_put_level_end(r->rec, &le);
}

/* Rank `rank`'s part of n things split over `ranks` in proportion to the
 * weights c (the first c % ranks ranks hold one more of C): the parts add up
 * to n exactly and follow C_r, so a rank with no streams gets no requests. */
static int share(int n, int c, int rank, int ranks)
{
    if (c <= 0) /* no weights (an uncapped open level): equal parts */
        return n / ranks + (rank < n % ranks);
    int64_t lo = (int64_t)rank * (c / ranks) + (rank < c % ranks ? rank : c % ranks);
    int64_t hi = lo + c / ranks + (rank < c % ranks);
    return (int)((int64_t)n * hi / c - (int64_t)n * lo / c);
}

/* This rank's part of the level: C_r (differing by at most one between
 * ranks), its requests and warmup, and R/K of an open level's rate. An open
 * level's cap stays at least 1 where the whole level had one. */
static void take_share(const lg_run *r, lg_level_ctx *L)
{
    const scn_level *lv = L->lv;
    int C = lv->concurrency, K = r->ranks, k = r->rank;
    L->concurrency = C / K + (k < C % K);
    if (lv->rate_per_s > 0 && C > 0 && L->concurrency == 0)
        L->concurrency = 1;
    L->rate_per_s = lv->rate_per_s > 0 ? lv->rate_per_s / K : 0;
    int weights = lv->rate_per_s > 0 ? 0 : C;
    L->warmup = share(lv->warmup, weights, k, K);
    L->total = share(scn_level_requests(lv), weights, k, K) + L->warmup;
    int T = r->scn->session_turns;
    if (T > 0 && lv->rate_per_s <= 0) {
        /* whole conversations per rank (scn_validate made requests S x T) */
        L->sessions = share(scn_level_requests(lv) / T, weights, k, K);
        L->warmup = 0;
        L->total = L->sessions * T;
    }
}

/* prof: the level's profile hook, prepared (rank 0 of a profiled level),
 * else NULL. */
static int run_level(lg_run *r, int index, lg_prof *prof, char *err, size_t errlen)
{
    lg_level_ctx L = {0};
    int rc, started = 0;
    L.index = index;
    L.lv = &r->levels[index];
    take_share(r, &L);
    /* each rank its own arrival stream: K copies of one would arrive in lockstep */
    L.seed = r->scn->seed * 1000003u + (uint64_t)index + (uint64_t)r->rank * 0x9e3779b97f4a7c15ull;
    atomic_init(&L.next, 0);
    reset_level_counters(r);
    assign(r, &L);
    L.start_ns = ll_now_ns();
    L.deadline_ns = L.lv->duration_s > 0 ? L.start_ns + (int64_t)(L.lv->duration_s * 1e9) : 0;
    if ((rc = put_level_line(r, &L))) {
        ll_errf(err, errlen, "queueing the level record: %s", ll_strerror(rc));
        return rc;
    }
    /* the profile hook is one POST for the whole run: rank 0's */
    atomic_store(&r->watch, prof != NULL);
    rc = start_workers(r, &started, err, errlen);
    watch_level(r, &L, prof);
    rc = join_workers(r, started, rc, err, errlen);
    if (r->progress)
        fputs("\r\033[K", stderr);
    int prc = put_level_end(r, &L, ll_now_ns(), prof && prof->started && prof->ok, &rc, err, errlen);
    if (prc && rc == 0) {
        ll_errf(err, errlen, "queueing the level_end record: %s", ll_strerror(prc));
        rc = prc;
    }
    /* After the level's end is stamped, so the wait is none of its figures;
     * before the next level starts, so none of its requests meets a server
     * still writing its trace or slowed by its profiler (profile_wait.c). */
    if (prof)
        lg_profile_finish(r, &L, prof);
    return rc;
}

/* K ranks: the hook decides together whether level i runs, and when. */
static int agree_on_level(lg_run *r, int i, char *err, size_t errlen)
{
    int64_t epoch = r->epoch_ns;
    int stop = r->stopped_after >= 0 ? LG_STOP_FAILED : atomic_load(&r->stop_issue) ? LG_STOP_INTERRUPTED : 0;
    int rc = r->dist->before_level(r->dist->ctx, i, stop, &epoch, err, errlen);
    if (rc == 0)
        r->epoch_ns = epoch; /* no worker runs between levels: nothing reads it now */
    return rc;
}

int lg_run_sweep(lg_run *r, char *err, size_t errlen)
{
    lg_prof *prof = NULL;
    int prepared = -1;
    int rc = lg_profile_prepare_level(r, 0, &prof, &prepared, err, errlen);
    for (size_t i = 0; i < r->n_levels && rc == 0; i++) {
        /* K ranks: the reset before they agree on the start, so none sends
         * while it happens; one rank (an A/B side too): once its turn came */
        if (r->ranks > 1)
            lg_cache_before_level(r, (int)i);
        if (r->dist && r->dist->before_level) {
            int arc = agree_on_level(r, (int)i, err, errlen);
            if (r->stopped_after >= 0)
                break; /* the hook has told the others; this run was not interrupted */
            if (arc == LL_EINTR) {
                atomic_store(&r->interrupted, 1); /* another rank was: this run is cut short too */
                break;
            }
            if ((rc = arc))
                break;
        } else if (atomic_load(&r->stop_issue) || r->stopped_after >= 0) {
            break;
        }
        if (r->ranks == 1)
            lg_cache_before_level(r, (int)i);
        rc = run_level(r, (int)i, prepared == (int)i ? prof : NULL, err, errlen);
        if (rc == 0)
            rc = plan_next(r, i, err, errlen);
        if (rc == 0)
            rc = lg_profile_prepare_level(r, i + 1, &prof, &prepared, err, errlen);
    }
    free(prof);
    return rc ? rc : atomic_load(&r->interrupted) ? LL_EINTR : 0;
}
