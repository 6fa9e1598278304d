/* test_scenarios.c: the strict loader (messages name file, key and what was
 * expected), the shipped scenario files, and prompt sets. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "scenario.h"
#include "scenario_keys.h"
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
    /* a key given twice: cJSON would read the first, most tools the last */
    expect_error("{\"load\":{\"concurrency\":[1]},\"load\":{\"concurrency\":[64]}}", "load", "key given twice");
    expect_error("{\"request\":{\"max_tokens\":8,\"max_tokens\":99}}", "request.max_tokens", "key given twice");
    expect_error("{\"load\":{\"concurrency\":[1,\"2\"]}}", "load.concurrency[1]", "integer");
    expect_error("{\"load\":{\"concurrency\":[1,2.5]}}", "load.concurrency[1]", "integer");
    expect_error("{\"levels\":[{\"concurrency\":4},{\"concurency\":8}]}", "levels[1].concurency", "unknown key");
    expect_error("{\"levels\":[{\"concurrency\":-1}]}", "levels[0].concurrency", "[0, 1000000]");
    expect_error("{\"levels\":[{\"concurrency\":0}]}", "levels[0].concurrency", ">= 1");
    expect_error("{\"load\":{\"concurrency\":[2,0]}}", "load.concurrency[1]", ">= 1");
    expect_error("{\"request\":{\"max_tokens\":\"64\"}}", "request.max_tokens", "integer");
    expect_error("{\"request\":{\"ignore_eos\":1}}", "request.ignore_eos", "true or false");
    expect_error("{\"target\":{\"endpoint\":\"chatt\"}}", "target.endpoint", "\"responses\" or \"generate\"");
    /* The request-shaping fields (path, headers, extra_body), as strict as the rest. */
    expect_error("{\"target\":{\"path\":\"v1/x\"}}", "target.path", "'/'");
    expect_error("{\"target\":{\"path\":7}}", "target.path", "string");
    expect_error("{\"target\":{\"headers\":\"X: y\"}}", "target.headers", "array");
    expect_error("{\"target\":{\"headers\":[\"X: y\",\"novalue\"]}}", "target.headers[1]", "Name: value");
    expect_error("{\"target\":{\"headers\":[\"X: a\\r\\nY: b\"]}}", "target.headers[0]", NULL);
    expect_error("{\"request\":{\"extra_body\":[1]}}", "request.extra_body", "object");
    expect_error("{\"request\":{\"continuous_usage\":1}}", "request.continuous_usage", "true or false");
    expect_error("{\"prompts\":{\"tokenizer\":\"\"}}", "prompts.tokenizer", "string");
    expect_error("{\"prompts\":{\"tokens\":{\"dist\":\"normal\",\"mena\":3}}}", "prompts.tokens.mena", "unknown key");
    expect_error("{\"prompts\":{\"tokens\":{\"dist\":\"uniform\",\"min\":10,\"max\":5}}}", "prompts.tokens.max", NULL);
    expect_error("{\"target\":{\"url\":\"127.0.0.1:8000\"}}", "target.url", "has no scheme; write http://");
    /* the message quotes the URL with its password hidden */
    expect_error("{\"target\":{\"url\":\"u:PW@h:1\"}}", "target.url", "'(hidden)@h:1' has no scheme");
    expect_error("{\"target\":{\"url\":\"file:///etc/passwd\"}}", "target.url", "is not an http(s) URL");
    scn_scenario *up = NULL;
    char uerr[512] = "";
    CHECK(scn_load_string("{\"target\":{\"url\":\"HTTPS://h:1/v1\"}}", "up.json", &up, uerr, sizeof uerr) == 0 &&
              up,
          "a scheme in capitals is a scheme: %s", uerr);
    scn_free(up);
    expect_error("{\"prompts\":{\"source\":\"jsonl\"}}", "prompts.path", "file");
    expect_error("{\"prompts\":{\"words\":{\"dist\":\"uniform\",\"min\":10,\"max\":5}}}", "prompts.words.max", NULL);
    expect_error("{\"levels\":[{\"concurrency\":32,\"profile\":{\"num_steps\":0}}]}", "levels[0].profile.num_steps",
                 "[1, 100000]");
    expect_error("{\"levels\":[{\"concurrency\":32,\"profile\":{\"style\":\"torch\"}}]}", "levels[0].profile.style",
                 "sglang");
    expect_error("{\"load\":{\"concurrency\":[1]},\"levels\":[{\"concurrency\":2}]}", "load.concurrency", "levels");
    expect_error("{\"load\":{\"rate_per_s\":-1}}", "load.rate_per_s", NULL);
    expect_error("{\"load\":{\"max_failed\":1.5}}", "load.max_failed", "[0, 1]");
    expect_error("{\"defaults\":\"mine\"}", "defaults", "\"bundled\", \"remote\" or \"file\"");
    expect_error("{\"load\":{\"max_faild\":0.5}}", "load.max_faild", "unknown key");
    /* One arrival gap of 1/rate seconds becomes int64 ns: 1e-300/s overflows it. */
    expect_error("{\"load\":{\"rate_per_s\":1e-300}}", "load.rate_per_s", "1e-06");
    expect_error("{\"levels\":[{\"concurrency\":2,\"rate_per_s\":1e-9}]}", "levels[0].rate_per_s", NULL);
    expect_error("[1,2]", "top level", "object");
    expect_error("{\"name\":\"x\",\n\"load\":{", "line 2", "malformed");
}

