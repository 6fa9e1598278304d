/* common.h: the few things every loadlaw module shares.
 *
 * Clock (monotonic integer nanoseconds), logging to stderr, a growable byte
 * buffer, checked number parsing with unit suffixes, the rules that keep
 * secrets out of records and logs, URL checks and joins, a seeded RNG,
 * percentiles (exact up to a bound, then a log-bucketed histogram), and JSONL
 * read/write.
 *
 * Prefix: ll_.  Errors: functions return 0 or a negative LL_E* code and, where
 * they take one, write a human message into a caller-owned buffer.
 * Thread safety: everything here is safe to use from several threads on
 * distinct objects.
 */
#ifndef LOADLAW_COMMON_H
#define LOADLAW_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#ifndef LOADLAW_VERSION
#define LOADLAW_VERSION "0.0.0"
#endif

/* The records schema, its types and the writer/reader: records.h. */
#include "records.h"

/* Error codes shared by all modules (module-specific ones start at -100). */
enum {
    LL_OK = 0,
    LL_ENOMEM = -1,   /* allocation failed */
    LL_EINVAL = -2,   /* bad argument or bad input (message says which) */
    LL_EIO = -3,      /* file or socket I/O failed */
    LL_EPARSE = -4,   /* malformed JSON or text */
    LL_ERANGE = -5,   /* value out of range */
    LL_ESYS = -6,     /* a system call failed (errno kept in the message) */
    LL_EINTR = -7,    /* interrupted by a signal or a stop request */
};
const char *ll_strerror(int code);

/* The one error-chaining idiom: inside a function with `int rc` and a
 * `fail:` label (one cleanup path), run a call that returns 0 or a negative
 * LL_E* code and jump to fail with that code kept in rc. */
#define LL_TRY(expr)                                                                    \
    do {                                                                                \
        if ((rc = (expr)) != 0)                                                         \
            goto fail;                                                                  \
    } while (0)

/* printf into a caller-owned message buffer; never overflows, always terminates. */
void ll_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- clock ---------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. Records store times relative to a run epoch
 * taken from this clock, so engine step logs and client timestamps taken in the
 * same process compare directly. */
int64_t ll_now_ns(void);
/* CLOCK_REALTIME in nanoseconds since the Unix epoch (for labels only). */
int64_t ll_wall_ns(void);
/* Sleep until an absolute CLOCK_MONOTONIC deadline (restarts on EINTR). */
void ll_sleep_until_ns(int64_t deadline_ns);

/* ---- ticker: a periodic thread (ticker.c) ---------------------------------- */
/* Calls fn(ctx) on a thread of its own now, then every interval_ns, until
 * fn returns nonzero or ll_ticker_stop (which wakes a waiting ticker at once,
 * joins it and frees it; NULL is a no-op). A late tick starts the next
 * interval from now. 0 or LL_ENOMEM / LL_ESYS. */
typedef struct ll_ticker ll_ticker;
int ll_ticker_start(int64_t interval_ns, int (*fn)(void *ctx), void *ctx, ll_ticker **out);
void ll_ticker_stop(ll_ticker *t);

/* ---- logging -------------------------------------------------------------- */

enum { LL_LOG_ERROR = 0, LL_LOG_WARN = 1, LL_LOG_INFO = 2, LL_LOG_DEBUG = 3 };
extern int ll_log_level; /* default LL_LOG_WARN; set once from main */
void ll_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ll_error(...) ll_log(LL_LOG_ERROR, __VA_ARGS__)
#define ll_warn(...)  ll_log(LL_LOG_WARN, __VA_ARGS__)
#define ll_info(...)  ll_log(LL_LOG_INFO, __VA_ARGS__)
#define ll_debug(...) ll_log(LL_LOG_DEBUG, __VA_ARGS__)

/* ---- growable buffer ------------------------------------------------------ */

typedef struct ll_buf {
    char *p;    /* always NUL-terminated when non-NULL */
    size_t len; /* bytes used, excluding the terminator */
    size_t cap;
} ll_buf;

