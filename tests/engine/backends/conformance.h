/* conformance.h: one case list run against every backend of the engine
 * (synthetic, cpu, cuda), as llama.cpp's test-backend-ops runs one list of
 * operations against every backend.
 *
 * A run is `test_backends PATH BACKEND` (ctest names it BACKEND_PATH):
 *   backend  the ops table the scheduler calls, on the scripted batches of
 *            script.h: phases, tokens, slots, the kernel variants against
 *            each other and against the backend's own reference, the
 *            configurations create() must refuse, a step that fails;
 *   rescore  prompt logprobs: a greedy decode scored again through the
 *            prefill path (what `loadlaw check-decode` asks of a server);
 *   tp       tensor parallelism: tp=K against tp=1;
 *   engine   the backend inside the real engine over loopback HTTP.
 * cases.c is the case list: per path, the model each backend runs it on,
 * what is compared with what, and the tolerances, a column per backend
 * where the arithmetic differs (fp32 on the cpu, bf16 tensor cores on
 * cuda). The path runners (path_*.c) know no backend by name: what a test
 * may see of a backend beyond its ops table is its adapter (be_*.c). A
 * backend that is not built is not in the binary (its ctest is not added);
 * one that cannot run here (no GPU) makes the run print "SKIP: <reason>"
 * and exit 77, which ctest reports as skipped, never as passed.
 *
 * The suite is several files: build with TESTUTIL_SHARED (testutil.h). */
#ifndef LOADLAW_TESTS_CONFORMANCE_H
#define LOADLAW_TESTS_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "script.h"

enum { TB_SYN, TB_CPU, TB_CUDA, TB_NBACKENDS };
#define TB_ON(b) (1u << (b))
#define TB_ALL (TB_ON(TB_SYN) | TB_ON(TB_CPU) | TB_ON(TB_CUDA))
#define TB_SKIP_COL (-1.0) /* a per-backend column's "not run on this backend" */
#define TB_MAX_VOCAB 256
#define TB_MAX_HEADS 16
#define TB_DV 512 /* attention output dims per head (cpu ATTN_DV, cuda CUDA_ATTN_DV) */

/* ---- configurations ----------------------------------------------------------- */

/* An eng_config filled by hand from "key=value,..." (the engine's spec keys
 * for the fields a backend reads; no range checks: a backend must refuse a
 * bad value itself), over a zeroed config, so nothing comes from defaults. */
typedef struct tb_cfg {
    eng_config c;
    char attn[16], kv[16];
} tb_cfg;
void tb_config(tb_cfg *t, const char *shape, const char *set);

/* ---- adapters: what a test may see of a backend ------------------------------ */

/* A decode step copied back for the tp path: attention output per (sequence,
 * head), logits per sequence, and the head mean where the backend keeps one. */
typedef struct tb_snap {
    float attn[SCRIPT_MAX_SLOTS][TB_MAX_HEADS][TB_DV];
    float logits[SCRIPT_MAX_SLOTS][TB_MAX_VOCAB];
    float mean[SCRIPT_MAX_SLOTS][TB_DV];
    int has_mean;
} tb_snap;

typedef struct tb_backend {
    int id;                      /* TB_SYN, TB_CPU, TB_CUDA */
    const char *name;
    const eng_backend_ops *ops;
    /* 0 when it can run here, else nonzero with the reason (the run skips) */
    int (*probe)(char *why, size_t len);
    /* the token slot holds (0 before any decode, -1 out of range); NULL:
     * the backend computes no tokens */
    int (*token)(void *st, int slot);
    /* the phases a tp=1 step reports, in order: names[0..n), n returned */
    int (*phases)(const char *attn, int prefill, int decode, const char **names);
    int validates_slots;         /* a slot out of range is refused (LL_ERANGE) */
    int fault_step;              /* fault_fail_step=K makes step K fail (LL_EIO) */
    const char *fail_says;       /* a failed step's last_error has it (NULL: no last_error) */
    int fail_sticky;             /* every step after a failed one fails too */
    /* after step s of a deep variant's script: the checks only this backend
     * can make (cuda: attention and rows against the cpu reference) */
    void (*check_step)(void *st, const char *what, const eng_config *cfg, int s, const script_step *sk);
    /* tp path: a decode step copied back (sn for n_seq sequences, heads
     * heads); the phases rank `rank` reports in a step; names only rank 0
     * runs; the communication phase's name; getting tp=K ready (77: cannot) */
    void (*tp_snap)(void *st, int tp, int n_seq, int heads, int vocab, tb_snap *sn);
    int (*tp_rank_phases)(int tp, int rank, int prefill, int decode);
    const char *const *tp_rank0_only;
    const char *tp_comm_name;
    int (*tp_prepare)(void);
} tb_backend;