static void test_load_and_override(void)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    const char *j = "{\"name\":\"t\",\"target\":{\"url\":\"http://127.0.0.1:9/\",\"model\":\"m\",\"endpoint\":\"completions\"},"
                    "\"request\":{\"max_tokens\":96,\"think_tokens\":32},"
                    "\"load\":{\"threads\":3,\"concurrency\":[1,2,64],\"warmup\":2,\"duration_s\":30,"
                    "\"max_failed\":0.25}}";
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
    CHECK(s->endpoint == SCN_ENDPOINT_COMPLETIONS && s->max_tokens == 96 && s->think_tokens == 32 && s->threads == 3 &&
              s->max_failed == 0.25,
          "fields");
    int c[] = {4, 8};
    CHECK(scn_set_concurrency(s, c, 2) == 0 && s->n_levels == 2 && s->levels[1].concurrency == 8 &&
              s->levels[1].warmup == 2,
          "flag override keeps per-level options");
    cJSON *o = scn_to_json(s);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    CHECK(txt && strstr(txt, "\"max_tokens\":96") && strstr(txt, "\"concurrency\":8") &&
              strstr(txt, "\"max_failed\":0.25"),
          "to_json: %s",
          txt ? txt : "(null)");
    /* The effective config round-trips through the strict loader (keys it
     * writes are keys it accepts, the "defaults" label too): loaded back and
     * written again, it is the same text. */
    scn_scenario *s2 = NULL;
    CHECK(scn_set_str(&s->defaults, "file") == 0, "label");
    cJSON_Delete(o);
    cJSON_free(txt);
    o = scn_to_json(s);
    txt = o ? cJSON_PrintUnformatted(o) : NULL;
    rc = txt ? scn_load_string(txt, "to_json", &s2, err, sizeof err) : -1;
    CHECK(rc == 0 && s2 && s2->defaults && strcmp(s2->defaults, "file") == 0, "to_json loads back: %s", err);
    cJSON *o2 = s2 ? scn_to_json(s2) : NULL;
    char *txt2 = o2 ? cJSON_PrintUnformatted(o2) : NULL;
    CHECK(txt && txt2 && strcmp(txt, txt2) == 0, "round trip: %s\nvs %s", txt ? txt : "", txt2 ? txt2 : "");
    cJSON_free(txt2);
    cJSON_Delete(o2);
    scn_free(s2);
    cJSON_free(txt);
    cJSON_Delete(o);
    scn_free(s);
}

/* Endpoint names and paths; the request-shaping fields load, round-trip through
 * scn_to_json (with "defaults") and are freed by scn_free (ASan build). */
