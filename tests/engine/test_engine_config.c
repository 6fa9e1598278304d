/* test_engine_config.c: the law parser, the spec parser and engine start-up
 * errors: what `loadlaw serve` flags and `sweep --engine` specs rely on. */
#include <string.h>

#include "common.h"
#include "engine.h"
#include "testutil.h"

int main(void)
{
    eng_config c;
    char err[256];

    eng_config_default(&c);
    CHECK(c.max_running == 256 && c.prefill_budget_tok == 2048 && c.time_scale == 1 &&
          c.max_waiting == 8192 && c.max_body_bytes == (1u << 20), "defaults");
    CHECK(eng_parse_law("52+30n", &c, err, sizeof err) == 0, "%s", err);
    CHECK_NEAR(c.law_a_ms, 52, 0, "a");
    CHECK_NEAR(c.law_b_ms, 30, 0, "b");
    CHECK(eng_parse_law(" 30n + 1.5 + 0.25c+0.01p ", &c, err, sizeof err) == 0, "%s", err);
    CHECK_NEAR(c.law_a_ms, 1.5, 0, "a reordered");
    CHECK_NEAR(c.law_b_ms, 30, 0, "b reordered");
    CHECK_NEAR(c.law_c_ms_per_ktok, 0.25, 0, "c");
    CHECK_NEAR(c.law_p_ms_per_tok, 0.01, 0, "p");
    CHECK(eng_parse_law("7", &c, err, sizeof err) == 0 && c.law_b_ms == 0 && c.law_c_ms_per_ktok == 0,
          "constant-only law resets the other terms");
    CHECK(eng_parse_law("52+30x", &c, err, sizeof err) != 0 && strstr(err, "unexpected \"x\""),
          "bad term named as such: %s", err);
    CHECK(eng_parse_law("52+30", &c, err, sizeof err) != 0 && strstr(err, "twice"), "two constants: %s", err);
    CHECK(eng_parse_law("52+30n+4n", &c, err, sizeof err) != 0 && strstr(err, "twice"), "dup: %s", err);
    CHECK(eng_parse_law("", &c, err, sizeof err) != 0, "empty law");
    CHECK(eng_parse_law("-1+3n", &c, err, sizeof err) != 0, "negative term");
    CHECK(eng_parse_law("52+", &c, err, sizeof err) != 0, "dangling plus");

    eng_config_default(&c);
    CHECK(eng_parse_spec("backend=synthetic,law=52+30n,time_scale=0.05,jitter=0.02,think=64,"
                         "max_running=128,prefill_budget=4k,seed=7,attn=naive,heads=16,topk=512,"
                         "threads=2,stop_after=9,model=m1,max_body=2k",
                         &c, err, sizeof err) == 0, "%s", err);
    CHECK(c.backend == ENG_BACKEND_SYNTHETIC && c.law_a_ms == 52 && c.law_b_ms == 30, "spec law");
    CHECK_NEAR(c.time_scale, 0.05, 0, "time_scale");
    CHECK_NEAR(c.jitter_frac, 0.02, 0, "jitter");
    CHECK(c.think_tokens == 64 && c.max_running == 128 && c.prefill_budget_tok == 4000 && c.seed == 7,
          "ints: think %d running %d budget %d seed %llu", c.think_tokens, c.max_running,
          c.prefill_budget_tok, (unsigned long long)c.seed);
    CHECK(strcmp(c.attn, "naive") == 0 && c.heads == 16 && c.topk == 512 && c.threads == 2, "cpu keys");
    CHECK(c.stop_after_tok == 9 && strcmp(c.model, "m1") == 0 && c.max_body_bytes == 2000, "added keys");
    CHECK(eng_parse_spec("max_running=32", &c, err, sizeof err) == 0 && c.max_running == 32 &&
          c.law_b_ms == 30, "unnamed fields keep their value");
    CHECK(eng_parse_spec("law=1+1n,bogus=3", &c, err, sizeof err) != 0 && strstr(err, "bogus"),
          "unknown key named: %s", err);
    CHECK(eng_parse_spec("max_running", &c, err, sizeof err) != 0 && strstr(err, "key=value"), "%s", err);
    CHECK(eng_parse_spec("max_running=0", &c, err, sizeof err) != 0 && strstr(err, "max_running"), "%s", err);
    CHECK(eng_parse_spec("time_scale=0", &c, err, sizeof err) != 0, "time_scale 0");
    CHECK(eng_parse_spec("backend=tpu", &c, err, sizeof err) != 0 && strstr(err, "tpu"), "%s", err);
    CHECK(eng_config_set(&c, "jitter", "abc", err, sizeof err) != 0 && strstr(err, "jitter"), "%s", err);

    /* the law's shape in N: buckets (a list inside a comma-separated spec) and a knee */
    eng_config_free(&c);
    eng_config_default(&c);
    CHECK(c.law_n_buckets == 0 && c.law_knee_n == 0, "no buckets, no knee by default");
    CHECK(eng_parse_spec("law=10+2n,buckets=1,2, 4,8 ,16,time_scale=0.5,knee=8:0.25", &c, err, sizeof err) == 0,
          "%s", err);
    CHECK(c.law_n_buckets == 5 && c.law_buckets[0] == 1 && c.law_buckets[2] == 4 && c.law_buckets[4] == 16 &&
              c.time_scale == 0.5 && c.law_knee_n == 8 && c.law_knee_b_ms == 0.25 && c.law_b_ms == 2,
          "buckets %d (%d..%d), knee %d:%g, time_scale %g", c.law_n_buckets, c.law_buckets[0],
          c.law_buckets[c.law_n_buckets ? c.law_n_buckets - 1 : 0], c.law_knee_n, c.law_knee_b_ms, c.time_scale);
    CHECK(eng_parse_spec("law=5+1n", &c, err, sizeof err) == 0 && c.law_n_buckets == 5 && c.law_knee_n == 8,
          "a new law keeps the shape keys");
    CHECK(eng_config_set(&c, "buckets", "3,9", err, sizeof err) == 0 && c.law_n_buckets == 2 &&
              c.law_buckets[1] == 9, "serve-style buckets: %s", err);
    CHECK(eng_parse_spec("buckets=none,knee=none", &c, err, sizeof err) == 0 && c.law_n_buckets == 0 &&
              c.law_knee_n == 0, "none clears both: %s", err);
    static const char *bad_shape[][2] = {
        {"buckets=4,2", "buckets"}, {"buckets=2,2", "buckets"}, {"buckets=0,2", "buckets"},
        {"buckets=1,,2", "buckets"}, {"buckets=", "buckets"}, {"buckets=1,x", "buckets"},
        {"buckets=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "buckets"}, {"knee=8", "knee"},
        {"knee=0:1", "knee"}, {"knee=8:-1", "knee"}, {"knee=:1", "knee"}, {"knee=8:x", "knee"},
        {"law=1+1n,7", "key=value"},
    };
    for (size_t i = 0; i < sizeof bad_shape / sizeof bad_shape[0]; i++) {
        err[0] = '\0';
        CHECK(eng_parse_spec(bad_shape[i][0], &c, err, sizeof err) == LL_EINVAL && strstr(err, bad_shape[i][1]),
              "%s refused naming %s: %s", bad_shape[i][0], bad_shape[i][1], err);
    }

    /* cpu sizes: defaults as the backend always had them, keys with range checks */
    eng_config_free(&c);
    eng_config_default(&c);
    CHECK(c.d_model == 2048 && c.d_ff == 8192 && c.vocab == 1024 && c.capacity_tok == 4096 &&
          c.min_ctx_tok == -1 && c.threads == 1 && c.heads == 64 && c.topk == 2048,
          "cpu defaults: %d %d %d %d %d", c.d_model, c.d_ff, c.vocab, c.capacity_tok, c.min_ctx_tok);
    CHECK(eng_parse_spec("d_model=512,d_ff=2k,vocab=64,capacity=4ki,min_ctx=0,threads=0", &c, err,
                         sizeof err) == 0, "%s", err);
    CHECK(c.d_model == 512 && c.d_ff == 2000 && c.vocab == 64 && c.capacity_tok == 4096 &&
          c.min_ctx_tok == 0 && c.threads == 0, "cpu keys: %d %d %d %d %d %d", c.d_model, c.d_ff,
          c.vocab, c.capacity_tok, c.min_ctx_tok, c.threads);
    CHECK(eng_parse_spec("min_ctx=topk", &c, err, sizeof err) == 0 && c.min_ctx_tok == -1, "%s", err);
    CHECK(eng_parse_spec("min_ctx=300", &c, err, sizeof err) == 0 && c.min_ctx_tok == 300, "%s", err);
    static const char *bad[][2] = {
        {"d_model=0", "d_model"}, {"d_model=65537", "d_model"}, {"d_ff=575", "d_ff"},
        {"d_ff=262145", "d_ff"}, {"vocab=1", "vocab"}, {"vocab=2m", "vocab"},
        {"capacity=0", "capacity"}, {"capacity=17m", "capacity"}, {"min_ctx=-1", "min_ctx"},
        {"min_ctx=x", "min_ctx"}, {"threads=-1", "threads"}, {"threads=1025", "threads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(eng_parse_spec(bad[i][0], &c, err, sizeof err) == LL_EINVAL && strstr(err, bad[i][1]),
              "%s refused naming %s: %s", bad[i][0], bad[i][1], err);
        CHECK(c.d_model == 512 && c.d_ff == 2000 && c.vocab == 64 && c.capacity_tok == 4096 &&
              c.min_ctx_tok == 300 && c.threads == 0, "%s left the config as it was", bad[i][0]);
    }

    /* the config owns the strings set through keys: the caller's buffer may
     * change or go; a copy owns its own; free releases them */
    eng_config_free(&c);
    eng_config_default(&c);
    char model[16] = "m-one";
    CHECK(eng_config_set(&c, "model", model, err, sizeof err) == 0 &&
          eng_config_set(&c, "attn", "naive", err, sizeof err) == 0 &&
          eng_config_set(&c, "attn", "tiled", err, sizeof err) == 0, "%s", err);
    strcpy(model, "changed");
    CHECK(strcmp(c.model, "m-one") == 0 && strcmp(c.attn, "tiled") == 0, "owned copies: %s %s",
          c.model, c.attn);
    eng_config d;
    CHECK(eng_config_copy(&d, &c) == 0, "copy");
    CHECK(d.model != c.model && strcmp(d.model, "m-one") == 0 && d.bind_addr != c.bind_addr &&
          strcmp(d.bind_addr, "127.0.0.1") == 0 && d.max_running == c.max_running, "deep copy");
    eng_config_free(&c);
    CHECK(c.model == NULL && c.attn == NULL && c.bind_addr && strcmp(c.bind_addr, "127.0.0.1") == 0,
          "free: owned fields NULL, borrowed defaults kept");
    eng_config_free(&c);
    CHECK(strcmp(d.model, "m-one") == 0, "the copy outlives the original");
    CHECK(eng_config_set(&d, "model", "", err, sizeof err) == LL_EINVAL && strstr(err, "model") &&
          strcmp(d.model, "m-one") == 0, "a refused string leaves the field: %s", err);
    eng_config_free(&d);

    /* the key table drives the list and the messages */
    size_t n_keys = 0, with_help = 0;
    const char *form, *help, *name;
    while ((name = eng_config_key(n_keys, &form, &help)) != NULL) {
        with_help += form && *form && help && *help;
        CHECK(eng_config_has_key(name), "listed key %s is known", name);
        n_keys++;
    }
    CHECK(n_keys >= 35 && with_help == n_keys, "%zu keys, %zu with form and help", n_keys, with_help);
    CHECK(!eng_config_has_key("bogus") && !eng_config_has_key(NULL), "unknown keys");
    CHECK(eng_config_set(&c, "bogus", "1", err, sizeof err) == LL_EINVAL &&
          strcmp(err, "unknown engine key \"bogus\"") == 0, "%s", err);
    static const char *refused[][2] = {
        {"port", "70000"}, {"seed", "-3"}, {"time_scale", "0"}, {"max_connections", "15"},
        {"idle_timeout", "0.5s"}, {"max_body", "63"}, {"attn", "fast"}, {"host", ""},
        {"law", "3q"}, {"backend", "gpu"}, {"jitter", "2"}, {"request_timeout", "0s"},
        {"max_connections_per_ip", "-1"}, {"profile_max_steps_open", "0"},
        {"profile_max_steps_open", "10000001"},
    };
    eng_config_default(&c);
    eng_config before = c;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err[0] = '\0';
        CHECK(eng_config_set(&c, refused[i][0], refused[i][1], err, sizeof err) == LL_EINVAL &&
              strstr(err, refused[i][0]) == err, "%s=%s refused naming the key: %s", refused[i][0],
              refused[i][1], err);
    }
    CHECK(memcmp(&c, &before, sizeof c) == 0, "refused values left the config as it was");
    CHECK(eng_parse_spec("idle_timeout=2m,max_body=4k,max_connections=32,seed=99,host=0.0.0.0", &c,
                         err, sizeof err) == 0 && c.idle_timeout_s == 120 && c.max_body_bytes == 4000 &&
          c.max_connections == 32 && c.seed == 99 && strcmp(c.bind_addr, "0.0.0.0") == 0, "%s", err);
    CHECK(before.request_timeout_s == 10 && before.max_connections_per_ip == 0 &&
          before.profile_max_steps_open == 100000, "abuse limits' defaults");
    CHECK(eng_parse_spec("request_timeout=30s,max_connections_per_ip=100,profile_max_steps_open=5k", &c,
                         err, sizeof err) == 0 && c.request_timeout_s == 30 &&
          c.max_connections_per_ip == 100 && c.profile_max_steps_open == 5000, "%s", err);
    eng_config_free(&c);

    /* start-up failures come back as errors, never a crash */
    eng_engine *e = NULL;
    eng_config_default(&c);
    c.port = 0;
    c.bind_addr = "not-an-address";
    CHECK(eng_start(&c, &e, err, sizeof err) != 0 && e == NULL && strstr(err, "not-an-address"), "%s", err);
    eng_config_default(&c);
    c.law_n_buckets = 2;
    c.law_buckets[0] = 4;
    c.law_buckets[1] = 2;
    CHECK(eng_start(&c, &e, err, sizeof err) != 0 && e == NULL && strstr(err, "buckets"),
          "hand-filled buckets out of order refused: %s", err);
    eng_config_default(&c);
    c.request_timeout_s = 0;
    CHECK(eng_start(&c, &e, err, sizeof err) != 0 && e == NULL && strstr(err, "request_timeout"),
          "hand-filled request_timeout 0 refused: %s", err);
    eng_config_default(&c);
    c.backend = ENG_BACKEND_CUDA;
    CHECK(eng_start(&c, &e, err, sizeof err) != 0 && strstr(err, "cuda"), "%s", err);
    eng_config_default(&c);
    c.port = 0;
    CHECK(eng_start(&c, &e, err, sizeof err) == 0 && e && eng_port(e) > 0, "%s", err);
    if (e) {
        CHECK(strncmp(eng_url(e), "http://127.0.0.1:", 17) == 0, "url %s", eng_url(e));
        eng_stop(e);
    }
    TEST_MAIN_END();
}
