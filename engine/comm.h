/* comm.h (internal to engine/): the collectives a tensor-parallel backend
 * needs, behind one small interface with two implementations:
 *   "host"  comm_host.c  K ranks that are threads of this process, buffers
 *                        in shared memory, a real reduce-scatter + all-gather
 *                        (the cpu backend's tp=K);
 *   "nccl"  comm_nccl.c  one communicator per GPU made by ncclCommInitAll in
 *                        this process, NCCL loaded with dlopen at run time
 *                        (the cuda backend's tp=K: engine/cuda/cuda_state.c).
 *
 * Two ways to call a collective, because the two kinds of backend drive
 * their ranks differently:
 *   eng_comm_allreduce        one call per rank, each from that rank's own
 *                             thread (host: every rank blocks until all K
 *                             arrived; nccl: the "one thread per GPU" model);
 *   eng_comm_allreduce_group  one call from one thread for all K ranks
 *                             (nccl: ncclGroupStart, K ncclAllReduce,
 *                             ncclGroupEnd; host: the same reduction done on
 *                             the calling thread).
 * Both sum fp32 in place; every rank ends with the same bits. On "host" the
 * sum of element i is taken in rank order, ((b0 + b1) + b2) + ..., whatever
 * the threads' timing, so a run is reproducible and K = 1 is the identity.
 *
 * Errors: 0 or a negative LL_* code with a message in the caller's err
 * buffer (create) or in eng_comm_last_error (collectives, which run on hot
 * paths without a buffer to hand). A comm is used by one group of ranks at a
 * time; create/destroy are not thread-safe.
 */
#ifndef LOADLAW_ENGINE_COMM_H
#define LOADLAW_ENGINE_COMM_H

#include <stddef.h>

typedef struct eng_comm eng_comm;

/* K = ranks in [1, 1024] host threads. *out freed with eng_comm_destroy. */
int eng_comm_host_create(int ranks, eng_comm **out, char *err, size_t errlen);

/* NCCL across `ranks` GPUs devices[0..ranks) (NULL: 0..ranks-1), one
 * communicator per GPU (ncclCommInitAll). lib: the library to dlopen; NULL
 * means $LOADLAW_NCCL_LIB if set, else "libnccl.so.2" (the loader's path).
 * LL_EIO when the library or one of its symbols cannot be loaded, LL_ESYS
 * when NCCL refuses (message has ncclGetErrorString), LL_EINVAL on bad
 * arguments. */
int eng_comm_nccl_create(int ranks, const int *devices, const char *lib, eng_comm **out,
                         char *err, size_t errlen);

/* Loads NCCL like eng_comm_nccl_create and asks ncclGetVersion (works
 * without a GPU): *version as NCCL encodes it (2.28.9 -> 22809). */
int eng_comm_nccl_version(const char *lib, int *version, char *err, size_t errlen);

void eng_comm_destroy(eng_comm *c);

const char *eng_comm_name(const eng_comm *c); /* "host" | "nccl" */
int eng_comm_ranks(const eng_comm *c);

/* Sum buf (count fp32) over all ranks, in place. Called once by every rank
 * in [0, ranks), each from its own thread, with the same count. stream: the
 * rank's cudaStream_t for nccl (the call only enqueues), ignored by host. */
int eng_comm_allreduce(eng_comm *c, int rank, float *buf, size_t count, void *stream);

/* The same for all ranks from one thread: bufs[r] (and streams[r], may be
 * NULL for host) for r in [0, ranks). */
int eng_comm_allreduce_group(eng_comm *c, float *const *bufs, size_t count, void *const *streams);

/* Every rank waits until all have arrived (host only; LL_EINVAL on nccl,
 * whose ranks order work through streams instead). */
int eng_comm_barrier(eng_comm *c, int rank);

/* Whether a collective already enqueued has failed since (nccl: the
 * communicators' asynchronous error, ncclCommGetAsyncError; a peer that
 * failed leaves the others waiting inside the collective's kernel, and only
 * this says so). 0, or LL_ESYS with eng_comm_last_error set. host: always 0
 * (its collectives fail in the call). */
int eng_comm_check(eng_comm *c);

/* Stop every collective in flight and make the comm unusable (nccl:
 * ncclCommAbort on every communicator, which ends their kernels, so the
 * GPUs and the process are not left waiting on a peer that failed). Later
 * collectives fail with LL_EINVAL; eng_comm_destroy still frees. host: no-op. */
void eng_comm_abort(eng_comm *c);

/* The message of the last failed collective (static or owned by c). */
const char *eng_comm_last_error(const eng_comm *c);

#endif
