/* test_scn_sessions.c: load.sessions in the scenario format: its keys and
 * their errors (each naming the key), what may not stand beside it, the
 * requests it gives each level, the run line's view loading back as it was,
 * the shipped scenarios/multi-turn.json, and each turn's user message
 * (synthetic: seeded, of user_tokens / 1.33 words; ShareGPT: a
 * conversation's human turns in order, ending where it ends). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "scenario.h"
#include "testutil.h"

/* Loading (and validating) must fail with a message holding both needles. */
static void expect_error(const char *json, const char *n1, const char *n2)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    int rc = scn_load_string(json, "bad.json", &s, err, sizeof err);
    CHECK(rc == LL_EINVAL && s == NULL, "rejected: %s (%d)", json, rc);
    CHECK(strstr(err, "bad.json") && strstr(err, n1) && (!n2 || strstr(err, n2)) && !strchr(err, '\n'),
          "message '%s' names '%s' '%s'", err, n1, n2 ? n2 : "");
}

static void test_errors(void)
{
    expect_error("{\"load\":{\"sessions\":{\"turns\":2,\"thinktime_ms\":5}}}", "load.sessions.thinktime_ms",
                 "unknown key");
    expect_error("{\"load\":{\"sessions\":{\"count\":2}}}", "load.sessions.turns", "[1, 10000]");
    expect_error("{\"load\":{\"sessions\":{\"turns\":2.5}}}", "load.sessions.turns", NULL);
    expect_error("{\"load\":{\"sessions\":3}}", "load.sessions", "turns");
    expect_error("{\"load\":{\"sessions\":{\"turns\":2,\"user_tokens\":0}}}", "load.sessions.user_tokens", NULL);
    expect_error("{\"load\":{\"sessions\":{\"turns\":2,\"think_time_ms\":-1}}}", "load.sessions.think_time_ms", NULL);
    expect_error("{\"load\":{\"sessions\":{\"turns\":2,\"source\":\"jsonl\"}}}", "load.sessions.source", "sharegpt");
    expect_error("{\"load\":{\"sessions\":{\"turns\":2,\"source\":\"sharegpt\"}}}", "load.sessions.path", NULL);
    expect_error("{\"target\":{\"endpoint\":\"completions\"},\"load\":{\"sessions\":{\"turns\":2}}}",
                 "target.endpoint", "chat");
    expect_error("{\"load\":{\"shared_prefix\":{\"groups\":2,\"tokens\":8},\"sessions\":{\"turns\":2}}}",
                 "load.shared_prefix", "load.sessions");
    expect_error("{\"load\":{\"warmup\":2,\"sessions\":{\"turns\":2}}}", "levels[0].warmup", "load.sessions");
    expect_error("{\"load\":{\"trace\":\"" LOADLAW_SOURCE_DIR "/tests/sweep/data/trace-mooncake.jsonl\","
                 "\"sessions\":{\"turns\":2}}}",
                 "load.sessions", "load.trace");
}

static void test_levels_and_json(void)
{
    scn_scenario *s = NULL, *back = NULL;
    char err[512] = "";
    const char *json = "{\"load\":{\"concurrency\":[2,3],\"requests\":99,"
                       "\"sessions\":{\"turns\":4,\"think_time_ms\":12.5,\"user_tokens\":40}}}";
    CHECK(scn_load_string(json, "s.json", &s, err, sizeof err) == 0, "loads: %s", err);
    if (!s)
        return;
    CHECK(s->session_turns == 4 && s->session_count == 0 && s->session_think_ms == 12.5 &&
              s->session_user_tok == 40 && !s->session_sharegpt,
          "fields");
    CHECK(scn_level_requests(&s->levels[0]) == 8 && scn_level_requests(&s->levels[1]) == 12,
          "requests: C conversations x 4 turns (%d, %d), requests 99 not used", scn_level_requests(&s->levels[0]),
          scn_level_requests(&s->levels[1]));
    cJSON *j = scn_to_json(s);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    CHECK(text && strstr(text, "\"sessions\":{\"turns\":4,\"count\":0,\"think_time_ms\":12.5,\"user_tokens\":40,"
                               "\"source\":\"synthetic\"}"),
          "run line: %s", text ? text : "(none)");
    CHECK(text && scn_load_string(text, "run line", &back, err, sizeof err) == 0 && back &&
              back->session_turns == 4 && back->session_think_ms == 12.5 && back->session_user_tok == 40 &&
              scn_level_requests(&back->levels[1]) == 12,
          "the run line's config loads back as it was: %s", err);
    cJSON_free(text);
    cJSON_Delete(j);
    scn_free(back);
    scn_free(s);
    s = NULL;
    CHECK(scn_load_string("{\"load\":{\"concurrency\":[2,3],\"sessions\":{\"turns\":3,\"count\":5}}}", "c.json", &s,
                          err, sizeof err) == 0 &&
              scn_level_requests(&s->levels[0]) == 15 && scn_level_requests(&s->levels[1]) == 15,
          "count: 5 conversations x 3 turns at every level");
    scn_free(s);
}

