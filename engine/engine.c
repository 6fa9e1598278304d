/* engine.c: eng_start / eng_stop, the step log reader and the engine's
 * facts for the records (eng_law, eng_set_records); the glue between the
 * backend, the scheduler thread and the HTTP server. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "internal.h"

/* Every stream is a socket (two when the client is in the same process), so
 * thousands of streams need more than the usual soft limit of 1024. Returns
 * the lowest socket number a request is refused on (ENG_FD_RESERVE below
 * the limit; INT_MAX without one). */
static int raise_nofile(unsigned max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return INT_MAX;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            ll_warn("engine: could not raise the open-file limit to %llu",
                    (unsigned long long)want);
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return INT_MAX;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)INT_MAX)
        return INT_MAX;
    int lim = (int)rl.rlim_cur;
    int fd_max = lim > 2 * ENG_FD_RESERVE ? lim - ENG_FD_RESERVE : lim / 2;
    /* Say so when the limit, not max_connections, will be what refuses
     * connections (each stream is one descriptor here, plus a few of our own). */
    if ((rlim_t)lim < (rlim_t)max_connections + 2 * ENG_FD_RESERVE)
        ll_warn("engine: the open-file limit (%d) is below max_connections (%u) + %d: once %d "
                "descriptors are open, each new request is answered 503 and its connection "
                "closed (raise the limit with ulimit -n)", lim, max_connections,
                2 * ENG_FD_RESERVE, fd_max);
    return fd_max;
}

/* The law's shape in N, for a config filled by hand (the spec keys check
 * the same when they parse). */
static int check_law_shape(const eng_config *c, char *err, size_t errlen)
{
    if (c->law_n_buckets < 0 || c->law_n_buckets > ENG_LAW_MAX_BUCKETS || c->law_knee_n < 0 ||
        !(c->law_knee_b_ms >= 0)) {
        ll_errf(err, errlen, "engine config: law_n_buckets must be in [0, %d], law_knee_n and "
                             "law_knee_b_ms >= 0", ENG_LAW_MAX_BUCKETS);
        return LL_EINVAL;
    }
    for (int i = 0; i < c->law_n_buckets; i++)
        if (c->law_buckets[i] < 1 || (i > 0 && c->law_buckets[i] <= c->law_buckets[i - 1])) {
            ll_errf(err, errlen, "engine config: law buckets must be strictly increasing integers >= 1");
            return LL_EINVAL;
        }
    return 0;
}

/* The HTTP server's and the profiler's limits. */
static int check_server_config(const eng_config *c, char *err, size_t errlen)
{
    if (c->port < 0 || c->port > 65535 || c->max_body_bytes < 64 || c->max_connections < 16 ||
        c->idle_timeout_s < 1 || c->request_timeout_s < 1) {
        ll_errf(err, errlen, "engine config: port, max_body_bytes (>= 64), max_connections (>= 16), "
                             "idle_timeout_s or request_timeout_s (>= 1) out of range");
        return LL_EINVAL;
    }
    if (c->profile_max_steps_open < 1 || c->profile_max_steps_open > ENG_PROF_MAX_STEPS) {
        ll_errf(err, errlen, "engine config: profile_max_steps_open must be in [1, %d]",
                ENG_PROF_MAX_STEPS);
        return LL_EINVAL;
    }
    return 0;
}

static int check_config(const eng_config *c, char *err, size_t errlen)
{
    if (c->max_running < 1 || c->prefill_budget_tok < 1 || c->max_tokens_limit < 1 ||
        c->max_waiting < 0 || c->max_context_tok < 1 || c->default_max_tokens < 1) {
        ll_errf(err, errlen, "engine config: max_running, prefill_budget, max_tokens_limit, "
                             "max_context and default_max_tokens must be >= 1");
        return LL_EINVAL;
    }
    if (c->prefix_cache && c->backend != ENG_BACKEND_SYNTHETIC) {
        /* the cpu and cuda backends would have to keep the cached rows' KV */
        ll_errf(err, errlen, "engine config: prefix_cache needs backend=synthetic (the cpu and cuda backends "
                             "keep no KV rows for cached prompt tokens)");
        return LL_EINVAL;
    }
    if (!(c->time_scale > 0) || c->jitter_frac < 0 || c->law_a_ms < 0 || c->law_b_ms < 0 ||
        c->law_c_ms_per_ktok < 0 || c->law_p_ms_per_tok < 0) {
        ll_errf(err, errlen, "engine config: time_scale must be > 0 and law terms and jitter >= 0");
        return LL_EINVAL;
    }
    if (check_law_shape(c, err, errlen))
        return LL_EINVAL;
    if (c->step_log_max < 1 || c->conn_memory_bytes < 4096) {
        ll_errf(err, errlen, "engine config: step_log_max must be >= 1 and conn_memory >= 4096");
        return LL_EINVAL;
    }
    return check_server_config(c, err, errlen);
}

