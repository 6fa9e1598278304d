/* comm_host.c: the "host" communicator, K ranks that are threads of this
 * process (the cpu backend's tp=K), and the dispatch shared by every eng_comm.
 *
 * All-reduce (sum, fp32, in place), the way NCCL's ring does it but through
 * shared memory instead of links:
 *   1. publish   rank r stores its buffer's address; barrier
 *   2. reduce-scatter   rank r owns chunk r = [r·n/K, (r+1)·n/K) and sums it
 *                over all K buffers, in rank order b0 + b1 + ... + b(K-1),
 *                into its own buffer's chunk r; barrier
 *   3. all-gather rank r copies chunk j from buffer j for every j != r;
 *                barrier (nobody may touch its buffer, which others still
 *                read, before every copy is done)
 * Each rank reads K·n/K + (K-1)·n/K elements and writes n: the work is split
 * K ways like a ring's, and the result's bits do not depend on which thread
 * got there first. Writes never collide: in step 2 rank r writes only chunk r
 * of its own buffer, which no other rank reads until step 3; in step 3 it
 * writes only the chunks j != r of its own buffer, which nobody reads.
 *
 * DESIGN (threads): the barrier is a pthread barrier (threads sleep in it,
 * like cpu_pool's workers, so a waiting rank leaves the core to a working
 * one on a small machine). Every rank must call each collective once, in the
 * same order, with the same count; eng_comm_allreduce_group does the same
 * sum on one thread for callers that drive all ranks themselves.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "common.h"

typedef struct host_comm {
    eng_comm base;
    pthread_barrier_t bar;
    float **bufs;            /* (ranks) published by each rank in step 1 */
} host_comm;

static int host_wait(host_comm *h)
{
    int rc = pthread_barrier_wait(&h->bar);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
        snprintf(h->base.last_error, sizeof h->base.last_error, "host comm: barrier: %s",
                 strerror(rc));
        return LL_ESYS;
    }
    return 0;
}

static void chunk_of(size_t count, int ranks, int r, size_t *lo, size_t *hi)
{
    *lo = count * (size_t)r / (size_t)ranks;
    *hi = count * (size_t)(r + 1) / (size_t)ranks;
}

static int host_allreduce(eng_comm *c, int rank, float *buf, size_t count, void *stream)
{
    (void)stream;
    host_comm *h = (host_comm *)c;
    int k = c->ranks;
    if (k == 1)
        return 0;
    h->bufs[rank] = buf;
    int rc = host_wait(h);
    if (rc)
        return rc;
    size_t lo, hi;
    chunk_of(count, k, rank, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float acc = h->bufs[0][i];
        for (int j = 1; j < k; j++)
            acc += h->bufs[j][i];
        buf[i] = acc;
    }
    if ((rc = host_wait(h)))
        return rc;
    for (int j = 0; j < k; j++) {
        if (j == rank)
            continue;
        chunk_of(count, k, j, &lo, &hi);
        if (hi > lo)
            memcpy(buf + lo, h->bufs[j] + lo, (hi - lo) * sizeof(float));
    }
    return host_wait(h);
}

static int host_allreduce_group(eng_comm *c, float *const *bufs, size_t count,
                                void *const *streams)
{
    (void)streams;
    int k = c->ranks;
    for (size_t i = 0; i < count; i++) {
        float acc = bufs[0][i];
        for (int j = 1; j < k; j++)
            acc += bufs[j][i];
        for (int j = 0; j < k; j++)
            bufs[j][i] = acc;
    }
    return 0;
}

static int host_barrier(eng_comm *c, int rank)
{
    (void)rank;
    return c->ranks == 1 ? 0 : host_wait((host_comm *)c);
}

static void host_destroy(eng_comm *c)
{
    host_comm *h = (host_comm *)c;
    pthread_barrier_destroy(&h->bar);
    free(h->bufs);
    free(h);
}

static const eng_comm_ops host_ops = {
    .name = "host",
    .allreduce = host_allreduce,
    .allreduce_group = host_allreduce_group,
    .barrier = host_barrier,
    .destroy = host_destroy,
};

int eng_comm_host_create(int ranks, eng_comm **out, char *err, size_t errlen)
{
    *out = NULL;
    if (ranks < 1 || ranks > 1024) {
        ll_errf(err, errlen, "host comm: ranks must be in [1, 1024], got %d", ranks);
        return LL_EINVAL;
    }
    host_comm *h = calloc(1, sizeof *h);
    float **bufs = calloc((size_t)ranks, sizeof *bufs);
    if (!h || !bufs) {
        free(h);
        free(bufs);
        ll_errf(err, errlen, "host comm: out of memory");
        return LL_ENOMEM;
    }
    int rc = pthread_barrier_init(&h->bar, NULL, (unsigned)ranks);
    if (rc != 0) {
        free(h);
        free(bufs);
        ll_errf(err, errlen, "host comm: pthread_barrier_init: %s", strerror(rc));
        return LL_ESYS;
    }
    h->base.ops = &host_ops;
    h->base.ranks = ranks;
    h->bufs = bufs;
    *out = &h->base;
    return 0;
}

/* ---- dispatch, shared by every implementation ---- */

void eng_comm_destroy(eng_comm *c)
{
    if (c)
        c->ops->destroy(c);
}

const char *eng_comm_name(const eng_comm *c) { return c->ops->name; }
int eng_comm_ranks(const eng_comm *c) { return c->ranks; }
const char *eng_comm_last_error(const eng_comm *c) { return c->last_error; }

int eng_comm_allreduce(eng_comm *c, int rank, float *buf, size_t count, void *stream)
{
    if (rank < 0 || rank >= c->ranks || (!buf && count > 0)) {
        snprintf(c->last_error, sizeof c->last_error, "%s comm: bad all-reduce arguments (rank %d)",
                 c->ops->name, rank);
        return LL_EINVAL;
    }
    return c->ops->allreduce(c, rank, buf, count, stream);
}

int eng_comm_allreduce_group(eng_comm *c, float *const *bufs, size_t count, void *const *streams)
{
    for (int r = 0; r < c->ranks; r++)
        if (!bufs || (!bufs[r] && count > 0)) {
            snprintf(c->last_error, sizeof c->last_error, "%s comm: bad group all-reduce buffers",
                     c->ops->name);
            return LL_EINVAL;
        }
    return c->ops->allreduce_group(c, bufs, count, streams);
}

int eng_comm_check(eng_comm *c)
{
    return c->ops->check ? c->ops->check(c) : 0;
}

void eng_comm_abort(eng_comm *c)
{
    if (c->ops->abort)
        c->ops->abort(c);
}

int eng_comm_barrier(eng_comm *c, int rank)
{
    if (rank < 0 || rank >= c->ranks || !c->ops->barrier) {
        snprintf(c->last_error, sizeof c->last_error, "%s comm: no barrier for rank %d",
                 c->ops->name, rank);
        return LL_EINVAL;
    }
    return c->ops->barrier(c, rank);
}
