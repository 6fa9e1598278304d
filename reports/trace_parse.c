/* trace_parse.c: stream a Chrome/Kineto trace through YAJL's callback parser.
 *
 * DESIGN: bytes come through zlib's gzread (which passes plain files through
 * unchanged) in fixed chunks into yajl_parse; the callbacks keep only the
 * fields of the event being read (ph, cat, name, ts, dur, pid, tid,
 * args.stream), whatever order its keys come in, and hand a finished GPU event
 * to trace_busy.c. Nothing of the document is kept, so a 1 GB trace parses in
 * the memory of its distinct kernel names.
 *
 * Events are the objects of the top-level "traceEvents" array, or of a
 * top-level array (the bare Chrome form). A GPU event is a complete event
 * (ph "X") whose cat is kernel, gpu_memcpy or gpu_memset (older Kineto:
 * Kernel, Memcpy, Memset) or, when it has no cat, one with args.stream.
 * A CPU event (for self time, trace_self.c) is a complete event whose cat is
 * cpu_op (an aten or custom operator) or user_annotation (record_function
 * ranges: vLLM's and torch.compile's regions, whose self time is real work the
 * ops inside do not show, e.g. a compiled graph's generated C++; and the
 * step markers, ProfilerStep#N and vLLM's execute_context_...).
 * python_function events (with_stack) are left out: they wrap the
 * operators, their self time is the interpreter's, and their file:line names
 * would grow the name table with the stack's size.
 * ts and dur are microseconds, possibly fractional; they are read as integer
 * nanoseconds from the number's text so sums stay exact. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "common.h"
#include "trace_internal.h"

#define CHUNK_BYTES (256 * 1024)
#define LABEL_MAX 64

enum ev_key { K_OTHER = 0, K_PH, K_CAT, K_NAME, K_TS, K_DUR, K_PID, K_TID, K_ARGS };

typedef struct parse_ctx {
    rpt_trace *t;
    int err;              /* LL_E* set by a callback that cancelled the parse */
    int level;            /* open containers */
    int top_is_map;
    int events_level;     /* level inside the events array; 0 = not inside */
    int pending_events;   /* saw key "traceEvents" at level 1 */
    int saw_events;
    int event_level;      /* level inside the current event; 0 = none */
    int args_level;
    enum ev_key key;
    int args_key_stream;
    /* the current event */
    char ph[4], cat[32];
    int has_ph, has_cat, has_ts, has_dur, has_stream;
    int64_t ts_ns, dur_ns;
    char pid[LABEL_MAX], tid[LABEL_MAX];
    ll_buf name;
} parse_ctx;

/* "1234.5678" microseconds -> 1234567 ns (rounded at the nanosecond).
 * Exponent forms fall back to strtod. */
static int us_text_to_ns(const char *s, size_t n, int64_t *out)
{
    int neg = 0;
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    for (size_t k = i; k < n; k++) {
        if (s[k] == 'e' || s[k] == 'E') {
            char tmp[64];
            if (n >= sizeof tmp)
                return -1;
            memcpy(tmp, s, n);
            tmp[n] = '\0';
            double v = strtod(tmp, NULL) * 1e3;
            if (!(v > -9e18 && v < 9e18))
                return -1;
            *out = (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
            return 0;
        }
    }
    int64_t v = 0;
    for (; i < n && s[i] != '.'; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX / 10 - 10) / 1000)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    v *= 1000;
    if (i < n && s[i] == '.') {
        i++;
        int64_t scale = 100;
        for (; i < n && scale > 0; i++, scale /= 10)
            v += (s[i] - '0') * scale;
        if (i < n && s[i] >= '5')
            v++;
    }
    *out = neg ? -v : v;
    return 0;
}

