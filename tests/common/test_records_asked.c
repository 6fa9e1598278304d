/* test_records_asked.c: what a run asked (records.h ll_rec_asked), read from
 * the run line's config once by the reader: the typed fields fit reads (the
 * cut-short requests, the prompt-length estimate) and the fingerprints
 * compare reads (did two runs ask for the same work?), which must agree
 * with cJSON_Compare on the sections without their timeout_s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

static void asked_of(const char *config_json, ll_rec_asked *out)
{
    cJSON *c = config_json ? cJSON_Parse(config_json) : NULL;
    ll_rec_asked_of(c, out);
    cJSON_Delete(c);
}

static void test_fields(void)
{
    ll_rec_asked a;
    asked_of(NULL, &a);
    CHECK(a.max_tokens == 0 && !a.ignore_eos && !a.trace && isnan(a.prompt_tok) && !a.prompts_fp && !a.request_fp,
          "no config: nothing asked");
    asked_of("{\"request\":{\"max_tokens\":64,\"ignore_eos\":true},"
             "\"prompts\":{\"source\":\"synthetic\",\"tokenizer\":null,"
             "\"tokens\":{\"dist\":\"fixed\",\"value\":300}}}",
             &a);
    CHECK(a.max_tokens == 64 && a.ignore_eos && !a.trace, "max_tokens %d, ignore_eos %d", a.max_tokens, a.ignore_eos);
    CHECK(a.prompt_tok == 300, "prompt tokens asked: fixed value (%g)", a.prompt_tok);
    CHECK(a.prompts_fp && a.request_fp, "both sections fingerprinted");
    asked_of("{\"request\":{\"max_tokens\":0.5,\"extra_body\":{\"ignore_eos\":true}},"
             "\"load\":{\"trace\":{\"path\":\"t\"}},"
             "\"prompts\":{\"source\":\"synthetic\",\"tokens\":{\"dist\":\"normal\",\"mean\":120}}}",
             &a);
    CHECK(a.max_tokens == 0 && a.ignore_eos && a.trace, "max_tokens below 1 unknown, extra_body's ignore_eos, trace");
    CHECK(a.prompt_tok == 120, "prompt tokens asked: the mean (%g)", a.prompt_tok);
    asked_of("{\"load\":{\"trace\":null},\"prompts\":{\"source\":\"synthetic\",\"tokenizer\":\"tok.json\","
             "\"tokens\":{\"dist\":\"fixed\",\"value\":300}}}",
             &a);
    CHECK(!a.trace && isnan(a.prompt_tok), "a null trace is none; with a tokenizer the length is exact, not asked");
    asked_of("{\"prompts\":{\"source\":\"sharegpt\",\"tokens\":{\"dist\":\"fixed\",\"value\":300}}}", &a);
    CHECK(isnan(a.prompt_tok), "file prompts: no length asked");
}

/* The fingerprints against cJSON_Compare on config.<key> without timeout_s. */
static int same_fp(const char *x, const char *y)
{
    ll_rec_asked a, b;
    asked_of(x, &a);
    asked_of(y, &b);
    return a.prompts_fp == b.prompts_fp && a.request_fp == b.request_fp;
}

static void test_fingerprints(void)
{
    CHECK(same_fp("{\"request\":{\"max_tokens\":64,\"ignore_eos\":true,\"timeout_s\":60}}",
                  "{\"request\":{\"timeout_s\":120,\"ignore_eos\":true,\"max_tokens\":64}}"),
          "key order and timeout_s do not matter");
    CHECK(!same_fp("{\"request\":{\"max_tokens\":64}}", "{\"request\":{\"max_tokens\":65}}"), "a value differs");
    CHECK(!same_fp("{\"request\":{\"ignore_eos\":true}}", "{\"request\":{\"ignore_eos\":false}}"), "a bool differs");
    CHECK(!same_fp("{\"request\":{\"extra_body\":{\"a\":[1,2]}}}", "{\"request\":{\"extra_body\":{\"a\":[2,1]}}}"),
          "arrays keep their order");
    CHECK(!same_fp("{\"request\":{\"a\":{\"b\":1}}}", "{\"request\":{\"a\":{\"c\":1}}}"), "a nested key differs");
    CHECK(!same_fp("{\"request\":{\"a\":\"1\"}}", "{\"request\":{\"a\":1}}"), "a string is not a number");
    CHECK(!same_fp("{\"request\":{}}", "{}"), "a section present against one absent");
    CHECK(!same_fp("{\"request\":null}", "{}"), "a null section is present");
    CHECK(same_fp("{\"request\":{\"timeout_s\":5}}", "{\"request\":{}}"), "timeout_s alone is no work");
    CHECK(!same_fp("{\"request\":{\"x\":{\"timeout_s\":5}}}", "{\"request\":{\"x\":{}}}"),
          "only the section's own timeout_s is left out");
    CHECK(!same_fp("{\"prompts\":{\"count\":10}}", "{\"prompts\":{\"count\":11}}"), "prompts too");
}

/* Through the reader: the run line's config gives the same block. */
typedef struct got_run {
    ll_rec_asked asked;
    int seen;
} got_run;

static int on_run(const ll_rec_run *run, void *ctx)
{
    got_run *g = ctx;
    g->asked = run->asked;
    g->seen++;
    return 0;
}

static void test_read(void)
{
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/ll_asked_%d.jsonl", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "open %s", path);
    if (!f)
        return;
    fputs("{\"type\":\"run\",\"schema\":1,\"config\":{\"request\":{\"max_tokens\":48,\"ignore_eos\":true}}}\n", f);
    CHECK(fclose(f) == 0, "write %s", path);
    got_run g = {0};
    ll_rec_handlers h = {.on_run = on_run};
    ll_rec_read_stats st;
    int rc = ll_rec_read(path, &h, &g, &st, err, sizeof err);
    CHECK(rc == 0 && g.seen == 1, "read: %s", rc ? err : "no run line");
    ll_rec_asked want;
    asked_of("{\"request\":{\"max_tokens\":48,\"ignore_eos\":true}}", &want);
    CHECK(g.asked.max_tokens == 48 && g.asked.ignore_eos && g.asked.request_fp == want.request_fp &&
              !g.asked.prompts_fp,
          "the reader's asked block is the config's");
    unlink(path);
}

int main(void)
{
    test_fields();
    test_fingerprints();
    test_read();
    TEST_MAIN_END();
}
