/* engine.c: eng_start / eng_stop and the step log reader; the glue between
 * the backend, the scheduler thread and the HTTP server. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "internal.h"

/* Every stream is a socket (two when the client is in the same process), so
 * thousands of streams need more than the usual soft limit of 1024. */
static void raise_nofile(unsigned max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            ll_warn("engine: could not raise the open-file limit to %llu",
                    (unsigned long long)want);
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return;
    }
    /* Say so when the limit, not max_connections, will be what refuses
     * connections (each stream is one descriptor here, plus a few of our own). */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_connections + 64)
        ll_warn("engine: the open-file limit (%llu) is below max_connections (%u): connections "
                "beyond it will be refused (raise it with ulimit -n)",
                (unsigned long long)rl.rlim_cur, max_connections);
}

static int check_config(const eng_config *c, char *err, size_t errlen)
{
    if (c->max_running < 1 || c->prefill_budget_tok < 1 || c->max_tokens_limit < 1 ||
        c->max_waiting < 0 || c->max_context_tok < 1 || c->default_max_tokens < 1) {
        ll_errf(err, errlen, "engine config: max_running, prefill_budget, max_tokens_limit, "
                             "max_context and default_max_tokens must be >= 1");
        return LL_EINVAL;
    }
    if (!(c->time_scale > 0) || c->jitter_frac < 0 || c->law_a_ms < 0 || c->law_b_ms < 0 ||
        c->law_c_ms_per_ktok < 0 || c->law_p_ms_per_tok < 0) {
        ll_errf(err, errlen, "engine config: time_scale must be > 0 and law terms and jitter >= 0");
        return LL_EINVAL;
    }
    if (c->port < 0 || c->port > 65535 || c->max_body_bytes < 64 || c->max_connections < 16 ||
        c->idle_timeout_s < 1) {
        ll_errf(err, errlen, "engine config: port, max_body_bytes (>= 64), max_connections (>= 16) "
                             "or idle_timeout_s (>= 1) out of range");
        return LL_EINVAL;
    }
    return 0;
}

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s ? s : dflt);
}

static void free_strings(eng_config *c)
{
    free((char *)c->bind_addr);
    free((char *)c->model);
    free((char *)c->attn);
    free((char *)c->profile_dir);
}

int eng_start(const eng_config *cfg, eng_engine **out, char *err, size_t errlen)
{
    int rc = check_config(cfg, err, errlen);
    if (rc)
        return rc;
    *out = NULL;
    raise_nofile(cfg->max_connections);
    eng_engine *e = calloc(1, sizeof *e);
    if (!e) {
        ll_errf(err, errlen, "engine: out of memory");
        return LL_ENOMEM;
    }
    e->cfg = *cfg;
    /* The engine keeps its own copies: callers' strings may not outlive it. */
    e->cfg.bind_addr = dup_or(cfg->bind_addr, "127.0.0.1");
    e->cfg.model = dup_or(cfg->model, "loadlaw-synthetic");
    e->cfg.attn = dup_or(cfg->attn, "tiled");
    e->cfg.profile_dir = dup_or(cfg->profile_dir, "/tmp");
    if (!e->cfg.bind_addr || !e->cfg.model || !e->cfg.attn || !e->cfg.profile_dir ||
        strlen(e->cfg.model) > 120) {
        ll_errf(err, errlen, "engine: out of memory or model name over 120 characters");
        rc = LL_EINVAL;
        goto fail_strings;
    }
    atomic_init(&e->n_running, 0);
    atomic_init(&e->next_id, 1);
    atomic_init(&e->failed_rc, 0);
    switch (cfg->backend) {
    case ENG_BACKEND_SYNTHETIC:
        e->be = &eng_backend_synthetic;
        break;
    case ENG_BACKEND_CPU:
        e->be = &eng_backend_cpu;
        break;
    default:
        ll_errf(err, errlen, "cuda backend not built in this version");
        rc = LL_EINVAL;
        goto fail_strings;
    }
    rc = e->be->create(&e->cfg, &e->be_state, err, errlen);
    if (rc)
        goto fail_strings;
    /* The condition variable times out on CLOCK_MONOTONIC (ll_now_ns). */
    pthread_condattr_t ca;
    int bad = pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
              pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (bad || pthread_mutex_init(&e->mu, NULL) || pthread_mutex_init(&e->io_mu, NULL) ||
        pthread_mutex_init(&e->log_mu, NULL)) {
        ll_errf(err, errlen, "engine: pthread init failed");
        rc = LL_ESYS;
        goto fail_backend;
    }
    rc = eng_sched_start(e, err, errlen);
    if (rc)
        goto fail_backend;
    rc = eng_server_start(e, err, errlen);
    if (rc)
        goto fail_sched;
    ll_info("engine: %s backend on %s", e->be->name, e->url);
    *out = e;
    return 0;
fail_sched:
    eng_sched_stop(e);
fail_backend:
    e->be->destroy(e->be_state);
fail_strings:
    free_strings(&e->cfg);
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

size_t eng_steps(eng_engine *e, size_t from, eng_step *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&e->log_mu);
    if (from < e->log_n) {
        n = e->log_n - from;
        if (n > max)
            n = max;
        memcpy(out, e->log + from, n * sizeof *out);
    }
    pthread_mutex_unlock(&e->log_mu);
    return n;
}

size_t eng_step_count(eng_engine *e)
{
    pthread_mutex_lock(&e->log_mu);
    size_t n = e->log_n;
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
    free(e->prof.steps);
    free(e->log);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->io_mu);
    pthread_mutex_destroy(&e->log_mu);
    pthread_cond_destroy(&e->cv);
    free_strings(&e->cfg);
    free(e);
}