static void set_label(char *dst, const char *s, size_t n)
{
    if (n >= LABEL_MAX)
        n = LABEL_MAX - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static int is_gpu_cat(const char *cat)
{
    static const char *const cats[] = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"};
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        if (strcasecmp(cat, cats[i]) == 0)
            return 1;
    return 0;
}

static int is_cpu_cat(const char *cat)
{
    return strcmp(cat, "cpu_op") == 0 || strcmp(cat, "user_annotation") == 0;
}

static void event_begin(parse_ctx *c)
{
    c->has_ph = c->has_cat = c->has_ts = c->has_dur = c->has_stream = 0;
    c->ts_ns = c->dur_ns = 0;
    strcpy(c->pid, "0");
    strcpy(c->tid, "0");
    ll_buf_reset(&c->name);
    c->key = K_OTHER;
    c->args_level = 0;
}

/* Corrupt times are left out so that ts + dur, the span and the sums stay
 * inside int64: ts up to 2^62 ns (Unix-epoch traces are ~1.8e18 ns), any dur
 * up to 2^60, and a counted op's (GPU, or CPU for self time) up to 2^40 ns
 * (18 minutes; a longer kernel, copy or operator is not real, and 2^23 of
 * them still sum inside int64). */
static int times_in_range(const parse_ctx *c, int counted)
{
    return c->ts_ns <= ((int64_t)1 << 62) && c->ts_ns >= -((int64_t)1 << 60) &&
           !(c->has_dur && c->dur_ns > ((int64_t)1 << (counted ? 40 : 60)));
}

static void span_extend(rpt_trace *t, int64_t start_ns, int64_t end_ns)
{
    if (!t->have_span) {
        t->first_ns = start_ns;
        t->last_ns = end_ns;
        t->have_span = 1;
        return;
    }
    if (start_ns < t->first_ns)
        t->first_ns = start_ns;
    if (end_ns > t->last_ns)
        t->last_ns = end_ns;
}

static int event_end(parse_ctx *c)
{
    rpt_trace *t = c->t;
    t->info.events++;
    if (!c->has_ph || strcmp(c->ph, "X") != 0)
        return 0;
    int gpu = c->has_cat ? is_gpu_cat(c->cat) : c->has_stream;
    int cpu = !gpu && c->has_cat && is_cpu_cat(c->cat);
    if (c->has_ts && !times_in_range(c, gpu || cpu))
        c->has_ts = 0;
    if (!c->has_ts || (gpu && (!c->has_dur || c->dur_ns < 0))) {
        t->info.bad_events += gpu; /* bad input is counted, not dropped silently */
        return 0;
    }
    span_extend(t, c->ts_ns, c->ts_ns + (c->has_dur && c->dur_ns > 0 ? c->dur_ns : 0));
    const char *name = c->name.len ? c->name.p : "(unnamed)";
    size_t name_len = c->name.len ? c->name.len : strlen(name);
    if (cpu && c->has_dur && c->dur_ns >= 0)
        return trace_add_cpu_event(t, name, name_len, c->pid, c->tid, c->ts_ns, c->dur_ns);
    if (!gpu)
        return 0;
    return trace_add_gpu_event(t, name, name_len, c->pid, c->tid, c->ts_ns, c->dur_ns);
}

/* A scalar value (string or number text) at the current position. */
static int on_scalar(parse_ctx *c, const char *s, size_t n, int is_string)
{
    if (c->event_level && c->level == c->event_level) {
        switch (c->key) {
        case K_PH:
            set_label(c->ph, s, n < sizeof c->ph ? n : sizeof c->ph - 1);
            c->has_ph = 1;
            break;
        case K_CAT:
            if (n >= sizeof c->cat)
                n = sizeof c->cat - 1; /* long cats are never GPU cats */
            memcpy(c->cat, s, n);
            c->cat[n] = '\0';
            c->has_cat = 1;
            break;
        case K_NAME:
            ll_buf_reset(&c->name);
            if (ll_buf_append(&c->name, s, n)) {
                c->err = LL_ENOMEM;
                return 0;
            }
            break;
        case K_TS:
            if (!is_string && us_text_to_ns(s, n, &c->ts_ns) == 0)
                c->has_ts = 1;
            break;
        case K_DUR:
            if (!is_string && us_text_to_ns(s, n, &c->dur_ns) == 0)
                c->has_dur = 1;
            break;
        case K_PID:
            set_label(c->pid, s, n);
            break;
        case K_TID:
            set_label(c->tid, s, n);
            break;
        default:
            break;
        }
        c->key = K_OTHER;
    } else if (c->args_level && c->level == c->args_level && c->args_key_stream) {
        c->has_stream = 1;
        c->args_key_stream = 0;
    }
    return 1;
}

static int cb_null(void *ctx)
{
    parse_ctx *c = ctx;
    if (c->args_level && c->level == c->args_level && c->args_key_stream) {
        c->args_key_stream = 0; /* "stream": null names no stream */
        return 1;
    }
    return on_scalar(ctx, "", 0, 1);
}
static int cb_bool(void *ctx, int v) { return on_scalar(ctx, v ? "true" : "false", v ? 4 : 5, 1); }
static int cb_number(void *ctx, const char *s, size_t n) { return on_scalar(ctx, s, n, 0); }
static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    return on_scalar(ctx, (const char *)s, n, 1);
}

