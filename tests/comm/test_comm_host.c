/* test_comm_host.c: the host communicator's all-reduce against a serial sum,
 * for K = 1..4 rank threads, many repetitions with a fresh seeded payload and
 * a varying length each time (a race shows as a wrong element), plus the
 * one-thread group form and the barrier.
 *
 * The host sum of element i is b0 + b1 + ... + b(K-1) in rank order on every
 * rank, so the serial sum in that order must match to the bit, for integer-
 * valued floats and for arbitrary ones alike; every rank must hold the same
 * bits. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common.h"
#include "splitmix.h"
#include "testutil.h"

#define MAX_K 4
#define MAX_N 5003
#define REPS 400

/* rep's payload of rank r, element i: integers in [-1000, 1000] on even
 * reps, uniform floats in [-1, 1) scaled by up to 2^10 on odd ones. */
static float value(int rep, int r, size_t i)
{
    uint64_t h = ll_splitmix64(((uint64_t)rep << 40) ^ ((uint64_t)r << 32) ^ i);
    if (rep % 2 == 0)
        return (float)((int64_t)(h % 2001) - 1000);
    float u = (float)((int64_t)(h >> 11) - (1ll << 52)) / (float)(1ll << 52);
    return u * (float)(1 << (h & 10));
}

static size_t count_of(int rep) { return rep % 7 == 0 ? (size_t)rep % 5 : 1 + ll_splitmix64((uint64_t)rep) % MAX_N; }

typedef struct rank_arg {
    eng_comm *c;
    int rank, k;
    float *buf;
    int bad_elems, bad_rc;
} rank_arg;

static void *rank_main(void *v)
{
    rank_arg *a = v;
    for (int rep = 0; rep < REPS; rep++) {
        size_t n = count_of(rep);
        for (size_t i = 0; i < n; i++)
            a->buf[i] = value(rep, a->rank, i);
        if (eng_comm_allreduce(a->c, a->rank, a->buf, n, NULL) != 0) {
            a->bad_rc++;
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            float want = value(rep, 0, i);
            for (int j = 1; j < a->k; j++)
                want += value(rep, j, i);
            if (memcmp(&want, &a->buf[i], sizeof want) != 0)
                a->bad_elems++;
        }
        /* no barrier here: the next rep writes this buffer at once, which
         * is safe only because the all-reduce's last barrier waits until
         * every rank has copied its chunks out of it */
    }
    if (eng_comm_barrier(a->c, a->rank) != 0)
        a->bad_rc++;
    return NULL;
}

static void test_threads(int k)
{
    eng_comm *c = NULL;
    char err[256] = "";
    int rc = eng_comm_host_create(k, &c, err, sizeof err);
    CHECK(rc == 0, "host create K=%d: %s", k, err);
    if (rc)
        return;
    CHECK(strcmp(eng_comm_name(c), "host") == 0 && eng_comm_ranks(c) == k, "name/ranks");
    pthread_t tid[MAX_K];
    rank_arg args[MAX_K];
    for (int r = 0; r < k; r++) {
        args[r] = (rank_arg){.c = c, .rank = r, .k = k, .buf = malloc(MAX_N * sizeof(float))};
        CHECK(args[r].buf != NULL, "malloc");
    }
    for (int r = 1; r < k; r++)
        CHECK(pthread_create(&tid[r], NULL, rank_main, &args[r]) == 0, "pthread_create");
    rank_main(&args[0]);
    for (int r = 1; r < k; r++)
        pthread_join(tid[r], NULL);
    for (int r = 0; r < k; r++) {
        CHECK(args[r].bad_rc == 0, "K=%d rank %d: a collective failed: %s", k, r,
              eng_comm_last_error(c));
        CHECK(args[r].bad_elems == 0, "K=%d rank %d: %d elements differ from the serial sum", k,
              r, args[r].bad_elems);
        free(args[r].buf);
    }
    printf("host all-reduce K=%d: %d reps, lengths 0..%d, exact\n", k, REPS, MAX_N);
    eng_comm_destroy(c);
}

static void test_group(int k)
{
    eng_comm *c = NULL;
    char err[256] = "";
    CHECK(eng_comm_host_create(k, &c, err, sizeof err) == 0, "create: %s", err);
    if (!c)
        return;
    enum { N = 777 };
    static float b[MAX_K][N];
    float *bufs[MAX_K];
    int bad = 0;
    for (int rep = 0; rep < 20; rep++) {
        for (int r = 0; r < k; r++) {
            bufs[r] = b[r];
            for (size_t i = 0; i < N; i++)
                b[r][i] = value(rep, r, i);
        }
        CHECK(eng_comm_allreduce_group(c, bufs, N, NULL) == 0, "group: %s", eng_comm_last_error(c));
        for (size_t i = 0; i < N; i++) {
            float want = value(rep, 0, i);
            for (int j = 1; j < k; j++)
                want += value(rep, j, i);
            for (int r = 0; r < k; r++)
                bad += memcmp(&want, &b[r][i], sizeof want) != 0;
        }
    }
    CHECK(bad == 0, "group K=%d: %d elements differ", k, bad);
    eng_comm_destroy(c);
}

int main(void)
{
    for (int k = 1; k <= MAX_K; k++) {
        test_threads(k);
        test_group(k);
    }
    eng_comm *c = NULL;
    char err[256] = "";
    CHECK(eng_comm_host_create(0, &c, err, sizeof err) == LL_EINVAL && c == NULL, "K=0 refused");
    CHECK(strstr(err, "ranks") != NULL, "message names ranks: %s", err);
    CHECK(eng_comm_host_create(2, &c, err, sizeof err) == 0, "create");
    float x = 1;
    CHECK(eng_comm_allreduce(c, 2, &x, 1, NULL) == LL_EINVAL, "rank out of range refused");
    CHECK(strstr(eng_comm_last_error(c), "rank 2") != NULL, "says which: %s", eng_comm_last_error(c));
    /* host collectives fail in the call: nothing asynchronous to report,
     * nothing to abort (the comm still works after) */
    CHECK(eng_comm_check(c) == 0, "host check");
    eng_comm_abort(c);
    float y = 3, *xs[2] = {&x, &y};
    x = 1;
    CHECK(eng_comm_allreduce_group(c, xs, 1, NULL) == 0 && x == 4 && y == 4,
          "host comm after abort: %g %g", x, y);
    eng_comm_destroy(c);
    TEST_MAIN_END();
}
