/* test_cuda_engine_plp.c: prompt logprobs from the engine with backend=cuda,
 * over loopback HTTP, as `loadlaw check-decode` asks for them: a greedy
 * completion of 8 tokens streamed with their logprobs, then the prompt
 * followed by the streamed text, with logprob_start_len and
 * prompt_logprobs, answered 200 with one entry per word (the context's
 * null). Per continuation position |decode lp - prefill lp| (both printed to
 * 4 decimals): healthy tiled at most 0.005 nat (check-decode's tolerance)
 * and every decoded token prefill's first; tiled with attn_fault=
 * skip_last_tile or swap_heads above 0.005 nat at some position. A GPU test
 * ("SKIP: <reason>", exit 77, without a device); test_cuda_engine_plp_cuemu
 * runs it on the CPU (cuemu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

/* 61 words: with the 8 decoded tokens the context passes the top-k of 64,
 * so every tile of the selection holds real rows and skip_last_tile drops
 * a quarter of them (after a 4-word prompt it moved only 0.009 nat, under
 * twice the tolerance) */
#define PROMPT                                                                                                   \
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat and the bird sings in "   \
    "the tall tree by the river where the fish swim under the old stone bridge near the mill and the farmer " \
    "walks home across the green field at dusk with his dog and a basket of apples for market"
#define PROMPT_WORDS 61
#define N_TOK 8
#define TOL_NAT 0.005
#define SPEC "backend=cuda,attn=tiled,heads=16,topk=64,d_model=64,d_ff=1024,vocab=128,capacity=256," \
             "max_running=4,seed=11,attn_fault="

static cJSON *post(const char *base, const char *body, long *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s/v1/completions", base);
    tc_resp r = {0};
    tc_request("POST", url, body, -1, &r);
    *status = r.status;
    cJSON *j = r.body.p ? cJSON_Parse(r.body.p) : NULL;
    tc_resp_free(&r);
    return j;
}

/* The decode: N_TOK tokens' texts (joined into text) and logprobs. */
static int decode(const char *base, char *text, size_t n, double *lp)
{
    char url[256];
    snprintf(url, sizeof url, "%s/v1/completions", base);
    tc_resp r = {0};
    tc_request("POST", url,
               "{\"prompt\":\"" PROMPT "\",\"max_tokens\":8,\"logprobs\":0,\"temperature\":0,\"stream\":true}", -1,
               &r);
    int k = 0;
    text[0] = '\0';
    tc_events ev = {0};
    tc_sse_split(r.body.p ? r.body.p : "", &ev);
    for (size_t i = 0; i < ev.n && k < N_TOK; i++) {
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

/* Max |d| over the continuation (-1 when the answer is not usable); *rank1:
 * positions whose decoded token prefill ranks first. */
static double check(const char *fault, int *rank1)
{
    char spec[256], text[1024], body[2048];
    snprintf(spec, sizeof spec, "%s%s", SPEC, fault);
    eng_engine *e = tc_start(spec);
    double lp[N_TOK], worst = -1, mean = 0;
    *rank1 = 0;
    int k = decode(eng_url(e), text, sizeof text, lp);
    CHECK(k == N_TOK, "%s: %d decoded tokens: '%s'", fault, k, text);
    snprintf(body, sizeof body,
             "{\"prompt\":\"" PROMPT "%s\",\"logprob_start_len\":%d,\"prompt_logprobs\":1,\"max_tokens\":1,"
             "\"temperature\":0}",
             text, PROMPT_WORDS);
    long st = 0;
    cJSON *j = post(eng_url(e), body, &st);
    const cJSON *plp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "prompt_logprobs");
    CHECK(st == 200 && cJSON_GetArraySize(plp) == PROMPT_WORDS + N_TOK,
          "%s: answered (%ld) with one prompt_logprobs entry per word (%d)", fault, st, cJSON_GetArraySize(plp));
    if (st == 200 && k == N_TOK && cJSON_GetArraySize(plp) == PROMPT_WORDS + N_TOK) {
        worst = 0;
        CHECK(cJSON_IsNull(cJSON_GetArrayItem(plp, 0)), "%s: a context position is null", fault);
        for (int i = 0; i < N_TOK; i++) {
            const cJSON *tok = cJSON_GetArrayItem(plp, PROMPT_WORDS + i);
            tok = tok ? tok->child : NULL;
            const cJSON *l = cJSON_GetObjectItem(tok, "logprob"), *rk = cJSON_GetObjectItem(tok, "rank");
            double d = cJSON_IsNumber(l) ? fabs(l->valuedouble - lp[i]) : INFINITY;
            worst = fmax(worst, d);
            mean += d / N_TOK;
            *rank1 += cJSON_IsNumber(rk) && rk->valuedouble == 1;
        }
    }
    printf("  attn_fault=%-14s mean |d| %.3g nat, max |d| %.3g nat, prefill#1 %d/%d\n", fault, mean, worst, *rank1,
           N_TOK);
    cJSON_Delete(j);
    eng_stop(e);
    return worst;
}

int main(void)
{
    char why[400];
    if (cuda_backend_probe(0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return TEST_SKIP;
    }
    int r1 = 0;
    double d = check("none", &r1);
    CHECK(d >= 0 && d <= TOL_NAT, "healthy: decode vs prefill max |d| %.3g <= %.3g", d, TOL_NAT);
    CHECK(r1 == N_TOK, "healthy: every greedy token prefill's first (%d of %d)", r1, N_TOK);
    d = check("skip_last_tile", &r1);
    CHECK(d > TOL_NAT, "skip_last_tile: decode vs prefill max |d| %.3g > %.3g", d, TOL_NAT);
    d = check("swap_heads", &r1);
    CHECK(d > TOL_NAT, "swap_heads: decode vs prefill max |d| %.3g > %.3g", d, TOL_NAT);
    TEST_MAIN_END();
}
