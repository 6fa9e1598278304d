/* nccl_cuemu.cc: the NCCL entry points engine/comm_nccl.c opens with dlopen,
 * on the host, for cuemu: built as a shared library and named in
 * LOADLAW_NCCL_LIB, it stands where libnccl.so.2 would, so tp=K of the cuda
 * backend runs on the CPU (with CUEMU_DEVICES=K, or ranks sharing device 0
 * as NCCL_MULTI_RANK_GPU_ENABLE allows).
 *
 * One clique per ncclCommInitAll, driven from one thread as loadlaw does:
 * the all-reduces of a group (ncclGroupStart/End) are collected and, at the
 * end of the group, every rank's recv buffer gets the sum over the ranks in
 * rank order (the same bits on every rank, as NCCL's result is). The device
 * memory of cuemu is host memory, so the buffers are read directly. An
 * all-reduce outside a group on a clique of more than one rank would wait
 * forever for its peers in real NCCL (one thread): here it is
 * ncclInvalidUsage, so the mistake shows. Only float32 sums are emulated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

namespace {

enum { ok = 0, unhandled_cuda = 1, system_err = 2, internal = 3, invalid_argument = 4, invalid_usage = 5 };
enum { nccl_float32 = 7, nccl_sum = 0 };

struct clique;
struct comm {
    clique *c;
    int rank;
    bool aborted, destroyed;
};
struct clique {
    int n;
    std::vector<comm *> ranks;
};
struct pending {
    const float *send;
    float *recv;
    size_t count;
    comm *cm;
};

int g_depth;                  /* ncclGroupStart nesting */
std::vector<pending> g_group; /* the all-reduces of the open group */

int run_group(std::vector<pending> &ops)
{
    /* per clique and count: every rank once, then the sum in rank order */
    std::vector<bool> used(ops.size(), false);
    for (size_t i = 0; i < ops.size(); i++) {
        if (used[i])
            continue;
        clique *c = ops[i].cm->c;
        std::vector<const pending *> by_rank((size_t)c->n, nullptr);
        for (size_t j = i; j < ops.size(); j++)
            if (!used[j] && ops[j].cm->c == c && ops[j].count == ops[i].count && !by_rank[(size_t)ops[j].cm->rank]) {
                by_rank[(size_t)ops[j].cm->rank] = &ops[j];
                used[j] = true;
            }
        for (const pending *p : by_rank)
            if (!p)
                return invalid_usage; /* a rank missing: real NCCL would wait for it */
        std::vector<float> sum(ops[i].count, 0.0f);
        for (const pending *p : by_rank)
            for (size_t k = 0; k < p->count; k++)
                sum[k] += p->send[k];
        for (const pending *p : by_rank)
            memcpy(p->recv, sum.data(), p->count * sizeof(float));
    }
    return ok;
}

} /* namespace */

extern "C" {

int ncclGetVersion(int *v)
{
    *v = 23000; /* 2.30.0: multi-rank-per-GPU capable, as cuemu's ranks may share device 0 */
    return ok;
}

int ncclGetUniqueId(void *id)
{
    memset(id, 0, 128);
    return ok;
}

int ncclCommInitAll(comm **comms, int ndev, const int *devlist)
{
    (void)devlist;
    if (!comms || ndev < 1)
        return invalid_argument;
    clique *c = new clique{ndev, {}};
    for (int r = 0; r < ndev; r++) {
        comms[r] = new comm{c, r, false, false};
        c->ranks.push_back(comms[r]);
    }
    return ok;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, comm *cm, void *stream)
{
    (void)stream;
    if (!cm || cm->destroyed || !send || !recv)
        return invalid_argument;
    if (cm->aborted)
        return invalid_usage;
    if (dtype != nccl_float32 || op != nccl_sum)
        return invalid_argument;
    pending p = {(const float *)send, (float *)recv, count, cm};
    if (g_depth > 0) {
        g_group.push_back(p);
        return ok;
    }
    if (cm->c->n > 1)
        return invalid_usage;
    std::vector<pending> one(1, p);
    return run_group(one);
}

int ncclGroupStart(void)
{
    g_depth++;
    return ok;
}

int ncclGroupEnd(void)
{
    if (g_depth < 1)
        return invalid_usage;
    if (--g_depth > 0)
        return ok;
    int r = run_group(g_group);
    g_group.clear();
    return r;
}

/* A rank's comm is kept until every rank of its clique is gone (the others
 * point at the clique), then all are freed. */
static void release(comm *cm)
{
    cm->destroyed = true;
    clique *c = cm->c;
    for (comm *r : c->ranks)
        if (!r->destroyed)
            return;
    for (comm *r : c->ranks)
        delete r;
    delete c;
}

int ncclCommDestroy(comm *cm)
{
    if (!cm || cm->destroyed)
        return invalid_argument;
    release(cm);
    return ok;
}

int ncclCommAbort(comm *cm)
{
    if (!cm || cm->destroyed)
        return invalid_argument;
    cm->aborted = true;
    release(cm);
    return ok;
}

int ncclCommGetAsyncError(comm *cm, int *err)
{
    *err = cm && cm->aborted ? invalid_usage : ok;
    return ok;
}

const char *ncclGetErrorString(int r)
{
    switch (r) {
    case ok: return "no error";
    case invalid_argument: return "invalid argument (cuemu's NCCL)";
    case invalid_usage: return "invalid usage (cuemu's NCCL: a collective outside a group, or a rank missing from it)";
    default: return "error (cuemu's NCCL)";
    }
}

} /* extern "C" */
