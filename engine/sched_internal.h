/* sched_internal.h: the scheduler's state, shared by sched.c (admission,
 * batches, the thread) and sched_emit.c (a step's tokens to their streams,
 * and the backpressure wait before the next step). Private to engine/. */
#ifndef LOADLAW_ENGINE_SCHED_INTERNAL_H
#define LOADLAW_ENGINE_SCHED_INTERNAL_H

#include "internal.h"

typedef struct eng_sched {
    int cap;                 /* max_running */
    eng_req **run;           /* (cap) admitted requests, oldest first */
    int n_run;
    int *free_slot;          /* (cap) stack of free slots */
    int n_free;
    int *dec_slot, *pre_slot, *pre_tok;
    int64_t *dec_ctx;
    eng_req **dec_req, **pre_req;
    /* the model's tokens (backend.h, eng_tok): seeds in, tokens out; pre_at[k]
     * is pre_req[k]'s index in the batch (pre_req is reordered) */
    uint64_t *dec_seed, *pre_seed;
    eng_tok *dec_out, *pre_out;
    const eng_cont **pre_cont;     /* (cap) a completing chunk's continuation, else NULL */
    int *pre_at;
} eng_sched;

/* Wake a suspended connection: caller holds io_mu. */
void eng_sched_wake(eng_req *r);
/* Hand a step's tokens (one per sequence: n_dec decoding, then the
 * n_pre_done prefills that completed) to their streams, with TTFT/ITL into
 * /metrics. */
void eng_sched_emit(eng_engine *e, eng_sched *s, int n_dec, int n_pre_done, int64_t step_end_ns);
/* Backpressure (sched.c's DESIGN): wait, at most 10 ms, until no reading
 * client has more than ENG_UNSENT_MAX_BYTES unsent. */
void eng_sched_wait_drained(eng_engine *e, eng_sched *s);

#endif
