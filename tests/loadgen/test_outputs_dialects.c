/* test_outputs_dialects.c: outputs (loadgen/outputs.h) from the streams of
 * the Responses API, SGLang's /generate and llama.cpp's llama-server, as
 * those servers spell them:
 *   - Responses: response.output_text.delta events whose logprobs[] hold
 *     {token, logprob, top_logprobs: [{token, logprob}]} per token;
 *   - SGLang: each event repeats the whole text and meta_info's
 *     output_token_logprobs ([logprob, id, text] triples) and
 *     output_top_logprobs so far, so only the new tokens are taken; a stream
 *     with output_ids alone gives the ids;
 *   - llama.cpp: chat and /v1/completions chunks whose logprobs.content[]
 *     entries carry the token's "id" (and each alternative's), which give
 *     the ids; a token id that is no whole number in range is no id.
 * And the prompt a request sent, kept as JSON (check-decode sends it back),
 * bounded: chat's messages, completions' prompt, /generate's text. Each
 * stream is fed whole and split at every byte (every 5th for the long
 * ones): the record is the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "outputs.h"
#include "sse.h"
#include "testutil.h"

typedef struct harness {
    lg_sse sse;
    lg_delta d;
} harness;

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    harness *h = ctx;
    lg_delta_out o;
    lg_delta_event(&h->d, event, data, len, &o);
    return 0;
}

static ll_rec_outputs *outputs_of(const char *stream, scn_endpoint dialect, size_t split)
{
    harness h;
    size_t n = strlen(stream);
    memset(&h, 0, sizeof h);
    lg_delta_init(&h.d);
    h.d.api = lg_api_of(dialect);
    h.d.out = lg_out_new();
    lg_sse_init(&h.sse, on_event, &h);
    if (split && split < n) {
        lg_sse_feed(&h.sse, stream, split);
        lg_sse_feed(&h.sse, stream + split, n - split);
    } else {
        lg_sse_feed(&h.sse, stream, n);
    }
    lg_sse_finish(&h.sse);
    ll_rec_outputs *o = h.d.out ? lg_out_take(h.d.out, "p0-s1") : NULL;
    lg_sse_free(&h.sse);
    lg_delta_free(&h.d);
    return o;
}

static const char k_responses[] =
    "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n"
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m1\","
    "\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\",\"sequence_number\":3,\"logprobs\":[{\"token\":"
    "\"Hel\",\"logprob\":-0.25,\"top_logprobs\":[{\"token\":\"Hel\",\"logprob\":-0.25},{\"token\":\"Hi\","
    "\"logprob\":-2}]}]}\n\n"
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m1\","
    "\"output_index\":0,\"content_index\":0,\"delta\":\"lo!\",\"sequence_number\":4,\"logprobs\":[{\"token\":"
    "\"lo\",\"logprob\":-0.5,\"top_logprobs\":[]},{\"token\":\"!\",\"logprob\":-1.5,\"top_logprobs\":[]}]}\n\n"
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":"
    "3,\"output_tokens\":3}}}\n\n";

static int responses_ok(const ll_rec_outputs *o)
{
    return o && o->n_tok == 3 && o->tok && strcmp(o->tok[0], "Hel") == 0 && strcmp(o->tok[2], "!") == 0 &&
           o->lp[1] == -0.5 && o->top_k == 2 && strcmp(o->top_tok[1], "Hi") == 0 && o->top_lp[1] == -2 &&
           !o->top_tok[2] && !o->ids && o->text && strcmp(o->text, "Hello!") == 0;
}

/* SGLang: cumulative text and logprobs, the id second, the text third. */
static const char k_generate[] =
    "data: {\"text\":\" a\",\"output_ids\":[7],\"meta_info\":{\"prompt_tokens\":4,\"completion_tokens\":1,"
    "\"output_token_logprobs\":[[-0.125,7,\" a\"]],\"output_top_logprobs\":[[[-0.125,7,\" a\"],[-3,9,\" b\"]]]}}\n\n"
    "data: {\"text\":\" a cat\",\"output_ids\":[7,12],\"meta_info\":{\"prompt_tokens\":4,\"completion_tokens\":2,"
    "\"output_token_logprobs\":[[-0.125,7,\" a\"],[-0.75,12,\" cat\"]],\"output_top_logprobs\":[[[-0.125,7,\" a\"],"
    "[-3,9,\" b\"]],[[-0.75,12,\" cat\"],[-1,13,\" dog\"]]],\"finish_reason\":{\"type\":\"length\",\"length\":2}}}\n\n"
    "data: [DONE]\n\n";

