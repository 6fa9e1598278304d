/* test_cuda_tp_host.c: the cuda backend's tp=K decisions on the host
 * (engine/cuda/cuda_tp.h), on any machine (no GPU, no NCCL):
 *   - device mapping: rank r on device+r; too few devices is an error that
 *     names the devices and NCCL_MULTI_RANK_GPU_ENABLE; with it set, the
 *     ranks wrap onto the devices there are (one GPU: all on it);
 *   - shards: heads split evenly; each rank's column list holds every column
 *     its heads' query windows read and the 576 KV columns, each once, and
 *     the column map inverts it; the shards are narrower than d_ff at the
 *     default sizes (column-parallel); tp=1 holds the whole of d_ff;
 *   - the backend refuses tp > CUDA_TP_MAX and heads % tp != 0 cleanly
 *     (before looking for a device);
 *   - waiting for a step's ranks (cuda_tp_wait) reports a rank that failed
 *     while a peer still runs (that peer would wait in the all-reduce
 *     forever), and a communicator error, instead of waiting on rank 0. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cuda_tp.h"
#include "testutil.h"

static void test_devices(void)
{
    int d[CUDA_TP_MAX];
    char why[512];
    CHECK(cuda_tp_devices(0, 2, 2, 0, d, why, sizeof why) == 0 && d[0] == 0 && d[1] == 1,
          "2 ranks on 2 GPUs: %d,%d", d[0], d[1]);
    CHECK(cuda_tp_devices(1, 2, 4, 0, d, why, sizeof why) == 0 && d[0] == 1 && d[1] == 2,
          "device=1 tp=2: %d,%d", d[0], d[1]);
    CHECK(cuda_tp_devices(0, 4, 4, 0, d, why, sizeof why) == 0 && d[3] == 3, "4 on 4");
    why[0] = '\0';
    CHECK(cuda_tp_devices(0, 2, 1, 0, d, why, sizeof why) != 0 &&
              strstr(why, "NCCL_MULTI_RANK_GPU_ENABLE") && strstr(why, "0..1"),
          "2 ranks, 1 GPU, no multi-rank: %s", why);
    CHECK(cuda_tp_devices(0, 2, 1, 1, d, why, sizeof why) == 0 && d[0] == 0 && d[1] == 0,
          "2 ranks on 1 GPU with NCCL_MULTI_RANK_GPU_ENABLE=1: %d,%d", d[0], d[1]);
    CHECK(cuda_tp_devices(1, 4, 3, 1, d, why, sizeof why) == 0 && d[0] == 1 && d[1] == 2 &&
              d[2] == 1 && d[3] == 2,
          "4 ranks wrap over devices 1..2: %d,%d,%d,%d", d[0], d[1], d[2], d[3]);
    CHECK(cuda_tp_devices(3, 1, 2, 1, d, why, sizeof why) != 0 && strstr(why, "device=3"),
          "device past the machine: %s", why);
    CHECK(cuda_tp_devices(0, CUDA_TP_MAX + 1, 8, 0, d, why, sizeof why) != 0 && strstr(why, "tp"),
          "too many ranks: %s", why);
    char buf[32];
    int dd[3] = {0, 0, 12};
    CHECK(strcmp(cuda_tp_devices_str(dd, 3, buf, sizeof buf), "0,0,12") == 0, "list: %s", buf);
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    CHECK(cuda_tp_multi_rank_env() == 1, "env 1");
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "0", 1);
    CHECK(cuda_tp_multi_rank_env() == 0, "env 0");
    unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
    CHECK(cuda_tp_multi_rank_env() == 0, "env unset");
}

/* Every column rank r needs is held once, and colmap inverts cols. */
static void check_shard(int heads, int d_ff, int tp)
{
    int32_t *cols = malloc((size_t)d_ff * 4), *map = malloc((size_t)d_ff * 4);
    int *seen_head = calloc((size_t)heads, sizeof *seen_head);
    long total = 0;
    for (int r = 0; r < tp; r++) {
        int h0 = -1, h1 = -1, nc = -1;
        int rc = cuda_tp_shard(heads, d_ff, tp, r, &h0, &h1, cols, &nc, map);
        CHECK(rc == 0, "shard H=%d d_ff=%d tp=%d r=%d", heads, d_ff, tp, r);
        if (rc)
            continue;
        CHECK(h0 == r * heads / tp && h1 == (r + 1) * heads / tp, "heads [%d,%d)", h0, h1);
        for (int h = h0; h < h1; h++)
            seen_head[h]++;
        CHECK(nc >= CUDA_TP_Q_WIDTH && nc <= d_ff, "ncols %d of %d", nc, d_ff);
        int bad_map = 0, missing = 0;
        for (int lc = 0; lc < nc; lc++)
            bad_map += cols[lc] < 0 || cols[lc] >= d_ff || map[cols[lc]] != lc;
        int held = 0;
        for (int c = 0; c < d_ff; c++)
            held += map[c] >= 0;
        CHECK(bad_map == 0 && held == nc, "map inverts cols (%d bad, %d held of %d)", bad_map, held,
              nc);
        for (int h = h0; h < h1; h++)
            for (int j = 0; j < CUDA_TP_Q_WIDTH; j++)
                missing += map[(int)(((long)h * CUDA_TP_Q_STRIDE + j) % d_ff)] < 0;
        for (int j = 0; j < CUDA_TP_Q_WIDTH; j++)
            missing += map[j] < 0;
        CHECK(missing == 0, "H=%d d_ff=%d tp=%d rank %d: %d needed columns missing", heads, d_ff,
              tp, r, missing);
        total += nc;
        if (tp == 1)
            CHECK(nc == d_ff || nc == (heads - 1) * CUDA_TP_Q_STRIDE + CUDA_TP_Q_WIDTH,
                  "tp=1 holds the window of every head: %d", nc);
    }
    int heads_once = 1;
    for (int h = 0; h < heads; h++)
        heads_once &= seen_head[h] == 1;
    CHECK(heads_once, "every head on exactly one rank (H=%d tp=%d)", heads, tp);
    printf("H=%d d_ff=%d tp=%d: %ld W columns over the ranks (%.2f x d_ff)\n", heads, d_ff, tp,
           total, (double)total / d_ff);
    free(cols);
    free(map);
    free(seen_head);
}

