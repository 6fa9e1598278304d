/* test_sse.c: the SSE framer + OpenAI delta interpreter on recorded streams of
 * each dialect, fed whole, split at every byte position, and one byte at a
 * time: the tokens, kinds, usage and classes must be the same every time and
 * equal to the hand-counted values below. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "jtape.h"
#include "lg_internal.h"
#include "outputs.h"
#include "sse.h"
#include "testutil.h"

typedef struct harness {
    lg_sse sse;
    lg_delta d;
    int think, answer, chunks, events;
    char kinds[256]; /* one char per token-carrying chunk entry */
    long think_bytes, answer_bytes;
    char errmsg[LG_DELTA_ERRMSG_BYTES]; /* run(): the delta's message, kept after it is freed */
} harness;

/* The same accumulation xfer.c does, minus timestamps. */
static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    harness *h = ctx;
    lg_delta_out o;
    h->events++;
    lg_delta_event(&h->d, event, data, len, &o);
    h->think_bytes += o.think_bytes;
    h->answer_bytes += o.answer_bytes;
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

static void run(harness *h, const char *s, size_t step, size_t split, scn_endpoint dialect)
{
    size_t n = strlen(s);
    memset(h, 0, sizeof *h);
    lg_sse_init(&h->sse, on_event, h);
    lg_delta_init(&h->d);
    h->d.api = lg_api_of(dialect);
    if (split) {
        lg_sse_feed(&h->sse, s, split);
        lg_sse_feed(&h->sse, s + split, n - split);
    } else {
        for (size_t i = 0; i < n; i += step)
            lg_sse_feed(&h->sse, s + i, i + step <= n ? step : n - i);
    }
    lg_sse_finish(&h->sse);
    lg_sse_free(&h->sse);
    snprintf(h->errmsg, sizeof h->errmsg, "%s", lg_delta_errmsg(&h->d));
    lg_delta_free(&h->d); /* its counters stay readable */
}

