/* trace.c: the request traces load.trace replays, read into rows of (send
 * time, input tokens, output tokens, prefix block hashes). Three formats,
 * each recognised by its columns:
 *   Mooncake JSONL: {"timestamp": ms, "input_length": N, "output_length": N,
 *                    "hash_ids": [ids of the prompt's 512-token blocks]}
 *   Azure LLM inference CSV: TIMESTAMP (a date-time "2023-11-16 18:15:46.68"
 *                    or seconds), ContextTokens, GeneratedTokens
 *   BurstGPT CSV:    Timestamp (s), Model, Request tokens, Response tokens,
 *                    Total tokens, Log Type
 * A row's time is its timestamp less the first row's (seconds); the window
 * keeps rows in [start, end) of that time, and the first row kept is sent at
 * once: send_ns = (t - t_first_kept) / speed. Every row is checked before
 * anything is sent: a missing column, a value that is not a number, a
 * negative time or length, a timestamp earlier than the row before, or a line
 * over SCN_TRACE_MAX_LINE is an error naming the line and the column.
 * Lengths: an input of 0 tokens is an error (nothing to send); an output of 0
 * (BurstGPT's failed requests) asks for 1 token.
 */
#include "scn_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

/* A longer line is not a trace row (and would be read whole into memory). */
#define SCN_TRACE_MAX_LINE (1 << 20)
#define MAX_COLS 16

typedef struct rd {
    const char *path;
    size_t line;
    char *err;
    size_t errlen;
    scn_trace *t;
    double t0_s, prev_s;     /* first row's time, the previous row's */
    int any;
    double start_s, end_s, speed;
    double first_kept_s;
    int kept_any;
} rd;

static int row_err(rd *r, const char *col, const char *what)
{
    ll_errf(r->err, r->errlen, "%s:%zu: %s: %s", r->path, r->line, col, what);
    return LL_EINVAL;
}

/* A number, the whole field (surrounding blanks and quotes allowed). */
static int parse_num(const char *s, double *out)
{
    char *end;
    while (*s == ' ' || *s == '"')
        s++;
    if (!*s)
        return -1;
    double v = strtod(s, &end);
    while (*end == ' ' || *end == '"' || *end == '\r' || *end == '\n')
        end++;
    if (end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Azure's "2023-11-16 18:15:46.6805900" (UTC), or plain seconds. */
static int parse_time_s(const char *s, double *out)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, n = 0;
    double sec;
    while (*s == ' ' || *s == '"')
        s++;
    if (sscanf(s, "%d-%d-%d%*[ T]%d:%d:%lf%n", &y, &mo, &d, &h, &mi, &sec, &n) == 6) {
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        *out = (double)timegm(&tm) + sec;
        return sec < 0 || sec >= 61 || mo < 1 || mo > 12 ? -1 : 0;
    }
    return parse_num(s, out);
}

/* Add one checked row: time (s, the trace's own origin), lengths, hashes. */
static int add_row(rd *r, double t_s, double in_tok, double out_tok, const int64_t *h, size_t nh,
                   const char *tcol, const char *icol, const char *ocol)
{
    if (t_s < 0)
        return row_err(r, tcol, "expected a time >= 0");
    if (!r->any)
        r->t0_s = t_s;
    if (r->any && t_s < r->prev_s)
        return row_err(r, tcol, "earlier than the row before (a trace is in time order)");
    r->any = 1;
    r->prev_s = t_s;
    if (in_tok < 1 || in_tok > 1e7 || in_tok != floor(in_tok))
        return row_err(r, icol, "expected an integer token count in [1, 1e7]");
    if (out_tok < 0 || out_tok > 1e7 || out_tok != floor(out_tok))
        return row_err(r, ocol, "expected an integer token count in [0, 1e7]");
    double rel = t_s - r->t0_s;
    if (rel < r->start_s || (r->end_s > 0 && rel >= r->end_s))
        return 0;
    if (!r->kept_any)
        r->first_kept_s = rel;
    r->kept_any = 1;
    scn_trace_row row = {(int64_t)((rel - r->first_kept_s) / r->speed * 1e9), (int)in_tok,
                         out_tok < 1 ? 1 : (int)out_tok, r->t->hashes.n, nh};
    for (size_t i = 0; i < nh; i++)
        if (ll_vec_push(&r->t->hashes, h[i]))
            return LL_ENOMEM;
    return ll_vec_push(&r->t->rows, row) ? LL_ENOMEM : 0;
}

/* A Mooncake row's number field. */
static int json_num(rd *r, const cJSON *o, const char *k, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        return row_err(r, k, "missing (a Mooncake row has timestamp, input_length, output_length)");
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return row_err(r, k, "expected a number");
    *out = v->valuedouble;
    return 0;
}

static int mooncake_line(rd *r, const char *line)
{
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
    LL_VEC(int64_t) h = {0};
    double t, in, out;
    int rc;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return row_err(r, "row", "expected one JSON object per line");
    }
    if ((rc = json_num(r, o, "timestamp", &t)) || (rc = json_num(r, o, "input_length", &in)) ||
        (rc = json_num(r, o, "output_length", &out)))
        goto out;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
    if (ids && !cJSON_IsArray(ids)) {
        rc = row_err(r, "hash_ids", "expected an array of integers");
        goto out;
    }
    for (const cJSON *it = ids ? ids->child : NULL; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || fabs(it->valuedouble) > 9e15) {
            rc = row_err(r, "hash_ids", "expected an array of integers");
            goto out;
        }
        if ((rc = ll_vec_push(&h, (int64_t)it->valuedouble)))
            goto out;
    }
    /* Mooncake's timestamps are milliseconds. */
    rc = add_row(r, t / 1000, in, out, h.v, h.n, "timestamp", "input_length", "output_length");
