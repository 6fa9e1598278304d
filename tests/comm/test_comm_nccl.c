/* test_comm_nccl.c: the NCCL communicator through dlopen.
 *   load       a missing library fails with LL_EIO and a message naming the
 *              path and LOADLAW_NCCL_LIB; where libnccl.so.2 loads (the
 *              loader's path, $LOADLAW_NCCL_LIB, or the toolkit's copy found at
 *              configure time), ncclGetVersion answers and is printed.
 *              Skips (77) only when no NCCL is installed at all.
 *   allreduce [K]  K ranks (default: every GPU, at most 4; K > GPUs puts
 *              rank r on GPU r % GPUs: NCCL_MULTI_RANK_GPU_ENABLE=1, 2.30+),
 *              one communicator each,
 *              ncclAllReduce inside ncclGroupStart/End on device buffers,
 *              checked against the serial sum (integers: exact). The CUDA
 *              runtime is dlopen'ed too, so this builds without a toolkit.
 *              Skips (77) with the reason where there is no GPU. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common.h"
#include "testutil.h"

static const char *const nccl_candidates[] = {
    NULL, /* $LOADLAW_NCCL_LIB or the loader's "libnccl.so.2" */
#ifdef LOADLAW_TOOLKIT_NCCL
    LOADLAW_TOOLKIT_NCCL,
#endif
};
#define N_CAND (sizeof nccl_candidates / sizeof nccl_candidates[0])

/* The first candidate that loads, or -1. */
static int find_nccl(int *version)
{
    char err[512];
    for (size_t i = 0; i < N_CAND; i++)
        if (eng_comm_nccl_version(nccl_candidates[i], version, err, sizeof err) == 0)
            return (int)i;
        else
            printf("  %s\n", err);
    return -1;
}

static int test_load(void)
{
    char err[512] = "";
    int v = 0;
    int rc = eng_comm_nccl_version("/nonexistent/libnccl.so.2", &v, err, sizeof err);
    CHECK(rc == LL_EIO, "missing library: rc %d", rc);
    CHECK(strstr(err, "/nonexistent/libnccl.so.2") && strstr(err, "LOADLAW_NCCL_LIB"),
          "message names the path and the override: %s", err);
    printf("missing library: %s\n", err);
    eng_comm *c = NULL;
    rc = eng_comm_nccl_create(1, NULL, "/nonexistent/libnccl.so.2", &c, err, sizeof err);
    CHECK(rc == LL_EIO && c == NULL, "create with a missing library: rc %d", rc);
    /* a library that loads but is not NCCL: libc has no ncclGetVersion */
    rc = eng_comm_nccl_version("libc.so.6", &v, err, sizeof err);
    CHECK(rc == LL_EIO && strstr(err, "ncclGetVersion"), "not NCCL: %s", err);

    int i = find_nccl(&v);
    if (i < 0) {
        printf("SKIP: no libnccl.so.2 loads here (set LOADLAW_NCCL_LIB)\n");
        return tu_fail ? 1 : TEST_SKIP;
    }
    printf("NCCL %d.%d.%d loaded from %s\n", v / 10000, v / 100 % 100, v % 100,
           nccl_candidates[i] ? nccl_candidates[i] : "the loader's path / LOADLAW_NCCL_LIB");
    CHECK(v >= 20000, "version %d looks like NCCL 2", v);
    TEST_MAIN_END();
}

/* The CUDA runtime calls this test makes, through dlopen. */
typedef struct cudart {
    void *dl;
    int (*get_device_count)(int *);
    int (*set_device)(int);
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int);
    int (*device_synchronize)(void);
} cudart;

static int load_cudart(cudart *c)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                        "/usr/local/cuda/lib64/libcudart.so"};
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !c->dl; i++)
        c->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!c->dl)
        return -1;
    void *f[6] = {dlsym(c->dl, "cudaGetDeviceCount"), dlsym(c->dl, "cudaSetDevice"),
                  dlsym(c->dl, "cudaMalloc"), dlsym(c->dl, "cudaFree"),
                  dlsym(c->dl, "cudaMemcpy"), dlsym(c->dl, "cudaDeviceSynchronize")};
    for (int i = 0; i < 6; i++)
        if (!f[i])
            return -1;
    memcpy(&c->get_device_count, &f[0], sizeof f[0]);
    memcpy(&c->set_device, &f[1], sizeof f[1]);
    memcpy(&c->malloc_, &f[2], sizeof f[2]);
    memcpy(&c->free_, &f[3], sizeof f[3]);
    memcpy(&c->memcpy_, &f[4], sizeof f[4]);
    memcpy(&c->device_synchronize, &f[5], sizeof f[5]);
    return 0;
}

/* want_k: ranks to make (0: every GPU, at most 4, or two on one GPU where
 * NCCL_MULTI_RANK_GPU_ENABLE=1). With more ranks than GPUs, rank r goes on
 * GPU r % ndev, which needs NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL 2.30+). */
