/* backend_script.h: the scripted batches the backend tests step through
 * (cpu, cuda, cuda tp), so every backend is checked on the same script.
 *
 * SCRIPT_STEPS steps over SCRIPT_SLOTS sequences in slots 0..2: step 0
 * prefills them (40, 7 and 300 prompt tokens); the others decode all three
 * (contexts 41+s, 8+s, 301+s); step 3 also prefills slot 3 (20 tokens), so
 * one step has both phases. Include only from a test (needs backend.h). */
#ifndef LOADLAW_TESTS_BACKEND_SCRIPT_H
#define LOADLAW_TESTS_BACKEND_SCRIPT_H

#include "backend.h"

#define SCRIPT_STEPS 6
#define SCRIPT_SLOTS 3

/* The arrays a batch of the script points into (keep it alive while the
 * batch is used). */
typedef struct script_step {
    int pslot[SCRIPT_SLOTS], ptok[SCRIPT_SLOTS], dslot[SCRIPT_SLOTS];
    int64_t dctx[SCRIPT_SLOTS];
    int ps, pt;
} script_step;

/* Fill *b with step s of the script (arrays in *k). */
static inline void script_batch(int s, script_step *k, eng_batch *b)
{
    *k = (script_step){.pslot = {0, 1, 2}, .ptok = {40, 7, 300}, .dslot = {0, 1, 2},
                       .dctx = {41 + s, 8 + s, 301 + s}, .ps = 3, .pt = 20};
    *b = (eng_batch){0};
    if (s == 0) {
        b->n_prefill = SCRIPT_SLOTS;
        b->prefill_slot = k->pslot;
        b->prefill_tok = k->ptok;
        b->prefill_tok_total = 347;
    } else {
        b->n_decode = SCRIPT_SLOTS;
        b->decode_slot = k->dslot;
        b->decode_ctx = k->dctx;
        b->ctx_tok_total = k->dctx[0] + k->dctx[1] + k->dctx[2];
    }
    if (s == 3) { /* a step with both: slot 3 prefills while 0..2 decode */
        b->n_prefill = 1;
        b->prefill_slot = &k->ps;
        b->prefill_tok = &k->pt;
        b->prefill_tok_total = 20;
    }
}

#endif
