/* origin.c: whether two URLs share an origin (scheme, host, port), the rule
 * that keeps the requests' credentials (an API key, an Authorization or
 * X-Api-Key header) to the server they were given for when a second URL is
 * fetched beside it (the sweep's scraper of /metrics). Anything this parser
 * is unsure of matches nothing: a URL that two parsers might read as two
 * different hosts must not receive a key. */
#include "common.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

typedef struct origin {
    const char *scheme, *host;
    size_t scheme_len, host_len;
    long port;
} origin;

/* A scheme's port when the URL names none; -1 when it has no default here. */
static long default_port(const char *scheme, size_t len)
{
    if (len == 4 && strncasecmp(scheme, "http", 4) == 0)
        return 80;
    if (len == 5 && strncasecmp(scheme, "https", 5) == 0)
        return 443;
    return -1;
}

/* [p, end) all decimal digits, at most 65535; -1 otherwise. */
static long parse_port(const char *p, const char *end)
{
    long v = 0;
    if (p == end)
        return -1;
    for (; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (*p - '0');
        if (v > 65535)
            return -1;
    }
    return v;
}

/* 0 with o filled, or -1 when url's origin is unclear. */
static int get_origin(const char *url, origin *o)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    if (u.auth < 4) /* "x://" at least */
        return -1;
    const char *a = url + u.auth, *end = url + u.path, *at = memchr(a, '@', (size_t)(end - a));
    if (at) {
        if (memchr(at + 1, '@', (size_t)(end - at - 1)))
            return -1; /* "http://k@a@b": which host is meant depends on the parser */
        a = at + 1;
    }
    const char *host_end;
    if (*a == '[') { /* IPv6 literal: its ':'s are no port */
        const char *rb = memchr(a, ']', (size_t)(end - a));
        if (!rb || (rb + 1 < end && rb[1] != ':'))
            return -1;
        host_end = rb + 1;
    } else {
        host_end = memchr(a, ':', (size_t)(end - a));
        if (!host_end)
            host_end = end;
    }
    for (const char *c = a; c < host_end; c++)
        if (!isgraph((unsigned char)*c) || *c == '\\' || *c == '%')
            return -1;
    o->scheme = url;
    o->scheme_len = u.auth - 3;
    o->host = a;
    o->host_len = (size_t)(host_end - a);
    /* "http://h:" is the default port too (RFC 3986 3.2.3) */
    o->port = host_end + 1 < end ? parse_port(host_end + 1, end) : default_port(o->scheme, o->scheme_len);
    return o->host_len && o->port >= 0 ? 0 : -1;
}

int ll_same_origin(const char *a, const char *b)
{
    origin x, y;
    if (!a || !b || get_origin(a, &x) || get_origin(b, &y))
        return 0;
    return x.scheme_len == y.scheme_len && strncasecmp(x.scheme, y.scheme, x.scheme_len) == 0 &&
           x.host_len == y.host_len && strncasecmp(x.host, y.host, x.host_len) == 0 && x.port == y.port;
}
