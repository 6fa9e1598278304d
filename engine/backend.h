/* backend.h (internal to engine/): what a backend must do for one step.
 *
 * The scheduler owns sequences, queues and timing of the step as a whole; a
 * backend decides what a step costs. The synthetic backend waits until the
 * law's deadline; the cpu backend does the arithmetic of a decode step.
 *
 * DESIGN: the scheduler thread is the only caller, so a backend needs no locks
 * of its own unless it runs worker threads inside step().
 */
#ifndef LOADLAW_ENGINE_BACKEND_H
#define LOADLAW_ENGINE_BACKEND_H

#include <stdint.h>
#include <string.h>

#include "engine.h"

/* A token a backend's model chose, for the response (sse.c): its id in
 * [0, vocab), its logprob, and the top alternatives, the chosen one first.
 * id < 0: the backend computes no tokens (the engine's seeded words stand). */
#define ENG_TOK_TOP 8
typedef struct eng_tok {
    int32_t id;
    int n_top;                 /* 0..ENG_TOK_TOP */
    float lp;
    int32_t top_id[ENG_TOK_TOP];
    float top_lp[ENG_TOK_TOP];
} eng_tok;

/* A prompt scored through prefill ("prompt_logprobs", docs/engine.md): the
 * prompt's last n tokens are model tokens (a continuation, e.g. a decoded
 * output sent back), the ctx_tok before them the request's context. A
 * backend that computes tokens writes, for each continuation position j, the
 * logprob of ids[j] given everything before it (out[j]: id = ids[j], lp, the
 * top alternatives) and rank[j] (1 = the model's argmax), through a path that
 * does not share the decode attention kernel; the first token after the
 * prompt is then the one that follows the continuation. out[j].id stays -1
 * where the backend computes nothing (the engine's seeded words stand). */
typedef struct eng_cont {
    int ctx_tok;               /* prompt tokens before the continuation */
    int n;                     /* continuation tokens */
    const int32_t *ids;        /* (n) */
    eng_tok *out;              /* (n), ids preset to -1 */
    int32_t *rank;             /* (n) */
} eng_cont;

/* The work of one step, as the scheduler hands it to the backend. */
typedef struct eng_batch {
    int n_decode;              /* sequences that decode one token this step */
    const int *decode_slot;    /* (n_decode) slot of each, in [0, max_running) */
    const int64_t *decode_ctx; /* (n_decode) context length of each, tokens */
    int n_prefill;             /* sequence chunks prefilled this step */
    const int *prefill_slot;   /* (n_prefill) */
    const int *prefill_tok;    /* (n_prefill) prompt tokens prefilled for each */
    int prefill_tok_total;
    int64_t ctx_tok_total;     /* sum of decode_ctx */
    /* Each sequence's seed, a function of the engine's seed and its prompt
     * alone, and where a backend that computes tokens puts them (ids preset
     * to -1): decode_out[i] is decode sequence i's token, prefill_out[i] the
     * first token of prefill chunk i when that chunk completes its prompt. */
    const uint64_t *decode_seed, *prefill_seed;
    eng_tok *decode_out, *prefill_out;
    /* 1 when a sequence of this step asked for logprobs (chat logprobs,
     * completions logprobs N): the tokens' lp and alternatives are read.
     * 0: only the ids are, and a backend that pays for the rest outside its
     * kernels (the cuda one copies the logits back) may leave them out. */
    int want_lp;
    /* (n_prefill, may be NULL) prefill chunk i's continuation to score when
     * the chunk completes a prompt that asked for prompt logprobs, else NULL */
    const eng_cont *const *prefill_cont;
} eng_batch;

/* A timed phase inside a step (for /metrics and the profiler trace).
 * A tensor-parallel backend reports each rank's phases (each rank's in time
 * order); 32 leave room for 2 + 3 per rank up to tp = 10. */
#define ENG_MAX_PHASES 32
typedef struct eng_phase {
    const char *name;          /* static string: "prefill", "decode", "dense", "attention", ... */
    int64_t start_ns, dur_ns;
    int rank;                  /* tensor-parallel rank that ran it; 0 without tp. Keep last:
                                * positional initialisers elsewhere leave it 0 */
} eng_phase;

/* The phases that are communication between ranks: the cpu backend's
 * "all_reduce" and NCCL-named ones ("ncclDevKernel_AllReduce_Sum_f32_RING_LL",
 * "nccl:all_reduce", ...). Their time is a step's comm_ns (records, /metrics). */
static inline int eng_phase_is_comm(const char *name)
{
    return name && (strcmp(name, "all_reduce") == 0 || strncmp(name, "nccl", 4) == 0);
}

/* Rank 0's time in communication phases: a step's comm_ns. */
static inline int64_t eng_phases_comm_ns(const eng_phase *ph, int n)
{
    int64_t t = 0;
    for (int i = 0; i < n; i++)
        if (ph[i].rank == 0 && eng_phase_is_comm(ph[i].name))
            t += ph[i].dur_ns;
    return t;
}

/* What a backend is like, for the scheduler and eng_law (eng_backend_ops.caps).
 * The scheduler asks these instead of knowing backends by name. */
enum {
    /* step() spends its time asleep until a deadline (it computes nothing):
     * the scheduler thread may take a real-time priority so it wakes on time
     * on a busy machine. Never set by a backend that computes on the
     * scheduler thread (a real-time thread would starve the rest). */
    ENG_CAP_SLEEPS = 1u << 0,
    /* Step times are played from cfg's law and time_scale, so eng_law can
     * report the law as data. */
    ENG_CAP_PLAYS_LAW = 1u << 1,
    /* Prompt logprobs can be answered (eng_cont): the backend scores a
     * continuation through its prefill path, or computes no tokens at all
     * so the engine's seeded words score it. */
    ENG_CAP_PROMPT_LOGPROBS = 1u << 2,
};

typedef struct eng_backend_ops {
    const char *name;          /* "synthetic" | "cpu" | "cuda" (eng_backend_name) */
    unsigned caps;             /* ENG_CAP_* flags above */
    int (*create)(const eng_config *cfg, void **state, char *err, size_t errlen);
    /* Run one step that started at step_start_ns; return when it is done.
     * Fill phases[0..*n_phases) in time order. */
    int (*step)(void *state, const eng_batch *b, int64_t step_start_ns,
                eng_phase *phases, int *n_phases);
    /* A slot's sequence finished or was cancelled; its state may be reused. */
    void (*release)(void *state, int slot);
    void (*destroy)(void *state);
    /* Optional (NULL = none): why the last step failed, in words ("cuda
     * backend: ... failed: cudaErrorIllegalAddress: ..."), or NULL; the
     * engine adds it to eng_failed's message and /health's 503. */
    const char *(*last_error)(void *state);
} eng_backend_ops;

extern const eng_backend_ops eng_backend_synthetic;
extern const eng_backend_ops eng_backend_cpu;  /* engine/cpu/backend_cpu.c */
extern const eng_backend_ops eng_backend_cuda; /* engine/cuda/backend_cuda.c */

#endif
