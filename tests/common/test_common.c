/* test_common.c: parsing, percentiles (exact and histogram), JSONL round trip
 * including a truncated last line, the secret rules and the URL helpers
 * (ll_same_origin among them). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

static void test_parse(void)
{
    double d;
    uint64_t u;
    CHECK(ll_parse_duration_s("30s", &d) == 0 && d == 30, "30s");
    CHECK(ll_parse_duration_s("2m", &d) == 0 && d == 120, "2m");
    CHECK(ll_parse_duration_s("250ms", &d) == 0 && fabs(d - 0.25) < 1e-12, "250ms");
    CHECK(ll_parse_duration_s("1.5", &d) == 0 && d == 1.5, "bare seconds");
    CHECK(ll_parse_duration_s("3x", &d) != 0, "bad suffix rejected");
    CHECK(ll_parse_duration_s("-1s", &d) != 0, "negative rejected");
    /* Finite before the unit, infinite after it: would reach an int64 ns cast. */
    CHECK(ll_parse_duration_s("1e308h", &d) != 0, "overflow by unit rejected");
    CHECK(ll_parse_count("4k", &u) == 0 && u == 4000, "4k");
    CHECK(ll_parse_count("4ki", &u) == 0 && u == 4096, "4ki");
    CHECK(ll_parse_count("12", &u) == 0 && u == 12, "12");
    CHECK(ll_parse_count("12q", &u) != 0, "bad count suffix");
    CHECK(ll_parse_count("", &u) != 0, "empty count");
    CHECK(ll_parse_double("1e3", &d) == 0 && d == 1000, "1e3");
    CHECK(ll_parse_double("1e3 ", &d) != 0, "trailing junk");
    int *v = NULL;
    size_t n = 0;
    CHECK(ll_parse_int_list("1,2,4,64", &v, &n) == 0 && n == 4 && v[3] == 64, "list");
    free(v);
    CHECK(ll_parse_int_list("1,,2", &v, &n) != 0, "empty element");
    CHECK(ll_parse_int_list("1,2,", &v, &n) != 0, "trailing comma");
    CHECK(ll_parse_int_list("0", &v, &n) != 0, "zero concurrency");
}

static void test_pct(void)
{
    ll_pct *p = ll_pct_new(1000);
    for (int i = 1; i <= 101; i++)
        ll_pct_add(p, i);
    CHECK(ll_pct_is_exact(p), "exact under bound");
    CHECK_NEAR(ll_pct_quantile(p, 0.5), 51, 1e-12, "exact p50");
    CHECK_NEAR(ll_pct_quantile(p, 0.9), 91, 1e-12, "exact p90");
    CHECK_NEAR(ll_pct_mean(p), 51, 1e-12, "mean");
    ll_pct_free(p);

    /* Past the bound: log-normal-ish samples, histogram within the stated error. */
    ll_rng r;
    ll_rng_seed(&r, 42);
    size_t N = 200000;
    double *all = malloc(N * sizeof *all);
    p = ll_pct_new(1000);
    for (size_t i = 0; i < N; i++) {
        all[i] = exp(ll_rng_normal(&r)) * 1e6;
        ll_pct_add(p, all[i]);
    }
    CHECK(!ll_pct_is_exact(p), "histogram past bound");
    ll_sort_doubles(all, N);
    const double qs[] = {0.01, 0.5, 0.9, 0.99, 0.999};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double exact = ll_quantile_sorted(all, N, qs[i]);
        CHECK_REL(ll_pct_quantile(p, qs[i]), exact, 2 * LL_PCT_REL_ERR, "hist quantile");
    }
    free(all);
    ll_pct_free(p);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ll_sort_doubles' radix sort (past 4096 values) against qsort: the same
 * bits, over signs, duplicates, subnormals and infinities; with a -0 or a
 * NaN it leaves the array to qsort, whose order those follow. */