static int generate_ok(const ll_rec_outputs *o)
{
    return o && o->n_tok == 2 && o->ids && o->ids[0] == 7 && o->ids[1] == 12 && o->tok &&
           strcmp(o->tok[1], " cat") == 0 && o->lp[0] == -0.125 && o->lp[1] == -0.75 && o->top_k == 2 &&
           strcmp(o->top_tok[3], " dog") == 0 && o->top_lp[3] == -1 && o->text && strcmp(o->text, " a cat") == 0;
}

static const char k_generate_ids[] =
    "data: {\"text\":\" a\",\"output_ids\":[7],\"meta_info\":{\"completion_tokens\":1}}\n\n"
    "data: {\"text\":\" a cat\",\"output_ids\":[7,12],\"meta_info\":{\"completion_tokens\":2}}\n\n"
    "data: [DONE]\n\n";

/* llama.cpp llama-server (the tree of llama-cpp-python 0.3.36, built by
 * scripts/llama_server.sh, with tests/interop/make_model.py's model),
 * /v1/chat/completions with "logprobs":true,"top_logprobs":2,"max_tokens":2,
 * "stream":true and include_usage, recorded byte for byte. The shapes:
 * tools/server/server-task.cpp server_task_result_cmpl_partial::
 * to_json_oaicompat_chat (a role-only delta first, then one chunk per token
 * whose last delta carries logprobs.content of probs_vector_to_json: {id,
 * token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}]}) and
 * server_task_result_cmpl_final::to_json_oaicompat_chat_stream (an empty
 * delta with the finish reason, then usage with timings). */
static const char k_llama_chat[] =
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],"
    "\"created\":1796208141,\"id\":\"chatcmpl-gpiv6PcO7vXMJEx4nPGcIES71XiJrnxk\",\"model\":\"tiny.gguf\",\"system_f"
    "ingerprint\":\"b1-0c1e570\",\"object\":\"chat.completion.chunk\"}\n\n"
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"n\"},\"logprobs\":{\"content"
    "\":[{\"id\":286,\"token\":\"n\",\"bytes\":[110],\"logprob\":-3.8073973655700684,\"top_logprobs\":[{\"id\":286,"
    "\"token\":\"n\",\"bytes\":[110],\"logprob\":-3.8073973655700684},{\"id\":711,\"token\":\" could\",\"bytes\":[3"
    "2,99,111,117,108,100],\"logprob\":-3.8203179836273193}]}]}}],\"created\":1796208141,\"id\":\"chatcmpl-gpiv6PcO"
    "7vXMJEx4nPGcIES71XiJrnxk\",\"model\":\"tiny.gguf\",\"system_fingerprint\":\"b1-0c1e570\",\"object\":\"chat.com"
    "pletion.chunk\"}\n\n"
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\" woma\"},\"logprobs\":{\"cont"
    "ent\":[{\"id\":964,\"token\":\" woma\",\"bytes\":[32,119,111,109,97],\"logprob\":-2.699415683746338,\"top_logp"
    "robs\":[{\"id\":964,\"token\":\" woma\",\"bytes\":[32,119,111,109,97],\"logprob\":-2.699415683746338},{\"id\":"
    "521,\"token\":\" trace\",\"bytes\":[32,116,114,97,99,101],\"logprob\":-3.989572048187256}]}]}}],\"created\":17"
    "96208141,\"id\":\"chatcmpl-gpiv6PcO7vXMJEx4nPGcIES71XiJrnxk\",\"model\":\"tiny.gguf\",\"system_fingerprint\":"
    "\"b1-0c1e570\",\"object\":\"chat.completion.chunk\"}\n\n"
    "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"created\":1796208141,\"id\":\"c"
    "hatcmpl-gpiv6PcO7vXMJEx4nPGcIES71XiJrnxk\",\"model\":\"tiny.gguf\",\"system_fingerprint\":\"b1-0c1e570\",\"obj"
    "ect\":\"chat.completion.chunk\"}\n\n"
    "data: {\"choices\":[],\"created\":1796208141,\"id\":\"chatcmpl-gpiv6PcO7vXMJEx4nPGcIES71XiJrnxk\",\"model\":\""
    "tiny.gguf\",\"system_fingerprint\":\"b1-0c1e570\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion"
    "_tokens\":2,\"prompt_tokens\":42,\"total_tokens\":44,\"prompt_tokens_details\":{\"cached_tokens\":0}},\"timing"
    "s\":{\"cache_n\":0,\"prompt_n\":42,\"prompt_ms\":49.688,\"prompt_per_token_ms\":1.1830476190476191,\"prompt_pe"
    "r_second\":845.2745129608759,\"predicted_n\":2,\"predicted_ms\":5.548,\"predicted_per_token_ms\":5.548,\"predi"
    "cted_per_second\":180.2451333813987}}\n\n"
    "data: [DONE]\n\n";

