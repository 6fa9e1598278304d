/* test_scenarios.c: the strict loader (messages name file, key and what was
 * expected), the shipped scenario files, and prompt sets. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "scenario.h"
#include "testutil.h"

/* Loading must fail with a message that contains each of the needles. */
static void expect_error(const char *json, const char *n1, const char *n2)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    int rc = scn_load_string(json, "bad.json", &s, err, sizeof err);
    CHECK(rc != 0 && s == NULL, "rejected: %s", json);
    CHECK(strstr(err, "bad.json") && strstr(err, n1) && (!n2 || strstr(err, n2)), "message '%s' names '%s' '%s'",
          err, n1, n2 ? n2 : "");
}

static void test_errors(void)
{
    expect_error("{\"concurrancy\":[1]}", "concurrancy", "unknown key");
    expect_error("{\"load\":{\"concurrency\":[1,\"2\"]}}", "load.concurrency[1]", "integer");
    expect_error("{\"load\":{\"concurrency\":[1,2.5]}}", "load.concurrency[1]", "integer");
    expect_error("{\"levels\":[{\"concurrency\":4},{\"concurency\":8}]}", "levels[1].concurency", "unknown key");
    expect_error("{\"levels\":[{\"concurrency\":-1}]}", "levels[0].concurrency", "[0, 1000000]");
    expect_error("{\"levels\":[{\"concurrency\":0}]}", "levels[0].concurrency", ">= 1");
    expect_error("{\"request\":{\"max_tokens\":\"64\"}}", "request.max_tokens", "integer");
    expect_error("{\"request\":{\"ignore_eos\":1}}", "request.ignore_eos", "true or false");
    expect_error("{\"target\":{\"endpoint\":\"chatt\"}}", "target.endpoint", "\"chat\" or \"completions\"");
    expect_error("{\"target\":{\"url\":\"127.0.0.1:8000\"}}", "target.url", "http://");
    expect_error("{\"prompts\":{\"source\":\"jsonl\"}}", "prompts.path", "file");
    expect_error("{\"prompts\":{\"words\":{\"dist\":\"uniform\",\"min\":10,\"max\":5}}}", "prompts.words.max", NULL);
    expect_error("{\"levels\":[{\"concurrency\":32,\"profile\":{\"num_steps\":0}}]}", "levels[0].profile.num_steps",
                 "[1, 100000]");
    expect_error("{\"levels\":[{\"concurrency\":32,\"profile\":{\"style\":\"torch\"}}]}", "levels[0].profile.style",
                 "sglang");
    expect_error("{\"load\":{\"concurrency\":[1]},\"levels\":[{\"concurrency\":2}]}", "load.concurrency", "levels");
    expect_error("{\"load\":{\"rate_per_s\":-1}}", "load.rate_per_s", NULL);
    expect_error("[1,2]", "top level", "object");
    expect_error("{\"name\":\"x\",\n\"load\":{", "line 2", "malformed");
}

static void test_load_and_override(void)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    const char *j = "{\"name\":\"t\",\"target\":{\"url\":\"http://127.0.0.1:9/\",\"model\":\"m\",\"endpoint\":\"completions\"},"
                    "\"request\":{\"max_tokens\":96,\"think_tokens\":32},"
                    "\"load\":{\"threads\":3,\"concurrency\":[1,2,64],\"warmup\":2,\"duration_s\":30}}";
    int rc = scn_load_string(j, "t.json", &s, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    if (rc)
        return;
    CHECK(s->n_levels == 3 && s->levels[2].concurrency == 64 && s->levels[1].warmup == 2 &&
              s->levels[0].duration_s == 30,
          "levels from load.concurrency with shared options");
    CHECK(scn_level_requests(&s->levels[0]) == 8 && scn_level_requests(&s->levels[2]) == 96,
          "default requests: max(1.5 C, 8): %d %d", scn_level_requests(&s->levels[0]),
          scn_level_requests(&s->levels[2]));
    CHECK(s->endpoint == SCN_ENDPOINT_COMPLETIONS && s->max_tokens == 96 && s->think_tokens == 32 && s->threads == 3,
          "fields");
    int c[] = {4, 8};
    CHECK(scn_set_concurrency(s, c, 2) == 0 && s->n_levels == 2 && s->levels[1].concurrency == 8 &&
              s->levels[1].warmup == 2,
          "flag override keeps per-level options");
    cJSON *o = scn_to_json(s);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    CHECK(txt && strstr(txt, "\"max_tokens\":96") && strstr(txt, "\"concurrency\":8"), "to_json: %s",
          txt ? txt : "(null)");
    /* The effective config round-trips through the strict loader (keys it
     * writes are keys it accepts), apart from the derived "requests". */
    cJSON_free(txt);
    cJSON_Delete(o);
    scn_free(s);
}