extern const tb_backend tb_synthetic, tb_cpu, tb_cuda;

/* ---- the case list (cases.c) -------------------------------------------------- */

/* backend path: a kernel variant through SCRIPT_MIXED; deep: phases checked
 * and the backend's own reference checks (check_step) made */
typedef struct tb_variant {
    const char *name, *set;
    unsigned on;
    int deep;
} tb_variant;

/* two variants' tokens over the decode steps: the share that must agree, per
 * backend (TB_SKIP_COL: not compared there); a == b: a second run of a */
typedef struct tb_agree {
    const char *a, *b;
    double share[TB_NBACKENDS];
} tb_agree;

/* a configuration create() must refuse: set over the path's shape, with an
 * environment variable set for the call where env is not NULL ("K=V") */
typedef struct tb_refusal {
    const char *path, *what, *set, *env;
    unsigned on;
    int rc;                      /* the code (0: any nonzero) */
    const char *says[3];         /* in the message */
} tb_refusal;

/* rescore path: a decode of n_tok tokens, scored through prefill */
enum { TB_HEALTHY, TB_CAP_UNDER, TB_FAULTY };
typedef struct tb_rescore {
    const char *what, *set;
    unsigned on;
    int kind;
} tb_rescore;
typedef struct tb_rescore_col {  /* per backend */
    const char *shape;
    int n_tok;
    double tol_nat, fault_nat;   /* healthy: max |d| <=; faulty: max |d| > */
} tb_rescore_col;

/* tp path: run b against run a over the backend's script */
typedef struct tb_tp_case {
    const char *what, *a, *b;
    unsigned on;
    int rerun;                   /* b is a second run of a: bit-identical */
} tb_tp_case;
typedef struct tb_tp_col {       /* per backend */
    const char *shape;
    const script_def *script;
    unsigned snap_steps;         /* the decode steps compared (bit s) */
    int heads, vocab;
    double atol, rtol, token_share;
} tb_tp_col;

/* engine path: one row per backend */
typedef struct tb_engine_case {
    const char *spec;
    const char *phases[9];       /* /metrics loadlaw_phase_seconds_total series */
    const char *step_kernels[3]; /* trace: kernel events of every decode step */
    int plays_law;               /* eng_law reports a law */
    int planned_phases;          /* phases from the step's planned start (a law), not measured */
    const char *sizes_set;       /* "" or the sizes the spec must have set */
    int checks_capacity;         /* capacity 0 refused at parse and at start */
    const char *fail_spec;       /* with fault_fail_step: the engine fails (NULL: not run) */
    const char *fail_says;       /* in eng_failed and /health's 503 */
} tb_engine_case;

extern const char *const tb_backend_shape[TB_NBACKENDS];
extern const tb_variant tb_variants[];
extern const tb_agree tb_agrees[];
extern const tb_refusal tb_refusals[];
extern const char *const tb_same_token[TB_NBACKENDS][2];
extern const tb_rescore tb_rescores[];
extern const tb_rescore_col tb_rescore_cols[TB_NBACKENDS];
extern const tb_tp_case tb_tp_cases[];
extern const tb_tp_col tb_tp_cols[TB_NBACKENDS];
extern const tb_engine_case tb_engine_cases[TB_NBACKENDS];

/* ---- the paths ---------------------------------------------------------------- */

void tb_path_backend(const tb_backend *be);
void tb_path_rescore(const tb_backend *be);
int tb_path_tp(const tb_backend *be); /* 0, or TEST_SKIP */
void tb_path_engine(const tb_backend *be);

/* The refusals of `path` on be, over shape (conformance.c). */
void tb_refusals_run(const tb_backend *be, const char *path, const char *shape);

/* One step; phases into ph (may be NULL), their count into *nph. */
int tb_step(const tb_backend *be, void *st, const eng_batch *b, eng_phase *ph, int *nph);

#endif
