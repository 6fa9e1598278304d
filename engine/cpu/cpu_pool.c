/* cpu_pool.c: persistent pthread pool for the cpu backend's kernels.
 *
 * DESIGN: a run is identified by a generation number. cpu_pool_run publishes
 * (fn, ctx, n_tasks), bumps the generation and broadcasts; each worker claims
 * tasks with an atomic fetch-add until they run out, then reports done. The
 * caller claims tasks too and then waits until every worker has reported, so
 * no worker can still be touching ctx when cpu_pool_run returns.
 */
#include "cpu_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct cpu_pool {
    int threads;
    pthread_t *tid;          /* (threads-1) */
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* guarded by mu */
    int n_finished;           /* workers done with this generation, guarded by mu */
    int stop;                 /* guarded by mu */
    cpu_pool_fn fn;
    void *ctx;
    int n_tasks;
    int each;                 /* this run is cpu_pool_run_each: fn once per worker */
    atomic_int next_task;
};

typedef struct pool_worker_arg {
    cpu_pool *p;
    int worker;
} pool_worker_arg;

static void pool_drain(cpu_pool *p, int worker)
{
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks)
            return;
        p->fn(p->ctx, t, worker);
    }
}

static void *pool_main(void *arg)
{
    pool_worker_arg a = *(pool_worker_arg *)arg;
    free(arg);
    cpu_pool *p = a.p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        if (p->each)
            p->fn(p->ctx, a.worker, a.worker);
        else
            pool_drain(p, a.worker);
        pthread_mutex_lock(&p->mu);
        if (++p->n_finished == p->threads - 1)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int cpu_pool_create(int threads, cpu_pool **out, char *err, size_t errlen)
{
    *out = NULL;
    if (threads < 1 || threads > 1024) {
        ll_errf(err, errlen, "cpu pool: threads must be in [1, 1024], got %d", threads);
        return LL_EINVAL;
    }
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) {
        ll_errf(err, errlen, "cpu pool: out of memory");
        return LL_ENOMEM;
    }
    p->threads = threads;
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&p->wake, NULL)) != 0)
        pthread_mutex_destroy(&p->mu);
    if (rc == 0 && (rc = pthread_cond_init(&p->done, NULL)) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
    }
    if (rc != 0) {
        free(p);
        ll_errf(err, errlen, "cpu pool: pthread init: %s", strerror(rc));
        return LL_ESYS;
    }
    atomic_init(&p->next_task, 0);
    if (threads > 1) {
        p->tid = calloc((size_t)threads - 1, sizeof *p->tid);
        if (!p->tid) {
            ll_errf(err, errlen, "cpu pool: out of memory");
            cpu_pool_destroy(p);
            return LL_ENOMEM;
        }
    }
    for (int i = 0; i < threads - 1; i++) {
        pool_worker_arg *a = malloc(sizeof *a);
        if (!a) {
            ll_errf(err, errlen, "cpu pool: out of memory");
            cpu_pool_destroy(p);
            return LL_ENOMEM;
        }
        a->p = p;
        a->worker = i + 1; /* worker 0 is the caller */
        rc = pthread_create(&p->tid[i], NULL, pool_main, a);
        if (rc != 0) {
            free(a);
            ll_errf(err, errlen, "cpu pool: pthread_create: %s", strerror(rc));
            cpu_pool_destroy(p);
            return LL_ESYS;
        }
        p->n_started++;
    }
    *out = p;
    return 0;
}

int cpu_pool_threads(const cpu_pool *p) { return p->threads; }

void cpu_pool_run(cpu_pool *p, int n_tasks, cpu_pool_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    if (p->threads == 1 || n_tasks == 1) {
        pool_drain(p, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->n_finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    pool_drain(p, 0);

    pthread_mutex_lock(&p->mu);
    while (p->n_finished < p->threads - 1)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void cpu_pool_run_each(cpu_pool *p, cpu_pool_fn fn, void *ctx)
{
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = p->threads;
    if (p->threads == 1) {
        fn(ctx, 0, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->each = 1; /* published with the generation, under mu */
    p->n_finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    fn(ctx, 0, 0);

    pthread_mutex_lock(&p->mu);
    while (p->n_finished < p->threads - 1)
        pthread_cond_wait(&p->done, &p->mu);
    p->each = 0;
    pthread_mutex_unlock(&p->mu);
}

void cpu_pool_destroy(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->tid[i], NULL);
    free(p->tid);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