static void test_sort_doubles(void)
{
    ll_rng r;
    ll_rng_seed(&r, 7);
    size_t N = 100000;
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    CHECK(a && b, "memory");
    for (int round = 0; round < 3 && a && b; round++) {
        for (size_t i = 0; i < N; i++) {
            double u = ll_rng_normal(&r);
            a[i] = i % 7 == 0 ? (double)(i % 13) - 6 : u * exp(20 * ll_rng_normal(&r));
            if (i % 101 == 0)
                a[i] = i % 202 ? 4.9e-324 * (double)(i % 5) : (i % 404 ? INFINITY : -INFINITY);
        }
        if (round == 2)
            a[N / 2] = -0.0; /* ties -0 with +0: qsort's order */
        memcpy(b, a, N * sizeof *a);
        ll_sort_doubles(a, N);
        qsort(b, N, sizeof *b, cmp_d);
        CHECK(memcmp(a, b, N * sizeof *a) == 0, "round %d: radix sort gives qsort's bits", round);
    }
    free(a);
    free(b);
}

static int count_cb(const cJSON *obj, size_t line_no, void *ctx)
{
    int *sum = ctx;
    *sum += (int)ll_json_i64(obj, "i", -1000);
    return 0;
}

static void test_jsonl(void)
{
    char path[] = "/tmp/ll_test_jsonl_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char err[256];
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 10; i++)
        fprintf(f, "{\"i\": %d}\n", i);
    /* A killed writer leaves a partial last line: it is skipped, the rest kept. */
    fputs("{\"i\": 100, \"trunc", f);
    fclose(f);
    int sum = 0;
    size_t skipped = 0;
    CHECK(ll_jsonl_foreach(path, count_cb, &sum, &skipped, err, sizeof err) == 0, "foreach: %s", err);
    CHECK(sum == 45 && skipped == 1, "sum %d skipped %zu", sum, skipped);
    /* A malformed line in the middle is an error that names the line. */
    f = fopen(path, "w");
    fputs("{\"i\":1}\nnot json\n{\"i\":2}\n", f);
    fclose(f);
    sum = 0;
    int rc = ll_jsonl_foreach(path, count_cb, &sum, &skipped, err, sizeof err);
    CHECK(rc == LL_EPARSE && strstr(err, ":2:") != NULL, "malformed line named: %s", err);
    unlink(path);
    /* A hostile or corrupt file's 1e300 "ns" must not reach an int64 cast (UB). */
    cJSON *o = cJSON_Parse("{\"big\":1e300,\"neg\":-1e300,\"ok\":123456789012}");
    CHECK(ll_json_i64(o, "big", -7) == -7 && ll_json_i64(o, "neg", -7) == -7, "out-of-range i64 -> default");
    CHECK(ll_json_i64(o, "ok", -7) == 123456789012LL, "in-range i64 kept");
    cJSON_Delete(o);
}

/* ll_ticker: fn runs until it returns nonzero (exactly that many calls), and
 * ll_ticker_stop ends an hour-long wait at once (a hang here is the failure:
 * ctest's timeout). */
typedef struct tick_ctx {
    atomic_int calls;
    int stop_at;
} tick_ctx;

static int on_tick(void *arg)
{
    tick_ctx *c = arg;
    return atomic_fetch_add(&c->calls, 1) + 1 == c->stop_at;
}

static void test_ticker(void)
{
    tick_ctx a = {.stop_at = 3};
    ll_ticker *t = NULL;
    CHECK(ll_ticker_start(1000000, on_tick, &a, &t) == 0 && t, "ticker starts");
    for (int i = 0; i < 5000 && atomic_load(&a.calls) < 3; i++)
        usleep(1000);
    usleep(20000); /* room for a fourth call, which must not come */
    ll_ticker_stop(t);
    CHECK(atomic_load(&a.calls) == 3, "fn returning nonzero ends the ticker: %d calls", atomic_load(&a.calls));
    tick_ctx b = {.stop_at = -1};
    CHECK(ll_ticker_start((int64_t)3600 * 1000000000, on_tick, &b, &t) == 0, "hour ticker starts");
    for (int i = 0; i < 5000 && atomic_load(&b.calls) < 1; i++)
        usleep(1000);
    ll_ticker_stop(t);
    CHECK(atomic_load(&b.calls) == 1, "first tick at once, stop ends the hour's wait: %d calls",
          atomic_load(&b.calls));
    ll_ticker_stop(NULL);
}

