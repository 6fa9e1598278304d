/* prom.c: the Prometheus text exposition parser and its canonical writer
 * (telemetry.h).
 *
 * One pass per line: the line is found (up to '\n', a trailing '\r'
 * dropped), then read by a small hand-written scanner into a scratch buffer
 * sized for the line before it starts (2 x line + the family name + slack),
 * so the strings it hands out never move during the line. A malformed line
 * is counted and skipped; nothing in a line can end the parse but the
 * callback. Server text is untrusted: every index is checked against the
 * line's end, never against a NUL. */
#include "telemetry.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pstate {
    char *scratch;
    size_t cap, used;
    char *fam;                 /* the last TYPE line's name (malloc'ed) */
    size_t fam_cap;
    tel_prom_type fam_type;
} pstate;

typedef struct cursor {
    const char *p, *end;
} cursor;

const char *tel_prom_type_name(tel_prom_type t)
{
    static const char *const names[] = {"untyped", "counter", "gauge", "histogram", "summary"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "untyped";
}

static int is_name_start(char c, int colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static int is_name_char(char c, int colon)
{
    return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

static void skip_blank(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* A copy of n bytes into scratch (room was reserved for the line). */
static char *put(pstate *s, const char *src, size_t n)
{
    char *d = s->scratch + s->used;
    memcpy(d, src, n);
    d[n] = '\0';
    s->used += n + 1;
    return d;
}

/* A metric name (colon = 1) or label name (colon = 0) at the cursor; NULL
 * when there is none. */
static const char *scan_name(pstate *s, cursor *c, int colon)
{
    const char *b = c->p;
    if (c->p >= c->end || !is_name_start(*c->p, colon))
        return NULL;
    while (c->p < c->end && is_name_char(*c->p, colon))
        c->p++;
    return put(s, b, (size_t)(c->p - b));
}

/* A quoted label value, unescaped into scratch; NULL on an unknown escape,
 * a raw line feed (cannot happen: lines end there) or no closing quote. */
static const char *scan_value(pstate *s, cursor *c)
{
    if (c->p >= c->end || *c->p != '"')
        return NULL;
    c->p++;
    char *d = s->scratch + s->used, *o = d;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if (ch == '\0')
            return NULL;
        if (ch == '\\') {
            if (c->p >= c->end)
                return NULL;
            char e = *c->p++;
            ch = e == '\\' ? '\\' : e == '"' ? '"' : e == 'n' ? '\n' : 0;
            if (!ch)
                return NULL; /* the format has three escapes; anything else is a broken exporter */
        }
        *o++ = ch;
    }
    if (c->p >= c->end)
        return NULL;
    c->p++; /* the closing quote */
    *o = '\0';
    s->used += (size_t)(o - d) + 1;
    return d;
}

/* {name="value",...} into smp; 0 or -1 (malformed). */
static int scan_labels(pstate *s, cursor *c, tel_prom_sample *smp)
{
    c->p++; /* '{' */
    for (;;) {
        skip_blank(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        if (smp->n_labels == TEL_PROM_MAX_LABELS)
            return -1;
        tel_prom_label *l = &smp->labels[smp->n_labels];
        if (!(l->name = scan_name(s, c, 0)))
            return -1;
        skip_blank(c);
        if (c->p >= c->end || *c->p != '=')
            return -1;
        c->p++;
        skip_blank(c);
        if (!(l->value = scan_value(s, c)))
            return -1;
        for (size_t i = 0; i < smp->n_labels; i++)
            if (strcmp(smp->labels[i].name, l->name) == 0)
                return -1; /* a duplicate label: which value would be meant? */
        smp->n_labels++;
        skip_blank(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        return -1;
    }
}

/* The next blank-separated token: [*b, *e); 0 when empty. */
static size_t token(cursor *c, const char **b)
{
    skip_blank(c);
    *b = c->p;
    while (c->p < c->end && *c->p != ' ' && *c->p != '\t')
        c->p++;
    return (size_t)(c->p - *b);
}

/* A sample value: NaN, +Inf, -Inf, Inf, or a decimal float consumed whole. */
static int parse_value(const char *b, size_t n, double *out)
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, b, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "NaN")) {
        *out = NAN;
        return 0;
    }
    if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "Inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "-Inf")) {
        *out = -INFINITY;
        return 0;
    }
    /* Digits, sign, point and exponent only: strtod alone would also take
     * hex, "nan(...)" and "infinity", none of which an exporter writes. */
    if (strspn(tmp, "0123456789+-.eE") != n)
        return -1;
    char *endp;
    *out = strtod(tmp, &endp);
    return endp == tmp + n ? 0 : -1;
}

static int parse_ts(const char *b, size_t n, int64_t *out)
{
    char tmp[32];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, b, n);
    tmp[n] = '\0';
    if (strspn(tmp + (tmp[0] == '-'), "0123456789") != n - (tmp[0] == '-') || n == (size_t)(tmp[0] == '-'))
        return -1;
    return ll_parse_int64(tmp, out) ? -1 : 0;
}

