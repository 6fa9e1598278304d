/* outputs.h (internal to loadgen/): what a request produced, gathered from
 * its stream when the scenario records outputs (request.record_outputs,
 * --record-outputs) and handed to its record (records.h ll_rec_outputs).
 *
 * Each server API's interpreter (api.h) hands its events' outputs here only
 * when lg_delta.out is set, so a run that records no outputs does no work
 * here. One per transfer, on its worker thread; not thread-safe. */
#ifndef LOADLAW_LOADGEN_OUTPUTS_H
#define LOADLAW_LOADGEN_OUTPUTS_H

#include "common.h"
#include "jtape.h"

typedef struct lg_out_alt {
    size_t tok_i;              /* the token (index into tok) it is an alternative of */
    char *s;
    double lp;
} lg_out_alt;

typedef struct lg_outputs {
    LL_VEC(int64_t) ids;       /* the server's token ids, where it sends them */
    LL_VEC(char *) tok;        /* token texts, from logprobs */
    LL_VEC(double) lp;         /* the chosen tokens' logprobs (parallel to tok) */
    LL_VEC(lg_out_alt) alts;   /* top-k alternatives, in token order */
    ll_buf text;               /* output text, the first LL_REC_OUTPUT_TEXT_MAX bytes */
    size_t text_bytes;
    uint64_t text_hash;
    int oom;                   /* an allocation failed: the record says less */
    char *prompt;              /* the body's prompt member as JSON (lg_out_prompt), or NULL */
    size_t prompt_bytes;
} lg_outputs;

/* A new collector, NULL when out of memory (the request then records none). */
lg_outputs *lg_out_new(void);
void lg_out_free(lg_outputs *o);
/* Keep the request body's member key (the API's: api.h lg_api.prompt_key;
 * NULL: nothing) as JSON, for `loadlaw check-decode` to send back with the
 * decoded tokens; only its size when it is over LL_REC_OUTPUT_PROMPT_MAX.
 * Once per request, before it is sent. */
void lg_out_prompt(lg_outputs *o, const char *body, size_t len, const char *key);

/* ---- for the APIs' outputs readers (api_*.c) ---------------------------- */

/* n bytes of output text (kept up to LL_REC_OUTPUT_TEXT_MAX, hashed whole). */
void lg_out_text(lg_outputs *o, const char *s, size_t n);
/* One token: its text (s NULL: none), logprob and id (-1: none; a text
 * "token_id:N", vLLM's return_tokens_as_token_ids, gives N instead). */
void lg_out_token(lg_outputs *o, const char *s, size_t n, double lp, int64_t id);
/* An alternative of the last token taken. */
void lg_out_alt_add(lg_outputs *o, const char *s, size_t n, double lp);
/* v's id onto the ids, when it is one (lg_out_id_of). */
void lg_out_id(lg_outputs *o, const lg_jnode *v);
/* A server's number, NAN when v is none. */
double lg_out_num(const lg_jnode *v);
/* A server's number as a token id: a whole number in [0, 2^53), else -1
 * (a 1e300 or a -3 is no id, and is never cast). */
int64_t lg_out_id_of(const lg_jnode *v);
/* Per-token logprobs in the shape chat and the Responses API share: an
 * array of {token, logprob, top_logprobs: [{token, logprob}]}, with
 * llama.cpp an "id" in each (taken when with_ids). */
void lg_out_logprobs(lg_outputs *o, const lg_jtape *t, const lg_jnode *content, int with_ids);
/* The record's outputs under key (caller owns; ll_rec_outputs_free), NULL
 * when out of memory. o is left empty. */
ll_rec_outputs *lg_out_take(lg_outputs *o, const char *key);

#endif