typedef struct expect {
    const char *name;
    const char *stream;
    int think, answer, done, error;
    const char *kinds;
    long usage_completion, usage_reasoning;
    scn_endpoint dialect;  /* the API; chat unless given */
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
     3, 3, 1, 0, "ttaa", 6, 3, SCN_ENDPOINT_CHAT},
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
     2, 1, 1, 0, "tta", 3, 2, SCN_ENDPOINT_CHAT},
    {"inline think tags split across chunks",
     "data: {\"choices\":[{\"delta\":{\"content\":\"<thi\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"nk>\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"plan\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"</th\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"ink>Answer\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" <b>x</b>\"}}]}\n\n"
     "data: [DONE]\n\n",
     5, 2, 1, 0, "tttttaa", -1, -1, SCN_ENDPOINT_CHAT},
    {"R1 template: bare </think>, lone CR line ends",
     "data: {\"choices\":[{\"delta\":{\"content\":\"step1\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"step2\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"</think>\\n\\nDone\"}}]}\r\r"
     "data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\r\r"
     "data: [DONE]\r\r",
     3, 2, 1, 0, "tttaa", -1, -1, SCN_ENDPOINT_CHAT},
    {"'<' ending an answer chunk is text, not a thinking token",
     "data: {\"choices\":[{\"delta\":{\"content\":\"if a <\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" b\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"<\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"/\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"p>\"}}]}\n\n"
     "data: [DONE]\n\n",
     0, 5, 1, 0, "aaaaa", -1, -1, SCN_ENDPOINT_CHAT},
    {"vLLM holding back an incomplete UTF-8 character: a text-less chunk whose count grows is a token",
     "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"completion_tokens\":0}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"caf\"}}],\"usage\":{\"completion_tokens\":1}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"\xc3\xa9!\"}}],\"usage\":{\"completion_tokens\":3}}\n\n"
     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n"
     "data: [DONE]\n\n",
     0, 3, 1, 0, "aaa", 3, -1, SCN_ENDPOINT_CHAT},
    {"a text-less token while reasoning is thinking",
     "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hm\"}}],\"usage\":{\"completion_tokens\":1}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}],\"usage\":{\"completion_tokens\":3}}\n\n"
     "data: [DONE]\n\n",
     2, 1, 1, 0, "tta", -1, -1, SCN_ENDPOINT_CHAT},
    {"continuous usage that falls back once: no token counted twice",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":1}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" b\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" c\"}}],\"usage\":{\"completion_tokens\":1}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" d\"}}],\"usage\":{\"completion_tokens\":4}}\n\n"
     "data: [DONE]\n\n",
     0, 4, 1, 0, "aaa", -1, -1, SCN_ENDPOINT_CHAT},
    {"'</' after a think block, continuous usage: answer, not thinking",
     "data: {\"choices\":[{\"delta\":{\"content\":\"<think>hm</think>\"}}],\"usage\":{\"completion_tokens\":3}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"a </\"}}],\"usage\":{\"completion_tokens\":5}}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"b>\"}}],\"usage\":{\"completion_tokens\":6}}\n\n"
     "data: [DONE]\n\n",
     3, 3, 1, 0, "taa", -1, -1, SCN_ENDPOINT_CHAT},
    {"R1 template: text before a bare </think> in its chunk is thinking",
     "data: {\"choices\":[{\"delta\":{\"content\":\"step1\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\" step2</think>\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"\\n\\nDone\"}}]}\n\n"
     "data: [DONE]\n\n",
     2, 1, 1, 0, "tta", -1, -1, SCN_ENDPOINT_CHAT},
    {"multi-token chunks, multi-line data, completions text",
     "data: {\"choices\":[{\"text\":\"one two three\"}],\n"
     "data: \"usage\":{\"completion_tokens\":3}}\n\n"
     "data: {\"choices\":[{\"text\":\" four\"}],\"usage\":{\"completion_tokens\":4}}\n\n"
     "data:{\"choices\":[{\"text\":\" five six\"}],\"usage\":{\"completion_tokens\":6}}\n\n"
     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":6}}\n\n"
     "data: [DONE]\n\n",
     0, 6, 1, 0, "aaa", 6, -1, SCN_ENDPOINT_CHAT},
    {"nested error event mid-stream",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "data: {\"error\":{\"message\":\"out of KV cache\",\"type\":\"server_error\",\"code\":500}}\n\n",
     0, 1, 0, 1, "a", -1, -1, SCN_ENDPOINT_CHAT},
    {"flat error event",
     "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"x\"}}]}\n\n"
     "data: {\"object\":\"error\",\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}\n\n"
     "data: [DONE]\n\n",
     1, 0, 1, 1, "t", -1, -1, SCN_ENDPOINT_CHAT},
    {"SSE error event with a text body",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "event: error\ndata: upstream timed out\n\n",
     0, 1, 0, 1, "a", -1, -1, SCN_ENDPOINT_CHAT},
    {"responses: reasoning_text and output_text deltas, usage in response.completed",
     "event: response.created\n"
     "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null,\"error\":null}}\n\n"
     "event: response.output_item.added\n"
     "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\"}}\n\n"
     "event: response.reasoning_text.delta\n"
     "data: {\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Let me\"}\n\n"
     "event: response.reasoning_text.delta\n"
     "data: {\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" think\"}\n\n"
     "event: response.reasoning_text.done\n"
     "data: {\"type\":\"response.reasoning_text.done\",\"item_id\":\"rs_1\",\"text\":\"Let me think\"}\n\n"
     "event: response.output_text.delta\n"
     "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Yes\"}\n\n"
     "event: response.output_text.delta\n"
     "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\" it is\"}\n\n"
     "event: response.output_text.done\n"
     "data: {\"type\":\"response.output_text.done\",\"item_id\":\"msg_1\",\"text\":\"Yes it is\"}\n\n"
     "event: response.completed\n"
     "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":6,\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":11}}}\n\n",
     2, 2, 1, 0, "ttaa", 6, 3, SCN_ENDPOINT_RESPONSES},
    {"responses: cut at max_output_tokens ends in response.incomplete (complete stream)",
     "data: {\"type\":\"response.output_text.delta\",\"delta\":\"a b\"}\r\n\r\n"
     "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":2,\"output_tokens\":2}}}\r\n\r\n",
     0, 1, 1, 0, "a", 2, -1, SCN_ENDPOINT_RESPONSES},
    {"responses: error event",
     "event: response.output_text.delta\n"
     "data: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n"
     "event: error\n"
     "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"overloaded\",\"param\":null}\n\n",
     0, 1, 0, 1, "a", -1, -1, SCN_ENDPOINT_RESPONSES},
    {"responses: response.failed",
     "data: {\"type\":\"response.reasoning_text.delta\",\"delta\":\"x\"}\n\n"
     "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"engine died\"}}}\n\n",
     1, 0, 0, 1, "t", -1, -1, SCN_ENDPOINT_RESPONSES},
    {"generate: cumulative text, meta_info counts, inline think",
     "data: {\"text\":\"<think>hm\",\"meta_info\":{\"id\":\"g1\",\"prompt_tokens\":4,\"completion_tokens\":2,\"finish_reason\":null}}\n\n"
     "data: {\"text\":\"<think>hm ok</think>\",\"meta_info\":{\"id\":\"g1\",\"prompt_tokens\":4,\"completion_tokens\":4,\"finish_reason\":null}}\n\n"
     "data: {\"text\":\"<think>hm ok</think>Yes it\",\"meta_info\":{\"id\":\"g1\",\"prompt_tokens\":4,\"completion_tokens\":6,\"finish_reason\":null}}\n\n"
     "data: {\"text\":\"<think>hm ok</think>Yes it is\",\"meta_info\":{\"id\":\"g1\",\"prompt_tokens\":4,\"completion_tokens\":7,\"finish_reason\":{\"type\":\"length\",\"length\":7}}}\n\n"
     "data: [DONE]\n\n",
     4, 3, 1, 0, "ttaa", 7, -1, SCN_ENDPOINT_GENERATE},
    {"generate: no meta counts, one token per event; error object",
     "data: {\"text\":\"a\",\"meta_info\":{}}\n\n"
     "data: {\"text\":\"ab\",\"meta_info\":{}}\n\n"
     "data: {\"error\":{\"message\":\"aborted\"}}\n\n",
     0, 2, 0, 1, "aa", -1, -1, SCN_ENDPOINT_GENERATE},
    {"cut mid-event: partial line is dropped",
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
     "data: {\"choices\":[{\"delta\":{\"cont",
     0, 2, 0, 0, "aa", -1, -1, SCN_ENDPOINT_CHAT},
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
    run(&h, e->stream, n, 0, e->dialect);
    CHECK(same(&h, e), "%s (whole): think %d answer %d done %d error %d kinds '%s' usage %lld/%lld", e->name,
          h.think, h.answer, h.d.done, h.d.error, h.kinds, (long long)h.d.usage_completion,
          (long long)h.d.usage_reasoning);
    run(&h, e->stream, 1, 0, e->dialect);
    CHECK(same(&h, e), "%s (1 byte at a time): think %d answer %d kinds '%s'", e->name, h.think, h.answer, h.kinds);
    int bad_split = 0;
    for (size_t i = 1; i < n; i++) {
        run(&h, e->stream, 0, i, e->dialect);
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
    run(&h, case_stream("nested error event mid-stream"), 3, 0, SCN_ENDPOINT_CHAT);
    CHECK(strcmp(h.errmsg, "out of KV cache") == 0, "nested error message '%s'", h.errmsg);
    run(&h, case_stream("flat error event"), 7, 0, SCN_ENDPOINT_CHAT);
    CHECK(strcmp(h.errmsg, "engine died") == 0, "flat error message '%s'", h.errmsg);
    run(&h, case_stream("SSE error event with a text body"), 5, 0, SCN_ENDPOINT_CHAT);
    CHECK(strcmp(h.errmsg, "upstream timed out") == 0, "event: error message '%s'", h.errmsg);
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
    run(&h, s, 1, 0, SCN_ENDPOINT_CHAT);
    CHECK(h.events == 1 && h.d.done == 0, "\"\\n[DONE]\" is one event, not [DONE] (events %d)", h.events);
    run(&h, "data: [DONE]\n", 100, 0, SCN_ENDPOINT_CHAT);
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
    run(&h, s, 1000, 0, SCN_ENDPOINT_CHAT);
    CHECK(h.answer == 2 && h.think == 0 && h.chunks == 2, "hostile usage: answer %d think %d chunks %d", h.answer,
          h.think, h.chunks);
    CHECK(h.d.usage_completion == -1 && h.d.usage_prompt == -1, "out-of-range usage is absent: %lld %lld",
          (long long)h.d.usage_completion, (long long)h.d.usage_prompt);
}

