/* delta.h (internal to loadgen/): a stream's events turned into token
 * chunks: what every server API shares (the tape of each event, error
 * events, <think> tags in content, counting tokens per chunk) and the state
 * one stream keeps. What an event of one API means is that API's
 * interpreter (api.h lg_api.event, one file each); the helpers below the
 * struct are the parts they call.
 *
 * Fed event by event by the SSE framer (sse.h), whatever the split of the
 * bytes: a partial <think>/</think> tag is held across events, so results
 * do not depend on the split. Not thread-safe; one per transfer.
 */
#ifndef LOADLAW_LOADGEN_DELTA_H
#define LOADLAW_LOADGEN_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jtape.h"

struct lg_api;

/* What one event meant. */
typedef struct lg_delta_out {
    int think_tok, answer_tok; /* tokens in this chunk by kind (0 for role-only) */
    int reclassify;            /* a bare </think> arrived: earlier answer tokens were thinking */
    /* text bytes of this event by kind: the weights that attribute a final
     * usage over the chunks when the stream's own count disagrees with it */
    uint32_t think_bytes, answer_bytes;
} lg_delta_out;

typedef struct lg_delta {
    int done;                  /* [DONE] seen */
    int error;                 /* an error event was seen */
    /* its message (LG_DELTA_ERRMSG_BYTES, allocated at the first error: most
     * streams never have one, and 256 B in each was 1.6% of a stream's
     * client memory); NULL before, or out of memory. lg_delta_errmsg reads it. */
    char *errmsg;
    int in_think;              /* inside <think>...</think> in content */
    int saw_tag;               /* any think tag seen in content */
    char tag[12];              /* a possible tag prefix held across chunks */
    size_t tag_len;
    int64_t last_ct;           /* continuous usage: completion_tokens so far */
    int has_cont_usage;
    int last_think;            /* the last chunk that carried tokens was thinking */
    int bad_events;            /* events that were not JSON */
    /* events read although a string in them held a raw control byte, which
     * JSON forbids (jtape.h: kept as sent, a NUL as U+FFFD; their tokens are
     * counted), and the first such byte */
    int ctl_events, ctl_byte;
    /* events the fast JSON scanner handed to the full parser (jtape.h): an
     * unusual escape or shape; bad_events are among them */
    int slow_events;
    /* final usage chunk (choices: []); -1 when absent */
    int64_t usage_prompt, usage_completion, usage_reasoning;
    /* What the server said about the request beside its tokens (records.h
     * request "cached_tok", "finish", "server"): prompt tokens its cache
     * served (-1 = not said), the finish reason ("" = none), its own timing
     * (llama.cpp "timings", vLLM "metrics", SGLang meta_info). */
    int64_t usage_cached;
    char finish[16];
    ll_rec_srv_timing srv;
    /* The server API whose events these are (api.h lg_api_of), set after
     * lg_delta_init; chat's by default. */
    const struct lg_api *api;
    /* What that API's interpreter keeps from one event to the next (SGLang
     * /generate: bytes of the cumulative text already seen). */
    size_t api_mark;
    /* keep_text (set after init): the streamed text by kind, tags left out,
     * for a tokenizer to count when the server sends no usage */
    int keep_text;
    ll_buf think_text, answer_text;
    /* Set after init when the scenario records outputs (outputs.h): the API's
     * interpreter hands it what each event adds; freed by lg_delta_free.
     * NULL (the default) costs one test per event. */
    struct lg_outputs *out;
} lg_delta;

#define LG_DELTA_ERRMSG_BYTES 256

void lg_delta_init(lg_delta *d);
void lg_delta_free(lg_delta *d);
/* Mark the stream failed with this message (cut to LG_DELTA_ERRMSG_BYTES). */
void lg_delta_set_error(lg_delta *d, const char *msg);
/* The error's message, "" when none was kept. */
const char *lg_delta_errmsg(const lg_delta *d);
/* Interpret one event: its "event:" name (NULL or "" for none) and data.
 * "[DONE]", data that is not JSON and an event named "error" (an error
 * whatever its data holds) are read here; every other event goes to
 * d->api's interpreter. */
void lg_delta_event(lg_delta *d, const char *event, const char *data, size_t len, lg_delta_out *out);

/* Error message from an OpenAI-style error body ({"error":{"message":..}},
 * {"object":"error","message":..}, {"error":"text"}); NULL when none. */
int lg_error_message(const char *body, size_t len, char *out, size_t outlen);

/* ---- for the APIs' interpreters (api_*.c) ------------------------------- */

/* Content text of an event (n bytes): split into thinking and answer bytes
 * (*tb, *ab, added to) by <think> tags, held across events; *reclass set
 * when a bare </think> makes the answer so far thinking. */
void lg_delta_content(lg_delta *d, const char *s, size_t n, size_t *tb, size_t *ab, int *reclass);
/* Reasoning text outside content: all thinking, no tags to look for. */
void lg_delta_thinking(lg_delta *d, const char *s, size_t n, size_t *tb);
/* The event's tokens from its text bytes and, when the server sends it
 * (else -1), the running completion_tokens (continuous usage). */
void lg_delta_count(lg_delta *d, size_t tb, size_t ab, int64_t ct_now, lg_delta_out *out);
/* A finish reason as sent (a string, or SGLang's {"type": ...}). */
void lg_delta_finish(lg_delta *d, const lg_jtape *t, const lg_jnode *v);
/* Mark the stream failed with the first n bytes of msg. */
void lg_delta_fail(lg_delta *d, const char *msg, size_t n);
/* An event whose body is an error (lg_json_error): the stream marked
 * failed, 1; else 0. */
int lg_delta_error_body(lg_delta *d, const lg_jtape *t);
/* A token count from the server at o's member k, or -1 when absent or not a
 * sane count (the value is untrusted). */
int64_t lg_jcount(const lg_jtape *t, const lg_jnode *o, const char *k);
/* The message of an OpenAI-style error object at root into out: 1, or 0
 * when root holds none. */
int lg_json_error(const lg_jtape *t, const lg_jnode *root, char *out, size_t outlen);
/* s (n bytes, NULL: absent) is the literal lit. */
int lg_str_is(const char *s, size_t n, const char *lit);

#endif
