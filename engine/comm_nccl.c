/* comm_nccl.c: the "nccl" communicator, one process driving K GPUs.
 *
 * NCCL is loaded at run time with dlopen ("libnccl.so.2", or the path in
 * $LOADLAW_NCCL_LIB / the caller's lib), so a machine can use a newer NCCL
 * than the toolkit's (NCCL 2.30+ puts two ranks on one GPU with
 * NCCL_MULTI_RANK_GPU_ENABLE=1; the toolkit here ships 2.28.9) and this file
 * builds with or without CUDA: it declares the few NCCL types and prototypes
 * it uses instead of including nccl.h (the values below are nccl.h 2.28's,
 * stable since NCCL 2.0: ncclSum = 0, ncclFloat32 = 7, a 128-byte unique id;
 * cudaStream_t is an opaque pointer). It is always compiled; only running a
 * collective needs a GPU.
 *
 * Communicators: ncclCommInitAll(comms, K, devices), one per GPU, rank r on
 * devices[r]. eng_comm_allreduce_group issues the K ncclAllReduce calls
 * between ncclGroupStart and ncclGroupEnd (one thread driving every GPU
 * must group them, or the first call would wait for peers never launched);
 * eng_comm_allreduce is the one-thread-per-GPU form. Both only enqueue on
 * the given streams: the caller synchronises them, and while it waits asks
 * eng_comm_check (ncclCommGetAsyncError) whether NCCL failed behind its
 * back; when a rank fails, eng_comm_abort (ncclCommAbort) ends the peers'
 * collective kernels, which would otherwise wait for it forever. In a profiler trace the
 * kernel appears as ncclDevKernel_AllReduce_Sum_f32_RING_LL (or _LL128 /
 * _SIMPLE, NCCL's protocol choice), the name `loadlaw trace` files under
 * "communication" (as it does the cpu backend's "all_reduce" phase).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "common.h"

/* nccl.h's types, as far as this file uses them. */
typedef struct nccl_comm_opaque *nccl_comm_t;
typedef int nccl_result_t;            /* ncclResult_t: 0 = ncclSuccess */
typedef struct { char internal[128]; } nccl_unique_id;
enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7, NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

typedef struct nccl_lib {
    void *dl;
    nccl_result_t (*get_version)(int *version);
    nccl_result_t (*get_unique_id)(nccl_unique_id *id);
    nccl_result_t (*comm_init_all)(nccl_comm_t *comms, int ndev, const int *devlist);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int datatype, int op,
                                nccl_comm_t comm, void *stream);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*comm_get_async_error)(nccl_comm_t comm, nccl_result_t *async_error);
    const char *(*error_string)(nccl_result_t r);
} nccl_lib;

typedef struct nccl_comm {
    eng_comm base;
    nccl_lib lib;
    nccl_comm_t *comms;  /* (ranks); NULL entries after an abort */
    int aborted;
} nccl_comm;

static const char *lib_path(const char *lib)
{
    if (lib && *lib)
        return lib;
    const char *env = getenv("LOADLAW_NCCL_LIB");
    return env && *env ? env : "libnccl.so.2";
}

static void nccl_unload(nccl_lib *l)
{
    if (l->dl)
        dlclose(l->dl);
    memset(l, 0, sizeof *l);
}

/* dlopen the library and resolve every symbol this file calls. */
static int nccl_load(const char *lib, nccl_lib *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    const char *path = lib_path(lib);
    l->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!l->dl) {
        const char *why = dlerror();
        ll_errf(err, errlen, "nccl: cannot load '%s' (%s); install NCCL or set LOADLAW_NCCL_LIB "
                "to the path of libnccl.so.2", path, why ? why : "dlopen failed");
        return LL_EIO;
    }
    static const struct { const char *name; size_t off; } syms[] = {
        {"ncclGetVersion", offsetof(nccl_lib, get_version)},
        {"ncclGetUniqueId", offsetof(nccl_lib, get_unique_id)},
        {"ncclCommInitAll", offsetof(nccl_lib, comm_init_all)},
        {"ncclAllReduce", offsetof(nccl_lib, all_reduce)},
        {"ncclGroupStart", offsetof(nccl_lib, group_start)},
        {"ncclGroupEnd", offsetof(nccl_lib, group_end)},
        {"ncclCommDestroy", offsetof(nccl_lib, comm_destroy)},
        {"ncclCommAbort", offsetof(nccl_lib, comm_abort)},
        {"ncclCommGetAsyncError", offsetof(nccl_lib, comm_get_async_error)},
        {"ncclGetErrorString", offsetof(nccl_lib, error_string)},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(l->dl, syms[i].name);
        if (!f) {
            ll_errf(err, errlen, "nccl: '%s' has no symbol %s (not an NCCL 2 library?)", path,
                    syms[i].name);
            nccl_unload(l);
            return LL_EIO;
        }
        /* POSIX: a function pointer round-trips through void * (dlsym's contract) */
        memcpy((char *)l + syms[i].off, &f, sizeof f);
    }
    return 0;
}

static const char *nccl_msg(const nccl_lib *l, nccl_result_t r)
{
    const char *s = l->error_string ? l->error_string(r) : NULL;
    return s ? s : "unknown NCCL error";
}

int eng_comm_nccl_version(const char *lib, int *version, char *err, size_t errlen)
{
    nccl_lib l;
    int rc = nccl_load(lib, &l, err, errlen);
    if (rc)
        return rc;
    nccl_result_t r = l.get_version(version);
    if (r != NCCL_SUCCESS) {
        ll_errf(err, errlen, "nccl: ncclGetVersion: %s", nccl_msg(&l, r));
        rc = LL_ESYS;
    }
    nccl_unload(&l);
    return rc;
}

