/* outputs.h (internal to loadgen/): what a request produced, gathered from
 * its stream when the scenario records outputs (request.record_outputs,
 * --record-outputs) and handed to its record (records.h ll_rec_outputs).
 *
 * sse.c calls lg_out_choice with each chat/completions event's first choice
 * only when lg_delta.out is set, so a run that records no outputs does no
 * work here. One per transfer, on its worker thread; not thread-safe. */
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
/* One event's first choice (chat: delta and logprobs.content, whose entries
 * carry an "id" on llama.cpp; completions: text and logprobs.tokens/
 * token_logprobs/top_logprobs, or llama.cpp's content[]; either: token_ids). */
void lg_out_choice(lg_outputs *o, const lg_jtape *t, const lg_jnode *choice);
/* A Responses API text delta event (response.output_text.delta or
 * response.reasoning_text.delta): its delta and logprobs[] of {token,
 * logprob, top_logprobs}. o NULL: nothing (outputs not recorded). */
void lg_out_responses(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev);
/* An SGLang /generate event: text (n bytes) is what it added to the output;
 * meta_info.output_token_logprobs ([logprob, id, text] each) with
 * output_top_logprobs, or else output_ids. cumulative: the event repeats
 * every token so far (SGLang's default), so the ones already taken are
 * skipped; else each event has only its new ones. */
void lg_out_generate(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev, const char *text, size_t n, int cumulative);
/* Keep the request body's prompt (chat: "messages"; else "prompt", or
 * /generate's "text") as
 * JSON, for `loadlaw check-decode` to send back with the decoded tokens;
 * only its size when it is over LL_REC_OUTPUT_PROMPT_MAX. Once per request,
 * before it is sent. */
void lg_out_prompt(lg_outputs *o, const char *body, size_t len, int chat);
/* The record's outputs under key (caller owns; ll_rec_outputs_free), NULL
 * when out of memory. o is left empty. */
ll_rec_outputs *lg_out_take(lg_outputs *o, const char *key);

#endif
