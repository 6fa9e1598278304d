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

#include "engine.h"

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
} eng_batch;

/* A timed phase inside a step (for /metrics and the profiler trace). */
#define ENG_MAX_PHASES 8
typedef struct eng_phase {
    const char *name;          /* static string: "prefill", "decode", "dense", "attention", ... */
    int64_t start_ns, dur_ns;
} eng_phase;

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
} eng_backend_ops;

extern const eng_backend_ops eng_backend_synthetic;
extern const eng_backend_ops eng_backend_cpu;  /* engine/cpu/backend_cpu.c */

#endif
