/* limits.c: the open-file limit a sweep needs (sweep.h sweep_raise_nofile,
 * sweep_check_nofile): one socket per in-flight stream in the client, and
 * one more per stream for a bundled engine in this process. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "common.h"
#include "sweep.h"

void sweep_raise_nofile(void)
{
    struct rlimit rl;
    /* One socket per in-flight stream (and the engine's side of it). */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            ll_warn("could not raise the open-file limit: %s", strerror(errno));
    }
}

/* Files a process holds besides its streams: stdio, the records, the epoll
 * and event fds of each worker and of the engine, libcurl's resolver pipes. */
#define SWEEP_FD_SPARE 256

/* Before the run: can the largest level's streams have their sockets? One per
 * stream in the client, and one more per stream for a bundled engine in this
 * process. SWEEP_OK, or SWEEP_USAGE after saying what the limit is and what to do. */
int sweep_check_nofile(const scn_scenario *s, int ranks)
{
    struct rlimit rl;
    int c_max = 0;
    for (size_t i = 0; i < s->n_levels; i++)
        if (s->levels[i].concurrency > c_max)
            c_max = s->levels[i].concurrency;
    /* K ranks against --url: this process (rank 0) drives ceil(C/K) of the
     * streams. A bundled engine here serves all C, so then the whole C counts
     * (over-counting rank 0's own share: a conservative check). */
    if (ranks > 1 && s->url)
        c_max = (c_max + ranks - 1) / ranks;
    if (c_max == 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return SWEEP_OK; /* an uncapped open loop has no fixed need; nothing to check */
    int bundled = s->url == NULL;
    uint64_t per_stream = bundled ? 2 : 1, need = (uint64_t)c_max * per_stream + SWEEP_FD_SPARE;
    if (need <= (uint64_t)rl.rlim_cur)
        return SWEEP_OK;
    uint64_t fits = rl.rlim_cur > SWEEP_FD_SPARE ? (rl.rlim_cur - SWEEP_FD_SPARE) / per_stream : 0;
    fprintf(stderr,
            "loadlaw sweep: C=%d needs about %llu open files (%s) but this process may open %llu "
            "(hard limit %llu): at most C=%llu fits.%s\n",
            c_max, (unsigned long long)need,
            bundled ? "two sockets per stream: the client's and the bundled engine's" : "one socket per stream",
            (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, (unsigned long long)fits,
            bundled ? " Run the engine in its own process (loadlaw serve, then sweep --url) to halve the need,"
                      " or raise the hard limit (ulimit -Hn, limits.conf)."
                    : " Raise the hard limit (ulimit -Hn, limits.conf), or drive the load from more processes.");
    return SWEEP_USAGE;
}