static void test_shipped(void)
{
    const char *files[] = {"default.json", "remote-template.json", "profile-c32.json"};
    for (size_t i = 0; i < 3; i++) {
        char path[1024], err[512] = "";
        scn_scenario *s = NULL;
        snprintf(path, sizeof path, "%s/scenarios/%s", LOADLAW_SOURCE_DIR, files[i]);
        int rc = scn_load_file(path, &s, err, sizeof err);
        CHECK(rc == 0, "%s: %s", files[i], err);
        if (rc)
            continue;
        if (i == 0) {
            CHECK(s->url == NULL && s->engine_spec && strstr(s->engine_spec, "law=52+30n") && s->n_levels == 7 &&
                      s->levels[6].concurrency == 64 && s->think_tokens > 0,
                  "default.json: bundled 52+30n, C=1..64, thinking on");
        }
        if (i == 2) {
            CHECK(s->n_levels == 1 && s->levels[0].concurrency == 32 && s->levels[0].n_requests == 220 &&
                      s->levels[0].profile.enabled && s->levels[0].profile.num_steps == 12 &&
                      s->levels[0].profile.style == SCN_PROFILE_SGLANG,
                  "profile-c32.json: 220 prompts at C=32, 12-step SGLang profile");
        }
        scn_free(s);
    }
}