/* Secrets out of records: URLs, engine specs, header names. */
static void test_redact(void)
{
    static const struct { const char *in, *want; } urls[] = {
        {"http://127.0.0.1:8000", "http://127.0.0.1:8000"},
        {"https://user:pw@host:1/v1?api-version=2024-06-01&key=SEC&x=1#f",
         "https://(hidden)@host:1/v1?api-version=2024-06-01&key=(hidden)&x=1#f"},
        {"http://h/v1?access_token=abc", "http://h/v1?access_token=(hidden)"},
        {"http://h/p?k&Auth=&z=2", "http://h/p?k&Auth=(hidden)&z=2"},
        {"http://h/a@b", "http://h/a@b"}, /* an @ in the path is no user */
        {"h:8000/v1", "h:8000/v1"},
        /* no scheme: libcurl would send it as http, so its password is hidden too */
        {"user:PW@127.0.0.1:8000", "(hidden)@127.0.0.1:8000"},
        {"http://u:p@ss@h/v1", "http://(hidden)@h/v1"}, /* up to the last '@' */
        /* Azure: SAS ?sig=, Functions' ?code=; the fragment's parameters too */
        {"https://a.blob/c?sv=2022&sig=S1&se=x&code=C1&encoding=utf8#access_token=T1&x=1",
         "https://a.blob/c?sv=2022&sig=(hidden)&se=x&code=(hidden)&encoding=utf8#access_token=(hidden)&x=1"},
        /* a password holding '/', '#' or '?' ends the authority early: hidden to the last '@' */
        {"http://user:ab/cdSECRETPW@127.0.0.1:9/v1", "http://(hidden)@127.0.0.1:9/v1"},
        {"http://user:ab#cdSECRETPW@h/v1?key=K", "http://(hidden)@h/v1?key=(hidden)"},
        {"http://user:ab?cd=SECRETPW@h", "http://(hidden)@h"},
        /* libcurl ends the host part at the first '/': an '@' after it is in the path,
         * and the host, port and path shown are the ones requested */
        {"http://h:8000/users/a@b?x=1", "http://h:8000/users/a@b?x=1"},
        {"http://127.0.0.1:8000/models/llama@v2", "http://127.0.0.1:8000/models/llama@v2"},
        {"http://127.0.0.1:8002/a@127.0.0.1:8001", "http://127.0.0.1:8002/a@127.0.0.1:8001"},
        /* more '/' than two after the scheme: libcurl still finds the user part */
        {"http:///user:SECRETPW@h/v1", "http:///(hidden)@h/v1"},
        {"http://h/v1?pw=P1&sas=S1&sid=S2&otp=1&pin=2&x=1",
         "http://h/v1?pw=(hidden)&sas=(hidden)&sid=(hidden)&otp=(hidden)&pin=(hidden)&x=1"},
        /* names as a server reads them: %-decoded, ';' a separator too */
        {"http://h/?k%65y=S1&to%6Ben=S2&a=1;key=S3;jwt=S4&api_tokens=S5&max_tokens=8",
         "http://h/?k%65y=(hidden)&to%6Ben=(hidden)&a=1;key=(hidden);jwt=(hidden)&api_tokens=(hidden)&max_tokens=8"},
        /* a host holding "%25" is shown as written: a bare '%' there would be
         * read again as the escape "%AA", another host (found by fuzz_url) */
        {"http://a%25AAb:8000/v1?key=K", "http://a%25AAb:8000/v1?key=(hidden)"},
        {"http://h%7fx%2Fy/v1?key=K", "http://h%7fx%2Fy/v1?key=(hidden)"}, /* raw: refused, or the host ends */
        /* a host escaped into digits is a name ("9"), not the IPv4 number 0.0.0.9
         * libcurl reads "http://9" as (found by fuzz_url); a dotted quad shows as is */
        {"http://%39/v1?key=K", "http://%39/v1?key=(hidden)"},
        {"http://%30x7f.1:8000/v1", "http://%30x7f.1:8000/v1"},
    };
    for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
        char *r = ll_redact_url(urls[i].in);
        CHECK(r && strcmp(r, urls[i].want) == 0, "url %s -> %s, want %s", urls[i].in, r ? r : "NULL", urls[i].want);
        free(r);
    }
    char *r = ll_redact_spec("backend=synthetic,api_key=K1,control_key=,max_tokens_limit=64,db_password=x,seed");
    CHECK(r && strcmp(r, "backend=synthetic,api_key=(hidden),control_key=(hidden),max_tokens_limit=64,"
                         "db_password=(hidden),seed") == 0,
          "spec: %s", r ? r : "NULL");
    free(r);
    CHECK(ll_redact_spec(NULL) == NULL && ll_redact_url(NULL) == NULL, "NULL in, NULL out");
    CHECK(!ll_secret_name("X-Api-Key", 5), "len bounds the name");
    /* the rule's list (common.h), as headers, query and spec names use it */
    static const char *const secret[] = {
        "X-Api-Key", "api_key", "apikey", "control_key", "Ocp-Apim-Subscription-Key", "client_secret",
        "X-Auth-Token", "access_token", "token", "Authorization", "Proxy-Authorization", "password", "X-Passwd",
        "pwd", "X-Credential", "X-Amz-Credential", "X-Signature", "sig", "X-Amz-Signature", "X-Session-Id",
        "session", "Cookie", "Set-Cookie", "code", "CODE", "db_password", "X-Token-Expires", "jwt", "api_tokens",
        "access_tokens", "c%6Fde", "X%2DApi%2DKey", "pw", "PW", "sas", "sid", "otp", "pin", "PHPSESSID",
        "X-Hmac", "Bearer", "client_assertion"};
    static const char *const open_[] = {
        "X-Request-Id", "Content-Type", "Accept", "User-Agent", "X-Tenant", "model", "max_tokens",
        "think_tokens", "max_tokens_limit", "default_max_tokens", "temperature", "top_p", "stream", "api-version",
        "sv", "se", "seed", "min_ctx", "buckets", "encoding", "codec", "zipcode", "backend", "law", "x"};
    for (size_t i = 0; i < sizeof secret / sizeof *secret; i++)
        CHECK(ll_secret_name(secret[i], strlen(secret[i])), "'%s' is secret", secret[i]);
    for (size_t i = 0; i < sizeof open_ / sizeof *open_; i++)
        CHECK(!ll_secret_name(open_[i], strlen(open_[i])), "'%s' is not secret", open_[i]);
    /* over-hiding, on purpose (common.h says so) */
    CHECK(ll_secret_name("signal", 6) && ll_secret_name("author", 6), "'sig' and 'auth' hide signal and author");
    r = ll_redact_spec("api_key=A,control_key=B,session_secret=C,seed=1,max_tokens_limit=64,think_tokens=8");
    CHECK(r && strcmp(r, "api_key=(hidden),control_key=(hidden),session_secret=(hidden),seed=1,"
                         "max_tokens_limit=64,think_tokens=8") == 0,
          "spec uses the same rule: %s", r ? r : "NULL");
    free(r);
    char *h = ll_bearer_header("sk-1");
    CHECK(h && strcmp(h, "Authorization: Bearer sk-1") == 0, "bearer header %s", h ? h : "NULL");
    ll_wipe_free(h);
}

