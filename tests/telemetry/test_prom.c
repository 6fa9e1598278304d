/* test_prom.c: the Prometheus text parser (telemetry/prom.c) on tricky input:
 * HELP/TYPE, escapes, histograms and summaries, prometheus_client's _total,
 * NaN/Inf, timestamps, names with colons, CRLF, and malformed lines that
 * must be counted and skipped; and that a canonical re-serialisation parses
 * back to the same samples. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "telemetry.h"
#include "testutil.h"

#define MAXS 64

typedef struct got {
    size_t n;
    char name[MAXS][96], family[MAXS][96], labels[MAXS][256];
    tel_prom_type type[MAXS];
    double value[MAXS];
    int has_ts[MAXS];
    int64_t ts[MAXS];
    ll_buf canon;
} got;

static int on_s(const tel_prom_sample *s, void *ctx)
{
    got *g = ctx;
    ll_buf lb = {0};
    if (g->n < MAXS) {
        snprintf(g->name[g->n], sizeof g->name[0], "%s", s->name);
        snprintf(g->family[g->n], sizeof g->family[0], "%s", s->family);
        tel_prom_format_labels(&lb, s);
        snprintf(g->labels[g->n], sizeof g->labels[0], "%s", lb.p ? lb.p : "");
        g->type[g->n] = s->type;
        g->value[g->n] = s->value;
        g->has_ts[g->n] = s->has_ts;
        g->ts[g->n] = s->ts_ms;
    }
    ll_buf_free(&lb);
    g->n++;
    /* the canonical form, each sample under its own TYPE line (telemetry.h) */
    ll_buf_printf(&g->canon, "# TYPE %s %s\n", s->family, tel_prom_type_name(s->type));
    return tel_prom_format_sample(&g->canon, s);
}

static const char vllm_text[] =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 12.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 4.0\n"
    "# TYPE vllm:num_preemptions counter\n"
    "vllm:num_preemptions_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 3.0\n"
    "vllm:num_preemptions_created{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 1.7e9\n"
    "# HELP vllm:iteration_tokens_total Histogram of tokens per engine_step.\n"
    "# TYPE vllm:iteration_tokens_total histogram\n"
    "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"1.0\",model_name=\"m\"} 5.0\n"
    "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 100.0\n"
    "vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"m\"} 100.0\n"
    "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"m\"} 1600.0\n"
    "# TYPE rpc_duration_seconds summary\n"
    "rpc_duration_seconds{quantile=\"0.5\"} 4773\n"
    "rpc_duration_seconds_sum 1.7560473e+07\n"
    "rpc_duration_seconds_count 2693 1395066363000\r\n"
    "\n"
    "   # a plain comment, indented\n"
    "odd_label{path=\"C:\\\\dir\",msg=\"say \\\"hi\\\"\\nbye\",} NaN\n"
    "up +Inf\n"
    "down -Inf -5\n"
    "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-x\"}\t341.5\n"
    "empty_labels{} 7\n";

static void test_tricky(void)
{
    got g = {0};
    tel_prom_stats st;
    CHECK(tel_prom_parse(vllm_text, sizeof vllm_text - 1, on_s, &g, &st) == 0, "parse");
    CHECK(st.n_bad == 0, "no malformed line, got %zu", st.n_bad);
    CHECK(g.n == 16 && st.n_samples == 16, "16 samples, got %zu", g.n);
    if (g.n != 16)
        return;
    CHECK(!strcmp(g.name[0], "vllm:num_requests_running") && g.type[0] == TEL_PROM_GAUGE && g.value[0] == 12,
          "colon name, gauge");
    CHECK(!strcmp(g.labels[0], "engine=\"0\",model_name=\"Qwen/Qwen3-8B\""), "labels compact: %s", g.labels[0]);
    CHECK(g.type[2] == TEL_PROM_COUNTER && !strcmp(g.family[2], "vllm:num_preemptions"),
          "prometheus_client's x_total belongs to counter x (%s)", g.family[2]);
    CHECK(g.type[3] == TEL_PROM_UNTYPED, "x_created is not the counter");
    CHECK(g.type[5] == TEL_PROM_HISTOGRAM && !strcmp(g.family[5], "vllm:iteration_tokens_total") && g.value[5] == 100,
          "+Inf bucket of the histogram");
    CHECK(g.type[7] == TEL_PROM_HISTOGRAM && g.value[7] == 1600, "histogram sum");
    CHECK(g.type[8] == TEL_PROM_SUMMARY && g.type[10] == TEL_PROM_SUMMARY && g.has_ts[10] &&
              g.ts[10] == INT64_C(1395066363000) && g.value[10] == 2693,
          "summary count with a timestamp, CRLF");
    CHECK(isnan(g.value[11]) && !strcmp(g.labels[11], "path=\"C:\\\\dir\",msg=\"say \\\"hi\\\"\\nbye\""),
          "escapes round trip, NaN: %s", g.labels[11]);
    CHECK(isinf(g.value[12]) && g.value[12] > 0 && isinf(g.value[13]) && g.value[13] < 0 && g.ts[13] == -5,
          "+Inf, -Inf, negative timestamp");
    CHECK(g.value[14] == 341.5 && !strcmp(g.labels[14], "gpu=\"0\",UUID=\"GPU-x\""), "tab before the value");
    CHECK(!strcmp(g.labels[15], "") && g.value[15] == 7, "empty label set");
    /* the canonical text parses back to the same samples */
    got g2 = {0};
    tel_prom_stats st2;
    CHECK(tel_prom_parse(g.canon.p, g.canon.len, on_s, &g2, &st2) == 0 && st2.n_bad == 0 && g2.n == g.n,
          "re-parse: %zu samples, %zu bad", g2.n, st2.n_bad);
    CHECK(g2.canon.len == g.canon.len && !memcmp(g2.canon.p, g.canon.p, g.canon.len), "canonical text stable");
    for (size_t i = 0; i < g.n && i < g2.n; i++)
        CHECK(!strcmp(g.name[i], g2.name[i]) && !strcmp(g.labels[i], g2.labels[i]) && g.type[i] == g2.type[i] &&
                  (g.value[i] == g2.value[i] || (isnan(g.value[i]) && isnan(g2.value[i]))),
              "sample %zu the same after re-parse", i);
    ll_buf_free(&g.canon);
    ll_buf_free(&g2.canon);
}

