/* url.c: the URLs loadlaw sends requests to. libcurl reads every request's
 * URL, so it reads them here too (ll_url_view_parse): which URLs are accepted
 * (http and https with a host, nothing libcurl would guess a scheme for) is
 * decided on its parts. One way to derive a URL from a base: the path goes
 * before the base's query, so that an endpoint such as Azure's
 * ".../deployments/d?api-version=2024-02-01" keeps its query on the chat
 * request, /metrics and /start_profile alike. */
#include "common.h"
#include "url_view.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

size_t ll_url_scheme_len(const char *url)
{
    size_t i = 0;
    if (!isalpha((unsigned char)url[0]))
        return 0;
    while (isalnum((unsigned char)url[i]) || url[i] == '+' || url[i] == '-' || url[i] == '.')
        i++;
    return strncmp(url + i, "://", 3) == 0 ? i + 3 : 0;
}

/* One part of h into *out: NULL when the URL has none. */
static int view_part(CURLU *h, CURLUPart what, char **out)
{
    CURLUcode rc = curl_url_get(h, what, out, 0);
    if (rc == CURLUE_OUT_OF_MEMORY)
        return LL_ENOMEM;
    if (rc != CURLUE_OK)
        *out = NULL;
    return 0;
}

int ll_url_view_parse(const char *url, ll_url_view *v)
{
    memset(v, 0, sizeof *v);
    size_t s = ll_url_scheme_len(url);
    if (s == 0 || url[s] == '/') {
        v->why = s == 0 ? CURLUE_BAD_SCHEME : CURLUE_BAD_SLASHES;
        return LL_EINVAL;
    }
    CURLU *h = curl_url();
    if (!h)
        return LL_ENOMEM;
    /* no CURLU_GUESS_SCHEME or CURLU_DEFAULT_SCHEME: "h:8000" is no URL */
    int rc = 0;
    v->why = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (v->why != CURLUE_OK) {
        rc = v->why == CURLUE_OUT_OF_MEMORY ? LL_ENOMEM : LL_EINVAL;
        goto done;
    }
    static const CURLUPart what[] = {CURLUPART_SCHEME, CURLUPART_USER,  CURLUPART_PASSWORD,
                                     CURLUPART_HOST,   CURLUPART_ZONEID, CURLUPART_PORT,
                                     CURLUPART_PATH,   CURLUPART_QUERY, CURLUPART_FRAGMENT};
    char **to[] = {&v->scheme, &v->user, &v->password, &v->host, &v->zone,
                   &v->port,   &v->path, &v->query,    &v->fragment};
    for (size_t i = 0; i < sizeof what / sizeof *what && rc == 0; i++)
        rc = view_part(h, what[i], to[i]);
done:
    curl_url_cleanup(h);
    return rc;
}

static void wipe_curl_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    curl_free(s);
}

void ll_url_view_free(ll_url_view *v)
{
    wipe_curl_free(v->user);
    wipe_curl_free(v->password);
    char *parts[] = {v->scheme, v->host, v->zone, v->port, v->path, v->query, v->fragment};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        curl_free(parts[i]);
    memset(v, 0, sizeof *v);
}

void ll_url_split(const char *url, ll_url_parts *p)
{
    p->auth = ll_url_scheme_len(url);
    p->path = p->auth + strcspn(url + p->auth, "/?#");
    p->query = p->path + strcspn(url + p->path, "?#");
    p->frag = p->query + strcspn(url + p->query, "#");
    p->end = p->frag + strlen(url + p->frag);
}

/* url's authority has more than one '@' ("u:p@ss@h"): libcurl takes the
 * user part to the first and then refuses the host. */
static int two_ats(const char *url)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    const char *at = memchr(url + u.auth, '@', u.path - u.auth);
    return at && memchr(at + 1, '@', (size_t)(url + u.path - at - 1));
}

/* Why libcurl refused an http(s) URL, in words (into buf when its own). */
static const char *refused_why(CURLUcode why, char *buf, size_t n)
{
    if (why == CURLUE_BAD_PORT_NUMBER)
        return "has a port that is not a number in 1..65535";
    if (why == CURLUE_NO_HOST || why == CURLUE_BAD_SLASHES)
        return "has no host";
    snprintf(buf, n, "is not a URL libcurl reads (%s)", curl_url_strerror(why));
    return buf;
}

int ll_url_check(const char *url, char *err, size_t errlen)
{
    ll_url_view v;
    int rc = ll_url_view_parse(url, &v);
    if (rc == LL_ENOMEM) {
        ll_url_view_free(&v);
        ll_errf(err, errlen, "out of memory reading a URL");
        return LL_ENOMEM;
    }
    char buf[96];
    const char *why = NULL, *fix = "write http://... or https://...";
    size_t s = ll_url_scheme_len(url);
    if (s == 0)
        why = "has no scheme";
    else if (!(s == 7 && strncasecmp(url, "http://", 7) == 0) && !(s == 8 && strncasecmp(url, "https://", 8) == 0))
        why = "is not an http(s) URL";
    else if (rc && two_ats(url)) {
        why = "has two '@' before its host";
        fix = "write an '@' in a user name or password as %40";
    } else if (rc)
        why = refused_why(v.why, buf, sizeof buf);
    else if (v.port && strcmp(v.port, "0") == 0)
        why = "has a port that is not a number in 1..65535";
    ll_url_view_free(&v);
    if (!why)
        return 0;
    char *shown = ll_redact_url(url);
    ll_errf(err, errlen, "'%s' %s; %s", shown ? shown : "(url)", why, fix);
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
