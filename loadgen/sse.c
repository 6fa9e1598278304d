/* sse.c: incremental SSE framing (sse.h).
 *
 * Framing follows the WHATWG event-stream rules that matter here: lines end in
 * LF, CRLF or a lone CR (a CRLF split across two feeds is still one line end);
 * ':' starts a comment; "data:" lines accumulate, joined by '\n'; a blank line
 * dispatches. A line is scanned for its end 8 bytes at a time and handed on
 * in place when it is whole in the bytes fed; only a line split across feeds
 * is copied. */
#include "sse.h"

#include <string.h>

void lg_sse_init(lg_sse *s, lg_sse_cb cb, void *ctx)
{
    memset(s, 0, sizeof *s);
    s->cb = cb;
    s->ctx = ctx;
}

void lg_sse_free(lg_sse *s)
{
    ll_buf_free(&s->line);
    ll_buf_free(&s->data);
}

static int dispatch(lg_sse *s)
{
    int rc = 0;
    if (s->has_data) {
        /* Drop the '\n' after the last data line (the spec's join rule). */
        if (s->data.len)
            s->data.p[--s->data.len] = '\0';
        rc = s->cb(s->ctx, s->event, s->data.p ? s->data.p : "", s->data.len);
    }
    ll_buf_reset(&s->data);
    s->has_data = 0;
    s->event[0] = '\0';
    return rc;
}

static int process_line(lg_sse *s, const char *l, size_t n)
{
    if (n == 0)
        return dispatch(s);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vl = (size_t)(l + n - v);
    if (vl && v[0] == ' ') {
        v++;
        vl--;
    }
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        if (s->data.len + vl + 1 > LG_SSE_MAX_BYTES)
            return LL_ERANGE;
        s->has_data = 1;
        if (ll_buf_append(&s->data, v, vl) || ll_buf_append(&s->data, "\n", 1))
            return LL_ENOMEM;
    } else if (fl == 5 && memcmp(l, "event", 5) == 0) {
        size_t k = vl < sizeof s->event - 1 ? vl : sizeof s->event - 1;
        memcpy(s->event, v, k);
        s->event[k] = '\0';
    }
    return 0; /* id:, retry: and unknown fields do not matter here */
}

/* Whether any of the 8 bytes at q is '\n' or '\r' (SWAR: a line is ~250
 * bytes, and this loop saw each of them one at a time). */
static inline int has_line_end(const char *q)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t v, a, b;
    memcpy(&v, q, 8);
    a = v ^ (ones * '\n');
    b = v ^ (ones * '\r');
    return (((a - ones) & ~a) | ((b - ones) & ~b)) & highs ? 1 : 0;
}

int lg_sse_feed(lg_sse *s, const char *p, size_t n)
{
    size_t i = 0;
    int rc;
    if (s->cr_pending && n > 0) {
        s->cr_pending = 0;
        if (p[0] == '\n')
            i = 1;
    }
    while (i < n) {
        /* Scan for the next line end without copying when the line is whole. */
        size_t j = i;
        while (n - j >= 8 && !has_line_end(p + j))
            j += 8;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        if (j == n) {
            if (s->line.len + (n - i) > LG_SSE_MAX_BYTES)
                return LL_ERANGE;
            if (ll_buf_append(&s->line, p + i, n - i))
                return LL_ENOMEM;
            break;
        }
        if (s->line.len) {
            if (ll_buf_append(&s->line, p + i, j - i))
                return LL_ENOMEM;
            rc = process_line(s, s->line.p, s->line.len);
            ll_buf_reset(&s->line);
        } else {
            rc = process_line(s, p + i, j - i);
        }
        if (rc)
            return rc;
        if (p[j] == '\r') {
            if (j + 1 == n)
                s->cr_pending = 1;
            else if (p[j + 1] == '\n')
                j++;
        }
        i = j + 1;
    }
    return 0;
}

int lg_sse_finish(lg_sse *s)
{
    int rc = 0;
    if (s->line.len) {
        /* An unterminated last line is incomplete: it may be cut mid-JSON. */
        ll_buf_reset(&s->line);
    }
    if (s->has_data)
        rc = dispatch(s);
    return rc;
}
