/* test_sse.c: the SSE framer + OpenAI delta interpreter on recorded streams of
 * each dialect, fed whole, split at every byte position, and one byte at a
 * time: the tokens, kinds, usage and classes must be the same every time and
 * equal to the hand-counted values below. */
#include <stdlib.h>
#include <string.h>

#include "lg_internal.h"
#include "sse.h"
#include "testutil.h"

typedef struct harness {
    lg_sse sse;
    lg_delta d;
    int think, answer, chunks, events;
    char kinds[256]; /* one char per token-carrying chunk entry */
} harness;

/* The same accumulation xfer.c does, minus timestamps. */
static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    harness *h = ctx;
    lg_delta_out o;
    h->events++;
    lg_delta_event(&h->d, event, data, len, &o);
    if (o.reclassify) {
        for (int i = 0; i < h->chunks; i++)
            h->kinds[i] = 't';
        h->think += h->answer;
        h->answer = 0;
    }
    if (o.think_tok && h->chunks < 255) {
        h->think += o.think_tok;
        h->kinds[h->chunks++] = 't';
    }
    if (o.answer_tok && h->chunks < 255) {
        h->answer += o.answer_tok;
        h->kinds[h->chunks++] = 'a';
    }
    h->kinds[h->chunks] = '\0';
    return 0;
}

static void run(harness *h, const char *s, size_t step, size_t split)
{
    size_t n = strlen(s);
    memset(h, 0, sizeof *h);
    lg_sse_init(&h->sse, on_event, h);
    lg_delta_init(&h->d);
    if (split) {
        lg_sse_feed(&h->sse, s, split);
        lg_sse_feed(&h->sse, s + split, n - split);
    } else {
        for (size_t i = 0; i < n; i += step)
            lg_sse_feed(&h->sse, s + i, i + step <= n ? step : n - i);
    }
    lg_sse_finish(&h->sse);
    lg_sse_free(&h->sse);
}

typedef struct expect {
    const char *name;
    const char *stream;
    int think, answer, done, error;
    const char *kinds;
    long usage_completion, usage_reasoning;
} expect;

static const expect k_cases[] = {
    {"vllm reasoning, CRLF, continuous usage",
     "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":0}}\r\n\r\n"
     "data: {\"choices\":[{\"delta\":{\"reasoning\":\"Let\",\"content\":null}}],\"usage\":{\"completion_tokens\":1}}\r\n\r\n"
     "data: {\"choices\":[{\"delta\":{\"reasoning\":\" me think\"}}],\"usage\":{\"completion_tokens\":3}}\r\n\r\n"
     "data: {\"choices\":[{\"delta\":{\"reasoning\":null,\"content\":\"Yes\"}}],\"usage\":{\"completion_tokens\":4}}\r\n\r\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" it is\"}}],\"usage\":{\"completion_tokens\":6}}\r\n\r\n"
     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6,\"completion_tokens_details\":{\"reasoning_tokens\":3}}}\r\n\r\n"
     "data: [DONE]\r\n\r\n",
     3, 3, 1, 0, "ttaa", 6, 3},
    {"sglang reasoning_content with nulls, comments, finish chunk",
     ": keep-alive\n\n"
     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":null}}]}\n\n"
     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":null,\"reasoning_content\":\"Hmm\"}}]}\n\n"
     ": ping\n"
     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":null,\"reasoning_content\":\"ok\"}}]}\n\n"
     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":\"42\",\"reasoning_content\":null}}]}\n\n"
     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":null,\"reasoning_content\":null},\"finish_reason\":\"stop\"}]}\n\n"
     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"reasoning_tokens\":2}}\n\n"
     "data: [DONE]\n\n",
     2, 1, 1, 0, "tta", 3, 2},
    {"inline think tags split across chunks",
     "data: {\"choices\":[{\"delta\":{\"content\":\"<thi\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"nk>\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"plan\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"</th\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"ink>Answer\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" <b>x</b>\"}}]}\n\n"
     "data: [DONE]\n\n",
     5, 2, 1, 0, "tttttaa", -1, -1},
    {"R1 template: bare </think>, lone CR line ends",
     "data: {\"choices\":[{\"delta\":{\"content\":\"step1\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"step2\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"</think>\\n\\nDone\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\r\r"
     "data: [DONE]\r\r",
     3, 2, 1, 0, "tttaa", -1, -1},
    {"'<' ending an answer chunk is text, not a thinking token",
     "data: {\"choices\":[{\"delta\":{\"content\":\"if a <\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" b\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"<\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"/\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"p>\"}}]}\n\n"
     "data: [DONE]\n\n",
     0, 5, 1, 0, "aaaaa", -1, -1},
    {"'</' after a think block, continuous usage: answer, not thinking",
     "data: {\"choices\":[{\"delta\":{\"content\":\"<think>hm</think>\"}}],\"usage\":{\"completion_tokens\":3}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"a </\"}}],\"usage\":{\"completion_tokens\":5}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"b>\"}}],\"usage\":{\"completion_tokens\":6}}\n\n"
     "data: [DONE]\n\n",
     3, 3, 1, 0, "taa", -1, -1},
    {"R1 template: text before a bare </think> in its chunk is thinking",
     "data: {\"choices\":[{\"delta\":{\"content\":\"step1\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" step2</think>\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"\\n\\nDone\"}}]}\n\n"
     "data: [DONE]\n\n",
     2, 1, 1, 0, "tta", -1, -1},
    {"multi-token chunks, multi-line data, completions text",
     "data: {\"choices\":[{\"text\":\"one two three\"}],\n"
     "data: \"usage\":{\"completion_tokens\":3}}\n\n"
     "data: {\"choices\":[{\"text\":\" four\"}],\"usage\":{\"completion_tokens\":4}}\n\n"
     "data:{\"choices\":[{\"text\":\" five six\"}],\"usage\":{\"completion_tokens\":6}}\n\n"
     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":6}}\n\n"
     "data: [DONE]\n\n",
     0, 6, 1, 0, "aaa", 6, -1},
    {"nested error event mid-stream",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "data: {\"error\":{\"message\":\"out of KV cache\",\"type\":\"server_error\",\"code\":500}}\n\n",
     0, 1, 0, 1, "a", -1, -1},
    {"flat error event",
     "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"x\"}}]}\n\n"
     "data: {\"object\":\"error\",\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}\n\n"
     "data: [DONE]\n\n",
     1, 0, 1, 1, "t", -1, -1},
    {"SSE error event with a text body",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "event: error\ndata: upstream timed out\n\n",
     0, 1, 0, 1, "a", -1, -1},
    {"cut mid-event: partial line is dropped",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"cont",
     0, 2, 0, 0, "aa", -1, -1},
};