static void test_prompts(void)
{
    scn_scenario *s = NULL;
    scn_prompts *p = NULL, *p2 = NULL;
    char err[512] = "";
    const char *j = "{\"prompts\":{\"words\":{\"dist\":\"uniform\",\"min\":10,\"max\":20},\"count\":500,\"seed\":7}}";
    CHECK(scn_load_string(j, "p.json", &s, err, sizeof err) == 0, "load: %s", err);
    if (!s)
        return;
    CHECK(scn_prompts_load(s, &p, err, sizeof err) == 0 && scn_prompts_load(s, &p2, err, sizeof err) == 0,
          "prompts: %s", err);
    if (p && p2) {
        int lo = 1 << 30, hi = 0, same = 1;
        double sum = 0;
        for (size_t i = 0; i < scn_prompts_count(p); i++) {
            int w;
            const char *t = scn_prompt(p, i, &w);
            lo = w < lo ? w : lo;
            hi = w > hi ? w : hi;
            sum += w;
            same &= strcmp(t, scn_prompt(p2, i, NULL)) == 0;
        }
        CHECK(scn_prompts_count(p) == 500 && lo >= 10 && hi <= 20 && lo <= 11 && hi >= 19,
              "uniform 10..20 words: %d..%d", lo, hi);
        CHECK(sum / 500 > 14 && sum / 500 < 16, "mean words %.2f", sum / 500);
        CHECK(same, "same seed, same prompts");
    }
    scn_prompts_free(p);
    scn_prompts_free(p2);
    scn_free(s);

    /* normal, clamped */
    j = "{\"prompts\":{\"words\":{\"dist\":\"normal\",\"mean\":100,\"stddev\":10},\"count\":2000}}";
    CHECK(scn_load_string(j, "n.json", &s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0,
          "normal: %s", err);
    if (p) {
        double m = 0, v = 0;
        int n = (int)scn_prompts_count(p), w;
        for (int i = 0; i < n; i++) {
            scn_prompt(p, (size_t)i, &w);
            m += w;
            v += (double)w * w;
        }
        m /= n;
        v = v / n - m * m;
        CHECK(m > 99 && m < 101 && v > 80 && v < 120, "normal words mean %.2f var %.1f", m, v);
    }
    scn_prompts_free(p);
    scn_free(s);
    p = NULL;
    s = NULL;

    /* ShareGPT and JSONL files */
    char dir[256], path[600];
    snprintf(dir, sizeof dir, "/tmp/scn_test_%d", (int)getpid());
    CHECK(ll_mkdir_p(dir, err, sizeof err) == 0, "mkdir");
    snprintf(path, sizeof path, "%s/sg.json", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("[{\"id\":\"a\",\"conversations\":[{\"from\":\"system\",\"value\":\"sys\"},{\"from\":\"human\",\"value\":\"hello there\"},"
              "{\"from\":\"gpt\",\"value\":\"hi\"}]},{\"id\":\"b\",\"conversations\":[{\"from\":\"gpt\",\"value\":\"x\"}]},"
              "{\"id\":\"c\",\"conversations\":[{\"from\":\"human\",\"value\":\"one two three\"}]}]",
              f);
        fclose(f);
    }
    snprintf(path, sizeof path, "{\"prompts\":{\"source\":\"sharegpt\",\"path\":\"%s/sg.json\"}}", dir);
    CHECK(scn_load_string(path, "sg", &s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0,
          "sharegpt: %s", err);
    if (p) {
        int w;
        CHECK(scn_prompts_count(p) == 2 && strcmp(scn_prompt(p, 0, &w), "hello there") == 0 && w == 2 &&
                  strcmp(scn_prompt(p, 1, &w), "one two three") == 0 && w == 3,
              "sharegpt first human turns");
    }
    scn_prompts_free(p);
    scn_free(s);
    p = NULL;
    s = NULL;
    snprintf(path, sizeof path, "%s/p.jsonl", dir);
    if ((f = fopen(path, "w"))) {
        fputs("{\"prompt\":\"alpha beta\"}\n{\"text\":\"gamma\"}\n{\"text\":\"delta\"}\n{\"nope\":1}\n", f);
        fclose(f);
    }
    snprintf(path, sizeof path, "{\"prompts\":{\"source\":\"jsonl\",\"path\":\"%s/p.jsonl\"}}", dir);
    CHECK(scn_load_string(path, "jl", &s, err, sizeof err) == 0, "jsonl scenario");
    if (s) {
        int rc = scn_prompts_load(s, &p, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "p.jsonl:4"), "a bad JSONL line is named: %s", err);
    }
    scn_free(s);
    s = NULL;
    snprintf(path, sizeof path, "%s/q.jsonl", dir);
    if ((f = fopen(path, "w"))) {
        fputs("{\"prompt\":\"alpha beta\"}\n{\"text\":\"gamma\",\"id\":3}\n", f);
        fclose(f);
    }
    snprintf(path, sizeof path, "{\"prompts\":{\"source\":\"jsonl\",\"path\":\"%s/q.jsonl\"}}", dir);
    if (scn_load_string(path, "jl2", &s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0) {
        int w;
        CHECK(scn_prompts_count(p) == 2 && strcmp(scn_prompt(p, 1, &w), "gamma") == 0 && w == 1 &&
                  strcmp(scn_prompt(p, 2, NULL), "alpha beta") == 0,
              "jsonl prompts, index wraps");
    } else {
        CHECK(0, "jsonl: %s", err);
    }
    scn_prompts_free(p);
    scn_free(s);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0)
        fprintf(stderr, "cleanup failed\n");
}

int main(void)
{
    test_errors();
    test_load_and_override();
    test_shipped();
    test_prompts();
    TEST_MAIN_END();
}