/* What servers say about a request beside its tokens: llama.cpp's timings
 * and finish reason on its last chunk (tools/server/server-task.cpp), a
 * usage chunk's cached tokens (OpenAI/vLLM/SGLang spelling), vLLM's
 * per-request metrics, SGLang's meta_info (finish_reason as an object). */
static void test_server_said(void)
{
    harness h;
    const char *llama =
        "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Hi\"}}],"
        "\"object\":\"chat.completion.chunk\"}\n\n"
        "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"created\":1764640000,"
        "\"model\":\"tiny\",\"object\":\"chat.completion.chunk\",\"timings\":{\"cache_n\":3,\"prompt_n\":41,"
        "\"prompt_ms\":12.5,\"prompt_per_token_ms\":0.3,\"prompt_per_second\":3280,\"predicted_n\":2,"
        "\"predicted_ms\":41.6,\"predicted_per_token_ms\":20.8,\"predicted_per_second\":48.1}}\n\n"
        "data: {\"choices\":[],\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":44,\"total_tokens\":46}}\n\n"
        "data: [DONE]\n\n";
    run(&h, llama, 7, 0, SCN_ENDPOINT_CHAT);
    CHECK(strcmp(h.d.finish, "length") == 0 && h.d.srv.present && h.d.srv.prompt_ms == 12.5 &&
              h.d.srv.decode_ms == 41.6 && h.d.srv.tpot_ms == 20.8 && h.d.srv.prompt_n == 41 &&
              h.d.srv.decode_n == 2 && h.d.usage_cached == 3 && isnan(h.d.srv.ttft_ms),
          "llama.cpp: finish %s, timings %g/%g/%g, cached %lld", h.d.finish, h.d.srv.prompt_ms, h.d.srv.decode_ms,
          h.d.srv.tpot_ms, (long long)h.d.usage_cached);
    const char *vllm =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":1,"
        "\"prompt_tokens_details\":{\"cached_tokens\":256}},\"metrics\":{\"time_to_first_token_ms\":35.5,"
        "\"queue_time_ms\":2.25,\"generation_time_ms\":0,\"mean_itl_ms\":7.5,\"tokens_per_second\":133}}\n\n"
        "data: [DONE]\n\n";
    run(&h, vllm, 1000, 0, SCN_ENDPOINT_CHAT);
    CHECK(strcmp(h.d.finish, "stop") == 0 && h.d.usage_cached == 256 && h.d.srv.present && h.d.srv.ttft_ms == 35.5 &&
              h.d.srv.queue_ms == 2.25 && h.d.srv.tpot_ms == 7.5 && h.d.srv.decode_ms == 0 && h.d.srv.prompt_n == -1,
          "vLLM: finish %s, cached %lld, ttft %g queue %g itl %g", h.d.finish, (long long)h.d.usage_cached,
          h.d.srv.ttft_ms, h.d.srv.queue_ms, h.d.srv.tpot_ms);
    const char *sgl = "data: {\"text\":\"a\",\"meta_info\":{\"prompt_tokens\":9,\"completion_tokens\":1,"
                      "\"cached_tokens\":0,\"finish_reason\":null}}\n\n"
                      "data: {\"text\":\"ab\",\"meta_info\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
                      "\"cached_tokens\":8,\"finish_reason\":{\"type\":\"length\",\"length\":2}}}\n\n"
                      "data: [DONE]\n\n";
    run(&h, sgl, 1000, 0, SCN_ENDPOINT_GENERATE);
    CHECK(strcmp(h.d.finish, "length") == 0 && h.d.usage_cached == 8 && !h.d.srv.present,
          "SGLang /generate: finish %s, cached %lld", h.d.finish, (long long)h.d.usage_cached);
    /* nothing said: nothing kept; a hostile value is not a count */
    run(&h,
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,"
        "\"prompt_tokens_details\":{\"cached_tokens\":-4}},\"timings\":{\"prompt_ms\":1e300}}\n\n",
        1000, 0, SCN_ENDPOINT_CHAT);
    CHECK(h.d.finish[0] == '\0' && h.d.usage_cached == -1 && isnan(h.d.srv.prompt_ms),
          "hostile or absent: finish '%s', cached %lld, prompt_ms %g", h.d.finish, (long long)h.d.usage_cached,
          h.d.srv.prompt_ms);
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

/* Text bytes by kind (the weights of attribution) and the kept text (for a
 * tokenizer): a chunk that ends the thinking and begins the answer splits
 * its bytes; tags are thinking bytes but not kept text. */
static void test_bytes_and_text(void)
{
    static const char k[] =
        "data: {\"choices\":[{\"delta\":{\"content\":\"<think>t0 t1 \"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"t2 </think>a0 \"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"a1 a2 \"}}]}\n\n"
        "data: [DONE]\n\n";
    for (size_t split = 0; split < sizeof k - 1; split++) {
        harness h;
        memset(&h, 0, sizeof h);
        lg_sse_init(&h.sse, on_event, &h);
        lg_delta_init(&h.d);
        h.d.keep_text = 1;
        lg_sse_feed(&h.sse, k, split);
        lg_sse_feed(&h.sse, k + split, sizeof k - 1 - split);
        lg_sse_finish(&h.sse);
        int ok = strcmp(h.kinds, "ttaa") == 0 && h.think_bytes == 7 + 6 + 3 + 8 && h.answer_bytes == 3 + 6 &&
                 h.d.think_text.len == 9 && memcmp(h.d.think_text.p, "t0 t1 t2 ", 9) == 0 &&
                 h.d.answer_text.len == 9 && memcmp(h.d.answer_text.p, "a0 a1 a2 ", 9) == 0;
        CHECK(ok, "split %zu: kinds '%s' bytes %ld/%ld text '%.*s' / '%.*s'", split, h.kinds, h.think_bytes,
              h.answer_bytes, (int)h.d.think_text.len, h.d.think_text.p ? h.d.think_text.p : "",
              (int)h.d.answer_text.len, h.d.answer_text.p ? h.d.answer_text.p : "");
        lg_sse_free(&h.sse);
        lg_delta_free(&h.d);
        if (!ok)
            break;
    }
}

static void test_dialect_errors(void)
{
    harness h;
    run(&h, case_stream("responses: error event"), 1000, 0, SCN_ENDPOINT_RESPONSES);
    CHECK(strcmp(h.errmsg, "overloaded") == 0, "responses error message '%s'", h.errmsg);
    run(&h, case_stream("responses: response.failed"), 1000, 0, SCN_ENDPOINT_RESPONSES);
    CHECK(strcmp(h.errmsg, "engine died") == 0, "response.failed message '%s'", h.errmsg);
    run(&h, case_stream("generate: no meta counts, one token per event; error object"), 1000, 0,
        SCN_ENDPOINT_GENERATE);
    CHECK(strcmp(h.errmsg, "aborted") == 0, "generate error message '%s'", h.errmsg);
}

/* The hooks run.c and worker.c call: the request path and extra headers. */
static void test_request_hooks(void)
{
    scn_scenario *s = NULL;
    CHECK(scn_new(&s) == 0, "scn_new");
    if (!s)
        return;
    s->endpoint = SCN_ENDPOINT_GENERATE;
    CHECK(strcmp(lg_request_path(s), scn_endpoint_path(SCN_ENDPOINT_GENERATE)) == 0, "default path '%s'",
          lg_request_path(s));
    CHECK(scn_set_str(&s->endpoint_path, "/openai/v1/chat/completions") == 0, "set path");
    CHECK(strcmp(lg_request_path(s), "/openai/v1/chat/completions") == 0, "custom path '%s'", lg_request_path(s));
    char *h[] = {"X-Trace: 1", "api-key: abc"};
    char **saved = s->headers;
    size_t saved_n = s->n_headers;
    s->headers = h;
    s->n_headers = 2;
    struct curl_slist *list = curl_slist_append(NULL, "Accept: text/event-stream");
    CHECK(list && lg_xfer_headers(s, &list) == 0, "headers appended");
    int n = 0, found = 0;
    for (const struct curl_slist *l = list; l; l = l->next, n++)
        found += strcmp(l->data, "X-Trace: 1") == 0 || strcmp(l->data, "api-key: abc") == 0;
    CHECK(n == 3 && found == 2, "header list %d entries, %d of ours", n, found);
    curl_slist_free_all(list);
    s->headers = saved;
    s->n_headers = saved_n;
    scn_free(s);
}

/* The fast scanner against cJSON: where it accepts, the tapes are equal; what
 * it refuses is refused on purpose (cJSON's business), and every event it
 * refuses is counted in slow_events while the result is the full parser's. */
static void test_fast_path(void)
{
    static const struct {
        const char *json;
        int fast; /* 1: the scanner takes it */
    } k[] = {
        {"{\"choices\":[{\"delta\":{\"content\":\"a\\n\\\"b\\\\\\/\\t\"}}],\"usage\":{\"completion_tokens\":12}}", 1},
        {" \t\r\n{\"a\":[true,false,null,{},[]],\"b\":-0,\"a\":\"dup\"} trailing", 1},
        {"{\"n\":123456789012345}", 1},
        {"{\"n\":1234567890123456}", 0},  /* more than 15 digits */
        {"{\"n\":1.5}", 0},               /* not an integer */
        {"{\"n\":1e3}", 0},
        {"{\"s\":\"\\u00e9\"}", 0},   /* \u escape */
        {"{\"k\\n\":1}", 0},            /* escaped key */
        {"{\"s\":\"a\001b\"}", 0},     /* raw control byte */
        {"{\"a\":1\001}", 0},            /* cJSON's whitespace, not JSON's */
        {"[1,2]", 0},                      /* not an object */
        {"{\"a\":1,}", 0},               /* not JSON at all */
        {"{\"a\":tru}", 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        lg_jtape fast, full;
        lg_jtape_init(&fast);
        lg_jtape_init(&full);
        int f = lg_jscan(&fast, k[i].json, strlen(k[i].json)) == 0;
        int ok = lg_jfull(&full, k[i].json, strlen(k[i].json)) == 0;
        CHECK(f == k[i].fast, "fast path %s: %s", f ? "took" : "refused", k[i].json);
        CHECK(!f || (ok && lg_jtape_equal(&fast, &full)), "fast and full tapes differ: %s", k[i].json);
        lg_jtape_free(&fast);
        lg_jtape_free(&full);
    }
    /* The same chunk with and without a \u escape: equal results, one slow event. */
    harness h;
    run(&h,
        "data: {\"choices\":[{\"delta\":{\"content\":\"caf\\u00e9\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"caf\xc3\xa9\"}}],\"usage\":{\"completion_tokens\":4}}\n\n"
        "data: not json\n\ndata: [DONE]\n\n",
        1000, 0, SCN_ENDPOINT_CHAT);
    CHECK(h.answer == 4 && h.answer_bytes == 10 && h.d.slow_events == 2 && h.d.bad_events == 1,
          "escape fallback: answer %d bytes %ld slow %d bad %d", h.answer, h.answer_bytes, h.d.slow_events,
          h.d.bad_events);
}

/* What a lenient streaming client makes of strings that cJSON alone got
 * wrong (jtape.h): a raw NUL, a \u0000 escape and lone surrogates become
 * U+FFFD and the rest of the text is kept; a raw control byte is kept and
 * counted; the token is counted either way. Each event is followed by a plain
 * one, fed whole and split at every byte (NULs included: lengths, not
 * strlen). */
typedef struct heard {
    int answer, bad, ctl_events, ctl_byte;
    char text[128];
    size_t text_len;
} heard;

static void hear(const char *s, size_t n, size_t split, heard *out)
{
    harness h;
    memset(&h, 0, sizeof h);
    lg_sse_init(&h.sse, on_event, &h);
    lg_delta_init(&h.d);
    h.d.keep_text = 1;
    lg_sse_feed(&h.sse, s, split);
    lg_sse_feed(&h.sse, s + split, n - split);
    lg_sse_finish(&h.sse);
    memset(out, 0, sizeof *out);
    out->answer = h.answer;
    out->bad = h.d.bad_events;
    out->ctl_events = h.d.ctl_events;
    out->ctl_byte = h.d.ctl_events ? h.d.ctl_byte : -1;
    out->text_len = h.d.answer_text.len < sizeof out->text ? h.d.answer_text.len : sizeof out->text;
    if (out->text_len)
        memcpy(out->text, h.d.answer_text.p, out->text_len);
    lg_sse_free(&h.sse);
    lg_delta_free(&h.d);
}

#define BYTES(lit) lit, sizeof lit - 1
#define FFFD "\xef\xbf\xbd"

static void test_hostile_strings(void)
{
    static const struct {
        const char *name;
        const char *data;
        size_t len;
        const char *text; /* the answer text kept, the plain event's "z" included */
        size_t text_len;
        int answer, bad, ctl_byte; /* ctl_byte -1: no raw control byte */
    } k[] = {
        {"raw NUL", BYTES("{\"choices\":[{\"delta\":{\"content\":\"ab\0cd\"}}]}"), BYTES("ab" FFFD "cdz"), 2, 0, 0},
        {"\\u0000", BYTES("{\"choices\":[{\"delta\":{\"content\":\"ab\\u0000cd\"}}]}"), BYTES("ab" FFFD "cdz"), 2, 0,
         -1},
        {"lone high surrogate", BYTES("{\"choices\":[{\"delta\":{\"content\":\"x\\ud800y\"}}]}"), BYTES("x" FFFD "yz"),
         2, 0, -1},
        {"lone low, high before a non-low, a pair, a reversed pair",
         BYTES("{\"choices\":[{\"delta\":{\"content\":\"\\udc00|\\ud800\\u0041|\\ud83d\\ude00|\\ude00\\ud83d\"}}]}"),
         BYTES(FFFD "|" FFFD "A|\xf0\x9f\x98\x80|" FFFD FFFD "z"), 2, 0, -1},
        {"lone surrogate beside a logprob (a number cJSON reads)",
         BYTES("{\"choices\":[{\"delta\":{\"content\":\"q\\ud800\"},\"logprobs\":{\"content\":[{\"token\":\"q\","
               "\"logprob\":-0.25}]}}]}"),
         BYTES("q" FFFD "z"), 2, 0, -1},
        {"raw tab", BYTES("{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}"), BYTES("a\tbz"), 2, 0, '\t'},
        {"a UTF-8 BOM before a lone surrogate", BYTES("\xef\xbb\xbf{\"choices\":[{\"delta\":{\"content\":\"\\udfff\"}}]}"),
         BYTES(FFFD "z"), 2, 0, -1},
        {"\\u without four hex digits", BYTES("{\"choices\":[{\"delta\":{\"content\":\"a\\u00zzb\"}}]}"), BYTES("z"),
         1, 1, -1},
    };
    static const char tail[] = "\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"z\"}}]}\n\ndata: [DONE]\n\n";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char s[512];
        size_t n = 0;
        memcpy(s, "data: ", 6);
        n = 6;
        memcpy(s + n, k[i].data, k[i].len);
        n += k[i].len;
        memcpy(s + n, tail, sizeof tail - 1);
        n += sizeof tail - 1;
        for (size_t split = 0; split < n; split++) {
            heard h;
            hear(s, n, split, &h);
            int ok = h.answer == k[i].answer && h.bad == k[i].bad && h.text_len == k[i].text_len &&
                     memcmp(h.text, k[i].text, h.text_len) == 0 && h.ctl_byte == k[i].ctl_byte &&
                     h.ctl_events == (k[i].ctl_byte >= 0);
            CHECK(ok, "%s (split at %zu): answer %d bad %d ctl %d (0x%02x) text '%.*s' (%zu bytes)", k[i].name,
                  split, h.answer, h.bad, h.ctl_events, (unsigned)h.ctl_byte, (int)h.text_len, h.text, h.text_len);
            if (!ok)
                break;
        }
    }
    char m[64] = "";
    const char *b = "{\"error\":{\"message\":\"bad \\ud800 input\",\"code\":400}}";
    CHECK(lg_error_message(b, strlen(b), m, sizeof m) && strcmp(m, "bad " FFFD " input") == 0,
          "an error body with a lone surrogate gives its message: '%s'", m);
}

/* Outputs (outputs.h) from a completions stream in OpenAI's spelling
 * (logprobs.tokens / token_logprobs / top_logprobs as {token: logprob}) and
 * from a chat stream of vLLM's return_tokens_as_token_ids ("token_id:N");
 * the text is kept whole below its bound and hashed. Fed split at every byte,
 * the record is the same. */
static ll_rec_outputs *outputs_of(const char *stream, size_t split)
{
    harness h;
    size_t n = strlen(stream);
    memset(&h, 0, sizeof h);
    lg_delta_init(&h.d);
    h.d.out = lg_out_new();
    lg_sse_init(&h.sse, on_event, &h);
    if (split && split < n) {
        lg_sse_feed(&h.sse, stream, split);
        lg_sse_feed(&h.sse, stream + split, n - split);
    } else {
        lg_sse_feed(&h.sse, stream, n);
    }
    lg_sse_finish(&h.sse);
    ll_rec_outputs *o = h.d.out ? lg_out_take(h.d.out, "p1-s2") : NULL;
    lg_sse_free(&h.sse);
    lg_delta_free(&h.d);
    return o;
}

static void test_outputs(void)
{
    const char *cmpl =
        "data: {\"choices\":[{\"index\":0,\"text\":\"Hi\",\"logprobs\":{\"tokens\":[\"Hi\"],\"token_logprobs\":[-0.5],"
        "\"top_logprobs\":[{\"Hi\":-0.5,\"Yo\":-1.25}],\"text_offset\":[0]},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"text\":\" there\",\"logprobs\":{\"tokens\":[\" the\",\"re\"],"
        "\"token_logprobs\":[-0.25,-0.125],\"top_logprobs\":[{\" the\":-0.25},{\"re\":-0.125,\"ir\":-3}]},"
        "\"finish_reason\":\"length\"}]}\n\n"
        "data: [DONE]\n\n";
    size_t n = strlen(cmpl);
    int all_same = 1;
    for (size_t split = 0; split < n; split += 7) {
        ll_rec_outputs *o = outputs_of(cmpl, split);
        int ok = o && o->n_tok == 3 && o->tok && strcmp(o->tok[1], " the") == 0 && o->lp[2] == -0.125 &&
                 o->top_k == 2 && strcmp(o->top_tok[1], "Yo") == 0 && o->top_lp[1] == -1.25 && !o->top_tok[3] &&
                 strcmp(o->top_tok[5], "ir") == 0 && !o->ids && o->text && strcmp(o->text, "Hi there") == 0 &&
                 o->text_bytes == 8 && o->text_hash == ll_fnv64(LL_FNV64_INIT, "Hi there", 8);
        if (!ok && all_same)
            CHECK(ok, "completions outputs at split %zu", split);
        all_same &= ok;
        ll_rec_outputs_free(o);
    }
    CHECK(all_same, "completions logprobs: tokens, logprobs, top-k rows of 2, 1 and 2, text and hash");
    const char *chat =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"token\":"
        "\"token_id:17\",\"logprob\":-0.5,\"top_logprobs\":[]}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"logprobs\":{\"content\":[{\"token\":"
        "\"token_id:4\",\"logprob\":-1,\"top_logprobs\":[]}]}}]}\n\ndata: [DONE]\n\n";
    ll_rec_outputs *o = outputs_of(chat, 0);
    CHECK(o && o->n_tok == 2 && o->ids && o->ids[0] == 17 && o->ids[1] == 4 && o->top_k == 0 && o->text &&
              strcmp(o->text, "ab") == 0,
          "token_id:N tokens give ids");
    ll_rec_outputs_free(o);
}

int main(void)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        check_case(&k_cases[i]);
    test_error_messages();
    test_sse_framing();
    test_hostile_usage();
    test_server_said();
    test_unbounded_line();
    test_json_escape_utf8();
    test_bytes_and_text();
    test_dialect_errors();
    test_request_hooks();
    test_fast_path();
    test_hostile_strings();
    test_outputs();
    TEST_MAIN_END();
}
