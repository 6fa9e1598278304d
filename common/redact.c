/* redact.c: the rules that keep secrets out of records and logs (users share
 * run directories and keep stderr): which names are secret, and the
 * --engine spec and URLs written with those values and any user:password
 * hidden. A URL is shown as libcurl reads it (url_view.h), the reading its
 * requests get, so that the host, port and path shown are the ones requested
 * and only what libcurl takes for a user part is hidden as one. */
#include "common.h"
#include "url_view.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The secret-name rule (common.h), in one place: parts a name may hold, and
 * names that are secret only whole, being too short to look for inside
 * another ("code" would hide "encoding", "pw" "pwr", "sid" "inside"):
 * Azure Functions' ?code=, a password's ?pw=, an Azure SAS's ?sas=, a
 * session's ?sid=, a one-time ?otp= or ?pin=. */
static const char *const secret_part[] = {"key", "secret", "token",  "pass",   "pwd",    "auth", "cred",      "sig",
                                          "session", "sessid", "cookie", "jwt", "bearer", "hmac", "assertion"};
static const char *const secret_whole[] = {"code", "pw", "sas", "sid", "otp", "pin"};
/* Prefixes under which "...tokens" is a count (max_tokens, think_tokens,
 * max_tokens_limit, default_max_tokens), not a secret (api_tokens is one). */
static const char *const count_prefix[] = {"max_", "min_", "num_", "n_", "think_", "default_max_", "prompt_",
                                           "completion_", "output_", "input_", "total_"};

static int starts_with(const char *name, size_t len, const char *word)
{
    size_t k = strlen(word);
    return len >= k && strncasecmp(name, word, k) == 0;
}

/* 1 when word occurs in name[0, len) as a secret: "tokens" after a count's
 * prefix (max_tokens) does not count. */
