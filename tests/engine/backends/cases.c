/* cases.c: the conformance suite's case list (conformance.h). Every row
 * names the backends it runs on; a column per backend holds what differs
 * between them: the model a path runs on (each sized so its tolerance was
 * measured on it, and the cuda one small enough for the emulator), and the
 * tolerances, which follow the arithmetic: fp32 on the cpu, bf16 storage and
 * tensor cores on cuda (FlashMLA's bf16 bound, atol 1e-3 + rtol 2.01/128,
 * is the kernels' own; tests/cuda checks it on their own inputs).
 *
 * To add a backend: a column in each table, an adapter (be_*.c), its
 * ctests (CMakeLists.txt). To add a kernel: a row in tb_variants and the
 * rows comparing it with the others (tb_agrees), and where it differs from
 * tiled, a row in tb_rescores and tb_tp_cases. */
#include "common.h"
#include "conformance.h"
#include "cuda_model.h" /* CUDA_K_*: the cuda backend's phase names (plain C) */

#define SYN TB_ON(TB_SYN)
#define CPU TB_ON(TB_CPU)
#define CUDA TB_ON(TB_CUDA)
#define NO TB_SKIP_COL

/* ---- backend path: the ops table on SCRIPT_MIXED ------------------------------ */

/* The model each backend steps through the script. min_ctx -1 = topk (the
 * engine's default); topk 96 is not a multiple of cuda's 64-row tile. */
const char *const tb_backend_shape[TB_NBACKENDS] = {
    [TB_SYN] = "max_running=8,seed=5,law_a_ms=0.2,law_b_ms=0.05,time_scale=1",
    [TB_CPU] = "heads=8,topk=96,threads=2,max_running=8,seed=5,d_model=256,d_ff=1024,vocab=64,capacity=512,"
               "min_ctx=-1",
    [TB_CUDA] = "heads=16,topk=96,max_running=8,seed=5,d_model=256,d_ff=1024,vocab=64,capacity=512,min_ctx=-1",
};

const tb_variant tb_variants[] = {
    {"law", "", SYN, 1},
    {"naive bf16", "attn=naive,kv=bf16", CPU | CUDA, 1},
    {"tiled bf16", "attn=tiled,kv=bf16", CPU | CUDA, 1},
    {"tiled bf16 again", "attn=tiled,kv=bf16", CPU | CUDA, 0},
    {"tiled fp8", "attn=tiled,kv=fp8", CUDA, 1},
    {"naive fp8", "attn=naive,kv=fp8", CUDA, 1},
    {"v2 bf16", "attn=v2,kv=bf16", CUDA, 1},
    {"v2 fp8", "attn=v2,kv=fp8", CUDA, 1},
    {NULL, NULL, 0, 0},
};

/* Shares of equal tokens. The cpu's kernels compute the same sums in the
 * same fp32 order: every token. On cuda bf16 tensor-core rounding may flip
 * a near tie between two kernels: 80%; a rerun is deterministic. */
const tb_agree tb_agrees[] = {
    /*  a              b                     synthetic cpu  cuda */
    {"tiled bf16", "tiled bf16 again", {NO, 1.0, 1.0}},
    {"naive bf16", "tiled bf16", {NO, 1.0, 0.8}},
    {"v2 bf16", "tiled bf16", {NO, NO, 0.8}},
    {"v2 fp8", "tiled fp8", {NO, NO, 0.8}},
    {NULL, NULL, {0}},
};

/* A prefill and a decode on slot 0 under two configurations that must
 * sample the same token: the cpu's pool size (threads 0 = every core). */
const char *const tb_same_token[TB_NBACKENDS][2] = {
    [TB_CPU] = {"attn=tiled,threads=0", "attn=tiled,threads=2"},
};

