/* sse.h (internal to loadgen/): incremental Server-Sent Events framing and the
 * OpenAI streaming-delta interpreter that turns events into token chunks.
 *
 * Both are fed whatever bytes libcurl hands over, split anywhere (one byte at
 * a time included): the framer keeps a partial line, the interpreter keeps a
 * partial <think>/</think> tag, so results do not depend on the split.
 * Not thread-safe; one of each per transfer.
 */
#ifndef LOADLAW_LOADGEN_SSE_H
#define LOADLAW_LOADGEN_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* ---- SSE framing ---------------------------------------------------------- */

/* Called once per dispatched event with its data (lines joined by "\n", NUL-
 * terminated) and its "event:" name ("" when none). Return non-zero to stop. */
typedef int (*lg_sse_cb)(void *ctx, const char *event, const char *data, size_t len);

typedef struct lg_sse {
    ll_buf line;        /* the current, unterminated line */
    ll_buf data;        /* data lines of the current event, each + '\n' */
    char event[32];
    int has_data;
    int cr_pending;     /* last byte was '\r': a following '\n' belongs to it */
    lg_sse_cb cb;
    void *ctx;
} lg_sse;

/* The most bytes one line, or one event's data, may hold: a server that never
 * ends a line must not take the client's memory (a real chunk is < 1 KiB). */
#define LG_SSE_MAX_BYTES (16u << 20)

void lg_sse_init(lg_sse *s, lg_sse_cb cb, void *ctx);
/* Returns 0, the callback's non-zero value, LL_ENOMEM, or LL_ERANGE when a
 * line or an event passes LG_SSE_MAX_BYTES (the stream cannot go on). */
int lg_sse_feed(lg_sse *s, const char *p, size_t n);
/* End of stream: a complete data line not yet followed by a blank line is
 * dispatched (servers that close right after "data: [DONE]\n" exist). */
int lg_sse_finish(lg_sse *s);
void lg_sse_free(lg_sse *s);

/* ---- OpenAI delta interpretation ----------------------------------------- */

/* The stream's dialect: which events carry text and usage. */
typedef enum lg_dialect {
    LG_DIALECT_OPENAI = 0,     /* chat / completions: choices[].delta / text, usage */
    LG_DIALECT_RESPONSES,      /* /v1/responses: typed response.* events */
    LG_DIALECT_GENERATE,       /* SGLang /generate: cumulative "text" + meta_info */
} lg_dialect;

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
    lg_dialect dialect;        /* set after lg_delta_init; OPENAI by default */
    size_t gen_len;            /* generate: bytes of cumulative text already seen */
    /* keep_text (set after init): the streamed text by kind, tags left out,
     * for a tokenizer to count when the server sends no usage */
    int keep_text;
    ll_buf think_text, answer_text;
    /* Set after init when the scenario records outputs (outputs.h): each
     * chat/completions event's first choice goes to it; freed by
     * lg_delta_free. NULL (the default) costs one test per event. */
    struct lg_outputs *out;
} lg_delta;

#define LG_DELTA_ERRMSG_BYTES 256

void lg_delta_init(lg_delta *d);
void lg_delta_free(lg_delta *d);
/* Mark the stream failed with this message (cut to LG_DELTA_ERRMSG_BYTES). */
void lg_delta_set_error(lg_delta *d, const char *msg);
/* The error's message, "" when none was kept. */
const char *lg_delta_errmsg(const lg_delta *d);
/* Interpret one event: its "event:" name (NULL or "" for none) and data. An
 * event named "error" is an error event whatever its data holds. */
void lg_delta_event(lg_delta *d, const char *event, const char *data, size_t len, lg_delta_out *out);

/* Error message from an OpenAI-style error body ({"error":{"message":..}},
 * {"object":"error","message":..}, {"error":"text"}); NULL when none. */
int lg_error_message(const char *body, size_t len, char *out, size_t outlen);

#endif
