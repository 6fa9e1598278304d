/* cuda_tp.h (internal to engine/cuda/, shared with tests/cuda_engine): the
 * host-side decisions of the cuda backend's tensor parallelism (tp=K), plain
 * C with no CUDA call, so tests/cuda_engine/test_cuda_tp_host checks them on
 * any machine.
 *
 * Devices: rank r runs on device `device` + r (device= is the first rank's).
 * Where the machine has fewer devices than that and NCCL_MULTI_RANK_GPU_ENABLE=1
 * is set (NCCL 2.30+ puts several ranks on one GPU, experimental), the ranks
 * wrap around the devices device..n_dev-1 (one GPU: every rank on it).
 *
 * Shards: rank r owns heads [r*H/K, (r+1)*H/K) and the columns of W (and so
 * of Hd) that those heads' queries read, plus the 576 columns the new latent
 * KV row is made of. A head h's query is the window Hd[(h*97 + j) % d_ff],
 * j < 576 (cuda_model.cu's project_q_kv_kernel, cpu_project_q), so the
 * heads of a rank read one circular range of columns: the rank's GEMM is
 * column-parallel (its range is (H/K - 1)*97 + 576 columns, whatever d_ff:
 * 3,583 of 8,192 at the defaults with K = 2; never the whole W unless the
 * windows cover it) and no all-gather
 * of Hd is needed. The KV columns are replicated on every rank, as MLA's
 * latent KV projection (kv_a_proj) is under tensor parallelism: every rank
 * keeps a full copy of the latent KV pool (shared by all heads, so it is not
 * split by heads) and writes the new row into it itself.
 */
#ifndef LOADLAW_CUDA_TP_H
#define LOADLAW_CUDA_TP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most ranks the cuda backend runs: each rank reports 7 phases and rank
 * 0 two more (logits, sampling), within ENG_MAX_PHASES = 32. */
#define CUDA_TP_MAX 4

/* Query window stride and width of cuda_model.cu / cpu_model.c. */
#define CUDA_TP_Q_STRIDE 97
#define CUDA_TP_Q_WIDTH 576

/* 1 when $NCCL_MULTI_RANK_GPU_ENABLE is "1". */
int cuda_tp_multi_rank_env(void);

/* devs[0..tp) for tp ranks starting at `device` on a machine with n_dev
 * devices (see the header). 0, or nonzero with why set ("tp=2 needs devices
 * 0..1 but this machine has 1 CUDA device; set NCCL_MULTI_RANK_GPU_ENABLE=1
 * ..."). */
int cuda_tp_devices(int device, int tp, int n_dev, int multi_rank, int *devs, char *why,
                    size_t whylen);

/* "0,1" / "0,0" into buf (for messages). */
const char *cuda_tp_devices_str(const int *devs, int tp, char *buf, size_t len);

/* Rank r's shard of tp: heads [*h0, *h1) and its columns of W.
 * cols (capacity d_ff) gets the global column of each local column, in
 * order: the circular query range first, then the KV columns [0, 576) it
 * lacks; *ncols their count (<= d_ff). colmap (d_ff, may be NULL) gets the
 * local column of each global one, -1 where the rank does not hold it.
 * 0, or nonzero (heads % tp != 0, d_ff < 576, r out of range). */
int cuda_tp_shard(int heads, int d_ff, int tp, int r, int *h0, int *h1, int32_t *cols, int *ncols,
                  int32_t *colmap);

/* Waiting for the K ranks of a step (backend_cuda.c). A blocking wait on one
 * rank's last event would hang when another rank failed before the
 * all-reduce completed: the waited-for rank's collective kernel waits for
 * that peer's data forever. So the ranks are polled together: query(ctx, r)
 * says whether rank r's work is done (0), still running (1) or failed (-1,
 * e.g. cudaEventQuery returned a CUDA error); comm_failed(ctx) whether the
 * communicator reported an asynchronous error (nonzero); between rounds,
 * pause(ctx) (a yield). Returns CUDA_TP_WAIT_DONE when every rank is done,
 * CUDA_TP_WAIT_RANK with *rank set to the first rank that failed, or
 * CUDA_TP_WAIT_COMM. A failed rank is reported even while others still
 * run; then the caller aborts the communicator (eng_comm_abort). */
enum { CUDA_TP_WAIT_DONE = 0, CUDA_TP_WAIT_RANK = 1, CUDA_TP_WAIT_COMM = 2 };
typedef struct cuda_tp_waiter {
    int (*query)(void *ctx, int rank);
    int (*comm_failed)(void *ctx);
    void (*pause)(void *ctx);
    void *ctx;
} cuda_tp_waiter;
int cuda_tp_wait(const cuda_tp_waiter *w, int tp, int *rank);

#ifdef __cplusplus
}
#endif

#endif