out:
    ll_vec_free(&h);
    cJSON_Delete(o);
    return rc;
}

/* Split a CSV line in place (no quoted commas in these formats; quotes are
 * stripped by the number readers). */
static int split(char *line, char **col, int max)
{
    int n = 0;
    for (char *p = line;; p++) {
        if (n < max)
            col[n] = p;
        n++;
        p = strchr(p, ',');
        if (!p)
            break;
        *p = '\0';
    }
    return n;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '"'))
        s[--n] = '\0';
    size_t k = 0;
    while (s[k] == ' ' || s[k] == '"')
        k++;
    memmove(s, s + k, n - k + 1);
}

/* The CSV formats: their names, and their time, input and output columns. */
static const struct csv_format {
    const char *name, *tcol, *icol, *ocol;
} k_csv[] = {
    {"azure", "TIMESTAMP", "ContextTokens", "GeneratedTokens"},
    {"burstgpt", "Timestamp", "Request tokens", "Response tokens"},
};

typedef struct csv_state {
    const struct csv_format *f;
    int ti, ii, oi, ncols;
} csv_state;

static int csv_header(rd *r, char *line, csv_state *cs)
{
    char *col[MAX_COLS];
    int n = split(line, col, MAX_COLS);
    n = n < MAX_COLS ? n : MAX_COLS;
    for (int i = 0; i < n; i++)
        trim(col[i]);
    for (size_t f = 0; f < sizeof k_csv / sizeof k_csv[0]; f++) {
        cs->ti = cs->ii = cs->oi = -1;
        for (int i = 0; i < n; i++) {
            if (!strcmp(col[i], k_csv[f].tcol))
                cs->ti = i;
            if (!strcmp(col[i], k_csv[f].icol))
                cs->ii = i;
            if (!strcmp(col[i], k_csv[f].ocol))
                cs->oi = i;
        }
        if (cs->ti >= 0 && cs->ii >= 0 && cs->oi >= 0) {
            cs->f = &k_csv[f];
            cs->ncols = n;
            return 0;
        }
    }
    return row_err(r, "header", "not a known trace: expected Mooncake JSONL (timestamp, input_length, "
                                "output_length, hash_ids), an Azure CSV (TIMESTAMP, ContextTokens, "
                                "GeneratedTokens) or a BurstGPT CSV (Timestamp, ..., Request tokens, "
                                "Response tokens, ...)");
}