static void test_shards(void)
{
    check_shard(64, 8192, 1);
    check_shard(64, 8192, 2);
    check_shard(64, 8192, 4);
    check_shard(16, 1024, 2); /* the GPU test's sizes: windows wrap around d_ff */
    check_shard(16, 1024, 4);
    check_shard(4, 576, 2);   /* d_ff = one window */
    check_shard(64, 4096, 2);
    check_shard(128, 600, 4);
    /* default sizes: each rank's GEMM is well under the whole W */
    int32_t cols[8192];
    int h0, h1, nc0, nc1;
    cuda_tp_shard(64, 8192, 2, 0, &h0, &h1, cols, &nc0, NULL);
    cuda_tp_shard(64, 8192, 2, 1, &h0, &h1, cols, &nc1, NULL);
    CHECK(nc0 == 31 * 97 + 576 && nc1 == 31 * 97 + 576 + 576,
          "tp=2 at 64 heads, d_ff 8192: %d and %d columns", nc0, nc1);
    CHECK(cuda_tp_shard(64, 8192, 3, 0, &h0, &h1, cols, &nc0, NULL) != 0, "3 does not divide 64");
    CHECK(cuda_tp_shard(64, 8192, 2, 2, &h0, &h1, cols, &nc0, NULL) != 0, "rank out of range");
    CHECK(cuda_tp_shard(64, 500, 2, 0, &h0, &h1, cols, &nc0, NULL) != 0, "d_ff < 576");
}

/* The options are checked before a device is looked for: these errors come
 * the same on a machine with or without a GPU. */
