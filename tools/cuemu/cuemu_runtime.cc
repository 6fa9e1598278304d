/* cuemu_runtime.cc: the subset of the CUDA runtime API the kernels' tests
 * use, on the host: devices (CUEMU_DEVICES of them, CUEMU_SMS SMs each, all
 * of them this host's memory, CUEMU_MEM_MIB each), allocations, streams and
 * events (work runs when it is queued; cudaEventQuery answers "not ready"
 * CUEMU_EVENT_POLLS times after a record), copies, and the error state
 * cudart keeps (a last error per host thread, a sticky one after a kernel
 * fault). Launches and what runs inside them: cuemu.cc. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <map>
#include <mutex>
#include <vector>

#include "cuemu.h"
#include "cuemu_internal.h"

using cuemu::g_last;
using cuemu::g_sticky;

/* CUEMU_DEVICES devices (default 1), all of them this host's memory; the
 * current one is per host thread, as in cudart */
static int env_devices(void)
{
    const char *e = getenv("CUEMU_DEVICES");
    int v = e ? atoi(e) : 0;
    return v > 0 ? v : 1;
}
static thread_local int g_device;

static int env_sms(void)
{
    const char *e = getenv("CUEMU_SMS");
    int v = e ? atoi(e) : 0;
    return v > 0 ? v : 132; /* an H200's */
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = env_devices();
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (device < 0 || device >= env_devices())
        return g_last = cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu (host emulation, sm_90 limits)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = env_sms();
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = 227 * 1024;
    p->totalGlobalMem = (size_t)16 << 30;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (device < 0 || device >= env_devices())
        return g_last = cudaErrorInvalidDevice;
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = env_sms(); return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; return cudaSuccess;
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    std::lock_guard<std::mutex> lk(cuemu::g_mu);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > 227 * 1024)
            return g_last = cudaErrorInvalidValue;
        cuemu::g_max_dyn[func] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
        return value >= -1 && value <= 100 ? cudaSuccess : (g_last = cudaErrorInvalidValue);
    return g_last = cudaErrorInvalidValue;
}

/* Device memory: heap blocks of the exact size (ASan sees overruns),
 * counted against CUEMU_MEM_MIB (default 16 GiB) so out-of-memory paths
 * run as on a device. */
struct alloc_rec {
    size_t bytes;
    int device;
};
static std::map<void *, alloc_rec> g_alloc;
static std::map<int, size_t> g_alloc_bytes; /* per device */

static size_t mem_total(void)
{
    const char *e = getenv("CUEMU_MEM_MIB");
    long v = e ? atol(e) : 0;
    return (v > 0 ? (size_t)v : (size_t)16384) << 20;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = NULL;
    if (g_sticky != cudaSuccess)
        return g_sticky;
    std::lock_guard<std::mutex> lk(cuemu::g_mu);
    void *q = NULL;
    size_t &used = g_alloc_bytes[g_device];
    if (n > mem_total() - used || posix_memalign(&q, 256, n ? n : 1) != 0)
        return g_last = cudaErrorMemoryAllocation; /* as cudart: also the last error */
    g_alloc[q] = alloc_rec{n, g_device};
    used += n;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> lk(cuemu::g_mu);
    auto it = g_alloc.find(p);
    if (it == g_alloc.end())
        return g_last = cudaErrorInvalidValue;
    g_alloc_bytes[it->second.device] -= it->second.bytes;
    g_alloc.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    std::lock_guard<std::mutex> lk(cuemu::g_mu);
    *total_b = mem_total();
    *free_b = *total_b - g_alloc_bytes[g_device];
    return g_sticky;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : (g_last = cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    return cudaMallocHost(p, n);
}

cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= env_devices())
        return g_last = cudaErrorInvalidDevice;
    g_device = device;
    return g_sticky;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = g_device;
    return cudaSuccess;
}

/* Streams: the emulation runs every launch and copy when it is enqueued,
 * so a stream only orders its events: completing one completes those
 * recorded before it on the same stream, as on a device. Streams are kept
 * (marked destroyed) so an event never points at freed memory. */
struct CUstream_st {
    unsigned flags;
    uint64_t recorded, done; /* events recorded; the last one known complete */
    bool destroyed;
};
/* never destroyed (a static vector would be, before LeakSanitizer looks) */
static std::vector<CUstream_st *> &g_streams = *new std::vector<CUstream_st *>;
static CUstream_st g_default_stream;

static CUstream_st *stream_of(cudaStream_t s)
{
    return s ? s : &g_default_stream;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    std::lock_guard<std::mutex> lk(cuemu::g_mu);
    *s = new CUstream_st{flags, 0, 0, false};
    g_streams.push_back(*s);
    return g_sticky;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || s->destroyed)
        return g_last = cudaErrorInvalidResourceHandle;
    s->destroyed = true;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    CUstream_st *st = stream_of(s);
    st->done = st->recorded;
    return g_sticky;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)s;
    return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    return cudaMemset(p, v, n);
}

/* Events: the host clock when recorded (the stream's earlier work has run).
 * cudaEventQuery answers "not ready" CUEMU_EVENT_POLLS times (default 1)
 * after each record, and, as cudart does, leaves cudaErrorNotReady as the
 * thread's last error: a caller that polls and does not clear it fails its
 * next launch check here as it would on a GPU. */
struct CUevent_st {
    int64_t t_ns;
    CUstream_st *stream;
    uint64_t seq; /* 0: never recorded */
    int polls_left;
};

static int env_event_polls(void)
{
    const char *e = getenv("CUEMU_EVENT_POLLS");
    return e ? atoi(e) : 1;
}

static bool event_done(const CUevent_st *ev)
{
    return ev->polls_left <= 0 || ev->seq <= ev->stream->done;
}

static void event_complete(CUevent_st *ev)
{
    ev->polls_left = 0;
    if (ev->stream->done < ev->seq)
        ev->stream->done = ev->seq;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    *ev = new CUevent_st{-1, &g_default_stream, 0, 0};
    return g_sticky;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    delete ev;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    if (!ev)
        return g_last = cudaErrorInvalidResourceHandle;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    ev->t_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    ev->stream = stream_of(s);
    ev->seq = ++ev->stream->recorded;
    ev->polls_left = env_event_polls();
    return g_sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (ev->seq && !event_done(ev)) {
        ev->polls_left--;
        return g_last = cudaErrorNotReady;
    }
    if (ev->seq)
        event_complete(ev);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    if (ev->seq)
        event_complete(ev);
    return g_sticky;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (!a->seq || !b->seq)
        return g_last = cudaErrorInvalidResourceHandle;
    if (!event_done(a) || !event_done(b))
        return g_last = cudaErrorNotReady;
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (n)
        memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (n)
        memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    g_default_stream.done = g_default_stream.recorded;
    for (CUstream_st *st : g_streams)
        st->done = st->recorded;
    return g_sticky;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_sticky != cudaSuccess ? g_sticky : g_last;
    g_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_sticky != cudaSuccess ? g_sticky : g_last; }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (cuemu: a kernel fault, printed above)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    default: return "unknown error (cuemu)";
    }
}

} /* extern "C" */