/* The backend for a kind; NULL when it is not built in. */
static const eng_backend_ops *backend_for(eng_backend_kind kind)
{
    switch (kind) {
    case ENG_BACKEND_SYNTHETIC:
        return &eng_backend_synthetic;
    case ENG_BACKEND_CPU:
        return &eng_backend_cpu;
    case ENG_BACKEND_CUDA:
        return &eng_backend_cuda;
    default:
        return NULL;
    }
}

/* The engine's own copy of the configuration: callers' strings may not
 * outlive it. NULL strings become their defaults. */
static int take_config(eng_engine *e, const eng_config *cfg, char *err, size_t errlen)
{
    if (eng_config_copy(&e->cfg, cfg)) {
        ll_errf(err, errlen, "engine: out of memory");
        return LL_ENOMEM;
    }
    eng_config_fill_strings(&e->cfg);
    if (strlen(e->cfg.model) > 120) {
        ll_errf(err, errlen, "engine: model name over 120 characters");
        return LL_EINVAL;
    }
    return 0;
}

/* Locks and the condition variable; the condition variable times out on
 * CLOCK_MONOTONIC (ll_now_ns). */
static int init_sync(eng_engine *e, char *err, size_t errlen)
{
    pthread_condattr_t ca;
    int bad = pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
              pthread_cond_init(&e->cv, &ca) || pthread_cond_init(&e->drain_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (bad || pthread_mutex_init(&e->mu, NULL) || pthread_mutex_init(&e->io_mu, NULL) ||
        pthread_mutex_init(&e->log_mu, NULL) || pthread_mutex_init(&e->rec_mu, NULL)) {
        ll_errf(err, errlen, "engine: pthread init failed");
        return LL_ESYS;
    }
    return 0;
}

static void destroy_sync(eng_engine *e)
{
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->io_mu);
    pthread_mutex_destroy(&e->log_mu);
    pthread_mutex_destroy(&e->rec_mu);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->drain_cv);
}

int eng_start(const eng_config *cfg, eng_engine **out, char *err, size_t errlen)
{
    int rc;
    int have_backend = 0, have_sync = 0, have_sched = 0;
    eng_engine *e = NULL;
    *out = NULL;
    LL_TRY(check_config(cfg, err, errlen));
    e = calloc(1, sizeof *e);
    if (!e) {
        ll_errf(err, errlen, "engine: out of memory");
        rc = LL_ENOMEM;
        goto fail;
    }
    e->conn_fd_max = raise_nofile(cfg->max_connections);
    LL_TRY(take_config(e, cfg, err, errlen));
    LL_TRY(eng_prof_init(e, err, errlen));
    atomic_init(&e->n_running, 0);
    atomic_init(&e->next_id, 1);
    atomic_init(&e->failed_rc, 0);
    atomic_init(&e->handoff_dropped, 0);
    e->be = backend_for(cfg->backend);
    if (!e->be) {
        ll_errf(err, errlen, "engine: unknown backend %d", (int)cfg->backend);
        rc = LL_EINVAL;
        goto fail;
    }
    LL_TRY(e->be->create(&e->cfg, &e->be_state, err, errlen));
    have_backend = 1;
    if (cfg->prefix_cache && !(e->prefix = eng_prefix_new((size_t)cfg->prefix_cache_blocks))) {
        ll_errf(err, errlen, "engine: out of memory for the prefix cache");
        rc = LL_ENOMEM;
        goto fail;
    }
    LL_TRY(init_sync(e, err, errlen));
    have_sync = 1;
    LL_TRY(eng_sched_start(e, err, errlen));
    have_sched = 1;
    LL_TRY(eng_server_start(e, err, errlen));
    ll_info("engine: %s backend on %s", e->be->name, e->url);
    *out = e;
    return 0;
fail:
    if (have_sched)
        eng_sched_stop(e);
    if (have_sync)
        destroy_sync(e);
    if (have_backend)
        e->be->destroy(e->be_state);
    if (e) {
        eng_prefix_free(e->prefix);
        eng_config_free(&e->cfg);
    }
    free(e);
    return rc;
}