static int csv_line(rd *r, char *line, const csv_state *cs)
{
    char *col[MAX_COLS];
    double t, in, out;
    int n = split(line, col, MAX_COLS);
    const struct csv_format *f = cs->f;
    if (n < cs->ncols)
        return row_err(r, n <= cs->ti ? f->tcol : n <= cs->ii ? f->icol : f->ocol, "missing (too few columns)");
    if (parse_time_s(col[cs->ti], &t))
        return row_err(r, f->tcol, "expected a time (seconds or YYYY-MM-DD HH:MM:SS)");
    if (parse_num(col[cs->ii], &in))
        return row_err(r, f->icol, "expected a token count");
    if (parse_num(col[cs->oi], &out))
        return row_err(r, f->ocol, "expected a token count");
    return add_row(r, t, in, out, NULL, 0, f->tcol, f->icol, f->ocol);
}

static int blank(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return !*s;
}

/* Every line of f: the first non-blank one picks the format. Lines are read
 * into one buffer of SCN_TRACE_MAX_LINE: a longer line is an error before
 * more of it is read (a 1 GB line costs 1 MiB). */
static int read_lines(rd *r, FILE *f)
{
    char *line = malloc(SCN_TRACE_MAX_LINE + 2);
    csv_state cs = {0};
    int rc = 0, jsonl = -1;
    if (!line)
        return LL_ENOMEM;
    while (rc == 0 && fgets(line, SCN_TRACE_MAX_LINE + 2, f)) {
        size_t len = strlen(line);
        r->line++;
        if (len > SCN_TRACE_MAX_LINE && line[len - 1] != '\n') {
            rc = row_err(r, "row", "line longer than 1 MiB");
            break;
        }
        if (blank(line))
            continue;
        if (jsonl < 0) {
            const char *p = line;
            while (*p == ' ')
                p++;
            jsonl = *p == '{';
            r->t->format = jsonl ? "mooncake" : NULL;
            if (!jsonl) {
                if ((rc = csv_header(r, line, &cs)) == 0)
                    r->t->format = cs.f->name;
                continue;
            }
        }
        rc = jsonl ? mooncake_line(r, line) : csv_line(r, line, &cs);
    }
    free(line);
    return rc;
}

int scn_trace_load(const char *path, double speed, double start_s, double end_s, scn_trace **out, char *err,
                   size_t errlen)
{
    scn_trace *t = calloc(1, sizeof *t);
    rd r = {.path = path, .err = err, .errlen = errlen, .t = t, .start_s = start_s, .end_s = end_s,
            .speed = speed > 0 ? speed : 1};
    int rc;
    if (!t)
        return LL_ENOMEM;
    FILE *f = fopen(path, "r");
    if (!f) {
        ll_errf(err, errlen, "load.trace: cannot open '%s'", path);
        free(t);
        return LL_EINVAL;
    }
    rc = read_lines(&r, f);
    fclose(f);
    if (rc == 0 && t->rows.n == 0) {
        ll_errf(err, errlen, "%s: no rows%s", path, r.any ? " in the window" : "");
        rc = LL_EINVAL;
    }
    if (rc == 0 && !(t->path = strdup(path)))
        rc = LL_ENOMEM;
    t->speed = r.speed;
    t->start_s = start_s;
    t->end_s = end_s;
    if (rc) {
        scn_trace_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void scn_trace_free(scn_trace *t)
{
    if (!t)
        return;
    ll_vec_free(&t->rows);
    ll_vec_free(&t->hashes);
    free(t->path);
    free(t);
}