static int same(const harness *h, const expect *e)
{
    return h->think == e->think && h->answer == e->answer && h->d.done == e->done && h->d.error == e->error &&
           strcmp(h->kinds, e->kinds) == 0 && h->d.usage_completion == e->usage_completion &&
           h->d.usage_reasoning == e->usage_reasoning;
}

static void check_case(const expect *e)
{
    harness h;
    size_t n = strlen(e->stream);
    run(&h, e->stream, n, 0);
    CHECK(same(&h, e), "%s (whole): think %d answer %d done %d error %d kinds '%s' usage %lld/%lld", e->name,
          h.think, h.answer, h.d.done, h.d.error, h.kinds, (long long)h.d.usage_completion,
          (long long)h.d.usage_reasoning);
    run(&h, e->stream, 1, 0);
    CHECK(same(&h, e), "%s (1 byte at a time): think %d answer %d kinds '%s'", e->name, h.think, h.answer, h.kinds);
    int bad_split = 0;
    for (size_t i = 1; i < n; i++) {
        run(&h, e->stream, 0, i);
        if (!same(&h, e) && !bad_split) {
            bad_split = 1;
            CHECK(0, "%s (split at %zu): think %d answer %d kinds '%s'", e->name, i, h.think, h.answer, h.kinds);
        }
    }
    CHECK(!bad_split, "%s: every split point", e->name);
}

static const char *case_stream(const char *name)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if (strcmp(k_cases[i].name, name) == 0)
            return k_cases[i].stream;
    return "";
}

static void test_error_messages(void)
{
    harness h;
    run(&h, case_stream("nested error event mid-stream"), 3, 0);
    CHECK(strcmp(h.d.errmsg, "out of KV cache") == 0, "nested error message '%s'", h.d.errmsg);
    run(&h, case_stream("flat error event"), 7, 0);
    CHECK(strcmp(h.d.errmsg, "engine died") == 0, "flat error message '%s'", h.d.errmsg);
    run(&h, case_stream("SSE error event with a text body"), 5, 0);
    CHECK(strcmp(h.d.errmsg, "upstream timed out") == 0, "event: error message '%s'", h.d.errmsg);
    char m[64];
    const char *b = "{\"error\":{\"message\":\"model not found\",\"code\":404}}";
    CHECK(lg_error_message(b, strlen(b), m, sizeof m) && strcmp(m, "model not found") == 0, "http body: %s", m);
    b = "{\"object\":\"error\",\"message\":\"bad max_tokens\"}";
    CHECK(lg_error_message(b, strlen(b), m, sizeof m) && strcmp(m, "bad max_tokens") == 0, "flat body: %s", m);
    CHECK(!lg_error_message("<html>", 6, m, sizeof m), "non-JSON body has no message");
}

