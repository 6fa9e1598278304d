/* test_engine_prompt_lp.c: prompt logprobs on the bundled engine (synthetic
 * backend, real HTTP): a request's decoded tokens sent back after its prompt
 * are scored position by position as decode scored them (completions with
 * logprob_start_len, chat with continue_final_message), in vLLM's spelling
 * and places; context positions are null; a request without
 * prompt_logprobs is answered as before; and the refusals name the
 * parameter (stream, range, a continuation word that is no token, a chat
 * continuation without an assistant message). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tclient.h"
#include "testutil.h"

#define PROMPT "the quick brown fox"

static char g_url[128];

static cJSON *post(const char *path, const char *body, long *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", g_url, path);
    tc_resp r = {0};
    tc_request("POST", url, body, -1, &r);
    *status = r.status;
    cJSON *j = r.body.p ? cJSON_Parse(r.body.p) : NULL;
    tc_resp_free(&r);
    return j;
}

/* The decode: 6 tokens' texts (joined into text) and logprobs from a stream. */
static int decode(char *text, size_t n, double *lp)
{
    char url[256];
    snprintf(url, sizeof url, "%s/v1/completions", g_url);
    tc_resp r = {0};
    tc_request("POST", url, "{\"prompt\":\"" PROMPT "\",\"max_tokens\":6,\"logprobs\":0,\"stream\":true}", -1, &r);
    int k = 0;
    text[0] = '\0';
    tc_events ev = {0};
    tc_sse_split(r.body.p ? r.body.p : "", &ev);
    for (size_t i = 0; i < ev.n && k < 6; i++) {
        cJSON *e = cJSON_Parse(ev.data[i]);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
        const cJSON *t = cJSON_GetObjectItem(ch, "text");
        const cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "token_logprobs"), 0);
        if (cJSON_IsString(t) && cJSON_IsNumber(l)) {
            strncat(text, t->valuestring, n - strlen(text) - 1);
            lp[k++] = l->valuedouble;
        }
        cJSON_Delete(e);
    }
    tc_events_free(&ev);
    tc_resp_free(&r);
    return k;
}

static void test_completions(void)
{
    char text[512], body[1024];
    double lp[6];
    CHECK(decode(text, sizeof text, lp) == 6, "six decoded tokens: '%s'", text);
    snprintf(body, sizeof body,
             "{\"prompt\":\"" PROMPT "%s\",\"logprob_start_len\":4,\"prompt_logprobs\":2,\"max_tokens\":1}", text);
    long st = 0;
    cJSON *j = post("/v1/completions", body, &st);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    const cJSON *plp = cJSON_GetObjectItem(ch, "prompt_logprobs");
    CHECK(st == 200 && cJSON_GetArraySize(plp) == 10, "a choice's prompt_logprobs, one per prompt word (%ld, %d)", st,
          cJSON_GetArraySize(plp));
    for (int i = 0; i < 4; i++)
        CHECK(cJSON_IsNull(cJSON_GetArrayItem(plp, i)), "context position %d is null", i);
    for (int i = 0; i < 6; i++) {
        const cJSON *e = cJSON_GetArrayItem(plp, 4 + i), *tok = e ? e->child : NULL;
        const cJSON *l = cJSON_GetObjectItem(tok, "logprob"), *rk = cJSON_GetObjectItem(tok, "rank");
        CHECK(cJSON_IsNumber(l) && fabs(l->valuedouble - lp[i]) <= 6e-5, "position %d: prefill %g, decode %g", i,
              l ? l->valuedouble : NAN, lp[i]);
        CHECK(cJSON_IsNumber(rk) && rk->valuedouble == 1 && cJSON_GetArraySize(e) == 2,
              "position %d: the decoded token ranks first, with its one alternative", i);
        CHECK(cJSON_IsString(cJSON_GetObjectItem(tok, "decoded_token")), "position %d: decoded_token", i);
    }
    cJSON_Delete(j);
    j = post("/v1/completions", "{\"prompt\":\"" PROMPT "\",\"max_tokens\":2}", &st);
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(st == 200 && !cJSON_GetObjectItem(ch, "prompt_logprobs") && !cJSON_GetObjectItem(j, "prompt_logprobs"),
          "not asked: no prompt_logprobs");
    cJSON_Delete(j);
}

static void test_chat(void)
{
    long st = 0;
    cJSON *j = post("/v1/chat/completions",
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"},{\"role\":\"assistant\","
                    "\"content\":\" the law of\"}],\"continue_final_message\":true,\"prompt_logprobs\":0,\"max_tokens\":1}",
                    &st);
    const cJSON *plp = cJSON_GetObjectItem(j, "prompt_logprobs");
    CHECK(st == 200 && cJSON_GetArraySize(plp) == 5, "chat: top-level prompt_logprobs over 5 words (%ld)", st);
    CHECK(cJSON_IsNull(cJSON_GetArrayItem(plp, 1)) && cJSON_IsObject(cJSON_GetArrayItem(plp, 2)),
          "chat: the user's words null, the assistant's scored");
    const cJSON *first = cJSON_GetArrayItem(plp, 2);
    CHECK(first && first->child && strcmp(first->child->string, "0") == 0, "chat: 'the' is token 0");
    cJSON_Delete(j);
    j = post("/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}],\"prompt_logprobs\":1,\"max_tokens\":1}", &st);
    plp = cJSON_GetObjectItem(j, "prompt_logprobs");
    CHECK(st == 200 && cJSON_GetArraySize(plp) == 2 && cJSON_IsNull(plp->child), "chat without a continuation: all null");
    cJSON_Delete(j);
}

static void refused(const char *path, const char *body, const char *param, const char *what)
{
    long st = 0;
    cJSON *j = post(path, body, &st);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "param");
    CHECK(st == 400 && cJSON_IsString(p) && strcmp(p->valuestring, param) == 0, "%s: 400 naming %s (%ld)", what, param, st);
    cJSON_Delete(j);
}

int main(void)
{
    eng_engine *e = tc_start("backend=synthetic,law=1+0n,time_scale=0.01,seed=5");
    if (!e)
        return 1;
    snprintf(g_url, sizeof g_url, "%s", eng_url(e));
    test_completions();
    test_chat();
    refused("/v1/completions", "{\"prompt\":\"a b\",\"prompt_logprobs\":1,\"stream\":true}", "prompt_logprobs", "stream");
    refused("/v1/completions", "{\"prompt\":\"a b\",\"prompt_logprobs\":21}", "prompt_logprobs", "k = 21");
    refused("/v1/completions", "{\"prompt\":\"a b c\",\"logprob_start_len\":1,\"prompt_logprobs\":1}", "prompt",
            "a continuation word that is no token");
    refused("/v1/completions", "{\"prompt\":[\"a\",\"b\"],\"logprob_start_len\":1}", "logprob_start_len",
            "logprob_start_len on a prompt array");
    refused("/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":true}",
            "continue_final_message", "no assistant message to continue");
    eng_stop(e);
    TEST_MAIN_END();
}
