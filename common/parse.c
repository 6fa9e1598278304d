/* parse.c: checked number parsing with unit suffixes ("30s", "2m", "4k"), and
 * the few string rules that keep secrets out of records and logs. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int ll_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v))
        return LL_EINVAL;
    *out = v;
    return 0;
}

int ll_parse_int64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return LL_EINVAL;
    *out = v;
    return 0;
}

int ll_parse_count(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return LL_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return LL_EINVAL;
    uint64_t mul = 1;
    if (*end) {
        int bin = end[1] == 'i' || end[1] == 'I';
        switch (*end) {
        case 'k': case 'K': mul = bin ? 1024ULL : 1000ULL; break;
        case 'm': case 'M': mul = bin ? 1048576ULL : 1000000ULL; break;
        case 'g': case 'G': mul = bin ? 1073741824ULL : 1000000000ULL; break;
        default: return LL_EINVAL;
        }
        if (end[1 + bin] != '\0')
            return LL_EINVAL;
    }
    if (v > UINT64_MAX / mul)
        return LL_ERANGE;
    *out = v * mul;
    return 0;
}

int ll_parse_duration_s(const char *s, double *out_s)
{
    if (!s || !*s)
        return LL_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return LL_EINVAL;
    double mul;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mul = 1;
    else if (strcmp(end, "ms") == 0)
        mul = 1e-3;
    else if (strcmp(end, "us") == 0)
        mul = 1e-6;
    else if (strcmp(end, "ns") == 0)
        mul = 1e-9;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mul = 60;
    else if (strcmp(end, "h") == 0)
        mul = 3600;
    else
        return LL_EINVAL;
    /* "1e308h" is finite before the unit and infinite after it. */
    if (!isfinite(v * mul))
        return LL_ERANGE;
    *out_s = v * mul;
    return 0;
}

int ll_parse_int_list(const char *s, int **out, size_t *n)
{
    if (!s || !*s)
        return LL_EINVAL;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int *v = malloc(cap * sizeof *v);
    if (!v)
        return LL_ENOMEM;
    size_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || x <= 0 || x > 1000000 || (*end != ',' && *end != '\0')) {
            free(v);
            return LL_EINVAL;
        }
        v[k++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            free(v);
            return LL_EINVAL;
        }
    }
    *out = v;
    *n = k;
    return 0;
}

/* The secret-name rule (common.h), in one place: parts a name may hold, and
 * names that are secret only whole (a part "code" would hide "encoding"). */
static const char *const secret_part[] = {"key",  "secret",  "token",  "pass", "pwd", "auth",
                                          "cred", "sig",     "session", "cookie", "jwt"};
static const char *const secret_whole[] = {"code"};
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

/* "?k=v&k=v" (or "#k=v..."), len bytes, into out with the values of
 * secret-named parameters hidden; the bytes written. */
static size_t put_params(char *out, const char *p, size_t len)
{
    size_t o = 0, i = 1;
    if (!len)
        return 0;
    out[o++] = p[0];
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

char *ll_redact_url(const char *url)
{
    if (!url)
        return NULL;
    ll_url_parts u;
    ll_url_split(url, &u);
    /* each replaced span is at least 1 byte, so at most end + 1 of them */
    char *out = malloc(u.end + (u.end + 1) * (sizeof hidden - 1) + 1);
    if (!out)
        return NULL;
    /* user:password@host: up to the last '@', as a password may hold one */
    const char *at = NULL;
    for (const char *c = url + u.auth; c < url + u.path; c++)
        if (*c == '@')
            at = c;
    /* A password may hold '/', '?' or '#' too, which end the authority early
     * ("http://u:ab/cd@h": libcurl refuses it, but it is printed first): when
     * the authority has a ':' and no '@' while the rest of the URL has one,
     * everything up to the last '@' is hidden. That hides too much of a URL
     * with a port and an '@' in its path or query; never too little. */
    if (!at && memchr(url + u.auth, ':', u.path - u.auth))
        for (const char *c = url + u.path; c < url + u.end; c++)
            if (*c == '@')
                at = c;
    size_t o = u.auth;
    memcpy(out, url, u.auth);
    const char *rest = url + u.auth;
    if (at) {
        memcpy(out + o, hidden, sizeof hidden - 1);
        o += sizeof hidden - 1;
        out[o++] = '@';
        rest = at + 1;
    }
    ll_url_parts r; /* what follows: host[:port][/path][?query][#frag] */
    ll_url_split(rest, &r);
    memcpy(out + o, rest, r.query);
    o += r.query;
    o += put_params(out + o, rest + r.query, r.frag - r.query);
    o += put_params(out + o, rest + r.frag, r.end - r.frag);
    out[o] = '\0';
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