const char *eng_url(const eng_engine *e) { return e->url; }

int eng_port(const eng_engine *e) { return e->port; }

int eng_failed(const eng_engine *e, char *err, size_t errlen)
{
    int rc = atomic_load(&((eng_engine *)e)->failed_rc);
    if (rc)
        ll_errf(err, errlen, "%s", e->fail_msg);
    return rc;
}

const char *eng_model(const eng_engine *e) { return e->cfg.model; }

const char *eng_backend_name(const eng_engine *e) { return e->be->name; }

int eng_law(const eng_engine *e, ll_rec_engine_law *out)
{
    const eng_config *c = &e->cfg;
    memset(out, 0, sizeof *out);
    if (!(e->be->caps & ENG_CAP_PLAYS_LAW))
        return 0;
    out->present = 1;
    out->a_ms = c->law_a_ms * c->time_scale;
    out->b_ms = c->law_b_ms * c->time_scale;
    out->c_ms_per_ktok = c->law_c_ms_per_ktok * c->time_scale;
    out->p_ms_per_tok = c->law_p_ms_per_tok * c->time_scale;
    out->time_scale = c->time_scale;
    out->n_buckets = c->law_n_buckets;
    memcpy(out->buckets, c->law_buckets, (size_t)c->law_n_buckets * sizeof *out->buckets);
    out->knee_n = c->law_knee_n;
    out->knee_b_ms = c->law_knee_n > 0 ? c->law_knee_b_ms * c->time_scale : 0;
    return 1;
}

void eng_set_records(eng_engine *e, ll_rec_writer *w)
{
    pthread_mutex_lock(&e->rec_mu);
    e->rec = w;
    e->rec_epoch_ns = w ? ll_rec_epoch_ns(w) : 0;
    e->rec_warned = 0;
    pthread_mutex_unlock(&e->rec_mu);
}

size_t eng_steps(eng_engine *e, size_t from, eng_step *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&e->log_mu);
    size_t first = e->log_total - e->log.n;
    if (from >= first && from < e->log_total) {
        n = e->log_total - from;
        if (n > max)
            n = max;
        /* at most two runs: up to the ring's end, then from its start */
        size_t ring = e->cfg.step_log_max, pos = from % ring;
        size_t run = n < ring - pos ? n : ring - pos;
        memcpy(out, e->log.v + pos, run * sizeof *out);
        memcpy(out + run, e->log.v, (n - run) * sizeof *out);
    }
    pthread_mutex_unlock(&e->log_mu);
    return n;
}

size_t eng_step_count(eng_engine *e)
{
    pthread_mutex_lock(&e->log_mu);
    size_t n = e->log_total;
    pthread_mutex_unlock(&e->log_mu);
    return n;
}

size_t eng_step_first(eng_engine *e)
{
    pthread_mutex_lock(&e->log_mu);
    size_t n = e->log_total - e->log.n;
    pthread_mutex_unlock(&e->log_mu);
    return n;
}

void eng_stop(eng_engine *e)
{
    if (!e)
        return;
    /* Scheduler first: it aborts and resumes every request it holds, so no
     * connection is left suspended when MHD stops (MHD forbids that). */
    eng_sched_stop(e);
    eng_server_stop(e);
    e->be->destroy(e->be_state);
    eng_prefix_free(e->prefix);
    ll_vec_free(&e->prof.steps);
    ll_vec_free(&e->prof.phases);
    ll_vec_free(&e->log);
    destroy_sync(e);
    eng_config_free(&e->cfg);
    free(e);
}