int ll_buf_append(ll_buf *b, const void *data, size_t n);
int ll_buf_printf(ll_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ll_buf_reset(ll_buf *b);  /* len = 0, keeps memory */
void ll_buf_free(ll_buf *b);

/* ---- typed growable array ---------------------------------------------------- */

/* A typed vector: `LL_VEC(fit_sample) samples = {0};` then
 * `if ((rc = ll_vec_push(&samples, s))) ...`. Elements move on growth: keep
 * indices, not pointers, while pushing. Not thread-safe. */
#define LL_VEC(T)      \
    struct {           \
        T *v;          \
        size_t n, cap; \
    }
/* Make room for `need` elements (doubling); 0 or LL_ENOMEM (vector untouched). */
int ll_vec_reserve_(void **v, size_t *cap, size_t need, size_t elem);
#define ll_vec_reserve(vec, need) ll_vec_reserve_((void **)&(vec)->v, &(vec)->cap, (need), sizeof *(vec)->v)
#define ll_vec_push(vec, x) \
    (ll_vec_reserve((vec), (vec)->n + 1) ? LL_ENOMEM : ((vec)->v[(vec)->n++] = (x), 0))
#define ll_vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

/* ---- files ---------------------------------------------------------------- */

/* Read a whole file; *out is NUL-terminated, caller frees. */
int ll_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen);
/* mkdir -p */
int ll_mkdir_p(const char *path, char *err, size_t errlen);

/* ---- numbers -------------------------------------------------------------- */

/* Whole string must parse; no trailing junk. */
int ll_parse_double(const char *s, double *out);
int ll_parse_int64(const char *s, int64_t *out);
/* Counts with k/m/g suffixes (decimal: 4k = 4000; 4ki = 4096). */
int ll_parse_count(const char *s, uint64_t *out);
/* Durations: plain number = seconds; suffixes ns, us, ms, s, m, h. */
int ll_parse_duration_s(const char *s, double *out_s);
/* "1,2,4,8" -> array (caller frees). Ranges "1-8" are not accepted. */
int ll_parse_int_list(const char *s, int **out, size_t *n);

/* Secrets kept out of records and logs (users share run directories): 1
 * when a name of len bytes (a header's, a URL query parameter's, an --engine
 * spec key) may carry one. The rule, case-insensitively: the name holds
 * "key", "secret", "token", "pass", "pwd", "auth", "cred", "sig", "session",
 * "sessid", "cookie", "jwt", "bearer", "hmac" or "assertion" (X-Api-Key,
 * Authorization, X-Auth-Token, X-Passwd, X-Amz-Credential, Azure SAS's
 * ?sig=, X-Signature, X-Session-Id, PHPSESSID, Cookie, X-Hmac,
 * client_assertion, api_key, control_key), or is "code", "pw", "sas",
 * "sid", "otp" or "pin" whole (Azure Functions' ?code=, an Azure SAS's
 * ?sas=). "tokens" after a count's prefix (max_, min_, num_, n_, think_,
 * default_max_, prompt_, completion_, output_, input_, total_: max_tokens)
 * is a count, not a secret; api_tokens is a secret. The name is %-decoded
 * first, as a server reads a query ("?k%65y=" is ?key=). The rule hides too
 * much rather than too little: "signal", "author", "keyword", "credit" and
 * "bypass" are hidden too. */
int ll_secret_name(const char *name, size_t len);
/* A "k=v,k=v" spec (--engine) with the value of every key that
 * ll_secret_name names (api_key, control_key; not max_tokens_limit)
 * replaced by "(hidden)"; malloc'ed, NULL when out of memory (or spec is). */
char *ll_redact_spec(const char *spec);
/* A URL for display, with the values of its query and fragment parameters
 * ('&' or ';' apart) that ll_secret_name names (?key=, ?api_key=, ?sig=,
 * ?code=) written "(hidden)", and its user part too. A URL that libcurl
 * reads (as ll_url_check does) is written from libcurl's parts: "(hidden)@"
 * when it finds a user or password, and the host, port and path that
 * requests go to ("http://h:8000/m/llama@v2" is shown whole; the scheme in
 * lower case, dot segments and IPv4 shorthand as libcurl resolves them).
 * Other text (an endpoint path, "user:pw@host" without a scheme, a URL
 * libcurl refuses) has everything up to the last '@' of its host part
 * hidden, or up to the last '@' of all when that part holds a ':' (a
 * password with a '/', '?' or '#' in it).
 * malloc'ed, NULL when out of memory (or url is). */