static void test_sse_framing(void)
{
    /* event names, id/retry ignored, data without space, empty data line */
    harness h;
    const char *s = "event: message\nid: 7\nretry: 10\ndata\ndata: [DONE]\n\n";
    run(&h, s, 1, 0);
    CHECK(h.events == 1 && h.d.done == 0, "\"\\n[DONE]\" is one event, not [DONE] (events %d)", h.events);
    run(&h, "data: [DONE]\n", 100, 0);
    CHECK(h.d.done == 1, "[DONE] without the blank line is dispatched at the end");
}

/* A server's usage numbers are data, not trusted sizes: 1e300 or 3e9 tokens
 * cast to int64/int is undefined or wraps negative. Out-of-range values count
 * as absent, so the chunk is counted from its text (one answer token each). */
static void test_hostile_usage(void)
{
    harness h;
    const char *s = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":{\"completion_tokens\":1e300}}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"content\":\"yo\"}}],\"usage\":{\"completion_tokens\":3e9}}\n\n"
                    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":-5e300,\"completion_tokens\":1e19}}\n\n"
                    "data: [DONE]\n\n";
    run(&h, s, 1000, 0);
    CHECK(h.answer == 2 && h.think == 0 && h.chunks == 2, "hostile usage: answer %d think %d chunks %d", h.answer,
          h.think, h.chunks);
    CHECK(h.d.usage_completion == -1 && h.d.usage_prompt == -1, "out-of-range usage is absent: %lld %lld",
          (long long)h.d.usage_completion, (long long)h.d.usage_prompt);
}

/* A server that never ends a line (or an event) must not grow the buffers
 * without bound: at C=4096 that is the client's memory. Past the cap the
 * feed fails with LL_ERANGE; a normal stream after it is unaffected. */
static void test_unbounded_line(void)
{
    harness h;
    size_t n = 1 << 20;
    char *junk = malloc(n);
    CHECK(junk != NULL, "malloc");
    if (!junk)
        return;
    memset(junk, 'x', n);
    memcpy(junk, "data: ", 6);
    memset(&h, 0, sizeof h);
    lg_sse_init(&h.sse, on_event, &h);
    lg_delta_init(&h.d);
    int rc = 0;
    size_t fed = 0;
    while (rc == 0 && fed < 2 * (size_t)LG_SSE_MAX_BYTES) {
        rc = lg_sse_feed(&h.sse, fed ? junk + 6 : junk, fed ? n - 6 : n);
        fed += n;
    }
    CHECK(rc == LL_ERANGE && fed <= (size_t)LG_SSE_MAX_BYTES + 2 * n, "endless line: rc %d after %zu bytes", rc,
          fed);
    lg_sse_free(&h.sse);
    /* many data lines, no blank line: the event buffer is capped too */
    memset(&h, 0, sizeof h);
    lg_sse_init(&h.sse, on_event, &h);
    lg_delta_init(&h.d);
    junk[n - 1] = '\n';
    rc = 0;
    fed = 0;
    while (rc == 0 && fed < 2 * (size_t)LG_SSE_MAX_BYTES) {
        rc = lg_sse_feed(&h.sse, junk, n);
        fed += n;
    }
    CHECK(rc == LL_ERANGE && h.events == 0, "endless event: rc %d events %d", rc, h.events);
    lg_sse_free(&h.sse);
    free(junk);
}

/* Records must be valid UTF-8 JSON for any reader (Python's json, jq): a
 * server's message may hold stray bytes, and a message cut at a buffer's end
 * may split a character. Bad bytes become U+FFFD; good UTF-8 passes as is. */
static void test_json_escape_utf8(void)
{
    static const struct {
        const char *in, *want;
    } k[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"a\"b\\c\n\x01</script>", "\"a\\\"b\\\\c\\n\\u0001</script>\""},
        {"bad \xff end", "\"bad \\ufffd end\""},
        {"cut \xe2\x82", "\"cut \\ufffd\\ufffd\""},            /* a character split at the end */
        {"over \xc0\xaf", "\"over \\ufffd\\ufffd\""},           /* overlong '/' */
        {"sur \xed\xa0\x80", "\"sur \\ufffd\\ufffd\\ufffd\""}, /* UTF-16 surrogate */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        ll_buf b = {0};
        CHECK(ll_json_escape(&b, k[i].in) == 0, "escape %zu", i);
        CHECK(b.p && strcmp(b.p, k[i].want) == 0, "escape %zu: got %s want %s", i, b.p ? b.p : "", k[i].want);
        ll_buf_free(&b);
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        check_case(&k_cases[i]);
    test_error_messages();
    test_sse_framing();
    test_hostile_usage();
    test_unbounded_line();
    test_json_escape_utf8();
    TEST_MAIN_END();
}