const tb_refusal tb_refusals[] = {
    {"backend", "attn=fast", "attn=fast,kv=bf16", NULL, CPU | CUDA, LL_EINVAL, {"naive or tiled"}},
    {"backend", "attn=v2 on the cpu", "attn=v2", NULL, CPU, LL_EINVAL, {"v2 is the cuda backend's kernel"}},
    {"backend", "d_ff under 576", "attn=tiled,d_ff=100", NULL, CPU, LL_EINVAL, {"d_ff"}},
    /* a zeroed field is an error, not a silent default */
    {"backend", "capacity 0", "attn=tiled,kv=bf16,capacity=0", NULL, CPU | CUDA, LL_EINVAL, {"capacity"}},
    {"backend", "min_ctx -2", "attn=tiled,kv=bf16,min_ctx=-2", NULL, CPU | CUDA, LL_EINVAL, {"min_ctx"}},
    /* each in range, together 17 GB of weights */
    {"backend", "huge dense", "attn=tiled,d_model=65536,d_ff=65536", NULL, CPU, LL_EINVAL, {NULL}},
    {"backend", "kv=fp4", "attn=tiled,kv=fp4", NULL, CUDA, LL_EINVAL, {"bf16 or fp8"}},
    {"backend", "device 99", "attn=tiled,kv=bf16,device=99", NULL, CUDA, 0, {"device=99"}},
    /* 65535 slots x 32768 rows x 1152 B = 2.4 TB: refused before any allocation */
    {"backend", "a pool that does not fit", "attn=tiled,kv=bf16,max_running=65535,capacity=32768", NULL, CUDA,
     LL_ENOMEM, {"MiB", "max_running"}},
    {"tp", "heads % tp", "attn=tiled,tp=3", NULL, CPU, LL_EINVAL, {"heads (8)", "tp=3"}},
    {"tp", "d_ff % tp", "attn=tiled,tp=8,d_ff=1156", NULL, CPU, LL_EINVAL, {"d_ff (1156)"}},
    {"tp", "tp beyond the phase budget", "attn=tiled,tp=16,heads=16", NULL, CPU, LL_EINVAL,
     {"tp must be in [1, 10]"}},
    {"tp", "tp=2 without NCCL", "attn=tiled,tp=2", "LOADLAW_NCCL_LIB=/nonexistent/libnccl.so.2", CUDA, 0,
     {"tp=2", "devices", "LOADLAW_NCCL_LIB"}},
    {NULL, NULL, NULL, NULL, 0, 0, {NULL}},
};

/* ---- rescore path: decode, then the same tokens through prefill --------------- */

/* Healthy: the largest |decode lp - prefill lp| over the continuation. The
 * cpu computes both in fp32 (1e-3 nat); cuda's decode kernels read bf16 and
 * run tensor cores while its prefill path is the naive kernel: 0.005 nat,
 * `loadlaw check-decode`'s own tolerance. Faulty: the kernel's testing bug
 * must move some position past it. cuda's model is small: 4 tiles of the
 * top-k of 64, so skip_last_tile drops a quarter of them. */
const tb_rescore_col tb_rescore_cols[TB_NBACKENDS] = {
    [TB_SYN] = {NULL, 0, 0, 0},
    [TB_CPU] = {"heads=32,topk=192,threads=2,max_running=4,seed=11,d_model=256,d_ff=1024,vocab=256,capacity=512,"
                "min_ctx=-1", 12, 1e-3, 0.01},
    [TB_CUDA] = {"heads=16,topk=64,max_running=4,seed=11,d_model=64,d_ff=1024,vocab=128,capacity=256,min_ctx=-1",
                 10, 0.005, 0.005},
};

const tb_rescore tb_rescores[] = {
    {"tiled bf16", "attn=tiled,kv=bf16", CPU | CUDA, TB_HEALTHY},
    {"naive bf16", "attn=naive,kv=bf16", CPU | CUDA, TB_HEALTHY},
    {"tiled fp8", "attn=tiled,kv=fp8", CUDA, TB_HEALTHY},
    {"tiled min_ctx 0", "attn=tiled,min_ctx=0", CPU, TB_HEALTHY},
    {"naive min_ctx 0", "attn=naive,min_ctx=0", CPU, TB_HEALTHY},
    /* the context passes the capacity during the continuation: the prefill
     * must wrap the slot's ring no sooner than decode did */
    {"capacity under the context", "attn=naive,kv=bf16", CPU | CUDA, TB_CAP_UNDER},
    {"tiled skip_last_tile", "attn=tiled,kv=bf16,attn_fault=1", CPU | CUDA, TB_FAULTY},
    {"tiled swap_heads", "attn=tiled,kv=bf16,attn_fault=2", CUDA, TB_FAULTY},
    {NULL, NULL, 0, 0},
};

/* ---- tp path: tp=K against tp=1 ------------------------------------------------ */