char *ll_redact_url(const char *url);
/* "Authorization: Bearer KEY", malloc'ed to fit any key (NULL: no memory);
 * free it with ll_wipe_free, which zeroes a string before freeing it. */
char *ll_bearer_header(const char *key);
void ll_wipe_free(char *s);

/* ---- URLs ----------------------------------------------------------------- */

/* Where a URL's parts lie in its text, as offsets into it: [0, auth)
 * "scheme://" (empty without one: "user:pw@host:8000" starts with its
 * authority), [auth, path) the authority (user:password@host:port), [path,
 * query) the path, [query, frag) "?..." and [frag, end) "#..." (each empty
 * when absent). The authority ends at the first '/', '?' or '#' and the query
 * at the first '#', where libcurl ends them: for a URL that ll_url_check
 * accepts, the query and fragment here are libcurl's (tests/fuzz/fuzz_url.c). */
typedef struct ll_url_parts {
    size_t auth, path, query, frag, end;
} ll_url_parts;
void ll_url_split(const char *url, ll_url_parts *p);
/* 0 when url names a server loadlaw sends requests to, as libcurl reads it
 * (curl_url, no scheme guessed): "http://" or "https://" (any case), then a
 * host part that libcurl accepts, with a port (when one is given) in
 * 1..65535. Else LL_EINVAL and one line in err quoting url with its secrets
 * hidden (ll_redact_url): no scheme ("host:8000", which libcurl would send as
 * http), another scheme, no host (also "http:///h"), a bad port, two '@'
 * before the host ("u:p@ss@h": an '@' in a password is written %40), or
 * whatever else libcurl refuses (spaces, a bad IPv6 literal), in its words.
 * LL_ENOMEM when out of memory. */
int ll_url_check(const char *url, char *err, size_t errlen);
/* base with path put after base's path and before its query, so that a
 * query (Azure's ?api-version=) stays on every URL derived from a base:
 * ("http://h/d?v=1", NULL, "/metrics") -> "http://h/d/metrics?v=1". The '/'s
 * ending base's path go, then its last segment when that is drop ("/v1": an
 * API root that path names again, or that path is not under); one '/' joins.
 * A query in path comes first and base's follows after '&'; base's fragment
 * is dropped (it is never sent). Into out (n bytes; strlen(base) +
 * strlen(path) + 2 always suffice): 0, or LL_ERANGE when n is too small. */
int ll_url_join(const char *base, const char *drop, const char *path, char *out, size_t n);
/* 1 when two URLs have the same origin (RFC 6454), the rule by which a
 * credential meant for one may go to the other: as libcurl reads them, the
 * same scheme and host (each compared without regard to case; an IPv6
 * literal as libcurl writes it, with its zone) and the same port, a missing
 * one being the scheme's default (http 80, https 443); user:password@, path
 * and query do not count. 0 otherwise, and whenever either is unclear: one
 * libcurl refuses (no scheme, no host, two '@', a port that is not a number
 * in [0, 65535]), no port for a scheme without a default, or a host that
 * holds a '%'. */
int ll_same_origin(const char *a, const char *b);

/* ---- random numbers (xoshiro256**, seeded; one per thread) ---------------- */

typedef struct ll_rng { uint64_t s[4]; } ll_rng;
void ll_rng_seed(ll_rng *r, uint64_t seed);
uint64_t ll_rng_u64(ll_rng *r);
double ll_rng_uniform(ll_rng *r);          /* [0, 1) */
double ll_rng_normal(ll_rng *r);           /* N(0, 1) */
double ll_rng_exponential(ll_rng *r, double rate);

/* ---- percentiles ---------------------------------------------------------- */