static void test_options(void)
{
    eng_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heads = 16;
    cfg.topk = 96;
    cfg.max_running = 8;
    cfg.d_model = 256;
    cfg.d_ff = 1024;
    cfg.vocab = 64;
    cfg.capacity_tok = 512;
    cfg.min_ctx_tok = -1;
    void *st = NULL;
    char err[512] = "";
    cfg.tp = CUDA_TP_MAX + 1;
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL &&
              strstr(err, "tp must be in"),
          "tp too large: %s", err);
    cfg.tp = 3;
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL &&
              strstr(err, "divide heads"),
          "tp=3 with 16 heads: %s", err);
}

/* A scripted step: rank r is running until poll done_at[r], then done, or
 * fails from poll fail_at[r]; the communicator fails from check comm_at.
 * -1 = never. A rank still running after 10,000 polls "fails", so a wait
 * that only watched rank 0 would end with the wrong rank, not hang. */
typedef struct script {
    int done_at[CUDA_TP_MAX], fail_at[CUDA_TP_MAX], comm_at;
    int polls[CUDA_TP_MAX], checks, pauses;
} script;

static int s_query(void *ctx, int r)
{
    script *s = ctx;
    int k = s->polls[r]++;
    if (s->fail_at[r] >= 0 && k >= s->fail_at[r])
        return -1;
    if (s->done_at[r] >= 0 && k >= s->done_at[r])
        return 0;
    return k >= 10000 ? -1 : 1;
}
static int s_comm(void *ctx)
{
    script *s = ctx;
    return s->comm_at >= 0 && s->checks++ >= s->comm_at;
}
static void s_pause(void *ctx) { ((script *)ctx)->pauses++; }

static int run_wait(script *s, int tp, int *rank)
{
    cuda_tp_waiter w = {.query = s_query, .comm_failed = s_comm, .pause = s_pause, .ctx = s};
    *rank = -1;
    return cuda_tp_wait(&w, tp, rank);
}

static void test_wait(void)
{
    int rank;
    script a = {.done_at = {3, 5}, .fail_at = {-1, -1}, .comm_at = -1};
    CHECK(run_wait(&a, 2, &rank) == CUDA_TP_WAIT_DONE && a.pauses == 5 && rank == -1,
          "both ranks finish: done after %d pauses (5), rank %d", a.pauses, rank);
    /* rank 0 waits in the all-reduce for rank 1, which faulted at its 4th poll */
    script b = {.done_at = {-1, -1}, .fail_at = {-1, 3}, .comm_at = -1};
    CHECK(run_wait(&b, 2, &rank) == CUDA_TP_WAIT_RANK && rank == 1 && b.pauses == 3,
          "a peer's fault while rank 0 still runs: rank %d (1) after %d pauses (3)", rank, b.pauses);
    script c = {.done_at = {-1, -1, -1, -1}, .fail_at = {-1, -1, -1, -1}, .comm_at = 2};
    CHECK(run_wait(&c, 4, &rank) == CUDA_TP_WAIT_COMM && c.pauses == 2 && rank == -1,
          "NCCL's asynchronous error: after %d pauses (2)", c.pauses);
    /* a failed rank is named even when the communicator failed too */
    script d = {.done_at = {0, -1}, .fail_at = {-1, 0}, .comm_at = 0};
    CHECK(run_wait(&d, 2, &rank) == CUDA_TP_WAIT_RANK && rank == 1 && d.checks == 0,
          "rank and comm both failed: rank %d, %d checks", rank, d.checks);
    /* done ranks are fine while another finishes later; tp=1 never checks the comm early */
    script e = {.done_at = {0}, .fail_at = {-1}, .comm_at = 0};
    CHECK(run_wait(&e, 1, &rank) == CUDA_TP_WAIT_DONE && e.checks == 0 && e.pauses == 0,
          "one rank already done: no check, no pause");
}

int main(void)
{
    test_devices();
    test_wait();
    test_shards();
    test_options();
    TEST_MAIN_END();
}
