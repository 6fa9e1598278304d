/* url.c: the URLs loadlaw sends requests to. Where a URL's parts lie, which
 * URLs are accepted (http and https with a host, nothing libcurl would guess
 * a scheme for), and one way to derive a URL from a base: the path goes
 * before the base's query, so that an endpoint such as Azure's
 * ".../deployments/d?api-version=2024-02-01" keeps its query on the chat
 * request, /metrics and /start_profile alike. */
#include "common.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://" here (a
 * "host:port" is no scheme). The length of "scheme://", or 0. */
static size_t scheme_len(const char *url)
{
    size_t i = 0;
    if (!isalpha((unsigned char)url[0]))
        return 0;
    while (isalnum((unsigned char)url[i]) || url[i] == '+' || url[i] == '-' || url[i] == '.')
        i++;
    return strncmp(url + i, "://", 3) == 0 ? i + 3 : 0;
}

void ll_url_split(const char *url, ll_url_parts *p)
{
    p->auth = scheme_len(url);
    p->path = p->auth + strcspn(url + p->auth, "/?#");
    p->query = p->path + strcspn(url + p->path, "?#");
    p->frag = p->query + strcspn(url + p->query, "#");
    p->end = p->frag + strlen(url + p->frag);
}

/* The port of an authority's host part [host, end) ("h", "h:8000",
 * "[::1]:8000"), when there is one, is 1..65535 in digits: a password
 * holding '/' ("u:ab/cd@h") leaves "u:ab" here, which libcurl refuses
 * only after the URL was shown. */
static int port_ok(const char *host, const char *end)
{
    const char *c = host;
    if (*c == '[') {
        const char *rb = memchr(c, ']', (size_t)(end - c));
        if (!rb)
            return 0;
        c = rb + 1;
        if (c == end)
            return 1;
        if (*c != ':')
            return 0;
    } else {
        c = memchr(host, ':', (size_t)(end - host));
        if (!c)
            return 1;
    }
    long v = 0;
    if (++c == end)
        return 1; /* "h:" is the default port (RFC 3986 3.2.3) */
    for (; c < end; c++) {
        if (!isdigit((unsigned char)*c) || (v = v * 10 + (*c - '0')) > 65535)
            return 0;
    }
    return v > 0;
}

int ll_url_check(const char *url, char *err, size_t errlen)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    const char *why = NULL, *host = url + u.auth;
    for (const char *c = host; c < url + u.path; c++)
        if (*c == '@')
            host = c + 1;
    if (u.auth == 0)
        why = "has no scheme";
    else if (!(u.auth == 7 && strncasecmp(url, "http://", 7) == 0) &&
             !(u.auth == 8 && strncasecmp(url, "https://", 8) == 0))
        why = "is not an http(s) URL";
    else if (host == url + u.path || *host == ':')
        why = "has no host";
    else if (!port_ok(host, url + u.path))
        why = "has a port that is not a number in 1..65535";
    if (!why)
        return 0;
    char *shown = ll_redact_url(url);
    ll_errf(err, errlen, "'%s' %s; write http://... or https://...", shown ? shown : "(url)", why);
    free(shown);
    return LL_EINVAL;
}

/* s[0, k) onto out at *o (room n), counting what would not fit too. */
static void put(char *out, size_t n, size_t *o, const char *s, size_t k)
{
    if (*o < n)
        memcpy(out + *o, s, *o + k < n ? k : n - *o);
    *o += k;
}

int ll_url_join(const char *base, const char *drop, const char *path, char *out, size_t n)
{
    ll_url_parts b;
    ll_url_split(base, &b);
    size_t end = b.query, dl = drop ? strlen(drop) : 0, o = 0;
    while (end > b.path && base[end - 1] == '/')
        end--;
    if (dl && end - b.path >= dl && strncmp(base + end - dl, drop, dl) == 0)
        end -= dl;
    /* path's own path and query; a lone '?' is no query */
    size_t pl = strcspn(path, "?#"), ql = strcspn(path + pl, "#"), bql = b.frag - b.query;
    ql = ql > 1 ? ql : 0;
    bql = bql > 1 ? bql : 0;
    put(out, n, &o, base, end);
    if (pl && path[0] != '/')
        put(out, n, &o, "/", 1);
    put(out, n, &o, path, pl + ql);
    if (bql) {
        put(out, n, &o, ql ? "&" : "?", 1);
        put(out, n, &o, base + b.query + 1, bql - 1);
    }
    if (o >= n) {
        if (n)
            out[0] = '\0';
        return LL_ERANGE;
    }
    out[o] = '\0';
    return 0;
}
