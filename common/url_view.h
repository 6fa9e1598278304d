/* url_view.h (internal to common/): a URL as libcurl reads it.
 *
 * Every request loadlaw sends goes through libcurl, which reads its URL with
 * curl_url; so do the checks (url.c), the origin rule (origin.c) and the
 * redacted display (redact.c), from the parts below, so that what is checked
 * and shown is what is requested. No scheme is ever guessed: a URL must start
 * with "scheme://" and a host part.
 */
#ifndef LOADLAW_URL_VIEW_H
#define LOADLAW_URL_VIEW_H

#include <curl/curl.h>
#include <stddef.h>

/* Each part as curl_url_get gives it, NULL when the URL has none (freed by
 * ll_url_view_free). Nothing is %-decoded but the host. scheme: lower case;
 * user, password: present, perhaps empty, when the URL has a user part;
 * host: an IPv6 literal with its brackets and without its zone, which is
 * apart; port: the digits given (leading zeros dropped); path: at least "/",
 * dot segments removed; query: without its '?' ("" for a lone '?');
 * fragment: without its '#' (none for a lone '#'). */
typedef struct ll_url_view {
    char *scheme, *user, *password, *host, *zone, *port, *path, *query, *fragment;
    CURLUcode why; /* libcurl's reason when ll_url_view_parse refused the URL */
} ll_url_view;

/* 0 with v filled; LL_EINVAL when url has no "scheme://" (why:
 * CURLUE_BAD_SCHEME), has a '/' where its host part should start ("http:///h",
 * which libcurl reads as host h and the text's own split does not:
 * CURLUE_BAD_SLASHES), or libcurl refuses it (why: its code); LL_ENOMEM. Any
 * scheme is read, not only those libcurl supports, so that a refused URL is
 * still shown with its parts. Call ll_url_view_free afterwards in every case. */
int ll_url_view_parse(const char *url, ll_url_view *v);
/* Frees the parts (the user and password zeroed first). */
void ll_url_view_free(ll_url_view *v);
/* The length of url's "scheme://" (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" /
 * "-" / "." ), then "://"); 0 when it has none ("host:8000" has none). */
size_t ll_url_scheme_len(const char *url);
/* "?k=v&k=v" or "#k=v;k=v" (len bytes, its first byte copied as is) into out
 * with the value of each parameter that ll_secret_name names written
 * "(hidden)"; the bytes written. out must hold len + (len + 1) * 8 bytes. */
size_t ll_redact_params(char *out, const char *p, size_t len);

#endif