/* The family and type of a sample named name, from the last TYPE line. */
static void classify(pstate *s, tel_prom_sample *smp)
{
    smp->type = TEL_PROM_UNTYPED;
    smp->family = smp->name;
    if (!s->fam || s->fam_type == TEL_PROM_UNTYPED)
        return;
    size_t fl = strlen(s->fam), nl = strlen(smp->name);
    if (strncmp(smp->name, s->fam, fl) != 0)
        return;
    const char *suf = smp->name + fl;
    int match = nl == fl;
    /* prometheus_client (vLLM, SGLang) types a counter "x" and writes "x_total" */
    if (s->fam_type == TEL_PROM_COUNTER)
        match |= !strcmp(suf, "_total");
    if (s->fam_type == TEL_PROM_HISTOGRAM)
        match |= !strcmp(suf, "_bucket") || !strcmp(suf, "_sum") || !strcmp(suf, "_count");
    if (s->fam_type == TEL_PROM_SUMMARY)
        match |= !strcmp(suf, "_sum") || !strcmp(suf, "_count");
    if (match) {
        smp->type = s->fam_type;
        smp->family = put(s, s->fam, fl);
    }
}

/* "# TYPE name type" / "# HELP name ..." / any other comment. 0, 1 when
 * malformed, or LL_ENOMEM. */
static int comment_line(pstate *s, cursor *c)
{
    const char *b;
    c->p++; /* '#' */
    size_t n = token(c, &b);
    int is_type = n == 4 && !memcmp(b, "TYPE", 4), is_help = n == 4 && !memcmp(b, "HELP", 4);
    if (!is_type && !is_help)
        return 0; /* a plain comment */
    skip_blank(c);
    const char *name = scan_name(s, c, 1);
    if (!name || (c->p < c->end && *c->p != ' ' && *c->p != '\t'))
        return 1;
    if (is_help)
        return 0; /* the docstring is free text */
    static const char *const types[] = {"untyped", "counter", "gauge", "histogram", "summary", "unknown"};
    n = token(c, &b);
    int t = -1;
    for (int i = 0; i < 6; i++)
        if (strlen(types[i]) == n && !memcmp(b, types[i], n))
            t = i == 5 ? TEL_PROM_UNTYPED : i;
    skip_blank(c);
    if (t < 0 || c->p != c->end)
        return 1;
    size_t nl = strlen(name);
    if (nl + 1 > s->fam_cap) {
        char *f = realloc(s->fam, nl + 1);
        if (!f)
            return LL_ENOMEM;
        s->fam = f;
        s->fam_cap = nl + 1;
    }
    memcpy(s->fam, name, nl + 1);
    s->fam_type = (tel_prom_type)t;
    return 0;
}

