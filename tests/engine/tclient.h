/* tclient.h: the few libcurl helpers the engine tests share (a blocking
 * request, SSE event splitting, starting an engine from a spec). */
#ifndef LOADLAW_TESTS_ENGINE_TCLIENT_H
#define LOADLAW_TESTS_ENGINE_TCLIENT_H

#include <pthread.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "engine.h"

typedef struct tc_resp {
    long status;       /* HTTP status, 0 when the transfer failed */
    int curl_rc;       /* CURLcode */
    ll_buf body;
    char allow[64];    /* Allow header, if any */
} tc_resp;

/* method: "GET" or "POST"; body may be NULL; body_len < 0 means strlen. */
int tc_request(const char *method, const char *url, const char *body, long body_len, tc_resp *out);
/* The same with one extra request header ("Authorization: Bearer K"; NULL: none). */
int tc_request_hdr(const char *method, const char *url, const char *body, long body_len,
                   const char *header, tc_resp *out);
void tc_resp_free(tc_resp *r);

/* Read from a raw socket into buf until it holds a whole response (headers
 * and the Content-Length body), the peer closes, or ms pass. The bytes read;
 * *closed: 0 open, 1 end-of-file, 2 reset or error. */
size_t tc_read_answer(int fd, char *buf, size_t cap, int ms, int *closed);

/* tc_request with the body moved into *out (caller frees): the HTTP status,
 * 0 when the transfer failed. */
long tc_http(const char *method, const char *url, const char *body, ll_buf *out);

/* POST base_url/v1/completions, a fixed prompt with max_tokens and
 * ignore_eos: the HTTP status (0: no answer); *completion_tokens (may be
 * NULL) gets usage.completion_tokens, -1 when absent. */
long tc_completion(const char *base_url, int max_tokens, int *completion_tokens);

/* n completions at once, one thread each (request i asks max_tokens0 + i
 * tokens): status[i] and tokens[i] as tc_completion gives them. 0, or -1
 * when a thread could not start (its status stays 0). */
int tc_completions_parallel(const char *base_url, int n, int max_tokens0, long *status, int *tokens);

/* A profiler capture around one completion of max_tokens: POST
 * /start_profile into a fresh folder under the engine's profile_dir (which
 * the engine makes), the request, /stop_profile; the trace it wrote, parsed
 * (caller frees with cJSON_Delete; the file and folder are removed), or NULL
 * with the reason in why. */
cJSON *tc_profile_trace(const char *base_url, int max_tokens, char *why, size_t whylen);

/* The payloads of "data: ..." events, in order (caller frees with tc_events_free). */
typedef struct tc_events {
    char **data;
    size_t n;
} tc_events;
int tc_sse_split(const char *body, tc_events *ev);
void tc_events_free(tc_events *ev);

/* Words (whitespace-separated) in s. */
int tc_count_words(const char *s);

/* Start an engine on an ephemeral loopback port from a spec; aborts the test
 * program when it fails (nothing else can be tested then). */
eng_engine *tc_start(const char *spec);



/* Run n identical streaming requests at once on one curl multi handle and
 * count, per transfer, its token chunks and whether [DONE] arrived. */
typedef struct tc_stream {
    long status;
    int curl_rc;
    int tokens;        /* chunks carrying a token (text beginning with a space) */
    int done;          /* saw data: [DONE] */
    ll_buf pending;    /* bytes of an event not yet complete */
    /* tc_streams_together's hold (tclient.c only) */
    const char *body_;
    size_t body_len_, body_off_;
    int ready_, released_;
} tc_stream;
int tc_streams(const char *url, const char *body, int n, tc_stream *out);
/* The same, with every request held after its headers until all n are
 * connected and waiting for their bodies, then all released at once: the
 * server gets the n requests together however slowly this host opens n
 * connections (a busy host can take seconds for 1,024). */
int tc_streams_together(const char *url, const char *body, int n, tc_stream *out);

/* A blocking request on its own thread (so a test can act while it runs). */
typedef struct tc_bg {
    const char *url;
    const char *body;
    tc_resp resp;
    pthread_t th;
} tc_bg;
void tc_bg_start(tc_bg *b, const char *url, const char *body); /* exits on failure */
void tc_bg_join(tc_bg *b);

/* Tokens in a complete SSE body (content/text chunks); -1 without [DONE]. */
int tc_stream_tokens(const char *body);

/* Value of the Prometheus sample `name` (with its labels) in text; -1 if absent. */
double tc_metric(const char *text, const char *name);

/* GETs metrics_url until the sample `name` reads `want` or timeout_s passes
 * (a gauge that follows the scheduler's thread, which a busy host may hold
 * up); returns the last value read (-1: absent or no answer). */
double tc_wait_metric(const char *metrics_url, const char *name, double want, double timeout_s);

#endif
