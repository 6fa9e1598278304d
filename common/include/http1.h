/* http1.h: one HTTP request at a time, blocking, on the caller's thread:
 * the helper every request outside a sweep's streams goes through (the
 * profile hook, check-decode's re-scoring, the /metrics scraper, GET
 * /v1/models). The streams themselves are loadgen's (a libcurl multi handle
 * per worker); these are the few requests around them.
 *
 * What it settles once: credentials (the bearer key, and of the scenario's
 * headers only those whose name is a secret's, common.h ll_secret_name; the
 * caller decides whether the target may have them at all, ll_same_origin),
 * wiped from memory when the handle closes; a bound on the response body;
 * timeouts; no signals (CURLOPT_NOSIGNAL, any thread); libcurl's own words
 * for a failed transfer.
 *
 * A handle (ll_http1_open) keeps its libcurl easy handle, so the next
 * request reuses the connection (the scraper asks twice a second);
 * ll_http1_once is open, request, close. Not thread-safe: one handle per
 * thread. curl_global_init must have run (main does it). */
#ifndef LOADLAW_HTTP1_H
#define LOADLAW_HTTP1_H

#include <stddef.h>

#include "common.h"

typedef struct ll_http1_opts {
    const char *url;
    const char *content_type;  /* "application/json": sent as Content-Type; NULL: none */
    const char *api_key;       /* "Authorization: Bearer KEY"; NULL: none; never logged */
    char *const *headers;      /* "Name: value" lines: only those whose name ll_secret_name
                                * names are sent (the credentials among a scenario's headers) */
    size_t n_headers;
    size_t max_bytes;          /* the most response bytes kept */
    int keep_head;             /* past max_bytes: 1, the rest is read and dropped (a reply
                                * kept for its first words); 0, the transfer fails */
    long timeout_ms;           /* the whole request; <= 0: libcurl's default (none) */
    long connect_timeout_ms;   /* <= 0: libcurl's default */
} ll_http1_opts;

typedef struct ll_http1 ll_http1;

/* A handle for o's URL with o's credentials (o's strings are copied as
 * needed; o need not outlive the call). 0, LL_ENOMEM, or LL_EINVAL when
 * libcurl refused an option (a reason in err). */
int ll_http1_open(const ll_http1_opts *o, ll_http1 **out, char *err, size_t errlen);
/* Later requests go to url (the credentials stay: the caller has checked
 * the origin). 0 or LL_EINVAL. */
int ll_http1_set_url(ll_http1 *h, const char *url);
/* One request: POST of the NUL-terminated body, or GET when body is NULL.
 * resp (reset first) gets the response body (NUL-terminated, at most
 * max_bytes), *status the HTTP status (0 when none came, also on failure).
 * 0 when a response came, whatever its status; LL_EIO when the transfer
 * failed (no answer, timeout, a body over max_bytes without keep_head),
 * with libcurl's words in err; LL_ENOMEM. */
int ll_http1_do(ll_http1 *h, const char *body, ll_buf *resp, long *status, char *err, size_t errlen);
/* Closes the connection and wipes the credentials. NULL is a no-op. */
void ll_http1_close(ll_http1 *h);
/* ll_http1_open, ll_http1_do, ll_http1_close. */
int ll_http1_once(const ll_http1_opts *o, const char *body, ll_buf *resp, long *status, char *err, size_t errlen);

#endif
