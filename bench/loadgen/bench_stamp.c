/* bench_stamp.c: bench_loadgen's (4), stamp accuracy at C streams, without
 * libcurl or the engine: a writer thread writes one 288-byte frame to each of
 * C loopback sockets every step (30 ms), each frame carrying the clock read
 * just before its write(); a reader thread reads them through loadgen's
 * recv() (netstamp.h) on one epoll set. Per frame: the kernel's stamp - the
 * write (what a chunk time now carries beyond the network) and the read - the
 * write (what a clock read at the callback carried before: the reader's queue). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "netstamp.h"
#include "bench_loadgen.h"

enum { STAMP_FRAME = 288 };

typedef struct stamp_bench {
    int C, steps;
    int *wr, *rd;                 /* server (writer) and client (reader) ends */
    int64_t start_ns;
    atomic_int stop;
    LL_VEC(double) k_us, u_us;    /* kernel stamp - write; read - write */
    size_t frames, unstamped;
} stamp_bench;

static void *stamp_writer(void *arg)
{
    stamp_bench *b = arg;
    char frame[STAMP_FRAME];
    memset(frame, 'x', sizeof frame);
    for (int s = 0; s < b->steps && !atomic_load(&b->stop); s++) {
        ll_sleep_until_ns(b->start_ns + (int64_t)s * 30000000);
        for (int i = 0; i < b->C; i++) {
            int64_t t = ll_now_ns();
            memcpy(frame, &t, sizeof t);
            if (write(b->wr[i], frame, sizeof frame) != (ssize_t)sizeof frame)
                atomic_store(&b->stop, 1);
        }
    }
    return NULL;
}

static int stamp_pairs(stamp_bench *b)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int on = 1, l = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        goto out;
    for (int i = 0; i < b->C; i++) {
        b->rd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (b->rd[i] < 0 || ns_rx_enable(b->rd[i]) || connect(b->rd[i], (struct sockaddr *)&a, sizeof a))
            goto out;
        b->wr[i] = accept(l, NULL, NULL);
        if (b->wr[i] < 0 || setsockopt(b->wr[i], IPPROTO_TCP, TCP_NODELAY, &on, sizeof on))
            goto out;
    }
    rc = 0;
out:
    if (l >= 0)
        close(l);
    return rc;
}

/* The C socket pairs and the reader's epoll set: 0, or -1 (reported when the
 * sockets fail). b->wr and b->rd are allocated and set to -1 first. */
static int stamp_open(stamp_bench *b, int ep)
{
    int C = b->C;
    b->wr = malloc((size_t)C * sizeof *b->wr);
    b->rd = malloc((size_t)C * sizeof *b->rd);
    if (!b->wr || !b->rd)
        return -1;
    for (int i = 0; i < C; i++)
        b->wr[i] = b->rd[i] = -1;
    if (ep < 0)
        return -1;
    if (stamp_pairs(b)) {
        fprintf(stderr, "bench_stamp C=%d: loopback sockets: %s\n", C, strerror(errno));
        return -1;
    }
    for (int i = 0; i < C; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, b->rd[i], &ev))
            return -1;
    }
    return 0;
}

static void stamp_close(stamp_bench *b, int ep)
{
    for (int i = 0; b->wr && b->rd && i < b->C; i++) {
        if (b->wr[i] >= 0)
            close(b->wr[i]);
        if (b->rd[i] >= 0)
            close(b->rd[i]);
    }
    if (ep >= 0)
        close(ep);
    free(b->wr);
    free(b->rd);
    ll_vec_free(&b->k_us);
    ll_vec_free(&b->u_us);
}

/* The frames a read completed on socket i (part/have: a frame split over
 * reads), each set against the write time it carries: t_k the read's kernel
 * stamp (-1: none), t_user the clock read after it. -1 out of memory. */