static void test_request_fields(void)
{
    static const char *const names[] = {"chat", "completions", "responses", "generate"};
    static const char *const paths[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/generate"};
    for (int i = 0; i < SCN_ENDPOINT__COUNT; i++) {
        scn_endpoint e = SCN_ENDPOINT__COUNT;
        CHECK(!strcmp(scn_endpoint_name((scn_endpoint)i), names[i]), "name %d", i);
        CHECK(scn_endpoint_parse(names[i], &e) == 0 && e == (scn_endpoint)i, "parse %s", names[i]);
        CHECK(!strcmp(scn_endpoint_path((scn_endpoint)i), paths[i]), "path %d", i);
    }
    scn_endpoint e;
    CHECK(scn_endpoint_parse("embeddings", &e) == LL_EINVAL && scn_endpoint_parse(NULL, &e) == LL_EINVAL,
          "unknown endpoint rejected");
    scn_scenario *s = NULL;
    char err[512] = "";
    CHECK(scn_new(&s) == 0 && s->continuous_usage == 1 && !s->extra_body && !s->n_headers, "scn_new defaults");
    scn_free(s);
    s = NULL;
    const char *j = "{\"target\":{\"url\":\"http://h:1/d?api-version=1&sig=sig-file-SECRET&code=code-file-SECRET\","
                    "\"endpoint\":\"generate\",\"path\":\"/x/generate?api-key=path-file-SECRET&v=2\","
                    "\"headers\":[\"X-A: 1\",\"Api-Key: sk-file-SECRET\",\"X-Credential: c-file-SECRET\","
                    "\"X-Passwd: p-file-SECRET\",\"X-Signature: s-file-SECRET\",\"X-Session-Id: i-file-SECRET\","
                    "\"Accept: text/event-stream\"]},"
                    "\"request\":{\"extra_body\":{\"temperature\":0.5,\"stop\":[\"a\"]},\"continuous_usage\":false},"
                    "\"prompts\":{\"tokenizer\":\"tok.json\",\"tokens\":{\"dist\":\"normal\",\"mean\":300,\"stddev\":20}}}";
    int rc = scn_load_string(j, "n.json", &s, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    if (rc)
        return;
    CHECK(s->endpoint == SCN_ENDPOINT_GENERATE && !strcmp(s->endpoint_path, "/x/generate?api-key=path-file-SECRET&v=2"),
          "endpoint + path");
    CHECK(s->n_headers == 7 && !strcmp(s->headers[0], "X-A: 1"), "headers");
    CHECK(s->extra_body && cJSON_GetObjectItem(s->extra_body, "temperature")->valuedouble == 0.5, "extra_body");
    CHECK(s->continuous_usage == 0, "continuous_usage false");
    CHECK(!strcmp(s->tokenizer_path, "tok.json") && s->prompt_tokens_set &&
          s->prompt_tokens.kind == SCN_DIST_NORMAL && s->prompt_tokens.mean == 300, "tokenizer + tokens");
    CHECK(scn_set_str(&s->defaults, "file") == 0, "defaults set");
    cJSON *o = scn_to_json(s);
    CHECK(o != NULL, "to_json");
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    CHECK(txt && strstr(txt, "\"defaults\":\"file\"") && strstr(txt, "\"endpoint\":\"generate\"") &&
          strstr(txt, "\"path\":\"/x/generate?api-key=(hidden)&v=2\"") && strstr(txt, "\"X-A: 1\"") &&
          strstr(txt, "\"continuous_usage\":false") && strstr(txt, "\"temperature\":0.5") &&
          strstr(txt, "\"tokenizer\":\"tok.json\"") && strstr(txt, "\"tokens\":{\"dist\":\"normal\""),
          "to_json carries the new fields: %s", txt ? txt : "");
    CHECK(txt && !strstr(txt, "file-SECRET") && strstr(txt, "\"Api-Key: (hidden)\"") &&
              strstr(txt, "\"X-Credential: (hidden)\"") && strstr(txt, "\"X-Passwd: (hidden)\"") &&
              strstr(txt, "\"X-Signature: (hidden)\"") && strstr(txt, "\"X-Session-Id: (hidden)\"") &&
              strstr(txt, "\"Accept: text/event-stream\"") &&
              strstr(txt, "\"url\":\"http://h:1/d?api-version=1&sig=(hidden)&code=(hidden)\""),
          "secret header and query values hidden, the others kept: %s", txt ? txt : "");
    free(txt);
    cJSON_Delete(o);
    scn_free(s);
}

/* The key a sweep flag sets (scenario_keys.h), or NULL. */
static const scn_key *flag_key(const char *flag)
{
    const scn_key *k;
    for (size_t i = 0; (k = scn_flag_key(i)); i++)
        if (!strcmp(scn_key_flag(k), flag))
            return k;
    return NULL;
}

/* request.top_p, the key added as one row of the key table: loaded,
 * checked, written back (only when set: a run without it keeps its run
 * line), loaded back, and set by its flag. That it reaches the request body
 * is test_loadgen's (test_top_p). */
static void test_top_p(void)
{
    scn_scenario *s = NULL, *s2 = NULL;
    char err[512] = "";
    expect_error("{\"request\":{\"top_p\":0}}", "request.top_p", "a number in (0, 1]");
    expect_error("{\"request\":{\"top_p\":1.5}}", "request.top_p", "(0, 1]");
    expect_error("{\"request\":{\"top_p\":\"0.9\"}}", "request.top_p", "(0, 1]");
    CHECK(scn_new(&s) == 0 && s->top_p == 0, "unset by default");
    cJSON *o = s ? scn_to_json(s) : NULL;
    CHECK(o && !cJSON_GetObjectItem(cJSON_GetObjectItem(o, "request"), "top_p"), "unset: not written");
    cJSON_Delete(o);
    scn_free(s);
    s = NULL;
    int rc = scn_load_string("{\"request\":{\"top_p\":0.9}}", "t.json", &s, err, sizeof err);
    CHECK(rc == 0 && s && s->top_p == 0.9, "loaded: %s", err);
    if (rc)
        return;
    o = scn_to_json(s);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    CHECK(txt && strstr(txt, "\"top_p\":0.9,"), "written back: %s", txt ? txt : "");
    rc = txt ? scn_load_string(txt, "back", &s2, err, sizeof err) : -1;
    CHECK(rc == 0 && s2 && s2->top_p == 0.9, "loads back: %s", err);
    scn_free(s2);
    cJSON_free(txt);
    cJSON_Delete(o);
    CHECK(scn_load_string("{\"request\":{\"top_p\":null}}", "n.json", &s2, err, sizeof err) == 0 && s2 &&
              s2->top_p == 0,
          "null: not sent");
    scn_free(s2);
    const scn_key *k = flag_key("top-p");
    CHECK(k && !strcmp(scn_key_path(k), "request.top_p") && !strcmp(scn_key_flag_arg(k), "P"), "its flag");
    CHECK(k && scn_key_set(s, k, "0.5", err, sizeof err) == 0 && s->top_p == 0.5, "--top-p 0.5: %s", err);
    CHECK(k && scn_key_check(k, "0", err, sizeof err) == LL_EINVAL &&
              !strcmp(err, "expected a number in (0, 1], got '0'"),
          "--top-p 0: '%s'", err);
    scn_free(s);
}

/* The sweep's flags that set one key each: the key's own check and message
 * ("expected WHAT, got 'V'"), a level's key laid over every level, a bool
 * flag's value. */
static void test_flag_keys(void)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    const scn_key *mt = flag_key("max-tokens"), *wu = flag_key("warmup"), *nc = flag_key("no-continuous-usage");
    const scn_key *ar = flag_key("arrival"), *rp = flag_key("repeat"), *tw = flag_key("trace-window");
    CHECK(mt && wu && nc && ar && rp && tw, "flags found");
    if (!(mt && wu && nc && ar && rp && tw) || scn_load_string("{\"load\":{\"concurrency\":[1,2,4]}}", "f", &s, err,
                                                               sizeof err))
        return;
    CHECK(scn_key_check(mt, "0", err, sizeof err) == LL_EINVAL &&
              !strcmp(err, "expected an integer in [1, 10000000], got '0'"),
          "max-tokens 0: '%s'", err);
    CHECK(scn_key_set(s, mt, "4k", err, sizeof err) == 0 && s->max_tokens == 4000, "max-tokens 4k");
    CHECK(scn_key_set(s, wu, "3", err, sizeof err) == 0 && s->levels[0].warmup == 3 && s->levels[2].warmup == 3,
          "warmup on every level");
    CHECK(scn_key_set(s, nc, NULL, err, sizeof err) == 0 && s->continuous_usage == 0, "a flag without a value");
    CHECK(scn_key_check(ar, "trace", err, sizeof err) == LL_EINVAL &&
              !strcmp(err, "expected poisson or constant, got 'trace'"),
          "arrival: only the names offered: '%s'", err);
    CHECK(scn_key_set(s, rp, "3", err, sizeof err) == 0 && s->ab.repeat == 3 && !strcmp(scn_key_path(rp), "ab.repeat"),
          "a key inside ab");
    CHECK(scn_key_set(s, tw, "2:5", err, sizeof err) == 0 && s->trace_start_s == 2 && s->trace_end_s == 5,
          "a key with its own form");
    scn_free(s);
}

static void test_shipped(void)
{
    const char *files[] = {"default.json", "remote-template.json", "profile-c32.json", "kernel-ab.json"};
    for (size_t i = 0; i < 4; i++) {
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
            CHECK(strstr(s->engine_spec, "p=") && strstr(s->engine_spec, "prefill_budget=") && s->words.min >= 200,
                  "default.json: long prompts with a prefill cost (the C=64 TTFT ramp)");
        }
        if (i == 2) {
            CHECK(s->n_levels == 1 && s->levels[0].concurrency == 32 && s->levels[0].n_requests == 220 &&
                      s->levels[0].profile.enabled && s->levels[0].profile.num_steps == 12 &&
                      s->levels[0].profile.style == SCN_PROFILE_AUTO && s->levels[0].profile.pace_wait_s == 120,
                  "profile-c32.json: 220 prompts at C=32, a 12-step profile in the server's style");
        }
        if (i == 3) {
            CHECK(s->ab.enabled && !strcmp(s->ab.side[0].name, "naive") &&
                      !strcmp(s->ab.side[0].engine, "attn=naive") && !strcmp(s->ab.side[1].name, "tiled") &&
                      !strcmp(s->ab.side[1].engine, "attn=tiled") && s->engine_spec &&
                      strstr(s->engine_spec, "backend=cpu") && !strstr(s->engine_spec, "attn=") &&
                      s->ab.expect_c == 16 && s->levels[s->n_levels - 1].profile.enabled,
                  "kernel-ab.json: naive vs tiled on the cpu backend, gated at C=16, profiled");
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

/* The "ab" section: strict like the rest, and what it loads. */
#define AB_SIDES "\"a\":{\"name\":\"naive\",\"engine\":\"attn=naive\"},\"b\":{\"name\":\"tiled\",\"engine\":\"attn=tiled\"}"
static void test_ab(void)
{
    expect_error("{\"ab\":[1]}", "ab", "object");
    expect_error("{\"ab\":{" AB_SIDES ",\"c\":{}}}", "ab.c", "unknown key");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"engine\":\"attn=naive\"}}}", "ab.b", "object");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"engine\":\"a\",\"law\":1},\"b\":{\"name\":\"y\",\"engine\":\"b\"}}}",
                 "ab.a.law", "unknown key");
    expect_error("{\"ab\":{\"a\":{\"name\":\"../x\",\"engine\":\"a\"},\"b\":{\"name\":\"y\",\"engine\":\"b\"}}}",
                 "ab.a.name", "directory name");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"engine\":7},\"b\":{\"name\":\"y\",\"engine\":\"b\"}}}",
                 "ab.a.engine", "engine spec");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"engine\":\"a\"},\"b\":{\"name\":\"x\",\"engine\":\"b\"}}}",
                 "ab.b.name", "different");
    expect_error("{\"ab\":{" AB_SIDES ",\"expect_speedup\":\"fast\"}}", "ab.expect_speedup", "X@C");
    expect_error("{\"ab\":{" AB_SIDES ",\"expect_speedup\":-2}}", "ab.expect_speedup", "0.001 <= X <= 1e6");
    /* a subnormal gate (found by the scenario fuzzer: it did not survive being written back) */
    expect_error("{\"ab\":{" AB_SIDES ",\"expect_speedup\":1e-320}}", "ab.expect_speedup", "0.001 <= X");
    expect_error("{\"ab\":{" AB_SIDES ",\"expect_speedup\":\"2e6@1\"}}", "ab.expect_speedup", NULL);
    expect_error("{\"ab\":{" AB_SIDES ",\"expect_speedup\":\"2@0\"}}", "ab.expect_speedup", NULL);
    expect_error("{\"load\":{\"concurrency\":[1,8]},\"ab\":{" AB_SIDES ",\"expect_speedup\":\"2@16\"}}",
                 "ab.expect_speedup", "C=16");
    expect_error("{\"target\":{\"url\":\"http://127.0.0.1:9\"},\"ab\":{" AB_SIDES "}}", "ab", "target.url");

    scn_scenario *s = NULL;
    char err[512] = "";
    int rc = scn_load_string("{\"load\":{\"concurrency\":[1,16]},\"ab\":{" AB_SIDES ",\"expect_speedup\":\"2.5x@16\"}}",
                             "ab.json", &s, err, sizeof err);
    CHECK(rc == 0, "ab loads: %s", err);
    if (rc)
        return;
    CHECK(s->ab.enabled && !strcmp(s->ab.side[0].name, "naive") && !strcmp(s->ab.side[1].engine, "attn=tiled") &&
              s->ab.expect_x == 2.5 && s->ab.expect_c == 16,
          "ab sides and gate 2.5@16");
    cJSON *j = scn_to_json(s);
    cJSON *ab = j ? cJSON_GetObjectItem(j, "ab") : NULL;
    CHECK(ab && !strcmp(ll_json_str(cJSON_GetObjectItem(ab, "b"), "name", ""), "tiled") &&
              !strcmp(ll_json_str(ab, "expect_speedup", ""), "2.5@16"),
          "ab in the run record's config");
    cJSON_Delete(j);
    /* -c can drop the gate's level: scn_validate says so. */
    int c[] = {1, 8};
    CHECK(scn_set_concurrency(s, c, 2) == 0 && scn_validate(s, err, sizeof err) != 0 && strstr(err, "C=16"),
          "gate level gone after -c: '%s'", err);
    scn_free(s);
    s = NULL;
    rc = scn_load_string("{\"ab\":{" AB_SIDES ",\"expect_speedup\":3}}", "ab.json", &s, err, sizeof err);
    CHECK(rc == 0 && s->ab.expect_x == 3 && s->ab.expect_c == 0, "numeric gate, highest shared level: %s", err);
    scn_free(s);
    s = NULL;
    rc = scn_load_string("{\"ab\":null}", "ab.json", &s, err, sizeof err);
    CHECK(rc == 0 && !s->ab.enabled, "ab null: one sweep");
    scn_free(s);
}