/* Exact (sorted samples) while count <= exact_bound, then a log-bucketed
 * histogram whose relative error is at most LL_PCT_REL_ERR. */
#define LL_PCT_REL_ERR 0.01
typedef struct ll_pct ll_pct;
ll_pct *ll_pct_new(size_t exact_bound); /* 0 -> default 1<<20 */
void ll_pct_free(ll_pct *p);
int ll_pct_add(ll_pct *p, double x);    /* x >= 0 */
int ll_pct_merge(ll_pct *dst, const ll_pct *src);
size_t ll_pct_count(const ll_pct *p);
double ll_pct_mean(const ll_pct *p);    /* NAN when empty */
double ll_pct_min(const ll_pct *p);
double ll_pct_max(const ll_pct *p);
double ll_pct_quantile(ll_pct *p, double q); /* q in [0,1]; NAN when empty */
int ll_pct_is_exact(const ll_pct *p);
/* Samples below x: exact while exact; past the bound those in the buckets
 * below x's (a sample within LL_PCT_REL_ERR of x may fall on either side). */
size_t ll_pct_below(ll_pct *p, double x);

/* Exact quantile of a sorted array (linear interpolation between ranks). */
double ll_quantile_sorted(const double *v, size_t n, double q);
void ll_sort_doubles(double *v, size_t n);

/* ---- JSONL ---------------------------------------------------------------- */

/* One JSON object per line (records are written by records.h's writer). */
/* Calls cb for each parsed line; cb returns 0 to go on, non-zero to stop (that
 * value is returned). A malformed line is an error naming path:line, except a
 * truncated last line (no '\n'), which is skipped with a warning counted in
 * *skipped (may be NULL): an interrupted writer leaves exactly that. The cJSON
 * object is freed after cb returns. */
typedef int (*ll_jsonl_cb)(const cJSON *obj, size_t line_no, void *ctx);
int ll_jsonl_foreach(const char *path, ll_jsonl_cb cb, void *ctx, size_t *skipped,
                     char *err, size_t errlen);
/* Where the line being handed to cb lies in the file, for a reader that comes
 * back to it later (pread): its first byte's offset and its length without
 * the newline (and a '\r' before it). */
typedef struct ll_jsonl_pos {
    uint64_t off;
    size_t len;
} ll_jsonl_pos;
/* ll_jsonl_foreach, with *pos set before each call of cb. */
int ll_jsonl_foreach_pos(const char *path, ll_jsonl_cb cb, void *ctx, size_t *skipped, ll_jsonl_pos *pos,
                         char *err, size_t errlen);

/* cJSON helpers: typed lookups that return a default when missing/wrong type. */
double ll_json_num(const cJSON *obj, const char *key, double dflt);
int64_t ll_json_i64(const cJSON *obj, const char *key, int64_t dflt);
const char *ll_json_str(const cJSON *obj, const char *key, const char *dflt);
/* Append s as a JSON string literal (quotes included). The output is valid
 * UTF-8 whatever the input: a stray byte, or a character cut short, becomes
 * U+FFFD, one per bad byte (records are read by any JSON tool). 0 or LL_ENOMEM. */
int ll_json_escape(ll_buf *b, const char *s);
/* Make s valid UTF-8 in place: each byte that does not start a well-formed
 * sequence (a stray byte, a character cut short) becomes '?'. */
void ll_utf8_scrub(char *s);
/* The one NaN -> null rule: v as a JSON number, or null when v is NaN or
 * infinite (JSON has no NaN). ll_json_num_item: the new item (caller owns
 * it), NULL on no memory. ll_json_add_num: add key = that item to obj;
 * ll_json_add_pair: add key = [v[0], v[1]] (an interval) to obj; ll_json_push_num:
 * append it to an array. Each 0, or LL_ENOMEM when cJSON could not allocate. */
cJSON *ll_json_num_item(double v);
int ll_json_add_num(cJSON *obj, const char *key, double v);
int ll_json_add_pair(cJSON *obj, const char *key, const double v[2]);
int ll_json_push_num(cJSON *arr, double v);

#endif