static int key_is(const unsigned char *k, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(k, lit, n) == 0;
}

static int cb_key(void *ctx, const unsigned char *k, size_t n)
{
    parse_ctx *c = ctx;
    if (c->event_level && c->level == c->event_level) {
        c->key = key_is(k, n, "ph")     ? K_PH
                 : key_is(k, n, "cat")  ? K_CAT
                 : key_is(k, n, "name") ? K_NAME
                 : key_is(k, n, "ts")   ? K_TS
                 : key_is(k, n, "dur")  ? K_DUR
                 : key_is(k, n, "pid")  ? K_PID
                 : key_is(k, n, "tid")  ? K_TID
                 : key_is(k, n, "args") ? K_ARGS
                                        : K_OTHER;
    } else if (c->args_level && c->level == c->args_level) {
        c->args_key_stream = key_is(k, n, "stream");
    } else if (c->level == 1 && c->top_is_map) {
        c->pending_events = key_is(k, n, "traceEvents");
    }
    return 1;
}

static int cb_start_map(void *ctx)
{
    parse_ctx *c = ctx;
    if (c->level == 0)
        c->top_is_map = 1;
    if (c->events_level && c->level == c->events_level && !c->event_level) {
        c->level++;
        c->event_level = c->level;
        event_begin(c);
        return 1;
    }
    if (c->event_level && c->level == c->event_level && c->key == K_ARGS)
        c->args_level = c->level + 1;
    else if (c->args_level && c->level == c->args_level && c->args_key_stream) {
        c->has_stream = 1; /* a stream given as an object still names one */
        c->args_key_stream = 0;
    }
    if (c->event_level && c->level == c->event_level)
        c->key = K_OTHER;
    c->level++;
    return 1;
}

static int cb_end_map(void *ctx)
{
    parse_ctx *c = ctx;
    if (c->event_level && c->level == c->event_level) {
        c->event_level = 0;
        c->level--;
        int rc = event_end(c);
        if (rc) {
            c->err = rc;
            return 0;
        }
        return 1;
    }
    if (c->args_level && c->level == c->args_level)
        c->args_level = 0;
    c->level--;
    return 1;
}

static int cb_start_array(void *ctx)
{
    parse_ctx *c = ctx;
    if ((c->level == 0) || (c->level == 1 && c->top_is_map && c->pending_events)) {
        c->events_level = c->level + 1;
        c->saw_events = 1;
        c->pending_events = 0;
    }
    if (c->event_level && c->level == c->event_level)
        c->key = K_OTHER;
    c->level++;
    return 1;
}

static int cb_end_array(void *ctx)
{
    parse_ctx *c = ctx;
    if (c->events_level && c->level == c->events_level)
        c->events_level = 0;
    c->level--;
    return 1;
}

static const yajl_callbacks callbacks = {
    cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
    cb_start_map, cb_key, cb_end_map, cb_start_array, cb_end_array,
};