static int test_allreduce(int want_k)
{
    int v = 0;
    int i = find_nccl(&v);
    if (i < 0) {
        printf("SKIP: no libnccl.so.2 loads here\n");
        return TEST_SKIP;
    }
    cudart cu;
    int ndev = 0;
    if (load_cudart(&cu) != 0 || cu.get_device_count(&ndev) != 0 || ndev < 1) {
        printf("SKIP: no GPU (CUDA runtime %s, %d devices): the NCCL all-reduce needs one\n",
               cu.dl ? "loaded" : "not found", ndev);
        return TEST_SKIP;
    }
    int k = ndev < 4 ? ndev : 4;
    /* Two ranks on one GPU: NCCL 2.30+ with NCCL_MULTI_RANK_GPU_ENABLE=1 only. */
    const char *multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    int multi_on = multi && strcmp(multi, "1") == 0;
    int devs[4] = {0, 1, 2, 3};
    if (want_k > 0) {
        if (want_k > ndev && !multi_on) {
            printf("SKIP: %d ranks need %d GPUs (this machine has %d) or "
                   "NCCL_MULTI_RANK_GPU_ENABLE=1\n", want_k, want_k, ndev);
            return TEST_SKIP;
        }
        k = want_k;
        for (int r = 0; r < k; r++)
            devs[r] = r % ndev;
    } else if (ndev == 1 && multi_on) {
        k = 2;
        devs[1] = 0;
    }
    char dl[32] = "";
    for (int r = 0; r < k; r++)
        snprintf(dl + strlen(dl), sizeof dl - strlen(dl), r ? ",%d" : "%d", devs[r]);
    printf("NCCL %d: %d rank(s) on GPU(s) %s (NCCL_MULTI_RANK_GPU_ENABLE=%s)\n", v, k, dl,
           multi ? multi : "unset");
    fflush(stdout);
    eng_comm *c = NULL;
    char err[512] = "";
    int rc = eng_comm_nccl_create(k, devs, nccl_candidates[i], &c, err, sizeof err);
    CHECK(rc == 0, "ncclCommInitAll over %d rank(s): %s", k, err);
    if (rc)
        TEST_MAIN_END();
    enum { N = 1 << 16 };
    float *host = malloc(N * sizeof(float)), *want = calloc(N, sizeof(float));
    float *dev[4] = {0};
    for (int r = 0; r < k; r++) {
        cu.set_device(devs[r]);
        CHECK(cu.malloc_((void **)&dev[r], N * sizeof(float)) == 0, "cudaMalloc");
        for (int j = 0; j < N; j++) {
            host[j] = (float)((j * 7 + r * 13) % 101 - 50);
            want[j] += host[j];
        }
        CHECK(cu.memcpy_(dev[r], host, N * sizeof(float), 1 /* HostToDevice */) == 0, "copy in");
    }
    rc = eng_comm_allreduce_group(c, dev, N, NULL);
    CHECK(rc == 0, "group all-reduce: %s", eng_comm_last_error(c));
    int bad = 0;
    for (int r = 0; r < k; r++) {
        cu.set_device(devs[r]);
        cu.device_synchronize();
        CHECK(cu.memcpy_(host, dev[r], N * sizeof(float), 2 /* DeviceToHost */) == 0, "copy out");
        for (int j = 0; j < N; j++)
            bad += host[j] != want[j];
        cu.free_(dev[r]);
    }
    CHECK(bad == 0, "%d elements differ from the serial sum", bad);
    printf("NCCL %d all-reduce over %d rank(s) on %d GPU(s): %s\n", v, k, ndev,
           bad ? "WRONG" : "exact");
    /* after a clean collective NCCL reports no asynchronous error; once
     * aborted (what a step does when a rank fails) the comm refuses work */
    CHECK(eng_comm_check(c) == 0, "no asynchronous error: %s", eng_comm_last_error(c));
    eng_comm_abort(c);
    float dummy = 0, *one[4] = {&dummy, &dummy, &dummy, &dummy}; /* count 0: never read */
    CHECK(eng_comm_allreduce_group(c, one, 0, NULL) == LL_EINVAL &&
              strstr(eng_comm_last_error(c), "aborted"),
          "after ncclCommAbort: %s", eng_comm_last_error(c));
    CHECK(eng_comm_check(c) != 0, "an aborted comm reports it");
    free(host);
    free(want);
    eng_comm_destroy(c);
    TEST_MAIN_END();
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "load") == 0)
        return test_load();
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "allreduce") == 0) {
        int k = argc == 3 ? atoi(argv[2]) : 0;
        if (argc == 3 && (k < 1 || k > 4)) {
            fprintf(stderr, "test_comm_nccl allreduce [K]: K in [1, 4]\n");
            return 2;
        }
        return test_allreduce(k);
    }
    fprintf(stderr, "usage: test_comm_nccl load | allreduce [K]\n");
    return 2;
}
