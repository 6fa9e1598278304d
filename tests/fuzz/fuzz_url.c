/* fuzz_url.c: the URL rules of common/ (ll_url_check, ll_redact_url,
 * ll_url_split, ll_url_join, ll_same_origin) against libcurl's own reading
 * of the URL, curl_url with no scheme guessed: the reading every request
 * gets. The harness reads URLs with libcurl directly, not through common/.
 *
 * Property, for any input that ll_url_check accepts:
 *  - libcurl reads it;
 *  - its display, read by libcurl, has the same scheme, host (and IPv6 zone),
 *    port and path; a user "(hidden)" and no password exactly when the input
 *    has a user part; and the same query and fragment parameters, each whose
 *    name ll_secret_name calls secret valued "(hidden)", the others as given;
 *  - with the password and every secret value replaced by a canary (the rest
 *    of the text as given), the URL is still accepted and no canary shows in
 *    its display;
 *  - ll_url_split finds libcurl's user part, query and fragment in the text;
 *  - a URL joined to it (ll_url_join) has libcurl's scheme, user part, host
 *    and port, the joined path at the end of its path, the base's query after
 *    the path's own, and the same origin.
 */
#include <curl/curl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fuzz_util.h"

enum { P_SCHEME, P_USER, P_PASSWORD, P_HOST, P_ZONE, P_PORT, P_PATH, P_QUERY, P_FRAGMENT, P_N };
static const CURLUPart part_id[P_N] = {CURLUPART_SCHEME, CURLUPART_USER, CURLUPART_PASSWORD,
                                       CURLUPART_HOST,   CURLUPART_ZONEID, CURLUPART_PORT,
                                       CURLUPART_PATH,   CURLUPART_QUERY, CURLUPART_FRAGMENT};

typedef struct parts {
    char *p[P_N]; /* NULL where the URL has none */
} parts;

static const char PW_CANARY[] = "PWcanary7Q", VAL_CANARY[] = "VALcanary7Q";

/* 0 with every part of url as libcurl reads it, -1 when it refuses url. */
static int curl_read(const char *url, parts *out)
{
    memset(out, 0, sizeof *out);
    CURLU *h = curl_url();
    FUZZ_CHECK(h != NULL);
    int rc = curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK ? 0 : -1;
    for (int i = 0; rc == 0 && i < P_N; i++)
        if (curl_url_get(h, part_id[i], &out->p[i], 0) != CURLUE_OK)
            out->p[i] = NULL;
    curl_url_cleanup(h);
    return rc;
}

static void parts_free(parts *x)
{
    for (int i = 0; i < P_N; i++)
        curl_free(x->p[i]);
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The name of the parameter at p (item bytes long, '&' or ';' apart) is
 * secret and it has a value: *klen gets the name's length. */
static int secret_item(const char *p, size_t item, size_t *klen)
{
    *klen = strcspn(p, "=");
    return *klen < item && ll_secret_name(p, *klen);
}

/* shown is params (a query or fragment as libcurl gives it, NULL for none)
 * with each secret value "(hidden)" and all else as given. */
static int params_shown(const char *params, const char *shown)
{
    if (!params || !shown)
        return !params && !shown;
    const char *p = params, *s = shown;
    for (;;) {
        size_t item = strcspn(p, "&;"), klen;
        if (secret_item(p, item, &klen)) {
            if (strncmp(s, p, klen + 1) != 0 || strncmp(s + klen + 1, "(hidden)", 8) != 0)
                return 0;
            s += klen + 9;
        } else {
            if (strncmp(s, p, item) != 0)
                return 0;
            s += item;
        }
        p += item;
        if (*p != *s)
            return 0;
        if (!*p)
            return 1;
        p++;
        s++;
    }
}

/* params ([p, end)) onto b with each secret value the canary. */
static void put_canaried(ll_buf *b, const char *p, const char *end)
{
    while (p < end) {
        size_t item = strcspn(p, "&;"), klen;
        if (p + item > end)
            item = (size_t)(end - p);
        if (secret_item(p, item, &klen) && p + klen < end) {
            FUZZ_CHECK(ll_buf_append(b, p, klen + 1) == 0 && ll_buf_append(b, VAL_CANARY, strlen(VAL_CANARY)) == 0);
        } else {
            FUZZ_CHECK(ll_buf_append(b, p, item) == 0);
        }
        p += item;
        if (p < end)
            FUZZ_CHECK(ll_buf_append(b, p++, 1) == 0);
    }
}

/* ll_url_split against libcurl: the user part is the text before the first
 * '@' of the authority (its password after the first ':'), the query and
 * fragment the text after '?' and '#'. Then the same URL with the password
 * and the secret values replaced by canaries, into b. */
static void check_split(const char *url, const parts *o, ll_buf *b)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    const char *auth = url + u.auth, *at = memchr(auth, '@', u.path - u.auth);
    FUZZ_CHECK(!at == !(o->p[P_USER] || o->p[P_PASSWORD]));
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    FUZZ_CHECK(!colon == !o->p[P_PASSWORD]);
    if (colon)
        FUZZ_CHECK(strlen(o->p[P_PASSWORD]) == (size_t)(at - colon - 1) &&
                   strncmp(colon + 1, o->p[P_PASSWORD], (size_t)(at - colon - 1)) == 0);
    FUZZ_CHECK(o->p[P_QUERY] ? u.frag - u.query == strlen(o->p[P_QUERY]) + 1 &&
                                   strncmp(url + u.query + 1, o->p[P_QUERY], u.frag - u.query - 1) == 0
                             : u.frag == u.query);
    FUZZ_CHECK(o->p[P_FRAGMENT] ? strcmp(url + u.frag + 1, o->p[P_FRAGMENT]) == 0 : u.end - u.frag <= 1);

    const char *from = colon && at > colon + 1 ? colon + 1 : url + u.path;
    FUZZ_CHECK(ll_buf_append(b, url, (size_t)(from - url)) == 0);
    if (from != url + u.path) {
        FUZZ_CHECK(ll_buf_append(b, PW_CANARY, strlen(PW_CANARY)) == 0 &&
                   ll_buf_append(b, at, (size_t)(url + u.path - at)) == 0);
    }
    FUZZ_CHECK(ll_buf_append(b, url + u.path, u.query - u.path) == 0);
    if (u.frag > u.query) {
        FUZZ_CHECK(ll_buf_append(b, "?", 1) == 0);
        put_canaried(b, url + u.query + 1, url + u.frag);
    }
    if (u.end > u.frag) {
        FUZZ_CHECK(ll_buf_append(b, "#", 1) == 0);
        put_canaried(b, url + u.frag + 1, url + u.end);
    }
}