/* The A/B order. scn_ab_side_at is the ABBA generator the sweep
 * expands every level with: for R repeats per side, positions 0..2R-1. */
static void test_ab_order(void)
{
    /* R = 1: A B; R = 2: A B B A; R = 3 (odd): A B B A A B; R = 4: ABBA ABBA */
    static const char *want[] = {"AB", "ABBA", "ABBAAB", "ABBAABBA"};
    for (int R = 1; R <= 4; R++) {
        char got[16] = "";
        int count[2] = {0, 0}, pair_ok = 1;
        for (int k = 0; k < 2 * R; k++) {
            int side = scn_ab_side_at(k);
            got[k] = side ? 'B' : 'A';
            count[side]++;
            /* each pair (k/2) holds one A and one B */
            if (k % 2 == 1)
                pair_ok &= scn_ab_side_at(k) != scn_ab_side_at(k - 1);
        }
        CHECK(!strcmp(got, want[R - 1]), "R=%d: %s, want %s", R, got, want[R - 1]);
        CHECK(count[0] == R && count[1] == R && pair_ok, "R=%d: R runs a side, one of each per pair", R);
    }
    /* linear drift cancels for even R: the mean position of A's runs equals B's */
    for (int R = 2; R <= 8; R += 2) {
        int sum[2] = {0, 0};
        for (int k = 0; k < 2 * R; k++)
            sum[scn_ab_side_at(k)] += k;
        CHECK(sum[0] == sum[1], "R=%d: A's and B's positions sum alike (%d, %d)", R, sum[0], sum[1]);
    }
    /* odd R leaves one AB pair uncancelled: B one position later in all */
    int sum3[2] = {0, 0};
    for (int k = 0; k < 6; k++)
        sum3[scn_ab_side_at(k)] += k;
    CHECK(sum3[1] - sum3[0] == 1, "R=3: B one position later in sum (%d vs %d)", sum3[1], sum3[0]);

    expect_error("{\"ab\":{" AB_SIDES ",\"order\":\"abba\"}}", "ab.order", "interleaved");
    expect_error("{\"ab\":{" AB_SIDES ",\"repeat\":0}}", "ab.repeat", "[1, 1000]");
    expect_error("{\"ab\":{" AB_SIDES ",\"repeat\":2,\"repeat\":3}}", "ab.repeat", "key given twice");
    expect_error("{\"ab\":{" AB_SIDES ",\"repeat\":2.5}}", "ab.repeat", "integer");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"engine\":\"a\",\"url\":\"http://h:1\"},"
                 "\"b\":{\"name\":\"y\",\"engine\":\"b\"}}}",
                 "ab.a.engine", "no engine beside a url");
    expect_error("{\"ab\":{\"a\":{\"name\":\"x\",\"url\":\"h:1\"},\"b\":{\"name\":\"y\",\"engine\":\"b\"}}}",
                 "ab.a.url", "'h:1' has no scheme; write http://... or https://...");
    scn_scenario *s = NULL;
    char err[512] = "";
    int rc = scn_load_string("{\"ab\":{" AB_SIDES "}}", "ab.json", &s, err, sizeof err);
    CHECK(rc == 0 && s->ab.order == SCN_AB_INTERLEAVED && s->ab.repeat == 1, "defaults: interleaved, R=1: %s", err);
    scn_free(s);
    s = NULL;
    rc = scn_load_string("{\"ab\":{\"a\":{\"name\":\"a\",\"url\":\"http://h:1\",\"model\":\"m1\"},"
                         "\"b\":{\"name\":\"b\",\"url\":\"https://h:2\",\"model\":\"m2\"},"
                         "\"order\":\"sequential\",\"repeat\":3}}",
                         "ab.json", &s, err, sizeof err);
    CHECK(rc == 0, "remote sides load: %s", err);
    if (rc)
        return;
    CHECK(s->ab.order == SCN_AB_SEQUENTIAL && s->ab.repeat == 3 && !s->ab.side[0].engine &&
              !strcmp(s->ab.side[1].url, "https://h:2") && !strcmp(s->ab.side[1].model, "m2"),
          "sequential, R=3, remote sides");
    /* the run line's config loads back (what `sweep --url A --url B` writes) */
    cJSON *j = scn_to_json(s);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    scn_scenario *back = NULL;
    rc = text ? scn_load_string(text, "config", &back, err, sizeof err) : -1;
    CHECK(rc == 0 && back->ab.repeat == 3 && back->ab.order == SCN_AB_SEQUENTIAL &&
              !strcmp(back->ab.side[0].url, "http://h:1"),
          "config round trip: %s", err);
    scn_free(back);
    free(text);
    cJSON_Delete(j);
    scn_free(s);
}