/* URLs: the parts, the accepted schemes, and joins that keep the query. */
static void test_url(void)
{
    ll_url_parts u;
    const char *x = "HTTPS://u:p@h:1/a/b?q=1#f";
    ll_url_split(x, &u);
    CHECK(u.auth == 8 && u.path == 15 && u.query == 19 && u.frag == 23 && u.end == 25,
          "split %zu %zu %zu %zu %zu", u.auth, u.path, u.query, u.frag, u.end);
    ll_url_split("host:8000", &u);
    CHECK(u.auth == 0 && u.path == 9 && u.query == 9 && u.end == 9, "'host:8000' has no scheme");

    static const char *const good[] = {"http://127.0.0.1:8000", "https://h/v1?x=1", "HTTP://h", "Https://u:p@h",
                                       "http://[::1]:8000/v1", "http://[::1]", "http://h:/v1"};
    char err[512];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(ll_url_check(good[i], err, sizeof err) == 0, "'%s' accepted: %s", good[i], err);
    static const struct { const char *in, *why; } bad[] = {
        {"user:PW@127.0.0.1:8000", "'(hidden)@127.0.0.1:8000' has no scheme; write http://... or https://..."},
        {"127.0.0.1:8000", "'127.0.0.1:8000' has no scheme; write http://... or https://..."},
        {"ftp://u:PW@h/x", "'ftp://(hidden)@h/x' is not an http(s) URL; write http://... or https://..."},
        {"http://", "'http://' has no host; write http://... or https://..."},
        {"http://u:PW@:80/?key=PW", "'http://(hidden)@:80/?key=(hidden)' has no host; write http://... or "
                                    "https://..."},
        {"//h/x", "'//h/x' has no scheme; write http://... or https://..."},
        {"", "'' has no scheme; write http://... or https://..."},
        {"http://user:ab/cdSECRETPW@127.0.0.1:9/v1",
         "'http://(hidden)@127.0.0.1:9/v1' has a port that is not a number in 1..65535; write http://... or "
         "https://..."},
        {"http://h:99999/", "'http://h:99999/' has a port that is not a number in 1..65535; write http://... or "
                            "https://..."},
        {"http://h:0", "'http://h:0' has a port that is not a number in 1..65535; write http://... or https://..."},
        /* libcurl takes the user part to the first '@' and then refuses the host */
        {"http://user:p@ss@127.0.0.1:8000/v1",
         "'http://(hidden)@127.0.0.1:8000/v1' has two '@' before its host; write an '@' in a user name or password "
         "as %40"},
        {"https://a@b@h", "'https://(hidden)@h' has two '@' before its host; write an '@' in a user name or password "
                          "as %40"},
        {"http://h:0/models/llama@v2",
         "'http://h:0/models/llama@v2' has a port that is not a number in 1..65535; write http://... or https://..."},
        {"http:///u:SECRETPW@h", "'http:///(hidden)@h' has no host; write http://... or https://..."},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        int rc = ll_url_check(bad[i].in, err, sizeof err);
        CHECK(rc == LL_EINVAL && strcmp(err, bad[i].why) == 0, "'%s' refused: %d '%s', want '%s'", bad[i].in, rc,
              err, bad[i].why);
    }

    /* what else libcurl refuses, in its own words (which vary by version) */
    err[0] = '\0';
    CHECK(ll_url_check("http://h/a b", err, sizeof err) == LL_EINVAL &&
              strncmp(err, "'http://h/a b' is not a URL libcurl reads (", 43) == 0,
          "a space refused: '%s'", err);

    static const struct { const char *base, *drop, *path, *want; } joins[] = {
        {"http://h:1", NULL, "/v1/chat/completions", "http://h:1/v1/chat/completions"},
        {"http://h:1/", NULL, "/v1/chat/completions", "http://h:1/v1/chat/completions"},
        {"http://h/openai/deployments/d?api-version=2024-02-01", NULL, "/v1/chat/completions",
         "http://h/openai/deployments/d/v1/chat/completions?api-version=2024-02-01"},
        {"http://h/openai/deployments/d/?api-version=2024-02-01#frag", "/v1", "/metrics",
         "http://h/openai/deployments/d/metrics?api-version=2024-02-01"},
        {"http://h/x/v1?v=1", "/v1", "/metrics", "http://h/x/metrics?v=1"},
        {"http://h/x/v1//", "/v1", "/v1/completions", "http://h/x/v1/completions"},
        /* the "/v1" is found in the path, not at the end of the string */
        {"http://h/openai/v1?api-version=1", "/v1", "/v1/chat/completions",
         "http://h/openai/v1/chat/completions?api-version=1"},
        {"http://h/xv1", "/v1", "/metrics", "http://h/xv1/metrics"}, /* a segment, not a suffix */
        {"http://h/v1?a=1", NULL, "/start_profile", "http://h/v1/start_profile?a=1"},
        {"http://h?a=1", NULL, "/v1/completions", "http://h/v1/completions?a=1"},
        {"http://h/d?a=1", NULL, "", "http://h/d?a=1"},
        {"http://h/d/?a=1#f", NULL, "", "http://h/d?a=1"},
        {"http://h/d?", NULL, "/p", "http://h/d/p"},
        {"http://h/d?a=1", NULL, "p?b=2", "http://h/d/p?b=2&a=1"},
        {"http://h/d", NULL, "/p?b=2", "http://h/d/p?b=2"},
    };
    for (size_t i = 0; i < sizeof joins / sizeof *joins; i++) {
        char out[256];
        int rc = ll_url_join(joins[i].base, joins[i].drop, joins[i].path, out, sizeof out);
        CHECK(rc == 0 && strcmp(out, joins[i].want) == 0, "join '%s' + '%s': %d '%s', want '%s'", joins[i].base,
              joins[i].path, rc, out, joins[i].want);
        /* the stated bound is enough, one byte less than the result is not */
        size_t need = strlen(joins[i].want) + 1, bound = strlen(joins[i].base) + strlen(joins[i].path) + 2;
        CHECK(need <= bound && ll_url_join(joins[i].base, joins[i].drop, joins[i].path, out, need) == 0 &&
                  ll_url_join(joins[i].base, joins[i].drop, joins[i].path, out, need - 1) == LL_ERANGE &&
                  out[0] == '\0',
              "join '%s': %zu bytes fit, %zu do not", joins[i].base, need, need - 1);
    }
}