static int nccl_fail(nccl_comm *n, const char *what, nccl_result_t r)
{
    snprintf(n->base.last_error, sizeof n->base.last_error, "nccl: %s: %s", what,
             nccl_msg(&n->lib, r));
    return LL_ESYS;
}

static int nccl_aborted(nccl_comm *n)
{
    snprintf(n->base.last_error, sizeof n->base.last_error,
             "nccl: the communicators were aborted after a failure; no more collectives");
    return LL_EINVAL;
}

static int nccl_allreduce(eng_comm *c, int rank, float *buf, size_t count, void *stream)
{
    nccl_comm *n = (nccl_comm *)c;
    if (n->aborted)
        return nccl_aborted(n);
    nccl_result_t r = n->lib.all_reduce(buf, buf, count, NCCL_FLOAT32, NCCL_SUM, n->comms[rank],
                                        stream);
    return r == NCCL_SUCCESS ? 0 : nccl_fail(n, "ncclAllReduce", r);
}

static int nccl_allreduce_group(eng_comm *c, float *const *bufs, size_t count,
                                void *const *streams)
{
    nccl_comm *n = (nccl_comm *)c;
    if (n->aborted)
        return nccl_aborted(n);
    nccl_result_t r = n->lib.group_start();
    if (r != NCCL_SUCCESS)
        return nccl_fail(n, "ncclGroupStart", r);
    int rc = 0;
    for (int k = 0; k < c->ranks && !rc; k++) {
        r = n->lib.all_reduce(bufs[k], bufs[k], count, NCCL_FLOAT32, NCCL_SUM, n->comms[k],
                              streams ? streams[k] : NULL);
        if (r != NCCL_SUCCESS)
            rc = nccl_fail(n, "ncclAllReduce", r);
    }
    /* End the group even after a failed call, so NCCL's group depth is back to 0. */
    r = n->lib.group_end();
    if (!rc && r != NCCL_SUCCESS)
        rc = nccl_fail(n, "ncclGroupEnd", r);
    return rc;
}

static int nccl_check(eng_comm *c)
{
    nccl_comm *n = (nccl_comm *)c;
    if (n->aborted)
        return nccl_aborted(n);
    for (int k = 0; k < c->ranks; k++) {
        nccl_result_t a = NCCL_SUCCESS, r = n->lib.comm_get_async_error(n->comms[k], &a);
        if (r != NCCL_SUCCESS)
            return nccl_fail(n, "ncclCommGetAsyncError", r);
        if (a != NCCL_SUCCESS && a != NCCL_IN_PROGRESS) {
            snprintf(c->last_error, sizeof c->last_error, "nccl: rank %d's communicator failed: %s", k,
                     nccl_msg(&n->lib, a));
            return LL_ESYS;
        }
    }
    return 0;
}

/* ncclCommAbort frees the communicator too: the entries are cleared so
 * destroy does not free them again. */
static void nccl_abort(eng_comm *c)
{
    nccl_comm *n = (nccl_comm *)c;
    for (int k = 0; k < c->ranks; k++)
        if (n->comms[k]) {
            n->lib.comm_abort(n->comms[k]);
            n->comms[k] = NULL;
        }
    n->aborted = 1;
}

static void nccl_destroy(eng_comm *c)
{
    nccl_comm *n = (nccl_comm *)c;
    if (n->comms)
        for (int k = 0; k < c->ranks; k++)
            if (n->comms[k])
                n->lib.comm_destroy(n->comms[k]);
    free(n->comms);
    nccl_unload(&n->lib);
    free(n);
}

static const eng_comm_ops nccl_ops = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .allreduce_group = nccl_allreduce_group,
    .barrier = NULL,
    .check = nccl_check,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

int eng_comm_nccl_create(int ranks, const int *devices, const char *lib, eng_comm **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    if (ranks < 1 || ranks > 1024) {
        ll_errf(err, errlen, "nccl comm: ranks must be in [1, 1024], got %d", ranks);
        return LL_EINVAL;
    }
    nccl_comm *n = calloc(1, sizeof *n);
    int *devs = malloc((size_t)ranks * sizeof *devs);
    if (!n || !devs || !(n->comms = calloc((size_t)ranks, sizeof *n->comms))) {
        if (n)
            free(n->comms);
        free(n);
        free(devs);
        ll_errf(err, errlen, "nccl comm: out of memory");
        return LL_ENOMEM;
    }
    n->base.ops = &nccl_ops;
    n->base.ranks = ranks;
    for (int k = 0; k < ranks; k++)
        devs[k] = devices ? devices[k] : k;
    int rc = nccl_load(lib, &n->lib, err, errlen);
    if (rc)
        goto fail;
    nccl_result_t r = n->lib.comm_init_all(n->comms, ranks, devs);
    if (r != NCCL_SUCCESS) {
        int v = 0;
        n->lib.get_version(&v);
        ll_errf(err, errlen, "nccl %d.%d.%d: ncclCommInitAll over %d rank(s): %s%s", v / 10000,
                v / 100 % 100, v % 100, ranks, nccl_msg(&n->lib, r),
                ranks > 1 ? " (two ranks on one GPU need NCCL 2.30+ and "
                            "NCCL_MULTI_RANK_GPU_ENABLE=1)" : "");
        memset(n->comms, 0, (size_t)ranks * sizeof *n->comms);
        rc = LL_ESYS;
        goto fail;
    }
    free(devs);
    *out = &n->base;
    return 0;
fail:
    free(devs);
    nccl_destroy(&n->base);
    return rc;
}