/* The display of url, read by libcurl, against o. */
static void check_display(const char *url, const parts *o)
{
    char *shown = ll_redact_url(url);
    FUZZ_CHECK(shown != NULL);
    parts d;
    FUZZ_CHECK(curl_read(shown, &d) == 0);
    FUZZ_CHECK(same(d.p[P_SCHEME], o->p[P_SCHEME]) && same(d.p[P_HOST], o->p[P_HOST]) &&
               same(d.p[P_ZONE], o->p[P_ZONE]) && same(d.p[P_PORT], o->p[P_PORT]) &&
               same(d.p[P_PATH], o->p[P_PATH]));
    int user = o->p[P_USER] || o->p[P_PASSWORD];
    FUZZ_CHECK(user ? same(d.p[P_USER], "(hidden)") && !d.p[P_PASSWORD] : !d.p[P_USER] && !d.p[P_PASSWORD]);
    FUZZ_CHECK(params_shown(o->p[P_QUERY], d.p[P_QUERY]) && params_shown(o->p[P_FRAGMENT], d.p[P_FRAGMENT]));
    parts_free(&d);
    free(shown);
}

/* url joined to an endpoint path, against o. */
static void check_join(const char *url, const parts *o)
{
    static const char path[] = "/v1/chat/completions", query[] = "x=1";
    size_t n = strlen(url) + sizeof path + sizeof query + 2;
    char *out = malloc(n);
    FUZZ_CHECK(out && ll_url_join(url, "/v1", "/v1/chat/completions?x=1", out, n) == 0);
    parts j;
    FUZZ_CHECK(curl_read(out, &j) == 0);
    for (int i = P_SCHEME; i <= P_PORT; i++)
        FUZZ_CHECK(same(j.p[i], o->p[i]));
    size_t pl = strlen(j.p[P_PATH]), ql = o->p[P_QUERY] ? strlen(o->p[P_QUERY]) : 0;
    FUZZ_CHECK(pl >= sizeof path - 1 && strcmp(j.p[P_PATH] + pl - (sizeof path - 1), path) == 0);
    FUZZ_CHECK(j.p[P_QUERY] && strncmp(j.p[P_QUERY], query, sizeof query - 1) == 0 &&
               (ql ? j.p[P_QUERY][sizeof query - 1] == '&' && strcmp(j.p[P_QUERY] + sizeof query, o->p[P_QUERY]) == 0
                   : j.p[P_QUERY][sizeof query - 1] == '\0'));
    FUZZ_CHECK(ll_same_origin(url, out) == ll_same_origin(url, url));
    parts_free(&j);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *url = fuzz_strdup(data, size), err[512];
    FUZZ_CHECK(url != NULL);
    free(ll_redact_url(url)); /* any text at all is shown without a crash */
    parts o;
    if (ll_url_check(url, err, sizeof err) == 0) {
        FUZZ_CHECK(curl_read(url, &o) == 0);
        check_display(url, &o);
        check_join(url, &o);
        ll_buf c = {0};
        check_split(url, &o, &c);
        if (!strstr(url, "canary7Q")) {
            FUZZ_CHECK(ll_url_check(c.p, err, sizeof err) == 0);
            char *shown = ll_redact_url(c.p);
            FUZZ_CHECK(shown && !strstr(shown, PW_CANARY) && !strstr(shown, VAL_CANARY));
            free(shown);
        }
        ll_buf_free(&c);
        parts_free(&o);
    }
    free(url);
    return 0;
}