/* ll_same_origin: the scraper sends the requests' credentials only where
 * this says 1. */
static void test_same_origin(void)
{
    static const struct {
        const char *a, *b;
        int want;
    } cases[] = {
        {"http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics", 1},
        {"HTTP://Example.COM:8000/v1", "http://example.com:8000/metrics?x=1", 1},
        {"http://h", "http://h:80/metrics", 1},
        {"https://h/v1", "https://h:443/metrics", 1},
        {"http://h:", "http://h/metrics", 1}, /* an empty port is the default */
        {"http://user:pw@h:8000/v1", "http://h:8000/metrics", 1},
        {"http://[::1]:8000/v1", "http://[::1]:8000/metrics", 1},
        {"http://[::1]:8000", "http://[0:0::1]:8000/metrics", 1}, /* one address, as libcurl reads both */
        {"http://h:8000", "http://h:8001/metrics", 0},
        {"http://h", "https://h/metrics", 0},
        {"http://h:443", "https://h:443/metrics", 0},
        {"https://h", "https://h:80/metrics", 0},
        {"http://127.0.0.1:8000", "http://localhost:8000/metrics", 0},
        {"http://h.example:8000", "http://h.example.evil:8000/metrics", 0},
        {"http://h:8000", "http://h:8000@evil:8000/metrics", 0},
        {"http://h:8000", "http://h:8000:8000/metrics", 0},
        {"http://a@h:8000", "http://a@h@h:8000/metrics", 0},
        {"http://[::1]:8000", "http://[::2]:8000/metrics", 0},
        {"http://[::1]x", "http://[::1]x/metrics", 0},
        {"h:8000", "h:8000/metrics", 0},
        {"http://:8000", "http://:8000/metrics", 0},
        {"http://h:99999", "http://h:99999/metrics", 0},
        {"http://h:80a", "http://h:80a/metrics", 0},
        {"ftp://h", "ftp://h/metrics", 0}, /* no default port known: unclear */
        {"ftp://h:21", "ftp://h:21/metrics", 1},
        {"http://h%2e:80", "http://h%2e:80/metrics", 0},
        {"http://h", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(ll_same_origin(cases[i].a, cases[i].b) == cases[i].want, "'%s' vs '%s': want %d", cases[i].a,
              cases[i].b ? cases[i].b : "(null)", cases[i].want);
        CHECK(!cases[i].b || ll_same_origin(cases[i].b, cases[i].a) == cases[i].want, "'%s' vs '%s' symmetric",
              cases[i].b, cases[i].a);
    }
}

int main(void)
{
    test_redact();
    test_url();
    test_same_origin();
    test_parse();
    test_pct();
    test_sort_doubles();
    test_jsonl();
    test_ticker();
    TEST_MAIN_END();
}