static int holds_secret(const char *name, size_t len, const char *word)
{
    size_t k = strlen(word);
    int count = 0;
    if (strcmp(word, "token") == 0)
        for (size_t i = 0; i < sizeof count_prefix / sizeof *count_prefix; i++)
            count |= starts_with(name, len, count_prefix[i]);
    for (size_t j = 0; j + k <= len; j++)
        if (strncasecmp(name + j, word, k) == 0 &&
            !(count && j + k < len && (name[j + k] == 's' || name[j + k] == 'S')))
            return 1;
    return 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int ll_secret_name(const char *name, size_t len)
{
    /* a server decodes "%XX" in a query's names ("?k%65y=" is ?key=): so does the rule */
    char dec[256];
    size_t n = 0;
    for (size_t i = 0; i < len && n < sizeof dec; i++) {
        int hi, lo;
        if (name[i] == '%' && i + 2 < len && (hi = hex_digit(name[i + 1])) >= 0 && (lo = hex_digit(name[i + 2])) >= 0) {
            dec[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            dec[n++] = name[i] == '+' ? ' ' : name[i];
        }
    }
    if (n == sizeof dec)
        return 1; /* a name this long is nothing loadlaw knows: hidden */
    for (size_t i = 0; i < sizeof secret_part / sizeof *secret_part; i++)
        if (holds_secret(dec, n, secret_part[i]))
            return 1;
    for (size_t i = 0; i < sizeof secret_whole / sizeof *secret_whole; i++)
        if (n == strlen(secret_whole[i]) && strncasecmp(dec, secret_whole[i], n) == 0)
            return 1;
    return 0;
}

static const char hidden[] = "(hidden)";

/* One "k=v" item of item bytes (its key klen) into out: as is, or with its
 * value "(hidden)" when secret; the bytes written. */
static size_t put_item(char *out, const char *p, size_t item, size_t klen, int secret)
{
    if (!secret) {
        memcpy(out, p, item);
        return item;
    }
    memcpy(out, p, klen + 1); /* "k=" */
    memcpy(out + klen + 1, hidden, sizeof hidden - 1);
    return klen + sizeof hidden;
}

char *ll_redact_spec(const char *spec)
{
    if (!spec)
        return NULL;
    /* at most one "(hidden)" per key, each key at least "k=" plus a comma */
    size_t n = strlen(spec), cap = n + (n / 2 + 1) * (sizeof hidden - 1) + 1, o = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *p = spec; *p;) {
        size_t item = strcspn(p, ","), klen = strcspn(p, "=,");
        o += put_item(out + o, p, item, klen, klen < item && ll_secret_name(p, klen));
        p += item;
        if (*p == ',')
            out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

/* "k=v&k=v" (a query or a fragment, without its '?' or '#'; len bytes) into
 * out with the values of secret-named parameters hidden; the bytes written. */
size_t ll_redact_params(char *out, const char *p, size_t len)
{
    size_t o = 0, i = 0;
    while (i < len) {
        size_t item = 0, klen = 0;
        while (i + item < len && p[i + item] != '&' && p[i + item] != ';') /* ';': an old separator */
            item++;
        while (klen < item && p[i + klen] != '=')
            klen++;
        o += put_item(out + o, p + i, item, klen, klen < item && ll_secret_name(p + i, klen));
        i += item;
        if (i < len)
            out[o++] = p[i++]; /* '&' or ';' */
    }
    return o;
}

/* s onto out at *o. */
static void put_str(char *out, size_t *o, const char *s)
{
    size_t k = strlen(s);
    memcpy(out + *o, s, k);
    *o += k;
}

/* c, then params (NULL: none) with secret values hidden, onto out at *o. */
static void put_params(char *out, size_t *o, char c, const char *params)
{
    if (params) {
        out[(*o)++] = c;
        *o += ll_redact_params(out + *o, params, strlen(params));
    }
}

/* The room ll_redact_params may need for s (NULL: none) and its '?' or '#'. */
static size_t params_room(const char *s)
{
    size_t n = s ? strlen(s) + 1 : 0;
    return n + (n + 1) * (sizeof hidden - 1);
}

/* Is h[0..n) a dotted quad as libcurl writes an IPv4 host ("127.0.0.1":
 * four decimal parts of 0-255 without leading zeros)? */
static int dotted_quad(const char *h, size_t n)
{
    int parts = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        unsigned v = 0;
        while (j < n && j - i < 4 && h[j] >= '0' && h[j] <= '9')
            v = v * 10 + (unsigned)(h[j++] - '0');
        if (j == i || v > 255 || (h[i] == '0' && j - i > 1) || ++parts > 4)
            return 0;
        if (j < n && (h[j] != '.' || j + 1 == n))
            return 0;
        i = j + 1;
    }
    return parts == 4;
}

/* Would libcurl, given h[0..n) raw, read it as an IPv4 number ("9",
 * "0x7f.1", "127.1") and write it otherwise? A host it gave decoded from
 * an escape ("%39") it did not read so; written raw it would be. Digits,
 * hex letters, 'x' and dots after a digit: more than libcurl's forms, which
 * is safe (an escaped first byte reads back as the same host either way). */
static int reads_as_number(const char *h, size_t n)
{
    if (n == 0 || h[0] < '0' || h[0] > '9' || dotted_quad(h, n))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)h[i]) && h[i] != '.' && h[i] != 'x' && h[i] != 'X')
            return 0;
    return 1;
}

/* n bytes of a host libcurl gave decoded, written so libcurl reads the same
 * host back: a '%', a control byte, a space or a byte that would end or
 * split the host part ("%2F" decoded to '/') as its escape, since written
 * raw a "%AA" would be read as an escape again and "\x7f" refused. An IPv6
 * literal ("[...]") is written as it is: libcurl checks it strictly. A host
 * libcurl would read as an IPv4 number when written raw (reads_as_number)
 * has its first byte escaped, so that it stays the name it was. */
static void put_host(char *out, size_t *o, const char *h, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    int number = reads_as_number(h, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)h[i];
        if (h[0] != '[' && (c <= ' ' || c == 0x7f || strchr("%/?#@:[]\\\"'<>^`{}|", c) || (i == 0 && number))) {
            out[(*o)++] = '%';
            out[(*o)++] = hex[c >> 4];
            out[(*o)++] = hex[c & 15];
        } else {
            out[(*o)++] = (char)c;
        }
    }
}