/* One sample line into smp; 0 or -1. */
static int sample_line(pstate *s, cursor *c, tel_prom_sample *smp)
{
    const char *b;
    memset(smp, 0, sizeof *smp);
    if (!(smp->name = scan_name(s, c, 1)))
        return -1;
    skip_blank(c);
    if (c->p < c->end && *c->p == '{' && scan_labels(s, c, smp))
        return -1;
    size_t n = token(c, &b);
    if (parse_value(b, n, &smp->value))
        return -1;
    n = token(c, &b);
    if (n) {
        if (parse_ts(b, n, &smp->ts_ms))
            return -1;
        smp->has_ts = 1;
    }
    skip_blank(c);
    if (c->p != c->end)
        return -1;
    classify(s, smp);
    return 0;
}

int tel_prom_parse(const char *text, size_t len, tel_prom_cb cb, void *ctx, tel_prom_stats *st)
{
    tel_prom_stats local;
    pstate s = {0};
    tel_prom_sample smp;
    int rc = 0;
    st = st ? st : &local;
    memset(st, 0, sizeof *st);
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
        cursor c = {text + at, text + at + ll};
        at += ll + (nl ? 1 : 0);
        st->n_lines++;
        if (c.end > c.p && c.end[-1] == '\r')
            c.end--;
        /* Room for every string of the line: unescaped text never grows, each
         * piece takes a NUL, and the family is copied from the TYPE line. */
        size_t need = 2 * ll + (s.fam ? strlen(s.fam) : 0) + 2 * TEL_PROM_MAX_LABELS + 16;
        if (need > s.cap) {
            char *p = realloc(s.scratch, need);
            if (!p) {
                rc = LL_ENOMEM;
                break;
            }
            s.scratch = p;
            s.cap = need;
        }
        s.used = 0;
        skip_blank(&c);
        if (c.p == c.end)
            continue;
        if (*c.p == '#') {
            int r = comment_line(&s, &c);
            if (r == LL_ENOMEM) {
                rc = r;
                break;
            }
            st->n_bad += r != 0;
            continue;
        }
        if (sample_line(&s, &c, &smp)) {
            st->n_bad++;
            continue;
        }
        st->n_samples++;
        if ((rc = cb(&smp, ctx)) != 0)
            break;
    }
    free(s.scratch);
    free(s.fam);
    return rc;
}

static int put_escaped(ll_buf *b, const char *v)
{
    int rc = 0;
    for (const char *p = v; *p && rc == 0; p++) {
        if (*p == '\\')
            rc = ll_buf_append(b, "\\\\", 2);
        else if (*p == '"')
            rc = ll_buf_append(b, "\\\"", 2);
        else if (*p == '\n')
            rc = ll_buf_append(b, "\\n", 2);
        else
            rc = ll_buf_append(b, p, 1);
    }
    return rc;
}

int tel_prom_format_labels(ll_buf *b, const tel_prom_sample *s)
{
    int rc = ll_buf_append(b, "", 0);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n_labels; i++) {
        LL_TRY(ll_buf_printf(b, "%s%s=\"", i ? "," : "", s->labels[i].name));
        LL_TRY(put_escaped(b, s->labels[i].value));
        LL_TRY(ll_buf_append(b, "\"", 1));
    }
fail:
    return rc;
}

int tel_prom_format_sample(ll_buf *b, const tel_prom_sample *s)
{
    int rc;
    LL_TRY(ll_buf_printf(b, "%s", s->name));
    if (s->n_labels) {
        LL_TRY(ll_buf_append(b, "{", 1));
        LL_TRY(tel_prom_format_labels(b, s));
        LL_TRY(ll_buf_append(b, "}", 1));
    }
    if (isnan(s->value))
        LL_TRY(ll_buf_printf(b, " NaN"));
    else if (isinf(s->value))
        LL_TRY(ll_buf_printf(b, " %s", s->value > 0 ? "+Inf" : "-Inf"));
    else
        LL_TRY(ll_buf_printf(b, " %.17g", s->value));
    if (s->has_ts)
        LL_TRY(ll_buf_printf(b, " %" PRId64, s->ts_ms));
    LL_TRY(ll_buf_append(b, "\n", 1));
fail:
    return rc;
}