static int llama_chat_ok(const ll_rec_outputs *o)
{
    return o && o->n_tok == 2 && o->ids && o->ids[0] == 286 && o->ids[1] == 964 && o->tok &&
           strcmp(o->tok[0], "n") == 0 && strcmp(o->tok[1], " woma") == 0 && o->lp[0] == -3.8073973655700684 &&
           o->lp[1] == -2.699415683746338 && o->top_k == 2 && strcmp(o->top_tok[1], " could") == 0 &&
           o->top_lp[1] == -3.8203179836273193 && strcmp(o->top_tok[3], " trace") == 0 && o->text &&
           strcmp(o->text, "n woma") == 0;
}

/* The same server's /v1/completions with "logprobs":2, streamed, recorded:
 * server-task.cpp server_task_result_cmpl_partial::to_json_oaicompat
 * (choices[].text, and logprobs.content in chat's shape, not OpenAI
 * completions' tokens[]; the last chunk's logprobs null). */
static const char k_llama_cmpl[] =
    "data: {\"choices\":[{\"text\":\" sell\",\"index\":0,\"logprobs\":{\"content\":[{\"id\":1300,\"token\":\" sell"
    "\",\"bytes\":[32,115,101,108,108],\"logprob\":-3.049898624420166,\"top_logprobs\":[{\"id\":1300,\"token\":\" s"
    "ell\",\"bytes\":[32,115,101,108,108],\"logprob\":-3.049898624420166},{\"id\":1709,\"token\":\"lz\",\"bytes\":["
    "108,122],\"logprob\":-4.02208948135376}]}]},\"finish_reason\":null}],\"created\":1796208141,\"model\":\"tiny.g"
    "guf\",\"system_fingerprint\":\"b1-0c1e570\",\"object\":\"text_completion\",\"id\":\"chatcmpl-WUJtgNi3ZxgjIfwbz"
    "bTv8vnyy2sSuwxI\"}\n\n"
    "data: {\"choices\":[{\"text\":\" musi\",\"index\":0,\"logprobs\":{\"content\":[{\"id\":1389,\"token\":\" musi"
    "\",\"bytes\":[32,109,117,115,105],\"logprob\":-3.8386783599853516,\"top_logprobs\":[{\"id\":1389,\"token\":\" "
    "musi\",\"bytes\":[32,109,117,115,105],\"logprob\":-3.8386783599853516},{\"id\":1940,\"token\":\"uw\",\"bytes\""
    ":[117,119],\"logprob\":-3.947202444076538}]}]},\"finish_reason\":null}],\"created\":1796208141,\"model\":\"tin"
    "y.gguf\",\"system_fingerprint\":\"b1-0c1e570\",\"object\":\"text_completion\",\"id\":\"chatcmpl-WUJtgNi3ZxgjIf"
    "wbzbTv8vnyy2sSuwxI\"}\n\n"
    "data: {\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}],\"created\":17"
    "96208141,\"model\":\"tiny.gguf\",\"system_fingerprint\":\"b1-0c1e570\",\"object\":\"text_completion\",\"usage"
    "\":{\"completion_tokens\":2,\"prompt_tokens\":4,\"total_tokens\":6,\"prompt_tokens_details\":{\"cached_tokens"
    "\":1}},\"id\":\"chatcmpl-WUJtgNi3ZxgjIfwbzbTv8vnyy2sSuwxI\",\"timings\":{\"cache_n\":1,\"prompt_n\":3,\"prompt"
    "_ms\":10.054,\"prompt_per_token_ms\":3.3513333333333333,\"prompt_per_second\":298.38870101452153,\"predicted_n"
    "\":2,\"predicted_ms\":6.32,\"predicted_per_token_ms\":6.32,\"predicted_per_second\":158.2278481012658}}\n\n"
    "data: [DONE]\n\n";

static int llama_cmpl_ok(const ll_rec_outputs *o)
{
    return o && o->n_tok == 2 && o->ids && o->ids[0] == 1300 && o->ids[1] == 1389 && o->tok &&
           strcmp(o->tok[1], " musi") == 0 && o->lp[1] == -3.8386783599853516 && o->top_k == 2 &&
           strcmp(o->top_tok[3], "uw") == 0 && o->text && strcmp(o->text, " sell musi") == 0;
}

/* Ids a parser must not take: a token id of 1e300 or -3 or 2.5 (no id, not
 * cast), and an "id" beside vLLM's token_ids (which give the ids, once). */