/* cpu: every decode step of SCRIPT_TP, which has a step with N = 1; tp=K
 * sums the same products in another order (a rank's GEMM covers d_ff/K
 * columns, the head mean is summed per rank then across): 1e-5 absolute
 * (observed ~1e-7), and every token. cuda: step 2 of SCRIPT_MIXED, bf16:
 * FlashMLA's bound with atol doubled (the two runs' GEMMs have different
 * shapes, so cuBLAS may sum in another order and a bf16 rounding of q or of
 * the new KV row may flip), tokens at the 80% of the kernels' agreement
 * (expected: all). cuda's d_ff 1600: rank 1's heads read a range of W's
 * columns that wraps past its end (at 2048 it would not). */
const tb_tp_col tb_tp_cols[TB_NBACKENDS] = {
    [TB_SYN] = {NULL, NULL, 0, 0, 0, 0, 0, 0},
    [TB_CPU] = {"heads=8,topk=96,threads=2,max_running=8,seed=11,d_model=256,d_ff=1152,vocab=64,capacity=512,"
                "min_ctx=-1", &SCRIPT_TP, 0x7e, 8, 64, 1e-5, 0, 1.0},
    [TB_CUDA] = {"kv=bf16,heads=16,topk=96,max_running=8,seed=5,d_model=256,d_ff=1600,vocab=64,capacity=512,"
                 "min_ctx=-1", &SCRIPT_MIXED, 1u << 2, 16, 64, 2e-3, 2.01 / 128, 0.8},
};

const tb_tp_case tb_tp_cases[] = {
    {"tiled tp=2 vs tp=1", "attn=tiled,tp=1", "attn=tiled,tp=2", CPU | CUDA, 0},
    {"tiled tp=4 vs tp=1", "attn=tiled,tp=1", "attn=tiled,tp=4", CPU, 0},
    {"naive tp=2 vs tp=1", "attn=naive,tp=1", "attn=naive,tp=2", CPU | CUDA, 0},
    {"naive tp=4 vs tp=1", "attn=naive,tp=1", "attn=naive,tp=4", CPU, 0},
    {"tiled tp=1 rerun", "attn=tiled,tp=1", "attn=tiled,tp=1", CPU, 1},
    /* one thread: the GEMM in one block */
    {"tiled tp=1 threads=1 vs 2", "attn=tiled,tp=1", "attn=tiled,tp=1,threads=1", CPU, 0},
    {"naive vs tiled (tp=1)", "attn=tiled,tp=1", "attn=naive,tp=1", CPU, 0},
    {NULL, NULL, NULL, 0, 0},
};

/* ---- engine path: over loopback HTTP ------------------------------------------ */

/* Four requests of 100+ tokens at once: steps of ~0.5 ms overlap them for
 * tens of steps even when their threads start late on a loaded box. Phase
 * names are what /metrics and `loadlaw trace` show. */
const tb_engine_case tb_engine_cases[TB_NBACKENDS] = {
    [TB_SYN] = {"backend=synthetic,law=0.5+0.05n,max_running=8",
                {"prefill", "decode"},
                {"decode"}, 1, 1, "", 0,
                "backend=synthetic,law=0.5+0.05n,max_running=4,fault_fail_step=3",
                "(I/O error)"},
    [TB_CPU] = {"backend=cpu,attn=tiled,heads=8,topk=256,threads=2,max_running=8,d_model=512,d_ff=2048,vocab=64,"
                "capacity=512",
                {"prefill", "dense_gemm", "attention", "sampling"},
                {"dense_gemm", "attention", "sampling"}, 0, 0, "d_model=512,d_ff=2048,vocab=64,capacity=512", 1,
                NULL, NULL},
    [TB_CUDA] = {"backend=cuda,attn=tiled,kv=bf16,device=0,heads=16,topk=256,max_running=8,d_model=512,d_ff=2048,"
                 "vocab=64,capacity=512",
                 {CUDA_K_FILL, CUDA_K_EMBED, CUDA_K_GEMM, CUDA_K_PROJECT, CUDA_K_TOPK, "mla_decode_tiled_kernel",
                  CUDA_K_LOGITS, CUDA_K_SAMPLE},
                 {CUDA_K_GEMM, "mla_decode_tiled_kernel", CUDA_K_SAMPLE}, 0, 0,
                 "d_model=512,d_ff=2048,vocab=64,capacity=512,kv=bf16,device=0", 1,
                 "backend=cuda,heads=16,topk=256,max_running=4,d_model=512,d_ff=2048,vocab=64,capacity=512,"
                 "fault_fail_step=3",
                 "cudaErrorInvalidConfiguration"},
};
