/* test_common.c: parsing, percentiles (exact and histogram), JSONL round trip
 * including a truncated last line. */
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
    CHECK(ll_secret_name("X-Api-Key", 9) && ll_secret_name("Authorization", 13) && ll_secret_name("Cookie", 6) &&
              !ll_secret_name("X-Request-Id", 12) && !ll_secret_name("X-Api-Key", 5),
          "header names (len bounds the name)");
    char *h = ll_bearer_header("sk-1");
    CHECK(h && strcmp(h, "Authorization: Bearer sk-1") == 0, "bearer header %s", h ? h : "NULL");
    ll_wipe_free(h);
}

int main(void)
{
    test_redact();
    test_parse();
    test_pct();
    test_jsonl();
    test_ticker();
    TEST_MAIN_END();
}
