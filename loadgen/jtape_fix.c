/* jtape_fix.c: the text cJSON is given (jtape_fix.h).
 *
 * cJSON 1.7 decodes a string into a NUL-terminated copy: a \u0000 escape or a
 * raw NUL byte ends the string there for every reader of valuestring (the
 * rest of a delta's text was lost), and a lone surrogate escape fails the
 * whole parse (its event's tokens were lost). Before cJSON sees an event,
 * each of these inside a string is rewritten as the escape \ufffd, which
 * cJSON decodes to U+FFFD: one replacement character where the server sent
 * one, the rest of the text kept (a surrogate pair stays a pair). A \u
 * without four hex digits, which cJSON reads as a NUL, is refused as not
 * JSON, as JSON's grammar says. One pass measures (out NULL) and only an
 * event that needs a rewrite is copied; the fast scanner never meets any of
 * this (it refuses \u escapes and control bytes), so its tapes stay equal
 * to cJSON's. */
#include "jtape_fix.h"

#include <stdlib.h>

#include "common.h"

typedef struct fixup {
    char *out;              /* NULL: measure only */
    size_t len;             /* bytes put */
    size_t changes;         /* escapes or bytes rewritten */
    int ctl;                /* the first raw control byte inside a string, -1 none */
} fixup;

static const char k_fffd[] = "\\ufffd";

static void put(fixup *f, const char *p, size_t n)
{
    if (f->out)
        memcpy(f->out + f->len, p, n);
    f->len += n;
}

/* The code unit of four hex digits at p (before end), or -1. */
static int hex4(const char *p, const char *end)
{
    int v = 0;
    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The escape at q (a backslash inside a string) put to f, a NUL or a lone
 * surrogate as \ufffd: the bytes it took, 0 when it is not JSON. */
static size_t fix_escape(fixup *f, const char *q, const char *end)
{
    if (end - q < 2 || q[1] != 'u') {
        size_t n = end - q < 2 ? 1 : 2; /* cJSON judges the others */
        put(f, q, n);
        return n;
    }
    int u = hex4(q + 2, end);
    if (u < 0)
        return 0;
    if (u >= 0xD800 && u <= 0xDBFF && end - q >= 12 && q[6] == '\\' && q[7] == 'u') {
        int lo = hex4(q + 8, end);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            put(f, q, 12);
            return 12;
        }
    }
    if (u == 0 || (u >= 0xD800 && u <= 0xDFFF)) {
        put(f, k_fffd, 6);
        f->changes++;
    } else {
        put(f, q, 6);
    }
    return 6;
}

/* A string from q (just past its opening quote) to its closing quote, put to
 * f: returns the byte after it (end when it never closes), NULL when it is
 * not JSON. */
static const char *fix_string(fixup *f, const char *q, const char *end)
{
    while (q < end) {
        const char *run = q;
        while (end - q >= 8 && !has_special(q))
            q += 8;
        while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
            q++;
        put(f, run, (size_t)(q - run));
        if (q == end)
            break;
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            put(f, q, 1);
            return q + 1;
        }
        if (c == '\\') {
            size_t n = fix_escape(f, q, end);
            if (!n)
                return NULL;
            q += n;
            continue;
        }
        if (f->ctl < 0)
            f->ctl = c;
        if (c == 0) {
            put(f, k_fffd, 6);
            f->changes++;
        } else {
            put(f, q, 1);
        }
        q++;
    }
    return end;
}

/* The event as cJSON is to read it (see above): 0, or -1 when it is not JSON.
 * Only the root value is walked: cJSON ignores what follows it, and a root
 * that is no object, array or string holds no string. p marks the first byte
 * not yet put: bytes outside strings go over in runs. */
static int fix_strings(const char *p, size_t len, fixup *f)
{
    const char *q = p, *end = p + len;
    int depth = 0;
    f->len = f->changes = 0;
    f->ctl = -1;
    if (len >= 3 && memcmp(q, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 BOM, which cJSON skips */
        q += 3;
    while (q < end && (unsigned char)*q <= ' ') /* then its whitespace */
        q++;
    if (q < end && (*q == '{' || *q == '[' || *q == '"')) {
        do {
            /* past numbers, literals and punctuation to the next quote or
             * bracket ('[' and ']' are '{' and '}' less 0x20) */
            while (q < end && *q != '"' && (*q | 0x20) != '{' && (*q | 0x20) != '}')
                q++;
            if (q == end)
                break;
            char c = *q++;
            if (c == '"') {
                put(f, p, (size_t)(q - p));
                if (!(q = fix_string(f, q, end)))
                    return -1;
                p = q;
            }
            depth += (c == '{' || c == '[') - (c == '}' || c == ']');
        } while (q < end && depth > 0);
    }
    put(f, p, (size_t)(end - p)); /* what is left as it was */
    return 0;
}

/* Whether the event holds a backslash or a control byte anywhere: without
 * one there is nothing for fix_strings to find (most events the scanner
 * hands over hold a fraction, as logprobs, and no escape), and one SWAR pass
 * costs less than its walk. */
static int needs_fix(const char *p, size_t len)
{
    size_t i = 0;
    for (; len - i >= 8; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if ((has_zero(v ^ (ONES * '\\')) | ((v - ONES * 0x20) & ~v & HIGHS)) != 0)
            return 1;
    }
    for (; i < len; i++)
        if (p[i] == '\\' || (unsigned char)p[i] < 0x20)
            return 1;
    return 0;
}

int lg_jfix(const char *p, size_t len, char **out, size_t *out_len, int *ctl)
{
    fixup f = {.ctl = -1};
    *out = NULL;
    *out_len = len;
    *ctl = -1;
    if (!needs_fix(p, len))
        return 0;
    if (fix_strings(p, len, &f))
        return -1;
    *ctl = f.ctl;
    if (!f.changes)
        return 0;
    size_t n = f.len;
    if (!(f.out = malloc(n)))
        return LL_ENOMEM;
    (void)fix_strings(p, len, &f); /* the same walk, now writing */
    *out = f.out;
    *out_len = n;
    return 0;
}