/* Words of each prompt of the set a scenario text makes (count prompts). */
static int *words_of(const char *json, int count, char ***texts)
{
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    char err[512] = "";
    int *w = calloc((size_t)count, sizeof *w);
    CHECK(scn_load_string(json, "v.json", &s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0 &&
              (int)scn_prompts_count(p) == count,
          "load %s: %s", json, err);
    if (texts)
        *texts = calloc((size_t)count, sizeof **texts);
    for (int i = 0; p && i < count; i++) {
        const char *t = scn_prompt(p, (size_t)i, &w[i]);
        if (texts)
            (*texts)[i] = strdup(t);
    }
    scn_prompts_free(p);
    scn_free(s);
    return w;
}

/* load.vary_context: lengths within 0.25..1.75 of the drawn ones, mean
 * kept, neighbours alike (a step is at most 0.15 of the length), and the
 * mean length of 32 requests in a row (those in flight together at C = 32)
 * wanders across the range, which is what makes K and N separable. Off, the
 * prompts are those of a scenario that never named it, byte for byte. */
static void test_vary_context(void)
{
    enum { COUNT = 20000, WIN = 32 };
    char **plain_t = NULL, **off_t = NULL;
    int *plain = words_of("{\"prompts\":{\"words\":{\"dist\":\"fixed\",\"value\":100},\"count\":20000,\"seed\":3}}",
                          COUNT, &plain_t);
    int *off = words_of("{\"prompts\":{\"words\":{\"dist\":\"fixed\",\"value\":100},\"count\":20000,\"seed\":3},"
                        "\"load\":{\"vary_context\":false}}", COUNT, &off_t);
    const char *on_json = "{\"prompts\":{\"words\":{\"dist\":\"fixed\",\"value\":100},\"count\":20000,\"seed\":3},"
                          "\"load\":{\"vary_context\":true}}";
    int *on = words_of(on_json, COUNT, NULL), *again = words_of(on_json, COUNT, NULL);
    int same_off = 1, lo = 1 << 30, hi = 0, step_max = 0;
    double sum = 0, win_lo = 1e9, win_hi = 0, win = 0;
    for (int i = 0; i < COUNT; i++) {
        same_off &= plain[i] == 100 && off[i] == 100 && strcmp(plain_t[i], off_t[i]) == 0;
        lo = on[i] < lo ? on[i] : lo;
        hi = on[i] > hi ? on[i] : hi;
        sum += on[i];
        if (i > 0 && abs(on[i] - on[i - 1]) > step_max)
            step_max = abs(on[i] - on[i - 1]);
        win += on[i] - (i >= WIN ? on[i - WIN] : 0);
        if (i >= WIN - 1) {
            win_lo = win / WIN < win_lo ? win / WIN : win_lo;
            win_hi = win / WIN > win_hi ? win / WIN : win_hi;
        }
        free(plain_t[i]);
        free(off_t[i]);
    }
    CHECK(same_off, "vary_context false: the prompts of a scenario without it, all 100 words");
    CHECK(lo >= 25 && hi <= 175 && lo <= 30 && hi >= 170, "vary_context: lengths %d..%d words (100 x 0.25..1.75)",
          lo, hi);
    /* neighbours are alike, so 20000 lengths weigh as ~160 independent ones:
     * the mean's sd is ~3.3%, and 10% is three of them */
    CHECK(sum / COUNT > 90 && sum / COUNT < 110, "vary_context: mean length %.2f words (drawn: 100)", sum / COUNT);
    CHECK(step_max <= 16, "vary_context: neighbours differ by at most %d words (0.15 x 100, rounded)", step_max);
    CHECK(win_lo < 60 && win_hi > 140, "vary_context: the mean of %d requests in a row spans %.1f..%.1f words", WIN,
          win_lo, win_hi);
    CHECK(memcmp(on, again, COUNT * sizeof *on) == 0, "vary_context: the same seed, the same lengths");
    free(plain);
    free(off);
    free(plain_t);
    free(off_t);
    free(on);
    free(again);

    /* the run line's config says it when on, and only then */
    scn_scenario *s = NULL;
    char err[512] = "";
    for (int v = 0; v < 2; v++) {
        CHECK(scn_load_string(v ? on_json : "{}", "v.json", &s, err, sizeof err) == 0, "load: %s", err);
        cJSON *j = s ? scn_to_json(s) : NULL;
        const cJSON *vc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "load"), "vary_context");
        CHECK(v ? cJSON_IsTrue(vc) : vc == NULL, "scn_to_json: load.vary_context %s", v ? "true" : "absent");
        cJSON_Delete(j);
        scn_free(s);
        s = NULL;
    }
    expect_error("{\"load\":{\"vary_context\":1}}", "load.vary_context", NULL);
}