static int stamp_take(stamp_bench *b, char (*part)[STAMP_FRAME], int *have, int i, const char *buf,
                      ssize_t got, int64_t t_k, int64_t t_user)
{
    for (ssize_t off = 0; off < got;) {
        size_t take = (size_t)(got - off) < (size_t)(STAMP_FRAME - have[i]) ? (size_t)(got - off)
                                                                            : (size_t)(STAMP_FRAME - have[i]);
        memcpy(part[i] + have[i], buf + off, take);
        have[i] += (int)take;
        off += (ssize_t)take;
        if (have[i] < STAMP_FRAME)
            continue;
        int64_t w;
        memcpy(&w, part[i], sizeof w);
        have[i] = 0;
        b->frames++;
        if (t_k < 0)
            b->unstamped++;
        else if (ll_vec_push(&b->k_us, (double)(t_k - w) / 1e3))
            return -1;
        if (ll_vec_push(&b->u_us, (double)(t_user - w) / 1e3))
            return -1;
    }
    return 0;
}

/* The reader: every frame the writer sends, or until 5 s past its last step. */
static void stamp_read(stamp_bench *b, int ep, ns_rx *rx, char (*part)[STAMP_FRAME], int *have)
{
    size_t want = (size_t)b->C * (size_t)b->steps;
    int64_t give_up = b->start_ns + (int64_t)b->steps * 30000000 + 5000000000LL;
    struct epoll_event evs[256];
    char buf[4096];
    while (b->frames < want && ll_now_ns() < give_up && !atomic_load(&b->stop)) {
        int n = epoll_wait(ep, evs, 256, 100);
        if (n > 0)
            ns_rx_clock(rx);
        for (int e = 0; e < n; e++) {
            int i = (int)evs[e].data.u32;
            ssize_t got = recv(b->rd[i], buf, sizeof buf, 0);
            int64_t t_user = ll_now_ns(), t_k = rx->fd == b->rd[i] ? rx->t_ns : -1;
            stamp_take(b, part, have, i, buf, got, t_k, t_user);
        }
    }
}

static void stamp_print(stamp_bench *b)
{
    ll_sort_doubles(b->k_us.v, b->k_us.n);
    ll_sort_doubles(b->u_us.v, b->u_us.n);
    printf("stamps, C=%-5d %zu frames (%zu without a kernel stamp): kernel stamp - write() p50 %.1f us, p99 %.1f us, "
           "max %.1f us; read - write() p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
           b->C, b->frames, b->unstamped, b->k_us.n ? ll_quantile_sorted(b->k_us.v, b->k_us.n, 0.5) : NAN,
           b->k_us.n ? ll_quantile_sorted(b->k_us.v, b->k_us.n, 0.99) : NAN,
           b->k_us.n ? b->k_us.v[b->k_us.n - 1] : NAN,
           b->u_us.n ? ll_quantile_sorted(b->u_us.v, b->u_us.n, 0.5) / 1e3 : NAN,
           b->u_us.n ? ll_quantile_sorted(b->u_us.v, b->u_us.n, 0.99) / 1e3 : NAN,
           b->u_us.n ? b->u_us.v[b->u_us.n - 1] / 1e3 : NAN);
}

void bench_stamp(int C, int steps)
{
    stamp_bench b = {.C = C, .steps = steps};
    int ep = epoll_create1(0);
    char (*part)[STAMP_FRAME] = NULL; /* a frame split over reads */
    int *have = NULL;
    if (stamp_open(&b, ep) != 0)
        goto out;
    part = calloc((size_t)C, STAMP_FRAME);
    have = calloc((size_t)C, sizeof *have);
    if (!part || !have)
        goto out;
    ns_rx rx;
    ns_rx_attach(&rx);
    b.start_ns = ll_now_ns() + 20000000;
    pthread_t th;
    if (pthread_create(&th, NULL, stamp_writer, &b) != 0) {
        ns_rx_attach(NULL);
        goto out;
    }
    stamp_read(&b, ep, &rx, part, have);
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    ns_rx_attach(NULL);
    stamp_print(&b);
out:
    free(part);
    free(have);
    stamp_close(&b, ep);
}
