/* jsonl.c: line-per-object JSON files read back tolerantly, the UTF-8-safe
 * string escaper and typed cJSON lookups. Records are written by the records
 * module's writer thread (records.c), the only JSONL writer. */
#include "common.h"

#include <math.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ll_jsonl_foreach(const char *path, ll_jsonl_cb cb, void *ctx, size_t *skipped,
                     char *err, size_t errlen)
{
    ll_jsonl_pos pos;
    return ll_jsonl_foreach_pos(path, cb, ctx, skipped, &pos, err, errlen);
}

int ll_jsonl_foreach_pos(const char *path, ll_jsonl_cb cb, void *ctx, size_t *skipped, ll_jsonl_pos *pos,
                         char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    uint64_t next_off = 0;
    ssize_t n;
    int rc = 0;
    if (skipped)
        *skipped = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        line_no++;
        pos->off = next_off;
        next_off += (uint64_t)n;
        int complete = line[n - 1] == '\n';
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        pos->len = (size_t)n;
        const char *end = NULL;
        cJSON *obj = cJSON_ParseWithOpts(line, &end, 1);
        if (!obj || !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            if (!complete) {
                /* The last line of a killed writer: drop it, keep the rest. */
                ll_warn("%s:%zu: truncated last line skipped", path, line_no);
                if (skipped)
                    (*skipped)++;
                break;
            }
            size_t at = end && end >= line ? (size_t)(end - line) : 0;
            ll_errf(err, errlen, "%s:%zu: malformed JSON line near byte %zu", path, line_no, at);
            rc = LL_EPARSE;
            break;
        }
        rc = cb(obj, line_no, ctx);
        cJSON_Delete(obj);
        if (rc)
            break;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Bytes in a well-formed UTF-8 sequence starting at s (1..4), or 0 when the
 * byte at s does not start one (RFC 3629: no overlongs, no surrogates). The
 * NUL terminator fails every continuation test, so s is never read past it. */
static int utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int n;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

/* Records are read by any JSON tool, so the output is valid UTF-8 whatever
 * the input: a server's stray bytes, or a message cut inside a character,
 * become U+FFFD, one per bad byte. */
int ll_json_escape(ll_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = ll_buf_append(b, "\"", 1);
    const char *run = s;
    for (; rc == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;
        int ul = c >= 0x80 ? utf8_len((const unsigned char *)s) : 1;
        if (ul > 1) {
            s += ul - 1;
            continue;
        }
        if (ul == 1 && c >= 0x20 && c != '"' && c != '\\')
            continue;
        rc = ll_buf_append(b, run, (size_t)(s - run));
        char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
        if (ul == 0)
            memcpy(e, "\\ufffd", 7);
        else if (c == '"' || c == '\\') {
            e[1] = (char)c;
            e[2] = 0;
        } else if (c == '\n') {
            e[1] = 'n';
            e[2] = 0;
        }
        if (rc == 0)
            rc = ll_buf_append(b, e, strlen(e));
        run = s + 1;
    }
    if (rc == 0)
        rc = ll_buf_append(b, run, (size_t)(s - run));
    return rc ? rc : ll_buf_append(b, "\"", 1);
}

void ll_utf8_scrub(char *s)
{
    while (*s) {
        int ul = (unsigned char)*s < 0x80 ? 1 : utf8_len((const unsigned char *)s);
        if (ul == 0)
            *s++ = '?';
        else
            s += ul;
    }
}

double ll_json_num(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

int64_t ll_json_i64(const cJSON *obj, const char *key, int64_t dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    /* cJSON keeps numbers as double: exact for integers below 2^53 ns (104 days).
     * Outside +-2^63 the cast is undefined: a corrupt file gets the default. */
    if (!cJSON_IsNumber(it) || !(it->valuedouble > -9.2e18 && it->valuedouble < 9.2e18))
        return dflt;
    return (int64_t)it->valuedouble;
}

const char *ll_json_str(const cJSON *obj, const char *key, const char *dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : dflt;
}

cJSON *ll_json_num_item(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

int ll_json_add_num(cJSON *obj, const char *key, double v)
{
    cJSON *x = ll_json_num_item(v);
    if (!x || !cJSON_AddItemToObject(obj, key, x)) {
        cJSON_Delete(x);
        return LL_ENOMEM;
    }
    return 0;
}

int ll_json_push_num(cJSON *arr, double v)
{
    cJSON *x = ll_json_num_item(v);
    if (!x || !cJSON_AddItemToArray(arr, x)) {
        cJSON_Delete(x);
        return LL_ENOMEM;
    }
    return 0;
}

int ll_json_add_pair(cJSON *obj, const char *key, const double v[2])
{
    cJSON *a = cJSON_AddArrayToObject(obj, key);
    if (!a)
        return LL_ENOMEM;
    for (int i = 0; i < 2; i++)
        if (ll_json_push_num(a, v[i]))
            return LL_ENOMEM;
    return 0;
}