/* Two run lines alike but for the trace's "format" and "rows" (a scenario
 * not yet validated has read no trace). */
static int tu_trace_same(const char *a, const char *b)
{
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    cJSON *tx = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "load"), "trace");
    cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(y, "load"), "trace");
    int same = tx && ty;
    for (int k = 0; same && k < 2; k++) {
        cJSON_DeleteItemFromObjectCaseSensitive(tx, k ? "rows" : "format");
        cJSON_DeleteItemFromObjectCaseSensitive(ty, k ? "rows" : "format");
    }
    same = same && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

/* load.trace and load.shared_prefix: their keys as strict as the rest, the
 * Mooncake sample's rows as prompts (sizes by the tokenizer, send times,
 * max_tokens, where the head goes, a window), prefixes of exact length. */
static void test_workloads(void)
{
    expect_error("{\"load\":{\"trace\":{\"file\":\"x\"}}}", "load.trace.file", "unknown key");
    expect_error("{\"load\":{\"trace\":{\"path\":\"x\",\"speed\":0}}}", "load.trace.speed", "[0.001, 1e6]");
    expect_error("{\"load\":{\"trace\":{\"path\":\"x\",\"window_s\":[5,2]}}}", "load.trace.window_s", "START < END");
    expect_error("{\"load\":{\"shared_prefix\":{\"groups\":0,\"tokens\":8}}}", "load.shared_prefix.groups", NULL);
    expect_error("{\"load\":{\"shared_prefix\":{\"groups\":2}}}", "load.shared_prefix.tokens", NULL);
    expect_error("{\"load\":{\"shared_prefix\":{\"groups\":2,\"tokens\":8,\"pick\":\"any\"}}}",
                 "load.shared_prefix.pick", "seeded");

    static const int ts_ms[] = {0, 120, 200, 350, 400, 650, 700, 900, 1000, 1200};
    static const int in[] = {1100, 700, 1300, 300, 1024, 800, 1536, 520, 1200, 256};
    static const int out[] = {12, 8, 20, 5, 16, 10, 4, 30, 6, 9};
    const char *json = "{\"load\":{\"concurrency\":[4,8],\"trace\":{\"path\":\"" LOADLAW_SOURCE_DIR
                       "/tests/sweep/data/trace-mooncake.jsonl\"}},\"prompts\":{\"tokenizer\":\"" LOADLAW_SOURCE_DIR
                       "/tests/scenarios/data/tokenizer.json\"}}";
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    char err[512] = "";
    CHECK(scn_load_string(json, "t.json", &s, err, sizeof err) == 0 && scn_validate(s, err, sizeof err) == 0 &&
              scn_prompts_load(s, &p, err, sizeof err) == 0,
          "a trace scenario loads: %s", err);
    if (!p) {
        scn_free(s);
        return;
    }
    CHECK(s->n_levels == 1 && s->levels[0].arrival == SCN_ARRIVAL_TRACE && scn_level_requests(&s->levels[0]) == 10 &&
              s->levels[0].concurrency == 0 && strcmp(scn_trace_format(s), "mooncake") == 0,
          "one open trace level of 10 requests, no cap, in place of load.concurrency");
    const scn_tokenizer *tok = scn_prompts_tokenizer(p);
    size_t sized = 0, timed = 0, capped = 0;
    for (size_t i = 0; i < 10 && scn_prompts_count(p) == 10; i++) {
        const char *t = scn_prompt(p, i, NULL);
        int64_t n = scn_tokenizer_count(tok, t, strlen(t));
        sized += n == in[i];
        timed += scn_prompt_send_ns(p, i) == (int64_t)ts_ms[i] * 1000000;
        capped += scn_prompt_max_tokens(p, i) == out[i];
    }
    CHECK(sized == 10 && timed == 10 && capped == 10, "rows: %zu sized, %zu timed, %zu with max_tokens (of 10)", sized,
          timed, capped);
    /* row 0 = blocks 0, 1 (shared), 2 (its own): the head after block 1, which row 4 is */
    const char *r0 = scn_prompt(p, 0, NULL), *r4 = scn_prompt(p, 4, NULL);
    CHECK(scn_prompt_head_at(p, 0) == strlen(r4) + 1 && strncmp(r0, r4, strlen(r4)) == 0,
          "row 0: blocks 0 and 1 as row 4 has them, then the head (at %zu)", scn_prompt_head_at(p, 0));
    CHECK(scn_prompt_head_at(p, 3) == 0 && scn_prompt_head_at(p, 4) == strlen(r4),
          "a row of its own blocks: the head first; a row of shared blocks only: the head last");
    scn_prompts_free(p);
    p = NULL;
    scn_free(s);
    s = NULL;

    /* the window [0.3, 1.0) s: rows 3..7, the first sent at once */
    const char *win = "{\"load\":{\"trace\":{\"path\":\"" LOADLAW_SOURCE_DIR "/tests/sweep/data/trace-mooncake.jsonl\","
                      "\"speed\":2,\"window_s\":[0.3,1.0]}}}";
    CHECK(scn_load_string(win, "w.json", &s, err, sizeof err) == 0 && scn_validate(s, err, sizeof err) == 0 &&
              scn_prompts_load(s, &p, err, sizeof err) == 0,
          "a windowed trace: %s", err);
    CHECK(p && scn_prompts_count(p) == 5 && scn_prompt_send_ns(p, 0) == 0 && scn_prompt_send_ns(p, 1) == 25000000 &&
              scn_prompt_max_tokens(p, 4) == 30,
          "window: 5 rows, sent at (t - 350 ms) / 2");
    cJSON *j = s ? scn_to_json(s) : NULL;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "load"), "trace");
    CHECK(cJSON_GetObjectItemCaseSensitive(tr, "speed") && cJSON_GetObjectItemCaseSensitive(tr, "speed")->valuedouble == 2 &&
              cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(tr, "window_s")) == 2,
          "the run line's load.trace: speed and window");
    /* the run line's config loads back as the same scenario (format and rows are ignored on load) */
    char *t1 = j ? cJSON_PrintUnformatted(j) : NULL, *t2 = NULL;
    scn_scenario *back = NULL;
    if (t1 && scn_load_string(t1, "back.json", &back, err, sizeof err) == 0) {
        cJSON *j2 = scn_to_json(back);
        t2 = j2 ? cJSON_PrintUnformatted(j2) : NULL;
        cJSON_Delete(j2);
    }
    CHECK(back && t2 && tu_trace_same(t1, t2), "the run line's load.trace loads back: %s", err);
    scn_free(back);
    free(t1);
    free(t2);
    cJSON_Delete(j);
    scn_prompts_free(p);
    p = NULL;
    scn_free(s);
    s = NULL;

    /* the command line over a scenario's load.trace (--trace-speed 4,
     * --trace-window 0.3:0.8 after the file's speed 2 and [0.3, 1.0)): the
     * trace is read again with them, not kept as first read */
    CHECK(scn_load_string(win, "w.json", &s, err, sizeof err) == 0, "the windowed trace again: %s", err);
    if (s) {
        s->trace_speed = 4;
        s->trace_end_s = 0.8;
    }
    CHECK(s && scn_validate(s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0,
          "validated after the change: %s", err);
    CHECK(p && scn_trace_rows(s) == 4 && scn_prompts_count(p) == 4 && scn_prompt_send_ns(p, 1) == 12500000,
          "speed 4, window [0.3, 0.8): 4 rows (%zu), row 1 sent at (400 - 350) / 4 ms", s ? scn_trace_rows(s) : 0);
    scn_prompts_free(p);
    p = NULL;
    scn_free(s);
    s = NULL;

    /* shared prefixes of exactly 100 tokens, seeded pick */
    const char *sp = "{\"load\":{\"shared_prefix\":{\"groups\":4,\"tokens\":100,\"pick\":\"seeded\"}},"
                     "\"prompts\":{\"count\":40,\"tokens\":{\"dist\":\"fixed\",\"value\":30},\"tokenizer\":\"" LOADLAW_SOURCE_DIR
                     "/tests/scenarios/data/tokenizer.json\"}}";
    CHECK(scn_load_string(sp, "p.json", &s, err, sizeof err) == 0 && scn_validate(s, err, sizeof err) == 0 &&
              scn_prompts_load(s, &p, err, sizeof err) == 0,
          "a shared-prefix scenario: %s", err);
    size_t exact = 0, groups = 0;
    const char *seen[4] = {0};
    size_t seen_len[4] = {0};
    for (size_t i = 0; p && i < scn_prompts_count(p); i++) {
        const char *t = scn_prompt(p, i, NULL);
        size_t at = scn_prompt_head_at(p, i);
        exact += at > 1 && scn_tokenizer_count(scn_prompts_tokenizer(p), t, at - 1) == 100;
        size_t g = 0;
        while (g < 4 && seen[g] && !(seen_len[g] == at && strncmp(seen[g], t, at) == 0))
            g++;
        if (g < 4 && !seen[g]) {
            seen[g] = t;
            seen_len[g] = at;
            groups++;
        }
    }
    CHECK(p && scn_prompts_count(p) == 40 && exact == 40 && groups == 4,
          "40 prompts, each behind a prefix of exactly 100 tokens (%zu), 4 prefixes (%zu)", exact, groups);
    scn_prompts_free(p);
    scn_free(s);
}