static void test_shipped(void)
{
    scn_scenario *s = NULL;
    char err[512] = "";
    CHECK(scn_load_file(LOADLAW_SOURCE_DIR "/scenarios/multi-turn.json", &s, err, sizeof err) == 0, "%s", err);
    if (!s)
        return;
    CHECK(s->session_turns == 4 && s->session_count == 8 && s->n_levels == 1 && s->levels[0].concurrency == 4 &&
              scn_level_requests(&s->levels[0]) == 32 && strstr(s->engine_spec, "prefix_cache=1"),
          "multi-turn.json: 8 conversations of 4 turns at C=4 on a prefix-caching engine");
    scn_free(s);
}

static size_t words(const char *t)
{
    size_t n = 0;
    for (const char *c = t; *c; c++)
        n += *c != ' ' && (c == t || c[-1] == ' ');
    return n;
}

static void test_synthetic_users(void)
{
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    char err[512] = "";
    CHECK(scn_load_string("{\"prompts\":{\"seed\":7},\"load\":{\"sessions\":{\"turns\":3,\"user_tokens\":133}}}",
                          "u.json", &s, err, sizeof err) == 0 &&
              scn_prompts_load(s, &p, err, sizeof err) == 0,
          "loads: %s", err);
    if (!p) {
        scn_free(s);
        return;
    }
    ll_buf a = {0}, b = {0}, c = {0}, d = {0};
    CHECK(scn_session_user(s, p, 0, 2, 1, &a) == 0 && scn_session_user(s, p, 0, 2, 1, &b) == 0 &&
              scn_session_user(s, p, 0, 2, 2, &c) == 0 && scn_session_user(s, p, 1, 2, 1, &d) == 0,
          "four messages");
    CHECK(a.p && b.p && c.p && d.p && !strcmp(a.p, b.p) && strcmp(a.p, c.p) && strcmp(a.p, d.p),
          "seeded by (level, session, turn): the same again, another turn or level differs");
    CHECK(a.p && words(a.p) == 100, "133 tokens: 100 words (%zu)", a.p ? words(a.p) : 0);
    ll_buf_free(&a);
    ll_buf_free(&b);
    ll_buf_free(&c);
    ll_buf_free(&d);
    scn_prompts_free(p);
    scn_free(s);
}

static void test_sharegpt_users(void)
{
    char path[256], json[512], err[512] = "";
    snprintf(path, sizeof path, "%s/ll_scn_sessions_%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("[{\"conversations\":[{\"from\":\"human\",\"value\":\"one\"},{\"from\":\"gpt\",\"value\":\"x\"},"
              "{\"from\":\"human\",\"value\":\"two\"},{\"from\":\"gpt\",\"value\":\"y\"},"
              "{\"from\":\"human\",\"value\":\"three\"}]},"
              "{\"conversations\":[{\"from\":\"gpt\",\"value\":\"z\"}]},"
              "{\"conversations\":[{\"from\":\"user\",\"value\":\"solo\"}]}]",
              f);
        fclose(f);
    }
    snprintf(json, sizeof json, "{\"load\":{\"sessions\":{\"turns\":4,\"source\":\"sharegpt\",\"path\":\"%s\"}}}",
             path);
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    CHECK(scn_load_string(json, "g.json", &s, err, sizeof err) == 0 && scn_prompts_load(s, &p, err, sizeof err) == 0,
          "loads: %s", err);
    if (p) {
        const char *want[4] = {"one", "two", "three", NULL};
        size_t right = 0;
        for (int t = 1; t <= 4; t++) {
            ll_buf b = {0};
            int rc = scn_session_user(s, p, 0, 2, t, &b); /* session 2: conversation 0 of the 2 kept */
            right += want[t - 1] ? rc == 0 && b.p && !strcmp(b.p, want[t - 1]) : rc == 1;
            ll_buf_free(&b);
        }
        CHECK(right == 4, "a conversation's human turns in order, then its end (%zu of 4)", right);
        ll_buf b = {0};
        CHECK(scn_session_user(s, p, 0, 1, 1, &b) == 0 && b.p && !strcmp(b.p, "solo") &&
                  scn_session_user(s, p, 0, 1, 2, &b) == 1,
              "one without human turns is skipped; the next has one turn");
        ll_buf_free(&b);
    }
    scn_prompts_free(p);
    scn_free(s);
    unlink(path);
}

int main(void)
{
    test_errors();
    test_levels_and_json();
    test_shipped();
    test_synthetic_users();
    test_sharegpt_users();
    TEST_MAIN_END();
}