static void test_malformed(void)
{
    static const char *const bad[] = {
        "1abc 1",                      /* name starts with a digit */
        "foo",                         /* no value */
        "foo 1 2 3",                   /* trailing garbage */
        "foo{a=\"1\" 1",               /* unclosed label set */
        "foo{a=1} 1",                  /* unquoted label value */
        "foo{a=\"\\t\"} 1",            /* unknown escape */
        "foo{a=\"1\",a=\"2\"} 1",      /* duplicate label */
        "foo{a:b=\"1\"} 1",            /* colon in a label name */
        "foo{a=\"x} 1",                /* unterminated value */
        "foo 0x10",                    /* hex */
        "foo nan(1)",                  /* strtod's extensions */
        "foo infinity",
        "foo 1 1.5",                   /* fractional timestamp */
        "foo 1 99999999999999999999999", /* timestamp overflow */
        "# TYPE foo nonsense",         /* unknown type */
        "# TYPE foo",                  /* no type */
        "# TYPE 9foo counter",         /* bad name */
        "# HELP",                      /* no name */
        "foo{a=\"1\"}} 1",
        "foo\"x\" 1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        got g = {0};
        tel_prom_stats st;
        int rc = tel_prom_parse(bad[i], strlen(bad[i]), on_s, &g, &st);
        CHECK(rc == 0 && st.n_bad == 1 && g.n == 0, "'%s': rc %d bad %zu samples %zu", bad[i], rc, st.n_bad, g.n);
        ll_buf_free(&g.canon);
    }
    /* a bad line between good ones costs that line only; a NUL in a line too */
    static const char mixed[] = "a 1\nb{x=\"1\" 2\nc 3\nd\0 4\ne 5";
    got g = {0};
    tel_prom_stats st;
    CHECK(tel_prom_parse(mixed, sizeof mixed - 1, on_s, &g, &st) == 0 && g.n == 3 && st.n_bad == 2 && st.n_lines == 5,
          "mixed: %zu samples %zu bad %zu lines", g.n, st.n_bad, st.n_lines);
    CHECK(g.n == 3 && !strcmp(g.name[2], "e"), "last line without a newline read");
    ll_buf_free(&g.canon);
    /* a TYPE line's family does not leak onto an unrelated later sample */
    static const char fam[] = "# TYPE foo histogram\nfoo_sum 1\nfoobar_sum 2\n";
    got h = {0};
    CHECK(tel_prom_parse(fam, sizeof fam - 1, on_s, &h, NULL) == 0 && h.n == 2 && h.type[0] == TEL_PROM_HISTOGRAM &&
              h.type[1] == TEL_PROM_UNTYPED,
          "foobar_sum is not foo's");
    ll_buf_free(&h.canon);
}

static int stop_at_two(const tel_prom_sample *s, void *ctx)
{
    (void)s;
    return ++*(int *)ctx == 2 ? LL_EINTR : 0;
}

static void test_stop_and_empty(void)
{
    int n = 0;
    CHECK(tel_prom_parse("a 1\nb 2\nc 3\n", 12, stop_at_two, &n, NULL) == LL_EINTR && n == 2,
          "the callback's code stops the parse");
    tel_prom_stats st;
    CHECK(tel_prom_parse("", 0, stop_at_two, &n, &st) == 0 && st.n_lines == 0 && st.n_samples == 0, "empty text");
}

int main(void)
{
    test_tricky();
    test_malformed();
    test_stop_and_empty();
    TEST_MAIN_END();
}
