/* sse.h (internal to loadgen/): incremental Server-Sent Events framing: the
 * bytes of a response in, its events (name and data) out. What an event
 * means is the server API's business (delta.h, api.h).
 *
 * Fed whatever bytes libcurl hands over, split anywhere (one byte at a time
 * included): the framer keeps a partial line, so its events do not depend
 * on the split. Not thread-safe; one per transfer.
 */
#ifndef LOADLAW_LOADGEN_SSE_H
#define LOADLAW_LOADGEN_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

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

#endif
