/* http1.c: one blocking HTTP request at a time (http1.h).
 *
 * The response goes into the caller's buffer through one write callback
 * with the handle's bound; libcurl aborts the transfer when the callback
 * takes fewer bytes than it was given, which is how a body over the bound
 * fails (keep_head off). Header lines holding credentials live in the
 * handle's list and are zeroed before it is freed: run directories and
 * core files get shared. */
#include "http1.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

struct ll_http1 {
    CURL *easy;
    struct curl_slist *headers;
    ll_buf *resp;              /* the request in progress's */
    size_t max_bytes;
    int keep_head;
    char curl_err[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    ll_http1 *h = ud;
    size_t n = sz * nm, room = h->resp->len < h->max_bytes ? h->max_bytes - h->resp->len : 0;
    if (!h->keep_head && n > room)
        return 0;
    if (room && ll_buf_append(h->resp, p, n < room ? n : room))
        return 0;
    return n;
}

/* One header line onto h's list (libcurl copies it). */
static int add_header(ll_http1 *h, const char *line)
{
    struct curl_slist *t = curl_slist_append(h->headers, line);
    if (!t)
        return LL_ENOMEM; /* the list so far stays h's */
    h->headers = t;
    return 0;
}

static int add_headers(ll_http1 *h, const ll_http1_opts *o)
{
    int rc = 0;
    if (o->content_type) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", o->content_type);
        LL_TRY(add_header(h, ct));
    }
    if (o->api_key) {
        char *bearer = ll_bearer_header(o->api_key);
        rc = bearer ? add_header(h, bearer) : LL_ENOMEM;
        ll_wipe_free(bearer);
        LL_TRY(rc);
    }
    for (size_t i = 0; i < o->n_headers; i++)
        if (ll_secret_name(o->headers[i], strcspn(o->headers[i], ":")))
            LL_TRY(add_header(h, o->headers[i]));
fail:
    return rc;
}

int ll_http1_open(const ll_http1_opts *o, ll_http1 **out, char *err, size_t errlen)
{
    ll_http1 *h = calloc(1, sizeof *h);
    int rc = LL_ENOMEM;
    *out = NULL;
    if (!h || !(h->easy = curl_easy_init()) || (rc = add_headers(h, o)))
        goto fail;
    h->max_bytes = o->max_bytes;
    h->keep_head = o->keep_head;
    CURL *e = h->easy;
    if (curl_easy_setopt(e, CURLOPT_URL, o->url) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->headers) ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) || curl_easy_setopt(e, CURLOPT_WRITEDATA, h) ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->curl_err) ||
        (o->timeout_ms > 0 && curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms)) ||
        (o->connect_timeout_ms > 0 && curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms))) {
        rc = LL_EINVAL;
        goto fail;
    }
    *out = h;
    return 0;
fail:
    ll_errf(err, errlen, rc == LL_ENOMEM ? "out of memory" : "libcurl refused an option of the request");
    ll_http1_close(h);
    return rc;
}

int ll_http1_set_url(ll_http1 *h, const char *url)
{
    return curl_easy_setopt(h->easy, CURLOPT_URL, url) == CURLE_OK ? 0 : LL_EINVAL;
}

int ll_http1_do(ll_http1 *h, const char *body, ll_buf *resp, long *status, char *err, size_t errlen)
{
    CURLcode cc;
    *status = 0;
    ll_buf_reset(resp);
    h->resp = resp;
    h->curl_err[0] = '\0';
    if ((cc = body ? curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, body)
                   : curl_easy_setopt(h->easy, CURLOPT_HTTPGET, 1L)) == CURLE_OK)
        cc = curl_easy_perform(h->easy);
    if (curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, status) != CURLE_OK)
        *status = 0;
    h->resp = NULL;
    if (cc == CURLE_OK)
        return 0;
    ll_errf(err, errlen, "%s", h->curl_err[0] ? h->curl_err : curl_easy_strerror(cc));
    return LL_EIO;
}

void ll_http1_close(ll_http1 *h)
{
    if (!h)
        return;
    if (h->easy)
        curl_easy_cleanup(h->easy);
    for (struct curl_slist *l = h->headers; l; l = l->next)
        explicit_bzero(l->data, strlen(l->data)); /* keys: not left in freed memory */
    curl_slist_free_all(h->headers);
    free(h);
}

int ll_http1_once(const ll_http1_opts *o, const char *body, ll_buf *resp, long *status, char *err, size_t errlen)
{
    ll_http1 *h;
    int rc = ll_http1_open(o, &h, err, errlen);
    *status = 0;
    if (rc == 0)
        rc = ll_http1_do(h, body, resp, status, err, errlen);
    ll_http1_close(h);
    return rc;
}
