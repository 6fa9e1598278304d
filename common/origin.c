/* origin.c: whether two URLs share an origin (scheme, host, port), the rule
 * that keeps the requests' credentials (an API key, an Authorization or
 * X-Api-Key header) to the server they were given for when a second URL is
 * fetched beside it (the sweep's scraper of /metrics). The parts are
 * libcurl's (url_view.h), the ones the requests are sent to. Anything unclear
 * matches nothing: a URL libcurl refuses, one without a port for a scheme
 * with no default here, one whose host libcurl had to %-decode. */
#include "common.h"
#include "url_view.h"

#include <string.h>
#include <strings.h>

/* The port url is sent to: the one it gives, else its scheme's; -1 when
 * neither is known. */
static long origin_port(const ll_url_view *v)
{
    if (v->port)
        return strtol(v->port, NULL, 10); /* libcurl checked: digits, at most 65535 */
    if (strcmp(v->scheme, "http") == 0)
        return 80;
    if (strcmp(v->scheme, "https") == 0)
        return 443;
    return -1;
}

/* A '%' in url's host part ("h%2e"): libcurl decodes it, and what a name
 * decoded this way reaches is not what this rule vouches for. */
static int host_encoded(const char *url)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    const char *h = url + u.auth, *end = url + u.path, *at = memchr(h, '@', (size_t)(end - h));
    if (at)
        h = at + 1;
    return memchr(h, '%', (size_t)(end - h)) != NULL;
}

/* 0 with v filled, or -1 when url's origin is unclear (v freed). */
static int get_origin(const char *url, ll_url_view *v)
{
    if (ll_url_view_parse(url, v) == 0 && v->scheme && v->host && *v->host && origin_port(v) >= 0 &&
        !host_encoded(url))
        return 0;
    ll_url_view_free(v);
    return -1;
}

int ll_same_origin(const char *a, const char *b)
{
    ll_url_view x, y;
    if (!a || !b || get_origin(a, &x))
        return 0;
    if (get_origin(b, &y)) {
        ll_url_view_free(&x);
        return 0;
    }
    int same = strcasecmp(x.scheme, y.scheme) == 0 && strcasecmp(x.host, y.host) == 0 &&
               origin_port(&x) == origin_port(&y) && !x.zone == !y.zone && (!x.zone || strcmp(x.zone, y.zone) == 0);
    ll_url_view_free(&x);
    ll_url_view_free(&y);
    return same;
}