/* What a command line lays over a scenario (overlay.c), and the two values
 * a file and a flag both spell (headers, speedup gates). */
static void test_overlay(void)
{
    scn_scenario *s = NULL;
    char err[256] = "", path[4096];
    scn_dist d;
    double v[3], a, b, x;
    int c;
    CHECK(scn_parse_length("512", &d) == 0 && d.kind == SCN_DIST_FIXED && d.value == 512, "fixed length");
    CHECK(scn_parse_length("100,40", &d) == 0 && d.kind == SCN_DIST_NORMAL && d.mean == 100 && d.stddev == 40 &&
              d.min == 1 && d.max == 220, "normal length clamped to [1, mean+3sd]: %g..%g", d.min, d.max);
    CHECK(scn_parse_length("0", &d) && scn_parse_length("5,x", &d) && scn_parse_length("2e6", &d), "bad lengths");
    CHECK(scn_parse_per_level("8", SCN_PER_LEVEL_REQUESTS, 3, v, err, sizeof err) == 0 && v[0] == 8 && v[2] == 8,
          "one value for every level");
    CHECK(scn_parse_per_level("1s,2m,3", SCN_PER_LEVEL_DURATION, 3, v, err, sizeof err) == 0 && v[1] == 120 &&
              v[2] == 3, "one duration per level: %g %g", v[1], v[2]);
    CHECK(scn_parse_per_level("1,2", SCN_PER_LEVEL_REQUESTS, 3, v, err, sizeof err) && strstr(err, "2 values for 3"),
          "two values for three levels: %s", err);
    CHECK(scn_parse_per_level("4,0,4", SCN_PER_LEVEL_REQUESTS, 3, v, err, sizeof err) && strstr(err, "'0'"),
          "a zero count named: %s", err);
    CHECK(scn_parse_window("10:", &a, &b) == 0 && a == 10 && b == 0 && scn_parse_window("5:2", &a, &b) &&
              scn_parse_window(":3", &a, &b), "windows");
    CHECK(scn_parse_speedup("2.2x@32", &x, &c) == 0 && x == 2.2 && c == 32 && scn_parse_speedup("1.5", &x, &c) == 0 &&
              c == 0 && scn_parse_speedup("0", &x, &c) && scn_parse_speedup("1e-320", &x, &c) &&
              scn_parse_speedup("2@0", &x, &c), "speedup gates: X in [0.001, 1e6], C >= 1");
    CHECK(scn_load_base(NULL, 1, &s, err, sizeof err) == 0 && s->n_levels == 7 && s->levels[6].concurrency == 64 &&
              s->max_tokens == 256 && s->prompt_tokens_set && s->prompt_tokens.value == 256 &&
              !strcmp(s->defaults, "remote"), "remote defaults");
    CHECK(scn_parse_shared_prefix("4:512", s) == 0 && s->prefix_groups == 4 && s->prefix_tokens == 512 &&
              scn_parse_shared_prefix("4", s) && scn_parse_shared_prefix("0:5", s), "shared prefix G:P");
    scn_set_prompt_tokens(s, (scn_dist){.kind = SCN_DIST_FIXED, .value = 133});
    CHECK(s->words.value == 100, "133 tokens are 100 words without a tokenizer (%g)", s->words.value);
    CHECK(scn_add_header(s, "X-Trace:abc") == 0 && !strcmp(s->headers[s->n_headers - 1], "X-Trace: abc") &&
              scn_add_header(s, "Bad Name: v") == LL_EINVAL && scn_add_header(s, "X: a\r\nY: b") == LL_EINVAL,
          "headers written back as 'Name: value'; spaces in a name and line breaks refused");
    scn_free(s);
    s = NULL;
    CHECK(scn_load_base(NULL, 0, &s, err, sizeof err) == 0 && !strcmp(s->defaults, "bundled"), "default.json: %s",
          err);
    scn_free(s);
    s = NULL;
    CHECK(scn_load_base("no-such-scenario.json", 0, &s, err, sizeof err) == LL_EIO &&
              strstr(err, "no-such-scenario.json"), "a missing file: %s", err);
    scn_free(s);
    CHECK(scn_find_file("multi-turn.json", path, sizeof path) == 0 && strstr(path, "scenarios/multi-turn.json"),
          "found by bare name: %s", path);
}

int main(void)
{
    test_overlay();
    test_errors();
    test_load_and_override();
    test_request_fields();
    test_top_p();
    test_flag_keys();
    test_shipped();
    test_prompts();
    test_vary_context();
    test_workloads();
    test_ab();
    test_ab_order();
    TEST_MAIN_END();
}
