/* ticker.c: a thread that calls a function now and then every interval until
 * stopped (common.h, ll_ticker): what the sweep's metrics scraper and GPU
 * sampler both are.
 *
 * The wait is on a CLOCK_MONOTONIC condition variable, so ll_ticker_stop
 * ends it at once instead of after up to one interval. A tick that ran late
 * (a slow endpoint, a slow driver call) starts the next interval from now:
 * no burst of catch-up ticks. */
#include <pthread.h>
#include <stdlib.h>

#include "common.h"

struct ll_ticker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;                  /* guarded by mu */
    int64_t interval_ns;
    int (*fn)(void *ctx);
    void *ctx;
};

static void *ticker_main(void *arg)
{
    ll_ticker *t = arg;
    int64_t next = ll_now_ns();
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        pthread_mutex_unlock(&t->mu);
        int done = t->fn(t->ctx);
        pthread_mutex_lock(&t->mu);
        if (done)
            break;
        next += t->interval_ns;
        int64_t now = ll_now_ns();
        if (next < now)
            next = now;
        struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        while (!t->stop && ll_now_ns() < next)
            if (pthread_cond_timedwait(&t->cv, &t->mu, &ts))
                break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int ll_ticker_start(int64_t interval_ns, int (*fn)(void *ctx), void *ctx, ll_ticker **out)
{
    pthread_condattr_t a;
    ll_ticker *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return LL_ENOMEM;
    t->interval_ns = interval_ns > 0 ? interval_ns : 1;
    t->fn = fn;
    t->ctx = ctx;
    if (pthread_mutex_init(&t->mu, NULL)) {
        free(t);
        return LL_ESYS;
    }
    int bad = pthread_condattr_init(&a);
    if (!bad) {
        bad = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) || pthread_cond_init(&t->cv, &a);
        pthread_condattr_destroy(&a);
    }
    if (bad) {
        pthread_mutex_destroy(&t->mu);
        free(t);
        return LL_ESYS;
    }
    if (pthread_create(&t->thread, NULL, ticker_main, t)) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return LL_ESYS;
    }
    *out = t;
    return 0;
}

void ll_ticker_stop(ll_ticker *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
