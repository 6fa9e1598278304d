/* script.h: the scripted batches the conformance suite steps a backend
 * through (conformance.h), as data, so every backend runs the same steps.
 *
 * A script prefills its slots 0..slots-1 at step 0 (ptok[k] prompt tokens
 * each), then decodes them, slot k at context ptok[k] + 1 + s in step s.
 * Two shapes of it:
 *   SCRIPT_MIXED  6 steps over 3 slots (40, 7 and 300 prompt tokens); step 3
 *                 also prefills slot 3 (20 tokens), so one step has both
 *                 phases.
 *   SCRIPT_TP     7 steps over 4 slots (40, 7, 300 and 96 prompt tokens);
 *                 step 1 decodes slot 0 alone, a step with N = 1.
 * Include only from the suite (needs backend.h). */
#ifndef LOADLAW_TESTS_SCRIPT_H
#define LOADLAW_TESTS_SCRIPT_H

#include "backend.h"

#define SCRIPT_MAX_STEPS 7
#define SCRIPT_MAX_SLOTS 4

typedef struct script_def {
    const char *name;
    int steps, slots;
    int ptok[SCRIPT_MAX_SLOTS];
    int mixed_step, mixed_tok; /* the step that also prefills slot `slots` (-1: none), its tokens */
    int single_step;           /* the step that decodes slot 0 alone (-1: none) */
} script_def;

static const script_def SCRIPT_MIXED = {"mixed", 6, 3, {40, 7, 300}, 3, 20, -1};
static const script_def SCRIPT_TP = {"tp", 7, 4, {40, 7, 300, 96}, -1, 0, 1};

/* The arrays a batch of the script points into (keep it alive while the
 * batch is used). */
typedef struct script_step {
    int pslot[SCRIPT_MAX_SLOTS], ptok[SCRIPT_MAX_SLOTS], dslot[SCRIPT_MAX_SLOTS];
    int64_t dctx[SCRIPT_MAX_SLOTS];
    int ps, pt;
} script_step;

/* Fill *b with step s of script d (arrays in *k). */
static inline void script_batch(const script_def *d, int s, script_step *k, eng_batch *b)
{
    *k = (script_step){.ps = d->slots, .pt = d->mixed_tok};
    *b = (eng_batch){0};
    int total = 0;
    int64_t ctx = 0;
    for (int i = 0; i < d->slots; i++) {
        k->pslot[i] = k->dslot[i] = i;
        k->ptok[i] = d->ptok[i];
        k->dctx[i] = d->ptok[i] + 1 + s;
        total += d->ptok[i];
        ctx += k->dctx[i];
    }
    if (s == 0) {
        b->n_prefill = d->slots;
        b->prefill_slot = k->pslot;
        b->prefill_tok = k->ptok;
        b->prefill_tok_total = total;
    } else {
        b->n_decode = s == d->single_step ? 1 : d->slots;
        b->decode_slot = k->dslot;
        b->decode_ctx = k->dctx;
        b->ctx_tok_total = b->n_decode == 1 ? k->dctx[0] : ctx;
    }
    if (s == d->mixed_step) { /* a step with both: slot `slots` prefills while the others decode */
        b->n_prefill = 1;
        b->prefill_slot = &k->ps;
        b->prefill_tok = &k->pt;
        b->prefill_tok_total = d->mixed_tok;
    }
}

#endif