/* The parser's own message, on one line. */
static void yajl_message(yajl_handle h, const unsigned char *chunk, size_t n, const char *path,
                         uint64_t offset, char *err, size_t errlen)
{
    unsigned char *m = yajl_get_error(h, 0, chunk, n);
    char *msg = m ? (char *)m : "parse error";
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    for (size_t k = strlen(msg); k > 0 && msg[k - 1] == ' '; k--)
        msg[k - 1] = '\0';
    ll_errf(err, errlen, "%s: not valid JSON near byte %llu: %s", path,
            (unsigned long long)offset, msg);
    if (m)
        yajl_free_error(h, m);
}

/* The whole file through the parser, chunk by chunk. 0, or LL_EIO,
 * LL_EPARSE or the callbacks' error, with the message in err. */
static int parse_file(gzFile g, yajl_handle h, unsigned char *chunk, const parse_ctx *c, const char *path,
                      char *err, size_t errlen)
{
    uint64_t offset = 0;
    for (;;) {
        int n = gzread(g, chunk, CHUNK_BYTES);
        if (n < 0) {
            int zerr;
            const char *zmsg = gzerror(g, &zerr);
            ll_errf(err, errlen, "%s: read failed near byte %llu: %s", path,
                    (unsigned long long)offset, zerr == Z_ERRNO ? strerror(errno) : zmsg);
            return LL_EIO;
        }
        yajl_status st = n > 0 ? yajl_parse(h, chunk, (size_t)n) : yajl_complete_parse(h);
        if (st == yajl_status_client_canceled) {
            int rc = c->err ? c->err : LL_EPARSE;
            ll_errf(err, errlen, "%s: %s while reading events", path, ll_strerror(rc));
            return rc;
        }
        if (st != yajl_status_ok) {
            yajl_message(h, chunk, n > 0 ? (size_t)n : 0, path,
                         offset + (n > 0 ? yajl_get_bytes_consumed(h) : 0), err, errlen);
            return LL_EPARSE;
        }
        if (n == 0)
            return 0;
        offset += (uint64_t)n;
    }
}

int rpt_trace_load(const char *path, rpt_trace **out, char *err, size_t errlen)
{
    int rc = LL_ENOMEM;
    parse_ctx c;
    memset(&c, 0, sizeof c);
    unsigned char *chunk = NULL;
    yajl_handle h = NULL;
    gzFile g = NULL;
    *out = NULL;

    c.t = calloc(1, sizeof *c.t);
    chunk = malloc(CHUNK_BYTES);
    if (!c.t || !chunk) {
        ll_errf(err, errlen, "out of memory");
        goto fail;
    }
    g = gzopen(path, "rb");
    if (!g) {
        rc = LL_EIO;
        ll_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
        goto fail;
    }
    if (gzbuffer(g, CHUNK_BYTES) != 0) {
        rc = LL_EIO;
        ll_errf(err, errlen, "%s: gzbuffer failed", path);
        goto fail;
    }
    h = yajl_alloc(&callbacks, NULL, &c);
    if (!h) {
        ll_errf(err, errlen, "out of memory");
        goto fail;
    }
    /* Kernel names are ASCII; skipping UTF-8 validation is most of YAJL's cost. */
    yajl_config(h, yajl_dont_validate_strings, 1);

    if ((rc = parse_file(g, h, chunk, &c, path, err, errlen)))
        goto fail;
    if (!c.saw_events) {
        rc = LL_EPARSE;
        ll_errf(err, errlen, "%s: not a Chrome trace (no traceEvents array)", path);
        goto fail;
    }
    if (trace_finish(c.t)) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "out of memory");
        goto fail;
    }
    yajl_free(h);
    gzclose(g);
    free(chunk);
    ll_buf_free(&c.name);
    *out = c.t;
    return 0;
fail:
    if (h)
        yajl_free(h);
    if (g)
        gzclose(g);
    free(chunk);
    ll_buf_free(&c.name);
    rpt_trace_free(c.t);
    return rc;
}