/* A URL libcurl reads, written from its parts: "(hidden)@" when libcurl
 * finds a user part (even an empty one), then the host (the zone of an IPv6
 * literal put back as "%25zone"), the port, the path and the query and
 * fragment with secret values hidden. A path of "/" that the text does not
 * write ("http://h:8000") is not written either. */
static char *redact_view(const char *url, const ll_url_view *v)
{
    ll_url_parts u;
    ll_url_split(url, &u);
    int path = !(u.path == u.query && strcmp(v->path, "/") == 0);
    size_t cap = strlen(v->scheme) + 3 + sizeof hidden + 3 * strlen(v->host) + (v->zone ? strlen(v->zone) + 3 : 0) +
                 (v->port ? strlen(v->port) + 1 : 0) + strlen(v->path) + params_room(v->query) +
                 params_room(v->fragment) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0, hl = strlen(v->host);
    put_str(out, &o, v->scheme);
    put_str(out, &o, "://");
    if (v->user || v->password) {
        put_str(out, &o, hidden);
        out[o++] = '@';
    }
    if (v->zone && hl && v->host[hl - 1] == ']') {
        put_host(out, &o, v->host, hl - 1);
        put_str(out, &o, "%25");
        put_str(out, &o, v->zone);
        out[o++] = ']';
    } else {
        put_host(out, &o, v->host, hl);
    }
    if (v->port) {
        out[o++] = ':';
        put_str(out, &o, v->port);
    }
    if (path)
        put_str(out, &o, v->path);
    put_params(out, &o, '?', v->query);
    put_params(out, &o, '#', v->fragment);
    out[o] = '\0';
    return out;
}

/* Text that libcurl does not read as a URL: an endpoint path ("/v1/x?key="),
 * "user:pw@host:8000" without a scheme, a URL it refuses. Anything that may
 * be a user part is hidden: up to the last '@' before the host part ends,
 * and, when that part holds a ':' ("u:ab/cd@h": a password with a '/', '?'
 * or '#', which ends the host part early), up to the last '@' of all. Such a
 * URL is refused, so this shows too much of it only in its refusal. */
static char *redact_text(const char *url)
{
    size_t lead = ll_url_scheme_len(url), len = strlen(url), o = 0;
    while (lead && url[lead] == '/') /* "http:///u:pw@h": libcurl takes up to three '/' */
        lead++;
    const char *a = url + lead, *at = NULL, *rest = a;
    size_t alen = strcspn(a, "/?#");
    for (const char *c = a; c < a + alen; c++)
        if (*c == '@')
            at = c;
    if (!at && memchr(a, ':', alen))
        for (const char *c = a + alen; *c; c++)
            if (*c == '@')
                at = c;
    /* each replaced span is at least 1 byte, so at most len + 1 of them */
    char *out = malloc(len + (len + 1) * (sizeof hidden - 1) + 1);
    if (!out)
        return NULL;
    memcpy(out, url, lead);
    o = lead;
    if (at) {
        put_str(out, &o, hidden);
        out[o++] = '@';
        rest = at + 1;
    }
    size_t q = strcspn(rest, "?#"), f = q + strcspn(rest + q, "#"), e = f + strlen(rest + f);
    memcpy(out + o, rest, q);
    o += q;
    if (f > q) {
        out[o++] = '?';
        o += ll_redact_params(out + o, rest + q + 1, f - q - 1);
    }
    if (e > f) {
        out[o++] = '#';
        o += ll_redact_params(out + o, rest + f + 1, e - f - 1);
    }
    out[o] = '\0';
    return out;
}

char *ll_redact_url(const char *url)
{
    if (!url)
        return NULL;
    ll_url_view v;
    int rc = ll_url_view_parse(url, &v);
    char *out = NULL;
    if (rc == 0 && v.scheme && v.host && v.path)
        out = redact_view(url, &v);
    else if (rc != LL_ENOMEM)
        out = redact_text(url);
    ll_url_view_free(&v);
    return out;
}

char *ll_bearer_header(const char *key)
{
    static const char pre[] = "Authorization: Bearer ";
    size_t n = sizeof pre + strlen(key);
    char *h = malloc(n);
    if (h)
        snprintf(h, n, "%s%s", pre, key);
    return h;
}

void ll_wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

