/* cuda_tp.c: the cuda backend's tp=K decisions on the host (cuda_tp.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_tp.h"

int cuda_tp_multi_rank_env(void)
{
    const char *v = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    return v && strcmp(v, "1") == 0;
}

int cuda_tp_devices(int device, int tp, int n_dev, int multi_rank, int *devs, char *why,
                    size_t whylen)
{
    if (tp < 1 || tp > CUDA_TP_MAX) {
        snprintf(why, whylen, "tp must be in [1, %d] on the cuda backend, got %d", CUDA_TP_MAX, tp);
        return 1;
    }
    if (device < 0 || n_dev < 1 || device >= n_dev) {
        snprintf(why, whylen, "device=%d, but this machine has %d CUDA device%s", device, n_dev,
                 n_dev == 1 ? "" : "s");
        return 1;
    }
    int avail = n_dev - device;
    if (tp > avail && !multi_rank) {
        snprintf(why, whylen,
                 "tp=%d puts rank r on device %d+r, so it needs devices %d..%d, but this machine "
                 "has %d CUDA device%s (0..%d); use fewer ranks, a lower device=, or set "
                 "NCCL_MULTI_RANK_GPU_ENABLE=1 to put several ranks on one GPU (NCCL 2.30+, "
                 "experimental)", tp, device, device, device + tp - 1, n_dev,
                 n_dev == 1 ? "" : "s", n_dev - 1);
        return 1;
    }
    for (int r = 0; r < tp; r++)
        devs[r] = device + r % avail;
    return 0;
}

const char *cuda_tp_devices_str(const int *devs, int tp, char *buf, size_t len)
{
    size_t o = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (int r = 0; r < tp && o < len; r++) {
        int w = snprintf(buf + o, len - o, r ? ",%d" : "%d", devs[r]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    return buf;
}

int cuda_tp_shard(int heads, int d_ff, int tp, int r, int *h0, int *h1, int32_t *cols, int *ncols,
                  int32_t *colmap)
{
    if (tp < 1 || heads < tp || heads % tp != 0 || r < 0 || r >= tp || d_ff < CUDA_TP_Q_WIDTH)
        return 1;
    int hr = heads / tp;
    *h0 = r * hr;
    *h1 = (r + 1) * hr;
    /* heads h0..h1-1 read [h0*97, (h1-1)*97 + 576) modulo d_ff */
    int64_t span = (int64_t)(hr - 1) * CUDA_TP_Q_STRIDE + CUDA_TP_Q_WIDTH;
    int64_t start = ((int64_t)*h0 * CUDA_TP_Q_STRIDE) % d_ff;
    if (span >= d_ff) {
        span = d_ff;
        start = 0;
    }
    if (colmap)
        for (int c = 0; c < d_ff; c++)
            colmap[c] = -1;
    int n = 0;
    for (int64_t j = 0; j < span; j++) {
        int32_t g = (int32_t)((start + j) % d_ff);
        cols[n] = g;
        if (colmap)
            colmap[g] = n;
        n++;
    }
    /* the KV row's columns: (c - start) mod d_ff < span means c is held */
    for (int c = 0; c < CUDA_TP_Q_WIDTH; c++) {
        int64_t d = ((int64_t)c - start) % d_ff;
        if (d < 0)
            d += d_ff;
        if (d < span)
            continue;
        cols[n] = c;
        if (colmap)
            colmap[c] = n;
        n++;
    }
    *ncols = n;
    return 0;
}

int cuda_tp_wait(const cuda_tp_waiter *w, int tp, int *rank)
{
    for (;;) {
        int running = 0;
        for (int r = 0; r < tp; r++) {
            int q = w->query(w->ctx, r);
            if (q < 0) {
                *rank = r;
                return CUDA_TP_WAIT_RANK;
            }
            running += q > 0;
        }
        if (!running)
            return CUDA_TP_WAIT_DONE;
        if (w->comm_failed(w->ctx))
            return CUDA_TP_WAIT_COMM;
        w->pause(w->ctx);
    }
}
