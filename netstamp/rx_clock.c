/* rx_clock.c: the parts of ns_rx that need no socket (forgetting a read,
 * sampling the realtime-to-monotonic offset), shared by netstamp.c and its
 * plain twin netstamp_none.c. */
#include <stdint.h>
#include <time.h>

#include "netstamp.h"

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

void ns_rx_reset(ns_rx *rx)
{
    rx->fd = rx->drained_fd = -1;
    rx->t_ns = rx->read_at_ns = -1;
}

void ns_rx_clock(ns_rx *rx)
{
    /* realtime read between two monotonic ones; a pair more than 20 us apart
     * (the thread was preempted in between) is read again, at most twice */
    int64_t best = INT64_MAX;
    for (int i = 0; i < 3 && best > 20000; i++) {
        struct timespec m0, rt, m1;
        clock_gettime(CLOCK_MONOTONIC, &m0);
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &m1);
        int64_t w = ts_ns(&m1) - ts_ns(&m0);
        if (w < best) {
            best = w;
            rx->rt_minus_mono = ts_ns(&rt) - (ts_ns(&m0) + ts_ns(&m1)) / 2;
        }
    }
}
