/* test_outputs_dialects.c: outputs (loadgen/outputs.h) from the streams of
 * the Responses API and SGLang's /generate, as those servers spell them:
 *   - Responses: response.output_text.delta events whose logprobs[] hold
 *     {token, logprob, top_logprobs: [{token, logprob}]} per token;
 *   - SGLang: each event repeats the whole text and meta_info's
 *     output_token_logprobs ([logprob, id, text] triples) and
 *     output_top_logprobs so far, so only the new tokens are taken; a stream
 *     with output_ids alone gives the ids.
 * And the prompt a request sent, kept as JSON (check-decode sends it back),
 * bounded. Each stream is fed whole and split at every 5th byte: the record
 * is the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static ll_rec_outputs *outputs_of(const char *stream, lg_dialect dialect, size_t split)
{
    harness h;
    size_t n = strlen(stream);
    memset(&h, 0, sizeof h);
    lg_delta_init(&h.d);
    h.d.dialect = dialect;
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

static void test_streams(void)
{
    static const struct {
        const char *name, *stream;
        lg_dialect dialect;
        int (*ok)(const ll_rec_outputs *);
    } cases[] = {
        {"responses", k_responses, LG_DIALECT_RESPONSES, responses_ok},
        {"generate", k_generate, LG_DIALECT_GENERATE, generate_ok},
    };
    for (size_t c = 0; c < 2; c++) {
        int all = 1;
        for (size_t split = 0; split < strlen(cases[c].stream) && all; split += 5) {
            ll_rec_outputs *o = outputs_of(cases[c].stream, cases[c].dialect, split);
            all = cases[c].ok(o);
            CHECK(all, "%s outputs, split at %zu", cases[c].name, split);
            ll_rec_outputs_free(o);
        }
    }
    ll_rec_outputs *o = outputs_of(k_generate_ids, LG_DIALECT_GENERATE, 0);
    CHECK(o && o->n_tok == 2 && o->ids && o->ids[0] == 7 && o->ids[1] == 12 && !o->tok && !o->lp,
          "generate with output_ids alone: the ids, once each");
    ll_rec_outputs_free(o);
}

static void test_prompt(void)
{
    static const char body[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \\\"you\\\"\"}],"
                               "\"max_tokens\":4}";
    lg_outputs *o = lg_out_new();
    lg_out_prompt(o, body, sizeof body - 1, 1);
    ll_rec_outputs *r = lg_out_take(o, "p0-s1");
    CHECK(r && r->prompt && strcmp(r->prompt, "[{\"role\":\"user\",\"content\":\"hi \\\"you\\\"\"}]") == 0 &&
              r->prompt_bytes == strlen(r->prompt),
          "chat: the messages as JSON: %s", r && r->prompt ? r->prompt : "(none)");
    ll_rec_outputs_free(r);
    /* over the bound: the size only */
    size_t n = LL_REC_OUTPUT_PROMPT_MAX + 100;
    char *big = malloc(n + 32);
    if (!big)
        return;
    memcpy(big, "{\"prompt\":\"", 11);
    memset(big + 11, 'x', n);
    memcpy(big + 11 + n, "\"}", 3);
    lg_out_prompt(o, big, strlen(big), 0);
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
    test_prompt();
    TEST_MAIN_END();
}
