/* sse_server.h: a small OpenAI-style SSE server for loadgen tests, on raw
 * loopback sockets (one thread per connection), that can also misbehave in
 * the ways servers do (ts_mode: error statuses and bodies, cut, stalled and
 * reset streams, broken JSON): the real libcurl client talks to it over TCP. */
#ifndef LOADLAW_TESTS_SSE_SERVER_H
#define LOADLAW_TESTS_SSE_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ts_mode {
    TS_OK = 0,        /* role chunk, think + answer chunks with continuous usage, usage, [DONE] */
    TS_HTTP500,       /* 500 with an OpenAI error body */
    TS_HTTP429,       /* 429 with a flat error body */
    TS_ERR_NESTED,    /* 2 tokens, then {"error":{...}} */
    TS_ERR_FLAT,      /* 2 tokens, then {"object":"error",...} */
    TS_CUT,           /* 2 tokens, then close mid-body (chunked stream unterminated) */
    TS_STALL,         /* 1 token, then silence until the client gives up */
    TS_RESET,         /* 1 token, then a TCP reset */
    TS_MIX,           /* request i gets mode (i % 8) */
    TS_ENDLESS,       /* 1 token, then one "data:" line that never ends (at most 64 MiB) */
    TS_BADJSON,       /* 2 tokens, an event cut mid-JSON, 2 tokens, [DONE]: a stream that ends well */
    TS_USAGE_JUMP,    /* continuous usage 1e9, 0, 1e9, 0, 1e9 over 5 content chunks, [DONE] */
    TS_DONE_ONLY,     /* the role chunk, a finish chunk and [DONE]: a 200 with no token */
    TS_JSON_BODY,     /* 200 with one application/json completion: "stream" ignored */
    TS_GZIP,          /* 200 event stream in Content-Encoding: gzip, never asked for */
    TS_GZIP_503,      /* 503 whose body is in Content-Encoding: gzip */
    TS_MANY_HEADERS,  /* 200 with 1024 headers of 1 KB each before the stream */
    TS_BIG_HEADER,    /* 200 with one 1 MiB header before the stream */
    TS_CTL_BYTE,      /* 2 tokens, one whose text holds a raw NUL byte, 2 tokens, [DONE] */
} ts_mode;

typedef struct ts_server ts_server;

typedef struct ts_config {
    ts_mode mode;
    int think_tok, answer_tok;  /* tokens per ok stream */
    int gap_us;                 /* between token chunks */
    int tokens_per_chunk;       /* > 1: several tokens per chunk (continuous usage says so) */
    int barrier;                /* > 0: hold the first token of the first `barrier` streams
                                   (since start or ts_set_barrier) until all of them have
                                   begun (at most 30 s), so that a level's C streams decode
                                   together however slow the machine; later streams pass */
    int usage_at_end;           /* TS_OK: no per-chunk usage; only the final usage chunk */
    int inline_think;           /* TS_OK: thinking inline in "content" as <think>..</think>,
                                   packed with the answer tokens (a chunk may hold both) */
    int reject_cont_usage;      /* a body asking continuous_usage_stats gets a 400 naming it */
    int no_usage;               /* TS_OK: no usage anywhere (with usage_at_end: no final one either) */
    int hidden_think;           /* TS_OK (not inline): the think_tok reasoning tokens are not
                                   streamed, only counted in the final usage (reasoning_tokens) */
    int stop_profile_ms;        /* POST /stop_profile answered 200 after this long, as vLLM
                                   answers once its trace is written */
    int pairs;                  /* TS_OK (not inline): token chunks two at a time, two HTTP
                                   chunks in one send() as an engine's burst: one read brings
                                   both, and libcurl makes a write callback for each */
} ts_config;

int ts_start(const ts_config *cfg, ts_server **out);
const char *ts_url(const ts_server *s);     /* "http://127.0.0.1:PORT" */
int ts_peak_streams(const ts_server *s);     /* most streams open at once */
int ts_requests(const ts_server *s);         /* completion requests received */
int ts_profile_calls(const ts_server *s);    /* POST /start_profile received */
int ts_profile_streams(const ts_server *s);  /* streams open when it was received */
char *ts_profile_body(const ts_server *s);   /* last /start_profile body (static buffer) */
/* Change the barrier now. */
void ts_set_barrier(ts_server *s, int n);
/* A barrier per sweep level, set by stream count: when the at[i]-th stream
 * since start (0-based) begins, the barrier becomes n[i] counted from it
 * (e.g. at = {0, 8, 16}, n = {1, 4, 16} for levels C = 1, 4, 16 of 8, 8 and
 * 24 requests, one after the other). At most 8 entries. */
void ts_set_barrier_plan(ts_server *s, const int *at, const int *n, int count);
/* Authorization header value of the last completion request ("" when none). */
const char *ts_last_auth(const ts_server *s);
/* Body of the last completion request (truncated to 4 KiB; "" when none). */
const char *ts_last_body(const ts_server *s);
/* Request line and headers of the last completion request (truncated to 4 KiB). */
const char *ts_last_head(const ts_server *s);
/* Every request's method and target ("POST /v1/chat/completions?x=1"), one
 * a line, in arrival order (the lines that fit in 16 KiB), copied into out
 * (n bytes). */
void ts_targets(ts_server *s, char *out, size_t n);
/* Completion requests answered 400 for asking continuous_usage_stats. */
int ts_rejected(const ts_server *s);
/* Connections accepted from 127.0.0.i (i in 1..255), as accept() gave the
 * peer's address; i = 0: from any other address. */
int ts_conns_from(const ts_server *s, int i);
void ts_stop(ts_server *s);

#endif
