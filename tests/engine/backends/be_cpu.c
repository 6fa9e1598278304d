/* be_cpu.c: the cpu backend's adapter (conformance.h): its tokens and, for
 * the tp path, the attention outputs and logits it keeps on the host after
 * a decode step (cpu_model.h). Phases: "prefill" (rank 0), then per rank
 * "dense_gemm", "attention" and at tp > 1 "all_reduce", then "sampling" on
 * rank 0. */
#define TESTUTIL_SHARED
#include <string.h>

#include "conformance.h"
#include "cpu_model.h"

static int cpu_phases(const char *attn, int prefill, int decode, const char **names)
{
    (void)attn;
    int n = 0;
    if (prefill)
        names[n++] = "prefill";
    if (decode) {
        names[n++] = "dense_gemm";
        names[n++] = "attention";
        names[n++] = "sampling";
    }
    return n;
}

static int cpu_rank_phases(int tp, int rank, int prefill, int decode)
{
    return (rank == 0 && prefill) + (decode ? 2 + (tp > 1) + (rank == 0) : 0);
}

static void cpu_snap(void *st, int tp, int n_seq, int heads, int vocab, tb_snap *sn)
{
    (void)tp;
    memset(sn, 0, sizeof *sn);
    for (int i = 0; i < n_seq; i++) {
        memcpy(sn->logits[i], cpu_backend_logits(st, i), (size_t)vocab * sizeof(float));
        for (int h = 0; h < heads; h++)
            memcpy(sn->attn[i][h], cpu_backend_attn_out(st, i, h), TB_DV * sizeof(float));
    }
}

static const char *const k_rank0_only[] = {"sampling", "prefill", NULL};

const tb_backend tb_cpu = {
    .id = TB_CPU,
    .name = "cpu",
    .ops = &eng_backend_cpu,
    .token = cpu_backend_token,
    .phases = cpu_phases,
    .validates_slots = 1,
    .tp_snap = cpu_snap,
    .tp_rank_phases = cpu_rank_phases,
    .tp_rank0_only = k_rank0_only,
    .tp_comm_name = "all_reduce",
};