static const char k_bad_ids[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"id\":1e300,"
    "\"token\":\"a\",\"logprob\":-1},{\"id\":-3,\"token\":\"b\",\"logprob\":-1},{\"id\":2.5,\"token\":\"c\","
    "\"logprob\":-1}]}}]}\n\n";
static const char k_both_ids[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":[5],\"logprobs\":{\"content\":"
    "[{\"id\":5,\"token\":\"a\",\"logprob\":-1}]}}]}\n\n";

static void test_ids(void)
{
    ll_rec_outputs *o = outputs_of(k_bad_ids, SCN_ENDPOINT_CHAT, 0);
    CHECK(o && o->n_tok == 3 && !o->ids && o->lp[2] == -1, "ids out of range or fractional: none taken");
    ll_rec_outputs_free(o);
    o = outputs_of(k_both_ids, SCN_ENDPOINT_CHAT, 0);
    CHECK(o && o->n_tok == 1 && o->ids && o->ids[0] == 5, "token_ids beside an id: the id once");
    ll_rec_outputs_free(o);
}

static void test_streams(void)
{
    static const struct {
        const char *name, *stream;
        scn_endpoint dialect;
        int (*ok)(const ll_rec_outputs *);
    } cases[] = {
        {"responses", k_responses, SCN_ENDPOINT_RESPONSES, responses_ok},
        {"generate", k_generate, SCN_ENDPOINT_GENERATE, generate_ok},
        {"llama.cpp chat", k_llama_chat, SCN_ENDPOINT_CHAT, llama_chat_ok},
        {"llama.cpp completions", k_llama_cmpl, SCN_ENDPOINT_CHAT, llama_cmpl_ok},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int all = 1;
        size_t step = c < 2 ? 5 : 1;
        for (size_t split = 0; split < strlen(cases[c].stream) && all; split += step) {
            ll_rec_outputs *o = outputs_of(cases[c].stream, cases[c].dialect, split);
            all = cases[c].ok(o);
            CHECK(all, "%s outputs, split at %zu", cases[c].name, split);
            ll_rec_outputs_free(o);
        }
    }
    ll_rec_outputs *o = outputs_of(k_generate_ids, SCN_ENDPOINT_GENERATE, 0);
    CHECK(o && o->n_tok == 2 && o->ids && o->ids[0] == 7 && o->ids[1] == 12 && !o->tok && !o->lp,
          "generate with output_ids alone: the ids, once each");
    ll_rec_outputs_free(o);
}

static void test_prompt(void)
{
    static const char body[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \\\"you\\\"\"}],"
                               "\"max_tokens\":4}";
    lg_outputs *o = lg_out_new();
    lg_out_prompt(o, body, sizeof body - 1, lg_api_of(SCN_ENDPOINT_CHAT)->prompt_key);
    ll_rec_outputs *r = lg_out_take(o, "p0-s1");
    CHECK(r && r->prompt && strcmp(r->prompt, "[{\"role\":\"user\",\"content\":\"hi \\\"you\\\"\"}]") == 0 &&
              r->prompt_bytes == strlen(r->prompt),
          "chat: the messages as JSON: %s", r && r->prompt ? r->prompt : "(none)");
    ll_rec_outputs_free(r);
    static const char gen[] = "{\"text\":\"[3-s1] Once upon\",\"sampling_params\":{\"max_new_tokens\":4},"
                              "\"stream\":true}";
    lg_out_prompt(o, gen, sizeof gen - 1, lg_api_of(SCN_ENDPOINT_GENERATE)->prompt_key);
    r = lg_out_take(o, "p0-s1");
    CHECK(r && r->prompt && strcmp(r->prompt, "\"[3-s1] Once upon\"") == 0, "generate: the text as JSON: %s",
          r && r->prompt ? r->prompt : "(none)");
    ll_rec_outputs_free(r);
    /* over the bound: the size only */
    size_t n = LL_REC_OUTPUT_PROMPT_MAX + 100;
    char *big = malloc(n + 32);
    if (!big)
        return;
    memcpy(big, "{\"prompt\":\"", 11);
    memset(big + 11, 'x', n);
    memcpy(big + 11 + n, "\"}", 3);
    lg_out_prompt(o, big, strlen(big), lg_api_of(SCN_ENDPOINT_COMPLETIONS)->prompt_key);
    r = lg_out_take(o, "p0-s1");
    CHECK(r && !r->prompt && r->prompt_bytes == n + 2, "a prompt over 64 KiB: its size, not its text (%zu)",
          r ? r->prompt_bytes : 0);
    ll_rec_outputs_free(r);
    free(big);
    lg_out_free(o);
}

int main(void)
{
    test_streams();
    test_ids();
    test_prompt();
    TEST_MAIN_END();
}
